/* SPDX-License-Identifier: MIT */
/*
 * The kernel-stack events' rate per thread (see kstack_rate-internal.h for the rule and its
 * cost to the kernel share).
 */
#include "sample/kstack_rate-internal.h"

#include "util/banned.h"

void prs_krate_init(struct prs_krate *r, uint64_t full_ns)
{
	uint64_t need = full_ns ? PRS_KRATE_USER_NS / full_ns : 0;

	r->need = need > PRS_KRATE_USER_RUN ? (uint32_t)need : PRS_KRATE_USER_RUN;
	r->user_run = 0;
	r->lowered = false;
}

enum prs_krate_change prs_krate_see(struct prs_krate *r, bool kernel)
{
	if (kernel) {
		r->user_run = 0;
		if (!r->lowered)
			return PRS_KRATE_KEEP;
		r->lowered = false;
		return PRS_KRATE_TO_FULL;
	}
	if (r->user_run < UINT32_MAX)
		r->user_run++;
	if (r->lowered || r->user_run < r->need)
		return PRS_KRATE_KEEP;
	r->lowered = true;
	return PRS_KRATE_TO_LOW;
}

void prs_krate_undo(struct prs_krate *r, bool lowered)
{
	r->lowered = lowered;
	r->user_run = 0;
}

uint64_t prs_krate_full_ns(uint64_t period_ns)
{
	uint64_t ns = period_ns / 2 + period_ns / 128;

	return ns >= PRS_KRATE_MIN_NS ? ns : PRS_KRATE_MIN_NS + PRS_KRATE_MIN_NS / 128;
}
