/* SPDX-License-Identifier: MIT */
/*
 * The frame tree behind struct prs_fg (private to flamegraph/): fg.c builds it, svg.c draws it.
 * Node 0 is the root ("all"); node ids, string ids and line ids are dense uint32 indexes.
 */
#ifndef PYRSPROF_FG_TREE_H
#define PYRSPROF_FG_TREE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A hash table slot: the entry's id (+ 1 for strings and lines, as is for nodes: 0 = empty) and
 * its hash, so that a probe touches the entry itself only when the hashes are equal. */
struct fg_slot {
	uint32_t id, hash;
};

struct fg_str {
	uint32_t off, len; /* bytes at arena + off, NUL-terminated */
};

struct fg_node {
	uint32_t parent, first_child, next_sibling; /* 0 = none (node 0 is nobody's child) */
	uint32_t name, file;                         /* string ids */
	uint32_t first_line;                         /* line id + 1, 0 = none */
	uint8_t kind;                                /* enum prs_kind */
	uint8_t nlines; /* lines in first_line's list, up to LINE_SCAN: from there on they are all in
			 * line_slots too (fg.c) */
	uint32_t hash; /* of the node's whole path from the root (node_hash): a path's nodes can
			* all be looked up before any is found (prs_fg_path) */
	uint64_t total; /* samples in the node's subtree ("after" in a differential graph) */
};

/* 20 bytes, 4-aligned (24 unpacked): a wall graph of 1M samples has ~450k lines (issue 13's
 * memory goal) */
struct fg_line {
	uint32_t node, line, next; /* next: line id + 1 of the node's next line, 0 = none */
	uint64_t count;
} __attribute__((packed, aligned(4)));

/* One box to draw, in pre-order. A merged box (merged > 0) stands for `merged` narrow siblings. */
struct fg_draw {
	uint32_t node;   /* the node, or the parent of the merged siblings */
	uint32_t depth;  /* 0 = root */
	uint32_t merged; /* 0 for a real node */
	uint64_t x;      /* offset in layout units from the left edge (samples, unless differential) */
	uint64_t w;      /* width in layout units: count[0], or both sides' (fg-diff.h) */
	uint64_t count[2];
	uint64_t self[2]; /* samples in this node and in none of its children: after, before */
};

struct prs_fg {
	char *arena;
	size_t arena_len, arena_cap;
	struct fg_str *strs;
	uint32_t nstrs;
	size_t strs_cap;
	struct fg_slot *str_slots; /* string id + 1, 0 = empty */
	size_t str_nslots;

	struct fg_node *nodes;
	uint32_t nnodes;
	size_t nodes_cap;
	struct fg_slot *node_slots; /* node id, 0 = empty; holds nodes [1, nindexed) */
	size_t node_nslots;
	uint32_t nindexed;          /* nodes from here on are not in node_slots yet */
	uint64_t *bloom;            /* Bloom filter of every node's key (NULL: off) */
	size_t bloom_nbits;         /* a power of two, 0 when off */

	struct fg_line *lines;
	uint32_t nlines;
	size_t lines_cap;
	uint32_t *line_slots; /* line id + 1, 0 = empty: the lines of nodes of LINE_SCAN lines or more */
	size_t line_nslots;
	uint32_t line_nindexed; /* how many lines line_slots holds */

	/* the "before" count of each node, for differential graphs only (NULL until one is added:
	 * 8 bytes a node that other graphs do not pay); nodes from before_len on have 0 */
	uint64_t *before;
	size_t before_len;
	uint64_t self_sum; /* prs_fg_add_self's samples not yet summed up the tree */
	uint32_t *hbuf; /* prs_fg_path's and prs_fg_intern_many's hashes, PRS_MAX_STACK_FRAMES */
	uint32_t *path; /* the nodes of the last stack added (PRS_MAX_STACK_FRAMES + 1 ids) */
	size_t npath;

	/* the writer's scratch, kept between calls */
	struct fg_draw *draw;
	size_t ndraw, draw_cap;
	uint32_t *scratch;
	size_t scratch_cap;
};

/* Node id's counts: c[0] after (the main count), c[1] before (differential graphs). */
static inline void fg_counts(const struct prs_fg *fg, uint32_t id, uint64_t c[2])
{
	c[0] = fg->nodes[id].total;
	c[1] = id < fg->before_len ? fg->before[id] : 0;
}

/*
 * Building blocks for adapters that walk their own trees (from_profile.c): intern a string (id,
 * UINT32_MAX on ENOMEM), find or create a child node (id, 0 on ENOMEM; kind must be valid), add
 * a line count, and add counts to a node and all its ancestors (-EOVERFLOW past 2^63).
 */
uint32_t prs_fg_intern(struct prs_fg *fg, const char *s, size_t len);
uint32_t prs_fg_child(struct prs_fg *fg, uint32_t parent, uint32_t name, uint32_t file, uint8_t kind);
int prs_fg_line(struct prs_fg *fg, uint32_t node, uint32_t line, uint64_t count);
int prs_fg_count(struct prs_fg *fg, uint32_t node, uint64_t before, uint64_t after);

/*
 * For adapters that add many stacks at once (from_profile.c): make room for `more` nodes without
 * growing (a hint: 0 or -ENOMEM, fg unchanged then), and add self[k] samples (k < n, n <= the
 * node count) to node k and to all its ancestors in one pass over the nodes, instead of one walk
 * to the root per stack (a node's parent always has a smaller id). self is the pass's scratch:
 * self[k] holds the sum of k's subtree afterwards. `before` picks the before counts of
 * differential graphs. Returns 0 or -EOVERFLOW past 2^63 (nothing added then).
 */
int prs_fg_reserve(struct prs_fg *fg, size_t more);

/*
 * For adapters that add stacks of which they know the whole path at once (from_folded.c): the
 * lookups of one path overlap their cache misses instead of waiting for each other, which is
 * most of the time on big unsorted inputs. prs_fg_intern_many interns s[k][0..len[k]) into
 * ids[k] for k < n; prs_fg_path finds or creates the children (names[k], no file, kinds[k]),
 * each under the one before, starting below `parent`, into nodes[k]. n <= PRS_MAX_STACK_FRAMES.
 * 0 or -ENOMEM (the nodes made so far stay, with no count).
 */
/*
 * Counts for such adapters without a scratch array: on a tree that has no counts yet, add each
 * stack's samples to the node it ends in with prs_fg_add_self (0, or -EOVERFLOW past 2^63 in
 * all), then prs_fg_sum_self once makes every node's count that of its subtree.
 */
int prs_fg_add_self(struct prs_fg *fg, uint32_t node, uint64_t count);
void prs_fg_sum_self(struct prs_fg *fg);

int prs_fg_intern_many(struct prs_fg *fg, const char *const *s, const uint32_t *len, size_t n,
		       uint32_t *ids);
int prs_fg_path(struct prs_fg *fg, uint32_t parent, const uint32_t *names, const uint8_t *kinds,
		size_t n, uint32_t *nodes);
int prs_fg_count_all(struct prs_fg *fg, uint64_t *self, uint32_t n, bool before);

/* FNV-1a of s[0..len): the stable per-name hash behind the colors. */
uint32_t prs_fg_name_hash(const char *s, size_t len);

#endif
