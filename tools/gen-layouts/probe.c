/* SPDX-License-Identifier: MIT */
/*
 * Layout probe: compiled once per installed CPython against that version's own headers (internal
 * ones included, -DPy_BUILD_CORE), it prints one C initializer of struct prs_py_layout
 * (src/python/layout.h) made of offsetof()/sizeof() values and enum constants. gen.sh collects the
 * output of every version into src/python/layouts.gen.c. Fields a version does not have print -1.
 * This is a host tool: it is never linked into pyrsprof.
 */
#define Py_BUILD_CORE 1
#include <Python.h>
#include <frameobject.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#if PY_VERSION_HEX >= 0x03090000
#include "internal/pycore_pystate.h"
#include "internal/pycore_runtime.h"
#include "internal/pycore_interp.h"
#elif PY_VERSION_HEX >= 0x03080000
#include "internal/pycore_pystate.h"
#elif PY_VERSION_HEX >= 0x03070000
#include "internal/pystate.h"
#endif
#if PY_VERSION_HEX >= 0x030b0000
#include "internal/pycore_frame.h"
#include "internal/pycore_code.h"
#include "internal/pycore_dict.h"
#include "internal/pycore_object.h"
#endif
#if PY_VERSION_HEX >= 0x030a0000
#include "internal/pycore_moduleobject.h"
#endif
#if PY_VERSION_HEX < 0x030b0000
#include <longintrepr.h> /* Python.h includes cpython/longintrepr.h from 3.11 */
#endif

#define P(name, val) printf("\t\t." #name " = %ld,\n", (long)(val))
#define NONE(name) printf("\t\t." #name " = -1,\n")

static unsigned lowbit(unsigned v)
{
	unsigned i;

	for (i = 0; i < 32; i++)
		if (v & (1u << i))
			return i;
	return 99;
}

/* Positions of the _Py_DebugOffsets fields the reader uses, inside that struct (3.13+). */
static int dbg_main(void)
{
#if PY_VERSION_HEX >= 0x030d0000
#define D(name, member) printf("\t\t." #name " = %ld,\n", (long)offsetof(_Py_DebugOffsets, member))
	printf("\t{ /* _Py_DebugOffsets of CPython %s */\n", PY_VERSION);
	printf("\t\t.version_hex = 0x%08lx,\n", (unsigned long)PY_VERSION_HEX);
	P(struct_size, sizeof(_Py_DebugOffsets));
	D(version, version);
	D(free_threaded, free_threaded);
	D(runtime_size, runtime_state.size);
	D(runtime_interp_head, runtime_state.interpreters_head);
	D(interp_next, interpreter_state.next);
	D(interp_tstate_head, interpreter_state.threads_head);
	D(interp_gil_ptr, interpreter_state.ceval_gil);
	D(gil_runtime_state, interpreter_state.gil_runtime_state);
	D(gil_locked, interpreter_state.gil_runtime_state_locked);
	D(gil_holder, interpreter_state.gil_runtime_state_holder);
	D(tstate_size, thread_state.size);
	D(tstate_next, thread_state.next);
	D(tstate_interp, thread_state.interp);
	D(tstate_current_frame, thread_state.current_frame);
	D(tstate_thread_id, thread_state.thread_id);
	D(tstate_native_thread_id, thread_state.native_thread_id);
	D(frame_size, interpreter_frame.size);
	D(frame_back, interpreter_frame.previous);
	D(frame_code, interpreter_frame.executable);
	D(frame_instr, interpreter_frame.instr_ptr);
	D(frame_owner, interpreter_frame.owner);
	D(code_size, code_object.size);
	D(code_filename, code_object.filename);
	D(code_name, code_object.name);
	D(code_qualname, code_object.qualname);
	D(code_linetable, code_object.linetable);
	D(code_firstlineno, code_object.firstlineno);
	D(code_adaptive, code_object.co_code_adaptive);
	D(ob_type, pyobject.ob_type);
	D(tp_name, type_object.tp_name);
	D(bytes_size, bytes_object.ob_size);
	D(bytes_sval, bytes_object.ob_sval);
	D(str_state, unicode_object.state);
	D(str_length, unicode_object.length);
	D(str_ascii_size, unicode_object.asciiobject_size);
	D(interp_modules, interpreter_state.imports_modules);
	D(tp_flags, type_object.tp_flags);
	D(dict_keys, dict_object.ma_keys);
	D(dict_values, dict_object.ma_values);
	D(long_tag, long_object.lv_tag);
	D(long_digit, long_object.ob_digit);
	printf("\t},\n");
#endif
	return 0;
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "dbg"))
		return dbg_main();
	printf("\t{ /* CPython %s, from its headers */\n", PY_VERSION);
	printf("\t\t.version_hex = 0x%08lx,\n", (unsigned long)PY_VERSION_HEX);

	/* ---- runtime and interpreter ---- */
