/* SPDX-License-Identifier: MIT */
/* The symbolizer's options from the command line, and the pass that names a profile's frames. */
#include "cli/symbols.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "util/banned.h"

bool cli_add_debug_dir(struct cli_symopts *c, const char *dir)
{
	struct stat st;

	if (c->ndirs == CLI_MAX_DEBUG_DIRS) {
		cli_msg("--debug-dir: at most %d folders", CLI_MAX_DEBUG_DIRS);
		return false;
	}
	if (!dir[0]) {
		cli_msg("--debug-dir: empty folder name");
		return false;
	}
	if (stat(dir, &st) != 0) {
		cli_msg("--debug-dir %s: %s (give a folder of debug files)", dir, strerror(errno));
		return false;
	}
	if (!S_ISDIR(st.st_mode)) {
		cli_msg("--debug-dir %s: not a directory (give a folder of debug files)", dir);
		return false;
	}
	c->dirs[c->ndirs++] = dir;
	return true;
}

/* The symbolizer's options for c (NULL: none). */
static struct prs_symbol_opts sym_opts(const struct cli_symopts *c)
{
	/* the CLI's switch for debuginfod: libdebuginfod itself reads the servers from it */
	const char *urls = getenv("DEBUGINFOD_URLS");

	return (struct prs_symbol_opts){
		.debug_dirs = c ? c->dirs : NULL,
		.ndebug_dirs = c ? c->ndirs : 0,
		.debuginfod = urls && urls[0],
		.rename = c && c->ndirs,
	};
}

/* The warnings and hint of a symbolization pass (see cli_symbolize). */
static void report(int rc, const struct prs_err *err, const struct prs_symbolize_stats *st, bool hint)
{
	if (rc < 0)
		cli_msg("warning: symbolization failed: %s", err->msg);
	if (st->build_id_mismatches)
		cli_msg("warning: %u file%s changed since they were mapped (build id differs): their "
			"frames are left unnamed", st->build_id_mismatches,
			st->build_id_mismatches == 1 ? "" : "s");
	if (hint && st->by_range)
		cli_msg("%llu of %llu native frames are in functions without symbols, shown as "
			"FILE!fn+0xOFFSET; debug symbols name them (--debug-dir, DEBUGINFOD_URLS: see "
			"the README)", (unsigned long long)st->by_range, (unsigned long long)st->frames);
}

void cli_symbolize(struct prs_profile *p, const struct cli_symopts *c, bool hint,
		   struct prs_symbolize_stats *stats)
{
	struct prs_symbol_opts o = sym_opts(c);
	struct prs_symbolize_stats st;
	struct prs_err err = { 0 };
	int rc;

	memset(&st, 0, sizeof(st));
	rc = prs_symbolize_profile(p, &o, &st, &err);
	report(rc, &err, &st, hint);
	if (stats)
		*stats = st;
}

struct prs_symbolizer *cli_symbolizer_new(const struct cli_symopts *c)
{
	struct prs_symbol_opts o = sym_opts(c);
	struct prs_symbolizer *s = prs_symbolizer_new();

	if (s && prs_symbolizer_set_opts(s, &o) != 0) {
		prs_symbolizer_free(s);
		s = NULL;
	}
	if (!s)
		cli_msg("warning: cannot set up the symbolizer: out of memory or a bad --debug-dir");
	return s;
}

void cli_symbolize_with(struct prs_symbolizer *s, struct prs_profile *p, struct prs_symbolize_stats *stats)
{
	struct prs_symbolize_stats st;
	struct prs_err err = { 0 };
	int rc;

	memset(&st, 0, sizeof(st));
	rc = s ? prs_symbolize_profile_with(s, p, false, &st, &err) : 0;
	/* the mismatches were said at the first pass: the counters are cumulative */
	if (rc < 0)
		report(rc, &err, &(struct prs_symbolize_stats){ 0 }, false);
	if (stats)
		*stats = st;
}
