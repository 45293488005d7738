// SPDX-License-Identifier: MIT
/*
 * The symbolizer against programs built from source (tests/fixtures/symbol, built by
 * mk/symbol.mk): each fixture prints the runtime addresses of known code locations and its own
 * /proc/self/maps, so the inputs are exactly what the sampler records (absolute PC, mapping,
 * build id), and the expected lines come from "LINE:<tag>" markers in the sources. For C, the
 * whole of two functions is also compared with eu-addr2line -i. Also: build-id mismatch, missing
 * files, separate debug info through .gnu_debuglink, hostile ELF files, and the profile pass.
 */
#include <criterion/criterion.h>

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "pyrsprof/profile.h"
#include "pyrsprof/symbol.h"
#include "symbol_fixture.h"
#include "util/banned.h"

static void expect_frame(const struct prs_symframe *f, const char *name, const char *file_suffix,
			 uint32_t line, enum prs_kind kind)
{
	cr_expect_str_eq(f->name, name);
	cr_expect(f->file && f->file[0] == '/' && ends_with(f->file, file_suffix),
		  "%s: file %s, want a full path ending in %s", name, f->file ? f->file : "(null)",
		  file_suffix);
	if (line)
		cr_expect_eq(f->line, line, "%s: line %u, want %u", name, f->line, line);
	cr_expect_eq(f->kind, kind, "%s: kind %d, want %d", name, f->kind, kind);
}

Test(symbol, c_inline_chain)
{
	struct prs_symbolizer *s = prs_symbolizer_new();
	struct prs_symframe fr[8];
	struct run r;
	uint64_t ra;
	int n;

	run_fixture("symtest_c", &r);
	ra = addr_of(&r, "probe_ra"); /* return address of the call in mix(), inlined into leaf() */
	n = prs_symbolize(s, map_of(&r, ra), ra, false, fr, 8);
	cr_assert_eq(n, 2, "chain of %d", n);
	expect_frame(&fr[0], "leaf", "/tests/fixtures/symbol/symtest.c",
		     marker_line("symtest.c", "c_leaf_call"), PRS_KIND_NATIVE);
	expect_frame(&fr[1], "mix", "/tests/fixtures/symbol/symtest.c",
		     marker_line("symtest.c", "c_mix_call"), PRS_KIND_NATIVE);
	/* max = 1 keeps the innermost */
	n = prs_symbolize(s, map_of(&r, ra), ra, false, fr, 1);
	cr_expect_eq(n, 1);
	cr_expect_str_eq(fr[0].name, "mix");
	/* function entries */
	n = prs_symbolize(s, map_of(&r, addr_of(&r, "hot_a")), addr_of(&r, "hot_a"), true, fr, 8);
	cr_assert_eq(n, 1);
	expect_frame(&fr[0], "hot_a", "/tests/fixtures/symbol/symtest.c", 0, PRS_KIND_NATIVE);
	n = prs_symbolize(s, map_of(&r, addr_of(&r, "leaf")), addr_of(&r, "leaf"), true, fr, 8);
	cr_assert_eq(n, 1);
	cr_expect_str_eq(fr[0].name, "leaf");
	prs_symbolizer_free(s);
}

/*
 * eu-addr2line -i -f output for one address: pairs of lines, innermost first, "NAME" or
 * "NAME inlined at FILE:LINE:COL in CALLER", then "FILE:LINE:COL". When the last pair is an inlined
 * one, eu-addr2line sometimes prints no pair for CALLER (seen on libpython): the "in CALLER" part
 * carries that frame (its location is the call site), and we add it.
 */
struct a2l {
	char names[PRS_SYM_MAX_INLINE][PRS_MAX_NAME + 1], files[PRS_SYM_MAX_INLINE][512];
	uint32_t lines[PRS_SYM_MAX_INLINE];
	int n;
	bool pend;
	char caller[256], cfile[512];
	uint32_t cline;
};

/* FILE:LINE[:COL] -> file, line */
static void parse_loc(char *loc, char *file, size_t fsize, uint32_t *line)
{
	char *colon = strrchr(loc, ':');

	*line = 0;
	if (colon && strchr(loc, ':') != colon) { /* has a column */
		*colon = '\0';
		colon = strrchr(loc, ':');
	}
	if (colon) {
		*colon = '\0';
		*line = (uint32_t)strtoul(colon + 1, NULL, 10);
	}
	snprintf(file, fsize, "%s", loc);
}

static void a2l_pair(struct a2l *a, char *fn, char *loc)
{
	char *p = strstr(fn, " inlined at ");

	fn[strcspn(fn, "\n")] = '\0';
	loc[strcspn(loc, "\n")] = '\0';
	if (a->n >= PRS_SYM_MAX_INLINE)
		return;
	a->pend = false;
	if (p) {
		char *in = strstr(p + 12, " in ");

		*p = '\0';
		if (in) {
			*in = '\0';
			snprintf(a->caller, sizeof(a->caller), "%s", in + 4);
			parse_loc(p + 12, a->cfile, sizeof(a->cfile), &a->cline);
			a->pend = true;
		}
	}
	snprintf(a->names[a->n], sizeof(a->names[0]), "%s", fn);
	parse_loc(loc, a->files[a->n], sizeof(a->files[0]), &a->lines[a->n]);
	a->n++;
}

static void a2l_finish(struct a2l *a)
{
	if (a->pend && a->n < PRS_SYM_MAX_INLINE) {
		snprintf(a->names[a->n], sizeof(a->names[0]), "%s", a->caller);
		snprintf(a->files[a->n], sizeof(a->files[0]), "%s", a->cfile);
		a->lines[a->n] = a->cline;
		a->n++;
	}
	a->pend = false;
}

/*
 * Our chain (outermost first) equals addr2line's (innermost first). Names longer than
 * PRS_MAX_NAME are compared on that prefix (we truncate there). A C++ lambda, which has no linkage
 * name, is ours "main::{lambda}::operator()": binutils calls it "operator()" (or, at some
 * addresses, "main"), so there only the location is compared.
 */
