/* SPDX-License-Identifier: MIT */
/*
 * The flame graph renderer: a frame tree built from stacks (root first) with sample counts, and a
 * writer of one self-contained interactive SVG (zoom, search, hover details, legend; its JS and
 * CSS are embedded). It depends only on the profile model, so it builds and is tested without
 * ptrace or libdw.
 *
 * Children of a node are keyed by (name, file, kind): a function is one box even if several of its
 * lines were sampled; the box's hover details list its top lines with their counts. Frames are
 * sorted by name among their siblings, so a graph is reproducible. Everything that came from a
 * target (names, files, title) is escaped once, by the writer.
 *
 * Not thread-safe: one struct prs_fg is used by one thread at a time.
 */
#ifndef PYRSPROF_FLAMEGRAPH_H
#define PYRSPROF_FLAMEGRAPH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "pyrsprof/err.h"
#include "pyrsprof/profile.h"
#include "pyrsprof/types.h"
#include "pyrsprof/view.h"

/* One frame of a stack given to prs_fg_add. Strings are borrowed for the call (copied inside). */
struct prs_fg_frame {
	const char *name; /* NULL or "" is shown as "[unknown]" */
	const char *file; /* NULL or "" = unknown */
	uint32_t line;    /* 0 = unknown */
	enum prs_kind kind;
};

struct prs_fg;

/* Returns a new, empty frame tree, or NULL when out of memory. Free with prs_fg_free(). */
struct prs_fg *prs_fg_new(void);
/* Frees fg and everything it owns. NULL is fine. */
void prs_fg_free(struct prs_fg *fg);

/*
 * Adds count samples of the stack frames[0..n) (frames[0] is the root, frames[n-1] the leaf).
 * Stacks deeper than PRS_MAX_STACK_FRAMES keep their PRS_MAX_STACK_FRAMES outermost frames; names
 * and files longer than PRS_MAX_NAME bytes are cut. n == 0 or count == 0 adds nothing.
 * Returns 0, -EOVERFLOW if a total would overflow 2^63, or -ENOMEM (fg is unchanged then but
 * for the frames already created with a count of 0, which the writer does not show).
 */
int prs_fg_add(struct prs_fg *fg, const struct prs_fg_frame *frames, size_t n, uint64_t count);

/*
 * For differential graphs: adds `before` samples to the "before" profile and `after` samples to
 * the "after" profile (the one prs_fg_add adds to) for the same stack. Same rules as prs_fg_add.
 */
int prs_fg_add2(struct prs_fg *fg, const struct prs_fg_frame *frames, size_t n, uint64_t before,
		uint64_t after);

/* Total samples added with prs_fg_add (the "after" profile), and those of the "before" profile. */
uint64_t prs_fg_total(const struct prs_fg *fg);
uint64_t prs_fg_total_before(const struct prs_fg *fg);

/*
 * Adds the samples of profile p as the view o shows them (include/pyrsprof/view.h): CPU, running
 * samples only; wall, every sample, off-CPU ones with a leaf "[<syscall>]" colored by its reason;
 * per_process, a root per process ("python pool.py [1234]", kind PROCESS) when the profile holds
 * more than one, or per command with merge_processes; per_thread, a root "thread <tid> (<name>)"
 * (under the process's). Weights are honoured (folded input: one sample per line with the line's
 * count). Calls may be repeated to merge profiles. Returns 0, or a negative errno with err set.
 */
int prs_fg_from_profile(struct prs_fg *fg, const struct prs_profile *p,
			const struct prs_view_opts *o, struct prs_err *err);

/*
 * Adds the folded stacks read from f (include/pyrsprof/folded.h; name is used in errors) straight
 * into fg, without a profile: the same tree as prs_fg_from_profile of prs_folded_read's profile
 * in the CPU or wall view without thread roots. *samples is set to their total. Returns 0, or a
 * negative errno with err set ("name:LINE: ..." for a malformed line; "no stacks" for none).
 */
int prs_fg_from_folded(struct prs_fg *fg, FILE *f, const char *name, uint64_t *samples,
		       struct prs_err *err);

