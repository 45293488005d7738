/* SPDX-License-Identifier: MIT */
/*
 * A view of a profile (include/pyrsprof/view.h): one pass over the samples decides which the view
 * keeps, their group (process root, thread root, or just the process and thread they are kept
 * apart by), their off-CPU leaf, and sums them per distinct (group, stack, leaf) in a hash table;
 * the distinct stacks are then sorted (group by pid and tid, stack in trie pre-order, leaf) so
 * that every consumer sees them in one stable order. A sample costs one or two hash probes (its stack, its
 * group unless it is the previous sample's, its leaf when off-CPU); a process's identity (its
 * command at the time, for an exec'd pid) is looked up once per (pid, tid) when it never exec'd.
 */
#include "profile/view-internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/banned.h"

/* A group: the samples of one (process root | pid, thread root | tid) the view keeps apart. */
struct group {
	int32_t pid, tid;
	uint32_t proot, troot; /* root frames or PRS_VIEW_NONE */
	uint32_t ident;        /* process identity (first-seen order), for the sort */
	uint32_t rank;         /* position in the sorted groups */
};

/* A process identity with a root: (pid, command), or a command when merging. */
struct ident {
	int32_t pid; /* 0 for a merged command */
	uint32_t root;
};

struct build {
	struct prs_profile_view *v;
	struct group *groups;
	size_t ngroups, cap_groups;
	struct prs_map64 group_of; /* (process part << 32 | tid part) -> group */
	struct ident *idents;
	size_t nidents, cap_idents;
	struct prs_map64 ident_of; /* identity key -> ident */
	struct prs_map64 leaf_of;  /* state | GIL wait << 8 | syscall << 16 -> leaf frame */
	uint32_t *group_of_stack;  /* per view stack, while building */
	uint32_t *pre;             /* per profile stack: its position in the trie's pre-order */
	struct slot {
		uint32_t idx, hash; /* idx: view stack + 1, 0 = empty */
	} *slots;
	size_t cap_slots; /* a power of two */
	/* the group of a (pid, tid), known without a lookup of its process identity when the pid
	 * has one (it never exec'd): most samples cost one probe, or none (last_key) */
	struct prs_map64 fast;
	uint64_t last_key;
	uint32_t last_group;
};

static uint32_t stack_hash(uint32_t group, uint32_t stack, uint32_t leaf)
{
	uint64_t h = ((uint64_t)group << 32 | stack) * 0x9e3779b97f4a7c15ull;

	h ^= (uint64_t)leaf * 0xc2b2ae3d27d4eb4full;
	h ^= h >> 29;
	h *= 0xbf58476d1ce4e5b9ull;
	return (uint32_t)(h ^ (h >> 32));
}

static int slots_grow(struct build *b)
{
	size_t ncap = b->cap_slots ? b->cap_slots * 2 : 1024, i, j;
	struct slot *slots;

	if (ncap > UINT32_MAX)
		return -ENOMEM;
	slots = calloc(ncap, sizeof(*slots));
	if (!slots)
		return -ENOMEM;
	for (i = 0; i < b->cap_slots; i++) {
		if (!b->slots[i].idx)
			continue;
		for (j = b->slots[i].hash & (ncap - 1); slots[j].idx; j = (j + 1) & (ncap - 1))
			;
		slots[j] = b->slots[i];
	}
	free(b->slots);
	b->slots = slots;
	b->cap_slots = ncap;
	return 0;
}

/* Makes room for n view stacks, and their roots and groups. 0 or -ENOMEM. */
static int grow_stacks(struct build *b, size_t n)
{
	struct prs_profile_view *v = b->v;
	uint32_t *groups, *roots;

	if (n >= UINT32_MAX - 1 ||
	    prs_array_grow((void **)&v->stacks, &v->cap_stacks, n, sizeof(*v->stacks)))
		return -ENOMEM;
	/* the parallel arrays follow the stacks' capacity */
	groups = realloc(b->group_of_stack, v->cap_stacks * sizeof(*groups));
	if (!groups)
		return -ENOMEM;
	b->group_of_stack = groups;
	roots = realloc(v->roots, v->cap_stacks * 2 * sizeof(*roots));
	if (!roots)
		return -ENOMEM;
	v->roots = roots;
	return 0;
}

