/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for folded stacks: reading (fixtures, messy input, every malformed case with its
 * "FILE:LINE: ..." error, binary junk), exporting (views, per-thread roots, file:line, off-CPU
 * leaves, names that would break the format) and the read -> export round trip. Expected texts
 * are written by hand from the folded format's definition, not copied from the output.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pyrsprof/export.h"
#include "pyrsprof/profile.h"

#include "util/banned.h"

#define FIXTURES "tests/fixtures/profile/"

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *d;
	long n;

	cr_assert_not_null(f, "%s (run the tests from the repository root)", path);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	d = calloc(1, (size_t)n + 1);
	cr_assert_eq(fread(d, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	if (len)
		*len = (size_t)n;
	return d;
}

static int read_text(const char *text, struct prs_profile **p, struct prs_err *err)
{
	FILE *f = fmemopen((void *)text, strlen(text), "r");
	int rc;

	cr_assert_not_null(f);
	rc = prs_folded_read(f, "in.folded", p, err);
	fclose(f);
	return rc;
}

#define PER_THREAD 1u
#define LINES 2u

/* Exports p to a malloc'd string (flags: PER_THREAD, LINES). */
static char *export(const struct prs_profile *p, enum prs_view view, unsigned flags)
{
	struct prs_view_opts o = { .view = view, .per_thread = flags & PER_THREAD,
				   .lines = flags & LINES };
	struct prs_err err;
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	cr_assert_not_null(f);
	cr_assert_eq(prs_export_folded(p, &o, f, &err), 0, "%s", err.msg);
	fclose(f);
	return buf;
}

Test(folded, fixture_round_trip)
{
	struct prs_profile *p;
	struct prs_err err;
	char *want = slurp(FIXTURES "sample.folded", NULL), *got;
	FILE *f = fopen(FIXTURES "sample.folded", "r");

	cr_assert_eq(prs_folded_read(f, "sample.folded", &p, &err), 0, "%s", err.msg);
	fclose(f);
	/* the fixture is sorted (LC_ALL=C sort) with one line per stack: export reproduces it */
	got = export(p, PRS_VIEW_CPU, 0);
	cr_assert_str_eq(got, want);
	free(got);
	got = export(p, PRS_VIEW_WALL, 0);
	cr_assert_str_eq(got, want);
	free(got);
	free(want);
	prs_profile_free(p);
}

Test(folded, kernel_annotation_and_weights)
{
	struct prs_profile *p;
	struct prs_err err;
	uint32_t out[8];
	size_t n, i;
	uint64_t total = 0;

	cr_assert_eq(read_text("main;sys_read_[k];x_[j] 3\nbig 5000000000\n", &p, &err), 0, "%s", err.msg);
	cr_assert_eq(p->nsamples, 3); /* 3, and 5e9 split into u32 weights */
	n = prs_profile_stack_frames(p, p->samples[0].stack, out, 8);
	cr_assert_eq(n, 3);
	cr_assert_str_eq(p->strings[p->frames[out[1]].name], "sys_read");
	cr_assert_eq(p->frames[out[1]].kind, PRS_KIND_KERNEL);
	cr_assert_str_eq(p->strings[p->frames[out[2]].name], "x_[j]");
	cr_assert_eq(p->frames[out[2]].kind, PRS_KIND_UNKNOWN);
	cr_assert_eq(p->samples[0].weight, 3);
	for (i = 1; i < p->nsamples; i++)
		total += p->samples[i].weight;
	cr_assert_eq(total, 5000000000ULL);
	prs_profile_free(p);
}

Test(folded, messy_input)
{
	struct prs_profile *p;
	struct prs_err err;
	FILE *f = fopen(FIXTURES "messy.folded", "r");
	char *want = slurp(FIXTURES "messy.expected", NULL), *got;

	cr_assert_eq(prs_folded_read(f, "messy.folded", &p, &err), 0, "%s", err.msg);
	fclose(f);
	got = export(p, PRS_VIEW_CPU, 0);
	cr_assert_str_eq(got, want);
	free(got);
	free(want);
	prs_profile_free(p);
}

/* A byte order mark before the first line (a file saved by a Windows editor) is no part of its
 * first frame: "main" stays one root, not "\ufeffmain" beside "main". */
Test(folded, byte_order_mark_is_skipped)
{
	struct prs_profile *p;
	struct prs_err err;
	char *got;

	cr_assert_eq(read_text("\xef\xbb\xbfmain;a 5\r\nmain;b 3\n", &p, &err), 0, "%s", err.msg);
	got = export(p, PRS_VIEW_CPU, 0);
	cr_assert_str_eq(got, "main;a 5\nmain;b 3\n");
	free(got);
	prs_profile_free(p);
}

Test(folded, malformed_inputs)
{
	static const struct { const char *text, *msg; } cases[] = {
		{ "a;b\n", "in.folded:1: no count" },
		{ "a;b 3\na;b x\n", "in.folded:2: count \"x\" is not a non-negative integer" },
		{ "a;b -3\n", "in.folded:1: count \"-3\" is not a non-negative integer" },
		{ "a;b 3.5\n", "in.folded:1: count \"3.5\" is not a non-negative integer" },
		{ "a;b 1\n\n\na;;b 3\n", "in.folded:4: empty frame name (frame 2)" },
		{ ";a 3\n", "in.folded:1: empty frame name (frame 1)" },
		{ "a; 3\n", "in.folded:1: empty frame name (frame 2)" },
		{ " 3\n", "in.folded:1: empty frame name (frame 1)" },
		{ "a 18446744073709551616\n", "in.folded:1: count overflows 64 bits" },
		{ "", "in.folded: no stacks" },
		{ "\n \r\n\t\n", "in.folded: no stacks" },
		{ "12\n", "in.folded:1: no count" },
	};
	struct prs_profile *p;
	struct prs_err err;
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		cr_assert_eq(read_text(cases[i].text, &p, &err), -EINVAL, "case %zu", i);
		cr_assert_null(p);
		cr_assert_eq(strncmp(err.msg, cases[i].msg, strlen(cases[i].msg)), 0, "case %zu: got \"%s\"",
			     i, err.msg);
	}
	/* a count that fits 64 bits but would make billions of samples */
	cr_assert_eq(read_text("a 18446744073709551615\n", &p, &err), -EINVAL);
	cr_assert(strstr(err.msg, "in.folded:1: count 18446744073709551615 is too large"), "%s", err.msg);
}

