/* SPDX-License-Identifier: MIT */
/*
 * sweep.svg: a log-log plot of a sweep. Per metric (wall: blue circles, CPU: orange squares) the
 * fastest run of each value (what is fitted), a bar up to the slowest run with a tick at the
 * median, and the fitted line time = coef * value^exponent, which is straight on log-log axes. Values whose runs all failed
 * get a red cross on the axis; a verdict change gets a dotted line between its two values. The
 * legend under the plot says each fit in words. Plain SVG 1.1, no script; every text from the
 * user (command, dimension, verdicts) goes through prs_xml_text().
 */
#include "pyrsprof/sweep.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#include "report/xml-internal.h"
#include "report/sweep-internal.h"

#include "util/banned.h"

#define W 900.0
#define X0 90.0  /* plot area */
#define X1 860.0
#define Y0 84.0
#define Y1 464.0
#define LINE_H 22.0
#define MAX_CHANGE_LINES 4
#define MAX_TICKS 40
#define MIN_TICK_GAP 56.0 /* pixels between x labels ("1.25e10" is about 45 px wide) */

static const char *const metric_names[PRS_SWEEP_METRICS] = { "wall", "CPU" };
static const char *const colors[PRS_SWEEP_METRICS] = { "#1f5fa8", "#d9730d" };

/* A log10 range mapped onto a pixel range. */
struct axis {
	double lo, hi;     /* log10 of the domain */
	double p_lo, p_hi; /* pixels of lo and hi */
};

static double to_px(const struct axis *a, double v)
{
	return a->p_lo + (log10(v) - a->lo) / (a->hi - a->lo) * (a->p_hi - a->p_lo);
}

/* A domain [vmin, vmax] (both > 0) as a padded log10 range: 8 % of the span each side, at least
 * a factor of 2 in all when the span is empty. */
static void axis_set(struct axis *a, double vmin, double vmax, double p_lo, double p_hi)
{
	double lo = log10(vmin), hi = log10(vmax), pad = (hi - lo) * 0.08;

	if (hi - lo < 1e-9)
		pad = log10(2) / 2;
	a->lo = lo - pad;
	a->hi = hi + pad;
	a->p_lo = p_lo;
	a->p_hi = p_hi;
}

/* Tick values inside the axis: 1-2-5 per decade (1 only over many decades; 1..9 over a short
 * span) so that a plot holds 2 to ~12 labelled ticks. Returns the count. */
static size_t ticks_of(const struct axis *a, double *out)
{
	static const double steps[3][9] = { { 1 }, { 1, 2, 5 }, { 1, 2, 3, 4, 5, 6, 7, 8, 9 } };
	static const size_t nsteps[3] = { 1, 3, 9 };
	double span = a->hi - a->lo;
	int mode = span > 4 ? 0 : span > 0.9 ? 1 : 2;
	size_t n = 0;

	for (int k = (int)floor(a->lo); k <= (int)ceil(a->hi) && n < MAX_TICKS; k++)
		for (size_t j = 0; j < nsteps[mode] && n < MAX_TICKS; j++) {
			double t = steps[mode][j] * pow(10, k), lt = log10(t);

			if (lt >= a->lo && lt <= a->hi)
				out[n++] = t;
		}
	return n;
}

/* The x ticks: the swept values themselves when their labels fit side by side, else 1-2-5. */
static size_t x_ticks(const struct prs_sweep *s, const struct axis *ax, double *out)
{
	bool fit = s->npoints <= MAX_TICKS;

	for (size_t i = 1; fit && i < s->npoints; i++)
		fit = to_px(ax, s->points[i].value) - to_px(ax, s->points[i - 1].value) >= MIN_TICK_GAP;
	if (!fit)
		return ticks_of(ax, out);
	for (size_t i = 0; i < s->npoints; i++)
		out[i] = s->points[i].value;
	return s->npoints;
}

