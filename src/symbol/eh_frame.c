// SPDX-License-Identifier: MIT
/*
 * The function table of a binary, read from its unwind tables: each FDE of .eh_frame covers
 * [initial_location, initial_location + address_range) of one function (or of one part of it: a
 * "foo.cold" part has an FDE of its own). .eh_frame stays in stripped binaries (exceptions and
 * unwinders need it), so an address that no symbol names still belongs to a known function, and
 * every sample in that function can be one frame instead of one frame per address. Files without
 * .eh_frame are read through .debug_frame, which has the same FDEs with absolute addresses.
 *
 * libdw's dwarf_next_cfi splits the section into CIEs and FDEs (bounding every length by the
 * section); decoding an FDE's two pointers needs its CIE's 'R' augmentation (the pointer
 * encoding), which we read here. Everything is hostile input: entries, CIEs and ranges are
 * bounded in number and size, and an entry we cannot decode is skipped.
 */
#include "symbol/symbol-internal.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/banned.h"

/* Bounds: entries walked per section, CIEs kept, and the widest function believed (1 GiB). */
#define CFI_MAX_ENTRIES (8u << 20)
#define CFI_MAX_CIES (1u << 20)
#define FN_MAX_RANGE (1ull << 30)

/* x86_64's own section type for .eh_frame (gold and lld use it instead of SHT_PROGBITS). */
#ifndef SHT_X86_64_UNWIND
#define SHT_X86_64_UNWIND 0x70000001
#endif

struct cie {
	uint64_t off; /* section offset */
	uint8_t enc;  /* FDE pointer encoding (DW_EH_PE_*), DW_EH_PE_omit when unusable */
};

struct cfi_scan {
	Elf_Data *data;
	uint64_t sh_addr; /* address of the section's first byte, for DW_EH_PE_pcrel */
	bool eh;          /* .eh_frame (pcrel, 'z' augmentations) rather than .debug_frame */
	unsigned addr_size;
	struct cie *cies;
	size_t ncies, capcies;
	struct prs_fntab *t;
	size_t cap;
};

static bool read_uleb(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
	uint64_t r = 0;

	for (unsigned shift = 0; *p < end && shift < 64; shift += 7) {
		uint8_t b = *(*p)++;

		r |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*v = r;
			return true;
		}
	}
	return false;
}

static bool read_sleb(const uint8_t **p, const uint8_t *end, int64_t *v)
{
	uint64_t r = 0;
	unsigned shift = 0;
	uint8_t b = 0;

	do {
		if (*p >= end || shift >= 64)
			return false;
		b = *(*p)++;
		r |= (uint64_t)(b & 0x7f) << shift;
		shift += 7;
	} while (b & 0x80);
	if (shift < 64 && (b & 0x40))
		r |= ~0ull << shift;
	*v = (int64_t)r;
	return true;
}

/* Reads a little-endian unsigned of n bytes (x86_64 is little-endian; so are its ELF files). */
static bool read_fixed(const uint8_t **p, const uint8_t *end, unsigned n, uint64_t *v)
{
	uint64_t r = 0;

	if ((size_t)(end - *p) < n)
		return false;
	for (unsigned i = 0; i < n; i++)
		r |= (uint64_t)(*p)[i] << (8 * i);
	*p += n;
	*v = r;
	return true;
}

/*
 * Decodes one pointer of encoding enc at *p (advancing it). pcrel values are made absolute with
 * the field's own address; the other applications (textrel, datarel, funcrel, aligned) and
 * indirect pointers are not used for FDE ranges by any linker, so they fail. A range (value_only)
 * ignores the application.
 */
