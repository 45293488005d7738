/* SPDX-License-Identifier: MIT */
/*
 * The ptrace sample source. Per tick of a target: PTRACE_INTERRUPT every running thread (but
 * those asleep since their last sample, see reuse-internal.h, and those asleep in the kernel,
 * read from /proc and their memory without a stop, asleep.c), and as each one stops read its
 * registers and one stack snapshot and resume it at once (the stop window is only that); when the
 * target is Python, the stopped threads are held until its frames are walked (raw: code objects
 * and offsets, with the code objects' heads), so that the Python frames and the native stacks are
 * of one consistent moment. Then, with every thread running again, name the Python frames,
 * unwind the snapshots and record the samples.
 *
 * Nothing on the per-tick path allocates once every thread has its snapshot buffer and the
 * profile's interning tables are warm.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pyrsprof/ptrace.h"
#include "pyrsprof/python.h"
#include "pyrsprof/task.h"
#include "pyrsprof/unwind.h"
#include "pyrsprof/util.h"
#include "sample/sampler-internal.h"
#include "util/banned.h"

/*
 * The stop window of a tick: from its first PTRACE_INTERRUPT to the release of the last thread
 * held for the Python read. The threads that stopped wait in it for those that have not only the
 * spin (stops_deadline; sleepers are not interrupted at all: read_asleep). With several
 * processes (--subprocesses), the spin is the session tick's: it counts from the first interrupt
 * of any of them, and every target's wait ends at that one deadline. (dump waits for every stop
 * up to a budget: a STOP_BUDGET_DIV-th of the period, within [MIN, MAX], 500 us at 100 Hz; the
 * budget is also collect_late's margin before the next tick.) A
 * thread that has not stopped by then is late: the others are let go without it, and its stop
 * is taken when it comes, until the next tick is almost due (collect_late); one still waiting
 * for a CPU then has the tick's sample deferred to its stop (defer), one in D is recorded from
 * /proc. A runnable thread stops when it next gets a CPU, which on
 * a loaded machine can take a scheduler period or more; one in D state stops only when its
 * syscall ends: from the end of the spin, every STOP_CHECK_NS, threads in D are given up at once.
 * (Before the budget, a tick waited up to 200 ms, every stopped thread held meanwhile; dump still
 * does, opts.wait_every_stop.)
 *
 * The spin: a running thread stops within microseconds of the INTERRUPT, but a profiler that
 * sleeps until SIGCHLD pays for its idle CPU's wake-up on top (measured: stop 69 us median
 * sleeping, pinned on an idle VM, against ~10 us when the CPU was busy), so the stops are polled
 * for STOP_SPIN_NS first. Not longer: on a busy machine the spinning profiler takes the CPU the
 * interrupted threads need to stop (2 CPUs, load 5-8, thread-per-request server: wait for the
 * stops p50 279-303 us with a 200 us spin, 147-154 us with 50 us, 97-122 us with none).
 */
#define STOP_BUDGET_DIV 20
#define STOP_BUDGET_MIN_NS 250000ull
#define STOP_BUDGET_MAX_NS 1000000ull
/* opts.wait_every_stop (dump): every stop is waited for, but not for ever */
#define STOP_WAIT_ALL_NS 200000000ull
#define STOP_CHECK_NS 250000ull
#define STOP_SPIN_NS 50000ull
/* After this long since the last tick, the Python reads are warmed up before the stop (prs_py_warm) */
#define PY_WARM_AFTER_NS 3000000ull

/* ---- one thread's stop ---- */

/* Running or waiting for a CPU (balance-internal.h), from its schedstat before the INTERRUPT and
 * now that it is stopped. */
static enum prs_state cpu_or_runqueue(struct prs_sampler *s, struct prs_target *tg,
				      struct prs_thr *t)
{
	struct prs_schedstat ss;

