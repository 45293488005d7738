// SPDX-License-Identifier: MIT
/*
 * busy: N threads (or N processes) that only compute, for the sampler's tick benchmarks: more
 * runnable threads than CPUs, so an interrupted thread may wait for a CPU before it stops.
 *
 * Usage: busy threads N SECONDS   one process, N threads spinning in spin() until the deadline
 *        busy procs N SECONDS     the process and N-1 forked children, one thread each
 * Prints "ready" once every thread or child runs; each thread prints nothing else; the process
 * exits 0 after SECONDS (children are waited for).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double deadline;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

__attribute__((noinline)) static uint64_t spin(uint64_t x)
{
	while (now_s() < deadline)
		for (int i = 0; i < 100000; i++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
		}
	return x;
}

static void *thread_main(void *arg)
{
	uint64_t x = spin((uint64_t)(uintptr_t)arg | 1);

	return (void *)(uintptr_t)(x & 1);
}

int main(int argc, char **argv)
{
	int n = argc > 2 ? atoi(argv[2]) : 0;
	pthread_t th[256];

	if (argc != 4 || n < 1 || n > 256 || (strcmp(argv[1], "threads") && strcmp(argv[1], "procs"))) {
		fprintf(stderr, "usage: busy threads|procs N(1-256) SECONDS\n");
		return 2;
	}
	deadline = now_s() + atof(argv[3]);
	if (!strcmp(argv[1], "procs")) {
		for (int i = 1; i < n; i++) {
			pid_t p = fork();

			if (p == 0) {
				spin((uint64_t)i);
				_exit(0);
			}
		}
		printf("ready\n");
		fflush(stdout);
		spin(7);
		while (wait(NULL) > 0)
			;
		return 0;
	}
	for (int i = 0; i < n; i++)
		pthread_create(&th[i], NULL, thread_main, (void *)(uintptr_t)(i + 1));
	printf("ready\n");
	fflush(stdout);
	for (int i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	return 0;
}
