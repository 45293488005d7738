// SPDX-License-Identifier: MIT
/*
 * duty: a thread half on a CPU and half asleep, in spells shorter than pyrsprof's look at
 * 1000 Hz in preload mode (10 ms), each measuring itself.
 *
 * Usage: duty [SECONDS]   (default 2 s)
 *
 * Thread "duty" alternates work() (3 ms of its own CPU time) and snooze() (nanosleep of 3 ms)
 * for SECONDS; main waits for it in pthread_join (asleep throughout). At the end main prints
 *   truth duty_wall=S duty_cpu=S duty_sleep=S naps=N main_wall=S
 * duty_wall: the duty thread's life, duty_cpu: its CPU time (its thread CPU clock),
 * duty_sleep: the wall time it spent in nanosleep (its sleep and the wait for a CPU after each
 * wake-up), naps: its nanosleep calls (each asleep 3 ms at least), main_wall: main's time in
 * pthread_join. Each thread prints "thread NAME tid=N" first.
 */
#define _GNU_SOURCE /* pthread_setname_np */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double seconds = 2.0;
static double duty_wall, duty_cpu, duty_sleep;
static long naps;
static volatile unsigned long sink;

static double clock_s(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void announce(const char *name)
{
	pthread_setname_np(pthread_self(), name);
	printf("thread %s tid=%ld\n", name, (long)syscall(SYS_gettid));
	fflush(stdout);
}

__attribute__((noinline)) static void work(double cpu_s)
{
	double end = clock_s(CLOCK_THREAD_CPUTIME_ID) + cpu_s;

	while (clock_s(CLOCK_THREAD_CPUTIME_ID) < end)
		for (int i = 0; i < 1000; i++)
			sink += (unsigned long)i * i;
}

__attribute__((noinline)) static void snooze(long ns)
{
	struct timespec ts = { 0, ns };

	nanosleep(&ts, NULL);
	__asm__ volatile("" ::: "memory"); /* not a tail call: snooze stays on the stack */
}

static void *duty(void *arg)
{
	double t0 = clock_s(CLOCK_MONOTONIC), c0 = clock_s(CLOCK_THREAD_CPUTIME_ID), end;

	(void)arg;
	announce("duty");
	end = t0 + seconds;
	while (clock_s(CLOCK_MONOTONIC) < end) {
		double s0;

		work(0.003);
		s0 = clock_s(CLOCK_MONOTONIC);
		snooze(3000000);
		duty_sleep += clock_s(CLOCK_MONOTONIC) - s0;
		naps++;
	}
	duty_cpu = clock_s(CLOCK_THREAD_CPUTIME_ID) - c0;
	duty_wall = clock_s(CLOCK_MONOTONIC) - t0;
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t th;
	double t0;

	if (argc > 1)
		seconds = atof(argv[1]);
	announce("main");
	t0 = clock_s(CLOCK_MONOTONIC);
	if (pthread_create(&th, NULL, duty, NULL) != 0)
		return 1;
	pthread_join(th, NULL);
	printf("truth duty_wall=%.4f duty_cpu=%.4f duty_sleep=%.4f naps=%ld main_wall=%.4f\n", duty_wall,
	       duty_cpu, duty_sleep, naps, clock_s(CLOCK_MONOTONIC) - t0);
	return 0;
}
