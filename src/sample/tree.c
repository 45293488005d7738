/* SPDX-License-Identifier: MIT */
/*
 * The process tree of a session (--subprocesses): a target per process, made when its parent's
 * fork event (fork, vfork, or a clone without CLONE_THREAD) or its own first stop arrives,
 * whichever comes first; at attach, the descendants alive then, each seized like the root; the
 * PROCESS records of the profile (a process's command from when it runs it); and, without
 * --subprocesses, how much CPU the children that were not followed used.
 *
 * ptrace facts relied on (ptrace(2)): a child of a tracee with PTRACE_O_TRACEFORK/VFORK starts
 * traced, with the options of the thread that forked it (a leader's are set at its first stop),
 * in a PTRACE_EVENT_STOP; that stop and its parent's fork event come in either order. A child
 * that sends no event (forked by a thread before a tick found and seized it; a clone whose exit
 * signal is not SIGCHLD, without PTRACE_O_TRACECLONE) is found by the children files at the tick
 * that finds the new threads, and seized then (prs_tree_adopt_children). A
 * vfork parent stays in the kernel (state D) until its child execs or exits: it is recorded from
 * /proc meanwhile (source_ptrace.c takes threads that do not stop so).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pyrsprof/ptrace.h"
#include "pyrsprof/task.h"
#include "pyrsprof/util.h"
#include "sample/sampler-internal.h"
#include "util/banned.h"

#define TREE_MAX_CHILDREN 4096 /* children listed per process at attach */

/* Time on the samples' clock (0 before the loop starts). */
static uint64_t tree_time(const struct prs_sampler *s)
{
	uint64_t now = prs_now_ns();

	return s->t0 && now > s->t0 ? now - s->t0 : 0;
}

static void record_process(struct prs_sampler *s, struct prs_target *tg)
{
	if (tg->command)
		prs_profile_process(s->prof, tg->pid, tg->ppid, tg->command, tree_time(s));
}

void prs_tree_record_command(struct prs_sampler *s, struct prs_target *tg)
{
	char cmd[1024];

	if (prs_proc_cmdline(tg->pid, cmd, sizeof(cmd)) != 0 || !cmd[0])
		return; /* (gone already, or a kernel thread) */
	tg->command = prs_profile_string(s->prof, cmd, strlen(cmd));
	if (tg->command == UINT32_MAX)
		tg->command = 0;
	record_process(s, tg);
}

/* A new seized target for process pid, child of ppid, its leader in life `life`; it runs the
 * parent's program (a forked child) until it execs. NULL: out of memory. */
static struct prs_target *add_child(struct prs_sampler *s, pid_t pid, pid_t ppid,
				    enum prs_thr_life life)
{
	struct prs_target *tg = prs_target_new(s, pid);
	struct prs_target *parent = prs_session_target(s, ppid);
	struct prs_thr *t;

	if (!tg)
		return NULL;
	tg->ppid = ppid;
	tg->seized = true;
	tg->own_image = true;
	t = prs_thr_add(&tg->thr, pid);
	if (!t) {
		prs_target_free(tg);
		return NULL;
	}
	t->life = life;
	if (prs_session_add_target(s, tg) != 0)
		return NULL;
	s->st.processes++;
	if (parent && parent->command) {
		tg->command = parent->command;
		record_process(s, tg);
	} else {
		prs_tree_record_command(s, tg);
	}
	if (parent)
		prs_target_py_inherit(s, tg, parent);
	return tg;
}

void prs_tree_forked(struct prs_sampler *s, struct prs_target *tg, pid_t child)
{
	struct prs_target *known;

	if (child <= 0)
		return;
	known = prs_session_target(s, child);
	if (known) {
		/* its first stop came first: now its parent is known for sure */
		if (known->ppid != tg->pid) {
			known->ppid = tg->pid;
			record_process(s, known);
		}
		return;
	}
	add_child(s, child, tg->pid, PRS_THR_NEW);
}

struct prs_thr *prs_tree_early_stop(struct prs_sampler *s, pid_t tid)
{
	struct prs_proc_ids ids;
	struct prs_target *tg;

