/* SPDX-License-Identifier: MIT */
/*
 * A damaged profile.pyrs keeps what precedes the damage. The writer ends a zstd frame (with its
 * checksum) at every flush; the test records frames of known sample counts, notes where each
 * frame ends on disk, damages bytes, and checks that the reader keeps exactly the samples of the
 * frames before the damaged one, names the damaged frame's offset, and says so; damage in the
 * first frame (nothing saved before it) fails as corrupt. Nearly every flipped bit does that; the
 * rest (a frame's window size, checksum flag or block size) still keep only records recorded. Also: a flip that zstd cannot see (a
 * frame header's window size) reads the whole profile, a flush with nothing new adds no frame,
 * a flush of many samples is split into frames of at most ~256 KiB of records (damage there
 * reads as the file cut at the damaged frame), and a version-1 file written as one frame (before
 * this framing) still reads, and is refused when damaged.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "pyrsprof/profile.h"

#include "unit_tmpdir.h"

#include "util/banned.h"

#define MAX_FRAMES 64

static size_t file_size(const char *path)
{
	struct stat st;

	cr_assert_eq(stat(path, &st), 0, "%s", path);
	return (size_t)st.st_size;
}

static char *read_all(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *d;

	cr_assert_not_null(f);
	*len = file_size(path);
	d = malloc(*len + 1);
	cr_assert_eq(fread(d, 1, *len, f), *len);
	fclose(f);
	return d;
}

static void write_all(const char *path, const void *d, size_t n)
{
	FILE *f = fopen(path, "wb");

	cr_assert_not_null(f);
	cr_assert_eq(fwrite(d, 1, n, f), n);
	fclose(f);
}

/*
 * Records nframes flushes of per_frame samples each; frame k brings a new function (a string, a
 * frame and a stack whose parent is from an earlier frame) and thread, so later frames refer to
 * earlier ones. ends[k] is the file's size after flush k; ends[nframes] after close (the last
 * frame: meta and END). Sample i has time i * 1000 + 7 and weight 1 + i % 5. Returns the profile.
 */
static struct prs_profile *record_frames(const char *path, unsigned nframes, unsigned per_frame,
					 size_t *ends)
{
	struct prs_recorder *r;
	struct prs_profile *p, *out;
	struct prs_err err;
	uint32_t st = 0, i = 0;

	cr_assert_leq(nframes, MAX_FRAMES);
	cr_assert_eq(prs_recorder_open(path, &r, &err), 0, "%s", err.msg);
	p = prs_recorder_profile(r);
	for (unsigned k = 0; k < nframes; k++) {
		char name[32];
		uint32_t f;

		snprintf(name, sizeof(name), "function_%u", k);
		f = prs_profile_named_frame(p, PRS_KIND_PYTHON, prs_profile_string(p, name, strlen(name)),
					    prs_profile_string(p, "app.py", 6), 10 + k);
		st = prs_profile_stack(p, k % 3 ? st : 0, f);
		cr_assert_eq(prs_profile_thread(p, 100 + (int32_t)k, prs_profile_string(p, name, strlen(name))), 0);
		for (unsigned j = 0; j < per_frame; j++, i++)
			cr_assert_eq(prs_profile_sample(p, &(struct prs_sample){ .time_ns = i * 1000ull + 7,
				.tid = 100 + (int32_t)(j % (k + 1)), .state = j % 4 ? PRS_STATE_RUNNING : PRS_STATE_BLOCKED,
				.syscall = j % 4 ? -1 : 7, .stack = st, .weight = 1 + i % 5 }), 0);
		cr_assert_eq(prs_recorder_flush(r, &err), 0, "%s", err.msg);
		ends[k] = file_size(path);
	}
	cr_assert_eq(prs_profile_meta(p, "duration_s", "1.5"), 0);
	cr_assert_eq(prs_recorder_close(r, &out, &err), 0, "%s", err.msg);
	ends[nframes] = file_size(path);
	return out;
}

/* The frame holding file offset pos, and where it starts. */
static unsigned frame_of(const size_t *ends, unsigned nframes, size_t pos, size_t *start)
{
	unsigned k = 0;

	while (k < nframes && pos >= ends[k])
		k++;
	*start = k ? ends[k - 1] : 16;
	return k;
}

