/* SPDX-License-Identifier: MIT */
/* `pyrsprof report`, `flamegraph` and `export`: render or convert a saved profile. */
#include <errno.h>
#include <getopt.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/render.h"
#include "pyrsprof/symbol.h"
#include "util/banned.h"

/* True if some raw native frame of p has no symbols yet (an interrupted recording). */
static bool needs_symbols(const struct prs_profile *p)
{
	for (uint32_t i = 0; i < p->nframes; i++)
		if (p->frames[i].raw && p->frames[i].mapping != PRS_NO_MAPPING &&
		    (!p->expansions || p->expansions[i].count == 0))
			return true;
	return false;
}

static void symbolize_if_needed(struct prs_profile *p)
{
	struct prs_symbolize_stats st;
	struct prs_err err = { 0 };

	if (!needs_symbols(p))
		return;
	memset(&st, 0, sizeof(st));
	if (prs_symbolize_profile(p, NULL, &st, &err) < 0)
		cli_msg("warning: symbolization failed: %s", err.msg);
}

static bool parse_view(const char *s, enum prs_view *v)
{
	if (strcmp(s, "cpu") == 0)
		*v = PRS_VIEW_CPU;
	else if (strcmp(s, "wall") == 0)
		*v = PRS_VIEW_WALL;
	else {
		cli_msg("--view: '%s' is not a view (cpu or wall)", s);
		return false;
	}
	return true;
}

static int bad_option(char **argv, const char *cmd)
{
	if (optopt)
		cli_msg("%s: option -%c is unknown or needs a value (see pyrsprof %s --help)", cmd, optopt, cmd);
	else
		cli_msg("%s: unknown option '%s' (see pyrsprof %s --help)", cmd, argv[optind - 1], cmd);
	return EXIT_USAGE;
}

int cmd_report(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "output", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *outdir = NULL;
	struct prs_profile *p;
	char dirbuf[4096];
	bool created;
	int c, rc;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "o:h", longopts, NULL)) != -1) {
		if (c == 'o')
			outdir = optarg;
		else if (c == 'h') {
			puts("usage: pyrsprof report FILE [-o DIR]\n"
			     "  Re-renders cpu.svg and wall.svg of a profile (default DIR: the file's folder).");
			return EXIT_OK;
		} else
			return bad_option(argv, "report");
	}
	if (optind != argc - 1) {
		cli_msg("report: give one profile file (usage: pyrsprof report FILE [-o DIR])");
		return EXIT_USAGE;
	}
	p = cli_load_profile(argv[optind]);
	if (!p)
		return EXIT_FAIL;
	if (!outdir) {
		snprintf(dirbuf, sizeof(dirbuf), "%s", argv[optind]);
		outdir = dirname(dirbuf);
	}
	if (cli_make_dir(outdir, &created) != 0) {
		prs_profile_free(p);
		return EXIT_FAIL;
	}
	symbolize_if_needed(p);
	rc = cli_render_recording(p, outdir);
	prs_profile_free(p);
	if (rc)
		return EXIT_FAIL;
	cli_msg("wrote %s/{cpu.svg,wall.svg}", outdir);
	return EXIT_OK;
}

