/* SPDX-License-Identifier: MIT */
/*
 * Per-version CPython struct layouts (x86_64): byte offsets and sizes of the fields the reader
 * walks, -1 where a version has no such field. Rows for 3.6-3.13 are generated from each
 * version's headers into layouts.gen.c (tools/gen-layouts); for 3.13+ the reader builds a row from
 * the target's own _Py_DebugOffsets (debugoffsets.c), so newer versions need no table row.
 */
#ifndef PYRSPROF_PYTHON_LAYOUT_H
#define PYRSPROF_PYTHON_LAYOUT_H

#include <stdint.h>

struct prs_py_layout {
	uint32_t version_hex; /* PY_VERSION_HEX of the headers (only major.minor is matched) */
	/* _PyRuntimeState (3.7+) */
	int32_t runtime_size, runtime_interp_head, runtime_interp_main;
	int32_t runtime_gil;            /* embedded struct _gil_runtime_state, 3.7-3.11 */
	int32_t runtime_tstate_current; /* gilstate.tstate_current, 3.7-3.11 */
	/* PyInterpreterState */
	int32_t interp_next, interp_tstate_head;
	int32_t interp_gil_ptr;         /* ceval.gil (a pointer), 3.12+ */
	int32_t gil_locked, gil_last_holder; /* inside struct _gil_runtime_state */
	int32_t gil_cond, gil_size;     /* its cond (the first futex word of the struct) and its size:
					 * waiters sleep in [cond, size), 3.7+ (python/gil.c) */
	/* PyThreadState */
	int32_t tstate_size, tstate_next, tstate_interp, tstate_thread_id, tstate_native_thread_id;
	int32_t tstate_frame;           /* PyFrameObject *, <= 3.10 */
	int32_t tstate_cframe, cframe_current_frame; /* 3.11, 3.12 */
	int32_t tstate_current_frame;   /* 3.13+ */
	/* PyFrameObject (<= 3.10) or _PyInterpreterFrame (3.11+) */
	int32_t frame_size, frame_back, frame_code;
	int32_t frame_lasti;            /* <= 3.10: int f_lasti */
	int32_t frame_instr;            /* 3.11/3.12 prev_instr, 3.13+ instr_ptr */
	int32_t frame_owner, frame_is_entry; /* 3.11+ owner (char); 3.11 is_entry (bool) */
	int32_t owner_generator, owner_cstack; /* enum values; owner >= 3 is never a Python frame */
	/* PyCodeObject */
	int32_t code_size, code_name, code_filename, code_firstlineno, code_qualname;
	int32_t code_linetable;         /* co_lnotab <= 3.9, co_linetable 3.10+ */
	int32_t code_adaptive, code_firsttraceable; /* 3.11+ */
	int32_t code_code;              /* co_code (bytes) <= 3.10 */
	int32_t code_version;           /* uint32_t co_version, 3.12+: a new value for every code object
					 * created (0 once the counter is spent) */
	/* objects and strings */
	int32_t ob_type, ob_size, tp_name, bytes_sval;
	int32_t str_length, str_state, str_ascii_size, str_compact_size;
	int32_t str_kind_shift, str_compact_bit, str_ascii_bit;
	/* thread names (threadnames.c): sys.modules -> threading -> _active -> Thread._name */
	int32_t interp_modules;         /* PyInterpreterState: modules, 3.12+ imports.modules */
	int32_t module_dict;            /* PyModuleObject.md_dict */
	int32_t dict_keys, dict_values; /* PyDictObject.ma_keys, ma_values */
	int32_t dk_size;                /* PyDictKeysObject: Py_ssize_t dk_size, <= 3.10 */
	int32_t dk_log2_size, dk_log2_index_bytes, dk_kind; /* uint8_t each, 3.11+ */
	int32_t dk_nentries, dk_indices;
	int32_t dict_entry_size;        /* PyDictKeyEntry {hash, key, value} */
	int32_t dict_uentry_size;       /* PyDictUnicodeEntry {key, value}, 3.11+ (dk_kind != 0) */
	int32_t dict_values_values;     /* offsetof(PyDictValues, values), 3.11+; before, a PyObject *[] */
	int32_t dict_values_capacity, dict_values_valid; /* uint8_t each, 3.13+ (inline values) */
	int32_t long_size;              /* signed digit count (ob_size), <= 3.11 */
	int32_t long_tag;               /* lv_tag (digits << 3 | sign), 3.12+ */
	int32_t long_digit, long_shift; /* first digit; bits per digit */
	int32_t tp_flags, tp_basicsize, tp_dictoffset, ht_cached_keys;
	int32_t managed_dict;           /* 0: dict at tp_dictoffset; 1: 3.11, 2: 3.12, 3: 3.13 (see threadnames.c) */
	int32_t managed_dict_back;      /* the managed dict pointer is at obj - this */
	int32_t flag_managed_dict, flag_inline_values; /* tp_flags bits (0 = none) */
};

/* Byte positions of fields inside a version's _Py_DebugOffsets (each holds a u64 offset/size). */
struct prs_py_dbg_layout {
	uint32_t version_hex;
	int32_t struct_size, version, free_threaded, runtime_size, runtime_interp_head;
	int32_t interp_next, interp_tstate_head, interp_gil_ptr, gil_runtime_state, gil_locked, gil_holder;
	int32_t tstate_size, tstate_next, tstate_interp, tstate_current_frame, tstate_thread_id,
		tstate_native_thread_id;
	int32_t frame_size, frame_back, frame_code, frame_instr, frame_owner;
	int32_t code_size, code_filename, code_name, code_qualname, code_linetable, code_firstlineno,
		code_adaptive;
	int32_t ob_type, tp_name, bytes_size, bytes_sval, str_state, str_length, str_ascii_size;
	int32_t interp_modules, tp_flags, dict_keys, dict_values, long_tag, long_digit;
};

extern const struct prs_py_dbg_layout prs_py_dbg_layouts[];
extern const unsigned prs_py_ndbg_layouts;

/* The generated table (layouts.gen.c). */
extern const struct prs_py_layout prs_py_layouts[];
extern const unsigned prs_py_nlayouts;

/* The generated row for major.minor, or NULL. */
const struct prs_py_layout *prs_py_layout_find(unsigned major, unsigned minor);

#endif
