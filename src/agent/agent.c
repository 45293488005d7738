/* SPDX-License-Identifier: MIT */
/*
 * libpyrsprof-agent.so: pyrsprof's sampler inside the program (--mode preload), loaded by
 * LD_PRELOAD. It maps the shared ring pyrsprof created (ring.h), gives every thread a timer on
 * its own CPU clock (timer_create(CLOCK_THREAD_CPUTIME_ID, SIGEV_THREAD_ID)) that sends a
 * real-time signal at the sampling period of CPU time, and in that signal's handler copies the
 * registers, the top of the stack and the thread's raw Python frames into a ring slot. The
 * native unwinding and every naming happen in pyrsprof.
 *
 * Threads are armed as they start: pthread_create is interposed so that the new thread arms
 * itself before its start routine; threads already running when the agent loads are signalled
 * once (rt_tgsigqueueinfo with a value of ours) and arm themselves in the handler. A
 * process-wide ITIMER_PROF is never used: it charges a signal to whichever thread runs when it
 * fires, skewing the split between threads. The program's own uses of the agent's signal go to
 * its own action (chain.c).
 *
 * The handler is async-signal-safe: raw syscalls, no allocation, no locks, no stdio, no loader
 * calls; memory it cannot trust is read with loads whose faults it recovers from (safecopy.h:
 * the agent holds SIGSEGV and SIGBUS for that), or with process_vm_readv on itself when those
 * signals are not its own or are blocked: a bad address is an error, never a crash.
 *
 * A forked child never writes to its parent's ring (unmapped in the child: the parent's threads
 * may be mid-write in it). Without --subprocesses it runs unprofiled and unharmed (no ring, no
 * clock: timers are not inherited). With it (follow.h), the child makes a ring of its own in the
 * fork's child handler, announces it to pyrsprof and arms its thread's clock again; an exec'ed
 * process that is not the launched one does the same at its start.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "agent/chain.h"
#include "agent/fdguard.h"
#include "agent/follow-agent.h"
#include "agent/ring.h"
#include "agent/safecopy.h"
#include "agent/selfreader.h"
#include "agent/sigmask.h"
#include "pyrsprof/memreader.h"
#include "python/walk.h"
#include "util/banned.h"

#define EXPORT __attribute__((visibility("default")))
#define TLS __thread __attribute__((tls_model("initial-exec")))

/* Per thread: its timer or perf event, the bounds of its stack (0: unknown), and the ring slot
 * it wrote last (prs_ring_claim_home). */
struct agent_thread {
	int armed;
	int timer;    /* kernel timer id, -1 with a perf event */
	int perf_fd;  /* the task-clock event, -1 with a timer */
	uint64_t perf_id; /* its id: the descriptor is closed at exit only if it is still ours */
	uint64_t stack_lo, stack_hi;
	uint32_t slot;    /* 0: none yet, else its index + 1 */
	pid_t tid;        /* its id, learnt when its clock is armed (a gettid syscall per sample
			   * was 0.3-0.7 us here, as much as the rest of the handler) */
	uint64_t rng;     /* the state of its periods' random draws (draw) */
	uint32_t drawn;   /* samples since its period was last drawn (jitter_clock) */
	uint32_t periods; /* periods of its clock since its last sample kept */
};

static TLS struct agent_thread me;

static struct prs_ring_hdr *ring;   /* NULL: inactive (not launched by pyrsprof, or a fork) */
static size_t ring_bytes;           /* its mapping's size */
static bool own_ring;               /* made by this process (follow.h), not pyrsprof's */
static bool following;              /* --subprocesses: follow holds the configuration */
static struct prs_follow_cfg follow;
static struct prs_py_layout py_layout; /* walker's layout: a copy, whichever ring is mapped */
static pid_t self_pid;
static int signo;
static struct prs_pywalk walker;    /* a copy of the header's, pointing at the header's layout */
static int py_ready;                /* walker is set up */
static uint32_t my_gen;             /* this image's generation in the ring */
static pthread_key_t exit_key;
static int (*real_pthread_create)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
static int (*real_execve)(const char *, char *const[], char *const[]);
static int (*real_execv)(const char *, char *const[]);
static int (*real_execvp)(const char *, char *const[]);
static int (*real_execvpe)(const char *, char *const[], char *const[]);
static void (*real__exit)(int);
static void (*real__Exit)(int);

/* ---- small async-signal-safe helpers ---- */

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static pid_t my_tid(void)
{
	return (pid_t)syscall(SYS_gettid);
}

/* Says why the agent gave up, once, in the header (pyrsprof prints it). */
static void agent_fail(int err, const char *what)
{
	size_t n = strlen(what);

	if (n >= sizeof(ring->agent_msg))
		n = sizeof(ring->agent_msg) - 1;
	memcpy(ring->agent_msg, what, n);
	ring->agent_msg[n] = '\0';
	ring->agent_errno = err;
	__atomic_store_n(&ring->agent_state, PRS_AGENT_FAILED, __ATOMIC_RELEASE);
}

