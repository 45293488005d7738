/* SPDX-License-Identifier: MIT */
/*
 * Open-addressing hash tables with linear probing and a load factor of at most 1/2 (3/4 for the
 * u64 map, whose slots hold key and value together): a u64 -> u32
 * map (stack trie edges, address caches), a byte-string -> u32 map (string interning) and an id set
 * whose equality is a callback (interning of frames and mappings stored in the caller's arrays).
 * Tables only allocate when they grow, so lookups and inserts are allocation-free once warm.
 */
#include "pyrsprof/util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "util/banned.h"

#define MIN_CAP 16u
#define MAX_CAP (1u << 31)

uint64_t prs_hash64(uint64_t x)
{
	/* the splitmix64 / murmur3 finalizer: a bijection with good avalanche */
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	x ^= x >> 31;
	return x;
}

uint64_t prs_hash_bytes(const void *p, size_t len)
{
	const uint8_t *s = p;
	uint64_t h = 0x9e3779b97f4a7c15ULL ^ (len * 0xff51afd7ed558ccdULL), w;

	/* one multiply and shift per 8 bytes (interning hashes every frame name of a big input);
	 * the finalizer below mixes the whole state, so every input bit reaches every output bit */
	while (len >= 8) {
		memcpy(&w, s, 8);
		h = (h ^ w) * 0xc4ceb9fe1a85ec53ULL;
		h ^= h >> 29;
		s += 8;
		len -= 8;
	}
	if (len) {
		w = 0;
		memcpy(&w, s, len);
		h = (h ^ w ^ ((uint64_t)len << 56)) * 0xc4ceb9fe1a85ec53ULL;
		h ^= h >> 29;
	}
	return prs_hash64(h);
}

void prs_mem_hint_huge(void *p, size_t len)
{
	uintptr_t page = 4096, start, end;

	if (!p || len < PRS_HUGE_MIN)
		return;
	start = ((uintptr_t)p + page - 1) & ~(page - 1);
	end = ((uintptr_t)p + len) & ~(page - 1);
	if (end > start)
		(void)madvise((void *)start, end - start, MADV_HUGEPAGE);
}

/* The capacity that holds n entries at a load of at most 1/2, or 0 past MAX_CAP. */
static uint32_t cap_for(uint32_t n)
{
	uint32_t c = MIN_CAP;

	while (c < MAX_CAP && c / 2 < n)
		c *= 2;
	return c / 2 >= n ? c : 0;
}

/* ---- map64 ---- */

/*
 * The trie index of a big profile is the largest table pyrsprof has (1.4M stacks for 200k folded
 * lines): one 16-byte slot per entry at a load of up to 3/4 keeps it at 32 MB where separate key
 * and value arrays at 1/2 took 48 MB and two cache misses per probe.
 */
void prs_map64_init(struct prs_map64 *m)
{
	memset(m, 0, sizeof(*m));
}

void prs_map64_release(struct prs_map64 *m)
{
	free(m->slots);
	prs_map64_init(m);
}

uint32_t prs_map64_get(const struct prs_map64 *m, uint64_t key)
{
	uint32_t mask, i;

	if (!m->cap)
		return PRS_MAP_NONE;
	mask = m->cap - 1;
	for (i = (uint32_t)prs_hash64(key) & mask;; i = (i + 1) & mask) {
		const struct prs_map64_slot *s = &m->slots[i];

		if (s->val == PRS_MAP_NONE)
			return PRS_MAP_NONE;
		if (s->key == key)
			return s->val;
	}
}

static int map64_resize(struct prs_map64 *m, uint32_t ncap)
{
	struct prs_map64_slot *slots = malloc((size_t)ncap * sizeof(*slots));
	uint32_t i, mask = ncap - 1;

	if (!slots)
		return -ENOMEM;
	prs_mem_hint_huge(slots, (size_t)ncap * sizeof(*slots));
	for (i = 0; i < ncap; i++)
		slots[i].val = PRS_MAP_NONE;
	for (i = 0; i < m->cap; i++) {
		uint32_t j;

		if (m->slots[i].val == PRS_MAP_NONE)
			continue;
		for (j = (uint32_t)prs_hash64(m->slots[i].key) & mask; slots[j].val != PRS_MAP_NONE;
		     j = (j + 1) & mask)
			;
		slots[j] = m->slots[i];
	}
	free(m->slots);
	m->slots = slots;
	m->cap = ncap;
	return 0;
}

