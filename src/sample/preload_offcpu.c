/* SPDX-License-Identifier: MIT */
/*
 * Off-CPU samples of the preload source (--mode preload): the agent's clocks count CPU time, so
 * a thread asleep in the kernel never takes a sample of its own. At each look (every 10 ms at
 * 1000 Hz: source_preload.c, preload_look_ns) pyrsprof reads every thread's schedstat, which says
 * how long it slept since the last look (offtime-internal.h), and looks at a thread that slept
 * a period or more from outside, without a signal: one blocked in a syscall is recorded, for
 * the periods it slept, as ptrace mode records it, its state and syscall, its native stack
 * unwound from the stack pointer and program counter /proc/PID/task/TID/syscall gives (the user
 * registers it entered the kernel with) over a copy of its stack read from that SP, and its
 * Python frames read by the CPython reader. A thread that has not run since its last such sample
 * is recorded again from it (reuse-internal.h), without reads but its schedstat.
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
#include <time.h>
#include <unistd.h>

#include "pyrsprof/ptrace.h"
#include "pyrsprof/python.h"
#include "pyrsprof/task.h"
#include "pyrsprof/util.h"
#include "sample/offtime-internal.h"
#include "sample/sampler-internal.h"
#include "util/banned.h"

/* threads the program started are looked for this often: a thread's sleep is counted from the
 * look that finds it (one found at its first CPU sample is found sooner) */
#define LIST_NS 20000000ull

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

/* ---- a thread's time off a CPU between two looks (offtime-internal.h) ---- */

#define OWED_MAX 10000 /* periods recorded at once, and owed beyond them */

void prs_offtime_add(struct prs_offtime *o, uint64_t now_ns, const struct prs_schedstat *ss,
		     uint64_t period_ns, uint64_t born_ns)
{
	if (!o->based || ss->cpu_ns < o->cpu_ns || ss->wait_ns < o->wait_ns) {
		/* the first look, or a tid reused by a new thread: its wait counts from its start,
		 * and its sleep too when its start is known */
		bool reused = o->based;

		o->based = true;
		o->sleep_owed_ns = 0;
		if (reused) {
			o->wait_ns = 0;
			o->wait_owed_ns = 0;
		} else if (born_ns && born_ns < now_ns) {
			o->sleep_owed_ns = (int64_t)(now_ns - born_ns) - (int64_t)ss->cpu_ns -
					   (int64_t)ss->wait_ns;
		}
		if (o->sleep_owed_ns < 0)
			o->sleep_owed_ns = 0;
	} else {
		int64_t sleep = (int64_t)(now_ns - o->look_ns) - (int64_t)(ss->cpu_ns - o->cpu_ns) -
				(int64_t)(ss->wait_ns - o->wait_ns);

		o->sleep_owed_ns += sleep;
		if (o->sleep_owed_ns < -(int64_t)(OWED_MAX * period_ns))
			o->sleep_owed_ns = -(int64_t)(OWED_MAX * period_ns);
	}
	o->wait_owed_ns += (int64_t)(ss->wait_ns - o->wait_ns);
	o->look_ns = now_ns;
	o->cpu_ns = ss->cpu_ns;
	o->wait_ns = ss->wait_ns;
}

uint32_t prs_offtime_take(int64_t *owed_ns, uint64_t period_ns)
{
	uint64_t n;

	if (period_ns == 0 || *owed_ns < (int64_t)period_ns)
		return 0;
	n = (uint64_t)*owed_ns / period_ns;
	if (n > OWED_MAX)
		n = OWED_MAX;
	*owed_ns -= (int64_t)(n * period_ns);
	if (*owed_ns > (int64_t)(OWED_MAX * period_ns))
		*owed_ns = 0;
	return (uint32_t)n;
}

/*
 * When t started (CLOCK_MONOTONIC ns), from its stat file's start time, or 0 when unknown. The
 * start time is in clock ticks (10 ms) after boot, rounded down: a tick is added, so that no
 * time before the thread's start is counted (up to a tick after it is not).
 */
static uint64_t thread_born_ns(struct prs_target *tg, struct prs_thr *t, uint64_t now_ns)
{
	struct prs_task_stat st;
	struct timespec ts;
	long hz = sysconf(_SC_CLK_TCK);
	uint64_t boot_ns, start_ns;

	if (hz <= 0 || prs_task_stat_fd(tg->pid, t->tid, &t->stat_fd, &st) != 0 || !st.started ||
	    clock_gettime(CLOCK_BOOTTIME, &ts) != 0)
		return 0;
	boot_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	start_ns = (st.starttime + 1) * (1000000000ull / (uint64_t)hz);
	if (start_ns >= boot_ns)
		return now_ns;
	return boot_ns - start_ns < now_ns ? now_ns - (boot_ns - start_ns) : 0;
}

