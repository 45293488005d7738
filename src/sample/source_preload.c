/* SPDX-License-Identifier: MIT */
/*
 * The preload sample source (--mode preload): the agent inside the launched program samples each
 * thread on its own CPU-time timer and writes registers, a stack copy and raw Python frames into
 * a ring shared with pyrsprof (src/agent/ring.h). Each look (a tick of the loop: every 10 ms at
 * 1000 Hz, preload_look_ns) drains the ring: every sample is unwound here with the same unwinder
 * as ptrace mode (the copy is its stack memory, the target's maps the rest), its Python frames
 * named by the same reader, and recorded like any other. The timers count CPU time: threads
 * asleep are sampled from outside, at each look, for what they slept since the last
 * (preload_offcpu.c).
 *
 * Nothing is ptraced: this works where ptrace is refused (a seccomp filter, Yama scope 3, a
 * container without CAP_SYS_PTRACE), with process_vm_readv and /proc/PID/maps for the unwinder
 * and the Python reader as in vm mode.
 *
 * With --subprocesses every process of the tree has a ring of its own and a target
 * (preload_follow.c); the counts of every ring are summed in the root's (sum) for the profile.
 */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "agent/ring.h"
#include "pyrsprof/python.h"
#include "pyrsprof/task.h"
#include "pyrsprof/util.h"
#include "sample/preload-internal.h"
#include "sample/preload-tree-internal.h"
#include "sample/sampler-internal.h"
#include "util/banned.h"

#define RING_SLOTS 128
#define PRUNE_NS 500000000ull /* threads gone are looked for this often (no exit events here) */
#define RING_STACK_MAX (64 * 1024)
#define LOOK_NS 10000000ull /* pyrsprof looks at the program this often at most (see look_ns) */

/* What the rings counted (their headers' counters), summed over the processes of the tree. */
struct ring_counts {
	uint64_t written, dropped, timers, perf_clocks, py_walks, foreign, offcpu, code_reused;
	uint64_t children_lost;
	uint64_t exit_unread, exit_wait_max_ns; /* the followed processes' waits at their exit */
	bool handler, sigprof;
};

struct prs_preload {
	int fd;                       /* the memfd, -1 once the program has it (or the agent made it) */
	struct prs_ring_hdr *h;
	size_t size;
	uint32_t nslots, stack_cap;   /* as created: the header's copies are the program's to spoil */
	uint32_t *ready;              /* slots found READY in a drain */
	struct prs_py_stack *raw;     /* a slot's Python frames, copied out of the ring */
	struct prs_py_thread *named;
	struct prs_thr gone;          /* stands for a thread that exited before its samples were read */
	bool py_published;
	bool agent_seen;
	struct prs_offcpu off;        /* the sleeping threads' samples (preload_offcpu.c) */
	uint64_t last_prune;
	uint32_t gen;                 /* the agent generation (image) samples are recorded for */
	uint64_t stale;               /* samples of an image replaced by an exec, dropped */
	struct prs_preload_env env;
	/* the root's: the tree's rings (--subprocesses, else NULL), the counts of rings gone */
	struct prs_preload_tree *tree;
	struct ring_counts sum;
	uint64_t children_seen;       /* forked children whose rings were announced */
	uint64_t read;                /* samples read from the ring (backlog) */
};

void prs_preload_free(struct prs_preload *p)
{
	if (!p)
		return;
	if (p->h)
		munmap(p->h, p->size);
	if (p->fd >= 0)
		close(p->fd);
	prs_preload_tree_free(p->tree);
	free(p->ready);
	free(p->raw);
	free(p->named);
	free(p);
}

/* The state of one process's ring of nslots slots of cap stack bytes, not mapped yet. */
static struct prs_preload *preload_alloc(uint32_t nslots, uint32_t cap)
{
	struct prs_preload *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->fd = -1;
	p->nslots = nslots;
	p->stack_cap = cap;
	p->size = (size_t)prs_ring_size(p->nslots, p->stack_cap);
	p->ready = calloc(p->nslots, sizeof(*p->ready));
	p->raw = malloc(sizeof(*p->raw));
	p->named = malloc(sizeof(*p->named));
	if (!p->ready || !p->raw || !p->named) {
		prs_preload_free(p);
		return NULL;
	}
	return p;
}

