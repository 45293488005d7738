/* SPDX-License-Identifier: MIT */
/*
 * `pyrsprof top PID` and `pyrsprof top -- CMD`: samples like run/attach, into a profile kept in
 * memory (nothing is written), and once a second, from the sampler's progress callback, names the
 * new frames, sums the new samples into the table (top_table.c) and redraws it. On a terminal:
 * the alternate screen, redrawn in place, and keys (1-4 sort, L lines, R reset, ? help, q quit);
 * otherwise one table per second on standard output. Quitting stops sampling and detaches: an
 * attached process runs on; a launched program runs on too, and top waits for it as run does.
 */
#include "cli/top.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/symbols.h"
#include "pyrsprof/sampler.h"
#include "pyrsprof/task.h"
#include "util/banned.h"

#define HEADER_LINES 4
#define PLAIN_ROWS 40

struct top_opts {
	double rate_hz, duration_s;
	enum prs_source source;
	struct cli_top_filter filter;
	bool lines;
	struct cli_symopts sym;
};

struct top {
	struct top_opts o;
	struct prs_profile *p;
	struct prs_sampler *s;
	struct prs_symbolizer *symbolizer;
	struct cli_top_table table;
	struct cli_top_view view;
	char what[256];       /* "python split.py [1234]" */
	bool tty, keys, help;
	struct termios saved; /* the terminal's settings before (keys) */
	double elapsed_s;
	size_t threads;
	uint64_t refreshes;
};

static const char usage[] =
	"usage: pyrsprof top [options] PID\n"
	"       pyrsprof top [options] -- CMD ARGS...\n"
	"  A live view of what a process runs, refreshed each second: %Own and %Total (share of the\n"
	"  samples of the last second where a function is the innermost, or anywhere on the stack),\n"
	"  OwnTime and TotalTime (since the start, or R), per function (or per line: L). Nothing is\n"
	"  written. Keys: 1-4 sort by a column (again: reverse), L lines/functions, R reset, ? help,\n"
	"  q quit. Quitting (q, Ctrl-C) stops sampling and detaches: PID runs on. A launched CMD runs\n"
	"  on too (as with run: Ctrl-C also reaches CMD) and top waits for it, exiting with its status.\n"
	"  Not on a terminal: one table per second on standard output.\n"
	"  -r, --rate HZ        samples per second per thread (default 100)\n"
	"  -d, --duration SEC   stop after SEC seconds\n"
	"      --mode MODE      ptrace (default: native + Python frames), vm (Python frames only,\n"
	"                       read without stopping the program), or for -- CMD: preload (an\n"
	"                       LD_PRELOAD agent samples from inside) and auto (ptrace, or\n"
	"                       preload where ptrace is refused)\n"
	"      --pid PID        only the samples of this process (of the launched tree)\n"
	"      --tid TID        only the samples of this thread\n"
	"      --idle           also the samples of threads that were not running\n"
	"      --gil            only the samples of threads holding the Python GIL\n"
	"      --native         native frames too (by default a Python stack shows its Python frames)\n"
	"      --lines          start with a row per line\n"
	CLI_DEBUG_DIR_HELP;

/* ---- options ---- */

static bool parse_id(const char *opt, const char *arg, int32_t *out)
{
	pid_t v;

	if (!cli_parse_pid(arg, &v)) {
		cli_msg("%s: give a process or thread id", opt);
		return false;
	}
	*out = (int32_t)v;
	return true;
}

