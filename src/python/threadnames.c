/* SPDX-License-Identifier: MIT */
/*
 * Thread names from the `threading` module, read from memory like everything else:
 *
 *   interp->modules (sys.modules, 3.12+ interp->imports.modules)
 *     ["threading"] -> module -> md_dict
 *       ["_active"] -> dict {ident (int): Thread}
 *         each Thread's instance attributes ["_name"] -> str
 *
 * An instance's attributes live in one of four places, by version:
 *   <= 3.10  a dict at obj + type->tp_dictoffset;
 *   3.11     (managed dict) a dict pointer at obj - 24, or a values array pointer at obj - 32
 *            whose keys are the type's shared keys (ht_cached_keys);
 *   3.12     one word at obj - 24: a dict pointer, or (values - 1), tagged by its low bit;
 *   3.13     a dict pointer at obj - 24, or values inline at obj + tp_basicsize (when the type has
 *            Py_TPFLAGS_INLINE_VALUES and the values are marked valid).
 * A dict's keys object holds entries {hash, key, value} (3.11+: {key, value} for str-only keys);
 * a split dict keeps its values in a separate array, indexed like the entries.
 *
 * This is not on the sampling path: the sampler reads names once at start, when a thread id it
 * has no name for shows up (20 ms after the last read within a budget of 1/400 of the time,
 * else 250 ms; once for a thread `threading` does not know), and every 2 s (renames), while the
 * target runs. Every object is checked (type pointers where the symbols are known, sizes, counts); a
 * read that races with the target only costs that refresh. The path to _active is looked up once
 * per interpreter and then re-validated by one readv per refresh (chain_valid), which also re-reads
 * _active's entry in the module dict, so a `threading._active = {}` is followed.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pyrsprof/util.h"
#include "python/python-internal.h"

#include "util/banned.h"

#define MAX_INTERPS 16
#define MAX_ENTRIES 65536u   /* entries of one dict read (a big sys.modules has a few thousand) */
#define MAX_NAMED 1024u      /* threads named in the cache */
#define MAX_ASKED 64u       /* idents missed that a refresh is asked for, or did not find */
/* A new thread's state exists before threading registers it in _active (the thread must get the
 * GIL to run its bootstrap: 5 ms or more a contender): it is given up for (unknown) only when the
 * refreshes of this long after it was asked did not find it */
#define UNKNOWN_AFTER_NS 250000000ull
#define MAX_KEY 16u          /* the keys looked for ("threading", "_active", "_name") are shorter */
#define MAX_LONG_DIGITS 3    /* a 64-bit ident in 30-bit digits */
/*
 * After a lookup missed (a new thread), the next refresh comes 20 ms after the last one while the
 * refreshes have taken at most 1/400 of the time (a budget of 1/400 of the time since the last
 * refresh, up to 5 ms, less what each refresh took: prs_py_names_took), else 250 ms after it: a
 * thread that lives 100 ms gets its name, and a thread-per-request server (a miss every tick) or
 * a raw _thread thread that never gets a name (a miss at every lookup) costs at most that share.
 */
#define WANTED_MIN_NS 20000000ull
#define WANTED_PERIOD_NS 250000000ull
#define BUDGET_SHARE 400
#define BUDGET_MAX_NS 5000000
#define REFRESH_PERIOD_NS 2000000000ull

struct named {
	uint64_t ident;
	uint32_t name;
};

/*
 * Where _active was found in one interpreter (kept while it validates): the module, its dict, the
 * dict's keys object, and where in that keys object's entries the "_active" entry's key and value
 * pointers are (slot: the value's address, the key's 8 bytes before it; 0 = not known).
 */
struct chain {
	uint64_t interp, mod, mdict, active;
	uint64_t mkeys, key, slot;
};

struct pending;

struct prs_py_names {
	struct named e[MAX_NAMED]; /* sorted by ident */
	struct named next[MAX_NAMED]; /* the refresh being read */
	unsigned n;
	const struct prs_profile *owner; /* the profile the name ids belong to */
	uint64_t last_ns;                /* last refresh (0: never) */
	int64_t budget_ns;               /* the refreshes' budget at budget_at (prs_py_names_took) */
	uint64_t budget_at;              /* 0: no budget kept (never told): misses wait 250 ms */
	bool wanted;                     /* a lookup missed since the last refresh */
	/* the idents whose lookups missed since the last refresh began; and those a refresh did not
	 * find although they were asked before it (a raw _thread thread): a miss of one of these does
	 * not ask again, until the next periodic refresh clears them */
	uint64_t asked[MAX_ASKED], unknown[MAX_ASKED];
	uint64_t asked_at[MAX_ASKED]; /* the refresh before the first miss (last_ns then) */
	unsigned nasked, nunknown;
	struct chain chain[MAX_INTERPS];
	struct pending *pend;            /* MAX_NAMED of them */
	struct prs_memvec *svecs;        /* the stages' reads (2 * MAX_NAMED); dict_find has its own */
	/* _active's (ident, Thread) pairs, copied before each Thread's attributes reuse the scratch */
	uint64_t act_key[MAX_NAMED], act_val[MAX_NAMED];
	/* scratch of one dict read, grown as needed and kept */
	uint8_t *ent;        /* entries */
	uint64_t *vals;      /* split values */
	uint8_t *keyhd;      /* heads of key strings, MAX_KEY + str_ascii_size bytes each */
	struct prs_memvec *vecs;
	uint32_t *vidx;      /* the entry each vec reads the key of */
	size_t cap;          /* entries each of the above holds */
};

