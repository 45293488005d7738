/* SPDX-License-Identifier: MIT */
/*
 * The launch side of --mode preload (preload_launch.c): where the agent library is, whether the
 * program can load it at all, and the environment the launched program gets (LD_PRELOAD with
 * the agent appended to any value the user set, and the ring's descriptor number).
 */
#ifndef PYRSPROF_SAMPLE_PRELOAD_INTERNAL_H
#define PYRSPROF_SAMPLE_PRELOAD_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "pyrsprof/err.h"

#define PRS_AGENT_NAME "libpyrsprof-agent.so"

/*
 * The agent's absolute path into buf: given when not NULL (the CLI's PYRSPROF_AGENT), else
 * libpyrsprof-agent.so next to the pyrsprof executable, else ../lib/pyrsprof/ from it. Returns 0, or -ENOENT with
 * err saying where it was looked for, or -EINVAL for a path LD_PRELOAD cannot carry.
 */
int prs_preload_agent_path(char *buf, size_t size, const char *given, struct prs_err *err);

/*
 * Whether the program argv0 (searched in PATH) can load the agent: not a statically linked or a
 * 32-bit ELF, not set-user-ID or set-group-ID (the loader ignores LD_PRELOAD paths then). A
 * script or a file that is not found passes (exec says the rest). Returns 0, or -ENOTSUP/-EPERM
 * with err's one line suggesting --mode ptrace, or, given ptrace_why (--mode auto found ptrace
 * refused), saying that neither mode can sample it.
 */
int prs_preload_check_program(const char *argv0, const char *ptrace_why, struct prs_err *err);

/* The environment changed for one launch, and how to put it back. */
struct prs_preload_env {
	char *old_preload; /* LD_PRELOAD before (owned), NULL if unset */
	bool set;
};

/* Sets LD_PRELOAD (agent appended), PYRSPROF_AGENT_FD=fd and, with subprocesses, the follow
 * configuration (follow: agent/follow.h's value, or NULL) in pyrsprof's own environment, for the
 * fork that follows. Returns 0 or -ENOMEM. */
int prs_preload_env_set(struct prs_preload_env *e, const char *agent, int fd, const char *follow,
			struct prs_err *err);
/* Puts the environment back as it was. */
void prs_preload_env_restore(struct prs_preload_env *e);

#endif
