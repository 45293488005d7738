/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the flame graph renderer: tree counts against sums computed here from the input,
 * widths proportional to counts (read back from the SVG), sibling order, the (name, file, kind)
 * key with per-line counts, min-width merging, escaping of hostile names (checked with the C
 * library's own UTF-8 decoder), stable colors, differential colors, bounds, and the profile
 * adapter (views, off-CPU leaves, per-thread roots) on a profile built through the model's API.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

#include "pyrsprof/flamegraph.h"
#include "pyrsprof/profile.h"

#include "util/banned.h"

/* Renders fg with opts into a new NUL-terminated string (caller frees). */
static char *render(struct prs_fg *fg, const struct prs_fg_opts *o)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	struct prs_err err = { 0 };

	cr_assert(f);
	cr_assert_eq(prs_fg_write_svg(fg, f, o, &err), 0, "%s", err.msg);
	fclose(f);
	return buf;
}

/* One drawn frame as read back from the SVG text. */
struct box {
	char name[256];
	unsigned long long x, c, b;
	unsigned d;
	double rx, rw;
	int r, g, bl;
	char title[2048];
};

/* Parses every <g class="f ..."> of svg into boxes (at most max). Returns the count. */
static size_t boxes(const char *svg, struct box *out, size_t max)
{
	size_t n = 0;
	const char *p = svg, *end = strstr(svg, "<script");

	cr_assert(end);
	while (n < max && (p = strstr(p, "<g class=\"f")) != NULL && p < end) {
		struct box *b = &out[n];
		const char *t, *te, *q;
		size_t len;

		memset(b, 0, sizeof(*b));
		q = strstr(p, "data-x=\"");
		cr_assert(q && sscanf(q, "data-x=\"%llu\" data-c=\"%llu\" data-d=\"%u\"", &b->x, &b->c, &b->d) == 3);
		q = strstr(p, "data-b=\"");
		if (q && q < strstr(p, ">"))
			sscanf(q, "data-b=\"%llu\"", &b->b);
		t = strstr(p, "<title>") + 7;
		te = strstr(t, "</title>");
		len = (size_t)(te - t) < sizeof(b->title) - 1 ? (size_t)(te - t) : sizeof(b->title) - 1;
		memcpy(b->title, t, len);
		q = memchr(t, '\n', (size_t)(te - t));
		len = (size_t)((q ? q : te) - t);
		if (len >= sizeof(b->name))
			len = sizeof(b->name) - 1;
		memcpy(b->name, t, len);
		q = strstr(te, "<rect x=\"");
		cr_assert(q && sscanf(q, "<rect x=\"%lf\" y=\"%*f\" width=\"%lf\"", &b->rx, &b->rw) == 2);
		q = strstr(q, "fill=\"rgb(");
		cr_assert(q && sscanf(q, "fill=\"rgb(%d,%d,%d)\"", &b->r, &b->g, &b->bl) == 3);
		n++;
		p = te;
	}
	return n;
}

static const struct box *find(const struct box *b, size_t n, const char *name, unsigned depth)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(b[i].name, name) == 0 && b[i].d == depth)
			return &b[i];
	return NULL;
}

static void add_names(struct prs_fg *fg, const char *stack, uint64_t count, enum prs_kind kind)
{
	struct prs_fg_frame fr[64];
	char buf[1024], *save = NULL, *tok;
	size_t n = 0;

	snprintf(buf, sizeof(buf), "%s", stack);
	for (tok = strtok_r(buf, ";", &save); tok && n < 64; tok = strtok_r(NULL, ";", &save))
		fr[n++] = (struct prs_fg_frame){ .name = tok, .kind = kind };
	cr_assert_eq(prs_fg_add(fg, fr, n, count), 0);
}

static double plot_width(const char *svg)
{
	double w = 0;
	const char *q = strstr(svg, "data-plotw=\"");

	cr_assert(q && sscanf(q, "data-plotw=\"%lf\"", &w) == 1);
	return w;
}

Test(flamegraph, counts_widths_and_order)
{
	struct prs_fg *fg = prs_fg_new();
	struct box b[32];
	char *svg;
	size_t n;
	double plotw, scale;
	const struct box *root, *a, *bb, *c, *d;

	/* Input and the totals it implies (computed by hand): a=6 (self 2), a;b=3, a;c=1, d=4. */
	add_names(fg, "a;c", 1, PRS_KIND_NATIVE);
	add_names(fg, "a;b", 3, PRS_KIND_NATIVE);
	add_names(fg, "d", 4, PRS_KIND_NATIVE);
	add_names(fg, "a", 2, PRS_KIND_NATIVE);
	cr_assert_eq(prs_fg_total(fg), 10);
	svg = render(fg, NULL);
	n = boxes(svg, b, 32);
	cr_assert_eq(n, 5, "drawn %zu", n);
	root = find(b, n, "all", 0);
	a = find(b, n, "a", 1);
	bb = find(b, n, "b", 2);
	c = find(b, n, "c", 2);
	d = find(b, n, "d", 1);
	cr_assert(root && a && bb && c && d);
	cr_assert_eq(root->c, 10);
	cr_assert_eq(a->c, 6);
	cr_assert_eq(bb->c, 3);
	cr_assert_eq(c->c, 1);
	cr_assert_eq(d->c, 4);
	/* sorted by name: a before d, b before c; offsets follow */
	cr_assert_eq(a->x, 0);
	cr_assert_eq(d->x, 6);
	cr_assert_eq(bb->x, 0);
	cr_assert_eq(c->x, 3);
	/* widths proportional to the counts: width = count * plotw / total, x = xpad + offset * scale */
	plotw = plot_width(svg);
	cr_assert_float_eq(plotw, 1180.0, 1e-9);
	scale = plotw / 10;
	for (size_t i = 0; i < n; i++) {
		cr_assert_float_eq(b[i].rw, b[i].c * scale, 0.006, "%s width %f", b[i].name, b[i].rw);
		cr_assert_float_eq(b[i].rx, 10 + b[i].x * scale, 0.006, "%s x %f", b[i].name, b[i].rx);
	}
	/* hover details: share of total and of parent */
	cr_assert(strstr(bb->title, "3 samples, 30.00% of total, 50.00% of parent"), "%s", bb->title);
	cr_assert(strstr(a->title, "self: 2 (20.00% of total)"), "%s", a->title);
	free(svg);
	prs_fg_free(fg);
}