static bool a2l_same(const struct a2l *a, const struct prs_symframe *fr, int n)
{
	if (n != a->n)
		return false;
	for (int i = 0; i < n; i++) {
		const struct prs_symframe *g = &fr[n - 1 - i];
		bool lambda = strstr(g->name, "{lambda}::operator()") != NULL;

		if ((!lambda && strcmp(g->name, a->names[i]) != 0) || g->line != a->lines[i] ||
		    strcmp(g->file ? g->file : "??", a->files[i]) != 0)
			return false;
	}
	return true;
}

/* tool: "eu-addr2line" (elfutils) or "addr2line" (binutils, an independent DWARF reader) */
static void addr2line(const char *tool, const char *bin, uint64_t vaddr, struct a2l *a)
{
	char cmd[1024], fn[4096], loc[4096];
	FILE *f;

	memset(a, 0, sizeof(*a));
	snprintf(cmd, sizeof(cmd), "%s -i -f -e '%s' %#" PRIx64, tool, bin, vaddr);
	f = popen(cmd, "r");
	cr_assert(f);
	while (fgets(fn, sizeof(fn), f) && fgets(loc, sizeof(loc), f))
		a2l_pair(a, fn, loc);
	a2l_finish(a);
	pclose(f);
}

/* Every address of leaf() and hot_a() (inline chains included) against eu-addr2line -i. */
Test(symbol, c_matches_eu_addr2line)
{
	struct prs_symbolizer *s = prs_symbolizer_new();
	char bin[512], cmd[700], line[512];
	uint64_t nm_leaf = 0, nm_hot = 0, sz_leaf = 0, sz_hot = 0, bias;
	struct run r;
	FILE *f;
	int compared = 0, inlined = 0;

	run_fixture("symtest_c", &r);
	fixture("symtest_c", bin, sizeof(bin));
	snprintf(cmd, sizeof(cmd), "nm -S '%s'", bin);
	f = popen(cmd, "r");
	while (fgets(line, sizeof(line), f)) {
		uint64_t a, sz;
		char t[8], name[256];

		if (sscanf(line, "%" SCNx64 " %" SCNx64 " %7s %255s", &a, &sz, t, name) != 4)
			continue;
		if (strcmp(name, "leaf") == 0)
			nm_leaf = a, sz_leaf = sz;
		if (strcmp(name, "hot_a") == 0)
			nm_hot = a, sz_hot = sz;
	}
	pclose(f);
	cr_assert(nm_leaf && nm_hot && sz_leaf && sz_hot);
	/* the load bias as the process itself saw it: independent of our program-header mapping */
	bias = addr_of(&r, "leaf") - nm_leaf;
	cr_assert_eq(addr_of(&r, "hot_a") - nm_hot, bias);
	for (int fnc = 0; fnc < 2; fnc++) {
		uint64_t lo = fnc ? nm_hot : nm_leaf, sz = fnc ? sz_hot : sz_leaf;

		for (uint64_t v = lo; v < lo + sz; v += 3) {
			static struct a2l e;
			struct prs_symframe fr[PRS_SYM_MAX_INLINE];
			int n = prs_symbolize(s, map_of(&r, v + bias), v + bias, true, fr, PRS_SYM_MAX_INLINE);

			addr2line("eu-addr2line", bin, v, &e);
			cr_assert_eq(n, e.n, "%#" PRIx64 ": %d frames, eu-addr2line %d", v, n, e.n);
			for (int i = 0; i < n; i++) {
				const struct prs_symframe *g = &fr[n - 1 - i];

				cr_expect_str_eq(g->name, e.names[i], "%#" PRIx64 " frame %d", v, i);
				cr_expect_str_eq(g->file ? g->file : "??", e.files[i], "%#" PRIx64, v);
				cr_expect_eq(g->line, e.lines[i], "%#" PRIx64 " %s: line %u, eu %u", v,
					     e.names[i], g->line, e.lines[i]);
			}
			inlined += n > 1;
			compared++;
		}
	}
	cr_expect_gt(inlined, 0, "no inlined address compared");
	cr_log_info("%d addresses compared with eu-addr2line, %d with inlines", compared, inlined);
	prs_symbolizer_free(s);
}

/* "::h" followed by 16 hex digits at the end: a legacy Rust hash */
static bool has_legacy_hash(const char *name)
{
	size_t n = strlen(name);

	if (n < 19 || strncmp(name + n - 19, "::h", 3) != 0)
		return false;
	for (size_t i = n - 16; i < n; i++)
		if (!strchr("0123456789abcdef", name[i]))
			return false;
	return true;
}

static void rust_chain(const char *bin)
{
	struct prs_symbolizer *s = prs_symbolizer_new();
	struct prs_symframe fr[PRS_SYM_MAX_INLINE];
	struct run r;
	uint64_t pc, hot;
	int n;

	run_fixture(bin, &r);
	/* pc = the address after `lea reg, [rip]` in mix(); pc - 1 is inside the asm! line */
	pc = addr_of(&r, "mix_pc");
	n = prs_symbolize(s, map_of(&r, pc), pc, false, fr, PRS_SYM_MAX_INLINE);
	cr_assert_eq(n, 2, "%s: chain of %d", bin, n);
	expect_frame(&fr[0], "symtest::leaf", "/tests/fixtures/symbol/symtest.rs",
		     marker_line("symtest.rs", "rs_leaf_call"), PRS_KIND_RUST);
	expect_frame(&fr[1], "symtest::mix", "/tests/fixtures/symbol/symtest.rs",
		     marker_line("symtest.rs", "rs_mix_pc"), PRS_KIND_RUST);
	hot = addr_of(&r, "hot_a");
	n = prs_symbolize(s, map_of(&r, hot), hot, true, fr, PRS_SYM_MAX_INLINE);
	cr_assert_geq(n, 1);
	cr_expect_str_eq(fr[0].name, "symtest::cpu::hot_a");
	cr_expect_eq(fr[0].kind, PRS_KIND_RUST);
	for (int i = 0; i < n; i++)
		cr_expect_not(has_legacy_hash(fr[i].name), "hash left in %s", fr[i].name);
	prs_symbolizer_free(s);
}

Test(symbol, rust_inline_chain_legacy) { rust_chain("symtest_rs"); }
Test(symbol, rust_inline_chain_v0) { rust_chain("symtest_rs_v0"); }

