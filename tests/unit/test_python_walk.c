/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for the CPython reader's walk, caches and merge on synthetic memory images: the test
 * lays out a 3.12 runtime, interpreter, thread state, frames, code objects and strings in a buffer
 * (with the generated 3.12 layout) and serves it through a memreader, so the truth is what the test
 * wrote. Covers names/qualnames/files/lines, GIL holder, shim group boundaries, a frame loop, a
 * non-code object, an unmapped pointer, a stack deeper than PRS_MAX_PY_FRAMES, a code object
 * replaced at the same address (validation on hit), non-ASCII names, and the native/Python merge.
 * Also parses a _Py_DebugOffsets image holding the values measured live on 3.13.0
 * and checks it against the row generated from the 3.13 headers.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "pyrsprof/profile.h"
#include "python/python-internal.h"
#include "py_image.h"

#include "util/banned.h"

#define BASE 0x10000000ull
#define SIZE (1u << 20)

static const struct prs_py_layout *L;
static uint64_t t_code, t_str, t_bytes;

static uint64_t mkbytes(const uint8_t *b, size_t n)
{
	uint64_t a = img_alloc((size_t)L->bytes_sval + n + 1);

	img_put64(a + L->ob_type, t_bytes);
	img_put64(a + L->ob_size, n);
	memcpy(img_at(a + L->bytes_sval), b, n);
	return a;
}

/* Location table: units 0-7 on firstline+2, units 8-15 on firstline+3. */
static uint64_t mkcode(uint64_t qual, uint64_t file, int firstline)
{
	static const uint8_t tab[] = { 0x80 | (13 << 3) | 7, 4, 0x80 | (11 << 3) | 7, 0, 0 };
	uint64_t a = img_alloc((size_t)L->code_adaptive + 32);

	img_put64(a + L->ob_type, t_code);
	img_put64(a + L->ob_size, 16);
	img_put64(a + L->code_name, qual);
	img_put64(a + L->code_qualname, qual);
	img_put64(a + L->code_filename, file);
	img_put64(a + L->code_linetable, mkbytes(tab, sizeof(tab)));
	img_put32(a + L->code_firstlineno, (uint32_t)firstline);
	img_put32(a + L->code_firsttraceable, 0);
	return a;
}

static uint64_t mkframe(uint64_t code, unsigned unit, uint64_t previous, uint8_t owner)
{
	uint64_t f = img_alloc((size_t)L->frame_size);

	img_put64(f + L->frame_code, code);
	img_put64(f + L->frame_back, previous);
	img_put64(f + L->frame_instr, code + L->code_adaptive + 2 * unit);
	img_put8(f + L->frame_owner, owner);
	return f;
}

static uint64_t runtime, interp, tstate, cframe, gil;
static struct prs_py *py;
static struct prs_profile *prof;
static struct prs_py_thread th[4];

static void setup(void)
{
	struct prs_memreader mr = img_reader();
	uint64_t tp;

	L = prs_py_layout_find(3, 12);
	cr_assert(L, "no generated 3.12 row");
	img_init(BASE, SIZE);
	t_code = img_alloc(512);
	t_str = img_alloc(512);
	img.L = L;
	img.str_type = t_str;
	t_bytes = img_alloc(512);
	tp = img_mkstr("code");
	img_put64(t_code + L->tp_name, tp);
	runtime = img_alloc((size_t)L->runtime_size < 4096 ? 4096 : 4096);
	interp = img_alloc(4096);
	tstate = img_alloc((size_t)L->tstate_size);
	cframe = img_alloc(64);
	gil = img_alloc(256);
	img_put64(runtime + L->runtime_interp_head, interp);
	img_put64(interp + L->interp_tstate_head, tstate);
	img_put64(interp + L->interp_gil_ptr, gil);
	img_put32(gil + L->gil_locked, 1);
	img_put64(gil + L->gil_last_holder, tstate);
	img_put64(tstate + L->tstate_interp, interp);
	img_put64(tstate + L->tstate_thread_id, 0x7f0000001000ull);
	img_put32(tstate + L->tstate_native_thread_id, 4242);
	img_put64(tstate + L->tstate_cframe, cframe);
	cr_assert_eq(prs_py_new_raw(L, &mr, 0x030c01f0, &py), 0);
	py->walk.runtime = runtime;
	py->code_type = t_code;
	py->str_type = t_str;
	py->bytes_type = t_bytes;
	prof = prs_profile_new();
	cr_assert(prof);
}

static void teardown(void)
{
	prs_py_free(py);
	prs_profile_free(prof);
	img_release();
}

static void set_top(uint64_t f) { img_put64(cframe + L->cframe_current_frame, f); }

static const char *fname(uint32_t fid) { return prof->strings[prof->frames[fid].name]; }
static const char *ffile(uint32_t fid) { return prof->strings[prof->frames[fid].file]; }
static uint32_t fline(uint32_t fid) { return prof->frames[fid].line; }

static int sample(void)
{
	struct prs_err err;
	int n = -1;

	cr_assert_eq(prs_py_sample(py, prof, th, 4, &n, &err), 0, "%s", err.msg);
	return n;
}

