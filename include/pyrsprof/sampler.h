/* SPDX-License-Identifier: MIT */
/*
 * The sampler: launches or attaches to a target, then on an absolute-deadline timer stops every
 * thread (PTRACE_INTERRUPT), reads its registers and one stack snapshot, resumes it, unwinds the
 * snapshot and records the sample into a profile. It follows threads as they come and go, passes
 * signals through, and detaches leaving the target running.
 *
 * One sampler runs on one thread; nothing here is thread-safe. The caller (src/cli) must block the
 * signals of prs_sampler_sigset() in every thread before prs_sampler_launch/attach: the loop takes
 * them with sigtimedwait().
 */
#ifndef PYRSPROF_SAMPLER_H
#define PYRSPROF_SAMPLER_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "pyrsprof/err.h"
#include "pyrsprof/profile.h"
#include "pyrsprof/python.h"

/* The signals the sampler loop waits for: SIGCHLD for ptrace events, the rest from the user. */
int prs_sampler_sigset(sigset_t *set);

enum prs_sampler_mode { PRS_SAMPLE_LAUNCH, PRS_SAMPLE_ATTACH };

/* Where samples come from. */
enum prs_source {
	PRS_SOURCE_PTRACE = 0, /* stop each thread: registers, stack snapshot, native + Python frames */
	PRS_SOURCE_VM = 1,     /* Python frames only, read from memory without stopping the target */
	/* launch only: an LD_PRELOAD agent samples each thread on its CPU-time timer from inside
	 * (registers, stack copy, Python frames) into a shared ring; pyrsprof unwinds and names */
	PRS_SOURCE_PRELOAD = 2,
	PRS_SOURCE_AUTO = 3,   /* ptrace; launch: preload when ptrace is refused */
};

struct prs_sampler_opts {
	double rate_hz;         /* samples per second per thread, > 0 */
	double duration_s;      /* stop after this long; 0 = until the target exits or the user stops */
	size_t stack_bytes;     /* cap of the stack snapshot per thread-sample (default 64 KiB) */
	bool quiet;             /* no status line */
	int max_ticks;          /* stop after this many ticks; 0 = no limit (dump uses 1) */
	struct prs_profile *profile; /* where samples go when no recorder is given (dump) */
	enum prs_source source;
	bool native_all;        /* keep interpreter plumbing in merged Python stacks */
	bool no_python;         /* do not look for a CPython interpreter */
	struct prs_py_opts py;  /* how to look for it (zero: the defaults) */
	/* Read every thread at every tick, also one provably asleep since its last sample (by
	 * default such a thread is recorded again without being stopped or read): benchmarks,
	 * comparisons. */
	bool read_idle;
	/* Store each traced thread's kernel accounting when it exits (a THREAD EXIT record of source
	 * PRS_SRC_SAMPLER, acct.h): the classifier's collection (ptrace source only). Not when
	 * exits_by_taskstats: the taskstats exit messages give the same fields for every thread, and
	 * the reads (4 /proc files, ~15 syscalls a thread) are left out of pyrsprof's CPU. */
	bool acct_exits;
	bool exits_by_taskstats;
	/* Kernel frames under the user stacks of running samples, from perf_event_open where
	 * permitted (ptrace and preload sources; src/sample/kstack-internal.h). prs_sampler_kernel_stacks()
	 * says whether they are recorded. */
	bool kernel_stacks;
	/* Each thread's context switches (preempted / voluntary, and the time to the next switch-in)
	 * from perf_event_open switch records where permitted, stored as SWITCH records (acct.h);
	 * else a NOTE says why (src/sample/switches-internal.h). */
	bool switches;
	/* Follow the child processes (fork, vfork, clone of a process, and their execs) of every
	 * traced process, each sampled as its own process; the recording goes on until the last of
	 * the tree exits. Without it, children run untraced (--subprocesses). */
	bool subprocesses;
	/* ptrace: each tick waits for every thread's stop (up to 200 ms), all of them held, instead
	 * of at most its stop budget: one consistent moment of every thread (dump), paid for by the
	 * program. */
	bool wait_every_stop;
	/* --mode preload: the agent library (NULL: libpyrsprof-agent.so next to the pyrsprof
	 * binary, or in ../lib/pyrsprof/), and POSIX CPU timers as its clocks even where perf
	 * events work (the CLI sets both from PYRSPROF_AGENT and PYRSPROF_AGENT_CLOCK). */
	const char *agent_path;
	bool agent_posix_clock;
	/* Called about once a second from the loop (e.g. for a status line); may be NULL. */
	void (*progress)(void *arg, double elapsed_s, uint64_t thread_samples, size_t threads);
	void *progress_arg;
};

