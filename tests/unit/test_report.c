/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for the reports: Amdahl ceilings; hot spots by self and total at function and line
 * level on a constructed profile (recursion counted once per sample, inline expansions, off-CPU
 * leaves in the wall view); --target and --dim parsing; phase1.json and phase4.json written from
 * a constructed profile, read back with jansson and checked field by field against the numbers
 * built in; the stop hint; the terminal summary; hostile names escaped in the Markdown.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "pyrsprof/acct.h"
#include "pyrsprof/report.h"
#include "report/report-internal.h"

#include "util/banned.h"

static uint32_t S(struct prs_profile *p, const char *s)
{
	return prs_profile_string(p, s, strlen(s));
}

Test(report, amdahl)
{
	cr_assert_float_eq(prs_amdahl(0), 1, 1e-12);
	cr_assert_float_eq(prs_amdahl(0.5), 2, 1e-12);
	cr_assert_float_eq(prs_amdahl(0.9), 10, 1e-9);
	cr_assert_float_eq(prs_amdahl(0.08), 1 / 0.92, 1e-12);
	cr_assert(isinf(prs_amdahl(1)));
}

/*
 * main -> work -> hot (hot.py:10)        60 running samples
 * main -> work -> work -> hot (hot.py:11) 20 running (recursion: work counted once)
 * main -> cold (cold.py:5)               20 running
 * main -> wait                           100 blocked in read (wall view only)
 */
static struct prs_profile *hot_profile(void)
{
	struct prs_profile *p = prs_profile_new();
	uint32_t fmain = prs_profile_named_frame(p, PRS_KIND_PYTHON, S(p, "main"), S(p, "app.py"), 1);
	uint32_t fwork = prs_profile_named_frame(p, PRS_KIND_PYTHON, S(p, "work"), S(p, "app.py"), 3);
	uint32_t fhot10 = prs_profile_named_frame(p, PRS_KIND_PYTHON, S(p, "hot"), S(p, "/x/hot.py"), 10);
	uint32_t fhot11 = prs_profile_named_frame(p, PRS_KIND_PYTHON, S(p, "hot"), S(p, "/x/hot.py"), 11);
	uint32_t fcold = prs_profile_named_frame(p, PRS_KIND_PYTHON, S(p, "cold|*<b>"), S(p, "cold.py"), 5);
	uint32_t fwait = prs_profile_named_frame(p, PRS_KIND_PYTHON, S(p, "wait"), S(p, "app.py"), 9);
	uint32_t m = prs_profile_stack(p, 0, fmain), w = prs_profile_stack(p, m, fwork);
	uint32_t st[4] = { prs_profile_stack(p, w, fhot10),
			   prs_profile_stack(p, prs_profile_stack(p, w, fwork), fhot11),
			   prs_profile_stack(p, m, fcold), prs_profile_stack(p, m, fwait) };
	int n[4] = { 60, 20, 20, 100 };
	uint64_t t = 0;

	prs_profile_meta(p, "duration_s", "2");
	prs_profile_meta(p, "rate_hz", "100");
	prs_profile_meta(p, "command", "python app.py");
	prs_profile_meta(p, "mode", "run");
	prs_profile_meta(p, "target", "wall<3s");
	prs_profile_meta(p, "dim", "n_rows=20000..60000");
	prs_profile_meta(p, "dim", "batch=32");
	for (int k = 0; k < 4; k++)
		for (int i = 0; i < n[k]; i++) {
			struct prs_sample s = { t, k == 3 ? 2 : 1, k == 3 ? PRS_STATE_BLOCKED : PRS_STATE_RUNNING,
						(int16_t)(k == 3 ? SYS_read : -1), st[k], 1, 0 };

			/* thread 1 and thread 2 are sampled at the same ticks */
			s.time_ns = (uint64_t)(k == 3 ? i : (k == 0 ? i : k == 1 ? 60 + i : 80 + i)) * 10000000;
			prs_profile_sample(p, &s);
		}
	(void)t;
	return p;
}

static const struct prs_hotspot *find(const struct prs_hotspot *rows, size_t n, const char *name,
				      uint32_t line)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(rows[i].name, name) == 0 && rows[i].line == line)
			return &rows[i];
	return NULL;
}

