/* SPDX-License-Identifier: MIT */
/*
 * Reading the agent's own process with plain loads that cannot kill it: the handler's CPython
 * walk reads the program's memory (thread states, frames, code objects), which other threads may
 * free or rewrite at any time and where the interrupted thread may have left a frame half built,
 * so any pointer it follows may be garbage. process_vm_readv on itself is safe but costs a
 * syscall per read (3-4 us on a VM): a 20-frame walk was ~30 us for a 5 us goal.
 *
 * prs_safecopy copies with one instruction (rep movsb) at a known address. A fault of that
 * instruction (SIGSEGV or SIGBUS: unmapped, PROT_NONE, beyond a mapped file's end) is recognised
 * by the agent's fault handler, which calls prs_safecopy_recover: the interrupted context is moved
 * to prs_safecopy's failure return (-EFAULT) and the copy never resumes. This is what makes any
 * pointer safe to follow: there is no window (a mapping checked and then unmapped by another
 * thread before the load) because nothing is checked beforehand; the load itself is what fails.
 *
 * Safe only while these hold, which the caller (agent.c, direct_ok) checks before each walk:
 * - the agent's handler is the installed action of SIGSEGV and SIGBUS (chain.c keeps it
 *   installed and keeps the program's own action aside, as for the sampling signal);
 * - neither signal is blocked in the interrupted thread (a fault of a blocked SIGSEGV kills).
 * Otherwise the walk reads through process_vm_readv as before (selfreader.c).
 * Faults of anything else are not prs_safecopy's: the agent passes them to the program's action.
 */
#ifndef PYRSPROF_AGENT_SAFECOPY_H
#define PYRSPROF_AGENT_SAFECOPY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pyrsprof/memreader.h"

/* Copies n bytes at src to dst. Returns 0, or -EFAULT when a byte of src faulted (dst then holds
 * a part of them). Only with the fault handler in place (above). Async-signal-safe. */
int prs_safecopy(void *dst, uint64_t src, size_t n);

/* In a SIGSEGV or SIGBUS handler, with its ucontext: true when the fault is prs_safecopy's, the
 * context then moved to its failure return (the handler must just return). */
bool prs_safecopy_recover(void *ucontext);

/* A memreader over prs_safecopy (no context, no syscall): async-signal-safe, under the same
 * conditions as prs_safecopy. */
void prs_safecopy_reader(struct prs_memreader *mr);

#endif
