/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the working-set reads of --wss (src/classify/wss.c) on this process: after a
 * clear, the pages first touched are counted as referenced, pages touched again no more than
 * were touched (as far as the platform sets their accessed bits again), and pages not touched
 * are not.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "pyrsprof/wss.h"

#include "util/banned.h"

#define MIB (1ull << 20)

Test(wss, touched_pages_are_referenced_after_a_clear)
{
	size_t len = 64 * MIB;
	volatile uint8_t *buf = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	volatile uint8_t *fresh = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint64_t quiet, retouched, touched;

	cr_assert(buf != MAP_FAILED && fresh != MAP_FAILED);
	memset((void *)buf, 1, len); /* resident, referenced */
	cr_assert_eq(prs_wss_clear(getpid()), 0);
	cr_assert_eq(prs_wss_referenced(getpid(), &quiet), 0);
	/* the buffer is resident but untouched since the clear: not in the working set */
	cr_assert_lt(quiet, 32 * MIB, "%llu", (unsigned long long)quiet);
	/* Pages touched again after the clear are counted as far as the platform sets their
	 * accessed bits again, which not every one does: the clear leaves the TLB's entries (kernel
	 * 6.18 here: 16 MiB read as 10-11.6, 64 MiB as 58-63.3), and this VM's hypervisor (a PVM
	 * guest, its page tables shadowed) at times set none (0 of 64 MiB in 10 of 10 runs at one
	 * time on Dec 8, all of them in most runs an hour later).
	 * Never much more than what was touched: the whole process is read, and at load 15 on
	 * Dec 8 it read 71.2 MiB for these 64 (2 of 6 runs; 68.4 was allowed: the process's own
	 * pages around the touches, as the probe's reading of its own mapping shows). */
	for (size_t i = 0; i < len; i += 4096)
		buf[i]++;
	cr_assert_eq(prs_wss_referenced(getpid(), &retouched), 0);
	cr_assert_leq(retouched, quiet + len + 12 * MIB, "%llu after, %llu before",
		      (unsigned long long)retouched, (unsigned long long)quiet);
	/* pages first touched after the clear always are: their entries are made with the bit set */
	for (size_t i = 0; i < len; i += 4096)
		fresh[i] = 1;
	cr_assert_eq(prs_wss_referenced(getpid(), &touched), 0);
	cr_assert_geq(touched, retouched + len - MIB, "%llu after, %llu before",
		      (unsigned long long)touched, (unsigned long long)retouched);
	/* prs_wss_probe does the same on its own 64 MiB (clearing the bits again: so it comes last);
	 * this VM may answer either way from one try to the next (2 of 5 runs differed from the
	 * figure above), so only its own figures are checked */
	{
		uint64_t again = UINT64_MAX, of = 0;
		int probe = prs_wss_probe(&again, &of);

		cr_assert_eq(of, 64 * MIB);
		cr_assert(probe == 0 || probe == 1, "%d", probe);
		cr_assert_leq(again, of + 4 * MIB);
		cr_assert_eq(probe, again >= of / 2);
	}
	munmap((void *)buf, len);
	munmap((void *)fresh, len);
}

Test(wss, a_gone_process_is_an_error)
{
	uint64_t b;

	cr_assert_eq(prs_wss_clear(0x7ffffff0), -ENOENT);
	cr_assert_eq(prs_wss_referenced(0x7ffffff0, &b), -ENOENT);
}

Test(wss, windows_of_a_thread)
{
	struct prs_wss *w = NULL;
	struct prs_wss_result r;

	size_t len = 64 * MIB;
	volatile uint8_t *buf = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct timespec t0, now;

	cr_assert(buf != MAP_FAILED);
	cr_assert_eq(prs_wss_start(getpid(), 20000000, 30000000, &w), 0);
	/* 150 ms of touching 64 MiB, far past the TLB's reach, so that every window sees pages
	 * touched (a process that only sleeps may touch nothing the TLB does not already map, and
	 * read as 0 bytes: see touched_pages_are_referenced_after_a_clear); a fresh page each pass
	 * too, for a platform that sets no accessed bit again after a clear */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		for (size_t i = 0; i < len; i += 4096)
			buf[i]++;
		madvise((void *)buf, 4096, MADV_DONTNEED); /* its first page faults again */
		clock_gettime(CLOCK_MONOTONIC, &now);
	} while ((now.tv_sec - t0.tv_sec) * 1000000000ll + (now.tv_nsec - t0.tv_nsec) < 150000000ll);
	prs_wss_stop(w, &r);
	munmap((void *)buf, len);
	cr_assert_geq(r.samples, 2);
	cr_assert_eq(r.window_ns, 20000000);
	cr_assert_gt(r.max_bytes, 0);
	cr_assert(r.median_bytes > 0 && r.median_bytes <= r.max_bytes);
	cr_assert_eq(r.err, 0);
}
