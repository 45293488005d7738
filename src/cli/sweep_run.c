/* SPDX-License-Identifier: MIT */
/*
 * One run of `pyrsprof sweep`: the command recorded by cmd_run() in a forked copy of pyrsprof.
 * The command is that copy's child, so once cmd_run() has reaped it, getrusage(RUSAGE_CHILDREN)
 * in the copy is exactly the command's tree (user, sys, peak RSS), without the sampler's own
 * CPU. The copy sends those figures back through a pipe; the wall time is the recording's own
 * (stats.json duration_s: exec to exit, without pyrsprof's start-up, symbolization and
 * rendering).
 */
#include "cli/sweep.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/cli.h"
#include "util/banned.h"

/* What the forked recorder sends back. */
struct usage_msg {
	double user_s, sys_s;
	long maxrss_kb;
};

static bool runnable(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

bool sweep_check_command(const char *prog)
{
	const char *path = getenv("PATH");
	char buf[4096];

	if (strchr(prog, '/')) {
		if (runnable(prog))
			return true;
		cli_msg("sweep: cannot run '%s': %s", prog,
			access(prog, F_OK) == 0 ? "not an executable file" : strerror(ENOENT));
		return false;
	}
	for (const char *p = path && *path ? path : "/usr/local/bin:/usr/bin:/bin"; *p;) {
		const char *colon = strchr(p, ':');
		size_t len = colon ? (size_t)(colon - p) : strlen(p);

		if ((size_t)snprintf(buf, sizeof(buf), "%.*s/%s", (int)(len ? len : 1), len ? p : ".", prog) <
			    sizeof(buf) && runnable(buf))
			return true;
		p += len + (colon != NULL);
	}
	cli_msg("sweep: cannot run '%s': not found in PATH", prog);
	return false;
}

/* ---- one run ---- */

/* In the forked copy: records argv with cmd_run, output to logpath; never returns. */
static void __attribute__((noreturn)) recorder(int wfd, const char *logpath, char **run_argv,
						 int run_argc, const sigset_t *old)
{
	struct usage_msg msg = { 0 };
	struct rusage ru;
	int in, log, rc;

	sigprocmask(SIG_SETMASK, old, NULL);
	in = open("/dev/null", O_RDONLY | O_CLOEXEC);
	log = open(logpath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (in < 0 || log < 0 || dup2(in, 0) < 0 || dup2(log, 1) < 0 || dup2(log, 2) < 0) {
		/* still sweep's stderr unless the dup2 of the log went through */
		cli_msg("cannot write '%s': %s", logpath, strerror(errno));
		_exit(EXIT_FAIL);
	}
	/* (an fd that landed on 0-2 because sweep's own was closed is now in place: keep it) */
	if (in > 2)
		close(in);
	if (log > 2)
		close(log);
	rc = cmd_run(run_argc, run_argv);
	/* reap whatever is left, so that RUSAGE_CHILDREN holds the whole tree */
	while (waitpid(-1, NULL, 0) > 0 || errno == EINTR)
		;
	if (getrusage(RUSAGE_CHILDREN, &ru) == 0) {
		msg.user_s = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6;
		msg.sys_s = (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
		msg.maxrss_kb = ru.ru_maxrss;
		if (write(wfd, &msg, sizeof(msg)) != (ssize_t)sizeof(msg))
			rc = rc ? rc : EXIT_FAIL;
	}
	fflush(NULL);
	_exit(rc & 0xff);
}

void sweep_sigset(sigset_t *set)
{
	sigemptyset(set);
	sigaddset(set, SIGCHLD);
	sigaddset(set, SIGINT);
	sigaddset(set, SIGTERM);
	sigaddset(set, SIGHUP);
}

/* Waits for the recorder; a signal to sweep marks the sweep interrupted (one sent with kill()
 * is passed on: one from the terminal reached the whole process group already). */
static int wait_recorder(pid_t pid, int *stop_sig)
{
	sigset_t set;
	int status;

	sweep_sigset(&set);
	for (;;) {
		struct timespec ts = { 0, 200000000 };
		siginfo_t si;
		pid_t r = waitpid(pid, &status, WNOHANG);
		int sig;

		if (r == pid)
			return status;
		if (r < 0 && errno != EINTR)
			return -1;
		sig = sigtimedwait(&set, &si, &ts);
		if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {
			if (!*stop_sig)
				*stop_sig = sig;
			if (si.si_code == SI_USER || si.si_code == SI_QUEUE || si.si_code == SI_TKILL)
				kill(pid, sig);
		}
	}
}

/* The recording's duration_s from DIR/stats.json; false if it has none. */
static bool read_duration(const char *dir, double *out)
{
	char path[4200];
	json_t *j, *d;
	bool ok;

	snprintf(path, sizeof(path), "%s/stats.json", dir);
	j = json_load_file(path, 0, NULL);
	d = json_object_get(j, "duration_s");
	ok = json_is_number(d) && json_number_value(d) >= 0;
	if (ok)
		*out = json_number_value(d);
	json_decref(j);
	return ok;
}

/* Fills r from the recorder's status and message and the recording in dir. */
static void collect(struct prs_sweep_run *r, int status, const struct usage_msg *msg, bool got_msg,
		    const char *dir)
{
	char path[4200];

	r->done = true;
	if (status < 0) {
		snprintf(r->problem, sizeof(r->problem), "lost track of the recorder");
		return;
	}
	r->status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
	if (WIFSIGNALED(status))
		snprintf(r->problem, sizeof(r->problem), "the recorder was killed by signal %d",
			 WTERMSIG(status));
	else if (r->status > 128 && r->status < 128 + 65)
		snprintf(r->problem, sizeof(r->problem), "killed by signal %d (%s)", r->status - 128,
			 strsignal(r->status - 128));
	else if (r->status != 0)
		snprintf(r->problem, sizeof(r->problem), "exit %d", r->status);
	if (got_msg && read_duration(dir, &r->wall_s)) {
		r->measured = true;
		r->user_s = msg->user_s;
		r->sys_s = msg->sys_s;
		r->rss_kb = msg->maxrss_kb > 0 ? (uint64_t)msg->maxrss_kb : 0;
	} else if (!r->problem[0]) {
		snprintf(r->problem, sizeof(r->problem), "the recording is incomplete (no %s)",
			 got_msg ? "stats.json" : "resource usage");
	}
	snprintf(path, sizeof(path), "%s/phase1.json", dir);
	prs_sweep_verdict_read(path, r->verdict, sizeof(r->verdict));
}

bool sweep_run_once(const char *rate_arg, bool subprocesses, char **cmd, const char *dir,
		    struct prs_sweep_run *r, const sigset_t *old, int *stop_sig)
{
	char logpath[4200], **argv;
	struct usage_msg msg;
	int pfd[2], argc = 0, status;
	size_t n = 0;
	bool created, got;
	pid_t pid;

	if (cli_make_dir(dir, &created) != 0)
		return false;
	snprintf(logpath, sizeof(logpath), "%s/output.log", dir);
	while (cmd[n])
		n++;
	argv = calloc(n + 9, sizeof(*argv));
	if (!argv) {
		cli_msg("sweep: out of memory");
		return false;
	}
	argv[argc++] = (char *)"run";
	argv[argc++] = (char *)"-r";
	argv[argc++] = (char *)rate_arg;
	argv[argc++] = (char *)"-o";
	argv[argc++] = (char *)dir;
	argv[argc++] = (char *)"--force"; /* the sweep's own run folder */
	if (subprocesses)
		argv[argc++] = (char *)"--subprocesses";
	argv[argc++] = (char *)"--";
	for (size_t i = 0; i < n; i++)
		argv[argc++] = cmd[i];
	if (pipe2(pfd, O_CLOEXEC) != 0) {
		cli_msg("sweep: pipe: %s", strerror(errno));
		free(argv);
		return false;
	}
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		cli_msg("sweep: fork: %s", strerror(errno));
		close(pfd[0]);
		close(pfd[1]);
		free(argv);
		return false;
	}
	if (pid == 0) {
		close(pfd[0]);
		recorder(pfd[1], logpath, argv, argc, old);
	}
	close(pfd[1]);
	free(argv);
	status = wait_recorder(pid, stop_sig);
	got = read(pfd[0], &msg, sizeof(msg)) == (ssize_t)sizeof(msg);
	close(pfd[0]);
	collect(r, status, &msg, got, dir);
	return true;
}
