/* SPDX-License-Identifier: MIT */
/*
 * The sleeping-thread reuse decisions (src/sample/reuse.c), on made-up readings: PRS_REUSE_ALL
 * when the schedstat equals the at-rest one; PRS_REUSE_NATIVE when /proc/TID/syscall shows the
 * same syscall (or its restart) with the same first argument at the same SP and PC over unchanged
 * stack bytes and an unchanged unwinder generation; otherwise the thread is read. And what a stop leaves to be kept.
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

/* One thread's kept sample, what /proc and memory show now, and the probe over them. */
struct scene {
	struct prs_kept k;
	struct fake f;
	struct prs_native_probe p;
	struct prs_schedstat now; /* its schedstat this tick */
};

/* A thread kept blocked in clock_nanosleep at SP/PC, its unwind having read USED bytes, with
 * /proc and memory showing it unchanged; at rest (its schedstat unchanged) or not. */
static void setup(struct scene *sc, bool at_rest)
{
	struct prs_kept *k = &sc->k;
	struct fake *f = &sc->f;
	struct prs_native_probe *p = &sc->p;

	memset(sc, 0, sizeof(*sc));
	for (size_t i = 0; i < sizeof(snap); i++)
		snap[i] = (uint8_t)(i * 7 + 3);
	k->valid = true;
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
	k->at_rest = at_rest;
	sc->now = rest;
}

static enum prs_reuse decide(struct scene *sc)
{
	return prs_reuse_decide(&sc->k, &sc->now, &sc->p);
}

Test(reuse, all_when_schedstat_equals_the_rest)
{
	struct scene sc;

	setup(&sc, true);
	cr_assert_eq(decide(&sc), PRS_REUSE_ALL);
	cr_assert_eq(sc.f.sys_calls + sc.f.byte_calls, 0, "one schedstat read decides: nothing else read");
	cr_assert_eq(prs_reuse_decide(&sc.k, &sc.now, NULL), PRS_REUSE_ALL, "vm mode too");
}

Test(reuse, any_schedstat_change_means_it_ran)
{
	struct scene sc;

	for (int field = 0; field < 3; field++) {
		setup(&sc, true);
		if (field == 0)
			sc.now.cpu_ns++;
		else if (field == 1)
			sc.now.wait_ns++;
		else
			sc.now.slices++;
		cr_assert_eq(prs_reuse_decide(&sc.k, &sc.now, NULL), PRS_REUSE_NONE, "field %d", field);
		/* in ptrace mode the native check follows, and here finds it unchanged */
		cr_assert_eq(decide(&sc), PRS_REUSE_NATIVE, "field %d", field);
	}
}

Test(reuse, not_at_rest_is_never_all)
{
	struct scene sc;

	setup(&sc, false);
	cr_assert_eq(prs_reuse_decide(&sc.k, &sc.now, NULL), PRS_REUSE_NONE);
	cr_assert_eq(decide(&sc), PRS_REUSE_NATIVE);
}

Test(reuse, native_same_syscall_or_its_restart)
{
	struct scene sc;

	setup(&sc, false);
	cr_assert_eq(decide(&sc), PRS_REUSE_NATIVE);
	cr_assert_eq(sc.f.sys_calls, 1);
	cr_assert_eq(sc.f.byte_calls, 1);
	sc.f.sys.nr = PRS_SYS_RESTART_SYSCALL;
	cr_assert_eq(decide(&sc), PRS_REUSE_NATIVE, "the restart of the same call");
	sc.f.sys.nr = 7; /* poll */
	cr_assert_eq(decide(&sc), PRS_REUSE_NONE, "another syscall");
	/* a call that is not restarted through restart_syscall must show its own number */
	sc.f.sys.nr = PRS_SYS_RESTART_SYSCALL;
	sc.k.restart_nr = sc.k.nr;
	cr_assert_eq(decide(&sc), PRS_REUSE_NONE);
}

Test(reuse, native_needs_every_reading_unchanged)
{
	struct scene sc;

	for (int c = 0; c < 10; c++) {
		setup(&sc, false);
		switch (c) {
		case 0: sc.f.sys.running = true; break;
		case 1: sc.f.sys.sp += 8; break;
		case 2: sc.f.sys.pc += 1; break;
		case 3: sc.f.mem[USED - 1] ^= 1; break;  /* the last byte the unwind read */
		case 4: sc.p.gen = 8; break;             /* the maps changed since */
		case 5: sc.p.maps_ok = false; break;     /* no unwinder, or maps known stale */
		case 6: sc.f.sys_rc = -3; break;         /* /proc/TID/syscall unreadable (ESRCH) */
		case 7: sc.k.native = false; break;      /* its last stop kept no native frames */
		case 8: sc.f.mem_len = USED - 1; break;  /* the stack cannot be read that far now */
		case 9: sc.f.sys.args[0] = 0x5000; break; /* another first argument (futex word) */
		}
		cr_assert_eq(decide(&sc), PRS_REUSE_NONE, "case %d", c);
	}
}

