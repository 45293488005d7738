/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target: the folded-stacks reader (prs_folded_read) on any bytes, then everything the CLI
 * does with a profile it accepted. Seeds: folded files as stackcollapse, py-spy and we write them.
 */
#include "fuzz.h"

#include <stdlib.h>

#include "pyrsprof/profile.h"

#include "util/banned.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct prs_profile *p = NULL;
	struct prs_err err;
	FILE *f;

	if (size == 0)
		return 0; /* fmemopen refuses an empty buffer */
	f = fmemopen((void *)data, size, "r");
	if (!f)
		return 0;
	if (prs_folded_read(f, "fuzz.folded", &p, &err) == 0) {
		fuzz_consume_profile(p, size);
		prs_profile_free(p);
	}
	fclose(f);
	return 0;
}
