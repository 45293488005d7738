/* SPDX-License-Identifier: MIT */
/*
 * Fault-tolerant copies (safecopy.h): one copy instruction whose faults the agent's SIGSEGV and
 * SIGBUS handler turns into an error return.
 */
#include "agent/safecopy.h"

#include <errno.h>
#include <signal.h>
#include <ucontext.h>

#include "util/banned.h"

/*
 * prs_safecopy(dst = rdi, src = rsi, n = rdx). rep movsb is the only instruction that touches
 * src: a fault leaves rip at it (prs_safecopy_insn) with the stack as at entry, so resuming at
 * prs_safecopy_fault returns -EFAULT to the caller as an ordinary return would. The direction
 * flag is clear at any call (the ABI), and a signal handler starts with it clear too.
 */
__asm__(".text\n"
	".p2align 4\n"
	".globl prs_safecopy\n"
	".hidden prs_safecopy\n"
	".type prs_safecopy, @function\n"
	"prs_safecopy:\n"
	"	mov %rdx, %rcx\n"
	"prs_safecopy_insn:\n"
	"	rep movsb\n"
	"	xor %eax, %eax\n"
	"	ret\n"
	"prs_safecopy_fault:\n"
	"	mov $-14, %eax\n" /* -EFAULT */
	"	ret\n"
	".size prs_safecopy, .-prs_safecopy\n");

_Static_assert(EFAULT == 14, "prs_safecopy's failure return is -EFAULT");

extern const char prs_safecopy_insn[] __attribute__((visibility("hidden")));
extern const char prs_safecopy_fault[] __attribute__((visibility("hidden")));

bool prs_safecopy_recover(void *ucontext)
{
	ucontext_t *uc = ucontext;
	greg_t *rip = &uc->uc_mcontext.gregs[REG_RIP];

	if ((uintptr_t)*rip != (uintptr_t)prs_safecopy_insn)
		return false;
	*rip = (greg_t)(uintptr_t)prs_safecopy_fault;
	return true;
}

static int safe_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	(void)ctx;
	if (addr < 4096 || addr + len < addr || addr + len > (1ull << 47))
		return -EFAULT;
	return prs_safecopy(buf, addr, len);
}

static int safe_readv(void *ctx, struct prs_memvec *v, size_t n)
{
	int done = 0;

	for (size_t k = 0; k < n; k++) {
		v[k].res = safe_read(ctx, v[k].addr, v[k].buf, v[k].len);
		done += v[k].res == 0;
	}
	return done;
}

void prs_safecopy_reader(struct prs_memreader *mr)
{
	mr->read = safe_read;
	mr->readv = safe_readv;
	mr->ctx = NULL;
}
