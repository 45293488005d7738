/* SPDX-License-Identifier: MIT */
/*
 * Folded stacks, the text format of Brendan Gregg's FlameGraph (stackcollapse-*.pl output, read
 * by flamegraph.pl and inferno): one line per stack, frames root first separated by ';', then a
 * space and a count:
 *
 *     main;run;compute_[k] 12
 *
 * The count is after the LAST space, so frame names may contain spaces (py-spy writes
 * "work (app.py:12)"). A "_[k]" suffix marks a kernel frame; other annotations ("_[j]", "_[i]")
 * are kept as part of the name. Reading is strict: a malformed line is an error naming the line.
 */
#include "profile/profile-internal.h"
#include "pyrsprof/export.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "util/banned.h"

#define MAX_LINE (4u << 20)     /* bytes per line */
#define MAX_FRAMES PRS_PROFILE_MAX_DEPTH /* frames per line */
#define MAX_COUNT ((uint64_t)UINT32_MAX * 256)

static bool is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f';
}

/*
 * The reader's state across lines. Folded files are usually sorted (stackcollapse-*.pl, our own
 * export), so a line mostly repeats the frames of the one before: while its frames equal those of
 * the previous line (compared as bytes), their stack ids are reused and nothing is hashed. The
 * frames that differ are interned as usual: string -> frame (one array lookup per string id and
 * kind, after the first) -> stack (one trie probe). Unsorted input only loses the shortcut.
 * Measured on fg_bench's input (200k distinct stacks, 5.6M frames, 116 MB): 850k frames differ
 * from the line before, and reading takes ~0.4 s CPU instead of ~0.75 s, most of it the string
 * and trie probes of those 850k frames (cache misses in tables of 10-25 MB).
 */
struct reader {
	struct prs_profile *p;
	char *prev;       /* the frames text of the previous line */
	size_t prev_len, prev_cap;
	struct prev_frame {
		uint32_t off, len; /* the frame's text (with any "_[k]") at prev + off */
		uint32_t stack;    /* the stack that ends in it */
	} *pf;
	size_t npf, pf_cap;
	uint32_t *frame_of[2]; /* [kernel][string id]: frame id + 1, 0 = not made yet */
	size_t frame_cap[2];
	/* the frames of the line that are not shared, split and hashed before any is interned */
	struct pending {
		uint32_t off, raw_len, len; /* at line + off: raw_len bytes, len without "_[k]" */
		uint32_t hash;
		bool kernel;
	} *pend;
	size_t pend_cap;
};

static void reader_release(struct reader *r)
{
	free(r->prev);
	free(r->pf);
	free(r->pend);
	free(r->frame_of[0]);
	free(r->frame_of[1]);
}

