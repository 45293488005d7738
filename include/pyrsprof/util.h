/* SPDX-License-Identifier: MIT */
/*
 * Small dependency-free building blocks used everywhere: a growable byte buffer, array growth,
 * open-addressing hash maps (u64 -> u32, byte string -> u32, and an id set with caller-defined
 * equality for interning structs), LEB128 varints, a monotonic clock and the x86_64 syscall table.
 *
 * None of these functions is thread-safe on a shared object (use one object per thread); none
 * is async-signal-safe except where noted. Functions returning int return 0 or a negative errno.
 */
#ifndef PYRSPROF_UTIL_H
#define PYRSPROF_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "pyrsprof/err.h"
#include "pyrsprof/types.h"

/* ---- array growth ---- */

/*
 * Makes the array *ptr (of *cap elements of elem_size bytes) hold at least need elements,
 * growing geometrically (x2, at least 16). Returns 0, or -ENOMEM (also on size overflow), in
 * which case *ptr and *cap are unchanged. *ptr is a malloc'd block owned by the caller.
 */
int prs_array_grow(void **ptr, size_t *cap, size_t need, size_t elem_size);

/* ---- growable byte buffer (git's strbuf without the NUL guarantee) ---- */

struct prs_buf {
	uint8_t *data; /* owned; NULL while cap == 0 */
	size_t len, cap;
};

