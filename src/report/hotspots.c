/* SPDX-License-Identifier: MIT */
/*
 * Hot spots of one view of a profile, by function or by line: self (the sample's innermost
 * frame) and total (anywhere on its stack, once per sample however deep the recursion). Samples
 * are grouped by (stack, off-CPU leaf) first so each distinct stack is walked once; a stamp per
 * hot spot counts it once per group. Inline expansions apply (an inlined callee is a function of
 * its own, at its own lines). Names are cleaned to UTF-8 and cut to fit the row.
 */
#include "pyrsprof/report.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pyrsprof/export.h"
#include "pyrsprof/util.h"

#include "util/banned.h"

#define MAX_FRAMES (64u * 1024)

struct spot {
	char *key; /* name NUL file NUL line (owned) */
	size_t keylen;
	struct prs_hotspot h;
	uint64_t stamp;
};

struct hctx {
	const struct prs_profile *p;
	bool lines, by_name;
	struct spot *spots;
	size_t n, cap;
	struct prs_strmap map;
	struct prs_buf key, scratch;
	uint32_t *fbuf, *frame_spot; /* frame id -> spot index + 1 */
	uint64_t serial;
};

static void copy_utf8(struct hctx *c, char *dst, size_t size, const char *s, size_t len)
{
	size_t n;
	const char *t = prs_utf8_clean(s, len, &c->scratch, &n);

	if (!t)
		t = "", n = 0;
	if (n >= size) {
		n = size - 1;
		while (n > 0 && ((unsigned char)t[n] & 0xc0) == 0x80)
			n--;
	}
	memcpy(dst, t, n);
	dst[n] = '\0';
}

/* The spot of (kind, label, file, line): its index, or SIZE_MAX on ENOMEM. */
static size_t spot_of(struct hctx *c, enum prs_kind kind, const char *label, const char *file,
		      size_t flen, uint32_t line)
{
	char ln[16];
	uint32_t v;
	struct spot *s;

	snprintf(ln, sizeof(ln), "%u", c->lines ? line : 0);
	prs_buf_reset(&c->key);
	if (prs_buf_append(&c->key, label, strlen(label) + 1) ||
	    prs_buf_append(&c->key, file, c->by_name ? 0 : flen) ||
	    prs_buf_append(&c->key, "", 1) || prs_buf_append(&c->key, ln, strlen(ln)))
		return SIZE_MAX;
	v = prs_strmap_get(&c->map, c->key.data, c->key.len);
	if (v != PRS_MAP_NONE) {
		s = &c->spots[v];
		/* by name: the first known kind and the first file seen */
		if (s->h.kind == PRS_KIND_UNKNOWN)
			s->h.kind = kind;
		if (!s->h.file[0] && flen)
			copy_utf8(c, s->h.file, sizeof(s->h.file), file, flen);
		return v;
	}
	if (c->n >= UINT32_MAX - 1 || prs_array_grow((void **)&c->spots, &c->cap, c->n + 1, sizeof(*c->spots)))
		return SIZE_MAX;
	s = &c->spots[c->n];
	memset(s, 0, sizeof(*s));
	s->key = malloc(c->key.len);
	if (!s->key)
		return SIZE_MAX;
	memcpy(s->key, c->key.data, c->key.len);
	s->keylen = c->key.len;
	if (prs_strmap_put(&c->map, s->key, s->keylen, (uint32_t)c->n)) {
		free(s->key);
		return SIZE_MAX;
	}
	copy_utf8(c, s->h.name, sizeof(s->h.name), label, strlen(label));
	copy_utf8(c, s->h.file, sizeof(s->h.file), file, flen);
	s->h.line = c->lines ? line : 0;
	s->h.kind = kind;
	return c->n++;
}

static size_t frame_spot(struct hctx *c, uint32_t fid)
{
	const struct prs_profile *p = c->p;
	const struct prs_frame *f = &p->frames[fid];
	char label[PRS_MAX_NAME + 64];
	uint32_t file = !f->raw && f->file < p->nstrings ? f->file : 0;
	size_t s;

	if (c->frame_spot[fid])
		return c->frame_spot[fid] - 1;
	prs_profile_frame_label(p, fid, label, sizeof(label));
	if (!label[0])
		snprintf(label, sizeof(label), "[unknown]");
	s = spot_of(c, (enum prs_kind)f->kind, label, p->strings[file], p->string_lens[file], f->line);
	if (s != SIZE_MAX)
		c->frame_spot[fid] = (uint32_t)s + 1;
	return s;
}

/* Adds w to spot s's total once per group (a recursive function is on the stack once). */
static void add_total(struct hctx *c, size_t s, double w)
{
	if (c->spots[s].stamp != c->serial) {
		c->spots[s].stamp = c->serial;
		c->spots[s].h.total += w;
	}
}