/* One dict's entries in py->names' scratch. */
struct dict {
	uint64_t keys;       /* the keys object they were read from */
	uint64_t ent;        /* the target address of entry 0 */
	uint32_t n;          /* entries */
	uint32_t esz;        /* bytes per entry */
	uint32_t koff, voff; /* key and value pointers inside an entry */
	bool split;          /* values come from names->vals */
};

static int rd(struct prs_py *py, uint64_t addr, void *buf, size_t len)
{
	if (!plausible_ptr(addr & ~7ull))
		return -EINVAL;
	py->st.syscalls++;
	return py->mr.read(py->mr.ctx, addr, buf, len);
}

static int grow(struct prs_py_names *nm, size_t n, const struct prs_py_layout *L)
{
	size_t esz = (size_t)L->dict_entry_size, ksz = MAX_KEY + (size_t)L->str_ascii_size;
	size_t cap = nm->cap ? nm->cap : 256;
	uint8_t *ent, *keyhd;
	uint64_t *vals;
	struct prs_memvec *vecs;
	uint32_t *vidx;

	if (n <= nm->cap)
		return 0;
	while (cap < n)
		cap *= 2;
	ent = realloc(nm->ent, cap * esz);
	if (ent)
		nm->ent = ent;
	vals = realloc(nm->vals, cap * 8);
	if (vals)
		nm->vals = vals;
	keyhd = realloc(nm->keyhd, cap * ksz);
	if (keyhd)
		nm->keyhd = keyhd;
	vecs = realloc(nm->vecs, cap * sizeof(*vecs));
	if (vecs)
		nm->vecs = vecs;
	vidx = realloc(nm->vidx, cap * sizeof(*vidx));
	if (vidx)
		nm->vidx = vidx;
	if (!ent || !vals || !keyhd || !vecs || !vidx)
		return -ENOMEM;
	nm->cap = cap;
	return 0;
}

/*
 * Reads the entries of the keys object at keys into the scratch; values != 0 is the address of a
 * split table's values[0] (its length bounded by capacity when known, else by the entries).
 */
static int read_keys(struct prs_py *py, uint64_t keys, uint64_t values, uint32_t capacity, struct dict *d)
{
	const struct prs_py_layout *L = &py->L;
	struct prs_py_names *nm = py->names;
	uint8_t h[64];
	uint64_t size, idx_bytes, n;
	int64_t nent;
	int rc;

	if (L->dk_indices > (int32_t)sizeof(h))
		return -EINVAL;
	if ((rc = rd(py, keys, h, (size_t)L->dk_indices)))
		return rc;
	memcpy(&nent, h + L->dk_nentries, 8);
	if (L->dk_size >= 0) { /* <= 3.10: the index width follows the table size */
		size = u64_at(h, L->dk_size);
		if (size < 8 || size > (1u << 30) || (size & (size - 1)))
			return -EINVAL;
		idx_bytes = size * (size <= 0xff ? 1 : size <= 0xffff ? 2 : 4);
		d->esz = (uint32_t)L->dict_entry_size;
		d->koff = 8;
	} else {
		unsigned log2 = h[L->dk_log2_size], log2ib = h[L->dk_log2_index_bytes], kind = h[L->dk_kind];

		if (log2 < 3 || log2 > 30 || log2ib < log2 || log2ib > log2 + 3 || kind > 2)
			return -EINVAL;
		size = 1ull << log2;
		idx_bytes = 1ull << log2ib;
		d->esz = (uint32_t)(kind == 0 ? L->dict_entry_size : L->dict_uentry_size);
		d->koff = kind == 0 ? 8 : 0;
	}
	d->voff = d->koff + 8;
	d->keys = keys;
	d->ent = keys + (uint64_t)L->dk_indices + idx_bytes;
	if (nent < 0 || (uint64_t)nent > size)
		return -EINVAL;
	n = (uint64_t)nent < MAX_ENTRIES ? (uint64_t)nent : MAX_ENTRIES;
	d->split = values != 0;
	if (d->split && n > capacity)
		n = capacity;
	d->n = (uint32_t)n;
	if (n == 0)
		return 0;
	if ((rc = grow(nm, n, L)))
		return rc;
	if ((rc = rd(py, d->ent, nm->ent, n * d->esz)))
		return rc;
	if (d->split && (rc = rd(py, values, nm->vals, n * 8)))
		return rc;
	return 0;
}

