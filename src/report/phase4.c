/* SPDX-License-Identifier: MIT */
/*
 * The Phase-4 report (phase4.md, phase4.json, schema docs/phase4.schema.json): hot spots by self
 * and by total time, at function and at line level, for the CPU and the wall view, each with its
 * share of the view and its Amdahl ceiling 1/(1-p): the whole view's speedup if that spot cost
 * nothing (by Amdahl's law only the biggest slice is worth the effort). The stop hint says when
 * to stop (the playbook: the target is met, or the next hot spot is too small to matter): when
 * the largest self share of the CPU view is under PRS_STOP_SHARE, no single function can give
 * more than 1/(1-PRS_STOP_SHARE).
 */
#include "pyrsprof/report.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "report/phase1-internal.h"
#include "report/report-internal.h"

#include "util/banned.h"

#define PRS_STOP_SHARE 0.10
#define MD_ROWS 10

/* a view's tables, cut to their first PRS_PHASE4_ROWS rows (prs_hotspots_top) */
struct view_tables {
	struct prs_hotspot_top fn, line;
};

struct p4 {
	const struct prs_report_ctx *c;
	struct view_tables v[2]; /* cpu, wall */
	char stop[256];
	const char *stop_reason;
	double stop_share;
};

static json_t *num_or_null(double v)
{
	return isfinite(v) ? json_real(v) : json_null();
}

static json_t *row_json(const struct prs_hotspot *h, double total, bool lines)
{
	double ps = total > 0 ? h->self / total : 0, pt = total > 0 ? h->total / total : 0;

	return json_pack("{s:s, s:s, s:o, s:s, s:f, s:f, s:f, s:f, s:o, s:o}", "name", h->name, "file",
			 h->file, "line", lines && h->line ? json_integer(h->line) : json_null(), "kind",
			 prs_kind_name(h->kind), "self", h->self, "total", h->total, "self_share", ps,
			 "total_share", pt, "self_ceiling", num_or_null(prs_amdahl(ps)), "total_ceiling",
			 num_or_null(prs_amdahl(pt)));
}

/* The first PRS_PHASE4_ROWS rows by self and by total. */
static json_t *table_json(const struct prs_hotspot_top *t, bool lines)
{
	json_t *self = json_array(), *tot = json_array();
	size_t i;

	for (i = 0; i < t->nself && i < PRS_PHASE4_ROWS; i++)
		json_array_append_new(self, row_json(&t->by_self[i], t->total, lines));
	for (i = 0; i < t->ntotal && i < PRS_PHASE4_ROWS; i++)
		json_array_append_new(tot, row_json(&t->by_total[i], t->total, lines));
	return json_pack("{s:o, s:o, s:I}", "by_self", self, "by_total", tot, "count",
			 (json_int_t)t->count);
}

static int write_json(FILE *f, void *arg)
{
	struct p4 *x = arg;
	static const char *const names[2] = { "cpu", "wall" };
	json_t *root = json_pack("{s:s, s:i, s:s, s:s}", "schema", "pyrsprof-phase4", "version",
				 PRS_PHASE4_VERSION, "command", x->c->facts->command, "stacks",
				 x->c->python_stacks ? "python" : "merged");
	json_t *views = json_object();
	int rc;

	if (!root || !views) {
		json_decref(root);
		json_decref(views);
		return -ENOMEM;
	}
	for (int v = 0; v < 2; v++)
		json_object_set_new(views, names[v],
				    json_pack("{s:f, s:o, s:o}", "samples", x->v[v].fn.total, "functions",
					      table_json(&x->v[v].fn, false), "lines",
					      table_json(&x->v[v].line, true)));
	json_object_set_new(root, "views", views);
	json_object_set_new(root, "stop_hint",
			    x->stop[0] ? json_pack("{s:s, s:s, s:f, s:o}", "reason", x->stop_reason,
						   "text", x->stop, "top_share", x->stop_share,
						   "ceiling", num_or_null(prs_amdahl(x->stop_share)))
				       : json_null());
	rc = json_dumpf(root, f, JSON_INDENT(2) | JSON_REAL_PRECISION(10)) == 0 && fputc('\n', f) != EOF
		     ? 0 : -EIO;
	json_decref(root);
	return rc;
}

