/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for the speedscope and pprof exports and for the numbers of `pyrsprof diff`, on
 * profiles built by hand with the model's API, so every expected value follows from the
 * construction: the frames of each stack, the weights, the rate (period = 1e9 / rate_hz), the
 * inline chain of a raw frame, the threads and their names. The speedscope output is parsed back
 * with jansson, the pprof output is gunzip'd with zlib and decoded with the protobuf-c code of
 * pprof's own profile.proto. Diff expectations are computed from the shares by the binomial
 * formula of diff.h, not read from the output.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "pprof/profile.pb-c.h"
#include "pyrsprof/diff.h"
#include "pyrsprof/export.h"
#include "pyrsprof/profile.h"

#include "util/banned.h"

/* ---- a hand-built profile ----
 *
 * rate 100 Hz (period 10 ms); mapping /opt/app/bin/app [0x400000, 0x500000) with build id
 * de ad be ef; raw frame R at 0x401234 expanded (outermost first) to main (app.c:10) and
 * helper (app.h:3, inlined into main); Python frames work (job.py:7) and hot (job.py:20);
 * an unsymbolized raw frame U at 0x402000.
 *
 * thread 10 "main":   t=0  R;work;hot          w=1 running
 *                     t=1  R;work;hot          w=1 running   (merged with the previous one)
 *                     t=2  R;work              w=2 running
 *                     t=3  R;work              w=1 blocked in read (syscall 0)
 * thread 11 "wörker": t=0  U                   w=3 running
 *                     t=1  (empty stack)       w=1 running
 * thread 11 is renamed: the first THREAD entry says "old", the last "wörker".
 */
struct built {
	struct prs_profile *p;
	uint32_t R, U, main_f, helper_f, work_f, hot_f;
};

static uint32_t str(struct prs_profile *p, const char *s)
{
	uint32_t id = prs_profile_string(p, s, strlen(s));

	cr_assert_neq(id, UINT32_MAX);
	return id;
}

static void add_sample(struct prs_profile *p, int32_t tid, uint64_t t, uint32_t stack, uint32_t w,
		       uint8_t state, int16_t sc)
{
	struct prs_sample s = { .time_ns = t * 10000000ull, .tid = tid, .state = state,
				.syscall = sc, .stack = stack, .weight = w };

	cr_assert_eq(prs_profile_sample(p, &s), 0);
}

static struct built build(const char *thread11_name)
{
	struct built b;
	struct prs_mapping m = { .start = 0x400000, .end = 0x500000, .offset = 0,
				 .build_id_len = 4, .build_id = { 0xde, 0xad, 0xbe, 0xef } };
	struct prs_profile *p = prs_profile_new();
	uint32_t map, chain[2], sR, sW, sH, sU;

	cr_assert_not_null(p);
	m.path = str(p, "/opt/app/bin/app");
	map = prs_profile_mapping(p, &m);
	b.R = prs_profile_raw_frame(p, map, 0x401234, false);
	b.U = prs_profile_raw_frame(p, map, 0x402000, false);
	b.main_f = prs_profile_named_frame(p, PRS_KIND_NATIVE, str(p, "main"), str(p, "app.c"), 10);
	b.helper_f = prs_profile_named_frame(p, PRS_KIND_NATIVE, str(p, "helper"), str(p, "app.h"), 3);
	b.work_f = prs_profile_named_frame(p, PRS_KIND_PYTHON, str(p, "work"), str(p, "job.py"), 7);
	b.hot_f = prs_profile_named_frame(p, PRS_KIND_PYTHON, str(p, "hot"), str(p, "job.py"), 20);
	chain[0] = b.main_f;
	chain[1] = b.helper_f;
	cr_assert_eq(prs_profile_expand(p, b.R, chain, 2), 0);
	sR = prs_profile_stack(p, 0, b.R);
	sW = prs_profile_stack(p, sR, b.work_f);
	sH = prs_profile_stack(p, sW, b.hot_f);
	sU = prs_profile_stack(p, 0, b.U);
	add_sample(p, 10, 0, sH, 1, PRS_STATE_RUNNING, -1);
	add_sample(p, 11, 0, sU, 3, PRS_STATE_RUNNING, -1);
	add_sample(p, 10, 1, sH, 1, PRS_STATE_RUNNING, -1);
	add_sample(p, 11, 1, 0, 1, PRS_STATE_RUNNING, -1);
	add_sample(p, 10, 2, sW, 2, PRS_STATE_RUNNING, -1);
	add_sample(p, 10, 3, sW, 1, PRS_STATE_BLOCKED, 0);
	cr_assert_eq(prs_profile_thread(p, 10, str(p, "main")), 0);
	cr_assert_eq(prs_profile_thread(p, 11, str(p, "old")), 0);
	cr_assert_eq(prs_profile_thread(p, 11, str(p, thread11_name)), 0);
	cr_assert_eq(prs_profile_meta(p, "command", "/opt/app/bin/app --n 3"), 0);
	cr_assert_eq(prs_profile_meta(p, "rate_hz", "100"), 0);
	cr_assert_eq(prs_profile_meta(p, "duration_s", "2.5"), 0);
	cr_assert_eq(prs_profile_meta(p, "start_time", "2024-01-02T03:04:05Z"), 0);
	b.p = p;
	return b;
}

typedef int (*export_fn)(const struct prs_profile *, enum prs_view, FILE *, struct prs_err *);

static char *run_export(export_fn fn, const struct prs_profile *p, enum prs_view view, size_t *len)
{
	struct prs_err err = { 0 };
	char *buf = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&buf, &n);

	cr_assert_not_null(f);
	cr_assert_eq(fn(p, view, f, &err), 0, "%s", err.msg);
	fclose(f);
	if (len)
		*len = n;
	return buf;
}

/* ---- UTF-8 ---- */

Test(export_utf8, valid_text_is_returned_as_is)
{
	struct prs_buf b;
	const char *s = "caf\xc3\xa9 \xe5\x90\x8d \xf0\x9f\x98\x80";
	size_t n;

	prs_buf_init(&b);
	cr_assert_eq(prs_utf8_clean(s, strlen(s), &b, &n), s);
	cr_assert_eq(n, strlen(s));
	prs_buf_release(&b);
}

Test(export_utf8, invalid_sequences_become_replacement_characters)
{
	static const struct {
		const char *in, *out;
	} cases[] = {
		{ "a\xff" "b", "a\xef\xbf\xbd" "b" },                  /* never valid */
		{ "\xc0\x80", "\xef\xbf\xbd\xef\xbf\xbd" },            /* overlong NUL */
		{ "\xed\xa0\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" }, /* surrogate D800 */
		{ "x\xe2\x82", "x\xef\xbf\xbd\xef\xbf\xbd" },          /* truncated euro sign */
		{ "\xf4\x90\x80\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" }, /* > U+10FFFF */
		{ "\x80" "ok\xe2\x82\xac", "\xef\xbf\xbd" "ok\xe2\x82\xac" }, /* stray continuation */
	};
	struct prs_buf b;
	size_t i, n;

	prs_buf_init(&b);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *r = prs_utf8_clean(cases[i].in, strlen(cases[i].in), &b, &n);

		cr_assert_not_null(r);
		cr_assert_str_eq(r, cases[i].out, "case %zu", i);
		cr_assert_eq(n, strlen(cases[i].out));
	}
	/* an embedded NUL within len is replaced too */
	cr_assert_str_eq(prs_utf8_clean("a\0b", 3, &b, &n), "a\xef\xbf\xbd" "b");
	prs_buf_release(&b);
}

