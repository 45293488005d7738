/* SPDX-License-Identifier: MIT */
/*
 * fg_bench: the flame graph render-speed benchmark (`make bench` runs it; prints tables).
 * Generates folded stacks with N distinct stacks (default 200000) and S samples (default 2000000),
 * deterministic for a seed, shaped like a real profile (a shared call tree near the root, a long
 * tail of rare leaves, a skewed count distribution), then times:
 * - the product path, as `pyrsprof flamegraph IN.folded -o OUT.svg` runs it: prs_fg_from_folded
 *   (folded stacks from a file straight into the frame tree) + prs_fg_write_svg; the path through
 *   the profile model (prs_folded_read + prs_fg_from_profile, what `report` and `export` read
 *   folded input with) once; and the CLI itself end to end (a child process; its CPU time from wait4, and wall time), --runs times
 *   each (median, min, max), against the goal: under 1 s wall (aim 0.6 s);
 * - a minimal reader straight into the frame tree (prs_fg_add), and the SVG's size and frame count
 *   for several --min-width values and for 10x fewer stacks (the size must follow the picture).
 * The machine may be shared: CPU times are the figures to compare, wall times are printed too.
 * Usage: fg_bench [--stacks N] [--samples S] [--seed X] [--runs R] [--cli PYRSPROF]
 *                 [--keep FILE.folded]   (the CLI: --cli, else $PYRSPROF, else ../pyrsprof)
 */
#include <errno.h>
#include <inttypes.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pyrsprof/flamegraph.h"
#include "pyrsprof/profile.h"

#include "../../flamegraph/fg-tree.h" /* the node count, for the table */

#include "bench_util.h"

#include "util/banned.h"

static uint64_t rng_state;

static uint64_t rnd(void)
{
	return bench_splitmix(&rng_state);
}

/* CPU time of this process: the machine may be shared, so wall time is printed as well. */
static double cpu_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static double now_s(void)
{
	return bench_now_s();
}

struct text {
	char *buf;
	size_t len, cap;
};

static void put(struct text *t, const char *s, size_t n)
{
	if (t->len + n + 1 > t->cap) {
		size_t ncap = t->cap ? t->cap * 2 : 1 << 20;

		while (ncap < t->len + n + 1)
			ncap *= 2;
		t->buf = realloc(t->buf, ncap);
		if (!t->buf) {
			fprintf(stderr, "fg_bench: out of memory\n");
			exit(1);
		}
		t->cap = ncap;
	}
	memcpy(t->buf + t->len, s, n);
	t->len += n;
	t->buf[t->len] = '\0';
}

static const char *modules[] = { "app", "core", "io", "net", "db", "json", "util", "numpy", "serde",
				 "tokio", "std", "libc" };

/* A function name for (depth, id): ~20000 distinct names, stable. */
static int fname(char *buf, size_t size, unsigned depth, uint64_t id)
{
	uint64_t h = (id * 0x9e3779b97f4a7c15ull) ^ ((uint64_t)depth << 40);

	h ^= h >> 31;
	h %= 20000;
	return snprintf(buf, size, "%s::m%u::func_%" PRIu64, modules[h % 12], (unsigned)(h / 12 % 97), h);
}

/* Generates the folded text: nstacks distinct lines summing to nsamples. */
static void generate(struct text *t, size_t nstacks, uint64_t nsamples)
{
	uint64_t *counts = calloc(nstacks, sizeof(*counts));
	char name[96];

	if (!counts || nsamples < nstacks) {
		fprintf(stderr, "fg_bench: bad sizes\n");
		exit(1);
	}
	for (size_t i = 0; i < nstacks; i++)
		counts[i] = 1;
	for (uint64_t j = nstacks; j < nsamples; j++) {
		double u = (double)(rnd() >> 11) / 9007199254740992.0;

		counts[(size_t)(u * u * u * (double)nstacks)]++; /* skewed: low indexes are hot */
	}
	for (size_t i = 0; i < nstacks; i++) {
		/* Stacks come in groups of 4 (g = i / 4) that differ in the leaf only (it carries i).
		 * Levels 0..15 follow a binary prefix tree of g (shared near the root), then a tail of
		 * 1..21 frames private to the group: about 4 tree nodes per distinct stack (printed). */
		uint64_t g = i >> 2;
		unsigned depth = 18 + (unsigned)(g * 0x9e3779b1u % 21);
		char cnt[32];

		for (unsigned k = 0; k < depth; k++) {
			uint64_t id = k < 16 ? g >> (15 - k) : g * 64 + k;
			int n = k + 1 == depth ? snprintf(name, sizeof(name), "leaf_%zu", i)
					       : fname(name, sizeof(name), k, id);

			if (k)
				put(t, ";", 1);
			put(t, name, (size_t)n);
		}
		put(t, cnt, (size_t)snprintf(cnt, sizeof(cnt), " %" PRIu64 "\n", counts[i]));
	}
	free(counts);
}

