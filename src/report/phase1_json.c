/* SPDX-License-Identifier: MIT */
/*
 * phase1.json (schema docs/phase1.schema.json, "pyrsprof-phase1" version 1): the workload's facts,
 * the dimensions, the time budget, the verdict with its evidence and the lever, for programs to
 * read (`pyrsprof sweep` reads the verdict of each point). Quantities not measured are null,
 * never 0. Strings from the target are cleaned to UTF-8.
 */
#include "report/phase1-internal.h"

#include <math.h>
#include <string.h>

#include "pyrsprof/export.h"

#include "util/banned.h"

static json_t *str(const char *s)
{
	struct prs_buf b;
	size_t n;
	const char *t;
	json_t *j;

	prs_buf_init(&b);
	t = prs_utf8_clean(s, strlen(s), &b, &n);
	j = t ? json_stringn(t, n) : json_null();
	prs_buf_release(&b);
	return j;
}

static json_t *num(double v)
{
	return isfinite(v) ? json_real(v) : json_null();
}

static json_t *opt(bool have, double v)
{
	return have ? num(v) : json_null();
}

static json_t *uint_opt(bool have, uint64_t v)
{
	return have ? json_integer((json_int_t)v) : json_null();
}

static json_t *shares(const double *t, double denom)
{
	json_t *o = json_object();

	for (int r = 0; r < PRS_R__COUNT; r++)
		json_object_set_new(o, prs_reason_name(r), num(denom > 0 ? t[r] / denom : 0));
	return o;
}

static json_t *target_json(const struct prs_report_ctx *c)
{
	const struct prs_target *t = &c->inputs->target;
	double measured;
	bool have;

	if (!c->inputs->have_target)
		return json_null();
	have = prs_phase1_measure(c, t->metric, &measured);
	return json_pack("{s:o, s:s, s:s, s:o, s:o, s:o}", "expr", str(t->expr), "metric", t->metric,
			 "op", t->op, "value", num(t->value), "measured", opt(have, measured), "met",
			 have ? json_boolean(prs_target_met(t, measured)) : json_null());
}

/* The perf switch records: preempted (time waiting for a CPU after) vs voluntary switch-outs. */
static json_t *switches_json(const struct prs_facts *f)
{
	const struct prs_switch_facts *s = &f->sw;
	uint64_t all = s->preempt + s->voluntary;

	if (!f->have_switches)
		return json_null();
	return json_pack("{s:I, s:I, s:I, s:I, s:o, s:o, s:o}", "preempted", (json_int_t)s->preempt,
			 "voluntary", (json_int_t)s->voluntary, "sampler_stops", (json_int_t)s->stops,
			 "lost", (json_int_t)s->lost, "preempted_share",
			 all ? num((double)s->preempt / (double)all) : json_null(), "preempted_wait_s",
			 num(s->preempt_s), "voluntary_off_s", num(s->voluntary_s));
}

/* The re-runs of --scaling. */
static json_t *scaling_json(const struct prs_facts *f)
{
	json_t *runs;

	if (!f->nscaling)
		return json_null();
	runs = json_array();
	for (unsigned i = 0; i < f->nscaling; i++)
		json_array_append_new(runs, json_pack("{s:o, s:o, s:o, s:i}", "value",
						      str(f->scaling[i].value), "wall_s",
						      num(f->scaling[i].wall_s), "cpu_s",
						      num(f->scaling[i].cpu_s), "exit_code", f->scaling[i].rc));
	return json_pack("{s:o, s:o}", "variable", str(f->scaling_var), "runs", runs);
}

