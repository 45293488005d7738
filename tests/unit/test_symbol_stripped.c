// SPDX-License-Identifier: MIT
/*
 * The symbolizer on stripped binaries: the .eh_frame function table against readelf's, frames
 * named by their function's range ("FILE!fn+0xOFF", one name per function, the offset read from
 * the unstripped binary's symbol table), a sizeless symbol that must not swallow the function
 * after it, MiniDebugInfo (.gnu_debugdata, built here the way Fedora does), debug files found in
 * debug folders by build id and by .gnu_debuglink name, renaming a profile once they are there,
 * the options' checks, and corrupted .eh_frame sections.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pyrsprof/profile.h"
#include "pyrsprof/symbol.h"
#include "symbol/symbol-internal.h"
#include "symbol_fixture.h"
#include "util/banned.h"

/* A scratch folder holding stripped copies of symtest_c, removed by done(). */
struct scratch {
	char dir[64], bin[512];
	struct run r;
};

static void setup(struct scratch *t)
{
	snprintf(t->dir, sizeof(t->dir), "/tmp/prs-stripped-XXXXXX");
	cr_assert(mkdtemp(t->dir));
	run_fixture("symtest_c", &t->r);
	fixture("symtest_c", t->bin, sizeof(t->bin));
}

static void done(struct scratch *t)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", t->dir);
	sh(cmd);
}

/* The fixture's mapping of a, renamed to path (a copy of the same build). */
static struct prs_symmap map_as(const struct scratch *t, uint64_t a, const char *path)
{
	struct prs_symmap m = *map_of(&t->r, a);

	m.path = path;
	return m;
}

/* The file offset of function fn of ELF file bin, from its .symtab and program headers. */
static uint64_t fn_offset(const char *bin, const char *fn)
{
	int fd = open(bin, O_RDONLY);
	Elf *e;
	Elf_Scn *scn = NULL;
	uint64_t vaddr = 0, off = UINT64_MAX;
	size_t nph;

	cr_assert_geq(fd, 0);
	cr_assert_neq(elf_version(EV_CURRENT), EV_NONE);
	e = elf_begin(fd, ELF_C_READ, NULL);
	cr_assert(e);
	while ((scn = elf_nextscn(e, scn)) != NULL) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_SYMTAB)
			continue;
		d = elf_getdata(scn, NULL);
		for (size_t i = 0; d && i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym s;
			const char *name;

			if (gelf_getsym(d, (int)i, &s) && (name = elf_strptr(e, sh.sh_link, s.st_name)) &&
			    strcmp(name, fn) == 0)
				vaddr = s.st_value;
		}
	}
	cr_assert(vaddr, "no symbol %s in %s", fn, bin);
	cr_assert_eq(elf_getphdrnum(e, &nph), 0);
	for (size_t i = 0; i < nph; i++) {
		GElf_Phdr ph;

		if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_LOAD && vaddr >= ph.p_vaddr &&
		    vaddr < ph.p_vaddr + ph.p_filesz)
			off = vaddr - ph.p_vaddr + ph.p_offset;
	}
	elf_end(e);
	close(fd);
	cr_assert_neq(off, UINT64_MAX);
	return off;
}

static void expect_range_name(const struct prs_symframe *f, const char *base, uint64_t off)
{
	char want[256];

	snprintf(want, sizeof(want), "%s!fn+0x%" PRIx64, base, off);
	cr_expect_str_eq(f->name, want);
	cr_expect(f->fn_range);
	cr_expect_null(f->file);
	cr_expect_eq(f->line, 0);
	cr_expect_eq(f->kind, PRS_KIND_NATIVE);
}

