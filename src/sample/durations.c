/* SPDX-License-Identifier: MIT */
/* The sampler's distributions of durations: kept values, a reservoir beyond, and their summary. */
#include "sample/durations-internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pyrsprof/util.h"
#include "util/banned.h"

int prs_durations_init(struct prs_durations *d)
{
	memset(d, 0, sizeof(*d));
	d->v = calloc(PRS_DURATIONS_CAP, sizeof(*d->v));
	d->rng = (unsigned)prs_now_ns() | 1u;
	return d->v ? 0 : -ENOMEM;
}

void prs_durations_release(struct prs_durations *d)
{
	free(d->v);
	d->v = NULL;
	d->n = d->seen = 0;
}

void prs_durations_add(struct prs_durations *d, uint64_t ns)
{
	uint32_t v = ns > UINT32_MAX ? UINT32_MAX : (uint32_t)ns;

	d->seen++;
	if (d->n < PRS_DURATIONS_CAP) {
		d->v[d->n++] = v;
		return;
	}
	/* Reservoir sampling keeps a uniform sample of every duration seen. */
	d->rng = d->rng * 1103515245u + 12345u;
	size_t j = (size_t)((d->rng >> 1) % d->seen);
	if (j < PRS_DURATIONS_CAP)
		d->v[j] = v;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

void prs_durations_summary(const struct prs_durations *d, struct prs_dist *out)
{
	memset(out, 0, sizeof(*out));
	if (d->n == 0)
		return;
	uint32_t *tmp = malloc(d->n * sizeof(*tmp));
	if (!tmp)
		return;
	memcpy(tmp, d->v, d->n * sizeof(*tmp));
	qsort(tmp, d->n, sizeof(*tmp), cmp_u32);
	out->n = d->seen;
	out->median = tmp[d->n / 2];
	out->p10 = tmp[d->n / 10];
	out->p90 = tmp[(d->n * 9) / 10];
	out->p99 = tmp[(d->n * 99) / 100];
	out->max = tmp[d->n - 1];
	free(tmp);
}
