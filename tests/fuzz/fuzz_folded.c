/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target: the folded-stacks readers on any bytes: the profile model's (prs_folded_read),
 * then everything the CLI does with a profile it accepted, and the flame graph's direct path
 * (prs_fg_from_folded), which must accept exactly what the model's reader accepts. Seeds:
 * folded files as stackcollapse, py-spy and we write them.
 */
#include "fuzz.h"

#include <errno.h>
#include <stdlib.h>

#include "pyrsprof/flamegraph.h"
#include "pyrsprof/profile.h"

#include "util/banned.h"

/* The direct path on the same bytes: 0 if it accepted them. The SVG is written when small. */
static int direct(const uint8_t *data, size_t size)
{
	FILE *f = fmemopen((void *)data, size, "r");
	struct prs_fg *fg = prs_fg_new();
	struct prs_err err;
	uint64_t samples;
	int rc = -1;

	if (f && fg) {
		rc = prs_fg_from_folded(fg, f, "fuzz.folded", &samples, &err);
		if (rc == 0 && size <= FUZZ_CONSUME_MAX)
			prs_fg_write_svg(fg, fuzz_sink(), NULL, &err);
	}
	if (f)
		fclose(f);
	prs_fg_free(fg);
	return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct prs_profile *p = NULL;
	struct prs_err err = { 0 };
	int model;
	FILE *f;

	if (size == 0)
		return 0; /* fmemopen refuses an empty buffer */
	f = fmemopen((void *)data, size, "r");
	if (!f)
		return 0;
	model = prs_folded_read(f, "fuzz.folded", &p, &err);
	if (model == 0) {
		fuzz_consume_profile(p, size);
		prs_profile_free(p);
	}
	fclose(f);
	/* both read with one lexer: one accepting what the other refuses is a bug (out of memory
	 * aside, which the fuzzer's limits make rare) */
	if ((direct(data, size) == 0) != (model == 0) && err.code != -ENOMEM)
		abort();
	return 0;
}
