/* SPDX-License-Identifier: MIT */
/*
 * Naming raw Python frames: code object address + instruction offset -> (qualname or name, file,
 * line) -> a frame id of the profile. Code objects are decoded once and cached by address, and
 * every hit is checked against the object read in this sample, so a freed and reused address
 * never mislabels a frame (pymalloc hands a freed code object's block out again at once: lambdas,
 * exec, short-lived functions): 3.12+ by co_version (one read of the head), else
 * by the head's pointers and numbers plus the identity of its strings and line table. The heads
 * of a stack's code objects are prefetched in one readv, and the strings of those that need them
 * in a second one. Each entry remembers its last offset's frame id, so a frame that did not move
 * costs no line-table decoding and no interning.
 */
#include "python/python-internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/banned.h"

#define MAX_TABLE (1u << 20)   /* line tables larger than this are not decoded */
#define MAX_CODE_ENTRIES 65536 /* beyond that the cache is flushed */

/* Reads a bytes object's payload (≤ maxlen) into a new buffer. */
static int read_bytes(struct prs_py *py, uint64_t addr, uint8_t **out, uint32_t *outlen, size_t maxlen)
{
	const struct prs_py_layout *L = &py->L;
	uint8_t hdr[64];
	uint64_t n;
	uint8_t *b;
	int rc;

	*out = NULL;
	*outlen = 0;
	if (!plausible_ptr(addr) || L->bytes_sval > (int32_t)sizeof(hdr))
		return -EINVAL;
	rc = prs_pagecache_read(&py->pc, addr, hdr, (size_t)L->bytes_sval);
	if (rc)
		return rc;
	if (py->bytes_type && u64_at(hdr, L->ob_type) != py->bytes_type)
		return -EINVAL;
	n = u64_at(hdr, L->ob_size);
	if (n > maxlen)
		return -E2BIG;
	b = malloc(n ? n : 1);
	if (!b)
		return -ENOMEM;
	if (n && (rc = prs_pagecache_read(&py->pc, addr + L->bytes_sval, b, n))) {
		free(b);
		return rc;
	}
	*out = b;
	*outlen = (uint32_t)n;
	return 0;
}

/* ---- the cache ---- */

static size_t code_slot(uint64_t addr, size_t cap)
{
	return (size_t)((addr >> 3) * 0x9e3779b97f4a7c15ull >> 20) & (cap - 1);
}

void prs_py_code_flush(struct prs_py *py)
{
	size_t i;

	for (i = 0; i < py->ncodes_cap; i++) {
		free(py->codes[i].table);
		memset(&py->codes[i], 0, sizeof(py->codes[i]));
	}
	py->ncodes_used = 0;
}

static struct prs_py_code *code_find(struct prs_py *py, uint64_t addr, bool insert)
{
	size_t i = code_slot(addr, py->ncodes_cap), k;

	for (k = 0; k < py->ncodes_cap; k++, i = (i + 1) & (py->ncodes_cap - 1)) {
		if (py->codes[i].addr == addr)
			return &py->codes[i];
		if (!py->codes[i].addr)
			break;
	}
	if (!insert)
		return NULL;
	if ((py->ncodes_used + 1) * 2 > py->ncodes_cap) {
		/* grow (warm-up only) or flush when the target churns through code objects */
		size_t ncap = py->ncodes_cap * 2, j;
		struct prs_py_code *n = ncap <= MAX_CODE_ENTRIES * 2 ? calloc(ncap, sizeof(*n)) : NULL;

		if (!n) {
			prs_py_code_flush(py);
		} else {
			for (j = 0; j < py->ncodes_cap; j++) {
				struct prs_py_code *c = &py->codes[j];
				size_t s;

				if (!c->addr)
					continue;
				for (s = code_slot(c->addr, ncap); n[s].addr; s = (s + 1) & (ncap - 1))
					;
				n[s] = *c;
			}
			free(py->codes);
			py->codes = n;
			py->ncodes_cap = ncap;
		}
	}
	for (i = code_slot(addr, py->ncodes_cap); py->codes[i].addr; i = (i + 1) & (py->ncodes_cap - 1))
		;
	py->ncodes_used++;
	py->codes[i].addr = addr;
	return &py->codes[i];
}

