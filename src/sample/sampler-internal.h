/* SPDX-License-Identifier: MIT */
/*
 * The sampler's rooms and how they meet. A session (struct prs_sampler, session.c) holds the
 * options, the profile, the statistics and a list of targets; it runs the loop (absolute
 * deadlines, the user's signals) and calls its sample source once per tick per target. A target
 * (struct prs_target, target.c, target_python.c) is one traced process: its pid, thread table
 * (threads.c), unwinder and maps, CPython reader and this tick's Python threads, exec state and
 * exit status. The ptrace events of every target arrive through one waitpid(-1) (events.c) and
 * go to the target owning the tid. A sample source (struct prs_source_ops: source_ptrace.c,
 * source_vm.c) takes one tick of one target and records it (record.c), leaving sleeping threads
 * alone where it can (reuse.c).
 *
 * A session starts with one target, the root (start.c). With --subprocesses, the root's tree
 * joins it: the processes it forks (events.c tells tree.c, which makes their targets), and at
 * attach the descendants alive then; a target that exited is freed (the root is kept).
 */
#ifndef PYRSPROF_SAMPLE_SAMPLER_INTERNAL_H
#define PYRSPROF_SAMPLE_SAMPLER_INTERNAL_H

#include <dirent.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "pyrsprof/err.h"
#include "pyrsprof/profile.h"
#include "pyrsprof/python.h"
#include "pyrsprof/sampler.h"
#include "pyrsprof/unwind.h"
#include "sample/durations-internal.h"
#include "sample/kstack-internal.h"
#include "sample/switches-internal.h"
#include "sample/threads-internal.h"
#include "sample/waits-internal.h"

#define PRS_MAX_PY_THREADS 256 /* Python threads read per tick and target */

struct prs_sampler;
struct prs_target;

/*
 * A sample source: how a tick of one target is taken. The session calls attach once for a live
 * process it is given; then at each tick, for the targets that run their own image, begin (if
 * any) for every one of them, then tick for every one, then record (if any) for every one.
 */
struct prs_source_ops {
	const char *name;
	/* The source traces the target with ptrace: a launched child is seized before its exec,
	 * its threads send events, and they are detached at the end. */
	bool traces;
	/* Makes live process tg->pid (its table empty) ready to sample. Returns 0 or -errno with
	 * err set (-EPERM explained). */
	int (*attach)(struct prs_sampler *s, struct prs_target *tg, struct prs_err *err);
	/* Optional. Before the begin of any target's tick: tg's threads started since the last tick
	 * join its table (the ptrace source seizes them then: newthreads.c). */
	void (*threads)(struct prs_sampler *s, struct prs_target *tg);
	/* Starts tg's tick (NULL: none). now_ns: the loop's time. */
	void (*begin)(struct prs_sampler *s, struct prs_target *tg, uint64_t now_ns);
	/* One tick of tg: a sample of each of its threads taken (with record NULL: recorded). */
	void (*tick)(struct prs_sampler *s, struct prs_target *tg, uint64_t now_ns);
	/* Optional. Around the launch of the root: before the fork (argv: the command), then after
	 * it whatever happened (restores what before changed in pyrsprof itself). */
	int (*launch_prepare)(struct prs_sampler *s, struct prs_target *tg, char *const argv[],
			      struct prs_err *err);
	void (*launch_done)(struct prs_sampler *s, struct prs_target *tg);
	/* Optional. After the loop, for every target: what is still pending is recorded. */
	void (*end)(struct prs_sampler *s, struct prs_target *tg);
	/* Records tg's tick, once every target's tick was taken (NULL: none). */
	void (*record)(struct prs_sampler *s, struct prs_target *tg);
	/* Optional. Once per turn of the loop, before it looks whether a target is left: a source
	 * that learns of processes by itself adds their targets and marks those gone as exited
	 * (preload with subprocesses: no ptrace events tell it). Returns true while a process it
	 * knows is coming has not joined yet (the loop goes on meanwhile, the source bounds it). */
	bool (*poll)(struct prs_sampler *s, uint64_t now_ns);
	/* Optional. The loop's period, a whole number of sampling periods (NULL: one): a source
	 * whose samples wait for pyrsprof (the preload ring) need not wake it at each period. */
	uint64_t (*look_ns)(const struct prs_sampler *s);
};

