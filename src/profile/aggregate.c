/* SPDX-License-Identifier: MIT */
/*
 * Aggregated samples (prs_recorder_aggregate): a long recording keeps in memory one record per
 * distinct (stack, pid, tid, state, syscall, flags, process epoch) with the sum of its samples'
 * weights, instead of one per sample; every sample still goes to profile.pyrs, from the pending
 * array the recorder empties at each flush. So pyrsprof's memory grows with what it has seen
 * (stacks, threads, states), not with the length of the recording.
 *
 * What a consumer of the records must not need (none at the end of a recording does): the order
 * of the samples within a record and each one's time. A record is appended where its key first
 * appears (so anything first-seen-ordered over keys, such as the facts' threads, keeps its order)
 * and its time_ns is the latest of its samples' times (the flame graph's duration without meta).
 *
 * The process epoch keeps apart the samples that name their process by different PROCESS entries
 * (an exec: prs_view_command at the sample's time): it is how many entries have a time_ns <= the
 * sample's time (walked back from the newest: entries are added in time order). Exact when each
 * entry's time is at least the time of every sample added before it, which holds in a recording:
 * the sampler stamps an entry with the time it adds it, and a sample with the start of its tick.
 *
 * Merged (a reader's sums without threads, PRS_PYRS_SUMS_NO_THREADS): p->samples are keyed with
 * tid 0, one per stack and the rest of the key, and p->thread_sums per thread instead of per stack
 * (a few records a thread): what the classifier's thread facts read. A thread record's key has,
 * for the stack, only whether it holds a Python frame (the facts' "python thread"), and keeps the
 * stack of its first sample.
 */
#include "profile/profile-internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/banned.h"

/* A record id (PRS_MAP_NONE: empty) and its key's hash: a probe that meets another key mostly
 * tells it by the hash, without reading that record (a cache miss per probe in a big table) */
struct slot {
	uint32_t id, hash;
};

/* A hash table over an array of records (p->samples, or the thread sums) and their epochs. */
struct table {
	struct slot *slots; /* open addressing, linear probing */
	uint32_t cap;     /* 0 or a power of two */
	uint32_t *epoch;  /* epoch[record id] */
	size_t cap_epoch;
};

struct prs_profile_agg {
	struct table t;   /* of p->samples */
	/* the samples added since the writer last took them (prs_profile_pending); none kept for a
	 * reader's sums (keep_pending false: the samples come from a file already) */
	struct prs_sample *pending;
	size_t npending, cap_pending;
	bool keep_pending;
	bool sealed; /* prs_profile_agg_seal: no table, no more samples */
	/* prs_profile_agg_enable_merged: p->samples are per stack (tid 0), the per-thread sums in
	 * p->thread_sums (their table: th), keyed by whether the stack holds a Python frame
	 * (python[stack id], known for the stacks below npython) instead of by stack */
	bool merged;
	struct table th;
	size_t cap_thread_sums;
	uint8_t *python;
	size_t npython, cap_python;
};

static uint32_t epoch_of(const struct prs_profile *p, uint64_t time_ns)
{
	uint32_t e = p->nprocesses;

	while (e > 0 && p->processes[e - 1].time_ns > time_ns)
		e--;
	return e;
}

/* The key of s: its stack (or, in the thread sums, whether it holds a Python frame) and tid as
 * given (the stack sums' is 0). */
static uint32_t hash_of(const struct prs_sample *s, uint32_t stack, int32_t tid, uint32_t epoch)
{
	uint64_t a = (uint64_t)stack << 32 | (uint32_t)tid;
	uint64_t b = (uint64_t)(uint32_t)s->pid << 32 | (uint64_t)s->state << 24 |
		     (uint64_t)(uint16_t)s->syscall << 8 | s->flags;

	return (uint32_t)(prs_hash64(a ^ prs_hash64(b ^ (uint64_t)epoch << 40)) >> 32);
}

/* r's key is (rstack, r's other fields), s's (stack, tid, s's other fields) */
static bool same_key(const struct prs_sample *r, uint32_t rstack, uint32_t repoch,
		     const struct prs_sample *s, uint32_t stack, int32_t tid, uint32_t epoch)
{
	return rstack == stack && r->tid == tid && r->pid == s->pid && r->state == s->state &&
	       r->syscall == s->syscall && r->flags == s->flags && repoch == epoch;
}

/*
 * Doubles the table (or makes the first one) and puts every slot back. The keys in the table are
 * distinct (a key split by a weight overflow has its newest record there, alone), so no key is
 * compared, and taken in slot order they land near their old place: no random access.
 */
