/* SPDX-License-Identifier: MIT */
/*
 * The agent's clock descriptors (perf task-clock events, one per thread) against a program that
 * closes descriptors it does not know of: a daemon closing every descriptor at start, a forked
 * child before its exec (close_fds). The close is the program's right and is done; close, close_range
 * and closefrom are wrapped only to notice that one of the agent's was among them, and the
 * thread that owned it is told (a signal with PRS_RING_REARM_COOKIE) to arm itself again, with a
 * POSIX CPU timer, which no close can take away. Descriptors above PRS_FDGUARD_MAX, dup2 over
 * one and raw close syscalls are not seen (docs/preload.md).
 */
#ifndef PYRSPROF_AGENT_FDGUARD_H
#define PYRSPROF_AGENT_FDGUARD_H

#include <stdbool.h>
#include <sys/types.h>

#define PRS_FDGUARD_MAX 4096

/* Resolves the wrapped functions. Returns false if one is missing. */
bool prs_fdguard_resolve(void);
/* Starts guarding: lost(tid) is called (async-signal-safe) for each owner of a descriptor the
 * program closed, with pid the process to signal. */
void prs_fdguard_start(void (*lost)(pid_t tid));
/* fd is thread tid's clock descriptor (tid 0: not any more). */
void prs_fdguard_set(int fd, pid_t tid);
/* A forked child: the descriptors it inherited are the parent's threads' (forgotten). */
void prs_fdguard_forget_all(void);

#endif