Test(flamegraph, key_is_name_file_kind_with_line_counts)
{
	struct prs_fg *fg = prs_fg_new();
	struct prs_fg_frame s1[] = { { "main", "app.py", 10, PRS_KIND_PYTHON }, { "f", "app.py", 20, PRS_KIND_PYTHON } };
	struct prs_fg_frame s2[] = { { "main", "app.py", 11, PRS_KIND_PYTHON }, { "f", "app.py", 22, PRS_KIND_PYTHON } };
	struct prs_fg_frame s3[] = { { "main", "app.py", 10, PRS_KIND_PYTHON }, { "f", "other.py", 3, PRS_KIND_PYTHON } };
	struct prs_fg_frame s4[] = { { "main", "app.py", 10, PRS_KIND_PYTHON }, { "f", "app.py", 20, PRS_KIND_NATIVE } };
	struct box b[16];
	size_t n, nf = 0;
	char *svg;
	const struct box *m;

	cr_assert_eq(prs_fg_add(fg, s1, 2, 5), 0);
	cr_assert_eq(prs_fg_add(fg, s2, 2, 2), 0);
	cr_assert_eq(prs_fg_add(fg, s3, 2, 1), 0);
	cr_assert_eq(prs_fg_add(fg, s4, 2, 1), 0);
	svg = render(fg, NULL);
	n = boxes(svg, b, 16);
	m = find(b, n, "main", 1);
	cr_assert(m && m->c == 9, "main is one box of 9");
	/* main was sampled on line 10 (5+1+1) and line 11 (2) */
	cr_assert(strstr(m->title, "lines: 10 (7), 11 (2)"), "%s", m->title);
	for (size_t i = 0; i < n; i++)
		nf += strcmp(b[i].name, "f") == 0;
	cr_assert_eq(nf, 3, "f in app.py/python, other.py/python, app.py/native: %zu", nf);
	free(svg);
	prs_fg_free(fg);
}

static bool valid_utf8(const char *s)
{
	mbstate_t st;
	size_t len = strlen(s);

	memset(&st, 0, sizeof(st));
	while (len) {
		wchar_t wc;
		size_t k = mbrtowc(&wc, s, len, &st);

		if (k == (size_t)-1 || k == (size_t)-2)
			return false;
		if (k == 0)
			k = 1;
		s += k;
		len -= k;
	}
	return true;
}

static size_t count_of(const char *hay, const char *needle)
{
	size_t n = 0;

	for (const char *p = hay; (p = strstr(p, needle)) != NULL; p++)
		n++;
	return n;
}

Test(flamegraph, hostile_names_are_escaped)
{
	struct prs_fg *fg = prs_fg_new();
	struct prs_fg_frame fr[] = {
		{ "<script>window.__pyrsprof_pwned=true</script>", "a\"b'c&d<e>.py", 1, PRS_KIND_PYTHON },
		{ "x]]>y<![CDATA[z", NULL, 0, PRS_KIND_RUST },
		{ "bad\xff\xfe utf8 \xc3\x28 \xed\xa0\x80 \xf4\x90\x80\x80 \xc0\xaf ok\xc3\xa9", NULL, 0, PRS_KIND_NATIVE },
		{ "ctl\x01\x1b[31m\x7f\xc2\x85 end", NULL, 0, PRS_KIND_NATIVE },
	};
	struct prs_fg_opts o;
	char *svg, *frames;

	cr_assert(setlocale(LC_CTYPE, "C.UTF-8"));
	prs_fg_opts_init(&o);
	o.title = "<b>title</b> & \"more\"";
	o.subtitle = "sub ]]> \x02";
	o.unit = "<u>";
	cr_assert_eq(prs_fg_add(fg, fr, 4, 3), 0);
	svg = render(fg, &o);
	frames = strstr(svg, "<g id=\"frames\"");
	cr_assert(frames);
	cr_assert(valid_utf8(svg), "output is not valid UTF-8");
	cr_assert_null(strstr(frames, "<script>window"), "raw <script> from a name");
	cr_assert(strstr(frames, "&lt;script&gt;window.__pyrsprof_pwned=true&lt;/script&gt;"));
	cr_assert(strstr(frames, "a&quot;b&#39;c&amp;d&lt;e&gt;.py"));
	cr_assert(strstr(frames, "x]]&gt;y&lt;![CDATA[z"));
	cr_assert(strstr(svg, "&lt;b&gt;title&lt;/b&gt; &amp; &quot;more&quot;"));
	cr_assert(strstr(svg, "data-unit=\"&lt;u&gt;\""));
	/* exactly the two CDATA sections of the style and the script end the document's CDATA */
	cr_assert_eq(count_of(svg, "]]>"), 2, "%zu", count_of(svg, "]]>"));
	cr_assert_eq(count_of(svg, "<![CDATA["), 2);
	/* U+FFFD for each invalid sequence; the valid é is kept */
	cr_assert(strstr(frames, "bad\xef\xbf\xbd\xef\xbf\xbd utf8 \xef\xbf\xbd( "), "invalid bytes replaced");
	cr_assert(strstr(frames, "ok\xc3\xa9"));
	/* control characters (C0, DEL, C1) removed */
	cr_assert(strstr(frames, "ctl[31m end"));
	for (const char *p = svg; *p; p++)
		cr_assert(*p == '\n' || *p == '\t' || (unsigned char)*p >= 0x20, "control byte %#x", *p);
	free(svg);
	prs_fg_free(fg);
}

