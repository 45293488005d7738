/* SPDX-License-Identifier: MIT */
/*
 * Overrides of how the CPython reader looks for the interpreter, from the environment. They exist
 * for the end-to-end tests of the reader's fallbacks (tests/e2e/test_python_reader.py,
 * test_python_threadnames.py), which run them on every installed CPython:
 *   PYRSPROF_PY_IGNORE_ANCHORS=1   as on a fully stripped binary: the _PyRuntime, interp_head and
 *                                  PyInterpreterState_Head symbols and the .PyRuntime section are
 *                                  ignored (3.7+ scans .data/.bss for the runtime);
 *                        =1+       the same but PyInterpreterState_Head is kept (3.6 decodes it);
 *   PYRSPROF_PY_NO_DEBUG_OFFSETS=1 3.13+: the generated layout table only;
 *   PYRSPROF_PY_DEBUG_OFFSETS_ONLY=1  3.13+: the target's _Py_DebugOffsets only (the path of a
 *                                  version newer than the table).
 * Read here, in the CLI, and passed down as struct prs_py_opts: the library reads no environment.
 * The other settings the environment overrides are read here too (README, "Environment"):
 *   PYRSPROF_AGENT=PATH            --mode preload: the agent library (default: next to pyrsprof);
 *   PYRSPROF_AGENT_CLOCK=posix     --mode preload: POSIX CPU timers even where perf events work
 *                                  (the clock of a machine that refuses perf_event_open);
 *   PYRSPROF_CACHE_DIR=DIR         where `calibrate` caches the machine's figures.
 */
#include "cli/cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/banned.h"

/* Whether the variable is set to something other than "" or "0". */
static bool on(const char *name)
{
	const char *v = getenv(name);

	return v && *v && strcmp(v, "0") != 0;
}

void cli_py_opts_from_env(struct prs_py_opts *o)
{
	const char *a = getenv("PYRSPROF_PY_IGNORE_ANCHORS");

	memset(o, 0, sizeof(*o));
	if (a && a[0] == '1') {
		o->no_anchor_symbols = true;
		o->no_head_fn = a[1] != '+';
	}
	o->no_debug_offsets = on("PYRSPROF_PY_NO_DEBUG_OFFSETS");
	o->debug_offsets_only = on("PYRSPROF_PY_DEBUG_OFFSETS_ONLY");
}

void cli_agent_opts_from_env(struct prs_sampler_opts *so)
{
	const char *agent = getenv("PYRSPROF_AGENT"), *clock = getenv("PYRSPROF_AGENT_CLOCK");

	so->agent_path = agent && agent[0] ? agent : NULL;
	so->agent_posix_clock = clock && strcmp(clock, "posix") == 0;
}

int cli_machine_cache_path(char *buf, size_t size)
{
	const char *d = getenv("PYRSPROF_CACHE_DIR"), *x = getenv("XDG_CACHE_HOME"), *h = getenv("HOME");
	int n;

	if (d && d[0])
		n = snprintf(buf, size, "%s/machine.json", d);
	else if (x && x[0] == '/')
		n = snprintf(buf, size, "%s/pyrsprof/machine.json", x);
	else if (h && h[0])
		n = snprintf(buf, size, "%s/.cache/pyrsprof/machine.json", h);
	else
		return -ENOENT;
	return n > 0 && (size_t)n < size ? 0 : -ENAMETOOLONG;
}
