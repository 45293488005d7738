/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for aggregated samples (prs_recorder_aggregate): the file is byte for byte the one an
 * unaggregated recorder writes; the records are the distinct samples, in first-seen order, with
 * summed weights and their latest time; an exec keeps the samples before and after it apart;
 * the pending samples are dropped once written (memory does not grow with samples); and what the
 * end of a recording draws from the records (folded views, per process and per thread, CPU and
 * wall; the classifier's facts) equals what the same file read back gives. Read as sums
 * (PRS_PYRS_SUMS), a file gives the recorder's own records, and every output made of sums (folded,
 * pprof, flame graph, facts, diff) equals that of the full read, on whole, cut and damaged files;
 * read as sums without threads (PRS_PYRS_SUMS_NO_THREADS), so does every output that keeps no
 * thread apart, and the facts of each thread.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profile/profile-internal.h"
#include "pyrsprof/classify.h"
#include "pyrsprof/diff.h"
#include "pyrsprof/export.h"
#include "pyrsprof/flamegraph.h"
#include "pyrsprof/profile.h"

#include "py_image.h"
#include "unit_tmpdir.h"

#include "util/banned.h"

static uint32_t S(struct prs_profile *p, const char *s)
{
	return prs_profile_string(p, s, strlen(s));
}

static uint64_t rng = 0x2545f4914f6cdd1dull;

static uint64_t rnd(void)
{
	return img_rand(&rng); /* the unit tests' xorshift (py_image.c) */
}

/*
 * A 4-second recording of two processes (pid 100 execs from "sh run.sh" to "python app.py" at
 * 2 s; pid 200 runs from the start) with 3 threads each, at 100 Hz: stacks from a pool of 12,
 * states and syscalls varied, GIL flags on some; flushed every 100 ticks. Deterministic.
 */
static void record(struct prs_recorder *r)
{
	struct prs_profile *p = prs_recorder_profile(r);
	uint32_t pool[12], file = S(p, "app.py");
	struct prs_err err;

	rng = 0x2545f4914f6cdd1dull;
	prs_profile_meta(p, "command", "sh run.sh");
	prs_profile_meta(p, "rate_hz", "100");
	prs_profile_meta(p, "duration_s", "4");
	for (uint32_t k = 0; k < 12; k++) {
		char name[32];
		uint32_t s = 0;

		for (uint32_t d = 0; d <= k % 4; d++) {
			snprintf(name, sizeof(name), "f%u_%u", k % 5, d);
			s = prs_profile_stack(p, s, prs_profile_named_frame(p, PRS_KIND_PYTHON, S(p, name),
									     file, 10 + d));
		}
		pool[k] = s;
	}
	cr_assert_eq(prs_profile_process(p, 100, 1, S(p, "sh run.sh"), 0), 0);
	cr_assert_eq(prs_profile_process(p, 200, 1, S(p, "server"), 0), 0);
	for (int k = 0; k < 6; k++)
		prs_profile_thread_pid(p, k < 3 ? 100 : 200, (k < 3 ? 100 : 200) + k, S(p, k % 3 ? "worker" : "main"));
	for (uint64_t t = 0; t < 400; t++) {
		uint64_t now = t * 10000000 + rnd() % 40000;

		if (t == 200) /* the exec, stamped after the samples already taken (as the sampler does) */
			cr_assert_eq(prs_profile_process(p, 100, 1, S(p, "python app.py"), now - 1), 0);
		for (int k = 0; k < 6; k++) {
			uint64_t u = rnd();
			struct prs_sample s = { .time_ns = now, .tid = (k < 3 ? 100 : 200) + k,
						.pid = k < 3 ? 100 : 200, .stack = pool[u % 12],
						.state = PRS_STATE_RUNNING, .syscall = -1, .weight = 1 };

			if ((u >> 8) % 4 == 0) {
				s.state = PRS_STATE_BLOCKED;
				s.syscall = (u >> 12) % 2 ? 7 : 202;
			}
			if ((u >> 16) % 3 == 0)
				s.flags = PRS_SAMPLE_GIL;
			cr_assert_eq(prs_profile_sample(p, &s), 0);
		}
		if ((t + 1) % 100 == 0)
			cr_assert_eq(prs_recorder_flush(r, &err), 0, "%s", err.msg);
	}
}

