/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the thread-name reader (src/python/threadnames.c) on synthetic memory images, for
 * every generated layout row (3.6-3.13): the test lays out sys.modules, the threading module, its
 * _active dict {ident: Thread} and each Thread's attributes where that version keeps them (<=3.10
 * split dict at tp_dictoffset, 3.11 values pointer, 3.12 tagged values, 3.13 inline values; or a
 * combined dict of the instance's own), every offset from the layout row, and serves the buffer
 * through a memreader (py_image.h: -EFAULT outside it), so the truth is what the test wrote.
 * Covers ASCII, UCS-2, UCS-4 and 300-character names, multi-digit idents, renames, a replaced
 * module dict, the cached path to _active (and its memreader calls), a rebound _active, 3.13
 * invalid inline values, hostile objects, 1030 threads and prs_py_names_due.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pyrsprof/profile.h"
#include "python/python-internal.h"
#include "py_image.h"

#include "util/banned.h"

#define BASE 0x10000000ull
#define SIZE (4u << 20)
#define UNMAPPED 0x7e0000001000ull /* a plausible pointer outside the image */
#define MS 1000000ull

static const struct prs_py_layout *L;
static struct prs_py *py;
static struct prs_profile *prof;
static uint64_t t_str, t_dict, t_long, t_module, none;

/* ---- objects (strs: py_image.c) ---- */

/* An int of |v| with sign < 0 negative: 30-bit digits, ob_size (<= 3.11) or lv_tag (3.12+). */
static uint64_t mklong(uint64_t v, int sign)
{
	uint32_t d[4];
	unsigned nd = 0;
	uint64_t a = img_alloc((size_t)L->long_digit + 16);

	for (; v; v >>= L->long_shift)
		d[nd++] = (uint32_t)(v & ((1u << L->long_shift) - 1));
	img_put64(a + L->ob_type, t_long);
	if (L->long_tag >= 0)
		img_put64(a + L->long_tag, (uint64_t)nd << 3 | (sign < 0 ? 2 : nd == 0 ? 1 : 0));
	else
		img_put64(a + L->long_size, sign < 0 ? -(uint64_t)nd : nd);
	for (unsigned i = 0; i < nd; i++)
		img_put32(a + L->long_digit + 4 * i, d[i]);
	return a;
}

enum { GENERAL = 0, UNICODE = 1, SPLIT = 2 }; /* 3.11+ dk_kind (<= 3.10: always {hash, key, value}) */

struct kv {
	uint64_t key, value;
};

/* Entries of the last keys object made: slot of entry i's value = last_ent + i * last_esz + last_voff. */
static uint64_t last_ent;
static uint32_t last_esz, last_voff;

static uint64_t mkkeys(int kind, const struct kv *e, unsigned n)
{
	uint64_t size = 8, idx_bytes, k;
	unsigned log2 = 3, log2ib = 3, width, koff;

	while (n > size * 2 / 3) {
		size *= 2;
		log2++;
	}
	if (L->dk_size >= 0) {
		width = size <= 0xff ? 1 : size <= 0xffff ? 2 : 4;
		idx_bytes = size * width;
		last_esz = (uint32_t)L->dict_entry_size;
		koff = 8;
	} else {
		log2ib = log2 < 8 ? log2 : log2 + 1;
		width = 1u << (log2ib - log2);
		idx_bytes = 1ull << log2ib;
		last_esz = (uint32_t)(kind == GENERAL ? L->dict_entry_size : L->dict_uentry_size);
		koff = kind == GENERAL ? 8 : 0;
	}
	k = img_alloc((size_t)L->dk_indices + idx_bytes + (size_t)n * last_esz);
	if (L->dk_size >= 0) {
		img_put64(k + L->dk_size, size);
	} else {
		img_put8(k + L->dk_log2_size, (uint8_t)log2);
		img_put8(k + L->dk_log2_index_bytes, (uint8_t)log2ib);
		img_put8(k + L->dk_kind, (uint8_t)kind);
	}
	img_put64(k + L->dk_nentries, n);
	memset(img_at(k + L->dk_indices), 0xff, idx_bytes);
	for (unsigned i = 0; i < n; i++)
		memcpy(img_at(k + L->dk_indices + (uint64_t)i * width), &i, width);
	last_ent = k + L->dk_indices + idx_bytes;
	last_voff = koff + 8;
	for (unsigned i = 0; i < n; i++) {
		uint64_t en = last_ent + (uint64_t)i * last_esz;

		if (koff)
			img_put64(en, e[i].key ^ 0x5bd1e995u); /* me_hash */
		img_put64(en + koff, e[i].key);
		img_put64(en + koff + 8, e[i].value);
	}
	return k;
}

static uint64_t mkdict(uint64_t keys, uint64_t values)
{
	uint64_t d = img_alloc((size_t)L->dict_values + 16);

	img_put64(d + L->ob_type, t_dict);
	img_put64(d + L->dict_keys, keys);
	img_put64(d + L->dict_values, values);
	return d;
}

static uint64_t mkdict_kv(int kind, const struct kv *e, unsigned n)
{
	return mkdict(mkkeys(kind, e, n), 0);
}

static uint64_t mkmodule(uint64_t mdict)
{
	uint64_t m = img_alloc((size_t)L->module_dict + 32);

	img_put64(m + L->ob_type, t_module);
	img_put64(m + L->module_dict, mdict);
	return m;
}

/* Interned key strings of one world. */
static struct {
	const char *s;
	uint64_t a;
} keystr[16];
static unsigned nkeystr;

static uint64_t key(const char *s)
{
	for (unsigned i = 0; i < nkeystr; i++)
		if (!strcmp(keystr[i].s, s))
			return keystr[i].a;
	cr_assert(nkeystr < 16);
	keystr[nkeystr].s = s;
	return keystr[nkeystr++].a = img_mkstr(s);
}

/* ---- Thread classes and instances ---- */

struct cls {
	uint64_t type, keys; /* keys: its shared keys (ht_cached_keys) */
	unsigned nkeys, idx; /* idx: "_name" in them */
	int64_t basic, dictoff;
};