Test(report, hotspots_functions_and_lines)
{
	struct prs_profile *p = hot_profile();
	struct prs_hotspot *rows;
	size_t n;
	double total;
	const struct prs_hotspot *h;

	cr_assert_eq(prs_hotspots(p, PRS_VIEW_CPU, 0, &rows, &n, &total, NULL), 0);
	cr_assert_float_eq(total, 100, 1e-12);
	cr_assert_str_eq(rows[0].name, "hot");
	cr_assert_float_eq(rows[0].self, 80, 1e-12);
	cr_assert_str_eq(rows[0].file, "/x/hot.py");
	h = find(rows, n, "work", 0);
	cr_assert(h && h->self == 0 && h->total == 80, "recursion counts once per sample");
	h = find(rows, n, "main", 0);
	cr_assert(h && h->total == 100);
	cr_assert_null(find(rows, n, "wait", 0), "not in the CPU view");
	free(rows);
	cr_assert_eq(prs_hotspots(p, PRS_VIEW_CPU, PRS_HOT_LINES, &rows, &n, &total, NULL), 0);
	cr_assert_float_eq(find(rows, n, "hot", 10)->self, 60, 1e-12);
	cr_assert_float_eq(find(rows, n, "hot", 11)->self, 20, 1e-12);
	cr_assert_float_eq(find(rows, n, "work", 3)->total, 80, 1e-12);
	free(rows);
	cr_assert_eq(prs_hotspots(p, PRS_VIEW_WALL, 0, &rows, &n, &total, NULL), 0);
	cr_assert_float_eq(total, 200, 1e-12);
	h = find(rows, n, "[read]", 0);
	cr_assert(h && h->self == 100 && h->kind == PRS_KIND_OFF_IO);
	cr_assert_float_eq(find(rows, n, "wait", 0)->total, 100, 1e-12);
	cr_assert_float_eq(find(rows, n, "wait", 0)->self, 0, 1e-12);
	free(rows);
	prs_profile_free(p);
}

/* The order of the "by total" columns: total, self, name, file, line. */
static int total_order(const void *a, const void *b)
{
	const struct prs_hotspot *x = a, *y = b;
	int r;

	if (x->total != y->total)
		return x->total > y->total ? -1 : 1;
	if (x->self != y->self)
		return x->self > y->self ? -1 : 1;
	if ((r = strcmp(x->name, y->name)) || (r = strcmp(x->file, y->file)))
		return r;
	return x->line < y->line ? -1 : x->line > y->line;
}

static void same_rows(const struct prs_hotspot *a, const struct prs_hotspot *b, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		cr_assert_str_eq(a[i].name, b[i].name, "row %zu", i);
		cr_assert_str_eq(a[i].file, b[i].file, "row %zu", i);
		cr_assert_eq(a[i].line, b[i].line, "row %zu", i);
		cr_assert_eq(a[i].kind, b[i].kind, "row %zu", i);
		cr_assert_eq(a[i].self, b[i].self, "row %zu", i);
		cr_assert_eq(a[i].total, b[i].total, "row %zu", i);
	}
}

/* One table of prs_hotspots_top against the whole table of prs_hotspots: its first k rows by
 * self, and by total once the whole table is sorted so. */
static void check_top(struct prs_profile *p, enum prs_view view, unsigned flags,
		      const struct prs_hotspot_top *t, size_t k)
{
	struct prs_hotspot *rows;
	size_t n;
	double total;

	cr_assert_eq(prs_hotspots(p, view, flags, &rows, &n, &total, NULL), 0);
	cr_assert_eq(t->count, n);
	cr_assert_eq(t->total, total);
	cr_assert_eq(t->nself, n < k ? n : k);
	cr_assert_eq(t->ntotal, n < k ? n : k);
	same_rows(t->by_self, rows, t->nself);
	qsort(rows, n, sizeof(*rows), total_order);
	same_rows(t->by_total, rows, t->ntotal);
	free(rows);
}