static char *read_all(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = malloc(1 << 20);

	cr_assert(f && buf);
	*len = fread(buf, 1, 1 << 20, f);
	fclose(f);
	return buf;
}

/* The folded text of p in view o. */
static char *folded(const struct prs_profile *p, const struct prs_view_opts *o)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	struct prs_err err;

	cr_assert(f);
	cr_assert_eq(prs_export_folded(p, o, f, &err), 0);
	fclose(f);
	return text;
}

/* Records twice, aggregated and not; *agg is the aggregated profile, *back the file read back. */
static void both(struct prs_profile **agg, struct prs_profile **back)
{
	char plain[128], aggp[128], warn[256];
	struct prs_recorder *r;
	struct prs_err err;
	size_t la, lb;
	char *a, *b;

	snprintf(plain, sizeof(plain), "%s/plain.pyrs", unit_tmpdir);
	snprintf(aggp, sizeof(aggp), "%s/agg.pyrs", unit_tmpdir);
	cr_assert_eq(prs_recorder_open(plain, &r, &err), 0);
	record(r);
	cr_assert_eq(prs_recorder_close(r, NULL, &err), 0);
	cr_assert_eq(prs_recorder_open(aggp, &r, &err), 0);
	cr_assert_eq(prs_recorder_aggregate(r), 0);
	record(r);
	cr_assert_eq(prs_recorder_close(r, agg, &err), 0);
	a = read_all(plain, &la);
	b = read_all(aggp, &lb);
	cr_assert_eq(la, lb);
	cr_assert_eq(memcmp(a, b, la), 0, "the aggregated recorder wrote another file");
	free(a);
	free(b);
	cr_assert_eq(prs_pyrs_read(aggp, back, warn, sizeof(warn), &err), 0, "%s", err.msg);
}

Test(aggregate, same_file_and_distinct_records, .init = unit_tmpdir_make, .fini = unit_tmpdir_remove)
{
	struct prs_profile *agg, *back;
	uint64_t total = 0;
	size_t prev_first = 0;

	both(&agg, &back);
	cr_assert(agg->complete && back->complete);
	cr_assert_eq(back->nsamples, 2400);
	cr_assert_eq(agg->sample_count, 2400);
	cr_assert_eq(agg->sample_times, 400);
	cr_assert_eq(back->sample_times, 400);
	cr_assert_lt(agg->nsamples, 1200, "%zu records for 2400 samples", agg->nsamples);
	/* each record: the sum of the file's samples of its key, their latest time; first-seen order */
	for (size_t i = 0; i < agg->nsamples; i++) {
		const struct prs_sample *r = &agg->samples[i];
		uint64_t w = 0, last = 0;
		size_t first = SIZE_MAX;
		bool after = back->processes[2].time_ns <= r->time_ns;

		for (size_t k = 0; k < back->nsamples; k++) {
			const struct prs_sample *s = &back->samples[k];

			if (s->stack == r->stack && s->tid == r->tid && s->pid == r->pid &&
			    s->state == r->state && s->syscall == r->syscall && s->flags == r->flags &&
			    (back->processes[2].time_ns <= s->time_ns) == after) { /* epochs split every pid */
				w += s->weight;
				last = s->time_ns > last ? s->time_ns : last;
				first = first == SIZE_MAX ? k : first;
			}
		}
		cr_assert_eq(r->weight, w, "record %zu", i);
		cr_assert_eq(r->time_ns, last, "record %zu", i);
		cr_assert(i == 0 ? first == 0 : first > prev_first, "record %zu first seen at %zu", i, first);
		prev_first = first;
		total += r->weight;
	}
	cr_assert_eq(total, 2400);
	prs_profile_free(agg);
	prs_profile_free(back);
}

