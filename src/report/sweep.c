/* SPDX-License-Identifier: MIT */
/*
 * `pyrsprof sweep`'s numbers: the log-log least-squares fit, the names of orders, the per-value
 * medians and spreads, the verdict along the sweep and the reading of a recording's phase1.json.
 * The files are written by sweep_write.c (Markdown, JSON) and sweep_svg.c (the plot).
 */
#include "pyrsprof/sweep.h"
#include "pyrsprof/export.h"
#include "report/sweep-internal.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util/banned.h"

#define PHASE1_MAX_BYTES (16u << 20) /* a phase1.json larger than this is not one of ours */

/* ---- the fit ---- */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Distinct values among x[0..n) (exact comparison). Allocates a sorted copy; 0 on ENOMEM. */
static size_t count_distinct(const double *x, size_t n)
{
	double *c = malloc(n * sizeof(*c));
	size_t d = 0;

	if (!c)
		return 0;
	memcpy(c, x, n * sizeof(*c));
	qsort(c, n, sizeof(*c), cmp_double);
	for (size_t i = 0; i < n; i++)
		d += i == 0 || c[i] != c[i - 1];
	free(c);
	return d;
}

int prs_fit_loglog(const double *x, const double *y, size_t n, struct prs_fit *f)
{
	double mx = 0, my = 0, sxx = 0, sxy = 0, syy = 0, ssr = 0;

	memset(f, 0, sizeof(*f));
	f->n = n;
	f->exponent = f->coef = f->r2 = NAN;
	for (size_t i = 0; i < n; i++)
		if (!(x[i] > 0) || !(y[i] > 0) || !isfinite(x[i]) || !isfinite(y[i]))
			return f->status = -EDOM;
	f->distinct = n ? count_distinct(x, n) : 0;
	if (f->distinct < 2)
		return f->status = -EINVAL;
	for (size_t i = 0; i < n; i++) {
		mx += log(x[i]);
		my += log(y[i]);
	}
	mx /= (double)n;
	my /= (double)n;
	/* centred sums: no cancellation when the logs are large and close together */
	for (size_t i = 0; i < n; i++) {
		double dx = log(x[i]) - mx, dy = log(y[i]) - my;

		sxx += dx * dx;
		sxy += dx * dy;
		syy += dy * dy;
	}
	f->exponent = sxy / sxx;
	f->coef = exp(my - f->exponent * mx);
	for (size_t i = 0; i < n; i++) {
		double r = log(y[i]) - (my + f->exponent * (log(x[i]) - mx));

		ssr += r * r;
	}
	/* every y equal: the flat line through them is exact */
	f->r2 = syy > 0 ? 1 - ssr / syy : 1;
	if (f->r2 < 0)
		f->r2 = 0;
	f->has_r2 = f->distinct >= 3;
	return 0;
}

/* ---- orders ---- */

static const struct {
	double exponent;
	const char *fmt; /* %s = the dimension */
} orders[] = {
	{ 0, "O(1)" }, { 0.5, "O(√%s)" }, { 1, "O(%s)" }, { 2, "O(%s²)" }, { 3, "O(%s³)" },
};

/* The index of the common order that names f, or -1. */
static int order_of(const struct prs_fit *f)
{
	if (f->status != 0)
		return -1;
	for (size_t i = 0; i < sizeof(orders) / sizeof(orders[0]); i++) {
		if (fabs(f->exponent - orders[i].exponent) > PRS_SWEEP_ORDER_TOL)
			continue;
		/* A flat line is O(1) even when noise leaves nothing for R² to explain. */
		if (orders[i].exponent != 0 && f->has_r2 && f->r2 < PRS_SWEEP_MIN_R2)
			return -1;
		return (int)i;
	}
	return -1;
}

