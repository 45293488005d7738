/* SPDX-License-Identifier: MIT */
/*
 * The CPython frame walker (python/walk.h): runtime -> interpreters -> thread states -> frames
 * (PyFrameObject up to 3.10, _PyInterpreterFrame from 3.11), each frame reduced to its code
 * object's address, its instruction offset and its flags. The target may be running: every value
 * is range-checked, walks are bounded by PRS_MAX_PY_FRAMES and cut on a revisited frame or thread
 * state (a popped frame's slot can be reused while a running thread is read). Up to 3.10 each
 * frame is a PyFrameObject run by its own eval-loop call; from 3.11 frames are
 * _PyInterpreterFrames (in the thread's data stack, or in a generator object), several per
 * eval-loop call, marked by is_entry (3.11) or by a shim frame below them (3.12+).
 */
#include "python/walk.h"

#include <errno.h>

#include "util/banned.h"

void prs_pywalk_init(struct prs_pywalk *w, const struct prs_py_layout *L, uint32_t version_hex)
{
	const int32_t f[] = { L->tstate_next, L->tstate_interp, L->tstate_thread_id,
			      L->tstate_native_thread_id, L->tstate_frame, L->tstate_cframe,
			      L->tstate_current_frame };
	size_t k, m = 0;

	memset(w, 0, sizeof(*w));
	w->L = L;
	w->minor = (version_hex >> 16) & 255;
	w->tid_off = -1;
	for (k = 0; k < sizeof(f) / sizeof(f[0]); k++)
		if (f[k] >= 0 && (size_t)f[k] + 8 > m)
			m = (size_t)f[k] + 8;
	w->tstate_read = m <= 4096 ? (uint32_t)m : 4096;
}

static int rd(const struct prs_memreader *mr, uint64_t addr, void *buf, size_t len)
{
	return mr->read(mr->ctx, addr, buf, len);
}

/* ---- thread states ---- */

/* Reads the interpreter it->interp's first thread state, next interpreter and GIL; a read that
 * fails ends the enumeration. */
static void enter_interp(const struct prs_pywalk *w, const struct prs_memreader *mr, struct prs_pywalk_iter *it)
{
	const struct prs_py_layout *L = w->L;
	uint64_t gil = 0, interp = it->interp;
	int32_t lk = 0;

	it->tstate = it->next_interp = it->holder = it->gil = 0;
	it->locked = false;
	it->nth = 0;
	if (!plausible_ptr(interp) || rd(mr, interp + (uint64_t)L->interp_tstate_head, &it->tstate, 8) ||
	    rd(mr, interp + (uint64_t)L->interp_next, &it->next_interp, 8)) {
		it->read_errors++;
		it->tstate = 0;
		it->done = true;
		return;
	}
	/* the GIL holder: 3.7-3.11 the runtime's GIL, 3.12+ the interpreter's, 3.6 a global */
	if (L->runtime_gil >= 0 && w->runtime)
		gil = w->runtime + (uint64_t)L->runtime_gil;
	else if (L->interp_gil_ptr >= 0 && rd(mr, interp + (uint64_t)L->interp_gil_ptr, &gil, 8))
		gil = 0;
	if (gil && plausible_ptr(gil) && L->gil_locked >= 0 && !rd(mr, gil + (uint64_t)L->gil_locked, &lk, 4) &&
	    !rd(mr, gil + (uint64_t)L->gil_last_holder, &it->holder, 8)) {
		it->locked = lk == 1;
		it->gil = gil;
	} else if (w->tstate_current_var && !rd(mr, w->tstate_current_var, &it->holder, 8)) {
		it->locked = it->holder != 0; /* 3.6: _PyThreadState_Current is NULL while released */
	} else {
		it->holder = 0;
	}
}

int prs_pywalk_begin(const struct prs_pywalk *w, const struct prs_memreader *mr, struct prs_pywalk_iter *it)
{
	uint64_t interp = 0;
	int rc;

	memset(it, 0, sizeof(*it));
	if (w->runtime)
		rc = rd(mr, w->runtime + (uint64_t)w->L->runtime_interp_head, &interp, 8);
	else
		rc = rd(mr, w->interp_head_var, &interp, 8);
	if (rc == -ESRCH)
		return -ESRCH;
	if (rc || !interp) {
		it->read_errors++;
		it->done = true;
		return -EINVAL;
	}
	it->interp = interp;
	enter_interp(w, mr, it);
	return 0;
}

