/* SPDX-License-Identifier: MIT */
/*
 * fg_shapes: `pyrsprof flamegraph` on a family of folded inputs of every shape (`make bench` runs
 * it; prints a table). Each input has the same number of distinct stacks and samples (default
 * 200000 and 2000000) and differs in one way from the others: sorted (as stackcollapse-*.pl
 * writes) or shuffled lines; stacks 5 to 200 frames deep; 1000 to 1M distinct function names;
 * names up to 300 bytes (C++ and Rust templates); one stack holding most samples, or a flat
 * spread. Inputs are deterministic for a seed.
 *
 * The stacks form a call tree as real ones do: each new stack branches off an earlier one at
 * some depth and goes on with a tail of new frames (the tail's mean length is set per shape:
 * it decides how many tree nodes the input has, printed). A node's name is drawn from the
 * shape's pool of names by its id, so the number of distinct names is the pool's size where
 * the tree has that many nodes (printed, counted).
 *
 * For each shape a child runs `pyrsprof flamegraph IN -o OUT.svg`; wait4() gives its CPU time
 * and its peak RSS (ru_maxrss), timed against the goals: under 1 s wall and a peak RSS under
 * twice the input file's size.
 * Usage: fg_shapes [--stacks N] [--samples S] [--seed X] [--only NAME] [--cli PYRSPROF]
 *                  [--keep DIR] (writes DIR/NAME.folded)
 */
#include <errno.h>
#include <inttypes.h>
#include <libgen.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"

#include "util/banned.h"

enum dist { SKEWED, DOMINANT, FLAT };

struct shape {
	const char *name;
	bool sorted;
	unsigned dmin, dmax;  /* frames per stack */
	unsigned tail;        /* mean frames a stack adds to the one it branches off */
	uint32_t names;       /* size of the name pool */
	unsigned lmin, lmax;  /* name length in bytes (short names are likelier) */
	enum dist dist;
	const char *what;
};

static const struct shape shapes[] = {
	{ "sorted", true, 20, 40, 6, 300000, 6, 24, SKEWED, "stackcollapse order" },
	{ "unsorted", false, 20, 40, 6, 300000, 6, 24, SKEWED, "the issue's: shuffled, 300k names" },
	{ "shallow", false, 5, 8, 2, 100000, 6, 24, SKEWED, "5-8 frames" },
	{ "deep", false, 150, 200, 8, 100000, 6, 24, SKEWED, "150-200 frames (recursion)" },
	{ "deep-sorted", true, 150, 200, 8, 100000, 6, 24, SKEWED, "150-200 frames, sorted" },
	{ "names-1k", false, 20, 40, 6, 1000, 6, 24, SKEWED, "1000 distinct names" },
	{ "names-1M", false, 20, 40, 8, 1000000, 6, 24, SKEWED, "1M distinct names" },
	{ "long-names", false, 20, 40, 6, 100000, 10, 300, SKEWED, "names of 10-300 bytes" },
	{ "dominant", false, 20, 40, 6, 300000, 6, 24, DOMINANT, "one stack has 90 % of samples" },
	{ "flat", false, 20, 40, 6, 300000, 6, 24, FLAT, "every stack ~10 samples" },
};

static uint64_t rng_state;

static uint64_t rnd(void)
{
	return bench_splitmix(&rng_state);
}

static double u01(void)
{
	return (double)(rnd() >> 11) / 9007199254740992.0;
}

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return x;
}

static void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (!p) {
		fprintf(stderr, "fg_shapes: out of memory\n");
		exit(1);
	}
	return p;
}

static double now_s(void)
{
	return bench_now_s();
}

/* ---- names ---- */

static const char *const words[] = { "core", "alloc", "std", "tokio", "serde", "numpy", "app", "io",
				     "net", "db", "json", "util", "iter", "adapters", "vec", "hash",
				     "runtime", "task", "sync", "mpsc" };
static const char *const generic[] = { "<T>", "<alloc::vec::Vec<u8>>", "<std::string, int>",
				       "<core::option::Option<&str>>", " const&", "(int, char*)",
				       "<F, std::allocator<F> >", "::{{closure}}" };

/* The text of name k of the shape's pool: deterministic, ASCII, no ';', its length in
 * [lmin, lmax] (cubic: short names are the likeliest, as in real code). */
