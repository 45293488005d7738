/* SPDX-License-Identifier: MIT */
/*
 * Folded stacks (the format: include/pyrsprof/folded.h) into the profile model, and the model out
 * as folded stacks.
 */
#include "profile/profile-internal.h"
#include "pyrsprof/export.h"
#include "pyrsprof/folded.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "util/banned.h"

/*
 * The reader's state across lines. The lexer says how many leading frames a line shares with the
 * one before (folded files are usually sorted): their stack ids are reused and nothing is hashed.
 * The frames that differ are interned as usual: string -> frame (one array lookup per string id
 * and kind, after the first) -> stack (one trie probe). Unsorted input only loses the shortcut.
 * Measured on fg_bench's input (200k distinct stacks, 5.6M frames, 116 MB): 850k frames differ
 * from the line before, and reading takes ~0.4 s CPU instead of ~0.75 s, most of it the string
 * and trie probes of those 850k frames (cache misses in tables of 10-25 MB).
 */
struct reader {
	struct prs_profile *p;
	uint32_t *stack_at;    /* the stack that ends in the line's frame k */
	size_t stack_cap;
	uint32_t *frame_of[2]; /* [kernel][string id]: frame id + 1, 0 = not made yet */
	size_t frame_cap[2];
	uint32_t *hash;        /* the string hash of the line's frame k (k >= shared) */
	size_t hash_cap;
};

static void reader_release(struct reader *r)
{
	free(r->stack_at);
	free(r->hash);
	free(r->frame_of[0]);
	free(r->frame_of[1]);
}

/* The named frame for string str and kind (KERNEL or UNKNOWN); UINT32_MAX on ENOMEM. */
static uint32_t reader_frame(struct reader *r, uint32_t str, enum prs_kind kind)
{
	unsigned k = kind == PRS_KIND_KERNEL;
	uint32_t frame;

	if (str >= r->frame_cap[k]) {
		size_t old = r->frame_cap[k];

		if (prs_array_grow((void **)&r->frame_of[k], &r->frame_cap[k], (size_t)str + 1,
				   sizeof(*r->frame_of[k])))
			return UINT32_MAX;
		memset(r->frame_of[k] + old, 0, (r->frame_cap[k] - old) * sizeof(*r->frame_of[k]));
	}
	if (r->frame_of[k][str])
		return r->frame_of[k][str] - 1;
	frame = prs_profile_named_frame(r->p, kind, str, 0, 0);
	if (frame != UINT32_MAX)
		r->frame_of[k][str] = frame + 1;
	return frame;
}

/* Adds one lexed line to the profile: its stack, and its count as samples. */
static int folded_line(struct reader *r, const struct prs_folded_line *l)
{
	struct prs_profile *p = r->p;
	uint32_t stack = l->shared ? r->stack_at[l->shared - 1] : 0;
	uint64_t count = l->count;
	struct prs_sample smp;
	size_t k;

	if (prs_array_grow((void **)&r->stack_at, &r->stack_cap, l->nframes, sizeof(*r->stack_at)) ||
	    prs_array_grow((void **)&r->hash, &r->hash_cap, l->nframes, sizeof(*r->hash)))
		return -ENOMEM;
	/* unsorted input: most frames are looked up in a string table of tens of MB; with the
	 * slots, then the key bytes, asked for all of the line's frames first, their cache misses
	 * overlap (fg_shapes' unsorted shape: see the commit) */
	for (k = l->shared; k < l->nframes; k++) {
		r->hash[k] = (uint32_t)prs_hash_bytes(l->text + l->frames[k].off, l->frames[k].len);
		prs_profile_string_prefetch(p, r->hash[k], false);
	}
	for (k = l->shared; k < l->nframes; k++)
		prs_profile_string_prefetch(p, r->hash[k], true);
	for (k = l->shared; k < l->nframes; k++) {
		const struct prs_folded_frame *f = &l->frames[k];
		uint32_t str = prs_profile_string_hashed(p, l->text + f->off, f->len, r->hash[k]), frame;

		frame = str == UINT32_MAX ? UINT32_MAX
					  : reader_frame(r, str, f->kernel ? PRS_KIND_KERNEL : PRS_KIND_UNKNOWN);
		stack = frame == UINT32_MAX ? UINT32_MAX : prs_profile_stack(p, stack, frame);
		if (stack == UINT32_MAX)
			return -ENOMEM;
		r->stack_at[k] = stack;
	}
	memset(&smp, 0, sizeof(smp));
	smp.state = PRS_STATE_RUNNING;
	smp.syscall = -1;
	smp.stack = stack;
	do {
		smp.weight = count > UINT32_MAX ? UINT32_MAX : (uint32_t)count;
		count -= smp.weight;
		if (prs_profile_sample(p, &smp))
			return -ENOMEM;
	} while (count);
	return 0;
}

