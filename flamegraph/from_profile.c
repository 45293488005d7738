/* SPDX-License-Identifier: MIT */
/*
 * Builds a flame graph tree from a profile: the samples of a view are summed per distinct
 * (thread, stack, off-CPU leaf) first, so each distinct stack is expanded and added once however
 * many samples it has; then every stack's frames (inline expansions included) go to prs_fg_add2
 * root first, with a "thread <tid> (<name>)" root for per-thread graphs and the profile model's
 * off-CPU leaf ("[read]", "[clock_nanosleep]", ...) for blocked samples in the wall view.
 * The profile may come from a file: every id is checked before it is used.
 */
#include "pyrsprof/flamegraph.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "util/banned.h"

#define RAW_LABEL 320 /* "basename+0xOFF": a file name is at most 255 bytes */

struct agg {
	int32_t tid;
	uint32_t stack, leaf; /* leaf: 0 = none, else 1 + (state << 16 | (uint16)syscall) */
	uint32_t sample;      /* a sample with this key (for the leaf's label) */
	uint64_t weight;
};

struct aggmap {
	struct agg *e;
	size_t n, cap; /* cap: a power of two; e[i].weight == 0 && e[i].sample == UINT32_MAX is empty */
	bool *used;
};

static uint64_t agg_hash(int32_t tid, uint32_t stack, uint32_t leaf)
{
	uint64_t h = ((uint64_t)(uint32_t)tid << 32 | stack) * 0x9e3779b97f4a7c15ull;

	h ^= (uint64_t)leaf * 0xc2b2ae3d27d4eb4full;
	h ^= h >> 29;
	h *= 0xbf58476d1ce4e5b9ull;
	return h ^ (h >> 32);
}

static int agg_grow(struct aggmap *m)
{
	size_t ncap = m->cap ? m->cap * 2 : 1024;
	struct agg *e = calloc(ncap, sizeof(*e));
	bool *used = calloc(ncap, sizeof(*used));

	if (!e || !used) {
		free(e);
		free(used);
		return -ENOMEM;
	}
	for (size_t i = 0; i < m->cap; i++) {
		size_t j;

		if (!m->used[i])
			continue;
		j = agg_hash(m->e[i].tid, m->e[i].stack, m->e[i].leaf) & (ncap - 1);
		while (used[j])
			j = (j + 1) & (ncap - 1);
		e[j] = m->e[i];
		used[j] = true;
	}
	free(m->e);
	free(m->used);
	m->e = e;
	m->used = used;
	m->cap = ncap;
	return 0;
}

static int agg_add(struct aggmap *m, int32_t tid, uint32_t stack, uint32_t leaf, uint32_t sample,
		   uint64_t weight)
{
	size_t i;

	if ((m->n + 1) * 2 > m->cap && agg_grow(m) < 0)
		return -ENOMEM;
	for (i = agg_hash(tid, stack, leaf) & (m->cap - 1); m->used[i]; i = (i + 1) & (m->cap - 1)) {
		struct agg *a = &m->e[i];

		if (a->tid == tid && a->stack == stack && a->leaf == leaf) {
			if (weight > UINT64_MAX / 2 - a->weight)
				return -EOVERFLOW;
			a->weight += weight;
			return 0;
		}
	}
	m->used[i] = true;
	m->e[i] = (struct agg){ .tid = tid, .stack = stack, .leaf = leaf, .sample = sample,
				.weight = weight };
	m->n++;
	return 0;
}

struct thr {
	int32_t tid;
	uint32_t name, idx; /* idx: position in p->threads, so the latest name of a tid wins */
};

