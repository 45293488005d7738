/* SPDX-License-Identifier: MIT */
/*
 * Internal helpers of src/symbol shared between its files: libelf set-up and the build-id reader
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

#endif
