/* SPDX-License-Identifier: MIT */
/* The noise rule of `pyrsprof diff` (include/pyrsprof/change.h). */
#include "pyrsprof/change.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "pyrsprof/util.h"

#include "util/banned.h"

/* The variance of one side's value: binomial sampling, plus the run's own noise. */
static double variance(const struct prs_sampled *s, double run_noise, double *value)
{
	double p, sampling;

	*value = 0;
	if (s->n <= 0 || s->k <= 0)
		return 0;
	p = s->k < s->n ? s->k / s->n : 1;
	*value = s->k * s->period;
	sampling = s->period * s->period * s->k * (1 - p);
	return sampling + run_noise * run_noise * *value * *value;
}

void prs_change_of(const struct prs_sampled *b, const struct prs_sampled *a, double run_noise,
		   struct prs_change *c)
{
	double vb = variance(b, run_noise, &c->before), va = variance(a, run_noise, &c->after);
	double tb = b->n > 0 ? b->n * b->period : 0, ta = a->n > 0 ? a->n * a->period : 0;

	c->delta = c->after - c->before;
	c->sigma = sqrt(vb + va);
	c->significant = fabs(c->delta) > PRS_CHANGE_SIGMAS * c->sigma &&
			 fabs(c->delta) >= PRS_CHANGE_MIN_SHARE * (tb > ta ? tb : ta);
}

/* a >= 0 as printf's "%.{decimals}f" (0, 1 or 2) writes it, into out (PRS_FMT_FIXED_MAX bytes):
 * without printf below 1e12 (prs_fmt_fixed; "%.0f" is rint's integer: the same round-half-even
 * of the exact binary value). The diff's SVG writes four such values per frame's title. */
static size_t fixed_text(char *out, double a, int decimals)
{
	int len;

	if (decimals || !(a >= 0 && a < 1e12)) {
		if (decimals)
			return prs_fmt_fixed(out, a, decimals);
		len = snprintf(out, PRS_FMT_FIXED_MAX, "%.0f", a);
		return len < 0 ? 0 : (size_t)len < PRS_FMT_FIXED_MAX ? (size_t)len : PRS_FMT_FIXED_MAX - 1;
	}
	return prs_fmt_u64(out, (uint64_t)rint(a));
}

const char *prs_change_fmt_s(char *buf, size_t size, double v, bool sign)
{
	double a = fabs(v);
	const char *sg = v < 0 ? "-" : sign ? "+" : "", *unit;
	char t[PRS_FMT_FIXED_MAX + 16];
	size_t n = strlen(sg);
	int decimals;

	/* the boundaries are where the rounded text moves to the next unit: 0.99999 s is "1.00 s" */
	if (a >= 99.5)
		decimals = 0, unit = " s";
	else if (a >= 0.9995)
		decimals = 2, unit = " s";
	else if (a >= 0.0995)
		decimals = 0, unit = " ms", a *= 1e3;
	else if (a >= 0.00095)
		decimals = 1, unit = " ms", a *= 1e3;
	else if (a > 0)
		decimals = 0, unit = " µs", a *= 1e6;
	else
		sg = "", n = 0, decimals = -1, unit = "0 s";
	memcpy(t, sg, n);
	if (decimals >= 0)
		n += fixed_text(t + n, a, decimals);
	memcpy(t + n, unit, strlen(unit) + 1);
	n += strlen(unit);
	/* as snprintf: cut to size - 1 bytes */
	if (size) {
		if (n >= size)
			n = size - 1;
		memcpy(buf, t, n);
		buf[n] = '\0';
	}
	return buf;
}