/* ---- timers ---- */

/*
 * Drawn periods. A fixed period of CPU time is phase-locked to the program: a loop in step with
 * it is sampled at the same point of its cycle for a whole run (tests/targets/phased at 250 Hz:
 * hot_a read 0 or ~0.9 for a 0.25 truth), and one whose cycle is a simple fraction of it at the
 * same few points (split.py's ~3 ms against 5 ms: `top -r 200 --mode preload`, 12 runs, mean
 * error -0.034, sd 0.037, worst 0.124, against a binomial sd of 0.025). So the period is drawn at
 * random. A draw costs a syscall, 5-7 us in the handler on this VM (its kernel path is cold after
 * a period of the program's work; 1.4-1.7 us warm): one per sample is ~0.1 % of the program's
 * CPU at 200 Hz but 0.6 % at 1000 Hz. So a thread draws once every draw_every() samples, about
 * every DRAW_NS of its CPU time (every sample up to 125 Hz, every 8th at 1000 Hz): at most
 * ~0.08 % of its CPU.
 *
 * A perf clock holds each draw as its period until the next, within P +- P / (2 * every): the
 * rate stays even (a pool worker with a few 10 ms slices of two functions reads its split from
 * how many samples each slice gets, and periods drawn from [P/2, 3P/2) held for 8 samples made
 * that density vary threefold: splits 5-7 points off), and over a draw's samples the phase
 * walks by up to half a period either way, a fresh place in the program's cycle after a few
 * draws. Between draws the samples are as regular as a fixed period's: where the program's
 * cycle is commensurate with it they are correlated, so the error is that of about one sample
 * per draw (1000 Hz is as exact as 125 Hz on such a program, not worse). A POSIX timer takes one
 * expiry drawn from [P/2, 3P/2) per draw and keeps its interval at P: its samples are weighted
 * 1 + overruns (they expire at the scheduler tick at best), which must count periods of the mean.
 */
#define DRAW_NS 8000000ull

static uint32_t draw_every(void)
{
	uint64_t p = ring->period_ns;

	return p >= DRAW_NS ? 1 : (uint32_t)((DRAW_NS + p / 2) / p);
}

/* A uniform draw in [0, span) from the thread's xorshift64* (async-signal-safe, no syscall). */
static uint64_t draw(uint64_t span)
{
	uint64_t x = me.rng ? me.rng : 0x9e3779b97f4a7c15ull;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	me.rng = x;
	x *= 0x2545f4914f6cdd1dull;
	return span > 1 ? (x >> 11) % span : 0;
}

/* A perf clock's period until its next draw. */
static uint64_t perf_period(void)
{
	uint64_t p = ring->period_ns, spread = p / draw_every();

	return p - spread / 2 + draw(spread);
}

/* A POSIX timer's next expiry (its interval stays the period). */
static uint64_t posix_expiry(void)
{
	uint64_t p = ring->period_ns;

	return p / 2 + draw(p);
}

/* Seeds the thread's draws: its id and the time, so that threads and runs differ. */
static void seed_periods(void)
{
	me.rng = ((uint64_t)(uint32_t)me.tid * 0x9e3779b97f4a7c15ull) ^ now_ns() ^ 1;
}

static void ns_to_ts(uint64_t ns, struct timespec *ts)
{
	ts->tv_sec = (time_t)(ns / 1000000000ull);
	ts->tv_nsec = (long)(ns % 1000000000ull);
}

/* In the handler, before the sample: every draw_every() samples, the clock's next draw. */
static void jitter_clock(void)
{
	uint64_t next;
	struct itimerspec its;

	if (++me.drawn < draw_every())
		return;
	me.drawn = 0;
	if (me.perf_fd >= 0) {
		next = perf_period();
		ioctl(me.perf_fd, PERF_EVENT_IOC_PERIOD, &next);
		return;
	}
	if (me.timer < 0)
		return;
	ns_to_ts(ring->period_ns, &its.it_interval);
	ns_to_ts(posix_expiry(), &its.it_value);
	syscall(SYS_timer_settime, me.timer, 0, &its, NULL);
}

/* A task-clock event of the calling thread that signals it every period of its CPU time; -1
 * when perf events are not allowed. Async-signal-safe (syscalls). */
