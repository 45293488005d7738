/* SPDX-License-Identifier: MIT */
/*
 * /proc/kallsyms: "ADDR TYPE NAME[\t[MODULE]]" per line. Text symbols are kept as (address,
 * offset of the name in one string pool), sorted by address.
 *
 * The live kernel's table is read once per pyrsprof process while its modules stay the same: a
 * recording needs it at its start (src/sample/kstack.c: the interrupt entries) and at its end
 * (naming the kernel frames), and each read costs 0.1-0.3 s on the 2-vCPU VM (the kernel
 * formats 121k lines; 0.07 s of it for `cat`), before the program starts and after it ends.
 */
#include "pyrsprof/kallsyms.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pyrsprof/util.h"
#include "util/banned.h"

#define KSYM_MAX_NAME 256 /* longer names are cut (KSYM_NAME_LEN is 512 in new kernels) */
#define KSYM_MAX 4000000  /* symbols kept at most */

struct ksym {
	uint64_t addr;
	uint32_t name; /* offset into pool */
};

struct prs_kallsyms {
	struct ksym *v;
	size_t n, cap;
	char *pool;
	size_t pool_len, pool_cap;
	uint64_t end; /* past the last text symbol: an address beyond is not named */
	unsigned refs; /* holders: prs_kallsyms_free frees at the last */
};

/* The live table (/proc/kallsyms) kept for the next load (one reference of its own), and the
 * fingerprint of /proc/modules when it was read: a module loaded or unloaded since reads again.
 * (Symbols of BPF programs loaded since are not seen: their frames are named by address.) */
static struct prs_kallsyms *live;
static uint64_t live_modules;

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
	size_t c = *cap ? *cap : 1024;
	void *q;

	if (need <= *cap)
		return 0;
	while (c < need)
		c *= 2;
	q = realloc(*p, c * elem);
	if (!q)
		return -ENOMEM;
	*p = q;
	*cap = c;
	return 0;
}

/* Parses one line; returns 1 when it is a text symbol (*addr, name in [*name, *name + *len)). */
static int parse(char *line, uint64_t *addr, const char **name, size_t *len)
{
	char *end, type;

	*addr = strtoull(line, &end, 16);
	if (end == line || *end != ' ')
		return 0;
	type = end[1];
	if (!type || end[2] != ' ')
		return 0;
	if (type != 't' && type != 'T' && type != 'w' && type != 'W')
		return 0;
	*name = end + 3;
	*len = strcspn(*name, "\t\n");
	if (*len >= KSYM_MAX_NAME)
		*len = KSYM_MAX_NAME - 1;
	return *len > 0;
}

static int add(struct prs_kallsyms *k, uint64_t addr, const char *name, size_t len)
{
	if (k->n >= KSYM_MAX)
		return 0;
	if (grow((void **)&k->v, &k->cap, k->n + 1, sizeof(*k->v)) ||
	    grow((void **)&k->pool, &k->pool_cap, k->pool_len + len + 1, 1))
		return -ENOMEM;
	memcpy(k->pool + k->pool_len, name, len);
	k->pool[k->pool_len + len] = '\0';
	k->v[k->n++] = (struct ksym){ addr, (uint32_t)k->pool_len };
	k->pool_len += len + 1;
	return 0;
}