/* A target's tick under way (source_ptrace.c). */
struct prs_tick {
	bool open;       /* from begin to record: interrupt stops of tg are taken as samples */
	bool hold;       /* until the Python read: a Python target's stopped threads are held */
	uint64_t tick_ns;
	size_t nstop;    /* threads to stop */
	size_t ninterrupted; /* threads sent PTRACE_INTERRUPT */
	size_t nnative;  /* threads found asleep where they were stopped (PRS_REUSE_NATIVE) */
	size_t nasleep;  /* threads found asleep elsewhere, read without a stop (PRS_REUSE_ASLEEP) */
	size_t nheld;    /* threads held stopped for the Python read */
	uint64_t warm_ns, py_ns;
};

extern const struct prs_source_ops prs_source_ptrace; /* source_ptrace.c */
extern const struct prs_source_ops prs_source_vm;     /* source_vm.c */
extern const struct prs_source_ops prs_source_preload; /* source_preload.c */

struct prs_preload;
/* Frees a target's preload state (source_preload.c). NULL is fine. */
void prs_preload_free(struct prs_preload *p);

/* One traced process. */
struct prs_target {
	pid_t pid;
	pid_t ppid;             /* its parent (0: unknown, the root) */
	uint32_t command;       /* the command it runs (profile string id; 0: not recorded yet) */
	struct prs_thr_table thr;
	DIR *task_dir;          /* /proc/PID/task, kept open (newthreads.c; NULL: not yet) */
	bool leader_lost;       /* the leader could not be interrupted (newthreads.c looks why) */
	uint64_t leader_checked; /* when newthreads.c last looked whether the leader is still ours */
	bool seized;            /* its threads are traced: they are detached at the end */
	bool own_image;         /* it runs its own program (a launched child: once it exec'ed;
				 * before, it is still a copy of pyrsprof and is not sampled) */
	bool exited;            /* its exit status is known */
	int exit_status;        /* raw wait status of its leader, -1 until known */
	/* native */
	struct prs_unwinder *uw;
	bool maps_dirty;
	uint64_t last_maps_refresh;
	/* profile mapping id for each index of the unwinder's maps (PRS_NO_MAPPING = not yet) */
	uint32_t *map_ids;
	size_t nmap_ids;
	uint64_t maps_gen;      /* unwinder maps generation map_ids was built for (0 = none) */
	/* Python */
	struct prs_py *py;
	struct prs_py_thread *pyt; /* this tick's Python threads, PRS_MAX_PY_THREADS slots */
	int npyt;
	/* ptrace: the raw stacks walked while the threads were stopped, named once they run again
	 * (prs_target_py_walk; PRS_MAX_PY_THREADS slots, allocated at the first walk) */
	struct prs_py_stack *pyraw;
	int nraw;
	bool py_walked;         /* pyraw holds a walk not named yet */
	bool py_given_up;
	uint64_t py_next_try;
	/* no CPython found in the unwinder's maps of generation py_absent_gen: the next look waits
	 * for a change of the modules, or until py_absent_until (0: not waiting; target_python.c) */
	uint64_t py_absent_gen, py_absent_until;
	uint64_t py_since;      /* when its image started (made, or exec'ed): the reader is looked
				 * for often at first (target_python.c) */
	char py_info[256];
	uint64_t last_tick_ns;  /* ptrace: start of the last tick */
	struct prs_tick tick;   /* this tick (open between its begin and its record) */
	uint64_t last_py_read;  /* vm: end of the last Python read */
	struct prs_preload *preload; /* preload: the ring shared with the agent in the target */
};

