/* SPDX-License-Identifier: MIT */
/*
 * long_bench: a long recording without the wait (`make bench` runs it; prints a table). Drives the
 * profile model and the .pyrs recorder as the sampler does, with synthetic samples of a
 * 50-thread Python program at 100 Hz for 10 simulated minutes (3M thread-samples), flushing once
 * per simulated second. Each thread stays in a stack for a few samples, then moves to another
 * from a pool whose stacks are made when first sampled (a trunk of interpreter frames, 10-40
 * Python frames down a call tree, 0-4 raw native frames), so distinct stacks keep appearing as a
 * real program's do, fewer as time goes on; a fifth of the stays are off-CPU in a syscall. The
 * samples of a tick share its time, as the sampler stamps them (src/sample/record.c: the tick's
 * start), and a tick starts up to 50 us late (--jitter-us; --thread-times stamps each thread
 * ~15 us after the previous one instead, as an earlier version of this bench did: no sampler
 * writes such times, and they cost 3-4 bytes a sample). The samples are aggregated in memory as
 * the recorder of `run` does (prs_recorder_aggregate).
 *
 * Every simulated minute it prints the samples, the distinct stacks, this process's RSS and
 * the file's size, then times the end of the recording: closing the file, then the CPU and wall
 * flame graphs (tree + SVG to /dev/null) from the profile in memory. Symbolization is not part
 * of it (synthetic frames): a real recording's summary or --stats gives that.
 * Goals (issue 13): RSS grows with the distinct stacks, not with the samples; under 2 bytes per
 * sample in profile.pyrs; the end of the recording under 2 s.
 *
 * What the model keeps of the samples is one record per distinct (stack, thread, state, syscall)
 * (src/profile/aggregate.c), so its memory grows with those keys. With the default pool the 50
 * threads keep meeting keys they had not met (each thread wanders over 20,000 stacks, a fifth of
 * its stays blocked in one of 6 syscalls) for the whole 10 minutes: RSS grows with the records,
 * and the table says by how much per new record. Run without options (as `make bench` does), it
 * then runs again with a pool of 100 stacks for 30 minutes, whose keys are nearly all met in the
 * first 20 (the rare stacks of the skewed choice come last): over the last 10 the samples go on
 * and RSS stays where it is, which is the goal's "not with the samples".
 * Usage: long_bench [--threads T] [--minutes M] [--hz H] [--pool D] [--seed X] [--jitter-us J]
 *        [--thread-times 1] [--aggregate 0] [--base-minute B: growth measured from minute B]
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "pyrsprof/flamegraph.h"
#include "pyrsprof/profile.h"
#include "pyrsprof/util.h"

#include "util/banned.h"

static uint64_t rng = 88172645463325252ull;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static double u01(void)
{
	return (double)(rnd() >> 11) / 9007199254740992.0;
}

static uint32_t S(struct prs_profile *p, const char *s)
{
	return prs_profile_string(p, s, strlen(s));
}

/* This process's resident memory (MB), from /proc/self/statm. */
static double rss_mb(void)
{
	long pages = 0, resident = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (f) {
		if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
			resident = 0;
		fclose(f);
	}
	return (double)resident * (double)sysconf(_SC_PAGESIZE) / 1e6;
}

/* This process's CPU time (s): the wall time of a loaded machine includes waiting for a core. */
static double cpu_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

struct world {
	struct prs_profile *p;
	uint32_t map, file, trunk[8];
	uint32_t *pool; /* stack id of pool stack k + 1, 0 = not made yet */
	uint32_t npool;
};