/* Moves to the next interpreter; false when there is none (or a loop). */
static bool next_interp(const struct prs_pywalk *w, const struct prs_memreader *mr, struct prs_pywalk_iter *it)
{
	if (it->next_interp == it->interp) {
		it->cycles++;
		return false;
	}
	it->interp = it->next_interp;
	if (!it->interp || ++it->ninterp >= PRS_PYWALK_MAX_INTERPS)
		return false;
	enter_interp(w, mr, it);
	return !it->done;
}

/* Whether tstate was read lately in this enumeration (a loop in the thread list: a thread state
 * freed and reused meanwhile). */
static bool seen_lately(const struct prs_pywalk_iter *it, uint64_t tstate)
{
	unsigned k, n = it->nrecent < PRS_PYWALK_RECENT ? it->nrecent : PRS_PYWALK_RECENT;

	for (k = 0; k < n; k++)
		if (it->recent[k] == tstate)
			return true;
	return false;
}

int32_t prs_pywalk_tid(const struct prs_pywalk *w, const struct prs_memreader *mr, uint64_t pthread)
{
	int32_t v = 0;

	if (w->tid_off < 0 || !plausible_ptr(pthread & ~(uint64_t)7) ||
	    rd(mr, pthread + (uint64_t)w->tid_off, &v, 4) || v <= 0)
		return 0;
	return v;
}

/* Fills the head of st from the thread state at tstate whose bytes are ts. */
static void thread_head(const struct prs_pywalk *w, const struct prs_memreader *mr,
			const struct prs_pywalk_iter *it, uint64_t tstate, const uint8_t *ts, struct prs_py_stack *st)
{
	const struct prs_py_layout *L = w->L;

	st->tstate = tstate;
	st->thread_id = u64_at(ts, L->tstate_thread_id);
	st->tid = L->tstate_native_thread_id >= 0 ? i32_at(ts, L->tstate_native_thread_id)
						  : prs_pywalk_tid(w, mr, st->thread_id);
	st->holds_gil = it->locked && it->holder == tstate;
	st->top = 0;
	st->kept = st->truncated = st->has_ident = false;
	st->read_errors = st->bad_frames = st->cycles = 0;
	st->nframes = 0;
}

int prs_pywalk_next(const struct prs_pywalk *w, const struct prs_memreader *mr, struct prs_pywalk_iter *it,
		    struct prs_py_stack *st)
{
	const struct prs_py_layout *L = w->L;
	uint8_t ts[4096];

	while (!it->done) {
		uint64_t tstate = it->tstate;

		if (!tstate) {
			if (!next_interp(w, mr, it))
				it->done = true;
			continue;
		}
		it->tstate = 0; /* unless read below: ends this interpreter's list */
		if (++it->nth > PRS_PYWALK_MAX_THREADS || seen_lately(it, tstate)) {
			it->cycles++;
			continue;
		}
		if (!plausible_ptr(tstate) || rd(mr, tstate, ts, w->tstate_read)) {
			it->read_errors++;
			continue;
		}
		it->recent[it->nrecent++ % PRS_PYWALK_RECENT] = tstate;
		it->tstate = u64_at(ts, L->tstate_next);
		it->frame_ref = u64_at(ts, L->tstate_frame >= 0 ? L->tstate_frame
					   : L->tstate_current_frame >= 0 ? L->tstate_current_frame
									  : L->tstate_cframe);
		thread_head(w, mr, it, tstate, ts, st);
		return 1;
	}
	return 0;
}

