/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the CPython frame walker alone (src/python/walk.c: a memreader in, raw frames
 * out, no naming) on memory images of every generated layout row, 3.6 to 3.13 (py_world.h): the
 * code addresses, instruction offsets and group/generator flags of each frame, each thread's tid,
 * pthread id, thread state and GIL, across two interpreters. Then hostile images: frame and
 * thread-state loops, pointers into nothing, odd pointers, stacks past the depth bound, a chain of
 * nothing but shims, a process gone mid-walk, and images of random bytes, which must give errors
 * or cut walks, never a crash or an unbounded walk.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "py_image.h"
#include "py_world.h"

#include "util/banned.h"

#define BASE 0x10000000ull
#define SIZE (4u << 20)
#define UNMAPPED 0x7e0000001000ull /* a plausible pointer outside the image */

static struct world W;
static struct prs_memreader mr;
static struct prs_py_stack *st; /* 4 of them */

static void setup(void)
{
	img_init(BASE, SIZE);
	mr = img_reader();
	st = calloc(4, sizeof(*st));
	cr_assert(st);
}

static void teardown(void)
{
	free(st);
	img_release();
}

TestSuite(python_rawwalk, .init = setup, .fini = teardown);

/* A fresh image with the world of 3.minor. */
static void fresh(unsigned minor)
{
	img_clear();
	world_init(&W, minor);
}

/* Walks every thread; returns the count (asserting success). */
static int walk_all(void)
{
	int n = -1;

	cr_assert_eq(prs_pywalk_all(&W.walk, &mr, st, 4, &n), 0, "3.%u", W.minor);
	return n;
}

/* One thread on one interpreter whose top frame is top; returns its thread state. */
static uint64_t one_thread(uint64_t top)
{
	uint64_t in = world_interp(&W), ts = world_thread(&W, in, 4242);

	world_top(&W, ts, top);
	return ts;
}

/*
 * Two interpreters: A (tid 101: three frames in two groups, the innermost in a generator 3.11+)
 * and B (tid 102, holds the GIL, one frame that has not started) in the first, C (tid 103, no
 * frame) in the second.
 */
