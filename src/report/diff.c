/* SPDX-License-Identifier: MIT */
/*
 * `pyrsprof diff`: per-function self and total shares of two profiles, their change in
 * percentage points with a binomial noise estimate (see diff.h), written as diff.md and
 * diff.json (jansson). Functions are matched across the two profiles by the bytes of their
 * display name, file and kind, since the profiles' string ids are unrelated.
 *
 * Counting: samples are first grouped by (stack, off-CPU leaf), so each distinct stack is walked
 * once; a per-function stamp counts a function once per stack for its total, however often it
 * recurses.
 */
#include "pyrsprof/diff.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pyrsprof/export.h"
#include "pyrsprof/report.h"
#include "pyrsprof/util.h"
#include "report/report-internal.h"

#include "util/banned.h"

#define MAX_FRAMES (64u * 1024)
#define MAX_LEAVES 1024
#define MD_MAX_ROWS 50

struct fn {
	char *key;      /* name, NUL, file (owned); the strmap key */
	enum prs_kind kind; /* the first known kind seen */
	char *file;         /* the first file seen (owned), NULL for none */
	size_t filelen;
	size_t keylen;
	uint64_t self[2], total[2];
	uint64_t stamp; /* last stack group that counted this function's total */
};

struct dctx {
	struct fn *fns;
	size_t nfns, cap_fns;
	struct prs_strmap map;
	struct prs_buf key, scratch;
	uint32_t *fbuf;
	uint64_t serial;
	bool use_files; /* both profiles know files: match on name and file, else on the name */
};

/* The function of (kind, label, file); its index, or UINT32_MAX on ENOMEM. */
static uint32_t fn_of(struct dctx *c, enum prs_kind kind, const char *label, const char *file,
		      size_t flen)
{
	uint32_t v;
	char *copy;

	prs_buf_reset(&c->key);
	if (prs_buf_append(&c->key, label, strlen(label) + 1) ||
	    prs_buf_append(&c->key, file, c->use_files ? flen : 0))
		return UINT32_MAX;
	v = prs_strmap_get(&c->map, c->key.data, c->key.len);
	if (v == PRS_MAP_NONE) {
		if (c->nfns >= UINT32_MAX - 1 ||
		    prs_array_grow((void **)&c->fns, &c->cap_fns, c->nfns + 1, sizeof(*c->fns)))
			return UINT32_MAX;
		copy = malloc(c->key.len);
		if (!copy)
			return UINT32_MAX;
		memcpy(copy, c->key.data, c->key.len);
		if (prs_strmap_put(&c->map, copy, c->key.len, (uint32_t)c->nfns)) {
			free(copy);
			return UINT32_MAX;
		}
		memset(&c->fns[c->nfns], 0, sizeof(c->fns[0]));
		c->fns[c->nfns].key = copy;
		c->fns[c->nfns].keylen = c->key.len;
		v = (uint32_t)c->nfns++;
	}
	if (c->fns[v].kind == PRS_KIND_UNKNOWN)
		c->fns[v].kind = kind;
	if (!c->fns[v].file && flen) {
		if (!(c->fns[v].file = malloc(flen)))
			return UINT32_MAX;
		memcpy(c->fns[v].file, file, flen);
		c->fns[v].filelen = flen;
	}
	return v;
}

static uint32_t frame_fn(struct dctx *c, const struct prs_profile *p, uint32_t fid)
{
	const struct prs_frame *f = &p->frames[fid];
	char label[PRS_MAX_NAME + 64];
	uint32_t file = !f->raw && f->file < p->nstrings ? f->file : 0;

	prs_profile_frame_label(p, fid, label, sizeof(label));
	if (!label[0])
		snprintf(label, sizeof(label), "[unknown]");
	return fn_of(c, (enum prs_kind)f->kind, label, p->strings[file], p->string_lens[file]);
}

