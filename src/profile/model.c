/* SPDX-License-Identifier: MIT */
/*
 * The in-memory profile: dense arrays of strings, mappings, frames, stack-trie nodes, samples,
 * threads and meta, with O(1) interning through the tables in struct prs_profile_index. The
 * sampler calls prs_profile_raw_frame / prs_profile_stack / prs_profile_sample for every sample,
 * so those only probe a hash table and append to an amortised array: no allocation once warm.
 *
 * Invariants every reader of the arrays may rely on (the .pyrs reader enforces them on files):
 * string 0 is "", stack 0 is the root; every id stored in an entry is smaller than the count of
 * its array; a stack's parent id is smaller than its own id (the trie has no cycles) and its depth
 * is its parent's plus one; expansions hold named (never raw) frame ids.
 */
#include "profile/profile-internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/banned.h"

#define GROW(arr, capfield, need)                                                              \
	prs_array_grow((void **)&(arr), &(capfield), (need), sizeof(*(arr)))

struct prs_profile *prs_profile_new(void)
{
	struct prs_profile *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->index = calloc(1, sizeof(*p->index));
	if (!p->index)
		goto fail;
	prs_strmap_init(&p->index->strings);
	prs_idset_init(&p->index->mappings);
	prs_idset_init(&p->index->frames);
	prs_map64_init(&p->index->stacks);
	prs_map64_init(&p->index->raw_pcs);
	if (prs_profile_string(p, "", 0) != 0)
		goto fail;
	if (GROW(p->stacks, p->index->cap_stacks, 1))
		goto fail;
	p->stacks[0] = (struct prs_stack){ 0, 0, 0 };
	p->nstacks = 1;
	return p;
fail:
	prs_profile_free(p);
	return NULL;
}

void prs_profile_free(struct prs_profile *p)
{
	uint32_t i;

	if (!p)
		return;
	free(p->strings);
	free(p->string_lens);
	free(p->mappings);
	free(p->frames);
	free(p->stacks);
	free(p->samples);
	free(p->thread_sums);
	free(p->threads);
	free(p->processes);
	free(p->meta);
	free(p->expansions);
	free(p->expand_ids);
	for (i = 0; i < p->nacct; i++)
		free(p->acct[i].data);
	free(p->acct);
	if (p->index) {
		prs_strmap_release(&p->index->strings);
		prs_idset_release(&p->index->mappings);
		prs_idset_release(&p->index->frames);
		prs_map64_release(&p->index->stacks);
		prs_map64_release(&p->index->raw_pcs);
		free(p->index->expand_log);
		prs_profile_agg_free(p->index->agg);
		for (size_t k = 0; k < p->index->nstr_blocks; k++)
			free(p->index->str_blocks[k]);
		free(p->index->str_blocks);
		free(p->index);
	}
	free(p);
}

/* ---- strings ---- */

/*
 * The interning tables are filled lazily (profile-internal.h): these put the entries appended
 * since the last interning call of their kind (ids [indexed, n)) into the table, the first id of
 * equal entries winning as a file's reader wants. 0 or -ENOMEM (the table then covers a prefix).
 */
static int index_strings(struct prs_profile *p)
{
	struct prs_profile_index *ix = p->index;

	for (; ix->indexed_strings < p->nstrings; ix->indexed_strings++) {
		uint32_t id = ix->indexed_strings;
		const char *k = p->strings[id];

		if (prs_strmap_get(&ix->strings, k, p->string_lens[id]) == PRS_MAP_NONE &&
		    prs_strmap_put(&ix->strings, k, p->string_lens[id], id))
			return -ENOMEM;
	}
	return 0;
}

/* index_strings' twin for the structs of an id set: entries [*indexed, n) of arr into set. */
static int index_set(const struct prs_profile *p, struct prs_idset *set, uint32_t *indexed,
		     uint32_t n, const void *arr, size_t size, uint32_t (*hash)(const void *),
		     prs_idset_eq_fn eq)
{
	for (; *indexed < n; (*indexed)++) {
		const void *e = (const char *)arr + (size_t)*indexed * size;
		uint32_t h = hash(e);

		if (prs_idset_find(set, h, eq, p, e) == PRS_MAP_NONE && prs_idset_insert(set, h, *indexed))
			return -ENOMEM;
	}
	return 0;
}

