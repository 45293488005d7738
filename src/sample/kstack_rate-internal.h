/* SPDX-License-Identifier: MIT */
/*
 * The kernel-stack events' rate (kstack.c), per thread: full where the kernel works for the
 * thread, lowered where it does not. Each perf sample is a timer interrupt in the target (19 us of
 * its time here), and a thread that computes in user space gets no kernel frames from them: at
 * the full rate (2 per tick) they cost it 0.38 % of its time at 100 Hz and 3.8 % at 1000 Hz for
 * nothing. So a thread whose last perf samples were all taken in user mode (PRS_KRATE_USER_RUN of
 * them in a row, and PRS_KRATE_USER_NS of its CPU time: longer than the phases of a program that
 * alternates, as kwork's 40 ms) gets its event's period raised PRS_KRATE_LOWER times (1 per 8
 * ticks at 100 Hz), and the full rate back at its
 * first perf sample taken in the kernel. The period is changed by PERF_EVENT_IOC_PERIOD (13 us, an
 * IPI to the thread's CPU), only at a change. The full rate is capped at PRS_KRATE_MIN_NS of CPU
 * time per perf sample, the full period at 200 Hz (2 per tick there): above 200 Hz the events
 * take no more samples (at 1000 Hz, 1 per 2.5 ticks). A tick's kernel frames are those of the
 * thread's last perf sample before it, up to 2.5 ms of its CPU time old, as at 200 Hz (5 ms at
 * 100 Hz); at 1000 Hz the cap at 1 ms took 2.5 times the samples, 2.7 % of a thread's time while
 * the kernel works for it (27 us a sample at load 13: tests/bench/kcost.c kstack-fast), where
 * kwork's matched kernel share read the same with a 1, 2 or 4 ms cap (0.41-0.52 each, perf's own
 * 0.40-0.55 in the same runs, load 13-15).
 *
 * A thread's event starts at half the full rate (PRS_KRATE_PROBE: 1 per tick at 100 Hz), the
 * probe: its first perf sample taken in the kernel sets the full rate, and PRS_KRATE_PROBE_RUN
 * user-mode ones in a row (the same PRS_KRATE_USER_NS of CPU time) the lowered rate. The first
 * window is the collection's largest cost to a thread that computes in user space (its 32 full-rate
 * samples were 0.8-1.1 ms of its time here, a sample 23-34 us: tests/bench/kcost.c), and the
 * kernel-heavy threads the kernel stacks are for leave the probe at their first perf sample. What
 * it costs: a thread's kernel work seen at 1 per tick until its first kernel sample, and a thread
 * the kernel works for a little (10 % of its time) lowered after its first 160 ms 18.5 % of the
 * time instead of 3.4 % (16 user samples in a row against 32): lowered, it is raised again at its
 * next kernel sample.
 *
 * What it costs the kernel share: while a thread's event is lowered, a tick can match only a
 * kernel perf sample that just turned it back to full, so the kernel work of a thread that
 * starts after a long user-only stretch is missed for up to one lowered period (8 ticks) of its
 * CPU time; a thread whose perf samples are user-only 32 in a row spends at most a few % of its
 * time in the kernel (a 10 % kernel share has 32 user samples in a row 3 % of the time). Nothing
 * is scaled or guessed: those samples are user-only, and stats.json kernel_stacks.lowered_samples
 * counts them, so the reader knows how many were seen at the lowered rate.
 *
 * Pure logic, unit-tested in tests/unit/test_kstack_rate.c.
 */
#ifndef PYRSPROF_SAMPLE_KSTACK_RATE_INTERNAL_H
#define PYRSPROF_SAMPLE_KSTACK_RATE_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#define PRS_KRATE_USER_RUN 32     /* user-mode perf samples in a row before the rate is lowered, */
#define PRS_KRATE_USER_NS 160000000u /* and at least this much CPU time at the full rate */
#define PRS_KRATE_PROBE_RUN 16    /* the same, for the probe (its samples stand for 2 each) */
#define PRS_KRATE_LOWER 16        /* the lowered period: this many full ones */
#define PRS_KRATE_PROBE 2         /* the probe's period: this many full ones */
#define PRS_KRATE_MIN_NS 2500000u /* the full rate's shortest period (CPU time per perf sample) */

/* One thread's rate (prs_krate_init): the probe, no sample yet. */
struct prs_krate {
	uint32_t need;          /* user-mode samples in a row that lower the full rate */
	uint32_t probe_need;    /* and the probe */
	uint32_t user_run;      /* perf samples in user mode since the last one in the kernel */
	bool probing;           /* the period asked for is the probe's */
	bool lowered;           /* the period asked for is the lowered one */
	bool held;              /* preempted at its stops: never lowered below the probe's rate */
	uint32_t calm;          /* its stops since the last one that found it preempted */
};

/* What a perf sample calls for. */
enum prs_krate_change {
	PRS_KRATE_KEEP,         /* the period stays */
	PRS_KRATE_TO_LOW,       /* lower the rate: the thread has stayed in user mode */
	PRS_KRATE_TO_FULL,      /* (back) to the full rate: the kernel works for the thread */
};

/* The rate of an event opened at the probe's rate, for a full period of full_ns
 * (prs_krate_full_ns). */
void prs_krate_init(struct prs_krate *r, uint64_t full_ns);

/* The period r asks for, in full periods: PRS_KRATE_PROBE, 1 or PRS_KRATE_LOWER. */
uint32_t prs_krate_mult(const struct prs_krate *r);

/* Sees one perf sample of the thread, taken in the kernel or not: the change it calls for. */
enum prs_krate_change prs_krate_see(struct prs_krate *r, bool kernel);

/*
 * A stop of the thread found it running (preempted false) or preempted (true: balance-internal.h).
 * With user stacks (kstack.c, ptrace mode), the CPU view's stacks of a preempted thread come from
 * its perf samples, one per on-CPU sample: so while its stops find it preempted, its lowered rate
 * is the probe's (a perf sample per ~period of its CPU time: PRS_KRATE_PROBE full ones), and the
 * thread is let go to PRS_KRATE_LOWER after PRS_KRATE_CALM stops in a row found it running.
 */
void prs_krate_preempted(struct prs_krate *r, bool preempted);
#define PRS_KRATE_CALM 32

/* A change could not be made (the ioctl failed): r asks for the period of mult full ones (the
 * event's, prs_krate_mult) again, its run restarted. */
void prs_krate_undo(struct prs_krate *r, uint32_t mult);

/*
 * The full rate's period for a sampling period of period_ns: a little over half of it (2 per
 * tick, 1/64 longer so that the lag to preload's CPU-time ticks sweeps: kstack.c), never under
 * PRS_KRATE_MIN_NS (then 1/128 over it, for the same sweep). The lowered one is PRS_KRATE_LOWER
 * times it.
 */
uint64_t prs_krate_full_ns(uint64_t period_ns);

#endif
