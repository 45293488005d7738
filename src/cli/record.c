/* SPDX-License-Identifier: MIT */
/*
 * `pyrsprof run` and `pyrsprof attach`: record a profile into a folder (profile.pyrs, cpu.svg,
 * wall.svg, stats.json), print a summary, and for `run` exit with the program's own status.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/collect.h"
#include "cli/outputs.h"
#include "cli/scaling.h"
#include "cli/snapshot.h"
#include "cli/symbols.h"
#include "pyrsprof/profile.h"
#include "pyrsprof/sampler.h"
#include "pyrsprof/symbol.h"
#include "pyrsprof/task.h"
#include "util/banned.h"

struct rec_opts {
	double rate_hz, duration_s;
	const char *outdir;
	size_t stack_bytes;
	bool print_stats;
	bool native_all;
	struct cli_graph_choice graphs; /* --merge-processes, --stacks: for the graphs only */
	bool force; /* --force: replace the recording already in the output folder */
	bool no_kernel_stacks;
	double snapshot_every_s; /* --snapshot-every; 0: snapshots on SIGUSR1 only */
	bool subprocesses;
	enum prs_source source;
	struct cli_symopts sym;
	struct cli_phase_opts phase; /* --target, --dim, --no-classify */
	struct cli_scaling scaling;  /* --scaling (run only; n = 0: none) */
};

static const char run_usage[] =
	"usage: pyrsprof run [-r HZ] [-d SEC] [-o DIR] [--stats] -- CMD ARGS...\n"
	"  Launches CMD and samples every thread until it exits (or -d elapses, then CMD runs on).\n"
	"  -r, --rate HZ        samples per second per thread (default 100)\n"
	"  -d, --duration SEC   stop sampling after SEC seconds\n"
	"  -o, --output DIR     output folder (default ./pyrsprof-<prog>-<time>/)\n"
	"      --force          replace the recording already in DIR\n"
	"      --stack-bytes N  stack bytes copied per sample (default 65536)\n"
	"      --stats          print the sampler's own costs\n"
	"      --mode MODE      auto (default: ptrace, or preload where ptrace is refused),\n"
	"                       ptrace (native + Python frames, every thread at every tick),\n"
	"                       preload (an LD_PRELOAD agent samples running threads from\n"
	"                       inside on their CPU-time timers, sleeping ones are read from\n"
	"                       outside: native + Python frames), or vm\n"
	"                       (Python frames only, read without stopping the program)\n"
	"      --native-all     keep the interpreter's own native frames in Python stacks\n"
	"      --subprocesses   follow CMD's child processes too (fork, exec), each one sampled;\n"
	"                       sampling goes on until the last of them exits\n"
	"      --merge-processes  graphs with a root per command, not per process\n"
	CLI_STACKS_HELP
	"      --no-kernel-stacks  no kernel frames under the user stacks (they need root,\n"
	"                       CAP_PERFMON or kernel.perf_event_paranoid <= 1)\n"
	CLI_DEBUG_DIR_HELP
	"      --target EXPR    the Phase-0 target, e.g. 'wall<2s' (phase1.md says if it is met)\n"
	"      --dim N=T[..MAX] an input dimension, typical value and max (repeatable)\n"
	"      --no-classify    skip the classifier's collection (counters, /proc, taskstats)\n"
	"      --wss            measure the working set (clear_refs, 200 ms windows at 1 Hz; it\n"
	"                       costs the program a page-table walk each): a floor on memory\n"
	"                       traffic for the CPU-bound verdict's evidence\n"
	"      --scaling VAR=V1,V2  after the recording, run CMD again (unprofiled, output\n"
	"                       discarded) with VAR=V for each value, e.g. OMP_NUM_THREADS=1,2:\n"
	"                       the speedup against the CPU taken, in the verdict's evidence\n"
	CLI_SNAPSHOT_HELP
	"  CMD's input, output, signals and exit status pass through; Ctrl-C reaches CMD, a second\n"
	"  Ctrl-C stops sampling.\n"
	"  PYRSPROF_READ_IDLE=1 in the environment: stop and read every thread at every tick, also\n"
	"  one asleep since its last sample (by default its last sample is recorded again).\n";

