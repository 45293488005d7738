// SPDX-License-Identifier: MIT
/*
 * The symbolizer: raw native PCs -> inline chains of named frames with file:line.
 *
 * One module per (path, recorded build id): the file is opened once, its build id checked against
 * the recorded one, and reported to a Dwfl of its own with dwfl_report_elf (base 0; every lookup
 * adds the module bias libdwfl reports, so ET_DYN placement is never assumed). A target address is
 * turned into a file offset with the mapping (start, offset) and then into an ELF address with
 * the PT_LOAD program header containing that offset (rust-lld binaries have p_vaddr != p_offset).
 *
 * Names come from DWARF when there is any: per compilation unit we build, once, a sorted table of
 * the PC ranges of all its subprograms, descending into DW_TAG_namespace / structure / class
 * DIEs (rustc nests every function in namespaces without PC ranges, which is why
 * dwarf_getscopes and eu-addr2line -i find no Rust inlines; the rust_matches_binutils_addr2line
 * tests of tests/unit/test_symbol.c compare ours with binutils'). Inside the
 * subprogram found, inlined_subroutine and lexical_block children are followed with dwarf_haspc
 * to get the inline chain. Without DWARF, a sorted table of the module's STT_FUNC symbols,
 * built once, gives the name (dwfl_module_addrinfo scans linearly: 89-387 us per call on
 * libpython). Results are cached per (module, file offset), negative results included.
 *
 * Names without a linkage name are qualified by their enclosing namespaces, types and functions
 * (a C++ lambda: main::{lambda}::operator()). Costs, measured (bench-symbol): the first PC of a
 * CU pays libdw's line table decoding (0.75 us per row: 98 ms for libpython's unicodeobject.c) and
 * our CU walk (0.6 ms per libpython CU); a separate debug file with compressed sections (Debian's
 * libc6-dbg) costs 45-210 ms to open, all in zlib.
 *
 * Without any symbol covering a PC (a stripped binary's static functions: most of Debian's
 * python3), the function ranges of .eh_frame (eh_frame.c), read once per build id, name it after
 * its function's start: "python3.11!fn+0x10ba80". A sizeless symbol (assembly) is taken to cover
 * a PC only when no FDE starting after it does.
 *
 * Separate debug files are searched by debuginfo.c (build id, .gnu_debuglink, debuginfod when the
 * options allow it). [vdso] is read from our own vDSO.
 */
#include "pyrsprof/symbol.h"

#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>

#include "pyrsprof/kallsyms.h"
#include "symbol/symbol-internal.h"
#include "util/banned.h"

/* Bounds on hostile DWARF: DIEs visited per CU index, nesting depth, ranges kept per CU. */
#define CU_WALK_MAX_DIES (8u << 20)
#define CU_WALK_MAX_DEPTH 64
#define CU_MAX_RANGES (4u << 20)
#define INLINE_WALK_MAX_DIES (1u << 20)
#define MAX_SYMBOLS (16u << 20)
#define MAX_PHDRS 256
#define PATH_MAX_LEN 4096
#define ORIGIN_MAX_HOPS 16
#define NAME_MAX_LEN PRS_MAX_NAME

/* ---- strings: an arena of stable, interned, NUL-terminated strings ---- */

struct chunk {
	struct chunk *next;
	size_t used, cap;
	char data[];
};

struct strtab {
	struct chunk *chunks;
	const char **slots; /* open addressing, power of two */
	uint64_t *hashes;
	size_t nslots, n;
};