Test(aggregate, views_equal_the_file_read_back, .init = unit_tmpdir_make, .fini = unit_tmpdir_remove)
{
	struct prs_profile *agg, *back;
	static const struct prs_view_opts views[] = {
		{ .view = PRS_VIEW_CPU },
		{ .view = PRS_VIEW_WALL },
		{ .view = PRS_VIEW_WALL, .per_process = true, .per_thread = true },
		{ .view = PRS_VIEW_CPU, .per_process = true, .merge_processes = true, .lines = true },
	};
	bool both_commands = false;

	both(&agg, &back);
	for (size_t v = 0; v < sizeof(views) / sizeof(views[0]); v++) {
		char *a = folded(agg, &views[v]), *b = folded(back, &views[v]);

		cr_assert_str_eq(a, b, "view %zu", v);
		if (v == 2)
			both_commands = strstr(a, "sh run.sh [100]") && strstr(a, "python app.py [100]");
		free(a);
		free(b);
	}
	cr_assert(both_commands, "the exec's two commands both named");
	/* no timeline from sums: speedscope refuses, and takes the file's */
	{
		FILE *null = fopen("/dev/null", "w");
		struct prs_err err;

		cr_assert_eq(prs_export_speedscope(agg, PRS_VIEW_WALL, null, &err), -EINVAL);
		cr_assert(strstr(err.msg, "profile.pyrs"), "%s", err.msg);
		cr_assert_eq(prs_export_speedscope(back, PRS_VIEW_WALL, null, &err), 0);
		fclose(null);
	}
	prs_profile_free(agg);
	prs_profile_free(back);
}

Test(aggregate, facts_equal_the_file_read_back, .init = unit_tmpdir_make, .fini = unit_tmpdir_remove)
{
	struct prs_profile *agg, *back;
	struct prs_facts fa, fb;
	struct prs_err err;

	both(&agg, &back);
	cr_assert_eq(prs_facts_build(agg, &fa, &err), 0);
	cr_assert_eq(prs_facts_build(back, &fb, &err), 0);
	cr_assert_eq(fa.nthreads, 6);
	cr_assert_eq(fa.nthreads, fb.nthreads);
	cr_assert_eq(fa.tick_s, fb.tick_s);
	cr_assert_eq(fa.tick_s, 0.01); /* 4 s over the 400 ticks the samples' times show */
	cr_assert_eq(fa.samples, 2400);
	for (size_t i = 0; i < fa.nthreads; i++) {
		const struct prs_thread_facts *x = &fa.threads[i], *y = &fb.threads[i];

		cr_assert_eq(x->tid, y->tid); /* first-seen order kept */
		cr_assert_eq(x->samples, y->samples);
		cr_assert_eq(x->wall_s, y->wall_s);
		cr_assert_eq(x->gil_hold, y->gil_hold);
		cr_assert_eq(x->wait_syscall, y->wait_syscall);
		cr_assert_eq(x->wait_syscall_share, y->wait_syscall_share);
		for (int r = 0; r < PRS_R__COUNT; r++)
			cr_assert_eq(x->t[r], y->t[r], "thread %zu reason %d", i, r);
	}
	prs_facts_release(&fa);
	prs_facts_release(&fb);
	prs_profile_free(agg);
	prs_profile_free(back);
}

Test(aggregate, pending_emptied_by_each_flush, .init = unit_tmpdir_make, .fini = unit_tmpdir_remove)
{
	char path[128];
	struct prs_recorder *r;
	struct prs_profile *p;
	struct prs_err err;
	struct prs_sample s = { .tid = 7, .state = PRS_STATE_RUNNING, .syscall = -1, .weight = 1 };
	size_t n;

	snprintf(path, sizeof(path), "%s/p.pyrs", unit_tmpdir);
	cr_assert_eq(prs_recorder_open(path, &r, &err), 0);
	p = prs_recorder_profile(r);
	cr_assert_eq(prs_recorder_aggregate(r), 0);
	s.stack = prs_profile_stack(p, 0, prs_profile_named_frame(p, PRS_KIND_PYTHON, S(p, "f"), 0, 1));
	for (int round = 0; round < 5; round++) {
		for (int k = 0; k < 1000; k++) {
			s.time_ns += 1000;
			cr_assert_eq(prs_profile_sample(p, &s), 0);
		}
		cr_assert_not_null(prs_profile_pending(p, &n));
		cr_assert_eq(n, 1000);
		cr_assert_eq(prs_recorder_flush(r, &err), 0);
		prs_profile_pending(p, &n);
		cr_assert_eq(n, 0);
		cr_assert_eq(p->nsamples, 1);
		cr_assert_eq(p->samples[0].weight, 1000u * (round + 1));
	}
	cr_assert_eq(prs_recorder_close(r, &p, &err), 0);
	cr_assert_eq(p->sample_count, 5000);
	prs_profile_free(p);
	/* the file has every sample, and its END record their count */
	cr_assert_eq(prs_pyrs_read(path, &p, NULL, 0, &err), 0, "%s", err.msg);
	cr_assert(p->complete);
	cr_assert_eq(p->nsamples, 5000);
	cr_assert_eq(p->samples[4999].time_ns, 5000000);
	prs_profile_free(p);
}

