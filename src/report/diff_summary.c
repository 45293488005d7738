/* SPDX-License-Identifier: MIT */
/* The terminal summary of `pyrsprof diff`: a few lines, the changes beyond noise only. */
#include "report/diff-internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "util/banned.h"

#define LINE 640

/* "wall 2.03 s -> 1.05 s: 1.93x faster (-0.98 s)" into line + n. Returns the new length. */
static size_t total_text(char *line, size_t n, const char *what, const struct prs_diff_total *t)
{
	char b[32], a[32], dl[32];
	bool up = t->c.delta <= 0;
	double x = up ? t->speedup : t->speedup > 0 ? 1 / t->speedup : 0;

	if (n >= LINE)
		return n;
	if (!t->known)
		return n + (size_t)snprintf(line + n, LINE - n, "%s not measured on both sides", what);
	return n + (size_t)snprintf(line + n, LINE - n, "%s %s -> %s: %.2fx %s (%s%s)", what,
				    prs_change_fmt_s(b, sizeof(b), t->c.before, false),
				    prs_change_fmt_s(a, sizeof(a), t->c.after, false), x,
				    up ? "faster" : "slower", prs_change_fmt_s(dl, sizeof(dl), t->c.delta, true),
				    t->c.significant ? "" : ", within noise");
}

static void row_line(const struct prs_diff *d, const struct prs_diff_row *r, char *line)
{
	const struct prs_change *t = &r->total_s;
	char b[32], a[32];
	int n = snprintf(line, LINE, "  %-8s %.80s%s%.60s%s  ", prs_diff_status_name(r->status), r->name,
			 r->file[0] ? " (" : "", prs_diff_basename(r->file), r->file[0] ? ")" : "");

	if (n < 0 || n >= LINE)
		return;
	if (!d->timed)
		snprintf(line + n, LINE - (size_t)n, "%.1f%% -> %.1f%% of the samples (%+.1f pt)",
			 100 * r->total_sh.before, 100 * r->total_sh.after, 100 * r->total_sh.delta);
	else if (r->status == PRS_DIFF_REMOVED)
		snprintf(line + n, LINE - (size_t)n, "%s before, gone after",
			 prs_change_fmt_s(b, sizeof(b), t->before, false));
	else if (r->status == PRS_DIFF_ADDED)
		snprintf(line + n, LINE - (size_t)n, "new, %s after",
			 prs_change_fmt_s(a, sizeof(a), t->after, false));
	else
		snprintf(line + n, LINE - (size_t)n, "%s -> %s (%.2fx)",
			 prs_change_fmt_s(b, sizeof(b), t->before, false),
			 prs_change_fmt_s(a, sizeof(a), t->after, false),
			 t->after > 0 ? t->before / t->after : 0);
}

static void verdict_line(const struct prs_diff *d, char *line)
{
	const struct prs_diff_side *b = &d->side[0], *a = &d->side[1];

	if (b->have_verdict && a->have_verdict && !d->verdict_changed)
		snprintf(line, LINE, "bound: %s, before and after", a->verdict);
	else if (b->have_verdict && a->have_verdict)
		snprintf(line, LINE, "bound: %s before, %s after (changed: lever now %s)", b->verdict,
			 a->verdict, a->lever);
	else if (a->have_verdict || b->have_verdict)
		snprintf(line, LINE, "bound (%s only): %s", a->have_verdict ? "after" : "before",
			 a->have_verdict ? a->verdict : b->verdict);
	else
		line[0] = '\0';
}

void prs_diff_summary(const struct prs_diff *d, void (*emit)(void *arg, const char *line), void *arg)
{
	char line[LINE];
	size_t n = 0, shown = 0;

	if (d->timed) {
		n = total_text(line, 0, "wall", &d->wall);
		if (n < LINE - 2)
			n = total_text(line, n + (size_t)snprintf(line + n, LINE - n, "; "),
				       d->cpu.known && d->side[0].cpu_kernel && d->side[1].cpu_kernel
					       ? "CPU" : "CPU (from samples)", &d->cpu);
	} else {
		snprintf(line, LINE, "no times in the profiles (folded stacks): shares of the samples compared");
	}
	emit(arg, line);
	if (d->changed)
		snprintf(line, LINE, "changed beyond noise: %zu of %zu functions; %zu within noise "
			 "(listed apart in diff.md)", d->changed, d->nrows, d->nrows - d->changed);
	else
		snprintf(line, LINE, "no function changed beyond noise (%zu functions, all within noise)",
			 d->nrows);
	emit(arg, line);
	for (size_t i = 0; i < d->changed && shown < PRS_DIFF_TOP; i++, shown++) {
		row_line(d, &d->rows[i], line);
		emit(arg, line);
	}
	verdict_line(d, line);
	if (line[0])
		emit(arg, line);
	if (d->have_next) {
		const struct prs_hotspot *h = &d->next.rows[0];
		double p = h->self / d->next.total, ceil = prs_amdahl(p);
		char cs[32];

		if (isfinite(ceil))
			snprintf(cs, sizeof(cs), "%.2fx", ceil);
		else
			snprintf(cs, sizeof(cs), "unbounded");
		const char *where = prs_hotspot_where(h); /* marked "kernel" as in the run's summary */

		snprintf(line, LINE, "hot now (CPU, self): %.80s%s%.60s%s %.0f%% (ceiling %s)", h->name,
			 where[0] ? " (" : "", where, where[0] ? ")" : "", 100 * p, cs);
		emit(arg, line);
	}
	if (d->next.stop_hint[0]) {
		snprintf(line, LINE, "stop hint: %s", d->next.stop_hint);
		emit(arg, line);
	}
}