/* Reads the dict object at addr. */
static int read_dict(struct prs_py *py, uint64_t addr, struct dict *d)
{
	const struct prs_py_layout *L = &py->L;
	uint8_t h[64];
	uint64_t keys, values;
	int rc;

	if (L->dict_values + 8 > (int32_t)sizeof(h))
		return -EINVAL;
	if ((rc = rd(py, addr, h, (size_t)L->dict_values + 8)))
		return rc;
	if (py->dict_type && u64_at(h, L->ob_type) != py->dict_type)
		return -EINVAL;
	keys = u64_at(h, L->dict_keys);
	values = u64_at(h, L->dict_values);
	if (values && L->dict_values_values >= 0)
		values += (uint64_t)L->dict_values_values;
	return read_keys(py, keys, values, MAX_ENTRIES, d);
}

static uint64_t entry_key(const struct prs_py_names *nm, const struct dict *d, uint32_t i)
{
	return u64_at(nm->ent + (size_t)i * d->esz, (int32_t)d->koff);
}

static uint64_t entry_value(const struct prs_py_names *nm, const struct dict *d, uint32_t i)
{
	return d->split ? nm->vals[i] : u64_at(nm->ent + (size_t)i * d->esz, (int32_t)d->voff);
}

/*
 * The entry whose key is the ASCII str `key`, in one batched read of every key's head: its value
 * in *value and its index in *index (either may be NULL). keys_only: a shared keys object read
 * alone (its entries' values are NULL), the entry counts even so. Returns 0, -ENOENT, or an error.
 */
static int dict_find(struct prs_py *py, const struct dict *d, const char *key, bool keys_only,
		     uint64_t *value, uint32_t *index)
{
	const struct prs_py_layout *L = &py->L;
	struct prs_py_names *nm = py->names;
	size_t klen = strlen(key), ksz = MAX_KEY + (size_t)L->str_ascii_size, nv = 0;
	uint32_t want = (1u << L->str_compact_bit) | (1u << L->str_ascii_bit);
	int rc;

	if (klen > MAX_KEY)
		return -EINVAL;
	for (uint32_t i = 0; i < d->n; i++) {
		uint64_t k = entry_key(nm, d, i);

		if (!plausible_ptr(k) || (!keys_only && !entry_value(nm, d, i)))
			continue;
		nm->vecs[nv].addr = k;
		nm->vecs[nv].buf = nm->keyhd + nv * ksz;
		nm->vecs[nv].len = (size_t)L->str_ascii_size + klen;
		nm->vecs[nv].res = 0;
		nm->vidx[nv++] = i;
	}
	if (nv == 0)
		return -ENOENT;
	py->st.syscalls += (nv + 1023) / 1024;
	rc = py->mr.readv(py->mr.ctx, nm->vecs, nv);
	if (rc < 0)
		return rc;
	for (size_t j = 0; j < nv; j++) {
		const uint8_t *h = nm->keyhd + j * ksz;
		uint32_t state;

		if (nm->vecs[j].res || (py->str_type && u64_at(h, L->ob_type) != py->str_type) ||
		    u64_at(h, L->str_length) != klen)
			continue;
		memcpy(&state, h + L->str_state, 4);
		if ((state & want) == want && !memcmp(h + L->str_ascii_size, key, klen)) {
			if (value)
				*value = entry_value(nm, d, nm->vidx[j]);
			if (index)
				*index = nm->vidx[j];
			return 0;
		}
	}
	return -ENOENT;
}

/* The non-negative int object whose first LONG_HEAD bytes are h, up to 64 bits. */
#define LONG_HEAD(L) ((size_t)(L)->long_digit + 4 * MAX_LONG_DIGITS)
static int decode_long(const struct prs_py *py, const uint8_t *h, uint64_t *out)
{
	const struct prs_py_layout *L = &py->L;
	uint32_t digit[MAX_LONG_DIGITS];
	uint64_t nd, v = 0;

	if (py->long_type && u64_at(h, L->ob_type) != py->long_type)
		return -EINVAL;
	if (L->long_tag >= 0) { /* 3.12+: digits << 3 | sign (0 positive, 1 zero, 2 negative) */
		uint64_t tag = u64_at(h, L->long_tag);

		if ((tag & 3) > 1)
			return -EINVAL;
		nd = tag >> 3;
	} else {
		int64_t size;

		memcpy(&size, h + L->long_size, 8);
		if (size < 0)
			return -EINVAL;
		nd = (uint64_t)size;
	}
	if (nd > MAX_LONG_DIGITS)
		return -EINVAL;
	memcpy(digit, h + L->long_digit, sizeof(digit));
	for (uint64_t i = nd; i-- > 0;) {
		if (digit[i] >> L->long_shift || (v >> (64 - L->long_shift)))
			return -EINVAL;
		v = v << L->long_shift | digit[i];
	}
	*out = v;
	return 0;
}

