/* SPDX-License-Identifier: MIT */
/*
 * `pyrsprof top`'s table: the samples a profile gains, summed per function and per line. It walks
 * the new samples itself rather than through a view (include/pyrsprof/view.h): a view is built
 * over the whole profile, and top must sum only what each second added.
 */
#include "cli/cli.h"
#include "cli/top.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/banned.h"

#define RAW_KEY (1ull << 63)

static void rows_init(struct cli_top_rows *r)
{
	memset(r, 0, sizeof(*r));
	prs_map64_init(&r->index);
}

static void rows_release(struct cli_top_rows *r)
{
	free(r->v);
	prs_map64_release(&r->index);
}

void cli_top_table_init(struct cli_top_table *t, const struct cli_top_filter *f)
{
	memset(t, 0, sizeof(*t));
	t->filter = *f;
	rows_init(&t->rows[0]);
	rows_init(&t->rows[1]);
}

void cli_top_table_release(struct cli_top_table *t)
{
	rows_release(&t->rows[0]);
	rows_release(&t->rows[1]);
}

/* The row of key (made for frame when new), or NULL on ENOMEM. */
static struct cli_top_row *row(struct cli_top_rows *r, uint64_t key, uint32_t frame)
{
	uint32_t i;
	int rc;

	/* room first, so that a key is never indexed without its row */
	if (prs_array_grow((void **)&r->v, &r->cap, r->n + 1, sizeof(*r->v)) != 0)
		return NULL;
	rc = prs_map64_intern(&r->index, key, (uint32_t)r->n, &i);
	if (rc < 0)
		return NULL;
	if (rc == 1) {
		memset(&r->v[r->n], 0, sizeof(r->v[0]));
		r->v[r->n].frame = frame;
		r->v[r->n].stamp = UINT32_MAX;
		r->n++;
	}
	return &r->v[i];
}

/* The key of frame f in the functions (name, file) and in the lines (the frame: the profile
 * interns named frames by kind, name, file and line). Raw frames stand for themselves. */
static uint64_t function_key(const struct prs_profile *p, uint32_t f)
{
	const struct prs_frame *fr = &p->frames[f];

	return fr->raw ? RAW_KEY | f : (uint64_t)fr->name << 32 | fr->file;
}

/* Counts frame f of the sample stamped t->stamp: own when leaf, total once per sample. */
static int count(struct cli_top_table *t, const struct prs_profile *p, uint32_t f, bool leaf)
{
	for (int m = 0; m < 2; m++) {
		struct cli_top_row *r = row(&t->rows[m], m ? f : function_key(p, f), f);

		if (!r)
			return -ENOMEM;
		if (leaf) {
			r->own++;
			r->own_now++;
		}
		if (r->stamp != t->stamp) {
			r->stamp = t->stamp;
			r->total++;
			r->total_now++;
		}
	}
	return 0;
}

static bool keep(const struct cli_top_filter *f, const struct prs_sample *s)
{
	int32_t pid = s->pid ? s->pid : f->root_pid;

	if (f->pid && pid != f->pid)
		return false;
	if (f->tid && s->tid != f->tid)
		return false;
	if (f->gil && !(s->flags & PRS_SAMPLE_GIL))
		return false;
	return f->idle || prs_sample_in_view(s, PRS_VIEW_CPU);
}

/* The frames of the sample's stack that the table shows, root first, into t->frames. */
static size_t frames_of(struct cli_top_table *t, const struct prs_profile *p, uint32_t stack)
{
	size_t n = prs_profile_stack_frames(p, stack, t->frames, PRS_MAX_STACK_FRAMES), k = 0;
	bool python = false;

	if (t->filter.native)
		return n;
	for (size_t i = 0; i < n && !python; i++)
		python = p->frames[t->frames[i]].kind == PRS_KIND_PYTHON;
	if (!python)
		return n;
	for (size_t i = 0; i < n; i++)
		if (p->frames[t->frames[i]].kind == PRS_KIND_PYTHON)
			t->frames[k++] = t->frames[i];
	return k;
}

int cli_top_table_add(struct cli_top_table *t, const struct prs_profile *p)
{
	for (int m = 0; m < 2; m++)
		for (size_t i = 0; i < t->rows[m].n; i++)
			t->rows[m].v[i].own_now = t->rows[m].v[i].total_now = 0;
	t->now = t->now_gil = t->now_gil_wait = t->now_active = 0;
	for (; t->next < p->nsamples; t->next++) {
		const struct prs_sample *s = &p->samples[t->next];
		size_t n;

		if (!keep(&t->filter, s) || s->stack >= p->nstacks)
			continue;
		t->now++;
		t->total++;
		t->now_gil += (s->flags & PRS_SAMPLE_GIL) != 0;
		t->now_gil_wait += (s->flags & PRS_SAMPLE_GIL_WAIT) != 0;
		t->now_active += prs_sample_in_view(s, PRS_VIEW_CPU);
		t->stamp++;
		n = frames_of(t, p, s->stack);
		for (size_t i = 0; i < n; i++)
			if (count(t, p, t->frames[i], i + 1 == n) != 0)
				return -ENOMEM;
	}
	return 0;
}

