/* SPDX-License-Identifier: MIT */
/*
 * The program's own actions for the signals the agent holds: its sampling signal, SIGSEGV and
 * SIGBUS (chain.h says what and why). Each action is kept in two copies and an index flipped
 * after the new copy is written, so that the handler, which may run in any thread at any time,
 * reads a whole one without a lock.
 */
#include "agent/chain.h"

#include <dlfcn.h>
#include <errno.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent/sigmask.h"

#include "util/banned.h"

#define EXPORT __attribute__((visibility("default")))

static int (*real_sigaction)(int, const struct sigaction *, struct sigaction *);
static sighandler_t (*real_signal)(int, sighandler_t);

/* A signal the agent holds: its handler installed, the program's action kept here. */
struct chained {
	int sig;                  /* 0: unused */
	bool fault;               /* SIGSEGV, SIGBUS: the agent's fault-tolerant loads (safecopy.h) */
	bool released;            /* a fault sent to SIG_DFL: the default action reinstalled */
	struct sigaction acts[2]; /* the program's action: acts[cur] */
	int cur;
};

#define PRS_CHAIN_MAX 3 /* the sampling signal, SIGSEGV, SIGBUS */
static struct chained chained[PRS_CHAIN_MAX];
static struct prs_ring_hdr *hdr;

/* The entry of a signal the agent holds; NULL for any other. Async-signal-safe. */
static struct chained *held(int sig)
{
	for (int k = 0; k < PRS_CHAIN_MAX; k++)
		if (sig > 0 && __atomic_load_n(&chained[k].sig, __ATOMIC_ACQUIRE) == sig)
			return &chained[k];
	return NULL;
}

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

/* Takes sig over with the program's action initial, in entry k. */
static void hold(int k, int sig, const struct sigaction *initial, bool fault)
{
	chained[k].acts[0] = *initial;
	chained[k].cur = 0;
	chained[k].fault = fault;
	chained[k].released = false;
	__atomic_store_n(&chained[k].sig, sig, __ATOMIC_RELEASE);
}

void prs_chain_start(int sig, const struct sigaction *initial, struct prs_ring_hdr *h)
{
	hdr = h;
	hold(0, sig, initial, false);
}

void prs_chain_hold_fault(int sig, const struct sigaction *initial)
{
	hold(sig == SIGSEGV ? 1 : 2, sig, initial, true);
}

void prs_chain_release_fault(int sig)
{
	struct chained *c = held(sig);

	if (c)
		__atomic_store_n(&c->released, true, __ATOMIC_RELEASE);
}

bool prs_chain_faults_held(void)
{
	for (int k = 1; k < PRS_CHAIN_MAX; k++)
		if (!__atomic_load_n(&chained[k].sig, __ATOMIC_ACQUIRE) ||
		    __atomic_load_n(&chained[k].released, __ATOMIC_ACQUIRE))
			return false;
	return true;
}

bool prs_chain_program_ignores(void)
{
	int i = __atomic_load_n(&chained[0].cur, __ATOMIC_ACQUIRE);

	return chained[0].sig && chained[0].acts[i].sa_handler == SIG_IGN;
}

void prs_chain_forget_ring(void)
{
	hdr = NULL;
}

void prs_chain_set_ring(struct prs_ring_hdr *h)
{
	hdr = h;
}

/* True for the two actions that are not handlers. */
static bool is_handler(const struct sigaction *a)
{
	return a->sa_handler != SIG_DFL && a->sa_handler != SIG_IGN;
}

/* The program sets (act) or asks for (old) its action for a signal the agent holds. */
static void program_action(struct chained *c, const struct sigaction *act, struct sigaction *old)
{
	int i = __atomic_load_n(&c->cur, __ATOMIC_ACQUIRE);

	if (old)
		*old = c->acts[i];
	if (!act)
		return;
	c->acts[1 - i] = *act;
	__atomic_store_n(&c->cur, 1 - i, __ATOMIC_RELEASE);
	if (hdr && !c->fault && is_handler(act))
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
	struct chained *c;

	if (!real_sigaction && !prs_chain_resolve()) {
		errno = ENOSYS;
		return -1;
	}
	c = held(sig);
	if (!c || c->released) {
		note_sigprof(sig, act && is_handler(act));
		return real_sigaction(sig, act, old);
	}
	program_action(c, act, old);
	return 0;
}

/* glibc's signal(): BSD semantics (SA_RESTART, the signal blocked in its handler). */
EXPORT sighandler_t signal(int sig, sighandler_t handler)
{
	struct sigaction sa, old;
	struct chained *c;

	if (!real_signal && !prs_chain_resolve())
		return SIG_ERR;
	c = held(sig);
	if (!c || c->released) {
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
	program_action(c, &sa, &old);
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
	prs_mask_real(SIG_UNBLOCK, &s, NULL);
}

/*
 * A fault (SIGSEGV, SIGBUS) the program does not handle: the default action reinstalled for good.
 * One the kernel raised (si_code > 0) recurs when the faulting instruction runs again on return,
 * and kills with its own siginfo and core as without the agent (an ignored fault kills too: the
 * kernel forces the default); one sent by a process is raised again, unless ignored.
 */
static void fault_default(struct chained *c, int sig, const siginfo_t *si, bool ignored)
{
	struct sigaction dfl;

	if (si->si_code <= 0 && ignored)
		return;
	__atomic_store_n(&c->released, true, __ATOMIC_RELEASE);
	if (si->si_code <= 0) {
		default_action(sig);
		return;
	}
	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	real_sigaction(sig, &dfl, NULL);
}

void prs_chain_forward(int sig, siginfo_t *si, void *uc)
{
	struct chained *c = held(sig);
	struct sigaction a;
	sigset_t old;
	bool view;
	int i;

	if (!c)
		return; /* not held: the agent's handler is not installed for it either */
	i = __atomic_load_n(&c->cur, __ATOMIC_ACQUIRE);
	a = c->acts[i];
	if (hdr && !c->fault)
		__atomic_fetch_add(&hdr->foreign, 1, __ATOMIC_RELAXED);
	if (c->fault && !is_handler(&a)) {
		fault_default(c, sig, si, a.sa_handler == SIG_IGN);
		return;
	}
	if (a.sa_handler == SIG_IGN)
		return;
	if (a.sa_handler == SIG_DFL) {
		default_action(sig);
		return;
	}
	if (a.sa_flags & SA_RESETHAND) {
		memset(&c->acts[1 - i], 0, sizeof(c->acts[1 - i]));
		c->acts[1 - i].sa_handler = SIG_DFL;
		__atomic_store_n(&c->cur, 1 - i, __ATOMIC_RELEASE);
	}
	/* its mask for real but the agent's signal, which is blocked in the program's view only */
	view = prs_mask_enter_handler(sig, &a);
	sigdelset(&a.sa_mask, chained[0].sig);
	prs_mask_real(SIG_BLOCK, &a.sa_mask, &old);
	if (a.sa_flags & SA_NODEFER) { /* the kernel blocked sig for the agent's handler */
		sigset_t one;

		sigemptyset(&one);
		sigaddset(&one, sig);
		prs_mask_real(SIG_UNBLOCK, &one, NULL);
	}
	if (a.sa_flags & SA_SIGINFO)
		a.sa_sigaction(sig, si, uc);
	else
		a.sa_handler(sig);
	prs_mask_real(SIG_SETMASK, &old, NULL);
	prs_mask_leave_handler(view);
}
