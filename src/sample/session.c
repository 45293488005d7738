/* SPDX-License-Identifier: MIT */
/*
 * The sampling session (struct prs_sampler): its creation and end, and its loop. The loop ticks
 * on absolute deadlines, each tick at a random point of its period, asking the sample source for
 * one tick of each target; between ticks it sleeps in sigtimedwait(), handling ptrace events and
 * the user's signals as they come, and once a second it flushes the recording and reports
 * progress.
 */
#include "pyrsprof/sampler.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>

#include "pyrsprof/acct.h"
#include "pyrsprof/ptrace.h"
#include "pyrsprof/python.h"
#include "pyrsprof/util.h"
#include "sample/sampler-internal.h"
#include "util/banned.h"

#define COMM_REFRESH_NS 1000000000ull
#define FLUSH_NS 1000000000ull
#define EXEC_POLL_NS 1000000ull
#define CHILD_POLL_NS 100000000ull

int prs_sampler_sigset(sigset_t *set)
{
	sigemptyset(set);
	sigaddset(set, SIGCHLD);
	sigaddset(set, SIGINT);
	sigaddset(set, SIGTERM);
	sigaddset(set, SIGHUP);
	sigaddset(set, SIGQUIT);
	return 0;
}

/* ---- creation and end ---- */

/* The allocations every session needs. Returns 0 or -ENOMEM. */
static int session_buffers(struct prs_sampler *s)
{
	int rc = 0;

	s->pcs = calloc(PRS_MAX_NATIVE_FRAMES, sizeof(*s->pcs));
	s->frame_ids = calloc(PRS_MAX_NATIVE_FRAMES, sizeof(*s->frame_ids));
	rc |= prs_durations_init(&s->d_cost);
	rc |= prs_durations_init(&s->d_stop);
	rc |= prs_durations_init(&s->d_unwind);
	rc |= prs_durations_init(&s->d_python);
	rc |= prs_durations_init(&s->d_names);
	rc |= prs_durations_init(&s->d_state);
	rc |= prs_durations_init(&s->d_check);
	rc |= prs_durations_init(&s->d_warm);
	rc |= prs_durations_init(&s->d_window);
	rc |= prs_durations_init(&s->d_delay);
	return rc || !s->pcs || !s->frame_ids ? -ENOMEM : 0;
}

int prs_session_new(enum prs_sampler_mode mode, const struct prs_sampler_opts *opts,
		    struct prs_recorder *rec, struct prs_sampler **out, struct prs_err *err)
{
	struct prs_sampler *s = calloc(1, sizeof(*s));

	if (!s)
		return prs_err_set(err, -ENOMEM, "out of memory");
	s->mode = mode;
	s->opts = *opts;
	if (s->opts.stack_bytes == 0)
		s->opts.stack_bytes = 64 * 1024;
	s->src = opts->source == PRS_SOURCE_VM	    ? &prs_source_vm
		 : opts->source == PRS_SOURCE_PRELOAD ? &prs_source_preload
						      : &prs_source_ptrace;
	s->seize_options = opts->subprocesses ? PRS_PTRACE_OPTIONS_TREE : PRS_PTRACE_OPTIONS;
	s->rec = rec;
	s->prof = rec ? prs_recorder_profile(rec) : opts->profile;
	if (!s->prof) {
		free(s);
		return prs_err_set(err, -EINVAL, "sampler: no profile to record into");
	}
	s->thr_common.stack_bytes = s->opts.stack_bytes;
	s->period_ns = (int64_t)(1e9 / s->opts.rate_hz);
	s->look_ns = (uint64_t)s->period_ns;
	s->rng = (unsigned)prs_now_ns() | 1u;
	if (prs_kstack_wanted(s))
		s->kstack = prs_kstack_new((uint64_t)s->period_ns, s->prof, s->src->traces);
	if (s->opts.switches)
		s->thr_common.sw = prs_switches_new(s->prof);
	if (session_buffers(s) != 0 || (prs_kstack_wanted(s) && !s->kstack) ||
	    (s->opts.switches && !s->thr_common.sw)) {
		prs_sampler_free(s);
		return prs_err_set(err, -ENOMEM, "out of memory");
	}
	*out = s;
	return 0;
}