int prs_folded_read(FILE *f, const char *name, struct prs_profile **out, struct prs_err *err)
{
	struct prs_profile *p = prs_profile_new();
	struct prs_folded_lexer *lx = prs_folded_lexer_new(f, name);
	struct reader r = { .p = p };
	struct prs_folded_line l;
	int rc = 0, got;

	*out = NULL;
	if (!p || !lx) {
		rc = prs_err_set(err, -ENOMEM, "%s: out of memory", name);
		goto out;
	}
	while ((got = prs_folded_next(lx, &l, err)) > 0) {
		if (folded_line(&r, &l)) {
			rc = prs_err_set(err, -ENOMEM, "%s:%lu: out of memory", name, l.lineno);
			goto out;
		}
	}
	if (got < 0) {
		rc = got;
		goto out;
	}
	if (p->nsamples == 0) {
		rc = prs_err_set(err, -EINVAL, "%s: no stacks (empty folded file)", name);
		goto out;
	}
	p->complete = true;
	*out = p;
	p = NULL;
out:
	prs_folded_lexer_free(lx);
	reader_release(&r);
	/* the interning tables are half the reader's memory (1.4M trie nodes: 32 MB, 300k names:
	 * 24 MB) and a folded profile is mostly only looked at: they are built again if needed */
	if (*out)
		prs_profile_drop_index(*out);
	prs_profile_free(p);
	return rc;
}

/* ---- export ---- */

/*
 * The lines are sorted by their text without holding it: each view frame's text (its label made
 * safe, "_[k]" after a kernel frame's) is made once, each view stack kept as its frame ids, and
 * two lines are compared as the bytes their frames' texts and the ';' between them would make.
 * The texts of every line were 16 MB of a 1M-sample profile's export (and twice that in their
 * buffers' slack): the frames' texts and ids are ~4 MB.
 */
struct fold {
	struct prs_profile_view *v;
	struct prs_buf text;  /* the frames' texts, one after the other */
	struct prs_buf utf8;  /* prs_utf8_clean's scratch */
	uint64_t *text_of;    /* view frame id -> offset << 24 | length (0: not made yet) */
	size_t ntext_of;
	uint32_t *ids;        /* every line's frame ids, root first */
	size_t nids, cap_ids;
};

struct line {
	size_t first;   /* its frames: ids[first .. first + n) */
	uint32_t n;
	uint64_t count;
};

/*
 * Appends the name t[0..len) to b as a folded frame's text: valid UTF-8 (U+FFFD for a bad byte),
 * with '_' for ';' (the frame separator) and for every character that some consumer ends a line
 * at or that is a control: C0 and DEL (\n, \r, and \x0b \x0c \x1c-\x1e, which Python's
 * str.splitlines() splits at), C1 (U+0085 NEL among them), U+2028 and U+2029. flamegraph.pl and
 * inferno end a line at '\n' only, but a name from the target may hold any byte but NUL
 * (a co_name set by code.replace(), a torn read), and a folded line must parse back as one line
 * in every reader. 0 or -ENOMEM.
 */
static int append_folded_name(struct prs_buf *b, struct prs_buf *scratch, const char *t, size_t len)
{
	const unsigned char *u = (const unsigned char *)prs_utf8_clean(t, len, scratch, &len);

	if (!u)
		return -ENOMEM;
	for (size_t i = 0; i < len;) {
		size_t k = prs_utf8_control_len((const char *)u + i, len - i);
		int bad = k || u[i] == ';';

		if (!k && u[i] == 0xe2 && i + 2 < len && u[i + 1] == 0x80 && (u[i + 2] == 0xa8 || u[i + 2] == 0xa9))
			bad = 1, k = 3; /* U+2028, U+2029 */
		if (!k)
			k = 1;
		if (bad ? prs_buf_putc(b, '_') : prs_buf_append(b, u + i, k))
			return -ENOMEM;
		i += k;
	}
	return 0;
}

/* The text of frame id (made once): its label made safe for the folded format. 0 or -ENOMEM. */
static int frame_text(struct fold *f, uint32_t id)
{
	char label[PRS_MAX_NAME + 64];
	const char *t;
	size_t start = f->text.len, len;

	if (id >= f->ntext_of) {
		size_t old = f->ntext_of;

		if (prs_array_grow((void **)&f->text_of, &f->ntext_of, (size_t)id + 1, sizeof(*f->text_of)))
			return -ENOMEM;
		memset(f->text_of + old, 0, (f->ntext_of - old) * sizeof(*f->text_of));
	}
	if (f->text_of[id])
		return 0;
	t = prs_view_frame_label(f->v, id, label, sizeof(label));
	if (!t[0])
		t = "[unknown]";
	if (append_folded_name(&f->text, &f->utf8, t, strlen(t)))
		return -ENOMEM;
	if (prs_view_frame_kind(f->v, id) == PRS_KIND_KERNEL && prs_buf_append(&f->text, "_[k]", 4))
		return -ENOMEM;
	len = f->text.len - start;
	if (start >= (1ull << 40) || len >= (1u << 24))
		return -ENOMEM;
	f->text_of[id] = (uint64_t)start << 24 | len;
	return 0;
}