#if PY_VERSION_HEX >= 0x03070000
	P(runtime_size, sizeof(_PyRuntimeState));
	P(runtime_interp_head, offsetof(_PyRuntimeState, interpreters.head));
	P(runtime_interp_main, offsetof(_PyRuntimeState, interpreters.main));
#else
	NONE(runtime_size); NONE(runtime_interp_head); NONE(runtime_interp_main);
#endif
#if PY_VERSION_HEX >= 0x03070000 && PY_VERSION_HEX < 0x030c0000
	P(runtime_gil, offsetof(_PyRuntimeState, ceval.gil));
	P(runtime_tstate_current, offsetof(_PyRuntimeState, gilstate.tstate_current));
#else
	NONE(runtime_gil); NONE(runtime_tstate_current);
#endif
	P(interp_next, offsetof(PyInterpreterState, next));
#if PY_VERSION_HEX >= 0x030b0000
	P(interp_tstate_head, offsetof(PyInterpreterState, threads.head));
#else
	P(interp_tstate_head, offsetof(PyInterpreterState, tstate_head));
#endif
#if PY_VERSION_HEX >= 0x030c0000
	P(interp_gil_ptr, offsetof(PyInterpreterState, ceval.gil));
#else
	NONE(interp_gil_ptr);
#endif
#if PY_VERSION_HEX >= 0x03070000
	P(gil_locked, offsetof(struct _gil_runtime_state, locked));
	P(gil_last_holder, offsetof(struct _gil_runtime_state, last_holder));
	/* the futex words GIL waiters sleep on lie in [cond, end of the struct): cond, mutex,
	 * switch_cond, switch_mutex (src/python/gil.c) */
	P(gil_cond, offsetof(struct _gil_runtime_state, cond));
	P(gil_size, sizeof(struct _gil_runtime_state));
#else
	NONE(gil_locked); NONE(gil_last_holder); NONE(gil_cond); NONE(gil_size);
#endif

	/* ---- thread state ---- */
	P(tstate_size, sizeof(PyThreadState));
	P(tstate_next, offsetof(PyThreadState, next));
	P(tstate_interp, offsetof(PyThreadState, interp));
	P(tstate_thread_id, offsetof(PyThreadState, thread_id));
#if PY_VERSION_HEX >= 0x030b0000
	P(tstate_native_thread_id, offsetof(PyThreadState, native_thread_id));
#else
	NONE(tstate_native_thread_id);
#endif
#if PY_VERSION_HEX < 0x030b0000
	P(tstate_frame, offsetof(PyThreadState, frame));
	NONE(tstate_cframe); NONE(cframe_current_frame); NONE(tstate_current_frame);
#elif PY_VERSION_HEX < 0x030d0000
	NONE(tstate_frame);
	P(tstate_cframe, offsetof(PyThreadState, cframe));
	P(cframe_current_frame, offsetof(_PyCFrame, current_frame));
	NONE(tstate_current_frame);
#else
	NONE(tstate_frame); NONE(tstate_cframe); NONE(cframe_current_frame);
	P(tstate_current_frame, offsetof(PyThreadState, current_frame));
#endif

	/* ---- frames ---- */
#if PY_VERSION_HEX < 0x030b0000
	P(frame_size, sizeof(PyFrameObject));
	P(frame_back, offsetof(PyFrameObject, f_back));
	P(frame_code, offsetof(PyFrameObject, f_code));
	P(frame_lasti, offsetof(PyFrameObject, f_lasti));
	NONE(frame_instr); NONE(frame_owner); NONE(frame_is_entry);
	NONE(owner_generator); NONE(owner_cstack);
#else
	P(frame_size, sizeof(_PyInterpreterFrame));
	P(frame_back, offsetof(_PyInterpreterFrame, previous));
