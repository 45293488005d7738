/* SPDX-License-Identifier: MIT */
/*
 * --mode preload --subprocesses (preload_follow.c): pyrsprof's side of agent/follow.h. The agent
 * in every process of the tree but the launched one makes a ring of its own and sends its
 * descriptor to pyrsprof's socket; each ring becomes the target of its process (a new pid: a
 * new process; a known one: its exec, the new image). The processes are not pyrsprof's children
 * and not traced: their exits are looked for in /proc. Each process is a target as with ptrace
 * --subprocesses: one process root per pid in the views and exports.
 */
#ifndef PYRSPROF_SAMPLE_PRELOAD_TREE_INTERNAL_H
#define PYRSPROF_SAMPLE_PRELOAD_TREE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "agent/follow.h"
#include "agent/ring.h"
#include "pyrsprof/err.h"

struct prs_sampler;
struct prs_target;
struct prs_preload_tree;

/*
 * The socket the agents announce their rings to, bound to a fresh abstract name; env (size
 * bytes) gets the PRS_FOLLOW_ENV value for cfg (its name filled here). Returns 0 or -errno with
 * err set.
 */
int prs_preload_tree_new(struct prs_follow_cfg *cfg, struct prs_preload_tree **out, char *env,
			 size_t size, struct prs_err *err);
void prs_preload_tree_free(struct prs_preload_tree *t);
/* Takes every ring announced since the last call (new processes, execs) and marks the followed
 * processes that are gone as exited (their last samples recorded). Returns true while, every
 * target gone, a ring is still due (a process forked, its child's ring not announced yet: its
 * parent may exit first) and GRACE has not passed since; it waits a little then. */
bool prs_preload_tree_poll(struct prs_sampler *s, struct prs_preload_tree *t, uint64_t now_ns);
/* Takes the rings announced since the last call only (during a tick: the targets' exits are
 * left to the poll between ticks). */
void prs_preload_tree_accept(struct prs_sampler *s, struct prs_preload_tree *t);
/* Rings announced that could not be taken (mapped, or of a wrong shape): those processes ran
 * unprofiled. */
uint64_t prs_preload_tree_lost(const struct prs_preload_tree *t);

/* True when the ring h, a mapping of size bytes announced by process pid, has the shape
 * pyrsprof made the agents' (nslots slots of cap stack bytes) and is pid's. Pure. */
bool prs_ring_check(const struct prs_ring_hdr *h, uint64_t size, uint32_t nslots, uint32_t cap,
		    pid_t pid);

/* ---- source_preload.c ---- */

/* Gives tg the ring h (size bytes, taken over): its first, or after an exec the new image's (the
 * old ring's last samples are recorded first). Returns 0 or -ENOMEM (h is then unmapped). */
int prs_preload_adopt(struct prs_sampler *s, struct prs_target *tg, struct prs_ring_hdr *h,
		      size_t size);
/* A followed process is gone: its last samples recorded, its counts kept, and it is exited. */
void prs_preload_gone(struct prs_sampler *s, struct prs_target *tg);
/* Rings tg's forks still owe (its forks counted by its agent, less the children that could not
 * make one, less those announced: prs_preload_child_seen). */
uint64_t prs_preload_children_due(const struct prs_target *tg);
/* A forked child of parent announced its ring. */
void prs_preload_child_seen(struct prs_target *parent);

#endif
