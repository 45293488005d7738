/* SPDX-License-Identifier: MIT */
/*
 * Reading a target's memory through a small interface, so that what reads it (the CPython walker,
 * the thread-name reader) runs the same over a live process (process_vm_readv), over a memory image
 * in a unit test, or inside the target over a reader that cannot fault (the LD_PRELOAD agent).
 * Every read is fallible: an address that is not mapped gives -EFAULT, never a crash.
 */
#ifndef PYRSPROF_MEMREADER_H
#define PYRSPROF_MEMREADER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* One range of a batched read. */
struct prs_memvec {
	uint64_t addr; /* target address */
	void *buf;     /* local destination */
	size_t len;
	int res;       /* set by readv: 0, or a negative errno for this vec (-EFAULT: unmapped) */
};

/*
 * How target memory is read.
 * read: fills buf with exactly len bytes at addr; returns 0, -EFAULT (some byte unreadable), or
 * -ESRCH (the process is gone); it never faults, whatever addr is. readv: reads n vecs in as few
 * calls as it can and sets each res; returns the number of vecs read completely, or -ESRCH. readv
 * may be NULL (callers then read vec by vec). A reader used from a signal handler must make both
 * async-signal-safe.
 */
struct prs_memreader {
	int (*read)(void *ctx, uint64_t addr, void *buf, size_t len);
	int (*readv)(void *ctx, struct prs_memvec *v, size_t n);
	void *ctx;
};

/*
 * A memreader over process_vm_readv for pid (ctx holds the pid; nothing is allocated). readv puts
 * up to 1024 vecs in one syscall, merges remote ranges that touch, and resumes after a vec that
 * failed (partial reads handled). Both are async-signal-safe (one syscall, no allocation).
 */
void prs_memreader_pid(struct prs_memreader *mr, pid_t pid);

#endif
