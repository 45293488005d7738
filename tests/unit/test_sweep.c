/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of `pyrsprof sweep`'s numbers and files: the log-log fit on exact power laws and on
 * data whose R² is worked out by hand (27/28), degenerate inputs (no point, one point, equal
 * values, zeros, negatives, NaN, duplicates), the naming of orders and its tolerance, the
 * sentences, per-value medians and spreads, the verdict along a sweep, phase1.json reading
 * (hostile content included), and the three writers with a hostile command.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pyrsprof/sweep.h"
#include "report/report-internal.h"
#include "report/xml-internal.h"
#include "report/sweep-internal.h"

#include "util/banned.h"

#define EPS 1e-9

/* ---- the fit ---- */

Test(sweep_fit, exact_power_laws)
{
	const double x[] = { 10, 100, 1000, 10000 };
	const double exps[] = { 0, 0.5, 1, 2, 3, -1 };

	for (size_t k = 0; k < sizeof(exps) / sizeof(exps[0]); k++) {
		double y[4];
		struct prs_fit f;

		for (int i = 0; i < 4; i++)
			y[i] = 3.5 * pow(x[i], exps[k]);
		cr_assert_eq(prs_fit_loglog(x, y, 4, &f), 0);
		cr_assert_float_eq(f.exponent, exps[k], EPS, "exponent %g: got %.12g", exps[k], f.exponent);
		cr_assert_float_eq(f.coef, 3.5, 1e-6);
		cr_assert_float_eq(f.r2, 1, EPS);
		cr_assert(f.has_r2);
		cr_assert_eq(f.n, 4);
		cr_assert_eq(f.distinct, 4);
	}
}

Test(sweep_fit, r2_worked_by_hand)
{
	/* log x = 0, 1, 2; log y = 0, 1, 3: slope Sxy/Sxx = 3/2, SS_res = 1/6, SS_tot = 14/3, so
	 * R² = 1 - (1/6)/(14/3) = 27/28; intercept 4/3 - 3/2 = -1/6. */
	const double x[] = { 1, M_E, M_E * M_E }, y[] = { 1, M_E, exp(3) };
	struct prs_fit f;

	cr_assert_eq(prs_fit_loglog(x, y, 3, &f), 0);
	cr_assert_float_eq(f.exponent, 1.5, EPS);
	cr_assert_float_eq(f.r2, 27.0 / 28.0, EPS);
	cr_assert_float_eq(f.coef, exp(-1.0 / 6), EPS);
	cr_assert(f.has_r2);
}

Test(sweep_fit, two_values_have_no_r2)
{
	const double x[] = { 1000, 4000 }, y[] = { 0.1, 1.6 };
	struct prs_fit f;
	char buf[256];

	cr_assert_eq(prs_fit_loglog(x, y, 2, &f), 0);
	cr_assert_float_eq(f.exponent, 2, EPS);
	cr_assert_not(f.has_r2);
	cr_assert_str_eq(prs_fit_text(&f, "wall", "n", buf, sizeof(buf)),
			 "wall ∝ n^2.00 (2 values, no R²): O(n²) along n");
}

Test(sweep_fit, duplicates_count_once_for_r2)
{
	const double x[] = { 10, 10, 100, 100 }, y[] = { 1, 1.2, 10, 12 };
	struct prs_fit f;

	cr_assert_eq(prs_fit_loglog(x, y, 4, &f), 0);
	cr_assert_eq(f.distinct, 2);
	cr_assert_not(f.has_r2);
	cr_assert_float_eq(f.exponent, 1, EPS);
}

