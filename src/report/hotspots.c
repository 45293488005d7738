/* SPDX-License-Identifier: MIT */
/*
 * Hot spots of one view of a profile, by function or by line: self (the sample's innermost
 * frame) and total (anywhere on its stack, once per sample however deep the recursion). The
 * samples are read through a view (include/pyrsprof/view.h), whose stacks are the samples summed
 * per (stack, off-CPU leaf), so each distinct stack is walked once; a stamp per hot spot counts
 * it once per view stack. Inline expansions apply (an inlined callee is a function of its own,
 * at its own lines). Names are cleaned to UTF-8 and cut to fit the row.
 *
 * Spots are counted in a compact form (key, kind, weights) and made into rows of
 * struct prs_hotspot (half a kilobyte each) only at the end: a profile has ~100k lines, and
 * the report wants the first 20 of each table (prs_hotspots_top), not 100k rows sorted.
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
	char *key;        /* label NUL file NUL line (owned): the file is "" by name */
	size_t keylen;
	const char *file; /* by name: the first file seen (borrowed from the view), else NULL */
	size_t flen;
	uint32_t line;    /* 0 at function level */
	enum prs_kind kind;
	double self, total;
	uint64_t stamp;
};

/* The spots of one table: by function (lines false) or by line. */
struct table {
	bool lines, by_name;
	struct spot *spots;
	size_t n, cap;
	struct prs_strmap map;
	uint32_t *frame_spot; /* view frame id -> spot index + 1 */
};

struct hctx {
	struct prs_profile_view *v;
	struct table t[2];
	size_t nt;
	struct prs_buf key, scratch;
	uint64_t serial;
};

