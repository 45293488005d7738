/* SPDX-License-Identifier: MIT */
/*
 * The frames of a view: its own frames (roots, off-CPU leaves, "[empty stack]") next to the
 * profile's, their descriptions and labels, and the frames of a view stack root first.
 *
 * prs_view_frames() keeps the previous stack's frames and, for every trie stack it wrote, where
 * its frames end (end_of) and which stack wrote each position (owner): a trie stack's frames are
 * still in place when the position before its end is within the previous stack's frames and
 * still its own (its ancestors are then in place too: positions only change from the end). A new stack walks up the
 * trie only until it meets a stack whose frames are still in place, and appends the rest: a
 * consumer that visits the stacks in order expands each trie node about once, as if it had
 * memoized the trie, while the frames it gets are plain arrays.
 */
#include "profile/view-internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/banned.h"

#define OUT_MAX (PRS_VIEW_MAX_FRAMES + 3) /* two roots, the stack's frames, a leaf */

uint32_t prs_view_synth(struct prs_profile_view *v, const char *label, size_t len, enum prs_kind kind)
{
	uint32_t id = v->p->nframes + v->nsynth;
	size_t off = v->names.len;

	if (id >= UINT32_MAX - 1 || len > PRS_MAX_NAME * 4 || off > UINT32_MAX - len - 1 ||
	    prs_array_grow((void **)&v->synth, &v->cap_synth, (size_t)v->nsynth + 1, sizeof(*v->synth)) ||
	    prs_buf_append(&v->names, label, len) || prs_buf_putc(&v->names, '\0'))
		return PRS_VIEW_NONE;
	v->synth[v->nsynth++] = (struct view_synth){ (uint32_t)off, (uint32_t)len, (uint8_t)kind };
	return id;
}

uint32_t prs_view_nframes(const struct prs_profile_view *v)
{
	return v->p->nframes + v->nsynth;
}

static enum prs_kind known_kind(unsigned kind)
{
	return kind < PRS_KIND__COUNT ? (enum prs_kind)kind : PRS_KIND_UNKNOWN;
}

void prs_view_frame(const struct prs_profile_view *v, uint32_t id, struct prs_view_frame *f, char *buf,
		    size_t size)
{
	const struct prs_profile *p = v->p;
	const struct prs_frame *fr;

	memset(f, 0, sizeof(*f));
	f->file = "";
	if (id >= p->nframes) {
		const struct view_synth *s = &v->synth[id - p->nframes];

		f->name = (const char *)v->names.data + s->off;
		f->name_len = s->len;
		f->kind = (enum prs_kind)s->kind;
		return;
	}
	fr = &p->frames[id];
	f->frame = fr;
	if (fr->raw) {
		/* unsymbolized (a symbolized one is replaced by its expansion, unless raw_frames) */
		f->name = prs_profile_frame_label(p, id, buf, size);
		f->name_len = strlen(buf);
		f->kind = PRS_KIND_UNKNOWN;
		return;
	}
	if (fr->name && fr->name < p->nstrings && p->string_lens[fr->name]) {
		f->name = p->strings[fr->name];
		f->name_len = p->string_lens[fr->name];
	} else {
		f->name = "[unknown]";
		f->name_len = 9;
	}
	if (fr->file && fr->file < p->nstrings) {
		f->file = p->strings[fr->file];
		f->file_len = p->string_lens[fr->file];
	}
	if (v->o.file_of) {
		size_t len;
		const char *file = v->o.file_of(v->o.file_arg, id, &len);

		if (file) {
			f->file = file;
			f->file_len = len;
		}
	}
	f->line = fr->line;
	f->kind = known_kind(fr->kind);
}

enum prs_kind prs_view_frame_kind(const struct prs_profile_view *v, uint32_t id)
{
	const struct prs_profile *p = v->p;

	if (id >= p->nframes)
		return (enum prs_kind)v->synth[id - p->nframes].kind;
	return p->frames[id].raw ? PRS_KIND_UNKNOWN : known_kind(p->frames[id].kind);
}

const char *prs_view_frame_label(const struct prs_profile_view *v, uint32_t id, char *buf, size_t size)
{
	const struct prs_profile *p = v->p;
	const struct prs_frame *f;
	const char *file, *mapped;
	size_t n;

	if (!size)
		return buf;
	if (id >= p->nframes) {
		snprintf(buf, size, "%s", (const char *)v->names.data + v->synth[id - p->nframes].off);
		return buf;
	}
	prs_profile_frame_label(p, id, buf, size);
	f = &p->frames[id];
	if (!v->o.lines || f->raw)
		return buf;
	file = f->file && f->file < p->nstrings ? p->strings[f->file] : NULL;
	if (v->o.file_of && (mapped = v->o.file_of(v->o.file_arg, id, &n)))
		file = mapped[0] ? mapped : NULL;
	if (!file)
		return buf;
	n = strlen(buf);
	if (f->line)
		snprintf(buf + n, size - n, " (%s:%" PRIu32 ")", file, f->line);
	else
		snprintf(buf + n, size - n, " (%s)", file);
	return buf;
}

