/* SPDX-License-Identifier: MIT */
/*
 * Remote native unwinder over a register set and a stack snapshot (see pyrsprof/unwind.h).
 *
 * Why three methods: libdw's Dwfl unwinder is correct on every binary we tried (C, Rust linked by
 * rust-lld, CPython) but costs ~1 µs per frame warm, because it re-finds the FDE, re-runs the CIE
 * and FDE programs and mallocs a frame state for every frame (docs/unwinding.md, "Numbers").
 * The FAST path asks libdw once per PC for the decoded row (dwarf_cfi_addrframe) and caches the
 * three rules an x86_64 unwind needs (CFA, RA, RBP) in a fixed-size open-addressing table, so a
 * warm unwind is a few loads per frame. Rows it cannot express fall back to Dwfl for the sample.
 * The FP walk is the last resort for PCs without a module or CFI (JIT code, stripped .eh_frame).
 */
#include "pyrsprof/unwind.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <unistd.h>

#include "util/banned.h"

#define CACHE_BITS 14
#define CACHE_SIZE (1u << CACHE_BITS)
#define CACHE_PROBES 8

enum row_kind {
	ROW_EMPTY = 0,
	ROW_OK,          /* rules below apply */
	ROW_NO_CFI,      /* no module or no CFI covers the PC */
	ROW_UNSUPPORTED, /* a rule FAST cannot represent: use Dwfl */
};

enum reg_rule {
	RULE_SAME = 0,  /* unchanged by this frame */
	RULE_UNDEF,     /* not recoverable (RA undefined = outermost frame) */
	RULE_OFFSET,    /* saved at CFA + off */
};

/* cfa_reg value for the x86_64 .plt rule (see is_plt_expr) */
#define CFA_PLT 0xfe

/* One decoded CFI row for one lookup PC (32 bytes; the table is 512 KiB). */
struct row {
	uint64_t key;     /* lookup address: pc for frame 0, return address - 1 otherwise */
	uint8_t kind;     /* enum row_kind */
	uint8_t cfa_reg;  /* PRS_REG_RSP, PRS_REG_RBP or CFA_PLT */
	uint8_t ra_rule, rbp_rule;
	uint8_t plt_k;    /* CFA_PLT: CFA = RSP + 8 + ((RIP & 15) >= plt_k ? 8 : 0) */
	int32_t cfa_off;
	int32_t ra_off, rbp_off;
};

/* A local read-only view of a file-backed read-only mapping of the target. */
struct lmap {
	const uint8_t *base; /* mmap of the file at the mapping's offset, or NULL */
	size_t len;          /* bytes of the mapping backed by the file (<= mapping size) */
	int state;           /* 0 not tried, 1 mapped, -1 unusable (served by process_vm_readv) */
};

struct prs_unwinder {
	pid_t pid;          /* 0 when offline */
	char *root;         /* offline: directory holding the mapped files by base name */
	enum prs_unwind_method method;
	uint64_t generation;
	Dwfl *dwfl;
	struct prs_maps maps;
	struct lmap *lmaps; /* parallel to maps.v */
	char *text;         /* the maps text maps was parsed from */
	size_t text_len, text_cap;
	char *scratch;      /* refresh reads the new text here */
	size_t scratch_cap;
	struct row *cache;  /* CACHE_SIZE rows */
	/* The sample being unwound (borrowed for the duration of prs_unwind). */
	const struct prs_regs *cur_regs;
	const struct prs_snapshot *cur_snap;
	unsigned remote_reads;
	size_t snap_used;   /* end of the snapshot bytes read so far */
	/* Dwfl walk state */
	uint64_t *out_pcs;
	int out_max, out_n;
	uint64_t last_sp;
	bool read_failed;
	enum prs_unwind_end dwfl_end;
};

const char *prs_unwind_end_name(enum prs_unwind_end end)
{
	switch (end) {
	case PRS_UNWIND_END_CLEAN: return "clean";
	case PRS_UNWIND_END_MAX: return "max";
	case PRS_UNWIND_END_READ: return "read-failed";
	case PRS_UNWIND_END_NO_CFI: return "no-cfi";
	case PRS_UNWIND_END_BAD_FRAME: return "bad-frame";
	case PRS_UNWIND_END_UNSUPPORTED: return "unsupported";
	case PRS_UNWIND_END_ERROR: return "error";
	}
	return "?";
}

