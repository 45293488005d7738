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

struct line {
	char *text;
	uint64_t count;
};

static int line_cmp(const void *a, const void *b)
{
	return strcmp(((const struct line *)a)->text, ((const struct line *)b)->text);
}

/* Appends one frame's text, made safe for the folded format. */
static int put_frame(struct prs_buf *b, const char *text, bool first)
{
	size_t start, i;
	int rc;

	if (!first && (rc = prs_buf_putc(b, ';')))
		return rc;
	if (!text[0])
		text = "[unknown]";
	start = b->len;
	if ((rc = prs_buf_append(b, text, strlen(text))))
		return rc;
	for (i = start; i < b->len; i++)
		if (b->data[i] == ';' || b->data[i] == '\n' || b->data[i] == '\r')
			b->data[i] = '_';
	return 0;
}

/* The text of view stack i: its frames, root first, each made safe; kernel frames get "_[k]". */
static int stack_text(struct prs_profile_view *v, size_t i, struct prs_buf *b)
{
	char label[PRS_MAX_NAME + 64];
	const uint32_t *ids;
	size_t n = prs_view_frames(v, i, &ids, NULL), k;
	int rc = 0;

	prs_buf_reset(b);
	for (k = 0; k < n && !rc; k++) {
		rc = put_frame(b, prs_view_frame_label(v, ids[k], label, sizeof(label)), k == 0);
		if (!rc && prs_view_frame_kind(v, ids[k]) == PRS_KIND_KERNEL)
			rc = prs_buf_append(b, "_[k]", 4);
	}
	return rc ? rc : prs_buf_putc(b, '\0');
}

int prs_export_folded(const struct prs_profile *p, const struct prs_view_opts *o, FILE *out,
		      struct prs_err *err)
{
	struct prs_profile_view *v = NULL;
	const struct prs_view_stack *st;
	struct line *lines = NULL;
	size_t nlines = 0, nst, i, j;
	struct prs_buf b;
	int rc;

	prs_buf_init(&b);
	if ((rc = prs_view_new(p, o, &v, err)))
		return rc;
	st = prs_view_stacks(v, &nst);
	lines = malloc((nst ? nst : 1) * sizeof(*lines));
	if (!lines)
		goto nomem;
	for (i = 0; i < nst; i++) {
		if (stack_text(v, i, &b))
			goto nomem;
		lines[nlines].text = (char *)prs_buf_detach(&b, NULL);
		lines[nlines++].count = st[i].weight;
	}
	if (nlines)
		qsort(lines, nlines, sizeof(*lines), line_cmp);
	for (i = 0; i < nlines; i = j) {
		uint64_t count = 0;

		/* different stacks can print alike (unsymbolized frames, replaced ';'): merge them */
		for (j = i; j < nlines && strcmp(lines[i].text, lines[j].text) == 0; j++)
			count += lines[j].count;
		if (fprintf(out, "%s %" PRIu64 "\n", lines[i].text, count) < 0) {
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
	for (i = 0; i < nlines; i++)
		free(lines[i].text);
	free(lines);
	prs_view_free(v);
	prs_buf_release(&b);
	return rc;
}
