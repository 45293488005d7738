/* SPDX-License-Identifier: MIT */
/*
 * Recording a thread-sample into the profile: its snapshot unwound (native frames interned with
 * their mappings), merged with its Python frames of this tick, the cost counted, and the sample
 * kept for the next ticks while the thread sleeps.
 */
#include <string.h>

#include "pyrsprof/python.h"
#include "pyrsprof/util.h"
#include "sample/sampler-internal.h"
#include "util/banned.h"

/* True when t's sample smp is blocked in futex on t->wait_addr. */
static bool futex_wait(const struct prs_thr *t, const struct prs_sample *smp)
{
	return smp->state == PRS_STATE_BLOCKED && smp->syscall == PRS_SYS_FUTEX && t->wait_addr;
}

void prs_record_count_wait(struct prs_sampler *s, const struct prs_thr *t, const struct prs_sample *smp)
{
	if (futex_wait(t, smp))
		prs_waits_add(&s->waits, t->tid, t->wait_addr, (smp->flags & PRS_SAMPLE_GIL_WAIT) != 0);
}

/* The kernel's work for a running thread, under the user frame that trapped: matched with the
 * source's stop (kstop), or for a tracing source with t's ptrace stop. */
static uint32_t kernel_frames(struct prs_sampler *s, struct prs_thr *t, const struct prs_sample *smp,
			      const struct prs_kstop *kstop, bool native, uint32_t stack)
{
	bool on_cpu = smp->state == PRS_STATE_RUNNING && t->sampled;
	/* (preempted: a native thread's, whose CPU view's stacks its perf samples can give,
	 * preempted_stack) */
	struct prs_kstop ks = { on_cpu, t->t_interrupt, t->t_cont, t->regs.r[PRS_REG_RIP],
				on_cpu && native && t->bal.ambiguous, native, false };

	if (!s->kstack || (!kstop && !s->src->traces))
		return stack;
	return prs_kstack_push(s->kstack, s->prof, &t->kthr, t->tid, prs_thr_old(t), kstop ? kstop : &ks,
			       stack);
}

void prs_record_stack(struct prs_sampler *s, struct prs_target *tg, struct prs_thr *t,
		      uint64_t tick_ns, const uint64_t *pcs, const uint32_t *ids, int n,
		      const struct prs_py_thread *pt, struct prs_sample *smp)
{
	prs_record_stack_k(s, tg, t, tick_ns, pcs, ids, n, pt, smp, NULL);
}

void prs_record_stack_k(struct prs_sampler *s, struct prs_target *tg, struct prs_thr *t,
			uint64_t tick_ns, const uint64_t *pcs, const uint32_t *ids, int n,
			const struct prs_py_thread *pt, struct prs_sample *smp,
			const struct prs_kstop *kstop)
{
	uint32_t stack = 0;

	if (pt) {
		/* Merged with the native stack; Python-only when the thread could not be stopped. */
		size_t m = prs_py_merge(tg->py, pcs, ids, (size_t)n, pt,
					s->opts.native_all ? PRS_PY_NATIVE_ALL : 0, s->merged,
					PRS_MAX_STACK_FRAMES);

		for (size_t i = 0; i < m; i++)
			stack = prs_profile_stack(s->prof, stack, s->merged[i]);
		if (pt->holds_gil)
			smp->flags |= PRS_SAMPLE_GIL;
	} else {
		for (int i = n - 1; i >= 0; i--)
			stack = prs_profile_stack(s->prof, stack, ids[i]);
	}
	stack = kernel_frames(s, t, smp, kstop, !pt, stack);
	smp->time_ns = tick_ns - s->t0;
	smp->tid = t->tid;
	smp->pid = tg->pid;
	smp->stack = stack;
	if (smp->weight == 0) /* a sample stands for one period unless its source says more */
		smp->weight = 1;
	/* blocked in futex on one of the GIL's words: waiting for the GIL, not for a lock */
	if (futex_wait(t, smp) && tg->py && prs_py_gil_waits_on(tg->py, t->wait_addr))
		smp->flags |= PRS_SAMPLE_GIL_WAIT;
	prs_record_count_wait(s, t, smp);
	prs_profile_sample(s->prof, smp);
	s->st.thread_samples++;
	prs_kept_sample(&t->kept, smp);
}

int prs_record_unwind(struct prs_sampler *s, struct prs_target *tg, const struct prs_regs *regs,
		      const struct prs_snapshot *snap, struct prs_unwind_info *info)
{
	uint64_t u0 = prs_now_ns();
	int n = prs_unwind(tg->uw, regs, snap, s->pcs, PRS_MAX_NATIVE_FRAMES, info);

	if (n < 0) {
		s->st.unwind_errors++;
		n = 0;
	}
	if (info->flags & PRS_UNWIND_TRUNCATED)
		s->st.unwind_truncated++;
	prs_durations_add(&s->d_unwind, prs_now_ns() - u0);
	for (int i = 0; i < n; i++)
		s->frame_ids[i] = prs_profile_raw_frame(s->prof, prs_target_mapping_id(s, tg, s->pcs[i]),
							s->pcs[i], i == 0);
	return n;
}

/* Unwinds t's snapshot into s->pcs and s->frame_ids and counts its costs. Returns the frames. */
static int unwind_snapshot(struct prs_sampler *s, struct prs_target *tg, struct prs_thr *t,
			   uint64_t extra_ns, struct prs_unwind_info *info)
{
	struct prs_snapshot snap = { .base = t->regs.r[PRS_REG_RSP], .len = t->stack_len,
				     .data = t->stack };
	uint64_t u0 = prs_now_ns();
	int n = prs_record_unwind(s, tg, &t->regs, &snap, info);

	prs_durations_add(&s->d_stop, t->t_cont - t->t_interrupt);
	s->st.stopped_ns += t->t_cont - t->t_interrupt;
	prs_durations_add(&s->d_cost, (t->t_cont - t->t_interrupt) + (prs_now_ns() - u0) +
					      t->check_ns + extra_ns);
	return n;
}

