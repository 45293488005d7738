/* SPDX-License-Identifier: MIT */
/*
 * Launching a program with the preload agent: finding the agent, refusing programs the loader
 * will not preload into (with a line that says to use ptrace mode), and the environment.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/follow.h"
#include "agent/ring.h"
#include "sample/preload-internal.h"
#include "util/banned.h"

#define PH_MAX 256 /* program headers looked at */

/* dir/name into buf if it is a readable file. */
static bool try_path(char *buf, size_t size, const char *dir, const char *name)
{
	int n = snprintf(buf, size, "%s/%s", dir, name);

	return n > 0 && (size_t)n < size && access(buf, R_OK) == 0;
}

int prs_preload_agent_path(char *buf, size_t size, const char *given, struct prs_err *err)
{
	char exe[PATH_MAX];
	ssize_t n;
	char *slash;

	if (given) {
		if (snprintf(buf, size, "%s", given) >= (int)size || access(buf, R_OK) != 0)
			return prs_err_set(err, -ENOENT, "PYRSPROF_AGENT=%s: not a readable file", given);
	} else {
		n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
		if (n <= 0)
			return prs_err_set(err, -ENOENT, "cannot find pyrsprof's own path");
		exe[n] = '\0';
		slash = strrchr(exe, '/');
		*slash = '\0';
		if (!try_path(buf, size, exe, PRS_AGENT_NAME) &&
		    !try_path(buf, size, exe, "../lib/pyrsprof/" PRS_AGENT_NAME))
			return prs_err_set(err, -ENOENT,
					   "the preload agent %s is not next to pyrsprof (in %s): "
					   "build it with make, or set PYRSPROF_AGENT", PRS_AGENT_NAME, exe);
	}
	if (buf[0] != '/' || strpbrk(buf, " :\t\n"))
		return prs_err_set(err, -EINVAL, "the agent's path '%s' cannot go into LD_PRELOAD "
				   "(it must be absolute, without spaces or colons)", buf);
	return 0;
}

/* argv0 as exec will find it, into buf; false when it is not found. */
static bool find_program(const char *argv0, char *buf, size_t size)
{
	const char *path = getenv("PATH");

	if (strchr(argv0, '/'))
		return snprintf(buf, size, "%s", argv0) < (int)size;
	if (!path)
		path = "/usr/local/bin:/usr/bin:/bin";
	while (*path) {
		size_t len = strcspn(path, ":");
		int n = snprintf(buf, size, "%.*s/%s", (int)len, len ? path : ".", argv0);

		if (n > 0 && (size_t)n < size && access(buf, X_OK) == 0)
			return true;
		path += len + (path[len] == ':');
	}
	return false;
}

/* True when the 64-bit ELF on fd has a PT_INTERP (a dynamic loader runs it). */
static bool has_interp(int fd, const Elf64_Ehdr *eh)
{
	for (unsigned i = 0; i < eh->e_phnum && i < PH_MAX; i++) {
		Elf64_Phdr ph;

		if (pread(fd, &ph, sizeof(ph), (off_t)(eh->e_phoff + (uint64_t)i * eh->e_phentsize)) !=
		    (ssize_t)sizeof(ph))
			return false;
		if (ph.p_type == PT_INTERP)
			return true;
	}
	return false;
}

/* The refusal's line: why the agent cannot go into argv0, and what is left to the user: ptrace
 * mode, or nothing when ptrace was refused too (ptrace_why). */
static int refused(struct prs_err *err, int rc, const char *argv0, const char *why,
		   const char *ptrace_why)
{
	if (ptrace_why)
		return prs_err_set(err, rc, "%s %s; and ptrace is not permitted here (%s): neither "
				   "mode can sample it", argv0, why, ptrace_why);
	return prs_err_set(err, rc, "%s %s (use --mode ptrace)", argv0, why);
}

int prs_preload_check_program(const char *argv0, const char *ptrace_why, struct prs_err *err)
{
	char path[PATH_MAX];
	Elf64_Ehdr eh;
	struct stat st;
	bool dynamic;
	int fd;

	if (!find_program(argv0, path, sizeof(path)) || stat(path, &st) != 0)
		return 0;
	if (st.st_mode & (S_ISUID | S_ISGID))
		return refused(err, -EPERM, argv0, "is set-user-ID or set-group-ID: the loader ignores "
			       "LD_PRELOAD for it, so --mode preload cannot sample it", ptrace_why);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	if (pread(fd, &eh, sizeof(eh), 0) != (ssize_t)sizeof(eh) || memcmp(eh.e_ident, ELFMAG, SELFMAG)) {
		close(fd);
		return 0; /* a script: its interpreter loads the agent */
	}
	if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_machine != EM_X86_64) {
		close(fd);
		return refused(err, -ENOTSUP, argv0, "is not an x86-64 program: the preload agent "
			       "cannot be loaded into it", ptrace_why);
	}
	dynamic = has_interp(fd, &eh);
	close(fd);
	if (!dynamic)
		return refused(err, -ENOTSUP, argv0, "is statically linked: LD_PRELOAD cannot load the "
			       "agent into it, so --mode preload cannot sample it", ptrace_why);
	return 0;
}

int prs_preload_env_set(struct prs_preload_env *e, const char *agent, int fd, const char *follow,
			struct prs_err *err)
{
	const char *old = getenv("LD_PRELOAD");
	char num[16], *val;
	size_t n;

	e->old_preload = old ? strdup(old) : NULL;
	n = (old ? strlen(old) + 1 : 0) + strlen(agent) + 1;
	val = malloc(n);
	if ((old && !e->old_preload) || !val) {
		free(val);
		free(e->old_preload);
		e->old_preload = NULL;
		return prs_err_set(err, -ENOMEM, "out of memory");
	}
	/* appended: a library the user preloads keeps its place first */
	snprintf(val, n, "%s%s%s", old && old[0] ? old : "", old && old[0] ? ":" : "", agent);
	snprintf(num, sizeof(num), "%d", fd);
	e->set = setenv("LD_PRELOAD", val, 1) == 0 && setenv(PRS_AGENT_FD_ENV, num, 1) == 0 &&
		 (!follow || setenv(PRS_FOLLOW_ENV, follow, 1) == 0);
	free(val);
	if (!e->set) {
		prs_preload_env_restore(e);
		return prs_err_set(err, -ENOMEM, "out of memory");
	}
	return 0;
}

void prs_preload_env_restore(struct prs_preload_env *e)
{
	if (e->old_preload)
		setenv("LD_PRELOAD", e->old_preload, 1);
	else
		unsetenv("LD_PRELOAD");
	unsetenv(PRS_AGENT_FD_ENV);
	unsetenv(PRS_FOLLOW_ENV);
	free(e->old_preload);
	e->old_preload = NULL;
	e->set = false;
}
