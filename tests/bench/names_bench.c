/* SPDX-License-Identifier: MIT */
/*
 * Benchmark of reading the `threading` thread names (src/python/threadnames.c), run by `make
 * bench`: for each installed CPython (pyenv 3.6-3.13, Debian's /usr/bin/python3), a target with N
 * named threads (10 and 200) is started, then the first read (which finds sys.modules ->
 * threading -> _active) and 300 later reads (the cached path, as the sampler's refresh every 2 s)
 * are timed, with the syscalls each took. A row is marked WRONG when not every thread got its
 * name. Not on the sampling path: the sampler reads names between ticks, with the target running.
 */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pyrsprof/profile.h"
#include "pyrsprof/python.h"
#include "pyrsprof/util.h"

#define REPS 300

static const char TARGET[] =
	"import sys, threading, time\n"
	"n = int(sys.argv[1]); ev = threading.Event()\n"
	"ts = [threading.Thread(target=ev.wait, name='worker-%d' % i, daemon=True) for i in range(n)]\n"
	"[t.start() for t in ts]\n"
	"print('ready', flush=True)\n"
	"time.sleep(120)\n";

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Starts `py -c TARGET n`; returns its pid once it printed "ready", or -1. */
static pid_t start(const char *py, int n)
{
	char arg[16], buf[64];
	int fd[2];
	pid_t pid;
	FILE *f;

	if (pipe(fd))
		return -1;
	snprintf(arg, sizeof(arg), "%d", n);
	pid = fork();
	if (pid == 0) {
		dup2(fd[1], 1);
		close(fd[0]);
		close(fd[1]);
		execl(py, py, "-c", TARGET, arg, (char *)NULL);
		_exit(127);
	}
	close(fd[1]);
	f = fdopen(fd[0], "r");
	if (pid < 0 || !f || !fgets(buf, sizeof(buf), f) || strncmp(buf, "ready", 5)) {
		if (f)
			fclose(f);
		if (pid > 0) {
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
		}
		return -1;
	}
	fclose(f);
	usleep(100000);
	return pid;
}

static void row(const char *label, const char *py, int n)
{
	struct prs_py_stats s0, s1;
	struct prs_profile *p = prs_profile_new();
	struct prs_err err = { 0 };
	struct prs_py *h = NULL;
	uint64_t t[REPS], first, a;
	int got, named = 0;
	pid_t pid = start(py, n);

	if (pid < 0 || !p || prs_py_open(pid, NULL, &h, &err)) {
		printf("| %-16s | %4d | (could not start or open: %s) |\n", label, n + 1, err.msg);
		goto out;
	}
	a = prs_now_ns();
	got = prs_py_read_thread_names(h, p, 1);
	first = prs_now_ns() - a;
	prs_py_get_stats(h, &s0);
	for (int i = 0; i < REPS; i++) {
		a = prs_now_ns();
		named = prs_py_read_thread_names(h, p, 1);
		t[i] = prs_now_ns() - a;
	}
	prs_py_get_stats(h, &s1);
	qsort(t, REPS, sizeof(t[0]), cmp_u64);
	printf("| %-16s | %4d | %8.1f | %7.1f | %7.1f | %8.1f | %5.1f | %s\n", label, n + 1, first / 1e3,
	       t[REPS / 2] / 1e3, t[REPS * 9 / 10] / 1e3, (double)t[REPS / 2] / 1e3 / (n + 1),
	       (double)(s1.syscalls - s0.syscalls) / REPS,
	       got == n + 1 && named == n + 1 ? "" : "WRONG: not every thread named");
out:
	prs_py_free(h);
	prs_profile_free(p);
	if (pid > 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
}

int main(void)
{
	const char *root = getenv("PYENV_ROOT");
	char dir[512], py[1024];
	static const char *const minors[] = { "3.6", "3.7", "3.8", "3.9", "3.10", "3.11", "3.12", "3.13" };

	if (!root) {
		snprintf(dir, sizeof(dir), "%s/.pyenv", getenv("HOME") ? getenv("HOME") : "/root");
		root = dir;
	}
	printf("Reading threading names (threading._active -> Thread._name), one process per row;\n"
	       "first: the first read (finds the threading module); later: %d reads on the cached path.\n\n",
	       REPS);
	printf("| interpreter      | thr. | first us | later us | p90 us | us/thread | calls |\n");
	printf("|------------------|------|----------|----------|--------|-----------|-------|\n");
	for (size_t m = 0; m < sizeof(minors) / sizeof(minors[0]); m++) {
		char vdir[600];
		struct dirent *e;
		DIR *d;

		snprintf(vdir, sizeof(vdir), "%s/versions", root);
		py[0] = 0;
		if (!(d = opendir(vdir)))
			break;
		while ((e = readdir(d))) /* the X.Y.Z directory of this minor */
			if (!strncmp(e->d_name, minors[m], strlen(minors[m])) && e->d_name[strlen(minors[m])] == '.')
				snprintf(py, sizeof(py), "%s/%s/bin/python%s", vdir, e->d_name, minors[m]);
		closedir(d);
		if (!py[0] || access(py, X_OK))
			continue;
		row(minors[m], py, 10);
		row(minors[m], py, 200);
	}
	if (!access("/usr/bin/python3", X_OK)) {
		row("debian python3", "/usr/bin/python3", 10);
		row("debian python3", "/usr/bin/python3", 200);
	}
	return 0;
}
