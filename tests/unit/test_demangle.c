// SPDX-License-Identifier: MIT
/*
 * prs_demangle on real symbols. Rust symbols come from the fixture tests/fixtures/symbol/symtest.rs
 * built with rustc's default (legacy) mangling and with -C symbol-mangling-version=v0; the
 * expected names are the source's module paths. C++ symbols come from the g++-built symtest.cpp,
 * and the expected names from binutils' c++filt. Hostile inputs must not crash.
 */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pyrsprof/symbol.h"
#include "util/banned.h"

#ifndef PRS_SYMBOL_FIXTURES
#define PRS_SYMBOL_FIXTURES "build/symbol"
#endif

static const char *fixture(const char *name, char *buf, size_t size)
{
	const char *dir = getenv("PRS_SYMBOL_FIXTURES");

	snprintf(buf, size, "%s/%s", dir && dir[0] ? dir : PRS_SYMBOL_FIXTURES, name);
	return buf;
}

/* The first symbol of `nm BIN` that starts with prefix and contains needle; static buffer. */
static const char *nm_symbol(const char *bin, const char *prefix, const char *needle)
{
	static char found[4096];
	char cmd[1024], line[4096];
	FILE *f;

	found[0] = '\0';
	snprintf(cmd, sizeof(cmd), "nm '%s'", fixture(bin, line, sizeof(line)));
	f = popen(cmd, "r");
	cr_assert(f, "popen %s", cmd);
	while (fgets(line, sizeof(line), f)) {
		char addr[64], type[8], name[4000];

		if (sscanf(line, "%63s %7s %3999s", addr, type, name) != 3)
			continue;
		if (strncmp(name, prefix, strlen(prefix)) == 0 && strstr(name, needle) && !found[0])
			snprintf(found, sizeof(found), "%s", name);
	}
	pclose(f);
	cr_assert(found[0], "no symbol %s...%s in %s", prefix, needle, bin);
	return found;
}

static void expect_demangled(const char *mangled, const char *want, enum prs_kind want_kind)
{
	enum prs_kind kind = PRS_KIND_UNKNOWN;
	char *got = prs_demangle(mangled, &kind);

	cr_assert(got, "%s: not demangled", mangled);
	cr_expect_str_eq(got, want, "%s", mangled);
	cr_expect_eq(kind, want_kind, "%s: kind %d", mangled, kind);
	free(got);
}

Test(demangle, rust_legacy_from_rustc)
{
	const char *s = nm_symbol("symtest_rs", "_ZN7symtest", "5hot_a17h");

	expect_demangled(s, "symtest::cpu::hot_a", PRS_KIND_RUST);
	expect_demangled(nm_symbol("symtest_rs", "_ZN7symtest", "4leaf17h"), "symtest::leaf",
			 PRS_KIND_RUST);
	/* the hash is dropped, whatever it is */
	expect_demangled("_ZN7symtest4leaf17h0123456789abcdefE", "symtest::leaf", PRS_KIND_RUST);
	expect_demangled(nm_symbol("symtest_rs", "_ZN7symtest", "4bump17h"), "symtest::Counter::bump",
			 PRS_KIND_RUST);
	/* legacy mangling does not encode generic arguments */
	expect_demangled(nm_symbol("symtest_rs", "_ZN7symtest", "5twice17h"), "symtest::twice",
			 PRS_KIND_RUST);
}

Test(demangle, rust_v0_from_rustc)
{
	expect_demangled(nm_symbol("symtest_rs_v0", "_RNv", "7symtest3cpu5hot_a"), "symtest::cpu::hot_a",
			 PRS_KIND_RUST);
	expect_demangled(nm_symbol("symtest_rs_v0", "_RNv", "7symtest4leaf"), "symtest::leaf",
			 PRS_KIND_RUST);
	expect_demangled(nm_symbol("symtest_rs_v0", "_RNv", "7Counter4bump"), "<symtest::Counter>::bump",
			 PRS_KIND_RUST);
	/* twice::<u64> is "y", twice::<u32> is "m" in the v0 grammar */
	expect_demangled(nm_symbol("symtest_rs_v0", "_RINv", "7symtest5twiceyE"), "symtest::twice::<u64>",
			 PRS_KIND_RUST);
	expect_demangled(nm_symbol("symtest_rs_v0", "_RINv", "7symtest5twicemE"), "symtest::twice::<u32>",
			 PRS_KIND_RUST);
}

