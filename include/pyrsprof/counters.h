/* SPDX-License-Identifier: MIT */
/*
 * Counters behind one interface with two backends:
 * - perf: perf_event_open(2) counting the target (software events always; hardware events,
 *   Intel top-down "perf metrics" and AMD Zen 4/5 pipeline events when the PMU allows), in
 *   groups, each read with its enabled and running times so multiplexed counts are scaled and
 *   their running share shown. The syscall is injectable, so failures are tested.
 * - replay: counts recorded earlier as JSON (tests/fixtures/counters/NAME.json; format in
 *   docs/classify.md), so the counter path and the formulas are tested on a machine without a
 *   PMU and a recording can be given counters for a test (PYRSPROF_COUNTERS_REPLAY=FILE).
 * Counters are named as perf names them ("task-clock", "cycles", "slots", "topdown-retiring",
 * "int_misc.recovery_cycles:c1:e", "ls_not_halted_cyc", ...); the formulas (prs_cpu_metrics)
 * look them up by name. Nothing here is thread-safe.
 */
#ifndef PYRSPROF_COUNTERS_H
#define PYRSPROF_COUNTERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "pyrsprof/acct.h"
#include "pyrsprof/err.h"

#define PRS_MAX_COUNTERS 32
#define PRS_COUNTER_NAME 48
/* A counter's explanation: whole in an accounting string (it is stored as one, acct.h). */
#define PRS_PERF_WHY PRS_ACCT_MAX_STR

struct prs_counter {
	char name[PRS_COUNTER_NAME];
	int group;          /* counters of one group are scheduled together; the first is the leader */
	uint32_t type;      /* perf_event_attr.type */
	uint64_t config;    /* perf_event_attr.config */
	bool hardware;      /* needs the PMU (its failure tells the PMU state) */
	/* the reading (summed over the target's threads for attach) */
	bool ok;
	uint64_t value, enabled_ns, running_ns;
	int err;            /* negative errno when it could not be opened or read */
	char why[PRS_PERF_WHY]; /* then: the one-line explanation (prs_counter_explain) */
};

struct prs_counter_set {
	struct prs_counter c[PRS_MAX_COUNTERS];
	size_t n;
};

/* Appends a counter spec (name, group, type, config). Returns it, or NULL when the set is full. */
struct prs_counter *prs_counter_add(struct prs_counter_set *set, const char *name, int group,
				    uint32_t type, uint64_t config, bool hardware);
/* The counter of that name that was read, or NULL. */
const struct prs_counter *prs_counter_find(const struct prs_counter_set *set, const char *name);
/*
 * The count scaled for multiplexing (value * enabled / running), and *share (may be NULL) =
 * running / enabled. Returns false when the counter is missing, failed or never ran.
 */
bool prs_counter_scaled(const struct prs_counter_set *set, const char *name, double *value,
			double *share);

/* Who asks perf_event_open: what decides whether a refusal (EACCES/EPERM) is the paranoid
 * level's or a filter's. */
struct prs_perf_who {
	int paranoid;       /* kernel.perf_event_paranoid */
	bool privileged;    /* CAP_PERFMON or CAP_SYS_ADMIN, effective, in the initial user namespace */
	bool seccomp;       /* runs under a seccomp filter (/proc/self/status Seccomp: 2) */
};

/* pyrsprof's own (/proc/sys/kernel/perf_event_paranoid, /proc/self/status, /proc/self/uid_map). */
void prs_perf_who_read(struct prs_perf_who *w);

/*
 * One line, "WHAT" then "not permitted ..." with the remedy that fits a refusal with errno e
 * (EACCES/EPERM) of a request an unprivileged process may make up to paranoid level allowed_at
 * (2: counting its own child in user space; 1: kernel samples): the level (run as root, grant
 * CAP_PERFMON, the sysctl), else a seccomp filter (the container's profile: root does not help),
 * else a security module. Fits in PRS_PERF_WHY with a what of PRS_COUNTER_NAME + 1 bytes.
 */
const char *prs_perf_refusal(const struct prs_perf_who *w, int allowed_at, const char *what, int e,
			     char *buf, size_t size);

/*
 * One line explaining a failure of counter c (hardware or not) with errno e (negative or
 * positive), with the fix where there is one: ENOENT/EOPNOTSUPP on a hardware counter = no PMU
 * (a VM without a virtual PMU); EACCES/EPERM = not permitted (prs_perf_refusal: by who's
 * paranoid level, a seccomp filter or a security module, and what to do); EINVAL, EMFILE,
 * ESRCH, ENODEV. Writes into buf; returns buf.
 */
const char *prs_counter_explain(const struct prs_counter *c, int e, const struct prs_perf_who *who,
				char *buf, size_t size);

