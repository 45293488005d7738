/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for the shortcuts that make big folded inputs render fast: the folded reader's reuse
 * of the previous line's stacks (consecutive lines sharing a prefix, kernel suffixes, names that
 * are prefixes of others, a prefix that comes back later, errors after a shared prefix), and the
 * flame graph's counting in one pass (unsorted and repeated samples, merging, differential,
 * overflow). The expected structures are written by hand from the inputs.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pyrsprof/flamegraph.h"
#include "pyrsprof/profile.h"

#include "../../flamegraph/fg-tree.h"

#include "util/banned.h"

static int read_text(const char *text, struct prs_profile **p, struct prs_err *err)
{
	FILE *f = fmemopen((void *)text, strlen(text), "r");
	int rc;

	cr_assert_not_null(f);
	rc = prs_folded_read(f, "in.folded", p, err);
	fclose(f);
	return rc;
}

/* The frames of a stack as "name;name_[k];..." (kernel frames marked), root first. */
static const char *stack_text(const struct prs_profile *p, uint32_t stack, char *buf, size_t size)
{
	uint32_t ids[64];
	size_t n = prs_profile_stack_frames(p, stack, ids, 64), off = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < n; i++) {
		const struct prs_frame *f = &p->frames[ids[i]];

		off += (size_t)snprintf(buf + off, size - off, "%s%s%s", i ? ";" : "",
					p->strings[f->name], f->kind == PRS_KIND_KERNEL ? "_[k]" : "");
	}
	return buf;
}

Test(fg_speed, folded_prefix_reuse)
{
	static const char *text =
		"a;b;c 1\n"
		"a;b;c 2\n"      /* the same stack again */
		"a;b_[k];c 3\n"  /* b as a kernel frame: another frame, another stack */
		"a;b 4\n"        /* a prefix of line 1 */
		"a;bc;c 5\n"     /* "bc" starts like "b" */
		"x;b;c 6\n"      /* same frames below another root */
		"a;b;c;d 7\n"    /* line 1 extended, not next to it */
		"a;b;c 8\n";
	static const char *want[] = { "a;b;c", "a;b;c", "a;b_[k];c", "a;b", "a;bc;c", "x;b;c",
				      "a;b;c;d", "a;b;c" };
	struct prs_profile *p;
	struct prs_err err = { 0 };
	char buf[256];
	uint32_t s0;

	cr_assert_eq(read_text(text, &p, &err), 0, "%s", err.msg);
	cr_assert_eq(p->nsamples, 8);
	for (size_t i = 0; i < 8; i++) {
		cr_assert_str_eq(stack_text(p, p->samples[i].stack, buf, sizeof(buf)), want[i],
				 "line %zu", i + 1);
		cr_assert_eq(p->samples[i].weight, i + 1);
	}
	s0 = p->samples[0].stack;
	cr_assert_eq(p->samples[1].stack, s0, "equal lines are one stack");
	cr_assert_eq(p->samples[7].stack, s0);
	cr_assert_eq(p->samples[3].stack, p->stacks[s0].parent, "a;b is the parent of a;b;c");
	cr_assert_eq(p->stacks[p->samples[6].stack].parent, s0, "a;b;c;d extends a;b;c");
	/* frames a, b, b_[k], c, bc, x, d; stacks: root, a, a;b, a;b;c, a;b_[k], a;b_[k];c, a;bc,
	 * a;bc;c, x, x;b, x;b;c, a;b;c;d */
	cr_assert_eq(p->nframes, 7);
	cr_assert_eq(p->nstacks, 12);
	prs_profile_free(p);
}

Test(fg_speed, folded_unsorted_same_as_sorted)
{
	static const char *sorted = "m;f;g 1\nm;f;h 2\nm;k 3\nn;f;g 4\n";
	static const char *shuffled = "n;f;g 4\nm;k 3\nm;f;g 1\nm;f;h 2\n";
	struct prs_profile *a, *b;
	struct prs_err err = { 0 };
	char x[128], y[128];

	cr_assert_eq(read_text(sorted, &a, &err), 0, "%s", err.msg);
	cr_assert_eq(read_text(shuffled, &b, &err), 0, "%s", err.msg);
	cr_assert_eq(a->nstacks, b->nstacks);
	cr_assert_eq(a->nframes, b->nframes);
	static const size_t at[] = { 2, 3, 1, 0 }; /* line i of sorted is line at[i] of shuffled */

	for (size_t i = 0; i < 4; i++) {
		size_t j = at[i];

		cr_assert_str_eq(stack_text(a, a->samples[i].stack, x, sizeof(x)),
				 stack_text(b, b->samples[j].stack, y, sizeof(y)));
		cr_assert_eq(a->samples[i].weight, b->samples[j].weight);
	}
	prs_profile_free(a);
	prs_profile_free(b);
}