Test(export_utf8, period_from_rate)
{
	struct prs_profile *p = prs_profile_new();

	cr_assert_eq(prs_profile_period_ns(p), 0);
	prs_profile_meta(p, "rate_hz", "200");
	cr_assert_eq(prs_profile_period_ns(p), 5000000);
	prs_profile_free(p);
	p = prs_profile_new();
	prs_profile_meta(p, "rate_hz", "fast");
	cr_assert_eq(prs_profile_period_ns(p), 0);
	prs_profile_free(p);
	p = prs_profile_new();
	prs_profile_meta(p, "rate_hz", "-5");
	cr_assert_eq(prs_profile_period_ns(p), 0);
	prs_profile_free(p);
}

/* ---- speedscope ---- */

static json_t *parse_json(const char *text)
{
	json_error_t e;
	json_t *j = json_loads(text, 0, &e);

	cr_assert_not_null(j, "invalid JSON: %s at line %d col %d", e.text, e.line, e.column);
	return j;
}

/* "name" of the frame at index idx of shared.frames. */
static const char *ss_frame(json_t *root, json_int_t idx)
{
	json_t *frames = json_object_get(json_object_get(root, "shared"), "frames");
	json_t *f = json_array_get(frames, (size_t)idx);

	cr_assert_not_null(f, "frame index %lld out of range", (long long)idx);
	return json_string_value(json_object_get(f, "name"));
}

/* The sample's frame names joined with ';' (root first). */
static void ss_stack(json_t *root, json_t *sample, char *out, size_t size)
{
	size_t i, n = 0;

	out[0] = '\0';
	for (i = 0; i < json_array_size(sample); i++)
		n += (size_t)snprintf(out + n, size - n, "%s%s", i ? ";" : "",
				      ss_frame(root, json_integer_value(json_array_get(sample, i))));
}

Test(export_speedscope, cpu_view_per_thread_profiles)
{
	struct built b = build("w\xc3\xb6rker");
	char *text = run_export(prs_export_speedscope, b.p, PRS_VIEW_CPU, NULL);
	json_t *root = parse_json(text), *profs, *t10, *t11, *samples, *weights, *f;
	char stack[512];

	cr_assert_str_eq(json_string_value(json_object_get(root, "$schema")),
			 "https://www.speedscope.app/file-format-schema.json");
	cr_assert_str_eq(json_string_value(json_object_get(root, "exporter")), "pyrsprof");
	cr_assert_str_eq(json_string_value(json_object_get(root, "name")), "/opt/app/bin/app --n 3");
	profs = json_object_get(root, "profiles");
	cr_assert_eq(json_array_size(profs), 2);
	t10 = json_array_get(profs, 0);
	t11 = json_array_get(profs, 1);
	cr_assert_str_eq(json_string_value(json_object_get(t10, "name")), "thread 10 (main)");
	/* the newest name of the thread */
	cr_assert_str_eq(json_string_value(json_object_get(t11, "name")), "thread 11 (w\xc3\xb6rker)");
	cr_assert_str_eq(json_string_value(json_object_get(t10, "type")), "sampled");
	cr_assert_str_eq(json_string_value(json_object_get(t10, "unit")), "nanoseconds");
	/* thread 10 in the CPU view: 4 running weights x 10 ms; the blocked one is left out */
	cr_assert_float_eq(json_number_value(json_object_get(t10, "endValue")), 4e7, 1);
	cr_assert_float_eq(json_number_value(json_object_get(t10, "startValue")), 0, 0);
	/* the busiest thread is the active one; 10 and 11 both have 40 ms: the first one */
	cr_assert_eq(json_integer_value(json_object_get(root, "activeProfileIndex")), 0);
	samples = json_object_get(t10, "samples");
	weights = json_object_get(t10, "weights");
	/* t=0 and t=1 have the same stack: merged into one sample of 20 ms */
	cr_assert_eq(json_array_size(samples), 2);
	cr_assert_eq(json_array_size(weights), 2);
	ss_stack(root, json_array_get(samples, 0), stack, sizeof(stack));
	cr_assert_str_eq(stack, "main;helper;work;hot"); /* inline chain applied, root first */
	cr_assert_float_eq(json_number_value(json_array_get(weights, 0)), 2e7, 1);
	ss_stack(root, json_array_get(samples, 1), stack, sizeof(stack));
	cr_assert_str_eq(stack, "main;helper;work");
	cr_assert_float_eq(json_number_value(json_array_get(weights, 1)), 2e7, 1);
	/* thread 11: the unsymbolized frame is named by file and offset, the empty stack too */
	samples = json_object_get(t11, "samples");
	cr_assert_eq(json_array_size(samples), 2);
	ss_stack(root, json_array_get(samples, 0), stack, sizeof(stack));
	cr_assert_str_eq(stack, "app+0x2000");
	ss_stack(root, json_array_get(samples, 1), stack, sizeof(stack));
	cr_assert_str_eq(stack, "[empty stack]");
	/* frames carry their file and line */
	f = json_array_get(json_object_get(json_object_get(root, "shared"), "frames"),
			   (size_t)json_integer_value(json_array_get(json_array_get(
				   json_object_get(t10, "samples"), 0), 3)));
	cr_assert_str_eq(json_string_value(json_object_get(f, "file")), "job.py");
	cr_assert_eq(json_integer_value(json_object_get(f, "line")), 20);
	json_decref(root);
	free(text);
	prs_profile_free(b.p);
}

Test(export_speedscope, wall_view_has_the_off_cpu_leaf)
{
	struct built b = build("w");
	char *text = run_export(prs_export_speedscope, b.p, PRS_VIEW_WALL, NULL);
	json_t *root = parse_json(text), *t10;
	char stack[512];

	t10 = json_array_get(json_object_get(root, "profiles"), 0);
	cr_assert_float_eq(json_number_value(json_object_get(t10, "endValue")), 5e7, 1);
	cr_assert_eq(json_array_size(json_object_get(t10, "samples")), 3);
	ss_stack(root, json_array_get(json_object_get(t10, "samples"), 2), stack, sizeof(stack));
	cr_assert_str_eq(stack, "main;helper;work;[read]");
	json_decref(root);
	free(text);
	prs_profile_free(b.p);
}

Test(export_speedscope, hostile_names_give_valid_json)
{
	struct built b = build("bad\xff\xfe name \"quoted\" \\ \n");
	char *text = run_export(prs_export_speedscope, b.p, PRS_VIEW_CPU, NULL);
	json_t *root = parse_json(text);
	const char *name = json_string_value(json_object_get(json_array_get(
		json_object_get(root, "profiles"), 1), "name"));

	cr_assert_str_eq(name, "thread 11 (bad\xef\xbf\xbd\xef\xbf\xbd name \"quoted\" \\ \n)");
	json_decref(root);
	free(text);
	prs_profile_free(b.p);
}

