/* SPDX-License-Identifier: MIT */
/*
 * The sleeping-thread reuse decisions (src/sample/reuse.c), on made-up readings: PRS_REUSE_ALL
 * when the schedstat equals the at-rest one; PRS_REUSE_NATIVE when /proc/TID/syscall shows the
 * same syscall (or its restart) at the same SP and PC over unchanged stack bytes and an unchanged
 * unwinder generation; otherwise the thread is read. And what a stop leaves to be kept.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "sample/reuse-internal.h"

#include "util/banned.h"

#define SP 0x7ffd00001000ull
#define PC 0x7f0000401234ull
#define NR_CLOCK_NANOSLEEP 230
#define USED 96

/* What /proc and the target's memory show now. */
struct fake {
	int sys_rc;
	struct prs_task_sys sys;
	uint64_t mem_base;
	uint8_t mem[256];
	size_t mem_len;        /* readable bytes from mem_base */
	int sys_calls, byte_calls;
};

static int fake_syscall(void *ctx, struct prs_task_sys *sys)
{
	struct fake *f = ctx;

	f->sys_calls++;
	*sys = f->sys;
	return f->sys_rc;
}

static bool fake_same_bytes(void *ctx, uint64_t sp, const uint8_t *snap, size_t len)
{
	struct fake *f = ctx;

	f->byte_calls++;
	if (sp < f->mem_base || sp - f->mem_base + len > f->mem_len)
		return false;
	return memcmp(f->mem + (sp - f->mem_base), snap, len) == 0;
}

static const struct prs_schedstat rest = { 123456789, 2000, 42 };
static uint8_t snap[256];

/* A thread kept blocked in clock_nanosleep at SP/PC, its unwind having read USED bytes, with
 * /proc and memory showing it unchanged. */
static void setup(struct prs_kept *k, struct fake *f, struct prs_native_probe *p)
{
	memset(k, 0, sizeof(*k));
	memset(f, 0, sizeof(*f));
	for (size_t i = 0; i < sizeof(snap); i++)
		snap[i] = (uint8_t)(i * 7 + 3);
	k->valid = true;
	k->at_rest = true;
	k->rest = rest;
	k->state = PRS_STATE_BLOCKED;
	k->syscall = NR_CLOCK_NANOSLEEP;
	k->native = true;
	k->n = 3;
	k->used = USED;
	k->sp = SP;
	k->pc = PC;
	k->gen = 7;
	k->nr = NR_CLOCK_NANOSLEEP;
	k->restart_nr = PRS_SYS_RESTART_SYSCALL;
	f->sys.running = false;
	f->sys.nr = NR_CLOCK_NANOSLEEP;
	f->sys.sp = SP;
	f->sys.pc = PC;
	f->mem_base = SP;
	memcpy(f->mem, snap, sizeof(snap));
	f->mem_len = sizeof(f->mem);
	memset(p, 0, sizeof(*p));
	p->maps_ok = true;
	p->gen = 7;
	p->syscall = fake_syscall;
	p->same_bytes = fake_same_bytes;
	p->ctx = f;
	p->snap = snap;
}

Test(reuse, all_when_schedstat_equals_the_rest)
{
	struct prs_kept k;
	struct fake f;
	struct prs_native_probe p;
	struct prs_schedstat now = rest;

	setup(&k, &f, &p);
	cr_assert_eq(prs_reuse_decide(&k, &now, &p), PRS_REUSE_ALL);
	cr_assert_eq(f.sys_calls + f.byte_calls, 0, "one schedstat read decides: nothing else read");
	cr_assert_eq(prs_reuse_decide(&k, &now, NULL), PRS_REUSE_ALL, "vm mode too");
}

Test(reuse, any_schedstat_change_means_it_ran)
{
	struct prs_kept k;
	struct fake f;
	struct prs_native_probe p;

	setup(&k, &f, &p);
	for (int field = 0; field < 3; field++) {
		struct prs_schedstat now = rest;

		if (field == 0)
			now.cpu_ns++;
		else if (field == 1)
			now.wait_ns++;
		else
			now.slices++;
		cr_assert_eq(prs_reuse_decide(&k, &now, NULL), PRS_REUSE_NONE, "field %d", field);
		/* in ptrace mode the native check follows, and here finds it unchanged */
		cr_assert_eq(prs_reuse_decide(&k, &now, &p), PRS_REUSE_NATIVE, "field %d", field);
	}
}

