/* SPDX-License-Identifier: MIT */
/*
 * phase1.md, the playbook's Phase-1 artifact for a person: the target, the command and its facts,
 * the dimensions table, the time budget, the verdict with its evidence and the lever. The same
 * facts as phase1.json, in the same order.
 */
#include "report/phase1-internal.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "pyrsprof/export.h"
#include "report/report-internal.h"

#include "util/banned.h"

static double pct(double x)
{
	return 100 * x;
}

/* A string from the target, as Markdown text. */
static void text(FILE *f, const char *s)
{
	struct prs_buf b;
	const char *t;

	prs_buf_init(&b);
	t = prs_utf8_clean(s, strlen(s), &b, NULL);
	prs_md_text(f, t ? t : "?");
	prs_buf_release(&b);
}

static void bytes(FILE *f, double v)
{
	if (v >= 1e9)
		fprintf(f, "%.2f GB", v / 1e9);
	else if (v >= 1e6)
		fprintf(f, "%.1f MB", v / 1e6);
	else if (v >= 1e3)
		fprintf(f, "%.1f kB", v / 1e3);
	else
		fprintf(f, "%.0f B", v);
}

bool prs_phase1_measure(const struct prs_report_ctx *c, const char *metric, double *out)
{
	const struct prs_facts *f = c->facts;

	if (strcmp(metric, "wall") == 0 && f->duration_s > 0)
		*out = f->duration_s;
	else if (strcmp(metric, "cpu") == 0 && (f->have_proc || f->samples > 0))
		*out = f->have_proc ? f->cpu_s : f->budget.U * f->duration_s;
	else if (strcmp(metric, "rss") == 0 && f->have_rss)
		*out = (double)f->rss_peak_kb * 1024;
	else
		return false;
	return true;
}

static void target_md(FILE *f, const struct prs_report_ctx *c)
{
	const struct prs_target *t = &c->inputs->target;
	double m;

	fputs("## Phase 0: target\n\n", f);
	if (!c->inputs->have_target) {
		fputs("No target given (`--target 'wall<2s'`): say what fast enough means before "
		      "optimizing.\n\n", f);
		return;
	}
	fputs("Target `", f);
	text(f, t->expr);
	if (!prs_phase1_measure(c, t->metric, &m)) {
		fputs("`: not measured in this recording.\n\n", f);
		return;
	}
	fprintf(f, "`: measured %s%.3g%s, **%s**.\n\n", "", strcmp(t->metric, "rss") ? m : m / 1e6,
		strcmp(t->metric, "rss") ? " s" : " MB", prs_target_met(t, m) ? "met" : "not met");
}

