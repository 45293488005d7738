/* SPDX-License-Identifier: MIT */
/*
 * Sleeping threads (the reasons are in reuse-internal.h): first the pure decisions over
 * readings, then the sampler's side, which takes the readings through the thread's kept /proc
 * files and records the kept samples.
 */
#include "sample/reuse-internal.h"

#include <stdlib.h>
#include <string.h>

#include "pyrsprof/ptrace.h"
#include "pyrsprof/util.h"
#include "sample/sampler-internal.h"
#include "util/banned.h"

/* ---- the decisions ---- */

bool prs_same_schedstat(const struct prs_schedstat *a, const struct prs_schedstat *b)
{
	return a->cpu_ns == b->cpu_ns && a->slices == b->slices && a->wait_ns == b->wait_ns;
}

/*
 * A sleeping thread's stack as /proc and its memory show it now, against its last stop: asleep
 * in the same syscall with the same first argument, RSP and RIP, the same stack bytes under what
 * the unwind read, and the unwinder's maps unchanged.
 */
static bool native_unchanged(const struct prs_kept *k, const struct prs_native_probe *p)
{
	struct prs_task_sys sys;

	if (!k->native || !p->maps_ok || p->gen != k->gen)
		return false;
	if (p->syscall(p->ctx, &sys) != 0 || sys.running || sys.sp != k->sp || sys.pc != k->pc ||
	    (sys.nr != k->nr && sys.nr != k->restart_nr) || sys.args[0] != k->arg0)
		return false;
	if (!k->used)
		return true;
	return p->same_bytes(p->ctx, k->sp, p->snap, k->used);
}

enum prs_reuse prs_reuse_decide(const struct prs_kept *k, const struct prs_schedstat *now,
				const struct prs_native_probe *probe)
{
	if (k->at_rest && prs_same_schedstat(now, &k->rest))
		return PRS_REUSE_ALL;
	if (probe && native_unchanged(k, probe))
		return PRS_REUSE_NATIVE;
	return PRS_REUSE_NONE;
}

void prs_kept_sample(struct prs_kept *k, const struct prs_sample *smp)
{
	k->valid = smp->state == PRS_STATE_BLOCKED || smp->state == PRS_STATE_DISK;
	k->at_rest = false;
	k->stack = smp->stack;
	k->state = smp->state;
	k->syscall = smp->syscall;
	k->flags = smp->flags;
}

bool prs_kept_native(struct prs_kept *k, const struct prs_regs *regs, size_t snap_len,
		     const uint64_t *pcs, const uint32_t *ids, int n,
		     const struct prs_unwind_info *info, uint64_t gen)
{
	k->native = false;
	if (n <= 0 || info->method != PRS_UNWIND_FAST || info->remote_reads ||
	    info->snap_used > snap_len)
		return false;
	if (!k->pcs)
		k->pcs = malloc(PRS_MAX_NATIVE_FRAMES * sizeof(*k->pcs));
	if (!k->ids)
		k->ids = malloc(PRS_MAX_NATIVE_FRAMES * sizeof(*k->ids));
	if (!k->pcs || !k->ids)
		return false;
	memcpy(k->pcs, pcs, (size_t)n * sizeof(*k->pcs));
	memcpy(k->ids, ids, (size_t)n * sizeof(*k->ids));
	k->n = n;
	k->used = info->snap_used;
	k->sp = regs->r[PRS_REG_RSP];
	k->pc = regs->r[PRS_REG_RIP];
	k->gen = gen;
	k->nr = (int)regs->orig_rax;
	/* a restarted call keeps the registers it was entered with but RAX: /proc shows the same
	 * first argument (measured on futex waits restarted as restart_syscall) */
	k->arg0 = regs->r[PRS_REG_RDI];
	/* how the kernel restarts the call once we let it go (see prs_state_from_regs) */
	k->restart_nr = (int64_t)regs->r[PRS_REG_RAX] == -516 /* -ERESTART_RESTARTBLOCK */
				? PRS_SYS_RESTART_SYSCALL : k->nr;
	k->native = true;
	return true;
}

void prs_kept_release(struct prs_kept *k)
{
	free(k->pcs);
	free(k->ids);
	memset(k, 0, sizeof(*k));
}

/* ---- the sampler's side ---- */

struct probe_ctx {
	struct prs_sampler *s;
	struct prs_target *tg;
	struct prs_thr *t;
};

static int probe_syscall(void *ctx, struct prs_task_sys *sys)
{
	struct probe_ctx *c = ctx;

	return prs_thr_syscall(&c->tg->thr, c->t, sys);
}

