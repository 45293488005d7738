/* SPDX-License-Identifier: MIT */
/*
 * Unwinder tests against live targets, with eu-stack (libdw's own unwinder, an independent
 * program reading the process itself) as the truth: a C chain built -fomit-frame-pointer, a Rust
 * recursion linked by rust-lld, and a pyenv CPython 3.12 running a Python loop. The target is
 * sampled the way the sampler does (INTERRUPT, registers, one stack read, resume), then frozen in
 * exactly the sampled state (PTRACE_DETACH delivering SIGSTOP) so eu-stack sees the same stack.
 * Also: truncation at max, a short snapshot (reads fall back to process_vm_readv), a hostile
 * snapshot (random words), and refresh. Skips with a reason when ptrace or a target is missing.
 */
#include "pyrsprof/unwind.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../fixtures/unwind/harness.h"
#include "util/banned.h"

#define SNAP_CAP (64 * 1024)

struct live {
	pid_t pid;
	struct prs_unwinder *u;
	struct prs_regs regs;
	uint8_t *stack;
	size_t len;
	struct uh_stack truth;
};

static void live_fini(struct live *l)
{
	prs_unwinder_free(l->u);
	uh_kill(l->pid);
	free(l->stack);
}

/* Starts argv, warms the unwinder on `warm` running samples, then takes the frozen sample. */
static void live_start(struct live *l, char *const argv[], int warm)
{
	struct prs_err err;
	struct stat st;
	uint64_t pcs[PRS_MAX_NATIVE_FRAMES];
	int rc;

	memset(l, 0, sizeof(*l));
	if (stat(argv[0], &st) != 0)
		cr_skip_test("target %s not built (make BUILD=... unwind-targets)", argv[0]);
	if (access("/usr/bin/eu-stack", X_OK) != 0)
		cr_skip_test("eu-stack (elfutils) not installed");
	l->pid = uh_spawn(argv);
	cr_assert_gt(l->pid, 0, "could not start %s", argv[0]);
	rc = uh_seize(l->pid);
	if (rc == -EPERM || rc == -EACCES) {
		uh_kill(l->pid);
		cr_skip_test("ptrace not permitted: %s (see /proc/sys/kernel/yama/ptrace_scope)",
			     strerror(-rc));
	}
	cr_assert_eq(rc, 0, "seize: %s", strerror(-rc));
	rc = prs_unwinder_new(l->pid, &l->u, &err);
	cr_assert_eq(rc, 0, "%s", err.msg);
	l->stack = malloc(SNAP_CAP);
	cr_assert_not_null(l->stack);
	for (int i = 0; i < warm; i++) {
		struct prs_snapshot s;

		cr_assert_eq(uh_sample(l->pid, &l->regs, l->stack, SNAP_CAP, &l->len, NULL, false), 0);
		s = (struct prs_snapshot){ l->regs.r[PRS_REG_RSP], l->len, l->stack };
		cr_assert_gt(prs_unwind(l->u, &l->regs, &s, pcs, PRS_MAX_NATIVE_FRAMES, NULL), 0);
		usleep(2000);
	}
	cr_assert_eq(uh_sample(l->pid, &l->regs, l->stack, SNAP_CAP, &l->len, NULL, true), 0);
	cr_assert_eq(uh_eustack(l->pid, &l->truth), 0, "eu-stack -p %d failed", (int)l->pid);
	cr_assert_gt(l->len, 0);
}

static void check_method(struct live *l, enum prs_unwind_method m, const char *what)
{
	uint64_t pcs[PRS_MAX_NATIVE_FRAMES];
	struct prs_snapshot s = { l->regs.r[PRS_REG_RSP], l->len, l->stack };
	struct prs_unwind_info info;
	int n;

	prs_unwinder_set_method(l->u, m);
	n = prs_unwind(l->u, &l->regs, &s, pcs, PRS_MAX_NATIVE_FRAMES, &info);
	for (int i = 0; i < n && i < l->truth.n; i++)
		cr_expect_eq(pcs[i], l->truth.pc[i], "%s/%s frame %d: %#llx, eu-stack %#llx (%s)", what,
			     prs_unwind_method_name(m), i, (unsigned long long)pcs[i],
			     (unsigned long long)l->truth.pc[i], l->truth.name[i]);
	cr_assert_eq(n, l->truth.n, "%s/%s: %d frames, eu-stack %d (end %s)", what,
		     prs_unwind_method_name(m), n, l->truth.n, prs_unwind_end_name(info.end));
	cr_assert_eq(info.end, PRS_UNWIND_END_CLEAN, "%s: end %s", what, prs_unwind_end_name(info.end));
	cr_assert_eq(info.fp_frames, 0);
}