Test(aggregate, weight_overflow_starts_a_record, .init = unit_tmpdir_make, .fini = unit_tmpdir_remove)
{
	char path[128];
	struct prs_recorder *r;
	struct prs_profile *p;
	struct prs_err err;
	struct prs_sample s = { .tid = 7, .state = PRS_STATE_RUNNING, .syscall = -1,
				.weight = UINT32_MAX - 2 };

	snprintf(path, sizeof(path), "%s/p.pyrs", unit_tmpdir);
	cr_assert_eq(prs_recorder_open(path, &r, &err), 0);
	p = prs_recorder_profile(r);
	cr_assert_eq(prs_recorder_aggregate(r), 0);
	cr_assert_eq(prs_profile_sample(p, &s), 0);
	s.weight = 2;
	cr_assert_eq(prs_profile_sample(p, &s), 0); /* fits: UINT32_MAX */
	cr_assert_eq(prs_profile_sample(p, &s), 0); /* does not: a second record */
	/* many more records push the table to grow (rehash): the newest of the split key still takes
	 * the next sample */
	for (uint32_t k = 1; k < 3000; k++) {
		struct prs_sample o = { .tid = (int32_t)(10 + k), .state = PRS_STATE_RUNNING, .syscall = -1,
					.weight = 1 };

		cr_assert_eq(prs_profile_sample(p, &o), 0);
	}
	cr_assert_eq(prs_profile_sample(p, &s), 0);
	cr_assert_eq(p->nsamples, 2 + 2999);
	cr_assert_eq(p->samples[0].weight, UINT32_MAX);
	cr_assert_eq(p->samples[1].weight, 4);
	cr_assert_eq(prs_recorder_close(r, NULL, &err), 0);
}

Test(aggregate, only_before_the_first_sample, .init = unit_tmpdir_make, .fini = unit_tmpdir_remove)
{
	char path[128];
	struct prs_recorder *r;
	struct prs_err err;
	struct prs_sample s = { .tid = 7, .state = PRS_STATE_RUNNING, .syscall = -1, .weight = 1 };

	snprintf(path, sizeof(path), "%s/p.pyrs", unit_tmpdir);
	cr_assert_eq(prs_recorder_open(path, &r, &err), 0);
	cr_assert_eq(prs_profile_sample(prs_recorder_profile(r), &s), 0);
	cr_assert_eq(prs_recorder_aggregate(r), -EINVAL);
	cr_assert_eq(prs_recorder_close(r, NULL, &err), 0);
}

/* ---- the reader's sums (PRS_PYRS_SUMS) ---- */

/* What an output (call, writing to f, its error in err) writes: text, len bytes; rc 0 asserted. */
#define CAPTURE(text, len, call)                                                                   \
	do {                                                                                       \
		FILE *f = open_memstream(&(text), &(len));                                        \
                                                                                                   \
		cr_assert(f);                                                                      \
		cr_assert_eq((call), 0, "%s", err.msg);                                            \
		fclose(f);                                                                         \
	} while (0)

static void append_line(void *arg, const char *line)
{
	FILE *f = arg;

	fprintf(f, "%s\n", line);
}

/* Everything made of sums that p gives: folded views, pprof, flame graph SVGs, diff, facts;
 * without threads (a profile read with PRS_PYRS_SUMS_NO_THREADS) neither the per-thread view
 * nor pprof (its thread labels). */
