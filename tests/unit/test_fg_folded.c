/* SPDX-License-Identifier: MIT */
/*
 * The flame graph straight from folded stacks (prs_fg_from_folded) against the graph of the
 * profile model read from the same text (prs_folded_read, then prs_fg_from_profile): the SVGs
 * must be equal byte for byte, on hand-made inputs that reach each rule (shared prefixes, kernel
 * frames, stacks deeper than the graph keeps, names longer than it keeps, counts of 0 and over
 * 32 bits) and on seeded random inputs; malformed input fails both ways with the same message.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pyrsprof/export.h"
#include "pyrsprof/flamegraph.h"
#include "pyrsprof/profile.h"

#include "../../flamegraph/fg-tree.h"

#include "util/banned.h"

/* The SVG of fg with the given subtitle, malloc'd. */
static char *svg_of(struct prs_fg *fg, const char *subtitle, size_t *len)
{
	struct prs_fg_opts o;
	struct prs_err err = { 0 };
	char *buf = NULL;
	FILE *f = open_memstream(&buf, len);

	cr_assert_not_null(f);
	prs_fg_opts_init(&o);
	o.title = "t";
	o.subtitle = subtitle;
	cr_assert_eq(prs_fg_write_svg(fg, f, &o, &err), 0, "%s", err.msg);
	fclose(f);
	return buf;
}

/* Through the model: the SVG, or NULL with err set when the text is refused. */
static char *via_model(const char *text, size_t tlen, size_t *len, struct prs_err *err)
{
	FILE *f = fmemopen((void *)text, tlen, "r");
	struct prs_view_opts vo = { .view = PRS_VIEW_CPU, .per_process = true };
	struct prs_profile *p = NULL;
	struct prs_fg *fg;
	char sub[1024], *svg;

	cr_assert_not_null(f);
	if (prs_folded_read(f, "in.folded", &p, err) != 0) {
		fclose(f);
		return NULL;
	}
	fclose(f);
	fg = prs_fg_new();
	cr_assert_eq(prs_fg_from_profile(fg, p, &vo, err), 0, "%s", err->msg);
	svg = svg_of(fg, prs_fg_describe_profile(p, PRS_VIEW_CPU, sub, sizeof(sub)), len);
	prs_fg_free(fg);
	prs_profile_free(p);
	return svg;
}

/* Straight into the graph, with the subtitle the CLI gives it. */
static char *direct(const char *text, size_t tlen, size_t *len, struct prs_err *err)
{
	FILE *f = fmemopen((void *)text, tlen, "r");
	struct prs_fg *fg = prs_fg_new();
	uint64_t samples;
	char sub[64], *svg = NULL;

	cr_assert_not_null(f);
	if (prs_fg_from_folded(fg, f, "in.folded", &samples, err) == 0) {
		snprintf(sub, sizeof(sub), "%" PRIu64 " samples", samples);
		svg = svg_of(fg, sub, len);
	}
	fclose(f);
	prs_fg_free(fg);
	return svg;
}

static void same_graph(const char *text, size_t tlen, const char *what)
{
	struct prs_err e1 = { 0 }, e2 = { 0 };
	size_t l1 = 0, l2 = 0;
	char *a = via_model(text, tlen, &l1, &e1), *b = direct(text, tlen, &l2, &e2);

	cr_assert_not_null(a, "%s: the model refused it: %s", what, e1.msg);
	cr_assert_not_null(b, "%s: the direct path refused it: %s", what, e2.msg);
	cr_assert_eq(l1, l2, "%s: SVG of %zu bytes through the model, %zu direct", what, l1, l2);
	cr_assert(memcmp(a, b, l1) == 0, "%s: the SVGs differ", what);
	free(a);
	free(b);
}

Test(fg_folded, hand_made_inputs_draw_as_through_the_model)
{
	static const char *texts[] = {
		"main;a;b 3\nmain;a;c 2\nmain;d 1\n",                      /* sorted, shared prefixes */
		"main;d 1\nmain;a;c 2\nmain;a;b 3\nmain;a 4\nmain;a;b 5\n", /* unsorted, repeats */
		"main;read;sys_read_[k];vfs_read_[k] 7\nmain;read 2\nmain;read_[k] 1\n", /* kernel */
		"main;work (app.py:12);inner 4\nmain;work (app.py:12) 1\n",  /* spaces in names */
		"main;a 0\nmain;b 0\nmain;c 3\n",                              /* counts of 0 */
		"main;a 8589934592\nmain;b 4294967296\nmain;a;x 12\n",         /* over 32 bits */
		"a;ab;abc 1\na;ab 1\na;abc 1\nab;c 1\na 2\n",                   /* prefixes of names */
		"main;a 1\n\n  \nmain;b 2", /* blank lines, no final newline */
	};

	for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		char what[32];

		snprintf(what, sizeof(what), "text %zu", i);
		same_graph(texts[i], strlen(texts[i]), what);
	}
}

