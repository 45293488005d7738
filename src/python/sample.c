/* SPDX-License-Identifier: MIT */
/*
 * Reading the Python stacks of every thread: runtime -> interpreters -> thread states -> frames
 * (PyFrameObject up to 3.10, _PyInterpreterFrame from 3.11) -> code objects -> names, files and
 * line numbers. All reads go through the per-sample page cache (which starts each sample by loading
 * what the previous one read, in one readv); code objects and strings not loaded that way are
 * prefetched in one readv each after the frame walk. Code objects are decoded once and cached by
 * address, and every hit is checked against a fresh copy of the object's head (type, name, file,
 * qualname, line table pointers, first line), so a freed and reused address never mislabels a
 * frame (notes/cpython.md §8.1). The target may be running: every value is range-checked, walks
 * are bounded by PRS_MAX_PY_FRAMES and cut on a revisited frame.
 */
#include "python/python-internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util/banned.h"

#define MAX_THREADS 4096
#define MAX_INTERPS 256
#define MAX_TABLE (1u << 20)   /* line tables larger than this are not decoded */
#define MAX_CODE_ENTRIES 65536 /* beyond that the cache is flushed */

/* ---- strings ---- */

/* Appends c as UTF-8 at out[o] when it fits before out[outsz - 1] (kept for the NUL); returns the
 * new length, o when it does not fit. A lone surrogate or a NUL becomes U+FFFD. */
static size_t put_utf8(char *out, size_t o, size_t outsz, uint32_t c)
{
	if (c == 0 || (c >= 0xd800 && c < 0xe000) || c > 0x10ffff)
		c = 0xfffd;
	if (c < 0x80 && o + 1 < outsz) {
		out[o++] = (char)c;
	} else if (c >= 0x80 && c < 0x800 && o + 2 < outsz) {
		out[o++] = (char)(0xc0 | c >> 6);
		out[o++] = (char)(0x80 | (c & 63));
	} else if (c >= 0x800 && c < 0x10000 && o + 3 < outsz) {
		out[o++] = (char)(0xe0 | c >> 12);
		out[o++] = (char)(0x80 | ((c >> 6) & 63));
		out[o++] = (char)(0x80 | (c & 63));
	} else if (c >= 0x10000 && o + 4 < outsz) {
		out[o++] = (char)(0xf0 | c >> 18);
		out[o++] = (char)(0x80 | ((c >> 12) & 63));
		out[o++] = (char)(0x80 | ((c >> 6) & 63));
		out[o++] = (char)(0x80 | (c & 63));
	}
	return o;
}

int prs_py_str_decode(const struct prs_py *py, const uint8_t *h, size_t have, char *out, size_t outsz,
		      size_t *need)
{
	const struct prs_py_layout *L = &py->L;
	uint64_t len;
	uint32_t state, kind;
	size_t off, o = 0;

	if (outsz == 0 || have < (size_t)L->str_ascii_size)
		return -EINVAL;
	out[0] = 0;
	len = u64_at(h, L->str_length);
	memcpy(&state, h + L->str_state, 4);
	kind = (state >> L->str_kind_shift) & 7;
	/* legacy (non-compact) strings are not read: never seen for code or thread names */
	if ((py->str_type && u64_at(h, L->ob_type) != py->str_type) || !(state & (1u << L->str_compact_bit)) ||
	    (kind != 1 && kind != 2 && kind != 4) || len > (1u << 30))
		return -EINVAL;
	off = (state & (1u << L->str_ascii_bit)) ? (size_t)L->str_ascii_size : (size_t)L->str_compact_size;
	if (len > PRS_MAX_NAME)
		len = PRS_MAX_NAME;
	*need = off + (size_t)len * kind;
	if (*need > have)
		return -E2BIG;
	for (size_t i = 0; i < len; i++) {
		const uint8_t *c = h + off + i * kind;
		uint32_t u = kind == 1 ? c[0]
			     : kind == 2 ? (uint32_t)(c[0] | c[1] << 8)
					 : (uint32_t)(c[0] | c[1] << 8 | c[2] << 16 | (uint32_t)c[3] << 24);
		size_t o2 = put_utf8(out, o, outsz, u);

		if (o2 == o)
			break; /* full: cut at a character boundary */
		o = o2;
	}
	out[o] = 0;
	return (int)o;
}