#if PY_VERSION_HEX >= 0x030d0000
	P(frame_code, offsetof(_PyInterpreterFrame, f_executable));
	NONE(frame_lasti);
	P(frame_instr, offsetof(_PyInterpreterFrame, instr_ptr));
#else
	P(frame_code, offsetof(_PyInterpreterFrame, f_code));
	NONE(frame_lasti);
	P(frame_instr, offsetof(_PyInterpreterFrame, prev_instr));
#endif
	P(frame_owner, offsetof(_PyInterpreterFrame, owner));
#if PY_VERSION_HEX < 0x030c0000
	P(frame_is_entry, offsetof(_PyInterpreterFrame, is_entry));
#else
	NONE(frame_is_entry);
#endif
	P(owner_generator, FRAME_OWNED_BY_GENERATOR);
#if PY_VERSION_HEX >= 0x030c0000
	P(owner_cstack, FRAME_OWNED_BY_CSTACK);
#else
	NONE(owner_cstack);
#endif
#endif

	/* ---- code objects ---- */
	P(code_size, sizeof(PyCodeObject));
	P(code_name, offsetof(PyCodeObject, co_name));
	P(code_filename, offsetof(PyCodeObject, co_filename));
	P(code_firstlineno, offsetof(PyCodeObject, co_firstlineno));
#if PY_VERSION_HEX >= 0x030b0000
	P(code_qualname, offsetof(PyCodeObject, co_qualname));
	P(code_linetable, offsetof(PyCodeObject, co_linetable));
	P(code_adaptive, offsetof(PyCodeObject, co_code_adaptive));
	P(code_firsttraceable, offsetof(PyCodeObject, _co_firsttraceable));
	NONE(code_code);
#if PY_VERSION_HEX >= 0x030c0000
	P(code_version, offsetof(PyCodeObject, co_version));
#else
	NONE(code_version);
#endif
#elif PY_VERSION_HEX >= 0x030a0000
	NONE(code_qualname);
	P(code_linetable, offsetof(PyCodeObject, co_linetable));
	NONE(code_adaptive); NONE(code_firsttraceable);
	P(code_code, offsetof(PyCodeObject, co_code));
	NONE(code_version);
#else
	NONE(code_qualname);
	P(code_linetable, offsetof(PyCodeObject, co_lnotab));
	NONE(code_adaptive); NONE(code_firsttraceable);
	P(code_code, offsetof(PyCodeObject, co_code));
	NONE(code_version);
#endif

	/* ---- objects and strings ---- */
	P(ob_type, offsetof(PyObject, ob_type));
	P(ob_size, offsetof(PyVarObject, ob_size));
	P(tp_name, offsetof(PyTypeObject, tp_name));
	P(bytes_sval, offsetof(PyBytesObject, ob_sval));
	P(str_length, offsetof(PyASCIIObject, length));
	P(str_state, offsetof(PyASCIIObject, state));
	P(str_ascii_size, sizeof(PyASCIIObject));
	P(str_compact_size, sizeof(PyCompactUnicodeObject));
	{
		/* bit positions of the state bit fields, found by setting each one alone */
		PyASCIIObject o;
		unsigned w;

		memset(&o, 0, sizeof(o));
		o.state.kind = 1;
		memcpy(&w, (char *)&o + offsetof(PyASCIIObject, state), 4);
		P(str_kind_shift, lowbit(w));
		memset(&o, 0, sizeof(o));
		o.state.compact = 1;
		memcpy(&w, (char *)&o + offsetof(PyASCIIObject, state), 4);
		P(str_compact_bit, lowbit(w));
		memset(&o, 0, sizeof(o));
		o.state.ascii = 1;
		memcpy(&w, (char *)&o + offsetof(PyASCIIObject, state), 4);
		P(str_ascii_bit, lowbit(w));
	}
	/* ---- thread names: sys.modules -> threading -> _active {ident: Thread} -> Thread._name ---- */
#if PY_VERSION_HEX >= 0x030c0000
	P(interp_modules, offsetof(PyInterpreterState, imports.modules));
#else
	P(interp_modules, offsetof(PyInterpreterState, modules));
#endif
#if PY_VERSION_HEX >= 0x030a0000
	P(module_dict, offsetof(PyModuleObject, md_dict));
#else
	P(module_dict, sizeof(PyObject)); /* struct in moduleobject.c: PyObject_HEAD; PyObject *md_dict */
#endif
	P(dict_keys, offsetof(PyDictObject, ma_keys));
	P(dict_values, offsetof(PyDictObject, ma_values));
