/* SPDX-License-Identifier: MIT */
/*
 * The memreader of a live process: process_vm_readv, batched (remote ranges that touch merged
 * into one remote iovec), partial reads resumed after the vec that failed. No ptrace stop is
 * needed; the kernel checks the same permission as PTRACE_ATTACH.
 */
#include "pyrsprof/memreader.h"

#include <errno.h>
#include <stdint.h>
#include <sys/uio.h>

#include "util/banned.h"

#define MAX_IOV 1024

static int pid_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	pid_t pid = (pid_t)(intptr_t)ctx;
	struct iovec l = { buf, len }, r = { (void *)(uintptr_t)addr, len };
	ssize_t got;

	if (len == 0)
		return 0;
	got = process_vm_readv(pid, &l, 1, &r, 1, 0);
	if (got == (ssize_t)len)
		return 0;
	if (got < 0 && errno == ESRCH)
		return -ESRCH;
	if (got < 0 && errno == EPERM)
		return -EPERM;
	return -EFAULT;
}

/* Reads vecs; a remote range that continues the previous one is merged into one remote iovec
 * (one page-pinning pass in the kernel instead of one per vec). */
static int pid_readv(void *ctx, struct prs_memvec *v, size_t n)
{
	pid_t pid = (pid_t)(intptr_t)ctx;
	struct iovec l[MAX_IOV], r[MAX_IOV];
	size_t i = 0, done = 0;

	while (i < n) {
		size_t k, nr = 0, cnt = n - i < MAX_IOV ? n - i : MAX_IOV;
		ssize_t got;

		for (k = 0; k < cnt; k++) {
			l[k].iov_base = v[i + k].buf;
			l[k].iov_len = v[i + k].len;
			if (nr && (uint64_t)(uintptr_t)r[nr - 1].iov_base + r[nr - 1].iov_len == v[i + k].addr) {
				r[nr - 1].iov_len += v[i + k].len;
				continue;
			}
			r[nr].iov_base = (void *)(uintptr_t)v[i + k].addr;
			r[nr].iov_len = v[i + k].len;
			nr++;
		}
		got = process_vm_readv(pid, l, cnt, r, nr, 0);
		if (got < 0) {
			if (errno == ESRCH)
				return -ESRCH;
			/* the first vec failed: mark it and go on after it */
			v[i].res = -EFAULT;
			i++;
			continue;
		}
		/* got bytes were read in order; the vec where it stopped failed (or is partial) */
		for (k = 0; k < cnt; k++) {
			if ((size_t)got >= v[i + k].len) {
				got -= (ssize_t)v[i + k].len;
				v[i + k].res = 0;
				done++;
			} else {
				break;
			}
		}
		if (k < cnt) {
			v[i + k].res = -EFAULT;
			k++;
		}
		i += k;
	}
	return (int)done;
}

void prs_memreader_pid(struct prs_memreader *mr, pid_t pid)
{
	mr->read = pid_read;
	mr->readv = pid_readv;
	mr->ctx = (void *)(intptr_t)pid;
}
