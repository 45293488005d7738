/* SPDX-License-Identifier: MIT */
/*
 * A distribution of durations for the sampler's statistics (stats.json: sample cost, stop,
 * unwind, Python read): up to PRS_DURATIONS_CAP values kept, a uniform reservoir sample of all
 * of them beyond, summarised as median, p10, p90, p99 and max. Adding is allocation-free.
 */
#ifndef PYRSPROF_SAMPLE_DURATIONS_INTERNAL_H
#define PYRSPROF_SAMPLE_DURATIONS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "pyrsprof/sampler.h"

#define PRS_DURATIONS_CAP 65536 /* durations kept per distribution (reservoir beyond) */

struct prs_durations {
	uint32_t *v;   /* PRS_DURATIONS_CAP slots, ns (saturated at UINT32_MAX) */
	size_t n;      /* slots filled */
	size_t seen;   /* durations added */
	unsigned rng;  /* the reservoir's choices */
};

/* Allocates the slots. Returns 0 or -ENOMEM. */
int prs_durations_init(struct prs_durations *d);
/* Frees the slots; d may be zeroed or half-initialised. */
void prs_durations_release(struct prs_durations *d);
/* Adds one duration. */
void prs_durations_add(struct prs_durations *d, uint64_t ns);
/* The summary (all zero when nothing was added; n is the count added). Allocates a sorted copy:
 * not for the hot path. */
void prs_durations_summary(const struct prs_durations *d, struct prs_dist *out);

#endif
