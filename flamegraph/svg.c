/* SPDX-License-Identifier: MIT */
/*
 * The SVG writer of the flame graph: lays the tree out (children sorted by name, frames narrower
 * than min_width merged per parent), colors each box by frame kind with a shade from a stable hash
 * of its name (or by its change for differential graphs: fg_diff.c), and streams one self-contained
 * SVG with the embedded JS and CSS (flamegraph/fg.js, fg.css). The per-frame data the script needs
 * lives in the elements themselves, flamegraph.pl style:
 *
 *   <g class="f" data-x="OFFSET" data-c="COUNT" data-d="DEPTH"><title>NAME&#10;details…</title>
 *     <rect x=… y=… width=… height=… fill=…/><text x=… y=…>clipped name</text></g>
 *
 * (offsets and counts in samples, so the script's zoom and search shares are exact), then the
 * legend, the details line (<g id="foot">) and the title bar (<g id="head">). The geometry is that
 * of opts->width, what viewers without script show; in a browser the script fits it to the window
 * (fg.js), and cuts labels again to measured widths. Every string from a target goes through
 * xml_escape(), the one escaping function.
 */
#include "pyrsprof/flamegraph.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "pyrsprof/util.h"

#include "fg-diff.h"
#include "fg-internal.h"
#include "fg-tree.h"

#include "util/banned.h"

#define XPAD 10.0
#define FRAME_H 16.0
#define FONT_SIZE 12.0
#define CHAR_W (FONT_SIZE * 0.59) /* average advance of Verdana/DejaVu Sans at 12 px */
#define LEGEND_CHAR_W (11 * 0.59)
#define TOP_LINES 5

/* ---- buffered writer ---- */

struct wbuf {
	FILE *f;
	size_t n;
	int err;
	char buf[1 << 16];
};

static void wb_flush(struct wbuf *w)
{
	if (w->n && !w->err && fwrite(w->buf, 1, w->n, w->f) != w->n)
		w->err = -EIO;
	w->n = 0;
}

static void wb_put(struct wbuf *w, const char *s, size_t n)
{
	while (n) {
		size_t k = sizeof(w->buf) - w->n;

		if (k == 0) {
			wb_flush(w);
			continue;
		}
		if (k > n)
			k = n;
		memcpy(w->buf + w->n, s, k);
		w->n += k;
		s += k;
		n -= k;
	}
}

static void wb_puts(struct wbuf *w, const char *s)
{
	wb_put(w, s, strlen(s));
}

__attribute__((format(printf, 2, 3))) static void wb_printf(struct wbuf *w, const char *fmt, ...)
{
	char tmp[512];
	va_list ap;
	int k;

	va_start(ap, fmt);
	k = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (k < 0)
		return;
	wb_put(w, tmp, (size_t)k < sizeof(tmp) ? (size_t)k : sizeof(tmp) - 1);
}

/* An unsigned integer in decimal. */
static void wb_uint(struct wbuf *w, uint64_t v)
{
	char d[PRS_FMT_U64_MAX];

	wb_put(w, d, prs_fmt_u64(d, v));
}

/* v as printf's "%.1f" (decimals 1) or "%.2f" (2) writes it (prs_fmt_fixed: without printf). */
static void wb_fixed(struct wbuf *w, double v, int decimals)
{
	char t[PRS_FMT_FIXED_MAX];

	wb_put(w, t, prs_fmt_fixed(t, v, decimals));
}

/* ---- the one escaping function ---- */

/*
 * Decodes the UTF-8 sequence at s[i] (i < len). Returns its length; *cp is U+FFFD for a byte that
 * does not start a valid, shortest-form sequence of a scalar value (then the length is 1).
 */
static size_t utf8_next(const unsigned char *s, size_t len, size_t i, uint32_t *cp)
{
	unsigned c = s[i];
	size_t n;
	uint32_t v, min;

	if (c < 0x80) {
		*cp = c;
		return 1;
	}
	if (c >= 0xc2 && c <= 0xdf)
		n = 2, v = c & 0x1f, min = 0x80;
	else if (c >= 0xe0 && c <= 0xef)
		n = 3, v = c & 0x0f, min = 0x800;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 4, v = c & 0x07, min = 0x10000;
	else
		goto bad;
	if (len - i < n)
		goto bad;
	for (size_t k = 1; k < n; k++) {
		if ((s[i + k] & 0xc0) != 0x80)
			goto bad;
		v = (v << 6) | (s[i + k] & 0x3f);
	}
	if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
		goto bad;
	*cp = v;
	return n;
bad:
	*cp = 0xfffd;
	return 1;
}