static bool probe_same_bytes(void *ctx, uint64_t sp, const uint8_t *snap, size_t len)
{
	struct probe_ctx *c = ctx;
	struct prs_sampler *s = c->s;

	if (!s->cmp && !(s->cmp = malloc(s->opts.stack_bytes)))
		return false;
	return prs_read_stack(c->tg->pid, sp, s->cmp, len) == (ssize_t)len &&
	       memcmp(s->cmp, snap, len) == 0;
}

/* The decision for t, with the native check (ptrace mode) only where its last stop kept native
 * frames to compare against. */
static enum prs_reuse decide(struct prs_sampler *s, struct prs_target *tg, struct prs_thr *t,
			     bool ptrace_mode)
{
	struct probe_ctx ctx = { s, tg, t };
	struct prs_native_probe probe;

	if (!ptrace_mode || !t->kept.native)
		return prs_reuse_decide(&t->kept, &t->tick_ss, NULL);
	probe.maps_ok = tg->uw && !tg->maps_dirty;
	probe.gen = tg->uw ? prs_unwinder_generation(tg->uw) : 0;
	probe.syscall = probe_syscall;
	probe.same_bytes = probe_same_bytes;
	probe.ctx = &ctx;
	probe.snap = t->stack;
	return prs_reuse_decide(&t->kept, &t->tick_ss, &probe);
}

void prs_reuse_check(struct prs_sampler *s, struct prs_target *tg, struct prs_thr *t,
		     bool ptrace_mode)
{
	uint64_t c0 = prs_now_ns();
	bool reuse_idle = !s->opts.read_idle;

	t->reuse = PRS_REUSE_NONE;
	t->tick_ss_ok = false;
	t->check_ns = 0;
	if (ptrace_mode || (reuse_idle && t->kept.valid))
		t->tick_ss_ok = prs_thr_schedstat(&tg->thr, t, &t->tick_ss) == 0;
	if (reuse_idle && t->tick_ss_ok && t->kept.valid)
		t->reuse = decide(s, tg, t, ptrace_mode);
	t->check_ns = prs_now_ns() - c0;
	if (t->tick_ss_ok)
		prs_durations_add(&s->d_check, t->check_ns);
}

void prs_reuse_record_all(struct prs_sampler *s, struct prs_target *tg, struct prs_thr *t,
			  uint64_t tick_ns, uint64_t cost_ns, uint32_t weight)
{
	struct prs_sample smp;

	memset(&smp, 0, sizeof(smp));
	smp.time_ns = tick_ns - s->t0;
	smp.tid = t->tid;
	smp.pid = tg->pid;
	smp.state = t->kept.state;
	smp.syscall = t->kept.syscall;
	smp.stack = t->kept.stack;
	smp.flags = t->kept.flags;
	smp.weight = weight ? weight : 1;
	prs_record_count_wait(s, t, &smp); /* its word has not changed: the thread has not run */
	prs_profile_sample(s->prof, &smp);
	s->st.thread_samples++;
	s->st.reused_samples++;
	prs_durations_add(&s->d_cost, cost_ns);
	prs_cpu_balance_blocked(&t->bal, &t->tick_ss);
}

bool prs_reuse_record_native(struct prs_sampler *s, struct prs_target *tg, struct prs_thr *t,
			     uint64_t tick_ns, uint64_t share_ns)
{
	struct prs_schedstat now;
	struct prs_sample smp;
	uint64_t c0 = prs_now_ns();

	if (prs_thr_schedstat(&tg->thr, t, &now) != 0 || !prs_same_schedstat(&now, &t->tick_ss)) {
		s->st.reuse_lost++;
		return false;
	}
	memset(&smp, 0, sizeof(smp));
	smp.state = t->kept.state;
	smp.syscall = t->kept.syscall;
	t->wait_addr = smp.syscall == PRS_SYS_FUTEX ? t->kept.arg0 : 0; /* checked by the decision */
	prs_record_stack(s, tg, t, tick_ns, t->kept.pcs, t->kept.ids, t->kept.n,
			 prs_target_py_thread(tg, t->tid), &smp);
	t->kept.at_rest = true;
	t->kept.rest = now;
	s->st.reused_native++;
	prs_durations_add(&s->d_cost, t->check_ns + (prs_now_ns() - c0) + share_ns);
	prs_cpu_balance_blocked(&t->bal, &now);
	return true;
}

void prs_reuse_keep_native(struct prs_sampler *s, struct prs_target *tg, struct prs_thr *t, int n,
			   const struct prs_unwind_info *info)
{
	t->kept.native = false;
	if (s->opts.read_idle || !tg->uw || t->state != PRS_STATE_BLOCKED)
		return;
	prs_kept_native(&t->kept, &t->regs, t->stack_len, s->pcs, s->frame_ids, n, info,
			prs_unwinder_generation(tg->uw));
}