static size_t name_text(const struct shape *sh, uint32_t k, char *buf)
{
	uint64_t h = mix(k + 1);
	double u = (double)(mix(h) >> 11) / 9007199254740992.0;
	size_t want = sh->lmin + (size_t)(u * u * u * (double)(sh->lmax - sh->lmin + 1)), n;

	if (want > sh->lmax)
		want = sh->lmax;
	n = (size_t)snprintf(buf, 400, "%s::%s::f%" PRIu32, words[h % 20], words[(h >> 8) % 20], k);
	while (n < want) {
		const char *g = generic[(h >> (n % 48)) % 8];
		size_t gl = strlen(g);

		memcpy(buf + n, g, gl);
		n += gl;
	}
	if (n > want) {
		/* cut to length, but keep the id (names stay distinct) by cutting the front */
		size_t cut = n - want, idlen = (size_t)snprintf(NULL, 0, "f%" PRIu32, k);

		if (want < idlen + 1) {
			n = (size_t)snprintf(buf, 400, "f%" PRIu32, k);
		} else {
			memmove(buf, buf + cut, n - cut);
			n -= cut;
			/* the id must survive: put it first */
			snprintf(buf, idlen + 1, "f%" PRIu32, k);
			buf[idlen] = '_';
		}
	}
	buf[n] = '\0';
	return n;
}

/* ---- the call tree ---- */

struct tree {
	uint32_t *parent, *name;
	uint16_t *depth;
	size_t n, cap;
};

static uint32_t tree_node(struct tree *t, uint32_t parent, uint32_t name, uint16_t depth)
{
	if (t->n == t->cap) {
		t->cap = t->cap ? t->cap * 2 : 1 << 20;
		t->parent = realloc(t->parent, t->cap * sizeof(*t->parent));
		t->name = realloc(t->name, t->cap * sizeof(*t->name));
		t->depth = realloc(t->depth, t->cap * sizeof(*t->depth));
		if (!t->parent || !t->name || !t->depth) {
			fprintf(stderr, "fg_shapes: out of memory\n");
			exit(1);
		}
	}
	t->parent[t->n] = parent;
	t->name[t->n] = name;
	t->depth[t->n] = depth;
	return (uint32_t)t->n++;
}

/* The pool name of a new node: its own id while the pool has names left (so that as many names
 * as the pool holds are used), then one drawn at random (recursion, common helpers). */
static uint32_t node_name(const struct shape *sh, size_t id)
{
	return id < sh->names ? (uint32_t)id : (uint32_t)(mix(id) % sh->names);
}

struct set64 {
	uint64_t *k;
	size_t cap, n;
};

/* Adds key; false if it was there. */
static bool set_add(struct set64 *s, uint64_t key)
{
	size_t i;

	key |= 1; /* 0 = empty */
	for (i = mix(key) & (s->cap - 1); s->k[i]; i = (i + 1) & (s->cap - 1))
		if (s->k[i] == key)
			return false;
	s->k[i] = key;
	s->n++;
	return true;
}

/* Makes nstacks distinct stacks (leaf node ids), each branching off an earlier one. */
static uint32_t *make_stacks(const struct shape *sh, struct tree *t, size_t nstacks)
{
	uint32_t *leaf = xmalloc(nstacks * sizeof(*leaf)), *path = xmalloc(256 * sizeof(*path));
	struct set64 seen = { .cap = 1 };
	size_t made = 0;

	while (seen.cap < nstacks * 2)
		seen.cap *= 2;
	seen.k = calloc(seen.cap, sizeof(*seen.k));
	if (!seen.k)
		exit(1);
	tree_node(t, 0, 0, 0); /* node 0: the root, no frame */
	while (made < nstacks) {
		unsigned depth = sh->dmin + (unsigned)(rnd() % (sh->dmax - sh->dmin + 1)), branch = 0, d;
		unsigned tail = 1 + (unsigned)(-log1p(-u01() * 0.999) * (sh->tail - 1)); /* ~exponential */
		uint32_t node = 0;
		uint64_t key = 0;

		if (made) {
			/* an earlier stack, the recent ones likelier (a program's stacks cluster) */
			double u = u01();
			size_t j = made - 1 - (size_t)(u * u * (double)made);
			uint32_t at = leaf[j];

			if (tail > depth)
				tail = depth;
			branch = depth - tail;
			if (branch > t->depth[at])
				branch = t->depth[at];
			for (d = t->depth[at]; d > branch; d--)
				at = t->parent[at];
			node = at;
		}
		for (d = branch; d < depth; d++)
			node = tree_node(t, node, node_name(sh, t->n), (uint16_t)(d + 1));
		/* the same names on another path print as the same line: keep each text once */
		for (d = depth, node = node; d > 0; d--) {
			path[d - 1] = node;
			node = t->parent[node];
		}
		for (d = 0; d < depth; d++)
			key = mix(key ^ t->name[path[d]]) + d;
		node = path[depth - 1];
		if (set_add(&seen, key))
			leaf[made++] = node;
	}
	free(seen.k);
	free(path);
	return leaf;
}