/* Reads the attributes of the instance at obj into the scratch. */
static int read_instance_dict(struct prs_py *py, uint64_t obj, struct dict *d)
{
	const struct prs_py_layout *L = &py->L;
	uint8_t t[1024];
	uint64_t type, flags, keys;
	int64_t basicsize, dictoffset;
	int32_t tlen = L->ht_cached_keys + 8;
	int rc;

	if (tlen > (int32_t)sizeof(t))
		return -EINVAL;
	if ((rc = rd(py, obj + (uint64_t)L->ob_type, &type, 8)) || (rc = rd(py, type, t, (size_t)tlen)))
		return rc;
	flags = u64_at(t, L->tp_flags);
	memcpy(&basicsize, t + L->tp_basicsize, 8);
	memcpy(&dictoffset, t + L->tp_dictoffset, 8);
	keys = u64_at(t, L->ht_cached_keys);
	if (L->managed_dict && L->flag_managed_dict && (flags & (uint64_t)L->flag_managed_dict)) {
		uint64_t w[2], dict, values = 0;
		uint32_t capacity = MAX_ENTRIES;

		/* w[0] = obj - back - 8 (3.11's values pointer), w[1] = obj - back */
		if ((rc = rd(py, obj - (uint64_t)L->managed_dict_back - 8, w, 16)))
			return rc;
		dict = w[1];
		if (L->managed_dict == 1) {
			if (!dict)
				values = w[0];
		} else if (L->managed_dict == 2) {
			if (dict & 1) {
				values = dict + 1;
				dict = 0;
			}
		} else if (!dict && L->flag_inline_values && (flags & (uint64_t)L->flag_inline_values)) {
			uint8_t vh[8];

			if (basicsize < 16 || basicsize > 4096)
				return -EINVAL;
			values = obj + (uint64_t)basicsize;
			if ((rc = rd(py, values, vh, sizeof(vh))))
				return rc;
			if (!vh[L->dict_values_valid])
				return -ENOENT;
			capacity = vh[L->dict_values_capacity];
		}
		if (dict)
			return read_dict(py, dict, d);
		if (!values)
			return -ENOENT;
		return read_keys(py, keys, values + (uint64_t)(L->dict_values_values > 0 ? L->dict_values_values : 0),
				 capacity, d);
	}
	if (dictoffset > 0 && dictoffset < 4096) {
		uint64_t dict;

		if ((rc = rd(py, obj + (uint64_t)dictoffset, &dict, 8)))
			return rc;
		return dict ? read_dict(py, dict, d) : -ENOENT;
	}
	return -ENOENT;
}

static int cmp_named(const void *a, const void *b)
{
	const struct named *x = a, *y = b;

	return x->ident < y->ident ? -1 : x->ident > y->ident;
}

/* ---- every Thread of _active, in a few batched reads ---- */

/* What a refresh knows of a Thread (sub)class. */
struct tinfo {
	uint64_t type, flags, keys; /* keys: the shared keys of its instances (ht_cached_keys) */
	int64_t basicsize, dictoffset;
	int64_t idx;                /* index of "_name" in keys, -1 = not there */
};

#define MAX_TYPES 8
#define WIN_BACK 32  /* an object's window starts this far before it (managed dict words) ... */
#define WIN 96       /* ... and is this long (the ≤3.10 dict pointer at tp_dictoffset, 16 for Thread) */
#define STR_READ 192 /* bytes read of a name's str: its head and ~100 ASCII characters */

struct pending {
	uint64_t ident, obj, slot, str;
	int type;                 /* in types[], -1 = none */
	int vaux;                 /* the vec of stage 2, -1 */
	uint8_t lng[64], win[WIN], aux[64], strhd[STR_READ];
	uint8_t slotv[8];
};

static void add_vec(struct prs_py_names *nm, size_t *nv, uint64_t addr, void *buf, size_t len)
{
	nm->svecs[*nv].addr = plausible_ptr(addr & ~7ull) ? addr : 0; /* 0: the read fails */
	nm->svecs[*nv].buf = buf;
	nm->svecs[*nv].len = len;
	nm->svecs[*nv].res = 0;
	(*nv)++;
}

/* Reads the vecs added in one readv (one with a bad address reads page 0, and fails). */
static int run_vecs(struct prs_py *py, size_t nv)
{
	if (!nv)
		return 0;
	py->st.syscalls += (nv + 1023) / 1024;
	return py->mr.readv(py->mr.ctx, py->names->svecs, nv) < 0 ? -ESRCH : 0;
}

