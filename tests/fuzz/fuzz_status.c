/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target: the parser of a status file (/proc/PID/status: prs_proc_parse_status), on at most
 * the bytes its reader reads, for the keys pyrsprof asks for. Seeds: real status files.
 */
#include "fuzz.h"

#include <stdlib.h>
#include <string.h>

#include "pyrsprof/task.h"

#include "util/banned.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const keys[] = { "TracerPid", "Uid", "Name", "Kthread", "State" };
	char text[8192], val[128];

	fuzz_text(data, size, text, sizeof(text));
	for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++)
		if (prs_proc_parse_status(text, keys[k], val, sizeof(val)) == 0 && strlen(val) >= sizeof(val))
			abort();
	return 0;
}
