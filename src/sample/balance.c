/* SPDX-License-Identifier: MIT */
/*
 * The CPU-time balance: running or waiting for a CPU, decided from a thread's scheduler
 * statistics. Pure logic; the reasons are in balance-internal.h.
 */
#include "sample/balance-internal.h"

#include "util/banned.h"

enum prs_state prs_cpu_balance_judge(struct prs_cpu_balance *b, int64_t period_ns,
				     const struct prs_schedstat *before,
				     const struct prs_schedstat *after)
{
	bool first = b->cpu_ns == 0;

	b->ambiguous = after->slices != before->slices;
	/* Never given a CPU before the INTERRUPT (a thread just born, found at this tick): it was
	 * waiting for its first one, and stops at its first instruction. */
	if (before->slices == 0) {
		b->cpu_ns = after->cpu_ns ? after->cpu_ns : 1;
		return PRS_STATE_RUNQUEUE;
	}

	if (!first && after->cpu_ns >= b->cpu_ns)
		b->credit_ns += (int64_t)(after->cpu_ns - b->cpu_ns);
	b->cpu_ns = after->cpu_ns ? after->cpu_ns : 1;
	if (b->credit_ns > 2 * period_ns)
		b->credit_ns = 2 * period_ns;
	if (first || after->slices == before->slices || b->credit_ns >= period_ns / 2) {
		b->credit_ns -= period_ns;
		return PRS_STATE_RUNNING;
	}
	return PRS_STATE_RUNQUEUE;
}

void prs_cpu_balance_blocked(struct prs_cpu_balance *b, const struct prs_schedstat *ss)
{
	if (ss)
		b->cpu_ns = ss->cpu_ns ? ss->cpu_ns : 1;
	b->credit_ns = 0;
	b->ambiguous = false;
}