static const char *text_of(const struct fold *f, uint32_t id, size_t *len)
{
	*len = (size_t)(f->text_of[id] & 0xffffff);
	return (const char *)f->text.data + (f->text_of[id] >> 24);
}

/* Reads a line's bytes as a stream: frame k's text, then ';' (or the end after the last). */
struct cursor {
	const struct fold *f;
	const uint32_t *ids;
	uint32_t n, k;
	const char *t;
	size_t len, at;
};

static void cursor_at(struct cursor *c, uint32_t k)
{
	c->k = k;
	c->at = 0;
	if (k < c->n)
		c->t = text_of(c->f, c->ids[k], &c->len);
}

/* The next byte: a text's, ';' between frames, -1 at the end. */
static int cursor_next(struct cursor *c)
{
	if (c->k >= c->n)
		return -1;
	if (c->at < c->len)
		return (unsigned char)c->t[c->at++];
	cursor_at(c, c->k + 1);
	return c->k < c->n ? ';' : -1;
}

/* strcmp of two lines' texts. */
static int line_cmp(const void *a, const void *b, void *arg)
{
	const struct line *x = a, *y = b;
	const struct fold *f = arg;
	struct cursor cx = { f, f->ids + x->first, x->n, 0, NULL, 0, 0 };
	struct cursor cy = { f, f->ids + y->first, y->n, 0, NULL, 0, 0 };
	uint32_t k = 0;
	int bx, by;

	/* the same frames print the same: start at the first that differs */
	while (k < x->n && k < y->n && cx.ids[k] == cy.ids[k])
		k++;
	if (k == x->n && k == y->n)
		return 0;
	if (k > 0 && (k == x->n || k == y->n)) /* one ends where the other goes on with ';' */
		return k == x->n ? -1 : 1;
	cursor_at(&cx, k);
	cursor_at(&cy, k);
	do {
		bx = cursor_next(&cx);
		by = cursor_next(&cy);
	} while (bx == by && bx >= 0);
	return bx < by ? -1 : bx > by;
}

/* Writes a line's text. */
static int put_line(FILE *out, const struct fold *f, const struct line *l, uint64_t count)
{
	size_t len;

	for (uint32_t k = 0; k < l->n; k++) {
		const char *t = text_of(f, f->ids[l->first + k], &len);

		if ((k && putc(';', out) == EOF) || fwrite(t, 1, len, out) != len)
			return -EIO;
	}
	return fprintf(out, " %" PRIu64 "\n", count) < 0 ? -EIO : 0;
}

/* Keeps view stack i as a line: its frames' ids, their texts made. 0 or -ENOMEM. */
static int keep_line(struct fold *f, size_t i, uint64_t count, struct line *l)
{
	const uint32_t *ids;
	size_t n = prs_view_frames(f->v, i, &ids, NULL);

	if (!ids || n >= UINT32_MAX ||
	    prs_array_grow((void **)&f->ids, &f->cap_ids, f->nids + n, sizeof(*f->ids)))
		return -ENOMEM;
	for (size_t k = 0; k < n; k++)
		if (frame_text(f, ids[k]))
			return -ENOMEM;
	memcpy(f->ids + f->nids, ids, n * sizeof(*ids));
	*l = (struct line){ f->nids, (uint32_t)n, count };
	f->nids += n;
	return 0;
}

int prs_export_folded(const struct prs_profile *p, const struct prs_view_opts *o, FILE *out,
		      struct prs_err *err)
{
	struct fold f = { NULL };
	const struct prs_view_stack *st;
	struct line *lines = NULL;
	size_t nlines = 0, nst, i, j;
	int rc;

	prs_buf_init(&f.text);
	prs_buf_init(&f.utf8);
	if ((rc = prs_view_new(p, o, &f.v, err)))
		return rc;
	st = prs_view_stacks(f.v, &nst);
	lines = malloc((nst ? nst : 1) * sizeof(*lines));
	if (!lines)
		goto nomem;
	for (i = 0; i < nst; i++)
		if (keep_line(&f, i, st[i].weight, &lines[nlines++]))
			goto nomem;
	if (nlines)
		qsort_r(lines, nlines, sizeof(*lines), line_cmp, &f);
	for (i = 0; i < nlines; i = j) {
		uint64_t count = 0;

		/* different stacks can print alike (unsymbolized frames, replaced ';'): merge them */
		for (j = i; j < nlines && line_cmp(&lines[i], &lines[j], &f) == 0; j++)
			count += lines[j].count;
		if (put_line(out, &f, &lines[i], count)) {
			rc = prs_err_set(err, -EIO, "folded output: write error");
			goto out;
		}
	}
	if (fflush(out) != 0)
		rc = prs_err_set(err, -EIO, "folded output: write error");
	goto out;
nomem:
	rc = prs_err_set(err, -ENOMEM, "folded export: out of memory");
out:
	free(lines);
	free(f.ids);
	free(f.text_of);
	prs_buf_release(&f.text);
	prs_buf_release(&f.utf8);
	prs_view_free(f.v);
	return rc;
}
