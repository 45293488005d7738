/* SPDX-License-Identifier: MIT */
/* The agent's side of follow.h (follow.c). */
#ifndef PYRSPROF_AGENT_FOLLOW_AGENT_H
#define PYRSPROF_AGENT_FOLLOW_AGENT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "agent/follow.h"
#include "agent/ring.h"

/*
 * A new ring for process self (child of ppid; forked: made in a fork's child, else at an image's
 * start), of cfg's geometry, its header filled, announced to pyrsprof. Returns the mapping (its
 * bytes in *size), or NULL when it could not be made or sent (pyrsprof gone, its queue full, a
 * limit): the process then runs unprofiled. Async-signal-safe.
 */
struct prs_ring_hdr *prs_follow_make_ring(const struct prs_follow_cfg *cfg, pid_t self, pid_t ppid,
					  bool forked, size_t *size);

/*
 * At the exit of a process with a ring of its own (nslots slots): waits until pyrsprof has read
 * every sample written before, so that their Python frames are named while the process still
 * has its memory. pyrsprof reads each ring at its looks (every 10 ms at 1000 Hz), but on a
 * machine it shares with a tree of busy processes it gets its fair share of the CPUs, 1/N, and
 * its first look at a new process (its unwinder, its interpreter, the first unwinds: tens of ms
 * of CPU) came seconds late: pool workers of 0.1 s of CPU had exited, and every sample of them
 * read since was "<code object freed before naming>". The wait ends when those samples are
 * read, when pyrsprof stops or is gone, or after PRS_FOLLOW_EXIT_WAIT_NS; it is written in the
 * header (exit_ns, exit_wait_ns, exit_unread: pyrsprof leaves the exiting process's time out of
 * its wall view). Not in a vfork child (the caller checks: it shares its parent's ring).
 */
void prs_follow_await_reader(struct prs_ring_hdr *h, uint32_t nslots);

#endif
