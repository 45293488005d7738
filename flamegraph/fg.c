/* SPDX-License-Identifier: MIT */
/*
 * The flame graph frame tree: interned strings, nodes keyed by (parent, name, file, kind) (a Bloom
 * filter in front of an open-addressing hash table filled lazily; child scans are bounded, so 200k
 * distinct stacks stay cheap), per-node line counts for the hover details, and the "before"
 * counts of differential graphs.
 * The SVG writer is in svg.c.
 */
#include "pyrsprof/flamegraph.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pyrsprof/util.h"

#include "fg-tree.h"

#include "util/banned.h"

#define MAX_TOTAL ((uint64_t)INT64_MAX)

static uint32_t hash_bytes(const char *s, size_t len)
{
	uint32_t h = 2166136261u; /* FNV-1a: the colors depend on it, keep it stable */

	for (size_t i = 0; i < len; i++) {
		h ^= (unsigned char)s[i];
		h *= 16777619u;
	}
	return h;
}

/* The interning hash: 8 bytes at a time (not stable across versions, unlike hash_bytes). */
static uint32_t hash_fast(const char *s, size_t len)
{
	uint64_t h = 0x9e3779b97f4a7c15ull ^ len, v;
	size_t i = 0;

	for (; i + 8 <= len; i += 8) {
		memcpy(&v, s + i, 8);
		h = (h ^ v) * 0xff51afd7ed558ccdull;
		h ^= h >> 32;
	}
	v = 0;
	memcpy(&v, s + i, len - i);
	h = (h ^ v) * 0xc4ceb9fe1a85ec53ull;
	h ^= h >> 29;
	return (uint32_t)h ^ (uint32_t)(h >> 32);
}

uint32_t prs_fg_name_hash(const char *s, size_t len)
{
	return hash_bytes(s, len);
}

static uint32_t mix32(uint32_t h)
{
	h ^= h >> 16;
	h *= 0x7feb352du;
	h ^= h >> 15;
	h *= 0x846ca68bu;
	h ^= h >> 16;
	return h;
}

/* ---- strings ---- */

/* Arrays grow with prs_array_grow. No huge-page hint for them or in rehash(): measured on
 * fg_shapes, the graph's arrays and tables took more memory with it (unsorted 108 -> 100 MB
 * without, shallow 29 -> 25 MB) for no CPU gained (5 alternating runs each). */

/*
 * The string and node tables: open addressing, linear probing, filled to 3/4 at most. Their
 * sizes are not powers of two: a hash h's home slot is h scaled to the size ((h * n) >> 32), and
 * a table grows by half (table_size), so that 1.76M nodes take 2.7M slots (21 MB), not 4M (32 MB):
 * peak memory is a goal (issue 13).
 */
static size_t slot_home(uint32_t h, size_t nslots)
{
	return (size_t)(((uint64_t)h * nslots) >> 32);
}

static size_t slot_next(size_t i, size_t nslots)
{
	return i + 1 < nslots ? i + 1 : 0;
}

/* The size of a table that holds `entries` at a fill of at most 3/4, grown from nslots by half
 * as many times as needed (first 1024). */
static size_t table_size(size_t nslots, size_t entries)
{
	size_t n = nslots ? nslots : 1024;

	while ((entries + 1) * 4 > n * 3)
		n += n / 2;
	return n;
}

static int rehash(struct fg_slot **slots, size_t *nslots, size_t ncap)
{
	struct fg_slot *ns = calloc(ncap, sizeof(*ns));

	if (!ns)
		return -ENOMEM;
	for (size_t k = 0; k < *nslots; k++) {
		size_t i;

		if (!(*slots)[k].id)
			continue;
		for (i = slot_home((*slots)[k].hash, ncap); ns[i].id; i = slot_next(i, ncap))
			;
		ns[i] = (*slots)[k];
	}
	free(*slots);
	*slots = ns;
	*nslots = ncap;
	return 0;
}