static char *outputs(const struct prs_profile *p, bool threads)
{
	static const struct prs_view_opts views[] = {
		{ .view = PRS_VIEW_CPU },
		{ .view = PRS_VIEW_WALL, .per_process = true, .per_thread = true, .lines = true },
		{ .view = PRS_VIEW_WALL, .per_process = true, .merge_processes = true, .python_stacks = true },
	};
	char *all = NULL, *t;
	size_t alen = 0, tlen;
	FILE *out = open_memstream(&all, &alen);
	struct prs_err err;
	struct prs_facts fa;
	struct prs_diff *d;

	cr_assert(out);
	for (size_t v = 0; v < sizeof(views) / sizeof(views[0]); v++) {
		struct prs_fg *fg;

		if (!threads && views[v].per_thread)
			continue;
		fg = prs_fg_new();
		fputs(t = folded(p, &views[v]), out);
		free(t);
		if (threads) {
			CAPTURE(t, tlen, prs_export_pprof_view(p, &views[v], f, &err));
			fprintf(out, "pprof %zu bytes, %016llx\n", tlen, (unsigned long long)prs_hash_bytes(t, tlen));
			free(t);
		}
		cr_assert_eq(prs_fg_from_profile(fg, p, &views[v], &err), 0, "%s", err.msg);
		CAPTURE(t, tlen, prs_fg_write_svg(fg, f, NULL, &err));
		fputs(t, out);
		free(t);
		prs_fg_free(fg);
	}
	cr_assert_eq(prs_diff_compute(p, p, &(struct prs_diff_opts){ .view = PRS_VIEW_WALL, .run_noise = -1 },
				      &d, &err), 0, "%s", err.msg);
	prs_diff_summary(d, append_line, out);
	prs_diff_free(d);
	cr_assert_eq(prs_facts_build(p, &fa, &err), 0, "%s", err.msg);
	fprintf(out, "facts: %zu threads, %.17g samples, tick %.17g s, copy %.17g, cpu %.17g %.17g %.17g\n",
		fa.nthreads, fa.samples, fa.tick_s, fa.copy_share, fa.cpu_python, fa.cpu_native, fa.cpu_kernel);
	for (size_t i = 0; i < fa.nthreads; i++) {
		const struct prs_thread_facts *x = &fa.threads[i];

		fprintf(out, "thread %d (pid %d, python %d, syscall %d): %.17g %.17g %.17g %.17g %.17g",
			x->tid, x->pid, x->python, x->wait_syscall, x->samples, x->wall_s, x->gil_hold,
			x->gil_wait, x->wait_syscall_share);
		for (int r = 0; r < PRS_R__COUNT; r++)
			fprintf(out, " %.17g", x->t[r]);
		fputc('\n', out);
	}
	prs_facts_release(&fa);
	fclose(out);
	return all;
}

/* The sums of a read without threads: records of tid 0, as many samples in them as in the
 * threads' sums, both no more than the sums with threads. */
static void merged_records(const struct prs_profile *m, const struct prs_profile *sums, const char *what)
{
	uint64_t w = 0, wt = 0;

	cr_assert_leq(m->nsamples, sums->nsamples, "%s", what);
	cr_assert_leq(m->nthread_sums, sums->nsamples, "%s", what);
	cr_assert_eq(sums->thread_sums, NULL, "%s", what);
	for (size_t i = 0; i < m->nsamples; i++) {
		cr_assert_eq(m->samples[i].tid, 0, "%s: record %zu", what, i);
		w += m->samples[i].weight;
	}
	for (size_t i = 0; i < m->nthread_sums; i++)
		wt += m->thread_sums[i].weight;
	cr_assert_eq(wt, w, "%s", what);
}

/*
 * Reads data three ways (every sample, as sums, as sums without threads): the same outcome (error
 * and message, or warning, completeness, damage offset, the samples counted) and the same outputs
 * (those that keep no thread apart, without threads); the sums hold fewer records when samples
 * repeat. Returns the full read's sample count (0 on error).
 */
