/* SPDX-License-Identifier: MIT */
/*
 * sweep.md and sweep.json: the points of a sweep, their spreads, the fits and what they say in
 * the playbook's terms (Phase 3's swept benchmark, Phase 1's "grows?" column), the verdict along
 * the sweep and the failures. The JSON is described by docs/sweep.schema.json.
 */
#include "pyrsprof/sweep.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <string.h>

#include "pyrsprof/export.h"
#include "report/report-internal.h"
#include "report/sweep-internal.h"

#include "util/banned.h"

static const char *const metric_names[PRS_SWEEP_METRICS] = { "wall", "CPU" };

/* ---- sweep.md ---- */

static void md_spread(FILE *f, const struct prs_spread *sp)
{
	if (sp->n == 0)
		fputs(" — | — | — |", f);
	else
		fprintf(f, " %.3f | %.3f | %.3f |", sp->min, sp->median, sp->max);
}

static void md_points(FILE *f, const struct prs_sweep *s)
{
	char num[32], dir[128];

	fputs("| ", f);
	prs_md_text(f, s->dim);
	fputs(" | runs ok | wall best s | wall median | wall slowest | CPU best s | CPU median "
	      "| CPU slowest | CPU/wall | peak RSS MB | verdict | folder |\n", f);
	fputs("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |\n", f);
	for (size_t i = 0; i < s->npoints; i++) {
		const struct prs_sweep_point *p = &s->points[i];

		prs_sweep_run_dir(s, i, 0, dir, sizeof(dir));
		*strrchr(dir, '/') = '\0';
		fprintf(f, "| %s | %zu/%zu |", prs_sweep_num(p->value, num, sizeof(num)), p->ok, s->repeat);
		md_spread(f, &p->wall);
		md_spread(f, &p->cpu);
		if (p->ok && p->wall.median > 0)
			fprintf(f, " %.2f |", p->cpu.median / p->wall.median);
		else
			fputs(" — |", f);
		if (p->ok)
			fprintf(f, " %.1f |", p->rss_kb.median / 1024);
		else
			fputs(" — |", f);
		fputc(' ', f);
		if (p->verdict && p->verdict[0])
			prs_md_text(f, p->verdict);
		else
			fputs("not available", f);
		fputs(" | ", f);
		prs_md_text(f, dir);
		fputs(" |\n", f);
	}
}

/* "wall O(n), CPU O(n)" or "wall n^1.45, CPU no fit": the dimensions table's "grows?" cell. */
static void md_grows(FILE *f, const struct prs_sweep *s)
{
	char order[64];

	for (int m = 0; m < PRS_SWEEP_METRICS; m++) {
		const struct prs_fit *fit = &s->fit[m];

		fprintf(f, "%s%s ", m ? ", " : "", metric_names[m]);
		if (fit->status != 0) {
			fputs("not fitted", f);
			continue;
		}
		prs_fit_order(fit, s->dim, order, sizeof(order), NULL);
		prs_md_text(f, order);
	}
}

static void md_dimension(FILE *f, const struct prs_sweep *s)
{
	char lo[32], hi[32];

	fputs("## Dimensions (Phase 1)\n\n| dimension | swept | grows? | notes |\n"
	      "| --- | --- | --- | --- |\n| ", f);
	prs_md_text(f, s->dim);
	fprintf(f, " | %s – %s (%zu values) | ", prs_sweep_num(s->points[0].value, lo, sizeof(lo)),
		prs_sweep_num(s->points[s->npoints - 1].value, hi, sizeof(hi)), s->npoints);
	md_grows(f, s);
	fputs(" | ", f);
	if (s->fit[PRS_SWEEP_WALL].status == 0)
		fprintf(f, "exponent %.2f (wall), fitted on %zu values", s->fit[PRS_SWEEP_WALL].exponent,
			s->fit[PRS_SWEEP_WALL].n);
	fputs(" |\n\n", f);
}

