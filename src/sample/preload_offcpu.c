/* SPDX-License-Identifier: MIT */
/*
 * Off-CPU samples of the preload source (--mode preload): the agent's clocks count CPU time, so
 * a thread asleep in the kernel never takes a sample of its own. At each tick pyrsprof looks at
 * every thread of the program from outside instead, without a signal: one blocked in a syscall
 * is recorded as ptrace mode records it, its state and syscall, its native stack unwound from the
 * stack pointer and program counter /proc/PID/task/TID/syscall gives (the user registers it
 * entered the kernel with) over a copy of its stack read from that SP, and its Python frames read
 * by the CPython reader. A thread that has not run since its last such sample is recorded again
 * from it (reuse-internal.h): one pread of its schedstat.
 *
 * Why outside and not an agent thread in the program: a thread of pyrsprof's in the program would
 * change it. CPython 3.12+ counts the process's threads at os.fork() and prints a
 * DeprecationWarning when there is more than one (measured: a preloaded library that starts one
 * thread makes every fork of a single-threaded 3.12 script warn on stderr); the program would see
 * one more task in /proc/self/task, signals sent to the process could land on it, and its reads
 * would be charged to the program's CPU time. The reads here need what preload mode needs already
 * (process_vm_readv and /proc/PID/task/TID/syscall are both under the ptrace access check; the
 * ptrace syscall itself is not used). Nothing is sent to the sleeping thread: no blocking call
 * sees EINTR because of pyrsprof.
 *
 * The sleepers are read by asleep.c (only SP and PC are known: see there).
 */
#include <string.h>

#include "pyrsprof/ptrace.h"
#include "pyrsprof/python.h"
#include "pyrsprof/task.h"
#include "pyrsprof/util.h"
#include "sample/sampler-internal.h"
#include "util/banned.h"

#define LIST_NS 100000000ull /* threads the program started are looked for this often */

int prs_preload_unwind(struct prs_sampler *s, struct prs_target *tg, const struct prs_regs *regs,
		       const struct prs_snapshot *snap, struct prs_offcpu *off)
{
	struct prs_unwind_info info;
	int n;

	memset(&info, 0, sizeof(info));
	n = prs_record_unwind(s, tg, regs, snap, &info);
	/* A PC in no known module: a library loaded since the maps were read (an extension module
	 * imported). The sample was taken before now, so the maps read now have it. */
	if (info.end == PRS_UNWIND_END_NO_CFI && !off->refreshed) {
		off->refreshed = true;
		prs_unwinder_refresh(tg->uw, NULL);
		tg->maps_dirty = false;
		tg->last_maps_refresh = prs_now_ns();
		memset(&info, 0, sizeof(info));
		n = prs_record_unwind(s, tg, regs, snap, &info);
	}
	return n;
}

/* Adds the program's threads the table does not know yet (a thread that blocked as it started
 * has taken no CPU sample). */
static void list_threads(struct prs_sampler *s, struct prs_target *tg)
{
	pid_t tids[PRS_THR_MAX];
	int n = prs_task_list(tg->pid, tids, PRS_THR_MAX);

	for (int i = 0; i < n && i < PRS_THR_MAX; i++) {
		struct prs_thr *t;

		if (prs_thr_find(&tg->thr, tids[i]))
			continue;
		t = prs_thr_add(&tg->thr, tids[i]);
		if (t)
			prs_thr_record_name(&tg->thr, t, s->prof);
	}
}

/*
 * Periods t waited for a CPU since the last look: runnable, not running, so neither the agent
 * (its clock is CPU time) nor the sleeper view above sees it. The kernel adds each wait to the
 * thread's schedstat wait_ns (run_delay) when the thread gets a CPU, so the waits read are
 * whole and exact, recorded a tick or so after they end; what is less than a period is owed to
 * the next look. Read for every thread at every tick (one pread of a kept descriptor).
 */
static uint32_t runqueue_periods(struct prs_sampler *s, struct prs_target *tg, struct prs_thr *t)
{
	struct prs_schedstat ss;
	uint64_t n;

	if (s->period_ns <= 0)
		return 0;
	if (t->tick_ss_ok)
		ss = t->tick_ss;
	else if (prs_thr_schedstat(&tg->thr, t, &ss) != 0)
		return 0;
	if (ss.wait_ns < t->rq_wait_ns) { /* a tid reused by a new thread */
		t->rq_wait_ns = 0;
		t->rq_owed_ns = 0;
	}
	/* from 0 at the first look: a thread found late (listed every 100 ms, or at its first CPU
	 * sample) waited since it started, within the session */
	t->rq_owed_ns += ss.wait_ns - t->rq_wait_ns;
	t->rq_wait_ns = ss.wait_ns;
	n = t->rq_owed_ns / (uint64_t)s->period_ns;
	if (n > 10000)
		n = 10000;
	t->rq_owed_ns -= n * (uint64_t)s->period_ns;
	if (t->rq_owed_ns > 10000 * (uint64_t)s->period_ns)
		t->rq_owed_ns = 0;
	return (uint32_t)n;
}

