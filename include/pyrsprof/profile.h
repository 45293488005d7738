/* SPDX-License-Identifier: MIT */
/*
 * The profile model: interned strings, mappings, frames, a stack trie and samples; the recorder
 * that builds it while sampling and streams it to profile.pyrs; the reader of .pyrs files and of
 * folded stacks. The .pyrs format is documented in docs/pyrs-format.md.
 *
 * Ids are dense uint32 indexes into the arrays below. Id 0 of strings is "" and id 0 of stacks is
 * the empty stack (the root), so 0 is a valid "none" for both. Entries are immutable once added
 * (the recorder has written them): symbolization adds named frames and expansions, it never
 * rewrites a raw frame. Every id stored in an entry is smaller than the count of its array and a
 * stack's parent is smaller than the stack, so walks terminate (the .pyrs reader checks this).
 * A profile is not thread-safe: one thread builds it.
 */
#ifndef PYRSPROF_PROFILE_H
#define PYRSPROF_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "pyrsprof/err.h"
#include "pyrsprof/types.h"

#define PRS_BUILD_ID_MAX 64

/*
 * A file mapped into a process of the target, as /proc/PID/maps showed it. Mappings are
 * process-qualified: the same file mapped in two processes is two mappings (pid tells them apart).
 */
struct prs_mapping {
	uint64_t start, end, offset; /* target addresses and the file offset of start */
	uint32_t path;               /* string id */
	int32_t pid;                 /* the process it is mapped in; 0 = unknown (one process) */
	uint8_t build_id_len;
	uint8_t build_id[PRS_BUILD_ID_MAX];
};

/*
 * A frame. Two sorts:
 * - a raw native frame (mapping != PRS_NO_MAPPING): addr is the absolute PC in the target, and
 *   activation says whether it is the interrupted instruction (true) or a return address (false:
 *   symbolize at addr - 1). Its kind is PRS_KIND_UNKNOWN until symbolized. A raw frame whose
 *   address fell in no known mapping has mapping == PRS_NO_MAPPING and kind UNKNOWN too.
 * - a named frame (Python, symbolized native, folded input, off-CPU labels): name, file, line.
 */
#define PRS_NO_MAPPING UINT32_MAX

/* Packed: 28 bytes, 4-aligned, where addr's alignment made 32 (a reader holds every frame of the
 * file: 100k for a long recording, issue 13's memory goal). addr first keeps every field aligned
 * but addr itself (to 4). */
struct prs_frame {
	uint64_t addr;
	uint32_t mapping;   /* mapping id, or PRS_NO_MAPPING */
	uint32_t name, file; /* string ids (0 = unknown) */
	uint32_t line;       /* 0 = unknown */
	uint8_t kind;       /* enum prs_kind */
	bool activation;
	bool raw;           /* true for a raw native frame */
} __attribute__((packed, aligned(4)));

/* A node of the stack trie: the stack "parent + frame" (frame is the innermost, the leaf). */
struct prs_stack {
	uint32_t parent; /* stack id; 0 is the root (empty stack) */
	uint32_t frame;  /* frame id; unused for stack 0 */
	uint32_t depth;  /* number of frames; 0 for the root */
};

/*
 * pid 0 means "unknown": a recording of one process (the profile's meta "pid", when it has one,
 * names it), or folded input. The views resolve it so (include/pyrsprof/view.h).
 */
/* Packed: 28 bytes, 4-aligned, where the padding after state and flags made 32 (a reader that keeps
 * every sample holds 1M of them for a 1M-sample recording: 4 MB less, issue 13's memory goal).
 * The fields keep their order (initializers list them so); stack, weight and syscall are then
 * unaligned, which x86-64 and arm64 load at the cost of an aligned load. */
struct prs_sample {
	uint64_t time_ns; /* since the start of the recording */
	int32_t tid;
	uint8_t state;    /* enum prs_state */
	int16_t syscall;  /* syscall number when blocked, else -1 */
	uint32_t stack;   /* stack id */
	uint32_t weight;  /* how many samples this stands for (1 for recorded samples, counts for folded input) */
	uint8_t flags;    /* PRS_SAMPLE_* */
	int32_t pid;      /* the process of the thread; 0 = unknown */
} __attribute__((packed, aligned(4)));

