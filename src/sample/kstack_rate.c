/* SPDX-License-Identifier: MIT */
/*
 * The kernel-stack events' rate per thread (see kstack_rate-internal.h for the rule and its
 * cost to the kernel share).
 */
#include "sample/kstack_rate-internal.h"

#include "util/banned.h"

/* The samples of period ns in PRS_KRATE_USER_NS of CPU time, or least when that is more. */
static uint32_t run_of(uint64_t ns, uint32_t least)
{
	uint64_t need = ns ? PRS_KRATE_USER_NS / ns : 0;

	return need > least ? (uint32_t)need : least;
}

void prs_krate_init(struct prs_krate *r, uint64_t full_ns)
{
	r->need = run_of(full_ns, PRS_KRATE_USER_RUN);
	r->probe_need = run_of(full_ns * PRS_KRATE_PROBE, PRS_KRATE_PROBE_RUN);
	r->user_run = 0;
	r->probing = true;
	r->lowered = false;
	r->held = false;
	r->calm = 0;
}

uint32_t prs_krate_mult(const struct prs_krate *r)
{
	if (r->lowered)
		return r->held ? PRS_KRATE_PROBE : PRS_KRATE_LOWER;
	return r->probing ? PRS_KRATE_PROBE : 1;
}

enum prs_krate_change prs_krate_see(struct prs_krate *r, bool kernel)
{
	if (kernel) {
		r->user_run = 0;
		if (!r->lowered && !r->probing)
			return PRS_KRATE_KEEP;
		r->lowered = r->probing = false;
		return PRS_KRATE_TO_FULL;
	}
	if (r->user_run < UINT32_MAX)
		r->user_run++;
	if (r->lowered || r->user_run < (r->probing ? r->probe_need : r->need))
		return PRS_KRATE_KEEP;
	r->lowered = true;
	r->probing = false;
	return PRS_KRATE_TO_LOW;
}

void prs_krate_preempted(struct prs_krate *r, bool preempted)
{
	if (preempted) {
		r->held = true;
		r->calm = 0;
	} else if (r->held && ++r->calm >= PRS_KRATE_CALM) {
		r->held = false;
	}
}

void prs_krate_undo(struct prs_krate *r, uint32_t mult)
{
	r->lowered = mult == PRS_KRATE_LOWER;
	r->probing = mult == PRS_KRATE_PROBE;
	r->user_run = 0;
}

uint64_t prs_krate_full_ns(uint64_t period_ns)
{
	uint64_t ns = period_ns / 2 + period_ns / 128;

	return ns >= PRS_KRATE_MIN_NS ? ns : PRS_KRATE_MIN_NS + PRS_KRATE_MIN_NS / 128;
}