static int index_mappings(struct prs_profile *p);
static int index_frames(struct prs_profile *p);

static int index_stacks(struct prs_profile *p)
{
	struct prs_profile_index *ix = p->index;
	uint32_t old;

	for (; ix->indexed_stacks < p->nstacks; ix->indexed_stacks++) {
		const struct prs_stack *st = &p->stacks[ix->indexed_stacks];

		if (!ix->indexed_stacks)
			continue; /* the root is nobody's child */
		if (prs_map64_intern(&ix->stacks, ((uint64_t)st->parent << 32) | st->frame,
				     ix->indexed_stacks, &old) < 0)
			return -ENOMEM;
	}
	return 0;
}

void prs_profile_drop_index(struct prs_profile *p)
{
	struct prs_profile_index *ix = p->index;

	prs_strmap_release(&ix->strings);
	prs_idset_release(&ix->mappings);
	prs_idset_release(&ix->frames);
	prs_map64_release(&ix->stacks);
	prs_map64_release(&ix->raw_pcs);
	ix->indexed_strings = ix->indexed_mappings = ix->indexed_frames = ix->indexed_stacks = 0;
}

uint32_t prs_profile_string_find(const struct prs_profile *p, const char *s, size_t len)
{
	const struct prs_profile_index *ix = p->index;
	uint32_t id = prs_strmap_get(&ix->strings, s, len);

	if (id != PRS_MAP_NONE)
		return id;
	for (id = ix->indexed_strings; id < p->nstrings; id++)
		if (p->string_lens[id] == len && memcmp(p->strings[id], s, len) == 0)
			return id;
	return PRS_MAP_NONE;
}

/*
 * Room for n bytes of a string, in the block being filled, or a new one: blocks of 4 KB, each
 * twice the last up to STR_BLOCK bytes (a small profile's strings take a few KB), a string longer
 * than a quarter of STR_BLOCK in a block of its own. One malloc per string was ~1.0 MB for the
 * 30,304 strings (419 KB of text) of view_bench's profile: glibc's 8-byte header and 32-byte
 * minimum chunk. NULL on ENOMEM.
 */
#define STR_BLOCK (64u * 1024)

static char *string_room(struct prs_profile_index *ix, size_t n)
{
	bool own = n > STR_BLOCK / 4;
	size_t size = ix->str_cap ? ix->str_cap * 2 : 4096;
	char *b;

	if (size > STR_BLOCK)
		size = STR_BLOCK;
	while (!own && size < n) /* (n <= STR_BLOCK / 4: a few doublings at most) */
		size *= 2;

	if (!own && ix->str_cur && ix->str_cap - ix->str_used >= n) {
		b = ix->str_cur + ix->str_used;
		ix->str_used += n;
		return b;
	}
	if (GROW(ix->str_blocks, ix->cap_str_blocks, ix->nstr_blocks + 1) ||
	    !(b = malloc(own ? n : size)))
		return NULL;
	ix->str_blocks[ix->nstr_blocks++] = b;
	if (!own) { /* (what was left of the previous block stays unused) */
		ix->str_cur = b;
		ix->str_cap = size;
		ix->str_used = n;
	}
	return b;
}

uint32_t prs_profile_string_append(struct prs_profile *p, const char *s, size_t len)
{
	struct prs_profile_index *ix = p->index;
	size_t cap;
	char *copy;
	uint32_t id = p->nstrings;

	if (id == UINT32_MAX - 1 || len > PRS_PROFILE_MAX_STRING)
		return UINT32_MAX;
	cap = ix->cap_strings;
	if (GROW(p->strings, cap, (size_t)id + 1))
		return UINT32_MAX;
	if (GROW(p->string_lens, ix->cap_strings, (size_t)id + 1))
		return UINT32_MAX;
	copy = string_room(ix, len + 1);
	if (!copy)
		return UINT32_MAX;
	if (len)
		memcpy(copy, s, len);
	copy[len] = '\0';
	p->strings[id] = copy;
	p->string_lens[id] = (uint32_t)len;
	p->nstrings = id + 1;
	return id;
}

