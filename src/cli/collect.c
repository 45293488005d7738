/* SPDX-License-Identifier: MIT */
/*
 * The classifier's collection during `run` and `attach`, all of it outside the sampler's
 * per-tick work: snapshots at the start and the end, the counters (opened once, read once), and
 * the taskstats exit messages drained from the once-a-second callback. What cannot be collected
 * is kept as a NOTE record with its reason.
 */
#include "cli/collect.h"

#include <errno.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "cli/cli.h"
#include "pyrsprof/acct.h"
#include "pyrsprof/counters.h"
#include "pyrsprof/machine.h"
#include "pyrsprof/task.h"
#include "pyrsprof/taskstats.h"
#include "pyrsprof/util.h"
#include "pyrsprof/wss.h"

#include "util/banned.h"

#define MAX_TIDS 4096

/* Thread ids, sorted, each once. */
struct tidset {
	int32_t *v;
	size_t n, cap;
	size_t scanned; /* p->samples read into it (appended to only, in a recording: aggregate.c) */
};

struct cli_collect {
	pid_t pid;
	struct prs_profile *p;   /* the recording's (cli_collect_start) */
	struct prs_taskstats *ts;
	size_t prune_at;         /* exits kept when they are pruned next (prune_exits) */
	struct tidset sampled;   /* the tids of the samples so far */
	struct prs_err ts_err;
	struct prs_counter_backend *ctr;
	struct prs_counter_set set;
	struct prs_err ctr_err;
	bool ctr_open;
	/* the software counters handed over to the process's CPU clock (counters_handoff) */
	bool handed;
	uint64_t handed_cpu_ns;  /* the process's CPU clock then */
	double handed_s, churn_per_s;
	uint64_t churn_exits;    /* the target's thread exits at the last check */
	double churn_s;          /* ... and when */
	struct prs_acct last_cg; /* the target's cgroup as last seen (it may move into one) */
	bool have_cg;
	bool want_wss;
	struct prs_wss *wss;
	struct prs_wss_result wss_r;
	void (*chain)(void *arg, double elapsed_s, uint64_t samples, size_t threads);
	void *chain_arg;
};

int cli_phase_opt(int opt, const char *arg, struct cli_phase_opts *po)
{
	struct prs_err err = { 0 };
	struct prs_target t;
	struct prs_dim d;

	switch (opt) {
	case CLI_OPT_TARGET:
		if (prs_target_parse(arg, &t, &err)) {
			cli_err(&err, "--target");
			return EXIT_USAGE;
		}
		po->target = arg;
		return -1;
	case CLI_OPT_DIM:
		if (prs_dim_parse(arg, &d, &err)) {
			cli_err(&err, "--dim");
			return EXIT_USAGE;
		}
		if (po->ndims >= PRS_MAX_DIMS) {
			cli_msg("--dim: at most %d dimensions", PRS_MAX_DIMS);
			return EXIT_USAGE;
		}
		po->dims[po->ndims++] = arg;
		return -1;
	case CLI_OPT_NO_CLASSIFY:
		po->no_classify = true;
		return -1;
	case CLI_OPT_WSS:
		po->wss = true;
		return -1;
	case CLI_OPT_SWEEP:
		if (po->nsweeps >= PRS_MAX_DIMS) {
			cli_msg("--sweep: at most %d sweeps", PRS_MAX_DIMS);
			return EXIT_USAGE;
		}
		po->sweeps[po->nsweeps++] = arg;
		return -1;
	default:
		return 0;
	}
}

void cli_phase_meta(struct prs_profile *p, const struct cli_phase_opts *po)
{
	if (po->target)
		prs_profile_meta(p, "target", po->target);
	for (size_t i = 0; i < po->ndims; i++)
		prs_profile_meta(p, "dim", po->dims[i]);
	prs_profile_meta(p, "classify", po->no_classify ? "off" : "on");
}

struct cli_collect *cli_collect_new(bool on)
{
	struct cli_collect *c;

	if (!on)
		return NULL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	/* opened before the target starts, so that no thread's exit is missed */
	prs_taskstats_open(&c->ts, &c->ts_err);
	return c;
}

void cli_collect_wss(struct cli_collect *c, bool on)
{
	if (c)
		c->want_wss = on;
}

