/* SPDX-License-Identifier: MIT */
/*
 * Which function of one profile is which of the other, for `pyrsprof diff` (the rule is in
 * include/pyrsprof/diff.h). A function is (name, module, kind); its module is the file a Python
 * frame was read from, the library a native frame was symbolized in (the basename of the mapping
 * whose raw frame it expands), else its source file, else none. Modules of both profiles pair:
 *   1. by their text (a file at the same path; a library of the same name);
 *   2. a module found on one side only pairs with one found on the other side only when at
 *      least half of the functions of the smaller one are in both (by name and kind): the same
 *      basename first (a moved file), then the most functions in common (a renamed script). Git
 *      detects renames alike, by content similarity, 50 % by default;
 *   3. otherwise it stays apart;
 *   4. a function still without a match on the other side (its module did not pair, or the
 *      partner module lacks it) pairs with the only unmatched function of the same name and
 *      kind on the other side (a function moved to another file); the rest are added or
 *      removed.
 * Functions of the same name in two modules that both sides have are never merged. The before
 * profile's frames are then described by the file of their module's partner (prs_view_opts'
 * file_of), so every consumer that reads through a view (hot spots, the flame graph) keys them
 * as the after profile's.
 */
#include "pyrsprof/diff.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pyrsprof/util.h"
#include "report/diff-internal.h"

#include "util/banned.h"

#define SHARED_MIN 0.5   /* of the smaller module's functions, to pair two modules */
#define POSTING_MAX 64   /* a name in more unpaired modules than this says nothing of which */

struct mod {
	const char *str; /* borrowed from the profile, NUL-terminated */
	uint32_t len, nfn;
	int32_t pair;    /* the other side's module, or -1 */
};

struct fnent {
	uint32_t mod, name; /* module index, the profile's string id */
	uint8_t kind;
	int32_t partner;    /* step 4: the other side's function it pairs with, or -1 */
};

struct side {
	const struct prs_profile *p;
	const char **file; /* per profile frame: the file it is keyed by (NULL: a raw frame) */
	uint32_t *flen;
	uint32_t *mod_of;  /* per profile frame: its module (UINT32_MAX: a raw frame) */
	uint32_t *fn_of;   /* per profile frame: its function (fns index; valid where mod_of is) */
	struct mod *mods;
	size_t nmods, cap_mods;
	struct prs_strmap modmap;
	struct fnent *fns;
	size_t nfns, cap_fns;
	struct prs_map64 fnmap; /* (module << 32 | name) -> fns index */
};

struct prs_diff_match {
	struct side s[2];
	bool by_name;
	struct prs_diff_pair *pairs;
	size_t npairs, cap_pairs;
	struct prs_diff_fn_pair *fpairs;
	size_t nfpairs, cap_fpairs;
};

const char *prs_diff_basename(const char *path)
{
	const char *b = strrchr(path, '/');

	return b ? b + 1 : path;
}

/* True if some named frame of p has a file (a symbolized recording; folded input has none). */
static bool has_files(const struct prs_profile *p)
{
	for (uint32_t i = 0; i < p->nframes; i++)
		if (!p->frames[i].raw && p->frames[i].file && p->frames[i].file < p->nstrings)
			return true;
	return false;
}

static bool native(uint8_t kind)
{
	return kind == PRS_KIND_NATIVE || kind == PRS_KIND_CPP || kind == PRS_KIND_RUST;
}

/* The library of every named frame that expands a raw frame: a mapping path's string id, 0 none. */
static int libraries(const struct prs_profile *p, uint32_t *lib)
{
	if (!p->expansions)
		return 0;
	for (uint32_t r = 0; r < p->nframes; r++) {
		const struct prs_expansion *e = &p->expansions[r];
		const struct prs_frame *f = &p->frames[r];

		if (!f->raw || !e->count || f->mapping >= p->nmappings ||
		    e->first > p->nexpand_ids || e->count > p->nexpand_ids - e->first)
			continue;
		for (uint32_t k = 0; k < e->count; k++) {
			uint32_t id = p->expand_ids[e->first + k];

			if (id < p->nframes && !lib[id] && p->mappings[f->mapping].path < p->nstrings)
				lib[id] = p->mappings[f->mapping].path;
		}
	}
	return 0;
}