/* The y domain: every median, min and max shown, and the fitted lines' ends. False if empty. */
static bool y_domain(const struct prs_sweep *s, double *ymin, double *ymax)
{
	*ymin = INFINITY;
	*ymax = 0;
	for (int m = 0; m < PRS_SWEEP_METRICS; m++) {
		for (size_t i = 0; i < s->npoints; i++) {
			const struct prs_spread *sp = m == PRS_SWEEP_WALL ? &s->points[i].wall
									  : &s->points[i].cpu;
			double v[3] = { sp->min, sp->median, sp->max };

			for (int k = 0; k < 3 && sp->n; k++)
				if (v[k] > 0) {
					*ymin = fmin(*ymin, v[k]);
					*ymax = fmax(*ymax, v[k]);
				}
		}
	}
	for (int m = 0; m < PRS_SWEEP_METRICS; m++) {
		const struct prs_fit *fit = &s->fit[m];

		for (size_t i = 0; fit->status == 0 && i < s->npoints; i++)
			if (s->points[i].ok) {
				double y = fit->coef * pow(s->points[i].value, fit->exponent);

				*ymin = fmin(*ymin, y);
				*ymax = fmax(*ymax, y);
			}
	}
	return *ymax > 0;
}

static void svg_axes(FILE *f, const struct prs_sweep *s, const struct axis *ax, const struct axis *ay)
{
	double t[MAX_TICKS];
	char num[32];
	size_t n;

	fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#fcfcfc\" "
		"stroke=\"#888\"/>\n", X0, Y0, X1 - X0, Y1 - Y0);
	n = x_ticks(s, ax, t);
	for (size_t i = 0; i < n; i++) {
		double x = to_px(ax, t[i]);

		fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e2e2e2\"/>\n"
			"<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" class=\"tick\">%s</text>\n",
			x, Y0, x, Y1, x, Y1 + 18, prs_sweep_num(t[i], num, sizeof(num)));
	}
	n = ticks_of(ay, t);
	for (size_t i = 0; i < n; i++) {
		double y = to_px(ay, t[i]);

		fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e2e2e2\"/>\n"
			"<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" class=\"tick\">%s</text>\n",
			X0, y, X1, y, X0 - 8, y + 4, prs_sweep_num(t[i], num, sizeof(num)));
	}
	fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" class=\"label\">", (X0 + X1) / 2,
		Y1 + 44);
	prs_xml_text(f, s->dim, 0);
	fputs(" (log scale)</text>\n", f);
	fprintf(f, "<text transform=\"translate(26 %.1f) rotate(-90)\" text-anchor=\"middle\" "
		"class=\"label\">time, seconds (log scale)</text>\n", (Y0 + Y1) / 2);
}

/* The metric's marker: filled for the fastest run, hollow and smaller for the median. */
static void svg_marker(FILE *f, int m, double x, double y, bool hollow)
{
	double r = hollow ? 3.5 : 5;
	char paint[96];

	if (hollow)
		snprintf(paint, sizeof(paint), "class=\"median\" fill=\"#fff\" stroke=\"%s\"", colors[m]);
	else
		snprintf(paint, sizeof(paint), "class=\"best\" fill=\"%s\"", colors[m]);
	if (m == PRS_SWEEP_WALL)
		fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"%.1f\" %s/>", x, y, r, paint);
	else
		fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" %s/>", x - r * 0.9,
			y - r * 0.9, r * 1.8, r * 1.8, paint);
}