Test(python_rawwalk, every_version_frames_threads_gil)
{
	for (unsigned minor = 6; minor <= 13; minor++) {
		uint64_t c0, c1, c2, cb, f0, f1, f2, fb, s0 = 0, s1 = 0, in1, in2, ta, tb, tc;
		int n;

		fresh(minor);
		c0 = img_alloc(256), c1 = img_alloc(256), c2 = img_alloc(256), cb = img_alloc(256);
		if (minor >= 12) { /* a shim below each eval call's first frame */
			s0 = world_frame(&W, c0, 0, 0, 3, false);
			f0 = world_frame(&W, c0, 1, s0, 0, false);
			s1 = world_frame(&W, c0, 0, f0, 3, false);
			f1 = world_frame(&W, c1, 9, s1, 0, false);
		} else {
			f0 = world_frame(&W, c0, 1, 0, 0, true);
			f1 = world_frame(&W, c1, 9, f0, 0, true);
		}
		f2 = world_frame(&W, c2, 15, f1, 1, false);
		fb = world_frame(&W, cb, 0, 0, 0, true);
		world_frame_instr(&W, fb, cb, -2); /* ≤3.10 f_lasti -2 (< 0); 3.11+ before the code */
		in1 = world_interp(&W);
		in2 = world_interp(&W);
		ta = world_thread(&W, in1, 101);
		tb = world_thread(&W, in1, 102);
		tc = world_thread(&W, in2, 103);
		world_top(&W, ta, f2);
		world_top(&W, tb, fb);
		world_gil(&W, in1, tb);

		n = walk_all();
		cr_assert_eq(n, 3, "3.%u: %d threads", minor, n);
		cr_assert_eq(st[0].tid, 101, "3.%u", minor);
		cr_assert_eq(st[1].tid, 102, "3.%u", minor);
		cr_assert_eq(st[2].tid, 103, "3.%u", minor);
		cr_assert_eq(st[0].tstate, ta, "3.%u", minor);
		cr_assert_eq(st[1].tstate, tb, "3.%u", minor);
		cr_assert_eq(st[2].tstate, tc, "3.%u", minor);
		cr_assert_eq(st[0].thread_id, img_get64(ta + W.L->tstate_thread_id), "3.%u", minor);
		cr_assert(!st[0].holds_gil && st[1].holds_gil && !st[2].holds_gil, "3.%u", minor);
		/* A: innermost first */
		cr_assert_eq(st[0].top, f2, "3.%u", minor);
		cr_assert_eq(st[0].nframes, 3, "3.%u: %u frames", minor, st[0].nframes);
		cr_assert(!st[0].truncated, "3.%u", minor);
		cr_assert_eq(st[0].code[0], c2, "3.%u", minor);
		cr_assert_eq(st[0].code[1], c1, "3.%u", minor);
		cr_assert_eq(st[0].code[2], c0, "3.%u", minor);
		cr_assert_eq(st[0].off[0], world_off(&W, 15), "3.%u: %d", minor, st[0].off[0]);
		cr_assert_eq(st[0].off[1], world_off(&W, 9), "3.%u: %d", minor, st[0].off[1]);
		cr_assert_eq(st[0].off[2], world_off(&W, 1), "3.%u: %d", minor, st[0].off[2]);
		if (minor <= 10) { /* every frame its own eval call */
			cr_assert_eq(st[0].flags[0], PRS_PYF_GROUP_END, "3.%u", minor);
			cr_assert_eq(st[0].flags[1], PRS_PYF_GROUP_END, "3.%u", minor);
		} else { /* f2 inlined into f1's eval call (3.11: not an entry; 3.12+: no shim below) */
			cr_assert_eq(st[0].flags[0], PRS_PYF_GENERATOR, "3.%u: %#x", minor, st[0].flags[0]);
			cr_assert_eq(st[0].flags[1], PRS_PYF_GROUP_END, "3.%u: %#x", minor, st[0].flags[1]);
		}
		cr_assert_eq(st[0].flags[2], PRS_PYF_GROUP_END, "3.%u", minor);
		/* B: not started */
		cr_assert_eq(st[1].nframes, 1, "3.%u", minor);
		cr_assert_eq(st[1].code[0], cb, "3.%u", minor);
		cr_assert_eq(st[1].off[0], -1, "3.%u: %d", minor, st[1].off[0]);
		/* C: no frame at all */
		cr_assert_eq(st[2].nframes, 0, "3.%u", minor);
		cr_assert_eq(st[2].top, 0, "3.%u", minor);
		cr_assert(!st[2].truncated, "3.%u", minor);
		/* the GIL released: nobody holds it */
		world_gil(&W, in1, 0);
		walk_all();
		cr_assert(!st[0].holds_gil && !st[1].holds_gil, "3.%u", minor);
		(void)s0;
		(void)s1;
	}
}

/* Offsets at the edges: a huge instruction offset is clamped to INT32_MAX, 3.10 counts code units
 * of 2 bytes. */
Test(python_rawwalk, offsets_at_the_edges)
{
	for (unsigned minor = 6; minor <= 13; minor++) {
		uint64_t c, f;

		fresh(minor);
		c = img_alloc(256);
		f = world_frame(&W, c, 0, 0, 0, true);
		one_thread(f);
		world_frame_instr(&W, f, c, minor <= 10 ? 0x7fffffff : 0x7fffffffffull);
		walk_all();
		cr_assert_eq(st[0].nframes, 1);
		cr_assert_eq(st[0].off[0], INT32_MAX,
			     "3.%u: %d", minor, st[0].off[0]);
		world_frame_instr(&W, f, c, minor <= 10 ? 7 : 14);
		walk_all();
		cr_assert_eq(st[0].off[0], minor == 10 ? 14 : 7, "3.%u: %d", minor, st[0].off[0]);
	}
}

Test(python_rawwalk, frame_loop_is_cut)
{
	for (unsigned minor = 6; minor <= 13; minor++) {
		uint64_t c = 0, f1, f2, f3;

		fresh(minor);
		c = img_alloc(256);
		f1 = world_frame(&W, c, 1, 0, 0, true);
		f2 = world_frame(&W, c, 2, f1, 0, true);
		f3 = world_frame(&W, c, 3, f2, 0, true);
		img_put64(f1 + W.L->frame_back, f3); /* f3 -> f2 -> f1 -> f3 ... */
		one_thread(f3);
		walk_all();
		cr_assert_eq(st[0].nframes, 3, "3.%u", minor);
		cr_assert(st[0].truncated);
		cr_assert_eq(st[0].cycles, 1);
		cr_assert_eq(st[0].flags[2] & PRS_PYF_GROUP_END, PRS_PYF_GROUP_END, "the last frame ends its group");
	}
}