uint32_t prs_profile_string(struct prs_profile *p, const char *s, size_t len)
{
	const char *nul;
	uint32_t id;

	if (!s)
		len = 0;
	if (len > PRS_PROFILE_MAX_STRING)
		len = PRS_PROFILE_MAX_STRING;
	/* strings are C strings for their users: keep what precedes an embedded NUL */
	nul = len ? memchr(s, '\0', len) : NULL;
	if (nul)
		len = (size_t)(nul - s);
	if (index_strings(p))
		return UINT32_MAX;
	id = prs_strmap_get(&p->index->strings, len ? s : "", len);
	if (id != PRS_MAP_NONE)
		return id;
	id = prs_profile_string_append(p, len ? s : "", len);
	if (id != UINT32_MAX && index_strings(p)) {
		/* not in the table: take it back, so that no string is left out of it (its bytes stay
		 * in their block until the profile is freed) */
		p->nstrings = id;
		return UINT32_MAX;
	}
	return id;
}

uint32_t prs_profile_string_hashed(struct prs_profile *p, const char *s, size_t len, uint32_t hash)
{
	uint32_t id;

	if (len && index_strings(p) == 0) {
		id = prs_strmap_get_hashed(&p->index->strings, s, len, hash);
		if (id != PRS_MAP_NONE)
			return id;
	}
	return prs_profile_string(p, s, len);
}

void prs_profile_string_prefetch(const struct prs_profile *p, uint32_t hash, bool key)
{
	if (key)
		prs_strmap_prefetch_key(&p->index->strings, hash);
	else
		prs_strmap_prefetch(&p->index->strings, hash);
}

/* ---- mappings ---- */

static uint32_t mapping_hash(const struct prs_mapping *m)
{
	uint64_t h = prs_hash64(m->start ^ prs_hash64(m->end ^ prs_hash64(m->offset + m->path +
								      ((uint64_t)(uint32_t)m->pid << 32))));

	return (uint32_t)(h ^ prs_hash_bytes(m->build_id, m->build_id_len));
}

static bool mapping_eq(const void *ctx, uint32_t id, const void *key)
{
	const struct prs_mapping *a = &((const struct prs_profile *)ctx)->mappings[id], *b = key;

	return a->start == b->start && a->end == b->end && a->offset == b->offset &&
	       a->path == b->path && a->pid == b->pid && a->build_id_len == b->build_id_len &&
	       memcmp(a->build_id, b->build_id, a->build_id_len) == 0;
}

uint32_t prs_profile_mapping_append(struct prs_profile *p, const struct prs_mapping *m)
{
	struct prs_profile_index *ix = p->index;
	struct prs_mapping c;
	uint32_t id = p->nmappings;

	if (id == UINT32_MAX - 1 || m->path >= p->nstrings || m->build_id_len > PRS_BUILD_ID_MAX ||
	    m->pid < 0)
		return UINT32_MAX;
	if (GROW(p->mappings, ix->cap_mappings, (size_t)id + 1))
		return UINT32_MAX;
	/* a canonical copy: unused build id bytes are zero so equal mappings compare equal */
	memset(&c, 0, sizeof(c));
	c.start = m->start;
	c.end = m->end;
	c.offset = m->offset;
	c.path = m->path;
	c.pid = m->pid;
	c.build_id_len = m->build_id_len;
	memcpy(c.build_id, m->build_id, m->build_id_len);
	p->mappings[id] = c;
	p->nmappings = id + 1;
	return id;
}

uint32_t prs_profile_mapping(struct prs_profile *p, const struct prs_mapping *m)
{
	uint32_t id;

	if (m->build_id_len > PRS_BUILD_ID_MAX || m->path >= p->nstrings || m->pid < 0)
		return UINT32_MAX;
	if (index_mappings(p))
		return UINT32_MAX;
	id = prs_idset_find(&p->index->mappings, mapping_hash(m), mapping_eq, p, m);
	if (id != PRS_MAP_NONE)
		return id;
	id = prs_profile_mapping_append(p, m);
	if (id != UINT32_MAX && index_mappings(p)) {
		p->nmappings = id;
		return UINT32_MAX;
	}
	return id;
}

static uint32_t mapping_hash_of(const void *m)
{
	return mapping_hash(m);
}

