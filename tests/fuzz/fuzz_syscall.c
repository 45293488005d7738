/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target: the parser of a syscall file (/proc/PID/task/TID/syscall: prs_task_parse_syscall),
 * on at most the bytes its reader reads. Seeds: real syscall files (running, in a syscall,
 * stopped outside one).
 */
#include "fuzz.h"

#include <stdlib.h>

#include "pyrsprof/task.h"

#include "util/banned.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char text[256];
	struct prs_task_sys sys;

	if (prs_task_parse_syscall(fuzz_text(data, size, text, sizeof(text)), &sys) == 0 &&
	    !sys.running && (sys.nr < -1 || sys.nr > 4095))
		abort();
	return 0;
}
