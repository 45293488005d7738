/* SPDX-License-Identifier: MIT */
/*
 * The facts of a recording: its samples (facts_samples.c) reconciled with its accounting
 * records. Kernel accounting decides where it exists, samples say why a thread waited:
 * - a thread with kernel counts over the window (schedstat at START/END, taskstats at EXIT) gets
 *   its on-CPU and run-queue time from them; its blocked samples keep their reasons, and the
 *   off-CPU time no sample caught is "unseen" (short waits between ticks: measured on the dev VM,
 *   a 4 KiB O_DIRECT read loop is 59 % off-CPU by rusage while ptrace samples caught it running
 *   or just woken, never blocked);
 * - without per-thread kernel counts, samples "waiting for a CPU" are believed only when the
 *   target's CPUs were busy (idle share < PRS_IDLE_DOUBT) or its cgroup was throttled: a thread
 *   woken from a short block must be given a CPU to stop, which the sampler reads as a wait for
 *   one; with idle CPUs they are counted as unseen waits;
 * - unseen time of a process that moved at least PRS_DISK_RATE bytes/s to or from storage is
 *   counted as disk IO (medium confidence).
 * Then the budget over the active threads (idle workers left out: design note §1.4).
 */
#include "classify/facts-internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pyrsprof/acct.h"
#include "pyrsprof/util.h"

#include "util/banned.h"

#define PRS_IDLE_DOUBT 0.25        /* idle share of the CPUs above which run-queue samples are doubted */
#define PRS_DISK_RATE (1e6)        /* storage bytes/s that make unseen waits disk IO */
#define PRS_IDLE_CPU_SHARE 0.01    /* an idle worker uses less than this share of the process CPU */
#define PRS_IDLE_OWN_CPU_MAX 0.10  /* ... (or of its own life), and never more than this of its life */
#define PRS_IDLE_WAIT_SHARE 0.95   /* ... and waits in one syscall this share of its time */
#define PRS_CHILD_WAIT_SHARE 0.5   /* a parent waiting for its children's results waits this share */
#define PRS_TREE_DEPTH 8           /* process generations looked up for a busy descendant */

void prs_facts_note(struct prs_facts *f, const char *fmt, ...)
{
	va_list ap;

	if (f->nnotes >= PRS_FACTS_MAX_NOTES)
		return;
	va_start(ap, fmt);
	vsnprintf(f->notes[f->nnotes++], sizeof(f->notes[0]), fmt, ap);
	va_end(ap);
}

void prs_facts_release(struct prs_facts *f)
{
	free(f->threads);
	f->threads = NULL;
	f->nthreads = 0;
}

static double meta_num(const struct prs_profile *p, const char *key, double dflt)
{
	const char *v = prs_profile_meta_get(p, key);
	char *end;
	double d;

	if (!v)
		return dflt;
	d = strtod(v, &end);
	return end != v && *end == '\0' && d == d ? d : dflt;
}

/* ---- records ---- */

struct recs {
	struct prs_acct *a;
	size_t n;
};

static const struct prs_acct *find(const struct recs *r, int type, int phase, int64_t id,
				   int source)
{
	for (size_t i = 0; i < r->n; i++)
		if (r->a[i].type == type && (phase < 0 || r->a[i].phase == phase) &&
		    (id < 0 || r->a[i].id == id) &&
		    (source < 0 || (int)prs_acct_val(&r->a[i], PRS_TASK_SOURCE, 0) == source))
			return &r->a[i];
	return NULL;
}

/* end - start of field f (start missing: 0, the task was born in the window). */
static bool delta(const struct prs_acct *end, const struct prs_acct *start, unsigned f, uint64_t *out)
{
	uint64_t e, s = 0;

	if (!end || !prs_acct_get(end, f, &e))
		return false;
	if (start)
		prs_acct_get(start, f, &s);
	*out = e > s ? e - s : 0;
	return true;
}

/* Merges EXIT snapshots of one id (rusage and taskstats each know some fields) into *out. */
static bool merged_exit(const struct recs *r, int type, int64_t id, struct prs_acct *out)
{
	bool any = false;

	for (size_t i = 0; i < r->n; i++) {
		const struct prs_acct *a = &r->a[i];

		if (a->type != type || a->phase != PRS_PHASE_EXIT || (id >= 0 && a->id != id))
			continue;
		if (!any)
			*out = *a;
		for (unsigned k = 0; k < PRS_ACCT_MAX_FIELDS; k++)
			if ((a->have >> k & 1) && !(out->have >> k & 1))
				prs_acct_set(out, k, a->v[k]);
		any = true;
	}
	return any;
}