TestSuite(python_walk, .init = setup, .fini = teardown);

Test(python_walk, names_lines_gil_and_groups)
{
	uint64_t file = img_mkstr("/app/x.py");
	uint64_t co = mkcode(img_mkstr("outer"), file, 10), cm = mkcode(img_mkstr("Klass.mid"), file, 20),
		 ci = mkcode(img_mkstr("inner"), file, 30);
	uint64_t shim = mkframe(co, 0, 0, 3);
	uint64_t fo = mkframe(co, 3, shim, 0), fm = mkframe(cm, 9, fo, 0), fi = mkframe(ci, 15, fm, 0);

	set_top(fi);
	cr_assert_eq(sample(), 1);
	cr_assert_eq(th[0].tid, 4242);
	cr_assert(th[0].holds_gil);
	cr_assert_eq(th[0].nframes, 3);
	cr_assert_str_eq(fname(th[0].frames[0]), "inner");
	cr_assert_eq(fline(th[0].frames[0]), 33);
	cr_assert_str_eq(fname(th[0].frames[1]), "Klass.mid");
	cr_assert_eq(fline(th[0].frames[1]), 23);
	cr_assert_str_eq(fname(th[0].frames[2]), "outer");
	cr_assert_eq(fline(th[0].frames[2]), 12);
	cr_assert_str_eq(ffile(th[0].frames[2]), "/app/x.py");
	/* one shim below "outer": one group, ending at outer */
	cr_assert_eq(th[0].fflags[0] & PRS_PYF_GROUP_END, 0);
	cr_assert_eq(th[0].fflags[1] & PRS_PYF_GROUP_END, 0);
	cr_assert_neq(th[0].fflags[2] & PRS_PYF_GROUP_END, 0);
	/* the GIL released: nobody holds it */
	img_put32(gil + L->gil_locked, 0);
	sample();
	cr_assert(!th[0].holds_gil);
	/* second sample hits the cache */
	{
		struct prs_py_stats st;

		prs_py_get_stats(py, &st);
		cr_assert_eq(st.code_misses, 3);
		cr_assert_geq(st.code_hits, 3);
	}
}

Test(python_walk, shim_between_groups)
{
	uint64_t file = img_mkstr("f.py");
	uint64_t c1 = mkcode(img_mkstr("a"), file, 1), c2 = mkcode(img_mkstr("b"), file, 1);
	uint64_t s0 = mkframe(c1, 0, 0, 3), f1 = mkframe(c1, 1, s0, 0);
	uint64_t s1 = mkframe(c1, 0, f1, 3), f2 = mkframe(c2, 1, s1, 0);

	set_top(f2);
	sample();
	cr_assert_eq(th[0].nframes, 2);
	cr_assert_neq(th[0].fflags[0] & PRS_PYF_GROUP_END, 0);
	cr_assert_neq(th[0].fflags[1] & PRS_PYF_GROUP_END, 0);
}

/* Walks from top: cut by a loop after nframes frames, one cycle counted. */
static void assert_loop_cut(uint64_t top, unsigned nframes)
{
	struct prs_py_stats st;

	set_top(top);
	sample();
	prs_py_get_stats(py, &st);
	cr_assert_eq(th[0].nframes, nframes);
	cr_assert(th[0].truncated);
	cr_assert_eq(st.cycles, 1);
}

Test(python_walk, loop_is_cut)
{
	uint64_t file = img_mkstr("f.py");
	uint64_t c = mkcode(img_mkstr("spin"), file, 1);
	uint64_t f1 = mkframe(c, 1, 0, 0), f2 = mkframe(c, 2, f1, 0);

	img_put64(f1 + L->frame_back, f2); /* f1 <-> f2 */
	assert_loop_cut(f2, 2);
}

/* Frames at ever lower addresses (a data stack's callers, as the walk mostly meets them), the
 * lowest one's caller pointing back up the stack: the walk skips the search of the frames it
 * visited while it only goes down, and still cuts the loop when the pointer goes up again. */
Test(python_walk, loop_back_up_a_descending_stack_is_cut)
{
	uint64_t file = img_mkstr("f.py");
	uint64_t c = mkcode(img_mkstr("down"), file, 1);
	uint64_t f[100], prev = 0;
	unsigned i;

	for (i = 0; i < 100; i++) /* f[0] lowest, f[99] the top */
		prev = f[i] = mkframe(c, i % 16, prev, 0);
	cr_assert_lt(f[0], f[99]);
	img_put64(f[0] + L->frame_back, f[10]); /* 99 .. 0, then 10 again */
	assert_loop_cut(f[99], 100);
}