Test(python_rawwalk, bad_pointers_end_the_walk)
{
	for (unsigned minor = 6; minor <= 13; minor++) {
		uint64_t c, f;

		fresh(minor);
		c = img_alloc(256);
		img.brk = (img.brk + 4095) & ~4095ull; /* the frame on a page of its own */
		f = world_frame(&W, c, 1, UNMAPPED, 0, true);
		img.brk = (img.brk + 4095) & ~4095ull;
		one_thread(f);
		walk_all();
		cr_assert_eq(st[0].nframes, 1, "3.%u", minor);
		cr_assert(st[0].truncated);
		cr_assert_eq(st[0].read_errors, 1);
		/* an odd pointer is not even read */
		img.reads = 0;
		img_put64(f + W.L->frame_back, BASE + 0x1003);
		walk_all();
		cr_assert_eq(st[0].nframes, 1);
		cr_assert_eq(st[0].bad_frames, 1);
		cr_assert_eq(st[0].read_errors, 0);
		/* a top frame in a hole of the image */
		img.hole[0] = f & ~4095ull;
		walk_all();
		cr_assert_eq(st[0].nframes, 0, "3.%u", minor);
		cr_assert(st[0].truncated);
		cr_assert_eq(st[0].read_errors, 1);
	}
}

Test(python_rawwalk, deeper_than_the_bound)
{
	for (unsigned minor = 6; minor <= 13; minor += 7) { /* a PyFrameObject and an _PyInterpreterFrame */
		uint64_t c, prev = 0;

		fresh(minor);
		c = img_alloc(256);
		for (unsigned i = 0; i < PRS_MAX_PY_FRAMES + 300; i++)
			prev = world_frame(&W, c, i % 16, prev, 0, true);
		one_thread(prev);
		walk_all();
		cr_assert_eq(st[0].nframes, PRS_MAX_PY_FRAMES, "3.%u", minor);
		cr_assert(st[0].truncated);
	}
}

/* 3.12+: a chain of shims only (owner 3: never a Python frame) is bounded too, with no frame. */
Test(python_rawwalk, nothing_but_shims)
{
	for (unsigned minor = 12; minor <= 13; minor++) {
		uint64_t c, prev = 0;

		fresh(minor);
		c = img_alloc(256);
		for (unsigned i = 0; i < PRS_MAX_PY_FRAMES + 300; i++)
			prev = world_frame(&W, c, 0, prev, 3, false);
		one_thread(prev);
		img.reads = 0;
		walk_all();
		cr_assert_eq(st[0].nframes, 0);
		cr_assert(st[0].truncated);
		cr_assert_leq(img.reads, PRS_MAX_PY_FRAMES + 64 + 16, "%u reads", img.reads);
	}
}

Test(python_rawwalk, thread_and_interpreter_loops_are_cut)
{
	for (unsigned minor = 6; minor <= 13; minor++) {
		struct prs_pywalk_iter it;
		uint64_t in, t1, t2;
		int n = 0;

		fresh(minor);
		in = world_interp(&W);
		t1 = world_thread(&W, in, 11);
		t2 = world_thread(&W, in, 12);
		img_put64(t2 + W.L->tstate_next, t1); /* t1 -> t2 -> t1 ... */
		img_put64(in + W.L->interp_next, in); /* and the interpreter list on itself */
		cr_assert_eq(prs_pywalk_begin(&W.walk, &mr, &it), 0);
		while (prs_pywalk_next(&W.walk, &mr, &it, &st[0]) > 0)
			cr_assert_lt(++n, 3, "3.%u: the loop was followed", minor);
		cr_assert_eq(n, 2);
		cr_assert_eq(it.cycles, 2, "3.%u: one thread loop and one interpreter loop", minor);
		/* a thread state pointer into nothing ends the list, counted */
		img_put64(t2 + W.L->tstate_next, UNMAPPED);
		img_put64(in + W.L->interp_next, 0);
		cr_assert_eq(prs_pywalk_begin(&W.walk, &mr, &it), 0);
		n = 0;
		while (prs_pywalk_next(&W.walk, &mr, &it, &st[0]) > 0)
			n++;
		cr_assert_eq(n, 2);
		cr_assert_eq(it.read_errors, 1);
	}
}

