/* SPDX-License-Identifier: MIT */
/*
 * Symbolization: turns raw native frames (an absolute PC in the target plus the file mapping it
 * fell in) into named frames with their inline chains, file and line, using DWARF (libdw), the
 * ELF symbol tables (.symtab, MiniDebugInfo's .gnu_debugdata, .dynsym: libdwfl), and where no
 * symbol covers a PC, the function ranges of the unwind tables (.eh_frame), which stripped
 * binaries keep: such a frame is named "FILE!fn+0xOFF" after its function's start, so all of a
 * function's addresses are one frame. Demangles Rust (legacy and v0) and C++ names with
 * libiberty. Separate debug files are found by build id under /usr/lib/debug and the folders the
 * caller adds, by .gnu_debuglink, and through debuginfod when the caller allows it. It runs after
 * the recording (or when `pyrsprof report` re-reads a profile), never on the sampling path.
 * Results are cached per (file, build id, file offset), and every ELF file is opened once per
 * symbolizer.
 *
 * Files are hostile input: every length read from them is bounded, DWARF walks are bounded in
 * depth and count, and a file whose build id differs from the one recorded for the mapping (it
 * was rebuilt since) is not used.
 *
 * Nothing here is thread-safe: use one symbolizer per thread. Nothing is async-signal-safe.
 */
#ifndef PYRSPROF_SYMBOL_H
#define PYRSPROF_SYMBOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pyrsprof/err.h"
#include "pyrsprof/types.h"

struct prs_profile;

/* Longest inline chain prs_symbolize reports for one PC (outer frames beyond it are dropped). */
#define PRS_SYM_MAX_INLINE 32

/*
 * Reads the NT_GNU_BUILD_ID note of the ELF file at path into out (capacity max) and its length
 * into *len. Looks in SHT_NOTE sections, then in PT_NOTE segments (for files without section
 * headers). Returns 0, -ENOENT (or another errno) when the file cannot be opened, -ENOEXEC when it
 * is not a readable ELF file (truncated, random bytes), -ENODATA when it has no build id, -ENOBUFS
 * when the id is longer than max. Safe on hostile files. Thread-safe.
 */
int prs_elf_build_id(const char *path, uint8_t *out, size_t max, size_t *len);

/*
 * Demangles a C++ (Itanium "_Z...") or Rust (legacy "_ZN...17h<hash>E", v0 "_R...") symbol with
 * libiberty (DMGL_PARAMS | DMGL_ANSI; Rust legacy names lose their "::h<16 hex>" hash, v0 names
 * their crate disambiguators). Returns a new string (caller frees with free()) and sets *kind
 * (may be NULL) to PRS_KIND_RUST or PRS_KIND_CPP; returns NULL when the name is not mangled (or is
 * longer than 64 KiB, or libiberty fails), leaving *kind unchanged. Thread-safe.
 */
char *prs_demangle(const char *mangled, enum prs_kind *kind);

/* A file mapping of the target, as /proc/PID/maps showed it (see struct prs_mapping). */
struct prs_symmap {
	const char *path;         /* as in the maps file; " (deleted)" suffix is tolerated */
	const uint8_t *build_id;  /* recorded build id, or NULL when unknown (then not checked) */
	size_t build_id_len;
	uint64_t start, end;      /* target addresses of the mapping */
	uint64_t offset;          /* file offset of start */
};

/* One entry of an inline chain. Strings are borrowed from the symbolizer. */
struct prs_symframe {
	const char *name;  /* demangled function name, never NULL when returned */
	const char *file;  /* source file as DWARF names it, or NULL */
	uint32_t line;     /* 0 = unknown */
	enum prs_kind kind; /* PRS_KIND_RUST, PRS_KIND_CPP or PRS_KIND_NATIVE */
	bool fn_range;      /* no symbol: named "FILE!fn+0xOFF" after its unwind-table function */
};

/* Counters, cumulative over the life of a symbolizer (and per call of prs_symbolize_profile). */
struct prs_symbolize_stats {
	uint64_t frames;        /* raw frames asked for */
	uint64_t symbolized;    /* of which got a name */
	uint64_t with_line;     /* of which got a file:line */
	uint64_t inlined;       /* inlined frames reported (chain entries beyond the first) */
	uint64_t by_range;      /* of the symbolized, named by their function's range only */
	uint32_t files;         /* distinct files opened (or tried) */
	uint32_t files_missing; /* files that could not be opened or are not ELF */
	uint32_t build_id_mismatches; /* files whose build id differs from the recorded one */
	uint32_t debug_files;   /* separate debug files found */
	uint32_t debuginfod_queries, debuginfod_fetched; /* asked of debuginfod, and answered */
	uint64_t time_ns;       /* wall time spent symbolizing */
};

struct prs_symbolizer;

