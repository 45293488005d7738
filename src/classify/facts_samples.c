/* SPDX-License-Identifier: MIT */
/*
 * The per-thread accounting from a profile's samples: each sample stands for the wall time of
 * one tick (the recording's duration over the ticks seen), counted under the reason of
 * prs_sample_reason; a thread is a Python thread when a sample of it has Python frames; GIL hold
 * and wait come from the sample flags. And the software evidence of the CPU split: the share of
 * on-CPU samples whose innermost frame is a copy or fill kernel (memcpy, memset, clear_page,
 * copy_user, ...: design note §5.1).
 */
#include "classify/facts-internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pyrsprof/util.h"

#include "util/banned.h"

/* Leaves that copy or fill memory: necessary for bandwidth-bound code, not sufficient. */
static const char *const copy_kernels[] = {
	"memcpy", "memmove", "memset", "bzero", "clear_page", "copy_user", "rep_movs", "rep_stos",
	"copy_page", "raw_array_assign", "copy_to_user", "copy_from_user", "__copy",
};

bool prs_is_copy_kernel(const char *name)
{
	for (size_t i = 0; i < sizeof(copy_kernels) / sizeof(copy_kernels[0]); i++)
		if (strstr(name, copy_kernels[i]))
			return true;
	return false;
}

/*
 * Whether the innermost frame of stack runs the interpreter itself: a Python frame, or native
 * code of the python executable or libpython (the eval loop's helpers: PyObject_Free,
 * PyLong_FromLong, ... are interpreter time, not an extension's).
 */
static bool interpreter_leaf(const struct prs_profile *p, uint32_t stack)
{
	const struct prs_frame *f;
	const char *path, *base;

	if (stack == 0 || stack >= p->nstacks)
		return false;
	f = &p->frames[p->stacks[stack].frame];
	if (f->kind == PRS_KIND_PYTHON)
		return true;
	if (!f->raw || f->mapping >= p->nmappings)
		return false;
	path = p->strings[p->mappings[f->mapping].path];
	base = strrchr(path, '/');
	base = base ? base + 1 : path;
	return strncmp(base, "python", 6) == 0 || strncmp(base, "libpython", 9) == 0;
}

/* The innermost named frame of stack (its expansion's last frame for a symbolized raw frame). */
static uint32_t leaf_frame(const struct prs_profile *p, uint32_t stack)
{
	uint32_t f;

	if (stack == 0 || stack >= p->nstacks)
		return UINT32_MAX;
	f = p->stacks[stack].frame;
	if (p->expansions && p->expansions[f].count)
		f = p->expand_ids[p->expansions[f].first + p->expansions[f].count - 1];
	return f;
}

/* The thread of tid (tids maps a tid to its index in f->threads), added when new. */
static struct prs_thread_facts *thread_of(struct prs_facts *f, struct prs_map64 *tids, int32_t tid,
					  size_t *cap)
{
	uint32_t i;
	int rc = prs_map64_intern(tids, (uint32_t)tid, (uint32_t)f->nthreads, &i);

	if (rc < 0)
		return NULL;
	if (rc == 0)
		return &f->threads[i];
	if (prs_array_grow((void **)&f->threads, cap, f->nthreads + 1, sizeof(*f->threads)))
		return NULL; /* the map now names a missing thread: the caller gives up (ENOMEM) */
	memset(&f->threads[f->nthreads], 0, sizeof(f->threads[0]));
	f->threads[f->nthreads].tid = tid;
	f->threads[f->nthreads].wait_syscall = -1;
	return &f->threads[f->nthreads++];
}

#define LEAF_KNOWN 1u /* memo filled */
#define LEAF_COPY 2u  /* the innermost frame is a copy or fill kernel */
/* bits 2-3: 0 the interpreter, 1 other native code, 2 the kernel */