static void facts_md(FILE *f, const struct prs_facts *fa)
{
	const struct prs_budget *b = &fa->budget;

	fputs("## The workload\n\n| fact | value |\n| --- | --- |\n", f);
	fputs("| command | ", f);
	text(f, fa->command[0] ? fa->command : "?");
	fprintf(f, " |\n| duration | %.2f s%s |\n", fa->duration_s, fa->complete ? "" : " (interrupted)");
	fprintf(f, "| processes, threads | %u, %u (%u active, %u idle left out) |\n", fa->processes,
		fa->threads_seen, b->active, b->idle);
	if (fa->have_proc)
		fprintf(f, "| CPU time | %.2f s (user %.2f s, system %.2f s): %.2f cores of %u |\n", fa->cpu_s,
			fa->user_s, fa->sys_s, b->U, fa->ncpus);
	else
		fprintf(f, "| CPU time | %.2f s from the samples: %.2f cores of %u |\n",
			b->U * fa->duration_s, b->U, fa->ncpus);
	if (fa->have_rss) {
		fputs("| RSS peak | ", f);
		bytes(f, (double)fa->rss_peak_kb * 1024);
		fputs(" |\n", f);
	}
	if (fa->have_io) {
		fputs("| IO: storage read, written | ", f);
		bytes(f, (double)fa->read_bytes);
		fputs(", ", f);
		bytes(f, (double)fa->write_bytes);
		fputs(" |\n", f);
	}
	if (fa->have_chars) {
		fputs("| IO: all reads, writes (any fd) | ", f);
		bytes(f, (double)fa->rchar);
		fputs(", ", f);
		bytes(f, (double)fa->wchar);
		fputs(" |\n", f);
	}
	if (fa->have_syscalls)
		fprintf(f, "| syscalls: read, write | %" PRIu64 ", %" PRIu64 " |\n", fa->syscr, fa->syscw);
	else if (fa->have_io)
		fputs("| syscalls: read, write | not measured (the exit's accounting came from taskstats or "
		      "rusage, which do not count them exactly) |\n", f);
	if (fa->have_csw)
		fprintf(f, "| context switches: voluntary, involuntary | %" PRIu64 ", %" PRIu64 " |\n",
			fa->nvcsw, fa->nivcsw);
	if (fa->have_switches)
		fprintf(f, "| switch-outs (perf records): preempted, voluntary | %" PRIu64 " (%.2f s "
			"waiting for a CPU after them), %" PRIu64 " (%.2f s off-CPU); the sampler's stops "
			"%" PRIu64 "%s |\n", fa->sw.preempt, fa->sw.preempt_s, fa->sw.voluntary,
			fa->sw.voluntary_s, fa->sw.stops, fa->sw.lost ? " (records lost: a floor)" : "");
	if (fa->have_wss)
		fprintf(f, "| working set (--wss, median of %u windows of %.0f ms; largest) | %.1f MiB; "
			"%.1f MiB |\n", fa->wss_samples, 1e3 * fa->wss_window_s, fa->wss_bytes / 1048576,
			fa->wss_max_bytes / 1048576);
	if (fa->have_faults)
		fprintf(f, "| page faults: minor, major | %" PRIu64 ", %" PRIu64 " |\n", fa->minflt, fa->majflt);
	fprintf(f, "| sampling | %.0f samples at %g Hz", fa->samples, fa->rate_hz);
	if (fa->have_ticks)
		fprintf(f, "; %" PRIu64 " ticks, %" PRIu64 " missed; %" PRIu64 " read errors", fa->ticks,
			fa->missed_ticks, fa->read_errors);
	fputs(" |\n", f);
	if (fa->have_steal)
		fprintf(f, "| host | steal %.1f %% of the CPUs' time; CPUs %.0f %% idle |\n",
			pct(fa->steal_share), pct(fa->idle_share));
	if (fa->have_cgroup && fa->has_quota)
		fprintf(f, "| cgroup CPU quota | %.2f CPUs; throttled %.2f s in %" PRIu64 " of %" PRIu64
			" periods |\n", fa->quota_cpus, fa->throttled_s, fa->nr_throttled, fa->nr_periods);
	fputc('\n', f);
}

static void dims_md(FILE *f, const struct prs_phase_inputs *in)
{
	fputs("## Dimensions\n\n", f);
	if (!in->ndims) {
		fputs("None given (`--dim NAME=TYPICAL[..MAX]`, repeatable): list every input dimension "
		      "with its realistic range and max; the dominating one drives the design.\n\n", f);
		return;
	}
	fputs("| dimension | typical | max | grows? | notes |\n| --- | --- | --- | --- | --- |\n", f);
	for (size_t i = 0; i < in->ndims; i++) {
		fputs("| ", f);
		text(f, in->dims[i].name);
		fputs(" | ", f);
		text(f, in->dims[i].typical);
		fputs(" | ", f);
		text(f, in->dims[i].max[0] ? in->dims[i].max : "?");
		if (in->dims[i].have_growth) {
			fputs(" | ", f);
			text(f, in->dims[i].growth);
			fputs(" | measured by `pyrsprof sweep` (", f);
			text(f, in->dims[i].growth_from);
			fputs(") |\n", f);
		} else {
			fputs(" | not measured | `pyrsprof sweep ... --phase1 DIR` fills the growth |\n", f);
		}
	}
	fputc('\n', f);
}

