/* SPDX-License-Identifier: MIT */
/*
 * The speedscope export (https://github.com/jlfwong/speedscope/wiki/Importing-from-custom-sources):
 * one "sampled" profile per thread over a shared frame table, written with jansson. Also the
 * helpers the exports share: UTF-8 cleaning (jansson and protobuf need valid UTF-8, names from
 * the target are arbitrary bytes) and the sampling period from the profile's metadata.
 *
 * Stacks repeat a lot (a hot loop is one stack sampled thousands of times), so the JSON array of
 * a stack of the view (a stack and its off-CPU leaf) is built once and referenced from every
 * sample that has it: jansson serializes a shared value at each place it appears.
 */
#include "pyrsprof/export.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "util/banned.h"


/* ---- shared helpers ---- */

/* Length of the valid UTF-8 sequence at s[0..n), or 0 if it is invalid (RFC 3629, table 3-7). */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
	unsigned char c = s[0];

	if (c >= 0x01 && c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		return n >= 2 && (s[1] & 0xc0) == 0x80 ? 2 : 0;
	if (c >= 0xe0 && c <= 0xef) {
		unsigned char lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;

		return n >= 3 && s[1] >= lo && s[1] <= hi && (s[2] & 0xc0) == 0x80 ? 3 : 0;
	}
	if (c >= 0xf0 && c <= 0xf4) {
		unsigned char lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;

		return n >= 4 && s[1] >= lo && s[1] <= hi && (s[2] & 0xc0) == 0x80 &&
		       (s[3] & 0xc0) == 0x80 ? 4 : 0;
	}
	return 0; /* NUL, a continuation byte, 0xc0/0xc1 (overlong), 0xf5.. */
}

const char *prs_utf8_clean(const char *s, size_t len, struct prs_buf *scratch, size_t *outlen)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t i = 0, k;

	while (i < len && (k = utf8_seq(u + i, len - i)) != 0)
		i += k;
	if (i == len) {
		if (outlen)
			*outlen = len;
		return s;
	}
	prs_buf_reset(scratch);
	if (prs_buf_append(scratch, s, i))
		return NULL;
	while (i < len) {
		k = utf8_seq(u + i, len - i);
		if (k) {
			if (prs_buf_append(scratch, s + i, k))
				return NULL;
			i += k;
		} else {
			/* one U+FFFD per invalid byte: simple, and never swallows a valid character */
			if (prs_buf_append(scratch, "\xef\xbf\xbd", 3))
				return NULL;
			i++;
		}
	}
	if (prs_buf_putc(scratch, '\0'))
		return NULL;
	if (outlen)
		*outlen = scratch->len - 1;
	return (const char *)scratch->data;
}

uint64_t prs_profile_period_ns(const struct prs_profile *p)
{
	const char *v = prs_profile_meta_get(p, "rate_hz");
	char *end;
	double hz;

	if (!v || !*v)
		return 0;
	errno = 0;
	hz = strtod(v, &end);
	if (errno || *end || !(hz > 0) || hz > 1e6)
		return 0;
	return (uint64_t)(1e9 / hz + 0.5);
}

/* ---- speedscope ---- */

struct ss_ctx {
	const struct prs_profile *p;
	struct prs_profile_view *v;
	json_t *frames;       /* shared.frames */
	uint32_t *frame_idx;  /* view frame id -> index in frames + 1 (0: not yet) */
	struct prs_buf scratch, key;
	struct prs_strmap frame_map; /* "name\0file\0line" -> index: equal frames share an entry */
	char **keys;                 /* owned keys of frame_map */
	size_t nkeys, cap_keys;
	json_t **arrays;             /* per view stack: its JSON array, once built */
};

/* A JSON number: an integer when v is one (weights in ns or counts always are), else a real. */
static json_t *jnum(double v)
{
	if (v >= 0 && v < 9e15 && v == (double)(json_int_t)v)
		return json_integer((json_int_t)v);
	return json_real(v);
}