	if (!t->tick_ss_ok || prs_thr_schedstat(&tg->thr, t, &ss) != 0) {
		t->bal.ambiguous = false; /* (not judged) */
		return PRS_STATE_RUNNING;
	}
	return prs_cpu_balance_judge(&t->bal, s->period_ns, &t->tick_ss, &ss);
}

static void note_blocked(struct prs_target *tg, struct prs_thr *t)
{
	struct prs_schedstat ss;

	prs_cpu_balance_blocked(&t->bal, prs_thr_schedstat(&tg->thr, t, &ss) == 0 ? &ss : NULL);
}

/* The thread's state from its registers in the interrupt stop. */
static void state_from_regs(struct prs_sampler *s, struct prs_target *tg, struct prs_thr *t)
{
	t->state = prs_state_from_regs(&t->regs, &t->syscall);
	/* A sleep our interrupt cut short resumes as restart_syscall (it is how the kernel restarts
	 * nanosleep, poll or futex waits with a timeout): the next interrupt then sees that number.
	 * Keep naming the syscall the thread was first seen blocked in. */
	if (t->state == PRS_STATE_BLOCKED && t->syscall == PRS_SYS_RESTART_SYSCALL &&
	    t->blocked_in >= 0)
		t->syscall = t->blocked_in;
	t->blocked_in = t->state == PRS_STATE_BLOCKED ? t->syscall : -1;
	/* futex's word is its first argument, in RDI; a wait restarted as restart_syscall keeps it */
	t->wait_addr = t->syscall == PRS_SYS_FUTEX ? t->regs.r[PRS_REG_RDI] : 0;
	prs_diskwait_apply(t);
	if (t->state == PRS_STATE_RUNNING)
		t->state = cpu_or_runqueue(s, tg, t);
	else
		note_blocked(tg, t);
}

/* Reads t's registers and one stack snapshot in its current ptrace-stop (t->sampled says if it
 * could). */
static void snapshot(struct prs_sampler *s, struct prs_target *tg, struct prs_thr *t)
{
	ssize_t n;

	t->sampled = false;
	/* Late, after the budget (see collect_late), or since an earlier tick: it waited for a CPU
	 * since the interrupt, which is not time it spent stopped for us. */
	if (!tg->tick.hold || t->t_interrupt < tg->tick.tick_ns)
		t->t_interrupt = prs_now_ns();
	if (!tg->tick.hold)
		s->st.late_sampled++;
	if (prs_ptrace_getregs(t->tid, &t->regs) != 0)
		return;
	state_from_regs(s, tg, t);
	n = prs_read_stack(tg->pid, t->regs.r[PRS_REG_RSP], t->stack, s->opts.stack_bytes);
	if (n < 0) {
		s->st.read_errors++;
		n = 0;
	}
	t->stack_len = (size_t)n;
	t->sampled = true;
}

void prs_ptrace_take_sample(struct prs_sampler *s, struct prs_target *tg, struct prs_thr *t)
{
	/* (called only while tg's tick is open: on_interrupt resumes a stop owed to an earlier
	 * tick) */
	snapshot(s, tg, t);
	if (tg->py && t->sampled && tg->tick.hold) {
		t->life = PRS_THR_HELD;
		return;
	}
	t->life = PRS_THR_RUNNING;
	prs_events_resume(t, 0);
	t->t_cont = prs_now_ns();
}

void prs_ptrace_deferred_stop(struct prs_sampler *s, struct prs_target *tg, struct prs_thr *t)
{
	uint64_t tick_ns = t->deferred_ns; /* (the last tick's: see record_deferred) */

	t->ndeferred--;

	snapshot(s, tg, t);
	t->life = PRS_THR_RUNNING;
	prs_events_resume(t, 0);
	t->t_cont = prs_now_ns();
	if (!t->sampled) {
		t->ndeferred = 0;
		return;
	}
	/* (its state judged by the CPU balance, which paid it out if running) */
	prs_record_thread(s, tg, t, tick_ns, 0);
}