Test(symbol, cpp_names)
{
	struct prs_symbolizer *s = prs_symbolizer_new();
	struct prs_symframe fr[8];
	struct run r;
	uint64_t a;
	int n;

	run_fixture("symtest_cpp", &r);
	a = addr_of(&r, "scale");
	n = prs_symbolize(s, map_of(&r, a), a, true, fr, 8);
	cr_assert_eq(n, 1);
	expect_frame(&fr[0], "geo::detail::scale(long, int)", "/tests/fixtures/symbol/symtest.cpp", 0,
		     PRS_KIND_CPP);
	/* the lambda in main() is inlined there and has no linkage name: its DWARF scope names it */
	{
		char bin[512], cmd[700], line[512];
		uint64_t nm_main = 0, sz_main = 0, nm_scale = 0, bias;
		uint32_t want = marker_line("symtest.cpp", "cpp_lambda");
		int found = 0;
		FILE *f;

		snprintf(cmd, sizeof(cmd), "nm -S '%s'", fixture("symtest_cpp", bin, sizeof(bin)));
		f = popen(cmd, "r");
		while (fgets(line, sizeof(line), f)) {
			uint64_t v, z;
			char t[8], sym[256];

			if (sscanf(line, "%" SCNx64 " %" SCNx64 " %7s %255s", &v, &z, t, sym) != 4)
				continue;
			if (strcmp(sym, "main") == 0)
				nm_main = v, sz_main = z;
			if (strcmp(sym, "_ZN3geo6detail5scaleEli") == 0)
				nm_scale = v;
		}
		pclose(f);
		cr_assert(nm_main && sz_main && nm_scale);
		bias = a - nm_scale;
		for (uint64_t v = nm_main; v < nm_main + sz_main; v++) {
			n = prs_symbolize(s, map_of(&r, v + bias), v + bias, true, fr, 8);
			for (int i = 0; i < n; i++)
				if (strcmp(fr[i].name, "main::{lambda}::operator()") == 0) {
					cr_expect_eq(fr[i].kind, PRS_KIND_CPP);
					cr_expect_str_eq(fr[0].name, "main");
					found += fr[i].line == want;
				}
		}
		cr_expect_gt(found, 0, "no main::{lambda}::operator() frame at line %u", want);
	}
	prs_symbolizer_free(s);
}

Test(symbol, build_id)
{
	char bin[512], cmd[700], line[512], hex[130] = "", want[130] = "";
	uint8_t id[64];
	size_t len = 0;
	FILE *f;

	fixture("symtest_c", bin, sizeof(bin));
	cr_assert_eq(prs_elf_build_id(bin, id, sizeof(id), &len), 0);
	for (size_t i = 0; i < len; i++)
		snprintf(hex + 2 * i, 3, "%02x", id[i]);
	snprintf(cmd, sizeof(cmd), "eu-readelf -n '%s'", bin);
	f = popen(cmd, "r");
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, " Build ID: %129s", want) == 1)
			break;
	pclose(f);
	cr_expect_str_eq(hex, want);
	cr_expect_eq(len, 20);
	/* without section headers (e_shoff = e_shnum = 0): found through the PT_NOTE segment */
	{
		char dir[] = "/tmp/prs-bid-XXXXXX", path[600];
		uint8_t id2[64];
		size_t len2 = 0;
		FILE *in = fopen(bin, "rb"), *out;
		Elf64_Ehdr eh;
		int c;

		cr_assert(in && mkdtemp(dir));
		snprintf(path, sizeof(path), "%s/noshdr", dir);
		out = fopen(path, "wb");
		cr_assert(out && fread(&eh, sizeof(eh), 1, in) == 1);
		eh.e_shoff = 0;
		eh.e_shnum = 0;
		eh.e_shstrndx = 0;
		fwrite(&eh, sizeof(eh), 1, out);
		while ((c = fgetc(in)) != EOF)
			fputc(c, out);
		fclose(in);
		fclose(out);
		cr_expect_eq(prs_elf_build_id(path, id2, sizeof(id2), &len2), 0);
		cr_expect(len2 == len && memcmp(id, id2, len) == 0);
		unlink(path);
		rmdir(dir);
	}
	cr_expect_eq(prs_elf_build_id(bin, id, 4, &len), -ENOBUFS);
	cr_expect_eq(prs_elf_build_id("/nonexistent/file", id, sizeof(id), &len), -ENOENT);
	cr_expect_eq(prs_elf_build_id(PRS_SYMBOL_SRC "/symtest.c", id, sizeof(id), &len), -ENOEXEC);
}

Test(symbol, build_id_mismatch)
{
	struct prs_symbolizer *s = prs_symbolizer_new();
	struct prs_symbolize_stats st;
	struct prs_symframe fr[8];
	struct prs_symmap m;
	char other[512];
	struct run r;
	uint64_t ra;

	run_fixture("symtest_c", &r);
	ra = addr_of(&r, "probe_ra");
	m = *map_of(&r, ra);
	cr_assert(m.build_id_len > 0);
	/* the file at the recorded path was rebuilt: another build id */
	m.path = fixture("symtest_c2", other, sizeof(other));
	for (int i = 0; i < 3; i++)
		cr_expect_eq(prs_symbolize(s, &m, ra, false, fr, 8), 0);
	prs_symbolizer_stats(s, &st);
	cr_expect_eq(st.build_id_mismatches, 1, "mismatches %u", st.build_id_mismatches);
	cr_expect_eq(st.files, 1);
	cr_expect_eq(st.symbolized, 0);
	cr_expect_eq(st.frames, 3);
	/* without a recorded id the file is used (nothing to check against) */
	m.build_id = NULL;
	m.build_id_len = 0;
	cr_expect_geq(prs_symbolize(s, &m, ra, false, fr, 8), 1);
	prs_symbolizer_free(s);
}