static void mkcls(struct cls *c, const char *const *names, unsigned n)
{
	struct kv e[16];
	uint64_t flags = 0;

	cr_assert(n <= 16);
	for (unsigned i = 0; i < n; i++) {
		e[i].key = key(names[i]);
		e[i].value = 0;
		if (!strcmp(names[i], "_name"))
			c->idx = i;
	}
	c->nkeys = n;
	c->keys = mkkeys(SPLIT, e, n);
	if (!L->managed_dict) {
		c->basic = 32;
		c->dictoff = 16;
	} else {
		flags = (uint64_t)L->flag_managed_dict | (uint64_t)L->flag_inline_values;
		c->basic = L->managed_dict == 3 ? 16 : 24;
		c->dictoff = -1;
	}
	c->type = img_alloc((size_t)L->ht_cached_keys + 64);
	img_put64(c->type + L->tp_flags, flags | 1ull << 9 /* heap type */);
	img_put64(c->type + L->tp_basicsize, (uint64_t)c->basic);
	img_put64(c->type + L->tp_dictoffset, (uint64_t)c->dictoff);
	img_put64(c->type + L->ht_cached_keys, c->keys);
}

static uint64_t vv(void) { return L->dict_values_values > 0 ? (uint64_t)L->dict_values_values : 0; }

/* An instance with room for its managed-dict words before it and its inline values after it. */
static uint64_t mkobj(const struct cls *c)
{
	size_t sz = (size_t)c->basic + vv() + 8 * c->nkeys + 64;
	uint64_t o = img_alloc(32 + sz) + 32;

	img_put64(o + L->ob_type, c->type);
	return o;
}

/* Attributes in the common place of the version, keyed by the class's shared keys. Returns the
 * address of the _name pointer. */
static uint64_t set_shared(uint64_t obj, const struct cls *c, uint64_t name)
{
	uint64_t v, back = (uint64_t)L->managed_dict_back;

	if (!L->managed_dict) {
		v = img_alloc(8 * c->nkeys);
		img_put64(obj + (uint64_t)c->dictoff, mkdict(c->keys, v));
	} else if (L->managed_dict == 3) {
		v = obj + (uint64_t)c->basic;
		img_put8(v + L->dict_values_capacity, (uint8_t)c->nkeys);
		img_put8(v + L->dict_values_valid, 1);
		img_put64(obj - back, 0);
	} else {
		v = img_alloc(vv() + 8 * c->nkeys);
		if (L->managed_dict == 1) {
			img_put64(obj - back - 8, v);
			img_put64(obj - back, 0);
		} else {
			img_put64(obj - back, v - 1);
		}
	}
	for (unsigned i = 0; i < c->nkeys; i++)
		img_put64(v + vv() + 8 * i, i == c->idx ? name : none);
	return v + vv() + 8 * c->idx;
}

/* Attributes in a combined dict of the instance's own (3.11+: the materialized managed dict), with
 * a deleted entry first. Returns the address of the _name pointer. */
static uint64_t own_dict;
static uint64_t set_own(uint64_t obj, const struct cls *c, uint64_t name)
{
	struct kv e[4] = { { 0, 0 }, { key("_target"), none }, { key("_name"), name }, { key("_ident"), none } };
	uint64_t back = (uint64_t)L->managed_dict_back, slot;

	own_dict = mkdict_kv(UNICODE, e, 4);
	slot = last_ent + 2 * last_esz + last_voff;
	if (!L->managed_dict) {
		img_put64(obj + (uint64_t)c->dictoff, own_dict);
	} else {
		img_put64(obj - back, own_dict);
		if (L->managed_dict == 1)
			img_put64(obj - back - 8, 0);
		if (L->managed_dict == 3) {
			img_put8(obj + (uint64_t)c->basic + L->dict_values_capacity, (uint8_t)c->nkeys);
			img_put8(obj + (uint64_t)c->basic + L->dict_values_valid, 0);
		}
	}
	return slot;
}

/* ---- the world: sys.modules, threading, _active and three threads ---- */

static const char *const THREAD_KEYS[] = { "_target", "_args", "_kwargs", "_name", "_daemonic", "_ident" };
static const char *const MAIN_KEYS[] = { "_name", "_target", "_ident", "_tstate_lock", "_started" };
static const uint32_t WORKER[] = { 'w', 0xf6, 'r', 'k', 'e', 'r', '-', 0x540d }; /* "wörker-名" */
#define WORKER_UTF8 "w\xc3\xb6rker-\xe5\x90\x8d"

struct thr {
	uint64_t ident, obj, slot, name; /* slot: where its _name pointer is */
	const char *expect;
};

static struct {
	unsigned minor;
	uint64_t interp, modules, threading, mdict, active, active_keys;
	uint64_t mslot; /* where the last md_dict made keeps its "_active" value pointer */
	uint64_t aent; /* _active's entries; entry i's key at aent + i * aesz + 8, value + 16 */
	uint32_t aesz;
	uint64_t own;  /* t[2]'s own dict */
	struct cls thread, main;
	struct thr t[3]; /* main, A (common place), B (own dict) */
	char longname[301];
} W;

static const uint64_t IDENT[3] = { 0x7f1234567740ull, 0x7f1233ffe6c0ull, 0xfedcba9876543210ull };

static uint64_t mkactive(const struct thr *t, unsigned n)
{
	struct kv e[8];
	uint64_t d;

	for (unsigned i = 0; i < n; i++) {
		e[i].key = mklong(t[i].ident, 1);
		e[i].value = t[i].obj;
	}
	W.active_keys = mkkeys(GENERAL, e, n);
	d = mkdict(W.active_keys, 0);
	W.aent = last_ent;
	W.aesz = last_esz;
	return d;
}

static uint64_t mkmdict(uint64_t active)
{
	struct kv e[4] = { { key("__name__"), img_mkstr("threading") }, { key("_limbo"), mkdict_kv(GENERAL, NULL, 0) },
			   { key("_active"), active }, { key("_main_thread"), W.t[0].obj } };
	uint64_t d = mkdict_kv(UNICODE, e, 4);

	W.mslot = last_ent + 2 * last_esz + last_voff;
	return d;
}