/* The session. */
struct prs_sampler {
	enum prs_sampler_mode mode;
	struct prs_sampler_opts opts;
	const struct prs_source_ops *src;
	struct prs_recorder *rec;
	struct prs_profile *prof;
	struct prs_target **targets; /* [0] is the root: the launched or attached process */
	size_t ntargets;
	int seize_options;      /* PRS_PTRACE_OPTIONS, or _TREE with subprocesses */
	char py_info[256];      /* the first interpreter found in any target (prs_sampler_python) */
	char ptrace_refused[256]; /* --mode auto: why ptrace was refused before preload ("": not) */
	bool py_meta;           /* meta python_version written */
	struct prs_py_stats py_gone; /* the Python readers' statistics of targets freed */
	uint64_t root_cutime0;  /* attach: the root's children's CPU when attached */
	struct prs_thr_common thr_common;
	int64_t period_ns;      /* the sampling period (the CPU balance's unit) */
	uint64_t look_ns;       /* the loop's period (ticks): period_ns, or the source's look_ns */
	/* scratch for one thread-sample at a time */
	uint64_t *pcs;          /* PRS_MAX_NATIVE_FRAMES */
	uint32_t *frame_ids;    /* PRS_MAX_NATIVE_FRAMES */
	uint32_t *merged;       /* PRS_MAX_STACK_FRAMES, allocated with the first Python reader */
	uint8_t *cmp;           /* stack_bytes: a sleeping thread's stack, read to compare */
	uint64_t t0, last_flush, last_comm;
	bool stop_requested;
	int sigints;
	unsigned rng;           /* the ticks' jitter */
	struct prs_sampler_stats st;
	struct prs_durations d_cost, d_stop, d_unwind, d_python, d_names;
	struct prs_durations d_state, d_check, d_warm; /* parts of d_cost (struct prs_sampler_stats) */
	struct prs_durations d_window;  /* ptrace: each tick's stop window (source_ptrace.c) */
	struct prs_durations d_delay;   /* each tick's start after its due time */
	/* ptrace: this tick's first PTRACE_INTERRUPT, of any target (0: none yet); the tick's stop
	 * budget and its stop window count from there (source_ptrace.c) */
	uint64_t window_start;
	uint64_t tick_due;              /* when the coming tick is due (CLOCK_MONOTONIC ns) */
	/* ptrace: the record step of a tick (once the next tick's due time is known) takes the late
	 * stops until then, nothing held meanwhile (source_ptrace.c) */
	uint64_t record_by;
	struct prs_waits waits; /* the futex words threads were sampled blocked on */
	bool gil_meta;          /* meta gil_wait=1 written: GIL waits are told from lock waits */
	struct prs_kstack *kstack; /* kernel stacks (opts.kernel_stacks), NULL when not asked */
	char notes[512];        /* what the user should know of how it sampled (lines) */
};

/* ---- session.c ---- */

/* A new session without targets. Returns 0 or -errno with err set. */
int prs_session_new(enum prs_sampler_mode mode, const struct prs_sampler_opts *opts,
		    struct prs_recorder *rec, struct prs_sampler **out, struct prs_err *err);

/* Waits up to timeout_ns for a signal of prs_sampler_sigset(), acting on a user signal (not
 * SIGCHLD: the caller drains the events). */
void prs_session_wait_signal(struct prs_sampler *s, uint64_t timeout_ns);
/* Adds a target (taking ownership). Returns 0 or -ENOMEM (tg is then freed). */
int prs_session_add_target(struct prs_sampler *s, struct prs_target *tg);
/* True when every target has exited. */
bool prs_session_all_exited(const struct prs_sampler *s);
/* The target owning thread tid, and the thread (*t), or NULL. */
struct prs_target *prs_session_thread(const struct prs_sampler *s, pid_t tid, struct prs_thr **t);
/* The target whose leader is pid, or NULL. */
struct prs_target *prs_session_target(const struct prs_sampler *s, pid_t pid);
/* Frees the targets that exited, but the root (their Python statistics kept). */
void prs_session_drop_exited(struct prs_sampler *s);

