/* SPDX-License-Identifier: MIT */
/*
 * diff.json (schema docs/diff.schema.json): every field of struct prs_diff for programs. A
 * quantity not measured is null, never 0; times in seconds, shares from 0 to 1. Written as
 * jansson writes the whole document (indent 1, 8 digits), its rows made one at a time (as text:
 * diff_json_row.c).
 */
#include "report/diff-internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pyrsprof/export.h"
#include "pyrsprof/util.h"

#include "util/banned.h"

static json_t *num(double v)
{
	return isfinite(v) ? json_real(v) : json_null();
}

static json_t *opt(bool have, double v)
{
	return have ? num(v) : json_null();
}

static json_t *side_json(const struct prs_diff_side *s)
{
	bool timed = s->period_s > 0;

	return json_pack("{s:s, s:f, s:o, s:o, s:o, s:o, s:o}", "command", s->command, "samples",
			 s->weight, "period_s", opt(timed, s->period_s), "rate_hz",
			 opt(s->rate_hz > 0, s->rate_hz), "wall_s", opt(s->wall_known, s->wall_s), "cpu_s",
			 opt(s->cpu_known, s->cpu_s), "cpu_source",
			 s->cpu_known ? json_string(s->cpu_kernel ? "kernel" : "samples") : json_null());
}

static json_t *total_json(const struct prs_diff_total *t)
{
	if (!t->known)
		return json_null();
	return json_pack("{s:f, s:f, s:f, s:f, s:o, s:b}", "before_s", t->c.before, "after_s",
			 t->c.after, "delta_s", t->c.delta, "sigma_s", t->c.sigma, "speedup",
			 opt(t->speedup > 0, t->speedup), "beyond_noise", t->c.significant);
}

/* One of a row's two measures (self or total): its times (timed) and shares, and its samples. */
static json_t *measure_json(const struct prs_diff *d, const struct prs_change *s,
			    const struct prs_change *sh, const double w[2])
{
	return json_pack("{s:o, s:o, s:o, s:o, s:f, s:f, s:f, s:f, s:f, s:f}", "before_s",
			 opt(d->timed, s->before), "after_s", opt(d->timed, s->after), "delta_s",
			 opt(d->timed, s->delta), "sigma_s", opt(d->timed, s->sigma), "before_share",
			 sh->before, "after_share", sh->after, "delta_share", sh->delta, "sigma_share",
			 sh->sigma, "samples_before", w[0], "samples_after", w[1]);
}

static json_t *row_json(const struct prs_diff *d, const struct prs_diff_row *r)
{
	bool ratio = d->timed && r->total_s.before > 0 && r->total_s.after > 0;

	return json_pack("{s:s, s:s, s:s, s:s, s:b, s:o, s:o, s:o}", "name", r->name, "file", r->file,
			 "kind", prs_kind_name(r->kind), "status", prs_diff_status_name(r->status),
			 "significant", r->significant, "self",
			 measure_json(d, &r->self_s, &r->self_sh, r->self_w), "total",
			 measure_json(d, &r->total_s, &r->total_sh, r->total_w), "speedup",
			 opt(ratio, ratio ? r->total_s.before / r->total_s.after : 0));
}

static json_t *verdict_json(const struct prs_diff_side *s)
{
	if (!s->have_verdict)
		return json_null();
	return json_pack("{s:s, s:s, s:s, s:s}", "id", s->verdict_id, "label", s->verdict,
			 "confidence", prs_confidence_name(s->confidence), "lever", s->lever);
}

static json_t *next_json(const struct prs_diff *d)
{
	const struct prs_hotspot *h = &d->next.rows[0];
	const struct prs_phase4_top *t = &d->next;
	double p = d->have_next ? h->self / t->total : 0;
	json_t *spot = d->have_next
		? json_pack("{s:s, s:s, s:s, s:f, s:o, s:o}", "name", h->name, "file", h->file, "kind",
			    prs_kind_name(h->kind), "self_share", p, "self_s",
			    opt(d->side[1].period_s > 0, h->self * d->side[1].period_s), "ceiling",
			    num(prs_amdahl(p)))
		: json_null();
	json_t *stop = t->stop_hint[0]
		? json_pack("{s:s, s:s, s:f, s:o}", "reason", t->stop_reason ? t->stop_reason : "",
			    "text", t->stop_hint, "top_share", t->stop_share, "ceiling",
			    num(prs_amdahl(t->stop_share)))
		: json_null();

	return json_pack("{s:o, s:o}", "hot_spot", spot, "stop_hint", stop);
}