/* Sets up an empty buffer; allocates nothing. */
void prs_buf_init(struct prs_buf *b);
/* Frees the contents; b is empty afterwards (and may be reused). */
void prs_buf_release(struct prs_buf *b);
/* Empties b but keeps its memory (no allocation on reuse). */
void prs_buf_reset(struct prs_buf *b);
/* Ensures room for extra more bytes. 0 or -ENOMEM. */
int prs_buf_reserve(struct prs_buf *b, size_t extra);
int prs_buf_append(struct prs_buf *b, const void *data, size_t len);
int prs_buf_putc(struct prs_buf *b, uint8_t c);
/* Appends an unsigned / zigzag-signed LEB128 varint. */
int prs_buf_put_uleb(struct prs_buf *b, uint64_t v);
int prs_buf_put_sleb(struct prs_buf *b, int64_t v);
/* Appends formatted text (no NUL is counted in len, but one is kept after the data). */
int prs_buf_printf(struct prs_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Hands the data over to the caller (free() it); b is empty afterwards. *len may be NULL. */
uint8_t *prs_buf_detach(struct prs_buf *b, size_t *len);

/* ---- LEB128 varints (unsigned, and zigzag for signed values) ---- */

#define PRS_LEB128_MAX 10 /* bytes of the longest uint64 encoding */

/* Encodes v into out (at least PRS_LEB128_MAX bytes); returns the number of bytes written. */
size_t prs_uleb128_encode(uint64_t v, uint8_t *out);
/*
 * Decodes one varint from p[0..len). Returns 0 and sets *v and *used; -ENODATA if the input ends
 * inside the varint; -EOVERFLOW if it does not fit 64 bits (more than 10 bytes, or bits beyond 64).
 * Never reads past p + len. Async-signal-safe.
 */
int prs_uleb128_decode(const uint8_t *p, size_t len, uint64_t *v, size_t *used);
/* Zigzag mapping of signed to unsigned (0, -1, 1, -2 -> 0, 1, 2, 3) and back. */
uint64_t prs_zigzag_encode(int64_t v);
int64_t prs_zigzag_decode(uint64_t v);

/* ---- numbers as text ---- */

#define PRS_FMT_FIXED_MAX 512 /* room for any double as "%.2f" */
/*
 * Writes v into out (PRS_FMT_FIXED_MAX bytes) exactly as snprintf's "%.*f" with `decimals` 1 or 2
 * writes it (the same bytes, exact rounding of the binary value, ties to even), fast for
 * 0 <= v < 1e12 (printf does the rest). Returns the length (NUL not counted).
 */
size_t prs_fmt_fixed(char *out, double v, int decimals);

#define PRS_FMT_U64_MAX 21 /* room for any uint64_t in decimal and the NUL */
/* Writes v in decimal into out (PRS_FMT_U64_MAX bytes), as "%" PRIu64 writes it, and a NUL.
 * Returns the length (NUL not counted). */
size_t prs_fmt_u64(char *out, uint64_t v);

/* ---- hashing ---- */

/* A well-mixed 64-bit hash of a 64-bit value (a bijection: no collisions on full keys). */
uint64_t prs_hash64(uint64_t x);
/* A 64-bit hash of len bytes at p. Not cryptographic: fine for tables, not for hostile-DoS proofing. */
uint64_t prs_hash_bytes(const void *p, size_t len);

/*
 * Asks the kernel to back the pages of [p, p + len) with transparent huge pages when len is at
 * least PRS_HUGE_MIN bytes: random probes into big tables (the trie index of 200k stacks is tens
 * of MB) then miss the TLB far less, and first touches fault 2 MiB at a time. Only a hint
 * (madvise MADV_HUGEPAGE; errors ignored; nothing happens for smaller blocks). The hash tables
 * below apply it to themselves. p may come from malloc: it stays freed by free().
 */
#define PRS_HUGE_MIN ((size_t)4 << 20)
void prs_mem_hint_huge(void *p, size_t len);

/* ---- u64 -> u32 hash map (open addressing, linear probing) ---- */

#define PRS_MAP_NONE UINT32_MAX /* "no value"; cannot be stored */

/* A key and its value side by side: a probe touches one cache line, not one per array. */
struct prs_map64_slot {
	uint64_t key;
	uint32_t val; /* PRS_MAP_NONE marks an empty slot */
};

struct prs_map64 {
	struct prs_map64_slot *slots;
	uint32_t cap; /* 0 or a power of two */
	uint32_t len;
};

void prs_map64_init(struct prs_map64 *m);
void prs_map64_release(struct prs_map64 *m);
/* Returns the value stored for key, or PRS_MAP_NONE. */
uint32_t prs_map64_get(const struct prs_map64 *m, uint64_t key);
/* Stores key -> val (val != PRS_MAP_NONE), replacing an existing value. 0, -EINVAL or -ENOMEM. */
int prs_map64_put(struct prs_map64 *m, uint64_t key, uint32_t val);
/*
 * One probe for "find or insert": if key is present, sets *val to its value and returns 0;
 * otherwise stores key -> newval, sets *val = newval and returns 1. -ENOMEM on failure.
 * Allocates only when the table grows (load factor 3/4).
 */
int prs_map64_intern(struct prs_map64 *m, uint64_t key, uint32_t newval, uint32_t *val);
/* Makes room for n entries without further growth. 0 or -ENOMEM. */
int prs_map64_reserve(struct prs_map64 *m, uint32_t n);

/* ---- byte string -> u32 hash map (keys are borrowed) ---- */

struct prs_strmap_slot {
	const char *key; /* borrowed; NULL = empty slot */
	uint32_t len;
	uint32_t hash;
	uint32_t val;
};

struct prs_strmap {
	struct prs_strmap_slot *slots;
	uint32_t cap; /* 0 or a power of two */
	uint32_t len;
};

void prs_strmap_init(struct prs_strmap *m);
/* Frees the table (never the keys). */
void prs_strmap_release(struct prs_strmap *m);
/* Returns the value for the len bytes at key (any bytes, NUL included), or PRS_MAP_NONE. */
uint32_t prs_strmap_get(const struct prs_strmap *m, const void *key, size_t len);
/*
 * prs_strmap_get for a caller that computed hash = (uint32_t)prs_hash_bytes(key, len) already,
 * and the prefetches that let it look up many keys at once: prs_strmap_prefetch asks for the
 * slot where hash starts probing, prs_strmap_prefetch_key (once that slot is in the cache) for
 * the bytes of the key stored there when its hash matches. Lookups of keys spread over a table
 * of tens of MB miss the cache twice (slot, key bytes): issued for all the keys first, the misses
 * overlap instead of following one another. Prefetches are hints: they change no result.
 */
uint32_t prs_strmap_get_hashed(const struct prs_strmap *m, const void *key, size_t len, uint32_t hash);
void prs_strmap_prefetch(const struct prs_strmap *m, uint32_t hash);
void prs_strmap_prefetch_key(const struct prs_strmap *m, uint32_t hash);
/*
 * Stores key -> val, replacing an existing value. The map keeps the pointer key: the bytes must
 * stay valid and unchanged while the map holds them (e.g. a string owned by an interning table).
 * 0, -EINVAL (val is PRS_MAP_NONE or len >= 4 GiB) or -ENOMEM.
 */
int prs_strmap_put(struct prs_strmap *m, const void *key, size_t len, uint32_t val);

/* ---- id set: interning of structs stored elsewhere, with caller-defined equality ---- */

/* Returns true if the element with this id equals key. */
typedef bool (*prs_idset_eq_fn)(const void *ctx, uint32_t id, const void *key);

struct prs_idset {
	uint32_t *ids;    /* PRS_MAP_NONE = empty */
	uint32_t *hashes; /* kept so that growth does not call back */
	uint32_t cap, len;
};

void prs_idset_init(struct prs_idset *s);
void prs_idset_release(struct prs_idset *s);
/* Returns the id of an element with this hash for which eq(ctx, id, key) holds, or PRS_MAP_NONE. */
uint32_t prs_idset_find(const struct prs_idset *s, uint32_t hash, prs_idset_eq_fn eq,
			const void *ctx, const void *key);
/* Adds id with this hash (the caller checked it is absent). 0, -EINVAL or -ENOMEM. */
int prs_idset_insert(struct prs_idset *s, uint32_t hash, uint32_t id);

/* ---- files that appear whole or not at all ---- */

struct prs_atomic {
	char path[4096]; /* the final name */
	char tmp[4096];  /* the temporary one: ".NAME.XXXXXX" in the same folder */
	FILE *f;
	bool in_place;   /* path is not a regular file (a device, a FIFO): written directly */
};

/*
 * Opens a new temporary file beside path (".NAME.XXXXXX" in the same folder, mode 0666 & ~umask)
 * for writing; prs_atomic_close renames it over path. A path that exists and is not a regular
 * file (/dev/stdout, a FIFO) is written in place instead; a folder is refused. Returns the stream,
 * or NULL with err set ("cannot write 'PATH': why"). Not thread-safe (it reads the umask).
 */
FILE *prs_atomic_open(struct prs_atomic *a, const char *path, struct prs_err *err);
/*
 * Ends the write. ok: flushes the file to disk (fsync), closes it and renames it over path;
 * returns 0, or a negative errno with err set when any of that failed (then the temporary file is
 * removed and path is left as it was). !ok: closes and removes the temporary file, returns 0.
 */
int prs_atomic_close(struct prs_atomic *a, bool ok, struct prs_err *err);

/* ---- time ---- */

/* CLOCK_MONOTONIC in nanoseconds. Async-signal-safe. */
uint64_t prs_now_ns(void);

/* ---- x86_64 syscalls ---- */

/* The x86_64 name of syscall nr ("read", "clock_nanosleep"), or NULL if unknown. Static storage. */
const char *prs_syscall_name(int nr);
/*
 * What blocking in syscall nr means for an off-CPU leaf: PRS_KIND_OFF_IO (read, write, poll,
 * epoll_wait, recvfrom, accept, connect, fsync, io_uring_enter, ...), PRS_KIND_OFF_LOCK (futex,
 * futex_waitv, flock, fcntl), PRS_KIND_OFF_SLEEP (nanosleep, clock_nanosleep, pause,
 * rt_sigsuspend, rt_sigtimedwait, wait4, waitid), else PRS_KIND_OFF_OTHER (also for unknown nr).
 * GIL waits are futexes too: telling them apart needs the futex address (see src/classify).
 */
enum prs_kind prs_syscall_kind(int nr);

#endif