/* a[0..len) == b[0..len): inline, 8 bytes at a time (names are short: a call to memcmp per
 * frame was 13 % of a big graph's time) */
static bool same_bytes(const char *a, const char *b, size_t len)
{
	uint64_t x, y;
	size_t i = 0;

	for (; i + 8 <= len; i += 8) {
		memcpy(&x, a + i, 8);
		memcpy(&y, b + i, 8);
		if (x != y)
			return false;
	}
	for (; i < len; i++)
		if (a[i] != b[i])
			return false;
	return true;
}

/* Returns the id of the string s[0..len) (len <= PRS_MAX_NAME) of hash_fast h, interning it;
 * UINT32_MAX when out of memory. */
static uint32_t intern_hashed(struct prs_fg *fg, const char *s, size_t len, uint32_t h)
{
	size_t i;

	if ((size_t)(fg->nstrs + 1) * 4 > fg->str_nslots * 3 &&
	    rehash(&fg->str_slots, &fg->str_nslots, table_size(fg->str_nslots, fg->nstrs + 1)) < 0)
		return UINT32_MAX;
	for (i = slot_home(h, fg->str_nslots); fg->str_slots[i].id; i = slot_next(i, fg->str_nslots)) {
		const struct fg_str *e;

		if (fg->str_slots[i].hash != h)
			continue;
		e = &fg->strs[fg->str_slots[i].id - 1];
		if (e->len == len && same_bytes(fg->arena + e->off, s, len))
			return fg->str_slots[i].id - 1;
	}
	if (fg->nstrs >= UINT32_MAX - 1 || fg->arena_len + len + 1 > UINT32_MAX)
		return UINT32_MAX;
	if (prs_array_grow((void **)&fg->strs, &fg->strs_cap, fg->nstrs + 1, sizeof(*fg->strs)) < 0 ||
	    prs_array_grow((void **)&fg->arena, &fg->arena_cap, fg->arena_len + len + 1, 1) < 0)
		return UINT32_MAX;
	memcpy(fg->arena + fg->arena_len, s, len);
	fg->arena[fg->arena_len + len] = '\0';
	fg->strs[fg->nstrs] = (struct fg_str){ .off = (uint32_t)fg->arena_len, .len = (uint32_t)len };
	fg->arena_len += len + 1;
	fg->str_slots[i] = (struct fg_slot){ fg->nstrs + 1, h };
	return fg->nstrs++;
}

/* Returns the id of the string s[0..len) (cut at PRS_MAX_NAME), interning it; UINT32_MAX when
 * out of memory. */
static uint32_t intern(struct prs_fg *fg, const char *s, size_t len)
{
	if (len > PRS_MAX_NAME)
		len = PRS_MAX_NAME;
	return intern_hashed(fg, s, len, hash_fast(s, len));
}

/* ---- nodes ---- */

/* A node's hash, from its parent's: the hash of its path from the root (the root's is ROOT_HASH). */
#define ROOT_HASH 0x2545f491u

static uint32_t node_hash(uint32_t parent_hash, uint32_t name, uint32_t file, uint8_t kind)
{
	return mix32(parent_hash * 0x9e3779b1u ^ mix32(name * 0x85ebca77u ^ file * 0xc2b2ae3du ^ kind));
}

/*
 * Nodes are found through a hash table (node_slots), but it is filled lazily: a Bloom filter over
 * every node's (parent, name, file, kind) answers "certainly absent" for nearly every new node
 * from a table that stays in cache (2 bytes per node), and the new node is appended unindexed.
 * Only a "maybe" looks further: the parent's first children, then the table, which first takes
 * in the nodes appended since it was last used (nodes [nindexed, nnodes)). A big folded input
 * (850k nodes) thus makes almost no probe into a 16 MB table; wide or hostile trees cost what
 * the table alone did.
 */
#define BLOOM_BITS_PER_NODE 16
#define SCAN_CHILDREN 32

