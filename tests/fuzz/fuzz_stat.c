/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target: the parsers of a stat file (/proc/PID/task/TID/stat: prs_task_parse_state,
 * prs_task_parse_stat), on at most the bytes their readers read. Seeds: real stat files.
 */
#include "fuzz.h"

#include <stdlib.h>

#include "pyrsprof/task.h"

#include "util/banned.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char text[1024];
	struct prs_task_stat st;
	char c = prs_task_parse_state(fuzz_text(data, size, text, sizeof(text)));

	/* the two parsers agree on the state letter whenever the longer one succeeds */
	if (prs_task_parse_stat(text, &st) == 0 && st.state != c)
		abort();
	return 0;
}