static void type_info(struct prs_py *py, struct tinfo *ti)
{
	const struct prs_py_layout *L = &py->L;
	uint8_t t[1024];
	int32_t tlen = L->ht_cached_keys + 8;
	struct dict d;
	uint32_t idx;

	ti->idx = -1;
	ti->flags = 0;
	ti->keys = 0;
	if (tlen > (int32_t)sizeof(t) || rd(py, ti->type, t, (size_t)tlen))
		return;
	ti->flags = u64_at(t, L->tp_flags);
	memcpy(&ti->basicsize, t + L->tp_basicsize, 8);
	memcpy(&ti->dictoffset, t + L->tp_dictoffset, 8);
	ti->keys = u64_at(t, L->ht_cached_keys);
	if (plausible_ptr(ti->keys) && read_keys(py, ti->keys, 0, 0, &d) == 0 &&
	    dict_find(py, &d, "_name", true, NULL, &idx) == 0)
		ti->idx = idx;
}

/*
 * Names the threads of _active (nact pairs in nm->act_key/act_val) into out. The common case
 * reads no dict at all: a Thread's attributes are in a values array laid out by its class's
 * shared keys, so "_name" is at the same index in every instance. The reads go in stages, each
 * one readv over every thread: (1) the ident ints and the objects' windows, (2) the ≤3.10
 * instance dicts' heads or the 3.13 inline values' headers, (3) the _name slots, (4) the name
 * strings. A thread whose attributes are elsewhere (a dict of its own) is read on its own.
 */