/* Pool stack k, made at its first use (deterministic for k: its own generator). */
static uint32_t pool_stack(struct world *w, uint32_t k)
{
	struct prs_profile *p = w->p;
	uint64_t save = rng, node = 1;
	uint32_t s = 0, depth, nat;
	char name[64];

	if (w->pool[k])
		return w->pool[k] - 1;
	rng = 0x9e3779b97f4a7c15ull * (k + 1) | 1;
	depth = 10 + (uint32_t)(rnd() % 31);
	nat = (uint32_t)(rnd() % 5);
	for (int i = 0; i < 8; i++)
		s = prs_profile_stack(p, s, w->trunk[i]);
	for (uint32_t d = 0; d < depth; d++) {
		double u = u01();

		node = node * 7 + (uint64_t)(u * u * u * 6); /* a few hot children */
		snprintf(name, sizeof(name), "py_func_%" PRIu64, node % 30011);
		s = prs_profile_stack(p, s, prs_profile_named_frame(p, PRS_KIND_PYTHON, S(p, name),
								    w->file, (uint32_t)(node % 997)));
	}
	for (uint32_t d = 0; d < nat; d++)
		s = prs_profile_stack(p, s, prs_profile_raw_frame(p, w->map, 0x7f0000001000 +
								  (rnd() % 4000) * 16, d == nat - 1));
	rng = save;
	w->pool[k] = s + 1;
	return s;
}

/* The CPU and wall flame graphs of p, written to /dev/null: the end of a recording. */
static int graphs(const struct prs_profile *p)
{
	FILE *null = fopen("/dev/null", "w");
	struct prs_err err;
	int rc = null ? 0 : -1;

	for (int v = 0; v < 2 && !rc; v++) {
		struct prs_view_opts o = { .view = v ? PRS_VIEW_WALL : PRS_VIEW_CPU };
		struct prs_fg *fg = prs_fg_new();

		rc = fg ? prs_fg_from_profile(fg, p, &o, &err) : -1;
		if (!rc)
			rc = prs_fg_write_svg(fg, null, NULL, &err);
		prs_fg_free(fg);
	}
	if (null)
		fclose(null);
	return rc;
}

