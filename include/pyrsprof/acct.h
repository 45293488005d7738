/* SPDX-License-Identifier: MIT */
/*
 * The accounting facts a recording keeps besides its samples, for the classifier (classify.h):
 * the machine, the host's CPU time (steal), the cgroup's CPU quota and throttling, the process
 * and its threads as the kernel counts them (CPU, run-queue wait, context switches, IO bytes,
 * faults, RSS peak), counter readings, and the futex addresses threads waited on. Each is one
 * struct prs_acct, stored in profile.pyrs as an accounting record (types 11..19,
 * docs/pyrs-format.md) through prs_acct_store() and read back with prs_acct_load().
 *
 * A record is a type, a phase (when it was taken), an id (a pid or tid, else 0), a set of
 * numeric fields of which any may be missing (`have` says which: "not measured" is never
 * written as 0), and up to PRS_ACCT_MAX_STRS strings. Kernel counters are stored as the
 * snapshots read (START at the beginning of the recording, END at its end, EXIT when a thread
 * or the process ended): the classifier subtracts.
 *
 * Who writes what (see docs/classify.md, "Collection"):
 * - src/cli (record.c through collect.c), outside the sampler loop: MACHINE, SYSTEM, CGROUP and
 *   PROCESS at START and END, THREAD at START (attach) and END for the threads alive then,
 *   PROCESS/THREAD at EXIT from taskstats (root) or the child's rusage, COUNTER at END, NOTE.
 * - the sampler (hooks, wired in later): THREAD at EXIT for each thread that exits while
 *   traced (prs_acct_read_thread() at PTRACE_EVENT_EXIT), WAIT_ADDR per thread and futex address.
 *
 * Nothing here is thread-safe or async-signal-safe; nothing is on the sampling hot path.
 */
#ifndef PYRSPROF_ACCT_H
#define PYRSPROF_ACCT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>

#include "pyrsprof/err.h"
#include "pyrsprof/profile.h"

/* Record types (profile.pyrs). Append only: never renumber. */
enum prs_acct_type {
	PRS_ACCT_MACHINE = 11,  /* the machine: cores, caches, memory, calibrated bandwidth, PMU */
	PRS_ACCT_SYSTEM = 12,   /* /proc/stat CPU times of the CPUs the target may use */
	PRS_ACCT_CGROUP = 13,   /* the target's cgroup: CPU quota and throttling */
	PRS_ACCT_PROCESS = 14,  /* the process as the kernel counts it (id = pid) */
	PRS_ACCT_THREAD = 15,   /* one thread as the kernel counts it (id = tid) */
	PRS_ACCT_COUNTER = 16,  /* one counter reading (id = tid, or 0 for the whole process) */
	PRS_ACCT_WAIT_ADDR = 17, /* futex address a thread was seen waiting on (id = tid) */
	PRS_ACCT_NOTE = 18,     /* what could not be collected, and why */
	PRS_ACCT_SWITCH = 19,   /* one thread's context switches from perf records (id = tid) */
};

/* When a snapshot was taken. */
enum prs_acct_phase {
	PRS_PHASE_START = 0, /* when sampling began */
	PRS_PHASE_END = 1,   /* when sampling ended (the thread or process was alive) */
	PRS_PHASE_EXIT = 2,  /* when the thread or process exited (its final counts) */
};

#define PRS_ACCT_MAX_FIELDS 48
#define PRS_ACCT_MAX_STRS 4
#define PRS_ACCT_MAX_STR 256 /* bytes of one string kept, NUL included */

struct prs_acct {
	uint8_t type;  /* enum prs_acct_type */
	uint8_t phase; /* enum prs_acct_phase */
	int64_t id;
	uint64_t have; /* bit i: v[i] was measured */
	uint64_t v[PRS_ACCT_MAX_FIELDS];
	uint32_t nstr;
	char str[PRS_ACCT_MAX_STRS][PRS_ACCT_MAX_STR];
};

/* ---- fields of each type (indexes into v; append only) ---- */

