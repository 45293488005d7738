/* SPDX-License-Identifier: MIT */
/*
 * Remote native unwinding of one thread-sample: registers + a stack snapshot taken while the
 * thread was stopped, unwound after the thread runs again (so every read outside the snapshot may
 * race and must tolerate failure).
 *
 * Methods (enum prs_unwind_method):
 *  - FAST: per-PC cache of decoded CFI rows (CFA = RSP|RBP + off, RA at CFA-8, RBP saved at
 *    CFA+off or unchanged), filled from libdw's CFI on the first sight of a PC. Allocation-free and
 *    syscall-free once warm. A row it cannot represent (DWARF expressions, CFA from another
 *    register, signal frames) makes the whole sample fall back to DWFL.
 *  - DWFL: libdw's Dwfl unwinder with thread callbacks over the snapshot (one Dwfl per process,
 *    kept across samples). Correct on C, Rust (rust-lld) and CPython; libdw allocates per frame.
 *  - FP: frame-pointer walk ([rbp] = caller's rbp, [rbp+8] = return address). Used by AUTO only
 *    for frames whose PC has no module or CFI, and flagged in prs_unwind_info.fp_frames.
 *  - AUTO (default): FAST, falling back to DWFL for a sample FAST cannot represent.
 *
 * Memory reads: inside the snapshot from the snapshot; read-only file-backed mappings from local
 * read-only mmaps of the same files (opened by path via /proc/PID/root, checked by inode and
 * device); anything else by process_vm_readv (counted in prs_unwind_info.remote_reads).
 *
 * A struct prs_unwinder is not thread-safe: use one per sampler thread.
 */
#ifndef PYRSPROF_UNWIND_H
#define PYRSPROF_UNWIND_H

#include <stdint.h>
#include <sys/types.h>

#include "pyrsprof/err.h"
#include "pyrsprof/maps.h"
#include "pyrsprof/types.h"

struct prs_unwinder;

enum prs_unwind_method {
	PRS_UNWIND_AUTO = 0,
	PRS_UNWIND_FAST = 1,
	PRS_UNWIND_DWFL = 2,
	PRS_UNWIND_FP = 3,
};

/* How an unwind ended. */
enum prs_unwind_end {
	PRS_UNWIND_END_CLEAN = 0,  /* outermost frame reached (RA undefined at _start / clone) */
	PRS_UNWIND_END_MAX,        /* truncated: max frames written */
	PRS_UNWIND_END_READ,       /* a memory read failed (outside snapshot and not readable) */
	PRS_UNWIND_END_NO_CFI,     /* no module or no CFI for a PC, and no usable frame pointer */
	PRS_UNWIND_END_BAD_FRAME,  /* CFA did not move up the stack, a cycle, or a null/odd PC */
	PRS_UNWIND_END_UNSUPPORTED,/* FAST only: a row it cannot represent (AUTO falls back) */
	PRS_UNWIND_END_ERROR,      /* libdw reported another error */
};

/* prs_unwind_info.flags bits (a summary of end and method, for counters) */
enum {
	PRS_UNWIND_TRUNCATED = 1u << 0, /* end == PRS_UNWIND_END_MAX */
	PRS_UNWIND_INCOMPLETE = 1u << 1, /* ended by a read failure, missing CFI, bad frame or error */
	PRS_UNWIND_USED_FP = 1u << 2,    /* some frames came from the frame-pointer fallback */
	PRS_UNWIND_USED_DWFL = 1u << 3,  /* the sample was unwound by libdw (FAST fell back) */
};

struct prs_unwind_info {
	enum prs_unwind_end end;
	unsigned flags;                /* PRS_UNWIND_* bits above */
	enum prs_unwind_method method; /* the method that produced the frames (FAST, DWFL or FP) */
	int fp_frames;                 /* frames recovered by the frame-pointer fallback */
	unsigned remote_reads;         /* process_vm_readv calls made during this unwind */
	unsigned cache_misses;         /* FAST: PCs decoded from CFI during this unwind */
	/* The unwind read the snapshot's bytes [0, snap_used) at most: with the registers it read
	 * (RIP, RSP, and RBP where a CFA is RBP-based), and read-only files, these decide the frames.
	 * So the same PC and SP over the same bytes unwind to the same frames (the sampler relies
	 * on it to keep a sleeping thread's native stack without stopping it again). */
	size_t snap_used;
};