/*
 * A counter that inherits costs the program at every thread it starts: the kernel copies it at
 * the clone, switches it with the thread and sums it into its parent at the exit (measured, load
 * 7: a C program starting and joining threads took 30 us of CPU a thread alone, 36 with an
 * inherited task-clock; a thread-per-request server pays it per request), and it misses the end
 * of each thread's exit (11 % of spawnthreads.py's CPU).
 * So once the program starts threads at CHURN_HANDOFF_PER_S or more (its exits, told by
 * taskstats), counters that are all software (task-clock: no PMU) are read and closed, and
 * counted on by the kernel's CPU clock of the process, which is what task-clock counts: the
 * scheduler's run time of every thread, the exited ones included. Hardware counters stay: their
 * ratios (IPC, top-down) are what the verdict reads, and nothing else counts them.
 */
#define CHURN_HANDOFF_PER_S 200.0

static bool software_only(const struct cli_collect *c)
{
	if (strcmp(c->ctr->name, "perf") != 0)
		return false; /* (replayed counts stand for the machine's: kept as they are) */
	for (size_t i = 0; i < c->set.n; i++)
		if (c->set.c[i].hardware)
			return false;
	return true;
}

static void counters_handoff(struct cli_collect *c, double elapsed_s)
{
	uint64_t exits = prs_taskstats_exits(c->ts), cpu;
	double rate = elapsed_s > c->churn_s ? (double)(exits - c->churn_exits) / (elapsed_s - c->churn_s) : 0;

	c->churn_exits = exits;
	c->churn_s = elapsed_s;
	if (!c->ctr_open || c->handed || rate < CHURN_HANDOFF_PER_S || !software_only(c))
		return;
	if (prs_proc_cpu_clock_ns(c->pid, &cpu) != 0 || c->ctr->read(c->ctr, &c->set) != 0)
		return;
	prs_counter_backend_free(c->ctr);
	c->ctr = NULL;
	c->handed = true;
	c->handed_cpu_ns = cpu;
	c->handed_s = elapsed_s;
	c->churn_per_s = rate;
}

/*
 * The exits of threads no sample shows are of no use: the classifier's thread facts are of the
 * threads sampled (facts_samples.c), the process's totals come from its own records. A
 * thread-per-request server ends thousands of threads a second, most of them between two ticks:
 * each was kept until the end and stored into the profile. So the exits kept are pruned to the
 * sampled threads' once they pass prune_at (twice what survived, PRUNE_MIN at least), and at the
 * end. A thread's samples are in the profile before its exit is drained: the tick that sampled
 * it recorded them before the sampler's once-a-second step, which drains.
 */
#define PRUNE_MIN 4096

static int by_tid(const void *a, const void *b)
{
	int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;

	return (x > y) - (x < y);
}

static bool tid_sampled(void *ctx, uint32_t tid)
{
	const struct tidset *set = ctx;
	int32_t key = (int32_t)tid;

	return bsearch(&key, set->v, set->n, sizeof(*set->v), by_tid) != NULL;
}

/* Adds the tids of the samples added since the last call to set (sorted, each once). Returns 0
 * or -ENOMEM. */
static int add_sampled(struct tidset *set, const struct prs_profile *p)
{
	size_t k = 0;

	if (p->nsamples < set->scanned)
		set->scanned = 0; /* (not a recording's profile: read it all again) */
	if (prs_array_grow((void **)&set->v, &set->cap, set->n + (p->nsamples - set->scanned),
			   sizeof(*set->v)))
		return -ENOMEM;
	for (; set->scanned < p->nsamples; set->scanned++)
		set->v[set->n++] = p->samples[set->scanned].tid;
	qsort(set->v, set->n, sizeof(*set->v), by_tid);
	for (size_t i = 0; i < set->n; i++)
		if (!k || set->v[k - 1] != set->v[i])
			set->v[k++] = set->v[i];
	set->n = k;
	return 0;
}

static void prune_exits(struct cli_collect *c, bool now)
{
	size_t n = prs_taskstats_count(c->ts);

	if (!c->p || !n || (!now && n < c->prune_at) || add_sampled(&c->sampled, c->p) != 0)
		return; /* (out of memory: all kept) */
	n = prs_taskstats_prune(c->ts, tid_sampled, &c->sampled);
	c->prune_at = 2 * n > PRUNE_MIN ? 2 * n : PRUNE_MIN;
}