Test(python_walk, garbage_and_unmapped)
{
	uint64_t file = img_mkstr("f.py");
	uint64_t c = mkcode(img_mkstr("ok"), file, 1);
	uint64_t notcode = img_mkstr("i am a str, not a code object");
	uint64_t f0 = mkframe(c, 1, 0xdead0000ull, 0); /* previous: unmapped */
	uint64_t f1 = mkframe(notcode, 1, f0, 0), f2 = mkframe(c, 9, f1, 0);
	struct prs_py_stats st;

	set_top(f2);
	sample();
	prs_py_get_stats(py, &st);
	cr_assert_eq(th[0].nframes, 2); /* f2 and f0; f1 rejected */
	cr_assert_str_eq(fname(th[0].frames[0]), "ok");
	cr_assert_eq(fline(th[0].frames[0]), 4);
	cr_assert_eq(fline(th[0].frames[1]), 3);
	cr_assert_eq(st.bad_frames, 1);
	cr_assert_geq(st.read_errors, 1);
	cr_assert(th[0].truncated);
	/* an instruction pointer outside the code: no line, counted */
	img_put64(f2 + L->frame_instr, c + L->code_adaptive + 2 * 500);
	sample();
	prs_py_get_stats(py, &st);
	cr_assert_eq(fline(th[0].frames[0]), 0);
	cr_assert_eq(st.bad_lines, 1);
}

Test(python_walk, deeper_than_the_bound)
{
	uint64_t file = img_mkstr("deep.py");
	uint64_t c = mkcode(img_mkstr("rec"), file, 1);
	uint64_t prev = 0;
	unsigned i;

	for (i = 0; i < PRS_MAX_PY_FRAMES + 500; i++)
		prev = mkframe(c, i % 16, prev, 0);
	set_top(prev);
	sample();
	cr_assert_eq(th[0].nframes, PRS_MAX_PY_FRAMES);
	cr_assert(th[0].truncated);
}

Test(python_walk, reused_code_address_is_revalidated)
{
	uint64_t file = img_mkstr("f.py");
	uint64_t c = mkcode(img_mkstr("old_name"), file, 1);
	uint64_t f = mkframe(c, 1, 0, 0);
	struct prs_py_stats st;

	set_top(f);
	sample();
	cr_assert_str_eq(fname(th[0].frames[0]), "old_name");
	/* the code object dies and a new one is built at the same address */
	img_put64(c + L->code_qualname, img_mkstr("new_name"));
	img_put64(c + L->code_name, img_mkstr("new_name"));
	sample();
	prs_py_get_stats(py, &st);
	cr_assert_str_eq(fname(th[0].frames[0]), "new_name");
	cr_assert_eq(st.code_stale, 1);
	/* and then something that is not a code object at all */
	img_put64(c + L->ob_type, t_str);
	sample();
	cr_assert_eq(th[0].nframes, 0);
}

Test(python_walk, non_ascii_names)
{
	static const uint32_t lat[] = { 'h', 0xe9, 'l', 'l', 'o' };
	static const uint32_t cjk[] = { 0x65e5, 0x672c };
	static const uint32_t astral[] = { 'f', 0x20000 };
	uint64_t file = img_mkstr_cp(cjk, 2, 2, false);
	uint64_t c1 = mkcode(img_mkstr_cp(lat, 5, 1, false), file, 1);
	uint64_t c2 = mkcode(img_mkstr_cp(astral, 2, 4, false), file, 1);
	uint64_t f1 = mkframe(c1, 1, 0, 0), f2 = mkframe(c2, 1, f1, 0);

	set_top(f2);
	sample();
	cr_assert_eq(th[0].nframes, 2);
	cr_assert_str_eq(fname(th[0].frames[0]), "f\xf0\xa0\x80\x80");
	cr_assert_str_eq(fname(th[0].frames[1]), "h\xc3\xa9llo");
	cr_assert_str_eq(ffile(th[0].frames[1]), "\xe6\x97\xa5\xe6\x9c\xac");
}

Test(python_walk, process_gone_interp_missing)
{
	struct prs_err err;
	int n;

	img_put64(runtime + L->runtime_interp_head, 0);
	cr_assert_eq(prs_py_sample(py, prof, th, 4, &n, &err), -EINVAL);
	cr_assert_eq(n, 0);
}

/* ---- merge ---- */