/* Statistics of a recording, for stats.json and the summary line. Durations in nanoseconds. */
struct prs_dist {
	double median, p10, p90, p99, max;
	size_t n;
};

struct prs_sampler_stats {
	/* ticks, missed_ticks and late_ticks count sampling periods: a turn of the loop of the
	 * preload source covers several (sampler-internal.h, look_ns) */
	uint64_t ticks, missed_ticks, thread_samples, threads_seen;
	uint64_t not_stopped;     /* threads that did not stop in time (recorded from /proc):
				   * skipped_late + reuse_lost */
	/* Ticks begun more than half a period after their time (a tick missed entirely is in
	 * missed_ticks; these were taken, late). */
	uint64_t late_ticks;
	/* ptrace: threads a tick did not hold the program for. late_sampled: interrupted, not
	 * stopped within the tick's stop budget, their stop taken later in the tick with nothing
	 * else held (a thread waiting for a CPU runs no code before it stops: still the tick's
	 * moment), or at a later tick's stop (a thread waiting for a CPU through ticks);
	 * skipped_late: not stopped by the end of the tick either, in D or deferred too long
	 * (recorded from /proc);
	 * skipped_new: just created, their first stop not seen yet (not recorded that tick).
	 * other_trap_stops: interrupts answered by another stop (a clone event, a signal), sampled
	 * there. */
	uint64_t late_sampled, skipped_late, skipped_new, other_trap_stops;
	/* ptrace: on-CPU samples taken from a thread's stop (cpu_stopped), and those of them taken
	 * after the thread had to be given a CPU to stop (cpu_preempted: paid out as on-CPU by the
	 * CPU balance, src/sample/balance-internal.h): their stack is where it was preempted, often
	 * a syscall return, not where its CPU time went; cpu_preempted_stop: those of them that kept
	 * that stack. The others, and all on-CPU samples of a thread its recent stops found
	 * preempted (cpu_from_perf), were given the native stack of a perf sample taken while the
	 * thread ran (a native thread with kernel-stack events: src/sample/kstack-internal.h,
	 * prs_kstack_user); cpu_perf_reused of them a perf sample given once already, and
	 * cpu_without_perf such samples that found none (the stop's stack stayed) */
	uint64_t cpu_stopped, cpu_preempted, cpu_preempted_stop;
	uint64_t cpu_from_perf, cpu_perf_reused, cpu_without_perf;
	/* ptrace: threads found at a tick (started since the last one) and seized then; threads not
	 * followed (the table was full); processes found at a tick (forked by a thread before it was
	 * seized) and seized then (src/sample/newthreads.c) */
	uint64_t threads_found, threads_not_followed, processes_adopted;
	/* ptrace: execs by a thread not seized yet, found at a tick (its process seized again) */
	uint64_t execs_found;
	/* ptrace: the time threads spent stopped for their samples, in all */
	uint64_t stopped_ns;
	/* threads asleep since their last sample, recorded without being read again: all of their
	 * last sample (reused_samples), or its native frames with Python frames read now
	 * (reused_native); reuse_lost: found asleep, but it woke during the tick */
	uint64_t reused_samples, reused_native, reuse_lost;
	/* ptrace: threads found asleep in the kernel and read from /proc and their memory without
	 * being stopped (their native stack from the registers they entered the kernel with) */
	uint64_t read_asleep;
	uint64_t unwind_errors, unwind_truncated, read_errors;
	uint64_t signals_forwarded;
	/* kernel stacks: perf samples read from the threads' rings (each cost its thread a timer
	 * interrupt: 2 per tick of CPU time at most), thread-samples given kernel frames, on-CPU
	 * thread-samples whose thread's event was at the lowered rate (it stayed in user mode:
	 * src/sample/kstack_rate-internal.h), and the changes of rate made */
	uint64_t kstack_perf_samples, kstack_matched, kstack_lowered_samples, kstack_period_changes;
	/* the kernel-mode share of those perf samples, each weighed by its rate's period */
	double kstack_perf_kernel_share;
	/* on-CPU thread-samples whose thread's event was held at the probe's rate, not lowered (its
	 * recent stops found it preempted: src/sample/kstack_rate-internal.h) */
	uint64_t kstack_held_samples;
	/* Per-thread perf events wait until a thread has lived through a tick (a thread-per-request
	 * server's threads mostly do not): kernel-stack events opened, running thread-samples of
	 * threads at their first tick (no event yet: no kernel frames); switch-record events
	 * opened, threads without one (young all their lives, or refused). */
	uint64_t kstack_opened, kstack_young, switches_opened, switches_without;
	/* Traced threads' exits whose kernel accounting the sampler read (acct_exits), and those it
	 * left to the taskstats exit messages (exits_by_taskstats). */
	uint64_t exit_acct_read, exit_acct_taskstats;
	/* processes sampled (the root and, with subprocesses, every process of its tree) */
	uint64_t processes;
	/* Without subprocesses: the CPU time of the root's children that it waited for (so not
	 * sampled), as /proc/ROOT/stat's cutime + cstime said last (at its exit for a launched
	 * root; for an attached one, what was added while attached); 0 with subprocesses. */
	uint64_t children_cpu_ns;
	/* Python reader (0 when the target is not Python) */
	uint64_t py_read_errors, py_bad_frames, py_truncated, py_merge_mismatch, py_code_stale;
	uint64_t py_name_reads;   /* reads of the threading names (off the stop, between ticks) */
	double duration_s;
	/* pyrsprof's own CPU time (user, system) over the sampling loop (from its first tick to
	 * the end of the last drain; start-up and the end of the recording left out): what it
	 * takes from the machine while the program runs */
	double loop_user_s, loop_sys_s;
	/* per thread-sample: interrupt -> registers -> snapshot -> continue (stop), unwind, and their
	 * sum (sample_cost; in vm mode: the share of the Python read); per tick: the Python read. */
	struct prs_dist sample_cost, stop, unwind, python;
	struct prs_dist py_names; /* per read of the threading names */
	/* parts of sample_cost: the thread's state read from /proc (vm mode, per thread-sample), its
	 * schedstat read before the sample (per thread checked), the Python reads warmed up before
	 * the stops (ptrace mode, per tick: prs_py_warm) */
	struct prs_dist state, check, warm;
	/* ptrace, per tick: first interrupt to last release (the stop window) */
	struct prs_dist stop_window;
	/* per tick: how long after its due time it began */
	struct prs_dist tick_delay;
};

