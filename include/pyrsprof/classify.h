/* SPDX-License-Identifier: MIT */
/*
 * What bounds the program: the time accounting of every thread (on-CPU, waiting for a CPU,
 * blocked by reason) built from a profile's samples and its accounting records
 * (prs_facts_build), and the verdict (prs_classify): the first rule that fires in the order of
 * the design (docs/classify.md §2), every other rule that fires as
 * "also", each with its measured value, threshold, source and confidence; CPU-bound split into
 * compute / memory-latency / memory-bandwidth when counters allow; cores used against threads;
 * and the lever in the playbook's terms.
 *
 * prs_classify is pure logic over struct prs_facts (tests build facts by hand). Nothing here is
 * thread-safe; nothing allocates but prs_facts_build (released by prs_facts_release).
 */
#ifndef PYRSPROF_CLASSIFY_H
#define PYRSPROF_CLASSIFY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pyrsprof/counters.h"
#include "pyrsprof/err.h"
#include "pyrsprof/machine.h"
#include "pyrsprof/profile.h"

/* Where a thread's time went. Append only (the reports name them). */
enum prs_reason {
	PRS_R_CPU,      /* on a CPU */
	PRS_R_RUNQ,     /* runnable, waiting for a CPU (includes CPU-quota throttling) */
	PRS_R_IO_DISK,  /* D state, file IO, fsync */
	PRS_R_IO_NET,   /* sockets, pipes, poll/epoll/select: network and event waits */
	PRS_R_GIL,      /* waiting for the Python GIL */
	PRS_R_LOCK,     /* futex and other locks that are not the GIL */
	PRS_R_SLEEP,    /* nanosleep, clock_nanosleep, pause, waiting for a signal */
	PRS_R_CHILD,    /* wait4/waitid: waiting for a child process */
	PRS_R_PAGING,   /* asleep in the kernel outside a syscall (page faults) */
	PRS_R_OTHER,    /* another blocking syscall, stopped, unknown */
	PRS_R_UNSEEN,   /* off-CPU (kernel accounting) in waits no sample caught: short waits */
	PRS_R__COUNT
};

/* Short name ("cpu", "runqueue", "io_disk", "io_net", "gil", "lock", "sleep", "child",
 * "paging", "other", "unseen") and a label for reports ("on-CPU", "waiting for a CPU", ...). */
const char *prs_reason_name(enum prs_reason r);
const char *prs_reason_label(enum prs_reason r);

/* Maps one sample to a reason (state, syscall, GIL-wait flag). */
enum prs_reason prs_sample_reason(const struct prs_sample *s);

struct prs_thread_facts {
	int32_t tid;
	int32_t pid, ppid;             /* its process and that one's parent (0: not known) */
	char name[64];
	double wall_s;                 /* time the thread existed in the recording */
	double t[PRS_R__COUNT];        /* seconds by reason; they sum to wall_s */
	double samples;                /* sample weight */
	double sampled[PRS_R__COUNT];  /* sample weight by reason (before kernel reconciliation) */
	bool python;                   /* some sample has Python frames */
	bool kernel;                   /* t[CPU] and t[RUNQ] come from kernel accounting */
	bool idle;                     /* an idle worker: left out of the verdict */
	int wait_syscall;              /* the syscall it blocked in most, or -1 */
	double wait_syscall_share;     /* of its samples */
	double gil_hold, gil_wait;     /* sample weight holding / waiting for the GIL */
	uint64_t nvcsw, nivcsw;        /* from kernel accounting when known */
	bool have_csw;
	/* the share of its on-CPU time in the kernel: stime / (utime + stime), the kernel's
	 * tick-sampled split (/proc stat, taskstats), as a ratio of the exact t[CPU] */
	bool have_system;
	double system_share;
	/* from perf switch records (SWITCH records) when collected */
	bool have_sw;
	uint64_t sw_preempt, sw_voluntary;  /* switch-outs: preempted, blocked (not our stops) */
	double sw_preempt_s, sw_voluntary_s; /* time from them to the next switch-in */
};

/* One run of `run --scaling` (meta "scaling"). */
#define PRS_SCALING_MAX 8
struct prs_scaling_run {
	char value[32];
	double wall_s, cpu_s;
	int rc;
};

/* The switch records of all threads, summed. */
struct prs_switch_facts {
	uint64_t preempt, voluntary, stops, lost;
	double preempt_s, voluntary_s;
};

/* Sums over the active threads A and the rule inputs (design note §2). */
struct prs_budget {
	double T;                      /* thread-seconds of A */
	double f[PRS_R__COUNT];        /* fractions of T */
	double f_io;                   /* disk + net/event + paging */
	double U;                      /* cores used: all threads' on-CPU time / W */
	double f_lock_python;          /* lock waits of Python threads (GIL waits when not told apart) */
	unsigned active, idle, python_active;
	double unattributed;           /* 1 - sum of f (rounding) */
};

