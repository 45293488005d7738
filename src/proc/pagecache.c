/* SPDX-License-Identifier: MIT */
/*
 * The per-sample page cache over a memreader (pyrsprof/pagecache.h). It lives in src/proc with the
 * memreader because it knows nothing of what it caches: pages, the bytes a sample read of them,
 * and one readv to load them again at the next sample. The CPython reader is its first user; the
 * walker itself only sees a memreader (prs_pagecache_reader), so the same walk runs without the
 * cache where none is needed (a memory image, or the agent reading its own process).
 * Measured on a 50-frame 3.12 stack, back to back: 10 syscalls and 57 KiB -> 1 syscall and
 * 7.7 KiB per sample, 19 -> 8 us.
 */
#include "pyrsprof/pagecache.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/banned.h"

#define PROBE 8u /* slots looked at from a page's home slot (linear probing) */

int prs_pagecache_init(struct prs_pagecache *pc, const struct prs_memreader *mr, uint64_t *syscalls)
{
	memset(pc, 0, sizeof(*pc));
	pc->mr = *mr;
	pc->syscalls = syscalls;
	pc->data = malloc(PRS_PAGECACHE_SLOTS * (size_t)PRS_PAGECACHE_PAGE);
	return pc->data ? 0 : -ENOMEM;
}

void prs_pagecache_release(struct prs_pagecache *pc)
{
	free(pc->data);
	pc->data = NULL;
}


static unsigned slot_of(uint64_t page)
{
	uint64_t h = (page >> 12) * 0x9e3779b97f4a7c15ull;

	return (unsigned)(h >> 57) % PRS_PAGECACHE_SLOTS; /* 7 bits */
}

/* The slot holding page, or -1. Slots are only emptied all at once, so a free slot ends a probe. */
static int find_slot(const struct prs_pagecache *pc, uint64_t page)
{
	unsigned s = slot_of(page), k;

	for (k = 0; k < PROBE; k++, s = (s + 1) % PRS_PAGECACHE_SLOTS) {
		if (pc->tag[s] == (page | 1))
			return (int)s;
		if (!pc->tag[s])
			return -1;
	}
	return -1;
}

/* A slot for page (not cached): the first free one in its probe window, else -1. The slot is
 * marked in use, holding no bytes yet. */
static int claim_free(struct prs_pagecache *pc, uint64_t page)
{
	unsigned s = slot_of(page), k;

	for (k = 0; k < PROBE; k++, s = (s + 1) % PRS_PAGECACHE_SLOTS)
		if (!pc->tag[s]) {
			pc->tag[s] = page | 1;
			pc->lo[s] = pc->hi[s] = 0;
			pc->bad[s] = 0;
			pc->ws_idx[s] = 0;
			return (int)s;
		}
	return -1;
}

void prs_pagecache_reset(struct prs_pagecache *pc)
{
	memset(pc->tag, 0, sizeof(pc->tag));
	memset(pc->ws_idx, 0, sizeof(pc->ws_idx));
}

/* Notes that the sample read bytes [a, b) of the page in slot s. */
static void ws_note(struct prs_pagecache *pc, unsigned s, uint64_t page, unsigned a, unsigned b)
{
	unsigned i = pc->ws_idx[s];

	if (!pc->noting)
		return;
	if (i && pc->ws[i - 1].page == page) {
		struct prs_pagecache_ws *w = &pc->ws[i - 1];

		if (a < w->lo)
			w->lo = (uint16_t)a;
		if (b > w->hi)
			w->hi = (uint16_t)b;
	} else if (pc->nws < PRS_PAGECACHE_SLOTS) {
		pc->ws[pc->nws] = (struct prs_pagecache_ws){ page, (uint16_t)a, (uint16_t)b };
		pc->ws_idx[s] = (uint8_t)++pc->nws;
	}
}

void prs_pagecache_guard(struct prs_pagecache *pc, const uint64_t *addrs, unsigned n)
{
	pc->nguard = n < PRS_PAGECACHE_GUARDS ? n : PRS_PAGECACHE_GUARDS;
	for (unsigned k = 0; k < pc->nguard; k++) {
		pc->guard_addr[k] = addrs[k];
		pc->guard_len[k] = 8;
	}
}

