/* SPDX-License-Identifier: MIT */
/*
 * The frame pointer of a thread seen asleep from /proc, found in its stack. /proc/TID/syscall
 * gives RSP and RIP only: a frame whose CFA is RBP-based (code built with frame pointers, CPython
 * 3.12+ among them) cannot be unwound while no inner frame saved RBP on the stack, which is the
 * common case under a syscall wrapper (they do not touch RBP). At such a frame RBP points at its
 * frame record: [RBP] the caller's RBP, [RBP+8] the return address. So the record is looked for
 * from RSP up, and a candidate is kept only if the unwind from it is whole (it reaches the
 * outermost frame through CFI, END_CLEAN) and consistent: the record is used at that frame (its
 * return address is the next frame) and the call before its return address can have called that
 * frame's function (an indirect call, a call through a PLT stub, or a direct call to an address at
 * most 1 MiB below the frame's PC). The last check rejects what a function's uninitialised
 * locals hold: a stale return address of an earlier call from its caller, which is often a
 * direct call to another function (seen under a tail call: start_thread -> the agent's
 * thread_start -> jmp to the thread's function). The first record from RSP up that passes wins.
 */
#include <string.h>

#include "pyrsprof/maps.h"
#include "sample/sampler-internal.h"
#include "util/banned.h"

#define RBP_TRIES 16 /* candidate records unwound, at most, per sample */
#define NEAR_CALL (1u << 20) /* a direct call's target lies at most this far below the callee's PC */

static uint64_t word_at(const struct prs_snapshot *snap, size_t off)
{
	uint64_t v;

	memcpy(&v, snap->data + off, sizeof(v));
	return v;
}

/* True if the 16 bytes at off look like a frame record: a saved RBP that is 0 or further up
 * the stack, and a return address in executable code of a file. */
static bool looks_like_record(const struct prs_maps *maps, const struct prs_snapshot *snap,
			      size_t off)
{
	uint64_t at = snap->base + off, saved = word_at(snap, off), ra = word_at(snap, off + 8);
	const struct prs_map *m;

	if (saved != 0 && (saved <= at || (saved & 7) != 0))
		return false;
	m = prs_maps_find(maps, ra);
	return m && (m->perms & PRS_MAP_X) && m->path[0] == '/';
}

/* True if code at addr is a PLT stub: jmp *mem, possibly after endbr64 and a bnd prefix. */
static bool plt_stub(struct prs_unwinder *uw, uint64_t addr)
{
	uint8_t c[7];

	if (prs_unwinder_read(uw, addr, c, sizeof(c)) != 0)
		return false;
	if (c[0] == 0xf3 && c[1] == 0x0f && c[2] == 0x1e && c[3] == 0xfa)
		return (c[4] == 0xff && c[5] == 0x25) || (c[4] == 0xf2 && c[5] == 0xff && c[6] == 0x25);
	return (c[0] == 0xff && c[1] == 0x25) || (c[0] == 0xf2 && c[1] == 0xff && c[2] == 0x25);
}

/* True if the instruction that ends at ra can have called the function holding callee_pc: an
 * indirect call (ff /2, 2 to 7 bytes), a call to a PLT stub, or a direct call to an address at
 * most NEAR_CALL below callee_pc. */
static bool can_call(struct prs_unwinder *uw, uint64_t ra, uint64_t callee_pc)
{
	uint8_t c[7];
	int32_t rel;
	uint64_t to;

	if (ra < sizeof(c) || prs_unwinder_read(uw, ra - sizeof(c), c, sizeof(c)) != 0)
		return false;
	if (c[2] == 0xe8) {
		memcpy(&rel, &c[3], sizeof(rel));
		to = ra + (uint64_t)(int64_t)rel;
		if ((to <= callee_pc && callee_pc - to < NEAR_CALL) || plt_stub(uw, to))
			return true;
	}
	for (int len = 2; len <= 7; len++)
		if (c[7 - len] == 0xff && (c[8 - len] & 0x38) == 0x10)
			return true;
	return false;
}

void prs_offcpu_guess_rbp(struct prs_unwinder *uw, struct prs_regs *regs,
			  const struct prs_snapshot *snap, uint64_t *scratch)
{
	const struct prs_maps *maps = prs_unwinder_maps(uw);
	struct prs_unwind_info info;
	uint64_t callee;
	int tries = 0, n0;

	memset(&info, 0, sizeof(info));
	regs->r[PRS_REG_RBP] = 0;
	n0 = prs_unwind(uw, regs, snap, scratch, PRS_MAX_NATIVE_FRAMES, &info);
	if (n0 <= 0 || n0 >= PRS_MAX_NATIVE_FRAMES || info.end == PRS_UNWIND_END_CLEAN ||
	    info.end == PRS_UNWIND_END_MAX || !maps)
		return;
	callee = scratch[n0 - 1]; /* the frame the unwind could not leave: RBP-based */
	for (size_t off = 0; off + 16 <= snap->len && tries < RBP_TRIES; off += 8) {
		uint64_t ra = word_at(snap, off + 8);

		if (!looks_like_record(maps, snap, off) || !can_call(uw, ra, callee))
			continue;
		tries++;
		regs->r[PRS_REG_RBP] = snap->base + off;
		memset(&info, 0, sizeof(info));
		if (prs_unwind(uw, regs, snap, scratch, PRS_MAX_NATIVE_FRAMES, &info) > n0 &&
		    info.end == PRS_UNWIND_END_CLEAN && scratch[n0 - 1] == callee && scratch[n0] == ra)
			return;
	}
	regs->r[PRS_REG_RBP] = 0;
}
