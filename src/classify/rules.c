/* SPDX-License-Identifier: MIT */
/*
 * The verdict: the rules of docs/classify.md §2 (the research note's order, plus its CPU-quota rule),
 * tried in order; the first that fires is the verdict, every other that fires is listed as
 * "also". The thresholds are design choices (the note's dead bands, in the style of the
 * top-down convention), kept in this one table; docs/classify.md gives each with its source.
 * Pure logic over struct prs_facts: no I/O, no allocation.
 */
#include "pyrsprof/classify.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "util/banned.h"

#define SRC_NOTE "pyrsprof design note bounds.md §2 (a design choice, calibrated on tests/e2e)"

static const struct prs_rule_def rules[PRS_RULE__COUNT] = {
	[PRS_RULE_IO] = { "io", "IO/latency-bound", "f_io", 0.30, "f_io >= 0.30 and f_io >= f_cpu",
			  SRC_NOTE "; waits by syscall and D state from the samples",
			  "concurrency, not cores: overlap the waits (asyncio/tokio, or threads)" },
	[PRS_RULE_GIL] = { "gil", "GIL-serialized", "f_gil", 0.20,
			   ">= 2 active Python threads and f_gil >= 0.20 and U <= 1.3",
			   SRC_NOTE "; GIL waits: futex waits on the GIL's address (§4)",
			   "release the GIL in the hot code (Numba nogil, PyO3 allow_threads, Cython "
			   "nogil), use processes (multiprocessing), or the free-threaded build" },
	[PRS_RULE_LOCK] = { "lock", "lock-contended", "f_lock", 0.20,
			    "f_lock >= 0.20 and U < 0.7 * active threads",
			    SRC_NOTE "; futex waits that are not the GIL",
			    "shrink the critical sections, shard the lock, or avoid sharing" },
	[PRS_RULE_THROTTLED] = { "throttled", "CPU-quota-throttled", "throttled_periods", 0.20,
				 "a cgroup CPU quota, throttled in >= 20 % of its periods and for >= 10 % "
				 "of the wall time",
				 "cgroup cpu.stat nr_throttled/nr_periods and throttled time (kernel "
				 "Documentation/scheduler/sched-bwc.rst); bounds.md addendum",
				 "raise the CPU quota (cpu.max, the container's CPU limit): more threads "
				 "will not help" },
	[PRS_RULE_SATURATED] = { "saturated", "CPU-saturated", "f_rq", 0.20, "f_rq >= 0.20",
				 SRC_NOTE "; run-queue wait from schedstat run_delay (kernel "
				 "Documentation/scheduler/sched-stats.rst) or the samples",
				 "the machine is full: fewer threads (as many as CPUs), or more cores" },
	/* (when other processes fill the CPUs, the lever is saturated_other_lever) */
	[PRS_RULE_SLEEP] = { "sleep", "sleep-dominated", "f_sleep", 0.50, "f_sleep >= 0.50",
			     SRC_NOTE "; nanosleep/clock_nanosleep/pause samples",
			     "none: the program sleeps on purpose (a finding, not a bottleneck)" },
	[PRS_RULE_CPU] = { "cpu", "CPU-bound", "f_cpu", 0.70,
			   "f_cpu >= 0.70, or the largest share (f_cpu + f_rq when other processes "
			   "fill the CPUs)",
			   SRC_NOTE "; on-CPU time from kernel accounting (schedstat, taskstats) or "
			   "the samples",
			   "" /* depends on where the CPU time goes: see cpu_lever */ },
	[PRS_RULE_WAIT] = { "wait", "waiting", "largest share", 0, "no rule above fired",
			    "the largest share of the time budget",
			    "find what the program waits for (the wall flame graph's off-CPU leaves)" },
};

const struct prs_rule_def *prs_rule_def(enum prs_rule r)
{
	return (unsigned)r < PRS_RULE__COUNT ? &rules[r] : NULL;
}

