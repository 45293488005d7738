/* SPDX-License-Identifier: MIT */
/*
 * The folded stacks lexer (include/pyrsprof/folded.h): bounded lines, the count, the frames and
 * the prefix a line shares with the one before.
 */
#include "pyrsprof/folded.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "profile/profile-internal.h"
#include "pyrsprof/util.h"

#include "util/banned.h"

#define MAX_LINE (4u << 20)              /* bytes per line */
#define FIRST_BUF (256u << 10)           /* the line buffer's first size: grown for longer lines */
#define MAX_FRAMES PRS_PROFILE_MAX_DEPTH /* frames per line */

struct prs_folded_lexer {
	FILE *f;
	const char *name;
	unsigned long lineno;
	/* a bounded line reader: getline() would grow its buffer to the size of a file without
	 * newlines (binary junk), this one holds at most MAX_LINE + 1 bytes */
	char *buf; /* cap + 1 bytes */
	size_t start, end, cap;
	bool eof;
	/* the frames of the last line; those it shares with the next one stay as they are (the
	 * shared text is a prefix of both lines, so it is at the same offsets) */
	struct prs_folded_frame *frames;
	size_t nframes, frames_cap;
	char *prev; /* the frames text of the last line */
	size_t prev_len, prev_cap;
};

static bool is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f';
}

struct prs_folded_lexer *prs_folded_lexer_new(FILE *f, const char *name)
{
	struct prs_folded_lexer *lx = calloc(1, sizeof(*lx));

	if (!lx)
		return NULL;
	lx->f = f;
	lx->name = name;
	lx->cap = FIRST_BUF;
	lx->buf = malloc(lx->cap + 1);
	if (!lx->buf) {
		free(lx);
		return NULL;
	}
	return lx;
}

void prs_folded_lexer_free(struct prs_folded_lexer *lx)
{
	if (!lx)
		return;
	free(lx->buf);
	free(lx->frames);
	free(lx->prev);
	free(lx);
}

/* Returns 1 with *line / *len set (the newline removed, NUL-terminated), 0 at the end,
 * -E2BIG for a line longer than MAX_LINE, -EIO on a read error, -ENOMEM. */
static int next_raw_line(struct prs_folded_lexer *l, char **line, size_t *len)
{
	size_t want, got;

	for (;;) {
		char *nl = memchr(l->buf + l->start, '\n', l->end - l->start);

		if (nl || (l->eof && l->end > l->start)) {
			char *e = nl ? nl : l->buf + l->end;

			*line = l->buf + l->start;
			*len = (size_t)(e - *line);
			*e = '\0';
			l->start = nl ? (size_t)(nl - l->buf) + 1 : l->end;
			return 1;
		}
		if (l->eof)
			return 0;
		if (l->end - l->start > MAX_LINE)
			return -E2BIG;
		memmove(l->buf, l->buf + l->start, l->end - l->start);
		l->end -= l->start;
		l->start = 0;
		if (l->end == l->cap) {
			/* a line longer than the buffer: room for it, up to MAX_LINE + 1 bytes */
			size_t ncap = l->cap * 2 > MAX_LINE + 1 ? MAX_LINE + 1 : l->cap * 2;
			char *nb = realloc(l->buf, ncap + 1);

			if (!nb)
				return -ENOMEM;
			l->buf = nb;
			l->cap = ncap;
		}
		want = l->cap - l->end;
		got = fread(l->buf + l->end, 1, want, l->f);
		l->end += got;
		if (got < want) {
			if (ferror(l->f))
				return -EIO;
			l->eof = feof(l->f);
		}
	}
}

/* The length of the common prefix of a[0..alen) and b[0..blen), 8 bytes at a time. */
static size_t common_prefix(const char *a, size_t alen, const char *b, size_t blen)
{
	size_t n = alen < blen ? alen : blen, i = 0;
	uint64_t x, y;

	for (; i + 8 <= n; i += 8) {
		memcpy(&x, a + i, 8);
		memcpy(&y, b + i, 8);
		if (x != y)
			return i + (size_t)__builtin_ctzll(x ^ y) / 8; /* little-endian: x86_64 */
	}
	while (i < n && a[i] == b[i])
		i++;
	return i;
}

static size_t raw_len(const struct prs_folded_frame *f)
{
	return f->len + (f->kernel ? 4u : 0u);
}

/*
 * How many leading frames of the line (frames text [line, sp)) are those of the previous line:
 * a frame is shared when its bytes and the separator after it are equal in both lines.
 */
static size_t shared_frames(const struct prs_folded_lexer *lx, const char *line, const char *sp)
{
	size_t len = (size_t)(sp - line), common = common_prefix(lx->prev, lx->prev_len, line, len), k = 0;

	while (k < lx->nframes && (size_t)lx->frames[k].off + raw_len(&lx->frames[k]) < common)
		k++;
	/* the previous line's last frame ends the previous text: shared if the line ends there
	 * too, or goes on with a ';' */
	if (k + 1 == lx->nframes && common == lx->prev_len && (common == len || line[common] == ';'))
		k++;
	return k;
}