/* True if some named frame of p has a file (a symbolized recording; folded input has none). */
static bool has_files(const struct prs_profile *p)
{
	uint32_t i;

	for (i = 0; i < p->nframes; i++)
		if (!p->frames[i].raw && p->frames[i].file)
			return true;
	return false;
}

struct group {
	uint32_t stack, leaf; /* leaf: index in leaves + 1 */
	uint64_t weight;
};

static int group_cmp(const void *a, const void *b)
{
	const struct group *x = a, *y = b;

	if (x->stack != y->stack)
		return x->stack < y->stack ? -1 : 1;
	return x->leaf < y->leaf ? -1 : x->leaf > y->leaf;
}

/* Counts profile p into side (0 before, 1 after). *total gets the view's weight. */
static int count_profile(struct dctx *c, const struct prs_profile *p, enum prs_view view, int side,
			 uint64_t *total, struct prs_err *err)
{
	char (*leaves)[48] = calloc(MAX_LEAVES, sizeof(*leaves));
	enum prs_kind leaf_kind[MAX_LEAVES];
	uint32_t nleaves = 0, *frame_fns = NULL;
	struct group *g = malloc((p->nsamples ? p->nsamples : 1) * sizeof(*g));
	size_t ng = 0, i, j;
	int rc = 0;

	*total = 0;
	/* frame id -> function index + 1 (0: not yet) */
	frame_fns = calloc(p->nframes ? p->nframes : 1, sizeof(*frame_fns));
	if (!leaves || !g || !frame_fns)
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
		g[ng].stack = s->stack < p->nstacks ? s->stack : 0;
		g[ng].leaf = leaf;
		g[ng++].weight = s->weight;
		*total += s->weight;
	}
	if (ng)
		qsort(g, ng, sizeof(*g), group_cmp);
	for (i = 0; i < ng; i = j) {
		uint64_t w = 0;
		uint32_t self = UINT32_MAX;
		size_t n, k;

		for (j = i; j < ng && group_cmp(&g[i], &g[j]) == 0; j++)
			w += g[j].weight;
		c->serial++;
		n = prs_profile_stack_frames(p, g[i].stack, c->fbuf, MAX_FRAMES);
		for (k = 0; k < n; k++) {
			uint32_t fid = c->fbuf[k], fi;

			if (!frame_fns[fid]) {
				fi = frame_fn(c, p, fid);
				if (fi == UINT32_MAX)
					goto nomem;
				frame_fns[fid] = fi + 1;
			}
			fi = frame_fns[fid] - 1;
			if (c->fns[fi].stamp != c->serial) {
				c->fns[fi].stamp = c->serial;
				c->fns[fi].total[side] += w;
			}
			self = fi;
		}
		if (g[i].leaf) {
			uint32_t fi = fn_of(c, leaf_kind[g[i].leaf - 1], leaves[g[i].leaf - 1], "", 0);

			if (fi == UINT32_MAX)
				goto nomem;
			if (c->fns[fi].stamp != c->serial) {
				c->fns[fi].stamp = c->serial;
				c->fns[fi].total[side] += w;
			}
			self = fi;
		}
		if (self == UINT32_MAX) {
			/* as the folded export: a sample without frames is "[empty stack]" */
			self = fn_of(c, PRS_KIND_UNKNOWN, "[empty stack]", "", 0);
			if (self == UINT32_MAX)
				goto nomem;
			c->fns[self].total[side] += w;
		}
		c->fns[self].self[side] += w;
	}
	goto out;
nomem:
	rc = prs_err_set(err, -ENOMEM, "diff: out of memory");
out:
	free(leaves);
	free(g);
	free(frame_fns);
	return rc;
}