/* The named frame for string str and kind (KERNEL or UNKNOWN); UINT32_MAX on ENOMEM. */
static uint32_t reader_frame(struct reader *r, uint32_t str, enum prs_kind kind)
{
	unsigned k = kind == PRS_KIND_KERNEL;
	uint32_t frame;

	if (str >= r->frame_cap[k]) {
		size_t old = r->frame_cap[k];

		if (prs_array_grow((void **)&r->frame_of[k], &r->frame_cap[k], (size_t)str + 1,
				   sizeof(*r->frame_of[k])))
			return UINT32_MAX;
		memset(r->frame_of[k] + old, 0, (r->frame_cap[k] - old) * sizeof(*r->frame_of[k]));
	}
	if (r->frame_of[k][str])
		return r->frame_of[k][str] - 1;
	frame = prs_profile_named_frame(r->p, kind, str, 0, 0);
	if (frame != UINT32_MAX)
		r->frame_of[k][str] = frame + 1;
	return frame;
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

/*
 * How many leading frames of the line (frames text [line, sp)) are those of the previous line:
 * a frame is shared when its bytes and the separator after it are equal in both lines.
 */
static size_t shared_frames(const struct reader *r, const char *line, const char *sp)
{
	size_t len = (size_t)(sp - line), common = common_prefix(r->prev, r->prev_len, line, len), k = 0;

	while (k < r->npf && (size_t)r->pf[k].off + r->pf[k].len < common)
		k++;
	/* the previous line's last frame ends the previous text: shared if the line ends there
	 * too, or goes on with a ';' */
	if (k + 1 == r->npf && common == r->prev_len && (common == len || line[common] == ';'))
		k++;
	return k;
}

/* Parses one line (NUL-free, without its trailing whitespace) into p. */
static int folded_line(struct reader *r, char *line, size_t len, const char *name,
		       unsigned long lineno, struct prs_err *err)
{
	struct prs_profile *p = r->p;
	char *sp = NULL, *s, *end = line + len;
	uint64_t count = 0;
	uint32_t stack = 0;
	size_t nframes = 0, shared, npend, k;
	struct prs_sample smp;
	char *c;

	for (c = line + len; c > line; c--)
		if (c[-1] == ' ' || c[-1] == '\t') {
			sp = c - 1;
			break;
		}
	if (!sp)
		return prs_err_set(err, -EINVAL, "%s:%lu: no count (expected \"frame;frame COUNT\")",
				   name, lineno);
	if (sp + 1 == end)
		return prs_err_set(err, -EINVAL, "%s:%lu: no count after the last space", name, lineno);
	for (c = sp + 1; c < end; c++) {
		if (*c < '0' || *c > '9')
			return prs_err_set(err, -EINVAL, "%s:%lu: count \"%.*s\" is not a non-negative integer",
					   name, lineno, (int)(end - sp - 1 > 40 ? 40 : end - sp - 1), sp + 1);
		if (count > (UINT64_MAX - (uint64_t)(*c - '0')) / 10)
			return prs_err_set(err, -EINVAL, "%s:%lu: count overflows 64 bits", name, lineno);
		count = count * 10 + (uint64_t)(*c - '0');
	}
	/* weights are u32: a bigger count becomes up to 256 samples, more is refused (a line must
	 * not turn into billions of samples) */
	if (count > MAX_COUNT)
		return prs_err_set(err, -EINVAL, "%s:%lu: count %" PRIu64 " is too large (at most %" PRIu64 ")",
				   name, lineno, count, MAX_COUNT);
	/* frames: [line, sp) split on ';'; those shared with the previous line are its stacks (they
	 * passed the checks below then) */
	shared = shared_frames(r, line, sp);
	s = line;
	if (shared) {
		const struct prev_frame *last = &r->pf[shared - 1];

		nframes = shared;
		stack = last->stack;
		s = line + last->off + last->len + 1;
	}
	npend = 0;
	while (s <= sp) {
		char *semi = memchr(s, ';', (size_t)(sp - s));
		char *fe = semi ? semi : sp;
		size_t flen = (size_t)(fe - s), raw_len = flen;
		bool kernel = false;

		if (flen == 0)
			return prs_err_set(err, -EINVAL, "%s:%lu: empty frame name (frame %zu)", name, lineno,
					   nframes + npend + 1);
		if (nframes + npend + 1 > MAX_FRAMES)
			return prs_err_set(err, -EINVAL, "%s:%lu: more than %u frames", name, lineno,
					   MAX_FRAMES);
		if (flen > 4 && memcmp(fe - 4, "_[k]", 4) == 0) {
			kernel = true;
			flen -= 4;
		}
		if (flen > PRS_PROFILE_MAX_STRING)
			return prs_err_set(err, -EINVAL, "%s:%lu: frame name longer than %u bytes",
					   name, lineno, PRS_PROFILE_MAX_STRING);
		if (npend + 1 > r->pend_cap &&
		    prs_array_grow((void **)&r->pend, &r->pend_cap, npend + 1, sizeof(*r->pend)))
			return prs_err_set(err, -ENOMEM, "%s:%lu: out of memory", name, lineno);
		r->pend[npend] = (struct pending){ .off = (uint32_t)(s - line), .raw_len = (uint32_t)raw_len,
						   .len = (uint32_t)flen, .kernel = kernel,
						   .hash = (uint32_t)prs_hash_bytes(s, flen) };
		prs_profile_string_prefetch(p, r->pend[npend].hash, false);
		npend++;
		if (!semi)
			break;
		s = semi + 1;
	}
	/* unsorted input: most frames are looked up in a string table of tens of MB; with the
	 * slots, then the key bytes, asked for all of the line's frames first, their cache misses
	 * overlap (fg_shapes' unsorted shape: see the commit) */
	for (k = 0; k < npend; k++)
		prs_profile_string_prefetch(p, r->pend[k].hash, true);
	if (nframes + npend > r->pf_cap &&
	    prs_array_grow((void **)&r->pf, &r->pf_cap, nframes + npend, sizeof(*r->pf)))
		return prs_err_set(err, -ENOMEM, "%s:%lu: out of memory", name, lineno);
	for (k = 0; k < npend; k++) {
		const struct pending *pe = &r->pend[k];
		uint32_t str = prs_profile_string_hashed(p, line + pe->off, pe->len, pe->hash), frame;

		frame = str == UINT32_MAX ? UINT32_MAX
					  : reader_frame(r, str, pe->kernel ? PRS_KIND_KERNEL : PRS_KIND_UNKNOWN);
		stack = frame == UINT32_MAX ? UINT32_MAX : prs_profile_stack(p, stack, frame);
		if (stack == UINT32_MAX)
			return prs_err_set(err, -ENOMEM, "%s:%lu: out of memory", name, lineno);
		r->pf[nframes++] = (struct prev_frame){ .off = pe->off, .len = pe->raw_len, .stack = stack };
	}
	/* this line's frames are the prefix of the next one */
	r->npf = nframes;
	r->prev_len = 0;
	if (prs_array_grow((void **)&r->prev, &r->prev_cap, (size_t)(sp - line), 1)) {
		r->npf = 0; /* no shortcut for the next line, still correct */
	} else {
		memcpy(r->prev, line, (size_t)(sp - line));
		r->prev_len = (size_t)(sp - line);
	}
	memset(&smp, 0, sizeof(smp));
	smp.state = PRS_STATE_RUNNING;
	smp.syscall = -1;
	smp.stack = stack;
	do {
		smp.weight = count > UINT32_MAX ? UINT32_MAX : (uint32_t)count;
		count -= smp.weight;
		if (prs_profile_sample(p, &smp))
			return prs_err_set(err, -ENOMEM, "%s:%lu: out of memory", name, lineno);
	} while (count);
	return 0;
}

/*
 * A bounded line reader: getline() would grow its buffer to the size of a file without newlines
 * (binary junk), this one holds at most MAX_LINE + 1 bytes.
 */
struct lines {
	FILE *f;
	char *buf; /* MAX_LINE + 2 bytes */
	size_t start, end;
	bool eof;
};

/* Returns 1 with *line / *len set (the newline removed, NUL-terminated), 0 at the end,
 * -E2BIG for a line longer than MAX_LINE, -EIO on a read error. */
static int next_line(struct lines *l, char **line, size_t *len)
{
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
		l->end += fread(l->buf + l->end, 1, MAX_LINE + 1 - l->end, l->f);
		if (l->end < MAX_LINE + 1) {
			if (ferror(l->f))
				return -EIO;
			l->eof = feof(l->f);
		}
	}
}

