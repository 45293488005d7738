// SPDX-License-Identifier: MIT
/*
 * ELF helpers for symbolization with libelf: the GNU build id note (from SHT_NOTE sections, or
 * from PT_NOTE segments when a file has no section headers). Every file is hostile input: libelf
 * bounds sections and chunks by the file size, and we bound note sizes ourselves.
 */
#include "symbol/symbol-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "pyrsprof/symbol.h"
#include "util/banned.h"

/* A build id is 20 bytes (sha1) in practice; anything above this is not a build id. */
#define BUILD_ID_SANE_MAX 256

static pthread_once_t elf_once = PTHREAD_ONCE_INIT;
static int elf_ok;

static void elf_init_once(void)
{
	elf_ok = elf_version(EV_CURRENT) != EV_NONE;
}

int prs_elf_init(void)
{
	pthread_once(&elf_once, elf_init_once);
	return elf_ok ? 0 : -ENOSYS;
}

/* Scans one block of notes for NT_GNU_BUILD_ID. Returns 0 found, -ENODATA none, -ENOBUFS. */
static int scan_notes(Elf_Data *data, uint8_t *out, size_t max, size_t *len)
{
	size_t off = 0, name_off, desc_off, next;
	GElf_Nhdr nh;

	if (!data || !data->d_buf)
		return -ENODATA;
	while (off < data->d_size && (next = gelf_getnote(data, off, &nh, &name_off, &desc_off)) > 0) {
		if (next <= off)
			break; /* no progress: corrupt */
		if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 && name_off + 4 <= data->d_size &&
		    memcmp((const char *)data->d_buf + name_off, "GNU", 4) == 0) {
			if (nh.n_descsz == 0 || nh.n_descsz > BUILD_ID_SANE_MAX ||
			    desc_off + nh.n_descsz > data->d_size)
				return -ENODATA;
			if (nh.n_descsz > max)
				return -ENOBUFS;
			memcpy(out, (const char *)data->d_buf + desc_off, nh.n_descsz);
			*len = nh.n_descsz;
			return 0;
		}
		off = next;
	}
	return -ENODATA;
}

int prs_elf_build_id_elf(Elf *elf, uint8_t *out, size_t max, size_t *len)
{
	Elf_Scn *scn = NULL;
	size_t nphdr, i;
	int rc, seen_sections = 0;

	if (!elf || elf_kind(elf) != ELF_K_ELF)
		return -ENOEXEC;
	while ((scn = elf_nextscn(elf, scn)) != NULL) {
		GElf_Shdr sh;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE)
			continue;
		seen_sections = 1;
		rc = scan_notes(elf_getdata(scn, NULL), out, max, len);
		if (rc != -ENODATA)
			return rc;
	}
	if (seen_sections)
		return -ENODATA;
	if (elf_getphdrnum(elf, &nphdr) != 0)
		return -ENOEXEC;
	for (i = 0; i < nphdr && i < 4096; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_NOTE || ph.p_filesz == 0)
			continue;
		rc = scan_notes(elf_getdata_rawchunk(elf, (int64_t)ph.p_offset, ph.p_filesz, ELF_T_NHDR),
				out, max, len);
		if (rc != -ENODATA)
			return rc;
	}
	return -ENODATA;
}

int prs_elf_build_id(const char *path, uint8_t *out, size_t max, size_t *len)
{
	Elf *elf;
	int fd, rc;

	if (!path || !out || !len)
		return -EINVAL;
	rc = prs_elf_init();
	if (rc)
		return rc;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	rc = elf ? prs_elf_build_id_elf(elf, out, max, len) : -ENOEXEC;
	elf_end(elf);
	close(fd);
	return rc;
}