/* Many spots with equal weights (ties at the k-th row), recursion, lines of one function. */
Test(report, hotspots_top_are_the_first_rows)
{
	struct prs_profile *p = prs_profile_new();
	uint32_t frames[40];
	char name[32];
	unsigned seed = 7;

	for (int i = 0; i < 40; i++) {
		snprintf(name, sizeof(name), "f%d", i % 25);
		frames[i] = prs_profile_named_frame(p, PRS_KIND_PYTHON, S(p, name),
						    S(p, i % 3 ? "a.py" : "b.py"), 1 + (uint32_t)i % 4);
	}
	for (int i = 0; i < 3000; i++) {
		uint32_t st = 0;
		int depth = 1 + rand_r(&seed) % 8;
		struct prs_sample s = { (uint64_t)i * 1000, 1, PRS_STATE_RUNNING, -1, 0, 1, 0, 0 };

		for (int d = 0; d < depth; d++)
			st = prs_profile_stack(p, st, frames[rand_r(&seed) % 40]);
		s.stack = st;
		s.weight = 1 + (uint32_t)(rand_r(&seed) % 3);
		if (rand_r(&seed) % 5 == 0) {
			s.state = PRS_STATE_BLOCKED;
			s.syscall = SYS_read;
		}
		cr_assert_eq(prs_profile_sample(p, &s), 0);
	}
	/* equal spots met in the reverse of their name order: the k-th row is decided by name */
	for (int i = 0; i < 26; i++) {
		struct prs_sample s = { 0, 2, PRS_STATE_RUNNING, -1, 0, 3, 0, 0 };

		snprintf(name, sizeof(name), "tie_%c", 'z' - i);
		s.stack = prs_profile_stack(p, 0, prs_profile_named_frame(p, PRS_KIND_PYTHON, S(p, name),
									  S(p, "t.py"), 1));
		cr_assert_eq(prs_profile_sample(p, &s), 0);
	}
	for (size_t k = 1; k <= 61; k += 15)
		for (int v = 0; v < 2; v++) {
			enum prs_view view = v ? PRS_VIEW_WALL : PRS_VIEW_CPU;
			struct prs_hotspot_top fn, line;

			cr_assert_eq(prs_hotspots_top(p, &(struct prs_view_opts){ .view = view }, k, &fn, &line, NULL), 0);
			check_top(p, view, 0, &fn, k);
			check_top(p, view, PRS_HOT_LINES, &line, k);
			prs_hotspot_top_release(&fn);
			prs_hotspot_top_release(&line);
		}
	prs_profile_free(p);
}

Test(report, target_parse)
{
	struct prs_target t;
	struct prs_err err = { 0 };

	cr_assert_eq(prs_target_parse("wall<2s", &t, &err), 0);
	cr_assert_str_eq(t.metric, "wall");
	cr_assert_str_eq(t.op, "<");
	cr_assert_float_eq(t.value, 2, 1e-12);
	cr_assert(prs_target_met(&t, 1.9) && !prs_target_met(&t, 2.0));
	cr_assert_eq(prs_target_parse("cpu<=500ms", &t, &err), 0);
	cr_assert_float_eq(t.value, 0.5, 1e-12);
	cr_assert(prs_target_met(&t, 0.5));
	cr_assert_eq(prs_target_parse("rss<1.5GB", &t, &err), 0);
	cr_assert_float_eq(t.value, 1.5e9, 1);
	cr_assert_eq(prs_target_parse("wall>=2m", &t, &err), 0);
	cr_assert_float_eq(t.value, 120, 1e-12);
	cr_assert_eq(prs_target_parse("wall<2", &t, &err), 0);
	static const char *const bad[] = { "", "wall", "wall<", "wall<2parsecs", "speed<2s", "wall=2s",
					   "<2s", "rss<2s", "wall<-1s", "wall<nans" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cr_assert_eq(prs_target_parse(bad[i], &t, &err), -EINVAL, "accepted '%s'", bad[i]);
		cr_assert(strstr(err.msg, "wall<2s"), "%s", err.msg);
	}
}

Test(report, dim_parse)
{
	struct prs_dim d;

	cr_assert_eq(prs_dim_parse("n_rows=20000..60000", &d, NULL), 0);
	cr_assert_str_eq(d.name, "n_rows");
	cr_assert_str_eq(d.typical, "20000");
	cr_assert_str_eq(d.max, "60000");
	cr_assert_eq(prs_dim_parse("batch=32", &d, NULL), 0);
	cr_assert_str_eq(d.max, "");
	cr_assert_eq(prs_dim_parse("=3", &d, NULL), -EINVAL);
	cr_assert_eq(prs_dim_parse("n", &d, NULL), -EINVAL);
	cr_assert_eq(prs_dim_parse("n=", &d, NULL), -EINVAL);
	cr_assert_eq(prs_dim_parse("n=3..", &d, NULL), -EINVAL);
	cr_assert_eq(prs_dim_parse("a\nb=3", &d, NULL), -EINVAL);
}

/* Writes the reports of hot_profile (with a process record) into a temp dir; returns the dir. */
static char dir[64];

