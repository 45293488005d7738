/* SPDX-License-Identifier: MIT */
/* The Phase-1 report: phase1.md and phase1.json, each written whole or not at all. */
#include "report/phase1-internal.h"

#include <errno.h>

#include "util/banned.h"

static int write_md(FILE *f, void *arg)
{
	return prs_phase1_md(f, arg);
}

static int write_json(FILE *f, void *arg)
{
	json_t *j = prs_phase1_json(arg);
	int rc;

	if (!j)
		return -ENOMEM;
	rc = json_dumpf(j, f, JSON_INDENT(2) | JSON_REAL_PRECISION(10)) == 0 && fputc('\n', f) != EOF
		     ? 0 : -EIO;
	json_decref(j);
	return rc;
}

int prs_phase1_write(const struct prs_report_ctx *c, const char *dir, struct prs_err *err)
{
	int rc = prs_write_atomic(dir, "phase1.md", write_md, (void *)c, err);

	return rc ? rc : prs_write_atomic(dir, "phase1.json", write_json, (void *)c, err);
}
