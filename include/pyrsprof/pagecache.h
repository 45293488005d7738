/* SPDX-License-Identifier: MIT */
/*
 * A per-sample page cache in front of a memreader, for a sampler that reads much the same memory
 * at every tick through chains of dependent reads (the CPython walk: runtime, interpreter, thread
 * state, frames, code objects, strings: 14 pages for a 50-frame 3.12 stack, one syscall each if
 * read as they come). The cache notes which bytes of which pages a sample read (its working set)
 * and, when the next sample begins, loads exactly those 64-byte lines in one readv; the walk then
 * runs from memory and reads only what moved (whole pages on demand, or batches of pages with
 * prefetch). Every byte served was read during the current sample: the cache holds nothing from
 * one sample to the next but the list of what to load.
 *
 * Slots are found by linear probing from the page's hash; a slot holds bytes [lo, hi) of its page
 * (the whole page when read on demand, a part when loaded ahead). Not thread-safe; not for use in a
 * signal handler (the agent reads its own memory directly).
 */
#ifndef PYRSPROF_PAGECACHE_H
#define PYRSPROF_PAGECACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pyrsprof/memreader.h"

#define PRS_PAGECACHE_PAGE 4096u
#define PRS_PAGECACHE_SLOTS 128u /* 512 KiB; a sample of 1024 frames of <=3.10 touches fewer pages */
#define PRS_PAGECACHE_GUARDS 3u  /* words a begin can read both first and last (prs_pagecache_guard) */
#define PRS_PAGECACHE_GUARD_MAX 128u /* bytes of a guard range (prs_pagecache_guard_range) */

/* Bytes [lo, hi) of a page that a sample read. */
struct prs_pagecache_ws {
	uint64_t page;
	uint16_t lo, hi;
};

struct prs_pagecache {
	uint64_t tag[PRS_PAGECACHE_SLOTS];   /* page address | 1 when the slot is in use, 0 free */
	uint16_t lo[PRS_PAGECACHE_SLOTS], hi[PRS_PAGECACHE_SLOTS]; /* bytes of the page the slot holds */
	int8_t bad[PRS_PAGECACHE_SLOTS];     /* the page could not be read in this sample */
	uint8_t ws_idx[PRS_PAGECACHE_SLOTS]; /* 1 + index in ws of the slot's page, 0 = not noted yet */
	uint8_t (*data)[PRS_PAGECACHE_PAGE]; /* PRS_PAGECACHE_SLOTS pages, allocated once */
	struct prs_memreader mr;             /* the reader behind the cache */
	uint64_t *syscalls;                  /* counter bumped at each call of mr (may be NULL) */
	struct prs_pagecache_ws ws[PRS_PAGECACHE_SLOTS]; /* what this sample read so far (may hold duplicates) */
	unsigned nws;
	bool noting;                         /* between begin and end: reads are added to ws */
	/* A sample in two parts (prs_pagecache_split): ws[0..split) is its first part, which the next
	 * begin loads; the rest of the working set, saved by that begin in rest[0..nrest), is loaded
	 * at the first read after the next split (rest_due). */
	unsigned split;
	bool split_on;
	struct prs_pagecache_ws rest[PRS_PAGECACHE_SLOTS];
	unsigned nrest;
	bool rest_due;
	/* the guards of the next begin (words, or a range), and what the last begin read of them */
	uint64_t guard_addr[PRS_PAGECACHE_GUARDS];
	uint32_t guard_len[PRS_PAGECACHE_GUARDS];
	uint64_t guard_first[PRS_PAGECACHE_GUARDS][PRS_PAGECACHE_GUARD_MAX / 8];
	uint64_t guard_last[PRS_PAGECACHE_GUARDS][PRS_PAGECACHE_GUARD_MAX / 8];
	unsigned nguard;                     /* asked for the next begin */
	unsigned nguard_read;                /* read both times by the last begin (0: none) */
};

/*
 * Sets up pc over mr (copied) and allocates its pages. syscalls: a counter the cache bumps at
 * each call it makes to mr (NULL: none). Returns 0 or -ENOMEM. Release with prs_pagecache_release.
 */
int prs_pagecache_init(struct prs_pagecache *pc, const struct prs_memreader *mr, uint64_t *syscalls);
/* Frees the pages. pc may be zeroed or already released. */
void prs_pagecache_release(struct prs_pagecache *pc);

/* Starts a sample: empties the cache, then loads the previous sample's working set in one readv. */
void prs_pagecache_begin(struct prs_pagecache *pc);
/*
 * Asks the next begin to read the n (<= PRS_PAGECACHE_GUARDS) 8-byte words at addrs both before
 * and after the working set, in the same readv (the kernel copies its remote ranges in order).
 * For a target that runs while it is read: when a word that every change of what was read must
 * change (the top frame of a running thread) read the same both times, the bytes between are of
 * one state of it, and no read after the walk is needed to check. Cleared by each begin.
 */
void prs_pagecache_guard(struct prs_pagecache *pc, const uint64_t *addrs, unsigned n);
/* After prs_pagecache_guard: adds a range of len (<= PRS_PAGECACHE_GUARD_MAX) bytes at addr to the
 * guards (not when they are full or len is 0), read before and after as the words are (cut to the
 * end of the working set's range that holds its first word, if one does); its index k (for
 * prs_pagecache_guard_moved), or -1. */
int prs_pagecache_guard_range(struct prs_pagecache *pc, uint64_t addr, unsigned len);
/* After a begin that had guards: whether each of the first n guards (words, or ranges of 8 bytes
 * or more) read the same bytes before and after the working set, its first word into vals[i].
 * False when a read failed or fewer were asked. */
bool prs_pagecache_guard_steady(const struct prs_pagecache *pc, uint64_t *vals, unsigned n);
/* After a begin that had guards: whether guard k was read both times and changed between. */
bool prs_pagecache_guard_moved(const struct prs_pagecache *pc, unsigned k);
/*
 * Splits the sample begun: what it reads from now on is its second part. The next begin loads
 * only the first part's lines (read before the split, and the lines of pages both parts read);
 * the second part's are loaded in one readv of their own at the first read after the next
 * sample's split. For a sampler that stops the target only for the first part: the target waits
 * for the first part's readv alone. A sample not split loads all of what the last one read at
 * its begin, as before; the second part of one split sample not followed by a split is dropped
 * (read again as it comes).
 */
void prs_pagecache_split(struct prs_pagecache *pc);
/* Ends it: later reads (outside samples) are not part of the next sample's working set. */
void prs_pagecache_end(struct prs_pagecache *pc);
/* Reads the working set in one readv into the slots' buffers and keeps nothing: pays for the
 * kernel's and the target's cold caches before a sample that must be quick. */
void prs_pagecache_warm(struct prs_pagecache *pc);
/* Empties the cache (data read after this are fresh); the working set is kept. */
void prs_pagecache_reset(struct prs_pagecache *pc);
/* Reads len bytes at addr through the cache; 0, -EFAULT, -ESRCH. */
int prs_pagecache_read(struct prs_pagecache *pc, uint64_t addr, void *buf, size_t len);
/* Loads, in one readv, the pages holding [addrs[i], addrs[i]+len) that are not cached yet (at most
 * 64 pages; the rest are left to plain reads). */
void prs_pagecache_prefetch(struct prs_pagecache *pc, const uint64_t *addrs, size_t n, size_t len);

/* A memreader whose reads go through pc (ctx = pc): for code that only knows the interface. */
void prs_pagecache_reader(struct prs_pagecache *pc, struct prs_memreader *out);

#endif