Test(reuse, not_at_rest_is_never_all)
{
	struct prs_kept k;
	struct fake f;
	struct prs_native_probe p;
	struct prs_schedstat now = rest;

	setup(&k, &f, &p);
	k.at_rest = false;
	cr_assert_eq(prs_reuse_decide(&k, &now, NULL), PRS_REUSE_NONE);
	cr_assert_eq(prs_reuse_decide(&k, &now, &p), PRS_REUSE_NATIVE);
}

Test(reuse, native_same_syscall_or_its_restart)
{
	struct prs_kept k;
	struct fake f;
	struct prs_native_probe p;
	struct prs_schedstat now = rest;

	setup(&k, &f, &p);
	k.at_rest = false;
	cr_assert_eq(prs_reuse_decide(&k, &now, &p), PRS_REUSE_NATIVE);
	cr_assert_eq(f.sys_calls, 1);
	cr_assert_eq(f.byte_calls, 1);
	f.sys.nr = PRS_SYS_RESTART_SYSCALL;
	cr_assert_eq(prs_reuse_decide(&k, &now, &p), PRS_REUSE_NATIVE, "the restart of the same call");
	f.sys.nr = 7; /* poll */
	cr_assert_eq(prs_reuse_decide(&k, &now, &p), PRS_REUSE_NONE, "another syscall");
	/* a call that is not restarted through restart_syscall must show its own number */
	f.sys.nr = PRS_SYS_RESTART_SYSCALL;
	k.restart_nr = k.nr;
	cr_assert_eq(prs_reuse_decide(&k, &now, &p), PRS_REUSE_NONE);
}

Test(reuse, native_needs_every_reading_unchanged)
{
	struct prs_schedstat now = rest;

	for (int c = 0; c < 9; c++) {
		struct prs_kept k;
		struct fake f;
		struct prs_native_probe p;

		setup(&k, &f, &p);
		k.at_rest = false;
		switch (c) {
		case 0: f.sys.running = true; break;
		case 1: f.sys.sp += 8; break;
		case 2: f.sys.pc += 1; break;
		case 3: f.mem[USED - 1] ^= 1; break;     /* the last byte the unwind read */
		case 4: p.gen = 8; break;                /* the maps changed since */
		case 5: p.maps_ok = false; break;        /* no unwinder, or maps known stale */
		case 6: f.sys_rc = -3; break;            /* /proc/TID/syscall unreadable (ESRCH) */
		case 7: k.native = false; break;         /* its last stop kept no native frames */
		case 8: f.mem_len = USED - 1; break;     /* the stack cannot be read that far now */
		}
		cr_assert_eq(prs_reuse_decide(&k, &now, &p), PRS_REUSE_NONE, "case %d", c);
	}
}

Test(reuse, bytes_past_what_the_unwind_read_do_not_matter)
{
	struct prs_kept k;
	struct fake f;
	struct prs_native_probe p;
	struct prs_schedstat now = rest;

	setup(&k, &f, &p);
	k.at_rest = false;
	f.mem[USED] ^= 0xff;
	cr_assert_eq(prs_reuse_decide(&k, &now, &p), PRS_REUSE_NATIVE);
}

Test(reuse, readings_are_taken_lazily)
{
	struct prs_kept k;
	struct fake f;
	struct prs_native_probe p;
	struct prs_schedstat now = rest;

	setup(&k, &f, &p);
	k.at_rest = false;
	p.gen = 8;
	cr_assert_eq(prs_reuse_decide(&k, &now, &p), PRS_REUSE_NONE);
	cr_assert_eq(f.sys_calls + f.byte_calls, 0, "a changed generation needs no /proc read");
	p.gen = 7;
	f.sys.pc++;
	cr_assert_eq(prs_reuse_decide(&k, &now, &p), PRS_REUSE_NONE);
	cr_assert_eq(f.byte_calls, 0, "another PC needs no memory read");
	f.sys.pc--;
	k.used = 0;
	cr_assert_eq(prs_reuse_decide(&k, &now, &p), PRS_REUSE_NATIVE);
	cr_assert_eq(f.byte_calls, 0, "an unwind that read no stack byte needs none compared");
}

