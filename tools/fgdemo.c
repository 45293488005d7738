/* SPDX-License-Identifier: MIT */
/*
 * fgdemo: a developer driver of the flame graph renderer, independent of the CLI.
 *
 *   fgdemo [flamegraph] IN -o OUT.svg [--width PX] [--min-width PX] [--icicle] [--title T]
 *          [--subtitle S] [--annotated] [--time]
 *   fgdemo diff BEFORE AFTER -o OUT.svg [same options]
 *
 * IN is folded stacks ("main;work;hot 12", root first, the count after the last space), read by
 * this file's own small reader straight into prs_fg_add (so the renderer is testable before, and
 * independently of, the profile model's reader). "_[k]" marks a kernel frame as in flamegraph.pl;
 * with --annotated, "_[py]" "_[c]" "_[cpp]" "_[rs]" "_[io]" "_[lock]" "_[gil]" "_[sleep]"
 * "_[off]" "_[thread]" set the other kinds, and "name (file:line)" sets a frame's location.
 * Exit 0, 1 on a bad input or write error, 2 on a usage error.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pyrsprof/flamegraph.h"

#include "util/banned.h"

#define MAX_LINE (1u << 20)

struct annot {
	const char *suffix;
	enum prs_kind kind;
};

static const struct annot annots[] = {
	{ "_[k]", PRS_KIND_KERNEL },	   { "_[py]", PRS_KIND_PYTHON },	{ "_[c]", PRS_KIND_NATIVE },
	{ "_[cpp]", PRS_KIND_CPP },	   { "_[rs]", PRS_KIND_RUST },		{ "_[io]", PRS_KIND_OFF_IO },
	{ "_[lock]", PRS_KIND_OFF_LOCK }, { "_[gil]", PRS_KIND_OFF_GIL },	{ "_[sleep]", PRS_KIND_OFF_SLEEP },
	{ "_[off]", PRS_KIND_OFF_OTHER }, { "_[thread]", PRS_KIND_THREAD },
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Splits one frame's text in place into name, kind, file, line. */
static void parse_frame(char *s, size_t len, bool annotated, struct prs_fg_frame *f)
{
	*f = (struct prs_fg_frame){ .name = s, .kind = PRS_KIND_UNKNOWN };
	s[len] = '\0';
	for (size_t i = 0; i < sizeof(annots) / sizeof(annots[0]); i++) {
		size_t k = strlen(annots[i].suffix);

		if ((annotated || i == 0) && len > k && memcmp(s + len - k, annots[i].suffix, k) == 0) {
			f->kind = annots[i].kind;
			len -= k;
			s[len] = '\0';
			break;
		}
	}
	if (annotated && len > 4 && s[len - 1] == ')') {
		char *open = memrchr(s, '(', len), *colon;

		if (open && open > s && open[-1] == ' ' && (colon = memrchr(open, ':', (size_t)(s + len - open)))) {
			char *end;
			unsigned long line = strtoul(colon + 1, &end, 10);

			if (end == s + len - 1 && line > 0 && line < UINT32_MAX) {
				open[-1] = '\0';
				*colon = '\0';
				f->file = open + 1;
				f->line = (uint32_t)line;
			}
		}
	}
}