Test(sweep_fit, degenerate_inputs)
{
	const double one[] = { 5 }, same[] = { 7, 7, 7 }, y3[] = { 1, 2, 3 };
	const double zero_x[] = { 0, 1, 2 }, neg_y[] = { 1, -2, 3 }, nan_y[] = { 1, NAN, 3 };
	const double x3[] = { 1, 2, 3 }, zero_y[] = { 0, 1, 2 }, inf_x[] = { 1, INFINITY, 3 };
	struct prs_fit f;
	char buf[256];

	cr_assert_eq(prs_fit_loglog(NULL, NULL, 0, &f), -EINVAL);
	cr_assert_eq(f.distinct, 0);
	cr_assert_eq(prs_fit_loglog(one, one, 1, &f), -EINVAL);
	cr_assert_eq(f.distinct, 1);
	cr_assert(isnan(f.exponent));
	cr_assert_str_eq(prs_fit_text(&f, "wall", "n", buf, sizeof(buf)),
			 "wall: no fit (needs 2 distinct values of n, has 1)");
	cr_assert_eq(prs_fit_loglog(same, y3, 3, &f), -EINVAL, "equal values give no slope");
	cr_assert_eq(f.distinct, 1);
	cr_assert_eq(prs_fit_loglog(zero_x, y3, 3, &f), -EDOM);
	cr_assert_eq(prs_fit_loglog(x3, zero_y, 3, &f), -EDOM);
	cr_assert_str_eq(prs_fit_text(&f, "CPU", "n", buf, sizeof(buf)),
			 "CPU: no fit (a time of 0 has no place on a log scale)");
	cr_assert_eq(prs_fit_loglog(x3, neg_y, 3, &f), -EDOM);
	cr_assert_eq(prs_fit_loglog(x3, nan_y, 3, &f), -EDOM);
	cr_assert_eq(prs_fit_loglog(inf_x, y3, 3, &f), -EDOM);
	cr_assert_not(prs_fit_order(&f, "n", buf, sizeof(buf), NULL));
	cr_assert_str_eq(buf, "");
}

Test(sweep_fit, equal_times_are_flat_and_exact)
{
	const double x[] = { 1, 10, 100 }, y[] = { 0.3, 0.3, 0.3 };
	struct prs_fit f;
	char buf[256];

	cr_assert_eq(prs_fit_loglog(x, y, 3, &f), 0);
	cr_assert_float_eq(f.exponent, 0, EPS);
	cr_assert_eq(f.r2, 1);
	cr_assert_str_eq(prs_fit_text(&f, "wall", "n", buf, sizeof(buf)),
			 "wall ∝ n^0.00 (R² 1.000): O(1) along n");
}

/* ---- orders and sentences ---- */

static struct prs_fit fit_of(double exponent, double r2, bool has_r2)
{
	struct prs_fit f = { 0 };

	f.n = f.distinct = has_r2 ? 5 : 2;
	f.exponent = exponent;
	f.coef = 1;
	f.r2 = r2;
	f.has_r2 = has_r2;
	return f;
}

static void check_order(double e, double r2, const char *dim, const char *want, double nominal)
{
	struct prs_fit f = fit_of(e, r2, true);
	char buf[64];
	double nom;
	bool named = prs_fit_order(&f, dim, buf, sizeof(buf), &nom);

	cr_assert_str_eq(buf, want, "exponent %g R² %g: %s, not %s", e, r2, buf, want);
	cr_assert_eq(named, !isnan(nominal), "exponent %g", e);
	if (named)
		cr_assert_eq(nom, nominal);
	else
		cr_assert(isnan(nom));
}

Test(sweep_order, names_within_the_tolerance)
{
	check_order(1.98, 0.999, "n", "O(n²)", 2);
	check_order(2.09, 0.999, "n", "O(n²)", 2);
	check_order(1.89, 0.999, "n", "n^1.89", NAN);
	check_order(1.45, 0.998, "n", "n^1.45", NAN);
	check_order(1.09, 0.99, "n", "O(n)", 1);
	check_order(1.11, 0.99, "n", "n^1.11", NAN);
	check_order(0.93, 0.99, "rows", "O(rows)", 1);
	check_order(0.52, 0.95, "n", "O(√n)", 0.5);
	check_order(3.05, 0.97, "k", "O(k³)", 3);
	check_order(-0.6, 0.99, "n", "n^-0.60", NAN);
	/* a flat line is O(1) whatever R² (noise is all there is to explain) */
	check_order(0.04, 0.05, "n", "O(1)", 0);
	check_order(-0.08, 0.3, "n", "O(1)", 0);
	/* a poor fit names nothing */
	check_order(2.0, 0.5, "n", "n^2.00", NAN);
	check_order(1.0, PRS_SWEEP_MIN_R2, "n", "O(n)", 1);
}

