/* SPDX-License-Identifier: MIT */
/*
 * The reports of a measured optimization loop (the playbook's Phase 1 and Phase 4):
 * - phase1.md / phase1.json: the target (met or not), the command and its facts, the dimensions
 *   table, the time budget, the verdict with its evidence, the lever;
 * - phase4.md / phase4.json: hot spots by self and total time, at function and line level, for
 *   the CPU and the wall view, each with its share and Amdahl ceiling 1/(1-p), and a stop hint;
 * - the terminal summary printed after a recording.
 * The JSON files are versioned (schema, version) and have a JSON Schema each in docs/
 * (phase1.schema.json, phase4.schema.json). Every file is written to a temporary name and
 * renamed. Names from the target are escaped for Markdown and cleaned to UTF-8 for JSON.
 */
#ifndef PYRSPROF_REPORT_H
#define PYRSPROF_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "pyrsprof/classify.h"
#include "pyrsprof/err.h"
#include "pyrsprof/profile.h"
#include "pyrsprof/view.h"

#define PRS_PHASE1_VERSION 1
#define PRS_PHASE4_VERSION 1

/* ---- Phase-0 target and Phase-1 dimensions (run/attach options, kept in the profile's meta) ---- */

/* A target like "wall<2s", "cpu<=500ms", "rss<1GB": metric (wall, cpu, rss), operator, value. */
struct prs_target {
	char expr[64];
	char metric[8];  /* "wall" (s), "cpu" (s), "rss" (bytes) */
	char op[3];      /* "<", "<=", ">", ">=" */
	double value;    /* in seconds or bytes */
};

/* Parses a target. Returns 0 or -EINVAL with a one-line message saying the accepted forms. */
int prs_target_parse(const char *s, struct prs_target *t, struct prs_err *err);
/* Whether measured meets t. */
bool prs_target_met(const struct prs_target *t, double measured);

/* A dimension NAME=TYPICAL[..MAX] (playbook Phase 1): "n_rows=20000..60000", "batch=32". */
struct prs_dim {
	char name[64];
	char typical[64];
	char max[64]; /* "" when not given */
	/* its growth, from a sweep along it (prs_phase_inputs_sweep) */
	bool have_growth;
	bool fitted;          /* the sweep could fit a line (else growth says why not) */
	double exponent, r2;  /* of wall time along the dimension; NAN when not known */
	char growth[200];     /* the fit in words: "wall ∝ n^1.98 (R² 0.999): O(n²) along n" */
	char growth_from[256]; /* the sweep.json it came from */
};

/* Parses a dimension. Returns 0 or -EINVAL with a message. */
int prs_dim_parse(const char *s, struct prs_dim *d, struct prs_err *err);

#define PRS_MAX_DIMS 16

/* The target and dimensions stored in p's meta ("target", "dim"; see record.c). */
struct prs_phase_inputs {
	bool have_target;
	struct prs_target target;
	struct prs_dim dims[PRS_MAX_DIMS];
	size_t ndims;
};
void prs_phase_inputs_from_meta(const struct prs_profile *p, struct prs_phase_inputs *in);
/*
 * Fills the growth of the dimension of in that the sweep at path (its sweep.json) was along.
 * Returns 0, or -errno with err set (one line): the file cannot be read or is not a sweep.json,
 * or in has no dimension of that name.
 */
int prs_phase_inputs_sweep(struct prs_phase_inputs *in, const char *path, struct prs_err *err);

/* ---- hot spots ---- */

struct prs_hotspot {
	char name[256];      /* display name, UTF-8 */
	char file[256];      /* "" when unknown */
	uint32_t line;       /* 0 at function level */
	enum prs_kind kind;
	double self, total;  /* sample weights: as the leaf / anywhere on the stack (once per sample) */
};

/* Where h is, as a terminal line names it: its file's base name; "kernel" for a kernel function
 * (it has no file, and unmarked it reads as the program's own code); else "". */
const char *prs_hotspot_where(const struct prs_hotspot *h);

#define PRS_HOT_LINES 1u   /* by line: (name, file, line) rather than (name, file) */
#define PRS_HOT_BY_NAME 2u /* by name alone (file ignored: the first one seen is kept) */

