/* SPDX-License-Identifier: MIT */
/*
 * The per-sample page cache (src/proc/pagecache.c) against a mock target (the
 * py_image.h image, filled with a pattern): a 1 MiB buffer with one unreadable page, whose reader
 * counts calls, vecs and bytes. The truth:
 * every byte served equals the target's bytes at that moment of the sample; a sample that reads
 * what the last one read costs one readv of exactly those 64-byte lines; a failed page stays
 * failed within the sample and is tried again in the next.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pyrsprof/pagecache.h"
#include "py_image.h"

#include "util/banned.h"

#define BASE 0x20000000ull
#define SIZE (1u << 20)
#define HOLE (BASE + 7 * 4096ull) /* this page cannot be read */

static struct prs_pagecache pc;
static uint64_t syscalls;

static void setup(void)
{
	struct prs_memreader mr;

	img_init(BASE, SIZE);
	for (size_t i = 0; i < SIZE; i++)
		img.mem[i] = (uint8_t)(i * 7 + (i >> 12));
	img.hole[0] = HOLE;
	mr = img_reader();
	syscalls = 0;
	cr_assert_eq(prs_pagecache_init(&pc, &mr, &syscalls), 0);
}

static void teardown(void)
{
	prs_pagecache_release(&pc);
	img_release();
}

static void zero_counts(void) { img.reads = img.readvs = img.vecs = 0; img.bytes = 0; }

/* Reads len bytes at addr through the cache and checks them against the target. */
static void read_ok(uint64_t addr, size_t len)
{
	uint8_t buf[8192];

	cr_assert_leq(len, sizeof(buf));
	cr_assert_eq(prs_pagecache_read(&pc, addr, buf, len), 0, "read %#llx+%zu", (unsigned long long)addr, len);
	cr_assert_eq(memcmp(buf, img_at(addr), len), 0, "bytes at %#llx", (unsigned long long)addr);
}

/* One sample of the same dependent reads: 3 objects on 2 pages, one crossing into the third. */
static void the_reads(void)
{
	read_ok(BASE + 0x1010, 40);
	read_ok(BASE + 0x1f00, 8);
	read_ok(BASE + 0x3ff0, 32); /* crosses from page 3 into page 4 */
}

TestSuite(pagecache, .init = setup, .fini = teardown);

Test(pagecache, next_sample_is_one_readv_of_exact_lines)
{
	prs_pagecache_begin(&pc);
	zero_counts();
	the_reads();
	prs_pagecache_end(&pc);
	cr_assert_eq(img.reads, 3, "first sample: one whole-page read per page, on demand");
	cr_assert_eq(img.readvs, 0);
	zero_counts();
	prs_pagecache_begin(&pc);
	cr_assert_eq(img.readvs, 1);
	cr_assert_eq(img.reads, 0);
	/* page 1: lines 0x1000-0x1040 and 0x1f00-0x1f40 in one range; page 3: 0x3fc0-0x4000;
	 * page 4: 0x4000-0x4040 */
	cr_assert_eq(img.vecs, 3);
	cr_assert_eq(img.bytes, (0xf40 - 0x000) + 64 + 64, "exact 64-byte lines, %zu bytes", img.bytes);
	the_reads();
	prs_pagecache_end(&pc);
	cr_assert_eq(img.reads, 0, "every read was served by the working set");
	cr_assert_eq(img.readvs, 1);
}

Test(pagecache, bytes_are_of_this_sample)
{
	prs_pagecache_begin(&pc);
	the_reads();
	prs_pagecache_end(&pc);
	/* the target writes between samples: the next one sees the new bytes */
	memset(img.mem + 0x1010, 0xab, 40);
	memset(img.mem + 0x3ff0, 0xcd, 32);
	prs_pagecache_begin(&pc);
	the_reads();
	prs_pagecache_end(&pc);
	/* warm (before a stop) reads and keeps nothing: the sample after it still reads fresh */
	zero_counts();
	prs_pagecache_warm(&pc);
	cr_assert_eq(img.readvs, 1);
	cr_assert_eq(img.vecs, 3, "the working set's vecs, as begin reads them");
	memset(img.mem + 0x1f00, 0xef, 8);
	zero_counts();
	prs_pagecache_begin(&pc);
	the_reads();
	prs_pagecache_end(&pc);
	cr_assert_eq(img.readvs, 1);
	cr_assert_eq(img.reads, 0);
}