int prs_pywalk_top(const struct prs_pywalk *w, const struct prs_memreader *mr, const struct prs_pywalk_iter *it,
		   uint64_t *top)
{
	const struct prs_py_layout *L = w->L;
	uint64_t cf[2];
	int rc;

	*top = 0;
	if (L->tstate_frame >= 0 || L->tstate_current_frame >= 0) {
		*top = it->frame_ref;
		return 0;
	}
	/* 3.11, 3.12: tstate->cframe->current_frame, with the cframe's previous word after it (what
	 * the reader guards of it: the working set holds both) */
	if (!plausible_ptr(it->frame_ref))
		return it->frame_ref ? -EFAULT : 0;
	rc = rd(mr, it->frame_ref + (uint64_t)L->cframe_current_frame, cf, sizeof(cf));
	*top = rc ? 0 : cf[0];
	return rc;
}

/* ---- frames ---- */

static int32_t clamp_off(int64_t v)
{
	return v < 0 ? -1 : v > INT32_MAX ? INT32_MAX : (int32_t)v;
}

/* Whether f is among the last frames visited (recent holds the last n, as a ring). */
static bool visited(const uint64_t *recent, unsigned n, uint64_t f)
{
	unsigned k, m = n < PRS_PYWALK_RECENT ? n : PRS_PYWALK_RECENT;

	for (k = 0; k < m; k++)
		if (recent[k] == f)
			return true;
	return false;
}

/*
 * One frame's bytes fb into st->*[n]: ≤3.10 a PyFrameObject (every frame is its own eval call);
 * 3.11+ an _PyInterpreterFrame. Returns false for a frame that is not a Python frame (3.11+
 * owner >= 3: a shim or interpreter-owned frame, which ends the group of the frame above it).
 */
static bool one_frame(const struct prs_pywalk *w, const uint8_t *fb, struct prs_py_stack *st, unsigned n)
{
	const struct prs_py_layout *L = w->L;
	uint64_t code = u64_at(fb, L->frame_code), instr, base;
	uint8_t owner;

	if (w->minor <= 10) {
		int32_t lasti = i32_at(fb, L->frame_lasti);

		st->code[n] = code;
		st->off[n] = lasti < 0 ? -1 : clamp_off(w->minor == 10 ? 2 * (int64_t)lasti : lasti);
		st->flags[n] = PRS_PYF_GROUP_END;
		return true;
	}
	owner = fb[L->frame_owner];
	if (owner >= 3)
		return false;
	if (w->minor >= 14)
		code &= ~(uint64_t)3; /* _PyStackRef tag bits */
	instr = u64_at(fb, L->frame_instr);
	base = code + (uint64_t)L->code_adaptive;
	st->code[n] = code;
	st->off[n] = instr < base ? -1 : clamp_off((int64_t)((instr - base) / 2));
	st->flags[n] = (L->frame_is_entry >= 0 && fb[L->frame_is_entry]) ? PRS_PYF_GROUP_END : 0;
	if (owner == (uint8_t)L->owner_generator)
		st->flags[n] |= PRS_PYF_GENERATOR;
	return true;
}

void prs_pywalk_frames(const struct prs_pywalk *w, const struct prs_memreader *mr, uint64_t top,
		       struct prs_py_stack *st)
{
	const struct prs_py_layout *L = w->L;
	uint8_t fb[256];
	size_t need = (size_t)L->frame_size < sizeof(fb) ? (size_t)L->frame_size : sizeof(fb);
	uint64_t recent[PRS_PYWALK_RECENT];
	unsigned n = 0, steps = 0;
	uint64_t f = top, lowest = UINT64_MAX;

	st->top = top;
	st->nframes = 0;
	st->truncated = false;
	st->read_errors = st->bad_frames = st->cycles = 0;
	while (f) {
		if (++steps > PRS_MAX_PY_FRAMES + 64 || n >= PRS_MAX_PY_FRAMES) {
			st->truncated = true;
			break;
		}
		if (!plausible_ptr(f)) {
			st->bad_frames++;
			st->truncated = true;
			break;
		}
		/* below every frame walked, it is none of them (3.11+: the callers on one data stack
		 * chunk lie at ever lower addresses, so a walk mostly skips the search: 6,700 of a
		 * 50-frame sample's ~34,000 instructions were it) */
		if (f >= lowest && visited(recent, steps - 1, f)) {
			st->cycles++;
			st->truncated = true;
			break;
		}
		if (rd(mr, f, fb, need)) {
			st->read_errors++;
			st->truncated = true;
			break;
		}
		recent[(steps - 1) % PRS_PYWALK_RECENT] = f;
		if (f < lowest)
			lowest = f;
		if (one_frame(w, fb, st, n))
			n++;
		else if (n)
			st->flags[n - 1] |= PRS_PYF_GROUP_END;
		f = u64_at(fb, L->frame_back);
	}
	if (n)
		st->flags[n - 1] |= PRS_PYF_GROUP_END;
	st->nframes = n;
}

