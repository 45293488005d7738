/* SPDX-License-Identifier: MIT */
/*
 * /proc/PID/maps reader and parser (see pyrsprof/maps.h). The parser never trusts the text: each
 * field is checked, numbers are bounded to 64 bits, lines are bounded in length, and the result is
 * sorted and made disjoint so that prs_maps_find can binary-search it.
 */
#include "pyrsprof/maps.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/banned.h"

static const char DELETED[] = " (deleted)";

/* Parses hex digits at *p (at least one, at most 16); advances *p. */
static bool parse_hex(const char **p, const char *end, uint64_t *out)
{
	const char *s = *p;
	uint64_t v = 0;
	int nd = 0;

	while (s < end) {
		int d;
		char c = *s;

		if (c >= '0' && c <= '9')
			d = c - '0';
		else if (c >= 'a' && c <= 'f')
			d = c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			d = c - 'A' + 10;
		else
			break;
		if (++nd > 16)
			return false;
		v = (v << 4) | (uint64_t)d;
		s++;
	}
	if (nd == 0)
		return false;
	*p = s;
	*out = v;
	return true;
}

static bool parse_dec(const char **p, const char *end, uint64_t *out)
{
	const char *s = *p;
	uint64_t v = 0;
	int nd = 0;

	while (s < end && *s >= '0' && *s <= '9') {
		uint64_t d = (uint64_t)(*s - '0');

		if (v > (UINT64_MAX - d) / 10)
			return false;
		v = v * 10 + d;
		nd++;
		s++;
	}
	if (nd == 0)
		return false;
	*p = s;
	*out = v;
	return true;
}

static bool expect(const char **p, const char *end, char c)
{
	if (*p >= end || **p != c)
		return false;
	(*p)++;
	return true;
}

static void skip_spaces(const char **p, const char *end)
{
	while (*p < end && (**p == ' ' || **p == '\t'))
		(*p)++;
}

/* Parses one line [s, end) (without '\n'). The path is returned as [*path, *path_end). */
static bool parse_line(const char *s, const char *end, struct prs_map *m, const char **path,
		       const char **path_end)
{
	uint64_t maj, min;

	memset(m, 0, sizeof(*m));
	if (!parse_hex(&s, end, &m->start) || !expect(&s, end, '-') ||
	    !parse_hex(&s, end, &m->end) || !expect(&s, end, ' '))
		return false;
	if (m->start >= m->end || end - s < 4)
		return false;
	for (int i = 0; i < 4; i++) {
		static const char want[] = "rwx";
		char c = s[i];

		if (i < 3) {
			if (c == want[i])
				m->perms |= 1u << i;
			else if (c != '-')
				return false;
		} else if (c == 'p') {
			m->perms |= PRS_MAP_P;
		} else if (c != 's') {
			return false;
		}
	}
	s += 4;
	if (!expect(&s, end, ' ') || !parse_hex(&s, end, &m->offset) || !expect(&s, end, ' ') ||
	    !parse_hex(&s, end, &maj) || !expect(&s, end, ':') || !parse_hex(&s, end, &min) ||
	    !expect(&s, end, ' ') || !parse_dec(&s, end, &m->inode))
		return false;
	if (maj > UINT32_MAX || min > UINT32_MAX)
		return false;
	m->dev_major = (uint32_t)maj;
	m->dev_minor = (uint32_t)min;
	if (s < end && *s != ' ' && *s != '\t')
		return false;
	skip_spaces(&s, end);
	*path = s;
	if ((size_t)(end - s) >= sizeof(DELETED) - 1 &&
	    memcmp(end - (sizeof(DELETED) - 1), DELETED, sizeof(DELETED) - 1) == 0) {
		m->deleted = true;
		end -= sizeof(DELETED) - 1;
	}
	*path_end = end;
	return true;
}

