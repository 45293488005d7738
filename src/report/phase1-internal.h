/* SPDX-License-Identifier: MIT */
/* Private to src/report: the two halves of the Phase-1 report. */
#ifndef PYRSPROF_PHASE1_INTERNAL_H
#define PYRSPROF_PHASE1_INTERNAL_H

#include <jansson.h>
#include <stdio.h>

#include "pyrsprof/report.h"

/* The measured value of a target metric ("wall" s, "cpu" s, "rss" bytes); false if unknown. */
bool prs_phase1_measure(const struct prs_report_ctx *c, const char *metric, double *out);

/* phase1.json's document (a new reference), or NULL when out of memory. */
json_t *prs_phase1_json(const struct prs_report_ctx *c);

/* Writes phase1.md to f. 0 or -EIO. */
int prs_phase1_md(FILE *f, const struct prs_report_ctx *c);

#endif
