/* SPDX-License-Identifier: MIT */
/*
 * `run --scaling VAR=V1,V2[,...]` (docs/classify.md section 3; the note's §5 point 5): after the
 * recording, the command runs again once per value with VAR=V in its environment (e.g.
 * OMP_NUM_THREADS, RAYON_NUM_THREADS), unprofiled, its output discarded, and its wall and CPU
 * time are kept in the profile's meta ("scaling"), which the CPU-bound verdict's evidence reads:
 * for fixed work, the speedup from one value to the next against the CPU it took.
 */
#ifndef PYRSPROF_CLI_SCALING_H
#define PYRSPROF_CLI_SCALING_H

#include <signal.h>
#include <stdbool.h>

#include "pyrsprof/profile.h"

#define CLI_SCALING_MAX 8

enum { CLI_OPT_SCALING = 1200 }; /* its getopt value */

struct cli_scaling {
	char var[64];
	char values[CLI_SCALING_MAX][32];
	int n;
};

/* Parses VAR=V1,V2[,...] (2 to CLI_SCALING_MAX values) into sc. Prints what is wrong and returns
 * false on bad input. */
bool cli_scaling_parse(const char *arg, struct cli_scaling *sc);
/* Runs cmd once per value (signals restored to old in the children) and stores each run as a
 * meta "scaling" entry of p ("VAR=V wall_s=W cpu_s=C rc=R"). Stops at the first run that fails. */
void cli_scaling_run(const struct cli_scaling *sc, char *const cmd[], const sigset_t *old,
		     struct prs_profile *p);

#endif
