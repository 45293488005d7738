/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target: the parser of /proc/PID/task/TID/syscall (prs_task_parse_syscall), on at most the bytes its
 * reader reads (256 - 1). Seeds: real syscall files.
 */
#include "fuzz.h"

#include <stdlib.h>
#include <string.h>

#include "pyrsprof/task.h"

#include "util/banned.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char text[256];

	if (size > sizeof(text) - 1)
		size = sizeof(text) - 1;
	memcpy(text, data, size);
	text[size] = '\0';
	{
		struct prs_task_sys sys;

		if (prs_task_parse_syscall(text, &sys) == 0 && !sys.running && (sys.nr < -1 || sys.nr > 4095))
			abort();
	}
	return 0;
}