Test(symbol, missing_and_pseudo_files)
{
	struct prs_symbolizer *s = prs_symbolizer_new();
	struct prs_symbolize_stats st;
	struct prs_symframe fr[8];
	struct prs_symmap m = { "/nonexistent/libgone.so", NULL, 0, 0x7f0000000000, 0x7f0000100000, 0 };
	struct prs_symmap v = { "[heap]", NULL, 0, 0x7fff0000, 0x7fff2000, 0 };

	cr_expect_eq(prs_symbolize(s, &m, 0x7f0000001234, true, fr, 8), 0);
	cr_expect_eq(prs_symbolize(s, &m, 0x7f0000005678, false, fr, 8), 0);
	cr_expect_eq(prs_symbolize(s, &v, 0x7fff0100, true, fr, 8), 0);
	/* outside the mapping, and a return address at the very start of it */
	cr_expect_eq(prs_symbolize(s, &m, 0x7f0000100000, true, fr, 8), 0);
	cr_expect_eq(prs_symbolize(s, &m, 0x7f0000000000, false, fr, 8), 0);
	cr_expect_eq(prs_symbolize(s, &m, 1, true, fr, 0), -EINVAL);
	prs_symbolizer_stats(s, &st);
	cr_expect_eq(st.files, 1);
	cr_expect_eq(st.files_missing, 1);
	prs_symbolizer_free(s);
}

/* A stripped copy: names from .symtab; with its debug file beside it (.gnu_debuglink): lines too. */
Test(symbol, stripped_and_debuglink)
{
	struct prs_symbolizer *s = prs_symbolizer_new();
	char dir[] = "/tmp/prs-symtest-XXXXXX", bin[512], path[600], cmd[1400];
	struct prs_symframe fr[8];
	struct prs_symmap m;
	struct run r;
	uint64_t ra;
	int n;

	cr_assert(mkdtemp(dir));
	run_fixture("symtest_c", &r);
	fixture("symtest_c", bin, sizeof(bin));
	snprintf(cmd, sizeof(cmd), "cd %s && cp '%s' nodebug && strip -g nodebug", dir, bin);
	sh(cmd);
	snprintf(cmd, sizeof(cmd), "cd %s && cp '%s' linked && objcopy --only-keep-debug linked "
		 "linked.debug && strip -g linked && objcopy --add-gnu-debuglink=linked.debug linked",
		 dir, bin);
	sh(cmd);
	ra = addr_of(&r, "probe_ra");
	m = *map_of(&r, ra);
	m.path = path;
	snprintf(path, sizeof(path), "%s/nodebug", dir);
	n = prs_symbolize(s, &m, ra, false, fr, 8);
	cr_assert_eq(n, 1);
	cr_expect_str_eq(fr[0].name, "leaf");
	cr_expect_null(fr[0].file);
	cr_expect_eq(fr[0].line, 0);
	snprintf(path, sizeof(path), "%s/linked", dir);
	n = prs_symbolize(s, &m, ra, false, fr, 8);
	cr_assert_eq(n, 2);
	cr_expect_str_eq(fr[0].name, "leaf");
	cr_expect_str_eq(fr[1].name, "mix");
	cr_expect_eq(fr[1].line, marker_line("symtest.c", "c_mix_call"));
	prs_symbolizer_free(s);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	sh(cmd);
}

/* Truncated, random and corrupted ELF files: clean errors, no crash. */
Test(symbol, hostile_elf)
{
	char dir[] = "/tmp/prs-hostile-XXXXXX", bin[512], path[600];
	struct prs_symbolizer *s = prs_symbolizer_new();
	struct prs_symframe fr[8];
	uint8_t *img, id[64];
	size_t len, idlen;

	seed_rand();
	cr_assert(mkdtemp(dir));
	img = read_file(fixture("symtest_c", bin, sizeof(bin)), &len);
	{
		size_t cuts[] = { 0, 1, 4, 16, 63, 64, 100, 700, 1000, 4096, len / 3, len / 2, len - 1 };

		for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
			struct prs_symmap m = { path, NULL, 0, 0x400000, 0x500000, 0 };
			int rc;

			snprintf(path, sizeof(path), "%s/cut%zu", dir, i);
			write_file(path, img, cuts[i]);
			rc = prs_elf_build_id(path, id, sizeof(id), &idlen);
			cr_expect(rc == 0 || rc == -ENOEXEC || rc == -ENODATA, "cut %zu: %d", cuts[i], rc);
			if (cuts[i] < 64) /* not even an ELF header */
				cr_expect_eq(rc, -ENOEXEC, "cut %zu: %d", cuts[i], rc);
			for (uint64_t a = 0x401000; a < 0x402000; a += 0x111)
				cr_expect_geq(prs_symbolize(s, &m, a, true, fr, 8), 0);
		}
	}
	/* random bytes behind a valid ELF header and program headers, and pure random files */
	for (int it = 0; it < 40; it++) {
		struct prs_symmap m = { path, NULL, 0, 0x400000, 0x500000, 0x1000 };
		uint8_t *copy = malloc(len);
		size_t keep = it < 20 ? 64 + (size_t)rand() % 1024 : 0;

		memcpy(copy, img, len);
		for (size_t i = keep; i < len; i++)
			if (it >= 20 || rand() % 16 == 0)
				copy[i] = (uint8_t)rand();
		snprintf(path, sizeof(path), "%s/rand%d", dir, it);
		write_file(path, copy, len);
		prs_elf_build_id(path, id, sizeof(id), &idlen);
		for (uint64_t a = 0x400000; a < 0x404000; a += 0x177)
			cr_expect_geq(prs_symbolize(s, &m, a, it & 1, fr, 8), 0);
		free(copy);
	}
	/* a build-id note whose descriptor size runs past its section */
	{
		uint8_t *copy = malloc(len);
		int patched = 0;

		memcpy(copy, img, len);
		for (size_t i = 0; i + 16 < len && !patched; i++) {
			/* namesz 4, descsz 20, type 3 (NT_GNU_BUILD_ID), "GNU\0" */
			static const uint8_t note[] = { 4, 0, 0, 0, 20, 0, 0, 0, 3, 0, 0, 0, 'G', 'N', 'U', 0 };

			if (memcmp(copy + i, note, sizeof(note)) == 0) {
				copy[i + 4] = 0xf0;
				copy[i + 7] = 0x7f;
				patched = 1;
			}
		}
		cr_assert(patched);
		snprintf(path, sizeof(path), "%s/badnote", dir);
		write_file(path, copy, len);
		cr_expect_lt(prs_elf_build_id(path, id, sizeof(id), &idlen), 0);
		free(copy);
	}
	free(img);
	prs_symbolizer_free(s);
	snprintf(path, sizeof(path), "rm -rf %s", dir);
	sh(path);
}