Test(unwind, c_chain_matches_eustack, .timeout = 60)
{
	char path[PATH_MAX];
	char *argv[] = { path, NULL };
	uint64_t pcs[PRS_MAX_NATIVE_FRAMES];
	struct prs_unwind_info info;
	struct prs_snapshot s;
	struct live l;
	int n;

	snprintf(path, sizeof(path), "%s/chain", uh_target_dir());
	live_start(&l, argv, 5);
	/* main + f1..f28 + leaf + libc's two frames + _start (leaf_x is a tail call) */
	cr_assert_eq(l.truth.n, 33, "eu-stack gave %d frames", l.truth.n);
	check_method(&l, PRS_UNWIND_DWFL, "c");
	check_method(&l, PRS_UNWIND_FAST, "c");
	check_method(&l, PRS_UNWIND_AUTO, "c");

	/* Warm FAST: every row cached, every read inside the snapshot or a read-only file. */
	s = (struct prs_snapshot){ l.regs.r[PRS_REG_RSP], l.len, l.stack };
	prs_unwinder_set_method(l.u, PRS_UNWIND_AUTO);
	n = prs_unwind(l.u, &l.regs, &s, pcs, PRS_MAX_NATIVE_FRAMES, &info);
	cr_assert_eq(n, 33);
	cr_assert_eq(info.method, PRS_UNWIND_FAST);
	cr_assert_eq(info.cache_misses, 0);
	cr_assert_eq(info.remote_reads, 0);
	cr_assert_eq(info.flags, 0);

	/* Truncation at max keeps the innermost frames. */
	n = prs_unwind(l.u, &l.regs, &s, pcs, 5, &info);
	cr_assert_eq(n, 5);
	cr_assert_eq(info.end, PRS_UNWIND_END_MAX);
	cr_assert(info.flags & PRS_UNWIND_TRUNCATED);
	for (int i = 0; i < 5; i++)
		cr_assert_eq(pcs[i], l.truth.pc[i]);

	/* max 0 writes nothing, whatever the method */
	for (int m = PRS_UNWIND_AUTO; m <= PRS_UNWIND_FP; m++) {
		prs_unwinder_set_method(l.u, (enum prs_unwind_method)m);
		pcs[0] = 7;
		cr_assert_eq(prs_unwind(l.u, &l.regs, &s, pcs, 0, &info), 0);
		cr_assert_eq(pcs[0], 7);
		cr_assert_eq(info.end, PRS_UNWIND_END_MAX);
	}
	prs_unwinder_set_method(l.u, PRS_UNWIND_AUTO);

	/* A 64-byte snapshot: the rest of the stack is read from the (frozen) process. */
	s.len = 64;
	n = prs_unwind(l.u, &l.regs, &s, pcs, PRS_MAX_NATIVE_FRAMES, &info);
	cr_assert_eq(n, 33);
	cr_assert_gt(info.remote_reads, 0);
	for (int i = 0; i < n; i++)
		cr_assert_eq(pcs[i], l.truth.pc[i]);

	/* The FP walk cannot unwind -fomit-frame-pointer code correctly: it must not claim 33 frames. */
	prs_unwinder_set_method(l.u, PRS_UNWIND_FP);
	s.len = l.len;
	n = prs_unwind(l.u, &l.regs, &s, pcs, PRS_MAX_NATIVE_FRAMES, &info);
	cr_assert_eq(info.method, PRS_UNWIND_FP);
	cr_assert_geq(n, 1);
	cr_assert_eq(pcs[0], l.truth.pc[0]);
	cr_assert_lt(n, 33);
	live_fini(&l);
}

