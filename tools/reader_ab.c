/* SPDX-License-Identifier: MIT */
/*
 * reader_ab: the CPython reader of two builds in one process, sampling one target alternately, so
 * that a change to the reader is timed against the code before it under the same load, caches
 * and target (a shared 2-vCPU VM moves wall figures 2x between runs; separate runs of two builds
 * cannot resolve a microsecond). Built by `make reader-ab BASE_LIB=OLD/libpyrsprof.a`: the old
 * library's symbols are renamed old_* (objcopy), this build's library is linked as it is.
 *
 *   reader_ab PID PERIOD_US N     2N samples, one every PERIOD_US (0: back to back), old and new
 *                                 in turn; prints each one's median and quartiles in us
 *
 * Each reader has its own page cache, code cache and profile; both see the same 20-period gap
 * between their own samples, the machine's state in between is common to both.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pyrsprof/profile.h"
#include "pyrsprof/python.h"

#include "util/banned.h"

int old_prs_py_open(pid_t pid, const struct prs_py_opts *opts, struct prs_py **out, struct prs_err *err);
int old_prs_py_sample(struct prs_py *py, struct prs_profile *p, struct prs_py_thread *threads, int max,
		      int *n, struct prs_err *err);
struct prs_profile *old_prs_profile_new(void);

static double now_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void sleep_until(double t)
{
	double d = t - now_us();
	struct timespec ts;

	if (d <= 0)
		return;
	ts.tv_sec = (time_t)(d / 1e6);
	ts.tv_nsec = (long)((d - (double)ts.tv_sec * 1e6) * 1e3);
	nanosleep(&ts, NULL);
}

int main(int argc, char **argv)
{
	static struct prs_py_thread th[16];
	struct prs_py_opts opts;
	struct prs_err err = { 0 };
	struct prs_py *py[2] = { NULL, NULL };
	struct prs_profile *p[2];
	double *t[2], period, next;
	int pid, n, nt = 0;

	if (argc != 4 || (pid = atoi(argv[1])) <= 0 || (n = atoi(argv[3])) <= 0) {
		fprintf(stderr, "usage: reader_ab PID PERIOD_US N\n");
		return 2;
	}
	period = atof(argv[2]);
	memset(&opts, 0, sizeof(opts));
	if (old_prs_py_open(pid, &opts, &py[0], &err) || prs_py_open(pid, &opts, &py[1], &err)) {
		fprintf(stderr, "reader_ab: %s\n", err.msg);
		return 1;
	}
	p[0] = old_prs_profile_new();
	p[1] = prs_profile_new();
	t[0] = calloc((size_t)n, sizeof(double));
	t[1] = calloc((size_t)n, sizeof(double));
	if (!p[0] || !p[1] || !t[0] || !t[1])
		return 1;
	next = now_us();
	for (int i = 0; i < 2 * n; i++) {
		int k = i & 1, rc;
		double t0;

		if (period > 0)
			sleep_until(next += period);
		t0 = now_us();
		rc = k ? prs_py_sample(py[1], p[1], th, 16, &nt, &err)
		       : old_prs_py_sample(py[0], p[0], th, 16, &nt, &err);
		t[k][i / 2] = now_us() - t0;
		if (rc) {
			fprintf(stderr, "reader_ab: %s\n", err.msg);
			return 1;
		}
	}
	for (int k = 0; k < 2; k++) {
		qsort(t[k], (size_t)n, sizeof(double), cmp_d);
		printf("%s median_us %.2f p25_us %.2f p75_us %.2f (threads %d, frames %u)\n", k ? "new" : "old",
		       t[k][n / 2], t[k][n / 4], t[k][3 * n / 4], nt, nt ? th[0].nframes : 0);
	}
	return 0;
}