/* Adds weight to the view stack (group, stack, leaf), made if new; its index, or < 0. */
static int64_t add_to_stack(struct build *b, uint32_t group, uint32_t stack, uint32_t leaf,
			    uint64_t weight)
{
	struct prs_profile_view *v = b->v;
	uint32_t h = stack_hash(group, stack, leaf);
	const struct group *g = &b->groups[group];
	struct prs_view_stack *st;
	size_t i, n = v->nstacks;

	if ((n + 1) * 2 > b->cap_slots && slots_grow(b) < 0)
		return -ENOMEM;
	for (i = h & (b->cap_slots - 1); b->slots[i].idx; i = (i + 1) & (b->cap_slots - 1)) {
		st = &v->stacks[b->slots[i].idx - 1];
		if (b->slots[i].hash == h && st->stack == stack && st->leaf == leaf &&
		    b->group_of_stack[b->slots[i].idx - 1] == group) {
			if (weight > UINT64_MAX / 2 - st->weight)
				return -EOVERFLOW;
			st->weight += weight;
			return b->slots[i].idx - 1;
		}
	}
	if (n >= v->cap_stacks && grow_stacks(b, n + 1) < 0)
		return -ENOMEM;
	v->stacks[n] = (struct prs_view_stack){
		.stack = stack, .leaf = leaf, .pid = g->pid, .tid = g->tid,
		.nroots = (g->proot != PRS_VIEW_NONE) + (g->troot != PRS_VIEW_NONE),
		.empty = stack == 0 && leaf == PRS_VIEW_NONE, .weight = weight,
	};
	/* roots are packed first: [process, thread] or [thread] */
	v->roots[2 * n] = g->proot != PRS_VIEW_NONE ? g->proot : g->troot;
	v->roots[2 * n + 1] = g->proot != PRS_VIEW_NONE ? g->troot : PRS_VIEW_NONE;
	b->group_of_stack[n] = group;
	b->slots[i] = (struct slot){ (uint32_t)n + 1, h };
	v->nstacks = n + 1;
	return (int64_t)n;
}

/* The off-CPU leaf frame of s in the view, PRS_VIEW_NONE for none; UINT32_MAX - 1 on ENOMEM. */
static uint32_t leaf_of(struct build *b, const struct prs_sample *s)
{
	struct prs_profile_view *v = b->v;
	uint64_t key = (uint64_t)s->state | (uint64_t)(s->flags & PRS_SAMPLE_GIL_WAIT) << 8 |
		       (uint64_t)(uint16_t)s->syscall << 16;
	enum prs_kind kind;
	char label[64];
	uint32_t id;

	if (v->o.view != PRS_VIEW_WALL || s->state == PRS_STATE_RUNNING)
		return PRS_VIEW_NONE;
	id = prs_map64_get(&b->leaf_of, key);
	if (id != PRS_MAP_NONE)
		return id;
	if (!prs_profile_offcpu_label(s, label, sizeof(label), &kind))
		return PRS_VIEW_NONE;
	id = prs_view_synth(v, label, strlen(label),
			    (unsigned)kind < PRS_KIND__COUNT ? kind : PRS_KIND_OFF_OTHER);
	if (id == PRS_VIEW_NONE || prs_map64_put(&b->leaf_of, key, id))
		return UINT32_MAX - 1;
	return id;
}

/*
 * The process identity of (pid, time) for process roots; PRS_VIEW_NONE on ENOMEM. *single tells
 * whether pid has this identity at any time (one PROCESS entry, or none).
 */
static uint32_t ident_of(struct build *b, int32_t pid, uint64_t time_ns, bool *single)
{
	struct prs_profile_view *v = b->v;
	uint32_t e, cmd, id;
	uint64_t key;
	char label[PRS_MAX_NAME + 32];
	const char *text;
	size_t len;

	e = prs_view_process_entry(v, pid, time_ns);
	*single = e == PRS_VIEW_NONE ||
		  ((e == 0 || v->procs[e - 1].pid != pid) &&
		   (e + 1 >= v->nprocs || v->procs[e + 1].pid != pid));
	cmd = e != PRS_VIEW_NONE ? v->procs[e].command : pid == v->meta_pid ? v->meta_command : 0;
	key = v->o.merge_processes && cmd ? 1ull << 63 | cmd : (uint64_t)(uint32_t)pid << 32 | cmd;
	if (prs_map64_intern(&b->ident_of, key, (uint32_t)b->nidents, &id) < 0)
		return PRS_VIEW_NONE;
	if (id == b->nidents) {
		if (prs_array_grow((void **)&b->idents, &b->cap_idents, b->nidents + 1, sizeof(*b->idents)))
			return PRS_VIEW_NONE;
		if (v->o.merge_processes && cmd) {
			text = v->p->strings[cmd];
			len = strnlen(text, PRS_MAX_NAME);
		} else {
			text = prs_view_process_label(v, pid, time_ns, label, sizeof(label));
			len = strlen(text);
		}
		b->idents[id].pid = v->o.merge_processes && cmd ? 0 : pid;
		b->idents[id].root = prs_view_synth(v, text, len, PRS_KIND_PROCESS);
		if (b->idents[id].root == PRS_VIEW_NONE)
			return PRS_VIEW_NONE;
		b->nidents++;
	}
	return id;
}

