/* SPDX-License-Identifier: MIT */
/*
 * The CPython reader's handle and its samples: a sample begins the page cache (one readv of what
 * the last sample read), walks every thread with the walker (python/walk.h) through the cache, and
 * names each thread's raw stack (code.c). What the walker cannot know is done here: which threads
 * the caller keeps (not walked), the kernel tid of a thread on 3.6-3.10 (the offset in glibc's
 * struct pthread is found once, checked against /proc), and the GIL holder's top frame read again
 * past the cache, since the holder runs while it is read (its frames are walked again if it moved).
 */
#include "python/python-internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util/banned.h"

void prs_py_version_str(uint32_t hex, char *out, size_t sz)
{
	static const char lv[16] = { [0xa] = 'a', [0xb] = 'b', [0xc] = 'c' };
	unsigned level = (hex >> 4) & 15;

	if (level == 0xf || !lv[level])
		snprintf(out, sz, "%u.%u.%u", hex >> 24, (hex >> 16) & 255, (hex >> 8) & 255);
	else
		snprintf(out, sz, "%u.%u.%u%c%u", hex >> 24, (hex >> 16) & 255, (hex >> 8) & 255,
			 lv[level], hex & 15);
}

int prs_py_new_raw(const struct prs_py_layout *L, const struct prs_memreader *mr, uint32_t version_hex,
		   struct prs_py **out)
{
	struct prs_py *py = calloc(1, sizeof(*py));

	if (!py)
		return -ENOMEM;
	py->L = *L;
	py->mr = *mr;
	py->version_hex = version_hex;
	prs_py_version_str(version_hex, py->version, sizeof(py->version));
	py->layout_source = "table";
	prs_pywalk_init(&py->walk, &py->L, version_hex);
	prs_pagecache_reader(&py->pc, &py->cr);
	py->ncodes_cap = 1024;
	py->codes = calloc(py->ncodes_cap, sizeof(*py->codes));
	if (prs_pagecache_init(&py->pc, mr, &py->st.syscalls) || !py->codes) {
		prs_py_free(py);
		return -ENOMEM;
	}
	*out = py;
	return 0;
}

void prs_py_free(struct prs_py *py)
{
	size_t i;

	if (!py)
		return;
	if (py->codes)
		for (i = 0; i < py->ncodes_cap; i++)
			free(py->codes[i].table);
	free(py->codes);
	prs_pagecache_release(&py->pc);
	prs_py_names_free(py);
	free(py);
}

const char *prs_py_version(const struct prs_py *py) { return py->version; }
uint32_t prs_py_version_hex(const struct prs_py *py) { return py->version_hex; }
const char *prs_py_layout_source(const struct prs_py *py) { return py->layout_source; }
const char *prs_py_binary(const struct prs_py *py) { return py->binary; }
const char *prs_py_anchor(const struct prs_py *py) { return py->anchor ? py->anchor : ""; }
const struct prs_pywalk *prs_py_walker(const struct prs_py *py) { return &py->walk; }

/* ---- what the walker cannot do ---- */

static bool task_exists(pid_t pid, int32_t tid)
{
	char path[64];
	struct stat st;

	if (tid <= 0)
		return false;
	snprintf(path, sizeof(path), "/proc/%d/task/%d", (int)pid, (int)tid);
	return stat(path, &st) == 0;
}

/*
 * ≤3.10: finds where glibc's struct pthread (pthread_t is its address) keeps the kernel tid, from
 * one thread's pthread_t: glibc 2.36 x86_64 0x2d0 or musl 0x30 when a live tid of the target is
 * there, else the first word of the struct equal to the pid (the main thread's tid).
 */
static void calibrate_tid(struct prs_py *py, uint64_t pthread)
{
	static const int cand[] = { 0x2d0, 0x30 };
	uint8_t buf[4096];
	int32_t v = 0;
	unsigned i;

	if (!plausible_ptr(pthread & ~(uint64_t)7))
		return;
	for (i = 0; i < 2 && py->walk.tid_off < 0; i++)
		if (!prs_pagecache_read(&py->pc, pthread + cand[i], &v, 4) && task_exists(py->pid, v))
			py->walk.tid_off = cand[i];
	if (py->walk.tid_off < 0 && !prs_pagecache_read(&py->pc, pthread, buf, sizeof(buf)))
		for (i = 0; i + 4 <= sizeof(buf) && py->walk.tid_off < 0; i += 4) {
			memcpy(&v, buf + i, 4);
			if (v == py->pid)
				py->walk.tid_off = (int32_t)i;
		}
}