static int arm_perf(void)
{
	struct perf_event_attr pe;
	struct f_owner_ex owner = { F_OWNER_TID, my_tid() };
	int fd;

	memset(&pe, 0, sizeof(pe));
	pe.type = PERF_TYPE_SOFTWARE;
	pe.size = sizeof(pe);
	pe.config = PERF_COUNT_SW_TASK_CLOCK;
	pe.sample_period = perf_period();
	pe.wakeup_events = 1;
	fd = (int)syscall(SYS_perf_event_open, &pe, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
	if (fd < 0)
		return -1;
	if (fcntl(fd, F_SETOWN_EX, &owner) != 0 || fcntl(fd, F_SETSIG, signo) != 0 ||
	    fcntl(fd, F_SETFL, O_ASYNC | O_NONBLOCK) != 0 ||
	    ioctl(fd, PERF_EVENT_IOC_ID, &me.perf_id) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Gives the calling thread its CPU-time clock: a perf task-clock event (unless posix_only), or a
 * POSIX CPU timer. Async-signal-safe (raw syscalls). */
static void arm_clock(bool posix_only)
{
	struct sigevent sev;
	struct itimerspec its;
	int id;

	if (!ring || me.armed)
		return;
	me.tid = my_tid();
	me.perf_fd = -1;
	me.timer = -1;
	seed_periods();
	if (!posix_only && ring->clock == PRS_CLOCK_AUTO && (me.perf_fd = arm_perf()) >= 0) {
		me.armed = 1;
		prs_fdguard_set(me.perf_fd, my_tid());
		__atomic_fetch_add(&ring->perf_clocks, 1, __ATOMIC_RELAXED);
		return;
	}
	memset(&sev, 0, sizeof(sev));
	sev.sigev_notify = SIGEV_THREAD_ID;
	sev.sigev_signo = signo;
	sev.sigev_value.sival_int = PRS_RING_COOKIE;
	sev._sigev_un._tid = my_tid();
	if (syscall(SYS_timer_create, CLOCK_THREAD_CPUTIME_ID, &sev, &id) != 0) {
		__atomic_fetch_add(&ring->timer_errors, 1, __ATOMIC_RELAXED);
		return;
	}
	ns_to_ts(ring->period_ns, &its.it_interval);
	ns_to_ts(posix_expiry(), &its.it_value); /* a random first phase */
	if (syscall(SYS_timer_settime, id, 0, &its, NULL) != 0) {
		syscall(SYS_timer_delete, id);
		__atomic_fetch_add(&ring->timer_errors, 1, __ATOMIC_RELAXED);
		return;
	}
	me.timer = id;
	me.armed = 1;
	__atomic_fetch_add(&ring->timers, 1, __ATOMIC_RELAXED);
}

static void arm_self(void)
{
	arm_clock(false);
}

/* In the handler: the program closed this thread's clock descriptor (fdguard.h); a POSIX timer
 * from now on, which no close takes away. */
static void rearm_self(void)
{
	if (!me.armed || me.perf_fd < 0)
		return;
	me.armed = 0;
	me.perf_fd = -1;
	arm_clock(true);
}

/* A thread's exit (pthread key destructor): its timer goes with it (timers are process
 * resources: kept, they would pile up under thread churn against RLIMIT_SIGPENDING). */
static void disarm_self(void *unused)
{
	uint64_t id = 0;

	(void)unused;
	if (!me.armed)
		return;
	me.armed = 0;
	if (me.timer >= 0)
		syscall(SYS_timer_delete, me.timer);
	/* the program may have closed our descriptor and reused its number: ours only */
	if (me.perf_fd >= 0 && ioctl(me.perf_fd, PERF_EVENT_IOC_ID, &id) == 0 && id == me.perf_id) {
		prs_fdguard_set(me.perf_fd, 0);
		close(me.perf_fd);
	}
}

/* The initial stack pointer of the process (ld.so's: the address of argc). */
extern void *__libc_stack_end;

/*
 * The calling thread's stack bounds, from its attributes (not in a handler: may allocate), its
 * top lowered to where frames can be: a sample copies from SP to it, and what lies above is
 * never a frame. The main thread's stack ends at the initial stack pointer (_start's frame is
 * below it; above are argc, argv, the environment and the auxiliary vector: 1.5-3 KB here, more
 * with a large environment). A thread glibc started has its descriptor (struct pthread, what
 * pthread_self() points at, 2.3 KB) at the top of its stack block, its static TLS below it and
 * its first frame below that.
 */
static void learn_stack(void)
{
	pthread_attr_t a;
	void *lo;
	size_t size;
	uint64_t top, self = (uint64_t)pthread_self();

	if (pthread_getattr_np(pthread_self(), &a) != 0)
		return;
	if (pthread_attr_getstack(&a, &lo, &size) == 0) {
		me.stack_lo = (uint64_t)(uintptr_t)lo;
		me.stack_hi = me.stack_lo + size;
		top = my_tid() == getpid() ? (uint64_t)(uintptr_t)__libc_stack_end + 64 : self;
		if (top > me.stack_lo && top < me.stack_hi)
			me.stack_hi = top;
	}
	pthread_attr_destroy(&a);
}

/* ---- the sample ---- */

/* Reads len bytes at addr of this process without faulting (process_vm_readv on itself).
 * Returns the bytes read: a fault ends the copy there. */
static size_t safe_copy(void *dst, uint64_t addr, size_t len)
{
	struct iovec l = { dst, len }, r = { (void *)(uintptr_t)addr, len };
	ssize_t n = process_vm_readv(self_pid, &l, 1, &r, 1, 0);

	return n > 0 ? (size_t)n : 0;
}

static void copy_regs(struct prs_ring_slot *sl, const ucontext_t *uc)
{
	const greg_t *g = uc->uc_mcontext.gregs;

	sl->regs[PRS_REG_RAX] = (uint64_t)g[REG_RAX];
	sl->regs[PRS_REG_RDX] = (uint64_t)g[REG_RDX];
	sl->regs[PRS_REG_RCX] = (uint64_t)g[REG_RCX];
	sl->regs[PRS_REG_RBX] = (uint64_t)g[REG_RBX];
	sl->regs[PRS_REG_RSI] = (uint64_t)g[REG_RSI];
	sl->regs[PRS_REG_RDI] = (uint64_t)g[REG_RDI];
	sl->regs[PRS_REG_RBP] = (uint64_t)g[REG_RBP];
	sl->regs[PRS_REG_RSP] = (uint64_t)g[REG_RSP];
	sl->regs[PRS_REG_R8] = (uint64_t)g[REG_R8];
	sl->regs[PRS_REG_R9] = (uint64_t)g[REG_R9];
	sl->regs[PRS_REG_R10] = (uint64_t)g[REG_R10];
	sl->regs[PRS_REG_R11] = (uint64_t)g[REG_R11];
	sl->regs[PRS_REG_R12] = (uint64_t)g[REG_R12];
	sl->regs[PRS_REG_R13] = (uint64_t)g[REG_R13];
	sl->regs[PRS_REG_R14] = (uint64_t)g[REG_R14];
	sl->regs[PRS_REG_R15] = (uint64_t)g[REG_R15];
	sl->regs[PRS_REG_RIP] = (uint64_t)g[REG_RIP];
	sl->fs_base = (uint64_t)pthread_self();
}

/* The top of the interrupted stack: memcpy within the thread's known stack, else a copy that
 * stops at the first unmapped byte (a thread the agent did not start, a coroutine's stack). */
static void copy_stack(struct prs_ring_slot *sl)
{
	uint64_t sp = sl->regs[PRS_REG_RSP];
	size_t cap = ring->stack_cap;

	if (me.stack_hi && sp >= me.stack_lo && sp < me.stack_hi) {
		size_t n = me.stack_hi - sp < cap ? (size_t)(me.stack_hi - sp) : cap;

		memcpy(sl->stack, (const void *)(uintptr_t)sp, n);
		sl->stack_len = (uint32_t)n;
		sl->flags |= PRS_SLOTF_BOUNDED;
		return;
	}
	sl->stack_len = (uint32_t)safe_copy(sl->stack, sp, cap);
}

/*
 * Whether the walk may read with plain loads (safecopy.h): the agent's fault handler is the
 * installed action of SIGSEGV and SIGBUS, and the interrupted thread blocks neither (the handler
 * runs with the interrupted mask plus the sampling signal: a blocked fault would kill).
 */
static bool direct_ok(const ucontext_t *uc)
{
	return prs_chain_faults_held() && !sigismember(&uc->uc_sigmask, SIGSEGV) &&
	       !sigismember(&uc->uc_sigmask, SIGBUS);
}

/* The calling thread's raw Python frames, found among the interpreter's thread states by its
 * pthread_t: read with plain loads that cannot fault when direct_ok, else through
 * process_vm_readv on itself (a page cache in the slot's scratch). */
_Static_assert(sizeof(struct prs_selfreader) <= PRS_RING_SCRATCH, "a slot's scratch holds the reader");

static void copy_python(struct prs_ring_slot *sl, const ucontext_t *uc)
{
	struct prs_selfreader *sr = (struct prs_selfreader *)sl->scratch;
	struct prs_memreader mr;
	struct prs_pywalk_iter it;
	uint64_t self = (uint64_t)pthread_self();

	if (!py_ready)
		return;
	if (direct_ok(uc))
		prs_safecopy_reader(&mr);
	else
		prs_selfreader_init(sr, self_pid, &mr);
	if (prs_pywalk_begin(&walker, &mr, &it) != 0) {
		__atomic_fetch_add(&ring->py_errors, 1, __ATOMIC_RELAXED);
		return;
	}
	while (prs_pywalk_next(&walker, &mr, &it, &sl->py) > 0) {
		if (sl->py.thread_id != self)
			continue;
		prs_pywalk_thread(&walker, &mr, &it, &sl->py);
		/* who its code objects are now: pyrsprof names them a tick later */
		prs_pywalk_idents(&walker, &mr, &sl->py);
		sl->flags |= PRS_SLOTF_PY;
		__atomic_fetch_add(&ring->py_walks, 1, __ATOMIC_RELAXED);
		return;
	}
}

/* Takes the layout pyrsprof published, once (the handler's first look after it is set). */
static void check_python(void)
{
	/* a layout for this image: pyrsprof found the interpreter since the last exec */
	if (py_ready || __atomic_load_n(&ring->py_gen, __ATOMIC_ACQUIRE) != my_gen)
		return;
	py_layout = ring->py_layout;
	walker = ring->py_walk;
	walker.L = &py_layout;
	__atomic_store_n(&py_ready, 1, __ATOMIC_RELEASE);
}

/*
 * Whether to skip this period's sample: pyrsprof lags (more than half the ring unread), so the
 * thread keeps one sample every few periods, weighted by the periods since its last, until it
 * catches up (prs_ring_thin_skip). A full ring drops what comes after it: in a tree of ~27 busy
 * processes on 2 CPUs, pyrsprof getting 1/N of them, its first look at a new process came
 * seconds late, and a spawned worker's 128 slots held its start-up, its work dropped; thinned,
 * its samples stay spread over its whole run. Two loads of the header, no syscall.
 */
static bool thin_out(int overrun)
{
	uint64_t w = __atomic_load_n(&ring->written, __ATOMIC_RELAXED);
	uint64_t r = __atomic_load_n(&ring->read, __ATOMIC_RELAXED);
	uint32_t add = 1 + (uint32_t)(overrun < 0 ? 0 : overrun > 10000 ? 10000 : overrun);

	/* only the rings of --subprocesses: the launched process's is read at every look, and
	 * its weights stay those of its clock */
	if (!own_ring) {
		me.periods = add;
		return false;
	}
	return prs_ring_thin_skip(w, r, ring->nslots, &me.periods, add);
}

static void take_sample(const ucontext_t *uc, int overrun)
{
	uint64_t t0 = now_ns();
	struct prs_ring_slot *sl;

	jitter_clock(); /* first, whatever follows: a period is never left undrawn */
	if (__atomic_load_n(&ring->stop, __ATOMIC_RELAXED) || thin_out(overrun))
		return;
	sl = prs_ring_claim_home(ring, &me.slot);
	if (!sl) {
		me.periods = 0; /* dropped, and counted as such */
		return;
	}
	sl->flags = 0;
	sl->gen = my_gen;
	sl->weight = me.periods < 10000 ? me.periods : 10000;
	me.periods = 0;
	sl->tid = me.tid ? me.tid : my_tid();
	sl->time_ns = t0;
	copy_regs(sl, uc);
	copy_stack(sl);
	check_python();
	copy_python(sl, uc);
	sl->handler_ns = now_ns() - t0;
	prs_ring_publish(ring, sl);
}

/* True for a signal of the agent's own clocks: a timer of its (by its value) or the calling
 * thread's perf event (by its descriptor). */
static bool own_clock(const siginfo_t *si)
{
	if (si->si_code == SI_TIMER)
		return si->si_value.sival_int == PRS_RING_COOKIE;
	return si->si_code >= POLL_IN && si->si_code <= POLL_HUP && me.perf_fd >= 0 &&
	       si->si_fd == me.perf_fd;
}

static void on_signal(int sig, siginfo_t *si, void *ucv)
{
	int saved = errno;

	if (si->si_code == SI_QUEUE && si->si_pid == self_pid &&
	    si->si_value.sival_int == PRS_RING_ARM_COOKIE) {
		if (ring)
			arm_self(); /* the constructor's call to a thread that was running before us */
	} else if (si->si_code == SI_QUEUE && si->si_pid == self_pid &&
		   si->si_value.sival_int == PRS_RING_REARM_COOKIE) {
		if (ring)
			rearm_self();
	} else if (own_clock(si)) {
		if (ring && me.armed)
			take_sample(ucv, si->si_code == SI_TIMER ? si->si_overrun : 0);
	} else if (!prs_mask_hold(si)) {
		prs_chain_forward(sig, si, ucv); /* the program's own use of this signal */
	}
	errno = saved;
}

/* SIGSEGV and SIGBUS: a fault of prs_safecopy's ends that copy with an error; any other is the
 * program's (chain.c passes it to the program's action, as if the agent were not there). */
static void on_fault(int sig, siginfo_t *si, void *ucv)
{
	int saved = errno;

	if (!prs_safecopy_recover(ucv))
		prs_chain_forward(sig, si, ucv);
	errno = saved;
}

/* ---- threads ---- */

struct start {
	void *(*fn)(void *);
	void *arg;
	bool blocked; /* the creator's view of the agent's signal: the mask is inherited */
};

static void *thread_start(void *p)
{
	struct start st = *(struct start *)p;

	free(p);
	prs_mask_set_view(st.blocked);
	if (ring) {
		learn_stack();
		pthread_setspecific(exit_key, (void *)1);
		arm_self();
	}
	return st.fn(st.arg);
}

EXPORT int pthread_create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
	struct start *st;
	int rc;

	if (!real_pthread_create)
		real_pthread_create = dlsym(RTLD_NEXT, "pthread_create");
	if (!real_pthread_create)
		return EAGAIN;
	/* wrapped while the agent's handler is installed (a forked child too: the mask view) */
	if (!signo || !(st = malloc(sizeof(*st))))
		return real_pthread_create(th, attr, fn, arg);
	st->fn = fn;
	st->arg = arg;
	st->blocked = prs_mask_view();
	rc = real_pthread_create(th, attr, thread_start, st);
	if (rc != 0)
		free(st);
	return rc;
}

/* ---- exec ---- */

/*
 * An exec of the sampled process: a sample signal pending at the exec (a perf overflow during
 * it, say) would reach the new image before any handler, and the default action of a real-time
 * signal is to terminate. Ignoring the signal discards those pending and keeps it ignored
 * across the exec; the new image's agent installs its handler over SIG_IGN. Restored if the
 * exec fails. (execl* and fexecve are not wrapped: glibc's own calls do not go through these.)
 */
static bool resolve_real(void);

/* A vfork child shares the memory of the process the agent started in (self_pid), not its pid
 * (no fork handler runs in it). */
static bool in_vfork_child(void)
{
	return (pid_t)syscall(SYS_getpid) != self_pid;
}

static void exec_begin(struct sigaction *saved)
{
	struct sigaction ign;
	sigset_t s;

	if (!signo)
		return;
	/* the program's block of the agent's signal is inherited by the new image, for real */
	if (prs_mask_view()) {
		sigemptyset(&s);
		sigaddset(&s, signo);
		prs_mask_real(SIG_BLOCK, &s, NULL);
	}
	if (!ring)
		return;
	/* what the new image's agent is to take for the program's action (exec keeps SIG_IGN; a
	 * handler becomes SIG_DFL). Not from a vfork child (posix_spawn, CPython's subprocess and
	 * multiprocessing's spawn): it shares its parent's memory and ring, and its exec is not the
	 * parent's: the word stayed in the parent's ring, and pyrsprof said at the end that the
	 * parent had exec'ed a program the agent did not start in. */
	if (!in_vfork_child()) {
		ring->exec_ignored = prs_chain_program_ignores();
		__atomic_store_n(&ring->exec_pid, self_pid, __ATOMIC_RELEASE);
	}
	memset(&ign, 0, sizeof(ign));
	ign.sa_handler = SIG_IGN;
	prs_chain_real_sigaction(signo, &ign, saved);
}

static void exec_failed(const struct sigaction *saved)
{
	int e = errno;
	sigset_t s;

	if (signo && prs_mask_view()) {
		sigemptyset(&s);
		sigaddset(&s, signo);
		prs_mask_real(SIG_UNBLOCK, &s, NULL);
	}
	if (ring) {
		if (!in_vfork_child())
			__atomic_store_n(&ring->exec_pid, 0, __ATOMIC_RELEASE);
		prs_chain_real_sigaction(signo, saved, NULL);
	}
	errno = e;
}

EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
	struct sigaction saved;

	if (!real_execve && !resolve_real())
		return -1;
	exec_begin(&saved);
	real_execve(path, argv, envp);
	exec_failed(&saved);
	return -1;
}

EXPORT int execv(const char *path, char *const argv[])
{
	struct sigaction saved;

	if (!real_execv && !resolve_real())
		return -1;
	exec_begin(&saved);
	real_execv(path, argv);
	exec_failed(&saved);
	return -1;
}

EXPORT int execvp(const char *file, char *const argv[])
{
	struct sigaction saved;

	if (!real_execvp && !resolve_real())
		return -1;
	exec_begin(&saved);
	real_execvp(file, argv);
	exec_failed(&saved);
	return -1;
}

EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
	struct sigaction saved;

	if (!real_execvpe && !resolve_real())
		return -1;
	exec_begin(&saved);
	real_execvpe(file, argv, envp);
	exec_failed(&saved);
	return -1;
}

