/* SPDX-License-Identifier: MIT */
/*
 * The sampling loop. Per tick: PTRACE_INTERRUPT every running thread, and as each one stops read
 * its registers and one stack snapshot and resume it at once (the stop window is only that); then,
 * with every thread running again, unwind the snapshots and record the samples. Between ticks the
 * loop sleeps in sigtimedwait() until the next absolute deadline, handling ptrace events (new
 * threads, signal-delivery stops to re-inject, exits, execs) and the user's signals as they come.
 *
 * Nothing on the per-tick path allocates once every thread has its snapshot buffer and the
 * profile's interning tables are warm.
 */
#include "pyrsprof/sampler.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pyrsprof/maps.h"
#include "pyrsprof/ptrace.h"
#include "pyrsprof/python.h"
#include "pyrsprof/symbol.h"
#include "pyrsprof/task.h"
#include "pyrsprof/unwind.h"
#include "pyrsprof/util.h"
#include "util/banned.h"

#define MAX_THREADS 4096
#define SYS_RESTART_SYSCALL 219 /* x86_64 */
#define DIST_CAP 65536           /* durations kept per statistic (reservoir beyond) */
/* After INTERRUPT, a runnable thread stops when it next gets a CPU, which on a loaded machine can
 * take a scheduler period or more; a thread in D state stops only when its syscall ends. Every
 * STOP_CHECK_NS the late ones are looked up in /proc; none is waited for beyond STOP_WAIT_MAX_NS. */
#define STOP_CHECK_NS 2000000ull
#define STOP_SPIN_NS 200000ull
#define STOP_WAIT_MAX_NS 200000000ull
/* After this long since the last tick, the Python reads are warmed up before the stop (prs_py_warm) */
#define PY_WARM_AFTER_NS 3000000ull
#define DETACH_WAIT_NS 2000000000ull
#define MAPS_REFRESH_MIN_NS 100000000ull
#define COMM_REFRESH_NS 1000000000ull
#define MAX_PY_THREADS 256
/* vm mode: the Python frames are read at least this often, even while every thread sleeps */
#define VM_FULL_READ_NS 250000000ull
/* Looking for CPython in a launched program: often at first (the interpreter maps libpython and
 * initialises _PyRuntime during start-up), then rarely; and again whenever the maps change. */
#define PY_RETRY_FAST_NS 20000000ull
#define PY_RETRY_SLOW_NS 1000000000ull
#define PY_FAST_PERIOD_NS 3000000000ull

/* What a thread's last sample leaves for the next ticks while the thread sleeps. */
struct kept {
	bool valid;             /* the last sample found the thread blocked, and is kept here */
	bool at_rest;           /* rest: its schedstat, taken before the reads of that sample */
	struct prs_schedstat rest;
	uint32_t stack;         /* the sample's stack id, state, syscall and flags */
	uint8_t state, flags;
	int16_t syscall;
	/* ptrace mode: the native part of the last stop, for a thread found asleep there again */
	bool native;            /* the fields below are valid */
	int n;                  /* frames in pcs and ids */
	uint64_t *pcs;          /* PRS_MAX_NATIVE_FRAMES each, allocated on first use */
	uint32_t *ids;
	size_t used;            /* the unwind read the snapshot's [0, used): t->stack still holds it */
	uint64_t sp, pc, gen;   /* RSP and RIP at the stop; the unwinder's maps generation */
	int nr, restart_nr;     /* the syscall at the stop, and as /proc shows its restarted call */
};

/* How a thread is sampled this tick (see "Sleeping threads"). */
enum reuse {
	REUSE_NONE = 0, /* read it: stopped (ptrace), or its memory read (vm) */
	REUSE_ALL,      /* it has not run since its kept sample: record that again */
	REUSE_NATIVE,   /* ptrace: asleep where it was stopped: kept native frames, Python read now */
};

struct thr {
	pid_t tid;
	bool stopped;           /* in a ptrace-stop we have not resumed yet */
	bool group_stopped;     /* job-control stopped (resumed with LISTEN) */
	bool interrupt_pending; /* we sent INTERRUPT and have not seen the stop */
	bool initial_stop;      /* a new thread's first stop has not arrived yet */
	bool sampled;           /* has a snapshot waiting to be unwound this tick */
	bool held;              /* sampled but kept stopped until the Python frames are read */
	bool given_up;          /* in D state: not waited for this tick */
	uint32_t name_sid;      /* last recorded name (string id), 0 = none */
	uint32_t py_name_sid;   /* the threading name, preferred to the kernel's comm; 0 = none */
	uint64_t t_interrupt, t_cont;
	enum prs_state state;
	int syscall;
	int blocked_in;         /* the syscall of the last blocked sample, -1 after a running one */
	int schedstat_fd;       /* /proc/PID/task/TID/schedstat, kept open (-1: not open) */
	int stat_fd;            /* /proc/PID/task/TID/stat, kept open (-1: not open) */
	int syscall_fd;         /* /proc/PID/task/TID/syscall, kept open (-1: not open) */
	/* sleeping threads (see "Sleeping threads") */
	struct kept kept;       /* the last sample, while it may be recorded again */
	enum reuse reuse;       /* this tick */
	struct prs_schedstat tick_ss; /* read at the start of this tick (tick_ss_ok) */
	bool tick_ss_ok;
	uint64_t check_ns;      /* this tick's time spent deciding reuse (part of its cost) */
	uint64_t cpu_ns;        /* CPU time at the last sample (0 = none yet) */
	int64_t cpu_credit_ns;  /* CPU time not yet paid out as on-CPU samples (< 0: overpaid) */
	struct prs_regs regs;
	uint8_t *stack;
	size_t stack_len;
};

struct dist {
	uint32_t *v;
	size_t n, seen;
};

struct prs_sampler {
	enum prs_sampler_mode mode;
	struct prs_sampler_opts opts;
	pid_t pid;
	struct prs_recorder *rec;
	struct prs_profile *prof;
	struct thr *thr;
	size_t nthr;
	struct prs_unwinder *uw;
	bool maps_dirty;
	uint64_t last_maps_refresh;
	/* profile mapping id for each index of the unwinder's maps (PRS_NO_MAPPING = not yet) */
	uint32_t *map_ids;
	size_t nmap_ids;
	uint64_t maps_gen; /* unwinder maps generation map_ids was built for (0 = none) */
	uint64_t *pcs;
	uint32_t *frame_ids;
	uint64_t t0, last_flush, last_comm;
	bool exited, stop_requested, attached, exec_failed;
	bool exec_seen; /* launch: the child runs the program's image (before: pyrsprof's own) */
	int exit_status; /* raw wait status of the leader */
	int sigints;
	unsigned rng;
	struct prs_sampler_stats st;
	int open_fds;        /* per-thread /proc files kept open (see KEPT_FDS) */
	/* Python */
	struct prs_py *py;
	struct prs_py_thread *pyt;
	int npyt;
	bool py_given_up;
	uint64_t py_next_try;
	uint32_t *merged;
	char py_info[256];
	struct dist d_cost, d_stop, d_unwind, d_python, d_names;
	uint64_t last_tick_ns;      /* start of the last tick() */
	uint64_t last_py_read;      /* vm mode: end of the last Python read */
	bool reuse_idle;            /* record sleeping threads again instead of reading them */
	uint8_t *cmp;               /* ptrace mode: a sleeping thread's stack, read to compare */
	uint64_t warm_share_ns;     /* this tick's prs_py_warm time, per thread-sample */
};

int prs_sampler_sigset(sigset_t *set)
{
	sigemptyset(set);
	sigaddset(set, SIGCHLD);
	sigaddset(set, SIGINT);
	sigaddset(set, SIGTERM);
	sigaddset(set, SIGHUP);
	sigaddset(set, SIGQUIT);
	return 0;
}

/* ---- statistics ---- */