/*
 * A split sample (prs_pagecache_split): the walk's reads (the_reads) before the split, the
 * naming's after, on two pages of their own (0x9000, 0xa000) and on page 1, which the walk read
 * too. The next begin loads the walk's lines only, page 1's with the naming's bytes there; the
 * naming's own pages come in one readv at the first read after the next split, with the bytes
 * of that moment.
 */
static void naming_reads(void)
{
	read_ok(BASE + 0x9100, 16);
	read_ok(BASE + 0xa200, 16);
	read_ok(BASE + 0x1800, 8); /* page 1: the walk read it too */
}

Test(pagecache, split_sample_loads_its_second_part_after_the_split)
{
	for (int k = 0; k < 3; k++) {
		zero_counts();
		prs_pagecache_begin(&pc);
		if (k) {
			/* page 1: 0x1000-0x1040, 0x1800-0x1840 and 0x1f00-0x1f40 as one range;
			 * pages 3 and 4 */
			cr_assert_eq(img.readvs, 1);
			cr_assert_eq(img.vecs, 3, "the first part's pages only (%zu vecs)", img.vecs);
			cr_assert_eq(img.bytes, 0xf40 + 64 + 64, "%zu bytes", img.bytes);
		}
		the_reads();
		prs_pagecache_split(&pc);
		cr_assert_eq(img.readvs, k ? 1 : 0, "the split reads nothing");
		/* the target runs between the parts: the naming sees its bytes as they are then */
		memset(img.mem + 0x9100, 0x10 + k, 16);
		naming_reads();
		prs_pagecache_end(&pc);
		if (k) {
			cr_assert_eq(img.readvs, 2, "one readv for the second part");
			cr_assert_eq(img.reads, 0, "every read was served by the two readvs");
		}
	}
	/* a sample not split loads both parts at its begin (as every sample before this one) */
	zero_counts();
	prs_pagecache_begin(&pc);
	the_reads();
	naming_reads();
	prs_pagecache_end(&pc);
	cr_assert_eq(img.readvs, 1);
	cr_assert_eq(img.reads, 2, "the second part, dropped by a begin without a split, read again");
	zero_counts();
	prs_pagecache_begin(&pc);
	cr_assert_eq(img.vecs, 5, "the next begin loads all of it");
	the_reads();
	naming_reads();
	prs_pagecache_end(&pc);
	cr_assert_eq(img.reads, 0);
}

Test(pagecache, outside_the_lines_reads_the_page)
{
	prs_pagecache_begin(&pc);
	the_reads();
	prs_pagecache_end(&pc);
	prs_pagecache_begin(&pc);
	zero_counts();
	read_ok(BASE + 0x1f80, 16); /* page 1, past its loaded range (0x000-0xf40) */
	cr_assert_eq(img.reads, 1, "reads %u", img.reads);
	cr_assert_eq(img.bytes, 4096);
	the_reads(); /* page 1 now whole: the rest from memory */
	cr_assert_eq(img.reads, 1);
	prs_pagecache_end(&pc);
}

Test(pagecache, unreadable_page_fails_once_per_sample)
{
	uint8_t b[16];

	prs_pagecache_begin(&pc);
	zero_counts();
	cr_assert_eq(prs_pagecache_read(&pc, HOLE + 64, b, 16), -EFAULT);
	cr_assert_eq(prs_pagecache_read(&pc, HOLE + 128, b, 16), -EFAULT);
	cr_assert_eq(img.reads, 1, "the second read knows the page is bad");
	/* a read that starts on a good page and ends on the bad one fails too */
	cr_assert_eq(prs_pagecache_read(&pc, HOLE - 8, b, 16), -EFAULT);
	read_ok(BASE + 0x1010, 8);
	prs_pagecache_end(&pc);
	zero_counts();
	prs_pagecache_begin(&pc);
	cr_assert_eq(img.readvs, 1);
	cr_assert_eq(prs_pagecache_read(&pc, HOLE + 64, b, 16), -EFAULT);
	cr_assert_eq(img.reads, 1, "tried again in the next sample");
	prs_pagecache_end(&pc);
	/* a working set whose page became unreadable: the read fails, it does not serve old bytes */
	prs_pagecache_begin(&pc);
	read_ok(BASE + 0x6010, 8); /* page 6 */
	prs_pagecache_end(&pc);
	img.hole[1] = BASE + 0x6000;
	prs_pagecache_begin(&pc);
	cr_assert_eq(prs_pagecache_read(&pc, BASE + 0x6010, b, 8), -EFAULT);
	prs_pagecache_end(&pc);
	img.hole[1] = 0;
	prs_pagecache_begin(&pc);
	read_ok(BASE + 0x6010, 8);
	prs_pagecache_end(&pc);
}