const char *prs_confidence_name(int c)
{
	return c >= PRS_CONF_HIGH ? "high" : c == PRS_CONF_MEDIUM ? "medium" : "low";
}

const char *prs_cpu_split_name(int s)
{
	switch (s) {
	case PRS_SPLIT_COMPUTE:
		return "compute";
	case PRS_SPLIT_MEMORY_LATENCY:
		return "memory-latency";
	case PRS_SPLIT_MEMORY_BANDWIDTH:
		return "memory-bandwidth";
	case PRS_SPLIT_MEMORY:
		return "memory";
	default:
		return "not measured";
	}
}

static struct prs_rule_hit hit(enum prs_rule r, double value, int conf)
{
	struct prs_rule_hit h;

	memset(&h, 0, sizeof(h));
	h.rule = r;
	h.value = value;
	h.threshold = rules[r].threshold;
	h.confidence = conf;
	snprintf(h.label, sizeof(h.label), "%s", rules[r].verdict);
	return h;
}

static double pct(double x)
{
	return 100 * x;
}

static bool rule_io(const struct prs_facts *f, struct prs_rule_hit *h)
{
	const struct prs_budget *b = &f->budget;
	double disk = b->f[PRS_R_IO_DISK] + b->f[PRS_R_PAGING], net = b->f[PRS_R_IO_NET];

	if (b->f_io < rules[PRS_RULE_IO].threshold || b->f_io < b->f[PRS_R_CPU])
		return false;
	*h = hit(PRS_RULE_IO, b->f_io, b->f_io >= 0.5 ? PRS_CONF_HIGH : PRS_CONF_MEDIUM);
	/* disk waits inferred from storage traffic, not seen by samples, are medium at best */
	if (f->unseen_disk && disk >= net && b->T > 0 && f->unseen_disk_s > 0.5 * b->f[PRS_R_IO_DISK] * b->T)
		h->confidence = PRS_CONF_MEDIUM;
	snprintf(h->label, sizeof(h->label), "IO/latency-bound (%s)", disk >= net ? "disk" : "network/event");
	snprintf(h->detail, sizeof(h->detail),
		 "%.0f %% of the active threads' time waits for IO (disk %.0f %%, network/event %.0f %%, "
		 "paging %.0f %%) against %.0f %% on-CPU%s", pct(b->f_io), pct(b->f[PRS_R_IO_DISK]),
		 pct(net), pct(b->f[PRS_R_PAGING]), pct(b->f[PRS_R_CPU]),
		 f->unseen_disk ? "; some disk waits inferred from storage traffic (no sample caught them)" : "");
	return true;
}

static bool rule_gil(const struct prs_facts *f, struct prs_rule_hit *h)
{
	const struct prs_budget *b = &f->budget;
	double fg = f->gil_measured ? b->f[PRS_R_GIL] : b->f_lock_python;

	if (b->python_active < 2 || fg < rules[PRS_RULE_GIL].threshold || b->U > 1.3)
		return false;
	*h = hit(PRS_RULE_GIL, fg, !f->gil_measured ? PRS_CONF_LOW
				   : f->gil_confirmed ? PRS_CONF_HIGH : PRS_CONF_MEDIUM);
	if (f->gil_measured)
		snprintf(h->detail, sizeof(h->detail),
			 "%u Python threads wait for the GIL %.0f %% of their time while the process "
			 "uses %.2f cores%s", b->python_active, pct(fg), b->U,
			 f->gil_confirmed ? " (GIL address confirmed in the target)" : "");
	else
		snprintf(h->detail, sizeof(h->detail),
			 "%u Python threads wait in futex %.0f %% of their time while the process uses "
			 "%.2f cores: GIL or lock waits (the sampler does not tell GIL waits apart)",
			 b->python_active, pct(fg), b->U);
	if (!f->gil_measured)
		snprintf(h->label, sizeof(h->label), "GIL-serialized (probable)");
	return true;
}

