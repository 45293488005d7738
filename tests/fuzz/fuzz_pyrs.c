/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target: the profile.pyrs reader (prs_pyrs_read_mem) on any bytes, then everything the CLI
 * does with a profile it accepted (exports, flame graphs, diff); and the same bytes read as sums
 * (PRS_PYRS_SUMS, the read of report, flamegraph, diff, folded and pprof), consumed the same way.
 * The two reads parse the same records: one accepting what the other refuses, or counting other
 * samples, is a bug (abort). Seeds: recorded profiles.
 */
#include "fuzz.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pyrsprof/profile.h"

#include "util/banned.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct prs_profile *p = NULL, *sums = NULL;
	struct prs_err err = { 0 }, serr = { 0 };
	char warning[512] = "", swarning[512] = "";
	int rc, src;

	rc = prs_pyrs_read_mem(data, size, &p, warning, sizeof(warning), &err);
	if (rc == 0)
		fuzz_consume_profile(p, size);
	src = prs_pyrs_read_mem_flags(data, size, PRS_PYRS_SUMS, &sums, swarning, sizeof(swarning),
				      &serr);
	if (src == 0)
		fuzz_consume_profile(sums, size);
	/* (out of memory aside, which the fuzzer's limits make rare) */
	if (rc != -ENOMEM && src != -ENOMEM && err.code != -ENOMEM && serr.code != -ENOMEM &&
	    ((rc == 0) != (src == 0) ||
	     (rc == 0 && (p->sample_count != sums->sample_count || strcmp(warning, swarning)))))
		abort();
	prs_profile_free(p);
	prs_profile_free(sums);
	return 0;
}
