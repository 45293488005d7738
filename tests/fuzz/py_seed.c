/* SPDX-License-Identifier: MIT */
/*
 * Records a seed of the CPython fuzz target from a live interpreter: `py_seed PID OUT`. Opens the
 * process as pyrsprof does (prs_py_open), stops it, makes the fuzz target's calls (py_mem.c)
 * through a memreader that logs every byte read, lets it run again, and writes the header and the
 * bytes read as segments (py_mem.h). The seed is then what the reader saw of a real target.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pyrsprof/profile.h"
#include "pyrsprof/util.h"
#include "python/python-internal.h"
#include "py_mem.h"

#include "util/banned.h"

struct logged {
	uint64_t addr;
	size_t len;
	uint8_t *data;
};

static struct prs_memreader inner;
static struct logged *log_v;
static size_t log_n, log_cap;

static void note(uint64_t addr, const void *buf, size_t len)
{
	if (log_n == log_cap) {
		log_cap = log_cap ? 2 * log_cap : 256;
		log_v = realloc(log_v, log_cap * sizeof(*log_v));
		if (!log_v)
			abort();
	}
	log_v[log_n].addr = addr;
	log_v[log_n].len = len;
	log_v[log_n].data = malloc(len ? len : 1);
	if (!log_v[log_n].data)
		abort();
	memcpy(log_v[log_n].data, buf, len);
	log_n++;
}

static int log_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	int rc = inner.read(inner.ctx, addr, buf, len);

	(void)ctx;
	if (rc == 0)
		note(addr, buf, len);
	return rc;
}

static int log_readv(void *ctx, struct prs_memvec *v, size_t n)
{
	int rc = inner.readv(inner.ctx, v, n);

	(void)ctx;
	for (size_t i = 0; rc >= 0 && i < n; i++)
		if (v[i].res == 0)
			note(v[i].addr, v[i].buf, v[i].len);
	return rc;
}

static int by_addr(const void *a, const void *b)
{
	const struct logged *x = a, *y = b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* The bytes read, as disjoint runs (overlaps keep the bytes read first). */
static struct logged *runs;
static size_t nruns;

static void merge_log(void)
{
	struct logged *v = malloc((log_n ? log_n : 1) * sizeof(*v));
	size_t i = 0;

	runs = calloc(log_n ? log_n : 1, sizeof(*runs));
	if (!v || !runs)
		abort();
	memcpy(v, log_v, log_n * sizeof(*v));
	qsort(v, log_n, sizeof(*v), by_addr);
	while (i < log_n) {
		uint64_t lo = v[i].addr, hi = v[i].addr + v[i].len;
		size_t j = i;
		uint8_t *buf;

		while (j < log_n && v[j].addr <= hi) {
			if (v[j].addr + v[j].len > hi)
				hi = v[j].addr + v[j].len;
			j++;
		}
		buf = calloc(1, hi - lo);
		if (!buf)
			abort();
		/* in reverse log order, so that the first read of a byte is what stays */
		for (size_t k = log_n; k-- > 0;)
			if (log_v[k].addr >= lo && log_v[k].addr < hi)
				memcpy(buf + (log_v[k].addr - lo), log_v[k].data, log_v[k].len);
		runs[nruns++] = (struct logged){ lo, hi - lo, buf };
		i = j;
	}
	free(v);
}

/*
 * The image as the fuzz target reads it: the header, a segment of length 0 at every page the
 * reads touched (so each stays mapped), then the bytes whose chunk is kept (keep[run][byte / CHUNK]).
 */
#define CHUNK_MIN 8

static void put_seg(struct prs_buf *b, uint64_t addr, const uint8_t *d, uint32_t len)
{
	if (prs_buf_append(b, &addr, 8) || prs_buf_append(b, &len, 4) || prs_buf_append(b, d, len))
		abort();
}

static void build_image(struct prs_buf *b, const struct py_mem_hdr *h, uint8_t **keep)
{
	prs_buf_reset(b);
	if (prs_buf_append(b, h, PY_MEM_HDR))
		abort();
	for (size_t r = 0; r < nruns; r++)
		for (uint64_t pg = runs[r].addr & ~4095ull; pg < runs[r].addr + runs[r].len; pg += 4096)
			put_seg(b, pg < runs[r].addr ? runs[r].addr : pg, NULL, 0);
	for (size_t r = 0; r < nruns; r++) {
		size_t i = 0, n = runs[r].len;

		while (i < n) {
			size_t j;

			if (!keep[r][i / CHUNK_MIN]) {
				i = (i / CHUNK_MIN + 1) * CHUNK_MIN;
				continue;
			}
			for (j = i; j < n && keep[r][j / CHUNK_MIN]; j++)
				;
			put_seg(b, runs[r].addr + i, runs[r].data + i, (uint32_t)(j - i));
			i = j;
		}
	}
}

/* True if the image with keep still reads as the original did. */
static bool same(const struct py_mem_hdr *h, uint8_t **keep, const struct prs_buf *want,
		 struct prs_buf *img, struct prs_buf *sig)
{
	build_image(img, h, keep);
	prs_buf_reset(sig);
	py_mem_run(img->data, img->len, sig);
	return sig->len == want->len && memcmp(sig->data, want->data, sig->len) == 0;
}

/* Drops every chunk (of `chunk` bytes, a multiple of CHUNK_MIN) whose bytes the reading does not
 * depend on: zeros in their place read the same. Greedy, one chunk at a time. */
