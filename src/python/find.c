/* SPDX-License-Identifier: MIT */
/*
 * Finding CPython in a live process: the candidate files are the executable and every mapped
 * libpython*.so (opened through /proc/PID/root so containers work, matched to the maps by inode);
 * their .dynsym and .symtab are read with libelf for the anchors (_PyRuntime 3.7+, interp_head and
 * _PyThreadState_Current 3.6, PyCode_Type, _PyEval_EvalFrameDefault, 3.6's GIL statics for
 * python/gil.c), with the .PyRuntime section
 * (3.10+, survives strip) as a fallback. The version comes from the binary: Py_Version (3.11+),
 * _Py_DebugOffsets.version (3.13+), else the Py_GetVersion() buffer in the target's .data/.bss,
 * checked against the DT_SONAME. Then the layout is chosen (generated row, or the target's
 * _Py_DebugOffsets) and the runtime state is validated before the handle is returned.
 */
#include "python/python-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pyrsprof/maps.h"

#include "util/banned.h"

/* What one ELF file tells us. Values are link-time addresses (add the load bias). */
struct elfinfo {
	uint64_t runtime, py_version, interp_head, tstate_current, code_type, interp_head_fn;
	uint64_t str_type, bytes_type, dict_type, long_type, module_type;
	uint64_t eval, eval_size, eval_cold, eval_cold_size;
	uint64_t pyruntime_sec, pyruntime_sec_size;
	uint64_t gil_var[4], gil_var_size[4]; /* 3.6's GIL statics (.symtab): gil_cond, gil_mutex,
					       * switch_cond, switch_mutex */
	uint64_t data_lo, data_hi; /* .data .. end of .bss */
	uint64_t load_vaddr;       /* lowest PT_LOAD p_vaddr, page aligned */
	uint64_t load_off;         /* its p_offset, page aligned */
	char soname[128];
	bool is_elf;
};

/* 3.6 keeps its GIL in static variables, named only in the .symtab (python/gil.c). */
static const char *const gil_vars[4] = { "gil_cond", "gil_mutex", "switch_cond", "switch_mutex" };

static void take_sym(struct elfinfo *ei, const struct prs_py_opts *o, const char *name, const GElf_Sym *s)
{
	unsigned g;

	if (s->st_shndx == SHN_UNDEF || !s->st_value)
		return;
	for (g = 0; g < 4; g++)
		if (GELF_ST_TYPE(s->st_info) == STT_OBJECT && !strcmp(name, gil_vars[g])) {
			ei->gil_var[g] = s->st_value;
			ei->gil_var_size[g] = s->st_size;
		}
	if (o->no_anchor_symbols && (!strcmp(name, "_PyRuntime") || !strcmp(name, "interp_head") ||
				     (o->no_head_fn && !strcmp(name, "PyInterpreterState_Head"))))
		return;
	if (!strcmp(name, "_PyRuntime"))
		ei->runtime = s->st_value;
	else if (!strcmp(name, "Py_Version"))
		ei->py_version = s->st_value;
	else if (!strcmp(name, "interp_head"))
		ei->interp_head = s->st_value;
	else if (!strcmp(name, "_PyThreadState_Current"))
		ei->tstate_current = s->st_value;
	else if (!strcmp(name, "PyCode_Type"))
		ei->code_type = s->st_value;
	else if (!strcmp(name, "PyUnicode_Type"))
		ei->str_type = s->st_value;
	else if (!strcmp(name, "PyBytes_Type"))
		ei->bytes_type = s->st_value;
	else if (!strcmp(name, "PyDict_Type"))
		ei->dict_type = s->st_value;
	else if (!strcmp(name, "PyLong_Type"))
		ei->long_type = s->st_value;
	else if (!strcmp(name, "PyModule_Type"))
		ei->module_type = s->st_value;
	else if (!strcmp(name, "PyInterpreterState_Head"))
		ei->interp_head_fn = s->st_value;
	else if (!strcmp(name, "_PyEval_EvalFrameDefault")) {
		ei->eval = s->st_value;
		ei->eval_size = s->st_size;
	} else if (!strcmp(name, "_PyEval_EvalFrameDefault.cold")) {
		ei->eval_cold = s->st_value;
		ei->eval_cold_size = s->st_size;
	}
}

