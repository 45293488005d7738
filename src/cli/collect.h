/* SPDX-License-Identifier: MIT */
/*
 * What a recording collects for the classifier outside the sampler loop (docs/classify.md,
 * "Collection"): the machine, the host's and the cgroup's CPU time, the process and its threads
 * from /proc at the start and the end, the reaped child's rusage, the threads' exits from
 * taskstats (root), and the counters (perf_event_open, or a replay file named by
 * PYRSPROF_COUNTERS_REPLAY). Everything goes into the profile as accounting records. Also the
 * run/attach options of the reports (--target, --dim, --no-classify).
 */
#ifndef PYRSPROF_CLI_COLLECT_H
#define PYRSPROF_CLI_COLLECT_H

#include <stdbool.h>
#include <sys/types.h>

#include "pyrsprof/profile.h"
#include "pyrsprof/report.h"
#include "pyrsprof/sampler.h"

/* The report options of run and attach. */
struct cli_phase_opts {
	const char *target;
	const char *dims[PRS_MAX_DIMS];
	size_t ndims;
	bool no_classify;
	bool wss;           /* --wss: the working-set floor (include/pyrsprof/wss.h) */
	const char *sweeps[PRS_MAX_DIMS]; /* report --sweep: sweep.json files filling the growth */
	size_t nsweeps;
};

/* Long option ids of the report options (getopt values, above any short option). */
enum { CLI_OPT_TARGET = 1000, CLI_OPT_DIM, CLI_OPT_NO_CLASSIFY, CLI_OPT_WSS, CLI_OPT_SWEEP };

/* Handles one of the options above. Returns -1 when it was one and is fine, EXIT_USAGE after
 * printing what is wrong, or 0 when opt is not one of them. */
int cli_phase_opt(int opt, const char *arg, struct cli_phase_opts *po);
/* Stores the target and dimensions in the profile's meta ("target", "dim"). */
void cli_phase_meta(struct prs_profile *p, const struct cli_phase_opts *po);

struct cli_collect;

/* Before the target is launched or attached to (so no exit is missed). NULL when off or out of
 * memory (then nothing is collected). */
struct cli_collect *cli_collect_new(bool on);
/* With --wss: measure the working set from the start on (cli_collect_start). */
void cli_collect_wss(struct cli_collect *c, bool on);
/* Makes the sampler's once-a-second callback drain the exit messages too (keeping so's own). */
void cli_collect_hook(struct cli_collect *c, struct prs_sampler_opts *so);
/* Once the target is known: the START snapshots into p, and the counters opened. */
void cli_collect_start(struct cli_collect *c, pid_t pid, struct prs_profile *p);
/* When sampling ended: the END and EXIT snapshots and the counter readings into p. reaped: the
 * target was pyrsprof's child and has been reaped (its rusage is known). */
void cli_collect_end(struct cli_collect *c, struct prs_profile *p, bool reaped);
/* When sampling ended: a WAIT_ADDR record per (thread, futex word) the samples found a thread
 * blocked on (prs_sampler_wait_addrs), flagged PRS_WAIT_F_GIL for the GIL's words. */
void cli_collect_waits(struct cli_collect *c, struct prs_profile *p, const struct prs_sampler *s);
void cli_collect_free(struct cli_collect *c);

/*
 * Builds the facts and the verdict of p and writes DIR/phase1.{md,json} and DIR/phase4.{md,json};
 * with summary, prints the terminal summary. python_stacks: phase 4's hot spots (and the
 * summary's) in the Python stack view. po (may be NULL): a target or dimensions given here
 * replace those stored in p. Returns 0, or -1 after printing why.
 */
int cli_write_reports(const struct prs_profile *p, const char *dir, bool summary, bool python_stacks,
		      const struct cli_phase_opts *po);

#endif
