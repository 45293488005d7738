/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target: the symbolizer's entry points on a hostile ELF file. The input is written to a
 * temporary file (the symbolizer opens files by path, as it opens a target's libraries), its
 * build id is read (prs_elf_build_id), and addresses in it are symbolized (prs_symbolize) as if
 * the file were mapped at 0x400000: spread over the file, and at the functions its own symbol
 * tables name (so that the DWARF walks are reached), with the build id it has and with a wrong one.
 * Seeds: small real executables (C, C++ with inlines, stripped, with and without DWARF).
 */
#include "fuzz.h"

#include <gelf.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pyrsprof/symbol.h"

#include "util/banned.h"

#define MAP_START 0x400000ull
#define MAX_PCS 48

static char path[64];
static int fd = -1;

static void put_file(const uint8_t *data, size_t size)
{
	if (fd < 0) {
		const char *dir = getenv("TMPDIR");

		snprintf(path, sizeof(path), "%s/prs-fuzz-elf-XXXXXX", dir && strlen(dir) < 32 ? dir : "/tmp");
		fd = mkstemp(path);
		if (fd < 0)
			abort();
	}
	if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != (ssize_t)size)
		abort();
}

/* File offsets of the functions the file's symbol tables name, mapped through its PT_LOADs. */
static size_t symbol_offsets(uint64_t *out, size_t max)
{
	Elf *elf;
	Elf_Scn *scn = NULL;
	size_t n = 0, nph = 0;

	elf_version(EV_CURRENT);
	elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!elf)
		return 0;
	if (elf_kind(elf) != ELF_K_ELF || elf_getphdrnum(elf, &nph) != 0)
		goto out;
	while (n < max && (scn = elf_nextscn(elf, scn)) != NULL) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM))
			continue;
		d = elf_getdata(scn, NULL);
		for (int i = 0; d && n < max && i < 4096; i++) {
			GElf_Sym sym;

			if (!gelf_getsym(d, i, &sym))
				break;
			if (GELF_ST_TYPE(sym.st_info) != STT_FUNC || sym.st_value == 0)
				continue;
			for (size_t k = 0; k < nph && k < 64; k++) {
				GElf_Phdr ph;

				if (!gelf_getphdr(elf, (int)k, &ph) || ph.p_type != PT_LOAD)
					continue;
				if (sym.st_value >= ph.p_vaddr && sym.st_value - ph.p_vaddr < ph.p_filesz) {
					uint64_t off = sym.st_value - ph.p_vaddr + ph.p_offset;

					out[n++] = off + (sym.st_size > 1 ? sym.st_size / 2 : 0);
					break;
				}
			}
		}
	}
out:
	elf_end(elf);
	return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct prs_symframe out[PRS_SYM_MAX_INLINE];
	uint8_t id[64], wrong[20];
	uint64_t offs[MAX_PCS];
	size_t idlen = 0, n = 0;
	struct prs_symbolizer *s;
	struct prs_symmap map;

	put_file(data, size);
	if (prs_elf_build_id(path, id, sizeof(id), &idlen) != 0)
		idlen = 0;
	for (int k = 0; k < 8; k++)
		offs[n++] = size * (size_t)k / 8;
	n += symbol_offsets(offs + n, MAX_PCS - n);

	memset(&map, 0, sizeof(map));
	map.path = path;
	map.start = MAP_START;
	map.end = MAP_START + (size > 4096 ? size : 4096);
	map.build_id = idlen ? id : NULL;
	map.build_id_len = idlen;
	s = prs_symbolizer_new();
	if (!s)
		return 0;
	for (size_t i = 0; i < n; i++) {
		prs_symbolize(s, &map, MAP_START + offs[i], true, out, PRS_SYM_MAX_INLINE);
		prs_symbolize(s, &map, MAP_START + offs[i] + 1, false, out, 2);
	}
	prs_symbolizer_free(s);

	/* a recorded build id that is not the file's: the file must be left alone */
	memset(wrong, 0xa5, sizeof(wrong));
	map.build_id = wrong;
	map.build_id_len = sizeof(wrong);
	s = prs_symbolizer_new();
	if (!s)
		return 0;
	if (n)
		prs_symbolize(s, &map, MAP_START + offs[n - 1], true, out, PRS_SYM_MAX_INLINE);
	prs_symbolizer_free(s);
	return 0;
}
