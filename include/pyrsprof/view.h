/* SPDX-License-Identifier: MIT */
/*
 * One view of a profile: which samples a graph or an export shows, and what each of them is,
 * root first: a root frame per process when the profile holds more than one ("python pool.py
 * [1234]", or "python pool.py" for all its processes merged), a root frame per thread ("thread
 * 1235 (MainThread)"), the profile's frames with symbolized native frames replaced by their
 * inline chain, and the off-CPU leaf ("[read]", "[waiting for the GIL]") of a sample that was not
 * running. Every consumer reads a profile through a view: the folded, pprof and speedscope
 * exports, diff, the flame graph and dump; so they agree on all of this by construction.
 *
 * A view first sums the samples it keeps per distinct (process, thread, stack, off-CPU leaf) (what
 * it keeps apart depends on the options): these are the view's stacks, in a stable order
 * (process by pid, thread by tid, then the profile stack in the trie's pre-order (children by
 * id), then leaf). Consumers walk the stacks (a graph or an aggregated export) or the samples (speedscope's timelines, dump), and ask for the
 * frames of a stack when they need them: each distinct stack is expanded once, however many
 * samples it has, and without allocating.
 *
 * Frame ids: below prs_profile's nframes they are the profile's frames; from there up the view's
 * own (roots, leaves, "[empty stack]"), described by prs_view_frame(). Samples with pid 0 (a
 * recording of one process, or folded input) belong to the process that meta "pid" names, if any.
 *
 * A view borrows its profile (it must outlive the view and not change) and is not thread-safe.
 */
#ifndef PYRSPROF_VIEW_H
#define PYRSPROF_VIEW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pyrsprof/err.h"
#include "pyrsprof/profile.h"
#include "pyrsprof/types.h"

#define PRS_VIEW_NONE UINT32_MAX

struct prs_view_opts {
	enum prs_view view;   /* CPU: running samples; wall: all, the others ending in their off-CPU leaf */
	bool per_thread;      /* a root frame per thread, "thread <tid>" or "thread <tid> (<name>)" */
	bool per_process;     /* a root frame per process, "<command> [<pid>]", when the profile holds
			       * more than one (above the thread's); one process: no root, as before */
	bool merge_processes; /* with per_process: one root per command, "<command>", all its processes' samples */
	bool by_thread;       /* keep each thread's samples apart (stacks per process and thread) without root frames */
	bool raw_frames;      /* keep symbolized raw frames whole (pprof: their chain is the lines of one location) */
	bool lines;           /* labels "name (file:line)" ("name (file)" without a line) for named frames with a file */
	/* The file a named profile frame (id < nframes) is described and labelled by instead of its
	 * own: NULL (the default, or when file_of returns NULL) keeps its own; "" is none. `pyrsprof
	 * diff` keys both profiles' frames by the files it matched (include/pyrsprof/diff.h). The
	 * string is borrowed: it must outlive the view. */
	const char *(*file_of)(void *arg, uint32_t frame, size_t *len);
	void *file_arg;
	bool python_stacks;   /* the Python stack view (--stacks python): see prs_view_python_frames() */
};

/* One distinct stack of the view: the sum of the samples that share it. 28 bytes, 4-aligned (32
 * unpacked: a view of a 1M-sample recording holds 100-500k of them, issue 13's memory goal). */
struct prs_view_stack {
	uint32_t stack;   /* the profile's stack */
	uint32_t leaf;    /* the off-CPU leaf (a view frame id), or PRS_VIEW_NONE */
	int32_t pid, tid; /* of its samples when the view keeps them apart, else 0 (tid without per_thread
			   * or by_thread; pid with merge_processes, or one process without by_thread) */
	uint64_t weight;  /* the sum of its samples' weights (a sample of weight 0 counts, with 0) */
	uint8_t nroots;   /* how many root frames its frames start with (0..2) */
	bool empty;       /* no frame of the profile and no leaf: its frames end with "[empty stack]" */
} __attribute__((packed, aligned(4)));