/*
 * The current top frame of the thread state at tstate, read now, past the cache; frame_ref is its
 * frame field as the walk read it. Where the frame hangs off a cframe (3.11, 3.12), the cframe
 * pointer and the frame pointer of the cframe it pointed to are read in one readv: the second is
 * the answer when the first did not change (the usual case), else the new cframe is read. -EFAULT
 * when the thread state cannot be read; *out is 0 when it points nowhere readable.
 */
static int top_frame_now(struct prs_py *py, uint64_t tstate, uint64_t frame_ref, uint64_t *out)
{
	const struct prs_py_layout *L = &py->L;
	int32_t off = L->tstate_frame >= 0 ? L->tstate_frame
		      : L->tstate_current_frame >= 0 ? L->tstate_current_frame : L->tstate_cframe;
	uint64_t v = 0, f = 0;
	struct prs_memvec vec[2];

	*out = 0;
	if (off < 0)
		return -EFAULT;
	if (L->tstate_frame >= 0 || L->tstate_current_frame >= 0) {
		py->st.syscalls++;
		if (py->mr.read(py->mr.ctx, tstate + (uint64_t)off, &v, 8))
			return -EFAULT;
		*out = v;
		return 0;
	}
	vec[0] = (struct prs_memvec){ tstate + (uint64_t)off, &v, 8, 0 };
	vec[1] = (struct prs_memvec){ frame_ref + (uint64_t)L->cframe_current_frame, &f, 8, 0 };
	py->st.syscalls++;
	if (plausible_ptr(frame_ref) && py->mr.readv) {
		if (py->mr.readv(py->mr.ctx, vec, 2) < 0 || vec[0].res)
			return -EFAULT;
	} else if (py->mr.read(py->mr.ctx, vec[0].addr, &v, 8)) {
		return -EFAULT;
	} else {
		vec[1].res = -EFAULT;
	}
	if (v == frame_ref && !vec[1].res) {
		*out = f;
		return 0;
	}
	f = 0;
	py->st.syscalls++;
	if (plausible_ptr(v) && py->mr.read(py->mr.ctx, v + (uint64_t)L->cframe_current_frame, &f, 8))
		f = 0;
	*out = plausible_ptr(v) ? f : 0;
	return 0;
}

/*
 * The guard of the GIL holder's top frame pointer for its thread state tstate and frame_ref: its
 * address into *addr, its length (0: none). Where the frame pointer is the thread state's own
 * (3.6-3.10, 3.13+), that word. Where it hangs off a cframe (3.11, 3.12), the cframe's
 * current_frame and the previous word after it (Include/cpython/pystate.h), not the thread
 * state's cframe pointer: the tstate->cframe word cost a remote range of its own per sample
 * (~0.9 us at 100 Hz), and what it caught is caught by the cframe's own two words. With both the
 * same at both ends of the readv and current_frame the top the walk used, either that eval ran
 * throughout (a deeper eval it entered meanwhile leaves them as they are: the frames walked are
 * then its stack as it was when the top was read), or its eval returned and another was entered
 * at the same C stack address, with the same parent cframe and a top frame at the same address
 * (the same C caller calling into Python again: the case the tstate->cframe word did not catch
 * either, being the same address again). An eval that returned leaves current_frame on its
 * entry frame, which is not the top.
 */
static unsigned top_guard(const struct prs_py *py, uint64_t tstate, uint64_t frame_ref, uint64_t *addr)
{
	const struct prs_py_layout *L = &py->L;

	if (L->tstate_frame >= 0 || L->tstate_current_frame >= 0) {
		*addr = tstate + (uint64_t)(L->tstate_frame >= 0 ? L->tstate_frame : L->tstate_current_frame);
		return 8;
	}
	if (L->tstate_cframe < 0 || !plausible_ptr(frame_ref))
		return 0;
	*addr = frame_ref + (uint64_t)L->cframe_current_frame;
	return 16;
}

/*
 * True when the sample's readv read the holder's top frame guard (top_guard) the same before and
 * after the working set, whole, its first word the top the walk used from frame_ref, and the walk
 * read nothing outside that readv: then every byte walked is of one state of its stack, and the
 * top need not be read again to check (one syscall less per sample in vm mode).
 */