/* What the innermost frame of a stack is, computed once per stack (labels cost a format). */
static uint8_t leaf_info(const struct prs_profile *p, uint8_t *memo, uint32_t stack)
{
	uint32_t leaf;
	char label[PRS_MAX_NAME + 64];

	if (memo[stack] & LEAF_KNOWN)
		return memo[stack];
	leaf = leaf_frame(p, stack);
	memo[stack] = LEAF_KNOWN;
	if (leaf == UINT32_MAX)
		return memo[stack];
	memo[stack] |= (uint8_t)((interpreter_leaf(p, stack) ? 0 : p->frames[leaf].kind == PRS_KIND_KERNEL ? 2 : 1) << 2);
	if (prs_is_copy_kernel(prs_profile_frame_label(p, leaf, label, sizeof(label))))
		memo[stack] |= LEAF_COPY;
	return memo[stack];
}

/* Per stack: 1 when it holds a Python frame (parents come first: one pass). */
static uint8_t *python_stacks(const struct prs_profile *p)
{
	uint8_t *py = calloc(p->nstacks ? p->nstacks : 1, 1);

	if (!py)
		return NULL;
	for (uint32_t i = 1; i < p->nstacks; i++)
		py[i] = py[p->stacks[i].parent] || p->frames[p->stacks[i].frame].kind == PRS_KIND_PYTHON;
	return py;
}

/* Per-sample counts of each (thread, syscall) a thread blocked in. */
struct sc_count {
	uint32_t thread; /* index in f->threads */
	int nr;
	double w;
};

/* Each thread's most frequent blocking syscall and its share of the thread's samples. */
static void top_syscalls(struct prs_facts *f, const struct sc_count *sc, size_t n)
{
	for (size_t k = 0; k < n; k++) {
		struct prs_thread_facts *t = &f->threads[sc[k].thread];

		/* wait_syscall_share holds the best weight until the division below */
		if (sc[k].w > t->wait_syscall_share) {
			t->wait_syscall_share = sc[k].w;
			t->wait_syscall = sc[k].nr;
		}
	}
	for (size_t i = 0; i < f->nthreads; i++)
		f->threads[i].wait_syscall_share = f->threads[i].samples > 0
			? f->threads[i].wait_syscall_share / f->threads[i].samples : 0;
}

/* Each thread's process's parent, from the profile's process tree (its latest entry). */
static void parents(const struct prs_profile *p, struct prs_facts *f)
{
	for (uint32_t k = 0; k < p->nprocesses; k++)
		for (size_t i = 0; i < f->nthreads; i++)
			if (f->threads[i].pid == p->processes[k].pid && p->processes[k].ppid > 0)
				f->threads[i].ppid = p->processes[k].ppid;
}