static uint64_t hash_bytes(const void *p, size_t n, uint64_t h)
{
	const unsigned char *s = p;

	for (size_t i = 0; i < n; i++) {
		h ^= s[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

static uint64_t hash_u64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return x;
}

static int strtab_grow(struct strtab *t)
{
	size_t nn = t->nslots ? t->nslots * 2 : 1024;
	const char **slots = calloc(nn, sizeof(*slots));
	uint64_t *hashes = calloc(nn, sizeof(*hashes));

	if (!slots || !hashes) {
		free(slots);
		free(hashes);
		return -ENOMEM;
	}
	for (size_t i = 0; i < t->nslots; i++) {
		size_t j;

		if (!t->slots[i])
			continue;
		for (j = t->hashes[i] & (nn - 1); slots[j]; j = (j + 1) & (nn - 1))
			;
		slots[j] = t->slots[i];
		hashes[j] = t->hashes[i];
	}
	free(t->slots);
	free(t->hashes);
	t->slots = slots;
	t->hashes = hashes;
	t->nslots = nn;
	return 0;
}

/* Returns a stable copy of s[0..len) (truncated to NAME_MAX_LEN), or NULL when out of memory. */
static const char *strtab_intern(struct strtab *t, const char *s, size_t len)
{
	uint64_t h;
	size_t j;
	char *copy;

	if (len > NAME_MAX_LEN) {
		/* cut before a UTF-8 continuation byte: a valid name stays valid (Rust allows Unicode) */
		len = NAME_MAX_LEN;
		while (len > 0 && ((unsigned char)s[len] & 0xc0) == 0x80)
			len--;
	}
	if ((t->n + 1) * 2 > t->nslots && strtab_grow(t))
		return NULL;
	h = hash_bytes(s, len, 0xcbf29ce484222325ull);
	for (j = h & (t->nslots - 1); t->slots[j]; j = (j + 1) & (t->nslots - 1)) {
		if (t->hashes[j] == h && strncmp(t->slots[j], s, len) == 0 && t->slots[j][len] == '\0')
			return t->slots[j];
	}
	if (!t->chunks || t->chunks->cap - t->chunks->used < len + 1) {
		size_t cap = len + 1 > 60000 ? len + 1 : 60000;
		struct chunk *c = malloc(sizeof(*c) + cap);

		if (!c)
			return NULL;
		c->next = t->chunks;
		c->used = 0;
		c->cap = cap;
		t->chunks = c;
	}
	copy = t->chunks->data + t->chunks->used;
	memcpy(copy, s, len);
	copy[len] = '\0';
	t->chunks->used += len + 1;
	t->slots[j] = copy;
	t->hashes[j] = h;
	t->n++;
	return copy;
}

static void strtab_release(struct strtab *t)
{
	struct chunk *c = t->chunks, *next;

	for (; c; c = next) {
		next = c->next;
		free(c);
	}
	free(t->slots);
	free(t->hashes);
	memset(t, 0, sizeof(*t));
}

/* ---- per-module tables ---- */

struct sym {
	uint64_t addr, size; /* dwfl addresses */
	const char *name;    /* libdwfl's string table; valid while the Dwfl lives */
	uint8_t bind_rank;   /* 0 global, 1 weak, 2 local: lower wins among equal addresses */
};

struct fnrange {
	uint64_t lo, hi; /* DWARF addresses */
	Dwarf_Die die;
};

struct cuidx {
	Dwarf_Off off;
	struct fnrange *r;
	size_t n;
};

/* cache entry: key = file offset + 1 (0 = empty slot) -> frames pool [first, first + count) */
struct centry {
	uint64_t key;
	uint32_t first, count;
};

struct phdr {
	uint64_t offset, filesz, vaddr;
	bool exec;
};

enum mod_state { MOD_OK, MOD_MISSING, MOD_MISMATCH };

struct module {
	char *path; /* key, as given (without root) */
	uint8_t build_id[PRS_BUILD_ID_MAX_SYM];
	size_t build_id_len;
	uint64_t key_hash;
	enum mod_state state;
	int fd;
	Dwfl *dwfl;
	Dwfl_Module *mod;
	uint64_t bias; /* dwfl address = ELF address + bias */
	uint8_t file_id[PRS_BUILD_ID_MAX_SYM]; /* the file's own build id (the recorded one may be absent) */
	size_t file_id_len;
	struct phdr phdrs[MAX_PHDRS];
	size_t nphdrs;
	bool syms_loaded, dwarf_tried, fns_loaded;
	const struct prs_fntab *fns; /* borrowed from the symbolizer's fntabs */
	struct sym *syms;
	size_t nsyms;
	Dwarf *dw;
	uint64_t dwbias;
	struct cuidx *cus;
	size_t ncus, capcus;
	struct centry *cache;
	size_t ncache, capcache;
};

/* A function table read from .eh_frame, shared by the modules of one build id. */
struct fntab {
	struct fntab *next;
	uint8_t id[PRS_BUILD_ID_MAX_SYM];
	size_t idlen; /* 0: a file without a build id, not shared */
	struct prs_fntab t;
};

struct prs_symbolizer {
	struct prs_debugsearch debug; /* options: root, debug folders, debuginfod */
	struct fntab *fntabs;
	struct module **mods; /* open addressing by key_hash */
	size_t nmods_slots, nmods;
	struct module *last;
	struct strtab strings;
	struct prs_symframe *pool;
	size_t npool, cappool;
	struct prs_symbolize_stats st;
	struct prs_kallsyms *ksyms; /* for kernel frames, loaded when first needed */
	bool ksyms_tried;
};

static const Dwfl_Callbacks dwfl_callbacks = {
	.find_elf = dwfl_build_id_find_elf,
	.find_debuginfo = prs_find_debuginfo,
	.section_address = dwfl_offline_section_address,
};

/* ---- module lifecycle ---- */

static void module_free(struct module *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->ncus; i++)
		free(m->cus[i].r);
	free(m->cus);
	free(m->syms);
	free(m->cache);
	if (m->dwfl)
		dwfl_end(m->dwfl);
	if (m->fd >= 0)
		close(m->fd);
	free(m->path);
	free(m);
}

static uint64_t module_key(const char *path, size_t plen, const uint8_t *id, size_t idlen)
{
	return hash_bytes(id, idlen, hash_bytes(path, plen, 0xcbf29ce484222325ull));
}

#define VDSO_NAME "[vdso]"
#define VDSO_MAX_BYTES (1u << 20)

/*
 * The target's [vdso] is the kernel's vDSO image, the same in every process of this kernel: we
 * symbolize it with our own copy (AT_SYSINFO_EHDR), written to a memfd so libdwfl can read it
 * like a file. Its size is the extent of the ELF (section headers are at the end), bounded.
 * A recorded build id, when there is one, is still checked (a profile read on another machine).
 */
static int vdso_fd(void)
{
	const unsigned char *img = (const void *)getauxval(AT_SYSINFO_EHDR);
	const Elf64_Ehdr *eh = (const void *)img;
	uint64_t size;
	int fd;

	if (!img || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh->e_shentsize != sizeof(Elf64_Shdr))
		return -1;
	size = eh->e_shoff + (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr);
	if (size < sizeof(*eh) || size > VDSO_MAX_BYTES)
		return -1;
	fd = memfd_create("pyrsprof-vdso", MFD_CLOEXEC);
	if (fd < 0)
		return -1;
	if (write(fd, img, size) != (ssize_t)size) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Opens the file of a new module and sets its state. Only ENOMEM is an error. */
static int module_open(struct prs_symbolizer *s, struct module *m)
{
	char full[PATH_MAX_LEN];
	Elf *elf = NULL;
	GElf_Addr bias = 0;
	size_t nph = 0;
	int n;

	s->st.files++;
	m->state = MOD_MISSING;
	if (strcmp(m->path, VDSO_NAME) == 0) {
		snprintf(full, sizeof(full), "%s", VDSO_NAME);
		m->fd = vdso_fd();
	} else {
		n = snprintf(full, sizeof(full), "%s%s", s->debug.root, m->path);
		if (n <= 0 || (size_t)n >= sizeof(full))
			goto missing;
		m->fd = open(full, O_RDONLY | O_CLOEXEC);
	}
	if (m->fd < 0)
		goto missing;
	elf = elf_begin(m->fd, ELF_C_READ_MMAP, NULL);
	if (!elf || elf_kind(elf) != ELF_K_ELF)
		goto missing;
	if (prs_elf_build_id_elf(elf, m->file_id, sizeof(m->file_id), &m->file_id_len) != 0)
		m->file_id_len = 0;
	if (m->build_id_len && (m->file_id_len != m->build_id_len ||
				memcmp(m->file_id, m->build_id, m->build_id_len) != 0)) {
		m->state = MOD_MISMATCH;
		s->st.build_id_mismatches++;
		goto out;
	}
	if (elf_getphdrnum(elf, &nph) != 0)
		goto missing;
	for (size_t i = 0; i < nph && i < 4096 && m->nphdrs < MAX_PHDRS; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		m->phdrs[m->nphdrs++] = (struct phdr){ ph.p_offset, ph.p_filesz, ph.p_vaddr,
						       (ph.p_flags & PF_X) != 0 };
	}
	elf_end(elf);
	elf = NULL;
	m->dwfl = dwfl_begin(&dwfl_callbacks);
	if (!m->dwfl)
		return -ENOMEM;
	dwfl_report_begin(m->dwfl);
	/* libdwfl does not close an fd it is given (closefd is false); we close it in module_free. */
	m->mod = dwfl_report_elf(m->dwfl, m->path, full, m->fd, 0, false);
	dwfl_report_end(m->dwfl, NULL, NULL);
	if (!m->mod || !dwfl_module_getelf(m->mod, &bias))
		goto missing;
	{
		void **ud = NULL;

		/* what prs_find_debuginfo gets when libdwfl asks for this module's debug file */
		if (dwfl_module_info(m->mod, &ud, NULL, NULL, NULL, NULL, NULL, NULL) && ud)
			*ud = &s->debug;
	}
	m->bias = bias;
	m->state = MOD_OK;
	goto out;
missing:
	s->st.files_missing++;
out:
	if (elf)
		elf_end(elf);
	return 0;
}

static int modtab_grow(struct prs_symbolizer *s)
{
	size_t nn = s->nmods_slots ? s->nmods_slots * 2 : 64;
	struct module **slots = calloc(nn, sizeof(*slots));

	if (!slots)
		return -ENOMEM;
	for (size_t i = 0; i < s->nmods_slots; i++) {
		struct module *m = s->mods[i];
		size_t j;

		if (!m)
			continue;
		for (j = m->key_hash & (nn - 1); slots[j]; j = (j + 1) & (nn - 1))
			;
		slots[j] = m;
	}
	free(s->mods);
	s->mods = slots;
	s->nmods_slots = nn;
	return 0;
}

static bool module_matches(const struct module *m, uint64_t h, const char *path, size_t plen,
			   const uint8_t *id, size_t idlen)
{
	return m->key_hash == h && m->build_id_len == idlen && strncmp(m->path, path, plen) == 0 &&
	       m->path[plen] == '\0' && (idlen == 0 || memcmp(m->build_id, id, idlen) == 0);
}

/* Finds or opens the module of map. Returns 0 and *out, or -ENOMEM. */
static int module_get(struct prs_symbolizer *s, const struct prs_symmap *map, struct module **out)
{
	static const char deleted[] = " (deleted)";
	const char *path = map->path;
	size_t plen = strnlen(path, PATH_MAX_LEN), idlen = map->build_id ? map->build_id_len : 0;
	const uint8_t *id = idlen ? map->build_id : NULL;
	struct module *m;
	uint64_t h;
	size_t j;
	int rc;

	if (idlen > PRS_BUILD_ID_MAX_SYM)
		idlen = PRS_BUILD_ID_MAX_SYM;
	if (plen >= sizeof(deleted) && strcmp(path + plen - (sizeof(deleted) - 1), deleted) == 0)
		plen -= sizeof(deleted) - 1;
	h = module_key(path, plen, id, idlen);
	if (s->last && module_matches(s->last, h, path, plen, id, idlen)) {
		*out = s->last;
		return 0;
	}
	if ((s->nmods + 1) * 2 > s->nmods_slots && (rc = modtab_grow(s)))
		return rc;
	for (j = h & (s->nmods_slots - 1); (m = s->mods[j]); j = (j + 1) & (s->nmods_slots - 1)) {
		if (module_matches(m, h, path, plen, id, idlen)) {
			*out = s->last = m;
			return 0;
		}
	}
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->fd = -1;
	m->path = strndup(path, plen);
	if (!m->path) {
		free(m);
		return -ENOMEM;
	}
	if (idlen)
		memcpy(m->build_id, id, idlen);
	m->build_id_len = idlen;
	m->key_hash = h;
	rc = module_open(s, m);
	if (rc) {
		module_free(m);
		return rc;
	}
	s->mods[j] = m;
	s->nmods++;
	*out = s->last = m;
	return 0;
}

/* ---- symbol table ---- */

static int sym_cmp(const void *a, const void *b)
{
	const struct sym *x = a, *y = b;

	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	if (x->bind_rank != y->bind_rank)
		return x->bind_rank < y->bind_rank ? -1 : 1;
	return (x->size < y->size) - (x->size > y->size); /* larger size first */
}

static int load_symbols(struct module *m)
{
	int n;
	size_t cap = 0, k = 0;

	m->syms_loaded = true;
	n = dwfl_module_getsymtab(m->mod);
	if (n <= 0)
		return 0;
	for (int i = 1; i < n && (size_t)i < MAX_SYMBOLS; i++) {
		GElf_Sym sym;
		GElf_Addr addr;
		GElf_Word shndx;
		const char *name = dwfl_module_getsym_info(m->mod, i, &sym, &addr, &shndx, NULL, NULL);
		int type = GELF_ST_TYPE(sym.st_info), bind = GELF_ST_BIND(sym.st_info);

		if (!name || !name[0] || (type != STT_FUNC && type != STT_GNU_IFUNC) ||
		    shndx == SHN_UNDEF || addr == 0)
			continue;
		if (m->nsyms == cap) {
			size_t nc = cap ? cap * 2 : 1024;
			struct sym *ns = realloc(m->syms, nc * sizeof(*ns));

			if (!ns)
				return -ENOMEM;
			m->syms = ns;
			cap = nc;
		}
		m->syms[m->nsyms++] = (struct sym){ addr, sym.st_size, name,
						    bind == STB_GLOBAL ? 0 : bind == STB_WEAK ? 1 : 2 };
	}
	if (m->nsyms)
		qsort(m->syms, m->nsyms, sizeof(*m->syms), sym_cmp);
	/* keep one symbol per address: the best ranked (sorted first) */
	for (size_t i = 0; i < m->nsyms; i++) {
		if (k && m->syms[k - 1].addr == m->syms[i].addr)
			continue;
		m->syms[k++] = m->syms[i];
	}
	m->nsyms = k;
	return 0;
}

static const struct sym *find_symbol(const struct module *m, uint64_t a)
{
	size_t lo = 0, hi = m->nsyms;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (m->syms[mid].addr <= a)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* lo = first symbol above a; look back over a few for one that covers a */
	for (size_t i = lo, steps = 0; i > 0 && steps < 16; i--, steps++) {
		const struct sym *c = &m->syms[i - 1];

		if (c->size == 0)
			return steps == 0 ? c : NULL; /* sizeless (asm): nearest one below */
		if (a - c->addr < c->size)
			return c;
	}
	return NULL;
}

/* ---- DWARF: per-CU function range index ---- */

static int fnrange_cmp(const void *a, const void *b)
{
	const struct fnrange *x = a, *y = b;

	if (x->lo != y->lo)
		return x->lo < y->lo ? -1 : 1;
	return (x->hi > y->hi) - (x->hi < y->hi);
}

struct walk {
	struct cuidx *ci;
	size_t cap, dies;
	int err;
};

static void add_ranges(struct walk *w, Dwarf_Die *die)
{
	Dwarf_Addr base, start, end;
	ptrdiff_t off = 0;
	int guard = 0;

	while ((off = dwarf_ranges(die, off, &base, &start, &end)) > 0 && guard++ < 4096) {
		if (end <= start)
			continue;
		if (w->ci->n == w->cap) {
			size_t nc = w->cap ? w->cap * 2 : 256;
			struct fnrange *nr;

			if (nc > CU_MAX_RANGES)
				return;
			nr = realloc(w->ci->r, nc * sizeof(*nr));
			if (!nr) {
				w->err = -ENOMEM;
				return;
			}
			w->ci->r = nr;
			w->cap = nc;
		}
		w->ci->r[w->ci->n++] = (struct fnrange){ start, end, *die };
	}
}

static void walk_scope(struct walk *w, Dwarf_Die *parent, int depth)
{
	Dwarf_Die child;
	Dwarf_Off prev;

	if (depth > CU_WALK_MAX_DEPTH || dwarf_child(parent, &child) != 0)
		return;
	prev = dwarf_dieoffset(&child);
	do {
		Dwarf_Off off = dwarf_dieoffset(&child);

		if (w->err || ++w->dies > CU_WALK_MAX_DIES)
			return;
		if (off < prev)
			return; /* a sibling pointing backwards: corrupt DWARF, stop here */
		prev = off;
		switch (dwarf_tag(&child)) {
		case DW_TAG_subprogram:
			add_ranges(w, &child);
			break;
		case DW_TAG_namespace:
		case DW_TAG_module:
		case DW_TAG_structure_type:
		case DW_TAG_class_type:
		case DW_TAG_union_type:
		case DW_TAG_enumeration_type:
			walk_scope(w, &child, depth + 1);
			break;
		default:
			break;
		}
	} while (dwarf_siblingof(&child, &child) == 0);
}

/* Returns the index of the CU whose DIE is cudie (building it the first time), or NULL. */
static struct cuidx *cu_index(struct module *m, Dwarf_Die *cudie, int *err)
{
	Dwarf_Off off = dwarf_dieoffset(cudie);
	struct walk w = { 0 };

	for (size_t i = 0; i < m->ncus; i++)
		if (m->cus[i].off == off)
			return &m->cus[i];
	if (m->ncus == m->capcus) {
		size_t nc = m->capcus ? m->capcus * 2 : 16;
		struct cuidx *n = realloc(m->cus, nc * sizeof(*n));

		if (!n) {
			*err = -ENOMEM;
			return NULL;
		}
		m->cus = n;
		m->capcus = nc;
	}
	w.ci = &m->cus[m->ncus];
	*w.ci = (struct cuidx){ .off = off };
	walk_scope(&w, cudie, 0);
	if (w.err) {
		free(w.ci->r);
		*err = w.err;
		return NULL;
	}
	if (w.ci->n)
		qsort(w.ci->r, w.ci->n, sizeof(*w.ci->r), fnrange_cmp);
	m->ncus++;
	return w.ci;
}

static Dwarf_Die *cu_find_function(struct cuidx *ci, uint64_t a)
{
	size_t lo = 0, hi = ci->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (ci->r[mid].lo <= a)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t i = lo, steps = 0; i > 0 && steps < 64; i--, steps++)
		if (a >= ci->r[i - 1].lo && a < ci->r[i - 1].hi)
			return &ci->r[i - 1].die;
	return NULL;
}

/* ---- names ---- */

static enum prs_kind lang_kind(Dwarf_Die *die)
{
	Dwarf_Die cu;

	if (!dwarf_diecu(die, &cu, NULL, NULL))
		return PRS_KIND_NATIVE;
	switch (dwarf_srclang(&cu)) {
	case DW_LANG_Rust:
		return PRS_KIND_RUST;
	case DW_LANG_C_plus_plus:
	case DW_LANG_C_plus_plus_03:
	case DW_LANG_C_plus_plus_11:
	case DW_LANG_C_plus_plus_14:
		return PRS_KIND_CPP;
	default:
		return PRS_KIND_NATIVE;
	}
}

/* Follows abstract_origin / specification to the DIE that carries the declaration. */
static void origin_die(Dwarf_Die *die, Dwarf_Die *out)
{
	*out = *die;
	for (int hop = 0; hop < ORIGIN_MAX_HOPS; hop++) {
		Dwarf_Attribute at;
		Dwarf_Die next;

		if (!dwarf_attr(out, DW_AT_abstract_origin, &at) &&
		    !dwarf_attr(out, DW_AT_specification, &at))
			return;
		if (!dwarf_formref_die(&at, &next))
			return;
		*out = next;
	}
}

/*
 * Writes into buf the names of the namespace / struct / class DIEs enclosing die, "a::b::", by a
 * descent from its CU (libdw keeps no parent links): at each level the child whose subtree holds
 * the target offset is the one before the first sibling beyond it. Bounded in depth and steps.
 */
static size_t qualifier(Dwarf_Die *die, char *buf, size_t size)
{
	Dwarf_Off target = dwarf_dieoffset(die);
	Dwarf_Die cu, cur, child;
	size_t len = 0, steps = 0;

	buf[0] = '\0';
	if (!dwarf_diecu(die, &cu, NULL, NULL))
		return 0;
	cur = cu;
	for (int depth = 0; depth < CU_WALK_MAX_DEPTH; depth++) {
		Dwarf_Die best;
		bool have = false;

		if (dwarf_child(&cur, &child) != 0)
			return len;
		do {
			Dwarf_Off off = dwarf_dieoffset(&child);

			if (++steps > INLINE_WALK_MAX_DIES || off > target)
				break;
			best = child;
			have = true;
		} while (dwarf_siblingof(&child, &child) == 0);
		if (!have)
			return len;
		if (dwarf_dieoffset(&best) == target)
			return len;
		switch (dwarf_tag(&best)) {
		case DW_TAG_class_type:
		case DW_TAG_structure_type:
		case DW_TAG_union_type:
		case DW_TAG_enumeration_type:
		case DW_TAG_namespace:
		case DW_TAG_module:
		case DW_TAG_subprogram: { /* C++ local classes (lambdas) live inside functions */
			const char *n = dwarf_diename(&best);
			int w;

			/*
			 * g++ emits a lambda's closure type as an unnamed structure: the only
			 * unnamed struct/class whose member functions get called in practice.
			 */
			if (!n)
				n = dwarf_tag(&best) == DW_TAG_class_type ||
						    dwarf_tag(&best) == DW_TAG_structure_type
					    ? "{lambda}"
				    : dwarf_tag(&best) == DW_TAG_namespace ? "{anonymous}" : "{unnamed}";
			w = snprintf(buf + len, size - len, "%s::", n);

			if (w < 0 || (size_t)w >= size - len)
				return len;
			len += (size_t)w;
			break;
		}
		default:
			break;
		}
		cur = best;
	}
	return len;
}

/* Name of a subprogram or inlined_subroutine DIE: demangled linkage name, else qualified name. */
static const char *die_name(struct prs_symbolizer *s, Dwarf_Die *die, enum prs_kind *kind)
{
	Dwarf_Attribute at;
	const char *link = NULL, *name, *res;
	Dwarf_Die origin;
	char buf[NAME_MAX_LEN + 1];
	size_t qlen;

	*kind = lang_kind(die);
	if (dwarf_attr_integrate(die, DW_AT_linkage_name, &at) ||
	    dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &at))
		link = dwarf_formstring(&at);
	if (link) {
		char *dem = prs_demangle(link, kind);

		if (dem) {
			res = strtab_intern(&s->strings, dem, strlen(dem));
			free(dem);
			return res;
		}
	}
	name = dwarf_diename(die);
	if (!name)
		return link ? strtab_intern(&s->strings, link, strlen(link)) : NULL;
	if (*kind == PRS_KIND_NATIVE)
		return strtab_intern(&s->strings, name, strlen(name));
	origin_die(die, &origin);
	qlen = qualifier(&origin, buf, sizeof(buf));
	snprintf(buf + qlen, sizeof(buf) - qlen, "%s", name);
	return strtab_intern(&s->strings, buf, strlen(buf));
}

