/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for the view of a profile (include/pyrsprof/view.h): the frames of every view stack
 * against the stack trie walked the plain way (randomized tries with inline expansions, every
 * option, stacks visited in order and at random, the "shared" prefix checked against the previous
 * stack's frames), the sums against the samples, and a process tree (the frozen fixture
 * tests/fixtures/profile/tree.pyrs, described in its README): process and thread roots, merged
 * commands, an exec'd process, the GIL-wait leaf, and the folded export of it all, whose lines
 * are written out here by hand.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pyrsprof/export.h"
#include "pyrsprof/profile.h"
#include "pyrsprof/view.h"

#include "util/banned.h"

#define TREE "tests/fixtures/profile/tree.pyrs"

static uint32_t S(struct prs_profile *p, const char *s)
{
	return prs_profile_string(p, s, strlen(s));
}

static struct prs_profile *load(const char *path)
{
	struct prs_profile *p;
	struct prs_err err;
	char warn[128];

	cr_assert_eq(prs_pyrs_read(path, &p, warn, sizeof(warn), &err), 0,
		     "%s (run from the repository root)", err.msg);
	return p;
}

/* ---- the frames of a view against the trie ---- */

/* A random profile: named and raw frames, some raw ones expanded, a trie, samples of 3 processes. */
static struct prs_profile *random_profile(unsigned *seed)
{
	struct prs_profile *p = prs_profile_new();
	struct prs_mapping m = { .start = 0x1000, .end = 0x100000 };
	uint32_t frames[40], nf = 0, i;

	m.path = S(p, "/lib/x.so");
	cr_assert_eq(prs_profile_mapping(p, &m), 0);
	for (i = 0; i < 20; i++) {
		char name[16];

		snprintf(name, sizeof(name), "f%u", i);
		frames[nf++] = prs_profile_named_frame(p, (enum prs_kind)(rand_r(seed) % 6), S(p, name),
						       S(p, "a.py"), i);
	}
	for (i = 0; i < 20; i++) {
		uint32_t f = prs_profile_raw_frame(p, 0, 0x2000 + i * 16, i & 1), ids[4], k, n;

		frames[nf++] = f;
		n = (uint32_t)rand_r(seed) % 5; /* 0: left unsymbolized */
		for (k = 0; k < n; k++)
			ids[k] = frames[(uint32_t)rand_r(seed) % 20];
		cr_assert_eq(prs_profile_expand(p, f, ids, n), 0);
	}
	for (i = 0; i < 300; i++)
		prs_profile_stack(p, (uint32_t)rand_r(seed) % p->nstacks, frames[(uint32_t)rand_r(seed) % nf]);
	prs_profile_thread_pid(p, 7, 70, S(p, "seven"));
	for (i = 0; i < 2000; i++) {
		struct prs_sample s = {
			.time_ns = i, .pid = 7 + rand_r(seed) % 3, .tid = 70 + rand_r(seed) % 4,
			.state = (uint8_t)(rand_r(seed) % 3 ? PRS_STATE_RUNNING : rand_r(seed) % 6),
			.syscall = (int16_t)(rand_r(seed) % 4 - 1), .weight = (uint32_t)rand_r(seed) % 3,
			.stack = (uint32_t)rand_r(seed) % p->nstacks,
			.flags = rand_r(seed) % 7 ? 0 : PRS_SAMPLE_GIL_WAIT,
		};

		cr_assert_eq(prs_profile_sample(p, &s), 0);
	}
	return p;
}

/* The stack's frames the plain way: the trie walked up, expansions applied unless raw. */
static size_t plain_frames(const struct prs_profile *p, uint32_t stack, bool raw, uint32_t *out,
			   size_t max)
{
	size_t n = 0;

	if (!raw)
		return prs_profile_stack_frames(p, stack, out, max);
	for (uint32_t s = stack; s; s = p->stacks[s].parent)
		n++;
	cr_assert_leq(n, max);
	for (uint32_t s = stack, k = (uint32_t)n; s; s = p->stacks[s].parent)
		out[--k] = p->stacks[s].frame;
	return n;
}