static void shrink(const struct py_mem_hdr *h, uint8_t **keep, size_t chunk, const struct prs_buf *want)
{
	struct prs_buf img, sig;

	prs_buf_init(&img);
	prs_buf_init(&sig);
	for (size_t r = 0; r < nruns; r++)
		for (size_t i = 0; i < runs[r].len; i += chunk) {
			size_t lo = i / CHUNK_MIN, hi = (i + chunk + CHUNK_MIN - 1) / CHUNK_MIN, k;
			uint8_t saved[64];
			bool any = false;

			if (hi > (runs[r].len + CHUNK_MIN - 1) / CHUNK_MIN)
				hi = (runs[r].len + CHUNK_MIN - 1) / CHUNK_MIN;
			for (k = lo; k < hi; k++) {
				saved[k - lo] = keep[r][k];
				any |= keep[r][k];
				keep[r][k] = 0;
			}
			if (any && !same(h, keep, want, &img, &sig))
				for (k = lo; k < hi; k++)
					keep[r][k] = saved[k - lo];
		}
	prs_buf_release(&img);
	prs_buf_release(&sig);
}

static void write_seed(const char *path, const struct py_mem_hdr *h)
{
	struct prs_buf want, img, sig;
	uint8_t **keep = calloc(nruns ? nruns : 1, sizeof(*keep));
	FILE *f;

	prs_buf_init(&want);
	prs_buf_init(&img);
	prs_buf_init(&sig);
	for (size_t r = 0; r < nruns; r++) {
		keep[r] = malloc(runs[r].len / CHUNK_MIN + 1);
		memset(keep[r], 1, runs[r].len / CHUNK_MIN + 1);
	}
	build_image(&img, h, keep);
	py_mem_run(img.data, img.len, &want);
	fprintf(stderr, "%s", (const char *)want.data);
	if (!same(h, keep, &want, &img, &sig)) {
		fprintf(stderr, "py_seed: replaying the image twice does not read the same\n");
		exit(1);
	}
	shrink(h, keep, 512, &want);
	shrink(h, keep, 64, &want);
	shrink(h, keep, CHUNK_MIN, &want);
	build_image(&img, h, keep);
	f = fopen(path, "wbe");
	if (!f || fwrite(img.data, 1, img.len, f) != img.len || fclose(f) != 0) {
		fprintf(stderr, "py_seed: %s: %s\n", path, strerror(errno));
		exit(1);
	}
	fprintf(stderr, "py_seed: %s: %zu bytes\n", path, img.len);
}

int main(int argc, char **argv)
{
	struct prs_memreader logger = { log_read, log_readv, NULL };
	struct py_mem_hdr h;
	struct prs_profile *p;
	struct prs_py *py;
	struct prs_err err;
	pid_t pid;

	if (argc != 3) {
		fprintf(stderr, "usage: py_seed PID OUT\n");
		return 2;
	}
	pid = (pid_t)atoi(argv[1]);
	if (prs_py_open(pid, NULL, &py, &err) != 0) {
		fprintf(stderr, "py_seed: %s\n", err.msg);
		return 1;
	}
	inner = py->mr;
	py->mr = logger;
	py->pc.mr = logger;
	memset(&h, 0, sizeof(h));
	memcpy(h.magic, PY_MEM_MAGIC, 4);
	h.minor = (uint8_t)(py->version_hex >> 16);
	h.flags = strcmp(py->layout_source, "debug-offsets") == 0 ? PY_MEM_DEBUG_OFFSETS : 0;
	h.version_hex = py->version_hex;
	h.runtime = py->walk.runtime;
	h.interp_head_var = py->walk.interp_head_var;
	h.tstate_current_var = py->walk.tstate_current_var;
	h.code_type = py->code_type;
	h.str_type = py->str_type;
	h.bytes_type = py->bytes_type;
	h.dict_type = py->dict_type;
	h.long_type = py->long_type;
	h.module_type = py->module_type;
	h.eval_lo = py->neval ? py->eval_lo[0] : 0;
	h.eval_hi = py->neval ? py->eval_hi[0] : 0;
	h.interp_lo = py->ninterp ? py->interp_lo[0] : 0;
	h.interp_hi = py->ninterp ? py->interp_hi[0] : 0;
	for (int k = 0; k < PY_MEM_NPCS; k++) /* innermost first: C code, then eval frames */
		h.pcs[k] = k == 0 ? 0x7f0000001234ull : k % 2 ? h.eval_lo + 16 * (uint64_t)k : h.interp_lo + 64;
	if (h.flags & PY_MEM_DEBUG_OFFSETS) {
		uint8_t dbg[1024];

		log_read(NULL, h.runtime, dbg, sizeof(dbg));
	}
	p = prs_profile_new();
	kill(pid, SIGSTOP);
	py_mem_exercise(py, p, &h, NULL);
	kill(pid, SIGCONT);
	h.tid_off = py->walk.tid_off; /* calibrated while sampling (≤3.10) */
	merge_log();
	write_seed(argv[2], &h);
	fprintf(stderr, "py_seed: python %s (%s), %zu reads, %zu samples of %u frames\n", py->version,
		py->layout_source, log_n, (size_t)py->st.samples, p->nframes);
	prs_profile_free(p);
	prs_py_free(py);
	return 0;
}