static size_t same_both_ways(const char *data, size_t len, const char *what)
{
	struct prs_profile *full, *sums, *m;
	struct prs_err ef = { 0 }, es = { 0 }, em = { 0 };
	char wf[512], ws[512], wm[512];
	int rf = prs_pyrs_read_mem(data, len, &full, wf, sizeof(wf), &ef);
	int rs = prs_pyrs_read_mem_flags(data, len, PRS_PYRS_SUMS, &sums, ws, sizeof(ws), &es);
	int rm = prs_pyrs_read_mem_flags(data, len, PRS_PYRS_SUMS_NO_THREADS, &m, wm, sizeof(wm), &em);
	size_t n;

	cr_assert_eq(rs, rf, "%s: %s / %s", what, es.msg, ef.msg);
	cr_assert_eq(rm, rf, "%s: %s / %s", what, em.msg, ef.msg);
	if (rf) {
		cr_assert_str_eq(es.msg, ef.msg, "%s", what);
		cr_assert_str_eq(em.msg, ef.msg, "%s", what);
		return 0;
	}
	cr_assert_str_eq(ws, wf, "%s", what);
	cr_assert_str_eq(wm, wf, "%s", what);
	cr_assert_eq(m->complete, full->complete, "%s", what);
	cr_assert_eq(m->damaged_at, full->damaged_at, "%s", what);
	cr_assert_eq(m->sample_count, full->nsamples, "%s", what);
	cr_assert_eq(m->sample_times, full->sample_times, "%s", what);
	merged_records(m, sums, what);
	cr_assert_eq(sums->complete, full->complete, "%s", what);
	cr_assert_eq(sums->damaged_at, full->damaged_at, "%s", what);
	cr_assert_eq(sums->sample_count, full->nsamples, "%s", what);
	cr_assert_eq(sums->sample_times, full->sample_times, "%s", what);
	cr_assert_leq(sums->nsamples, full->nsamples, "%s", what);
	if (full->nsamples) {
		char *a = outputs(full, true), *b = outputs(sums, true);

		cr_assert_str_eq(b, a, "%s: the outputs differ", what);
		free(a);
		free(b);
		a = outputs(full, false);
		b = outputs(m, false);
		cr_assert_str_eq(b, a, "%s: the outputs without threads differ", what);
		free(a);
		free(b);
	}
	n = full->nsamples;
	prs_profile_free(full);
	prs_profile_free(sums);
	prs_profile_free(m);
	return n;
}

Test(sums, the_recorders_records, .init = unit_tmpdir_make, .fini = unit_tmpdir_remove)
{
	struct prs_profile *agg, *back, *sums;
	char path[128], warn[256];
	struct prs_err err;

	both(&agg, &back);
	snprintf(path, sizeof(path), "%s/agg.pyrs", unit_tmpdir);
	cr_assert_eq(prs_pyrs_read_flags(path, PRS_PYRS_SUMS, &sums, warn, sizeof(warn), &err), 0, "%s", err.msg);
	cr_assert(sums->complete);
	cr_assert_eq(sums->sample_count, 2400);
	cr_assert_eq(sums->nsamples, agg->nsamples);
	for (size_t i = 0; i < agg->nsamples; i++)
		cr_assert_eq(memcmp(&sums->samples[i], &agg->samples[i], sizeof(agg->samples[i])), 0,
			     "record %zu", i);
	/* nothing pending for a writer: the file has the samples; read, it takes no more */
	cr_assert_null(prs_profile_pending(sums, &(size_t){ 0 }));
	cr_assert_eq(prs_profile_sample(sums, &sums->samples[0]), -EINVAL);
	cr_assert_eq(sums->sample_count, 2400);
	prs_profile_free(sums);
	prs_profile_free(agg);
	prs_profile_free(back);
}

Test(sums, outputs_equal_the_full_read, .init = unit_tmpdir_make, .fini = unit_tmpdir_remove)
{
	static const char *const fixtures[] = { "tests/fixtures/profile/tree.pyrs",
						"tests/fixtures/profile/v1-small.pyrs" };
	struct prs_profile *agg, *back;
	char path[128], *data;
	size_t len;

	both(&agg, &back);
	snprintf(path, sizeof(path), "%s/agg.pyrs", unit_tmpdir);
	data = read_all(path, &len);
	cr_assert_eq(same_both_ways(data, len, "recording"), 2400);
	free(data);
	for (size_t k = 0; k < sizeof(fixtures) / sizeof(fixtures[0]); k++) {
		data = read_all(fixtures[k], &len);
		cr_assert_gt(same_both_ways(data, len, fixtures[k]), 0);
		free(data);
	}
	prs_profile_free(agg);
	prs_profile_free(back);
}

/* Cut short and damaged: what precedes the cut or the damage is kept, the same both ways. */
Test(sums, cut_and_damaged_files, .init = unit_tmpdir_make, .fini = unit_tmpdir_remove)
{
	struct prs_profile *agg, *back;
	char path[128], what[64], *data, *bad;
	size_t len, kept = 0, some = 0;

	both(&agg, &back);
	snprintf(path, sizeof(path), "%s/agg.pyrs", unit_tmpdir);
	data = read_all(path, &len);
	bad = malloc(len);
	cr_assert(bad);
	for (size_t k = 1; k <= 7; k++) {
		size_t at = len * k / 8;

		snprintf(what, sizeof(what), "cut at %zu of %zu", at, len);
		kept = same_both_ways(data, at, what);
		some += kept > 0 && kept < 2400;
		memcpy(bad, data, len);
		for (size_t j = 0; j < 64 && at + j < len; j++)
			bad[at + j] ^= 0x5a;
		snprintf(what, sizeof(what), "64 bytes flipped at %zu of %zu", at, len);
		kept = same_both_ways(bad, len, what);
		some += kept > 0 && kept < 2400;
	}
	cr_assert_geq(some, 8, "most cuts and flips keep some samples, not all (%zu did)", some);
	free(bad);
	free(data);
	prs_profile_free(agg);
	prs_profile_free(back);
}

