/* SPDX-License-Identifier: MIT */
/*
 * Benchmark of the profile model's hot path and of profile.pyrs throughput, printed as a table:
 * - intern a warm 30-deep stack (30 raw frames + 30 stack-trie probes) and append a sample, as
 *   the sampler does for every thread-sample;
 * - recorder flush: encode + zstd-compress + write N new samples (with some new stacks);
 * - reader: decompress + parse + validate the file back.
 * Usage: profile_bench [samples] (default 1000000). Writes a scratch file under /tmp.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pyrsprof/profile.h"
#include "pyrsprof/util.h"

#include "util/banned.h"

#define DEPTH 30

static uint32_t intern_stack(struct prs_profile *p, uint64_t base)
{
	uint32_t s = 0, i;

	for (i = 0; i < DEPTH; i++)
		s = prs_profile_stack(p, s, prs_profile_raw_frame(p, 0, base + i * 64, i == DEPTH - 1));
	return s;
}

int main(int argc, char **argv)
{
	size_t n = argc > 1 ? strtoul(argv[1], NULL, 0) : 1000000, i;
	struct prs_mapping m = { .start = 0x400000, .end = 0x1400000 };
	char path[64], warn[256];
	struct prs_recorder *r;
	struct prs_profile *p, *back;
	struct prs_err err;
	struct stat st;
	uint64_t t0, t1, t_intern, t_stack, t_flush, t_read;
	uint32_t stack = 0;
	uint64_t x = 88172645463325252ULL;
	int rc;

	snprintf(path, sizeof(path), "/tmp/profile_bench.%d.pyrs", (int)getpid());
	if (prs_recorder_open(path, &r, &err)) {
		fprintf(stderr, "profile_bench: %s\n", err.msg);
		return 1;
	}
	p = prs_recorder_profile(r);
	m.path = prs_profile_string(p, "/bench/bin", 10);
	prs_profile_mapping(p, &m);
	/* warm: 64 distinct leaves under a common 29-frame trunk */
	for (i = 0; i < 64; i++)
		intern_stack(p, 0x400000 + i * 4096);

	t0 = prs_now_ns();
	for (i = 0; i < n; i++) {
		/* a pseudo-random leaf and timing jitter, so that the file size is not a best case */
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		stack = intern_stack(p, 0x400000 + (x % 64) * 4096);
		rc = prs_profile_sample(p, &(struct prs_sample){ .time_ns = i * 5000 + (x >> 40) % 1000,
			.tid = 1 + (int32_t)(i % 4),
			.state = PRS_STATE_RUNNING, .syscall = -1, .stack = stack, .weight = 1 });
		if (rc)
			return 1;
	}
	t1 = prs_now_ns();
	t_intern = t1 - t0;

	/* the stack-trie probes alone (frames already resolved) */
	{
		uint32_t frames[DEPTH], s = 0, k;

		for (k = 0; k < DEPTH; k++)
			frames[k] = prs_profile_raw_frame(p, 0, 0x400000 + k * 64, k == DEPTH - 1);
		t0 = prs_now_ns();
		for (i = 0; i < n; i++)
			for (s = 0, k = 0; k < DEPTH; k++)
				s = prs_profile_stack(p, s, frames[k]);
		t_stack = prs_now_ns() - t0;
		if (s == UINT32_MAX)
			return 1;
	}

	t0 = prs_now_ns();
	if (prs_recorder_flush(r, &err)) {
		fprintf(stderr, "profile_bench: %s\n", err.msg);
		return 1;
	}
	t_flush = prs_now_ns() - t0;
	if (prs_recorder_close(r, NULL, &err)) {
		fprintf(stderr, "profile_bench: %s\n", err.msg);
		return 1;
	}
	stat(path, &st);
	t0 = prs_now_ns();
	if (prs_pyrs_read(path, &back, warn, sizeof(warn), &err)) {
		fprintf(stderr, "profile_bench: %s\n", err.msg);
		return 1;
	}
	t_read = prs_now_ns() - t0;

	printf("profile model and profile.pyrs (%zu samples, %d-deep stacks)\n", n, DEPTH);
	printf("%-52s %12s\n", "measure", "value");
	printf("%-52s %12.1f\n", "ns per sample: 30 raw frames + 30 stack probes + append",
	       (double)t_intern / (double)n);
	printf("%-52s %12.1f\n", "ns per sample: 30 stack-trie probes only", (double)t_stack / (double)n);
	printf("%-52s %12.2f\n", "ns per stack-trie probe", (double)t_stack / (double)n / DEPTH);
	printf("%-52s %12.1f\n", "recorder flush: ns per sample", (double)t_flush / (double)n);
	printf("%-52s %12.2f\n", "recorder flush: million samples/s", (double)n * 1e3 / (double)t_flush);
	printf("%-52s %12.2f\n", "file bytes per sample", (double)st.st_size / (double)n);
	printf("%-52s %12.2f\n", "reader: million samples/s", (double)back->nsamples * 1e3 / (double)t_read);
	prs_profile_free(back);
	unlink(path);
	return 0;
}