int prs_pagecache_guard_range(struct prs_pagecache *pc, uint64_t addr, unsigned len)
{
	unsigned k = pc->nguard;

	if (k >= PRS_PAGECACHE_GUARDS || !len || len > PRS_PAGECACHE_GUARD_MAX)
		return -1;
	pc->guard_addr[k] = addr;
	pc->guard_len[k] = len;
	pc->nguard++;
	return (int)k;
}

bool prs_pagecache_guard_steady(const struct prs_pagecache *pc, uint64_t *vals, unsigned n)
{
	if (!n || n > pc->nguard_read)
		return false;
	for (unsigned k = 0; k < n; k++) {
		if (pc->guard_len[k] < 8 || memcmp(pc->guard_first[k], pc->guard_last[k], pc->guard_len[k]) != 0)
			return false;
		vals[k] = pc->guard_last[k][0];
	}
	return true;
}

bool prs_pagecache_guard_moved(const struct prs_pagecache *pc, unsigned k)
{
	return k < pc->nguard_read && memcmp(pc->guard_first[k], pc->guard_last[k], pc->guard_len[k]) != 0;
}

/* The working set's nv vecs (v, and each one's slot and bytes [lo, hi) of its page), in order. */
struct ws_vecs {
	struct prs_memvec v[PRS_PAGECACHE_SLOTS + 2 * PRS_PAGECACHE_GUARDS];
	unsigned slot[PRS_PAGECACHE_SLOTS + 2 * PRS_PAGECACHE_GUARDS];
	unsigned lo[PRS_PAGECACHE_SLOTS + 2 * PRS_PAGECACHE_GUARDS], hi[PRS_PAGECACHE_SLOTS + 2 * PRS_PAGECACHE_GUARDS];
	size_t nv;
};

/* The vec of w that holds all of guard k, or -1. A range (more than a word) is cut to the end of
 * the vec that holds its first word: what the sample reads anyway is what it compares. */
static int covering(struct prs_pagecache *pc, unsigned k, const struct ws_vecs *w)
{
	uint64_t a = pc->guard_addr[k], b = a + pc->guard_len[k];

	for (size_t i = 0; i < w->nv; i++) {
		uint64_t end = w->v[i].addr + w->v[i].len;

		if (w->v[i].addr > a || end < a + 8 || b <= a)
			continue;
		if (b <= end)
			return (int)i;
		if (pc->guard_len[k] > 8) {
			pc->guard_len[k] = (uint32_t)(end - a);
			return (int)i;
		}
	}
	return -1;
}

/* Appends vec i of from to to (to's slot -1u: a guard's own read). */
static void put(struct ws_vecs *to, const struct ws_vecs *from, size_t i)
{
	to->v[to->nv] = from->v[i];
	to->slot[to->nv] = from->slot[i];
	to->lo[to->nv] = from->lo[i];
	to->hi[to->nv] = from->hi[i];
	to->nv++;
}

static void put_guard(struct ws_vecs *to, uint64_t addr, void *buf, unsigned len)
{
	to->v[to->nv] = (struct prs_memvec){ addr, buf, len, 0 };
	to->slot[to->nv] = -1u;
	to->lo[to->nv] = to->hi[to->nv] = 0;
	to->nv++;
}

/*
 * Orders the working set w with the g guards around it into out: each guard's first read is the
 * working set's own read of it when a vec holds all of it (the runs of contiguous vecs holding
 * one go first, so it is read before the rest: a vec less per guard in the readv, ~0.5 us each),
 * else a vec of its own at the start; its last read is a vec of its own at the end. first[k]:
 * the index in out of guard k's first read.
 */
static void place_guards(struct prs_pagecache *pc, unsigned g, const struct ws_vecs *w,
			 struct ws_vecs *out, int *first)
{
	bool front[PRS_PAGECACHE_SLOTS] = { false };
	int cov[PRS_PAGECACHE_GUARDS], at[PRS_PAGECACHE_SLOTS];
	size_t i, j;
	unsigned k;