static json_t *facts_json(const struct prs_facts *f)
{
	const struct prs_budget *b = &f->budget;
	json_t *o = json_pack("{s:i, s:i, s:i, s:i, s:o, s:o, s:o, s:o, s:i}", "processes",
			      (int)f->processes, "threads", (int)f->threads_seen, "threads_active",
			      (int)b->active, "threads_idle", (int)b->idle, "cpu_s",
			      num(f->have_proc ? f->cpu_s : b->U * f->duration_s), "user_s",
			      opt(f->have_proc, f->user_s), "system_s", opt(f->have_proc, f->sys_s),
			      "cores_used", num(b->U), "cpus", (int)f->ncpus);

	json_object_set_new(o, "cpu_source", json_string(f->have_proc ? "kernel" : "samples"));
	json_object_set_new(o, "rss_peak_bytes", uint_opt(f->have_rss, f->rss_peak_kb * 1024));
	json_object_set_new(o, "io", f->have_io ? json_pack("{s:I, s:I, s:o, s:o}", "read_bytes",
							     (json_int_t)f->read_bytes, "write_bytes",
							     (json_int_t)f->write_bytes, "rchar",
							     uint_opt(f->have_chars, f->rchar), "wchar",
							     uint_opt(f->have_chars, f->wchar))
						: json_null());
	json_object_set_new(o, "syscalls", f->have_syscalls ? json_pack("{s:I, s:I}", "read",
									 (json_int_t)f->syscr, "write",
									 (json_int_t)f->syscw)
							    : json_null());
	json_object_set_new(o, "context_switches",
			    f->have_csw ? json_pack("{s:I, s:I}", "voluntary", (json_int_t)f->nvcsw,
						    "involuntary", (json_int_t)f->nivcsw)
					: json_null());
	json_object_set_new(o, "switch_records", switches_json(f));
	json_object_set_new(o, "scaling", scaling_json(f));
	json_object_set_new(o, "working_set",
			    f->have_wss ? json_pack("{s:o, s:o, s:o, s:i, s:o}", "bytes", num(f->wss_bytes),
						    "max_bytes", num(f->wss_max_bytes),
						    "window_s", num(f->wss_window_s), "windows",
						    (int)f->wss_samples, "dram_floor_gbs",
						    f->wss_floor_gbs > 0 ? num(f->wss_floor_gbs) : json_null())
					: json_null());
	json_object_set_new(o, "faults", f->have_faults ? json_pack("{s:I, s:I}", "minor",
								     (json_int_t)f->minflt, "major",
								     (json_int_t)f->majflt)
							 : json_null());
	return o;
}

static json_t *recording_json(const struct prs_facts *f)
{
	return json_pack("{s:o, s:o, s:b, s:o, s:o, s:o, s:o}", "duration_s", num(f->duration_s),
			 "rate_hz", num(f->rate_hz), "complete", f->complete, "samples", num(f->samples),
			 "ticks", uint_opt(f->have_ticks, f->ticks), "missed_ticks",
			 uint_opt(f->have_ticks, f->missed_ticks), "read_errors",
			 uint_opt(f->have_ticks, f->read_errors));
}

static json_t *dims_json(const struct prs_phase_inputs *in)
{
	json_t *a = json_array();

	for (size_t i = 0; i < in->ndims; i++) {
		const struct prs_dim *d = &in->dims[i];
		char from[320];

		snprintf(from, sizeof(from), "growth of wall time measured by pyrsprof sweep (%s)",
			 d->growth_from);
		json_array_append_new(a, json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:s}", "name",
						   str(d->name), "typical", str(d->typical), "max",
						   d->max[0] ? str(d->max) : json_null(), "growth",
						   d->have_growth ? str(d->growth) : json_null(),
						   "growth_exponent",
						   d->have_growth && isfinite(d->exponent) ? num(d->exponent)
											  : json_null(),
						   "growth_r2",
						   d->have_growth && isfinite(d->r2) ? num(d->r2) : json_null(),
						   "notes", d->have_growth ? from
						   : "growth not measured: `pyrsprof sweep --dim NAME=V1,V2,... "
						     "--phase1 DIR` or `pyrsprof report --sweep SWEEP.json` fills it"));
	}
	return a;
}

