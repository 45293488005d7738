/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target: the parser of a schedstat file (/proc/PID/task/TID/schedstat:
 * prs_task_parse_schedstat), on at most the bytes its reader reads. Seeds: real schedstat files.
 */
#include "fuzz.h"

#include "pyrsprof/task.h"

#include "util/banned.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char text[128];
	struct prs_schedstat st;

	prs_task_parse_schedstat(fuzz_text(data, size, text, sizeof(text)), &st);
	return 0;
}
