/* SPDX-License-Identifier: MIT */
/*
 * Target memory reads for the CPython reader: a memreader over process_vm_readv (batched, partial
 * reads resumed after the failing vec) and the per-sample page cache in front of it, which turns
 * the many small dependent reads of a stack walk into few page reads, and lets the walk prefetch
 * the pages of all code objects of a stack in one syscall.
 */
#include "python/python-internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
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

static int pid_readv(void *ctx, struct prs_memvec *v, size_t n)
{
	pid_t pid = (pid_t)(intptr_t)ctx;
	struct iovec l[MAX_IOV], r[MAX_IOV];
	size_t i = 0, done = 0;

	while (i < n) {
		size_t k, cnt = n - i < MAX_IOV ? n - i : MAX_IOV;
		ssize_t got;

		for (k = 0; k < cnt; k++) {
			l[k].iov_base = v[i + k].buf;
			l[k].iov_len = v[i + k].len;
			r[k].iov_base = (void *)(uintptr_t)v[i + k].addr;
			r[k].iov_len = v[i + k].len;
		}
		got = process_vm_readv(pid, l, cnt, r, cnt, 0);
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

/* ---- page cache ---- */

static unsigned slot_of(uint64_t page)
{
	uint64_t h = (page >> 12) * 0x9e3779b97f4a7c15ull;

	return (unsigned)(h >> 57) % PRS_PY_NPAGES; /* 7 bits */
}

void prs_py_pc_reset(struct prs_py_pagecache *pc)
{
	memset(pc->tag, 0, sizeof(pc->tag));
}

static int load_page(struct prs_py_pagecache *pc, uint64_t page, const uint8_t **out)
{
	unsigned s = slot_of(page);
	int rc;

	if (pc->tag[s] == (page | 1)) {
		if (pc->bad[s])
			return -EFAULT;
		*out = pc->data[s];
		return 0;
	}
	if (pc->syscalls)
		(*pc->syscalls)++;
	rc = pc->mr.read(pc->mr.ctx, page, pc->data[s], PRS_PY_PAGE);
	if (rc == -ESRCH)
		return rc;
	pc->tag[s] = page | 1;
	pc->bad[s] = rc != 0;
	if (rc)
		return -EFAULT;
	*out = pc->data[s];
	return 0;
}

int prs_py_pc_read(struct prs_py_pagecache *pc, uint64_t addr, void *buf, size_t len)
{
	uint8_t *dst = buf;

	if (addr == 0 || addr + len < addr)
		return -EFAULT;
	if (!pc->data) { /* no cache: read directly */
		if (pc->syscalls)
			(*pc->syscalls)++;
		return pc->mr.read(pc->mr.ctx, addr, buf, len);
	}
	while (len) {
		uint64_t page = addr & ~(uint64_t)(PRS_PY_PAGE - 1);
		size_t off = addr - page, chunk = PRS_PY_PAGE - off;
		const uint8_t *d;
		int rc;

		if (chunk > len)
			chunk = len;
		rc = load_page(pc, page, &d);
		if (rc)
			return rc;
		memcpy(dst, d + off, chunk);
		dst += chunk;
		addr += chunk;
		len -= chunk;
	}
	return 0;
}

void prs_py_pc_prefetch(struct prs_py_pagecache *pc, const uint64_t *addrs, size_t n, size_t len)
{
	struct prs_memvec v[64];
	unsigned slots[64];
	size_t nv = 0, i, k;

	if (!pc->data || !pc->mr.readv)
		return;
	for (i = 0; i < n && nv < 64; i++) {
		uint64_t page, last;

		if (!addrs[i] || addrs[i] + len < addrs[i])
			continue;
		last = (addrs[i] + len - 1) & ~(uint64_t)(PRS_PY_PAGE - 1);
		for (page = addrs[i] & ~(uint64_t)(PRS_PY_PAGE - 1); page <= last && nv < 64;
		     page += PRS_PY_PAGE) {
			unsigned s = slot_of(page);
			bool dup = false;

			if (pc->tag[s] == (page | 1))
				continue;
			for (k = 0; k < nv; k++)
				if (slots[k] == s)
					dup = true; /* same slot twice in one batch: leave it to a plain read */
			if (dup)
				continue;
			v[nv].addr = page;
			v[nv].buf = pc->data[s];
			v[nv].len = PRS_PY_PAGE;
			v[nv].res = 0;
			slots[nv++] = s;
		}
	}
	if (!nv)
		return;
	if (pc->syscalls)
		(*pc->syscalls)++;
	if (pc->mr.readv(pc->mr.ctx, v, nv) < 0)
		return;
	for (k = 0; k < nv; k++) {
		pc->tag[slots[k]] = v[k].addr | 1;
		pc->bad[slots[k]] = v[k].res != 0;
	}
}