/* The capacity that holds n entries at a load of at most 3/4, or 0 past MAX_CAP. */
static uint32_t map64_cap_for(uint32_t n)
{
	uint64_t c = MIN_CAP;

	while (c < MAX_CAP && c / 4 * 3 < n)
		c *= 2;
	return c / 4 * 3 >= n ? (uint32_t)c : 0;
}

int prs_map64_reserve(struct prs_map64 *m, uint32_t n)
{
	uint32_t c = map64_cap_for(n);

	if (!c)
		return -ENOMEM;
	return c > m->cap ? map64_resize(m, c) : 0;
}

int prs_map64_intern(struct prs_map64 *m, uint64_t key, uint32_t newval, uint32_t *val)
{
	struct prs_map64_slot *s;
	uint32_t mask, i;

	if (newval == PRS_MAP_NONE)
		return -EINVAL;
	if (m->len + 1 > m->cap / 4 * 3) {
		int rc = prs_map64_reserve(m, m->len + 1);

		if (rc)
			return rc;
	}
	mask = m->cap - 1;
	for (i = (uint32_t)prs_hash64(key) & mask;; i = (i + 1) & mask) {
		s = &m->slots[i];
		if (s->val == PRS_MAP_NONE)
			break;
		if (s->key == key) {
			*val = s->val;
			return 0;
		}
	}
	s->key = key;
	s->val = newval;
	m->len++;
	*val = newval;
	return 1;
}

int prs_map64_put(struct prs_map64 *m, uint64_t key, uint32_t val)
{
	uint32_t old;
	int rc = prs_map64_intern(m, key, val, &old);
	uint32_t mask, i;

	if (rc != 0)
		return rc < 0 ? rc : 0;
	/* present: overwrite */
	mask = m->cap - 1;
	for (i = (uint32_t)prs_hash64(key) & mask;
	     m->slots[i].key != key || m->slots[i].val == PRS_MAP_NONE; i = (i + 1) & mask)
		;
	m->slots[i].val = val;
	return 0;
}

/* ---- strmap ---- */

void prs_strmap_init(struct prs_strmap *m)
{
	memset(m, 0, sizeof(*m));
}

void prs_strmap_release(struct prs_strmap *m)
{
	free(m->slots);
	prs_strmap_init(m);
}

static struct prs_strmap_slot *strmap_slot(const struct prs_strmap *m, const void *key, uint32_t len,
					   uint32_t hash)
{
	uint32_t mask = m->cap - 1, i;

	for (i = hash & mask;; i = (i + 1) & mask) {
		struct prs_strmap_slot *s = &m->slots[i];

		if (!s->key)
			return s;
		if (s->hash == hash && s->len == len && memcmp(s->key, key, len) == 0)
			return s;
	}
}

uint32_t prs_strmap_get(const struct prs_strmap *m, const void *key, size_t len)
{
	struct prs_strmap_slot *s;

	if (!m->cap || len > UINT32_MAX)
		return PRS_MAP_NONE;
	s = strmap_slot(m, key, (uint32_t)len, (uint32_t)prs_hash_bytes(key, len));
	return s->key ? s->val : PRS_MAP_NONE;
}

uint32_t prs_strmap_get_hashed(const struct prs_strmap *m, const void *key, size_t len, uint32_t hash)
{
	struct prs_strmap_slot *s;

	if (!m->cap || len > UINT32_MAX)
		return PRS_MAP_NONE;
	s = strmap_slot(m, key, (uint32_t)len, hash);
	return s->key ? s->val : PRS_MAP_NONE;
}

void prs_strmap_prefetch(const struct prs_strmap *m, uint32_t hash)
{
	if (m->cap)
		__builtin_prefetch(&m->slots[hash & (m->cap - 1)]);
}

void prs_strmap_prefetch_key(const struct prs_strmap *m, uint32_t hash)
{
	const struct prs_strmap_slot *s;

	if (!m->cap)
		return;
	s = &m->slots[hash & (m->cap - 1)];
	if (s->key && s->hash == hash)
		__builtin_prefetch(s->key);
}