/* ---- exit ---- */

/* A followed process's exit: its last samples read first (follow-agent.h). Not the launched
 * process (pyrsprof's child, whose exit it waits for), nor a vfork child, which shares its
 * parent's memory and ring (its pid is not the one the agent started in). */
static void await_reader(void)
{
	if (!ring || !own_ring || in_vfork_child())
		return;
	me.armed = 0; /* the wait's own CPU is the agent's: not sampled */
	prs_follow_await_reader(ring, follow.nslots);
}

/* exit(): the destructors run after the program's atexit handlers (Python's finalization, a
 * spawned multiprocessing worker's end). */
__attribute__((destructor)) static void agent_exit(void)
{
	await_reader();
}

/* _exit and _Exit skip the destructors (os._exit: a forked multiprocessing worker's end). */
EXPORT void _exit(int status)
{
	await_reader();
	if (real__exit)
		real__exit(status);
	syscall(SYS_exit_group, status);
	__builtin_unreachable();
}

EXPORT void _Exit(int status)
{
	await_reader();
	if (real__Exit)
		real__Exit(status);
	syscall(SYS_exit_group, status);
	__builtin_unreachable();
}

/* Sends thread tid the agent's signal with value cookie: queued with a value of ours, told apart
 * from a tgkill of the program's own. Async-signal-safe. */