/* ---- tree.c: the process tree (--subprocesses) ---- */

/* Records tg's command (/proc/PID/cmdline) in the profile from now on: when it is first seen
 * running its own program and after each exec. */
void prs_tree_record_command(struct prs_sampler *s, struct prs_target *tg);
/* tg forked (fork, vfork, or a clone of a process) the new process child: its target, its leader
 * NEW (its first stop not seen yet), unless its first stop came first. */
void prs_tree_forked(struct prs_sampler *s, struct prs_target *tg, pid_t child);
/* An unknown tid stopped: when it is a new process of the tree whose first stop came before its
 * parent's fork event, its target is made now; returns its leader (NEW), else NULL. */
struct prs_thr *prs_tree_early_stop(struct prs_sampler *s, pid_t tid);
/* Attach: seizes every process below the root, alive now (subprocesses only). Processes that
 * cannot be seized are skipped. Returns 0 or -ENOMEM. */
int prs_tree_attach(struct prs_sampler *s, struct prs_err *err);
/* Seizes the children of tg that are not targets yet (forked by a thread before it was seized,
 * or by a clone that sends no fork event), and theirs: each becomes a target (counted in
 * stats.processes_adopted). */
void prs_tree_adopt_children(struct prs_sampler *s, struct prs_target *tg);
/* During the detach: tg forked child; when child is still ours, its target waits for its stop to
 * detach it. */
void prs_tree_forked_at_detach(struct prs_sampler *s, struct prs_target *tg, pid_t child);
/* Without subprocesses: notes the CPU time of the root's waited-for children (stats). */
void prs_tree_note_children_cpu(struct prs_sampler *s);