Test(reuse, kept_sample_is_valid_when_blocked)
{
	struct prs_kept k;
	struct prs_sample smp;

	memset(&k, 0, sizeof(k));
	memset(&smp, 0, sizeof(smp));
	k.at_rest = true;
	smp.stack = 77;
	smp.state = PRS_STATE_BLOCKED;
	smp.syscall = 202;
	smp.flags = PRS_SAMPLE_GIL;
	prs_kept_sample(&k, &smp);
	cr_assert(k.valid);
	cr_assert(!k.at_rest, "at rest only once the caller knows its schedstat before the reads");
	cr_assert_eq(k.stack, 77);
	cr_assert_eq(k.syscall, 202);
	cr_assert_eq(k.flags, PRS_SAMPLE_GIL);
	smp.state = PRS_STATE_DISK;
	prs_kept_sample(&k, &smp);
	cr_assert(k.valid);
	smp.state = PRS_STATE_RUNNING;
	prs_kept_sample(&k, &smp);
	cr_assert(!k.valid, "a running thread's sample is not recorded again");
	smp.state = PRS_STATE_RUNQUEUE;
	prs_kept_sample(&k, &smp);
	cr_assert(!k.valid);
}

/* A stop in clock_nanosleep interrupted by our INTERRUPT: rax says how the kernel restarts it. */
static void stopped_regs(struct prs_regs *r, int64_t rax)
{
	memset(r, 0, sizeof(*r));
	r->r[PRS_REG_RSP] = SP;
	r->r[PRS_REG_RIP] = PC;
	r->r[PRS_REG_RAX] = (uint64_t)rax;
	r->orig_rax = NR_CLOCK_NANOSLEEP;
}

Test(reuse, kept_native_from_a_stop_then_found_asleep_there)
{
	struct prs_kept k;
	struct fake f;
	struct prs_native_probe p;
	struct prs_regs regs;
	struct prs_unwind_info info = { .method = PRS_UNWIND_FAST, .snap_used = USED };
	uint64_t pcs[3] = { PC, 0x401000, 0x400500 };
	uint32_t ids[3] = { 11, 12, 13 };
	struct prs_schedstat now = rest;

	setup(&k, &f, &p);
	memset(&k, 0, sizeof(k));
	k.valid = true;
	stopped_regs(&regs, -516); /* -ERESTART_RESTARTBLOCK: resumed as restart_syscall */
	cr_assert(prs_kept_native(&k, &regs, 4096, pcs, ids, 3, &info, 7));
	cr_assert(k.native);
	cr_assert_eq(k.n, 3);
	cr_assert_arr_eq(k.pcs, pcs, sizeof(pcs));
	cr_assert_arr_eq(k.ids, ids, sizeof(ids));
	cr_assert_eq(k.nr, NR_CLOCK_NANOSLEEP);
	cr_assert_eq(k.restart_nr, PRS_SYS_RESTART_SYSCALL);
	cr_assert_eq(k.used, USED);
	f.sys.nr = PRS_SYS_RESTART_SYSCALL;
	cr_assert_eq(prs_reuse_decide(&k, &now, &p), PRS_REUSE_NATIVE);

	stopped_regs(&regs, -512); /* -ERESTARTSYS: the same call is restarted */
	cr_assert(prs_kept_native(&k, &regs, 4096, pcs, ids, 3, &info, 7));
	cr_assert_eq(k.restart_nr, NR_CLOCK_NANOSLEEP);
	cr_assert_eq(prs_reuse_decide(&k, &now, &p), PRS_REUSE_NONE);
	f.sys.nr = NR_CLOCK_NANOSLEEP;
	cr_assert_eq(prs_reuse_decide(&k, &now, &p), PRS_REUSE_NATIVE);
	prs_kept_release(&k);
}

Test(reuse, native_kept_only_from_an_unwind_of_registers_and_snapshot)
{
	struct prs_kept k;
	struct prs_regs regs;
	uint64_t pcs[1] = { PC };
	uint32_t ids[1] = { 1 };

	memset(&k, 0, sizeof(k));
	stopped_regs(&regs, -516);
	for (int c = 0; c < 5; c++) {
		struct prs_unwind_info info = { .method = PRS_UNWIND_FAST, .snap_used = USED };
		int n = 1;
		size_t snap_len = 4096;

		switch (c) {
		case 0: info.method = PRS_UNWIND_DWFL; break;  /* libdw may read anything */
		case 1: info.method = PRS_UNWIND_FP; break;
		case 2: info.remote_reads = 1; break;          /* read outside the snapshot */
		case 3: snap_len = USED - 1; break;            /* read past what was copied */
		case 4: n = 0; break;                          /* no frames */
		}
		k.native = true;
		cr_assert(!prs_kept_native(&k, &regs, snap_len, pcs, ids, n, &info, 7), "case %d", c);
		cr_assert(!k.native, "case %d", c);
	}
	prs_kept_release(&k);
}