static int frames_alloc(struct prs_profile_view *v)
{
	const struct prs_profile *p = v->p;

	v->out = malloc(OUT_MAX * sizeof(*v->out));
	v->owner = malloc(OUT_MAX * sizeof(*v->owner));
	v->chain = malloc((PRS_PROFILE_MAX_DEPTH + 1) * sizeof(*v->chain));
	/* zero: no stack has frames in place yet */
	v->end_of = calloc(p->nstacks ? p->nstacks : 1, sizeof(*v->end_of));
	if (!v->out || !v->owner || !v->chain || !v->end_of)
		return -ENOMEM;
	v->last_nroots = UINT32_MAX;
	return 0;
}

/* True if the frames of trie stack s are still in place in out (from a previous stack). */
static bool in_place(const struct prs_profile_view *v, uint32_t s)
{
	uint32_t e = v->end_of[s];

	return e > 0 && e <= v->stack_end && v->owner[e - 1] == s;
}

/* Appends the frames of trie stacks chain[n-1] (nearest the root) .. chain[0] at out[pos]. */
static size_t append_chain(struct prs_profile_view *v, size_t n, size_t pos, size_t limit)
{
	const struct prs_profile *p = v->p;

	while (n-- > 0) {
		uint32_t t = v->chain[n], count = 1;
		const uint32_t *ids = &p->stacks[t].frame;

		if (!v->o.raw_frames && p->expansions) /* folded input has none: no call per frame */
			ids = prs_profile_expansion(p, ids, &count);
		if (count == 1 && pos < limit) { /* the common case, without the loop below */
			v->owner[pos] = t;
			v->out[pos++] = *ids;
			v->end_of[t] = (uint32_t)pos;
			continue;
		}
		if (count > limit - pos) {
			/* too deep: the frames nearest the root are kept, the rest are not in place
			 * (the positions written still name t: no older stack is in place there) */
			for (; count > 0 && pos < limit; count--) {
				v->owner[pos] = t;
				v->out[pos++] = *ids++;
			}
			for (size_t k = 0; k <= n; k++) /* chain[n] is t */
				v->end_of[v->chain[k]] = 0;
			return pos;
		}
		/* every position names its stack: a later stack that overwrites part of these frames
		 * (an expansion is several) leaves t out of place */
		while (count-- > 0) {
			v->owner[pos] = t;
			v->out[pos++] = *ids++;
		}
		v->end_of[t] = (uint32_t)pos;
	}
	return pos;
}

size_t prs_view_frames(struct prs_profile_view *v, size_t i, const uint32_t **frames, size_t *shared)
{
	const struct prs_profile *p = v->p;
	const struct prs_view_stack *st = &v->stacks[i];
	const uint32_t *roots = v->roots + 2 * i;
	size_t nr = st->nroots, same = 0, n = 0, pos;
	uint32_t s = st->stack;

	if (v->o.python_stacks)
		return prs_view_python_frames(v, i, frames, shared);
	*frames = NULL;
	if (shared)
		*shared = 0;
	if (!v->out && frames_alloc(v) < 0)
		return 0;
	while (same < nr && same < v->last_nroots && roots[same] == v->last_roots[same])
		same++;
	if (same < nr || nr != v->last_nroots) {
		/* other roots: nothing after them is in place */
		memcpy(v->out, roots, nr * sizeof(*roots));
		memcpy(v->last_roots, roots, nr * sizeof(*roots));
		v->last_nroots = (uint32_t)nr;
		v->stack_end = nr;
	}
	/* up the trie to the deepest stack whose frames are in place (parents are smaller ids:
	 * this ends; the bound is for a profile built by hand) */
	while (s != 0 && s < p->nstacks && !in_place(v, s) && n <= PRS_PROFILE_MAX_DEPTH) {
		v->chain[n++] = s;
		s = p->stacks[s].parent;
	}
	pos = s != 0 && s < p->nstacks && in_place(v, s) ? v->end_of[s] : nr;
	if (shared)
		*shared = same == nr ? pos : same;
	pos = append_chain(v, n, pos, nr + PRS_VIEW_MAX_FRAMES);
	v->stack_end = pos;
	if (st->leaf != PRS_VIEW_NONE)
		v->out[pos++] = st->leaf;
	else if (st->empty)
		v->out[pos++] = v->empty_frame;
	*frames = v->out;
	return pos;
}