static int by_addr(const void *a, const void *b)
{
	const struct ksym *x = a, *y = b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* What a read keeps: the symbols, the count of hidden ones, and the name that ends it (NULL: none)
 * and whether it was seen. */
struct reading {
	struct prs_kallsyms *k;
	size_t hidden;
	const char *last;
	bool done;
};

static bool is_name(const char *name, size_t n, const char *want)
{
	return strlen(want) == n && memcmp(name, want, n) == 0;
}

/* Parses the lines of buf[0, len) (the last one complete: ends with '\n'), up to the one that
 * names r->last. */
static int parse_lines(struct reading *r, char *buf, size_t len)
{
	char *line = buf, *end = buf + len;

	while (line < end && !r->done) {
		char *nl = memchr(line, '\n', (size_t)(end - line));
		const char *name;
		uint64_t addr;
		size_t n;

		*nl = '\0'; /* (parse stops at it: strtoull and strcspn) */
		if (parse(line, &addr, &name, &n)) {
			if (!addr)
				r->hidden++;
			else if (add(r->k, addr, name, n))
				return -ENOMEM;
			if (r->last && is_name(name, n, r->last))
				r->done = true; /* the read ends here */
		}
		line = nl + 1;
	}
	return 0;
}

/* Reads fd into one buffer and parses its complete lines in place (no per-line copy: the first
 * load 0.10-0.22 -> 0.07-0.08 s with the sort skipped; the kernel still returns ~4 KiB of kallsyms
 * per read call, whatever the buffer); a line longer than the buffer is skipped to its end. */
static int read_all(int fd, struct reading *r)
{
	enum { CHUNK = 256 * 1024 };
	char *buf = malloc(CHUNK + 1);
	size_t have = 0;
	bool skipping = false;
	int rc = 0;

	if (!buf)
		return -ENOMEM;
	while (!r->done) {
		ssize_t got = read(fd, buf + have, CHUNK - have);
		char *last;

		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			break;
		have += (size_t)got;
		last = memrchr(buf, '\n', have);
		if (!last) {
			if (have == CHUNK) { /* one line fills the buffer: drop it to its end */
				skipping = true;
				have = 0;
			}
			continue;
		}
		if (skipping) { /* the rest of the overlong line, up to its newline */
			char *nl = memchr(buf, '\n', have);

			memmove(buf, nl + 1, have - (size_t)(nl + 1 - buf));
			have -= (size_t)(nl + 1 - buf);
			skipping = false;
			continue;
		}
		if ((rc = parse_lines(r, buf, (size_t)(last + 1 - buf))))
			break;
		have -= (size_t)(last + 1 - buf);
		memmove(buf, last + 1, have);
	}
	if (!rc && have && !skipping && !r->done) {
		buf[have] = '\n'; /* a last line without its newline */
		rc = parse_lines(r, buf, have + 1);
	}
	free(buf);
	return rc;
}

static bool sorted(const struct prs_kallsyms *k)
{
	for (size_t i = 1; i < k->n; i++)
		if (k->v[i].addr < k->v[i - 1].addr)
			return false;
	return true;
}

/* A fingerprint of /proc/modules (names, sizes and addresses of the loaded modules), 0 when it
 * cannot be read. */
static uint64_t modules_fingerprint(void)
{
	char buf[4096];
	uint64_t h = 0x9e3779b97f4a7c15ull;
	int fd = open("/proc/modules", O_RDONLY | O_CLOEXEC);
	ssize_t got;

	if (fd < 0)
		return 0;
	while ((got = read(fd, buf, sizeof(buf))) > 0)
		h = prs_hash64(h ^ prs_hash_bytes(buf, (size_t)got));
	close(fd);
	return h;
}

static int load_file(const char *path, const char *last, struct prs_kallsyms **out,
		     struct prs_err *err)
{
	struct prs_kallsyms *k;
	struct reading r = { .last = last };
	int fd, rc;

	*out = NULL;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return prs_err_set(err, -errno, "cannot read %s: %s", path, strerror(errno));
	r.k = k = calloc(1, sizeof(*k));
	rc = k ? read_all(fd, &r) : -ENOMEM;
	close(fd);
	if (rc) {
		prs_kallsyms_free(k);
		return prs_err_set(err, rc, "out of memory reading %s", path);
	}
	if (!k->n) {
		prs_kallsyms_free(k);
		if (r.hidden)
			return prs_err_set(err, -EPERM, "%s hides the kernel's addresses (kernel."
					   "kptr_restrict; root or CAP_SYSLOG sees them)", path);
		return prs_err_set(err, -ENOENT, "no kernel text symbol in %s", path);
	}
	if (!sorted(k)) /* (the kernel lists its own symbols in order: modules' may not be) */
		qsort(k->v, k->n, sizeof(*k->v), by_addr);
	/* the last symbol's size is unknown: allow a page past it (modules end with small ones) */
	k->end = k->v[k->n - 1].addr + 4096;
	k->refs = 1;
	*out = k;
	return 0;
}

int prs_kallsyms_load(const char *path, struct prs_kallsyms **out, struct prs_err *err)
{
	uint64_t modules;
	int rc;

	if (path)
		return load_file(path, NULL, out, err);
	modules = modules_fingerprint();
	if (live && modules == live_modules) {
		live->refs++;
		*out = live;
		return 0;
	}
	if ((rc = load_file("/proc/kallsyms", NULL, out, err)))
		return rc;
	prs_kallsyms_free(live); /* the cache's reference to the old table */
	live = *out;
	live_modules = modules;
	live->refs++;
	return 0;
}

int prs_kallsyms_load_until(const char *path, const char *last, struct prs_kallsyms **out,
			    struct prs_err *err)
{
	return load_file(path ? path : "/proc/kallsyms", last, out, err);
}

const char *prs_kallsyms_lookup(const struct prs_kallsyms *k, uint64_t addr)
{
	size_t lo = 0, hi;

	if (!k || !k->n || addr < k->v[0].addr || addr >= k->end)
		return NULL;
	hi = k->n;
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;

		if (k->v[mid].addr <= addr)
			lo = mid;
		else
			hi = mid;
	}
	return k->pool + k->v[lo].name;
}

size_t prs_kallsyms_ranges(const struct prs_kallsyms *k, const char *prefix, struct prs_krange *out,
			   size_t max)
{
	size_t n = 0, len = strlen(prefix);

	for (size_t i = 0; k && i < k->n && n < max; i++)
		if (strncmp(k->pool + k->v[i].name, prefix, len) == 0) {
			out[n].start = k->v[i].addr;
			out[n++].end = i + 1 < k->n ? k->v[i + 1].addr : k->end;
		}
	return n;
}

size_t prs_kallsyms_count(const struct prs_kallsyms *k)
{
	return k ? k->n : 0;
}

void prs_kallsyms_free(struct prs_kallsyms *k)
{
	if (!k || --k->refs > 0)
		return;
	free(k->v);
	free(k->pool);
	free(k);
}