static void world_open(unsigned minor)
{
	struct prs_memreader mr = img_reader();
	struct kv mods[5];
	uint64_t empty;

	L = prs_py_layout_find(3, minor);
	cr_assert(L, "no generated 3.%u row", minor);
	img_clear();
	memset(&W, 0, sizeof(W));
	nkeystr = 0;
	W.minor = minor;
	t_str = img_alloc(1024);
	img.L = L;
	img.str_type = t_str;
	t_dict = img_alloc(1024);
	t_long = img_alloc(1024);
	t_module = img_alloc(1024);
	none = img_alloc(32);
	mkcls(&W.thread, THREAD_KEYS, 6);
	mkcls(&W.main, MAIN_KEYS, 5);
	for (unsigned i = 0; i < 3; i++) {
		W.t[i].ident = IDENT[i];
		W.t[i].obj = mkobj(i ? &W.thread : &W.main);
	}
	memset(W.longname, 0, sizeof(W.longname));
	for (unsigned i = 0; i < 300; i++)
		W.longname[i] = i < 7 ? "worker-"[i] : (char)('a' + i % 26);
	W.t[0].expect = "MainThread";
	W.t[1].expect = WORKER_UTF8;
	W.t[2].expect = W.longname;
	W.t[0].name = img_mkstr("MainThread");
	W.t[1].name = img_mkstr_cp(WORKER, 8, 2, false);
	W.t[2].name = img_mkstr(W.longname);
	W.t[0].slot = set_shared(W.t[0].obj, &W.main, W.t[0].name);
	W.t[1].slot = set_shared(W.t[1].obj, &W.thread, W.t[1].name);
	W.t[2].slot = set_own(W.t[2].obj, &W.thread, W.t[2].name);
	W.own = own_dict;
	W.active = mkactive(W.t, 3);
	W.mdict = mkmdict(W.active);
	W.threading = mkmodule(W.mdict);
	empty = mkdict_kv(UNICODE, NULL, 0);
	mods[0] = (struct kv){ key("sys"), mkmodule(empty) };
	mods[1] = (struct kv){ key("builtins"), mkmodule(empty) };
	mods[2] = (struct kv){ img_mkstr("threading"), 0 }; /* deleted */
	mods[3] = (struct kv){ key("threading"), W.threading };
	mods[4] = (struct kv){ key("_thread"), mkmodule(empty) };
	W.modules = mkdict_kv(UNICODE, mods, 5);
	W.interp = img_alloc((size_t)(L->interp_modules > L->interp_next ? L->interp_modules : L->interp_next) + 64);
	img_put64(W.interp + L->interp_modules, W.modules);
	cr_assert_eq(prs_py_new_raw(L, &mr, L->version_hex, &py), 0);
	if (L->runtime_interp_head >= 0) {
		py->walk.runtime = img_alloc((size_t)L->runtime_interp_head + 64);
		img_put64(py->walk.runtime + L->runtime_interp_head, W.interp);
	} else {
		py->walk.interp_head_var = img_alloc(16);
		img_put64(py->walk.interp_head_var, W.interp);
	}
	py->str_type = t_str;
	py->dict_type = t_dict;
	py->long_type = t_long;
	py->module_type = t_module;
	prof = prs_profile_new();
	cr_assert(prof);
}

static void world_close(void)
{
	prs_py_free(py);
	prs_profile_free(prof);
	py = NULL;
	prof = NULL;
}

static void setup(void)
{
	img_init(BASE, SIZE);
}

static void teardown(void)
{
	if (py)
		world_close();
	img_release();
}

static int refresh(uint64_t now) { return prs_py_read_thread_names(py, prof, now); }

static const char *name_of(uint64_t ident)
{
	uint32_t id = prs_py_thread_name(py, prof, ident);

	return id ? prof->strings[id] : "(none)";
}

#define assert_name(ident, s) \
	cr_assert_str_eq(name_of(ident), (s), "3.%u ident %#llx", W.minor, (unsigned long long)(ident))

/* Exactly the threads in mask (bit i: W.t[i]) have their names. */
static void assert_named(unsigned mask, const char *what)
{
	for (unsigned i = 0; i < 3; i++) {
		uint32_t id = prs_py_thread_name(py, prof, W.t[i].ident);

		if (mask & 1u << i)
			cr_assert(id && !strcmp(prof->strings[id], W.t[i].expect), "3.%u %s: thread %u: got %s",
				  W.minor, what, i, id ? prof->strings[id] : "(none)");
		else
			cr_assert_eq(id, 0, "3.%u %s: thread %u named %s", W.minor, what, i, prof->strings[id]);
	}
}

static uint64_t active_key(unsigned i) { return W.aent + (uint64_t)i * W.aesz + 8; }

/* A new thread object named s with ident id, in the common place of its version. */
static struct thr mkthread(uint64_t id, const char *s)
{
	struct thr t = { .ident = id, .expect = s };

	t.obj = mkobj(&W.thread);
	t.name = img_mkstr(s);
	t.slot = set_shared(t.obj, &W.thread, t.name);
	return t;
}

TestSuite(python_names, .init = setup, .fini = teardown);

/* ---- 1. every version ---- */

Test(python_names, every_version)
{
	for (unsigned minor = 6; minor <= 13; minor++) {
		struct prs_profile *other;

		world_open(minor);
		cr_assert_eq(refresh(1), 3, "3.%u", minor);
		assert_named(7, "fresh");
		cr_assert_eq(prs_py_thread_name(py, prof, 0x7f0000000001ull), 0);
		cr_assert_eq(prs_py_thread_name(py, prof, 0), 0);
		other = prs_profile_new();
		cr_assert_eq(prs_py_thread_name(py, other, W.t[0].ident), 0, "another profile's ids");
		prs_profile_free(other);
		/* a second read the same (cached path to _active) */
		cr_assert_eq(refresh(2), 3);
		assert_named(7, "again");
		world_close();
	}
}

/* 3.11+: a managed dict materialized as a split dict over the class's shared keys and values. */
Test(python_names, materialized_split_dict)
{
	for (unsigned minor = 11; minor <= 13; minor++) {
		uint64_t o, values, back;

		world_open(minor);
		o = W.t[1].obj;
		back = (uint64_t)L->managed_dict_back;
		values = W.t[1].slot - vv() - 8 * W.thread.idx; /* the PyDictValues */
		if (L->managed_dict == 1)
			img_put64(o - back - 8, 0);
		img_put64(o - back, mkdict(W.thread.keys, values));
		cr_assert_eq(refresh(1), 3, "3.%u", minor);
		assert_named(7, "split dict");
		world_close();
	}
}