Test(reuse, bytes_past_what_the_unwind_read_do_not_matter)
{
	struct scene sc;

	setup(&sc, false);
	sc.f.mem[USED] ^= 0xff;
	cr_assert_eq(decide(&sc), PRS_REUSE_NATIVE);
}

Test(reuse, readings_are_taken_lazily)
{
	struct scene sc;

	setup(&sc, false);
	sc.p.gen = 8;
	cr_assert_eq(decide(&sc), PRS_REUSE_NONE);
	cr_assert_eq(sc.f.sys_calls + sc.f.byte_calls, 0, "a changed generation needs no /proc read");
	sc.p.gen = 7;
	sc.f.sys.pc++;
	cr_assert_eq(decide(&sc), PRS_REUSE_NONE);
	cr_assert_eq(sc.f.byte_calls, 0, "another PC needs no memory read");
	sc.f.sys.pc--;
	sc.k.used = 0;
	cr_assert_eq(decide(&sc), PRS_REUSE_NATIVE);
	cr_assert_eq(sc.f.byte_calls, 0, "an unwind that read no stack byte needs none compared");
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
	struct scene sc;
	struct prs_regs regs;
	struct prs_unwind_info info = { .method = PRS_UNWIND_FAST, .snap_used = USED };
	uint64_t pcs[3] = { PC, 0x401000, 0x400500 };
	uint32_t ids[3] = { 11, 12, 13 };

	setup(&sc, false);
	memset(&sc.k, 0, sizeof(sc.k));
	sc.k.valid = true;
	stopped_regs(&regs, -516); /* -ERESTART_RESTARTBLOCK: resumed as restart_syscall */
	cr_assert(prs_kept_native(&sc.k, &regs, 4096, pcs, ids, 3, &info, 7));
	cr_assert(sc.k.native);
	cr_assert_eq(sc.k.n, 3);
	cr_assert_arr_eq(sc.k.pcs, pcs, sizeof(pcs));
	cr_assert_arr_eq(sc.k.ids, ids, sizeof(ids));
	cr_assert_eq(sc.k.nr, NR_CLOCK_NANOSLEEP);
	cr_assert_eq(sc.k.restart_nr, PRS_SYS_RESTART_SYSCALL);
	cr_assert_eq(sc.k.used, USED);
	sc.f.sys.nr = PRS_SYS_RESTART_SYSCALL;
	cr_assert_eq(decide(&sc), PRS_REUSE_NATIVE);

	stopped_regs(&regs, -512); /* -ERESTARTSYS: the same call is restarted */
	cr_assert(prs_kept_native(&sc.k, &regs, 4096, pcs, ids, 3, &info, 7));
	cr_assert_eq(sc.k.restart_nr, NR_CLOCK_NANOSLEEP);
	cr_assert_eq(decide(&sc), PRS_REUSE_NONE);
	sc.f.sys.nr = NR_CLOCK_NANOSLEEP;
	cr_assert_eq(decide(&sc), PRS_REUSE_NATIVE);
	prs_kept_release(&sc.k);
}

Test(reuse, a_futex_wait_is_found_again_on_the_same_word_only)
{
	struct scene sc;
	struct prs_regs regs;
	struct prs_unwind_info info = { .method = PRS_UNWIND_FAST, .snap_used = USED };
	uint64_t pcs[1] = { PC };
	uint32_t ids[1] = { 1 };
	const uint64_t gil_word = 0x7f0000001048ull, lock_word = 0x560000002a00ull;

	setup(&sc, false);
	memset(&sc.k, 0, sizeof(sc.k));
	sc.k.valid = true;
	stopped_regs(&regs, -516);
	regs.orig_rax = PRS_SYS_FUTEX;
	regs.r[PRS_REG_RDI] = gil_word;
	cr_assert(prs_kept_native(&sc.k, &regs, 4096, pcs, ids, 1, &info, 7));
	cr_assert_eq(sc.k.arg0, gil_word);
	/* /proc/TID/syscall: the restarted wait shows the word it was entered with (measured) */
	sc.f.sys.nr = PRS_SYS_RESTART_SYSCALL;
	sc.f.sys.args[0] = gil_word;
	cr_assert_eq(decide(&sc), PRS_REUSE_NATIVE);
	sc.f.sys.nr = PRS_SYS_FUTEX;
	cr_assert_eq(decide(&sc), PRS_REUSE_NATIVE);
	/* the same place waiting on another word (a lock, not the GIL): read again */
	sc.f.sys.args[0] = lock_word;
	cr_assert_eq(decide(&sc), PRS_REUSE_NONE);
	prs_kept_release(&sc.k);
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