Test(flamegraph, names_clipped_to_fit)
{
	struct prs_fg *fg = prs_fg_new();
	char *svg, *t;

	/* a 1200 px graph; "wide" gets 0.9 of it, "narrow_function_name" 0.1 * 1180 = 118 px */
	add_names(fg, "wide_function_with_a_rather_long_name", 9, PRS_KIND_NATIVE);
	add_names(fg, "narrow_function_name_that_does_not_fit_in_118px", 1, PRS_KIND_NATIVE);
	svg = render(fg, NULL);
	cr_assert(strstr(svg, "\">wide_function_with_a_rather_long_name</text>"));
	t = strstr(svg, "\">narrow_functi"); /* the label, not the <title> */
	cr_assert(t);
	/* (118 px - 6 px padding) / (12 px * 0.59 per character): 15 characters, so 13 and an
	 * ellipsis, counted as two (about as wide as two average characters) */
	cr_assert(strncmp(t, "\">narrow_functi\xe2\x80\xa6</text>", 25) == 0, "%.40s", t);
	free(svg);
	prs_fg_free(fg);
}

Test(flamegraph, long_title_cut_and_kept_whole_for_the_script)
{
	struct prs_fg *fg = prs_fg_new();
	struct prs_fg_opts o;
	char title[200], *svg, *t;
	const char *head, *cut;

	/* a 400 px graph: (400 - 260) / (17 px * 0.59) = 13 characters of title, so 11 and "…" */
	memcpy(title, "<T>&", 4);
	memset(title + 4, 'x', 60);
	title[64] = 0;
	add_names(fg, "a", 1, PRS_KIND_NATIVE);
	prs_fg_opts_init(&o);
	o.width = 400;
	o.title = title;
	o.subtitle = "short";
	svg = render(fg, &o);
	t = strstr(svg, "<text id=\"title\"");
	cr_assert(t);
	/* the whole title, escaped, in data-full; the text cut with an ellipsis */
	head = "<text id=\"title\" x=\"200.0\" y=\"26.0\" data-full=\"&lt;T&gt;&amp;";
	cut = "\">&lt;T&gt;&amp;xxxxxxx\xe2\x80\xa6</text>";
	cr_assert(strncmp(t, head, strlen(head)) == 0, "%.80s", t);
	cr_assert_eq(strspn(t + strlen(head), "x"), 60, "%.200s", t);
	cr_assert(strncmp(t + strlen(head) + 60, cut, strlen(cut)) == 0, "%.200s", t);
	/* a heading that fits has no data-full */
	t = strstr(svg, "<text id=\"subtitle\"");
	head = "<text id=\"subtitle\" x=\"200.0\" y=\"46.0\">short</text>";
	cr_assert(t && strncmp(t, head, strlen(head)) == 0, "%.80s", t);
	free(svg);
	prs_fg_free(fg);
}

Test(flamegraph, min_width_merges_narrow_siblings)
{
	struct prs_fg *fg = prs_fg_new();
	struct prs_fg_opts o;
	struct box b[64];
	char name[32], stack[64], *svg;
	size_t n;
	const struct box *m;

	add_names(fg, "p;big", 10000, PRS_KIND_NATIVE);
	for (int i = 0; i < 200; i++) {
		snprintf(name, sizeof(name), "tiny%03d", i);
		snprintf(stack, sizeof(stack), "p;%s;deeper", name);
		add_names(fg, stack, 1, PRS_KIND_NATIVE);
	}
	prs_fg_opts_init(&o);
	o.min_width = 1.0; /* one tiny frame is 1180 / 10200 = 0.116 px */
	svg = render(fg, &o);
	n = boxes(svg, b, 64);
	cr_assert_eq(n, 4, "all, p, big and one merged box: %zu", n);
	m = find(b, n, "[200 small frames]", 2);
	cr_assert(m, "merged box");
	cr_assert_eq(m->c, 200);
	cr_assert_eq(m->x, 10000);
	cr_assert_eq(prs_fg_drawn(fg), 4);
	free(svg);
	/* keep everything: every tiny frame and its child */
	o.min_width = -1;
	svg = render(fg, &o);
	cr_assert_eq(prs_fg_drawn(fg), 3 + 400);
	free(svg);
	prs_fg_free(fg);
}

Test(flamegraph, size_follows_min_width_not_stacks)
{
	struct prs_fg *fg = prs_fg_new();
	struct prs_fg_opts o;
	char stack[64], *svg;
	size_t drawn_small, len_small;

	prs_fg_opts_init(&o);
	o.min_width = 2;
	for (int i = 0; i < 20000; i++) {
		snprintf(stack, sizeof(stack), "main;mod%d;fn%d", i % 50, i);
		add_names(fg, stack, 1 + (i % 7 == 0) * 30, PRS_KIND_NATIVE);
	}
	svg = render(fg, &o);
	drawn_small = prs_fg_drawn(fg);
	len_small = strlen(svg);
	free(svg);
	/* at most one box per 2 px per level, 4 levels (all, main, mod, fn) plus merged boxes */
	cr_assert_leq(drawn_small, 4 * 1180 / 2 + 50, "%zu", drawn_small);
	cr_assert_lt(len_small, 2000000, "%zu bytes", len_small);
	prs_fg_free(fg);
}