static int read_elf(int fd, const struct prs_py_opts *o, struct elfinfo *ei)
{
	Elf *e;
	Elf_Scn *scn = NULL;
	size_t shstrndx, nph, i;
	bool have_load = false;

	memset(ei, 0, sizeof(*ei));
	elf_version(EV_CURRENT);
	e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!e)
		return -EINVAL;
	if (elf_kind(e) != ELF_K_ELF || gelf_getclass(e) != ELFCLASS64 ||
	    elf_getshdrstrndx(e, &shstrndx) != 0 || elf_getphdrnum(e, &nph) != 0) {
		elf_end(e);
		return -EINVAL;
	}
	ei->is_elf = true;
	for (i = 0; i < nph && i < 64; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		if (!have_load || ph.p_vaddr < ei->load_vaddr) {
			ei->load_vaddr = ph.p_vaddr & ~(uint64_t)0xfff;
			ei->load_off = ph.p_offset & ~(uint64_t)0xfff;
			have_load = true;
		}
	}
	while ((scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		const char *sname;
		Elf_Data *d;
		size_t n, k;

		if (!gelf_getshdr(scn, &sh))
			continue;
		sname = elf_strptr(e, shstrndx, sh.sh_name);
		if (sname && !strcmp(sname, ".PyRuntime") && !o->no_anchor_symbols) {
			ei->pyruntime_sec = sh.sh_addr;
			ei->pyruntime_sec_size = sh.sh_size;
		}
		if (sname && (!strcmp(sname, ".data") || !strcmp(sname, ".bss"))) {
			if (!ei->data_lo || sh.sh_addr < ei->data_lo)
				ei->data_lo = sh.sh_addr;
			if (sh.sh_addr + sh.sh_size > ei->data_hi)
				ei->data_hi = sh.sh_addr + sh.sh_size;
		}
		if (sh.sh_type == SHT_DYNAMIC && (d = elf_getdata(scn, NULL)) && sh.sh_entsize) {
			n = sh.sh_size / sh.sh_entsize;
			for (k = 0; k < n && k < 4096; k++) {
				GElf_Dyn dyn;
				const char *so;

				if (!gelf_getdyn(d, (int)k, &dyn))
					break;
				if (dyn.d_tag == DT_SONAME && (so = elf_strptr(e, sh.sh_link, dyn.d_un.d_val)))
					snprintf(ei->soname, sizeof(ei->soname), "%s", so);
			}
		}
		if (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM)
			continue;
		d = elf_getdata(scn, NULL);
		if (!d || !sh.sh_entsize)
			continue;
		n = sh.sh_size / sh.sh_entsize;
		for (k = 0; k < n; k++) {
			GElf_Sym s;
			const char *name;

			if (!gelf_getsym(d, (int)k, &s))
				break;
			name = elf_strptr(e, sh.sh_link, s.st_name);
			if (name && name[0] && strchr("_Pigs", name[0]))
				take_sym(ei, o, name, &s);
		}
	}
	elf_end(e);
	return 0;
}

/* The mapping of file `inode` that holds file offset `off`; its load bias for link address vaddr. */
static bool bias_of(const struct prs_maps *m, uint64_t inode, uint64_t dev_major, uint64_t dev_minor,
		    const struct elfinfo *ei, uint64_t *bias)
{
	size_t i;

	for (i = 0; i < m->n; i++) {
		const struct prs_map *mp = &m->v[i];

		if (mp->inode != inode || mp->dev_major != dev_major || mp->dev_minor != dev_minor)
			continue;
		if (mp->offset == ei->load_off) {
			*bias = mp->start - ei->load_vaddr;
			return true;
		}
	}
	return false;
}

static int read_u64(const struct prs_memreader *mr, uint64_t addr, uint64_t *v)
{
	return mr->read(mr->ctx, addr, v, sizeof(*v));
}

/* Scans the target's copy of [lo, hi) for Py_GetVersion()'s "M.m.p... (" text with major.minor
 * as given (or any 3.x when want_minor < 0). */