/* Copies s (len bytes) as UTF-8 into dst (size bytes), cut at a character boundary. */
static void copy_utf8(struct dctx *c, char *dst, size_t size, const char *s, size_t len)
{
	size_t n;
	const char *t = prs_utf8_clean(s, len, &c->scratch, &n);

	if (!t) {
		t = "[out of memory]";
		n = strlen(t);
	}
	if (n >= size) {
		n = size - 1;
		while (n > 0 && ((unsigned char)t[n] & 0xc0) == 0x80)
			n--; /* t[n] would start the cut character: drop it whole */
	}
	memcpy(dst, t, n);
	dst[n] = '\0';
}

static double share(uint64_t k, uint64_t n)
{
	return n ? 100.0 * (double)k / (double)n : 0;
}

/* Standard error (in percentage points) of the difference of two binomial shares. */
static double sigma_pt(uint64_t kb, uint64_t nb, uint64_t ka, uint64_t na)
{
	double pb = (double)kb / (double)nb, pa = (double)ka / (double)na;

	return 100.0 * sqrt(pb * (1 - pb) / (double)nb + pa * (1 - pa) / (double)na);
}

static bool passes(double delta, double sigma)
{
	return fabs(delta) > PRS_DIFF_SIGMAS * sigma && fabs(delta) > PRS_DIFF_MIN_PT;
}

/* "grew", "shrank" (by the larger significant delta: total first) or "" when not significant. */
static const char *change_of(const struct prs_diff_row *r)
{
	double d;

	if (!r->significant)
		return "";
	d = passes(r->total_delta_pt, r->total_sigma_pt) ? r->total_delta_pt : r->self_delta_pt;
	return d > 0 ? "grew" : "shrank";
}

static double move_of(const struct prs_diff_row *r)
{
	double a = fabs(r->self_delta_pt), b = fabs(r->total_delta_pt);

	return a > b ? a : b;
}

static int row_cmp(const void *x, const void *y)
{
	const struct prs_diff_row *a = x, *b = y;
	double ma = move_of(a), mb = move_of(b);
	int r;

	if (ma != mb)
		return ma > mb ? -1 : 1;
	if (a->total_pct_after != b->total_pct_after)
		return a->total_pct_after > b->total_pct_after ? -1 : 1;
	if ((r = strcmp(a->name, b->name)))
		return r;
	return strcmp(a->file, b->file);
}

int prs_diff_compute(const struct prs_profile *before, const struct prs_profile *after,
		     enum prs_view view, struct prs_diff_row **rows, size_t *nrows,
		     struct prs_diff_summary *summary, struct prs_err *err)
{
	struct dctx c;
	struct prs_diff_row *r = NULL;
	uint64_t nb = 0, na = 0;
	const char *vname = view == PRS_VIEW_WALL ? "wall" : "cpu";
	size_t i;
	int rc;

