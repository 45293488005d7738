/* SPDX-License-Identifier: MIT */
/*
 * The CPython reader: finds the interpreter in a live process (executable or libpython, symbols
 * from .dynsym/.symtab with libelf, version read from the binary), and reads every thread's Python
 * stack by memory reads only (process_vm_readv), for CPython 3.6-3.13 (generated per-version
 * layouts) and 3.13+ through the target's own _Py_DebugOffsets. A sample is two steps: the walk
 * (raw frames: code object address and instruction offset, pyrsprof/pystack.h) and the naming
 * (code object -> name, file, line -> a frame of the profile, through a validated code cache).
 * It also merges a thread's native stack with its Python frames (each eval-loop frame replaced by
 * the Python frames it runs).
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
#include "pyrsprof/pystack.h"
#include "pyrsprof/types.h"

/* ---- opening a Python process ---- */

struct prs_py;

/* How prs_py_open looks for the interpreter; all false (or a NULL pointer) is the default. The
 * CLI sets them from PYRSPROF_PY_* variables, for the tests of the fallbacks (src/cli/pyenv.c). */
struct prs_py_opts {
	/* behave as on a stripped binary: ignore the _PyRuntime and interp_head symbols and the
	 * .PyRuntime section (3.7+ then scans .data/.bss, 3.6 decodes PyInterpreterState_Head) */
	bool no_anchor_symbols;
	bool no_head_fn;         /* with no_anchor_symbols: ignore PyInterpreterState_Head too */
	bool no_debug_offsets;   /* 3.13+: the generated table only, not the target's _Py_DebugOffsets */
	bool debug_offsets_only; /* 3.13+: _Py_DebugOffsets only (the newest generated row for what
				  * they do not carry), as for a version newer than the table */
};

/*
 * Finds CPython in process pid (through /proc/PID/maps and /proc/PID/exe; files are opened as
 * /proc/PID/root/<path> and matched by inode) and prepares to read it. opts may be NULL. Returns 0
 * and a new handle in *out (free with prs_py_free), or:
 *   -ENOENT   "pid N: no CPython found (looked for libpython*.so and _PyRuntime/Py_Version in the executable)"
 *   -ENOTSUP  a Python version that is not supported (2.7, < 3.6, or an unknown _Py_DebugOffsets layout)
 *   -ESRCH    no such process; -EPERM/-EACCES  not allowed to read it
 *   -EINVAL   found the interpreter but its runtime state does not validate
 */
int prs_py_open(pid_t pid, const struct prs_py_opts *opts, struct prs_py **out, struct prs_err *err);

/*
 * A handle on the forked child pid of the process parent reads: a fork copies the address space,
 * so the interpreter, its layout and its anchors are where they were in the parent, and nothing
 * is looked up again (no ELF read, no scan); the runtime state is validated in the child. Its
 * code cache starts empty (code objects are validated on use anyway). Not for a child that
 * exec'ed: open that one with prs_py_open. Returns 0, or -ENOMEM / -EINVAL (the state does not
 * validate: e.g. it exec'ed meanwhile) with err set.
 */
int prs_py_fork(const struct prs_py *parent, pid_t pid, struct prs_py **out, struct prs_err *err);

/* Frees py. NULL is fine. */
void prs_py_free(struct prs_py *py);

/* "3.12.1" (borrowed, valid until prs_py_free). */
const char *prs_py_version(const struct prs_py *py);
/* PY_VERSION_HEX of the target, e.g. 0x030c01f0. */
uint32_t prs_py_version_hex(const struct prs_py *py);
/* The walker's context (python/walk.h: layout and anchors, plain data), for a walk elsewhere:
 * the preload agent walks inside the target with a copy of it. Borrowed. */
struct prs_pywalk;
const struct prs_pywalk *prs_py_walker(const struct prs_py *py);
/* Where the layout came from: "table" (generated from headers) or "debug-offsets". Borrowed. */
const char *prs_py_layout_source(const struct prs_py *py);
/* How the interpreter state was found: "_PyRuntime symbol", ".PyRuntime section", "interp_head
 * symbol", "PyInterpreterState_Head code" (3.6, stripped) or "scan of .data/.bss". Borrowed. */
const char *prs_py_anchor(const struct prs_py *py);
/* Path of the file holding the interpreter (the executable or libpython). Borrowed. */
const char *prs_py_binary(const struct prs_py *py);