/* Our table is readelf's list of FDEs: the same [pc_begin, pc_end) ranges, none missing. */
static void check_fntab(const char *bin)
{
	char cmd[1024], line[256];
	struct prs_fntab t;
	size_t n = 0, k = 0;
	FILE *f;
	int fd = open(bin, O_RDONLY);
	Elf *e;

	cr_assert_geq(fd, 0, "open %s", bin);
	cr_assert_eq(prs_elf_init(), 0);
	e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	cr_assert_eq(prs_fntab_load(e, &t), 0);
	cr_assert_geq(t.n, 5, "%s: %zu functions", bin, t.n);
	/* readelf prints "... FDE cie=... pc=0000000000001250..00000000000012a0" per FDE */
	snprintf(cmd, sizeof(cmd),
		 "readelf --debug-dump=frames '%s' 2>/dev/null | awk '/ FDE / {print $NF}' | "
		 "sed 's/pc=//' | sort -u", bin);
	f = popen(cmd, "r");
	cr_assert(f);
	while (fgets(line, sizeof(line), f)) {
		uint64_t lo, hi;

		cr_assert_eq(sscanf(line, "%" SCNx64 "..%" SCNx64, &lo, &hi), 2, "readelf: %s", line);
		if (lo == 0 || hi == lo)
			continue; /* discarded or empty FDEs, which we drop */
		n++;
		while (k < t.n && t.r[k].lo < lo)
			k++;
		cr_expect(k < t.n && t.r[k].lo == lo && t.r[k].hi == hi,
			  "%s: readelf's FDE %#" PRIx64 "..%#" PRIx64 " is not in the table", bin, lo, hi);
	}
	pclose(f);
	cr_expect_eq(t.n, n, "%s: %zu ranges, readelf lists %zu", bin, t.n, n);
	for (size_t i = 1; i < t.n; i++)
		cr_assert_lt(t.r[i - 1].lo, t.r[i].lo, "not sorted at %zu", i);
	prs_fntab_release(&t);
	elf_end(e);
	close(fd);
}

Test(symbol_stripped, fntab_matches_readelf)
{
	char bin[512], *py;

	check_fntab(fixture("symtest_c", bin, sizeof(bin)));
	check_fntab(fixture("symtest_rs", bin, sizeof(bin)));
	check_fntab(fixture("symtest_cpp", bin, sizeof(bin)));
	/* Debian's stripped interpreter, the binary this table is for */
	py = realpath("/usr/bin/python3", NULL);
	if (py)
		check_fntab(py);
	else
		cr_log_warn("no /usr/bin/python3: its table not checked");
	free(py);
}

/*
 * strip --strip-all: no .symtab, and this PIE exports nothing in .dynsym. Every PC of a function
 * gets the same "copy!fn+0xOFF" name (the very same string), OFF being the function's start as a
 * file offset (read from the unstripped binary); other functions get other names.
 */
Test(symbol_stripped, functions_named_by_range)
{
	struct prs_symbolizer *s = prs_symbolizer_new();
	struct prs_symbolize_stats st;
	struct prs_symframe a[4], b[4], c[4];
	char path[600], cmd[1400];
	struct prs_symmap m;
	struct scratch t;
	uint64_t ra, leaf, hot;

	setup(&t);
	snprintf(path, sizeof(path), "%s/copy", t.dir);
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s' && strip --strip-all '%s'", t.bin, path, path);
	sh(cmd);
	ra = addr_of(&t.r, "probe_ra"); /* a return address inside leaf */
	leaf = addr_of(&t.r, "leaf");
	hot = addr_of(&t.r, "hot_a");
	m = map_as(&t, ra, path);
	cr_assert_eq(prs_symbolize(s, &m, ra, false, a, 4), 1);
	expect_range_name(&a[0], "copy", fn_offset(t.bin, "leaf"));
	cr_assert_eq(prs_symbolize(s, &m, leaf, true, b, 4), 1);
	cr_expect_eq(a[0].name, b[0].name, "two PCs of leaf, two names: %s, %s", a[0].name, b[0].name);
	cr_assert_eq(prs_symbolize(s, &m, hot + 3, true, c, 4), 1);
	expect_range_name(&c[0], "copy", fn_offset(t.bin, "hot_a"));
	prs_symbolizer_stats(s, &st);
	cr_expect_eq(st.by_range, 3);
	cr_expect_eq(st.symbolized, 3);
	prs_symbolizer_free(s);
	done(&t);
}

