/* SPDX-License-Identifier: MIT */
/*
 * The noise rule of `pyrsprof diff`: whether the change of one sampled quantity between two
 * recordings is beyond noise. The report (src/report/diff*.c) and the differential flame graph
 * (flamegraph/svg.c) both judge every change with it, so a frame is colored as changed exactly
 * when its function's row says so.
 *
 * A quantity is k samples out of the n of its view, each worth `period` (seconds: the recording's
 * duration over its ticks; or 1/n, for a share of the view when a profile has no times). Its
 * value is k * period. Two sources of noise:
 * - sampling: k of n ticks is binomial, standard error period * sqrt(k (1 - k/n));
 * - the run itself: the same program takes a little more or less time from one run to the next
 *   (machine load, caches, frequency). One recording each cannot measure it, so it is an
 *   assumption, `run_noise` (relative, per run; PRS_CHANGE_RUN_NOISE by default): standard error
 *   run_noise * value. Shares are immune to a run that is slower as a whole, so shares are judged
 *   with run_noise 0.
 * The change after - before has sigma = sqrt(sb^2 + sa^2) (independent runs), and is significant
 * when |delta| > PRS_CHANGE_SIGMAS sigma and |delta| >= PRS_CHANGE_MIN_SHARE of the larger of the
 * two views' totals (a change too small to matter does not headline however sure it is).
 * Consecutive samples of one thread are correlated (a phase lasts many ticks), so the sampling
 * term is a lower bound: a change near the threshold is a hint, re-measure to confirm.
 */
#ifndef PYRSPROF_CHANGE_H
#define PYRSPROF_CHANGE_H

#include <stdbool.h>
#include <stddef.h>

#define PRS_CHANGE_SIGMAS 3.0      /* significant: |delta| > this many sigmas ... */
#define PRS_CHANGE_MIN_SHARE 0.005 /* ... and at least this share of the larger view total */
#define PRS_CHANGE_RUN_NOISE 0.05  /* assumed relative run-to-run noise of a time, per run */

/* k of the n samples of a view, each worth period (seconds, or 1/n for shares). */
struct prs_sampled {
	double k, n, period;
};

struct prs_change {
	double before, after; /* k * period */
	double delta;         /* after - before */
	double sigma;         /* standard error of delta */
	bool significant;
};

/*
 * Judges the change from b to a with run_noise (0 for shares): fills c. n <= 0 stands for a side
 * with nothing in the view (value 0, no noise). Pure arithmetic; thread-safe.
 */
void prs_change_of(const struct prs_sampled *b, const struct prs_sampled *a, double run_noise,
		   struct prs_change *c);

/* Seconds for people, into buf: "1.23 s", "450 ms", "12.5 ms", "80 µs" (UTF-8); with sign, "+"
 * or "-" first. Returns buf. */
const char *prs_change_fmt_s(char *buf, size_t size, double v, bool sign);

#endif