/* Parses the options. Returns -1 to go on, else an exit code. */
static int parse_opts(int argc, char **argv, struct top_opts *o)
{
	enum { O_MODE = 1000, O_PID, O_TID, O_IDLE, O_GIL, O_NATIVE, O_LINES, O_DEBUG_DIR };
	const char *mode = NULL;
	bool launch;
	static const struct option longopts[] = {
		{ "rate", required_argument, NULL, 'r' },     { "duration", required_argument, NULL, 'd' },
		{ "mode", required_argument, NULL, O_MODE },  { "pid", required_argument, NULL, O_PID },
		{ "tid", required_argument, NULL, O_TID },    { "idle", no_argument, NULL, O_IDLE },
		{ "gil", no_argument, NULL, O_GIL },          { "native", no_argument, NULL, O_NATIVE },
		{ "lines", no_argument, NULL, O_LINES },      { "debug-dir", required_argument, NULL, O_DEBUG_DIR },
		{ "help", no_argument, NULL, 'h' },           { NULL, 0, NULL, 0 },
	};
	int c;

	memset(o, 0, sizeof(*o));
	o->rate_hz = 100;
	optind = 1;
	while ((c = cli_getopt(argc, argv, "+r:d:h", longopts, "top")) != -1) {
		switch (c) {
		case 'r':
			if (!cli_parse_rate(optarg, &o->rate_hz))
				return EXIT_USAGE;
			break;
		case 'd':
			if (!cli_parse_duration(optarg, &o->duration_s))
				return EXIT_USAGE;
			break;
		case O_MODE:
			mode = optarg; /* judged once it is known whether top launches CMD */
			break;
		case O_PID:
			if (!parse_id("--pid", optarg, &o->filter.pid))
				return EXIT_USAGE;
			break;
		case O_TID:
			if (!parse_id("--tid", optarg, &o->filter.tid))
				return EXIT_USAGE;
			break;
		case O_IDLE:
			o->filter.idle = true;
			break;
		case O_GIL:
			o->filter.gil = true;
			break;
		case O_NATIVE:
			o->filter.native = true;
			break;
		case O_LINES:
			o->lines = true;
			break;
		case O_DEBUG_DIR:
			if (!cli_add_debug_dir(&o->sym, optarg))
				return EXIT_USAGE;
			break;
		case 'h':
			fputs(usage, stdout);
			return EXIT_OK;
		default:
			return EXIT_USAGE;
		}
	}
	launch = optind > 1 && strcmp(argv[optind - 1], "--") == 0;
	if (mode && !cli_parse_mode(mode, launch, &o->source))
		return EXIT_USAGE;
	return -1;
}

/* ---- the terminal ---- */

/* Rows and columns of the terminal on standard output (24 x 80 when it does not say). */
static void term_size(int *rows, int *cols)
{
	struct winsize ws;

	*rows = 24;
	*cols = 80;
	if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0 && ws.ws_col > 0) {
		*rows = ws.ws_row;
		*cols = ws.ws_col;
	}
}

/* The alternate screen, the cursor hidden; keys read one by one without echo (Ctrl-C still
 * signals, as in run). */
static void term_enter(struct top *t)
{
	struct termios raw;

	if (t->keys && tcgetattr(STDIN_FILENO, &t->saved) == 0) {
		raw = t->saved;
		raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
		raw.c_cc[VMIN] = 0;
		raw.c_cc[VTIME] = 0;
		if (tcsetattr(STDIN_FILENO, TCSANOW, &raw) != 0)
			t->keys = false;
	} else {
		t->keys = false;
	}
	fputs("\033[?1049h\033[?25l\033[H\033[2J", stdout);
	fflush(stdout);
}

/* The screen and the settings as they were. Every way out of top comes through here: the
 * signals that end it are taken by the sampler's loop, which then returns. */
static void term_leave(struct top *t)
{
	fputs("\033[?25h\033[?1049l", stdout);
	fflush(stdout);
	if (t->keys)
		tcsetattr(STDIN_FILENO, TCSANOW, &t->saved);
}

static const char help_text[] =
	"  Keys: 1 %Own  2 %Total  3 OwnTime  4 TotalTime  (sort by that column; again: reverse)\n"
	"        L  a row per line / per function     R  reset the times\n"
	"        ?  this help                         q  quit (Ctrl-C too): detach, the program runs on\n";

/* Acts on the keys typed since the last refresh. */
static void read_keys(struct top *t)
{
	char buf[64];
	ssize_t n;

	if (!t->keys)
		return;
	while ((n = read(STDIN_FILENO, buf, sizeof(buf))) > 0) {
		for (ssize_t i = 0; i < n; i++) {
			char k = buf[i];

			if (k >= '1' && k <= '4') {
				enum cli_top_sort sort = (enum cli_top_sort)(k - '1');

				t->view.reverse = sort == t->view.sort ? !t->view.reverse : false;
				t->view.sort = sort;
			} else if (k == 'l' || k == 'L') {
				t->view.lines = !t->view.lines;
			} else if (k == 'r' || k == 'R') {
				cli_top_table_reset(&t->table);
			} else if (k == '?') {
				t->help = !t->help;
			} else if ((k == 'q' || k == 'Q') && t->s) {
				prs_sampler_stop(t->s);
			}
		}
	}
}