/* The count after the last space of line[0..len): sets *sp to that space. */
static int parse_count(const struct prs_folded_lexer *lx, char *line, size_t len, char **sp,
		       uint64_t *out, struct prs_err *err)
{
	char *end = line + len, *c;
	uint64_t count = 0;

	*sp = NULL;
	for (c = end; c > line; c--)
		if (c[-1] == ' ' || c[-1] == '\t') {
			*sp = c - 1;
			break;
		}
	if (!*sp)
		return prs_err_set(err, -EINVAL, "%s:%lu: no count (expected \"frame;frame COUNT\")",
				   lx->name, lx->lineno);
	if (*sp + 1 == end)
		return prs_err_set(err, -EINVAL, "%s:%lu: no count after the last space", lx->name,
				   lx->lineno);
	for (c = *sp + 1; c < end; c++) {
		if (*c < '0' || *c > '9')
			return prs_err_set(err, -EINVAL, "%s:%lu: count \"%.*s\" is not a non-negative integer",
					   lx->name, lx->lineno,
					   (int)(end - *sp - 1 > 40 ? 40 : end - *sp - 1), *sp + 1);
		if (count > (UINT64_MAX - (uint64_t)(*c - '0')) / 10)
			return prs_err_set(err, -EINVAL, "%s:%lu: count overflows 64 bits", lx->name,
					   lx->lineno);
		count = count * 10 + (uint64_t)(*c - '0');
	}
	if (count > PRS_FOLDED_MAX_COUNT)
		return prs_err_set(err, -EINVAL, "%s:%lu: count %" PRIu64 " is too large (at most %" PRIu64 ")",
				   lx->name, lx->lineno, count, PRS_FOLDED_MAX_COUNT);
	*out = count;
	return 0;
}

/* Splits the frames text [line + from, sp) on ';' into frames[n..], each checked. */
static int split_frames(struct prs_folded_lexer *lx, char *line, char *sp, size_t from, size_t n,
			struct prs_err *err)
{
	char *s = line + from;

	while (s <= sp) {
		char *semi = memchr(s, ';', (size_t)(sp - s));
		char *fe = semi ? semi : sp;
		size_t flen = (size_t)(fe - s);
		bool kernel = false;

		if (flen == 0)
			return prs_err_set(err, -EINVAL, "%s:%lu: empty frame name (frame %zu)", lx->name,
					   lx->lineno, n + 1);
		if (n + 1 > MAX_FRAMES)
			return prs_err_set(err, -EINVAL, "%s:%lu: more than %u frames", lx->name,
					   lx->lineno, MAX_FRAMES);
		if (flen > 4 && memcmp(fe - 4, "_[k]", 4) == 0) {
			kernel = true;
			flen -= 4;
		}
		if (flen > PRS_PROFILE_MAX_STRING)
			return prs_err_set(err, -EINVAL, "%s:%lu: frame name longer than %u bytes",
					   lx->name, lx->lineno, PRS_PROFILE_MAX_STRING);
		if (n + 1 > lx->frames_cap &&
		    prs_array_grow((void **)&lx->frames, &lx->frames_cap, n + 1, sizeof(*lx->frames)))
			return prs_err_set(err, -ENOMEM, "%s:%lu: out of memory", lx->name, lx->lineno);
		lx->frames[n++] = (struct prs_folded_frame){ .off = (uint32_t)(s - line),
							     .len = (uint32_t)flen, .kernel = kernel };
		if (!semi)
			break;
		s = semi + 1;
	}
	lx->nframes = n;
	return 0;
}

/* Lexes one line (NUL-free, without its trailing whitespace). */
static int lex_line(struct prs_folded_lexer *lx, char *line, size_t len, struct prs_folded_line *out,
		    struct prs_err *err)
{
	size_t shared, from = 0;
	uint64_t count = 0;
	char *sp;
	int rc;

	if ((rc = parse_count(lx, line, len, &sp, &count, err)))
		return rc;
	shared = shared_frames(lx, line, sp);
	if (shared) {
		const struct prs_folded_frame *last = &lx->frames[shared - 1];

		from = last->off + raw_len(last) + 1;
	}
	rc = split_frames(lx, line, sp, from, shared, err);
	/* this line's frames are the prefix of the next one; without memory for a copy, the next
	 * line shares nothing (slower, still right) */
	lx->prev_len = 0;
	if (rc) {
		lx->nframes = 0;
		return rc;
	}
	if (prs_array_grow((void **)&lx->prev, &lx->prev_cap, (size_t)(sp - line), 1) == 0) {
		memcpy(lx->prev, line, (size_t)(sp - line));
		lx->prev_len = (size_t)(sp - line);
	}
	*out = (struct prs_folded_line){ .text = line, .frames = lx->frames, .nframes = lx->nframes,
					 .shared = shared, .count = count, .lineno = lx->lineno };
	return 0;
}

int prs_folded_next(struct prs_folded_lexer *lx, struct prs_folded_line *out, struct prs_err *err)
{
	char *line;
	size_t len;
	int got;

	while ((got = next_raw_line(lx, &line, &len)) > 0) {
		lx->lineno++;
		/* a UTF-8 byte order mark (editors on Windows write one) is no part of the first frame */
		if (lx->lineno == 1 && len >= 3 && memcmp(line, "\xef\xbb\xbf", 3) == 0)
			line += 3, len -= 3;
		if (memchr(line, '\0', len))
			return prs_err_set(err, -EINVAL, "%s:%lu: NUL byte: not a folded stacks text file",
					   lx->name, lx->lineno);
		while (len && is_space(line[len - 1]))
			len--;
		if (!len)
			continue;
		line[len] = '\0';
		got = lex_line(lx, line, len, out, err);
		return got ? got : 1;
	}
	if (got == -E2BIG)
		return prs_err_set(err, -EINVAL, "%s:%lu: line longer than %u bytes", lx->name,
				   lx->lineno + 1, MAX_LINE);
	if (got == -ENOMEM)
		return prs_err_set(err, -ENOMEM, "%s:%lu: out of memory", lx->name, lx->lineno + 1);
	if (got < 0)
		return prs_err_set(err, -EIO, "%s: read error", lx->name);
	return 0;
}
