/* SPDX-License-Identifier: MIT */
/* The differential mode of the SVG writer: widths, colors and hover lines (fg-diff.h). */
#include "fg-diff.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "fg-tree.h"
#include "pyrsprof/change.h"
#include "pyrsprof/util.h"

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

/* Text built as consecutive snprintf calls at the end of buf would build it (each cut to the
 * room left), without printf: the titles of a big diff graph were 8 % of `pyrsprof diff`. */
struct text {
	char *buf;
	size_t size, n; /* n: the whole text's length; buf holds its first size - 1 bytes */
};

static void put(struct text *t, const char *s, size_t len)
{
	if (t->n + 1 < t->size) {
		size_t room = t->size - 1 - t->n, k = len < room ? len : room;

		memcpy(t->buf + t->n, s, k);
		t->buf[t->n + k] = '\0';
	}
	t->n += len;
}

static void puts_(struct text *t, const char *s)
{
	put(t, s, strlen(s));
}

/* "%.2f" (plus: "%+.2f") of v */
static void put_fixed2(struct text *t, double v, bool plus)
{
	char b[PRS_FMT_FIXED_MAX + 1];
	size_t k = 0;

	if (signbit(v)) {
		b[k++] = '-';
		v = -v;
	} else if (plus) {
		b[k++] = '+';
	}
	k += prs_fmt_fixed(b + k, v, 2);
	put(t, b, k);
}

/* A value for people: "1.23 s" (timed) or "12.34%" (a share). */
static void put_value(struct text *t, const struct fg_diff *D, double v, bool sign)
{
	char b[32];

	if (D->timed) {
		puts_(t, prs_change_fmt_s(b, sizeof(b), v, sign));
		return;
	}
	put_fixed2(t, 100 * v, sign);
	put(t, "%", 1);
}

const char *fg_diff_title(const struct fg_diff *D, const uint64_t c[2], const uint64_t self[2],
			  char *buf, size_t size)
{
	struct prs_change ch, sh;
	struct text t = { buf, size, 0 };

	if (size)
		buf[0] = '\0';
	change_of(D, c, &ch);
	change_of(D, self, &sh);
	puts_(&t, "before: ");
	put_value(&t, D, ch.before, false);
	puts_(&t, " (");
	put_fixed2(&t, D->n[1] > 0 ? 100 * (double)c[1] / D->n[1] : 0, false);
	puts_(&t, "%), after: ");
	put_value(&t, D, ch.after, false);
	puts_(&t, " (");
	put_fixed2(&t, D->n[0] > 0 ? 100 * (double)c[0] / D->n[0] : 0, false);
	puts_(&t, "%)\n");
	if (!c[1] && c[0]) {
		puts_(&t, "added: only after");
	} else if (c[1] && !c[0]) {
		puts_(&t, "removed: only before");
	} else {
		puts_(&t, "change: ");
		put_value(&t, D, ch.delta, true);
		puts_(&t, " ± ");
		put_value(&t, D, ch.sigma, false);
	}
	if (!ch.significant) {
		puts_(&t, ", within noise");
	} else if (D->timed && ch.before > 0 && ch.after > 0) {
		puts_(&t, ": ");
		put_fixed2(&t, ch.delta < 0 ? ch.before / ch.after : ch.after / ch.before, false);
		puts_(&t, ch.delta < 0 ? "x faster" : "x slower");
	}
	if (!(self[0] || self[1]))
		return buf;
	puts_(&t, "\nself: ");
	put_value(&t, D, sh.before, false);
	puts_(&t, " -> ");
	put_value(&t, D, sh.after, false);
	return buf;
}
