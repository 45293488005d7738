// SPDX-License-Identifier: MIT
/*
 * deep30: a 30-frame native stack for the sampling-cost benchmark, and slowdown probes.
 *
 * Built -O2 -g -fomit-frame-pointer (mk/targets.mk), so a profiler must unwind it with CFI.
 * main calls f01, which calls f02 ... f27, which calls leaf: 28 distinct noinline functions, each
 * with a small volatile stack array used after the call (no tail calls, no folding), plus main and
 * __libc_start_call_main: 30 frames (32 with __libc_start_main and _start).
 *
 * Usage:
 *   deep30 spin SECONDS       spin in leaf for SECONDS (wall), print "spin done"
 *   deep30 work N             do N fixed work units in leaf, print
 *                             "work units=N wall_s=F cpu_s=F"
 *   deep30 gaps SECONDS US    spin in leaf reading CLOCK_MONOTONIC for SECONDS; every gap between
 *                             two reads longer than US microseconds counts as lost time; print
 *                             "gaps n=N lost_s=F wall_s=F lost_pct=F short_pct=F" (short: the
 *                             time lost in gaps under 1 ms)
 * The default is "spin 4".
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static double cpu_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

enum mode { SPIN, WORK, GAPS };

struct job {
	enum mode mode;
	double seconds;
	long units;
	double gap_s;
	/* results */
	long gaps;
	double lost_s;
	double short_s; /* lost in gaps under 1 ms: interrupts and the sampler's stops, not the
			 * time slices other programs took (those are longer) */
	uint64_t x;
};

__attribute__((noinline, noclone)) long leaf(struct job *j);

long leaf(struct job *j)
{
	uint64_t x = 0x2545F4914F6CDD1Dull;

	if (j->mode == WORK) {
		for (long u = 0; u < j->units; u++)
			for (int i = 0; i < 100000; i++) {
				x ^= x << 13; x ^= x >> 7; x ^= x << 17;
			}
	} else if (j->mode == SPIN) {
		double end = mono_s() + j->seconds;

		while (mono_s() < end)
			for (int i = 0; i < 10000; i++) {
				x ^= x << 13; x ^= x >> 7; x ^= x << 17;
			}
	} else {
		struct timespec a, b;
		double end, prev, now;

		clock_gettime(CLOCK_MONOTONIC, &a);
		prev = a.tv_sec + a.tv_nsec / 1e9;
		end = prev + j->seconds;
		do {
			clock_gettime(CLOCK_MONOTONIC, &b);
			now = b.tv_sec + b.tv_nsec / 1e9;
			if (now - prev > j->gap_s) {
				j->gaps++;
				j->lost_s += now - prev;
				if (now - prev < 1e-3)
					j->short_s += now - prev;
			}
			prev = now;
		} while (now < end);
	}
	j->x = x;
	return (long)(x & 1);
}

/* f(N) calls f(N+1); the volatile array is read after the call, which rules out a tail call. */
#define CHAIN(name, next, k)                                                               \
	__attribute__((noinline, noclone)) long name(struct job *j);                       \
	long name(struct job *j)                                                           \
	{                                                                                  \
		volatile long pad[4] = { k, k + 1, k + 2, k + 3 };                         \
		long r = next(j);                                                          \
		return r + pad[(r + k) & 3];                                               \
	}

CHAIN(f27, leaf, 27) CHAIN(f26, f27, 26) CHAIN(f25, f26, 25) CHAIN(f24, f25, 24)
CHAIN(f23, f24, 23) CHAIN(f22, f23, 22) CHAIN(f21, f22, 21) CHAIN(f20, f21, 20)
CHAIN(f19, f20, 19) CHAIN(f18, f19, 18) CHAIN(f17, f18, 17) CHAIN(f16, f17, 16)
CHAIN(f15, f16, 15) CHAIN(f14, f15, 14) CHAIN(f13, f14, 13) CHAIN(f12, f13, 12)
CHAIN(f11, f12, 11) CHAIN(f10, f11, 10) CHAIN(f09, f10, 9) CHAIN(f08, f09, 8)
CHAIN(f07, f08, 7) CHAIN(f06, f07, 6) CHAIN(f05, f06, 5) CHAIN(f04, f05, 4)
CHAIN(f03, f04, 3) CHAIN(f02, f03, 2) CHAIN(f01, f02, 1)

int main(int argc, char **argv)
{
	struct job j = { .mode = SPIN, .seconds = 4.0 };
	const char *mode = argc > 1 ? argv[1] : "spin";
	double w0, c0, w1, c1;
	long r;

	if (strcmp(mode, "spin") == 0) {
		j.seconds = argc > 2 ? atof(argv[2]) : 4.0;
	} else if (strcmp(mode, "work") == 0) {
		j.mode = WORK;
		j.units = argc > 2 ? atol(argv[2]) : 10000;
	} else if (strcmp(mode, "gaps") == 0) {
		j.mode = GAPS;
		j.seconds = argc > 2 ? atof(argv[2]) : 2.0;
		j.gap_s = (argc > 3 ? atof(argv[3]) : 1.5) / 1e6;
	} else {
		fprintf(stderr, "usage: deep30 spin SECONDS | work UNITS | gaps SECONDS GAP_US\n");
		return 2;
	}
	w0 = mono_s();
	c0 = cpu_s();
	r = f01(&j);
	c1 = cpu_s();
	w1 = mono_s();
	if (j.mode == SPIN)
		printf("spin done %ld\n", r);
	else if (j.mode == WORK)
		printf("work units=%ld wall_s=%.6f cpu_s=%.6f x=%llx\n", j.units, w1 - w0, c1 - c0,
		       (unsigned long long)j.x);
	else
		printf("gaps n=%ld lost_s=%.6f wall_s=%.6f lost_pct=%.3f short_pct=%.3f\n", j.gaps,
		       j.lost_s, w1 - w0, 100.0 * j.lost_s / (w1 - w0), 100.0 * j.short_s / (w1 - w0));
	return 0;
}
