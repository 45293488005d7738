/* SPDX-License-Identifier: MIT */
/*
 * Hook 1 of the classifier's collection (docs/classify.md section 6): a traced thread that exited
 * is a zombie until pyrsprof reaps it, and its /proc files still hold its final counts (CPU and
 * run-queue time, context switches, faults, IO), so they are read then (events.c, before it is
 * reaped; there is no exit stop: PRS_PTRACE_OPTIONS) and stored as a THREAD EXIT record. This
 * gives every thread that ends before the recording does its kernel accounting without root
 * (taskstats needs CAP_NET_ADMIN). Off the tick: a thread exits once. Where taskstats is open
 * (opts.exits_by_taskstats), its exit messages carry the same fields for every thread, traced or
 * not, and nothing is read here: ~15 syscalls per exit of pyrsprof's CPU, paid by a
 * thread-per-request server at every request seen by a tick.
 */
#include "pyrsprof/acct.h"
#include "sample/sampler-internal.h"
#include "util/banned.h"

void prs_exit_acct_take(struct prs_sampler *s, const struct prs_target *tg, pid_t tid)
{
	struct prs_acct a;

	if (!s->opts.acct_exits || !tg)
		return;
	if (s->opts.exits_by_taskstats) {
		s->st.exit_acct_taskstats++;
		return;
	}
	if (prs_acct_read_thread(tg->pid, tid, PRS_PHASE_EXIT, &a) != 0)
		return; /* killed meanwhile (SIGKILL does not wait for us): taskstats or nothing */
	s->st.exit_acct_read++;
	prs_acct_set(&a, PRS_TASK_SOURCE, PRS_SRC_SAMPLER);
	/* -ENOMEM: the thread lacks its exit counts, which the report says (no kernel accounting) */
	prs_acct_store(s->prof, &a);
}
