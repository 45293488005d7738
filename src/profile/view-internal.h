/* SPDX-License-Identifier: MIT */
/*
 * Private to the view (include/pyrsprof/view.h): struct prs_profile_view and what its three files share.
 * view.c sums the samples into the view's stacks, view_names.c answers for processes and threads,
 * view_frames.c makes and describes frames.
 */
#ifndef PYRSPROF_VIEW_INTERNAL_H
#define PYRSPROF_VIEW_INTERNAL_H

#include "profile/profile-internal.h"
#include "pyrsprof/util.h"
#include "pyrsprof/view.h"

/* A thread name entry, sorted by (pid, tid, position in the profile): the last one wins. */
struct view_thread {
	int32_t pid, tid;
	uint32_t name, idx;
};

/* A process entry, sorted by (pid, time, position): a sample's is the last with time <= its own. */
struct view_process {
	int32_t pid;
	uint32_t command, idx;
	uint64_t time_ns;
};

/* One of the view's own frames: its label in names[off..off+len) and its kind. */
struct view_synth {
	uint32_t off, len;
	uint8_t kind;
};

struct prs_profile_view {
	const struct prs_profile *p;
	struct prs_view_opts o;
	int32_t meta_pid;      /* meta "pid", or 0 */
	uint32_t meta_command; /* string id of meta "command", or 0 */
	uint32_t nprocesses;   /* distinct pids of the samples */
	bool process_roots;    /* per_process and more than one process */

	struct view_thread *threads;
	uint32_t nthreads;
	struct view_process *procs;
	uint32_t nprocs;
	struct prs_map64 pid_procs; /* pid -> index of its first entry in procs */

	struct view_synth *synth; /* frame id p->nframes + k */
	uint32_t nsynth;
	size_t cap_synth;
	struct prs_buf names;
	uint32_t empty_frame; /* "[empty stack]", PRS_VIEW_NONE until needed */

	struct prs_view_stack *stacks;
	size_t nstacks, cap_stacks;
	uint32_t *roots;        /* 2 per stack: process root, thread root (PRS_VIEW_NONE for none) */
	uint32_t *sample_stack; /* per sample: view stack or PRS_VIEW_NONE */

	/* prs_view_frames: the last stack's frames and which trie stack wrote each position */
	uint32_t *out, *owner, *chain;
	uint32_t *end_of;   /* per profile stack: the end of its frames in out when it was written */
	size_t stack_end;   /* end of the previous output's stack frames (its roots before them) */
	uint32_t last_roots[2];
	uint32_t last_nroots;

	/* view_python.c (python_stacks): two output buffers (the last one kept for *shared), the
	 * trie chain, and a class per mapping (computed on first use) */
	uint32_t *py_out[2];
	size_t py_len[2];
	unsigned py_cur;
	uint32_t *py_chain;
	uint8_t *py_class;
};

/* The frames of view stack i in the Python stack view (python_stacks): as prs_view_frames(). */
size_t prs_view_python_frames(struct prs_profile_view *v, size_t i, const uint32_t **frames, size_t *shared);

/* Adds one of the view's frames (label text, kind); returns its frame id or PRS_VIEW_NONE (ENOMEM). */
uint32_t prs_view_synth(struct prs_profile_view *v, const char *label, size_t len, enum prs_kind kind);

/* Loads the thread and process tables, meta pid and command. 0 or -ENOMEM. */
int prs_view_names_init(struct prs_profile_view *v);
/* The index in v->procs of the entry of pid at time_ns, or PRS_VIEW_NONE. */
uint32_t prs_view_process_entry(const struct prs_profile_view *v, int32_t pid, uint64_t time_ns);

#endif
