/* SPDX-License-Identifier: MIT */
/* The differential mode of the SVG writer: widths, colors and hover lines (fg-diff.h). */
#include "fg-diff.h"

#include <math.h>
#include <stdio.h>

#include "fg-tree.h"
#include "pyrsprof/change.h"

#include "util/banned.h"

#define UNITS 1000.0   /* layout units of a sample of the side that weighs less */
#define MAX_UNITS 1e9  /* the heavier side's, at most: widths stay far below 2^64 */

void fg_diff_init(struct fg_diff *D, const struct prs_fg *fg, const struct prs_fg_opts *o)
{
	double w[2], lo;

	*D = (struct fg_diff){ .m = { 1, 0 } };
	if (!o->diff)
		return;
	D->on = true;
	for (int k = 0; k < 2; k++)
		D->n[k] = (double)(k ? prs_fg_total_before(fg) : prs_fg_total(fg));
	D->timed = o->diff_period_s[0] > 0 && o->diff_period_s[1] > 0 && isfinite(o->diff_period_s[0]) &&
		   isfinite(o->diff_period_s[1]);
	for (int k = 0; k < 2; k++) {
		D->period[k] = D->timed ? o->diff_period_s[k] : D->n[k] > 0 ? 1 / D->n[k] : 0;
		w[k] = D->period[k];
	}
	D->run_noise = D->timed && o->diff_run_noise > 0 ? o->diff_run_noise : 0;
	/* a side without samples weighs nothing; the other one UNITS a sample */
	lo = w[0] > 0 && (w[1] <= 0 || w[0] < w[1]) ? w[0] : w[1];
	for (int k = 0; k < 2; k++) {
		double u = lo > 0 && w[k] > 0 ? UNITS * w[k] / lo : 0;

		D->m[k] = (uint64_t)llround(u < MAX_UNITS ? u : MAX_UNITS);
	}
}

uint64_t fg_diff_width(const struct fg_diff *D, const uint64_t c[2])
{
	uint64_t a, b;

	if (__builtin_mul_overflow(c[0], D->m[0], &a) || __builtin_mul_overflow(c[1], D->m[1], &b) ||
	    __builtin_add_overflow(a, b, &a))
		return UINT64_MAX / 4;
	return a;
}

void fg_diff_color(double t, int rgb[3])
{
	int k = (int)lround(150 * fmin(fabs(t), 1)); /* keeps dark text readable at the extremes */

	if (t > 0) {
		rgb[0] = 255, rgb[1] = 240 - k, rgb[2] = 240 - k;
	} else if (t < 0) {
		rgb[0] = 240 - k, rgb[1] = 240 - k, rgb[2] = 255;
	} else {
		rgb[0] = rgb[1] = rgb[2] = 224;
	}
}

static void change_of(const struct fg_diff *D, const uint64_t c[2], struct prs_change *ch)
{
	prs_change_of(&(struct prs_sampled){ (double)c[1], D->n[1], D->period[1] },
		      &(struct prs_sampled){ (double)c[0], D->n[0], D->period[0] }, D->run_noise, ch);
}

enum fg_diff_state fg_diff_judge(const struct fg_diff *D, const uint64_t c[2], int rgb[3])
{
	struct prs_change ch;
	double big;

	change_of(D, c, &ch);
	big = fmax(ch.before, ch.after);
	if (!ch.significant || big <= 0) {
		fg_diff_color(0, rgb);
		return FG_DIFF_SAME;
	}
	fg_diff_color(ch.delta / big, rgb);
	if (!c[1])
		return FG_DIFF_ADDED;
	if (!c[0])
		return FG_DIFF_REMOVED;
	return ch.delta > 0 ? FG_DIFF_MORE : FG_DIFF_LESS;
}

/* A value for people: "1.23 s" (timed) or "12.34%" (a share). */
static const char *value(const struct fg_diff *D, double v, bool sign, char *buf, size_t size)
{
	if (D->timed)
		return prs_change_fmt_s(buf, size, v, sign);
	snprintf(buf, size, sign ? "%+.2f%%" : "%.2f%%", 100 * v);
	return buf;
}

const char *fg_diff_title(const struct fg_diff *D, const uint64_t c[2], const uint64_t self[2],
			  char *buf, size_t size)
{
	struct prs_change ch, sh;
	char b[32], a[32], d[32], s[32];
	int n;

	change_of(D, c, &ch);
	change_of(D, self, &sh);
	n = snprintf(buf, size, "before: %s (%.2f%%), after: %s (%.2f%%)\n",
		     value(D, ch.before, false, b, sizeof(b)), D->n[1] > 0 ? 100 * (double)c[1] / D->n[1] : 0,
		     value(D, ch.after, false, a, sizeof(a)), D->n[0] > 0 ? 100 * (double)c[0] / D->n[0] : 0);
	if (n < 0 || (size_t)n >= size)
		return buf;
	if (!c[1] && c[0])
		n += snprintf(buf + n, size - (size_t)n, "added: only after");
	else if (c[1] && !c[0])
		n += snprintf(buf + n, size - (size_t)n, "removed: only before");
	else
		n += snprintf(buf + n, size - (size_t)n, "change: %s ± %s", value(D, ch.delta, true, d, sizeof(d)),
			      value(D, ch.sigma, false, s, sizeof(s)));
	if (n < 0 || (size_t)n >= size)
		return buf;
	if (!ch.significant)
		n += snprintf(buf + n, size - (size_t)n, ", within noise");
	else if (D->timed && ch.before > 0 && ch.after > 0)
		n += snprintf(buf + n, size - (size_t)n, ": %.2fx %s",
			      ch.delta < 0 ? ch.before / ch.after : ch.after / ch.before,
			      ch.delta < 0 ? "faster" : "slower");
	if (n < 0 || (size_t)n >= size || !(self[0] || self[1]))
		return buf;
	snprintf(buf + n, size - (size_t)n, "\nself: %s -> %s", value(D, sh.before, false, b, sizeof(b)),
		 value(D, sh.after, false, a, sizeof(a)));
	return buf;
}
