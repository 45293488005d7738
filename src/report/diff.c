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
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "pyrsprof/export.h"
#include "pyrsprof/report.h"
#include "pyrsprof/util.h"
#include "report/report-internal.h"

#include "util/banned.h"

#define MD_MAX_ROWS 50

struct fn {
	char *key;      /* name, NUL, file (owned); the strmap key */
	enum prs_kind kind; /* the first known kind seen */
	char file[256];     /* the first file seen ("" for none) */
	char name[256];
	double self[2], total[2];
};

struct dctx {
	struct fn *fns;
	size_t nfns, cap_fns;
	struct prs_strmap map;
	struct prs_buf key;
	bool use_files; /* both profiles know files: match on name and file, else on the name */
};

/* The function of a hot spot (name, file): its index, or UINT32_MAX on ENOMEM. */
static uint32_t fn_of(struct dctx *c, const struct prs_hotspot *h)
{
	uint32_t v;
	char *copy;

	prs_buf_reset(&c->key);
	if (prs_buf_append(&c->key, h->name, strlen(h->name) + 1) ||
	    prs_buf_append(&c->key, h->file, c->use_files ? strlen(h->file) : 0))
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
		snprintf(c->fns[c->nfns].name, sizeof(c->fns[0].name), "%s", h->name);
		v = (uint32_t)c->nfns++;
	}
	if (c->fns[v].kind == PRS_KIND_UNKNOWN)
		c->fns[v].kind = h->kind;
	if (!c->fns[v].file[0])
		snprintf(c->fns[v].file, sizeof(c->fns[0].file), "%s", h->file);
	return v;
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

/* Counts profile p into side (0 before, 1 after): its hot spots by function. */
static int count_profile(struct dctx *c, const struct prs_profile *p, enum prs_view view, int side,
			 uint64_t *total, struct prs_err *err)
{
	struct prs_hotspot *rows;
	double w;
	size_t n;
	int rc = prs_hotspots(p, view, c->use_files ? 0 : PRS_HOT_BY_NAME, &rows, &n, &w, err);

	if (rc)
		return rc;
	*total = (uint64_t)(w + 0.5);
	for (size_t i = 0; i < n; i++) {
		uint32_t fi = fn_of(c, &rows[i]);

		if (fi == UINT32_MAX) {
			free(rows);
			return prs_err_set(err, -ENOMEM, "diff: out of memory");
		}
		c->fns[fi].self[side] += rows[i].self;
		c->fns[fi].total[side] += rows[i].total;
	}
	free(rows);
	return 0;
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
		struct prs_diff_row *row = &r[i];

		/* hot spot names and files are UTF-8 already, and fit */
		snprintf(row->name, sizeof(row->name), "%s", f->name);
		snprintf(row->file, sizeof(row->file), "%s", f->file);
		row->kind = f->kind;
		row->self_before = (uint64_t)(f->self[0] + 0.5);
		row->self_after = (uint64_t)(f->self[1] + 0.5);
		row->total_before = (uint64_t)(f->total[0] + 0.5);
		row->total_after = (uint64_t)(f->total[1] + 0.5);
		row->self_pct_before = share(row->self_before, nb);
		row->self_pct_after = share(row->self_after, na);
		row->total_pct_before = share(row->total_before, nb);
		row->total_pct_after = share(row->total_after, na);
		row->self_delta_pt = row->self_pct_after - row->self_pct_before;
		row->total_delta_pt = row->total_pct_after - row->total_pct_before;
		row->self_sigma_pt = sigma_pt(row->self_before, nb, row->self_after, na);
		row->total_sigma_pt = sigma_pt(row->total_before, nb, row->total_after, na);
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
	for (i = 0; i < c.nfns; i++)
		free(c.fns[i].key);
	free(c.fns);
	free(r);
	prs_strmap_release(&c.map);
	prs_buf_release(&c.key);
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