#define PRS_FACTS_MAX_NOTES 12
/* A note: "WHAT: WHY" of a NOTE record's two strings, whole (acct.h) */
#define PRS_FACTS_NOTE (2 * PRS_ACCT_MAX_STR)

struct prs_facts {
	/* the recording */
	char command[512];
	char mode[16];             /* "run", "attach", or "" */
	double duration_s;         /* W */
	double rate_hz;
	double tick_s;             /* what one sample weight stands for: W over the ticks seen (the
				    * sampler's real period), else 1/rate; 0.01 when neither is known */
	bool complete;             /* the profile ended properly (not interrupted) */
	bool damaged;              /* not complete because the file is damaged mid-way (not cut) */
	double samples;            /* sample weight */
	uint64_t ticks, missed_ticks, read_errors; /* from the profile's meta when recorded */
	bool have_ticks;
	/* the machine */
	bool have_machine;
	struct prs_machine machine;
	unsigned ncpus;            /* N: CPUs the target may use */
	/* the host during the window */
	bool have_steal;
	double steal_share;        /* of the allowed CPUs' time */
	double idle_share;         /* idle share of the allowed CPUs (machine had spare CPUs) */
	/* the cgroup */
	bool have_cgroup, has_quota;
	int cg_version;
	double quota_cpus;         /* quota / period */
	double throttled_s;
	uint64_t nr_periods, nr_throttled;
	char cg_path[256];
	/* the process (kernel accounting over the window) */
	bool have_proc;
	double cpu_s, user_s, sys_s;
	uint64_t rss_peak_kb;
	uint64_t minflt, majflt, nvcsw, nivcsw;
	uint64_t read_bytes, write_bytes, rchar, wchar, syscr, syscw;
	bool have_faults, have_csw, have_io, have_rss;
	bool have_chars, have_syscalls; /* rchar/wchar, syscr/syscw measured (taskstats rounds them
					 * to 1024s: not kept; rusage has none) */
	bool have_switches;        /* perf switch records were collected (SWITCH records) */
	struct prs_switch_facts sw;
	unsigned processes, threads_seen;
	/* counters */
	struct prs_counter_set counters;
	int topdown;
	struct prs_cpu_metrics cpu;
	bool counters_read;
	/* the threads */
	struct prs_thread_facts *threads;
	size_t nthreads;
	bool gil_measured;         /* samples carry PRS_SAMPLE_GIL_WAIT (the sampler reports GIL waits) */
	bool gil_confirmed;        /* a WAIT_ADDR record resolves a waited-on address to the GIL */
	bool python;               /* Python frames were read */
	bool kernel_threads;       /* per-thread kernel accounting was used */
	bool runq_doubted;         /* run-queue samples were judged short blocks (CPUs were idle) */
	bool unseen_disk;          /* unseen off-CPU time was counted as disk IO (storage bytes) */
	double unseen_disk_s;      /* how much (thread-seconds) */
	struct prs_budget budget;
	/* on-CPU samples by their innermost frame (fractions): the Python interpreter (Python frames
	 * and the interpreter's own native code), other native code, the kernel */
	double cpu_python, cpu_native, cpu_kernel;
	/* software evidence for the CPU split (no PMU) */
	double copy_share;         /* of on-CPU samples: leaves in copy/fill kernels */
	char copy_top[96];
	double fresh_mbs;          /* minor faults/s * page size: freshly zeroed memory */
	bool have_wss;             /* --wss measured the working set */
	double wss_bytes;          /* the median working set of the windows */
	double wss_max_bytes;      /* the largest */
	double wss_window_s;
	unsigned wss_samples;
	double wss_floor_gbs;      /* (WSS - LLC) / window: DRAM traffic it proves (0: within the LLC
				    * or LLC unknown) */
	/* `run --scaling VAR=...`: the re-runs, in order */
	char scaling_var[64];
	struct prs_scaling_run scaling[PRS_SCALING_MAX];
	unsigned nscaling;
	/* what could not be collected, one line each */
	char notes[PRS_FACTS_MAX_NOTES][PRS_FACTS_NOTE];
	unsigned nnotes;
};

/*
 * Builds the facts of profile p: the per-thread accounting from its samples, reconciled with
 * its accounting records (kernel CPU and run-queue time where known), the process, host,
 * cgroup, machine and counter facts, and the budget over the active threads. Returns 0 or
 * -ENOMEM (err set). Release with prs_facts_release.
 */
int prs_facts_build(const struct prs_profile *p, struct prs_facts *f, struct prs_err *err);
void prs_facts_release(struct prs_facts *f);
/*
 * Recomputes f->budget (active/idle threads, fractions, U) from f->threads and the process
 * facts. prs_facts_build calls it; tests that build facts by hand call it too.
 */