static uint64_t *make_counts(const struct shape *sh, size_t nstacks, uint64_t nsamples)
{
	uint64_t *c = xmalloc(nstacks * sizeof(*c));
	size_t i;

	for (i = 0; i < nstacks; i++)
		c[i] = 1;
	switch (sh->dist) {
	case FLAT:
		for (i = 0; i < nstacks; i++)
			c[i] = nsamples / nstacks + (i < nsamples % nstacks);
		break;
	case DOMINANT:
		c[nstacks / 2] += (nsamples - nstacks) * 9 / 10;
		for (uint64_t j = nstacks + (nsamples - nstacks) * 9 / 10; j < nsamples; j++)
			c[rnd() % nstacks]++;
		break;
	case SKEWED:
		for (uint64_t j = nstacks; j < nsamples; j++) {
			double u = u01();

			c[(size_t)(u * u * u * (double)nstacks)]++;
		}
		break;
	}
	return c;
}

struct line {
	char *text;
	size_t len;
};

static int cmp_line(const void *a, const void *b)
{
	const struct line *x = a, *y = b;
	size_t n = x->len < y->len ? x->len : y->len;
	int c = memcmp(x->text, y->text, n);

	return c ? c : x->len < y->len ? -1 : x->len > y->len;
}

struct input {
	size_t bytes, nodes, names;
};

/* Writes the shape's folded file at path. */
static struct input generate(const struct shape *sh, size_t nstacks, uint64_t nsamples,
			     const char *path)
{
	struct tree t = { 0 };
	uint32_t *leaf, *path_nodes = xmalloc(256 * sizeof(*path_nodes));
	uint64_t *count;
	struct line *lines = xmalloc(nstacks * sizeof(*lines));
	uint8_t *used = calloc(sh->names, 1);
	struct input in = { 0 };
	char nb[400];
	FILE *f;

	leaf = make_stacks(sh, &t, nstacks);
	count = make_counts(sh, nstacks, nsamples);
	in.nodes = t.n - 1;
	for (size_t i = 0; i < nstacks; i++) {
		unsigned depth = t.depth[leaf[i]], d;
		uint32_t node = leaf[i];
		char *buf = NULL;
		size_t len = 0;
		FILE *m = open_memstream(&buf, &len);

		for (d = depth; d > 0; d--) {
			path_nodes[d - 1] = node;
			node = t.parent[node];
		}
		for (d = 0; d < depth; d++) {
			uint32_t nm = t.name[path_nodes[d]];

			if (used && !used[nm]) {
				used[nm] = 1;
				in.names++;
			}
			if (d)
				fputc(';', m);
			fwrite(nb, 1, name_text(sh, nm, nb), m);
		}
		fprintf(m, " %" PRIu64 "\n", count[i]);
		fclose(m);
		lines[i] = (struct line){ buf, len };
	}
	if (sh->sorted) {
		qsort(lines, nstacks, sizeof(*lines), cmp_line);
	} else {
		for (size_t i = nstacks; i > 1; i--) { /* Fisher-Yates */
			size_t j = rnd() % i;
			struct line x = lines[i - 1];

			lines[i - 1] = lines[j];
			lines[j] = x;
		}
	}
	f = fopen(path, "w");
	if (!f) {
		fprintf(stderr, "fg_shapes: %s: %s\n", path, strerror(errno));
		exit(1);
	}
	for (size_t i = 0; i < nstacks; i++) {
		fwrite(lines[i].text, 1, lines[i].len, f);
		in.bytes += lines[i].len;
		free(lines[i].text);
	}
	if (fclose(f) != 0) {
		fprintf(stderr, "fg_shapes: %s: write error\n", path);
		exit(1);
	}
	free(lines);
	free(leaf);
	free(count);
	free(used);
	free(path_nodes);
	free(t.parent);
	free(t.name);
	free(t.depth);
	return in;
}

/*
 * Generates in a child, so that this process stays small: a child's ru_maxrss counts what it
 * shared with its parent before exec, so the CLI must be forked from a small process.
 */
static struct input generate_apart(const struct shape *sh, size_t nstacks, uint64_t nsamples,
				   const char *path)
{
	struct input in = { 0 };
	int fd[2], status;
	pid_t pid;

	if (pipe(fd) != 0 || (pid = fork()) < 0) {
		fprintf(stderr, "fg_shapes: fork: %s\n", strerror(errno));
		exit(1);
	}
	if (pid == 0) {
		close(fd[0]);
		in = generate(sh, nstacks, nsamples, path);
		_exit(write(fd[1], &in, sizeof(in)) == (ssize_t)sizeof(in) ? 0 : 1);
	}
	close(fd[1]);
	if (read(fd[0], &in, sizeof(in)) != (ssize_t)sizeof(in) || waitpid(pid, &status, 0) != pid ||
	    !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr, "fg_shapes: generating %s failed\n", sh->name);
		exit(1);
	}
	close(fd[0]);
	return in;
}

/* ---- the run ---- */