/* A minimal folded reader: text -> prs_fg_add, so the renderer alone is timed. Returns stacks read. */
static size_t parse_into(struct prs_fg *fg, char *text, size_t len)
{
	static struct prs_fg_frame frames[PRS_MAX_STACK_FRAMES];
	size_t stacks = 0;
	char *p = text, *end = text + len;

	while (p < end) {
		char *nl = memchr(p, '\n', (size_t)(end - p)), *sp, *q;
		size_t n = 0;
		uint64_t count;

		if (!nl)
			nl = end;
		sp = memrchr(p, ' ', (size_t)(nl - p));
		if (!sp)
			break;
		count = strtoull(sp + 1, NULL, 10);
		*sp = '\0';
		for (q = p; n < PRS_MAX_STACK_FRAMES;) {
			char *semi = memchr(q, ';', (size_t)(sp - q));

			frames[n++] = (struct prs_fg_frame){ .name = q, .kind = PRS_KIND_NATIVE };
			if (!semi)
				break;
			*semi = '\0';
			q = semi + 1;
		}
		if (prs_fg_add(fg, frames, n, count) < 0) {
			fprintf(stderr, "fg_bench: prs_fg_add failed\n");
			exit(1);
		}
		stacks++;
		p = nl + 1;
	}
	return stacks;
}

struct run {
	double parse_s, write_s, wall_s;
	long size;
	size_t drawn, nodes;
};

static struct run render(const struct text *src, double min_width)
{
	struct run r = { 0 };
	char *copy = malloc(src->len + 1);
	struct prs_fg *fg = prs_fg_new();
	struct prs_fg_opts o;
	struct prs_err err = { 0 };
	FILE *out = tmpfile();
	double t0, t1, t2, w0;

	if (!copy || !fg || !out) {
		fprintf(stderr, "fg_bench: setup failed\n");
		exit(1);
	}
	memcpy(copy, src->buf, src->len + 1);
	prs_fg_opts_init(&o);
	o.min_width = min_width;
	w0 = now_s();
	t0 = cpu_s();
	parse_into(fg, copy, src->len);
	t1 = cpu_s();
	if (prs_fg_write_svg(fg, out, &o, &err) < 0) {
		fprintf(stderr, "fg_bench: %s\n", err.msg);
		exit(1);
	}
	t2 = cpu_s();
	r.wall_s = now_s() - w0;
	r.nodes = fg->nnodes;
	r.parse_s = t1 - t0;
	r.write_s = t2 - t1;
	r.size = ftell(out);
	r.drawn = prs_fg_drawn(fg);
	fclose(out);
	prs_fg_free(fg);
	free(copy);
	return r;
}

/* The product path in the library: prs_fg_from_folded (from a file) + write; with `model`, the
 * path through the profile model: prs_folded_read + prs_fg_from_profile + write. */
struct lib_run {
	double read_s, tree_s, svg_s, cpu_s, wall_s;
	long size;
	size_t drawn;
};

static struct lib_run render_profile(const char *folded, double min_width, bool model)
{
	struct lib_run r = { 0 };
	struct prs_profile *p = NULL;
	struct prs_fg *fg;
	struct prs_fg_opts o;
	struct prs_err err = { 0 };
	FILE *in, *out = tmpfile();
	double t0, t1, t2, t3, w0;