static int read_names(struct prs_py *py, struct prs_profile *p, unsigned nact, struct named *out, unsigned *n)
{
	const struct prs_py_layout *L = &py->L;
	struct prs_py_names *nm = py->names;
	struct pending *pd = nm->pend;
	struct tinfo types[MAX_TYPES];
	unsigned ntypes = 0;
	uint64_t vv = L->dict_values_values > 0 ? (uint64_t)L->dict_values_values : 0;
	size_t nv = 0;
	int rc;

	if (LONG_HEAD(L) > sizeof(pd->lng) || (size_t)L->dict_values + 8 > sizeof(pd->aux) ||
	    (size_t)L->str_compact_size >= STR_READ || grow(nm, (size_t)nact, L))
		return -ENOMEM;
	/* (1) */
	for (unsigned i = 0; i < nact; i++) {
		add_vec(nm, &nv, nm->act_key[i], pd[i].lng, LONG_HEAD(L));
		add_vec(nm, &nv, nm->act_val[i] - WIN_BACK, pd[i].win, WIN);
	}
	if ((rc = run_vecs(py, nv)))
		return rc;
	for (unsigned i = 0; i < nact; i++) {
		uint64_t type;
		unsigned t;

		pd[i].obj = nm->act_val[i];
		pd[i].type = -1;
		pd[i].slot = pd[i].str = 0;
		pd[i].vaux = -1;
		if (nm->svecs[2 * i].res || nm->svecs[2 * i + 1].res || decode_long(py, pd[i].lng, &pd[i].ident))
			continue;
		type = u64_at(pd[i].win, WIN_BACK + L->ob_type);
		if (!plausible_ptr(type))
			continue;
		for (t = 0; t < ntypes && types[t].type != type; t++)
			;
		if (t == ntypes && ntypes < MAX_TYPES) {
			types[ntypes].type = type;
			type_info(py, &types[ntypes++]);
		}
		pd[i].type = t < ntypes ? (int)t : -1;
	}
	/* (2) */
	nv = 0;
	for (unsigned i = 0; i < nact; i++) {
		const struct tinfo *ti = pd[i].type >= 0 ? &types[pd[i].type] : NULL;
		const uint8_t *w = pd[i].win + WIN_BACK;

		if (!ti || ti->idx < 0)
			continue;
		if (L->managed_dict && L->flag_managed_dict && (ti->flags & (uint64_t)L->flag_managed_dict)) {
			uint64_t dict = u64_at(w - L->managed_dict_back, 0);

			if (L->managed_dict == 1 && !dict) /* 3.11: the values pointer is the word before */
				pd[i].slot = u64_at(w - L->managed_dict_back - 8, 0);
			else if (L->managed_dict == 2 && (dict & 1)) /* 3.12: values - 1, tagged */
				pd[i].slot = dict + 1;
			else if (L->managed_dict == 3 && !dict && (ti->flags & (uint64_t)L->flag_inline_values) &&
				 ti->basicsize >= 16 && ti->basicsize <= 4096) { /* 3.13: inline values */
				pd[i].slot = pd[i].obj + (uint64_t)ti->basicsize;
				pd[i].vaux = (int)nv;
				add_vec(nm, &nv, pd[i].slot, pd[i].aux, 8);
			}
			if (pd[i].slot)
				pd[i].slot += vv + 8 * (uint64_t)ti->idx;
		} else if (ti->dictoffset >= 8 && ti->dictoffset <= WIN - WIN_BACK - 8) {
			uint64_t dict = u64_at(w, (int32_t)ti->dictoffset);

			if (plausible_ptr(dict)) {
				pd[i].vaux = (int)nv;
				add_vec(nm, &nv, dict, pd[i].aux, (size_t)L->dict_values + 8);
			}
		}
	}
	if ((rc = run_vecs(py, nv)))
		return rc;
	/* (3) */
	nv = 0;
	for (unsigned i = 0; i < nact; i++) {
		const struct tinfo *ti = pd[i].type >= 0 ? &types[pd[i].type] : NULL;
		const uint8_t *a = pd[i].aux;

		if (pd[i].vaux >= 0) {
			if (nm->svecs[pd[i].vaux].res) {
				pd[i].slot = 0;
			} else if (L->managed_dict == 3 && pd[i].slot) { /* PyDictValues header */
				if (!a[L->dict_values_valid] || ti->idx >= a[L->dict_values_capacity])
					pd[i].slot = 0;
			} else if ((!py->dict_type || u64_at(a, L->ob_type) == py->dict_type) &&
				   u64_at(a, L->dict_keys) == ti->keys && u64_at(a, L->dict_values)) {
				/* a split dict sharing its class's keys: values[] is indexed like them */
				pd[i].slot = u64_at(a, L->dict_values) + vv + 8 * (uint64_t)ti->idx;
			}
		}
		pd[i].vaux = -1;
		if (pd[i].slot) {
			pd[i].vaux = (int)nv;
			add_vec(nm, &nv, pd[i].slot, pd[i].slotv, 8);
		}
	}
	if ((rc = run_vecs(py, nv)))
		return rc;
	for (unsigned i = 0; i < nact; i++) {
		struct dict d;

		if (pd[i].vaux >= 0 && !nm->svecs[pd[i].vaux].res)
			pd[i].str = u64_at(pd[i].slotv, 0);
		/* attributes in a dict of its own (or anything unusual): the general walk */
		if (!pd[i].str && pd[i].type >= 0 &&
		    (read_instance_dict(py, pd[i].obj, &d) || dict_find(py, &d, "_name", false, &pd[i].str, NULL)))
			pd[i].str = 0;
	}
	/* (4) */
	nv = 0;
	for (unsigned i = 0; i < nact; i++) {
		pd[i].vaux = -1;
		if (plausible_ptr(pd[i].str)) {
			pd[i].vaux = (int)nv;
			add_vec(nm, &nv, pd[i].str, pd[i].strhd, STR_READ);
		}
	}
	if ((rc = run_vecs(py, nv)))
		return rc;
	for (unsigned i = 0; i < nact && *n < MAX_NAMED; i++) {
		char name[4 * PRS_MAX_NAME + 1];
		uint8_t *big = NULL;
		size_t need = 0;
		uint32_t sid;
		int len = -EINVAL;

		if (pd[i].vaux < 0)
			continue;
		if (nm->svecs[pd[i].vaux].res) {
			/* near the end of a mapping: the smallest head, then exactly what it says */
			len = rd(py, pd[i].str, pd[i].strhd, (size_t)L->str_ascii_size) ? -EFAULT
				: prs_py_str_decode(L, py->str_type, pd[i].strhd, (size_t)L->str_ascii_size, name, sizeof(name), &need);
		} else {
			len = prs_py_str_decode(L, py->str_type, pd[i].strhd, STR_READ, name, sizeof(name), &need);
		}
		if (len == -E2BIG && need <= (size_t)L->str_compact_size + 4 * PRS_MAX_NAME &&
		    (big = malloc(need)) && rd(py, pd[i].str, big, need) == 0)
			len = prs_py_str_decode(L, py->str_type, big, need, name, sizeof(name), &need);
		free(big);
		if (len < 0)
			continue;
		sid = prs_profile_string(p, name, (size_t)len);
		if (sid == UINT32_MAX)
			return -ENOMEM;
		out[*n].ident = pd[i].ident;
		out[(*n)++].name = sid;
	}
	return 0;
}

/* ---- finding _active ---- */

/*
 * Is the cached path to _active still what it was: the module object still a module with the same
 * dict, that dict's keys object the same and its "_active" entry holding the same key and value,
 * _active still a dict? One readv. The entry catches `threading._active = {}` (the value rebound in
 * place, the old dict maybe alive and still valid) and a deletion (the value cleared); the keys
 * pointer catches a resize (the entries moved to a new keys object; the old one, freed, may keep
 * its bytes). Full lookup otherwise, or when the types are unknown.
 */