int main(int argc, char **argv)
{
	static const int16_t syscalls[] = { 0, 7, 202, 230, 232, 35 };
	unsigned threads = 50, minutes = 10, hz = 100, jitter_us = 50, thread_times = 0, aggregate = 1;
	unsigned base = 1; /* the minute the growth is measured from */
	uint32_t npool = 20000;
	struct prs_mapping m = { .start = 0x400000, .end = 0x4400000 };
	char path[64];
	struct prs_recorder *r;
	struct prs_profile *p;
	struct prs_err err;
	struct world w = { 0 };
	struct stat st;
	uint32_t *cur, *left;
	int16_t *sc; /* the syscall a thread is blocked in during its stay, -1 when running */
	uint64_t ticks, t, t0, loop_ns = 0;
	double rss0 = 0, rss_end = 0, close_s, graphs_s, graphs_cpu_s;
	size_t samples0 = 0, stacks0 = 0, records0 = 0;

	for (int i = 1; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--threads") == 0)
			threads = (unsigned)strtoul(argv[i + 1], NULL, 10);
		else if (strcmp(argv[i], "--minutes") == 0)
			minutes = (unsigned)strtoul(argv[i + 1], NULL, 10);
		else if (strcmp(argv[i], "--hz") == 0)
			hz = (unsigned)strtoul(argv[i + 1], NULL, 10);
		else if (strcmp(argv[i], "--pool") == 0)
			npool = (uint32_t)strtoul(argv[i + 1], NULL, 10);
		else if (strcmp(argv[i], "--jitter-us") == 0)
			jitter_us = (unsigned)strtoul(argv[i + 1], NULL, 10);
		else if (strcmp(argv[i], "--thread-times") == 0)
			thread_times = (unsigned)strtoul(argv[i + 1], NULL, 10);
		else if (strcmp(argv[i], "--base-minute") == 0)
			base = (unsigned)strtoul(argv[i + 1], NULL, 10);
		else if (strcmp(argv[i], "--aggregate") == 0)
			aggregate = (unsigned)strtoul(argv[i + 1], NULL, 10);
		else if (strcmp(argv[i], "--seed") == 0)
			rng = strtoull(argv[i + 1], NULL, 10) * 0x9e3779b97f4a7c15ull | 1;
	}
	if (!threads || !minutes || !hz || !npool || !base || base > minutes) {
		fprintf(stderr, "long_bench: --threads, --minutes, --hz, --pool and --base-minute must be > 0, "
			"--base-minute at most --minutes\n");
		return 1;
	}
	snprintf(path, sizeof(path), "/tmp/long_bench.%d.pyrs", (int)getpid());
	if (prs_recorder_open(path, &r, &err)) {
		fprintf(stderr, "long_bench: %s\n", err.msg);
		return 1;
	}
	if (aggregate && prs_recorder_aggregate(r)) {
		fprintf(stderr, "long_bench: out of memory\n");
		return 1;
	}
	p = w.p = prs_recorder_profile(r);
	prs_profile_meta(p, "command", "python3 app.py --long");
	prs_profile_meta(p, "rate_hz", "100");
	m.path = S(p, "/usr/bin/python3.11");
	w.map = prs_profile_mapping(p, &m);
	for (int i = 0; i < 8; i++)
		w.trunk[i] = prs_profile_raw_frame(p, w.map, 0x401000 + (uint64_t)i * 0x100, false);
	m = (struct prs_mapping){ .start = 0x7f0000000000, .end = 0x7f0004000000 };
	m.path = S(p, "/usr/lib/libapp.so");
	w.map = prs_profile_mapping(p, &m);
	w.file = S(p, "app.py");
	w.pool = calloc(npool, sizeof(*w.pool));
	w.npool = npool;
	cur = calloc(threads, sizeof(*cur));
	left = calloc(threads, sizeof(*left));
	sc = calloc(threads, sizeof(*sc));
	if (!w.pool || !cur || !left || !sc)
		return 1;
	for (unsigned k = 0; k < threads; k++)
		prs_profile_thread(p, (int32_t)(1000 + k), S(p, k ? "worker" : "MainThread"));

	printf("a long recording (long_bench): %u threads, %u Hz, %u simulated minutes, a pool of "
	       "%" PRIu32 " stacks made when first sampled; the model and the recorder as the sampler "
	       "drives them (one flush per simulated second); %s; samples %s in memory\n", threads, hz,
	       minutes, npool, thread_times ? "each thread-sample stamped 15 us after the previous one"
	       : "the samples of a tick share its time", aggregate ? "aggregated" : "one record each");
	printf("goals: RSS grows with the distinct stacks, not with the samples; < 2 bytes/sample in "
	       "profile.pyrs; end of recording < 2 s\n");
	printf("%-8s %10s %10s %10s %9s %10s %12s\n", "minute", "samples", "stacks", "records", "RSS MB",
	       "file MB", "bytes/sample");
	ticks = (uint64_t)minutes * 60 * hz;
	for (t = 0; t < ticks; t++) {
		uint64_t now = t * (1000000000ull / hz) + (jitter_us ? rnd() % (jitter_us * 1000ull) : 0);
		uint64_t tick0 = prs_now_ns();

		for (unsigned k = 0; k < threads; k++) {
			struct prs_sample s = { .time_ns = thread_times ? now + k * 15000 + rnd() % 3000 : now,
						.tid = (int32_t)(1000 + k),
						.state = PRS_STATE_RUNNING, .syscall = -1, .weight = 1 };

			if (!left[k]) {
				double u = u01();

				cur[k] = (uint32_t)(u * u * u * (double)npool); /* skewed: a few hot stacks */
				left[k] = 1 + (uint32_t)(rnd() % 8);
				sc[k] = rnd() % 5 ? -1 : syscalls[rnd() % 6];
			}
			left[k]--;
			s.stack = pool_stack(&w, cur[k]);
			if (sc[k] >= 0) {
				s.state = PRS_STATE_BLOCKED;
				s.syscall = sc[k];
			}
			if (s.stack == UINT32_MAX || prs_profile_sample(p, &s)) {
				fprintf(stderr, "long_bench: out of memory\n");
				return 1;
			}
		}
		loop_ns += prs_now_ns() - tick0;
		if ((t + 1) % hz == 0 && prs_recorder_flush(r, &err)) {
			fprintf(stderr, "long_bench: %s\n", err.msg);
			return 1;
		}
		if ((t + 1) % (60ull * hz) == 0) {
			double rss = rss_mb();

			stat(path, &st);
			printf("%-8" PRIu64 " %10" PRIu64 " %10" PRIu32 " %10zu %9.1f %10.2f %12.3f\n",
			       (uint64_t)((t + 1) / (60ull * hz)), p->sample_count, p->nstacks, p->nsamples, rss,
			       (double)st.st_size / 1e6, (double)st.st_size / (double)p->sample_count);
			fflush(stdout);
			if ((t + 1) / (60ull * hz) == base) {
				rss0 = rss;
				samples0 = p->sample_count;
				stacks0 = p->nstacks;
				records0 = p->nsamples;
			}
			rss_end = rss;
		}
	}
	t0 = prs_now_ns();
	if (prs_recorder_close(r, &p, &err)) {
		fprintf(stderr, "long_bench: %s\n", err.msg);
		return 1;
	}
	close_s = (double)(prs_now_ns() - t0) / 1e9;
	t0 = prs_now_ns();
	graphs_cpu_s = cpu_s();
	if (graphs(p)) {
		fprintf(stderr, "long_bench: flame graphs failed\n");
		return 1;
	}
	graphs_s = (double)(prs_now_ns() - t0) / 1e9;
	graphs_cpu_s = cpu_s() - graphs_cpu_s;
	stat(path, &st);
	printf("\n%-58s %10s %10s\n", "measure", "goal", "measured");
	if (minutes > base) {
		char what[64];

		snprintf(what, sizeof(what), "RSS growth after minute %u, bytes per sample", base);
		printf("%-58s %10s %10.1f\n", what, "~0",
		       (rss_end - rss0) * 1e6 / (double)(p->sample_count - samples0));
		printf("%-58s %10s %10zu\n", "  while the distinct stacks grew by", "", p->nstacks - stacks0);
		printf("%-58s %10s %10zu\n", "  and the records (stack, thread, state) by", "",
		       p->nsamples - records0);
		if (p->nsamples > records0)
			printf("%-58s %10s %10.1f\n", "  RSS growth per new record, bytes", "",
			       (rss_end - rss0) * 1e6 / (double)(p->nsamples - records0));
	}
	printf("%-58s %10s %10.2f\n", "  the model's sample records, bytes per sample", "",
	       (double)(p->nsamples * sizeof(struct prs_sample)) / (double)p->sample_count);
	printf("%-58s %10s %10.1f\n", "the samples made and added to the model, ns per sample", "",
	       (double)loop_ns / (double)p->sample_count);
	printf("%-58s %10s %10.3f\n", "profile.pyrs bytes per sample", "< 2",
	       (double)st.st_size / (double)p->sample_count);
	printf("%-58s %10s %10.2f\n", "end: close the file (s, wall)", "", close_s);
	printf("%-58s %10s %10.2f\n", "end: CPU + wall flame graphs from memory (s, wall)", "", graphs_s);
	printf("%-58s %10s %10.2f\n", "  of which CPU (s; wall minus CPU: waiting for a core)", "", graphs_cpu_s);
	printf("%-58s %10s %10.2f\n", "end of recording without symbolization (s, wall)", "< 2",
	       close_s + graphs_s);
	prs_profile_free(p);
	free(w.pool);
	free(cur);
	free(left);
	free(sc);
	unlink(path);
	if (argc == 1) { /* as `make bench` runs it: then the run whose keys are all met early */
		printf("\nagain with a pool of 100 stacks for 30 minutes: the keys are nearly all met in the "
		       "first 20, the samples go on (a new process, so that its RSS is its own)\n");
		fflush(stdout);
		execl("/proc/self/exe", argv[0], "--pool", "100", "--minutes", "30", "--base-minute", "20",
		      (char *)NULL);
		perror("long_bench: exec");
		return 1;
	}
	return 0;
}