/*
 * A sizeless symbol (as assembly defines them) covers the function it starts, not the next one:
 * "marker" is added at hot_a's start to a stripped copy; PCs in hot_a are "marker", a PC in probe
 * (the next function in the file) is named by its own range.
 */
Test(symbol_stripped, sizeless_symbol_stops_at_the_next_function)
{
	struct prs_symbolizer *s = prs_symbolizer_new();
	struct prs_symframe fr[4];
	char path[600], cmd[1600];
	uint64_t hot_off = 0, probe_off = 0, hot;
	struct prs_symmap m;
	struct scratch t;

	setup(&t);
	snprintf(path, sizeof(path), "%s/marked", t.dir);
	hot_off = fn_offset(t.bin, "hot_a");
	probe_off = fn_offset(t.bin, "probe");
	cr_assert_gt(probe_off, hot_off, "the fixture's layout changed: probe is not after hot_a");
	/* in this PIE, the text segment's file offsets are its addresses */
	snprintf(cmd, sizeof(cmd),
		 "cp '%s' '%s' && strip --strip-all '%s' && "
		 "objcopy --add-symbol marker=0x%" PRIx64 ",function,global '%s'",
		 t.bin, path, path, hot_off, path);
	sh(cmd);
	hot = addr_of(&t.r, "hot_a");
	m = map_as(&t, hot, path);
	cr_assert_eq(prs_symbolize(s, &m, hot + 2, true, fr, 4), 1);
	cr_expect_str_eq(fr[0].name, "marker");
	cr_expect_not(fr[0].fn_range);
	cr_assert_eq(prs_symbolize(s, &m, hot - hot_off + probe_off + 1, true, fr, 4), 1);
	expect_range_name(&fr[0], "marked", probe_off);
	prs_symbolizer_free(s);
	done(&t);
}

/*
 * MiniDebugInfo as Fedora builds it (find-debuginfo's recipe): the function symbols that are not
 * in .dynsym, in an xz-compressed ELF in .gnu_debugdata of a fully stripped binary. libdwfl reads
 * it with liblzma (Debian's libdw1 links it).
 */
Test(symbol_stripped, minidebuginfo)
{
	struct prs_symbolizer *s = prs_symbolizer_new();
	struct prs_symframe fr[4];
	char path[600], cmd[3000];
	struct prs_symmap m;
	struct scratch t;
	uint64_t ra;

	setup(&t);
	snprintf(path, sizeof(path), "%s/mini", t.dir);
	snprintf(cmd, sizeof(cmd),
		 "set -e; cd %s; cp '%s' mini; "
		 "nm -D mini --format=posix --defined-only | awk '{print $1}' | sort > dynsyms; "
		 "nm mini --format=posix --defined-only | awk '$2 ~ /^[TtD]$/ {print $1}' | sort > funcsyms; "
		 "comm -13 dynsyms funcsyms > keep; "
		 "objcopy --only-keep-debug mini mini.dbg; "
		 "objcopy -S --remove-section .gdb_index --remove-section .comment --keep-symbols=keep "
		 "mini.dbg mini_debuginfo; "
		 "strip --strip-all -R .comment mini; xz -f mini_debuginfo; "
		 "objcopy --add-section .gnu_debugdata=mini_debuginfo.xz mini; "
		 "rm mini.dbg; test -z \"$(readelf -S mini 2>/dev/null | grep -w .symtab)\"",
		 t.dir, t.bin);
	sh(cmd);
	ra = addr_of(&t.r, "probe_ra");
	m = map_as(&t, ra, path);
	cr_assert_eq(prs_symbolize(s, &m, ra, false, fr, 4), 1);
	cr_expect_str_eq(fr[0].name, "leaf");
	cr_expect_not(fr[0].fn_range);
	cr_assert_eq(prs_symbolize(s, &m, addr_of(&t.r, "hot_a") + 1, true, fr, 4), 1);
	cr_expect_str_eq(fr[0].name, "hot_a");
	prs_symbolizer_free(s);
	done(&t);
}