void cli_top_table_reset(struct cli_top_table *t)
{
	for (int m = 0; m < 2; m++)
		for (size_t i = 0; i < t->rows[m].n; i++) {
			struct cli_top_row *r = &t->rows[m].v[i];

			r->own = r->total = r->own_now = r->total_now = 0;
		}
	t->total = t->now = t->now_gil = t->now_gil_wait = t->now_active = 0;
}

/* ---- writing ---- */

struct order {
	double key;
	uint32_t row;
};

static int by_key(const void *a, const void *b)
{
	const struct order *x = a, *y = b;

	if (x->key != y->key)
		return x->key > y->key ? -1 : 1;
	return x->row < y->row ? -1 : x->row > y->row;
}

static double sort_key(const struct cli_top_row *r, enum cli_top_sort sort)
{
	switch (sort) {
	case TOP_SORT_OWN_PCT:
		return (double)r->own_now + (double)r->own * 1e-12; /* ties: the longer own time */
	case TOP_SORT_TOTAL_PCT:
		return (double)r->total_now + (double)r->total * 1e-12;
	case TOP_SORT_OWN_TIME:
		return (double)r->own;
	case TOP_SORT_TOTAL_TIME:
		return (double)r->total;
	}
	return 0;
}

/* Writes s (from the target) with control characters (C0, DEL, C1) as '?', at most max bytes
 * (0: all). */
static size_t put_clean(FILE *f, const char *s, size_t max)
{
	size_t n = 0, k;

	for (; *s && (!max || n < max); s += k ? k : 1, n++) {
		k = cli_control_len(s);
		fputc(k ? '?' : *s, f);
	}
	return n;
}

static const char *base_name(const char *path)
{
	const char *b = strrchr(path, '/');

	return b ? b + 1 : path;
}

/* "name (file:line)", "name (file)" or "name" of row r into buf. */
static void row_label(const struct prs_profile *p, const struct cli_top_row *r, bool lines, char *buf,
		      size_t size)
{
	const struct prs_frame *fr = &p->frames[r->frame];
	char name[512];
	const char *file = fr->file && fr->file < p->nstrings ? p->strings[fr->file] : "";

	prs_profile_frame_label(p, r->frame, name, sizeof(name));
	if (!file[0])
		snprintf(buf, size, "%s", name);
	else if (lines && fr->line)
		snprintf(buf, size, "%s (%s:%u)", name, base_name(file), fr->line);
	else
		snprintf(buf, size, "%s (%s)", name, base_name(file));
}

static void write_row(const struct cli_top_table *t, const struct prs_profile *p, const struct cli_top_row *r,
		      const struct cli_top_view *v, FILE *f)
{
	double period = 1.0 / v->rate_hz;
	char label[1100];
	int used;

	row_label(p, r, v->lines, label, sizeof(label));
	uint64_t own = v->cumulative ? r->own : r->own_now, total = v->cumulative ? r->total : r->total_now;
	uint64_t all = v->cumulative ? t->total : t->now;

	used = fprintf(f, "%6.1f%% %6.1f%% %9.2fs %9.2fs  ", all ? 100.0 * (double)own / (double)all : 0.0,
		       all ? 100.0 * (double)total / (double)all : 0.0, (double)r->own * period,
		       (double)r->total * period);
	put_clean(f, label, v->width > used ? (size_t)(v->width - used) : v->width ? 1 : 0);
	fputs(v->eol, f);
}

void cli_top_table_write(struct cli_top_table *t, const struct prs_profile *p, const struct cli_top_view *v,
			 FILE *f)
{
	const struct cli_top_rows *rows = &t->rows[v->lines ? 1 : 0];
	struct order *o = rows->n ? malloc(rows->n * sizeof(*o)) : NULL;
	size_t n = 0;

	fprintf(f, "%7s %7s %10s %10s  %s%s", v->sort == TOP_SORT_OWN_PCT ? "[%Own]" : "%Own",
		v->sort == TOP_SORT_TOTAL_PCT ? "[%Total]" : "%Total",
		v->sort == TOP_SORT_OWN_TIME ? "[OwnTime]" : "OwnTime",
		v->sort == TOP_SORT_TOTAL_TIME ? "[TotalTime]" : "TotalTime",
		v->lines ? "Function (file:line)" : "Function (file)", v->eol);
	if (!o)
		return;
	for (uint32_t i = 0; i < rows->n; i++)
		if (rows->v[i].total || rows->v[i].total_now)
			o[n++] = (struct order){ sort_key(&rows->v[i], v->sort), i };
	qsort(o, n, sizeof(*o), by_key);
	for (size_t k = 0; k < n && (!v->rows || k < (size_t)v->rows); k++)
		write_row(t, p, &rows->v[o[v->reverse ? n - 1 - k : k].row], v, f);
	free(o);
}
