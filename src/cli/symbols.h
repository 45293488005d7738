/* SPDX-License-Identifier: MIT */
/*
 * Naming a profile's native frames from the command line: the symbolizer's options (--debug-dir,
 * repeatable, on run, attach, dump and report; DEBUGINFOD_URLS from the environment) and the
 * symbolization pass with its messages to the user.
 */
#ifndef PYRSPROF_CLI_SYMBOLS_H
#define PYRSPROF_CLI_SYMBOLS_H

#include <stdbool.h>
#include <stddef.h>

#include "pyrsprof/profile.h"
#include "pyrsprof/symbol.h"

#define CLI_MAX_DEBUG_DIRS 64

struct cli_symopts {
	const char *dirs[CLI_MAX_DEBUG_DIRS]; /* borrowed from argv */
	size_t ndirs;
};

/* The help text of --debug-dir, for the usage messages. */
#define CLI_DEBUG_DIR_HELP \
	"      --debug-dir DIR  also look for debug files in DIR (DIR/.build-id/xx/yyyy.debug, or by\n" \
	"                       .gnu_debuglink name); repeatable. With DEBUGINFOD_URLS set, its\n" \
	"                       debuginfod servers are asked too\n"

/* Adds a --debug-dir folder, which must be a directory. Prints the problem and returns false. */
bool cli_add_debug_dir(struct cli_symopts *c, const char *dir);

/*
 * Symbolizes p with c's folders, root NULL, and debuginfod when DEBUGINFOD_URLS is set and not
 * empty (libdebuginfod reads the servers from it). Frames named before are named again when c
 * has folders (they were given to find what was missing). Prints a warning when it fails or files
 * changed since they were mapped; with hint, says how many frames have no symbols and what names
 * them. stats (may be NULL) receives the counters.
 */
void cli_symbolize(struct prs_profile *p, const struct cli_symopts *c, bool hint,
		   struct prs_symbolize_stats *stats);

/*
 * A symbolizer with c's options, kept across passes over a profile that grows while recording
 * (`top`, snapshots). NULL (a warning printed) when it cannot be set up; free with
 * prs_symbolizer_free.
 */
struct prs_symbolizer *cli_symbolizer_new(const struct cli_symopts *c);

/* A pass of s (may be NULL: nothing is named) over p's frames not yet named (s has c's debug
 * folders from the start, so nothing needs naming again); a failure is printed as a warning.
 * stats (may be NULL): s's cumulative counters. */
void cli_symbolize_with(struct prs_symbolizer *s, struct prs_profile *p, struct prs_symbolize_stats *stats);

#endif