static bool steady_top(struct prs_py *py, uint64_t tstate, uint64_t frame_ref, uint64_t top)
{
	uint64_t a = 0, v;
	unsigned len;

	if (tstate != py->guard_tstate || frame_ref != py->guard_ref ||
	    py->st.syscalls != py->syscalls_at_begin)
		return false;
	len = top_guard(py, tstate, frame_ref, &a);
	/* (the guard was this thread's, and whole: the holder may have changed since the last sample,
	 * and a range the working set cut is not all compared) */
	if (!len || py->pc.guard_addr[0] != a || py->pc.guard_len[0] != len)
		return false;
	if (!prs_pagecache_guard_steady(&py->pc, &v, 1))
		return false;
	return v == top;
}

/* f when it is a frame in its thread's data stack (3.11+, owner FRAME_OWNED_BY_THREAD, as the
 * walk read it): else 0 (a generator's frame is in its object, among objects other threads
 * write; a shim frame is on the C stack). */
static uint64_t thread_frame(struct prs_py *py, uint64_t f)
{
	uint8_t owner = 1;

	if (py->walk.minor < 11 || py->L.frame_owner < 0 || !plausible_ptr(f) ||
	    prs_pagecache_read(&py->pc, f + (uint64_t)py->L.frame_owner, &owner, 1) || owner != 0)
		return 0;
	return f;
}

/* Adds what one frame walk ran into to the counters. */
static void count_walk(struct prs_py *py, const struct prs_py_stack *st)
{
	py->st.read_errors += st->read_errors;
	py->st.bad_frames += st->bad_frames;
	py->st.cycles += st->cycles;
}

/* Walks the frames of the thread the iterator just read into st, unless the caller keeps it. */
static void walk_thread(struct prs_py *py, const struct prs_pywalk_iter *it, struct prs_py_stack *st)
{
	uint64_t top, top2;

	if (!st->tid && py->walk.tid_off < 0 && py->L.tstate_native_thread_id < 0) {
		calibrate_tid(py, st->thread_id);
		st->tid = prs_pywalk_tid(&py->walk, &py->cr, st->thread_id);
	}
	st->kept = st->tid > 0 && py->keep && py->keep(py->keep_arg, st->tid);
	if (st->kept) /* the caller knows it has not moved */
		return;
	prs_pywalk_thread(&py->walk, &py->cr, it, st);
	count_walk(py, st);
	top = st->top;
	if (!st->holds_gil || py->all_stopped)
		return;
	/* the next sample guards its top (it holds the GIL again, most likely) */
	py->guard_tstate = st->tstate;
	py->guard_ref = it->frame_ref;
	if (steady_top(py, st->tstate, it->frame_ref, top)) {
		py->st.steady_tops++;
		/* one state of its stack with this top at both ends of the readv, and the top's
		 * bytes changed between: only the thread itself writes them (or frees and reuses
		 * the frame, by running too), so it ran during the read */
		if (py->guard_instr >= 0 && top == py->guard_top_was &&
		    prs_pagecache_guard_moved(&py->pc, (unsigned)py->guard_instr)) {
			py->ran_tstate = st->tstate;
			py->st.seen_running++;
		}
		py->guard_top = thread_frame(py, top);
		return;
	}
	py->guard_top = thread_frame(py, top);
	/* the holder runs while we read: if its frame moved, walk again once (on fresh data: the
	 * cache is emptied only then) */
	if (top_frame_now(py, st->tstate, it->frame_ref, &top2) == 0 && top2 != top) {
		prs_pagecache_reset(&py->pc);
		py->st.retries++;
		prs_pywalk_frames(&py->walk, &py->cr, top2, st);
		count_walk(py, st);
		py->guard_top = thread_frame(py, top2);
	}
}

/* ---- samples ---- */

/*
 * The bytes guarded from a thread-owned top frame's instruction pointer at a: up to
 * PRS_PAGECACHE_GUARD_MAX, not past a's page (the thread's data stack is mapped in whole pages, so
 * what follows the frame there is only ever written by its thread).
 */
static unsigned guard_len(uint64_t a)
{
	uint64_t left = PRS_PAGECACHE_PAGE - (a & (PRS_PAGECACHE_PAGE - 1));

	return left < PRS_PAGECACHE_GUARD_MAX ? (unsigned)left : PRS_PAGECACHE_GUARD_MAX;
}

