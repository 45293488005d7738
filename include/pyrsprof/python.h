/* SPDX-License-Identifier: MIT */
/*
 * The CPython reader: finds the interpreter in a live process (executable or libpython, symbols
 * from .dynsym/.symtab with libelf, version read from the binary), and reads every thread's Python
 * stack by memory reads only (process_vm_readv), for CPython 3.6-3.13 (generated per-version
 * layouts) and 3.13+ through the target's own _Py_DebugOffsets. It also merges a thread's native
 * stack with its Python frames (each eval-loop frame replaced by the Python frames it runs).
 *
 * Everything read from the target is untrusted: lengths, depths and loops are bounded, code
 * objects are re-validated on every cache hit, and a read that races with the running target only
 * costs that frame or thread (counted in struct prs_py_stats), never a crash.
 *
 * One struct prs_py per target process; not thread-safe (use it from one thread).
 */
#ifndef PYRSPROF_PYTHON_H
#define PYRSPROF_PYTHON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "pyrsprof/err.h"
#include "pyrsprof/profile.h"
#include "pyrsprof/types.h"

/* ---- reading target memory ---- */

struct prs_memvec {
	uint64_t addr; /* target address */
	void *buf;     /* local destination */
	size_t len;
	int res;       /* set by readv: 0, or a negative errno for this vec (-EFAULT: unmapped) */
};

/*
 * How the reader reads target memory, so unit tests can run it on a memory image.
 * read: fills buf with exactly len bytes at addr; returns 0, -EFAULT (some byte unreadable), or
 * -ESRCH (the process is gone). readv: reads n vecs in as few calls as it can and sets each res;
 * returns the number of vecs read completely, or -ESRCH.
 */
struct prs_memreader {
	int (*read)(void *ctx, uint64_t addr, void *buf, size_t len);
	int (*readv)(void *ctx, struct prs_memvec *v, size_t n);
	void *ctx;
};

/*
 * A memreader over process_vm_readv for pid (ctx holds the pid; nothing is allocated). readv puts
 * up to 1024 vecs in one syscall and resumes after a vec that failed (partial reads handled).
 */
void prs_memreader_pid(struct prs_memreader *mr, pid_t pid);

/* ---- opening a Python process ---- */

struct prs_py;

/*
 * Finds CPython in process pid (through /proc/PID/maps and /proc/PID/exe; files are opened as
 * /proc/PID/root/<path> and matched by inode) and prepares to read it. Returns 0 and a new handle
 * in *out (free with prs_py_free), or:
 *   -ENOENT   "pid N: no CPython found (looked for libpython*.so and _PyRuntime/Py_Version in the executable)"
 *   -ENOTSUP  a Python version that is not supported (2.7, < 3.6, or an unknown _Py_DebugOffsets layout)
 *   -ESRCH    no such process; -EPERM/-EACCES  not allowed to read it
 *   -EINVAL   found the interpreter but its runtime state does not validate
 * Environment: PYRSPROF_PY_NO_DEBUG_OFFSETS=1 ignores _Py_DebugOffsets on 3.13+ (generated table
 * only); PYRSPROF_PY_DEBUG_OFFSETS_ONLY=1 ignores the generated table for 3.13+ (tests of the
 * generic path).
 */
int prs_py_open(pid_t pid, struct prs_py **out, struct prs_err *err);

/* Frees py. NULL is fine. */
void prs_py_free(struct prs_py *py);

/* "3.12.1" (borrowed, valid until prs_py_free). */
const char *prs_py_version(const struct prs_py *py);
/* PY_VERSION_HEX of the target, e.g. 0x030c01f0. */
uint32_t prs_py_version_hex(const struct prs_py *py);
/* Where the layout came from: "table" (generated from headers) or "debug-offsets". Borrowed. */
const char *prs_py_layout_source(const struct prs_py *py);
/* How the interpreter state was found: "_PyRuntime symbol", ".PyRuntime section", "interp_head
 * symbol", "PyInterpreterState_Head code" (3.6, stripped) or "scan of .data/.bss". Borrowed. */