Test(fg_speed, folded_errors_after_shared_prefix)
{
	struct prs_profile *p = NULL;
	struct prs_err err = { 0 };

	cr_assert_eq(read_text("a;b;c 1\na;b;;c 2\n", &p, &err), -EINVAL);
	cr_assert_str_eq(err.msg, "in.folded:2: empty frame name (frame 3)");
	cr_assert_null(p);
	cr_assert_eq(read_text("a;b;c 1\na;b;c x\n", &p, &err), -EINVAL);
	cr_assert(strstr(err.msg, "in.folded:2: count \"x\""), "%s", err.msg);
	cr_assert_eq(read_text("a;b;c 1\na;b; 2\n", &p, &err), -EINVAL);
	cr_assert_str_eq(err.msg, "in.folded:2: empty frame name (frame 3)");
}

/* The node under parent with this name (fg string compare), or 0. */
static uint32_t node_named(const struct prs_fg *fg, uint32_t parent, const char *name)
{
	for (uint32_t c = fg->nodes[parent].first_child; c; c = fg->nodes[c].next_sibling)
		if (strcmp(fg->arena + fg->strs[fg->nodes[c].name].off, name) == 0)
			return c;
	return 0;
}

static uint32_t path_node(const struct prs_fg *fg, const char *a, const char *b, const char *c)
{
	uint32_t n = node_named(fg, 0, a);

	if (n && b)
		n = node_named(fg, n, b);
	if (n && c)
		n = node_named(fg, n, c);
	return n;
}

static uint64_t before_count(const struct prs_fg *fg, uint32_t id)
{
	uint64_t c[2];

	fg_counts(fg, id, c);
	return c[1];
}

Test(fg_speed, from_profile_counts_in_one_pass)
{
	/* unsorted stacks, one repeated: totals main 14, a 12, x 3, y 4, b 2 */
	static const char *text = "main;a;y 4\nmain;b 2\nmain;a;x 3\nmain;a 5\n";
	struct prs_profile *p;
	struct prs_fg *fg = prs_fg_new(), *diff = prs_fg_new();
	struct prs_err err = { 0 };
	struct prs_sample s;

	cr_assert_eq(read_text(text, &p, &err), 0, "%s", err.msg);
	s = p->samples[1]; /* main;b once more, out of order */
	cr_assert_eq(prs_profile_sample(p, &s), 0);
	cr_assert_eq(prs_fg_from_profile(fg, p, &(struct prs_view_opts){ .view = PRS_VIEW_CPU }, &err), 0, "%s", err.msg);
	cr_assert_eq(prs_fg_total(fg), 16);
	cr_assert_eq(fg->nodes[path_node(fg, "main", NULL, NULL)].total, 16);
	cr_assert_eq(fg->nodes[path_node(fg, "main", "a", NULL)].total, 12);
	cr_assert_eq(fg->nodes[path_node(fg, "main", "a", "x")].total, 3);
	cr_assert_eq(fg->nodes[path_node(fg, "main", "a", "y")].total, 4);
	cr_assert_eq(fg->nodes[path_node(fg, "main", "b", NULL)].total, 4);
	/* a stack added by hand afterwards creates nodes with higher ids: merging keeps sums */
	{
		struct prs_fg_frame fr[] = { { .name = "main" }, { .name = "c" } };

		cr_assert_eq(prs_fg_add(fg, fr, 2, 10), 0);
	}
	cr_assert_eq(prs_fg_from_profile(fg, p, &(struct prs_view_opts){ .view = PRS_VIEW_CPU }, &err), 0, "%s", err.msg);
	cr_assert_eq(prs_fg_total(fg), 42);
	cr_assert_eq(fg->nodes[path_node(fg, "main", NULL, NULL)].total, 42);
	cr_assert_eq(fg->nodes[path_node(fg, "main", "a", NULL)].total, 24);
	cr_assert_eq(fg->nodes[path_node(fg, "main", "c", NULL)].total, 10);
	cr_assert_eq(fg->nodes[path_node(fg, "main", "b", NULL)].total, 8);

	/* differential: the before counts go to the before counts only */
	cr_assert_eq(prs_fg_diff_from_profiles(diff, p, &(struct prs_view_opts){ .view = PRS_VIEW_CPU }, p, &(struct prs_view_opts){ .view = PRS_VIEW_CPU }, &err), 0, "%s", err.msg);
	cr_assert_eq(prs_fg_total(diff), 16);
	cr_assert_eq(prs_fg_total_before(diff), 16);
	cr_assert_eq(before_count(diff, path_node(diff, "main", "a", "x")), 3);
	cr_assert_eq(diff->nodes[path_node(diff, "main", "a", "x")].total, 3);
	prs_fg_free(fg);
	prs_fg_free(diff);
	prs_profile_free(p);
}

