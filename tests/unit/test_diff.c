// SPDX-License-Identifier: MIT
/*
 * Unit tests for the re-measure report's logic (include/pyrsprof/diff.h, change.h): the noise
 * rule on numbers worked by hand, and the matching of functions between two constructed
 * recordings (a renamed script, a moved file, a module that only shares a name, two modules with
 * a function of the same name), the times of recordings at different rates, and the speedup of a
 * function made 2x faster. The truths are the constructions, not read from the output.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pyrsprof/change.h"
#include "pyrsprof/diff.h"
#include "pyrsprof/profile.h"
#include "report/diff-internal.h"

#include "util/banned.h"

/* ---- the noise rule ---- */

static struct prs_change judge(double kb, double nb, double pb, double ka, double na, double pa,
			       double run_noise)
{
	struct prs_change c;

	prs_change_of(&(struct prs_sampled){ kb, nb, pb }, &(struct prs_sampled){ ka, na, pa },
		      run_noise, &c);
	return c;
}

Test(change, sampling_error_by_hand)
{
	/* 100 of 200 ticks at 10 ms -> 50 of 200: 1 s -> 0.5 s, sigma = 10 ms sqrt(100 (1 - 1/2) +
	 * 50 (1 - 1/4)) = 10 ms sqrt(87.5) */
	struct prs_change c = judge(100, 200, 0.01, 50, 200, 0.01, 0);

	cr_assert_float_eq(c.before, 1.0, 1e-12);
	cr_assert_float_eq(c.after, 0.5, 1e-12);
	cr_assert_float_eq(c.delta, -0.5, 1e-12);
	cr_assert_float_eq(c.sigma, 0.01 * sqrt(87.5), 1e-12);
	cr_assert(c.significant);
}

Test(change, the_same_time_at_two_rates_is_no_change)
{
	/* 1 s at 100 Hz (100 of 200 ticks) and 1 s at 1000 Hz (1000 of 2000) */
	struct prs_change c = judge(100, 200, 0.01, 1000, 2000, 0.001, 0.05);

	cr_assert_float_eq(c.before, 1.0, 1e-12);
	cr_assert_float_eq(c.after, 1.0, 1e-12);
	cr_assert_float_eq(c.delta, 0, 1e-12);
	cr_assert_not(c.significant);
}

Test(change, below_three_sigmas_is_noise)
{
	/* shares 48 % -> 52 % of 100 samples: 4 pt with sigma sqrt(2 .48 .52 / 100) = 7.1 pt */
	struct prs_change c = judge(48, 100, 0.01, 52, 100, 0.01, 0);

	cr_assert_float_eq(c.sigma, sqrt(2 * 0.48 * 0.52 * 100) * 0.01, 1e-12);
	cr_assert_not(c.significant);
	/* the same shares on 10000 samples: sigma 0.71 pt, 4 pt is beyond 3 sigmas */
	c = judge(4800, 10000, 1e-4, 5200, 10000, 1e-4, 0);
	cr_assert(c.significant);
}

Test(change, too_small_to_matter_is_not_headlined_however_sure)
{
	/* 1 % -> 1.2 % of 10^8 samples: 60 sigmas, but 0.2 % of the view < PRS_CHANGE_MIN_SHARE */
	struct prs_change c = judge(1e6, 1e8, 1e-8, 1.2e6, 1e8, 1e-8, 0);

	cr_assert_gt(fabs(c.delta), 50 * c.sigma);
	cr_assert_not(c.significant);
}

