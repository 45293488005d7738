/* SPDX-License-Identifier: MIT */
/*
 * The Python stack view (prs_view_opts.python_stacks, `--stacks python`): the stacks as py-spy
 * shows them, with the interpreter's own native frames folded into the Python line that caused
 * them, and the native frames of extensions (NumPy, Rust, C extension modules) kept in place.
 *
 * The rule, per frame of the profile's stack (a raw native frame is judged by its mapping's
 * path, whatever its symbolization expands it to):
 * - the interpreter's frames go: a mapping whose file is libpython*.so* or a python executable
 *   ("python", "python3", "python3.12", "python3.13d"...);
 * - a libc / libpthread / ld.so frame goes when its nearest caller that is not such a frame is
 *   the interpreter, a Python frame, or nothing (the thread's start: _start, clone); called
 *   from an extension it stays (the extension's own work);
 * - everything else stays: Python frames, extensions' native frames, raw frames outside any
 *   mapping, kernel frames (under the line that made the syscall), named frames without a
 *   mapping (folded input, whose frames carry no mapping: it shows as is);
 * - a stack without any Python frame (a pure native thread, a Rust/C thread, the interpreter
 *   before it runs Python code) stays whole: there is no Python line to fold into;
 * - the roots (process, thread) and the off-CPU leaf ("[waiting for the GIL]", "[read]") stay.
 * Samples and their weights are those of the merged view: only the frames of each stack change.
 *
 * *shared is found by comparing with the previous stack's frames (two buffers, swapped): O(depth)
 * per stack, no allocation after the first call.
 */
#include "profile/view-internal.h"

#include <stdlib.h>
#include <string.h>

#include "util/banned.h"

#define OUT_MAX (PRS_VIEW_MAX_FRAMES + 3) /* two roots, the stack's frames, a leaf */

enum py_class {
	CLASS_UNKNOWN = 0, /* not computed yet */
	CLASS_OTHER,       /* an extension or any other file: kept */
	CLASS_INTERP,      /* the interpreter: folded */
	CLASS_LIBC,        /* libc and its kin: folded when the interpreter called them */
};

static bool starts(const char *s, size_t n, const char *prefix)
{
	size_t k = strlen(prefix);

	return n >= k && memcmp(s, prefix, k) == 0;
}

/* "python", "python3", "python3.12", "python3.13d", "python3.13t": an interpreter executable. */
static bool python_exe(const char *b, size_t n)
{
	if (!starts(b, n, "python"))
		return false;
	for (size_t k = 6; k < n; k++)
		if (!(b[k] >= '0' && b[k] <= '9') && b[k] != '.' && !(k == n - 1 && (b[k] == 'd' || b[k] == 't')))
			return false;
	return true;
}

static uint8_t classify_path(const char *path, size_t len)
{
	const char *slash = memrchr(path, '/', len);
	const char *b = slash ? slash + 1 : path;
	size_t n = len - (size_t)(b - path);

	if (starts(b, n, "libpython") || python_exe(b, n))
		return CLASS_INTERP;
	if (starts(b, n, "libc.so") || starts(b, n, "libc-") || starts(b, n, "libpthread") ||
	    starts(b, n, "ld-linux") || starts(b, n, "ld-") || starts(b, n, "ld64.so"))
		return CLASS_LIBC;
	return CLASS_OTHER;
}

static uint8_t frame_class(struct prs_profile_view *v, uint32_t id)
{
	const struct prs_profile *p = v->p;
	const struct prs_frame *f = &p->frames[id];
	uint8_t *c;

	if (!f->raw || f->mapping >= p->nmappings)
		return CLASS_OTHER;
	c = &v->py_class[f->mapping];
	if (*c == CLASS_UNKNOWN) {
		uint32_t s = p->mappings[f->mapping].path;

		*c = s < p->nstrings ? classify_path(p->strings[s], p->string_lens[s]) : CLASS_OTHER;
	}
	return *c;
}

static int python_alloc(struct prs_profile_view *v)
{
	const struct prs_profile *p = v->p;

	v->py_out[0] = malloc(OUT_MAX * sizeof(uint32_t));
	v->py_out[1] = malloc(OUT_MAX * sizeof(uint32_t));
	v->py_chain = malloc((PRS_PROFILE_MAX_DEPTH + 1) * sizeof(uint32_t));
	v->py_class = calloc(p->nmappings ? p->nmappings : 1, 1);
	return v->py_out[0] && v->py_out[1] && v->py_chain && v->py_class ? 0 : -1;
}

/* Fills py_chain with the trie stacks of s, leaf first; returns how many, *python if one is Python. */
static size_t chain_of(struct prs_profile_view *v, uint32_t s, bool *python)
{
	const struct prs_profile *p = v->p;
	size_t n = 0;

	*python = false;
	while (s != 0 && s < p->nstacks && n <= PRS_PROFILE_MAX_DEPTH) {
		uint32_t f = p->stacks[s].frame;

		if (f < p->nframes && !p->frames[f].raw && p->frames[f].kind == PRS_KIND_PYTHON)
			*python = true;
		v->py_chain[n++] = s;
		s = p->stacks[s].parent;
	}
	return n;
}

/* Appends the kept frames of the chain (root first) at out[pos]; returns the new end. */
static size_t append_kept(struct prs_profile_view *v, uint32_t *out, size_t n, size_t pos, size_t limit,
			  bool fold)
{
	const struct prs_profile *p = v->p;
	bool from_interp = true; /* the thread's start counts as the interpreter's */

	while (n-- > 0 && pos < limit) {
		const uint32_t *ids = &p->stacks[v->py_chain[n]].frame;
		uint32_t count = 1;

		if (fold) {
			uint8_t c = frame_class(v, *ids);

			if (c == CLASS_INTERP || (c == CLASS_LIBC && from_interp)) {
				from_interp = true;
				continue;
			}
			if (c != CLASS_LIBC)
				from_interp = !p->frames[*ids].raw && p->frames[*ids].kind == PRS_KIND_PYTHON;
		}
		if (!v->o.raw_frames && p->expansions)
			ids = prs_profile_expansion(p, ids, &count);
		for (; count > 0 && pos < limit; count--)
			out[pos++] = *ids++;
	}
	return pos;
}

size_t prs_view_python_frames(struct prs_profile_view *v, size_t i, const uint32_t **frames, size_t *shared)
{
	const struct prs_view_stack *st = &v->stacks[i];
	unsigned prev = v->py_cur, cur = prev ^ 1u;
	size_t nr = st->nroots, n, pos, same = 0;
	uint32_t *out;
	bool python;

	*frames = NULL;
	if (shared)
		*shared = 0;
	if (!v->py_out[0] && python_alloc(v) < 0)
		return 0;
	out = v->py_out[cur];
	memcpy(out, v->roots + 2 * i, nr * sizeof(*out));
	n = chain_of(v, st->stack, &python);
	pos = append_kept(v, out, n, nr, nr + PRS_VIEW_MAX_FRAMES, python);
	if (st->leaf != PRS_VIEW_NONE)
		out[pos++] = st->leaf;
	else if (st->empty)
		out[pos++] = v->empty_frame;
	/* the leaf of the previous stack is not shared: only its roots and stack frames are */
	while (same < pos && same < v->py_len[prev] && out[same] == v->py_out[prev][same])
		same++;
	if (shared)
		*shared = same;
	v->py_len[cur] = pos;
	v->py_cur = cur;
	*frames = out;
	return pos;
}