Test(fg_speed, count_all_overflow_adds_nothing)
{
	struct prs_fg *fg = prs_fg_new();
	struct prs_fg_frame fr[] = { { .name = "a" }, { .name = "b" } };
	uint64_t self[3];
	uint32_t a, b;

	cr_assert_eq(prs_fg_add(fg, fr, 2, 1), 0);
	a = node_named(fg, 0, "a");
	b = node_named(fg, a, "b");
	cr_assert(a && b && fg->nnodes == 3);
	memset(self, 0, sizeof(self));
	self[b] = (uint64_t)INT64_MAX;
	cr_assert_eq(prs_fg_count_all(fg, self, 3, false), -EOVERFLOW);
	cr_assert_eq(prs_fg_total(fg), 1);
	cr_assert_eq(fg->nodes[b].total, 1);
	memset(self, 0, sizeof(self));
	self[a] = 2;
	self[b] = 5;
	cr_assert_eq(prs_fg_count_all(fg, self, 3, true), 0);
	cr_assert_eq(prs_fg_total_before(fg), 7);
	cr_assert_eq(before_count(fg, a), 7);
	cr_assert_eq(before_count(fg, b), 5);
	cr_assert_eq(fg->nodes[b].total, 1, "after counts untouched");
	prs_fg_free(fg);
}

Test(fg_speed, lazy_node_index_finds_every_node)
{
	/* 3000 children under one parent (wider than the child scan: the table is used) and 3
	 * under another (found by the scan), added twice in different orders: the second round
	 * must find every node, none may be created twice */
	struct prs_fg *fg = prs_fg_new();
	char name[32];
	size_t nodes;

	for (int round = 0; round < 2; round++) {
		for (int i = 0; i < 3000; i++) {
			int k = round ? (i * 7919) % 3000 : i;
			struct prs_fg_frame fr[] = { { .name = "wide" }, { .name = name } };

			snprintf(name, sizeof(name), "f%d", k);
			cr_assert_eq(prs_fg_add(fg, fr, 2, 1), 0);
		}
		for (int i = 0; i < 3; i++) {
			struct prs_fg_frame fr[] = { { .name = "narrow" }, { .name = name } };

			snprintf(name, sizeof(name), "g%d", round ? 2 - i : i);
			cr_assert_eq(prs_fg_add(fg, fr, 2, 1), 0);
		}
		if (round == 0)
			nodes = fg->nnodes;
	}
	cr_assert_eq(nodes, 1 + 1 + 3000 + 1 + 3);
	cr_assert_eq(fg->nnodes, nodes, "no node created twice");
	cr_assert_eq(prs_fg_total(fg), 2 * 3003);
	cr_assert_eq(fg->nodes[node_named(fg, 0, "wide")].total, 6000);
	cr_assert_eq(fg->nodes[node_named(fg, node_named(fg, 0, "wide"), "f1234")].total, 2);
	cr_assert_eq(fg->nodes[node_named(fg, node_named(fg, 0, "narrow"), "g1")].total, 2);
	/* the building block sees the same nodes */
	cr_assert_eq(prs_fg_child(fg, 0, fg->nodes[node_named(fg, 0, "wide")].name, 0,
				  fg->nodes[node_named(fg, 0, "wide")].kind),
		     node_named(fg, 0, "wide"));
	prs_fg_free(fg);
}

/* The count of line `line` of node, by walking the node's list (0 when absent). */
static uint64_t line_count(const struct prs_fg *fg, uint32_t node, uint32_t line, size_t *nall)
{
	uint64_t c = 0;

	*nall = 0;
	for (uint32_t l = fg->nodes[node].first_line; l; l = fg->lines[l - 1].next, (*nall)++)
		if (fg->lines[l - 1].line == line)
			c += fg->lines[l - 1].count;
	return c;
}

Test(fg_speed, line_counts_short_list_and_table)
{
	/* node a gets 3 lines (a walk of its list finds them), node b 500 (past the walk: the
	 * table), each added in three rounds of different orders: one entry per (node, line), the
	 * counts summed */
	struct prs_fg *fg = prs_fg_new();
	uint32_t a, b, s;
	size_t nall;

	s = prs_fg_intern(fg, "a", 1);
	a = prs_fg_child(fg, 0, s, 0, PRS_KIND_PYTHON);
	s = prs_fg_intern(fg, "b", 1);
	b = prs_fg_child(fg, a, s, 0, PRS_KIND_PYTHON);
	cr_assert(a && b);
	for (uint32_t round = 0; round < 3; round++) {
		for (uint32_t i = 0; i < 3; i++) {
			uint32_t line = 10 + (round ? 2 - i : i);

			cr_assert_eq(prs_fg_line(fg, a, line, line - 9), 0);
		}
		for (uint32_t i = 0; i < 500; i++)
			cr_assert_eq(prs_fg_line(fg, b, 1 + (round == 1 ? (i * 7) % 500 : round ? 499 - i : i),
						 round + 1), 0);
	}
	cr_assert_eq(fg->nlines, 503, "one entry per (node, line): %u", fg->nlines);
	cr_assert_eq(line_count(fg, a, 10, &nall), 3 * 1);
	cr_assert_eq(line_count(fg, a, 12, &nall), 3 * 3);
	cr_assert_eq(nall, 3);
	for (uint32_t line = 1; line <= 500; line++)
		cr_assert_eq(line_count(fg, b, line, &nall), 1 + 2 + 3, "line %u", line);
	cr_assert_eq(nall, 500);
	prs_fg_free(fg);
}