static bool chain_valid(struct prs_py *py, const struct chain *c)
{
	const struct prs_py_layout *L = &py->L;
	struct prs_py_names *nm = py->names;
	uint8_t mh[64], dh[64], ah[64];
	uint64_t kv[2];
	size_t nv = 0;

	if (!c->active || !c->slot || !py->module_type || !py->dict_type || (size_t)L->module_dict + 8 > sizeof(mh) ||
	    (size_t)L->dict_keys + 8 > sizeof(dh))
		return false;
	add_vec(nm, &nv, c->mod, mh, (size_t)L->module_dict + 8);
	add_vec(nm, &nv, c->mdict, dh, (size_t)L->dict_keys + 8);
	add_vec(nm, &nv, c->slot - 8, kv, sizeof(kv));
	add_vec(nm, &nv, c->active, ah, (size_t)L->ob_type + 8);
	if (run_vecs(py, nv))
		return false;
	for (size_t i = 0; i < nv; i++)
		if (nm->svecs[i].res)
			return false;
	return u64_at(mh, L->ob_type) == py->module_type && u64_at(mh, L->module_dict) == c->mdict &&
	       u64_at(dh, L->ob_type) == py->dict_type && u64_at(dh, L->dict_keys) == c->mkeys &&
	       kv[0] == c->key && kv[1] == c->active && u64_at(ah, L->ob_type) == py->dict_type;
}

/* sys.modules["threading"].__dict__["_active"] of one interpreter, into c. */
static int find_active(struct prs_py *py, uint64_t interp, struct chain *c)
{
	const struct prs_py_layout *L = &py->L;
	struct dict d;
	uint64_t modules, mod, mdict, active, type;
	uint32_t idx;
	int rc;

	c->active = 0;
	if ((rc = rd(py, interp + (uint64_t)L->interp_modules, &modules, 8)) || (rc = read_dict(py, modules, &d)) ||
	    (rc = dict_find(py, &d, "threading", false, &mod, NULL)))
		return rc;
	if ((rc = rd(py, mod + (uint64_t)L->ob_type, &type, 8)))
		return rc;
	if (py->module_type && type != py->module_type)
		return -EINVAL;
	if ((rc = rd(py, mod + (uint64_t)L->module_dict, &mdict, 8)) || (rc = read_dict(py, mdict, &d)) ||
	    (rc = dict_find(py, &d, "_active", false, &active, &idx)))
		return rc;
	c->interp = interp;
	c->mod = mod;
	c->mdict = mdict;
	c->active = active;
	/* a module's dict is combined (its values in its entries); were it split, no slot: the chain
	 * is then looked up on every refresh */
	c->mkeys = d.keys;
	c->key = d.split ? 0 : entry_key(py->names, &d, idx);
	c->slot = d.split ? 0 : d.ent + (uint64_t)idx * d.esz + d.voff;
	return 0;
}

/* Adds the names of one interpreter's threading._active to out (n of them so far). */
static int read_interp(struct prs_py *py, struct prs_profile *p, uint64_t interp, unsigned slot,
		       struct named *out, unsigned *n)
{
	struct prs_py_names *nm = py->names;
	struct chain *c = &nm->chain[slot];
	struct dict d;
	unsigned nact = 0;
	int rc;

	if ((c->interp != interp || !chain_valid(py, c)) && (rc = find_active(py, interp, c)))
		return rc;
	if ((rc = read_dict(py, c->active, &d))) {
		c->active = 0;
		return rc;
	}
	for (uint32_t i = 0; i < d.n && nact < MAX_NAMED; i++) {
		uint64_t k = entry_key(nm, &d, i), v = entry_value(nm, &d, i);

		if (plausible_ptr(k) && plausible_ptr(v)) {
			nm->act_key[nact] = k;
			nm->act_val[nact++] = v;
		}
	}
	return read_names(py, p, nact, out, n);
}