/* Checks the frames of view stack i against the trie; out gets them (for the next "shared"). */
static size_t check_stack(struct prs_profile_view *v, const struct prs_profile *p, size_t i,
			  const struct prs_view_opts *o, uint32_t *prev, size_t nprev)
{
	static uint32_t want[4096];
	const struct prs_view_stack *st = prs_view_stacks(v, &(size_t){ 0 }) + i;
	const uint32_t *got;
	size_t shared, n = prs_view_frames(v, i, &got, &shared), nw, k;
	char label[64];

	nw = plain_frames(p, st->stack, o->raw_frames, want, 4096);
	cr_assert_eq(n, st->nroots + nw + (st->leaf != PRS_VIEW_NONE || st->empty), "stack %zu", i);
	for (k = 0; k < st->nroots; k++)
		cr_assert_geq(got[k], p->nframes, "roots are the view's frames");
	cr_assert_eq(memcmp(got + st->nroots, want, nw * sizeof(*want)), 0, "stack %zu frames", i);
	if (st->leaf != PRS_VIEW_NONE)
		cr_assert_eq(got[n - 1], st->leaf);
	if (st->empty)
		cr_assert_str_eq(prs_view_frame_label(v, got[n - 1], label, sizeof(label)), "[empty stack]");
	/* the claimed shared prefix is the previous stack's */
	cr_assert_leq(shared, n);
	cr_assert_leq(shared, nprev);
	cr_assert_eq(memcmp(got, prev, shared * sizeof(*got)), 0, "stack %zu: shared %zu", i, shared);
	memcpy(prev, got, n * sizeof(*got));
	return n;
}

Test(view, frames_are_the_tries_frames)
{
	const char *s = getenv("PRS_TEST_SEED");
	unsigned seed = s ? (unsigned)strtoul(s, NULL, 0) : (unsigned)time(NULL) ^ (unsigned)getpid();
	static uint32_t prev[4096];

	fprintf(stderr, "view.frames_are_the_tries_frames: seed %u (PRS_TEST_SEED to replay)\n", seed);
	for (int iter = 0; iter < 4; iter++) {
		struct prs_profile *p = random_profile(&seed);

		for (unsigned opt = 0; opt < 32; opt++) {
			struct prs_view_opts o = {
				.view = opt & 1 ? PRS_VIEW_WALL : PRS_VIEW_CPU, .per_thread = opt & 2,
				.per_process = opt & 4, .merge_processes = opt & 8, .raw_frames = opt & 16,
			};
			struct prs_profile_view *v;
			struct prs_err err;
			const struct prs_view_stack *st;
			uint64_t want_w = 0, got_w = 0;
			size_t nst, i, nprev = 0;

			cr_assert_eq(prs_view_new(p, &o, &v, &err), 0, "%s", err.msg);
			st = prs_view_stacks(v, &nst);
			for (i = 0; i < p->nsamples; i++) {
				const struct prs_sample *smp = &p->samples[i];
				uint32_t vs = prs_view_sample_stack(v, i);

				cr_assert_eq(vs != PRS_VIEW_NONE, prs_sample_in_view(smp, o.view));
				if (vs == PRS_VIEW_NONE)
					continue;
				want_w += smp->weight;
				cr_assert_eq(st[vs].stack, smp->stack);
				cr_assert_eq(st[vs].leaf == PRS_VIEW_NONE, smp->state == PRS_STATE_RUNNING ||
					     o.view == PRS_VIEW_CPU);
				if (o.per_thread)
					cr_assert_eq(st[vs].tid, smp->tid);
				if ((o.per_process && !o.merge_processes) || o.per_thread)
					cr_assert_eq(st[vs].pid, smp->pid);
			}
			for (i = 0; i < nst; i++) {
				got_w += st[i].weight;
				cr_assert_eq(st[i].nroots, (o.per_process ? 1u : 0u) + (o.per_thread ? 1u : 0u));
				nprev = check_stack(v, p, i, &o, prev, nprev);
			}
			cr_assert_eq(got_w, want_w);
			/* at random: the frames do not depend on the order of the calls */
			for (i = 0; i < nst; i++)
				nprev = check_stack(v, p, (size_t)rand_r(&seed) % nst, &o, prev, nprev);
			prs_view_free(v);
		}
		prs_profile_free(p);
	}
}