/* A jansson string of the bytes s[0..len), cleaned to UTF-8. NULL on ENOMEM. */
static json_t *jstr(struct ss_ctx *c, const char *s, size_t len)
{
	size_t n;
	const char *t = prs_utf8_clean(s, len, &c->scratch, &n);

	return t ? json_stringn(t, n) : NULL;
}

/*
 * The index of {"name", "file"?, "line"?} in the frame table, appended if new (speedscope keys
 * frames by index, so two equal frames must share one, or its views would split them).
 * Returns UINT32_MAX on ENOMEM.
 */
static uint32_t add_frame(struct ss_ctx *c, const char *name, uint32_t file, uint32_t line)
{
	const char *fs = file ? c->p->strings[file] : "";
	size_t flen = file ? c->p->string_lens[file] : 0;
	json_t *o, *v;
	uint32_t idx;
	char *k;

	prs_buf_reset(&c->key);
	if (prs_buf_append(&c->key, name, strlen(name) + 1) || prs_buf_append(&c->key, fs, flen) ||
	    prs_buf_putc(&c->key, '\0') || prs_buf_printf(&c->key, "%u", file ? line : 0))
		return UINT32_MAX;
	idx = prs_strmap_get(&c->frame_map, c->key.data, c->key.len);
	if (idx != PRS_MAP_NONE)
		return idx;
	if (!(o = json_object()))
		return UINT32_MAX;
	v = jstr(c, name, strlen(name));
	if (!v || json_object_set_new(o, "name", v))
		goto fail;
	if (file) {
		v = jstr(c, fs, flen);
		if (!v || json_object_set_new(o, "file", v))
			goto fail;
		if (line && json_object_set_new(o, "line", json_integer(line)))
			goto fail;
	}
	if (json_array_append_new(c->frames, o))
		return UINT32_MAX;
	idx = (uint32_t)(json_array_size(c->frames) - 1);
	if (prs_array_grow((void **)&c->keys, &c->cap_keys, c->nkeys + 1, sizeof(*c->keys)) ||
	    !(k = malloc(c->key.len)))
		return UINT32_MAX;
	memcpy(k, c->key.data, c->key.len);
	c->keys[c->nkeys++] = k;
	if (prs_strmap_put(&c->frame_map, k, c->key.len, idx))
		return UINT32_MAX;
	return idx;
fail:
	json_decref(o);
	return UINT32_MAX;
}

static uint32_t frame_index(struct ss_ctx *c, uint32_t id)
{
	struct prs_view_frame f;
	char label[PRS_MAX_NAME + 64];
	uint32_t idx;

	if (c->frame_idx[id])
		return c->frame_idx[id] - 1;
	prs_view_frame(c->v, id, &f, label, sizeof(label));
	prs_view_frame_label(c->v, id, label, sizeof(label));
	if (!label[0])
		snprintf(label, sizeof(label), "[unknown]");
	idx = add_frame(c, label, f.frame && !f.frame->raw && f.frame->file < c->p->nstrings
			? f.frame->file : 0, f.line);
	if (idx != UINT32_MAX)
		c->frame_idx[id] = idx + 1;
	return idx;
}

/* The JSON stack of view stack i, shared between samples. Borrowed; NULL on ENOMEM. */
static json_t *stack_json(struct ss_ctx *c, uint32_t i)
{
	const struct prs_view_stack *st;
	const uint32_t *ids;
	size_t n, k, nst;
	json_t *a;

	if (c->arrays[i])
		return c->arrays[i];
	/* stored before filling, so an ENOMEM below leaves nothing dangling */
	if (!(a = c->arrays[i] = json_array()))
		return NULL;
	/* the leaf's entry of the frame table comes before the stack's (as it did when each sample's
	 * leaf was looked up first): the table's order does not depend on how stacks are cached */
	st = prs_view_stacks(c->v, &nst) + i;
	if (st->leaf != PRS_VIEW_NONE && frame_index(c, st->leaf) == UINT32_MAX)
		return NULL;
	n = prs_view_frames(c->v, i, &ids, NULL);
	for (k = 0; k < n; k++) {
		uint32_t idx = frame_index(c, ids[k]);

		if (idx == UINT32_MAX || json_array_append_new(a, json_integer(idx)))
			return NULL;
	}
	return a;
}