Test(python_walk, merge)
{
	struct prs_py_thread t = { 0 };
	uint32_t out[32];
	size_t n;
	struct prs_py_stats st;
	/* native ids 101..108 for: leaf (zlib), list_sort (libpython), eval, plumbing (libpython),
	 * C extension, eval, Py_RunMain (libpython), __libc_start_main */
	const uint64_t pcs[] = { 0xa000, 0x3000, 0x1100, 0x3100, 0xb000, 0x1200, 0x4000, 0xc000 };
	const uint32_t ids[] = { 101, 102, 103, 104, 105, 106, 107, 108 };

	py->eval_lo[0] = 0x1000;
	py->eval_hi[0] = 0x2000;
	py->neval = 1;
	py->interp_lo[0] = 0x1000;
	py->interp_hi[0] = 0x9000;
	py->ninterp = 1;
	t.nframes = 3; /* P1 P2 in one eval call (3.11+ inlined), P3 in another */
	t.frames[0] = 1;
	t.frames[1] = 2;
	t.frames[2] = 3;
	t.fflags[1] = PRS_PYF_GROUP_END;
	t.fflags[2] = PRS_PYF_GROUP_END;

	n = prs_py_merge(py, pcs, ids, 8, &t, 0, out, 32);
	{
		const uint32_t want[] = { 3, 105, 2, 1, 102, 101 };

		cr_assert_eq(n, 6);
		cr_assert_arr_eq(out, want, sizeof(want));
	}
	n = prs_py_merge(py, pcs, ids, 8, &t, PRS_PY_NATIVE_ALL, out, 32);
	{
		const uint32_t want[] = { 108, 107, 3, 105, 104, 2, 1, 102, 101 };

		cr_assert_eq(n, 9);
		cr_assert_arr_eq(out, want, sizeof(want));
	}
	prs_py_get_stats(py, &st);
	cr_assert_eq(st.merge_mismatch, 0);
	/* the native unwind stopped after the first eval frame: the rest is Python-only */
	n = prs_py_merge(py, pcs, ids, 3, &t, 0, out, 32);
	{
		const uint32_t want[] = { 3, 2, 1, 102, 101 };

		cr_assert_eq(n, 5);
		cr_assert_arr_eq(out, want, sizeof(want));
	}
	prs_py_get_stats(py, &st);
	cr_assert_eq(st.merge_mismatch, 1);
	/* vm mode: no native frames */
	n = prs_py_merge(py, NULL, NULL, 0, &t, 0, out, 32);
	{
		const uint32_t want[] = { 3, 2, 1 };

		cr_assert_eq(n, 3);
		cr_assert_arr_eq(out, want, sizeof(want));
	}
	/* out too small: the root side is kept */
	n = prs_py_merge(py, pcs, ids, 8, &t, 0, out, 2);
	cr_assert_eq(n, 2);
	cr_assert_eq(out[0], 3);
	cr_assert_eq(out[1], 105);
}

/* ---- _Py_DebugOffsets ---- */

Test(python_debug_offsets, measured_3_13_image)
{
	/* positions and values read live from a 3.13.0 process */
	static const struct { unsigned pos; uint64_t val; } w[] = {
		{ 8, 0x030d00f0 }, { 16, 0 }, { 24, 283320 }, { 32, 608 }, { 40, 632 },
		{ 56, 7272 }, { 64, 7264 }, { 72, 7344 }, { 112, 16 }, { 120, 7752 }, { 128, 0 },
		{ 136, 7768 }, { 144, 7760 }, { 152, 304 }, { 160, 0 }, { 168, 8 }, { 176, 16 },
		{ 184, 72 }, { 192, 152 }, { 200, 160 }, { 208, 232 }, { 216, 32 }, { 224, 80 },
		{ 232, 8 }, { 240, 0 }, { 248, 56 }, { 256, 72 }, { 264, 70 }, { 272, 208 }, { 280, 112 },
		{ 288, 120 }, { 296, 128 }, { 304, 136 }, { 312, 68 }, { 320, 52 }, { 328, 96 },
		{ 336, 104 }, { 344, 200 }, { 352, 16 }, { 360, 8 }, { 368, 416 }, { 376, 24 },
		{ 512, 32 }, { 520, 16 }, { 528, 32 }, { 536, 64 }, { 544, 32 }, { 552, 16 }, { 560, 40 },
	};
	uint8_t dbg[1024] = "xdebugpy";
	const struct prs_py_layout *row = prs_py_layout_find(3, 13);
	struct prs_py_layout out;
	unsigned i;

	cr_assert(row);
	for (i = 0; i < sizeof(w) / sizeof(w[0]); i++)
		memcpy(dbg + w[i].pos, &w[i].val, 8);
	cr_assert_eq(prs_py_layout_from_debug_offsets(dbg, sizeof(dbg), row, &out), 0);
#define SAME(f) cr_expect_eq(out.f, row->f, #f ": debug offsets %d, headers %d", out.f, row->f)
	SAME(runtime_interp_head); SAME(interp_next); SAME(interp_tstate_head); SAME(interp_gil_ptr);
	SAME(gil_locked); SAME(gil_last_holder); SAME(tstate_next); SAME(tstate_interp);
	SAME(tstate_current_frame); SAME(tstate_thread_id); SAME(tstate_native_thread_id);
	SAME(frame_size); SAME(frame_back); SAME(frame_code); SAME(frame_instr); SAME(frame_owner);
	SAME(code_name); SAME(code_filename); SAME(code_qualname); SAME(code_linetable);
	SAME(code_firstlineno); SAME(code_adaptive); SAME(code_firsttraceable); SAME(ob_type);
	SAME(tp_name); SAME(ob_size); SAME(bytes_sval); SAME(str_state); SAME(str_length);
	SAME(str_ascii_size); SAME(str_compact_size); SAME(code_version); SAME(gil_cond); SAME(gil_size);
	/* co_version is not in the debug offsets: from a base row of another minor it is not trusted */
	{
		struct prs_py_layout other = *row;

		other.version_hex = 0x030c00f0;
		cr_assert_eq(prs_py_layout_from_debug_offsets(dbg, sizeof(dbg), &other, &out), 0);
		cr_expect_eq(out.code_version, -1);
	}
	/* a wrong cookie, a free-threaded build and an absurd offset are refused */
	dbg[0] = 'X';
	cr_assert_eq(prs_py_layout_from_debug_offsets(dbg, sizeof(dbg), row, &out), -ENOTSUP);
	dbg[0] = 'x';
	dbg[16] = 1;
	cr_assert_eq(prs_py_layout_from_debug_offsets(dbg, sizeof(dbg), row, &out), -ENOTSUP);
	dbg[16] = 0;
	memset(dbg + 184, 0xff, 8);
	cr_assert_eq(prs_py_layout_from_debug_offsets(dbg, sizeof(dbg), row, &out), -ENOTSUP);
}