/*
 * Without threads, the threads' sums keep apart what the facts tell of a thread from its stacks:
 * whether any of its samples had a Python frame. Thread 11 ran native code only, thread 12 native
 * code first and then Python (the same state: two records, one per kind of stack), thread 13
 * Python, blocked in two syscalls.
 */
Test(sums, threads_without_stacks_keep_the_python_threads, .init = unit_tmpdir_make,
     .fini = unit_tmpdir_remove)
{
	static const int32_t tids[] = { 11, 12, 12, 13, 13, 13 };
	struct prs_recorder *r;
	struct prs_profile *p, *m;
	struct prs_facts fa;
	struct prs_err err;
	char path[128], warn[256], *data;
	uint32_t native, py, file;
	size_t len, twelve = 0;

	snprintf(path, sizeof(path), "%s/kinds.pyrs", unit_tmpdir);
	cr_assert_eq(prs_recorder_open(path, &r, &err), 0, "%s", err.msg);
	p = prs_recorder_profile(r);
	prs_profile_meta(p, "rate_hz", "100");
	file = S(p, "app.py");
	native = prs_profile_stack(p, 0, prs_profile_named_frame(p, PRS_KIND_NATIVE, S(p, "main"), 0, 0));
	native = prs_profile_stack(p, native, prs_profile_named_frame(p, PRS_KIND_NATIVE, S(p, "work"), 0, 0));
	py = prs_profile_stack(p, native, prs_profile_named_frame(p, PRS_KIND_PYTHON, S(p, "run"), file, 3));
	py = prs_profile_stack(p, py, prs_profile_named_frame(p, PRS_KIND_NATIVE, S(p, "memcpy"), 0, 0));
	for (uint64_t t = 0; t < 60; t++)
		for (size_t k = 0; k < sizeof(tids) / sizeof(tids[0]); k++) {
			struct prs_sample s = { .time_ns = t * 10000000, .tid = tids[k], .pid = 10,
						.stack = tids[k] == 11 || (tids[k] == 12 && t < 30) ? native : py,
						.state = PRS_STATE_RUNNING, .syscall = -1, .weight = 1 };

			if (tids[k] == 13 && k == 5) {
				s.state = PRS_STATE_BLOCKED;
				s.syscall = t % 3 ? 7 : 202;
			}
			cr_assert_eq(prs_profile_sample(p, &s), 0);
		}
	cr_assert_eq(prs_recorder_close(r, NULL, &err), 0, "%s", err.msg);
	data = read_all(path, &len);
	cr_assert_eq(same_both_ways(data, len, "kinds"), 360);
	free(data);

	cr_assert_eq(prs_pyrs_read_flags(path, PRS_PYRS_SUMS_NO_THREADS, &m, warn, sizeof(warn), &err), 0,
		     "%s", err.msg);
	for (size_t i = 0; i < m->nthread_sums; i++)
		twelve += m->thread_sums[i].tid == 12;
	cr_assert_eq(twelve, 2, "thread 12: a record for its native stacks, one for its Python ones");
	cr_assert_eq(m->nthread_sums, 1 + 2 + 3); /* 13: running, and blocked in two syscalls */
	cr_assert_eq(prs_facts_build(m, &fa, &err), 0, "%s", err.msg);
	cr_assert_eq(fa.nthreads, 3);
	for (size_t i = 0; i < fa.nthreads; i++) {
		cr_assert_eq(fa.threads[i].tid, (int32_t)(11 + i), "threads in first-seen order");
		cr_assert_eq(fa.threads[i].python, i > 0, "thread %d", fa.threads[i].tid);
		cr_assert_eq(fa.threads[i].samples, i == 0 ? 60 : i == 1 ? 120 : 180);
	}
	cr_assert_eq(fa.threads[2].wait_syscall, 7);
	prs_facts_release(&fa);
	prs_profile_free(m);
}