static void tell(pid_t tid, int cookie)
{
	siginfo_t si;

	memset(&si, 0, sizeof(si));
	si.si_signo = signo;
	si.si_code = SI_QUEUE;
	si.si_pid = self_pid;
	si.si_uid = getuid();
	si.si_value.sival_int = cookie;
	syscall(SYS_rt_tgsigqueueinfo, self_pid, tid, signo, &si);
}

/* The program closed thread tid's clock descriptor (fdguard.c, in the closing thread). */
static void clock_lost(pid_t tid)
{
	if (ring && signo)
		tell(tid, PRS_RING_REARM_COOKIE);
}

/* Asks every other thread already running to arm itself (in the handler). */
static void arm_others(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	pid_t self = my_tid();

	if (!d)
		return;
	while ((e = readdir(d)) != NULL) {
		long tid = strtol(e->d_name, NULL, 10);

		if (tid > 0 && tid != self)
			tell((pid_t)tid, PRS_RING_ARM_COOKIE);
	}
	closedir(d);
}

/* Counts a fork of a followed process before it happens: pyrsprof knows a child's ring is due. */
static void before_fork(void)
{
	if (ring && following)
		__atomic_fetch_add(&ring->forks, 1, __ATOMIC_RELAXED);
}

/* A fork's child (the forking thread alone, no timer: they are not inherited). The parent's
 * ring is unmapped: its threads may be mid-write in it. With --subprocesses, a ring of its own
 * and its clock armed again; else it runs unprofiled. Async-signal-safe (raw syscalls). */