static const char attach_usage[] =
	"usage: pyrsprof attach PID [-r HZ] [-d SEC] [-o DIR] [--stats]\n"
	"  Samples every thread of a live process until Ctrl-C, -d, or its exit; then detaches and\n"
	"  leaves it running.\n"
	"  -r, --rate HZ        samples per second per thread (default 100)\n"
	"  -d, --duration SEC   stop after SEC seconds\n"
	"  -o, --output DIR     output folder (default ./pyrsprof-<prog>-<time>/)\n"
	"      --force          replace the recording already in DIR\n"
	"      --stack-bytes N  stack bytes copied per sample (default 65536)\n"
	"      --stats          print the sampler's own costs\n"
	"      --mode MODE      ptrace (default: native + Python frames) or vm (Python frames\n"
	"                       only, read without stopping the program: lowest overhead)\n"
	"      --native-all     keep the interpreter's own native frames in Python stacks\n"
	"      --subprocesses   also every process below PID, and those they start, until the\n"
	"                       last of them exits\n"
	"      --merge-processes  graphs with a root per command, not per process\n"
	CLI_STACKS_HELP
	"      --no-kernel-stacks  no kernel frames under the user stacks (they need root,\n"
	"                       CAP_PERFMON or kernel.perf_event_paranoid <= 1)\n"
	CLI_DEBUG_DIR_HELP
	"      --target EXPR    the Phase-0 target, e.g. 'wall<2s' (phase1.md says if it is met)\n"
	"      --dim N=T[..MAX] an input dimension, typical value and max (repeatable)\n"
	"      --no-classify    skip the classifier's collection (counters, /proc, taskstats)\n"
	"      --wss            measure the working set (clear_refs, 200 ms windows at 1 Hz; it\n"
	"                       costs the program a page-table walk each): a floor on memory\n"
	"                       traffic for the CPU-bound verdict's evidence\n"
	CLI_SNAPSHOT_HELP
	"  PYRSPROF_READ_IDLE=1 in the environment: stop and read every thread at every tick, also\n"
	"  one asleep since its last sample (by default its last sample is recorded again).\n";

