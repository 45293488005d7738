/* SPDX-License-Identifier: MIT */
/*
 * CPython line-number tables, decoded from bytes copied out of the target: co_lnotab (≤3.9),
 * the 3.10 co_linetable, and the 3.11+ location table (Objects/locations.md in CPython). Every
 * decoder is bounded by the table length and returns "no line" on garbage instead of reading on.
 */
#include "python/python-internal.h"

#include "util/banned.h"

int prs_py_line_lnotab(const uint8_t *tab, size_t len, int firstline, uint32_t addr)
{
	/* PyCode_Addr2Line ≤3.9: the line of the last entry whose start address is <= addr. */
	int line = firstline;
	uint32_t a = 0;
	size_t i;

	for (i = 0; i + 1 < len; i += 2) {
		a += tab[i];
		if (a > addr)
			break;
		line += (int8_t)tab[i + 1];
	}
	return line;
}

int prs_py_line_310(const uint8_t *tab, size_t len, int firstline, uint32_t addr)
{
	int line = firstline;
	uint32_t end = 0;
	size_t i;

	for (i = 0; i + 1 < len; i += 2) {
		uint32_t start = end;
		int8_t ld = (int8_t)tab[i + 1];

		end += tab[i];
		if (ld == -128) {
			if (start <= addr && addr < end)
				return -1;
			continue;
		}
		line += ld;
		if (start <= addr && addr < end)
			return line;
	}
	return -1;
}

/* Reads a 6-bit-chunk varint; false when the table ends inside it. */
static bool varint(const uint8_t *tab, size_t len, size_t *i, uint32_t *out)
{
	uint32_t v = 0;
	unsigned shift = 0;

	for (;;) {
		uint8_t b;

		if (*i >= len || shift > 28)
			return false;
		b = tab[(*i)++];
		v |= (uint32_t)(b & 63) << shift;
		shift += 6;
		if (!(b & 64))
			break;
	}
	*out = v;
	return true;
}

static bool svarint(const uint8_t *tab, size_t len, size_t *i, int32_t *out)
{
	uint32_t v;

	if (!varint(tab, len, i, &v))
		return false;
	*out = (v & 1) ? -(int32_t)(v >> 1) : (int32_t)(v >> 1);
	return true;
}

int prs_py_line_loc(const uint8_t *tab, size_t len, int firstline, uint32_t unit)
{
	int line = firstline;
	uint32_t addr = 0;
	size_t i = 0;

	while (i < len) {
		uint8_t first = tab[i++];
		unsigned code, n;
		int32_t delta = 0;
		uint32_t skip;
		bool none = false;

		if (!(first & 0x80))
			return -1; /* not at an entry start: garbage */
		code = (first >> 3) & 15;
		n = (first & 7) + 1;
		if (code == 15) {
			none = true;
		} else if (code == 14) {
			if (!svarint(tab, len, &i, &delta) || !varint(tab, len, &i, &skip) ||
			    !varint(tab, len, &i, &skip) || !varint(tab, len, &i, &skip))
				return -1;
		} else if (code == 13) {
			if (!svarint(tab, len, &i, &delta))
				return -1;
		} else if (code >= 10) {
			delta = (int32_t)code - 10;
			i += 2;
		} else {
			i += 1;
		}
		if (!none)
			line += delta;
		if (addr <= unit && unit < addr + n)
			return none ? -1 : line;
		addr += n;
	}
	return -1;
}