Test(unwind, rust_lld_matches_eustack, .timeout = 60)
{
	char path[PATH_MAX];
	char *argv[] = { path, NULL };
	struct live l;

	snprintf(path, sizeof(path), "%s/rec", uh_target_dir());
	live_start(&l, argv, 5);
	cr_assert_geq(l.truth.n, 30, "eu-stack gave %d frames", l.truth.n);
	check_method(&l, PRS_UNWIND_DWFL, "rust");
	check_method(&l, PRS_UNWIND_FAST, "rust");
	check_method(&l, PRS_UNWIND_AUTO, "rust");
	live_fini(&l);
}

/* The newest pyenv CPython 3.12, or NULL. */
static const char *find_python312(char *buf, size_t cap)
{
	const char *root = getenv("PYENV_ROOT");
	char dir[1024];
	struct dirent *e;
	DIR *d;
	int found = 0;

	snprintf(dir, sizeof(dir), "%s/versions", root ? root : "/root/.pyenv");
	d = opendir(dir);
	if (!d)
		return NULL;
	while ((e = readdir(d)))
		if (strncmp(e->d_name, "3.12", 4) == 0) {
			snprintf(buf, cap, "%s/%s/bin/python3.12", dir, e->d_name);
			if (access(buf, X_OK) == 0) {
				found = 1;
				break;
			}
		}
	closedir(d);
	return found ? buf : NULL;
}

Test(unwind, cpython312_matches_eustack, .timeout = 60)
{
	char py[PATH_MAX], script[PATH_MAX];
	char *argv[] = { py, script, NULL };
	struct live l;

	if (!find_python312(py, sizeof(py)))
		cr_skip_test("no pyenv CPython 3.12 under $PYENV_ROOT/versions");
	snprintf(script, sizeof(script), "%s/tests/fixtures/unwind/loop.py",
		 getenv("PRS_SRCDIR") ? getenv("PRS_SRCDIR") : ".");
	if (access(script, R_OK) != 0)
		cr_skip_test("%s not found (run from the repository root or set PRS_SRCDIR)", script);
	live_start(&l, argv, 20);
	cr_assert_geq(l.truth.n, 8, "eu-stack gave %d frames", l.truth.n);
	check_method(&l, PRS_UNWIND_DWFL, "cpython");
	check_method(&l, PRS_UNWIND_AUTO, "cpython");
	live_fini(&l);
}

Test(unwind, hostile_snapshot_is_bounded, .timeout = 60)
{
	char path[PATH_MAX];
	char *argv[] = { path, NULL };
	uint64_t pcs[PRS_MAX_NATIVE_FRAMES];
	struct prs_unwind_info info;
	struct live l;
	unsigned seed = (unsigned)getpid();

	snprintf(path, sizeof(path), "%s/chain", uh_target_dir());
	live_start(&l, argv, 1);
	srand(seed);
	for (int round = 0; round < 200; round++) {
		enum prs_unwind_method m = (enum prs_unwind_method)(round % 4);
		struct prs_snapshot s;
		struct prs_regs r = l.regs;
		int n;

		/* random words, sprinkled with pointers back into the snapshot and into the text */
		for (size_t i = 0; i + 8 <= l.len; i += 8) {
			uint64_t v;

			switch (rand() % 4) {
			case 0: v = l.regs.r[PRS_REG_RSP] + (uint64_t)(rand() % (int)l.len); break;
			case 1: v = l.truth.pc[rand() % l.truth.n] + (uint64_t)(rand() % 64 - 32); break;
			case 2: v = 0; break;
			default: v = ((uint64_t)rand() << 33) ^ (uint64_t)rand(); break;
			}
			memcpy(l.stack + i, &v, 8);
		}
		if (round & 1)
			r.r[PRS_REG_RBP] = l.regs.r[PRS_REG_RSP] + (uint64_t)(rand() % (int)l.len);
		s = (struct prs_snapshot){ r.r[PRS_REG_RSP], l.len, l.stack };
		prs_unwinder_set_method(l.u, m);
		n = prs_unwind(l.u, &r, &s, pcs, PRS_MAX_NATIVE_FRAMES, &info);
		cr_assert(n >= 1 && n <= PRS_MAX_NATIVE_FRAMES, "seed %u round %d: n=%d", seed, round, n);
		cr_assert_eq(pcs[0], r.r[PRS_REG_RIP]);
	}
	live_fini(&l);
}

