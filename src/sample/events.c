/* SPDX-License-Identifier: MIT */
/*
 * ptrace events: every waitpid() result of every target, handled by the target that owns the
 * tid: signals to re-inject, job-control stops, new processes (--subprocesses), execs, exits;
 * during a tick, the interrupt stops that the sample source waits for. And the detach at the end.
 * (New threads send no event: the ticks find them, newthreads.c.)
 */
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/wait.h>

#include "pyrsprof/ptrace.h"
#include "pyrsprof/task.h"
#include "pyrsprof/util.h"
#include "sample/sampler-internal.h"
#include "util/banned.h"

#define DETACH_WAIT_NS 2000000000ull
#define DETACH_POLL_NS 2000000ull

void prs_events_resume(struct prs_thr *t, int sig)
{
	prs_ptrace_cont(t->tid, sig);
}

static bool is_exit(const struct prs_event *ev)
{
	return ev->kind == PRS_EV_EXITED || ev->kind == PRS_EV_KILLED;
}

/* A thread exited, known (t) or not; when it is a leader, its whole process is gone. */
static void on_thread_exit(struct prs_sampler *s, struct prs_target *tg, struct prs_thr *t,
			   pid_t tid, int status)
{
	if (t)
		prs_thr_remove(&tg->thr, t);
	tg = prs_session_target(s, tid);
	if (tg) {
		prs_target_exited(tg, status);
		/* Threads we had not seen exit are gone with the process. */
		prs_thr_remove_all(&tg->thr);
	}
}

static void on_interrupt(struct prs_sampler *s, struct prs_target *tg, struct prs_thr *t,
			 bool in_tick)
{
	if (t->life == PRS_THR_GROUP_STOPPED) {
		/* After LISTEN, a SIGCONT is reported as this trap: the job-control stop is over. */
		t->life = PRS_THR_RUNNING;
		prs_events_resume(t, 0);
	} else if (prs_thr_interrupt_owed(t) && in_tick && tg->tick.open) {
		prs_ptrace_take_sample(s, tg, t);
	} else if (prs_thr_interrupt_owed(t) && t->ndeferred) {
		prs_ptrace_deferred_stop(s, tg, t); /* (resumes it) */
	} else {
		t->life = PRS_THR_RUNNING;
		prs_events_resume(t, 0);
	}
}

struct prs_thr *prs_events_new_image(struct prs_sampler *s, struct prs_target *tg, bool others_gone)
{
	struct prs_thr *t;

	prs_target_exec(tg, others_gone);
	prs_tree_record_command(s, tg);
	t = prs_thr_find(&tg->thr, tg->pid);
	if (t) {
		if (t->life != PRS_THR_GROUP_STOPPED)
			t->life = PRS_THR_RUNNING; /* an interrupt owed is of the old image */
		t->kept.valid = t->kept.native = false; /* of the old image */
		t->ndeferred = 0;
		t->name_sid = t->py_name_sid = 0;
	}
	return t;
}

static void on_exec(struct prs_sampler *s, struct prs_target *tg)
{
	struct prs_thr *t = prs_events_new_image(s, tg, true);

	if (t)
		prs_events_resume(t, 0);
}

/* A fork or vfork event (only with subprocesses): the child joins the session. */
static void on_fork(struct prs_sampler *s, struct prs_target *tg, pid_t tid, pid_t child)
{
	struct prs_thr *t;

	prs_tree_forked(s, tg, child);
	if (prs_session_thread(s, tid, &t)) /* (the targets may have moved) */
		prs_events_resume(t, 0);
}

