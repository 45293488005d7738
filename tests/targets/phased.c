// SPDX-License-Identifier: MIT
/*
 * phased: a C test target whose work follows its own CPU clock, the worst case of a sampler on a
 * fixed period of CPU time.
 *
 * Usage: phased PERIOD_US [SECONDS]   (default 3 s)
 *
 * In every PERIOD_US of the thread's CPU time (CLOCK_THREAD_CPUTIME_ID), the first quarter runs
 * hot_a and the rest hot_b, in small steps (a few tens of us each). A sampler that fires every
 * PERIOD_US of the same CPU time lands at one point of that cycle in every sample, and reads a
 * split of 0 or 1 for hot_a; one whose periods vary reads about a quarter. The truth is measured,
 * not assumed: each step is timed with CLOCK_THREAD_CPUTIME_ID and the split printed at the end in
 * cpu_split's format:
 *   split hot_a=0.251 hot_b=0.749
 *   cpu_s hot_a=0.752 hot_b=2.245
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static int64_t clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* One step: STEP_ITERS dependent integer steps (~10-30 us here); no closed form. */
#define STEP_ITERS 20000

__attribute__((noinline, noclone)) uint64_t hot_a(uint64_t x);
__attribute__((noinline, noclone)) uint64_t hot_b(uint64_t x);

uint64_t hot_a(uint64_t x)
{
	for (long i = 0; i < STEP_ITERS; i++) {
		x ^= x << 13; x ^= x >> 7; x ^= x << 17; x += 0x9e3779b97f4a7c15ull;
	}
	return x;
}

uint64_t hot_b(uint64_t x)
{
	for (long i = 0; i < STEP_ITERS; i++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull; x ^= x >> 29;
	}
	return x;
}

int main(int argc, char **argv)
{
	int64_t period = argc > 1 ? atoll(argv[1]) * 1000 : 0;
	double seconds = argc > 2 ? atof(argv[2]) : 3.0;
	int64_t end, t0, t1, ta = 0, tb = 0;
	uint64_t x = 88172645463325252ull;

	if (period <= 0) {
		fprintf(stderr, "usage: phased PERIOD_US [SECONDS]\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	end = clock_ns(CLOCK_MONOTONIC) + (int64_t)(seconds * 1e9);
	while (clock_ns(CLOCK_MONOTONIC) < end) {
		t0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
		if (t0 % period < period / 4) {
			x = hot_a(x);
			t1 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
			ta += t1 - t0;
		} else {
			x = hot_b(x);
			t1 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
			tb += t1 - t0;
		}
	}
	if (ta + tb > 0)
		printf("split hot_a=%.3f hot_b=%.3f\n", (double)ta / (double)(ta + tb),
		       (double)tb / (double)(ta + tb));
	printf("cpu_s hot_a=%.3f hot_b=%.3f\n", ta / 1e9, tb / 1e9);
	printf("result %llx\n", (unsigned long long)x);
	return 0;
}
