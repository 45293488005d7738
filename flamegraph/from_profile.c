/* SPDX-License-Identifier: MIT */
/*
 * Builds a flame graph tree from a profile, through a view of it (include/pyrsprof/view.h): the
 * view sums the samples per distinct stack and gives each one's frames root first, process and
 * thread roots and the off-CPU leaf in place; they go into the tree as a path of nodes. The view
 * says how many leading frames a stack shares with the one before, so only the rest are looked
 * up: each stack-trie node is resolved about once. The profile may come from a file: the view
 * checks every id it follows.
 */
#include "pyrsprof/flamegraph.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "pyrsprof/util.h"
#include "pyrsprof/view.h"

#include "fg-tree.h"

#include "util/banned.h"

#define RAW_LABEL 320 /* "basename+0xOFF": a file name is at most 255 bytes */

/* A view frame as the tree keys it, computed once per frame id. */
struct fkey {
	uint32_t name, file; /* fg string ids */
	uint32_t line;
	uint8_t kind;
	bool done;
};

struct walk {
	struct prs_fg *fg;
	struct prs_profile_view *v;
	struct fkey *fk;
	uint32_t *path; /* the tree node of each frame of the last stack */
	size_t valid;   /* how many entries of path are those of the last stack's frames */
	char label[RAW_LABEL];
};

static int frame_key(struct walk *w, uint32_t id, struct fkey **out)
{
	struct fkey *k = &w->fk[id];

	if (!k->done) {
		struct prs_view_frame f;
		size_t nlen;

		prs_view_frame(w->v, id, &f, w->label, sizeof(w->label));
		/* a name from the profile is cut as any name in the graph; the view's own are short */
		nlen = f.frame ? strnlen(f.name, PRS_MAX_NAME) : f.name_len;
		k->name = prs_fg_intern(w->fg, f.name, nlen);
		k->file = f.file_len ? prs_fg_intern(w->fg, f.file, strnlen(f.file, PRS_MAX_NAME)) : 0;
		k->line = f.line;
		k->kind = (uint8_t)f.kind;
		if (k->name == UINT32_MAX || k->file == UINT32_MAX)
			return -ENOMEM;
		k->done = true;
	}
	*out = k;
	return 0;
}

/*
 * The tree node of view stack i (0 for no frames), its line counts added when lines. Stacks
 * deeper than PRS_MAX_STACK_FRAMES keep their outermost frames (and their leaf).
 */
static int add_stack(struct walk *w, size_t i, const struct prs_view_stack *st, bool lines,
		     uint32_t *node)
{
	const uint32_t *ids;
	size_t shared, n = prs_view_frames(w->v, i, &ids, &shared), j, end = n, tail = 0;
	struct fkey *k;

	if (!ids)
		return -ENOMEM;
	if (st->leaf != PRS_VIEW_NONE || st->empty)
		tail = 1;
	if (n - tail - st->nroots > PRS_MAX_STACK_FRAMES)
		end = st->nroots + PRS_MAX_STACK_FRAMES;
	else
		end = n - tail;
	if (shared > w->valid)
		shared = w->valid;
	for (j = shared; j < end + tail; j++) {
		uint32_t id = j < end ? ids[j] : ids[n - 1];

		if (frame_key(w, id, &k) < 0)
			return -ENOMEM;
		w->path[j] = prs_fg_child(w->fg, j ? w->path[j - 1] : 0, k->name, k->file, k->kind);
		if (!w->path[j])
			return -ENOMEM;
	}
	/* a cut stack's leaf is not at its frame's position: later stacks must not reuse it */
	w->valid = end < n - tail ? end : end + tail;
	for (j = 0; lines && j < end; j++)
		if (w->fk[ids[j]].line && prs_fg_line(w->fg, w->path[j], w->fk[ids[j]].line, st->weight) < 0)
			return -ENOMEM;
	*node = end + tail ? w->path[end + tail - 1] : 0;
	return 0;
}

