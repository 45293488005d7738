/* SPDX-License-Identifier: MIT */
/*
 * Where a thread waiting for the GIL sleeps: the target address ranges of the GIL's futex words,
 * so that a sample blocked in futex() on one of them is told apart from a lock wait.
 *
 * CPython's take_gil() waits in pthread_cond_timedwait(&gil->cond, &gil->mutex, interval); with
 * glibc 2.36 the futex word is the condvar's __g_signals[g], at cond + 40 or + 44 (g alternates).
 * Short waits also land on the condvar's internal words (__g_refs at cond + 16/20, the internal
 * lock __g1_orig_size at cond + 32), on gil->mutex, and (FORCE_SWITCHING) on switch_cond and
 * switch_mutex, where the thread that dropped the GIL waits for another to take it. All of them lie
 * in the GIL's struct from `cond` to its end (3.7+: interval, last_holder, locked and
 * switch_number come first and are never waited on), so a range per GIL covers them.
 *
 * Measured: 4 threads of pure-Python work (tests/targets/py/bounds.py gil), /proc/TID/syscall
 * read 300 times per thread, addresses from gdb on the pyenv builds (debug info), as
 * "uaddr (op) samples" relative to the GIL struct (3.6: to its static variables):
 *
 *   3.6.15   gil_cond+40, +44 (0x189) 648; gil_mutex (0x80) 2. The state is 6 statics, each
 *            its own .symtab symbol: gil_cond 48 B, gil_mutex 40 B, switch_cond, switch_mutex.
 *   3.7.16   _PyRuntime+1264: +72, +76 (cond+40/44, 0x189) 744; +80 mutex (0x80) 2;
 *            +160, +164 switch_cond+40/44 (0x189) 3
 *   3.8.18   _PyRuntime+1152: +72, +76 (0x89) 783; +164 switch_cond (0x189) 1
 *   3.9.18   _PyRuntime+352:  +72, +76 (0x89) 723
 *   3.10.13  _PyRuntime+352:  +72, +76 (0x89) 736; +80 mutex (0x80) 4
 *   3.11.7   _PyRuntime+360:  +72, +76 (0x89) 619; +80 mutex, +64 (cond+32), +48, +52
 *            (cond+16/20) (0x80) 6; +164 (0x189) 2
 *   3.12.1   interp->ceval.gil = &_PyRuntime._main_interpreter._gil (_PyRuntime+77432):
 *            +72, +76 (0x89) 645; +48, +64, +80 (0x80) 100
 *   3.13.0   the same (_PyRuntime+96104): +72, +76 (0x89) 792
 *   Debian's stripped python3.11 (3.11.2): .PyRuntime section + 360 + 72/76 (0x89)
 *
 * The struct is 208 bytes in every version (layouts.gen.c: gil_cond 32, gil_size 208). The other
 * futex seen in those runs was the main thread's join() on a heap lock (0x189): a lock wait, not
 * the GIL's. musl's condvars sleep on words of the waiters' own stacks (notes/cpython.md §6.2):
 * there no range matches and GIL waits read as lock waits.
 */
#include "python/python-internal.h"

#include <string.h>

#include "util/banned.h"

/* Adds [lo, hi) to v[0..*n) unless it is there or v is full. */
static void add(struct prs_py_range *v, unsigned *n, uint64_t lo, uint64_t hi)
{
	unsigned i;

	if (hi <= lo)
		return;
	for (i = 0; i < *n; i++)
		if (v[i].lo == lo && v[i].hi == hi)
			return;
	if (*n < PRS_PY_MAX_GIL_RANGES)
		v[(*n)++] = (struct prs_py_range){ lo, hi };
}

/* The futex words of the GIL state at gil; false when the layout has none. */
static bool words_of(const struct prs_py *py, uint64_t gil, uint64_t *lo, uint64_t *hi)
{
	const struct prs_py_layout *L = &py->L;

	if (!gil || !plausible_ptr(gil) || L->gil_cond < 0 || L->gil_size <= L->gil_cond)
		return false;
	*lo = gil + (uint64_t)L->gil_cond;
	*hi = gil + (uint64_t)L->gil_size;
	return true;
}

void prs_py_gil_fixed(struct prs_py *py, uint64_t addr, uint64_t size)
{
	if (!addr || !size || size > 4096 || py->ngil != py->ngil_fixed)
		return;
	add(py->gil, &py->ngil, addr, addr + size);
	py->ngil_fixed = py->ngil;
}

void prs_py_gil_open(struct prs_py *py)
{
	struct prs_pywalk_iter it;
	uint64_t lo, hi;

	if (prs_pywalk_begin(&py->walk, &py->mr, &it) == 0 && words_of(py, it.gil, &lo, &hi))
		add(py->gil, &py->ngil, lo, hi);
}

void prs_py_gil_walk_begin(struct prs_py *py)
{
	py->ngil_walk = 0;
}

void prs_py_gil_walk_seen(struct prs_py *py, uint64_t gil)
{
	uint64_t lo, hi;

	if (words_of(py, gil, &lo, &hi))
		add(py->gil_walk, &py->ngil_walk, lo, hi);
}

void prs_py_gil_walk_end(struct prs_py *py)
{
	unsigned i;

	if (!py->ngil_walk)
		return; /* a walk that saw no GIL keeps the last one's */
	py->ngil = py->ngil_fixed;
	for (i = 0; i < py->ngil_walk; i++)
		add(py->gil, &py->ngil, py->gil_walk[i].lo, py->gil_walk[i].hi);
}

int prs_py_gil_ranges(const struct prs_py *py, struct prs_py_range *out, int max)
{
	int n = 0;

	for (unsigned i = 0; i < py->ngil && n < max; i++)
		out[n++] = py->gil[i];
	return n;
}

bool prs_py_gil_waits_on(const struct prs_py *py, uint64_t uaddr)
{
	for (unsigned i = 0; i < py->ngil; i++)
		if (uaddr >= py->gil[i].lo && uaddr < py->gil[i].hi)
			return true;
	return false;
}