/* The ring for one program: a memfd, its header filled. */
static int ring_new(struct prs_sampler *s, struct prs_preload **out, struct prs_err *err)
{
	size_t cap = s->opts.stack_bytes < RING_STACK_MAX ? s->opts.stack_bytes : RING_STACK_MAX;
	struct prs_preload *p = preload_alloc(RING_SLOTS, (uint32_t)cap);

	if (!p)
		return prs_err_set(err, -ENOMEM, "out of memory");
	p->fd = memfd_create("pyrsprof-ring", MFD_CLOEXEC);
	if (p->fd < 0 || ftruncate(p->fd, (off_t)p->size) != 0 ||
	    (p->h = mmap(NULL, p->size, PROT_READ | PROT_WRITE, MAP_SHARED, p->fd, 0)) == MAP_FAILED) {
		int e = errno;

		p->h = NULL;
		prs_preload_free(p);
		return prs_err_set(err, -e, "shared memory for the agent: %s", strerror(e));
	}
	p->h->magic = PRS_RING_MAGIC;
	p->h->version = PRS_RING_VERSION;
	p->h->nslots = p->nslots;
	p->h->stack_cap = p->stack_cap;
	p->h->slot_size = prs_ring_slot_size(p->stack_cap);
	p->h->slots_off = prs_ring_slots_off();
	p->h->profiler_pid = getpid();
	p->h->period_ns = (uint64_t)s->period_ns;
	p->h->clock = s->opts.agent_posix_clock ? PRS_CLOCK_POSIX : PRS_CLOCK_AUTO;
	*out = p;
	return 0;
}

/* Before the fork: the ring, the checks, and the environment that loads the agent. */
static int preload_prepare(struct prs_sampler *s, struct prs_target *tg, char *const argv[],
			   struct prs_err *err)
{
	char agent[4096], follow[sizeof(struct prs_follow_cfg) + 64];
	struct prs_preload *p;
	int rc;

	if ((rc = prs_preload_agent_path(agent, sizeof(agent), s->opts.agent_path, err)) != 0 ||
	    (rc = prs_preload_check_program(argv[0], s->ptrace_refused[0] ? s->ptrace_refused : NULL,
						 err)) != 0)
		return rc;
	if (!tg->preload && (rc = ring_new(s, &tg->preload, err)) != 0)
		return rc;
	p = tg->preload;
	/* --subprocesses: the other processes of the tree announce rings of their own */
	if (s->opts.subprocesses && !p->tree) {
		struct prs_follow_cfg cfg = { .period_ns = p->h->period_ns, .nslots = p->nslots,
					      .stack_cap = p->stack_cap, .clock = p->h->clock };

		if ((rc = prs_preload_tree_new(&cfg, &p->tree, follow, sizeof(follow), err)) != 0)
			return rc;
	}
	/* the child inherits the descriptor: close-on-exec is off until the fork is done */
	if (fcntl(p->fd, F_SETFD, 0) != 0)
		return prs_err_set(err, -errno, "fcntl: %s", strerror(errno));
	return prs_preload_env_set(&p->env, agent, p->fd, p->tree ? follow : NULL, err);
}

static void preload_launched(struct prs_sampler *s, struct prs_target *tg)
{
	(void)s;
	if (!tg->preload)
		return;
	if (tg->preload->env.set)
		prs_preload_env_restore(&tg->preload->env);
	fcntl(tg->preload->fd, F_SETFD, FD_CLOEXEC);
}

/* Hands the interpreter's layout to the agent once the reader has found it. */
static void publish_python(struct prs_target *tg, struct prs_preload *p)
{
	const struct prs_pywalk *w;

	if (p->py_published || !tg->py || p->gen == 0)
		return;
	w = prs_py_walker(tg->py);
	p->h->py_walk = *w;
	p->h->py_walk.L = NULL;
	p->h->py_layout = *w->L;
	__atomic_store_n(&p->h->py_gen, p->gen, __ATOMIC_RELEASE);
	p->py_published = true;
}