static json_t *budget_json(const struct prs_facts *f)
{
	const struct prs_budget *b = &f->budget;
	json_t *threads = json_array(), *o;

	for (size_t i = 0; i < f->nthreads; i++) {
		const struct prs_thread_facts *t = &f->threads[i];

		json_array_append_new(threads,
				      json_pack("{s:i, s:o, s:b, s:b, s:b, s:o, s:o, s:o, s:o, s:o}", "tid", t->tid,
						"name", str(t->name), "active", !t->idle && t->wall_s > 0,
						"python", t->python, "kernel_accounting", t->kernel,
						"wall_s", num(t->wall_s), "shares", shares(t->t, t->wall_s),
						"user_s", opt(t->have_system, t->t[PRS_R_CPU] * (1 - t->system_share)),
						"system_s", opt(t->have_system, t->t[PRS_R_CPU] * t->system_share),
						"gil", f->gil_measured || t->gil_hold > 0
							? json_pack("{s:o, s:o}", "hold_share",
								    num(t->samples > 0 ? t->gil_hold / t->samples : 0),
								    "wait_share",
								    f->gil_measured ? num(t->samples > 0 ? t->gil_wait / t->samples : 0)
										    : json_null())
							: json_null()));
	}
	o = json_pack("{s:o, s:o, s:o, s:o, s:b, s:b, s:b, s:o}", "thread_seconds", num(b->T),
		      "shares", shares(b->f, 1), "io_share", num(b->f_io), "unattributed",
		      num(b->unattributed), "kernel_accounting", f->kernel_threads, "runqueue_doubted",
		      f->runq_doubted, "gil_measured", f->gil_measured, "threads", threads);
	return o;
}

static json_t *hit_json(const struct prs_rule_hit *h)
{
	const struct prs_rule_def *d = prs_rule_def(h->rule);

	return json_pack("{s:s, s:o, s:s, s:o, s:o, s:s, s:s, s:s, s:o}", "id", d->id, "label",
			 str(h->label), "confidence", prs_confidence_name(h->confidence), "value",
			 num(h->value), "threshold", num(h->threshold), "metric", d->metric, "condition",
			 d->condition, "source", d->source, "detail", str(h->detail));
}

static json_t *verdict_json(const struct prs_facts *f, const struct prs_verdict *v)
{
	json_t *o, *also, *ev, *q, *split;
	bool cpu = v->primary.rule == PRS_RULE_CPU;

	if (!v->have)
		return json_null();
	also = json_array();
	ev = json_array();
	q = json_array();
	split = json_null();
	for (unsigned i = 0; i < v->nalso; i++) {
		json_array_append_new(also, hit_json(&v->also[i]));
		cpu |= v->also[i].rule == PRS_RULE_CPU;
	}
	for (unsigned i = 0; i < v->nevidence; i++)
		json_array_append_new(ev, str(v->evidence[i]));
	for (unsigned i = 0; i < v->nqualifiers; i++)
		json_array_append_new(q, str(v->qualifiers[i]));
	if (cpu)
		split = json_pack("{s:s, s:b, s:s, s:o, s:o}", "class", prs_cpu_split_name(v->split),
				  "measured", v->split != PRS_SPLIT_NOT_MEASURED, "confidence",
				  prs_confidence_name(v->split_confidence), "detail", str(v->split_detail),
				  "evidence", ev);
	else
		json_decref(ev);
	o = hit_json(&v->primary);
	json_object_set_new(o, "also", also);
	json_object_set_new(o, "cpu_split", split);
	json_object_set_new(o, "parallelism",
			    json_pack("{s:o, s:i, s:i, s:o, s:o}", "cores_used", num(v->cores_used),
				      "threads_active", (int)v->threads_active, "cpus", (int)v->cpus,
				      "efficiency", num(v->efficiency), "scaling",
				      v->scaling[0] ? str(v->scaling) : json_null()));
	json_object_set_new(o, "lever", str(v->lever));
	json_object_set_new(o, "qualifiers", q);
	(void)f;
	return o;
}