static void dist_add(struct prs_sampler *s, struct dist *d, uint64_t ns)
{
	uint32_t v = ns > UINT32_MAX ? UINT32_MAX : (uint32_t)ns;

	d->seen++;
	if (d->n < DIST_CAP) {
		d->v[d->n++] = v;
		return;
	}
	/* Reservoir sampling keeps a uniform sample of every duration seen. */
	s->rng = s->rng * 1103515245u + 12345u;
	size_t j = (size_t)((s->rng >> 1) % d->seen);
	if (j < DIST_CAP)
		d->v[j] = v;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static void dist_summary(const struct dist *d, struct prs_dist *out)
{
	memset(out, 0, sizeof(*out));
	if (d->n == 0)
		return;
	uint32_t *tmp = malloc(d->n * sizeof(*tmp));
	if (!tmp)
		return;
	memcpy(tmp, d->v, d->n * sizeof(*tmp));
	qsort(tmp, d->n, sizeof(*tmp), cmp_u32);
	out->n = d->seen;
	out->median = tmp[d->n / 2];
	out->p10 = tmp[d->n / 10];
	out->p90 = tmp[(d->n * 9) / 10];
	out->max = tmp[d->n - 1];
	free(tmp);
}

/* ---- threads ---- */

static struct thr *thr_find(struct prs_sampler *s, pid_t tid)
{
	for (size_t i = 0; i < s->nthr; i++)
		if (s->thr[i].tid == tid)
			return &s->thr[i];
	return NULL;
}

static struct thr *thr_add(struct prs_sampler *s, pid_t tid)
{
	struct thr *t = thr_find(s, tid);

	if (t)
		return t;
	if (s->nthr >= MAX_THREADS)
		return NULL;
	t = &s->thr[s->nthr];
	memset(t, 0, sizeof(*t));
	t->stack = malloc(s->opts.stack_bytes);
	if (!t->stack)
		return NULL;
	t->tid = tid;
	t->blocked_in = -1;
	t->schedstat_fd = -1;
	t->stat_fd = -1;
	t->syscall_fd = -1;
	s->nthr++;
	s->st.threads_seen++;
	return t;
}

static void thr_remove(struct prs_sampler *s, struct thr *t)
{
	if (t->schedstat_fd >= 0) {
		close(t->schedstat_fd);
		s->open_fds--;
	}
	if (t->stat_fd >= 0) {
		close(t->stat_fd);
		s->open_fds--;
	}
	if (t->syscall_fd >= 0) {
		close(t->syscall_fd);
		s->open_fds--;
	}
	free(t->kept.pcs);
	free(t->kept.ids);
	free(t->stack);
	*t = s->thr[--s->nthr];
}

/*
 * Records the thread's name when it is new or changed (threads often name themselves after start):
 * its threading name for a Python thread whose name could be read, else the kernel's comm.
 */
static void thr_record_name(struct prs_sampler *s, struct thr *t)
{
	char comm[64];
	uint32_t sid = t->py_name_sid;

	if (!sid) {
		if (prs_task_comm(s->pid, t->tid, comm, sizeof(comm)) != 0)
			return;
		sid = prs_profile_string(s->prof, comm, strlen(comm));
	}
	if (sid == UINT32_MAX || sid == t->name_sid)
		return;
	t->name_sid = sid;
	prs_profile_thread(s->prof, t->tid, sid);
}

/* ---- ptrace events ---- */

/* Resumes a stopped thread, delivering sig. A thread that vanished meanwhile is left to its exit event. */
static void resume(struct prs_sampler *s, struct thr *t, int sig)
{
	(void)s;
	prs_ptrace_cont(t->tid, sig);
	t->stopped = false;
}

/*
 * Per-thread /proc files (schedstat; in vm mode stat) stay open, one pread per read, up to
 * KEPT_FDS descriptors in all; beyond, each read opens and closes its file, so a process with
 * thousands of threads cannot use up pyrsprof's file descriptors (the symbolizer needs them at
 * the end). A read goes through kept_fd (where it may keep its descriptor), then kept_fd_done.
 */
#define KEPT_FDS 256

static int *kept_fd(struct prs_sampler *s, int *own, int *scratch)
{
	*scratch = -1;
	return *own >= 0 || s->open_fds < KEPT_FDS ? own : scratch;
}

/* Counts the descriptor the read opened or closed (had: *own was open before) and closes scratch. */
static void kept_fd_done(struct prs_sampler *s, const int *own, bool had, int *scratch)
{
	if (*scratch >= 0)
		close(*scratch);
	*scratch = -1;
	if (!had && *own >= 0)
		s->open_fds++;
	else if (had && *own < 0)
		s->open_fds--;
}

static int schedstat(struct prs_sampler *s, struct thr *t, struct prs_schedstat *ss)
{
	bool had = t->schedstat_fd >= 0;
	int scratch, rc;

	rc = prs_task_schedstat(s->pid, t->tid, kept_fd(s, &t->schedstat_fd, &scratch), ss);
	kept_fd_done(s, &t->schedstat_fd, had, &scratch);
	return rc;
}

static int task_syscall(struct prs_sampler *s, struct thr *t, struct prs_task_sys *sys)
{
	bool had = t->syscall_fd >= 0;
	int scratch, rc;

	rc = prs_task_syscall_fd(s->pid, t->tid, kept_fd(s, &t->syscall_fd, &scratch), sys);
	kept_fd_done(s, &t->syscall_fd, had, &scratch);
	return rc;
}

/* The thread's state from its stat file's letter: R running, D in uninterruptible sleep (usually
 * IO), anything else blocked. */
static enum prs_state letter_state(struct prs_sampler *s, struct thr *t)
{
	bool had = t->stat_fd >= 0;
	int scratch;
	char c;

	c = prs_task_state_fd(s->pid, t->tid, kept_fd(s, &t->stat_fd, &scratch));
	kept_fd_done(s, &t->stat_fd, had, &scratch);
	return c == 'R' ? PRS_STATE_RUNNING : c == 'D' ? PRS_STATE_DISK : PRS_STATE_BLOCKED;
}

/*
 * vm mode: the thread's state now, from its syscall file: running, or blocked in which syscall
 * (a sleep restarted after a signal shows as restart_syscall: the first syscall is kept, as in
 * take_sample). Asleep outside a syscall (a page fault, a job-control stop), or when the file
 * cannot be read, the stat file's letter decides.
 */
static enum prs_state vm_state(struct prs_sampler *s, struct thr *t, int *syscall)
{
	struct prs_task_sys sys;

	*syscall = -1;
	if (task_syscall(s, t, &sys) == 0) {
		if (sys.running)
			return PRS_STATE_RUNNING;
		if (sys.nr >= 0) {
			*syscall = sys.nr == SYS_RESTART_SYSCALL && t->blocked_in >= 0 ? t->blocked_in : sys.nr;
			t->blocked_in = *syscall;
			return PRS_STATE_BLOCKED;
		}
	}
	return letter_state(s, t);
}

/*
 * A thread that is not blocked was either on a CPU or runnable and waiting for one when the tick
 * came; its registers cannot tell which, and a waiting thread's stack is where it was preempted
 * (often a syscall return), not where it spends CPU time. Its schedstat decides, read before the
 * INTERRUPT (tick_ss) and again once it stopped:
 * - the count of times it was given a CPU (slices) did not change: it was running, and stopped
 *   where it ran;
 * - it grew: it had to be given a CPU to stop. It was waiting; or it was running, but lost its
 *   CPU before it could stop: to pyrsprof itself waking on that CPU to sample it, or to another
 *   task the INTERRUPT's reschedule IPI picked. Those ambiguous samples count as on-CPU only while
 *   the CPU time the thread used (exact once it is stopped) is more than its on-CPU samples have
 *   paid for, one period each: so the CPU view adds up to the CPU time used.
 * The balance is exact: a debt is never forgiven (clamping it, as an earlier version did at one
 * period, made the CPU view count 17-30 % too many samples of a thread sharing its CPU with a
 * spinner); only a surplus is capped (missed ticks must not bank a burst). The run-queue wait
 * time is no witness: a waiting thread that the INTERRUPT's wake-up lets preempt the running task
 * stops after microseconds of wait, like a running one.
 */
static enum prs_state cpu_or_runqueue(struct prs_sampler *s, struct thr *t)
{
	int64_t period = (int64_t)(1e9 / s->opts.rate_hz);
	struct prs_schedstat ss;
	bool first = t->cpu_ns == 0;

	if (!t->tick_ss_ok || schedstat(s, t, &ss) != 0)
		return PRS_STATE_RUNNING;
	if (!first && ss.cpu_ns >= t->cpu_ns)
		t->cpu_credit_ns += (int64_t)(ss.cpu_ns - t->cpu_ns);
	t->cpu_ns = ss.cpu_ns ? ss.cpu_ns : 1;
	if (t->cpu_credit_ns > 2 * period)
		t->cpu_credit_ns = 2 * period;
	if (first || ss.slices == t->tick_ss.slices || t->cpu_credit_ns >= period / 2) {
		t->cpu_credit_ns -= period;
		return PRS_STATE_RUNNING;
	}
	return PRS_STATE_RUNQUEUE;
}

/* A blocked thread used no CPU worth paying out: its balance starts again from cpu_ns. */
static void restart_balance(struct thr *t, uint64_t cpu_ns)
{
	t->cpu_ns = cpu_ns ? cpu_ns : 1;
	t->cpu_credit_ns = 0;
}

static void note_blocked(struct prs_sampler *s, struct thr *t)
{
	struct prs_schedstat ss;

	if (schedstat(s, t, &ss) == 0)
		restart_balance(t, ss.cpu_ns);
	else
		t->cpu_credit_ns = 0;
}

/*
 * Takes the sample of a thread in our interrupt stop: registers, state, snapshot; then resumes it,
 * unless Python frames are to be read too: then it stays stopped until every thread of the tick
 * has stopped, so the Python frames and the native stacks are of one consistent moment.
 */
static void take_sample(struct prs_sampler *s, struct thr *t)
{
	t->interrupt_pending = false;
	t->sampled = false;
	if (prs_ptrace_getregs(t->tid, &t->regs) == 0) {
		ssize_t n;

		t->state = prs_state_from_regs(&t->regs, &t->syscall);
		/* A sleep our interrupt cut short resumes as restart_syscall (it is how the kernel
		 * restarts nanosleep, poll or futex waits with a timeout): the next interrupt then sees
		 * that number. Keep naming the syscall the thread was first seen blocked in. */
		if (t->state == PRS_STATE_BLOCKED && t->syscall == SYS_RESTART_SYSCALL &&
		    t->blocked_in >= 0)
			t->syscall = t->blocked_in;
		t->blocked_in = t->state == PRS_STATE_BLOCKED ? t->syscall : -1;
		if (t->state == PRS_STATE_RUNNING)
			t->state = cpu_or_runqueue(s, t);
		else
			note_blocked(s, t);
		n = prs_read_stack(s->pid, t->regs.r[PRS_REG_RSP], t->stack, s->opts.stack_bytes);
		if (n < 0) {
			s->st.read_errors++;
			n = 0;
		}
		t->stack_len = (size_t)n;
		t->sampled = true;
	}
	if (s->py && t->sampled) {
		t->held = true;
		return;
	}
	resume(s, t, 0);
	t->t_cont = prs_now_ns();
}

/* Handles one waitpid() result. During a tick, interrupt stops of pending threads are sampled. */
static void handle_event(struct prs_sampler *s, pid_t tid, int status, bool in_tick)
{
	struct prs_event ev;
	struct thr *t = thr_find(s, tid);

	prs_ptrace_decode(tid, status, &ev);
	if (!t) {
		if (ev.kind == PRS_EV_EXITED || ev.kind == PRS_EV_KILLED)
			goto exited;
		/* A new thread's first stop can arrive before its parent's clone event. */
		t = thr_add(s, tid);
		if (!t) {
			prs_ptrace_cont(tid, 0);
			return;
		}
		t->initial_stop = true;
	}
	if (ev.kind != PRS_EV_EXITED && ev.kind != PRS_EV_KILLED)
		t->stopped = true;

	if (t->initial_stop && ev.kind != PRS_EV_EXITED && ev.kind != PRS_EV_KILLED) {
		/* Auto-attached threads start in a ptrace-stop (reported as PTRACE_EVENT_STOP, whatever its
		 * signal): always just resume it, never LISTEN. */
		t->initial_stop = false;
		if (ev.kind == PRS_EV_SIGNAL)
			resume(s, t, ev.sig);
		else
			resume(s, t, 0);
		return;
	}

	switch (ev.kind) {
	case PRS_EV_INTERRUPT:
		if (t->group_stopped) {
			/* After LISTEN, a SIGCONT is reported as this trap: the job-control stop is over. */
			t->group_stopped = false;
			resume(s, t, 0);
		} else if (t->interrupt_pending && in_tick) {
			take_sample(s, t);
		} else {
			t->interrupt_pending = false;
			resume(s, t, 0);
		}
		break;
	case PRS_EV_SIGNAL:
		/* The interrupt (if any) is still pending: re-inject the signal and keep waiting. */
		resume(s, t, ev.sig);
		break;
	case PRS_EV_GROUP_STOP:
		t->group_stopped = true;
		t->interrupt_pending = false;
		prs_ptrace_listen(t->tid);
		t->stopped = false;
		break;
	case PRS_EV_CLONE: {
		struct thr *n = ev.new_tid > 0 ? thr_find(s, ev.new_tid) : NULL;

		if (ev.new_tid > 0 && !n) {
			n = thr_add(s, ev.new_tid);
			if (n)
				n->initial_stop = true;
		}
		t = thr_find(s, tid); /* thr_add may not move entries, but be safe */
		if (t)
			resume(s, t, 0);
		break;
	}
	case PRS_EV_EXEC:
		/* Every other thread is gone; the leader carries on in a new image. */
		for (size_t i = 0; i < s->nthr;) {
			if (s->thr[i].tid != s->pid)
				thr_remove(s, &s->thr[i]);
			else
				i++;
		}
		s->maps_dirty = true;
		s->last_maps_refresh = 0; /* refresh at the next tick, whatever the rate limit */
		s->exec_seen = true;
		prs_py_free(s->py);
		s->py = NULL;
		s->npyt = 0;
		s->py_next_try = 0;
		t = thr_find(s, s->pid);
		if (t) {
			t->interrupt_pending = false;
			t->kept.valid = t->kept.native = false; /* of the old image */
			t->name_sid = t->py_name_sid = 0;
			resume(s, t, 0);
		}
		break;
	case PRS_EV_FORK:
	case PRS_EV_OTHER:
		resume(s, t, 0);
		break;
	case PRS_EV_EXITED:
	case PRS_EV_KILLED:
		thr_remove(s, t);
		goto exited;
	}
	return;
exited:
	if (tid == s->pid) {
		s->exited = true;
		s->exit_status = status;
		/* Threads we had not seen exit are gone with the process. */
		while (s->nthr > 0)
			thr_remove(s, &s->thr[0]);
	}
}

/* Drains every pending waitpid() result. Returns how many were handled. */
static int drain_events(struct prs_sampler *s, bool in_tick)
{
	int n = 0, status;
	pid_t tid;

	while ((tid = waitpid(-1, &status, __WALL | WNOHANG)) > 0) {
		handle_event(s, tid, status, in_tick);
		n++;
	}
	return n;
}

/* Acts on a user signal taken by sigtimedwait. */
static void handle_user_signal(struct prs_sampler *s, const siginfo_t *si)
{
	int sig = si->si_signo;
	bool from_kill = si->si_code == SI_USER || si->si_code == SI_QUEUE;

	if (s->mode == PRS_SAMPLE_ATTACH) {
		s->stop_requested = true;
		return;
	}
	/* Launch mode. A Ctrl-C from the terminal reached the child through the process group; a
	 * signal sent to pyrsprof alone with kill() is forwarded, as if pyrsprof were the program. */
	if (from_kill && si->si_pid != s->pid && !s->exited) {
		kill(s->pid, sig);
		s->st.signals_forwarded++;
	}
	if (sig == SIGINT && ++s->sigints >= 2)
		s->stop_requested = true;
}

/* True if some thread still owes us its interrupt stop this tick. */
static bool any_pending(const struct prs_sampler *s)
{
	for (size_t i = 0; i < s->nthr; i++)
		if (s->thr[i].interrupt_pending)
			return true;
	return false;
}

/*
 * During a tick, a thread that has not stopped yet is either waiting for a CPU (keep waiting: it
 * stops as soon as it runs) or in uninterruptible sleep (D state: it stops only when the syscall
 * ends, so take its state from /proc and stop waiting for it this tick). Returns true if some
 * thread is still worth waiting for.
 */
static bool check_late_threads(struct prs_sampler *s)
{
	bool waiting = false;

	for (size_t i = 0; i < s->nthr; i++) {
		struct thr *t = &s->thr[i];

		if (!t->interrupt_pending || t->given_up)
			continue;
		if (prs_task_state(s->pid, t->tid) == 'D')
			t->given_up = true;
		else
			waiting = true;
	}
	return waiting;
}

/*
 * Waits for signals until deadline (CLOCK_MONOTONIC ns), handling ptrace events and user signals.
 * In a tick it returns as soon as every interrupted thread has stopped or been given up on.
 */
static void wait_until(struct prs_sampler *s, uint64_t deadline, bool in_tick)
{
	uint64_t next_check = prs_now_ns() + STOP_CHECK_NS;
	sigset_t set;

	prs_sampler_sigset(&set);
	if (in_tick) {
		/* A running thread stops within microseconds of the INTERRUPT, but a profiler that
		 * sleeps until SIGCHLD pays for its idle CPU's wake-up on top (measured: stop 69 us
		 * median sleeping, pinned on an idle VM, against ~10 us when the CPU was busy). So poll
		 * for the stops for a short while before sleeping. */
		uint64_t spin_end = prs_now_ns() + STOP_SPIN_NS;

		while (any_pending(s) && !s->exited && prs_now_ns() < spin_end)
			if (drain_events(s, true) == 0)
				__builtin_ia32_pause();
	}
	for (;;) {
		uint64_t now, until;
		struct timespec ts;
		siginfo_t si;
		int sig;

		drain_events(s, in_tick);
		now = prs_now_ns();
		if (now >= deadline || s->exited)
			return;
		if (in_tick) {
			if (!any_pending(s))
				return;
			if (now >= next_check) {
				if (!check_late_threads(s))
					return;
				next_check = now + STOP_CHECK_NS;
			}
		}
		until = in_tick && next_check < deadline ? next_check : deadline;
		ts.tv_sec = (time_t)((until - now) / 1000000000ull);
		ts.tv_nsec = (long)((until - now) % 1000000000ull);
		sig = sigtimedwait(&set, &si, &ts);
		if (sig > 0 && sig != SIGCHLD)
			handle_user_signal(s, &si);
		if (s->stop_requested && !in_tick)
			return;
	}
}

/* ---- recording ---- */

/* The profile mapping id of the unwinder's map containing pc, or PRS_NO_MAPPING. */
static uint32_t mapping_id(struct prs_sampler *s, uint64_t pc)
{
	const struct prs_maps *maps = prs_unwinder_maps(s->uw);
	const struct prs_map *m;
	size_t idx;

	if (!maps)
		return PRS_NO_MAPPING;
	if (prs_unwinder_generation(s->uw) != s->maps_gen || s->nmap_ids != maps->n) {
		uint32_t *ids = realloc(s->map_ids, (maps->n ? maps->n : 1) * sizeof(*ids));

		if (!ids)
			return PRS_NO_MAPPING;
		s->map_ids = ids;
		s->nmap_ids = maps->n;
		for (size_t i = 0; i < maps->n; i++)
			ids[i] = PRS_NO_MAPPING;
		s->maps_gen = prs_unwinder_generation(s->uw);
	}
	m = prs_maps_find(maps, pc);
	if (!m) {
		s->maps_dirty = true;
		return PRS_NO_MAPPING;
	}
	idx = (size_t)(m - maps->v);
	if (s->map_ids[idx] == PRS_NO_MAPPING && m->path[0] != '\0') {
		struct prs_mapping pm;
		size_t len = 0;

		memset(&pm, 0, sizeof(pm));
		pm.start = m->start;
		pm.end = m->end;
		pm.offset = m->offset;
		pm.path = prs_profile_string(s->prof, m->path, strlen(m->path));
		if (m->path[0] == '/' &&
		    prs_elf_build_id(m->path, pm.build_id, sizeof(pm.build_id), &len) == 0)
			pm.build_id_len = (uint8_t)len;
		s->map_ids[idx] = prs_profile_mapping(s->prof, &pm);
	}
	return s->map_ids[idx];
}

/*
 * Gives the Python threads of this tick their threading names: from the reader's cache, re-read
 * (between ticks, the target running) when due. A thread's name in the profile follows.
 */
static void py_names(struct prs_sampler *s)
{
	uint64_t now = prs_now_ns();

	for (int i = 0; i < s->npyt; i++)
		s->pyt[i].name = prs_py_thread_name(s->py, s->prof, s->pyt[i].thread_id);
	if (s->npyt > 0 && prs_py_names_due(s->py, now)) {
		prs_py_read_thread_names(s->py, s->prof, now);
		s->st.py_name_reads++;
		dist_add(s, &s->d_names, prs_now_ns() - now);
		for (int i = 0; i < s->npyt; i++)
			s->pyt[i].name = prs_py_thread_name(s->py, s->prof, s->pyt[i].thread_id);
	}
	for (int i = 0; i < s->npyt; i++) {
		struct thr *t = s->pyt[i].tid > 0 && s->pyt[i].name ? thr_find(s, s->pyt[i].tid) : NULL;

		if (t && t->py_name_sid != s->pyt[i].name) {
			t->py_name_sid = s->pyt[i].name;
			thr_record_name(s, t);
		}
	}
}

/* The Python frames read this tick of thread tid, or NULL. */
static const struct prs_py_thread *py_thread_of(const struct prs_sampler *s, pid_t tid)
{
	for (int i = 0; s->py && i < s->npyt; i++)
		if (s->pyt[i].tid == tid)
			return &s->pyt[i];
	return NULL;
}

/*
 * Records a sample of t with state, syscall and flags from smp and the stack made of its native
 * frames (pcs and their frame ids, n, innermost first) merged with its Python frames of this tick
 * (pt, may be NULL). Keeps it for the next ticks when the thread is blocked.
 */
static void record_stack(struct prs_sampler *s, struct thr *t, uint64_t tick_ns, const uint64_t *pcs,
			 const uint32_t *ids, int n, const struct prs_py_thread *pt, struct prs_sample *smp)
{
	uint32_t stack = 0;

	if (pt) {
		/* Merged with the native stack; Python-only when the thread could not be stopped. */
		size_t m = prs_py_merge(s->py, pcs, ids, (size_t)n, pt,
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
	smp->time_ns = tick_ns - s->t0;
	smp->tid = t->tid;
	smp->stack = stack;
	smp->weight = 1;
	prs_profile_sample(s->prof, smp);
	s->st.thread_samples++;
	t->kept.valid = smp->state == PRS_STATE_BLOCKED || smp->state == PRS_STATE_DISK;
	t->kept.at_rest = false;
	t->kept.stack = stack;
	t->kept.state = smp->state;
	t->kept.syscall = smp->syscall;
	t->kept.flags = smp->flags;
}

/*
 * Keeps the native part of a blocked thread's stopped sample, for REUSE_NATIVE: only when the
 * unwind depended on nothing but RIP, RSP (RBP) and the snapshot bytes it read (FAST rows, no read
 * outside the snapshot), so that the same registers over the same bytes give the same frames.
 */
static void keep_native(struct prs_sampler *s, struct thr *t, int n, const struct prs_unwind_info *info)
{
	struct kept *k = &t->kept;

	k->native = false;
	if (!s->reuse_idle || !s->uw || t->state != PRS_STATE_BLOCKED || n <= 0 ||
	    info->method != PRS_UNWIND_FAST || info->remote_reads || info->snap_used > t->stack_len)
		return;
	if (!k->pcs)
		k->pcs = malloc(PRS_MAX_NATIVE_FRAMES * sizeof(*k->pcs));
	if (!k->ids)
		k->ids = malloc(PRS_MAX_NATIVE_FRAMES * sizeof(*k->ids));
	if (!k->pcs || !k->ids)
		return;
	memcpy(k->pcs, s->pcs, (size_t)n * sizeof(*k->pcs));
	memcpy(k->ids, s->frame_ids, (size_t)n * sizeof(*k->ids));
	k->n = n;
	k->used = info->snap_used;
	k->sp = t->regs.r[PRS_REG_RSP];
	k->pc = t->regs.r[PRS_REG_RIP];
	k->gen = prs_unwinder_generation(s->uw);
	k->nr = (int)t->regs.orig_rax;
	/* how the kernel restarts the call once we let it go (see prs_state_from_regs) */
	k->restart_nr = (int64_t)t->regs.r[PRS_REG_RAX] == -516 /* -ERESTART_RESTARTBLOCK */
				? SYS_RESTART_SYSCALL : k->nr;
	k->native = true;
}

static void record_thread_sample(struct prs_sampler *s, struct thr *t, uint64_t tick_ns)
{
	struct prs_sample smp;
	struct prs_unwind_info info;
	int n = 0;

	memset(&smp, 0, sizeof(smp));
	memset(&info, 0, sizeof(info));
	if (t->sampled && s->uw) {
		struct prs_snapshot snap = { .base = t->regs.r[PRS_REG_RSP], .len = t->stack_len,
					     .data = t->stack };
		uint64_t u0 = prs_now_ns(), u1;

		n = prs_unwind(s->uw, &t->regs, &snap, s->pcs, PRS_MAX_NATIVE_FRAMES, &info);
		u1 = prs_now_ns();
		if (n < 0) {
			s->st.unwind_errors++;
			n = 0;
		}
		if (info.flags & PRS_UNWIND_TRUNCATED)
			s->st.unwind_truncated++;
		dist_add(s, &s->d_unwind, u1 - u0);
		dist_add(s, &s->d_stop, t->t_cont - t->t_interrupt);
		dist_add(s, &s->d_cost, (t->t_cont - t->t_interrupt) + (u1 - u0) + t->check_ns +
					s->warm_share_ns);
		for (int i = 0; i < n; i++)
			s->frame_ids[i] = prs_profile_raw_frame(s->prof, mapping_id(s, s->pcs[i]), s->pcs[i],
								i == 0);
	}
	smp.state = (uint8_t)t->state;
	smp.syscall = (int16_t)t->syscall;
	record_stack(s, t, tick_ns, s->pcs, s->frame_ids, n, py_thread_of(s, t->tid), &smp);
	if (t->sampled)
		keep_native(s, t, n, &info);
	else
		t->kept.native = false;
	t->sampled = false;
}

/*
 * ---- Sleeping threads ----
 *
 * Most threads of a real program sleep most of the time, and stopping one costs it and us 35-160
 * us per tick on the dev VM (the interrupt and the continue each wake its idle vCPU), for a stack
 * that did not change. So a thread whose last sample found it blocked is not read again while
 * it provably has not moved:
 * - REUSE_ALL: its schedstat (CPU time, times given a CPU, run-queue wait) equals the one taken
 *   when it was last known at rest: it has not run since, so nothing of its state (registers,
 *   stack, Python frames, GIL) has changed, and its kept sample is recorded again. One pread;
 *   the Python reader does not walk its frames (prs_py_set_keep).
 *   The at-rest schedstat is always read before the reads that found it blocked (vm mode: before
 *   the memory read; ptrace mode: before the checks below), so a run in between shows.
 * - REUSE_NATIVE (ptrace mode): it ran since (our own stop makes it run: it leaves the stop and
 *   re-enters its syscall; or it woke and came back), but /proc/TID/syscall finds it asleep in
 *   the same syscall (or its restart) with the same RSP and RIP as when it was stopped, and the
 *   stack bytes the unwind read then are still the same: so the same unwind would give the same
 *   native frames (unwind.h, snap_used). They are merged with its Python frames read this tick.
 *   Its schedstat must not move from before these checks to after the Python read (it is then
 *   at rest there); if it did, it is recorded like a thread that did not stop in time.
 * Anything else is stopped and read as usual. PYRSPROF_READ_IDLE=1 in the environment turns this
 * off (every thread read at every tick: benchmarks, comparisons).
 */

static bool same_schedstat(const struct prs_schedstat *a, const struct prs_schedstat *b)
{
	return a->cpu_ns == b->cpu_ns && a->slices == b->slices && a->wait_ns == b->wait_ns;
}

/*
 * A sleeping thread's stack as /proc and its memory show it now, against its last stop: asleep
 * in the same syscall with the same RSP and RIP, the same stack bytes under what the unwind read,
 * and the unwinder's maps unchanged.
 */
static bool native_unchanged(struct prs_sampler *s, struct thr *t)
{
	const struct kept *k = &t->kept;
	struct prs_task_sys sys;

	if (!k->native || !s->uw || s->maps_dirty || prs_unwinder_generation(s->uw) != k->gen)
		return false;
	if (task_syscall(s, t, &sys) != 0 || sys.running || sys.sp != k->sp || sys.pc != k->pc ||
	    (sys.nr != k->nr && sys.nr != k->restart_nr))
		return false;
	if (!k->used)
		return true;
	if (!s->cmp && !(s->cmp = malloc(s->opts.stack_bytes)))
		return false;
	return prs_read_stack(s->pid, k->sp, s->cmp, k->used) == (ssize_t)k->used &&
	       memcmp(s->cmp, t->stack, k->used) == 0;
}

/*
 * Decides how t is sampled this tick (t->reuse), reading its schedstat (t->tick_ss; in ptrace
 * mode always: cpu_or_runqueue compares it with the one after the stop). A thread whose last
 * sample ran is read.
 */
static void rest_check(struct prs_sampler *s, struct thr *t, bool ptrace_mode)
{
	uint64_t c0 = prs_now_ns();

	t->reuse = REUSE_NONE;
	t->tick_ss_ok = false;
	t->check_ns = 0;
	if (ptrace_mode || (s->reuse_idle && t->kept.valid))
		t->tick_ss_ok = schedstat(s, t, &t->tick_ss) == 0;
	if (s->reuse_idle && t->tick_ss_ok && t->kept.valid) {
		if (t->kept.at_rest && same_schedstat(&t->tick_ss, &t->kept.rest))
			t->reuse = REUSE_ALL;
		else if (ptrace_mode && native_unchanged(s, t))
			t->reuse = REUSE_NATIVE;
	}
	t->check_ns = prs_now_ns() - c0;
}

/* Records t's kept sample again (REUSE_ALL), at the cost of cost_ns. */
static void record_kept(struct prs_sampler *s, struct thr *t, uint64_t tick_ns, uint64_t cost_ns)
{
	struct prs_sample smp;

	memset(&smp, 0, sizeof(smp));
	smp.time_ns = tick_ns - s->t0;
	smp.tid = t->tid;
	smp.state = t->kept.state;
	smp.syscall = t->kept.syscall;
	smp.stack = t->kept.stack;
	smp.flags = t->kept.flags;
	smp.weight = 1;
	prs_profile_sample(s->prof, &smp);
	s->st.thread_samples++;
	s->st.reused_samples++;
	dist_add(s, &s->d_cost, cost_ns);
	restart_balance(t, t->tick_ss.cpu_ns);
}

/*
 * REUSE_NATIVE, after the Python read: if the thread stayed at rest through the checks and the
 * read, records its kept native frames merged with this tick's Python frames. Returns false when
 * it ran meanwhile (the caller records it as a thread that did not stop).
 */
static bool record_native_kept(struct prs_sampler *s, struct thr *t, uint64_t tick_ns, uint64_t share_ns)
{
	struct prs_schedstat now;
	struct prs_sample smp;
	uint64_t c0 = prs_now_ns();

	if (schedstat(s, t, &now) != 0 || !same_schedstat(&now, &t->tick_ss)) {
		s->st.reuse_lost++;
		return false;
	}
	memset(&smp, 0, sizeof(smp));
	smp.state = t->kept.state;
	smp.syscall = t->kept.syscall;
	record_stack(s, t, tick_ns, t->kept.pcs, t->kept.ids, t->kept.n, py_thread_of(s, t->tid), &smp);
	t->kept.at_rest = true;
	t->kept.rest = now;
	s->st.reused_native++;
	dist_add(s, &s->d_cost, t->check_ns + (prs_now_ns() - c0) + share_ns);
	restart_balance(t, now.cpu_ns);
	return true;
}

/* A thread not stopped this tick, recorded from /proc (state letter, syscall) and its Python
 * frames alone. */
static void record_unstopped(struct prs_sampler *s, struct thr *t, uint64_t tick_ns)
{
	struct prs_task_sys sys;

	s->st.not_stopped++;
	t->state = letter_state(s, t);
	t->syscall = task_syscall(s, t, &sys) == 0 && !sys.running ? sys.nr : -1;
	t->sampled = false;
	record_thread_sample(s, t, tick_ns);
}

/* One tick: stop, snapshot and resume every thread (but those asleep since their last sample),
 * then unwind and record. */
static void tick(struct prs_sampler *s)
{
	uint64_t tick_ns = prs_now_ns(), warm_ns = 0, py_ns = 0;
	size_t pending = 0, nsampled = 0, nheld = 0, nnative = 0, nstop = 0;

	if (s->uw && s->maps_dirty && (s->last_maps_refresh == 0 ||
			      tick_ns - s->last_maps_refresh > MAPS_REFRESH_MIN_NS)) {
		prs_unwinder_refresh(s->uw, NULL);
		s->maps_dirty = false;
		s->last_maps_refresh = tick_ns;
	}
	for (size_t i = 0; i < s->nthr; i++) {
		struct thr *t = &s->thr[i];

		t->sampled = false;
		t->given_up = false;
		t->reuse = REUSE_NONE;
		t->check_ns = 0;
		if (t->stopped || t->group_stopped || t->initial_stop || t->interrupt_pending)
			continue;
		rest_check(s, t, true);
		nstop += t->reuse == REUSE_NONE;
		nnative += t->reuse == REUSE_NATIVE;
	}
	if (s->py && nstop && s->last_tick_ns && tick_ns - s->last_tick_ns >= PY_WARM_AFTER_NS) {
		/* After ms asleep, the first process_vm_readv and the page walks to the target's
		 * pages cost 10-20 us more than warm (2-vCPU VM, 100 Hz). Pay that before stopping
		 * anything: the threads stay stopped 30-40 us less per tick. The profiler's cost is
		 * about the same, and is counted in sample_cost. */
		uint64_t w0 = prs_now_ns();

		prs_py_warm(s->py);
		warm_ns = prs_now_ns() - w0;
	}
	s->last_tick_ns = tick_ns;
	for (size_t i = 0; i < s->nthr; i++) {
		struct thr *t = &s->thr[i];

		if (t->stopped || t->group_stopped || t->initial_stop || t->interrupt_pending ||
		    t->reuse != REUSE_NONE)
			continue;
		t->t_interrupt = prs_now_ns();
		if (prs_ptrace_interrupt(t->tid) == 0) {
			t->interrupt_pending = true;
			pending++;
		}
	}
	if (pending)
		wait_until(s, tick_ns + STOP_WAIT_MAX_NS, true);
	for (size_t i = 0; i < s->nthr; i++)
		nheld += s->thr[i].held;
	if (s->py && (nheld || nnative)) {
		/* Every thread that could be stopped is stopped, and the others sleep (checked after):
		 * read the Python frames, then let go. */
		uint64_t p0 = prs_now_ns();
		bool all_stopped = true;

		/* (a thread whose first stop has not come yet has not run any code) */
		for (size_t i = 0; i < s->nthr && all_stopped; i++)
			all_stopped = s->thr[i].held || s->thr[i].stopped || s->thr[i].group_stopped ||
				      s->thr[i].initial_stop || s->thr[i].reuse != REUSE_NONE;
		prs_py_set_stopped(s->py, all_stopped);

		if (prs_py_sample(s->py, s->prof, s->pyt, MAX_PY_THREADS, &s->npyt, NULL) != 0)
			s->npyt = 0;
		py_ns = prs_now_ns() - p0;
		dist_add(s, &s->d_python, py_ns);
	} else if (s->py) {
		s->npyt = 0; /* every thread sleeps where its kept sample shows it */
	}
	/* Let go of the threads kept stopped for the Python read (also if an exec event dropped
	 * the interpreter meanwhile). */
	for (size_t i = 0; i < s->nthr; i++) {
		struct thr *t = &s->thr[i];

		if (t->held) {
			t->held = false;
			resume(s, t, 0);
			t->t_cont = prs_now_ns();
		}
	}
	if (s->py && s->npyt)
		py_names(s);
	s->st.ticks++;
	for (size_t i = 0; i < s->nthr; i++)
		nsampled += s->thr[i].sampled;
	s->warm_share_ns = nsampled ? warm_ns / nsampled : 0;
	for (size_t i = 0; i < s->nthr; i++) {
		struct thr *t = &s->thr[i];

		if (t->sampled) {
			record_thread_sample(s, t, tick_ns);
		} else if (t->reuse == REUSE_ALL) {
			record_kept(s, t, tick_ns, t->check_ns);
		} else if (t->reuse == REUSE_NATIVE) {
			/* the Python read is in the stop of the held threads; else it is theirs */
			if (!record_native_kept(s, t, tick_ns, nheld ? 0 : py_ns / nnative))
				record_unstopped(s, t, tick_ns);
		} else if (t->interrupt_pending) {
			/* Did not stop in time: most likely in uninterruptible sleep. Ask /proc. */
			record_unstopped(s, t, tick_ns);
		} else if (t->group_stopped) {
			t->state = PRS_STATE_STOPPED;
			t->syscall = -1;
			record_thread_sample(s, t, tick_ns);
		}
	}
}

/*
 * One tick of the memory-only source: the Python frames of every thread, no stop. Threads asleep
 * since their last sample are recorded again (REUSE_ALL); when all are, nothing is read, but at
 * least every VM_FULL_READ_NS (a thread the sampler does not know, say a native one, may have
 * created a Python thread meanwhile).
 */
static void tick_vm(struct prs_sampler *s)
{
	uint64_t tick_ns = prs_now_ns(), p0, p1, share;
	bool all_rest = s->reuse_idle && s->npyt > 0 && tick_ns - s->last_py_read < VM_FULL_READ_NS;

	s->st.ticks++;
	if (!s->py)
		return;
	for (size_t i = 0; i < s->nthr; i++)
		s->thr[i].reuse = REUSE_NONE;
	for (int i = 0; i < s->npyt; i++) {
		struct thr *t = s->pyt[i].tid > 0 ? thr_find(s, s->pyt[i].tid) : NULL;

		if (!t) {
			all_rest = false;
			continue;
		}
		rest_check(s, t, false);
		all_rest = all_rest && t->reuse == REUSE_ALL;
	}
	if (all_rest) {
		for (int i = 0; i < s->npyt; i++) {
			struct thr *t = thr_find(s, s->pyt[i].tid);

			record_kept(s, t, tick_ns, t->check_ns);
		}
		return;
	}
	p0 = prs_now_ns();
	if (prs_py_sample(s->py, s->prof, s->pyt, MAX_PY_THREADS, &s->npyt, NULL) != 0) {
		s->npyt = 0;
		return;
	}
	p1 = prs_now_ns();
	s->last_py_read = p1;
	dist_add(s, &s->d_python, p1 - p0);
	share = s->npyt ? (p1 - p0) / (uint64_t)s->npyt : 0;
	for (int i = 0; i < s->npyt; i++) {
		const struct prs_py_thread *pt = &s->pyt[i];
		struct thr *t = pt->tid > 0 ? thr_find(s, pt->tid) : NULL;
		struct prs_sample smp;
		uint64_t s0;
		int sc;

		if (pt->tid > 0 && !t && (t = thr_add(s, pt->tid)) != NULL)
			thr_record_name(s, t);
		if (!t) { /* no thread id: recorded as it is, never kept */
			struct thr tmp;

			memset(&tmp, 0, sizeof(tmp));
			memset(&smp, 0, sizeof(smp));
			smp.state = PRS_STATE_RUNNING;
			smp.syscall = -1;
			tmp.tid = pt->tid;
			record_stack(s, &tmp, tick_ns, NULL, NULL, 0, pt, &smp);
			dist_add(s, &s->d_cost, share);
			continue;
		}
		if (t->reuse == REUSE_ALL) {
			record_kept(s, t, tick_ns, share + t->check_ns);
			continue;
		}
		/* A thread-sample costs its share of the one batched read of all threads, and the
		 * read of its state (and its schedstat before, if it slept at its last sample). */
		s0 = prs_now_ns();
		memset(&smp, 0, sizeof(smp));
		smp.state = (uint8_t)vm_state(s, t, &sc);
		smp.syscall = (int16_t)sc;
		dist_add(s, &s->d_cost, share + t->check_ns + (prs_now_ns() - s0));
		record_stack(s, t, tick_ns, NULL, NULL, 0, pt, &smp);
		/* at rest since before the memory read, if it sleeps now and its schedstat was read */
		t->kept.at_rest = t->kept.valid && t->tick_ss_ok;
		t->kept.rest = t->tick_ss;
	}
	py_names(s);
}

/* prs_py_set_keep: a thread recorded from its kept sample this tick is not walked. */
static bool keep_thread(void *arg, int32_t tid)
{
	struct thr *t = thr_find(arg, tid);

	return t && t->reuse == REUSE_ALL;
}

/* Looks for CPython in the target (at start-up it may not be there yet: retried). */
static void try_python(struct prs_sampler *s, uint64_t now, bool force)
{
	struct prs_err err = { 0 };
	int rc;

	if (s->py || s->opts.no_python || s->py_given_up)
		return;
	if (!force && now < s->py_next_try)
		return;
	rc = prs_py_open(s->pid, &s->opts.py, &s->py, &err);
	if (rc == 0) {
		if (!s->pyt)
			s->pyt = calloc(MAX_PY_THREADS, sizeof(*s->pyt));
		if (!s->merged)
			s->merged = calloc(PRS_MAX_STACK_FRAMES, sizeof(*s->merged));
		if (!s->pyt || !s->merged) {
			prs_py_free(s->py);
			s->py = NULL;
			s->py_given_up = true;
			return;
		}
		if (s->reuse_idle)
			prs_py_set_keep(s->py, keep_thread, s);
		snprintf(s->py_info, sizeof(s->py_info), "CPython %s in %s (layout: %s)",
			 prs_py_version(s->py), prs_py_binary(s->py), prs_py_layout_source(s->py));
		prs_profile_meta(s->prof, "python_version", prs_py_version(s->py));
		return;
	}
	if (rc == -ENOTSUP) {
		snprintf(s->py_info, sizeof(s->py_info), "%s", err.msg);
		s->py_given_up = true;
		return;
	}
	if (rc != -ENOENT && err.msg[0])
		snprintf(s->py_info, sizeof(s->py_info), "%s", err.msg);
	s->py_next_try = now + (now - s->t0 < PY_FAST_PERIOD_NS ? PY_RETRY_FAST_NS : PY_RETRY_SLOW_NS);
}

static void periodic(struct prs_sampler *s, uint64_t now)
{
	if (now - s->last_comm >= COMM_REFRESH_NS) {
		for (size_t i = 0; i < s->nthr; i++)
			thr_record_name(s, &s->thr[i]);
		s->last_comm = now;
	}
	if (now - s->last_flush >= 1000000000ull) {
		if (s->rec)
			prs_recorder_flush(s->rec, NULL);
		s->last_flush = now;
		if (s->opts.progress)
			s->opts.progress(s->opts.progress_arg, (double)(now - s->t0) / 1e9,
					 s->st.thread_samples, s->nthr);
	}
}

/*
 * Each tick is taken at a random point of its period (stratified sampling: the grid of deadlines
 * stays fixed, so the rate holds). A fixed grid, or a jitter smaller than the period, locks in
 * phase with a program that itself wakes on a fixed period (an absolute-deadline loop at 50 Hz
 * against our 200 Hz): measured, its 10 % busy part got 0 or 50 of 300 samples depending on the
 * phase. With the whole period covered, every instant has the same chance.
 */
static uint64_t jitter(struct prs_sampler *s, uint64_t period)
{
	s->rng ^= s->rng << 13;
	s->rng ^= s->rng >> 17;
	s->rng ^= s->rng << 5;
	return period > 1 ? s->rng % period : 0;
}

/* ---- set-up and tear-down ---- */

static int sampler_new(enum prs_sampler_mode mode, const struct prs_sampler_opts *opts,
		       struct prs_recorder *rec, struct prs_sampler **out, struct prs_err *err)
{
	struct prs_sampler *s = calloc(1, sizeof(*s));

	if (!s)
		return prs_err_set(err, -ENOMEM, "out of memory");
	s->mode = mode;
	s->opts = *opts;
	if (s->opts.stack_bytes == 0)
		s->opts.stack_bytes = 64 * 1024;
	s->rec = rec;
	s->prof = rec ? prs_recorder_profile(rec) : opts->profile;
	if (!s->prof) {
		free(s);
		return prs_err_set(err, -EINVAL, "sampler: no profile to record into");
	}
	s->thr = calloc(MAX_THREADS, sizeof(*s->thr));
	s->pcs = calloc(PRS_MAX_NATIVE_FRAMES, sizeof(*s->pcs));
	s->frame_ids = calloc(PRS_MAX_NATIVE_FRAMES, sizeof(*s->frame_ids));
	s->d_cost.v = calloc(DIST_CAP, sizeof(uint32_t));
	s->d_stop.v = calloc(DIST_CAP, sizeof(uint32_t));
	s->d_unwind.v = calloc(DIST_CAP, sizeof(uint32_t));
	s->d_python.v = calloc(DIST_CAP, sizeof(uint32_t));
	s->d_names.v = calloc(DIST_CAP, sizeof(uint32_t));
	s->rng = (unsigned)prs_now_ns() | 1u;
	s->reuse_idle = !getenv("PYRSPROF_READ_IDLE");
	s->exit_status = -1;
	if (!s->thr || !s->pcs || !s->frame_ids || !s->d_cost.v || !s->d_stop.v || !s->d_unwind.v ||
	    !s->d_python.v || !s->d_names.v) {
		prs_sampler_free(s);
		return prs_err_set(err, -ENOMEM, "out of memory");
	}
	*out = s;
	return 0;
}

int prs_sampler_launch(char *const argv[], const struct prs_sampler_opts *opts,
		       struct prs_recorder *rec, struct prs_sampler **out, struct prs_err *err)
{
	struct prs_sampler *s;
	int gate[2] = { -1, -1 }, status_pipe[2] = { -1, -1 };
	sigset_t none;
	pid_t pid;
	int rc, child_errno = 0;
	ssize_t n;

	rc = sampler_new(PRS_SAMPLE_LAUNCH, opts, rec, &s, err);
	if (rc)
		return rc;
	if (pipe2(gate, O_CLOEXEC) != 0 || pipe2(status_pipe, O_CLOEXEC) != 0) {
		rc = prs_err_set(err, -errno, "pipe: %s", strerror(errno));
		goto fail;
	}
	pid = fork();
	if (pid < 0) {
		rc = prs_err_set(err, -errno, "fork: %s", strerror(errno));
		goto fail;
	}
	if (pid == 0) {
		char c;
		int e;

		/* The child: wait until the parent has seized us, then exec with the signal mask the
		 * user's shell gave pyrsprof (the parent blocks signals it waits for). */
		close(gate[1]);
		close(status_pipe[0]);
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		while (read(gate[0], &c, 1) < 0 && errno == EINTR)
			;
		execvp(argv[0], argv);
		e = errno;
		if (write(status_pipe[1], &e, sizeof(e)) < 0)
			_exit(127);
		_exit(127);
	}
	close(gate[0]);
	gate[0] = -1;
	close(status_pipe[1]);
	status_pipe[1] = -1;
	s->pid = pid;
	if (opts->source != PRS_SOURCE_VM) {
		rc = prs_ptrace_seize(pid, err);
		if (rc) {
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
			goto fail;
		}
		s->attached = true;
	}
	if (!thr_add(s, pid)) {
		rc = prs_err_set(err, -ENOMEM, "out of memory");
		goto fail;
	}
	/* Release the child. */
	if (write(gate[1], "x", 1) != 1) {
		rc = prs_err_set(err, -errno, "start child: %s", strerror(errno));
		goto fail;
	}
	close(gate[1]);
	gate[1] = -1;
	/* The status pipe closes at a successful exec (O_CLOEXEC) or carries exec's errno. */
	while ((n = read(status_pipe[0], &child_errno, sizeof(child_errno))) < 0 && errno == EINTR)
		;
	close(status_pipe[0]);
	status_pipe[0] = -1;
	if (n == (ssize_t)sizeof(child_errno)) {
		s->exec_failed = true;
		/* Let the child exit (it is traced: reap its events until it is gone). */
		while (!s->exited) {
			int st;
			pid_t t = waitpid(-1, &st, __WALL);

			if (t < 0)
				break;
			handle_event(s, t, st, false);
		}
		rc = prs_err_set(err, -child_errno, "cannot run '%s': %s", argv[0], strerror(child_errno));
		prs_sampler_free(s);
		return rc;
	}
	*out = s;
	return 0;
fail:
	for (int i = 0; i < 2; i++) {
		if (gate[i] >= 0)
			close(gate[i]);
		if (status_pipe[i] >= 0)
			close(status_pipe[i]);
	}
	prs_sampler_free(s);
	return rc;
}

int prs_sampler_attach(pid_t pid, const struct prs_sampler_opts *opts, struct prs_recorder *rec,
		       struct prs_sampler **out, struct prs_err *err)
{
	struct prs_sampler *s;
	pid_t *tids = NULL;
	int rc, n;
	bool added;

	if (pid <= 0 || !prs_proc_exists(pid))
		return prs_err_set(err, -ESRCH, "no process with pid %d", (int)pid);
	rc = sampler_new(PRS_SAMPLE_ATTACH, opts, rec, &s, err);
	if (rc)
		return rc;
	s->pid = pid;
	if (opts->source == PRS_SOURCE_VM) {
		/* Memory reads only: nothing to seize, but the target must be Python. */
		rc = prs_py_open(pid, &s->opts.py, &s->py, err);
		if (rc == -EPERM || rc == -EACCES) {
			char why[512];

			rc = prs_err_set(err, -EPERM, "%s", prs_explain_eperm(pid, why, sizeof(why)));
		}
		if (rc)
			goto fail;
		prs_py_free(s->py);
		s->py = NULL;
		*out = s;
		return 0;
	}
	tids = malloc(MAX_THREADS * sizeof(*tids));
	if (!tids) {
		rc = prs_err_set(err, -ENOMEM, "out of memory");
		goto fail;
	}
	/* Seize every thread; threads created by a not-yet-seized thread meanwhile show up in the
	 * next listing, so list again until nothing new appears. */
	do {
		added = false;
		n = prs_task_list(pid, tids, MAX_THREADS);
		if (n < 0) {
			rc = prs_err_set(err, -ESRCH, "no process with pid %d", (int)pid);
			goto fail;
		}
		for (int i = 0; i < n && i < MAX_THREADS; i++) {
			struct thr *t;

			if (thr_find(s, tids[i]))
				continue;
			rc = prs_ptrace_seize(tids[i], err);
			if (rc == -ESRCH)
				continue; /* exited meanwhile */
			if (rc == -EPERM) {
				char why[512];

				prs_err_set(err, -EPERM, "%s", prs_explain_eperm(pid, why, sizeof(why)));
				goto fail;
			}
			if (rc)
				goto fail;
			s->attached = true;
			t = thr_add(s, tids[i]);
			if (!t) {
				rc = prs_err_set(err, -ENOMEM, "too many threads in pid %d", (int)pid);
				goto fail;
			}
			added = true;
		}
	} while (added);
	if (s->nthr == 0) {
		rc = prs_err_set(err, -ESRCH, "no process with pid %d", (int)pid);
		goto fail;
	}
	rc = prs_unwinder_new(pid, &s->uw, err);
	if (rc)
		goto fail;
	free(tids);
	*out = s;
	return 0;
fail:
	free(tids);
	prs_sampler_free(s);
	return rc;
}

/* Stops every thread and detaches, re-injecting any signal caught on the way. */
static void detach_all(struct prs_sampler *s)
{
	uint64_t deadline = prs_now_ns() + DETACH_WAIT_NS;
	sigset_t set;

	if (!s->attached)
		return;
	prs_sampler_sigset(&set);
	for (size_t i = 0; i < s->nthr; i++) {
		struct thr *t = &s->thr[i];

		if (!t->stopped && !t->interrupt_pending && prs_ptrace_interrupt(t->tid) == 0)
			t->interrupt_pending = true;
	}
	while (s->nthr > 0 && !s->exited) {
		int status;
		pid_t tid;

		/* Detach whatever is stopped now. */
		for (size_t i = 0; i < s->nthr;) {
			struct thr *t = &s->thr[i];

			if (t->stopped || t->group_stopped) {
				/* A group-stopped thread stays job-control stopped after DETACH, as it should. */
				prs_ptrace_detach(t->tid, 0);
				thr_remove(s, t);
			} else {
				i++;
			}
		}
		if (s->nthr == 0 || prs_now_ns() >= deadline)
			break;
		tid = waitpid(-1, &status, __WALL | WNOHANG);
		if (tid > 0) {
			struct prs_event ev;
			struct thr *t = thr_find(s, tid);

			prs_ptrace_decode(tid, status, &ev);
			if (!t) {
				if (ev.kind != PRS_EV_EXITED && ev.kind != PRS_EV_KILLED)
					prs_ptrace_detach(tid, ev.kind == PRS_EV_SIGNAL ? ev.sig : 0);
				if (tid == s->pid && (ev.kind == PRS_EV_EXITED || ev.kind == PRS_EV_KILLED)) {
					s->exited = true;
					s->exit_status = status;
				}
				continue;
			}
			switch (ev.kind) {
			case PRS_EV_EXITED:
			case PRS_EV_KILLED:
				if (tid == s->pid) {
					s->exited = true;
					s->exit_status = status;
				}
				thr_remove(s, t);
				break;
			case PRS_EV_SIGNAL:
				prs_ptrace_detach(tid, ev.sig);
				thr_remove(s, t);
				break;
			case PRS_EV_CLONE:
				if (ev.new_tid > 0 && !thr_find(s, ev.new_tid)) {
					struct thr *n = thr_add(s, ev.new_tid);

					if (n)
						n->interrupt_pending = true;
				}
				t = thr_find(s, tid);
				if (t) {
					prs_ptrace_detach(tid, 0);
					thr_remove(s, t);
				}
				break;
			default:
				prs_ptrace_detach(tid, 0);
				thr_remove(s, t);
				break;
			}
			continue;
		}
		struct timespec ts = { 0, 2000000 };
		siginfo_t si;
		int sig = sigtimedwait(&set, &si, &ts);

		if (sig > 0 && sig != SIGCHLD && s->mode == PRS_SAMPLE_LAUNCH)
			handle_user_signal(s, &si);
	}
	s->attached = false;
}

int prs_sampler_run(struct prs_sampler *s, struct prs_err *err)
{
	uint64_t period = (uint64_t)(1e9 / s->opts.rate_hz);
	uint64_t next, end = 0;

	if (period == 0)
		period = 1;
	s->t0 = prs_now_ns();
	s->last_flush = s->last_comm = s->t0;
	if (s->opts.duration_s > 0)
		end = s->t0 + (uint64_t)(s->opts.duration_s * 1e9);
	for (size_t i = 0; i < s->nthr; i++)
		thr_record_name(s, &s->thr[i]);
	next = s->t0;
	while (!s->exited && !s->stop_requested) {
		uint64_t now = prs_now_ns();

		if (end && now >= end)
			break;
		if (s->opts.max_ticks && s->st.ticks >= (uint64_t)s->opts.max_ticks)
			break;
		if (s->mode == PRS_SAMPLE_LAUNCH && s->attached && !s->exec_seen) {
			/* Until the exec event the child is still a copy of pyrsprof: nothing to sample. */
			wait_until(s, now + 1000000ull, false);
			continue;
		}
		try_python(s, now, s->maps_dirty);
		if (s->opts.source == PRS_SOURCE_VM) {
			tick_vm(s);
		} else if (!s->uw && s->nthr > 0) {
			/* Launch: the unwinder reads the maps of the exec'ed program, so create it once the
			 * child runs its own image (the first tick after exec). */
			/* (It fails when the program is exiting, or its maps cannot be read yet: the
			 * threads are still sampled, their stacks left empty, and it is tried again.) */
			if (prs_unwinder_new(s->pid, &s->uw, NULL) == 0)
				s->last_maps_refresh = now;
			tick(s);
		} else {
			tick(s);
		}
		periodic(s, prs_now_ns());
		/* Absolute deadlines: a late tick does not shift later ones; ticks missed entirely are
		 * skipped and counted. */
		next += period;
		now = prs_now_ns();
		if (now > next + period) {
			uint64_t behind = (now - next) / period;

			s->st.missed_ticks += behind;
			next += behind * period;
		}
		if (end && next > end)
			next = end;
		wait_until(s, next + jitter(s, period), false);
	}
	s->st.duration_s = (double)(prs_now_ns() - s->t0) / 1e9;
	for (size_t i = 0; i < s->nthr; i++)
		thr_record_name(s, &s->thr[i]);
	detach_all(s);
	(void)err;
	return 0;
}

int prs_sampler_wait_child(struct prs_sampler *s)
{
	int status = s->exit_status;

	if (s->mode == PRS_SAMPLE_LAUNCH && !s->exited) {
		sigset_t set;

		prs_sampler_sigset(&set);
		for (;;) {
			pid_t r = waitpid(s->pid, &status, WNOHANG);
			struct timespec ts = { 0, 100000000 };
			siginfo_t si;
			int sig;

			if (r == s->pid) {
				s->exited = true;
				s->exit_status = status;
				break;
			}
			if (r < 0)
				return -1;
			sig = sigtimedwait(&set, &si, &ts);
			if (sig > 0 && sig != SIGCHLD)
				handle_user_signal(s, &si);
		}
	} else if (s->mode == PRS_SAMPLE_LAUNCH && s->exit_status >= 0) {
		/* The leader's exit was reported to us as its tracer; reap the zombie too. */
		waitpid(s->pid, NULL, WNOHANG);
	}
	if (s->mode == PRS_SAMPLE_ATTACH)
		return 0;
	if (status < 0)
		return -1;
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return -1;
}

bool prs_sampler_python(const struct prs_sampler *s, char *buf, size_t size)
{
	snprintf(buf, size, "%s", s->py_info);
	return s->py != NULL;
}

const struct prs_py_thread *prs_sampler_python_threads(const struct prs_sampler *s, int *n)
{
	*n = s->py ? s->npyt : 0;
	return s->pyt;
}

pid_t prs_sampler_pid(const struct prs_sampler *s)
{
	return s->pid;
}

bool prs_sampler_target_exited(const struct prs_sampler *s)
{
	return s->exited;
}

void prs_sampler_get_stats(const struct prs_sampler *s, struct prs_sampler_stats *stats)
{
	*stats = s->st;
	if (s->py) {
		struct prs_py_stats ps;

		prs_py_get_stats(s->py, &ps);
		stats->py_read_errors = ps.read_errors;
		stats->py_bad_frames = ps.bad_frames;
		stats->py_truncated = ps.truncated;
		stats->py_merge_mismatch = ps.merge_mismatch;
		stats->py_code_stale = ps.code_stale;
	}
	dist_summary(&s->d_cost, &stats->sample_cost);
	dist_summary(&s->d_stop, &stats->stop);
	dist_summary(&s->d_unwind, &stats->unwind);
	dist_summary(&s->d_python, &stats->python);
	dist_summary(&s->d_names, &stats->py_names);
}

void prs_sampler_free(struct prs_sampler *s)
{
	if (!s)
		return;
	if (s->attached)
		detach_all(s);
	while (s->thr && s->nthr > 0)
		thr_remove(s, &s->thr[0]);
	prs_unwinder_free(s->uw);
	prs_py_free(s->py);
	free(s->pyt);
	free(s->merged);
	free(s->thr);
	free(s->map_ids);
	free(s->pcs);
	free(s->frame_ids);
	free(s->cmp);
	free(s->d_cost.v);
	free(s->d_stop.v);
	free(s->d_unwind.v);
	free(s->d_python.v);
	free(s->d_names.v);
	free(s);
}