static void write_reports(struct prs_profile *p, struct prs_phase4_top *top)
{
	struct prs_facts f;
	struct prs_verdict v;
	struct prs_phase_inputs in;
	struct prs_report_ctx c = { p, &f, &v, &in };
	struct prs_err err = { 0 };

	snprintf(dir, sizeof(dir), "/tmp/prs-report-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	cr_assert_eq(prs_facts_build(p, &f, &err), 0);
	prs_classify(&f, &v);
	prs_phase_inputs_from_meta(p, &in);
	cr_assert_eq(prs_phase1_write(&c, dir, &err), 0, "%s", err.msg);
	cr_assert_eq(prs_phase4_write(&c, dir, top, &err), 0, "%s", err.msg);
	prs_facts_release(&f);
}

static json_t *load(const char *name)
{
	char path[128];
	json_error_t je;
	json_t *j;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	j = json_load_file(path, 0, &je);
	cr_assert_not_null(j, "%s: %s", path, je.text);
	return j;
}

/* The text of the report `name` of the last write_reports into buf (NUL-terminated). */
static void slurp(const char *name, char *buf, size_t size)
{
	char path[128];
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "r");
	cr_assert_not_null(f, "%s", path);
	n = fread(buf, 1, size - 1, f);
	buf[n] = '\0';
	fclose(f);
}

static void cleanup(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	cr_assert_eq(system(cmd), 0);
}

Test(report, phase1_json_fields)
{
	struct prs_profile *p = hot_profile();
	struct prs_phase4_top top;
	struct prs_acct a;
	json_t *j, *x;

	prs_acct_init(&a, PRS_ACCT_PROCESS, PRS_PHASE_EXIT, 1);
	prs_acct_set(&a, PRS_TASK_UTIME_NS, 900000000);
	prs_acct_set(&a, PRS_TASK_STIME_NS, 100000000);
	prs_acct_set(&a, PRS_TASK_RSS_PEAK_KB, 2048);
	/* storage bytes without the syscall and character counts (a taskstats exit: those come
	 * rounded to 1024s and are not kept): measured bytes, unmeasured counts */
	prs_acct_set(&a, PRS_TASK_READ_BYTES, 8192);
	prs_acct_store(p, &a);
	p->complete = true;
	write_reports(p, &top);
	j = load("phase1.json");
	cr_assert_str_eq(json_string_value(json_object_get(j, "schema")), "pyrsprof-phase1");
	cr_assert_eq(json_integer_value(json_object_get(j, "version")), 1);
	cr_assert_str_eq(json_string_value(json_object_get(j, "command")), "python app.py");
	x = json_object_get(j, "target");
	cr_assert_str_eq(json_string_value(json_object_get(x, "expr")), "wall<3s");
	cr_assert_float_eq(json_number_value(json_object_get(x, "measured")), 2, 1e-12);
	cr_assert(json_is_true(json_object_get(x, "met")));
	x = json_object_get(j, "dimensions");
	cr_assert_eq(json_array_size(x), 2);
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(x, 0), "max")), "60000");
	cr_assert(json_is_null(json_object_get(json_array_get(x, 1), "max")));
	x = json_object_get(j, "facts");
	cr_assert_float_eq(json_number_value(json_object_get(x, "cpu_s")), 1.0, 1e-9);
	cr_assert_eq(json_integer_value(json_object_get(x, "rss_peak_bytes")), 2048 * 1024);
	cr_assert_eq(json_integer_value(json_object_get(json_object_get(x, "io"), "read_bytes")), 8192);
	cr_assert(json_is_null(json_object_get(json_object_get(x, "io"), "rchar")), "not measured is null, not 0");
	cr_assert(json_is_null(json_object_get(x, "syscalls")), "not measured is null, not 0");
	cr_assert_eq(json_integer_value(json_object_get(x, "threads")), 2);
	/* thread 1: 100 % on-CPU for 1 s; thread 2: parked in read for 1 s with no CPU: an idle
	 * worker, left out */
	cr_assert_eq(json_integer_value(json_object_get(x, "threads_active")), 1);
	cr_assert_eq(json_integer_value(json_object_get(x, "threads_idle")), 1);
	x = json_object_get(j, "time_budget");
	cr_assert_float_eq(json_number_value(json_object_get(x, "thread_seconds")), 1, 1e-9);
	x = json_object_get(x, "shares");
	cr_assert_float_eq(json_number_value(json_object_get(x, "cpu")), 1, 1e-9);
	cr_assert_float_eq(json_number_value(json_object_get(x, "io_net")), 0, 1e-9);
	x = json_object_get(j, "verdict");
	cr_assert_str_eq(json_string_value(json_object_get(x, "id")), "cpu");
	cr_assert_str_eq(json_string_value(json_object_get(x, "label")), "CPU-bound (Python interpreter)");
	cr_assert_str_eq(json_string_value(json_object_get(x, "confidence")), "high");
	cr_assert_float_eq(json_number_value(json_object_get(x, "threshold")), 0.7, 1e-12);
	cr_assert(strstr(json_string_value(json_object_get(x, "lever")), "NumPy"));
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(x, "cpu_split"), "class")),
			 "not measured");
	cr_assert_eq(json_array_size(json_object_get(x, "also")), 0);
	json_decref(j);
	cleanup();
	prs_profile_free(p);
}