static void md_rows(FILE *f, const struct prs_hotspot *rows, size_t n, double total, bool lines)
{
	fprintf(f, "| %s | self | total | ceiling (self) | ceiling (total) |\n| --- | ---: | ---: | ---: | ---: |\n",
		lines ? "line" : "function");
	for (size_t i = 0; i < n && i < MD_ROWS; i++) {
		const struct prs_hotspot *h = &rows[i];
		double ps = total > 0 ? h->self / total : 0, pt = total > 0 ? h->total / total : 0;
		const char *base = strrchr(h->file, '/');

		fputs("| ", f);
		prs_md_text(f, h->name);
		if (h->file[0]) {
			fputs(" (", f);
			prs_md_text(f, base ? base + 1 : h->file);
			if (lines && h->line)
				fprintf(f, ":%u", h->line);
			fputc(')', f);
		} else if (h->kind == PRS_KIND_KERNEL) {
			fputs(" (kernel)", f); /* no file: else it reads as the program's code */
		}
		fprintf(f, " | %.1f %% | %.1f %% | ", 100 * ps, 100 * pt);
		isfinite(prs_amdahl(ps)) ? fprintf(f, "%.2fx", prs_amdahl(ps)) : fputs("unbounded", f);
		fputs(" | ", f);
		isfinite(prs_amdahl(pt)) ? fprintf(f, "%.2fx", prs_amdahl(pt)) : fputs("unbounded", f);
		fputs(" |\n", f);
	}
	fputc('\n', f);
}

static int write_md(FILE *f, void *arg)
{
	struct p4 *x = arg;
	static const char *const titles[2] = { "CPU view (on-CPU samples)",
					       "Wall view (every sample, off-CPU waits as [syscall] leaves)" };

	fputs("# Phase 4: hot spots\n\n", f);
	fputs("Shares are of each view's samples; the ceiling is Amdahl's 1/(1-p): the speedup of "
	      "that view if the spot cost nothing. Work on the biggest slice, re-measure, repeat.\n\n", f);
	fputs(x->c->python_stacks ? "Stacks: the Python view (the interpreter's own frames folded into the "
				    "Python lines that caused them; `--stacks merged` for every native frame).\n\n"
				  : "Stacks: merged native and Python frames (`--stacks python` folds the "
				    "interpreter's frames into the Python lines).\n\n", f);
	if (x->stop[0]) {
		fputs("**Stop hint:** ", f);
		prs_md_text(f, x->stop);
		fputs(".\n\n", f);
	}
	for (int v = 0; v < 2; v++) {
		const struct view_tables *t = &x->v[v];

		fprintf(f, "## %s: %.0f samples\n\n", titles[v], t->fn.total);
		if (t->fn.total <= 0) {
			fputs("No samples in this view.\n\n", f);
			continue;
		}
		fputs("### Functions by self time\n\n", f);
		md_rows(f, t->fn.by_self, t->fn.nself, t->fn.total, false);
		fputs("### Functions by total time\n\n", f);
		md_rows(f, t->fn.by_total, t->fn.ntotal, t->fn.total, false);
		fputs("### Lines by self time\n\n", f);
		md_rows(f, t->line.by_self, t->line.nself, t->line.total, true);
	}
	fprintf(f, "Generated by pyrsprof; machine-readable: phase4.json (schema pyrsprof-phase4, "
		"version %d).\n", PRS_PHASE4_VERSION);
	return ferror(f) ? -EIO : 0;
}

/* Whether a profile flat in merged stacks is flat in the Python view too (the interpreter's own
 * frames folded into the Python lines that ran them). A Python function's self time in merged
 * stacks is split over the interpreter's C functions it runs: measured, a pure-Python loop of
 * string, regex, dict and json work read "_PyInterpreterState_GET 5.9 %" at the top of the
 * merged table, a stop hint, while its function was 45 % self in the Python view (ceiling 1.82x)
 * and the lever said to vectorize it. Asked only of a flat merged table where the interpreter
 * ran at least half of the on-CPU samples (the facts' cpu_python, as the "Python interpreter"
 * label): the table costs a pass over the samples, and elsewhere the native code's own
 * functions are the spots. */