	*rows = NULL;
	*nrows = 0;
	memset(&c, 0, sizeof(c));
	prs_strmap_init(&c.map);
	prs_buf_init(&c.key);
	prs_buf_init(&c.scratch);
	c.fbuf = malloc(MAX_FRAMES * sizeof(*c.fbuf));
	if (!c.fbuf) {
		rc = prs_err_set(err, -ENOMEM, "diff: out of memory");
		goto out;
	}
	c.use_files = has_files(before) && has_files(after);
	if ((rc = count_profile(&c, before, view, 0, &nb, err)) ||
	    (rc = count_profile(&c, after, view, 1, &na, err)))
		goto out;
	if (!nb || !na) {
		rc = prs_err_set(err, -EINVAL, "diff: the %s profile has no samples in the %s view",
				 nb ? "after" : "before", vname);
		goto out;
	}
	r = calloc(c.nfns ? c.nfns : 1, sizeof(*r));
	if (!r) {
		rc = prs_err_set(err, -ENOMEM, "diff: out of memory");
		goto out;
	}
	for (i = 0; i < c.nfns; i++) {
		const struct fn *f = &c.fns[i];
		const char *name = f->key;
		struct prs_diff_row *row = &r[i];

		copy_utf8(&c, row->name, sizeof(row->name), name, strlen(name));
		copy_utf8(&c, row->file, sizeof(row->file), f->file ? f->file : "", f->filelen);
		row->kind = f->kind;
		row->self_before = f->self[0];
		row->self_after = f->self[1];
		row->total_before = f->total[0];
		row->total_after = f->total[1];
		row->self_pct_before = share(f->self[0], nb);
		row->self_pct_after = share(f->self[1], na);
		row->total_pct_before = share(f->total[0], nb);
		row->total_pct_after = share(f->total[1], na);
		row->self_delta_pt = row->self_pct_after - row->self_pct_before;
		row->total_delta_pt = row->total_pct_after - row->total_pct_before;
		row->self_sigma_pt = sigma_pt(f->self[0], nb, f->self[1], na);
		row->total_sigma_pt = sigma_pt(f->total[0], nb, f->total[1], na);
		row->significant = passes(row->self_delta_pt, row->self_sigma_pt) ||
				   passes(row->total_delta_pt, row->total_sigma_pt);
	}
	if (c.nfns)
		qsort(r, c.nfns, sizeof(*r), row_cmp);
	if (summary) {
		memset(summary, 0, sizeof(*summary));
		summary->samples_before = nb;
		summary->samples_after = na;
		summary->functions = c.nfns;
		for (i = 0; i < c.nfns; i++) {
			const struct prs_diff_row *row = &r[i];

			if (!row->significant)
				continue;
			summary->significant++;
			if (change_of(row)[0] == 'g')
				summary->grew++;
			else
				summary->shrank++;
		}
		summary->ntop = c.nfns < PRS_DIFF_TOP ? c.nfns : PRS_DIFF_TOP;
		memcpy(summary->top, r, summary->ntop * sizeof(*r));
	}
	*rows = r;
	*nrows = c.nfns;
	r = NULL;
	rc = 0;
out:
	for (i = 0; i < c.nfns; i++) {
		free(c.fns[i].key);
		free(c.fns[i].file);
	}
	free(c.fns);
	free(r);
	free(c.fbuf);
	prs_strmap_release(&c.map);
	prs_buf_release(&c.key);
	prs_buf_release(&c.scratch);
	return rc;
}

/* ---- output ---- */

static const char *basename_of(const char *path)
{
	const char *b = strrchr(path, '/');

	return b ? b + 1 : path;
}

static void md_row(FILE *f, const struct prs_diff_row *r)
{
	fputs("| ", f);
	if (r->significant)
		fputs("**", f);
	prs_md_text(f, r->name);
	if (r->significant)
		fputs("**", f);
	fputs(" | ", f);
	prs_md_text(f, basename_of(r->file));
	fprintf(f, " | %s | %.1f | %.1f | %+.1f ± %.1f | %.1f | %.1f | %+.1f ± %.1f | %s |\n",
		prs_kind_name(r->kind), r->self_pct_before, r->self_pct_after, r->self_delta_pt,
		r->self_sigma_pt, r->total_pct_before, r->total_pct_after, r->total_delta_pt,
		r->total_sigma_pt, change_of(r));
}

static void md_profile_line(FILE *f, const char *which, const struct prs_profile *p, uint64_t n,
			    struct prs_buf *scratch)
{
	const char *cmd = prs_profile_meta_get(p, "command");

	fprintf(f, "- %s: %" PRIu64 " samples", which, n);
	if (cmd) {
		const char *t = prs_utf8_clean(cmd, strlen(cmd), scratch, NULL);

		if (t) {
			fputs(" of ", f);
			prs_md_text(f, t);
		}
	}
	fputc('\n', f);
}