static void tick(void *arg, double elapsed_s, uint64_t samples, size_t threads)
{
	struct cli_collect *c = arg;
	struct prs_acct a;

	prs_taskstats_drain(c->ts);
	prune_exits(c, false);
	counters_handoff(c, elapsed_s);
	if (c->pid && prs_acct_read_cgroup(c->pid, PRS_PHASE_END, &a) == 0) {
		c->last_cg = a;
		c->have_cg = true;
	}
	if (c->chain)
		c->chain(c->chain_arg, elapsed_s, samples, threads);
}

void cli_collect_hook(struct cli_collect *c, struct prs_sampler_opts *so)
{
	if (!c)
		return;
	c->chain = so->progress;
	c->chain_arg = so->progress_arg;
	so->progress = tick;
	so->progress_arg = c;
	so->acct_exits = true;
	so->exits_by_taskstats = c->ts != NULL; /* (opened and registered: cli_collect_new) */
	so->switches = true;
}

static void store(struct prs_profile *p, const struct prs_acct *a)
{
	prs_acct_store(p, a); /* ENOMEM: the report lacks that fact, which it says */
}

static void note(struct prs_profile *p, const char *what, int e, const char *why)
{
	struct prs_acct a;

	prs_acct_note(&a, what, e, why);
	store(p, &a);
}

/* The working-set window and period of --wss (the note's §5: 50-200 ms, at most 1 Hz). */
#define WSS_WINDOW_NS 200000000ull
#define WSS_EVERY_NS 1000000000ull

static void wss_start(struct cli_collect *c, struct prs_profile *p)
{
	uint64_t again = 0, of = 0;
	char why[300];
	int rc;

	if (!c->want_wss)
		return;
	if (prs_wss_probe(&again, &of) == 0) {
		snprintf(why, sizeof(why), "no working set measured: this machine does not set a page's "
			 "accessed bit again after /proc/PID/clear_refs (a hypervisor that shadows the "
			 "page tables?): %llu of %llu MiB touched again were seen at the start",
			 (unsigned long long)(again >> 20), (unsigned long long)(of >> 20));
		note(p, "wss", 0, why);
		c->want_wss = false;
		return;
	}
	rc = prs_wss_start(c->pid, WSS_WINDOW_NS, WSS_EVERY_NS, &c->wss);
	if (rc)
		note(p, "wss", -rc, "the working-set thread could not start");
}

/* Stops the measures; a note when none was made. */
static void wss_stop(struct cli_collect *c, struct prs_profile *p)
{
	char why[200];

	if (!c->want_wss)
		return;
	prs_wss_stop(c->wss, &c->wss_r);
	c->wss = NULL;
	if (c->wss_r.samples)
		return;
	if (c->wss_r.err && c->wss_r.err != -ENOENT && c->wss_r.err != -ESRCH)
		snprintf(why, sizeof(why), "no working set measured: /proc/PID/clear_refs or "
			 "smaps_rollup: %s", strerror(-c->wss_r.err));
	else
		snprintf(why, sizeof(why), "no working set measured: the program ended within the "
			 "first window (%llu ms)", WSS_WINDOW_NS / 1000000);
	note(p, "wss", c->wss_r.err ? -c->wss_r.err : 0, why);
}

/* The working set's fields on the process's last record. */
static void wss_fields(const struct cli_collect *c, struct prs_acct *a)
{
	if (!c->wss_r.samples)
		return;
	prs_acct_set(a, PRS_TASK_WSS_BYTES, c->wss_r.median_bytes);
	prs_acct_set(a, PRS_TASK_WSS_MAX_BYTES, c->wss_r.max_bytes);
	prs_acct_set(a, PRS_TASK_WSS_WINDOW_NS, c->wss_r.window_ns);
	prs_acct_set(a, PRS_TASK_WSS_SAMPLES, c->wss_r.samples);
	prs_acct_set(a, PRS_TASK_WSS_CLEAR_NS, c->wss_r.clear_ns_max);
}