static uint32_t thread_root(struct prs_profile_view *v, int32_t pid, int32_t tid)
{
	char label[PRS_MAX_NAME + 40];
	size_t len = 0;
	const char *name = prs_view_thread_name(v, pid, tid, &len);
	int k;

	if (name)
		k = snprintf(label, sizeof(label), "thread %" PRId32 " (%.*s)", tid,
			     (int)(len > PRS_MAX_NAME ? PRS_MAX_NAME : len), name);
	else
		k = snprintf(label, sizeof(label), "thread %" PRId32, tid);
	return prs_view_synth(v, label, k > 0 && (size_t)k < sizeof(label) ? (size_t)k : strlen(label),
			      PRS_KIND_THREAD);
}

/* Makes the group of key (process part << 32 | tid part). PRS_VIEW_NONE on ENOMEM. */
static uint32_t new_group(struct build *b, uint64_t key, int32_t pid, int32_t tid, uint32_t ident)
{
	struct prs_profile_view *v = b->v;
	bool split = v->o.per_thread || v->o.by_thread;
	struct group *gr;
	uint32_t g;

	if (prs_map64_intern(&b->group_of, key, (uint32_t)b->ngroups, &g) < 0)
		return PRS_VIEW_NONE;
	if (g < b->ngroups)
		return g;
	if (prs_array_grow((void **)&b->groups, &b->cap_groups, b->ngroups + 1, sizeof(*b->groups)))
		return PRS_VIEW_NONE;
	gr = &b->groups[g];
	gr->pid = ident != PRS_VIEW_NONE ? b->idents[ident].pid : split ? pid : 0;
	gr->tid = split ? tid : 0;
	gr->proot = ident != PRS_VIEW_NONE ? b->idents[ident].root : PRS_VIEW_NONE;
	gr->troot = v->o.per_thread ? thread_root(v, pid, tid) : PRS_VIEW_NONE;
	gr->ident = ident;
	if (v->o.per_thread && gr->troot == PRS_VIEW_NONE)
		return PRS_VIEW_NONE;
	b->ngroups++;
	return g;
}

/* The group of sample s; PRS_VIEW_NONE on ENOMEM. */
static uint32_t group_of(struct build *b, const struct prs_sample *s)
{
	struct prs_profile_view *v = b->v;
	bool split = v->o.per_thread || v->o.by_thread, single = true;
	int32_t pid = s->pid ? s->pid : v->meta_pid, tid = split ? s->tid : 0;
	uint64_t fkey = (uint64_t)(uint32_t)pid << 32 | (uint32_t)tid;
	uint32_t ident = PRS_VIEW_NONE, proc = 0, g;

	if (b->ngroups && fkey == b->last_key)
		return b->last_group;
	g = prs_map64_get(&b->fast, fkey);
	if (g == PRS_MAP_NONE) {
		if (v->process_roots) {
			ident = ident_of(b, pid, s->time_ns, &single);
			if (ident == PRS_VIEW_NONE)
				return PRS_VIEW_NONE;
			proc = ident + 1;
		} else if (split) {
			proc = (uint32_t)pid;
		}
		g = new_group(b, (uint64_t)proc << 32 | (uint32_t)tid, pid, tid, ident);
		if (g == PRS_VIEW_NONE)
			return PRS_VIEW_NONE;
		/* an exec'd pid's group depends on the time: looked up each time */
		if (single && prs_map64_put(&b->fast, fkey, g))
			return PRS_VIEW_NONE;
		if (!single)
			return g;
	}
	b->last_key = fkey;
	b->last_group = g;
	return g;
}