/*
 * The samples of the ticks t waited for a CPU through (t->ndeferred), from this stop's n frames
 * in s->pcs and s->frame_ids: waiting for a CPU then, where it stopped now. One sample of that
 * weight at tick_ns, this sample's tick: the samples stay in time order (the classifier counts
 * the ticks as the changes of time from one sample to the next, classify/facts.c).
 */
static void record_deferred(struct prs_sampler *s, struct prs_target *tg, struct prs_thr *t, int n,
			    uint64_t tick_ns)
{
	struct prs_sample smp;

	if (!t->ndeferred)
		return;
	memset(&smp, 0, sizeof(smp));
	smp.state = PRS_STATE_RUNQUEUE;
	smp.syscall = -1;
	smp.weight = t->ndeferred;
	prs_record_stack(s, tg, t, tick_ns, s->pcs, s->frame_ids, n, prs_target_py_thread(tg, t->tid),
			 &smp);
	s->st.late_sampled += t->ndeferred;
	s->st.thread_samples += t->ndeferred - 1u; /* (prs_record_stack counted one) */
	t->ndeferred = 0;
}

/*
 * An on-CPU sample of a native thread whose stop found it preempted (balance-internal.h): its
 * native stack from the perf sample its kernel-stack event took while it ran (prs_kstack_user),
 * unwound into s->pcs and s->frame_ids over the stop's, with *kstop the kernel frames' match for
 * that sample. Returns the frames, or -1 (no perf sample since the last one taken, or the thread
 * is Python's: its Python frames are read at the stop, and a native stack of another moment would
 * be merged with them wrongly; the stop's stack stays).
 */
static int preempted_stack(struct prs_sampler *s, struct prs_target *tg, struct prs_thr *t,
			   const struct prs_py_thread *pt, struct prs_kstop *kstop)
{
	struct prs_regs regs;
	struct prs_snapshot snap;
	struct prs_unwind_info info;

	if (!s->kstack || !s->src->traces || !tg->uw || pt || !t->sampled ||
	    t->state != PRS_STATE_RUNNING || !(t->bal.ambiguous || prs_kstack_contended(t->kthr)))
		return -1;
	*kstop = (struct prs_kstop){ true, t->t_interrupt, t->t_cont, 0, t->bal.ambiguous, true, true };
	if (!prs_kstack_user(s->kstack, t->kthr, kstop, &regs, &snap))
		return -1;
	kstop->user_pc = regs.r[PRS_REG_RIP];
	memset(&info, 0, sizeof(info));
	return prs_record_unwind(s, tg, &regs, &snap, &info);
}

void prs_record_thread(struct prs_sampler *s, struct prs_target *tg, struct prs_thr *t,
		       uint64_t tick_ns, uint64_t extra_ns)
{
	const struct prs_py_thread *pt = prs_target_py_thread(tg, t->tid);
	struct prs_sample smp;
	struct prs_unwind_info info;
	struct prs_kstop kstop;
	int n = 0, pn;

	memset(&smp, 0, sizeof(smp));
	memset(&info, 0, sizeof(info));
	if (t->sampled && tg->uw)
		n = unwind_snapshot(s, tg, t, extra_ns, &info);
	if (t->sampled)
		record_deferred(s, tg, t, n, tick_ns);
	smp.state = (uint8_t)t->state;
	smp.syscall = (int16_t)t->syscall;
	/* on-CPU from its stop: where it ran, or where it was preempted (balance-internal.h) */
	if (t->sampled && t->state == PRS_STATE_RUNNING) {
		s->st.cpu_stopped++;
		s->st.cpu_preempted += t->bal.ambiguous;
	}
	pn = preempted_stack(s, tg, t, pt, &kstop);
	s->st.cpu_preempted_stop += pn < 0 && t->sampled && t->state == PRS_STATE_RUNNING &&
				    t->bal.ambiguous;
	if (pn >= 0) {
		prs_record_stack_k(s, tg, t, tick_ns, s->pcs, s->frame_ids, pn, pt, &smp, &kstop);
		t->kept.native = false; /* (running: never kept; and not of its snapshot) */
		t->sampled = false;
		return;
	}
	prs_record_stack(s, tg, t, tick_ns, s->pcs, s->frame_ids, n, pt, &smp);
	if (t->sampled)
		prs_reuse_keep_native(s, tg, t, n, &info);
	else
		t->kept.native = false;
	t->sampled = false;
}

void prs_record_unstopped(struct prs_sampler *s, struct prs_target *tg, struct prs_thr *t,
			  uint64_t tick_ns, bool owed)
{
	struct prs_task_sys sys;

	s->st.not_stopped++;
	t->state = prs_thr_letter_state(&tg->thr, t);
	/* (its CPU time is paid out at its next stop: the CPU balance, balance-internal.h) */
	if (owed && t->state == PRS_STATE_RUNNING)
		t->state = PRS_STATE_RUNQUEUE;
	t->syscall = prs_thr_syscall(&tg->thr, t, &sys) == 0 && !sys.running ? sys.nr : -1;
	t->wait_addr = t->syscall == PRS_SYS_FUTEX ? sys.args[0] : 0;
	t->sampled = false;
	prs_record_thread(s, tg, t, tick_ns, 0);
}
