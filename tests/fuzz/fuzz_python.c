/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target: the CPython reader over a hostile memory image: the frame walker (prs_py_sample),
 * the thread-name reader (prs_py_read_thread_names), the merge with a native stack, and on 3.13+
 * the _Py_DebugOffsets parser. The input is what prs_py_open would have found plus the target's
 * memory (py_mem.h). Seeds: images recorded from live CPythons 3.6-3.13 by py_seed.c.
 */
#include "fuzz.h"

#include "py_mem.h"

#include "util/banned.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	py_mem_run(data, size, NULL);
	return 0;
}
