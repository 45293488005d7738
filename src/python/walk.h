/* SPDX-License-Identifier: MIT */
/*
 * The CPython frame walker: from the runtime's anchors, through interpreters and thread states, to
 * each thread's raw stack (code object address, instruction offset, flags per frame), reading with
 * nothing but a memreader. No naming, no allocation, no /proc, no libelf: it depends on the layout
 * row (python/layout.h), the memreader interface and the raw stack type only, so that the
 * LD_PRELOAD agent can run the same walk inside the target over a reader that cannot fault.
 *
 * Everything read is untrusted: a pointer that is not plausible or cannot be read ends that
 * walk with an error counted in the result, loops in the frame, thread and interpreter lists are
 * cut, and every list is bounded. The context is read-only during a walk and the iterator is the
 * caller's, so walks of several threads may run at once (the agent's signal handlers). Every
 * function here is async-signal-safe when the memreader is.
 *
 *   struct prs_pywalk_iter it;
 *   if (prs_pywalk_begin(&w, mr, &it) == 0)
 *           while (prs_pywalk_next(&w, mr, &it, st) > 0)
 *                   prs_pywalk_thread(&w, mr, &it, st);
 */
#ifndef PYRSPROF_PYTHON_WALK_H
#define PYRSPROF_PYTHON_WALK_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "pyrsprof/memreader.h"
#include "pyrsprof/pystack.h"
#include "python/layout.h"

#define PRS_PYWALK_MAX_THREADS 4096 /* thread states followed per interpreter */
#define PRS_PYWALK_MAX_INTERPS 256  /* interpreters followed */
#define PRS_PYWALK_RECENT 64        /* the last frames (thread states) a loop is looked for among */

/* ---- bytes copied from the target ---- */

static inline uint64_t u64_at(const uint8_t *b, int32_t off)
{
	uint64_t v;

	memcpy(&v, b + off, 8);
	return v;
}

static inline int32_t i32_at(const uint8_t *b, int32_t off)
{
	int32_t v;

	memcpy(&v, b + off, 4);
	return v;
}

/* A pointer the target could hold to an object: user space, 8-byte aligned, not in page 0. */
static inline bool plausible_ptr(uint64_t a)
{
	return a >= 4096 && a < (1ull << 47) && !(a & 7);
}

/* ---- the walker ---- */

/* What the walker knows of a target: plain data, set up once (prs_pywalk_init, then the anchors). */
struct prs_pywalk {
	const struct prs_py_layout *L; /* borrowed; must outlive the walker */
	uint32_t minor;                /* 3.minor of the target */
	uint64_t runtime;              /* &_PyRuntime (3.7+); 0 = none */
	uint64_t interp_head_var;      /* &interp_head (3.6) */
	uint64_t tstate_current_var;   /* &_PyThreadState_Current (3.6): the GIL holder, NULL when released */
	int32_t tid_off;               /* <=3.10: the kernel tid's offset in glibc's struct pthread; -1 unknown */
	uint32_t tstate_read;          /* bytes of a PyThreadState read: up to the last field used */
};

/* Where an enumeration of thread states is; the caller's, filled by prs_pywalk_begin. */
struct prs_pywalk_iter {
	uint64_t interp, next_interp, tstate; /* tstate: the next thread state to read (0: list end) */
	uint64_t holder;                      /* the GIL's last holder in this interpreter */
	uint64_t gil;                         /* this interpreter's struct _gil_runtime_state (3.7+;
					       * 0: unknown) */
	bool locked, done;
	unsigned ninterp, nth;
	uint64_t recent[PRS_PYWALK_RECENT];   /* thread states read lately (loops) */
	unsigned nrecent;
	uint64_t frame_ref; /* the current thread state's frame field: the top frame, or 3.11/3.12 the
			     * _PyCFrame whose current_frame is the top frame */
	uint32_t read_errors, cycles;         /* what the enumeration ran into */
};

