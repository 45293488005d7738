/* SPDX-License-Identifier: MIT */
/*
 * The agent's reader of its own process (selfreader.h): a page cache over process_vm_readv.
 */
#include "agent/selfreader.h"

#include <errno.h>
#include <string.h>
#include <sys/uio.h>

#include "util/banned.h"

/* The cached copy of the page at page (aligned), read now if missing; NULL if unreadable. */
static const uint8_t *page_at(struct prs_selfreader *sr, uint64_t page)
{
	struct iovec l, r;
	unsigned k;

	for (k = 0; k < PRS_SELF_PAGES; k++)
		if (sr->page[k] == page)
			return sr->data[k];
	k = sr->next;
	sr->next = (k + 1) % PRS_SELF_PAGES;
	sr->page[k] = 0;
	l = (struct iovec){ sr->data[k], PRS_SELF_PAGE };
	r = (struct iovec){ (void *)(uintptr_t)page, PRS_SELF_PAGE };
	sr->syscalls++;
	if (process_vm_readv(sr->pid, &l, 1, &r, 1, 0) != (ssize_t)PRS_SELF_PAGE)
		return NULL;
	sr->page[k] = page;
	return sr->data[k];
}

static int self_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	struct prs_selfreader *sr = ctx;
	uint8_t *out = buf;

	if (addr == 0 || addr + len < addr)
		return -EFAULT;
	while (len > 0) {
		uint64_t page = addr & ~(uint64_t)(PRS_SELF_PAGE - 1), in = addr - page;
		size_t n = PRS_SELF_PAGE - in < len ? PRS_SELF_PAGE - in : len;
		const uint8_t *p = page_at(sr, page);

		if (!p)
			return -EFAULT;
		memcpy(out, p + in, n);
		out += n;
		addr += n;
		len -= n;
	}
	return 0;
}

/* Up to PRS_SELF_IOV vecs from v in one syscall; a failure is retried vec by vec. */
static void readv_some(struct prs_selfreader *sr, struct prs_memvec *v, size_t n)
{
	struct iovec l[PRS_SELF_IOV], r[PRS_SELF_IOV];
	size_t total = 0;
	ssize_t got;

	if (n == 0 || n > PRS_SELF_IOV)
		return;
	for (size_t k = 0; k < n; k++) {
		l[k] = (struct iovec){ v[k].buf, v[k].len };
		r[k] = (struct iovec){ (void *)(uintptr_t)v[k].addr, v[k].len };
		total += v[k].len;
	}
	sr->syscalls++;
	got = process_vm_readv(sr->pid, l, n, r, n, 0);
	if (got == (ssize_t)total) {
		for (size_t k = 0; k < n; k++)
			v[k].res = 0;
		return;
	}
	for (size_t k = 0; k < n; k++) {
		sr->syscalls++;
		got = process_vm_readv(sr->pid, &l[k], 1, &r[k], 1, 0);
		v[k].res = got == (ssize_t)v[k].len ? 0 : -EFAULT;
	}
}

static int self_readv(void *ctx, struct prs_memvec *v, size_t n)
{
	int done = 0;

	for (size_t i = 0; i < n; i += PRS_SELF_IOV)
		readv_some(ctx, v + i, n - i < PRS_SELF_IOV ? n - i : PRS_SELF_IOV);
	for (size_t i = 0; i < n; i++)
		done += v[i].res == 0;
	return done;
}

void prs_selfreader_init(struct prs_selfreader *sr, pid_t pid, struct prs_memreader *mr)
{
	sr->pid = pid;
	sr->next = 0;
	sr->syscalls = 0;
	memset(sr->page, 0, sizeof(sr->page));
	mr->read = self_read;
	mr->readv = self_readv;
	mr->ctx = sr;
}