/* ---- 2. renames, a new module dict, the cached chain ---- */

Test(python_names, rename_and_new_module_dict)
{
	static const uint32_t EMOJI[] = { 'e', 'm', 'o', 'j', 'i', '-', 0x1f600 };

	for (unsigned minor = 6; minor <= 13; minor++) {
		struct thr nt[2];
		uint64_t t;

		world_open(minor);
		cr_assert_eq(refresh(1), 3);
		/* the chain to _active is cached: sys.modules is not looked at again while it validates */
		t = t_dict;
		img_put64(W.modules + L->ob_type, t_long);
		cr_assert_eq(refresh(2), 3, "3.%u cached chain", minor);
		img_put64(W.modules + L->ob_type, t);
		/* renames: new str objects in the _name slots (shared values and own dict) */
		img_put64(W.t[1].slot, img_mkstr_cp(EMOJI, 7, 4, false));
		img_put64(W.t[2].slot, img_mkstr("renamed"));
		img_put64(W.t[0].slot, img_mkstr("Main"));
		cr_assert_eq(refresh(3), 3);
		assert_name(W.t[0].ident, "Main");
		assert_name(W.t[1].ident, "emoji-\xf0\x9f\x98\x80");
		assert_name(W.t[2].ident, "renamed");
		/* a new md_dict with a new _active (the old ones stay intact in memory) */
		nt[0] = W.t[0];
		nt[1] = mkthread(0x7f1200001000ull, "late-joiner");
		img_put64(W.threading + L->module_dict, mkmdict(mkactive(nt, 2)));
		cr_assert_eq(refresh(4), 2, "3.%u new md_dict", minor);
		assert_name(W.t[0].ident, "Main");
		assert_name(nt[1].ident, "late-joiner");
		assert_name(W.t[1].ident, "(none)");
		assert_name(W.t[2].ident, "(none)");
		world_close();
	}
}

/*
 * `threading._active = {...}`: the module dict's entry is rebound to another dict while the old
 * one stays alive (and valid) in memory. The cached chain must not keep reading the old dict: the
 * next refresh names the new dict's threads. Then the same after the module dict was resized (a
 * new keys object, the old one left as it was), and with the cached slot holding another key.
 */
Test(python_names, rebound_active)
{
	for (unsigned minor = 6; minor <= 13; minor++) {
		struct thr nt[2], mt[2];
		struct kv e[5];
		uint64_t t, kslot;

		world_open(minor);
		cr_assert_eq(refresh(1), 3, "3.%u", minor);
		/* rebound in place: the entry's value pointer changes, nothing else in the chain */
		nt[0] = W.t[0];
		nt[1] = mkthread(0x7f1200001000ull, "late-joiner");
		img_put64(W.mslot, mkactive(nt, 2));
		cr_assert_eq(refresh(2), 2, "3.%u rebound _active", minor);
		assert_name(W.t[0].ident, "MainThread");
		assert_name(nt[1].ident, "late-joiner");
		assert_name(W.t[1].ident, "(none)");
		assert_name(W.t[2].ident, "(none)");
		/* the chain found again is cached again: sys.modules is not looked at */
		t = img_get64(W.modules + L->ob_type);
		img_put64(W.modules + L->ob_type, t_long);
		cr_assert_eq(refresh(3), 2, "3.%u cached after the rebinding", minor);
		img_put64(W.modules + L->ob_type, t);
		/* the module dict resized: new keys, _active at another index and rebound; the old keys
		 * (freed, not overwritten) still point to the previous dict */
		mt[0] = W.t[0];
		mt[1] = mkthread(0x7f1300002000ull, "after-resize");
		e[0] = (struct kv){ key("__name__"), img_mkstr("threading") };
		e[1] = (struct kv){ key("_active"), mkactive(mt, 2) };
		e[2] = (struct kv){ key("_limbo"), mkdict_kv(GENERAL, NULL, 0) };
		e[3] = (struct kv){ key("_main_thread"), W.t[0].obj };
		e[4] = (struct kv){ img_mkstr("_shutdown"), none };
		img_put64(W.mdict + L->dict_keys, mkkeys(UNICODE, e, 5));
		kslot = last_ent + last_esz + last_voff - 8; /* _active's key pointer */
		cr_assert_eq(refresh(4), 2, "3.%u resized module dict", minor);
		assert_name(mt[1].ident, "after-resize");
		assert_name(nt[1].ident, "(none)");
		/* the entry reused for another key, its value pointer the same: there is no _active */
		img_put64(kslot, img_mkstr("_active2"));
		cr_assert_eq(refresh(5), -ENOENT, "3.%u _active's entry rekeyed", minor);
		assert_name(mt[1].ident, "after-resize");
		world_close();
	}
}

/*
 * What a refresh on the cached chain costs, per version: memreader calls (reads and readvs, each
 * also counted in the stats' syscalls) and vecs. The counts are those before the chain checked
 * _active's entry in the module dict; that check adds vecs to the chain's readv, never a call.
 */
Test(python_names, cached_chain_calls)
{
	/* 3.6-3.10, 3.11-3.12 (no ≤3.10 instance dict heads to read), 3.13 (inline values' headers) */
	static const struct {
		unsigned from, to, reads, readvs, vecs;
	} want[] = { { 6, 10, 18, 8, 30 }, { 11, 12, 18, 7, 27 }, { 13, 13, 18, 8, 29 } };

	for (unsigned w = 0; w < sizeof(want) / sizeof(want[0]); w++) {
		for (unsigned minor = want[w].from; minor <= want[w].to; minor++) {
			struct prs_py_stats a, b;

			world_open(minor);
			cr_assert_eq(refresh(1), 3);
			img.reads = img.readvs = img.vecs = 0;
			prs_py_get_stats(py, &a);
			cr_assert_eq(refresh(2), 3);
			prs_py_get_stats(py, &b);
			cr_assert_eq(img.reads, want[w].reads, "3.%u: %u reads", minor, img.reads);
			cr_assert_eq(img.readvs, want[w].readvs, "3.%u: %u readvs", minor, img.readvs);
			cr_assert_eq(b.syscalls - a.syscalls, (uint64_t)(img.reads + img.readvs), "3.%u", minor);
			/* the chain's readv reads the module dict's head and _active's entry too */
			cr_assert_eq(img.vecs, want[w].vecs + 2, "3.%u: %u vecs", minor, img.vecs);
			world_close();
		}
	}
}

