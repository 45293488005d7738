/* SPDX-License-Identifier: MIT */
/*
 * `pyrsprof diff BEFORE AFTER`: the re-measure report of the playbook's Phase 4 (change ->
 * re-measure -> keep it only if it wins). What it measures:
 * - the speedup of the whole program, wall and CPU, in seconds and as a ratio, from each
 *   profile's own duration and CPU accounting (kernel accounting when the recording has it, else
 *   its samples), as the Phase-1 report measures them;
 * - per function, its self time (the sample's innermost frame) and total time (anywhere on the
 *   stack, once per sample) in seconds before and after, and its share of the view. A sample
 *   weighs what its recording's period is (the duration over the ticks seen: see
 *   prs_facts.tick_s), so two recordings at different rates compare: nothing is scaled by rate.
 *   Profiles without times (folded stacks) compare by share only;
 * - which changes are beyond noise (include/pyrsprof/change.h): only those headline; the others
 *   are listed apart, marked as noise;
 * - the after profile's top hot spot with its Amdahl ceiling and the Phase-4 stop hint
 *   (prs_phase4_top), and each side's verdict (prs_classify) when it is a recording.
 *
 * Which function is which (diff_match.c): a function is (name, module, kind); a Python frame's
 * module is its file, a native frame's the library it was symbolized in (else its source file).
 * Modules at the same path pair; a module found on one side only pairs with one found on the
 * other side only when at least half of the smaller one's functions are in both (by name): a
 * moved file (same basename) first, then a renamed one (app.py -> app_v2.py). Functions of the
 * same name in modules that both sides have are never merged. A function still unmatched then
 * pairs with the only unmatched function of its name and kind on the other side (moved to
 * another file on its own). When one profile has no files at all (folded stacks), functions
 * match by name and kind. The off-CPU leaves of the wall view
 * ("[read]") are functions of their own; in the CPU view only running samples count.
 *
 * The differential flame graph is drawn by the flame graph renderer from the same view options
 * (prs_diff_view_opts, prs_fg_diff_from_profiles) and judged by the same rule.
 */
#ifndef PYRSPROF_DIFF_H
#define PYRSPROF_DIFF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pyrsprof/change.h"
#include "pyrsprof/err.h"
#include "pyrsprof/profile.h"
#include "pyrsprof/report.h"
#include "pyrsprof/types.h"
#include "pyrsprof/view.h"

#define PRS_DIFF_VERSION 1
#define PRS_DIFF_TOP 5 /* rows the terminal summary names */

/* ---- which function of one profile is which of the other ---- */

/* Two modules of the two profiles paired by step 2 of the rule (not those at the same path). */
struct prs_diff_pair {
	const char *before, *after; /* borrowed from the profiles; any bytes but NUL */
	bool moved;                 /* the same basename (a moved file), else renamed */
	uint32_t common, functions; /* functions in both, of the smaller module's */
};

/* A function paired by step 4 (moved to another module on its own). */
struct prs_diff_fn_pair {
	const char *name, *before, *after; /* borrowed from the profiles: name, modules */
};

struct prs_diff_match;

/* Matches the functions of two profiles, which must outlive the match. 0 or -ENOMEM (err set). */
int prs_diff_match_new(const struct prs_profile *before, const struct prs_profile *after,
		       struct prs_diff_match **out, struct prs_err *err);
void prs_diff_match_free(struct prs_diff_match *m); /* NULL is fine */
/* Sets o's file_of so that a view of side 0 (before) or 1 (after) keys frames as matched. */
void prs_diff_match_opts(struct prs_diff_match *m, int side, struct prs_view_opts *o);
/* True when one profile has no files: functions match by name and kind. */
bool prs_diff_match_by_name(const struct prs_diff_match *m);
/* The modules paired by similarity (borrowed, *n of them). */
const struct prs_diff_pair *prs_diff_match_pairs(const struct prs_diff_match *m, size_t *n);
/* The functions paired on their own (borrowed, *n of them). */
const struct prs_diff_fn_pair *prs_diff_match_fn_pairs(const struct prs_diff_match *m, size_t *n);

/* ---- the report ---- */

