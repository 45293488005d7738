/* SPDX-License-Identifier: MIT */
/*
 * The threads a traced process started since the last tick, found at the tick and seized then.
 *
 * Why not follow them through clone events (PTRACE_O_TRACECLONE): the clone event stops the
 * creating thread until pyrsprof resumes it, and the new thread starts in a stop of its own;
 * each is a round trip through pyrsprof, ~60-70 us, which a thread-per-request server pays on
 * every request whatever the sampling rate (tests/bench/bench_clone.py). PTRACE_SEIZE does not
 * stop the thread, and the tick's PTRACE_INTERRUPT then works on it as on the others.
 *
 * What a tick sees is what sampling needs: every thread alive at the tick's moment is found
 * (listed just before the interrupts) and sampled, so a thread shorter than a period is still
 * caught in proportion to its life. A thread that is born and ends between two ticks is never
 * known by its tid (nor was it sampled when clone events told of it); its CPU time is in the
 * process's totals.
 *
 * The cheap test first: the link count of /proc/PID/task is 2 + the threads of the process
 * (those exited but not reaped by us included: the traced ones stay zombies until we reap them,
 * the others are released at once), one fstat on a kept descriptor (~1 us); only when it counts
 * more than the table holds is the directory read (~5-10 us).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pyrsprof/ptrace.h"
#include "pyrsprof/task.h"
#include "sample/sampler-internal.h"
#include "util/banned.h"

int prs_seize_options(const struct prs_sampler *s, pid_t pid, pid_t tid)
{
	return tid == pid ? s->seize_options : s->seize_options & ~PTRACE_O_TRACEEXIT;
}

/* tg's /proc/PID/task, opened once. NULL: the process is gone (or out of descriptors). */
static DIR *task_dir(struct prs_target *tg)
{
	char path[64];

	if (!tg->task_dir) {
		snprintf(path, sizeof(path), "/proc/%d/task", (int)tg->pid);
		tg->task_dir = opendir(path);
	}
	return tg->task_dir;
}

/* True when /proc/PID/task may hold a thread tg's table does not (it could not be told: true). */
static bool maybe_new(struct prs_target *tg, DIR *d)
{
	struct stat st;

	return fstat(dirfd(d), &st) != 0 || st.st_nlink < 2 || (size_t)st.st_nlink - 2 != tg->thr.n;
}

/* Adds thread tid of tg, seized and running. Returns true if it was (not: gone meanwhile, or the
 * table is full: it runs untraced, counted). */
static bool seize_new(struct prs_sampler *s, struct prs_target *tg, pid_t tid)
{
	struct prs_err err = { 0 };
	/* (added first: a thread seized that has no entry would never be resumed from a stop) */
	struct prs_thr *t = prs_thr_add(&tg->thr, tid);

	if (!t) {
		s->st.threads_not_followed++;
		return false;
	}
	if (prs_ptrace_seize(tid, prs_seize_options(s, tg->pid, tid), &err) == 0)
		return true;
	prs_thr_remove(&tg->thr, t); /* gone meanwhile (-ESRCH) */
	tg->thr.common->seen--;
	return false;
}

void prs_newthreads_find(struct prs_sampler *s, struct prs_target *tg)
{
	DIR *d = tg->seized && !tg->exited ? task_dir(tg) : NULL;
	struct dirent *de;
	size_t found = 0;

	if (!d || !maybe_new(tg, d))
		return;
	rewinddir(d);
	while ((de = readdir(d)) != NULL) {
		char *end;
		long tid = strtol(de->d_name, &end, 10);

		if (*end != '\0' || tid <= 0 || prs_thr_find(&tg->thr, (pid_t)tid))
			continue;
		found += seize_new(s, tg, (pid_t)tid);
	}
	s->st.threads_found += found;
	/* A thread not seized yet forks untraced: its children are looked for now. */
	if (found && s->opts.subprocesses)
		prs_tree_adopt_children(s, tg);
}