struct prs_sampler;

/*
 * Starts argv[0] (searched in PATH) as a traced child: the child is seized before it execs, so it
 * is traced from its first instruction. Returns 0, or -ENOENT/-EACCES/... when the command cannot
 * be run (err says "cannot run 'x': ..."; the child has then exited with 127).
 * rec receives the samples (borrowed, must outlive the sampler); when rec is NULL they go to
 * opts->profile and nothing is written.
 */
int prs_sampler_launch(char *const argv[], const struct prs_sampler_opts *opts,
		       struct prs_recorder *rec, struct prs_sampler **out, struct prs_err *err);

/* Seizes every thread of live process pid. -ESRCH: no such process; -EPERM: err explains why. */
int prs_sampler_attach(pid_t pid, const struct prs_sampler_opts *opts, struct prs_recorder *rec,
		       struct prs_sampler **out, struct prs_err *err);

/*
 * Samples until the target exits, the duration elapses, max_ticks is reached, or the user stops
 * it (attach: SIGINT/SIGTERM/SIGHUP; launch: SIGINT goes to the child through the terminal, a
 * second SIGINT stops sampling; signals sent to pyrsprof with kill() are forwarded to the child).
 * Then detaches from every thread still alive. Returns 0 or -errno.
 */
int prs_sampler_run(struct prs_sampler *s, struct prs_err *err);

/*
 * Asks prs_sampler_run to stop sampling within a tick, as the user's stop does (then it detaches
 * and returns; a launched child runs on). For the progress callback (`top`'s q key).
 */
void prs_sampler_stop(struct prs_sampler *s);

/*
 * After prs_sampler_run: waits (forwarding signals) until a launched child exits and returns its
 * exit status as a shell would: the code, or 128 + signal. For an attached target, or a child
 * already reaped, returns the known status (0 for attach). Returns -1 if the status is unknown.
 */
