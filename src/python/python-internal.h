/* SPDX-License-Identifier: MIT */
/*
 * Internals of the CPython reader shared by its .c files and its unit tests: the handle, the
 * per-sample page cache over a memreader, the code-object cache, line-table decoders and string
 * decoding. Not a public API.
 */
#ifndef PYRSPROF_PYTHON_INTERNAL_H
#define PYRSPROF_PYTHON_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#include "pyrsprof/python.h"
#include "python/layout.h"

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

/* ---- line tables (pure functions over bytes copied from the target; never read past len) ---- */

/* ≤3.9 co_lnotab: (addr_delta u8, line_delta) pairs; line_delta is int8 from 3.6. addr = byte
 * offset of the last instruction started (f_lasti). Returns the line. */
int prs_py_line_lnotab(const uint8_t *tab, size_t len, int firstline, uint32_t addr);
/* 3.10 co_linetable: (sdelta u8 bytes, ldelta i8; -128 = no line). addr in bytes (2*f_lasti).
 * Returns the line, or -1 when the range has no line or addr is past the table. */
int prs_py_line_310(const uint8_t *tab, size_t len, int firstline, uint32_t addr);
/* 3.11+ location table; unit = code-unit index. Returns the line, or -1 (no location / past the end). */
int prs_py_line_loc(const uint8_t *tab, size_t len, int firstline, uint32_t unit);

/* ---- page cache: every read of one sample goes through it ---- */

#define PRS_PY_PAGE 4096u
#define PRS_PY_NPAGES 128u /* 512 KiB; a sample of 1024 frames of ≤3.10 touches fewer pages */
#define PRS_PY_PROBE 8u    /* slots looked at from a page's home slot (linear probing) */

/* Bytes [lo, hi) of a page that a sample read. */
struct prs_py_wsent {
	uint64_t page;
	uint16_t lo, hi;
};

/*
 * Slots are found by linear probing from the page's hash; a slot holds bytes [lo, hi) of its page
 * (the whole page when read on demand, a part when loaded ahead). The cache also records which
 * bytes of which pages the sample read (its working set): the next sample starts by loading them
 * all in one readv (prs_py_pc_begin), so a stack that did not change costs one syscall instead of
 * one per dependent read. Every byte served was read during the current sample.
 */
struct prs_py_pagecache {
	uint64_t tag[PRS_PY_NPAGES];   /* page address | 1 when the slot is in use, 0 free */
	uint16_t lo[PRS_PY_NPAGES], hi[PRS_PY_NPAGES]; /* bytes of the page the slot holds */
	int8_t bad[PRS_PY_NPAGES];     /* the page could not be read in this generation */
	uint8_t ws_idx[PRS_PY_NPAGES]; /* 1 + index in ws of the slot's page, 0 = not noted yet */
	uint8_t (*data)[PRS_PY_PAGE];  /* PRS_PY_NPAGES pages, allocated once */
	struct prs_memreader mr;
	uint64_t *syscalls;            /* counter to bump */
	struct prs_py_wsent ws[PRS_PY_NPAGES]; /* what this sample read so far (may hold duplicates) */
	unsigned nws;
	bool noting;                   /* between begin and end: reads are added to ws */
};

/* Starts a sample: empties the cache, then loads the previous sample's working set in one readv. */
void prs_py_pc_begin(struct prs_py_pagecache *pc);
/* Ends it: later reads (outside samples) are not part of the next sample's working set. */
void prs_py_pc_end(struct prs_py_pagecache *pc);
/* Reads the working set in one readv into the slots' buffers and keeps nothing (prs_py_warm). */
void prs_py_pc_warm(struct prs_py_pagecache *pc);
/* Empties the cache (data read after this are fresh); the working set is kept. */
void prs_py_pc_reset(struct prs_py_pagecache *pc);
/* Reads len bytes at addr through the cache; 0, -EFAULT, -ESRCH. */
int prs_py_pc_read(struct prs_py_pagecache *pc, uint64_t addr, void *buf, size_t len);
/* Loads, in one readv, the pages holding [addrs[i], addrs[i]+len) that are not cached yet. */
void prs_py_pc_prefetch(struct prs_py_pagecache *pc, const uint64_t *addrs, size_t n, size_t len);

/* ---- code-object cache ---- */

#define PRS_PY_CODE_HDR 256 /* bytes of a code object's head copied for validation (≥ every code_size we read) */