Test(change, run_noise_is_relative_to_each_side)
{
	/* one run each of 1 s and 1.1 s, 5 % run noise: sigma = sqrt(0.05^2 + 0.055^2) = 74 ms,
	 * 0.1 s < 3 sigma: noise; 1 s -> 0.5 s: sigma 56 ms, a change */
	struct prs_change c = judge(1, 1, 1.0, 1, 1, 1.1, 0.05);

	cr_assert_float_eq(c.sigma, sqrt(0.05 * 0.05 + 0.055 * 0.055), 1e-12);
	cr_assert_not(c.significant);
	c = judge(1, 1, 1.0, 1, 1, 0.5, 0.05);
	cr_assert(c.significant);
	/* a side with nothing: its value is 0 and adds no noise */
	c = judge(0, 0, 0.01, 50, 100, 0.01, 0);
	cr_assert_float_eq(c.before, 0, 1e-12);
	cr_assert_float_eq(c.after, 0.5, 1e-12);
	cr_assert(c.significant);
}

Test(change, seconds_for_people)
{
	char b[32];

	cr_assert_str_eq(prs_change_fmt_s(b, sizeof(b), 0.9999999, false), "1.00 s");
	cr_assert_str_eq(prs_change_fmt_s(b, sizeof(b), 2.034, false), "2.03 s");
	cr_assert_str_eq(prs_change_fmt_s(b, sizeof(b), -0.45, true), "-450 ms");
	cr_assert_str_eq(prs_change_fmt_s(b, sizeof(b), 0.0125, true), "+12.5 ms");
	cr_assert_str_eq(prs_change_fmt_s(b, sizeof(b), 0.00008, false), "80 µs");
	cr_assert_str_eq(prs_change_fmt_s(b, sizeof(b), 0, true), "0 s");
	cr_assert_str_eq(prs_change_fmt_s(b, sizeof(b), 250, false), "250 s");
}

/* The text printf's formats give (the reference the fast path must match byte for byte). */
static void fmt_s_printf(char *buf, size_t size, double v, bool sign)
{
	double a = fabs(v);
	const char *sg = v < 0 ? "-" : sign ? "+" : "";

	if (a >= 99.5)
		snprintf(buf, size, "%s%.0f s", sg, a);
	else if (a >= 0.9995)
		snprintf(buf, size, "%s%.2f s", sg, a);
	else if (a >= 0.0995)
		snprintf(buf, size, "%s%.0f ms", sg, a * 1e3);
	else if (a >= 0.00095)
		snprintf(buf, size, "%s%.1f ms", sg, a * 1e3);
	else if (a > 0)
		snprintf(buf, size, "%s%.0f µs", sg, a * 1e6);
	else
		snprintf(buf, size, "0 s");
}

Test(change, seconds_as_printf_writes_them)
{
	/* ties of "%.0f" (to even), unit edges, huge and odd values, then random ones of every size */
	static const double edge[] = { 100.5, 101.5, 102.5, 99.5, 99.49999, 0.9995, 0.99949, 0.1005,
				       0.1015, 0.0995, 0.00095, 0.0009495, 0.0000005, 0.0000015,
				       2.5e-6, 1e11 + 0.5, 1e12, 1e15 + 1, 1e300, INFINITY, NAN, -0.0,
				       4503599627370497.0 };
	char got[32], want[32], cut[5], cutw[5];
	unsigned seed = 7;

	for (size_t i = 0; i < 200000 + sizeof(edge) / sizeof(edge[0]); i++) {
		double v;

		if (i < sizeof(edge) / sizeof(edge[0]))
			v = edge[i];
		else
			v = ldexp((double)rand_r(&seed) / RAND_MAX, (int)(rand_r(&seed) % 60) - 30);
		for (int s = 0; s < 4; s++) {
			double x = s & 1 ? -v : v;

			fmt_s_printf(want, sizeof(want), x, s & 2);
			cr_assert_str_eq(prs_change_fmt_s(got, sizeof(got), x, s & 2), want, "%.17g", x);
			fmt_s_printf(cutw, sizeof(cutw), x, s & 2);
			cr_assert_str_eq(prs_change_fmt_s(cut, sizeof(cut), x, s & 2), cutw, "%.17g", x);
		}
	}
}

