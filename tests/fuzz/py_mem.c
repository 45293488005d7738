/* SPDX-License-Identifier: MIT */
/* The CPython fuzz target's image reader and calls (py_mem.h), shared with its seed recorder. */
#include "py_mem.h"

#include <errno.h>
#include <string.h>

#include "pyrsprof/profile.h"
#include "pyrsprof/util.h"
#include "python/python-internal.h"

#include "util/banned.h"

#define MAX_SEGS 8192
#define MAX_THREADS 8
#define PAGE 4096ull

struct seg {
	uint64_t addr;
	const uint8_t *data;
	uint32_t len;
};

static struct seg segs[MAX_SEGS];
static size_t nsegs;

static bool page_mapped(uint64_t page)
{
	for (size_t i = 0; i < nsegs; i++) {
		uint64_t lo = segs[i].addr & ~(PAGE - 1), hi = segs[i].addr + segs[i].len;

		if (page >= lo && (page < hi || page == lo))
			return true;
	}
	return false;
}

static int img_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	uint64_t end = addr + len;

	(void)ctx;
	if (end < addr)
		return -EFAULT;
	for (uint64_t pg = addr & ~(PAGE - 1); pg < end; pg += PAGE)
		if (!page_mapped(pg))
			return -EFAULT;
	memset(buf, 0, len);
	/* later segments first, so that the first segment holding a byte wins */
	for (size_t i = nsegs; i-- > 0;) {
		uint64_t lo = segs[i].addr > addr ? segs[i].addr : addr;
		uint64_t hi = segs[i].addr + segs[i].len < end ? segs[i].addr + segs[i].len : end;

		if (lo < hi)
			memcpy((uint8_t *)buf + (lo - addr), segs[i].data + (lo - segs[i].addr), hi - lo);
	}
	return 0;
}

static int img_readv(void *ctx, struct prs_memvec *v, size_t n)
{
	int ok = 0;

	for (size_t i = 0; i < n; i++) {
		v[i].res = img_read(ctx, v[i].addr, v[i].buf, v[i].len);
		ok += v[i].res == 0;
	}
	return ok;
}

static void load_segments(const uint8_t *d, size_t size)
{
	nsegs = 0;
	while (size >= 12 && nsegs < MAX_SEGS) {
		uint64_t addr;
		uint32_t len;

		memcpy(&addr, d, 8);
		memcpy(&len, d + 8, 4);
		d += 12;
		size -= 12;
		if (len > size)
			len = (uint32_t)size;
		if (addr + len < addr)
			len = (uint32_t)(UINT64_MAX - addr);
		segs[nsegs++] = (struct seg){ addr, d, len };
		d += len;
		size -= len;
	}
}

static void sig_thread(struct prs_buf *sig, const struct prs_profile *p, const struct prs_py_thread *t,
		       uint32_t name)
{
	prs_buf_printf(sig, "thread %d %llx gil %d trunc %d kept %d name '%s' frames %u\n", t->tid,
		       (unsigned long long)t->thread_id, t->holds_gil, t->truncated, t->kept,
		       p->strings[name], t->nframes);
	for (uint32_t k = 0; k < t->nframes; k++) {
		const struct prs_frame *f = &p->frames[t->frames[k]];

		prs_buf_printf(sig, "  %s %s:%u %x\n", p->strings[f->name], p->strings[f->file], f->line,
			       t->fflags[k]);
	}
}

void py_mem_exercise(struct prs_py *py, struct prs_profile *p, const struct py_mem_hdr *h,
		     struct prs_buf *sig)
{
	static struct prs_py_thread th[MAX_THREADS];
	uint32_t native[PY_MEM_NPCS], merged[PRS_MAX_STACK_FRAMES];
	struct prs_py_stats st;
	struct prs_err err;
	int n = 0;