/*
 * Aggregates view of p by function, or by line with PRS_HOT_LINES: every distinct
 * (name, file[, line]) with its self and total weight, sorted by self (descending), then total,
 * then name. In the wall view an off-CPU leaf ("[read]") is a function of its own; a sample with
 * no frame counts as "[empty stack]". *rows is a new array (free()). *total gets the view's
 * weight. Returns 0, -ENOMEM (err set).
 */
int prs_hotspots(const struct prs_profile *p, enum prs_view view, unsigned flags,
		 struct prs_hotspot **rows, size_t *n, double *total, struct prs_err *err);
/* The same through the view options o (o->view, o->file_of; frames are keyed by the file the view
 * gives them; lines and roots are not for hot spots: leave them off). */
int prs_hotspots_view(const struct prs_profile *p, const struct prs_view_opts *o, unsigned flags,
		      struct prs_hotspot **rows, size_t *n, double *total, struct prs_err *err);

/*
 * The first rows of a hot spot table (what the report shows of it): the first k rows by self
 * (in prs_hotspots' order) and the first k by total (total, self, name, file, line), how many rows
 * the whole table has and the view's weight. Release with prs_hotspot_top_release().
 */
struct prs_hotspot_top {
	struct prs_hotspot *by_self, *by_total;
	size_t nself, ntotal; /* at most k each */
	size_t count;         /* rows of the whole table */
	double total;
};

/*
 * The function and the line tables of one view of p (as prs_hotspots with flags 0 and
 * PRS_HOT_LINES), each cut to its first k rows: one view and one walk for both, and rows made
 * only for the first ones (a long profile has ~100k lines). The view is o->view, in the Python
 * stack view with o->python_stacks (its other options are the hot spots' own). line may be
 * NULL: the function table alone (no line spots counted). Returns 0, -ENOMEM (err set).
 */
int prs_hotspots_top(const struct prs_profile *p, const struct prs_view_opts *o, size_t k,
		     struct prs_hotspot_top *fn, struct prs_hotspot_top *line, struct prs_err *err);
void prs_hotspot_top_release(struct prs_hotspot_top *t);

/* The Amdahl ceiling of a share p (0..1): 1/(1-p); INFINITY for p >= 1. */
double prs_amdahl(double p);

/* ---- the reports ---- */

struct prs_report_ctx {
	const struct prs_profile *p;
	const struct prs_facts *facts;
	const struct prs_verdict *verdict;
	const struct prs_phase_inputs *inputs;
	bool python_stacks; /* phase 4's hot spots in the Python stack view (--stacks python) */
};

/* Writes DIR/phase1.md and DIR/phase1.json. Returns 0 or -errno (err set). */
int prs_phase1_write(const struct prs_report_ctx *c, const char *dir, struct prs_err *err);

/* Phase 4: its top hot spots are returned in *top (may be NULL) for the summary. */
#define PRS_PHASE4_ROWS 20
struct prs_phase4_top {
	struct prs_hotspot rows[5]; /* CPU view, by self, function level */
	size_t n;
	double total;
	char stop_hint[256];        /* "" when none */
	const char *stop_reason;    /* "target met", "flat profile", or NULL when none (static) */
	double stop_share;          /* the biggest self share of the CPU view the hint is about */
};
int prs_phase4_write(const struct prs_report_ctx *c, const char *dir, struct prs_phase4_top *top,
		     struct prs_err *err);
/* The same top hot spots and stop hint without writing the report (pyrsprof diff's "what next").
 * Returns 0 or -ENOMEM (err set). */
int prs_phase4_top(const struct prs_report_ctx *c, struct prs_phase4_top *top, struct prs_err *err);

/*
 * The terminal summary: verdict and lever in one line, the time budget, the top hot spots with
 * their ceilings. Writes lines (no "pyrsprof: " prefix, no trailing newline) through emit.
 */
void prs_summary(const struct prs_report_ctx *c, const struct prs_phase4_top *top,
		 void (*emit)(void *arg, const char *line), void *arg);

/* Writes DIR/NAME through a temporary file and a rename: fn writes the content to f and returns
 * 0 or a negative errno. Returns 0 or -errno with err set. */
int prs_write_atomic(const char *dir, const char *name, int (*fn)(FILE *f, void *arg), void *arg,
		     struct prs_err *err);

#endif