/*
 * Two Python threads taking turns on the GIL, 100 ticks at 100 Hz: "a" holds it 60 ticks and waits
 * for it 40 (futex on the GIL's word, flagged by the sampler), "b" holds it 40 and waits 60; the
 * GIL's address confirmed by a WAIT_ADDR record.
 */
static struct prs_profile *gil_profile(bool measured)
{
	struct prs_profile *p = prs_profile_new();
	uint32_t fa = prs_profile_named_frame(p, PRS_KIND_PYTHON, S(p, "spin"), S(p, "gil.py"), 7);
	uint32_t st = prs_profile_stack(p, 0, fa);
	struct prs_acct a;

	prs_profile_meta(p, "duration_s", "1");
	prs_profile_meta(p, "rate_hz", "100");
	prs_profile_meta(p, "command", "python gil.py");
	if (measured)
		prs_profile_meta(p, "gil_wait", "1");
	prs_profile_thread(p, 11, S(p, "a"));
	prs_profile_thread(p, 12, S(p, "b"));
	for (int i = 0; i < 100; i++)
		for (int tid = 11; tid <= 12; tid++) {
			bool holds = tid == 11 ? i < 60 : i >= 60;
			struct prs_sample smp = {
				.time_ns = (uint64_t)i * 10000000, .tid = tid, .stack = st, .weight = 1,
				.state = holds ? PRS_STATE_RUNNING : PRS_STATE_BLOCKED,
				.syscall = (int16_t)(holds ? -1 : SYS_futex),
				.flags = holds ? PRS_SAMPLE_GIL : measured ? PRS_SAMPLE_GIL_WAIT : 0,
			};

			prs_profile_sample(p, &smp);
		}
	for (int tid = 11; measured && tid <= 12; tid++) {
		prs_acct_init(&a, PRS_ACCT_WAIT_ADDR, PRS_PHASE_END, tid);
		prs_acct_set(&a, PRS_WAIT_UADDR, 0x7f0000001048);
		prs_acct_set(&a, PRS_WAIT_SAMPLES, tid == 11 ? 40 : 60);
		prs_acct_set(&a, PRS_WAIT_FLAGS, PRS_WAIT_F_GIL);
		prs_acct_store(p, &a);
	}
	p->complete = true;
	return p;
}

Test(report, gil_hold_and_wait_per_thread)
{
	struct prs_profile *p = gil_profile(true);
	struct prs_phase4_top top;
	json_t *j, *th, *v;
	char md[16384];

	write_reports(p, &top);
	j = load("phase1.json");
	cr_assert(json_is_true(json_object_get(json_object_get(j, "time_budget"), "gil_measured")));
	th = json_object_get(json_object_get(j, "time_budget"), "threads");
	cr_assert_eq(json_array_size(th), 2);
	for (size_t i = 0; i < 2; i++) {
		json_t *t = json_array_get(th, i), *g = json_object_get(t, "gil");
		bool is_a = json_integer_value(json_object_get(t, "tid")) == 11;

		cr_assert_float_eq(json_number_value(json_object_get(g, "hold_share")), is_a ? 0.6 : 0.4, 1e-9);
		cr_assert_float_eq(json_number_value(json_object_get(g, "wait_share")), is_a ? 0.4 : 0.6, 1e-9);
		cr_assert_float_eq(json_number_value(json_object_get(json_object_get(t, "shares"), "gil")),
				   is_a ? 0.4 : 0.6, 1e-9);
		cr_assert_float_eq(json_number_value(json_object_get(json_object_get(t, "shares"), "lock")), 0, 1e-9);
	}
	v = json_object_get(j, "verdict");
	cr_assert_str_eq(json_string_value(json_object_get(v, "id")), "gil");
	cr_assert_str_eq(json_string_value(json_object_get(v, "confidence")), "high");
	cr_assert(strstr(json_string_value(json_object_get(v, "detail")), "confirmed"));
	json_decref(j);
	slurp("phase1.md", md, sizeof(md));
	/* on-CPU, waiting for a CPU, IO, GIL wait, lock, sleep, other, holds the GIL */
	cr_assert(strstr(md, "| 11 | a | yes | yes | 60 % |  | 0 % | 0 % | 40 % | 0 % | 0 % | 0 % | 60 % |\n"), "%s", md);
	cr_assert(strstr(md, "| 12 | b | yes | yes | 40 % |  | 0 % | 0 % | 60 % | 0 % | 0 % | 0 % | 40 % |\n"), "%s", md);
	cleanup();
	prs_profile_free(p);
	/* without the sampler's GIL flags, a Python thread's GIL wait is not measured */
	p = gil_profile(false);
	write_reports(p, &top);
	slurp("phase1.md", md, sizeof(md));
	cr_assert(strstr(md, "| 11 | a | yes | yes | 60 % |  | 0 % | 0 % | not measured | 40 % | 0 % | 0 % | 60 % |\n"), "%s", md);
	cleanup();
	prs_profile_free(p);
}