	out->nv = 0;
	for (k = 0; k < g; k++) {
		cov[k] = covering(pc, k, w);
		if (cov[k] < 0) {
			first[k] = (int)out->nv;
			put_guard(out, pc->guard_addr[k], (void *)pc->guard_first[k], pc->guard_len[k]);
			continue;
		}
		/* its run: the vecs the reader merges into one remote range with it */
		for (i = (size_t)cov[k]; i > 0 && w->v[i - 1].addr + w->v[i - 1].len == w->v[i].addr; i--)
			;
		for (j = i; j < w->nv && (j == i || w->v[j - 1].addr + w->v[j - 1].len == w->v[j].addr); j++)
			front[j] = true;
	}
	for (i = 0; i < w->nv; i++)
		if (front[i]) {
			at[i] = (int)out->nv;
			put(out, w, i);
		}
	for (i = 0; i < w->nv; i++)
		if (!front[i])
			put(out, w, i);
	for (k = 0; k < g; k++) {
		if (cov[k] >= 0)
			first[k] = at[cov[k]];
		put_guard(out, pc->guard_addr[k], (void *)pc->guard_last[k], pc->guard_len[k]);
	}
}

/* g when each of the g guards was read both times (out and first as place_guards left them; a
 * first read that was the working set's is copied to guard_first), else 0. */
static unsigned guards_read(struct prs_pagecache *pc, unsigned g, const struct ws_vecs *out, const int *first)
{
	for (unsigned k = 0; k < g; k++) {
		const struct prs_memvec *f = &out->v[first[k]];

		if (f->res || out->v[out->nv - g + k].res)
			return 0;
		if (out->slot[first[k]] != -1u)
			memcpy(pc->guard_first[k], (const uint8_t *)f->buf + (pc->guard_addr[k] - f->addr),
			       pc->guard_len[k]);
	}
	return g;
}

/*
 * The last sample's working set as vecs into w: sorted by page (insertion sort: a few dozen
 * entries), the ranges of a page merged, whole 64-byte lines. Into
 * slots claimed for the pages (claim), or into their home slots' bytes (a read that keeps
 * nothing).
 */
/*
 * The vecs that load the lines of ws[0..n) (sorted here by page), into claimed slots (claim: none
 * of these pages is cached; with skip_cached, a page that is is left out) or the pages' home
 * slots (a warm-up, whose bytes are not kept).
 */
static void ws_vecs_of(struct prs_pagecache *pc, struct prs_pagecache_ws *ws, unsigned n,
		       struct ws_vecs *w, bool claim, bool skip_cached)
{
	size_t i, j;

	w->nv = 0;
	for (i = 1; i < n; i++) {
		struct prs_pagecache_ws e = ws[i];

		for (j = i; j > 0 && ws[j - 1].page > e.page; j--)
			ws[j] = ws[j - 1];
		ws[j] = e;
	}
	for (i = 0; i < n; i = j) {
		unsigned a = ws[i].lo, b = ws[i].hi;
		int s;

		for (j = i + 1; j < n && ws[j].page == ws[i].page; j++) {
			if (ws[j].lo < a)
				a = ws[j].lo;
			if (ws[j].hi > b)
				b = ws[j].hi;
		}
		/* whole 64-byte lines, no more: cold, every byte costs (measured at 100 Hz: 24-28 us
		 * per 50-frame sample with exact lines, 30-45 with 256 bytes of slack each side,
		 * 35-49 with whole pages) */
		a &= ~63u;
		b = (b + 63) & ~63u;
		if (a >= b || (skip_cached && find_slot(pc, ws[i].page) >= 0))
			continue;
		s = claim ? claim_free(pc, ws[i].page) : (int)slot_of(ws[i].page);
		if (s < 0)
			continue;
		w->v[w->nv] = (struct prs_memvec){ ws[i].page + a, pc->data[s] + a, b - a, 0 };
		w->slot[w->nv] = (unsigned)s;
		w->lo[w->nv] = a;
		w->hi[w->nv] = b;
		w->nv++;
	}
}

/* The lines of the first part of the working set (all of it when the sample was not split). */
static void working_set(struct prs_pagecache *pc, struct ws_vecs *w, bool claim)
{
	ws_vecs_of(pc, pc->ws, pc->split_on ? pc->split : pc->nws, w, claim, false);
}

/* Marks loaded the slots of the vecs of w that were read. */
static void loaded(struct prs_pagecache *pc, const struct ws_vecs *w)
{
	for (size_t i = 0; i < w->nv; i++)
		if (w->slot[i] != -1u && w->v[i].res == 0) {
			pc->lo[w->slot[i]] = (uint16_t)w->lo[i];
			pc->hi[w->slot[i]] = (uint16_t)w->hi[i];
		}
}

