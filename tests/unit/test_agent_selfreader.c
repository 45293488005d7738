/* SPDX-License-Identifier: MIT */
/*
 * The agent's reader of its own process (src/agent/selfreader.c), on pages of this test process
 * with a hole: bytes read right within and across pages, a read touching an unreadable page an
 * error (never a fault), pages cached (one syscall per page while it stays cached, evicted
 * round robin and read again), batched reads with a failing vec.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "agent/selfreader.h"

#include "util/banned.h"

#define PG PRS_SELF_PAGE

/* 8 pages, page 1 unreadable; page k's bytes are (k * 31 + offset) & 0xff. */
static uint8_t *pages(void)
{
	uint8_t *p = mmap(NULL, 8 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	cr_assert(p != MAP_FAILED);
	for (size_t i = 0; i < 8 * PG; i++)
		p[i] = (uint8_t)((i / PG) * 31 + i % PG);
	cr_assert_eq(mprotect(p + PG, PG, PROT_NONE), 0);
	return p;
}

static struct prs_selfreader sr;

Test(agent_selfreader, reads_within_and_across_pages_cached)
{
	uint8_t *p = pages(), buf[64];
	struct prs_memreader mr;

	prs_selfreader_init(&sr, getpid(), &mr);
	cr_assert_eq(mr.read(mr.ctx, (uintptr_t)p + 100, buf, 64), 0);
	cr_assert_eq(memcmp(buf, p + 100, 64), 0);
	cr_assert_eq(mr.read(mr.ctx, (uintptr_t)p + 3000, buf, 64), 0); /* same page: cached */
	cr_assert_eq(memcmp(buf, p + 3000, 64), 0);
	cr_assert_eq(sr.syscalls, 1);
	/* across pages 2 and 3 */
	cr_assert_eq(mr.read(mr.ctx, (uintptr_t)p + 3 * PG - 20, buf, 64), 0);
	cr_assert_eq(memcmp(buf, p + 3 * PG - 20, 64), 0);
	cr_assert_eq(sr.syscalls, 3);
	munmap(p, 8 * PG);
}

Test(agent_selfreader, unreadable_is_an_error)
{
	uint8_t *p = pages(), buf[64];
	struct prs_memreader mr;

	prs_selfreader_init(&sr, getpid(), &mr);
	cr_assert_eq(mr.read(mr.ctx, (uintptr_t)p + PG - 10, buf, 64), -EFAULT); /* into page 1 */
	cr_assert_eq(mr.read(mr.ctx, (uintptr_t)p + PG + 8, buf, 8), -EFAULT);
	cr_assert_eq(mr.read(mr.ctx, 0, buf, 8), -EFAULT);
	cr_assert_eq(mr.read(mr.ctx, UINT64_MAX - 4, buf, 8), -EFAULT);
	/* page 0 itself stays readable */
	cr_assert_eq(mr.read(mr.ctx, (uintptr_t)p + 8, buf, 8), 0);
	cr_assert_eq(memcmp(buf, p + 8, 8), 0);
	munmap(p, 8 * PG);
}

Test(agent_selfreader, evicted_pages_are_read_again)
{
	uint8_t *p = pages(), b;
	struct prs_memreader mr;
	const size_t order[] = { 0, 2, 3, 4, 5, 0, 6, 2 };

	prs_selfreader_init(&sr, getpid(), &mr);
	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
		size_t at = order[i] * PG + 7;

		cr_assert_eq(mr.read(mr.ctx, (uintptr_t)p + at, &b, 1), 0);
		cr_assert_eq(b, p[at], "page %zu", order[i]);
	}
	/* 0 2 3 4 read; 5 evicts 0; 0 evicts 2; 6 evicts 3; 2 evicts 4: every one a miss */
	cr_assert_eq(sr.syscalls, 8);
	munmap(p, 8 * PG);
}

Test(agent_selfreader, batched_reads_mark_the_failing_vec)
{
	uint8_t *p = pages();
	uint64_t a = 0, b = 0, c = 0;
	struct prs_memvec v[3] = {
		{ (uintptr_t)p + 16, &a, 8, 1 },
		{ (uintptr_t)p + PG + 16, &b, 8, 1 }, /* unreadable */
		{ (uintptr_t)p + 4 * PG + 16, &c, 8, 1 },
	};
	struct prs_memreader mr;

	prs_selfreader_init(&sr, getpid(), &mr);
	cr_assert_eq(mr.readv(mr.ctx, v, 3), 2);
	cr_assert_eq(v[0].res, 0);
	cr_assert_eq(v[1].res, -EFAULT);
	cr_assert_eq(v[2].res, 0);
	cr_assert_eq(memcmp(&a, p + 16, 8), 0);
	cr_assert_eq(memcmp(&c, p + 4 * PG + 16, 8), 0);
	munmap(p, 8 * PG);
}
