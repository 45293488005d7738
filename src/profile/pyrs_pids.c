/* SPDX-License-Identifier: MIT */
/*
 * The pid of a SAMPLE record that does not carry one (docs/pyrs-format.md, "Processes"): the
 * pid of the latest THREAD record of its tid before it in the file. The writer and the reader
 * each track it the same way, record by record, so the writer can leave the field out of almost
 * every sample: a sample costs no byte more for naming its process.
 */
#include "profile/profile-internal.h"

#include "util/banned.h"

void prs_pyrs_pids_init(struct prs_pyrs_pids *t)
{
	prs_map64_init(&t->of_tid);
}

void prs_pyrs_pids_release(struct prs_pyrs_pids *t)
{
	prs_map64_release(&t->of_tid);
}

int prs_pyrs_pids_thread(struct prs_pyrs_pids *t, int32_t tid, int32_t pid)
{
	/* files of one process (every pid 0) never fill the table: the lookup below stays free */
	if (pid == 0 && t->of_tid.len == 0)
		return 0;
	return prs_map64_put(&t->of_tid, (uint32_t)tid, (uint32_t)pid);
}

int32_t prs_pyrs_pids_implied(const struct prs_pyrs_pids *t, int32_t tid)
{
	uint32_t pid;

	if (t->of_tid.len == 0)
		return 0;
	pid = prs_map64_get(&t->of_tid, (uint32_t)tid);
	return pid == PRS_MAP_NONE ? 0 : (int32_t)pid;
}