/* A stack deeper than the view keeps is cut on the root side, and the cut stacks do not leave
 * stale frames for the next one. */
Test(view, deep_stacks_are_cut)
{
	struct prs_profile *p = prs_profile_new();
	struct prs_profile_view *v;
	struct prs_err err;
	uint32_t f = prs_profile_named_frame(p, PRS_KIND_PYTHON, S(p, "r"), 0, 0), s = 0, mid = 0, ids[4];
	uint32_t raw = prs_profile_raw_frame(p, PRS_NO_MAPPING, 0x10, false);
	const uint32_t *got;
	size_t n, shared;

	for (int k = 0; k < 4; k++)
		ids[k] = f;
	cr_assert_eq(prs_profile_expand(p, raw, ids, 4), 0);
	for (uint32_t d = 0; d < PRS_VIEW_MAX_FRAMES / 2; d++) {
		s = prs_profile_stack(p, s, d % 2 ? f : raw);
		if (d == 100)
			mid = s;
	}
	cr_assert_eq(prs_profile_sample(p, &(struct prs_sample){ .stack = s, .weight = 1 }), 0);
	cr_assert_eq(prs_profile_sample(p, &(struct prs_sample){ .stack = mid, .weight = 1 }), 0);
	cr_assert_eq(prs_view_new(p, &(struct prs_view_opts){ .view = PRS_VIEW_CPU }, &v, &err), 0);
	n = prs_view_frames(v, 0, &got, &shared);
	cr_assert_eq(n, 51 * 4 + 50, "the mid stack: 101 trie frames, 51 of them expanded to 4");
	n = prs_view_frames(v, 1, &got, &shared);
	cr_assert_eq(n, PRS_VIEW_MAX_FRAMES, "cut to the maximum");
	cr_assert_eq(shared, 51 * 4 + 50);
	n = prs_view_frames(v, 0, &got, &shared);
	cr_assert_eq(n, 51 * 4 + 50);
	prs_view_free(v);
	prs_profile_free(p);
}

/*
 * The cut stack's last frames overwrite where a stack of nearly the maximum depth ended: that
 * stack must not be taken as still in place. X: 65535 frames "f"; D: X's first 101, then raw
 * frames of 4 frames each, the one covering positions 65533..65536 cut after 3.
 */
Test(view, a_cut_stack_leaves_nothing_stale)
{
	struct prs_profile *p = prs_profile_new();
	struct prs_profile_view *v;
	struct prs_err err;
	uint32_t f = prs_profile_named_frame(p, PRS_KIND_PYTHON, S(p, "f"), 0, 0);
	uint32_t g = prs_profile_named_frame(p, PRS_KIND_PYTHON, S(p, "g"), 0, 0), ids[4] = { g, g, g, g };
	uint32_t raw = prs_profile_raw_frame(p, PRS_NO_MAPPING, 0x10, false), x = 0, d = 0, k;
	const uint32_t *got;
	size_t n;

	cr_assert_eq(prs_profile_expand(p, raw, ids, 4), 0);
	for (k = 0; k < 65535; k++) {
		x = prs_profile_stack(p, x, f);
		if (k == 100)
			d = x;
	}
	for (k = 0; k < 16359; k++)
		d = prs_profile_stack(p, d, raw);
	cr_assert_eq(prs_profile_sample(p, &(struct prs_sample){ .stack = x, .weight = 1 }), 0);
	cr_assert_eq(prs_profile_sample(p, &(struct prs_sample){ .stack = d, .weight = 1 }), 0);
	cr_assert_eq(prs_view_new(p, &(struct prs_view_opts){ .view = PRS_VIEW_CPU }, &v, &err), 0);
	cr_assert_eq(prs_view_frames(v, 0, &got, NULL), 65535);
	n = prs_view_frames(v, 1, &got, NULL);
	cr_assert_eq(n, PRS_VIEW_MAX_FRAMES);
	cr_assert(got[65534] == g && got[100] == f && got[101] == g);
	n = prs_view_frames(v, 0, &got, NULL);
	cr_assert_eq(n, 65535);
	for (k = 0; k < n; k++)
		cr_assert_eq(got[k], f, "frame %u of X is D's", k);
	prs_view_free(v);
	prs_profile_free(p);
}