void cli_collect_waits(struct cli_collect *c, struct prs_profile *p, const struct prs_sampler *s)
{
	const struct prs_wait_addr *w;
	struct prs_acct a;
	size_t n;

	if (!c)
		return;
	w = prs_sampler_wait_addrs(s, &n);
	for (size_t i = 0; i < n; i++) {
		prs_acct_init(&a, PRS_ACCT_WAIT_ADDR, PRS_PHASE_END, w[i].tid);
		prs_acct_set(&a, PRS_WAIT_UADDR, w[i].uaddr);
		prs_acct_set(&a, PRS_WAIT_SAMPLES, w[i].samples);
		prs_acct_set(&a, PRS_WAIT_FLAGS, w[i].gil ? PRS_WAIT_F_GIL : 0);
		store(p, &a);
	}
}

/* The machine (with the calibration when cached) as the counters see it. */
static void machine(struct cli_collect *c, struct prs_profile *p)
{
	struct prs_machine m;
	struct prs_acct a;
	struct prs_err err = { 0 };
	char path[4096];

	prs_machine_detect(&m, c->pid);
	if (cli_machine_cache_path(path, sizeof(path)) == 0 && prs_machine_load(&m, path, &err) != 0 &&
	    err.code != -ENOENT)
		note(p, "calibration", err.code, err.msg);
	if (c->ctr && strcmp(c->ctr->name, "replay") == 0) {
		/* the replayed counts stand for this machine's PMU */
		m.topdown = c->ctr->topdown;
		m.pmu = PRS_PMU_UNKNOWN;
		for (size_t i = 0; i < c->set.n; i++) {
			const struct prs_counter *k = &c->set.c[i];

			if (!k->hardware)
				continue;
			if (k->ok) {
				m.pmu = PRS_PMU_OK;
				m.pmu_why[0] = '\0';
				break;
			}
			m.pmu = k->err == -EACCES || k->err == -EPERM ? PRS_PMU_NOT_PERMITTED
				: k->err == -ENOENT || k->err == -EOPNOTSUPP ? PRS_PMU_NONE : PRS_PMU_ERROR;
			m.pmu_errno = -k->err;
			snprintf(m.pmu_why, sizeof(m.pmu_why), "%s", k->why);
		}
	}
	prs_machine_to_acct(&m, &a);
	store(p, &a);
}

static void open_counters(struct cli_collect *c, const pid_t *tids, size_t n)
{
	const char *replay = getenv("PYRSPROF_COUNTERS_REPLAY");
	int errnum, topdown;
	char why[PRS_PERF_WHY];

	if (replay && replay[0]) {
		c->ctr = prs_counter_replay_new(replay, &c->ctr_err);
	} else {
		c->ctr = prs_counter_perf_new(NULL);
		prs_counter_default_set(&c->set, prs_pmu_probe(NULL, &errnum, why, sizeof(why)) == PRS_PMU_OK,
					&topdown);
	}
	if (c->ctr && c->ctr->open(c->ctr, tids, n, &c->set, &c->ctr_err) == 0)
		c->ctr_open = true;
}

/* START or END snapshots of the process and every thread alive. */
static void snapshot(struct cli_collect *c, struct prs_profile *p, enum prs_acct_phase phase,
		     pid_t *tids, size_t *ntids)
{
	pid_t buf[MAX_TIDS];
	struct prs_acct a;
	int n;

	if (prs_acct_read_system(c->pid, phase, &a) == 0)
		store(p, &a);
	if (prs_acct_read_cgroup(c->pid, phase, &a) == 0) {
		store(p, &a);
		c->last_cg = a;
		c->have_cg = true;
	}
	if (prs_acct_read_process(c->pid, phase, &a) == 0) {
		if (phase == PRS_PHASE_END)
			wss_fields(c, &a);
		store(p, &a);
	}
	n = prs_task_list(c->pid, tids ? tids : buf, MAX_TIDS);
	if (n > MAX_TIDS)
		n = MAX_TIDS;
	for (int i = 0; i < n; i++)
		if (prs_acct_read_thread(c->pid, (tids ? tids : buf)[i], phase, &a) == 0)
			store(p, &a);
	if (ntids)
		*ntids = n > 0 ? (size_t)n : 0;
}

void cli_collect_start(struct cli_collect *c, pid_t pid, struct prs_profile *p)
{
	pid_t tids[MAX_TIDS];
	size_t n = 0;

	if (!c)
		return;
	c->pid = pid;
	c->p = p;
	c->prune_at = PRUNE_MIN;
	prs_taskstats_target(c->ts, pid);
	snapshot(c, p, PRS_PHASE_START, tids, &n);
	if (!n) {
		tids[0] = pid;
		n = 1;
	}
	open_counters(c, tids, n);
	machine(c, p);
	wss_start(c, p);
}