/* kernel.perf_event_paranoid, or 2 when it cannot be read. */
int prs_perf_paranoid(void);

/* ---- backends ---- */

struct prs_counter_backend {
	const char *name; /* "perf" or "replay" */
	/* Opens the counters of set for the threads tids (n of them; each inherits to the threads it
	 * creates). A counter that cannot be opened gets err and why, the others are still opened.
	 * Returns 0, or a negative errno when none could be opened at all (err set). */
	int (*open)(struct prs_counter_backend *b, const pid_t *tids, size_t n,
		    struct prs_counter_set *set, struct prs_err *err);
	/* Reads every open counter into set (ok, value, enabled_ns, running_ns). */
	int (*read)(struct prs_counter_backend *b, struct prs_counter_set *set);
	/* Closes the counters and frees b. NULL is fine through prs_counter_backend_free. */
	void (*free)(struct prs_counter_backend *b);
	void *ctx;
	int topdown; /* replay: enum prs_topdown_kind of the recorded counts (perf: 0) */
};

/* perf_event_open's signature, for injecting failures in tests. */
typedef long (*prs_perf_open_fn)(void *attr, pid_t pid, int cpu, int group_fd, unsigned long flags);

/*
 * The perf backend. open_fn NULL = the real syscall. Returns NULL when out of memory.
 * Counters count from open to read (user and kernel time; when the kernel part is refused with
 * EACCES, a counter is opened again for user space only and its explanation says so).
 */
struct prs_counter_backend *prs_counter_perf_new(prs_perf_open_fn open_fn);

/*
 * The replay backend over a JSON file: {"topdown": "intel" | "amd-zen4" | "amd-zen5" | "none",
 * "paranoid": N, "counters": [{"name": N, "value": V, "enabled_ns": E, "running_ns": R,
 * "group": G, "hardware": B} or {"name": N, "errno": "ENOENT", "hardware": B}, ...]}
 * (docs/classify.md). open() fills the set with every counter of the file (the specs asked for
 * are replaced: a replay is what was read); failures get their explanation as from the perf
 * backend. Returns NULL with err set when the file cannot be read or is malformed.
 */
struct prs_counter_backend *prs_counter_replay_new(const char *path, struct prs_err *err);

void prs_counter_backend_free(struct prs_counter_backend *b);

/*
 * The counters pyrsprof opens on this machine: task-clock always (the software group); cycles,
 * instructions, cache references and misses, branch misses when hardware is true; plus the
 * top-down group this CPU has (Intel perf metrics from sysfs, AMD Zen 4/5 pipeline events).
 * *topdown gets enum prs_topdown_kind.
 */
void prs_counter_default_set(struct prs_counter_set *set, bool hardware, int *topdown);

enum prs_topdown_kind {
	PRS_TOPDOWN_NONE = 0,
	PRS_TOPDOWN_INTEL = 1,    /* perf metrics: slots + topdown-* (Icelake and later) */
	PRS_TOPDOWN_AMD_ZEN4 = 2, /* pipeline utilization, 6 dispatch slots per cycle */
	PRS_TOPDOWN_AMD_ZEN5 = 3, /* the same with 8 slots */
};

/*
 * Whether this machine's PMU lets pyrsprof open a hardware counter: opens "cycles" on itself.
 * Returns enum prs_pmu_state; *errnum gets the errno when it failed (0 otherwise) and why its
 * explanation.
 */
int prs_pmu_probe(prs_perf_open_fn open_fn, int *errnum, char *why, size_t size);

/* Counter readings as COUNTER accounting records (id 0: the process). */
void prs_counter_to_acct(const struct prs_counter *c, struct prs_acct *out);
/* And back (the classifier reads a saved profile). */
void prs_counter_from_acct(const struct prs_acct *a, struct prs_counter *out);

/* ---- what the counts say about the CPU (formulas with their sources: docs/classify.md) ---- */

struct prs_cpu_metrics {
	bool have_ipc;
	double ipc;            /* instructions / cycles */
	bool have_l1;          /* top-down level 1 (fractions of pipeline slots, summing to 1) */
	double retiring, bad_spec, frontend, backend;
	const char *l1_source; /* "intel perf metrics", "amd zen4 pipeline", ... */
	bool have_mem;         /* memory-bound fraction of slots (backend split) */
	double memory_bound, core_bound;
	bool have_llc;
	double llc_miss_bytes; /* 64 * cache-misses: a floor on DRAM traffic (prefetches uncounted) */
	double min_share;      /* lowest running/enabled of the counters used (1 = no multiplexing) */
	size_t used;           /* counters used by the metrics above */
};

/* Computes what the counters of set allow. Never fails: missing counters leave have_* false. */
void prs_cpu_metrics(const struct prs_counter_set *set, int topdown, struct prs_cpu_metrics *m);

#endif