/* Returns a short lower-case name ("clean", "max", ...). Never NULL. */
const char *prs_unwind_end_name(enum prs_unwind_end end);
/* Returns "auto", "fast", "dwfl" or "fp". Never NULL. */
const char *prs_unwind_method_name(enum prs_unwind_method m);

/*
 * Creates an unwinder for process pid: reads its maps, reports its modules to a new Dwfl and
 * attaches the snapshot thread callbacks. Does not ptrace. Returns 0 and *out (caller frees with
 * prs_unwinder_free), or -errno (-ESRCH, -EACCES, -ENOMEM, -EIO for a libdw failure).
 */
int prs_unwinder_new(pid_t pid, struct prs_unwinder **out, struct prs_err *err);

/*
 * Creates an unwinder with no live process, for fixtures: maps_text is a saved /proc/PID/maps
 * (copied), and dir holds the mapped files under their base names (files missing from dir end the
 * unwind at their frames). Reads are served from the snapshot and those files only; there is no
 * inode check (the fixture is trusted to hold the right files). Returns 0 or -errno as above.
 */
int prs_unwinder_new_offline(const char *maps_text, size_t len, const char *dir,
			     struct prs_unwinder **out, struct prs_err *err);

/* Frees u and everything it owns (Dwfl, local mmaps, caches). u may be NULL. */
void prs_unwinder_free(struct prs_unwinder *u);

/* Selects the method used by prs_unwind (default PRS_UNWIND_AUTO). */
void prs_unwinder_set_method(struct prs_unwinder *u, enum prs_unwind_method m);

/*
 * Re-reads /proc/PID/maps; if the text changed (dlopen, munmap, exec), re-parses it, re-reports the
 * Dwfl modules, drops the local mmaps and clears the PC cache, and increments the generation.
 * When nothing changed it costs one read of the maps file and a memcmp (no allocation).
 * Returns 0 or -errno (-ESRCH when the process is gone). err may be NULL.
 */
int prs_unwinder_refresh(struct prs_unwinder *u, struct prs_err *err);

/*
 * The maps as of the last new/refresh. Borrowed, valid until the next refresh or free. NOTE: the
 * returned pointer stays the same across refreshes while its contents change: compare
 * prs_unwinder_generation() to know whether indexes into maps->v are still valid.
 */
const struct prs_maps *prs_unwinder_maps(const struct prs_unwinder *u);

/* Starts at 1 and increases each time a refresh found changed maps. */
uint64_t prs_unwinder_generation(const struct prs_unwinder *u);

/*
 * Unwinds one sample. regs: the registers at the stop (DWARF order); snap: the stack copy taken
 * at the stop (snap->base should equal regs RSP; the data is borrowed for the call only).
 * Writes up to max PCs, innermost first: pcs[0] = RIP, pcs[i > 0] = return addresses (symbolize
 * at pc - 1). Returns the number of frames (>= 1 when max >= 1 and RIP != 0), and fills *info
 * (may be NULL). Bounded: at most min(max, PRS_MAX_NATIVE_FRAMES) frames, the CFA must increase
 * strictly, reads are bounded. Warm (PCs seen before, FAST): no allocation and no syscall for reads
 * inside the snapshot or read-only file mappings. Not async-signal-safe.
 */
int prs_unwind(struct prs_unwinder *u, const struct prs_regs *regs, const struct prs_snapshot *snap,
	       uint64_t *pcs, int max, struct prs_unwind_info *info);

/*
 * Reads len bytes of target memory at addr the way the unwinder does (snapshot of the current
 * unwind excluded: outside prs_unwind there is none): local mmap of a read-only file mapping,
 * else process_vm_readv. Returns 0 or -EFAULT. For tests and the libunwind comparison.
 */
int prs_unwinder_read(struct prs_unwinder *u, uint64_t addr, void *buf, size_t len);

#endif