const char *prs_py_anchor(const struct prs_py *py);
/* Path of the file holding the interpreter (the executable or libpython). Borrowed. */
const char *prs_py_binary(const struct prs_py *py);

/* ---- sampling ---- */

/* Flags of one Python frame in struct prs_py_thread.fflags. */
enum {
	/*
	 * This frame is the outermost of the group of frames run by one native eval-loop call:
	 * every frame up to 3.10; 3.11 the frame with is_entry; 3.12+ the frame just above a shim
	 * (owner == FRAME_OWNED_BY_CSTACK). The merge consumes one group per native eval frame.
	 */
	PRS_PYF_GROUP_END = 1u << 0,
};

struct prs_py_thread {
	int32_t tid;            /* Linux thread id; 0 when it could not be read */
	uint64_t thread_id;     /* pthread_t (threading.get_ident()) */
	uint64_t tstate;        /* target address of the PyThreadState */
	bool holds_gil;         /* this thread holds the GIL (from the GIL's locked + last holder) */
	bool truncated;         /* the stack was deeper than PRS_MAX_PY_FRAMES or a walk was cut short */
	bool kept;              /* not walked: the caller keeps its frames (prs_py_set_keep); nframes 0 */
	uint32_t name;          /* string id of the threading name, 0 if unknown: not filled by
				 * prs_py_sample (see prs_py_thread_name) */
	uint32_t nframes;       /* frames[0] is the innermost */
	uint32_t frames[PRS_MAX_PY_FRAMES]; /* frame ids in the profile (PRS_KIND_PYTHON named frames) */
	uint8_t fflags[PRS_MAX_PY_FRAMES];  /* PRS_PYF_* per frame */
};

/* Counters since prs_py_open (monotonic). */
struct prs_py_stats {
	uint64_t samples, threads, frames;
	uint64_t code_hits, code_misses, code_stale; /* stale: cached entry failed validation */
	uint64_t read_errors;   /* reads that failed (raced with the target, or unmapped) */
	uint64_t bad_frames;    /* frames rejected by validation (garbage, wrong type, bad owner) */
	uint64_t bad_lines;     /* instruction offset outside the code, or no line */
	uint64_t cycles;        /* frame or thread loops detected and cut */
	uint64_t truncated;     /* stacks cut at PRS_MAX_PY_FRAMES or by an error mid-walk */
	uint64_t retries;       /* GIL holder re-read because its frame changed under the walk */
	uint64_t merge_mismatch;/* merges where eval frames and Python groups did not pair up */
	uint64_t syscalls;      /* process_vm_readv calls (or memreader calls) */
};

/*
 * Reads every thread of every interpreter, its Python frames interned into p
 * (prs_profile_named_frame(p, PRS_KIND_PYTHON, qualname-or-name, file, line)). Fills threads[0..*n)
 * (*n <= max; threads beyond max are left out and counted in stats.truncated). Safe on a running
 * target: a thread whose state cannot be read is skipped; a frame that fails validation ends that
 * thread's walk (truncated = true). No allocation in steady state (caches grow while warming up).
 * Returns 0 (even if some threads failed), -ESRCH when the process is gone, -EINVAL when the
 * interpreter state itself cannot be read (e.g. the runtime is being finalized), -ENOMEM.
 */
int prs_py_sample(struct prs_py *py, struct prs_profile *p, struct prs_py_thread *threads, int max,
		  int *n, struct prs_err *err);
/*
 * Notes for callers: the frame ids are cached per profile, keyed by the pointer p; passing a
 * different profile flushes the caches (so do not free a profile and pass a new one allocated at
 * the same address with the same py). After the target execs, free py and prs_py_open() again
 * (the old anchors point into the replaced image; samples then fail with -EINVAL, never crash).
 */

/* ---- thread names from `threading` ---- */

/*
 * The name `threading` gives the thread with pthread id thread_id (struct prs_py_thread.thread_id),
 * as a string id of p, from the cache prs_py_read_thread_names fills; 0 when unknown (threading not
 * imported, a thread it does not know, not read yet, or read for another profile). A miss asks for
 * a refresh (prs_py_names_due).
 */