/* Reads the head of code object `addr`; returns 0 when it is a code object. */
static int code_head(struct prs_py *py, uint64_t addr, uint8_t *hdr)
{
	const struct prs_py_layout *L = &py->L;
	size_t n = L->code_size < PRS_PY_CODE_HDR ? (size_t)L->code_size : PRS_PY_CODE_HDR;
	int rc;

	if (!plausible_ptr(addr))
		return -EINVAL;
	rc = prs_pagecache_read(&py->pc, addr, hdr, n);
	if (rc)
		return rc;
	if (py->code_type && u64_at(hdr, L->ob_type) != py->code_type)
		return -EINVAL;
	return 0;
}

/*
 * A cheap identity of the str at addr: its length, its hash (interned names have it computed) and
 * its first 8 data bytes. Pointers alone are not enough: when a code object and its name are freed
 * together, the next code object and its name can land at the same two addresses (measured with
 * churn.py on 3.11: every pointer equal, the name different). 0 when unreadable.
 */
static uint64_t str_ident(struct prs_py *py, uint64_t addr)
{
	const struct prs_py_layout *L = &py->L;
	uint8_t b[96];
	uint64_t len, hash, h, first = 0;
	uint32_t state;
	size_t off;

	if (!plausible_ptr(addr) || L->str_compact_size + 8 > (int32_t)sizeof(b) ||
	    prs_pagecache_read(&py->pc, addr, b, (size_t)L->str_compact_size))
		return 0;
	len = u64_at(b, L->str_length);
	hash = u64_at(b, L->str_length + 8);
	state = (uint32_t)i32_at(b, L->str_state);
	off = (state & (1u << L->str_ascii_bit)) ? (size_t)L->str_ascii_size : (size_t)L->str_compact_size;
	if (len && prs_pagecache_read(&py->pc, addr + off, &first, len < 8 ? (size_t)len : 8))
		return 0;
	h = (len * 0x9e3779b97f4a7c15ull) ^ hash ^ (first * 0xff51afd7ed558ccdull) ^ state;
	return h ? h : 1;
}

/* The co_version in a code object's head, 0 where the version has none. */
static uint32_t code_version(const struct prs_py *py, const uint8_t *hdr)
{
	return py->L.code_version >= 0 ? (uint32_t)i32_at(hdr, py->L.code_version) : 0;
}

/* Whether the pointers and numbers of the cached entry equal those in the head hdr. */
static bool code_head_matches(const struct prs_py *py, const struct prs_py_code *c, const uint8_t *hdr)
{
	const struct prs_py_layout *L = &py->L;

	return c->type == u64_at(hdr, L->ob_type) && c->name_ptr == u64_at(hdr, L->code_name) &&
	       c->file_ptr == u64_at(hdr, L->code_filename) &&
	       (L->code_qualname < 0 || c->qual_ptr == u64_at(hdr, L->code_qualname)) &&
	       c->table_ptr == u64_at(hdr, L->code_linetable) &&
	       (L->code_code < 0 || c->code_ptr == u64_at(hdr, L->code_code)) &&
	       c->firstline == i32_at(hdr, L->code_firstlineno) && c->version == code_version(py, hdr);
}

/*
 * Whether the head alone proves the entry (3.12+). co_version is a serial the interpreter gives
 * each code object it creates, so an object at a reused address has another one (200,000 code
 * objects created and freed on 3.12 and 3.13: no reused address kept its version); the object
 * holds its strings and line table, which are immutable. 0 (the counter spent) proves nothing.
 */