void prs_pywalk_thread(const struct prs_pywalk *w, const struct prs_memreader *mr,
		       const struct prs_pywalk_iter *it, struct prs_py_stack *st)
{
	uint64_t top;

	if (prs_pywalk_top(w, mr, it, &top)) {
		prs_pywalk_frames(w, mr, 0, st);
		st->read_errors = 1;
		st->truncated = true;
		return;
	}
	prs_pywalk_frames(w, mr, top, st);
}

int prs_pywalk_all(const struct prs_pywalk *w, const struct prs_memreader *mr, struct prs_py_stack *st,
		   int max, int *n)
{
	struct prs_pywalk_iter it;
	int rc;

	*n = 0;
	rc = prs_pywalk_begin(w, mr, &it);
	if (rc)
		return rc;
	while (*n < max && prs_pywalk_next(w, mr, &it, &st[*n]) > 0) {
		prs_pywalk_thread(w, mr, &it, &st[*n]);
		(*n)++;
	}
	return 0;
}

/* Reads every vec, setting each res, in one batch when the reader can. */
static void readv_all(const struct prs_memreader *mr, struct prs_memvec *v, uint32_t n)
{
	if (mr->readv && mr->readv(mr->ctx, v, n) >= 0)
		return;
	for (uint32_t k = 0; k < n; k++)
		v[k].res = mr->read(mr->ctx, v[k].addr, v[k].buf, v[k].len);
}

/* One batch of identities: frames [i, i + n) of st. */
static void idents_batch(const struct prs_pywalk *w, const struct prs_memreader *mr,
			 struct prs_py_stack *st, uint32_t i, uint32_t n)
{
	const struct prs_py_layout *L = w->L;
	struct prs_memvec v[PRS_PYWALK_IDENT_BATCH];
	uint64_t word[PRS_PYWALK_IDENT_BATCH];
	bool version = L->code_version >= 0;
	int32_t off = version ? L->code_version : L->code_name;

	for (uint32_t k = 0; k < n; k++) {
		word[k] = 0;
		v[k] = (struct prs_memvec){ st->code[i + k] + (uint64_t)off, &word[k], version ? 4 : 8, 0 };
	}
	readv_all(mr, v, n);
	if (!version) { /* the name string's hash, one more batch */
		for (uint32_t k = 0; k < n; k++) {
			uint64_t name = v[k].res == 0 ? word[k] : 0;

			word[k] = 0;
			v[k] = (struct prs_memvec){ plausible_ptr(name) ? name + (uint64_t)L->str_length + 8 : 0,
						    &word[k], 8, 0 };
		}
		readv_all(mr, v, n);
	}
	for (uint32_t k = 0; k < n; k++)
		st->ident[i + k] = v[k].res != 0 || !v[k].addr ? 0
				   : version ? prs_py_ident_version((uint32_t)word[k])
					     : prs_py_ident_hash(word[k]);
}

void prs_pywalk_idents(const struct prs_pywalk *w, const struct prs_memreader *mr,
		       struct prs_py_stack *st)
{
	uint32_t n = st->nframes < PRS_MAX_PY_FRAMES ? st->nframes : PRS_MAX_PY_FRAMES;

	for (uint32_t i = 0; i < n; i += PRS_PYWALK_IDENT_BATCH)
		idents_batch(w, mr, st, i, n - i < PRS_PYWALK_IDENT_BATCH ? n - i : PRS_PYWALK_IDENT_BATCH);
	st->has_ident = true;
}
