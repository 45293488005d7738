/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the naming step (src/python/code.c) and of the sample that joins it to the walk
 * (src/python/reader.c), on memory images of every generated layout row, 3.6 to 3.13
 * (py_world.h): names (qualnames from 3.11), files and lines from each version's line-table
 * format; the same frames through prs_py_walk + prs_py_name as through prs_py_sample; a raw stack
 * named on its own (as one from the agent would be); the code cache's misses, hits and stale
 * entries; 3.11+ frames being set up hidden; the kernel tid found in struct pthread (≤3.10).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pyrsprof/profile.h"
#include "python/python-internal.h"
#include "py_image.h"
#include "py_world.h"

#include "util/banned.h"

#define BASE 0x10000000ull
#define SIZE (4u << 20)

static struct world W;
static struct prs_memreader mr;
static struct prs_py *py;
static struct prs_profile *prof;
static struct prs_py_thread *th;  /* 4 */
static struct prs_py_stack *raw;  /* 4 */

static void setup(void)
{
	img_init(BASE, SIZE);
	mr = img_reader();
	th = calloc(4, sizeof(*th));
	raw = calloc(4, sizeof(*raw));
	cr_assert(th && raw);
}

static void teardown(void)
{
	prs_py_free(py);
	prs_profile_free(prof);
	free(th);
	free(raw);
	img_release();
}

TestSuite(python_name, .init = setup, .fini = teardown);

/* A fresh image with the world of 3.minor, and a reader over it. */
static void fresh(unsigned minor)
{
	world_fresh(&W, minor, &mr, &py, &prof);
}

/* Checks frame i of thread 0: its name, and its file (NULL: not checked) and line (< 0: not). */
static void expect(unsigned i, const char *name, const char *file, int line)
{
	const struct prs_frame *f;

	cr_assert_lt(i, th[0].nframes, "3.%u: frame %u of %u", W.minor, i, th[0].nframes);
	f = &prof->frames[th[0].frames[i]];
	cr_assert_str_eq(prof->strings[f->name], name, "3.%u: frame %u", W.minor, i);
	if (file)
		cr_assert_str_eq(prof->strings[f->file], file, "3.%u: frame %u", W.minor, i);
	if (line >= 0)
		cr_assert_eq(f->line, (uint32_t)line, "3.%u: frame %u on line %u, not %d", W.minor, i, f->line, line);
}

/* One sample into th; it must find `threads` threads. */
static void sample_of(int threads)
{
	struct prs_err err;
	int n = -1;

	cr_assert_eq(prs_py_sample(py, prof, th, 4, &n, &err), 0, "3.%u: %s", W.minor, err.msg);
	cr_assert_eq(n, threads, "3.%u: %d threads", W.minor, n);
}

static struct prs_py_stats stats(void)
{
	struct prs_py_stats s;

	prs_py_get_stats(py, &s);
	return s;
}

/* outer (group 1) -> Klass.mid -> inner (group 2, inner in a generator 3.11+), on one thread. */
static uint64_t c_outer, c_mid, c_inner;

static void three_frames(void)
{
	uint64_t f0, f1, f2, in = world_interp(&W), ts = world_thread(&W, in, 4242);

	c_outer = world_code(&W, "outer", "/app/x.py", 10);
	c_mid = world_code(&W, "Klass.mid", "/app/x.py", 20);
	c_inner = world_code(&W, "inner", "/app/y.py", 30);
	if (W.minor >= 12) {
		f0 = world_frame(&W, c_outer, 3, world_frame(&W, c_outer, 0, 0, 3, false), 0, false);
		f1 = world_frame(&W, c_mid, 9, world_frame(&W, c_outer, 0, f0, 3, false), 0, false);
	} else {
		f0 = world_frame(&W, c_outer, 3, 0, 0, true);
		f1 = world_frame(&W, c_mid, 9, f0, 0, true);
	}
	f2 = world_frame(&W, c_inner, 12, f1, 1, false);
	world_top(&W, ts, f2);
	world_gil(&W, in, ts);
}

