/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for `pyrsprof top`'s table (src/cli/top_table.c) on a profile built by hand, whose
 * counts are worked out here: own and total per function and per line, a recursive function
 * counted once per sample in its total, Python frames only by default (the native leaf above a
 * Python frame is not the own of the sample), the filters, the GIL counts, the sort, and that each
 * call sums only the samples added since the previous one.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/top.h"
#include "pyrsprof/profile.h"

#include "util/banned.h"

struct fixture {
	struct prs_profile *p;
	uint32_t main1, f10, f11, native, a, b, c;
};

static uint32_t S(struct prs_profile *p, const char *s)
{
	return prs_profile_string(p, s, strlen(s));
}

static uint32_t stack(struct prs_profile *p, const uint32_t *frames, size_t n)
{
	uint32_t s = 0;

	for (size_t i = 0; i < n; i++)
		s = prs_profile_stack(p, s, frames[i]);
	return s;
}

static void add(struct prs_profile *p, uint32_t stk, int32_t tid, uint8_t state, uint8_t flags, int n)
{
	for (int i = 0; i < n; i++) {
		struct prs_sample s = { .time_ns = 1, .tid = tid, .state = state, .syscall = -1, .stack = stk,
					.weight = 1, .flags = flags };

		cr_assert_eq(prs_profile_sample(p, &s), 0);
	}
}

/* Stacks, root first: A = main:1 > f:10; B = main:1 > f:10 > f:11 (f recursive); C = main:1 >
 * f:11 > PyEval (native). */
static void build(struct fixture *x)
{
	struct prs_profile *p = prs_profile_new();
	uint32_t file = S(p, "/src/a.py");

	cr_assert_not_null(p);
	x->p = p;
	x->main1 = prs_profile_named_frame(p, PRS_KIND_PYTHON, S(p, "main"), file, 1);
	x->f10 = prs_profile_named_frame(p, PRS_KIND_PYTHON, S(p, "f"), file, 10);
	x->f11 = prs_profile_named_frame(p, PRS_KIND_PYTHON, S(p, "f"), file, 11);
	x->native = prs_profile_named_frame(p, PRS_KIND_NATIVE, S(p, "PyEval"), S(p, "ceval.c"), 5);
	x->a = stack(p, (uint32_t[]){ x->main1, x->f10 }, 2);
	x->b = stack(p, (uint32_t[]){ x->main1, x->f10, x->f11 }, 3);
	x->c = stack(p, (uint32_t[]){ x->main1, x->f11, x->native }, 3);
	add(p, x->a, 7, PRS_STATE_RUNNING, 0, 3);
	add(p, x->b, 7, PRS_STATE_RUNNING, 0, 1);
	add(p, x->c, 8, PRS_STATE_RUNNING, PRS_SAMPLE_GIL, 2);
	add(p, x->a, 8, PRS_STATE_BLOCKED, PRS_SAMPLE_GIL_WAIT, 4);
}

/* The row of frame's function (lines: its line) or NULL. */
static const struct cli_top_row *find(const struct cli_top_table *t, const struct prs_profile *p, uint32_t frame,
				      bool lines)
{
	const struct cli_top_rows *r = &t->rows[lines];

	for (size_t i = 0; i < r->n; i++) {
		const struct prs_frame *a = &p->frames[r->v[i].frame], *b = &p->frames[frame];

		if (a->name == b->name && a->file == b->file && (!lines || a->line == b->line))
			return &r->v[i];
	}
	return NULL;
}

static void expect(const struct cli_top_table *t, const struct prs_profile *p, uint32_t frame, bool lines,
		   uint64_t own, uint64_t total)
{
	const struct cli_top_row *r = find(t, p, frame, lines);

	cr_assert_not_null(r, "no row for frame %u", frame);
	cr_expect_eq(r->own, own, "frame %u (lines %d): own %llu, want %llu", frame, lines,
		     (unsigned long long)r->own, (unsigned long long)own);
	cr_expect_eq(r->total, total, "frame %u (lines %d): total %llu, want %llu", frame, lines,
		     (unsigned long long)r->total, (unsigned long long)total);
}

