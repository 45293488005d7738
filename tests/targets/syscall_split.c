// SPDX-License-Identifier: MIT
/*
 * syscall_split: a known CPU split whose one half makes syscalls.
 *
 * Usage: syscall_split [SECONDS]   (default 4 s)
 *
 * The main loop alternates hot_a and hot_b, about 0.3 ms of CPU each: hot_a computes only;
 * hot_b computes in short chunks, each followed by a real syscall that reads the thread's CPU
 * clock (syscall(2), not the vDSO). A running thread is preempted at a return to user mode: with
 * lazy preemption, the first syscall return after a reschedule was asked for, unless a timer
 * interrupt comes first. So a thread that shares its CPU is mostly preempted in hot_b, also for
 * a reschedule asked for while it ran hot_a; a profiler that takes the stack where a waiting
 * thread stops sees hot_b.
 *
 * The truth is measured with the thread's CPU clock, read rarely (a read between the halves would
 * be a syscall return outside both): each half's cost per call is timed over CALIB_CALLS calls
 * of it alone, before and after the loop, and the loop calls each half equally often. Printed at
 * the end in cpu_split's words, the split and the CPU seconds of the whole run apportioned by it:
 *   split hot_a=0.503 hot_b=0.497
 *   cpu_s hot_a=1.201 hot_b=1.187
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define A_ITERS 300000  /* hot_a: steps per call */
#define B_CHUNKS 50     /* hot_b: chunks per call, a syscall after each */
#define CHUNK_ITERS 4000
#define CALIB_CALLS 50

static double clock_s(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((noinline, noclone)) uint64_t hot_a(uint64_t x);
__attribute__((noinline, noclone)) uint64_t hot_b(uint64_t x);

uint64_t hot_a(uint64_t x)
{
	for (long i = 0; i < A_ITERS; i++) {
		x ^= x << 13; x ^= x >> 7; x ^= x << 17; x += 0x9e3779b97f4a7c15ull;
	}
	return x;
}

uint64_t hot_b(uint64_t x)
{
	for (int c = 0; c < B_CHUNKS; c++) {
		struct timespec ts;

		for (long i = 0; i < CHUNK_ITERS; i++) {
			x = x * 6364136223846793005ull + 1442695040888963407ull; x ^= x >> 29;
		}
		syscall(SYS_clock_gettime, CLOCK_THREAD_CPUTIME_ID, &ts);
		x += (uint64_t)ts.tv_nsec;
	}
	return x;
}

/* CPU seconds of CALIB_CALLS calls of f, added to *cost. */
static uint64_t calibrate(uint64_t (*f)(uint64_t), uint64_t x, double *cost)
{
	double t0 = clock_s(CLOCK_THREAD_CPUTIME_ID);

	for (int i = 0; i < CALIB_CALLS; i++)
		x = f(x);
	*cost += clock_s(CLOCK_THREAD_CPUTIME_ID) - t0;
	return x;
}

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? atof(argv[1]) : 4.0;
	double ca = 0, cb = 0, t0, cpu, end, a;
	uint64_t x = 88172645463325252ull;

	setvbuf(stdout, NULL, _IOLBF, 0);
	t0 = clock_s(CLOCK_THREAD_CPUTIME_ID);
	end = clock_s(CLOCK_MONOTONIC) + seconds;
	x = calibrate(hot_a, x, &ca);
	x = calibrate(hot_b, x, &cb);
	while (clock_s(CLOCK_MONOTONIC) < end) {
		for (int i = 0; i < 10; i++) {
			x = hot_a(x);
			x = hot_b(x);
		}
	}
	x = calibrate(hot_a, x, &ca);
	x = calibrate(hot_b, x, &cb);
	cpu = clock_s(CLOCK_THREAD_CPUTIME_ID) - t0;
	a = ca / (ca + cb);
	printf("split hot_a=%.3f hot_b=%.3f\n", a, 1 - a);
	printf("cpu_s hot_a=%.3f hot_b=%.3f\n", cpu * a, cpu * (1 - a));
	return (int)(x & 0); /* (x used: the loops are not optimised away) */
}
