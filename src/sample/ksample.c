/* SPDX-License-Identifier: MIT */
/*
 * Decoding the kernel-stack events' sample records (see ksample-internal.h for the layout and what
 * is checked).
 */
#include "sample/ksample-internal.h"

#include <asm/perf_regs.h>
#include <linux/perf_event.h>
#include <string.h>

#include "util/banned.h"

#define UNWIND_MASK ((1ull << PERF_REG_X86_AX) | (1ull << PERF_REG_X86_BX) | \
		     (1ull << PERF_REG_X86_CX) | (1ull << PERF_REG_X86_DX) | \
		     (1ull << PERF_REG_X86_SI) | (1ull << PERF_REG_X86_DI) | \
		     (1ull << PERF_REG_X86_BP) | (1ull << PERF_REG_X86_SP) | \
		     (1ull << PERF_REG_X86_IP) | (0xffull << PERF_REG_X86_R8))

const struct prs_ksample_fmt prs_ksample_ip_only = { 1ull << PERF_REG_X86_IP, false };
const struct prs_ksample_fmt prs_ksample_unwind = { UNWIND_MASK, true };

void prs_kring_copy(const struct prs_kring *r, uint64_t off, void *dst, size_t len)
{
	uint64_t at = off & (r->size - 1);
	size_t first = len < r->size - at ? len : (size_t)(r->size - at);

	memcpy(dst, r->data + at, first);
	memcpy((uint8_t *)dst + first, r->data, len - first);
}

/* The registers of mask before bit (their index in the record). */
static unsigned regs_before(uint64_t mask, unsigned bit)
{
	return (unsigned)__builtin_popcountll(mask & ((1ull << bit) - 1));
}

/* The user stack part at off (room 8-byte words left in the record): its copy and dyn_size. */
static bool read_stack(const struct prs_kring *r, uint64_t off, uint64_t room, struct prs_ksample *k)
{
	uint64_t size, dyn;

	if (room < 1)
		return false;
	prs_kring_copy(r, off, &size, 8);
	if (size == 0)
		return true; /* (no user stack to copy: a kernel thread) */
	/* the copy, then dyn_size: the kernel writes size as a multiple of 8 */
	if (size % 8 || size / 8 + 2 > room)
		return false;
	prs_kring_copy(r, off + 8 + size, &dyn, 8);
	if (dyn > size)
		return false;
	k->stack_off = off + 8;
	k->stack_len = dyn;
	return true;
}

bool prs_ksample_read(const struct prs_kring *r, uint64_t off, uint32_t len,
		      const struct prs_ksample_fmt *fmt, struct prs_ksample *k)
{
	size_t hdr = sizeof(struct perf_event_header);
	uint64_t v[3], abi = 0, room, at;
	unsigned nregs = (unsigned)__builtin_popcountll(fmt->regs_mask);

	memset(k, 0, sizeof(*k));
	if (len < hdr + sizeof(v) || len % 8)
		return false;
	prs_kring_copy(r, off + hdr, v, sizeof(v));
	k->ip = v[0];
	k->time = v[1];
	k->nr = v[2];
	room = (len - hdr - sizeof(v)) / 8; /* 8-byte words after nr */
	if (k->nr >= room)
		return false; /* (the ABI word follows the chain) */
	k->chain_off = off + hdr + sizeof(v);
	at = k->chain_off + 8 * k->nr;
	room -= k->nr;
	prs_kring_copy(r, at, &abi, 8);
	at += 8;
	room--;
	if (abi != PERF_SAMPLE_REGS_ABI_NONE) {
		if (nregs > room)
			return false;
		k->regs_off = at;
		if (fmt->regs_mask & (1ull << PERF_REG_X86_IP))
			prs_kring_copy(r, at + 8 * regs_before(fmt->regs_mask, PERF_REG_X86_IP),
				       &k->user_ip, 8);
		at += 8ull * nregs;
		room -= nregs;
	}
	return !fmt->stack_user || read_stack(r, at, room, k);
}

/* perf's x86 register numbers (asm/perf_regs.h) to DWARF's (PRS_REG_*), -1: not kept */
static int dwarf_of(unsigned bit)
{
	static const int map[] = {
		[PERF_REG_X86_AX] = PRS_REG_RAX, [PERF_REG_X86_BX] = PRS_REG_RBX,
		[PERF_REG_X86_CX] = PRS_REG_RCX, [PERF_REG_X86_DX] = PRS_REG_RDX,
		[PERF_REG_X86_SI] = PRS_REG_RSI, [PERF_REG_X86_DI] = PRS_REG_RDI,
		[PERF_REG_X86_BP] = PRS_REG_RBP, [PERF_REG_X86_SP] = PRS_REG_RSP,
		[PERF_REG_X86_IP] = PRS_REG_RIP,
	};

	if (bit >= PERF_REG_X86_R8 && bit <= PERF_REG_X86_R15)
		return PRS_REG_R8 + (int)(bit - PERF_REG_X86_R8);
	return bit <= PERF_REG_X86_IP ? map[bit] : -1;
}

void prs_ksample_regs(const struct prs_kring *r, const struct prs_ksample *k, struct prs_regs *out)
{
	unsigned i = 0;

	memset(out, 0, sizeof(*out));
	out->orig_rax = (uint64_t)-1;
	if (!k->regs_off)
		return;
	for (unsigned bit = 0; bit < 64; bit++) {
		uint64_t v;
		int d;

		if (!(prs_ksample_unwind.regs_mask & (1ull << bit)))
			continue;
		prs_kring_copy(r, k->regs_off + 8ull * i++, &v, 8);
		d = dwarf_of(bit);
		if (d >= 0)
			out->r[d] = v;
	}
}