Test(change, json_reals_as_printf_writes_them)
{
	/* %.8g: ties at the 8th digit (to even), rounding into the next power of ten, the %e and %f
	 * boundaries (1e-4, 1e-5, 1e8), the fast path's edges (1e-15), then random values of every
	 * magnitude and sign */
	static const double edge[] = { 0.5, 0.125, 1.00000005, 1.00000015, 1.00000025, 99999999.5,
				       99999999.4, 9999999.95, 0.0001, 0.00009999999995, 1e-5,
				       1e-15, 9.9999999e-16, 1.0000000000000002e-15, 1e8, 12345678.5,
				       0.1, 0.3, 2.0 / 3, 1e-7, 123.456, 0, -0.0, INFINITY, NAN,
				       5e-324, 1.7976931348623157e308 };
	char got[64], want[64], cut[6], cutw[6];
	unsigned seed = 11;

	for (size_t i = 0; i < 400000 + sizeof(edge) / sizeof(edge[0]); i++) {
		double v;

		if (i < sizeof(edge) / sizeof(edge[0]))
			v = edge[i];
		else if (i % 3)
			v = ldexp((double)rand_r(&seed) / RAND_MAX + 0.5, (int)(rand_r(&seed) % 120) - 70);
		else /* 8 decimal digits and a half: exact ties where binary allows */
			v = ((double)(rand_r(&seed) % 100000000) + 0.5) * pow(10, (int)(rand_r(&seed) % 24) - 16);
		for (int s = 0; s < 2; s++) {
			double x = s ? -v : v;
			int nw = snprintf(want, sizeof(want), "%.8g", x);

			cr_assert_eq(prs_diff_g8_text(got, sizeof(got), x), nw, "%.17g", x);
			cr_assert_str_eq(got, want, "%.17g", x);
			snprintf(cutw, sizeof(cutw), "%.8g", x);
			prs_diff_g8_text(cut, sizeof(cut), x);
			cr_assert_str_eq(cut, cutw, "%.17g", x);
		}
	}
}

/* ---- constructed recordings ---- */

/* One stack of a recording: "file:name;name;..." root first (every frame in that file unless
 * written "name@other_file"; "name[k]" is a kernel function, without a file), ticks. */
struct part {
	const char *stack;
	unsigned ticks;
};

static uint32_t str(struct prs_profile *p, const char *s)
{
	uint32_t id = prs_profile_string(p, s, strlen(s));

	cr_assert_neq(id, UINT32_MAX);
	return id;
}

/* A recording of one thread at rate_hz: each part's ticks one after the other, all running. */
static struct prs_profile *recording(double rate_hz, const struct part *parts, size_t n)
{
	struct prs_profile *p = prs_profile_new();
	uint64_t t = 0, period = (uint64_t)llround(1e9 / rate_hz);
	char buf[64];

	cr_assert_not_null(p);
	for (size_t i = 0; i < n; i++) {
		char spec[256], *file, *names, *tok, *save = NULL;
		uint32_t st = 0;

		snprintf(spec, sizeof(spec), "%s", parts[i].stack);
		file = spec;
		names = strchr(spec, ':');
		cr_assert_not_null(names);
		*names++ = '\0';
		for (tok = strtok_r(names, ";", &save); tok; tok = strtok_r(NULL, ";", &save)) {
			char *at = strchr(tok, '@'); /* "name@file": a frame of another file */
			size_t len = strlen(tok);
			uint32_t f;

			if (at)
				*at++ = '\0';
			if (len > 3 && strcmp(tok + len - 3, "[k]") == 0) {
				tok[len - 3] = '\0';
				f = prs_profile_named_frame(p, PRS_KIND_KERNEL, str(p, tok), 0, 0);
			} else {
				f = prs_profile_named_frame(p, PRS_KIND_PYTHON, str(p, tok), str(p, at ? at : file), 1);
			}

			st = prs_profile_stack(p, st, f);
		}
		for (unsigned k = 0; k < parts[i].ticks; k++, t += period) {
			struct prs_sample s = { .time_ns = t, .tid = 1000, .state = PRS_STATE_RUNNING,
						.syscall = -1, .stack = st, .weight = 1 };

			cr_assert_eq(prs_profile_sample(p, &s), 0);
		}
	}
	cr_assert_eq(prs_profile_thread(p, 1000, str(p, "MainThread")), 0);
	cr_assert_eq(prs_profile_meta(p, "command", "python3 app.py"), 0);
	snprintf(buf, sizeof(buf), "%g", rate_hz);
	cr_assert_eq(prs_profile_meta(p, "rate_hz", buf), 0);
	snprintf(buf, sizeof(buf), "%.9g", (double)t / 1e9);
	cr_assert_eq(prs_profile_meta(p, "duration_s", buf), 0);
	return p;
}

