/* SPDX-License-Identifier: MIT */
/*
 * Shared pieces of the fuzz targets (tests/fuzz/fuzz_*.c, built by mk/fuzz.mk with libFuzzer,
 * ASan and UBSan). Each target defines LLVMFuzzerTestOneInput over one reader of untrusted input;
 * a crash, a sanitizer report or a leak is a finding. Seeds: tests/fixtures/fuzz/<target>/;
 * inputs that once crashed: tests/fixtures/fuzz/crashes/<target>/ (replayed by `make test`).
 */
#ifndef PYRSPROF_TESTS_FUZZ_H
#define PYRSPROF_TESTS_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/*
 * The input as the NUL-terminated text a /proc reader hands its parser: at most size - 1 bytes
 * (what a read into a buffer of `size` bytes gets), into buf. Returns buf.
 */
char *fuzz_text(const uint8_t *data, size_t len, char *buf, size_t size);

/* A stream that discards what is written (opened once, kept for the life of the process). */
FILE *fuzz_sink(void);

/*
 * Renders p every way the CLI does (folded with its flags, both views of the flame graph as SVG,
 * speedscope, pprof, a diff against itself, the off-CPU labels, the classifier's facts, verdict
 * and hot spots): what a hostile file that the reader accepted reaches next. For inputs over FUZZ_CONSUME_MAX bytes only the folded export:
 * the renderers' cost would otherwise dominate (a 20 KB input: 16 ms, 60 runs a second).
 */
#define FUZZ_CONSUME_MAX 4096
struct prs_profile;
void fuzz_consume_profile(const struct prs_profile *p, size_t input_size);

#endif