Test(export_speedscope, folded_input_has_counts_and_one_profile)
{
	const char *in = "a;b 70\na;c 30\n";
	FILE *f = fmemopen((void *)in, strlen(in), "r");
	struct prs_profile *p = NULL;
	struct prs_err err;
	char *text;
	json_t *root, *prof;

	cr_assert_eq(prs_folded_read(f, "x", &p, &err), 0);
	fclose(f);
	text = run_export(prs_export_speedscope, p, PRS_VIEW_CPU, NULL);
	root = parse_json(text);
	cr_assert_eq(json_array_size(json_object_get(root, "profiles")), 1);
	prof = json_array_get(json_object_get(root, "profiles"), 0);
	cr_assert_str_eq(json_string_value(json_object_get(prof, "name")), "all samples");
	cr_assert_str_eq(json_string_value(json_object_get(prof, "unit")), "none");
	cr_assert_float_eq(json_number_value(json_object_get(prof, "endValue")), 100, 1e-9);
	json_decref(root);
	free(text);
	prs_profile_free(p);
}

/* ---- pprof ---- */

static Perftools__Profiles__Profile *decode_pprof(const char *gz, size_t len)
{
	z_stream zs;
	size_t cap = 1 << 20, n = 0;
	uint8_t *out = malloc(cap);
	Perftools__Profiles__Profile *prof;
	int zr;

	cr_assert_not_null(out);
	cr_assert_geq(len, 2);
	cr_assert_eq((uint8_t)gz[0], 0x1f, "not gzip");
	cr_assert_eq((uint8_t)gz[1], 0x8b, "not gzip");
	memset(&zs, 0, sizeof(zs));
	cr_assert_eq(inflateInit2(&zs, 15 + 16), Z_OK);
	zs.next_in = (Bytef *)gz;
	zs.avail_in = (uInt)len;
	do {
		zs.next_out = out + n;
		zs.avail_out = (uInt)(cap - n);
		zr = inflate(&zs, Z_NO_FLUSH);
		n = cap - zs.avail_out;
		cr_assert(zr == Z_OK || zr == Z_STREAM_END, "inflate: %d", zr);
		cr_assert(n < cap, "profile too big for the test");
	} while (zr != Z_STREAM_END);
	inflateEnd(&zs);
	prof = perftools__profiles__profile__unpack(NULL, n, out);
	cr_assert_not_null(prof, "not a perftools.profiles.Profile");
	free(out);
	return prof;
}

static const char *pstr(const Perftools__Profiles__Profile *pr, int64_t i)
{
	cr_assert(i >= 0 && (size_t)i < pr->n_string_table, "string index %lld", (long long)i);
	return pr->string_table[i];
}

static const Perftools__Profiles__Location *ploc(const Perftools__Profiles__Profile *pr,
						 uint64_t id)
{
	cr_assert(id >= 1 && id <= pr->n_location);
	cr_assert_eq(pr->location[id - 1]->id, id);
	return pr->location[id - 1];
}

static const Perftools__Profiles__Function *pfunc(const Perftools__Profiles__Profile *pr,
						  uint64_t id)
{
	cr_assert(id >= 1 && id <= pr->n_function);
	cr_assert_eq(pr->function[id - 1]->id, id);
	return pr->function[id - 1];
}

/* The sample's function names, leaf first (pprof's order), each location's lines in order. */
static void pp_stack(const Perftools__Profiles__Profile *pr, const Perftools__Profiles__Sample *s,
		     char *out, size_t size)
{
	size_t i, j, n = 0;

	out[0] = '\0';
	for (i = 0; i < s->n_location_id; i++) {
		const Perftools__Profiles__Location *l = ploc(pr, s->location_id[i]);

		for (j = 0; j < l->n_line; j++)
			n += (size_t)snprintf(out + n, size - n, "%s%s", n ? ";" : "",
					      pstr(pr, pfunc(pr, l->line[j]->function_id)->name));
	}
}

static const char *plabel(const Perftools__Profiles__Profile *pr,
			  const Perftools__Profiles__Sample *s, const char *key, int64_t *num)
{
	size_t i;

	for (i = 0; i < s->n_label; i++)
		if (strcmp(pstr(pr, s->label[i]->key), key) == 0) {
			if (num)
				*num = s->label[i]->num;
			return pstr(pr, s->label[i]->str);
		}
	return NULL;
}

Test(export_pprof, wall_view_decodes_with_pprofs_schema)
{
	struct built b = build("w\xc3\xb6rker");
	size_t len, i, j;
	char *gz = run_export(prs_export_pprof, b.p, PRS_VIEW_WALL, &len);
	Perftools__Profiles__Profile *pr = decode_pprof(gz, len);
	int64_t tot[3] = { 0 };
	bool seen_offcpu = false, seen_hot = false;

	cr_assert_str_eq(pr->string_table[0], "");
	cr_assert_eq(pr->n_sample_type, 3);
	cr_assert_str_eq(pstr(pr, pr->sample_type[0]->type), "samples");
	cr_assert_str_eq(pstr(pr, pr->sample_type[0]->unit), "count");
	cr_assert_str_eq(pstr(pr, pr->sample_type[1]->type), "wall");
	cr_assert_str_eq(pstr(pr, pr->sample_type[1]->unit), "nanoseconds");
	cr_assert_str_eq(pstr(pr, pr->sample_type[2]->type), "cpu");
	cr_assert_str_eq(pstr(pr, pr->period_type->type), "wall");
	cr_assert_str_eq(pstr(pr, pr->default_sample_type), "wall");
	cr_assert_eq(pr->period, 10000000);
	cr_assert_eq(pr->duration_nanos, 2500000000ll);
	cr_assert_eq(pr->time_nanos, 1704164645ll * 1000000000ll); /* date -d 2024-01-02T03:04:05Z +%s */
	cr_assert_eq(pr->n_comment, 1);
	cr_assert_str_eq(pstr(pr, pr->comment[0]), "/opt/app/bin/app --n 3");
	/* the mapping, listed first as the main binary (the command's program) */
	cr_assert_eq(pr->n_mapping, 1);
	cr_assert_eq(pr->mapping[0]->id, 1);
	cr_assert_eq(pr->mapping[0]->memory_start, 0x400000);
	cr_assert_eq(pr->mapping[0]->memory_limit, 0x500000);
	cr_assert_str_eq(pstr(pr, pr->mapping[0]->filename), "/opt/app/bin/app");
	cr_assert_str_eq(pstr(pr, pr->mapping[0]->build_id), "deadbeef");
	cr_assert(pr->mapping[0]->has_functions && pr->mapping[0]->has_inline_frames);
	for (i = 0; i < pr->n_sample; i++) {
		const Perftools__Profiles__Sample *s = pr->sample[i];
		char stack[512];
		int64_t tid = -1;
		const char *tn = plabel(pr, s, "thread_name", NULL);

		cr_assert_eq(s->n_value, 3);
		for (j = 0; j < 3; j++)
			tot[j] += s->value[j];
		cr_assert_eq(s->value[1], s->value[0] * 10000000); /* wall = weight x period */
		plabel(pr, s, "thread", &tid);
		cr_assert(tid == 10 || tid == 11);
		cr_assert_str_eq(tn, tid == 10 ? "main" : "w\xc3\xb6rker");
		pp_stack(pr, s, stack, sizeof(stack));
		if (strcmp(stack, "[read];work;helper;main") == 0) {
			seen_offcpu = true;
			cr_assert_eq(s->value[0], 1);
			cr_assert_eq(s->value[2], 0, "an off-CPU sample has no CPU time");
		} else if (strcmp(stack, "hot;work;helper;main") == 0) {
			seen_hot = true;
			cr_assert_eq(s->value[0], 2); /* two samples of weight 1, aggregated */
			cr_assert_eq(s->value[2], s->value[1]);
		} else {
			cr_assert(strcmp(stack, "work;helper;main") == 0 || strcmp(stack, "app+0x2000") == 0 ||
				  strcmp(stack, "[empty stack]") == 0, "unexpected stack %s", stack);
			cr_assert_eq(s->value[2], s->value[1]);
		}
	}
	cr_assert(seen_offcpu && seen_hot);
	cr_assert_eq(tot[0], 9); /* every weight */
	cr_assert_eq(tot[1], 9 * 10000000ll);
	cr_assert_eq(tot[2], 8 * 10000000ll); /* all but the blocked sample */
	perftools__profiles__profile__free_unpacked(pr, NULL);
	free(gz);
	prs_profile_free(b.p);
}

