/* SPDX-License-Identifier: MIT */
/*
 * Internals of the flame graph renderer shared by its .c files: the JS and CSS embedded into every
 * SVG (generated at build time by tools/embed from flamegraph/fg.js and flamegraph/fg.css).
 */
#ifndef PYRSPROF_FG_INTERNAL_H
#define PYRSPROF_FG_INTERNAL_H

#include <stddef.h>

/* NUL-terminated; the build checks that the JS contains no "]]>" (it goes into a CDATA section). */
extern const char prs_fg_asset_js[];
extern const size_t prs_fg_asset_js_len;
extern const char prs_fg_asset_css[];
extern const size_t prs_fg_asset_css_len;

#endif
