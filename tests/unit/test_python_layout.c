/* SPDX-License-Identifier: MIT */
/*
 * The CPython layouts the reader trusts: every generated row keeps each field inside the head the
 * reader copies of its object (prs_py_layout_check), and a layout built from a target's
 * _Py_DebugOffsets is refused when the target puts a field outside it (found by the fuzz target
 * tests/fuzz/fuzz_python.c: the walker indexed its 256-byte frame copy with the target's offset).
 * The debug offsets are those of a live CPython 3.13.0, from the fuzz target's seed
 * tests/fixtures/fuzz/python/cpython-3.13.bin (py_mem.h), recorded by tests/fuzz/py_seed.c.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "python/python-internal.h"
#include "../fuzz/py_mem.h"

#include "util/banned.h"

#define SEED "tests/fixtures/fuzz/python/cpython-3.13.bin"

/* The 1024 bytes at the seed's _PyRuntime (zeros where it holds none). */
static void seed_debug_offsets(uint8_t *dbg, size_t len)
{
	static uint8_t d[1 << 16];
	struct py_mem_hdr h;
	FILE *f = fopen(SEED, "rb");
	size_t n, off;

	cr_assert_not_null(f, SEED " (run the tests from the repository root)");
	n = fread(d, 1, sizeof(d), f);
	fclose(f);
	cr_assert_gt(n, PY_MEM_HDR);
	memcpy(&h, d, PY_MEM_HDR);
	cr_assert(h.minor == 13 && (h.flags & PY_MEM_DEBUG_OFFSETS), "a 3.13 seed read through its debug offsets");
	memset(dbg, 0, len);
	for (off = PY_MEM_HDR; off + 12 <= n;) {
		uint64_t addr;
		uint32_t sl;

		memcpy(&addr, d + off, 8);
		memcpy(&sl, d + off + 8, 4);
		off += 12;
		cr_assert_leq(sl, n - off);
		for (uint32_t i = 0; i < sl; i++)
			if (addr + i >= h.runtime && addr + i < h.runtime + len)
				dbg[addr + i - h.runtime] = d[off + i];
		off += sl;
	}
	cr_assert_eq(memcmp(dbg, "xdebugpy", 8), 0);
}

Test(python_layout, generated_rows_pass_the_check)
{
	for (unsigned i = 0; i < prs_py_nlayouts; i++)
		cr_expect(prs_py_layout_check(&prs_py_layouts[i]), "row %u (%#x)", i,
			  prs_py_layouts[i].version_hex);
}

Test(python_layout, hostile_debug_offsets_are_refused)
{
	const struct prs_py_layout *row = prs_py_layout_find(3, 13);
	const struct prs_py_dbg_layout *D = NULL;
	struct prs_py_layout out;
	uint8_t dbg[1024], bad[1024];
	/* each: a position in _Py_DebugOffsets and a value under the parser's own bound (4096) that
	 * puts the field outside the reader's copy of its object */
	struct { const char *what; int32_t pos; uint64_t val; } cases[6];

	for (unsigned i = 0; i < prs_py_ndbg_layouts; i++)
		if (prs_py_dbg_layouts[i].version_hex >> 16 == 0x030d)
			D = &prs_py_dbg_layouts[i];
	cr_assert(row && D);
	seed_debug_offsets(dbg, sizeof(dbg));
	cr_assert_eq(prs_py_layout_from_debug_offsets(dbg, sizeof(dbg), row, &out), 0);
	cr_assert(prs_py_layout_check(&out));
	cr_assert_geq(out.interp_modules, 0, "the seed's names are read");
	cases[0] = (typeof(cases[0])){ "frame back past the frame's copy", D->frame_back, 4000 };
	cases[1] = (typeof(cases[0])){ "frame owner past the frame's size", D->frame_owner, 200 };
	cases[2] = (typeof(cases[0])){ "code name past the code head", D->code_name, 300 };
	cases[3] = (typeof(cases[0])){ "str length past the str head", D->str_length, 60 };
	cases[4] = (typeof(cases[0])){ "thread state field at its end", D->tstate_next, 4092 };
	cases[5] = (typeof(cases[0])){ "str state past the str head", D->str_state, 44 };
	for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		memcpy(bad, dbg, sizeof(bad));
		memcpy(bad + cases[i].pos, &cases[i].val, 8);
		cr_expect_eq(prs_py_layout_from_debug_offsets(bad, sizeof(bad), row, &out), -ENOTSUP, "%s",
			     cases[i].what);
	}
	/* a thread-name field outside its head: the frames are still read, the names are not */
	memcpy(bad, dbg, sizeof(bad));
	memcpy(bad + D->dict_keys, &(uint64_t){ 100 }, 8);
	cr_assert_eq(prs_py_layout_from_debug_offsets(bad, sizeof(bad), row, &out), 0);
	cr_assert_eq(out.interp_modules, -1);
	cr_assert(prs_py_layout_check(&out));
}
