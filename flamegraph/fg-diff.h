/* SPDX-License-Identifier: MIT */
/*
 * The differential mode of the SVG writer (private to flamegraph/): how wide a frame is (its
 * before and after time together, so that a frame of either side is drawn: removed code keeps
 * its before width), how it is colored (its change, judged by the noise rule of
 * pyrsprof/change.h, the same rule as `pyrsprof diff`'s table) and its hover lines. svg.c lays
 * out and writes; this file decides.
 */
#ifndef PYRSPROF_FG_DIFF_H
#define PYRSPROF_FG_DIFF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pyrsprof/flamegraph.h"

struct fg_diff {
	bool on;
	bool timed;       /* both periods known: widths and changes in seconds, else shares */
	uint64_t m[2];    /* layout units a sample weighs: after [0], before [1] ({1, 0} when off) */
	double period[2]; /* what a sample stands for: seconds (timed), or 1 / the side's total */
	double n[2];      /* the sides' totals (samples) */
	double run_noise; /* 0 for shares */
};

/* The mode of o for the tree fg (its root holds the sides' totals). */
void fg_diff_init(struct fg_diff *D, const struct prs_fg *fg, const struct prs_fg_opts *o);

/* The layout width of counts c (after, before): c[0] m[0] + c[1] m[1] (saturating). */
uint64_t fg_diff_width(const struct fg_diff *D, const uint64_t c[2]);

enum fg_diff_state { FG_DIFF_SAME, FG_DIFF_MORE, FG_DIFF_LESS, FG_DIFF_ADDED, FG_DIFF_REMOVED };

/*
 * How a frame with counts c changed, and its fill rgb[3]: grey within noise, else red (more
 * time or share) or blue (less), the stronger the larger the change relative to the larger side
 * (added: full red, removed: full blue).
 */
enum fg_diff_state fg_diff_judge(const struct fg_diff *D, const uint64_t c[2], int rgb[3]);

/* The fill of t in [-1, 1] (the legend's swatches): rgb[3]. */
void fg_diff_color(double t, int rgb[3]);

/*
 * The hover lines of a frame with counts c and self counts self (both after, before), into buf:
 * "before: 1.23 s (45.20%), after: 0.61 s (30.10%)", "change: -620 ms ± 50 ms: 2.02x faster"
 * (or "within noise", "removed: only before", "added: only after"), "self: 400 ms -> 100 ms".
 * Plain text, no markup (the writer escapes it). Returns buf.
 */
const char *fg_diff_title(const struct fg_diff *D, const uint64_t c[2], const uint64_t self[2],
			  char *buf, size_t size);

#endif