Test(unwind, refresh_and_errors, .timeout = 60)
{
	char path[PATH_MAX];
	char *argv[] = { path, NULL };
	struct prs_unwinder *u = NULL;
	struct prs_err err;
	pid_t pid;
	uint64_t gen;

	cr_assert_eq(prs_unwinder_new(0x3fffffff, &u, &err), -ENOENT, "%s", err.msg);
	cr_assert_null(u);
	prs_unwinder_free(NULL);
	snprintf(path, sizeof(path), "%s/chain", uh_target_dir());
	if (access(path, X_OK) != 0)
		cr_skip_test("target %s not built", path);
	pid = uh_spawn(argv);
	cr_assert_gt(pid, 0);
	cr_assert_eq(prs_unwinder_new(pid, &u, &err), 0, "%s", err.msg);
	gen = prs_unwinder_generation(u);
	cr_assert_eq(prs_unwinder_refresh(u, &err), 0, "%s", err.msg);
	cr_assert_eq(prs_unwinder_generation(u), gen, "unchanged maps must not bump the generation");
	cr_assert_gt(prs_unwinder_maps(u)->n, 3);
	cr_assert_null(prs_maps_find(prs_unwinder_maps(u), 0));
	uh_kill(pid);
	cr_assert_eq(prs_unwinder_refresh(u, &err), -ESRCH);
	prs_unwinder_free(u);
}

/*
 * No live process: a sample recorded by tests/fixtures/unwind/capture.c from the C chain (regs,
 * stack snapshot, maps, the binary) with eu-stack's output at capture time as the truth. libc is
 * not in the fixture, so the truth is compared up to main's return address (frames 0..30); the
 * unwind must then stop there without claiming a clean end.
 */
