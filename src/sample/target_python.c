/* SPDX-License-Identifier: MIT */
/*
 * A target's CPython reader: found (retried while the program starts, found afresh after an
 * exec), read once per tick into the target's Python threads, and their threading names.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pyrsprof/python.h"
#include "pyrsprof/util.h"
#include "sample/sampler-internal.h"
#include "util/banned.h"

/* Looking for CPython in a launched program: often at first (the interpreter maps libpython and
 * initialises _PyRuntime during start-up), then rarely; and again whenever the maps change. */
#define PY_RETRY_FAST_NS 20000000ull
#define PY_RETRY_SLOW_NS 1000000000ull
#define PY_FAST_PERIOD_NS 3000000000ull

/* prs_py_set_keep: a thread recorded from its kept sample this tick is not walked. */
static bool keep_thread(void *arg, int32_t tid)
{
	struct prs_target *tg = arg;
	struct prs_thr *t = prs_thr_find(&tg->thr, tid);

	return t && t->reuse == PRS_REUSE_ALL;
}

/* The buffers a reader needs: the target's Python threads, the session's merge buffer. */
static bool py_buffers(struct prs_sampler *s, struct prs_target *tg)
{
	if (!tg->pyt)
		tg->pyt = calloc(PRS_MAX_PY_THREADS, sizeof(*tg->pyt));
	if (!s->merged)
		s->merged = calloc(PRS_MAX_STACK_FRAMES, sizeof(*s->merged));
	return tg->pyt && s->merged;
}

/* tg->py was just opened: its buffers and what the session notes of it. */
static void adopt(struct prs_sampler *s, struct prs_target *tg)
{
	if (!py_buffers(s, tg)) {
		prs_py_free(tg->py);
		tg->py = NULL;
		tg->py_given_up = true;
		return;
	}
	if (!s->opts.read_idle)
		prs_py_set_keep(tg->py, keep_thread, tg);
	snprintf(tg->py_info, sizeof(tg->py_info), "CPython %s in %s (layout: %s)",
		 prs_py_version(tg->py), prs_py_binary(tg->py), prs_py_layout_source(tg->py));
	if (!s->py_meta) {
		/* (the first interpreter of the tree: the profile has one meta of it) */
		prs_profile_meta(s->prof, "python_version", prs_py_version(tg->py));
		snprintf(s->py_info, sizeof(s->py_info), "%s", tg->py_info);
		s->py_meta = true;
	}
}

void prs_target_py_inherit(struct prs_sampler *s, struct prs_target *tg,
			   const struct prs_target *parent)
{
	struct prs_err err = { 0 };

	if (!parent->py || tg->py || prs_py_fork(parent->py, tg->pid, &tg->py, &err) != 0)
		return; /* (looked for as in any process, at its first tick) */
	adopt(s, tg);
}

/* Whether a module of maps has "python" in its path (a libpython, an interpreter binary). */
static bool maps_name_python(const struct prs_maps *maps)
{
	for (size_t i = 0; maps && i < maps->n; i++)
		if (strstr(maps->v[i].path, "python"))
			return true;
	return false;
}

/*
 * prs_py_open's -ENOENT says that neither the executable nor a libpython of the maps it read is
 * a Python binary: that can change only with the modules (a libpython loaded later). A Rust or C
 * program was asked again every 20 ms for its first 3 s all the same, each time reading its
 * maps and the executable's symbol table: 78 % of pyrsprof's instructions while sampling
 * cpu_split_rs at 1000 Hz (callgrind). So after it, the fast retries wait for the unwinder's
 * maps to change (a PC in no module, as a dlopen brings, refreshes them); the slow period stays
 * as a backstop. Not when a module's path says python: an interpreter without symbols or a
 * .PyRuntime section is recognised by Py_GetVersion()'s text, which it writes as it starts.
 */
static bool py_absent_still(const struct prs_target *tg, uint64_t now)
{
	return now < tg->py_absent_until && tg->uw && prs_unwinder_generation(tg->uw) == tg->py_absent_gen;
}

static void note_py_absent(struct prs_target *tg, int rc, uint64_t now)
{
	tg->py_absent_until = 0;
	if (rc == -ENOENT && tg->uw && !maps_name_python(prs_unwinder_maps(tg->uw))) {
		tg->py_absent_gen = prs_unwinder_generation(tg->uw);
		tg->py_absent_until = now + PY_RETRY_SLOW_NS;
	}
}