/* MACHINE. Strings: 0 the CPU model, 1 the calibration key, 2 the PMU message. */
enum prs_mach_field {
	PRS_MACH_CPUS_ONLINE,
	PRS_MACH_CPUS_ALLOWED, /* CPUs in the target's affinity mask */
	PRS_MACH_L1D_BYTES, PRS_MACH_L2_BYTES, PRS_MACH_LLC_BYTES,
	PRS_MACH_MEM_BYTES,
	PRS_MACH_BW_ALL_MBS,   /* calibrated peak memory bandwidth, all allowed CPUs (MB/s) */
	PRS_MACH_BW_ONE_MBS,   /* the same from one CPU */
	PRS_MACH_PMU,          /* enum prs_pmu_state */
	PRS_MACH_PMU_ERRNO,    /* the errno of the failed hardware counter open */
	PRS_MACH_TOPDOWN,      /* enum prs_topdown_kind: which top-down metrics the CPU has */
	PRS_MACH_CALIBRATED_AT, /* Unix time of the calibration */
	PRS_MACH_PAGE_SIZE,
	PRS_MACH_CLK_TCK,
	PRS_MACH_PARANOID_PLUS1, /* kernel.perf_event_paranoid + 1 (it can be -1) */
	PRS_MACH__COUNT
};

/* SYSTEM: /proc/stat CPU times (clock ticks) summed over the CPUs the target may use. */
enum prs_sys_field {
	PRS_SYS_MONO_NS, /* CLOCK_MONOTONIC when read */
	PRS_SYS_USER, PRS_SYS_NICE, PRS_SYS_SYSTEM, PRS_SYS_IDLE, PRS_SYS_IOWAIT, PRS_SYS_IRQ,
	PRS_SYS_SOFTIRQ, PRS_SYS_STEAL,
	PRS_SYS_NCPUS,   /* CPUs summed */
	PRS_SYS_CLK_TCK,
	PRS_SYS__COUNT
};

/* CGROUP. Strings: 0 the cgroup path (as in /proc/PID/cgroup), 1 the directory read. */
enum prs_cg_field {
	PRS_CG_MONO_NS,
	PRS_CG_VERSION,      /* 1 or 2 */
	PRS_CG_QUOTA_US,     /* CPU quota per period (missing: no quota, "max") */
	PRS_CG_PERIOD_US,
	PRS_CG_NR_PERIODS, PRS_CG_NR_THROTTLED, PRS_CG_THROTTLED_US,
	PRS_CG_USAGE_US,     /* CPU time used by the cgroup */
	PRS_CG_DEPTH_UP,     /* levels above the target's own cgroup where the quota was found */
	PRS_CG__COUNT
};

/* PROCESS and THREAD. All counters are cumulative since the task started. */
enum prs_task_field {
	PRS_TASK_MONO_NS,     /* CLOCK_MONOTONIC when read */
	PRS_TASK_SOURCE,      /* enum prs_acct_source */
	PRS_TASK_CPU_NS,      /* on-CPU time: schedstat sum_exec_runtime / taskstats run_real */
	PRS_TASK_RUNQ_NS,     /* runnable, waiting for a CPU: schedstat run_delay (includes CPU-quota
			       * throttling, measured: docs/classify.md) */
	PRS_TASK_SLICES,      /* times given a CPU */
	PRS_TASK_UTIME_NS, PRS_TASK_STIME_NS, /* user / kernel CPU (clock-tick resolution) */
	PRS_TASK_NVCSW, PRS_TASK_NIVCSW,      /* voluntary / involuntary context switches */
	PRS_TASK_MINFLT, PRS_TASK_MAJFLT,
	PRS_TASK_RCHAR, PRS_TASK_WCHAR,       /* bytes read/written by syscalls (any fd) */
	PRS_TASK_READ_BYTES, PRS_TASK_WRITE_BYTES, /* bytes the storage layer fetched/sent */
	PRS_TASK_SYSCR, PRS_TASK_SYSCW,
	PRS_TASK_RSS_KB, PRS_TASK_RSS_PEAK_KB, /* process only: VmRSS, VmHWM (or ru_maxrss) */
	PRS_TASK_THREADS,                      /* process only: threads alive */
	PRS_TASK_BLKIO_DELAY_NS,               /* delay accounting (only if kernel.task_delayacct=1) */
	PRS_TASK_START_TICKS,                  /* start time since boot, clock ticks (stat field 22) */
	PRS_TASK_INBLOCK, PRS_TASK_OUBLOCK,    /* rusage block operations */
	/* process only, with --wss (include/pyrsprof/wss.h): the median and largest working set of
	 * the windows */
	PRS_TASK_WSS_BYTES, PRS_TASK_WSS_WINDOW_NS, PRS_TASK_WSS_SAMPLES,
	PRS_TASK_WSS_CLEAR_NS,                 /* the longest clear_refs write (the target's cost) */
	PRS_TASK_WSS_MAX_BYTES,
	PRS_TASK__COUNT
};

