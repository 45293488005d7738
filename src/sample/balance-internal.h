/* SPDX-License-Identifier: MIT */
/*
 * The CPU-time balance of one thread: whether a thread that was not blocked when the tick came
 * was on a CPU or waiting for one (runnable, on a run queue). Pure logic over the thread's
 * scheduler statistics (struct prs_schedstat), which the caller reads from /proc and passes in;
 * unit-tested in tests/unit/test_sample_balance.c.
 *
 * A thread that is not blocked was either on a CPU or runnable and waiting for one when the tick
 * came; its registers cannot tell which, and a waiting thread's stack is where it was preempted
 * (often a syscall return), not where it spends CPU time. Its schedstat decides, read before the
 * INTERRUPT and again once it stopped:
 * - the count of times it was given a CPU (slices) did not change: it was running, and stopped
 *   where it ran;
 * - it grew: it had to be given a CPU to stop. It was waiting; or it was running, but lost its
 *   CPU before it could stop: to pyrsprof itself waking on that CPU to sample it, or to another
 *   task the INTERRUPT's reschedule IPI picked. Those ambiguous samples count as on-CPU only while
 *   the CPU time the thread used (exact once it is stopped) is more than its on-CPU samples have
 *   paid for, one period each: so the CPU view adds up to the CPU time used.
 * An ambiguous sample paid out as on-CPU keeps the stack it stopped at, which is where it was
 * preempted: mostly a syscall return (likely: a running thread gives up its CPU at its next
 * return to user mode, the next syscall's unless a timer interrupt comes first). Under heavy
 * contention nearly every on-CPU sample is such (a thread pinned beside two spinners, 10-15 % of
 * a CPU: 78-100 % of them; 0-32 of ~600 stops found it running, where ticks at random in its runs
 * would give 60-90: its runs follow the ticks' stops and resumes), and no stop shows where its
 * CPU time went: the CPU view's split is of preemption points (README, On-CPU vs waiting;
 * tests/bench/bench_contention_split.py). Taking the stack of the thread's last unambiguous
 * sample instead was tried: there is rarely a recent one to take, and the unambiguous ones are
 * biased too (the ticks that find it running come at a time of its runs set by the stops). So
 * where perf events are permitted, a native thread's on-CPU samples take their native stack from
 * a perf sample taken while it ran, while its stops find it preempted (record.c preempted_stack,
 * kstack-internal.h). Such samples are counted (stats cpu_preempted), and those left with the
 * stop's stack (cpu_preempted_stop) said (prs_sampler_health).
 * The balance is exact: a debt is never forgiven (clamping it, as an earlier version did at one
 * period, made the CPU view count 17-30 % too many samples of a thread sharing its CPU with a
 * spinner); only a surplus is capped (missed ticks must not bank a burst). The run-queue wait
 * time is no witness: a waiting thread that the INTERRUPT's wake-up lets preempt the running task
 * stops after microseconds of wait, like a running one.
 */
#ifndef PYRSPROF_SAMPLE_BALANCE_INTERNAL_H
#define PYRSPROF_SAMPLE_BALANCE_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "pyrsprof/task.h"
#include "pyrsprof/types.h"

/* Zero-initialised: no sample yet. */
struct prs_cpu_balance {
	uint64_t cpu_ns;       /* CPU time at the last sample (0 = none yet) */
	int64_t credit_ns;     /* CPU time not yet paid out as on-CPU samples (< 0: overpaid) */
	bool ambiguous;        /* the last judgement was of a stop it had to be given a CPU for */
};

/*
 * A thread found not blocked in its interrupt stop, with schedstat `before` read before the
 * INTERRUPT and `after` once it stopped: PRS_STATE_RUNNING (it was on a CPU; one period of its
 * CPU time is paid out) or PRS_STATE_RUNQUEUE (it was waiting for one). period_ns is the
 * sampling period. The first sample of a thread is RUNNING (there is no balance yet), unless it
 * was never given a CPU before the INTERRUPT (slices 0 in `before`: a thread just born).
 */
enum prs_state prs_cpu_balance_judge(struct prs_cpu_balance *b, int64_t period_ns,
				     const struct prs_schedstat *before,
				     const struct prs_schedstat *after);

/*
 * A blocked thread used no CPU worth paying out: its balance starts again from ss->cpu_ns (its
 * schedstat now); when ss is NULL (it could not be read), only the credit is dropped.
 */
void prs_cpu_balance_blocked(struct prs_cpu_balance *b, const struct prs_schedstat *ss);

#endif
