/* SPDX-License-Identifier: MIT */
/*
 * The memory-only sample source (--mode vm): per tick, the Python frames of every thread of the
 * target read by memory reads, without stopping anything; each thread's state from its /proc
 * files. Threads asleep since their last sample are recorded again (PRS_REUSE_ALL); when all
 * are, nothing is read, but at least every VM_FULL_READ_NS (a thread the sampler does not know,
 * say a native one, may have created a Python thread meanwhile).
 */
#include <errno.h>
#include <string.h>

#include "pyrsprof/ptrace.h"
#include "pyrsprof/python.h"
#include "pyrsprof/util.h"
#include "sample/sampler-internal.h"
#include "util/banned.h"

/* The Python frames are read at least this often, even while every thread sleeps. */
#define VM_FULL_READ_NS 250000000ull

/*
 * The thread's state now, from its syscall file: running, or blocked in which syscall (a sleep
 * restarted after a signal shows as restart_syscall: the first syscall is kept, as in the ptrace
 * source). Asleep outside a syscall (a page fault, a job-control stop), or when the file cannot
 * be read, the stat file's letter decides.
 */
static enum prs_state vm_state(struct prs_target *tg, struct prs_thr *t, int *syscall)
{
	struct prs_task_sys sys;

	*syscall = -1;
	t->wait_addr = 0;
	if (prs_thr_syscall(&tg->thr, t, &sys) == 0) {
		if (sys.running)
			return PRS_STATE_RUNNING;
		if (sys.nr >= 0) {
			*syscall = sys.nr == PRS_SYS_RESTART_SYSCALL && t->blocked_in >= 0 ? t->blocked_in
											 : sys.nr;
			t->blocked_in = *syscall;
			t->wait_addr = *syscall == PRS_SYS_FUTEX ? sys.args[0] : 0;
			return PRS_STATE_BLOCKED;
		}
	}
	return prs_thr_letter_state(&tg->thr, t);
}

/* Decides how each known Python thread is sampled this tick. Returns true when every one of
 * them is to be recorded from its kept sample (and a full read is not due). */
static bool plan(struct prs_sampler *s, struct prs_target *tg, uint64_t tick_ns)
{
	bool all_rest = !s->opts.read_idle && tg->npyt > 0 &&
			tick_ns - tg->last_py_read < VM_FULL_READ_NS;

	for (size_t i = 0; i < tg->thr.n; i++)
		tg->thr.v[i].reuse = PRS_REUSE_NONE;
	for (int i = 0; i < tg->npyt; i++) {
		struct prs_thr *t = tg->pyt[i].tid > 0 ? prs_thr_find(&tg->thr, tg->pyt[i].tid) : NULL;

		if (!t) {
			all_rest = false;
			continue;
		}
		prs_reuse_check(s, tg, t, false);
		all_rest = all_rest && t->reuse == PRS_REUSE_ALL;
	}
	return all_rest;
}

/* A Python thread without a thread id: recorded as it is, never kept. */
static void record_anonymous(struct prs_sampler *s, struct prs_target *tg,
			     const struct prs_py_thread *pt, uint64_t tick_ns, uint64_t share)
{
	struct prs_thr tmp;
	struct prs_sample smp;

	memset(&tmp, 0, sizeof(tmp));
	memset(&smp, 0, sizeof(smp));
	smp.state = PRS_STATE_RUNNING;
	smp.syscall = -1;
	tmp.tid = pt->tid;
	prs_record_stack(s, tg, &tmp, tick_ns, NULL, NULL, 0, pt, &smp);
	prs_durations_add(&s->d_cost, share);
}

/* Records one Python thread read this tick (share: its part of the read's cost). */
static void record_py_thread(struct prs_sampler *s, struct prs_target *tg,
			     const struct prs_py_thread *pt, uint64_t tick_ns, uint64_t share)
{
	struct prs_thr *t = pt->tid > 0 ? prs_thr_find(&tg->thr, pt->tid) : NULL;
	struct prs_sample smp;
	uint64_t s0;
	int sc;

	if (pt->tid > 0 && !t && (t = prs_thr_add(&tg->thr, pt->tid)) != NULL)
		prs_thr_record_name(&tg->thr, t, s->prof);
	if (!t) {
		record_anonymous(s, tg, pt, tick_ns, share);
		return;
	}
	if (t->reuse == PRS_REUSE_ALL) {
		prs_reuse_record_all(s, tg, t, tick_ns, share + t->check_ns, 1);
		return;
	}
	/* A thread-sample costs its share of the one batched read of all threads, and the read of
	 * its state (and its schedstat before, if it slept at its last sample). A thread the read
	 * saw running (its instruction pointer moved during it) runs: no /proc read (9.5 us cold of
	 * a 100 Hz sample's ~40). */
	s0 = prs_now_ns();
	memset(&smp, 0, sizeof(smp));
	if (pt->ran) {
		t->wait_addr = 0;
		smp.state = PRS_STATE_RUNNING;
		sc = -1;
	} else {
		smp.state = (uint8_t)vm_state(tg, t, &sc);
	}
	smp.syscall = (int16_t)sc;
	s0 = prs_now_ns() - s0;
	prs_durations_add(&s->d_state, s0);
	prs_durations_add(&s->d_cost, share + t->check_ns + s0);
	prs_record_stack(s, tg, t, tick_ns, NULL, NULL, 0, pt, &smp);
	/* at rest since before the memory read, if it sleeps now and its schedstat was read */
	t->kept.at_rest = t->kept.valid && t->tick_ss_ok;
	t->kept.rest = t->tick_ss;
}

static void vm_tick(struct prs_sampler *s, struct prs_target *tg, uint64_t now_ns)
{
	uint64_t tick_ns = prs_now_ns(), p0, p1, share;

	(void)now_ns;
	if (!tg->py)
		return;
	if (plan(s, tg, tick_ns)) {
		for (int i = 0; i < tg->npyt; i++) {
			struct prs_thr *t = prs_thr_find(&tg->thr, tg->pyt[i].tid);

			prs_reuse_record_all(s, tg, t, tick_ns, t->check_ns, 1);
		}
		return;
	}
	p0 = prs_now_ns();
	if (prs_target_py_sample(s, tg) != 0)
		return;
	p1 = prs_now_ns();
	tg->last_py_read = p1;
	prs_durations_add(&s->d_python, p1 - p0);
	share = tg->npyt ? (p1 - p0) / (uint64_t)tg->npyt : 0;
	for (int i = 0; i < tg->npyt; i++)
		record_py_thread(s, tg, &tg->pyt[i], tick_ns, share);
	prs_target_py_names(s, tg);
}

/* Memory reads only: nothing to seize, but the target must be Python. */
static int vm_attach(struct prs_sampler *s, struct prs_target *tg, struct prs_err *err)
{
	struct prs_py *py = NULL;
	int rc = prs_py_open(tg->pid, &s->opts.py, &py, err);

	if (rc == -EPERM || rc == -EACCES) {
		char why[512];

		rc = prs_err_set(err, -EPERM, "%s", prs_explain_eperm(tg->pid, why, sizeof(why)));
	}
	prs_py_free(py);
	return rc;
}

const struct prs_source_ops prs_source_vm = {
	.name = "vm",
	.traces = false,
	.attach = vm_attach,
	.tick = vm_tick,
};