Test(report, phase4_json_and_stop_hint)
{
	struct prs_profile *p = hot_profile();
	struct prs_phase4_top top;
	json_t *j, *cpu, *row;
	char md[8192];

	write_reports(p, &top);
	j = load("phase4.json");
	cr_assert_str_eq(json_string_value(json_object_get(j, "schema")), "pyrsprof-phase4");
	cpu = json_object_get(json_object_get(j, "views"), "cpu");
	cr_assert_float_eq(json_number_value(json_object_get(cpu, "samples")), 100, 1e-12);
	row = json_array_get(json_object_get(json_object_get(cpu, "functions"), "by_self"), 0);
	cr_assert_str_eq(json_string_value(json_object_get(row, "name")), "hot");
	cr_assert_float_eq(json_number_value(json_object_get(row, "self_share")), 0.8, 1e-12);
	cr_assert_float_eq(json_number_value(json_object_get(row, "self_ceiling")), 5, 1e-9);
	row = json_array_get(json_object_get(json_object_get(cpu, "functions"), "by_total"), 0);
	cr_assert_str_eq(json_string_value(json_object_get(row, "name")), "main");
	cr_assert(json_is_null(json_object_get(row, "total_ceiling")), "p = 1: unbounded");
	row = json_array_get(json_object_get(json_object_get(cpu, "lines"), "by_self"), 0);
	cr_assert_eq(json_integer_value(json_object_get(row, "line")), 10);
	/* the target wall<3s is met: that is the stop hint */
	row = json_object_get(j, "stop_hint");
	cr_assert_str_eq(json_string_value(json_object_get(row, "reason")), "target met");
	cr_assert_eq(top.n, 2);
	cr_assert_str_eq(top.rows[0].name, "hot");
	json_decref(j);
	/* a hostile name is escaped in the Markdown */
	slurp("phase4.md", md, sizeof(md));
	cr_assert(strstr(md, "cold\\|\\*\\<b>"), "%s", md);
	cr_assert_null(strstr(md, "*<b>"), "every '<' escaped");
	cleanup();
	prs_profile_free(p);
}

Test(report, flat_profile_stop_hint)
{
	struct prs_profile *p = prs_profile_new();
	struct prs_phase4_top top;
	json_t *j, *h;

	prs_profile_meta(p, "duration_s", "1");
	/* 20 functions with 5 % each: no spot can give more than 1.05x */
	for (int k = 0; k < 20; k++) {
		char name[16];

		snprintf(name, sizeof(name), "f%d", k);
		uint32_t st = prs_profile_stack(p, 0, prs_profile_named_frame(p, PRS_KIND_NATIVE, S(p, name), 0, 0));

		for (int i = 0; i < 5; i++) {
			struct prs_sample s = { (uint64_t)(k * 5 + i) * 10000000, 1, PRS_STATE_RUNNING, -1, st, 1, 0 };

			prs_profile_sample(p, &s);
		}
	}
	write_reports(p, &top);
	j = load("phase4.json");
	h = json_object_get(j, "stop_hint");
	cr_assert_str_eq(json_string_value(json_object_get(h, "reason")), "flat profile");
	cr_assert_float_eq(json_number_value(json_object_get(h, "ceiling")), 1 / 0.95, 1e-5);
	cr_assert(strstr(top.stop_hint, "1.05x"), "%s", top.stop_hint);
	json_decref(j);
	cleanup();
	prs_profile_free(p);
}

