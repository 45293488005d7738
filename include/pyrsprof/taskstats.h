/* SPDX-License-Identifier: MIT */
/*
 * Exit accounting of the target's threads from the kernel's taskstats (needs CAP_NET_ADMIN):
 * open a listener before the target starts (or is attached), tell it the target's pid, drain it
 * about once a second and at the end; the kept records are THREAD and PROCESS snapshots of phase
 * PRS_PHASE_EXIT (source PRS_SRC_TASKSTATS). Not thread-safe; nothing here blocks after open.
 */
#ifndef PYRSPROF_TASKSTATS_H
#define PYRSPROF_TASKSTATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "pyrsprof/acct.h"
#include "pyrsprof/err.h"

struct prs_taskstats;

/*
 * Registers a listener for the exits of tasks on every CPU. Returns 0, or -EPERM (not root: err
 * says so), -ENOENT (no taskstats in this kernel) or another -errno, with err set.
 */
int prs_taskstats_open(struct prs_taskstats **out, struct prs_err *err);
/* Keeps the exits of thread group tgid from now on (those drained before are of no one). NULL
 * (the listener could not be opened: not root) is fine. */
void prs_taskstats_target(struct prs_taskstats *ts, pid_t tgid);
/* Reads every queued message without blocking; keeps the target's. Returns the messages read.
 * NULL is fine. */
int prs_taskstats_drain(struct prs_taskstats *ts);
/* Drops the kept thread exits for which keep_thread(ctx, tid) is false (the thread group's are
 * kept). Returns how many exits are kept. NULL is fine. */
size_t prs_taskstats_prune(struct prs_taskstats *ts, bool (*keep_thread)(void *ctx, uint32_t tid),
			   void *ctx);
/* The exit snapshots kept (NULL: 0), in the order of the exits; record i < count is written
 * into *out. */
size_t prs_taskstats_count(const struct prs_taskstats *ts);
void prs_taskstats_record(const struct prs_taskstats *ts, size_t i, struct prs_acct *out);
/* The target's thread exits drained so far (kept or not). NULL is fine (0). */
uint64_t prs_taskstats_exits(const struct prs_taskstats *ts);
/* Times the kernel dropped messages (the socket buffer was full), or a record could not be kept. */
uint64_t prs_taskstats_lost(const struct prs_taskstats *ts);
/* Deregisters and frees. NULL is fine. */
void prs_taskstats_close(struct prs_taskstats *ts);

#endif