int prs_py_read_str(struct prs_py *py, uint64_t addr, char *out, size_t outsz)
{
	const struct prs_py_layout *L = &py->L;
	uint8_t buf[128 + 4 * PRS_MAX_NAME];
	size_t need = 0;
	int rc;

	if (outsz == 0)
		return -EINVAL;
	out[0] = 0;
	if (!plausible_ptr(addr) || L->str_compact_size > 128)
		return -EINVAL;
	/* the head, then exactly the bytes it says the characters take (from the same cached page) */
	rc = prs_py_pc_read(&py->pc, addr, buf, (size_t)L->str_compact_size);
	if (rc)
		return rc;
	rc = prs_py_str_decode(py, buf, (size_t)L->str_compact_size, out, outsz, &need);
	if (rc != -E2BIG)
		return rc;
	if (need > sizeof(buf))
		return -EINVAL;
	rc = prs_py_pc_read(&py->pc, addr, buf, need);
	if (rc)
		return rc;
	return prs_py_str_decode(py, buf, need, out, outsz, &need);
}

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
	rc = prs_py_pc_read(&py->pc, addr, hdr, (size_t)L->bytes_sval);
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
	if (n && (rc = prs_py_pc_read(&py->pc, addr + L->bytes_sval, b, n))) {
		free(b);
		return rc;
	}
	*out = b;
	*outlen = (uint32_t)n;
	return 0;
}

/* ---- the code cache ---- */

static size_t code_slot(uint64_t addr, size_t cap)
{
	return (size_t)((addr >> 3) * 0x9e3779b97f4a7c15ull >> 20) & (cap - 1);
}

