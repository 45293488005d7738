/* SPDX-License-Identifier: MIT */
/*
 * The pieces of `pyrsprof sweep` (src/cli/sweep.c): the command template with its {NAME}
 * placeholders and the values of --dim (sweep_template.c), and one recorded run of the command
 * (sweep_run.c). Errors are printed here (one line, cli_msg) and reported as false / NULL.
 */
#ifndef PYRSPROF_CLI_SWEEP_H
#define PYRSPROF_CLI_SWEEP_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>

#include "pyrsprof/sweep.h"

/* ---- sweep_template.c ---- */

/*
 * Parses "NAME=V1,V2,..." (--dim): NAME into dim (PRS_SWEEP_NAME_MAX + 1 bytes), the values (finite,
 * > 0, at most PRS_SWEEP_MAX_VALUES, none twice) sorted ascending into values, their count in *n.
 */
bool sweep_parse_dim(const char *arg, char *dim, double *values, size_t *n);

/* What replaces {NAME} for value v: an integral value as an integer ("1e3" -> "1000"), else
 * "%.15g" ("0.25"). */
void sweep_value_text(double v, char *buf, size_t size);

/*
 * True if every placeholder "{IDENT}" of cmd (NULL-terminated) is {dim} and there is one at
 * least ("{{" is a literal "{" and starts no placeholder); else prints why.
 */
bool sweep_check_placeholders(char **cmd, const char *dim);

/* A new argv with every {dim} replaced by text and "{{" by "{"; free with sweep_free_argv().
 * NULL when out of memory. Check the placeholders first. */
char **sweep_substitute(char **cmd, const char *text);
void sweep_free_argv(char **argv);

/* ---- sweep_run.c ---- */

/* True if prog can be started as execvp would find it; else prints why. */
bool sweep_check_command(const char *prog);

/* The signals sweep blocks and takes with sigtimedwait: SIGCHLD, SIGINT, SIGTERM, SIGHUP. */
void sweep_sigset(sigset_t *set);

/*
 * Records one run of cmd (already substituted) with `pyrsprof run -r RATE -o DIR -- cmd` (and
 * --subprocesses when subprocesses) in a
 * forked copy of pyrsprof, its output (and the recorder's messages) in DIR/output.log, its input
 * /dev/null, and fills r (done, status, figures, verdict, problem). Call with sweep_sigset()'s
 * signals blocked; old is the mask to restore in the copy. A signal that arrives meanwhile sets
 * *stop_sig (one sent with kill() is passed on to the run). Returns false on a setup failure
 * (message printed), when the sweep cannot go on.
 */
bool sweep_run_once(const char *rate_arg, bool subprocesses, char **cmd, const char *dir,
		    struct prs_sweep_run *r, const sigset_t *old, int *stop_sig);

#endif