static char lines[8][700];
static int nlines;

static void collect(void *arg, const char *line)
{
	(void)arg;
	if (nlines < 8)
		snprintf(lines[nlines++], sizeof(lines[0]), "%s", line);
}

/* The reports of p written (top filled), then its terminal summary into lines[0..nlines). */
static void summarize(struct prs_profile *p, struct prs_phase4_top *top)
{
	struct prs_facts f;
	struct prs_verdict v;
	struct prs_phase_inputs in;
	struct prs_report_ctx c = { p, &f, &v, &in };

	write_reports(p, top);
	cr_assert_eq(prs_facts_build(p, &f, NULL), 0);
	prs_classify(&f, &v);
	prs_phase_inputs_from_meta(p, &in);
	nlines = 0;
	prs_summary(&c, top, collect, NULL);
	prs_facts_release(&f);
}

Test(report, summary_lines)
{
	struct prs_profile *p = hot_profile();
	struct prs_phase4_top top;

	p->complete = true; /* as a recording that ended: no qualifier line */
	summarize(p, &top);
	cr_assert_eq(nlines, 4);
	cr_assert(strstr(lines[0], "bound: CPU-bound (Python interpreter) [high]"), "%s", lines[0]);
	cr_assert(strstr(lines[0], "lever: climb the ladder"), "%s", lines[0]);
	cr_assert(strstr(lines[1], "time: on-CPU 100% (1 active thread"), "%s", lines[1]);
	cr_assert(strstr(lines[2], "hot (hot.py) 80% (ceiling 5.00x)"), "%s", lines[2]);
	cr_assert(strstr(lines[3], "stop hint: stop: the target wall<3s is met"), "%s", lines[3]);
	cleanup();
	prs_profile_free(p);
}

/* Markdown text: what could open a tag, a code span, emphasis, a link or a table cell is escaped;
 * '>' only where it could start a block quote (the text's first character: line breaks become
 * spaces), so that an arrow in a note reads as written. */
Test(report, md_text_escapes_what_markdown_reads)
{
	char out[256] = { 0 };
	FILE *f = fmemopen(out, sizeof(out) - 1, "w");

	cr_assert_not_null(f);
	prs_md_text(f, "> quote\n<b>|x_y* 0.30 -> 0.26 `c` [l](u) #h & ~s\\");
	fclose(f);
	cr_assert_str_eq(out, "\\> quote \\<b>\\|x\\_y\\* 0.30 -> 0.26 \\`c\\` \\[l\\](u) \\#h \\& \\~s\\\\");
}

/* A kernel function (no file) is marked "(kernel)" in the summary and in phase4.md, else it reads
 * as the program's own code; the verdict's qualifiers (here: a cut recording) get a line of their
 * own right after the verdict, as phase1 lists them under it. */
Test(report, summary_qualifiers_and_kernel_spots)
{
	struct prs_profile *p = prs_profile_new();
	uint32_t fmain = prs_profile_named_frame(p, PRS_KIND_PYTHON, S(p, "alloc"), S(p, "app.py"), 3);
	uint32_t fk = prs_profile_named_frame(p, PRS_KIND_KERNEL, S(p, "clear_page_erms"), 0, 0);
	uint32_t m = prs_profile_stack(p, 0, fmain), k = prs_profile_stack(p, m, fk);
	struct prs_phase4_top top;
	char md[8192];

	prs_profile_meta(p, "duration_s", "1");
	for (int i = 0; i < 100; i++) {
		struct prs_sample s = { (uint64_t)i * 10000000, 1, PRS_STATE_RUNNING, -1, i < 70 ? k : m, 1, 0 };

		prs_profile_sample(p, &s);
	}
	p->complete = false;
	summarize(p, &top);
	cr_assert_eq(nlines, 4, "bound, qualified, time, hot");
	cr_assert(strstr(lines[0], "bound: "), "%s", lines[0]);
	cr_assert_str_eq(lines[1], "qualified: the recording was interrupted: judged on what was saved");
	cr_assert(strstr(lines[2], "time: "), "%s", lines[2]);
	cr_assert(strstr(lines[3], "hot (CPU, self): clear_page_erms (kernel) 70% (ceiling 3.33x); "
			 "alloc (app.py) 30% (ceiling 1.43x)"), "%s", lines[3]);
	slurp("phase4.md", md, sizeof(md));
	cr_assert(strstr(md, "| clear\\_page\\_erms (kernel) | 70.0 % |"), "%s", md);
	cleanup();
	/* a file damaged mid-way (the reader kept what precedes) was not interrupted */
	p->damaged_at = 4096;
	summarize(p, &top);
	cr_assert_str_eq(lines[1], "qualified: the profile is damaged: judged on what precedes the damage");
	cleanup();
	prs_profile_free(p);
}

