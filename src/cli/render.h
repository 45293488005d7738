/* SPDX-License-Identifier: MIT */
/* Rendering a profile's flame graphs into files, shared by run, attach, report and flamegraph. */
#ifndef PYRSPROF_CLI_RENDER_H
#define PYRSPROF_CLI_RENDER_H

#include <stdbool.h>

#include "pyrsprof/flamegraph.h"
#include "pyrsprof/profile.h"

struct cli_graph_opts {
	struct prs_view_opts view; /* per_process is on: a root per process when there are several */
	struct prs_fg_opts fg;     /* title NULL: a default from the view */
};

/* Writes one SVG to path (atomically). Returns 0, or -1 after printing why. */
int cli_render_svg(const struct prs_profile *p, const char *path, const struct cli_graph_opts *o);
/* Whether `in` is folded stacks that cli_render_folded draws as the model would (a file that is
 * not a .pyrs profile, drawn without thread roots or the Python view). */
bool cli_folded_direct(const char *in, const struct cli_graph_opts *o);
/* The graph of folded stacks `in` straight from the file (prs_fg_from_folded), written to path.
 * 0, or -1 with the error said. */
int cli_render_folded(const char *in, const char *path, const struct cli_graph_opts *o);

/* How a recording's graphs are drawn (run, attach, report and the snapshots). */
struct cli_graph_choice {
	bool merge_processes; /* --merge-processes: a root per command rather than per process */
	bool python_stacks;   /* --stacks python: the Python view (prs_view_opts.python_stacks) */
};

/* Writes DIR/cpu.svg and DIR/wall.svg as g says. Returns 0, or -1 after printing why. */
int cli_render_recording(const struct prs_profile *p, const char *dir, struct cli_graph_choice g);

/* --stacks merged|python into *python; false after a one-line message. */
bool cli_parse_stacks(const char *s, bool *python);
#define CLI_STACKS_HELP \
	"      --stacks VIEW    merged (default: native and Python frames as they ran) or python\n" \
	"                       (the interpreter's own frames folded into the Python lines that\n" \
	"                       caused them, extensions' native frames kept, as py-spy shows)\n"

/* The view the graphs were drawn in, for a summary line ("graphs: merged stacks; ..."), or ""
 * when it does not matter (no Python frames in p, and the default view). */
const char *cli_graph_choice_said(const struct prs_profile *p, struct cli_graph_choice g);

/*
 * Loads IN as a .pyrs profile (a truncated or damaged one with a warning printed) or as folded
 * stacks; a recording's folder stands for its profile.pyrs. Returns the profile, or NULL after
 * printing a one-line reason.
 */
struct prs_profile *cli_load_profile(const char *path);
/* The same, a .pyrs profile read as sums (PRS_PYRS_SUMS): for the commands that need no sample's
 * own time (report, flamegraph, diff, the folded and pprof exports); memory follows the distinct
 * samples, not the recording's length. */
struct prs_profile *cli_load_sums(const char *path);
/* The same, threads merged (PRS_PYRS_SUMS_NO_THREADS): for the outputs that keep no thread apart
 * (folded and the flame graph without --per-thread, report, diff: the classifier's facts read the
 * threads' sums). */
struct prs_profile *cli_load_stack_sums(const char *path);

#endif
