/* SPDX-License-Identifier: MIT */
/*
 * view_bench: how long each consumer of a profile takes on a large recording-shaped profile
 * (`make bench` runs it; prints a table). Generates, deterministic for a seed, a profile like a
 * long recording of a multi-threaded Python program: T threads in P processes, N samples at
 * 100 Hz, stacks drawn (skewed: a few hot, a long tail) from a pool of D distinct stacks, each a
 * trunk of native frames (symbolized: inline chains), 10-40 Python frames walking a call tree,
 * then 0-4 native frames in a library (two thirds symbolized), a fifth of the samples off-CPU in
 * one of six syscalls. Then times, in this process (CPU seconds, the machine may be shared):
 * writing it to a .pyrs and reading it back (every sample, as sums: PRS_PYRS_SUMS, and as sums
 * without threads: PRS_PYRS_SUMS_NO_THREADS), and each consumer as the CLI runs it: the view
 * alone, folded, pprof, speedscope (to /dev/null), the flame graph (tree + SVG), per thread too,
 * and diff's numbers; each on the profile read as the CLI reads it for that (speedscope: every
 * sample; pprof and the per-thread graph: sums; the others: sums without threads). --keep
 * FILE.pyrs keeps the file (to time the CLI on it).
 * Then the CLI on that file, as a user runs it (pyrsprof next to this program's folder, or
 * PYRSPROF): export folded, pprof, speedscope, report, diff and flamegraph, each in a child timed
 * by wait4 (wall, CPU, peak RSS), against issue 13's goals: under 1 s wall and a peak RSS under
 * twice the input's size; beside it, the floors of its peak RSS (see cli_table). The table is made by a fresh copy of this program (--cli-table FILE): a child's
 * peak RSS starts from its parent's at the fork, so the CLI is started from a small process, not
 * from this one holding the profiles (which added ~4 MB to a 42 MB reading).
 * Usage: view_bench [--samples N] [--threads T] [--processes P] [--stacks D] [--seed X] [--runs R]
 *                   [--keep FILE]
 *        view_bench --decode FILE FLAGS N   (the decoding floor: see decode_only)
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <libgen.h>
#include <malloc.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pyrsprof/diff.h"
#include "pyrsprof/export.h"
#include "pyrsprof/flamegraph.h"
#include "pyrsprof/profile.h"
#include "pyrsprof/view.h"

#include "util/banned.h"

static unsigned seed = 1;

static uint64_t rnd(void)
{
	return (uint64_t)rand_r(&seed) << 31 | (uint64_t)rand_r(&seed);
}

static double u01(void)
{
	return (double)rand_r(&seed) / ((double)RAND_MAX + 1);
}

/* CPU seconds of this process (the machine may be shared) */
static double cpu_s(void)
{
	return (double)clock() / CLOCKS_PER_SEC;
}

static uint32_t S(struct prs_profile *p, const char *s)
{
	return prs_profile_string(p, s, strlen(s));
}

struct shape {
	size_t samples, stacks;
	int threads, processes;
};

/* The trunk: 8 raw frames of the interpreter, each symbolized to 1 or 2 frames. */
static void trunk(struct prs_profile *p, uint32_t map, uint32_t *out)
{
	uint32_t file = S(p, "Python/ceval.c");
	char name[64];

	for (int i = 0; i < 8; i++) {
		uint32_t ids[2];

		out[i] = prs_profile_raw_frame(p, map, 0x401000 + (uint64_t)i * 0x100, false);
		snprintf(name, sizeof(name), "Py_trunk_%d", i);
		ids[0] = prs_profile_named_frame(p, PRS_KIND_NATIVE, S(p, name), file, 10 + (uint32_t)i);
		snprintf(name, sizeof(name), "Py_trunk_inlined_%d", i);
		ids[1] = prs_profile_named_frame(p, PRS_KIND_NATIVE, S(p, name), file, 20 + (uint32_t)i);
		prs_profile_expand(p, out[i], ids, (uint32_t)(i & 1) + 1);
	}
}