static void in_child(void)
{
	struct prs_ring_hdr *parent_ring = ring, *h = NULL;
	size_t parent_bytes = ring_bytes, bytes = 0;
	pid_t parent = self_pid;
	uint64_t id = 0;

	ring = NULL;
	prs_chain_forget_ring();
	me.armed = 0;
	me.slot = 0;
	me.periods = 0; /* the parent's */
	prs_fdguard_forget_all(); /* the parent's threads' descriptors */
	/* the copy of the forking thread's event descriptor: the event stays the parent's */
	if (me.perf_fd >= 0 && ioctl(me.perf_fd, PERF_EVENT_IOC_ID, &id) == 0 && id == me.perf_id)
		close(me.perf_fd);
	me.perf_fd = -1;
	me.timer = -1;
	self_pid = getpid();
	if (!parent_ring)
		return;
	if (following && !(h = prs_follow_make_ring(&follow, self_pid, parent, true, &bytes)))
		__atomic_fetch_add(&parent_ring->children_lost, 1, __ATOMIC_RELAXED);
	munmap(parent_ring, parent_bytes);
	if (!h)
		return;
	ring = h;
	ring_bytes = bytes;
	own_ring = true;
	my_gen = __atomic_add_fetch(&h->generation, 1, __ATOMIC_ACQ_REL);
	prs_chain_set_ring(h);
	arm_self();
	if (!me.armed) {
		agent_fail(errno, "timer_create on the thread's CPU clock failed");
		ring = NULL;
		prs_chain_forget_ring();
		return;
	}
	__atomic_store_n(&ring->agent_state, PRS_AGENT_RUNNING, __ATOMIC_RELEASE);
}

