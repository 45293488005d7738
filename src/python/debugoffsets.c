/* SPDX-License-Identifier: MIT */
/*
 * 3.13+: builds a layout row from the target's own _Py_DebugOffsets (the first member of
 * _PyRuntime, cookie "xdebugpy"), so a new CPython needs no new table row. The position of each
 * field inside _Py_DebugOffsets is itself per minor version (generated from the headers, see
 * layouts.gen.c); a newer version than the newest known one is parsed with the newest known
 * positions and must then pass the same validation as any other target (prs_py_open).
 * What the debug offsets do not carry (_co_firsttraceable, the owner enum, the str state bits,
 * sizeof(PyCompactUnicodeObject)) comes from the base row, as offsets relative to fields they do carry;
 * co_version only from a base row of the same minor version.
 */
#include "python/python-internal.h"

#include <errno.h>
#include <string.h>

#include "util/banned.h"

/* off (absent when negative) and the width bytes after it lie inside the first head bytes. */
static bool in(int32_t off, int32_t width, int64_t head)
{
	return off < 0 || (int64_t)off + width <= head;
}

/* The heads the reader copies of each object, and the buffers they go to (sample.c,
 * threadnames.c): a frame min(size, 256), a thread state 4096, a code object min(size,
 * PRS_PY_CODE_HDR), a bytes object bytes_sval <= 64 (24 for co_code's), a str
 * str_compact_size <= 88; for thread names, dicts, keys, modules and ints <= 64, a type <= 1024,
 * and an object's window from 32 bytes before it, 96 long. */
static bool frames_fit(const struct prs_py_layout *L)
{
	int64_t frame = L->frame_size < 256 ? L->frame_size : 256;
	int64_t code = L->code_size < PRS_PY_CODE_HDR ? L->code_size : PRS_PY_CODE_HDR;
	int64_t ts = 4096, ascii = L->str_ascii_size;

	return in(L->frame_back, 8, frame) && in(L->frame_code, 8, frame) && in(L->frame_instr, 8, frame) &&
	       in(L->frame_lasti, 4, frame) && in(L->frame_owner, 1, frame) && in(L->frame_is_entry, 1, frame) &&
	       in(L->tstate_next, 8, ts) && in(L->tstate_interp, 8, ts) && in(L->tstate_thread_id, 8, ts) &&
	       in(L->tstate_native_thread_id, 4, ts) && in(L->tstate_frame, 8, ts) &&
	       in(L->tstate_cframe, 8, ts) && in(L->tstate_current_frame, 8, ts) &&
	       in(L->ob_type, 8, code) && in(L->ob_size, 8, code) && in(L->code_name, 8, code) &&
	       in(L->code_filename, 8, code) && in(L->code_qualname, 8, code) &&
	       in(L->code_linetable, 8, code) && in(L->code_code, 8, code) &&
	       in(L->code_firstlineno, 4, code) && in(L->code_firsttraceable, 4, code) &&
	       in(L->code_version, 4, code) &&
	       L->bytes_sval >= 0 && L->bytes_sval <= 64 && in(L->ob_type, 8, L->bytes_sval) &&
	       in(L->ob_size, 8, L->bytes_sval) && in(L->ob_size, 8, 24) &&
	       L->str_compact_size >= 0 && L->str_compact_size <= 88 && ascii >= 0 &&
	       ascii <= L->str_compact_size && in(L->ob_type, 8, ascii) && in(L->str_length, 16, ascii) &&
	       in(L->str_state, 4, ascii) && L->str_kind_shift >= 0 && L->str_kind_shift < 29 &&
	       L->str_compact_bit >= 0 && L->str_compact_bit < 32 && L->str_ascii_bit >= 0 &&
	       L->str_ascii_bit < 32;
}