/* The profile pass: raw frames get expansions, unknown ones stay raw, stats add up. */
Test(symbol, symbolize_profile)
{
	struct prs_profile *p = prs_profile_new();
	struct prs_symbolize_stats st;
	struct prs_err err = { 0 };
	struct prs_mapping pm = { 0 }, gone = { 0 };
	const struct prs_symmap *m;
	uint32_t mid, gid, f_ra, f_hot, f_gone;
	struct run r;
	uint64_t ra;

	cr_assert(p);
	run_fixture("symtest_c", &r);
	ra = addr_of(&r, "probe_ra");
	m = map_of(&r, ra);
	pm.start = m->start;
	pm.end = m->end;
	pm.offset = m->offset;
	pm.path = prs_profile_string(p, m->path, strlen(m->path));
	pm.build_id_len = (uint8_t)m->build_id_len;
	memcpy(pm.build_id, m->build_id, m->build_id_len);
	mid = prs_profile_mapping(p, &pm);
	gone.start = 0x7f0000000000;
	gone.end = 0x7f0000010000;
	gone.path = prs_profile_string(p, "/nonexistent/libgone.so", 23);
	gid = prs_profile_mapping(p, &gone);
	f_ra = prs_profile_raw_frame(p, mid, ra, false);
	f_hot = prs_profile_raw_frame(p, mid, addr_of(&r, "hot_a"), true);
	f_gone = prs_profile_raw_frame(p, gid, 0x7f0000001000, true);
	prs_profile_raw_frame(p, PRS_NO_MAPPING, 0x1234, true);
	cr_assert_eq(prs_symbolize_profile(p, NULL, &st, &err), 0, "%s", err.msg);
	cr_expect_eq(st.frames, 3);
	cr_expect_eq(st.symbolized, 2);
	cr_expect_eq(st.inlined, 1);
	cr_expect_eq(st.with_line, 2);
	cr_expect_eq(st.files_missing, 1);
	cr_expect_eq(st.build_id_mismatches, 0);
	cr_assert(p->expansions);
	cr_assert_eq(p->expansions[f_ra].count, 2);
	{
		const struct prs_frame *a = &p->frames[p->expand_ids[p->expansions[f_ra].first]];
		const struct prs_frame *b = &p->frames[p->expand_ids[p->expansions[f_ra].first + 1]];

		cr_expect_str_eq(p->strings[a->name], "leaf");
		cr_expect_eq(a->line, marker_line("symtest.c", "c_leaf_call"));
		cr_expect_str_eq(p->strings[b->name], "mix");
		cr_expect_eq(b->line, marker_line("symtest.c", "c_mix_call"));
		cr_expect_eq(b->kind, PRS_KIND_NATIVE);
		cr_expect(ends_with(p->strings[b->file], "/tests/fixtures/symbol/symtest.c"));
	}
	cr_expect_eq(p->expansions[f_hot].count, 1);
	cr_expect_eq(p->expansions[f_gone].count, 0);
	/* a second pass finds everything done */
	cr_assert_eq(prs_symbolize_profile(p, &(struct prs_symbol_opts){ .root = "/" }, &st, &err), 0,
		     "%s", err.msg);
	cr_expect_eq(st.frames, 1, "only the unknown frame is retried");
	prs_profile_free(p);
}

/* Answers are cached: the same strings come back, and the counters count every call. */
Test(symbol, cache_and_root)
{
	struct prs_symbolizer *s = prs_symbolizer_new();
	struct prs_symframe a[8], b[8];
	struct prs_symbolize_stats st;
	struct prs_symmap m;
	struct run r;
	uint64_t ra;

	run_fixture("symtest_c", &r);
	ra = addr_of(&r, "probe_ra");
	m = *map_of(&r, ra);
	cr_assert_eq(prs_symbolizer_set_opts(s, &(struct prs_symbol_opts){ .root = "/proc/self/root/" }), 0);
	cr_assert_eq(prs_symbolize(s, &m, ra, false, a, 8), 2);
	cr_assert_eq(prs_symbolize(s, &m, ra, false, b, 8), 2);
	cr_expect_eq(prs_symbolizer_set_opts(s, NULL), -EBUSY);
	cr_expect_eq(a[1].name, b[1].name);
	cr_expect_eq(a[1].file, b[1].file);
	prs_symbolizer_stats(s, &st);
	cr_expect_eq(st.frames, 2);
	cr_expect_eq(st.files, 1);
	cr_expect_eq(st.inlined, 2);
	prs_symbolizer_free(s);
}

