/* SPDX-License-Identifier: MIT */
/*
 * The kernel-stack events' sample records (src/sample/ksample.c): records built here word by word
 * in perf's layout (linux/perf_event.h, PERF_RECORD_SAMPLE with IP, TIME, CALLCHAIN, REGS_USER and
 * STACK_USER), decoded back to the values written; records whose lengths do not add up (a
 * callchain, registers or a stack copy beyond the record, a dyn_size over the copy) refused.
 */
#include <criterion/criterion.h>
#include <asm/perf_regs.h>
#include <linux/perf_event.h>
#include <string.h>

#include "sample/ksample-internal.h"

#include "util/banned.h"

#define RING 1024 /* bytes, a power of 2 */

static uint8_t ring_bytes[RING];
static const struct prs_kring ring = { ring_bytes, RING };

/* A record being written at ring offset `at` (wrapping), word by word. */
struct rec {
	uint64_t start, at;
};

static void put(struct rec *r, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		ring_bytes[(r->at + (uint64_t)i) & (RING - 1)] = (uint8_t)(v >> (8 * i));
	r->at += 8;
}

/* Starts a sample record at off: header (size filled by end), ip, time, the callchain. */
static struct rec begin(uint64_t off, uint64_t ip, uint64_t time, const uint64_t *chain, uint64_t nr)
{
	struct rec r = { off, off };

	put(&r, 0);
	put(&r, ip);
	put(&r, time);
	put(&r, nr);
	for (uint64_t i = 0; i < nr; i++)
		put(&r, chain[i]);
	return r;
}

/* The record's length, as its header says. */
static uint32_t end(struct rec *r)
{
	struct perf_event_header h = { PERF_RECORD_SAMPLE, 0, (uint16_t)(r->at - r->start) };

	for (size_t i = 0; i < sizeof(h); i++)
		ring_bytes[(r->start + i) & (RING - 1)] = ((uint8_t *)&h)[i];
	return h.size;
}

/* The 17 registers of prs_ksample_unwind, in perf's order (AX BX CX DX SI DI BP SP IP R8..R15):
 * register k holds 0x100 + k. */
static void put_regs(struct rec *r)
{
	put(r, PERF_SAMPLE_REGS_ABI_64);
	for (uint64_t k = 0; k < 17; k++)
		put(r, 0x100 + k);
}

Test(ksample, ip_only_record_decodes_to_what_was_written)
{
	uint64_t chain[2] = { (uint64_t)PERF_CONTEXT_KERNEL, 0xffffffff81000010ull };
	struct rec r = begin(0, 0xffffffff81000010ull, 12345, chain, 2);
	struct prs_ksample k;
	uint32_t len;

	put(&r, PERF_SAMPLE_REGS_ABI_64);
	put(&r, 0x401234); /* the IP, the mask's only register */
	len = end(&r);
	cr_assert(prs_ksample_read(&ring, 0, len, &prs_ksample_ip_only, &k));
	cr_assert_eq(k.ip, 0xffffffff81000010ull);
	cr_assert_eq(k.time, 12345);
	cr_assert_eq(k.nr, 2);
	cr_assert_eq(k.chain_off, 32); /* header, ip, time, nr */
	cr_assert_eq(k.user_ip, 0x401234);
	cr_assert_eq(k.stack_len, 0);
}

Test(ksample, unwind_record_gives_registers_in_dwarf_order_and_the_stack)
{
	struct rec r = begin(0, 0x401000, 7, NULL, 0);
	struct prs_ksample k;
	struct prs_regs regs;
	uint8_t stack[64];
	uint32_t len;

	put_regs(&r);
	put(&r, 64); /* size */
	for (uint64_t i = 0; i < 8; i++)
		put(&r, 0xabc0 + i);
	put(&r, 40); /* dyn_size: 5 words hold data */
	len = end(&r);
	cr_assert(prs_ksample_read(&ring, 0, len, &prs_ksample_unwind, &k));
	cr_assert_eq(k.user_ip, 0x108); /* IP: perf's register 8 */
	cr_assert_eq(k.stack_len, 40);
	prs_ksample_regs(&ring, &k, &regs);
	cr_assert_eq(regs.r[PRS_REG_RAX], 0x100);
	cr_assert_eq(regs.r[PRS_REG_RBX], 0x101);
	cr_assert_eq(regs.r[PRS_REG_RCX], 0x102);
	cr_assert_eq(regs.r[PRS_REG_RDX], 0x103);
	cr_assert_eq(regs.r[PRS_REG_RBP], 0x106);
	cr_assert_eq(regs.r[PRS_REG_RSP], 0x107);
	cr_assert_eq(regs.r[PRS_REG_RIP], 0x108);
	cr_assert_eq(regs.r[PRS_REG_R8], 0x109);
	cr_assert_eq(regs.r[PRS_REG_R15], 0x110);
	cr_assert_eq(regs.orig_rax, (uint64_t)-1);
	prs_kring_copy(&ring, k.stack_off, stack, 16);
	cr_assert_eq(stack[0], 0xc0);
	cr_assert_eq(stack[8], 0xc1);
}

