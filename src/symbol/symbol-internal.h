/* SPDX-License-Identifier: MIT */
/*
 * Internal helpers of src/symbol shared between its files: ELF note and program-header readers
 * over an open libelf handle. Not for use outside src/symbol.
 */
#ifndef PYRSPROF_SYMBOL_INTERNAL_H
#define PYRSPROF_SYMBOL_INTERNAL_H

#include <gelf.h>
#include <stddef.h>
#include <stdint.h>

/* Longest build id kept (the same as PRS_BUILD_ID_MAX of profile.h). */
#define PRS_BUILD_ID_MAX_SYM 64

/* Makes sure elf_version() was called once (thread-safe). Returns 0 or -ENOSYS. */
int prs_elf_init(void);

/* prs_elf_build_id() over an already open ELF handle (same returns, but never -ENOENT). */
int prs_elf_build_id_elf(Elf *elf, uint8_t *out, size_t max, size_t *len);

/*
 * Maps a file offset to the ELF virtual address through the PT_LOAD segment containing it
 * (preferring an executable one when segments share a page). Returns 0 and *vaddr, or -ENOENT
 * when no PT_LOAD covers off, -ENOEXEC when the program headers cannot be read.
 */
int prs_elf_offset_to_vaddr(Elf *elf, uint64_t off, uint64_t *vaddr);

#endif