/* ---- sampling ---- */

struct prs_py_thread {
	int32_t tid;            /* Linux thread id; 0 when it could not be read */
	uint64_t thread_id;     /* pthread_t (threading.get_ident()) */
	uint64_t tstate;        /* target address of the PyThreadState */
	bool holds_gil;         /* this thread holds the GIL (from the GIL's locked + last holder) */
	bool truncated;         /* the stack was deeper than PRS_MAX_PY_FRAMES or a walk was cut short */
	bool kept;              /* not walked: the caller keeps its frames (prs_py_set_keep); nframes 0 */
	bool ran;               /* seen running: its top frame's instruction pointer changed during the
				 * sample's readv (the GIL holder, 3.11+); false when not known */
	uint32_t name;          /* string id of the threading name, 0 if unknown: not filled by
				 * prs_py_sample (see prs_py_thread_name) */
	uint32_t nframes;       /* frames[0] is the innermost */
	uint32_t frames[PRS_MAX_PY_FRAMES]; /* frame ids in the profile (PRS_KIND_PYTHON named frames) */
	uint8_t fflags[PRS_MAX_PY_FRAMES];  /* PRS_PYF_GROUP_END per frame (pyrsprof/pystack.h) */
};

/* Counters since prs_py_open (monotonic). */
struct prs_py_stats {
	uint64_t samples, threads, frames;
	uint64_t code_hits, code_misses, code_stale; /* stale: cached entry failed validation */
	/* frames of raw stacks walked earlier (has_ident) whose code object is not there any more
	 * (freed, its address reused or unreadable): named "<code object freed before naming>" */
	uint64_t code_reused;
	uint64_t read_errors;   /* reads that failed (raced with the target, or unmapped) */
	uint64_t bad_frames;    /* frames rejected by validation (garbage, wrong type, bad owner) */
	uint64_t bad_lines;     /* instruction offset outside the code, or no line */
	uint64_t cycles;        /* frame or thread loops detected and cut */
	uint64_t truncated;     /* stacks cut at PRS_MAX_PY_FRAMES or by an error mid-walk */
	uint64_t retries;       /* GIL holder re-read because its frame changed under the walk */
	uint64_t steady_tops;   /* GIL holder's top not re-read: the same before and after the readv */
	uint64_t seen_running;  /* GIL holder seen running (struct prs_py_thread.ran) */
	uint64_t merge_mismatch;/* merges where eval frames and Python groups did not pair up */
	uint64_t syscalls;      /* process_vm_readv calls (or memreader calls) */
};

/*
 * The walk, the first step of a sample: every thread of every interpreter, its frames raw (code
 * object address, instruction offset, flags) into stacks[0..*n) (*n <= max; threads beyond max are
 * left out and counted in stats.truncated). Safe on a running target: a thread whose state cannot
 * be read is skipped; a frame that cannot be read ends that thread's walk (truncated = true); the
 * GIL holder is walked again when its top frame moved meanwhile (unless prs_py_set_stopped).
 * Begins a sample of the reader's page cache, which prs_py_name calls then read in, until
 * prs_py_end. No allocation. Returns 0 (even if some threads failed), -ESRCH when the process is
 * gone, -EINVAL when the interpreter state itself cannot be read (e.g. the runtime is being
 * finalized).
 */
int prs_py_walk(struct prs_py *py, struct prs_py_stack *stacks, int max, int *n, struct prs_err *err);
/*
 * The naming, the second step: raw's frames as frame ids of p (prs_profile_named_frame(p,
 * PRS_KIND_PYTHON, qualname-or-name, file, line)) into out, with raw's thread fields (name 0). A
 * code object is decoded once and cached by address; every hit is validated against the object
 * read in this sample (3.12+: its co_version; before: its name, qualname, file and line table), so a
 * reused address never mislabels a frame. Frames that fail validation are dropped; 3.11+ frames
 * still being set up (before RESUME) are hidden as CPython does. Reads within the sample the last
 * prs_py_walk began (or begins one when none is open: stacks walked elsewhere, e.g. by the agent).
 * No allocation in steady state (the caches grow while warming up). Returns 0 or -ENOMEM.
 */