static bool scan_version(const struct prs_memreader *mr, uint64_t lo, uint64_t hi, int want_minor, char *out,
			 size_t outsz)
{
	static const size_t chunk = 65536;
	uint8_t *buf;
	uint64_t a;
	bool found = false;

	if (hi <= lo || hi - lo > (64u << 20))
		return false;
	buf = malloc(chunk + 64);
	if (!buf)
		return false;
	for (a = lo & ~(uint64_t)0xfff; a < hi && !found; a += chunk) {
		size_t len = hi - a < chunk + 64 ? hi - a : chunk + 64, i;

		if (mr->read(mr->ctx, a, buf, len) != 0) {
			/* partial: fall back to pages */
			size_t p;

			for (p = 0; p < len; p += 4096) {
				size_t pl = len - p < 4096 ? len - p : 4096;

				if (mr->read(mr->ctx, a + p, buf + p, pl) != 0)
					memset(buf + p, 0, pl);
			}
		}
		for (i = 0; i + 16 < len && !found; i++) {
			unsigned maj, min, pat;
			int used = 0;
			char tmp[32];
			size_t k;

			if (buf[i] != '3' || buf[i + 1] != '.' || (i && buf[i - 1] != 0))
				continue;
			for (k = 0; k < sizeof(tmp) - 1 && i + k < len && buf[i + k] > ' '; k++)
				tmp[k] = (char)buf[i + k];
			tmp[k] = 0;
			if (i + k + 1 >= len || buf[i + k] != ' ' || buf[i + k + 1] != '(')
				continue;
			if (sscanf(tmp, "%u.%u.%u%n", &maj, &min, &pat, &used) != 3 || maj != 3)
				continue;
			if (want_minor >= 0 && (int)min != want_minor)
				continue;
			snprintf(out, outsz, "%s", tmp);
			found = true;
		}
	}
	free(buf);
	return found;
}

const struct prs_py_layout *prs_py_layout_find(unsigned major, unsigned minor)
{
	unsigned i;

	for (i = 0; i < prs_py_nlayouts; i++)
		if (prs_py_layouts[i].version_hex >> 24 == major &&
		    ((prs_py_layouts[i].version_hex >> 16) & 255) == minor)
			return &prs_py_layouts[i];
	return NULL;
}

/*
 * 3.6 without .symtab: PyInterpreterState_Head() is `mov interp_head(%rip),%rax; ret` with gcc
 * (48 8b 05 disp32 c3), so the variable's address is the end of that instruction plus disp32.
 */
static uint64_t decode_head_fn(struct prs_py *py, uint64_t fn)
{
	uint8_t code[8];
	int32_t disp;

	if (py->mr.read(py->mr.ctx, fn, code, sizeof(code)) || code[0] != 0x48 || code[1] != 0x8b ||
	    code[2] != 0x05 || code[7] != 0xc3)
		return 0;
	memcpy(&disp, code + 3, 4);
	return fn + 7 + (uint64_t)(int64_t)disp;
}

/*
 * 3.7+ with no _PyRuntime symbol and no .PyRuntime section: scan the binary's .data/.bss in the
 * target for a _PyRuntimeState whose interpreters.head equals interpreters.main (true with one
 * interpreter, checked locally on the copy), that fits in the data, holds its main interpreter
 * (3.11+), and whose interpreter's first thread state points back at it and has a pthread id
 * (checked remotely). Bounded by 64 MiB of data; run once at open. Evidence: Debian's 3.11 has a
 * false match in .data without the size and containment checks.
 */
