/* SPDX-License-Identifier: MIT */
/*
 * /proc/kallsyms: "ADDR TYPE NAME[\t[MODULE]]" per line. Text symbols are kept as (address,
 * offset of the name in one string pool), sorted by address.
 */
#include "pyrsprof/kallsyms.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
};

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

static int read_all(FILE *f, struct prs_kallsyms *k, size_t *hidden)
{
	char line[KSYM_MAX_NAME + 128];
	uint64_t addr;
	const char *name;
	size_t len;

	while (fgets(line, sizeof(line), f)) {
		if (!strchr(line, '\n') && !feof(f)) {
			int c;

			while ((c = fgetc(f)) != EOF && c != '\n')
				; /* an overlong line: skip its rest */
		}
		if (!parse(line, &addr, &name, &len))
			continue;
		if (!addr) {
			(*hidden)++;
			continue;
		}
		if (add(k, addr, name, len))
			return -ENOMEM;
	}
	return 0;
}

int prs_kallsyms_load(const char *path, struct prs_kallsyms **out, struct prs_err *err)
{
	struct prs_kallsyms *k;
	size_t hidden = 0;
	FILE *f;
	int rc;

	*out = NULL;
	path = path ? path : "/proc/kallsyms";
	f = fopen(path, "re");
	if (!f)
		return prs_err_set(err, -errno, "cannot read %s: %s", path, strerror(errno));
	k = calloc(1, sizeof(*k));
	rc = k ? read_all(f, k, &hidden) : -ENOMEM;
	fclose(f);
	if (rc) {
		prs_kallsyms_free(k);
		return prs_err_set(err, rc, "out of memory reading %s", path);
	}
	if (!k->n) {
		prs_kallsyms_free(k);
		if (hidden)
			return prs_err_set(err, -EPERM, "%s hides the kernel's addresses (kernel."
					   "kptr_restrict; root or CAP_SYSLOG sees them)", path);
		return prs_err_set(err, -ENOENT, "no kernel text symbol in %s", path);
	}
	qsort(k->v, k->n, sizeof(*k->v), by_addr);
	/* the last symbol's size is unknown: allow a page past it (modules end with small ones) */
	k->end = k->v[k->n - 1].addr + 4096;
	*out = k;
	return 0;
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
	if (!k)
		return;
	free(k->v);
	free(k->pool);
	free(k);
}