#define PRS_SAMPLE_GIL 1u      /* the thread held the Python GIL at this sample */
#define PRS_SAMPLE_GIL_WAIT 2u /* the thread was waiting for the Python GIL (off-CPU: see prs_profile_offcpu_label) */

/* A thread's name from this point of the recording on (a later entry of the same pid and tid renames it). */
struct prs_thread {
	int32_t tid;
	uint32_t name; /* string id */
	int32_t pid;   /* 0 = unknown */
};

/*
 * A process of the recorded tree, running `command` from time_ns on. A process that execs gets a
 * second entry (same pid, the new command, the time of the exec): its samples before that time are
 * shown under the old command, those after under the new one, as two processes of one pid
 * (`sh -c ./run.sh [1234]`, then `python pool.py [1234]`). The entry in effect for a sample of pid
 * at time t is the last of pid's entries with time_ns <= t (the first one for a sample before all).
 */
struct prs_process {
	int32_t pid, ppid;  /* ppid 0 = unknown (the root of the tree, or an attached process) */
	uint32_t command;   /* string id: the command line as /proc/PID/cmdline shows it, args joined by spaces */
	uint64_t time_ns;   /* from when it runs this command, on the samples' clock (0: from the start) */
};

/* A range of frame ids in prs_profile.expand_ids: the inline chain of a raw frame, outermost first. */
struct prs_expansion {
	uint32_t first, count;
};

struct prs_meta {
	uint32_t key, value; /* string ids, e.g. "command" -> "./target --n 3", "rate_hz" -> "200" */
};

/*
 * An accounting record (.pyrs types PRS_ACCT_REC_FIRST..PRS_ACCT_REC_LAST): the facts the
 * classifier reads besides the samples (machine, host, cgroup, process, thread and counter
 * readings). The profile stores the payload as is and writes it back unchanged; its encoding
 * belongs to src/classify (include/pyrsprof/acct.h, docs/pyrs-format.md).
 */
struct prs_acct_record {
	uint8_t type;
	uint32_t len;
	uint8_t *data; /* owned by the profile */
};

#define PRS_ACCT_REC_FIRST 11
#define PRS_ACCT_REC_LAST 19
#define PRS_ACCT_REC_MAX 4096u /* payload bytes of one accounting record */

struct prs_profile {
	/* strings[i] is NUL-terminated, of length string_lens[i]; may contain any bytes but NUL. */
	char **strings;
	uint32_t *string_lens;
	uint32_t nstrings;
	struct prs_mapping *mappings;
	uint32_t nmappings;
	struct prs_frame *frames;
	uint32_t nframes;
	struct prs_stack *stacks;
	uint32_t nstacks;
	/* the samples in the order added; aggregated (prs_recorder_aggregate): one record per
	 * distinct sample but for its time, weight the sum of theirs, time_ns the latest of theirs */
	struct prs_sample *samples;
	size_t nsamples;
	/* read as sums without threads (PRS_PYRS_SUMS_NO_THREADS): the samples' sums per thread, one
	 * record per distinct (pid, tid, state, syscall, flags, process epoch, and whether the stack
	 * holds a Python frame), its stack that of its first sample; else NULL and 0 */
	struct prs_sample *thread_sums;
	size_t nthread_sums;
	uint64_t sample_count; /* samples added (nsamples, unless aggregated) */
	uint64_t sample_times; /* changes of time_ns from one sample added to the next, plus one (0 for
				* none): the ticks seen, as samples of one tick share a time */
	struct prs_thread *threads;
	uint32_t nthreads;
	struct prs_process *processes; /* in the order they were added */
	uint32_t nprocesses;
	struct prs_meta *meta;
	uint32_t nmeta;
	/* expansions[frame id] (nframes entries, or NULL if nothing is symbolized): count 0 = none */
	struct prs_expansion *expansions;
	uint32_t *expand_ids;
	uint32_t nexpand_ids;
	struct prs_acct_record *acct; /* accounting records, in the order added (or read) */
	uint32_t nacct;
	bool complete; /* whole: the reader found the END record, the recorder wrote it, folded input */
	/* the file offset of the damaged zstd frame where the reader stopped (what precedes it is
	 * here), 0 = none */
	uint64_t damaged_at;
	/* private: interning tables */
	struct prs_profile_index *index;
};