static int index_mappings(struct prs_profile *p)
{
	return index_set(p, &p->index->mappings, &p->index->indexed_mappings, p->nmappings,
			 p->mappings, sizeof(*p->mappings), mapping_hash_of, mapping_eq);
}

/* ---- frames ---- */

static uint32_t frame_hash(const struct prs_frame *f)
{
	uint64_t h;

	if (f->raw)
		h = prs_hash64(f->addr ^ prs_hash64(((uint64_t)f->mapping << 1) | f->activation));
	else
		h = prs_hash64((((uint64_t)f->name << 32) | f->file) ^
			       prs_hash64(((uint64_t)f->line << 8) | f->kind | (1ULL << 63)));
	return (uint32_t)h;
}

static bool frame_eq(const void *ctx, uint32_t id, const void *key)
{
	const struct prs_frame *a = &((const struct prs_profile *)ctx)->frames[id], *b = key;

	if (a->raw != b->raw)
		return false;
	if (a->raw)
		return a->addr == b->addr && a->mapping == b->mapping && a->activation == b->activation;
	return a->name == b->name && a->file == b->file && a->line == b->line && a->kind == b->kind;
}

uint32_t prs_profile_frame_append(struct prs_profile *p, const struct prs_frame *f)
{
	struct prs_profile_index *ix = p->index;
	uint32_t id = p->nframes;

	if (id == UINT32_MAX - 1)
		return UINT32_MAX;
	if (GROW(p->frames, ix->cap_frames, (size_t)id + 1))
		return UINT32_MAX;
	if (p->expansions) {
		if (GROW(p->expansions, ix->cap_expansions, (size_t)id + 1))
			return UINT32_MAX;
		p->expansions[id] = (struct prs_expansion){ 0, 0 };
	}
	p->frames[id] = *f;
	p->nframes = id + 1;
	return id;
}

static uint32_t frame_hash_of(const void *f)
{
	return frame_hash(f);
}

static int index_frames(struct prs_profile *p)
{
	return index_set(p, &p->index->frames, &p->index->indexed_frames, p->nframes, p->frames,
			 sizeof(*p->frames), frame_hash_of, frame_eq);
}

static uint32_t frame_intern(struct prs_profile *p, const struct prs_frame *f)
{
	uint32_t id;

	if (index_frames(p))
		return UINT32_MAX;
	id = prs_idset_find(&p->index->frames, frame_hash(f), frame_eq, p, f);
	if (id != PRS_MAP_NONE)
		return id;
	id = prs_profile_frame_append(p, f);
	if (id != UINT32_MAX && index_frames(p)) {
		p->nframes = id;
		return UINT32_MAX;
	}
	return id;
}

uint32_t prs_profile_raw_frame(struct prs_profile *p, uint32_t mapping, uint64_t addr, bool activation)
{
	uint64_t key = addr ^ ((uint64_t)activation << 63);
	uint32_t id = prs_map64_get(&p->index->raw_pcs, key);
	struct prs_frame f;

	/* the sampler's common case: one u64 probe, then a check that it is the same frame */
	if (id != PRS_MAP_NONE) {
		const struct prs_frame *c = &p->frames[id];

		if (c->addr == addr && c->mapping == mapping && c->activation == activation)
			return id;
	}
	if (mapping != PRS_NO_MAPPING && mapping >= p->nmappings)
		return UINT32_MAX;
	memset(&f, 0, sizeof(f));
	f.kind = PRS_KIND_UNKNOWN;
	f.raw = true;
	f.activation = activation;
	f.mapping = mapping;
	f.addr = addr;
	id = frame_intern(p, &f);
	/* remember the first frame seen at this key; a failure here only costs speed */
	if (id != UINT32_MAX)
		prs_map64_intern(&p->index->raw_pcs, key, id, &(uint32_t){ 0 });
	return id;
}

uint32_t prs_profile_named_frame(struct prs_profile *p, enum prs_kind kind, uint32_t name,
				 uint32_t file, uint32_t line)
{
	struct prs_frame f;

	if (name >= p->nstrings || file >= p->nstrings || (unsigned)kind > UINT8_MAX)
		return UINT32_MAX;
	memset(&f, 0, sizeof(f));
	f.kind = (uint8_t)kind;
	f.mapping = PRS_NO_MAPPING;
	f.name = name;
	f.file = file;
	f.line = line;
	return frame_intern(p, &f);
}

