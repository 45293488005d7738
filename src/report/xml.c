/* SPDX-License-Identifier: MIT */
/* XML (SVG) escaping for the reports: commands and names come from the user or the target. */
#include "report/xml-internal.h"

#include <stdint.h>
#include <string.h>

#include "pyrsprof/export.h"
#include "pyrsprof/util.h"

#include "util/banned.h"

/* The length of the sequence led by byte c of valid UTF-8. */
static size_t seq_len(unsigned char c)
{
	return c < 0x80 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
}

/* Writes the character at s (n bytes of valid UTF-8) as XML; false if it is dropped. */
static int put_xml(FILE *f, const unsigned char *s, size_t n)
{
	if (n == 1) {
		switch (s[0]) {
		case '&': fputs("&amp;", f); return 1;
		case '<': fputs("&lt;", f); return 1;
		case '>': fputs("&gt;", f); return 1;
		case '"': fputs("&quot;", f); return 1;
		case '\'': fputs("&#39;", f); return 1;
		}
		if (s[0] == '\n' || s[0] == '\r' || s[0] == '\t') {
			fputc(' ', f); /* a line break separates words: "import time\nx=0" is two */
			return 1;
		}
		if (s[0] < 0x20 || s[0] == 0x7f)
			return 0; /* not allowed in XML 1.0, or invisible */
	}
	if (n == 2 && s[0] == 0xc2 && s[1] < 0xa0)
		return 0; /* C1 controls U+0080..U+009F */
	if (n == 3 && s[0] == 0xef && s[1] == 0xbf && s[2] >= 0xbe) {
		fputs("\xef\xbf\xbd", f); /* U+FFFE, U+FFFF are not XML characters */
		return 1;
	}
	fwrite(s, 1, n, f);
	return 1;
}

void prs_xml_text(FILE *f, const char *str, size_t max_chars)
{
	struct prs_buf scratch;
	const unsigned char *s;
	size_t len, chars = 0, out = 0, limit = SIZE_MAX;

	prs_buf_init(&scratch);
	s = (const unsigned char *)prs_utf8_clean(str, strlen(str), &scratch, &len);
	if (!s) {
		fputs("\xef\xbf\xbd", f); /* out of memory: a visible placeholder, never raw bytes */
		return;
	}
	for (size_t i = 0; i < len; i += seq_len(s[i]))
		chars++;
	if (max_chars && chars > max_chars)
		limit = max_chars - 1;
	for (size_t i = 0; i < len && out < limit; i += seq_len(s[i]))
		out += (size_t)put_xml(f, s + i, seq_len(s[i]));
	if (limit != SIZE_MAX)
		fputs("…", f);
	prs_buf_release(&scratch);
}