/* ---- start ---- */

/* Maps the ring whose descriptor the environment names; NULL when there is none for us. */
static struct prs_ring_hdr *map_ring(size_t *bytes)
{
	const char *s = getenv(PRS_AGENT_FD_ENV);
	struct prs_ring_hdr *h;
	struct stat st;
	char *end;
	long fd;
	int32_t zero = 0;

	if (!s)
		return NULL;
	fd = strtol(s, &end, 10);
	if (*end || fd < 0 || fd > 1 << 20 || fstat((int)fd, &st) != 0 ||
	    (uint64_t)st.st_size < prs_ring_slots_off())
		return NULL;
	h = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, (int)fd, 0);
	if (h == MAP_FAILED)
		return NULL;
	/* Only the program pyrsprof launched (or its own exec) samples: not a child it forked,
	 * which inherited the descriptor and the environment. */
	if (h->magic != PRS_RING_MAGIC || h->version != PRS_RING_VERSION ||
	    prs_ring_size(h->nslots, h->stack_cap) > (uint64_t)st.st_size ||
	    h->slots_off != prs_ring_slots_off() || h->slot_size != prs_ring_slot_size(h->stack_cap) ||
	    h->nslots == 0 || h->period_ns == 0 || h->profiler_pid != getppid() ||
	    (!__atomic_compare_exchange_n(&h->target_pid, &zero, getpid(), false, __ATOMIC_ACQ_REL,
					  __ATOMIC_ACQUIRE) &&
	     zero != getpid())) {
		munmap(h, (size_t)st.st_size);
		return NULL;
	}
	*bytes = (size_t)st.st_size;
	return h;
}