/*
 * Unsorted folded input makes trie ids in file order; the view still gives its stacks in the
 * trie's pre-order, so that each shares the longest prefix with the one before (what a tree
 * builder walks on from). By id, these stacks would share nothing with their predecessors.
 */
Test(view, stacks_come_in_trie_preorder)
{
	static const char in[] = "a;b;c 1\nx;y 2\na;b;d 3\nx;z 4\na;e 5\n";
	static const char *const want[] = { "a;b;c", "a;b;d", "a;e", "x;y", "x;z" };
	static const size_t want_shared[] = { 0, 2, 1, 0, 1 };
	static const uint64_t want_weight[] = { 1, 3, 5, 2, 4 };
	FILE *f = fmemopen((void *)in, strlen(in), "r");
	const struct prs_view_stack *st;
	struct prs_profile_view *v;
	struct prs_profile *p;
	struct prs_err err;
	size_t n, i;

	cr_assert_eq(prs_folded_read(f, "x", &p, &err), 0);
	fclose(f);
	cr_assert_eq(prs_view_new(p, &(struct prs_view_opts){ .view = PRS_VIEW_CPU }, &v, &err), 0);
	st = prs_view_stacks(v, &n);
	cr_assert_eq(n, 5);
	for (i = 0; i < n; i++) {
		char text[64] = "", label[64];
		const uint32_t *ids;
		size_t shared, k, off = 0, nf = prs_view_frames(v, i, &ids, &shared);

		for (k = 0; k < nf; k++)
			off += (size_t)snprintf(text + off, sizeof(text) - off, "%s%s", k ? ";" : "",
						prs_view_frame_label(v, ids[k], label, sizeof(label)));
		cr_assert_str_eq(text, want[i], "view stack %zu", i);
		cr_assert_eq(shared, want_shared[i], "view stack %zu shares %zu frames", i, shared);
		cr_assert_eq(st[i].weight, want_weight[i]);
	}
	prs_view_free(v);
	prs_profile_free(p);
}

/* ---- a process tree ---- */

/* The content of the fixture, as its README says. */
Test(view, frozen_tree_fixture)
{
	struct prs_profile *p = load(TREE);

	cr_assert(p->complete);
	cr_assert_eq(p->nprocesses, 4);
	cr_assert_eq(p->nthreads, 4);
	cr_assert_eq(p->nmappings, 2);
	cr_assert(p->mappings[0].pid == 101 && p->mappings[1].pid == 102);
	cr_assert_eq(p->nsamples, 65);
	cr_assert(p->samples[0].pid == 100 && p->samples[0].syscall == 61);
	cr_assert_eq(p->samples[64].flags, PRS_SAMPLE_GIL_WAIT);
	cr_assert_eq(p->samples[64].tid, 103);
	prs_profile_free(p);
}

Test(view, processes_threads_and_commands)
{
	struct prs_profile *p = load(TREE);
	struct prs_profile_view *v;
	struct prs_err err;
	const struct prs_view_stack *st;
	char label[128];
	size_t nst, i, len;

	cr_assert_eq(prs_view_new(p, &(struct prs_view_opts){ .view = PRS_VIEW_WALL, .per_process = true },
				  &v, &err), 0, "%s", err.msg);
	cr_assert_eq(prs_view_processes(v), 3);
	/* the exec at 100 ms: sh before, python after */
	cr_assert_str_eq(prs_view_command(v, 100, 50000000), "sh -c python3 pool.py");
	cr_assert_str_eq(prs_view_command(v, 100, 100000000), "python3 pool.py");
	cr_assert_str_eq(prs_view_process_label(v, 102, 0, label, sizeof(label)), "python3 pool.py [102]");
	cr_assert_str_eq(prs_view_process_label(v, 999, 0, label, sizeof(label)), "pid 999");
	cr_assert_str_eq(prs_view_thread_name(v, 102, 103, &len), "worker");
	cr_assert_null(prs_view_thread_name(v, 101, 103, &len), "threads are per process");
	st = prs_view_stacks(v, &nst);
	cr_assert_eq(nst, 5);
	for (i = 0; i < nst; i++) {
		const uint32_t *ids;
		size_t n = prs_view_frames(v, i, &ids, NULL);
		struct prs_view_frame f;

		cr_assert_eq(st[i].nroots, 1);
		prs_view_frame(v, ids[0], &f, label, sizeof(label));
		cr_assert_eq(f.kind, PRS_KIND_PROCESS);
		if (st[i].pid == 102 && st[i].leaf != PRS_VIEW_NONE) {
			prs_view_frame(v, ids[n - 1], &f, label, sizeof(label));
			cr_assert_str_eq(f.name, "[waiting for the GIL]");
			cr_assert_eq(f.kind, PRS_KIND_OFF_GIL);
		}
	}
	prs_view_free(v);
	prs_profile_free(p);
}