static void host_facts(struct prs_facts *f, const struct recs *r)
{
	const struct prs_acct *s = find(r, PRS_ACCT_SYSTEM, PRS_PHASE_START, -1, -1);
	const struct prs_acct *e = find(r, PRS_ACCT_SYSTEM, PRS_PHASE_END, -1, -1);
	uint64_t d[PRS_SYS__COUNT] = { 0 }, total = 0;

	if (!s || !e)
		return;
	for (unsigned k = PRS_SYS_USER; k <= PRS_SYS_STEAL; k++) {
		delta(e, s, k, &d[k]);
		total += d[k];
	}
	if (!total)
		return;
	f->have_steal = true;
	f->steal_share = (double)d[PRS_SYS_STEAL] / (double)total;
	f->idle_share = (double)(d[PRS_SYS_IDLE] + d[PRS_SYS_IOWAIT]) / (double)total;
}

static void cgroup_facts(struct prs_facts *f, const struct recs *r)
{
	const struct prs_acct *e = find(r, PRS_ACCT_CGROUP, PRS_PHASE_END, -1, -1);
	const struct prs_acct *s = find(r, PRS_ACCT_CGROUP, PRS_PHASE_START, -1, -1);
	uint64_t q, per, v;

	if (!e)
		return;
	/* the target moved to another cgroup meanwhile: that cgroup's counts from its creation */
	if (s && (s->nstr < 1 || e->nstr < 1 || strcmp(s->str[0], e->str[0]) != 0))
		s = NULL;
	f->have_cgroup = true;
	f->cg_version = (int)prs_acct_val(e, PRS_CG_VERSION, 0);
	snprintf(f->cg_path, sizeof(f->cg_path), "%s", e->nstr ? e->str[0] : "");
	if (prs_acct_get(e, PRS_CG_QUOTA_US, &q) && prs_acct_get(e, PRS_CG_PERIOD_US, &per) && per) {
		f->has_quota = true;
		f->quota_cpus = (double)q / (double)per;
	}
	if (delta(e, s, PRS_CG_THROTTLED_US, &v))
		f->throttled_s = (double)v / 1e6;
	if (delta(e, s, PRS_CG_NR_PERIODS, &v))
		f->nr_periods = v;
	if (delta(e, s, PRS_CG_NR_THROTTLED, &v))
		f->nr_throttled = v;
}

static void process_facts(struct prs_facts *f, const struct recs *r)
{
	struct prs_acct fin;
	const struct prs_acct *start = find(r, PRS_ACCT_PROCESS, PRS_PHASE_START, -1, -1), *end;
	uint64_t u = 0, s = 0, v;

	if (merged_exit(r, PRS_ACCT_PROCESS, -1, &fin))
		end = &fin;
	else
		end = find(r, PRS_ACCT_PROCESS, PRS_PHASE_END, -1, -1);
	if (!end)
		return;
	if (delta(end, start, PRS_TASK_UTIME_NS, &u) && delta(end, start, PRS_TASK_STIME_NS, &s)) {
		f->have_proc = true;
		f->user_s = (double)u / 1e9;
		f->sys_s = (double)s / 1e9;
		f->cpu_s = f->user_s + f->sys_s;
	}
	if (delta(end, start, PRS_TASK_CPU_NS, &v) && v) {
		f->have_proc = true;
		f->cpu_s = (double)v / 1e9; /* exact (ns) where known; user/sys stay tick-based */
	}
	if (prs_acct_get(end, PRS_TASK_RSS_PEAK_KB, &f->rss_peak_kb))
		f->have_rss = true;
	if (prs_acct_get(end, PRS_TASK_WSS_BYTES, &v) && prs_acct_val(end, PRS_TASK_WSS_WINDOW_NS, 0)) {
		f->have_wss = true;
		f->wss_bytes = (double)v;
		f->wss_max_bytes = (double)prs_acct_val(end, PRS_TASK_WSS_MAX_BYTES, v);
		f->wss_window_s = (double)prs_acct_val(end, PRS_TASK_WSS_WINDOW_NS, 0) / 1e9;
		f->wss_samples = (unsigned)prs_acct_val(end, PRS_TASK_WSS_SAMPLES, 0);
	}
	f->have_faults = delta(end, start, PRS_TASK_MINFLT, &f->minflt) &&
			 delta(end, start, PRS_TASK_MAJFLT, &f->majflt);
	f->have_csw = delta(end, start, PRS_TASK_NVCSW, &f->nvcsw) &&
		      delta(end, start, PRS_TASK_NIVCSW, &f->nivcsw);
	f->have_io = delta(end, start, PRS_TASK_READ_BYTES, &f->read_bytes);
	delta(end, start, PRS_TASK_WRITE_BYTES, &f->write_bytes);
	f->have_chars = delta(end, start, PRS_TASK_RCHAR, &f->rchar) &&
			delta(end, start, PRS_TASK_WCHAR, &f->wchar);
	f->have_syscalls = delta(end, start, PRS_TASK_SYSCR, &f->syscr) &&
			   delta(end, start, PRS_TASK_SYSCW, &f->syscw);
	if (!f->have_io && delta(end, start, PRS_TASK_INBLOCK, &v)) {
		/* rusage block operations are 512-byte units */
		f->have_io = true;
		f->read_bytes = v * 512;
		if (delta(end, start, PRS_TASK_OUBLOCK, &v))
			f->write_bytes = v * 512;
	}
}

