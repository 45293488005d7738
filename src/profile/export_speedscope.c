/* SPDX-License-Identifier: MIT */
/*
 * The speedscope export (https://github.com/jlfwong/speedscope/wiki/Importing-from-custom-sources):
 * one "sampled" profile per thread over a shared frame table. Also the helpers the exports share:
 * UTF-8 cleaning (jansson and protobuf need valid UTF-8, names from the target are arbitrary
 * bytes) and the sampling period from the profile's metadata.
 *
 * The JSON is streamed: every sample lists its whole stack, so a 1M-sample recording makes
 * ~160 MB of text, and a jansson tree of it took 5.5 s CPU and 185 MB (an array entry and an
 * integer object per sample). Here the text of a view stack's array ("[3,7,12]") is made once and
 * copied for every sample that has it; strings (names, files, titles) and non-integer numbers are
 * still encoded by jansson (json_dumps of the one value), so escaping stays the library's. The
 * keys come in the order jansson wrote them (insertion order): the output is byte for byte what
 * the tree gave, "shared" (the frame table, complete only once every stack is seen) after
 * "profiles".
 */
#include "pyrsprof/export.h"
#include "profile/profile-internal.h"

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

size_t prs_utf8_control_len(const char *s, size_t len)
{
	const unsigned char *u = (const unsigned char *)s;

	if (u[0] < 0x20 || u[0] == 0x7f)
		return 1;
	return len >= 2 && u[0] == 0xc2 && u[1] >= 0x80 && u[1] <= 0x9f ? 2 : 0;
}

bool prs_utf8_valid(const char *s, size_t len)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t i = 0, k;

	while (i < len && (k = utf8_seq(u + i, len - i)) != 0)
		i += k;
	return i == len;
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

/* Where the JSON goes: a buffer flushed to the file in large writes. */
struct ss_out {
	FILE *f;
	struct prs_buf b;
	bool failed;
};

#define SS_FLUSH (1u << 20)

static void out_flush(struct ss_out *o)
{
	if (o->b.len && fwrite(o->b.data, 1, o->b.len, o->f) != o->b.len)
		o->failed = true;
	prs_buf_reset(&o->b);
}

static int out_put(struct ss_out *o, const void *s, size_t len)
{
	/* a big block (the frame table, a thread's weights) goes out as it is, not copied here */
	if (len >= SS_FLUSH) {
		out_flush(o);
		if (fwrite(s, 1, len, o->f) != len)
			o->failed = true;
		return 0;
	}
	if (prs_buf_append(&o->b, s, len))
		return -ENOMEM;
	if (o->b.len >= SS_FLUSH)
		out_flush(o);
	return 0;
}

static int out_str(struct ss_out *o, const char *s)
{
	return out_put(o, s, strlen(s));
}

/* Appends the decimal text of v. */
static int put_u64(struct prs_buf *b, uint64_t v)
{
	char d[PRS_FMT_U64_MAX];

	return prs_buf_append(b, d, prs_fmt_u64(d, v));
}

/* Appends the JSON text of v (consumed; NULL is ENOMEM) as jansson writes it. */
static int put_json(struct prs_buf *b, json_t *v)
{
	char *t;
	int rc;

	if (!v)
		return -ENOMEM;
	t = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(17));
	json_decref(v);
	if (!t)
		return -ENOMEM;
	rc = prs_buf_append(b, t, strlen(t));
	free(t);
	return rc;
}

/* A JSON number: an integer when v is one (weights in ns or counts always are), else a real. */
static int put_num(struct prs_buf *b, double v)
{
	if (v >= 0 && v < 9e15 && v == (double)(json_int_t)v)
		return put_u64(b, (uint64_t)v);
	return put_json(b, json_real(v));
}