/* Parses the options shared by run and attach. Returns -1 to continue, else an exit code. */
static int parse_opts(int argc, char **argv, bool run, struct rec_opts *o)
{
	static const struct option longopts[] = {
		{ "rate", required_argument, NULL, 'r' },
		{ "duration", required_argument, NULL, 'd' },
		{ "output", required_argument, NULL, 'o' },
		{ "stack-bytes", required_argument, NULL, 'S' },
		{ "stats", no_argument, NULL, 's' },
		{ "mode", required_argument, NULL, 'M' },
		{ "native-all", no_argument, NULL, 'N' },
		{ "debug-dir", required_argument, NULL, 'G' },
		{ "target", required_argument, NULL, CLI_OPT_TARGET },
		{ "dim", required_argument, NULL, CLI_OPT_DIM },
		{ "no-classify", no_argument, NULL, CLI_OPT_NO_CLASSIFY },
		{ "wss", no_argument, NULL, CLI_OPT_WSS },
		{ "scaling", required_argument, NULL, CLI_OPT_SCALING },
		{ "merge-processes", no_argument, NULL, 'P' },
		{ "force", no_argument, NULL, 'F' },
		{ "no-kernel-stacks", no_argument, NULL, 'K' },
		{ "snapshot-every", required_argument, NULL, CLI_OPT_SNAPSHOT_EVERY },
		{ "subprocesses", no_argument, NULL, 'C' },
		{ "stacks", required_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c, rc;
	double v;

	o->rate_hz = 100;
	o->duration_s = 0;
	o->outdir = NULL;
	o->stack_bytes = 64 * 1024;
	o->print_stats = false;
	o->native_all = false;
	o->graphs = (struct cli_graph_choice){ 0 };
	o->force = false;
	o->no_kernel_stacks = false;
	o->snapshot_every_s = 0;
	o->source = run ? PRS_SOURCE_AUTO : PRS_SOURCE_PTRACE;
	o->subprocesses = false;
	o->sym.ndirs = 0;
	memset(&o->phase, 0, sizeof(o->phase));
	optind = 1;
	while ((c = cli_getopt(argc, argv, run ? "+r:d:o:h" : "r:d:o:h", longopts, run ? "run" : "attach")) != -1) {
		switch (c) {
		case 'r':
			if (!cli_parse_rate(optarg, &o->rate_hz))
				return EXIT_USAGE;
			break;
		case 'd':
			if (!cli_parse_duration(optarg, &o->duration_s))
				return EXIT_USAGE;
			break;
		case 'o':
			o->outdir = optarg;
			break;
		case 'S':
			if (!cli_parse_number("--stack-bytes", optarg, 4096, 8 << 20, &v))
				return EXIT_USAGE;
			o->stack_bytes = (size_t)v;
			break;
		case 's':
			o->print_stats = true;
			break;
		case 'M':
			if (!cli_parse_mode(optarg, run, &o->source))
				return EXIT_USAGE;
			break;
		case 'N':
			o->native_all = true;
			break;
		case 'G':
			if (!cli_add_debug_dir(&o->sym, optarg))
				return EXIT_USAGE;
			break;
		case 'P':
			o->graphs.merge_processes = true;
			break;
		case 'V':
			if (!cli_parse_stacks(optarg, &o->graphs.python_stacks))
				return EXIT_USAGE;
			break;
		case 'F':
			o->force = true;
			break;
		case 'K':
			o->no_kernel_stacks = true;
			break;
		case CLI_OPT_SNAPSHOT_EVERY:
			if (!cli_parse_duration_opt("--snapshot-every", optarg, &o->snapshot_every_s))
				return EXIT_USAGE;
			if (o->snapshot_every_s < 1) {
				/* the sampler's callback that takes them runs once a second */
				cli_msg("--snapshot-every: at least 1 second");
				return EXIT_USAGE;
			}
			break;
		case 'C':
			o->subprocesses = true;
			break;
		case CLI_OPT_SCALING:
			if (!run) {
				cli_msg("--scaling runs the command again: it is an option of run");
				return EXIT_USAGE;
			}
			if (!cli_scaling_parse(optarg, &o->scaling))
				return EXIT_USAGE;
			break;
		case 'h':
			fputs(run ? run_usage : attach_usage, stdout);
			return EXIT_OK;
		case '?':
			return EXIT_USAGE;
		default:
			if ((rc = cli_phase_opt(c, optarg, &o->phase)) >= 0)
				return rc;
		}
	}
	if (!cli_folder_ok(o->outdir, run ? "run" : "attach"))
		return EXIT_USAGE;
	if (o->subprocesses && o->source == PRS_SOURCE_VM) {
		cli_msg("--subprocesses follows the processes with ptrace: it needs --mode ptrace (the "
			"default)");
		return EXIT_USAGE;
	}
	return -1;
}

/* "pyrsprof-<prog>-<YYYYmmdd-HHMMSS>" with prog reduced to safe characters. */
static void default_dir(const char *prog, char *buf, size_t size)
{
	char safe[64];
	const char *base = strrchr(prog, '/');
	size_t n = 0;
	time_t now = time(NULL);
	struct tm tm;
	char stamp[32];

	base = base ? base + 1 : prog;
	for (; *base && n < sizeof(safe) - 1; base++)
		if ((*base >= 'a' && *base <= 'z') || (*base >= 'A' && *base <= 'Z') ||
		    (*base >= '0' && *base <= '9') || *base == '.' || *base == '_' || *base == '-')
			safe[n++] = *base;
	safe[n] = '\0';
	if (n == 0)
		snprintf(safe, sizeof(safe), "prog");
	localtime_r(&now, &tm);
	strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &tm);
	snprintf(buf, size, "pyrsprof-%s-%s", safe, stamp);
}

static void add_meta_num(struct prs_profile *p, const char *key, double v)
{
	char buf[64];

	snprintf(buf, sizeof(buf), "%g", v);
	prs_profile_meta(p, key, buf);
}

/* The closing line: what was recorded, and which files were written whole (and which not). */
static void summary_line(const struct prs_sampler_stats *st, size_t nthreads, double rate_hz,
			 const char *dir, bool pyrs_ok, bool graphs_ok, bool reports_ok, const char *view)
{
	static const char *const names[3] = { "profile.pyrs", "cpu.svg,wall.svg",
					      "phase1.md,phase1.json,phase4.md,phase4.json" };
	const bool ok[3] = { pyrs_ok, graphs_ok, reports_ok };
	char good[256] = "", bad[256] = "", files[600] = "";

	for (int i = 0; i < 3; i++) {
		char *b = ok[i] ? good : bad;
		size_t len = strlen(b);

		snprintf(b + len, sizeof(good) - len, "%s%s", len ? "," : "", names[i]);
	}
	if (good[0])
		snprintf(files, sizeof(files), "wrote %s/{%s}", dir, good);
	if (bad[0])
		snprintf(files + strlen(files), sizeof(files) - strlen(files), "%scould not write %s/{%s}%s",
			 good[0] ? "; " : "", dir, bad, pyrs_ok ? "" : " (profile.pyrs is cut short)");
	cli_msg("%llu samples of %zu thread%s in %.1f s (%g Hz); %s%s%s%s", (unsigned long long)st->thread_samples,
		nthreads, nthreads == 1 ? "" : "s", st->duration_s, rate_hz, files, view[0] ? " (" : "", view,
		view[0] ? ")" : "");
}

/* The CPU time the running samples of p stand for, in seconds. */
static double sampled_cpu_s(const struct prs_profile *p, double rate_hz)
{
	uint64_t n = 0;

	for (size_t i = 0; i < p->nsamples; i++)
		if (p->samples[i].state == PRS_STATE_RUNNING)
			n += p->samples[i].weight;
	return (double)n / rate_hz;
}

/*
 * Without --subprocesses, the children the program waited for used CPU that no sample shows
 * (`run -- sh -c 'python3 work.py; ...'`): says how much, against what the samples show, and
 * suggests the flag when it is a good part of the whole.
 */
static void hint_children(const struct prs_sampler_stats *st, const struct prs_profile *p,
			  const struct rec_opts *o)
{
	double child_s = (double)st->children_cpu_ns / 1e9, sampled_s;

	if (o->subprocesses || child_s < 0.1)
		return;
	sampled_s = sampled_cpu_s(p, o->rate_hz);
	if (child_s < 0.25 * sampled_s)
		return;
	cli_msg("the program's child processes used %.1f s of CPU that was not sampled (the samples "
		"show %.1f s); add --subprocesses to follow them", child_s, sampled_s);
}

/* Says, whatever the options, when the ticks were missed or late, threads did not stop in time, or
 * the program was measurably slowed (prs_sampler_health), with the cause and the remedy. */
static void report_health(const struct prs_sampler_stats *st, const struct rec_opts *o,
			  const struct prs_profile *p)
{
	const char *used = prs_profile_meta_get(p, "source"); /* what --mode auto chose */
	enum prs_source source = used && strcmp(used, "preload") == 0 ? PRS_SOURCE_PRELOAD : o->source;
	char buf[2048], *line, *next;

	if (!prs_sampler_health(st, o->rate_hz, source, buf, sizeof(buf)))
		return;
	for (line = buf; line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		cli_msg("%s", line);
	}
}

/* --scaling: the re-runs, once the recorded run has ended (never beside it). */
static void scaling_runs(const struct rec_opts *o, char *const cmd[], const sigset_t *old,
			 const struct prs_sampler *s, struct prs_profile *p)
{
	if (!o->scaling.n)
		return;
	if (!prs_sampler_target_exited(s)) {
		cli_msg("--scaling: skipped: %s runs on after sampling stopped", cmd[0]);
		prs_profile_meta(p, "scaling_skipped", "the program ran on after sampling stopped");
		return;
	}
	cli_scaling_run(&o->scaling, cmd, old, p);
}

/* Symbolizes, closes the profile, renders the graphs and the stats. Returns an exit code.
 * cmd, old: the command and the signal mask --scaling's re-runs get (run), else NULL. */
static int finish(struct prs_recorder *rec, struct prs_sampler *s, const char *dir,
		  const struct rec_opts *o, struct cli_collect *col, char *const *cmd,
		  const sigset_t *old)
{
	struct prs_sampler_stats st;
	struct prs_symbolize_stats sym;
	struct prs_profile *p = prs_recorder_profile(rec), *done = NULL;
	struct prs_err err = { 0 };
	const char *mode;
	int rc = EXIT_OK;
	struct cli_written w;
	bool pyrs_ok = true;
	size_t nthreads;

	prs_sampler_get_stats(s, &st);
	add_meta_num(p, "duration_s", st.duration_s);
	add_meta_num(p, "ticks", (double)st.ticks);
	add_meta_num(p, "missed_ticks", (double)st.missed_ticks);
	add_meta_num(p, "read_errors", (double)st.read_errors);
	cli_collect_waits(col, p, s);
	/* a launched target that exited was reaped by us: its rusage is known */
	cli_collect_end(col, p, prs_sampler_target_exited(s) && (mode = prs_profile_meta_get(p, "mode")) &&
				     strcmp(mode, "run") == 0);
	if (cmd) /* after the children's rusage was taken: the re-runs are children too */
		scaling_runs(o, cmd, old, s, p);
	cli_symbolize(p, &o->sym, true, &sym);
	nthreads = (size_t)st.threads_seen;
	if (prs_recorder_close(rec, &done, &err) < 0) {
		/* profile.pyrs stops at the failed write (its reader will say so); the samples are all
		 * in memory, and the graphs are drawn from them */
		cli_err(&err, "write profile");
		cli_msg("%s/profile.pyrs is cut short; the flame graphs hold all %llu samples", dir,
			done ? (unsigned long long)done->sample_count : 0);
		rc = EXIT_FAIL;
		pyrs_ok = false;
		if (!done)
			return rc;
		done->complete = true;
	}
	if (o->print_stats)
		fprintf(stderr,
			"pyrsprof: per thread-sample: cost median %.1f us (p10 %.1f, p90 %.1f); stop %.1f us; "
			"unwind %.1f us; %llu missed ticks\n",
			st.sample_cost.median / 1000, st.sample_cost.p10 / 1000, st.sample_cost.p90 / 1000,
			st.stop.median / 1000, st.unwind.median / 1000, (unsigned long long)st.missed_ticks);
	cli_write_recording(done, dir, &st, o->rate_hz, &sym, o->graphs, true, &w);
	if (!w.graphs || !w.stats || !w.reports)
		rc = EXIT_FAIL;
	if (st.processes > 1)
		cli_msg("%llu processes sampled", (unsigned long long)st.processes);
	report_health(&st, o, done);
	summary_line(&st, nthreads, o->rate_hz, dir, pyrs_ok, w.graphs, w.reports,
		     cli_graph_choice_said(done, o->graphs));
	hint_children(&st, done, o);
	prs_profile_free(done);
	return rc;
}

/* What a recording writes into its folder. */
static const char *const recording_files[] = { "profile.pyrs", "cpu.svg",     "wall.svg",
						"stats.json",   "phase1.md",   "phase1.json",
						"phase4.md",    "phase4.json" };

/* True if dir holds any file of a recording. */
static bool holds_recording(const char *dir)
{
	char path[4096];

	for (size_t i = 0; i < sizeof(recording_files) / sizeof(recording_files[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, recording_files[i]);
		if (access(path, F_OK) == 0)
			return true;
	}
	snprintf(path, sizeof(path), "%s/snapshots", dir);
	return access(path, F_OK) == 0;
}

/*
 * --force replaces a recording only once the new one has begun: the old files are moved into
 * DIR/.pyrsprof-replaced (set_aside), then removed when the program was launched or attached
 * (drop_aside), or put back when it could not be (restore_aside): a mistyped command or a
 * refused attach leaves the old recording as it was.
 */
#define ASIDE ".pyrsprof-replaced"
#define NFILES (sizeof(recording_files) / sizeof(recording_files[0]))

/* Moves DIR/NAME to DIR/ASIDE/NAME (to_aside), or back. 0, or -errno (ENOENT: nothing there). */
static int move_file(const char *dir, const char *name, bool to_aside)
{
	char in_dir[4200], aside[4200];

	snprintf(in_dir, sizeof(in_dir), "%s/%s", dir, name);
	snprintf(aside, sizeof(aside), "%s/" ASIDE "/%s", dir, name);
	if (to_aside ? rename(in_dir, aside) : rename(aside, in_dir))
		return -errno;
	return 0;
}

/* Removes DIR/ASIDE and what it holds (the replaced recording, or a leftover of one). 0 or -errno. */
static int drop_aside(const char *dir)
{
	char aside[4096], path[4200];
	int rc;

	snprintf(aside, sizeof(aside), "%s/" ASIDE, dir);
	for (size_t i = 0; i < NFILES; i++) {
		snprintf(path, sizeof(path), "%s/%s", aside, recording_files[i]);
		if (unlink(path) != 0 && errno != ENOENT && errno != ENOTDIR)
			return -errno;
	}
	if ((rc = cli_snapshots_remove(aside)) != 0 && rc != -ENOENT && rc != -ENOTDIR)
		return rc;
	return rmdir(aside) == 0 || errno == ENOENT ? 0 : -errno;
}

/* Puts the files set aside back into DIR (the new recording's files are gone by then). */
static void restore_aside(const char *dir)
{
	for (size_t i = 0; i < NFILES; i++)
		move_file(dir, recording_files[i], false);
	move_file(dir, "snapshots", false);
	drop_aside(dir);
}

/* Moves DIR's recording into DIR/ASIDE. Returns 0 or an exit code after printing why. */
static int set_aside(const char *dir)
{
	char aside[4096];
	int rc;

	snprintf(aside, sizeof(aside), "%s/" ASIDE, dir);
	if ((rc = drop_aside(dir)) != 0 || (mkdir(aside, 0755) != 0 && (rc = -errno))) {
		cli_msg("--force: cannot set the old recording aside in '%s': %s", aside, strerror(-rc));
		return EXIT_FAIL;
	}
	for (size_t i = 0; i <= NFILES; i++) {
		const char *name = i < NFILES ? recording_files[i] : "snapshots";

		if ((rc = move_file(dir, name, true)) != 0 && rc != -ENOENT) {
			cli_msg("--force: cannot move '%s/%s' aside: %s", dir, name, strerror(-rc));
			restore_aside(dir);
			return EXIT_FAIL;
		}
	}
	return 0;
}

/*
 * Chooses the output folder: -o DIR, refused when it holds a recording unless --force (whose old
 * files are then set aside, *aside, so that the folder never mixes two recordings); else the
 * default name, made unique with -2, -3... when a recording of the same second exists. Returns 0
 * or an exit code.
 */
static int choose_dir(const struct rec_opts *o, const char *prog, char *dir, size_t dsize,
		      bool *aside)
{
	*aside = false;
	if (!o->outdir) {
		size_t len;

		default_dir(prog, dir, dsize);
		len = strlen(dir);
		for (int n = 2; holds_recording(dir) && n < 1000; n++)
			snprintf(dir + len, dsize - len, "-%d", n);
		return 0;
	}
	snprintf(dir, dsize, "%s", o->outdir);
	if (!holds_recording(dir))
		return 0;
	if (!o->force) {
		cli_msg("'%s' already holds a recording; give another -o DIR, or --force to replace it", dir);
		return EXIT_USAGE;
	}
	if (set_aside(dir) != 0)
		return EXIT_FAIL;
	*aside = true;
	return 0;
}

/* The folder open_recording chose: whether it created it, and whether --force set an old
 * recording aside in it. */
struct rec_dir {
	char path[4096];
	bool created, aside;
};

/* The program runs (launched or attached): the recording that --force replaces goes. */
static void begun_recording(const struct rec_dir *d)
{
	int rc;

	if (d->aside && (rc = drop_aside(d->path)) != 0)
		cli_msg("--force: cannot remove the replaced recording in '%s/" ASIDE "': %s", d->path,
			strerror(-rc));
}

/* The program could not be launched or attached: the new profile goes, the old recording (if
 * --force set one aside) comes back. */
static void discard_recording(struct prs_recorder *rec, const struct rec_dir *d)
{
	char path[4200];

	prs_recorder_close(rec, NULL, NULL);
	snprintf(path, sizeof(path), "%s/profile.pyrs", d->path);
	unlink(path);
	if (d->aside)
		restore_aside(d->path);
	if (d->created)
		rmdir(d->path);
}

/* Opens DIR/profile.pyrs in the folder it chooses (*d). Returns 0, or an exit code after printing
 * why. */
static int open_recording(const struct rec_opts *o, const char *prog, struct rec_dir *d,
			  struct prs_recorder **rec)
{
	char path[4200];
	struct prs_err err = { 0 };
	int rc;

	d->created = false;
	if ((rc = choose_dir(o, prog, d->path, sizeof(d->path), &d->aside)) != 0)
		return rc;
	if (cli_make_dir(d->path, &d->created) != 0) {
		if (d->aside)
			restore_aside(d->path);
		return EXIT_FAIL;
	}
	snprintf(path, sizeof(path), "%s/profile.pyrs", d->path);
	if (prs_recorder_open(path, rec, &err) != 0) {
		cli_err(&err, path);
		if (d->aside)
			restore_aside(d->path);
		if (d->created)
			rmdir(d->path);
		return EXIT_FAIL;
	}
	/* memory for the distinct samples, not for each: the end of the recording draws the graphs
	 * and the reports from sums (profile.pyrs keeps every sample) */
	if (prs_recorder_aggregate(*rec) != 0) {
		cli_msg("%s: out of memory", path);
		discard_recording(*rec, d);
		return EXIT_FAIL;
	}
	return 0;
}


static void sampler_opts(const struct rec_opts *o, struct prs_sampler_opts *so)
{
	memset(so, 0, sizeof(*so));
	so->rate_hz = o->rate_hz;
	so->duration_s = o->duration_s;
	so->stack_bytes = o->stack_bytes;
	so->source = o->source;
	so->native_all = o->native_all;
	/* vm mode cannot have them (no running samples to match) */
	so->kernel_stacks = !o->no_kernel_stacks && o->source != PRS_SOURCE_VM;
	so->subprocesses = o->subprocesses;
	cli_py_opts_from_env(&so->py);
	cli_agent_opts_from_env(so);
	/* PYRSPROF_READ_IDLE (any value): read every thread at every tick (see the usage) */
	so->read_idle = getenv("PYRSPROF_READ_IDLE") != NULL;
}

/* Meta kernel_stacks (on, off, or why not), and the reason on stderr when they were asked for
 * and are not permitted. */
static void report_kernel_stacks(const struct prs_sampler *s, struct prs_profile *p)
{
	char why[400];
	bool on = prs_sampler_kernel_stacks(s, why, sizeof(why));

	prs_profile_meta(p, "kernel_stacks", on ? "on" : why[0] ? why : "off");
	if (why[0])
		cli_msg("%s (--no-kernel-stacks silences this)", why);
}

/* Says which interpreter was profiled, or why Python frames are missing. */
static void report_python(const struct prs_sampler *s, const struct rec_opts *o)
{
	char info[256];
	bool on = prs_sampler_python(s, info, sizeof(info));

	if (on || info[0])
		cli_msg("%s%s", on ? "" : "python: ", info);
	else if (o->source == PRS_SOURCE_VM)
		cli_msg("--mode vm: no CPython interpreter was found in the program, so nothing was "
			"sampled (use the default --mode ptrace for native programs)");
}

/* Prints the sampler's notes not printed yet, each line prefixed like every message. */
static void cli_print_notes(const struct prs_sampler *s)
{
	static size_t printed;
	const char *notes = prs_sampler_notes(s);
	size_t len = strlen(notes);

	while (printed < len) {
		size_t n = strcspn(notes + printed, "\n");

		if (n)
			cli_msg("%.*s", (int)n, notes + printed);
		printed += n + 1;
	}
}

/* The live status line of a recording on a terminal, rewritten in place once a second. */
static void status_line(void *arg, double elapsed_s, uint64_t samples, size_t threads)
{
	(void)arg;
	fprintf(stderr, "\rpyrsprof: %.0f s, %llu samples, %zu thread%s  ", elapsed_s,
		(unsigned long long)samples, threads, threads == 1 ? "" : "s");
	fflush(stderr);
}

/* (Not for `run`: the program's own output shares the terminal.) */
static void end_status_line(void)
{
	if (isatty(STDERR_FILENO))
		fprintf(stderr, "\r\033[K");
}

static void block_signals(sigset_t *old)
{
	sigset_t set;

	prs_sampler_sigset(&set);
	sigprocmask(SIG_BLOCK, &set, old);
}

static void set_common_meta(struct prs_profile *p, const struct rec_opts *o, const char *mode,
			    const char *command, pid_t pid)
{
	char buf[64];
	time_t now = time(NULL);
	struct tm tm;

	prs_profile_meta(p, "command", command);
	prs_profile_meta(p, "mode", mode);
	add_meta_num(p, "rate_hz", o->rate_hz);
	add_meta_num(p, "pid", pid);
	gmtime_r(&now, &tm);
	strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
	prs_profile_meta(p, "start_time", buf);
	prs_profile_meta(p, "pyrsprof_version", "0.1.0");
	cli_phase_meta(p, &o->phase);
}

int cmd_run(int argc, char **argv)
{
	struct rec_opts o;
	struct cli_snapshot snap;
	struct prs_sampler_opts so = { 0 };
	struct prs_sampler *s = NULL;
	struct prs_recorder *rec = NULL;
	struct cli_collect *col;
	struct prs_err err = { 0 };
	char command[4096];
	struct rec_dir dir;
	size_t clen = 0;
	sigset_t old;
	int rc, code;

	rc = parse_opts(argc, argv, true, &o);
	if (rc >= 0)
		return rc;
	if (optind >= argc) {
		cli_msg("run: no command given (usage: pyrsprof run [options] -- CMD ARGS...)");
		return EXIT_USAGE;
	}
	char **cmd = argv + optind;

	command[0] = '\0';
	for (int i = 0; cmd[i] && clen + 2 < sizeof(command); i++)
		clen += (size_t)snprintf(command + clen, sizeof(command) - clen, "%s%s", i ? " " : "",
					 cmd[i]);
	if (clen >= sizeof(command))
		clen = sizeof(command) - 1;
	rc = open_recording(&o, cmd[0], &dir, &rec);
	if (rc)
		return rc;
	sampler_opts(&o, &so);
	cli_snapshot_hook(&snap, &so, dir.path, &o.sym, o.rate_hz, o.graphs, o.snapshot_every_s);
	col = cli_collect_new(!o.phase.no_classify);
	cli_collect_wss(col, o.phase.wss);
	cli_collect_hook(col, &so);
	block_signals(&old);
	rc = prs_sampler_launch(cmd, &so, rec, &s, &err);
	if (rc) {
		cli_err(&err, "run");
		cli_collect_free(col);
		discard_recording(rec, &dir);
		return rc == -ENOENT || rc == -EACCES || rc == -ENOEXEC || rc == -ENOTDIR ? EXIT_NOCMD
											  : EXIT_FAIL;
	}
	begun_recording(&dir);
	cli_print_notes(s);
	set_common_meta(prs_recorder_profile(rec), &o, "run", command, prs_sampler_pid(s));
	report_kernel_stacks(s, prs_recorder_profile(rec));
	cli_collect_start(col, prs_sampler_pid(s), prs_recorder_profile(rec));
	cli_snapshot_start(&snap, s);
	prs_sampler_run(s, &err);
	cli_snapshot_end(&snap);
	report_python(s, &o);
	cli_print_notes(s);
	rc = finish(rec, s, dir.path, &o, col, cmd, &old);
	cli_collect_free(col);
	if (!prs_sampler_target_exited(s))
		cli_msg("sampling stopped; %s (pid %d) runs on: waiting for it to exit", cmd[0],
			(int)prs_sampler_pid(s));
	code = prs_sampler_wait_child(s);
	prs_sampler_free(s);
	sigprocmask(SIG_SETMASK, &old, NULL);
	if (code < 0)
		return rc ? rc : EXIT_FAIL;
	return code;
}

int cmd_attach(int argc, char **argv)
{
	struct rec_opts o;
	struct cli_snapshot snap;
	struct prs_sampler_opts so = { 0 };
	struct prs_sampler *s = NULL;
	struct prs_recorder *rec = NULL;
	struct prs_err err = { 0 };
	char comm[64], command[4096];
	struct rec_dir dir;
	struct cli_collect *col;
	sigset_t old;
	pid_t pid;
	int rc;

	rc = parse_opts(argc, argv, false, &o);
	if (rc >= 0)
		return rc;
	if (optind >= argc) {
		cli_msg("attach: no PID given (usage: pyrsprof attach PID [options])");
		return EXIT_USAGE;
	}
	if (optind + 1 < argc) {
		cli_msg("attach: unexpected argument '%s'", argv[optind + 1]);
		return EXIT_USAGE;
	}
	rc = cli_live_pid(argv[optind], &pid);
	if (rc != EXIT_OK)
		return rc;
	if (prs_task_comm(pid, pid, comm, sizeof(comm)) != 0)
		snprintf(comm, sizeof(comm), "pid%d", (int)pid);
	if (prs_proc_cmdline(pid, command, sizeof(command)) != 0 || !command[0])
		snprintf(command, sizeof(command), "%s", comm);
	rc = open_recording(&o, comm, &dir, &rec);
	if (rc)
		return rc;
	sampler_opts(&o, &so);
	if (isatty(STDERR_FILENO))
		so.progress = status_line;
	cli_snapshot_hook(&snap, &so, dir.path, &o.sym, o.rate_hz, o.graphs, o.snapshot_every_s);
	col = cli_collect_new(!o.phase.no_classify);
	cli_collect_wss(col, o.phase.wss);
	cli_collect_hook(col, &so);
	block_signals(&old);
	rc = prs_sampler_attach(pid, &so, rec, &s, &err);
	if (rc) {
		cli_err(&err, "attach");
		cli_collect_free(col);
		discard_recording(rec, &dir);
		sigprocmask(SIG_SETMASK, &old, NULL);
		return EXIT_FAIL;
	}
	begun_recording(&dir);
	set_common_meta(prs_recorder_profile(rec), &o, "attach", command, pid);
	report_kernel_stacks(s, prs_recorder_profile(rec));
	cli_collect_start(col, pid, prs_recorder_profile(rec));
	if (!isatty(STDERR_FILENO) || o.duration_s == 0)
		cli_msg("sampling pid %d (%s) at %g Hz; Ctrl-C to stop", (int)pid, comm, o.rate_hz);
	cli_snapshot_start(&snap, s);
	prs_sampler_run(s, &err);
	end_status_line();
	cli_snapshot_end(&snap);
	report_python(s, &o);
	rc = finish(rec, s, dir.path, &o, col, NULL, NULL);
	cli_collect_free(col);
	prs_sampler_free(s);
	sigprocmask(SIG_SETMASK, &old, NULL);
	return rc;
}