Test(top_table, functions_and_lines)
{
	struct cli_top_filter f = { 0 };
	struct cli_top_table t;
	struct fixture x;

	build(&x);
	cli_top_table_init(&t, &f);
	cr_assert_eq(cli_top_table_add(&t, x.p), 0);
	/* the 4 blocked samples are not counted (not --idle) */
	cr_expect_eq(t.now, 6);
	cr_expect_eq(t.now_gil, 2);
	cr_expect_eq(t.now_gil_wait, 0);
	/* f: own in every sample (C's native leaf is not shown), total once per sample (B has it twice) */
	expect(&t, x.p, x.f10, false, 6, 6);
	expect(&t, x.p, x.main1, false, 0, 6);
	cr_expect_null(find(&t, x.p, x.native, false));
	expect(&t, x.p, x.f10, true, 3, 4);
	expect(&t, x.p, x.f11, true, 3, 3);
	cli_top_table_release(&t);
	prs_profile_free(x.p);
}

Test(top_table, only_new_samples_are_summed)
{
	struct cli_top_filter f = { 0 };
	struct cli_top_table t;
	struct fixture x;
	const struct cli_top_row *r;

	build(&x);
	cli_top_table_init(&t, &f);
	cr_assert_eq(cli_top_table_add(&t, x.p), 0);
	cr_assert_eq(cli_top_table_add(&t, x.p), 0);
	cr_expect_eq(t.now, 0);
	cr_expect_eq(t.total, 6);
	r = find(&t, x.p, x.f10, false);
	cr_expect_eq(r->own_now, 0);
	cr_expect_eq(r->own, 6);
	add(x.p, x.a, 7, PRS_STATE_RUNNING, 0, 5);
	cr_assert_eq(cli_top_table_add(&t, x.p), 0);
	cr_expect_eq(t.now, 5);
	r = find(&t, x.p, x.f10, true);
	cr_expect_eq(r->own_now, 5);
	cr_expect_eq(r->own, 8);
	cli_top_table_reset(&t);
	cr_expect_eq(find(&t, x.p, x.f10, true)->own, 0);
	cr_expect_eq(t.total, 0);
	cli_top_table_release(&t);
	prs_profile_free(x.p);
}

Test(top_table, filters)
{
	struct cli_top_table t;
	struct fixture x;

	build(&x);
	cli_top_table_init(&t, &(struct cli_top_filter){ .native = true });
	cr_assert_eq(cli_top_table_add(&t, x.p), 0);
	expect(&t, x.p, x.native, false, 2, 2);
	expect(&t, x.p, x.f10, false, 4, 6);
	cli_top_table_release(&t);

	cli_top_table_init(&t, &(struct cli_top_filter){ .tid = 8, .idle = true });
	cr_assert_eq(cli_top_table_add(&t, x.p), 0);
	cr_expect_eq(t.now, 6);
	cr_expect_eq(t.now_active, 2);
	cr_expect_eq(t.now_gil_wait, 4);
	expect(&t, x.p, x.f10, true, 4, 4);
	cli_top_table_release(&t);

	cli_top_table_init(&t, &(struct cli_top_filter){ .gil = true });
	cr_assert_eq(cli_top_table_add(&t, x.p), 0);
	cr_expect_eq(t.now, 2);
	cli_top_table_release(&t);

	cli_top_table_init(&t, &(struct cli_top_filter){ .pid = 99, .root_pid = 5 });
	cr_assert_eq(cli_top_table_add(&t, x.p), 0);
	cr_expect_eq(t.now, 0); /* pid 0 samples are the root's, 5 */
	cli_top_table_release(&t);
	prs_profile_free(x.p);
}

Test(top_table, written_sorted)
{
	struct cli_top_filter f = { 0 };
	struct cli_top_table t;
	struct fixture x;
	char *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);
	struct cli_top_view v = { .sort = TOP_SORT_TOTAL_TIME, .lines = true, .rate_hz = 100, .eol = "\n" };

	build(&x);
	cli_top_table_init(&t, &f);
	cr_assert_eq(cli_top_table_add(&t, x.p), 0);
	cli_top_table_write(&t, x.p, &v, out);
	fclose(out);
	/* main:1 is on all 6 stacks, then f:10 (4), f:11 (3); %Own of the last second: 3 of 6 */
	cr_expect(strstr(buf, "[TotalTime]") != NULL, "%s", buf);
	cr_expect(strstr(buf, "\n   0.0%  100.0%      0.00s      0.06s  main (a.py:1)\n"
			      "  50.0%   66.7%      0.03s      0.04s  f (a.py:10)\n"
			      "  50.0%   50.0%      0.03s      0.03s  f (a.py:11)\n") != NULL, "%s", buf);
	free(buf);
	cli_top_table_release(&t);
	prs_profile_free(x.p);
}