/* One stack of the pool: the trunk, a walk down a Python call tree, a few library frames. */
static uint32_t pool_stack(struct prs_profile *p, const uint32_t *tr, uint32_t map, uint32_t file)
{
	uint32_t s = 0, depth = 10 + (uint32_t)(rnd() % 30), nat = (uint32_t)(rnd() % 5);
	uint64_t node = 1;
	char name[64];

	for (int i = 0; i < 8; i++)
		s = prs_profile_stack(p, s, tr[i]);
	for (uint32_t d = 0; d < depth; d++) {
		double u = u01();

		node = node * 7 + (uint64_t)(u * u * u * 6); /* a few hot children */
		snprintf(name, sizeof(name), "py_func_%" PRIu64, node % 30011);
		s = prs_profile_stack(p, s, prs_profile_named_frame(p, PRS_KIND_PYTHON, S(p, name), file,
								    (uint32_t)(node % 997)));
	}
	for (uint32_t d = 0; d < nat; d++)
		s = prs_profile_stack(p, s, prs_profile_raw_frame(p, map, 0x7f0000001000 + (rnd() % 2000) * 16,
								  d == nat - 1));
	return s;
}

/* Symbolizes two thirds of the library's raw frames (1-3 inlined frames each). */
static void symbolize(struct prs_profile *p, uint32_t map)
{
	uint32_t file = S(p, "src/lib.rs"), nf = p->nframes;
	char name[64];

	for (uint32_t f = 0; f < nf; f++) {
		uint32_t ids[3], c = 1 + f % 3;

		if (!p->frames[f].raw || p->frames[f].mapping != map || f % 3 == 0)
			continue;
		for (uint32_t j = 0; j < c; j++) {
			snprintf(name, sizeof(name), "app::kernel_%u_%u", f % 500, j);
			ids[j] = prs_profile_named_frame(p, PRS_KIND_RUST, S(p, name), file, 100 + j);
		}
		prs_profile_expand(p, f, ids, c);
	}
}

static int generate(const char *path, const struct shape *sh)
{
	static const int16_t syscalls[] = { 0, 7, 202, 230, 232, 35 };
	struct prs_mapping m = { .start = 0x400000, .end = 0x4400000 };
	struct prs_recorder *r;
	struct prs_profile *p;
	struct prs_err err;
	uint32_t tr[8], *pool, file, lib;
	char name[64];

	if (prs_recorder_open(path, &r, &err)) {
		fprintf(stderr, "view_bench: %s\n", err.msg);
		return -1;
	}
	p = prs_recorder_profile(r);
	prs_profile_meta(p, "command", "python3 app.py --big");
	prs_profile_meta(p, "rate_hz", "100");
	m.path = S(p, "/usr/bin/python3.11");
	trunk(p, prs_profile_mapping(p, &m), tr);
	m = (struct prs_mapping){ .start = 0x7f0000000000, .end = 0x7f0004000000 };
	m.path = S(p, "/usr/lib/libapp.so");
	lib = prs_profile_mapping(p, &m);
	file = S(p, "app.py");
	for (int k = 0; k < sh->processes; k++)
		prs_profile_process(p, 1000 + k, k ? 1000 : 0, S(p, k ? "python3 worker.py" : "python3 app.py"), 0);
	for (int t = 0; t < sh->threads; t++) {
		snprintf(name, sizeof(name), "worker-%d", t);
		prs_profile_thread_pid(p, 1000 + t % sh->processes, 1000 + t, S(p, name));
	}
	pool = malloc(sh->stacks * sizeof(*pool));
	if (!pool)
		return -1;
	for (size_t k = 0; k < sh->stacks; k++)
		pool[k] = pool_stack(p, tr, lib, file);
	symbolize(p, lib);
	for (size_t i = 0; i < sh->samples; i++) {
		int t = (int)(i % (size_t)sh->threads);
		double u = u01();
		struct prs_sample s = { .time_ns = i / (size_t)sh->threads * 10000000 + (uint64_t)t * 1000,
					.tid = 1000 + t, .pid = 1000 + t % sh->processes, .weight = 1,
					.syscall = -1 };

		s.stack = pool[((size_t)(u * u * (double)sh->stacks) + (size_t)t * 17) % sh->stacks];
		if (rnd() % 5 == 0) {
			s.state = PRS_STATE_BLOCKED;
			s.syscall = syscalls[rnd() % 6];
		}
		prs_profile_sample(p, &s);
		if (i % 100000 == 99999)
			prs_recorder_flush(r, &err);
	}
	free(pool);
	if (prs_recorder_close(r, NULL, &err)) {
		fprintf(stderr, "view_bench: %s\n", err.msg);
		return -1;
	}
	return 0;
}

struct step {
	const char *name;
	int kind; /* 0 view, 1 folded, 2 pprof, 3 speedscope, 4 flame graph, 5 per thread, 6 diff */
	enum prs_view view;
};