/* A source file name as DWARF gives it, joined to the CU's DW_AT_comp_dir when relative. */
static const char *src_path(struct prs_symbolizer *s, Dwarf_Die *cu, const char *f)
{
	Dwarf_Attribute at;
	const char *dir;
	char buf[PATH_MAX_LEN];
	int n;

	if (!f || !f[0])
		return NULL;
	if (f[0] == '/' || !dwarf_attr(cu, DW_AT_comp_dir, &at) || !(dir = dwarf_formstring(&at)) ||
	    !dir[0])
		return strtab_intern(&s->strings, f, strlen(f));
	n = snprintf(buf, sizeof(buf), "%s%s%s", dir, dir[strlen(dir) - 1] == '/' ? "" : "/", f);
	if (n <= 0 || (size_t)n >= sizeof(buf))
		return strtab_intern(&s->strings, f, strlen(f));
	return strtab_intern(&s->strings, buf, (size_t)n);
}

static const char *call_file(struct prs_symbolizer *s, Dwarf_Die *cu, Dwarf_Die *inl)
{
	Dwarf_Attribute at;
	Dwarf_Word idx;
	Dwarf_Files *files;
	size_t nfiles;
	const char *f;

	if (!dwarf_attr(inl, DW_AT_call_file, &at) || dwarf_formudata(&at, &idx) != 0)
		return NULL;
	if (dwarf_getsrcfiles(cu, &files, &nfiles) != 0 || idx >= nfiles)
		return NULL;
	f = dwarf_filesrc(files, idx, NULL, NULL);
	return src_path(s, cu, f);
}