static void counter_facts(struct prs_facts *f, const struct recs *r)
{
	f->counters.n = 0;
	for (size_t i = 0; i < r->n && f->counters.n < PRS_MAX_COUNTERS; i++)
		if (r->a[i].type == PRS_ACCT_COUNTER)
			prs_counter_from_acct(&r->a[i], &f->counters.c[f->counters.n++]);
	f->counters_read = f->counters.n > 0;
	f->topdown = f->have_machine ? f->machine.topdown : 0;
	prs_cpu_metrics(&f->counters, f->topdown, &f->cpu);
}

/* ---- reconciliation ---- */

/* Puts kernel on-CPU and run-queue time into t; blocked samples keep their reasons. */
static void reconcile(struct prs_thread_facts *t, double cpu_s, double runq_s, bool have_runq)
{
	double wall = t->wall_s, blocked = 0, off, scale;

	if (cpu_s > wall)
		cpu_s = wall;
	if (!have_runq)
		runq_s = t->t[PRS_R_RUNQ];
	if (runq_s > wall - cpu_s)
		runq_s = wall - cpu_s;
	off = wall - cpu_s - runq_s;
	for (int r = PRS_R_IO_DISK; r < PRS_R_UNSEEN; r++)
		blocked += t->t[r];
	scale = blocked > off && blocked > 0 ? off / blocked : 1;
	for (int r = PRS_R_IO_DISK; r < PRS_R_UNSEEN; r++)
		t->t[r] *= scale;
	t->t[PRS_R_CPU] = cpu_s;
	t->t[PRS_R_RUNQ] = runq_s;
	t->t[PRS_R_UNSEEN] = off - blocked * scale;
	if (t->t[PRS_R_UNSEEN] < 0)
		t->t[PRS_R_UNSEEN] = 0;
	t->kernel = true;
}

static int by_type_id(const void *a, const void *b)
{
	const struct prs_acct *x = a, *y = b;

	if (x->type != y->type)
		return x->type < y->type ? -1 : 1;
	if (x->id != y->id)
		return x->id < y->id ? -1 : 1;
	return x->phase < y->phase ? -1 : x->phase > y->phase;
}

/* The records of one type and id: a slice of r (sorted by by_type_id). */
static struct recs records_of(const struct recs *r, int type, int64_t tid)
{
	struct prs_acct key;
	size_t lo = 0, hi = r->n, end;