void prs_facts_budget(struct prs_facts *f);
/* Reads the `--scaling` runs from p's meta into f (src/classify/scaling.c). */
void prs_facts_scaling(const struct prs_profile *p, struct prs_facts *f);
/* The evidence line of the scaling runs of f (first against last): 1 and buf set, or 0 when
 * there is nothing to compare (fewer than 2 runs, a failed run, values not growing numbers). */
int prs_scaling_evidence(const struct prs_facts *f, char *buf, size_t size);
/* Adds a note (one line) to f. */
void prs_facts_note(struct prs_facts *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- the verdict ---- */

enum prs_rule {
	PRS_RULE_IO,        /* 1 IO/latency-bound */
	PRS_RULE_GIL,       /* 2 GIL-serialized */
	PRS_RULE_LOCK,      /* 3 lock-contended */
	PRS_RULE_THROTTLED, /* 4 CPU-quota-throttled */
	PRS_RULE_SATURATED, /* 5 CPU-saturated */
	PRS_RULE_SLEEP,     /* 6 sleep-dominated */
	PRS_RULE_CPU,       /* 7 CPU-bound */
	PRS_RULE_WAIT,      /* 8 none of the above: the largest share is another wait */
	PRS_RULE__COUNT
};

enum prs_confidence { PRS_CONF_LOW = 1, PRS_CONF_MEDIUM = 2, PRS_CONF_HIGH = 3 };
const char *prs_confidence_name(int c); /* "low", "medium", "high" */

/* The rule table: id, verdict label, the measured quantity, its threshold, its source. */
struct prs_rule_def {
	const char *id;        /* "io", "gil", "lock", "throttled", "saturated", "sleep", "cpu", "wait" */
	const char *verdict;   /* "IO/latency-bound", ... */
	const char *metric;    /* "f_io", ... */
	double threshold;
	const char *condition; /* the full condition, as text */
	const char *source;    /* where the threshold and the signal come from */
	const char *lever;     /* the playbook's lever */
};
const struct prs_rule_def *prs_rule_def(enum prs_rule r);

struct prs_rule_hit {
	enum prs_rule rule;
	double value;          /* the measured quantity */
	double threshold;
	int confidence;        /* enum prs_confidence */
	char label[96];        /* the verdict with its sub-label ("IO/latency-bound (disk)") */
	char detail[320];      /* the evidence, one line */
};

/* CPU-bound split (design note §3). */
enum prs_cpu_split {
	PRS_SPLIT_NOT_MEASURED, /* no PMU, or counters too multiplexed */
	PRS_SPLIT_COMPUTE,
	PRS_SPLIT_MEMORY_LATENCY,
	PRS_SPLIT_MEMORY_BANDWIDTH,
	PRS_SPLIT_MEMORY,       /* memory-bound, latency vs bandwidth not told (no calibration) */
};
const char *prs_cpu_split_name(int s); /* "not measured", "compute", "memory-latency", ... */

#define PRS_VERDICT_MAX_ALSO 8
#define PRS_VERDICT_MAX_EVIDENCE 8

struct prs_verdict {
	bool have;                 /* false: no samples to judge */
	struct prs_rule_hit primary;
	struct prs_rule_hit also[PRS_VERDICT_MAX_ALSO];
	unsigned nalso;
	/* CPU split (when the primary or an "also" is CPU-bound) */
	int split;                 /* enum prs_cpu_split */
	int split_confidence;
	char split_detail[PRS_ACCT_MAX_STR + 256]; /* quotes the machine's pmu_why whole */
	char evidence[PRS_VERDICT_MAX_EVIDENCE][240]; /* software evidence lines (no PMU) */
	unsigned nevidence;
	/* parallelism */
	double cores_used;         /* U */
	unsigned threads_active;
	unsigned cpus;             /* N */
	double efficiency;         /* U / min(active, N) */
	/* the --scaling runs' reading (prs_scaling_evidence), whatever the verdict: more threads
	 * not helping confirms a GIL, lock or saturation verdict as much as it qualifies a CPU one;
	 * "" without runs to compare */
	char scaling[512];
	/* qualifiers: steal, throttling, sampling quality */
	char qualifiers[4][240];
	unsigned nqualifiers;
	char lever[320];
};

/* Whether the process's active threads wanted more than 0.9 x the CPUs it may use (its own
 * threads oversubscribe them); false: other processes kept the CPUs busy. */
bool prs_oversubscribed(const struct prs_facts *f);

/* The verdict of f (pure logic; f->budget must be current). */
void prs_classify(const struct prs_facts *f, struct prs_verdict *v);

#endif