/* One metric: bars, markers with tooltips, and the fitted line over the fitted values. */
static void svg_series(FILE *f, const struct prs_sweep *s, int m, const struct axis *ax,
		       const struct axis *ay)
{
	const struct prs_fit *fit = &s->fit[m];
	double vlo = INFINITY, vhi = 0;
	char num[32];

	fprintf(f, "<g class=\"%s\" stroke=\"%s\">\n", m == PRS_SWEEP_WALL ? "wall" : "cpu", colors[m]);
	for (size_t i = 0; i < s->npoints; i++) {
		const struct prs_sweep_point *p = &s->points[i];
		const struct prs_spread *sp = m == PRS_SWEEP_WALL ? &p->wall : &p->cpu;
		/* the two series side by side, so that equal wall and CPU bars stay visible */
		double x = to_px(ax, p->value) + (m == PRS_SWEEP_WALL ? -3 : 3);

		if (!sp->n || !(sp->min > 0))
			continue;
		vlo = fmin(vlo, p->value);
		vhi = fmax(vhi, p->value);
		/* the bar up to the slowest run with its cap, and the median hollow on it */
		if (sp->max > sp->min)
			fprintf(f, "<path d=\"M%.1f %.1fV%.1fh-5h10\" fill=\"none\"/>", x, to_px(ay, sp->min),
				to_px(ay, sp->max));
		fputs("<g>", f);
		if (sp->median > sp->min)
			svg_marker(f, m, x, to_px(ay, sp->median), true);
		svg_marker(f, m, x, to_px(ay, sp->min), false);
		fputs("<title>", f);
		prs_xml_text(f, s->dim, 0);
		fprintf(f, "=%s: %s best %.3f s, median %.3f s, slowest %.3f s (%zu run%s)</title></g>\n",
			prs_sweep_num(p->value, num, sizeof(num)), metric_names[m], sp->min, sp->median,
			sp->max, sp->n, sp->n == 1 ? "" : "s");
	}
	if (fit->status == 0 && vhi > 0)
		fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke-width=\"1.5\"%s/>\n",
			to_px(ax, vlo), to_px(ay, fit->coef * pow(vlo, fit->exponent)), to_px(ax, vhi),
			to_px(ay, fit->coef * pow(vhi, fit->exponent)),
			m == PRS_SWEEP_CPU ? " stroke-dasharray=\"6 4\"" : "");
	fputs("</g>\n", f);
}

/* Red crosses on the x axis for values with no run that counts. */
static void svg_failed(FILE *f, const struct prs_sweep *s, const struct axis *ax)
{
	char num[32];

	for (size_t i = 0; i < s->npoints; i++) {
		const struct prs_sweep_point *p = &s->points[i];
		double x = to_px(ax, p->value), y = Y1 - 10;

		if (p->ok || !p->runs[0].done)
			continue;
		fprintf(f, "<g stroke=\"#c00\" stroke-width=\"2\"><path d=\"M%.1f %.1fl8 8m0 -8l-8 8\"/>"
			"<title>", x - 4, y - 4);
		prs_xml_text(f, s->dim, 0);
		fprintf(f, "=%s: no run succeeded (", prs_sweep_num(p->value, num, sizeof(num)));
		prs_xml_text(f, p->runs[0].problem, 80);
		fputs(")</title></g>\n", f);
	}
}

/* Dotted lines where the verdict changes; returns how many. */
static size_t svg_changes(FILE *f, const struct prs_sweep *s, const struct axis *ax)
{
	size_t from = 0, to, n = 0;

	while (prs_sweep_next_change(s, &from, &to)) {
		double x = to_px(ax, sqrt(s->points[from].value * s->points[to].value));

		fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#7a3db8\" "
			"stroke-dasharray=\"2 3\"/>\n", x, Y0, x, Y1);
		n++;
		from = to;
	}
	return n;
}

static void legend_line(FILE *f, double *y, int m, const struct prs_sweep *s)
{
	char text[256];

	svg_marker(f, m, X0 + 6, *y - 4, false);
	fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
		"stroke-width=\"1.5\"%s/>\n", X0 + 16, *y - 4, X0 + 40, *y - 4, colors[m],
		m == PRS_SWEEP_CPU ? " stroke-dasharray=\"6 4\"" : "");
	fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" class=\"fit\">", X0 + 50, *y);
	prs_xml_text(f, prs_fit_text(&s->fit[m], metric_names[m], s->dim, text, sizeof(text)), 110);
	fputs("</text>\n", f);
	*y += LINE_H;
}