/* Adds weight w of one group (stack, leaf label) to the spots. */
static int count_group(struct hctx *c, uint32_t stack, const char *leaf, enum prs_kind leaf_kind,
		       double w)
{
	size_t n = prs_profile_stack_frames(c->p, stack, c->fbuf, MAX_FRAMES), self = SIZE_MAX;

	c->serial++;
	for (size_t k = 0; k < n; k++) {
		size_t s = frame_spot(c, c->fbuf[k]);

		if (s == SIZE_MAX)
			return -ENOMEM;
		add_total(c, s, w);
		self = s;
	}
	if (leaf || self == SIZE_MAX) {
		size_t s = spot_of(c, leaf ? leaf_kind : PRS_KIND_UNKNOWN, leaf ? leaf : "[empty stack]",
				   "", 0, 0);

		if (s == SIZE_MAX)
			return -ENOMEM;
		add_total(c, s, w);
		self = s;
	}
	c->spots[self].h.self += w;
	return 0;
}

struct group {
	uint32_t stack;
	uint32_t leaf; /* index into the leaf labels + 1; 0 = none */
	double w;
};

static int group_cmp(const void *a, const void *b)
{
	const struct group *x = a, *y = b;

	if (x->stack != y->stack)
		return x->stack < y->stack ? -1 : 1;
	return x->leaf < y->leaf ? -1 : x->leaf > y->leaf;
}

static int row_cmp(const void *a, const void *b)
{
	const struct prs_hotspot *x = a, *y = b;
	int r;

	if (x->self != y->self)
		return x->self > y->self ? -1 : 1;
	if (x->total != y->total)
		return x->total > y->total ? -1 : 1;
	if ((r = strcmp(x->name, y->name)))
		return r;
	if ((r = strcmp(x->file, y->file)))
		return r;
	return x->line < y->line ? -1 : x->line > y->line;
}

#define MAX_LEAVES 1024

int prs_hotspots(const struct prs_profile *p, enum prs_view view, unsigned flags,
		 struct prs_hotspot **rows, size_t *n, double *total, struct prs_err *err)
{
	struct hctx c;
	struct group *g = malloc((p->nsamples ? p->nsamples : 1) * sizeof(*g));
	char (*leaves)[48] = calloc(MAX_LEAVES, sizeof(*leaves));
	enum prs_kind leaf_kind[MAX_LEAVES];
	size_t ng = 0, nleaves = 0, i, j;
	int rc = 0;

	*rows = NULL;
	*n = 0;
	*total = 0;
	memset(&c, 0, sizeof(c));
	c.p = p;
	c.lines = flags & PRS_HOT_LINES;
	c.by_name = flags & PRS_HOT_BY_NAME;
	prs_strmap_init(&c.map);
	prs_buf_init(&c.key);
	prs_buf_init(&c.scratch);
	c.fbuf = malloc(MAX_FRAMES * sizeof(*c.fbuf));
	c.frame_spot = calloc(p->nframes ? p->nframes : 1, sizeof(*c.frame_spot));
	if (!g || !leaves || !c.fbuf || !c.frame_spot)
		goto nomem;
	for (i = 0; i < p->nsamples; i++) {
		const struct prs_sample *s = &p->samples[i];
		char label[48];
		enum prs_kind kind;
		uint32_t leaf = 0;

		if (!prs_sample_in_view(s, view))
			continue;
		if (view == PRS_VIEW_WALL && prs_profile_offcpu_label(s, label, sizeof(label), &kind)) {
			for (j = 0; j < nleaves && strcmp(leaves[j], label); j++)
				;
			if (j == nleaves && nleaves < MAX_LEAVES) {
				memcpy(leaves[nleaves], label, sizeof(label));
				leaf_kind[nleaves++] = kind;
			}
			leaf = (uint32_t)(j < nleaves ? j : nleaves - 1) + 1;
		}
		g[ng++] = (struct group){ s->stack < p->nstacks ? s->stack : 0, leaf, s->weight };
		*total += s->weight;
	}
	if (ng)
		qsort(g, ng, sizeof(*g), group_cmp);
	for (i = 0; i < ng; i = j) {
		double w = 0;

		for (j = i; j < ng && group_cmp(&g[i], &g[j]) == 0; j++)
			w += g[j].w;
		if (count_group(&c, g[i].stack, g[i].leaf ? leaves[g[i].leaf - 1] : NULL,
				g[i].leaf ? leaf_kind[g[i].leaf - 1] : PRS_KIND_UNKNOWN, w))
			goto nomem;
	}
	*rows = malloc((c.n ? c.n : 1) * sizeof(**rows));
	if (!*rows)
		goto nomem;
	for (i = 0; i < c.n; i++)
		(*rows)[i] = c.spots[i].h;
	if (c.n)
		qsort(*rows, c.n, sizeof(**rows), row_cmp);
	*n = c.n;
	goto out;
nomem:
	rc = prs_err_set(err, -ENOMEM, "hot spots: out of memory");
out:
	for (i = 0; i < c.n; i++)
		free(c.spots[i].key);
	free(c.spots);
	free(c.fbuf);
	free(c.frame_spot);
	free(g);
	free(leaves);
	prs_strmap_release(&c.map);
	prs_buf_release(&c.key);
	prs_buf_release(&c.scratch);
	return rc;
}

double prs_amdahl(double p)
{
	return p >= 1 ? INFINITY : 1 / (1 - (p > 0 ? p : 0));
}