/* The handed-over counters at the end: their readings plus the CPU the process used since (its
 * clock, or the rusage of a reaped process: the same run time, utime + stime adjusted to it). A
 * note says so, and when neither could be read, that the readings cover the first part only. */
static void counters_handed_end(struct cli_collect *c, struct prs_profile *p, const struct rusage *ru)
{
	uint64_t cpu = 0, more;
	char why[PRS_ACCT_MAX_STR];
	bool ok = prs_proc_cpu_clock_ns(c->pid, &cpu) == 0;

	if (!ok && ru) {
		cpu = ((uint64_t)ru->ru_utime.tv_sec + (uint64_t)ru->ru_stime.tv_sec) * 1000000000ull +
		      ((uint64_t)ru->ru_utime.tv_usec + (uint64_t)ru->ru_stime.tv_usec) * 1000ull;
		ok = true;
	}
	more = ok && cpu > c->handed_cpu_ns ? cpu - c->handed_cpu_ns : 0;
	for (size_t i = 0; i < c->set.n; i++) {
		struct prs_counter *k = &c->set.c[i];

		if (k->ok && k->config == PERF_COUNT_SW_TASK_CLOCK && k->type == PERF_TYPE_SOFTWARE) {
			k->value += more;
			k->enabled_ns += more;
			k->running_ns += more;
		}
	}
	snprintf(why, sizeof(why), "task-clock counted by perf_event_open for the first %.1f s, then by "
		 "the kernel's CPU clock of the process%s: it started %.0f threads a second, and an "
		 "inherited counter costs each new thread its copy, switches and sum (~6 us of CPU)",
		 c->handed_s, ok ? "" : " (unreadable at the end: the count stops there)", c->churn_per_s);
	note(p, "counters", 0, why);
}

void cli_collect_end(struct cli_collect *c, struct prs_profile *p, bool reaped)
{
	struct prs_acct a;
	struct rusage ru;
	bool have_ru;
	size_t n;

	if (!c || !c->pid)
		return;
	wss_stop(c, p);
	/* the target was our only child: its rusage is the whole process's, dead threads too */
	have_ru = reaped && getrusage(RUSAGE_CHILDREN, &ru) == 0;
	if (c->handed)
		counters_handed_end(c, p, have_ru ? &ru : NULL);
	if (c->ctr_open && (c->handed || c->ctr->read(c->ctr, &c->set) == 0))
		for (size_t i = 0; i < c->set.n; i++) {
			prs_counter_to_acct(&c->set.c[i], &a);
			store(p, &a);
		}
	else if (c->ctr_err.msg[0])
		note(p, "counters", c->ctr_err.code, c->ctr_err.msg);
	if (reaped) {
		if (have_ru) {
			prs_acct_from_rusage(c->pid, &ru, &a);
			wss_fields(c, &a);
			store(p, &a);
		}
		if (prs_acct_read_system(c->pid, PRS_PHASE_END, &a) == 0 ||
		    prs_acct_read_system(getpid(), PRS_PHASE_END, &a) == 0)
			store(p, &a);
	} else {
		snapshot(c, p, PRS_PHASE_END, NULL, NULL);
	}
	if (reaped && c->have_cg && prs_acct_cgroup_again(&c->last_cg, PRS_PHASE_END, &a) == 0)
		store(p, &a);
	if (c->ts) {
		prs_taskstats_drain(c->ts);
		prune_exits(c, true);
		n = prs_taskstats_count(c->ts);
		for (size_t i = 0; i < n; i++) {
			prs_taskstats_record(c->ts, i, &a);
			store(p, &a);
		}
		if (prs_taskstats_lost(c->ts))
			note(p, "taskstats", -ENOBUFS, "some thread exits were lost (the netlink buffer "
			     "overflowed): their kernel accounting is missing");
	} else if (c->ts_err.msg[0]) {
		note(p, "taskstats", c->ts_err.code, c->ts_err.msg);
	}
}

void cli_collect_free(struct cli_collect *c)
{
	if (!c)
		return;
	prs_wss_stop(c->wss, &c->wss_r); /* (stopped at the end already, unless it failed) */
	prs_taskstats_close(c->ts);
	prs_counter_backend_free(c->ctr);
	free(c->sampled.v);
	free(c);
}