static void svg_legend(FILE *f, const struct prs_sweep *s, double y)
{
	char a[32], b[32];
	size_t from = 0, to, shown = 0;

	for (int m = 0; m < PRS_SWEEP_METRICS; m++)
		legend_line(f, &y, m, s);
	fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" class=\"note\">filled: the fastest of %zu run%s "
		"per value (fitted); hollow: the median; bars: up to the slowest; lines: least-squares "
		"fits</text>\n", X0, y, s->repeat, s->repeat == 1 ? "" : "s");
	y += LINE_H;
	if (prs_sweep_too_short(s) > 0) {
		fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" class=\"warn\">short runs (the fastest %.3f s): "
			"start-up weighs on the slope; use larger values</text>\n", X0, y,
			prs_sweep_too_short(s));
		y += LINE_H;
	}
	if (prs_sweep_busy(s)) {
		fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" class=\"warn\">the machine was "
			"busy (load average %.1f, then %.1f, on %u CPUs): wall times include waiting for "
			"a CPU</text>\n", X0, y, s->load_start, s->load_end, s->cpus);
		y += LINE_H;
	}
	if (!s->any_verdict) {
		fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" class=\"note\">verdict: not available</text>\n",
			X0, y);
		return;
	}
	while (shown < MAX_CHANGE_LINES && prs_sweep_next_change(s, &from, &to)) {
		fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" class=\"change\">verdict changes "
			"between ", X0, y);
		prs_xml_text(f, s->dim, 0);
		fprintf(f, "=%s and %s: ", prs_sweep_num(s->points[from].value, a, sizeof(a)),
			prs_sweep_num(s->points[to].value, b, sizeof(b)));
		prs_xml_text(f, s->points[from].verdict, 40);
		fputs(" → ", f);
		prs_xml_text(f, s->points[to].verdict, 40);
		fputs("</text>\n", f);
		y += LINE_H;
		shown++;
		from = to;
	}
	if (shown == 0)
		fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" class=\"note\">the verdict is the same at every "
			"value</text>\n", X0, y);
}

static void svg_head(FILE *f, const struct prs_sweep *s, double h)
{
	struct prs_buf b;
	const char *cmd;

	fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
		"<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%.0f\" height=\"%.0f\" "
		"viewBox=\"0 0 %.0f %.0f\" font-family=\"DejaVu Sans, Verdana, sans-serif\">\n"
		"<style>.title{font-size:18px;font-weight:bold}.sub{font-size:12px;fill:#555}"
		".tick{font-size:12px;fill:#333}.label{font-size:14px;fill:#222}"
		".fit{font-size:14px;fill:#111}.note{font-size:12px;fill:#555}"
		".warn{font-size:12px;fill:#b00}.change{font-size:12px;fill:#7a3db8}</style>\n"
		"<rect width=\"100%%\" height=\"100%%\" fill=\"#fff\"/>\n"
		"<text x=\"%.1f\" y=\"30\" class=\"title\">pyrsprof sweep: time against ", W, h, W, h, X0);
	prs_xml_text(f, s->dim, 0);
	fputs("</text>\n", f);
	prs_buf_init(&b);
	cmd = prs_sweep_command(s, &b);
	/* the command cut to the width, whole in the tooltip */
	fputs("<g><title>", f);
	prs_xml_text(f, cmd ? cmd : "?", 2000);
	fprintf(f, "</title><text x=\"%.1f\" y=\"54\" class=\"sub\">", X0);
	prs_xml_text(f, cmd ? cmd : "?", 120);
	fputs("</text></g>\n", f);
	prs_buf_release(&b);
}

int prs_sweep_write_svg(FILE *f, const struct prs_sweep *s)
{
	struct axis ax, ay;
	double ymin, ymax, h, y_legend = Y1 + 84;
	size_t changes = 0, from = 0, to;

	while (prs_sweep_next_change(s, &from, &to))
		changes++, from = to;
	if (changes > MAX_CHANGE_LINES)
		changes = MAX_CHANGE_LINES;
	h = y_legend + (3 + prs_sweep_busy(s) + (prs_sweep_too_short(s) > 0) +
			(changes ? (double)changes : 1)) * LINE_H;
	if (s->npoints == 0)
		return -EINVAL;
	axis_set(&ax, s->points[0].value, s->points[s->npoints - 1].value, X0, X1);
	if (!y_domain(s, &ymin, &ymax))
		ymin = 0.1, ymax = 1;
	axis_set(&ay, ymin, ymax, Y1, Y0);
	svg_head(f, s, h);
	svg_axes(f, s, &ax, &ay);
	svg_changes(f, s, &ax);
	svg_failed(f, s, &ax);
	for (int m = PRS_SWEEP_METRICS - 1; m >= 0; m--)
		svg_series(f, s, m, &ax, &ay);
	svg_legend(f, s, y_legend);
	fputs("</svg>\n", f);
	return ferror(f) ? -EIO : 0;
}