Test(pagecache, process_gone)
{
	uint8_t b[8];

	prs_pagecache_begin(&pc);
	the_reads();
	prs_pagecache_end(&pc);
	img.gone = true;
	prs_pagecache_begin(&pc); /* the working set fails: nothing is served from it */
	cr_assert_eq(prs_pagecache_read(&pc, BASE + 0x1010, b, 8), -ESRCH);
	prs_pagecache_end(&pc);
}

Test(pagecache, more_pages_than_slots)
{
	/* 200 pages in one sample (the cache has 128 slots): every read still right */
	for (int round = 0; round < 3; round++) {
		prs_pagecache_begin(&pc);
		for (unsigned p = 0; p < 200; p++) {
			if (BASE + p * 4096ull == HOLE)
				continue;
			read_ok(BASE + p * 4096ull + (p % 60) * 64, 24);
		}
		read_ok(BASE + 5 * 4096ull + 100, 24);
		prs_pagecache_end(&pc);
		img.mem[(round * 4096) + 77] ^= 0xff;
	}
}

/* ---- guards: words read before and after the working set (a running target's top frame) ---- */

#define GUARD (BASE + 0x1800) /* a word on a page of the working set, not read by the_reads */

static struct prs_memreader plain;
static unsigned write_after; /* the vec after which the target writes the guard word (0: never) */

/* The target runs while a readv is served: after vec write_after, it writes the guard word. */
static int running_readv(void *ctx, struct prs_memvec *v, size_t n)
{
	int a, b;

	if (!write_after || write_after >= n)
		return plain.readv(ctx, v, n);
	a = plain.readv(ctx, v, write_after);
	img_put64(GUARD, img_get64(GUARD) + 1);
	img.readvs--; /* (one call of ours) */
	b = plain.readv(ctx, v + write_after, n - write_after);
	return a < 0 ? a : b < 0 ? b : a + b;
}

/* One sample of the_reads with the guard at addr asked before it. */
static void guarded_sample(uint64_t addr)
{
	prs_pagecache_guard(&pc, &addr, 1);
	zero_counts();
	prs_pagecache_begin(&pc);
	cr_assert_eq(img.readvs, 1, "the guards ride in the working set's readv");
	the_reads();
	prs_pagecache_end(&pc);
	cr_assert_eq(img.reads, 0);
}

Test(pagecache, guard_is_read_first_and_last)
{
	uint64_t v = 0;

	plain = pc.mr;
	pc.mr.readv = running_readv;
	prs_pagecache_begin(&pc);
	the_reads();
	prs_pagecache_end(&pc);
	guarded_sample(GUARD);
	cr_assert_eq(img.vecs, 3 + 1, "the working set's 3 vecs (page 1's holds the guard: its first "
				      "read, the range read first) and the guard's last read");
	cr_assert(prs_pagecache_guard_steady(&pc, &v, 1));
	cr_assert_eq(v, img_get64(GUARD));
	cr_assert_not(prs_pagecache_guard_steady(&pc, &v, 2), "asked for 1 word");
	/* the target writes it after the first vec: the two reads differ */
	write_after = 1;
	guarded_sample(GUARD);
	cr_assert_not(prs_pagecache_guard_steady(&pc, &v, 1));
	/* ... or after the last vec of the working set, before the guard's second read */
	write_after = 3;
	guarded_sample(GUARD);
	cr_assert_not(prs_pagecache_guard_steady(&pc, &v, 1));
	/* a guard no vec of the working set holds (page 2) is read on its own, first and last */
	write_after = 0;
	guarded_sample(BASE + 0x2008);
	cr_assert_eq(img.vecs, 3 + 2);
	cr_assert(prs_pagecache_guard_steady(&pc, &v, 1));
	cr_assert_eq(v, img_get64(BASE + 0x2008));
	img_put64(BASE + 0x2008, 77);
	for (write_after = 1; write_after <= 4; write_after += 3) {
		uint64_t was = img_get64(GUARD);

		guarded_sample(BASE + 0x2008);
		cr_assert_not(prs_pagecache_guard_moved(&pc, 0), "not the word written");
		cr_assert_eq(img_get64(GUARD), was + 1);
	}
	/* ... and written before its last read */
	for (write_after = 1; write_after <= 3; write_after += 2) {
		guarded_sample(GUARD);
		cr_assert(prs_pagecache_guard_moved(&pc, 0), "written after vec %u", write_after);
	}
	/* a begin clears the guards: the next one has none */
	write_after = 0;
	zero_counts();
	prs_pagecache_begin(&pc);
	prs_pagecache_end(&pc);
	cr_assert_eq(img.vecs, 3);
	cr_assert_not(prs_pagecache_guard_steady(&pc, &v, 1));
}

