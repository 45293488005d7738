/* SPDX-License-Identifier: MIT */
/*
 * The numbers of `pyrsprof diff` (include/pyrsprof/diff.h): each side's facts (duration, CPU
 * accounting, the period of a sample, the verdict), the functions of both sides as matched
 * (diff_match.c) with their self and total weights (prs_hotspots through the matched views),
 * each change judged by the noise rule (change.h), and the after side's hot spots and stop hint
 * (prs_phase4_top). The files are written by diff_write.c.
 */
#include "pyrsprof/diff.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pyrsprof/classify.h"
#include "pyrsprof/export.h"
#include "pyrsprof/util.h"
#include "report/phase1-internal.h"

#include "util/banned.h"

static const char *const status_names[] = { "unchanged", "faster", "slower", "grew",
					    "shrank", "added", "removed" };

const char *prs_diff_status_name(enum prs_diff_status s)
{
	return (unsigned)s <= PRS_DIFF_REMOVED ? status_names[s] : "unchanged";
}

/* A function of either side: its key, kind and weights. Compact (31k of them in a large diff),
 * not a struct prs_hotspot (half a kilobyte). */
struct fn {
	char *key; /* name NUL file (owned until its row takes it): the strmap key */
	enum prs_kind kind;
	double self[2], total[2];
};

struct merge {
	struct fn *fns;
	size_t n, cap;
	struct prs_strmap map;
	struct prs_buf key;
};

/* The function of hot spot h: its index, or SIZE_MAX on ENOMEM. */
static size_t fn_of(struct merge *m, const struct prs_hotspot *h)
{
	uint32_t v;
	char *copy;

	prs_buf_reset(&m->key);
	if (prs_buf_append(&m->key, h->name, strlen(h->name) + 1) ||
	    prs_buf_append(&m->key, h->file, strlen(h->file)))
		return SIZE_MAX;
	v = prs_strmap_get(&m->map, m->key.data, m->key.len);
	if (v != PRS_MAP_NONE) {
		if (m->fns[v].kind == PRS_KIND_UNKNOWN)
			m->fns[v].kind = h->kind;
		return v;
	}
	if (m->n >= UINT32_MAX - 1 || prs_array_grow((void **)&m->fns, &m->cap, m->n + 1, sizeof(*m->fns)))
		return SIZE_MAX;
	copy = malloc(m->key.len + 1);
	if (!copy)
		return SIZE_MAX;
	memcpy(copy, m->key.data, m->key.len);
	copy[m->key.len] = '\0'; /* the file's end: a row reads it as a string */
	if (prs_strmap_put(&m->map, copy, m->key.len, (uint32_t)m->n)) {
		free(copy);
		return SIZE_MAX;
	}
	memset(&m->fns[m->n], 0, sizeof(m->fns[0]));
	m->fns[m->n].key = copy;
	m->fns[m->n].kind = h->kind;
	return m->n++;
}

/* Adds side k's hot spots (its view as matched) to m; *weight gets the view's total weight. */
static int count_side(struct prs_diff *d, struct merge *m, const struct prs_profile *p, int k,
		      struct prs_err *err)
{
	struct prs_view_opts o = { .view = d->view };
	struct prs_hotspot *rows;
	size_t n;
	int rc;

	prs_diff_match_opts(d->match, k, &o);
	if ((rc = prs_hotspots_view(p, &o, 0, &rows, &n, &d->side[k].weight, err)))
		return rc;
	for (size_t i = 0; i < n; i++) {
		size_t f = fn_of(m, &rows[i]);

		if (f == SIZE_MAX) {
			free(rows);
			return prs_err_set(err, -ENOMEM, "diff: out of memory");
		}
		m->fns[f].self[k] += rows[i].self;
		m->fns[f].total[k] += rows[i].total;
	}
	free(rows);
	return 0;
}

/* The size of a row's self (or total) change in the unit it is judged by (seconds, or shares). */
static double move_of(const struct prs_diff *d, const struct prs_diff_row *r, bool self)
{
	const struct prs_change *c = self ? (d->timed ? &r->self_s : &r->self_sh)
					  : (d->timed ? &r->total_s : &r->total_sh);

	return fabs(c->delta);
}

/*
 * The changes first; among them the largest self change first, then the largest total change:
 * a function whose own time moved comes before its callers, whose totals moved by the same
 * amount (else a deep stack's callers would fill the first rows and hide what changed).
 */
static int row_cmp(const void *x, const void *y, void *arg)
{
	const struct prs_diff_row *a = x, *b = y;
	double sa = move_of(arg, a, true), sb = move_of(arg, b, true);
	double ta = move_of(arg, a, false), tb = move_of(arg, b, false);
	int r;

	if (a->significant != b->significant)
		return a->significant ? -1 : 1;
	if (sa != sb)
		return sa > sb ? -1 : 1;
	if (ta != tb)
		return ta > tb ? -1 : 1;
	if (a->total_w[1] != b->total_w[1])
		return a->total_w[1] > b->total_w[1] ? -1 : 1;
	if ((r = strcmp(a->name, b->name)))
		return r;
	return strcmp(a->file, b->file);
}