/* Returns a new, empty profile (string 0 = "", stack 0 = root), or NULL when out of memory. */
struct prs_profile *prs_profile_new(void);
/* Frees p and everything it owns. NULL is fine. */
void prs_profile_free(struct prs_profile *p);

/*
 * Interning: each returns the id of an existing equal entry or appends a new one; UINT32_MAX on
 * ENOMEM or when an id argument is out of range. O(1) (one hash probe), no allocation once the
 * arrays and tables are warm (amortised growth). Strings: len bytes, cut at an embedded NUL and
 * at 1 MiB. Raw frames: mapping is a mapping id or PRS_NO_MAPPING. Stacks: parent is a stack id,
 * frame a frame id.
 */
uint32_t prs_profile_string(struct prs_profile *p, const char *s, size_t len);
uint32_t prs_profile_mapping(struct prs_profile *p, const struct prs_mapping *m);
uint32_t prs_profile_raw_frame(struct prs_profile *p, uint32_t mapping, uint64_t addr, bool activation);
uint32_t prs_profile_named_frame(struct prs_profile *p, enum prs_kind kind, uint32_t name,
				 uint32_t file, uint32_t line);
uint32_t prs_profile_stack(struct prs_profile *p, uint32_t parent, uint32_t frame);
/* Appends (no interning; a profile that aggregates adds it to its record). Returns 0, -EINVAL
 * (stack or string id out of range, pid < 0, a profile read as sums) or -ENOMEM. */
int prs_profile_sample(struct prs_profile *p, const struct prs_sample *s);
/* A thread's name, in process pid (0: unknown); prs_profile_thread is prs_profile_thread_pid with pid 0. */
int prs_profile_thread(struct prs_profile *p, int32_t tid, uint32_t name);
int prs_profile_thread_pid(struct prs_profile *p, int32_t pid, int32_t tid, uint32_t name);
/*
 * Adds process pid (child of ppid, 0 if unknown) running command (a string id) from time_ns on,
 * or updates it: when pid's latest entry already says the same ppid and command this does
 * nothing; otherwise a new entry is appended (after an exec: the new command and the time of the
 * exec; see struct prs_process). Call it when a process is first seen (time_ns 0 for those there
 * from the start; a forked child runs its parent's command until it execs) and after each exec.
 * Returns 0, -EINVAL (pid <= 0, ppid < 0, command out of range) or -ENOMEM.
 */
int prs_profile_process(struct prs_profile *p, int32_t pid, int32_t ppid, uint32_t command,
			uint64_t time_ns);
int prs_profile_meta(struct prs_profile *p, const char *key, const char *value);
/* Returns the value of the first meta entry with this key, or NULL. Borrowed. */
const char *prs_profile_meta_get(const struct prs_profile *p, const char *key);
/*
 * Appends an accounting record of `type` (PRS_ACCT_REC_FIRST..LAST) with len bytes of payload
 * (at most PRS_ACCT_REC_MAX; copied). Returns 0, -EINVAL (type or length out of range) or -ENOMEM.
 * Not for the sampling hot path: it allocates.
 */
int prs_profile_acct(struct prs_profile *p, uint8_t type, const void *data, size_t len);
/*
 * Sets the inline expansion of frame `frame` (normally a raw frame) to `n` named frame ids,
 * outermost first (n <= PRS_MAX_STACK_FRAMES; n == 0 removes it). The ids are copied. Returns 0,
 * -EINVAL (an id out of range or a raw frame among ids) or -ENOMEM. Setting it again replaces it.
 */
int prs_profile_expand(struct prs_profile *p, uint32_t frame, const uint32_t *ids, uint32_t n);