static int grow(struct table *t)
{
	uint32_t cap = t->cap ? t->cap * 2 : 1024;
	struct slot *slots;

	if (cap == 0 || cap > (1u << 30))
		return -ENOMEM;
	slots = malloc((size_t)cap * sizeof(*slots));
	if (!slots)
		return -ENOMEM;
	memset(slots, 0xff, (size_t)cap * sizeof(*slots));
	prs_mem_hint_huge(slots, (size_t)cap * sizeof(*slots));
	for (uint32_t k = 0; k < t->cap; k++) {
		uint32_t i = t->slots[k].hash & (cap - 1);

		if (t->slots[k].id == PRS_MAP_NONE)
			continue;
		while (slots[i].id != PRS_MAP_NONE)
			i = (i + 1) & (cap - 1);
		slots[i] = t->slots[k];
	}
	free(t->slots);
	t->slots = slots;
	t->cap = cap;
	return 0;
}

static void table_free(struct table *t)
{
	free(t->slots);
	free(t->epoch);
	memset(t, 0, sizeof(*t));
}

static int enable(struct prs_profile *p, bool keep_pending, bool merged)
{
	struct prs_profile_agg *a = p->index->agg;

	if (a)
		return a->keep_pending == keep_pending && a->merged == merged ? 0 : -EINVAL;
	if (p->nsamples)
		return -EINVAL;
	a = p->index->agg = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	a->keep_pending = keep_pending;
	a->merged = merged;
	return 0;
}

int prs_profile_agg_enable(struct prs_profile *p, bool keep_pending)
{
	return enable(p, keep_pending, false);
}

int prs_profile_agg_enable_merged(struct prs_profile *p)
{
	return enable(p, false, true);
}

void prs_profile_agg_free(struct prs_profile_agg *a)
{
	if (!a)
		return;
	table_free(&a->t);
	table_free(&a->th);
	free(a->python);
	free(a->pending);
	free(a);
}

/* Appends s (with tid) as a new record of recs with its epoch, and points slot i (of hash h) at
 * it. 0 or -ENOMEM. */
static int new_record(struct table *t, struct prs_sample **recs, size_t *n, size_t *cap,
		      const struct prs_sample *s, int32_t tid, uint32_t epoch, uint32_t i, uint32_t h)
{
	if (*n >= UINT32_MAX - 1)
		return -ENOMEM;
	if ((*n >= *cap && prs_array_grow((void **)recs, cap, *n + 1, sizeof(**recs))) ||
	    (*n >= t->cap_epoch && prs_array_grow((void **)&t->epoch, &t->cap_epoch, *n + 1, sizeof(*t->epoch))))
		return -ENOMEM;
	t->epoch[*n] = epoch;
	(*recs)[*n] = *s;
	(*recs)[*n].tid = tid;
	t->slots[i] = (struct slot){ (uint32_t)*n, h };
	(*n)++;
	return 0;
}

/*
 * Adds s (checked by the caller) to its record in recs (n of them, capacity cap) under the key
 * (stack, tid, s's other fields); by_python: a record's own key stack is python[its stack]. The
 * table grows past 3/4 full in a recording (probed at every sample for as long as it runs),
 * past 7/8 in a reader's sums (built once, then freed): for the 400k records of a 1M-sample
 * file that is 4 MB of slots instead of 8 (and 6 MB instead of 12 while the last growth copies),
 * for the same time to read (0.137-0.140 s CPU both ways, view_bench's file). 0 or -ENOMEM.
 * Inlined: each caller's constant arguments make its own copy (the recorder's, probed at every
 * sample, as lean as before the thread sums: 235 instructions a sample, callgrind).
 */
static inline __attribute__((always_inline)) int add_to(struct prs_profile_agg *a, struct table *t, struct prs_sample **recs, size_t *n,
		  size_t *cap, const struct prs_sample *s, uint32_t stack, int32_t tid, uint32_t epoch,
		  bool by_python)
{
	uint32_t h = hash_of(s, stack, tid, epoch), i, id;
	struct prs_sample *r;

	if ((*n + 1) * 8 > (size_t)t->cap * (a->keep_pending ? 6 : 7) && grow(t))
		return -ENOMEM;
	for (i = h & (t->cap - 1); (id = t->slots[i].id) != PRS_MAP_NONE; i = (i + 1) & (t->cap - 1)) {
		r = &(*recs)[id];
		if (t->slots[i].hash == h &&
		    same_key(r, by_python ? a->python[r->stack] : r->stack, t->epoch[id], s, stack, tid, epoch))
			break;
	}
	if (id == PRS_MAP_NONE)
		return new_record(t, recs, n, cap, s, tid, epoch, i, h);
	r = &(*recs)[id];
	if (r->weight > UINT32_MAX - s->weight) /* full: a new record of the same key takes over */
		return new_record(t, recs, n, cap, s, tid, epoch, i, h);
	r->weight += s->weight;
	if (s->time_ns > r->time_ns)
		r->time_ns = s->time_ns;
	return 0;
}