static enum prs_diff_status status_of(const struct prs_diff *d, const struct prs_diff_row *r)
{
	const struct prs_change *self = d->timed ? &r->self_s : &r->self_sh;
	const struct prs_change *total = d->timed ? &r->total_s : &r->total_sh;
	double delta;

	if (!r->significant)
		return PRS_DIFF_UNCHANGED;
	if (r->total_w[0] <= 0)
		return PRS_DIFF_ADDED;
	if (r->total_w[1] <= 0)
		return PRS_DIFF_REMOVED;
	delta = total->significant ? total->delta : self->delta;
	if (d->timed)
		return delta < 0 ? PRS_DIFF_FASTER : PRS_DIFF_SLOWER;
	return delta < 0 ? PRS_DIFF_SHRANK : PRS_DIFF_GREW;
}

/* A removed function's file: it is keyed by the after side's file of its module's partner (a
 * moved or renamed module, diff_match.c), which it is not in: "removed gone (after.py)" read as
 * if after.py still had it. The before side's file when it is one a row can hold, else file. */
static const char *where_it_was(const struct prs_diff *d, const char *file)
{
	size_t n, len;
	const struct prs_diff_pair *p = prs_diff_match_pairs(d->match, &n);

	for (size_t i = 0; i < n; i++)
		if (strcmp(p[i].after, file) == 0) {
			len = strlen(p[i].before);
			return len < 256 && prs_utf8_valid(p[i].before, len) ? p[i].before : file;
		}
	return file;
}

/* The changes of function f: in seconds (timed) and in shares, judged by the noise rule. The
 * row takes f's key (name NUL file: a hot spot's, cleaned UTF-8 that fits). */
static void row_of(struct prs_diff *d, struct fn *f, struct prs_diff_row *r)
{
	const struct prs_diff_side *b = &d->side[0], *a = &d->side[1];

	r->name = f->key;
	r->file = f->key + strlen(f->key) + 1;
	f->key = NULL;
	r->kind = f->kind;
	for (int k = 0; k < 2; k++) {
		r->self_w[k] = f->self[k];
		r->total_w[k] = f->total[k];
	}
	prs_change_of(&(struct prs_sampled){ f->self[0], b->weight, 1 / b->weight },
		      &(struct prs_sampled){ f->self[1], a->weight, 1 / a->weight }, 0, &r->self_sh);
	prs_change_of(&(struct prs_sampled){ f->total[0], b->weight, 1 / b->weight },
		      &(struct prs_sampled){ f->total[1], a->weight, 1 / a->weight }, 0, &r->total_sh);
	if (d->timed) {
		prs_change_of(&(struct prs_sampled){ f->self[0], b->weight, b->period_s },
			      &(struct prs_sampled){ f->self[1], a->weight, a->period_s }, d->run_noise,
			      &r->self_s);
		prs_change_of(&(struct prs_sampled){ f->total[0], b->weight, b->period_s },
			      &(struct prs_sampled){ f->total[1], a->weight, a->period_s }, d->run_noise,
			      &r->total_s);
		r->significant = r->self_s.significant || r->total_s.significant;
	} else {
		r->significant = r->self_sh.significant || r->total_sh.significant;
	}
	r->status = status_of(d, r);
	if (r->status == PRS_DIFF_REMOVED)
		r->file = where_it_was(d, r->file);
}

static int rows_of(struct prs_diff *d, const struct prs_profile *before,
		   const struct prs_profile *after, struct prs_err *err)
{
	struct merge m = { .fns = NULL };
	int rc;

	prs_strmap_init(&m.map);
	prs_buf_init(&m.key);
	if ((rc = count_side(d, &m, before, 0, err)) || (rc = count_side(d, &m, after, 1, err)))
		goto out;
	if (d->side[0].weight <= 0 || d->side[1].weight <= 0) {
		rc = prs_err_set(err, -EINVAL, "diff: the %s profile has no samples in the %s view",
				 d->side[0].weight > 0 ? "after" : "before",
				 d->view == PRS_VIEW_WALL ? "wall" : "cpu");
		goto out;
	}
	d->rows = calloc(m.n ? m.n : 1, sizeof(*d->rows));
	if (!d->rows) {
		rc = prs_err_set(err, -ENOMEM, "diff: out of memory");
		goto out;
	}
	for (size_t i = 0; i < m.n; i++) {
		row_of(d, &m.fns[i], &d->rows[i]);
		d->nrows++; /* its name is the diff's from now on */
		d->count[d->rows[i].status]++;
		d->changed += d->rows[i].significant;
	}
	if (m.n)
		qsort_r(d->rows, m.n, sizeof(*d->rows), row_cmp, d);
out:
	for (size_t i = 0; i < m.n; i++)
		free(m.fns[i].key);
	free(m.fns);
	prs_strmap_release(&m.map);
	prs_buf_release(&m.key);
	return rc;
}