static void copy_utf8(struct prs_buf *scratch, char *dst, size_t size, const char *s, size_t len)
{
	size_t n;
	const char *t = prs_utf8_clean(s, len, scratch, &n);

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

/* The spot of (kind, label, file, line) in t: its index, or SIZE_MAX on ENOMEM. */
static size_t spot_of(struct hctx *c, struct table *t, enum prs_kind kind, const char *label,
		      const char *file, size_t flen, uint32_t line)
{
	char ln[PRS_FMT_U64_MAX];
	size_t nln = prs_fmt_u64(ln, t->lines ? line : 0); /* (no printf: once per view frame) */
	uint32_t v;
	struct spot *s;

	prs_buf_reset(&c->key);
	if (prs_buf_append(&c->key, label, strlen(label) + 1) ||
	    prs_buf_append(&c->key, file, t->by_name ? 0 : flen) ||
	    prs_buf_append(&c->key, "", 1) || prs_buf_append(&c->key, ln, nln))
		return SIZE_MAX;
	v = prs_strmap_get(&t->map, c->key.data, c->key.len);
	if (v != PRS_MAP_NONE) {
		s = &t->spots[v];
		/* by name: the first known kind and the first file seen */
		if (s->kind == PRS_KIND_UNKNOWN)
			s->kind = kind;
		if (t->by_name && !s->flen && flen) {
			s->file = file;
			s->flen = flen;
		}
		return v;
	}
	if (t->n >= UINT32_MAX - 1 || prs_array_grow((void **)&t->spots, &t->cap, t->n + 1, sizeof(*t->spots)))
		return SIZE_MAX;
	s = &t->spots[t->n];
	memset(s, 0, sizeof(*s));
	s->key = malloc(c->key.len);
	if (!s->key)
		return SIZE_MAX;
	memcpy(s->key, c->key.data, c->key.len);
	s->keylen = c->key.len;
	if (prs_strmap_put(&t->map, s->key, s->keylen, (uint32_t)t->n)) {
		free(s->key);
		return SIZE_MAX;
	}
	if (t->by_name) {
		s->file = file;
		s->flen = flen;
	}
	s->line = t->lines ? line : 0;
	s->kind = kind;
	return t->n++;
}

/* The spots of view frame fid in every table (t[k] gets spot[k]); false on ENOMEM. */
static bool frame_spots(struct hctx *c, uint32_t fid, size_t *spot)
{
	struct prs_view_frame f;
	char label[PRS_MAX_NAME + 64];
	size_t k;

	for (k = 0; k < c->nt && c->t[k].frame_spot[fid]; k++)
		spot[k] = c->t[k].frame_spot[fid] - 1;
	if (k == c->nt)
		return true;
	prs_view_frame(c->v, fid, &f, label, sizeof(label));
	prs_view_frame_label(c->v, fid, label, sizeof(label));
	if (!label[0])
		snprintf(label, sizeof(label), "[unknown]");
	for (k = 0; k < c->nt; k++) {
		spot[k] = spot_of(c, &c->t[k], f.kind, label, f.file, f.file_len, f.line);
		if (spot[k] == SIZE_MAX)
			return false;
		c->t[k].frame_spot[fid] = (uint32_t)spot[k] + 1;
	}
	return true;
}

/* Adds w to spot s's total once per group (a recursive function is on the stack once). */
static void add_total(struct hctx *c, struct spot *s, double w)
{
	if (s->stamp != c->serial) {
		s->stamp = c->serial;
		s->total += w;
	}
}

/* Adds the weight w of view stack i to the spots of its frames (its leaf is the last). */
static int count_stack(struct hctx *c, size_t i, double w)
{
	const uint32_t *ids;
	size_t n = prs_view_frames(c->v, i, &ids, NULL), spot[2] = { SIZE_MAX, SIZE_MAX }, k;

	c->serial++;
	for (size_t j = 0; j < n; j++) {
		if (!frame_spots(c, ids[j], spot))
			return -ENOMEM;
		for (k = 0; k < c->nt; k++)
			add_total(c, &c->t[k].spots[spot[k]], w);
	}
	for (k = 0; k < c->nt; k++)
		if (spot[k] != SIZE_MAX)
			c->t[k].spots[spot[k]].self += w;
	return 0;
}

/* Spot s of t as a row. */
static void make_row(const struct table *t, const struct spot *s, struct prs_buf *scratch,
		     struct prs_hotspot *h)
{
	size_t llen = strlen(s->key);
	const char *file = t->by_name ? s->file : s->key + llen + 1;
	size_t flen = t->by_name ? s->flen : strlen(file);

	memset(h, 0, sizeof(*h));
	copy_utf8(scratch, h->name, sizeof(h->name), s->key, llen);
	copy_utf8(scratch, h->file, sizeof(h->file), file ? file : "", file ? flen : 0);
	h->line = s->line;
	h->kind = s->kind;
	h->self = s->self;
	h->total = s->total;
}

/* Rows of equal weights: by name, file, line. */
static int place_cmp(const struct prs_hotspot *x, const struct prs_hotspot *y)
{
	int r;

	if ((r = strcmp(x->name, y->name)))
		return r;
	if ((r = strcmp(x->file, y->file)))
		return r;
	return x->line < y->line ? -1 : x->line > y->line;
}

static int row_cmp(const void *a, const void *b)
{
	const struct prs_hotspot *x = a, *y = b;

	if (x->self != y->self)
		return x->self > y->self ? -1 : 1;
	if (x->total != y->total)
		return x->total > y->total ? -1 : 1;
	return place_cmp(x, y);
}

/* By total, then self, name, file and line (a total order, as row_cmp). */
static int total_cmp(const void *a, const void *b)
{
	const struct prs_hotspot *x = a, *y = b;

	if (x->total != y->total)
		return x->total > y->total ? -1 : 1;
	if (x->self != y->self)
		return x->self > y->self ? -1 : 1;
	return place_cmp(x, y);
}

static void hctx_release(struct hctx *c)
{
	for (size_t k = 0; k < 2; k++) {
		struct table *t = &c->t[k];

		for (size_t i = 0; i < t->n; i++)
			free(t->spots[i].key);
		free(t->spots);
		free(t->frame_spot);
		prs_strmap_release(&t->map);
	}
	prs_view_free(c->v);
	prs_buf_release(&c->key);
	prs_buf_release(&c->scratch);
}

/* Counts view o into the tables of c (c->t[k].lines and by_name set, c->nt of them). */
static int hctx_count(struct hctx *c, const struct prs_profile *p, const struct prs_view_opts *o,
		      double *total, struct prs_err *err)
{
	const struct prs_view_stack *st;
	size_t nst, i, k;
	int rc;

	*total = 0;
	prs_buf_init(&c->key);
	prs_buf_init(&c->scratch);
	for (k = 0; k < 2; k++)
		prs_strmap_init(&c->t[k].map);
	if ((rc = prs_view_new(p, o, &c->v, err)))
		return rc;
	st = prs_view_stacks(c->v, &nst);
	for (k = 0; k < c->nt; k++) {
		c->t[k].frame_spot = calloc(prs_view_nframes(c->v), sizeof(*c->t[k].frame_spot));
		if (!c->t[k].frame_spot)
			goto nomem;
	}
	for (i = 0; i < nst; i++) {
		*total += (double)st[i].weight;
		if (count_stack(c, i, (double)st[i].weight))
			goto nomem;
	}
	return 0;
nomem:
	return prs_err_set(err, -ENOMEM, "hot spots: out of memory");
}

int prs_hotspots(const struct prs_profile *p, enum prs_view view, unsigned flags,
		 struct prs_hotspot **rows, size_t *n, double *total, struct prs_err *err)
{
	return prs_hotspots_view(p, &(struct prs_view_opts){ .view = view }, flags, rows, n, total, err);
}

int prs_hotspots_view(const struct prs_profile *p, const struct prs_view_opts *o, unsigned flags,
		      struct prs_hotspot **rows, size_t *n, double *total, struct prs_err *err)
{
	struct hctx c;
	struct table *t = &c.t[0];
	int rc;

	*rows = NULL;
	*n = 0;
	memset(&c, 0, sizeof(c));
	c.nt = 1;
	t->lines = flags & PRS_HOT_LINES;
	t->by_name = flags & PRS_HOT_BY_NAME;
	if ((rc = hctx_count(&c, p, o, total, err)))
		goto out;
	*rows = malloc((t->n ? t->n : 1) * sizeof(**rows));
	if (!*rows) {
		rc = prs_err_set(err, -ENOMEM, "hot spots: out of memory");
		goto out;
	}
	for (size_t i = 0; i < t->n; i++)
		make_row(t, &t->spots[i], &c.scratch, &(*rows)[i]);
	if (t->n)
		qsort(*rows, t->n, sizeof(**rows), row_cmp);
	*n = t->n;
out:
	hctx_release(&c);
	return rc;
}

/* ---- the first rows only ---- */

struct order {
	const struct spot *spots;
	bool by_total;
};

/* The numbers of spot i: (self, total) or (total, self), as the row order compares them first. */
static void key_of(const struct order *o, uint32_t i, double *a, double *b)
{
	const struct spot *s = &o->spots[i];

	*a = o->by_total ? s->total : s->self;
	*b = o->by_total ? s->self : s->total;
}

static int num_cmp(const void *x, const void *y, void *arg)
{
	double a1, b1, a2, b2;

	key_of(arg, *(const uint32_t *)x, &a1, &b1);
	key_of(arg, *(const uint32_t *)y, &a2, &b2);
	if (a1 != a2)
		return a1 > a2 ? -1 : 1;
	if (b1 != b2)
		return b1 > b2 ? -1 : 1;
	return 0;
}

/* Sifts heap[at] down: heap[0] is the worst (num_cmp's greatest) of heap[0..n). */
static void heap_down(uint32_t *heap, size_t n, size_t at, struct order *o)
{
	for (;;) {
		size_t c = 2 * at + 1;
		uint32_t x;

		if (c >= n)
			return;
		if (c + 1 < n && num_cmp(&heap[c + 1], &heap[c], o) > 0)
			c++;
		if (num_cmp(&heap[c], &heap[at], o) <= 0)
			return;
		x = heap[c];
		heap[c] = heap[at];
		heap[at] = x;
		at = c;
	}
}

/*
 * The first k rows of t in row_cmp (or total_cmp) order into *out (*nout of them): the k-th
 * spot by the numbers alone (a heap of k over the spots: a full sort of ~100k lines twice per
 * view was most of a report's sorting), then rows made for every spot up to it on the numbers
 * (ties included), sorted by the whole order. 0 or -ENOMEM.
 */
static int first_rows(const struct table *t, size_t k, bool by_total, struct prs_buf *scratch,
		      struct prs_hotspot **out, size_t *nout)
{
	struct order o = { t->spots, by_total };
	size_t kk = k < t->n ? k : t->n, nheap = 0, m = 0, i;
	uint32_t *heap = malloc((kk ? kk : 1) * sizeof(*heap));
	struct prs_hotspot *rows = NULL;

	*out = NULL;
	*nout = 0;
	if (!heap)
		return -ENOMEM;
	for (i = 0; kk && i < t->n; i++) {
		uint32_t x = (uint32_t)i;

		if (nheap < kk) {
			/* sift up */
			size_t at = nheap++;

			heap[at] = x;
			while (at > 0 && num_cmp(&heap[(at - 1) / 2], &heap[at], &o) < 0) {
				uint32_t y = heap[(at - 1) / 2];

				heap[(at - 1) / 2] = heap[at];
				heap[at] = y;
				at = (at - 1) / 2;
			}
		} else if (num_cmp(&x, &heap[0], &o) < 0) {
			heap[0] = x;
			heap_down(heap, nheap, 0, &o);
		}
	}
	/* every spot up to the k-th on the numbers: those of the first k and the ties after it */
	for (i = 0; kk && i < t->n; i++) {
		uint32_t x = (uint32_t)i;

		m += num_cmp(&x, &heap[0], &o) <= 0;
	}
	rows = malloc((m ? m : 1) * sizeof(*rows));
	if (!rows) {
		free(heap);
		return -ENOMEM;
	}
	for (i = 0, m = 0; kk && i < t->n; i++) {
		uint32_t x = (uint32_t)i;

		if (num_cmp(&x, &heap[0], &o) <= 0)
			make_row(t, &t->spots[i], scratch, &rows[m++]);
	}
	free(heap);
	if (m)
		qsort(rows, m, sizeof(*rows), by_total ? total_cmp : row_cmp);
	*out = rows;
	*nout = m < k ? m : k;
	return 0;
}

static int table_top(struct hctx *c, const struct table *t, size_t k, double total,
		     struct prs_hotspot_top *top)
{
	memset(top, 0, sizeof(*top));
	top->count = t->n;
	top->total = total;
	if (first_rows(t, k, false, &c->scratch, &top->by_self, &top->nself) ||
	    first_rows(t, k, true, &c->scratch, &top->by_total, &top->ntotal))
		return -ENOMEM;
	return 0;
}

int prs_hotspots_top(const struct prs_profile *p, const struct prs_view_opts *o, size_t k,
		     struct prs_hotspot_top *fn, struct prs_hotspot_top *line, struct prs_err *err)
{
	struct hctx c;
	double total;
	int rc;

	memset(fn, 0, sizeof(*fn));
	if (line)
		memset(line, 0, sizeof(*line));
	memset(&c, 0, sizeof(c));
	c.nt = line ? 2 : 1;
	c.t[1].lines = true;
	rc = hctx_count(&c, p, &(struct prs_view_opts){ .view = o->view, .python_stacks = o->python_stacks },
			&total, err);
	if (!rc && (table_top(&c, &c.t[0], k, total, fn) ||
		    (line && table_top(&c, &c.t[1], k, total, line))))
		rc = prs_err_set(err, -ENOMEM, "hot spots: out of memory");
	hctx_release(&c);
	if (rc) {
		prs_hotspot_top_release(fn);
		if (line)
			prs_hotspot_top_release(line);
	}
	return rc;
}

void prs_hotspot_top_release(struct prs_hotspot_top *t)
{
	free(t->by_self);
	free(t->by_total);
	memset(t, 0, sizeof(*t));
}

double prs_amdahl(double p)
{
	return p >= 1 ? INFINITY : 1 / (1 - (p > 0 ? p : 0));
}

const char *prs_hotspot_where(const struct prs_hotspot *h)
{
	const char *base = strrchr(h->file, '/');

	if (h->file[0])
		return base ? base + 1 : h->file;
	return h->kind == PRS_KIND_KERNEL ? "kernel" : "";
}