bool prs_fit_order(const struct prs_fit *f, const char *dim, char *buf, size_t size, double *nominal)
{
	int i = order_of(f);

	if (nominal)
		*nominal = i >= 0 ? orders[i].exponent : NAN;
	if (size == 0)
		return i >= 0;
	buf[0] = '\0';
	if (f->status != 0)
		return false;
	if (i < 0) {
		snprintf(buf, size, "%s^%.2f", dim, f->exponent);
		return false;
	}
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
	snprintf(buf, size, orders[i].fmt, dim);
#pragma GCC diagnostic pop
	return true;
}

/* R² shown to 3 decimals, cut rather than rounded so that an imperfect fit never reads 1.000. */
static double r2_shown(double r2)
{
	return r2 >= 1 ? 1 : floor(r2 * 1000) / 1000;
}

const char *prs_fit_text(const struct prs_fit *f, const char *metric, const char *dim, char *buf,
			 size_t size)
{
	char order[64], quality[48];
	bool named;
	int k;

	if (f->status == -EDOM) {
		snprintf(buf, size, "%s: no fit (a time of 0 has no place on a log scale)", metric);
		return buf;
	}
	if (f->status != 0) {
		snprintf(buf, size, "%s: no fit (needs 2 distinct values of %s, has %zu)", metric, dim,
			 f->distinct);
		return buf;
	}
	named = prs_fit_order(f, dim, order, sizeof(order), NULL);
	if (f->has_r2)
		snprintf(quality, sizeof(quality), "R² %.3f", r2_shown(f->r2));
	else
		snprintf(quality, sizeof(quality), "2 values, no R²");
	k = snprintf(buf, size, "%s ∝ %s^%.2f (%s): ", metric, dim, f->exponent, quality);
	if (k < 0 || (size_t)k >= size)
		return buf;
	if (named)
		snprintf(buf + k, size - (size_t)k, "%s along %s", order, dim);
	else if (f->has_r2 && f->r2 < PRS_SWEEP_MIN_R2)
		snprintf(buf + k, size - (size_t)k, "poor fit, no order named");
	else
		snprintf(buf + k, size - (size_t)k, "%s along %s, no common order within ±%g", order,
			 dim, PRS_SWEEP_ORDER_TOL);
	return buf;
}

/* ---- the sweep ---- */

int prs_sweep_init(struct prs_sweep *s, size_t npoints, size_t repeat)
{
	memset(s, 0, sizeof(*s));
	if (npoints == 0 || npoints > PRS_SWEEP_MAX_VALUES || repeat == 0 || repeat > PRS_SWEEP_MAX_REPEAT)
		return -EINVAL;
	s->points = calloc(npoints, sizeof(*s->points));
	if (!s->points)
		return -ENOMEM;
	s->npoints = npoints;
	s->repeat = repeat;
	for (size_t i = 0; i < npoints; i++) {
		s->points[i].runs = calloc(repeat, sizeof(*s->points[i].runs));
		if (!s->points[i].runs)
			return -ENOMEM;
		for (size_t r = 0; r < repeat; r++)
			s->points[i].runs[r].status = -1;
	}
	return 0;
}

void prs_sweep_release(struct prs_sweep *s)
{
	for (size_t i = 0; s->points && i < s->npoints; i++)
		free(s->points[i].runs);
	free(s->points);
	s->points = NULL;
	s->npoints = 0;
}

int prs_sweep_run_dir(const struct prs_sweep *s, size_t point, size_t run, char *buf, size_t size)
{
	return snprintf(buf, size, "%s=%s/run%zu", s->dim, s->points[point].text, run + 1);
}

bool prs_sweep_run_ok(const struct prs_sweep_run *r)
{
	return r->status == 0 && r->measured;
}