static int cmp_start(const void *a, const void *b)
{
	const struct prs_map *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

void prs_maps_release(struct prs_maps *maps)
{
	if (!maps)
		return;
	free(maps->v);
	free(maps->pool);
	memset(maps, 0, sizeof(*maps));
}

int prs_maps_parse(const char *text, size_t len, struct prs_maps *out, struct prs_err *err)
{
	struct prs_maps m = PRS_MAPS_INIT;
	size_t nlines = 0, cap_pool, nv = 0;
	const char *p, *end = text + len;
	int rc = 0;

	prs_maps_release(out);
	if (len > PRS_MAPS_MAX_BYTES)
		return prs_err_set(err, -E2BIG, "maps text of %zu bytes is too large", len);
	for (p = text; p < end; p++)
		if (*p == '\n')
			nlines++;
	nlines++;
	if (nlines > PRS_MAPS_MAX_ENTRIES + 1)
		return prs_err_set(err, -E2BIG, "maps text has %zu lines (max %d)", nlines,
				   PRS_MAPS_MAX_ENTRIES);
	m.v = calloc(nlines, sizeof(*m.v));
	/* Every path plus its NUL fits in len + nlines bytes; offsets are fixed up at the end. */
	cap_pool = len + nlines + 1;
	m.pool = malloc(cap_pool);
	if (!m.v || !m.pool) {
		rc = prs_err_set(err, -ENOMEM, "maps: out of memory for %zu lines", nlines);
		goto out;
	}
	for (p = text; p < end;) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		const char *lend = eol ? eol : end, *ps, *pe;
		struct prs_map e;

		if (lend == p) { /* empty line */
			p = lend + 1;
			continue;
		}
		if ((size_t)(lend - p) > PRS_MAPS_MAX_LINE || memchr(p, '\0', (size_t)(lend - p)) ||
		    !parse_line(p, lend, &e, &ps, &pe)) {
			m.skipped++;
		} else {
			size_t plen = (size_t)(pe - ps);

			memcpy(m.pool + m.pool_len, ps, plen);
			m.pool[m.pool_len + plen] = '\0';
			e.path = (char *)(uintptr_t)m.pool_len; /* offset, fixed below */
			m.pool_len += plen + 1;
			m.v[nv++] = e;
		}
		p = lend + 1;
	}
	/* The kernel emits sorted lines; a fixture or a hostile file may not. */
	qsort(m.v, nv, sizeof(*m.v), cmp_start);
	m.n = 0;
	for (size_t i = 0; i < nv; i++) {
		if (m.n > 0 && m.v[i].start < m.v[m.n - 1].end) {
			m.skipped++;
			continue;
		}
		m.v[m.n] = m.v[i];
		m.v[m.n].path = m.pool + (uintptr_t)m.v[i].path;
		m.n++;
	}
	*out = m;
	return 0;
out:
	prs_maps_release(&m);
	return rc;
}

int prs_maps_read_text(pid_t pid, char **buf, size_t *cap, size_t *len, struct prs_err *err)
{
	char path[64];
	int fd, rc = 0;
	size_t n = 0;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		return prs_err_set(err, rc, "open %s: %s", path, strerror(-rc));
	}
	for (;;) {
		ssize_t r;

		if (*cap - n < 4096) {
			size_t ncap = *cap ? *cap * 2 : 65536;
			char *nb;

			if (ncap > PRS_MAPS_MAX_BYTES + 4096) {
				rc = prs_err_set(err, -E2BIG, "%s is larger than %u bytes", path,
						 PRS_MAPS_MAX_BYTES);
				goto out;
			}
			nb = realloc(*buf, ncap);
			if (!nb) {
				rc = prs_err_set(err, -ENOMEM, "read %s: out of memory", path);
				goto out;
			}
			*buf = nb;
			*cap = ncap;
		}
		r = read(fd, *buf + n, *cap - n);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			rc = -errno;
			prs_err_set(err, rc, "read %s: %s", path, strerror(-rc));
			goto out;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	*len = n;
out:
	close(fd);
	return rc;
}

int prs_maps_read(pid_t pid, struct prs_maps *out, struct prs_err *err)
{
	char *buf = NULL;
	size_t cap = 0, len = 0;
	int rc;

	prs_maps_release(out);
	rc = prs_maps_read_text(pid, &buf, &cap, &len, err);
	if (rc == 0)
		rc = prs_maps_parse(buf, len, out, err);
	free(buf);
	return rc;
}

const struct prs_map *prs_maps_find(const struct prs_maps *maps, uint64_t addr)
{
	size_t lo = 0, hi;

	if (!maps || !maps->v)
		return NULL;
	hi = maps->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct prs_map *m = &maps->v[mid];

		if (addr < m->start)
			hi = mid;
		else if (addr >= m->end)
			lo = mid + 1;
		else
			return m;
	}
	return NULL;
}