/* ---- 3. 3.13 inline values ---- */

Test(python_names, inline_values_313)
{
	uint64_t hv;

	world_open(13);
	hv = W.t[1].obj + (uint64_t)W.thread.basic; /* A's PyDictValues */
	img_put8(hv + L->dict_values_valid, 0);
	cr_assert_eq(refresh(1), 2);
	assert_named(5, "valid = 0, no dict");
	img_put8(hv + L->dict_values_valid, 1);
	img_put8(hv + L->dict_values_capacity, (uint8_t)W.thread.idx); /* _name past the capacity */
	cr_assert_eq(refresh(2), 2);
	assert_named(5, "capacity too small");
	img_put8(hv + L->dict_values_capacity, (uint8_t)W.thread.nkeys);
	cr_assert_eq(refresh(3), 3);
	assert_named(7, "restored");
	/* basicsize out of range: no inline values looked for */
	img_put64(W.thread.type + L->tp_basicsize, 1u << 20);
	cr_assert_eq(refresh(4), 2);
	assert_named(5, "basicsize 1 MiB");
}

/* ---- 4. hostile input ---- */

/* Damage confined to one thread: the others keep their names. */
struct damage {
	const char *what;
	void (*fn)(void);
	unsigned mask;  /* threads still named */
	unsigned from;  /* minimum minor (0: every version) */
};

static void d_type_garbage(void) { img_put64(W.t[1].obj + L->ob_type, 0x4141414141414141ull); }
static void d_type_unmapped(void) { img_put64(W.t[1].obj + L->ob_type, UNMAPPED); }
static void d_type_zeros(void) { img_put64(W.t[1].obj + L->ob_type, img_alloc(2048)); }
static void d_ident_str(void) { img_put64(active_key(1), img_mkstr("12345")); }
static void d_ident_negative(void) { img_put64(active_key(2), mklong(W.t[2].ident, -1)); }
static void d_ident_big_digit(void)
{
	uint64_t k = mklong(W.t[1].ident, 1);

	img_put32(k + L->long_digit, 1u << L->long_shift); /* a digit with more than 30 bits */
	img_put64(active_key(1), k);
}
static void d_ident_four_digits(void)
{
	uint64_t k = mklong(W.t[2].ident, 1);

	if (L->long_tag >= 0)
		img_put64(k + L->long_tag, 4u << 3);
	else
		img_put64(k + L->long_size, 4);
	img_put64(active_key(2), k);
}
static void d_ident_not_int(void)
{
	uint64_t k = mklong(W.t[1].ident, 1);

	img_put64(k + L->ob_type, t_dict);
	img_put64(active_key(1), k);
}
static void d_value_unmapped(void) { img_put64(active_key(1) + 8, UNMAPPED); }
static void d_value_null(void) { img_put64(active_key(1) + 8, 0); }
static void d_value_odd(void) { img_put64(active_key(1) + 8, W.t[1].obj + 1); }
static void d_name_int(void) { img_put64(W.t[1].slot, mklong(42, 1)); }
static void d_name_null(void) { img_put64(W.t[1].slot, 0); }
static void d_name_unmapped(void) { img_put64(W.t[1].slot, UNMAPPED); }
static void d_name_bad_kind(void) { img_put32(W.t[2].name + L->str_state, img_str_state(3, true)); }
static void d_name_kind0(void) { img_put32(W.t[2].name + L->str_state, img_str_state(0, true)); }
static void d_name_not_compact(void)
{
	img_put32(W.t[2].name + L->str_state, img_str_state(1, true) & ~(1u << L->str_compact_bit));
}
static void d_name_huge_len(void) { img_put64(W.t[2].name + L->str_length, 1ull << 40); }
static void d_name_not_str(void) { img_put64(W.t[1].name + L->ob_type, t_long); }
static void d_own_keys_unmapped(void) { img_put64(W.own + L->dict_keys, UNMAPPED); }
static void d_own_not_dict(void) { img_put64(W.own + L->ob_type, t_long); }
static void d_own_other_keys(void) { img_put64(W.own + L->dict_keys, W.active_keys); } /* no "_name" in them */
static void d_own_keys_huge(void)
{
	uint64_t k = img_get64(W.own + L->dict_keys);

	img_put64(k + L->dk_nentries, 1ull << 40);
}
static void d_own_keys_size(void)
{
	uint64_t k = img_get64(W.own + L->dict_keys);

	if (L->dk_size >= 0)
		img_put64(k + L->dk_size, 1ull << 40);
	else
		img_put8(k + L->dk_log2_size, 63);
}
static void d_attrs_unmapped(void)
{
	uint64_t o = W.t[1].obj, back = (uint64_t)L->managed_dict_back;

	if (!L->managed_dict)
		img_put64(o + (uint64_t)W.thread.dictoff, UNMAPPED);
	else if (L->managed_dict == 1)
		img_put64(o - back - 8, UNMAPPED);
	else if (L->managed_dict == 2)
		img_put64(o - back, UNMAPPED - 1);
	else
		img_put64(o - back, UNMAPPED);
}
static void d_class_keys_unmapped(void) { img_put64(W.main.type + L->ht_cached_keys, UNMAPPED); }
static void d_class_keys_garbage(void) { img_put64(W.main.type + L->ht_cached_keys, W.t[0].name); }

