// SPDX-License-Identifier: MIT
/*
 * waits: a thread that sleeps in two places in turn, with a measured truth. For the sampler's
 * handling of sleeping threads (not stopped again while they have not moved): a thread that
 * moves between two waits of the same shape must still be seen in the right one.
 *
 * Usage: waits [SECONDS]   (default 3 s)
 *
 * Thread "waiter" loops: wait_a() then wait_b(), each a read() of one byte from the same pipe.
 * The two functions have the same frame, so the waiter blocks at the same stack pointer and the
 * same PC (in read) in both: only the return address on the stack tells them apart. Thread
 * "feeder" writes a byte after a random 20-40 ms (ending wait_a) and after 5-15 ms (ending
 * wait_b), so wait_a takes about 3/4 of the time. The waiter measures the wall time spent in each
 * with CLOCK_MONOTONIC and prints "truth wait_a=X wait_b=Y" (fractions) at the end. Each thread
 * prints "thread NAME tid=N" first.
 */
#define _GNU_SOURCE /* pthread_setname_np */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double seconds = 3.0;
static int pipefd[2];
static volatile int done;
static pthread_mutex_t print_lock = PTHREAD_MUTEX_INITIALIZER;

static void announce(const char *name)
{
	pthread_setname_np(pthread_self(), name);
	pthread_mutex_lock(&print_lock);
	printf("thread %s tid=%ld\n", name, (long)syscall(SYS_gettid));
	fflush(stdout);
	pthread_mutex_unlock(&print_lock);
}

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void sleep_ms(double ms)
{
	struct timespec ts = { 0, (long)(ms * 1e6) };

	while (nanosleep(&ts, &ts) != 0)
		;
}

/* The same body, the same frame: only the return address into each differs (noipa: gcc -O2 would
 * otherwise fold the two identical functions into one). */
__attribute__((noipa)) static int wait_a(int fd)
{
	char c;
	int r = (int)read(fd, &c, 1);

	__asm__ volatile("" ::: "memory");
	return r;
}

__attribute__((noipa)) static int wait_b(int fd)
{
	char c;
	int r = (int)read(fd, &c, 1);

	__asm__ volatile("" ::: "memory");
	return r;
}

static void *waiter(void *arg)
{
	double ta = 0, tb = 0;

	(void)arg;
	announce("waiter");
	while (!done) {
		double t0 = now(), t1, t2;

		if (wait_a(pipefd[0]) <= 0)
			break;
		t1 = now();
		if (wait_b(pipefd[0]) <= 0)
			break;
		t2 = now();
		ta += t1 - t0;
		tb += t2 - t1;
	}
	pthread_mutex_lock(&print_lock);
	printf("truth wait_a=%.4f wait_b=%.4f\n", ta / (ta + tb), tb / (ta + tb));
	fflush(stdout);
	pthread_mutex_unlock(&print_lock);
	return NULL;
}

static void *feeder(void *arg)
{
	double end = now() + seconds;
	unsigned seed = 12345;

	(void)arg;
	announce("feeder");
	while (now() < end) {
		sleep_ms(20 + (rand_r(&seed) % 2000) / 100.0);
		if (write(pipefd[1], "a", 1) != 1)
			break;
		sleep_ms(5 + (rand_r(&seed) % 1000) / 100.0);
		if (write(pipefd[1], "b", 1) != 1)
			break;
	}
	done = 1;
	close(pipefd[1]); /* ends the waiter's read */
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t w, f;

	if (argc > 1)
		seconds = atof(argv[1]);
	if (pipe(pipefd) != 0)
		return 1;
	printf("main tid=%ld\n", (long)getpid());
	fflush(stdout);
	if (pthread_create(&w, NULL, waiter, NULL) != 0 || pthread_create(&f, NULL, feeder, NULL) != 0)
		return 1;
	pthread_join(f, NULL);
	pthread_join(w, NULL);
	return 0;
}