static struct prs_diff *compute(const struct prs_profile *b, const struct prs_profile *a)
{
	struct prs_diff *d = NULL;
	struct prs_err err = { 0 };

	cr_assert_eq(prs_diff_compute(b, a, &(struct prs_diff_opts){ .view = PRS_VIEW_CPU, .run_noise = -1 },
				      &d, &err), 0, "%s", err.msg);
	return d;
}

/* Two recordings and their diff. */
struct pair {
	struct prs_profile *b, *a;
	struct prs_diff *d;
};

#define N(x) (sizeof(x) / sizeof((x)[0]))

static struct pair pair_of(double rate_b, const struct part *b, size_t nb, double rate_a,
			   const struct part *a, size_t na)
{
	struct pair p = { recording(rate_b, b, nb), recording(rate_a, a, na), NULL };

	p.d = compute(p.b, p.a);
	return p;
}

static void pair_free(struct pair *p)
{
	prs_diff_free(p->d);
	prs_profile_free(p->a);
	prs_profile_free(p->b);
}

static const struct prs_diff_row *row(const struct prs_diff *d, const char *name, const char *file)
{
	const struct prs_diff_row *found = NULL;

	for (size_t i = 0; i < d->nrows; i++)
		if (strcmp(d->rows[i].name, name) == 0 && (!file || strcmp(d->rows[i].file, file) == 0)) {
			cr_assert_null(found, "two rows %s", name);
			found = &d->rows[i];
		}
	cr_assert_not_null(found, "no row %s (%s)", name, file ? file : "any file");
	return found;
}

Test(diff_match, a_renamed_script_matches_by_function)
{
	struct part b[] = { { "app.py:main;work;inner", 300 }, { "app.py:main;helper", 100 } };
	struct part a[] = { { "app_v2.py:main;work;inner", 300 }, { "app_v2.py:main;helper", 100 } };
	struct pair p = pair_of(100, b, N(b), 100, a, N(a));
	struct prs_diff *d = p.d;
	const struct prs_diff_pair *pairs;
	size_t np;

	cr_assert_eq(d->nrows, 4, "main work inner helper, not 8");
	cr_assert_eq(d->changed, 0);
	for (size_t i = 0; i < d->nrows; i++) {
		cr_assert_str_eq(d->rows[i].file, "app_v2.py");
		cr_assert_eq(d->rows[i].status, PRS_DIFF_UNCHANGED, "%s", d->rows[i].name);
		cr_assert_float_eq(d->rows[i].total_s.delta, 0, 1e-12, "%s", d->rows[i].name);
	}
	pairs = prs_diff_match_pairs(d->match, &np);
	cr_assert_eq(np, 1);
	cr_assert_str_eq(pairs[0].before, "app.py");
	cr_assert_str_eq(pairs[0].after, "app_v2.py");
	cr_assert_not(pairs[0].moved);
	cr_assert_eq(pairs[0].common, 4);
	pair_free(&p);
}