/* A frame of the view, as prs_view_frame() describes it. Strings are borrowed (see there). */
struct prs_view_frame {
	const char *name; /* the display name (never empty); not cut (names may be up to 1 MiB) */
	size_t name_len;
	const char *file; /* "" when unknown (raw and synthetic frames have none) */
	size_t file_len;
	uint32_t line;    /* 0 = unknown */
	enum prs_kind kind; /* clamped to the known kinds */
	const struct prs_frame *frame; /* the profile's frame, NULL for one of the view's own */
};

struct prs_profile_view;

/*
 * Builds the view of p with the options o. One pass over the samples (a hash probe each, and a
 * few more for process and thread roots), then a sort of the distinct stacks. Returns 0, or
 * -ENOMEM / -EOVERFLOW (weights) with err set. *out is freed with prs_view_free().
 */
int prs_view_new(const struct prs_profile *p, const struct prs_view_opts *o, struct prs_profile_view **out,
		 struct prs_err *err);
/* Frees v. NULL is fine. */
void prs_view_free(struct prs_profile_view *v);

/* The view's stacks, in the order above (*n of them). Borrowed, valid until prs_view_free(). */
const struct prs_view_stack *prs_view_stacks(const struct prs_profile_view *v, size_t *n);
/* The view stack of sample i of the profile, or PRS_VIEW_NONE for a sample the view leaves out. */
uint32_t prs_view_sample_stack(const struct prs_profile_view *v, size_t i);

/*
 * The frames of view stack i, root first: its root frames, the stack's frames (expanded unless
 * raw_frames; at most PRS_VIEW_MAX_FRAMES of them, those nearest the root), then its off-CPU
 * leaf or "[empty stack]". Returns how many; *frames points into v (valid until the next call).
 * *shared (may be NULL) gets how many leading frames are those of the previous call's stack, so
 * that a consumer building a tree walks on from there: visiting the stacks in order, every
 * stack-trie node is expanded about once. No allocation after the first call.
 */
size_t prs_view_frames(struct prs_profile_view *v, size_t i, const uint32_t **frames, size_t *shared);
#define PRS_VIEW_MAX_FRAMES (64u * 1024)

/* How many frame ids the view has (the profile's and its own): size a per-frame cache by it. */
uint32_t prs_view_nframes(const struct prs_profile_view *v);
/*
 * Describes frame id: a profile frame by its name ("[unknown]" for none; an unsymbolized raw
 * frame "basename+0xOFF", written into buf of size bytes), file, line and kind; one of the view's
 * by its label and kind (PROCESS, THREAD, an off-CPU kind; UNKNOWN for "[empty stack]"). Strings
 * are borrowed from the profile, the view or buf.
 */
void prs_view_frame(const struct prs_profile_view *v, uint32_t id, struct prs_view_frame *f, char *buf,
		    size_t size);
/* The kind of frame id, as prs_view_frame() gives it (no string work). */
enum prs_kind prs_view_frame_kind(const struct prs_profile_view *v, uint32_t id);
/*
 * The display label of frame id into buf (cut to size - 1 bytes, NUL-terminated): as
 * prs_profile_frame_label() for a profile frame, with " (file:line)" when the view has lines;
 * the label of one of the view's frames. Returns buf.
 */
const char *prs_view_frame_label(const struct prs_profile_view *v, uint32_t id, char *buf, size_t size);

/* The pid of sample s (meta "pid" for pid 0, if the profile has it; else 0). */
int32_t prs_view_pid(const struct prs_profile_view *v, const struct prs_sample *s);
/* How many processes the profile's samples come from (by pid; any view). */
uint32_t prs_view_processes(const struct prs_profile_view *v);
/*
 * The command process pid ran at time_ns (its PROCESS entry then; for the meta "pid" without one,
 * meta "command"), or NULL when unknown. Borrowed from the profile.
 */
const char *prs_view_command(const struct prs_profile_view *v, int32_t pid, uint64_t time_ns);
/* The label of process pid at time_ns: "<command> [<pid>]", or "pid <pid>". Returns buf. */
const char *prs_view_process_label(const struct prs_profile_view *v, int32_t pid, uint64_t time_ns,
				   char *buf, size_t size);
/* The latest non-empty name of thread tid of process pid (0: unknown), or NULL; *len its length. */
const char *prs_view_thread_name(const struct prs_profile_view *v, int32_t pid, int32_t tid, size_t *len);

#endif