/* A stripped copy whose debug file is DIR/.build-id/xx/yyyy.debug, or DIR/NAME (debuglink). */
static void debug_dir_case(bool by_build_id)
{
	struct prs_symbolizer *s = prs_symbolizer_new();
	struct prs_symbolize_stats st;
	struct prs_symframe fr[8];
	char path[600], dbg[600], cmd[2400], hex[64] = "";
	const char *dirs[] = { "/nonexistent/prs-debug", dbg };
	struct prs_symmap m;
	struct scratch t;
	uint64_t ra;

	setup(&t);
	ra = addr_of(&t.r, "probe_ra");
	m = *map_of(&t.r, ra);
	for (size_t i = 0; i < m.build_id_len; i++)
		snprintf(hex + 2 * i, 3, "%02x", m.build_id[i]);
	snprintf(path, sizeof(path), "%s/app", t.dir);
	snprintf(dbg, sizeof(dbg), "%s/debug", t.dir);
	if (by_build_id)
		snprintf(cmd, sizeof(cmd),
			 "set -e; cd %s; mkdir -p debug/.build-id/%.2s; cp '%s' app; "
			 "objcopy --only-keep-debug app debug/.build-id/%.2s/%s.debug; strip --strip-all app",
			 t.dir, hex, t.bin, hex, hex + 2);
	else /* the debuglink is added while app.debug is next to app (objcopy reads its CRC) */
		snprintf(cmd, sizeof(cmd),
			 "set -e; cd %s; mkdir debug; cp '%s' app; objcopy --only-keep-debug app app.debug; "
			 "strip --strip-all app; objcopy --add-gnu-debuglink=app.debug app; "
			 "mv app.debug debug/", t.dir, t.bin);
	sh(cmd);
	m.path = path;
	/* without the folder: the function's range only */
	cr_assert_eq(prs_symbolize(s, &m, ra, false, fr, 8), 1);
	cr_expect(fr[0].fn_range);
	prs_symbolizer_free(s);
	s = prs_symbolizer_new();
	cr_assert_eq(prs_symbolizer_set_opts(s, &(struct prs_symbol_opts){ .debug_dirs = dirs,
									   .ndebug_dirs = 2 }), 0);
	cr_assert_eq(prs_symbolize(s, &m, ra, false, fr, 8), 2);
	cr_expect_str_eq(fr[0].name, "leaf");
	cr_expect_str_eq(fr[1].name, "mix");
	cr_expect_eq(fr[1].line, marker_line("symtest.c", "c_mix_call"));
	prs_symbolizer_stats(s, &st);
	cr_expect_eq(st.debug_files, 1);
	cr_expect_eq(st.by_range, 0);
	prs_symbolizer_free(s);
	done(&t);
}

Test(symbol_stripped, debug_dir_by_build_id) { debug_dir_case(true); }
Test(symbol_stripped, debug_dir_by_debuglink) { debug_dir_case(false); }

Test(symbol_stripped, options_checked)
{
	struct prs_symbolizer *s = prs_symbolizer_new();
	const char *empty[] = { "" }, *many[65];
	struct prs_symframe fr[8];
	struct run r;
	uint64_t ra;

	for (size_t i = 0; i < 65; i++)
		many[i] = "/tmp";
	cr_expect_eq(prs_symbolizer_set_opts(s, &(struct prs_symbol_opts){ .debug_dirs = empty,
									   .ndebug_dirs = 1 }), -EINVAL);
	cr_expect_eq(prs_symbolizer_set_opts(s, &(struct prs_symbol_opts){ .debug_dirs = many,
									   .ndebug_dirs = 65 }), -E2BIG);
	cr_expect_eq(prs_symbolizer_set_opts(s, &(struct prs_symbol_opts){ .debug_dirs = many,
									   .ndebug_dirs = 64 }), 0);
	/* a failed call left the symbolizer working */
	run_fixture("symtest_c", &r);
	ra = addr_of(&r, "probe_ra");
	cr_expect_eq(prs_symbolize(s, map_of(&r, ra), ra, false, fr, 8), 2);
	cr_expect_eq(prs_symbolizer_set_opts(s, NULL), -EBUSY);
	prs_symbolizer_free(s);
}

