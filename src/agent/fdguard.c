/* SPDX-License-Identifier: MIT */
/* Noticing the program closing the agent's clock descriptors (fdguard.h). Async-signal-safe:
 * the wrappers run in forked children before their exec. */
#include <dlfcn.h>
#include <errno.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent/fdguard.h"
#include "util/banned.h"

#define EXPORT __attribute__((visibility("default")))
#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

static pid_t owner[PRS_FDGUARD_MAX]; /* the thread whose clock descriptor each number is */
static pid_t owner_pid;              /* the process the table is of */
static void (*on_lost)(pid_t tid);
static int (*real_close)(int);
static int (*real_close_range)(unsigned, unsigned, int);
static void (*real_closefrom)(int);

bool prs_fdguard_resolve(void)
{
	real_close = dlsym(RTLD_NEXT, "close");
	real_close_range = dlsym(RTLD_NEXT, "close_range"); /* (glibc 2.34+) */
	real_closefrom = dlsym(RTLD_NEXT, "closefrom");
	return real_close != NULL;
}

static pid_t getpid_raw(void)
{
	return (pid_t)syscall(SYS_getpid);
}

void prs_fdguard_start(void (*lost)(pid_t tid))
{
	owner_pid = getpid_raw();
	__atomic_store_n(&on_lost, lost, __ATOMIC_RELEASE);
}

void prs_fdguard_set(int fd, pid_t tid)
{
	if (fd >= 0 && fd < PRS_FDGUARD_MAX)
		__atomic_store_n(&owner[fd], tid, __ATOMIC_RELEASE);
}

void prs_fdguard_forget_all(void)
{
	owner_pid = getpid_raw();
	for (int fd = 0; fd < PRS_FDGUARD_MAX; fd++)
		__atomic_store_n(&owner[fd], 0, __ATOMIC_RELAXED);
}

/* The program closed [lo, hi]: the owners of the agent's descriptors among them re-arm. Not in a
 * vfork child (it shares the parent's memory, not its descriptors: the table is the parent's). */
static void closed(unsigned lo, unsigned hi)
{
	void (*lost)(pid_t) = __atomic_load_n(&on_lost, __ATOMIC_ACQUIRE);

	if (!lost || getpid_raw() != owner_pid)
		return;
	for (unsigned fd = lo; fd <= hi && fd < PRS_FDGUARD_MAX; fd++) {
		pid_t tid = __atomic_exchange_n(&owner[fd], 0, __ATOMIC_ACQ_REL);

		if (tid > 0 && lost)
			lost(tid);
	}
}

EXPORT int close(int fd)
{
	int rc, e;

	if (!real_close && !prs_fdguard_resolve())
		return -1;
	rc = real_close(fd);
	e = errno;
	if (fd >= 0 && fd < PRS_FDGUARD_MAX && __atomic_load_n(&owner[fd], __ATOMIC_RELAXED))
		closed((unsigned)fd, (unsigned)fd);
	errno = e;
	return rc;
}

EXPORT int close_range(unsigned lo, unsigned hi, int flags)
{
	int rc, e;

	if (!real_close_range && !prs_fdguard_resolve())
		return -1;
	if (!real_close_range) {
		errno = ENOSYS;
		return -1;
	}
	rc = real_close_range(lo, hi, flags);
	e = errno;
	if (rc == 0 && !(flags & CLOSE_RANGE_CLOEXEC))
		closed(lo, hi);
	errno = e;
	return rc;
}

EXPORT void closefrom(int lo)
{
	int e;

	if (!real_closefrom)
		prs_fdguard_resolve();
	if (!real_closefrom)
		return;
	real_closefrom(lo);
	e = errno;
	closed(lo < 0 ? 0 : (unsigned)lo, ~0u);
	errno = e;
}
