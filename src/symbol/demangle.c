// SPDX-License-Identifier: MIT
/*
 * Demangling of Rust (legacy and v0) and C++ symbol names with libiberty (Debian's libiberty-dev,
 * 20230104, whose rust_demangle handles both Rust schemes and strips the legacy hash unless
 * DMGL_VERBOSE is given).
 */
#include "pyrsprof/symbol.h"

#include <stdlib.h>
#include <string.h>

#include <libiberty/demangle.h>

#include "util/banned.h"

/* libiberty recurses on nesting; its own recursion limit applies, and we refuse absurd inputs. */
#define MANGLED_MAX (64u * 1024)

char *prs_demangle(const char *mangled, enum prs_kind *kind)
{
	char *out;

	if (!mangled || mangled[0] != '_' || strnlen(mangled, MANGLED_MAX + 1) > MANGLED_MAX)
		return NULL;
	if (mangled[1] == 'R' || mangled[1] == 'Z') {
		/* rust_demangle accepts v0 "_R" names and legacy "_ZN...17h<hash>E" names only. */
		out = rust_demangle(mangled, DMGL_PARAMS | DMGL_ANSI);
		if (out) {
			if (kind)
				*kind = PRS_KIND_RUST;
			return out;
		}
	}
	if (mangled[1] != 'Z')
		return NULL;
	out = cplus_demangle(mangled, DMGL_PARAMS | DMGL_ANSI | DMGL_GNU_V3);
	if (out && kind)
		*kind = PRS_KIND_CPP;
	return out;
}