/* ---- the table ---- */

static void write_header(const struct top *t, FILE *f, const char *eol)
{
	const struct cli_top_table *tb = &t->table;
	double now = tb->now ? (double)tb->now : 1;

	fprintf(f, "pyrsprof top: %s · %.0f s · %g Hz%s · %zu thread%s%s", t->what, t->elapsed_s,
		t->o.rate_hz, t->o.source == PRS_SOURCE_VM ? " (vm)" : t->o.source == PRS_SOURCE_PRELOAD ? " (preload)" : "",
		t->threads,
		t->threads == 1 ? "" : "s", eol);
	fprintf(f, "Samples %llu (last second %llu) · GIL held %.0f%%, waited for %.0f%%", (unsigned long long)tb->total,
		(unsigned long long)tb->now, 100.0 * (double)tb->now_gil / now,
		100.0 * (double)tb->now_gil_wait / now);
	if (t->o.filter.idle)
		fprintf(f, " · active %.0f%%", 100.0 * (double)tb->now_active / now);
	if (t->o.filter.pid || t->o.filter.tid || t->o.filter.gil)
		fprintf(f, " · only%s%.0d%s%.0d%s", t->o.filter.pid ? " pid " : "", t->o.filter.pid,
			t->o.filter.tid ? " tid " : "", t->o.filter.tid, t->o.filter.gil ? " holding the GIL" : "");
	fprintf(f, "%s%s%s", eol, t->tty ? "Press q to quit, ? for help" : "", eol);
}

static void draw(struct top *t)
{
	int rows, cols;

	if (!t->tty) {
		t->view.rows = PLAIN_ROWS;
		t->view.width = 0;
		t->view.eol = "\n";
		write_header(t, stdout, "\n");
		cli_top_table_write(&t->table, t->p, &t->view, stdout);
		fputs("\n", stdout);
		fflush(stdout);
		return;
	}
	term_size(&rows, &cols);
	t->view.eol = "\033[K\n";
	t->view.width = cols;
	t->view.rows = rows - HEADER_LINES - 1 - (t->help ? 3 : 0);
	if (t->view.rows < 1)
		t->view.rows = 1;
	fputs("\033[H", stdout);
	write_header(t, stdout, "\033[K\n");
	if (t->help)
		for (const char *l = help_text; *l;) {
			const char *e = strchr(l, '\n');

			fwrite(l, 1, (size_t)(e - l), stdout);
			fputs("\033[K\n", stdout);
			l = e + 1;
		}
	cli_top_table_write(&t->table, t->p, &t->view, stdout);
	fputs("\033[J", stdout);
	fflush(stdout);
}

/* Names the new frames, sums the new samples, draws. */
static void refresh(struct top *t)
{
	cli_symbolize_with(t->symbolizer, t->p, NULL);
	if (cli_top_table_add(&t->table, t->p) != 0)
		cli_msg("top: out of memory; the table misses samples");
	draw(t);
	t->refreshes++;
}

/* The sampler's once-a-second callback. */
static void tick(void *arg, double elapsed_s, uint64_t samples, size_t threads)
{
	struct top *t = arg;

	(void)samples;
	t->elapsed_s = elapsed_s;
	t->threads = threads;
	read_keys(t);
	refresh(t);
}

/* ---- the command ---- */

