/* SPDX-License-Identifier: MIT */
/* `pyrsprof report`, `flamegraph` and `export`: render or convert a saved profile. */
#include <errno.h>
#include <getopt.h>
#include <libgen.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/collect.h"
#include "cli/render.h"
#include "cli/symbols.h"
#include "pyrsprof/diff.h"
#include "pyrsprof/export.h"
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

/* sym may be NULL: the default folders. Debug folders given: every frame is named again. */
static void symbolize_if_needed(struct prs_profile *p, const struct cli_symopts *sym)
{
	if (needs_symbols(p) || (sym && sym->ndirs))
		cli_symbolize(p, sym, false, NULL);
}

/*
 * report, export and diff hold a profile's arrays and make a few more of its size, one after
 * the other (the view, the graph's tree, the output's tables). glibc serves a large block from
 * mmap only above a threshold that it raises to the size of each such block freed (up to 32 MB),
 * and from there on the next ones come from the heap: a growing array is copied instead of
 * remapped, and freed memory stays resident. A fixed threshold keeps every block of 256 KB and
 * more in its own mapping, returned when freed. view_bench's 1M-sample profile, peak RSS: report
 * 106.8 -> 73.1 MB, diff 108.3 -> 83.2, speedscope 75.2 -> 66.7, pprof 48.3 -> 45.9, folded
 * 35.3 -> 32.0; CPU time the same within noise (one run each, load 6-7).
 */
