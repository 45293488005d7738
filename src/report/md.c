/* SPDX-License-Identifier: MIT */
/* Markdown escaping for the reports: names and commands come from the target. */
#include "report/report-internal.h"

#include <string.h>

#include "util/banned.h"

void prs_md_text(FILE *f, const char *s)
{
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '\n' || ch == '\r' || ch == '\t')
			fputc(' ', f);
		else if (ch < 0x20 || ch == 0x7f)
			fputc('?', f);
		else if (strchr("\\`*_{}[]<>|~&#", ch))
			fprintf(f, "\\%c", ch);
		else
			fputc(ch, f);
	}
}