/* Adds a line to s->notes (prs_sampler_notes). */
void prs_session_note(struct prs_sampler *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* ---- target.c ---- */

/* A new target for process pid (0: set later), with an empty thread table. NULL: out of memory. */
struct prs_target *prs_target_new(struct prs_sampler *s, pid_t pid);
/* The process tg is (a launched child is known once forked). */
void prs_target_set_pid(struct prs_target *tg, pid_t pid);
/* Frees tg (it must be detached). NULL is fine. */
void prs_target_free(struct prs_target *tg);
/* Refreshes the unwinder's maps when they are known to be stale (at most every 100 ms, but at
 * once after an exec). */
void prs_target_refresh_maps(struct prs_target *tg, uint64_t now_ns);
/* The profile mapping id of the unwinder's map containing pc, or PRS_NO_MAPPING. */
uint32_t prs_target_mapping_id(struct prs_sampler *s, struct prs_target *tg, uint64_t pc);
/* Forgets what belonged to the old image after an exec (the leader stays, in its new image; the
 * other threads of the table too, but when others_gone). */
void prs_target_exec(struct prs_target *tg, bool others_gone);
/* The leader exited with raw wait status status. */
void prs_target_exited(struct prs_target *tg, int status);

/* ---- target_python.c ---- */

/* Looks for CPython in tg (at start-up it may not be there yet: retried, at once when force). */
void prs_target_try_python(struct prs_sampler *s, struct prs_target *tg, uint64_t now, bool force);
/* A forked child tg starts with its parent's interpreter (prs_py_fork), found where it was. */
void prs_target_py_inherit(struct prs_sampler *s, struct prs_target *tg,
			   const struct prs_target *parent);
/* Reads the Python frames of every thread into tg->pyt. Returns 0, or -errno (npyt is then 0). */
int prs_target_py_sample(struct prs_sampler *s, struct prs_target *tg);
/*
 * The same read in two steps, for a target whose threads are stopped for it (ptrace): the walk
 * (raw frames and the code objects' heads, into tg->pyraw) while they are stopped, then, once
 * they run again, the naming into tg->pyt (code objects decoded, interned: half of the read's
 * time, which the stopped threads no longer wait for). prs_target_py_walk returns 0 or -errno
 * (npyt is then 0); prs_target_py_name_walked does nothing when no walk is waiting.
 */
int prs_target_py_walk(struct prs_sampler *s, struct prs_target *tg);
void prs_target_py_name_walked(struct prs_sampler *s, struct prs_target *tg);
/* Gives this tick's Python threads their threading names, re-read when due (between ticks, the
 * target running). A thread's name in the profile follows. */
void prs_target_py_names(struct prs_sampler *s, struct prs_target *tg);
/* The Python frames read this tick of thread tid, or NULL. */
const struct prs_py_thread *prs_target_py_thread(const struct prs_target *tg, pid_t tid);
/* Drops the reader (after an exec: it is looked for again). */
void prs_target_py_drop(struct prs_target *tg);

/* ---- newthreads.c ---- */

/* Seizes the threads of tg that its table does not hold (started since the last tick; tg seized),
 * and with subprocesses the children they may have forked untraced. */
void prs_newthreads_find(struct prs_sampler *s, struct prs_target *tg);

/* ---- events.c ---- */

/* Drains every pending waitpid() result, each handled by the target owning its tid. During a
 * tick (in_tick), interrupt stops of threads that owe one are sampled. Returns how many. */
int prs_events_drain(struct prs_sampler *s, bool in_tick);
/* Handles one waitpid() result. */
void prs_events_handle(struct prs_sampler *s, pid_t tid, int status, bool in_tick);
/* Stops every thread of every seized target and detaches, re-injecting any signal caught on
 * the way; gives up after 2 s. */
void prs_events_detach_all(struct prs_sampler *s);
/* tg's leader runs a new image (its exec event came, or it was found exec'ed untraced): what
 * belonged to the old one is forgotten, its command recorded; others_gone: every other thread of
 * the table with it (else they stay: found after the exec, or leaving by their exit events). Returns the leader's entry (its
 * life RUNNING unless job-control stopped; not resumed) or NULL. */
struct prs_thr *prs_events_new_image(struct prs_sampler *s, struct prs_target *tg, bool others_gone);
/* Resumes a thread in a ptrace-stop, delivering sig. Its life is the caller's to set. A thread
 * that vanished meanwhile is left to its exit event. */
void prs_events_resume(struct prs_thr *t, int sig);

/* ---- source_ptrace.c ---- */

/* t's interrupt stop arrived during the tick: take its sample (registers, state, snapshot), and
 * resume it or hold it for the Python read. */
void prs_ptrace_take_sample(struct prs_sampler *s, struct prs_target *tg, struct prs_thr *t);
/* t's owed stop arrived between ticks, the samples of ticks it waited through deferred to it
 * (struct prs_thr deferred_ns): takes them (they are of its moment: it has run no code since),
 * resumes it, and records them. */
void prs_ptrace_deferred_stop(struct prs_sampler *s, struct prs_target *tg, struct prs_thr *t);
/*
 * t owed the stop of our PTRACE_INTERRUPT and stopped for another trap instead (a clone or fork
 * event, a signal). That trap was the interrupt's: the kernel clears a pending interrupt at any
 * trap (kernel/signal.c ptrace_stop: "any trap clears pending STOP trap"), so no other stop may
 * come. tg is t's own target (of any process of the tree). While tg's tick is open, its sample
 * is taken in this stop (counted in tg's tick, not held for the Python read); t is RUNNING
 * after, and the caller's handler resumes it as the event requires.
 */
void prs_ptrace_other_trap(struct prs_sampler *s, struct prs_target *tg, struct prs_thr *t,
			   bool in_tick);

/* ---- preload_offcpu.c: the preload source's samples of sleeping threads ---- */

/* A preload target's off-CPU sampling between ticks. */
struct prs_offcpu {
	uint64_t last_list;     /* when the program's threads were last listed */
	uint64_t samples;       /* off-CPU thread-samples recorded (read, or kept and recorded again) */
	uint64_t runqueue;      /* periods recorded waiting for a CPU */
	bool refreshed;         /* the unwinder's maps were re-read this tick (once at most) */
};

/*
 * Unwinds a preload sample (regs, snap) of tg into s->pcs and s->frame_ids, re-reading the maps
 * once per tick (off->refreshed) when a PC is in no known module (a library loaded since).
 * Returns the frames.
 */
int prs_preload_unwind(struct prs_sampler *s, struct prs_target *tg, const struct prs_regs *regs,
		       const struct prs_snapshot *snap, struct prs_offcpu *off);
/*
 * One tick of tg's sleeping threads, without signalling them: each thread asleep in the kernel
 * is recorded with its state, syscall, native stack (from the SP and PC of its syscall file) and
 * Python frames; one at rest since its last sample, from that sample. Running threads are left
 * to the agent's CPU samples. The program's threads are listed every 100 ms.
 */
void prs_preload_offcpu(struct prs_sampler *s, struct prs_target *tg, uint64_t now_ns,
			struct prs_offcpu *off);

/* ---- asleep.c: a sleeping thread read without stopping it ---- */

/*
 * When t sleeps in the kernel now (/proc: its syscall file, its state letter): sets its state
 * (BLOCKED, or DISK in D), syscall and futex word, takes its snapshot (t->regs holds only RSP,
 * RIP, the syscall and its first argument; t->sampled when its SP was known), and returns true.
 * False for a thread running or runnable, a zombie, or gone. The caller tells whether it ran
 * during the reads (its schedstat).
 */
bool prs_asleep_read(struct prs_sampler *s, struct prs_target *tg, struct prs_thr *t);
/* Unwinds t's snapshot taken by prs_asleep_read (RBP guessed from the stack) into s->pcs and
 * s->frame_ids. Returns the frames (0 without a snapshot or an unwinder). */
int prs_asleep_unwind(struct prs_sampler *s, struct prs_target *tg, struct prs_thr *t,
		      struct prs_unwind_info *info);

/* ---- offcpu_rbp.c ---- */

/*
 * For a sample of which only RSP and RIP are known (regs, snap from RSP): sets regs' RBP to the
 * frame record found in the stack that makes the unwind whole, or 0 when the unwind is whole
 * without one or none does (the frames up to the first RBP-based one are right either way).
 * scratch: PRS_MAX_NATIVE_FRAMES PCs for the trial unwinds.
 */
void prs_offcpu_guess_rbp(struct prs_unwinder *uw, struct prs_regs *regs,
			  const struct prs_snapshot *snap, uint64_t *scratch);

/* ---- exit_acct.c ---- */

/* Thread tid of tg exited and is not reaped yet: stores its final kernel accounting (a THREAD
 * EXIT record) when opts.acct_exits. */
void prs_exit_acct_take(struct prs_sampler *s, const struct prs_target *tg, pid_t tid);

/* ---- diskwait.c ---- */

/*
 * Just after the interrupts of a tick: every thread of tg that has not stopped yet has its state
 * letter read; one in uninterruptible sleep (D, usually disk IO) is marked (t->disk_seen). A short
 * D wait (a 4 KiB O_DIRECT read, ~50 us) ends before the thread stops, and its stop alone would
 * show it running.
 */
void prs_diskwait_check(struct prs_sampler *s, struct prs_target *tg);
/* In t's interrupt stop, its state read from the registers: a thread seen in D before it stopped
 * and found running (its syscall returned meanwhile) was waiting on the disk: returns true and
 * sets the state and syscall. Clears the mark. */
bool prs_diskwait_apply(struct prs_thr *t);

/* ---- record.c ---- */

/*
 * Records a sample of t with state, syscall and flags from smp and the stack made of its native
 * frames (pcs and their frame ids, n, innermost first) merged with its Python frames of this tick
 * (pt, may be NULL). Keeps it for the next ticks when the thread is blocked.
 */
void prs_record_stack(struct prs_sampler *s, struct prs_target *tg, struct prs_thr *t,
		      uint64_t tick_ns, const uint64_t *pcs, const uint32_t *ids, int n,
		      const struct prs_py_thread *pt, struct prs_sample *smp);
/* The same with the kernel frames matched with kstop (a source that does not trace: the agent's
 * sample of a running thread); prs_record_stack matches them with t's ptrace stop, if any. */
void prs_record_stack_k(struct prs_sampler *s, struct prs_target *tg, struct prs_thr *t,
			uint64_t tick_ns, const uint64_t *pcs, const uint32_t *ids, int n,
			const struct prs_py_thread *pt, struct prs_sample *smp,
			const struct prs_kstop *kstop);
/* Counts the futex word of t's sample smp (the WAIT_ADDR records), if it waits on one. */
void prs_record_count_wait(struct prs_sampler *s, const struct prs_thr *t, const struct prs_sample *smp);
/* Unwinds one sample (regs, snap) of tg into s->pcs and s->frame_ids (interned with their
 * mappings), counting the unwind's time and errors. Returns the frames. */
int prs_record_unwind(struct prs_sampler *s, struct prs_target *tg, const struct prs_regs *regs,
		      const struct prs_snapshot *snap, struct prs_unwind_info *info);
/* Records t from its snapshot, if it has one (unwound now; extra_ns: its share of the tick's
 * costs outside its own stop), else from t->state alone; merged with its Python frames. */
void prs_record_thread(struct prs_sampler *s, struct prs_target *tg, struct prs_thr *t,
		       uint64_t tick_ns, uint64_t extra_ns);
/* A thread not stopped this tick, recorded from /proc (state letter, syscall) and its Python
 * frames alone. owed: it still owes the stop of this tick's interrupt, so it was not on a CPU
 * (a running thread stops within microseconds): found runnable, it was waiting for one. */
void prs_record_unstopped(struct prs_sampler *s, struct prs_target *tg, struct prs_thr *t,
			  uint64_t tick_ns, bool owed);

/* ---- reuse.c (the sampler's side of reuse-internal.h) ---- */

/* Decides how t is sampled this tick (t->reuse), reading its schedstat (t->tick_ss; in ptrace
 * mode always: the CPU balance compares it with the one after the stop). */
void prs_reuse_check(struct prs_sampler *s, struct prs_target *tg, struct prs_thr *t,
		     bool ptrace_mode);
/* Records t's kept sample again (PRS_REUSE_ALL), at the cost of cost_ns, standing for weight
 * periods (1; more where ticks were missed and the source knows the thread slept through them). */
void prs_reuse_record_all(struct prs_sampler *s, struct prs_target *tg, struct prs_thr *t,
			  uint64_t tick_ns, uint64_t cost_ns, uint32_t weight);
/* PRS_REUSE_NATIVE, after the Python read: if t stayed at rest through the checks and the read,
 * records its kept native frames merged with this tick's Python frames. Returns false when it ran
 * meanwhile (the caller records it as a thread that did not stop). */
bool prs_reuse_record_native(struct prs_sampler *s, struct prs_target *tg, struct prs_thr *t,
			     uint64_t tick_ns, uint64_t share_ns);
/* Keeps the native part of t's stopped sample just recorded (n frames in s->pcs and
 * s->frame_ids, unwound with info) when t was blocked and reuse is on. */
void prs_reuse_keep_native(struct prs_sampler *s, struct prs_target *tg, struct prs_thr *t, int n,
			   const struct prs_unwind_info *info);

#endif
