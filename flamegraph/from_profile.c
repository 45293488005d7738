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

#include "pyrsprof/util.h"

#include "fg-tree.h"

#include "util/banned.h"

#define RAW_LABEL 320 /* "basename+0xOFF": a file name is at most 255 bytes */

struct agg {
	int32_t tid;
	uint32_t stack, leaf; /* leaf: 0 = none, else 1 + (state << 16 | (uint16)syscall) */
	uint32_t sample;      /* a sample with this key (for the leaf's label) */
	uint32_t node;        /* the tree node it ended in, once resolved */
	uint64_t weight;
};

/* The distinct keys in the order they first appear, and an index over them. */
struct aggmap {
	struct agg *list;
	size_t n, list_cap;
	struct aggslot {
		uint32_t idx, hash; /* idx: list index + 1, 0 = empty */
	} *slots;
	size_t cap; /* a power of two */
};

static uint32_t agg_hash(int32_t tid, uint32_t stack, uint32_t leaf)
{
	uint64_t h = ((uint64_t)(uint32_t)tid << 32 | stack) * 0x9e3779b97f4a7c15ull;

	h ^= (uint64_t)leaf * 0xc2b2ae3d27d4eb4full;
	h ^= h >> 29;
	h *= 0xbf58476d1ce4e5b9ull;
	return (uint32_t)(h ^ (h >> 32));
}

static int agg_grow(struct aggmap *m)
{
	size_t ncap = m->cap ? m->cap * 2 : 1024;
	struct aggslot *slots;

	if (ncap > UINT32_MAX)
		return -ENOMEM;
	slots = calloc(ncap, sizeof(*slots));
	if (!slots)
		return -ENOMEM;
	for (size_t i = 0; i < m->cap; i++) {
		size_t j;

		if (!m->slots[i].idx)
			continue;
		for (j = m->slots[i].hash & (ncap - 1); slots[j].idx; j = (j + 1) & (ncap - 1))
			;
		slots[j] = m->slots[i];
	}
	free(m->slots);
	m->slots = slots;
	m->cap = ncap;
	return 0;
}