/* A side's facts: command, period, wall and CPU time, the verdict of a recording. */
static void side_of(const struct prs_report_ctx *c, struct prs_diff_side *s)
{
	const struct prs_facts *f = c->facts;
	struct prs_buf scratch;
	const char *t;
	bool timed = f->rate_hz > 0 || f->duration_s > 0;

	prs_buf_init(&scratch);
	t = prs_utf8_clean(f->command, strlen(f->command), &scratch, NULL);
	snprintf(s->command, sizeof(s->command), "%s", t ? t : "");
	prs_buf_release(&scratch);
	s->rate_hz = f->rate_hz;
	s->period_s = timed ? f->tick_s : 0;
	s->wall_known = timed && prs_phase1_measure(c, "wall", &s->wall_s);
	s->cpu_known = timed && prs_phase1_measure(c, "cpu", &s->cpu_s);
	s->cpu_kernel = f->have_proc;
	s->have_verdict = timed && c->verdict->have;
	if (s->have_verdict) {
		snprintf(s->verdict_id, sizeof(s->verdict_id), "%s",
			 prs_rule_def(c->verdict->primary.rule)->id);
		snprintf(s->verdict, sizeof(s->verdict), "%s", c->verdict->primary.label);
		snprintf(s->lever, sizeof(s->lever), "%s", c->verdict->lever);
		s->confidence = c->verdict->primary.confidence;
	}
}

/* The whole program's change in one measure (wall or CPU seconds): run noise only. */
static void total_of(const struct prs_diff *d, bool kb, double b, bool ka, double a,
		     struct prs_diff_total *t)
{
	t->known = kb && ka;
	if (!t->known)
		return;
	prs_change_of(&(struct prs_sampled){ 1, 1, b }, &(struct prs_sampled){ 1, 1, a }, d->run_noise,
		      &t->c);
	t->speedup = a > 0 ? b / a : 0;
}

struct side_facts {
	struct prs_facts facts;
	struct prs_verdict verdict;
	struct prs_phase_inputs inputs;
	struct prs_report_ctx c;
	bool built;
};

static int facts_of(const struct prs_profile *p, struct side_facts *s, struct prs_err *err)
{
	int rc = prs_facts_build(p, &s->facts, err);

	if (rc)
		return rc;
	s->built = true;
	prs_classify(&s->facts, &s->verdict);
	prs_phase_inputs_from_meta(p, &s->inputs);
	s->c = (struct prs_report_ctx){ p, &s->facts, &s->verdict, &s->inputs };
	return 0;
}

int prs_diff_compute(const struct prs_profile *before, const struct prs_profile *after,
		     const struct prs_diff_opts *o, struct prs_diff **out, struct prs_err *err)
{
	struct side_facts sf[2];
	struct prs_diff *d = calloc(1, sizeof(*d));
	int rc;

	*out = NULL;
	memset(sf, 0, sizeof(sf));
	if (!d)
		return prs_err_set(err, -ENOMEM, "diff: out of memory");
	d->view = o->view;
	d->run_noise = o->run_noise >= 0 ? o->run_noise : PRS_CHANGE_RUN_NOISE;
	if ((rc = facts_of(before, &sf[0], err)) || (rc = facts_of(after, &sf[1], err)))
		goto out;
	for (int k = 0; k < 2; k++)
		side_of(&sf[k].c, &d->side[k]);
	d->timed = d->side[0].period_s > 0 && d->side[1].period_s > 0;
	if ((rc = prs_diff_match_new(before, after, &d->match, err)) || (rc = rows_of(d, before, after, err)))
		goto out;
	total_of(d, d->side[0].wall_known, d->side[0].wall_s, d->side[1].wall_known,
		 d->side[1].wall_s, &d->wall);
	total_of(d, d->side[0].cpu_known, d->side[0].cpu_s, d->side[1].cpu_known, d->side[1].cpu_s,
		 &d->cpu);
	d->verdict_changed = d->side[0].have_verdict && d->side[1].have_verdict &&
			     strcmp(d->side[0].verdict, d->side[1].verdict) != 0;
	if ((rc = prs_phase4_top(&sf[1].c, &d->next, err)))
		goto out;
	d->have_next = d->next.n > 0 && d->next.total > 0;
out:
	for (int k = 0; k < 2; k++)
		if (sf[k].built)
			prs_facts_release(&sf[k].facts);
	if (rc)
		prs_diff_free(d);
	else
		*out = d;
	return rc;
}

void prs_diff_free(struct prs_diff *d)
{
	if (!d)
		return;
	prs_diff_match_free(d->match);
	for (size_t i = 0; i < d->nrows; i++)
		free((char *)d->rows[i].name); /* "name\0file": one block */
	free(d->rows);
	free(d);
}

void prs_diff_view_opts(struct prs_diff *d, int side, struct prs_view_opts *o)
{
	prs_diff_match_opts(d->match, side, o);
}