/* r holds exactly the first n samples of w. */
static void assert_first_samples(const struct prs_profile *w, const struct prs_profile *r, size_t n)
{
	cr_assert_eq(r->nsamples, n);
	for (size_t i = 0; i < n; i++) {
		const struct prs_sample *a = &w->samples[i], *b = &r->samples[i];

		cr_assert(a->time_ns == b->time_ns && a->tid == b->tid && a->state == b->state &&
			  a->syscall == b->syscall && a->weight == b->weight, "sample %zu", i);
		cr_assert_str_eq(r->strings[r->frames[r->stacks[b->stack].frame].name],
				 w->strings[w->frames[w->stacks[a->stack].frame].name], "sample %zu", i);
	}
}

/* How a damaged file read. */
enum outcome {
	WHOLE,     /* read whole: the flip left every decoded byte alone (a frame's window size) */
	EXACT,     /* the frames before the damaged one kept, exactly, and said; or refused when
		    * that is none */
	SHIFTED,   /* the flip hit a frame's framing (its checksum flag or a block size), not its
		    * data: the frame kept its records and the damage was found where the framing
		    * went wrong, inside that frame */
	TRUNCATED, /* a block size grew past the end of the file: read as cut short */
};

/*
 * Reads the file damaged in frame k (starting at start, ending at end), checks what any outcome
 * must hold (the samples kept are the first ones recorded, exactly, and the message says what
 * happened, on one line) and returns which outcome it was.
 */
static enum outcome check_damaged(const struct prs_profile *w, const char *data, size_t len,
				  unsigned k, size_t start, size_t end, unsigned per_frame,
				  const char *what)
{
	struct prs_profile *r;
	struct prs_err err;
	char warn[512], want[128];
	int rc = prs_pyrs_read_mem(data, len, &r, warn, sizeof(warn), &err);
	enum outcome o;

	if (rc != 0) {
		/* nothing kept before the damage */
		cr_assert_eq(rc, -EINVAL, "%s: %s", what, err.msg);
		cr_assert_null(r);
		cr_assert(strstr(err.msg, "corrupt profile") && strstr(err.msg, "before any sample"),
			  "%s: %s", what, err.msg);
		cr_assert_null(strchr(err.msg, '\n'));
		return k == 0 ? EXACT : SHIFTED;
	}
	cr_assert_null(strchr(warn, '\n'));
	if (r->complete) {
		cr_assert_eq(r->damaged_at, 0);
		assert_first_samples(w, r, w->nsamples);
		prs_profile_free(r);
		return WHOLE;
	}
	cr_assert_leq(r->nsamples, w->nsamples);
	assert_first_samples(w, r, r->nsamples);
	if (r->damaged_at == 0) {
		cr_assert(strstr(warn, "truncated after"), "%s: %s", what, warn);
		prs_profile_free(r);
		return TRUNCATED;
	}
	snprintf(want, sizeof(want), "damaged at byte %llu (", (unsigned long long)r->damaged_at);
	cr_assert(strstr(warn, want), "%s: %s", what, warn);
	{
		/* samples as the outputs count them: the records' weights */
		unsigned long long kept = 0;

		for (size_t i = 0; i < r->nsamples; i++)
			kept += r->samples[i].weight;
		snprintf(want, sizeof(want), ") after %llu samples; showing what precedes", kept);
	}
	cr_assert(strstr(warn, want), "%s: %s", what, warn);
	cr_assert(r->damaged_at >= start && r->damaged_at < end, "%s: damaged at %llu, outside frame %u [%zu, %zu)",
		  what, (unsigned long long)r->damaged_at, k, start, end);
	o = r->damaged_at == start && r->nsamples == (size_t)k * per_frame ? EXACT : SHIFTED;
	if (o == SHIFTED) /* the damaged frame's own records were whole */
		cr_assert_eq(r->nsamples, (size_t)(k + 1) * per_frame, "%s: %s", what, warn);
	prs_profile_free(r);
	return o;
}

