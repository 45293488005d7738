/* SPDX-License-Identifier: MIT */
/*
 * The agent's fault-tolerant copy (src/agent/safecopy.c), with a SIGSEGV/SIGBUS handler that does
 * what the agent's does (prs_safecopy_recover, else the fault is real: die of it): copies within
 * and across pages, faults of unmapped, PROT_NONE and beyond-end-of-file (SIGBUS) memory turned
 * into -EFAULT, a page unmapped and mapped again by another thread while it is read. Then the
 * CPython walker over it on real memory (py_world.h's image copied to its own addresses): the same
 * frames as over the image, and hostile, half-built chains (pointers into unmapped and PROT_NONE
 * pages, a frame across the end of a mapping, a top frame whose code and caller are garbage,
 * loops, memory of random pointers) that end walks with errors, never a crash. Each fault test
 * checks that faults really happened and were recovered (nothing is checked before a load).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "agent/safecopy.h"
#include "py_image.h"
#include "py_world.h"

#include "util/banned.h"

#define PG 4096u
#define BASE 0x10000000ull /* where the world is laid out, then mapped for real */
#define SIZE (1u << 20)

static volatile sig_atomic_t recovered;

static void on_fault(int sig, siginfo_t *si, void *uc)
{
	(void)si;
	if (prs_safecopy_recover(uc)) {
		recovered++;
		return;
	}
	signal(sig, SIG_DFL); /* a real fault: it recurs on return and kills the test */
}

static void setup(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_fault;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	cr_assert_eq(sigaction(SIGSEGV, &sa, NULL), 0);
	cr_assert_eq(sigaction(SIGBUS, &sa, NULL), 0);
	recovered = 0;
}

TestSuite(agent_safecopy, .init = setup);