/*
 * Differential: adds `before`'s samples as the before counts (its view ob) and `after`'s as the
 * after counts (oa), into one tree: a frame of either side is a node, keyed as its view describes
 * it (`pyrsprof diff` sets the views' file_of so that matched functions share a key). The writer
 * draws both sides' frames (see prs_fg_opts.diff). Returns 0 or -errno with err set.
 */
int prs_fg_diff_from_profiles(struct prs_fg *fg, const struct prs_profile *before,
			      const struct prs_view_opts *ob, const struct prs_profile *after,
			      const struct prs_view_opts *oa, struct prs_err *err);

/*
 * A subtitle for a profile's graph into buf, e.g.
 * "./app --n 3 · 4.02 s · 803 samples · 200 Hz" (fields that the profile lacks are left out;
 * the samples are those of `view`), ending " · cut short: the recording did not finish" or
 * " · damaged at byte N: what precedes" for a profile read back incomplete. Returns buf. The text
 * is not escaped (the writer does it).
 */
const char *prs_fg_describe_profile(const struct prs_profile *p, enum prs_view view, char *buf,
				    size_t size);

struct prs_fg_opts {
	const char *title;    /* NULL: "Flame Graph" ("Icicle Graph", "Differential Flame Graph") */
	const char *subtitle; /* NULL: none */
	const char *unit;     /* name of the count, NULL: "samples" */
	double width;         /* nominal width in px, which viewers without script show (in a
			       * browser the embedded script fits the window); 0: 1200;
			       * clamped to [200, 100000] */
	double min_width;     /* px: narrower frames are merged; 0: 0.1 (default); < 0: draw every frame */
	bool icicle;          /* root at the top, growing down */
	/*
	 * Differential (counts from prs_fg_add2 or prs_fg_diff_from_profiles): a frame of either
	 * side is drawn, as wide as its before and after time together (or shares, when a period is
	 * 0), colored by its change judged by `pyrsprof diff`'s noise rule (pyrsprof/change.h): red
	 * slower (or grew), blue faster (or shrank), by how much relative to its larger side; grey
	 * within noise; full red with a dashed outline when only after had it (added), full blue
	 * with a dashed outline when only before had it (removed: drawn with its before width).
	 * Each frame's data-a / data-b hold its after / before samples, data-s its state ("same",
	 * "more", "less", "added", "removed"); data-c and data-x are in layout units. The hover
	 * details give before and after time and share, the change and its sigma.
	 */
	bool diff;
	double diff_period_s[2]; /* seconds an after [0] / before [1] sample stands for; 0 (either):
				  * the sides are compared as shares of their totals */
	double diff_run_noise;   /* the run-to-run noise of a time (change.h); ignored for shares */
};

/* At most this many boxes are drawn unless min_width < 0 (see prs_fg_write_svg). */
#define PRS_FG_MAX_DRAWN 200000

/* Fills opts with the defaults (every field 0/NULL, which means: the defaults above). */
void prs_fg_opts_init(struct prs_fg_opts *opts);

/*
 * Writes the SVG of fg to out (buffered; out is not closed). Frames narrower than
 * opts->min_width are not drawn: the narrow children of one parent are summed into one box
 * "[N small frames]" when that box is wide enough, so the size of the file follows the picture, not
 * the number of stacks. If more than PRS_FG_MAX_DRAWN boxes would still be drawn (a very deep
 * graph), min_width is doubled until they fit, unless min_width < 0 (draw every frame).
 * An empty tree gives a valid SVG that says "no samples".
 * opts may be NULL (defaults). Returns 0 or a negative errno (-EIO on a write error, -ENOMEM)
 * with err set.
 */
int prs_fg_write_svg(struct prs_fg *fg, FILE *out, const struct prs_fg_opts *opts,
		     struct prs_err *err);

/* Number of frames (boxes) the last prs_fg_write_svg call drew; for tests and benchmarks. */
size_t prs_fg_drawn(const struct prs_fg *fg);

#endif
