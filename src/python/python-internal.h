/* SPDX-License-Identifier: MIT */
/*
 * Internals of the CPython reader shared by its .c files and its unit tests: the handle, the
 * code-object cache, the line-table decoders. Not a public API. The walker (python/walk.h) and the
 * str decoder (python/str.h) have headers of their own: they do not need the handle.
 */
#ifndef PYRSPROF_PYTHON_INTERNAL_H
#define PYRSPROF_PYTHON_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "pyrsprof/pagecache.h"
#include "pyrsprof/python.h"
#include "python/layout.h"
#include "python/str.h"
#include "python/walk.h"

/* ---- line tables (pure functions over bytes copied from the target; never read past len) ---- */

/* ≤3.9 co_lnotab: (addr_delta u8, line_delta) pairs; line_delta is int8 from 3.6. addr = byte
 * offset of the last instruction started (f_lasti). Returns the line. */
int prs_py_line_lnotab(const uint8_t *tab, size_t len, int firstline, uint32_t addr);
/* 3.10 co_linetable: (sdelta u8 bytes, ldelta i8; -128 = no line). addr in bytes (2*f_lasti).
 * Returns the line, or -1 when the range has no line or addr is past the table. */
int prs_py_line_310(const uint8_t *tab, size_t len, int firstline, uint32_t addr);
/* 3.11+ location table; unit = code-unit index. Returns the line, or -1 (no location / past the end). */
int prs_py_line_loc(const uint8_t *tab, size_t len, int firstline, uint32_t unit);

/* ---- code-object cache (code.c) ---- */

#define PRS_PY_CODE_MEMO 4  /* offsets -> frame ids remembered per code object */
#define PRS_PY_CODE_HDR 256 /* bytes of a code object's head copied for validation (≥ every code_size we read) */

struct prs_py_code {
	uint64_t addr;       /* 0 = empty slot */
	/* the fields that identify the object; a hit is valid only if all still match */
	uint64_t type, name_ptr, file_ptr, qual_ptr, table_ptr, code_ptr;
	uint64_t name_id, qual_id, file_id; /* str identities (length, hash, first bytes) */
	uint64_t checked;     /* the sample generation (prs_py.gen) of the last validation */
	int32_t firstline;
	uint32_t version;     /* co_version (3.12+), 0 = none: then the strings are compared on hits */
	uint32_t ncode_bytes; /* bytecode size in bytes (≤3.10 len(co_code), 3.11+ 2*Py_SIZE) */
	uint32_t name, file;  /* string ids in the profile `owner` */
	uint8_t *table;       /* the line table bytes (owned) */
	uint32_t table_len;
	/* the frame ids of the last few instruction offsets met (memo_n of them; replaced in turn,
	 * memo_next): a recursive function's frames stand at two or three offsets of one object,
	 * and with one memo each change of offset decoded the line table again */
	int32_t memo_off[PRS_PY_CODE_MEMO];
	uint32_t memo_frame[PRS_PY_CODE_MEMO];
	uint8_t memo_n, memo_next;
};

/* Empties the code cache (the profile changed). */
void prs_py_code_flush(struct prs_py *py);

/* ---- the handle (python.h's struct prs_py) ---- */