static uint32_t bloom_pos(uint32_t h, unsigned k, size_t nbits)
{
	uint32_t h2 = mix32(h ^ 0x9e3779b9u) | 1u;

	return (uint32_t)((h + k * h2) & (nbits - 1));
}

static bool bloom_maybe(const struct prs_fg *fg, uint32_t h)
{
	for (unsigned k = 0; k < 3; k++) {
		uint32_t b = bloom_pos(h, k, fg->bloom_nbits);

		if (!(fg->bloom[b / 64] >> (b % 64) & 1))
			return false;
	}
	return true;
}

static void bloom_add(struct prs_fg *fg, uint32_t h)
{
	for (unsigned k = 0; k < 3; k++) {
		uint32_t b = bloom_pos(h, k, fg->bloom_nbits);

		fg->bloom[b / 64] |= 1ull << (b % 64);
	}
}

static uint32_t node_hash_of(const struct fg_node *n)
{
	return n->hash;
}

/* Sizes the filter for `nodes` nodes and puts every node in. Without memory the filter is off
 * (every answer "maybe"), which is slower, never wrong. */
static void bloom_resize(struct prs_fg *fg, size_t nodes)
{
	size_t nbits = 1u << 16;
	uint64_t *bits;

	while (nbits < nodes * BLOOM_BITS_PER_NODE && nbits < ((size_t)1 << 32))
		nbits *= 2;
	bits = calloc(nbits / 64, sizeof(*bits));
	free(fg->bloom);
	fg->bloom = bits;
	fg->bloom_nbits = bits ? nbits : 0;
	if (!bits)
		return;
	for (uint32_t k = 1; k < fg->nnodes; k++)
		bloom_add(fg, node_hash_of(&fg->nodes[k]));
}

/* Puts nodes [nindexed, nnodes) into node_slots, sized for `room` more. 0 or -ENOMEM. The string and node tables are
 * filled to 3/4 (8-byte slots, a probe rarely leaves its cache line): the node table of 1.4M
 * nodes is then 16 MB, not 32 MB (peak RSS is a goal, issue 13). */
static int index_pending(struct prs_fg *fg, size_t room)
{
	size_t ncap = table_size(fg->node_nslots ? fg->node_nslots : 4096, fg->nnodes + room);

	if (ncap > fg->node_nslots && rehash(&fg->node_slots, &fg->node_nslots, ncap) < 0)
		return -ENOMEM;
	for (uint32_t k = fg->nindexed; k < fg->nnodes; k++) {
		uint32_t h = node_hash_of(&fg->nodes[k]);
		size_t i;

		for (i = slot_home(h, fg->node_nslots); fg->node_slots[i].id; i = slot_next(i, fg->node_nslots))
			;
		fg->node_slots[i] = (struct fg_slot){ k, h };
	}
	fg->nindexed = fg->nnodes;
	return 0;
}

/* The child (name, file, kind) of parent if it exists: 0 if not, UINT32_MAX on ENOMEM. */
static uint32_t find_child(struct prs_fg *fg, uint32_t parent, uint32_t name, uint32_t file,
			   uint8_t kind, uint32_t h)
{
	unsigned scanned = 0;
	uint32_t c;
	size_t i;

	if (fg->bloom && !bloom_maybe(fg, h))
		return 0;
	for (c = fg->nodes[parent].first_child; c && scanned < SCAN_CHILDREN;
	     c = fg->nodes[c].next_sibling, scanned++) {
		const struct fg_node *e = &fg->nodes[c];

		if (e->name == name && e->file == file && e->kind == kind)
			return c;
	}
	if (!c)
		return 0; /* every child seen */
	if (fg->nindexed < fg->nnodes && index_pending(fg, 0) < 0)
		return UINT32_MAX;
	for (i = slot_home(h, fg->node_nslots); fg->node_slots[i].id; i = slot_next(i, fg->node_nslots)) {
		const struct fg_node *e;

		if (fg->node_slots[i].hash != h)
			continue;
		e = &fg->nodes[fg->node_slots[i].id];
		if (e->parent == parent && e->name == name && e->file == file && e->kind == kind)
			return fg->node_slots[i].id;
	}
	return 0;
}