enum prs_diff_status {
	PRS_DIFF_UNCHANGED, /* within noise */
	PRS_DIFF_FASTER,    /* less time (timed profiles) */
	PRS_DIFF_SLOWER,
	PRS_DIFF_GREW,      /* a larger share (profiles without times) */
	PRS_DIFF_SHRANK,
	PRS_DIFF_ADDED,     /* in the after profile only */
	PRS_DIFF_REMOVED,   /* in the before profile only */
};
/* "unchanged", "faster", "slower", "grew", "shrank", "added", "removed". */
const char *prs_diff_status_name(enum prs_diff_status s);

/* One function; [0] before, [1] after. */
struct prs_diff_row {
	/* display name, UTF-8, cut to 255 bytes; file: its module as matched (the after side's, ""
	 * when none), the same. One allocation holds both ("name\0file"): the diff owns it. A
	 * removed function of a module that moved or was renamed names the before side's file
	 * instead (where it was; borrowed from the before profile). */
	const char *name, *file;
	enum prs_kind kind;
	double self_w[2], total_w[2];          /* sample weights */
	struct prs_change self_s, total_s;     /* seconds (timed diffs only) */
	struct prs_change self_sh, total_sh;   /* shares of each view (0..1) */
	bool significant;   /* by time when timed, else by share: self or total */
	enum prs_diff_status status;
};

/* One side's measurements. */
struct prs_diff_side {
	char command[512];  /* UTF-8 */
	double weight;      /* samples in the view */
	double period_s;    /* seconds a sample weight stands for; 0: no times (folded) */
	double rate_hz;     /* 0: unknown */
	bool wall_known, cpu_known;
	double wall_s, cpu_s;
	bool cpu_kernel;    /* CPU from kernel accounting, else from the samples */
	bool have_verdict;  /* a recording, with samples: its Phase-1 verdict */
	char verdict_id[16], verdict[96], lever[320];
	int confidence;
};

/* The whole program's change in wall or CPU time. */
struct prs_diff_total {
	bool known;             /* measured on both sides */
	struct prs_change c;    /* seconds; sigma: the run noise only */
	double speedup;         /* before / after; 0 when after is 0 */
};

struct prs_diff_opts {
	enum prs_view view;
	double run_noise; /* < 0: PRS_CHANGE_RUN_NOISE */
};

struct prs_diff {
	enum prs_view view;
	bool timed;              /* both sides have times: changes judged in seconds */
	double run_noise;
	struct prs_diff_side side[2];
	struct prs_diff_total wall, cpu;
	struct prs_diff_row *rows; /* the significant rows, then the rest; each part by the size of
				    * the self change, then of the total change (callees before callers) */
	size_t nrows, changed;     /* changed: the significant ones, first in rows */
	size_t count[PRS_DIFF_REMOVED + 1]; /* rows by status */
	bool verdict_changed;      /* both sides have a verdict and they differ */
	bool have_next;            /* the after profile's hot spots (CPU view) and stop hint */
	struct prs_phase4_top next;
	struct prs_diff_match *match; /* owned */
};

/*
 * Compares two profiles, which must outlive *out. Returns 0, -EINVAL (a profile has no samples in
 * the view) or -ENOMEM, with err set. Free with prs_diff_free().
 */
int prs_diff_compute(const struct prs_profile *before, const struct prs_profile *after,
		     const struct prs_diff_opts *o, struct prs_diff **out, struct prs_err *err);
void prs_diff_free(struct prs_diff *d); /* NULL is fine */

/* The view options of side 0 (before) or 1 (after) that key frames as d matched them. */
void prs_diff_view_opts(struct prs_diff *d, int side, struct prs_view_opts *o);

/*
 * Writes DIR/diff.md and DIR/diff.json (schema docs/diff.schema.json, "pyrsprof-diff", version
 * PRS_DIFF_VERSION), each to a temporary name and renamed. DIR must exist. Returns 0 or -errno.
 */
int prs_diff_write(const struct prs_diff *d, const char *dir, struct prs_err *err);

/* The terminal summary: the speedup, what changed beyond noise, the verdicts, the next hot spot
 * and the stop hint, a line each through emit (no prefix, no newline). */
void prs_diff_summary(const struct prs_diff *d, void (*emit)(void *arg, const char *line), void *arg);

#endif