int prs_facts_from_samples(const struct prs_profile *p, struct prs_facts *f, double tick_s)
{
	size_t cap = 0, nsc = 0, capsc = 0;
	struct sc_count *sc = NULL;
	struct prs_map64 tids, scs; /* tid -> thread index; (thread, syscall) -> sc index */
	uint8_t *py = python_stacks(p), *info_memo = calloc(p->nstacks ? p->nstacks : 1, 1);
	double copy = 0, oncpu = 0, by_kind[3] = { 0 };
	struct leafw {
		uint32_t frame;
		double w;
	} leaves[64];
	size_t nleaves = 0, best = SIZE_MAX;
	const struct prs_sample *thr = p->thread_sums ? p->thread_sums : p->samples;
	size_t nthr = p->thread_sums ? p->nthread_sums : p->nsamples;
	int rc = 0;

	prs_map64_init(&tids);
	prs_map64_init(&scs);
	if (!py || !info_memo) {
		rc = -ENOMEM;
		goto out;
	}
	/* the threads' part from the threads' sums when the profile was read without threads
	 * (PRS_PYRS_SUMS_NO_THREADS: its samples are per stack), else from the samples */
	for (size_t i = 0; i < nthr; i++) {
		const struct prs_sample *s = &thr[i];
		struct prs_thread_facts *t = thread_of(f, &tids, s->tid, &cap);
		enum prs_reason r = prs_sample_reason(s);
		double w = s->weight;

		if (!t) {
			rc = -ENOMEM;
			goto out;
		}
		if (s->pid > 0)
			t->pid = s->pid;
		t->samples += w;
		t->sampled[r] += w; /* (times below: the same however the samples were summed) */
		if (s->stack < p->nstacks && py[s->stack])
			t->python = true;
		if (s->flags & PRS_SAMPLE_GIL)
			t->gil_hold += w;
		if (s->flags & PRS_SAMPLE_GIL_WAIT) {
			t->gil_wait += w;
			f->gil_measured = true;
		}
		if (s->state == PRS_STATE_BLOCKED || s->state == PRS_STATE_DISK) {
			uint32_t ti = (uint32_t)(t - f->threads), k;
			int r2 = prs_map64_intern(&scs, (uint64_t)ti << 32 | (uint16_t)(s->syscall + 1),
						  (uint32_t)nsc, &k);

			if (r2 < 0 || (r2 == 1 && prs_array_grow((void **)&sc, &capsc, nsc + 1, sizeof(*sc)))) {
				rc = -ENOMEM;
				goto out;
			}
			if (r2 == 1)
				sc[nsc++] = (struct sc_count){ ti, s->syscall, 0 };
			sc[k].w += w;
		}
	}
	for (size_t i = 0; i < p->nsamples; i++) {
		const struct prs_sample *s = &p->samples[i];
		enum prs_reason r = prs_sample_reason(s);
		double w = s->weight;

		if (r == PRS_R_CPU) {
			uint32_t leaf = leaf_frame(p, s->stack);
			uint8_t info = s->stack < p->nstacks ? leaf_info(p, info_memo, s->stack) : 0;

			oncpu += w;
			if (leaf != UINT32_MAX)
				by_kind[(info >> 2) & 3] += w;
			if (leaf != UINT32_MAX && (info & LEAF_COPY)) {
				size_t k;

				copy += w;
				for (k = 0; k < nleaves && leaves[k].frame != leaf; k++)
					;
				if (k == nleaves && nleaves < 64)
					leaves[nleaves++] = (struct leafw){ leaf, 0 };
				if (k < nleaves)
					leaves[k].w += w;
			}
		}
	}
	for (size_t i = 0; i < f->nthreads; i++) {
		struct prs_thread_facts *t = &f->threads[i];

		for (int r = 0; r < PRS_R__COUNT; r++)
			t->t[r] = t->sampled[r] * tick_s;
		t->wall_s = t->samples * tick_s;
	}
	top_syscalls(f, sc, nsc);
	f->copy_share = oncpu > 0 ? copy / oncpu : 0;
	if (oncpu > 0) {
		f->cpu_python = by_kind[0] / oncpu;
		f->cpu_native = by_kind[1] / oncpu;
		f->cpu_kernel = by_kind[2] / oncpu;
	}
	for (size_t k = 0; k < nleaves; k++)
		if (best == SIZE_MAX || leaves[k].w > leaves[best].w)
			best = k;
	if (best != SIZE_MAX) {
		char label[PRS_MAX_NAME + 64];

		snprintf(f->copy_top, sizeof(f->copy_top), "%s",
			 prs_profile_frame_label(p, leaves[best].frame, label, sizeof(label)));
	}
	parents(p, f);
	for (uint32_t i = 0; i < p->nthreads; i++) {
		struct prs_thread_facts *t = NULL;

		for (size_t k = 0; k < f->nthreads; k++)
			if (f->threads[k].tid == p->threads[i].tid)
				t = &f->threads[k];
		if (t)
			snprintf(t->name, sizeof(t->name), "%s", p->strings[p->threads[i].name]);
	}
out:
	prs_map64_release(&tids);
	prs_map64_release(&scs);
	free(sc);
	free(py);
	free(info_memo);
	return rc;
}