static uint32_t call_line(Dwarf_Die *inl)
{
	Dwarf_Attribute at;
	Dwarf_Word line;

	if (!dwarf_attr(inl, DW_AT_call_line, &at) || dwarf_formudata(&at, &line) != 0 ||
	    line > UINT32_MAX)
		return 0;
	return (uint32_t)line;
}

/* ---- resolution ---- */

static bool is_scope(int tag)
{
	return tag == DW_TAG_inlined_subroutine || tag == DW_TAG_lexical_block ||
	       tag == DW_TAG_try_block || tag == DW_TAG_catch_block;
}

/* Fills chain[0..) with fn and the inlined_subroutine DIEs containing a, outermost first. */
static int inline_chain(Dwarf_Die *fn, uint64_t a, Dwarf_Die *chain, int max)
{
	Dwarf_Die cur = *fn, child;
	int n = 0;
	size_t steps = 0;

	chain[n++] = *fn;
	for (int depth = 0; depth < 4 * PRS_SYM_MAX_INLINE; depth++) {
		bool found = false;

		if (dwarf_child(&cur, &child) != 0)
			break;
		do {
			if (++steps > INLINE_WALK_MAX_DIES)
				return n;
			if (is_scope(dwarf_tag(&child)) && dwarf_haspc(&child, a) == 1) {
				found = true;
				break;
			}
		} while (dwarf_siblingof(&child, &child) == 0);
		if (!found)
			break;
		if (dwarf_tag(&child) == DW_TAG_inlined_subroutine) {
			if (n == max) /* keep the innermost: drop the outermost */
				memmove(chain, chain + 1, (size_t)(max - 1) * sizeof(*chain)), n--;
			chain[n++] = child;
		}
		cur = child;
	}
	return n;
}