static json_t *pairs_json(const struct prs_diff *d)
{
	const struct prs_diff_pair *pairs;
	size_t n;
	json_t *a = json_array();
	struct prs_buf sc;

	pairs = prs_diff_match_pairs(d->match, &n);
	prs_buf_init(&sc);
	for (size_t i = 0; a && i < n; i++) {
		const char *b = prs_utf8_clean(pairs[i].before, strlen(pairs[i].before), &sc, NULL);
		json_t *o = b ? json_pack("{s:s}", "before", b) : NULL;
		const char *t = prs_utf8_clean(pairs[i].after, strlen(pairs[i].after), &sc, NULL);

		if (!o || !t || json_object_set_new(o, "after", json_string(t)) ||
		    json_object_set_new(o, "how", json_string(pairs[i].moved ? "moved" : "renamed")) ||
		    json_object_set_new(o, "common", json_integer(pairs[i].common)) ||
		    json_object_set_new(o, "functions", json_integer(pairs[i].functions)) ||
		    json_array_append_new(a, o)) {
			json_decref(a);
			a = NULL;
		}
	}
	prs_buf_release(&sc);
	return a;
}

static json_t *fn_pairs_json(const struct prs_diff *d)
{
	size_t n;
	const struct prs_diff_fn_pair *fp = prs_diff_match_fn_pairs(d->match, &n);
	json_t *a = json_array();
	struct prs_buf sc[3];

	for (int k = 0; k < 3; k++)
		prs_buf_init(&sc[k]);
	for (size_t i = 0; a && i < n; i++) {
		const char *name = prs_utf8_clean(fp[i].name, strlen(fp[i].name), &sc[0], NULL);
		const char *b = prs_utf8_clean(fp[i].before, strlen(fp[i].before), &sc[1], NULL);
		const char *t = prs_utf8_clean(fp[i].after, strlen(fp[i].after), &sc[2], NULL);
		json_t *o = name && b && t ? json_pack("{s:s, s:s, s:s}", "name", name, "before", b,
						       "after", t) : NULL;

		if (!o || json_array_append_new(a, o)) {
			json_decref(a);
			a = NULL;
		}
	}
	for (int k = 0; k < 3; k++)
		prs_buf_release(&sc[k]);
	return a;
}

static json_t *summary_json(const struct prs_diff *d)
{
	json_t *o = json_pack("{s:I, s:I, s:I}", "functions", (json_int_t)d->nrows, "changed",
			      (json_int_t)d->changed, "noise", (json_int_t)(d->nrows - d->changed));

	for (int s = PRS_DIFF_FASTER; o && s <= PRS_DIFF_REMOVED; s++)
		json_object_set_new(o, prs_diff_status_name((enum prs_diff_status)s),
				    json_integer((json_int_t)d->count[s]));
	return o;
}

/* diff.json is json_dumpf's text of the whole document at these flags */
#define DUMP_FLAGS (JSON_INDENT(1) | JSON_REAL_PRECISION(8))

/* jansson's text of v (stolen) at depth `extra` of the document: each line after the first
 * indented by extra more spaces (strings hold no raw newline: jansson escapes them). */
static int put_at(FILE *f, json_t *v, int extra)
{
	char *t = v ? json_dumps(v, DUMP_FLAGS) : NULL;
	int rc = 0;

	json_decref(v);
	if (!t)
		return -ENOMEM;
	for (const char *c = t, *nl; *c && !rc; c = nl ? nl + 1 : c + strlen(c)) {
		size_t n;

		nl = strchr(c, '\n');
		n = nl ? (size_t)(nl - c) + 1 : strlen(c);
		if (fwrite(c, 1, n, f) != n || (nl && fprintf(f, "%*s", extra, "") < 0))
			rc = -EIO;
	}
	free(t);
	return rc;
}