/*
 * Copies a slot's raw Python frames out of the ring (the program may rewrite them meanwhile: the
 * count is read once, checked, and only that many frames copied). Not the whole structure: its
 * arrays hold PRS_MAX_PY_FRAMES frames, 17 KB, for the ~20 a sample has; copied whole, they were
 * a fifth of pyrsprof's instructions per sample of a 20-frame Python loop (callgrind). Returns
 * false when the count is out of bounds.
 */
static bool copy_py_raw(struct prs_py_stack *dst, const struct prs_py_stack *src)
{
	uint32_t n = __atomic_load_n(&src->nframes, __ATOMIC_RELAXED);

	if (n > PRS_MAX_PY_FRAMES)
		return false;
	memcpy(dst, src, offsetof(struct prs_py_stack, code));
	dst->nframes = n;
	memcpy(dst->code, src->code, n * sizeof(dst->code[0]));
	memcpy(dst->off, src->off, n * sizeof(dst->off[0]));
	memcpy(dst->flags, src->flags, n * sizeof(dst->flags[0]));
	memcpy(dst->ident, src->ident, n * sizeof(dst->ident[0]));
	return true;
}

/* The Python frames of a slot, named; NULL when it has none. */
static const struct prs_py_thread *slot_python(struct prs_sampler *s, struct prs_target *tg,
					       struct prs_preload *p, const struct prs_ring_slot *sl)
{
	if (!(sl->flags & PRS_SLOTF_PY) || !tg->py)
		return NULL;
	if (!copy_py_raw(p->raw, &sl->py))
		return NULL;
	if (prs_py_name(tg->py, s->prof, p->raw, p->named) != 0)
		return NULL;
	p->named->name = prs_py_thread_name(tg->py, s->prof, p->named->thread_id);
	return p->named;
}

/* Keeps pt as this tick's Python thread of its tid (names, the GIL holder for the caller). */
static void note_py_thread(struct prs_target *tg, const struct prs_py_thread *pt)
{
	int i;

	for (i = 0; i < tg->npyt && tg->pyt[i].tid != pt->tid; i++)
		;
	if (i == tg->npyt) {
		if (tg->npyt >= PRS_MAX_PY_THREADS)
			return;
		tg->npyt++;
	}
	/* its frames only, not the arrays' PRS_MAX_PY_FRAMES slots (5 KB) */
	memcpy(&tg->pyt[i], pt, offsetof(struct prs_py_thread, frames));
	memcpy(tg->pyt[i].frames, pt->frames, pt->nframes * sizeof(pt->frames[0]));
	memcpy(tg->pyt[i].fflags, pt->fflags, pt->nframes * sizeof(pt->fflags[0]));
}

/* One sample from the ring, recorded. */
static void record_slot(struct prs_sampler *s, struct prs_target *tg, struct prs_preload *p,
			const struct prs_ring_slot *sl)
{
	struct prs_regs regs;
	struct prs_snapshot snap;
	struct prs_sample smp;
	struct prs_kstop kstop;
	const struct prs_py_thread *pt;
	struct prs_thr *t;
	uint64_t u0 = prs_now_ns();
	int n = 0;

	if (sl->tid <= 0)
		return;
	t = prs_thr_find(&tg->thr, sl->tid);
	/* a thread gone, read after its exit: recorded as it was, not counted as a new thread */
	if (!t && (tg->exited || !prs_task_exists(tg->pid, sl->tid))) {
		memset(&p->gone, 0, sizeof(p->gone));
		p->gone.tid = sl->tid;
		t = &p->gone;
	}
	if (!t && (t = prs_thr_add(&tg->thr, sl->tid)) != NULL)
		prs_thr_record_name(&tg->thr, t, s->prof);
	if (!t)
		return;
	memset(&regs, 0, sizeof(regs));
	memcpy(regs.r, sl->regs, sizeof(regs.r));
	regs.orig_rax = (uint64_t)-1;
	regs.fs_base = sl->fs_base;
	snap.base = regs.r[PRS_REG_RSP];
	snap.len = sl->stack_len < p->stack_cap ? sl->stack_len : p->stack_cap;
	snap.data = sl->stack;
	if (tg->uw)
		n = prs_preload_unwind(s, tg, &regs, &snap, &p->off);
	pt = slot_python(s, tg, p, sl);
	memset(&smp, 0, sizeof(smp));
	smp.state = PRS_STATE_RUNNING;
	smp.syscall = -1;
	smp.weight = sl->weight >= 1 && sl->weight <= 10000 ? sl->weight : 1;
	t->wait_addr = 0;
	/* kernel frames (kstack.c): the perf samples up to the signal's delivery, of the PC it
	 * interrupted; those of the delivery and the handler left out. Not for a thread gone: no
	 * event of its own. */
	kstop.on_cpu = true;
	kstop.interrupt_ns = sl->time_ns > PRS_KSTACK_SIGNAL_NS ? sl->time_ns - PRS_KSTACK_SIGNAL_NS : 0;
	kstop.cont_ns = sl->time_ns + (sl->handler_ns < (uint64_t)s->period_ns ? sl->handler_ns
									: (uint64_t)s->period_ns);
	kstop.user_pc = sl->regs[PRS_REG_RIP];
	kstop.preempted = kstop.native = kstop.from_perf = false; /* (no user stacks: the agent's are its own) */
	prs_record_stack_k(s, tg, t, sl->time_ns > s->t0 ? sl->time_ns : s->t0, s->pcs, s->frame_ids,
			   n, pt, &smp, t == &p->gone ? NULL : &kstop);
	t->last_stack = smp.stack; /* where its waits for a CPU are shown (preload_offcpu.c) */
	t->last_stack_ok = true;
	if (pt)
		note_py_thread(tg, pt);
	/* the target's share: its handler; ours: the unwind and the naming */
	prs_durations_add(&s->d_stop, sl->handler_ns);
	prs_durations_add(&s->d_cost, sl->handler_ns + (prs_now_ns() - u0));
}