static void budget_md(FILE *f, const struct prs_facts *fa)
{
	const struct prs_budget *b = &fa->budget;

	fprintf(f, "## Time budget\n\n%u active thread%s of %zu (%u idle left out), %.2f thread-seconds; "
		"on-CPU and run-queue time from %s.\n\n| where the time went | share | seconds |\n"
		"| --- | ---: | ---: |\n", b->active, b->active == 1 ? "" : "s", fa->nthreads, b->idle,
		b->T, fa->kernel_threads ? "kernel accounting" : "the samples");
	for (int r = 0; r < PRS_R__COUNT; r++)
		if (b->f[r] > 0.0005 || r == PRS_R_CPU)
			fprintf(f, "| %s | %.1f %% | %.2f |\n", prs_reason_label(r), pct(b->f[r]), b->f[r] * b->T);
	if (fa->ncpus)
		fprintf(f, "\nCores used: %.2f of %u CPU%s.\n", b->U, fa->ncpus, fa->ncpus == 1 ? "" : "s");
	else
		fprintf(f, "\nCores used: %.2f (the number of CPUs is unknown).\n", b->U);
	fputs("\n| thread | name | active | Python | on-CPU | of it in the kernel | waiting for a CPU | IO | "
	      "GIL wait | lock | sleep | other | holds the GIL |\n| ---: | --- | --- | --- | ---: | ---: | ---: | "
	      "---: | ---: | ---: | ---: | ---: | ---: |\n", f);
	for (size_t i = 0; i < fa->nthreads && i < 64; i++) {
		const struct prs_thread_facts *t = &fa->threads[i];
		double w = t->wall_s > 0 ? t->wall_s : 1;
		double io = t->t[PRS_R_IO_DISK] + t->t[PRS_R_IO_NET] + t->t[PRS_R_PAGING];
		double other = t->t[PRS_R_CHILD] + t->t[PRS_R_OTHER] + t->t[PRS_R_UNSEEN];
		char gil_wait[32], sys[32] = "";

		/* a Python thread's GIL waits are told from its lock waits only when the sampler
		 * measured them (else they count as lock waits) */
		if (fa->gil_measured || !t->python)
			snprintf(gil_wait, sizeof(gil_wait), "%.0f %%", pct(t->t[PRS_R_GIL] / w));
		else
			snprintf(gil_wait, sizeof(gil_wait), "not measured");

		/* the kernel's user/system split of its on-CPU time (system calls, page faults) */
		if (t->have_system)
			snprintf(sys, sizeof(sys), "%.0f %%", pct(t->system_share));
		fprintf(f, "| %d | ", t->tid);
		text(f, t->name);
		fprintf(f, " | %s | %s | %.0f %% | %s | %.0f %% | %.0f %% | %s | %.0f %% | %.0f %% | %.0f %% | ",
			t->idle ? "idle" : "yes", t->python ? "yes" : "", pct(t->t[PRS_R_CPU] / w), sys,
			pct(t->t[PRS_R_RUNQ] / w), pct(io / w), gil_wait, pct(t->t[PRS_R_LOCK] / w),
			pct(t->t[PRS_R_SLEEP] / w), pct(other / w));
		if (t->python && t->samples > 0)
			fprintf(f, "%.0f %% |\n", pct(t->gil_hold / t->samples));
		else
			fputs("|\n", f);
	}
	if (fa->nthreads > 64)
		fprintf(f, "\n%zu more threads in phase1.json.\n", fa->nthreads - 64);
	fputc('\n', f);
}

static void hit_md(FILE *f, const char *prefix, const struct prs_rule_hit *h)
{
	const struct prs_rule_def *d = prs_rule_def(h->rule);

	fprintf(f, "- %s**", prefix);
	text(f, h->label);
	fprintf(f, "** (rule `%s`, confidence %s): %s = %.3f against %.2f (%s). ", d->id,
		prs_confidence_name(h->confidence), d->metric, h->value, h->threshold, d->condition);
	text(f, h->detail);
	fputs(". Source: ", f);
	text(f, d->source);
	fputs(".\n", f);
}