const char *prs_unwind_method_name(enum prs_unwind_method m)
{
	switch (m) {
	case PRS_UNWIND_AUTO: return "auto";
	case PRS_UNWIND_FAST: return "fast";
	case PRS_UNWIND_DWFL: return "dwfl";
	case PRS_UNWIND_FP: return "fp";
	}
	return "?";
}

/* ---- memory ------------------------------------------------------------------------------ */

static void lmaps_drop(struct prs_unwinder *u)
{
	if (!u->lmaps)
		return;
	for (size_t i = 0; i < u->maps.n; i++)
		if (u->lmaps[i].base)
			munmap((void *)u->lmaps[i].base, u->lmaps[i].len);
	free(u->lmaps);
	u->lmaps = NULL;
}

static bool same_file(const struct stat *st, const struct prs_map *m)
{
	return st->st_ino == m->inode && major(st->st_dev) == m->dev_major &&
	       minor(st->st_dev) == m->dev_minor;
}

/* Maps the file behind m read-only, once. Fails (state -1) when the file is not the one mapped. */
static void lmap_open(struct prs_unwinder *u, size_t i)
{
	const struct prs_map *m = &u->maps.v[i];
	struct lmap *l = &u->lmaps[i];
	char path[PRS_MAPS_MAX_LINE + 64];
	struct stat st;
	int fd = -1;
	void *p;

	l->state = -1;
	if (u->root) {
		const char *bn = strrchr(m->path, '/');

		snprintf(path, sizeof(path), "%s/%s", u->root, bn ? bn + 1 : m->path);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0 || fstat(fd, &st) != 0)
			goto out;
		goto mapit;
	}
	snprintf(path, sizeof(path), "/proc/%d/root%s", (int)u->pid, m->path);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0 && (fstat(fd, &st) != 0 || !same_file(&st, m))) {
		close(fd);
		fd = -1;
	}
	if (fd < 0) {
		/* Overlay filesystems report another device in maps; map_files names the exact file. */
		snprintf(path, sizeof(path), "/proc/%d/map_files/%llx-%llx", (int)u->pid,
			 (unsigned long long)m->start, (unsigned long long)m->end);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return;
		if (fstat(fd, &st) != 0 || st.st_ino != m->inode)
			goto out;
	}
mapit:
	if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size <= m->offset)
		goto out;
	/* Never map past EOF: touching those pages would SIGBUS us. */
	l->len = (size_t)(m->end - m->start);
	if ((uint64_t)st.st_size - m->offset < l->len)
		l->len = (size_t)((uint64_t)st.st_size - m->offset);
	p = mmap(NULL, l->len, PROT_READ, MAP_PRIVATE, fd, (off_t)m->offset);
	if (p == MAP_FAILED)
		goto out;
	l->base = p;
	l->state = 1;
out:
	if (fd >= 0)
		close(fd);
}

/* Reads len bytes at addr: snapshot, local file view, then process_vm_readv. */
static int read_mem(struct prs_unwinder *u, uint64_t addr, void *buf, size_t len)
{
	const struct prs_snapshot *s = u->cur_snap;
	const struct prs_map *m;

	if (addr + len < addr)
		return -EFAULT;
	if (s && addr >= s->base && addr - s->base <= s->len && len <= s->len - (addr - s->base)) {
		memcpy(buf, s->data + (addr - s->base), len);
		if (addr - s->base + len > u->snap_used)
			u->snap_used = addr - s->base + len;
		return 0;
	}
	m = prs_maps_find(&u->maps, addr);
	if (m && u->lmaps && addr + len <= m->end && (m->perms & PRS_MAP_R) &&
	    !(m->perms & PRS_MAP_W) && m->inode != 0 && m->path[0] == '/' && !m->deleted) {
		size_t i = (size_t)(m - u->maps.v);
		struct lmap *l = &u->lmaps[i];

		if (l->state == 0)
			lmap_open(u, i);
		if (l->state == 1 && addr - m->start + len <= l->len) {
			memcpy(buf, l->base + (addr - m->start), len);
			return 0;
		}
	}
	{
		struct iovec local = { buf, len };
		struct iovec remote = { (void *)(uintptr_t)addr, len };
		ssize_t r;

		if (u->pid <= 0)
			return -EFAULT;
		u->remote_reads++;
		r = process_vm_readv(u->pid, &local, 1, &remote, 1, 0);
		return r == (ssize_t)len ? 0 : -EFAULT;
	}
}

