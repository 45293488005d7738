/* SPDX-License-Identifier: MIT */
/*
 * The recorder: owns the profile being sampled and streams it to profile.pyrs. The file is a
 * 16-byte header then a zstd stream of records (docs/pyrs-format.md). Each flush encodes only
 * the entries added since the previous flush (one "written up to" counter per array, no copy of
 * the data) and ends a zstd frame (ZSTD_e_end, with its checksum), so the file on disk decodes up
 * to the last flush, a crash of the profiler loses at most the time since then, and bytes damaged
 * later on disk cost the reader only the frame that holds them and what follows.
 */
#include "profile/profile-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "util/banned.h"

#define ZSTD_LEVEL 3
/*
 * Records are handed to zstd in chunks of about this size, each ending a frame: a flush of many
 * samples (a burst of threads, or a caller that flushes rarely) still makes frames the reader can
 * check and parse while they are in its cache, and damage costs at most this much of the file.
 */
#define CHUNK_BYTES (256u * 1024u)

struct prs_recorder {
	struct prs_profile *p;
	int fd;
	char *path;
	ZSTD_CCtx *cctx;
	struct prs_buf rec;     /* encoded records not yet compressed */
	struct prs_buf payload; /* one record's payload */
	uint8_t *zout;
	size_t zout_cap;
	int failed; /* sticky negative errno after a write error */
	/* what has been written so far: index of the first entry not yet written */
	uint32_t w_strings, w_mappings, w_frames, w_stacks, w_threads, w_processes, w_meta, w_acct;
	size_t w_samples, w_expand; /* w_samples: in p->samples, or in the pending samples when aggregated */
	uint64_t n_samples;         /* samples written */
	uint64_t last_time_ns;
	struct prs_pyrs_pids pids; /* what a reader infers for a sample without a pid field */
	/* each thread's latest sample written (a repeat of it costs a bit): tid -> index in last */
	struct prs_map64 last_of_tid;
	struct prs_sample *last;
	size_t nlast, last_cap;
	struct prs_buf col[PRS_PYRS_NCOLS]; /* a SAMPLES block's columns */
};

