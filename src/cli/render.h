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

/* Writes DIR/cpu.svg and DIR/wall.svg (with merge_processes, a root per command rather than per
 * process). Returns 0, or -1 after printing why. */
int cli_render_recording(const struct prs_profile *p, const char *dir, bool merge_processes);

/*
 * Loads IN as a .pyrs profile (a truncated or damaged one with a warning printed) or as folded
 * stacks; a recording's folder stands for its profile.pyrs. Returns the profile, or NULL after
 * printing a one-line reason.
 */
struct prs_profile *cli_load_profile(const char *path);

#endif