/* A profile named from a stripped binary, named again (rename) once its debug file is there. */
Test(symbol_stripped, profile_renamed_with_debug_dir)
{
	struct prs_profile *p = prs_profile_new();
	struct prs_mapping pm = { 0 };
	struct prs_err err = { 0 };
	struct prs_symbolize_stats st;
	char path[600], dbg[600], cmd[2000], hex[64] = "";
	const char *dirs[] = { dbg };
	struct prs_symbol_opts o = { .debug_dirs = dirs, .ndebug_dirs = 1 };
	const struct prs_symmap *m;
	struct scratch t;
	uint32_t f;
	uint64_t ra;

	setup(&t);
	ra = addr_of(&t.r, "probe_ra");
	m = map_of(&t.r, ra);
	for (size_t i = 0; i < m->build_id_len; i++)
		snprintf(hex + 2 * i, 3, "%02x", m->build_id[i]);
	snprintf(path, sizeof(path), "%s/app", t.dir);
	snprintf(dbg, sizeof(dbg), "%s/debug", t.dir);
	snprintf(cmd, sizeof(cmd), "set -e; cd %s; cp '%s' app; strip --strip-all app", t.dir, t.bin);
	sh(cmd);
	pm = (struct prs_mapping){ .start = m->start, .end = m->end, .offset = m->offset,
				   .path = prs_profile_string(p, path, strlen(path)),
				   .build_id_len = (uint8_t)m->build_id_len };
	memcpy(pm.build_id, m->build_id, m->build_id_len);
	f = prs_profile_raw_frame(p, prs_profile_mapping(p, &pm), ra, false);
	cr_assert_eq(prs_symbolize_profile(p, NULL, &st, &err), 0, "%s", err.msg);
	cr_assert_eq(p->expansions[f].count, 1);
	cr_expect_eq(st.by_range, 1);
	/* the debug file arrives; without rename the frame keeps its name */
	snprintf(cmd, sizeof(cmd),
		 "set -e; cd %s; mkdir -p debug/.build-id/%.2s; "
		 "objcopy --only-keep-debug '%s' debug/.build-id/%.2s/%s.debug", t.dir, hex, t.bin, hex, hex + 2);
	sh(cmd);
	cr_assert_eq(prs_symbolize_profile(p, &o, &st, &err), 0, "%s", err.msg);
	cr_expect_eq(st.frames, 0);
	o.rename = true;
	cr_assert_eq(prs_symbolize_profile(p, &o, &st, &err), 0, "%s", err.msg);
	cr_expect_eq(st.frames, 1);
	cr_assert_eq(p->expansions[f].count, 2);
	cr_expect_str_eq(p->strings[p->frames[p->expand_ids[p->expansions[f].first]].name], "leaf");
	prs_profile_free(p);
	done(&t);
}

/*
 * Corrupted .eh_frame sections (random bytes over CIEs, FDEs, lengths and augmentations) of a
 * stripped copy: the table loads or is empty, lookups stay inside it, nothing crashes or hangs.
 */
