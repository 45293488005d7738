/* SPDX-License-Identifier: MIT */
/*
 * Peak memory bandwidth, STREAM-style (J. McCalpin, "Memory Bandwidth and Machine Balance in
 * Current High Performance Computers", IEEE TCCA Newsletter, 1995): the triad
 * a[i] = b[i] + s * c[i] over arrays of at least 4x the last-level cache (so the passes stream
 * from DRAM), split over `threads` threads each pinned to one allowed CPU and working on its own
 * slice (first-touched by itself, so its pages are local), repeated for the time budget; the
 * best pass counts, at 24 bytes per element (STREAM's convention: two 8-byte reads and one
 * write; the write-allocate read is not counted). In a VM this is the achievable share, which
 * is the right reference for the bandwidth rule.
 */
#include "pyrsprof/machine.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "pyrsprof/util.h"

#include "util/banned.h"

#define MIN_ARRAY_BYTES (64ull << 20)
#define MAX_ARRAY_BYTES (1ull << 30)
#define MAX_THREADS 256

struct stream {
	double *a, *b, *c;
	size_t n;
	unsigned threads;
	pthread_barrier_t start, done;
	pthread_mutex_t gate; /* held while threads are created: the barriers are sized after */
	volatile int stop;
	bool touched;         /* the arrays were first-touched (by the threads of the first run) */
	int cpus[MAX_THREADS];
};

struct worker {
	struct stream *s;
	unsigned idx;
};

static void slice(const struct stream *s, unsigned idx, size_t *lo, size_t *hi)
{
	*lo = s->n * idx / s->threads;
	*hi = s->n * (idx + 1) / s->threads;
}

static void *work(void *arg)
{
	struct worker *w = arg;
	struct stream *s = w->s;
	size_t lo, hi;

	if (s->cpus[w->idx] >= 0) {
		cpu_set_t one;

		CPU_ZERO(&one);
		CPU_SET(s->cpus[w->idx], &one);
		pthread_setaffinity_np(pthread_self(), sizeof(one), &one);
	}
	slice(s, w->idx, &lo, &hi);
	for (size_t i = lo; i < hi && !s->touched; i++) {
		s->a[i] = 0;
		s->b[i] = 1.0;
		s->c[i] = 2.0;
	}
	pthread_mutex_lock(&s->gate);
	pthread_mutex_unlock(&s->gate);
	for (;;) {
		pthread_barrier_wait(&s->start);
		if (s->stop)
			break;
		double *restrict a = s->a, *restrict b = s->b, *restrict c = s->c;

		for (size_t i = lo; i < hi; i++)
			a[i] = b[i] + 3.0 * c[i];
		pthread_barrier_wait(&s->done);
	}
	return NULL;
}

/* The CPUs of our affinity mask, in order, for pinning (-1 = no pinning). */
static void pick_cpus(struct stream *s)
{
	cpu_set_t set;
	unsigned k = 0;

	for (unsigned i = 0; i < MAX_THREADS; i++)
		s->cpus[i] = -1;
	if (sched_getaffinity(0, sizeof(set), &set) != 0)
		return;
	for (int c = 0; c < CPU_SETSIZE && k < s->threads; c++)
		if (CPU_ISSET(c, &set))
			s->cpus[k++] = c;
}

/* One measurement with s->threads threads over the arrays of s. */
static int run(struct stream *s, double seconds, double *mbs, struct prs_err *err)
{
	struct worker w[MAX_THREADS];
	pthread_t tid[MAX_THREADS];
	uint64_t t_end, best = UINT64_MAX;
	unsigned started;
	int rc = 0;

	s->stop = 0;
	pick_cpus(s);
	pthread_mutex_init(&s->gate, NULL);
	pthread_mutex_lock(&s->gate);
	for (started = 0; started < s->threads; started++) {
		w[started] = (struct worker){ s, started };
		if (pthread_create(&tid[started], NULL, work, &w[started]) != 0)
			break;
	}
	if (started < s->threads) {
		/* the threads that started are let through once, told to stop */
		rc = prs_err_set(err, -EAGAIN, "calibrate: cannot start %u threads", s->threads);
		s->stop = 1;
	}
	pthread_barrier_init(&s->start, NULL, started + 1);
	pthread_barrier_init(&s->done, NULL, started + 1);
	pthread_mutex_unlock(&s->gate);
	t_end = prs_now_ns() + (uint64_t)(seconds * 1e9);
	/* pass 0 includes the first touch of the pages: only the passes after it are timed */
	for (int pass = 0; !rc && (pass < 3 || prs_now_ns() < t_end) && pass < 1000; pass++) {
		uint64_t t0 = prs_now_ns(), dt;

		pthread_barrier_wait(&s->start);
		pthread_barrier_wait(&s->done);
		dt = prs_now_ns() - t0;
		if (pass > 0 && dt < best)
			best = dt;
	}
	s->stop = 1;
	pthread_barrier_wait(&s->start);
	for (unsigned i = 0; i < started; i++)
		pthread_join(tid[i], NULL);
	pthread_barrier_destroy(&s->start);
	pthread_barrier_destroy(&s->done);
	pthread_mutex_destroy(&s->gate);
	s->touched = true;
	if (!rc && best != UINT64_MAX)
		*mbs = (double)(24 * s->n) / ((double)best / 1e9) / 1e6;
	return rc;
}

int prs_bandwidth_measure(const unsigned *threads, size_t nruns, uint64_t llc_bytes, double seconds,
			  double *mbs, struct prs_err *err)
{
	struct stream s;
	uint64_t bytes = llc_bytes * 4;
	int rc = 0;

	if (bytes < MIN_ARRAY_BYTES)
		bytes = MIN_ARRAY_BYTES;
	if (bytes > MAX_ARRAY_BYTES)
		bytes = MAX_ARRAY_BYTES;
	memset(&s, 0, sizeof(s));
	s.n = bytes / sizeof(double);
	s.a = malloc(s.n * sizeof(double));
	s.b = malloc(s.n * sizeof(double));
	s.c = malloc(s.n * sizeof(double));
	if (!s.a || !s.b || !s.c) {
		rc = prs_err_set(err, -ENOMEM, "calibrate: cannot allocate 3 x %llu MB",
				 (unsigned long long)(bytes >> 20));
		goto out;
	}
	for (size_t i = 0; i < nruns && !rc; i++) {
		mbs[i] = 0;
		s.threads = threads[i] == 0 ? 1 : threads[i] > MAX_THREADS ? MAX_THREADS : threads[i];
		rc = run(&s, seconds / (double)nruns, &mbs[i], err);
	}
out:
	free(s.a);
	free(s.b);
	free(s.c);
	return rc;
}
