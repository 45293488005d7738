/* SPDX-License-Identifier: MIT */
/*
 * Exports of a profile to other profilers' viewers: folded stacks (flamegraph.pl, inferno),
 * speedscope JSON (https://www.speedscope.app, file format of the speedscope npm package's
 * file-format-schema.json) and pprof (gzip'd profile.proto of github.com/google/pprof, read by
 * `go tool pprof`). All three read the profile through a view (include/pyrsprof/view.h), so they
 * agree on what a view holds (PRS_VIEW_CPU: running samples; PRS_VIEW_WALL: every sample, off-CPU
 * ones with their leaf), on frame names (inline expansions applied), on which process and thread
 * each sample came from, and on totals (sample weights): `go tool pprof -top` and speedscope show
 * the numbers of the folded export.
 *
 * Names, files and thread names come from the target: they may hold any bytes but NUL. Both
 * formats need UTF-8, so invalid sequences are replaced by U+FFFD (prs_utf8_clean()).
 * None of these functions is thread-safe with respect to p (p is only read).
 */
#ifndef PYRSPROF_EXPORT_H
#define PYRSPROF_EXPORT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "pyrsprof/err.h"
#include "pyrsprof/profile.h"
#include "pyrsprof/util.h"
#include "pyrsprof/view.h"

/*
 * Writes folded stacks: one line per distinct stack text, sorted bytewise (LC_ALL=C sort), counts
 * (sample weights) summed, root first, e.g. "main;work;hot 12": the frames of the view o
 * (per_thread: a root "thread <tid> (<name>)"; per_process: a root "<command> [<pid>]" when the
 * profile holds more than one process; lines: "name (file:line)"; wall: the off-CPU leaf).
 * Kernel frames get flamegraph.pl's "_[k]" suffix. So that every line parses back as one line in
 * every reader, names are written as UTF-8 (U+FFFD for a bad byte) with '_' for ';', for control
 * characters (C0, DEL, C1) and for U+2028/U+2029 (line ends to Python's str.splitlines() and to
 * some editors), and a frame with an empty text as "[unknown]". Samples with
 * weight 0 still produce their line. Returns 0, -ENOMEM, or -EIO (write error).
 */
int prs_export_folded(const struct prs_profile *p, const struct prs_view_opts *o, FILE *out,
		      struct prs_err *err);

/*
 * Writes p as one speedscope JSON document to out (out is flushed, not closed):
 *   {"$schema": "https://www.speedscope.app/file-format-schema.json", "exporter": "pyrsprof",
 *    "name": <meta "command", or "pyrsprof profile">, "activeProfileIndex": <the busiest thread>,
 *    "shared": {"frames": [{"name", "file", "line"}...]},
 *    "profiles": [{"type": "sampled", "name": "thread <tid> (<name>)", "unit", "startValue": 0,
 *                  "endValue": <sum of weights>, "samples": [[frame index, root first]...],
 *                  "weights": [...]}...]}
 * One sampled profile per thread (sorted by tid; input without thread ids, such as folded stacks,
 * gives one profile "all samples"), its samples in time order, consecutive equal stacks merged
 * (their weights summed), so speedscope's "Time Order" view is the thread's timeline.
 * Unit: "nanoseconds" with weight = sample weight x the sampling period (1e9 / meta "rate_hz")
 * when the profile knows its rate, else "none" with weight = sample weight (a count).
 * Equal frames (name, file, line) share one entry of the frame table; "file"/"line" are given
 * when known. The JSON is streamed (each view stack's index array made once and copied per
 * sample; strings and numbers encoded by jansson, byte for byte what a jansson tree gave): 1M
 * samples of view_bench's profile in ~0.5 s CPU and 89 MB peak, most of it the samples held.
 * Returns 0, -ENOMEM or -EIO (write error) with err set; -EINVAL for a profile whose samples
 * are aggregated (prs_recorder_aggregate: no timeline in memory; its file has one).
 */
int prs_export_speedscope(const struct prs_profile *p, enum prs_view view, FILE *out,
			  struct prs_err *err);
/* The same in the view vo->view with vo->python_stacks (the Python stack view); the other view
 * options are the export's own. */
int prs_export_speedscope_view(const struct prs_profile *p, const struct prs_view_opts *vo, FILE *out,
			       struct prs_err *err);

/*
 * Writes p as a gzip'd pprof profile.proto (perftools.profiles.Profile, encoded by protobuf-c
 * code generated from pprof's own .proto) to out (flushed, not closed):
 * - sample_type [samples/count, wall/nanoseconds, cpu/nanoseconds]: per sample, its weight,
 *   weight x period, and the same for running samples (0 for off-CPU ones); period_type
 *   cpu/nanoseconds (wall/nanoseconds in the wall view), period = 1e9 / rate_hz, and
 *   default_sample_type cpu (wall). A profile without a rate (folded input) only has
 *   samples/count (period 1): its nanoseconds would be made up.
 * - samples aggregated per (thread, stack, off-CPU leaf), labelled "thread" (num: tid) and
 *   "thread_name" (str), when the profile knows the thread;
 * - one location per raw native frame (mapping id, address) whose lines are its inline chain,
 *   innermost first (an unsymbolized frame gets one line naming "basename+0xOFF"); Python and
 *   other named frames, off-CPU leaves and "[empty stack]" are locations without a mapping
 *   (address 0) and one line;
 * - functions (name = system_name = the frame label, filename, start_line 0), deduplicated;
 * - the mappings that locations use (start, limit, file offset, filename, build id in hex), all
 *   marked as symbolized so pprof does not look for the binaries;
 * - time_nanos from meta "start_time" (ISO 8601 UTC), duration_nanos from "duration_s", a
 *   comment with the command.
 * Returns 0, -ENOMEM (also for more than 2^31 strings, functions or locations) or -EIO (write
 * or zlib error) with err set.
 */
int prs_export_pprof(const struct prs_profile *p, enum prs_view view, FILE *out,
		     struct prs_err *err);
/* The same in the view vo->view with vo->python_stacks, as prs_export_speedscope_view(). */
int prs_export_pprof_view(const struct prs_profile *p, const struct prs_view_opts *vo, FILE *out,
			  struct prs_err *err);

/*
 * Returns s (len bytes) if it is valid UTF-8 without NUL bytes (RFC 3629: no overlong forms, no
 * surrogates, nothing above U+10FFFF), else a NUL-terminated copy in scratch where each invalid
 * byte sequence (and each NUL) is replaced by U+FFFD. Returns NULL on ENOMEM. Borrowed: valid
 * until scratch changes (or as long as s, when it is s). *outlen (may be NULL) gets the length of
 * the result (without the terminating NUL of a copy).
 */
const char *prs_utf8_clean(const char *s, size_t len, struct prs_buf *scratch, size_t *outlen);
/* True if s[0..len) is valid UTF-8 without NUL bytes (what prs_utf8_clean returns unchanged). */
bool prs_utf8_valid(const char *s, size_t len);
/*
 * The length of the control character at s (len bytes, len >= 1): 1 for C0 (NUL included) and
 * DEL, 2 for C1 in UTF-8 (U+0080..U+009F: U+009B is a CSI to some terminals, U+0085 a line end
 * to some readers), else 0. What the folded export and the CLI's terminal lines replace.
 */
size_t prs_utf8_control_len(const char *s, size_t len);

/*
 * The period of one sample in nanoseconds, from meta "rate_hz" (1e9 / rate), or 0 when the
 * profile has no usable rate (absent, not a number, <= 0 or > 1e6 Hz).
 */
uint64_t prs_profile_period_ns(const struct prs_profile *p);

#endif