static bool rule_lock(const struct prs_facts *f, struct prs_rule_hit *h)
{
	const struct prs_budget *b = &f->budget;
	/* Python threads' futex waits went to the GIL rule when GIL waits are not measured */
	double fl = b->f[PRS_R_LOCK] - (f->gil_measured ? 0 : b->f_lock_python);

	if (fl < rules[PRS_RULE_LOCK].threshold || b->U >= 0.7 * b->active)
		return false;
	*h = hit(PRS_RULE_LOCK, fl, PRS_CONF_MEDIUM);
	snprintf(h->detail, sizeof(h->detail),
		 "%u active threads wait on locks (futex) %.0f %% of their time; the process uses %.2f "
		 "cores", b->active, pct(fl), b->U);
	return true;
}

static bool rule_throttled(const struct prs_facts *f, struct prs_rule_hit *h)
{
	double share = f->nr_periods ? (double)f->nr_throttled / (double)f->nr_periods : 0;

	if (!f->has_quota || share < rules[PRS_RULE_THROTTLED].threshold || f->duration_s <= 0 ||
	    f->throttled_s < 0.1 * f->duration_s)
		return false;
	*h = hit(PRS_RULE_THROTTLED, share, PRS_CONF_HIGH);
	snprintf(h->detail, sizeof(h->detail),
		 "the cgroup's CPU quota (%.2f CPUs) ran out in %.0f %% of its periods (%llu of %llu); "
		 "throttled %.2f s of %.2f s", f->quota_cpus, pct(share),
		 (unsigned long long)f->nr_throttled, (unsigned long long)f->nr_periods, f->throttled_s,
		 f->duration_s);
	return true;
}

static bool all_kernel_runq(const struct prs_facts *f)
{
	for (size_t i = 0; i < f->nthreads; i++)
		if (!f->threads[i].idle && f->threads[i].wall_s > 0 && !f->threads[i].kernel)
			return false;
	return f->nthreads > 0;
}