/* The line table row for a (the last row at or below it, but not below min). */
static void line_at(struct prs_symbolizer *s, Dwarf_Die *cu, uint64_t a, uint64_t min,
		    const char **file, uint32_t *line)
{
	Dwarf_Line *l = dwarf_getsrc_die(cu, a);
	Dwarf_Addr la = 0;
	int ln = 0;

	*file = NULL;
	*line = 0;
	if (!l || dwarf_lineaddr(l, &la) != 0 || la < min || la > a)
		return;
	if (dwarf_lineno(l, &ln) == 0 && ln > 0)
		*line = (uint32_t)ln;
	*file = src_path(s, cu, dwarf_linesrc(l, NULL, NULL));
}

/*
 * From DWARF: the function DIE holding a (a DWARF address in cu) and its inline chain. Returns
 * n >= 0 (0: no function DIE, or one without a name) or -ENOMEM.
 */
static int resolve_dwarf(struct prs_symbolizer *s, struct module *m, Dwarf_Die *cu, uint64_t a,
			 struct prs_symframe *out)
{
	Dwarf_Die chain[PRS_SYM_MAX_INLINE];
	Dwarf_Die *fn;
	struct cuidx *ci;
	int n, err = 0;

	ci = cu_index(m, cu, &err);
	if (err)
		return err;
	fn = ci ? cu_find_function(ci, a) : NULL;
	if (!fn)
		return 0;
	n = inline_chain(fn, a, chain, PRS_SYM_MAX_INLINE);
	for (int i = 0; i < n; i++) {
		enum prs_kind kind = PRS_KIND_NATIVE;
		const char *name = die_name(s, &chain[i], &kind);

		out[i] = (struct prs_symframe){ .name = name, .kind = kind };
		if (!out[i].name && i > 0)
			out[i].name = "[inlined]";
		if (i + 1 < n) {
			out[i].file = call_file(s, cu, &chain[i + 1]);
			out[i].line = call_line(&chain[i + 1]);
		} else {
			line_at(s, cu, a, 0, &out[i].file, &out[i].line);
		}
	}
	return out[0].name ? n : 0; /* a function DIE without a name: try the symbol table */
}

