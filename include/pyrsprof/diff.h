/* SPDX-License-Identifier: MIT */
/*
 * The numbers of `pyrsprof diff BEFORE AFTER`: per function, its self and total share of each
 * profile's samples, the change in percentage points, and whether the change is beyond sampling
 * noise. The differential flame graph is drawn by the flame graph renderer
 * (prs_fg_diff_from_profiles in flamegraph.h); this module writes the table next to it.
 *
 * A function is (display name, file): prs_profile_frame_label() with inline expansions applied,
 * so an inlined callee is a function of its own, and in the wall view an off-CPU leaf ("[read]")
 * is one too. When one of the profiles has no file names at all (folded stacks), functions are
 * matched by name alone, so a recording compares with a folded export. The kind shown is the
 * first known one. Self = samples whose leaf it is; total = samples with it anywhere on the
 * stack (counted once per sample under recursion). Shares are of the total sample weight of the
 * view in each profile (CPU: running samples; wall: all), so profiles of different lengths or
 * rates compare.
 *
 * Noise: a share p measured on n samples has a binomial standard error sqrt(p(1-p)/n); the
 * difference of two independent shares has sigma = sqrt(pb(1-pb)/nb + pa(1-pa)/na). A change is
 * significant when |delta| > 3 sigma and |delta| > 0.5 percentage points. Consecutive samples of
 * one thread are correlated (a phase lasts many ticks), so this sigma is a lower bound on the real
 * noise: treat a change near the threshold as a hint, re-measure to confirm.
 */
#ifndef PYRSPROF_DIFF_H
#define PYRSPROF_DIFF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pyrsprof/err.h"
#include "pyrsprof/profile.h"
#include "pyrsprof/types.h"

#define PRS_DIFF_SIGMAS 3.0 /* significance: |delta| > this many sigmas ... */
#define PRS_DIFF_MIN_PT 0.5 /* ... and more than this many percentage points */
#define PRS_DIFF_TOP 5      /* movers kept in struct prs_diff_summary */

/* One function's change; shares and deltas in percent / percentage points. */
struct prs_diff_row {
	char name[256]; /* display name, UTF-8 (invalid bytes replaced), cut to fit */
	char file[256]; /* "" when unknown */
	enum prs_kind kind;
	uint64_t self_before, self_after, total_before, total_after; /* sample weights */
	double self_pct_before, self_pct_after, total_pct_before, total_pct_after;
	double self_delta_pt, total_delta_pt;   /* after - before */
	double self_sigma_pt, total_sigma_pt;   /* standard error of each delta */
	bool significant; /* the self or the total change passes the threshold above */
};

struct prs_diff_summary {
	uint64_t samples_before, samples_after; /* total weights of the view */
	size_t functions;   /* functions seen in either profile */
	size_t significant; /* of which changed significantly */
	size_t grew, shrank; /* significant ones, by the sign of their larger significant delta */
	size_t ntop;        /* entries of top: the biggest movers, by max(|self|, |total| delta) */
	struct prs_diff_row top[PRS_DIFF_TOP];
};

/*
 * Compares the view `view` of two profiles and writes DIR/diff.md (a Markdown report: totals, the
 * threshold, then the significant changes and the biggest other movers, at most 50 rows) and
 * DIR/diff.json (every function; see docs in the file's "about" field), each written to a
 * temporary name in DIR and renamed, so a reader never sees half a file. DIR is created if it
 * does not exist (one level). Rows are sorted by max(|self delta|, |total delta|), largest first,
 * then by total share after, then by name. summary (may be NULL) gets the counts and the top
 * movers, for the CLI's 3-5 lines.
 * Returns 0, -EINVAL (a profile has no samples in the view), -ENOMEM, or the negative errno of a
 * failed mkdir/write/rename, with err set. Neither profile is modified.
 */
int prs_diff_write(const struct prs_profile *before, const struct prs_profile *after,
		   enum prs_view view, const char *dir, struct prs_diff_summary *summary,
		   struct prs_err *err);

/*
 * The same comparison without files: fills *rows (a new array, caller frees with free()) with
 * *nrows rows in the order above, and summary (may be NULL). Returns 0, -EINVAL or -ENOMEM.
 */
int prs_diff_compute(const struct prs_profile *before, const struct prs_profile *after,
		     enum prs_view view, struct prs_diff_row **rows, size_t *nrows,
		     struct prs_diff_summary *summary, struct prs_err *err);

#endif