/* Whether slot sl is of the image samples are recorded for; a newer one means the program
 * exec'ed (the agent started again): the old image's maps and interpreter are forgotten. */
static bool slot_current(struct prs_sampler *s, struct prs_target *tg, struct prs_preload *p,
			 const struct prs_ring_slot *sl)
{
	uint32_t gen = sl->gen;

	if (gen < p->gen || gen == 0) {
		p->stale++;
		return false;
	}
	if (gen > p->gen) {
		if (p->gen != 0) {
			prs_target_exec(tg, true);
			prs_tree_record_command(s, tg); /* (as ptrace's exec event) */
			prs_target_refresh_maps(tg, prs_now_ns());
			prs_target_try_python(s, tg, prs_now_ns(), true);
		}
		p->gen = gen;
		p->py_published = false;
	}
	return true;
}

/* Slot i, from pyrsprof's own copy of the geometry: the header is the program's to scribble on. */
static struct prs_ring_slot *slot_at(const struct prs_preload *p, uint32_t i)
{
	return (struct prs_ring_slot *)((uint8_t *)p->h + prs_ring_slots_off() +
					 (uint64_t)i * prs_ring_slot_size(p->stack_cap));
}

/* Sorts the ready slots by sequence number (few: insertion sort). */
static void sort_ready(struct prs_preload *p, uint32_t n)
{
	for (uint32_t i = 1; i < n; i++) {
		uint32_t v = p->ready[i], j = i;
		uint64_t seq = slot_at(p, v)->seq;

		for (; j > 0 && slot_at(p, p->ready[j - 1])->seq > seq; j--)
			p->ready[j] = p->ready[j - 1];
		p->ready[j] = v;
	}
}

/* Records every sample waiting in the ring, oldest first, and frees their slots. */
static void drain(struct prs_sampler *s, struct prs_target *tg, struct prs_preload *p)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < p->nslots; i++)
		if (prs_ring_ready(slot_at(p, i)))
			p->ready[n++] = i;
	if (n == 0)
		return;
	sort_ready(p, n);
	tg->npyt = 0;
	for (uint32_t i = 0; i < n; i++) {
		struct prs_ring_slot *sl = slot_at(p, p->ready[i]);

		if (slot_current(s, tg, p, sl))
			record_slot(s, tg, p, sl);
		prs_ring_release(sl);
		p->read++;
	}
	/* the agent thins its samples while this lags (agent.c thin_out) */
	__atomic_store_n(&p->h->read, p->read, __ATOMIC_RELEASE);
	if (tg->py) {
		prs_py_end(tg->py);
		prs_target_py_names(s, tg);
	}
}