int prs_session_add_target(struct prs_sampler *s, struct prs_target *tg)
{
	struct prs_target **v = realloc(s->targets, (s->ntargets + 1) * sizeof(*v));

	if (!v) {
		prs_target_free(tg);
		return -ENOMEM;
	}
	s->targets = v;
	s->targets[s->ntargets++] = tg;
	return 0;
}

void prs_sampler_free(struct prs_sampler *s)
{
	if (!s)
		return;
	prs_events_detach_all(s);
	for (size_t i = 0; i < s->ntargets; i++)
		prs_target_free(s->targets[i]);
	free(s->targets);
	prs_kstack_free(s->kstack);
	prs_switches_free(s->thr_common.sw);
	free(s->merged);
	free(s->pcs);
	free(s->frame_ids);
	free(s->cmp);
	prs_durations_release(&s->d_cost);
	prs_durations_release(&s->d_stop);
	prs_durations_release(&s->d_unwind);
	prs_durations_release(&s->d_python);
	prs_durations_release(&s->d_names);
	prs_durations_release(&s->d_state);
	prs_durations_release(&s->d_check);
	prs_durations_release(&s->d_warm);
	prs_durations_release(&s->d_window);
	prs_durations_release(&s->d_delay);
	prs_waits_release(&s->waits);
	free(s);
}

/* ---- targets ---- */

struct prs_target *prs_session_thread(const struct prs_sampler *s, pid_t tid, struct prs_thr **t)
{
	for (size_t i = 0; i < s->ntargets; i++) {
		*t = prs_thr_find(&s->targets[i]->thr, tid);
		if (*t)
			return s->targets[i];
	}
	*t = NULL;
	return NULL;
}

struct prs_target *prs_session_target(const struct prs_sampler *s, pid_t pid)
{
	for (size_t i = 0; i < s->ntargets; i++)
		if (s->targets[i]->pid == pid)
			return s->targets[i];
	return NULL;
}

/* Adds the Python reader's statistics of tg into into. */
static void add_py_stats(struct prs_py_stats *into, const struct prs_target *tg)
{
	struct prs_py_stats ps;

	if (!tg->py)
		return;
	prs_py_get_stats(tg->py, &ps);
	into->read_errors += ps.read_errors;
	into->bad_frames += ps.bad_frames;
	into->truncated += ps.truncated;
	into->merge_mismatch += ps.merge_mismatch;
	into->code_stale += ps.code_stale;
}

void prs_session_drop_exited(struct prs_sampler *s)
{
	size_t k = 1;

	for (size_t i = 1; i < s->ntargets; i++) {
		struct prs_target *tg = s->targets[i];

		if (tg->exited && tg->thr.n == 0) {
			add_py_stats(&s->py_gone, tg);
			prs_target_free(tg);
		} else {
			s->targets[k++] = tg;
		}
	}
	if (s->ntargets > 1)
		s->ntargets = k;
}

bool prs_session_all_exited(const struct prs_sampler *s)
{
	for (size_t i = 0; i < s->ntargets; i++)
		if (!s->targets[i]->exited)
			return false;
	return true;
}

/* True if some target runs its own program (a launched child that has not exec'ed yet is still
 * a copy of pyrsprof: nothing to sample). */
static bool any_own_image(const struct prs_sampler *s)
{
	for (size_t i = 0; i < s->ntargets; i++)
		if (s->targets[i]->own_image && !s->targets[i]->exited)
			return true;
	return false;
}

static size_t total_threads(const struct prs_sampler *s)
{
	size_t n = 0;

	for (size_t i = 0; i < s->ntargets; i++)
		n += s->targets[i]->thr.n;
	return n;
}

