/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of where GIL waiters sleep (src/python/gil.c) on memory images of every generated
 * layout row (py_world.h): the futex word ranges found at open and after each walk, against the
 * words measured live on 3.6-3.13 (cond + 40/44, the mutex at GIL + 80, switch_cond + 40/44 at
 * GIL + 160/164; not interval, last_holder, locked or switch_number before cond); 3.6's static
 * variables; 3.12+ interpreters with a GIL of their own, shared, gone, or pointing at garbage.
 */
#include <criterion/criterion.h>
#include <stdlib.h>

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
static struct prs_py_thread *th; /* 16 */

static void setup(void)
{
	img_init(BASE, SIZE);
	mr = img_reader();
	th = calloc(16, sizeof(*th));
	cr_assert(th);
}

static void teardown(void)
{
	prs_py_free(py);
	prs_profile_free(prof);
	free(th);
	img_release();
}

TestSuite(python_gil, .init = setup, .fini = teardown);

static int sample(void)
{
	struct prs_err err;
	int n = -1;

	cr_assert_eq(prs_py_sample(py, prof, th, 16, &n, &err), 0, "3.%u: %s", W.minor, err.msg);
	return n;
}

/* The GIL state of interp as the world laid it out (3.7+). */
static uint64_t gil_of(uint64_t interp)
{
	return W.L->runtime_gil >= 0 ? W.runtime + (uint64_t)W.L->runtime_gil
				     : img_get64(interp + (uint64_t)W.L->interp_gil_ptr);
}

/* The ranges now, sorted by nothing: the test looks each up. */
static int ranges(struct prs_py_range *r)
{
	return prs_py_gil_ranges(py, r, PRS_PY_MAX_GIL_RANGES);
}

/* Checks that the words measured live on every version are the GIL's, and the fields before cond
 * and the first byte after the struct are not. */
static void expect_gil_words(uint64_t gil)
{
	static const unsigned waited[] = { 32 + 16, 32 + 20, 32 + 32, 32 + 40, 32 + 44, 80, 120 + 40,
					   120 + 44, 168, 207 };
	static const unsigned not_waited[] = { 0, 8, 16, 24, 31, 208, 256 };

	for (unsigned i = 0; i < sizeof(waited) / sizeof(waited[0]); i++)
		cr_expect(prs_py_gil_waits_on(py, gil + waited[i]), "3.%u: GIL + %u is a GIL word", W.minor,
			  waited[i]);
	for (unsigned i = 0; i < sizeof(not_waited) / sizeof(not_waited[0]); i++)
		cr_expect(!prs_py_gil_waits_on(py, gil + not_waited[i]), "3.%u: GIL + %u is not a GIL word",
			  W.minor, not_waited[i]);
}

Test(python_gil, every_version_from_open_and_walk)
{
	for (unsigned minor = 7; minor <= 13; minor++) {
		struct prs_py_range r[PRS_PY_MAX_GIL_RANGES];
		uint64_t in, gil;

		world_fresh(&W, minor, &mr, &py, &prof);
		in = world_interp(&W);
		world_gil(&W, in, world_thread(&W, in, 100));
		gil = gil_of(in);
		cr_assert_eq(ranges(r), 0, "3.%u: nothing known before open", minor);
		cr_assert(!prs_py_gil_waits_on(py, gil + 72));
		prs_py_gil_open(py);
		cr_assert_eq(ranges(r), 1, "3.%u", minor);
		/* the layout rows say what was measured: cond at 32, 208 bytes */
		cr_assert_eq(r[0].lo, gil + 32, "3.%u: lo GIL + %lld", minor, (long long)(r[0].lo - gil));
		cr_assert_eq(r[0].hi, gil + 208, "3.%u: hi GIL + %lld", minor, (long long)(r[0].hi - gil));
		expect_gil_words(gil);
		cr_assert_eq(sample(), 1);
		cr_assert_eq(ranges(r), 1, "3.%u", minor);
		cr_assert_eq(r[0].lo, gil + 32);
		expect_gil_words(gil);
	}
}

