// SPDX-License-Identifier: MIT
/*
 * runq: two threads that never block, pinned with the main thread to one CPU, so that each waits
 * for it about half of its life: spin_one and spin_two each spin for SECONDS of wall time
 * (default 1.0) and print their truth, the wall time they lived and the CPU time they got:
 *   runq spin_one wall_s=1.000 cpu_s=0.497
 * Their wait for a CPU is wall - cpu (nothing else takes them off it). Usage: runq [SECONDS]
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double secs = 1.0;

static double now(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void spin(const char *name)
{
	double w0 = now(CLOCK_MONOTONIC), c0 = now(CLOCK_THREAD_CPUTIME_ID);
	volatile unsigned long n = 0;

	while (now(CLOCK_MONOTONIC) - w0 < secs)
		n++;
	printf("runq %s wall_s=%.3f cpu_s=%.3f\n", name, now(CLOCK_MONOTONIC) - w0,
	       now(CLOCK_THREAD_CPUTIME_ID) - c0);
}

__attribute__((noinline)) static void *spin_one(void *unused)
{
	(void)unused;
	spin("spin_one");
	return NULL;
}

__attribute__((noinline)) static void *spin_two(void *unused)
{
	(void)unused;
	spin("spin_two");
	return NULL;
}

int main(int argc, char **argv)
{
	cpu_set_t one;
	pthread_t a, b;

	if (argc > 1)
		secs = atof(argv[1]);
	CPU_ZERO(&one);
	CPU_SET(sched_getcpu(), &one);
	if (sched_setaffinity(0, sizeof(one), &one) != 0)
		return 2;
	if (pthread_create(&a, NULL, spin_one, NULL) || pthread_create(&b, NULL, spin_two, NULL))
		return 2;
	pthread_join(a, NULL);
	pthread_join(b, NULL);
	return 0;
}