static int write_md(FILE *f, const struct prs_profile *before, const struct prs_profile *after,
		    enum prs_view view, const struct prs_diff_row *rows, size_t n,
		    const struct prs_diff_summary *s)
{
	struct prs_buf scratch;
	size_t i, shown = 0;

	prs_buf_init(&scratch);
	fprintf(f, "# pyrsprof diff (%s view)\n\n", view == PRS_VIEW_WALL ? "wall" : "cpu");
	md_profile_line(f, "before", before, s->samples_before, &scratch);
	md_profile_line(f, "after", after, s->samples_after, &scratch);
	prs_buf_release(&scratch);
	fprintf(f, "\n%zu functions; %zu changed beyond noise (%zu grew, %zu shrank).\n\n",
		s->functions, s->significant, s->grew, s->shrank);
	fprintf(f, "Shares are percentages of each profile's samples in the view (self: the function "
		"is the leaf; total: it is on the stack). Δ is after − before in percentage points, "
		"± its binomial standard error σ. A change is significant (**bold**) when |Δ| > %g σ "
		"and |Δ| > %g pt; samples of one thread are correlated, so σ is a lower bound on the "
		"noise.\n\n", PRS_DIFF_SIGMAS, PRS_DIFF_MIN_PT);
	fputs("| function | file | kind | self before % | self after % | Δ self pt | total before % "
	      "| total after % | Δ total pt | change |\n", f);
	fputs("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n", f);
	/* the significant rows (in order), then the biggest other movers, MD_MAX_ROWS in all */
	for (i = 0; i < n && shown < MD_MAX_ROWS; i++)
		if (rows[i].significant) {
			md_row(f, &rows[i]);
			shown++;
		}
	for (i = 0; i < n && shown < MD_MAX_ROWS; i++)
		if (!rows[i].significant) {
			md_row(f, &rows[i]);
			shown++;
		}
	if (shown < n)
		fprintf(f, "\n%zu more functions (smaller changes) in diff.json.\n", n - shown);
	return ferror(f) ? -EIO : 0;
}

static json_t *jstr(const char *s)
{
	/* rows hold cleaned UTF-8 already */
	return json_string(s);
}

static json_t *profile_json(const struct prs_profile *p, uint64_t n)
{
	const char *cmd = prs_profile_meta_get(p, "command");
	struct prs_buf scratch;
	json_t *o = json_object();
	const char *t;
	size_t len;

	prs_buf_init(&scratch);
	if (o) {
		json_object_set_new(o, "samples", json_integer((json_int_t)n));
		if (cmd && (t = prs_utf8_clean(cmd, strlen(cmd), &scratch, &len)))
			json_object_set_new(o, "command", json_stringn(t, len));
	}
	prs_buf_release(&scratch);
	return o;
}