static void md_verdicts(FILE *f, const struct prs_sweep *s)
{
	size_t from = 0, to, changes = 0;

	fputs("## Verdict along the sweep\n\n", f);
	if (!s->any_verdict) {
		fputs("verdict: not available (no recording has a phase1.json)\n\n", f);
		return;
	}
	while (prs_sweep_next_change(s, &from, &to)) {
		fprintf(f, "- changes between %s=%s and %s=%s: ", s->dim, s->points[from].text, s->dim,
			s->points[to].text);
		prs_md_text(f, s->points[from].verdict);
		fputs(" → ", f);
		prs_md_text(f, s->points[to].verdict);
		fputc('\n', f);
		changes++;
		from = to;
	}
	if (changes == 0) {
		fputs("The same verdict at every value: ", f);
		for (size_t i = 0; i < s->npoints; i++)
			if (s->points[i].verdict && s->points[i].verdict[0]) {
				prs_md_text(f, s->points[i].verdict);
				break;
			}
		fputc('\n', f);
	}
	fputc('\n', f);
}

static void md_failures(FILE *f, const struct prs_sweep *s)
{
	char dir[128];
	bool any = false;

	for (size_t i = 0; i < s->npoints; i++)
		for (size_t r = 0; r < s->repeat; r++) {
			const struct prs_sweep_run *run = &s->points[i].runs[r];

			if (!run->done || prs_sweep_run_ok(run))
				continue;
			if (!any)
				fputs("## Failures\n\n", f);
			any = true;
			prs_sweep_run_dir(s, i, r, dir, sizeof(dir));
			fprintf(f, "- %s=%s run %zu: ", s->dim, s->points[i].text, r + 1);
			prs_md_text(f, run->problem);
			fputs(" (output: ", f);
			prs_md_text(f, dir);
			fputs("/output.log)\n", f);
		}
	if (any)
		fputc('\n', f);
}

int prs_sweep_write_md(FILE *f, const struct prs_sweep *s)
{
	struct prs_buf b;
	const char *cmd;
	char line[256];

	prs_buf_init(&b);
	cmd = prs_sweep_command(s, &b);
	fputs("# pyrsprof sweep along ", f);
	prs_md_text(f, s->dim);
	fputs("\n\nCommand: ", f);
	prs_md_text(f, cmd ? cmd : "?");
	prs_buf_release(&b);
	fprintf(f, "\n\n%zu values, %zu run%s each, every run recorded by `pyrsprof run` at %g Hz "
		"into its folder (profile, flame graphs, output.log).%s\n\n", s->npoints, s->repeat,
		s->repeat == 1 ? "" : "s", s->rate_hz,
		s->interrupted ? " **Interrupted**: the runs not made are missing." : "");
	fputs("## Scaling (Phase 3: the swept benchmark)\n\n", f);
	for (int m = 0; m < PRS_SWEEP_METRICS; m++) {
		fputs("- ", f);
		prs_md_text(f, prs_fit_text(&s->fit[m], metric_names[m], s->dim, line, sizeof(line)));
		fputc('\n', f);
	}
	fprintf(f, "\nLeast squares of log(time) on log(%s) over the fastest run of each value (best "
		"of %zu: other work on the machine only adds time); an exponent within ±%g of 0, ½, 1, "
		"2 or 3 is named by that order when R² ≥ %g. Wall: the recording's duration (exec to "
		"exit); CPU: user + sys of the process tree; CPU/wall and RSS: medians.\n\n", s->dim,
		s->repeat, PRS_SWEEP_ORDER_TOL, PRS_SWEEP_MIN_R2);
	if (prs_sweep_too_short(s) > 0)
		fprintf(f, "**Short runs**: the fastest took %.3f s; start-up and timer noise weigh on "
			"runs under %g s, so the slope may not be the work's: use larger values.\n\n",
			prs_sweep_too_short(s), PRS_SWEEP_SHORT_S);
	if (prs_sweep_busy(s))
		fprintf(f, "**The machine was busy**: load average %.1f before and %.1f after on %u "
			"CPUs, so the runs waited for a CPU and the wall times hold that wait; the CPU "
			"times do not.\n\n", s->load_start, s->load_end, s->cpus);
	for (size_t i = 0; i < s->npoints; i++)
		if (s->points[i].ok) {
			fprintf(f, "Baseline (smallest value, %s=%s): wall %.3f s, CPU %.3f s "
				"(median of %zu).\n\n", s->dim, s->points[i].text, s->points[i].wall.median,
				s->points[i].cpu.median, s->points[i].ok);
			break;
		}
	md_dimension(f, s);
	fputs("## Points\n\n", f);
	md_points(f, s);
	fputc('\n', f);
	md_verdicts(f, s);
	md_failures(f, s);
	return ferror(f) ? -EIO : 0;
}