/* The module of s's named frame i: its index, or UINT32_MAX on ENOMEM. */
static uint32_t module_of(struct side *s, const char *str, size_t len)
{
	uint32_t v = prs_strmap_get(&s->modmap, str, len);

	if (v != PRS_MAP_NONE)
		return v;
	if (s->nmods >= INT32_MAX ||
	    prs_array_grow((void **)&s->mods, &s->cap_mods, s->nmods + 1, sizeof(*s->mods)) ||
	    prs_strmap_put(&s->modmap, str, len, (uint32_t)s->nmods))
		return UINT32_MAX;
	s->mods[s->nmods] = (struct mod){ str, (uint32_t)len, 0, -1 };
	return (uint32_t)s->nmods++;
}

/* Counts function (module, name, kind) of side s once; *idx gets its fns index. */
static int add_fn(struct side *s, uint32_t mod, uint32_t name, uint8_t kind, uint32_t *idx)
{
	int r = prs_map64_intern(&s->fnmap, (uint64_t)mod << 32 | name, (uint32_t)s->nfns, idx);

	if (r <= 0)
		return r;
	if (prs_array_grow((void **)&s->fns, &s->cap_fns, s->nfns + 1, sizeof(*s->fns)))
		return -ENOMEM;
	s->fns[s->nfns++] = (struct fnent){ mod, name, kind, -1 };
	s->mods[mod].nfn++;
	return 0;
}

/* Every named frame of s's profile: its module and its key file (its own module's for now). */
static int scan(struct side *s, bool by_name)
{
	const struct prs_profile *p = s->p;
	uint32_t *lib = calloc(p->nframes ? p->nframes : 1, sizeof(*lib));
	int rc = -ENOMEM;

	s->file = calloc(p->nframes ? p->nframes : 1, sizeof(*s->file));
	s->flen = calloc(p->nframes ? p->nframes : 1, sizeof(*s->flen));
	s->mod_of = malloc((p->nframes ? p->nframes : 1) * sizeof(*s->mod_of));
	s->fn_of = calloc(p->nframes ? p->nframes : 1, sizeof(*s->fn_of));
	if (!lib || !s->file || !s->flen || !s->mod_of || !s->fn_of || libraries(p, lib))
		goto out;
	for (uint32_t i = 0; i < p->nframes; i++) {
		const struct prs_frame *f = &p->frames[i];
		const char *str = "";
		uint32_t m;

		s->mod_of[i] = UINT32_MAX;
		if (f->raw)
			continue;
		if (by_name)
			str = "";
		else if (native(f->kind) && lib[i])
			str = prs_diff_basename(p->strings[lib[i]]);
		else if (f->file && f->file < p->nstrings)
			str = p->strings[f->file];
		m = module_of(s, str, strlen(str));
		if (m == UINT32_MAX ||
		    add_fn(s, m, f->name < p->nstrings ? f->name : 0, f->kind, &s->fn_of[i]))
			goto out;
		s->mod_of[i] = m;
	}
	rc = 0;
out:
	free(lib);
	return rc;
}

struct cand {
	uint32_t b, a, common;
	bool same_base;
	double score;
};

static int cand_cmp(const void *x, const void *y)
{
	const struct cand *p = x, *q = y;

	if (p->same_base != q->same_base)
		return p->same_base ? -1 : 1;
	if (p->score != q->score)
		return p->score > q->score ? -1 : 1;
	if (p->common != q->common)
		return p->common > q->common ? -1 : 1;
	if (p->b != q->b)
		return p->b < q->b ? -1 : 1;
	return p->a < q->a ? -1 : p->a > q->a;
}

static int add_pair(struct prs_diff_match *m, const struct cand *c)
{
	struct mod *b = &m->s[0].mods[c->b], *a = &m->s[1].mods[c->a];
	struct prs_diff_pair *pr;

	if (prs_array_grow((void **)&m->pairs, &m->cap_pairs, m->npairs + 1, sizeof(*m->pairs)))
		return -ENOMEM;
	pr = &m->pairs[m->npairs++];
	pr->before = b->str;
	pr->after = a->str;
	pr->moved = c->same_base;
	pr->common = c->common;
	pr->functions = b->nfn < a->nfn ? b->nfn : a->nfn;
	b->pair = (int32_t)c->a;
	a->pair = (int32_t)c->b;
	return 0;
}

/* Step 2 of the rule: the candidates among the unpaired modules, from an index of the after
 * side's function names (a list per name of the unpaired modules that have it, newest first). */