	if (!s->opts.subprocesses || prs_proc_ids(tid, &ids) != 0 || ids.tgid != tid ||
	    ids.tracer != getpid())
		return NULL;
	/* its parent's fork event is still to come: ppid for now from /proc (a clone with
	 * CLONE_PARENT names the grandparent; the fork event corrects it) */
	tg = add_child(s, tid, ids.ppid, PRS_THR_NEW);
	return tg ? prs_thr_find(&tg->thr, tid) : NULL;
}

void prs_tree_forked_at_detach(struct prs_sampler *s, struct prs_target *tg, pid_t child)
{
	struct prs_proc_ids ids;

	/* Its first stop may not have come yet: wait for it (INTERRUPTED) to detach it, unless it
	 * came and was detached already (it is no longer ours). */
	if (child <= 0 || prs_session_target(s, child) || prs_proc_ids(child, &ids) != 0 ||
	    ids.tracer != getpid())
		return;
	add_child(s, child, tg->pid, PRS_THR_INTERRUPTED);
}

/* ---- attach ---- */

/* Seizes process pid, a child of ppid, and adds it. A process that cannot be seized (gone, not
 * permitted) or is ours already (its first stop pending: the events make its target) is skipped. */
static struct prs_target *attach_one(struct prs_sampler *s, pid_t pid, pid_t ppid)
{
	struct prs_err err = { 0 };
	struct prs_proc_ids ids;
	struct prs_target *tg;

	if (prs_session_target(s, pid) || (prs_proc_ids(pid, &ids) == 0 && ids.tracer == getpid()))
		return NULL;
	tg = prs_target_new(s, pid);
	if (!tg)
		return NULL;
	tg->ppid = ppid;
	tg->own_image = true;
	/* (failed after seizing some of its threads: kept, to sample and detach them) */
	if (s->src->attach(s, tg, &err) != 0 && !tg->seized) {
		prs_target_free(tg);
		return NULL;
	}
	if (prs_session_add_target(s, tg) != 0)
		return NULL;
	s->st.processes++;
	prs_tree_record_command(s, tg);
	return tg;
}

/* Seizes the children of process pid that are not targets yet (kids: room for TREE_MAX_CHILDREN).
 * Returns how many were. */
static int attach_children(struct prs_sampler *s, pid_t pid, pid_t *kids)
{
	int n = prs_proc_children(pid, kids, TREE_MAX_CHILDREN), added = 0;

	for (int k = 0; k < n && k < TREE_MAX_CHILDREN; k++)
		added += attach_one(s, kids[k], pid) != NULL;
	return added;
}

/* Seizes the children of the targets from index first on, and theirs, that are not targets yet.
 * Returns how many were, or -ENOMEM. */
static int attach_below(struct prs_sampler *s, size_t first)
{
	pid_t *kids = malloc(TREE_MAX_CHILDREN * sizeof(*kids));
	int added = 0;

	if (!kids)
		return -ENOMEM;
	/* Breadth first: a process is seized before its children are listed, so a child it forks
	 * later is reported by its fork event, and one forked before is listed. */
	for (size_t i = first; i < s->ntargets; i++)
		added += attach_children(s, s->targets[i]->pid, kids);
	free(kids);
	return added;
}

int prs_tree_attach(struct prs_sampler *s, struct prs_err *err)
{
	if (attach_below(s, 0) < 0)
		return prs_err_set(err, -ENOMEM, "out of memory");
	return 0;
}

void prs_tree_adopt_children(struct prs_sampler *s, struct prs_target *tg)
{
	pid_t *kids = malloc(TREE_MAX_CHILDREN * sizeof(*kids));
	size_t n0 = s->ntargets;
	int added;

	if (!kids)
		return;
	added = attach_children(s, tg->pid, kids);
	free(kids);
	/* (the children found run untraced until now: theirs too; the targets from n0 on) */
	if (added) {
		int below = attach_below(s, n0);

		added += below > 0 ? below : 0;
	}
	s->st.processes_adopted += (uint64_t)added;
}

/* ---- children not followed ---- */

void prs_tree_note_children_cpu(struct prs_sampler *s)
{
	struct prs_target *root = s->ntargets ? s->targets[0] : NULL;
	uint64_t self, children;

	if (!root || s->opts.subprocesses || prs_proc_cpu(root->pid, &self, &children) != 0)
		return;
	children = children > s->root_cutime0 ? children - s->root_cutime0 : 0;
	if (children > s->st.children_cpu_ns)
		s->st.children_cpu_ns = children;
}