/* Median (the mean of the middle two for an even count), min and max of v[0..n); sorts v. */
static void spread_of(double *v, size_t n, struct prs_spread *out)
{
	memset(out, 0, sizeof(*out));
	out->n = n;
	if (n == 0)
		return;
	qsort(v, n, sizeof(*v), cmp_double);
	out->min = v[0];
	out->max = v[n - 1];
	out->median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The verdict most runs of p that count agree on (the first seen among equals), or "". */
static const char *point_verdict(const struct prs_sweep_point *p, size_t repeat)
{
	const char *best = "";
	size_t best_n = 0;

	for (size_t i = 0; i < repeat; i++) {
		const char *v = p->runs[i].verdict;
		size_t n = 0;

		if (!prs_sweep_run_ok(&p->runs[i]) || !v[0])
			continue;
		for (size_t j = 0; j < repeat; j++)
			n += prs_sweep_run_ok(&p->runs[j]) && strcmp(p->runs[j].verdict, v) == 0;
		if (n > best_n)
			best = v, best_n = n;
	}
	return best;
}

static void summarize_point(struct prs_sweep_point *p, size_t repeat)
{
	double wall[PRS_SWEEP_MAX_REPEAT], cpu[PRS_SWEEP_MAX_REPEAT], rss[PRS_SWEEP_MAX_REPEAT];
	size_t n = 0;

	for (size_t i = 0; i < repeat; i++) {
		const struct prs_sweep_run *r = &p->runs[i];

		if (!prs_sweep_run_ok(r))
			continue;
		wall[n] = r->wall_s;
		cpu[n] = r->user_s + r->sys_s;
		rss[n] = (double)r->rss_kb;
		n++;
	}
	p->ok = n;
	spread_of(wall, n, &p->wall);
	spread_of(cpu, n, &p->cpu);
	spread_of(rss, n, &p->rss_kb);
	p->verdict = point_verdict(p, repeat);
}

void prs_sweep_summarize(struct prs_sweep *s)
{
	double x[PRS_SWEEP_MAX_VALUES], y[PRS_SWEEP_METRICS][PRS_SWEEP_MAX_VALUES];
	size_t n = 0;

	s->any_verdict = false;
	for (size_t i = 0; i < s->npoints; i++) {
		struct prs_sweep_point *p = &s->points[i];

		summarize_point(p, s->repeat);
		s->any_verdict |= p->verdict[0] != '\0';
		if (p->ok == 0)
			continue;
		x[n] = p->value;
		y[PRS_SWEEP_WALL][n] = p->wall.min; /* best of K: see sweep.h */
		y[PRS_SWEEP_CPU][n] = p->cpu.min;
		n++;
	}
	for (int m = 0; m < PRS_SWEEP_METRICS; m++)
		prs_fit_loglog(x, y[m], n, &s->fit[m]);
}

bool prs_sweep_busy(const struct prs_sweep *s)
{
	return s->cpus > 0 && fmax(s->load_start, s->load_end) > s->cpus;
}

double prs_sweep_too_short(const struct prs_sweep *s)
{
	double shortest = INFINITY;

	for (size_t i = 0; i < s->npoints; i++)
		if (s->points[i].ok)
			shortest = fmin(shortest, s->points[i].wall.min);
	return shortest < PRS_SWEEP_SHORT_S ? shortest : 0;
}

bool prs_sweep_next_change(const struct prs_sweep *s, size_t *from, size_t *to)
{
	size_t prev = SIZE_MAX;

	for (size_t i = *from; i < s->npoints; i++) {
		const char *v = s->points[i].verdict;

		if (!v || !v[0])
			continue;
		if (prev != SIZE_MAX && strcmp(s->points[prev].verdict, v) != 0) {
			*from = prev;
			*to = i;
			return true;
		}
		prev = i;
	}
	return false;
}

/* ---- phase1.json ---- */

/* Copies s into buf (size > 0): cut at a UTF-8 boundary, control characters made spaces. */
static void copy_clean(char *buf, size_t size, const char *s)
{
	size_t n = strlen(s);

	if (n >= size) {
		n = size - 1;
		while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
			n--; /* s[n] would continue a sequence cut short */
	}
	for (size_t i = 0; i < n; i++)
		buf[i] = (unsigned char)s[i] < 0x20 || s[i] == 0x7f ? ' ' : s[i];
	buf[n] = '\0';
}

int prs_sweep_verdict_read(const char *path, char *buf, size_t size)
{
	/* pyrsprof's phase1.json: verdict.label ("CPU-bound (native code)"), verdict.id ("cpu") */
	static const char *const keys[] = { "label", "bound", "id", "name", "kind" };
	json_error_t jerr;
	json_t *root, *v;
	const char *text = NULL;
	struct stat st;
	FILE *f;

	if (size == 0)
		return -EINVAL;
	buf[0] = '\0';
	f = fopen(path, "re");
	if (!f)
		return errno == ENOENT ? -ENOENT : -EIO;
	/* jansson checks UTF-8 and nesting depth; the size is ours to bound */
	if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > PHASE1_MAX_BYTES) {
		fclose(f);
		return -EINVAL;
	}
	root = json_loadf(f, JSON_REJECT_DUPLICATES, &jerr);
	fclose(f);
	if (!root)
		return -EINVAL;
	v = json_object_get(root, "verdict");
	if (json_is_string(v))
		text = json_string_value(v);
	for (size_t i = 0; !text && json_is_object(v) && i < sizeof(keys) / sizeof(keys[0]); i++)
		if (json_is_string(json_object_get(v, keys[i])))
			text = json_string_value(json_object_get(v, keys[i]));
	if (text && text[0])
		copy_clean(buf, size, text);
	json_decref(root);
	return buf[0] ? 0 : -EINVAL;
}