/*
 * The frames that frame `frame` stands for: its inline expansion (outermost first) when it is a
 * symbolized raw frame, else the frame itself (*frame). Sets *n (>= 1). Borrowed from p (or frame).
 */
const uint32_t *prs_profile_expansion(const struct prs_profile *p, const uint32_t *frame, uint32_t *n);

/*
 * Writes the frames of stack `stack`, root first, into out (capacity max), replacing each
 * symbolized raw frame by its expansion. Returns the number written (at most max; the frames
 * nearest the root are kept when it does not fit).
 */
size_t prs_profile_stack_frames(const struct prs_profile *p, uint32_t stack, uint32_t *out, size_t max);

/*
 * The display name of a frame into buf (always NUL-terminated when size > 0, truncated to fit):
 * its name ("[unknown]" for name 0), or for an unsymbolized raw frame "basename+0xOFF" (OFF is
 * the file offset: addr - start + offset) / "[unknown]" outside any mapping. Returns buf.
 * No escaping: the name may hold any bytes but NUL (see prs_export_folded for folded text).
 */
const char *prs_profile_frame_label(const struct prs_profile *p, uint32_t frame, char *buf, size_t size);

/*
 * The off-CPU leaf of a sample for wall views. For a sample that is not running, writes its label
 * into buf and its kind into *kind and returns 1; returns 0 (buf untouched) for a running sample.
 * Labels: "[<syscall name>]" (e.g. "[clock_nanosleep]", "[read]"), "[syscall N]" for an unknown
 * number, "[disk wait]" for D state without a syscall, "[blocked]" (blocked, no syscall known),
 * "[stopped]", "[waiting for a cpu]", "[off-cpu]" (unknown state). Kind: prs_syscall_kind() of the
 * syscall (OFF_IO for D state), else OFF_OTHER. A sample flagged PRS_SAMPLE_GIL_WAIT (a futex
 * wait on the GIL) is "[waiting for the GIL]" of kind OFF_GIL whatever its state, unless running.
 * Every view uses this leaf (include/pyrsprof/view.h).
 */
int prs_profile_offcpu_label(const struct prs_sample *s, char *buf, size_t size, enum prs_kind *kind);
/*
 * The same leaf as a named frame of p (interned: same label, same id). Returns the frame id, or
 * UINT32_MAX for a running sample (no leaf) or on ENOMEM.
 */
uint32_t prs_profile_offcpu_frame(struct prs_profile *p, const struct prs_sample *s);

/* ---- the recorder: builds a profile while sampling and streams it to a .pyrs file ---- */

struct prs_recorder;

/*
 * Creates path (truncating it) and writes the header. Returns 0 or a negative errno with err set.
 * *out owns a new profile, reachable with prs_recorder_profile().
 */
int prs_recorder_open(const char *path, struct prs_recorder **out, struct prs_err *err);
/*
 * Keeps the profile's samples aggregated from now on (call it before the first sample): every
 * sample is still written to the file, but p->samples holds one record per distinct (stack, pid,
 * tid, state, syscall, flags, and PROCESS entry in effect), with the sum of their weights and the
 * latest of their times, so memory grows with the distinct samples, not with the recording's
 * length. Sample order and each sample's time are then in the file only: fit for the views, the
 * graphs and the classifier's facts, not for a timeline (speedscope, dump). Process entries must
 * be added in time order, each no earlier than the samples added before it (the sampler does).
 * Returns 0, -EINVAL (samples were added already) or -ENOMEM.
 */
int prs_recorder_aggregate(struct prs_recorder *r);
/* The profile being built; borrowed, valid until prs_recorder_close(). Add to it with the
 * prs_profile_* functions: the recorder writes whatever was added since the last flush. */
struct prs_profile *prs_recorder_profile(struct prs_recorder *r);
/* Compresses and writes everything added since the last flush as one zstd frame (none when
 * nothing was added), so the file on disk is readable up to here. Call about once a second.
 * Returns 0 or a negative errno. */
int prs_recorder_flush(struct prs_recorder *r, struct prs_err *err);
/* Flushes, writes the END record, closes the file. Returns 0 or a negative errno. The profile is
 * handed to the caller in *profile (may be NULL to free it), complete when the file was written
 * whole. r is freed in every case. */