Test(sweep_order, sentences)
{
	struct prs_fit f = fit_of(1.98, 0.9995, true);
	char buf[256];

	cr_assert_str_eq(prs_fit_text(&f, "wall", "n", buf, sizeof(buf)),
			 "wall ∝ n^1.98 (R² 0.999): O(n²) along n");
	f = fit_of(1.45, 0.998, true);
	cr_assert_str_eq(prs_fit_text(&f, "wall", "n", buf, sizeof(buf)),
			 "wall ∝ n^1.45 (R² 0.998): n^1.45 along n, no common order within ±0.1");
	f = fit_of(1.3, 0.62, true);
	cr_assert_str_eq(prs_fit_text(&f, "CPU", "size", buf, sizeof(buf)),
			 "CPU ∝ size^1.30 (R² 0.620): poor fit, no order named");
	/* a short buffer is cut, never overrun */
	cr_assert_eq(strlen(prs_fit_text(&f, "CPU", "size", buf, 10)), 9);
}

/* ---- the sweep ---- */

static void set_run(struct prs_sweep_run *r, int status, double wall, double cpu, uint64_t rss,
		    const char *verdict)
{
	r->done = true;
	r->status = status;
	r->measured = status == 0;
	r->wall_s = wall;
	r->user_s = cpu * 0.75;
	r->sys_s = cpu * 0.25;
	r->rss_kb = rss;
	snprintf(r->verdict, sizeof(r->verdict), "%s", verdict);
	if (status)
		snprintf(r->problem, sizeof(r->problem), "exit %d", status);
}

static const char *hostile_argv[] = { "./prog", "--n", "{n}", "<script>alert(1)</script>", "a|b`c`&amp;",
				"it's", NULL };

/* 4 values x 3 runs: value 8 has one failed run, value 16 all failed. wall = 0.001 n²
 * (runs at 0.9x, 1x, 1.2x), cpu = 0.0005 n². */
static void make_sweep(struct prs_sweep *s)
{
	const double v[] = { 2, 4, 8, 16 };

	cr_assert_eq(prs_sweep_init(s, 4, 3), 0);
	snprintf(s->dim, sizeof(s->dim), "n");
	s->argv = hostile_argv;
	s->rate_hz = 100;
	for (size_t i = 0; i < 4; i++) {
		struct prs_sweep_point *p = &s->points[i];
		double w = 0.001 * v[i] * v[i];

		p->value = v[i];
		snprintf(p->text, sizeof(p->text), "%.0f", v[i]);
		set_run(&p->runs[0], 0, w * 0.9, w / 2, 1000 + i, i < 2 ? "CPU-bound" : "memory-bound");
		set_run(&p->runs[1], 0, w, w / 2, 2000, i < 2 ? "CPU-bound" : "IO-bound");
		set_run(&p->runs[2], 0, w * 1.2, w / 2, 3000, i < 2 ? "" : "memory-bound");
	}
	set_run(&s->points[2].runs[1], 3, 0, 0, 0, "");
	for (int r = 0; r < 3; r++)
		set_run(&s->points[3].runs[r], 1, 0, 0, 0, "");
	prs_sweep_summarize(s);
}

Test(sweep, medians_spreads_and_fits)
{
	struct prs_sweep s;
	const struct prs_sweep_point *p;

	make_sweep(&s);
	p = &s.points[0];
	cr_assert_eq(p->ok, 3);
	cr_assert_float_eq(p->wall.median, 0.004, EPS);
	cr_assert_float_eq(p->wall.min, 0.0036, EPS);
	cr_assert_float_eq(p->wall.max, 0.0048, EPS);
	cr_assert_float_eq(p->cpu.median, 0.002, EPS);
	cr_assert_float_eq(p->rss_kb.median, 2000, EPS);
	cr_assert_float_eq(p->rss_kb.max, 3000, EPS);
	cr_assert_str_eq(p->verdict, "CPU-bound");
	p = &s.points[2]; /* runs 0.9x and 1.2x: an even count, the mean of the two */
	cr_assert_eq(p->ok, 2);
	cr_assert_float_eq(p->wall.median, 0.064 * 1.05, EPS);
	cr_assert_str_eq(p->verdict, "memory-bound");
	cr_assert_eq(s.points[3].ok, 0);
	cr_assert_eq(s.points[3].wall.n, 0);
	cr_assert_eq(s.fit[PRS_SWEEP_WALL].n, 3, "the value with no run ok is left out");
	cr_assert_eq(s.fit[PRS_SWEEP_CPU].status, 0);
	cr_assert_float_eq(s.fit[PRS_SWEEP_CPU].exponent, 2, EPS);
	cr_assert_float_eq(s.fit[PRS_SWEEP_CPU].r2, 1, EPS);
	/* fitted on the fastest runs (0.9x everywhere): exact, whatever the slower ones did */
	cr_assert_float_eq(s.fit[PRS_SWEEP_WALL].exponent, 2, EPS);
	cr_assert_float_eq(s.fit[PRS_SWEEP_WALL].coef, 0.0009, EPS);
	cr_assert(s.any_verdict);
	/* the fastest fitted run: 0.9 * 0.001 * 2² s */
	cr_assert_float_eq(prs_sweep_too_short(&s), 0.0036, EPS);
	s.points[0].runs[0].wall_s = s.points[0].runs[1].wall_s = s.points[0].runs[2].wall_s = 0.2;
	s.points[1].runs[0].wall_s = s.points[1].runs[1].wall_s = s.points[1].runs[2].wall_s = 0.06;
	prs_sweep_summarize(&s);
	cr_assert_float_eq(prs_sweep_too_short(&s), 0, EPS, "0.0576 s, the next fastest, is long enough");
	prs_sweep_release(&s);
}

