/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target: the profile.pyrs reader (prs_pyrs_read_mem) on any bytes, then everything the CLI
 * does with a profile it accepted (exports, flame graphs, diff). Seeds: recorded profiles.
 */
#include "fuzz.h"

#include <stdlib.h>

#include "pyrsprof/profile.h"

#include "util/banned.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct prs_profile *p = NULL;
	struct prs_err err;
	char warning[512];

	if (prs_pyrs_read_mem(data, size, &p, warning, sizeof(warning), &err) == 0) {
		fuzz_consume_profile(p, size);
		prs_profile_free(p);
	}
	return 0;
}