struct result {
	double wall, cpu;
	long maxrss_kb;
	long long svg_bytes;
	int status;
};

static struct result run_cli(const char *cli, const char *in, const char *svg)
{
	struct result r = { .status = -1 };
	struct rusage ru;
	struct stat st;
	double w0 = now_s();
	int status;
	pid_t pid = fork();

	if (pid < 0)
		return r;
	if (pid == 0) {
		execl(cli, cli, "flamegraph", in, "-o", svg, (char *)NULL);
		_exit(127);
	}
	if (wait4(pid, &status, 0, &ru) != pid)
		return r;
	r.wall = now_s() - w0;
	r.cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
		(double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
	r.maxrss_kb = ru.ru_maxrss;
	r.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
	r.svg_bytes = stat(svg, &st) == 0 ? (long long)st.st_size : -1;
	return r;
}

int main(int argc, char **argv)
{
	size_t nstacks = 200000;
	uint64_t nsamples = 2000000, seed = 1;
	const char *only = NULL, *keep = NULL, *cli = getenv("PYRSPROF");
	char cli_buf[4096], dir[] = "/tmp/fg_shapes-XXXXXX", in[4300], svg[4300];
	unsigned failed = 0, ran = 0;

	for (int i = 1; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--stacks") == 0)
			nstacks = strtoul(argv[i + 1], NULL, 10);
		else if (strcmp(argv[i], "--samples") == 0)
			nsamples = strtoull(argv[i + 1], NULL, 10);
		else if (strcmp(argv[i], "--seed") == 0)
			seed = strtoull(argv[i + 1], NULL, 10);
		else if (strcmp(argv[i], "--only") == 0)
			only = argv[i + 1];
		else if (strcmp(argv[i], "--cli") == 0)
			cli = argv[i + 1];
		else if (strcmp(argv[i], "--keep") == 0)
			keep = argv[i + 1];
	}
	if (nstacks < 1 || nsamples < nstacks) {
		fprintf(stderr, "fg_shapes: need --samples >= --stacks >= 1\n");
		return 1;
	}
	if (!cli || !cli[0]) {
		char tmp[4096];

		snprintf(tmp, sizeof(tmp), "%s", argv[0]);
		snprintf(cli_buf, sizeof(cli_buf), "%s/../pyrsprof", dirname(tmp));
		cli = cli_buf;
	}
	if (!keep && !mkdtemp(dir)) {
		fprintf(stderr, "fg_shapes: mkdtemp: %s\n", strerror(errno));
		return 1;
	}
	printf("flame graphs of every shape (fg_shapes, seed %" PRIu64 "): %zu distinct stacks, "
	       "%" PRIu64 " samples each; `pyrsprof flamegraph IN -o OUT.svg` in a child (wait4)\n",
	       seed, nstacks, nsamples);
	printf("goals: wall < 1 s, peak RSS < 2 x input size\n");
	printf("%-12s %-34s %8s %8s %8s %7s %7s %8s %8s %6s %8s  %s\n", "shape", "what", "input MB",
	       "nodes", "names", "wall s", "CPU s", "RSS MB", "RSS/in", "svg MB", "exit", "verdict");
	for (size_t k = 0; k < sizeof(shapes) / sizeof(shapes[0]); k++) {
		const struct shape *sh = &shapes[k];
		struct input info;
		struct result r;
		bool ok;

		if (only && strcmp(only, sh->name) != 0)
			continue;
		snprintf(in, sizeof(in), "%s/%s.folded", keep ? keep : dir, sh->name);
		snprintf(svg, sizeof(svg), "%s/%s.svg", keep ? keep : dir, sh->name);
		rng_state = seed * 0x100000001b3ull + k;
		info = generate_apart(sh, nstacks, nsamples, in);
		r = run_cli(cli, in, svg);
		ok = r.status == 0 && r.wall < 1.0 && (double)r.maxrss_kb * 1024 < 2.0 * (double)info.bytes;
		printf("%-12s %-34s %8.1f %8zu %8zu %7.2f %7.2f %8.1f %8.2f %6.1f %8d  %s\n", sh->name,
		       sh->what, (double)info.bytes / 1e6, info.nodes, info.names, r.wall, r.cpu,
		       (double)r.maxrss_kb / 1024, (double)r.maxrss_kb * 1024 / (double)info.bytes,
		       (double)r.svg_bytes / 1e6, r.status,
		       ok ? "ok" : r.status ? "FAILED (exit)" : "MISSED");
		fflush(stdout);
		failed += !ok;
		ran++;
		if (!keep) {
			unlink(in);
			unlink(svg);
		}
	}
	if (!keep)
		rmdir(dir);
	printf("%u of %u shapes met both goals (the machine may be shared: CPU s is the figure to "
	       "compare; load %s)\n", ran - failed, ran, "see the header of make bench");
	return 0;
}
