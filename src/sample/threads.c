/* SPDX-License-Identifier: MIT */
/*
 * The thread table of one target: adding, finding and removing threads, their /proc files kept
 * open within a budget shared by the session, and their names in the profile.
 */
#include "sample/threads-internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pyrsprof/acct.h"
#include "sample/kstack-internal.h"
#include "sample/switches-internal.h"
#include "util/banned.h"

int prs_thr_table_init(struct prs_thr_table *tab, pid_t pid, struct prs_thr_common *common)
{
	tab->pid = pid;
	tab->n = 0;
	tab->common = common;
	tab->v = calloc(PRS_THR_MAX, sizeof(*tab->v));
	return tab->v ? 0 : -ENOMEM;
}

void prs_thr_table_release(struct prs_thr_table *tab)
{
	if (tab->v)
		prs_thr_remove_all(tab);
	free(tab->v);
	tab->v = NULL;
}

struct prs_thr *prs_thr_find(const struct prs_thr_table *tab, pid_t tid)
{
	for (size_t i = 0; i < tab->n; i++)
		if (tab->v[i].tid == tid)
			return &tab->v[i];
	return NULL;
}

struct prs_thr *prs_thr_add(struct prs_thr_table *tab, pid_t tid)
{
	struct prs_thr *t = prs_thr_find(tab, tid);

	if (t)
		return t;
	if (tab->n >= PRS_THR_MAX)
		return NULL;
	t = &tab->v[tab->n];
	memset(t, 0, sizeof(*t));
	t->stack = malloc(tab->common->stack_bytes);
	if (!t->stack)
		return NULL;
	t->tid = tid;
	t->life = PRS_THR_RUNNING;
	t->blocked_in = -1;
	t->schedstat_fd = -1;
	t->stat_fd = -1;
	t->syscall_fd = -1;
	tab->n++;
	tab->common->seen++;
	return t;
}

static void close_kept(struct prs_thr_table *tab, int *fd)
{
	if (*fd >= 0) {
		close(*fd);
		tab->common->open_fds--;
	}
	*fd = -1;
}

void prs_thr_remove(struct prs_thr_table *tab, struct prs_thr *t)
{
	close_kept(tab, &t->schedstat_fd);
	close_kept(tab, &t->stat_fd);
	close_kept(tab, &t->syscall_fd);
	prs_kthr_free(t->kthr);
	prs_switches_done(tab->common->sw, &t->swthr, t->tid, PRS_PHASE_EXIT);
	prs_kept_release(&t->kept);
	free(t->stack);
	*t = tab->v[--tab->n];
}

void prs_thr_remove_all(struct prs_thr_table *tab)
{
	while (tab->n > 0)
		prs_thr_remove(tab, &tab->v[0]);
}

bool prs_thr_interrupt_owed(const struct prs_thr *t)
{
	return t->life == PRS_THR_INTERRUPTED || t->life == PRS_THR_LATE;
}

/*
 * Per-thread /proc files (schedstat, syscall; in vm mode stat) stay open, one pread per read, up
 * to PRS_KEPT_FDS descriptors in all; beyond, each read opens and closes its file, so a process
 * with thousands of threads cannot use up pyrsprof's file descriptors (the symbolizer needs them
 * at the end). A read goes through kept_fd (where it may keep its descriptor), then kept_fd_done.
 */
#define PRS_KEPT_FDS 256

static int *kept_fd(struct prs_thr_table *tab, int *own, int *scratch)
{
	*scratch = -1;
	return *own >= 0 || tab->common->open_fds < PRS_KEPT_FDS ? own : scratch;
}

/* Counts the descriptor the read opened or closed (had: *own was open before) and closes scratch. */
static void kept_fd_done(struct prs_thr_table *tab, const int *own, bool had, int *scratch)
{
	if (*scratch >= 0)
		close(*scratch);
	*scratch = -1;
	if (!had && *own >= 0)
		tab->common->open_fds++;
	else if (had && *own < 0)
		tab->common->open_fds--;
}

int prs_thr_schedstat(struct prs_thr_table *tab, struct prs_thr *t, struct prs_schedstat *ss)
{
	bool had = t->schedstat_fd >= 0;
	int scratch, rc;

	rc = prs_task_schedstat(tab->pid, t->tid, kept_fd(tab, &t->schedstat_fd, &scratch), ss);
	kept_fd_done(tab, &t->schedstat_fd, had, &scratch);
	return rc;
}

int prs_thr_syscall(struct prs_thr_table *tab, struct prs_thr *t, struct prs_task_sys *sys)
{
	bool had = t->syscall_fd >= 0;
	int scratch, rc;

	rc = prs_task_syscall_fd(tab->pid, t->tid, kept_fd(tab, &t->syscall_fd, &scratch), sys);
	kept_fd_done(tab, &t->syscall_fd, had, &scratch);
	return rc;
}

enum prs_state prs_thr_letter_state(struct prs_thr_table *tab, struct prs_thr *t)
{
	bool had = t->stat_fd >= 0;
	int scratch;
	char c;

	c = prs_task_state_fd(tab->pid, t->tid, kept_fd(tab, &t->stat_fd, &scratch));
	kept_fd_done(tab, &t->stat_fd, had, &scratch);
	return c == 'R' ? PRS_STATE_RUNNING : c == 'D' ? PRS_STATE_DISK : PRS_STATE_BLOCKED;
}

void prs_thr_record_name(struct prs_thr_table *tab, struct prs_thr *t, struct prs_profile *prof)
{
	char comm[64];
	uint32_t sid = t->py_name_sid;

	if (!sid) {
		if (prs_task_comm(tab->pid, t->tid, comm, sizeof(comm)) != 0)
			return;
		sid = prs_profile_string(prof, comm, strlen(comm));
	}
	if (sid == UINT32_MAX || sid == t->name_sid)
		return;
	t->name_sid = sid;
	prs_profile_thread_pid(prof, tab->pid, t->tid, sid);
}