Test(export_pprof, raw_frame_is_one_location_with_its_inline_chain)
{
	struct built b = build("w");
	size_t len, i;
	char *gz = run_export(prs_export_pprof, b.p, PRS_VIEW_CPU, &len);
	Perftools__Profiles__Profile *pr = decode_pprof(gz, len);
	const Perftools__Profiles__Location *raw = NULL, *unsym = NULL;

	cr_assert_str_eq(pstr(pr, pr->default_sample_type), "cpu");
	for (i = 0; i < pr->n_location; i++) {
		if (pr->location[i]->address == 0x401234)
			raw = pr->location[i];
		if (pr->location[i]->address == 0x402000)
			unsym = pr->location[i];
		if (pr->location[i]->address == 0)
			cr_assert_eq(pr->location[i]->mapping_id, 0, "named frames have no mapping");
	}
	cr_assert_not_null(raw);
	cr_assert_eq(raw->mapping_id, 1);
	cr_assert_eq(raw->n_line, 2);
	/* innermost first: the inlined helper, then main which the address belongs to */
	cr_assert_str_eq(pstr(pr, pfunc(pr, raw->line[0]->function_id)->name), "helper");
	cr_assert_str_eq(pstr(pr, pfunc(pr, raw->line[0]->function_id)->filename), "app.h");
	cr_assert_eq(raw->line[0]->line, 3);
	cr_assert_str_eq(pstr(pr, pfunc(pr, raw->line[1]->function_id)->name), "main");
	cr_assert_eq(raw->line[1]->line, 10);
	cr_assert_not_null(unsym);
	cr_assert_eq(unsym->n_line, 1);
	cr_assert_str_eq(pstr(pr, pfunc(pr, unsym->line[0]->function_id)->name), "app+0x2000");
	/* the CPU view has no off-CPU sample: every cpu value equals its wall value */
	for (i = 0; i < pr->n_sample; i++)
		cr_assert_eq(pr->sample[i]->value[2], pr->sample[i]->value[1]);
	/* functions are deduplicated: "work" appears once although two stacks use it */
	{
		size_t nwork = 0;

		for (i = 0; i < pr->n_function; i++)
			nwork += strcmp(pstr(pr, pr->function[i]->name), "work") == 0;
		cr_assert_eq(nwork, 1);
	}
	perftools__profiles__profile__free_unpacked(pr, NULL);
	free(gz);
	prs_profile_free(b.p);
}

Test(export_pprof, folded_input_has_only_counts)
{
	const char *in = "a;b 70\na;c 30\n";
	FILE *f = fmemopen((void *)in, strlen(in), "r");
	struct prs_profile *p = NULL;
	struct prs_err err;
	size_t len, i;
	char *gz;
	Perftools__Profiles__Profile *pr;
	int64_t total = 0;

	cr_assert_eq(prs_folded_read(f, "x", &p, &err), 0);
	fclose(f);
	gz = run_export(prs_export_pprof, p, PRS_VIEW_CPU, &len);
	pr = decode_pprof(gz, len);
	cr_assert_eq(pr->n_sample_type, 1);
	cr_assert_eq(pr->n_sample, 2);
	for (i = 0; i < pr->n_sample; i++) {
		char stack[64];

		cr_assert_eq(pr->sample[i]->n_label, 0);
		pp_stack(pr, pr->sample[i], stack, sizeof(stack));
		cr_assert_str_eq(stack, pr->sample[i]->value[0] == 70 ? "b;a" : "c;a");
		total += pr->sample[i]->value[0];
	}
	cr_assert_eq(total, 100);
	perftools__profiles__profile__free_unpacked(pr, NULL);
	free(gz);
	prs_profile_free(p);
}

Test(export_pprof, write_error_is_reported)
{
	struct built b = build("w");
	struct prs_err err = { 0 };
	FILE *f = fopen("/dev/full", "w");

	if (!f)
		cr_skip_test("no /dev/full");
	cr_assert_eq(prs_export_pprof(b.p, PRS_VIEW_CPU, f, &err), -EIO);
	cr_assert_eq(prs_export_speedscope(b.p, PRS_VIEW_CPU, f, &err), -EIO);
	fclose(f);
	prs_profile_free(b.p);
}

/* ---- diff ---- */

static struct prs_profile *folded(const char *text)
{
	FILE *f = fmemopen((void *)text, strlen(text), "r");
	struct prs_profile *p = NULL;
	struct prs_err err;

	cr_assert_not_null(f);
	cr_assert_eq(prs_folded_read(f, "in", &p, &err), 0, "%s", err.msg);
	fclose(f);
	return p;
}

static const struct prs_diff_row *find_row(const struct prs_diff *d, const char *name)
{
	for (size_t i = 0; i < d->nrows; i++)
		if (strcmp(d->rows[i].name, name) == 0)
			return &d->rows[i];
	cr_assert_fail("no row %s", name);
	return NULL;
}

static struct prs_diff *compute(const struct prs_profile *b, const struct prs_profile *a,
				enum prs_view view)
{
	struct prs_diff *d = NULL;
	struct prs_err err = { 0 };

	cr_assert_eq(prs_diff_compute(b, a, &(struct prs_diff_opts){ .view = view, .run_noise = -1 },
				      &d, &err), 0, "%s", err.msg);
	return d;
}

/* sigma of the difference of shares kb/nb and ka/na, in points (change.h's sampling term) */
static double expect_sigma(double kb, double nb, double ka, double na)
{
	double pb = kb / nb, pa = ka / na;

	return 100 * sqrt(pb * (1 - pb) / nb + pa * (1 - pa) / na);
}