struct ss_ctx {
	const struct prs_profile *p;
	struct prs_profile_view *v;
	struct prs_buf frames;       /* the frame table's entries, comma-separated */
	uint32_t nframes;
	uint32_t *frame_idx;         /* view frame id -> index in frames + 1 (0: not yet) */
	struct prs_buf scratch, key;
	struct prs_strmap frame_map; /* "name\0file\0line" -> index: equal frames share an entry */
	char **keys;                 /* owned keys of frame_map */
	size_t nkeys, cap_keys;
	struct prs_buf stacks;       /* the JSON arrays of the view stacks seen */
	uint64_t *stack_at;          /* per view stack: offset << 24 | length in stacks, 0: not yet */
};

/* A JSON string of the bytes s[0..len), cleaned to UTF-8, appended to b. */
static int put_str(struct ss_ctx *c, struct prs_buf *b, const char *s, size_t len)
{
	size_t n;
	const char *t = prs_utf8_clean(s, len, &c->scratch, &n);

	return t ? put_json(b, json_stringn(t, n)) : -ENOMEM;
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
	struct prs_buf *b = &c->frames;
	uint32_t idx;
	char *k;

	prs_buf_reset(&c->key);
	if (prs_buf_append(&c->key, name, strlen(name) + 1) || prs_buf_append(&c->key, fs, flen) ||
	    prs_buf_putc(&c->key, '\0') || prs_buf_printf(&c->key, "%u", file ? line : 0))
		return UINT32_MAX;
	idx = prs_strmap_get(&c->frame_map, c->key.data, c->key.len);
	if (idx != PRS_MAP_NONE)
		return idx;
	if ((c->nframes && prs_buf_putc(b, ',')) || prs_buf_append(b, "{\"name\":", 8) ||
	    put_str(c, b, name, strlen(name)))
		return UINT32_MAX;
	if (file && (prs_buf_append(b, ",\"file\":", 8) || put_str(c, b, fs, flen) ||
		     (line && (prs_buf_append(b, ",\"line\":", 8) || put_u64(b, line)))))
		return UINT32_MAX;
	if (prs_buf_putc(b, '}'))
		return UINT32_MAX;
	idx = c->nframes++;
	if (prs_array_grow((void **)&c->keys, &c->cap_keys, c->nkeys + 1, sizeof(*c->keys)) ||
	    !(k = malloc(c->key.len)))
		return UINT32_MAX;
	memcpy(k, c->key.data, c->key.len);
	c->keys[c->nkeys++] = k;
	if (prs_strmap_put(&c->frame_map, k, c->key.len, idx))
		return UINT32_MAX;
	return idx;
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

/* The JSON array of view stack i ("[3,7,12]"), made at its first sample: *text, *len. */
static int stack_text(struct ss_ctx *c, uint32_t i, const char **text, size_t *len)
{
	const struct prs_view_stack *st;
	struct prs_buf *b = &c->stacks;
	const uint32_t *ids;
	size_t n, k, nst, start = b->len;

	if (!c->stack_at[i]) {
		/* the leaf's entry of the frame table comes before the stack's (as it did when each
		 * sample's leaf was looked up first) */
		st = prs_view_stacks(c->v, &nst) + i;
		if (st->leaf != PRS_VIEW_NONE && frame_index(c, st->leaf) == UINT32_MAX)
			return -ENOMEM;
		n = prs_view_frames(c->v, i, &ids, NULL);
		if (prs_buf_putc(b, '['))
			return -ENOMEM;
		for (k = 0; k < n; k++) {
			uint32_t idx = frame_index(c, ids[k]);

			if (idx == UINT32_MAX || (k && prs_buf_putc(b, ',')) || put_u64(b, idx))
				return -ENOMEM;
		}
		if (prs_buf_putc(b, ']'))
			return -ENOMEM;
		/* offset and length in one word (a stack's text is far below 16 MiB: 64k frames of
		 * at most 11 bytes) */
		c->stack_at[i] = (uint64_t)start << 24 | (b->len - start);
	}
	*text = (const char *)b->data + (c->stack_at[i] >> 24);
	*len = (size_t)(c->stack_at[i] & 0xffffff);
	return 0;
}

/*
 * The timelines' order: the view's samples by (pid, tid), then time, then position in the
 * profile, as indexes into p->samples (4 bytes a sample: a sorted array of (pid, tid, time,
 * index, view stack) records was 24 MB of a 1M-sample export). Threads are ordered apart, their
 * samples dealt out in profile order (a recording's samples are in time order per thread), and
 * only a thread whose times go back is sorted.
 */
struct ss_thread {
	int32_t pid, tid;
	size_t start, n; /* its samples: order[start .. start + n) */
};

static int thread_cmp(const void *a, const void *b)
{
	const struct ss_thread *x = a, *y = b;

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	return x->tid < y->tid ? -1 : x->tid > y->tid;
}

static int time_cmp(const void *a, const void *b, void *arg)
{
	const struct prs_profile *p = arg;
	uint32_t i = *(const uint32_t *)a, j = *(const uint32_t *)b;

	if (p->samples[i].time_ns != p->samples[j].time_ns)
		return p->samples[i].time_ns < p->samples[j].time_ns ? -1 : 1;
	return i < j ? -1 : i > j;
}

struct ss_order {
	uint32_t *order;      /* sample indexes, thread after thread */
	struct ss_thread *threads;
	size_t nthreads;
};

static void order_release(struct ss_order *o)
{
	free(o->order);
	free(o->threads);
}

/* Fills o with the view's samples in timeline order. 0 or -ENOMEM. */
static int order_samples(struct ss_ctx *c, struct ss_order *o)
{
	const struct prs_profile *p = c->p;
	struct prs_map64 of; /* (pid, tid) -> thread (first-seen order, then sorted: remapped) */
	uint32_t *rank = NULL, t;
	size_t cap = 0, i, n = 0;
	int rc = -ENOMEM;

	memset(o, 0, sizeof(*o));
	prs_map64_init(&of);
	o->order = malloc((p->nsamples ? p->nsamples : 1) * sizeof(*o->order));
	if (!o->order)
		goto out;
	for (i = 0; i < p->nsamples; i++) {
		int32_t pid;
		int got;

		if (prs_view_sample_stack(c->v, i) == PRS_VIEW_NONE)
			continue;
		pid = prs_view_pid(c->v, &p->samples[i]);
		got = prs_map64_intern(&of, (uint64_t)(uint32_t)pid << 32 | (uint32_t)p->samples[i].tid,
				       (uint32_t)o->nthreads, &t);
		if (got < 0 || (got && prs_array_grow((void **)&o->threads, &cap, o->nthreads + 1,
						      sizeof(*o->threads))))
			goto out;
		if (got)
			o->threads[o->nthreads++] = (struct ss_thread){ pid, p->samples[i].tid, 0, 0 };
		o->threads[t].n++;
		n++;
	}
	/* threads by (pid, tid); rank[first-seen index] = sorted index (start holds the former) */
	rank = malloc((o->nthreads ? o->nthreads : 1) * sizeof(*rank));
	if (!rank)
		goto out;
	for (t = 0; t < o->nthreads; t++)
		o->threads[t].start = t;
	if (o->nthreads)
		qsort(o->threads, o->nthreads, sizeof(*o->threads), thread_cmp);
	for (t = 0, i = 0; t < o->nthreads; i += o->threads[t++].n) {
		rank[o->threads[t].start] = t;
		o->threads[t].start = i;
	}
	for (t = 0; t < o->nthreads; t++)
		o->threads[t].n = 0;
	for (i = 0; i < p->nsamples; i++) {
		struct ss_thread *th;

		if (prs_view_sample_stack(c->v, i) == PRS_VIEW_NONE)
			continue;
		t = prs_map64_get(&of, (uint64_t)(uint32_t)prs_view_pid(c->v, &p->samples[i]) << 32 |
					       (uint32_t)p->samples[i].tid);
		th = &o->threads[rank[t]];
		o->order[th->start + th->n++] = (uint32_t)i;
	}
	for (t = 0; t < o->nthreads; t++) {
		const uint32_t *s = o->order + o->threads[t].start;

		for (i = 1; i < o->threads[t].n; i++)
			if (p->samples[s[i]].time_ns < p->samples[s[i - 1]].time_ns)
				break;
		if (i < o->threads[t].n)
			qsort_r(o->order + o->threads[t].start, o->threads[t].n, sizeof(*o->order),
				time_cmp, (void *)p);
	}
	rc = 0;
out:
	free(rank);
	prs_map64_release(&of);
	return rc;
}

/*
 * The name of the profile of (pid, tid): "thread <tid> (<name>)" ("thread <tid>", or "all
 * samples" for input without threads), after "<command> [<pid>]: " when the profile holds more
 * than one process.
 */
static void profile_title(struct ss_ctx *c, const struct ss_thread *s, uint64_t time_ns, char *title,
			  size_t size)
{
	size_t off = 0, tnlen = 0;
	const char *tn = prs_view_thread_name(c->v, s->pid, s->tid, &tnlen);

	if (prs_view_processes(c->v) > 1) {
		prs_view_process_label(c->v, s->pid, time_ns, title, size - PRS_MAX_NAME / 2);
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

/*
 * Writes one sampled profile of thread th's samples ss[0..n) (indexes into p->samples, time
 * order): consecutive samples of one view stack make one entry, their weights summed. weights is
 * scratch.
 */
static int thread_profile(struct ss_ctx *c, struct ss_out *o, const struct ss_thread *th,
			  const uint32_t *ss, uint64_t period, struct prs_buf *weights, double *total)
{
	const struct prs_profile *p = c->p;
	char title[2 * PRS_MAX_NAME + 96];
	double unit = (double)(period ? period : 1), w = 0, sum = 0;
	uint32_t prev = PRS_VIEW_NONE;
	struct prs_buf *b = weights;
	const char *text;
	size_t i, len, runs = 0;

	prs_buf_reset(b);
	if (out_str(o, "{\"samples\":["))
		return -ENOMEM;
	size_t n = th->n;
	uint32_t vs = PRS_VIEW_NONE;

	for (i = 0; i <= n; i++) {
		if (i < n)
			vs = prs_view_sample_stack(c->v, ss[i]);
		if (prev != PRS_VIEW_NONE && (i == n || vs != prev)) {
			if ((runs && prs_buf_putc(b, ',')) || put_num(b, w) ||
			    stack_text(c, prev, &text, &len) || (runs && out_put(o, ",", 1)) ||
			    out_put(o, text, len))
				return -ENOMEM;
			runs++;
			w = 0;
		}
		if (i == n)
			break;
		/* made at its first sample: the frame table fills in sample order, as it did */
		if (vs != prev && stack_text(c, vs, &text, &len))
			return -ENOMEM;
		prev = vs;
		w += (double)p->samples[ss[i]].weight * unit;
		sum += (double)p->samples[ss[i]].weight * unit;
	}
	if (out_str(o, "],\"weights\":[") || out_put(o, b->data, b->len) ||
	    out_str(o, "],\"name\":"))
		return -ENOMEM;
	profile_title(c, th, p->samples[ss[0]].time_ns, title, sizeof(title));
	prs_buf_reset(b);
	if (put_str(c, b, title, strlen(title)) || prs_buf_append(b, ",\"type\":\"sampled\",\"unit\":", 25) ||
	    prs_buf_printf(b, "\"%s\"", period ? "nanoseconds" : "none") ||
	    prs_buf_append(b, ",\"startValue\":0,\"endValue\":", 27) || put_num(b, sum) ||
	    prs_buf_putc(b, '}') || out_put(o, b->data, b->len))
		return -ENOMEM;
	*total = sum;
	return 0;
}

int prs_export_speedscope(const struct prs_profile *p, enum prs_view view, FILE *out,
			  struct prs_err *err)
{
	return prs_export_speedscope_view(p, &(struct prs_view_opts){ .view = view }, out, err);
}

int prs_export_speedscope_view(const struct prs_profile *p, const struct prs_view_opts *vo, FILE *out,
			       struct prs_err *err)
{
	struct ss_ctx *c = calloc(1, sizeof(*c));
	struct ss_out o = { .f = out };
	struct ss_order so = { NULL };
	const char *command = prs_profile_meta_get(p, "command");
	uint64_t period = prs_profile_period_ns(p);
	struct prs_buf tail;
	double best = -1;
	size_t i, active = 0, nst = 0, nprof = 0;
	int rc = 0;

	if (p->index && p->index->agg) { /* a timeline needs each sample's time: its file has them */
		free(c);
		return prs_err_set(err, -EINVAL, "speedscope export: this profile holds sums of samples "
				   "(a recording's, in memory); export its profile.pyrs");
	}
	prs_buf_init(&o.b);
	prs_buf_init(&tail);
	if (!c)
		return prs_err_set(err, -ENOMEM, "speedscope export: out of memory");
	c->p = p;
	prs_buf_init(&c->frames);
	prs_buf_init(&c->stacks);
	prs_buf_init(&c->scratch);
	prs_buf_init(&c->key);
	prs_strmap_init(&c->frame_map);
	if ((rc = prs_view_new(p, &(struct prs_view_opts){ .view = vo->view, .python_stacks = vo->python_stacks },
			       &c->v, err)))
		goto out;
	prs_view_stacks(c->v, &nst);
	c->frame_idx = calloc(prs_view_nframes(c->v), sizeof(*c->frame_idx));
	c->stack_at = calloc(nst ? nst : 1, sizeof(*c->stack_at));
	/* the view's samples, per process and thread in time order: each thread's timeline */
	if (!c->frame_idx || !c->stack_at || order_samples(c, &so))
		goto nomem;
	if (out_str(&o, "{\"profiles\":["))
		goto nomem;
	for (i = 0; i < so.nthreads; i++) {
		double total = 0;

		if ((nprof && out_put(&o, ",", 1)) ||
		    thread_profile(c, &o, &so.threads[i], so.order + so.threads[i].start, period, &tail,
				   &total))
			goto nomem;
		if (total > best) {
			best = total;
			active = nprof;
		}
		nprof++;
	}
	prs_buf_reset(&tail);
	if (out_str(&o, "],\"shared\":{\"frames\":[") || out_put(&o, c->frames.data, c->frames.len) ||
	    prs_buf_append(&tail, "]},\"name\":", 10) ||
	    (command ? put_str(c, &tail, command, strlen(command))
		     : put_json(&tail, json_string("pyrsprof profile"))) ||
	    prs_buf_printf(&tail, ",\"$schema\":\"%s\",\"exporter\":\"pyrsprof\",\"activeProfileIndex\":%zu}\n",
			   "https://www.speedscope.app/file-format-schema.json", active) ||
	    out_put(&o, tail.data, tail.len))
		goto nomem;
	out_flush(&o);
	if (o.failed || fflush(out) != 0 || ferror(out))
		rc = prs_err_set(err, -EIO, "speedscope output: write error");
	goto out;
nomem:
	rc = prs_err_set(err, -ENOMEM, "speedscope export: out of memory");
out:
	free(c->stack_at);
	free(c->frame_idx);
	prs_buf_release(&c->frames);
	prs_buf_release(&c->stacks);
	prs_buf_release(&c->scratch);
	prs_buf_release(&c->key);
	prs_strmap_release(&c->frame_map);
	for (i = 0; i < c->nkeys; i++)
		free(c->keys[i]);
	free(c->keys);
	prs_view_free(c->v);
	free(c);
	prs_buf_release(&o.b);
	prs_buf_release(&tail);
	order_release(&so);
	return rc;
}