Test(python_walk, thread_list_loop_is_cut)
{
	uint64_t file = img_mkstr("f.py");
	uint64_t c = mkcode(img_mkstr("t"), file, 1);
	uint64_t ts2 = img_alloc((size_t)L->tstate_size);
	struct prs_py_stats st;

	set_top(mkframe(c, 1, 0, 0));
	memcpy(img_at(ts2), img_at(tstate), (size_t)L->tstate_size);
	img_put32(ts2 + L->tstate_native_thread_id, 4343);
	img_put64(tstate + L->tstate_next, ts2);
	img_put64(ts2 + L->tstate_next, tstate); /* tstate -> ts2 -> tstate -> ... */
	cr_assert_eq(sample(), 2);
	cr_assert_eq(th[0].tid, 4242);
	cr_assert_eq(th[1].tid, 4343);
	prs_py_get_stats(py, &st);
	cr_assert_eq(st.cycles, 1);
}

Test(python_walk, merge_call_being_set_up)
{
	/* main (one group) calls a C extension that calls back into Python; the callback's eval call
	 * is in its prologue, its frame not linked yet: two eval frames, one group */
	struct prs_py_thread t = { 0 };
	const uint64_t pcs[] = { 0x3000, 0x1100, 0xb000, 0x1200, 0xc000 };
	const uint32_t ids[] = { 201, 202, 203, 204, 205 };
	const uint32_t want[] = { 7, 203, 201 };
	uint32_t out[16];
	size_t n;

	py->eval_lo[0] = 0x1000;
	py->eval_hi[0] = 0x2000;
	py->neval = 1;
	py->interp_lo[0] = 0x1000;
	py->interp_hi[0] = 0x9000;
	py->ninterp = 1;
	t.nframes = 1;
	t.frames[0] = 7;
	t.fflags[0] = PRS_PYF_GROUP_END;
	n = prs_py_merge(py, pcs, ids, 5, &t, 0, out, 16);
	cr_assert_eq(n, 3);
	cr_assert_arr_eq(out, want, sizeof(want));
}

Test(python_walk, reused_code_and_name_addresses_are_revalidated)
{
	/* the code object and its name string both freed and rebuilt at the same addresses: every
	 * pointer in the code object is unchanged, only the string's content differs */
	uint64_t file = img_mkstr("f.py");
	uint64_t name = img_mkstr("f_000028");
	uint64_t c = mkcode(name, file, 1);
	uint64_t f = mkframe(c, 1, 0, 0);
	struct prs_py_stats st;

	set_top(f);
	sample();
	cr_assert_str_eq(fname(th[0].frames[0]), "f_000028");
	memcpy(img_at(name + L->str_ascii_size), "f_000029", 8);
	sample();
	prs_py_get_stats(py, &st);
	cr_assert_str_eq(fname(th[0].frames[0]), "f_000029");
	cr_assert_eq(st.code_stale, 1);
}

Test(python_walk, reused_line_table_is_revalidated)
{
	uint64_t file = img_mkstr("f.py");
	uint64_t c = mkcode(img_mkstr("g"), file, 10);
	uint64_t tab, f = mkframe(c, 1, 0, 0);

	set_top(f);
	sample();
	cr_assert_eq(fline(th[0].frames[0]), 12);
	/* same bytes object address and length, other content: units 0-7 now on firstline+5 */
	memcpy(&tab, img_at(c + L->code_linetable), 8);
	img_put8(tab + L->bytes_sval + 1, 10); /* svarint 5 */
	sample();
	cr_assert_eq(fline(th[0].frames[0]), 15);
}

/* ---- 3.12+: co_version proves a hit without reading the strings ---- */

Test(python_walk, versioned_hit_reads_no_string)
{
	uint64_t file, name, c, f, tab;
	struct prs_py_stats st;

	cr_assert_eq(L->code_version, 92, "the 3.12 headers put co_version at 92");
	/* the strings and the line table in one range of their own, watched */
	img.brk = (img.brk + 4095) & ~4095ull;
	img.watch_lo[0] = img.brk;
	file = img_mkstr("f.py");
	name = img_mkstr("versioned");
	img.watch_hi[0] = img.brk;
	img.brk = (img.brk + 8191) & ~4095ull; /* the code object on a page of its own */
	c = mkcode(name, file, 10);
	/* and its line table moved to another page (reads are of whole 64-byte lines) */
	memcpy(&tab, img_at(c + L->code_linetable), 8);
	img.brk = (img.brk + 8191) & ~4095ull;
	img.watch_lo[1] = img_alloc(64);
	memcpy(img_at(img.watch_lo[1]), img_at(tab), 64);
	img_put64(c + L->code_linetable, img.watch_lo[1]);
	img.watch_hi[1] = img.watch_lo[1] + 64;
	img_put32(c + L->code_version, 77);
	f = mkframe(c, 1, 0, 0);
	set_top(f);
	sample();
	cr_assert_str_eq(fname(th[0].frames[0]), "versioned");
	cr_assert_gt(img.watched, 0, "decoding reads the strings");
	sample(); /* starts with the working set of the decoding sample: the strings once more */
	for (int i = 0; i < 3; i++) {
		img.watched = 0;
		sample();
		cr_assert_eq(th[0].nframes, 1);
		cr_assert_str_eq(fname(th[0].frames[0]), "versioned");
		cr_assert_eq(fline(th[0].frames[0]), 12);
		cr_assert_eq(img.watched, 0, "a versioned hit read the strings or line table %u times",
			     img.watched);
	}
	prs_py_get_stats(py, &st);
	cr_assert_eq(st.code_misses, 1);
	cr_assert_eq(st.code_stale, 0);
}