void prs_ptrace_other_trap(struct prs_sampler *s, struct prs_target *tg, struct prs_thr *t,
			   bool in_tick)
{
	/* Not held for the Python read: the handler resumes it now (a signal must go through). */
	t->life = PRS_THR_RUNNING;
	s->st.other_trap_stops++;
	if (!in_tick || !tg->tick.open) {
		t->ndeferred = 0; /* (lost: not sampled in a trap between ticks) */
		return;
	}
	snapshot(s, tg, t);
	t->t_cont = prs_now_ns();
}

/* ---- waiting for the stops ---- */

static bool any_owed(const struct prs_target *tg)
{
	for (size_t i = 0; i < tg->thr.n; i++)
		if (prs_thr_interrupt_owed(&tg->thr.v[i]))
			return true;
	return false;
}

/* True when a thread of tg owes its stop and is not known to be in D (PRS_THR_LATE). */
static bool any_interrupted(const struct prs_target *tg)
{
	for (size_t i = 0; i < tg->thr.n; i++)
		if (tg->thr.v[i].life == PRS_THR_INTERRUPTED)
			return true;
	return false;
}

static uint64_t stop_budget_ns(const struct prs_sampler *s)
{
	uint64_t b = (uint64_t)s->period_ns / STOP_BUDGET_DIV;

	if (s->opts.wait_every_stop)
		return STOP_WAIT_ALL_NS;
	return b < STOP_BUDGET_MIN_NS ? STOP_BUDGET_MIN_NS : b > STOP_BUDGET_MAX_NS ? STOP_BUDGET_MAX_NS : b;
}

/*
 * Marks LATE the interrupted threads of tg in uninterruptible sleep (D: they stop only when their
 * syscall ends; their state is taken from /proc this tick). Returns true if some thread is still
 * worth waiting for.
 */
static bool check_late_threads(struct prs_target *tg)
{
	bool waiting = false;

	for (size_t i = 0; i < tg->thr.n; i++) {
		struct prs_thr *t = &tg->thr.v[i];

		if (t->life != PRS_THR_INTERRUPTED)
			continue;
		if (prs_thr_letter_state(&tg->thr, t) == PRS_STATE_DISK)
			t->life = PRS_THR_LATE;
		else
			waiting = true;
	}
	return waiting;
}

/*
 * Takes the stops as they come (each one's sample is taken by the event handler), until every
 * interrupted thread of tg has stopped or been given up on, or deadline (CLOCK_MONOTONIC ns).
 */
static void wait_for_stops(struct prs_sampler *s, struct prs_target *tg, uint64_t deadline)
{
	/* (the spin: see STOP_SPIN_NS) */
	uint64_t spin_end = prs_now_ns() + STOP_SPIN_NS, next_check;

	if (spin_end > deadline)
		spin_end = deadline;
	while (any_owed(tg) && !tg->exited && prs_now_ns() < spin_end)
		if (prs_events_drain(s, true) == 0)
			__builtin_ia32_pause();
	next_check = spin_end;
	for (;;) {
		uint64_t now;

		prs_events_drain(s, true);
		now = prs_now_ns();
		if (now >= deadline || tg->exited || !any_owed(tg))
			return;
		if (now >= next_check) {
			if (!check_late_threads(tg))
				return;
			next_check = now + STOP_CHECK_NS;
		}
		prs_session_wait_signal(s, (next_check < deadline ? next_check : deadline) - now);
	}
}

/* True when a thread of a target whose tick is open still owes its stop and is worth waiting
 * for (not in D), looked for in D every STOP_CHECK_NS (check_late_threads). */
static bool any_late_waited(struct prs_sampler *s, bool check_d)
{
	bool waiting = false;

	for (size_t i = 0; i < s->ntargets; i++) {
		struct prs_target *tg = s->targets[i];

		if (!tg->tick.open || tg->exited)
			continue;
		if (check_d ? check_late_threads(tg) : any_interrupted(tg))
			waiting = true;
	}
	return waiting;
}