/* Sets up w for layout L (borrowed) of version version_hex; the anchors are 0, tid_off -1. */
void prs_pywalk_init(struct prs_pywalk *w, const struct prs_py_layout *L, uint32_t version_hex);

/*
 * Starts an enumeration of every thread state of every interpreter. Returns 0, -ESRCH (the
 * process is gone) or -EINVAL (no interpreter state: exiting or not started; it->read_errors 1).
 */
int prs_pywalk_begin(const struct prs_pywalk *w, const struct prs_memreader *mr, struct prs_pywalk_iter *it);
/*
 * Reads the next thread state into st: tid, thread_id, tstate, holds_gil; no frames (nframes 0,
 * top 0, kept and truncated false). Returns 1, or 0 when there is none left (a thread state or an
 * interpreter that cannot be read, or a loop, ends its list: counted in it).
 */
int prs_pywalk_next(const struct prs_pywalk *w, const struct prs_memreader *mr, struct prs_pywalk_iter *it,
		    struct prs_py_stack *st);
/*
 * The top frame of the thread prs_pywalk_next returned last, into *top (0: the thread runs no
 * Python code). 3.11/3.12: one read of its _PyCFrame. Returns 0, or the read's error (*top 0).
 */
int prs_pywalk_top(const struct prs_pywalk *w, const struct prs_memreader *mr, const struct prs_pywalk_iter *it,
		   uint64_t *top);
/*
 * prs_pywalk_top then prs_pywalk_frames: the frames of the thread prs_pywalk_next returned last
 * into st. A top frame that cannot be read counts as a read error and cuts the walk.
 */
void prs_pywalk_thread(const struct prs_pywalk *w, const struct prs_memreader *mr,
		       const struct prs_pywalk_iter *it, struct prs_py_stack *st);
/*
 * Walks the frames from top into st (nframes, code, off, flags, truncated and the error counts;
 * st->top = top). At most PRS_MAX_PY_FRAMES frames; shim frames (3.12+) are not returned, they
 * mark the frame above them PRS_PYF_GROUP_END.
 */
void prs_pywalk_frames(const struct prs_pywalk *w, const struct prs_memreader *mr, uint64_t top,
		       struct prs_py_stack *st);
/* <=3.10: the kernel tid of the thread whose pthread_t is pthread (read at w->tid_off); 0 when
 * unknown. */
int32_t prs_pywalk_tid(const struct prs_pywalk *w, const struct prs_memreader *mr, uint64_t pthread);

/*
 * Code object identities (struct prs_py_stack.ident): from a code object's co_version (3.12+,
 * 0 when the counter is spent) or, before, the cached hash of its name string (0 or -1: not
 * computed). 0 means unknown: such a frame is not checked.
 */
static inline uint32_t prs_py_ident_version(uint32_t version)
{
	return version ? (version | (1u << 31)) : 0;
}

static inline uint32_t prs_py_ident_hash(uint64_t hash)
{
	uint32_t v = (uint32_t)(hash ^ (hash >> 32)) & 0x7fffffffu;

	if (hash == 0 || hash == UINT64_MAX)
		return 0;
	return v ? v : 1;
}

/*
 * Fills st->ident for its frames as they are now (after prs_pywalk_thread, before anything can
 * free them: the agent, in its signal handler) and sets st->has_ident: batched reads, one or
 * two per PRS_PYWALK_IDENT_BATCH frames. A code object that cannot be read gets 0.
 */
#define PRS_PYWALK_IDENT_BATCH 64
void prs_pywalk_idents(const struct prs_pywalk *w, const struct prs_memreader *mr,
		       struct prs_py_stack *st);

/*
 * Every thread's raw stack, into st[0..*n) (*n <= max; threads beyond max are left out). Returns
 * 0, -ESRCH or -EINVAL as prs_pywalk_begin.
 */
int prs_pywalk_all(const struct prs_pywalk *w, const struct prs_memreader *mr, struct prs_py_stack *st,
		   int max, int *n);

#endif
