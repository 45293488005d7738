/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the futex words counted per (thread, word) for the WAIT_ADDR records
 * (src/sample/waits.c): counts against a reference count kept by the test, the GIL mark, the order
 * of first sight across growth, the same word of two threads kept apart, and the bound.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>

#include "sample/waits-internal.h"

#include "util/banned.h"

Test(sample_waits, counts_per_thread_and_word)
{
	struct prs_waits w;

	prs_waits_init(&w);
	cr_assert_eq(w.n, 0);
	/* two threads on the GIL's word, one of them also on a lock */
	for (int i = 0; i < 30; i++) {
		cr_assert_eq(prs_waits_add(&w, 11, 0x7f0000001048, true), 0);
		cr_assert_eq(prs_waits_add(&w, 12, 0x7f0000001048, true), 0);
		if (i % 3 == 0)
			cr_assert_eq(prs_waits_add(&w, 12, 0x5600000020a0, false), 0);
	}
	cr_assert_eq(w.n, 3);
	cr_assert_eq(w.v[0].tid, 11);
	cr_assert_eq(w.v[0].samples, 30);
	cr_assert(w.v[0].gil);
	cr_assert_eq(w.v[1].tid, 12);
	cr_assert_eq(w.v[1].uaddr, 0x7f0000001048);
	cr_assert_eq(w.v[1].samples, 30);
	cr_assert_eq(w.v[2].uaddr, 0x5600000020a0);
	cr_assert_eq(w.v[2].samples, 10);
	cr_assert(!w.v[2].gil);
	/* a word once seen as the GIL's stays marked */
	prs_waits_add(&w, 12, 0x5600000020a0, true);
	prs_waits_add(&w, 12, 0x5600000020a0, false);
	cr_assert(w.v[2].gil);
	cr_assert_eq(w.v[2].samples, 12);
	prs_waits_release(&w);
	cr_assert_eq(w.n, 0);
	cr_assert_null(w.v);
}

Test(sample_waits, growth_keeps_order_and_counts)
{
	struct prs_waits w;
	unsigned seed = 12345, n = 5000;
	uint64_t *ref = calloc(n, sizeof(*ref));

	cr_assert(ref);
	prs_waits_init(&w);
	/* pairs (tid i % 97, word 4 * i) in order, then counted again at random */
	for (unsigned i = 0; i < n; i++) {
		cr_assert_eq(prs_waits_add(&w, (int32_t)(i % 97), 0x10000 + 4ull * i, i % 7 == 0), 0);
		ref[i]++;
	}
	for (unsigned k = 0; k < 20000; k++) {
		unsigned i;

		seed = seed * 1103515245 + 12345;
		i = (seed >> 8) % n;
		cr_assert_eq(prs_waits_add(&w, (int32_t)(i % 97), 0x10000 + 4ull * i, false), 0);
		ref[i]++;
	}
	cr_assert_eq(w.n, n);
	for (unsigned i = 0; i < n; i++) {
		cr_assert_eq(w.v[i].tid, (int32_t)(i % 97));
		cr_assert_eq(w.v[i].uaddr, 0x10000 + 4ull * i);
		cr_assert_eq(w.v[i].samples, ref[i], "entry %u: %llu, not %llu", i,
			     (unsigned long long)w.v[i].samples, (unsigned long long)ref[i]);
		cr_assert_eq(w.v[i].gil, i % 7 == 0);
	}
	cr_assert_eq(w.dropped, 0);
	prs_waits_release(&w);
	free(ref);
}

Test(sample_waits, bounded)
{
	struct prs_waits w;

	prs_waits_init(&w);
	for (unsigned i = 0; i < PRS_WAITS_MAX; i++)
		cr_assert_eq(prs_waits_add(&w, 1, 8ull * (i + 1), false), 0);
	cr_assert_eq(prs_waits_add(&w, 2, 8, false), -ENOSPC);
	cr_assert_eq(w.dropped, 1);
	cr_assert_eq(w.n, PRS_WAITS_MAX);
	/* pairs already there are still counted */
	cr_assert_eq(prs_waits_add(&w, 1, 8, false), 0);
	cr_assert_eq(w.v[0].samples, 2);
	prs_waits_release(&w);
}