static const struct damage DAMAGE[] = {
	{ "Thread ob_type garbage", d_type_garbage, 5, 0 },
	{ "Thread ob_type unmapped", d_type_unmapped, 5, 0 },
	{ "Thread ob_type -> zeros", d_type_zeros, 5, 0 },
	{ "ident a str", d_ident_str, 5, 0 },
	{ "ident negative", d_ident_negative, 3, 0 },
	{ "ident digit > 30 bits", d_ident_big_digit, 5, 0 },
	{ "ident of 4 digits", d_ident_four_digits, 3, 0 },
	{ "ident not an int", d_ident_not_int, 5, 0 },
	{ "_active value unmapped", d_value_unmapped, 5, 0 },
	{ "_active value NULL", d_value_null, 5, 0 },
	{ "_active value misaligned", d_value_odd, 5, 0 },
	{ "_name an int", d_name_int, 5, 0 },
	{ "_name NULL", d_name_null, 5, 0 },
	{ "_name unmapped", d_name_unmapped, 5, 0 },
	{ "_name str kind 3", d_name_bad_kind, 3, 0 },
	{ "_name str kind 0", d_name_kind0, 3, 0 },
	{ "_name str not compact", d_name_not_compact, 3, 0 },
	{ "_name str length 2^40", d_name_huge_len, 3, 0 },
	{ "_name not a str", d_name_not_str, 5, 0 },
	{ "own dict keys unmapped", d_own_keys_unmapped, 3, 0 },
	{ "own dict not a dict", d_own_not_dict, 3, 0 },
	{ "own dict keys of another dict", d_own_other_keys, 3, 0 },
	{ "own dict nentries 2^40", d_own_keys_huge, 3, 0 },
	{ "own dict size 2^40 / log2 63", d_own_keys_size, 3, 0 },
	{ "attributes pointer unmapped", d_attrs_unmapped, 5, 0 },
	/* <= 3.10 the instance's split dict still has the real keys; 3.11+ only the class has them */
	{ "class shared keys unmapped", d_class_keys_unmapped, 6, 11 },
	{ "class shared keys -> a str", d_class_keys_garbage, 6, 11 },
};

Test(python_names, hostile_per_thread)
{
	for (unsigned minor = 6; minor <= 13; minor++) {
		for (size_t i = 0; i < sizeof(DAMAGE) / sizeof(DAMAGE[0]); i++) {
			const struct damage *dm = &DAMAGE[i];
			unsigned n = 0;
			int rc;

			world_open(minor);
			dm->fn();
			rc = refresh(1);
			for (unsigned b = dm->from && minor < dm->from ? 7 : dm->mask; b; b &= b - 1)
				n++;
			cr_assert_eq(rc, (int)n, "3.%u %s: %d", minor, dm->what, rc);
			assert_named(dm->from && minor < dm->from ? 7 : dm->mask, dm->what);
			world_close();
		}
	}
}

/* Damage to the chain sys.modules -> threading -> _active, on a fresh read. */
Test(python_names, hostile_chain)
{
	for (unsigned minor = 6; minor <= 13; minor++) {
		struct kv mods[2];

		world_open(minor);
		mods[0] = (struct kv){ key("sys"), W.threading };
		mods[1] = (struct kv){ img_mkstr("threadinf"), W.threading };
		img_put64(W.interp + L->interp_modules, mkdict_kv(UNICODE, mods, 2));
		cr_assert_eq(refresh(1), -ENOENT, "3.%u no threading", minor);
		assert_named(0, "no threading");
		world_close();

		world_open(minor);
		img_put64(W.interp + L->interp_modules, mkdict_kv(UNICODE, NULL, 0));
		cr_assert_eq(refresh(1), -ENOENT, "3.%u empty sys.modules", minor);
		world_close();

		world_open(minor);
		img_put64(W.threading + L->ob_type, t_dict);
		cr_assert_lt(refresh(1), 0, "3.%u threading not a module", minor);
		assert_named(0, "threading not a module");
		world_close();

		world_open(minor);
		img_put64(W.interp + L->interp_modules, UNMAPPED);
		cr_assert_lt(refresh(1), 0, "3.%u sys.modules unmapped", minor);
		img_put64(W.interp + L->interp_modules, W.threading); /* a module, not a dict */
		cr_assert_lt(refresh(1), 0, "3.%u sys.modules a module", minor);
		img_put64(W.interp + L->interp_modules, W.modules);
		img_put64(W.threading + L->module_dict, W.t[0].name);
		cr_assert_lt(refresh(1), 0, "3.%u md_dict a str", minor);
		img_put64(W.threading + L->module_dict, mkdict_kv(UNICODE, NULL, 0));
		cr_assert_eq(refresh(1), -ENOENT, "3.%u no _active", minor);
		img_put64(W.threading + L->module_dict, W.mdict);
		cr_assert_eq(refresh(1), 3);
		/* a cycle in the interpreter list */
		img_put64(W.interp + L->interp_next, W.interp);
		cr_assert_eq(refresh(1), 3, "3.%u interp cycle", minor);
		assert_named(7, "interp cycle");
		/* no interpreter */
		if (py->walk.runtime)
			img_put64(py->walk.runtime + L->runtime_interp_head, 0);
		else
			img_put64(py->walk.interp_head_var, 0);
		cr_assert_eq(refresh(1), -ENOENT);
		world_close();
	}
}

/* Damage to _active itself after a good read: the refresh fails and the previous names stay. */
Test(python_names, hostile_active_keeps_names)
{
	for (unsigned minor = 6; minor <= 13; minor++) {
		for (int c = 0; c < 6; c++) {
			int rc;

			world_open(minor);
			cr_assert_eq(refresh(1), 3);
			switch (c) {
			case 0: img_put64(W.active_keys + L->dk_nentries, 1ull << 40); break;
			case 1: img_put64(W.active_keys + L->dk_nentries, (uint64_t)-5); break;
			case 2:
				if (L->dk_size >= 0)
					img_put64(W.active_keys + L->dk_size, 24);
				else
					img_put8(W.active_keys + L->dk_log2_size, 63);
				break;
			case 3: img_put64(W.active + L->dict_keys, UNMAPPED); break;
			case 4: img_put64(W.active + L->ob_type, t_long); break;
			case 5: img_put64(W.active + L->dict_keys, W.active_keys + 3); break;
			}
			rc = refresh(2);
			cr_assert_lt(rc, 0, "3.%u case %d: %d", minor, c, rc);
			assert_named(7, "kept after a failed refresh");
			world_close();
		}
	}
}

