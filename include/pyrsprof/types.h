/* SPDX-License-Identifier: MIT */
/*
 * Types shared by the sampler, the unwinder, the profile model and the renderers: frame kinds,
 * thread states, a register set and a stack snapshot.
 */
#ifndef PYRSPROF_TYPES_H
#define PYRSPROF_TYPES_H

#include <stddef.h>
#include <stdint.h>

/* Hard bounds on everything read from a target: it is hostile input. */
#define PRS_MAX_NATIVE_FRAMES 256 /* native frames unwound per thread-sample */
#define PRS_MAX_PY_FRAMES 1024    /* Python frames read per thread-sample */
#define PRS_MAX_STACK_FRAMES 2048 /* frames in one merged stack */
#define PRS_MAX_NAME 1024         /* bytes of a function or file name kept */

/*
 * What a frame is. Stored as a u8 in profile.pyrs: append only, never renumber.
 * The flame graphs color by kind.
 */
enum prs_kind {
	PRS_KIND_UNKNOWN = 0, /* unsymbolized native address, or folded input without annotation */
	PRS_KIND_NATIVE = 1,  /* C or other native code */
	PRS_KIND_CPP = 2,     /* C++ (a demangled _Z name) */
	PRS_KIND_RUST = 3,    /* Rust (a demangled legacy or v0 name) */
	PRS_KIND_PYTHON = 4,  /* a Python function */
	PRS_KIND_KERNEL = 5,  /* kernel code */
	PRS_KIND_OFF_IO = 6,  /* off-CPU leaf: blocked in IO (read, write, poll, ...) */
	PRS_KIND_OFF_LOCK = 7,  /* off-CPU leaf: futex / lock wait */
	PRS_KIND_OFF_GIL = 8,   /* off-CPU leaf: waiting for the GIL */
	PRS_KIND_OFF_SLEEP = 9, /* off-CPU leaf: sleep (nanosleep, clock_nanosleep, pause) */
	PRS_KIND_OFF_OTHER = 10, /* off-CPU leaf: another blocking syscall */
	PRS_KIND_THREAD = 11,    /* a synthetic root frame naming a thread (per-thread views) */
	PRS_KIND_PROCESS = 12,   /* a synthetic root frame naming a process */
	PRS_KIND__COUNT
};

/* Returns a short lower-case name for kind ("python", "rust", "off-io", ...); never NULL. */
const char *prs_kind_name(enum prs_kind kind);

/* Thread state of one sample. Stored as a u8 in profile.pyrs: append only. */
enum prs_state {
	PRS_STATE_RUNNING = 0, /* on CPU or runnable */
	PRS_STATE_BLOCKED = 1, /* blocked in a syscall (see the syscall number) */
	PRS_STATE_DISK = 2,    /* uninterruptible sleep (D state), usually IO */
	PRS_STATE_STOPPED = 3, /* job-control stopped */
	PRS_STATE_UNKNOWN = 4,
	PRS_STATE_RUNQUEUE = 5, /* runnable but waiting for a CPU (its CPU time did not advance) */
};

/*
 * x86_64 registers in DWARF numbering, which libdw and libunwind both use:
 * rax rdx rcx rbx rsi rdi rbp rsp r8..r15 (0..15), rip (16, the return-address column).
 */
enum {
	PRS_REG_RAX = 0, PRS_REG_RDX, PRS_REG_RCX, PRS_REG_RBX, PRS_REG_RSI, PRS_REG_RDI,
	PRS_REG_RBP, PRS_REG_RSP, PRS_REG_R8, PRS_REG_R9, PRS_REG_R10, PRS_REG_R11,
	PRS_REG_R12, PRS_REG_R13, PRS_REG_R14, PRS_REG_R15, PRS_REG_RIP,
	PRS_NREGS
};

struct prs_regs {
	uint64_t r[PRS_NREGS]; /* DWARF order, above */
	uint64_t orig_rax;     /* syscall number when stopped in/after a syscall, else (u64)-1 */
	uint64_t fs_base;      /* thread pointer: glibc's pthread_t on x86_64 */
};

/*
 * A copy of the top of a thread's stack, taken while the thread was stopped.
 * data[0] is the byte at target address base (the stack pointer); len may be shorter than asked
 * for (process_vm_readv stops at the end of the mapping). Borrowed: the sampler owns data.
 */
struct prs_snapshot {
	uint64_t base;
	size_t len;
	const uint8_t *data;
};

#endif
