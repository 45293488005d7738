/* SPDX-License-Identifier: MIT */
/* The futex words threads were sampled blocked on, counted per (thread, word): waits-internal.h. */
#include "sample/waits-internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pyrsprof/util.h"
#include "util/banned.h"

void prs_waits_init(struct prs_waits *w)
{
	memset(w, 0, sizeof(*w));
}

void prs_waits_release(struct prs_waits *w)
{
	free(w->v);
	free(w->slots);
	prs_waits_init(w);
}

static size_t slot_of(const struct prs_waits *w, int32_t tid, uint64_t uaddr)
{
	return (size_t)prs_hash64(uaddr ^ prs_hash64((uint64_t)(uint32_t)tid)) & (w->nslots - 1);
}

/* Doubles the entries and rebuilds the slots. */
static int grow(struct prs_waits *w)
{
	size_t cap = w->cap ? 2 * w->cap : 64, nslots = 2 * cap;
	struct prs_wait_addr *v = realloc(w->v, cap * sizeof(*v));
	uint32_t *slots;

	if (!v)
		return -ENOMEM;
	w->v = v;
	slots = calloc(nslots, sizeof(*slots));
	if (!slots)
		return -ENOMEM;
	free(w->slots);
	w->slots = slots;
	w->nslots = nslots;
	w->cap = cap;
	for (size_t i = 0; i < w->n; i++) {
		size_t k = slot_of(w, w->v[i].tid, w->v[i].uaddr);

		while (w->slots[k])
			k = (k + 1) & (nslots - 1);
		w->slots[k] = (uint32_t)i + 1;
	}
	return 0;
}

int prs_waits_add(struct prs_waits *w, int32_t tid, uint64_t uaddr, bool gil)
{
	size_t k;
	int rc;

	if (w->nslots) {
		for (k = slot_of(w, tid, uaddr); w->slots[k]; k = (k + 1) & (w->nslots - 1)) {
			struct prs_wait_addr *e = &w->v[w->slots[k] - 1];

			if (e->tid == tid && e->uaddr == uaddr) {
				e->samples++;
				e->gil |= gil;
				return 0;
			}
		}
	}
	if (w->n >= PRS_WAITS_MAX) {
		w->dropped++;
		return -ENOSPC;
	}
	if (w->n == w->cap && (rc = grow(w)) != 0) {
		w->dropped++;
		return rc;
	}
	for (k = slot_of(w, tid, uaddr); w->slots[k]; k = (k + 1) & (w->nslots - 1))
		;
	w->v[w->n] = (struct prs_wait_addr){ .tid = tid, .uaddr = uaddr, .samples = 1, .gil = gil };
	w->slots[k] = (uint32_t)++w->n;
	return 0;
}
