/* SPDX-License-Identifier: MIT */
/*
 * A thread's time off a CPU between two looks of the preload source (preload_offcpu.c), from its
 * schedstat alone: the wall time between the looks, less the CPU time it used (which the agent's
 * samples count, in the ring), less the time it waited for a CPU (the kernel's run delay), is the
 * time it slept. pyrsprof need not look at each sampling period then: at 1000 Hz it looks every
 * 10th (source_preload.c, preload_look_ns), and what a sleeper slept since is recorded at the
 * stack it sleeps at, a period per period slept, as exactly as its CPU samples count its CPU time
 * (the sum of the three is its wall time).
 *
 * The readings are not of one instant: while a thread runs, its CPU time lags by up to a
 * scheduler tick, and a wait for a CPU is added when the wait ends. So what is computed for one
 * window may be too much sleep, and the next window then gives it back (a negative sleep): the
 * amount owed carries its sign from look to look, and only whole periods are recorded, so the
 * totals are right and nothing is recorded twice. The arithmetic is pure (unit tests in
 * tests/unit/test_preload.c: offtime.*).
 */
#ifndef PYRSPROF_SAMPLE_OFFTIME_INTERNAL_H
#define PYRSPROF_SAMPLE_OFFTIME_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "pyrsprof/task.h"

/* A thread's account, zeroed when the thread joins the table. */
struct prs_offtime {
	bool based;            /* a look has read its schedstat */
	uint64_t look_ns;      /* that look's time (CLOCK_MONOTONIC) */
	uint64_t cpu_ns;       /* its schedstat's CPU time then */
	uint64_t wait_ns;      /* its wait for a CPU then (0 before the first look: a thread found
				* late waited since it started) */
	int64_t sleep_owed_ns; /* slept and not recorded yet (negative: slept less than recorded) */
	int64_t wait_owed_ns;  /* waited and not recorded yet */
};

/*
 * One look at a thread at now_ns with its schedstat ss: adds the window since the last look to
 * what it owes (its sleep: the window less its CPU time and its wait; its wait). At the first
 * look the window is its life, from born_ns (when it started: 0 when unknown, then nothing is
 * owed for its sleep before). A thread whose CPU time or wait went back is a new thread on a
 * reused tid: based again, its sleep owed from then. A sleep owed below -10000 periods of
 * period_ns is bounded there.
 */
void prs_offtime_add(struct prs_offtime *o, uint64_t now_ns, const struct prs_schedstat *ss,
		     uint64_t period_ns, uint64_t born_ns);

/*
 * The whole periods of period_ns in *owed_ns (0 when it is less than one, or negative), taken
 * out of it: at most 10000 at a time, and what is owed beyond 10000 periods more is forgotten
 * (a clock gone wrong must not make samples without end). Recorded by the caller: a wait at
 * once, a sleep only when the thread is found asleep (at the stack it sleeps at: one that runs
 * keeps what it slept for a look that finds it asleep).
 */
uint32_t prs_offtime_take(int64_t *owed_ns, uint64_t period_ns);

#endif
