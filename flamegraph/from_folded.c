/* SPDX-License-Identifier: MIT */
/*
 * Folded stacks straight into the flame graph tree, without the profile model: `pyrsprof
 * flamegraph FILE.folded` needs nothing of a sample but its stack and count, and going through the
 * model and a view of it built the same tree three times (the model's stack trie, the view's
 * stacks, the graph's nodes): 2.0 s CPU and 200 MB for fg_shapes' "unsorted" input of 78 MB.
 * The tree made here is the one prs_fg_from_profile makes of the model read from the same file
 * (the same nodes, names and counts: tests/unit/test_fg_folded.c compares the SVGs byte for byte).
 */
#include "pyrsprof/flamegraph.h"
#include "pyrsprof/folded.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pyrsprof/util.h"

#include "fg-tree.h"

#include "util/banned.h"

struct folded_walk {
	struct prs_fg *fg;
	uint32_t *node_at; /* the tree node of the line's frame k */
	size_t node_cap;
	/* the line's new frames (those after the shared ones) */
	struct {
		const char *name[PRS_MAX_STACK_FRAMES];
		uint32_t len[PRS_MAX_STACK_FRAMES], id[PRS_MAX_STACK_FRAMES];
		uint8_t kind[PRS_MAX_STACK_FRAMES];
	} *nf;
};

static void walk_release(struct folded_walk *w)
{
	free(w->node_at);
	free(w->nf);
}

/* Adds one line: its frames as a path of nodes (those it shares with the line before are that
 * line's), and its count to the node it ends in. */
static int add_line(struct folded_walk *w, const struct prs_folded_line *l)
{
	/* a deeper stack keeps its outermost frames, as prs_fg_add and the profile path do */
	size_t n = l->nframes < PRS_MAX_STACK_FRAMES ? l->nframes : PRS_MAX_STACK_FRAMES;
	size_t shared = l->shared < n ? l->shared : n, k;
	uint32_t node = shared ? w->node_at[shared - 1] : 0;

	if (prs_array_grow((void **)&w->node_at, &w->node_cap, n, sizeof(*w->node_at)))
		return -ENOMEM;
	if (n > shared) {
		for (k = shared; k < n; k++) {
			const struct prs_folded_frame *f = &l->frames[k];

			w->nf->name[k - shared] = l->text + f->off;
			w->nf->len[k - shared] = f->len;
			w->nf->kind[k - shared] = f->kernel ? PRS_KIND_KERNEL : PRS_KIND_UNKNOWN;
		}
		if (prs_fg_intern_many(w->fg, w->nf->name, w->nf->len, n - shared, w->nf->id) ||
		    prs_fg_path(w->fg, node, w->nf->id, w->nf->kind, n - shared, w->node_at + shared))
			return -ENOMEM;
		node = w->node_at[n - 1];
	}
	return prs_fg_add_self(w->fg, node, l->count);
}

int prs_fg_from_folded(struct prs_fg *fg, FILE *f, const char *name, uint64_t *samples,
		       struct prs_err *err)
{
	struct prs_folded_lexer *lx = prs_folded_lexer_new(f, name);
	struct folded_walk w = { .fg = fg };
	struct prs_folded_line l;
	unsigned long lines = 0;
	int rc = 0, got;

	*samples = 0;
	if (fg->nnodes != 1 || prs_fg_total(fg)) {
		rc = prs_err_set(err, -EINVAL, "flame graph: folded stacks go into an empty tree");
		goto out;
	}
	w.nf = malloc(sizeof(*w.nf));
	if (!lx || !w.nf) {
		rc = prs_err_set(err, -ENOMEM, "%s: out of memory", name);
		goto out;
	}
	while ((got = prs_folded_next(lx, &l, err)) > 0) {
		lines++;
		rc = add_line(&w, &l);
		if (rc == -EOVERFLOW) {
			rc = prs_err_set(err, rc, "%s:%lu: sample counts overflow", name, l.lineno);
			goto out;
		}
		if (rc) {
			rc = prs_err_set(err, rc, "%s:%lu: out of memory", name, l.lineno);
			goto out;
		}
	}
	if (got < 0) {
		rc = got;
		goto out;
	}
	if (!lines) {
		rc = prs_err_set(err, -EINVAL, "%s: no stacks (empty folded file)", name);
		goto out;
	}
	prs_fg_sum_self(fg);
	*samples = prs_fg_total(fg);
out:
	prs_folded_lexer_free(lx);
	walk_release(&w);
	return rc;
}