static bool code_head_proves(const struct prs_py *py, const struct prs_py_code *c, const uint8_t *hdr)
{
	return c->version != 0 && code_head_matches(py, c, hdr);
}

/* Whether the cached entry still describes the object whose head is hdr. */
static bool code_matches(struct prs_py *py, const struct prs_py_code *c, const uint8_t *hdr)
{
	const struct prs_py_layout *L = &py->L;

	if (!code_head_matches(py, c, hdr))
		return false;
	if (c->version)
		return true;
	/* without a version, equal pointers are not enough (see str_ident): the strings and the line
	 * table are compared too */
	if (c->table) { /* the line table: its length and first bytes */
		uint8_t b[64], head[16];
		size_t k = c->table_len < 16 ? c->table_len : 16;

		if (L->bytes_sval > (int32_t)sizeof(b) ||
		    prs_pagecache_read(&py->pc, c->table_ptr, b, (size_t)L->bytes_sval) ||
		    u64_at(b, L->ob_size) != c->table_len ||
		    (k && prs_pagecache_read(&py->pc, c->table_ptr + L->bytes_sval, head, k)) ||
		    memcmp(head, c->table, k))
			return false;
	}
	return str_ident(py, c->name_ptr) == c->name_id &&
	       (!c->qual_ptr || str_ident(py, c->qual_ptr) == c->qual_id) &&
	       str_ident(py, c->file_ptr) == c->file_id;
}

static int code_decode(struct prs_py *py, struct prs_profile *p, struct prs_py_code *c, const uint8_t *hdr)
{
	const struct prs_py_layout *L = &py->L;
	char name[PRS_MAX_NAME + 1], file[PRS_MAX_NAME + 1];
	uint64_t nameptr;
	int nl, fl, rc;

	free(c->table);
	c->table = NULL;
	c->table_len = 0;
	c->memo_n = c->memo_next = 0;
	c->type = u64_at(hdr, L->ob_type);
	c->name_ptr = u64_at(hdr, L->code_name);
	c->file_ptr = u64_at(hdr, L->code_filename);
	c->qual_ptr = L->code_qualname >= 0 ? u64_at(hdr, L->code_qualname) : 0;
	c->table_ptr = u64_at(hdr, L->code_linetable);
	c->code_ptr = L->code_code >= 0 ? u64_at(hdr, L->code_code) : 0;
	c->firstline = i32_at(hdr, L->code_firstlineno);
	c->version = code_version(py, hdr);
	c->name_id = str_ident(py, c->name_ptr);
	c->qual_id = c->qual_ptr ? str_ident(py, c->qual_ptr) : 0;
	c->file_id = str_ident(py, c->file_ptr);
	nameptr = c->qual_ptr ? c->qual_ptr : c->name_ptr;
	nl = prs_py_read_str(L, py->str_type, &py->cr, nameptr, name, sizeof(name));
	if (nl < 0 && c->qual_ptr)
		nl = prs_py_read_str(L, py->str_type, &py->cr, c->name_ptr, name, sizeof(name));
	fl = prs_py_read_str(L, py->str_type, &py->cr, c->file_ptr, file, sizeof(file));
	if (nl < 0 || fl < 0) {
		c->addr = 0; /* do not keep a half-decoded entry (its slot is reused by the next insert) */
		py->ncodes_used--;
		return nl < 0 ? nl : fl;
	}
	rc = read_bytes(py, c->table_ptr, &c->table, &c->table_len, MAX_TABLE);
	if (rc == -ENOMEM)
		return rc;
	if (L->code_code >= 0) {
		uint8_t bh[32];

		c->ncode_bytes = 0;
		if (plausible_ptr(c->code_ptr) && prs_pagecache_read(&py->pc, c->code_ptr, bh, 24) == 0)
			c->ncode_bytes = (uint32_t)(u64_at(bh, L->ob_size) < (1u << 28) ? u64_at(bh, L->ob_size) : 0);
	} else {
		uint64_t units = u64_at(hdr, L->ob_size);

		c->ncode_bytes = units < (1u << 27) ? (uint32_t)units * 2 : 0;
	}
	c->name = prs_profile_string(p, name, (size_t)nl);
	c->file = prs_profile_string(p, file, (size_t)fl);
	if (c->name == UINT32_MAX || c->file == UINT32_MAX)
		return -ENOMEM;
	return 0;
}

