/* SPDX-License-Identifier: MIT */
/* Private to src/report: Markdown output shared by the reports. */
#ifndef PYRSPROF_REPORT_INTERNAL_H
#define PYRSPROF_REPORT_INTERNAL_H

#include <stdio.h>

/* Writes text for Markdown (a table cell or a line): Markdown's punctuation escaped, line breaks
 * and tabs as spaces, other control characters as '?'. The text must be UTF-8 already. */
void prs_md_text(FILE *f, const char *s);

#endif