static int run_step(const struct prs_profile *p, const struct step *st, FILE *null)
{
	struct prs_view_opts o = { .view = st->view, .per_process = true, .per_thread = st->kind == 5 };
	struct prs_err err = { 0 };
	struct prs_profile_view *v;
	struct prs_diff *d;
	struct prs_fg *fg;
	int rc;

	switch (st->kind) {
	case 0:
		rc = prs_view_new(p, &o, &v, &err);
		prs_view_free(v);
		break;
	case 1:
		rc = prs_export_folded(p, &o, null, &err);
		break;
	case 2:
		rc = prs_export_pprof(p, st->view, null, &err);
		break;
	case 3:
		rc = prs_export_speedscope(p, st->view, null, &err);
		break;
	case 6:
		rc = prs_diff_compute(p, p, &(struct prs_diff_opts){ .view = st->view, .run_noise = -1 },
				      &d, &err);
		prs_diff_free(d);
		break;
	default:
		fg = prs_fg_new();
		rc = fg ? prs_fg_from_profile(fg, p, &o, &err) : -1;
		if (!rc)
			rc = prs_fg_write_svg(fg, null, NULL, &err);
		prs_fg_free(fg);
	}
	if (rc)
		fprintf(stderr, "view_bench: %s: %s\n", st->name, err.msg);
	return rc;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* CLOCK_MONOTONIC in seconds */
static double wall_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Runs the program at path with argv (quiet: stdout and stderr to /dev/null); wall and CPU
 * seconds, peak RSS (KB), exit status. */
static int run_cli(const char *path, const char *const argv[], bool quiet, double *wall, double *cpu,
		   long *rss_kb)
{
	struct rusage ru;
	double w0;
	int status;
	pid_t pid;

	fflush(stdout); /* or the child's freopen writes what is buffered here a second time */
	w0 = wall_s();
	pid = fork();

	if (pid < 0)
		return -1;
	if (pid == 0) {
		if (!quiet || (freopen("/dev/null", "w", stdout) && freopen("/dev/null", "w", stderr)))
			execv(path, (char *const *)argv); /* execv does not change them */
		_exit(127);
	}
	if (wait4(pid, &status, 0, &ru) != pid)
		return -1;
	*wall = wall_s() - w0;
	*cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
	*rss_kb = ru.ru_maxrss;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

#define NCMDS 6

/* CLI command k on the profile at path (a child, wait4; its outputs removed). Exit status. */
static int run_cmd(size_t k, const char *cli, const char *path, double *wall, double *cpu, long *rss)
{
	char out[4200], dir[4200], rm[4300];
	const char *cmds[NCMDS][9] = {
		{ cli, "export", path, "--format", "folded", "-o", out, NULL },
		{ cli, "export", path, "--format", "pprof", "-o", out, NULL },
		{ cli, "export", path, "--format", "speedscope", "-o", out, NULL },
		{ cli, "report", path, "-o", dir, NULL },
		{ cli, "diff", path, path, "-o", dir, NULL },
		{ cli, "flamegraph", path, "--view", "wall", "-o", out, NULL },
	};
	int st;

	snprintf(out, sizeof(out), "%s.out", path);
	snprintf(dir, sizeof(dir), "%s.dir", path);
	snprintf(rm, sizeof(rm), "rm -rf '%s'", dir);
	st = system(rm) == 0 ? run_cli(cmds[k][0], cmds[k], true, wall, cpu, rss) : -1;
	unlink(out);
	if (system(rm) != 0)
		fprintf(stderr, "view_bench: could not remove %s\n", dir);
	return st;
}

/* --decode FILE FLAGS N: reads FILE N times as the CLI's loader does (prs_pyrs_read_flags with
 * FLAGS, the same mmap threshold) and holds the profiles: the peak RSS of a program that only
 * decodes what a command reads (diff reads two). Exit status 0 or 1. */
static int decode_only(const char *path, unsigned flags, int n)
{
	struct prs_profile *p[2] = { NULL, NULL };
	struct prs_err err;
	char warn[256];
	int rc = 0;

	mallopt(M_MMAP_THRESHOLD, 256 * 1024); /* as report, export and diff set it (src/cli/view.c) */
	for (int i = 0; i < n && i < 2 && !rc; i++)
		if (prs_pyrs_read_flags(path, flags, &p[i], warn, sizeof(warn), &err)) {
			fprintf(stderr, "view_bench: %s\n", err.msg);
			rc = 1;
		}
	prs_profile_free(p[0]);
	prs_profile_free(p[1]);
	return rc;
}

/*
 * The CLI's consumers on the profile at path (size bytes), as a table against the goals, with
 * two floors: the CLI's peak RSS on a profile of 50 samples (same shape: what the program and its
 * libraries take whatever the input), and that of this program only decoding the file as the
 * command reads it (PRS_PYRS_SUMS_NO_THREADS, PRS_PYRS_SUMS, every sample; twice for diff). Over
 * the decoding floor: what the command's own work holds at its peak.
 */
static void cli_table(const char *self, const char *cli, const char *path, off_t size, const char *floor)
{
	static const char *const names[NCMDS] = { "export folded", "export pprof", "export speedscope",
						  "report (both graphs, phase 1 and 4)", "diff (itself)",
						  "flamegraph --view wall" };
	/* how each command reads the file (src/cli/view.c): flags, how many profiles */
	static const char *const reads[NCMDS][2] = { { "2", "1" }, { "1", "1" }, { "0", "1" },
						     { "2", "1" }, { "2", "2" }, { "2", "1" } };

	printf("\nthe CLI on it (a child each, wait4); goals: wall < 1 s, peak RSS < 2 x input (%.1f MB);\n"
	       "floor: the CLI on 50 samples; decode: a program that only reads the file as the command does\n",
	       2.0 * (double)size / 1e6);
	printf("%-38s %7s %7s %8s %8s %8s %8s %5s  %s\n", "command", "wall s", "CPU s", "RSS MB",
	       "floor MB", "decode", "over it", "exit", "verdict");
	for (size_t k = 0; k < NCMDS; k++) {
		const char *const argv_d[] = { self, "--decode", path, reads[k][0], reads[k][1], NULL };
		double wall = 0, cpu = 0, w2, c2;
		long rss = 0, frss = 0, drss = 0;
		int st = run_cmd(k, cli, path, &wall, &cpu, &rss);
		bool ok = st == 0 && wall < 1.0 && (double)rss * 1024 < 2.0 * (double)size;

		if (run_cmd(k, cli, floor, &w2, &c2, &frss) != 0)
			frss = 0;
		if (run_cli("/proc/self/exe", argv_d, false, &w2, &c2, &drss) != 0)
			drss = 0;
		printf("%-38s %7.2f %7.2f %8.1f %8.1f %8.1f %8.1f %5d  %s\n", names[k], wall, cpu,
		       (double)rss / 1024, (double)frss / 1024, (double)drss / 1024,
		       (double)(rss - drss) / 1024, st, ok ? "ok" : st ? "FAILED (exit)" : "MISSED");
		fflush(stdout);
	}
}

int main(int argc, char **argv)
{
	static const struct step steps[] = {
		{ "view (the samples summed per stack)", 0, PRS_VIEW_WALL },
		{ "export folded, cpu", 1, PRS_VIEW_CPU },
		{ "export folded, wall", 1, PRS_VIEW_WALL },
		{ "export pprof, wall", 2, PRS_VIEW_WALL },
		{ "export speedscope, wall", 3, PRS_VIEW_WALL },
		{ "flame graph, cpu (tree + SVG)", 4, PRS_VIEW_CPU },
		{ "flame graph, wall (tree + SVG)", 4, PRS_VIEW_WALL },
		{ "flame graph, wall, per thread", 5, PRS_VIEW_WALL },
		{ "diff numbers, wall (profile vs itself)", 6, PRS_VIEW_WALL },
	};
	struct shape sh = { .samples = 1000000, .stacks = 5000, .threads = 50, .processes = 4 };
	const char *keep = NULL, *cli = getenv("PYRSPROF");
	char path[128], warn[256], cli_buf[4096], tmp[4096];
	struct prs_profile *p, *sums, *merged;
	struct prs_err err;
	struct stat stt;
	double t0, t_write, t_read, t_sums, t_merged, times[16];
	int runs = 3;
	FILE *null;

	if (argc == 5 && strcmp(argv[1], "--decode") == 0) /* FILE FLAGS N: see decode_only */
		return decode_only(argv[2], (unsigned)atoi(argv[3]), atoi(argv[4]));
	if (argc == 4 && strcmp(argv[1], "--cli-table") == 0) { /* FILE PYRSPROF: see above */
		struct shape tiny = { .samples = 50, .stacks = 5, .threads = 2, .processes = 1 };
		int rc;

		snprintf(path, sizeof(path), "/tmp/view_bench.%d.floor.pyrs", (int)getpid());
		if (stat(argv[2], &stt) != 0 || generate(path, &tiny))
			return 1;
		cli_table(argv[0], argv[3], argv[2], stt.st_size, path);
		rc = unlink(path);
		return rc != 0;
	}
	for (int i = 1; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--samples") == 0)
			sh.samples = strtoul(argv[i + 1], NULL, 0);
		else if (strcmp(argv[i], "--stacks") == 0)
			sh.stacks = strtoul(argv[i + 1], NULL, 0);
		else if (strcmp(argv[i], "--threads") == 0)
			sh.threads = atoi(argv[i + 1]);
		else if (strcmp(argv[i], "--processes") == 0)
			sh.processes = atoi(argv[i + 1]);
		else if (strcmp(argv[i], "--seed") == 0)
			seed = (unsigned)strtoul(argv[i + 1], NULL, 0);
		else if (strcmp(argv[i], "--runs") == 0)
			runs = atoi(argv[i + 1]);
		else if (strcmp(argv[i], "--keep") == 0)
			keep = argv[i + 1];
	}
	if (sh.threads < 1 || sh.processes < 1 || sh.stacks < 1 || runs < 1 || runs > 16) {
		fprintf(stderr, "view_bench: bad sizes\n");
		return 1;
	}
	snprintf(path, sizeof(path), "/tmp/view_bench.%d.pyrs", (int)getpid());
	t0 = cpu_s();
	if (generate(keep ? keep : path, &sh))
		return 1;
	t_write = cpu_s() - t0;
	stat(keep ? keep : path, &stt);
	t0 = cpu_s();
	if (prs_pyrs_read(keep ? keep : path, &p, warn, sizeof(warn), &err)) {
		fprintf(stderr, "view_bench: %s\n", err.msg);
		return 1;
	}
	t_read = cpu_s() - t0;
	t0 = cpu_s();
	if (prs_pyrs_read_flags(keep ? keep : path, PRS_PYRS_SUMS, &sums, warn, sizeof(warn), &err)) {
		fprintf(stderr, "view_bench: %s\n", err.msg);
		return 1;
	}
	t_sums = cpu_s() - t0;
	t0 = cpu_s();
	if (prs_pyrs_read_flags(keep ? keep : path, PRS_PYRS_SUMS_NO_THREADS, &merged, warn, sizeof(warn),
				&err)) {
		fprintf(stderr, "view_bench: %s\n", err.msg);
		return 1;
	}
	t_merged = cpu_s() - t0;
	null = fopen("/dev/null", "w");
	if (!null)
		return 1;
	printf("profile consumers (view_bench): %zu samples, %d threads in %d processes, %zu pool stacks "
	       "(%u trie stacks), %.1f MB .pyrs\n", p->nsamples, sh.threads, sh.processes, sh.stacks,
	       p->nstacks, (double)stt.st_size / 1e6);
	printf("%-42s %8s %8s %8s\n", "step (CPU s)", "median", "min", "max");
	printf("%-42s %8.3f\n", "generate + write .pyrs", t_write);
	printf("%-42s %8.3f\n", "read .pyrs", t_read);
	printf("%-42s %8.3f  (%zu records)\n", "read .pyrs as sums", t_sums, sums->nsamples);
	printf("%-42s %8.3f  (%zu records, %zu of threads)\n", "read .pyrs as sums without threads", t_merged,
	       merged->nsamples, merged->nthread_sums);
	for (size_t k = 0; k < sizeof(steps) / sizeof(steps[0]); k++) {
		for (int r = 0; r < runs; r++) {
			t0 = cpu_s();
			/* as the CLI reads it: every sample for a timeline, threads for pprof's labels
			 * and the per-thread graph, else the sums without threads */
			if (run_step(steps[k].kind == 3 ? p : steps[k].kind == 2 || steps[k].kind == 5 ? sums : merged,
				     &steps[k], null))
				return 1;
			times[r] = cpu_s() - t0;
		}
		qsort(times, (size_t)runs, sizeof(times[0]), cmp_double);
		printf("%-42s %8.3f %8.3f %8.3f\n", steps[k].name, times[runs / 2], times[0], times[runs - 1]);
	}
	fclose(null);
	prs_profile_free(p);
	prs_profile_free(sums);
	prs_profile_free(merged);
	if (!cli || !cli[0]) {
		snprintf(tmp, sizeof(tmp), "%s", argv[0]);
		snprintf(cli_buf, sizeof(cli_buf), "%s/../pyrsprof", dirname(tmp));
		cli = cli_buf;
	}
	{
		const char *const argv_t[] = { argv[0], "--cli-table", keep ? keep : path, cli, NULL };
		double w, c;
		long r;

		if (run_cli("/proc/self/exe", argv_t, false, &w, &c, &r) != 0)
			fprintf(stderr, "view_bench: the CLI table failed\n");
	}
	if (!keep)
		unlink(path);
	return 0;
}