uint32_t prs_py_thread_name(struct prs_py *py, const struct prs_profile *p, uint64_t thread_id);
/* True when the names should be re-read: never read yet, a lookup missed since the last read (at
 * most every 250 ms), or 2 s since the last read (threads get renamed). */
bool prs_py_names_due(const struct prs_py *py, uint64_t now_ns);
/*
 * Re-reads sys.modules["threading"]._active (ident -> Thread) and each Thread's _name, into the
 * cache, interned into p. Memory reads only, a few batched reads per dict; safe on a running target
 * (a read that races costs this refresh, the previous names stay). Not for the sampling hot path:
 * call it between ticks when prs_py_names_due. Returns the number of names read, or -ENOENT
 * (threading not imported), -EINVAL (an object failed validation), -ENOTSUP (no layout for it),
 * -ESRCH, -ENOMEM.
 */
int prs_py_read_thread_names(struct prs_py *py, struct prs_profile *p, uint64_t now_ns);

/* Copies the counters. */
void prs_py_get_stats(const struct prs_py *py, struct prs_py_stats *out);

/*
 * Tells the reader whether every thread of the target stays stopped during the coming
 * prs_py_sample calls (ptrace mode: the caller holds them all in a ptrace-stop). Then the GIL
 * holder's top frame cannot move while its frames are read, and is not read a second time to
 * check (one syscall less per sample). Default false: the target runs (vm mode).
 */
void prs_py_set_stopped(struct prs_py *py, bool all_stopped);

/*
 * Lets the caller keep the frames of some threads instead of having them read: prs_py_sample asks
 * keep(arg, tid) for each thread with a known native thread id, and does not walk those it says
 * true for (their prs_py_thread has kept set and no frames; the rest is filled). For a sampler
 * that knows a thread has not run since its last sample. NULL (the default) walks every thread.
 */
void prs_py_set_keep(struct prs_py *py, bool (*keep)(void *arg, int32_t tid), void *arg);

/*
 * Reads again, in one readv into the reader's scratch, what the last prs_py_sample read, and keeps
 * nothing. For a caller about to stop the target and sample it: after a few ms asleep, the
 * profiler's CPU has lost the kernel's code and the target's page walks from its caches, and this
 * pays for them before the stop instead of during it. A sample is no cheaper for it.
 */
void prs_py_warm(struct prs_py *py);

/* ---- merging with a native stack ---- */

/* True if pc is inside the eval loop (_PyEval_EvalFrameDefault and its .cold part when the
 * symbol table names it). */
bool prs_py_is_eval_pc(const struct prs_py *py, uint64_t pc);
/* True if pc is inside the interpreter's own module (libpython, or the python executable). */
bool prs_py_is_interp_pc(const struct prs_py *py, uint64_t pc);

enum {
	PRS_PY_NATIVE_ALL = 1u << 0, /* keep interpreter plumbing and the native frames below Python */
};

/*
 * Merges one thread's native stack (pcs[i] and its interned raw frame native_frame_ids[i],
 * innermost first, nnative of them) with its Python frames t, into out (root first, at most max).
 * Each eval-loop native frame is replaced by one Python group (innermost eval ↔ innermost group).
 * Without NATIVE_ALL: native frames inside the interpreter module between Python frames are hidden,
 * and the stack starts at the outermost Python frame; native frames above the innermost Python
 * frame (C extensions, libffi, Rust) and non-interpreter frames between Python frames are kept.
 * When eval frames and groups do not pair up, stats.merge_mismatch is counted and the sample is
 * still merged: extra eval frames (a call being set up or torn down at the leaf) are paired from
 * the root, the innermost ones owning no group; extra groups (a native unwind cut short toward the
 * root) are appended as Python-only frames toward the root. nnative == 0 gives the Python-only
 * stack. Returns the number of frame ids written (the root side is dropped when it does not fit).
 * py is const except for the mismatch counter.
 */
size_t prs_py_merge(struct prs_py *py, const uint64_t *pcs, const uint32_t *native_frame_ids,
		    size_t nnative, const struct prs_py_thread *t, unsigned flags, uint32_t *out,
		    size_t max);

#endif
