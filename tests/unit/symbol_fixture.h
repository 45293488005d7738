/* SPDX-License-Identifier: MIT */
/*
 * Helpers of the symbolizer's unit tests (test_symbol*.c). The fixtures are the programs of
 * tests/fixtures/symbol built by mk/symbol.mk into PRS_SYMBOL_FIXTURES (or the environment
 * variable of that name); each prints "addr NAME 0x..." lines for known code locations and then
 * its own /proc/self/maps. Every helper fails the running Criterion test on an error.
 */
#ifndef PYRSPROF_TESTS_SYMBOL_FIXTURE_H
#define PYRSPROF_TESTS_SYMBOL_FIXTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pyrsprof/symbol.h"

/* What a fixture printed: its addresses and its mappings (with the build ids read from disk). */
struct run {
	char names[16][64];
	uint64_t addrs[16];
	int naddrs;
	char paths[128][512];
	struct prs_symmap maps[128];
	uint8_t ids[128][64];
	int nmaps;
};

/* The path of fixture program name, written into buf. */
const char *fixture(const char *name, char *buf, size_t size);
/* The 1-based line of tests/fixtures/symbol/src carrying "LINE:<tag>". */
uint32_t marker_line(const char *src, const char *tag);
/* Runs fixture name and keeps what it printed. The build ids are read like the sampler does. */
void run_fixture(const char *name, struct run *r);
/* The address the fixture printed for name. */
uint64_t addr_of(const struct run *r, const char *name);
/* The mapping holding a. */
const struct prs_symmap *map_of(const struct run *r, uint64_t a);
bool ends_with(const char *s, const char *suffix);
/* Runs cmd with system(); it must succeed. */
void sh(const char *cmd);
/* Seeds rand() from PRS_SEED, else the time, and logs the seed for a replay. Returns it. */
unsigned seed_rand(void);
/* The contents of path (malloc'd, caller frees), its size in *len. */
uint8_t *read_file(const char *path, size_t *len);
/* Writes len bytes of data to path. */
void write_file(const char *path, const void *data, size_t len);

#endif