/* Appends to the text in buf (cut at size). */
static void append(char *buf, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void append(char *buf, size_t size, const char *fmt, ...)
{
	size_t len = strlen(buf);
	va_list ap;

	if (len + 1 >= size)
		return;
	va_start(ap, fmt);
	vsnprintf(buf + len, size - len, fmt, ap);
	va_end(ap);
}

/* The share of switch-outs that were preemptions (perf switch records; 0 without). */
static double preempted_share(const struct prs_facts *f)
{
	uint64_t all = f->sw.preempt + f->sw.voluntary;

	return f->have_switches && all ? (double)f->sw.preempt / (double)all : 0;
}

/* CPUs the process's active threads wanted: on a CPU or waiting for one. */
static double demand(const struct prs_facts *f)
{
	const struct prs_budget *b = &f->budget;

	return f->duration_s > 0 ? (b->f[PRS_R_CPU] + b->f[PRS_R_RUNQ]) * b->T / f->duration_s : 0;
}

/* Whether the process's own threads want more CPUs than it may use (else others fill them);
 * with the CPUs unknown (no accounting), it is assumed. */
bool prs_oversubscribed(const struct prs_facts *f)
{
	return !f->ncpus || demand(f) > 0.9 * f->ncpus;
}

static bool rule_saturated(const struct prs_facts *f, struct prs_rule_hit *h)
{
	const struct prs_budget *b = &f->budget;
	bool own = prs_oversubscribed(f);

	if (b->f[PRS_R_RUNQ] < rules[PRS_RULE_SATURATED].threshold)
		return false;
	*h = hit(PRS_RULE_SATURATED, b->f[PRS_R_RUNQ],
		 all_kernel_runq(f) || preempted_share(f) >= 0.5 ? PRS_CONF_HIGH : PRS_CONF_MEDIUM);
	if (f->has_quota && f->nr_throttled)
		snprintf(h->label, sizeof(h->label), "CPU-saturated (CPU quota)");
	else if (f->ncpus)
		snprintf(h->label, sizeof(h->label), "CPU-saturated (%s)",
			 own ? "more runnable threads than CPUs" : "by other processes");
	snprintf(h->detail, sizeof(h->detail),
		 "the active threads wait for a CPU %.0f %% of their time (%s): %u thread%s want%s %.2f "
		 "CPUs of %u and got %.2f%s", pct(b->f[PRS_R_RUNQ]),
		 all_kernel_runq(f) ? "kernel run-queue time" : "samples", b->active,
		 b->active == 1 ? "" : "s", b->active == 1 ? "s" : "", demand(f), f->ncpus, b->U,
		 own ? "" : "; other processes kept the CPUs busy");
	if (f->have_switches && f->duration_s > 0)
		append(h->detail, sizeof(h->detail), "; %.0f preempted switch-outs/s, %.0f %% of all "
		       "(perf switch records)", (double)f->sw.preempt / f->duration_s,
		       pct(preempted_share(f)));
	return true;
}

static bool rule_sleep(const struct prs_facts *f, struct prs_rule_hit *h)
{
	const struct prs_budget *b = &f->budget;

	if (b->f[PRS_R_SLEEP] < rules[PRS_RULE_SLEEP].threshold)
		return false;
	*h = hit(PRS_RULE_SLEEP, b->f[PRS_R_SLEEP], PRS_CONF_HIGH);
	snprintf(h->detail, sizeof(h->detail), "the active threads sleep %.0f %% of their time "
		 "(nanosleep, clock_nanosleep, pause): deliberate, not IO", pct(b->f[PRS_R_SLEEP]));
	return true;
}

static enum prs_reason largest(const struct prs_budget *b)
{
	enum prs_reason best = PRS_R_CPU;

	for (int r = 0; r < PRS_R__COUNT; r++)
		if (b->f[r] > b->f[best])
			best = (enum prs_reason)r;
	return best;
}

static bool rule_cpu(const struct prs_facts *f, struct prs_rule_hit *h)
{
	const struct prs_budget *b = &f->budget;
	double fc = b->f[PRS_R_CPU];
	enum prs_reason big = largest(b);

	/* time spent waiting for a CPU is time the threads wanted one: CPU-bound work on a busy
	 * machine is still CPU-bound (the saturation rule says the rest) */
	if (!prs_oversubscribed(f))
		fc += b->f[PRS_R_RUNQ];
	if (b->T <= 0 || (fc < rules[PRS_RULE_CPU].threshold && big != PRS_R_CPU && big != PRS_R_RUNQ))
		return false;
	*h = hit(PRS_RULE_CPU, fc, fc >= rules[PRS_RULE_CPU].threshold ? PRS_CONF_HIGH : PRS_CONF_MEDIUM);
	if (f->cpu_python >= 0.5)
		snprintf(h->label, sizeof(h->label), "CPU-bound (Python interpreter)");
	else if (f->cpu_kernel >= 0.5)
		snprintf(h->label, sizeof(h->label), "CPU-bound (kernel)");
	else
		snprintf(h->label, sizeof(h->label), "CPU-bound (native code)");
	snprintf(h->detail, sizeof(h->detail),
		 "the active threads are on a CPU or want one %.0f %% of their time; of the on-CPU "
		 "samples: Python %.0f %%, native %.0f %%, kernel %.0f %% (innermost frames)", pct(fc),
		 pct(f->cpu_python),
		 pct(f->cpu_native), pct(f->cpu_kernel));
	return true;
}

static bool rule_wait(const struct prs_facts *f, struct prs_rule_hit *h)
{
	const struct prs_budget *b = &f->budget;
	enum prs_reason r = largest(b);

	if (b->T <= 0)
		return false;
	*h = hit(PRS_RULE_WAIT, b->f[r], PRS_CONF_LOW);
	snprintf(h->label, sizeof(h->label), "waiting (%s)", prs_reason_label(r));
	snprintf(h->detail, sizeof(h->detail), "no rule fired; the largest share is %s, %.0f %%",
		 prs_reason_label(r), pct(b->f[r]));
	return true;
}

/* ---- the CPU split (design note §3) ---- */

static void split_from_counters(const struct prs_facts *f, struct prs_verdict *v)
{
	const struct prs_cpu_metrics *m = &f->cpu;
	bool flagged = m->have_mem && m->memory_bound > 0.2 && m->backend > 0.2;
	int conf = m->min_share >= 0.5 ? PRS_CONF_HIGH : PRS_CONF_MEDIUM;
	char mux[64] = "";

	if (m->min_share < 1)
		snprintf(mux, sizeof(mux), "; counters ran %.0f %% of the time (scaled)", pct(m->min_share));
	if (!flagged) {
		v->split = m->have_mem || m->backend <= 0.2 ? PRS_SPLIT_COMPUTE : PRS_SPLIT_NOT_MEASURED;
		v->split_confidence = v->split == PRS_SPLIT_COMPUTE ? conf : PRS_CONF_LOW;
		snprintf(v->split_detail, sizeof(v->split_detail),
			 "top-down (%s): retiring %.1f %%, frontend %.1f %%, backend %.1f %%%s, bad "
			 "speculation %.1f %%: memory not flagged (memory_bound > 20 %% and backend > 20 %%)%s",
			 m->l1_source, pct(m->retiring), pct(m->frontend), pct(m->backend),
			 m->have_mem ? "" : " (its memory part not measured)", pct(m->bad_spec), mux);
		return;
	}
	if (f->have_machine && f->machine.calibrated && m->have_llc && f->duration_s > 0) {
		double B = m->llc_miss_bytes / f->duration_s / 1e6, u = B / f->machine.bw_all_mbs;

		if (u >= 0.7) {
			v->split = PRS_SPLIT_MEMORY_BANDWIDTH;
			v->split_confidence = conf;
		} else if (u >= 0.5) {
			v->split = PRS_SPLIT_MEMORY_BANDWIDTH;
			v->split_confidence = PRS_CONF_MEDIUM;
		} else {
			v->split = PRS_SPLIT_MEMORY_LATENCY;
			v->split_confidence = PRS_CONF_MEDIUM;
		}
		snprintf(v->split_detail, sizeof(v->split_detail),
			 "top-down (%s): memory-bound %.1f %% of slots (backend %.1f %%); DRAM traffic "
			 ">= %.0f MB/s (64 B x LLC misses, a floor) = %.0f %% of the calibrated peak %.0f MB/s%s",
			 m->l1_source, pct(m->memory_bound), pct(m->backend), B, pct(u),
			 f->machine.bw_all_mbs, mux);
	} else {
		v->split = PRS_SPLIT_MEMORY;
		v->split_confidence = PRS_CONF_MEDIUM;
		snprintf(v->split_detail, sizeof(v->split_detail),
			 "top-down (%s): memory-bound %.1f %% of slots (backend %.1f %%); latency vs "
			 "bandwidth not told (%s)%s", m->l1_source, pct(m->memory_bound), pct(m->backend),
			 f->have_machine && f->machine.calibrated ? "no LLC-miss count"
								    : "run `pyrsprof calibrate`", mux);
	}
}

static void add_evidence(struct prs_verdict *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void add_evidence(struct prs_verdict *v, const char *fmt, ...)
{
	va_list ap;

	if (v->nevidence >= PRS_VERDICT_MAX_EVIDENCE)
		return;
	va_start(ap, fmt);
	vsnprintf(v->evidence[v->nevidence++], sizeof(v->evidence[0]), fmt, ap);
	va_end(ap);
}

/* --wss: the working set against the LLC; beyond it, the DRAM traffic it proves (a floor). */
static void wss_evidence(const struct prs_facts *f, struct prs_verdict *v)
{
	double mib = f->wss_bytes / 1048576, llc = f->have_machine ? (double)f->machine.llc_bytes : 0;
	char peak[64] = "; peak not calibrated";

	if (!f->have_wss)
		return;
	if (!llc)
		add_evidence(v, "working set %.0f MiB in %.0f ms (--wss; LLC size unknown)", mib,
			     1e3 * f->wss_window_s);
	else if (f->wss_floor_gbs > 0) {
		if (f->machine.calibrated)
			snprintf(peak, sizeof(peak), "; calibrated peak %.1f GB/s",
				 f->machine.bw_all_mbs / 1e3);
		add_evidence(v, "working set %.0f MiB in %.0f ms (--wss) > LLC %.0f MiB: DRAM traffic "
			     ">= %.2f GB/s (a floor%s): memory traffic is real, whether it bounds the "
			     "program is not measured", mib, 1e3 * f->wss_window_s, llc / 1048576,
			     f->wss_floor_gbs, peak);
	}
	else
		add_evidence(v, "working set %.1f MiB in %.0f ms (--wss) fits the LLC (%.0f MiB): no "
			     "DRAM traffic is implied", mib, 1e3 * f->wss_window_s, llc / 1048576);
}

/* Why the split has no top-down counters. A PMU that counted cycles and instructions but has no
 * top-down metrics pyrsprof reads (or whose top-down counters did not open) is not "no hardware
 * counters": the counters table shows them, scaled. */
static const char *no_topdown_why(const struct prs_facts *f)
{
	if (f->have_machine && f->machine.pmu_why[0])
		return f->machine.pmu_why;
	if (f->cpu.have_ipc)
		return "cycles and instructions were counted, but no top-down counters (pipeline slots "
		       "by frontend, backend, retiring) were read on this CPU, and IPC alone does not "
		       "tell compute from memory";
	return "no hardware counters were read";
}

static void split_without_pmu(const struct prs_facts *f, struct prs_verdict *v)
{
	const char *why = no_topdown_why(f);

	v->split = PRS_SPLIT_NOT_MEASURED;
	v->split_confidence = PRS_CONF_LOW;
	snprintf(v->split_detail, sizeof(v->split_detail),
		 "compute vs memory not measured: %s. Memory-latency-bound code (pointer chasing) and "
		 "compute look alike from here: both are 100 %% on-CPU", why);
	if (f->copy_share > 0.005)
		add_evidence(v, "%.0f %% of on-CPU samples in copy/fill kernels (top: %s): streaming "
			     "memory traffic is likely, but the same loops in cache are compute",
			     pct(f->copy_share), f->copy_top[0] ? f->copy_top : "?");
	if (f->fresh_mbs >= 1)
		add_evidence(v, "minor page faults: %.0f MB/s of freshly zeroed memory (allocation "
			     "churn: reuse buffers, fewer temporaries)", f->fresh_mbs);
	if (f->cpu.have_ipc)
		add_evidence(v, "IPC %.2f (not diagnostic alone)", f->cpu.ipc);
	wss_evidence(f, v);
}

static void cpu_split(const struct prs_facts *f, struct prs_verdict *v)
{
	if (f->cpu.have_l1)
		split_from_counters(f, v);
	else
		split_without_pmu(f, v);
}

static void cpu_lever(const struct prs_facts *f, const struct prs_verdict *v, char *buf, size_t size)
{
	if (v->split == PRS_SPLIT_MEMORY_BANDWIDTH)
		snprintf(buf, size, "memory-bandwidth-bound: fewer passes, fewer allocations, better "
			 "layout; more cores won't help");
	else if (v->split == PRS_SPLIT_MEMORY_LATENCY)
		snprintf(buf, size, "memory-latency-bound: layout and locality (contiguous arrays, "
			 "struct of arrays, no pointer chasing); more cores help until bandwidth runs out");
	else if (f->cpu_python >= 0.5)
		snprintf(buf, size, "climb the ladder only as far as the target needs: vectorize the hot "
			 "loop (NumPy/Polars) -> Numba -> Rust/PyO3; then data parallelism");
	else
		snprintf(buf, size, "tune the single-thread hot spot, then data parallelism (rayon, "
			 "multiprocessing, a GIL-releasing extension)");
}

/* ---- the verdict ---- */

static void qualify(const struct prs_facts *f, struct prs_verdict *v)
{
	if (f->have_steal && f->steal_share >= 0.05 && v->nqualifiers < 4)
		snprintf(v->qualifiers[v->nqualifiers++], sizeof(v->qualifiers[0]),
			 "the host took %.0f %% of the CPUs' time (steal)%s", pct(f->steal_share),
			 f->steal_share >= 0.10 ? ": confidence lowered one level" : "");
	/* a file damaged in the middle was not interrupted: say which, as the reader's warning does */
	if (!f->complete && v->nqualifiers < 4)
		snprintf(v->qualifiers[v->nqualifiers++], sizeof(v->qualifiers[0]), "%s",
			 f->damaged ? "the profile is damaged: judged on what precedes the damage"
				    : "the recording was interrupted: judged on what was saved");
	if (f->have_ticks && f->ticks && (double)f->missed_ticks > 0.1 * (double)(f->ticks + f->missed_ticks) &&
	    v->nqualifiers < 4)
		snprintf(v->qualifiers[v->nqualifiers++], sizeof(v->qualifiers[0]),
			 "%llu of %llu ticks were missed: the samples are thin",
			 (unsigned long long)f->missed_ticks,
			 (unsigned long long)(f->ticks + f->missed_ticks));
	if (f->has_quota && v->primary.rule != PRS_RULE_THROTTLED && f->nr_throttled && v->nqualifiers < 4)
		snprintf(v->qualifiers[v->nqualifiers++], sizeof(v->qualifiers[0]),
			 "a CPU quota of %.2f CPUs throttled the cgroup in %llu of %llu periods",
			 f->quota_cpus, (unsigned long long)f->nr_throttled,
			 (unsigned long long)f->nr_periods);
}

static void lower(struct prs_rule_hit *h)
{
	if (h->confidence > PRS_CONF_LOW)
		h->confidence--;
}

void prs_classify(const struct prs_facts *f, struct prs_verdict *v)
{
	bool (*const order[])(const struct prs_facts *, struct prs_rule_hit *) = {
		rule_io, rule_gil, rule_lock, rule_throttled, rule_saturated, rule_sleep, rule_cpu,
	};
	bool cpu = false;
	struct prs_rule_hit h;

	memset(v, 0, sizeof(*v));
	v->cores_used = f->budget.U;
	v->threads_active = f->budget.active;
	v->cpus = f->ncpus;
	if (f->budget.T <= 0)
		return;
	{
		double denom = f->budget.active < f->ncpus || !f->ncpus ? f->budget.active : f->ncpus;

		v->efficiency = denom > 0 ? f->budget.U / denom : 0;
	}
	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
		if (!order[i](f, &h))
			continue;
		cpu |= h.rule == PRS_RULE_CPU;
		if (!v->have) {
			v->primary = h;
			v->have = true;
		} else if (v->nalso < PRS_VERDICT_MAX_ALSO) {
			v->also[v->nalso++] = h;
		}
	}
	if (!v->have && rule_wait(f, &h)) {
		v->primary = h;
		v->have = true;
	}
	if (f->have_steal && f->steal_share >= 0.10) {
		lower(&v->primary);
		for (unsigned i = 0; i < v->nalso; i++)
			lower(&v->also[i]);
	}
	if (cpu)
		cpu_split(f, v);
	prs_scaling_evidence(f, v->scaling, sizeof(v->scaling));
	if (v->primary.rule == PRS_RULE_CPU)
		cpu_lever(f, v, v->lever, sizeof(v->lever));
	else if (v->primary.rule == PRS_RULE_SATURATED && !prs_oversubscribed(f))
		snprintf(v->lever, sizeof(v->lever), "the machine is busy with other work: the program "
			 "wants %.2f CPUs and got %.2f; measure on a quiet machine or give it dedicated "
			 "CPUs (taskset, a cpuset)", demand(f), f->budget.U);
	else
		snprintf(v->lever, sizeof(v->lever), "%s", rules[v->primary.rule].lever);
	qualify(f, v);
}