/* Whether stack id holds a Python frame, for every stack up to id (a parent's id is smaller). */
static int python_known(const struct prs_profile *p, struct prs_profile_agg *a, uint32_t id)
{
	if (id < a->npython)
		return 0;
	if (prs_array_grow((void **)&a->python, &a->cap_python, p->nstacks, 1))
		return -ENOMEM;
	for (size_t k = a->npython; k < p->nstacks; k++)
		a->python[k] = k > 0 && (a->python[p->stacks[k].parent] ||
					 p->frames[p->stacks[k].frame].kind == PRS_KIND_PYTHON);
	a->npython = p->nstacks;
	return 0;
}

/* Adds s to its record (and, merged, to its thread's). 0 or -ENOMEM. */
static int add_to_record(struct prs_profile *p, struct prs_profile_agg *a, const struct prs_sample *s)
{
	uint32_t epoch = epoch_of(p, s->time_ns);
	int rc;

	if (!a->merged)
		return add_to(a, &a->t, &p->samples, &p->nsamples, &p->index->cap_samples, s, s->stack,
			      s->tid, epoch, false);
	if ((rc = python_known(p, a, s->stack)) != 0 ||
	    (rc = add_to(a, &a->th, &p->thread_sums, &p->nthread_sums, &a->cap_thread_sums, s,
			 a->python[s->stack], s->tid, epoch, true)) != 0)
		return rc;
	return add_to(a, &a->t, &p->samples, &p->nsamples, &p->index->cap_samples, s, s->stack, 0, epoch,
		      false);
}

void prs_profile_agg_prefetch(const struct prs_profile *p, const struct prs_sample *s, int stage)
{
	const struct prs_profile_agg *a = p->index->agg;
	uint32_t h, i, id;

	if (!a || !a->t.cap)
		return;
	h = hash_of(s, s->stack, a->merged ? 0 : s->tid, epoch_of(p, s->time_ns));
	i = h & (a->t.cap - 1);
	if (stage == 0) {
		__builtin_prefetch(&a->t.slots[i]);
		return;
	}
	/* the first record of this hash (its slot is in the cache by now): the one to update, mostly */
	for (; (id = a->t.slots[i].id) != PRS_MAP_NONE; i = (i + 1) & (a->t.cap - 1))
		if (a->t.slots[i].hash == h) {
			__builtin_prefetch(&p->samples[id], 1);
			__builtin_prefetch(&a->t.epoch[id]);
			return;
		}
}

/* recs (n of them) fitted to their size (the doubling left up to half of the array unused) */
static void fit(struct prs_sample **recs, size_t n, size_t *cap)
{
	struct prs_sample *fitted = n ? realloc(*recs, n * sizeof(**recs)) : NULL;

	if (fitted) {
		*recs = fitted;
		*cap = n;
	}
}

void prs_profile_agg_seal(struct prs_profile *p)
{
	struct prs_profile_agg *a = p->index->agg;

	if (!a)
		return;
	table_free(&a->t);
	table_free(&a->th);
	free(a->python);
	a->python = NULL;
	a->npython = a->cap_python = 0;
	a->sealed = true;
	fit(&p->samples, p->nsamples, &p->index->cap_samples);
	fit(&p->thread_sums, p->nthread_sums, &a->cap_thread_sums);
}

int prs_profile_agg_sample(struct prs_profile *p, const struct prs_sample *s)
{
	struct prs_profile_agg *a = p->index->agg;
	int rc;

	if (a->sealed)
		return -EINVAL;
	if (a->keep_pending && a->npending >= a->cap_pending &&
	    prs_array_grow((void **)&a->pending, &a->cap_pending, a->npending + 1, sizeof(*a->pending)))
		return -ENOMEM;
	if ((rc = add_to_record(p, a, s)) != 0)
		return rc;
	if (a->keep_pending)
		a->pending[a->npending++] = *s;
	return 0;
}

const struct prs_sample *prs_profile_pending(const struct prs_profile *p, size_t *n)
{
	const struct prs_profile_agg *a = p->index->agg;

	*n = a ? a->npending : 0;
	return a ? a->pending : NULL;
}

void prs_profile_pending_taken(struct prs_profile *p)
{
	if (p->index->agg)
		p->index->agg->npending = 0;
}