int prs_folded_read(FILE *f, const char *name, struct prs_profile **out, struct prs_err *err)
{
	struct prs_profile *p = prs_profile_new();
	struct lines l = { .f = f, .buf = malloc(MAX_LINE + 2) };
	struct reader r = { .p = p };
	unsigned long lineno = 0;
	char *line;
	size_t len;
	int rc = 0, got;

	*out = NULL;
	if (!p || !l.buf) {
		rc = prs_err_set(err, -ENOMEM, "%s: out of memory", name);
		goto out;
	}
	while ((got = next_line(&l, &line, &len)) > 0) {
		lineno++;
		if (memchr(line, '\0', len)) {
			rc = prs_err_set(err, -EINVAL, "%s:%lu: NUL byte: not a folded stacks text file",
					 name, lineno);
			goto out;
		}
		while (len && is_space(line[len - 1]))
			len--;
		if (!len)
			continue;
		line[len] = '\0';
		rc = folded_line(&r, line, len, name, lineno, err);
		if (rc)
			goto out;
	}
	if (got == -E2BIG) {
		rc = prs_err_set(err, -EINVAL, "%s:%lu: line longer than %u bytes", name, lineno + 1,
				 MAX_LINE);
		goto out;
	}
	if (got < 0) {
		rc = prs_err_set(err, -EIO, "%s: read error", name);
		goto out;
	}
	if (p->nsamples == 0) {
		rc = prs_err_set(err, -EINVAL, "%s: no stacks (empty folded file)", name);
		goto out;
	}
	p->complete = true;
	*out = p;
	p = NULL;
out:
	free(l.buf);
	reader_release(&r);
	/* the interning tables are half the reader's memory (1.4M trie nodes: 32 MB, 300k names:
	 * 24 MB) and a folded profile is mostly only looked at: they are built again if needed */
	if (*out)
		prs_profile_drop_index(*out);
	prs_profile_free(p);
	return rc;
}