/* Corrupted DWARF (random bytes written into every .debug_* section): no crash, no hang. */
Test(symbol, hostile_dwarf, .timeout = 120)
{
	const char *bins[] = { "symtest_c", "symtest_rs" };
	char dir[] = "/tmp/prs-dwarf-XXXXXX", bin[512], path[600];

	seed_rand();
	cr_assert(mkdtemp(dir));
	cr_assert_neq(elf_version(EV_CURRENT), EV_NONE);
	for (size_t b = 0; b < 2; b++) {
		GElf_Phdr text = { 0 };
		uint8_t *img;
		size_t len, shstr, nph;
		Elf_Scn *scn = NULL;
		Elf *e;
		int fd;

		fixture(bins[b], bin, sizeof(bin));
		fd = open(bin, O_RDONLY);
		cr_assert_geq(fd, 0);
		e = elf_begin(fd, ELF_C_READ, NULL);
		cr_assert(e && elf_getshdrstrndx(e, &shstr) == 0 && elf_getphdrnum(e, &nph) == 0);
		for (size_t i = 0; i < nph; i++) {
			GElf_Phdr ph;

			if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_LOAD && (ph.p_flags & PF_X))
				text = ph;
		}
		cr_assert(text.p_memsz);
		img = read_file(bin, &len);
		for (int it = 0; it < 4; it++) {
			uint8_t *copy = malloc(len);
			struct prs_symbolizer *s = prs_symbolizer_new();
			struct prs_symmap m = { path, NULL, 0, 0x555500000000 + (text.p_vaddr & ~0xfffull),
						0x555500000000 + text.p_vaddr + text.p_memsz,
						text.p_offset & ~0xfffull };
			struct prs_symframe fr[PRS_SYM_MAX_INLINE];

			memcpy(copy, img, len);
			scn = NULL;
			while ((scn = elf_nextscn(e, scn))) {
				GElf_Shdr sh;
				const char *name;

				if (!gelf_getshdr(scn, &sh) || !(name = elf_strptr(e, shstr, sh.sh_name)) ||
				    strncmp(name, ".debug_", 7) != 0 || sh.sh_size == 0 ||
				    sh.sh_offset + sh.sh_size > len)
					continue;
				for (int k = 1 + rand() % 16; k > 0; k--)
					copy[sh.sh_offset + (size_t)rand() % sh.sh_size] = (uint8_t)rand();
			}
			snprintf(path, sizeof(path), "%s/%s.%d", dir, bins[b], it);
			write_file(path, copy, len);
			for (uint64_t a = m.start; a < m.end; a += 1 + (uint64_t)rand() % 24)
				cr_expect_geq(prs_symbolize(s, &m, a, a & 1, fr, PRS_SYM_MAX_INLINE), 0);
			prs_symbolizer_free(s);
			free(copy);
		}
		free(img);
		elf_end(e);
		close(fd);
	}
	snprintf(path, sizeof(path), "rm -rf %s", dir);
	sh(path);
}

/* [vdso] frames: symbolized with our own vDSO (same kernel); the truth is its .dynsym, read here. */
Test(symbol, vdso)
{
	struct prs_symbolizer *s = prs_symbolizer_new();
	uint64_t base = 0, end = 0, target = 0;
	struct prs_symframe fr[4];
	char line[512], names[8][64];
	int nnames = 0, n;
	Elf_Scn *scn = NULL;
	Elf *e;
	FILE *f = fopen("/proc/self/maps", "r");

	while (fgets(line, sizeof(line), f))
		if (strstr(line, "[vdso]"))
			cr_assert_eq(sscanf(line, "%" SCNx64 "-%" SCNx64, &base, &end), 2);
	fclose(f);
	if (!base)
		cr_skip_test("no [vdso] mapping");
	cr_assert_neq(elf_version(EV_CURRENT), EV_NONE);
	e = elf_memory((char *)(uintptr_t)base, end - base);
	cr_assert(e);
	/* the address of __vdso_clock_gettime, and every name defined there */
	for (int pass = 0; pass < 2; pass++) {
		scn = NULL;
		while ((scn = elf_nextscn(e, scn))) {
			GElf_Shdr sh;
			Elf_Data *d;

			if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNSYM || !(d = elf_getdata(scn, NULL)))
				continue;
			for (size_t i = 0; i < sh.sh_size / sh.sh_entsize; i++) {
				GElf_Sym sym;
				const char *nm;

				if (!gelf_getsym(d, (int)i, &sym) || !(nm = elf_strptr(e, sh.sh_link, sym.st_name)))
					continue;
				if (pass == 0 && strcmp(nm, "__vdso_clock_gettime") == 0)
					target = sym.st_value;
				if (pass == 1 && target && sym.st_value == target && nnames < 8)
					snprintf(names[nnames++], sizeof(names[0]), "%s", nm);
			}
		}
	}
	elf_end(e);
	cr_assert(target, "no __vdso_clock_gettime in the vDSO");
	{
		struct prs_symmap m = { "[vdso]", NULL, 0, base, end, 0 };
		bool ok = false;

		n = prs_symbolize(s, &m, base + target + 2, true, fr, 4);
		cr_assert_eq(n, 1);
		for (int i = 0; i < nnames; i++)
			ok |= strcmp(fr[0].name, names[i]) == 0;
		cr_expect(ok, "got %s for __vdso_clock_gettime", fr[0].name);
	}
	prs_symbolizer_free(s);
}

/*
 * A big real library: pyenv's libpython3.12 (gcc -O3 -g), loaded here with dlopen so the mapping
 * is the loader's. 200 addresses at random offsets in random functions, against one
 * `eu-addr2line -a -i -f` run, and binutils' addr2line where the two differ. Skipped when that
 * Python is not installed.
 */