struct posting {
	uint32_t mod, next; /* next: entry + 1, 0 = end */
	uint32_t len;       /* entries from this one to the end of its list */
	uint8_t kind;
};

struct index {
	struct prs_strmap heads; /* name -> its list's first entry + 1 */
	struct posting *post;
	size_t npost, cap;
};

static int index_after(struct index *x, const struct side *A)
{
	const struct prs_profile *p = A->p;

	for (size_t i = 0; i < A->nfns; i++) {
		const struct fnent *f = &A->fns[i];
		const char *name = p->strings[f->name];
		uint32_t h;

		if (A->mods[f->mod].pair >= 0)
			continue;
		if (x->npost >= UINT32_MAX - 1 ||
		    prs_array_grow((void **)&x->post, &x->cap, x->npost + 1, sizeof(*x->post)))
			return -ENOMEM;
		h = prs_strmap_get(&x->heads, name, p->string_lens[f->name]);
		x->post[x->npost] = (struct posting){ f->mod, h == PRS_MAP_NONE ? 0 : h,
						      h == PRS_MAP_NONE ? 1 : x->post[h - 1].len + 1, f->kind };
		if (prs_strmap_put(&x->heads, name, p->string_lens[f->name], (uint32_t)x->npost + 1))
			return -ENOMEM;
		x->npost++;
	}
	return 0;
}

static int by_module(const void *x, const void *y, void *arg)
{
	const struct fnent *fns = arg, *a = &fns[*(const uint32_t *)x], *b = &fns[*(const uint32_t *)y];

	return a->mod < b->mod ? -1 : a->mod > b->mod;
}

struct counts {
	uint32_t *cnt, *touched; /* per after module; the modules counted for the current one */
	size_t ntouched;
	struct cand *cand;
	size_t ncand, cap;
};

/* Counts, for before module u (its functions fns[order[i..end)]), the functions every unpaired
 * after module shares with it, and keeps those that pass as candidates. */
static int candidates(struct prs_diff_match *m, const struct index *x, const uint32_t *order,
		      size_t i, size_t end, struct counts *c)
{
	const struct side *B = &m->s[0], *A = &m->s[1];
	const struct prs_profile *p = B->p;
	uint32_t u = B->fns[order[i]].mod;

	c->ntouched = 0;
	for (; i < end; i++) {
		const struct fnent *f = &B->fns[order[i]];
		uint32_t h = prs_strmap_get(&x->heads, p->strings[f->name], p->string_lens[f->name]);

		if (h == PRS_MAP_NONE || x->post[h - 1].len > POSTING_MAX)
			continue;
		for (uint32_t e = h; e; e = x->post[e - 1].next)
			if (x->post[e - 1].kind == f->kind && !c->cnt[x->post[e - 1].mod]++)
				c->touched[c->ntouched++] = x->post[e - 1].mod;
	}
	for (size_t t = 0; t < c->ntouched; t++) {
		uint32_t v = c->touched[t], nb = B->mods[u].nfn, na = A->mods[v].nfn;
		double score = (double)c->cnt[v] / (nb < na ? nb : na);

		if (score >= SHARED_MIN) {
			if (prs_array_grow((void **)&c->cand, &c->cap, c->ncand + 1, sizeof(*c->cand)))
				return -ENOMEM;
			c->cand[c->ncand++] = (struct cand){
				u, v, c->cnt[v], strcmp(prs_diff_basename(B->mods[u].str), prs_diff_basename(A->mods[v].str)) == 0,
				score
			};
		}
		c->cnt[v] = 0;
	}
	return 0;
}