Test(folded, binary_junk)
{
	unsigned seed = 4242, i, round;
	char junk[2048];
	struct prs_profile *p;
	struct prs_err err;

	for (round = 0; round < 200; round++) {
		FILE *f;
		int rc;
		size_t n = (size_t)(rand_r(&seed) % (int)sizeof(junk));

		for (i = 0; i < n; i++)
			junk[i] = (char)rand_r(&seed);
		f = fmemopen(junk, n ? n : 1, "r");
		rc = prs_folded_read(f, "junk", &p, &err);
		fclose(f);
		cr_assert(rc == 0 || rc == -EINVAL, "round %u: %d", round, rc);
		if (rc == 0) {
			free(export(p, PRS_VIEW_WALL, PER_THREAD));
			prs_profile_free(p);
		} else {
			cr_assert_null(strchr(err.msg, '\n'));
			cr_assert_eq(strncmp(err.msg, "junk", 4), 0);
		}
	}
	/* a PNG header: a NUL byte on line 1 */
	{
		static const char png[] = "\x89PNG\r\n\x1a\n\0\0\0\rIHDR";
		FILE *f = fmemopen((void *)png, sizeof(png) - 1, "r");

		cr_assert_eq(prs_folded_read(f, "x.png", &p, &err), -EINVAL);
		fclose(f);
		cr_assert(strstr(err.msg, "x.png:1:") || strstr(err.msg, "x.png:2:"), "%s", err.msg);
	}
}

