/* SPDX-License-Identifier: MIT */
/*
 * What a recording writes into a folder besides profile.pyrs: the flame graphs, stats.json and
 * the reports. One path for the end of `run`/`attach` (record.c) and for each snapshot taken
 * while recording (snapshot.c), so that a snapshot holds exactly what the end would.
 */
#ifndef PYRSPROF_CLI_OUTPUTS_H
#define PYRSPROF_CLI_OUTPUTS_H

#include <stdbool.h>

#include "cli/render.h"
#include "pyrsprof/profile.h"
#include "pyrsprof/sampler.h"
#include "pyrsprof/symbol.h"

/* Which outputs were written whole. */
struct cli_written {
	bool graphs;  /* cpu.svg, wall.svg */
	bool stats;   /* stats.json */
	bool reports; /* phase1.{md,json}, phase4.{md,json} */
};

/* Writes DIR/stats.json (atomically) from the sampler's stats and the symbolizer's (sym may be
 * NULL). Returns 0 or a negative errno (the failed write printed). */
int cli_write_stats(const char *dir, const struct prs_sampler_stats *st, double rate_hz,
		    const struct prs_symbolize_stats *sym);

/*
 * Writes the graphs, stats.json and reports of p (symbolized already) into dir, each file
 * whole or not at all; with summary, the reports' terminal summary is printed. Failures are
 * printed and shown in *w.
 */
void cli_write_recording(const struct prs_profile *p, const char *dir, const struct prs_sampler_stats *st,
			 double rate_hz, const struct prs_symbolize_stats *sym, struct cli_graph_choice g,
			 bool summary, struct cli_written *w);

#endif