static int pair_unmatched(struct prs_diff_match *m)
{
	struct side *B = &m->s[0], *A = &m->s[1];
	struct index x = { .post = NULL };
	struct counts c = { NULL, NULL, 0, NULL, 0, 0 };
	uint32_t *order = NULL;
	size_t n = 0, i, j;
	int rc = -ENOMEM;

	prs_strmap_init(&x.heads);
	c.cnt = calloc(A->nmods ? A->nmods : 1, sizeof(*c.cnt));
	c.touched = malloc((A->nmods ? A->nmods : 1) * sizeof(*c.touched));
	order = malloc((B->nfns ? B->nfns : 1) * sizeof(*order));
	if (!c.cnt || !c.touched || !order || index_after(&x, A))
		goto out;
	/* the unpaired before modules' functions, grouped by module */
	for (i = 0; i < B->nfns; i++)
		if (B->mods[B->fns[i].mod].pair < 0)
			order[n++] = (uint32_t)i;
	qsort_r(order, n, sizeof(*order), by_module, B->fns);
	for (i = 0; i < n; i = j) {
		for (j = i + 1; j < n && B->fns[order[j]].mod == B->fns[order[i]].mod; j++)
			;
		if (candidates(m, &x, order, i, j, &c))
			goto out;
	}
	if (c.ncand)
		qsort(c.cand, c.ncand, sizeof(*c.cand), cand_cmp);
	for (i = 0; i < c.ncand; i++)
		if (B->mods[c.cand[i].b].pair < 0 && A->mods[c.cand[i].a].pair < 0 &&
		    add_pair(m, &c.cand[i]))
			goto out;
	rc = 0;
out:
	prs_strmap_release(&x.heads);
	free(x.post);
	free(c.cnt);
	free(c.touched);
	free(c.cand);
	free(order);
	return rc;
}

/* Step 1: modules of the same text pair. */
static void pair_same(struct prs_diff_match *m)
{
	struct side *B = &m->s[0], *A = &m->s[1];

	for (size_t u = 0; u < B->nmods; u++) {
		uint32_t v = prs_strmap_get(&A->modmap, B->mods[u].str, B->mods[u].len);

		if (v != PRS_MAP_NONE) {
			B->mods[u].pair = (int32_t)v;
			A->mods[v].pair = (int32_t)u;
		}
	}
}

/*
 * Step 4: a function of one side that has no match on the other (its module did not pair, or
 * the partner module lacks it) pairs with the one function of the same name and kind that has
 * no match on the other side either: a function moved to another file. A name that several
 * unmatched functions of one side share stays unmatched: which is which is not known.
 */
#define MANY (UINT32_MAX - 1)

/* The names of side s's functions -> their string id (keys borrowed from the profile). */
static int name_index(const struct side *s, struct prs_strmap *names)
{
	const struct prs_profile *p = s->p;

	for (size_t i = 0; i < s->nfns; i++)
		if (prs_strmap_put(names, p->strings[s->fns[i].name], p->string_lens[s->fns[i].name],
				   s->fns[i].name))
			return -ENOMEM;
	return 0;
}

/* True if function f of side k has a match in module pairing: the other side's partner module
 * has a function of its name. */
static bool matched(const struct prs_diff_match *m, int k, const struct fnent *f,
		    const struct prs_strmap *other_names)
{
	const struct side *s = &m->s[k], *o = &m->s[1 - k];
	int32_t pm = s->mods[f->mod].pair;
	uint32_t id;

	if (pm < 0)
		return false;
	id = prs_strmap_get(other_names, s->p->strings[f->name], s->p->string_lens[f->name]);
	return id != PRS_MAP_NONE && prs_map64_get(&o->fnmap, (uint64_t)pm << 32 | id) != PRS_MAP_NONE;
}

/* name -> the one unmatched function of side k with it (MANY when several). */
static int unmatched_index(const struct prs_diff_match *m, int k, const struct prs_strmap *other_names,
			   struct prs_strmap *out)
{
	const struct side *s = &m->s[k];

	for (size_t i = 0; i < s->nfns; i++) {
		const struct fnent *f = &s->fns[i];
		const char *name = s->p->strings[f->name];
		uint32_t len = s->p->string_lens[f->name];

		if (!len || matched(m, k, f, other_names))
			continue;
		if (prs_strmap_put(out, name, len, prs_strmap_get(out, name, len) == PRS_MAP_NONE
						    ? (uint32_t)i : MANY))
			return -ENOMEM;
	}
	return 0;
}