struct ss_sample {
	int32_t pid, tid;
	uint32_t index; /* in p->samples */
	uint32_t vstack;
	uint64_t time_ns;
};

static int ss_cmp(const void *a, const void *b)
{
	const struct ss_sample *x = a, *y = b;

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	if (x->time_ns != y->time_ns)
		return x->time_ns < y->time_ns ? -1 : 1;
	return x->index < y->index ? -1 : x->index > y->index;
}

/*
 * The name of the profile of (pid, tid): "thread <tid> (<name>)" ("thread <tid>", or "all
 * samples" for input without threads), after "<command> [<pid>]: " when the profile holds more
 * than one process.
 */
static void profile_title(struct ss_ctx *c, const struct ss_sample *s, char *title, size_t size)
{
	size_t off = 0, tnlen = 0;
	const char *tn = prs_view_thread_name(c->v, s->pid, s->tid, &tnlen);

	if (prs_view_processes(c->v) > 1) {
		prs_view_process_label(c->v, s->pid, s->time_ns, title, size - PRS_MAX_NAME / 2);
		off = strlen(title);
		off += (size_t)snprintf(title + off, size - off, ": ");
	}
	if (tn)
		snprintf(title + off, size - off, "thread %" PRId32 " (%.*s)", s->tid,
			 (int)(tnlen > PRS_MAX_NAME ? PRS_MAX_NAME : tnlen), tn);
	else if (s->tid == 0)
		snprintf(title + off, size - off, "all samples");
	else
		snprintf(title + off, size - off, "thread %" PRId32, s->tid);
}

/* Builds one sampled profile from samples ss[0..n) (one thread, time order). NULL on ENOMEM. */
static json_t *thread_profile(struct ss_ctx *c, const struct ss_sample *ss, size_t n,
			      uint64_t period, double *total)
{
	const struct prs_profile *p = c->p;
	json_t *prof = json_object(), *samples = json_array(), *weights = json_array(), *v;
	char title[2 * PRS_MAX_NAME + 96];
	json_t *prev = NULL;
	double unit = (double)(period ? period : 1), w = 0, sum = 0;
	size_t i;

	/* the arrays belong to prof from here on (set_new steals them, also on failure) */
	if (!prof || json_object_set_new(prof, "samples", samples) ||
	    json_object_set_new(prof, "weights", weights)) {
		json_decref(prof);
		return NULL;
	}
	profile_title(c, &ss[0], title, sizeof(title));
	for (i = 0; i < n; i++) {
		const struct prs_sample *s = &p->samples[ss[i].index];
		json_t *a = stack_json(c, ss[i].vstack);

		if (!a)
			goto fail;
		if (a != prev && prev) {
			if (json_array_append(samples, prev) ||
			    json_array_append_new(weights, jnum(w)))
				goto fail;
			w = 0;
		}
		prev = a;
		w += (double)s->weight * unit;
		sum += (double)s->weight * unit;
	}
	if (prev && (json_array_append(samples, prev) || json_array_append_new(weights, jnum(w))))
		goto fail;
	v = jstr(c, title, strlen(title));
	if (!v || json_object_set_new(prof, "name", v) ||
	    json_object_set_new(prof, "type", json_string("sampled")) ||
	    json_object_set_new(prof, "unit", json_string(period ? "nanoseconds" : "none")) ||
	    json_object_set_new(prof, "startValue", json_integer(0)) ||
	    json_object_set_new(prof, "endValue", jnum(sum)))
		goto fail;
	*total = sum;
	return prof;
fail:
	json_decref(prof);
	return NULL;
}