/* Reads folded stacks from path into fg (into the before counts if before). Returns 0 or -1. */
static int read_folded(const char *path, struct prs_fg *fg, bool before, bool annotated)
{
	FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
	struct prs_fg_frame *frames = malloc(PRS_MAX_STACK_FRAMES * sizeof(*frames));
	char *line = malloc(MAX_LINE + 2);
	unsigned long lineno = 0, stacks = 0;
	int rc = 0;

	if (!f || !frames || !line) {
		fprintf(stderr, "fgdemo: %s: %s\n", path, strerror(f ? ENOMEM : errno));
		rc = -1;
		goto out;
	}
	while (fgets(line, MAX_LINE + 2, f)) {
		size_t len = strlen(line), n = 0, start = 0;
		char *sp, *end;
		unsigned long long count;

		lineno++;
		if (len > MAX_LINE) {
			fprintf(stderr, "fgdemo: %s:%lu: line too long\n", path, lineno);
			rc = -1;
			goto out;
		}
		while (len && (line[len - 1] == '\n' || line[len - 1] == '\r' || line[len - 1] == ' '))
			line[--len] = '\0';
		if (!len)
			continue;
		sp = memrchr(line, ' ', len);
		errno = 0;
		count = sp ? strtoull(sp + 1, &end, 10) : 0;
		if (!sp || sp == line || *end || errno || sp[1] == '-') {
			fprintf(stderr, "fgdemo: %s:%lu: expected 'frame;frame;... COUNT'\n", path, lineno);
			rc = -1;
			goto out;
		}
		*sp = '\0';
		len = (size_t)(sp - line);
		for (size_t i = 0; i <= len && n < PRS_MAX_STACK_FRAMES; i++) {
			if (i == len || line[i] == ';') {
				parse_frame(line + start, i - start, annotated, &frames[n++]);
				start = i + 1;
			}
		}
		if ((before ? prs_fg_add2(fg, frames, n, count, 0) : prs_fg_add(fg, frames, n, count)) < 0) {
			fprintf(stderr, "fgdemo: %s:%lu: cannot add the stack\n", path, lineno);
			rc = -1;
			goto out;
		}
		stacks++;
	}
	if (ferror(f)) {
		fprintf(stderr, "fgdemo: %s: read error\n", path);
		rc = -1;
	} else if (stacks == 0) {
		fprintf(stderr, "fgdemo: %s: no stacks\n", path);
		rc = -1;
	}
out:
	if (f && f != stdin)
		fclose(f);
	free(frames);
	free(line);
	return rc;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "output", required_argument, NULL, 'o' },  { "width", required_argument, NULL, 'w' },
		{ "min-width", required_argument, NULL, 'm' }, { "icicle", no_argument, NULL, 'i' },
		{ "title", required_argument, NULL, 'T' },   { "subtitle", required_argument, NULL, 'S' },
		{ "annotated", no_argument, NULL, 'a' },     { "time", no_argument, NULL, 't' },
		{ NULL, 0, NULL, 0 },
	};
	struct prs_fg_opts o;
	struct prs_err err = { 0 };
	struct prs_fg *fg = NULL;
	const char *out = NULL;
	bool diff = false, annotated = false, timing = false;
	double t0, t1, t2;
	FILE *f;
	int c, rc = 1;

	prs_fg_opts_init(&o);
	if (argc > 1 && (strcmp(argv[1], "flamegraph") == 0 || strcmp(argv[1], "diff") == 0)) {
		diff = strcmp(argv[1], "diff") == 0;
		argc--;
		argv++;
	}
	while ((c = getopt_long(argc, argv, "o:", longopts, NULL)) != -1) {
		switch (c) {
		case 'o': out = optarg; break;
		case 'w': o.width = strtod(optarg, NULL); break;
		case 'm': o.min_width = strtod(optarg, NULL); break;
		case 'i': o.icicle = true; break;
		case 'T': o.title = optarg; break;
		case 'S': o.subtitle = optarg; break;
		case 'a': annotated = true; break;
		case 't': timing = true; break;
		default: return 2;
		}
	}
	if (optind + (diff ? 2 : 1) != argc || !out) {
		fprintf(stderr, "usage: fgdemo [flamegraph] IN -o OUT.svg [options] | fgdemo diff BEFORE AFTER -o OUT.svg\n");
		return 2;
	}
	fg = prs_fg_new();
	if (!fg)
		return 1;
	o.diff = diff;
	t0 = now_s();
	if (read_folded(argv[optind], fg, diff, annotated) < 0 ||
	    (diff && read_folded(argv[optind + 1], fg, false, annotated) < 0))
		goto out;
	t1 = now_s();
	f = strcmp(out, "-") == 0 ? stdout : fopen(out, "w");
	if (!f) {
		fprintf(stderr, "fgdemo: %s: %s\n", out, strerror(errno));
		goto out;
	}
	if (prs_fg_write_svg(fg, f, &o, &err) < 0) {
		fprintf(stderr, "fgdemo: %s\n", err.msg);
		if (f != stdout)
			fclose(f);
		goto out;
	}
	if (f != stdout && fclose(f) != 0) {
		fprintf(stderr, "fgdemo: %s: %s\n", out, strerror(errno));
		goto out;
	}
	t2 = now_s();
	if (timing)
		fprintf(stderr, "fgdemo: read+build %.3f s, layout+write %.3f s, %zu frames drawn\n",
			t1 - t0, t2 - t1, prs_fg_drawn(fg));
	rc = 0;
out:
	prs_fg_free(fg);
	return rc;
}