/* Names near the end of the image: the 192-byte read fails, the head is read alone. */
Test(python_names, name_near_mapping_end)
{
	for (unsigned minor = 6; minor <= 13; minor++) {
		uint32_t cps[10];
		uint64_t at = BASE + SIZE - 104;
		int rc;

		world_open(minor);
		for (unsigned i = 0; i < 10; i++)
			cps[i] = (uint32_t)"tail-named"[i];
		img_mkstr_cp_at(at, cps, 10, 1, true);
		img_put64(W.t[1].slot, at);
		/* a 300-character name whose characters run past the end */
		at = BASE + SIZE - 200;
		img_mkstr_cp_at(at, cps, 10, 1, true);
		img_put64(at + L->str_length, 300);
		img_put64(W.t[2].slot, at);
		rc = refresh(1);
		assert_name(W.t[1].ident, "tail-named");
		assert_name(W.t[2].ident, "(none)");
		cr_assert_eq(rc, 2, "3.%u: %d", minor, rc);
		assert_name(W.t[2].ident, "(none)");
		world_close();
	}
}

/* 1030 threads: at most 1024 named, each with its own name. */
Test(python_names, many_threads)
{
	static const unsigned MINORS[] = { 6, 10, 11, 12, 13 };

	for (unsigned m = 0; m < 5; m++) {
		enum { N = 1030 };
		unsigned minor = MINORS[m];
		struct kv *e = calloc(N, sizeof(*e));
		uint64_t mods_active;
		unsigned named = 0;
		char s[32];

		cr_assert(e);
		world_open(minor);
		for (unsigned i = 0; i < N; i++) {
			uint64_t o = mkobj(&W.thread);

			snprintf(s, sizeof(s), "Thread-%u", i);
			set_shared(o, &W.thread, img_mkstr(s));
			e[i].key = mklong(0x7f0000001000ull + (uint64_t)i * 0x801000, 1);
			e[i].value = o;
		}
		mods_active = mkdict_kv(GENERAL, e, N);
		img_put64(W.threading + L->module_dict, mkmdict(mods_active));
		cr_assert_eq(refresh(1), 1024, "3.%u", minor);
		for (unsigned i = 0; i < N; i++) {
			uint32_t id = prs_py_thread_name(py, prof, 0x7f0000001000ull + (uint64_t)i * 0x801000);

			snprintf(s, sizeof(s), "Thread-%u", i);
			if (id) {
				cr_assert_str_eq(prof->strings[id], s);
				named++;
			}
		}
		cr_assert_eq(named, 1024);
		world_close();
		free(e);
	}
}

/* ---- 5. prs_py_names_due ---- */

Test(python_names, names_due)
{
	const uint64_t t0 = 1000000000000ull;

	world_open(12);
	cr_assert(prs_py_names_due(py, 0));
	cr_assert(prs_py_names_due(py, t0));
	cr_assert_eq(prs_py_thread_name(py, prof, W.t[0].ident), 0, "not read yet");
	cr_assert_eq(refresh(t0), 3);
	assert_named(7, "read");
	cr_assert(!prs_py_names_due(py, t0));
	cr_assert(!prs_py_names_due(py, t0 + 1999 * MS));
	cr_assert(prs_py_names_due(py, t0 + 2000 * MS));
	/* a miss asks for a refresh 250 ms after the last read (no budget told) */
	cr_assert_eq(prs_py_thread_name(py, prof, 0x7f0000abc000ull), 0);
	cr_assert(!prs_py_names_due(py, t0 + 249 * MS));
	cr_assert(prs_py_names_due(py, t0 + 250 * MS));
	/* told the read took 1 ms: within its 5 ms budget, a miss waits 20 ms */
	prs_py_names_took(py, 1 * MS);
	cr_assert(!prs_py_names_due(py, t0 + 19 * MS));
	cr_assert(prs_py_names_due(py, t0 + 20 * MS));
	/* the refresh clears it */
	cr_assert_eq(refresh(t0 + 300 * MS), 3);
	cr_assert(!prs_py_names_due(py, t0 + 600 * MS));
	cr_assert(!prs_py_names_due(py, t0 + 2299 * MS));
	cr_assert(prs_py_names_due(py, t0 + 2300 * MS));
	/* a lookup from another profile is a miss too */
	{
		struct prs_profile *other = prs_profile_new();

		cr_assert_eq(prs_py_thread_name(py, other, W.t[0].ident), 0);
		prs_profile_free(other);
	}
	cr_assert(prs_py_names_due(py, t0 + 550 * MS));
}

/* The budget of the refreshes a miss asks for: 1/400 of the time, up to 5 ms ahead. */
Test(python_names, names_due_within_a_budget)
{
	const uint64_t t0 = 1000000000000ull;
	uint64_t t = t0, ident = 0x7f0000abc000ull;
	int reads = 0;

	world_open(12);
	/* a new thread every tick that threading does not know yet (a thread-per-request server),
	 * reads of 1 ms: 5 ms of budget go in the first 5 reads, 20 ms apart; then one read each 400
	 * ms of budget, at most 250 ms apart */
	while (t < t0 + 10000 * MS) {
		if (prs_py_names_due(py, t)) {
			cr_assert_eq(refresh(t), 3);
			prs_py_names_took(py, 1 * MS);
			reads++;
		}
		cr_assert_eq(prs_py_thread_name(py, prof, ident += 0x10000), 0);
		t += 10 * MS;
	}
	cr_assert(reads >= 5 + 10000 / 250 - 1 && reads <= 6 + 10000 / 250, "%d reads", reads);
	/* reads of 10 us fit the budget: every 20 ms */
	world_close();
	world_open(12);
	reads = 0;
	for (t = t0; t < t0 + 1000 * MS; t += 10 * MS) {
		if (prs_py_names_due(py, t)) {
			cr_assert_eq(refresh(t), 3);
			prs_py_names_took(py, 10000);
			reads++;
		}
		cr_assert_eq(prs_py_thread_name(py, prof, ident += 0x10000), 0);
	}
	cr_assert_eq(reads, 50);
}

/* A thread that threading never knows (a raw _thread thread) is asked for over 250 ms (a new
 * thread's state exists before threading registers it), then only at the periodic refreshes. */