/* ---- stacks ---- */

uint32_t prs_profile_stack_append(struct prs_profile *p, uint32_t parent, uint32_t frame)
{
	struct prs_profile_index *ix = p->index;
	uint32_t id = p->nstacks;

	if (id == UINT32_MAX - 1 || parent >= id || frame >= p->nframes ||
	    p->stacks[parent].depth >= PRS_PROFILE_MAX_DEPTH)
		return UINT32_MAX;
	if (GROW(p->stacks, ix->cap_stacks, (size_t)id + 1))
		return UINT32_MAX;
	p->stacks[id].parent = parent;
	p->stacks[id].frame = frame;
	p->stacks[id].depth = p->stacks[parent].depth + 1;
	p->nstacks = id + 1;
	return id;
}

uint32_t prs_profile_stack(struct prs_profile *p, uint32_t parent, uint32_t frame)
{
	struct prs_profile_index *ix = p->index;
	uint32_t id = p->nstacks, got;
	int rc;

	if (id == UINT32_MAX - 1 || parent >= id || frame >= p->nframes ||
	    p->stacks[parent].depth >= PRS_PROFILE_MAX_DEPTH)
		return UINT32_MAX;
	/* reserve the slot first so that a hit and a miss cost one probe */
	if (id >= ix->cap_stacks && GROW(p->stacks, ix->cap_stacks, (size_t)id + 1))
		return UINT32_MAX;
	if (ix->indexed_stacks < id && index_stacks(p))
		return UINT32_MAX;
	rc = prs_map64_intern(&ix->stacks, ((uint64_t)parent << 32) | frame, id, &got);
	if (rc <= 0)
		return rc < 0 ? UINT32_MAX : got;
	p->stacks[id].parent = parent;
	p->stacks[id].frame = frame;
	p->stacks[id].depth = p->stacks[parent].depth + 1;
	p->nstacks = id + 1;
	ix->indexed_stacks = id + 1;
	return id;
}

/* ---- samples, threads, meta ---- */

int prs_profile_sample(struct prs_profile *p, const struct prs_sample *s)
{
	struct prs_profile_index *ix = p->index;
	int rc;

	if (s->stack >= p->nstacks || s->pid < 0)
		return -EINVAL;
	if (ix->agg) {
		if ((rc = prs_profile_agg_sample(p, s)) != 0)
			return rc;
	} else {
		if (p->nsamples >= ix->cap_samples && GROW(p->samples, ix->cap_samples, p->nsamples + 1))
			return -ENOMEM;
		p->samples[p->nsamples++] = *s;
	}
	/* samples of one tick share a time (the classifier's tick count) */
	if (p->sample_count == 0 || s->time_ns != ix->last_time_ns)
		p->sample_times++;
	ix->last_time_ns = s->time_ns;
	p->sample_count++;
	return 0;
}

int prs_profile_thread_pid(struct prs_profile *p, int32_t pid, int32_t tid, uint32_t name)
{
	if (name >= p->nstrings || pid < 0 || p->nthreads == UINT32_MAX - 1)
		return -EINVAL;
	if (GROW(p->threads, p->index->cap_threads, (size_t)p->nthreads + 1))
		return -ENOMEM;
	p->threads[p->nthreads].tid = tid;
	p->threads[p->nthreads].name = name;
	p->threads[p->nthreads].pid = pid;
	p->nthreads++;
	return 0;
}

int prs_profile_thread(struct prs_profile *p, int32_t tid, uint32_t name)
{
	return prs_profile_thread_pid(p, 0, tid, name);
}

int prs_profile_process_append(struct prs_profile *p, const struct prs_process *pr)
{
	if (pr->pid <= 0 || pr->ppid < 0 || pr->command >= p->nstrings ||
	    p->nprocesses == UINT32_MAX - 1)
		return -EINVAL;
	if (GROW(p->processes, p->index->cap_processes, (size_t)p->nprocesses + 1))
		return -ENOMEM;
	p->processes[p->nprocesses++] = *pr;
	return 0;
}