/* Records n periods of t waiting for a CPU, at its last CPU sample's stack (it waited there or
 * close by: the wait ended when it got the CPU it then spent), as ptrace mode records a stop it
 * waited for. Only in the wall view ([waiting for a cpu]). */
static void record_runqueue(struct prs_sampler *s, struct prs_target *tg, struct prs_thr *t,
			    uint64_t tick_ns, uint32_t n, struct prs_offcpu *off)
{
	struct prs_sample smp;

	if (!n || !t->cpu_stack_ok)
		return;
	memset(&smp, 0, sizeof(smp));
	smp.time_ns = tick_ns > s->t0 ? tick_ns - s->t0 : 0;
	smp.tid = t->tid;
	smp.pid = tg->pid;
	smp.state = PRS_STATE_RUNQUEUE;
	smp.syscall = -1;
	smp.stack = t->cpu_stack;
	smp.weight = n;
	prs_profile_sample(s->prof, &smp);
	s->st.thread_samples++;
	off->runqueue += n;
}

/* Records t, found asleep this tick (its snapshot taken), with its Python frames if any. */
static void record_asleep(struct prs_sampler *s, struct prs_target *tg, struct prs_thr *t,
			  uint64_t tick_ns, uint32_t w, struct prs_offcpu *off)
{
	struct prs_snapshot snap = { .base = t->regs.r[PRS_REG_RSP], .len = t->stack_len,
				     .data = t->stack };
	struct prs_sample smp;
	uint64_t c0 = prs_now_ns();
	int n = 0;

	if (t->sampled && tg->uw) {
		prs_offcpu_guess_rbp(tg->uw, &t->regs, &snap, s->pcs);
		n = prs_preload_unwind(s, tg, &t->regs, &snap, off);
	}
	memset(&smp, 0, sizeof(smp));
	smp.state = (uint8_t)t->state;
	smp.syscall = (int16_t)t->syscall;
	smp.weight = w;
	prs_record_stack(s, tg, t, tick_ns, s->pcs, s->frame_ids, n, prs_target_py_thread(tg, t->tid),
			 &smp);
	/* at rest since before its reads, if its schedstat was read then (prs_reuse_check) */
	t->kept.at_rest = t->kept.valid && t->tick_ss_ok;
	t->kept.rest = t->tick_ss;
	t->sampled = false;
	off->samples++;
	prs_durations_add(&s->d_cost, t->check_ns + (prs_now_ns() - c0));
}

void prs_preload_offcpu(struct prs_sampler *s, struct prs_target *tg, uint64_t now_ns,
			struct prs_offcpu *off)
{
	uint64_t tick_ns = prs_now_ns();
	bool fresh = false;
	uint32_t w;

	if (tg->exited || !tg->uw)
		return;
	/* The agent's CPU samples count every period of CPU time; a sleeper is seen once a tick: one
	 * seen now stands for the ticks the session skipped since (pyrsprof descheduled), taken as
	 * slept through, so that a loaded machine does not shrink the off-CPU share. */
	w = 1;
	if (off->looked && s->st.missed_ticks > off->missed_seen)
		w += (uint32_t)(s->st.missed_ticks - off->missed_seen < 1000
					? s->st.missed_ticks - off->missed_seen : 1000);
	off->missed_seen = s->st.missed_ticks;
	off->looked = true;
	if (now_ns - off->last_list >= LIST_NS) {
		off->last_list = now_ns;
		list_threads(s, tg);
	}
	/* first the decisions and the snapshots, then one Python read for all that need it */
	for (size_t i = 0; i < tg->thr.n; i++) {
		struct prs_thr *t = &tg->thr.v[i];

		prs_reuse_check(s, tg, t, false);
		t->sampled = false;
		if (t->reuse == PRS_REUSE_ALL)
			continue;
		if (!prs_asleep_read(s, tg, t)) {
			t->reuse = PRS_REUSE_NONE;
			t->kept.valid = false;
			t->state = PRS_STATE_RUNNING;
			continue;
		}
		fresh = true;
	}
	if (fresh && tg->py && prs_target_py_sample(s, tg) == 0)
		prs_target_py_names(s, tg);
	for (size_t i = 0; i < tg->thr.n; i++) {
		struct prs_thr *t = &tg->thr.v[i];

		record_runqueue(s, tg, t, tick_ns, runqueue_periods(s, tg, t), off);
		if (t->reuse == PRS_REUSE_ALL) {
			prs_reuse_record_all(s, tg, t, tick_ns, t->check_ns, w);
			off->samples++;
		} else if (t->state != PRS_STATE_RUNNING) {
			record_asleep(s, tg, t, tick_ns, w, off);
		}
	}
}