Test(sweep, verdict_changes)
{
	struct prs_sweep s;
	const char *v[] = { "A", "A", "", "B", "B", "A" };
	size_t from = 0, to = 0;

	cr_assert_eq(prs_sweep_init(&s, 6, 1), 0);
	for (size_t i = 0; i < 6; i++) {
		s.points[i].value = (double)(i + 1);
		set_run(&s.points[i].runs[0], 0, 1, 1, 1, v[i]);
	}
	prs_sweep_summarize(&s);
	cr_assert(prs_sweep_next_change(&s, &from, &to));
	cr_assert_eq(from, 1);
	cr_assert_eq(to, 3, "the value without a verdict is skipped");
	from = to;
	cr_assert(prs_sweep_next_change(&s, &from, &to));
	cr_assert_eq(from, 4);
	cr_assert_eq(to, 5);
	from = to;
	cr_assert_not(prs_sweep_next_change(&s, &from, &to));
	prs_sweep_release(&s);
}

Test(sweep, init_bounds)
{
	struct prs_sweep s;

	cr_assert_eq(prs_sweep_init(&s, 0, 1), -EINVAL);
	prs_sweep_release(&s);
	cr_assert_eq(prs_sweep_init(&s, PRS_SWEEP_MAX_VALUES + 1, 1), -EINVAL);
	prs_sweep_release(&s);
	cr_assert_eq(prs_sweep_init(&s, 2, PRS_SWEEP_MAX_REPEAT + 1), -EINVAL);
	prs_sweep_release(&s);
	cr_assert_eq(prs_sweep_init(&s, 2, 2), 0);
	cr_assert_eq(s.points[1].runs[1].status, -1);
	cr_assert_not(s.points[1].runs[1].done);
	prs_sweep_release(&s);
}

/* ---- phase1.json ---- */

static char *write_tmp(const char *text)
{
	static char path[64];
	int fd;

	snprintf(path, sizeof(path), "/tmp/prs-phase1-XXXXXX");
	fd = mkstemp(path);
	cr_assert(fd >= 0);
	cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	return path;
}

static int verdict_of(const char *text, char *buf, size_t size)
{
	char *path = write_tmp(text);
	int rc = prs_sweep_verdict_read(path, buf, size);

	unlink(path);
	return rc;
}