/* Appends the new child (name, file, kind) of parent, of hash h, to the nodes (not to the
 * filter or the table). Returns its id, 0 when out of memory. */
static uint32_t new_node(struct prs_fg *fg, uint32_t parent, uint32_t name, uint32_t file,
			 uint8_t kind, uint32_t h)
{
	if (fg->nnodes >= UINT32_MAX - 1 ||
	    prs_array_grow((void **)&fg->nodes, &fg->nodes_cap, fg->nnodes + 1, sizeof(*fg->nodes)) < 0)
		return 0;
	fg->nodes[fg->nnodes] = (struct fg_node){ .parent = parent, .name = name, .file = file,
						  .kind = kind, .hash = h,
						  .next_sibling = fg->nodes[parent].first_child };
	fg->nodes[parent].first_child = fg->nnodes;
	return fg->nnodes++;
}

/* Finds or creates the child (name, file, kind) of parent. Returns its id, 0 when out of memory. */
static uint32_t child(struct prs_fg *fg, uint32_t parent, uint32_t name, uint32_t file, uint8_t kind)
{
	uint32_t h = node_hash(fg->nodes[parent].hash, name, file, kind), id;

	if (fg->bloom_nbits && (size_t)fg->nnodes * BLOOM_BITS_PER_NODE > fg->bloom_nbits)
		bloom_resize(fg, (size_t)fg->nnodes * 2);
	id = find_child(fg, parent, name, file, kind, h);
	if (id == UINT32_MAX)
		return 0;
	if (id)
		return id;
	id = new_node(fg, parent, name, file, kind, h);
	if (id && fg->bloom)
		bloom_add(fg, h);
	return id; /* indexed later, when a lookup needs the table */
}

/* ---- before counts ---- */

/* Makes room for a before count for every node. 0 or -ENOMEM. */
static int before_reserve(struct prs_fg *fg)
{
	size_t cap = fg->before_len, old = fg->before_len;

	if (fg->nnodes <= fg->before_len)
		return 0;
	if (prs_array_grow((void **)&fg->before, &cap, fg->nnodes, sizeof(*fg->before)) < 0)
		return -ENOMEM;
	memset(fg->before + old, 0, (cap - old) * sizeof(*fg->before));
	fg->before_len = cap;
	return 0;
}

static uint64_t before_of(const struct prs_fg *fg, uint32_t id)
{
	return id < fg->before_len ? fg->before[id] : 0;
}

/* ---- per-node line counts ---- */

/*
 * A node's lines are a list (first_line, next); most nodes have one or two, found by walking it.
 * A node that reaches LINE_SCAN lines has them all put in a hash table (line_slots), where its
 * later lines are looked up: a hostile node of 100k lines costs a probe each, not a walk. The
 * table holds only those nodes' lines: a per-thread graph of 5M nodes of one line each no longer
 * makes a 64 MB table and a cache miss per line (issue 13: per thread, 1M samples, 2.5 s became 1.5 s).
 */
#define LINE_SCAN 8

static size_t line_home(uint32_t node, uint32_t line, size_t nslots)
{
	return mix32(node * 0x9e3779b1u ^ line) & (nslots - 1);
}

static void linetab_put(uint32_t *slots, size_t nslots, const struct fg_line *l, uint32_t id)
{
	size_t i = line_home(l->node, l->line, nslots);

	while (slots[i])
		i = (i + 1) & (nslots - 1);
	slots[i] = id + 1;
}