/* Launches CMD or attaches to PID (argv[optind]). Returns 0, or an exit code after printing why. */
static int start(struct top *t, int argc, char **argv, const struct prs_sampler_opts *so)
{
	struct prs_err err = { 0 };
	bool launch = optind > 1 && strcmp(argv[optind - 1], "--") == 0;
	char comm[64], cmdline[200];
	pid_t pid;
	int rc;

	if (optind >= argc) {
		cli_msg("top: give a PID or -- CMD (usage: pyrsprof top [options] PID | -- CMD ARGS...)");
		return EXIT_USAGE;
	}
	if (launch) {
		rc = prs_sampler_launch(argv + optind, so, NULL, &t->s, &err);
		if (rc) {
			cli_err(&err, "top");
			return rc == -ENOENT || rc == -EACCES || rc == -ENOEXEC || rc == -ENOTDIR ? EXIT_NOCMD
												  : EXIT_FAIL;
		}
		for (int i = optind, len = 0; i < argc && len < (int)sizeof(cmdline) - 1; i++)
			len += snprintf(cmdline + len, sizeof(cmdline) - (size_t)len, "%s%s", i > optind ? " " : "",
					argv[i]);
	} else {
		if (optind + 1 < argc) {
			cli_msg("top: unexpected argument '%s' (a command goes after --)", argv[optind + 1]);
			return EXIT_USAGE;
		}
		rc = cli_live_pid(argv[optind], &pid);
		if (rc != EXIT_OK)
			return rc;
		if (prs_sampler_attach(pid, so, NULL, &t->s, &err) != 0) {
			cli_err(&err, "top");
			return EXIT_FAIL;
		}
		if (prs_proc_cmdline(pid, cmdline, sizeof(cmdline)) != 0 || !cmdline[0])
			snprintf(cmdline, sizeof(cmdline), "%s",
				 prs_task_comm(pid, pid, comm, sizeof(comm)) == 0 ? comm : "?");
	}
	pid = prs_sampler_pid(t->s);
	t->table.filter.root_pid = (int32_t)pid;
	for (char *c = cmdline; *c; c++)
		if ((unsigned char)*c < 0x20)
			*c = '?';
	snprintf(t->what, sizeof(t->what), "%s [%d]", cmdline, (int)pid);
	return 0;
}

int cmd_top(int argc, char **argv)
{
	struct prs_sampler_opts so;
	struct prs_err err = { 0 };
	struct top t;
	sigset_t set, old;
	int rc, code;

	memset(&t, 0, sizeof(t));
	if ((rc = parse_opts(argc, argv, &t.o)) >= 0)
		return rc;
	t.p = prs_profile_new();
	if (!t.p) {
		cli_msg("out of memory");
		return EXIT_FAIL;
	}
	cli_top_table_init(&t.table, &t.o.filter);
	t.view = (struct cli_top_view){ .sort = TOP_SORT_OWN_TIME, .lines = t.o.lines, .rate_hz = t.o.rate_hz };
	memset(&so, 0, sizeof(so));
	so.rate_hz = t.o.rate_hz;
	so.duration_s = t.o.duration_s;
	so.source = t.o.source;
	so.native_all = t.o.filter.native;
	so.profile = t.p;
	so.quiet = true;
	so.progress = tick;
	so.progress_arg = &t;
	cli_py_opts_from_env(&so.py);
	cli_agent_opts_from_env(&so);
	prs_sampler_sigset(&set);
	sigprocmask(SIG_BLOCK, &set, &old);
	if ((rc = start(&t, argc, argv, &so)) != 0)
		goto out;
	t.symbolizer = cli_symbolizer_new(&t.o.sym);
	t.tty = isatty(STDOUT_FILENO);
	t.keys = t.tty && isatty(STDIN_FILENO);
	if (t.tty)
		term_enter(&t);
	prs_sampler_run(t.s, &err);
	if (t.tty)
		term_leave(&t);
	/* the last table, on the screen left behind: every sample, with what came in after the
	 * last refresh */
	t.tty = false;
	t.view.cumulative = true;
	printf("the whole run:\n");
	refresh(&t);
	if (!prs_sampler_target_exited(t.s))
		cli_msg("sampling stopped; %s runs on%s", t.what,
			optind > 1 && strcmp(argv[optind - 1], "--") == 0 ? ": waiting for it to exit" : "");
	code = prs_sampler_wait_child(t.s);
	rc = code < 0 ? EXIT_FAIL : code;
out:
	prs_sampler_free(t.s);
	prs_symbolizer_free(t.symbolizer);
	cli_top_table_release(&t.table);
	prs_profile_free(t.p);
	sigprocmask(SIG_SETMASK, &old, NULL);
	return rc;
}