/* The line for instruction offset off (bytes ≤3.10, code units 3.11+; < 0 = not started). */
static int code_line(const struct prs_py *py, const struct prs_py_code *c, int32_t off)
{
	uint32_t minor = py->walk.minor;

	if (off < 0)
		return c->firstline;
	if (c->ncode_bytes && (uint64_t)off * (minor >= 11 ? 2 : 1) >= c->ncode_bytes)
		return -1;
	if (!c->table)
		return -1;
	if (minor <= 9)
		return prs_py_line_lnotab(c->table, c->table_len, c->firstline, (uint32_t)off);
	if (minor == 10)
		return prs_py_line_310(c->table, c->table_len, c->firstline, (uint32_t)off);
	return prs_py_line_loc(c->table, c->table_len, c->firstline, (uint32_t)off);
}

/* ---- naming a stack ---- */

/* Code objects whose heads prs_py_load_heads asks for at most (its readv has at most 64 pages
 * anyway, prs_pagecache_prefetch). */
#define LOAD_HEADS_MAX 256

/*
 * Loads the heads of raw's code objects in one readv, then the pages of the name, qualname and
 * file strings and line tables of those whose head alone does not prove their cache entry, in a
 * second one.
 */
static void prefetch(struct prs_py *py, const struct prs_py_stack *raw)
{
	const struct prs_py_layout *L = &py->L;
	uint8_t hdr[PRS_PY_CODE_HDR];
	uint64_t strs[4 * 64];
	size_t ns = 0;
	const struct prs_py_code *c;
	unsigned i, n = raw->nframes;

	prs_pagecache_prefetch(&py->pc, raw->code, n,
			       (size_t)(L->code_size < PRS_PY_CODE_HDR ? L->code_size : PRS_PY_CODE_HDR));
	for (i = 0; i < n && ns + 4 <= sizeof(strs) / sizeof(strs[0]); i++) {
		if (i && raw->code[i] == raw->code[i - 1])
			continue;
		if (code_head(py, raw->code[i], hdr))
			continue;
		c = code_find(py, raw->code[i], false);
		if (c && code_head_proves(py, c, hdr))
			continue; /* a hit that needs no string */
		strs[ns++] = u64_at(hdr, L->code_name);
		strs[ns++] = u64_at(hdr, L->code_filename);
		if (L->code_qualname >= 0)
			strs[ns++] = u64_at(hdr, L->code_qualname);
		strs[ns++] = u64_at(hdr, L->code_linetable);
	}
	prs_pagecache_prefetch(&py->pc, strs, ns, (size_t)L->str_compact_size + 8);
}

/*
 * The valid cache entry of the code object whose head is hdr, decoded now when missing or stale;
 * *out NULL when the object cannot be decoded. Validated once per sample (a recursive stack hits
 * one entry many times). Returns 0 or -ENOMEM.
 */
static int code_entry(struct prs_py *py, struct prs_profile *p, uint64_t code, const uint8_t *hdr,
		      struct prs_py_code **out)
{
	struct prs_py_code *c = code_find(py, code, false);
	int rc;

	*out = NULL;
	if (c && (c->checked == py->gen ||
		  (code_matches(py, c, hdr) && c->name < p->nstrings && c->file < p->nstrings))) {
		c->checked = py->gen;
		py->st.code_hits++;
		*out = c;
		return 0;
	}
	if (c)
		py->st.code_stale++;
	else
		py->st.code_misses++;
	if (!c && !(c = code_find(py, code, true)))
		return -ENOMEM;
	rc = code_decode(py, p, c, hdr);
	if (rc == -ENOMEM)
		return rc;
	if (rc) {
		py->st.bad_frames++;
		return 0;
	}
	c->checked = py->gen;
	*out = c;
	return 0;
}