/* Counts the distinct pids of the samples (a probe only for a pid not among the last seen). */
static int count_processes(struct prs_profile_view *v)
{
	const struct prs_profile *p = v->p;
	int32_t recent[16]; /* by pid % 16; -1: none (pids are >= 0) */
	struct prs_map64 seen;
	uint32_t dummy;
	int rc = 0;

	memset(recent, 0xff, sizeof(recent));
	prs_map64_init(&seen);
	for (size_t i = 0; i < p->nsamples && rc >= 0; i++) {
		int32_t pid = p->samples[i].pid ? p->samples[i].pid : v->meta_pid; /* prs_view_pid */

		if (recent[(uint32_t)pid % 16] == pid)
			continue;
		recent[(uint32_t)pid % 16] = pid;
		rc = prs_map64_intern(&seen, (uint32_t)pid, 0, &dummy);
		v->nprocesses += rc == 1;
	}
	prs_map64_release(&seen);
	return rc < 0 ? rc : 0;
}

static int sum_samples(struct build *b)
{
	struct prs_profile_view *v = b->v;
	const struct prs_profile *p = v->p;

	for (size_t i = 0; i < p->nsamples; i++) {
		const struct prs_sample *s = &p->samples[i];
		uint32_t leaf, group;
		int64_t st;

		v->sample_stack[i] = PRS_VIEW_NONE;
		if (!prs_sample_in_view(s, v->o.view))
			continue;
		leaf = leaf_of(b, s);
		group = leaf == UINT32_MAX - 1 ? PRS_VIEW_NONE : group_of(b, s);
		if (group == PRS_VIEW_NONE)
			return -ENOMEM;
		st = add_to_stack(b, group, s->stack < p->nstacks ? s->stack : 0, leaf, s->weight);
		if (st < 0)
			return (int)st;
		v->sample_stack[i] = (uint32_t)st;
	}
	return 0;
}

/* ---- the order of the stacks ---- */

static int cmp_group(const void *a, const void *b)
{
	const struct group *x = *(const struct group *const *)a, *y = *(const struct group *const *)b;

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	if (x->ident != y->ident)
		return x->ident < y->ident ? -1 : 1;
	return x->tid < y->tid ? -1 : x->tid > y->tid;
}

/* Sort keys of a view stack: group rank, stack (its pre-order position), leaf (none first), and
 * where it was made. */
struct order {
	uint32_t rank, stack, leaf, idx;
};

/*
 * The pre-order position of every stack of the trie (children in id order): stacks in that order
 * share the longest prefixes with the one before, so that a consumer building a tree (flame graph,
 * speedscope's frames) walks on from the previous stack and resolves each trie node about once.
 * Unsorted folded input makes ids in file order: ordered by id, consecutive stacks share little
 * and every frame is looked up again (measured: 4.8M lookups instead of 1.4M for 200k stacks).
 * Sorted input (stackcollapse, a recording's trie built depth-first) has pre[i] == i. Two linear
 * passes (a parent's id is smaller than its children's): subtree sizes, then positions.
 */
static int trie_preorder(const struct prs_profile *p, uint32_t **out)
{
	uint32_t n = p->nstacks, *pre = malloc((n ? n : 1) * sizeof(*pre)),
		 *next = malloc((n ? n : 1) * sizeof(*next));

	*out = NULL;
	if (!pre || !next) {
		free(pre);
		free(next);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < n; i++)
		next[i] = 1; /* first the subtree size */
	for (uint32_t i = n; i-- > 1;)
		next[p->stacks[i].parent] += next[i];
	pre[0] = 0;
	next[0] = 1; /* from here on: the position of a stack's next child */
	for (uint32_t i = 1; i < n; i++) {
		uint32_t parent = p->stacks[i].parent, size = next[i];

		pre[i] = next[parent];
		next[parent] += size;
		next[i] = pre[i] + 1;
	}
	free(next);
	*out = pre;
	return 0;
}

static int cmp_order(const void *a, const void *b)
{
	const struct order *x = a, *y = b;

	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	if (x->stack != y->stack)
		return x->stack < y->stack ? -1 : 1;
	return x->leaf < y->leaf ? -1 : x->leaf > y->leaf;
}

