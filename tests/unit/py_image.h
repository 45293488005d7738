/* SPDX-License-Identifier: MIT */
/*
 * A synthetic target for the unit tests of the CPython reader (test_python_*.c, py_world.h) and of
 * the page cache (test_pagecache.c): one buffer standing
 * for the bytes [base, base + size) of a process, a bump allocator and writers over it, str
 * objects built by a layout row, and a struct prs_memreader that serves it (-EFAULT outside it or
 * on an unreadable page, -ESRCH once the process is "gone") and counts what it is asked. There is
 * one image, the global img: Criterion runs each test in a process of its own.
 */
#ifndef PYRSPROF_TESTS_PY_IMAGE_H
#define PYRSPROF_TESTS_PY_IMAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pyrsprof/memreader.h"

struct prs_py_layout;

struct py_image {
	uint8_t *mem;  /* mem[i] is the target's byte at base + i */
	uint64_t base;
	size_t size;
	uint64_t brk;  /* the next free target address (img_alloc) */
	/* what img_mkstr* build with: set by the test */
	const struct prs_py_layout *L;
	uint64_t str_type;
	/* what the memreader was asked; tests may zero these at any time */
	unsigned reads;  /* read() calls */
	unsigned readvs; /* readv() calls */
	unsigned vecs;   /* vecs of those readv() calls */
	size_t bytes;    /* bytes served, reads and vecs */
	uint64_t watch_lo[2], watch_hi[2]; /* a read or vec touching [lo, hi) counts in watched */
	unsigned watched;
	/* faults */
	uint64_t hole[2]; /* unreadable 4 KiB pages starting here (0: none) */
	bool gone;        /* the process exited: every read and readv fails with -ESRCH */
};

extern struct py_image img;

/* Allocates a zeroed image of size bytes at base and clears it (img_clear); fails the test on OOM. */
void img_init(uint64_t base, size_t size);
/* Frees the image's buffer. */
void img_release(void);
/*
 * Every byte zero, brk at base + 4096 (page 0 of the image stays unused), the counters, watches
 * and faults reset. L and str_type are kept.
 */
void img_clear(void);

/* A memreader over img (ctx = &img), the same for every call. */
struct prs_memreader img_reader(void);

/* len bytes at addr, 16-aligned, from brk; fails the test when the image is full. */
uint64_t img_alloc(size_t len);
/* The local address of the target's byte at addr (which must be in the image). */
uint8_t *img_at(uint64_t addr);
void img_put64(uint64_t addr, uint64_t v);
void img_put32(uint64_t addr, uint32_t v);
void img_put8(uint64_t addr, uint8_t v);
uint64_t img_get64(uint64_t addr);

/* The state word of a compact str of kind bytes per code point (img.L's bit positions). */
uint32_t img_str_state(unsigned kind, bool ascii);
/*
 * A compact str (type img.str_type, layout img.L) of kind bytes per code point holding
 * cps[0..n), at at (0: allocated); ascii: the PyASCIIObject form. Returns its address.
 */
uint64_t img_mkstr_cp_at(uint64_t at, const uint32_t *cps, size_t n, unsigned kind, bool ascii);
uint64_t img_mkstr_cp(const uint32_t *cps, size_t n, unsigned kind, bool ascii);
/* An ASCII str holding s, allocated. */
uint64_t img_mkstr(const char *s);

/* The next number of a xorshift64 sequence kept in *state (never 0): random images. */
uint64_t img_rand(uint64_t *state);

#endif