static bool names_fit(const struct prs_py_layout *L)
{
	int64_t type = (int64_t)L->ht_cached_keys + 8, lng = (int64_t)L->long_digit + 12;
	int64_t dict = (int64_t)L->dict_values + 8;

	return dict <= 64 && in(L->ob_type, 8, dict) && in(L->dict_keys, 8, dict) &&
	       L->dk_indices >= 0 && L->dk_indices <= 64 && in(L->dk_nentries, 8, L->dk_indices) &&
	       in(L->dk_size, 8, L->dk_indices) && in(L->dk_log2_size, 1, L->dk_indices) &&
	       in(L->dk_log2_index_bytes, 1, L->dk_indices) && in(L->dk_kind, 1, L->dk_indices) &&
	       L->dict_entry_size >= 24 && (L->dict_uentry_size < 0 || L->dict_uentry_size >= 16) &&
	       L->module_dict >= 0 && L->module_dict + 8 <= 64 && in(L->ob_type, 8, L->module_dict + 8) &&
	       type <= 1024 && in(L->tp_flags, 8, type) && in(L->tp_basicsize, 8, type) &&
	       in(L->tp_dictoffset, 8, type) && in(L->tp_name, 8, type) &&
	       lng <= 64 && in(L->ob_type, 8, lng) && in(L->long_tag, 8, lng) && in(L->long_size, 8, lng) &&
	       L->long_shift > 0 && L->long_shift < 64 && in(L->ob_type, 8, 96 - 32);
}

bool prs_py_layout_check(const struct prs_py_layout *L)
{
	return frames_fit(L) && (L->interp_modules < 0 || names_fit(L));
}

static bool get(const uint8_t *dbg, size_t len, int32_t pos, uint64_t bound, int32_t *out)
{
	uint64_t v;

	if (pos < 0 || (size_t)pos + 8 > len)
		return false;
	memcpy(&v, dbg + pos, 8);
	if (v >= bound)
		return false;
	*out = (int32_t)v;
	return true;
}

int prs_py_layout_from_debug_offsets(const uint8_t *dbg, size_t len, const struct prs_py_layout *base,
				     struct prs_py_layout *L)
{
	const struct prs_py_dbg_layout *D = NULL;
	uint64_t version, ft;
	int32_t gil_state = 0, locked = 0, holder = 0;
	unsigned i;
	bool ok = true;
	const uint64_t BIG = 1u << 24, OBJ = 4096;

