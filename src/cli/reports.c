/* SPDX-License-Identifier: MIT */
/* The Phase-1 and Phase-4 reports of a profile, and the terminal summary of a recording. */
#include "cli/collect.h"

#include <stdio.h>

#include "cli/cli.h"
#include "pyrsprof/classify.h"
#include "pyrsprof/report.h"

#include "util/banned.h"

int cli_write_reports(const struct prs_profile *p, const char *dir, bool summary, bool python_stacks,
		      const struct cli_phase_opts *po)
{
	struct prs_facts facts;
	struct prs_verdict v;
	struct prs_phase_inputs in;
	struct prs_phase4_top top;
	struct prs_err err = { 0 };
	struct prs_report_ctx c = { p, &facts, &v, &in, python_stacks };
	int rc = 0;

	if (prs_facts_build(p, &facts, &err) != 0) {
		cli_err(&err, "classify");
		return -1;
	}
	prs_classify(&facts, &v);
	prs_phase_inputs_from_meta(p, &in);
	if (po && po->target)
		in.have_target = prs_target_parse(po->target, &in.target, NULL) == 0;
	if (po && po->ndims) {
		in.ndims = 0;
		for (size_t i = 0; i < po->ndims && in.ndims < PRS_MAX_DIMS; i++)
			if (prs_dim_parse(po->dims[i], &in.dims[in.ndims], NULL) == 0)
				in.ndims++;
	}
	for (size_t i = 0; po && i < po->nsweeps; i++)
		if (prs_phase_inputs_sweep(&in, po->sweeps[i], &err) != 0) {
			cli_err(&err, "report");
			prs_facts_release(&facts);
			return -1;
		}
	if (prs_phase1_write(&c, dir, &err) != 0 || prs_phase4_write(&c, dir, &top, &err) != 0) {
		cli_err(&err, "reports");
		rc = -1;
	} else if (summary) {
		prs_summary(&c, &top, cli_emit, NULL);
	}
	prs_facts_release(&facts);
	return rc;
}