/* 4 pages of known bytes: page 1 PROT_NONE, page 3 unmapped. */
static uint8_t *pages(void)
{
	uint8_t *p = mmap(NULL, 4 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	cr_assert(p != MAP_FAILED);
	for (size_t i = 0; i < 4 * PG; i++)
		p[i] = (uint8_t)(i * 7 + 3);
	cr_assert_eq(mprotect(p + PG, PG, PROT_NONE), 0);
	cr_assert_eq(munmap(p + 3 * PG, PG), 0);
	return p;
}

Test(agent_safecopy, copies_and_faults)
{
	uint8_t *p = pages(), buf[256];
	struct prs_memreader mr;

	cr_assert_eq(prs_safecopy(buf, (uintptr_t)p + 100, 200), 0);
	cr_assert_eq(memcmp(buf, p + 100, 200), 0);
	cr_assert_eq(prs_safecopy(buf, (uintptr_t)p + 2 * PG + 10, 100), 0);
	cr_assert_eq(memcmp(buf, p + 2 * PG + 10, 100), 0);
	cr_assert_eq(recovered, 0);
	/* PROT_NONE, across into it, unmapped, across into unmapped */
	memset(buf, 0, sizeof(buf));
	cr_assert_eq(prs_safecopy(buf, (uintptr_t)p + PG + 8, 8), -EFAULT);
	cr_assert_eq(prs_safecopy(buf, (uintptr_t)p + PG - 16, 64), -EFAULT);
	cr_assert_eq(memcmp(buf, p + PG - 16, 16), 0, "the bytes before the fault are copied");
	cr_assert_eq(prs_safecopy(buf, (uintptr_t)p + 3 * PG, 8), -EFAULT);
	cr_assert_eq(prs_safecopy(buf, (uintptr_t)p + 3 * PG - 4, 8), -EFAULT);
	cr_assert_eq(recovered, 4);
	/* the reader refuses page 0, kernel addresses and wrap-around without loading */
	prs_safecopy_reader(&mr);
	cr_assert_eq(mr.read(mr.ctx, 8, buf, 8), -EFAULT);
	cr_assert_eq(mr.read(mr.ctx, 0xffffffff81000000ull, buf, 8), -EFAULT);
	cr_assert_eq(mr.read(mr.ctx, UINT64_MAX - 4, buf, 8), -EFAULT);
	cr_assert_eq(recovered, 4);
	munmap(p, 3 * PG);
}

Test(agent_safecopy, beyond_end_of_file_is_sigbus_recovered)
{
	char path[] = "/tmp/prs-safecopy-XXXXXX";
	int fd = mkstemp(path);
	uint8_t *p, buf[16];

	cr_assert(fd >= 0);
	unlink(path);
	cr_assert_eq(write(fd, "0123456789", 10), 10);
	p = mmap(NULL, 2 * PG, PROT_READ, MAP_SHARED, fd, 0);
	cr_assert(p != MAP_FAILED);
	cr_assert_eq(prs_safecopy(buf, (uintptr_t)p + 2, 4), 0);
	cr_assert_eq(memcmp(buf, "2345", 4), 0);
	cr_assert_eq(prs_safecopy(buf, (uintptr_t)p + PG + 8, 8), -EFAULT); /* past the file: SIGBUS */
	cr_assert_eq(recovered, 1);
	munmap(p, 2 * PG);
	close(fd);
}

static uint8_t *volatile flip_page;
static volatile int flipping;

/* Unmaps and maps again (other bytes each time) the page at flip_page until told to stop. */
static void *flipper(void *unused)
{
	unsigned k = 0;

	(void)unused;
	while (flipping) {
		uint8_t *p;

		munmap(flip_page, PG);
		p = mmap(flip_page, PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
		if (p == MAP_FAILED)
			break;
		memset(p, (int)(++k % 200) + 1, PG);
	}
	return NULL;
}

Test(agent_safecopy, page_unmapped_by_another_thread_meanwhile)
{
	uint8_t buf[64];
	unsigned ok = 0, bad = 0;
	pthread_t th;
	struct timespec t0, t;

	flip_page = mmap(NULL, PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	cr_assert(flip_page != MAP_FAILED);
	memset(flip_page, 1, PG);
	flipping = 1;
	cr_assert_eq(pthread_create(&th, NULL, flipper, NULL), 0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do { /* until both outcomes were seen (or 5 s) */
		int rc = prs_safecopy(buf, (uintptr_t)flip_page + 64, sizeof(buf));

		cr_assert(rc == 0 || rc == -EFAULT, "%d", rc);
		if (rc == 0)
			ok++;
		else
			bad++;
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while ((ok < 100 || bad < 100) && t.tv_sec - t0.tv_sec < 5);
	flipping = 0;
	pthread_join(th, NULL);
	cr_assert(ok > 0 && bad > 0, "%u read, %u faulted", ok, bad);
	cr_assert_eq((unsigned)recovered, bad);
	munmap(flip_page, PG);
}

/* ---- the walker over real memory ---- */

static struct world W;
static struct prs_py_stack st[4];

/* A fresh world of 3.minor on the image, at BASE. */
static void fresh(unsigned minor)
{
	img_clear();
	world_init(&W, minor);
}

/* Maps the image at its own addresses (BASE), with the page after it unmapped. */
static void materialize(void)
{
	uint8_t *p = mmap((void *)(uintptr_t)BASE, SIZE, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);

	cr_assert_eq((uintptr_t)p, BASE, "cannot map at %#llx", (unsigned long long)BASE);
	memcpy(p, img.mem, SIZE);
}

static void unmaterialize(void)
{
	munmap((void *)(uintptr_t)BASE, SIZE);
}

/* Walks every thread of the world with the safe reader, then takes the first's idents. */
static int walk_real(void)
{
	struct prs_memreader mr;
	int n = -1;

	prs_safecopy_reader(&mr);
	cr_assert_eq(prs_pywalk_all(&W.walk, &mr, st, 4, &n), 0, "3.%u", W.minor);
	if (n > 0)
		prs_pywalk_idents(&W.walk, &mr, &st[0]);
	return n;
}

static uint64_t page_alloc(void)
{
	img.brk = (img.brk + PG - 1) & ~(uint64_t)(PG - 1);
	return img_alloc(PG);
}

static const unsigned minors[] = { 9, 11, 12, 13 };

/* Points the materialized thread state ts at top frame f (world_top on real memory). */
static void set_top(uint64_t ts, uint64_t f)
{
	const struct prs_py_layout *L = W.L;
	uint64_t ref;

	if (L->tstate_frame >= 0)
		ref = ts + (uint64_t)L->tstate_frame;
	else if (L->tstate_current_frame >= 0)
		ref = ts + (uint64_t)L->tstate_current_frame;
	else /* 3.11, 3.12: tstate->cframe->current_frame */
		ref = *(uint64_t *)(uintptr_t)(ts + (uint64_t)L->tstate_cframe) + (uint64_t)L->cframe_current_frame;
	*(uint64_t *)(uintptr_t)ref = f;
}

Test(agent_safecopy, walker_on_real_memory_same_frames)
{
	for (size_t i = 0; i < sizeof(minors) / sizeof(minors[0]); i++) {
		uint64_t c0, c1, f0, f1, in, ts;

		img_init(BASE, SIZE);
		fresh(minors[i]);
		c0 = world_code(&W, "mod.outer", "a.py", 10);
		c1 = world_code(&W, "mod.inner", "a.py", 20);
		f0 = world_frame(&W, c0, 3, 0, 0, true);
		f1 = world_frame(&W, c1, 9, f0, 0, false);
		in = world_interp(&W);
		ts = world_thread(&W, in, 77);
		world_top(&W, ts, f1);
		materialize();
		cr_assert_eq(walk_real(), 1, "3.%u", W.minor);
		cr_assert_eq(st[0].tid, 77);
		cr_assert_eq(st[0].nframes, 2, "3.%u", W.minor);
		cr_assert(!st[0].truncated && st[0].read_errors == 0, "3.%u", W.minor);
		cr_assert_eq(st[0].code[0], c1);
		cr_assert_eq(st[0].code[1], c0);
		cr_assert_eq(st[0].off[0], world_off(&W, 9));
		cr_assert_eq(st[0].off[1], world_off(&W, 3));
		cr_assert(st[0].has_ident);
		cr_assert_eq(recovered, 0);
		unmaterialize();
		img_release();
	}
}

Test(agent_safecopy, hostile_half_built_chains_never_crash)
{
	for (size_t i = 0; i < sizeof(minors) / sizeof(minors[0]); i++) {
		uint64_t c0, f0, f1, top, hole, none, in, ts, edge;
		unsigned faults;

		img_init(BASE, SIZE);
		fresh(minors[i]);
		c0 = world_code(&W, "mod.f", "a.py", 10);
		hole = page_alloc();  /* unmapped once materialized */
		none = page_alloc();  /* PROT_NONE */
		f0 = world_frame(&W, c0, 1, hole + 64, 0, true);  /* its caller: in the unmapped page */
		f1 = world_frame(&W, c0, 2, f0, 0, false);
		/* the top frame half built: its code and caller are what the slot held before */
		top = world_frame(&W, none + 128, 5, none + 256, 0, false);
		in = world_interp(&W);
		ts = world_thread(&W, in, 78);
		world_top(&W, ts, f1);
		/* a frame whose bytes run past the end of the mapping */
		edge = BASE + SIZE - 16;
		materialize();
		cr_assert_eq(munmap((void *)(uintptr_t)hole, PG), 0);
		cr_assert_eq(mprotect((void *)(uintptr_t)none, PG, PROT_NONE), 0);

		cr_assert_eq(walk_real(), 1);
		cr_assert_eq(st[0].nframes, 2, "3.%u: %u", W.minor, st[0].nframes);
		cr_assert(st[0].truncated && st[0].read_errors == 1, "3.%u", W.minor);
		faults = (unsigned)recovered;
		cr_assert_geq(faults, 1, "3.%u: the unmapped caller was loaded and faulted", W.minor);

		/* the half-built top: its caller faults; its code object too, when read */
		set_top(ts, top);
		cr_assert_eq(walk_real(), 1);
		cr_assert_eq(st[0].nframes, 1, "3.%u", W.minor);
		cr_assert_eq(st[0].code[0], none + 128);
		cr_assert_eq(st[0].ident[0], 0, "an unreadable code object has no identity");
		cr_assert(st[0].truncated && st[0].read_errors == 1);
		cr_assert_gt((unsigned)recovered, faults + 1, "3.%u: caller and code object faulted", W.minor);

		/* a top frame across the end of the mapping; then a loop */
		*(uint64_t *)(uintptr_t)(top + (uint64_t)W.L->frame_back) = edge;
		walk_real();
		cr_assert_eq(st[0].nframes, 1);
		cr_assert_eq(st[0].read_errors, 1);
		*(uint64_t *)(uintptr_t)(top + (uint64_t)W.L->frame_back) = top;
		walk_real();
		cr_assert_eq(st[0].cycles, 1, "3.%u", W.minor);
		unmaterialize();
		img_release();
	}
}

static uint64_t rng = 88172645463325252ull;

static uint64_t next_rand(void)
{
	return img_rand(&rng);
}

/* Real memory of random words, most of them pointers into it or into the unmapped pages after it,
 * with holes: every walk ends, bounded, and faults were recovered on the way. */
Test(agent_safecopy, random_real_memory_never_crashes)
{
	struct prs_memreader mr;
	static struct prs_py_stack big[16];
	unsigned walks = 0;

	prs_safecopy_reader(&mr);
	for (unsigned round = 0; round < 40; round++) {
		int n = -1, rc;

		img_init(BASE, SIZE);
		fresh(minors[round % 4]);
		for (uint64_t a = BASE + PG; a + 8 <= BASE + SIZE; a += 8) {
			uint64_t r = next_rand();

			img_put64(a, r % 8 ? BASE + (((r >> 8) % (SIZE + SIZE / 4)) & ~7ull) : r);
		}
		materialize();
		for (unsigned h = 0; h < 16; h++) {
			uint64_t pg = BASE + PG * (1 + next_rand() % (SIZE / PG - 1));

			mprotect((void *)(uintptr_t)pg, PG, h % 2 ? PROT_NONE : PROT_READ);
		}
		W.walk.runtime = W.runtime ? BASE + PG + 8 * (next_rand() % 100000) : 0;
		W.walk.interp_head_var = W.runtime ? 0 : BASE + PG + 8 * (next_rand() % 100000);
		rc = prs_pywalk_all(&W.walk, &mr, big, 16, &n);
		cr_assert(rc == 0 || rc == -EINVAL, "%d", rc);
		cr_assert(n >= 0 && n <= 16);
		for (int k = 0; k < n; k++) {
			cr_assert_leq(big[k].nframes, PRS_MAX_PY_FRAMES);
			prs_pywalk_idents(&W.walk, &mr, &big[k]);
		}
		walks += (unsigned)n;
		unmaterialize();
		img_release();
	}
	cr_assert_gt(walks, 3, "%u threads walked", walks);
	cr_assert_gt(recovered, 10, "%d faults recovered", (int)recovered);
}
