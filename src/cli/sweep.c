/* SPDX-License-Identifier: MIT */
/*
 * `pyrsprof sweep --dim NAME=V1,V2,... [--repeat K] [-o DIR] [-r HZ] -- CMD ... {NAME} ...`: runs
 * CMD once per value (K times each), {NAME} in its arguments replaced by the value, each run
 * recorded by `pyrsprof run` into DIR/NAME=VALUE/runK/ with the program's output in output.log
 * there; then fits how wall and CPU time grow along the dimension and writes sweep.md,
 * sweep.json and sweep.svg into DIR (src/report/sweep*.c). The template and --dim are read by
 * sweep_template.c, each run is made by sweep_run.c.
 */
#include "cli/sweep.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/collect.h"
#include "cli/render.h"
#include "pyrsprof/report.h"
#include "util/banned.h"

struct sweep_opts {
	const char *dim_arg;  /* "n=1e3,1e4" */
	const char *rate_arg; /* passed to `run -r` as given (validated) */
	double rate_hz;
	double repeat;
	const char *outdir;
	const char *phase1; /* --phase1 DIR: the recording whose growth column the sweep fills */
	bool subprocesses;  /* each run follows CMD's child processes (run --subprocesses) */
	char **cmd; /* after "--" */
};

static const char sweep_usage[] =
	"usage: pyrsprof sweep --dim NAME=V1,V2,... [--repeat K] [-o DIR] [-r HZ] [--subprocesses]\n"
	"                      -- CMD ... {NAME} ...\n"
	"  Runs CMD once per value of the dimension NAME, {NAME} in its arguments replaced by the\n"
	"  value (1e3 becomes 1000), records each run with `pyrsprof run`, and fits how the wall and\n"
	"  CPU time grow along NAME: \"wall ∝ n^1.98 (R² 0.999): O(n²) along n\".\n"
	"  --dim NAME=V1,V2,...  the dimension and its positive values (3 or more to get an R²)\n"
	"  --repeat K            runs per value (default 1): the fastest is fitted (other work on\n"
	"                        the machine only adds time); median and slowest are shown too\n"
	"  -o, --output DIR      output folder (default ./pyrsprof-sweep-<time>/): sweep.md,\n"
	"                        sweep.json, sweep.svg, and NAME=VALUE/runK/ per run (its profile,\n"
	"                        flame graphs and output.log: CMD's output goes there, not here)\n"
	"  -r, --rate HZ         sampling rate of each recording (default 100)\n"
	"  --subprocesses        each run follows CMD's child processes too (`run --subprocesses`):\n"
	"                        for a CMD that starts the program, e.g. sh -c '...' or make\n"
	"  --phase1 DIR          a recording of `pyrsprof run --dim NAME=...` (its folder): its\n"
	"                        phase1.md/phase1.json are written again with NAME's growth (the\n"
	"                        wall fit); later, `pyrsprof report DIR --sweep OUT/sweep.json`\n"
	"  Write {{ for a literal { in CMD. CMD's input is /dev/null. The exit status is 0 when every\n"
	"  run exited 0, 1 when some failed (each is named), 128+N when signal N stopped the sweep.\n";

