/* SPDX-License-Identifier: MIT */
/*
 * The reader of folded stacks, the text format of Brendan Gregg's FlameGraph (stackcollapse-*.pl
 * output, read by flamegraph.pl and inferno): one line per stack, frames root first separated by
 * ';', then a space and a count:
 *
 *     main;run;compute_[k] 12
 *
 * The count is after the LAST space, so frame names may contain spaces (py-spy writes
 * "work (app.py:12)"). A "_[k]" suffix marks a kernel frame; other annotations ("_[j]", "_[i]")
 * are kept as part of the name. Reading is strict: a malformed line is an error naming the line.
 *
 * This is the lexer that both consumers share: the profile model's reader (prs_folded_read, in
 * export.h) and the flame graph's direct path (prs_fg_from_folded, in flamegraph.h). It splits a
 * line into frames and checks them, and it says how many leading frames are the previous line's,
 * byte for byte: folded files are usually sorted, so a consumer keeps what it made of each frame
 * position and redoes only the frames after the shared ones. Nothing is hashed or interned here.
 */
#ifndef PYRSPROF_FOLDED_H
#define PYRSPROF_FOLDED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "pyrsprof/err.h"

/* A count above this is refused (weights are u32: a line may stand for at most 256 samples of
 * UINT32_MAX each, not billions of records). */
#define PRS_FOLDED_MAX_COUNT ((uint64_t)UINT32_MAX * 256)

struct prs_folded_frame {
	uint32_t off;     /* the frame's text starts at line + off */
	uint32_t len;     /* its name's bytes, without the "_[k]" suffix */
	bool kernel;      /* it ended in "_[k]" */
};

/* One line, as prs_folded_next gives it. Valid until the next call. */
struct prs_folded_line {
	const char *text;                      /* the line (the frames start at text + 0) */
	const struct prs_folded_frame *frames; /* root first */
	size_t nframes;
	size_t shared;        /* frames[0..shared) are those of the previous line, byte for byte */
	uint64_t count;
	unsigned long lineno; /* 1-based, counting blank lines */
};

struct prs_folded_lexer;

/* A lexer of the stream f (not closed by it); name is used in error messages ("name:LINE: ...").
 * NULL when out of memory. */
struct prs_folded_lexer *prs_folded_lexer_new(FILE *f, const char *name);
void prs_folded_lexer_free(struct prs_folded_lexer *lx);

/*
 * The next non-blank line into *out: 1; 0 at the end of the input; a negative errno with err set
 * ("name:LINE: what is wrong") for a malformed line (no count, a count that is not a
 * non-negative integer or is above PRS_FOLDED_MAX_COUNT, an empty frame, more frames than a
 * profile holds, a name over the profile's string limit, a NUL byte, a line over 4 MiB), -EIO
 * on a read error, -ENOMEM. After an error the lexer must not be used again.
 */
int prs_folded_next(struct prs_folded_lexer *lx, struct prs_folded_line *out, struct prs_err *err);

#endif
