/* SPDX-License-Identifier: MIT */
/*
 * Hook 4 of the classifier's collection (docs/classify.md section 6): short disk waits. A thread
 * in uninterruptible sleep does not take our PTRACE_INTERRUPT until its syscall ends; when the
 * wait is short (a 4 KiB O_DIRECT read takes ~50 us here) it is over long before the tick's first
 * look at late threads (2 ms), and its stop, after the read returned, shows it running. So just
 * after the interrupts, every thread that has not stopped yet has its state letter read through
 * its kept /proc/TID/stat descriptor (one pread, a few us); a 'D' marks it, and its stop then
 * records a disk wait in the syscall it returned from.
 */
#include "pyrsprof/ptrace.h"
#include "sample/sampler-internal.h"
#include "util/banned.h"

void prs_diskwait_check(struct prs_sampler *s, struct prs_target *tg)
{
	/* the threads that stopped at once need no look */
	prs_events_drain(s, true);
	for (size_t i = 0; i < tg->thr.n; i++) {
		struct prs_thr *t = &tg->thr.v[i];

		if (t->life == PRS_THR_INTERRUPTED)
			t->disk_seen = prs_thr_letter_state(&tg->thr, t) == PRS_STATE_DISK;
	}
}

bool prs_diskwait_apply(struct prs_thr *t)
{
	bool seen = t->disk_seen;
	int64_t nr = (int64_t)t->regs.orig_rax;

	t->disk_seen = false;
	if (!seen || t->state != PRS_STATE_RUNNING)
		return false;
	t->state = PRS_STATE_DISK;
	/* stopped on its way out of the syscall: orig_rax still names it */
	t->syscall = nr >= 0 && nr <= 1023 ? (int)nr : -1;
	return true;
}