Test(symbol, libpython_matches_eu_addr2line, .timeout = 120)
{
	const char *home = getenv("PYENV_ROOT");
	char lib[512], cmd[16384], line[4096];
	uint64_t vaddrs[200], base = 0, funcs[4096][2];
	size_t nfuncs = 0, nv = 0, off, mismatches = 0, chains = 0, compared = 0, rechecked = 0;
	struct prs_symmap maps[16];
	char paths[16][512];
	int nmaps = 0;
	unsigned seed = (unsigned)time(NULL);
	struct prs_symbolizer *s;
	FILE *f;
	void *h;

	if (getenv("PRS_SEED"))
		seed = (unsigned)strtoul(getenv("PRS_SEED"), NULL, 10);
	snprintf(lib, sizeof(lib), "%s/versions/3.12.1/lib/libpython3.12.so.1.0",
		 home ? home : "/root/.pyenv");
	if (access(lib, R_OK) != 0)
		cr_skip_test("no %s", lib);
	cr_log_info("seed %u (PRS_SEED=%u to replay)", seed, seed);
	srand(seed);
	h = dlopen(lib, RTLD_LAZY | RTLD_LOCAL);
	cr_assert(h, "dlopen %s", lib);
	f = fopen("/proc/self/maps", "r");
	while (fgets(line, sizeof(line), f)) {
		uint64_t st, en, o;
		char perm[8], path[512] = "";

		if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %7s %" SCNx64 " %*s %*s %511s", &st, &en, perm, &o,
			   path) == 5 && strstr(path, "libpython3.12.so") && nmaps < 16) {
			if (o == 0 && !base)
				base = st; /* the first PT_LOAD is at vaddr 0, file offset 0 */
			snprintf(paths[nmaps], sizeof(paths[0]), "%s", path);
			maps[nmaps] = (struct prs_symmap){ paths[nmaps], NULL, 0, st, en, o };
			nmaps++;
		}
	}
	fclose(f);
	cr_assert(base && nmaps);
	snprintf(cmd, sizeof(cmd), "nm -S --defined-only '%s'", lib);
	f = popen(cmd, "r");
	while (fgets(line, sizeof(line), f) && nfuncs < 4096) {
		uint64_t a, sz;
		char t[8], name[1024];

		if (sscanf(line, "%" SCNx64 " %" SCNx64 " %7s %1023s", &a, &sz, t, name) == 4 &&
		    (t[0] == 't' || t[0] == 'T') && sz > 1) {
			funcs[nfuncs][0] = a;
			funcs[nfuncs][1] = sz;
			nfuncs++;
		}
	}
	pclose(f);
	cr_assert_gt(nfuncs, 1000);
	off = (size_t)snprintf(cmd, sizeof(cmd), "eu-addr2line -a -i -f -e '%s'", lib);
	for (; nv < 200; nv++) {
		size_t k = (size_t)rand() % nfuncs;

		vaddrs[nv] = funcs[k][0] + (uint64_t)rand() % funcs[k][1];
		off += (size_t)snprintf(cmd + off, sizeof(cmd) - off, " %#" PRIx64, vaddrs[nv]);
	}
	f = popen(cmd, "r");
	cr_assert(f);
	s = prs_symbolizer_new();
	{
		static struct a2l e;
		bool more = true, have = false;
		size_t cur = 0;

		while (more) {
			more = fgets(line, sizeof(line), f) != NULL;
			if (!more || strncmp(line, "0x", 2) == 0) {
				if (have) { /* compare the previous address */
					uint64_t pc = base + vaddrs[cur];
					const struct prs_symmap *m = NULL;
					struct prs_symframe fr[PRS_SYM_MAX_INLINE];
					bool same;
					int n;

					a2l_finish(&e);
					for (int i = 0; i < nmaps; i++)
						if (pc >= maps[i].start && pc < maps[i].end)
							m = &maps[i];
					cr_assert(m);
					n = prs_symbolize(s, m, pc, true, fr, PRS_SYM_MAX_INLINE);
					same = a2l_same(&e, fr, n);
					if (!same) {
						/*
						 * eu-addr2line 0.188 drops a frame of some nested inline
						 * chains (seen: 0x28b204, "inlined at compile.c:229 in
						 * compiler_addop_name" skipping instr_sequence_next_inst):
						 * binutils' addr2line, another DWARF reader, decides.
						 */
						addr2line("addr2line", lib, vaddrs[cur], &e);
						same = a2l_same(&e, fr, n);
						rechecked += same;
					}
					if (!same && mismatches++ < 5)
						cr_log_warn("%#" PRIx64 ": eu-addr2line %d frames (%s %s:%u), "
							    "we %d (%s %s:%u)", vaddrs[cur], e.n,
							    e.n ? e.names[0] : "-", e.n ? e.files[0] : "-",
							    e.n ? e.lines[0] : 0, n, n > 0 ? fr[n - 1].name : "-",
							    n > 0 && fr[n - 1].file ? fr[n - 1].file : "-",
							    n > 0 ? fr[n - 1].line : 0);
					chains += n > 1;
					compared++;
					cur++;
				}
				memset(&e, 0, sizeof(e));
				have = true;
				continue;
			}
			if (have) {
				char loc[4096];

				if (!fgets(loc, sizeof(loc), f))
					break;
				a2l_pair(&e, line, loc);
			}
		}
	}
	pclose(f);
	cr_log_info("libpython: %zu addresses compared, %zu with inline chains, %zu differ (%zu where "
		    "eu-addr2line differs but binutils addr2line agrees)", compared, chains, mismatches,
		    rechecked);
	cr_expect_eq(compared, 200);
	cr_expect_gt(chains, 20);
	cr_expect_eq(mismatches, 0, "%zu of %zu addresses differ from both addr2lines", mismatches,
		     compared);
	prs_symbolizer_free(s);
	dlclose(h);
}

/*
 * Inline chains against binutils' addr2line -i -C, which, unlike eu-addr2line, descends into the
 * namespace DIEs rustc nests functions in: every 2nd byte of two functions (sym0, sym1: nm names,
 * "*x" = containing x) of a fixture, for Rust with legacy and v0 mangling, and C++.
 */
static void vs_binutils(const char *name, const char *sym0, const char *sym1, const char *printed,
			int which, int min_chains)
{
	struct prs_symbolizer *s = prs_symbolizer_new();
	char bin[512], cmd[16384], line[4096];
	uint64_t lo[2] = { 0 }, sz[2] = { 0 }, bias = 0;
	int compared = 0, chains = 0, bad = 0;
	struct run r;
	FILE *f;

	run_fixture(name, &r);
	fixture(name, bin, sizeof(bin));
	snprintf(cmd, sizeof(cmd), "nm -S '%s'", bin);
	f = popen(cmd, "r");
	while (fgets(line, sizeof(line), f)) {
		uint64_t a, z;
		char t[8], sym[2048];

		if (sscanf(line, "%" SCNx64 " %" SCNx64 " %7s %2047s", &a, &z, t, sym) != 4)
			continue;
		if (strcmp(sym, sym0) == 0 || (sym0[0] == '*' && strstr(sym, sym0 + 1)))
			lo[0] = a, sz[0] = z;
		if (strcmp(sym, sym1) == 0 || (sym1[0] == '*' && strstr(sym, sym1 + 1)))
			lo[1] = a, sz[1] = z;
	}
	pclose(f);
	cr_assert(lo[0] && lo[1] && sz[0] && sz[1]);
	/* the load bias as the process saw it: its printed address of function `which` */
	bias = addr_of(&r, printed) - lo[which];
	for (int k = 0; k < 2; k++) {
		size_t off = (size_t)snprintf(cmd, sizeof(cmd), "addr2line -a -i -f -C -e '%s'", bin);
		static struct a2l e;
		bool more = true, have = false;
		uint64_t cur = lo[k];

		for (uint64_t v = lo[k]; v < lo[k] + sz[k] && off + 24 < sizeof(cmd); v += 2)
			off += (size_t)snprintf(cmd + off, sizeof(cmd) - off, " %#" PRIx64, v);
		f = popen(cmd, "r");
		cr_assert(f);
		while (more) {
			more = fgets(line, sizeof(line), f) != NULL;
			if (!more || strncmp(line, "0x", 2) == 0) {
				if (have) {
					struct prs_symframe fr[PRS_SYM_MAX_INLINE];
					int n = prs_symbolize(s, map_of(&r, cur + bias), cur + bias, true, fr,
							      PRS_SYM_MAX_INLINE);

					if (!a2l_same(&e, fr, n) && bad++ < 5)
						cr_log_warn("%s %#" PRIx64 ": addr2line %d frames (%s %s:%u), we %d "
							    "(%s %s:%u)", name, cur, e.n, e.n ? e.names[0] : "-",
							    e.n ? e.files[0] : "-", e.n ? e.lines[0] : 0, n,
							    n > 0 ? fr[n - 1].name : "-",
							    n > 0 && fr[n - 1].file ? fr[n - 1].file : "-",
							    n > 0 ? fr[n - 1].line : 0);
					chains += n > 1;
					compared++;
					cur += 2;
				}
				memset(&e, 0, sizeof(e));
				have = true;
				continue;
			}
			if (have) {
				char loc[4096];

				if (!fgets(loc, sizeof(loc), f))
					break;
				a2l_pair(&e, line, loc);
			}
		}
		pclose(f);
	}
	cr_log_info("%s: %d addresses compared with binutils addr2line, %d with inlines, %d differ", name,
		    compared, chains, bad);
	cr_expect_geq(chains, min_chains);
	cr_expect_eq(bad, 0);
	prs_symbolizer_free(s);
}

