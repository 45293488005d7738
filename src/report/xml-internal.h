/* SPDX-License-Identifier: MIT */
/* Private to src/report: XML text for the SVG writers. */
#ifndef PYRSPROF_XML_INTERNAL_H
#define PYRSPROF_XML_INTERNAL_H

#include <stddef.h>
#include <stdio.h>

/*
 * Writes s (any bytes) as XML character data that is also safe in a quoted attribute: invalid
 * UTF-8 becomes U+FFFD, control characters are dropped, & < > " ' become references. A text of
 * more than max_chars characters is cut to max_chars - 1 and "…" appended (max_chars 0: no limit).
 */
void prs_xml_text(FILE *f, const char *s, size_t max_chars);

#endif
