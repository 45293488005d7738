/* SPDX-License-Identifier: MIT */
/*
 * The program's own action for the agent's signal (chain.h says what and why). The action is
 * kept in two copies and an index flipped after the new copy is written, so that the handler,
 * which may run in any thread at any time, reads a whole one without a lock.
 */
#include "agent/chain.h"

#include <dlfcn.h>
#include <errno.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/banned.h"

#define EXPORT __attribute__((visibility("default")))

static int (*real_sigaction)(int, const struct sigaction *, struct sigaction *);
static sighandler_t (*real_signal)(int, sighandler_t);
static struct sigaction acts[2]; /* the program's action: acts[cur] */
static int cur;
static int agent_sig;            /* 0: none (the agent is not running) */
static struct prs_ring_hdr *hdr;

bool prs_chain_resolve(void)
{
	real_sigaction = dlsym(RTLD_NEXT, "sigaction");
	real_signal = dlsym(RTLD_NEXT, "signal");
	return real_sigaction && real_signal;
}

int prs_chain_real_sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	return real_sigaction(sig, act, old);
}

void prs_chain_start(int sig, const struct sigaction *initial, struct prs_ring_hdr *h)
{
	acts[0] = *initial;
	cur = 0;
	hdr = h;
	__atomic_store_n(&agent_sig, sig, __ATOMIC_RELEASE);
}

void prs_chain_forget_ring(void)
{
	hdr = NULL;
}

/* True for the two actions that are not handlers. */
static bool is_handler(const struct sigaction *a)
{
	return a->sa_handler != SIG_DFL && a->sa_handler != SIG_IGN;
}

/* The program sets (act) or asks for (old) its action for the agent's signal. */
static void program_action(const struct sigaction *act, struct sigaction *old)
{
	int i = __atomic_load_n(&cur, __ATOMIC_ACQUIRE);

	if (old)
		*old = acts[i];
	if (!act)
		return;
	acts[1 - i] = *act;
	__atomic_store_n(&cur, 1 - i, __ATOMIC_RELEASE);
	if (hdr && is_handler(act))
		__atomic_store_n(&hdr->program_handler, 1, __ATOMIC_RELAXED);
}

/* The program's SIGPROF is its own: only noted. */
static void note_sigprof(int sig, bool handler)
{
	if (sig == SIGPROF && handler && hdr)
		__atomic_store_n(&hdr->program_sigprof, 1, __ATOMIC_RELAXED);
}

EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	if (!real_sigaction && !prs_chain_resolve()) {
		errno = ENOSYS;
		return -1;
	}
	if (sig == 0 || sig != __atomic_load_n(&agent_sig, __ATOMIC_ACQUIRE)) {
		note_sigprof(sig, act && is_handler(act));
		return real_sigaction(sig, act, old);
	}
	program_action(act, old);
	return 0;
}

/* glibc's signal(): BSD semantics (SA_RESTART, the signal blocked in its handler). */
EXPORT sighandler_t signal(int sig, sighandler_t handler)
{
	struct sigaction sa, old;

	if (!real_signal && !prs_chain_resolve())
		return SIG_ERR;
	if (sig == 0 || sig != __atomic_load_n(&agent_sig, __ATOMIC_ACQUIRE)) {
		note_sigprof(sig, handler != SIG_DFL && handler != SIG_IGN && handler != SIG_ERR);
		return real_signal(sig, handler);
	}
	if (handler == SIG_ERR) {
		errno = EINVAL;
		return SIG_ERR;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = handler;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	sigaddset(&sa.sa_mask, sig);
	program_action(&sa, &old);
	return old.sa_handler;
}

/* The default action of a real-time signal: the process ends, killed by it. The signal is
 * blocked in its handler: raised again, it is delivered as soon as it is unblocked. */
static void default_action(int sig)
{
	struct sigaction dfl;
	sigset_t s;

	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	real_sigaction(sig, &dfl, NULL);
	syscall(SYS_tgkill, getpid(), (pid_t)syscall(SYS_gettid), sig);
	sigemptyset(&s);
	sigaddset(&s, sig);
	sigprocmask(SIG_UNBLOCK, &s, NULL);
}

void prs_chain_forward(int sig, siginfo_t *si, void *uc)
{
	int i = __atomic_load_n(&cur, __ATOMIC_ACQUIRE);
	struct sigaction a = acts[i];
	sigset_t old;

	if (hdr)
		__atomic_fetch_add(&hdr->foreign, 1, __ATOMIC_RELAXED);
	if (a.sa_handler == SIG_IGN)
		return;
	if (a.sa_handler == SIG_DFL) {
		default_action(sig);
		return;
	}
	if (a.sa_flags & SA_RESETHAND) {
		memset(&acts[1 - i], 0, sizeof(acts[1 - i]));
		acts[1 - i].sa_handler = SIG_DFL;
		__atomic_store_n(&cur, 1 - i, __ATOMIC_RELEASE);
	}
	sigprocmask(SIG_BLOCK, &a.sa_mask, &old);
	if (a.sa_flags & SA_SIGINFO)
		a.sa_sigaction(sig, si, uc);
	else
		a.sa_handler(sig);
	sigprocmask(SIG_SETMASK, &old, NULL);
}