	key.type = (uint8_t)type;
	key.id = tid;
	key.phase = 0;
	while (lo < hi) { /* the first record not below (THREAD, tid, phase 0) */
		size_t mid = lo + (hi - lo) / 2;

		if (by_type_id(&r->a[mid], &key) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (end = lo; end < r->n && r->a[end].type == type && r->a[end].id == tid; end++)
		;
	/* none (no accounting records: folded input, older files): r->a may be NULL, no offset */
	return (struct recs){ end > lo ? r->a + lo : NULL, end - lo };
}

static void thread_kernel(struct prs_facts *f, const struct recs *r)
{
	for (size_t i = 0; i < f->nthreads; i++) {
		struct prs_thread_facts *t = &f->threads[i];
		struct recs mine = records_of(r, PRS_ACCT_THREAD, t->tid);
		const struct prs_acct *start = find(&mine, PRS_ACCT_THREAD, PRS_PHASE_START, t->tid, -1);
		const struct prs_acct *end = find(&mine, PRS_ACCT_THREAD, PRS_PHASE_END, t->tid, -1);
		struct prs_acct ex;
		uint64_t cpu, runq, ut, st;
		bool have_runq;

		if (!end && merged_exit(&mine, PRS_ACCT_THREAD, t->tid, &ex))
			end = &ex;
		if (!end || !delta(end, start, PRS_TASK_CPU_NS, &cpu))
			continue;
		have_runq = delta(end, start, PRS_TASK_RUNQ_NS, &runq);
		t->have_csw = delta(end, start, PRS_TASK_NVCSW, &t->nvcsw) &&
			      delta(end, start, PRS_TASK_NIVCSW, &t->nivcsw);
		reconcile(t, (double)cpu / 1e9, have_runq ? (double)runq / 1e9 : 0, have_runq);
		f->kernel_threads = true;
		if (delta(end, start, PRS_TASK_UTIME_NS, &ut) && delta(end, start, PRS_TASK_STIME_NS, &st) &&
		    ut + st > 0) {
			t->have_system = true;
			t->system_share = (double)st / (double)(ut + st);
		}
	}
}

/* A thread's switch records (EXIT and END: it stored one of them, summed all the same). */
static void thread_switches(struct prs_facts *f, const struct recs *r, struct prs_thread_facts *t)
{
	struct recs mine = records_of(r, PRS_ACCT_SWITCH, t->tid);

	for (size_t i = 0; i < mine.n; i++) {
		const struct prs_acct *a = &mine.a[i];

		t->have_sw = true;
		t->sw_preempt += prs_acct_val(a, PRS_SW_PREEMPT, 0);
		t->sw_voluntary += prs_acct_val(a, PRS_SW_VOLUNTARY, 0);
		t->sw_preempt_s += (double)prs_acct_val(a, PRS_SW_PREEMPT_NS, 0) / 1e9;
		t->sw_voluntary_s += (double)prs_acct_val(a, PRS_SW_VOLUNTARY_NS, 0) / 1e9;
		f->sw.stops += prs_acct_val(a, PRS_SW_STOPS, 0);
		f->sw.lost += prs_acct_val(a, PRS_SW_LOST, 0);
	}
	if (!t->have_sw)
		return;
	f->have_switches = true;
	f->sw.preempt += t->sw_preempt;
	f->sw.voluntary += t->sw_voluntary;
	f->sw.preempt_s += t->sw_preempt_s;
	f->sw.voluntary_s += t->sw_voluntary_s;
}

static void switch_facts(struct prs_facts *f, const struct recs *r)
{
	for (size_t i = 0; i < f->nthreads; i++)
		thread_switches(f, r, &f->threads[i]);
}

/* Without kernel run-queue time, samples "waiting for a CPU" on idle CPUs are short waits; a
 * thread's switch records measured its waits after preemption: up to those, they are kept. */
static void doubt_runqueue(struct prs_facts *f)
{
	bool throttled = f->has_quota && f->nr_throttled > 0;
	double moved = 0;

	if (!f->have_steal || f->idle_share < PRS_IDLE_DOUBT || throttled)
		return;
	for (size_t i = 0; i < f->nthreads; i++) {
		struct prs_thread_facts *t = &f->threads[i];

		double keep;

		if (t->kernel || t->t[PRS_R_RUNQ] <= 0)
			continue;
		keep = t->have_sw && t->sw_preempt_s < t->t[PRS_R_RUNQ] ? t->sw_preempt_s
			: t->have_sw ? t->t[PRS_R_RUNQ] : 0;
		moved += t->t[PRS_R_RUNQ] - keep;
		t->t[PRS_R_UNSEEN] += t->t[PRS_R_RUNQ] - keep;
		t->t[PRS_R_RUNQ] = keep;
	}
	if (moved > 0) {
		f->runq_doubted = true;
		prs_facts_note(f, "%.2f s of samples \"waiting for a CPU\" counted as short waits: the "
			       "target's CPUs were %.0f %% idle and no run-queue time was measured",
			       moved, 100 * f->idle_share);
	}
}

/* Unseen waits of a process that moved data to or from storage are disk IO. */
static void attribute_unseen(struct prs_facts *f)
{
	double unseen = 0, rate;

	for (size_t i = 0; i < f->nthreads; i++)
		unseen += f->threads[i].t[PRS_R_UNSEEN];
	if (unseen <= 0 || !f->have_io || f->duration_s <= 0)
		return;
	rate = (double)(f->read_bytes + f->write_bytes) / f->duration_s;
	if (rate < PRS_DISK_RATE)
		return;
	for (size_t i = 0; i < f->nthreads; i++) {
		f->threads[i].t[PRS_R_IO_DISK] += f->threads[i].t[PRS_R_UNSEEN];
		f->threads[i].t[PRS_R_UNSEEN] = 0;
	}
	f->unseen_disk = true;
	f->unseen_disk_s = unseen;
	prs_facts_note(f, "%.2f s off-CPU in waits no sample caught, counted as disk IO: the process "
		       "moved %.1f MB/s to or from storage", unseen, rate / 1e6);
}

/* On a CPU or wanting one at least half its time. */
static bool busy_thread(const struct prs_thread_facts *t)
{
	return t->wall_s > 0 && t->t[PRS_R_CPU] + t->t[PRS_R_RUNQ] >= 0.5 * t->wall_s;
}

/* The parent pid of process pid, from its threads' facts (0: not known). */
static int32_t parent_of(const struct prs_facts *f, int32_t pid)
{
	for (size_t i = 0; i < f->nthreads; i++)
		if (f->threads[i].pid == pid && f->threads[i].ppid > 0)
			return f->threads[i].ppid;
	return 0;
}

/* Whether a descendant process of pid (a child, or its child, ...) has a busy thread. */
static bool busy_descendant(const struct prs_facts *f, int32_t pid)
{
	for (size_t i = 0; i < f->nthreads; i++) {
		int32_t q = f->threads[i].ppid;

		if (!busy_thread(&f->threads[i]) || f->threads[i].pid == pid)
			continue;
		for (int d = 0; d < PRS_TREE_DEPTH && q > 0; d++, q = parent_of(f, q))
			if (q == pid)
				return true;
	}
	return false;
}

/*
 * A thread waiting for its child processes' results: a multiprocessing pool's parent in
 * pool.map() waits on a futex (the result's event, set by its result-handler thread, which
 * reads the workers' pipe) or on the pipe, 70-90 % of its time, and read as lock contention
 * (issue 11: a 4-worker fork pool on 2 CPUs got "lock-contended" first). It is an idle waiter,
 * as a parked pool worker is: not busy itself, its waits (lock, network/event, child) most of
 * its time, no other thread of its process busy (none can be holding a lock it contends for:
 * its sibling threads are the pool's parked handlers), and a descendant process busy.
 */
struct pid_memo {
	int32_t pid[64];
	bool yes[64];             /* its children work, and no thread of its own does */
	unsigned n;
};

/* Whether process pid's descendants work while none of its own threads does (memo: each process
 * is looked at once, its tree walk being quadratic in the threads). */
static bool children_work(const struct prs_facts *f, int32_t pid, struct pid_memo *m)
{
	bool yes = true;

	for (unsigned k = 0; k < m->n; k++)
		if (m->pid[k] == pid)
			return m->yes[k];
	for (size_t i = 0; i < f->nthreads && yes; i++)
		if (f->threads[i].pid == pid && busy_thread(&f->threads[i]))
			yes = false;
	yes = yes && busy_descendant(f, pid);
	if (m->n < 64) {
		m->pid[m->n] = pid;
		m->yes[m->n++] = yes;
	}
	return yes;
}

static bool waits_for_children(const struct prs_facts *f, const struct prs_thread_facts *t,
			       struct pid_memo *m)
{
	double waits = t->t[PRS_R_LOCK] + t->t[PRS_R_IO_NET] + t->t[PRS_R_CHILD];

	if (t->pid <= 0 || busy_thread(t) || waits < PRS_CHILD_WAIT_SHARE * t->wall_s)
		return false;
	return children_work(f, t->pid, m);
}

void prs_facts_budget(struct prs_facts *f)
{
	struct prs_budget *b = &f->budget;
	double total_cpu = 0, wmax = 0, sum = 0;
	unsigned nidle = 0, nlive = 0;
	bool busy = false;
	struct pid_memo memo = { .n = 0 };

	memset(b, 0, sizeof(*b));
	for (size_t i = 0; i < f->nthreads; i++) {
		total_cpu += f->threads[i].t[PRS_R_CPU];
		if (f->threads[i].wall_s > wmax)
			wmax = f->threads[i].wall_s;
	}
	/* idle workers: next to no CPU, parked in one syscall (design note §1.4). A pool's parking
	 * (futex) or a timer's sleep is idle whatever else runs; a thread parked in an IO wait is
	 * idle only beside a thread that is busy on a CPU (else the waiting is the program's work:
	 * an IO-bound main thread uses next to no CPU too). And a thread waiting for its child
	 * processes' results (waits_for_children) */
	for (size_t i = 0; i < f->nthreads; i++)
		busy |= busy_thread(&f->threads[i]);
	for (size_t i = 0; i < f->nthreads; i++) {
		struct prs_thread_facts *t = &f->threads[i];
		enum prs_kind k;

		t->idle = false;
		if (t->wall_s <= 0)
			continue;
		nlive++;
		if (waits_for_children(f, t, &memo)) {
			t->idle = true;
			nidle++;
			continue;
		}
		/* next to no CPU: of its own life, or of the program's CPU while it was on a CPU for
		 * a small part of its life (a pool thread on 3 % of its 10 s beside busy threads). A
		 * thread that lived 20 ms, on a CPU for 9 of them, used little of the program's CPU
		 * but worked: it counts */
		if (t->t[PRS_R_CPU] > PRS_IDLE_CPU_SHARE * t->wall_s &&
		    (t->t[PRS_R_CPU] > PRS_IDLE_CPU_SHARE * total_cpu ||
		     t->t[PRS_R_CPU] > PRS_IDLE_OWN_CPU_MAX * t->wall_s))
			continue;
		if (t->wait_syscall < 0 || t->wait_syscall_share < PRS_IDLE_WAIT_SHARE)
			continue;
		k = prs_syscall_kind(t->wait_syscall);
		if (k == PRS_KIND_OFF_LOCK || k == PRS_KIND_OFF_SLEEP || busy) {
			t->idle = true;
			nidle++;
		}
	}
	if (nidle == nlive) /* all idle: the program only waits, and every thread counts */
		for (size_t i = 0; i < f->nthreads; i++)
			f->threads[i].idle = false, nidle = 0;
	for (size_t i = 0; i < f->nthreads; i++) {
		const struct prs_thread_facts *t = &f->threads[i];

		if (t->idle || t->wall_s <= 0)
			continue;
		b->active++;
		b->python_active += t->python;
		b->T += t->wall_s;
		for (int r = 0; r < PRS_R__COUNT; r++)
			b->f[r] += t->t[r];
		if (t->python)
			b->f_lock_python += t->t[PRS_R_LOCK];
	}
	b->idle = nidle;
	if (b->T > 0) {
		for (int r = 0; r < PRS_R__COUNT; r++) {
			b->f[r] /= b->T;
			sum += b->f[r];
		}
		b->f_lock_python /= b->T;
	}
	b->f_io = b->f[PRS_R_IO_DISK] + b->f[PRS_R_IO_NET] + b->f[PRS_R_PAGING];
	b->unattributed = b->T > 0 ? 1 - sum : 0;
	b->U = f->duration_s > 0 ? total_cpu / f->duration_s : (wmax > 0 ? total_cpu / wmax : 0);
}

int prs_facts_build(const struct prs_profile *p, struct prs_facts *f, struct prs_err *err)
{
	struct recs r = { NULL, 0 };
	const struct prs_acct *m;
	const char *s;
	double tick_s;
	uint64_t ticks;
	size_t bad = 0;
	int rc;

	memset(f, 0, sizeof(*f));
	if ((s = prs_profile_meta_get(p, "command")))
		snprintf(f->command, sizeof(f->command), "%s", s);
	if ((s = prs_profile_meta_get(p, "mode")))
		snprintf(f->mode, sizeof(f->mode), "%s", s);
	f->rate_hz = meta_num(p, "rate_hz", 0);
	prs_facts_scaling(p, f);
	f->duration_s = meta_num(p, "duration_s", 0);
	f->complete = p->complete;
	f->damaged = p->damaged_at != 0;
	f->ticks = (uint64_t)meta_num(p, "ticks", 0);
	f->missed_ticks = (uint64_t)meta_num(p, "missed_ticks", 0);
	f->read_errors = (uint64_t)meta_num(p, "read_errors", 0);
	f->have_ticks = prs_profile_meta_get(p, "ticks") != NULL;
	s = prs_profile_meta_get(p, "gil_wait");
	f->gil_measured = s && strcmp(s, "1") == 0;
	/* The session's ticks (meta "ticks"); else, for a recording cut short, the distinct sample
	 * times (the samples of one target's tick share a time). Not the times alone: with several
	 * processes each target stamps its tick with its own time, and preload's CPU samples each
	 * have the time of their signal, which made a tick look 5x (a 4-worker pool) or 4x (4 busy
	 * threads) shorter than it was, and cores_used as many times too small. */
	ticks = f->have_ticks && f->ticks ? f->ticks : p->sample_times;
	if (f->duration_s <= 0 && ticks && f->rate_hz > 0)
		f->duration_s = (double)ticks / f->rate_hz; /* an interrupted recording */
	tick_s = ticks && f->duration_s > 0 ? f->duration_s / (double)ticks
					    : (f->rate_hz > 0 ? 1 / f->rate_hz : 0.01);
	f->tick_s = tick_s;
	if ((rc = prs_acct_load(p, &r.a, &r.n, &bad)) != 0)
		return prs_err_set(err, rc, "classify: out of memory");
	if (bad)
		prs_facts_note(f, "%zu accounting records of the profile were malformed and skipped", bad);
	if ((rc = prs_facts_from_samples(p, f, tick_s)) != 0) {
		free(r.a);
		prs_facts_release(f);
		return prs_err_set(err, rc, "classify: out of memory");
	}
	f->samples = 0;
	for (size_t i = 0; i < f->nthreads; i++) {
		f->samples += f->threads[i].samples;
		f->python |= f->threads[i].python;
	}
	f->threads_seen = (unsigned)f->nthreads;
	f->processes = 1;
	if ((m = find(&r, PRS_ACCT_MACHINE, -1, -1, -1))) {
		f->have_machine = true;
		prs_machine_from_acct(m, &f->machine);
	}
	for (size_t i = 0; i < r.n; i++)
		if (r.a[i].type == PRS_ACCT_WAIT_ADDR && (prs_acct_val(&r.a[i], PRS_WAIT_FLAGS, 0) & PRS_WAIT_F_GIL))
			f->gil_confirmed = true;
	for (size_t i = 0; i < r.n; i++)
		if (r.a[i].type == PRS_ACCT_NOTE && r.a[i].nstr >= 2)
			prs_facts_note(f, "%s: %s", r.a[i].str[0], r.a[i].str[1]);
	{
		const struct prs_acct *sys = find(&r, PRS_ACCT_SYSTEM, PRS_PHASE_END, -1, -1);

		f->ncpus = sys ? (unsigned)prs_acct_val(sys, PRS_SYS_NCPUS, 0) : 0;
		if (!f->ncpus && f->have_machine)
			f->ncpus = f->machine.cpus_allowed;
	}
	/* grouped by type, id and phase: a thread's records are found by bisection (records of the
	 * same type, id and phase are EXIT snapshots from several sources, merged field by field) */
	if (r.n)
		qsort(r.a, r.n, sizeof(*r.a), by_type_id);
	host_facts(f, &r);
	cgroup_facts(f, &r);
	process_facts(f, &r);
	counter_facts(f, &r);
	thread_kernel(f, &r);
	switch_facts(f, &r);
	doubt_runqueue(f);
	attribute_unseen(f);
	if (f->have_faults && f->duration_s > 0)
		f->fresh_mbs = (double)f->minflt * (f->have_machine ? f->machine.page_size : 4096) /
			       f->duration_s / 1e6;
	if (f->have_wss && f->have_machine && f->machine.llc_bytes &&
	    f->wss_bytes > (double)f->machine.llc_bytes)
		f->wss_floor_gbs = (f->wss_bytes - (double)f->machine.llc_bytes) / f->wss_window_s / 1e9;
	free(r.a);
	prs_facts_budget(f);
	return 0;
}