void prs_py_begin(struct prs_py *py)
{
	uint64_t a = 0;
	unsigned len;

	py->gen++;
	py->in_sample = true;
	/* the last holder's top frame pointer, read before and after the rest (steady_top) */
	len = !py->all_stopped && py->guard_tstate ? top_guard(py, py->guard_tstate, py->guard_ref, &a) : 0;
	prs_pagecache_guard(&py->pc, NULL, 0);
	if (len && prs_pagecache_guard_range(&py->pc, a, len) != 0)
		len = 0;
	/* and its top frame from its instruction pointer on (3.11+: the pointer, then its locals and
	 * value stack, which a thread running Python code writes all the time): when those bytes
	 * change while they are read, the thread runs (walk_thread; its state need not be read) */
	py->guard_instr = -1;
	py->guard_top_was = py->guard_top;
	py->ran_tstate = 0;
	if (len && py->walk.minor >= 11 && py->L.frame_instr >= 0 && plausible_ptr(py->guard_top))
		py->guard_instr = prs_pagecache_guard_range(&py->pc, py->guard_top + (uint64_t)py->L.frame_instr,
							    guard_len(py->guard_top + (uint64_t)py->L.frame_instr));
	prs_pagecache_begin(&py->pc);
	py->syscalls_at_begin = py->st.syscalls;
}

void prs_py_end(struct prs_py *py)
{
	py->in_sample = false;
	prs_pagecache_end(&py->pc);
}

/*
 * One sample's walk: each thread into stacks[nt] (p NULL: prs_py_walk), or into the scratch and
 * named at once into threads[nt] (prs_py_sample).
 */
static int walk_all(struct prs_py *py, struct prs_py_stack *stacks, struct prs_profile *p,
		    struct prs_py_thread *threads, int max, int *n, struct prs_err *err)
{
	struct prs_pywalk_iter it;
	int nt = 0, rc;

	*n = 0;
	py->st.samples++;
	prs_py_begin(py);
	rc = prs_pywalk_begin(&py->walk, &py->cr, &it);
	py->st.read_errors += it.read_errors;
	if (rc == -ESRCH)
		return prs_err_set(err, -ESRCH, "pid %d: process is gone", py->pid);
	if (rc)
		return prs_err_set(err, -EINVAL, "pid %d: no interpreter state (exiting or not started)", py->pid);
	it.read_errors = 0;
	prs_py_gil_walk_begin(py);
	for (;;) {
		struct prs_py_stack *st = p || nt >= max ? &py->raw : &stacks[nt];

		if (prs_pywalk_next(&py->walk, &py->cr, &it, st) <= 0)
			break;
		prs_py_gil_walk_seen(py, it.gil);
		if (nt >= max) {
			py->st.truncated++;
			continue;
		}
		walk_thread(py, &it, st);
		if (st->truncated)
			py->st.truncated++;
		py->st.threads++;
		if (p && (rc = prs_py_name(py, p, st, &threads[nt])))
			return prs_err_set(err, rc, "pid %d: out of memory", py->pid);
		nt++;
	}
	py->st.read_errors += it.read_errors;
	py->st.cycles += it.cycles;
	prs_py_gil_walk_end(py);
	*n = nt;
	return 0;
}

int prs_py_walk(struct prs_py *py, struct prs_py_stack *stacks, int max, int *n, struct prs_err *err)
{
	return walk_all(py, stacks, NULL, NULL, max, n, err);
}

int prs_py_sample(struct prs_py *py, struct prs_profile *p, struct prs_py_thread *threads, int max,
		  int *n, struct prs_err *err)
{
	int rc = walk_all(py, NULL, p, threads, max, n, err);

	prs_py_end(py);
	return rc;
}

void prs_py_set_stopped(struct prs_py *py, bool all_stopped)
{
	py->all_stopped = all_stopped;
}

void prs_py_set_keep(struct prs_py *py, bool (*keep)(void *arg, int32_t tid), void *arg)
{
	py->keep = keep;
	py->keep_arg = arg;
}

void prs_py_warm(struct prs_py *py)
{
	prs_pagecache_warm(&py->pc);
}

void prs_py_get_stats(const struct prs_py *py, struct prs_py_stats *out)
{
	*out = py->st;
}