Test(python_walk, reused_address_with_new_version_is_redecoded)
{
	/* as in reused_code_and_name_addresses_are_revalidated, with versions: every pointer the
	 * same, the name's content and the version new */
	uint64_t file = img_mkstr("f.py");
	uint64_t name = img_mkstr("f_000028");
	uint64_t c = mkcode(name, file, 1);
	uint64_t f = mkframe(c, 1, 0, 0);
	struct prs_py_stats st;

	img_put32(c + L->code_version, 1000);
	set_top(f);
	sample();
	cr_assert_str_eq(fname(th[0].frames[0]), "f_000028");
	memcpy(img_at(name + L->str_ascii_size), "f_000029", 8);
	img_put32(c + L->code_version, 1002);
	sample();
	prs_py_get_stats(py, &st);
	cr_assert_str_eq(fname(th[0].frames[0]), "f_000029");
	cr_assert_eq(st.code_stale, 1);
	/* a version of 0 (the counter spent) proves nothing: the strings are compared again */
	img_put32(c + L->code_version, 0);
	sample();
	memcpy(img_at(name + L->str_ascii_size), "f_000030", 8);
	sample();
	cr_assert_str_eq(fname(th[0].frames[0]), "f_000030");
}

/* ---- the GIL holder's re-check ---- */

Test(python_walk, holder_rechecked_only_while_running)
{
	uint64_t file = img_mkstr("f.py");
	uint64_t c = mkcode(img_mkstr("hold"), file, 1);
	uint64_t f = mkframe(c, 1, 0, 0);
	struct prs_py_stats a, b, d;

	set_top(f);
	sample(); /* warms the working set: later samples take one readv */
	sample();
	prs_py_get_stats(py, &a);
	sample();
	prs_py_get_stats(py, &b);
	cr_assert(th[0].holds_gil);
	/* running: its top frame read before and after the working set, in the same readv, the
	 * same both times: not read a third time */
	cr_assert_eq(b.syscalls - a.syscalls, 1);
	cr_assert_eq(b.steady_tops - a.steady_tops, 1);
	prs_py_set_stopped(py, true);
	sample();
	prs_py_get_stats(py, &d);
	cr_assert(th[0].holds_gil);
	cr_assert_str_eq(fname(th[0].frames[0]), "hold");
	cr_assert_eq(d.syscalls - b.syscalls, 1, "stopped: no second read of the top frame");
	/* running again: guarded by the holder seen last while running */
	prs_py_set_stopped(py, false);
	sample();
	prs_py_get_stats(py, &a);
	cr_assert_eq(a.syscalls - d.syscalls, 1);
	cr_assert_eq(a.steady_tops - d.steady_tops, 1);
}

static struct prs_memreader plain;
static uint64_t push_frame; /* a frame the holder calls while the readv is served (0: none) */
static uint64_t step_frame; /* a frame whose next instruction the holder runs meanwhile (0: none) */
static uint64_t nest_cframe; /* a cframe the thread state points to meanwhile: a deeper eval (0: none) */
static uint64_t new_parent;  /* written meanwhile as the cframe's previous word (0: none) */

/* The target runs while the sample's readv is served: after every vec but the last two (the
 * working set read; the second reads of the guards of its top frame's current_frame word and of
 * its top frame to come), the holder pushes push_frame or steps step_frame. */
static int running_readv(void *ctx, struct prs_memvec *v, size_t n)
{
	int a, b;

	if ((!push_frame && !step_frame && !nest_cframe && !new_parent) || n < 3)
		return plain.readv(ctx, v, n);
	a = plain.readv(ctx, v, n - 2);
	if (push_frame)
		set_top(push_frame);
	if (step_frame)
		img_put64(step_frame + L->frame_instr, img_get64(step_frame + L->frame_instr) + 2);
	if (nest_cframe)
		img_put64(tstate + L->tstate_cframe, nest_cframe);
	if (new_parent)
		img_put64(cframe + L->cframe_current_frame + 8, new_parent);
	push_frame = step_frame = nest_cframe = new_parent = 0;
	b = plain.readv(ctx, v + n - 2, 2);
	return a < 0 ? a : b < 0 ? b : a + b;
}

/* A running holder: f ("hold") on top, g ("called", f's callee) made; sampled twice over
 * running_readv (the second sample asks the guards of the next). */