Test(flamegraph, colors_stable_by_name_and_kind)
{
	struct prs_fg *g1 = prs_fg_new(), *g2 = prs_fg_new();
	struct box b1[8], b2[8];
	char *s1, *s2;
	size_t n1, n2;
	const struct box *x1, *x2, *p, *k;

	add_names(g1, "alpha;beta", 3, PRS_KIND_NATIVE);
	add_names(g2, "zzz;gamma", 30, PRS_KIND_NATIVE);
	add_names(g2, "zzz;gamma;beta", 1, PRS_KIND_NATIVE);
	add_names(g2, "py_fn", 5, PRS_KIND_PYTHON);
	add_names(g2, "kern_fn", 5, PRS_KIND_KERNEL);
	s1 = render(g1, NULL);
	s2 = render(g2, NULL);
	n1 = boxes(s1, b1, 8);
	n2 = boxes(s2, b2, 8);
	x1 = find(b1, n1, "beta", 2);
	x2 = find(b2, n2, "beta", 3);
	p = find(b2, n2, "py_fn", 1);
	k = find(b2, n2, "kern_fn", 1);
	cr_assert(x1 && x2 && p && k);
	cr_assert(x1->r == x2->r && x1->g == x2->g && x1->bl == x2->bl, "same name, same color");
	/* families: native is warm (red dominant), Python blue-green (green/blue over red) */
	cr_assert_gt(x1->r, x1->bl + 60);
	cr_assert_gt(p->g, p->r + 40);
	cr_assert_gt(p->bl, p->r);
	/* the legend names the kinds drawn, and only those */
	cr_assert(strstr(s2, ">Python</text>") && strstr(s2, ">kernel</text>") &&
		  strstr(s2, ">native (C/C++)</text>"));
	cr_assert_null(strstr(s2, ">Rust</text>"));
	cr_assert_null(strstr(s1, ">Python</text>"));
	free(s1);
	free(s2);
	prs_fg_free(g1);
	prs_fg_free(g2);
}

Test(flamegraph, differential_colors_and_counts)
{
	struct prs_fg *fg = prs_fg_new();
	struct prs_fg_frame grew[] = { { "main" }, { "grew" } }, shrank[] = { { "main" }, { "shrank" } },
			    same[] = { { "main" }, { "same" } }, gone[] = { { "main" }, { "gone" } };
	struct prs_fg_opts o;
	struct box b[8];
	char *svg;
	size_t n;
	const struct box *g, *s, *u, *r, *m;

	/* before: 100 samples (grew 10%, shrank 40%, same 40%, gone 10%);
	 * after: 200 (grew 40%, shrank 20%, same 40%) */
	cr_assert_eq(prs_fg_add2(fg, grew, 2, 10, 80), 0);
	cr_assert_eq(prs_fg_add2(fg, shrank, 2, 40, 40), 0);
	cr_assert_eq(prs_fg_add2(fg, same, 2, 40, 80), 0);
	cr_assert_eq(prs_fg_add2(fg, gone, 2, 10, 0), 0);
	cr_assert_eq(prs_fg_total(fg), 200);
	cr_assert_eq(prs_fg_total_before(fg), 100);
	prs_fg_opts_init(&o);
	o.diff = true; /* no periods: the sides compare as shares */
	svg = render(fg, &o);
	n = boxes(svg, b, 8);
	g = find(b, n, "grew", 2);
	s = find(b, n, "shrank", 2);
	u = find(b, n, "same", 2);
	r = find(b, n, "gone", 2);
	m = find(b, n, "main", 1);
	cr_assert(g && s && u && r && m);
	cr_assert_eq(g->b, 10);
	/* widths: share before + share after, so the removed frame is drawn as wide as its 10 % */
	cr_assert_float_eq(g->rw / m->rw, (0.1 + 0.4) / 2, 1e-3);
	cr_assert_float_eq(s->rw / m->rw, (0.4 + 0.2) / 2, 1e-3);
	cr_assert_float_eq(r->rw / m->rw, (0.1 + 0) / 2, 1e-3);
	/* red grew, blue shrank, grey within noise (normalized to the totals); removed: full blue */
	cr_assert(g->r == 255 && g->g < 200 && g->bl < 200, "grew rgb(%d,%d,%d)", g->r, g->g, g->bl);
	cr_assert(s->bl == 255 && s->r < 200, "shrank rgb(%d,%d,%d)", s->r, s->g, s->bl);
	cr_assert(u->r == 224 && u->g == 224 && u->bl == 224, "same rgb(%d,%d,%d)", u->r, u->g, u->bl);
	cr_assert(r->bl == 255 && r->r == 90, "gone rgb(%d,%d,%d)", r->r, r->g, r->bl);
	cr_assert(strstr(g->title, "change: +30.00%"), "%s", g->title);
	cr_assert(strstr(s->title, "change: -20.00%"), "%s", s->title);
	cr_assert(strstr(u->title, "within noise"), "%s", u->title);
	cr_assert(strstr(r->title, "removed: only before"), "%s", r->title);
	cr_assert(strstr(svg, "data-s=\"removed\""));
	free(svg);
	prs_fg_free(fg);
}

