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

struct prs_profile_agg {
	struct slot *slots; /* open addressing, linear probing */
	uint32_t cap;     /* 0 or a power of two */
	uint32_t *epoch;  /* epoch[record id] */
	size_t cap_epoch;
	/* the samples added since the writer last took them (prs_profile_pending); none kept for a
	 * reader's sums (keep_pending false: the samples come from a file already) */
	struct prs_sample *pending;
	size_t npending, cap_pending;
	bool keep_pending;
	bool sealed; /* prs_profile_agg_seal: no table, no more samples */
};

static uint32_t epoch_of(const struct prs_profile *p, uint64_t time_ns)
{
	uint32_t e = p->nprocesses;

	while (e > 0 && p->processes[e - 1].time_ns > time_ns)
		e--;
	return e;
}

static uint32_t hash_of(const struct prs_sample *s, uint32_t epoch)
{
	uint64_t a = (uint64_t)s->stack << 32 | (uint32_t)s->tid;
	uint64_t b = (uint64_t)(uint32_t)s->pid << 32 | (uint64_t)s->state << 24 |
		     (uint64_t)(uint16_t)s->syscall << 8 | s->flags;

	return (uint32_t)(prs_hash64(a ^ prs_hash64(b ^ (uint64_t)epoch << 40)) >> 32);
}

static bool same_key(const struct prs_sample *r, uint32_t repoch, const struct prs_sample *s,
		     uint32_t epoch)
{
	return r->stack == s->stack && r->tid == s->tid && r->pid == s->pid && r->state == s->state &&
	       r->syscall == s->syscall && r->flags == s->flags && repoch == epoch;
}

/*
 * The table grows past 3/4 full in a recording (probed at every sample for as long as it runs),
 * past 7/8 in a reader's sums (built once, then freed): for the 400k records of a 1M-sample
 * file that is 4 MB of slots instead of 8 (and 6 MB instead of 12 while the last growth copies),
 * for the same time to read (0.137-0.140 s CPU both ways, view_bench's file).
 */

/*
 * Doubles the table (or makes the first one) and puts every slot back. The keys in the table are
 * distinct (a key split by a weight overflow has its newest record there, alone), so no key is
 * compared, and taken in slot order they land near their old place: no random access.
 */
static int grow(struct prs_profile_agg *a)
{
	uint32_t cap = a->cap ? a->cap * 2 : 1024;
	struct slot *slots;

	if (cap == 0 || cap > (1u << 30))
		return -ENOMEM;
	slots = malloc((size_t)cap * sizeof(*slots));
	if (!slots)
		return -ENOMEM;
	memset(slots, 0xff, (size_t)cap * sizeof(*slots));
	prs_mem_hint_huge(slots, (size_t)cap * sizeof(*slots));
	for (uint32_t k = 0; k < a->cap; k++) {
		uint32_t i = a->slots[k].hash & (cap - 1);

		if (a->slots[k].id == PRS_MAP_NONE)
			continue;
		while (slots[i].id != PRS_MAP_NONE)
			i = (i + 1) & (cap - 1);
		slots[i] = a->slots[k];
	}
	free(a->slots);
	a->slots = slots;
	a->cap = cap;
	return 0;
}

int prs_profile_agg_enable(struct prs_profile *p, bool keep_pending)
{
	if (p->index->agg)
		return p->index->agg->keep_pending == keep_pending ? 0 : -EINVAL;
	if (p->nsamples)
		return -EINVAL;
	p->index->agg = calloc(1, sizeof(*p->index->agg));
	if (!p->index->agg)
		return -ENOMEM;
	p->index->agg->keep_pending = keep_pending;
	return 0;
}

void prs_profile_agg_free(struct prs_profile_agg *a)
{
	if (!a)
		return;
	free(a->slots);
	free(a->epoch);
	free(a->pending);
	free(a);
}

/* Appends s as a new record with its epoch, and points slot i (of hash h) at it. 0 or -ENOMEM. */
static int new_record(struct prs_profile *p, struct prs_profile_agg *a, const struct prs_sample *s,
		      uint32_t epoch, uint32_t i, uint32_t h)
{
	struct prs_profile_index *ix = p->index;

	if (p->nsamples >= UINT32_MAX - 1)
		return -ENOMEM;
	if ((p->nsamples >= ix->cap_samples &&
	     prs_array_grow((void **)&p->samples, &ix->cap_samples, p->nsamples + 1, sizeof(*p->samples))) ||
	    (p->nsamples >= a->cap_epoch &&
	     prs_array_grow((void **)&a->epoch, &a->cap_epoch, p->nsamples + 1, sizeof(*a->epoch))))
		return -ENOMEM;
	a->epoch[p->nsamples] = epoch;
	p->samples[p->nsamples] = *s;
	a->slots[i] = (struct slot){ (uint32_t)p->nsamples++, h };
	return 0;
}

/* Adds s (checked by the caller) to its record. 0 or -ENOMEM. */
static int add_to_record(struct prs_profile *p, struct prs_profile_agg *a, const struct prs_sample *s)
{
	uint32_t epoch = epoch_of(p, s->time_ns), h = hash_of(s, epoch), i, id;
	struct prs_sample *r;

	if (((size_t)p->nsamples + 1) * 8 > (size_t)a->cap * (a->keep_pending ? 6 : 7) && grow(a))
		return -ENOMEM;
	for (i = h & (a->cap - 1); (id = a->slots[i].id) != PRS_MAP_NONE; i = (i + 1) & (a->cap - 1))
		if (a->slots[i].hash == h && same_key(&p->samples[id], a->epoch[id], s, epoch))
			break;
	if (id == PRS_MAP_NONE)
		return new_record(p, a, s, epoch, i, h);
	r = &p->samples[id];
	if (r->weight > UINT32_MAX - s->weight) /* full: a new record of the same key takes over */
		return new_record(p, a, s, epoch, i, h);
	r->weight += s->weight;
	if (s->time_ns > r->time_ns)
		r->time_ns = s->time_ns;
	return 0;
}

void prs_profile_agg_prefetch(const struct prs_profile *p, const struct prs_sample *s, int stage)
{
	const struct prs_profile_agg *a = p->index->agg;
	uint32_t h, i, id;

	if (!a || !a->cap)
		return;
	h = hash_of(s, epoch_of(p, s->time_ns));
	i = h & (a->cap - 1);
	if (stage == 0) {
		__builtin_prefetch(&a->slots[i]);
		return;
	}
	/* the first record of this hash (its slot is in the cache by now): the one to update, mostly */
	for (; (id = a->slots[i].id) != PRS_MAP_NONE; i = (i + 1) & (a->cap - 1))
		if (a->slots[i].hash == h) {
			__builtin_prefetch(&p->samples[id], 1);
			__builtin_prefetch(&a->epoch[id]);
			return;
		}
}

void prs_profile_agg_seal(struct prs_profile *p)
{
	struct prs_profile_agg *a = p->index->agg;
	struct prs_sample *fit;

	if (!a)
		return;
	free(a->slots);
	free(a->epoch);
	a->slots = NULL;
	a->epoch = NULL;
	a->cap = 0;
	a->cap_epoch = 0;
	a->sealed = true;
	/* the records' array to its size (the doubling left up to half of it unused) */
	fit = p->nsamples ? realloc(p->samples, p->nsamples * sizeof(*p->samples)) : NULL;
	if (fit) {
		p->samples = fit;
		p->index->cap_samples = p->nsamples;
	}
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