int prs_py_name(struct prs_py *py, struct prs_profile *p, const struct prs_py_stack *raw,
		struct prs_py_thread *out);
/*
 * Between prs_py_walk and the naming: reads the heads of the code objects of stacks[0..n) in one
 * readv into the sample's cache, so that prs_py_name sees each object as it was now. For a
 * target stopped only for the walk (ptrace): the walk and this read are done while it is stopped,
 * the naming after it runs again (a code object freed meanwhile, its address reused, is still
 * named by what it was at the walk). What a head points to (strings, line table: immutable while
 * the object lives) is read by the naming. It ends the first part of the sample's reads: the next
 * sample's first readv (in prs_py_walk) loads only what the walk and this read, the naming's
 * reads are loaded in a readv of their own when it starts (prs_pagecache_split). No allocation.
 */
void prs_py_load_heads(struct prs_py *py, const struct prs_py_stack *stacks, int n);
/* Ends the sample prs_py_walk began: later reads are fresh. */
void prs_py_end(struct prs_py *py);
/*
 * One sample in one call: prs_py_walk then prs_py_name of each thread, one thread at a time (no
 * raw stacks kept), then prs_py_end. threads[0..*n), *n <= max. Returns as prs_py_walk, or -ENOMEM.
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
/* True when the names should be re-read: never read yet, a lookup missed since the last read (a
 * new thread: 20 ms after it while the reads have taken under 1/400 of the time, as told by
 * prs_py_names_took, else 250 ms after it), or 2 s since the last read (threads get renamed). */
bool prs_py_names_due(const struct prs_py *py, uint64_t now_ns);
/* Tells how long the last prs_py_read_thread_names took (by the caller's clock). */
void prs_py_names_took(struct prs_py *py, uint64_t cost_ns);
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
 * prs_py_sample and prs_py_walk calls (ptrace mode: the caller holds them all in a ptrace-stop). Then the GIL
 * holder's top frame cannot move while its frames are read, and is not read a second time to
 * check (one syscall less per sample). Default false: the target runs (vm mode).
 */
void prs_py_set_stopped(struct prs_py *py, bool all_stopped);

/*
 * Lets the caller keep the frames of some threads instead of having them read: a walk asks
 * keep(arg, tid) for each thread with a known native thread id, and does not walk those it says
 * true for (their prs_py_thread has kept set and no frames; the rest is filled). For a sampler
 * that knows a thread has not run since its last sample. NULL (the default) walks every thread.
 */
void prs_py_set_keep(struct prs_py *py, bool (*keep)(void *arg, int32_t tid), void *arg);

/*
 * Reads again, in one readv into the reader's scratch, what the last sample read, and keeps
 * nothing. For a caller about to stop the target and sample it: after a few ms asleep, the
 * profiler's CPU has lost the kernel's code and the target's page walks from its caches, and this
 * pays for them before the stop instead of during it. A sample is no cheaper for it.
 */
void prs_py_warm(struct prs_py *py);

/* ---- the GIL's futex words ---- */

/*
 * A thread waiting for the GIL sleeps in futex() on a word of the GIL's state: its condition
 * variable (the waiters' usual word), its mutex, or the switch condition and mutex (FORCE_SWITCHING:
 * the thread that dropped the GIL waits there until another takes it). These are target address
 * ranges holding those words: per GIL (3.7+) the struct _gil_runtime_state from its cond to its
 * end; 3.6 its four static variables. Measured per version in src/python/gil.c.
 */
struct prs_py_range {
	uint64_t lo, hi; /* [lo, hi) in the target */
};

#define PRS_PY_MAX_GIL_RANGES 8

/*
 * The ranges known now, into out[0..max): 3.6 from the .symtab (none for a stripped 3.6); 3.7-3.11
 * the runtime's GIL; 3.12+ the GIL of each interpreter the last walk saw (at open: the first
 * interpreter's). Returns how many were written (0: GIL waits cannot be told on this target).
 */
int prs_py_gil_ranges(const struct prs_py *py, struct prs_py_range *out, int max);
/* True if uaddr, the futex word a blocked thread sleeps on (futex's first argument), is one of
 * the GIL's. For the sampling hot path: a scan of at most PRS_PY_MAX_GIL_RANGES ranges. */
bool prs_py_gil_waits_on(const struct prs_py *py, uint64_t uaddr);

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