	if (!out) {
		fprintf(stderr, "fg_bench: tmpfile failed\n");
		exit(1);
	}
	prs_fg_opts_init(&o);
	o.min_width = min_width;
	w0 = now_s();
	t0 = cpu_s();
	in = fopen(folded, "re");
	fg = prs_fg_new();
	if (!in || !fg) {
		fprintf(stderr, "fg_bench: %s: %s\n", folded, strerror(errno));
		exit(1);
	}
	if (!model) {
		uint64_t samples;

		if (prs_fg_from_folded(fg, in, folded, &samples, &err) < 0) {
			fprintf(stderr, "fg_bench: prs_fg_from_folded: %s\n", err.msg);
			exit(1);
		}
		fclose(in);
		t1 = t2 = cpu_s();
	} else {
		if (prs_folded_read(in, folded, &p, &err) < 0) {
			fprintf(stderr, "fg_bench: prs_folded_read: %s\n", err.msg);
			exit(1);
		}
		fclose(in);
		t1 = cpu_s();
		if (prs_fg_from_profile(fg, p, &(struct prs_view_opts){ .view = PRS_VIEW_CPU }, &err) < 0) {
			fprintf(stderr, "fg_bench: prs_fg_from_profile: %s\n", err.msg);
			exit(1);
		}
		t2 = cpu_s();
	}
	if (prs_fg_write_svg(fg, out, &o, &err) < 0 || fflush(out) != 0) {
		fprintf(stderr, "fg_bench: %s\n", err.msg);
		exit(1);
	}
	t3 = cpu_s();
	r.wall_s = now_s() - w0;
	r.read_s = t1 - t0;
	r.tree_s = t2 - t1;
	r.svg_s = t3 - t2;
	r.cpu_s = t3 - t0;
	r.size = ftell(out);
	r.drawn = prs_fg_drawn(fg);
	fclose(out);
	prs_fg_free(fg);
	prs_profile_free(p);
	return r;
}