	for (int k = 0; k < PY_MEM_NPCS; k++)
		native[k] = prs_profile_raw_frame(p, PRS_NO_MAPPING, h->pcs[k], k == 0);
	for (int round = 0; round < 2; round++) {
		uint64_t now = (uint64_t)(round + 1) * 3000000000ull;
		int rc = prs_py_sample(py, p, th, MAX_THREADS, &n, &err), names = 0;

		if (rc)
			n = 0;
		if (prs_py_names_due(py, now))
			names = prs_py_read_thread_names(py, p, now);
		if (sig)
			prs_buf_printf(sig, "sample %d: %d threads; names %d\n", rc, n, names);
		for (int i = 0; i < n; i++) {
			uint32_t name = prs_py_thread_name(py, p, th[i].thread_id);
			size_t m = prs_py_merge(py, h->pcs, native, PY_MEM_NPCS, &th[i], 0, merged,
						PRS_MAX_STACK_FRAMES);

			m += prs_py_merge(py, h->pcs, native, PY_MEM_NPCS, &th[i], PRS_PY_NATIVE_ALL, merged, 64);
			if (sig) {
				sig_thread(sig, p, &th[i], name);
				prs_buf_printf(sig, "  merged %zu\n", m);
			}
		}
		prs_py_warm(py);
	}
	prs_py_get_stats(py, &st);
	if (sig)
		prs_buf_printf(sig, "bad %llu lines %llu cycles %llu truncated %llu retries %llu mismatch %llu\n",
			       (unsigned long long)st.bad_frames, (unsigned long long)st.bad_lines,
			       (unsigned long long)st.cycles, (unsigned long long)st.truncated,
			       (unsigned long long)st.retries, (unsigned long long)st.merge_mismatch);
}

void py_mem_run(const uint8_t *data, size_t size, struct prs_buf *sig)
{
	struct prs_memreader mr = { img_read, img_readv, NULL };
	const struct prs_py_layout *row;
	struct prs_py_layout dl;
	struct py_mem_hdr h;
	struct prs_profile *p;
	struct prs_py *py;

	if (size < PY_MEM_HDR)
		return;
	memcpy(&h, data, PY_MEM_HDR);
	if (memcmp(h.magic, PY_MEM_MAGIC, 4) != 0)
		return;
	row = prs_py_layout_find(3, h.minor);
	if (!row)
		return;
	load_segments(data + PY_MEM_HDR, size - PY_MEM_HDR);
	if ((h.flags & PY_MEM_DEBUG_OFFSETS) && h.minor >= 13) {
		uint8_t dbg[1024];

		if (img_read(NULL, h.runtime, dbg, sizeof(dbg)) != 0 ||
		    prs_py_layout_from_debug_offsets(dbg, sizeof(dbg), row, &dl) != 0)
			return;
		row = &dl;
	}
	/* prs_py_open takes the row and the version from the same place: the walker's version
	 * checks and the row agree */
	h.version_hex = 0x03000000u | (uint32_t)h.minor << 16 | (h.version_hex & 0xffff);
	if (prs_py_new_raw(row, &mr, h.version_hex, &py) != 0)
		return;
	py->walk.runtime = row->runtime_interp_head >= 0 ? h.runtime : 0;
	py->walk.interp_head_var = h.interp_head_var;
	py->walk.tstate_current_var = h.tstate_current_var;
	py->code_type = h.code_type;
	py->str_type = h.str_type;
	py->bytes_type = h.bytes_type;
	py->dict_type = h.dict_type;
	py->long_type = h.long_type;
	py->module_type = h.module_type;
	py->walk.tid_off = h.tid_off >= 0 && h.tid_off < 4096 ? h.tid_off : -1;
	py->eval_lo[0] = h.eval_lo;
	py->eval_hi[0] = h.eval_hi;
	py->neval = 1;
	py->interp_lo[0] = h.interp_lo;
	py->interp_hi[0] = h.interp_hi;
	py->ninterp = 1;
	prs_py_set_stopped(py, h.flags & PY_MEM_STOPPED);
	p = prs_profile_new();
	if (p)
		py_mem_exercise(py, p, &h, sig);
	prs_py_free(py);
	prs_profile_free(p);
}