/* Records n periods of t waiting for a CPU, at its last sample's stack, as ptrace mode records a
 * stop it waited for: a thread preempted waits where it ran, one woken waits where it slept (it
 * returns from that call once it gets a CPU; a thread that takes next to no CPU, a Python thread
 * handed the GIL, has no CPU sample to show its waits at). Only in the wall view ([waiting for a
 * cpu]). */
static void record_runqueue(struct prs_sampler *s, struct prs_target *tg, struct prs_thr *t,
			    uint64_t tick_ns, uint32_t n, struct prs_offcpu *off)
{
	struct prs_sample smp;

	if (!n)
		return;
	memset(&smp, 0, sizeof(smp));
	smp.time_ns = tick_ns > s->t0 ? tick_ns - s->t0 : 0;
	smp.tid = t->tid;
	smp.pid = tg->pid;
	smp.state = PRS_STATE_RUNQUEUE;
	smp.syscall = -1;
	smp.stack = t->last_stack;
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
	t->last_stack = smp.stack;
	t->last_stack_ok = true;
	t->sampled = false;
	off->samples++;
	prs_durations_add(&s->d_cost, t->check_ns + (prs_now_ns() - c0));
}

void prs_preload_offcpu(struct prs_sampler *s, struct prs_target *tg, uint64_t now_ns,
			struct prs_offcpu *off)
{
	uint64_t tick_ns = prs_now_ns(), period = (uint64_t)s->period_ns;
	bool fresh = false;

	if (tg->exited)
		return;
	if (now_ns - off->last_list >= LIST_NS) {
		off->last_list = now_ns;
		list_threads(s, tg);
	}
	/* First each thread's account since the last look (its schedstat, read before anything
	 * else of it: the proof of rest of reuse-internal.h), the decisions and the snapshots of
	 * those that slept a period or more (the others are not read), then one Python read for all
	 * that need it. A sleeper's periods are recorded at the stack it sleeps at now; what a
	 * thread found running slept is kept for a look that finds it asleep. The ticks pyrsprof
	 * missed (descheduled) are in the windows: nothing is weighed for them. Until the maps are
	 * read (the unwinder's start, 100 ms and more) the accounts run, nothing is read. */
	for (size_t i = 0; i < tg->thr.n; i++) {
		struct prs_thr *t = &tg->thr.v[i];

		prs_reuse_check(s, tg, t, false);
		t->sampled = false;
		if (!t->tick_ss_ok)
			t->tick_ss_ok = prs_thr_schedstat(&tg->thr, t, &t->tick_ss) == 0;
		if (t->tick_ss_ok)
			prs_offtime_add(&t->off, tick_ns, &t->tick_ss, period,
					t->off.based ? 0 : thread_born_ns(tg, t, tick_ns));
		if (t->reuse == PRS_REUSE_ALL || !tg->uw)
			continue;
		if (t->off.sleep_owed_ns < (int64_t)period || !prs_asleep_read(s, tg, t)) {
			t->reuse = PRS_REUSE_NONE;
			t->kept.valid = false;
			t->state = PRS_STATE_RUNNING;
			continue;
		}
		fresh = true;
	}
	if (!tg->uw)
		return;
	if (fresh && tg->py && prs_target_py_sample(s, tg) == 0)
		prs_target_py_names(s, tg);
	for (size_t i = 0; i < tg->thr.n; i++) {
		struct prs_thr *t = &tg->thr.v[i];
		uint32_t n;

		/* (waits are kept until a sample gives the thread a stack to show them at) */
		if (t->last_stack_ok)
			record_runqueue(s, tg, t, tick_ns, prs_offtime_take(&t->off.wait_owed_ns, period),
					off);
		if (t->reuse != PRS_REUSE_ALL && t->state == PRS_STATE_RUNNING)
			continue;
		n = prs_offtime_take(&t->off.sleep_owed_ns, period);
		if (n == 0)
			continue;
		if (t->reuse == PRS_REUSE_ALL) {
			prs_reuse_record_all(s, tg, t, tick_ns, t->check_ns, n);
			t->last_stack = t->kept.stack;
			t->last_stack_ok = true;
			off->samples++;
		} else {
			record_asleep(s, tg, t, tick_ns, n, off);
		}
	}
}
