/* SPDX-License-Identifier: MIT */
/*
 * Private to src/profile: the interning tables behind struct prs_profile and the capacities of
 * its arrays, shared by the model, the .pyrs writer and the readers.
 */
#ifndef PYRSPROF_PROFILE_INTERNAL_H
#define PYRSPROF_PROFILE_INTERNAL_H

#include "pyrsprof/profile.h"
#include "pyrsprof/util.h"

/*
 * The interning tables are lazy: an entry appended without interning (the readers' *_append
 * below: a file's entries are already distinct) is not put in them, and the tables cover ids
 * [0, indexed_*) only; the first interning call of a kind puts in the rest (the first id of
 * equal entries wins). So a profile that is read and only looked at never builds them, and
 * prs_profile_drop_index() may free them (they are rebuilt when needed).
 */
struct prs_profile_index {
	struct prs_strmap strings; /* keys borrowed from p->strings */
	struct prs_idset mappings, frames;
	struct prs_map64 stacks;   /* (parent << 32 | frame) -> stack id */
	struct prs_map64 raw_pcs;  /* hot-path cache: addr ^ activation << 63 -> a raw frame id (verified) */
	uint32_t indexed_strings, indexed_mappings, indexed_frames, indexed_stacks;
	size_t cap_strings, cap_mappings, cap_frames, cap_stacks, cap_samples, cap_threads,
		cap_processes, cap_meta, cap_expand_ids, cap_expansions, cap_acct;
	/* frame ids in the order prs_profile_expand was called: what the writer emits as EXPAND */
	uint32_t *expand_log;
	size_t nexpand_log, cap_expand_log;
	uint64_t last_time_ns; /* of the latest sample added (p->sample_times) */
	/* the strings' bytes (model.c): blocks freed with the profile, the latest filled in turn */
	char **str_blocks;
	size_t nstr_blocks, cap_str_blocks;
	char *str_cur; /* the block being filled (also in str_blocks), NULL for none */
	size_t str_used, str_cap;
	struct prs_profile_agg *agg; /* NULL unless the samples are aggregated (aggregate.c) */
};

/*
 * Aggregated samples (aggregate.c; the recorder's prs_recorder_aggregate): from now on p->samples
 * holds one record per distinct (stack, pid, tid, state, syscall, flags, process epoch), its
 * weight the sum of its samples' and its time_ns the latest of theirs; the samples themselves
 * wait in a pending array for the writer (keep_pending: the recorder's), or are not kept (a
 * reader's sums: the file has them). -EINVAL once samples were added, or when p aggregates already
 * with the other keep_pending; else 0 or -ENOMEM.
 */
int prs_profile_agg_enable(struct prs_profile *p, bool keep_pending);
/* The same for a reader's sums without threads (keep_pending false): p->samples keyed with tid 0,
 * p->thread_sums per thread (aggregate.c, PRS_PYRS_SUMS_NO_THREADS). */
int prs_profile_agg_enable_merged(struct prs_profile *p);
void prs_profile_agg_free(struct prs_profile_agg *a);
/*
 * Cache hints for a reader that adds samples in bulk: each lookup of a big table is a cache miss on
 * its slot, then one on the record it names. Stage 0 asks for s's slot, stage 1 (some samples
 * later, the slot in the cache by then) for its record; prs_profile_sample adds it later still.
 * Only hints: anything added in between is still found. No-op unless p aggregates.
 */
void prs_profile_agg_prefetch(const struct prs_profile *p, const struct prs_sample *s, int stage);
/* Frees the table of an aggregating profile and fits its records' array: a reader's sums once
 * read. The records stay; adding a sample then fails (-EINVAL). */
void prs_profile_agg_seal(struct prs_profile *p);
/* prs_profile_sample of an aggregating profile (s checked). 0, -ENOMEM, or -EINVAL once sealed. */
int prs_profile_agg_sample(struct prs_profile *p, const struct prs_sample *s);
/* The samples added since prs_profile_pending_taken (all of them, in order; none when p does not
 * aggregate: then they are p->samples). */
const struct prs_sample *prs_profile_pending(const struct prs_profile *p, size_t *n);
void prs_profile_pending_taken(struct prs_profile *p);

/* Deepest stack the model holds (folded input can be deeper than a sampled stack). */
#define PRS_PROFILE_MAX_DEPTH (64u * 1024)

/* Maximum length of one string in a profile (bytes); longer input is truncated by the model. */
#define PRS_PROFILE_MAX_STRING (1u << 20)

/* Appends a string without interning (the reader: strings in a file are already unique, but a
 * hostile file may repeat one; the first id wins in the interning table). UINT32_MAX on ENOMEM. */
uint32_t prs_profile_string_append(struct prs_profile *p, const char *s, size_t len);
/*
 * prs_profile_string for a reader that hashed the string already (hash = (uint32_t)
 * prs_hash_bytes(s, len); s without NUL, len at most PRS_PROFILE_MAX_STRING), and the prefetches
 * of its lookup (prs_strmap_prefetch*): the folded reader hashes a line's frames first, asks for
 * their slots and key bytes, then interns them, so that their cache misses overlap.
 */