Test(unwind, fixture_c_chain_offline)
{
	char dir[PATH_MAX], path[PATH_MAX + 32];
	static uint8_t stack[64 * 1024];
	char *maps = NULL;
	size_t maps_len = 0, maps_cap = 0, slen;
	struct prs_regs regs;
	struct uh_stack truth;
	struct prs_unwinder *u = NULL;
	struct prs_err err;
	uint64_t pcs[PRS_MAX_NATIVE_FRAMES];
	struct prs_unwind_info info;
	struct prs_snapshot s;
	FILE *f;
	int idx, nregs = 0;
	unsigned long long v;

	snprintf(dir, sizeof(dir), "%s/tests/fixtures/unwind/c-chain",
		 getenv("PRS_SRCDIR") ? getenv("PRS_SRCDIR") : ".");
	snprintf(path, sizeof(path), "%s/regs.txt", dir);
	f = fopen(path, "r");
	if (!f)
		cr_skip_test("%s not found (run from the repository root or set PRS_SRCDIR)", path);
	memset(&regs, 0, sizeof(regs));
	while (fscanf(f, "%d %llx", &idx, &v) == 2 && idx >= 0 && idx < PRS_NREGS) {
		regs.r[idx] = v;
		nregs++;
	}
	fclose(f);
	cr_assert_eq(nregs, PRS_NREGS);
	snprintf(path, sizeof(path), "%s/stack.bin", dir);
	f = fopen(path, "rb");
	cr_assert_not_null(f);
	slen = fread(stack, 1, sizeof(stack), f);
	fclose(f);
	snprintf(path, sizeof(path), "%s/maps.txt", dir);
	f = fopen(path, "r");
	cr_assert_not_null(f);
	maps_cap = 1 << 16;
	maps = malloc(maps_cap);
	maps_len = fread(maps, 1, maps_cap, f);
	fclose(f);
	snprintf(path, sizeof(path), "%s/eustack.txt", dir);
	f = fopen(path, "r");
	cr_assert_not_null(f);
	uh_eustack_parse(f, &truth);
	fclose(f);
	cr_assert_eq(truth.n, 33);
	cr_assert_str_eq(truth.name[29], "main");

	cr_assert_eq(prs_unwinder_new_offline(maps, maps_len, dir, &u, &err), 0, "%s", err.msg);
	s = (struct prs_snapshot){ regs.r[PRS_REG_RSP], slen, stack };
	for (int m = PRS_UNWIND_AUTO; m <= PRS_UNWIND_DWFL; m++) {
		int n;

		prs_unwinder_set_method(u, (enum prs_unwind_method)m);
		n = prs_unwind(u, &regs, &s, pcs, PRS_MAX_NATIVE_FRAMES, &info);
		/* 31: frame 30 is main's return address into libc, read from main's frame */
		cr_assert_eq(n, 31, "%s: %d frames (end %s)", prs_unwind_method_name(m), n,
			     prs_unwind_end_name(info.end));
		cr_assert(info.end == PRS_UNWIND_END_NO_CFI || info.end == PRS_UNWIND_END_READ,
			  "%s: end %s", prs_unwind_method_name(m), prs_unwind_end_name(info.end));
		for (int i = 0; i < n; i++)
			cr_assert_eq(pcs[i], truth.pc[i], "%s frame %d (%s)", prs_unwind_method_name(m), i,
				     truth.name[i]);
		cr_assert_eq(info.remote_reads, 0);
	}
	/* warm: nothing decoded again */
	prs_unwinder_set_method(u, PRS_UNWIND_FAST);
	prs_unwind(u, &regs, &s, pcs, PRS_MAX_NATIVE_FRAMES, &info);
	cr_assert_eq(info.cache_misses, 0);

	/*
	 * snap_used: the unwind depends on the snapshot's first snap_used bytes only (the sampler
	 * keeps a sleeping thread's native frames while those bytes are unchanged). Scrambling every
	 * byte past it changes nothing; changing the return address that the last frame came from
	 * (the last 8 bytes it read, for this fixture) does.
	 */
	for (int m = PRS_UNWIND_FAST; m <= PRS_UNWIND_DWFL; m++) {
		static uint8_t other[64 * 1024];
		uint64_t pcs2[PRS_MAX_NATIVE_FRAMES];
		struct prs_unwind_info info2;
		struct prs_snapshot s2 = { regs.r[PRS_REG_RSP], slen, other };
		unsigned seed = 7;
		size_t used;
		int n, n2;

		prs_unwinder_set_method(u, (enum prs_unwind_method)m);
		n = prs_unwind(u, &regs, &s, pcs, PRS_MAX_NATIVE_FRAMES, &info);
		used = info.snap_used;
		cr_assert(used >= 8 && used < slen, "%s: %zu of %zu bytes used", prs_unwind_method_name(m),
			  used, slen);
		memcpy(other, stack, used);
		for (size_t i = used; i < slen; i++)
			other[i] = (uint8_t)rand_r(&seed);
		n2 = prs_unwind(u, &regs, &s2, pcs2, PRS_MAX_NATIVE_FRAMES, &info2);
		cr_assert_eq(n2, n, "%s: bytes past snap_used changed the frame count", prs_unwind_method_name(m));
		cr_assert_eq(memcmp(pcs, pcs2, (size_t)n * sizeof(pcs[0])), 0, "%s: bytes past snap_used "
			     "changed the frames", prs_unwind_method_name(m));
		cr_assert_eq(info2.snap_used, used);
		/* the frames' return addresses are inside what was used */
		other[used - 1] ^= 0x40;
		n2 = prs_unwind(u, &regs, &s2, pcs2, PRS_MAX_NATIVE_FRAMES, &info2);
		cr_assert(n2 != n || memcmp(pcs, pcs2, (size_t)n * sizeof(pcs[0])) != 0,
			  "%s: the last used byte did not matter", prs_unwind_method_name(m));
	}
	prs_unwinder_free(u);
	free(maps);
}

/*
 * CPython's native stack changes on every sample (allocator, number ops, PLT stubs), so this
 * compares the FAST path with libdw's Dwfl (checked against eu-stack above) on 300 running
 * samples: identical PCs on every one, and FAST must handle most samples itself.
 */
