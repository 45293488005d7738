/* SPDX-License-Identifier: MIT */
/*
 * A CPython "world" of any generated layout row (3.6-3.13) laid out on the py_image.h image, for
 * the unit tests of the walker and of the naming: type objects, the runtime anchors, interpreters
 * with their GIL, thread states (with a glibc-like struct pthread up to 3.10), frames in the
 * version's own shape (PyFrameObject up to 3.10, _PyInterpreterFrame from 3.11) and code objects
 * with a line table in the version's format. Every offset comes from the layout row, so the truth
 * is what the test wrote.
 */
#ifndef PYRSPROF_TESTS_PY_WORLD_H
#define PYRSPROF_TESTS_PY_WORLD_H

#include <stdbool.h>
#include <stdint.h>

#include "pyrsprof/memreader.h"
#include "pyrsprof/profile.h"
#include "python/walk.h"

struct prs_py;

#define WORLD_TID_OFF 0x2d0 /* where the tid sits in the fake struct pthread (glibc 2.36 x86_64) */

struct world {
	const struct prs_py_layout *L;
	unsigned minor;
	uint64_t t_code, t_str, t_bytes;
	uint64_t runtime, interp_head_var, tstate_current_var; /* the anchors (0 = none) */
	struct prs_pywalk walk;                               /* set up over L and the anchors */
};

/* Lays out types and anchors for the row of 3.minor (the image must be cleared). */
void world_init(struct world *w, unsigned minor);
/*
 * Starts a test over a fresh world of 3.minor: frees *py and *prof, clears the image, lays out the
 * world (world_init), and makes a CPython reader over mr with the world's layout row, anchors,
 * kernel tid offset and type objects (python-internal.h's prs_py_new_raw) and a new profile.
 * Fails the test when out of memory.
 */
void world_fresh(struct world *w, unsigned minor, const struct prs_memreader *mr, struct prs_py **py,
		 struct prs_profile **prof);
/* A new interpreter, linked after the last one; its GIL (3.12+ its own, 3.7-3.11 the runtime's,
 * 3.6 _PyThreadState_Current) says nobody holds it. */
uint64_t world_interp(struct world *w);
/* A new thread state of interp, linked after its last one, with kernel tid `tid` and pthread_t
 * thread_id (≤3.10: the address of a fake struct pthread holding tid at WORLD_TID_OFF). */
uint64_t world_thread(struct world *w, uint64_t interp, int32_t tid);
/* Makes tstate the GIL holder of interp (locked), or releases the GIL when tstate is 0. */
void world_gil(struct world *w, uint64_t interp, uint64_t tstate);
/* Points tstate's current frame at f (3.11/3.12 through its _PyCFrame). */
void world_top(struct world *w, uint64_t tstate, uint64_t f);

/*
 * A code object named qual (qualname from 3.11, name before; name = the part after the last '.'),
 * in file, at firstline, with 16 code units of bytecode and a line table in the version's format:
 * units 0-7 on line world_line(firstline, 0), units 8-15 on world_line(firstline, 8).
 */
uint64_t world_code(struct world *w, const char *qual, const char *file, int firstline);
/* The line world_code's table gives unit u. */
int world_line(const struct world *w, int firstline, unsigned u);

/*
 * A frame of code at code unit `unit` (≤3.9 f_lasti = 2 * unit bytes, 3.10 f_lasti = unit,
 * 3.11+ the instruction pointer at unit), whose caller is back. owner (3.11+): 0 thread,
 * 1 generator, 3 a shim; entry (3.11): is_entry. ≤3.10 ignores owner and entry.
 */
uint64_t world_frame(struct world *w, uint64_t code, unsigned unit, uint64_t back, uint8_t owner, bool entry);
/* Sets a frame's instruction as raw value: ≤3.10 f_lasti = v, 3.11+ the pointer code + v. */
void world_frame_instr(struct world *w, uint64_t f, uint64_t code, int64_t v);

/* The raw offset the walker reports for unit (bytes ≤3.10, units 3.11+). */
int32_t world_off(const struct world *w, unsigned unit);

#endif