Test(diff, swapped_shares_are_significant)
{
	struct prs_profile *b = folded("a;b 70\na;c 30\n"), *a = folded("a;b 30\na;c 70\n");
	struct prs_diff *d = compute(b, a, PRS_VIEW_CPU);
	const struct prs_diff_row *r;

	cr_assert_not(d->timed); /* folded stacks have no times */
	cr_assert_eq(d->nrows, 3);
	r = find_row(d, "b");
	cr_assert_float_eq(100 * r->self_sh.delta, -40, 1e-9);
	cr_assert_float_eq(100 * r->total_sh.delta, -40, 1e-9);
	cr_assert_float_eq(100 * r->self_sh.sigma, expect_sigma(70, 100, 30, 100), 1e-9);
	cr_assert(r->significant);
	cr_assert_eq(r->status, PRS_DIFF_SHRANK);
	r = find_row(d, "c");
	cr_assert_float_eq(r->self_sh.before, 0.3, 1e-9);
	cr_assert_float_eq(r->self_sh.after, 0.7, 1e-9);
	cr_assert(r->significant);
	cr_assert_eq(r->status, PRS_DIFF_GREW);
	r = find_row(d, "a");
	cr_assert_float_eq(r->total_sh.before, 1, 1e-9);
	cr_assert_float_eq(r->total_sh.delta, 0, 1e-9);
	cr_assert_float_eq(r->self_sh.after, 0, 1e-9);
	cr_assert_not(r->significant);
	/* the changes first, by their size: b and c before a */
	cr_assert_str_eq(d->rows[2].name, "a");
	cr_assert_eq(d->side[0].weight, 100);
	cr_assert_eq(d->side[1].weight, 100);
	cr_assert_eq(d->changed, 2);
	cr_assert_eq(d->count[PRS_DIFF_GREW], 1);
	cr_assert_eq(d->count[PRS_DIFF_SHRANK], 1);
	cr_assert_eq(d->count[PRS_DIFF_UNCHANGED], 1);
	prs_diff_free(d);
	prs_profile_free(a);
	prs_profile_free(b);
}

Test(diff, identical_profiles_have_no_significant_change)
{
	struct prs_profile *b = folded("a;b 70\na;c 30\nx;y;z 5\n"), *a = folded("a;b 70\na;c 30\nx;y;z 5\n");
	struct prs_diff *d = compute(b, a, PRS_VIEW_CPU);

	cr_assert_eq(d->nrows, 6);
	for (size_t i = 0; i < d->nrows; i++) {
		cr_assert_float_eq(d->rows[i].self_sh.delta, 0, 1e-12);
		cr_assert_float_eq(d->rows[i].total_sh.delta, 0, 1e-12);
		cr_assert_not(d->rows[i].significant);
	}
	cr_assert_eq(d->changed, 0);
	prs_diff_free(d);
	prs_profile_free(a);
	prs_profile_free(b);
}

Test(diff, small_changes_are_within_noise_and_shares_normalize)
{
	/* 51% -> 49% on 100 samples each: 2 pt, sigma ~7 pt: noise. Shares, not counts: the
	 * after profile has 10x the samples and the same shares, so nothing moves. */
	struct prs_profile *b = folded("m;f 51\nm;g 49\n"), *a = folded("m;f 49\nm;g 51\n");
	struct prs_profile *big = folded("m;f 510\nm;g 490\n");
	struct prs_diff *d = compute(b, a, PRS_VIEW_CPU);
	const struct prs_diff_row *r;

	r = find_row(d, "f");
	cr_assert_float_eq(100 * r->self_sh.delta, -2, 1e-9);
	cr_assert_not(r->significant);
	cr_assert_eq(d->changed, 0);
	prs_diff_free(d);
	d = compute(b, big, PRS_VIEW_CPU);
	r = find_row(d, "f");
	cr_assert_float_eq(r->self_sh.delta, 0, 1e-9);
	cr_assert_eq(r->self_w[1], 510);
	cr_assert_eq(d->changed, 0);
	prs_diff_free(d);
	prs_profile_free(a);
	prs_profile_free(b);
	prs_profile_free(big);
}

Test(diff, recursion_counts_once_per_sample_and_wall_leaves_are_functions)
{
	struct built bb = build("w");
	struct prs_profile *rec = folded("r;r;r;x 4\n");
	struct prs_diff *d = compute(rec, rec, PRS_VIEW_CPU);
	const struct prs_diff_row *r;

	r = find_row(d, "r");
	cr_assert_eq(r->total_w[0], 4); /* not 12 */
	cr_assert_float_eq(r->total_sh.before, 1, 1e-9);
	prs_diff_free(d);
	/* wall view of the built profile: 9 samples, [read] is the leaf of 1 */
	d = compute(bb.p, bb.p, PRS_VIEW_WALL);
	cr_assert_eq(d->side[0].weight, 9);
	cr_assert(d->timed);
	r = find_row(d, "[read]");
	cr_assert_eq(r->self_w[0], 1);
	cr_assert_eq(r->kind, PRS_KIND_OFF_IO);
	r = find_row(d, "work");
	cr_assert_eq(r->total_w[0], 5);
	cr_assert_eq(r->self_w[0], 2);
	cr_assert_str_eq(r->file, "job.py");
	r = find_row(d, "helper"); /* an inlined function is a function of its own */
	cr_assert_eq(r->total_w[0], 5);
	prs_diff_free(d);
	prs_profile_free(rec);
	prs_profile_free(bb.p);
}

Test(diff, a_view_without_samples_is_an_error)
{
	struct prs_profile *b = folded("a 1\n"), *e = prs_profile_new();
	struct prs_diff *d = NULL;
	struct prs_err err;

	cr_assert_eq(prs_diff_compute(b, e, &(struct prs_diff_opts){ .view = PRS_VIEW_CPU, .run_noise = -1 },
				      &d, &err), -EINVAL);
	cr_assert_null(d);
	cr_assert(strstr(err.msg, "after"), "%s", err.msg);
	prs_profile_free(b);
	prs_profile_free(e);
}