static uint64_t scan_runtime(struct prs_py *py, uint64_t lo, uint64_t hi)
{
	const struct prs_py_layout *L = &py->L;
	static const size_t chunk = 1u << 20;
	int32_t dh = L->runtime_interp_head, dm = L->runtime_interp_main;
	uint8_t *buf;
	uint64_t a, found = 0;

	if (dh < 0 || dm < 0 || hi <= lo || hi - lo > (64u << 20))
		return 0;
	buf = malloc(chunk + 4096);
	if (!buf)
		return 0;
	lo &= ~(uint64_t)7;
	for (a = lo; a < hi && !found; a += chunk) {
		size_t len = hi - a < chunk + 4096 ? hi - a : chunk + 4096, i, p;

		for (p = 0; p < len; p += 4096) { /* page by page: .bss may have holes */
			size_t pl = len - p < 4096 ? len - p : 4096;

			if (py->mr.read(py->mr.ctx, a + p, buf + p, pl))
				memset(buf + p, 0, pl);
		}
		for (i = 0; i + 8 <= len && i < chunk && !found; i += 8) {
			uint64_t head, main, ts = 0, back = 0;
			int64_t mi = (int64_t)i + dm - dh;

			memcpy(&head, buf + i, 8);
			if (head < 4096 || head >= (1ull << 47) || (head & 7) || mi < 0 || (size_t)mi + 8 > len)
				continue;
			memcpy(&main, buf + mi, 8);
			if (main != head)
				continue;
			uint64_t r = a + i - (uint64_t)dh, tid = 0;

			/* the whole runtime lies in the data; from 3.11 the main interpreter is inside it */
			if (r < lo || r + (uint64_t)L->runtime_size > hi ||
			    (L->tstate_native_thread_id >= 0 && (head < r || head >= r + (uint64_t)L->runtime_size)))
				continue;
			if (py->mr.read(py->mr.ctx, head + (uint64_t)L->interp_tstate_head, &ts, 8) || !ts ||
			    py->mr.read(py->mr.ctx, ts + (uint64_t)L->tstate_interp, &back, 8) || back != head ||
			    py->mr.read(py->mr.ctx, ts + (uint64_t)L->tstate_thread_id, &tid, 8) ||
			    tid < 4096 || (tid & 7))
				continue;
			found = r;
		}
	}
	free(buf);
	return found;
}

/* Follows runtime -> interpreter -> first thread state and checks that tstate->interp points back. */
static int validate(struct prs_py *py, struct prs_err *err)
{
	const struct prs_py_layout *L = &py->L;
	uint64_t interp = 0, ts = 0, back = 0, type = 0, tpname = 0;
	char name[8] = { 0 };

	if (py->walk.runtime) {
		if (read_u64(&py->mr, py->walk.runtime + L->runtime_interp_head, &interp))
			return prs_err_set(err, -EINVAL, "pid %d: cannot read _PyRuntime at 0x%llx", py->pid,
					   (unsigned long long)py->walk.runtime);
	} else if (py->walk.interp_head_var) {
		if (read_u64(&py->mr, py->walk.interp_head_var, &interp))
			return prs_err_set(err, -EINVAL, "pid %d: cannot read interp_head", py->pid);
	}
	if (!interp)
		return prs_err_set(err, -EINVAL, "pid %d: python %s has no interpreter yet (starting or finalizing)",
				   py->pid, py->version);
	if (read_u64(&py->mr, interp + L->interp_tstate_head, &ts) || !ts ||
	    read_u64(&py->mr, ts + L->tstate_interp, &back) || back != interp)
		return prs_err_set(err, -EINVAL, "pid %d: python %s: interpreter state at 0x%llx does not validate",
				   py->pid, py->version, (unsigned long long)interp);
	/* PyCode_Type must be named "code": catches a wrong object header size (debug builds). */
	if (py->code_type) {
		if (read_u64(&py->mr, py->code_type + L->tp_name, &tpname) || !tpname ||
		    py->mr.read(py->mr.ctx, tpname, name, 5) || memcmp(name, "code", 5))
			return prs_err_set(err, -EINVAL, "pid %d: PyCode_Type does not validate (a debug or unusual build?)",
					   py->pid);
	}
	(void)type;
	return 0;
}

static bool is_libpython(const char *path)
{
	const char *b = strrchr(path, '/');

	b = b ? b + 1 : path;
	return !strncmp(b, "libpython", 9) && strstr(b, ".so");
}