Test(unwind, cpython312_fast_equals_dwfl_running, .timeout = 120)
{
	char py[PATH_MAX], script[PATH_MAX];
	char *argv[] = { py, script, NULL };
	static uint8_t stack[SNAP_CAP];
	uint64_t a[PRS_MAX_NATIVE_FRAMES], b[PRS_MAX_NATIVE_FRAMES];
	struct prs_unwinder *u = NULL;
	struct prs_unwind_info ia, ib;
	struct prs_regs regs;
	struct prs_err err;
	int fast = 0, total = 0;
	size_t len;
	pid_t pid;

	if (!find_python312(py, sizeof(py)))
		cr_skip_test("no pyenv CPython 3.12 under $PYENV_ROOT/versions");
	snprintf(script, sizeof(script), "%s/tests/fixtures/unwind/loop.py",
		 getenv("PRS_SRCDIR") ? getenv("PRS_SRCDIR") : ".");
	if (access(script, R_OK) != 0)
		cr_skip_test("%s not found", script);
	pid = uh_spawn(argv);
	cr_assert_gt(pid, 0);
	if (uh_seize(pid) != 0) {
		uh_kill(pid);
		cr_skip_test("ptrace not permitted");
	}
	cr_assert_eq(prs_unwinder_new(pid, &u, &err), 0, "%s", err.msg);
	for (int i = 0; i < 300; i++) {
		struct prs_snapshot s;
		int na, nb;

		usleep(1000);
		cr_assert_eq(uh_sample(pid, &regs, stack, SNAP_CAP, &len, NULL, false), 0);
		s = (struct prs_snapshot){ regs.r[PRS_REG_RSP], len, stack };
		prs_unwinder_set_method(u, PRS_UNWIND_AUTO);
		na = prs_unwind(u, &regs, &s, a, PRS_MAX_NATIVE_FRAMES, &ia);
		prs_unwinder_set_method(u, PRS_UNWIND_DWFL);
		nb = prs_unwind(u, &regs, &s, b, PRS_MAX_NATIVE_FRAMES, &ib);
		cr_assert_eq(na, nb, "sample %d: auto(%s) %d frames, dwfl %d", i,
			     prs_unwind_method_name(ia.method), na, nb);
		for (int k = 0; k < na; k++)
			cr_assert_eq(a[k], b[k], "sample %d frame %d", i, k);
		cr_assert_eq(ia.end, ib.end, "sample %d", i);
		fast += ia.method == PRS_UNWIND_FAST;
		total++;
	}
	cr_assert_geq(fast * 10, total * 9, "fast path handled only %d of %d samples", fast, total);
	prs_unwinder_free(u);
	uh_kill(pid);
}

/* A thread other than the leader: its stack is an anonymous mapping and ends in clone3. */
Test(unwind, thread_stack_matches_eustack, .timeout = 60)
{
	char path[PATH_MAX], tdir[64];
	char arg[] = "thread";
	char *argv[] = { path, arg, NULL };
	static uint8_t stack[SNAP_CAP];
	uint64_t pcs[PRS_MAX_NATIVE_FRAMES];
	struct prs_unwinder *u = NULL;
	struct prs_unwind_info info;
	struct prs_snapshot s;
	struct prs_regs regs;
	struct uh_stack truth;
	struct prs_err err;
	struct dirent *e;
	pid_t pid, tid = 0;
	size_t len;
	DIR *d;

	snprintf(path, sizeof(path), "%s/chain", uh_target_dir());
	if (access(path, X_OK) != 0 || access("/usr/bin/eu-stack", X_OK) != 0)
		cr_skip_test("target %s or eu-stack missing", path);
	pid = uh_spawn(argv);
	cr_assert_gt(pid, 0);
	snprintf(tdir, sizeof(tdir), "/proc/%d/task", (int)pid);
	d = opendir(tdir);
	cr_assert_not_null(d);
	while ((e = readdir(d)))
		if (atoi(e->d_name) > 0 && atoi(e->d_name) != pid)
			tid = atoi(e->d_name);
	closedir(d);
	cr_assert_gt(tid, 0, "no second thread");
	if (uh_seize(tid) != 0) {
		uh_kill(pid);
		cr_skip_test("ptrace not permitted");
	}
	cr_assert_eq(prs_unwinder_new(pid, &u, &err), 0, "%s", err.msg);
	for (int i = 0; i < 3; i++) {
		cr_assert_eq(uh_sample(tid, &regs, stack, SNAP_CAP, &len, NULL, false), 0);
		s = (struct prs_snapshot){ regs.r[PRS_REG_RSP], len, stack };
		prs_unwind(u, &regs, &s, pcs, PRS_MAX_NATIVE_FRAMES, &info);
		usleep(2000);
	}
	cr_assert_eq(uh_sample(tid, &regs, stack, SNAP_CAP, &len, NULL, true), 0);
	cr_assert_eq(uh_eustack_tid(pid, tid, &truth), 0);
	/* leaf, f28..f1, thread_main, start_thread, clone3 */
	cr_assert_eq(truth.n, 32, "eu-stack gave %d frames for tid %d", truth.n, (int)tid);
	s = (struct prs_snapshot){ regs.r[PRS_REG_RSP], len, stack };
	for (int m = PRS_UNWIND_AUTO; m <= PRS_UNWIND_DWFL; m++) {
		int n;

		prs_unwinder_set_method(u, (enum prs_unwind_method)m);
		n = prs_unwind(u, &regs, &s, pcs, PRS_MAX_NATIVE_FRAMES, &info);
		cr_assert_eq(n, truth.n, "%s: %d frames, eu-stack %d (end %s)",
			     prs_unwind_method_name(m), n, truth.n, prs_unwind_end_name(info.end));
		for (int i = 0; i < n; i++)
			cr_assert_eq(pcs[i], truth.pc[i], "%s frame %d (%s)", prs_unwind_method_name(m), i,
				     truth.name[i]);
		cr_assert_eq(info.end, PRS_UNWIND_END_CLEAN);
	}
	prs_unwinder_free(u);
	uh_kill(pid);
}