Test(pyrs_damage, every_flipped_bit_keeps_the_frames_before, .init = unit_tmpdir_make, .fini = unit_tmpdir_remove)
{
	enum { NF = 4, PER = 30 };
	size_t ends[NF + 1], len, start;
	struct prs_profile *w;
	char path[128], what[64], *data;
	int seen[4] = { 0 }, flips = 0;

	snprintf(path, sizeof(path), "%s/profile.pyrs", unit_tmpdir);
	w = record_frames(path, NF, PER, ends);
	data = read_all(path, &len);
	cr_assert_eq(len, ends[NF]);
	for (size_t pos = 16; pos < len; pos++) {
		unsigned k = frame_of(ends, NF, pos, &start);

		for (int bit = 0; bit < 8; bit++, flips++) {
			data[pos] ^= (char)(1 << bit);
			snprintf(what, sizeof(what), "byte %zu bit %d", pos, bit);
			seen[check_damaged(w, data, len, k, start, ends[k], PER, what)]++;
			data[pos] ^= (char)(1 << bit);
		}
	}
	/* every frame has a checksum: nearly every flip loses exactly its frame and what follows */
	cr_log_info("%d flipped bits: %d exact, %d read whole, %d framing, %d as truncated", flips,
		    seen[EXACT], seen[WHOLE], seen[SHIFTED], seen[TRUNCATED]);
	cr_assert_gt(seen[EXACT] * 100, flips * 95);
	free(data);
	prs_profile_free(w);
}

/* The case: 64 flipped bytes in the middle of a file of many frames, read from the file. */
Test(pyrs_damage, flipped_bytes_in_the_middle, .init = unit_tmpdir_make, .fini = unit_tmpdir_remove)
{
	enum { NF = 40, PER = 250 };
	size_t ends[NF + 1], len, start;
	struct prs_profile *w, *r;
	struct prs_err err;
	char path[128], bad[128], warn[512], *data;
	unsigned k;

	snprintf(path, sizeof(path), "%s/profile.pyrs", unit_tmpdir);
	snprintf(bad, sizeof(bad), "%s/damaged.pyrs", unit_tmpdir);
	w = record_frames(path, NF, PER, ends);
	data = read_all(path, &len);
	k = frame_of(ends, NF, len / 2, &start);
	cr_assert(k > 0 && k < NF);
	for (size_t i = 0; i < 64 && len / 2 + i < len; i++)
		data[len / 2 + i] ^= 0xff;
	write_all(bad, data, len);
	cr_assert_eq(prs_pyrs_read(bad, &r, warn, sizeof(warn), &err), 0, "%s", err.msg);
	cr_assert_eq(r->damaged_at, start);
	cr_assert_not(r->complete);
	/* the 64 bytes may reach into the next frame: the first damaged one counts */
	assert_first_samples(w, r, (size_t)k * PER);
	cr_assert(strstr(warn, "showing what precedes"), "%s", warn);
	prs_profile_free(r);
	free(data);
	prs_profile_free(w);
}

/* Where each zstd frame starts, walked with libzstd's own frame sizes. */
static size_t frame_starts(const char *d, size_t len, size_t *out, size_t max)
{
	size_t n = 0;

	for (size_t i = 16; i < len && n < max;) {
		size_t sz = ZSTD_findFrameCompressedSize(d + i, len - i);

		cr_assert(!ZSTD_isError(sz), "frame at %zu: %s", i, ZSTD_getErrorName(sz));
		out[n++] = i;
		i += sz;
	}
	return n;
}

/*
 * Flushes of many samples are written as several frames of at most ~256 KiB of records (so a
 * frame spans the reader's reads, and damage costs at most that much). Damage in any frame reads
 * exactly as the file cut where that frame starts; later damage does not matter.
 */