static json_t *host_json(const struct prs_facts *f)
{
	json_t *cg = json_null();

	if (f->have_cgroup)
		cg = json_pack("{s:o, s:i, s:o, s:o, s:I, s:I}", "path", str(f->cg_path), "version",
			       f->cg_version, "quota_cpus", opt(f->has_quota, f->quota_cpus),
			       "throttled_s", num(f->throttled_s), "nr_periods",
			       (json_int_t)f->nr_periods, "nr_throttled", (json_int_t)f->nr_throttled);
	return json_pack("{s:o, s:o, s:o}", "steal_share", opt(f->have_steal, f->steal_share),
			 "cpus_idle_share", opt(f->have_steal, f->idle_share), "cgroup", cg);
}

static const char *pmu_name(int s)
{
	switch (s) {
	case PRS_PMU_OK:
		return "available";
	case PRS_PMU_NONE:
		return "none";
	case PRS_PMU_NOT_PERMITTED:
		return "not permitted";
	case PRS_PMU_ERROR:
		return "error";
	default:
		return "unknown";
	}
}

static json_t *machine_json(const struct prs_facts *f)
{
	const struct prs_machine *m = &f->machine;

	if (!f->have_machine)
		return json_null();
	return json_pack("{s:o, s:i, s:i, s:I, s:I, s:I, s:s, s:o, s:o, s:o}", "model", str(m->model),
			 "cpus_online", (int)m->cpus_online,
			 "cpus_allowed", (int)m->cpus_allowed, "llc_bytes", (json_int_t)m->llc_bytes,
			 "l2_bytes", (json_int_t)m->l2_bytes, "mem_bytes", (json_int_t)m->mem_bytes,
			 "pmu", pmu_name(m->pmu), "pmu_detail", str(m->pmu_why), "bw_all_mbs",
			 opt(m->calibrated, m->bw_all_mbs), "bw_one_mbs", opt(m->calibrated, m->bw_one_mbs));
}

static json_t *counters_json(const struct prs_facts *f)
{
	json_t *a = json_array();

	for (size_t i = 0; i < f->counters.n; i++) {
		const struct prs_counter *c = &f->counters.c[i];
		double scaled = 0, share = 0;
		bool ok = prs_counter_scaled(&f->counters, c->name, &scaled, &share);

		json_array_append_new(a, json_pack("{s:o, s:o, s:o, s:o, s:o}", "name", str(c->name),
						   "value", uint_opt(c->ok, c->value), "scaled",
						   opt(ok, scaled), "running_share", opt(ok, share),
						   "error", c->ok ? json_null() : str(c->why)));
	}
	return a;
}

json_t *prs_phase1_json(const struct prs_report_ctx *c)
{
	const struct prs_facts *f = c->facts;
	json_t *notes = json_array(), *root;

	for (unsigned i = 0; i < f->nnotes; i++)
		json_array_append_new(notes, str(f->notes[i]));
	root = json_pack("{s:s, s:i, s:o, s:o}", "schema", "pyrsprof-phase1", "version",
			 PRS_PHASE1_VERSION, "command", str(f->command), "mode", str(f->mode));
	if (!root) {
		json_decref(notes);
		return NULL;
	}
	json_object_set_new(root, "recording", recording_json(f));
	json_object_set_new(root, "target", target_json(c));
	json_object_set_new(root, "facts", facts_json(f));
	json_object_set_new(root, "dimensions", dims_json(c->inputs));
	json_object_set_new(root, "time_budget", budget_json(f));
	json_object_set_new(root, "verdict", verdict_json(f, c->verdict));
	json_object_set_new(root, "host", host_json(f));
	json_object_set_new(root, "machine", machine_json(f));
	json_object_set_new(root, "counters", counters_json(f));
	json_object_set_new(root, "notes", notes);
	return root;
}