static void verdict_md(FILE *f, const struct prs_facts *fa, const struct prs_verdict *v)
{
	bool cpu = v->primary.rule == PRS_RULE_CPU;

	fputs("## Bound: verdict and evidence\n\n", f);
	if (!v->have) {
		fputs("No samples: nothing to judge.\n\n", f);
		return;
	}
	hit_md(f, "", &v->primary);
	for (unsigned i = 0; i < v->nalso; i++) {
		hit_md(f, "also: ", &v->also[i]);
		cpu |= v->also[i].rule == PRS_RULE_CPU;
	}
	if (cpu) {
		fprintf(f, "- CPU split: **%s** (confidence %s): ", prs_cpu_split_name(v->split),
			prs_confidence_name(v->split_confidence));
		text(f, v->split_detail);
		fputs(".\n", f);
		for (unsigned i = 0; i < v->nevidence; i++) {
			fputs("  - ", f);
			text(f, v->evidence[i]);
			fputc('\n', f);
		}
	}
	if (v->cpus)
		fprintf(f, "- Parallelism: %.2f cores used by %u active thread%s on %u CPU%s: efficiency "
			"%.0f %%.\n", v->cores_used, v->threads_active, v->threads_active == 1 ? "" : "s",
			v->cpus, v->cpus == 1 ? "" : "s", pct(v->efficiency));
	else
		fprintf(f, "- Parallelism: %.2f cores used by %u active thread%s (the number of CPUs is "
			"unknown).\n", v->cores_used, v->threads_active, v->threads_active == 1 ? "" : "s");
	if (v->scaling[0]) {
		fputs("- ", f); /* "scaling (--scaling VAR=..." */
		text(f, v->scaling);
		fputs(".\n", f);
	}
	for (unsigned i = 0; i < v->nqualifiers; i++) {
		fputs("- Qualifier: ", f);
		text(f, v->qualifiers[i]);
		fputs(".\n", f);
	}
	fputs("\n## Lever\n\n", f);
	text(f, v->lever);
	fputs(".\n\n", f);
	(void)fa;
}

static void counters_md(FILE *f, const struct prs_facts *fa)
{
	if (!fa->counters.n)
		return;
	fputs("## Counters\n\n| counter | count | scaled | running |\n| --- | ---: | ---: | ---: |\n", f);
	for (size_t i = 0; i < fa->counters.n; i++) {
		const struct prs_counter *c = &fa->counters.c[i];
		double v, share;

		fputs("| ", f);
		text(f, c->name);
		if (prs_counter_scaled(&fa->counters, c->name, &v, &share))
			fprintf(f, " | %" PRIu64 " | %.0f | %.0f %% |\n", c->value, v, pct(share));
		else {
			fputs(" | ", f);
			text(f, c->why[0] ? c->why : "not read");
			fputs(" | | |\n", f);
		}
	}
	fputc('\n', f);
}

static void machine_md(FILE *f, const struct prs_facts *fa)
{
	const struct prs_machine *m = &fa->machine;

	if (!fa->have_machine)
		return;
	fputs("## Machine\n\n", f);
	text(f, m->model[0] ? m->model : "?");
	fprintf(f, ", %u CPUs online, %u allowed; LLC %.0f MiB; memory %.1f GiB. ", m->cpus_online,
		m->cpus_allowed, m->llc_bytes / 1048576.0, m->mem_bytes / 1073741824.0);
	if (m->calibrated)
		fprintf(f, "Peak memory bandwidth (STREAM triad): %.1f GB/s all CPUs, %.1f GB/s one CPU. ",
			m->bw_all_mbs / 1e3, m->bw_one_mbs / 1e3);
	else
		fputs("Memory bandwidth not calibrated (`pyrsprof calibrate`). ", f);
	fputs("PMU: ", f);
	text(f, m->pmu == PRS_PMU_OK ? "hardware counters available" : m->pmu_why[0] ? m->pmu_why : "unknown");
	fputs(".\n\n", f);
}

int prs_phase1_md(FILE *f, const struct prs_report_ctx *c)
{
	const struct prs_facts *fa = c->facts;
	const struct prs_verdict *v = c->verdict;

	fputs("# Phase 1: the workload\n\n", f);
	if (v->have) {
		fputs("**Bound: ", f);
		text(f, v->primary.label);
		fprintf(f, "** (confidence %s). **Lever:** ", prs_confidence_name(v->primary.confidence));
		text(f, v->lever);
		fputs(".\n\n", f);
	}
	target_md(f, c);
	facts_md(f, fa);
	dims_md(f, c->inputs);
	budget_md(f, fa);
	verdict_md(f, fa, v);
	counters_md(f, fa);
	machine_md(f, fa);
	if (fa->nnotes) {
		fputs("## Notes\n\n", f);
		for (unsigned i = 0; i < fa->nnotes; i++) {
			fputs("- ", f);
			text(f, fa->notes[i]);
			fputc('\n', f);
		}
		fputc('\n', f);
	}
	fprintf(f, "Generated by pyrsprof; machine-readable: phase1.json (schema pyrsprof-phase1, "
		"version %d).\n", PRS_PHASE1_VERSION);
	return ferror(f) ? -EIO : 0;
}