int prs_profile_process(struct prs_profile *p, int32_t pid, int32_t ppid, uint32_t command,
			uint64_t time_ns)
{
	uint32_t i;

	/* the latest entry of pid: nothing to add when it says the same (processes are few) */
	for (i = p->nprocesses; i-- > 0;)
		if (p->processes[i].pid == pid) {
			if (p->processes[i].ppid == ppid && p->processes[i].command == command)
				return 0;
			break;
		}
	return prs_profile_process_append(p, &(struct prs_process){ .pid = pid, .ppid = ppid,
								    .command = command,
								    .time_ns = time_ns });
}

int prs_profile_meta_ids(struct prs_profile *p, uint32_t key, uint32_t value)
{
	if (key >= p->nstrings || value >= p->nstrings || p->nmeta == UINT32_MAX - 1)
		return -EINVAL;
	if (GROW(p->meta, p->index->cap_meta, (size_t)p->nmeta + 1))
		return -ENOMEM;
	p->meta[p->nmeta].key = key;
	p->meta[p->nmeta].value = value;
	p->nmeta++;
	return 0;
}

int prs_profile_meta(struct prs_profile *p, const char *key, const char *value)
{
	uint32_t k = prs_profile_string(p, key, key ? strlen(key) : 0);
	uint32_t v = prs_profile_string(p, value, value ? strlen(value) : 0);

	if (k == UINT32_MAX || v == UINT32_MAX)
		return -ENOMEM;
	return prs_profile_meta_ids(p, k, v);
}

const char *prs_profile_meta_get(const struct prs_profile *p, const char *key)
{
	uint32_t i;

	for (i = 0; i < p->nmeta; i++)
		if (strcmp(p->strings[p->meta[i].key], key) == 0)
			return p->strings[p->meta[i].value];
	return NULL;
}

int prs_profile_acct(struct prs_profile *p, uint8_t type, const void *data, size_t len)
{
	uint8_t *copy;

	if (type < PRS_ACCT_REC_FIRST || type > PRS_ACCT_REC_LAST || len > PRS_ACCT_REC_MAX ||
	    p->nacct == UINT32_MAX - 1)
		return -EINVAL;
	if (GROW(p->acct, p->index->cap_acct, (size_t)p->nacct + 1))
		return -ENOMEM;
	copy = malloc(len ? len : 1);
	if (!copy)
		return -ENOMEM;
	if (len)
		memcpy(copy, data, len);
	p->acct[p->nacct++] = (struct prs_acct_record){ type, (uint32_t)len, copy };
	return 0;
}

/* ---- expansions ---- */

int prs_profile_expand(struct prs_profile *p, uint32_t frame, const uint32_t *ids, uint32_t n)
{
	struct prs_profile_index *ix = p->index;
	uint32_t i, first;

	if (frame >= p->nframes || n > PRS_MAX_STACK_FRAMES)
		return -EINVAL;
	for (i = 0; i < n; i++)
		if (ids[i] >= p->nframes || p->frames[ids[i]].raw)
			return -EINVAL;
	if (n > UINT32_MAX - 1 - p->nexpand_ids)
		return -ENOMEM;
	if (!p->expansions) {
		if (GROW(p->expansions, ix->cap_expansions, p->nframes))
			return -ENOMEM;
		memset(p->expansions, 0, ix->cap_expansions * sizeof(*p->expansions));
	}
	if (GROW(p->expand_ids, ix->cap_expand_ids, (size_t)p->nexpand_ids + n))
		return -ENOMEM;
	if (GROW(ix->expand_log, ix->cap_expand_log, ix->nexpand_log + 1))
		return -ENOMEM;
	first = p->nexpand_ids;
	if (n)
		memcpy(p->expand_ids + first, ids, n * sizeof(*ids));
	p->nexpand_ids += n;
	p->expansions[frame].first = first;
	p->expansions[frame].count = n;
	ix->expand_log[ix->nexpand_log++] = frame;
	return 0;
}

/* ---- reading the model ---- */

const uint32_t *prs_profile_expansion(const struct prs_profile *p, const uint32_t *frame, uint32_t *n)
{
	/* counts are bounded against expand_ids so that a profile built by hand cannot send a reader
	 * out of the array */
	if (p->expansions && *frame < p->nframes) {
		const struct prs_expansion *e = &p->expansions[*frame];

		if (e->count && e->first <= p->nexpand_ids && e->count <= p->nexpand_ids - e->first) {
			*n = e->count;
			return p->expand_ids + e->first;
		}
	}
	*n = 1;
	return frame;
}