static bool flat_in_python_view(const struct p4 *x)
{
	struct prs_view_opts o = { .view = PRS_VIEW_CPU, .python_stacks = true };
	struct prs_hotspot_top py;
	struct prs_err err = { 0 };
	bool flat;

	if (prs_hotspots_top(x->c->p, &o, 1, &py, NULL, &err))
		return true; /* (out of memory: judged on the merged table) */
	flat = !py.nself || py.total <= 0 || py.by_self[0].self / py.total < PRS_STOP_SHARE;
	prs_hotspot_top_release(&py);
	return flat;
}

/* The stop hint of the CPU view's function table t (by self, sorted) into x->stop. */
static void stop_hint(struct p4 *x, const struct prs_hotspot_top *t)
{
	const struct prs_report_ctx *c = x->c;
	double m;

	if (c->inputs->have_target && prs_phase1_measure(c, c->inputs->target.metric, &m) &&
	    prs_target_met(&c->inputs->target, m)) {
		x->stop_reason = "target met";
		x->stop_share = t->nself && t->total > 0 ? t->by_self[0].self / t->total : 0;
		snprintf(x->stop, sizeof(x->stop), "stop: the target %s is met", c->inputs->target.expr);
		return;
	}
	if (!t->nself || t->total <= 0)
		return;
	x->stop_share = t->by_self[0].self / t->total;
	if (x->stop_share >= PRS_STOP_SHARE)
		return;
	if (!c->python_stacks && c->facts && c->facts->cpu_python >= 0.5 && !flat_in_python_view(x))
		return;
	x->stop_reason = "flat profile";
	snprintf(x->stop, sizeof(x->stop),
		 "the biggest hot spot (%.60s) is %.1f %% of the CPU time: even free it would "
		 "make the program at most %.2fx faster; stop unless a change of algorithm helps",
		 t->by_self[0].name, 100 * x->stop_share, prs_amdahl(x->stop_share));
}

/* The summary's part of the report: the first hot spots of t (CPU, by self) and the stop hint. */
static void fill_top(const struct p4 *x, const struct prs_hotspot_top *t, struct prs_phase4_top *top)
{
	memset(top, 0, sizeof(*top));
	top->total = t->total;
	for (size_t i = 0; i < t->nself && top->n < 5 && t->by_self[i].self > 0; i++)
		top->rows[top->n++] = t->by_self[i];
	snprintf(top->stop_hint, sizeof(top->stop_hint), "%s", x->stop);
	top->stop_reason = x->stop[0] ? x->stop_reason : NULL;
	top->stop_share = x->stop_share;
}

int prs_phase4_top(const struct prs_report_ctx *c, struct prs_phase4_top *top, struct prs_err *err)
{
	struct p4 x;
	struct prs_hotspot_top t;
	struct prs_view_opts o = { .view = PRS_VIEW_CPU, .python_stacks = c->python_stacks };
	/* the function table alone: the line table is phase4.md's, not the top's */
	int rc = prs_hotspots_top(c->p, &o, PRS_PHASE4_ROWS, &t, NULL, err);

	if (rc)
		return rc;
	memset(&x, 0, sizeof(x));
	x.c = c;
	stop_hint(&x, &t);
	fill_top(&x, &t, top);
	prs_hotspot_top_release(&t);
	return 0;
}

int prs_phase4_write(const struct prs_report_ctx *c, const char *dir, struct prs_phase4_top *top,
		     struct prs_err *err)
{
	struct p4 x;
	int rc = 0;

	memset(&x, 0, sizeof(x));
	x.c = c;
	for (int v = 0; v < 2 && !rc; v++) {
		struct prs_view_opts o = { .view = v ? PRS_VIEW_WALL : PRS_VIEW_CPU,
					   .python_stacks = c->python_stacks };

		rc = prs_hotspots_top(c->p, &o, PRS_PHASE4_ROWS, &x.v[v].fn, &x.v[v].line, err);
	}
	if (!rc) {
		stop_hint(&x, &x.v[0].fn);
		rc = prs_write_atomic(dir, "phase4.md", write_md, &x, err);
	}
	if (!rc)
		rc = prs_write_atomic(dir, "phase4.json", write_json, &x, err);
	if (!rc && top)
		fill_top(&x, &x.v[0].fn, top);
	for (int v = 0; v < 2; v++) {
		prs_hotspot_top_release(&x.v[v].fn);
		prs_hotspot_top_release(&x.v[v].line);
	}
	return rc;
}