/* A pure-Python function whose time the merged stacks spread over 20 interpreter functions of
 * 5 % each (libpython's C code under it): flat in merged stacks, but in the Python view (the
 * interpreter folded into its Python line) the function is 100 % of the CPU: no stop hint. The
 * same 20 functions in a native library are flat in both views: the hint. */
static struct prs_profile *spread_profile(const char *lib_path)
{
	struct prs_profile *p = prs_profile_new();
	struct prs_mapping mp = { .start = 0x1000000, .end = 0x1100000, .path = S(p, lib_path) };
	uint32_t lib = prs_profile_mapping(p, &mp);
	uint32_t work = prs_profile_stack(p, 0, prs_profile_named_frame(p, PRS_KIND_PYTHON, S(p, "work"),
								       S(p, "app.py"), 7));

	prs_profile_meta(p, "duration_s", "1");
	for (int k = 0; k < 20; k++) {
		char name[16];
		uint32_t f = prs_profile_raw_frame(p, lib, 0x1000010 + 16 * (uint64_t)k, false);
		uint32_t n;

		snprintf(name, sizeof(name), "Py_f%d", k);
		n = prs_profile_named_frame(p, PRS_KIND_NATIVE, S(p, name), 0, 0);
		cr_assert_eq(prs_profile_expand(p, f, &n, 1), 0);
		for (int i = 0; i < 5; i++) {
			struct prs_sample s = { (uint64_t)(k * 5 + i) * 10000000, 1, PRS_STATE_RUNNING, -1,
						prs_profile_stack(p, work, f), 1, 0 };

			prs_profile_sample(p, &s);
		}
	}
	return p;
}

Test(report, flat_in_merged_stacks_is_judged_in_the_python_view)
{
	struct prs_phase4_top top;
	struct prs_profile *p = spread_profile("/usr/lib/libpython3.12.so.1.0");
	json_t *j;

	write_reports(p, &top);
	cr_assert_str_eq(top.rows[0].name, "Py_f0"); /* the merged table is flat... */
	cr_assert_float_eq(top.rows[0].self / top.total, 0.05, 1e-12);
	cr_assert_str_eq(top.stop_hint, "", "%s", top.stop_hint); /* ...the Python view is not */
	j = load("phase4.json");
	cr_assert(json_is_null(json_object_get(j, "stop_hint")));
	json_decref(j);
	cleanup();
	prs_profile_free(p);
	p = spread_profile("/site/_ext.cpython-312-x86_64-linux-gnu.so"); /* an extension's C code */
	write_reports(p, &top);
	cr_assert(strstr(top.stop_hint, "at most 1.05x"), "%s", top.stop_hint);
	cleanup();
	prs_profile_free(p);
}

/* Samples without a stack (a thread that did not stop in time on a busy machine) are no function
 * to optimize: the summary's hot spots leave them out and say their share apart. */
Test(report, summary_hot_spots_leave_out_samples_without_a_stack)
{
	struct prs_profile *p = prs_profile_new();
	uint32_t hot = prs_profile_stack(p, 0, prs_profile_named_frame(p, PRS_KIND_NATIVE, S(p, "spin_work"),
								      S(p, "/src/bounds.c"), 0));
	struct prs_phase4_top top;

	prs_profile_meta(p, "duration_s", "1");
	for (int i = 0; i < 100; i++) {
		struct prs_sample s = { (uint64_t)i * 10000000, 1, PRS_STATE_RUNNING, -1, i < 40 ? 0 : hot, 1, 0 };

		prs_profile_sample(p, &s);
	}
	p->complete = true;
	summarize(p, &top);
	cr_assert_str_eq(top.rows[0].name, "spin_work"); /* 60 of 100: above [empty stack] */
	cr_assert_eq(nlines, 3);
	cr_assert_str_eq(lines[2], "hot (CPU, self): spin_work (bounds.c) 60% (ceiling 2.50x) (40% of the "
			 "CPU samples have no stack: not read in time)");
	cleanup();
	prs_profile_free(p);
}
