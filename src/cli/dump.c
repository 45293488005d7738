/* SPDX-License-Identifier: MIT */
/*
 * `pyrsprof dump PID`: every thread's stack now, with its state, like `py-spy dump`; per process
 * when the profile holds several. The stacks are those of the wall view of the one-tick profile
 * (include/pyrsprof/view.h), printed innermost first, with the state in words instead of the
 * off-CPU leaf.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/render.h"
#include "cli/symbols.h"
#include "pyrsprof/profile.h"
#include "pyrsprof/python.h"
#include "pyrsprof/sampler.h"
#include "pyrsprof/symbol.h"
#include "pyrsprof/task.h"
#include "pyrsprof/util.h"
#include "pyrsprof/view.h"
#include "util/banned.h"

/* What the Python reader said about a thread at the moment of the dump. */
struct pyinfo {
	int32_t tid;
	bool holds_gil;
	uint32_t name; /* threading name (string id), 0 = none */
};

static const struct pyinfo *find_py(const struct pyinfo *v, int n, int32_t tid)
{
	for (int i = 0; i < n; i++)
		if (v[i].tid == tid)
			return &v[i];
	return NULL;
}

/*
 * Prints text from the target (names, files, its command line) with control characters shown as
 * \xNN, so a hostile name cannot move the cursor or recolor the user's terminal.
 */
static void put_text(const char *t)
{
	for (size_t k; *t; t += k ? k : 1) {
		k = cli_control_len(t);
		for (size_t i = 0; i < k; i++)
			printf("\\x%02x", (unsigned char)t[i]);
		if (!k)
			putchar(*t);
	}
}

static void print_state(const struct prs_sample *s)
{
	const char *sc = s->syscall >= 0 ? prs_syscall_name(s->syscall) : NULL;

	if (s->state != PRS_STATE_RUNNING && (s->flags & PRS_SAMPLE_GIL_WAIT)) {
		printf("waiting for the GIL");
		return;
	}
	switch (s->state) {
	case PRS_STATE_RUNNING:
		printf("running");
		break;
	case PRS_STATE_BLOCKED:
		if (sc)
			printf("blocked in %s", sc);
		else if (s->syscall >= 0)
			printf("blocked in syscall %d", s->syscall);
		else
			printf("blocked");
		break;
	case PRS_STATE_DISK:
		printf("uninterruptible (disk) wait%s%s", sc ? " in " : "", sc ? sc : "");
		break;
	case PRS_STATE_STOPPED:
		printf("stopped (job control)");
		break;
	case PRS_STATE_RUNQUEUE:
		printf("waiting for a CPU");
		break;
	default:
		printf("unknown state");
	}
}

static void print_frame(const struct prs_profile_view *v, uint32_t id)
{
	struct prs_view_frame f;
	char label[PRS_MAX_NAME + 64];

	prs_view_frame(v, id, &f, label, sizeof(label));
	printf("    ");
	put_text(prs_view_frame_label(v, id, label, sizeof(label)));
	if (f.file[0]) {
		printf(" (");
		put_text(f.file);
		if (f.line)
			printf(":%u", f.line);
		putchar(')');
	}
	putchar('\n');
}

/* Prints sample i's thread: its name, state and stack (innermost first). */
static void print_thread(struct prs_profile_view *v, const struct prs_profile *p, size_t i,
			 const struct pyinfo *py, int npy)
{
	const struct prs_sample *smp = &p->samples[i];
	const struct pyinfo *pi = find_py(py, npy, smp->tid);
	uint32_t vs = prs_view_sample_stack(v, i);
	const struct prs_view_stack *st = prs_view_stacks(v, &(size_t){ 0 }) + vs;
	const char *name = prs_view_thread_name(v, prs_view_pid(v, smp), smp->tid, NULL);
	const uint32_t *ids;
	size_t n = prs_view_frames(v, vs, &ids, NULL);

	/* the state is printed in words: no off-CPU leaf, no "[empty stack]" */
	if (st->leaf != PRS_VIEW_NONE || st->empty)
		n--;
	printf("\nThread %d", smp->tid);
	if (pi && pi->name)
		name = p->strings[pi->name];
	if (name && name[0]) {
		printf(" \"");
		put_text(name);
		putchar('"');
	}
	printf(" (");
	print_state(smp);
	if ((pi && pi->holds_gil) || (smp->flags & PRS_SAMPLE_GIL))
		printf(", holds the GIL");
	printf(")\n");
	if (n == 0)
		printf("    (no stack)\n");
	while (n-- > 0)
		print_frame(v, ids[n]);
}

/* "Process PID: COMMAND": the command the profile names, else /proc's. */
static void print_process(struct prs_profile_view *v, pid_t pid)
{
	const char *cmd = prs_view_command(v, pid, UINT64_MAX);
	char command[1024];

	if (!cmd && prs_proc_cmdline(pid, command, sizeof(command)) == 0)
		cmd = command;
	printf("Process %d: ", (int)pid);
	put_text(cmd ? cmd : "");
	putchar('\n');
}

/*
 * Prints the dumped process pid and its threads (with samples of unknown pid: a sampler that
 * does not name processes), then every other process of the profile in the order they appear
 * (the children, when they were followed), each with its threads.
 */
