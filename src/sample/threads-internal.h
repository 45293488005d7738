/* SPDX-License-Identifier: MIT */
/*
 * The thread table of one target: every thread the sampler knows of one process, its life as
 * ptrace sees it (enum prs_thr_life), what this tick took of it, and its /proc files kept open.
 */
#ifndef PYRSPROF_SAMPLE_THREADS_INTERNAL_H
#define PYRSPROF_SAMPLE_THREADS_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "pyrsprof/profile.h"
#include "pyrsprof/task.h"
#include "pyrsprof/types.h"
#include "sample/balance-internal.h"
#include "sample/offtime-internal.h"
#include "sample/reuse-internal.h"

#define PRS_THR_MAX 4096 /* threads per target */
#define PRS_THR_DEFERRED_MAX 4 /* ticks whose sample a thread owes, at most */

/*
 * A thread's life as ptrace sees it, between waitpid() events. (While an event is handled the
 * thread is in a ptrace-stop; every handler resumes it before returning, but for HELD.)
 * In vm mode nothing is seized and every thread stays RUNNING.
 */
enum prs_thr_life {
	PRS_THR_RUNNING = 0,   /* running or asleep in the kernel: we owe it nothing, it owes no stop */
	PRS_THR_NEW,           /* a new process's leader, auto-attached by a fork; its first stop
				* (only resumed) not seen yet: it has run no code */
	PRS_THR_INTERRUPTED,   /* we sent PTRACE_INTERRUPT and have not seen its stop */
	PRS_THR_LATE,          /* interrupted and found in uninterruptible sleep (D): not waited for
				* this tick (its stop, if it comes during the tick, is still taken) */
	PRS_THR_HELD,          /* in our interrupt stop, sampled, kept stopped until the tick's
				* Python frames are read */
	PRS_THR_GROUP_STOPPED, /* job-control stopped (resumed with PTRACE_LISTEN: it stays stopped) */
};

struct prs_kthr;
struct prs_swthr;
struct prs_switches;

struct prs_thr {
	pid_t tid;
	enum prs_thr_life life;
	bool sampled;           /* has a snapshot (regs, stack) waiting to be unwound this tick */
	uint32_t name_sid;      /* last recorded name (string id), 0 = none */
	uint32_t py_name_sid;   /* the threading name, preferred to the kernel's comm; 0 = none */
	uint64_t t_interrupt, t_cont;
	/* When the last stop was asked for (PTRACE_INTERRUPT sent). A late stop's t_interrupt is
	 * moved to its snapshot (the wait for a CPU before it is not time stopped for us), but its
	 * switch into the stop came before that: the switch records tell our stops by this. */
	uint64_t t_asked;
	/* Ticks it was waiting for a CPU through (the last at deferred_ns), their sample taken from
	 * the stop it owes: it runs no code before that stop, so the stop is of their moment too
	 * (source_ptrace.c) */
	uint64_t deferred_ns;
	uint8_t ndeferred;
	enum prs_state state;   /* of this tick's sample, and its syscall */
	int syscall;
	int blocked_in;         /* the syscall of the last blocked sample, -1 after a running one */
	uint64_t wait_addr;     /* blocked in futex: the word it sleeps on (futex's first argument) */
	bool disk_seen;         /* found in D state after this tick's interrupt (diskwait.c) */
	/* Ticks ended while it was in the table (saturating). Its perf events (kernel stacks,
	 * switch records) wait until it has lived through one (prs_thr_old): most threads of a
	 * thread-per-request server are seen at one tick only, and an event opened then costs
	 * pyrsprof its open, mmap, munmap and close and the thread its kernel work at each switch,
	 * for little (a kernel-stack event gives frames from the next tick on). */
	uint16_t ticks;
	struct prs_kthr *kthr;  /* its kernel-stack event (kstack.c), NULL until it runs, old */
	struct prs_swthr *swthr; /* its context-switch records (switches.c), NULL until read, old */
	int schedstat_fd;       /* /proc/PID/task/TID/schedstat, kept open (-1: not open) */
	int stat_fd;            /* /proc/PID/task/TID/stat, kept open (-1: not open) */
	int syscall_fd;         /* /proc/PID/task/TID/syscall, kept open (-1: not open) */
	/* sleeping threads (reuse-internal.h) */
	struct prs_kept kept;   /* the last sample, while it may be recorded again */
	enum prs_reuse reuse;   /* this tick */
	struct prs_schedstat tick_ss; /* read at the start of this tick (tick_ss_ok) */
	bool tick_ss_ok;
	uint64_t check_ns;      /* this tick's time spent deciding reuse (part of its cost) */
	struct prs_cpu_balance bal;
	/* preload mode: its sleeps and waits for a CPU (preload_offcpu.c) */
	uint32_t last_stack;    /* stack id of its last sample, on a CPU (the agent's) or asleep */
	bool last_stack_ok;
	struct prs_offtime off; /* its time off a CPU, owed to the wall view */
	struct prs_regs regs;
	uint8_t *stack;         /* the stack snapshot, stack_bytes */
	size_t stack_len;
};