/* ---- export ---- */

struct line {
	char *text;
	uint64_t count;
};

static int line_cmp(const void *a, const void *b)
{
	return strcmp(((const struct line *)a)->text, ((const struct line *)b)->text);
}

/* Appends one frame's text, made safe for the folded format. */
static int put_frame(struct prs_buf *b, const char *text, bool first)
{
	size_t start, i;
	int rc;

	if (!first && (rc = prs_buf_putc(b, ';')))
		return rc;
	if (!text[0])
		text = "[unknown]";
	start = b->len;
	if ((rc = prs_buf_append(b, text, strlen(text))))
		return rc;
	for (i = start; i < b->len; i++)
		if (b->data[i] == ';' || b->data[i] == '\n' || b->data[i] == '\r')
			b->data[i] = '_';
	return 0;
}

/* The text of view stack i: its frames, root first, each made safe; kernel frames get "_[k]". */
static int stack_text(struct prs_profile_view *v, size_t i, struct prs_buf *b)
{
	char label[PRS_MAX_NAME + 64];
	const uint32_t *ids;
	size_t n = prs_view_frames(v, i, &ids, NULL), k;
	int rc = 0;

	prs_buf_reset(b);
	for (k = 0; k < n && !rc; k++) {
		rc = put_frame(b, prs_view_frame_label(v, ids[k], label, sizeof(label)), k == 0);
		if (!rc && prs_view_frame_kind(v, ids[k]) == PRS_KIND_KERNEL)
			rc = prs_buf_append(b, "_[k]", 4);
	}
	return rc ? rc : prs_buf_putc(b, '\0');
}

int prs_export_folded(const struct prs_profile *p, const struct prs_view_opts *o, FILE *out,
		      struct prs_err *err)
{
	struct prs_profile_view *v = NULL;
	const struct prs_view_stack *st;
	struct line *lines = NULL;
	size_t nlines = 0, nst, i, j;
	struct prs_buf b;
	int rc;

	prs_buf_init(&b);
	if ((rc = prs_view_new(p, o, &v, err)))
		return rc;
	st = prs_view_stacks(v, &nst);
	lines = malloc((nst ? nst : 1) * sizeof(*lines));
	if (!lines)
		goto nomem;
	for (i = 0; i < nst; i++) {
		if (stack_text(v, i, &b))
			goto nomem;
		lines[nlines].text = (char *)prs_buf_detach(&b, NULL);
		lines[nlines++].count = st[i].weight;
	}
	if (nlines)
		qsort(lines, nlines, sizeof(*lines), line_cmp);
	for (i = 0; i < nlines; i = j) {
		uint64_t count = 0;

		/* different stacks can print alike (unsymbolized frames, replaced ';'): merge them */
		for (j = i; j < nlines && strcmp(lines[i].text, lines[j].text) == 0; j++)
			count += lines[j].count;
		if (fprintf(out, "%s %" PRIu64 "\n", lines[i].text, count) < 0) {
			rc = prs_err_set(err, -EIO, "folded output: write error");
			goto out;
		}
	}
	if (fflush(out) != 0)
		rc = prs_err_set(err, -EIO, "folded output: write error");
	goto out;
nomem:
	rc = prs_err_set(err, -ENOMEM, "folded export: out of memory");
out:
	for (i = 0; i < nlines; i++)
		free(lines[i].text);
	free(lines);
	prs_view_free(v);
	prs_buf_release(&b);
	return rc;
}