	if (len < 24 || memcmp(dbg, "xdebugpy", 8))
		return -ENOTSUP;
	memcpy(&version, dbg + 8, 8);
	memcpy(&ft, dbg + 16, 8);
	if (version >> 24 != 3 || ft != 0) /* free-threaded builds: TODO(#3) object header of 32 bytes */
		return -ENOTSUP;
	for (i = 0; i < prs_py_ndbg_layouts; i++) {
		const struct prs_py_dbg_layout *c = &prs_py_dbg_layouts[i];

		/* the row of this minor version, else the newest older one */
		if ((c->version_hex >> 16) <= (version >> 16) && (!D || c->version_hex > D->version_hex))
			D = c;
	}
	if (!D || (size_t)D->struct_size > len)
		return -ENOTSUP;
	*L = *base;
	L->version_hex = (uint32_t)version;
	ok &= get(dbg, len, D->runtime_size, BIG, &L->runtime_size);
	ok &= get(dbg, len, D->runtime_interp_head, BIG, &L->runtime_interp_head);
	L->runtime_interp_main = -1;
	L->runtime_gil = L->runtime_tstate_current = -1;
	ok &= get(dbg, len, D->interp_next, BIG, &L->interp_next);
	ok &= get(dbg, len, D->interp_tstate_head, BIG, &L->interp_tstate_head);
	ok &= get(dbg, len, D->interp_gil_ptr, BIG, &L->interp_gil_ptr);
	ok &= get(dbg, len, D->gil_runtime_state, BIG, &gil_state);
	ok &= get(dbg, len, D->gil_locked, BIG, &locked);
	ok &= get(dbg, len, D->gil_holder, BIG, &holder);
	ok &= get(dbg, len, D->tstate_size, OBJ, &L->tstate_size);
	ok &= get(dbg, len, D->tstate_next, OBJ, &L->tstate_next);
	ok &= get(dbg, len, D->tstate_interp, OBJ, &L->tstate_interp);
	ok &= get(dbg, len, D->tstate_current_frame, OBJ, &L->tstate_current_frame);
	ok &= get(dbg, len, D->tstate_thread_id, OBJ, &L->tstate_thread_id);
	ok &= get(dbg, len, D->tstate_native_thread_id, OBJ, &L->tstate_native_thread_id);
	L->tstate_frame = L->tstate_cframe = L->cframe_current_frame = -1;
	ok &= get(dbg, len, D->frame_size, OBJ, &L->frame_size);
	ok &= get(dbg, len, D->frame_back, OBJ, &L->frame_back);
	ok &= get(dbg, len, D->frame_code, OBJ, &L->frame_code);
	ok &= get(dbg, len, D->frame_instr, OBJ, &L->frame_instr);
	ok &= get(dbg, len, D->frame_owner, OBJ, &L->frame_owner);
	L->frame_is_entry = L->frame_lasti = -1;
	ok &= get(dbg, len, D->code_size, OBJ, &L->code_size);
	ok &= get(dbg, len, D->code_filename, OBJ, &L->code_filename);
	ok &= get(dbg, len, D->code_name, OBJ, &L->code_name);
	ok &= get(dbg, len, D->code_qualname, OBJ, &L->code_qualname);
	ok &= get(dbg, len, D->code_linetable, OBJ, &L->code_linetable);
	ok &= get(dbg, len, D->code_firstlineno, OBJ, &L->code_firstlineno);
	ok &= get(dbg, len, D->code_adaptive, OBJ, &L->code_adaptive);
	/* _co_firsttraceable is not in the debug offsets: keep its distance to co_code_adaptive */
	if (base->code_firsttraceable >= 0 && base->code_adaptive >= 0)
		L->code_firsttraceable = L->code_adaptive - (base->code_adaptive - base->code_firsttraceable);
	/* co_version is not in the debug offsets either, and a wrong position would make the cache
	 * trust a reused code object: used only when the base row is of this very minor version */
	if ((base->version_hex >> 16) != (uint32_t)(version >> 16))
		L->code_version = -1;
	ok &= get(dbg, len, D->ob_type, OBJ, &L->ob_type);
	ok &= get(dbg, len, D->tp_name, OBJ, &L->tp_name);
	ok &= get(dbg, len, D->bytes_size, OBJ, &L->ob_size);
	ok &= get(dbg, len, D->bytes_sval, OBJ, &L->bytes_sval);
	ok &= get(dbg, len, D->str_state, OBJ, &L->str_state);
	ok &= get(dbg, len, D->str_length, OBJ, &L->str_length);
	ok &= get(dbg, len, D->str_ascii_size, OBJ, &L->str_ascii_size);
	/* thread names: what the debug offsets carry; the dict keys, module and heap-type fields come
	 * from the base row */
	ok &= get(dbg, len, D->interp_modules, BIG, &L->interp_modules);
	ok &= get(dbg, len, D->tp_flags, OBJ, &L->tp_flags);
	ok &= get(dbg, len, D->dict_keys, OBJ, &L->dict_keys);
	ok &= get(dbg, len, D->dict_values, OBJ, &L->dict_values);
	if (base->long_tag >= 0) {
		ok &= get(dbg, len, D->long_tag, OBJ, &L->long_tag);
		ok &= get(dbg, len, D->long_digit, OBJ, &L->long_digit);
	}
	if (!ok || locked < gil_state || holder < gil_state || L->code_adaptive < L->code_firstlineno)
		return -ENOTSUP;
	L->str_compact_size = L->str_ascii_size + (base->str_compact_size - base->str_ascii_size);
	L->gil_locked = locked - gil_state;
	L->gil_last_holder = holder - gil_state;
	/* the GIL's futex words [cond, end of the struct) are not in the debug offsets: keep their
	 * distance to locked */
	if (base->gil_cond >= 0 && base->gil_locked >= 0) {
		L->gil_cond = L->gil_locked + (base->gil_cond - base->gil_locked);
		L->gil_size = L->gil_locked + (base->gil_size - base->gil_locked);
	}
	/* offsets the target chose: each must fall inside what the reader copies of its object;
	 * where those of the thread names do not, they are not read (the frames still are) */
	if (!names_fit(L))
		L->interp_modules = -1;
	return prs_py_layout_check(L) ? 0 : -ENOTSUP;
}