enum prs_acct_source {
	PRS_SRC_PROC = 1,      /* /proc files */
	PRS_SRC_RUSAGE = 2,    /* wait4/getrusage of the reaped child */
	PRS_SRC_TASKSTATS = 3, /* the taskstats exit message */
	PRS_SRC_SAMPLER = 4,   /* the sampler's hook at the thread's exit */
};

/* COUNTER. Strings: 0 the counter's name ("task-clock", "cycles", "topdown-retiring"),
 * 1 when it failed: the one-line explanation. */
enum prs_ctr_field {
	PRS_CTR_VALUE,       /* raw count (not scaled) */
	PRS_CTR_ENABLED_NS,  /* time_enabled */
	PRS_CTR_RUNNING_NS,  /* time_running: less than enabled when the PMU multiplexed */
	PRS_CTR_ERRNO,       /* set when the counter could not be opened or read */
	PRS_CTR_GROUP,       /* counters of one group were scheduled together */
	PRS_CTR_TYPE, PRS_CTR_CONFIG, /* perf_event_attr type and config */
	PRS_CTR__COUNT
};

/* WAIT_ADDR (written by the sampler): a futex address thread `id` was sampled waiting on. */
enum prs_wait_field {
	PRS_WAIT_UADDR,
	PRS_WAIT_SAMPLES,
	PRS_WAIT_FLAGS, /* PRS_WAIT_F_* */
	PRS_WAIT__COUNT
};
#define PRS_WAIT_F_GIL 1u /* the address is the GIL's (resolved in the target's _PyRuntime) */

/* SWITCH (written by the sampler, src/sample/switches-internal.h): a thread's PERF_RECORD_SWITCH
 * records over the recording, at its EXIT or at the END. Times in ns. */
enum prs_sw_field {
	PRS_SW_PREEMPT,       /* switch-outs while runnable: preempted */
	PRS_SW_PREEMPT_NS,    /* time from those to the next switch-in: waiting for a CPU */
	PRS_SW_VOLUNTARY,     /* switch-outs of a blocked thread, but the sampler's stops */
	PRS_SW_VOLUNTARY_NS,  /* time from those to the next switch-in (blocked, then woken) */
	PRS_SW_STOPS,         /* switch-outs into the sampler's own ptrace stops */
	PRS_SW_STOPS_NS,
	PRS_SW_LOST,          /* records lost (the ring was full): the counts are a floor */
	PRS_SW_FIRST_NS, PRS_SW_LAST_NS, /* CLOCK_MONOTONIC of the first and last record */
	PRS_SW__COUNT
};

/* NOTE. Strings: 0 what (e.g. "taskstats", "cgroup", "counters"), 1 the one-line reason. */
enum prs_note_field {
	PRS_NOTE_ERRNO,
	PRS_NOTE__COUNT
};

enum prs_pmu_state {
	PRS_PMU_UNKNOWN = 0,
	PRS_PMU_OK = 1,            /* hardware counters open */
	PRS_PMU_NONE = 2,          /* ENOENT/EOPNOTSUPP: no PMU (a VM without a virtual PMU) */
	PRS_PMU_NOT_PERMITTED = 3, /* EACCES/EPERM: perf_event_paranoid or CAP_PERFMON */
	PRS_PMU_ERROR = 4,         /* another errno */
};

/* ---- the record ---- */

