/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target: the parser of /proc/PID/task/TID/schedstat (prs_task_parse_schedstat), on at most the bytes its
 * reader reads (128 - 1). Seeds: real schedstat files.
 */
#include "fuzz.h"

#include <stdlib.h>
#include <string.h>

#include "pyrsprof/task.h"

#include "util/banned.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char text[128];

	if (size > sizeof(text) - 1)
		size = sizeof(text) - 1;
	memcpy(text, data, size);
	text[size] = '\0';
	{
		struct prs_schedstat st;

		prs_task_parse_schedstat(text, &st);
	}
	return 0;
}
