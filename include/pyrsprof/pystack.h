/* SPDX-License-Identifier: MIT */
/*
 * One thread's raw Python stack, as the CPython walker reads it: each frame is the address of its
 * code object and an instruction offset, nothing is named yet. The profiler names raw stacks
 * (prs_py_name in pyrsprof/python.h); the LD_PRELOAD agent produces them inside the target with the
 * same walker. Plain data with no pointers, so it can be copied into a ring or a file as it is.
 */
#ifndef PYRSPROF_PYSTACK_H
#define PYRSPROF_PYSTACK_H

#include <stdbool.h>
#include <stdint.h>

#include "pyrsprof/types.h"

/* Flags of one Python frame (struct prs_py_stack.flags, struct prs_py_thread.fflags). */
enum {
	/*
	 * This frame is the outermost of the group of frames run by one native eval-loop call:
	 * every frame up to 3.10; 3.11 the frame with is_entry; 3.12+ the frame just above a shim
	 * (owner == FRAME_OWNED_BY_CSTACK). The merge consumes one group per native eval frame.
	 */
	PRS_PYF_GROUP_END = 1u << 0,
	/* 3.11+: the frame lives in a generator or coroutine object (owner FRAME_OWNED_BY_GENERATOR),
	 * so it is never an incomplete frame being set up (raw stacks only). */
	PRS_PYF_GENERATOR = 1u << 1,
};

struct prs_py_stack {
	int32_t tid;            /* Linux thread id; 0 when it could not be read */
	uint64_t thread_id;     /* pthread_t (threading.get_ident()) */
	uint64_t tstate;        /* target address of the PyThreadState */
	uint64_t top;           /* target address of the frame the walk started from (0: none) */
	bool holds_gil;         /* this thread holds the GIL (from the GIL's locked + last holder) */
	bool truncated;         /* the walk was cut: deeper than PRS_MAX_PY_FRAMES, a loop, a bad read */
	bool kept;              /* not walked: the caller keeps its frames (prs_py_set_keep) */
	bool has_ident;         /* ident[] was taken with the frames (the agent does; walks here do not) */
	/* what the walk ran into; each of them also cut it (truncated) */
	uint16_t read_errors, bad_frames, cycles;
	uint32_t nframes;       /* index 0 is the innermost frame */
	/*
	 * code: the code object's address (3.14+: tag bits cleared). off: the instruction offset in
	 * the unit of the version's line table: bytes up to 3.10 (f_lasti, 3.10: 2 * f_lasti), 2-byte
	 * code units from 3.11 ((instr_ptr - co_code_adaptive) / 2); -1 when the frame has not started
	 * (f_lasti < 0) or points before its first instruction; INT32_MAX when out of range.
	 * flags: PRS_PYF_*.
	 */
	uint64_t code[PRS_MAX_PY_FRAMES];
	int32_t off[PRS_MAX_PY_FRAMES];
	uint8_t flags[PRS_MAX_PY_FRAMES];
	/*
	 * With has_ident: who each code object was when its frame was read, for frames named later
	 * (a code object freed meanwhile and its address reused must not name the frame): 3.12+ its
	 * co_version | 1 << 31, before its name's cached string hash folded to 31 bits; 0 unknown.
	 * prs_py_code_ident computes the same of an object read now.
	 */
	uint32_t ident[PRS_MAX_PY_FRAMES];
};

#endif