Test(fg_folded, cut_stacks_and_names_draw_as_through_the_model)
{
	/* 2100 frames (the graph keeps 2048), twice with different tails, and a 3000-byte name
	 * (the graph keeps 1024 bytes) in two variants that agree on their first 1024 bytes */
	size_t cap = 64 * 1024, len = 0;
	char *t = malloc(cap);

	cr_assert_not_null(t);
	for (int line = 0; line < 2; line++) {
		for (int k = 0; k < 2100; k++)
			len += (size_t)snprintf(t + len, cap - len, "%sf%d", k ? ";" : "",
						k < 2090 ? k : k + line * 100);
		len += (size_t)snprintf(t + len, cap - len, " %d\n", line + 1);
	}
	for (int v = 0; v < 2; v++) {
		len += (size_t)snprintf(t + len, cap - len, "main;");
		memset(t + len, 'n', 3000);
		t[len + 2999] = (char)('x' + v);
		len += 3000;
		len += (size_t)snprintf(t + len, cap - len, " 5\n");
	}
	same_graph(t, len, "deep stacks and long names");
	free(t);
}

Test(fg_folded, random_inputs_draw_as_through_the_model)
{
	const char *env = getenv("PRS_TEST_SEED");
	unsigned seed = env ? (unsigned)strtoul(env, NULL, 0) : (unsigned)time(NULL) ^ (unsigned)getpid();

	fprintf(stderr, "fg_folded.random_inputs: seed %u (PRS_TEST_SEED=%u to replay)\n", seed, seed);

	for (int round = 0; round < 20; round++) {
		size_t cap = 1 << 20, len = 0;
		char *t = malloc(cap), what[64];
		int lines = 1 + rand_r(&seed) % 400;

		cr_assert_not_null(t);
		for (int l = 0; l < lines && len + 4096 < cap; l++) {
			int depth = 1 + rand_r(&seed) % 30;

			for (int k = 0; k < depth; k++) {
				int name = rand_r(&seed) % (k < 3 ? 3 : 40);

				len += (size_t)snprintf(t + len, cap - len, "%sfn%d%s", k ? ";" : "", name,
							rand_r(&seed) % 10 == 0 ? "_[k]" : "");
			}
			len += (size_t)snprintf(t + len, cap - len, " %d\n", rand_r(&seed) % 50);
		}
		snprintf(what, sizeof(what), "random input %d (seed above)", round);
		same_graph(t, len, what);
		free(t);
	}
}

Test(fg_folded, malformed_input_fails_as_the_model_does)
{
	static const char *texts[] = {
		"main;a\n", "main;a x\n", "main;;a 1\n", "main;a 99999999999999999999999\n",
		"main;a 1\nmain;b 1099511627777\n", "", "\n\n", "main;a 1\nmain;\n",
	};

	for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		struct prs_err e1 = { 0 }, e2 = { 0 };
		size_t l1, l2;
		char *a = via_model(texts[i], strlen(texts[i]), &l1, &e1);
		char *b = direct(texts[i], strlen(texts[i]), &l2, &e2);

		cr_assert_null(a, "text %zu: accepted", i);
		cr_assert_null(b, "text %zu: accepted by the direct path", i);
		cr_assert_str_eq(e1.msg, e2.msg, "text %zu", i);
		cr_assert_neq(e1.msg[0], '\0', "text %zu", i);
	}
}

Test(fg_folded, only_into_an_empty_tree)
{
	struct prs_fg *fg = prs_fg_new();
	struct prs_fg_frame fr[] = { { .name = "a" } };
	struct prs_err err = { 0 };
	FILE *f = fmemopen((void *)"main;a 1\n", 9, "r");
	uint64_t samples;

	cr_assert_eq(prs_fg_add(fg, fr, 1, 1), 0);
	cr_assert_eq(prs_fg_from_folded(fg, f, "in", &samples, &err), -EINVAL);
	cr_assert_eq(prs_fg_total(fg), 1);
	fclose(f);
	prs_fg_free(fg);
}