/* 3.11+: whether the frame is still being set up (before RESUME: CPython hides it). */
static bool incomplete(const struct prs_py *py, const uint8_t *hdr, int32_t off, uint8_t flags)
{
	int32_t ft;

	if (py->walk.minor < 11 || (flags & PRS_PYF_GENERATOR) || py->L.code_firsttraceable < 0)
		return false;
	ft = i32_at(hdr, py->L.code_firsttraceable);
	return ft >= 0 && ft < (1 << 20) && off < ft;
}

/* The frame id of entry c at instruction offset off (from its memo when the offset was met
 * lately: decoding the line table was a fifth of the instructions per sample of a recursive
 * 20-frame loop, callgrind). */
static uint32_t frame_id(struct prs_py *py, struct prs_profile *p, struct prs_py_code *c, int32_t off)
{
	uint32_t fid;
	unsigned k;
	int line;

	for (k = 0; k < c->memo_n; k++)
		if (c->memo_off[k] == off)
			return c->memo_frame[k];
	line = code_line(py, c, off);
	if (line < 0) {
		py->st.bad_lines++;
		line = 0;
	}
	fid = prs_profile_named_frame(p, PRS_KIND_PYTHON, c->name, c->file, (uint32_t)line);
	if (fid == UINT32_MAX)
		return fid;
	if (c->memo_n < PRS_PY_CODE_MEMO) {
		k = c->memo_n++;
	} else {
		k = c->memo_next;
		c->memo_next = (uint8_t)((k + 1) % PRS_PY_CODE_MEMO);
	}
	c->memo_off[k] = off;
	c->memo_frame[k] = fid;
	return fid;
}

/* Whether frame i of raw, walked earlier with its code object's identity (has_ident), is still
 * of the object whose head is hdr (entry c): not if that one was freed and its address reused. */
static bool same_object(struct prs_py *py, const struct prs_py_stack *raw, unsigned i,
			const struct prs_py_code *c, const uint8_t *hdr)
{
	uint64_t hash;
	uint32_t now;

	if (py->L.code_version >= 0)
		now = prs_py_ident_version(code_version(py, hdr));
	else if (prs_pagecache_read(&py->pc, c->name_ptr + (uint64_t)py->L.str_length + 8, &hash,
				    sizeof(hash)) == 0)
		now = prs_py_ident_hash(hash);
	else
		now = 0;
	if (now == raw->ident[i])
		return true;
	py->st.code_reused++;
	return false;
}

/* Whether frame i of raw had a code object when it was walked that is not there now: another
 * one at its address, or none that can be decoded (its memory freed). */
static bool gone(struct prs_py *py, const struct prs_py_stack *raw, unsigned i,
		 const struct prs_py_code *c, const uint8_t *hdr)
{
	if (!raw->has_ident || raw->ident[i] == 0)
		return false;
	if (!c) {
		py->st.code_reused++;
		return true;
	}
	return !same_object(py, raw, i, c, hdr);
}

/* The frame standing for a code object freed between the walk and the naming. */
static uint32_t freed_frame(struct prs_profile *p)
{
	static const char name[] = "<code object freed before naming>";
	uint32_t n = prs_profile_string(p, name, sizeof(name) - 1), f = prs_profile_string(p, "", 0);

	if (n == UINT32_MAX || f == UINT32_MAX)
		return UINT32_MAX;
	return prs_profile_named_frame(p, PRS_KIND_PYTHON, n, f, 0);
}