struct prs_py {
	pid_t pid;
	bool all_stopped; /* prs_py_set_stopped */
	bool in_sample;   /* between the page cache's begin and end */
	bool (*keep)(void *arg, int32_t tid); /* prs_py_set_keep */
	void *keep_arg;
	struct prs_memreader mr;  /* the target, uncached */
	struct prs_pagecache pc;  /* the per-sample cache in front of mr */
	struct prs_memreader cr;  /* reads through pc: what the walk and the naming read with */
	struct prs_py_layout L;
	struct prs_pywalk walk;   /* walk.L = &L; the anchors runtime, interp_head_var, tstate_current_var */
	const char *layout_source;
	const char *anchor; /* how the runtime was found (prs_py_anchor) */
	char version[32];
	uint32_t version_hex;
	char binary[512];
	/* type objects (absolute target addresses; 0 = unknown: not checked) */
	uint64_t code_type;        /* &PyCode_Type */
	uint64_t str_type, bytes_type; /* &PyUnicode_Type, &PyBytes_Type */
	uint64_t dict_type, long_type, module_type; /* &PyDict_Type, &PyLong_Type, &PyModule_Type */
	/* eval loop and interpreter module text ranges */
	uint64_t eval_lo[4], eval_hi[4];
	unsigned neval;
	uint64_t interp_lo[8], interp_hi[8];
	unsigned ninterp;
	uint64_t gen; /* sample generation: bumped at each begin of the page cache */
	/* open-addressing code cache */
	struct prs_py_code *codes;
	size_t ncodes_cap, ncodes_used;
	const struct prs_profile *owner; /* the profile the cached string ids belong to */
	struct prs_py_stats st;
	/* the GIL's futex words (gil.c): ranges fixed at open (3.6's statics), then those of the
	 * interpreters' GILs (3.7+), replaced after each walk by what it saw */
	struct prs_py_range gil[PRS_PY_MAX_GIL_RANGES];
	unsigned ngil, ngil_fixed;
	struct prs_py_range gil_walk[PRS_PY_MAX_GIL_RANGES]; /* the current walk's */
	unsigned ngil_walk;
	struct prs_py_names *names; /* threading names (threadnames.c), allocated on first use */
	/* the GIL holder's top frame words guarded in the next sample's readv (steady_top) */
	uint64_t guard_tstate, guard_ref; /* its thread state, and its frame_ref (walk.h) then */
	uint64_t guard_top;               /* its top frame then (3.11+: its instruction word guarded) */
	uint64_t guard_top_was;           /* guard_top at this sample's begin */
	int guard_instr;                  /* which guard word that is in this sample, -1 none */
	uint64_t ran_tstate;              /* the thread state seen running in this sample, 0 none */
	uint64_t syscalls_at_begin;       /* st.syscalls after the sample's first readv */
	struct prs_py_stack raw;    /* prs_py_sample's scratch: one thread's raw stack */
};

/*
 * Builds a handle over an arbitrary memreader with a known layout (the caller fills the walker's
 * anchors py->walk.runtime / interp_head_var / tstate_current_var and the type objects afterwards).
 * For unit tests on memory images, and prs_py_open. Returns 0 or -ENOMEM.
 */
int prs_py_new_raw(const struct prs_py_layout *L, const struct prs_memreader *mr, uint32_t version_hex,
		   struct prs_py **out);

/* "3.12.1" (or "3.13.0b2") from a PY_VERSION_HEX, into out. */
void prs_py_version_str(uint32_t hex, char *out, size_t sz);

/* Fills L from the 584+ bytes of a 3.13+ _Py_DebugOffsets (dbg, len bytes) and a base row `base`
 * for what the debug offsets do not carry. Returns 0, or -ENOTSUP (bad cookie, unknown layout). */
int prs_py_layout_from_debug_offsets(const uint8_t *dbg, size_t len, const struct prs_py_layout *base,
				     struct prs_py_layout *L);

/* Begins a sample (ending the one open, if any): a new generation of the code cache's validations,
 * and the page cache emptied then loaded with the previous sample's working set. */
void prs_py_begin(struct prs_py *py);

/* ---- the GIL's futex words (gil.c) ---- */

/* A fixed range (3.6: a static GIL variable of `size` bytes at addr); ignored when full or empty. */
void prs_py_gil_fixed(struct prs_py *py, uint64_t addr, uint64_t size);
/* At open, after the anchors are set: the first interpreter's GIL (3.7+), read from the target. */
void prs_py_gil_open(struct prs_py *py);
/* A walk begins; it saw an interpreter whose GIL state is at gil (0: none); it ended whole (the
 * ranges seen replace the last walk's, when it saw any). */
void prs_py_gil_walk_begin(struct prs_py *py);
void prs_py_gil_walk_seen(struct prs_py *py, uint64_t gil);
void prs_py_gil_walk_end(struct prs_py *py);

/*
 * True if every field offset of L lies inside the head the reader copies of its object (a frame,
 * a thread state, a code, bytes, str, dict, keys, module, type or int object) and the shifts are
 * in range; the thread names' fields are checked only where they are read (interp_modules >= 0).
 * Layouts built from a target's _Py_DebugOffsets must pass it (a hostile target chooses those
 * offsets: names whose fields do not fit are not read); every generated row does.
 */
bool prs_py_layout_check(const struct prs_py_layout *L);

/* Frees the thread-name cache (threadnames.c); called by prs_py_free. */
void prs_py_names_free(struct prs_py *py);

#endif