static uint32_t S(struct prs_profile *p, const char *s)
{
	return prs_profile_string(p, s, strlen(s));
}

Test(folded, hostile_names_stay_parsable)
{
	struct prs_profile *p = prs_profile_new(), *back;
	struct prs_err err;
	uint32_t a, b, c, d;
	char *got, *again;

	a = prs_profile_named_frame(p, PRS_KIND_PYTHON, S(p, "semi;colon"), 0, 0);
	b = prs_profile_named_frame(p, PRS_KIND_PYTHON, S(p, "new\nline\r"), 0, 0);
	c = prs_profile_named_frame(p, PRS_KIND_PYTHON, S(p, "q\"<&>' 12"), 0, 0);
	d = prs_profile_named_frame(p, PRS_KIND_PYTHON, 0, 0, 0);
	prs_profile_sample(p, &(struct prs_sample){ .syscall = -1, .weight = 4,
		.stack = prs_profile_stack(p, prs_profile_stack(p, prs_profile_stack(p,
			prs_profile_stack(p, 0, a), b), d), c) });
	got = export(p, PRS_VIEW_CPU, 0);
	cr_assert_str_eq(got, "semi_colon;new_line_;[unknown];q\"<&>' 12 4\n");
	cr_assert_eq(read_text(got, &back, &err), 0, "%s", err.msg);
	again = export(back, PRS_VIEW_CPU, 0);
	cr_assert_str_eq(again, got);
	free(got);
	free(again);
	prs_profile_free(back);
	prs_profile_free(p);
}

/* Every character that some reader ends a line at (Python's str.splitlines(): \x0b \x0c
 * \x1c-\x1e \x85 U+2028 U+2029) or that is a control (a name set with code.replace() may hold
 * any of them; seen once in a spawn worker's import stack) is written as '_', a bad byte as
 * U+FFFD; other Unicode is kept. */
Test(folded, line_separators_and_controls_become_underscores)
{
	static const char *const names[] = {
		"fs\x1csep", "ls\xe2\x80\xa8sep", "ps\xe2\x80\xa9y", "vt\x0b" "ff\x0c", "nel\xc2\x85x",
		"tab\tesc\x1b[31m\x7f", "bad\xff\xe2\x80", "caf\xc3\xa9 \xe2\x80\xa6",
	};
	struct prs_profile *p = prs_profile_new(), *back;
	struct prs_err err;
	uint32_t s = 0;
	char *got, *again;

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		s = prs_profile_stack(p, s, prs_profile_named_frame(p, PRS_KIND_PYTHON, S(p, names[i]), 0, 0));
	prs_profile_sample(p, &(struct prs_sample){ .syscall = -1, .weight = 2, .stack = s });
	got = export(p, PRS_VIEW_CPU, 0);
	cr_assert_str_eq(got, "fs_sep;ls_sep;ps_y;vt_ff_;nel_x;tab_esc_[31m_;"
			      "bad\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd;caf\xc3\xa9 \xe2\x80\xa6 2\n");
	cr_assert_eq(read_text(got, &back, &err), 0, "%s", err.msg);
	again = export(back, PRS_VIEW_CPU, 0);
	cr_assert_str_eq(again, got);
	free(got);
	free(again);
	prs_profile_free(back);
	prs_profile_free(p);
}

/* A small wall-clock profile: two threads, on and off CPU. */
static struct prs_profile *views_profile(void)
{
	struct prs_profile *p = prs_profile_new();
	struct prs_mapping m = { .start = 0x1000, .end = 0x2000 };
	uint32_t main_f, work_f, raw, s_main, s_work, s_raw;

