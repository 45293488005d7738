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

#endif
