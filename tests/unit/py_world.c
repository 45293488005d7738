/* SPDX-License-Identifier: MIT */
/* A CPython world of any layout row on the test image (see py_world.h). */
#include "py_world.h"

#include <criterion/criterion.h>
#include <string.h>

#include "py_image.h"
#include "python/python-internal.h"

#include "util/banned.h"

void world_init(struct world *w, unsigned minor)
{
	const struct prs_py_layout *L = prs_py_layout_find(3, minor);
	uint64_t tp;

	cr_assert(L, "no generated row for 3.%u", minor);
	memset(w, 0, sizeof(*w));
	w->L = L;
	w->minor = minor;
	img.L = L;
	w->t_code = img_alloc(512);
	w->t_str = img_alloc(512);
	w->t_bytes = img_alloc(512);
	img.str_type = w->t_str;
	tp = img_mkstr("code");
	img_put64(w->t_code + L->tp_name, tp);
	if (L->runtime_interp_head >= 0) {
		w->runtime = img_alloc(8192);
	} else {
		w->interp_head_var = img_alloc(16);
		w->tstate_current_var = img_alloc(16);
	}
	prs_pywalk_init(&w->walk, L, L->version_hex);
	w->walk.runtime = w->runtime;
	w->walk.interp_head_var = w->interp_head_var;
	w->walk.tstate_current_var = w->tstate_current_var;
	w->walk.tid_off = minor <= 10 ? WORLD_TID_OFF : -1;
}

void world_fresh(struct world *w, unsigned minor, const struct prs_memreader *mr, struct prs_py **py,
		 struct prs_profile **prof)
{
	struct prs_py *r = NULL;

	prs_py_free(*py);
	prs_profile_free(*prof);
	*py = NULL;
	img_clear();
	world_init(w, minor);
	cr_assert_eq(prs_py_new_raw(w->L, mr, w->L->version_hex, &r), 0);
	r->walk.runtime = w->runtime;
	r->walk.interp_head_var = w->interp_head_var;
	r->walk.tstate_current_var = w->tstate_current_var;
	r->walk.tid_off = w->walk.tid_off;
	r->code_type = w->t_code;
	r->str_type = w->t_str;
	r->bytes_type = w->t_bytes;
	*py = r;
	*prof = prs_profile_new();
	cr_assert(*prof);
}

/* The address of the pointer that links to the next of a list whose head is at *head. */
static uint64_t list_tail(uint64_t head_slot, int32_t next_off)
{
	uint64_t slot = head_slot;

	while (img_get64(slot))
		slot = img_get64(slot) + (uint64_t)next_off;
	return slot;
}

uint64_t world_interp(struct world *w)
{
	const struct prs_py_layout *L = w->L;
	uint64_t in = img_alloc(8192);

	img_put64(list_tail(w->runtime ? w->runtime + L->runtime_interp_head : w->interp_head_var, L->interp_next), in);
	if (L->interp_gil_ptr >= 0)
		img_put64(in + L->interp_gil_ptr, img_alloc(256));
	return in;
}

uint64_t world_thread(struct world *w, uint64_t interp, int32_t tid)
{
	const struct prs_py_layout *L = w->L;
	uint64_t ts = img_alloc((size_t)L->tstate_size);

	img_put64(list_tail(interp + L->interp_tstate_head, L->tstate_next), ts);
	img_put64(ts + L->tstate_interp, interp);
	if (L->tstate_native_thread_id >= 0) {
		img_put64(ts + L->tstate_thread_id, 0x7f0000000000ull + (uint64_t)tid * 0x1000);
		img_put32(ts + L->tstate_native_thread_id, (uint32_t)tid);
	} else {
		uint64_t pt = img_alloc(WORLD_TID_OFF + 64);

		img_put32(pt + WORLD_TID_OFF, (uint32_t)tid);
		img_put64(ts + L->tstate_thread_id, pt);
	}
	if (L->tstate_cframe >= 0)
		img_put64(ts + L->tstate_cframe, img_alloc(64));
	return ts;
}

void world_gil(struct world *w, uint64_t interp, uint64_t tstate)
{
	const struct prs_py_layout *L = w->L;
	uint64_t gil;

	if (w->tstate_current_var) {
		img_put64(w->tstate_current_var, tstate);
		return;
	}
	gil = L->runtime_gil >= 0 ? w->runtime + L->runtime_gil : img_get64(interp + L->interp_gil_ptr);
	img_put32(gil + L->gil_locked, tstate ? 1 : 0);
	img_put64(gil + L->gil_last_holder, tstate);
}