/*
 * After every target's threads were let go: the stops of the threads late for the budget, taken
 * as they come until the next tick is almost due (s->record_by), each resumed at once. Such a
 * thread was waiting for a CPU: it runs no code before it stops (a pending stop is taken on the
 * way back to user space), so its registers and stack are still of the tick's moment, and so are
 * the Python frames read for it. Nothing else is held meanwhile: the program loses nothing.
 * (Without it, 4 busy threads on 2 CPUs had 60 % of their samples from /proc, without stacks.)
 */
static void collect_late(struct prs_sampler *s)
{
	uint64_t margin = stop_budget_ns(s); /* for the recording after */
	uint64_t deadline = s->record_by > margin ? s->record_by - margin : 0;
	uint64_t next_check = prs_now_ns() + STOP_CHECK_NS;

	for (;;) {
		uint64_t now;
		bool check;

		prs_events_drain(s, true);
		now = prs_now_ns();
		check = now >= next_check;
		if (check)
			next_check = now + STOP_CHECK_NS;
		if (now >= deadline || s->stop_requested || !any_late_waited(s, check))
			return;
		prs_session_wait_signal(s, (next_check < deadline ? next_check : deadline) - now);
	}
}

/* ---- one tick ---- */

/*
 * True when t sleeps in the kernel and was read without a stop (prs_asleep_read): it is not
 * interrupted. Its schedstat, read before (prs_reuse_check), must not have moved by the end of
 * the reads: then it ran none of its code meanwhile, and its stack copy is of one moment. (An
 * interrupt would wake it only to stop it: a sleeper needs a CPU to enter its stop, 70 us and
 * more on a busy machine, while the threads already stopped wait for it; and its sleep would be
 * cut short.) dump (wait_every_stop) stops every thread.
 */
static bool read_asleep(struct prs_sampler *s, struct prs_target *tg, struct prs_thr *t)
{
	struct prs_schedstat ss;
	bool ok;

	if (s->opts.wait_every_stop || s->opts.read_idle || !t->tick_ss_ok || !tg->uw)
		return false;
	ok = prs_asleep_read(s, tg, t) && t->sampled &&
	     prs_thr_schedstat(&tg->thr, t, &ss) == 0 && prs_same_schedstat(&ss, &t->tick_ss);
	t->sampled = false; /* (its snapshot is recorded by record_asleep) */
	return ok;
}

/* Decides how each thread is sampled this tick: those not running (held, job-control stopped,
 * new, or owing a stop from an earlier tick) are not interrupted again, nor those asleep. */
static void plan(struct prs_sampler *s, struct prs_target *tg, struct prs_tick *k)
{
	for (size_t i = 0; i < tg->thr.n; i++) {
		struct prs_thr *t = &tg->thr.v[i];

		t->sampled = false;
		if (t->life == PRS_THR_LATE)
			t->life = PRS_THR_INTERRUPTED; /* waited for again this tick */
		t->reuse = PRS_REUSE_NONE;
		t->check_ns = 0;
		if (t->life != PRS_THR_RUNNING)
			continue;
		prs_reuse_check(s, tg, t, true);
		if (t->reuse == PRS_REUSE_NONE && read_asleep(s, tg, t))
			t->reuse = PRS_REUSE_ASLEEP;
		k->nstop += t->reuse == PRS_REUSE_NONE;
		k->nnative += t->reuse == PRS_REUSE_NATIVE;
		k->nasleep += t->reuse == PRS_REUSE_ASLEEP;
	}
}

