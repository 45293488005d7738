/* SPDX-License-Identifier: MIT */
/*
 * fg_bench: the flame graph render-speed benchmark (`make bench` runs it; prints a table).
 * Generates folded stacks with N distinct stacks (default 200000) and S samples (default 2000000),
 * deterministic for a seed, shaped like a real profile (a shared call tree near the root, a long
 * tail of rare leaves, a skewed count distribution), then times: parsing the folded text into the
 * frame tree (a minimal reader here, and prs_folded_read + prs_fg_from_profile when the profile
 * model's reader is linked), the layout + SVG write, and reports the SVG's size and frame count
 * for several --min-width values and for 10x fewer stacks (the size must follow the picture).
 * Usage: fg_bench [--stacks N] [--samples S] [--seed X] [--keep FILE.folded]
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pyrsprof/flamegraph.h"
#include "pyrsprof/profile.h"

#include "../../flamegraph/fg-tree.h" /* the node count, for the table */

#include "util/banned.h"

static uint64_t rng_state;

static uint64_t rnd(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull); /* splitmix64 */

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
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
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
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

/* The minimal folded reader (as tools/fgdemo.c): text -> prs_fg_add. Returns stacks read. */
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

/* The product path: prs_folded_read (the profile model) + prs_fg_from_profile + write. */
static struct run render_profile(const struct text *src, double min_width, double *read_s)
{
	struct run r = { 0 };
	struct prs_profile *p = NULL;
	struct prs_fg *fg = prs_fg_new();
	struct prs_fg_opts o;
	struct prs_err err = { 0 };
	FILE *in = fmemopen(src->buf, src->len, "r"), *out = tmpfile();
	double t0, t1, t2, t3, w0;

	if (!fg || !in || !out) {
		fprintf(stderr, "fg_bench: setup failed\n");
		exit(1);
	}
	prs_fg_opts_init(&o);
	o.min_width = min_width;
	w0 = now_s();
	t0 = cpu_s();
	if (prs_folded_read(in, "bench.folded", &p, &err) < 0) {
		fprintf(stderr, "fg_bench: prs_folded_read: %s\n", err.msg);
		exit(1);
	}
	t1 = cpu_s();
	if (prs_fg_from_profile(fg, p, PRS_VIEW_CPU, false, &err) < 0) {
		fprintf(stderr, "fg_bench: %s\n", err.msg);
		exit(1);
	}
	t2 = cpu_s();
	if (prs_fg_write_svg(fg, out, &o, &err) < 0) {
		fprintf(stderr, "fg_bench: %s\n", err.msg);
		exit(1);
	}
	t3 = cpu_s();
	*read_s = t1 - t0;
	r.parse_s = t2 - t1;
	r.write_s = t3 - t2;
	r.wall_s = now_s() - w0;
	r.nodes = fg->nnodes;
	r.size = ftell(out);
	r.drawn = prs_fg_drawn(fg);
	fclose(in);
	fclose(out);
	prs_fg_free(fg);
	prs_profile_free(p);
	return r;
}

int main(int argc, char **argv)
{
	size_t nstacks = 200000;
	uint64_t nsamples = 2000000, seed = 1;
	const char *keep = NULL;
	struct text t = { 0 }, small = { 0 };
	static const double widths[] = { 0.1, 0.5, 1.0 };

	for (int i = 1; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--stacks") == 0)
			nstacks = strtoul(argv[i + 1], NULL, 10);
		else if (strcmp(argv[i], "--samples") == 0)
			nsamples = strtoull(argv[i + 1], NULL, 10);
		else if (strcmp(argv[i], "--seed") == 0)
			seed = strtoull(argv[i + 1], NULL, 10);
		else if (strcmp(argv[i], "--keep") == 0)
			keep = argv[i + 1];
	}
	rng_state = seed;
	generate(&t, nstacks, nsamples);
	rng_state = seed;
	generate(&small, nstacks / 10 ? nstacks / 10 : 1, nsamples);
	if (keep) {
		FILE *f = fopen(keep, "w");

		if (f) {
			fwrite(t.buf, 1, t.len, f);
			fclose(f);
		}
	}
	printf("flame graph render (fg_bench, seed %" PRIu64 "): folded input %zu distinct stacks, "
	       "%" PRIu64 " samples, %.1f MB; goal < 1 s end to end\n",
	       seed, nstacks, nsamples, t.len / 1e6);
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
	{
		double read_s = 0;
		struct run r = render_profile(&t, 0.1, &read_s);

		printf("\nproduct path (pyrsprof flamegraph IN.folded): %zu stacks, 0.1 px\n", nstacks);
		printf("%-28s %9s %9s %9s %9s %9s %11s %8s\n", "step", "", "read s", "tree s", "svg s",
		       "wall s", "svg bytes", "frames");
		printf("%-28s %9s %9.3f %9.3f %9.3f %9.3f %11ld %8zu\n", "prs_folded_read+fg", "", read_s,
		       r.parse_s, r.write_s, r.wall_s, r.size, r.drawn);
		printf("total CPU %.3f s (prs_folded_read %.3f, prs_fg_from_profile %.3f, write %.3f)\n",
		       read_s + r.parse_s + r.write_s, read_s, r.parse_s, r.write_s);
	}
	free(t.buf);
	free(small.buf);
	return 0;
}