int prs_unwinder_read(struct prs_unwinder *u, uint64_t addr, void *buf, size_t len)
{
	return read_mem(u, addr, buf, len);
}

/* ---- Dwfl --------------------------------------------------------------------------------- */

static pid_t cb_next_thread(Dwfl *dwfl, void *arg, void **thread_argp)
{
	struct prs_unwinder *u = arg;

	(void)dwfl;
	if (*thread_argp)
		return 0;
	*thread_argp = u;
	return u->pid;
}

static bool cb_get_thread(Dwfl *dwfl, pid_t tid, void *arg, void **thread_argp)
{
	(void)dwfl;
	(void)tid;
	*thread_argp = arg;
	return true;
}

static bool cb_memory_read(Dwfl *dwfl, Dwarf_Addr addr, Dwarf_Word *result, void *arg)
{
	struct prs_unwinder *u = arg;
	uint64_t v;

	(void)dwfl;
	if (read_mem(u, addr, &v, sizeof(v)) != 0) {
		u->read_failed = true;
		return false;
	}
	*result = v;
	return true;
}

static bool cb_set_initial_registers(Dwfl_Thread *thread, void *thread_arg)
{
	struct prs_unwinder *u = thread_arg;
	Dwarf_Word regs[PRS_NREGS];

	if (!u->cur_regs)
		return false;
	for (int i = 0; i < PRS_NREGS; i++)
		regs[i] = u->cur_regs->r[i];
	return dwfl_thread_state_registers(thread, 0, PRS_NREGS, regs);
}

static const Dwfl_Thread_Callbacks thread_callbacks = {
	.next_thread = cb_next_thread,
	.get_thread = cb_get_thread,
	.memory_read = cb_memory_read,
	.set_initial_registers = cb_set_initial_registers,
};

/*
 * Unwinding needs only the CFI of the mapped files (.eh_frame, or .debug_frame when the file itself
 * has it). Separate debuginfo (/usr/lib/debug, e.g. libc6-dbg) is never looked up here: its
 * compressed sections took about a second to inflate in the middle of a recording, the first time
 * a PC without an .eh_frame row (the outermost frame) asked for .debug_frame. The symbolizer, which
 * runs at the end, does use it.
 */
static int no_separate_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname,
				 Dwarf_Addr base, const char *file_name, const char *debuglink_file,
				 GElf_Word debuglink_crc, char **debuginfo_file_name)
{
	(void)mod, (void)userdata, (void)modname, (void)base, (void)file_name;
	(void)debuglink_file, (void)debuglink_crc, (void)debuginfo_file_name;
	return -1;
}

static char *debuginfo_path;
static const Dwfl_Callbacks proc_callbacks = {
	.find_elf = dwfl_linux_proc_find_elf,
	.find_debuginfo = no_separate_debuginfo,
	.debuginfo_path = &debuginfo_path,
};

/* Offline: report each file mapped at offset 0 as a module loaded at that mapping's start. */
static int dwfl_report_offline_maps(struct prs_unwinder *u, struct prs_err *err)
{
	char path[PRS_MAPS_MAX_LINE + 64];

	dwfl_report_begin(u->dwfl);
	for (size_t i = 0; i < u->maps.n; i++) {
		const struct prs_map *m = &u->maps.v[i];
		const char *bn = strrchr(m->path, '/');

		if (m->path[0] != '/' || m->offset != 0 || (i > 0 && !strcmp(m->path, u->maps.v[i - 1].path)))
			continue;
		snprintf(path, sizeof(path), "%s/%s", u->root, bn + 1);
		if (access(path, R_OK) != 0)
			continue; /* not in the fixture: its frames end the unwind */
		if (!dwfl_report_elf(u->dwfl, bn + 1, path, -1, m->start, false))
			return prs_err_set(err, -EIO, "report %s at %#llx: %s", path,
					   (unsigned long long)m->start, dwfl_errmsg(-1));
	}
	if (dwfl_report_end(u->dwfl, NULL, NULL) != 0)
		return prs_err_set(err, -EIO, "report fixture modules: %s", dwfl_errmsg(-1));
	return 0;
}