int prs_export_speedscope(const struct prs_profile *p, enum prs_view view, FILE *out,
			  struct prs_err *err)
{
	struct ss_ctx *c = calloc(1, sizeof(*c));
	struct ss_sample *ss = NULL;
	json_t *root = NULL, *profiles = json_array(), *shared = json_object(), *v;
	const char *command = prs_profile_meta_get(p, "command");
	uint64_t period = prs_profile_period_ns(p);
	double best = -1;
	size_t n = 0, i, j, active = 0, nst = 0;
	int rc = 0;

	/* root owns profiles, shared and shared.frames from the start: one json_decref frees all */
	root = json_object();
	if (c)
		c->frames = json_array();
	if (!root || json_object_set_new(root, "profiles", profiles) ||
	    json_object_set_new(root, "shared", shared) || !c ||
	    json_object_set_new(shared, "frames", c->frames)) {
		if (c)
			c->frames = NULL;
		json_decref(root);
		free(c);
		return prs_err_set(err, -ENOMEM, "speedscope export: out of memory");
	}
	c->p = p;
	prs_buf_init(&c->scratch);
	prs_buf_init(&c->key);
	prs_strmap_init(&c->frame_map);
	if ((rc = prs_view_new(p, &(struct prs_view_opts){ .view = view }, &c->v, err)))
		goto out;
	prs_view_stacks(c->v, &nst);
	c->frame_idx = calloc(prs_view_nframes(c->v), sizeof(*c->frame_idx));
	c->arrays = calloc(nst ? nst : 1, sizeof(*c->arrays));
	ss = malloc((p->nsamples ? p->nsamples : 1) * sizeof(*ss));
	if (!c->frame_idx || !c->arrays || !ss)
		goto nomem;
	/* the view's samples, per process and thread in time order: each thread's timeline */
	for (i = 0; i < p->nsamples; i++) {
		uint32_t vs = prs_view_sample_stack(c->v, i);

		if (vs == PRS_VIEW_NONE)
			continue;
		ss[n] = (struct ss_sample){ prs_view_pid(c->v, &p->samples[i]), p->samples[i].tid,
					    (uint32_t)i, vs, p->samples[i].time_ns };
		n++;
	}
	if (n)
		qsort(ss, n, sizeof(*ss), ss_cmp);
	for (i = 0; i < n; i = j) {
		json_t *prof;
		double total = 0;

		for (j = i; j < n && ss[j].tid == ss[i].tid && ss[j].pid == ss[i].pid; j++)
			;
		prof = thread_profile(c, ss + i, j - i, period, &total);
		if (!prof || json_array_append_new(profiles, prof))
			goto nomem;
		if (total > best) {
			best = total;
			active = json_array_size(profiles) - 1;
		}
	}
	v = command ? jstr(c, command, strlen(command)) : json_string("pyrsprof profile");
	if (!v || json_object_set_new(root, "name", v) ||
	    json_object_set_new(root, "$schema",
				json_string("https://www.speedscope.app/file-format-schema.json")) ||
	    json_object_set_new(root, "exporter", json_string("pyrsprof")) ||
	    json_object_set_new(root, "activeProfileIndex", json_integer((json_int_t)active)))
		goto nomem;
	if (json_dumpf(root, out, JSON_COMPACT | JSON_REAL_PRECISION(17)) != 0 ||
	    fputc('\n', out) == EOF || fflush(out) != 0 || ferror(out)) {
		rc = prs_err_set(err, -EIO, "speedscope output: write error");
		goto out;
	}
	goto out;
nomem:
	rc = prs_err_set(err, -ENOMEM, "speedscope export: out of memory");
out:
	for (i = 0; c->arrays && i < nst; i++)
		json_decref(c->arrays[i]);
	free(c->arrays);
	free(c->frame_idx);
	prs_buf_release(&c->scratch);
	prs_buf_release(&c->key);
	prs_strmap_release(&c->frame_map);
	for (i = 0; i < c->nkeys; i++)
		free(c->keys[i]);
	free(c->keys);
	prs_view_free(c->v);
	free(c);
	json_decref(root);
	free(ss);
	return rc;
}
