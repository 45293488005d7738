// SPDX-License-Identifier: MIT
/*
 * offcpu: one thread on the CPU, two off it, for the same wall time, each measuring itself.
 *
 * Usage: offcpu [SECONDS]   (default 2 s)
 *
 * main spins in spin() for SECONDS; thread "napper" sleeps in nap() (nanosleep of 20 ms in a
 * loop) and thread "piper" blocks in wait_pipe() (read() on a pipe that main writes one byte to
 * at the end). nanosleep is never restarted after a signal handler ran, even with SA_RESTART: a
 * signal delivered to the napper shows as an EINTR, which it counts (and the piper counts its
 * read's). At the end main prints
 *   truth spin_cpu=S spin_wall=S nap=S pipe=S eintr=N
 * spin_cpu: main's CPU time in spin() (a CPU-time sampler sees that much of it); spin_wall: the
 * wall time main spent in spin(), on a CPU or waiting for one (the wall view's); nap, pipe: the
 * wall time each thread spent in its function; eintr: both threads' EINTRs. Each thread prints
 * "thread NAME tid=N" first.
 */
#define _GNU_SOURCE /* pthread_setname_np */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double seconds = 2.0;
static int pipefd[2];
static volatile int stop;
static pthread_mutex_t print_lock = PTHREAD_MUTEX_INITIALIZER;
static double nap_s, pipe_s;
static int eintr;

static double clock_s(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void announce(const char *name)
{
	pthread_setname_np(pthread_self(), name);
	pthread_mutex_lock(&print_lock);
	printf("thread %s tid=%ld\n", name, (long)syscall(SYS_gettid));
	fflush(stdout);
	pthread_mutex_unlock(&print_lock);
}

__attribute__((noinline)) static void nap(void)
{
	struct timespec ts = { 0, 20 * 1000 * 1000 };

	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED))
		if (nanosleep(&ts, NULL) != 0 && errno == EINTR)
			__atomic_fetch_add(&eintr, 1, __ATOMIC_RELAXED);
}

static void *napper(void *arg)
{
	double t0;

	(void)arg;
	announce("napper");
	t0 = clock_s(CLOCK_MONOTONIC);
	nap();
	nap_s = clock_s(CLOCK_MONOTONIC) - t0;
	return NULL;
}

__attribute__((noinline)) static void wait_pipe(void)
{
	char c;

	for (;;) {
		ssize_t n = read(pipefd[0], &c, 1);

		if (n >= 0)
			return;
		if (errno == EINTR)
			__atomic_fetch_add(&eintr, 1, __ATOMIC_RELAXED);
	}
}

static void *piper(void *arg)
{
	double t0;

	(void)arg;
	announce("piper");
	t0 = clock_s(CLOCK_MONOTONIC);
	wait_pipe();
	pipe_s = clock_s(CLOCK_MONOTONIC) - t0;
	return NULL;
}

__attribute__((noinline)) static uint64_t spin(double until)
{
	uint64_t x = 1;

	while (clock_s(CLOCK_MONOTONIC) < until)
		for (int i = 0; i < 100000; i++)
			x = (x ^ (x >> 27)) * 0x9e3779b97f4a7c15ull + (uint64_t)i;
	return x;
}

int main(int argc, char **argv)
{
	pthread_t n, p;
	double c0, w0;
	uint64_t x;

	if (argc > 1)
		seconds = atof(argv[1]);
	if (pipe(pipefd) != 0)
		return 1;
	printf("main tid=%ld\n", (long)getpid());
	fflush(stdout);
	if (pthread_create(&n, NULL, napper, NULL) != 0 || pthread_create(&p, NULL, piper, NULL) != 0)
		return 1;
	c0 = clock_s(CLOCK_THREAD_CPUTIME_ID);
	w0 = clock_s(CLOCK_MONOTONIC);
	x = spin(w0 + seconds);
	c0 = clock_s(CLOCK_THREAD_CPUTIME_ID) - c0;
	w0 = clock_s(CLOCK_MONOTONIC) - w0;
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	if (write(pipefd[1], "x", 1) != 1)
		return 1;
	pthread_join(n, NULL);
	pthread_join(p, NULL);
	printf("truth spin_cpu=%.4f spin_wall=%.4f nap=%.4f pipe=%.4f eintr=%d x=%llu\n", c0, w0, nap_s,
	       pipe_s, eintr,
	       (unsigned long long)(x & 1));
	return 0;
}
