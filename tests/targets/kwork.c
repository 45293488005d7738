// SPDX-License-Identifier: MIT
/*
 * kwork: a program that spends much of its CPU time in the kernel, under a known user frame, for
 * the kernel-stack tests: touch_pages() maps fresh anonymous memory and writes one byte per page
 * (each write faults, and the kernel zeroes the page: clear_page_*), user_work() spins in user
 * space. Both run for about the same CPU time.
 *
 * Usage: kwork SECONDS
 * Prints "truth kernel=K" at the end: the share of its CPU time spent in the kernel (getrusage:
 * system / (user + system)).
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>

#define MAP_BYTES (64u << 20)

static volatile uint64_t sink;

static double mono(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

__attribute__((noinline)) static void touch_pages(void) /* HOT:touch_pages */
{
	volatile char *m = mmap(NULL, MAP_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
				-1, 0);

	if (m == MAP_FAILED)
		exit(1);
	for (size_t off = 0; off < MAP_BYTES; off += 4096)
		m[off] = 1;
	munmap((void *)m, MAP_BYTES);
}

__attribute__((noinline)) static void user_work(void) /* HOT:user_work */
{
	uint64_t x = 0;

	for (uint64_t i = 0; i < 20000000; i++)
		x = x * 6364136223846793005ull + i;
	sink += x;
}

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? atof(argv[1]) : 2, t0 = mono();
	struct rusage ru;

	while (mono() - t0 < seconds) {
		touch_pages();
		user_work();
	}
	getrusage(RUSAGE_SELF, &ru);
	double u = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6;
	double s = (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
	printf("truth kernel=%.3f\n", s / (u + s));
	return 0;
}