/* Timed sides: widths are before + after seconds, so a 10 ms sample weighs 10 times a 1 ms one,
 * and the same seconds at two rates are no change. */
Test(flamegraph, differential_widths_in_seconds)
{
	struct prs_fg *fg = prs_fg_new();
	struct prs_fg_frame slow[] = { { "main" }, { "slow" } }, fast[] = { { "main" }, { "fast" } };
	struct prs_fg_opts o;
	struct box b[8];
	char *svg;
	size_t n;
	const struct box *sl, *fa, *m;

	/* before at 100 Hz: slow 100 (1 s), fast 100 (1 s); after at 1000 Hz: slow 500 (0.5 s),
	 * fast 1000 (1 s) */
	cr_assert_eq(prs_fg_add2(fg, slow, 2, 100, 500), 0);
	cr_assert_eq(prs_fg_add2(fg, fast, 2, 100, 1000), 0);
	prs_fg_opts_init(&o);
	o.diff = true;
	o.diff_period_s[0] = 0.001;
	o.diff_period_s[1] = 0.01;
	svg = render(fg, &o);
	n = boxes(svg, b, 8);
	sl = find(b, n, "slow", 2);
	fa = find(b, n, "fast", 2);
	m = find(b, n, "main", 1);
	cr_assert(sl && fa && m);
	cr_assert_float_eq(sl->rw / m->rw, 1.5 / 3.5, 1e-3);
	cr_assert_float_eq(fa->rw / m->rw, 2.0 / 3.5, 1e-3);
	cr_assert(sl->bl == 255 && sl->r < 200, "slow rgb(%d,%d,%d)", sl->r, sl->g, sl->bl);
	cr_assert(strstr(sl->title, "2.00x faster"), "%s", sl->title);
	cr_assert(strstr(fa->title, "within noise"), "%s", fa->title);
	cr_assert(fa->r == 224, "fast rgb(%d,%d,%d)", fa->r, fa->g, fa->bl);
	free(svg);
	prs_fg_free(fg);
}

Test(flamegraph, icicle_puts_the_root_on_top)
{
	struct prs_fg *fg = prs_fg_new();
	struct prs_fg_opts o;
	double yroot_flame, yleaf_flame, yroot_ice, yleaf_ice;
	char *svg;
	const char *q;

	add_names(fg, "a;b;c", 1, PRS_KIND_NATIVE);
	prs_fg_opts_init(&o);
	for (int ice = 0; ice < 2; ice++) {
		double *yr = ice ? &yroot_ice : &yroot_flame, *yl = ice ? &yleaf_ice : &yleaf_flame;

		o.icicle = ice;
		svg = render(fg, &o);
		q = strstr(svg, "data-d=\"0\"");
		cr_assert(q && sscanf(strstr(q, "<rect"), "<rect x=\"%*f\" y=\"%lf\"", yr) == 1);
		q = strstr(svg, "data-d=\"3\"");
		cr_assert(q && sscanf(strstr(q, "<rect"), "<rect x=\"%*f\" y=\"%lf\"", yl) == 1);
		if (ice)
			cr_assert(strstr(svg, ">Icicle Graph</text>"));
		free(svg);
	}
	cr_assert_gt(yroot_flame, yleaf_flame, "flame: root at the bottom");
	cr_assert_lt(yroot_ice, yleaf_ice, "icicle: root on top");
	prs_fg_free(fg);
}

Test(flamegraph, empty_bounds_and_overflow)
{
	struct prs_fg *fg = prs_fg_new();
	struct prs_fg_frame one[] = { { "x" } }, *deep;
	char *svg, *longname;

	svg = render(fg, NULL);
	cr_assert(strstr(svg, "no samples"));
	cr_assert(strstr(svg, "</svg>"));
	free(svg);
	cr_assert_eq(prs_fg_add(fg, one, 0, 5), 0);
	cr_assert_eq(prs_fg_add(fg, one, 1, 0), 0);
	cr_assert_eq(prs_fg_total(fg), 0);
	cr_assert_eq(prs_fg_add(fg, one, 1, (uint64_t)INT64_MAX), 0);
	cr_assert_eq(prs_fg_add(fg, one, 1, 1), -EOVERFLOW);
	cr_assert_eq(prs_fg_total(fg), (uint64_t)INT64_MAX);
	prs_fg_free(fg);

	/* deeper than PRS_MAX_STACK_FRAMES: the outermost frames are kept */
	fg = prs_fg_new();
	deep = calloc(PRS_MAX_STACK_FRAMES + 100, sizeof(*deep));
	longname = malloc(PRS_MAX_NAME * 4);
	memset(longname, 'n', PRS_MAX_NAME * 4 - 1);
	longname[PRS_MAX_NAME * 4 - 1] = '\0';
	for (int i = 0; i < PRS_MAX_STACK_FRAMES + 100; i++)
		deep[i] = (struct prs_fg_frame){ .name = i == 5 ? longname : "r", .kind = PRS_KIND_RUST };
	cr_assert_eq(prs_fg_add(fg, deep, PRS_MAX_STACK_FRAMES + 100, 7), 0);
	svg = render(fg, NULL);
	cr_assert(strstr(svg, "data-d=\"2048\""));
	cr_assert_null(strstr(svg, "data-d=\"2049\""));
	free(svg);
	free(deep);
	free(longname);
	prs_fg_free(fg);
	prs_fg_free(NULL);
}

