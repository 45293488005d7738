/* SPDX-License-Identifier: MIT */
/* Markdown escaping for the reports: names and commands come from the target. */
#include "report/report-internal.h"

#include <string.h>

#include "util/banned.h"

/* '>' is special only where a line starts (a block quote): the text has no line breaks (they
 * become spaces), so only its first character may be one; an arrow inside it ("0.30 -> 0.26")
 * stays as written. A '<' is escaped everywhere: it could open an HTML tag or an autolink. */
void prs_md_text(FILE *f, const char *s)
{
	for (const char *first = s; *s; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '\n' || ch == '\r' || ch == '\t')
			fputc(' ', f);
		else if (ch < 0x20 || ch == 0x7f)
			fputc('?', f);
		else if (strchr("\\`*_{}[]<|~&#", ch) || (ch == '>' && s == first))
			fprintf(f, "\\%c", ch);
		else
			fputc(ch, f);
	}
}