Test(pyrs_damage, first_damaged_frame_decides, .init = unit_tmpdir_make, .fini = unit_tmpdir_remove)
{
	enum { NF = 6, PER = 100000 };
	size_t ends[NF + 1], len, starts[256], nstarts;
	struct prs_profile *w, *r, *cut;
	struct prs_err err;
	char path[128], bad[128], warn[512], *data;

	snprintf(path, sizeof(path), "%s/profile.pyrs", unit_tmpdir);
	snprintf(bad, sizeof(bad), "%s/damaged.pyrs", unit_tmpdir);
	w = record_frames(path, NF, PER, ends);
	data = read_all(path, &len);
	nstarts = frame_starts(data, len, starts, 256);
	cr_assert_gt(nstarts, 2 * NF, "%zu frames for %d flushes of %d samples", nstarts, NF, PER);
	for (size_t j = 1; j + 1 < nstarts; j += 3) {
		size_t mid = (starts[j] + starts[j + 1]) / 2;

		/* the truth: the file cut where frame j starts */
		cr_assert_eq(prs_pyrs_read_mem(data, starts[j], &cut, warn, sizeof(warn), &err), 0, "%s", err.msg);
		data[mid] ^= 0x40;
		data[starts[j + 1] - 2] ^= 0x01;
		data[len - 3] ^= 0x10;
		write_all(bad, data, len);
		cr_assert_eq(prs_pyrs_read(bad, &r, warn, sizeof(warn), &err), 0, "%s", err.msg);
		cr_assert_eq(r->damaged_at, starts[j], "frame %zu", j);
		cr_assert_gt(cut->nsamples, 0);
		assert_first_samples(w, r, cut->nsamples);
		cr_assert_eq(r->nthreads, cut->nthreads);
		prs_profile_free(r);
		prs_profile_free(cut);
		data[mid] ^= 0x40;
		data[starts[j + 1] - 2] ^= 0x01;
		data[len - 3] ^= 0x10;
	}
	free(data);
	prs_profile_free(w);
}

Test(pyrs_damage, a_flush_with_nothing_new_writes_nothing, .init = unit_tmpdir_make, .fini = unit_tmpdir_remove)
{
	struct prs_recorder *r;
	struct prs_profile *p;
	struct prs_err err;
	char path[128];
	size_t before;

	snprintf(path, sizeof(path), "%s/profile.pyrs", unit_tmpdir);
	cr_assert_eq(prs_recorder_open(path, &r, &err), 0, "%s", err.msg);
	p = prs_recorder_profile(r);
	cr_assert_eq(prs_profile_sample(p, &(struct prs_sample){ .syscall = -1, .weight = 1 }), 0);
	cr_assert_eq(prs_recorder_flush(r, &err), 0, "%s", err.msg);
	before = file_size(path);
	cr_assert_gt(before, 16);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(prs_recorder_flush(r, &err), 0, "%s", err.msg);
	cr_assert_eq(file_size(path), before);
	cr_assert_eq(prs_recorder_close(r, NULL, &err), 0, "%s", err.msg);
}

/*
 * tests/fixtures/profile/v1-small.pyrs was written before the writer ended a frame at each flush:
 * one zstd frame for the whole recording. It reads whole (pyrs.frozen_v1_fixture checks its
 * content); damaged anywhere, nothing in it is checked before the end, so nothing is kept.
 */
Test(pyrs_damage, old_single_frame_file)
{
	struct prs_profile *r;
	struct prs_err err;
	char warn[512], *data;
	size_t len;
	int refused = 0;

	data = read_all("tests/fixtures/profile/v1-small.pyrs", &len);
	cr_assert_eq(prs_pyrs_read_mem(data, len, &r, warn, sizeof(warn), &err), 0, "%s", err.msg);
	cr_assert(r->complete);
	cr_assert_eq(r->nsamples, 60);
	prs_profile_free(r);
	for (size_t pos = 16; pos < len; pos++) {
		int rc;

		data[pos] ^= 0x10;
		rc = prs_pyrs_read_mem(data, len, &r, warn, sizeof(warn), &err);
		if (rc == 0) {
			/* whole, or a block size grown past the end: read as cut short, as before */
			cr_assert((r->complete && r->nsamples == 60) ||
				  (!r->complete && !r->damaged_at && strstr(warn, "truncated after")),
				  "byte %zu: %s", pos, warn);
			prs_profile_free(r);
		} else {
			cr_assert_eq(rc, -EINVAL);
			cr_assert(strstr(err.msg, "corrupt profile"), "%s", err.msg);
			refused++;
		}
		data[pos] ^= 0x10;
	}
	cr_assert_gt(refused * 10, (int)(len - 16) * 9);
	free(data);
}
