/* SPDX-License-Identifier: MIT */
/*
 * pystacks: a developer tool that prints every thread's Python stack of a live process by memory
 * reads only (no ptrace stop), using the CPython reader (include/pyrsprof/python.h).
 *
 *   pystacks PID                       every thread once: tid, pthread id, GIL, frames innermost first
 *   pystacks -r HZ -d SEC PID          sample in vm mode (jittered period), one line per thread-sample:
 *                                      "TID GIL frame;frame;..." (root first, GIL 1 = held it)
 *   pystacks --bench N PID             time N samples back to back, print the cost per sample
 *   --period US [--spin]               with --bench: one sample every US microseconds, asleep
 *                                      between them as the sampler is (or spinning): caches go cold
 *   --stats                            print the reader's counters to stderr at the end
 *
 * The PYRSPROF_PY_* variables of src/cli/pyenv.c apply as they do to pyrsprof.
 *
 * Output of the dump (the GIL's futex word ranges, python.h's prs_py_gil_ranges, then each thread):
 *   gil words 0x7f3a2d14e6c8-0x7f3a2d14e778
 *   thread 1235 pthread 0x7f3a2c1ff6c0 gil yes frames 3
 *       c (/tmp/t.py:12)
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "pyrsprof/profile.h"
#include "pyrsprof/python.h"

#include "util/banned.h"

#define MAXT 256

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static const char *str(const struct prs_profile *p, uint32_t id)
{
	return id < p->nstrings ? p->strings[id] : "?";
}

static void print_frame(FILE *o, const struct prs_profile *p, uint32_t fid, bool folded)
{
	const struct prs_frame *f = &p->frames[fid];

	if (folded)
		fprintf(o, "%s (%s:%u)", str(p, f->name), str(p, f->file), f->line);
	else
		fprintf(o, "    %s (%s:%u)\n", str(p, f->name), str(p, f->file), f->line);
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void stats(const struct prs_py *py)
{
	struct prs_py_stats s;

	prs_py_get_stats(py, &s);
	fprintf(stderr,
		"stats: samples %" PRIu64 " threads %" PRIu64 " frames %" PRIu64 " code_hits %" PRIu64
		" code_misses %" PRIu64 " code_stale %" PRIu64 " read_errors %" PRIu64 " bad_frames %" PRIu64
		" bad_lines %" PRIu64 " cycles %" PRIu64 " truncated %" PRIu64 " retries %" PRIu64
		" steady_tops %" PRIu64 " seen_running %" PRIu64 " syscalls %" PRIu64 "\n",
		s.samples, s.threads, s.frames, s.code_hits, s.code_misses, s.code_stale, s.read_errors,
		s.bad_frames, s.bad_lines, s.cycles, s.truncated, s.retries, s.steady_tops, s.seen_running, s.syscalls);
}

int main(int argc, char **argv)
{
	static struct prs_py_thread th[MAXT];
	struct prs_err err = { 0 };
	struct prs_py *py = NULL;
	struct prs_py_opts opts;
	struct prs_profile *p;
	double hz = 0, dur = 0, period_us = 0;
	long bench = 0;
	bool spin = false;
	bool want_stats = false;
	int i, n = 0, rc, pid = 0;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-r") && i + 1 < argc)
			hz = atof(argv[++i]);
		else if (!strcmp(argv[i], "-d") && i + 1 < argc)
			dur = atof(argv[++i]);
		else if (!strcmp(argv[i], "--bench") && i + 1 < argc)
			bench = atol(argv[++i]);
		else if (!strcmp(argv[i], "--period") && i + 1 < argc)
			period_us = atof(argv[++i]);
		else if (!strcmp(argv[i], "--spin"))
			spin = true;
		else if (!strcmp(argv[i], "--stats"))
			want_stats = true;
		else
			pid = atoi(argv[i]);
	}
	if (pid <= 0) {
		fprintf(stderr, "usage: pystacks [-r HZ -d SEC | --bench N [--period US [--spin]]] [--stats] PID\n");
		return 2;
	}
	cli_py_opts_from_env(&opts);
	rc = prs_py_open(pid, &opts, &py, &err);
	if (rc) {
		fprintf(stderr, "pystacks: %s\n", err.msg);
		return 1;
	}
	p = prs_profile_new();
	if (!p)
		return 1;
	fprintf(stderr, "pystacks: pid %d python %s layout %s binary %s anchor %s\n", pid, prs_py_version(py),
		prs_py_layout_source(py), prs_py_binary(py), prs_py_anchor(py));
	if (bench > 0) {
		double *t = calloc((size_t)bench, sizeof(double));
		double next = now_s();

		for (i = 0; i < bench && t; i++) {
			double t0;

			if (period_us > 0) {
				next += period_us * 1e-6;
				if (spin) {
					while (now_s() < next)
						;
				} else {
					struct timespec ts;
					double d = next - now_s();

					if (d > 0) {
						ts.tv_sec = (time_t)d;
						ts.tv_nsec = (long)((d - (double)ts.tv_sec) * 1e9);
						nanosleep(&ts, NULL);
					}
				}
			}
			t0 = now_s();
			prs_py_sample(py, p, th, MAXT, &n, &err);
			t[i] = (now_s() - t0) * 1e6;
		}
		if (t) {
			qsort(t, (size_t)bench, sizeof(double), cmp_d);
			printf("bench samples %ld threads %d median_us %.2f p10_us %.2f p90_us %.2f\n", bench, n,
			       t[bench / 2], t[bench / 10], t[bench * 9 / 10]);
		}
		free(t);
	} else if (hz > 0 && dur > 0) {
		double t0 = now_s(), next = t0, period = 1.0 / hz;
		struct prs_sample s = { 0 };
		size_t k;

		while (now_s() - t0 < dur) {
			rc = prs_py_sample(py, p, th, MAXT, &n, &err);
			if (rc == -ESRCH)
				break;
			for (i = 0; rc == 0 && i < n; i++) {
				uint32_t stack = 0;
				int j;

				for (j = (int)th[i].nframes - 1; j >= 0; j--)
					stack = prs_profile_stack(p, stack, th[i].frames[j]);
				s.tid = th[i].tid;
				s.stack = stack;
				s.weight = 1;
				s.state = th[i].holds_gil ? 1 : 0; /* abused locally: 1 = held the GIL */
				prs_profile_sample(p, &s);
			}
			/* jittered period (uniform in [0.5, 1.5) periods): no aliasing with periodic workloads */
			next += period * (0.5 + (double)rand() / ((double)RAND_MAX + 1.0));
			{
				double d = next - now_s();

				if (d > 0)
					usleep((useconds_t)(d * 1e6));
			}
		}
		/* one line per sample: "tid gil stack" ; the tests aggregate */
		for (k = 0; k < p->nsamples; k++) {
			uint32_t ids[PRS_MAX_STACK_FRAMES];
			size_t m = prs_profile_stack_frames(p, p->samples[k].stack, ids, PRS_MAX_STACK_FRAMES), j;

			printf("%d %d ", p->samples[k].tid, p->samples[k].state);
			for (j = 0; j < m; j++) {
				if (j)
					putchar(';');
				print_frame(stdout, p, ids[j], true);
			}
			printf("\n");
		}
	} else {
		rc = prs_py_sample(py, p, th, MAXT, &n, &err);
		if (rc) {
			fprintf(stderr, "pystacks: %s\n", err.msg);
			prs_py_free(py);
			prs_profile_free(p);
			return 1;
		}
		struct prs_py_range gr[PRS_PY_MAX_GIL_RANGES];
		int ng = prs_py_gil_ranges(py, gr, PRS_PY_MAX_GIL_RANGES);

		printf("gil words");
		for (i = 0; i < ng; i++)
			printf(" 0x%" PRIx64 "-0x%" PRIx64, gr[i].lo, gr[i].hi);
		printf("%s\n", ng ? "" : " unknown");
		for (i = 0; i < n; i++) {
			uint32_t j;

			printf("thread %d pthread 0x%" PRIx64 " gil %s frames %u%s\n", th[i].tid, th[i].thread_id,
			       th[i].holds_gil ? "yes" : "no", th[i].nframes, th[i].truncated ? " truncated" : "");
			for (j = 0; j < th[i].nframes; j++)
				print_frame(stdout, p, th[i].frames[j], false);
		}
	}
	if (want_stats)
		stats(py);
	prs_py_free(py);
	prs_profile_free(p);
	return 0;
}