static void warm(struct prs_sampler *s, struct prs_target *tg, struct prs_tick *k)
{
	uint64_t w0;

	if (!tg->py || !k->nstop || !tg->last_tick_ns || k->tick_ns - tg->last_tick_ns < PY_WARM_AFTER_NS)
		return;
	/* After ms asleep, the first process_vm_readv and the page walks to the target's pages
	 * cost 10-20 us more than warm (2-vCPU VM, 100 Hz). Pay that before stopping anything:
	 * the threads stay stopped 30-40 us less per tick. The profiler's cost is about the same,
	 * and is counted in sample_cost. */
	w0 = prs_now_ns();
	prs_py_warm(tg->py);
	k->warm_ns = prs_now_ns() - w0;
	prs_durations_add(&s->d_warm, k->warm_ns);
}

/* Sends PTRACE_INTERRUPT to every running thread to be stopped. Returns how many. */
static size_t interrupt_all(struct prs_target *tg)
{
	size_t n = 0;

	for (size_t i = 0; i < tg->thr.n; i++) {
		struct prs_thr *t = &tg->thr.v[i];

		if (t->life != PRS_THR_RUNNING || t->reuse != PRS_REUSE_NONE)
			continue;
		t->t_interrupt = t->t_asked = prs_now_ns();
		if (prs_ptrace_interrupt(t->tid) == 0) {
			t->life = PRS_THR_INTERRUPTED;
			n++;
		} else if (t->tid == tg->pid) {
			tg->leader_lost = true; /* (exiting, or exec'ed by a thread not seized) */
		}
	}
	return n;
}

/* True when no thread of tg can run during the Python read: each is held, job-control stopped,
 * new (a thread whose first stop has not come yet has not run any code) or asleep where its
 * kept sample shows it (checked after). */
static bool all_stopped(const struct prs_target *tg)
{
	for (size_t i = 0; i < tg->thr.n; i++) {
		const struct prs_thr *t = &tg->thr.v[i];

		if (t->life != PRS_THR_HELD && t->life != PRS_THR_GROUP_STOPPED &&
		    t->life != PRS_THR_NEW && t->reuse == PRS_REUSE_NONE)
			return false;
	}
	return true;
}

static void read_python(struct prs_sampler *s, struct prs_target *tg, struct prs_tick *k)
{
	uint64_t p0;

	size_t nlate = 0;

	for (size_t i = 0; i < tg->thr.n; i++) {
		k->nheld += tg->thr.v[i].life == PRS_THR_HELD;
		nlate += tg->thr.v[i].life == PRS_THR_INTERRUPTED; /* (recorded with them) */
	}
	if (!tg->py)
		return;
	if (!k->nheld && !k->nnative && !k->nasleep && !nlate) {
		tg->npyt = 0; /* every thread sleeps where its kept sample shows it */
		return;
	}
	/* Every thread that could be stopped is stopped, and the others sleep: walk the Python
	 * frames, then let go; they are named after (name_walked). */
	p0 = prs_now_ns();
	prs_py_set_stopped(tg->py, all_stopped(tg));
	prs_target_py_walk(s, tg);
	k->py_ns = prs_now_ns() - p0;
}

/*
 * The naming of tg's Python frames walked while its threads were held (read_python), with every
 * thread running again: decoding a code object, its strings and line table, and interning the
 * frames took half of the Python read (thread-per-request server, 3.11, load 10: 35 of 75 us per
 * tick), which the held threads (the GIL holder among them: the whole program) waited for. The
 * code objects' heads were read in the hold, so a frame is named by the object it ran.
 */
static void name_walked(struct prs_sampler *s, struct prs_target *tg)
{
	uint64_t n0;

	if (!tg->py_walked)
		return;
	n0 = prs_now_ns();
	prs_target_py_name_walked(s, tg);
	tg->tick.py_ns += prs_now_ns() - n0;
	prs_durations_add(&s->d_python, tg->tick.py_ns);
}

/* Lets go of the threads held for the Python read (also if an exec event dropped the
 * interpreter meanwhile); a stop that comes later is not held. */
static void release_held(struct prs_target *tg)
{
	tg->tick.hold = false;
	for (size_t i = 0; i < tg->thr.n; i++) {
		struct prs_thr *t = &tg->thr.v[i];

		if (t->life == PRS_THR_HELD) {
			t->life = PRS_THR_RUNNING;
			prs_events_resume(t, 0);
			t->t_cont = prs_now_ns();
		}
	}
}