int prs_py_fork(const struct prs_py *parent, pid_t pid, struct prs_py **out, struct prs_err *err)
{
	struct prs_memreader mr;
	struct prs_py *py;
	int rc;

	*out = NULL;
	prs_memreader_pid(&mr, pid);
	rc = prs_py_new_raw(&parent->L, &mr, parent->version_hex, &py);
	if (rc)
		return prs_err_set(err, rc, "pid %d: out of memory", pid);
	py->pid = pid;
	py->layout_source = parent->layout_source;
	py->anchor = parent->anchor;
	memcpy(py->version, parent->version, sizeof(py->version));
	memcpy(py->binary, parent->binary, sizeof(py->binary));
	py->walk.runtime = parent->walk.runtime;
	py->walk.interp_head_var = parent->walk.interp_head_var;
	py->walk.tstate_current_var = parent->walk.tstate_current_var;
	py->code_type = parent->code_type;
	py->str_type = parent->str_type;
	py->bytes_type = parent->bytes_type;
	py->dict_type = parent->dict_type;
	py->long_type = parent->long_type;
	py->module_type = parent->module_type;
	memcpy(py->eval_lo, parent->eval_lo, sizeof(py->eval_lo));
	memcpy(py->eval_hi, parent->eval_hi, sizeof(py->eval_hi));
	py->neval = parent->neval;
	memcpy(py->interp_lo, parent->interp_lo, sizeof(py->interp_lo));
	memcpy(py->interp_hi, parent->interp_hi, sizeof(py->interp_hi));
	py->ninterp = parent->ninterp;
	rc = validate(py, err);
	if (rc) {
		prs_py_free(py);
		return rc;
	}
	for (unsigned g = 0; g < parent->ngil_fixed; g++)
		prs_py_gil_fixed(py, parent->gil[g].lo, parent->gil[g].hi - parent->gil[g].lo);
	prs_py_gil_open(py);
	*out = py;
	return 0;
}