static void record_names(struct prs_sampler *s)
{
	for (size_t i = 0; i < s->ntargets; i++) {
		struct prs_target *tg = s->targets[i];

		for (size_t j = 0; j < tg->thr.n; j++)
			prs_thr_record_name(&tg->thr, &tg->thr.v[j], s->prof);
	}
}

/* ---- the user's signals ---- */

/* Acts on a user signal taken by sigtimedwait. */
static void handle_user_signal(struct prs_sampler *s, const siginfo_t *si)
{
	struct prs_target *root = s->ntargets ? s->targets[0] : NULL;
	int sig = si->si_signo;
	bool from_kill = si->si_code == SI_USER || si->si_code == SI_QUEUE;

	if (s->mode == PRS_SAMPLE_ATTACH || !root) {
		s->stop_requested = true;
		return;
	}
	/* Launch mode. A Ctrl-C from the terminal reached the child through the process group; a
	 * signal sent to pyrsprof alone with kill() is forwarded, as if pyrsprof were the program. */
	if (from_kill && si->si_pid != root->pid && !root->exited) {
		kill(root->pid, sig);
		s->st.signals_forwarded++;
	}
	if (sig == SIGINT && ++s->sigints >= 2)
		s->stop_requested = true;
}

void prs_sampler_stop(struct prs_sampler *s)
{
	s->stop_requested = true;
}

void prs_session_wait_signal(struct prs_sampler *s, uint64_t timeout_ns)
{
	struct timespec ts = { (time_t)(timeout_ns / 1000000000ull), (long)(timeout_ns % 1000000000ull) };
	sigset_t set;
	siginfo_t si;
	int sig;

	prs_sampler_sigset(&set);
	sig = sigtimedwait(&set, &si, &ts);
	if (sig > 0 && sig != SIGCHLD)
		handle_user_signal(s, &si);
}

/* ---- the loop ---- */

/* Waits until deadline (CLOCK_MONOTONIC ns), handling ptrace events and user signals; returns
 * early when every target has exited or the user asked to stop. */
static void wait_until(struct prs_sampler *s, uint64_t deadline)
{
	for (;;) {
		uint64_t now;

		prs_events_drain(s, false);
		now = prs_now_ns();
		if (now >= deadline || prs_session_all_exited(s))
			return;
		prs_session_wait_signal(s, deadline - now);
		if (s->stop_requested)
			return;
	}
}

static void periodic(struct prs_sampler *s, uint64_t now)
{
	if (now - s->last_comm >= COMM_REFRESH_NS) {
		record_names(s);
		s->last_comm = now;
	}
	if (now - s->last_flush >= FLUSH_NS) {
		if (s->rec)
			prs_recorder_flush(s->rec, NULL);
		s->last_flush = now;
		if (s->opts.progress)
			s->opts.progress(s->opts.progress_arg, (double)(now - s->t0) / 1e9,
					 s->st.thread_samples, total_threads(s));
	}
}

/*
 * Each tick is taken at a random point of its period (stratified sampling: the grid of deadlines
 * stays fixed, so the rate holds). A fixed grid, or a jitter smaller than the period, locks in
 * phase with a program that itself wakes on a fixed period (an absolute-deadline loop at 50 Hz
 * against our 200 Hz): measured, its 10 % busy part got 0 or 50 of 300 samples depending on the
 * phase. With the whole period covered, every instant has the same chance.
 */
static uint64_t jitter(struct prs_sampler *s, uint64_t period)
{
	s->rng ^= s->rng << 13;
	s->rng ^= s->rng >> 17;
	s->rng ^= s->rng << 5;
	return period > 1 ? s->rng % period : 0;
}

/* Once a tick, every thread ages by one tick, and the switch records of the old ones are read
 * (each thread's last stop told apart; a young one's event waits: prs_thr_old). */