static int write_all(struct prs_recorder *r, const void *data, size_t len)
{
	const uint8_t *d = data;

	while (len) {
		ssize_t n = write(r->fd, d, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		d += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Feeds r->rec to zstd with mode, writing what comes out; empties r->rec. */
static int compress_out(struct prs_recorder *r, ZSTD_EndDirective mode, struct prs_err *err)
{
	ZSTD_inBuffer in = { r->rec.data, r->rec.len, 0 };
	size_t left;
	int rc;

	do {
		ZSTD_outBuffer out = { r->zout, r->zout_cap, 0 };

		left = ZSTD_compressStream2(r->cctx, &out, &in, mode);
		if (ZSTD_isError(left))
			return prs_err_set(err, -EIO, "%s: zstd: %s", r->path, ZSTD_getErrorName(left));
		if (out.pos && (rc = write_all(r, r->zout, out.pos)) < 0) {
			r->failed = rc;
			return prs_err_set(err, rc, "%s: write: %s", r->path, strerror(-rc));
		}
	} while (mode == ZSTD_e_continue ? in.pos < in.size : left != 0);
	prs_buf_reset(&r->rec);
	return 0;
}

/* Appends the record (type, payload length, payload) from r->payload to r->rec. */
static int end_record(struct prs_recorder *r, uint8_t type)
{
	/* reserve first so that a record is appended whole or not at all */
	int rc = prs_buf_reserve(&r->rec, 1 + PRS_LEB128_MAX + r->payload.len);

	if (rc || (rc = prs_buf_putc(&r->rec, type)) || (rc = prs_buf_put_uleb(&r->rec, r->payload.len)) ||
	    (rc = prs_buf_append(&r->rec, r->payload.data, r->payload.len)))
		return rc;
	prs_buf_reset(&r->payload);
	return 0;
}

static int put(struct prs_recorder *r, uint64_t v)
{
	return prs_buf_put_uleb(&r->payload, v);
}

static int chunk(struct prs_recorder *r, struct prs_err *err)
{
	return r->rec.len >= CHUNK_BYTES ? compress_out(r, ZSTD_e_end, err) : 0;
}

/* The writer no longer knows what the reader holds as each thread's latest sample. */
static void forget_last(struct prs_recorder *r)
{
	prs_map64_release(&r->last_of_tid);
	prs_map64_init(&r->last_of_tid);
	r->nlast = 0;
}

static bool same_but_time(const struct prs_sample *a, const struct prs_sample *b)
{
	return a->state == b->state && a->syscall == b->syscall && a->stack == b->stack &&
	       a->weight == b->weight && a->flags == b->flags && a->pid == b->pid;
}

/* s's entry in the latest samples (made for a new tid, NULL when out of memory); *seen says
 * whether it held a sample before. */
static struct prs_sample *last_of(struct prs_recorder *r, int32_t tid, bool *seen)
{
	uint32_t k;
	int rc = prs_map64_intern(&r->last_of_tid, (uint32_t)tid, (uint32_t)r->nlast, &k);

	if (rc < 0)
		return NULL;
	*seen = rc == 0;
	if (!*seen) {
		/* (on failure the entry just made names no sample: the caller forgets them all) */
		if (prs_array_grow((void **)&r->last, &r->last_cap, r->nlast + 1, sizeof(*r->last)) < 0)
			return NULL;
		r->nlast++;
	}
	return &r->last[k];
}

/*
 * One SAMPLES record of the n samples smp[0..n) (docs/pyrs-format.md): the fields as columns, a
 * sample that repeats its thread's previous one but for the time as a bit. 0 or -ENOMEM (the
 * caller then forgets the latest samples: some may have been updated for a block never written).
 */
static int fill_block(struct prs_recorder *r, const struct prs_sample *smp, size_t n)
{
	struct prs_buf *col = r->col;
	uint8_t bits = 0;
	int32_t tid = 0;
	int rc = 0;

	for (unsigned c = 0; c < PRS_PYRS_NCOLS; c++)
		prs_buf_reset(&col[c]);
	for (size_t k = 0; k < n && !rc; k++) {
		const struct prs_sample *s = &smp[k];
		bool seen = false;
		struct prs_sample *last = last_of(r, s->tid, &seen);
		bool repeat = last && seen && same_but_time(s, last);

		if (!last)
			return -ENOMEM;
		rc = prs_buf_put_sleb(&col[PRS_COL_TID], (int64_t)s->tid - tid);
		if (!rc)
			rc = prs_buf_put_sleb(&col[PRS_COL_TIME], (int64_t)(s->time_ns - r->last_time_ns));
		r->last_time_ns = s->time_ns;
		tid = s->tid;
		*last = *s;
		bits |= (uint8_t)(repeat << (k % 8));
		if (!rc && (k % 8 == 7 || k == n - 1)) {
			rc = prs_buf_putc(&col[PRS_COL_REPEAT], bits);
			bits = 0;
		}
		if (repeat || rc)
			continue;
		if ((rc = prs_buf_put_uleb(&col[PRS_COL_STATE], s->state)) ||
		    (rc = prs_buf_put_uleb(&col[PRS_COL_SYSCALL], (uint64_t)((int64_t)s->syscall + 1))) ||
		    (rc = prs_buf_put_uleb(&col[PRS_COL_STACK], s->stack)) ||
		    (rc = prs_buf_put_uleb(&col[PRS_COL_WEIGHT], s->weight)) ||
		    (rc = prs_buf_put_uleb(&col[PRS_COL_FLAGS], s->flags)))
			break;
		rc = prs_buf_put_uleb(&col[PRS_COL_PID], s->pid == prs_pyrs_pids_implied(&r->pids, s->tid)
								 ? 0 : (uint64_t)s->pid + 1);
	}
	if (rc || (rc = put(r, n)))
		return rc;
	for (unsigned c = 0; c < PRS_PYRS_NCOLS; c++)
		if ((rc = prs_buf_append(&r->payload, col[c].data, col[c].len)))
			return rc;
	return end_record(r, PRS_REC_SAMPLES);
}

static int encode_block(struct prs_recorder *r, const struct prs_sample *smp, size_t n)
{
	uint64_t t = r->last_time_ns;
	int rc = fill_block(r, smp, n);

	if (rc)
		r->last_time_ns = t; /* the times of the next try count from the last sample written */
	return rc;
}

static int encode_new(struct prs_recorder *r, struct prs_err *err)
{
	struct prs_profile *p = r->p;
	const struct prs_sample *smp;
	size_t nsmp;
	int rc = 0;

	for (; r->w_strings < p->nstrings; r->w_strings++) {
		uint32_t i = r->w_strings;

		if ((rc = prs_buf_append(&r->payload, p->strings[i], p->string_lens[i])) ||
		    (rc = end_record(r, PRS_REC_STRING)) || (rc = chunk(r, err)))
			goto out;
	}
	for (; r->w_mappings < p->nmappings; r->w_mappings++) {
		const struct prs_mapping *m = &p->mappings[r->w_mappings];

		if ((rc = put(r, m->start)) || (rc = put(r, m->end)) || (rc = put(r, m->offset)) ||
		    (rc = put(r, m->path)) || (rc = put(r, m->build_id_len)) ||
		    (rc = prs_buf_append(&r->payload, m->build_id, m->build_id_len)) ||
		    (m->pid && (rc = prs_buf_put_sleb(&r->payload, m->pid))) ||
		    (rc = end_record(r, PRS_REC_MAPPING)) || (rc = chunk(r, err)))
			goto out;
	}
	for (; r->w_frames < p->nframes; r->w_frames++) {
		const struct prs_frame *f = &p->frames[r->w_frames];
		unsigned flags = (f->raw ? PRS_FRAME_F_RAW : 0) | (f->activation ? PRS_FRAME_F_ACTIVATION : 0);

		if ((rc = put(r, flags)) || (rc = put(r, f->kind)) ||
		    (rc = put(r, f->mapping == PRS_NO_MAPPING ? 0 : (uint64_t)f->mapping + 1)) ||
		    (rc = put(r, f->addr)) || (rc = put(r, f->name)) || (rc = put(r, f->file)) ||
		    (rc = put(r, f->line)) || (rc = end_record(r, PRS_REC_FRAME)) || (rc = chunk(r, err)))
			goto out;
	}
	for (; r->w_stacks < p->nstacks; r->w_stacks++) {
		const struct prs_stack *st = &p->stacks[r->w_stacks];

		/* the parent as a distance back: mostly the stack just before (a path is made in order) */
		if ((rc = put(r, r->w_stacks - st->parent)) || (rc = put(r, st->frame)) ||
		    (rc = end_record(r, PRS_REC_STACK)) || (rc = chunk(r, err)))
			goto out;
	}
	for (; r->w_threads < p->nthreads; r->w_threads++) {
		const struct prs_thread *t = &p->threads[r->w_threads];

		/* noted first: if the record then fails, the next flush writes it again as noted */
		if ((rc = prs_pyrs_pids_thread(&r->pids, t->tid, t->pid)) ||
		    (rc = prs_buf_put_sleb(&r->payload, t->tid)) || (rc = put(r, t->name)) ||
		    (t->pid && (rc = prs_buf_put_sleb(&r->payload, t->pid))) ||
		    (rc = end_record(r, PRS_REC_THREAD)))
			goto out;
	}
	for (; r->w_processes < p->nprocesses; r->w_processes++) {
		const struct prs_process *pr = &p->processes[r->w_processes];

		if ((rc = prs_buf_put_sleb(&r->payload, pr->pid)) ||
		    (rc = prs_buf_put_sleb(&r->payload, pr->ppid)) || (rc = put(r, pr->command)) ||
		    (rc = put(r, pr->time_ns)) || (rc = end_record(r, PRS_REC_PROCESS)))
			goto out;
	}
	for (; r->w_meta < p->nmeta; r->w_meta++) {
		const struct prs_meta *m = &p->meta[r->w_meta];

		if ((rc = put(r, m->key)) || (rc = put(r, m->value)) || (rc = end_record(r, PRS_REC_META)))
			goto out;
	}
	/* an aggregating profile keeps the samples for us in its pending array until they are written */
	smp = prs_profile_pending(p, &nsmp);
	if (!smp) {
		smp = p->samples;
		nsmp = p->nsamples;
	}
	while (r->w_samples < nsmp) {
		size_t n = nsmp - r->w_samples < PRS_PYRS_BLOCK_MAX ? nsmp - r->w_samples : PRS_PYRS_BLOCK_MAX;

		if ((rc = encode_block(r, smp + r->w_samples, n)) || (rc = chunk(r, err))) {
			forget_last(r); /* the block is not in the file: no later sample may repeat it */
			goto out;
		}
		r->w_samples += n;
		r->n_samples += n;
	}
	if (smp != p->samples) {
		prs_profile_pending_taken(p);
		r->w_samples = 0;
	}
	for (; r->w_acct < p->nacct; r->w_acct++) {
		const struct prs_acct_record *a = &p->acct[r->w_acct];

		if ((rc = prs_buf_append(&r->payload, a->data, a->len)) ||
		    (rc = end_record(r, a->type)) || (rc = chunk(r, err)))
			goto out;
	}
	for (; r->w_expand < p->index->nexpand_log; r->w_expand++) {
		uint32_t f = p->index->expand_log[r->w_expand], k;
		const struct prs_expansion *e = &p->expansions[f];

		/* the expansion as it is now: a later call for the same frame replaced it */
		if ((rc = put(r, f)) || (rc = put(r, e->count)))
			goto out;
		for (k = 0; k < e->count; k++)
			if ((rc = put(r, p->expand_ids[e->first + k])))
				goto out;
		if ((rc = end_record(r, PRS_REC_EXPAND)) || (rc = chunk(r, err)))
			goto out;
	}
out:
	if (rc == -ENOMEM)
		prs_err_set(err, rc, "%s: out of memory", r->path);
	/* a failed record is dropped whole, so that the next flush starts at a record boundary */
	prs_buf_reset(&r->payload);
	return rc;
}

int prs_recorder_open(const char *path, struct prs_recorder **out, struct prs_err *err)
{
	struct prs_recorder *r;
	uint8_t hdr[PRS_PYRS_HEADER_LEN] = { 0 };
	uint32_t version = PRS_PYRS_VERSION;
	int rc, i;

	*out = NULL;
	r = calloc(1, sizeof(*r));
	if (!r)
		return prs_err_set(err, -ENOMEM, "%s: out of memory", path);
	r->fd = -1;
	prs_buf_init(&r->rec);
	prs_buf_init(&r->payload);
	prs_pyrs_pids_init(&r->pids);
	prs_map64_init(&r->last_of_tid);
	for (i = 0; i < PRS_PYRS_NCOLS; i++)
		prs_buf_init(&r->col[i]);
	r->path = strdup(path);
	r->p = prs_profile_new();
	r->cctx = ZSTD_createCCtx();
	r->zout_cap = ZSTD_CStreamOutSize();
	r->zout = malloc(r->zout_cap);
	if (!r->path || !r->p || !r->cctx || !r->zout) {
		rc = prs_err_set(err, -ENOMEM, "%s: out of memory", path);
		goto fail;
	}
	ZSTD_CCtx_setParameter(r->cctx, ZSTD_c_compressionLevel, ZSTD_LEVEL);
	ZSTD_CCtx_setParameter(r->cctx, ZSTD_c_checksumFlag, 1);
	r->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (r->fd < 0) {
		rc = -errno;
		prs_err_set(err, rc, "%s: %s", path, strerror(-rc));
		goto fail;
	}
	memcpy(hdr, PRS_PYRS_MAGIC, PRS_PYRS_MAGIC_LEN);
	for (i = 0; i < 4; i++)
		hdr[8 + i] = (uint8_t)(version >> (8 * i));
	rc = write_all(r, hdr, sizeof(hdr));
	if (rc) {
		prs_err_set(err, rc, "%s: write: %s", path, strerror(-rc));
		goto fail;
	}
	/* string 0 and stack 0 exist in every profile: they are implied, not written */
	r->w_strings = 1;
	r->w_stacks = 1;
	*out = r;
	return 0;
fail:
	prs_recorder_close(r, NULL, NULL);
	return rc;
}

struct prs_profile *prs_recorder_profile(struct prs_recorder *r)
{
	return r->p;
}

int prs_recorder_aggregate(struct prs_recorder *r)
{
	return prs_profile_agg_enable(r->p, true);
}

int prs_recorder_flush(struct prs_recorder *r, struct prs_err *err)
{
	int rc;

	if (r->failed) {
		prs_profile_pending_taken(r->p); /* never to be written: not kept either */
		return prs_err_set(err, r->failed, "%s: an earlier write failed: %s", r->path,
				   strerror(-r->failed));
	}
	rc = encode_new(r, err);
	if (rc || r->rec.len == 0)
		return rc; /* nothing new: no empty frame */
	return compress_out(r, ZSTD_e_end, err);
}

int prs_recorder_close(struct prs_recorder *r, struct prs_profile **profile, struct prs_err *err)
{
	int rc = 0;

	if (profile)
		*profile = NULL;
	if (!r)
		return 0;
	if (r->fd >= 0) {
		struct prs_profile *p = r->p;

		/* what is new and the END record, in the last frame */
		rc = r->failed ? prs_err_set(err, r->failed, "%s: an earlier write failed: %s", r->path,
					     strerror(-r->failed))
			       : encode_new(r, err);
		if (!rc) {
			if ((rc = put(r, p->nstrings)) || (rc = put(r, p->nmappings)) ||
			    (rc = put(r, p->nframes)) || (rc = put(r, p->nstacks)) ||
			    (rc = put(r, r->n_samples)) || (rc = put(r, p->nthreads)) ||
			    (rc = put(r, p->nmeta)) || (rc = put(r, p->index->nexpand_log)) ||
			    /* appended counts: accounting records (when not 0, or when the
			     * process count follows), then PROCESS records (when not 0) */
			    ((p->nacct || p->nprocesses) && (rc = put(r, p->nacct))) ||
			    (p->nprocesses && (rc = put(r, p->nprocesses))) ||
			    (rc = end_record(r, PRS_REC_END)))
				prs_err_set(err, rc, "%s: out of memory", r->path);
			else
				rc = compress_out(r, ZSTD_e_end, err);
			/* the profile handed back is as complete as a reader of the file will find it */
			p->complete = rc == 0;
		}
		if (close(r->fd) < 0 && !rc) {
			rc = -errno;
			prs_err_set(err, rc, "%s: close: %s", r->path, strerror(-rc));
		}
	}
	if (profile)
		*profile = r->p;
	else
		prs_profile_free(r->p);
	ZSTD_freeCCtx(r->cctx);
	prs_buf_release(&r->rec);
	prs_buf_release(&r->payload);
	prs_pyrs_pids_release(&r->pids);
	prs_map64_release(&r->last_of_tid);
	free(r->last);
	for (int i = 0; i < PRS_PYRS_NCOLS; i++)
		prs_buf_release(&r->col[i]);
	free(r->zout);
	free(r->path);
	free(r);
	return rc;
}