#if PY_VERSION_HEX >= 0x030b0000
	NONE(dk_size);
	P(dk_log2_size, offsetof(PyDictKeysObject, dk_log2_size));
	P(dk_log2_index_bytes, offsetof(PyDictKeysObject, dk_log2_index_bytes));
	P(dk_kind, offsetof(PyDictKeysObject, dk_kind));
	P(dk_nentries, offsetof(PyDictKeysObject, dk_nentries));
	P(dk_indices, offsetof(PyDictKeysObject, dk_indices));
	P(dict_entry_size, sizeof(PyDictKeyEntry));
	P(dict_uentry_size, sizeof(PyDictUnicodeEntry));
	P(dict_values_values, offsetof(PyDictValues, values));
#if PY_VERSION_HEX >= 0x030d0000
	P(dict_values_capacity, offsetof(PyDictValues, capacity));
	P(dict_values_valid, offsetof(PyDictValues, valid));
#else
	NONE(dict_values_capacity); NONE(dict_values_valid);
#endif
#else
	/* struct _dictkeysobject is private (Objects/dict-common.h), the same from 3.6 to 3.10:
	 * Py_ssize_t dk_refcnt, dk_size; dict_lookup_func dk_lookup; Py_ssize_t dk_usable,
	 * dk_nentries; indices[]; entries { Py_hash_t me_hash; PyObject *me_key, *me_value; } */
	P(dk_size, sizeof(Py_ssize_t));
	NONE(dk_log2_size); NONE(dk_log2_index_bytes); NONE(dk_kind);
	P(dk_nentries, 3 * sizeof(Py_ssize_t) + sizeof(void *));
	P(dk_indices, 4 * sizeof(Py_ssize_t) + sizeof(void *));
	P(dict_entry_size, sizeof(Py_hash_t) + 2 * sizeof(PyObject *));
	NONE(dict_uentry_size);
	NONE(dict_values_values); /* ma_values is a PyObject *[] */
	NONE(dict_values_capacity); NONE(dict_values_valid);
#endif
#if PY_VERSION_HEX >= 0x030c0000
	NONE(long_size);
	P(long_tag, offsetof(PyLongObject, long_value.lv_tag));
	P(long_digit, offsetof(PyLongObject, long_value.ob_digit));
#else
	P(long_size, offsetof(PyVarObject, ob_size));
	NONE(long_tag);
	P(long_digit, offsetof(PyLongObject, ob_digit));
#endif
	P(long_shift, PyLong_SHIFT);
	P(tp_flags, offsetof(PyTypeObject, tp_flags));
	P(tp_basicsize, offsetof(PyTypeObject, tp_basicsize));
	P(tp_dictoffset, offsetof(PyTypeObject, tp_dictoffset));
	P(ht_cached_keys, offsetof(PyHeapTypeObject, ht_cached_keys));
#if PY_VERSION_HEX >= 0x030d0000
	P(managed_dict, 3); /* dict pointer at obj - MANAGED_DICT_OFFSET; values inline at tp_basicsize */
	P(managed_dict_back, -MANAGED_DICT_OFFSET);
	P(flag_managed_dict, Py_TPFLAGS_MANAGED_DICT);
	P(flag_inline_values, Py_TPFLAGS_INLINE_VALUES);
#elif PY_VERSION_HEX >= 0x030c0000
	P(managed_dict, 2); /* dict, or values - 1 (tagged), at ((PyDictOrValues *)obj) - 3 */
	P(managed_dict_back, 3 * sizeof(PyDictOrValues)); /* _PyObject_DictOrValuesPointer() */
	P(flag_managed_dict, Py_TPFLAGS_MANAGED_DICT);
	P(flag_inline_values, 0);
#elif PY_VERSION_HEX >= 0x030b0000
	P(managed_dict, 1); /* dict at obj - MANAGED_DICT_OFFSET, values pointer one word before */
	P(managed_dict_back, -MANAGED_DICT_OFFSET);
	P(flag_managed_dict, Py_TPFLAGS_MANAGED_DICT);
	P(flag_inline_values, 0);
#else
	P(managed_dict, 0); /* the instance dict is at tp_dictoffset */
	NONE(managed_dict_back);
	P(flag_managed_dict, 0);
	P(flag_inline_values, 0);
#endif
	printf("\t},\n");
	return 0;
}