static int print_dump(const struct prs_profile *p, pid_t pid, const char *pyver,
		      const struct pyinfo *py, int npy, bool python_stacks)
{
	struct prs_profile_view *v = NULL;
	struct prs_err err = { 0 };
	struct prs_map64 seen;
	uint32_t dummy;
	size_t i, k;

	if (prs_view_new(p, &(struct prs_view_opts){ .view = PRS_VIEW_WALL, .python_stacks = python_stacks },
			 &v, &err) != 0) {
		cli_err(&err, "dump");
		return -1;
	}
	prs_map64_init(&seen);
	print_process(v, pid);
	if (pyver[0])
		printf("%s\n", pyver);
	for (i = 0; i < p->nsamples; i++) {
		int32_t other = prs_view_pid(v, &p->samples[i]);

		if (other == pid || other == 0) {
			print_thread(v, p, i, py, npy);
			continue;
		}
		if (prs_map64_intern(&seen, (uint32_t)other, 0, &dummy) != 1)
			continue; /* printed already (or out of memory: not printed twice) */
		putchar('\n');
		print_process(v, other);
		for (k = i; k < p->nsamples; k++)
			if (prs_view_pid(v, &p->samples[k]) == other)
				print_thread(v, p, k, py, npy);
	}
	prs_map64_release(&seen);
	prs_view_free(v);
	return 0;
}

/* Returns -1 to go on, else an exit code. */
static int parse_opts(int argc, char **argv, struct cli_symopts *sym, bool *subprocesses,
		      bool *python_stacks)
{
	static const struct option longopts[] = {
		{ "debug-dir", required_argument, NULL, 'G' },
		{ "subprocesses", no_argument, NULL, 'C' },
		{ "stacks", required_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	optind = 1;
	while ((c = cli_getopt(argc, argv, "+h", longopts, "dump")) != -1) {
		if (c == 'G' && !cli_add_debug_dir(sym, optarg))
			return EXIT_USAGE;
		if (c == 'C')
			*subprocesses = true;
		if (c == 'V' && !cli_parse_stacks(optarg, python_stacks))
			return EXIT_USAGE;
		if (c == 'h') {
			fputs("usage: pyrsprof dump [--subprocesses] [--stacks merged|python] [--debug-dir DIR] PID\n"
			      "  Prints every thread's stack once, with its state, and detaches.\n"
			      "      --subprocesses   every process below PID too, each with its threads\n"
			      CLI_STACKS_HELP
			      CLI_DEBUG_DIR_HELP,
			      stdout);
			return EXIT_OK;
		}
		if (c == '?')
			return EXIT_USAGE;
	}
	return -1;
}

int cmd_dump(int argc, char **argv)
{
	struct cli_symopts sym = { .ndirs = 0 };
	struct prs_sampler_opts so = { 0 };
	struct prs_sampler *s = NULL;
	struct prs_err err = { 0 };
	struct prs_profile *p;
	sigset_t set, old;
	struct pyinfo *py = NULL;
	char pyver[256];
	bool is_py, subprocesses = false, python_stacks = false;
	pid_t pid;
	int rc, npy = 0;

	rc = parse_opts(argc, argv, &sym, &subprocesses, &python_stacks);
	if (rc >= 0)
		return rc;
	if (optind != argc - 1) {
		cli_msg("dump: give one PID (usage: pyrsprof dump [--subprocesses] [--debug-dir DIR] PID)");
		return EXIT_USAGE;
	}
	rc = cli_live_pid(argv[optind], &pid);
	if (rc != EXIT_OK)
		return rc;
	p = prs_profile_new();
	if (!p) {
		cli_msg("out of memory");
		return EXIT_FAIL;
	}
	so.rate_hz = 1000;
	so.max_ticks = 1;
	so.wait_every_stop = true; /* every thread's stack, not the budget's */
	so.stack_bytes = 256 * 1024;
	so.profile = p;
	so.quiet = true;
	so.subprocesses = subprocesses;
	cli_py_opts_from_env(&so.py);
	prs_sampler_sigset(&set);
	sigprocmask(SIG_BLOCK, &set, &old);
	rc = prs_sampler_attach(pid, &so, NULL, &s, &err);
	if (rc) {
		cli_err(&err, "dump");
		sigprocmask(SIG_SETMASK, &old, NULL);
		prs_profile_free(p);
		return EXIT_FAIL;
	}
	prs_sampler_run(s, &err);
	is_py = prs_sampler_python(s, pyver, sizeof(pyver));
	if (is_py) {
		int n;
		const struct prs_py_thread *pt = prs_sampler_python_threads(s, &n);

		py = calloc(n > 0 ? (size_t)n : 1, sizeof(*py));
		for (int i = 0; py && i < n; i++) {
			py[i].tid = pt[i].tid;
			py[i].holds_gil = pt[i].holds_gil;
			py[i].name = pt[i].name;
		}
		npy = py ? n : 0;
	}
	prs_sampler_free(s);
	sigprocmask(SIG_SETMASK, &old, NULL);
	cli_symbolize(p, &sym, false, NULL);

	rc = print_dump(p, pid, pyver, py, npy, python_stacks);
	prs_profile_free(p);
	free(py);
	return rc == 0 && fflush(stdout) == 0 ? EXIT_OK : EXIT_FAIL;
}