static bool read_encoded(const struct cfi_scan *c, uint8_t enc, const uint8_t **p, const uint8_t *end,
			 bool value_only, uint64_t *v)
{
	uint64_t field = c->sh_addr + (uint64_t)(*p - (const uint8_t *)c->data->d_buf), u = 0;
	int64_t sv;
	bool ok;

	if (enc == DW_EH_PE_omit || (enc & DW_EH_PE_indirect))
		return false;
	switch (enc & 0x0f) {
	case DW_EH_PE_absptr: ok = read_fixed(p, end, c->addr_size, &u); break;
	case DW_EH_PE_uleb128: ok = read_uleb(p, end, &u); break;
	case DW_EH_PE_udata2: ok = read_fixed(p, end, 2, &u); break;
	case DW_EH_PE_udata4: ok = read_fixed(p, end, 4, &u); break;
	case DW_EH_PE_udata8: ok = read_fixed(p, end, 8, &u); break;
	case DW_EH_PE_sleb128: ok = read_sleb(p, end, &sv); u = (uint64_t)sv; break;
	case DW_EH_PE_sdata2: ok = read_fixed(p, end, 2, &u); u = (uint64_t)(int64_t)(int16_t)u; break;
	case DW_EH_PE_sdata4: ok = read_fixed(p, end, 4, &u); u = (uint64_t)(int64_t)(int32_t)u; break;
	case DW_EH_PE_sdata8: ok = read_fixed(p, end, 8, &u); break;
	default: return false;
	}
	if (!ok)
		return false;
	if (!value_only) {
		if ((enc & 0x70) == DW_EH_PE_pcrel)
			u += field;
		else if ((enc & 0x70) != DW_EH_PE_absptr)
			return false;
	}
	*v = u;
	return true;
}

/* The FDE pointer encoding of a CIE: its 'R' augmentation, absptr without one. */
static uint8_t cie_encoding(const struct cfi_scan *c, const Dwarf_CIE *cie)
{
	const char *aug = cie->augmentation;
	const uint8_t *p = cie->augmentation_data, *end;
	uint64_t skip;

	if (!aug || aug[0] == '\0')
		return DW_EH_PE_absptr;
	if (aug[0] != 'z' || !p)
		return DW_EH_PE_omit; /* "eh" and other pre-'z' forms: nothing says where data ends */
	end = p + cie->augmentation_data_size;
	for (const char *a = aug + 1; *a; a++) {
		switch (*a) {
		case 'R':
			return p < end ? *p : DW_EH_PE_omit;
		case 'L': /* LSDA encoding byte */
			if (p >= end)
				return DW_EH_PE_omit;
			p++;
			break;
		case 'P': { /* personality: an encoding byte, then a pointer in that encoding */
			uint8_t penc;

			if (p >= end)
				return DW_EH_PE_omit;
			penc = *p++;
			if (!read_encoded(c, penc & 0x0f, &p, end, true, &skip))
				return DW_EH_PE_omit;
			break;
		}
		case 'S': /* signal frame */
		case 'B': /* aarch64 BTI */
		case 'G': /* aarch64 MTE */
			break;
		default:
			return DW_EH_PE_absptr; /* unknown letters come after R in practice */
		}
	}
	return DW_EH_PE_absptr;
}

static int add_cie(struct cfi_scan *c, uint64_t off, const Dwarf_CIE *cie)
{
	if (c->ncies == c->capcies) {
		size_t nc = c->capcies ? c->capcies * 2 : 64;
		struct cie *n;

		if (nc > CFI_MAX_CIES)
			return 0; /* FDEs of further CIEs are skipped */
		n = realloc(c->cies, nc * sizeof(*n));
		if (!n)
			return -ENOMEM;
		c->cies = n;
		c->capcies = nc;
	}
	c->cies[c->ncies++] = (struct cie){ off, cie_encoding(c, cie) };
	return 0;
}