static int dwfl_report(struct prs_unwinder *u, struct prs_err *err)
{
	int r;

	if (u->root)
		return dwfl_report_offline_maps(u, err);
	dwfl_report_begin(u->dwfl);
	r = dwfl_linux_proc_report(u->dwfl, u->pid);
	if (dwfl_report_end(u->dwfl, NULL, NULL) != 0 && r == 0)
		r = -1;
	if (r < 0)
		return prs_err_set(err, -EIO, "report modules of pid %d: %s", (int)u->pid,
				   dwfl_errmsg(-1));
	if (r > 0)
		return prs_err_set(err, r == ENOENT ? -ESRCH : -r, "report modules of pid %d: %s",
				   (int)u->pid, strerror(r));
	return 0;
}

static int frame_cb(Dwfl_Frame *state, void *arg)
{
	struct prs_unwinder *u = arg;
	Dwarf_Addr pc;
	Dwarf_Word sp;
	bool act;

	if (!dwfl_frame_pc(state, &pc, &act)) {
		u->dwfl_end = PRS_UNWIND_END_ERROR;
		return DWARF_CB_ABORT;
	}
	/* Bound the walk: the stack pointer of each caller must be above the previous one. */
	if (dwfl_frame_reg(state, PRS_REG_RSP, &sp) == 0) {
		if (u->out_n > 0 && sp <= u->last_sp) {
			u->dwfl_end = PRS_UNWIND_END_BAD_FRAME;
			return DWARF_CB_ABORT;
		}
		u->last_sp = sp;
	}
	if (u->out_n > 0 && pc == 0) {
		u->dwfl_end = PRS_UNWIND_END_CLEAN;
		return DWARF_CB_ABORT;
	}
	u->out_pcs[u->out_n++] = pc;
	if (u->out_n >= u->out_max) {
		u->dwfl_end = PRS_UNWIND_END_MAX;
		return DWARF_CB_ABORT;
	}
	return DWARF_CB_OK;
}

static int unwind_dwfl(struct prs_unwinder *u, uint64_t *pcs, int max, struct prs_unwind_info *info)
{
	int r;

	u->out_pcs = pcs;
	u->out_max = max;
	u->out_n = 0;
	u->last_sp = 0;
	u->read_failed = false;
	u->dwfl_end = PRS_UNWIND_END_CLEAN;
	r = dwfl_getthread_frames(u->dwfl, u->pid, frame_cb, u);
	if (r == -1) {
		if (u->read_failed)
			u->dwfl_end = PRS_UNWIND_END_READ;
		else if (dwfl_errmsg(-1) && (strstr(dwfl_errmsg(-1), "address range") ||
					    strstr(dwfl_errmsg(-1), "DWARF")))
			u->dwfl_end = PRS_UNWIND_END_NO_CFI;
		else
			u->dwfl_end = PRS_UNWIND_END_ERROR;
	}
	if (u->out_n == 0 && max > 0 && u->cur_regs->r[PRS_REG_RIP] != 0) {
		/* libdw found nothing (no module at RIP): the interrupted PC is still a frame. */
		pcs[0] = u->cur_regs->r[PRS_REG_RIP];
		u->out_n = 1;
	}
	info->end = u->dwfl_end;
	info->method = PRS_UNWIND_DWFL;
	return u->out_n;
}

/* ---- FAST: cached CFI rows ---------------------------------------------------------------- */

static inline uint32_t cache_hash(uint64_t key)
{
	return (uint32_t)((key * 0x9e3779b97f4a7c15ull) >> (64 - CACHE_BITS));
}