/* t owes the stop of an interrupt at the end of the tick at tick_ns: when it waits for a CPU,
 * that tick's sample is deferred to its stop (struct prs_thr deferred_ns). Returns true if so. */
static bool defer(struct prs_target *tg, struct prs_thr *t, uint64_t tick_ns)
{
	if (t->life != PRS_THR_INTERRUPTED || t->ndeferred >= PRS_THR_DEFERRED_MAX ||
	    prs_thr_letter_state(&tg->thr, t) != PRS_STATE_RUNNING)
		return false;
	t->deferred_ns = tick_ns;
	t->ndeferred++;
	return true;
}

/*
 * PRS_REUSE_ASLEEP, after the Python read: if t stayed asleep through its reads and the Python
 * read (its schedstat unchanged), records its snapshot with this tick's Python frames, at rest
 * from then on. Returns false when it ran meanwhile (then record_woken).
 */
static bool record_asleep(struct prs_sampler *s, struct prs_target *tg, struct prs_thr *t,
			  uint64_t tick_ns, uint64_t share_ns)
{
	struct prs_schedstat now;
	struct prs_unwind_info info;
	struct prs_sample smp;
	uint64_t c0 = prs_now_ns();
	int n;

	if (prs_thr_schedstat(&tg->thr, t, &now) != 0 || !prs_same_schedstat(&now, &t->tick_ss)) {
		s->st.reuse_lost++;
		return false;
	}
	t->sampled = true; /* (the snapshot prs_asleep_read took) */
	n = prs_asleep_unwind(s, tg, t, &info);
	memset(&smp, 0, sizeof(smp));
	smp.state = (uint8_t)t->state;
	smp.syscall = (int16_t)t->syscall;
	prs_record_stack(s, tg, t, tick_ns, s->pcs, s->frame_ids, n, prs_target_py_thread(tg, t->tid),
			 &smp);
	prs_reuse_keep_native(s, tg, t, n, &info);
	t->sampled = false;
	t->kept.at_rest = t->kept.valid;
	t->kept.rest = now;
	s->st.read_asleep++;
	prs_durations_add(&s->d_cost, t->check_ns + (prs_now_ns() - c0) + share_ns);
	prs_cpu_balance_blocked(&t->bal, &now);
	return true;
}

/*
 * PRS_REUSE_ASLEEP, woken during the tick (after its reads, before the end of the Python read):
 * at the tick's moment it slept, in the state and syscall read then; its Python frames (read
 * after) are kept, its native frames are not (the two may be of different moments). Not its
 * state now: a sleeper that woke would count as a CPU sample.
 */
static void record_woken(struct prs_sampler *s, struct prs_target *tg, struct prs_thr *t,
			 uint64_t tick_ns)
{
	s->st.not_stopped++;
	t->sampled = false;
	prs_record_thread(s, tg, t, tick_ns, 0);
	prs_cpu_balance_blocked(&t->bal, &t->tick_ss);
}