static void end_tick_threads(struct prs_sampler *s)
{
	bool sw = prs_switches_on(s->thr_common.sw);

	for (size_t i = 0; i < s->ntargets; i++) {
		struct prs_thr_table *tab = &s->targets[i]->thr;

		for (size_t j = 0; j < tab->n; j++) {
			struct prs_thr *t = &tab->v[j];

			if (sw && prs_thr_old(t))
				prs_switches_read(s->thr_common.sw, &t->swthr, t->tid, t->t_asked,
						  t->t_cont);
			t->ticks += t->ticks < UINT16_MAX;
		}
	}
}

/* The switch counts of the threads alive at the end are stored; none after. */
static void end_switches(struct prs_sampler *s)
{
	for (size_t i = 0; s->thr_common.sw && i < s->ntargets; i++) {
		struct prs_thr_table *tab = &s->targets[i]->thr;

		for (size_t j = 0; j < tab->n; j++)
			prs_switches_done(s->thr_common.sw, &tab->v[j].swthr, tab->v[j].tid,
					  PRS_PHASE_END);
	}
	prs_switches_close(s->thr_common.sw);
}

/* The sampling periods one turn of the loop covers: the ticks counted in the stats and the
 * profile's meta are periods (the unit of a sample's weight), whatever the loop's period. */
static uint64_t look_periods(const struct prs_sampler *s)
{
	uint64_t k = s->period_ns > 0 ? s->look_ns / (uint64_t)s->period_ns : 1;

	return k ? k : 1;
}

/* Counts how late the tick beginning at now is (tick_due 0: due at once). */
static void count_delay(struct prs_sampler *s, uint64_t now)
{
	uint64_t delay = s->tick_due && now > s->tick_due ? now - s->tick_due : 0;

	prs_durations_add(&s->d_delay, delay);
	if (delay > s->look_ns / 2)
		s->st.late_ticks += look_periods(s);
}

/* One tick of every target that runs its own program, in the source's steps (struct
 * prs_source_ops), but the record step (tick_record); a target that joins meanwhile waits for
 * the next tick. */
static void tick_take(struct prs_sampler *s, uint64_t now)
{
	size_t n = s->ntargets;

	count_delay(s, now);
	for (size_t i = 0; i < n; i++) {
		struct prs_target *tg = s->targets[i];

		tg->tick.open = tg->own_image && !tg->exited;
		if (tg->tick.open && s->src->threads)
			s->src->threads(s, tg);
	}
	n = s->ntargets; /* (processes adopted meanwhile wait for the next tick) */
	for (size_t i = 0; i < n; i++) {
		struct prs_target *tg = s->targets[i];

		if (!tg->tick.open)
			continue;
		prs_target_try_python(s, tg, now, tg->maps_dirty);
		if (s->src->begin)
			s->src->begin(s, tg, now);
	}
	for (size_t i = 0; i < n; i++)
		if (s->targets[i]->tick.open)
			s->src->tick(s, s->targets[i], now);
}

/* The tick's record step, for every target whose tick was taken. The next tick is due at
 * record_by: a late stop may be taken until then. */
static void tick_record(struct prs_sampler *s, uint64_t record_by)
{
	s->record_by = record_by;
	for (size_t i = 0; i < s->ntargets; i++) {
		if (s->targets[i]->tick.open && s->src->record)
			s->src->record(s, s->targets[i]);
		s->targets[i]->tick.open = false;
	}
	end_tick_threads(s);
	s->st.ticks += look_periods(s);
}

/* The deadline of the next tick: absolute deadlines, so a late tick does not shift later ones;
 * ticks missed entirely are skipped and counted. */
static uint64_t next_deadline(struct prs_sampler *s, uint64_t next, uint64_t period, uint64_t end)
{
	uint64_t now = prs_now_ns();

	next += period;
	if (now > next + period) {
		uint64_t behind = (now - next) / period;

		s->st.missed_ticks += behind * look_periods(s);
		next += behind * period;
	}
	if (end && next > end)
		next = end;
	return next;
}

/* True while some target runs, once the source has looked for processes it follows by itself
 * (struct prs_source_ops poll), or one of those is still to join. */
