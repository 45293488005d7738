/* SPDX-License-Identifier: MIT */
/*
 * Snapshots of a recording while it runs (`kill -USR1 <pyrsprof>`, `--snapshot-every SEC`): the
 * profile so far, with the graphs, stats.json and reports the end of the recording would write,
 * into DIR/snapshots/NNN-<elapsed>s/, a folder that appears whole (built under a hidden name,
 * then renamed). Sampling goes on; the final outputs are those of a recording without snapshots.
 *
 * The SIGUSR1 handler only sets a flag; the snapshot is taken by the sampler's once-a-second
 * callback, between two ticks, from the profile.pyrs the recorder has just flushed (read back into
 * a copy, so the live profile is not touched). The ticks the snapshot delays are counted as missed
 * by the sampler, as any late tick.
 */
#ifndef PYRSPROF_CLI_SNAPSHOT_H
#define PYRSPROF_CLI_SNAPSHOT_H

#include <stdbool.h>
#include <stdint.h>

#include "cli/render.h"
#include "cli/symbols.h"
#include "pyrsprof/sampler.h"

/* The option of run and attach (a getopt value above the others') and its help. */
enum { CLI_OPT_SNAPSHOT_EVERY = 1100 };
#define CLI_SNAPSHOT_HELP \
	"      --snapshot-every SEC  write a snapshot of the profile so far every SEC seconds\n" \
	"                       (also on 'kill -USR1 <pyrsprof pid>'): DIR/snapshots/NNN-<elapsed>s/\n"

struct cli_snapshot {
	const char *dir;                 /* the recording's folder (borrowed) */
	const struct cli_symopts *sym;   /* borrowed */
	double rate_hz;
	struct cli_graph_choice graphs;
	double every_s;                  /* --snapshot-every; 0 = on SIGUSR1 only */
	double next_s;                   /* when the next periodic snapshot is due */
	const struct prs_sampler *s;     /* set by cli_snapshot_start */
	struct prs_symbolizer *symbolizer; /* kept from one snapshot to the next: new addresses only */
	unsigned taken, failed;
	uint64_t pause_ns, max_pause_ns; /* sampling paused by snapshots: sum, longest */
	/* the callback it chains to */
	void (*chain)(void *arg, double elapsed_s, uint64_t samples, size_t threads);
	void *chain_arg;
};

/* Sets c up and makes the sampler's once-a-second callback take snapshots (keeping so's own
 * callback, called after). Call before cli_collect_hook or after: both chain. */
void cli_snapshot_hook(struct cli_snapshot *c, struct prs_sampler_opts *so, const char *dir,
		       const struct cli_symopts *sym, double rate_hz, struct cli_graph_choice graphs,
		       double every_s);

/* Once the sampler exists: installs the SIGUSR1 handler (a flag). */
void cli_snapshot_start(struct cli_snapshot *c, const struct prs_sampler *s);

/* After sampling: SIGUSR1 is ignored from here on, the symbolizer freed; says how many snapshots paused sampling how
 * long, when there were any. */
void cli_snapshot_end(struct cli_snapshot *c);

/* Removes DIR/snapshots and the snapshots in it (for --force). Returns 0 (also when there is
 * none) or -errno (e.g. -ENOTEMPTY when it holds files a snapshot does not write). */
int cli_snapshots_remove(const char *dir);

#endif