static int agg_add(struct aggmap *m, int32_t tid, uint32_t stack, uint32_t leaf, uint32_t sample,
		   uint64_t weight)
{
	uint32_t h = agg_hash(tid, stack, leaf);
	size_t i;

	if ((m->n + 1) * 2 > m->cap && agg_grow(m) < 0)
		return -ENOMEM;
	for (i = h & (m->cap - 1); m->slots[i].idx; i = (i + 1) & (m->cap - 1)) {
		struct agg *a = &m->list[m->slots[i].idx - 1];

		if (m->slots[i].hash == h && a->tid == tid && a->stack == stack && a->leaf == leaf) {
			if (weight > UINT64_MAX / 2 - a->weight)
				return -EOVERFLOW;
			a->weight += weight;
			return 0;
		}
	}
	if (m->n >= m->list_cap &&
	    prs_array_grow((void **)&m->list, &m->list_cap, m->n + 1, sizeof(*m->list)))
		return -ENOMEM;
	m->list[m->n] = (struct agg){ .tid = tid, .stack = stack, .leaf = leaf, .sample = sample,
				      .weight = weight };
	m->slots[i] = (struct aggslot){ (uint32_t)m->n + 1, h };
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

/* A profile frame as the tree keys it, computed once per frame id. */
struct fkey {
	uint32_t name, file; /* fg string ids */
	uint8_t kind;
	bool done;
};

/* What a profile stack became in the tree, for one thread root (epoch). */
struct memo {
	uint32_t node, epoch, depth; /* depth: frames from the root, thread frame excluded */
};

struct walk {
	struct prs_fg *fg;
	const struct prs_profile *p;
	struct fkey *fk;
	struct memo *memo;
	uint32_t *chain; /* PRS_MAX_STACK_FRAMES + 1 stack ids */
	uint32_t epoch;
	char label[RAW_LABEL];
};

/* The expansion of frame id f (inline chain, outermost first) or f itself. */
static const uint32_t *expansion(const struct prs_profile *p, uint32_t *f, uint32_t *n)
{
	const struct prs_frame *fr = &p->frames[*f];

	if (fr->raw && p->expansions && p->expand_ids) {
		const struct prs_expansion *e = &p->expansions[*f];

		if (e->count && e->first <= p->nexpand_ids && e->count <= p->nexpand_ids - e->first) {
			*n = e->count;
			return p->expand_ids + e->first;
		}
	}
	*n = 1;
	return f;
}

static int frame_key(struct walk *w, uint32_t id, struct fkey **out)
{
	const struct prs_profile *p = w->p;
	struct fkey *k = &w->fk[id];

	if (!k->done) {
		const struct prs_frame *f = &p->frames[id];
		const char *name, *file = "";

		if (f->raw) {
			name = prs_profile_frame_label(p, id, w->label, sizeof(w->label));
			k->kind = PRS_KIND_UNKNOWN;
		} else {
			name = pstr(p, f->name);
			file = pstr(p, f->file);
			k->kind = f->kind < PRS_KIND__COUNT ? f->kind : PRS_KIND_UNKNOWN;
		}
		if (!name[0])
			name = "[unknown]";
		k->name = prs_fg_intern(w->fg, name, strnlen(name, PRS_MAX_NAME));
		k->file = file[0] ? prs_fg_intern(w->fg, file, strnlen(file, PRS_MAX_NAME)) : 0;
		if (k->name == UINT32_MAX || k->file == UINT32_MAX)
			return -ENOMEM;
		k->done = true;
	}
	*out = k;
	return 0;
}

/*
 * The tree node of profile stack `stack` under `base` (memoized per epoch). Stacks deeper than
 * PRS_MAX_STACK_FRAMES keep their outermost frames; a parent chain that does not reach the root
 * within that many steps (a cycle in a corrupt file) is cut there too. Returns 0 or -ENOMEM.
 */
static int resolve(struct walk *w, uint32_t stack, uint32_t base, uint32_t *node)
{
	const struct prs_profile *p = w->p;
	size_t n = 0;
	uint32_t cur = base, depth = 0, s = stack;

	while (s != 0 && n <= PRS_MAX_STACK_FRAMES && w->memo[s].epoch != w->epoch) {
		w->chain[n++] = s;
		s = p->stacks[s].parent < p->nstacks ? p->stacks[s].parent : 0;
	}
	if (s != 0 && w->memo[s].epoch == w->epoch) {
		cur = w->memo[s].node;
		depth = w->memo[s].depth;
	}
	while (n > 0) {
		uint32_t t = w->chain[--n], f = p->stacks[t].frame, ne;
		const uint32_t *ids;

		if (f < p->nframes) {
			ids = expansion(p, &f, &ne);
			for (uint32_t j = 0; j < ne && depth < PRS_MAX_STACK_FRAMES; j++) {
				struct fkey *k;

				if (ids[j] >= p->nframes)
					continue;
				if (frame_key(w, ids[j], &k) < 0)
					return -ENOMEM;
				cur = prs_fg_child(w->fg, cur, k->name, k->file, k->kind);
				if (!cur)
					return -ENOMEM;
				depth++;
			}
		}
		w->memo[t] = (struct memo){ .node = cur, .epoch = w->epoch, .depth = depth };
	}
	*node = cur;
	return 0;
}

/* Adds the line counts of stack `stack` (resolved under the current epoch) to its nodes. */
static void add_lines(struct walk *w, uint32_t stack, uint64_t count)
{
	const struct prs_profile *p = w->p;

	for (size_t steps = 0; stack != 0 && steps <= PRS_MAX_STACK_FRAMES; steps++) {
		uint32_t f = p->stacks[stack].frame, ne, node = w->memo[stack].node;
		uint32_t parent = p->stacks[stack].parent < p->nstacks ? p->stacks[stack].parent : 0;
		uint32_t pdepth = parent && w->memo[parent].epoch == w->epoch ? w->memo[parent].depth : 0;
		const uint32_t *ids;

		if (f < p->nframes && w->memo[stack].depth - pdepth > 0) {
			ids = expansion(p, &f, &ne);
			/* the nodes of this stack's frames are memo.node and its ancestors, innermost
			 * last: pair them from the end (skipped ids made no node) */
			for (uint32_t j = ne; j-- > 0 && node;) {
				if (ids[j] >= p->nframes)
					continue;
				if (j < w->memo[stack].depth - pdepth) {
					if (p->frames[ids[j]].line &&
					    prs_fg_line(w->fg, node, p->frames[ids[j]].line, count) < 0)
						return;
					node = w->fg->nodes[node].parent;
				}
			}
		}
		stack = parent;
	}
}

static int cmp_agg(const void *a, const void *b)
{
	const struct agg *x = a, *y = b;

	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	if (x->stack != y->stack)
		return x->stack < y->stack ? -1 : 1;
	return x->leaf < y->leaf ? -1 : x->leaf > y->leaf;
}

static int add_profile(struct prs_fg *fg, const struct prs_profile *p, enum prs_view view,
		       bool per_thread, int slot, struct prs_err *err)
{
	struct aggmap m = { 0 };
	struct thr *threads = NULL;
	struct agg *list;
	bool sorted = true;
	struct walk w = { .fg = fg, .p = p };
	char thread_label[PRS_MAX_NAME + 40], leaf_label[64];
	uint64_t *self = NULL;
	size_t nlist = 0;
	int32_t cur_tid = 0;
	uint32_t base = 0;
	bool lines = false;
	int rc = 0;

	/* Merge every (thread, stack, leaf) first: a stack is resolved once per thread. */
	for (size_t i = 0; i < p->nsamples; i++) {
		const struct prs_sample *s = &p->samples[i];
		uint32_t leaf = 0;

		if (!prs_sample_in_view(s, view))
			continue;
		if (s->state != PRS_STATE_RUNNING) {
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
		if (!threads)
			goto nomem;
		for (uint32_t i = 0; i < p->nthreads; i++)
			threads[i] = (struct thr){ p->threads[i].tid, p->threads[i].name, i };
		qsort(threads, p->nthreads, sizeof(*threads), cmp_thread);
	}
	/* In (thread, stack) order, so that each thread's stacks share one memo epoch. */
	w.fk = calloc(p->nframes ? p->nframes : 1, sizeof(*w.fk));
	w.memo = calloc(p->nstacks ? p->nstacks : 1, sizeof(*w.memo));
	w.chain = malloc((PRS_MAX_STACK_FRAMES + 1) * sizeof(*w.chain));
	if (!w.fk || !w.memo || !w.chain)
		goto nomem;
	prs_mem_hint_huge(w.memo, (p->nstacks ? p->nstacks : 1) * sizeof(*w.memo));
	list = m.list;
	nlist = m.n;
	/* folded input comes in stack order already (one sample per new stack) */
	for (size_t i = 1; i < nlist && sorted; i++)
		sorted = cmp_agg(&list[i - 1], &list[i]) < 0;
	if (!sorted)
		qsort(list, nlist, sizeof(*list), cmp_agg);
	/* line counts walk each stack again: only when some frame has a line (not folded input) */
	for (uint32_t i = 0; i < p->nframes && !lines; i++)
		lines = p->frames[i].line != 0;
	/* every profile stack makes at most one node per frame: room for all, no rehash midway
	 * (a hint: without it the tree grows as it goes) */
	if (nlist && p->nstacks < (1u << 26))
		prs_fg_reserve(fg, p->nstacks + 2);
	for (size_t i = 0; i < nlist; i++) {
		const struct agg *a = &list[i];
		uint32_t node, leaf_node;

		if (i == 0 || a->tid != cur_tid) {
			cur_tid = a->tid;
			w.epoch++;
			base = 0;
			if (per_thread) {
				const char *tn = thread_name(p, threads, threads ? p->nthreads : 0, a->tid);
				int k = tn[0] ? snprintf(thread_label, sizeof(thread_label), "thread %" PRId32 " (%s)",
							 a->tid, tn)
					      : snprintf(thread_label, sizeof(thread_label), "thread %" PRId32, a->tid);
				uint32_t nid = prs_fg_intern(fg, thread_label,
							     k > 0 && (size_t)k < sizeof(thread_label) ? (size_t)k
							     : strlen(thread_label));

				if (nid == UINT32_MAX || !(base = prs_fg_child(fg, 0, nid, 0, PRS_KIND_THREAD)))
					goto nomem;
			}
		}
		if (resolve(&w, a->stack, base, &node) < 0)
			goto nomem;
		if (a->leaf) {
			enum prs_kind kind = PRS_KIND_OFF_OTHER;

			if (prs_profile_offcpu_label(&p->samples[a->sample], leaf_label, sizeof(leaf_label),
						     &kind)) {
				uint32_t nid = prs_fg_intern(fg, leaf_label, strlen(leaf_label));

				if (nid == UINT32_MAX ||
				    !(leaf_node = prs_fg_child(fg, node, nid, 0,
							      (unsigned)kind < PRS_KIND__COUNT ? kind
							      : PRS_KIND_OFF_OTHER)))
					goto nomem;
				node = leaf_node;
			}
		}
		if (node == 0) { /* a sample with an empty stack: still time, shown as such */
			uint32_t nid = prs_fg_intern(fg, "[no frames]", 11);

			if (nid == UINT32_MAX || !(node = prs_fg_child(fg, 0, nid, 0, PRS_KIND_UNKNOWN)))
				goto nomem;
		}
		list[i].node = node;
		if (lines)
			add_lines(&w, a->stack, a->weight);
	}
	/* the counts, all at once: each node's own weight, then one pass adds them up the tree
	 * (the memo is done with: its memory serves the counts) */
	free(w.memo);
	w.memo = NULL;
	self = calloc(fg->nnodes, sizeof(*self));
	if (!self)
		goto nomem;
	prs_mem_hint_huge(self, fg->nnodes * sizeof(*self));
	for (size_t i = 0; i < nlist; i++) {
		if (list[i].weight > UINT64_MAX / 2 - self[list[i].node]) {
			rc = prs_err_set(err, -EOVERFLOW, "flame graph: sample counts overflow");
			goto out;
		}
		self[list[i].node] += list[i].weight;
	}
	rc = prs_fg_count_all(fg, self, fg->nnodes, slot != 0);
	if (rc < 0)
		prs_err_set(err, rc, "flame graph: sample counts overflow");
	goto out;
nomem:
	rc = prs_err_set(err, -ENOMEM, "flame graph: out of memory");
out:
	free(m.list);
	free(m.slots);
	free(threads);
	free(w.fk);
	free(w.memo);
	free(w.chain);
	free(self);
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
	bool offcpu = false; /* folded input has none: then "samples" is not qualified */
	size_t off = 0;
	int k;

	if (size == 0)
		return buf;
	buf[0] = '\0';
	for (size_t i = 0; i < p->nsamples; i++) {
		const struct prs_sample *s = &p->samples[i];

		offcpu |= s->state != PRS_STATE_RUNNING;
		if (!prs_sample_in_view(s, view))
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
	APPEND("%s%" PRIu64 " %s%ssamples", off ? " · " : "", samples,
	       !offcpu ? "" : view == PRS_VIEW_CPU ? "on-CPU" : "wall", offcpu ? " " : "");
	if (rate && rate[0])
		APPEND(" · %s Hz", rate);
#undef APPEND
	return buf;
}