/* The module's .eh_frame function table, read once per build id (NULL when out of memory). */
static const struct prs_fntab *module_fns(struct prs_symbolizer *s, struct module *m)
{
	GElf_Addr bias;
	Elf *elf;
	struct fntab *f;

	if (m->fns_loaded)
		return m->fns;
	m->fns_loaded = true;
	for (f = s->fntabs; m->file_id_len && f; f = f->next)
		if (f->idlen == m->file_id_len && memcmp(f->id, m->file_id, f->idlen) == 0)
			return m->fns = &f->t;
	elf = dwfl_module_getelf(m->mod, &bias);
	f = calloc(1, sizeof(*f));
	if (!f || !elf || prs_fntab_load(elf, &f->t) != 0) {
		free(f);
		return NULL;
	}
	memcpy(f->id, m->file_id, m->file_id_len);
	f->idlen = m->file_id_len;
	f->next = s->fntabs;
	s->fntabs = f;
	return m->fns = &f->t;
}

/* The file offset of ELF address vaddr (through the PT_LOAD holding it; vaddr itself if none). */
static uint64_t file_offset(const struct module *m, uint64_t vaddr)
{
	for (size_t i = 0; i < m->nphdrs; i++) {
		const struct phdr *ph = &m->phdrs[i];

		if (vaddr >= ph->vaddr && vaddr - ph->vaddr < ph->filesz)
			return vaddr - ph->vaddr + ph->offset;
	}
	return vaddr;
}

