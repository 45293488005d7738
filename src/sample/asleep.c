/* SPDX-License-Identifier: MIT */
/*
 * A thread asleep in the kernel, read from outside without stopping it: its state and syscall
 * from its kept /proc files, and its native stack from the user registers it entered the kernel
 * with (/proc/PID/task/TID/syscall gives SP and PC) over a copy of its stack read from that SP.
 * While it sleeps it runs none of its code, so the copy is of one moment; the caller proves that
 * it did not run meanwhile (its schedstat unchanged across the reads).
 *
 * Used by the preload source for every sleeper (preload_offcpu.c) and by the ptrace source for
 * the threads it then need not interrupt (source_ptrace.c): an interrupt would wake the sleeper
 * only to stop it, cut its syscall short, and hold it until its stop is collected.
 *
 * Only SP and PC are known (not RBP or the other callee-saved registers): the unwind from a
 * syscall wrapper holds while the frames' CFA is SP-based or their RBP was saved on the stack
 * below, which is the case for glibc's wrappers and -O2 code (measured on the e2e targets);
 * otherwise the stack ends early (the frames found are kept). prs_offcpu_guess_rbp finds the
 * frame record that makes the unwind whole where there is one.
 */
#include <string.h>

#include "pyrsprof/ptrace.h"
#include "pyrsprof/task.h"
#include "sample/sampler-internal.h"
#include "util/banned.h"

/*
 * Whether t sleeps in the kernel now, and how: its state, syscall (a sleep restarted after a
 * signal shows as restart_syscall: the first one is kept) and the registers it entered with.
 * False for a running or runnable thread, a zombie, or a thread gone.
 */
static bool asleep(struct prs_target *tg, struct prs_thr *t, struct prs_task_sys *sys)
{
	char c;

	if (prs_thr_syscall(&tg->thr, t, sys) != 0 || sys->running)
		return false;
	c = prs_task_state_fd(tg->pid, t->tid, &t->stat_fd);
	if (c == 0 || c == 'R' || c == 'Z' || c == 'X')
		return false;
	t->state = c == 'D' ? PRS_STATE_DISK : PRS_STATE_BLOCKED;
	t->syscall = -1;
	t->wait_addr = 0;
	if (sys->nr >= 0) {
		t->syscall = sys->nr == PRS_SYS_RESTART_SYSCALL && t->blocked_in >= 0 ? t->blocked_in
										     : sys->nr;
		t->wait_addr = t->syscall == PRS_SYS_FUTEX ? sys->args[0] : 0;
	}
	t->blocked_in = t->syscall;
	return true;
}

/* Takes t's stack from the SP it sleeps with: t->regs and t->stack hold the snapshot. */
static void snapshot(struct prs_sampler *s, struct prs_target *tg, struct prs_thr *t,
		     const struct prs_task_sys *sys)
{
	ssize_t n;

	memset(&t->regs, 0, sizeof(t->regs));
	t->regs.r[PRS_REG_RSP] = sys->sp;
	t->regs.r[PRS_REG_RIP] = sys->pc;
	t->regs.orig_rax = (uint64_t)(int64_t)sys->nr;
	/* the first argument, as a stop would show it: a futex's word (prs_kept_native) */
	t->regs.r[PRS_REG_RDI] = sys->args[0];
	n = sys->sp ? prs_read_stack(tg->pid, sys->sp, t->stack, s->opts.stack_bytes) : 0;
	t->stack_len = n > 0 ? (size_t)n : 0;
	t->sampled = sys->sp != 0;
}

bool prs_asleep_read(struct prs_sampler *s, struct prs_target *tg, struct prs_thr *t)
{
	struct prs_task_sys sys;

	t->sampled = false;
	if (!asleep(tg, t, &sys))
		return false;
	snapshot(s, tg, t, &sys);
	return true;
}

int prs_asleep_unwind(struct prs_sampler *s, struct prs_target *tg, struct prs_thr *t,
		      struct prs_unwind_info *info)
{
	struct prs_snapshot snap = { .base = t->regs.r[PRS_REG_RSP], .len = t->stack_len,
				     .data = t->stack };

	memset(info, 0, sizeof(*info));
	if (!t->sampled || !tg->uw)
		return 0;
	prs_offcpu_guess_rbp(tg->uw, &t->regs, &snap, s->pcs);
	return prs_record_unwind(s, tg, &t->regs, &snap, info);
}