Test(diff_match, a_moved_file_pairs_before_a_renamed_one)
{
	/* src/app.py moved to lib/app.py; lib/other.py has the same functions but another name:
	 * the same basename wins */
	struct part b[] = { { "src/app.py:main;work", 100 } };
	struct part a[] = { { "lib/other.py:main;work", 50 }, { "lib/app.py:main;work", 100 } };
	struct pair p = pair_of(100, b, N(b), 100, a, N(a));
	struct prs_diff *d = p.d;
	const struct prs_diff_pair *pairs;
	size_t np;

	pairs = prs_diff_match_pairs(d->match, &np);
	cr_assert_eq(np, 1);
	cr_assert_str_eq(pairs[0].after, "lib/app.py");
	cr_assert(pairs[0].moved);
	cr_assert_eq(row(d, "work", "lib/app.py")->status, PRS_DIFF_UNCHANGED);
	cr_assert_eq(row(d, "work", "lib/other.py")->status, PRS_DIFF_ADDED);
	pair_free(&p);
}

Test(diff_match, a_module_sharing_too_little_stays_apart)
{
	/* x.py {main, f, g, h} -> y.py {main, p, q, r}: 1 of 4 in common (< half): not the same
	 * module; main, the only unmatched main of each side, still matches on its own */
	struct part b[] = { { "x.py:main;f", 10 }, { "x.py:main;g", 10 }, { "x.py:main;h", 10 } };
	struct part a[] = { { "y.py:main;p", 10 }, { "y.py:main;q", 10 }, { "y.py:main;r", 10 } };
	struct pair p = pair_of(100, b, N(b), 100, a, N(a));
	struct prs_diff *d = p.d;
	const struct prs_diff_fn_pair *fp;
	size_t np;

	prs_diff_match_pairs(d->match, &np);
	cr_assert_eq(np, 0);
	fp = prs_diff_match_fn_pairs(d->match, &np);
	cr_assert_eq(np, 1);
	cr_assert_str_eq(fp[0].name, "main");
	cr_assert_str_eq(fp[0].before, "x.py");
	cr_assert_str_eq(fp[0].after, "y.py");
	cr_assert_eq(row(d, "main", "y.py")->status, PRS_DIFF_UNCHANGED);
	cr_assert_eq(row(d, "f", "x.py")->status, PRS_DIFF_REMOVED);
	cr_assert_eq(row(d, "p", "y.py")->status, PRS_DIFF_ADDED);
	cr_assert_eq(d->nrows, 7);
	pair_free(&p);
}

Test(diff_match, a_function_moved_to_another_file_matches_by_name)
{
	/* helper moved from app.py to utils.py (a new file of one function) and got 2x faster */
	struct part b[] = { { "app.py:main;work", 100 }, { "app.py:main;helper", 200 } };
	struct part a[] = { { "app.py:main;work", 100 }, { "app.py:main;helper@utils.py", 100 } };
	struct pair p = pair_of(100, b, N(b), 100, a, N(a));
	struct prs_diff *d = p.d;
	const struct prs_diff_row *r;

	r = row(d, "helper", NULL);
	cr_assert_str_eq(r->file, "utils.py");
	cr_assert_eq(r->status, PRS_DIFF_FASTER);
	cr_assert_float_eq(r->self_s.before, 2.0, 1e-9);
	cr_assert_float_eq(r->self_s.after, 1.0, 1e-9);
	cr_assert_eq(d->count[PRS_DIFF_ADDED] + d->count[PRS_DIFF_REMOVED], 0);
	pair_free(&p);
}

