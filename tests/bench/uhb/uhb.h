/* SPDX-License-Identifier: MIT */
/*
 * The unwind-in-the-handler benchmark's sampling side (issue 12 point 2), loaded into the sampled
 * process: a per-thread CPU-time timer (timer_create(CLOCK_THREAD_CPUTIME_ID, SIGEV_THREAD_ID),
 * SIGRTMIN+8, SA_RESTART, as src/agent/agent.c arms it) whose handler does, per sample,
 *  (a) COPY: the registers from the ucontext and the stack from SP up to the thread's stack end
 *      (at most UHB_STACK_CAP), what the agent does before pyrsprof unwinds outside, and/or
 *  (b) UNW: libunwind's local unwinder (unw_init_local2(UNW_INIT_SIGNAL_FRAME), unw_step to the
 *      end, at most UHB_MAXD frames),
 * each timed with CLOCK_MONOTONIC (both: in alternating order, so neither always runs with the
 * other's cache). Samples up to the capacity given to uhb_setup are kept (times, registers, stack
 * copy, libunwind's PCs) for the driver (unwind_handler_bench.c) to compare with pyrsprof's unwinder.
 * Comparison code only: no product code uses libunwind in a handler.
 */
#ifndef PYRSPROF_UHB_H
#define PYRSPROF_UHB_H

#include <stdatomic.h>
#include <stdint.h>

#define UHB_MAXD 128             /* libunwind frames kept per sample */
#define UHB_STACK_CAP (64 * 1024) /* the agent's ring slot holds 64 KiB of stack */
#define UHB_NREGS 17              /* DWARF order, as struct prs_regs */
#define UHB_MAGIC 0x31424855u     /* "UHB1" */

enum { UHB_COPY = 1, UHB_UNW = 2 };

/* One kept sample. stack_off indexes the arena that follows the records in the output file. */
struct uhb_rec {
	uint64_t copy_ns, unw_ns;
	uint64_t regs[UHB_NREGS];
	uint64_t fs_base;
	uint64_t stack_off;
	uint32_t stack_len;
	int32_t unw_n;   /* libunwind frames, or -1 when unw_init_local2 failed */
	int32_t unw_end; /* unw_step's last return (0: end of stack; < 0: libunwind error) */
	uint32_t pad;
	uint64_t upcs[UHB_MAXD];
};

struct uhb_file_hdr {
	uint32_t magic, count;
	uint64_t arena_len;
};

/* Counters over every sample (kept or not). */
struct uhb_stats {
	atomic_ulong samples;   /* handler entries */
	atomic_ulong in_op;     /* samples that landed while the thread was inside uhb_in_op */
	atomic_ulong unw_fail;  /* unw_init_local2 < 0 or unw_step < 0 */
	atomic_ulong frames;    /* libunwind frames, summed */
	atomic_int busy;        /* handlers running now */
};

extern struct uhb_stats uhb_stats;
/* Set by a workload thread around the call it wants counted (dlopen, malloc...). */
extern __thread volatile int uhb_in_op;

/* Installs the handler; mode is UHB_COPY | UHB_UNW; keeps the first cap samples (0: none).
 * Returns 0 or -errno. Not thread-safe: call once, before any uhb_arm. */
int uhb_setup(int mode, unsigned cap);
/* Sets libunwind's caching policy of the local address space: "global", "thread" or "none".
 * Returns 0 or -EINVAL. */
int uhb_unw_cache(const char *policy);
/* Arms the calling thread's CPU clock at hz (and maps its stack-copy buffer). Returns 0 or -errno. */
int uhb_arm(unsigned hz);
/* Stops the calling thread's clock. */
void uhb_disarm(void);
/* Samples kept so far (<= cap). */
unsigned uhb_kept(void);
/* Writes the kept samples to path (header, records, stack arena), via path.tmp and a rename so
 * the reader never sees a half-written file. Returns 0 or -errno. */
int uhb_write(const char *path);

#endif