int prs_recorder_close(struct prs_recorder *r, struct prs_profile **profile, struct prs_err *err);

/* ---- readers ---- */

/*
 * Reads a .pyrs file. A truncated file is accepted: every complete record is kept,
 * p->complete is false and *warning (if not NULL) is set to a one-line message ("FILE: truncated
 * after N samples ..."). A file damaged after some samples is accepted too: every zstd frame
 * before the damaged one is kept, p->damaged_at is the damaged frame's offset, and the warning
 * says "FILE: damaged at byte N (why) after M samples; showing what precedes". An empty or
 * foreign file, or one damaged before any sample, fails with -EINVAL (or the errno of the failed
 * read) and a message in err.
 */
int prs_pyrs_read(const char *path, struct prs_profile **out, char *warning, size_t wsize,
		  struct prs_err *err);
/* Reads a .pyrs image from memory (same rules). */
int prs_pyrs_read_mem(const void *data, size_t len, struct prs_profile **out, char *warning,
		      size_t wsize, struct prs_err *err);
/*
 * Read as sums: the samples are aggregated as they are read, as prs_recorder_aggregate keeps
 * them (one record per distinct stack, pid, tid, state, syscall, flags and PROCESS entry in
 * effect; weight the sum, time_ns the latest), so memory follows the distinct samples, not the
 * recording's length. p->sample_count and p->sample_times still count the file's samples; no
 * sample can be added to it (prs_profile_sample fails with -EINVAL). Fit
 * for the views, graphs, folded and pprof exports, reports and diff; not for a timeline
 * (speedscope refuses such a profile; dump, top and snapshots read every sample).
 */
#define PRS_PYRS_SUMS 1u
/*
 * Read as sums without threads: as PRS_PYRS_SUMS, but p->samples has tid 0 in every record: one
 * per distinct stack, pid, state, syscall, flags and PROCESS entry (view_bench's 1M-sample,
 * 50-thread file: 110k records instead of 400k), and the per-thread sums are in p->thread_sums
 * (a few records a thread: see there). The THREAD records are read as usual. Fit for the views
 * that keep no thread apart (no per_thread, no by_thread: folded, the flame graphs, diff's
 * numbers) and for the classifier's facts, which read threads from p->thread_sums; not for
 * pprof's thread labels.
 */
#define PRS_PYRS_SUMS_NO_THREADS 2u
/* prs_pyrs_read and prs_pyrs_read_mem with flags (0, PRS_PYRS_SUMS or PRS_PYRS_SUMS_NO_THREADS). */
int prs_pyrs_read_flags(const char *path, unsigned flags, struct prs_profile **out, char *warning,
			size_t wsize, struct prs_err *err);
int prs_pyrs_read_mem_flags(const void *data, size_t len, unsigned flags, struct prs_profile **out,
			    char *warning, size_t wsize, struct prs_err *err);

/*
 * Reads folded stacks ("main;work;hot 12" per line, root first, the count after the last space;
 * blank lines ignored) into a new profile: one sample of that weight per line. Frame names may
 * carry flamegraph.pl-style annotations: a "_[k]" suffix marks a kernel frame. Fails with -EINVAL
 * and the line number for malformed input; an input with no stacks at all fails too.
 */
int prs_folded_read(FILE *f, const char *name, struct prs_profile **out, struct prs_err *err);

/* True if the file at path starts with the .pyrs magic. */
bool prs_pyrs_sniff(const char *path);

/* ---- views and exports ---- */

enum prs_view {
	PRS_VIEW_CPU,  /* on-CPU samples only */
	PRS_VIEW_WALL, /* every sample; off-CPU samples get a leaf labelled with the syscall */
};

/* True if sample s belongs to view: the CPU view keeps running samples only (not blocked, not
 * waiting for a CPU), the wall view keeps all. Every view (include/pyrsprof/view.h) decides it here. */
bool prs_sample_in_view(const struct prs_sample *s, enum prs_view view);


#endif