/* Moves ord[i] down the max-heap ord[0..n) to where it belongs. */
static void sift_down(struct order *ord, size_t i, size_t n)
{
	struct order x = ord[i];

	for (size_t c; (c = 2 * i + 1) < n; i = c) {
		if (c + 1 < n && cmp_order(&ord[c], &ord[c + 1]) < 0)
			c++;
		if (cmp_order(&x, &ord[c]) >= 0)
			break;
		ord[i] = ord[c];
	}
	ord[i] = x;
}

/*
 * Sorts ord[0..n) by cmp_order in place (a heap sort): glibc's qsort merge-sorts through a copy
 * of the array, 16 bytes a view stack, 3.6 MB at the peak of a 1M-sample pprof export (issue 13's
 * memory goal). The keys are distinct (a view stack is one (group, stack, leaf)), so the order is
 * the one qsort gave.
 */
static void sort_orders(struct order *ord, size_t n)
{
	for (size_t i = n / 2; i-- > 0;)
		sift_down(ord, i, n);
	for (size_t k = n; k-- > 1;) {
		struct order top = ord[0];

		ord[0] = ord[k];
		ord[k] = top;
		sift_down(ord, 0, k);
	}
}

/* The sort key of view stack i. */
static struct order order_of(const struct build *b, size_t i)
{
	const struct prs_view_stack *st = &b->v->stacks[i];

	/* leaf + 1: none (UINT32_MAX) first */
	return (struct order){ b->groups[b->group_of_stack[i]].rank, b->pre[st->stack], st->leaf + 1,
			       (uint32_t)i };
}

/*
 * Puts the stacks (and their roots) in order in place: stack perm[i] goes to position i, cycle by
 * cycle (perm is used up: an entry moved is marked perm[j] = j). Copies of the arrays were 40
 * bytes a stack beside the view's own (16 MB for the 400k stacks of a 1M-sample profile's
 * per-thread view).
 */
static void permute(struct prs_profile_view *v, uint32_t *perm)
{
	for (uint32_t s = 0; s < v->nstacks; s++) {
		struct prs_view_stack st = v->stacks[s];
		uint32_t r0 = v->roots[2 * s], r1 = v->roots[2 * s + 1], j = s, k;

		if (perm[s] == s)
			continue;
		while ((k = perm[j]) != s) {
			v->stacks[j] = v->stacks[k];
			v->roots[2 * j] = v->roots[2 * k];
			v->roots[2 * j + 1] = v->roots[2 * k + 1];
			perm[j] = j;
			j = k;
		}
		v->stacks[j] = st;
		v->roots[2 * j] = r0;
		v->roots[2 * j + 1] = r1;
		perm[j] = j;
	}
}

static int sort_stacks(struct build *b)
{
	struct prs_profile_view *v = b->v;
	size_t n = v->nstacks ? v->nstacks : 1, i;
	struct group **gs = malloc((b->ngroups ? b->ngroups : 1) * sizeof(*gs));
	struct order *ord = NULL, prev, cur;
	uint32_t *perm = NULL, *inv = NULL;
	bool sorted = true;
	int rc = -ENOMEM;

	if (!gs || trie_preorder(v->p, &b->pre))
		goto out;
	for (i = 0; i < b->ngroups; i++)
		gs[i] = &b->groups[i];
	qsort(gs, b->ngroups, sizeof(*gs), cmp_group);
	for (i = 0; i < b->ngroups; i++)
		gs[i]->rank = (uint32_t)i;
	/* folded input comes in order already (a new stack per line): nothing to move */
	if (v->nstacks)
		prev = order_of(b, 0);
	for (i = 1; i < v->nstacks && sorted; i++, prev = cur) {
		cur = order_of(b, i);
		sorted = cmp_order(&prev, &cur) < 0;
	}
	rc = 0;
	if (sorted)
		goto out;
	rc = -ENOMEM;
	ord = malloc(n * sizeof(*ord));
	if (!ord)
		goto out;
	for (i = 0; i < v->nstacks; i++)
		ord[i] = order_of(b, i);
	sort_orders(ord, v->nstacks);
	perm = malloc(n * sizeof(*perm));
	if (!perm)
		goto out;
	for (i = 0; i < v->nstacks; i++)
		perm[i] = ord[i].idx;
	free(ord); /* before inv is made: the peak is the keys or the two maps, not all three */
	ord = NULL;
	inv = malloc(n * sizeof(*inv));
	if (!inv)
		goto out;
	for (i = 0; i < v->nstacks; i++)
		inv[perm[i]] = (uint32_t)i;
	permute(v, perm);
	for (i = 0; i < v->p->nsamples; i++)
		if (v->sample_stack[i] != PRS_VIEW_NONE)
			v->sample_stack[i] = inv[v->sample_stack[i]];
	rc = 0;
out:
	free(gs);
	free(ord);
	free(perm);
	free(inv);
	return rc;
}