static int strmap_resize(struct prs_strmap *m, uint32_t ncap)
{
	struct prs_strmap_slot *slots = calloc(ncap, sizeof(*slots));
	uint32_t i, mask = ncap - 1;

	if (!slots)
		return -ENOMEM;
	prs_mem_hint_huge(slots, (size_t)ncap * sizeof(*slots));
	for (i = 0; i < m->cap; i++) {
		uint32_t j;

		if (!m->slots[i].key)
			continue;
		for (j = m->slots[i].hash & mask; slots[j].key; j = (j + 1) & mask)
			;
		slots[j] = m->slots[i];
	}
	free(m->slots);
	m->slots = slots;
	m->cap = ncap;
	return 0;
}

int prs_strmap_put(struct prs_strmap *m, const void *key, size_t len, uint32_t val)
{
	struct prs_strmap_slot *s;
	uint32_t hash;

	if (val == PRS_MAP_NONE || len > UINT32_MAX || !key)
		return -EINVAL;
	if (m->len + 1 > m->cap / 2) {
		uint32_t c = cap_for(m->len + 1);
		int rc;

		if (!c)
			return -ENOMEM;
		rc = strmap_resize(m, c);
		if (rc)
			return rc;
	}
	hash = (uint32_t)prs_hash_bytes(key, len);
	s = strmap_slot(m, key, (uint32_t)len, hash);
	if (!s->key)
		m->len++;
	s->key = key;
	s->len = (uint32_t)len;
	s->hash = hash;
	s->val = val;
	return 0;
}

/* ---- idset ---- */

void prs_idset_init(struct prs_idset *s)
{
	memset(s, 0, sizeof(*s));
}

void prs_idset_release(struct prs_idset *s)
{
	free(s->ids);
	free(s->hashes);
	prs_idset_init(s);
}

uint32_t prs_idset_find(const struct prs_idset *s, uint32_t hash, prs_idset_eq_fn eq,
			const void *ctx, const void *key)
{
	uint32_t mask, i;

	if (!s->cap)
		return PRS_MAP_NONE;
	mask = s->cap - 1;
	for (i = hash & mask; s->ids[i] != PRS_MAP_NONE; i = (i + 1) & mask)
		if (s->hashes[i] == hash && eq(ctx, s->ids[i], key))
			return s->ids[i];
	return PRS_MAP_NONE;
}

static int idset_resize(struct prs_idset *s, uint32_t ncap)
{
	uint32_t *ids = malloc((size_t)ncap * sizeof(*ids));
	uint32_t *hashes = malloc((size_t)ncap * sizeof(*hashes));
	uint32_t i, mask = ncap - 1;

	if (!ids || !hashes) {
		free(ids);
		free(hashes);
		return -ENOMEM;
	}
	prs_mem_hint_huge(ids, (size_t)ncap * sizeof(*ids));
	prs_mem_hint_huge(hashes, (size_t)ncap * sizeof(*hashes));
	memset(ids, 0xff, (size_t)ncap * sizeof(*ids));
	for (i = 0; i < s->cap; i++) {
		uint32_t j;

		if (s->ids[i] == PRS_MAP_NONE)
			continue;
		for (j = s->hashes[i] & mask; ids[j] != PRS_MAP_NONE; j = (j + 1) & mask)
			;
		ids[j] = s->ids[i];
		hashes[j] = s->hashes[i];
	}
	free(s->ids);
	free(s->hashes);
	s->ids = ids;
	s->hashes = hashes;
	s->cap = ncap;
	return 0;
}

int prs_idset_insert(struct prs_idset *s, uint32_t hash, uint32_t id)
{
	uint32_t mask, i;

	if (id == PRS_MAP_NONE)
		return -EINVAL;
	if (s->len + 1 > s->cap / 2) {
		uint32_t c = cap_for(s->len + 1);
		int rc;

		if (!c)
			return -ENOMEM;
		rc = idset_resize(s, c);
		if (rc)
			return rc;
	}
	mask = s->cap - 1;
	for (i = hash & mask; s->ids[i] != PRS_MAP_NONE; i = (i + 1) & mask)
		;
	s->ids[i] = id;
	s->hashes[i] = hash;
	s->len++;
	return 0;
}