/* A profile built through the model's API: two threads, running and blocked samples. */
static struct prs_profile *sample_profile(void)
{
	struct prs_profile *p = prs_profile_new();
	uint32_t s_main, s_work, s_wait, f_main, f_work, f_wait;

	cr_assert(p);
	f_main = prs_profile_named_frame(p, PRS_KIND_PYTHON, prs_profile_string(p, "main", 4),
					 prs_profile_string(p, "app.py", 6), 3);
	f_work = prs_profile_named_frame(p, PRS_KIND_RUST, prs_profile_string(p, "lib::work", 9), 0, 0);
	f_wait = prs_profile_named_frame(p, PRS_KIND_PYTHON, prs_profile_string(p, "wait", 4),
					 prs_profile_string(p, "app.py", 6), 9);
	s_main = prs_profile_stack(p, 0, f_main);
	s_work = prs_profile_stack(p, s_main, f_work);
	s_wait = prs_profile_stack(p, s_main, f_wait);
	cr_assert_eq(prs_profile_thread(p, 11, prs_profile_string(p, "MainThread", 10)), 0);
	for (int i = 0; i < 6; i++) { /* tid 11: 6 running samples in lib::work */
		struct prs_sample s = { .time_ns = i * 10000000ull, .tid = 11, .state = PRS_STATE_RUNNING,
					.syscall = -1, .stack = s_work, .weight = 1 };

		cr_assert_eq(prs_profile_sample(p, &s), 0);
	}
	for (int i = 0; i < 4; i++) { /* tid 12 (no name): 4 samples blocked in read(2) = syscall 0 */
		struct prs_sample s = { .time_ns = i * 10000000ull, .tid = 12, .state = PRS_STATE_BLOCKED,
					.syscall = 0, .stack = s_wait, .weight = 1 };

		cr_assert_eq(prs_profile_sample(p, &s), 0);
	}
	return p;
}

Test(flamegraph, from_profile_views_and_threads)
{
	struct prs_profile *p = sample_profile();
	struct prs_fg *cpu = prs_fg_new(), *wall = prs_fg_new(), *thr = prs_fg_new();
	struct prs_err err = { 0 };
	struct box b[16];
	char *svg, sub[256];
	size_t n;
	const struct box *leaf, *t11, *t12, *w;

	cr_assert_eq(prs_fg_from_profile(cpu, p, &(struct prs_view_opts){ .view = PRS_VIEW_CPU }, &err), 0, "%s", err.msg);
	cr_assert_eq(prs_fg_total(cpu), 6);
	cr_assert_eq(prs_fg_from_profile(wall, p, &(struct prs_view_opts){ .view = PRS_VIEW_WALL }, &err), 0, "%s", err.msg);
	cr_assert_eq(prs_fg_total(wall), 10);
	svg = render(wall, NULL);
	n = boxes(svg, b, 16);
	leaf = find(b, n, "[read]", 3);
	cr_assert(leaf, "the off-CPU leaf of a sample blocked in syscall 0 (read on x86_64)");
	cr_assert_eq(leaf->c, 4);
	cr_assert(strstr(leaf->title, "kind: off-io"), "%s", leaf->title);
	w = find(b, n, "wait", 2);
	cr_assert(w && strstr(w->title, "app.py:9"), "file:line in the details");
	cr_assert(find(b, n, "lib::work", 2));
	free(svg);

	cr_assert_eq(prs_fg_from_profile(thr, p, &(struct prs_view_opts){ .view = PRS_VIEW_WALL, .per_thread = true }, &err), 0, "%s", err.msg);
	svg = render(thr, NULL);
	n = boxes(svg, b, 16);
	t11 = find(b, n, "thread 11 (MainThread)", 1);
	t12 = find(b, n, "thread 12", 1);
	cr_assert(t11 && t12);
	cr_assert_eq(t11->c, 6);
	cr_assert_eq(t12->c, 4);
	cr_assert(find(b, n, "[read]", 4));
	free(svg);

	prs_fg_describe_profile(p, PRS_VIEW_CPU, sub, sizeof(sub));
	cr_assert(strstr(sub, "6 on-CPU samples"), "%s", sub);
	prs_fg_describe_profile(p, PRS_VIEW_WALL, sub, sizeof(sub));
	cr_assert(strstr(sub, "10 wall samples"), "%s", sub);

	prs_fg_free(cpu);
	prs_fg_free(wall);
	prs_fg_free(thr);
	prs_profile_free(p);
}

Test(flamegraph, diff_from_profiles)
{
	struct prs_profile *before = sample_profile(), *after = sample_profile();
	struct prs_fg *fg = prs_fg_new();
	struct prs_err err = { 0 };
	uint32_t st = after->samples[0].stack;

	/* after: 6 more samples in lib::work */
	for (int i = 0; i < 6; i++) {
		struct prs_sample s = { .tid = 11, .state = PRS_STATE_RUNNING, .syscall = -1, .stack = st, .weight = 1 };

		cr_assert_eq(prs_profile_sample(after, &s), 0);
	}
	cr_assert_eq(prs_fg_diff_from_profiles(fg, before, &(struct prs_view_opts){ .view = PRS_VIEW_WALL }, after, &(struct prs_view_opts){ .view = PRS_VIEW_WALL }, &err), 0, "%s", err.msg);
	cr_assert_eq(prs_fg_total_before(fg), 10);
	cr_assert_eq(prs_fg_total(fg), 16);
	prs_fg_free(fg);
	prs_profile_free(before);
	prs_profile_free(after);
}

/* The two ways in, folded text through the profile model and frames through prs_fg_add, must
 * draw the same graph (random input; the seed is printed on failure). */
