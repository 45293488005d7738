/* SPDX-License-Identifier: MIT */
/*
 * Processes and threads of a view: which process a sample is (pid 0 is meta "pid"), the command a
 * process ran at a time (the PROCESS entry then in effect: an exec starts a new one), labels of
 * process roots, and thread names (the latest non-empty one of (pid, tid)). Tables sorted once,
 * looked up by binary search.
 */
#include "profile/view-internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/banned.h"

static int cmp_thread(const void *a, const void *b)
{
	const struct view_thread *x = a, *y = b;

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static int cmp_process(const void *a, const void *b)
{
	const struct view_process *x = a, *y = b;

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	if (x->time_ns != y->time_ns)
		return x->time_ns < y->time_ns ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* meta "pid" if it is a pid, else 0 */
static int32_t meta_pid(const struct prs_profile *p)
{
	const char *s = prs_profile_meta_get(p, "pid");
	char *end;
	long v;

	if (!s || !*s)
		return 0;
	v = strtol(s, &end, 10);
	return *end || v <= 0 || v > INT32_MAX ? 0 : (int32_t)v;
}

int prs_view_names_init(struct prs_profile_view *v)
{
	const struct prs_profile *p = v->p;
	const char *cmd = prs_profile_meta_get(p, "command");
	uint32_t i;

	v->meta_pid = meta_pid(p);
	v->meta_command = cmd && *cmd ? prs_profile_string_find(p, cmd, strlen(cmd)) : 0;
	if (v->meta_command == PRS_MAP_NONE)
		v->meta_command = 0;
	prs_map64_init(&v->pid_procs);
	v->threads = malloc((p->nthreads ? p->nthreads : 1) * sizeof(*v->threads));
	v->procs = malloc((p->nprocesses ? p->nprocesses : 1) * sizeof(*v->procs));
	if (!v->threads || !v->procs)
		return -ENOMEM;
	for (i = 0; i < p->nthreads; i++) {
		const struct prs_thread *t = &p->threads[i];

		v->threads[i] = (struct view_thread){ t->pid ? t->pid : v->meta_pid, t->tid, t->name, i };
	}
	v->nthreads = p->nthreads;
	qsort(v->threads, v->nthreads, sizeof(*v->threads), cmp_thread);
	for (i = 0; i < p->nprocesses; i++) {
		const struct prs_process *pr = &p->processes[i];

		v->procs[i] = (struct view_process){ pr->pid, pr->command, i, pr->time_ns };
	}
	v->nprocs = p->nprocesses;
	qsort(v->procs, v->nprocs, sizeof(*v->procs), cmp_process);
	for (i = v->nprocs; i-- > 0;)
		if (prs_map64_put(&v->pid_procs, (uint32_t)v->procs[i].pid, i))
			return -ENOMEM;
	return 0;
}

uint32_t prs_view_process_entry(const struct prs_profile_view *v, int32_t pid, uint64_t time_ns)
{
	uint32_t first = prs_map64_get(&v->pid_procs, (uint32_t)pid), lo, hi;

	if (first == PRS_MAP_NONE)
		return PRS_VIEW_NONE;
	/* the last entry of pid with time <= time_ns; the first one for an earlier time */
	lo = first + 1;
	hi = first + 1;
	while (hi < v->nprocs && v->procs[hi].pid == pid)
		hi++;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (v->procs[mid].time_ns <= time_ns)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo - 1;
}

int32_t prs_view_pid(const struct prs_profile_view *v, const struct prs_sample *s)
{
	return s->pid ? s->pid : v->meta_pid;
}

uint32_t prs_view_processes(const struct prs_profile_view *v)
{
	return v->nprocesses;
}

const char *prs_view_command(const struct prs_profile_view *v, int32_t pid, uint64_t time_ns)
{
	uint32_t e = prs_view_process_entry(v, pid, time_ns);
	uint32_t cmd = e != PRS_VIEW_NONE ? v->procs[e].command
		       : pid == v->meta_pid ? v->meta_command : 0;

	return cmd ? v->p->strings[cmd] : NULL;
}

const char *prs_view_process_label(const struct prs_profile_view *v, int32_t pid, uint64_t time_ns,
				   char *buf, size_t size)
{
	const char *cmd = prs_view_command(v, pid, time_ns);

	if (cmd)
		snprintf(buf, size, "%s [%" PRId32 "]", cmd, pid);
	else
		snprintf(buf, size, "pid %" PRId32, pid);
	return buf;
}

const char *prs_view_thread_name(const struct prs_profile_view *v, int32_t pid, int32_t tid, size_t *len)
{
	size_t lo = 0, hi = v->nthreads;

	while (lo < hi) { /* the first entry after (pid, tid) */
		size_t mid = lo + (hi - lo) / 2;
		const struct view_thread *t = &v->threads[mid];

		if (t->pid < pid || (t->pid == pid && t->tid <= tid))
			lo = mid + 1;
		else
			hi = mid;
	}
	/* back over this thread's entries, newest first, to the last one with a name */
	for (; lo > 0 && v->threads[lo - 1].pid == pid && v->threads[lo - 1].tid == tid; lo--) {
		uint32_t name = v->threads[lo - 1].name;

		if (name && name < v->p->nstrings) {
			if (len)
				*len = v->p->string_lens[name];
			return v->p->strings[name];
		}
	}
	return NULL;
}
