/* SPDX-License-Identifier: MIT */
/*
 * The program's own action for the agent's signal (chain.c). The agent's handler stays installed
 * for the whole run; what the program sets or asks for that signal (sigaction, signal) is kept
 * here instead, as if it had been installed: sigaction answers with it, and every signal of that
 * number the agent did not send itself is passed to it (its handler called with its mask,
 * SA_RESETHAND honoured; SIG_IGN drops the signal; SIG_DFL terminates the process as the default
 * action of a real-time signal does). So a program that handles SIGRTMIN+8 keeps its handler and
 * is still sampled. SIGSEGV and SIGBUS are held the same way, for the agent's fault-tolerant
 * loads (safecopy.h): a fault that is not the agent's goes to the program's action (its handler,
 * or the default action: the process dies of the same fault as without the agent). The
 * program's SIGPROF and ITIMER_PROF are never touched (the agent does not
 * use them); that it set a SIGPROF action is noted for pyrsprof's summary.
 */
#ifndef PYRSPROF_AGENT_CHAIN_H
#define PYRSPROF_AGENT_CHAIN_H

#include <signal.h>
#include <stdbool.h>

#include "agent/ring.h"

/* Resolves the libc functions wrapped here. Returns false if one is missing. */
bool prs_chain_resolve(void);
/* libc's sigaction, whatever the program set (the agent's own calls go through it). */
int prs_chain_real_sigaction(int sig, const struct sigaction *act, struct sigaction *old);
/* From now on sig is the agent's: initial is the action the program had (SIG_DFL or SIG_IGN at
 * start), h the header where what happens is counted (NULL: not counted). */
void prs_chain_start(int sig, const struct sigaction *initial, struct prs_ring_hdr *h);
/* From now on sig (SIGSEGV or SIGBUS) is held too, the agent's fault handler installed;
 * initial is the action the program had. */
void prs_chain_hold_fault(int sig, const struct sigaction *initial);
/* sig is not held after all (its handler could not be installed): the program's calls reach
 * libc again. */
void prs_chain_release_fault(int sig);
/* Both SIGSEGV and SIGBUS are held, and neither was handed back to the default action (a dying
 * process): prs_safecopy's faults reach the agent. Async-signal-safe. */
bool prs_chain_faults_held(void);
/* The program's action for the agent's signal is SIG_IGN (what an exec keeps of it; a handler
 * becomes SIG_DFL). */
bool prs_chain_program_ignores(void);
/* A forked child: counted nowhere any more (the ring is the parent's); the actions stay. */
void prs_chain_forget_ring(void);
/* A forked child followed with a ring of its own (follow.h): counted there. */
void prs_chain_set_ring(struct prs_ring_hdr *h);
/* A signal of the agent's number that the agent did not send, or a fault that is not
 * prs_safecopy's, passed to the program's action. Async-signal-safe. */
void prs_chain_forward(int sig, siginfo_t *si, void *uc);

#endif