Test(symbol_stripped, hostile_eh_frame, .timeout = 120)
{
	char path[600], cmd[1400];
	struct scratch t;
	uint64_t off = 0, size = 0, ra;
	uint8_t *img;
	size_t len;
	FILE *f;

	seed_rand();
	setup(&t);
	snprintf(path, sizeof(path), "%s/plain", t.dir);
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s' && strip --strip-all '%s'", t.bin, path, path);
	sh(cmd);
	snprintf(cmd, sizeof(cmd), "readelf -SW '%s' | awk '$2 == \".eh_frame\" {print $5, $6}'", path);
	f = popen(cmd, "r");
	cr_assert(f && fscanf(f, "%" SCNx64 " %" SCNx64, &off, &size) == 2);
	pclose(f);
	img = read_file(path, &len);
	cr_assert(size > 0 && off + size <= len);
	ra = addr_of(&t.r, "probe_ra");
	for (int it = 0; it < 60; it++) {
		struct prs_symbolizer *s = prs_symbolizer_new();
		struct prs_symframe fr[4];
		uint8_t *copy = malloc(len);
		struct prs_symmap m;
		char name[600];

		memcpy(copy, img, len);
		for (int k = 1 + rand() % (it < 30 ? 8 : 200); k > 0; k--)
			copy[off + (size_t)rand() % size] = (uint8_t)rand();
		snprintf(name, sizeof(name), "%s/bad%d", t.dir, it);
		write_file(name, copy, len);
		m = map_as(&t, ra, name);
		for (uint64_t a = m.start; a < m.end; a += 1 + (uint64_t)rand() % 64) {
			int n = prs_symbolize(s, &m, a, a & 1, fr, 4);

			cr_expect(n == 0 || n == 1, "n = %d", n);
		}
		prs_symbolizer_free(s);
		free(copy);
	}
	free(img);
	done(&t);
}

/*
 * dwz, as Debian's debug packages use it: a.debug's shared DWARF moved into a multifile named by
 * .gnu_debugaltlink "/usr/lib/debug/.dwz/common.debug". Unpacked into a debug folder (dpkg -x),
 * that name is DIR/.dwz/common.debug, which is where it must be found.
 */
Test(symbol_stripped, dwz_multifile_in_a_debug_dir)
{
	struct prs_symbolizer *s = prs_symbolizer_new();
	struct prs_symframe fr[8];
	char path[600], dbg[600], cmd[3000], bin2[512], hex[64] = "";
	const char *dirs[] = { dbg };
	struct prs_symmap m;
	struct scratch t;
	uint64_t ra;

	if (system("command -v dwz >/dev/null") != 0)
		cr_skip_test("no dwz (Debian package dwz)");
	setup(&t);
	ra = addr_of(&t.r, "probe_ra");
	m = *map_of(&t.r, ra);
	for (size_t i = 0; i < m.build_id_len; i++)
		snprintf(hex + 2 * i, 3, "%02x", m.build_id[i]);
	fixture("symtest_c2", bin2, sizeof(bin2));
	snprintf(path, sizeof(path), "%s/app", t.dir);
	snprintf(dbg, sizeof(dbg), "%s/debug", t.dir);
	snprintf(cmd, sizeof(cmd),
		 "set -e; cd %s; mkdir -p debug/.dwz debug/.build-id/%.2s; cp '%s' app; cp '%s' other; "
		 "objcopy --only-keep-debug app app.debug; objcopy --only-keep-debug other other.debug; "
		 "dwz -m debug/.dwz/common.debug -M /usr/lib/debug/.dwz/common.debug app.debug other.debug; "
		 "readelf -S app.debug 2>/dev/null | grep -q gnu_debugaltlink; "
		 "mv app.debug debug/.build-id/%.2s/%s.debug; strip --strip-all app",
		 t.dir, hex, t.bin, bin2, hex, hex + 2);
	sh(cmd);
	m.path = path;
	cr_assert_eq(prs_symbolizer_set_opts(s, &(struct prs_symbol_opts){ .debug_dirs = dirs,
									   .ndebug_dirs = 1 }), 0);
	cr_assert_eq(prs_symbolize(s, &m, ra, false, fr, 8), 2);
	cr_expect_str_eq(fr[0].name, "leaf");
	cr_expect_str_eq(fr[1].name, "mix");
	cr_expect_eq(fr[1].line, marker_line("symtest.c", "c_mix_call"));
	prs_symbolizer_free(s);
	done(&t);
}