Test(python_name, every_version_names_files_lines)
{
	for (unsigned minor = 6; minor <= 13; minor++) {
		fresh(minor);
		three_frames();
		sample_of(1);
		cr_assert_eq(th[0].tid, 4242, "3.%u", minor);
		cr_assert(th[0].holds_gil);
		cr_assert_eq(th[0].nframes, 3, "3.%u", minor);
		expect(0, "inner", "/app/y.py", world_line(&W, 30, 12));
		/* the qualname where there is one (3.11+), the name before */
		expect(1, minor >= 11 ? "Klass.mid" : "mid", "/app/x.py", world_line(&W, 20, 9));
		expect(2, "outer", "/app/x.py", world_line(&W, 10, 3));
		cr_assert_eq(th[0].fflags[0], minor <= 10 ? PRS_PYF_GROUP_END : 0, "3.%u", minor);
		cr_assert_eq(th[0].fflags[1], PRS_PYF_GROUP_END);
		cr_assert_eq(th[0].fflags[2], PRS_PYF_GROUP_END);
		cr_assert_eq(stats().code_misses, 3);
		cr_assert_eq(stats().bad_lines, 0);
	}
}

Test(python_name, walk_then_name_is_the_sample)
{
	for (unsigned minor = 6; minor <= 13; minor++) {
		struct prs_py_thread *t2 = calloc(1, sizeof(*t2));
		struct prs_err err;
		int n = -1;

		cr_assert(t2);
		fresh(minor);
		three_frames();
		sample_of(1);
		cr_assert_eq(prs_py_walk(py, raw, 4, &n, &err), 0);
		cr_assert_eq(n, 1);
		cr_assert_eq(raw[0].nframes, 3);
		cr_assert_eq(raw[0].code[1], c_mid);
		cr_assert_eq(prs_py_name(py, prof, &raw[0], t2), 0);
		prs_py_end(py);
		cr_assert_eq(t2->nframes, th[0].nframes);
		cr_assert_eq(t2->tid, th[0].tid);
		cr_assert_eq(t2->holds_gil, th[0].holds_gil);
		cr_assert_arr_eq(t2->frames, th[0].frames, th[0].nframes * sizeof(uint32_t), "3.%u", minor);
		cr_assert_arr_eq(t2->fflags, th[0].fflags, th[0].nframes, "3.%u", minor);
		cr_assert_eq(stats().code_misses, 3, "the second pass hit the cache");
		free(t2);
	}
}

/*
 * raw[0] as a walk elsewhere would leave it: thread 7, n (1 or 2) frames of code object c, the
 * innermost at unit `unit`, the outer one (n 2) at unit 2, one group.
 */
static void raw_stack(uint64_t c, uint32_t n, unsigned unit)
{
	memset(&raw[0], 0, sizeof(raw[0]));
	raw[0].tid = 7;
	raw[0].nframes = n;
	for (uint32_t i = 0; i < n; i++) {
		raw[0].code[i] = c;
		raw[0].off[i] = world_off(&W, i ? 2 : unit);
	}
	raw[0].flags[n - 1] = PRS_PYF_GROUP_END;
}

/*
 * The ptrace source's two steps: the walk and prs_py_load_heads while the target is stopped, the
 * naming after it ran again. Between them the code object of a frame is freed and another one
 * made at its address (its head now that of "other": its name, file, line table and 3.12+
 * co_version): the frame is still named by the object it ran. (The raw stack is made here, as
 * a walk leaves it: no read of the walk brings the head's page into the cache.) The next sample
 * at that address sees the new object.
 */
Test(python_name, heads_loaded_at_the_walk_name_the_frames)
{
	for (unsigned minor = 6; minor <= 13; minor++) {
		uint8_t was[1024];
		uint64_t c, other;

		fresh(minor);
		c = world_code(&W, "f_000031", "f.py", 1);
		other = world_code(&W, "other", "/app/z.py", 40);
		cr_assert_leq((size_t)W.L->code_size, sizeof(was));
		memcpy(was, img_at(c), (size_t)W.L->code_size);
		raw_stack(c, 1, 2);
		for (int k = 0; k < 2; k++) { /* the first sample from nothing, the second warm */
			prs_py_begin(py);
			prs_py_load_heads(py, raw, 1);
			memcpy(img_at(c), img_at(other), (size_t)W.L->code_size);
			cr_assert_eq(prs_py_name(py, prof, &raw[0], &th[0]), 0);
			prs_py_end(py);
			cr_assert_eq(th[0].nframes, 1, "3.%u", minor);
			expect(0, "f_000031", "f.py", -1);
			cr_assert_eq(prs_py_name(py, prof, &raw[0], &th[0]), 0);
			prs_py_end(py);
			expect(0, "other", "/app/z.py", -1);
			memcpy(img_at(c), was, (size_t)W.L->code_size); /* back, for the next pass */
		}
	}
}