static int pair_functions(struct prs_diff_match *m)
{
	struct side *B = &m->s[0], *A = &m->s[1];
	struct prs_strmap names[2], un[2];
	int rc = -ENOMEM;

	for (int k = 0; k < 2; k++) {
		prs_strmap_init(&names[k]);
		prs_strmap_init(&un[k]);
	}
	if (name_index(B, &names[0]) || name_index(A, &names[1]) ||
	    unmatched_index(m, 0, &names[1], &un[0]) || unmatched_index(m, 1, &names[0], &un[1]))
		goto out;
	for (size_t i = 0; i < B->nfns; i++) {
		struct fnent *f = &B->fns[i];
		const char *name = B->p->strings[f->name];
		uint32_t len = B->p->string_lens[f->name], a;

		if (!len || prs_strmap_get(&un[0], name, len) != i)
			continue;
		a = prs_strmap_get(&un[1], name, len);
		if (a == PRS_MAP_NONE || a == MANY || A->fns[a].kind != f->kind)
			continue;
		if (prs_array_grow((void **)&m->fpairs, &m->cap_fpairs, m->nfpairs + 1, sizeof(*m->fpairs)))
			goto out;
		f->partner = (int32_t)a;
		A->fns[a].partner = (int32_t)i;
		m->fpairs[m->nfpairs++] = (struct prs_diff_fn_pair){ name, B->mods[f->mod].str,
								    A->mods[A->fns[a].mod].str };
	}
	rc = 0;
out:
	for (int k = 0; k < 2; k++) {
		prs_strmap_release(&names[k]);
		prs_strmap_release(&un[k]);
	}
	return rc;
}

/* Each frame's key file: its module's, and for a before frame its module partner's. */
static void key_files(struct prs_diff_match *m)
{
	for (int k = 0; k < 2; k++) {
		struct side *s = &m->s[k];

		for (uint32_t i = 0; i < s->p->nframes; i++) {
			const struct mod *md;

			if (s->mod_of[i] == UINT32_MAX)
				continue;
			md = &s->mods[s->mod_of[i]];
			if (k == 0 && s->fns[s->fn_of[i]].partner >= 0)
				md = &m->s[1].mods[m->s[1].fns[s->fns[s->fn_of[i]].partner].mod];
			else if (k == 0 && md->pair >= 0)
				md = &m->s[1].mods[md->pair];
			s->file[i] = md->str;
			s->flen[i] = md->len;
		}
	}
}

static void side_release(struct side *s)
{
	free(s->file);
	free(s->flen);
	free(s->mod_of);
	free(s->fn_of);
	free(s->mods);
	free(s->fns);
	prs_strmap_release(&s->modmap);
	prs_map64_release(&s->fnmap);
}

int prs_diff_match_new(const struct prs_profile *before, const struct prs_profile *after,
		       struct prs_diff_match **out, struct prs_err *err)
{
	struct prs_diff_match *m = calloc(1, sizeof(*m));

	*out = NULL;
	if (!m)
		return prs_err_set(err, -ENOMEM, "diff: out of memory");
	m->s[0].p = before;
	m->s[1].p = after;
	m->by_name = !has_files(before) || !has_files(after);
	for (int k = 0; k < 2; k++) {
		prs_strmap_init(&m->s[k].modmap);
		prs_map64_init(&m->s[k].fnmap);
	}
	if (scan(&m->s[0], m->by_name) || scan(&m->s[1], m->by_name))
		goto nomem;
	pair_same(m);
	if (pair_unmatched(m) || (!m->by_name && pair_functions(m)))
		goto nomem;
	key_files(m);
	*out = m;
	return 0;
nomem:
	prs_diff_match_free(m);
	return prs_err_set(err, -ENOMEM, "diff: out of memory");
}

void prs_diff_match_free(struct prs_diff_match *m)
{
	if (!m)
		return;
	side_release(&m->s[0]);
	side_release(&m->s[1]);
	free(m->pairs);
	free(m->fpairs);
	free(m);
}

static const char *file_of(void *arg, uint32_t frame, size_t *len)
{
	const struct side *s = arg;

	if (frame >= s->p->nframes || !s->file[frame])
		return NULL;
	*len = s->flen[frame];
	return s->file[frame];
}

void prs_diff_match_opts(struct prs_diff_match *m, int side, struct prs_view_opts *o)
{
	o->file_of = file_of;
	o->file_arg = &m->s[side ? 1 : 0];
}

bool prs_diff_match_by_name(const struct prs_diff_match *m)
{
	return m->by_name;
}

const struct prs_diff_pair *prs_diff_match_pairs(const struct prs_diff_match *m, size_t *n)
{
	*n = m->npairs;
	return m->pairs;
}

const struct prs_diff_fn_pair *prs_diff_match_fn_pairs(const struct prs_diff_match *m, size_t *n)
{
	*n = m->nfpairs;
	return m->fpairs;
}