static void large_blocks_mapped(void)
{
	mallopt(M_MMAP_THRESHOLD, 256 * 1024);
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

int cmd_report(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "output", required_argument, NULL, 'o' },
		{ "debug-dir", required_argument, NULL, 'G' },
		{ "target", required_argument, NULL, CLI_OPT_TARGET },
		{ "dim", required_argument, NULL, CLI_OPT_DIM },
		{ "sweep", required_argument, NULL, CLI_OPT_SWEEP },
		{ "merge-processes", no_argument, NULL, 'P' },
		{ "stacks", required_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct cli_graph_choice graphs = { 0 };
	struct cli_symopts sym = { .ndirs = 0 };
	const char *view;
	char said[160];
	const char *outdir = NULL;
	struct cli_phase_opts po;
	struct prs_profile *p;
	char dirbuf[4096];
	struct stat st;
	bool created;
	int c, rc;

	memset(&po, 0, sizeof(po));
	large_blocks_mapped();
	optind = 1;
	while ((c = cli_getopt(argc, argv, "o:h", longopts, "report")) != -1) {
		if (c == 'o')
			outdir = optarg;
		else if (c == 'G') {
			if (!cli_add_debug_dir(&sym, optarg))
				return EXIT_USAGE;
		} else if (c == 'P') {
			graphs.merge_processes = true;
		} else if (c == 'V') {
			if (!cli_parse_stacks(optarg, &graphs.python_stacks))
				return EXIT_USAGE;
		} else if (c == 'h') {
			puts("usage: pyrsprof report FILE|DIR [-o DIR] [--debug-dir DIR] [--target EXPR]\n"
			     "       [--dim N=T[..MAX]]... [--sweep SWEEP.json]... [--merge-processes]\n"
			     "       [--stacks merged|python]\n"
			     "  Re-renders cpu.svg and wall.svg of a profile, or of a recording's folder (its\n"
			     "  profile.pyrs; default output: that folder, or the file's), and writes the\n"
			     "  Phase-1 and Phase-4 reports again from what it holds (a target or dimensions\n"
			     "  given here replace the recorded ones; --sweep: the growth column of a dimension\n"
			     "  from `pyrsprof sweep` along it). A profile of several processes has a\n"
			     "  root per process (\"python pool.py [1234]\"), or per command with\n"
			     "  --merge-processes.\n"
			     CLI_STACKS_HELP
			     CLI_DEBUG_DIR_HELP
			     "                       Given debug folders, native frames are named again.");
			return EXIT_OK;
		} else if ((rc = cli_phase_opt(c, optarg, &po)) > 0)
			return rc;
		else if (rc == 0)
			return EXIT_USAGE;
	}
	if (optind != argc - 1) {
		cli_msg("report: give one profile file (usage: pyrsprof report FILE [-o DIR])");
		return EXIT_USAGE;
	}
	if (!cli_folder_ok(outdir, "report"))
		return EXIT_USAGE;
	p = cli_load_stack_sums(argv[optind]); /* (the classifier's facts: from its threads' sums) */
	if (!p)
		return EXIT_FAIL;
	if (!outdir) { /* the file's folder, or the recording's folder given */
		snprintf(dirbuf, sizeof(dirbuf), "%s", argv[optind]);
		outdir = stat(argv[optind], &st) == 0 && S_ISDIR(st.st_mode) ? argv[optind] : dirname(dirbuf);
	}
	if (cli_make_dir(outdir, &created) != 0) {
		prs_profile_free(p);
		return EXIT_FAIL;
	}
	symbolize_if_needed(p, &sym);
	rc = cli_render_recording(p, outdir, graphs);
	if (cli_write_reports(p, outdir, true, graphs.python_stacks, &po) != 0)
		rc = -1;
	view = cli_graph_choice_said(p, graphs);
	snprintf(said, sizeof(said), "%s%s%s", view[0] ? " (" : "", view, view[0] ? ")" : "");
	if (!rc && p->damaged_at)
		cli_msg("wrote %s/{cpu.svg,wall.svg,phase1.md,phase1.json,phase4.md,phase4.json} of the %zu "
			"samples before the damage at byte %llu%s", outdir, (size_t)p->sample_count,
			(unsigned long long)p->damaged_at, said);
	else if (!rc && !p->complete)
		cli_msg("wrote %s/{cpu.svg,wall.svg,phase1.md,phase1.json,phase4.md,phase4.json} of the %zu "
			"samples saved before the recording was cut short%s", outdir, (size_t)p->sample_count, said);
	else if (!rc)
		cli_msg("wrote %s/{cpu.svg,wall.svg,phase1.md,phase1.json,phase4.md,phase4.json}%s", outdir, said);
	prs_profile_free(p);
	return rc ? EXIT_FAIL : EXIT_OK;
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
		{ "merge-processes", no_argument, NULL, 'P' },
		{ "stacks", required_argument, NULL, 's' },
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
	o.view.view = PRS_VIEW_CPU;
	o.view.per_process = true;
	optind = 1;
	while ((c = cli_getopt(argc, argv, "o:h", longopts, "flamegraph")) != -1) {
		switch (c) {
		case 'o':
			out = optarg;
			break;
		case 'v':
			if (!parse_view(optarg, &o.view.view))
				return EXIT_USAGE;
			break;
		case 'w':
			if (!cli_parse_number("--width", optarg, 200, 100000, &o.fg.width))
				return EXIT_USAGE;
			break;
		case 'm':
			if (!cli_parse_number("--min-width", optarg, 0, 1000, &o.fg.min_width))
				return EXIT_USAGE;
			if (o.fg.min_width == 0)
				o.fg.min_width = -1; /* 0: draw every frame (the renderer's 0 is its default) */
			break;
		case 'i':
			o.fg.icicle = true;
			break;
		case 't':
			o.view.per_thread = true;
			break;
		case 'P':
			o.view.merge_processes = true;
			break;
		case 's':
			if (!cli_parse_stacks(optarg, &o.view.python_stacks))
				return EXIT_USAGE;
			break;
		case 'T':
			o.fg.title = optarg;
			break;
		case 'S':
			o.fg.subtitle = optarg;
			break;
		case 'h':
			puts("usage: pyrsprof flamegraph IN -o OUT.svg [--view cpu|wall] [--width PX]\n"
			     "       [--min-width PX] [--icicle] [--per-thread] [--merge-processes]\n"
			     "       [--stacks merged|python] [--title T] [--subtitle S]\n"
			     "  --stacks python folds the interpreter's native frames into the Python lines\n"
			     "  (extensions' native frames stay); merged (the default) shows them all.\n"
			     "  IN is a .pyrs profile or folded stacks ('main;work;hot 12' per line). A profile\n"
			     "  of several processes has a root per process, or per command with\n"
			     "  --merge-processes.");
			return EXIT_OK;
		default:
			return EXIT_USAGE;
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
	if (cli_folded_direct(argv[optind], &o))
		return cli_render_folded(argv[optind], out, &o) ? EXIT_FAIL : EXIT_OK;
	/* a profile (not folded text drawn directly: issue 13.1's shapes keep glibc's threshold) */
	large_blocks_mapped();
	p = o.view.per_thread ? cli_load_sums(argv[optind]) : cli_load_stack_sums(argv[optind]);
	if (!p)
		return EXIT_FAIL;
	symbolize_if_needed(p, NULL);
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
		{ "merge-processes", no_argument, NULL, 'P' },
		{ "stacks", required_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *out = NULL, *format = NULL;
	struct prs_view_opts vo = { .view = PRS_VIEW_CPU, .per_process = true };
	struct prs_profile *p;
	struct prs_err err = { 0 };
	struct cli_atomic a;
	FILE *f;
	int c, rc;

	large_blocks_mapped();
	optind = 1;
	while ((c = cli_getopt(argc, argv, "o:f:h", longopts, "export")) != -1) {
		switch (c) {
		case 'o':
			out = optarg;
			break;
		case 'f':
			format = optarg;
			break;
		case 'v':
			if (!parse_view(optarg, &vo.view))
				return EXIT_USAGE;
			break;
		case 'l':
			vo.lines = true;
			break;
		case 't':
			vo.per_thread = true;
			break;
		case 'P':
			vo.merge_processes = true;
			break;
		case 's':
			if (!cli_parse_stacks(optarg, &vo.python_stacks))
				return EXIT_USAGE;
			break;
		case 'h':
			puts("usage: pyrsprof export FILE --format folded|speedscope|pprof [--view cpu|wall]\n"
			     "       [--lines] [--per-thread] [--merge-processes] [--stacks merged|python]\n"
			     "       [-o OUT]   (--stacks python: see flamegraph --help)\n"
			     "  folded: stacks as flamegraph.pl and inferno read them (--lines adds file:line,\n"
			     "  --per-thread a root frame per thread; a root frame per process when the profile\n"
			     "  holds several, one per command with --merge-processes); speedscope: JSON for\n"
			     "  speedscope.app, a profile per process and thread; pprof: gzip'd profile.proto\n"
			     "  for `go tool pprof`, labelled with pid and thread (-o, or a pipe). Without -o,\n"
			     "  or with -o -, the output goes to standard output.");
			return EXIT_OK;
		default:
			return EXIT_USAGE;
		}
	}
	if (optind != argc - 1) {
		cli_msg("export: give one profile file (usage: pyrsprof export FILE --format folded)");
		return EXIT_USAGE;
	}
	if (!format) {
		cli_msg("export: no --format (folded, speedscope or pprof)");
		return EXIT_USAGE;
	}
	if (strcmp(format, "folded") != 0 && strcmp(format, "speedscope") != 0 &&
	    strcmp(format, "pprof") != 0) {
		cli_msg("export: unknown format '%s' (folded, speedscope or pprof)", format);
		return EXIT_USAGE;
	}
	if (strcmp(format, "pprof") == 0 && (!out || strcmp(out, "-") == 0) && isatty(STDOUT_FILENO)) {
		cli_msg("export: pprof is binary and standard output is a terminal: give -o FILE.pb.gz");
		return EXIT_USAGE;
	}
	/* speedscope draws each thread's timeline: every sample with its time; pprof labels its
	 * samples with their threads; folded keeps threads apart only with --per-thread */
	if (strcmp(format, "speedscope") == 0)
		p = cli_load_profile(argv[optind]);
	else if (strcmp(format, "pprof") == 0 || vo.per_thread)
		p = cli_load_sums(argv[optind]);
	else
		p = cli_load_stack_sums(argv[optind]);
	if (!p)
		return EXIT_FAIL;
	symbolize_if_needed(p, NULL);
	f = out ? cli_atomic_open(&a, out) : stdout;
	if (!f) {
		prs_profile_free(p);
		return EXIT_FAIL;
	}
	if (strcmp(format, "speedscope") == 0)
		rc = prs_export_speedscope_view(p, &vo, f, &err);
	else if (strcmp(format, "pprof") == 0)
		rc = prs_export_pprof_view(p, &vo, f, &err);
	else
		rc = prs_export_folded(p, &vo, f, &err);
	prs_profile_free(p);
	if (rc)
		cli_output_err(&err, out ? out : "-");
	if (out)
		return cli_atomic_close(&a, rc == 0) == 0 && rc == 0 ? EXIT_OK : EXIT_FAIL;
	if (fflush(stdout) != 0) {
		cli_msg("export: write error: %s", strerror(errno));
		return EXIT_FAIL;
	}
	return rc ? EXIT_FAIL : EXIT_OK;
}

/* DIR/diff.svg: both profiles' frames, keyed as d matched them, widths from both sides' times. */
static int write_diff_svg(struct prs_diff *d, const struct prs_profile *before,
			  const struct prs_profile *after, const char *outdir)
{
	/* processes of two runs have other pids: their roots are matched by command */
	struct prs_view_opts ob = { .view = d->view, .per_process = true, .merge_processes = true };
	struct prs_view_opts oa = ob;
	struct prs_err err = { 0 };
	struct prs_fg *fg = prs_fg_new();
	struct prs_fg_opts fo;
	struct cli_atomic a;
	char path[4096];
	int rc = -1;
	FILE *f;

	prs_diff_view_opts(d, 0, &ob);
	prs_diff_view_opts(d, 1, &oa);
	if (!fg || prs_fg_diff_from_profiles(fg, before, &ob, after, &oa, &err) != 0) {
		if (!fg)
			prs_err_set(&err, -ENOMEM, "out of memory");
		cli_err(&err, "diff flame graph");
		goto out;
	}
	prs_fg_opts_init(&fo);
	fo.diff = true;
	fo.title = "Differential flame graph";
	fo.subtitle = d->timed ? "widths: before + after time; red: slower or added, blue: faster or "
				 "removed (dashed outline: one side only); grey: within noise"
			       : "widths: before + after share; red: grew or added, blue: shrank or "
				 "removed (dashed outline: one side only); grey: within noise";
	fo.diff_period_s[0] = d->timed ? d->side[1].period_s : 0;
	fo.diff_period_s[1] = d->timed ? d->side[0].period_s : 0;
	fo.diff_run_noise = d->timed ? d->run_noise : 0;
	snprintf(path, sizeof(path), "%s/diff.svg", outdir);
	f = cli_atomic_open(&a, path);
	if (!f)
		goto out;
	if (prs_fg_write_svg(fg, f, &fo, &err) != 0) {
		cli_output_err(&err, path);
		cli_atomic_close(&a, false);
		goto out;
	}
	rc = cli_atomic_close(&a, true);
out:
	prs_fg_free(fg);
	return rc;
}

int cmd_diff(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "output", required_argument, NULL, 'o' },
		{ "view", required_argument, NULL, 'v' },
		{ "run-noise", required_argument, NULL, 'n' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct prs_diff_opts o = { .view = PRS_VIEW_CPU, .run_noise = -1 };
	const char *outdir = NULL;
	struct prs_profile *before = NULL, *after = NULL;
	struct prs_diff *d = NULL;
	struct prs_err err = { 0 };
	bool created;
	int c, rc = EXIT_FAIL;

	large_blocks_mapped();
	optind = 1;
	while ((c = cli_getopt(argc, argv, "o:h", longopts, "diff")) != -1) {
		switch (c) {
		case 'o':
			outdir = optarg;
			break;
		case 'v':
			if (!parse_view(optarg, &o.view))
				return EXIT_USAGE;
			break;
		case 'n': /* a percentage: the run-to-run noise of one run's time */
			if (!cli_parse_number("--run-noise", optarg, 0, 100, &o.run_noise))
				return EXIT_USAGE;
			o.run_noise /= 100;
			break;
		case 'h':
			puts("usage: pyrsprof diff BEFORE AFTER [-o DIR] [--view cpu|wall] [--run-noise PCT]\n"
			     "  The re-measure report of an optimization: BEFORE and AFTER are .pyrs profiles\n"
			     "  (or folded stacks) of the program before and after a change. Prints the\n"
			     "  measured speedup (wall and CPU), the functions that changed beyond noise,\n"
			     "  the next hot spot and the stop hint. With -o, writes DIR/diff.md,\n"
			     "  DIR/diff.json (every function: seconds and shares before and after) and\n"
			     "  DIR/diff.svg (both sides' frames; red slower, blue faster).\n"
			     "  --run-noise PCT  the run-to-run noise of one run's time, in percent\n"
			     "                   (default 5): changes within it are noise");
			return EXIT_OK;
		default:
			return EXIT_USAGE;
		}
	}
	if (optind != argc - 2) {
		cli_msg("diff: give two profiles (usage: pyrsprof diff BEFORE AFTER [-o DIR])");
		return EXIT_USAGE;
	}
	if (!cli_folder_ok(outdir, "diff"))
		return EXIT_USAGE;
	before = cli_load_stack_sums(argv[optind]);
	if (!before)
		return EXIT_FAIL;
	after = cli_load_stack_sums(argv[optind + 1]);
	if (!after)
		goto out;
	if (outdir && cli_make_dir(outdir, &created) != 0)
		goto out;
	symbolize_if_needed(before, NULL);
	symbolize_if_needed(after, NULL);
	if (prs_diff_compute(before, after, &o, &d, &err) != 0 ||
	    (outdir && prs_diff_write(d, outdir, &err) != 0)) {
		cli_err(&err, "diff");
		goto out;
	}
	if (outdir && write_diff_svg(d, before, after, outdir) != 0)
		goto out;
	prs_diff_summary(d, cli_emit, NULL);
	if (outdir)
		cli_msg("wrote %s/{diff.svg,diff.md,diff.json}", outdir);
	rc = EXIT_OK;
out:
	prs_diff_free(d);
	prs_profile_free(before);
	prs_profile_free(after);
	return rc;
}
