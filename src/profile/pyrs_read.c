/* SPDX-License-Identifier: MIT */
/*
 * The profile.pyrs reader. The file is hostile input: every length is bounded
 * (PRS_PYRS_MAX_PAYLOAD per record, PRS_MAX_STACK_FRAMES per expansion), every id is checked
 * against what has been read so far (so no id ever points forward and the stack trie cannot
 * have cycles), and nothing is allocated from a size the file claims, only from data it actually
 * contains. A file cut short (the recording crashed or is still running) is accepted with a
 * warning. Damage is found per zstd frame (the writer ends one at every flush, each with its
 * checksum): a frame's records are parsed only once the frame has decoded whole, so a damaged
 * frame costs its own records and those after it, and every frame before it is kept, with a
 * warning. Bad magic, a newer format version, or damage before any sample was saved fail with
 * -EINVAL and a message naming the file. Format: docs/pyrs-format.md.
 *
 * Read as sums (PRS_PYRS_SUMS), the samples are aggregated as they are parsed, the way the recorder
 * keeps them (aggregate.c): memory then follows the distinct samples, not the file's length.
 * Read as sums without threads (PRS_PYRS_SUMS_NO_THREADS), the records are per stack (and
 * process, state, ...) and the threads' sums apart (aggregate.c).
 */
#include "profile/profile-internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "util/banned.h"

/*
 * Decoded bytes of one zstd frame are held back (in reader.frame) until the frame ends and its
 * checksum has been checked, then parsed. Frames of version-1 files written before the writer
 * ended a frame at each flush can hold a whole recording: past this many decoded bytes the frame
 * is parsed as it comes (as every frame was before), and damage found later in it fails the read.
 */
#define FRAME_HOLD_MAX (32u << 20)

/*
 * Read as sums, a decoded sample waits AHEAD samples before it is added: its table slot is asked
 * for at once, the record that slot names STAGE1 samples later, so that the cache misses of
 * several lookups overlap (each is a miss in a table of a few MB: 2 per sample, most of the
 * reading time, unhidden). Powers of two.
 */
#define AHEAD 16u
#define STAGE1 8u

struct reader {
	const char *name;
	struct prs_profile *p;
	ZSTD_DCtx *dctx;
	uint8_t hdr[PRS_PYRS_HEADER_LEN];
	size_t hdr_len;
	struct prs_buf pending; /* decompressed bytes not yet parsed (at most one partial record) */
	struct prs_buf frame;   /* decoded bytes of the current zstd frame, not yet checked whole */
	uint64_t records, stream_off; /* records parsed; offset of pending[0] in the stream */
	uint64_t last_time_ns;
	uint64_t nexpand;
	struct prs_pyrs_pids pids; /* the pid of a sample that does not carry one */
	uint64_t file_off;   /* bytes of the file fed so far */
	uint64_t frame_off;  /* file offset of the current zstd frame's first byte */
	bool in_frame;       /* the current frame has started (some of its bytes were fed) */
	bool parsed_ahead;   /* part of the current frame was parsed before it ended */
	bool ended;
	bool damaged;        /* stopped at a damaged frame (p->damaged_at) */
	const char *damage;  /* what was wrong with it (zstd's words, or rd->detail) */
	char detail[200];    /* the last invalid record: "record N: why" */
	struct prs_err *err;
	bool sums;           /* PRS_PYRS_SUMS */
	struct prs_sample ahead[AHEAD]; /* sums: decoded samples not yet added, a ring */
	unsigned ahead_first, nahead;
	uint32_t version;    /* of the file's format */
	/* version 2: each thread's latest sample, which a SAMPLES record may repeat */
	struct prs_map64 last_of_tid; /* tid -> index in last */
	struct last_sample *last;
	size_t nlast, last_cap;
	struct block *blk;   /* a SAMPLES record decoded (made at the first) */
	uint64_t nblocks;    /* SAMPLES records decoded */
};

struct last_sample {
	struct prs_sample s;
	bool valid;        /* s holds the tid's latest sample (else the tid was only looked up) */
	uint64_t in_block; /* the block (nblocks + 1 while it is decoded) where it was last seen */
	uint32_t at;       /* then: its index there */
};

/* A SAMPLES record, decoded whole and checked before any of its samples is added. */
struct block {
	struct prs_sample s[PRS_PYRS_BLOCK_MAX];
	uint32_t last[PRS_PYRS_BLOCK_MAX]; /* index in reader.last of each sample's tid */
	int64_t dt[PRS_PYRS_BLOCK_MAX];
	uint64_t v[PRS_PYRS_NCOLS - PRS_COL_STATE][PRS_PYRS_BLOCK_MAX]; /* the movers' columns */
};

/* A cursor over one record's payload. */
struct cur {
	const uint8_t *p;
	size_t len, off;
	bool bad;
};

