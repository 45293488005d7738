/* SPDX-License-Identifier: MIT */
/*
 * The program's view of its mask for the agent's signal (sigmask.h says what and why).
 */
#include "agent/sigmask.h"

#include <dlfcn.h>
#include <errno.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/banned.h"

#define EXPORT __attribute__((visibility("default")))
#define TLS __thread __attribute__((tls_model("initial-exec")))

static int (*real_pthread_sigmask)(int, const sigset_t *, sigset_t *);
static int (*real_sigprocmask)(int, const sigset_t *, sigset_t *);
static int agent_sig; /* 0: not started */

/* Per thread: whether the program blocks the agent's signal, and what it held meanwhile. */
static TLS bool view_blocked;
static TLS siginfo_t held[PRS_MASK_HELD];
static TLS unsigned nheld;

bool prs_mask_resolve(void)
{
	real_pthread_sigmask = dlsym(RTLD_NEXT, "pthread_sigmask");
	real_sigprocmask = dlsym(RTLD_NEXT, "sigprocmask");
	return real_pthread_sigmask && real_sigprocmask;
}

int prs_mask_real(int how, const sigset_t *set, sigset_t *old)
{
	return real_pthread_sigmask(how, set, old);
}

void prs_mask_start(int sig)
{
	sigset_t cur, s;

	if (real_pthread_sigmask(SIG_BLOCK, NULL, &cur) == 0 && sigismember(&cur, sig)) {
		view_blocked = true;
		sigemptyset(&s);
		sigaddset(&s, sig);
		real_pthread_sigmask(SIG_UNBLOCK, &s, NULL);
	}
	__atomic_store_n(&agent_sig, sig, __ATOMIC_RELEASE);
}

bool prs_mask_hold(const siginfo_t *si)
{
	if (!view_blocked)
		return false;
	if (nheld < PRS_MASK_HELD)
		held[nheld++] = *si;
	/* beyond: dropped, as the kernel drops a real-time signal over RLIMIT_SIGPENDING */
	return true;
}

bool prs_mask_view(void)
{
	return view_blocked;
}

void prs_mask_set_view(bool blocked)
{
	view_blocked = blocked;
	nheld = 0;
}

/* The program unblocked the signal: what was held is sent again to this thread, where the
 * agent's handler passes it to the program's action (the view no longer blocks it). */
static void release_held(int sig)
{
	pid_t pid = getpid(), tid = (pid_t)syscall(SYS_gettid);
	unsigned n = nheld;

	nheld = 0;
	/* with its siginfo where the kernel allows it (to the thread group's leader, or a queued
	 * one), else as pthread_kill would send it */
	for (unsigned k = 0; k < n; k++)
		if (syscall(SYS_rt_tgsigqueueinfo, pid, tid, sig, &held[k]) != 0)
			syscall(SYS_tgkill, pid, tid, sig);
}

bool prs_mask_enter_handler(int sig, const struct sigaction *a)
{
	bool prev = view_blocked;
	int s = __atomic_load_n(&agent_sig, __ATOMIC_ACQUIRE);

	if (s && (sigismember(&a->sa_mask, s) || (sig == s && !(a->sa_flags & SA_NODEFER))))
		view_blocked = true;
	return prev;
}

void prs_mask_leave_handler(bool prev)
{
	int s = __atomic_load_n(&agent_sig, __ATOMIC_ACQUIRE);

	view_blocked = prev;
	if (s && !prev && nheld)
		release_held(s);
}

/*
 * A mask change of the program's: done for real without the agent's signal, the view updated,
 * old answered with the view. Returns real's result (an errno value or -1, as real says).
 */
static int change(int how, const sigset_t *set, sigset_t *old,
		  int (*real)(int, const sigset_t *, sigset_t *))
{
	int sig = __atomic_load_n(&agent_sig, __ATOMIC_ACQUIRE);
	bool was = view_blocked, now = was;
	sigset_t s, prev;
	int rc;

	if (!sig || (set && how != SIG_BLOCK && how != SIG_UNBLOCK && how != SIG_SETMASK))
		return real(how, set, old);
	if (set) {
		s = *set;
		if (how == SIG_SETMASK)
			now = sigismember(set, sig);
		else if (sigismember(set, sig))
			now = how == SIG_BLOCK;
		sigdelset(&s, sig);
	}
	if (now)
		view_blocked = true; /* before: one arriving from now on is held */
	rc = real(how, set ? &s : NULL, &prev);
	if (rc != 0) {
		view_blocked = was;
		return rc;
	}
	if (old) {
		*old = prev;
		if (was)
			sigaddset(old, sig);
		else
			sigdelset(old, sig);
	}
	view_blocked = now;
	if (was && !now && nheld)
		release_held(sig);
	return 0;
}

EXPORT int pthread_sigmask(int how, const sigset_t *set, sigset_t *old)
{
	if (!real_pthread_sigmask && !prs_mask_resolve())
		return ENOSYS;
	return change(how, set, old, real_pthread_sigmask);
}

EXPORT int sigprocmask(int how, const sigset_t *set, sigset_t *old)
{
	if (!real_sigprocmask && !prs_mask_resolve()) {
		errno = ENOSYS;
		return -1;
	}
	return change(how, set, old, real_sigprocmask);
}
