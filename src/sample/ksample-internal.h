/* SPDX-License-Identifier: MIT */
/*
 * The records of a kernel-stack event's ring (kstack.c): the ring itself, and the decoding of one
 * PERF_RECORD_SAMPLE of the layout prs_kstack_attr asks for, in order: ip, time, the callchain
 * (nr entries), the user registers' ABI and the registers of the event's mask (ascending bit
 * order), and with a user stack (ptrace mode, ksample_fmt.stack_user) its copy: size, size bytes,
 * and the bytes that hold data (dyn_size). The ring is written by the kernel, but every length in
 * it is checked against the record's own size before it is used: a record that does not add up is
 * refused, never read past. Pure logic, unit-tested in tests/unit/test_ksample.c.
 */
#ifndef PYRSPROF_SAMPLE_KSAMPLE_INTERNAL_H
#define PYRSPROF_SAMPLE_KSAMPLE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pyrsprof/types.h"

/* A perf ring's data area (size a power of 2); offsets wrap. */
struct prs_kring {
	const uint8_t *data;
	uint64_t size;
};

/* Copies len bytes at ring offset off (wrapping) to dst. len <= r->size. */
void prs_kring_copy(const struct prs_kring *r, uint64_t off, void *dst, size_t len);

/* What a sample record holds (the event's attributes). */
struct prs_ksample_fmt {
	uint64_t regs_mask;     /* sample_regs_user (asm/perf_regs.h bits) */
	bool stack_user;        /* PERF_SAMPLE_STACK_USER */
};

/* The formats of kstack.c: the user IP only (the kernel frames' match), or the registers a CFI
 * unwind needs with a copy of the user stack (ptrace mode: the CPU view's native stacks). */
extern const struct prs_ksample_fmt prs_ksample_ip_only, prs_ksample_unwind;

/* One decoded sample record; offsets are ring offsets (wrapping), valid until the ring's tail
 * moves past the record. */
struct prs_ksample {
	uint64_t ip, time, nr;  /* nr: callchain entries */
	uint64_t chain_off;     /* the first callchain entry */
	uint64_t user_ip;       /* where the user code was (0: not known, a kernel thread) */
	uint64_t regs_off;      /* the user registers, in mask order (0: none) */
	uint64_t stack_off;     /* the user stack copy (from the user SP up) */
	uint64_t stack_len;     /* its bytes that hold data (0: none) */
};

/* Decodes the record at off of len bytes (its header's size) in fmt's layout into k. Returns false
 * for one that does not add up (lengths beyond the record, a dyn_size over the copy's size). */
bool prs_ksample_read(const struct prs_kring *r, uint64_t off, uint32_t len,
		      const struct prs_ksample_fmt *fmt, struct prs_ksample *k);

/* The user registers of k (decoded with prs_ksample_unwind, regs_off set) into out, DWARF order;
 * orig_rax and fs_base are unknown (orig_rax -1, fs_base 0). */
void prs_ksample_regs(const struct prs_kring *r, const struct prs_ksample *k, struct prs_regs *out);

#endif