Test(diff, writes_markdown_and_json_atomically)
{
	struct prs_profile *b = folded("a;b 70\na;c|x 30\n"), *a = folded("a;b 30\na;c|x 70\n");
	struct prs_diff *dd = compute(b, a, PRS_VIEW_CPU);
	char dir[] = "/tmp/prs-diff-XXXXXX", path[512];
	struct prs_err err;
	json_error_t je;
	json_t *j;
	FILE *f;
	char line[1024];
	bool row_c = false;
	DIR *d;
	struct dirent *de;
	size_t nfiles = 0;

	cr_assert_not_null(mkdtemp(dir));
	cr_assert_eq(prs_diff_write(dd, dir, &err), 0, "%s", err.msg);
	snprintf(path, sizeof(path), "%s/diff.json", dir);
	j = json_load_file(path, 0, &je);
	cr_assert_not_null(j, "%s", je.text);
	cr_assert_str_eq(json_string_value(json_object_get(j, "view")), "cpu");
	cr_assert_eq(json_integer_value(json_object_get(json_object_get(j, "summary"), "changed")), 2);
	cr_assert_eq(json_array_size(json_object_get(j, "changes")), 2);
	cr_assert_eq(json_array_size(json_object_get(j, "noise")), 1);
	cr_assert_float_eq(json_number_value(json_object_get(json_object_get(json_array_get(
				   json_object_get(j, "noise"), 0), "total"), "delta_share")), 0, 1e-9);
	json_decref(j);
	snprintf(path, sizeof(path), "%s/diff.md", dir);
	f = fopen(path, "r");
	cr_assert_not_null(f);
	while (fgets(line, sizeof(line), f))
		/* the '|' of the name is escaped, so the row keeps its 10 cells */
		if (line[0] == '|' && strstr(line, "c\\|x")) {
			size_t cells = 0;
			char *c;

			row_c = true;
			for (c = line; *c; c++)
				cells += *c == '|' && (c == line || c[-1] != '\\');
			cr_assert_eq(cells, 11, "%s", line);
			cr_assert(strstr(line, "+40.0"), "%s", line);
			cr_assert(strstr(line, "grew"), "%s", line);
		}
	fclose(f);
	cr_assert(row_c);
	/* nothing but the two files: the temporaries were renamed */
	d = opendir(dir);
	while ((de = readdir(d)))
		if (de->d_name[0] != '.' || (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")))
			nfiles++;
	closedir(d);
	cr_assert_eq(nfiles, 2);
	snprintf(path, sizeof(path), "%s/diff.md", dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/diff.json", dir);
	unlink(path);
	rmdir(dir);
	/* an unwritable place fails with the errno */
	cr_assert_lt(prs_diff_write(dd, "/proc/no/such/dir", &err), 0);
	prs_diff_free(dd);
	prs_profile_free(a);
	prs_profile_free(b);
}

Test(diff, a_recording_matches_its_folded_export)
{
	/* the folded text has no files and no kinds: functions then match by name */
	struct built b = build("w");
	struct prs_err err = { 0 };
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	struct prs_profile *fp;
	struct prs_diff *d;

	cr_assert_eq(prs_export_folded(b.p, &(struct prs_view_opts){ .view = PRS_VIEW_WALL }, f, &err), 0);
	fclose(f);
	fp = folded(text);
	d = compute(b.p, fp, PRS_VIEW_WALL);
	cr_assert(prs_diff_match_by_name(d->match));
	cr_assert_not(d->timed);
	cr_assert_eq(d->side[0].weight, d->side[1].weight);
	cr_assert_eq(d->nrows, 7); /* main helper work hot app+0x2000 [empty stack] [read] */
	for (size_t i = 0; i < d->nrows; i++) {
		cr_assert_float_eq(d->rows[i].total_sh.delta, 0, 1e-9, "%s", d->rows[i].name);
		cr_assert_float_eq(d->rows[i].self_sh.delta, 0, 1e-9, "%s", d->rows[i].name);
	}
	cr_assert_eq(find_row(d, "work")->kind, PRS_KIND_PYTHON);
	prs_diff_free(d);
	free(text);
	prs_profile_free(fp);
	prs_profile_free(b.p);
}

Test(export_speedscope, equal_frames_share_one_entry)
{
	/* two raw frames outside every mapping: different frame ids, both "[unknown]" */
	struct prs_profile *p = prs_profile_new();
	uint32_t f1 = prs_profile_raw_frame(p, PRS_NO_MAPPING, 0x1000, false);
	uint32_t f2 = prs_profile_raw_frame(p, PRS_NO_MAPPING, 0x2000, false);
	uint32_t s1 = prs_profile_stack(p, 0, f1), s2 = prs_profile_stack(p, 0, f2);
	char *text;
	json_t *root, *samples;

	add_sample(p, 1, 0, s1, 1, PRS_STATE_RUNNING, -1);
	add_sample(p, 1, 1, s2, 1, PRS_STATE_RUNNING, -1);
	text = run_export(prs_export_speedscope, p, PRS_VIEW_CPU, NULL);
	root = parse_json(text);
	cr_assert_eq(json_array_size(json_object_get(json_object_get(root, "shared"), "frames")), 1);
	cr_assert_str_eq(ss_frame(root, 0), "[unknown]");
	samples = json_object_get(json_array_get(json_object_get(root, "profiles"), 0), "samples");
	/* different stacks, printed alike: two samples (not merged), the same frame */
	cr_assert_eq(json_array_size(samples), 2);
	json_decref(root);
	free(text);
	prs_profile_free(p);
}

Test(export_pprof, main_binary_first_and_names_cleaned)
{
	/* libc is recorded first, but the command's program must be pprof's mapping[0] */
	struct prs_profile *p = prs_profile_new();
	struct prs_mapping libc = { .start = 0x7f0000000000, .end = 0x7f0000100000, .offset = 0x1000 };
	struct prs_mapping app = { .start = 0x400000, .end = 0x500000 };
	uint32_t ml, ma, fl, fa, bad, s;
	size_t len, i;
	char *gz;
	Perftools__Profiles__Profile *pr;
	bool found = false;

	libc.path = str(p, "/usr/lib/x86_64-linux-gnu/libc.so.6");
	app.path = str(p, "/srv/bin/server");
	ml = prs_profile_mapping(p, &libc);
	ma = prs_profile_mapping(p, &app);
	fl = prs_profile_raw_frame(p, ml, 0x7f0000000100, false);
	fa = prs_profile_raw_frame(p, ma, 0x400100, false);
	bad = prs_profile_named_frame(p, PRS_KIND_PYTHON, prs_profile_string(p, "f\xc3(x)", 5), 0, 0);
	s = prs_profile_stack(p, prs_profile_stack(p, prs_profile_stack(p, 0, fa), fl), bad);
	add_sample(p, 5, 0, s, 1, PRS_STATE_RUNNING, -1);
	prs_profile_meta(p, "command", "/srv/bin/server --port 80");
	gz = run_export(prs_export_pprof, p, PRS_VIEW_CPU, &len);
	pr = decode_pprof(gz, len);
	cr_assert_eq(pr->n_mapping, 2);
	cr_assert_str_eq(pstr(pr, pr->mapping[0]->filename), "/srv/bin/server");
	cr_assert_eq(pr->mapping[0]->id, 1);
	cr_assert_str_eq(pstr(pr, pr->mapping[1]->filename), "/usr/lib/x86_64-linux-gnu/libc.so.6");
	cr_assert_eq(pr->mapping[1]->id, 2);
	cr_assert_eq(pr->mapping[1]->file_offset, 0x1000);
	cr_assert_str_eq(pstr(pr, pr->mapping[1]->build_id), ""); /* none known */
	for (i = 0; i < pr->n_location; i++) {
		const Perftools__Profiles__Location *l = pr->location[i];

		if (l->address == 0x400100)
			cr_assert_eq(l->mapping_id, 1);
		if (l->address == 0x7f0000000100) {
			cr_assert_eq(l->mapping_id, 2);
			/* unsymbolized: named by file offset, addr - start + offset */
			cr_assert_str_eq(pstr(pr, pfunc(pr, l->line[0]->function_id)->name), "libc.so.6+0x1100");
		}
	}
	for (i = 0; i < pr->n_function; i++)
		found |= strcmp(pstr(pr, pr->function[i]->name), "f\xef\xbf\xbd(x)") == 0;
	cr_assert(found, "the invalid byte is replaced by U+FFFD");
	perftools__profiles__profile__free_unpacked(pr, NULL);
	free(gz);
	prs_profile_free(p);
}

Test(export_pprof, main_binary_is_the_versioned_program)
{
	/* `python3 app.py` under pyenv: the shim's bash is mapped first (before its exec), then
	 * python3.11 and libpython; pprof's main binary must be python3.11, not bash */
	const char *paths[] = { "/usr/bin/bash", "/root/.pyenv/versions/3.11.7/bin/python3.11",
				"/root/.pyenv/versions/3.11.7/lib/libpython3.11.so.1.0" };
	struct prs_profile *p = prs_profile_new();
	uint32_t s = 0;
	size_t len;
	char *gz;
	Perftools__Profiles__Profile *pr;

	for (unsigned k = 0; k < 3; k++) {
		struct prs_mapping m = { .start = 0x400000 + 0x100000 * k, .end = 0x480000 + 0x100000 * k };
		uint32_t map;

		m.path = str(p, paths[k]);
		map = prs_profile_mapping(p, &m);
		s = prs_profile_stack(p, s, prs_profile_raw_frame(p, map, m.start + 0x10, false));
	}
	add_sample(p, 5, 0, s, 1, PRS_STATE_RUNNING, -1);
	prs_profile_meta(p, "command", "python3 app.py");
	gz = run_export(prs_export_pprof, p, PRS_VIEW_CPU, &len);
	pr = decode_pprof(gz, len);
	cr_assert_eq(pr->n_mapping, 3);
	cr_assert_str_eq(pstr(pr, pr->mapping[0]->filename), paths[1]);
	perftools__profiles__profile__free_unpacked(pr, NULL);
	free(gz);
	prs_profile_free(p);
}

/* ---- a process tree (tests/fixtures/profile/tree.pyrs, described in its README) ---- */

static struct prs_profile *load_tree(void)
{
	struct prs_profile *p;
	struct prs_err err;

	cr_assert_eq(prs_pyrs_read("tests/fixtures/profile/tree.pyrs", &p, NULL, 0, &err), 0,
		     "%s (run from the repository root)", err.msg);
	return p;
}

/*
 * Every sample names its process (a pid label) and thread; the raw frames of the two workers are
 * two locations in two mappings of the same file (process-qualified), both symbolized.
 */
Test(export_pprof, samples_name_their_process_and_mappings_are_per_process)
{
	struct prs_profile *p = load_tree();
	size_t len, i, j;
	char *gz = run_export(prs_export_pprof, p, PRS_VIEW_WALL, &len);
	Perftools__Profiles__Profile *pr = decode_pprof(gz, len);
	uint64_t map_of[3] = { 0 }; /* pid 100 + k -> the mapping of its raw frame */
	int64_t by_pid[3] = { 0 };
	char stack[512];

	cr_assert_eq(pr->n_sample, 5);
	for (i = 0; i < pr->n_sample; i++) {
		const Perftools__Profiles__Sample *s = pr->sample[i];
		int64_t pid = 0, tid = 0;

		cr_assert_not_null(plabel(pr, s, "pid", &pid), "a pid label");
		plabel(pr, s, "thread", &tid);
		cr_assert(pid >= 100 && pid <= 102, "pid %lld", (long long)pid);
		by_pid[pid - 100] += s->value[0];
		pp_stack(pr, s, stack, sizeof(stack));
		if (tid == 103) {
			cr_assert_eq(pid, 102);
			cr_assert_str_eq(stack, "[waiting for the GIL];work;main");
			cr_assert_str_eq(plabel(pr, s, "thread_name", NULL), "worker");
		}
		for (j = 0; j < s->n_location_id; j++) {
			const Perftools__Profiles__Location *l = ploc(pr, s->location_id[j]);

			if (l->address == 0x400abc) {
				cr_assert_neq(l->mapping_id, 0);
				cr_assert_str_eq(pstr(pr, pfunc(pr, l->line[0]->function_id)->name), "PyEval");
				map_of[pid - 100] = l->mapping_id;
			}
		}
	}
	cr_assert_eq(by_pid[0], 15);
	cr_assert_eq(by_pid[1], 20);
	cr_assert_eq(by_pid[2], 30);
	cr_assert_eq(pr->n_mapping, 2);
	cr_assert(map_of[1] && map_of[2] && map_of[1] != map_of[2], "one mapping per process");
	cr_assert_str_eq(pstr(pr, pr->mapping[0]->filename), pstr(pr, pr->mapping[1]->filename));
	perftools__profiles__profile__free_unpacked(pr, NULL);
	free(gz);
	prs_profile_free(p);
}

/*
 * The kernel's mapping is one of the model for all processes (pid 0), its frames too: in pprof,
 * where a Mapping has no pid, it is a Mapping per process whose samples use it, each with its
 * own locations, so that every sample's locations refer to mappings of its own process (the
 * `pid` label -> location -> mapping join says whose a mapping is). A profile of one process
 * keeps the model's mappings, one each.
 */
static struct prs_profile *two_processes_in_the_kernel(int nproc)
{
	struct prs_profile *p = prs_profile_new();
	struct prs_mapping kern = { .start = 0xffff800000000000ull, .end = UINT64_MAX };
	uint32_t k, cmd = str(p, "python3 pool.py");

	kern.path = str(p, "[kernel.kallsyms]");
	k = prs_profile_raw_frame(p, prs_profile_mapping(p, &kern), 0xffffffff81000100ull, false);
	for (int i = 0; i < nproc; i++) {
		int32_t pid = 101 + i;
		struct prs_mapping py = { .start = 0x400000, .end = 0x800000, .pid = pid,
					  .build_id_len = 2, .build_id = { 0xca, 0xfe } };
		uint32_t u, s;

		py.path = str(p, "/usr/bin/python3.11");
		u = prs_profile_raw_frame(p, prs_profile_mapping(p, &py), 0x400abc, false);
		s = prs_profile_stack(p, prs_profile_stack(p, 0, u), k);
		cr_assert_eq(prs_profile_process(p, pid, 100, cmd, 0), 0);
		cr_assert_eq(prs_profile_sample(p, &(struct prs_sample){ .time_ns = 10000000, .tid = pid,
			.pid = pid, .state = PRS_STATE_RUNNING, .syscall = -1, .stack = s,
			.weight = 3 + (uint32_t)i }), 0);
	}
	prs_profile_meta(p, "command", "python3 pool.py");
	prs_profile_meta(p, "rate_hz", "100");
	return p;
}

Test(export_pprof, a_mapping_of_all_processes_is_one_per_process)
{
	struct prs_profile *p = two_processes_in_the_kernel(2);
	size_t len, i, j;
	char *gz = run_export(prs_export_pprof, p, PRS_VIEW_CPU, &len);
	Perftools__Profiles__Profile *pr = decode_pprof(gz, len);
	int64_t owner[8] = { 0 }; /* mapping id -> the pid whose samples use it */
	uint64_t kloc[2] = { 0 };

	cr_assert_eq(pr->n_sample, 2);
	cr_assert_eq(pr->n_mapping, 4, "python3.11 twice, the kernel once per process: %zu",
		     pr->n_mapping);
	for (i = 0; i < pr->n_sample; i++) {
		const Perftools__Profiles__Sample *s = pr->sample[i];
		int64_t pid = 0;

		cr_assert_not_null(plabel(pr, s, "pid", &pid));
		cr_assert(pid == 101 || pid == 102);
		cr_assert_eq(s->value[0], pid == 101 ? 3 : 4);
		cr_assert_eq(s->n_location_id, 2);
		for (j = 0; j < s->n_location_id; j++) {
			const Perftools__Profiles__Location *l = ploc(pr, s->location_id[j]);

			cr_assert(l->mapping_id >= 1 && l->mapping_id <= pr->n_mapping);
			cr_assert(!owner[l->mapping_id] || owner[l->mapping_id] == pid,
				  "mapping %llu is used by pids %lld and %lld",
				  (unsigned long long)l->mapping_id, (long long)owner[l->mapping_id],
				  (long long)pid);
			owner[l->mapping_id] = pid;
			if (l->address == 0xffffffff81000100ull)
				kloc[pid - 101] = l->id;
		}
	}
	cr_assert(kloc[0] && kloc[1] && kloc[0] != kloc[1], "a kernel location per process");
	for (i = 0; i < 2; i++) {
		const Perftools__Profiles__Location *l = ploc(pr, kloc[i]);
		const Perftools__Profiles__Mapping *m = pr->mapping[l->mapping_id - 1];

		cr_assert_eq(m->id, l->mapping_id);
		cr_assert_str_eq(pstr(pr, m->filename), "[kernel.kallsyms]");
		cr_assert_eq(m->memory_start, 0xffff800000000000ull);
		cr_assert_eq(m->memory_limit, UINT64_MAX);
		cr_assert(m->has_functions && m->has_filenames && m->has_line_numbers);
		cr_assert_eq(l->n_line, 1);
	}
	/* the main binary stays first */
	cr_assert_str_eq(pstr(pr, pr->mapping[0]->filename), "/usr/bin/python3.11");
	perftools__profiles__profile__free_unpacked(pr, NULL);
	free(gz);
	prs_profile_free(p);

	/* one process: the model's mappings, the kernel's once */
	p = two_processes_in_the_kernel(1);
	gz = run_export(prs_export_pprof, p, PRS_VIEW_CPU, &len);
	pr = decode_pprof(gz, len);
	cr_assert_eq(pr->n_mapping, p->nmappings);
	cr_assert_eq(pr->n_mapping, 2);
	cr_assert_eq(pr->n_location, 2);
	perftools__profiles__profile__free_unpacked(pr, NULL);
	free(gz);
	prs_profile_free(p);
}

/* One profile per process and thread, named so that they can be told apart. */
Test(export_speedscope, a_profile_per_process_and_thread)
{
	static const char *const names[] = {
		"sh -c python3 pool.py [100]: thread 100 (MainThread)",
		"python3 pool.py [101]: thread 101 (MainThread)",
		"python3 pool.py [102]: thread 102 (MainThread)",
		"python3 pool.py [102]: thread 103 (worker)",
	};
	static const double weights[] = { 15e7, 20e7, 20e7, 10e7 };
	struct prs_profile *p = load_tree();
	char *text = run_export(prs_export_speedscope, p, PRS_VIEW_WALL, NULL);
	json_t *root = parse_json(text), *profs = json_object_get(root, "profiles");
	char stack[512];

	cr_assert_eq(json_array_size(profs), 4);
	for (size_t i = 0; i < 4; i++) {
		json_t *pf = json_array_get(profs, i);

		cr_assert_str_eq(json_string_value(json_object_get(pf, "name")), names[i]);
		cr_assert_eq(json_number_value(json_object_get(pf, "endValue")), weights[i]);
	}
	/* process 100's timeline: sh in wait4, then (after the exec) python in read */
	ss_stack(root, json_array_get(json_object_get(json_array_get(profs, 0), "samples"), 0),
		 stack, sizeof(stack));
	cr_assert_str_eq(stack, "sh_main;[wait4]");
	ss_stack(root, json_array_get(json_object_get(json_array_get(profs, 0), "samples"), 1),
		 stack, sizeof(stack));
	cr_assert_str_eq(stack, "main;wait;[read]");
	ss_stack(root, json_array_get(json_object_get(json_array_get(profs, 3), "samples"), 0),
		 stack, sizeof(stack));
	cr_assert_str_eq(stack, "main;work;[waiting for the GIL]");
	json_decref(root);
	free(text);
	prs_profile_free(p);
}

/* diff compares functions: process roots are not functions; the GIL wait is one, of its kind. */
Test(diff, processes_are_not_functions)
{
	struct prs_profile *p = load_tree();
	struct prs_diff *d = compute(p, p, PRS_VIEW_WALL);
	bool gil = false;

	cr_assert_eq(d->nrows, 8, "sh_main main wait work PyEval [wait4] [read] [waiting for the GIL]");
	for (size_t i = 0; i < d->nrows; i++) {
		cr_assert_null(strstr(d->rows[i].name, "pool.py"), "%s", d->rows[i].name);
		cr_assert_null(strstr(d->rows[i].name, "thread "), "%s", d->rows[i].name);
		if (strcmp(d->rows[i].name, "[waiting for the GIL]") == 0) {
			gil = true;
			cr_assert_eq(d->rows[i].kind, PRS_KIND_OFF_GIL);
			cr_assert_eq(d->rows[i].self_w[1], 10);
		}
	}
	cr_assert(gil);
	prs_diff_free(d);
	prs_profile_free(p);
}

/*
 * A thread's timeline is in time order whatever the order of its samples in the profile (equal
 * times: profile order), and threads come by tid however they first appear: tid 12's samples
 * at t = 30, 10, 20, 10 ms (stacks c, a, b, d) read a, d, b, c; tid 11 (seen second) is first.
 */
Test(export_speedscope, timelines_in_time_order_whatever_the_sample_order)
{
	static const struct { int32_t tid; uint64_t ms; const char *leaf; } in[] = {
		{ 12, 30, "c" }, { 11, 5, "x" }, { 12, 10, "a" }, { 12, 20, "b" }, { 12, 10, "d" },
	};
	static const char *const want[] = { "main;a", "main;d", "main;b", "main;c" };
	struct prs_profile *p = prs_profile_new();
	uint32_t file, top;
	json_t *root, *profs, *samples;
	char *text, stack[128];

	cr_assert_not_null(p);
	prs_profile_meta(p, "rate_hz", "100");
	file = prs_profile_string(p, "t.py", 4);
	top = prs_profile_stack(p, 0, prs_profile_named_frame(p, PRS_KIND_PYTHON,
							      prs_profile_string(p, "main", 4), file, 1));
	for (size_t i = 0; i < sizeof(in) / sizeof(in[0]); i++) {
		uint32_t leaf = prs_profile_named_frame(p, PRS_KIND_PYTHON,
							prs_profile_string(p, in[i].leaf, 1), file, 2);
		struct prs_sample s = { .time_ns = in[i].ms * 1000000, .tid = in[i].tid, .syscall = -1,
					.stack = prs_profile_stack(p, top, leaf), .weight = 1 };

		cr_assert_eq(prs_profile_sample(p, &s), 0);
	}
	text = run_export(prs_export_speedscope, p, PRS_VIEW_CPU, NULL);
	root = parse_json(text);
	profs = json_object_get(root, "profiles");
	cr_assert_eq(json_array_size(profs), 2);
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(profs, 0), "name")), "thread 11");
	samples = json_object_get(json_array_get(profs, 1), "samples");
	cr_assert_eq(json_array_size(samples), 4);
	for (size_t i = 0; i < 4; i++) {
		ss_stack(root, json_array_get(samples, i), stack, sizeof(stack));
		cr_assert_str_eq(stack, want[i], "sample %zu", i);
	}
	json_decref(root);
	free(text);
	prs_profile_free(p);
}
