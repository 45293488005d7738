/* SPDX-License-Identifier: MIT */
/*
 * /proc/PID/maps: parse a process's memory mappings into a sorted array and find the mapping that
 * holds an address. The text is hostile input (a target can map files with any name): lines are
 * bounded, garbage lines are skipped and counted, overlapping entries are dropped so that the
 * array stays sorted and disjoint, and paths keep the kernel's escaping (e.g. "\012" for '\n').
 *
 * Format, one line per mapping (man 5 proc):
 *   55d0c8a00000-55d0c8a21000 r-xp 00002000 fe:01 1234567    /usr/bin/python3.11 (deleted)
 */
#ifndef PYRSPROF_MAPS_H
#define PYRSPROF_MAPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "pyrsprof/err.h"

/* prs_map.perms bits */
enum {
	PRS_MAP_R = 1u << 0,
	PRS_MAP_W = 1u << 1,
	PRS_MAP_X = 1u << 2,
	PRS_MAP_P = 1u << 3, /* private (copy on write); not set means shared */
};

#define PRS_MAPS_MAX_LINE 8192       /* longer lines are skipped (PATH_MAX is 4096) */
#define PRS_MAPS_MAX_ENTRIES 1048576 /* more mappings than this fail with -E2BIG */
#define PRS_MAPS_MAX_BYTES (256u << 20) /* a maps file larger than this fails with -E2BIG */

struct prs_map {
	uint64_t start, end; /* [start, end), start < end */
	uint64_t offset;     /* file offset of start */
	unsigned perms;      /* PRS_MAP_* */
	uint64_t inode;      /* 0 for anonymous mappings */
	uint32_t dev_major, dev_minor;
	bool deleted;        /* the path ended with " (deleted)" (the suffix is removed from path) */
	char *path;          /* never NULL: "" for anonymous, "[vdso]", "[stack]", "/usr/lib/..." */
};

/* Owned by the caller: initialise with PRS_MAPS_INIT or zero, free the contents with prs_maps_release. */
struct prs_maps {
	struct prs_map *v; /* sorted by start, disjoint */
	size_t n;
	size_t skipped;    /* lines that could not be parsed, or overlapped a previous entry */
	char *pool;        /* owns every v[i].path */
	size_t pool_len;
};
#define PRS_MAPS_INIT { 0 }

/*
 * Parses len bytes of maps text into *out (previous contents are released first). Unparseable
 * lines are skipped and counted in out->skipped; a last line without '\n' is accepted. Returns 0,
 * -ENOMEM, or -E2BIG (more than PRS_MAPS_MAX_ENTRIES lines or PRS_MAPS_MAX_BYTES). On error *out
 * is empty. Thread-safe (no shared state).
 */
int prs_maps_parse(const char *text, size_t len, struct prs_maps *out, struct prs_err *err);

/*
 * Reads and parses /proc/PID/maps. Returns 0, -ESRCH/-ENOENT (no such process), -EACCES, -ENOMEM,
 * -E2BIG, or another -errno from open/read.
 */
int prs_maps_read(pid_t pid, struct prs_maps *out, struct prs_err *err);

/*
 * Reads the raw text of /proc/PID/maps into *buf (grown with realloc; caller frees) and sets *len.
 * Used by the unwinder to detect changes cheaply. Same errors as prs_maps_read.
 */
int prs_maps_read_text(pid_t pid, char **buf, size_t *cap, size_t *len, struct prs_err *err);

/* Frees the contents of maps and leaves it empty. maps may be NULL. */
void prs_maps_release(struct prs_maps *maps);

/*
 * Returns the mapping that contains addr, or NULL. Binary search, O(log n), no allocation, no
 * syscall; the result is borrowed from maps. Async-signal-safe.
 */
const struct prs_map *prs_maps_find(const struct prs_maps *maps, uint64_t addr);

#endif
