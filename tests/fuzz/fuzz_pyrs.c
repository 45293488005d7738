/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target: the profile.pyrs reader (prs_pyrs_read_mem) on any bytes, then everything the CLI
 * does with a profile it accepted (exports, flame graphs, diff); and the same bytes read as sums
 * (PRS_PYRS_SUMS, the read of pprof and the per-thread graph) and as sums without threads
 * (PRS_PYRS_SUMS_NO_THREADS, the read of report, flamegraph, diff and folded), consumed the same
 * way. The reads parse the same records: one accepting what another refuses, or counting other
 * samples, is a bug (abort). Seeds: recorded profiles.
 *
 * An input that does not start with the profile's magic is a decompressed record stream: its
 * first byte picks the format version (1 or 2), the rest is compressed into one zstd
 * frame behind a header. Mutations of a recorded profile mostly break zstd's checksums and stop
 * there; these reach the record parser itself (seeds: records-*.bin, streams of recorded
 * profiles).
 */
#include "fuzz.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "pyrsprof/profile.h"

#include "util/banned.h"

/* The profile made of a record stream (see above): malloc'd, *len set; NULL when not one. */
static uint8_t *from_records(const uint8_t *data, size_t size, size_t *len)
{
	size_t cap = ZSTD_compressBound(size) + 16, n;
	uint8_t *file;

	if (size < 1 || (size >= 8 && memcmp(data, "PYRSPROF", 8) == 0) || !(file = malloc(cap)))
		return NULL;
	memcpy(file, "PYRSPROF\x01\0\0\0\0\0\0\0", 16);
	file[8] = (uint8_t)(1 + data[0] % 2);
	n = ZSTD_compress(file + 16, cap - 16, data + 1, size - 1, 1);
	if (ZSTD_isError(n)) {
		free(file);
		return NULL;
	}
	*len = n + 16;
	return file;
}

int LLVMFuzzerTestOneInput(const uint8_t *in, size_t insize)
{
	size_t size = insize;
	uint8_t *made = from_records(in, insize, &size);
	const uint8_t *data = made ? made : in;
	struct prs_profile *p = NULL, *sums = NULL, *merged = NULL;
	struct prs_err err = { 0 }, serr = { 0 }, merr = { 0 };
	char warning[512] = "", swarning[512] = "", mwarning[512] = "";
	int rc, src, mrc;

	rc = prs_pyrs_read_mem(data, size, &p, warning, sizeof(warning), &err);
	if (rc == 0)
		fuzz_consume_profile(p, size);
	src = prs_pyrs_read_mem_flags(data, size, PRS_PYRS_SUMS, &sums, swarning, sizeof(swarning),
				      &serr);
	if (src == 0)
		fuzz_consume_profile(sums, size);
	mrc = prs_pyrs_read_mem_flags(data, size, PRS_PYRS_SUMS_NO_THREADS, &merged, mwarning,
				      sizeof(mwarning), &merr);
	if (mrc == 0)
		fuzz_consume_profile(merged, size);
	/* (out of memory aside, which the fuzzer's limits make rare) */
	if (rc != -ENOMEM && src != -ENOMEM && err.code != -ENOMEM && serr.code != -ENOMEM &&
	    ((rc == 0) != (src == 0) ||
	     (rc == 0 && (p->sample_count != sums->sample_count || strcmp(warning, swarning)))))
		abort();
	if (rc != -ENOMEM && mrc != -ENOMEM && err.code != -ENOMEM && merr.code != -ENOMEM &&
	    ((rc == 0) != (mrc == 0) ||
	     (rc == 0 && (p->sample_count != merged->sample_count || strcmp(warning, mwarning)))))
		abort();
	prs_profile_free(p);
	prs_profile_free(sums);
	prs_profile_free(merged);
	free(made);
	return 0;
}