/* What every thread table of a session shares. */
struct prs_thr_common {
	size_t stack_bytes;     /* snapshot buffer per thread */
	int open_fds;           /* per-thread /proc files kept open, all tables (see PRS_KEPT_FDS) */
	uint64_t seen;          /* threads ever added */
	struct prs_switches *sw; /* switch records (NULL: not collected): stored as threads end */
};

struct prs_thr_table {
	pid_t pid;              /* the process (thread group) */
	struct prs_thr *v;      /* PRS_THR_MAX slots; v[0..n) used, in no particular order */
	size_t n;
	struct prs_thr_common *common;
};

/* Sets up an empty table of process pid (may be set later). Returns 0 or -ENOMEM. */
int prs_thr_table_init(struct prs_thr_table *tab, pid_t pid, struct prs_thr_common *common);
/* Removes every thread and frees the table. */
void prs_thr_table_release(struct prs_thr_table *tab);

/* The thread tid, or NULL. */
struct prs_thr *prs_thr_find(const struct prs_thr_table *tab, pid_t tid);
/* The thread tid, added (RUNNING, its snapshot buffer allocated) if new; NULL when the table is
 * full or out of memory. Does not move other entries. */
struct prs_thr *prs_thr_add(struct prs_thr_table *tab, pid_t tid);
/* Removes t (closing its kept files): the last entry moves into its slot. */
void prs_thr_remove(struct prs_thr_table *tab, struct prs_thr *t);
/* Removes every thread. */
void prs_thr_remove_all(struct prs_thr_table *tab);

/* True once t was in the table at the end of an earlier tick: its perf events may be opened. */
static inline bool prs_thr_old(const struct prs_thr *t)
{
	return t->ticks >= 1;
}

/* True while t owes us the stop of an INTERRUPT we sent (INTERRUPTED or LATE). */
bool prs_thr_interrupt_owed(const struct prs_thr *t);

/* Per-thread /proc reads through the kept descriptors. Return 0 or -errno. */
int prs_thr_schedstat(struct prs_thr_table *tab, struct prs_thr *t, struct prs_schedstat *ss);
int prs_thr_syscall(struct prs_thr_table *tab, struct prs_thr *t, struct prs_task_sys *sys);
/* The thread's state from its stat file's letter: R running, D in uninterruptible sleep (usually
 * IO), anything else blocked. */
enum prs_state prs_thr_letter_state(struct prs_thr_table *tab, struct prs_thr *t);

/*
 * Records the thread's name into prof when it is new or changed (threads often name themselves
 * after start): its threading name for a Python thread whose name could be read, else the
 * kernel's comm.
 */
void prs_thr_record_name(struct prs_thr_table *tab, struct prs_thr *t, struct prs_profile *prof);

#endif