/* At a begin: keeps the last sample's second part for the next split, and leaves its first
 * part in ws. */
static void save_rest(struct prs_pagecache *pc)
{
	unsigned n = pc->split_on && pc->split < pc->nws ? pc->split : pc->nws;

	pc->nrest = pc->nws - n;
	memcpy(pc->rest, pc->ws + n, pc->nrest * sizeof(pc->rest[0]));
	pc->nws = n;
	pc->split_on = pc->rest_due = false;
}

void prs_pagecache_split(struct prs_pagecache *pc)
{
	if (!pc->noting)
		return;
	pc->split = pc->nws;
	pc->split_on = true;
	pc->rest_due = pc->nrest > 0;
}

/* The first read after a split: the second part's lines in one readv (pages the first part
 * loaded already are left to it). */
static void load_rest(struct prs_pagecache *pc)
{
	struct ws_vecs w;

	pc->rest_due = false;
	ws_vecs_of(pc, pc->rest, pc->nrest, &w, true, true);
	pc->nrest = 0;
	if (!w.nv)
		return;
	if (pc->syscalls)
		(*pc->syscalls)++;
	if (pc->mr.readv(pc->mr.ctx, w.v, w.nv) >= 0)
		loaded(pc, &w);
}

void prs_pagecache_begin(struct prs_pagecache *pc)
{
	struct ws_vecs w, o, *rv = &w;
	int first[PRS_PAGECACHE_GUARDS];
	unsigned g = pc->nguard;

	prs_pagecache_reset(pc);
	save_rest(pc);
	pc->noting = true;
	pc->nguard = pc->nguard_read = 0;
	if (!pc->data || !pc->mr.readv || !pc->nws) {
		pc->nws = 0;
		return;
	}
	working_set(pc, &w, true);
	pc->nws = 0;
	if (!w.nv)
		return;
	if (g) {
		place_guards(pc, g, &w, &o, first);
		rv = &o;
	}
	if (pc->syscalls)
		(*pc->syscalls)++;
	if (pc->mr.readv(pc->mr.ctx, rv->v, rv->nv) < 0)
		return; /* the slots hold no bytes: reads load their pages again (and see -ESRCH) */
	pc->nguard_read = g ? guards_read(pc, g, rv, first) : 0;
	loaded(pc, rv);
	/* a failed vec leaves its slot empty of bytes: a read loads the page again, and only that
	 * read marks it bad (a guess from the last sample must not hide a page) */
}

void prs_pagecache_warm(struct prs_pagecache *pc)
{
	struct ws_vecs w;

	if (!pc->data || !pc->mr.readv || pc->noting)
		return;
	/* into the bytes of the pages' home slots: begin empties the cache anyway */
	working_set(pc, &w, false);
	if (!w.nv)
		return;
	if (pc->syscalls)
		(*pc->syscalls)++;
	(void)pc->mr.readv(pc->mr.ctx, w.v, w.nv);
	prs_pagecache_reset(pc); /* what the slots held is gone */
}

void prs_pagecache_end(struct prs_pagecache *pc)
{
	pc->noting = false;
}

int prs_pagecache_read(struct prs_pagecache *pc, uint64_t addr, void *buf, size_t len)
{
	uint8_t *dst = buf;

	if (addr == 0 || addr + len < addr)
		return -EFAULT;
	if (pc->rest_due)
		load_rest(pc);
	if (!pc->data) { /* no cache: read directly */
		if (pc->syscalls)
			(*pc->syscalls)++;
		return pc->mr.read(pc->mr.ctx, addr, buf, len);
	}
	while (len) {
		uint64_t page = addr & ~(uint64_t)(PRS_PAGECACHE_PAGE - 1);
		size_t off = addr - page, chunk = PRS_PAGECACHE_PAGE - off;
		int s, rc;

		if (chunk > len)
			chunk = len;
		s = find_slot(pc, page);
		if (s >= 0 && pc->bad[s])
			return -EFAULT;
		if (s < 0 || off < pc->lo[s] || off + chunk > pc->hi[s]) {
			if (s < 0 && (s = claim_free(pc, page)) < 0) {
				s = (int)slot_of(page); /* probe window full: take the home slot */
				pc->tag[s] = page | 1;
				pc->ws_idx[s] = 0;
			}
			pc->lo[s] = pc->hi[s] = 0;
			pc->bad[s] = 0;
			if (pc->syscalls)
				(*pc->syscalls)++;
			rc = pc->mr.read(pc->mr.ctx, page, pc->data[s], PRS_PAGECACHE_PAGE);
			if (rc == -ESRCH)
				return rc;
			if (rc) {
				pc->bad[s] = 1;
				return -EFAULT;
			}
			pc->hi[s] = PRS_PAGECACHE_PAGE;
		}
		ws_note(pc, (unsigned)s, page, (unsigned)off, (unsigned)(off + chunk));
		memcpy(dst, pc->data[s] + off, chunk);
		dst += chunk;
		addr += chunk;
		len -= chunk;
	}
	return 0;
}