void prs_target_try_python(struct prs_sampler *s, struct prs_target *tg, uint64_t now, bool force)
{
	struct prs_err err = { 0 };
	uint64_t since;
	int rc;

	if (tg->py || s->opts.no_python || tg->py_given_up)
		return;
	if (!force && (now < tg->py_next_try || py_absent_still(tg, now)))
		return;
	rc = prs_py_open(tg->pid, &s->opts.py, &tg->py, &err);
	if (rc == 0) {
		tg->py_absent_until = 0;
		adopt(s, tg);
		return;
	}
	note_py_absent(tg, rc, now);
	if (rc == -ENOTSUP) {
		snprintf(tg->py_info, sizeof(tg->py_info), "%s", err.msg);
		tg->py_given_up = true;
		return;
	}
	if (rc != -ENOENT && err.msg[0])
		snprintf(tg->py_info, sizeof(tg->py_info), "%s", err.msg);
	/* fast while the session or this image is young (a process of the tree starts later) */
	since = tg->py_since > s->t0 ? tg->py_since : s->t0;
	tg->py_next_try = now + (now - since < PY_FAST_PERIOD_NS ? PY_RETRY_FAST_NS : PY_RETRY_SLOW_NS);
}

/*
 * Once the reader knows the GIL's words (3.12+: once an interpreter has its GIL), the profile
 * says GIL waits are measured: a futex wait not on them is a lock wait (docs/classify.md §6).
 */
static void note_gil_known(struct prs_sampler *s, struct prs_target *tg)
{
	struct prs_py_range r[PRS_PY_MAX_GIL_RANGES];

	if (!s->gil_meta && prs_py_gil_ranges(tg->py, r, PRS_PY_MAX_GIL_RANGES) > 0) {
		prs_profile_meta(s->prof, "gil_wait", "1");
		s->gil_meta = true;
	}
}

int prs_target_py_sample(struct prs_sampler *s, struct prs_target *tg)
{
	int rc = prs_py_sample(tg->py, s->prof, tg->pyt, PRS_MAX_PY_THREADS, &tg->npyt, NULL);

	if (rc != 0)
		tg->npyt = 0;
	note_gil_known(s, tg);
	return rc;
}

int prs_target_py_walk(struct prs_sampler *s, struct prs_target *tg)
{
	struct prs_err err = { 0 };
	int rc;

	tg->npyt = tg->nraw = 0;
	tg->py_walked = false;
	if (!tg->pyraw)
		tg->pyraw = malloc(PRS_MAX_PY_THREADS * sizeof(*tg->pyraw));
	if (!tg->pyraw)
		return -ENOMEM;
	rc = prs_py_walk(tg->py, tg->pyraw, PRS_MAX_PY_THREADS, &tg->nraw, &err);
	if (rc != 0) {
		prs_py_end(tg->py);
		tg->nraw = 0;
		return rc;
	}
	/* (the heads as they are now: the naming after must not see an object freed meanwhile) */
	prs_py_load_heads(tg->py, tg->pyraw, tg->nraw);
	tg->py_walked = true;
	note_gil_known(s, tg);
	return 0;
}

void prs_target_py_name_walked(struct prs_sampler *s, struct prs_target *tg)
{
	if (!tg->py_walked || !tg->py)
		return;
	tg->py_walked = false;
	for (tg->npyt = 0; tg->npyt < tg->nraw; tg->npyt++) {
		if (prs_py_name(tg->py, s->prof, &tg->pyraw[tg->npyt], &tg->pyt[tg->npyt]) != 0) {
			tg->npyt = 0; /* (out of memory: as prs_py_sample) */
			break;
		}
	}
	prs_py_end(tg->py);
}

void prs_target_py_names(struct prs_sampler *s, struct prs_target *tg)
{
	uint64_t now = prs_now_ns();

	for (int i = 0; i < tg->npyt; i++)
		tg->pyt[i].name = prs_py_thread_name(tg->py, s->prof, tg->pyt[i].thread_id);
	if (tg->npyt > 0 && prs_py_names_due(tg->py, now)) {
		uint64_t took;

		prs_py_read_thread_names(tg->py, s->prof, now);
		took = prs_now_ns() - now;
		prs_py_names_took(tg->py, took);
		s->st.py_name_reads++;
		prs_durations_add(&s->d_names, took);
		for (int i = 0; i < tg->npyt; i++)
			tg->pyt[i].name = prs_py_thread_name(tg->py, s->prof, tg->pyt[i].thread_id);
	}
	for (int i = 0; i < tg->npyt; i++) {
		const struct prs_py_thread *pt = &tg->pyt[i];
		struct prs_thr *t = pt->tid > 0 && pt->name ? prs_thr_find(&tg->thr, pt->tid) : NULL;

		if (t && t->py_name_sid != pt->name) {
			t->py_name_sid = pt->name;
			prs_thr_record_name(&tg->thr, t, s->prof);
		}
	}
}

const struct prs_py_thread *prs_target_py_thread(const struct prs_target *tg, pid_t tid)
{
	for (int i = 0; tg->py && i < tg->npyt; i++)
		if (tg->pyt[i].tid == tid)
			return &tg->pyt[i];
	return NULL;
}

void prs_target_py_drop(struct prs_target *tg)
{
	prs_py_free(tg->py);
	tg->py = NULL;
	tg->npyt = tg->nraw = 0;
	tg->py_walked = false;
	tg->py_next_try = 0;
	tg->py_absent_until = 0;
}