Test(diff_match, a_name_unmatched_twice_on_one_side_stays_apart)
{
	/* helper left app.py for u1.py and u2.py: which one it became is not known */
	struct part b[] = { { "app.py:main;work", 100 }, { "app.py:main;helper", 100 } };
	struct part a[] = { { "app.py:main;work", 100 }, { "app.py:main;helper@u1.py", 50 },
			    { "app.py:main;helper@u2.py", 50 } };
	struct pair p = pair_of(100, b, N(b), 100, a, N(a));
	struct prs_diff *d = p.d;
	size_t np;

	prs_diff_match_fn_pairs(d->match, &np);
	cr_assert_eq(np, 0);
	cr_assert_eq(row(d, "helper", "app.py")->status, PRS_DIFF_REMOVED);
	cr_assert_eq(row(d, "helper", "u1.py")->status, PRS_DIFF_ADDED);
	cr_assert_eq(row(d, "helper", "u2.py")->status, PRS_DIFF_ADDED);
	pair_free(&p);
}

Test(diff_match, same_name_in_two_kept_modules_is_two_functions)
{
	/* util() of a.py got 2x faster, util() of b.py did not: never merged */
	struct part b[] = { { "a.py:main;util", 200 }, { "b.py:run;util", 100 } };
	struct part a[] = { { "a.py:main;util", 100 }, { "b.py:run;util", 100 } };
	struct pair p = pair_of(100, b, N(b), 100, a, N(a));
	struct prs_diff *d = p.d;

	cr_assert_eq(row(d, "util", "a.py")->status, PRS_DIFF_FASTER);
	cr_assert_float_eq(row(d, "util", "a.py")->self_s.before, 2.0, 1e-9);
	cr_assert_float_eq(row(d, "util", "a.py")->self_s.after, 1.0, 1e-9);
	cr_assert_eq(row(d, "util", "b.py")->status, PRS_DIFF_UNCHANGED);
	pair_free(&p);
}

/* ---- times ---- */

Test(diff, a_function_made_2x_faster_gives_the_absolute_speedup)
{
	/* before: slow 3 s, rest 1 s (4 s); after: slow 1.5 s, rest 1 s (2.5 s): 1.6x overall */
	struct part b[] = { { "app.py:main;slow", 300 }, { "app.py:main;rest", 100 } };
	struct part a[] = { { "app.py:main;slow", 150 }, { "app.py:main;rest", 100 } };
	struct pair p = pair_of(100, b, N(b), 100, a, N(a));
	struct prs_diff *d = p.d;
	const struct prs_diff_row *r;

	cr_assert(d->timed);
	cr_assert(d->wall.known && d->cpu.known);
	cr_assert_float_eq(d->wall.c.before, 4.0, 1e-9);
	cr_assert_float_eq(d->wall.c.after, 2.5, 1e-9);
	cr_assert_float_eq(d->wall.c.delta, -1.5, 1e-9);
	cr_assert_float_eq(d->wall.speedup, 1.6, 1e-9);
	cr_assert(d->wall.c.significant);
	cr_assert_float_eq(d->cpu.c.before, 4.0, 1e-9);
	cr_assert_float_eq(d->cpu.speedup, 1.6, 1e-9);
	r = row(d, "slow", NULL);
	cr_assert_eq(r->status, PRS_DIFF_FASTER);
	cr_assert_float_eq(r->self_s.before / r->self_s.after, 2.0, 1e-9);
	cr_assert_eq(row(d, "rest", NULL)->status, PRS_DIFF_UNCHANGED);
	/* its share went from 75 % to 60 %, but the time is what headlines */
	cr_assert_float_eq(r->self_sh.before, 0.75, 1e-9);
	cr_assert_float_eq(r->self_sh.after, 0.6, 1e-9);
	/* what next: the after profile's top hot spot is slow (60 %), ceiling 2.5x */
	cr_assert(d->have_next);
	cr_assert_str_eq(d->next.rows[0].name, "slow");
	pair_free(&p);
}