void prs_pagecache_prefetch(struct prs_pagecache *pc, const uint64_t *addrs, size_t n, size_t len)
{
	struct prs_memvec v[64];
	unsigned slots[64];
	size_t nv = 0, i, k;

	if (!pc->data || !pc->mr.readv)
		return;
	if (pc->rest_due)
		load_rest(pc);
	for (i = 0; i < n && nv < 64; i++) {
		uint64_t page, first, last, np;

		/* (a recursion's frames share one code object: its pages were just looked at) */
		if (!addrs[i] || addrs[i] + len < addrs[i] || (i && addrs[i] == addrs[i - 1]))
			continue;
		first = addrs[i] & ~(uint64_t)(PRS_PAGECACHE_PAGE - 1);
		last = (addrs[i] + len - 1) & ~(uint64_t)(PRS_PAGECACHE_PAGE - 1);
		/* counted, not "page <= last": the top page's successor wraps to 0 (a hostile address
		 * near 2^64 made this loop run through the whole address space: found by fuzz_python) */
		for (np = 0, page = first; np <= (last - first) / PRS_PAGECACHE_PAGE && nv < 64;
		     np++, page += PRS_PAGECACHE_PAGE) {
			uint64_t a = addrs[i] > page ? addrs[i] - page : 0;
			uint64_t b = addrs[i] + len - page < PRS_PAGECACHE_PAGE ? addrs[i] + len - page : PRS_PAGECACHE_PAGE;
			int s = find_slot(pc, page);
			bool dup = false;

			/* cached, known unreadable, or loaded ahead around it (what the last sample read
			 * of the object there: the prefetch asks for a guess of its size) */
			if (s >= 0 && (pc->bad[s] || (a < pc->hi[s] && pc->lo[s] < b)))
				continue;
			for (k = 0; k < nv && !dup; k++)
				dup = v[k].addr == page;
			if (dup)
				continue;
			if (s < 0 && (s = claim_free(pc, page)) < 0)
				continue; /* no free slot near: left to a plain read */
			pc->lo[s] = pc->hi[s] = 0;
			v[nv].addr = page;
			v[nv].buf = pc->data[s];
			v[nv].len = PRS_PAGECACHE_PAGE;
			v[nv].res = 0;
			slots[nv++] = (unsigned)s;
		}
	}
	if (!nv)
		return;
	if (pc->syscalls)
		(*pc->syscalls)++;
	if (pc->mr.readv(pc->mr.ctx, v, nv) < 0)
		return;
	for (k = 0; k < nv; k++) {
		if (v[k].res == 0)
			pc->hi[slots[k]] = PRS_PAGECACHE_PAGE;
		else
			pc->bad[slots[k]] = 1;
	}
}

static int cache_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	return prs_pagecache_read(ctx, addr, buf, len);
}

static int cache_readv(void *ctx, struct prs_memvec *v, size_t n)
{
	int done = 0;

	for (size_t i = 0; i < n; i++) {
		v[i].res = prs_pagecache_read(ctx, v[i].addr, v[i].buf, v[i].len);
		if (v[i].res == -ESRCH)
			return -ESRCH;
		done += v[i].res == 0;
	}
	return done;
}

void prs_pagecache_reader(struct prs_pagecache *pc, struct prs_memreader *out)
{
	out->read = cache_read;
	out->readv = cache_readv;
	out->ctx = pc;
}
