/* SPDX-License-Identifier: MIT */
/*
 * Merging a thread's native stack with its Python frames: each native eval-loop frame
 * (_PyEval_EvalFrameDefault) is replaced by the group of Python frames it runs (one PyFrameObject
 * up to 3.10; 3.11 down to the is_entry frame; 3.12+ down to the frame above a shim), pairing the
 * innermost eval frame with the innermost group. Interpreter plumbing (native frames inside
 * libpython or the python executable) between Python frames and everything below the outermost
 * Python frame is hidden unless PRS_PY_NATIVE_ALL. Native frames above the innermost Python frame
 * (list_sort, zlib, libffi, a Rust cdylib) are kept, and so are non-interpreter native frames
 * between Python frames (a C extension calling back into Python).
 */
#include "python/python-internal.h"

#include "util/banned.h"

bool prs_py_is_eval_pc(const struct prs_py *py, uint64_t pc)
{
	unsigned i;

	for (i = 0; i < py->neval; i++)
		if (pc >= py->eval_lo[i] && pc < py->eval_hi[i])
			return true;
	return false;
}

bool prs_py_is_interp_pc(const struct prs_py *py, uint64_t pc)
{
	unsigned i;

	for (i = 0; i < py->ninterp; i++)
		if (pc >= py->interp_lo[i] && pc < py->interp_hi[i])
			return true;
	return false;
}

/* Appends, innermost first, into a scratch array of PRS_MAX_STACK_FRAMES; returns false when full. */
static bool push(uint32_t *tmp, size_t *n, uint32_t id)
{
	if (*n >= PRS_MAX_STACK_FRAMES)
		return false;
	tmp[(*n)++] = id;
	return true;
}

size_t prs_py_merge(struct prs_py *py, const uint64_t *pcs, const uint32_t *native_frame_ids,
		    size_t nnative, const struct prs_py_thread *t, unsigned flags, uint32_t *out,
		    size_t max)
{
	uint32_t tmp[PRS_MAX_STACK_FRAMES];
	size_t n = 0, i, o, neval = 0, ngroups = 0, pf = 0, skip;
	size_t last_py = 0; /* tmp length right after the outermost Python frame written so far */
	bool seen_eval = false, all = flags & PRS_PY_NATIVE_ALL;

	for (i = 0; i < t->nframes; i++)
		if (t->fflags[i] & PRS_PYF_GROUP_END)
			ngroups++;
	for (i = 0; i < nnative; i++)
		if (prs_py_is_eval_pc(py, pcs[i]))
			neval++;
	if (neval != ngroups && nnative)
		py->st.merge_mismatch++;
	/*
	 * More eval frames than groups: the innermost eval calls are setting up or tearing down a
	 * frame not linked into the thread state (measured with sorted(key=f) and map(lambda): 5-14 %
	 * of samples, the leaf in _PyEval_EvalFrameDefault's prologue/epilogue or in
	 * _PyEvalFramePushAndInit), so pair from the root: the excess innermost evals own no group.
	 */
	skip = neval > ngroups ? neval - ngroups : 0;
	for (i = 0; i < nnative; i++) {
		if (prs_py_is_eval_pc(py, pcs[i])) {
			seen_eval = true;
			if (skip) {
				skip--;
				if (all)
					push(tmp, &n, native_frame_ids[i]);
				continue;
			}
			if (pf >= t->nframes) { /* more eval frames than groups */
				if (all)
					push(tmp, &n, native_frame_ids[i]);
				continue;
			}
			do {
				push(tmp, &n, t->frames[pf]);
			} while (!(t->fflags[pf++] & PRS_PYF_GROUP_END) && pf < t->nframes);
			last_py = n;
			continue;
		}
		if (seen_eval && !all && prs_py_is_interp_pc(py, pcs[i]))
			continue; /* plumbing between (or below) Python frames */
		push(tmp, &n, native_frame_ids[i]);
	}
	if (pf < t->nframes) {
		/* fewer eval frames than groups (native unwind cut short, or none): the rest Python-only,
		 * toward the root */
		n = seen_eval && !all ? last_py : n;
		for (; pf < t->nframes; pf++)
			push(tmp, &n, t->frames[pf]);
		last_py = n;
	}
	if (!all && t->nframes)
		n = last_py; /* the stack starts at the outermost Python frame */
	/* reverse into out (root first); keep the root side when it does not fit */
	for (o = 0; o < n && o < max; o++)
		out[o] = tmp[n - 1 - o];
	return o;
}