struct prs_py_code {
	uint64_t addr;       /* 0 = empty slot */
	/* the fields that identify the object; a hit is valid only if all still match */
	uint64_t type, name_ptr, file_ptr, qual_ptr, table_ptr, code_ptr;
	uint64_t name_id, qual_id, file_id; /* str identities (length, hash, first bytes) */
	uint64_t checked;     /* the sample number of the last validation */
	int32_t firstline;
	uint32_t version;     /* co_version (3.12+), 0 = none: then the strings are compared on hits */
	uint32_t ncode_bytes; /* bytecode size in bytes (≤3.10 len(co_code), 3.11+ 2*Py_SIZE) */
	uint32_t name, file;  /* string ids in the profile `owner` */
	uint8_t *table;       /* the line table bytes (owned) */
	uint32_t table_len;
	uint32_t memo_off, memo_frame; /* last instruction offset -> frame id */
	bool memo_valid;
};

/* The handle (python.h's struct prs_py). */
struct prs_py {
	pid_t pid;
	bool all_stopped; /* prs_py_set_stopped */
	bool (*keep)(void *arg, int32_t tid); /* prs_py_set_keep */
	void *keep_arg;
	struct prs_memreader mr;
	struct prs_py_layout L;
	const char *layout_source;
	const char *anchor; /* how the runtime was found (prs_py_anchor) */
	char version[32];
	uint32_t version_hex;
	char binary[512];
	/* anchors (absolute target addresses; 0 = none) */
	uint64_t runtime;          /* _PyRuntime (3.7+) */
	uint64_t interp_head_var;  /* &interp_head (3.6) */
	uint64_t tstate_current_var; /* &_PyThreadState_Current (3.6) */
	uint64_t code_type;        /* &PyCode_Type */
	uint64_t str_type, bytes_type; /* &PyUnicode_Type, &PyBytes_Type (0 = unknown: not checked) */
	uint64_t dict_type, long_type, module_type; /* &PyDict_Type, &PyLong_Type, &PyModule_Type (0 = unknown) */
	/* eval loop and interpreter module text ranges */
	uint64_t eval_lo[4], eval_hi[4];
	unsigned neval;
	uint64_t interp_lo[8], interp_hi[8];
	unsigned ninterp;
	/* ≤3.10: offset of the kernel tid inside glibc's struct pthread (-1 = unknown) */
	int tid_off;
	size_t tstate_read; /* bytes of a PyThreadState read per thread: up to its last field we use */
	struct prs_py_pagecache pc;
	/* open-addressing code cache */
	struct prs_py_code *codes;
	size_t ncodes_cap, ncodes_used;
	const struct prs_profile *owner; /* the profile the cached string ids belong to */
	struct prs_py_stats st;
	struct prs_py_names *names; /* threading names (threadnames.c), allocated on first use */
	/* per-walk scratch (preallocated) */
	uint64_t walk_code[PRS_MAX_PY_FRAMES];
	uint64_t walk_frame[PRS_MAX_PY_FRAMES];
	int64_t walk_off[PRS_MAX_PY_FRAMES]; /* instruction offset (bytes ≤3.10, units 3.11+), -1 = not started */
	uint8_t walk_flags[PRS_MAX_PY_FRAMES];
};

/*
 * Builds a handle over an arbitrary memreader with a known layout and anchors (the caller fills
 * runtime / interp_head_var / tstate_current_var / code_type afterwards). For unit tests on memory
 * images. Returns 0 or -ENOMEM.
 */
int prs_py_new_raw(const struct prs_py_layout *L, const struct prs_memreader *mr, uint32_t version_hex,
		   struct prs_py **out);

/* Fills L from the 584+ bytes of a 3.13+ _Py_DebugOffsets (dbg, len bytes) and a base row `base`
 * for what the debug offsets do not carry. Returns 0, or -ENOTSUP (bad cookie, unknown layout). */
int prs_py_layout_from_debug_offsets(const uint8_t *dbg, size_t len, const struct prs_py_layout *base,
				     struct prs_py_layout *L);

/* Decodes a str object (≤ PRS_MAX_NAME bytes of UTF-8 into out, NUL-terminated) at addr. Returns
 * the length, or a negative errno (-EINVAL: not a plausible string). */
int prs_py_read_str(struct prs_py *py, uint64_t addr, char *out, size_t outsz);
/*
 * Decodes the compact str whose first `have` bytes are in h into UTF-8 in out (at most PRS_MAX_NAME
 * code points, cut at a character boundary to fit outsz with its NUL; NUL and lone surrogates
 * become U+FFFD). Returns the length, -EINVAL (not a compact str of py's str type), or -E2BIG with
 * *need set to the bytes the str takes when that is more than `have`.
 */
int prs_py_str_decode(const struct prs_py *py, const uint8_t *h, size_t have, char *out, size_t outsz,
		      size_t *need);

/* Frees the thread-name cache (threadnames.c); called by prs_py_free. */
void prs_py_names_free(struct prs_py *py);

#endif