Test(flamegraph, profile_path_equals_direct_path)
{
	unsigned seed = 20261202;
	char *text = NULL, *svg1, *svg2, line[512];
	size_t tlen = 0;
	FILE *f = open_memstream(&text, &tlen);
	struct prs_profile *p = NULL;
	struct prs_fg *a = prs_fg_new(), *b = prs_fg_new();
	struct prs_err err = { 0 };

	srand(seed);
	for (int i = 0; i < 3000; i++) {
		int depth = 1 + rand() % 12;
		struct prs_fg_frame fr[16];
		char names[16][16];

		line[0] = '\0';
		for (int k = 0; k < depth; k++) {
			bool kern = rand() % 10 == 0;

			snprintf(names[k], sizeof(names[k]), "f%d", rand() % 25);
			fr[k] = (struct prs_fg_frame){ .name = names[k],
						       .kind = kern ? PRS_KIND_KERNEL : PRS_KIND_UNKNOWN };
			snprintf(line + strlen(line), sizeof(line) - strlen(line), "%s%s%s", k ? ";" : "",
				 names[k], kern ? "_[k]" : "");
		}
		{
			unsigned c = 1 + rand() % 50;

			fprintf(f, "%s %u\n", line, c);
			cr_assert_eq(prs_fg_add(b, fr, (size_t)depth, c), 0);
		}
	}
	fclose(f);
	f = fmemopen(text, tlen, "r");
	cr_assert_eq(prs_folded_read(f, "random.folded", &p, &err), 0, "%s", err.msg);
	fclose(f);
	cr_assert_eq(prs_fg_from_profile(a, p, &(struct prs_view_opts){ .view = PRS_VIEW_CPU }, &err), 0, "%s", err.msg);
	cr_assert_eq(prs_fg_total(a), prs_fg_total(b), "seed %u", seed);
	svg1 = render(a, NULL);
	svg2 = render(b, NULL);
	cr_assert(strcmp(svg1, svg2) == 0, "the two paths differ (seed %u)", seed);
	free(svg1);
	free(svg2);
	free(text);
	prs_profile_free(p);
	prs_fg_free(a);
	prs_fg_free(b);
}

/* A symbolized raw frame expands to its inline chain; each inlined function is its own box with
 * its own line, and the raw frame's label stands for an unsymbolized one. */
Test(flamegraph, inline_expansions_and_raw_frames)
{
	struct prs_profile *p = prs_profile_new();
	struct prs_mapping mp = { .start = 0x400000, .end = 0x500000, .offset = 0 };
	struct prs_fg *fg = prs_fg_new();
	struct prs_err err = { 0 };
	uint32_t map, raw1, raw2, leaf, mix, top, s1, s2, s3, ids[2];
	struct box b[16];
	size_t n;
	char *svg;
	const struct box *bl, *bm, *bu;

	mp.path = prs_profile_string(p, "/usr/bin/app", 12);
	map = prs_profile_mapping(p, &mp);
	raw1 = prs_profile_raw_frame(p, map, 0x401234, true);
	raw2 = prs_profile_raw_frame(p, map, 0x402000, false);
	top = prs_profile_named_frame(p, PRS_KIND_RUST, prs_profile_string(p, "app::main", 9),
				      prs_profile_string(p, "main.rs", 7), 5);
	leaf = prs_profile_named_frame(p, PRS_KIND_RUST, prs_profile_string(p, "app::leaf", 9),
				       prs_profile_string(p, "main.rs", 7), 40);
	mix = prs_profile_named_frame(p, PRS_KIND_RUST, prs_profile_string(p, "app::mix", 8),
				      prs_profile_string(p, "main.rs", 7), 12);
	ids[0] = leaf;
	ids[1] = mix;
	cr_assert_eq(prs_profile_expand(p, raw1, ids, 2), 0);
	s1 = prs_profile_stack(p, 0, top);
	s2 = prs_profile_stack(p, s1, raw1);
	s3 = prs_profile_stack(p, s1, raw2);
	for (int i = 0; i < 5; i++) {
		struct prs_sample s = { .tid = 1, .state = PRS_STATE_RUNNING, .syscall = -1, .stack = i < 3 ? s2 : s3,
					.weight = 1 };

		cr_assert_eq(prs_profile_sample(p, &s), 0);
	}
	cr_assert_eq(prs_fg_from_profile(fg, p, &(struct prs_view_opts){ .view = PRS_VIEW_CPU }, &err), 0, "%s", err.msg);
	svg = render(fg, NULL);
	n = boxes(svg, b, 16);
	bl = find(b, n, "app::leaf", 2);
	bm = find(b, n, "app::mix", 3);
	bu = find(b, n, "app+0x2000", 2);
	cr_assert(bl && bm && bu, "leaf, mix inlined above it, and the unsymbolized frame");
	cr_assert_eq(bl->c, 3);
	cr_assert_eq(bm->c, 3);
	cr_assert_eq(bu->c, 2);
	cr_assert(strstr(bl->title, "main.rs:40"), "%s", bl->title);
	cr_assert(strstr(bm->title, "main.rs:12"), "%s", bm->title);
	cr_assert(strstr(find(b, n, "app::main", 1)->title, "main.rs:5"));
	free(svg);
	prs_fg_free(fg);
	prs_profile_free(p);
}

