// SPDX-License-Identifier: MIT
/*
 * Helpers of the symbolizer's unit tests (test_symbol*.c): the fixture programs of
 * tests/fixtures/symbol, run to get the addresses and mappings they print, their LINE: markers,
 * and shell steps.
 */
#include "symbol_fixture.h"

#include <criterion/criterion.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/banned.h"

#ifndef PRS_SYMBOL_FIXTURES
#define PRS_SYMBOL_FIXTURES "build/symbol"
#endif
#ifndef PRS_SYMBOL_SRC
#define PRS_SYMBOL_SRC "tests/fixtures/symbol"
#endif

const char *fixture(const char *name, char *buf, size_t size)
{
	const char *dir = getenv("PRS_SYMBOL_FIXTURES");

	snprintf(buf, size, "%s/%s", dir && dir[0] ? dir : PRS_SYMBOL_FIXTURES, name);
	return buf;
}

/* The 1-based line of the source file carrying "LINE:<tag>" (exact tag, then a space or EOL). */
uint32_t marker_line(const char *src, const char *tag)
{
	char path[512], line[1024], want[128];
	uint32_t n = 0, found = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", PRS_SYMBOL_SRC, src);
	snprintf(want, sizeof(want), "LINE:%s", tag);
	f = fopen(path, "r");
	cr_assert(f, "open %s", path);
	while (fgets(line, sizeof(line), f)) {
		char *p = strstr(line, want);

		n++;
		if (p && (p[strlen(want)] == ' ' || p[strlen(want)] == '\n')) {
			cr_assert_eq(found, 0, "marker %s twice in %s", tag, src);
			found = n;
		}
	}
	fclose(f);
	cr_assert(found, "no marker %s in %s", tag, src);
	return found;
}

/* Runs a fixture and keeps what it printed. The build ids are read like the sampler does. */
void run_fixture(const char *name, struct run *r)
{
	char cmd[600], line[4096];
	FILE *f;

	memset(r, 0, sizeof(*r));
	fixture(name, line, sizeof(line));
	snprintf(cmd, sizeof(cmd), "'%s'", line);
	f = popen(cmd, "r");
	cr_assert(f, "run %s", cmd);
	while (fgets(line, sizeof(line), f)) {
		uint64_t st, en, off;
		char perm[8], path[512] = "";

		if (strncmp(line, "addr ", 5) == 0 && r->naddrs < 16) {
			cr_assert(sscanf(line, "addr %63s %" SCNx64, r->names[r->naddrs],
					 &r->addrs[r->naddrs]) == 2);
			r->naddrs++;
		} else if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %7s %" SCNx64 " %*s %*s %511s", &st, &en,
				  perm, &off, path) >= 4 && r->nmaps < 128) {
			int i = r->nmaps++;
			size_t len = 0;

			snprintf(r->paths[i], sizeof(r->paths[i]), "%s", path);
			r->maps[i] = (struct prs_symmap){ r->paths[i], NULL, 0, st, en, off };
			if (path[0] == '/' && prs_elf_build_id(path, r->ids[i], 64, &len) == 0) {
				r->maps[i].build_id = r->ids[i];
				r->maps[i].build_id_len = len;
			}
		}
	}
	cr_assert_eq(pclose(f), 0, "%s failed", name);
	cr_assert_gt(r->naddrs, 0);
}

uint64_t addr_of(const struct run *r, const char *name)
{
	for (int i = 0; i < r->naddrs; i++)
		if (strcmp(r->names[i], name) == 0)
			return r->addrs[i];
	cr_assert_fail("fixture printed no address for %s", name);
	return 0;
}

const struct prs_symmap *map_of(const struct run *r, uint64_t a)
{
	for (int i = 0; i < r->nmaps; i++)
		if (a >= r->maps[i].start && a < r->maps[i].end)
			return &r->maps[i];
	cr_assert_fail("no mapping holds %#" PRIx64, a);
	return NULL;
}

bool ends_with(const char *s, const char *suffix)
{
	size_t a = s ? strlen(s) : 0, b = strlen(suffix);

	return s && a >= b && strcmp(s + a - b, suffix) == 0;
}

void sh(const char *cmd)
{
	cr_assert_eq(system(cmd), 0, "%s", cmd);
}

void write_file(const char *path, const void *data, size_t len)
{
	FILE *f = fopen(path, "wb");

	cr_assert(f);
	cr_assert_eq(fwrite(data, 1, len, f), len);
	fclose(f);
}

unsigned seed_rand(void)
{
	const char *env = getenv("PRS_SEED");
	unsigned seed = env ? (unsigned)strtoul(env, NULL, 10) : (unsigned)time(NULL);

	cr_log_info("seed %u (PRS_SEED=%u to replay)", seed, seed);
	srand(seed);
	return seed;
}

uint8_t *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	uint8_t *img;
	long size;

	cr_assert(f, "open %s", path);
	cr_assert_eq(fseek(f, 0, SEEK_END), 0);
	size = ftell(f);
	cr_assert_geq(size, 0);
	rewind(f);
	img = malloc((size_t)size + 1);
	cr_assert(img);
	cr_assert_eq(fread(img, 1, (size_t)size, f), (size_t)size);
	fclose(f);
	*len = (size_t)size;
	return img;
}
