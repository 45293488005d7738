/* SPDX-License-Identifier: MIT */
/*
 * Sleeping threads: what a thread's last sample leaves for the next ticks, and the decision
 * whether a tick may record it again instead of stopping or reading the thread.
 *
 * Most threads of a real program sleep most of the time, and stopping one costs it and us 35-160
 * us per tick on the dev VM (the interrupt and the continue each wake its idle vCPU), for a stack
 * that did not change. So a thread whose last sample found it blocked is not read again while
 * it provably has not moved:
 * - PRS_REUSE_ALL: its schedstat (CPU time, times given a CPU, run-queue wait) equals the one
 *   taken when it was last known at rest: it has not run since, so nothing of its state
 *   (registers, stack, Python frames, GIL) has changed, and its kept sample is recorded again.
 *   One pread; the Python reader does not walk its frames (prs_py_set_keep).
 *   The at-rest schedstat is always read before the reads that found it blocked (vm mode: before
 *   the memory read; ptrace mode: before the checks below), so a run in between shows.
 * - PRS_REUSE_NATIVE (ptrace mode): it ran since (our own stop makes it run: it leaves the stop
 *   and re-enters its syscall; or it woke and came back), but /proc/TID/syscall finds it asleep
 *   in the same syscall (or its restart) with the same first argument (a futex's word: GIL or
 *   lock) and the same RSP and RIP as when it was stopped, and the stack bytes the unwind read
 *   then are still the same: so the same unwind would give the same native frames (unwind.h,
 *   snap_used). They are merged with its Python frames read this
 *   tick. Its schedstat must not move from before these checks to after the Python read (it is
 *   then at rest there); if it did, it is recorded like a thread that did not stop in time.
 * Anything else is stopped and read as usual. struct prs_sampler_opts.read_idle turns this off
 * (every thread read at every tick: benchmarks, comparisons).
 *
 * The decisions here are pure: the caller passes the readings (schedstat) or the means to take
 * them (struct prs_native_probe), so they are unit-tested on made-up readings
 * (tests/unit/test_sample_reuse.c). Acting on them is in reuse.c too, below the pure part.
 */
#ifndef PYRSPROF_SAMPLE_REUSE_INTERNAL_H
#define PYRSPROF_SAMPLE_REUSE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "pyrsprof/profile.h"
#include "pyrsprof/task.h"
#include "pyrsprof/types.h"
#include "pyrsprof/unwind.h"

#define PRS_SYS_RESTART_SYSCALL 219 /* x86_64 restart_syscall */
#define PRS_SYS_FUTEX 202           /* x86_64 futex: its word says a GIL wait from a lock wait */

/* What a thread's last sample leaves for the next ticks while the thread sleeps. */
struct prs_kept {
	bool valid;             /* the last sample found the thread blocked, and is kept here */
	bool at_rest;           /* rest: its schedstat, taken before the reads of that sample */
	struct prs_schedstat rest;
	uint32_t stack;         /* the sample's stack id, state, syscall and flags */
	uint8_t state, flags;
	int16_t syscall;
	/* ptrace mode: the native part of the last stop, for a thread found asleep there again */
	bool native;            /* the fields below are valid */
	int n;                  /* frames in pcs and ids */
	uint64_t *pcs;          /* PRS_MAX_NATIVE_FRAMES each, allocated on first use */
	uint32_t *ids;
	size_t used;            /* the unwind read the snapshot's [0, used): the thread's snapshot
				 * buffer still holds it */
	uint64_t sp, pc, gen;   /* RSP and RIP at the stop; the unwinder's maps generation */
	int nr, restart_nr;     /* the syscall at the stop, and as /proc shows its restarted call */
	uint64_t arg0;          /* its first argument (RDI): a futex's word, which says whether it
				 * waits for the GIL or a lock */
};

/* How a thread is sampled this tick. */
enum prs_reuse {
	PRS_REUSE_NONE = 0, /* read it: stopped (ptrace), or its memory read (vm) */
	PRS_REUSE_ALL,      /* it has not run since its kept sample: record that again */
	PRS_REUSE_NATIVE,   /* ptrace: asleep where it was stopped: kept native frames, Python read now */
	PRS_REUSE_ASLEEP,   /* ptrace: asleep in the kernel elsewhere: read from /proc and its memory
			     * without a stop (asleep.c), its Python frames read now */
};

/*
 * The means to check, now, a sleeping thread's stack against its last stop (PRS_REUSE_NATIVE).
 * The readings are taken lazily, cheapest first, and only as far as needed.
 */
struct prs_native_probe {
	bool maps_ok;      /* the unwinder exists and its maps are not known to be stale */
	uint64_t gen;      /* the unwinder's maps generation now */
	/* /proc/TID/syscall now. Returns 0 or -errno. */
	int (*syscall)(void *ctx, struct prs_task_sys *sys);
	/* Compares the target's len bytes at sp now with snap (the bytes the kept unwind read).
	 * Returns true only if all were read and are equal. */
	bool (*same_bytes)(void *ctx, uint64_t sp, const uint8_t *snap, size_t len);
	void *ctx;
	const uint8_t *snap; /* the thread's snapshot buffer, holding the kept stop's bytes */
};

/* True if the two readings are equal: the thread has not run between them. */
bool prs_same_schedstat(const struct prs_schedstat *a, const struct prs_schedstat *b);

/*
 * How a thread with kept sample k and schedstat now (read this tick) is sampled: PRS_REUSE_ALL,
 * PRS_REUSE_NATIVE (only with a probe: ptrace mode) or PRS_REUSE_NONE. k must be valid.
 */
enum prs_reuse prs_reuse_decide(const struct prs_kept *k, const struct prs_schedstat *now,
				const struct prs_native_probe *probe);

/* Keeps smp (recorded with stack id smp->stack) as the thread's last sample: kept for reuse when
 * it found the thread blocked (or in D state). Not at rest until the caller says so. */
void prs_kept_sample(struct prs_kept *k, const struct prs_sample *smp);

/*
 * Keeps the native part of a blocked thread's stopped sample (registers regs, snapshot of
 * snap_len bytes, n frames pcs/ids unwound with info, unwinder generation gen), for
 * PRS_REUSE_NATIVE: only when the unwind depended on nothing but RIP, RSP (RBP) and the snapshot
 * bytes it read (FAST rows, no read outside the snapshot), so that the same registers over the
 * same bytes give the same frames. Allocates k's frame arrays on first use (then never again).
 * Returns true if kept (k->native).
 */
bool prs_kept_native(struct prs_kept *k, const struct prs_regs *regs, size_t snap_len,
		     const uint64_t *pcs, const uint32_t *ids, int n,
		     const struct prs_unwind_info *info, uint64_t gen);

/* Frees k's frame arrays and forgets it. */
void prs_kept_release(struct prs_kept *k);

#endif