static int linetab_rehash(struct prs_fg *fg, size_t nslots)
{
	uint32_t *slots = calloc(nslots, sizeof(*slots));

	if (!slots)
		return -ENOMEM;
	for (size_t i = 0; i < fg->line_nslots; i++)
		if (fg->line_slots[i])
			linetab_put(slots, nslots, &fg->lines[fg->line_slots[i] - 1],
				    fg->line_slots[i] - 1);
	free(fg->line_slots);
	fg->line_slots = slots;
	fg->line_nslots = nslots;
	return 0;
}

/* Room in the table for `more` lines. 0 or -ENOMEM. */
static int linetab_reserve(struct prs_fg *fg, size_t more)
{
	size_t nslots = fg->line_nslots ? fg->line_nslots : 1024;

	while ((fg->line_nindexed + more) * 2 > nslots)
		nslots *= 2;
	return nslots > fg->line_nslots ? linetab_rehash(fg, nslots) : 0;
}

/* Appends the line to node's list. Its id, UINT32_MAX when out of memory. */
static uint32_t line_new(struct prs_fg *fg, uint32_t node, uint32_t line, uint64_t count)
{
	if (fg->nlines >= UINT32_MAX - 1 ||
	    prs_array_grow((void **)&fg->lines, &fg->lines_cap, fg->nlines + 1, sizeof(*fg->lines)) < 0)
		return UINT32_MAX;
	fg->lines[fg->nlines] = (struct fg_line){ .node = node, .line = line, .count = count,
						  .next = fg->nodes[node].first_line };
	fg->nodes[node].first_line = fg->nlines + 1;
	if (fg->nodes[node].nlines < LINE_SCAN)
		fg->nodes[node].nlines++;
	return fg->nlines++;
}

/* The line of a node with fewer than LINE_SCAN lines: walks its list. */
static int line_add_short(struct prs_fg *fg, uint32_t node, uint32_t line, uint64_t count)
{
	for (uint32_t l = fg->nodes[node].first_line; l; l = fg->lines[l - 1].next) {
		if (fg->lines[l - 1].line == line) {
			fg->lines[l - 1].count += count;
			return 0;
		}
	}
	if (fg->nodes[node].nlines == LINE_SCAN - 1 && linetab_reserve(fg, LINE_SCAN) < 0)
		return -ENOMEM;
	if (line_new(fg, node, line, count) == UINT32_MAX)
		return -ENOMEM;
	if (fg->nodes[node].nlines < LINE_SCAN)
		return 0;
	/* the node's list is now long: its lines go to the table, where later ones are found */
	for (uint32_t l = fg->nodes[node].first_line; l; l = fg->lines[l - 1].next) {
		linetab_put(fg->line_slots, fg->line_nslots, &fg->lines[l - 1], l - 1);
		fg->line_nindexed++;
	}
	return 0;
}

static int line_add(struct prs_fg *fg, uint32_t node, uint32_t line, uint64_t count)
{
	uint32_t id;
	size_t i;

	if (fg->nodes[node].nlines < LINE_SCAN)
		return line_add_short(fg, node, line, count);
	if (linetab_reserve(fg, 1) < 0)
		return -ENOMEM;
	for (i = line_home(node, line, fg->line_nslots); fg->line_slots[i];
	     i = (i + 1) & (fg->line_nslots - 1)) {
		struct fg_line *l = &fg->lines[fg->line_slots[i] - 1];

		if (l->node == node && l->line == line) {
			l->count += count;
			return 0;
		}
	}
	id = line_new(fg, node, line, count);
	if (id == UINT32_MAX)
		return -ENOMEM;
	fg->line_slots[i] = id + 1;
	fg->line_nindexed++;
	return 0;
}

/* ---- public ---- */

struct prs_fg *prs_fg_new(void)
{
	struct prs_fg *fg = calloc(1, sizeof(*fg));