uint32_t prs_profile_string_hashed(struct prs_profile *p, const char *s, size_t len, uint32_t hash);
void prs_profile_string_prefetch(const struct prs_profile *p, uint32_t hash, bool key);
/* Appends a frame or mapping exactly as given (ids already validated by the caller). */
uint32_t prs_profile_frame_append(struct prs_profile *p, const struct prs_frame *f);
uint32_t prs_profile_mapping_append(struct prs_profile *p, const struct prs_mapping *m);
/* Appends the stack parent + frame without interning (checked: ids in range, depth bounded). */
uint32_t prs_profile_stack_append(struct prs_profile *p, uint32_t parent, uint32_t frame);
/*
 * The id of the string s[0..len) if p holds it, else PRS_MAP_NONE; for a profile that may not be
 * changed (no index is built: the strings past the index are compared one by one).
 */
uint32_t prs_profile_string_find(const struct prs_profile *p, const char *s, size_t len);
/* Frees the interning tables (a reader that is done): the next interning call rebuilds them. */
void prs_profile_drop_index(struct prs_profile *p);
/* Appends a process entry as given (the reader: no merging with the latest). 0, -EINVAL or -ENOMEM. */
int prs_profile_process_append(struct prs_profile *p, const struct prs_process *pr);
/* Appends a meta entry by string ids. 0 or -EINVAL / -ENOMEM. */
int prs_profile_meta_ids(struct prs_profile *p, uint32_t key, uint32_t value);

/* ---- profile.pyrs (docs/pyrs-format.md) ---- */

#define PRS_PYRS_MAGIC "PYRSPROF"
#define PRS_PYRS_MAGIC_LEN 8
#define PRS_PYRS_HEADER_LEN 16 /* magic, u32 version, u32 flags (little-endian) */
/* 2: STACK's parent is a distance back from the stack's own id; samples come in SAMPLES blocks */
#define PRS_PYRS_VERSION 2u
#define PRS_PYRS_MAX_PAYLOAD (PRS_PROFILE_MAX_STRING + 4096u) /* longest record payload accepted */

enum prs_pyrs_record {
	PRS_REC_STRING = 1,
	PRS_REC_MAPPING = 2,
	PRS_REC_FRAME = 3,
	PRS_REC_STACK = 4,
	PRS_REC_SAMPLE = 5,
	PRS_REC_THREAD = 6,
	PRS_REC_META = 7,
	PRS_REC_EXPAND = 8,
	PRS_REC_END = 9,
	PRS_REC_PROCESS = 10,
	/* 11..19: the accounting records (PRS_ACCT_REC_FIRST..LAST) */
	PRS_REC_SAMPLES = 20,
};

/*
 * A SAMPLES record (version 2) holds up to this many samples as columns, one field of every
 * sample after another (docs/pyrs-format.md): a thread's sample that repeats its previous one but
 * for the time costs a bit of the repeat column. In this order:
 */
#define PRS_PYRS_BLOCK_MAX 4096u
enum prs_pyrs_column {
	PRS_COL_TID,     /* every sample: tid minus the previous sample's (sleb) */
	PRS_COL_TIME,    /* every sample: ns since the previous sample of the file (sleb) */
	PRS_COL_REPEAT,  /* a bit per sample, 8 a byte from bit 0: same as its tid's previous sample */
	PRS_COL_STATE,   /* the other columns: one value per sample that is not a repeat */
	PRS_COL_SYSCALL, /* syscall + 1 */
	PRS_COL_STACK,
	PRS_COL_WEIGHT,
	PRS_COL_FLAGS,
	PRS_COL_PID,     /* 0: the pid implied by the tid's THREAD record; else pid + 1 */
	PRS_PYRS_NCOLS
};

/*
 * The pid that a SAMPLE record without a pid field stands for: that of its tid's latest THREAD
 * record before it in the file (0 when none, or when that record had no pid). The writer and the
 * reader each keep one: the writer leaves the field out exactly when the reader will infer it.
 */
struct prs_pyrs_pids {
	struct prs_map64 of_tid; /* (uint32)tid -> pid; empty until a THREAD record carries a pid */
};

void prs_pyrs_pids_init(struct prs_pyrs_pids *t);
void prs_pyrs_pids_release(struct prs_pyrs_pids *t);
/* A THREAD record of tid with pid (0 for none) was written / read. 0 or -ENOMEM. */
int prs_pyrs_pids_thread(struct prs_pyrs_pids *t, int32_t tid, int32_t pid);
/* The pid implied for a SAMPLE record of tid without one. */
int32_t prs_pyrs_pids_implied(const struct prs_pyrs_pids *t, int32_t tid);

#define PRS_FRAME_F_RAW 1u
#define PRS_FRAME_F_ACTIVATION 2u

#endif