/*
 * A raw stack that no walk of this reader produced (as the agent's will be), named on its own:
 * each call reads the code objects afresh, so a name rebuilt at the same addresses is seen.
 * 3.12+: the changed co_version tells; before, the contents of the strings.
 */
Test(python_name, raw_stack_from_elsewhere)
{
	for (unsigned minor = 6; minor <= 13; minor++) {
		uint64_t c, name;

		fresh(minor);
		c = world_code(&W, "f_000028", "f.py", 1);
		name = img_get64(c + W.L->code_name);
		raw_stack(c, 2, 9);
		if (W.L->code_version >= 0)
			img_put32(c + W.L->code_version, 500);
		cr_assert_eq(prs_py_name(py, prof, &raw[0], &th[0]), 0);
		prs_py_end(py);
		cr_assert_eq(th[0].tid, 7);
		cr_assert_eq(th[0].nframes, 2, "3.%u", minor);
		expect(0, "f_000028", "f.py", world_line(&W, 1, 9));
		expect(1, "f_000028", "f.py", world_line(&W, 1, 2));
		/* the code object and its name die and are rebuilt at the same addresses */
		memcpy(img_at(name + W.L->str_ascii_size), "f_000029", 8);
		if (W.L->code_version >= 0)
			img_put32(c + W.L->code_version, 502);
		cr_assert_eq(prs_py_name(py, prof, &raw[0], &th[0]), 0);
		prs_py_end(py);
		expect(0, "f_000029", NULL, -1);
		cr_assert_eq(stats().code_misses, 1);
		cr_assert_eq(stats().code_stale, 1, "3.%u", minor);
		/* unchanged: a hit */
		cr_assert_eq(prs_py_name(py, prof, &raw[0], &th[0]), 0);
		prs_py_end(py);
		cr_assert_eq(stats().code_stale, 1);
		cr_assert_geq(stats().code_hits, 2);
		/* not a code object any more: dropped, counted */
		img_put64(c + W.L->ob_type, W.t_str);
		cr_assert_eq(prs_py_name(py, prof, &raw[0], &th[0]), 0);
		prs_py_end(py);
		cr_assert_eq(th[0].nframes, 0);
		cr_assert_eq(stats().bad_frames, 2);
	}
}

/*
 * One code object at many instruction offsets in one stack, as a recursive function's frames
 * are: each frame's line is its own offset's, whatever the order the offsets come in and however
 * many there are (more than the few a code entry remembers: the memo's replacement is crossed
 * both ways), at the first naming and again from the cache.
 */
Test(python_name, one_code_object_at_many_offsets)
{
	static const unsigned units[] = { 0, 8, 1, 9, 0, 8, 15, 7, 2, 10, 15, 0, 3, 11, 8,
					  4, 12, 5, 13, 6, 14, 7, 15, 9, 1, 1, 10, 2 };
	const unsigned n = sizeof(units) / sizeof(units[0]);

	for (unsigned minor = 6; minor <= 13; minor++) {
		uint64_t c;

		fresh(minor);
		c = world_code(&W, "rec", "r.py", 40);
		cr_assert_neq(world_line(&W, 40, 0), world_line(&W, 40, 8));
		memset(&raw[0], 0, sizeof(raw[0]));
		raw[0].tid = 7;
		raw[0].nframes = n;
		for (unsigned i = 0; i < n; i++) {
			raw[0].code[i] = c;
			raw[0].off[i] = world_off(&W, units[i]);
			raw[0].flags[i] = PRS_PYF_GROUP_END;
		}
		for (int pass = 0; pass < 2; pass++) {
			cr_assert_eq(prs_py_name(py, prof, &raw[0], &th[0]), 0);
			prs_py_end(py);
			cr_assert_eq(th[0].nframes, n, "3.%u", minor);
			for (unsigned i = 0; i < n; i++)
				expect(i, "rec", "r.py", world_line(&W, 40, units[i]));
		}
		cr_assert_eq(stats().code_misses, 1);
		cr_assert_eq(stats().bad_lines, 0);
	}
}