int prs_py_open(pid_t pid, const struct prs_py_opts *opts, struct prs_py **out, struct prs_err *err)
{
	static const struct prs_py_opts defaults;
	const struct prs_py_opts *o = opts ? opts : &defaults;
	struct prs_maps maps = PRS_MAPS_INIT;
	struct prs_memreader mr;
	struct prs_py *py = NULL;
	char exe[512], path[600];
	ssize_t el;
	size_t i, ncand = 0;
	const struct prs_map *cand[16];
	int rc;

	*out = NULL;
	rc = prs_maps_read(pid, &maps, err);
	if (rc) {
		if (rc == -ENOENT)
			rc = -ESRCH;
		return prs_err_set(err, rc, "pid %d: cannot read its memory map: %s", pid, strerror(-rc));
	}
	snprintf(path, sizeof(path), "/proc/%d/exe", pid);
	el = readlink(path, exe, sizeof(exe) - 1);
	exe[el > 0 ? el : 0] = 0;
	if (el > 10 && !strcmp(exe + el - 10, " (deleted)"))
		exe[el - 10] = 0;
	/* candidates: the executable's first mapping, then each libpython's */
	for (i = 0; i < maps.n && ncand < 16; i++) {
		const struct prs_map *m = &maps.v[i];
		size_t k;
		bool dup = false;

		if (!m->inode || !m->path[0] || m->path[0] != '/')
			continue;
		if (strcmp(m->path, exe) != 0 && !is_libpython(m->path))
			continue;
		for (k = 0; k < ncand; k++)
			if (cand[k]->inode == m->inode && cand[k]->dev_major == m->dev_major &&
			    cand[k]->dev_minor == m->dev_minor)
				dup = true;
		if (!dup)
			cand[ncand++] = m;
	}
	prs_memreader_pid(&mr, pid);
	for (i = 0; i < ncand; i++) {
		const struct prs_map *m = cand[i];
		struct elfinfo ei;
		struct stat stt;
		uint64_t bias = 0, runtime = 0, vhex = 0;
		int fd, major = 3, minor = -1;
		const struct prs_py_layout *row;
		struct prs_py_layout L;
		const char *src = "table";
		char ver[32] = "";

		snprintf(path, sizeof(path), "/proc/%d/root%s", pid, m->path);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			fd = open(m->path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		if (fstat(fd, &stt) || stt.st_ino != m->inode || read_elf(fd, o, &ei)) {
			close(fd);
			continue;
		}
		close(fd);
		if (!bias_of(&maps, m->inode, m->dev_major, m->dev_minor, &ei, &bias))
			continue;
		runtime = ei.runtime ? ei.runtime : ei.pyruntime_sec;
		if (!runtime && !ei.interp_head && !ei.tstate_current && !ei.interp_head_fn) {
			/* no anchor at all: a Python binary only if Py_GetVersion()'s text is in its data */
			char v2[32];

			if (!ei.data_lo || !(is_libpython(m->path) || ei.py_version || ei.code_type ||
					     strstr(m->path, "python")) ||
			    !scan_version(&mr, ei.data_lo + bias, ei.data_hi + bias, -1, v2, sizeof(v2)))
				continue; /* not a Python binary (e.g. an exe linked to libpython) */
		}
		if (runtime)
			runtime += bias;
		/* the version, from the binary */
		if (ei.py_version) {
			uint64_t v = 0;

			if (read_u64(&mr, ei.py_version + bias, &v) == 0)
				vhex = (uint32_t)v;
		}
		if (!vhex && runtime) {
			uint8_t hdr[16];

			if (mr.read(mr.ctx, runtime, hdr, 16) == 0 && !memcmp(hdr, "xdebugpy", 8))
				memcpy(&vhex, hdr + 8, 8);
		}
		if (vhex) {
			major = (int)(vhex >> 24);
			minor = (int)((vhex >> 16) & 255);
			prs_py_version_str((uint32_t)vhex, ver, sizeof(ver));
		} else {
			unsigned a, b;

			if (sscanf(ei.soname, "libpython%u.%u", &a, &b) == 2) {
				major = (int)a;
				minor = (int)b;
			}
			if (ei.data_lo && scan_version(&mr, ei.data_lo + bias, ei.data_hi + bias, minor,
						       ver, sizeof(ver))) {
				unsigned a2, b2, c2;

				if (sscanf(ver, "%u.%u.%u", &a2, &b2, &c2) == 3) {
					major = (int)a2;
					minor = (int)b2;
					vhex = (a2 << 24) | (b2 << 16) | (c2 << 8) | 0xf0;
				}
			}
		}
		if (major == 2 || (minor >= 0 && minor < 6) || (!ei.runtime && !ei.pyruntime_sec &&
								 !ei.interp_head && ei.tstate_current &&
								 minor < 0)) {
			prs_maps_release(&maps);
			return prs_err_set(err, -ENOTSUP, "pid %d: python %s is not supported (pyrsprof reads CPython 3.6 and newer)",
					   pid, ver[0] ? ver : (major == 2 ? "2.x" : "3.x < 3.6"));
		}
		if (minor < 0) {
			prs_maps_release(&maps);
			return prs_err_set(err, -ENOTSUP, "pid %d: found CPython in %s but could not read its version",
					   pid, m->path);
		}
		if (!ver[0])
			snprintf(ver, sizeof(ver), "%d.%d", major, minor);
		if (!vhex)
			vhex = ((uint32_t)major << 24) | ((uint32_t)minor << 16);
		row = prs_py_layout_find((unsigned)major, (unsigned)minor);
		if (major == 3 && minor >= 13 && runtime && !o->no_debug_offsets) {
			uint8_t dbg[1024];
			const struct prs_py_layout *base = row ? row : &prs_py_layouts[prs_py_nlayouts - 1];

			if (o->debug_offsets_only)
				base = &prs_py_layouts[prs_py_nlayouts - 1]; /* the newest row, for what dbg lacks */
			if (mr.read(mr.ctx, runtime, dbg, sizeof(dbg)) == 0 && !memcmp(dbg, "xdebugpy", 8) &&
			    dbg[16] == 1) {
				prs_maps_release(&maps);
				return prs_err_set(err, -ENOTSUP, "pid %d: python %s is a free-threaded build, which is not supported yet",
						   pid, ver);
			}
			if (mr.read(mr.ctx, runtime, dbg, sizeof(dbg)) == 0 &&
			    prs_py_layout_from_debug_offsets(dbg, sizeof(dbg), base, &L) == 0) {
				row = &L;
				src = "debug-offsets";
			} else if (!row || o->debug_offsets_only) {
				prs_maps_release(&maps);
				return prs_err_set(err, -ENOTSUP, "pid %d: python %s: _Py_DebugOffsets missing or of an unknown layout",
						   pid, ver);
			}
		}
		if (!row) {
			prs_maps_release(&maps);
			return prs_err_set(err, -ENOTSUP, "pid %d: python %s is not supported (no layout for it)", pid, ver);
		}
		rc = prs_py_new_raw(row, &mr, (uint32_t)vhex, &py);
		if (rc) {
			prs_maps_release(&maps);
			return prs_err_set(err, rc, "pid %d: out of memory", pid);
		}
		py->pid = pid;
		py->layout_source = src;
		snprintf(py->version, sizeof(py->version), "%s", ver);
		snprintf(py->binary, sizeof(py->binary), "%s", m->path);
		py->walk.runtime = (py->L.runtime_interp_head >= 0) ? runtime : 0;
		py->anchor = !py->walk.runtime ? "" : ei.runtime ? "_PyRuntime symbol" : ".PyRuntime section";
		if (ei.interp_head) {
			py->walk.interp_head_var = ei.interp_head + bias;
			py->anchor = "interp_head symbol";
		}
		if (ei.tstate_current)
			py->walk.tstate_current_var = ei.tstate_current + bias;
		if (ei.code_type)
			py->code_type = ei.code_type + bias;
		if (ei.str_type)
			py->str_type = ei.str_type + bias;
		if (ei.bytes_type)
			py->bytes_type = ei.bytes_type + bias;
		if (ei.dict_type)
			py->dict_type = ei.dict_type + bias;
		if (ei.long_type)
			py->long_type = ei.long_type + bias;
		if (ei.module_type)
			py->module_type = ei.module_type + bias;
		if (ei.eval) {
			py->eval_lo[py->neval] = ei.eval + bias;
			py->eval_hi[py->neval++] = ei.eval + bias + (ei.eval_size ? ei.eval_size : 1);
		}
		if (ei.eval_cold) {
			py->eval_lo[py->neval] = ei.eval_cold + bias;
			py->eval_hi[py->neval++] = ei.eval_cold + bias + (ei.eval_cold_size ? ei.eval_cold_size : 1);
		}
		{
			size_t k;

			for (k = 0; k < maps.n && py->ninterp < 8; k++)
				if (maps.v[k].inode == m->inode && (maps.v[k].perms & PRS_MAP_X)) {
					py->interp_lo[py->ninterp] = maps.v[k].start;
					py->interp_hi[py->ninterp++] = maps.v[k].end;
				}
		}
		if (!py->walk.runtime && !py->walk.interp_head_var && minor == 6 && ei.interp_head_fn) {
			py->walk.interp_head_var = decode_head_fn(py, ei.interp_head_fn + bias);
			py->anchor = "PyInterpreterState_Head code";
		}
		if (!py->walk.runtime && !py->walk.interp_head_var && minor >= 7) {
			py->walk.runtime = scan_runtime(py, ei.data_lo + bias, ei.data_hi + bias);
			py->anchor = "scan of .data/.bss";
		}
		if (!py->walk.runtime && !py->walk.interp_head_var) {
			prs_maps_release(&maps);
			prs_py_free(py);
			return prs_err_set(err, -ENOTSUP, "pid %d: python %s: no _PyRuntime/interp_head symbol and no interpreter state found in its data",
					   pid, ver);
		}
		rc = validate(py, err);
		prs_maps_release(&maps);
		if (rc) {
			prs_py_free(py);
			return rc;
		}
		if (minor == 6) {
			unsigned g;

			for (g = 0; g < 4; g++)
				if (ei.gil_var[g])
					prs_py_gil_fixed(py, ei.gil_var[g] + bias, ei.gil_var_size[g]);
		}
		prs_py_gil_open(py);
		*out = py;
		return 0;
	}
	prs_maps_release(&maps);
	return prs_err_set(err, -ENOENT,
			   "pid %d: no CPython found (looked for libpython*.so and _PyRuntime/Py_Version in the executable)",
			   pid);
}