	main_f = prs_profile_named_frame(p, PRS_KIND_PYTHON, S(p, "main"), S(p, "app.py"), 3);
	work_f = prs_profile_named_frame(p, PRS_KIND_PYTHON, S(p, "work"), S(p, "app.py"), 0);
	m.path = S(p, "/lib/libz.so");
	prs_profile_mapping(p, &m);
	raw = prs_profile_raw_frame(p, 0, 0x1234, false);
	s_main = prs_profile_stack(p, 0, main_f);
	s_work = prs_profile_stack(p, s_main, work_f);
	s_raw = prs_profile_stack(p, s_work, raw);
	prs_profile_thread(p, 10, S(p, "MainThread"));
	prs_profile_sample(p, &(struct prs_sample){ .tid = 10, .syscall = -1, .stack = s_work, .weight = 1 });
	prs_profile_sample(p, &(struct prs_sample){ .tid = 10, .syscall = -1, .stack = s_work, .weight = 2 });
	prs_profile_sample(p, &(struct prs_sample){ .tid = 11, .syscall = -1, .stack = s_raw, .weight = 1 });
	prs_profile_sample(p, &(struct prs_sample){ .tid = 10, .state = PRS_STATE_BLOCKED,
		.syscall = 230, .stack = s_main, .weight = 5 });
	prs_profile_sample(p, &(struct prs_sample){ .tid = 11, .state = PRS_STATE_BLOCKED,
		.syscall = 0, .stack = s_main, .weight = 1 });
	prs_profile_sample(p, &(struct prs_sample){ .tid = 11, .state = PRS_STATE_DISK,
		.syscall = -1, .stack = s_main, .weight = 1 });
	prs_profile_sample(p, &(struct prs_sample){ .tid = 11, .state = PRS_STATE_BLOCKED,
		.syscall = 399, .stack = s_main, .weight = 2 });
	return p;
}

Test(folded, views_threads_lines)
{
	struct prs_profile *p = views_profile();
	char *got;

	got = export(p, PRS_VIEW_CPU, 0);
	cr_assert_str_eq(got, "main;work 3\n"
			      "main;work;libz.so+0x234 1\n");
	free(got);
	got = export(p, PRS_VIEW_WALL, 0);
	cr_assert_str_eq(got, "main;[clock_nanosleep] 5\n"
			      "main;[disk wait] 1\n"
			      "main;[read] 1\n"
			      "main;[syscall 399] 2\n"
			      "main;work 3\n"
			      "main;work;libz.so+0x234 1\n");
	free(got);
	got = export(p, PRS_VIEW_WALL, PER_THREAD | LINES);
	cr_assert_str_eq(got, "thread 10 (MainThread);main (app.py:3);[clock_nanosleep] 5\n"
			      "thread 10 (MainThread);main (app.py:3);work (app.py) 3\n"
			      "thread 11;main (app.py:3);[disk wait] 1\n"
			      "thread 11;main (app.py:3);[read] 1\n"
			      "thread 11;main (app.py:3);[syscall 399] 2\n"
			      "thread 11;main (app.py:3);work (app.py);libz.so+0x234 1\n");
	free(got);
	prs_profile_free(p);
}

Test(folded, symbolized_expansion_in_export)
{
	struct prs_profile *p = views_profile();
	uint32_t ids[2];
	char *got;

	/* frame 2 is the raw frame: replaced by its inline chain */
	ids[0] = prs_profile_named_frame(p, PRS_KIND_RUST, S(p, "z::outer"), 0, 0);
	ids[1] = prs_profile_named_frame(p, PRS_KIND_RUST, S(p, "z::inner"), 0, 0);
	cr_assert_eq(prs_profile_expand(p, 2, ids, 2), 0);
	got = export(p, PRS_VIEW_CPU, 0);
	cr_assert_str_eq(got, "main;work 3\n"
			      "main;work;z::outer;z::inner 1\n");
	free(got);
	prs_profile_free(p);
}