Test(sweep_verdict, read)
{
	char buf[PRS_SWEEP_VERDICT_MAX], small[8];

	cr_assert_eq(verdict_of("{\"verdict\": \"CPU-bound\"}", buf, sizeof(buf)), 0);
	cr_assert_str_eq(buf, "CPU-bound");
	cr_assert_eq(verdict_of("{\"verdict\": {\"id\": \"io\", \"bound\": \"IO-bound\"}}", buf,
				sizeof(buf)), 0);
	cr_assert_str_eq(buf, "IO-bound");
	/* the shape of pyrsprof's own phase1.json (docs/phase1.schema.json): the label counts */
	cr_assert_eq(verdict_of("{\"version\": 1, \"verdict\": {\"id\": \"cpu\", \"label\": "
				"\"CPU-bound (native code)\", \"confidence\": \"high\", \"also\": []}}",
				buf, sizeof(buf)), 0);
	cr_assert_str_eq(buf, "CPU-bound (native code)");
	cr_assert_eq(verdict_of("{\"verdict\": null}", buf, sizeof(buf)), -EINVAL, "no samples, no verdict");
	cr_assert_eq(verdict_of("{\"verdict\": {\"id\": \"gil\"}}", buf, sizeof(buf)), 0);
	cr_assert_str_eq(buf, "gil");
	cr_assert_eq(verdict_of("{\"verdict\": \"a\\nb\\u0007c\"}", buf, sizeof(buf)), 0);
	cr_assert_str_eq(buf, "a b c", "control characters become spaces");
	/* cut at a UTF-8 boundary: 5 bytes fit in 6, and the third "é" would be cut: "éé" */
	cr_assert_eq(verdict_of("{\"verdict\": \"\u00e9\u00e9\u00e9\u00e9\"}", small, 6), 0);
	cr_assert_str_eq(small, "\xc3\xa9\xc3\xa9");
	cr_assert_eq(verdict_of("{\"verdict\": {\"x\": 1}}", buf, sizeof(buf)), -EINVAL);
	cr_assert_eq(verdict_of("{\"verdict\": \"\"}", buf, sizeof(buf)), -EINVAL);
	cr_assert_eq(verdict_of("{\"other\": 1}", buf, sizeof(buf)), -EINVAL);
	cr_assert_eq(verdict_of("not json {", buf, sizeof(buf)), -EINVAL);
	cr_assert_eq(verdict_of("{\"verdict\": \"a\", \"verdict\": \"b\"}", buf, sizeof(buf)), -EINVAL);
	cr_assert_eq(prs_sweep_verdict_read("/nonexistent/phase1.json", buf, sizeof(buf)), -ENOENT);
	cr_assert_str_eq(buf, "");
}

/* ---- texts and writers ---- */

Test(sweep_text, numbers)
{
	char b[32];

	cr_assert_str_eq(prs_sweep_num(1000, b, sizeof(b)), "1000");
	cr_assert_str_eq(prs_sweep_num(999999, b, sizeof(b)), "999999");
	cr_assert_str_eq(prs_sweep_num(1e6, b, sizeof(b)), "1e6");
	cr_assert_str_eq(prs_sweep_num(1.2e8, b, sizeof(b)), "1.2e8");
	cr_assert_str_eq(prs_sweep_num(0.25, b, sizeof(b)), "0.25");
	cr_assert_str_eq(prs_sweep_num(5e-5, b, sizeof(b)), "5e-5");
	cr_assert_str_eq(prs_sweep_num(1.5e-12, b, sizeof(b)), "1.5e-12");
}

Test(sweep_text, command_is_quoted_like_a_shell)
{
	const char *argv[] = { "python3", "-c", "print('a b')", "{n}", "", "\xff", NULL };
	struct prs_sweep s = { 0 };
	struct prs_buf b;

	s.argv = argv;
	prs_buf_init(&b);
	cr_assert_str_eq(prs_sweep_command(&s, &b),
			 "python3 -c 'print('\\''a b'\\'')' {n} '' \xef\xbf\xbd");
	prs_buf_release(&b);
}

static char *capture_xml(const char *s, size_t max)
{
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);

	prs_xml_text(f, s, max);
	fclose(f);
	return out;
}

Test(sweep_text, xml_escape)
{
	char *t = capture_xml("<a href=\"x\">&'\x01\xc2\x85z\xff\xef\xbf\xbe", 0);

	cr_assert_str_eq(t, "&lt;a href=&quot;x&quot;&gt;&amp;&#39;z\xef\xbf\xbd\xef\xbf\xbd");
	free(t);
	/* a line break or tab is a space, as in the Markdown, not dropped ("timex=0") */
	t = capture_xml("import time\nx=0\r\n\ty", 0);
	cr_assert_str_eq(t, "import time x=0   y");
	free(t);
	t = capture_xml("abcdef", 4);
	cr_assert_str_eq(t, "abc…");
	free(t);
	t = capture_xml("abcd", 4);
	cr_assert_str_eq(t, "abcd");
	free(t);
}

typedef int (*writer_fn)(FILE *f, const struct prs_sweep *s);

static char *capture(writer_fn fn, const struct prs_sweep *s)
{
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);

	cr_assert_eq(fn(f, s), 0);
	fclose(f);
	return out;
}