static int parse_opts(int argc, char **argv, struct sweep_opts *o)
{
	static const struct option longopts[] = {
		{ "dim", required_argument, NULL, 'D' },   { "repeat", required_argument, NULL, 'k' },
		{ "output", required_argument, NULL, 'o' }, { "rate", required_argument, NULL, 'r' },
		{ "phase1", required_argument, NULL, 'P' }, { "help", no_argument, NULL, 'h' },
		{ "subprocesses", no_argument, NULL, 'C' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	memset(o, 0, sizeof(*o));
	o->rate_arg = "100";
	o->rate_hz = 100;
	o->repeat = 1;
	optind = 1;
	while ((c = cli_getopt(argc, argv, "+o:r:h", longopts, "sweep")) != -1) {
		switch (c) {
		case 'D':
			if (o->dim_arg) {
				cli_msg("--dim: one dimension per sweep (it was given twice)");
				return EXIT_USAGE;
			}
			o->dim_arg = optarg;
			break;
		case 'k':
			if (!cli_parse_number("--repeat", optarg, 1, PRS_SWEEP_MAX_REPEAT, &o->repeat))
				return EXIT_USAGE;
			if (o->repeat != floor(o->repeat)) {
				cli_msg("--repeat: '%s' is not a whole number of runs", optarg);
				return EXIT_USAGE;
			}
			break;
		case 'P':
			o->phase1 = optarg;
			break;
		case 'C':
			o->subprocesses = true;
			break;
		case 'o':
			o->outdir = optarg;
			break;
		case 'r':
			if (!cli_parse_rate(optarg, &o->rate_hz))
				return EXIT_USAGE;
			o->rate_arg = optarg;
			break;
		case 'h':
			fputs(sweep_usage, stdout);
			return EXIT_OK;
		default:
			return EXIT_USAGE;
		}
	}
	if (!o->dim_arg) {
		cli_msg("sweep: --dim NAME=V1,V2,... is required (e.g. --dim n=1e3,1e4,1e5)");
		return EXIT_USAGE;
	}
	if (optind >= argc) {
		cli_msg("sweep: no command given (usage: pyrsprof sweep --dim NAME=V1,V2,... -- CMD ... {NAME} ...)");
		return EXIT_USAGE;
	}
	if (strcmp(argv[optind - 1], "--") != 0) {
		cli_msg("sweep: put -- before the command: pyrsprof sweep --dim ... -- %s ...", argv[optind]);
		return EXIT_USAGE;
	}
	o->cmd = argv + optind;
	return -1;
}

/* ---- the sweep ---- */

static void say_run(const struct prs_sweep *s, size_t i, size_t k, const char *outdir)
{
	const struct prs_sweep_run *r = &s->points[i].runs[k];
	char dir[256];

	if (prs_sweep_run_ok(r)) {
		cli_msg("%s=%s (%zu/%zu): wall %.3f s, CPU %.3f s, peak RSS %.1f MB%s%s", s->dim,
			s->points[i].text, k + 1, s->repeat, r->wall_s, r->user_s + r->sys_s,
			(double)r->rss_kb / 1024, r->verdict[0] ? ", verdict: " : "", r->verdict);
		return;
	}
	prs_sweep_run_dir(s, i, k, dir, sizeof(dir));
	cli_msg("%s=%s (%zu/%zu): failed: %s (output in %s/%s/output.log)", s->dim, s->points[i].text,
		k + 1, s->repeat, r->problem, outdir, dir);
}

/* Runs every value, repeat rounds in order (a slow drift of the machine spreads over all values
 * instead of biasing the last ones). Returns false on a setup failure (message printed). */
static bool run_all(struct prs_sweep *s, const struct sweep_opts *o, const char *outdir,
		    const sigset_t *old, int *stop_sig)
{
	for (size_t k = 0; k < s->repeat && !*stop_sig; k++)
		for (size_t i = 0; i < s->npoints && !*stop_sig; i++) {
			char rel[256], dir[4096];
			char **cmd = sweep_substitute(o->cmd, s->points[i].text);
			bool ok;

			if (!cmd) {
				cli_msg("sweep: out of memory");
				return false;
			}
			prs_sweep_run_dir(s, i, k, rel, sizeof(rel));
			ok = (size_t)snprintf(dir, sizeof(dir), "%s/%s", outdir, rel) < sizeof(dir);
			if (!ok)
				cli_msg("sweep: output folder '%s': path too long", outdir);
			ok = ok && sweep_run_once(o->rate_arg, o->subprocesses, cmd, dir, &s->points[i].runs[k], old, stop_sig);
			sweep_free_argv(cmd);
			if (!ok)
				return false;
			s->runs_done++;
			say_run(s, i, k, outdir);
		}
	s->interrupted = *stop_sig != 0;
	return true;
}

typedef int (*writer_fn)(FILE *f, const struct prs_sweep *s);

static bool write_file(const char *outdir, const char *name, writer_fn fn, const struct prs_sweep *s)
{
	char path[4200];
	struct cli_atomic a;
	FILE *f;
	int rc;

	snprintf(path, sizeof(path), "%s/%s", outdir, name);
	f = cli_atomic_open(&a, path);
	if (!f)
		return false;
	rc = fn(f, s);
	if (rc == -ENOMEM)
		cli_msg("cannot write '%s': out of memory", path);
	return cli_atomic_close(&a, rc == 0) == 0 && rc == 0;
}

#define MAX_FAILED_LINES 10

/* The summary on the terminal; returns how many runs failed. */
static size_t say_summary(const struct prs_sweep *s)
{
	char line[256];
	size_t failed = 0, from = 0, to;

	for (int m = 0; m < PRS_SWEEP_METRICS; m++)
		cli_msg("%s", prs_fit_text(&s->fit[m], m == PRS_SWEEP_WALL ? "wall" : "CPU", s->dim, line,
					   sizeof(line)));
	if (!s->any_verdict)
		cli_msg("verdict: not available (no phase1.json in the recordings)");
	while (prs_sweep_next_change(s, &from, &to)) {
		cli_msg("the verdict changes between %s=%s and %s=%s: %s -> %s", s->dim,
			s->points[from].text, s->dim, s->points[to].text, s->points[from].verdict,
			s->points[to].verdict);
		from = to;
	}
	for (size_t i = 0; i < s->npoints; i++)
		for (size_t k = 0; k < s->repeat; k++) {
			const struct prs_sweep_run *r = &s->points[i].runs[k];

			if (!r->done || prs_sweep_run_ok(r))
				continue;
			if (++failed <= MAX_FAILED_LINES)
				cli_msg("failed: %s=%s run %zu: %s", s->dim, s->points[i].text, k + 1,
					r->problem);
		}
	if (failed > MAX_FAILED_LINES)
		cli_msg("... and %zu more failed runs (all in sweep.md)", failed - MAX_FAILED_LINES);
	if (prs_sweep_too_short(s) > 0)
		cli_msg("warning: the fastest run took %.3f s: start-up and timer noise weigh on runs under "
			"%g s, use larger values to measure the work", prs_sweep_too_short(s),
			PRS_SWEEP_SHORT_S);
	if (prs_sweep_busy(s))
		cli_msg("warning: the machine was busy (load average %.1f, then %.1f, on %u CPUs): wall "
			"times include waiting for a CPU; CPU times do not", s->load_start, s->load_end,
			s->cpus);
	if (s->interrupted)
		cli_msg("interrupted after %zu of %zu runs", s->runs_done, s->npoints * s->repeat);
	return failed;
}

static void default_outdir(char *buf, size_t size)
{
	time_t now = time(NULL);
	struct tm tm;
	char stamp[32];

	localtime_r(&now, &tm);
	strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &tm);
	snprintf(buf, size, "pyrsprof-sweep-%s", stamp);
}

/* --phase1 DIR: a recording with the dimension (checked before any run). */
static bool phase1_has_dim(const char *dir, const char *dim)
{
	struct prs_profile *p = cli_load_profile(dir);
	struct prs_phase_inputs in;
	bool found = false;

	if (!p)
		return false;
	prs_phase_inputs_from_meta(p, &in);
	for (size_t i = 0; i < in.ndims; i++)
		found |= strcmp(in.dims[i].name, dim) == 0;
	prs_profile_free(p);
	if (!found)
		cli_msg("--phase1 %s: that recording has no dimension '%s' (record it with `pyrsprof run "
			"--dim %s=TYPICAL[..MAX] ...`)", dir, dim, dim);
	return found;
}

/* --phase1 DIR: its reports written again with the growth of the sweep just written. */
static bool update_phase1(const char *dir, const char *outdir)
{
	struct cli_phase_opts po;
	struct prs_profile *p = cli_load_profile(dir);
	char sweep[4200];
	int rc;

	if (!p)
		return false;
	memset(&po, 0, sizeof(po));
	snprintf(sweep, sizeof(sweep), "%s/sweep.json", outdir);
	po.sweeps[po.nsweeps++] = sweep;
	rc = cli_write_reports(p, dir, false, false, &po);
	prs_profile_free(p);
	if (rc == 0)
		cli_msg("wrote %s/{phase1.md,phase1.json,phase4.md,phase4.json} with the growth along the "
			"sweep's dimension", dir);
	return rc == 0;
}

/* Parses everything and sets up s; returns -1 to go on, else an exit code. */
static int prepare(int argc, char **argv, struct sweep_opts *o, struct prs_sweep *s)
{
	double values[PRS_SWEEP_MAX_VALUES];
	char dim[PRS_SWEEP_NAME_MAX + 1], **first;
	size_t n;
	bool ok;
	int rc = parse_opts(argc, argv, o);

	if (rc >= 0)
		return rc;
	if (!sweep_parse_dim(o->dim_arg, dim, values, &n) || !sweep_check_placeholders(o->cmd, dim))
		return EXIT_USAGE;
	if (o->phase1 && !phase1_has_dim(o->phase1, dim))
		return EXIT_USAGE;
	if (prs_sweep_init(s, n, (size_t)o->repeat) != 0) {
		cli_msg("sweep: out of memory");
		return EXIT_FAIL;
	}
	snprintf(s->dim, sizeof(s->dim), "%s", dim);
	s->argv = (const char *const *)o->cmd;
	s->rate_hz = o->rate_hz;
	for (size_t i = 0; i < n; i++) {
		s->points[i].value = values[i];
		sweep_value_text(values[i], s->points[i].text, sizeof(s->points[i].text));
	}
	first = sweep_substitute(o->cmd, s->points[0].text);
	ok = first && sweep_check_command(first[0]);
	sweep_free_argv(first);
	return ok ? -1 : EXIT_NOCMD;
}

int cmd_sweep(int argc, char **argv)
{
	struct sweep_opts o;
	struct prs_sweep s;
	char outdir[4096];
	sigset_t set, old;
	int rc, stop_sig = 0;
	long ncpu;
	size_t failed;
	bool created, files_ok;

	memset(&s, 0, sizeof(s));
	rc = prepare(argc, argv, &o, &s);
	if (rc >= 0)
		goto out;
	if (o.outdir)
		snprintf(outdir, sizeof(outdir), "%s", o.outdir);
	else
		default_outdir(outdir, sizeof(outdir));
	rc = EXIT_FAIL;
	if (cli_make_dir(outdir, &created) != 0)
		goto out;
	sweep_sigset(&set);
	sigprocmask(SIG_BLOCK, &set, &old);
	ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	s.cpus = ncpu > 0 ? (unsigned)ncpu : 0;
	if (getloadavg(&s.load_start, 1) != 1)
		s.load_start = 0;
	if (!run_all(&s, &o, outdir, &old, &stop_sig)) {
		sigprocmask(SIG_SETMASK, &old, NULL);
		goto out;
	}
	sigprocmask(SIG_SETMASK, &old, NULL);
	if (getloadavg(&s.load_end, 1) != 1)
		s.load_end = 0;
	prs_sweep_summarize(&s);
	failed = say_summary(&s);
	files_ok = write_file(outdir, "sweep.md", prs_sweep_write_md, &s) &&
		   write_file(outdir, "sweep.json", prs_sweep_write_json, &s) &&
		   write_file(outdir, "sweep.svg", prs_sweep_write_svg, &s);
	if (files_ok)
		cli_msg("wrote %s/{sweep.md,sweep.json,sweep.svg} and a recording per run", outdir);
	if (files_ok && !stop_sig && o.phase1)
		files_ok = update_phase1(o.phase1, outdir);
	rc = stop_sig ? 128 + stop_sig : !files_ok || failed ? EXIT_FAIL : EXIT_OK;
out:
	prs_sweep_release(&s);
	return rc;
}