/* The agent's word on itself, once. */
static void check_agent(struct prs_sampler *s, struct prs_preload *p)
{
	int state = __atomic_load_n(&p->h->agent_state, __ATOMIC_ACQUIRE);
	char msg[sizeof(p->h->agent_msg)];

	if (p->agent_seen || state == PRS_AGENT_NONE)
		return;
	p->agent_seen = true;
	if (state != PRS_AGENT_FAILED)
		return;
	memcpy(msg, p->h->agent_msg, sizeof(msg));
	msg[sizeof(msg) - 1] = '\0';
	for (char *c = msg; *c; c++)
		if (*c < ' ' || *c > '~')
			*c = '?';
	prs_session_note(s, "the preload agent stopped: %s (try --mode ptrace)", msg);
}

/* Forgets the threads that exited (nothing reports their exit without ptrace): the table
 * stays the size of the live threads under churn. */
static void prune_threads(struct prs_target *tg, struct prs_preload *p, uint64_t now_ns)
{
	if (now_ns - p->last_prune < PRUNE_NS)
		return;
	p->last_prune = now_ns;
	for (size_t i = 0; i < tg->thr.n;) {
		if (tg->thr.v[i].tid != tg->pid && !prs_task_exists(tg->pid, tg->thr.v[i].tid))
			prs_thr_remove(&tg->thr, &tg->thr.v[i]);
		else
			i++;
	}
}

/* Before any target's tick: the agents' Python frames wait for the layout, and the ticks may be
 * long (an unwinder's start reads every module's CFI: tens of ms for a new process of the tree). */
static void preload_begin(struct prs_sampler *s, struct prs_target *tg, uint64_t now_ns)
{
	(void)now_ns;
	if (!tg->preload)
		return;
	check_agent(s, tg->preload);
	publish_python(tg, tg->preload);
}

/*
 * Before a slow step: an unwinder's start reads every module's CFI (100 ms and more for a new
 * Python process on a loaded machine, and a tree brings several at once). The rings announced
 * meanwhile are taken and every target's interpreter layout published first: a worker a young
 * forkserver forks gets its Python frames from its first samples, not after the others' starts.
 */
static void catch_up(struct prs_sampler *s, uint64_t now_ns)
{
	struct prs_preload *root = s->targets[0]->preload;

	if (!root || !root->tree)
		return;
	prs_preload_tree_accept(s, root->tree);
	for (size_t i = 0; i < s->ntargets; i++) {
		struct prs_target *tg = s->targets[i];

		if (!tg->preload || tg->exited || tg->preload->py_published)
			continue;
		prs_target_try_python(s, tg, now_ns, false);
		publish_python(tg, tg->preload);
	}
}

/* Reads tg's ring: its unwinder made at the first look (once the agent runs: the loader has
 * mapped every library by then; at the exec, only the program and the loader are there). */
static void read_ring(struct prs_sampler *s, struct prs_target *tg, struct prs_preload *p,
		      uint64_t now_ns)
{
	if (!tg->uw && p->agent_seen) {
		catch_up(s, now_ns);
		if (prs_unwinder_new(tg->pid, &tg->uw, NULL) == 0)
			tg->last_maps_refresh = now_ns;
	}
	prs_target_refresh_maps(tg, now_ns);
	p->off.refreshed = false;
	drain(s, tg, p);
}

/* A followed process waits at its exit for its samples to be read (follow-agent.h). */
static bool exiting(const struct prs_preload *p)
{
	return __atomic_load_n(&p->h->exit_ns, __ATOMIC_ACQUIRE) != 0;
}

/* Samples written and not read yet (the agent's count, the program's to spoil: a guess for
 * what to read first, nothing more). */
static uint64_t backlog(const struct prs_preload *p)
{
	uint64_t written = __atomic_load_n(&p->h->written, __ATOMIC_RELAXED);

	return written > p->read ? written - p->read : 0;
}

/* Whether target tg's ring is to be read now, before the next target's look: its process waits
 * at its exit (exiting), or more than half its slots are unread. */