/* ---- sweep.json ---- */

/* Adds key: value to o; false when out of memory. */
static bool put(json_t *o, const char *key, json_t *v)
{
	return v && json_object_set_new(o, key, v) == 0;
}

static json_t *num_or_null(double v)
{
	return isfinite(v) ? json_real(v) : json_null();
}

static json_t *spread_json(const struct prs_spread *sp)
{
	if (sp->n == 0)
		return json_null();
	return json_pack("{s:f, s:f, s:f}", "median", sp->median, "min", sp->min, "max", sp->max);
}

static json_t *fit_json(const struct prs_sweep *s, int m)
{
	const struct prs_fit *f = &s->fit[m];
	char order[64], text[256];
	double nominal;
	bool named = prs_fit_order(f, s->dim, order, sizeof(order), &nominal);
	json_t *o = json_object();

	if (!o)
		return NULL;
	prs_fit_text(f, metric_names[m], s->dim, text, sizeof(text));
	if (put(o, "fitted", json_boolean(f->status == 0)) &&
	    put(o, "values", json_integer((json_int_t)f->n)) &&
	    put(o, "distinct_values", json_integer((json_int_t)f->distinct)) &&
	    put(o, "exponent", f->status == 0 ? num_or_null(f->exponent) : json_null()) &&
	    put(o, "coefficient", f->status == 0 ? num_or_null(f->coef) : json_null()) &&
	    put(o, "r2", f->status == 0 && f->has_r2 ? num_or_null(f->r2) : json_null()) &&
	    put(o, "order", named ? json_string(order) : json_null()) &&
	    put(o, "order_exponent", named ? json_real(nominal) : json_null()) &&
	    put(o, "statistic", json_string("min")) &&
	    put(o, "tolerance", json_real(PRS_SWEEP_ORDER_TOL)) && put(o, "text", json_string(text)))
		return o;
	json_decref(o);
	return NULL;
}

static json_t *run_json(const struct prs_sweep *s, size_t i, size_t r)
{
	const struct prs_sweep_run *run = &s->points[i].runs[r];
	char dir[128];
	json_t *o = json_object();

	prs_sweep_run_dir(s, i, r, dir, sizeof(dir));
	if (o && put(o, "dir", json_string(dir)) && put(o, "ok", json_boolean(prs_sweep_run_ok(run))) &&
	    put(o, "exit_status", run->status >= 0 ? json_integer(run->status) : json_null()) &&
	    put(o, "wall_s", run->measured ? json_real(run->wall_s) : json_null()) &&
	    put(o, "cpu_s", run->measured ? json_real(run->user_s + run->sys_s) : json_null()) &&
	    put(o, "user_s", run->measured ? json_real(run->user_s) : json_null()) &&
	    put(o, "sys_s", run->measured ? json_real(run->sys_s) : json_null()) &&
	    put(o, "peak_rss_kb", run->measured ? json_integer((json_int_t)run->rss_kb) : json_null()) &&
	    put(o, "verdict", run->verdict[0] ? json_string(run->verdict) : json_null()) &&
	    put(o, "problem", run->problem[0] ? json_string(run->problem) : json_null()))
		return o;
	json_decref(o);
	return NULL;
}