static void code_flush(struct prs_py *py)
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
			code_flush(py);
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
	rc = prs_py_pc_read(&py->pc, addr, hdr, n);
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
	    prs_py_pc_read(&py->pc, addr, b, (size_t)L->str_compact_size))
		return 0;
	len = u64_at(b, L->str_length);
	hash = u64_at(b, L->str_length + 8);
	state = (uint32_t)i32_at(b, L->str_state);
	off = (state & (1u << L->str_ascii_bit)) ? (size_t)L->str_ascii_size : (size_t)L->str_compact_size;
	if (len && prs_py_pc_read(&py->pc, addr + off, &first, len < 8 ? (size_t)len : 8))
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
		    prs_py_pc_read(&py->pc, c->table_ptr, b, (size_t)L->bytes_sval) ||
		    u64_at(b, L->ob_size) != c->table_len ||
		    (k && prs_py_pc_read(&py->pc, c->table_ptr + L->bytes_sval, head, k)) ||
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
	c->memo_valid = false;
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
	nl = prs_py_read_str(py, nameptr, name, sizeof(name));
	if (nl < 0 && c->qual_ptr)
		nl = prs_py_read_str(py, c->name_ptr, name, sizeof(name));
	fl = prs_py_read_str(py, c->file_ptr, file, sizeof(file));
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
		if (plausible_ptr(c->code_ptr) && prs_py_pc_read(&py->pc, c->code_ptr, bh, 24) == 0)
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
static int code_line(struct prs_py *py, const struct prs_py_code *c, int64_t off)
{
	uint32_t minor = (py->version_hex >> 16) & 255;

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

/* ---- the walk ---- */

/* Walks one thread's frames from `top` into py->walk_*; returns the count. */
static unsigned walk_frames(struct prs_py *py, uint64_t top, bool *truncated)
{
	const struct prs_py_layout *L = &py->L;
	uint32_t minor = (py->version_hex >> 16) & 255;
	uint8_t fb[256];
	size_t need = (size_t)L->frame_size < sizeof(fb) ? (size_t)L->frame_size : sizeof(fb);
	unsigned n = 0, steps = 0, k;
	uint64_t f = top;

	while (f) {
		uint64_t code, back;
		bool cycle;

		if (++steps > PRS_MAX_PY_FRAMES + 64 || n >= PRS_MAX_PY_FRAMES) {
			*truncated = true;
			break;
		}
		if (!plausible_ptr(f)) {
			py->st.bad_frames++;
			*truncated = true;
			break;
		}
		/* loops: a popped frame's slot can be reused while we read a running thread */
		cycle = false;
		for (k = n > 64 ? n - 64 : 0; k < n && !cycle; k++)
			cycle = py->walk_frame[k] == f;
		if (cycle) {
			py->st.cycles++;
			*truncated = true;
			break;
		}
		if (prs_py_pc_read(&py->pc, f, fb, need)) {
			py->st.read_errors++;
			*truncated = true;
			break;
		}
		back = u64_at(fb, L->frame_back);
		if (minor <= 10) {
			int32_t lasti = i32_at(fb, L->frame_lasti);

			code = u64_at(fb, L->frame_code);
			py->walk_off[n] = lasti < 0 ? -1 : (minor == 10 ? 2 * (int64_t)lasti : lasti);
			py->walk_flags[n] = PRS_PYF_GROUP_END;
		} else {
			uint8_t owner = fb[L->frame_owner];
			uint64_t instr = u64_at(fb, L->frame_instr);

			if (owner >= 3) { /* a shim (CSTACK) or interpreter-owned frame: a group boundary */
				if (n)
					py->walk_flags[n - 1] |= PRS_PYF_GROUP_END;
				f = back;
				continue;
			}
			code = u64_at(fb, L->frame_code);
			if (minor >= 14)
				code &= ~(uint64_t)3; /* _PyStackRef tag bits */
			py->walk_off[n] = (int64_t)instr; /* made relative once the code object is known */
			py->walk_flags[n] = (L->frame_is_entry >= 0 && fb[L->frame_is_entry]) ? PRS_PYF_GROUP_END : 0;
			if (owner == (uint8_t)L->owner_generator)
				py->walk_flags[n] |= 0x80; /* generator-owned: never "incomplete" */
		}
		py->walk_frame[n] = f;
		py->walk_code[n] = code;
		n++;
		f = back;
	}
	if (n)
		py->walk_flags[n - 1] |= PRS_PYF_GROUP_END;
	return n;
}

/* Resolves the walked frames into profile frame ids in t. */
static int resolve_frames(struct prs_py *py, struct prs_profile *p, unsigned n, struct prs_py_thread *t)
{
	const struct prs_py_layout *L = &py->L;
	uint32_t minor = (py->version_hex >> 16) & 255;
	uint8_t hdr[PRS_PY_CODE_HDR];
	struct prs_py_code *c;
	unsigned i;
	int hrc = 0;

	prs_py_pc_prefetch(&py->pc, py->walk_code, n, (size_t)(L->code_size < PRS_PY_CODE_HDR ? L->code_size : PRS_PY_CODE_HDR));
	{
		/* then the pages of their name, qualname and file strings and line tables, in a second readv */
		uint64_t strs[4 * 64];
		size_t ns = 0;

		for (i = 0; i < n && ns + 4 <= sizeof(strs) / sizeof(strs[0]); i++) {
			if (i && py->walk_code[i] == py->walk_code[i - 1])
				continue;
			if (code_head(py, py->walk_code[i], hdr))
				continue;
			c = code_find(py, py->walk_code[i], false);
			if (c && code_head_proves(py, c, hdr))
				continue; /* a hit that needs no string */
			strs[ns++] = u64_at(hdr, L->code_name);
			strs[ns++] = u64_at(hdr, L->code_filename);
			if (L->code_qualname >= 0)
				strs[ns++] = u64_at(hdr, L->code_qualname);
			strs[ns++] = u64_at(hdr, L->code_linetable);
		}
		prs_py_pc_prefetch(&py->pc, strs, ns, (size_t)L->str_compact_size + 8);
	}
	t->nframes = 0;
	for (i = 0; i < n; i++) {
		uint64_t code = py->walk_code[i];
		int64_t off = py->walk_off[i];
		uint8_t flags = py->walk_flags[i];
		int line, rc;
		uint32_t fid;

		/* recursion: the same code object as the frame before has the same head in this
		 * sample's cache, already in hdr */
		if (i == 0 || code != py->walk_code[i - 1])
			hrc = code_head(py, code, hdr);
		if (hrc) {
			py->st.bad_frames++;
			if ((flags & PRS_PYF_GROUP_END) && t->nframes)
				t->fflags[t->nframes - 1] |= PRS_PYF_GROUP_END;
			continue;
		}
		c = code_find(py, code, false);
		if (c && (c->checked == py->st.samples ||
			  (code_matches(py, c, hdr) && c->name < p->nstrings && c->file < p->nstrings))) {
			/* validated once per sample (a recursive stack hits one entry many times) */
			c->checked = py->st.samples;
			py->st.code_hits++;
		} else {
			if (c)
				py->st.code_stale++;
			else
				py->st.code_misses++;
			if (!c && !(c = code_find(py, code, true)))
				return -ENOMEM;
			rc = code_decode(py, p, c, hdr);
			if (rc == -ENOMEM)
				return rc;
			if (!rc)
				c->checked = py->st.samples;
			if (rc) {
				py->st.bad_frames++;
				if ((flags & PRS_PYF_GROUP_END) && t->nframes)
					t->fflags[t->nframes - 1] |= PRS_PYF_GROUP_END;
				continue;
			}
		}
		if (minor >= 11) {
			uint64_t base = code + (uint64_t)L->code_adaptive;
			int64_t unit = ((int64_t)off - (int64_t)base) / 2;

			/* incomplete frames (before RESUME) are hidden, as CPython does */
			if (!(flags & 0x80) && L->code_firsttraceable >= 0) {
				int32_t ft = i32_at(hdr, L->code_firsttraceable);

				if (ft >= 0 && ft < (1 << 20) && (uint64_t)off < base + 2 * (uint64_t)ft) {
					if ((flags & PRS_PYF_GROUP_END) && t->nframes)
						t->fflags[t->nframes - 1] |= PRS_PYF_GROUP_END;
					continue;
				}
			}
			off = (uint64_t)off < base ? -1 : unit;
		}
		if (c->memo_valid && c->memo_off == (uint32_t)off) {
			fid = c->memo_frame;
		} else {
			line = code_line(py, c, off);
			if (line < 0) {
				py->st.bad_lines++;
				line = 0;
			}
			fid = prs_profile_named_frame(p, PRS_KIND_PYTHON, c->name, c->file, (uint32_t)line);
			if (fid == UINT32_MAX)
				return -ENOMEM;
			c->memo_off = (uint32_t)off;
			c->memo_frame = fid;
			c->memo_valid = true;
		}
		t->frames[t->nframes] = fid;
		t->fflags[t->nframes] = flags & PRS_PYF_GROUP_END;
		t->nframes++;
	}
	py->st.frames += t->nframes;
	return 0;
}

/* The current top frame of a thread state whose head is in ts. */
static uint64_t top_frame(struct prs_py *py, const uint8_t *ts)
{
	const struct prs_py_layout *L = &py->L;

	if (L->tstate_frame >= 0)
		return u64_at(ts, L->tstate_frame);
	if (L->tstate_current_frame >= 0)
		return u64_at(ts, L->tstate_current_frame);
	{
		uint64_t cf = u64_at(ts, L->tstate_cframe), f = 0;

		if (!plausible_ptr(cf) ||
		    prs_py_pc_read(&py->pc, cf + (uint64_t)L->cframe_current_frame, &f, 8))
			return 0;
		return f;
	}
}

/*
 * The current top frame of the thread state at tstate (whose head read earlier is ts), read now,
 * past the cache. Where the frame hangs off a cframe (3.11, 3.12), the cframe pointer and the
 * frame pointer of the cframe it pointed to are read in one readv: the second is the answer when
 * the first did not change (the usual case), else the new cframe is read. -EFAULT when the thread
 * state cannot be read; *out is 0 when it points nowhere readable.
 */
static int top_frame_now(struct prs_py *py, uint64_t tstate, const uint8_t *ts, uint64_t *out)
{
	const struct prs_py_layout *L = &py->L;
	int32_t off = L->tstate_frame >= 0 ? L->tstate_frame
		      : L->tstate_current_frame >= 0 ? L->tstate_current_frame : L->tstate_cframe;
	uint64_t v = 0, f = 0, cf_old;
	struct prs_memvec vec[2];

	*out = 0;
	if (off < 0)
		return -EFAULT;
	if (L->tstate_frame >= 0 || L->tstate_current_frame >= 0) {
		py->st.syscalls++;
		if (py->mr.read(py->mr.ctx, tstate + (uint64_t)off, &v, 8))
			return -EFAULT;
		*out = v;
		return 0;
	}
	cf_old = u64_at(ts, L->tstate_cframe);
	vec[0] = (struct prs_memvec){ tstate + (uint64_t)off, &v, 8, 0 };
	vec[1] = (struct prs_memvec){ cf_old + (uint64_t)L->cframe_current_frame, &f, 8, 0 };
	py->st.syscalls++;
	if (plausible_ptr(cf_old) && py->mr.readv) {
		if (py->mr.readv(py->mr.ctx, vec, 2) < 0 || vec[0].res)
			return -EFAULT;
	} else if (py->mr.read(py->mr.ctx, vec[0].addr, &v, 8)) {
		return -EFAULT;
	} else {
		vec[1].res = -EFAULT;
	}
	if (v == cf_old && !vec[1].res) {
		*out = f;
		return 0;
	}
	f = 0;
	py->st.syscalls++;
	if (plausible_ptr(v) && py->mr.read(py->mr.ctx, v + (uint64_t)L->cframe_current_frame, &f, 8))
		f = 0;
	*out = plausible_ptr(v) ? f : 0;
	return 0;
}

static bool task_exists(pid_t pid, int32_t tid)
{
	char path[64];
	struct stat st;

	if (tid <= 0)
		return false;
	snprintf(path, sizeof(path), "/proc/%d/task/%d", (int)pid, (int)tid);
	return stat(path, &st) == 0;
}

/* ≤3.10: the kernel tid from glibc's struct pthread (pthread_t is its address). */
static int32_t tid_of(struct prs_py *py, uint64_t pthread)
{
	int32_t v = 0;

	if (!plausible_ptr(pthread & ~(uint64_t)7))
		return 0;
	if (py->tid_off < 0) {
		/* calibrate once: glibc 2.36 x86_64 0x2d0, musl 0x30, else scan for a live tid */
		static const int cand[] = { 0x2d0, 0x30 };
		uint8_t buf[4096];
		unsigned i;

		for (i = 0; i < 2 && py->tid_off < 0; i++)
			if (!prs_py_pc_read(&py->pc, pthread + cand[i], &v, 4) && task_exists(py->pid, v))
				py->tid_off = cand[i];
		if (py->tid_off < 0 && !prs_py_pc_read(&py->pc, pthread, buf, sizeof(buf)))
			for (i = 0; i + 4 <= sizeof(buf) && py->tid_off < 0; i += 4) {
				memcpy(&v, buf + i, 4);
				if (v == py->pid)
					py->tid_off = (int)i;
			}
		if (py->tid_off < 0)
			return 0;
	}
	if (prs_py_pc_read(&py->pc, pthread + (uint64_t)py->tid_off, &v, 4) || v <= 0)
		return 0;
	return v;
}

static int sample(struct prs_py *py, struct prs_profile *p, struct prs_py_thread *threads, int max,
		  int *n, struct prs_err *err)
{
	const struct prs_py_layout *L = &py->L;
	uint64_t interp = 0;
	unsigned ninterp = 0;
	int nt = 0, rc;
	uint8_t ts[4096];
	size_t tslen = py->tstate_read;

	*n = 0;
	py->st.samples++;
	if (py->owner != p) {
		code_flush(py);
		py->owner = p;
	}
	if (py->runtime)
		rc = prs_py_pc_read(&py->pc, py->runtime + (uint64_t)L->runtime_interp_head, &interp, 8);
	else
		rc = prs_py_pc_read(&py->pc, py->interp_head_var, &interp, 8);
	if (rc == -ESRCH)
		return prs_err_set(err, -ESRCH, "pid %d: process is gone", py->pid);
	if (rc || !interp) {
		py->st.read_errors++;
		return prs_err_set(err, -EINVAL, "pid %d: no interpreter state (exiting or not started)", py->pid);
	}
	for (; interp && ninterp < MAX_INTERPS; ninterp++) {
		uint64_t tstate = 0, holder = 0, next_interp = 0;
		unsigned nth = 0;
		bool locked = false;

		if (!plausible_ptr(interp) ||
		    prs_py_pc_read(&py->pc, interp + (uint64_t)L->interp_tstate_head, &tstate, 8) ||
		    prs_py_pc_read(&py->pc, interp + (uint64_t)L->interp_next, &next_interp, 8)) {
			py->st.read_errors++;
			break;
		}
		/* the GIL holder */
		{
			uint64_t gil = 0;
			int32_t lk = 0;

			if (L->runtime_gil >= 0 && py->runtime)
				gil = py->runtime + (uint64_t)L->runtime_gil;
			else if (L->interp_gil_ptr >= 0)
				prs_py_pc_read(&py->pc, interp + (uint64_t)L->interp_gil_ptr, &gil, 8);
			if (gil && plausible_ptr(gil) && L->gil_locked >= 0 &&
			    !prs_py_pc_read(&py->pc, gil + (uint64_t)L->gil_locked, &lk, 4) &&
			    !prs_py_pc_read(&py->pc, gil + (uint64_t)L->gil_last_holder, &holder, 8)) {
				locked = lk == 1;
			} else if (py->tstate_current_var &&
				   !prs_py_pc_read(&py->pc, py->tstate_current_var, &holder, 8)) {
				locked = holder != 0; /* 3.6: _PyThreadState_Current is NULL while released */
			}
		}
		while (tstate) {
			struct prs_py_thread *t;
			bool truncated = false;
			unsigned nf;
			uint64_t top;

			bool seen = false;
			int k;

			if (++nth > MAX_THREADS) {
				py->st.cycles++;
				break;
			}
			for (k = nt - 1; k >= 0 && k >= nt - 64 && !seen; k--)
				seen = threads[k].tstate == tstate;
			if (seen) { /* a loop in the thread list (a thread state freed and reused meanwhile) */
				py->st.cycles++;
				break;
			}
			if (!plausible_ptr(tstate) || prs_py_pc_read(&py->pc, tstate, ts, tslen)) {
				py->st.read_errors++;
				break;
			}
			if (nt >= max) {
				py->st.truncated++;
				tstate = u64_at(ts, L->tstate_next);
				continue;
			}
			t = &threads[nt];
			t->tstate = tstate;
			t->thread_id = u64_at(ts, L->tstate_thread_id);
			t->tid = L->tstate_native_thread_id >= 0 ? i32_at(ts, L->tstate_native_thread_id)
								 : tid_of(py, t->thread_id);
			t->holds_gil = locked && holder == tstate;
			t->name = 0;
			t->kept = t->tid > 0 && py->keep && py->keep(py->keep_arg, t->tid);
			if (t->kept) { /* the caller knows it has not moved */
				t->nframes = 0;
				t->truncated = false;
				py->st.threads++;
				nt++;
				tstate = u64_at(ts, L->tstate_next);
				continue;
			}
			top = top_frame(py, ts);
			nf = walk_frames(py, top, &truncated);
			if (t->holds_gil && !py->all_stopped) {
				/* the holder runs while we read: if its frame moved, walk again once (on
				 * fresh data: the cache is emptied only then) */
				uint64_t top2;

				if (top_frame_now(py, tstate, ts, &top2) == 0 && top2 != top) {
					prs_py_pc_reset(&py->pc);
					py->st.retries++;
					truncated = false;
					nf = walk_frames(py, top2, &truncated);
				}
			}
			rc = resolve_frames(py, p, nf, t);
			if (rc)
				return prs_err_set(err, rc, "pid %d: out of memory", py->pid);
			t->truncated = truncated;
			if (truncated)
				py->st.truncated++;
			py->st.threads++;
			nt++;
			tstate = u64_at(ts, L->tstate_next);
		}
		if (next_interp == interp) {
			py->st.cycles++;
			break;
		}
		interp = next_interp;
	}
	*n = nt;
	return 0;
}

int prs_py_sample(struct prs_py *py, struct prs_profile *p, struct prs_py_thread *threads, int max,
		  int *n, struct prs_err *err)
{
	int rc;

	prs_py_pc_begin(&py->pc);
	rc = sample(py, p, threads, max, n, err);
	prs_py_pc_end(&py->pc);
	return rc;
}

void prs_py_set_stopped(struct prs_py *py, bool all_stopped)
{
	py->all_stopped = all_stopped;
}

void prs_py_set_keep(struct prs_py *py, bool (*keep)(void *arg, int32_t tid), void *arg)
{
	py->keep = keep;
	py->keep_arg = arg;
}

void prs_py_warm(struct prs_py *py)
{
	prs_py_pc_warm(&py->pc);
}

void prs_py_get_stats(const struct prs_py *py, struct prs_py_stats *out)
{
	*out = py->st;
}