/* A range guarded after a word: read first and last too; "moved" when the target wrote in it
 * while the readv ran (how the CPython reader sees its GIL holder run), the word still steady. */
Test(pagecache, guard_range_moves_when_written_between_its_reads)
{
	uint64_t w = GUARD + 64, v = 0;
	int k;

	plain = pc.mr;
	pc.mr.readv = running_readv;
	prs_pagecache_begin(&pc);
	the_reads();
	prs_pagecache_end(&pc);
	for (write_after = 0; write_after <= 2; write_after += 2) { /* (after page 1's vec: both first reads) */
		prs_pagecache_guard(&pc, &w, 1);
		k = prs_pagecache_guard_range(&pc, GUARD - 8, 16); /* the written word is its second */
		cr_assert_eq(k, 1);
		zero_counts();
		prs_pagecache_begin(&pc);
		cr_assert_eq(img.readvs, 1);
		cr_assert_eq(img.vecs, 3 + 2, "the working set's 3 vecs (page 1's holds both: their first "
					      "reads), the word's and the range's last reads");
		the_reads();
		prs_pagecache_end(&pc);
		cr_assert(prs_pagecache_guard_steady(&pc, &v, 1), "the word did not change");
		cr_assert_eq(v, img_get64(GUARD + 64));
		{
			uint64_t vv[2] = { 0 };

			/* a range is steady when none of its bytes changed: its first word then */
			cr_assert_eq(prs_pagecache_guard_steady(&pc, vv, 2), write_after == 0);
			if (write_after == 0)
				cr_assert_eq(vv[1], img_get64(GUARD - 8));
		}
		cr_assert_eq(prs_pagecache_guard_moved(&pc, 1), write_after == 2);
		cr_assert_not(prs_pagecache_guard_moved(&pc, 0));
		cr_assert_not(prs_pagecache_guard_moved(&pc, 2), "no third guard");
	}
	write_after = 0;
	/* bounded: no empty or oversized range, and no more than PRS_PAGECACHE_GUARDS in all */
	prs_pagecache_guard(&pc, &w, 1);
	cr_assert_eq(prs_pagecache_guard_range(&pc, GUARD, 0), -1);
	cr_assert_eq(prs_pagecache_guard_range(&pc, GUARD, PRS_PAGECACHE_GUARD_MAX + 8), -1);
	for (k = 1; k < (int)PRS_PAGECACHE_GUARDS; k++)
		cr_assert_eq(prs_pagecache_guard_range(&pc, GUARD, 8), k);
	cr_assert_eq(prs_pagecache_guard_range(&pc, GUARD, 8), -1);
	prs_pagecache_begin(&pc);
	prs_pagecache_end(&pc);
}

Test(pagecache, unreadable_guard_is_not_steady)
{
	uint64_t v = 0;

	prs_pagecache_begin(&pc);
	the_reads();
	prs_pagecache_end(&pc);
	guarded_sample(HOLE + 8); /* the working set is still served from the one readv */
	cr_assert_not(prs_pagecache_guard_steady(&pc, &v, 1));
	img.gone = true;
	prs_pagecache_guard(&pc, (const uint64_t[]){ GUARD }, 1);
	prs_pagecache_begin(&pc);
	prs_pagecache_end(&pc);
	cr_assert_not(prs_pagecache_guard_steady(&pc, &v, 1));
}