/* ---- texts shared by the writers ---- */

/* True if a shell would take arg as one word unchanged. */
static bool shell_plain(const char *arg)
{
	if (!arg[0])
		return false;
	for (const char *p = arg; *p; p++)
		if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./=:,@%+-{}",
			    *p) && !((unsigned char)*p & 0x80))
			return false;
	return true;
}

const char *prs_sweep_command(const struct prs_sweep *s, struct prs_buf *b)
{
	struct prs_buf clean;
	const char *t;
	size_t len;
	int rc = 0;

	prs_buf_reset(b);
	for (size_t i = 0; s->argv && s->argv[i] && rc == 0; i++) {
		const char *a = s->argv[i];

		if (i)
			rc = prs_buf_putc(b, ' ');
		if (shell_plain(a)) {
			rc = rc ? rc : prs_buf_append(b, a, strlen(a));
			continue;
		}
		rc = rc ? rc : prs_buf_putc(b, '\'');
		for (; *a && rc == 0; a++)
			rc = *a == '\'' ? prs_buf_append(b, "'\\''", 4) : prs_buf_putc(b, (uint8_t)*a);
		rc = rc ? rc : prs_buf_putc(b, '\'');
	}
	if (rc || prs_buf_putc(b, '\0'))
		return NULL;
	prs_buf_init(&clean);
	t = prs_utf8_clean((const char *)b->data, b->len - 1, &clean, &len);
	if (t && t != (const char *)b->data) {
		prs_buf_reset(b);
		if (prs_buf_append(b, t, len + 1))
			t = NULL;
	}
	prs_buf_release(&clean);
	return t ? (const char *)b->data : NULL;
}

const char *prs_sweep_num(double v, char *buf, size_t size)
{
	char tmp[48], *e;
	const char *exp;
	bool neg;

	if (v == floor(v) && fabs(v) < 1e6) {
		snprintf(buf, size, "%.0f", v);
		return buf;
	}
	snprintf(tmp, sizeof(tmp), "%.3g", v);
	e = strchr(tmp, 'e');
	if (!e) {
		snprintf(buf, size, "%s", tmp);
		return buf;
	}
	/* "1.2e+08" -> "1.2e8", "5e-05" -> "5e-5" */
	exp = e + 1;
	neg = *exp == '-';
	if (*exp == '+' || *exp == '-')
		exp++;
	while (exp[0] == '0' && exp[1])
		exp++;
	*e = '\0';
	snprintf(buf, size, "%se%s%s", tmp, neg ? "-" : "", exp);
	return buf;
}