	if (!fg)
		return NULL;
	fg->path = malloc((PRS_MAX_STACK_FRAMES + 1) * sizeof(*fg->path));
	fg->hbuf = malloc(PRS_MAX_STACK_FRAMES * sizeof(*fg->hbuf));
	if (!fg->path || !fg->hbuf || intern(fg, "", 0) != 0 ||
	    prs_array_grow((void **)&fg->nodes, &fg->nodes_cap, 1, sizeof(*fg->nodes)) < 0) {
		prs_fg_free(fg);
		return NULL;
	}
	fg->nodes[0] = (struct fg_node){ .kind = PRS_KIND_PROCESS, .hash = ROOT_HASH };
	fg->nnodes = 1;
	fg->nindexed = 1; /* the root is nobody's child: never in the table */
	bloom_resize(fg, 4096);
	return fg;
}

void prs_fg_free(struct prs_fg *fg)
{
	if (!fg)
		return;
	free(fg->arena);
	free(fg->strs);
	free(fg->str_slots);
	free(fg->nodes);
	free(fg->before);
	free(fg->node_slots);
	free(fg->bloom);
	free(fg->lines);
	free(fg->line_slots);
	free(fg->path);
	free(fg->hbuf);
	free(fg->draw);
	free(fg->scratch);
	free(fg);
}

int prs_fg_add2(struct prs_fg *fg, const struct prs_fg_frame *frames, size_t n, uint64_t before,
		uint64_t after)
{
	uint32_t cur = 0;
	bool same = true;

	if (n == 0 || (before == 0 && after == 0))
		return 0;
	if (after > MAX_TOTAL - fg->nodes[0].total || before > MAX_TOTAL - before_of(fg, 0))
		return -EOVERFLOW;
	if (n > PRS_MAX_STACK_FRAMES)
		n = PRS_MAX_STACK_FRAMES;
	/*
	 * Create every node first, so that ENOMEM leaves the counts consistent. Folded input is
	 * usually sorted, so consecutive stacks share a prefix: while the frames equal those of the
	 * previous stack (fg->path[0..fg->npath)), reuse its nodes without hashing.
	 */
	for (size_t i = 0; i < n; i++) {
		const struct prs_fg_frame *f = &frames[i];
		const char *name = f->name && f->name[0] ? f->name : "[unknown]";
		const char *file = f->file ? f->file : "";
		size_t nlen = strnlen(name, PRS_MAX_NAME), flen = strnlen(file, PRS_MAX_NAME);
		uint8_t kind = (unsigned)f->kind < PRS_KIND__COUNT ? (uint8_t)f->kind : PRS_KIND_UNKNOWN;
		uint32_t nid, fid;

		if (same && i < fg->npath) {
			const struct fg_node *pn = &fg->nodes[fg->path[i]];
			const struct fg_str *ps = &fg->strs[pn->name], *pf = &fg->strs[pn->file];

			if (pn->kind == kind && ps->len == nlen && pf->len == flen &&
			    memcmp(fg->arena + ps->off, name, nlen) == 0 &&
			    memcmp(fg->arena + pf->off, file, flen) == 0) {
				cur = fg->path[i];
				continue;
			}
		}
		same = false;
		nid = intern(fg, name, nlen);
		fid = flen ? intern(fg, file, flen) : 0;
		if (nid == UINT32_MAX || fid == UINT32_MAX)
			goto nomem;
		cur = child(fg, cur, nid, fid, kind);
		if (!cur)
			goto nomem;
		fg->path[i] = cur;
	}
	fg->npath = n;
	if (before && before_reserve(fg) < 0)
		goto nomem;
	/* Line counts may fail alone (ENOMEM): they are details, the counts stay right. */
	for (size_t i = 0; i < n; i++) {
		if (frames[i].line && line_add(fg, fg->path[i], frames[i].line, after ? after : before) < 0)
			break;
	}
	fg->nodes[0].total += after;
	for (size_t i = 0; i < n; i++)
		fg->nodes[fg->path[i]].total += after;
	if (before) {
		fg->before[0] += before;
		for (size_t i = 0; i < n; i++)
			fg->before[fg->path[i]] += before;
	}
	return 0;
nomem:
	fg->npath = 0;
	return -ENOMEM;
}