static bool urgent(const struct prs_target *tg, bool exiting_only)
{
	const struct prs_preload *p = tg->preload;
	uint64_t b;

	if (!p || tg->exited || !tg->own_image)
		return false;
	b = backlog(p);
	return b > 0 && (exiting(p) || (!exiting_only && b >= p->nslots / 2));
}

static void serve(struct prs_sampler *s, struct prs_target *tg, uint64_t now_ns)
{
	check_agent(s, tg->preload);
	read_ring(s, tg, tg->preload, now_ns);
}

/*
 * The rings that cannot wait for their turn are read before each target's look: a process
 * waiting at its exit for its samples to be read first (again after each of the others), then a
 * ring half full. On a machine the tree keeps busy, pyrsprof gets 1/N of it, and a round of looks
 * over a tree of ~27 processes took seconds (each new process's first look: its unwinder, its
 * interpreter, cold unwinds): the exit waits ran into their bound, their samples were read after
 * the exit, unnamed, and the rings of the others filled (a spawned worker's 128 slots held its
 * start-up, its work was dropped).
 */
static void serve_urgent(struct prs_sampler *s, uint64_t now_ns)
{
	for (size_t i = 0; i < s->ntargets; i++)
		if (urgent(s->targets[i], true))
			serve(s, s->targets[i], now_ns);
	for (size_t i = 0; i < s->ntargets; i++) {
		if (!urgent(s->targets[i], false))
			continue;
		serve(s, s->targets[i], now_ns);
		for (size_t j = 0; j < s->ntargets; j++)
			if (urgent(s->targets[j], true))
				serve(s, s->targets[j], now_ns);
	}
}

static void preload_tick(struct prs_sampler *s, struct prs_target *tg, uint64_t now_ns)
{
	struct prs_preload *p = tg->preload;

	if (!p)
		return;
	serve_urgent(s, now_ns);
	read_ring(s, tg, p, now_ns);
	/* an exiting process's time since its exit began is the agent's wait, not the program's */
	if (!exiting(p))
		prs_preload_offcpu(s, tg, now_ns, &p->off);
	prune_threads(tg, p, now_ns);
}

static void add_meta_count(struct prs_sampler *s, const char *key, uint64_t v)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)v);
	prs_profile_meta(s->prof, key, buf);
}

/* Adds what the ring of tg counted (its header, written by the agent) into c. */
static void count_ring(struct ring_counts *c, const struct prs_target *tg, const struct prs_preload *p)
{
	struct prs_ring_hdr *h = p->h;
	uint64_t wait;

	c->written += __atomic_load_n(&h->written, __ATOMIC_RELAXED);
	c->dropped += __atomic_load_n(&h->dropped, __ATOMIC_RELAXED);
	c->timers += __atomic_load_n(&h->timers, __ATOMIC_RELAXED);
	c->perf_clocks += __atomic_load_n(&h->perf_clocks, __ATOMIC_RELAXED);
	c->py_walks += __atomic_load_n(&h->py_walks, __ATOMIC_RELAXED);
	c->foreign += __atomic_load_n(&h->foreign, __ATOMIC_RELAXED);
	c->children_lost += __atomic_load_n(&h->children_lost, __ATOMIC_RELAXED);
	c->exit_unread += __atomic_load_n(&h->exit_unread, __ATOMIC_RELAXED);
	wait = __atomic_load_n(&h->exit_wait_ns, __ATOMIC_RELAXED);
	if (wait > c->exit_wait_max_ns)
		c->exit_wait_max_ns = wait;
	c->handler |= __atomic_load_n(&h->program_handler, __ATOMIC_RELAXED) != 0;
	c->sigprof |= __atomic_load_n(&h->program_sigprof, __ATOMIC_RELAXED) != 0;
	c->offcpu += p->off.samples;
	if (tg->py) { /* frames whose code object was freed and its address reused before naming */
		struct prs_py_stats ps;

		prs_py_get_stats(tg->py, &ps);
		c->code_reused += ps.code_reused;
	}
}

/* The root's sums, where every ring's counts go when it is done (NULL: no root ring). */
static struct ring_counts *sums(struct prs_sampler *s)
{
	struct prs_preload *root = s->ntargets ? s->targets[0]->preload : NULL;

	return root ? &root->sum : NULL;
}