/* Reads a "saved at CFA + N" rule out of a dwarf_frame_register result. */
static bool parse_reg_rule(int rc, const Dwarf_Op *ops, size_t nops, uint8_t *rule, int32_t *off)
{
	if (rc != 0)
		return false;
	if (nops == 0) {
		*rule = ops == NULL ? RULE_SAME : RULE_UNDEF;
		*off = 0;
		return true;
	}
	if (ops[0].atom != DW_OP_call_frame_cfa)
		return false;
	if (nops == 1) {
		*rule = RULE_OFFSET;
		*off = 0;
		return true;
	}
	if (nops == 2 && ops[1].atom == DW_OP_plus_uconst) {
		int64_t o = (int64_t)ops[1].number;

		if (o < INT32_MIN || o > INT32_MAX)
			return false;
		*rule = RULE_OFFSET;
		*off = (int32_t)o;
		return true;
	}
	return false; /* register rule, val_offset (DW_OP_stack_value) or an expression */
}

/*
 * The CFA expression binutils emits for x86_64 .plt entries (the push of the relocation index
 * moves RSP by 8 at byte 11 of a 16-byte entry, 10 with IBT):
 *   DW_OP_breg7 8; DW_OP_breg16 0; DW_OP_lit15; DW_OP_and; DW_OP_litK; DW_OP_ge; DW_OP_lit3;
 *   DW_OP_shl; DW_OP_plus
 * Programs that call through the PLT (CPython does, constantly) would otherwise send every
 * sample interrupted in a PLT stub to Dwfl.
 */
static bool is_plt_expr(const Dwarf_Op *o, size_t n, uint8_t *k)
{
	if (n != 9 || o[0].atom != DW_OP_breg7 || o[0].number != 8 || o[1].atom != DW_OP_breg16 ||
	    o[1].number != 0 || o[2].atom != DW_OP_lit15 || o[3].atom != DW_OP_and ||
	    o[4].atom < DW_OP_lit0 || o[4].atom > DW_OP_lit15 || o[5].atom != DW_OP_ge ||
	    o[6].atom != DW_OP_lit3 || o[7].atom != DW_OP_shl || o[8].atom != DW_OP_plus)
		return false;
	*k = (uint8_t)(o[4].atom - DW_OP_lit0);
	return true;
}

static void decode_row(Dwarf_CFI *cfi, Dwarf_Addr bias, uint64_t key, struct row *r, bool *found)
{
	Dwarf_Frame *fr = NULL;
	Dwarf_Op mem[3], *ops;
	size_t nops;
	bool signalp = false;
	int ra, rc;

	*found = false;
	if (!cfi || dwarf_cfi_addrframe(cfi, key - bias, &fr) != 0)
		return;
	*found = true;
	r->kind = ROW_UNSUPPORTED;
	ra = dwarf_frame_info(fr, NULL, NULL, &signalp);
	if (ra != PRS_REG_RIP || signalp)
		goto out;
	if (dwarf_frame_cfa(fr, &ops, &nops) != 0)
		goto out;
	if (is_plt_expr(ops, nops, &r->plt_k)) {
		r->cfa_reg = CFA_PLT;
		r->cfa_off = 8;
	} else {
		if (nops != 1 || ops[0].atom != DW_OP_bregx ||
		    (ops[0].number != PRS_REG_RSP && ops[0].number != PRS_REG_RBP))
			goto out;
		if ((int64_t)ops[0].number2 < INT32_MIN || (int64_t)ops[0].number2 > INT32_MAX)
			goto out;
		r->cfa_reg = (uint8_t)ops[0].number;
		r->cfa_off = (int32_t)(int64_t)ops[0].number2;
	}
	/* (separate statements: ops and nops are out-parameters of dwarf_frame_register) */
	rc = dwarf_frame_register(fr, PRS_REG_RIP, mem, &ops, &nops);
	if (!parse_reg_rule(rc, ops, nops, &r->ra_rule, &r->ra_off) || r->ra_rule == RULE_SAME)
		goto out;
	rc = dwarf_frame_register(fr, PRS_REG_RBP, mem, &ops, &nops);
	if (!parse_reg_rule(rc, ops, nops, &r->rbp_rule, &r->rbp_off))
		goto out;
	r->kind = ROW_OK;
out:
	free(fr);
}