/* 3.11+: a frame before its first traceable instruction is hidden (its group passes on to the
 * frame before it), unless a generator owns it. */
Test(python_name, frames_being_set_up_are_hidden)
{
	for (unsigned minor = 11; minor <= 13; minor++) {
		uint64_t c1, c2, f1, f2, ts;

		fresh(minor);
		c1 = world_code(&W, "caller", "f.py", 1);
		c2 = world_code(&W, "callee", "f.py", 50);
		img_put32(c2 + W.L->code_firsttraceable, 4);
		f1 = world_frame(&W, c1, 5, 0, 0, true);
		f2 = world_frame(&W, c2, 3, f1, 0, true);
		ts = world_thread(&W, world_interp(&W), 1);
		world_top(&W, ts, f2);
		sample_of(1);
		cr_assert_eq(th[0].nframes, 1, "3.%u", minor);
		expect(0, "caller", NULL, -1);
		cr_assert_eq(th[0].fflags[0], PRS_PYF_GROUP_END);
		/* at its first traceable instruction it shows */
		world_frame_instr(&W, f2, c2, 8);
		sample_of(1);
		cr_assert_eq(th[0].nframes, 2);
		expect(0, "callee", NULL, -1);
		/* a generator's frame is never being set up */
		world_frame_instr(&W, f2, c2, 2);
		img_put8(f2 + W.L->frame_owner, (uint8_t)W.L->owner_generator);
		sample_of(1);
		cr_assert_eq(th[0].nframes, 2, "3.%u", minor);
		expect(0, "callee", NULL, world_line(&W, 50, 1));
	}
}

/* A recursion of 200 frames of one code object: one miss, then validated once per sample. */
Test(python_name, recursion_is_one_entry)
{
	for (unsigned minor = 6; minor <= 13; minor += 7) {
		uint64_t c, prev = 0, ts;
		struct prs_py_stats a, b;

		fresh(minor);
		c = world_code(&W, "rec", "r.py", 1);
		for (unsigned i = 0; i < 200; i++)
			prev = world_frame(&W, c, i % 16, prev, 0, true);
		ts = world_thread(&W, world_interp(&W), 1);
		world_top(&W, ts, prev);
		sample_of(1);
		a = stats();
		cr_assert_eq(th[0].nframes, 200);
		cr_assert_eq(a.code_misses, 1);
		cr_assert_eq(a.code_hits, 199);
		sample_of(1);
		b = stats();
		cr_assert_eq(b.code_misses, 1);
		cr_assert_eq(b.code_hits - a.code_hits, 200);
		expect(0, "rec", "r.py", world_line(&W, 1, 199 % 16));
		expect(199, "rec", "r.py", world_line(&W, 1, 0));
	}
}

/* ≤3.10: the tid's place in struct pthread is found once, from a live tid (glibc's 0x2d0 or
 * musl's 0x30) or the pid's value; this process stands for the target. */
Test(python_name, tid_offset_is_calibrated)
{
	static const int32_t offs[] = { 0x2d0, 0x30 };

	for (unsigned k = 0; k < 2; k++) {
		uint64_t ts, pt;

		fresh(9);
		ts = world_thread(&W, world_interp(&W), 1);
		pt = img_get64(ts + W.L->tstate_thread_id);
		img_put32(pt + WORLD_TID_OFF, 0);
		img_put32(pt + (uint64_t)offs[k], (uint32_t)getpid());
		py->pid = getpid();
		py->walk.tid_off = -1;
		sample_of(1);
		cr_assert_eq(py->walk.tid_off, offs[k]);
		cr_assert_eq(th[0].tid, getpid());
	}
}