Test(python_names, a_thread_threading_does_not_know_is_asked_for_250_ms)
{
	const uint64_t t0 = 1000000000000ull, raw = 0x7f0000abc000ull;

	world_open(12);
	cr_assert_eq(refresh(t0), 3);
	prs_py_names_took(py, 10000);
	cr_assert_eq(prs_py_thread_name(py, prof, raw), 0);
	cr_assert(prs_py_names_due(py, t0 + 20 * MS));
	cr_assert_eq(refresh(t0 + 20 * MS), 3);
	prs_py_names_took(py, 10000);
	/* not found 20 ms after it was asked: still asked */
	cr_assert_eq(prs_py_thread_name(py, prof, raw), 0);
	cr_assert(prs_py_names_due(py, t0 + 40 * MS));
	cr_assert_eq(refresh(t0 + 260 * MS), 3);
	prs_py_names_took(py, 10000);
	/* nor 250 ms after: its misses no longer ask */
	cr_assert_eq(prs_py_thread_name(py, prof, raw), 0);
	cr_assert(!prs_py_names_due(py, t0 + 2259 * MS));
	cr_assert(prs_py_names_due(py, t0 + 2260 * MS));
	/* a new thread still does; and the periodic refresh asks again for the raw one */
	cr_assert_eq(prs_py_thread_name(py, prof, raw + 0x10000), 0);
	cr_assert(prs_py_names_due(py, t0 + 280 * MS));
	cr_assert_eq(refresh(t0 + 280 * MS), 3);
	cr_assert_eq(refresh(t0 + 4100 * MS), 3); /* periodic: forgets what was not found */
	cr_assert_eq(prs_py_thread_name(py, prof, raw), 0);
	cr_assert(prs_py_names_due(py, t0 + 4120 * MS));
}

/* ---- regression tests of bugs these tests found (fixed; the comments say what was wrong) ---- */

/*
 * Was: prs_py_read_thread_names documents -EINVAL "an object failed validation", but with one
 * interpreter whose chain fails validation it returns -ENOENT: in prs_py_read_thread_names
 * (threadnames.c:745-779 at 618580e) `found` starts at -ENOENT and only becomes 0; the -EINVAL (or
 * -EFAULT) read_interp returned is dropped (only -ENOMEM/-ESRCH are returned).
 */
Test(python_names, validation_error_is_einval)
{
	world_open(12);
	img_put64(W.threading + L->ob_type, t_dict);
	cr_assert_eq(refresh(1), -EINVAL, "threading not a module");
	world_close();
	world_open(12);
	img_put64(W.active_keys + L->dk_nentries, 1ull << 40);
	cr_assert_eq(refresh(1), -EINVAL, "_active nentries > size");
	world_close();
}

/*
 * Was: read_names reused nm->vecs (the scratch of dict_find) while it still reads a stage's
 * results from them (threadnames.c at 618580e). Stage (1): type_info() (read_keys + dict_find over
 * a class's shared keys, line 549) runs inside the loop that then reads nm->vecs[2*i].res /
 * [2*i+1].res of later threads (line 540); after stage (3): read_instance_dict + dict_find of a
 * thread with a dict of its own (line 620) run inside the loop that then reads
 * nm->vecs[pd[j].vaux].res of later threads (line 616). A failed read then looks like a
 * success (the res of a key read, 0) and the thread gets the bytes left in struct pending by the
 * previous refresh (pend is kept): another thread's name.
 */
Test(python_names, failed_window_read_uses_stale_data)
{
	for (unsigned minor = 6; minor <= 13; minor++) {
		uint64_t z = 0x7f12aaaa0700ull;

		world_open(minor);
		cr_assert_eq(refresh(1), 3);
		/* a new thread Z at _active's index 1 (A's before), its Thread object unreadable */
		img_put64(active_key(1), mklong(z, 1));
		img_put64(active_key(1) + 8, UNMAPPED);
		cr_assert_eq(refresh(2), 2, "3.%u", minor); /* actual <= 3.12: 3, Z named "wörker-名" (A's) */
		assert_name(z, "(none)");
		world_close();
	}
}

Test(python_names, failed_slot_read_uses_stale_data)
{
	for (unsigned minor = 6; minor <= 12; minor++) {
		uint64_t a, back;

		world_open(minor);
		struct thr o1[3] = { W.t[2], W.t[0], W.t[1] }; /* B, main, A */
		struct thr o2[3] = { W.t[2], W.t[1], W.t[0] }; /* B, A, main */

		mkactive(o1, 3);
		img_put64(W.active + L->dict_keys, W.active_keys); /* _active resized in place */
		cr_assert_eq(refresh(1), 3);
		mkactive(o2, 3);
		img_put64(W.active + L->dict_keys, W.active_keys);
		/* A's values unreadable (its object and dict are fine) */
		a = W.t[1].obj;
		back = (uint64_t)L->managed_dict_back;
		if (!L->managed_dict) {
			uint64_t d = img_get64(a + (uint64_t)W.thread.dictoff);

			img_put64(d + L->dict_values, UNMAPPED);
		} else if (L->managed_dict == 1) {
			img_put64(a - back - 8, UNMAPPED);
		} else {
			img_put64(a - back, UNMAPPED - 1);
		}
		cr_assert_eq(refresh(2), 2, "3.%u", minor); /* actual: 3, A named "MainThread" */
		assert_named(5, "A's values unmapped");
		world_close();
	}
}

/*
 * Was (minor): when the 192-byte read of a name fails (the str ends near the end of a mapping),
 * read_names re-reads str_compact_size bytes (72 / 56, threadnames.c:643-644 at 618580e); an
 * ASCII str is only str_ascii_size + len + 1 bytes, so a short ASCII name within str_compact_size bytes of the end gets no name.
 */
Test(python_names, short_ascii_name_at_mapping_end)
{
	uint32_t cps[2] = { 'a', 'b' };
	uint64_t at;

	world_open(12);
	at = BASE + SIZE - ((uint64_t)L->str_ascii_size + 3) - 5;
	at &= ~7ull;
	img_mkstr_cp_at(at, cps, 2, 1, true);
	img_put64(W.t[1].slot, at);
	cr_assert_eq(refresh(1), 3);
	assert_name(W.t[1].ident, "ab");
	world_close();
}
