/* SPDX-License-Identifier: MIT */
/*
 * Decoding CPython str objects (compact PEP 393 strings: ASCII, latin-1, UCS-2, UCS-4) read from
 * the target into UTF-8, for code object names and thread names. Depends on the layout row and
 * the memreader only, like the walker (python/walk.h).
 */
#ifndef PYRSPROF_PYTHON_STR_H
#define PYRSPROF_PYTHON_STR_H

#include <stddef.h>
#include <stdint.h>

#include "pyrsprof/memreader.h"
#include "python/layout.h"

/*
 * Decodes the compact str whose first `have` bytes are in h into UTF-8 in out (at most PRS_MAX_NAME
 * code points, cut at a character boundary to fit outsz with its NUL; NUL and lone surrogates
 * become U+FFFD). str_type: &PyUnicode_Type in the target, checked when not 0. Returns the length,
 * -EINVAL (not a compact str), or -E2BIG with *need set to the bytes the str takes when that is
 * more than `have`.
 */
int prs_py_str_decode(const struct prs_py_layout *L, uint64_t str_type, const uint8_t *h, size_t have,
		      char *out, size_t outsz, size_t *need);
/* Reads and decodes the str at addr (≤ PRS_MAX_NAME bytes of UTF-8 into out, NUL-terminated): its
 * head, then exactly the bytes it says its characters take. Returns the length, or a negative
 * errno (-EINVAL: not a plausible string; -EFAULT, -ESRCH from the reader). */
int prs_py_read_str(const struct prs_py_layout *L, uint64_t str_type, const struct prs_memreader *mr,
		    uint64_t addr, char *out, size_t outsz);

#endif