/* Returns a new symbolizer, or NULL when out of memory. Free with prs_symbolizer_free(). */
struct prs_symbolizer *prs_symbolizer_new(void);
/* Frees s, every file it opened and every string it returned. NULL is fine. */
void prs_symbolizer_free(struct prs_symbolizer *s);

/* Where a symbolizer finds files and their debug info. Strings are copied. */
struct prs_symbol_opts {
	/*
	 * Prefixed to every mapping path before opening it, e.g. "/proc/1234/root" for a target in
	 * another mount namespace (container); its /usr/lib/debug is searched too. NULL, "" or "/":
	 * none.
	 */
	const char *root;
	/*
	 * Folders of debug files, searched before root's /usr/lib/debug, each like /usr/lib/debug:
	 * DIR/.build-id/xx/yyyy.debug by build id, DIR/<the file's folder>/NAME and DIR/NAME by
	 * .gnu_debuglink NAME. Up to 64.
	 */
	const char *const *debug_dirs;
	size_t ndebug_dirs;
	/*
	 * Ask debuginfod servers for debug files found nowhere else. libdebuginfod takes the servers
	 * (DEBUGINFOD_URLS), its cache and timeouts from the environment; the caller decides whether
	 * to ask at all.
	 */
	bool debuginfod;
	/* prs_symbolize_profile only: name again the frames an earlier pass named (debug files were
	 * added since); otherwise they are skipped. */
	bool rename;
};

/*
 * Sets where s looks for files (NULL: the defaults: no root, /usr/lib/debug, no debuginfod).
 * Call before the first prs_symbolize(): returns 0, -EBUSY once files are open, -EINVAL (an
 * empty folder name), -E2BIG (too many folders) or -ENOMEM.
 */
int prs_symbolizer_set_opts(struct prs_symbolizer *s, const struct prs_symbol_opts *opts);

/*
 * Symbolizes the absolute target address pc that lies in mapping map. activation is true for the
 * interrupted instruction, false for a return address (then pc - 1 is looked up, so a call at the
 * end of a function is attributed to it). Fills out[0..n) with the inline chain OUTERMOST first:
 * for a PC in `mix` inlined into `leaf`, out[0] = {leaf, file, line of the call to mix} and
 * out[1] = {mix, file, line from the line table}. When the chain is longer than max, the innermost
 * max entries are kept.
 *
 * A "[vdso]" mapping is symbolized with this process's own vDSO image (the same kernel's); other
 * pseudo-mappings ("[heap]", anonymous "") and relative paths are not looked up.
 *
 * A PC that no symbol covers but an unwind-table function range does gets one entry named
 * "BASENAME!fn+0xOFF" (OFF: the file offset of the function's start; fn_range set).
 *
 * Returns the count n >= 1; 0 when nothing is known (no such file, a build-id mismatch, no symbol
 * or function range covers the address, a pseudo-mapping): the caller shows "lib+0xoff". Returns
 * -EINVAL for bad arguments and -ENOMEM. Strings in out are borrowed, valid until
 * prs_symbolizer_free(). The first call for a file opens it (0.3-30 ms for big libraries); later
 * calls for an address already seen are a hash lookup.
 */
int prs_symbolize(struct prs_symbolizer *s, const struct prs_symmap *map, uint64_t pc,
		  bool activation, struct prs_symframe *out, int max);

/* Copies the cumulative counters of s into *stats. */
void prs_symbolizer_stats(const struct prs_symbolizer *s, struct prs_symbolize_stats *stats);

/*
 * Symbolizes every raw frame of p that has a mapping: its expansion (prs_profile_expand) becomes
 * the inline chain as named frames (outermost first) of the kinds above. Frames nothing is known
 * about are left unexpanded, so prs_profile_frame_label() renders them "basename+0xOFF".
 * Frames that already have an expansion are skipped unless opts->rename; a new expansion replaces
 * the old one. opts is as for prs_symbolizer_set_opts()
 * (NULL for the defaults). stats (may be NULL) receives the counters of this call. Returns 0, or
 * a negative errno (-ENOMEM, or a bad option) with err set; missing files and build-id mismatches
 * are not errors, only counted.
 */
int prs_symbolize_profile(struct prs_profile *p, const struct prs_symbol_opts *opts,
			  struct prs_symbolize_stats *stats, struct prs_err *err);

/*
 * As prs_symbolize_profile, with a symbolizer the caller keeps across calls (set up with
 * prs_symbolizer_set_opts; rename as opts->rename): its files stay open and the addresses it
 * has seen are a hash lookup, so a profile that grows while recording (`top`, snapshots) is named
 * at the cost of its new addresses only. stats (may be NULL): the symbolizer's cumulative
 * counters, time_ns that of this call.
 */
int prs_symbolize_profile_with(struct prs_symbolizer *s, struct prs_profile *p, bool rename,
			       struct prs_symbolize_stats *stats, struct prs_err *err);

#endif
