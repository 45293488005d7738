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
 */
#include "cli/cli.h"

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
