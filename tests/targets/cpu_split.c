// SPDX-License-Identifier: MIT
/*
 * cpu_split: a C test target with two hot functions in a known CPU split.
 *
 * Usage: cpu_split [SECONDS [EXIT_CODE]]   (default 4 s, exit 0)
 *
 * The main loop alternates hot_a (7 work units) and hot_b (3 work units), so by design hot_a gets
 * about 70 % of the CPU. The design is not trusted: each call is timed with
 * CLOCK_THREAD_CPUTIME_ID and the measured truth is printed at the end, e.g.
 *   split hot_a=0.703 hot_b=0.297
 *   cpu_s hot_a=2.801 hot_b=1.183
 * Tests compare a profile's sample split with that line. SIGINT/SIGTERM stop the loop early: the
 * program then prints "cpu_split: got signal N", the split so far, and exits 128+N.
 * Markers: BEGIN:/END: bound each function's body, LOOP: and HOT: tag its loop header and body
 * (the loop's code is attributed to those two lines); tests read the line numbers from this
 * file instead of hard-coding them.
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static volatile sig_atomic_t got_signal;

static void on_signal(int sig)
{
	got_signal = sig;
}

static double thread_cpu_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static double mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* One work unit: UNIT_ITERS dependent integer steps (a few tens of µs); no closed form. */
#define UNIT_ITERS 40000

__attribute__((noinline, noclone)) uint64_t hot_a(uint64_t x, int units);
__attribute__((noinline, noclone)) uint64_t hot_b(uint64_t x, int units);

uint64_t hot_a(uint64_t x, int units)
{ /* BEGIN:hot_a */
	for (long i = 0; i < (long)units * UNIT_ITERS; i++) { /* LOOP:hot_a */
		x ^= x << 13; x ^= x >> 7; x ^= x << 17; x += 0x9e3779b97f4a7c15ull; /* HOT:hot_a */
	}
	return x;
} /* END:hot_a */

uint64_t hot_b(uint64_t x, int units)
{ /* BEGIN:hot_b */
	for (long i = 0; i < (long)units * UNIT_ITERS; i++) { /* LOOP:hot_b */
		x = x * 6364136223846793005ull + 1442695040888963407ull; x ^= x >> 29; /* HOT:hot_b */
	}
	return x;
} /* END:hot_b */

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? atof(argv[1]) : 4.0;
	int code = argc > 2 ? atoi(argv[2]) : 0;
	double ta = 0, tb = 0, t0, t1, t2, end;
	uint64_t x = 88172645463325252ull;
	long iters = 0;
	struct sigaction sa = { .sa_handler = on_signal };

	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	setvbuf(stdout, NULL, _IOLBF, 0);
	end = mono_s() + seconds;
	while (!got_signal && mono_s() < end) {
		t0 = thread_cpu_s();
		x = hot_a(x, 7);
		t1 = thread_cpu_s();
		x = hot_b(x, 3);
		t2 = thread_cpu_s();
		ta += t1 - t0;
		tb += t2 - t1;
		iters++;
	}
	if (got_signal)
		printf("cpu_split: got signal %d\n", (int)got_signal);
	if (ta + tb > 0)
		printf("split hot_a=%.3f hot_b=%.3f\n", ta / (ta + tb), tb / (ta + tb));
	printf("cpu_s hot_a=%.3f hot_b=%.3f\n", ta, tb);
	printf("iterations %ld result %llx\n", iters, (unsigned long long)x);
	return got_signal ? 128 + (int)got_signal : code;
}