/* "BASENAME!fn+0xOFF" for the function range r: its start as a file offset, like a raw frame's. */
static int range_name(struct prs_symbolizer *s, const struct module *m, const struct prs_fnrange *r,
		      struct prs_symframe *out)
{
	const char *base = strrchr(m->path, '/');
	char buf[NAME_MAX_LEN + 1];
	int n;

	base = base ? base + 1 : m->path;
	n = snprintf(buf, sizeof(buf), "%s!fn+0x%" PRIx64, base, file_offset(m, r->lo));
	if (n <= 0)
		return 0;
	*out = (struct prs_symframe){ .kind = PRS_KIND_NATIVE, .fn_range = true };
	out->name = strtab_intern(&s->strings, buf, strnlen(buf, sizeof(buf)));
	return out->name ? 1 : -ENOMEM;
}

/*
 * From the symbol tables, else the function ranges: the dwfl address da (in cu at bias, when
 * there is DWARF). Returns 1, 0 (nothing covers da) or -ENOMEM.
 */
static int resolve_symbol(struct prs_symbolizer *s, struct module *m, uint64_t da, Dwarf_Die *cu,
			  Dwarf_Addr bias, struct prs_symframe *out)
{
	const struct prs_fnrange *r = NULL;
	enum prs_kind kind = PRS_KIND_NATIVE;
	const struct sym *sym;
	char *dem;
	int err;

	if (!m->syms_loaded && (err = load_symbols(m)))
		return err;
	sym = find_symbol(m, da);
	if (!sym || sym->size == 0) { /* the table is read only for a module that needs it */
		const struct prs_fntab *fns = module_fns(s, m);

		r = fns && da >= m->bias ? prs_fntab_find(fns, da - m->bias) : NULL;
	}
	/* a sizeless symbol (assembly) below da does not own a function that starts after it */
	if (sym && sym->size == 0 && r && r->lo + m->bias > sym->addr)
		sym = NULL;
	if (!sym)
		return r ? range_name(s, m, r, out) : 0;
	dem = prs_demangle(sym->name, &kind);
	*out = (struct prs_symframe){ .kind = kind };
	out->name = dem ? strtab_intern(&s->strings, dem, strlen(dem))
			: strtab_intern(&s->strings, sym->name, strlen(sym->name));
	free(dem);
	if (!out->name)
		return -ENOMEM;
	/* only a row inside the symbol: the CU's nearest row below may belong to another function */
	if (cu && sym->addr >= bias)
		line_at(s, cu, da - bias, sym->addr - bias, &out->file, &out->line);
	if (kind == PRS_KIND_NATIVE && cu && out->file)
		out->kind = lang_kind(cu);
	return 1;
}

/* Resolves the dwfl address da into out (PRS_SYM_MAX_INLINE entries). Returns n >= 0 or -ENOMEM. */
static int resolve(struct prs_symbolizer *s, struct module *m, uint64_t da, struct prs_symframe *out)
{
	Dwarf_Addr bias = 0;
	Dwarf_Die *cu = dwfl_module_addrdie(m->mod, da, &bias);
	int n = cu ? resolve_dwarf(s, m, cu, da - bias, out) : 0;

	return n ? n : resolve_symbol(s, m, da, cu, bias, out);
}

/* ---- cache ---- */

static struct centry *cache_slot(struct module *m, uint64_t key)
{
	size_t j;

	if (!m->capcache)
		return NULL;
	for (j = hash_u64(key) & (m->capcache - 1); m->cache[j].key; j = (j + 1) & (m->capcache - 1))
		if (m->cache[j].key == key)
			return &m->cache[j];
	return &m->cache[j];
}

static int cache_put(struct module *m, uint64_t key, uint32_t first, uint32_t count)
{
	struct centry *e;

	if ((m->ncache + 1) * 2 > m->capcache) {
		size_t nc = m->capcache ? m->capcache * 2 : 256;
		struct centry *old = m->cache, *nt = calloc(nc, sizeof(*nt));
		size_t oc = m->capcache;

		if (!nt)
			return -ENOMEM;
		m->cache = nt;
		m->capcache = nc;
		for (size_t i = 0; i < oc; i++)
			if (old[i].key)
				*cache_slot(m, old[i].key) = old[i];
		free(old);
	}
	e = cache_slot(m, key);
	*e = (struct centry){ key, first, count };
	m->ncache++;
	return 0;
}