int prs_fg_add(struct prs_fg *fg, const struct prs_fg_frame *frames, size_t n, uint64_t count)
{
	return prs_fg_add2(fg, frames, n, 0, count);
}

uint32_t prs_fg_intern(struct prs_fg *fg, const char *s, size_t len)
{
	return intern(fg, s, len);
}

int prs_fg_intern_many(struct prs_fg *fg, const char *const *s, const uint32_t *len, size_t n,
		       uint32_t *ids)
{
	uint32_t *h = fg->hbuf;
	size_t k;

	if (n > PRS_MAX_STACK_FRAMES)
		return -EINVAL;
	/* the slots first, then the entries they point to, then the entries' bytes, for every
	 * string (each pass over the line gives the previous one's loads time to arrive); then the
	 * probes, which find them in cache */
	for (k = 0; k < n; k++) {
		h[k] = hash_fast(s[k], len[k] < PRS_MAX_NAME ? len[k] : PRS_MAX_NAME);
		if (fg->str_nslots)
			__builtin_prefetch(&fg->str_slots[slot_home(h[k], fg->str_nslots)]);
	}
	for (k = 0; k < n && fg->str_nslots; k++) {
		const struct fg_slot *sl = &fg->str_slots[slot_home(h[k], fg->str_nslots)];

		if (sl->id && sl->hash == h[k])
			__builtin_prefetch(&fg->strs[sl->id - 1]);
	}
	for (k = 0; k < n && fg->str_nslots; k++) {
		const struct fg_slot *sl = &fg->str_slots[slot_home(h[k], fg->str_nslots)];

		if (sl->id && sl->hash == h[k])
			__builtin_prefetch(fg->arena + fg->strs[sl->id - 1].off);
	}
	for (k = 0; k < n; k++) {
		ids[k] = intern_hashed(fg, s[k], len[k] < PRS_MAX_NAME ? len[k] : PRS_MAX_NAME, h[k]);
		if (ids[k] == UINT32_MAX)
			return -ENOMEM;
	}
	return 0;
}

int prs_fg_path(struct prs_fg *fg, uint32_t parent, const uint32_t *names, const uint8_t *kinds,
		size_t n, uint32_t *nodes)
{
	uint32_t *h = fg->hbuf, ph = fg->nodes[parent].hash;
	size_t ns, k;

	if (n > PRS_MAX_STACK_FRAMES)
		return -EINVAL;
	/* every node is in the table from here on (new ones as they are made), so the filter that
	 * kept lookups out of it has nothing left to do */
	free(fg->bloom);
	fg->bloom = NULL;
	fg->bloom_nbits = 0;
	fg->npath = 0;
	/* room for the nodes this path may add: no rehash midway */
	if (index_pending(fg, n) < 0)
		return -ENOMEM;
	ns = fg->node_nslots;
	for (k = 0; k < n; k++) {
		ph = h[k] = node_hash(ph, names[k], 0, kinds[k]);
		__builtin_prefetch(&fg->node_slots[slot_home(h[k], ns)]);
	}
	for (k = 0; k < n; k++) {
		const struct fg_slot *sl = &fg->node_slots[slot_home(h[k], ns)];

		if (sl->id && sl->hash == h[k])
			__builtin_prefetch(&fg->nodes[sl->id]);
	}
	for (k = 0; k < n; k++) {
		uint32_t id = 0;
		size_t i;

		for (i = slot_home(h[k], ns); fg->node_slots[i].id; i = slot_next(i, ns)) {
			const struct fg_node *e = &fg->nodes[fg->node_slots[i].id];

			if (fg->node_slots[i].hash == h[k] && e->parent == parent && e->name == names[k] &&
			    e->file == 0 && e->kind == kinds[k]) {
				id = fg->node_slots[i].id;
				break;
			}
		}
		if (!id) {
			id = new_node(fg, parent, names[k], 0, kinds[k], h[k]);
			if (!id)
				return -ENOMEM;
			fg->node_slots[i] = (struct fg_slot){ id, h[k] };
			fg->nindexed = fg->nnodes;
		}
		nodes[k] = parent = id;
	}
	return 0;
}