/* What the program did with signals the agent cares about (chain.h): said and kept in meta. */
static void note_program_signals(struct prs_sampler *s, const struct ring_counts *c)
{
	add_meta_count(s, "preload_foreign_signals", c->foreign);
	add_meta_count(s, "preload_program_handler", c->handler);
	add_meta_count(s, "preload_program_sigprof", c->sigprof);
	if (c->handler)
		prs_session_note(s, "the program set its own handler for SIGRTMIN+8, the preload agent's "
				 "signal: kept, the agent passed it the %llu signal%s it did not send and "
				 "went on sampling", (unsigned long long)c->foreign,
				 c->foreign == 1 ? "" : "s");
	if (c->sigprof)
		prs_session_note(s, "the program handles SIGPROF itself (ITIMER_PROF or a profiler of its "
				 "own): left to it, the preload agent samples on SIGRTMIN+8");
}

/* The profile's meta of every ring, and what the user should know of them. */
static void write_counts(struct prs_sampler *s, const struct ring_counts *c,
			 const struct prs_preload *root)
{
	uint64_t lost = prs_preload_tree_lost(root->tree) + c->children_lost;

	prs_profile_meta(s->prof, "source", "preload");
	add_meta_count(s, "preload_samples", c->written);
	add_meta_count(s, "preload_dropped", c->dropped);
	add_meta_count(s, "preload_timers", c->timers);
	add_meta_count(s, "preload_perf_clocks", c->perf_clocks);
	add_meta_count(s, "preload_py_walks", c->py_walks);
	add_meta_count(s, "preload_offcpu_samples", c->offcpu);
	add_meta_count(s, "preload_py_code_reused", c->code_reused);
	if (root->tree) {
		add_meta_count(s, "preload_processes_unfollowed", lost);
		add_meta_count(s, "preload_exit_unread", c->exit_unread);
		add_meta_count(s, "preload_exit_wait_max_ms", c->exit_wait_max_ns / 1000000);
	}
	if (c->dropped)
		prs_session_note(s, "the preload ring was full %llu time%s: those samples were dropped",
				 (unsigned long long)c->dropped, c->dropped == 1 ? "" : "s");
	if (c->exit_unread)
		prs_session_note(s, "%llu sample%s of processes of the tree were still unread when they "
				 "exited (pyrsprof late by more than their %.0f s wait): their Python frames "
				 "could not be named", (unsigned long long)c->exit_unread,
				 c->exit_unread == 1 ? "" : "s", PRS_FOLLOW_EXIT_WAIT_NS / 1e9);
	if (lost)
		prs_session_note(s, "%llu child process%s ran unprofiled: %s ring could not be made, "
				 "announced or mapped (a limit: descriptors, memory)",
				 (unsigned long long)lost, lost == 1 ? "" : "es", lost == 1 ? "its" : "their");
	note_program_signals(s, c);
}

/* An exec began (the agent's execve saw it) and no agent started in the new image to say so:
 * the new program cleared LD_PRELOAD (env -u LD_PRELOAD ...), is static or set-user-ID, or the
 * exec went around the libc wrappers. Nothing of it was sampled, and without this the profile
 * would just end at the exec. */
static void note_exec_without_agent(struct prs_sampler *s, struct prs_target *tg,
				    struct prs_preload *p)
{
	if (__atomic_load_n(&p->h->exec_pid, __ATOMIC_ACQUIRE) == 0)
		return;
	prs_session_note(s, "process %d exec'ed a program the preload agent did not start in (it "
			 "cleared LD_PRELOAD, or is static or set-user-ID): nothing after that exec "
			 "was sampled; use --mode ptrace", (int)tg->pid);
}

/* After the loop, for every target (the root first): the last samples, the agent told to stop,
 * its counts summed; with the last target, the profile's meta of them all. */
static void preload_end(struct prs_sampler *s, struct prs_target *tg)
{
	struct prs_preload *p = tg->preload, *root = s->targets[0]->preload;

	if (p) {
		drain(s, tg, p);
		__atomic_store_n(&p->h->stop, 1, __ATOMIC_RELEASE);
		check_agent(s, p);
		count_ring(&root->sum, tg, p);
		if (tg == s->targets[0] && !p->agent_seen &&
		    __atomic_load_n(&p->h->target_pid, __ATOMIC_RELAXED) == 0)
			prs_session_note(s, "the preload agent never started in the program (does it "
					 "clear LD_PRELOAD, or is it static?): nothing was sampled; use "
					 "--mode ptrace");
		else
			note_exec_without_agent(s, tg, p);
	}
	if (root && tg == s->targets[s->ntargets - 1])
		write_counts(s, &root->sum, root);
}