void prs_events_handle(struct prs_sampler *s, pid_t tid, int status, bool in_tick)
{
	struct prs_event ev;
	struct prs_thr *t;
	struct prs_target *tg;

	prs_ptrace_decode(tid, status, &ev);
	tg = prs_session_thread(s, tid, &t);
	if (is_exit(&ev)) {
		on_thread_exit(s, tg, t, tid, status);
		return;
	}
	if (!t) {
		/* A new process's first stop can arrive before its parent's fork event. */
		t = prs_tree_early_stop(s, tid);
		if (!t) {
			prs_ptrace_cont(tid, 0);
			return;
		}
		t->life = PRS_THR_NEW;
	}
	if (t->life == PRS_THR_NEW) {
		/* An auto-attached process (a fork) starts in a ptrace-stop (reported as
		 * PTRACE_EVENT_STOP, whatever its signal): always just resume it, never LISTEN. */
		t->life = PRS_THR_RUNNING;
		prs_events_resume(t, ev.kind == PRS_EV_SIGNAL ? ev.sig : 0);
		return;
	}
	/* (a job-control stop or an exec ends an owed interrupt too: their handlers say how) */
	if (prs_thr_interrupt_owed(t) && (ev.kind == PRS_EV_SIGNAL || ev.kind == PRS_EV_CLONE ||
					  ev.kind == PRS_EV_FORK || ev.kind == PRS_EV_OTHER))
		prs_ptrace_other_trap(s, tg, t, in_tick); /* it is the interrupt's stop */
	switch (ev.kind) {
	case PRS_EV_INTERRUPT:
		on_interrupt(s, tg, t, in_tick);
		break;
	case PRS_EV_SIGNAL:
		/* The interrupt (if any) is still owed: re-inject the signal and keep waiting. */
		prs_events_resume(t, ev.sig);
		break;
	case PRS_EV_GROUP_STOP:
		t->life = PRS_THR_GROUP_STOPPED;
		prs_ptrace_listen(t->tid);
		break;
	case PRS_EV_CLONE: /* (not asked for: PRS_PTRACE_OPTIONS) */
	case PRS_EV_OTHER:
		prs_events_resume(t, 0);
		break;
	case PRS_EV_EXEC:
		on_exec(s, tg);
		break;
	case PRS_EV_EXITING: /* (not asked for: PRS_PTRACE_OPTIONS) */
		prs_events_resume(t, 0);
		break;
	case PRS_EV_FORK:
		on_fork(s, tg, tid, ev.new_tid);
		break;
	case PRS_EV_EXITED:
	case PRS_EV_KILLED:
		break; /* (handled above) */
	}
}

/*
 * The next ptrace stop, not an exit (while a stop window is open: each waitpid() more there is
 * time the stopped threads wait), its waitpid() status in *status. Returns its tid or 0.
 */
static pid_t next_stop(int *status)
{
	siginfo_t si;

	si.si_pid = 0;
	/* (without WEXITED a zombie is not reaped; a ptrace stop is reported without WSTOPPED
	 * too, which waitid needs one of) */
	if (waitid(P_ALL, 0, &si, WSTOPPED | WNOHANG | __WALL) != 0 || si.si_pid <= 0)
		return 0;
	*status = si.si_status << 8 | 0x7f; /* (si_status: the stop's signal and event) */
	return si.si_pid;
}

/*
 * A traced thread that exited stays a zombie until it is reaped, its /proc files still there with
 * its final counts (no exit stop: PRS_PTRACE_OPTIONS): its exit accounting is read now, and
 * without subprocesses, at the root's exit, the CPU time of its children.
 */
static void before_reaping(struct prs_sampler *s, pid_t tid)
{
	struct prs_thr *t;
	struct prs_target *tg = prs_session_thread(s, tid, &t);

	if (!tg)
		return;
	prs_exit_acct_take(s, tg, tid);
	if (tid == s->targets[0]->pid)
		prs_tree_note_children_cpu(s);
}

/* The next waitpid() result, in *status (an exit is looked at before it is reaped). Returns its
 * tid or 0. */
static pid_t next_event(struct prs_sampler *s, int *status)
{
	siginfo_t si;
	pid_t tid;

	si.si_pid = 0;
	if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT | __WALL) != 0 || si.si_pid <= 0)
		return 0;
	tid = si.si_pid;
	if (si.si_code == CLD_EXITED || si.si_code == CLD_KILLED || si.si_code == CLD_DUMPED)
		before_reaping(s, tid);
	return waitpid(tid, status, __WALL | WNOHANG) == tid ? tid : 0;
}

int prs_events_drain(struct prs_sampler *s, bool in_tick)
{
	/* (dump waits for every stop: a thread that exits instead must be seen to, at once) */
	bool stops_only = s->window_start && !s->opts.wait_every_stop;
	int n = 0, status;
	pid_t tid;

	while ((tid = stops_only ? next_stop(&status) : next_event(s, &status)) > 0) {
		prs_events_handle(s, tid, status, in_tick);
		n++;
	}
	return n;
}

