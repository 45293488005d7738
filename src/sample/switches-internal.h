/* SPDX-License-Identifier: MIT */
/*
 * Context switches of every sampled thread from perf_event_open (issue 11 point 1; the note's
 * §1.2): a dummy software event with context_switch=1 per thread writes a PERF_RECORD_SWITCH at
 * each switch in and out; an OUT flagged PERF_RECORD_MISC_SWITCH_OUT_PREEMPT (Linux 4.17) left a
 * thread still runnable: it was preempted, and the time to its next IN is time waiting for a
 * CPU. Other OUTs are voluntary (the thread blocked). The sampler's own ptrace stops are
 * voluntary switches too: an OUT between a tick's interrupt and its resume is counted apart
 * (stops), so that a spinner sampled at 100 Hz does not look half voluntary.
 *
 * Unprivileged at kernel.perf_event_paranoid=2 (user-space only: exclude_kernel=1; the switch
 * records do not need the kernel side). Where perf_event_open refuses, nothing is collected and
 * one NOTE record says why. The rings (16 KiB each) are read at the end of every tick, all
 * threads in one pass, never per sample; a thread's counts are stored as a SWITCH record
 * (acct.h) when it ends (EXIT) and at the end of the recording for the threads alive (END).
 */
#ifndef PYRSPROF_SAMPLE_SWITCHES_INTERNAL_H
#define PYRSPROF_SAMPLE_SWITCHES_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "pyrsprof/profile.h"

/* What one thread's switch records added up to. Times in ns. */
struct prs_switch_counts {
	uint64_t preempt, preempt_ns;     /* preempted OUTs; OUT -> IN time after them */
	uint64_t voluntary, voluntary_ns; /* blocked OUTs (but the sampler's stops) */
	uint64_t stops, stops_ns;         /* OUTs into the sampler's own ptrace stops */
	uint64_t lost;                    /* records the kernel could not write (ring full) */
	uint64_t first_ns, last_ns;       /* CLOCK_MONOTONIC of the first and last record */
};

enum prs_switch_out { PRS_SWO_NONE, PRS_SWO_PREEMPT, PRS_SWO_VOLUNTARY, PRS_SWO_STOP };

/* The parser's state between two reads of a ring: the counts, and an OUT waiting for its IN. */
struct prs_switch_state {
	struct prs_switch_counts c;
	uint64_t out_ns;
	enum prs_switch_out out;
	uint64_t stop_from;     /* the stop window whose OUT was counted */
};

/*
 * Consumes the records [tail, head) of a perf ring whose data area is data (size bytes, a power
 * of 2; offsets wrap), records written with sample_type PERF_SAMPLE_TIME and sample_id_all.
 * The first voluntary OUT at a time within [stop_from, stop_to] is the sampler's stop. Malformed input
 * (a record size of 0 or past head) ends the read: the rest is dropped and counted as lost.
 * Returns the new tail. Pure: the unit tests feed it recorded ring bytes.
 */
uint64_t prs_switch_parse(const uint8_t *data, uint64_t size, uint64_t tail, uint64_t head,
			  uint64_t stop_from, uint64_t stop_to, struct prs_switch_state *st);

struct perf_event_attr;
struct prs_switches;
struct prs_swthr;

/* The attributes of a thread's switch-record event (what tests/bench/kcost.c measures). */
void prs_switches_attr(struct perf_event_attr *a);

/*
 * The session's switch collection, storing its records into prof. Tries one event on the
 * calling thread: when refused, prs_switches_on() is false and a NOTE record says why. NULL
 * when out of memory.
 */
struct prs_switches *prs_switches_new(struct prs_profile *prof);
bool prs_switches_on(const struct prs_switches *sw);
/* Threads whose event was opened (the others were young all their lives: their event waits
 * until they lived through a tick, prs_thr_old; or it was refused). sw may be NULL. */
uint64_t prs_switches_opened(const struct prs_switches *sw);
void prs_switches_free(struct prs_switches *sw);

/*
 * Reads thread tid's ring (opening its event the first time: *st NULL; the caller waits until
 * the thread is old, prs_thr_old), the OUTs within
 * [stop_from, stop_to] being the sampler's stop of this tick (0, 0: none).
 */
void prs_switches_read(struct prs_switches *sw, struct prs_swthr **st, pid_t tid,
		       uint64_t stop_from, uint64_t stop_to);
/* The thread ended (phase PRS_PHASE_EXIT) or the recording does (PRS_PHASE_END): reads its ring
 * a last time, stores its SWITCH record, and frees *st (set to NULL). sw may be NULL. */
void prs_switches_done(struct prs_switches *sw, struct prs_swthr **st, pid_t tid, int phase);
/* From now on, threads that end store nothing (the recording's records are written). */
void prs_switches_close(struct prs_switches *sw);

#endif