/* Returns the row for key, decoding it from libdw's CFI on a miss. Never NULL. */
static const struct row *lookup_row(struct prs_unwinder *u, uint64_t key, unsigned *misses)
{
	uint32_t h = cache_hash(key);
	struct row *slot = NULL, *r;
	Dwfl_Module *mod;
	Dwarf_Addr bias;
	bool found = false;

	for (unsigned i = 0; i < CACHE_PROBES; i++) {
		r = &u->cache[(h + i) & (CACHE_SIZE - 1)];
		if (r->kind == ROW_EMPTY) {
			slot = r;
			break;
		}
		if (r->key == key)
			return r;
	}
	if (!slot)
		slot = &u->cache[h]; /* full probe window: evict the home slot */
	(*misses)++;
	memset(slot, 0, sizeof(*slot));
	slot->key = key;
	slot->kind = ROW_NO_CFI;
	mod = dwfl_addrmodule(u->dwfl, key);
	if (mod) {
		/* (two statements each: the bias is an out-parameter of the CFI lookup) */
		Dwarf_CFI *cfi = dwfl_module_eh_cfi(mod, &bias);

		decode_row(cfi, bias, key, slot, &found);
		if (!found) {
			cfi = dwfl_module_dwarf_cfi(mod, &bias);
			decode_row(cfi, bias, key, slot, &found);
		}
		if (!found)
			slot->kind = ROW_NO_CFI;
	}
	return slot;
}

static int unwind_fast(struct prs_unwinder *u, uint64_t *pcs, int max, struct prs_unwind_info *info,
		       bool fp_only)
{
	uint64_t pc = u->cur_regs->r[PRS_REG_RIP];
	uint64_t sp = u->cur_regs->r[PRS_REG_RSP];
	uint64_t bp = u->cur_regs->r[PRS_REG_RBP];
	bool bp_known = true;
	int n = 0;

	info->end = PRS_UNWIND_END_CLEAN;
	if (pc == 0 || max <= 0) {
		info->end = max <= 0 ? PRS_UNWIND_END_MAX : PRS_UNWIND_END_BAD_FRAME;
		return 0;
	}
	pcs[n++] = pc;
	for (;;) {
		const struct row *r;
		uint64_t cfa, ra;

		if (n >= max) {
			info->end = PRS_UNWIND_END_MAX;
			break;
		}
		r = fp_only ? NULL : lookup_row(u, n == 1 ? pc : pc - 1, &info->cache_misses);
		if (r && r->kind == ROW_UNSUPPORTED) {
			info->end = PRS_UNWIND_END_UNSUPPORTED;
			break;
		}
		if (!r || r->kind == ROW_NO_CFI) {
			/* Frame-pointer step: [bp] = caller's bp, [bp + 8] = return address. */
			uint64_t nbp;

			if (!bp_known || bp < sp || (bp & 7) || bp > UINT64_MAX - 16) {
				info->end = PRS_UNWIND_END_NO_CFI;
				break;
			}
			if (read_mem(u, bp, &nbp, 8) || read_mem(u, bp + 8, &ra, 8)) {
				info->end = PRS_UNWIND_END_READ;
				break;
			}
			cfa = bp + 16;
			bp = nbp;
			info->fp_frames++;
		} else {
			uint64_t base;

			if (r->cfa_reg == PRS_REG_RBP && !bp_known) {
				info->end = PRS_UNWIND_END_UNSUPPORTED;
				break;
			}
			base = r->cfa_reg == PRS_REG_RBP ? bp : sp;
			cfa = base + (uint64_t)(int64_t)r->cfa_off;
			if (r->cfa_reg == CFA_PLT && (pc & 15) >= r->plt_k)
				cfa += 8;
			if (r->ra_rule == RULE_UNDEF) {
				info->end = PRS_UNWIND_END_CLEAN;
				break;
			}
			if (read_mem(u, cfa + (uint64_t)(int64_t)r->ra_off, &ra, 8)) {
				info->end = PRS_UNWIND_END_READ;
				break;
			}
			if (r->rbp_rule == RULE_OFFSET) {
				if (read_mem(u, cfa + (uint64_t)(int64_t)r->rbp_off, &bp, 8)) {
					info->end = PRS_UNWIND_END_READ;
					break;
				}
			} else if (r->rbp_rule == RULE_UNDEF) {
				bp_known = false;
			}
		}
		/* The caller's SP (the CFA) must be strictly above ours: no cycles, bounded walk. */
		if (cfa <= sp) {
			info->end = PRS_UNWIND_END_BAD_FRAME;
			break;
		}
		sp = cfa;
		pc = ra;
		if (pc == 0) {
			info->end = PRS_UNWIND_END_CLEAN;
			break;
		}
		pcs[n++] = pc;
	}
	info->method = fp_only ? PRS_UNWIND_FP : PRS_UNWIND_FAST;
	return n;
}