Test(sweep_write, json)
{
	struct prs_sweep s;
	char *text;
	json_t *j, *pts, *fit, *runs;
	json_error_t err;

	make_sweep(&s);
	text = capture(prs_sweep_write_json, &s);
	j = json_loads(text, 0, &err);
	cr_assert_not_null(j, "%s", err.text);
	cr_assert_str_eq(json_string_value(json_object_get(j, "format")), "pyrsprof-sweep");
	cr_assert_eq(json_integer_value(json_object_get(j, "version")), PRS_SWEEP_VERSION);
	cr_assert_str_eq(json_string_value(json_object_get(j, "dimension")), "n");
	cr_assert_str_eq(json_string_value(json_array_get(json_object_get(j, "command"), 3)),
			 "<script>alert(1)</script>");
	pts = json_object_get(j, "points");
	cr_assert_eq(json_array_size(pts), 4);
	cr_assert_float_eq(json_number_value(json_object_get(json_array_get(pts, 0), "value")), 2, EPS);
	cr_assert_float_eq(json_number_value(json_object_get(
				   json_object_get(json_array_get(pts, 0), "wall_s"), "median")), 0.004, EPS);
	cr_assert(json_is_null(json_object_get(json_array_get(pts, 3), "wall_s")));
	runs = json_object_get(json_array_get(pts, 2), "runs");
	cr_assert_eq(json_array_size(runs), 3);
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(runs, 1), "dir")), "n=8/run2");
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(runs, 1), "problem")), "exit 3");
	cr_assert_eq(json_integer_value(json_object_get(json_array_get(runs, 1), "exit_status")), 3);
	cr_assert(json_is_false(json_object_get(json_array_get(runs, 1), "ok")));
	fit = json_object_get(json_object_get(j, "fits"), "cpu");
	cr_assert_float_eq(json_number_value(json_object_get(fit, "exponent")), 2, EPS);
	cr_assert_str_eq(json_string_value(json_object_get(fit, "order")), "O(n²)");
	cr_assert_float_eq(json_number_value(json_object_get(fit, "order_exponent")), 2, EPS);
	cr_assert_eq(json_integer_value(json_object_get(fit, "values")), 3);
	cr_assert_eq(json_array_size(json_object_get(j, "verdict_changes")), 1);
	cr_assert_str_eq(json_string_value(json_object_get(
				 json_array_get(json_object_get(j, "verdict_changes"), 0), "to")),
			 "memory-bound");
	json_decref(j);
	free(text);
	prs_sweep_release(&s);
}

Test(sweep_write, md_escapes_the_command)
{
	struct prs_sweep s;
	char *text;

	make_sweep(&s);
	text = capture(prs_sweep_write_md, &s);
	cr_assert_not_null(strstr(text, "\\<script>alert(1)\\</script>"), "%s", text);
	cr_assert_not_null(strstr(text, "'a\\|b\\`c\\`\\&amp;'"), "%s", text);
	cr_assert_null(strstr(text, " <script>"), "every '<' escaped");
	cr_assert_not_null(strstr(text, "- CPU ∝ n^2.00 (R² 1.000): O(n²) along n\n"), "%s", text);
	cr_assert_not_null(strstr(text, "| n | 2 – 16 (4 values) | wall O(n²), CPU O(n²) |"), "%s", text);
	cr_assert_not_null(strstr(text, "- n=8 run 2: exit 3 (output: n=8/run2/output.log)"), "%s", text);
	cr_assert_not_null(strstr(text, "CPU-bound → memory-bound"), "%s", text);
	free(text);
	prs_sweep_release(&s);
}

Test(sweep_write, svg_escapes_the_command)
{
	struct prs_sweep s;
	char *text;

	make_sweep(&s);
	text = capture(prs_sweep_write_svg, &s);
	cr_assert_not_null(strstr(text, "&lt;script&gt;alert(1)&lt;/script&gt;"));
	cr_assert_not_null(strstr(text, "a|b`c`&amp;amp;"));
	cr_assert_null(strstr(text, "<script"), "no raw markup from the command");
	cr_assert_not_null(strstr(text, "CPU ∝ n^2.00 (R² 1.000): O(n²) along n"));
	cr_assert_not_null(strstr(text, "</svg>\n"));
	free(text);
	prs_sweep_release(&s);
}