Test(folded, long_lines_and_no_final_newline)
{
	size_t n = (4u << 20) + 10, i;
	char *big = malloc(n + 1);
	struct prs_profile *p;
	struct prs_err err;
	FILE *f;

	/* 4 MiB of junk without a newline: refused without reading it all into one line */
	for (i = 0; i < n; i++)
		big[i] = 'a';
	f = fmemopen(big, n, "r");
	cr_assert_eq(prs_folded_read(f, "big", &p, &err), -EINVAL);
	fclose(f);
	cr_assert_str_eq(err.msg, "big:1: line longer than 4194304 bytes");
	free(big);
	/* a last line without its newline is a line */
	cr_assert_eq(read_text("a;b 1\na;c 2", &p, &err), 0, "%s", err.msg);
	cr_assert_eq(p->nsamples, 2);
	cr_assert_eq(p->samples[1].weight, 2);
	prs_profile_free(p);
}

Test(folded, too_many_frames)
{
	size_t n = 65537, i;
	char *line = malloc(n * 2 + 8), *c = line;
	struct prs_profile *p;
	struct prs_err err;

	for (i = 0; i < n; i++) {
		*c++ = i ? ';' : 'x';
		if (i)
			*c++ = 'x';
	}
	memcpy(c, " 1\n", 4);
	cr_assert_eq(read_text(line, &p, &err), -EINVAL);
	cr_assert_str_eq(err.msg, "in.folded:1: more than 65536 frames");
	/* one frame fewer is fine */
	memcpy(c - 2, " 1\n", 4);
	cr_assert_eq(read_text(line, &p, &err), 0, "%s", err.msg);
	cr_assert_eq(p->stacks[p->samples[0].stack].depth, 65536);
	prs_profile_free(p);
	free(line);
}

/*
 * Lines come in strcmp order of their whole text, though they are compared frame by frame: a
 * frame whose name is another's and more ("f1" and "f10", "f1+x") sorts by the byte after the
 * shorter name, where the shorter line has ';' or its end; a stack that is a prefix of another
 * comes first; two stacks that print alike (a ';' made '_' against a real '_') are one line.
 */
Test(folded, lines_in_byte_order_and_alike_stacks_merged)
{
	static const char *const names[] = { "f1", "f10", "f1+x", "f", "a_b", "a;b" };
	struct prs_profile *p = prs_profile_new();
	uint32_t top, st[6];
	char *got;

	cr_assert_not_null(p);
	top = prs_profile_stack(p, 0, prs_profile_named_frame(p, PRS_KIND_PYTHON, S(p, "main"), 0, 0));
	for (size_t i = 0; i < 6; i++) {
		uint32_t f = prs_profile_named_frame(p, PRS_KIND_PYTHON, S(p, names[i]), 0, 0);

		st[i] = prs_profile_stack(p, top, f);
		prs_profile_sample(p, &(struct prs_sample){ .syscall = -1, .weight = (uint32_t)i + 1,
							    .stack = st[i] });
	}
	/* "main;f1;g" after "main;f10": the byte after "f1" is ";" against "0" */
	prs_profile_sample(p, &(struct prs_sample){ .syscall = -1, .weight = 10,
		.stack = prs_profile_stack(p, st[0], prs_profile_named_frame(p, PRS_KIND_PYTHON, S(p, "g"), 0, 0)) });
	prs_profile_sample(p, &(struct prs_sample){ .syscall = -1, .weight = 20, .stack = top });
	got = export(p, PRS_VIEW_CPU, 0);
	cr_assert_str_eq(got, "main 20\n"
			      "main;a_b 11\n" /* 5 + 6: "a;b" prints as "a_b" */
			      "main;f 4\n"
			      "main;f1 1\n"
			      "main;f1+x 3\n"
			      "main;f10 2\n"
			      "main;f1;g 10\n");
	free(got);
	prs_profile_free(p);
}