void world_top(struct world *w, uint64_t tstate, uint64_t f)
{
	const struct prs_py_layout *L = w->L;

	if (L->tstate_frame >= 0)
		img_put64(tstate + L->tstate_frame, f);
	else if (L->tstate_current_frame >= 0)
		img_put64(tstate + L->tstate_current_frame, f);
	else
		img_put64(img_get64(tstate + L->tstate_cframe) + L->cframe_current_frame, f);
}

static uint64_t mkbytes(struct world *w, const uint8_t *b, size_t n)
{
	const struct prs_py_layout *L = w->L;
	uint64_t a = img_alloc((size_t)L->bytes_sval + n + 1);

	img_put64(a + L->ob_type, w->t_bytes);
	img_put64(a + L->ob_size, n);
	if (n)
		memcpy(img_at(a + L->bytes_sval), b, n);
	return a;
}

int world_line(const struct world *w, int firstline, unsigned u)
{
	return firstline + (u < 8 ? 1 : 2) + (w->minor >= 11 ? 1 : 0);
}

uint64_t world_code(struct world *w, const char *qual, const char *file, int firstline)
{
	/* ≤3.9 lnotab (bytes): +1 at 0, +1 at 16; 3.10 (bytes): [0,16) +1, [16,32) +1 more;
	 * 3.11+ location table (units): 0-7 +2, 8-15 +1 more */
	static const uint8_t lnotab[] = { 0, 1, 16, 1 }, t310[] = { 16, 1, 16, 1 };
	static const uint8_t loc[] = { 0x80 | (13 << 3) | 7, 4, 0x80 | (13 << 3) | 7, 2 };
	const struct prs_py_layout *L = w->L;
	const char *dot = strrchr(qual, '.');
	uint64_t c = img_alloc((size_t)(L->code_adaptive >= 0 ? L->code_adaptive + 32 : L->code_size));
	uint64_t name = dot ? img_mkstr(dot + 1) : img_mkstr(qual);

	img_put64(c + L->ob_type, w->t_code);
	img_put64(c + L->code_filename, img_mkstr(file));
	img_put32(c + L->code_firstlineno, (uint32_t)firstline);
	if (L->code_qualname >= 0) {
		img_put64(c + L->code_name, name);
		img_put64(c + L->code_qualname, dot ? img_mkstr(qual) : name);
	} else {
		img_put64(c + L->code_name, name);
	}
	if (w->minor <= 9)
		img_put64(c + L->code_linetable, mkbytes(w, lnotab, sizeof(lnotab)));
	else if (w->minor == 10)
		img_put64(c + L->code_linetable, mkbytes(w, t310, sizeof(t310)));
	else
		img_put64(c + L->code_linetable, mkbytes(w, loc, sizeof(loc)));
	if (L->code_code >= 0) {
		uint8_t ops[32] = { 0 };

		img_put64(c + L->code_code, mkbytes(w, ops, sizeof(ops)));
	} else {
		img_put64(c + L->ob_size, 16);
		img_put32(c + L->code_firsttraceable, 0);
	}
	return c;
}

void world_frame_instr(struct world *w, uint64_t f, uint64_t code, int64_t v)
{
	const struct prs_py_layout *L = w->L;

	if (w->minor <= 10)
		img_put32(f + L->frame_lasti, (uint32_t)(int32_t)v);
	else
		img_put64(f + L->frame_instr, code + (uint64_t)L->code_adaptive + (uint64_t)v);
}

uint64_t world_frame(struct world *w, uint64_t code, unsigned unit, uint64_t back, uint8_t owner, bool entry)
{
	const struct prs_py_layout *L = w->L;
	uint64_t f = img_alloc((size_t)L->frame_size);

	img_put64(f + L->frame_code, code);
	img_put64(f + L->frame_back, back);
	if (w->minor <= 10) {
		world_frame_instr(w, f, code, w->minor == 10 ? unit : 2 * unit);
		return f;
	}
	world_frame_instr(w, f, code, 2 * (int64_t)unit);
	img_put8(f + L->frame_owner, owner);
	if (L->frame_is_entry >= 0)
		img_put8(f + L->frame_is_entry, entry);
	return f;
}

int32_t world_off(const struct world *w, unsigned unit)
{
	return w->minor <= 10 ? (int32_t)(2 * unit) : (int32_t)unit;
}
