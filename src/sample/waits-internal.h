/* SPDX-License-Identifier: MIT */
/*
 * The futex words a recording found each thread blocked on, and how often: counted per (thread,
 * word) as the samples are recorded, each marked when the word is the GIL's. The recording ends
 * with them as WAIT_ADDR accounting records (docs/classify.md §6), the evidence that the waits
 * the samples call GIL waits are on the GIL's address.
 *
 * An open-addressing table over an array of entries in order of first sight. It grows while new
 * (thread, word) pairs show up (a program's set of them is small and stable) and stops counting
 * new pairs beyond PRS_WAITS_MAX (counted as dropped): no allocation once warm.
 */
#ifndef PYRSPROF_SAMPLE_WAITS_INTERNAL_H
#define PYRSPROF_SAMPLE_WAITS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "pyrsprof/sampler.h"

#define PRS_WAITS_MAX 65536u /* (thread, word) pairs counted */

struct prs_waits {
	struct prs_wait_addr *v; /* entries, in order of first sight */
	size_t n, cap;
	uint32_t *slots;         /* index + 1 into v, 0 = empty; nslots a power of 2 >= 2 * cap */
	size_t nslots;
	uint64_t dropped;        /* samples not counted: the table was full or memory ran out */
};

/* An empty table (no allocation yet). */
void prs_waits_init(struct prs_waits *w);
/* Frees its memory; it is empty again. */
void prs_waits_release(struct prs_waits *w);
/* Counts one sample (weight 1) of thread tid blocked on futex word uaddr; gil: the word is the
 * GIL's (kept once seen). Returns 0, or -ENOMEM / -ENOSPC (the sample counted in dropped). */
int prs_waits_add(struct prs_waits *w, int32_t tid, uint64_t uaddr, bool gil);

#endif