/* The cache's entry of ident, or NULL. */
static const struct named *find_named(const struct prs_py_names *nm, uint64_t ident)
{
	size_t lo = 0, hi = nm->n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (nm->e[mid].ident == ident)
			return &nm->e[mid];
		if (nm->e[mid].ident < ident)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

static bool listed(const uint64_t *v, unsigned n, uint64_t ident)
{
	for (unsigned i = 0; i < n; i++)
		if (v[i] == ident)
			return true;
	return false;
}

int prs_py_read_thread_names(struct prs_py *py, struct prs_profile *p, uint64_t now_ns)
{
	const struct prs_py_layout *L = &py->L;
	struct prs_py_names *nm = py->names;
	uint64_t interp = 0, seen[MAX_INTERPS];
	unsigned n = 0, ninterp = 0, kept;
	int rc = 0, found = -ENOENT;

	if (L->interp_modules < 0 || L->dk_nentries < 0 || L->dict_entry_size <= 0)
		return -ENOTSUP;
	if (!nm && !(nm = py->names = calloc(1, sizeof(*nm))))
		return -ENOMEM;
	if (!nm->pend && !(nm->pend = calloc(MAX_NAMED, sizeof(*nm->pend))))
		return -ENOMEM;
	if (!nm->svecs && !(nm->svecs = calloc(2 * MAX_NAMED, sizeof(*nm->svecs))))
		return -ENOMEM;
	if (!nm->wanted)
		nm->nunknown = 0; /* the periodic refresh: ask again for every ident */
	nm->last_ns = now_ns ? now_ns : 1;
	nm->wanted = false;
	if (grow(nm, 256, L))
		return -ENOMEM;
	if (py->walk.runtime)
		rc = rd(py, py->walk.runtime + (uint64_t)L->runtime_interp_head, &interp, 8);
	else if (py->walk.interp_head_var)
		rc = rd(py, py->walk.interp_head_var, &interp, 8);
	while (rc == 0 && interp && ninterp < MAX_INTERPS) {
		for (unsigned i = 0; i < ninterp; i++)
			if (seen[i] == interp)
				interp = 0; /* a cycle */
		if (!interp)
			break;
		seen[ninterp++] = interp;
		rc = read_interp(py, p, interp, ninterp - 1, nm->next, &n);
		if (rc == 0)
			found = 0;
		else if (rc == -ENOMEM || rc == -ESRCH)
			break;
		else if (found == -ENOENT && rc != -ENOENT)
			found = -EINVAL; /* an object failed validation or could not be read */
		rc = rd(py, interp + (uint64_t)L->interp_next, &interp, 8);
	}
	if (rc == -ENOMEM || rc == -ESRCH)
		return rc;
	if (found)
		return found;
	qsort(nm->next, n, sizeof(nm->next[0]), cmp_named);
	memcpy(nm->e, nm->next, n * sizeof(nm->next[0]));
	nm->n = n;
	nm->owner = p;
	kept = 0;
	for (unsigned i = 0; i < nm->nasked; i++) {
		if (find_named(nm, nm->asked[i]))
			continue;
		if (nm->last_ns - nm->asked_at[i] < UNKNOWN_AFTER_NS) {
			nm->asked_at[kept] = nm->asked_at[i]; /* asked again at its next miss */
			nm->asked[kept++] = nm->asked[i];
		} else if (nm->nunknown < MAX_ASKED) {
			nm->unknown[nm->nunknown++] = nm->asked[i];
		}
	}
	nm->nasked = kept;
	return (int)n;
}

uint32_t prs_py_thread_name(struct prs_py *py, const struct prs_profile *p, uint64_t thread_id)
{
	struct prs_py_names *nm = py->names;
	const struct named *e;

	if (!nm || nm->owner != p) {
		if (nm)
			nm->wanted = true;
		return 0;
	}
	if ((e = find_named(nm, thread_id)) != NULL)
		return e->name;
	if (listed(nm->unknown, nm->nunknown, thread_id))
		return 0;
	if (!listed(nm->asked, nm->nasked, thread_id) && nm->nasked < MAX_ASKED) {
		nm->asked_at[nm->nasked] = nm->last_ns;
		nm->asked[nm->nasked++] = thread_id;
	}
	nm->wanted = true;
	return 0;
}

bool prs_py_names_due(const struct prs_py *py, uint64_t now_ns)
{
	const struct prs_py_names *nm = py->names;

	uint64_t since;

	if (!nm || !nm->last_ns)
		return true;
	since = now_ns - nm->last_ns;
	if (!nm->wanted)
		return since >= REFRESH_PERIOD_NS;
	if (since >= WANTED_PERIOD_NS)
		return true;
	return nm->budget_at && since >= WANTED_MIN_NS &&
	       nm->budget_ns + (int64_t)((now_ns - nm->budget_at) / BUDGET_SHARE) > 0;
}

void prs_py_names_took(struct prs_py *py, uint64_t cost_ns)
{
	struct prs_py_names *nm = py->names;
	int64_t b;

	if (!nm || !nm->last_ns)
		return;
	if (!nm->budget_at) {
		nm->budget_at = nm->last_ns;
		nm->budget_ns = BUDGET_MAX_NS;
	}
	b = nm->budget_ns + (int64_t)((nm->last_ns - nm->budget_at) / BUDGET_SHARE);
	nm->budget_ns = (b < BUDGET_MAX_NS ? b : BUDGET_MAX_NS) -
			(int64_t)(cost_ns < BUDGET_MAX_NS * 100ull ? cost_ns : BUDGET_MAX_NS * 100ull);
	nm->budget_at = nm->last_ns;
}

void prs_py_names_free(struct prs_py *py)
{
	struct prs_py_names *nm = py->names;

	if (!nm)
		return;
	free(nm->ent);
	free(nm->vals);
	free(nm->keyhd);
	free(nm->vecs);
	free(nm->vidx);
	free(nm->pend);
	free(nm->svecs);
	free(nm);
	py->names = NULL;
}
