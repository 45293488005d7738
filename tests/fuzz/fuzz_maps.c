/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target: the /proc/PID/maps parser (prs_maps_parse) and the lookup over what it returns
 * (prs_maps_find, which must agree with a linear scan). Seeds: real maps files.
 */
#include "fuzz.h"

#include <stdlib.h>

#include "pyrsprof/maps.h"

#include "util/banned.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct prs_maps m = PRS_MAPS_INIT;
	struct prs_err err;

	if (prs_maps_parse((const char *)data, size, &m, &err) != 0)
		return 0;
	for (size_t i = 0; i < m.n; i++) {
		const struct prs_map *e = &m.v[i];

		/* sorted, disjoint, non-empty: what the binary search relies on */
		if (e->start >= e->end || (i && e->start < m.v[i - 1].end) || !e->path)
			abort();
		if (prs_maps_find(&m, e->start) != e || prs_maps_find(&m, e->end - 1) != e)
			abort();
		if (prs_maps_find(&m, e->end) == e)
			abort();
	}
	prs_maps_release(&m);
	return 0;
}
