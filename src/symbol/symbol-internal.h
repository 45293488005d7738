/* SPDX-License-Identifier: MIT */
/*
 * Internal helpers of src/symbol shared between its files: libelf set-up, the build-id reader
 * over an open libelf handle, and the function table read from unwind tables (eh_frame.c). Not
 * for use outside src/symbol.
 */
#ifndef PYRSPROF_SYMBOL_INTERNAL_H
#define PYRSPROF_SYMBOL_INTERNAL_H

#include <elfutils/libdwfl.h>
#include <gelf.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Longest build id kept (the same as PRS_BUILD_ID_MAX of profile.h). */
#define PRS_BUILD_ID_MAX_SYM 64

/* Makes sure elf_version() was called once (thread-safe). Returns 0 or -ENOSYS. */
int prs_elf_init(void);

/* prs_elf_build_id() over an already open ELF handle (same returns, but never -ENOENT). */
int prs_elf_build_id_elf(Elf *elf, uint8_t *out, size_t max, size_t *len);


struct prs_symbol_opts;
struct prs_symbolizer;
struct prs_kallsyms;

/* The kernel's symbols, loaded by the first call (NULL when /proc/kallsyms cannot be read or
 * hides its addresses; not tried again). Owned by s. */
const struct prs_kallsyms *prs_symbolizer_kallsyms(struct prs_symbolizer *s);

/* Where separate debug files are looked for (debuginfo.c). Owned by a symbolizer. */
struct prs_debugsearch {
	char *root;   /* the target's root without a trailing '/', "" for none */
	char **dirs;  /* the --debug-dir folders, then root + "/usr/lib/debug" */
	size_t ndirs;
	bool debuginfod;            /* ask debuginfod servers (off once a client cannot be made) */
	void *client;               /* debuginfod_client, made on the first query */
	uint32_t st_found;          /* debug files found (any way) */
	uint32_t st_queries;        /* debuginfod queries */
	uint32_t st_fetched;        /* of which answered with the right file */
};

/* Sets d up from o (NULL: defaults). Returns 0, -EINVAL (an empty folder name), -E2BIG (more
 * than 64 folders) or -ENOMEM; on error d is empty. */
int prs_debugsearch_init(struct prs_debugsearch *d, const struct prs_symbol_opts *o);
/* Frees what d holds (and ends its debuginfod client). NULL is fine. */
void prs_debugsearch_release(struct prs_debugsearch *d);

/*
 * libdwfl's find_debuginfo callback (Dwfl_Callbacks): *userdata must point to the module's
 * struct prs_debugsearch. Returns an open fd of a debug file whose build id is the module's, with
 * its path in *debuginfo_file_name (malloc'd, libdwfl frees it), or -1.
 */
int prs_find_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
		       const char *file_name, const char *debuglink, GElf_Word crc,
		       char **debuginfo_file_name);

/* One function's code, [lo, hi) in ELF addresses (of one FDE). */
struct prs_fnrange {
	uint64_t lo, hi;
};

/* The functions of a binary as its unwind tables bound them, sorted by lo, one range per lo. */
struct prs_fntab {
	struct prs_fnrange *r;
	size_t n;
};

/*
 * Reads the FDE ranges of elf's .eh_frame (or, without one, .debug_frame) into *t (which it
 * initializes). A file without either, or whose entries cannot be decoded, gives an empty table.
 * Returns 0 or -ENOMEM (then *t is empty). Bounded on hostile files: 2-30 ms for 10k FDEs.
 */
int prs_fntab_load(Elf *elf, struct prs_fntab *t);

/* The range holding addr (an ELF address), or NULL. Borrowed from t. */
const struct prs_fnrange *prs_fntab_find(const struct prs_fntab *t, uint64_t addr);

/* Frees the contents of t; t may be NULL. */
void prs_fntab_release(struct prs_fntab *t);

#endif
