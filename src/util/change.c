/* SPDX-License-Identifier: MIT */
/* The noise rule of `pyrsprof diff` (include/pyrsprof/change.h). */
#include "pyrsprof/change.h"

#include <math.h>
#include <stdio.h>

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

const char *prs_change_fmt_s(char *buf, size_t size, double v, bool sign)
{
	double a = fabs(v);
	const char *sg = v < 0 ? "-" : sign ? "+" : "";

	/* the boundaries are where the rounded text moves to the next unit: 0.99999 s is "1.00 s" */
	if (a >= 99.5)
		snprintf(buf, size, "%s%.0f s", sg, a);
	else if (a >= 0.9995)
		snprintf(buf, size, "%s%.2f s", sg, a);
	else if (a >= 0.0995)
		snprintf(buf, size, "%s%.0f ms", sg, a * 1e3);
	else if (a >= 0.00095)
		snprintf(buf, size, "%s%.1f ms", sg, a * 1e3);
	else if (a > 0)
		snprintf(buf, size, "%s%.0f µs", sg, a * 1e6);
	else
		snprintf(buf, size, "0 s");
	return buf;
}