/*
 * The counts, all at once: each node's own weight (weight[i] of the view stack whose node is
 * node_of[i]: n of them), then one pass adds them up the tree. The view is freed by then: its
 * arrays (~7 MB for view_bench's 110k stacks) do not add to the tree's at its peak.
 */
static int count_nodes(struct prs_fg *fg, const uint32_t *node_of, const uint64_t *weight, size_t n,
		       int slot, struct prs_err *err)
{
	uint64_t *self = calloc(fg->nnodes, sizeof(*self));
	int rc = 0;

	if (!self)
		return prs_err_set(err, -ENOMEM, "flame graph: out of memory");
	prs_mem_hint_huge(self, fg->nnodes * sizeof(*self));
	for (size_t i = 0; i < n && !rc; i++) {
		if (weight[i] > UINT64_MAX / 2 - self[node_of[i]])
			rc = prs_err_set(err, -EOVERFLOW, "flame graph: sample counts overflow");
		else
			self[node_of[i]] += weight[i];
	}
	if (!rc && (rc = prs_fg_count_all(fg, self, fg->nnodes, slot != 0)) < 0)
		prs_err_set(err, rc, "flame graph: sample counts overflow");
	free(self);
	return rc;
}

static int add_profile(struct prs_fg *fg, const struct prs_profile *p,
		       const struct prs_view_opts *o, int slot, struct prs_err *err)
{
	struct walk w = { .fg = fg };
	const struct prs_view_stack *st;
	uint32_t *node_of = NULL;
	uint64_t *weight = NULL;
	size_t n = 0, i;
	bool lines = false;
	int rc;

	if ((rc = prs_view_new(p, o, &w.v, err)))
		return rc;
	st = prs_view_stacks(w.v, &n);
	w.fk = calloc(prs_view_nframes(w.v), sizeof(*w.fk));
	w.path = malloc((PRS_VIEW_MAX_FRAMES + 3) * sizeof(*w.path));
	node_of = calloc(n ? n : 1, sizeof(*node_of));
	weight = malloc((n ? n : 1) * sizeof(*weight));
	if (!w.fk || !w.path || !node_of || !weight)
		goto nomem;
	/* line counts only when some frame has a line (not folded input) */
	for (i = 0; i < p->nframes && !lines; i++)
		lines = p->frames[i].line != 0;
	/* every profile stack makes at most one node per frame: room for all, no rehash midway
	 * (a hint: without it the tree grows as it goes) */
	if (n && p->nstacks < (1u << 26))
		prs_fg_reserve(fg, p->nstacks + 2);
	for (i = 0; i < n; i++) {
		weight[i] = st[i].weight;
		if (st[i].weight && add_stack(&w, i, &st[i], lines, &node_of[i]) < 0)
			goto nomem;
	}
	prs_view_free(w.v);
	w.v = NULL;
	free(w.fk);
	w.fk = NULL;
	rc = count_nodes(fg, node_of, weight, n, slot, err);
	goto out;
nomem:
	rc = prs_err_set(err, -ENOMEM, "flame graph: out of memory");
out:
	prs_view_free(w.v);
	free(w.fk);
	free(w.path);
	free(node_of);
	free(weight);
	return rc;
}

int prs_fg_from_profile(struct prs_fg *fg, const struct prs_profile *p,
			const struct prs_view_opts *o, struct prs_err *err)
{
	return add_profile(fg, p, o, 0, err);
}

int prs_fg_diff_from_profiles(struct prs_fg *fg, const struct prs_profile *before,
			      const struct prs_view_opts *ob, const struct prs_profile *after,
			      const struct prs_view_opts *oa, struct prs_err *err)
{
	int rc = add_profile(fg, before, ob, 1, err);

	return rc < 0 ? rc : add_profile(fg, after, oa, 0, err);
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
	/* a profile read back that did not end whole says so on the graph itself */
	if (p->damaged_at)
		APPEND(" · damaged at byte %" PRIu64 ": what precedes", p->damaged_at);
	else if (!p->complete)
		APPEND(" · cut short: the recording did not finish");
#undef APPEND
	return buf;
}