static void record_all(struct prs_sampler *s, struct prs_target *tg, const struct prs_tick *k)
{
	size_t nsampled = 0, nread = k->nnative + k->nasleep;
	/* the Python read is in the stop of the held threads; else it is theirs */
	uint64_t warm_share, py_share = k->nheld || !nread ? 0 : k->py_ns / nread;

	for (size_t i = 0; i < tg->thr.n; i++)
		nsampled += tg->thr.v[i].sampled;
	warm_share = nsampled ? k->warm_ns / nsampled : 0;
	for (size_t i = 0; i < tg->thr.n; i++) {
		struct prs_thr *t = &tg->thr.v[i];

		if (t->sampled) {
			prs_record_thread(s, tg, t, k->tick_ns, warm_share);
		} else if (t->reuse == PRS_REUSE_ALL) {
			prs_reuse_record_all(s, tg, t, k->tick_ns, t->check_ns, 1);
		} else if (t->reuse == PRS_REUSE_NATIVE) {
			if (!prs_reuse_record_native(s, tg, t, k->tick_ns, py_share))
				prs_record_unstopped(s, tg, t, k->tick_ns, false);
		} else if (t->reuse == PRS_REUSE_ASLEEP) {
			if (!record_asleep(s, tg, t, k->tick_ns, py_share))
				record_woken(s, tg, t, k->tick_ns);
		} else if (prs_thr_interrupt_owed(t)) {
			/* Did not stop by the end of the tick: waiting for a CPU, its sample is taken
			 * from its stop; else (in uninterruptible sleep, or late for many ticks) ask
			 * /proc. */
			if (defer(tg, t, k->tick_ns))
				continue;
			s->st.skipped_late++;
			prs_record_unstopped(s, tg, t, k->tick_ns, true);
		} else if (t->life == PRS_THR_NEW) {
			s->st.skipped_new++; /* has run no code yet: its first stop is not waited for */
		} else if (t->life == PRS_THR_GROUP_STOPPED) {
			t->state = PRS_STATE_STOPPED;
			t->syscall = -1;
			t->wait_addr = 0;
			prs_record_thread(s, tg, t, k->tick_ns, warm_share);
		}
	}
}

/*
 * A tick of tg in three steps, each taken for every target before the next (session.c), so that
 * the stops of all the processes of a tree overlap as those of one process's threads do:
 * begin interrupts every thread to stop (but those asleep since their last sample); collect takes
 * the stops as they come (those of every target whose tick is open) until the tick's stop budget,
 * reads the Python frames of the threads held, and lets them go; record unwinds and records, with
 * every thread running.
 */
static void ptrace_tick_begin(struct prs_sampler *s, struct prs_target *tg, uint64_t now_ns)
{
	struct prs_tick *k = &tg->tick;
	uint64_t w0;

	/* Launch: the unwinder reads the maps of the exec'ed program, so create it once the child
	 * runs its own image (the first tick after exec). (It fails when the program is exiting, or
	 * its maps cannot be read yet: the threads are still sampled, their stacks left empty, and
	 * it is tried again.) */
	if (!tg->uw && tg->thr.n > 0 && prs_unwinder_new(tg->pid, &tg->uw, NULL) == 0)
		tg->last_maps_refresh = now_ns;
	memset(k, 0, sizeof(*k));
	k->open = k->hold = true;
	k->tick_ns = prs_now_ns();
	prs_target_refresh_maps(tg, k->tick_ns);
	plan(s, tg, k);
	warm(s, tg, k);
	tg->last_tick_ns = k->tick_ns;
	/* The exits since the session's last look (the tick's own reads above take 100 us and more:
	 * a thread-per-request server ends a thread every ms), reaped before the stop window opens:
	 * else a thread that ended is interrupted for nothing, and its exit (a waitid, a wait4,
	 * three closes) is handled in the window, while the threads that stopped wait (2.7 exits
	 * per window, strace of that server). Only before the session tick's first interrupt: a
	 * drain after it would resume a stop of this tick unsampled. */
	if (!s->window_start)
		prs_events_drain(s, false);
	w0 = prs_now_ns();
	k->ninterrupted = interrupt_all(tg);
	if (k->ninterrupted == 0)
		return;
	prs_diskwait_check(s, tg); /* (right after the interrupts: see diskwait.c) */
	if (!s->window_start)
		s->window_start = w0; /* the session tick's first interrupt */
}

/*
 * How long the threads held for the Python read wait for the others' stops: the spin, from the
 * session tick's first interrupt. A thread that has not stopped by then was not on a CPU (the
 * sleepers were read without a stop: read_asleep): it waits for one, and the interrupt keeps it
 * from running any of its code until its stop, so its Python frames read now and its stop taken
 * when it comes (collect_late, or between ticks: deferred) are both of the tick's moment. Waiting
 * for it would hold the threads that did stop for nothing. dump (wait_every_stop) waits for every
 * stop, up to its budget.
 */
