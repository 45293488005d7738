/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for the Python stack view (prs_view_opts.python_stacks, src/profile/view_python.c)
 * on a profile built here: the interpreter's frames (python executable, libpython) and the libc /
 * ld.so frames it calls are folded away, an extension's frames (and the libc frames it calls)
 * stay in order under their Python line, kernel frames and the off-CPU leaf stay, a thread without
 * Python frames stays whole, and the weights are the merged view's. The expected folded lines are
 * written out by hand, in the folded export's order (sorted lines).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pyrsprof/export.h"
#include "pyrsprof/profile.h"
#include "pyrsprof/view.h"

#include "util/banned.h"

static uint32_t S(struct prs_profile *p, const char *s)
{
	return prs_profile_string(p, s, strlen(s));
}

/* A raw frame in mapping m at addr, symbolized as the native function name. */
static uint32_t raw(struct prs_profile *p, uint32_t m, uint64_t addr, const char *name)
{
	uint32_t f = prs_profile_raw_frame(p, m, addr, false);
	uint32_t n = prs_profile_named_frame(p, PRS_KIND_NATIVE, S(p, name), 0, 0);

	cr_assert_eq(prs_profile_expand(p, f, &n, 1), 0);
	return f;
}

static uint32_t py(struct prs_profile *p, const char *name, uint32_t line)
{
	return prs_profile_named_frame(p, PRS_KIND_PYTHON, S(p, name), S(p, "app.py"), line);
}

static uint32_t map(struct prs_profile *p, const char *path, uint64_t start)
{
	struct prs_mapping m = { .start = start, .end = start + 0x100000, .path = S(p, path) };

	return prs_profile_mapping(p, &m);
}

static uint32_t push(struct prs_profile *p, uint32_t stack, const uint32_t *frames, size_t n)
{
	for (size_t k = 0; k < n; k++)
		stack = prs_profile_stack(p, stack, frames[k]);
	return stack;
}

static void sample(struct prs_profile *p, int32_t tid, uint32_t stack, uint32_t weight, uint8_t flags,
		   uint8_t state)
{
	struct prs_sample s = { .tid = tid, .stack = stack, .weight = weight, .syscall = -1,
				.flags = flags, .state = state };

	cr_assert_eq(prs_profile_sample(p, &s), 0);
}

static struct prs_profile *build(void)
{
	struct prs_profile *p = prs_profile_new();
	uint32_t exe = map(p, "/usr/bin/python3.12", 0x400000), lib = map(p, "/usr/lib/libpython3.12.so.1.0", 0x1000000);
	uint32_t libc = map(p, "/usr/lib/x86_64-linux-gnu/libc.so.6", 0x2000000);
	uint32_t ld = map(p, "/usr/lib64/ld-linux-x86-64.so.2", 0x3000000);
	uint32_t ext = map(p, "/site/_hot.cpython-312-x86_64-linux-gnu.so", 0x4000000);
	uint32_t start[] = { raw(p, exe, 0x400010, "_start"), raw(p, libc, 0x2000010, "__libc_start_main"),
			     raw(p, lib, 0x1000010, "Py_RunMain"), py(p, "main", 3),
			     raw(p, lib, 0x1000020, "_PyEval_EvalFrameDefault"), py(p, "work", 7) };
	uint32_t base = push(p, 0, start, 6);
	/* work -> interpreter -> extension -> libc (the extension's own) */
	uint32_t ext_call[] = { raw(p, lib, 0x1000030, "PyObject_Vectorcall"), raw(p, ext, 0x4000010, "hot_fn"),
				raw(p, libc, 0x2000020, "memcpy") };
	/* work -> interpreter -> libc malloc -> ld.so -> kernel */
	uint32_t alloc[] = { raw(p, lib, 0x1000040, "PyObject_Malloc"), raw(p, libc, 0x2000030, "malloc"),
			     raw(p, ld, 0x3000010, "_dl_runtime_resolve"),
			     prs_profile_named_frame(p, PRS_KIND_KERNEL, S(p, "do_page_fault"), 0, 0) };
	/* a native thread: clone -> extension worker -> libc */
	uint32_t native[] = { raw(p, libc, 0x2000040, "clone"), raw(p, ext, 0x4000020, "worker"),
			      raw(p, libc, 0x2000050, "memset") };
	/* the interpreter's eval loop under work, off-CPU waiting for the GIL */
	uint32_t gil[] = { raw(p, lib, 0x1000050, "take_gil") };

	sample(p, 1, push(p, base, ext_call, 3), 5, 0, PRS_STATE_RUNNING);
	sample(p, 1, push(p, base, alloc, 4), 2, 0, PRS_STATE_RUNNING);
	sample(p, 1, push(p, base, gil, 1), 3, PRS_SAMPLE_GIL_WAIT, PRS_STATE_BLOCKED);
	sample(p, 2, push(p, 0, native, 3), 4, 0, PRS_STATE_RUNNING);
	return p;
}

static char *folded(const struct prs_profile *p, bool python)
{
	struct prs_view_opts o = { .view = PRS_VIEW_WALL, .python_stacks = python };
	struct prs_err err;
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	cr_assert_eq(prs_export_folded(p, &o, f, &err), 0, "%s", err.msg);
	fclose(f);
	return text;
}

/* The folded export of the built profile, in the Python stack view or the merged one, is want. */
static void expect(bool python, const char *want)
{
	struct prs_profile *p = build();
	char *t = folded(p, python);

	cr_assert_str_eq(t, want);
	free(t);
	prs_profile_free(p);
}

Test(view_python, interpreter_frames_fold_into_the_python_line)
{
	expect(true,
	       "clone;worker;memset 4\n"
	       "main;work;[waiting for the GIL] 3\n"
	       "main;work;do_page_fault_[k] 2\n"
	       "main;work;hot_fn;memcpy 5\n");
}

Test(view_python, merged_view_is_unchanged)
{
	expect(false,
	       "_start;__libc_start_main;Py_RunMain;main;_PyEval_EvalFrameDefault;work;"
	       "PyObject_Malloc;malloc;_dl_runtime_resolve;do_page_fault_[k] 2\n"
	       "_start;__libc_start_main;Py_RunMain;main;_PyEval_EvalFrameDefault;work;"
	       "PyObject_Vectorcall;hot_fn;memcpy 5\n"
	       "_start;__libc_start_main;Py_RunMain;main;_PyEval_EvalFrameDefault;work;take_gil;"
	       "[waiting for the GIL] 3\n"
	       "clone;worker;memset 4\n");
}

/* Visiting the stacks in order, *shared is the common prefix with the previous stack's frames. */
Test(view_python, shared_prefix_is_the_previous_stacks)
{
	struct prs_profile *p = build();
	struct prs_view_opts o = { .view = PRS_VIEW_WALL, .python_stacks = true };
	struct prs_profile_view *v;
	struct prs_err err;
	uint32_t prev[16];
	size_t n, nprev = 0;

	cr_assert_eq(prs_view_new(p, &o, &v, &err), 0);
	prs_view_stacks(v, &n);
	for (size_t i = 0; i < n; i++) {
		const uint32_t *fr;
		size_t shared, k = 0, len = prs_view_frames(v, i, &fr, &shared);

		cr_assert(len > 0 && len <= 16);
		while (k < len && k < nprev && fr[k] == prev[k])
			k++;
		cr_assert_eq(shared, k, "stack %zu", i);
		memcpy(prev, fr, len * sizeof(*fr));
		nprev = len;
	}
	prs_view_free(v);
	prs_profile_free(p);
}