Test(python_gil, python_3_6_static_variables)
{
	struct prs_py_range r[PRS_PY_MAX_GIL_RANGES];
	/* the four statics as the 3.6.15 build lays them out: switch_mutex, switch_cond, gil_mutex,
	 * gil_cond, with gil_locked elsewhere (.data) */
	const uint64_t base = BASE + 0x2000;
	uint64_t in;

	world_fresh(&W, 6, &mr, &py, &prof);
	in = world_interp(&W);
	world_gil(&W, in, world_thread(&W, in, 100));
	prs_py_gil_fixed(py, base + 0xae0, 48); /* gil_cond */
	prs_py_gil_fixed(py, base + 0xaa0, 40); /* gil_mutex */
	prs_py_gil_fixed(py, base + 0xa60, 48); /* switch_cond */
	prs_py_gil_fixed(py, base + 0xa20, 40); /* switch_mutex */
	prs_py_gil_fixed(py, base + 0xb00, 0);  /* an empty symbol is no range */
	prs_py_gil_open(py);                    /* 3.6 has no GIL struct: nothing added */
	cr_assert_eq(ranges(r), 4);
	cr_assert(prs_py_gil_waits_on(py, base + 0xb08)); /* gil_cond + 40, measured */
	cr_assert(prs_py_gil_waits_on(py, base + 0xb0c)); /* gil_cond + 44 */
	cr_assert(prs_py_gil_waits_on(py, base + 0xaa0)); /* gil_mutex, measured */
	cr_assert(prs_py_gil_waits_on(py, base + 0xa8c)); /* switch_cond + 44 */
	cr_assert(!prs_py_gil_waits_on(py, base + 0xac8)); /* the padding after gil_mutex */
	cr_assert(!prs_py_gil_waits_on(py, base + 0xb10)); /* past gil_cond */
	/* a walk sees no GIL struct (3.6's holder is _PyThreadState_Current) and keeps them */
	cr_assert_eq(sample(), 1);
	cr_assert_eq(ranges(r), 4);
	cr_assert(th[0].holds_gil);
}

Test(python_gil, interpreters_with_their_own_gil)
{
	struct prs_py_range r[PRS_PY_MAX_GIL_RANGES];
	uint64_t main_in, sub, shared, main_gil, sub_gil;

	world_fresh(&W, 12, &mr, &py, &prof);
	main_in = world_interp(&W);
	world_thread(&W, main_in, 100);
	sub = world_interp(&W); /* PEP 684: a GIL of its own */
	world_thread(&W, sub, 101);
	shared = world_interp(&W); /* a subinterpreter sharing the main GIL */
	world_thread(&W, shared, 102);
	main_gil = gil_of(main_in);
	sub_gil = gil_of(sub);
	img_put64(shared + W.L->interp_gil_ptr, main_gil);
	prs_py_gil_open(py); /* the first interpreter's only */
	cr_assert_eq(ranges(r), 1);
	cr_assert(!prs_py_gil_waits_on(py, sub_gil + 72));
	cr_assert_eq(sample(), 3);
	cr_assert_eq(ranges(r), 2, "one range per distinct GIL");
	cr_assert(prs_py_gil_waits_on(py, main_gil + 76));
	cr_assert(prs_py_gil_waits_on(py, sub_gil + 72));
	/* the subinterpreter is gone (unlinked): its GIL's memory is no longer a GIL */
	img_put64(main_in + W.L->interp_next, shared);
	cr_assert_eq(sample(), 2);
	cr_assert_eq(ranges(r), 1);
	cr_assert(!prs_py_gil_waits_on(py, sub_gil + 72));
	cr_assert(prs_py_gil_waits_on(py, main_gil + 72));
}

Test(python_gil, garbage_gil_pointers_add_nothing)
{
	static const uint64_t junk[] = { 0, 1, 0xdead0001ull, 0xffff800000000000ull, 0x10 };
	struct prs_py_range r[PRS_PY_MAX_GIL_RANGES];
	uint64_t in, gil;

	world_fresh(&W, 13, &mr, &py, &prof);
	in = world_interp(&W);
	world_thread(&W, in, 100);
	gil = gil_of(in);
	cr_assert_eq(sample(), 1);
	cr_assert_eq(ranges(r), 1);
	for (unsigned i = 0; i < sizeof(junk) / sizeof(junk[0]); i++) {
		img_put64(in + W.L->interp_gil_ptr, junk[i]);
		cr_assert_eq(sample(), 1);
		/* a walk that saw no GIL keeps the last one's (a race, not a new truth) */
		cr_assert_eq(ranges(r), 1, "junk 0x%llx", (unsigned long long)junk[i]);
		cr_assert_eq(r[0].lo, gil + 32);
		cr_assert(!prs_py_gil_waits_on(py, junk[i] + 72));
	}
}

Test(python_gil, many_interpreters_are_bounded)
{
	struct prs_py_range r[PRS_PY_MAX_GIL_RANGES + 4];
	uint64_t in[PRS_PY_MAX_GIL_RANGES + 4];
	unsigned n = PRS_PY_MAX_GIL_RANGES + 4;

	world_fresh(&W, 12, &mr, &py, &prof);
	for (unsigned i = 0; i < n; i++) {
		in[i] = world_interp(&W);
		world_thread(&W, in[i], 100 + (int32_t)i);
	}
	cr_assert_eq(sample(), (int)n);
	cr_assert_eq(prs_py_gil_ranges(py, r, (int)n), PRS_PY_MAX_GIL_RANGES);
	cr_assert(prs_py_gil_waits_on(py, gil_of(in[0]) + 72));
	cr_assert(!prs_py_gil_waits_on(py, gil_of(in[n - 1]) + 72));
	cr_assert_eq(prs_py_gil_ranges(py, r, 3), 3, "max is respected");
}