/* ---- detach ---- */

/* True while some seized target, alive, has threads not detached yet. */
static bool detach_pending(const struct prs_sampler *s)
{
	for (size_t i = 0; i < s->ntargets; i++) {
		const struct prs_target *tg = s->targets[i];

		if (tg->seized && tg->thr.n > 0 && !tg->exited)
			return true;
	}
	return false;
}

/* Asks every running thread of tg to stop (a job-control stopped one too: it is detached as
 * it is, and stays stopped after DETACH, as it should). */
static void interrupt_for_detach(struct prs_target *tg)
{
	for (size_t i = 0; i < tg->thr.n; i++) {
		struct prs_thr *t = &tg->thr.v[i];

		if (t->life == PRS_THR_HELD || prs_thr_interrupt_owed(t) ||
		    prs_ptrace_interrupt(t->tid) != 0)
			continue;
		if (t->life != PRS_THR_GROUP_STOPPED)
			t->life = PRS_THR_INTERRUPTED;
	}
}

/* Detaches whatever of tg is stopped now. */
static void detach_stopped(struct prs_target *tg)
{
	for (size_t i = 0; i < tg->thr.n;) {
		struct prs_thr *t = &tg->thr.v[i];

		if (t->life == PRS_THR_HELD || t->life == PRS_THR_GROUP_STOPPED) {
			prs_ptrace_detach(t->tid, 0);
			prs_thr_remove(&tg->thr, t);
		} else {
			i++;
		}
	}
}

/* One waitpid() result while detaching: the thread stopped (detach it, re-injecting a signal),
 * exited, or made a new thread (which will stop too: its first stop is detached). */
static void detach_event(struct prs_sampler *s, pid_t tid, int status)
{
	struct prs_event ev;
	struct prs_thr *t;
	struct prs_target *tg = prs_session_thread(s, tid, &t);

	prs_ptrace_decode(tid, status, &ev);
	if (!t) {
		if (!is_exit(&ev))
			prs_ptrace_detach(tid, ev.kind == PRS_EV_SIGNAL ? ev.sig : 0);
		else if ((tg = prs_session_target(s, tid)) != NULL)
			prs_target_exited(tg, status);
		return;
	}
	switch (ev.kind) {
	case PRS_EV_EXITED:
	case PRS_EV_KILLED:
		if (tid == tg->pid)
			prs_target_exited(tg, status);
		prs_thr_remove(&tg->thr, t);
		break;
	case PRS_EV_SIGNAL:
		prs_ptrace_detach(tid, ev.sig);
		prs_thr_remove(&tg->thr, t);
		break;
	case PRS_EV_FORK:
		prs_tree_forked_at_detach(s, tg, ev.new_tid);
		tg = prs_session_thread(s, tid, &t);
		prs_ptrace_detach(tid, 0);
		prs_thr_remove(&tg->thr, t);
		break;
	default:
		prs_ptrace_detach(tid, 0);
		prs_thr_remove(&tg->thr, t);
		break;
	}
}

void prs_events_detach_all(struct prs_sampler *s)
{
	uint64_t deadline = prs_now_ns() + DETACH_WAIT_NS;
	bool any = false;

	for (size_t i = 0; i < s->ntargets; i++) {
		if (s->targets[i]->seized) {
			interrupt_for_detach(s->targets[i]);
			any = true;
		}
	}
	if (!any)
		return;
	while (detach_pending(s)) {
		int status;
		pid_t tid;

		for (size_t i = 0; i < s->ntargets; i++)
			if (s->targets[i]->seized)
				detach_stopped(s->targets[i]);
		if (!detach_pending(s) || prs_now_ns() >= deadline)
			break;
		tid = waitpid(-1, &status, __WALL | WNOHANG);
		if (tid > 0) {
			detach_event(s, tid, status);
			continue;
		}
		prs_session_wait_signal(s, DETACH_POLL_NS);
	}
	for (size_t i = 0; i < s->ntargets; i++)
		s->targets[i]->seized = false;
}
