// SPDX-License-Identifier: MIT
/*
 * threadwaves: threads started while the program runs, long and short, for a sampler that finds
 * new threads at its ticks (no clone events): none that lives through ticks may be missed, and
 * the CPU time of those shorter than a tick must not be lost from the profile.
 *
 * Usage: threadwaves [LONG_MS [NSHORT [SHORT_MS]]]   (defaults 300, 150, 2)
 *
 * Main starts "long-0", runs NSHORT/3 short threads one after the other (each started and joined),
 * starts "long-1", the next third, "long-2", the last third, then joins the long ones. A long
 * thread spins in long_work for about LONG_MS of CPU time and prints "thread long-N tid=T"; a
 * short one spins in short_work for about SHORT_MS (less than a 10 ms tick; a count of calls
 * calibrated by main at the start). At the
 * end main prints "short_cpu_ms X" and "long_cpu_ms X": the CPU time they used by their own
 * clocks (CLOCK_THREAD_CPUTIME_ID), the truth the profile's CPU samples are held to.
 */
#define _GNU_SOURCE /* pthread_setname_np */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double long_ms = 300, short_ms = 2;
static double calls_per_ms; /* work calls per ms of CPU (calibrate) */
static volatile uint64_t sink;

static double cpu_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* ~40-80 us of work per call */
#define WORK_FN(name, k)                                                                   \
	__attribute__((noinline, noclone)) uint64_t name(uint64_t x);                      \
	uint64_t name(uint64_t x)                                                          \
	{                                                                                  \
		for (int i = 0; i < 20000; i++)                                            \
			x = (x ^ (x >> 27)) * (k) + i;                                     \
		return x;                                                                  \
	}

WORK_FN(long_work, 0x9e3779b97f4a7c15ull)
WORK_FN(short_work, 0xbf58476d1ce4e5b9ull)

struct job {
	char name[16];
	long calls;        /* work calls to make: about the CPU time asked for */
	double used_ms;    /* CPU time used, by its clock */
	uint64_t result;
};

static pthread_mutex_t print_lock = PTHREAD_MUTEX_INITIALIZER;

static void *run(void *arg)
{
	struct job *j = arg;
	bool is_long = j->name[0] == 'l';
	uint64_t x = (uintptr_t)j;
	double t0 = cpu_ms();

	if (is_long) {
		pthread_setname_np(pthread_self(), j->name);
		pthread_mutex_lock(&print_lock);
		printf("thread %s tid=%ld\n", j->name, (long)syscall(SYS_gettid));
		fflush(stdout);
		pthread_mutex_unlock(&print_lock);
	}
	/* (a count, not the clock read between calls: that syscall would be where many samples
	 * land) */
	for (long i = 0; i < j->calls; i++)
		x = is_long ? long_work(x) : short_work(x);
	j->used_ms = cpu_ms() - t0;
	j->result = x;
	return NULL;
}

/* Work calls per ms of main's CPU time, over 20 ms. */
static void calibrate(void)
{
	double t0 = cpu_ms(), t;
	uint64_t x = 1;
	long n = 0;

	while ((t = cpu_ms() - t0) < 20)
		x = short_work(x), n++;
	calls_per_ms = (double)n / t;
	sink = x; /* (used: the calls are not optimised away) */
}

int main(int argc, char **argv)
{
	int nshort = argc > 2 ? atoi(argv[2]) : 150;
	struct job longs[3], one;
	pthread_t lt[3], st;
	double short_used = 0, long_used = 0;
	uint64_t sum = 0;

	if (argc > 1)
		long_ms = atof(argv[1]);
	if (argc > 3)
		short_ms = atof(argv[3]);
	calibrate();
	for (int w = 0; w < 3; w++) {
		snprintf(longs[w].name, sizeof(longs[w].name), "long-%d", w);
		longs[w].calls = (long)(long_ms * calls_per_ms);
		if (pthread_create(&lt[w], NULL, run, &longs[w]) != 0)
			return 1;
		for (int k = 0; k < nshort / 3; k++) {
			snprintf(one.name, sizeof(one.name), "short");
			one.calls = (long)(short_ms * calls_per_ms) + 1;
			if (pthread_create(&st, NULL, run, &one) != 0)
				return 1;
			pthread_join(st, NULL);
			short_used += one.used_ms;
			sum += one.result;
		}
	}
	for (int w = 0; w < 3; w++) {
		pthread_join(lt[w], NULL);
		long_used += longs[w].used_ms;
		sum += longs[w].result;
	}
	printf("short_cpu_ms %.1f\nlong_cpu_ms %.1f\nsum %llu\n", short_used, long_used,
	       (unsigned long long)sum);
	return 0;
}