Test(diff, one_program_at_100_and_1000_hz_shows_no_change)
{
	struct part b[] = { { "app.py:main;f", 150 }, { "app.py:main;g", 50 } };
	struct part a[] = { { "app.py:main;f", 1500 }, { "app.py:main;g", 500 } };
	struct pair p = pair_of(100, b, N(b), 1000, a, N(a));
	struct prs_diff *d = p.d;

	cr_assert_float_eq(d->side[0].period_s, 0.01, 1e-12);
	cr_assert_float_eq(d->side[1].period_s, 0.001, 1e-12);
	cr_assert_eq(d->changed, 0);
	cr_assert_float_eq(row(d, "f", NULL)->self_s.before, 1.5, 1e-9);
	cr_assert_float_eq(row(d, "f", NULL)->self_s.after, 1.5, 1e-9);
	cr_assert_float_eq(d->wall.speedup, 1.0, 1e-9);
	cr_assert_not(d->wall.c.significant);
	pair_free(&p);
}

Test(diff, the_function_that_changed_comes_before_its_callers)
{
	/* leaf got 2x faster under 5 callers whose totals moved by as much; other did not move */
	struct part b[] = { { "app.py:mod;main;run;step;work;leaf", 200 }, { "app.py:mod;other", 100 } };
	struct part a[] = { { "app.py:mod;main;run;step;work;leaf", 100 }, { "app.py:mod;other", 100 } };
	struct pair p = pair_of(100, b, N(b), 100, a, N(a));
	struct prs_diff *d = p.d;

	cr_assert_eq(d->changed, 6, "leaf and its 5 callers");
	cr_assert_str_eq(d->rows[0].name, "leaf");
	cr_assert_float_eq(d->rows[0].self_s.delta, -1.0, 1e-9);
	cr_assert_str_eq(d->rows[d->nrows - 1].name, "other");
	pair_free(&p);
}

/* ---- diff.json ---- */

/* diff.json's text is jansson's (indent 1, 8 digits) of the document it holds, though its rows
 * are written without jansson (diff_json_row.c): parsing it and dumping it again gives the same
 * bytes. Names with what JSON must escape, non-ASCII, and numbers from 1e-5 to 1e6 (exponents,
 * whole numbers, shares). */