/* What a code point becomes in XML: 0 = dropped (controls), else the code point to write. */
static uint32_t xml_char(uint32_t cp)
{
	if (cp < 0x20 || (cp >= 0x7f && cp <= 0x9f))
		return 0;
	if (cp == 0xfffe || cp == 0xffff)
		return 0xfffd;
	return cp;
}

static void put_cp(struct wbuf *w, uint32_t cp)
{
	char b[4];

	switch (cp) {
	case '&': wb_put(w, "&amp;", 5); return;
	case '<': wb_put(w, "&lt;", 4); return;
	case '>': wb_put(w, "&gt;", 4); return;
	case '"': wb_put(w, "&quot;", 6); return;
	case '\'': wb_put(w, "&#39;", 5); return;
	}
	if (cp < 0x80) {
		b[0] = (char)cp;
		wb_put(w, b, 1);
	} else if (cp < 0x800) {
		b[0] = (char)(0xc0 | (cp >> 6));
		b[1] = (char)(0x80 | (cp & 0x3f));
		wb_put(w, b, 2);
	} else if (cp < 0x10000) {
		b[0] = (char)(0xe0 | (cp >> 12));
		b[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		b[2] = (char)(0x80 | (cp & 0x3f));
		wb_put(w, b, 3);
	} else {
		b[0] = (char)(0xf0 | (cp >> 18));
		b[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
		b[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
		b[3] = (char)(0x80 | (cp & 0x3f));
		wb_put(w, b, 4);
	}
}

/* The number of characters s[0..len) has once written as XML (controls dropped). */
static size_t xml_chars(const char *str, size_t len)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t total = 0;
	uint32_t cp;

	for (size_t i = 0; i < len;) {
		i += utf8_next(s, len, i, &cp);
		total += xml_char(cp) != 0;
	}
	return total;
}

/*
 * Writes s[0..len) as XML character data that is also safe inside a quoted attribute: invalid
 * UTF-8 becomes U+FFFD, control characters are dropped, & < > " ' become references. With
 * max_chars >= 0, a text of more than max_chars characters is cut to max_chars - 2 and an
 * ellipsis appended (U+2026, counted as two characters: in Verdana and DejaVu Sans it is about as
 * wide as two average ones); nothing is written when max_chars < 3 and the text does not fit.
 * Returns the number of characters written.
 */
static size_t xml_escape(struct wbuf *w, const char *str, size_t len, long max_chars)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t total = max_chars >= 0 ? xml_chars(str, len) : 0, limit, out = 0;
	uint32_t cp;

	if (max_chars >= 0 && total > (size_t)max_chars && max_chars < 3)
		return 0;
	limit = max_chars >= 0 && total > (size_t)max_chars ? (size_t)max_chars - 2 : SIZE_MAX;
	for (size_t i = 0; i < len && out < limit;) {
		size_t run = 0;

		/* a run of printable ASCII without & < > " ' is written as it is, in one piece (most
		 * of every title and label: a character at a time was ~8 % of a large diff's time) */
		while (i + run < len && out + run < limit && s[i + run] >= 0x20 && s[i + run] < 0x7f &&
		       s[i + run] != '&' && s[i + run] != '<' && s[i + run] != '>' && s[i + run] != '"' &&
		       s[i + run] != '\'')
			run++;
		if (run) {
			wb_put(w, str + i, run);
			i += run;
			out += run;
			continue;
		}
		i += utf8_next(s, len, i, &cp);
		cp = xml_char(cp);
		if (cp) {
			put_cp(w, cp);
			out++;
		}
	}
	if (limit != SIZE_MAX) {
		wb_put(w, "\xe2\x80\xa6", 3); /* U+2026 */
		out++;
	}
	return out;
}

static void xml_escape_str(struct wbuf *w, const char *s)
{
	xml_escape(w, s, strlen(s), -1);
}

/* ---- colors ---- */

struct rgb {
	int r, g, b;
};

static struct rgb hsl(double h, double s, double l)
{
	double c = (1 - fabs(2 * l - 1)) * s, hp = fmod(h, 360.0) / 60.0;
	double x = c * (1 - fabs(fmod(hp, 2.0) - 1)), m = l - c / 2, r = 0, g = 0, b = 0;

	if (hp < 1)
		r = c, g = x;
	else if (hp < 2)
		r = x, g = c;
	else if (hp < 3)
		g = c, b = x;
	else if (hp < 4)
		g = x, b = c;
	else if (hp < 5)
		r = x, b = c;
	else
		r = c, b = x;
	return (struct rgb){ (int)lround((r + m) * 255), (int)lround((g + m) * 255),
			     (int)lround((b + m) * 255) };
}

/* Hue range, saturation range and lightness range of each kind's family. */
struct palette {
	double h0, dh, s0, ds, l0, dl;
	const char *label; /* for the legend */
};

static const struct palette palettes[PRS_KIND__COUNT] = {
	[PRS_KIND_UNKNOWN] = { 20, 30, 0.06, 0.08, 0.60, 0.16, "unknown" },
	[PRS_KIND_NATIVE] = { 2, 36, 0.78, 0.17, 0.56, 0.09, "native (C/C++)" },
	[PRS_KIND_CPP] = { 2, 36, 0.78, 0.17, 0.56, 0.09, "native (C/C++)" },
	[PRS_KIND_RUST] = { 24, 16, 0.34, 0.14, 0.50, 0.10, "Rust" },
	[PRS_KIND_PYTHON] = { 158, 38, 0.42, 0.16, 0.56, 0.12, "Python" },
	[PRS_KIND_KERNEL] = { 50, 10, 0.22, 0.16, 0.64, 0.08, "kernel" },
	[PRS_KIND_OFF_IO] = { 204, 16, 0.62, 0.16, 0.64, 0.08, "off-CPU: IO" },
	[PRS_KIND_OFF_LOCK] = { 262, 18, 0.42, 0.16, 0.68, 0.07, "off-CPU: lock" },
	[PRS_KIND_OFF_GIL] = { 318, 16, 0.45, 0.15, 0.62, 0.07, "off-CPU: GIL" },
	[PRS_KIND_OFF_SLEEP] = { 0, 0, 0, 0, 0.80, 0.06, "off-CPU: sleep" },
	[PRS_KIND_OFF_OTHER] = { 196, 10, 0.12, 0.08, 0.66, 0.07, "off-CPU: other" },
	[PRS_KIND_THREAD] = { 42, 8, 0.28, 0.10, 0.82, 0.05, "thread" },
	[PRS_KIND_PROCESS] = { 42, 8, 0.20, 0.06, 0.78, 0.04, "all" },
};

/* Legend order: the kinds a reader looks for first come first. */
static const uint8_t legend_order[] = {
	PRS_KIND_PYTHON, PRS_KIND_NATIVE, PRS_KIND_RUST, PRS_KIND_KERNEL, PRS_KIND_OFF_IO,
	PRS_KIND_OFF_LOCK, PRS_KIND_OFF_GIL, PRS_KIND_OFF_SLEEP, PRS_KIND_OFF_OTHER,
	PRS_KIND_UNKNOWN, PRS_KIND_THREAD,
};

static struct rgb kind_color(uint8_t kind, uint32_t h)
{
	const struct palette *p = &palettes[kind < PRS_KIND__COUNT ? kind : PRS_KIND_UNKNOWN];
	double v1 = (h & 0xff) / 255.0, v2 = ((h >> 8) & 0xff) / 255.0, v3 = ((h >> 16) & 0xff) / 255.0;

	return hsl(p->h0 + p->dh * v1, p->s0 + p->ds * v2, p->l0 + p->dl * v3);
}

/* ---- layout ---- */

struct layout {
	struct prs_fg *fg;
	const struct fg_diff *D; /* widths: fg_diff_width */
	double scale;     /* px per layout unit */
	double min_width; /* px; < 0: keep everything */
	uint32_t maxdepth;
	size_t nscratch;
	int err;
};

static int push_draw(struct prs_fg *fg, const struct fg_draw *d)
{
	if (fg->ndraw == fg->draw_cap) {
		size_t ncap = fg->draw_cap ? fg->draw_cap * 2 : 1024;
		struct fg_draw *nd = realloc(fg->draw, ncap * sizeof(*nd));

		if (!nd)
			return -ENOMEM;
		fg->draw = nd;
		fg->draw_cap = ncap;
	}
	fg->draw[fg->ndraw++] = *d;
	return 0;
}

static int cmp_nodes(const void *a, const void *b, void *arg)
{
	const struct prs_fg *fg = arg;
	const struct fg_node *x = &fg->nodes[*(const uint32_t *)a], *y = &fg->nodes[*(const uint32_t *)b];
	const char *xn = fg->arena + fg->strs[x->name].off, *yn = fg->arena + fg->strs[y->name].off;
	int c;

	/* thread roots ("thread <tid> ...") in tid order, not "thread 11" before "thread 2" */
	if (x->kind == PRS_KIND_THREAD && y->kind == PRS_KIND_THREAD && strncmp(xn, "thread ", 7) == 0 &&
	    strncmp(yn, "thread ", 7) == 0) {
		long long tx = strtoll(xn + 7, NULL, 10), ty = strtoll(yn + 7, NULL, 10);

		if (tx != ty)
			return tx < ty ? -1 : 1;
	}
	c = strcmp(xn, yn);

	if (c)
		return c;
	c = strcmp(fg->arena + fg->strs[x->file].off, fg->arena + fg->strs[y->file].off);
	if (c)
		return c;
	return (int)x->kind - (int)y->kind;
}

static bool wide(const struct layout *L, uint64_t count)
{
	return count > 0 && (L->min_width < 0 || (double)count * L->scale >= L->min_width);
}

static void lay(struct layout *L, uint32_t node, uint32_t depth, uint64_t x)
{
	struct prs_fg *fg = L->fg;
	const struct fg_node *n = &fg->nodes[node];
	struct fg_draw d = { .node = node, .depth = depth, .x = x };
	uint64_t sum[2] = { 0, 0 }, narrow[2] = { 0, 0 }, cc[2];
	uint32_t nnarrow = 0;
	size_t base = L->nscratch, self_idx = fg->ndraw;

	fg_counts(fg, node, d.count);
	d.w = fg_diff_width(L->D, d.count);
	if (L->err || (L->err = push_draw(fg, &d)) < 0)
		return;
	if (depth > L->maxdepth)
		L->maxdepth = depth;
	for (uint32_t c = n->first_child; c; c = fg->nodes[c].next_sibling) {
		uint64_t cw;

		fg_counts(fg, c, cc);
		cw = fg_diff_width(L->D, cc);
		sum[0] += cc[0];
		sum[1] += cc[1];
		if (wide(L, cw)) {
			if (L->nscratch == fg->scratch_cap) {
				size_t ncap = fg->scratch_cap ? fg->scratch_cap * 2 : 1024;
				uint32_t *ns = realloc(fg->scratch, ncap * sizeof(*ns));

				if (!ns) {
					L->err = -ENOMEM;
					return;
				}
				fg->scratch = ns;
				fg->scratch_cap = ncap;
			}
			fg->scratch[L->nscratch++] = c;
		} else if (cw > 0) {
			narrow[0] += cc[0];
			narrow[1] += cc[1];
			nnarrow++;
		}
	}
	for (int k = 0; k < 2; k++)
		fg->draw[self_idx].self[k] = d.count[k] > sum[k] ? d.count[k] - sum[k] : 0;
	qsort_r(fg->scratch + base, L->nscratch - base, sizeof(uint32_t), cmp_nodes, fg);
	for (size_t k = base; k < L->nscratch && !L->err; k++) {
		uint32_t c = fg->scratch[k];

		lay(L, c, depth + 1, x);
		fg_counts(fg, c, cc);
		x += fg_diff_width(L->D, cc);
	}
	L->nscratch = base;
	if (!L->err && nnarrow && wide(L, fg_diff_width(L->D, narrow))) {
		struct fg_draw m = { .node = node, .depth = depth + 1, .merged = nnarrow, .x = x,
				     .w = fg_diff_width(L->D, narrow), .count = { narrow[0], narrow[1] } };

		L->err = push_draw(fg, &m);
		if (depth + 1 > L->maxdepth)
			L->maxdepth = depth + 1;
	}
}

/* ---- writing ---- */

/* How many characters of a label fit in a box wd px wide (>= 0). */
static long fit_chars(double wd)
{
	double k = (wd - 6) / CHAR_W;

	return k > 0 && k < 1e6 ? (long)k : 0;
}

static const char *str_of(const struct prs_fg *fg, uint32_t id, size_t *len)
{
	*len = fg->strs[id].len;
	return fg->arena + fg->strs[id].off;
}

static void put_count(struct wbuf *w, uint64_t v)
{
	char d[PRS_FMT_U64_MAX], out[48];
	int n = (int)prs_fmt_u64(d, v), o = 0; /* (no printf: one count per frame) */

	for (int i = 0; i < n; i++) {
		if (i && (n - i) % 3 == 0)
			out[o++] = ',';
		out[o++] = d[i];
	}
	wb_put(w, out, (size_t)o);
}

static double pct(uint64_t part, uint64_t whole)
{
	return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

/* The top lines of a node, most samples first. */
static size_t top_lines(const struct prs_fg *fg, uint32_t node, const struct fg_line **top, size_t max,
			size_t *nall)
{
	size_t n = 0;

	*nall = 0;
	for (uint32_t l = fg->nodes[node].first_line; l; l = fg->lines[l - 1].next) {
		const struct fg_line *e = &fg->lines[l - 1];
		size_t k;

		(*nall)++;
		if (n < max)
			n++;
		else if (e->count <= top[n - 1]->count)
			continue;
		for (k = n - 1; k > 0 && (top[k - 1]->count < e->count ||
					  (top[k - 1]->count == e->count && top[k - 1]->line > e->line));
		     k--)
			top[k] = top[k - 1];
		top[k] = e;
	}
	return n;
}

static void write_title(struct wbuf *w, const struct prs_fg *fg, const struct fg_draw *d,
			const struct fg_diff *D, uint64_t parent_count, const char *unit,
			double min_width)
{
	const struct fg_node *n = &fg->nodes[d->node];
	uint64_t total = fg->nodes[0].total;
	const struct fg_line *top[TOP_LINES];
	size_t len, nall = 0, ntop = 0;
	const char *s;

	wb_puts(w, "<title>");
	if (d->merged) {
		wb_printf(w, "[%u small frames]\n%u frames narrower than %.2g px, merged, under ",
			  d->merged, d->merged, min_width);
		s = str_of(fg, n->name, &len);
		xml_escape(w, d->node ? s : "all", d->node ? len : 3, -1);
	} else if (d->node == 0) {
		wb_puts(w, "all");
	} else {
		s = str_of(fg, n->name, &len);
		xml_escape(w, s, len, -1);
		ntop = top_lines(fg, d->node, top, TOP_LINES, &nall);
		if (n->file) {
			wb_puts(w, "\n");
			s = str_of(fg, n->file, &len);
			xml_escape(w, s, len, -1);
			if (nall == 1) {
				wb_puts(w, ":");
				wb_uint(w, top[0]->line);
			}
		} else if (nall == 1) {
			wb_puts(w, "\nline ");
			wb_uint(w, top[0]->line);
		}
	}
	if (D->on) {
		char buf[512];
		uint64_t self[2] = { d->merged ? 0 : d->self[0], d->merged ? 0 : d->self[1] };

		wb_puts(w, "\n");
		xml_escape_str(w, fg_diff_title(D, d->count, self, buf, sizeof(buf)));
	} else {
		wb_puts(w, "\n");
		put_count(w, d->count[0]);
		wb_puts(w, " ");
		xml_escape_str(w, unit);
		wb_puts(w, ", ");
		wb_fixed(w, pct(d->count[0], total), 2);
		wb_puts(w, "% of total");
		if (d->depth > 0) {
			wb_puts(w, ", ");
			wb_fixed(w, pct(d->count[0], parent_count), 2);
			wb_puts(w, "% of parent");
		}
		if (!d->merged && d->self[0] && d->node) {
			wb_puts(w, "\nself: ");
			put_count(w, d->self[0]);
			wb_puts(w, " (");
			wb_fixed(w, pct(d->self[0], total), 2);
			wb_puts(w, "% of total)");
		}
	}
	if (nall > 1) {
		wb_puts(w, "\nlines:");
		for (size_t i = 0; i < ntop; i++) {
			wb_puts(w, i ? ", " : " ");
			wb_uint(w, top[i]->line);
			wb_puts(w, " (");
			put_count(w, top[i]->count);
			wb_puts(w, ")");
		}
		if (nall > ntop)
			wb_printf(w, ", %zu more", nall - ntop);
	}
	if (d->node && !d->merged) {
		wb_puts(w, "\nkind: ");
		wb_puts(w, prs_kind_name((enum prs_kind)n->kind));
	}
	wb_puts(w, "</title>");
}

struct geom {
	double width, plotw, scale, ytop;
	uint32_t maxdepth;
	bool icicle;
};

static double frame_y(const struct geom *g, uint32_t depth)
{
	return g->icicle ? g->ytop + depth * FRAME_H : g->ytop + (g->maxdepth - depth) * FRAME_H;
}

static const char *const diff_states[] = { "same", "more", "less", "added", "removed" };

static void write_frames(struct wbuf *w, struct prs_fg *fg, const struct fg_diff *D,
			 const struct geom *g, const char *unit, double min_width, uint32_t *kinds)
{
	/* parent counts along the current path, by depth (pre-order) */
	static const uint64_t none = 0;
	uint64_t *pc = calloc(g->maxdepth + 2, sizeof(*pc));

	for (size_t i = 0; i < fg->ndraw; i++) {
		const struct fg_draw *d = &fg->draw[i];
		const struct fg_node *n = &fg->nodes[d->node];
		double x = XPAD + (double)d->x * g->scale, wd = (double)d->w * g->scale;
		double y = frame_y(g, d->depth);
		uint64_t parent = d->depth > 0 && pc ? pc[d->depth - 1] : none;
		enum fg_diff_state st = FG_DIFF_SAME;
		struct rgb c;
		size_t len;
		const char *name;

		if (pc)
			pc[d->depth] = d->count[0];
		if (D->on) {
			int rgb[3];

			st = fg_diff_judge(D, d->count, rgb);
			c = (struct rgb){ rgb[0], rgb[1], rgb[2] };
		} else if (d->merged) {
			c = (struct rgb){ 222, 222, 222 };
		} else {
			name = str_of(fg, n->name, &len);
			c = kind_color(d->node ? n->kind : PRS_KIND_PROCESS, prs_fg_name_hash(name, len));
			*kinds |= 1u << (d->node ? n->kind : PRS_KIND_PROCESS);
		}
		wb_puts(w, d->merged ? "<g class=\"f m\" data-x=\"" : "<g class=\"f\" data-x=\"");
		wb_uint(w, d->x);
		wb_puts(w, "\" data-c=\"");
		wb_uint(w, d->w);
		wb_puts(w, "\" data-d=\"");
		wb_uint(w, d->depth);
		wb_puts(w, "\"");
		if (D->on) {
			wb_puts(w, " data-a=\"");
			wb_uint(w, d->count[0]);
			wb_puts(w, "\" data-b=\"");
			wb_uint(w, d->count[1]);
			wb_puts(w, "\" data-s=\"");
			wb_puts(w, diff_states[st]);
			wb_puts(w, "\"");
		}
		wb_puts(w, ">");
		write_title(w, fg, d, D, parent, unit, min_width);
		wb_puts(w, "<rect x=\"");
		wb_fixed(w, x, 2);
		wb_puts(w, "\" y=\"");
		wb_fixed(w, y, 1);
		wb_puts(w, "\" width=\"");
		wb_fixed(w, wd, 2);
		wb_puts(w, "\" height=\"");
		wb_fixed(w, FRAME_H - 1, 1);
		wb_puts(w, "\" rx=\"2\" fill=\"rgb(");
		wb_uint(w, (uint8_t)c.r); /* colour channels are 0-255 */
		wb_puts(w, ",");
		wb_uint(w, (uint8_t)c.g);
		wb_puts(w, ",");
		wb_uint(w, (uint8_t)c.b);
		wb_puts(w, st == FG_DIFF_ADDED || st == FG_DIFF_REMOVED
				   ? ")\" stroke=\"#333\" stroke-width=\"1\" stroke-dasharray=\"3,2\"/><text x=\""
				   : ")\"/><text x=\"");
		wb_fixed(w, x + 3, 2);
		wb_puts(w, "\" y=\"");
		wb_fixed(w, y + FRAME_H - 4.5, 1);
		wb_puts(w, "\">");
		if (d->merged) {
			char label[48];
			int k = snprintf(label, sizeof(label), "[%u small frames]", d->merged);

			xml_escape(w, label, (size_t)k, fit_chars(wd));
		} else if (d->node == 0) {
			xml_escape(w, "all", 3, fit_chars(wd));
		} else {
			name = str_of(fg, n->name, &len);
			xml_escape(w, name, len, fit_chars(wd));
		}
		wb_puts(w, "</text></g>\n");
	}
	free(pc);
}

/* Legend entries laid out in rows; returns the number of rows. */
static int write_legend(struct wbuf *w, const struct prs_fg_opts *o, uint32_t kinds, double width,
			double y, bool emit)
{
	double x = XPAD;
	int rows = 1;

	if (emit)
		wb_puts(w, "<g id=\"legend\">\n");
	if (o->diff) {
		static const struct {
			double t;
			const char *label;
		} e[] = { { 1, "added / more time (slower)" }, { 0.4, "a little more" }, { 0, "within noise" },
			  { -0.4, "a little less" }, { -1, "removed / less time (faster)" } };

		for (size_t i = 0; i < sizeof(e) / sizeof(e[0]); i++) {
			int c[3];

			fg_diff_color(e[i].t, c);
			if (emit)
				wb_printf(w, "<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"12\" rx=\"2\" "
					     "fill=\"rgb(%d,%d,%d)\" stroke=\"#999\" stroke-width=\"0.5\"/>"
					     "<text x=\"%.1f\" y=\"%.1f\">%s</text>\n",
					  x, y, c[0], c[1], c[2], x + 16, y + 10.5, e[i].label);
			x += 16 + strlen(e[i].label) * LEGEND_CHAR_W + 18;
		}
		if (emit)
			wb_printf(w, "<text x=\"%.1f\" y=\"%.1f\" class=\"note\">widths: before + after; "
				     "dashed outline: in one profile only</text>\n", x, y + 10.5);
		if (emit)
			wb_puts(w, "</g>\n");
		return rows;
	}
	for (size_t i = 0; i < sizeof(legend_order); i++) {
		uint8_t k = legend_order[i];
		const struct palette *p = &palettes[k];
		double adv = 16 + strlen(p->label) * LEGEND_CHAR_W + 18;
		struct rgb c = hsl(p->h0 + p->dh / 2, p->s0 + p->ds / 2, p->l0 + p->dl / 2);

		if (!(kinds & (1u << k)) && !(k == PRS_KIND_NATIVE && (kinds & (1u << PRS_KIND_CPP))))
			continue;
		if (x + adv > width - XPAD && x > XPAD) {
			x = XPAD;
			y += 18;
			rows++;
		}
		if (emit)
			wb_printf(w, "<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"12\" rx=\"2\" "
				     "fill=\"rgb(%d,%d,%d)\"/><text x=\"%.1f\" y=\"%.1f\">%s</text>\n",
				  x, y, c.r, c.g, c.b, x + 16, y + 10.5, p->label);
		x += adv;
	}
	if (emit)
		wb_puts(w, "</g>\n");
	return rows;
}

static uint32_t kinds_drawn(const struct prs_fg *fg)
{
	uint32_t kinds = 0;

	for (size_t i = 0; i < fg->ndraw; i++) {
		const struct fg_draw *d = &fg->draw[i];

		if (!d->merged && d->node)
			kinds |= 1u << fg->nodes[d->node].kind;
	}
	return kinds;
}

/*
 * A heading's <text>, cut to max_chars with the whole text in data-full when it is cut (the
 * script fits it again to the window's width).
 */
static void write_heading(struct wbuf *w, const char *id, double x, double y, const char *text,
			  long max_chars)
{
	size_t len = strlen(text);

	wb_printf(w, "<text id=\"%s\" x=\"%.1f\" y=\"%.1f\"", id, x, y);
	if (xml_chars(text, len) > (size_t)(max_chars > 0 ? max_chars : 0)) {
		wb_puts(w, " data-full=\"");
		xml_escape(w, text, len, -1);
		wb_puts(w, "\"");
	}
	wb_puts(w, ">");
	xml_escape(w, text, len, max_chars);
	wb_puts(w, "</text>\n");
}

/*
 * The title bar and the details line are written after the frames so that, when the script pins
 * them to the window's edges over a tall graph, they are drawn above the frames; their "bar"
 * rects are their backgrounds then (invisible otherwise, see fg.css).
 */
static void write_head(struct wbuf *w, const struct geom *g, const char *title, const char *subtitle)
{
	wb_printf(w, "<g id=\"head\"><rect class=\"bar\" x=\"0\" y=\"0\" width=\"100%%\" "
		     "height=\"%.1f\"/>\n", g->ytop - 3);
	write_heading(w, "title", g->width / 2, 26, title, (long)((g->width - 260) / (17 * 0.59)));
	if (subtitle && subtitle[0])
		write_heading(w, "subtitle", g->width / 2, 46, subtitle, (long)((g->width - 40) / CHAR_W));
	wb_printf(w, "<text id=\"unzoom\" class=\"btn hide\" x=\"%.1f\" y=\"26\">Reset Zoom</text>\n", XPAD);
	wb_printf(w, "<text id=\"search\" class=\"btn\" x=\"%.1f\" y=\"26\">Search</text>\n",
		  g->width - XPAD - 30);
	wb_printf(w, "<text id=\"ignorecase\" class=\"btn\" x=\"%.1f\" y=\"26\">ic</text>\n</g>\n",
		  g->width - XPAD);
}

static void write_foot(struct wbuf *w, const struct geom *g, double ydetails)
{
	wb_printf(w, "<g id=\"foot\"><rect class=\"bar\" x=\"0\" y=\"%.1f\" width=\"100%%\" "
		     "height=\"20\"/>\n", ydetails - 14);
	wb_printf(w, "<text id=\"details\" x=\"%.1f\" y=\"%.1f\"> </text>\n", XPAD, ydetails);
	wb_printf(w, "<text id=\"matched\" x=\"%.1f\" y=\"%.1f\"> </text>\n</g>\n", g->width - XPAD,
		  ydetails);
}

int prs_fg_write_svg(struct prs_fg *fg, FILE *out, const struct prs_fg_opts *opts,
		     struct prs_err *err)
{
	struct prs_fg_opts o;
	struct layout L = { .fg = fg };
	struct geom g = { 0 };
	struct wbuf *w;
	struct fg_diff D;
	uint64_t total, root_counts[2];
	const char *unit, *title;
	double height, ydetails, ylegend, min_width;
	uint32_t kinds = 0;
	int rows, rc = 0;

	if (opts)
		o = *opts;
	else
		prs_fg_opts_init(&o);
	unit = o.unit && o.unit[0] ? o.unit : "samples";
	title = o.title && o.title[0] ? o.title
		: o.diff ? "Differential Flame Graph"
		: o.icicle ? "Icicle Graph" : "Flame Graph";
	g.width = o.width > 0 && isfinite(o.width) ? o.width : 1200;
	if (g.width < 200)
		g.width = 200;
	if (g.width > 100000)
		g.width = 100000;
	min_width = isnan(o.min_width) || o.min_width == 0 ? 0.1 : o.min_width;
	fg_diff_init(&D, fg, &o);
	fg_counts(fg, 0, root_counts);
	total = fg_diff_width(&D, root_counts);
	g.plotw = g.width - 2 * XPAD;
	g.scale = total ? g.plotw / (double)total : 0;
	g.icicle = o.icicle;
	g.ytop = o.subtitle && o.subtitle[0] ? 64 : 46;

	fg->ndraw = 0;
	/* Deep graphs can hold plotw / min_width boxes on every level: past PRS_FG_MAX_DRAWN, the
	 * min width doubles until the picture fits (unless every frame was asked for, min_width < 0),
	 * so that a browser can still open the file. */
	for (;;) {
		if (!total)
			break;
		L = (struct layout){ .fg = fg, .D = &D, .scale = g.scale, .min_width = min_width };
		fg->ndraw = 0;
		lay(&L, 0, 0, 0);
		if (L.err < 0) {
			fg->ndraw = 0;
			return prs_err_set(err, L.err, "flame graph layout: %s", strerror(-L.err));
		}
		if (fg->ndraw <= PRS_FG_MAX_DRAWN || min_width < 0 || min_width > g.plotw)
			break;
		min_width *= 2;
	}
	g.maxdepth = L.maxdepth;
	kinds = kinds_drawn(fg);
	ydetails = g.ytop + (total ? (g.maxdepth + 1) * FRAME_H : 40) + 20;
	ylegend = ydetails + 12;
	rows = write_legend(NULL, &o, kinds, g.width, ylegend, false);
	height = ylegend + rows * 18 + 8;

	w = malloc(sizeof(*w));
	if (!w)
		return prs_err_set(err, -ENOMEM, "flame graph: out of memory");
	w->f = out;
	w->n = 0;
	w->err = 0;

	wb_puts(w, "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n");
	wb_printf(w, "<svg version=\"1.1\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" "
		     "height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" class=\"prsfg%s%s\">\n",
		  g.width, height, g.width, height, o.icicle ? " icicle" : "", o.diff ? " diff" : "");
	wb_puts(w, "<style><![CDATA[\n");
	wb_put(w, prs_fg_asset_css, prs_fg_asset_css_len);
	wb_puts(w, "]]></style>\n");
	wb_puts(w, "<defs><linearGradient id=\"bg\" x1=\"0\" x2=\"0\" y1=\"0\" y2=\"1\">"
		   "<stop offset=\"5%\" stop-color=\"#f4f4f4\"/><stop offset=\"95%\" "
		   "stop-color=\"#eeeed8\"/></linearGradient></defs>\n");
	wb_puts(w, "<rect id=\"background\" x=\"0\" y=\"0\" width=\"100%\" height=\"100%\" "
		   "fill=\"url(#bg)\"/>\n");
	wb_printf(w, "<g id=\"frames\" data-total=\"%llu\" data-before=\"%llu\" data-plotw=\"%.2f\" "
		     "data-xpad=\"%.1f\" data-frameh=\"%.1f\" data-ytop=\"%.1f\" data-maxdepth=\"%u\" "
		     "data-icicle=\"%d\" data-diff=\"%d\" data-unit=\"",
		  (unsigned long long)total, (unsigned long long)root_counts[1], g.plotw, XPAD,
		  FRAME_H, g.ytop, g.maxdepth, o.icicle ? 1 : 0, o.diff ? 1 : 0);
	xml_escape_str(w, unit);
	wb_puts(w, "\">\n");
	if (total)
		write_frames(w, fg, &D, &g, unit, min_width, &kinds);
	else
		wb_printf(w, "<text id=\"empty\" x=\"%.1f\" y=\"%.1f\">no samples</text>\n", g.width / 2,
			  g.ytop + 24);
	wb_puts(w, "</g>\n");
	write_legend(w, &o, kinds, g.width, ylegend, true);
	write_foot(w, &g, ydetails);
	write_head(w, &g, title, o.subtitle);
	wb_puts(w, "<script type=\"text/ecmascript\"><![CDATA[\n");
	wb_put(w, prs_fg_asset_js, prs_fg_asset_js_len);
	wb_puts(w, "]]></script>\n</svg>\n");
	wb_flush(w);
	if (w->err || fflush(out) != 0 || ferror(out))
		rc = prs_err_set(err, -EIO, "writing the flame graph: %s", strerror(errno ? errno : EIO));
	free(w);
	return rc;
}