static bool targets_left(struct prs_sampler *s)
{
	bool coming = s->src->poll && s->src->poll(s, prs_now_ns());

	return coming || !prs_session_all_exited(s);
}

/* pyrsprof's own user and system CPU time so far (every thread), s. */
static void own_cpu(double *user_s, double *sys_s)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru) != 0) {
		*user_s = *sys_s = 0;
		return;
	}
	*user_s = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6;
	*sys_s = (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

int prs_sampler_run(struct prs_sampler *s, struct prs_err *err)
{
	double user0, sys0;
	uint64_t period = s->src->look_ns ? s->src->look_ns(s) : (uint64_t)s->period_ns;
	uint64_t next, end = 0;

	(void)err;
	if (period == 0)
		period = 1;
	s->look_ns = period;
	own_cpu(&user0, &sys0);
	s->t0 = prs_now_ns();
	s->last_flush = s->last_comm = s->t0;
	if (s->opts.duration_s > 0)
		end = s->t0 + (uint64_t)(s->opts.duration_s * 1e9);
	record_names(s);
	next = s->t0;
	while (targets_left(s) && !s->stop_requested) {
		uint64_t now = prs_now_ns();

		if (end && now >= end)
			break;
		if (s->opts.max_ticks && s->st.ticks >= (uint64_t)s->opts.max_ticks)
			break;
		if (!any_own_image(s)) {
			wait_until(s, now + EXEC_POLL_NS);
			next = prs_now_ns(); /* ticks are due from the exec on */
			s->tick_due = 0;
			continue;
		}
		tick_take(s, now);
		next = next_deadline(s, next, period, end);
		s->tick_due = next + jitter(s, period);
		tick_record(s, s->tick_due);
		prs_session_drop_exited(s);
		periodic(s, prs_now_ns());
		wait_until(s, s->tick_due);
	}
	for (size_t i = 0; s->src->end && i < s->ntargets; i++)
		s->src->end(s, s->targets[i]);
	end_switches(s);
	s->st.duration_s = (double)(prs_now_ns() - s->t0) / 1e9;
	own_cpu(&s->st.loop_user_s, &s->st.loop_sys_s);
	s->st.loop_user_s -= user0;
	s->st.loop_sys_s -= sys0;
	if (!s->targets[0]->exited)
		prs_tree_note_children_cpu(s);
	record_names(s);
	prs_events_detach_all(s);
	return 0;
}

/* ---- after the run ---- */

/* Waits (forwarding signals) until the root, a launched child, exits. Returns its raw status or
 * -1. A tracee the detach gave up on (a vfork parent stays in the kernel until its child execs)
 * stops when it can: it is detached then, so that nothing waits for pyrsprof. */
static int wait_root(struct prs_sampler *s)
{
	struct prs_target *root = s->targets[0];
	int status;

	for (;;) {
		pid_t r = waitpid(-1, &status, __WALL | WNOHANG);

		if (r == root->pid && !WIFSTOPPED(status)) {
			prs_target_exited(root, status);
			return status;
		}
		if (r > 0 && WIFSTOPPED(status))
			prs_ptrace_detach(r, (unsigned)status >> 16 == 0 ? WSTOPSIG(status) : 0);
		if (r > 0)
			continue;
		if (r < 0)
			return -1;
		prs_session_wait_signal(s, CHILD_POLL_NS);
	}
}

int prs_sampler_wait_child(struct prs_sampler *s)
{
	struct prs_target *root = s->targets[0];
	int status = root->exit_status;

	if (s->mode == PRS_SAMPLE_LAUNCH && !root->exited) {
		status = wait_root(s);
		if (status == -1)
			return -1;
	} else if (s->mode == PRS_SAMPLE_LAUNCH && root->exit_status >= 0) {
		/* The leader's exit was reported to us as its tracer; reap the zombie too. */
		waitpid(root->pid, NULL, WNOHANG);
	}
	if (s->mode == PRS_SAMPLE_ATTACH)
		return 0;
	if (status < 0)
		return -1;
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return -1;
}

/* ---- what the caller asks ---- */

void prs_session_note(struct prs_sampler *s, const char *fmt, ...)
{
	size_t len = strlen(s->notes);
	va_list ap;

	if (len + 2 >= sizeof(s->notes))
		return;
	if (len)
		s->notes[len++] = '\n';
	va_start(ap, fmt);
	vsnprintf(s->notes + len, sizeof(s->notes) - len, fmt, ap);
	va_end(ap);
}

const char *prs_sampler_notes(const struct prs_sampler *s)
{
	return s->notes;
}

const char *prs_sampler_source_name(const struct prs_sampler *s)
{
	return s->src->name;
}

bool prs_sampler_python(const struct prs_sampler *s, char *buf, size_t size)
{
	const struct prs_target *root = s->targets[0];

	/* the root's interpreter, else the first found in the tree (`sh -c 'python3 ...'`) */
	snprintf(buf, size, "%s", root->py || root->py_info[0] || !s->py_info[0] ? root->py_info
										     : s->py_info);
	return root->py != NULL || (s->py_info[0] && !root->py_info[0]);
}

const struct prs_py_thread *prs_sampler_python_threads(const struct prs_sampler *s, int *n)
{
	const struct prs_target *root = s->targets[0];

	*n = root->py ? root->npyt : 0;
	return root->pyt;
}

const struct prs_wait_addr *prs_sampler_wait_addrs(const struct prs_sampler *s, size_t *n)
{
	*n = s->waits.n;
	return s->waits.v;
}

pid_t prs_sampler_pid(const struct prs_sampler *s)
{
	return s->targets[0]->pid;
}

bool prs_sampler_target_exited(const struct prs_sampler *s)
{
	return s->targets[0]->exited;
}

void prs_sampler_get_stats(const struct prs_sampler *s, struct prs_sampler_stats *stats)
{
	struct prs_py_stats ps = s->py_gone;
	struct prs_kstack_count kc;

	*stats = s->st;
	stats->threads_seen = s->thr_common.seen;
	prs_kstack_counts(s->kstack, &kc);
	stats->kstack_perf_samples = kc.perf_samples;
	stats->kstack_matched = kc.matched;
	stats->kstack_lowered_samples = kc.lowered_samples;
	stats->kstack_period_changes = kc.period_changes;
	stats->kstack_perf_kernel_share = kc.perf_kernel_share;
	stats->kstack_opened = kc.opened;
	stats->kstack_young = kc.young;
	stats->kstack_held_samples = kc.held_samples;
	stats->cpu_from_perf = kc.user_taken + kc.user_reused;
	stats->cpu_perf_reused = kc.user_reused;
	stats->cpu_without_perf = kc.user_missed;
	stats->switches_opened = prs_switches_opened(s->thr_common.sw);
	stats->switches_without = prs_switches_on(s->thr_common.sw) ?
					  stats->threads_seen - stats->switches_opened : 0;
	for (size_t i = 0; i < s->ntargets; i++)
		add_py_stats(&ps, s->targets[i]);
	stats->py_read_errors = ps.read_errors;
	stats->py_bad_frames = ps.bad_frames;
	stats->py_truncated = ps.truncated;
	stats->py_merge_mismatch = ps.merge_mismatch;
	stats->py_code_stale = ps.code_stale;
	prs_durations_summary(&s->d_cost, &stats->sample_cost);
	prs_durations_summary(&s->d_stop, &stats->stop);
	prs_durations_summary(&s->d_unwind, &stats->unwind);
	prs_durations_summary(&s->d_python, &stats->python);
	prs_durations_summary(&s->d_names, &stats->py_names);
	prs_durations_summary(&s->d_state, &stats->state);
	prs_durations_summary(&s->d_check, &stats->check);
	prs_durations_summary(&s->d_warm, &stats->warm);
	prs_durations_summary(&s->d_window, &stats->stop_window);
	prs_durations_summary(&s->d_delay, &stats->tick_delay);
}
