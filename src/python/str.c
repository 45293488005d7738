/* SPDX-License-Identifier: MIT */
/*
 * CPython str objects to UTF-8 (python/str.h). Legacy (non-compact) strings are refused: never
 * seen for code or thread names. Lengths are bounded before any byte is read.
 */
#include "python/str.h"

#include <errno.h>
#include <string.h>

#include "pyrsprof/types.h"
#include "python/walk.h"

#include "util/banned.h"

/* Appends c as UTF-8 at out[o] when it fits before out[outsz - 1] (kept for the NUL); returns the
 * new length, o when it does not fit. A lone surrogate or a NUL becomes U+FFFD. */
static size_t put_utf8(char *out, size_t o, size_t outsz, uint32_t c)
{
	if (c == 0 || (c >= 0xd800 && c < 0xe000) || c > 0x10ffff)
		c = 0xfffd;
	if (c < 0x80 && o + 1 < outsz) {
		out[o++] = (char)c;
	} else if (c >= 0x80 && c < 0x800 && o + 2 < outsz) {
		out[o++] = (char)(0xc0 | c >> 6);
		out[o++] = (char)(0x80 | (c & 63));
	} else if (c >= 0x800 && c < 0x10000 && o + 3 < outsz) {
		out[o++] = (char)(0xe0 | c >> 12);
		out[o++] = (char)(0x80 | ((c >> 6) & 63));
		out[o++] = (char)(0x80 | (c & 63));
	} else if (c >= 0x10000 && o + 4 < outsz) {
		out[o++] = (char)(0xf0 | c >> 18);
		out[o++] = (char)(0x80 | ((c >> 12) & 63));
		out[o++] = (char)(0x80 | ((c >> 6) & 63));
		out[o++] = (char)(0x80 | (c & 63));
	}
	return o;
}

int prs_py_str_decode(const struct prs_py_layout *L, uint64_t str_type, const uint8_t *h, size_t have,
		      char *out, size_t outsz, size_t *need)
{
	uint64_t len;
	uint32_t state, kind;
	size_t off, o = 0;

	if (outsz == 0 || have < (size_t)L->str_ascii_size)
		return -EINVAL;
	out[0] = 0;
	len = u64_at(h, L->str_length);
	memcpy(&state, h + L->str_state, 4);
	kind = (state >> L->str_kind_shift) & 7;
	if ((str_type && u64_at(h, L->ob_type) != str_type) || !(state & (1u << L->str_compact_bit)) ||
	    (kind != 1 && kind != 2 && kind != 4) || len > (1u << 30))
		return -EINVAL;
	off = (state & (1u << L->str_ascii_bit)) ? (size_t)L->str_ascii_size : (size_t)L->str_compact_size;
	if (len > PRS_MAX_NAME)
		len = PRS_MAX_NAME;
	*need = off + (size_t)len * kind;
	if (*need > have)
		return -E2BIG;
	for (size_t i = 0; i < len; i++) {
		const uint8_t *c = h + off + i * kind;
		uint32_t u = kind == 1 ? c[0]
			     : kind == 2 ? (uint32_t)(c[0] | c[1] << 8)
					 : (uint32_t)(c[0] | c[1] << 8 | c[2] << 16 | (uint32_t)c[3] << 24);
		size_t o2 = put_utf8(out, o, outsz, u);

		if (o2 == o)
			break; /* full: cut at a character boundary */
		o = o2;
	}
	out[o] = 0;
	return (int)o;
}

int prs_py_read_str(const struct prs_py_layout *L, uint64_t str_type, const struct prs_memreader *mr,
		    uint64_t addr, char *out, size_t outsz)
{
	uint8_t buf[128 + 4 * PRS_MAX_NAME];
	size_t need = 0;
	int rc;

	if (outsz == 0)
		return -EINVAL;
	out[0] = 0;
	if (!plausible_ptr(addr) || L->str_compact_size > 128)
		return -EINVAL;
	/* the head, then exactly the bytes it says the characters take (from the same cached page) */
	rc = mr->read(mr->ctx, addr, buf, (size_t)L->str_compact_size);
	if (rc)
		return rc;
	rc = prs_py_str_decode(L, str_type, buf, (size_t)L->str_compact_size, out, outsz, &need);
	if (rc != -E2BIG)
		return rc;
	if (need > sizeof(buf))
		return -EINVAL;
	rc = mr->read(mr->ctx, addr, buf, need);
	if (rc)
		return rc;
	return prs_py_str_decode(L, str_type, buf, need, out, outsz, &need);
}