static void running_holder(uint64_t *f, uint64_t *g)
{
	uint64_t file = img_mkstr("f.py");

	*f = mkframe(mkcode(img_mkstr("hold"), file, 1), 1, 0, 0);
	*g = mkframe(mkcode(img_mkstr("called"), file, 5), 1, *f, 0);
	plain = py->pc.mr;
	py->pc.mr.readv = running_readv;
	set_top(*f);
	sample();
	sample();
}

/* The holder seen running (its state need not be read from /proc): its top frame's bytes
 * changed while the readv was served, the frame itself still on top. */
Test(python_walk, holder_seen_running_when_its_top_frame_changes_during_the_readv)
{
	uint64_t f, g;
	struct prs_py_stats a, b;

	running_holder(&f, &g);
	cr_assert_not(th[0].ran, "nothing changed during the readv");
	prs_py_get_stats(py, &a);
	step_frame = f;
	sample();
	prs_py_get_stats(py, &b);
	cr_assert(th[0].ran);
	cr_assert_eq(b.seen_running - a.seen_running, 1);
	cr_assert_eq(b.steady_tops - a.steady_tops, 1, "the walk stands: its top did not move");
	cr_assert_str_eq(fname(th[0].frames[0]), "hold");
	sample();
	cr_assert_not(th[0].ran, "still since");
	/* a call during the readv: walked again, not known to run (its state is read) */
	push_frame = g;
	sample();
	cr_assert_not(th[0].ran);
	cr_assert_str_eq(fname(th[0].frames[0]), "called");
	/* stopped: no guards */
	prs_py_set_stopped(py, true);
	step_frame = g;
	sample();
	cr_assert_not(th[0].ran);
	prs_py_set_stopped(py, false);
	step_frame = 0;
	/* a generator's frame is not guarded (its bytes lie among other objects) */
	img_put8(g + L->frame_owner, (uint8_t)L->owner_generator);
	sample();
	sample();
	step_frame = g;
	sample();
	cr_assert_not(th[0].ran);
	cr_assert_str_eq(fname(th[0].frames[0]), "called");
}

Test(python_walk, holder_moved_during_the_readv_is_walked_again)
{
	uint64_t f, g;
	struct prs_py_stats a, b;

	running_holder(&f, &g);
	prs_py_get_stats(py, &a);
	/* the working set still shows f on top, but its top frame word changed before its second
	 * read: the walk of f alone is not taken, the holder is read again */
	push_frame = g;
	cr_assert_eq(sample(), 1);
	prs_py_get_stats(py, &b);
	cr_assert_eq(b.steady_tops, a.steady_tops);
	cr_assert_eq(b.retries - a.retries, 1);
	cr_assert_eq(th[0].nframes, 2);
	cr_assert_str_eq(fname(th[0].frames[0]), "called");
	cr_assert_str_eq(fname(th[0].frames[1]), "hold");
	/* unmoved since: steady again */
	sample();
	sample();
	prs_py_get_stats(py, &a);
	cr_assert_eq(a.steady_tops - b.steady_tops, 2);
	cr_assert_str_eq(fname(th[0].frames[0]), "called");
}

/*
 * 3.12: the guard of the holder's top is its cframe's current_frame and previous words. A deeper
 * eval entered during the readv (the thread state's cframe moved, the walked cframe unchanged)
 * leaves the walk standing: its frames are the stack as it was when its top was read. The
 * cframe's previous word rewritten (its C stack reused by another eval) walks it again.
 */
Test(python_walk, holder_guarded_by_its_cframe)
{
	uint64_t f, g, c2 = img_alloc(64);
	struct prs_py_stats a, b;

	running_holder(&f, &g);
	img_put64(c2 + L->cframe_current_frame, g);
	img_put64(c2 + L->cframe_current_frame + 8, cframe);
	prs_py_get_stats(py, &a);
	nest_cframe = c2;
	sample();
	prs_py_get_stats(py, &b);
	cr_assert_eq(b.syscalls - a.syscalls, 1, "one readv: the top not read again");
	cr_assert_eq(b.steady_tops - a.steady_tops, 1);
	cr_assert_eq(b.retries, a.retries);
	cr_assert_eq(th[0].nframes, 1);
	cr_assert_str_eq(fname(th[0].frames[0]), "hold");
	/* back to the first eval; its previous word rewritten during the readv */
	img_put64(tstate + L->tstate_cframe, cframe);
	sample();
	sample();
	prs_py_get_stats(py, &a);
	new_parent = c2;
	sample();
	prs_py_get_stats(py, &b);
	cr_assert_eq(b.steady_tops, a.steady_tops, "a cframe word changed: not steady");
	cr_assert_gt(b.syscalls - a.syscalls, 1, "the top read again");
	cr_assert_str_eq(fname(th[0].frames[0]), "hold");
}

/* ---- str decoding (prs_py_read_str, prs_py_str_decode: code names and thread names) ---- */

/* prs_py_read_str on the image */
static int rstr(uint64_t a, char *out, size_t outsz)
{
	struct prs_memreader mr = img_reader();

	return prs_py_read_str(L, t_str, &mr, a, out, outsz);
}

