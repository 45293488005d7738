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
#include <sys/stat.h>
#include <unistd.h>

#include "pyrsprof/ptrace.h"
#include "pyrsprof/task.h"
#include "pyrsprof/util.h"
#include "sample/sampler-internal.h"
#include "util/banned.h"

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
	if (prs_ptrace_seize(tid, s->seize_options, &err) == 0)
		return true;
	prs_thr_remove(&tg->thr, t); /* gone meanwhile (-ESRCH) */
	tg->thr.common->seen--;
	return false;
}

/*
 * When a thread not seized yet execs, it takes the leader's pid untraced: no exec event comes
 * (the other threads' exits do), and the process would run on unsampled (a sleeper is read from
 * /proc without being ours: with the old image's maps), its exit unseen (attach). So the leader
 * is checked (its TracerPid, ~10 us) when it could not be interrupted, and at most every
 * LEADER_CHECK_NS anyway; found not ours, it is seized again, the leader of a new image.
 */
#define LEADER_CHECK_NS 100000000ull

static void find_lost_leader(struct prs_sampler *s, struct prs_target *tg)
{
	struct prs_err err = { 0 };
	struct prs_proc_ids ids;
	uint64_t now = prs_now_ns();

	if (!tg->leader_lost && now - tg->leader_checked < LEADER_CHECK_NS)
		return;
	tg->leader_lost = false;
	tg->leader_checked = now;
	if (prs_proc_ids(tg->pid, &ids) != 0 || ids.tracer == getpid() ||
	    prs_ptrace_seize(tg->pid, s->seize_options, &err) != 0)
		return;
	prs_events_new_image(s, tg, false);
	s->st.execs_found++;
}

void prs_newthreads_find(struct prs_sampler *s, struct prs_target *tg)
{
	DIR *d = tg->seized && !tg->exited ? task_dir(tg) : NULL;
	struct dirent *de;
	size_t found = 0;

	if (d)
		find_lost_leader(s, tg);
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