/* ---- the view ---- */

static void build_release(struct build *b)
{
	free(b->groups);
	free(b->idents);
	free(b->group_of_stack);
	free(b->pre);
	free(b->slots);
	prs_map64_release(&b->fast);
	prs_map64_release(&b->group_of);
	prs_map64_release(&b->ident_of);
	prs_map64_release(&b->leaf_of);
}

/*
 * Room for the distinct stacks the samples can make, so that the table is not rehashed as it
 * fills: at most one per sample, and usually about one per trie stack (a few more with leaves
 * and threads). A guess: the table still grows past it.
 */
static int reserve(struct build *b)
{
	const struct prs_profile *p = b->v->p;
	size_t guess = p->nsamples < (size_t)p->nstacks * 2 ? p->nsamples : (size_t)p->nstacks * 2;

	if (guess < 512 || guess > (1u << 26))
		return 0;
	b->cap_slots = 1;
	while (b->cap_slots < guess * 2)
		b->cap_slots *= 2;
	b->slots = calloc(b->cap_slots, sizeof(*b->slots));
	return b->slots ? grow_stacks(b, guess) : -ENOMEM;
}

static int build_view(struct prs_profile_view *v)
{
	struct build b;
	int rc;
	bool empty = false;

	memset(&b, 0, sizeof(b));
	b.v = v;
	prs_map64_init(&b.fast);
	prs_map64_init(&b.group_of);
	prs_map64_init(&b.ident_of);
	prs_map64_init(&b.leaf_of);
	rc = reserve(&b);
	if (!rc)
		rc = sum_samples(&b);
	for (size_t i = 0; !rc && i < v->nstacks && !empty; i++)
		empty = v->stacks[i].empty;
	if (!rc && empty &&
	    (v->empty_frame = prs_view_synth(v, "[empty stack]", 13, PRS_KIND_UNKNOWN)) == PRS_VIEW_NONE)
		rc = -ENOMEM;
	if (!rc)
		rc = sort_stacks(&b);
	build_release(&b);
	return rc;
}

int prs_view_new(const struct prs_profile *p, const struct prs_view_opts *o, struct prs_profile_view **out,
		 struct prs_err *err)
{
	struct prs_profile_view *v = calloc(1, sizeof(*v));
	int rc = -ENOMEM;

	*out = NULL;
	if (!v)
		goto fail;
	v->p = p;
	v->o = *o;
	v->empty_frame = PRS_VIEW_NONE;
	prs_buf_init(&v->names);
	v->sample_stack = malloc((p->nsamples ? p->nsamples : 1) * sizeof(*v->sample_stack));
	if (!v->sample_stack || (rc = prs_view_names_init(v)) || (rc = count_processes(v)))
		goto fail;
	v->process_roots = o->per_process && v->nprocesses > 1;
	rc = build_view(v);
	if (rc)
		goto fail;
	*out = v;
	return 0;
fail:
	prs_view_free(v);
	return prs_err_set(err, rc ? rc : -ENOMEM, "profile view: %s",
			   rc == -EOVERFLOW ? "sample weights overflow" : "out of memory");
}

void prs_view_free(struct prs_profile_view *v)
{
	if (!v)
		return;
	free(v->threads);
	free(v->procs);
	prs_map64_release(&v->pid_procs);
	free(v->synth);
	prs_buf_release(&v->names);
	free(v->stacks);
	free(v->roots);
	free(v->sample_stack);
	free(v->out);
	free(v->owner);
	free(v->chain);
	free(v->end_of);
	free(v->py_out[0]);
	free(v->py_out[1]);
	free(v->py_chain);
	free(v->py_class);
	free(v);
}

const struct prs_view_stack *prs_view_stacks(const struct prs_profile_view *v, size_t *n)
{
	*n = v->nstacks;
	return v->stacks;
}

uint32_t prs_view_sample_stack(const struct prs_profile_view *v, size_t i)
{
	return i < v->p->nsamples ? v->sample_stack[i] : PRS_VIEW_NONE;
}