int prs_sampler_wait_child(struct prs_sampler *s);

/* The target's pid. */
pid_t prs_sampler_pid(const struct prs_sampler *s);

/* True if the target exited while being sampled (its status is known). */
bool prs_sampler_target_exited(const struct prs_sampler *s);

/*
 * The Python interpreter found in the target: a one-line description ("CPython 3.12.1 in
 * /usr/lib/libpython3.12.so.1.0") into buf, or a reason it was not used ("CPython 2.7 is not
 * supported"), or "" when the target is not Python. Returns true if Python frames are read.
 */
bool prs_sampler_python(const struct prs_sampler *s, char *buf, size_t size);

/* The Python threads read at the last tick (GIL holder, names). Borrowed; *n may be 0. */
const struct prs_py_thread *prs_sampler_python_threads(const struct prs_sampler *s, int *n);

/* A futex word a thread was sampled blocked on (futex's first argument), and in how many samples. */
struct prs_wait_addr {
	int32_t tid;
	uint64_t uaddr;
	uint64_t samples;
	bool gil; /* the word is the GIL's (prs_py_gil_waits_on): those samples carry PRS_SAMPLE_GIL_WAIT */
};

/*
 * Every (thread, futex word) the samples found a thread blocked on, in order of first sight:
 * *n entries, borrowed until prs_sampler_free. For the WAIT_ADDR records of a recording.
 */
const struct prs_wait_addr *prs_sampler_wait_addrs(const struct prs_sampler *s, size_t *n);

/* Kernel stacks (opts.kernel_stacks): true when recorded; else, when they were asked for, why
 * not and what to do, in one line into why (else ""). */
bool prs_sampler_kernel_stacks(const struct prs_sampler *s, char *why, size_t size);

/* What the user should know of how the sampling went, one or more lines ("" when nothing): the
 * fallback of --mode auto, the preload agent's problems and drops. Borrowed. */
const char *prs_sampler_notes(const struct prs_sampler *s);

/* The sample source in use: "ptrace", "vm" or "preload". */
const char *prs_sampler_source_name(const struct prs_sampler *s);

/*
 * The share of the sampled threads' time they spent stopped for their samples: stopped_ns over
 * the time the thread-samples stand for (one period each at rate_hz). 0 when nothing was sampled.
 */
double prs_sampler_stopped_share(const struct prs_sampler_stats *st, double rate_hz);

/* When a recording says its ticks or its target suffered (prs_sampler_health). */
#define PRS_HEALTH_TICKS_SHARE 0.01   /* missed + late ticks, of the ticks due */
#define PRS_HEALTH_SKIPPED_SHARE 0.05 /* late-skipped thread-samples, of all */
#define PRS_HEALTH_STOPPED_SHARE 0.03 /* the threads' time spent stopped */
#define PRS_HEALTH_PREEMPTED_SHARE 0.25 /* ptrace's on-CPU samples taken where it was preempted */
/* and at least this many ticks missed or late, or thread-samples skipped: one late tick among a
 * short run's three is not thin sampling */
#define PRS_HEALTH_MIN_COUNT 3

/*
 * Whether the recording's ticks held and left the target alone. Writes into buf (always
 * NUL-terminated) one line per problem found, each saying what went wrong with its numbers, the
 * likely cause and the remedy: ticks missed or late beyond PRS_HEALTH_TICKS_SHARE, threads that
 * did not stop in time beyond PRS_HEALTH_SKIPPED_SHARE, a target stopped more than
 * PRS_HEALTH_STOPPED_SHARE of its time (ptrace), on-CPU samples taken where a thread was
 * preempted beyond PRS_HEALTH_PREEMPTED_SHARE of them (ptrace: the CPU view's split is then of
 * preemption points). Returns how many problems were found (buf is "" for 0). Pure: reads nothing
 * but its arguments.
 */
int prs_sampler_health(const struct prs_sampler_stats *st, double rate_hz, enum prs_source source,
		       char *buf, size_t size);

/* Fills stats (durations summarised). */
void prs_sampler_get_stats(const struct prs_sampler *s, struct prs_sampler_stats *stats);

/* Frees s; detaches first if still attached. NULL is fine. */
void prs_sampler_free(struct prs_sampler *s);

#endif