Test(python_rawwalk, no_interpreter_or_no_process)
{
	for (unsigned minor = 6; minor <= 13; minor++) {
		struct prs_pywalk_iter it;
		int n = -1;

		fresh(minor);
		cr_assert_eq(prs_pywalk_begin(&W.walk, &mr, &it), -EINVAL, "3.%u: no interpreter yet", minor);
		cr_assert_eq(prs_pywalk_next(&W.walk, &mr, &it, &st[0]), 0);
		one_thread(0);
		cr_assert_eq(walk_all(), 1);
		img.gone = true;
		cr_assert_eq(prs_pywalk_all(&W.walk, &mr, st, 4, &n), -ESRCH);
		cr_assert_eq(n, 0);
	}
}

/* A thread whose process exits between its thread state and its frames: a cut walk, no crash. */
Test(python_rawwalk, gone_mid_walk)
{
	struct prs_pywalk_iter it;
	uint64_t c, f;

	fresh(12);
	c = img_alloc(256);
	f = world_frame(&W, c, 1, world_frame(&W, c, 2, 0, 0, false), 0, false);
	one_thread(f);
	cr_assert_eq(prs_pywalk_begin(&W.walk, &mr, &it), 0);
	cr_assert_eq(prs_pywalk_next(&W.walk, &mr, &it, &st[0]), 1);
	img.gone = true;
	prs_pywalk_thread(&W.walk, &mr, &it, &st[0]);
	cr_assert_eq(st[0].nframes, 0);
	cr_assert(st[0].truncated);
	cr_assert_eq(st[0].read_errors, 1);
}

/* ---- random images ---- */

static uint64_t rng;

static uint64_t next_rand(void)
{
	return img_rand(&rng);
}

/*
 * Images of random words, most of them aligned pointers back into the image (so walks go
 * somewhere): every walk of every version ends, within its bounds, whatever it meets. The rounds
 * must have walked some threads and frames, or the test proved nothing.
 */
Test(python_rawwalk, random_images_never_crash)
{
	const char *seed_env = getenv("PRS_TEST_SEED");
	uint64_t seed = seed_env ? strtoull(seed_env, NULL, 0) : (uint64_t)time(NULL);
	struct prs_py_stack *big = calloc(64, sizeof(*big));
	unsigned threads = 0, frames = 0;

	cr_assert(big);
	fprintf(stderr, "python_rawwalk.random_images_never_crash: seed %llu (PRS_TEST_SEED=%llu to replay)\n",
		(unsigned long long)seed, (unsigned long long)seed);
	rng = seed | 1;
	for (unsigned round = 0; round < 40; round++) {
		unsigned minor = 6 + round % 8;
		int n = -1, rc;

		fresh(minor);
		for (uint64_t a = BASE + 4096; a + 8 <= BASE + (1u << 20); a += 8) {
			uint64_t r = next_rand();

			img_put64(a, r % 8 ? BASE + (((r >> 8) % (1u << 20)) & ~7ull) : r);
		}
		W.walk.runtime = W.runtime ? BASE + 4096 + 8 * (next_rand() % 100000) : 0;
		W.walk.interp_head_var = W.runtime ? 0 : BASE + 4096 + 8 * (next_rand() % 100000);
		img.reads = 0;
		rc = prs_pywalk_all(&W.walk, &mr, big, 64, &n);
		cr_assert(rc == 0 || rc == -EINVAL, "3.%u: %d", minor, rc);
		cr_assert(n >= 0 && n <= 64);
		threads += (unsigned)n;
		for (int i = 0; i < n; i++) {
			cr_assert_leq(big[i].nframes, PRS_MAX_PY_FRAMES);
			frames += big[i].nframes;
		}
	}
	free(big);
	cr_assert_gt(threads, 40, "%u threads walked", threads);
	cr_assert_gt(frames, 40, "%u frames walked", frames);
}