static uint64_t stops_deadline(const struct prs_sampler *s)
{
	uint64_t budget = stop_budget_ns(s);

	if (s->opts.wait_every_stop || budget < STOP_SPIN_NS)
		return s->window_start + budget;
	return s->window_start + STOP_SPIN_NS;
}

static void ptrace_tick_collect(struct prs_sampler *s, struct prs_target *tg, uint64_t now_ns)
{
	struct prs_tick *k = &tg->tick;

	(void)now_ns;
	if (k->ninterrupted > 0)
		wait_for_stops(s, tg, stops_deadline(s));
	read_python(s, tg, k);
	release_held(tg);
}

static void ptrace_tick_record(struct prs_sampler *s, struct prs_target *tg)
{
	/* The first record of a session tick comes right after the last release: the stop window
	 * (of every target's stops) ends there. */
	if (s->window_start) {
		prs_durations_add(&s->d_window, prs_now_ns() - s->window_start);
		s->window_start = 0;
	}
	if (s->record_by) {
		/* (once per session tick: for every target, the naming before the late stops, which
		 * may record a deferred sample with the Python frames) */
		for (size_t i = 0; i < s->ntargets; i++)
			name_walked(s, s->targets[i]);
		collect_late(s);
		s->record_by = 0;
	}
	name_walked(s, tg);
	if (tg->py && tg->npyt)
		prs_target_py_names(s, tg);
	record_all(s, tg, &tg->tick);
}

/* ---- attaching to a live process ---- */

/* Seizes every thread; threads created by a not-yet-seized thread meanwhile show up in the next
 * listing, so list again until nothing new appears. */
static int seize_all(const struct prs_sampler *s, struct prs_target *tg, pid_t *tids,
		     struct prs_err *err)
{
	bool added;
	int n, rc;

	do {
		added = false;
		n = prs_task_list(tg->pid, tids, PRS_THR_MAX);
		if (n < 0)
			return prs_err_set(err, -ESRCH, "no process with pid %d", (int)tg->pid);
		for (int i = 0; i < n && i < PRS_THR_MAX; i++) {
			if (prs_thr_find(&tg->thr, tids[i]))
				continue;
			rc = prs_ptrace_seize(tids[i], s->seize_options, err);
			if (rc == -ESRCH)
				continue; /* exited meanwhile */
			if (rc == -EPERM) {
				char why[512];

				return prs_err_set(err, -EPERM, "%s",
						   prs_explain_eperm(tg->pid, why, sizeof(why)));
			}
			if (rc)
				return rc;
			tg->seized = true;
			if (!prs_thr_add(&tg->thr, tids[i]))
				return prs_err_set(err, -ENOMEM, "too many threads in pid %d",
						   (int)tg->pid);
			added = true;
		}
	} while (added);
	return 0;
}

static int ptrace_attach(struct prs_sampler *s, struct prs_target *tg, struct prs_err *err)
{
	pid_t *tids = malloc(PRS_THR_MAX * sizeof(*tids));
	int rc;

	if (!tids)
		return prs_err_set(err, -ENOMEM, "out of memory");
	rc = seize_all(s, tg, tids, err);
	free(tids);
	if (rc)
		return rc;
	if (tg->thr.n == 0)
		return prs_err_set(err, -ESRCH, "no process with pid %d", (int)tg->pid);
	return prs_unwinder_new(tg->pid, &tg->uw, err);
}

const struct prs_source_ops prs_source_ptrace = {
	.name = "ptrace",
	.traces = true,
	.attach = ptrace_attach,
	.threads = prs_newthreads_find,
	.begin = ptrace_tick_begin,
	.tick = ptrace_tick_collect,
	.record = ptrace_tick_record,
};