Test(symbol, rust_matches_binutils_addr2line_legacy)
{
	vs_binutils("symtest_rs", "*7symtest4leaf", "*7symtest3cpu5hot_a", "leaf", 0, 10);
}
Test(symbol, rust_matches_binutils_addr2line_v0)
{
	vs_binutils("symtest_rs_v0", "*7symtest4leaf", "*7symtest3cpu5hot_a", "leaf", 0, 10);
}
/* main() inlines std::map and std::vector code and the lambda; scale() is a plain function */
Test(symbol, cpp_matches_binutils_addr2line)
{
	vs_binutils("symtest_cpp", "main", "_ZN3geo6detail5scaleEli", "scale", 1, 50);
}

/*
 * A container-like root: the mapping names /opt/prs-absent/app, which exists only under root, and
 * is stripped; its debug info is under root's /usr/lib/debug/.build-id/xx/yyyy.debug.
 */
Test(symbol, root_and_build_id_debug_dir)
{
	struct prs_symbolizer *s = prs_symbolizer_new();
	char dir[] = "/tmp/prs-root-XXXXXX", bin[512], cmd[2048], hex[64] = "";
	struct prs_symframe fr[8];
	struct prs_symmap m;
	struct run r;
	uint64_t ra;

	cr_assert(mkdtemp(dir));
	run_fixture("symtest_c", &r);
	fixture("symtest_c", bin, sizeof(bin));
	ra = addr_of(&r, "probe_ra");
	m = *map_of(&r, ra);
	cr_assert_eq(m.build_id_len, 20);
	for (size_t i = 0; i < m.build_id_len; i++)
		snprintf(hex + 2 * i, 3, "%02x", m.build_id[i]);
	snprintf(cmd, sizeof(cmd),
		 "set -e; cd %s; mkdir -p opt/prs-absent usr/lib/debug/.build-id/%.2s; "
		 "objcopy --only-keep-debug '%s' usr/lib/debug/.build-id/%.2s/%s.debug; "
		 "cp '%s' opt/prs-absent/app; strip -g opt/prs-absent/app",
		 dir, hex, bin, hex, hex + 2, bin);
	sh(cmd);
	m.path = "/opt/prs-absent/app";
	/* without the root: no such file */
	cr_expect_eq(prs_symbolize(s, &m, ra, false, fr, 8), 0);
	prs_symbolizer_free(s);
	s = prs_symbolizer_new();
	cr_assert_eq(prs_symbolizer_set_opts(s, &(struct prs_symbol_opts){ .root = dir }), 0);
	cr_assert_eq(prs_symbolize(s, &m, ra, false, fr, 8), 2);
	cr_expect_str_eq(fr[0].name, "leaf");
	cr_expect_str_eq(fr[1].name, "mix");
	cr_expect_eq(fr[1].line, marker_line("symtest.c", "c_mix_call"));
	prs_symbolizer_free(s);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	sh(cmd);
}

/* Valid UTF-8 (no overlongs or surrogates checked: enough to catch a cut sequence). */
static bool utf8_valid(const char *p)
{
	const unsigned char *s = (const unsigned char *)p;

	while (*s) {
		int n = *s < 0x80 ? 0 : (*s & 0xe0) == 0xc0 ? 1 : (*s & 0xf0) == 0xe0 ? 2
			: (*s & 0xf8) == 0xf0 ? 3 : -1;

		if (n < 0)
			return false;
		s++;
		for (int i = 0; i < n; i++, s++)
			if ((*s & 0xc0) != 0x80)
				return false;
	}
	return true;
}

/* A 1200-byte name (400 x U+20AC) is cut to PRS_MAX_NAME bytes at a character boundary. */
Test(symbol, long_utf8_name_truncated_on_a_boundary)
{
	struct prs_symbolizer *s = prs_symbolizer_new();
	struct prs_symframe fr[4];
	char want[1300] = "";
	struct run r;
	uint64_t a;
	int n;

	for (int i = 0; i < 400; i++)
		memcpy(want + 3 * i, "\xe2\x82\xac", 4);
	run_fixture("symtest_utf8", &r);
	a = addr_of(&r, "long");
	n = prs_symbolize(s, map_of(&r, a), a, true, fr, 4);
	cr_assert_eq(n, 1);
	cr_expect_eq(strlen(fr[0].name), PRS_MAX_NAME / 3 * 3, "length %zu", strlen(fr[0].name));
	cr_expect(utf8_valid(fr[0].name));
	cr_expect_eq(strncmp(fr[0].name, want, strlen(fr[0].name)), 0);
	prs_symbolizer_free(s);
}