/* `cli flamegraph folded -o svg` in a child: its CPU time (user + sys) and wall time. */
static int run_cli(const char *cli, const char *folded, const char *svg, double *cpu, double *wall)
{
	struct rusage ru;
	double w0 = now_s();
	int status;
	pid_t pid = fork();

	if (pid < 0)
		return -1;
	if (pid == 0) {
		execl(cli, cli, "flamegraph", folded, "-o", svg, (char *)NULL);
		_exit(127);
	}
	if (wait4(pid, &status, 0, &ru) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return -1;
	*wall = now_s() - w0;
	*cpu = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec +
	       ru.ru_stime.tv_usec / 1e6;
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Sorts v[0..n) and returns its median. */
static double median(double *v, size_t n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

#define MAX_RUNS 50

static void print_row(const char *label, double *v, size_t n, const char *note)
{
	double m = median(v, n);

	printf("%-34s %9.3f %9.3f %9.3f  %s\n", label, m, v[0], v[n - 1], note);
}

int main(int argc, char **argv)
{
	size_t nstacks = 200000, runs = 5;
	uint64_t nsamples = 2000000, seed = 1;
	const char *keep = NULL, *cli = getenv("PYRSPROF");
	char cli_buf[4096], folded[] = "/tmp/fg_bench-XXXXXX", svg[4200];
	struct text t = { 0 }, small = { 0 };
	static const double widths[] = { 0.1, 0.5, 1.0 };
	double read_v[MAX_RUNS], svg_v[MAX_RUNS], lib_v[MAX_RUNS], libw_v[MAX_RUNS];
	double cli_v[MAX_RUNS], cliw_v[MAX_RUNS];
	struct lib_run lr = { 0 };
	size_t ncli = 0;
	int fd;

	for (int i = 1; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--stacks") == 0)
			nstacks = strtoul(argv[i + 1], NULL, 10);
		else if (strcmp(argv[i], "--samples") == 0)
			nsamples = strtoull(argv[i + 1], NULL, 10);
		else if (strcmp(argv[i], "--seed") == 0)
			seed = strtoull(argv[i + 1], NULL, 10);
		else if (strcmp(argv[i], "--runs") == 0)
			runs = strtoul(argv[i + 1], NULL, 10);
		else if (strcmp(argv[i], "--cli") == 0)
			cli = argv[i + 1];
		else if (strcmp(argv[i], "--keep") == 0)
			keep = argv[i + 1];
	}
	if (runs < 1)
		runs = 1;
	if (runs > MAX_RUNS)
		runs = MAX_RUNS;
	if (!cli || !cli[0]) {
		snprintf(cli_buf, sizeof(cli_buf), "%s", argv[0]);
		snprintf(svg, sizeof(svg), "%s/../pyrsprof", dirname(cli_buf));
		snprintf(cli_buf, sizeof(cli_buf), "%s", svg);
		cli = cli_buf;
	}
	rng_state = seed;
	generate(&t, nstacks, nsamples);
	rng_state = seed;
	generate(&small, nstacks / 10 ? nstacks / 10 : 1, nsamples);
	fd = mkstemp(folded);
	if (fd < 0 || write(fd, t.buf, t.len) != (ssize_t)t.len || close(fd) != 0) {
		fprintf(stderr, "fg_bench: cannot write %s: %s\n", folded, strerror(errno));
		return 1;
	}
	snprintf(svg, sizeof(svg), "%s.svg", folded);
	if (keep) {
		FILE *f = fopen(keep, "w");

		if (f) {
			fwrite(t.buf, 1, t.len, f);
			fclose(f);
		}
	}
	printf("flame graph render (fg_bench, seed %" PRIu64 "): folded input %zu distinct stacks, "
	       "%" PRIu64 " samples, %.1f MB\n", seed, nstacks, nsamples, t.len / 1e6);
	printf("\nproduct path: `pyrsprof flamegraph IN.folded -o OUT.svg` (--min-width 0.1 px), %zu runs\n",
	       runs);
	printf("%-34s %9s %9s %9s  %s\n", "step (CPU s unless said)", "median", "min", "max", "");
	for (size_t i = 0; i < runs; i++) {
		lr = render_profile(folded, 0.1, false);
		read_v[i] = lr.read_s;
		svg_v[i] = lr.svg_s;
		lib_v[i] = lr.cpu_s;
		libw_v[i] = lr.wall_s;
	}
	for (size_t i = 0; i < runs; i++)
		if (run_cli(cli, folded, svg, &cli_v[ncli], &cliw_v[ncli]) == 0)
			ncli++;
	print_row("prs_fg_from_folded (file)", read_v, runs, "");
	print_row("prs_fg_write_svg", svg_v, runs, "");
	{
		struct lib_run m = render_profile(folded, 0.1, true);

		printf("%-34s read %.3f + tree %.3f + svg %.3f = %.3f CPU s (one run)\n",
		       "through the profile model", m.read_s, m.tree_s, m.svg_s, m.cpu_s);
	}
	print_row("library total", lib_v, runs, "");
	print_row("library total, wall", libw_v, runs, "");
	if (ncli) {
		double wall = median(cliw_v, ncli);

		print_row("pyrsprof flamegraph, CPU", cli_v, ncli, "(user + sys of the process)");
		print_row("pyrsprof flamegraph, wall", cliw_v, ncli,
			  wall < 1.0 ? (wall <= 0.6 ? "goal < 1 s: met (aim 0.6 s: met)"
						    : "goal < 1 s: met (aim 0.6 s: not yet)")
				     : "goal < 1 s: NOT MET (or the machine is busy: compare CPU)");
	} else {
		printf("%-34s (could not run %s: give --cli PATH or set PYRSPROF)\n",
		       "pyrsprof flamegraph", cli);
	}
	printf("SVG: %ld bytes, %zu frames drawn\n", lr.size, lr.drawn);
	unlink(folded);
	unlink(svg);

	printf("\nminimal reader (folded text in memory -> prs_fg_add), SVG size vs --min-width\n");
	printf("(times: CPU seconds of parse+build and of layout+write; wall: elapsed, includes any "
	       "contention)\n");
	printf("%-28s %9s %9s %9s %9s %9s %11s %8s\n", "input / --min-width", "nodes", "parse s",
	       "svg s", "total s", "wall s", "svg bytes", "frames");
	for (size_t i = 0; i < sizeof(widths) / sizeof(widths[0]); i++) {
		struct run r = render(&t, widths[i]);
		char label[64];

		snprintf(label, sizeof(label), "%zu stacks, %.1f px", nstacks, widths[i]);
		printf("%-28s %9zu %9.3f %9.3f %9.3f %9.3f %11ld %8zu\n", label, r.nodes, r.parse_s,
		       r.write_s, r.parse_s + r.write_s, r.wall_s, r.size, r.drawn);
	}
	{
		struct run r = render(&small, 0.1);
		char label[64];

		snprintf(label, sizeof(label), "%zu stacks, 0.1 px", nstacks / 10);
		printf("%-28s %9zu %9.3f %9.3f %9.3f %9.3f %11ld %8zu\n", label, r.nodes, r.parse_s,
		       r.write_s, r.parse_s + r.write_s, r.wall_s, r.size, r.drawn);
	}
	free(t.buf);
	free(small.buf);
	return 0;
}