Test(flamegraph, drawn_boxes_are_capped)
{
	struct prs_fg *fg = prs_fg_new();
	struct prs_fg_frame fr[210];
	static char names[210][16];
	struct prs_fg_opts o;
	char *svg;

	/* 1000 stacks of 210 distinct frames, each 1.18 px wide: 210001 boxes at the default width */
	for (int i = 0; i < 1000; i++) {
		for (int k = 0; k < 210; k++) {
			snprintf(names[k], sizeof(names[k]), "s%d_%d", i, k);
			fr[k] = (struct prs_fg_frame){ .name = names[k], .kind = PRS_KIND_NATIVE };
		}
		cr_assert_eq(prs_fg_add(fg, fr, 210, 1), 0);
	}
	svg = render(fg, NULL);
	cr_assert_leq(prs_fg_drawn(fg), PRS_FG_MAX_DRAWN);
	cr_assert(strstr(svg, "[1000 small frames]"), "the narrow roots merged once the cap was hit");
	free(svg);
	prs_fg_opts_init(&o);
	o.min_width = -1; /* every frame, as asked */
	svg = render(fg, &o);
	cr_assert_eq(prs_fg_drawn(fg), 210001);
	free(svg);
	prs_fg_free(fg);
}

Test(flamegraph, thread_roots_in_tid_order)
{
	struct prs_fg *fg = prs_fg_new();
	const char *tids[] = { "thread 11 (b)", "thread 2", "thread 100 (a)", "thread 7" };
	struct box b[16];
	size_t n;
	char *svg;

	for (int i = 0; i < 4; i++) {
		struct prs_fg_frame fr[] = { { tids[i], NULL, 0, PRS_KIND_THREAD }, { "work", NULL, 0, PRS_KIND_NATIVE } };

		cr_assert_eq(prs_fg_add(fg, fr, 2, 1), 0);
	}
	svg = render(fg, NULL);
	n = boxes(svg, b, 16);
	cr_assert_eq(find(b, n, "thread 2", 1)->x, 0);
	cr_assert_eq(find(b, n, "thread 7", 1)->x, 1);
	cr_assert_eq(find(b, n, "thread 11 (b)", 1)->x, 2);
	cr_assert_eq(find(b, n, "thread 100 (a)", 1)->x, 3);
	free(svg);
	prs_fg_free(fg);
}

/* Counts the boxes at depth d (1: the roots below "all") and checks each is a process root. */
static size_t process_roots(const struct box *b, size_t n)
{
	size_t k = 0;

	for (size_t i = 0; i < n; i++)
		if (b[i].d == 1) {
			cr_assert(strstr(b[i].title, "kind: process"), "%s", b[i].title);
			k++;
		}
	return k;
}

/*
 * A profile of several processes (tests/fixtures/profile/tree.pyrs): a root per process, or per
 * command merged; the thread roots under them; a GIL wait is "[waiting for the GIL]" of the GIL's
 * kind; a profile of one process has no process root (the single-process tests above).
 */
Test(flamegraph, a_root_per_process_or_per_command)
{
	struct prs_profile *p;
	struct prs_fg *fg = prs_fg_new(), *merged = prs_fg_new(), *thr = prs_fg_new();
	struct prs_err err = { 0 };
	struct box b[32];
	const struct box *x;
	char *svg;
	size_t n;

	cr_assert_eq(prs_pyrs_read("tests/fixtures/profile/tree.pyrs", &p, NULL, 0, &err), 0,
		     "%s (run from the repository root)", err.msg);
	cr_assert_eq(prs_fg_from_profile(fg, p, &(struct prs_view_opts){ .view = PRS_VIEW_WALL,
								  .per_process = true }, &err), 0);
	svg = render(fg, NULL);
	n = boxes(svg, b, 32);
	cr_assert_eq(process_roots(b, n), 4, "the exec'd pid 100 is two processes, one per command");
	cr_assert((x = find(b, n, "python3 pool.py [101]", 1)) && x->c == 20);
	cr_assert((x = find(b, n, "python3 pool.py [102]", 1)) && x->c == 30);
	cr_assert((x = find(b, n, "python3 pool.py [100]", 1)) && x->c == 10);
	cr_assert((x = find(b, n, "sh -c python3 pool.py [100]", 1)) && x->c == 5);
	x = find(b, n, "[waiting for the GIL]", 4);
	cr_assert(x && x->c == 10);
	cr_assert(strstr(x->title, "kind: off-gil"), "%s", x->title);
	free(svg);

	cr_assert_eq(prs_fg_from_profile(merged, p, &(struct prs_view_opts){ .view = PRS_VIEW_WALL,
				.per_process = true, .merge_processes = true }, &err), 0);
	svg = render(merged, NULL);
	n = boxes(svg, b, 32);
	cr_assert_eq(process_roots(b, n), 2);
	cr_assert((x = find(b, n, "python3 pool.py", 1)) && x->c == 60, "every worker's samples");
	cr_assert((x = find(b, n, "sh -c python3 pool.py", 1)) && x->c == 5);
	free(svg);

	cr_assert_eq(prs_fg_from_profile(thr, p, &(struct prs_view_opts){ .view = PRS_VIEW_CPU,
				.per_process = true, .per_thread = true }, &err), 0);
	svg = render(thr, NULL);
	n = boxes(svg, b, 32);
	cr_assert_eq(process_roots(b, n), 2, "the CPU view: the two workers");
	cr_assert((x = find(b, n, "thread 102 (MainThread)", 2)) && x->c == 20);
	cr_assert_null(find(b, n, "thread 103 (worker)", 2), "only waited: not in the CPU view");
	free(svg);
	prs_fg_free(fg);
	prs_fg_free(merged);
	prs_fg_free(thr);
	prs_profile_free(p);
}
