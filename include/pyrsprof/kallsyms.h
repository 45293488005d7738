/* SPDX-License-Identifier: MIT */
/*
 * The kernel's text symbols from /proc/kallsyms, to name the kernel frames of a sample
 * ("clear_page_erms"). Loaded once (about 120k symbols, ~10 MB read, 0.07-0.3 s), looked up by
 * binary search; the live table is read once per process while /proc/modules stays the same
 * (prs_kallsyms_load(NULL, ...) shares it). The file is the kernel's, but read as hostile input
 * all the same: lines are bounded, malformed ones skipped.
 *
 * Addresses are shown only to privileged readers (kernel.kptr_restrict, CAP_SYSLOG): when every
 * address reads as 0 the table is refused with -EPERM.
 */
#ifndef PYRSPROF_KALLSYMS_H
#define PYRSPROF_KALLSYMS_H

#include <stddef.h>
#include <stdint.h>

#include "pyrsprof/err.h"

struct prs_kallsyms;

/* The path of the profile mapping that holds kernel PCs as raw frames (the sampler records them
 * so: src/sample/kstack.c); the symbolizer names them from /proc/kallsyms, kind PRS_KIND_KERNEL. */
#define PRS_KERNEL_MAPPING_PATH "[kernel.kallsyms]"

/*
 * Reads the text symbols (types t, T, w, W) of path (NULL: /proc/kallsyms), modules' included.
 * Returns 0 and *out (free with prs_kallsyms_free), or -errno with err set: -EPERM when the
 * addresses are hidden, -ENOENT when there is no text symbol, -ENOMEM. With path NULL, the table
 * of an earlier load is shared while /proc/modules reads the same (not thread-safe).
 */
int prs_kallsyms_load(const char *path, struct prs_kallsyms **out, struct prs_err *err);
/*
 * As prs_kallsyms_load, but the read ends at the line that names symbol last (included; the
 * whole file when none does), and nothing is shared: for the first symbols of the kernel's text
 * (kstack.c: its interrupt entries end at __entry_text_end, the 92nd of 121k lines here) without
 * the whole read (0.07-0.3 s) before a program is started.
 */
int prs_kallsyms_load_until(const char *path, const char *last, struct prs_kallsyms **out,
			    struct prs_err *err);
/* The name of the symbol containing addr (the last one starting at or below it, not past the
 * last text symbol), or NULL. Borrowed until free. */
const char *prs_kallsyms_lookup(const struct prs_kallsyms *k, uint64_t addr);
/* An address range [start, end) of the kernel's text. */
struct prs_krange {
	uint64_t start, end;
};
/* The ranges of the symbols whose names start with prefix (each up to the next symbol), at most
 * max of them into out, in address order; returns how many. */
size_t prs_kallsyms_ranges(const struct prs_kallsyms *k, const char *prefix, struct prs_krange *out,
			   size_t max);
/* Symbols loaded. */
size_t prs_kallsyms_count(const struct prs_kallsyms *k);
/* Drops a holder (the table is freed with its last). NULL is fine. */
void prs_kallsyms_free(struct prs_kallsyms *k);

#endif