Test(python_walk, str_decoding_edges)
{
	static const uint32_t mixed[] = { 'a', 0xe9, 0x20ac, 0x1f600 }; /* a é € 😀: 1+2+3+4 bytes */
	static const uint32_t bad[] = { 'x', 0, 0xd800, 'y' };
	char out[64];
	uint8_t head[64];
	size_t need = 0;
	uint64_t a;

	a = img_mkstr_cp(mixed, 4, 4, false);
	cr_assert_eq(rstr(a, out, sizeof(out)), 10);
	cr_assert_str_eq(out, "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
	/* too small a buffer: cut before the character that does not fit, never inside one */
	cr_assert_eq(rstr(a, out, 6), 3);
	cr_assert_str_eq(out, "a\xc3\xa9");
	cr_assert_eq(rstr(a, out, 7), 6);
	{
		static const uint32_t after[] = { 'a', 0xe9, 0x20ac, 'b' }; /* the 'b' would fit, the € not */

		cr_assert_eq(rstr(img_mkstr_cp(after, 4, 2, false), out, 6), 3);
		cr_assert_str_eq(out, "a\xc3\xa9");
	}
	cr_assert_eq(rstr(a, out, 1), 0);
	cr_assert_str_eq(out, "");
	/* NUL and a lone surrogate (UCS-2) become U+FFFD */
	a = img_mkstr_cp(bad, 4, 2, false);
	cr_assert_eq(rstr(a, out, sizeof(out)), 8);
	cr_assert_str_eq(out, "x\xef\xbf\xbd\xef\xbf\xbdy");
	/* the decoder asks for what the characters take beyond the bytes it was given */
	memcpy(head, img_at(a), (size_t)L->str_compact_size);
	cr_assert_eq(prs_py_str_decode(L, t_str, head, (size_t)L->str_compact_size, out, sizeof(out), &need), -E2BIG);
	cr_assert_eq(need, (size_t)L->str_compact_size + 8);
	/* not a compact str, not a str, not a pointer */
	img_put32(a + L->str_state, (2u << L->str_kind_shift));
	cr_assert_eq(rstr(a, out, sizeof(out)), -EINVAL);
	img_put32(a + L->str_state, (2u << L->str_kind_shift) | (1u << L->str_compact_bit));
	img_put64(a + L->ob_type, t_code);
	cr_assert_eq(rstr(a, out, sizeof(out)), -EINVAL);
	cr_assert_lt(rstr(8, out, sizeof(out)), 0);
}

static bool keep_4343(void *arg, int32_t tid)
{
	(void)arg;
	return tid == 4343;
}

/*
 * prs_py_set_keep: a thread the caller keeps is listed (tid, thread id, GIL) but its frames are
 * neither read nor resolved; the others are walked as usual, and without the predicate everyone is.
 */
Test(python_walk, kept_thread_is_not_walked)
{
	uint64_t file = img_mkstr("f.py");
	uint64_t ca = mkcode(img_mkstr("a"), file, 10), cb = mkcode(img_mkstr("b"), file, 20);
	uint64_t ts2 = img_alloc((size_t)L->tstate_size), cf2 = img_alloc(64);
	uint64_t fb;

	set_top(mkframe(ca, 1, 0, 0));
	memcpy(img_at(ts2), img_at(tstate), (size_t)L->tstate_size);
	img_put32(ts2 + L->tstate_native_thread_id, 4343);
	img_put64(ts2 + L->tstate_thread_id, 0x7f0000002000ull);
	img_put64(ts2 + L->tstate_cframe, cf2);
	img_alloc(4096); /* fb on a page of its own: no line read for another object holds it */
	fb = mkframe(cb, 1, 0, 0);
	img_put64(cf2 + L->cframe_current_frame, fb);
	img_put64(tstate + L->tstate_next, ts2);
	cr_assert_eq(sample(), 2);
	cr_assert(!th[0].kept && !th[1].kept);
	cr_assert_str_eq(fname(th[1].frames[0]), "b");

	prs_py_set_keep(py, keep_4343, NULL);
	img.watch_lo[0] = fb;
	img.watch_hi[0] = fb + (uint64_t)L->frame_size;
	img.watched = 0;
	cr_assert_eq(sample(), 2);
	cr_assert(!th[0].kept && th[0].nframes == 1);
	cr_assert_str_eq(fname(th[0].frames[0]), "a");
	cr_assert(th[1].kept, "tid 4343 is kept");
	cr_assert_eq(th[1].tid, 4343);
	cr_assert_eq(th[1].thread_id, 0x7f0000002000ull);
	cr_assert_eq(th[1].nframes, 0);
	cr_assert_eq(th[1].holds_gil, false);
	/* the first sample's working set still loads the kept thread's frame line; from the next
	 * sample on, nothing reads it */
	img.watched = 0;
	cr_assert_eq(sample(), 2);
	cr_assert(th[1].kept);
	cr_assert_eq(img.watched, 0, "the kept thread's frame was read");

	prs_py_set_keep(py, NULL, NULL);
	cr_assert_eq(sample(), 2);
	cr_assert(!th[1].kept && th[1].nframes == 1);
}