/* raw's frames as frame ids of p into t (frames, fflags, nframes). Returns 0 or -ENOMEM. */
static int name_frames(struct prs_py *py, struct prs_profile *p, const struct prs_py_stack *raw,
		       struct prs_py_thread *t)
{
	uint8_t hdr[PRS_PY_CODE_HDR];
	struct prs_py_code *c;
	unsigned i;
	int hrc = 0, rc;

	prefetch(py, raw);
	t->nframes = 0;
	for (i = 0; i < raw->nframes; i++) {
		uint64_t code = raw->code[i];
		uint8_t flags = raw->flags[i];
		uint32_t fid;

		/* recursion: the same code object as the frame before has the same head in this
		 * sample's cache, already in hdr */
		if (i == 0 || code != raw->code[i - 1])
			hrc = code_head(py, code, hdr);
		c = NULL;
		if (hrc)
			py->st.bad_frames++;
		else if ((rc = code_entry(py, p, code, hdr, &c)))
			return rc;
		if (gone(py, raw, i, c, hdr)) {
			/* its object is gone: shown as such in its place, never by the new one's name */
			fid = freed_frame(p);
			if (fid == UINT32_MAX)
				return -ENOMEM;
			t->frames[t->nframes] = fid;
			t->fflags[t->nframes] = flags & PRS_PYF_GROUP_END;
			t->nframes++;
			continue;
		}
		if (!c || incomplete(py, hdr, raw->off[i], flags)) {
			/* dropped: its group ends with the frame before it */
			if ((flags & PRS_PYF_GROUP_END) && t->nframes)
				t->fflags[t->nframes - 1] |= PRS_PYF_GROUP_END;
			continue;
		}
		fid = frame_id(py, p, c, raw->off[i]);
		if (fid == UINT32_MAX)
			return -ENOMEM;
		t->frames[t->nframes] = fid;
		t->fflags[t->nframes] = flags & PRS_PYF_GROUP_END;
		t->nframes++;
	}
	py->st.frames += t->nframes;
	return 0;
}

void prs_py_load_heads(struct prs_py *py, const struct prs_py_stack *raw, int n)
{
	const struct prs_py_layout *L = &py->L;
	size_t len = (size_t)(L->code_size < PRS_PY_CODE_HDR ? L->code_size : PRS_PY_CODE_HDR);
	uint64_t addrs[LOAD_HEADS_MAX];
	uint8_t hdr[PRS_PY_CODE_HDR];
	size_t na = 0;

	for (int t = 0; t < n; t++)
		for (unsigned i = 0; !raw[t].kept && i < raw[t].nframes && na < LOAD_HEADS_MAX; i++)
			if (!na || raw[t].code[i] != addrs[na - 1])
				addrs[na++] = raw[t].code[i];
	if (na)
		prs_pagecache_prefetch(&py->pc, addrs, na, len);
	/* read through the cache: the heads' lines are then of the first part of the working set,
	 * which the next sample loads while the target is stopped; what the naming reads after the
	 * split is loaded after it (prs_pagecache_split) */
	for (size_t i = 0; i < na; i++)
		(void)prs_pagecache_read(&py->pc, addrs[i], hdr, len);
	prs_pagecache_split(&py->pc);
}

int prs_py_name(struct prs_py *py, struct prs_profile *p, const struct prs_py_stack *raw,
		struct prs_py_thread *out)
{
	if (!py->in_sample)
		prs_py_begin(py);
	if (py->owner != p) {
		prs_py_code_flush(py);
		py->owner = p;
	}
	out->tid = raw->tid;
	out->thread_id = raw->thread_id;
	out->tstate = raw->tstate;
	out->holds_gil = raw->holds_gil;
	out->truncated = raw->truncated;
	out->kept = raw->kept;
	/* (the GIL holder seen running during the walk of this sample: walk_thread) */
	out->ran = py->ran_tstate && raw->tstate == py->ran_tstate;
	out->name = 0;
	out->nframes = 0;
	if (raw->kept)
		return 0;
	return name_frames(py, p, raw, out);
}