/* Sets a up as an empty record of type, phase and id. */
void prs_acct_init(struct prs_acct *a, enum prs_acct_type type, enum prs_acct_phase phase, int64_t id);
/* Stores v as field f (f < PRS_ACCT_MAX_FIELDS; ignored otherwise). */
void prs_acct_set(struct prs_acct *a, unsigned f, uint64_t v);
/* Returns true and *v when field f was measured. */
bool prs_acct_get(const struct prs_acct *a, unsigned f, uint64_t *v);
/* Field f, or dflt when it was not measured. */
uint64_t prs_acct_val(const struct prs_acct *a, unsigned f, uint64_t dflt);
/* Appends a string (cut to PRS_ACCT_MAX_STR - 1 bytes; ignored past PRS_ACCT_MAX_STRS). */
void prs_acct_str(struct prs_acct *a, const char *s);

/*
 * Payload encoding (docs/pyrs-format.md, types 11..19): phase, id (zigzag), have, then one
 * varint per set bit of have in bit order, then the string count and each string as a length
 * and its bytes. Encodes a into out (at most PRS_ACCT_REC_MAX bytes); returns the length.
 */
size_t prs_acct_encode(const struct prs_acct *a, uint8_t *out);
/* Decodes a payload of type. Fields and strings past what this version knows are skipped.
 * Returns 0 or -EINVAL (malformed: lengths past the payload, too many strings). */
int prs_acct_decode(uint8_t type, const uint8_t *data, size_t len, struct prs_acct *a);

/* Appends a to p as an accounting record. 0, -EINVAL or -ENOMEM. */
int prs_acct_store(struct prs_profile *p, const struct prs_acct *a);

/*
 * Decodes every accounting record of p into *out (a new array, free() it; NULL when none), *n
 * entries. Malformed records are skipped and counted in *bad (may be NULL). Returns 0 or -ENOMEM.
 */
int prs_acct_load(const struct prs_profile *p, struct prs_acct **out, size_t *n, size_t *bad);

/* ---- collectors (/proc and friends) ---- */

/*
 * A thread of pid as /proc/PID/task/TID/{schedstat,stat,status,io} show it now: CPU and
 * run-queue time, slices, user/system time, context switches, faults, IO. What a file does not
 * give (io needs ptrace access) is left unset. Returns 0, or -ESRCH when the thread is gone.
 * The sampler's hook at a thread's exit (PTRACE_EVENT_EXIT, before the thread is released) is
 * this call with phase PRS_PHASE_EXIT.
 */
int prs_acct_read_thread(pid_t pid, pid_t tid, enum prs_acct_phase phase, struct prs_acct *out);

/* The process as /proc/PID/{stat,status,io} show it (all its threads, the dead ones included:
 * CPU, faults, IO; RSS and its peak; threads alive). 0 or -ESRCH. */
int prs_acct_read_process(pid_t pid, enum prs_acct_phase phase, struct prs_acct *out);

/* A reaped child's rusage (RUSAGE_CHILDREN after it was the only child reaped) as an EXIT
 * snapshot of process pid. */
void prs_acct_from_rusage(pid_t pid, const struct rusage *ru, struct prs_acct *out);

/* /proc/stat CPU times summed over the CPUs in the affinity mask of pid (all online CPUs if it
 * cannot be read). 0 or -errno. */
int prs_acct_read_system(pid_t pid, enum prs_acct_phase phase, struct prs_acct *out);

/*
 * pid's cgroup (v2, or v1's cpu controller): the nearest cgroup, from its own up, that has a CPU
 * quota, with its cpu.stat throttling counters; the target's own cgroup, with no quota fields,
 * when none has one. Returns 0, -ENOENT (no cgroup with a CPU controller found) or -errno.
 */
int prs_acct_read_cgroup(pid_t pid, enum prs_acct_phase phase, struct prs_acct *out);

/* The cgroup read by prev again (the same directory, e.g. once the target is gone). 0 or -errno. */
int prs_acct_cgroup_again(const struct prs_acct *prev, enum prs_acct_phase phase, struct prs_acct *out);

/* A NOTE record: what (e.g. "taskstats") could not be collected, and why (one line). */
void prs_acct_note(struct prs_acct *out, const char *what, int errnum, const char *why);

#endif
