/* SPDX-License-Identifier: MIT */
/*
 * Growable arrays and byte buffers, and LEB128 varints. The profile model and the .pyrs writer
 * build on these; everything is bounded and overflow-checked because sizes can come from files.
 */
#include "pyrsprof/util.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/banned.h"

int prs_array_grow(void **ptr, size_t *cap, size_t need, size_t elem_size)
{
	size_t ncap;
	void *np;

	if (need <= *cap)
		return 0;
	if (elem_size == 0)
		return -EINVAL;
	ncap = *cap < 16 ? 16 : *cap;
	while (ncap < need) {
		if (ncap > SIZE_MAX / 2)
			return -ENOMEM;
		ncap *= 2;
	}
	if (ncap > SIZE_MAX / elem_size)
		return -ENOMEM;
	np = realloc(*ptr, ncap * elem_size);
	if (!np)
		return -ENOMEM;
	*ptr = np;
	*cap = ncap;
	return 0;
}

void prs_buf_init(struct prs_buf *b)
{
	b->data = NULL;
	b->len = 0;
	b->cap = 0;
}

void prs_buf_release(struct prs_buf *b)
{
	free(b->data);
	prs_buf_init(b);
}

void prs_buf_reset(struct prs_buf *b)
{
	b->len = 0;
}

int prs_buf_reserve(struct prs_buf *b, size_t extra)
{
	void *p = b->data;
	int rc;

	if (extra > SIZE_MAX - b->len - 1)
		return -ENOMEM;
	/* +1 keeps room for the NUL prs_buf_printf writes */
	rc = prs_array_grow(&p, &b->cap, b->len + extra + 1, 1);
	b->data = p;
	return rc;
}

int prs_buf_append(struct prs_buf *b, const void *data, size_t len)
{
	int rc;

	if (len == 0)
		return 0;
	rc = prs_buf_reserve(b, len);
	if (rc)
		return rc;
	memcpy(b->data + b->len, data, len);
	b->len += len;
	return 0;
}

int prs_buf_putc(struct prs_buf *b, uint8_t c)
{
	if (b->len + 1 >= b->cap) {
		int rc = prs_buf_reserve(b, 1);

		if (rc)
			return rc;
	}
	b->data[b->len++] = c;
	return 0;
}

int prs_buf_put_uleb(struct prs_buf *b, uint64_t v)
{
	if (b->cap - b->len <= PRS_LEB128_MAX) {
		int rc = prs_buf_reserve(b, PRS_LEB128_MAX);

		if (rc)
			return rc;
	}
	b->len += prs_uleb128_encode(v, b->data + b->len);
	return 0;
}

int prs_buf_put_sleb(struct prs_buf *b, int64_t v)
{
	return prs_buf_put_uleb(b, prs_zigzag_encode(v));
}

int prs_buf_printf(struct prs_buf *b, const char *fmt, ...)
{
	va_list ap;
	int n, rc;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		return -EINVAL;
	rc = prs_buf_reserve(b, (size_t)n);
	if (rc)
		return rc;
	va_start(ap, fmt);
	vsnprintf((char *)b->data + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
	return 0;
}

uint8_t *prs_buf_detach(struct prs_buf *b, size_t *len)
{
	uint8_t *d = b->data;

	if (len)
		*len = b->len;
	prs_buf_init(b);
	return d;
}

size_t prs_uleb128_encode(uint64_t v, uint8_t *out)
{
	size_t n = 0;

	while (v >= 0x80) {
		out[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	out[n++] = (uint8_t)v;
	return n;
}

int prs_uleb128_decode(const uint8_t *p, size_t len, uint64_t *v, size_t *used)
{
	uint64_t r = 0;
	size_t i;

	for (i = 0; i < len && i < PRS_LEB128_MAX; i++) {
		uint64_t byte = p[i];

		/* the 10th byte carries only bit 63 */
		if (i == PRS_LEB128_MAX - 1 && (byte & 0x7e))
			return -EOVERFLOW;
		r |= (byte & 0x7f) << (7 * i);
		if (!(byte & 0x80)) {
			*v = r;
			*used = i + 1;
			return 0;
		}
	}
	return i == PRS_LEB128_MAX ? -EOVERFLOW : -ENODATA;
}

uint64_t prs_zigzag_encode(int64_t v)
{
	return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

int64_t prs_zigzag_decode(uint64_t v)
{
	return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}