Test(diff, json_rows_are_the_text_jansson_writes)
{
	struct part b[] = { { "app.py:main;q\"uo\\te;x\x01y\tz", 300 }, { "app.py:main;caf\xc3\xa9", 1 },
			    { "app.py:main;big", 1000000 }, { "app.py:main;gone", 20 } };
	struct part a[] = { { "app.py:main;q\"uo\\te;x\x01y\tz", 150 }, { "app.py:main;caf\xc3\xa9", 2 },
			    { "app.py:main;big", 999000 }, { "app.py:main;new/one", 7 } };
	struct pair p = pair_of(100, b, N(b), 1000, a, N(a));
	char dir[] = "/tmp/prs-diff-json-XXXXXX", path[64];
	struct prs_err err = { 0 };
	json_error_t jerr;
	json_t *doc;
	char *text, *again;
	long n;
	FILE *f;

	cr_assert_not_null(mkdtemp(dir));
	cr_assert_eq(prs_diff_write(p.d, dir, &err), 0, "%s", err.msg);
	snprintf(path, sizeof(path), "%s/diff.json", dir);
	f = fopen(path, "r");
	cr_assert_not_null(f);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	text = calloc(1, (size_t)n + 1);
	cr_assert_eq(fread(text, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	cr_assert_not_null(strstr(text, "\"q\\\"uo\\\\te\""), "the quote and backslash escaped");
	cr_assert_not_null(strstr(text, "\"x\\u0001y\\tz\""), "control bytes escaped as jansson does");
	cr_assert_not_null(strstr(text, "e-"), "some number with a negative exponent");
	doc = json_loads(text, 0, &jerr);
	cr_assert_not_null(doc, "%s", jerr.text);
	again = json_dumps(doc, JSON_INDENT(1) | JSON_REAL_PRECISION(8));
	cr_assert_not_null(again);
	cr_assert_eq((size_t)n, strlen(again) + 1, "the file is the dump and a newline");
	cr_assert_eq(memcmp(text, again, strlen(again)), 0);
	free(again);
	json_decref(doc);
	free(text);
	for (const char *name = "diff.json\0diff.md\0diff.svg\0"; *name; name += strlen(name) + 1) {
		snprintf(path, sizeof(path), "%s/%s", dir, name);
		unlink(path);
	}
	cr_assert_eq(rmdir(dir), 0);
	pair_free(&p);
}

/* A script renamed with one of its functions removed: the kept functions are keyed by the after
 * file (their module's partner), the removed one names the file it was in, not the one that
 * never had it ("removed gone (after.py)" read as if after.py still did). */
Test(diff, a_removed_function_of_a_renamed_script_names_where_it_was)
{
	struct part b[] = { { "/x/before.py:main;hot", 200 }, { "/x/before.py:main;keep", 100 },
			    { "/x/before.py:main;gone", 100 } };
	struct part a[] = { { "/x/after.py:main;hot", 100 }, { "/x/after.py:main;keep", 100 } };
	struct pair p = pair_of(100, b, N(b), 100, a, N(a));
	const struct prs_diff_row *r;

	r = row(p.d, "gone", NULL);
	cr_assert_eq(r->status, PRS_DIFF_REMOVED);
	cr_assert_str_eq(r->file, "/x/before.py");
	r = row(p.d, "hot", NULL);
	cr_assert_eq(r->status, PRS_DIFF_FASTER);
	cr_assert_str_eq(r->file, "/x/after.py");
	cr_assert_str_eq(row(p.d, "keep", NULL)->file, "/x/after.py");
	pair_free(&p);
}

static char diff_lines[16][700];
static int ndiff_lines;

static void collect_line(void *arg, const char *line)
{
	(void)arg;
	if (ndiff_lines < 16)
		snprintf(diff_lines[ndiff_lines++], sizeof(diff_lines[0]), "%s", line);
}

/* The next hot spot a kernel function (no file): "(kernel)" in the terminal and diff.md, as in
 * a recording's summary. */
Test(diff, a_kernel_hot_spot_is_marked_kernel)
{
	struct part b[] = { { "/x/app.py:main;alloc;clear_page_erms[k]", 300 }, { "/x/app.py:main", 100 } };
	struct part a[] = { { "/x/app.py:main;alloc;clear_page_erms[k]", 100 }, { "/x/app.py:main", 50 } };
	struct pair p = pair_of(100, b, N(b), 100, a, N(a));
	struct prs_err err = { 0 };
	char dir[] = "/tmp/prs-diffk-XXXXXX", path[64], md[16384] = "", cmd[96];
	FILE *f;
	bool said = false;

	cr_assert(p.d->have_next);
	cr_assert_str_eq(p.d->next.rows[0].name, "clear_page_erms");
	ndiff_lines = 0;
	prs_diff_summary(p.d, collect_line, NULL);
	for (int i = 0; i < ndiff_lines; i++)
		said |= strstr(diff_lines[i], "hot now (CPU, self): clear_page_erms (kernel) 67% ") != NULL;
	cr_assert(said, "%s", ndiff_lines ? diff_lines[ndiff_lines - 1] : "");
	cr_assert_not_null(mkdtemp(dir));
	cr_assert_eq(prs_diff_write(p.d, dir, &err), 0, "%s", err.msg);
	snprintf(path, sizeof(path), "%s/diff.md", dir);
	f = fopen(path, "r");
	cr_assert_not_null(f);
	md[fread(md, 1, sizeof(md) - 1, f)] = '\0';
	fclose(f);
	cr_assert(strstr(md, "**clear\\_page\\_erms** (kernel), 66.7 % of the CPU samples"), "%s", md);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	cr_assert_eq(system(cmd), 0);
	pair_free(&p);
}