uint32_t prs_fg_child(struct prs_fg *fg, uint32_t parent, uint32_t name, uint32_t file, uint8_t kind)
{
	fg->npath = 0; /* the prefix cache of prs_fg_add2 no longer describes the last stack */
	return child(fg, parent, name, file, kind);
}

int prs_fg_line(struct prs_fg *fg, uint32_t node, uint32_t line, uint64_t count)
{
	return line_add(fg, node, line, count);
}

int prs_fg_count(struct prs_fg *fg, uint32_t node, uint64_t before, uint64_t after)
{
	if (after > MAX_TOTAL - fg->nodes[0].total || before > MAX_TOTAL - before_of(fg, 0))
		return -EOVERFLOW;
	if (before && before_reserve(fg) < 0)
		return -ENOMEM;
	for (uint32_t n = node; n; n = fg->nodes[n].parent) {
		fg->nodes[n].total += after;
		if (before)
			fg->before[n] += before;
	}
	fg->nodes[0].total += after;
	if (before)
		fg->before[0] += before;
	return 0;
}

int prs_fg_reserve(struct prs_fg *fg, size_t more)
{
	size_t need = (size_t)fg->nnodes + more;

	if (more > UINT32_MAX - 1 - fg->nnodes)
		return -ENOMEM;
	if (fg->bloom_nbits && need * BLOOM_BITS_PER_NODE > fg->bloom_nbits)
		bloom_resize(fg, need);
	return prs_array_grow((void **)&fg->nodes, &fg->nodes_cap, need, sizeof(*fg->nodes));
}

int prs_fg_count_all(struct prs_fg *fg, uint64_t *self, uint32_t n, bool before)
{
	uint64_t sum = 0;

	if (n > fg->nnodes)
		n = fg->nnodes;
	for (uint32_t k = 0; k < n; k++) {
		if (self[k] > MAX_TOTAL - sum)
			return -EOVERFLOW;
		sum += self[k];
	}
	if (sum > MAX_TOTAL - (before ? before_of(fg, 0) : fg->nodes[0].total))
		return -EOVERFLOW;
	if (before && before_reserve(fg) < 0)
		return -ENOMEM;
	/* children before parents: ids decrease towards the root (child() gives a new node the
	 * next id, its parent already exists); self[k] becomes the sum of k's subtree */
	for (uint32_t k = n; k-- > 0;) {
		uint32_t parent = fg->nodes[k].parent;

		if (k && parent < k)
			self[parent] += self[k];
		if (before)
			fg->before[k] += self[k];
		else
			fg->nodes[k].total += self[k];
	}
	return 0;
}

int prs_fg_add_self(struct prs_fg *fg, uint32_t node, uint64_t count)
{
	if (count > MAX_TOTAL - fg->self_sum)
		return -EOVERFLOW;
	fg->self_sum += count;
	fg->nodes[node].total += count;
	return 0;
}

void prs_fg_sum_self(struct prs_fg *fg)
{
	/* children before parents: a node's parent has a smaller id */
	for (uint32_t k = fg->nnodes; k-- > 1;)
		fg->nodes[fg->nodes[k].parent].total += fg->nodes[k].total;
	fg->self_sum = 0;
}

uint64_t prs_fg_total(const struct prs_fg *fg)
{
	return fg->nodes[0].total;
}

uint64_t prs_fg_total_before(const struct prs_fg *fg)
{
	return before_of(fg, 0);
}

size_t prs_fg_drawn(const struct prs_fg *fg)
{
	return fg->ndraw;
}

void prs_fg_opts_init(struct prs_fg_opts *opts)
{
	memset(opts, 0, sizeof(*opts));
	opts->min_width = 0.1;
}