static json_t *point_json(const struct prs_sweep *s, size_t i)
{
	const struct prs_sweep_point *p = &s->points[i];
	json_t *o = json_object(), *runs = json_array();

	if (!o || !runs)
		goto fail;
	for (size_t r = 0; r < s->repeat; r++) {
		if (!p->runs[r].done)
			continue; /* not reached: the sweep was interrupted */
		if (json_array_append_new(runs, run_json(s, i, r)) != 0)
			goto fail;
	}
	/* an integral value exactly (a real is printed with 10 digits) */
	if (put(o, "value", p->value == floor(p->value) && p->value < 9007199254740992.0
				    ? json_integer((json_int_t)p->value)
				    : json_real(p->value)) && put(o, "text", json_string(p->text)) &&
	    put(o, "runs_ok", json_integer((json_int_t)p->ok)) &&
	    put(o, "wall_s", spread_json(&p->wall)) && put(o, "cpu_s", spread_json(&p->cpu)) &&
	    put(o, "peak_rss_kb", spread_json(&p->rss_kb)) &&
	    put(o, "verdict", p->verdict && p->verdict[0] ? json_string(p->verdict) : json_null()) &&
	    put(o, "runs", runs))
		return o;
	runs = NULL;
fail:
	json_decref(runs);
	json_decref(o);
	return NULL;
}

static json_t *changes_json(const struct prs_sweep *s)
{
	json_t *a = json_array();
	size_t from = 0, to;

	while (a && prs_sweep_next_change(s, &from, &to)) {
		json_t *c = json_pack("{s:f, s:f, s:s, s:s}", "from_value", s->points[from].value,
				      "to_value", s->points[to].value, "from", s->points[from].verdict,
				      "to", s->points[to].verdict);

		if (json_array_append_new(a, c) != 0) {
			json_decref(a);
			return NULL;
		}
		from = to;
	}
	return a;
}

static json_t *command_json(const struct prs_sweep *s)
{
	struct prs_buf clean;
	json_t *a = json_array();

	prs_buf_init(&clean);
	for (size_t i = 0; a && s->argv && s->argv[i]; i++) {
		size_t len;
		const char *t = prs_utf8_clean(s->argv[i], strlen(s->argv[i]), &clean, &len);

		if (!t || json_array_append_new(a, json_stringn(t, len)) != 0) {
			json_decref(a);
			a = NULL;
		}
	}
	prs_buf_release(&clean);
	return a;
}

int prs_sweep_write_json(FILE *f, const struct prs_sweep *s)
{
	json_t *root = json_object(), *points = json_array(), *fits = json_object();
	int rc = -ENOMEM;

	if (!root || !points || !fits)
		goto out;
	for (size_t i = 0; i < s->npoints; i++)
		if (json_array_append_new(points, point_json(s, i)) != 0)
			goto out;
	if (!put(fits, "wall", fit_json(s, PRS_SWEEP_WALL)) || !put(fits, "cpu", fit_json(s, PRS_SWEEP_CPU)))
		goto out;
	if (!put(root, "format", json_string("pyrsprof-sweep")) ||
	    !put(root, "version", json_integer(PRS_SWEEP_VERSION)) ||
	    !put(root, "dimension", json_string(s->dim)) || !put(root, "command", command_json(s)) ||
	    !put(root, "repeat", json_integer((json_int_t)s->repeat)) ||
	    !put(root, "rate_hz", json_real(s->rate_hz)) ||
	    !put(root, "interrupted", json_boolean(s->interrupted)) ||
	    !put(root, "machine", json_pack("{s:I, s:f, s:f, s:b}", "cpus", (json_int_t)s->cpus,
					    "load_1m_start", s->load_start, "load_1m_end", s->load_end,
					    "busy", prs_sweep_busy(s))) ||
	    !put(root, "verdict_available", json_boolean(s->any_verdict)) ||
	    !put(root, "verdict_changes", changes_json(s)))
		goto out;
	if (!put(root, "points", points)) {
		points = NULL;
		goto out;
	}
	points = NULL;
	if (!put(root, "fits", fits)) {
		fits = NULL;
		goto out;
	}
	fits = NULL;
	rc = json_dumpf(root, f, JSON_INDENT(2) | JSON_REAL_PRECISION(10)) == 0 && fputc('\n', f) != EOF
		     ? 0
		     : -EIO;
out:
	json_decref(points);
	json_decref(fits);
	json_decref(root);
	return rc;
}
