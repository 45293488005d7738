/* SPDX-License-Identifier: MIT */
/*
 * The synthetic target of the CPython reader's unit tests (see py_image.h): the buffer, its
 * memreader with counters and faults, and the str builders.
 */
#include "py_image.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "python/python-internal.h"

#include "util/banned.h"

struct py_image img;

void img_init(uint64_t base, size_t size)
{
	memset(&img, 0, sizeof(img));
	img.mem = calloc(1, size);
	cr_assert(img.mem, "image of %zu bytes", size);
	img.base = base;
	img.size = size;
	img_clear();
}

void img_release(void)
{
	free(img.mem);
	img.mem = NULL;
}

void img_clear(void)
{
	memset(img.mem, 0, img.size);
	img.brk = img.base + 4096;
	img.reads = img.readvs = img.vecs = 0;
	img.bytes = 0;
	memset(img.watch_lo, 0, sizeof(img.watch_lo));
	memset(img.watch_hi, 0, sizeof(img.watch_hi));
	img.watched = 0;
	memset(img.hole, 0, sizeof(img.hole));
	img.gone = false;
}

/* One read of [addr, addr + len): the bytes, or why not. */
static int serve(struct py_image *im, uint64_t addr, void *buf, size_t len)
{
	for (int w = 0; w < 2; w++)
		if (addr < im->watch_hi[w] && addr + len > im->watch_lo[w])
			im->watched++;
	if (im->gone)
		return -ESRCH;
	if (addr < im->base || addr + len > im->base + im->size || addr + len < addr)
		return -EFAULT;
	for (int h = 0; h < 2; h++)
		if (im->hole[h] && addr < im->hole[h] + 4096 && addr + len > im->hole[h])
			return -EFAULT;
	memcpy(buf, im->mem + (addr - im->base), len);
	im->bytes += len;
	return 0;
}

static int img_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	struct py_image *im = ctx;

	im->reads++;
	return serve(im, addr, buf, len);
}

static int img_readv(void *ctx, struct prs_memvec *v, size_t n)
{
	struct py_image *im = ctx;
	int ok = 0;

	im->readvs++;
	im->vecs += (unsigned)n;
	if (im->gone)
		return -ESRCH;
	for (size_t i = 0; i < n; i++) {
		v[i].res = serve(im, v[i].addr, v[i].buf, v[i].len);
		ok += v[i].res == 0;
	}
	return ok;
}

struct prs_memreader img_reader(void)
{
	return (struct prs_memreader){ img_read, img_readv, &img };
}

uint64_t img_alloc(size_t len)
{
	uint64_t a = (img.brk + 15) & ~15ull;

	img.brk = a + len;
	cr_assert(img.brk <= img.base + img.size, "image full");
	return a;
}

uint8_t *img_at(uint64_t addr)
{
	cr_assert(addr >= img.base && addr < img.base + img.size, "%#llx outside the image",
		  (unsigned long long)addr);
	return img.mem + (addr - img.base);
}

void img_put64(uint64_t addr, uint64_t v) { memcpy(img_at(addr), &v, 8); }
void img_put32(uint64_t addr, uint32_t v) { memcpy(img_at(addr), &v, 4); }
void img_put8(uint64_t addr, uint8_t v) { *img_at(addr) = v; }

uint64_t img_get64(uint64_t addr)
{
	uint64_t v;

	memcpy(&v, img_at(addr), 8);
	return v;
}

uint32_t img_str_state(unsigned kind, bool ascii)
{
	const struct prs_py_layout *L = img.L;

	return kind << L->str_kind_shift | 1u << L->str_compact_bit | (ascii ? 1u << L->str_ascii_bit : 0);
}

uint64_t img_mkstr_cp_at(uint64_t at, const uint32_t *cps, size_t n, unsigned kind, bool ascii)
{
	const struct prs_py_layout *L = img.L;
	uint64_t hdr = (uint64_t)(ascii ? L->str_ascii_size : L->str_compact_size);
	uint64_t a = at ? at : img_alloc(hdr + (n + 1) * kind);

	img_put64(a + L->ob_type, img.str_type);
	img_put64(a + L->str_length, n);
	img_put32(a + L->str_state, img_str_state(kind, ascii));
	for (size_t i = 0; i < n; i++)
		memcpy(img_at(a + hdr + i * kind), &cps[i], kind);
	return a;
}

uint64_t img_mkstr_cp(const uint32_t *cps, size_t n, unsigned kind, bool ascii)
{
	return img_mkstr_cp_at(0, cps, n, kind, ascii);
}

uint64_t img_mkstr(const char *s)
{
	const struct prs_py_layout *L = img.L;
	size_t n = strlen(s);
	uint64_t a = img_alloc((size_t)L->str_ascii_size + n + 1);

	img_put64(a + L->ob_type, img.str_type);
	img_put64(a + L->str_length, n);
	img_put32(a + L->str_state, img_str_state(1, true));
	if (n)
		memcpy(img_at(a + (uint64_t)L->str_ascii_size), s, n);
	return a;
}

uint64_t img_rand(uint64_t *state)
{
	*state ^= *state << 13;
	*state ^= *state >> 7;
	*state ^= *state << 17;
	return *state;
}
