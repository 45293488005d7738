/* SPDX-License-Identifier: MIT */
/*
 * The input of the CPython fuzz target (fuzz_python.c), also written by its seed recorder
 * (py_seed.c): what the reader knows of a target after prs_py_open, then the target's memory as
 * a list of segments. All fields little-endian.
 *
 *     struct py_mem_hdr                    (PY_MEM_HDR bytes, below)
 *     { u64 addr; u32 len; u8 bytes[len] }  segments, to the end of the input
 *
 * A 4 KiB page is mapped when a segment holds one of its bytes or starts in it (a segment of
 * length 0 maps its page). A read is served when all its pages are mapped: bytes that a segment
 * holds (the first that holds a byte wins), zeros elsewhere; else it fails with -EFAULT, as
 * process_vm_readv does on an unmapped page.
 */
#ifndef PYRSPROF_TESTS_FUZZ_PY_MEM_H
#define PYRSPROF_TESTS_FUZZ_PY_MEM_H

#include <stddef.h>
#include <stdint.h>

enum {
	PY_MEM_DEBUG_OFFSETS = 1u << 0, /* 3.13+: the layout from the _Py_DebugOffsets at runtime */
	PY_MEM_STOPPED = 1u << 1,       /* prs_py_set_stopped(py, true) */
};

#define PY_MEM_NPCS 8

struct py_mem_hdr {
	uint8_t magic[4]; /* "PYM1" */
	uint8_t minor;    /* CPython 3.<minor>: the generated layout row */
	uint8_t flags;    /* PY_MEM_* */
	uint8_t pad[2];
	uint32_t version_hex;
	int32_t tid_off;  /* ≤3.10: offset of the tid in glibc's struct pthread, -1 unknown */
	uint64_t runtime, interp_head_var, tstate_current_var, code_type, str_type, bytes_type;
	uint64_t dict_type, long_type, module_type;
	uint64_t eval_lo, eval_hi, interp_lo, interp_hi;
	uint64_t pcs[PY_MEM_NPCS]; /* a native stack to merge with each thread's Python frames */
};

#define PY_MEM_HDR ((unsigned)sizeof(struct py_mem_hdr))
#define PY_MEM_MAGIC "PYM1"

struct prs_profile;
struct prs_buf;

/*
 * Runs the CPython reader over the image in data (header and segments, as above): opens it as
 * prs_py_open would have, samples every thread twice (each time reading the thread names when
 * due, looking each thread's name up and merging its frames with the native stack h->pcs),
 * warming the page cache between. The fuzz target's whole work; the seed recorder makes the same
 * calls on the live process, and replays images to shrink them. sig (may be NULL) receives a text
 * of what was read: threads, frames, names and the reader's validation counters.
 */
void py_mem_run(const uint8_t *data, size_t size, struct prs_buf *sig);

/* The same calls on an open reader (the recorder's, over a live process). */
struct prs_py;
void py_mem_exercise(struct prs_py *py, struct prs_profile *p, const struct py_mem_hdr *h,
		     struct prs_buf *sig);

#endif