/* ---- the tree's rings (preload_follow.c) ---- */

int prs_preload_adopt(struct prs_sampler *s, struct prs_target *tg, struct prs_ring_hdr *h,
		      size_t size)
{
	struct prs_preload *root = s->targets[0]->preload;
	struct prs_preload *p = tg->preload;

	if (!p) {
		p = preload_alloc(root->nslots, root->stack_cap);
		if (!p) {
			munmap(h, size);
			return -ENOMEM;
		}
		tg->preload = p;
	} else {
		/* an exec: the old image's last samples, then the new image as ptrace's exec event */
		drain(s, tg, p);
		__atomic_store_n(&p->h->stop, 1, __ATOMIC_RELEASE);
		count_ring(&root->sum, tg, p);
		munmap(p->h, p->size);
		p->off.samples = 0;
		p->read = 0;
		p->py_published = false;
		p->agent_seen = false;
		prs_target_exec(tg, true);
		prs_tree_record_command(s, tg);
	}
	p->h = h;
	p->size = size;
	/* a ring the agent made is of one image (an exec makes another): its generation is 1, and
	 * the interpreter's layout can be published before any sample (a process that stays idle,
	 * a forkserver, passes it on to the children it forks) */
	p->gen = 1;
	return 0;
}

void prs_preload_gone(struct prs_sampler *s, struct prs_target *tg)
{
	struct prs_preload *p = tg->preload;

	drain(s, tg, p);
	count_ring(sums(s), tg, p);
	/* (its code objects were counted: the target is freed with its reader) */
	prs_target_exited(tg, 0);
	prs_thr_remove_all(&tg->thr);
}

uint64_t prs_preload_children_due(const struct prs_target *tg)
{
	const struct prs_preload *p = tg->preload;
	uint64_t forks, lost;

	if (!p)
		return 0;
	forks = __atomic_load_n(&p->h->forks, __ATOMIC_RELAXED);
	lost = __atomic_load_n(&p->h->children_lost, __ATOMIC_RELAXED);
	return forks > lost + p->children_seen ? forks - lost - p->children_seen : 0;
}

void prs_preload_child_seen(struct prs_target *parent)
{
	if (parent->preload)
		parent->preload->children_seen++;
}

/*
 * The loop's period: the CPU samples wait in the ring, and what the threads slept between two
 * looks is read from their schedstat (offtime-internal.h), so pyrsprof need not wake at each
 * period: at 1000 Hz it looks every 10 ms, not every ms (each wake costs it 17-27 us of CPU on the
 * dev VM, whatever the sleep call: docs/preload.md). The ring must hold what comes in meanwhile:
 * at most one sample a period per CPU the program can run on, kept to a quarter of the slots
 * (a look late by pyrsprof's own descheduling has the rest); on a machine with more CPUs than
 * that allows, every period.
 */
static uint64_t preload_look_ns(const struct prs_sampler *s)
{
	uint64_t period = (uint64_t)s->period_ns, k = period ? LOOK_NS / period : 1;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	uint64_t fit = RING_SLOTS / 4 / (uint64_t)(cpus > 0 ? cpus : 1);

	if (k > fit)
		k = fit;
	return (k > 1 ? k : 1) * period;
}

static bool preload_poll(struct prs_sampler *s, uint64_t now_ns)
{
	struct prs_preload *root = s->ntargets ? s->targets[0]->preload : NULL;

	return root && prs_preload_tree_poll(s, root->tree, now_ns);
}

const struct prs_source_ops prs_source_preload = {
	.name = "preload",
	.traces = false,
	.attach = NULL,
	.begin = preload_begin,
	.tick = preload_tick,
	.launch_prepare = preload_prepare,
	.launch_done = preload_launched,
	.end = preload_end,
	.poll = preload_poll,
	.look_ns = preload_look_ns,
};