static char *folded(const struct prs_profile *p, const struct prs_view_opts *o)
{
	struct prs_err err;
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	cr_assert_eq(prs_export_folded(p, o, f, &err), 0, "%s", err.msg);
	fclose(f);
	return text;
}

Test(view, folded_lines_start_with_the_process)
{
	struct prs_profile *p = load(TREE);
	char *t;

	t = folded(p, &(struct prs_view_opts){ .view = PRS_VIEW_CPU, .per_process = true });
	cr_assert_str_eq(t, "python3 pool.py [101];main;work;PyEval 20\n"
			    "python3 pool.py [102];main;work;PyEval 20\n");
	free(t);
	t = folded(p, &(struct prs_view_opts){ .view = PRS_VIEW_WALL, .per_process = true,
					       .per_thread = true });
	cr_assert_str_eq(t, "python3 pool.py [100];thread 100 (MainThread);main;wait;[read] 10\n"
			    "python3 pool.py [101];thread 101 (MainThread);main;work;PyEval 20\n"
			    "python3 pool.py [102];thread 102 (MainThread);main;work;PyEval 20\n"
			    "python3 pool.py [102];thread 103 (worker);main;work;[waiting for the GIL] 10\n"
			    "sh -c python3 pool.py [100];thread 100 (MainThread);sh_main;[wait4] 5\n");
	free(t);
	t = folded(p, &(struct prs_view_opts){ .view = PRS_VIEW_WALL, .per_process = true,
					       .merge_processes = true });
	cr_assert_str_eq(t, "python3 pool.py;main;wait;[read] 10\n"
			    "python3 pool.py;main;work;PyEval 40\n"
			    "python3 pool.py;main;work;[waiting for the GIL] 10\n"
			    "sh -c python3 pool.py;sh_main;[wait4] 5\n");
	free(t);
	/* one process (a recording of the old kind): no process root */
	t = folded(p, &(struct prs_view_opts){ .view = PRS_VIEW_WALL });
	cr_assert_str_eq(t, "main;wait;[read] 10\n"
			    "main;work;PyEval 40\n"
			    "main;work;[waiting for the GIL] 10\n"
			    "sh_main;[wait4] 5\n");
	free(t);
	prs_profile_free(p);
}

/* pid 0 is meta "pid": an old recording is one process, its threads named as before. */
Test(view, old_recordings_are_one_process)
{
	struct prs_profile *p = load("tests/fixtures/profile/v1-small.pyrs");
	struct prs_profile_view *v;
	struct prs_err err;
	char *t;

	cr_assert_eq(prs_view_new(p, &(struct prs_view_opts){ .view = PRS_VIEW_WALL, .per_process = true },
				  &v, &err), 0);
	cr_assert_eq(prs_view_processes(v), 1);
	prs_view_free(v);
	t = folded(p, &(struct prs_view_opts){ .view = PRS_VIEW_WALL, .per_process = true,
					       .per_thread = true });
	cr_assert_str_eq(t, "thread 1000 (MainThread);main;work 30\n"
			    "thread 1001 (worker);main;[clock_nanosleep] 10\n"
			    "thread 1001 (worker);main;work;demo::kernel;demo::inner 20\n");
	free(t);
	prs_profile_free(p);
}