Test(demangle, cpp_known_names)
{
	expect_demangled(nm_symbol("symtest_cpp", "_ZN3geo6detail5scale", ""), "geo::detail::scale(long, int)",
			 PRS_KIND_CPP);
	expect_demangled(nm_symbol("symtest_cpp", "_ZNK3geo3VecIiEeq", ""),
			 "geo::Vec<int>::operator==(geo::Vec<int> const&) const", PRS_KIND_CPP);
	expect_demangled(nm_symbol("symtest_cpp", "_ZNK3geo3VecIiEpl", ""),
			 "geo::Vec<int>::operator+(geo::Vec<int> const&) const [clone .isra.0]",
			 PRS_KIND_CPP);
}

/* Every C++ symbol of the fixture, against c++filt. */
Test(demangle, cpp_matches_cxxfilt)
{
	char cmd[1024], path[512], line[8192], filt[8192];
	FILE *f;
	int n = 0;

	snprintf(cmd, sizeof(cmd), "nm '%s' | awk '$3 ~ /^_Z/ {print $3}' | sort -u | "
		 "while read s; do echo \"$s\"; echo \"$s\" | c++filt; done",
		 fixture("symtest_cpp", path, sizeof(path)));
	f = popen(cmd, "r");
	cr_assert(f);
	while (fgets(line, sizeof(line), f) && fgets(filt, sizeof(filt), f)) {
		enum prs_kind kind = PRS_KIND_UNKNOWN;
		char *got;

		line[strcspn(line, "\n")] = '\0';
		filt[strcspn(filt, "\n")] = '\0';
		got = prs_demangle(line, &kind);
		if (strcmp(filt, line) == 0) { /* c++filt left it alone: so must we */
			cr_expect_null(got, "%s demangled to %s", line, got);
		} else {
			cr_expect(got && strcmp(got, filt) == 0, "%s: got %s, c++filt %s", line,
				  got ? got : "(null)", filt);
			cr_expect_eq(kind, PRS_KIND_CPP, "%s", line);
		}
		free(got);
		n++;
	}
	pclose(f);
	cr_expect_gt(n, 10, "only %d C++ symbols compared", n);
}

Test(demangle, not_mangled)
{
	const char *plain[] = { "main", "leaf", "", "_start", "_", "_Z", "_R", "_ZN", "PyEval_EvalCode",
				"_ZZZZ", "_RNvC", "__libc_start_main" };
	enum prs_kind kind = PRS_KIND_NATIVE;

	for (size_t i = 0; i < sizeof(plain) / sizeof(plain[0]); i++) {
		char *got = prs_demangle(plain[i], &kind);

		cr_expect_null(got, "'%s' demangled to '%s'", plain[i], got);
		free(got);
	}
	cr_expect_eq(kind, PRS_KIND_NATIVE, "kind changed on failure");
	cr_expect_null(prs_demangle(NULL, NULL));
}

/* Random and oversized input must not crash (libiberty bounds its recursion). */
Test(demangle, hostile_input)
{
	unsigned seed = (unsigned)time(NULL);
	const char *env = getenv("PRS_SEED");
	static const char alpha[] = "0123456789_ZRNvCsIEKSt3abcxyzB";
	char buf[512];
	char *big;

	if (env)
		seed = (unsigned)strtoul(env, NULL, 10);
	cr_log_info("seed %u (PRS_SEED=%u to replay)", seed, seed);
	srand(seed);
	for (int it = 0; it < 20000; it++) {
		size_t len = 2 + (size_t)rand() % (sizeof(buf) - 3);

		buf[0] = '_';
		buf[1] = (rand() & 1) ? 'Z' : 'R';
		for (size_t i = 2; i < len; i++)
			buf[i] = alpha[(size_t)rand() % (sizeof(alpha) - 1)];
		buf[len] = '\0';
		free(prs_demangle(buf, NULL));
	}
	/* deep nesting: 40000 nested template arguments, and a name over the 64 KiB limit */
	big = malloc(200001);
	cr_assert(big);
	memcpy(big, "_Z1f", 4);
	for (size_t i = 4; i < 200000; i++)
		big[i] = (i % 2) ? 'I' : 'S';
	big[200000] = '\0';
	cr_expect_null(prs_demangle(big, NULL));
	big[60000] = '\0';
	free(prs_demangle(big, NULL));
	free(big);
}