/* ---- lifecycle ---------------------------------------------------------------------------- */

/* Common part of new and new_offline: u->pid, u->root and u->text are set. */
static int unwinder_init(struct prs_unwinder *u, struct prs_err *err)
{
	static const Dwfl_Callbacks offline_callbacks = {
		.find_elf = dwfl_build_id_find_elf,
		.find_debuginfo = dwfl_standard_find_debuginfo,
		.section_address = dwfl_offline_section_address,
		.debuginfo_path = &debuginfo_path,
	};
	int rc;

	u->generation = 1;
	u->cache = calloc(CACHE_SIZE, sizeof(*u->cache));
	u->dwfl = dwfl_begin(u->root ? &offline_callbacks : &proc_callbacks);
	if (!u->cache || !u->dwfl)
		return prs_err_set(err, -ENOMEM, "unwinder for pid %d: out of memory", (int)u->pid);
	rc = prs_maps_parse(u->text, u->text_len, &u->maps, err);
	if (rc)
		return rc;
	u->lmaps = calloc(u->maps.n ? u->maps.n : 1, sizeof(*u->lmaps));
	if (!u->lmaps)
		return prs_err_set(err, -ENOMEM, "unwinder for pid %d: out of memory", (int)u->pid);
	rc = dwfl_report(u, err);
	if (rc)
		return rc;
	/* dwfl_attach_state wants a pid; offline it is only a label (dwfl_getthread_frames' tid). */
	if (u->root)
		u->pid = 0;
	if (!dwfl_attach_state(u->dwfl, NULL, u->pid > 0 ? u->pid : 1, &thread_callbacks, u))
		return prs_err_set(err, -EIO, "attach unwind state to pid %d: %s", (int)u->pid,
				   dwfl_errmsg(-1));
	return 0;
}

int prs_unwinder_new(pid_t pid, struct prs_unwinder **out, struct prs_err *err)
{
	struct prs_unwinder *u;
	int rc;

	*out = NULL;
	u = calloc(1, sizeof(*u));
	if (!u)
		return prs_err_set(err, -ENOMEM, "unwinder for pid %d: out of memory", (int)pid);
	u->pid = pid;
	rc = prs_maps_read_text(pid, &u->text, &u->text_cap, &u->text_len, err);
	if (rc == 0)
		rc = unwinder_init(u, err);
	if (rc) {
		prs_unwinder_free(u);
		return rc;
	}
	*out = u;
	return 0;
}

int prs_unwinder_new_offline(const char *maps_text, size_t len, const char *dir,
			     struct prs_unwinder **out, struct prs_err *err)
{
	struct prs_unwinder *u;
	int rc;

	*out = NULL;
	u = calloc(1, sizeof(*u));
	if (!u || !(u->root = strdup(dir)) || !(u->text = malloc(len + 1))) {
		prs_unwinder_free(u);
		return prs_err_set(err, -ENOMEM, "offline unwinder: out of memory");
	}
	memcpy(u->text, maps_text, len);
	u->text_len = len;
	u->text_cap = len + 1;
	u->pid = -1;
	rc = unwinder_init(u, err);
	if (rc) {
		prs_unwinder_free(u);
		return rc;
	}
	*out = u;
	return 0;
}

void prs_unwinder_free(struct prs_unwinder *u)
{
	if (!u)
		return;
	if (u->dwfl)
		dwfl_end(u->dwfl);
	lmaps_drop(u);
	prs_maps_release(&u->maps);
	free(u->text);
	free(u->root);
	free(u->scratch);
	free(u->cache);
	free(u);
}