/* The target maps a file: refresh must see it, bump the generation, and unwinding still agree. */
Test(unwind, refresh_after_mmap, .timeout = 60)
{
	char path[PATH_MAX];
	char arg[] = "mmap";
	char *argv[] = { path, arg, NULL };
	static uint8_t stack[SNAP_CAP];
	uint64_t pcs[PRS_MAX_NATIVE_FRAMES];
	struct prs_unwinder *u = NULL;
	struct prs_unwind_info info;
	struct prs_snapshot s;
	struct prs_regs regs;
	struct uh_stack truth;
	struct prs_err err;
	uint64_t gen;
	size_t n0, len;
	pid_t pid;
	int n;

	snprintf(path, sizeof(path), "%s/chain", uh_target_dir());
	if (access(path, X_OK) != 0 || access("/usr/bin/eu-stack", X_OK) != 0)
		cr_skip_test("target %s or eu-stack missing", path);
	pid = uh_spawn(argv);
	cr_assert_gt(pid, 0);
	cr_assert_eq(prs_unwinder_new(pid, &u, &err), 0, "%s", err.msg);
	gen = prs_unwinder_generation(u);
	n0 = prs_unwinder_maps(u)->n;
	kill(pid, SIGUSR1);
	for (int i = 0; i < 200 && prs_unwinder_generation(u) == gen; i++) {
		usleep(5000);
		cr_assert_eq(prs_unwinder_refresh(u, &err), 0, "%s", err.msg);
	}
	cr_assert_eq(prs_unwinder_generation(u), gen + 1);
	cr_assert_eq(prs_unwinder_maps(u)->n, n0 + 1);
	if (uh_seize(pid) != 0) {
		uh_kill(pid);
		cr_skip_test("ptrace not permitted");
	}
	cr_assert_eq(uh_sample(pid, &regs, stack, SNAP_CAP, &len, NULL, true), 0);
	cr_assert_eq(uh_eustack(pid, &truth), 0);
	s = (struct prs_snapshot){ regs.r[PRS_REG_RSP], len, stack };
	for (int m = PRS_UNWIND_AUTO; m <= PRS_UNWIND_DWFL; m++) {
		prs_unwinder_set_method(u, (enum prs_unwind_method)m);
		n = prs_unwind(u, &regs, &s, pcs, PRS_MAX_NATIVE_FRAMES, &info);
		cr_assert_eq(n, truth.n, "%s after refresh: %d frames, eu-stack %d",
			     prs_unwind_method_name(m), n, truth.n);
		for (int i = 0; i < n; i++)
			cr_assert_eq(pcs[i], truth.pc[i]);
	}
	prs_unwinder_free(u);
	uh_kill(pid);
}