size_t prs_profile_stack_frames(const struct prs_profile *p, uint32_t stack, uint32_t *out, size_t max)
{
	size_t total = 0, pos;
	uint32_t s, n;

	if (stack >= p->nstacks)
		return 0;
	for (s = stack; s != 0; s = p->stacks[s].parent) {
		prs_profile_expansion(p, &p->stacks[s].frame, &n);
		total += n;
	}
	/* fill from the leaf end; positions beyond max (the leaf side) are dropped */
	pos = total;
	for (s = stack; s != 0; s = p->stacks[s].parent) {
		const uint32_t *ids = prs_profile_expansion(p, &p->stacks[s].frame, &n);

		while (n-- > 0)
			if (--pos < max)
				out[pos] = ids[n];
	}
	return total < max ? total : max;
}

static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash && slash[1] ? slash + 1 : path;
}

const char *prs_profile_frame_label(const struct prs_profile *p, uint32_t frame, char *buf, size_t size)
{
	const struct prs_frame *f;

	if (!size)
		return buf;
	if (frame >= p->nframes) {
		snprintf(buf, size, "[bad frame %" PRIu32 "]", frame);
		return buf;
	}
	f = &p->frames[frame];
	if (!f->raw) {
		snprintf(buf, size, "%s", f->name ? p->strings[f->name] : "[unknown]");
	} else if (f->mapping != PRS_NO_MAPPING && f->mapping < p->nmappings) {
		const struct prs_mapping *m = &p->mappings[f->mapping];
		const char *path = p->strings[m->path];

		snprintf(buf, size, "%s+0x%" PRIx64, path[0] ? base_name(path) : "[anon]",
			 f->addr - m->start + m->offset);
	} else {
		snprintf(buf, size, "[unknown]");
	}
	return buf;
}

int prs_profile_offcpu_label(const struct prs_sample *s, char *buf, size_t size, enum prs_kind *kind)
{
	const char *name;

	if (s->state == PRS_STATE_RUNNING)
		return 0;
	if (s->flags & PRS_SAMPLE_GIL_WAIT) {
		/* the sampler saw a futex wait on the GIL's address: the reason, not just the syscall */
		snprintf(buf, size, "[waiting for the GIL]");
		*kind = PRS_KIND_OFF_GIL;
		return 1;
	}
	*kind = PRS_KIND_OFF_OTHER;
	if (s->state == PRS_STATE_BLOCKED || s->state == PRS_STATE_DISK) {
		if (s->syscall >= 0) {
			name = prs_syscall_name(s->syscall);
			if (name)
				snprintf(buf, size, "[%s]", name);
			else
				snprintf(buf, size, "[syscall %d]", s->syscall);
			*kind = s->state == PRS_STATE_DISK ? PRS_KIND_OFF_IO : prs_syscall_kind(s->syscall);
		} else if (s->state == PRS_STATE_DISK) {
			snprintf(buf, size, "[disk wait]");
			*kind = PRS_KIND_OFF_IO;
		} else {
			snprintf(buf, size, "[blocked]");
		}
	} else if (s->state == PRS_STATE_STOPPED) {
		snprintf(buf, size, "[stopped]");
	} else if (s->state == PRS_STATE_RUNQUEUE) {
		snprintf(buf, size, "[waiting for a cpu]");
	} else {
		snprintf(buf, size, "[off-cpu]");
	}
	return 1;
}

bool prs_sample_in_view(const struct prs_sample *s, enum prs_view view)
{
	return view == PRS_VIEW_WALL || s->state == PRS_STATE_RUNNING;
}

uint32_t prs_profile_offcpu_frame(struct prs_profile *p, const struct prs_sample *s)
{
	enum prs_kind kind;
	char label[64];
	uint32_t name;

	if (!prs_profile_offcpu_label(s, label, sizeof(label), &kind))
		return UINT32_MAX;
	name = prs_profile_string(p, label, strlen(label));
	if (name == UINT32_MAX)
		return UINT32_MAX;
	return prs_profile_named_frame(p, kind, name, 0, 0);
}