/* The text of v (stolen) between its outer braces: what an enclosing object holds of it. */
static int put_inside(FILE *f, json_t *v)
{
	char *t = v ? json_dumps(v, DUMP_FLAGS) : NULL;
	size_t n = t ? strlen(t) : 0;
	int rc = 0;

	json_decref(v);
	if (!t)
		return -ENOMEM;
	/* "{\n key...\n}": from after the "{" to before the last "\n}" */
	if (n < 3 || fwrite(t + 1, 1, n - 3, f) != n - 3)
		rc = n < 3 ? -ENOMEM : -EIO;
	free(t);
	return rc;
}

/* Row r at depth 2: its text made here (diff_json_row.c), or by jansson when only it may. */
static int put_row(FILE *f, const struct prs_diff *d, const struct prs_diff_row *r, struct prs_buf *b)
{
	int rc;

	prs_buf_reset(b);
	rc = prs_diff_json_row(b, d, r);
	if (rc == 1)
		return put_at(f, row_json(d, r), 2);
	if (rc)
		return rc;
	return fwrite(b->data, 1, b->len, f) == b->len ? 0 : -EIO;
}

/* "key": [rows whose significant is `significant`], at depth 1, each row written as it is made. */
static int put_rows(FILE *f, const struct prs_diff *d, const char *key, bool significant)
{
	struct prs_buf b;
	size_t n = 0, k = 0;
	int rc = 0;

	for (size_t i = 0; i < d->nrows; i++)
		n += d->rows[i].significant == significant;
	if (fprintf(f, ",\n \"%s\": %s", key, n ? "[" : "[]") < 0)
		return -EIO;
	prs_buf_init(&b);
	for (size_t i = 0; !rc && n && i < d->nrows; i++) {
		if (d->rows[i].significant != significant)
			continue;
		rc = fputs(k++ ? ",\n  " : "\n  ", f) == EOF ? -EIO : put_row(f, d, &d->rows[i], &b);
	}
	prs_buf_release(&b);
	if (rc)
		return rc;
	return n && fputs("\n ]", f) == EOF ? -EIO : 0;
}

/*
 * The document, as json_dumpf of it whole would write it, but its rows (one per function: nearly
 * all of it) made and written one at a time, so that the whole tree is never held.
 */
int prs_diff_json_write(const struct prs_diff *d, FILE *f)
{
	bool both = d->side[0].have_verdict && d->side[1].have_verdict;
	json_t *head = json_pack(
		"{s:s, s:i, s:s, s:b, s:s, s:{s:f, s:f, s:f}, s:o, s:o, s:{s:o, s:o}, s:o}",
		"schema", "pyrsprof-diff", "version", PRS_DIFF_VERSION, "view",
		d->view == PRS_VIEW_WALL ? "wall" : "cpu", "timed", d->timed, "unit",
		d->timed ? "seconds" : "share", "threshold", "sigmas", PRS_CHANGE_SIGMAS, "min_share",
		PRS_CHANGE_MIN_SHARE, "run_noise", d->timed ? d->run_noise : 0.0, "before",
		side_json(&d->side[0]), "after", side_json(&d->side[1]), "speedup", "wall",
		total_json(&d->wall), "cpu", total_json(&d->cpu), "summary", summary_json(d));
	json_t *tail;
	int rc;

	if (fputc('{', f) == EOF) {
		json_decref(head);
		return -EIO;
	}
	if ((rc = put_inside(f, head)) || (rc = put_rows(f, d, "changes", true)) ||
	    (rc = put_rows(f, d, "noise", false)))
		return rc;
	tail = json_pack("{s:{s:o, s:o, s:o}, s:o, s:{s:s, s:o, s:o}}", "verdict", "before",
			 verdict_json(&d->side[0]), "after", verdict_json(&d->side[1]), "changed",
			 both ? json_boolean(d->verdict_changed) : json_null(), "next", next_json(d),
			 "matching", "by", prs_diff_match_by_name(d->match) ? "name" : "name and module",
			 "pairs", pairs_json(d), "functions", fn_pairs_json(d));
	if (fputc(',', f) == EOF) {
		json_decref(tail);
		return -EIO;
	}
	if ((rc = put_inside(f, tail)) != 0)
		return rc;
	return fputs("\n}", f) == EOF ? -EIO : 0;
}
