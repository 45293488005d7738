/* SPDX-License-Identifier: MIT */
/*
 * The program's view of its signal mask, for the agent's signal (sigmask.c). A thread that blocks
 * every signal (common in worker threads: sigfillset + pthread_sigmask) would block the agent's
 * sampling signal too and take no CPU sample. pthread_sigmask and sigprocmask are wrapped: the
 * agent's signal is never really blocked, and whether the program blocked it is kept per thread
 * instead, answered back in the old masks, and honoured for the program's own uses of that
 * signal: one that arrives while the program blocks it is held (up to PRS_MASK_HELD per thread)
 * and sent again to the thread when the program unblocks it, so its handler runs then, as
 * without the agent. Across an exec the program's block is made real (the mask is inherited),
 * and the new image's agent takes it back into its view.
 * Not covered: sigsetmask/sigblock/sighold (glibc calls sigprocmask internally, not through
 * the wrapper), sigpending and sigwait* on the agent's signal (a held signal is not pending
 * for the kernel), masks set by sigsuspend/pselect/ppoll (temporary; no CPU time passes).
 */
#ifndef PYRSPROF_AGENT_SIGMASK_H
#define PYRSPROF_AGENT_SIGMASK_H

#include <signal.h>
#include <stdbool.h>

#define PRS_MASK_HELD 8 /* the program's signals held per thread while it blocks them */

/* Resolves libc's pthread_sigmask and sigprocmask. Returns false if one is missing. */
bool prs_mask_resolve(void);
/* From now on sig's blocking is kept in the program's view; the calling thread's real block of
 * it (inherited across an exec) becomes its view and is lifted. */
void prs_mask_start(int sig);
/* libc's pthread_sigmask, whatever the program's view (the agent's own mask changes). */
int prs_mask_real(int how, const sigset_t *set, sigset_t *old);
/* In the handler: a signal of the program's that the program blocks in this thread is held
 * (true); false: deliver it now. Async-signal-safe. */
bool prs_mask_hold(const siginfo_t *si);
/* A new thread created by the calling one: its view (inherited, as the mask is). */
bool prs_mask_view(void);
void prs_mask_set_view(bool blocked);
/* Around the program's handler (chain.c): the view that handler runs with (the agent's signal
 * blocked when its sa_mask or, for that signal itself without SA_NODEFER, the kernel would
 * block it); leave restores the previous one. Async-signal-safe. */
bool prs_mask_enter_handler(int sig, const struct sigaction *a);
void prs_mask_leave_handler(bool prev);

#endif