/* CIEs come in section order as we walk, so the table is sorted by offset. */
static const struct cie *find_cie(const struct cfi_scan *c, uint64_t off)
{
	size_t lo = 0, hi = c->ncies;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (c->cies[mid].off < off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < c->ncies && c->cies[lo].off == off ? &c->cies[lo] : NULL;
}

static int add_fde(struct cfi_scan *c, const Dwarf_FDE *fde)
{
	const struct cie *cie = find_cie(c, fde->CIE_pointer);
	const uint8_t *p = fde->start;
	uint64_t lo, len;

	if (!cie || !read_encoded(c, cie->enc, &p, fde->end, false, &lo) ||
	    !read_encoded(c, cie->enc & 0x0f, &p, fde->end, true, &len))
		return 0;
	if (len == 0 || len > FN_MAX_RANGE || lo == 0 || lo + len < lo)
		return 0; /* empty, absurd, or a discarded function the linker left at 0 */
	if (c->t->n == c->cap) {
		size_t nc = c->cap ? c->cap * 2 : 1024;
		struct prs_fnrange *n;

		if (nc > CFI_MAX_ENTRIES)
			return 0;
		n = realloc(c->t->r, nc * sizeof(*n));
		if (!n)
			return -ENOMEM;
		c->t->r = n;
		c->cap = nc;
	}
	c->t->r[c->t->n++] = (struct prs_fnrange){ lo, lo + len };
	return 0;
}

static int fnrange_cmp(const void *a, const void *b)
{
	const struct prs_fnrange *x = a, *y = b;

	if (x->lo != y->lo)
		return x->lo < y->lo ? -1 : 1;
	return (x->hi < y->hi) - (x->hi > y->hi); /* the wider first */
}

/* Walks one CFI section into c->t. Returns 0 or -ENOMEM. */
static int walk(struct cfi_scan *c, const unsigned char *ident)
{
	Dwarf_Off off = 0, next = 0;
	Dwarf_CFI_Entry e;

	for (size_t i = 0; i < CFI_MAX_ENTRIES && off < c->data->d_size; i++) {
		int rc = dwarf_next_cfi(ident, c->data, c->eh, off, &next, &e);

		if (rc != 0 || next <= off)
			break; /* 1: the end (a zero terminator); -1: corrupt from here on */
		rc = dwarf_cfi_cie_p(&e) ? add_cie(c, off, &e.cie) : add_fde(c, &e.fde);
		if (rc)
			return rc;
		off = next;
	}
	return 0;
}

/* Finds .eh_frame (eh = true) or .debug_frame. */
static Elf_Scn *cfi_section(Elf *elf, bool eh, GElf_Shdr *sh)
{
	Elf_Scn *scn = NULL;
	size_t shstrndx;

	if (elf_getshdrstrndx(elf, &shstrndx) != 0)
		return NULL;
	while ((scn = elf_nextscn(elf, scn)) != NULL) {
		const char *name;

		if (!gelf_getshdr(scn, sh) || sh->sh_type == SHT_NOBITS)
			continue;
		name = elf_strptr(elf, shstrndx, sh->sh_name);
		if (name && strcmp(name, eh ? ".eh_frame" : ".debug_frame") == 0 &&
		    (sh->sh_type == SHT_PROGBITS || sh->sh_type == SHT_X86_64_UNWIND))
			return scn;
	}
	return NULL;
}

int prs_fntab_load(Elf *elf, struct prs_fntab *t)
{
	struct cfi_scan c = { .t = t };
	const unsigned char *ident;
	GElf_Shdr sh;
	Elf_Scn *scn;
	size_t k = 0;
	int rc;

	memset(t, 0, sizeof(*t));
	ident = elf ? (const unsigned char *)elf_getident(elf, NULL) : NULL;
	if (!ident)
		return 0;
	c.addr_size = ident[EI_CLASS] == ELFCLASS32 ? 4 : 8;
	c.eh = true;
	scn = cfi_section(elf, true, &sh);
	if (!scn) {
		c.eh = false;
		scn = cfi_section(elf, false, &sh);
	}
	if (!scn || !(c.data = elf_getdata(scn, NULL)) || !c.data->d_buf)
		return 0;
	c.sh_addr = sh.sh_addr;
	rc = walk(&c, ident);
	free(c.cies);
	if (rc) {
		prs_fntab_release(t);
		return rc;
	}
	if (t->n)
		qsort(t->r, t->n, sizeof(*t->r), fnrange_cmp);
	for (size_t i = 0; i < t->n; i++) /* one range per start: the widest */
		if (!k || t->r[k - 1].lo != t->r[i].lo)
			t->r[k++] = t->r[i];
	t->n = k;
	return 0;
}

const struct prs_fnrange *prs_fntab_find(const struct prs_fntab *t, uint64_t addr)
{
	size_t lo = 0, hi = t ? t->n : 0;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (t->r[mid].lo <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* lo = first range above addr; FDEs do not nest, but a hostile file's may: look back a little */
	for (size_t i = lo, steps = 0; i > 0 && steps < 4; i--, steps++)
		if (addr < t->r[i - 1].hi)
			return &t->r[i - 1];
	return NULL;
}

void prs_fntab_release(struct prs_fntab *t)
{
	if (!t)
		return;
	free(t->r);
	memset(t, 0, sizeof(*t));
}