static int cmp_thread(const void *a, const void *b)
{
	const struct thr *x = a, *y = b;

	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static const char *pstr(const struct prs_profile *p, uint32_t id)
{
	return id < p->nstrings && p->strings[id] ? p->strings[id] : "";
}

/* The thread's latest name, or "" (threads: sorted by tid, then by position). */
static const char *thread_name(const struct prs_profile *p, const struct thr *threads,
			       uint32_t n, int32_t tid)
{
	size_t lo = 0, hi = n;

	while (lo < hi) { /* first entry with tid > target */
		size_t mid = lo + (hi - lo) / 2;

		if (threads[mid].tid <= tid)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0 || threads[lo - 1].tid != tid)
		return "";
	return pstr(p, threads[lo - 1].name);
}

static int add_profile(struct prs_fg *fg, const struct prs_profile *p, enum prs_view view,
		       bool per_thread, int slot, struct prs_err *err)
{
	struct aggmap m = { 0 };
	struct thr *threads = NULL;
	uint32_t *ids = NULL;
	struct prs_fg_frame *frames = NULL;
	char *labels = NULL, thread_label[PRS_MAX_NAME + 40], leaf_label[64];
	int rc = 0;

	/* Merge every (thread, stack, leaf) first: a stack is expanded once. */
	for (size_t i = 0; i < p->nsamples; i++) {
		const struct prs_sample *s = &p->samples[i];
		uint32_t leaf = 0;

		if (s->state != PRS_STATE_RUNNING) {
			if (view == PRS_VIEW_CPU)
				continue;
			leaf = 1 + ((uint32_t)s->state << 16 | (uint16_t)s->syscall);
		}
		if (s->stack >= p->nstacks || s->weight == 0)
			continue;
		rc = agg_add(&m, per_thread ? s->tid : 0, s->stack, leaf, (uint32_t)i, s->weight);
		if (rc < 0) {
			prs_err_set(err, rc, "flame graph: %s", rc == -ENOMEM ? "out of memory"
						: "sample weights overflow");
			goto out;
		}
	}
	if (per_thread && p->nthreads) {
		threads = malloc(p->nthreads * sizeof(*threads));
		if (!threads) {
			rc = prs_err_set(err, -ENOMEM, "flame graph: out of memory");
			goto out;
		}
		for (uint32_t i = 0; i < p->nthreads; i++)
			threads[i] = (struct thr){ p->threads[i].tid, p->threads[i].name, i };
		qsort(threads, p->nthreads, sizeof(*threads), cmp_thread);
	}
	ids = malloc(PRS_MAX_STACK_FRAMES * sizeof(*ids));
	frames = malloc((PRS_MAX_STACK_FRAMES + 2) * sizeof(*frames));
	labels = malloc((size_t)PRS_MAX_STACK_FRAMES * RAW_LABEL);
	if (!ids || !frames || !labels) {
		rc = prs_err_set(err, -ENOMEM, "flame graph: out of memory");
		goto out;
	}
	for (size_t i = 0; i < m.cap; i++) {
		const struct agg *a = &m.e[i];
		size_t n = 0, nf;

		if (!m.used[i])
			continue;
		if (per_thread) {
			const char *tn = thread_name(p, threads, threads ? p->nthreads : 0, a->tid);

			if (tn[0])
				snprintf(thread_label, sizeof(thread_label), "thread %" PRId32 " (%s)", a->tid, tn);
			else
				snprintf(thread_label, sizeof(thread_label), "thread %" PRId32, a->tid);
			frames[n++] = (struct prs_fg_frame){ .name = thread_label, .kind = PRS_KIND_THREAD };
		}
		nf = prs_profile_stack_frames(p, a->stack, ids, PRS_MAX_STACK_FRAMES);
		for (size_t k = 0; k < nf && n < PRS_MAX_STACK_FRAMES; k++) {
			const struct prs_frame *f;

			if (ids[k] >= p->nframes)
				continue;
			f = &p->frames[ids[k]];
			if (f->raw) {
				char *buf = labels + k * RAW_LABEL;

				prs_profile_frame_label(p, ids[k], buf, RAW_LABEL);
				frames[n++] = (struct prs_fg_frame){ .name = buf, .kind = PRS_KIND_UNKNOWN };
			} else {
				frames[n++] = (struct prs_fg_frame){
					.name = f->name ? pstr(p, f->name) : "[unknown]",
					.file = pstr(p, f->file), .line = f->line,
					.kind = f->kind < PRS_KIND__COUNT ? (enum prs_kind)f->kind
									  : PRS_KIND_UNKNOWN };
			}
		}
		if (a->leaf) {
			enum prs_kind kind = PRS_KIND_OFF_OTHER;

			if (prs_profile_offcpu_label(&p->samples[a->sample], leaf_label, sizeof(leaf_label),
						     &kind))
				frames[n++] = (struct prs_fg_frame){ .name = leaf_label, .kind = kind };
		}
		if (n == 0) /* a sample with an empty stack: still time, shown as such */
			frames[n++] = (struct prs_fg_frame){ .name = "[no frames]", .kind = PRS_KIND_UNKNOWN };
		rc = slot ? prs_fg_add2(fg, frames, n, a->weight, 0) : prs_fg_add(fg, frames, n, a->weight);
		if (rc < 0) {
			prs_err_set(err, rc, "flame graph: %s", rc == -ENOMEM ? "out of memory"
						: "sample counts overflow");
			goto out;
		}
	}
out:
	free(m.e);
	free(m.used);
	free(threads);
	free(ids);
	free(frames);
	free(labels);
	return rc;
}

int prs_fg_from_profile(struct prs_fg *fg, const struct prs_profile *p, enum prs_view view,
			bool per_thread, struct prs_err *err)
{
	return add_profile(fg, p, view, per_thread, 0, err);
}

int prs_fg_diff_from_profiles(struct prs_fg *fg, const struct prs_profile *before,
			      const struct prs_profile *after, enum prs_view view, bool per_thread,
			      struct prs_err *err)
{
	int rc = add_profile(fg, before, view, per_thread, 1, err);

	return rc < 0 ? rc : add_profile(fg, after, view, per_thread, 0, err);
}

const char *prs_fg_describe_profile(const struct prs_profile *p, enum prs_view view, char *buf,
				    size_t size)
{
	const char *command = prs_profile_meta_get(p, "command");
	const char *rate = prs_profile_meta_get(p, "rate_hz");
	const char *dur = prs_profile_meta_get(p, "duration_s");
	uint64_t samples = 0, last_ns = 0;
	size_t off = 0;
	int k;

	if (size == 0)
		return buf;
	buf[0] = '\0';
	for (size_t i = 0; i < p->nsamples; i++) {
		const struct prs_sample *s = &p->samples[i];

		if (view == PRS_VIEW_CPU && s->state != PRS_STATE_RUNNING)
			continue;
		samples += s->weight;
		if (s->time_ns > last_ns)
			last_ns = s->time_ns;
	}
#define APPEND(...)                                                                   \
	do {                                                                          \
		k = snprintf(buf + off, size - off, __VA_ARGS__);                      \
		off = k < 0 ? off : off + (size_t)k >= size ? size - 1 : off + (size_t)k; \
	} while (0)
	if (command && command[0])
		APPEND("%s", command);
	if (dur && dur[0])
		APPEND("%s%.2f s", off ? " · " : "", strtod(dur, NULL));
	else if (last_ns)
		APPEND("%s%.2f s", off ? " · " : "", (double)last_ns / 1e9);
	APPEND("%s%" PRIu64 " %s samples", off ? " · " : "", samples, view == PRS_VIEW_CPU ? "on-CPU" : "wall");
	if (rate && rate[0])
		APPEND(" · %s Hz", rate);
#undef APPEND
	return buf;
}