static uint64_t get(struct cur *c)
{
	uint64_t v = 0;
	size_t used;

	if (c->bad || prs_uleb128_decode(c->p + c->off, c->len - c->off, &v, &used)) {
		c->bad = true;
		return 0;
	}
	c->off += used;
	return v;
}

/* An appended pid field (sleb; absent in older files: 0), checked to be a pid. */
static int32_t get_pid(struct cur *c)
{
	int64_t v;

	if (c->off >= c->len)
		return 0;
	v = prs_zigzag_decode(get(c));
	if (v < 0 || v > INT32_MAX)
		c->bad = true;
	return c->bad ? 0 : (int32_t)v;
}

static int corrupt(struct reader *rd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int corrupt(struct reader *rd, const char *fmt, ...)
{
	char detail[160];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	snprintf(rd->detail, sizeof(rd->detail), "record %" PRIu64 ": %s", rd->records + 1, detail);
	return prs_err_set(rd->err, -EINVAL, "%s: corrupt profile (record %" PRIu64 ": %s)", rd->name,
			   rd->records + 1, detail);
}

/* Adds s to the profile now. 0 or -ENOMEM. */
static int add_now(struct reader *rd, const struct prs_sample *s)
{
	return prs_profile_sample(rd->p, s) ? prs_err_set(rd->err, -ENOMEM, "%s: out of memory", rd->name)
					    : 0;
}

/* Adds the oldest sample waiting in rd->ahead (there is one). 0 or -ENOMEM. */
static int add_oldest(struct reader *rd)
{
	int rc = add_now(rd, &rd->ahead[rd->ahead_first]);

	if (rc == 0) {
		rd->ahead_first = (rd->ahead_first + 1) & (AHEAD - 1);
		rd->nahead--;
	}
	return rc;
}

/* Adds the samples waiting in rd->ahead, in order. 0 or -ENOMEM. */
static int drain(struct reader *rd)
{
	int rc = 0;

	while (rd->nahead && (rc = add_oldest(rd)) == 0)
		;
	return rc;
}

/* Adds s: at once, or read as sums after the AHEAD samples before it (see AHEAD). 0 or -ENOMEM. */
static int add_sample(struct reader *rd, const struct prs_sample *s)
{
	struct prs_sample *ring = rd->ahead;
	int rc;

	if (!rd->sums)
		return add_now(rd, s);
	if (rd->nahead == AHEAD && (rc = add_oldest(rd)) != 0)
		return rc;
	ring[(rd->ahead_first + rd->nahead) & (AHEAD - 1)] = *s;
	rd->nahead++;
	prs_profile_agg_prefetch(rd->p, s, 0);
	if (rd->nahead > STAGE1)
		prs_profile_agg_prefetch(rd->p, &ring[(rd->ahead_first + rd->nahead - 1 - STAGE1) & (AHEAD - 1)], 1);
	return 0;
}

/* A sample's state, syscall + 1, stack and weight as read, checked into s. 0 or -EINVAL. */
static int sample_fields(struct reader *rd, struct prs_sample *s, uint64_t state, uint64_t sc,
			 uint64_t stack, uint64_t weight)
{
	if (state > UINT8_MAX || sc > 32768 || weight > UINT32_MAX)
		return corrupt(rd, "bad sample record");
	if (stack >= rd->p->nstacks)
		return corrupt(rd, "sample stack %" PRIu64 " of %" PRIu64, stack, (uint64_t)rd->p->nstacks);
	s->state = (uint8_t)state;
	s->syscall = (int16_t)((int64_t)sc - 1);
	s->stack = (uint32_t)stack;
	s->weight = (uint32_t)weight;
	return 0;
}

/* *t = prev + dt, checked to stay in 0..INT64_MAX. 0 or -EINVAL. */
static int sample_time(struct reader *rd, uint64_t prev, int64_t dt, uint64_t *t)
{
	if ((dt < 0 && (uint64_t)-(dt + 1) >= prev) || (dt > 0 && (uint64_t)dt > INT64_MAX - prev))
		return corrupt(rd, "sample time out of range");
	*t = prev + (uint64_t)dt;
	return 0;
}

/* The entry of tid in rd->last (made, not valid, for a new tid): its index, or -ENOMEM. */
static int64_t last_index(struct reader *rd, int32_t tid)
{
	uint32_t k;
	int rc = prs_map64_intern(&rd->last_of_tid, (uint32_t)tid, (uint32_t)rd->nlast, &k);

	if (rc < 0)
		return -ENOMEM;
	if (rc == 1) {
		if (prs_array_grow((void **)&rd->last, &rd->last_cap, rd->nlast + 1, sizeof(*rd->last)) < 0)
			return -ENOMEM;
		rd->last[rd->nlast++] = (struct last_sample){ .valid = false };
	}
	return k;
}

/*
 * A SAMPLES record's columns (docs/pyrs-format.md) into rd->blk: the tids, the time deltas, the
 * repeat bits, then the fields of the samples that are not repeats. Sets *n. 0 or -EINVAL.
 */
static int block_columns(struct reader *rd, struct cur *c, size_t *n)
{
	struct block *b = rd->blk;
	uint64_t count = get(c), movers = 0;
	int64_t tid = 0;
	const uint8_t *bits;

	if (c->bad || count == 0 || count > PRS_PYRS_BLOCK_MAX)
		return corrupt(rd, "samples record of %" PRIu64 " samples (1 to %u)", count,
			       PRS_PYRS_BLOCK_MAX);
	for (size_t k = 0; k < count; k++) {
		tid += prs_zigzag_decode(get(c));
		if (c->bad || tid < INT32_MIN || tid > INT32_MAX)
			return corrupt(rd, "bad sample tid");
		memset(&b->s[k], 0, sizeof(b->s[k])); /* padding too: records are compared whole */
		b->s[k].tid = (int32_t)tid;
	}
	for (size_t k = 0; k < count; k++)
		b->dt[k] = prs_zigzag_decode(get(c));
	if (c->bad || c->len - c->off < (count + 7) / 8)
		return corrupt(rd, "bad samples record");
	bits = c->p + c->off;
	c->off += (count + 7) / 8;
	for (size_t k = 0; k < count; k++)
		b->s[k].flags = bits[k / 8] >> (k % 8) & 1; /* the repeat bit, for now */
	for (size_t k = 0; k < count; k++)
		movers += !b->s[k].flags;
	for (unsigned col = 0; col < PRS_PYRS_NCOLS - PRS_COL_STATE; col++)
		for (size_t j = 0; j < movers; j++)
			b->v[col][j] = get(c);
	if (c->bad)
		return corrupt(rd, "bad samples record");
	*n = count;
	return 0;
}

/* The block's samples made whole and checked (rd->last untouched but for new, not valid
 * entries). 0, -EINVAL or -ENOMEM. */
static int block_samples(struct reader *rd, size_t n)
{
	struct block *b = rd->blk;
	uint64_t t = rd->last_time_ns, seq = rd->nblocks + 1;
	size_t j = 0;
	int rc;

	for (size_t k = 0; k < n; k++) {
		struct prs_sample *s = &b->s[k];
		int64_t e = last_index(rd, s->tid);
		struct last_sample *l;
		int32_t tid = s->tid;

		if (e < 0)
			return prs_err_set(rd->err, -ENOMEM, "%s: out of memory", rd->name);
		l = &rd->last[e];
		b->last[k] = (uint32_t)e;
		if (s->flags) { /* a repeat of the tid's previous sample, in this block or before */
			if (l->in_block == seq)
				*s = b->s[l->at];
			else if (l->valid)
				*s = l->s;
			else
				return corrupt(rd, "sample %zu repeats thread %d's previous sample, which "
					       "has none", k, (int)tid);
		} else {
			uint64_t flags = b->v[PRS_COL_FLAGS - PRS_COL_STATE][j];
			uint64_t pid = b->v[PRS_COL_PID - PRS_COL_STATE][j];

			if ((rc = sample_fields(rd, s, b->v[0][j], b->v[1][j], b->v[2][j], b->v[3][j])))
				return rc;
			if (flags > UINT8_MAX || pid > (uint64_t)INT32_MAX + 1)
				return corrupt(rd, "bad sample flags or pid");
			s->flags = (uint8_t)flags;
			s->pid = pid ? (int32_t)(pid - 1) : prs_pyrs_pids_implied(&rd->pids, tid);
			j++;
		}
		s->tid = tid;
		if ((rc = sample_time(rd, t, b->dt[k], &t)))
			return rc;
		s->time_ns = t;
		l->in_block = seq;
		l->at = (uint32_t)k;
	}
	return 0;
}

/* A SAMPLES record (version 2): decoded and checked whole, then its samples added in order. */
static int parse_samples(struct reader *rd, struct cur *c)
{
	struct block *b = rd->blk;
	size_t n = 0;
	int rc;

	if (!b && !(b = rd->blk = malloc(sizeof(*b))))
		return prs_err_set(rd->err, -ENOMEM, "%s: out of memory", rd->name);
	rc = block_columns(rd, c, &n);
	if (!rc)
		rc = block_samples(rd, n);
	rd->nblocks++; /* (a block that failed leaves its in_block marks stale, never current) */
	if (rc)
		return rc;
	for (size_t k = 0; k < n; k++) {
		struct last_sample *l = &rd->last[b->last[k]];

		l->s = b->s[k];
		l->valid = true;
		if ((rc = add_sample(rd, &b->s[k])))
			return rc;
	}
	rd->last_time_ns = b->s[n - 1].time_ns;
	return 0;
}

static int parse_record(struct reader *rd, uint8_t type, const uint8_t *data, size_t len)
{
	struct prs_profile *p = rd->p;
	struct cur c = { data, len, 0, false };
	int rc;

	/* what follows a sample may change how samples add up (a PROCESS entry, the END count) */
	if (type != PRS_REC_SAMPLE && type != PRS_REC_SAMPLES && (rc = drain(rd)) != 0)
		return rc;
	switch (type) {
	case PRS_REC_STRING:
		if (len > PRS_PROFILE_MAX_STRING)
			return corrupt(rd, "string %" PRIu64 " is longer than %u bytes", (uint64_t)p->nstrings,
				       PRS_PROFILE_MAX_STRING);
		if (memchr(data, '\0', len))
			return corrupt(rd, "string %" PRIu64 " contains a NUL byte", (uint64_t)p->nstrings);
		if (prs_profile_string_append(p, (const char *)data, len) == UINT32_MAX)
			goto nomem;
		return 0;
	case PRS_REC_MAPPING: {
		struct prs_mapping m;
		uint64_t path, blen;

		memset(&m, 0, sizeof(m));
		m.start = get(&c);
		m.end = get(&c);
		m.offset = get(&c);
		path = get(&c);
		blen = get(&c);
		if (c.bad || blen > PRS_BUILD_ID_MAX || blen > len - c.off)
			return corrupt(rd, "bad mapping record");
		if (path >= p->nstrings)
			return corrupt(rd, "mapping path is string %" PRIu64 " of %" PRIu64, path, (uint64_t)p->nstrings);
		m.path = (uint32_t)path;
		m.build_id_len = (uint8_t)blen;
		memcpy(m.build_id, data + c.off, blen);
		c.off += blen;
		m.pid = get_pid(&c);
		if (c.bad)
			return corrupt(rd, "bad mapping pid");
		if (prs_profile_mapping_append(p, &m) == UINT32_MAX)
			goto nomem;
		return 0;
	}
	case PRS_REC_FRAME: {
		struct prs_frame f;
		uint64_t flags = get(&c), kind = get(&c), map = get(&c), addr = get(&c);
		uint64_t name = get(&c), file = get(&c), line = get(&c);

		if (c.bad || kind > UINT8_MAX || line > UINT32_MAX)
			return corrupt(rd, "bad frame record");
		if (map > p->nmappings)
			return corrupt(rd, "frame refers to mapping %" PRIu64 " of %" PRIu64, map - 1,
				       (uint64_t)p->nmappings);
		if (name >= p->nstrings || file >= p->nstrings)
			return corrupt(rd, "frame name or file is string %" PRIu64 " of %" PRIu64,
				       name > file ? name : file, (uint64_t)p->nstrings);
		memset(&f, 0, sizeof(f));
		f.raw = flags & PRS_FRAME_F_RAW;
		f.activation = flags & PRS_FRAME_F_ACTIVATION;
		f.kind = (uint8_t)kind;
		f.mapping = map ? (uint32_t)(map - 1) : PRS_NO_MAPPING;
		f.addr = addr;
		f.name = (uint32_t)name;
		f.file = (uint32_t)file;
		f.line = (uint32_t)line;
		if (prs_profile_frame_append(p, &f) == UINT32_MAX)
			goto nomem;
		return 0;
	}
	case PRS_REC_STACK: {
		uint64_t parent = get(&c), frame = get(&c);

		if (c.bad)
			return corrupt(rd, "bad stack record");
		if (rd->version >= 2) {
			/* the distance back from this stack's id (p->nstacks) to its parent's */
			if (parent == 0 || parent > p->nstacks)
				return corrupt(rd, "stack parent %" PRIu64 " back of %" PRIu64, parent,
					       (uint64_t)p->nstacks);
			parent = p->nstacks - parent;
		}
		if (parent >= p->nstacks)
			return corrupt(rd, "stack parent %" PRIu64 " of %" PRIu64, parent, (uint64_t)p->nstacks);
		if (frame >= p->nframes)
			return corrupt(rd, "stack frame %" PRIu64 " of %" PRIu64, frame, (uint64_t)p->nframes);
		if (p->stacks[parent].depth >= PRS_PROFILE_MAX_DEPTH)
			return corrupt(rd, "stack deeper than %u frames", PRS_PROFILE_MAX_DEPTH);
		if (prs_profile_stack_append(p, (uint32_t)parent, (uint32_t)frame) == UINT32_MAX)
			goto nomem;
		return 0;
	}
	case PRS_REC_SAMPLE: {
		struct prs_sample s;
		int64_t tid = prs_zigzag_decode(get(&c)), dt = prs_zigzag_decode(get(&c));
		uint64_t state = get(&c), sc = get(&c), stack = get(&c), weight = get(&c), t = 0;

		if (c.bad || tid < INT32_MIN || tid > INT32_MAX)
			return corrupt(rd, "bad sample record");
		if ((rc = sample_fields(rd, &s, state, sc, stack, weight)) ||
		    (rc = sample_time(rd, rd->last_time_ns, dt, &t)))
			return rc;
		s.time_ns = t;
		s.tid = (int32_t)tid;
		s.flags = 0;
		/* Appended fields (see docs/pyrs-format.md), absent in older files: flags, then the
		 * pid where it is not that of the tid's THREAD record */
		if (c.off < c.len) {
			uint64_t flags = get(&c);

			if (c.bad || flags > UINT8_MAX)
				return corrupt(rd, "bad sample flags");
			s.flags = (uint8_t)flags;
		}
		s.pid = c.off < c.len ? get_pid(&c) : prs_pyrs_pids_implied(&rd->pids, s.tid);
		if (c.bad)
			return corrupt(rd, "bad sample pid");
		if ((rc = add_sample(rd, &s)) != 0)
			return rc;
		rd->last_time_ns = s.time_ns;
		return 0;
	}
	case PRS_REC_SAMPLES:
		return parse_samples(rd, &c);
	case PRS_REC_THREAD: {
		int64_t tid = prs_zigzag_decode(get(&c));
		uint64_t name = get(&c);
		int32_t pid = get_pid(&c);

		if (c.bad || tid < INT32_MIN || tid > INT32_MAX)
			return corrupt(rd, "bad thread record");
		if (name >= p->nstrings)
			return corrupt(rd, "thread name is string %" PRIu64 " of %" PRIu64, name, (uint64_t)p->nstrings);
		if (prs_profile_thread_pid(p, pid, (int32_t)tid, (uint32_t)name) ||
		    prs_pyrs_pids_thread(&rd->pids, (int32_t)tid, pid))
			goto nomem;
		return 0;
	}
	case PRS_REC_PROCESS: {
		struct prs_process pr;
		int64_t pid = prs_zigzag_decode(get(&c)), ppid = prs_zigzag_decode(get(&c));
		uint64_t command = get(&c), t = get(&c);

		if (c.bad || pid <= 0 || pid > INT32_MAX || ppid < 0 || ppid > INT32_MAX ||
		    t > INT64_MAX)
			return corrupt(rd, "bad process record");
		if (command >= p->nstrings)
			return corrupt(rd, "process command is string %" PRIu64 " of %" PRIu64, command,
				       (uint64_t)p->nstrings);
		pr = (struct prs_process){ .pid = (int32_t)pid, .ppid = (int32_t)ppid,
					   .command = (uint32_t)command, .time_ns = t };
		if (prs_profile_process_append(p, &pr))
			goto nomem;
		return 0;
	}
	case PRS_REC_META: {
		uint64_t key = get(&c), value = get(&c);

		if (c.bad || key >= p->nstrings || value >= p->nstrings)
			return corrupt(rd, "meta refers to string %" PRIu64 " of %" PRIu64,
				       key > value ? key : value, (uint64_t)p->nstrings);
		if (prs_profile_meta_ids(p, (uint32_t)key, (uint32_t)value))
			goto nomem;
		return 0;
	}
	case PRS_REC_EXPAND: {
		uint32_t ids[PRS_MAX_STACK_FRAMES];
		uint64_t frame = get(&c), n = get(&c), i;

		if (c.bad || n > PRS_MAX_STACK_FRAMES)
			return corrupt(rd, "bad expansion record");
		if (frame >= p->nframes)
			return corrupt(rd, "expansion of frame %" PRIu64 " of %" PRIu64, frame, (uint64_t)p->nframes);
		for (i = 0; i < n; i++) {
			uint64_t id = get(&c);

			if (c.bad)
				return corrupt(rd, "bad expansion record");
			if (id >= p->nframes || p->frames[id].raw)
				return corrupt(rd, "expansion holds frame %" PRIu64 " of %" PRIu64
					       " (or a raw frame)", id, (uint64_t)p->nframes);
			ids[i] = (uint32_t)id;
		}
		rc = prs_profile_expand(p, (uint32_t)frame, ids, (uint32_t)n);
		if (rc == -ENOMEM)
			goto nomem;
		if (rc)
			return corrupt(rd, "bad expansion of frame %" PRIu64, frame);
		rd->nexpand++;
		return 0;
	}
	case PRS_REC_END: {
		uint64_t v[10];
		int i;

		for (i = 0; i < 8; i++)
			v[i] = get(&c);
		/* appended fields (older files end without them): the count of accounting records, then
		 * that of PROCESS records */
		v[8] = c.off < c.len ? get(&c) : 0;
		v[9] = c.off < c.len ? get(&c) : 0;
		if (c.bad)
			return corrupt(rd, "bad end record");
		if (v[0] != p->nstrings || v[1] != p->nmappings || v[2] != p->nframes ||
		    v[3] != p->nstacks || v[4] != p->sample_count || v[5] != p->nthreads ||
		    v[6] != p->nmeta || v[7] != rd->nexpand || v[8] != p->nacct || v[9] != p->nprocesses)
			return corrupt(rd, "the end record counts %" PRIu64 " samples, the file holds %" PRIu64
				       "; %" PRIu64 " accounting records, the file holds %" PRIu64
				       "; %" PRIu64 " processes, the file holds %" PRIu64,
				       v[4], p->sample_count, v[8], (uint64_t)p->nacct, v[9],
				       (uint64_t)p->nprocesses);
		rd->ended = true;
		return 0;
	}
	case 0:
		return corrupt(rd, "record type 0");
	default:
		if (type >= PRS_ACCT_REC_FIRST && type <= PRS_ACCT_REC_LAST) {
			/* kept as is: src/classify decodes (and validates) the payload */
			if (len > PRS_ACCT_REC_MAX)
				return corrupt(rd, "accounting record of %zu bytes (at most %u)", len,
					       PRS_ACCT_REC_MAX);
			if (prs_profile_acct(p, type, data, len))
				goto nomem;
			return 0;
		}
		/* a record type from a newer writer: skipped (forward compatibility) */
		return 0;
	}
nomem:
	return prs_err_set(rd->err, -ENOMEM, "%s: out of memory", rd->name);
}

/* Parses every complete record in rd->pending and keeps the partial tail. */
static int parse_pending(struct reader *rd)
{
	const uint8_t *d = rd->pending.data;
	size_t len = rd->pending.len, off = 0;
	int rc = 0;

	while (!rd->ended && off < len) {
		uint64_t plen;
		size_t used;
		int lrc;

		if (len - off < 2)
			break;
		lrc = prs_uleb128_decode(d + off + 1, len - off - 1, &plen, &used);
		if (lrc == -ENODATA)
			break;
		if (lrc || plen > PRS_PYRS_MAX_PAYLOAD) {
			rc = corrupt(rd, "record length %" PRIu64 " exceeds the limit %" PRIu64,
				     lrc ? UINT64_MAX : plen, (uint64_t)PRS_PYRS_MAX_PAYLOAD);
			break;
		}
		if (plen > len - off - 1 - used)
			break;
		rc = parse_record(rd, d[off], d + off + 1 + used, (size_t)plen);
		if (rc)
			break;
		rd->records++;
		off += 1 + used + (size_t)plen;
	}
	/* the samples before an invalid record stay; whatever comes next sees them all added */
	if (rc != -ENOMEM) {
		int drc = drain(rd);

		rc = rc ? rc : drc;
	}
	if (off) {
		memmove(rd->pending.data, d + off, len - off);
		rd->pending.len = len - off;
		rd->stream_off += off;
	}
	return rc;
}

static int check_header(struct reader *rd)
{
	uint32_t version = 0;
	int i;

	if (memcmp(rd->hdr, PRS_PYRS_MAGIC, PRS_PYRS_MAGIC_LEN))
		return prs_err_set(rd->err, -EINVAL, "%s: not a pyrsprof profile (bad magic)", rd->name);
	for (i = 0; i < 4; i++)
		version |= (uint32_t)rd->hdr[8 + i] << (8 * i);
	if (version > PRS_PYRS_VERSION)
		return prs_err_set(rd->err, -EINVAL,
				   "%s: profile format version %u is newer than this pyrsprof reads (%u): "
				   "read it with the pyrsprof that wrote it, or a newer one",
				   rd->name, version, PRS_PYRS_VERSION);
	if (version == 0)
		return prs_err_set(rd->err, -EINVAL, "%s: bad profile format version 0", rd->name);
	rd->version = version;
	/* flags (bytes 12..15): none defined in versions 1 and 2; unknown flags are ignored */
	return 0;
}

/*
 * The current frame is damaged: keep every frame before it, stop reading. Records of the damaged
 * frame that were already parsed (parsed ahead of a huge frame's end) cannot be taken back: then
 * the whole read fails.
 */
static int damaged(struct reader *rd, const char *what, int rc)
{
	if (rd->parsed_ahead)
		return rc;
	rd->damaged = true;
	rd->damage = what;
	rd->p->damaged_at = rd->frame_off;
	prs_buf_reset(&rd->frame);
	return 0;
}

/* Moves the held bytes of the current frame to the parser. */
static int parse_frame(struct reader *rd)
{
	int rc;

	if (!rd->frame.len)
		return 0;
	if (rd->pending.len == 0) {
		/* frames end at a record boundary (the writer's): hand the buffer over, no copy */
		struct prs_buf t = rd->pending;

		rd->pending = rd->frame;
		rd->frame = t;
	} else if (prs_buf_append(&rd->pending, rd->frame.data, rd->frame.len)) {
		return prs_err_set(rd->err, -ENOMEM, "%s: out of memory", rd->name);
	}
	prs_buf_reset(&rd->frame);
	rc = parse_pending(rd);
	/* an invalid record in a frame that decoded whole (a writer's bug or a crafted file): the
	 * records before it stay */
	return rc == -EINVAL ? damaged(rd, rd->detail, rc) : rc;
}

/* Feeds len bytes of the file. */
static int feed(struct reader *rd, const uint8_t *data, size_t len)
{
	ZSTD_inBuffer in;
	uint64_t base;
	int rc;

	if (rd->hdr_len < PRS_PYRS_HEADER_LEN) {
		size_t n = PRS_PYRS_HEADER_LEN - rd->hdr_len;

		if (n > len)
			n = len;
		memcpy(rd->hdr + rd->hdr_len, data, n);
		rd->hdr_len += n;
		rd->file_off += n;
		data += n;
		len -= n;
		/* reject foreign files as soon as the magic is in */
		if (rd->hdr_len >= PRS_PYRS_MAGIC_LEN &&
		    memcmp(rd->hdr, PRS_PYRS_MAGIC, PRS_PYRS_MAGIC_LEN))
			return prs_err_set(rd->err, -EINVAL, "%s: not a pyrsprof profile (bad magic)",
					   rd->name);
		if (rd->hdr_len < PRS_PYRS_HEADER_LEN)
			return 0;
		rc = check_header(rd);
		if (rc)
			return rc;
	}
	base = rd->file_off;
	rd->file_off += len;
	in = (ZSTD_inBuffer){ data, len, 0 };
	while (!rd->ended && !rd->damaged && in.pos < in.size) {
		ZSTD_outBuffer out;
		size_t ret;

		/* decoded straight into the frame's buffer */
		if (prs_buf_reserve(&rd->frame, ZSTD_DStreamOutSize()))
			return prs_err_set(rd->err, -ENOMEM, "%s: out of memory", rd->name);
		out = (ZSTD_outBuffer){ rd->frame.data + rd->frame.len, rd->frame.cap - rd->frame.len, 0 };
		if (!rd->in_frame) {
			rd->in_frame = true;
			rd->frame_off = base + in.pos;
		}
		ret = ZSTD_decompressStream(rd->dctx, &out, &in);
		if (ZSTD_isError(ret))
			return damaged(rd, ZSTD_getErrorName(ret),
				       prs_err_set(rd->err, -EINVAL,
						   "%s: corrupt profile (zstd: %s, after %" PRIu64 " samples)",
						   rd->name, ZSTD_getErrorName(ret), rd->p->sample_count));
		rd->frame.len += out.pos;
		if (ret == 0) {
			/* the frame ended and its checksum matched */
			rc = parse_frame(rd);
			rd->in_frame = false;
			rd->parsed_ahead = false;
		} else if (rd->frame.len > FRAME_HOLD_MAX) {
			rd->parsed_ahead = true;
			rc = parse_frame(rd);
		} else {
			rc = 0;
		}
		if (rc)
			return rc;
	}
	return 0;
}

static int finish(struct reader *rd, struct prs_profile **out, char *warning, size_t wsize)
{
	uint64_t kept = 0;

	if (rd->hdr_len == 0)
		return prs_err_set(rd->err, -EINVAL, "%s: empty file, not a pyrsprof profile", rd->name);
	if (rd->hdr_len < PRS_PYRS_HEADER_LEN) {
		if (memcmp(rd->hdr, PRS_PYRS_MAGIC, rd->hdr_len < 8 ? rd->hdr_len : 8))
			return prs_err_set(rd->err, -EINVAL, "%s: not a pyrsprof profile (bad magic)",
					   rd->name);
		return prs_err_set(rd->err, -EINVAL,
				   "%s: not a pyrsprof profile (file too short: %zu bytes)", rd->name,
				   rd->hdr_len);
	}
	if (!rd->ended && !rd->damaged) {
		/* cut short inside a frame: its records decoded so far are what was saved; they were
		 * not checked whole, so an invalid one among them fails the read */
		int rc;

		rd->parsed_ahead = true;
		rc = parse_frame(rd);
		if (rc)
			return rc;
	}
	if (rd->damaged && rd->p->nsamples == 0)
		return prs_err_set(rd->err, -EINVAL,
				   "%s: corrupt profile (%s in the zstd frame at byte %" PRIu64
				   ", before any sample)", rd->name, rd->damage, rd->p->damaged_at);
	rd->p->complete = rd->ended;
	if (rd->sums) /* read: its table is of no more use */
		prs_profile_agg_seal(rd->p);
	/* the samples as every output counts them: a record stands for its weight (a thread that
	 * waited through ticks for its stop carries them) */
	for (size_t i = 0; i < rd->p->nsamples && (rd->damaged || !rd->ended); i++)
		kept += rd->p->samples[i].weight;
	if (rd->damaged && warning && wsize)
		snprintf(warning, wsize,
			 "%s: damaged at byte %" PRIu64 " (%s) after %" PRIu64 " samples; showing what precedes",
			 rd->name, rd->p->damaged_at, rd->damage, kept);
	else if (!rd->ended && warning && wsize)
		snprintf(warning, wsize,
			 "%s: truncated after %" PRIu64 " samples (the recording did not finish); showing what was saved",
			 rd->name, kept);
	*out = rd->p;
	rd->p = NULL;
	return 0;
}

static int reader_init(struct reader *rd, const char *name, unsigned flags, struct prs_err *err)
{
	memset(rd, 0, sizeof(*rd));
	rd->name = name;
	rd->err = err;
	prs_buf_init(&rd->pending);
	prs_pyrs_pids_init(&rd->pids);
	prs_map64_init(&rd->last_of_tid);
	prs_buf_init(&rd->frame);
	rd->p = prs_profile_new();
	rd->dctx = ZSTD_createDCtx();
	rd->sums = flags & (PRS_PYRS_SUMS | PRS_PYRS_SUMS_NO_THREADS);
	if (!rd->p || !rd->dctx ||
	    (rd->sums && ((flags & PRS_PYRS_SUMS_NO_THREADS) ? prs_profile_agg_enable_merged(rd->p)
							     : prs_profile_agg_enable(rd->p, false))))
		return prs_err_set(err, -ENOMEM, "%s: out of memory", name);
	/* bound the decoder's window (16 MiB; the writer uses 2 MiB) so a hostile frame header
	 * cannot make it allocate gigabytes */
	ZSTD_DCtx_setParameter(rd->dctx, ZSTD_d_windowLogMax, 24);
	return 0;
}

static void reader_release(struct reader *rd)
{
	prs_profile_free(rd->p);
	ZSTD_freeDCtx(rd->dctx);
	prs_buf_release(&rd->pending);
	prs_pyrs_pids_release(&rd->pids);
	prs_map64_release(&rd->last_of_tid);
	free(rd->last);
	free(rd->blk);
	prs_buf_release(&rd->frame);
}

int prs_pyrs_read_mem_flags(const void *data, size_t len, unsigned flags, struct prs_profile **out,
			    char *warning, size_t wsize, struct prs_err *err)
{
	struct reader rd;
	int rc;

	*out = NULL;
	if (warning && wsize)
		warning[0] = '\0';
	rc = reader_init(&rd, "profile", flags, err);
	if (!rc)
		rc = feed(&rd, data, len);
	if (!rc)
		rc = finish(&rd, out, warning, wsize);
	reader_release(&rd);
	return rc;
}

int prs_pyrs_read_mem(const void *data, size_t len, struct prs_profile **out, char *warning,
		      size_t wsize, struct prs_err *err)
{
	return prs_pyrs_read_mem_flags(data, len, 0, out, warning, wsize, err);
}

int prs_pyrs_read_flags(const char *path, unsigned flags, struct prs_profile **out, char *warning,
			size_t wsize, struct prs_err *err)
{
	struct reader rd;
	uint8_t *buf = NULL;
	FILE *f = NULL;
	int rc;

	*out = NULL;
	if (warning && wsize)
		warning[0] = '\0';
	rc = reader_init(&rd, path, flags, err);
	if (rc)
		goto out;
	buf = malloc(ZSTD_DStreamInSize());
	f = fopen(path, "rbe");
	if (!buf || !f) {
		rc = -(buf ? errno : ENOMEM);
		prs_err_set(err, rc, "%s: %s", path, strerror(-rc));
		goto out;
	}
	while (!rd.ended) {
		size_t n;

		errno = 0;
		n = fread(buf, 1, ZSTD_DStreamInSize(), f);

		if (n == 0) {
			if (ferror(f)) {
				rc = errno ? -errno : -EIO;
				prs_err_set(err, rc, "%s: %s", path, strerror(-rc));
				goto out;
			}
			break;
		}
		rc = feed(&rd, buf, n);
		if (rc)
			goto out;
	}
	rc = finish(&rd, out, warning, wsize);
out:
	if (f)
		fclose(f);
	free(buf);
	reader_release(&rd);
	return rc;
}

int prs_pyrs_read(const char *path, struct prs_profile **out, char *warning, size_t wsize,
		  struct prs_err *err)
{
	return prs_pyrs_read_flags(path, 0, out, warning, wsize, err);
}

bool prs_pyrs_sniff(const char *path)
{
	char magic[PRS_PYRS_MAGIC_LEN];
	FILE *f = fopen(path, "rbe");
	bool ok;

	if (!f)
		return false;
	ok = fread(magic, 1, sizeof(magic), f) == sizeof(magic) &&
	     memcmp(magic, PRS_PYRS_MAGIC, sizeof(magic)) == 0;
	fclose(f);
	return ok;
}
