/* SPDX-License-Identifier: MIT */
/*
 * Hot spots of one view of a profile, by function or by line: self (the sample's innermost
 * frame) and total (anywhere on its stack, once per sample however deep the recursion). The
 * samples are read through a view (include/pyrsprof/view.h), whose stacks are the samples summed
 * per (stack, off-CPU leaf), so each distinct stack is walked once; a stamp per hot spot counts
 * it once per view stack. Inline expansions apply (an inlined callee is a function of its own,
 * at its own lines). Names are cleaned to UTF-8 and cut to fit the row.
 */
#include "pyrsprof/report.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pyrsprof/export.h"
#include "pyrsprof/util.h"
#include "pyrsprof/view.h"

#include "util/banned.h"

struct spot {
	char *key; /* name NUL file NUL line (owned) */
	size_t keylen;
	struct prs_hotspot h;
	uint64_t stamp;
};

struct hctx {
	struct prs_profile_view *v;
	bool lines, by_name;
	struct spot *spots;
	size_t n, cap;
	struct prs_strmap map;
	struct prs_buf key, scratch;
	uint32_t *frame_spot; /* view frame id -> spot index + 1 */
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
	struct prs_view_frame f;
	char label[PRS_MAX_NAME + 64];
	size_t s;

	if (c->frame_spot[fid])
		return c->frame_spot[fid] - 1;
	prs_view_frame(c->v, fid, &f, label, sizeof(label));
	prs_view_frame_label(c->v, fid, label, sizeof(label));
	if (!label[0])
		snprintf(label, sizeof(label), "[unknown]");
	s = spot_of(c, f.kind, label, f.file, f.file_len, f.line);
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

/* Adds the weight w of view stack i to the spots of its frames (its leaf is the last). */
static int count_stack(struct hctx *c, size_t i, double w)
{
	const uint32_t *ids;
	size_t n = prs_view_frames(c->v, i, &ids, NULL), self = SIZE_MAX;

	c->serial++;
	for (size_t k = 0; k < n; k++) {
		size_t s = frame_spot(c, ids[k]);

		if (s == SIZE_MAX)
			return -ENOMEM;
		add_total(c, s, w);
		self = s;
	}
	if (self != SIZE_MAX)
		c->spots[self].h.self += w;
	return 0;
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

int prs_hotspots(const struct prs_profile *p, enum prs_view view, unsigned flags,
		 struct prs_hotspot **rows, size_t *n, double *total, struct prs_err *err)
{
	return prs_hotspots_view(p, &(struct prs_view_opts){ .view = view }, flags, rows, n, total, err);
}

int prs_hotspots_view(const struct prs_profile *p, const struct prs_view_opts *o, unsigned flags,
		      struct prs_hotspot **rows, size_t *n, double *total, struct prs_err *err)
{
	const struct prs_view_stack *st;
	struct hctx c;
	size_t nst, i;
	int rc;

	*rows = NULL;
	*n = 0;
	*total = 0;
	memset(&c, 0, sizeof(c));
	c.lines = flags & PRS_HOT_LINES;
	c.by_name = flags & PRS_HOT_BY_NAME;
	prs_strmap_init(&c.map);
	prs_buf_init(&c.key);
	prs_buf_init(&c.scratch);
	if ((rc = prs_view_new(p, o, &c.v, err)))
		goto out;
	st = prs_view_stacks(c.v, &nst);
	c.frame_spot = calloc(prs_view_nframes(c.v), sizeof(*c.frame_spot));
	if (!c.frame_spot)
		goto nomem;
	for (i = 0; i < nst; i++) {
		*total += (double)st[i].weight;
		if (count_stack(&c, i, (double)st[i].weight))
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
	free(c.frame_spot);
	prs_view_free(c.v);
	prs_strmap_release(&c.map);
	prs_buf_release(&c.key);
	prs_buf_release(&c.scratch);
	return rc;
}

double prs_amdahl(double p)
{
	return p >= 1 ? INFINITY : 1 / (1 - (p > 0 ? p : 0));
}