/* The ring of this image: pyrsprof's for the launched process (and its exec's, while it keeps
 * the descriptor), else with --subprocesses one of its own, announced; NULL: unprofiled. */
static struct prs_ring_hdr *find_ring(void)
{
	struct prs_ring_hdr *h;

	following = prs_follow_parse(getenv(PRS_FOLLOW_ENV), &follow);
	h = map_ring(&ring_bytes);
	if (h || !following)
		return h;
	h = prs_follow_make_ring(&follow, getpid(), getppid(), false, &ring_bytes);
	own_ring = h != NULL;
	return h;
}

/*
 * The agent's handler for a fault signal, held with the action the program had (SIG_DFL, or an
 * inherited SIG_IGN). SA_ONSTACK: a program's stack-overflow handler (Rust's, Python's
 * faulthandler) relies on the alternate stack it sets, and runs on it as without the agent; a
 * thread without one is not affected. SA_NODEFER is not set: a fault in the handler is the
 * program's own to die of. On failure the fault is simply not held, and the walk keeps reading
 * through syscalls.
 */
static void install_fault(int sig)
{
	struct sigaction sa, old;

	if (prs_chain_real_sigaction(sig, NULL, &old) != 0)
		return;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_fault;
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	/* held before installed: a fault in between finds the program's action */
	prs_chain_hold_fault(sig, &old);
	if (prs_chain_real_sigaction(sig, &sa, NULL) != 0)
		prs_chain_release_fault(sig);
}

/* The agent's signal, kept installed for the whole run; the action the program had (SIG_DFL,
 * or SIG_IGN left by an exec from a sampled image: exec_begin) becomes the program's action
 * that chain.c keeps and forwards to. */
static int install_handler(void)
{
	struct sigaction sa, old;
	int sig = SIGRTMIN + PRS_RING_SIGNAL_OFFSET;

	if (prs_chain_real_sigaction(sig, NULL, &old) != 0)
		return -errno;
	/* SIG_IGN that the previous image's agent set for the exec: the program's own was
	 * SIG_DFL unless it ignored the signal itself */
	if (old.sa_handler == SIG_IGN && __atomic_load_n(&ring->exec_pid, __ATOMIC_ACQUIRE) == self_pid) {
		if (!ring->exec_ignored)
			old.sa_handler = SIG_DFL;
		__atomic_store_n(&ring->exec_pid, 0, __ATOMIC_RELEASE);
	} else if (old.sa_handler == SIG_IGN && own_ring) {
		/* a new ring: the previous image's word is not in it; SIG_IGN is taken for the
		 * agent's (a program ignoring SIGRTMIN+8 itself is rare: docs/preload.md) */
		old.sa_handler = SIG_DFL;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_signal;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	if (prs_chain_real_sigaction(sig, &sa, NULL) != 0)
		return -errno;
	prs_chain_start(sig, &old, ring);
	prs_mask_start(sig);
	signo = sig;
	install_fault(SIGSEGV);
	install_fault(SIGBUS);
	return 0;
}

/* The functions the agent wraps, resolved before anything can call them (a wrapper may run in
 * a forked child, where dlsym is not safe). Returns false if one is missing. */
static bool resolve_real(void)
{
	real_pthread_create = dlsym(RTLD_NEXT, "pthread_create");
	real_execve = dlsym(RTLD_NEXT, "execve");
	real_execv = dlsym(RTLD_NEXT, "execv");
	real_execvp = dlsym(RTLD_NEXT, "execvp");
	real_execvpe = dlsym(RTLD_NEXT, "execvpe");
	real__exit = dlsym(RTLD_NEXT, "_exit");
	real__Exit = dlsym(RTLD_NEXT, "_Exit");
	return prs_chain_resolve() && prs_mask_resolve() && prs_fdguard_resolve() && real_pthread_create &&
	       real_execve && real_execv &&
	       real_execvp && real_execvpe;
}

__attribute__((constructor)) static void agent_start(void)
{
	bool resolved = resolve_real();
	struct prs_ring_hdr *h = find_ring();
	int rc;

	if (!h)
		return;
	ring = h;
	self_pid = getpid();
	my_gen = __atomic_add_fetch(&h->generation, 1, __ATOMIC_ACQ_REL);
	if (!resolved || pthread_key_create(&exit_key, disarm_self) != 0 ||
	    pthread_atfork(before_fork, NULL, in_child) != 0) {
		agent_fail(ENOSYS, "the agent cannot hook thread creation");
		ring = NULL;
		return;
	}
	rc = install_handler();
	if (rc != 0) {
		agent_fail(-rc, "sigaction failed");
		ring = NULL;
		return;
	}
	learn_stack();
	prs_fdguard_start(clock_lost);
	arm_self();
	if (!me.armed) {
		agent_fail(errno, "timer_create on the thread's CPU clock failed");
		ring = NULL;
		return;
	}
	__atomic_store_n(&ring->agent_state, PRS_AGENT_RUNNING, __ATOMIC_RELEASE);
	arm_others();
}
