// SPDX-License-Identifier: MIT
/*
 * threads4: four named threads, each spinning in its own function.
 *
 * Usage: threads4 [SECONDS [DELAY]]   (default 3 s of work, started after DELAY s, default 0)
 *
 * Threads "worker-a".."worker-d" (pthread_setname_np) spin in work_a..work_d (noinline, noclone,
 * each with its own constant so identical-code folding cannot merge them) until the deadline;
 * main joins them. Each thread prints "thread worker-X tid=N" when it starts, so tests can match
 * the profile's per-thread roots against the real tids, and main prints "done" at the end.
 * DELAY lets a test attach before the workers exist (main sleeps first).
 */
#define _GNU_SOURCE /* pthread_setname_np */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double deadline_s;

static double mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

#define WORK_FN(name, k)                                                                   \
	__attribute__((noinline, noclone)) uint64_t name(uint64_t x);                      \
	uint64_t name(uint64_t x)                                                          \
	{                                                                                  \
		for (int i = 0; i < 200000; i++)                                           \
			x = (x ^ (x >> 27)) * (k) + i;                                     \
		return x;                                                                  \
	}

WORK_FN(work_a, 0x9e3779b97f4a7c15ull)
WORK_FN(work_b, 0xbf58476d1ce4e5b9ull)
WORK_FN(work_c, 0x94d049bb133111ebull)
WORK_FN(work_d, 0xd6e8feb86659fd93ull)

struct worker {
	const char *name;
	uint64_t (*fn)(uint64_t);
	uint64_t result;
};

static pthread_mutex_t print_lock = PTHREAD_MUTEX_INITIALIZER;

static void *run(void *arg)
{
	struct worker *w = arg;
	uint64_t x = (uintptr_t)w;

	pthread_setname_np(pthread_self(), w->name);
	pthread_mutex_lock(&print_lock);
	printf("thread %s tid=%ld\n", w->name, (long)syscall(SYS_gettid));
	fflush(stdout);
	pthread_mutex_unlock(&print_lock);
	while (mono_s() < deadline_s)
		x = w->fn(x);
	w->result = x;
	return NULL;
}

int main(int argc, char **argv)
{
	struct worker w[4] = {
		{ "worker-a", work_a, 0 }, { "worker-b", work_b, 0 },
		{ "worker-c", work_c, 0 }, { "worker-d", work_d, 0 },
	};
	pthread_t t[4];
	uint64_t sum = 0;

	double delay = argc > 2 ? atof(argv[2]) : 0.0;

	printf("main tid=%ld\n", (long)getpid());
	fflush(stdout);
	if (delay > 0)
		usleep((useconds_t)(delay * 1e6));
	deadline_s = mono_s() + (argc > 1 ? atof(argv[1]) : 3.0);
	for (int i = 0; i < 4; i++)
		if (pthread_create(&t[i], NULL, run, &w[i]) != 0)
			return 1;
	for (int i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		sum += w[i].result;
	}
	printf("done %llx\n", (unsigned long long)sum);
	return 0;
}