static int write_json(FILE *f, const struct prs_profile *before, const struct prs_profile *after,
		      enum prs_view view, const struct prs_diff_row *rows, size_t n,
		      const struct prs_diff_summary *s)
{
	json_t *root = json_object(), *fns = json_array(), *sum = json_object(), *thr = json_object();
	size_t i;
	int rc = -ENOMEM;

	if (!root || json_object_set_new(root, "functions", fns) ||
	    json_object_set_new(root, "summary", sum) || json_object_set_new(root, "threshold", thr))
		goto out;
	if (json_object_set_new(root, "about",
				json_string("pyrsprof diff: shares are percent of each profile's samples "
					    "in the view; deltas are after - before in percentage points; "
					    "sigma is the binomial standard error of a delta; significant: "
					    "|delta| > sigmas * sigma and |delta| > min_pt, for self or total")) ||
	    json_object_set_new(root, "view", json_string(view == PRS_VIEW_WALL ? "wall" : "cpu")) ||
	    json_object_set_new(root, "before", profile_json(before, s->samples_before)) ||
	    json_object_set_new(root, "after", profile_json(after, s->samples_after)) ||
	    json_object_set_new(thr, "sigmas", json_real(PRS_DIFF_SIGMAS)) ||
	    json_object_set_new(thr, "min_pt", json_real(PRS_DIFF_MIN_PT)) ||
	    json_object_set_new(sum, "functions", json_integer((json_int_t)s->functions)) ||
	    json_object_set_new(sum, "significant", json_integer((json_int_t)s->significant)) ||
	    json_object_set_new(sum, "grew", json_integer((json_int_t)s->grew)) ||
	    json_object_set_new(sum, "shrank", json_integer((json_int_t)s->shrank)))
		goto out;
	for (i = 0; i < n; i++) {
		const struct prs_diff_row *r = &rows[i];
		json_t *o = json_object();

		if (!o || json_array_append_new(fns, o) ||
		    json_object_set_new(o, "name", jstr(r->name)) ||
		    json_object_set_new(o, "file", jstr(r->file)) ||
		    json_object_set_new(o, "kind", json_string(prs_kind_name(r->kind))) ||
		    json_object_set_new(o, "self_before", json_integer((json_int_t)r->self_before)) ||
		    json_object_set_new(o, "self_after", json_integer((json_int_t)r->self_after)) ||
		    json_object_set_new(o, "total_before", json_integer((json_int_t)r->total_before)) ||
		    json_object_set_new(o, "total_after", json_integer((json_int_t)r->total_after)) ||
		    json_object_set_new(o, "self_pct_before", json_real(r->self_pct_before)) ||
		    json_object_set_new(o, "self_pct_after", json_real(r->self_pct_after)) ||
		    json_object_set_new(o, "self_delta_pt", json_real(r->self_delta_pt)) ||
		    json_object_set_new(o, "self_sigma_pt", json_real(r->self_sigma_pt)) ||
		    json_object_set_new(o, "total_pct_before", json_real(r->total_pct_before)) ||
		    json_object_set_new(o, "total_pct_after", json_real(r->total_pct_after)) ||
		    json_object_set_new(o, "total_delta_pt", json_real(r->total_delta_pt)) ||
		    json_object_set_new(o, "total_sigma_pt", json_real(r->total_sigma_pt)) ||
		    json_object_set_new(o, "significant", json_boolean(r->significant)))
			goto out;
	}
	rc = json_dumpf(root, f, JSON_INDENT(1) | JSON_REAL_PRECISION(6)) == 0 &&
	     fputc('\n', f) != EOF ? 0 : -EIO;
out:
	json_decref(root);
	return rc;
}

/* What one report file needs: the writers below take it through prs_write_atomic. */
struct diff_out {
	int (*fn)(FILE *f, const struct prs_profile *before, const struct prs_profile *after,
		  enum prs_view view, const struct prs_diff_row *rows, size_t n,
		  const struct prs_diff_summary *s);
	const struct prs_profile *before, *after;
	enum prs_view view;
	const struct prs_diff_row *rows;
	size_t n;
	const struct prs_diff_summary *s;
};

static int write_out(FILE *f, void *arg)
{
	const struct diff_out *o = arg;

	return o->fn(f, o->before, o->after, o->view, o->rows, o->n, o->s);
}

int prs_diff_write(const struct prs_profile *before, const struct prs_profile *after,
		   enum prs_view view, const char *dir, struct prs_diff_summary *summary,
		   struct prs_err *err)
{
	struct prs_diff_summary s;
	struct prs_diff_row *rows = NULL;
	size_t n = 0;
	int rc;

	if ((rc = prs_diff_compute(before, after, view, &rows, &n, &s, err)))
		return rc;
	if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
		int e = errno;

		rc = prs_err_set(err, -e, "%s: %s", dir, strerror(e));
		goto out;
	}
	struct diff_out md = { write_md, before, after, view, rows, n, &s };
	struct diff_out js = { write_json, before, after, view, rows, n, &s };

	if ((rc = prs_write_atomic(dir, "diff.md", write_out, &md, err)) ||
	    (rc = prs_write_atomic(dir, "diff.json", write_out, &js, err)))
		goto out;
	if (summary)
		*summary = s;
out:
	free(rows);
	return rc;
}
