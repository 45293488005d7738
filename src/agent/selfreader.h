/* SPDX-License-Identifier: MIT */
/*
 * The agent's reader of its own process, for the CPython walk in the signal handler: a
 * memreader (pyrsprof/memreader.h) over process_vm_readv on itself, so that a bad pointer is an
 * error and never a fault, with two savings on the syscalls that dominate the handler's time:
 * - read() fetches whole pages into a small cache and serves later reads of the same pages from
 *   it: a thread's frames (3.11+: contiguous in its data stack; before: frame objects close in
 *   the heap) mostly come from the same few pages. Page-sized, page-aligned reads never stop
 *   half-way. The cache lives for one walk (one handler run): the interrupted thread's frames
 *   cannot change under it; another thread's thread state may, as with any read.
 * - readv() batches at most PRS_SELF_IOV vecs per syscall with its arrays on the stack (a signal
 *   handler runs on whatever stack the interrupted code left: kept small).
 * Async-signal-safe: syscalls and memcpy; the cache is the caller's (a ring slot's scratch).
 */
#ifndef PYRSPROF_AGENT_SELFREADER_H
#define PYRSPROF_AGENT_SELFREADER_H

#include <stdint.h>
#include <sys/types.h>

#include "pyrsprof/memreader.h"

#define PRS_SELF_PAGE 4096u
#define PRS_SELF_PAGES 4   /* pages cached */
#define PRS_SELF_IOV 64    /* vecs per syscall of readv */

struct prs_selfreader {
	pid_t pid;
	unsigned next;                        /* the slot the next miss replaces */
	uint64_t page[PRS_SELF_PAGES];        /* address of the page each slot holds; 0: none */
	uint8_t data[PRS_SELF_PAGES][PRS_SELF_PAGE];
	uint64_t syscalls;                    /* process_vm_readv calls made (benchmarks) */
};

/* Starts an empty cache over process pid, and mr reading through it. */
void prs_selfreader_init(struct prs_selfreader *sr, pid_t pid, struct prs_memreader *mr);

#endif