int cmd_flamegraph(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "output", required_argument, NULL, 'o' },
		{ "view", required_argument, NULL, 'v' },
		{ "width", required_argument, NULL, 'w' },
		{ "min-width", required_argument, NULL, 'm' },
		{ "icicle", no_argument, NULL, 'i' },
		{ "per-thread", no_argument, NULL, 't' },
		{ "title", required_argument, NULL, 'T' },
		{ "subtitle", required_argument, NULL, 'S' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct cli_graph_opts o;
	const char *out = NULL;
	struct prs_profile *p;
	int c, rc;

	memset(&o, 0, sizeof(o));
	prs_fg_opts_init(&o.fg);
	o.view = PRS_VIEW_CPU;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "o:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'o':
			out = optarg;
			break;
		case 'v':
			if (!parse_view(optarg, &o.view))
				return EXIT_USAGE;
			break;
		case 'w':
			if (!cli_parse_number("--width", optarg, 200, 100000, &o.fg.width))
				return EXIT_USAGE;
			break;
		case 'm':
			if (!cli_parse_number("--min-width", optarg, 0, 1000, &o.fg.min_width))
				return EXIT_USAGE;
			break;
		case 'i':
			o.fg.icicle = true;
			break;
		case 't':
			o.per_thread = true;
			break;
		case 'T':
			o.fg.title = optarg;
			break;
		case 'S':
			o.fg.subtitle = optarg;
			break;
		case 'h':
			puts("usage: pyrsprof flamegraph IN -o OUT.svg [--view cpu|wall] [--width PX]\n"
			     "       [--min-width PX] [--icicle] [--per-thread] [--title T] [--subtitle S]\n"
			     "  IN is a .pyrs profile or folded stacks ('main;work;hot 12' per line).");
			return EXIT_OK;
		default:
			return bad_option(argv, "flamegraph");
		}
	}
	if (optind != argc - 1) {
		cli_msg("flamegraph: give one input file (usage: pyrsprof flamegraph IN -o OUT.svg)");
		return EXIT_USAGE;
	}
	if (!out) {
		cli_msg("flamegraph: no output file (-o OUT.svg)");
		return EXIT_USAGE;
	}
	p = cli_load_profile(argv[optind]);
	if (!p)
		return EXIT_FAIL;
	symbolize_if_needed(p);
	rc = cli_render_svg(p, out, &o);
	prs_profile_free(p);
	return rc ? EXIT_FAIL : EXIT_OK;
}

int cmd_export(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "output", required_argument, NULL, 'o' },
		{ "format", required_argument, NULL, 'f' },
		{ "view", required_argument, NULL, 'v' },
		{ "lines", no_argument, NULL, 'l' },
		{ "per-thread", no_argument, NULL, 't' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *out = NULL, *format = NULL;
	enum prs_view view = PRS_VIEW_CPU;
	unsigned flags = 0;
	struct prs_profile *p;
	struct prs_err err = { 0 };
	struct cli_atomic a;
	FILE *f;
	int c, rc;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "o:f:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'o':
			out = optarg;
			break;
		case 'f':
			format = optarg;
			break;
		case 'v':
			if (!parse_view(optarg, &view))
				return EXIT_USAGE;
			break;
		case 'l':
			flags |= PRS_FOLDED_LINES;
			break;
		case 't':
			flags |= PRS_FOLDED_PER_THREAD;
			break;
		case 'h':
			puts("usage: pyrsprof export FILE --format folded [--view cpu|wall] [--lines]\n"
			     "       [--per-thread] [-o OUT]\n"
			     "  Writes folded stacks (flamegraph.pl / inferno format) to OUT or stdout.");
			return EXIT_OK;
		default:
			return bad_option(argv, "export");
		}
	}
	if (optind != argc - 1) {
		cli_msg("export: give one profile file (usage: pyrsprof export FILE --format folded)");
		return EXIT_USAGE;
	}
	if (!format) {
		cli_msg("export: no --format (folded)");
		return EXIT_USAGE;
	}
	if (strcmp(format, "folded") != 0) {
		cli_msg("export: unknown format '%s' (folded)", format);
		return EXIT_USAGE;
	}
	p = cli_load_profile(argv[optind]);
	if (!p)
		return EXIT_FAIL;
	symbolize_if_needed(p);
	f = out ? cli_atomic_open(&a, out) : stdout;
	if (!f) {
		prs_profile_free(p);
		return EXIT_FAIL;
	}
	rc = prs_export_folded(p, view, flags, f, &err);
	prs_profile_free(p);
	if (rc)
		cli_err(&err, "export");
	if (out)
		return cli_atomic_close(&a, rc == 0) == 0 && rc == 0 ? EXIT_OK : EXIT_FAIL;
	if (fflush(stdout) != 0) {
		cli_msg("export: write error: %s", strerror(errno));
		return EXIT_FAIL;
	}
	return rc ? EXIT_FAIL : EXIT_OK;
}