Test(ksample, a_record_across_the_end_of_the_ring_wraps)
{
	uint64_t off = RING - 48; /* the registers and the stack are past the end */
	struct rec r = begin(off, 0x401000, 9, NULL, 0);
	struct prs_ksample k;
	struct prs_regs regs;
	uint64_t word;
	uint32_t len;

	put_regs(&r);
	put(&r, 16);
	put(&r, 0x1111);
	put(&r, 0x2222);
	put(&r, 16);
	len = end(&r);
	cr_assert(prs_ksample_read(&ring, off, len, &prs_ksample_unwind, &k));
	prs_ksample_regs(&ring, &k, &regs);
	cr_assert_eq(regs.r[PRS_REG_RSP], 0x107);
	cr_assert_eq(k.stack_len, 16);
	prs_kring_copy(&ring, k.stack_off + 8, &word, 8);
	cr_assert_eq(word, 0x2222);
}

Test(ksample, a_kernel_thread_has_no_user_registers_nor_stack)
{
	struct rec r = begin(0, 0xffffffff81000000ull, 1, NULL, 0);
	struct prs_ksample k;
	uint32_t len;

	put(&r, PERF_SAMPLE_REGS_ABI_NONE);
	put(&r, 0); /* stack size 0: no copy, no dyn_size */
	len = end(&r);
	cr_assert(prs_ksample_read(&ring, 0, len, &prs_ksample_unwind, &k));
	cr_assert_eq(k.regs_off, 0);
	cr_assert_eq(k.user_ip, 0);
	cr_assert_eq(k.stack_len, 0);
}

Test(ksample, lengths_beyond_the_record_are_refused)
{
	uint64_t chain[1] = { 0xffffffff81000000ull };
	struct prs_ksample k;
	struct rec r;
	uint32_t len;

	/* a callchain longer than the record */
	r = begin(0, 1, 1, chain, 1);
	put(&r, PERF_SAMPLE_REGS_ABI_64);
	put(&r, 0x401000);
	len = end(&r);
	memcpy(ring_bytes + 24, &(uint64_t){ 1ull << 40 }, 8); /* nr */
	cr_assert_not(prs_ksample_read(&ring, 0, len, &prs_ksample_ip_only, &k));
	memcpy(ring_bytes + 24, &(uint64_t){ 2 }, 8); /* the ABI word would be past the end */
	cr_assert_not(prs_ksample_read(&ring, 0, len, &prs_ksample_ip_only, &k));
	memcpy(ring_bytes + 24, &(uint64_t){ 1 }, 8);
	cr_assert(prs_ksample_read(&ring, 0, len, &prs_ksample_ip_only, &k));
	/* registers cut short: 17 asked, 3 there */
	r = begin(0, 1, 1, NULL, 0);
	put(&r, PERF_SAMPLE_REGS_ABI_64);
	put(&r, 1);
	put(&r, 2);
	put(&r, 3);
	len = end(&r);
	cr_assert_not(prs_ksample_read(&ring, 0, len, &prs_ksample_unwind, &k));
	/* a record shorter than its fixed part, or not of whole words */
	cr_assert_not(prs_ksample_read(&ring, 0, 16, &prs_ksample_ip_only, &k));
	cr_assert_not(prs_ksample_read(&ring, 0, len - 4, &prs_ksample_unwind, &k));
}

/* A record with a stack copy of `size` bytes written, the copy's size word saying `said` and
 * dyn_size `dyn`. */
static uint32_t stack_record(uint64_t size, uint64_t said, uint64_t dyn)
{
	struct rec r = begin(0, 1, 1, NULL, 0);

	put_regs(&r);
	put(&r, said);
	for (uint64_t i = 0; i < size / 8; i++)
		put(&r, i);
	put(&r, dyn);
	return end(&r);
}

Test(ksample, a_stack_copy_that_does_not_add_up_is_refused)
{
	struct prs_ksample k;
	uint32_t len;

	len = stack_record(32, 32, 32);
	cr_assert(prs_ksample_read(&ring, 0, len, &prs_ksample_unwind, &k));
	cr_assert_eq(k.stack_len, 32);
	len = stack_record(32, 32, 33); /* dyn_size over the copy */
	cr_assert_not(prs_ksample_read(&ring, 0, len, &prs_ksample_unwind, &k));
	len = stack_record(32, 64, 8); /* a copy longer than the record */
	cr_assert_not(prs_ksample_read(&ring, 0, len, &prs_ksample_unwind, &k));
	len = stack_record(32, 1ull << 62, 8); /* (no overflow in the bound) */
	cr_assert_not(prs_ksample_read(&ring, 0, len, &prs_ksample_unwind, &k));
	len = stack_record(32, 28, 8); /* not of whole words */
	cr_assert_not(prs_ksample_read(&ring, 0, len, &prs_ksample_unwind, &k));
}