/* ---- public ---- */

struct prs_symbolizer *prs_symbolizer_new(void)
{
	struct prs_symbolizer *s;

	if (prs_elf_init())
		return NULL;
	s = calloc(1, sizeof(*s));
	if (s && prs_debugsearch_init(&s->debug, NULL) != 0) {
		free(s);
		return NULL;
	}
	return s;
}

const struct prs_kallsyms *prs_symbolizer_kallsyms(struct prs_symbolizer *s)
{
	struct prs_err err = { 0 };

	if (!s->ksyms_tried) {
		s->ksyms_tried = true;
		if (prs_kallsyms_load(NULL, &s->ksyms, &err) != 0)
			s->ksyms = NULL; /* the kernel frames keep their addresses as names */
	}
	return s->ksyms;
}

void prs_symbolizer_free(struct prs_symbolizer *s)
{
	struct fntab *f, *next;

	if (!s)
		return;
	for (size_t i = 0; i < s->nmods_slots; i++)
		module_free(s->mods[i]);
	free(s->mods);
	for (f = s->fntabs; f; f = next) {
		next = f->next;
		prs_fntab_release(&f->t);
		free(f);
	}
	strtab_release(&s->strings);
	prs_kallsyms_free(s->ksyms);
	free(s->pool);
	prs_debugsearch_release(&s->debug);
	free(s);
}

int prs_symbolizer_set_opts(struct prs_symbolizer *s, const struct prs_symbol_opts *opts)
{
	struct prs_debugsearch d;
	int rc;

	if (!s)
		return -EINVAL;
	if (s->nmods)
		return -EBUSY; /* open modules were found, and search for debug files, the old way */
	rc = prs_debugsearch_init(&d, opts);
	if (rc)
		return rc;
	prs_debugsearch_release(&s->debug);
	s->debug = d;
	return 0;
}

void prs_symbolizer_stats(const struct prs_symbolizer *s, struct prs_symbolize_stats *stats)
{
	if (!s || !stats)
		return;
	*stats = s->st;
	stats->debug_files = s->debug.st_found;
	stats->debuginfod_queries = s->debug.st_queries;
	stats->debuginfod_fetched = s->debug.st_fetched;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int copy_out(const struct prs_symbolizer *s, const struct centry *e, struct prs_symframe *out,
		    int max)
{
	uint32_t n = e->count, skip = 0;

	if (n > (uint32_t)max) {
		skip = n - (uint32_t)max;
		n = (uint32_t)max;
	}
	if (n)
		memcpy(out, s->pool + e->first + skip, n * sizeof(*out));
	return (int)n;
}

static int symbolize(struct prs_symbolizer *s, const struct prs_symmap *map, uint64_t pc,
		     bool activation, struct prs_symframe *out, int max)
{
	struct prs_symframe tmp[PRS_SYM_MAX_INLINE];
	struct module *m;
	struct centry *e;
	uint64_t a, off, key, vaddr = 0;
	bool found = false;
	int n, rc;

	if (!activation && pc == 0)
		return 0;
	a = activation ? pc : pc - 1;
	if (a < map->start || a >= map->end ||
	    (map->path[0] != '/' && strcmp(map->path, VDSO_NAME) != 0))
		return 0;
	rc = module_get(s, map, &m);
	if (rc)
		return rc;
	if (m->state != MOD_OK)
		return 0;
	off = a - map->start + map->offset;
	key = off + 1;
	if (key == 0)
		return 0;
	e = cache_slot(m, key);
	if (e && e->key == key)
		return copy_out(s, e, out, max);
	for (size_t i = 0; i < m->nphdrs; i++) {
		const struct phdr *ph = &m->phdrs[i];

		if (off < ph->offset || off - ph->offset >= ph->filesz)
			continue;
		if (!found || ph->exec) {
			vaddr = off - ph->offset + ph->vaddr;
			found = true;
			if (ph->exec)
				break;
		}
	}
	n = found ? resolve(s, m, vaddr + m->bias, tmp) : 0;
	if (n < 0)
		return n;
	if (s->npool + (size_t)n > s->cappool) {
		size_t nc = s->cappool ? s->cappool * 2 : 1024;
		struct prs_symframe *np;

		while (nc < s->npool + (size_t)n)
			nc *= 2;
		if (nc > UINT32_MAX)
			return -ENOMEM;
		np = realloc(s->pool, nc * sizeof(*np));
		if (!np)
			return -ENOMEM;
		s->pool = np;
		s->cappool = nc;
	}
	if (n)
		memcpy(s->pool + s->npool, tmp, (size_t)n * sizeof(*tmp));
	rc = cache_put(m, key, (uint32_t)s->npool, (uint32_t)n);
	if (rc)
		return rc;
	s->npool += (size_t)n;
	e = cache_slot(m, key);
	return copy_out(s, e, out, max);
}

int prs_symbolize(struct prs_symbolizer *s, const struct prs_symmap *map, uint64_t pc,
		  bool activation, struct prs_symframe *out, int max)
{
	uint64_t t0;
	int n;

	if (!s || !map || !map->path || !out || max <= 0)
		return -EINVAL;
	t0 = now_ns();
	n = symbolize(s, map, pc, activation, out, max);
	s->st.frames++;
	if (n > 0) {
		s->st.symbolized++;
		if (out[n - 1].line)
			s->st.with_line++;
		s->st.inlined += (uint64_t)(n - 1);
		s->st.by_range += out[0].fn_range;
	}
	s->st.time_ns += now_ns() - t0;
	return n;
}