void prs_unwinder_set_method(struct prs_unwinder *u, enum prs_unwind_method m)
{
	u->method = m;
}

const struct prs_maps *prs_unwinder_maps(const struct prs_unwinder *u)
{
	return &u->maps;
}

uint64_t prs_unwinder_generation(const struct prs_unwinder *u)
{
	return u->generation;
}

int prs_unwinder_refresh(struct prs_unwinder *u, struct prs_err *err)
{
	struct prs_maps nm = PRS_MAPS_INIT;
	struct lmap *nl;
	size_t len = 0;
	int rc;
	char *t;

	if (u->root)
		return 0; /* offline: the maps never change */
	rc = prs_maps_read_text(u->pid, &u->scratch, &u->scratch_cap, &len, err);
	if (rc)
		return rc == -ENOENT ? -ESRCH : rc;
	if (len == u->text_len && memcmp(u->scratch, u->text, len) == 0)
		return 0;
	rc = prs_maps_parse(u->scratch, len, &nm, err);
	if (rc)
		return rc;
	nl = calloc(nm.n ? nm.n : 1, sizeof(*nl));
	if (!nl) {
		prs_maps_release(&nm);
		return prs_err_set(err, -ENOMEM, "refresh pid %d: out of memory", (int)u->pid);
	}
	lmaps_drop(u);
	prs_maps_release(&u->maps);
	u->maps = nm;
	u->lmaps = nl;
	t = u->text;
	u->text = u->scratch;
	u->scratch = t;
	{
		size_t c = u->text_cap;

		u->text_cap = u->scratch_cap;
		u->scratch_cap = c;
	}
	u->text_len = len;
	memset(u->cache, 0, CACHE_SIZE * sizeof(*u->cache));
	u->generation++;
	return dwfl_report(u, err);
}

int prs_unwind(struct prs_unwinder *u, const struct prs_regs *regs, const struct prs_snapshot *snap,
	       uint64_t *pcs, int max, struct prs_unwind_info *info)
{
	struct prs_unwind_info tmp;
	int n;

	if (!info)
		info = &tmp;
	memset(info, 0, sizeof(*info));
	if (max > PRS_MAX_NATIVE_FRAMES)
		max = PRS_MAX_NATIVE_FRAMES;
	if (max <= 0 || !regs) {
		info->end = max <= 0 ? PRS_UNWIND_END_MAX : PRS_UNWIND_END_BAD_FRAME;
		info->flags = max <= 0 ? PRS_UNWIND_TRUNCATED : PRS_UNWIND_INCOMPLETE;
		return 0;
	}
	u->cur_regs = regs;
	u->cur_snap = snap;
	u->remote_reads = 0;
	u->snap_used = 0;
	switch (u->method) {
	case PRS_UNWIND_DWFL:
		n = unwind_dwfl(u, pcs, max, info);
		break;
	case PRS_UNWIND_FP:
		n = unwind_fast(u, pcs, max, info, true);
		break;
	case PRS_UNWIND_FAST:
		n = unwind_fast(u, pcs, max, info, false);
		break;
	case PRS_UNWIND_AUTO:
	default:
		n = unwind_fast(u, pcs, max, info, false);
		if (info->end == PRS_UNWIND_END_UNSUPPORTED) {
			unsigned misses = info->cache_misses;

			memset(info, 0, sizeof(*info));
			info->cache_misses = misses;
			n = unwind_dwfl(u, pcs, max, info);
		}
		break;
	}
	info->remote_reads = u->remote_reads;
	info->snap_used = u->snap_used;
	if (info->end == PRS_UNWIND_END_MAX)
		info->flags |= PRS_UNWIND_TRUNCATED;
	else if (info->end != PRS_UNWIND_END_CLEAN)
		info->flags |= PRS_UNWIND_INCOMPLETE;
	if (info->fp_frames)
		info->flags |= PRS_UNWIND_USED_FP;
	if (info->method == PRS_UNWIND_DWFL)
		info->flags |= PRS_UNWIND_USED_DWFL;
	u->cur_regs = NULL;
	u->cur_snap = NULL;
	return n;
}
