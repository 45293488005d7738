/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the /proc/kallsyms reader (src/symbol/kallsyms.c): text symbols only, unsorted
 * input, module suffixes, lookups at and between symbols and past the end, hidden addresses
 * (kptr_restrict) refused with -EPERM, and malformed or overlong lines skipped.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pyrsprof/kallsyms.h"

#include "util/banned.h"

static char *write_tmp(const char *text)
{
	char *path = strdup("/tmp/prs-kallsyms-XXXXXX");
	int fd = mkstemp(path);

	cr_assert(fd >= 0);
	cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	return path;
}

static struct prs_kallsyms *load(const char *text, int want_rc)
{
	struct prs_kallsyms *k = NULL;
	struct prs_err err = { 0 };
	char *path = write_tmp(text);
	int rc = prs_kallsyms_load(path, &k, &err);

	unlink(path);
	free(path);
	cr_assert_eq(rc, want_rc, "rc %d (%s)", rc, err.msg);
	cr_assert(rc == 0 || err.msg[0]);
	return k;
}

Test(kallsyms, text_symbols_sorted_and_looked_up)
{
	struct prs_kallsyms *k = load("ffffffff82248ae0 T clear_page_erms\n"
				      "ffffffff81000000 T _stext\n"
				      "ffffffff82000000 D some_data\n"
				      "ffffffff82248a70 t clear_page_rep\n"
				      "ffffffffc0a01000 t nf_hook\t[nf_tables]\n"
				      "ffffffff82248a90 W clear_page_orig\n", 0);

	cr_assert_eq(prs_kallsyms_count(k), 5); /* the D symbol is not text */
	cr_assert_str_eq(prs_kallsyms_lookup(k, 0xffffffff82248ae0), "clear_page_erms");
	cr_assert_str_eq(prs_kallsyms_lookup(k, 0xffffffff82248aff), "clear_page_erms");
	cr_assert_str_eq(prs_kallsyms_lookup(k, 0xffffffff82248a8f), "clear_page_rep");
	cr_assert_str_eq(prs_kallsyms_lookup(k, 0xffffffff82248a90), "clear_page_orig");
	cr_assert_str_eq(prs_kallsyms_lookup(k, 0xffffffff81001234), "_stext");
	cr_assert_str_eq(prs_kallsyms_lookup(k, 0xffffffffc0a01010), "nf_hook");
	cr_assert_null(prs_kallsyms_lookup(k, 0xffffffff80000000)); /* before the first */
	cr_assert_null(prs_kallsyms_lookup(k, 0xffffffffc0a03000)); /* past the last, by a page */
	cr_assert_null(prs_kallsyms_lookup(k, 0x401000));
	prs_kallsyms_free(k);
}

Test(kallsyms, hidden_addresses_are_refused)
{
	load("0000000000000000 T _stext\n0000000000000000 T clear_page_erms\n", -EPERM);
	load("ffffffff82000000 D only_data\n", -ENOENT);
	load("", -ENOENT);
}

Test(kallsyms, malformed_and_overlong_lines_are_skipped)
{
	char *text = malloc(8192);
	size_t n = 0;
	struct prs_kallsyms *k;

	n += (size_t)snprintf(text + n, 8192 - n, "garbage\nffffffff81000000T glued\n"
			      "ffffffff81000100 T\nzzzz T bad_addr\nffffffff81000200 T ok_one\n"
			      "ffffffff81000300 T ");
	memset(text + n, 'x', 3000); /* a 3000-byte name: cut, and its line's rest skipped */
	n += 3000;
	n += (size_t)snprintf(text + n, 8192 - n, "\nffffffff81000400 t ok_two\n");
	k = load(text, 0);
	cr_assert_eq(prs_kallsyms_count(k), 3);
	cr_assert_str_eq(prs_kallsyms_lookup(k, 0xffffffff81000250), "ok_one");
	cr_assert_eq(strlen(prs_kallsyms_lookup(k, 0xffffffff81000300)), 255);
	cr_assert_str_eq(prs_kallsyms_lookup(k, 0xffffffff81000401), "ok_two");
	prs_kallsyms_free(k);
	prs_kallsyms_free(NULL);
	free(text);
}

Test(kallsyms, a_line_longer_than_the_read_buffer_is_skipped)
{
	size_t big = 600 * 1024, n = 0;
	char *text = malloc(big + 256);
	struct prs_kallsyms *k;

	n += (size_t)snprintf(text + n, 64, "ffffffff81000200 T ok_one\nffffffff81000300 T ");
	memset(text + n, 'y', big); /* longer than the reader's 256 KiB buffer, twice over */
	n += big;
	n += (size_t)snprintf(text + n, 64, "\nffffffff81000400 t ok_two"); /* no final newline */
	k = load(text, 0);
	cr_assert_eq(prs_kallsyms_count(k), 2);
	cr_assert_str_eq(prs_kallsyms_lookup(k, 0xffffffff81000350), "ok_one");
	cr_assert_str_eq(prs_kallsyms_lookup(k, 0xffffffff81000401), "ok_two");
	prs_kallsyms_free(k);
	free(text);
}

Test(kallsyms, a_read_until_a_symbol_ends_there)
{
	static const char text[] = "ffffffff81000000 T _stext\n"
				   "ffffffff81000d40 T asm_common_interrupt\n"
				   "ffffffff81001a87 T __entry_text_end\n"
				   "ffffffff82248ae0 T clear_page_erms\n";
	char *path = write_tmp(text);
	struct prs_kallsyms *k = NULL;
	struct prs_err err = { 0 };
	struct prs_krange r[1];

	cr_assert_eq(prs_kallsyms_load_until(path, "__entry_text_end", &k, &err), 0, "%s", err.msg);
	cr_assert_eq(prs_kallsyms_count(k), 3, "the read ends at the symbol named");
	cr_assert_eq(prs_kallsyms_ranges(k, "asm_common_interrupt", r, 1), 1);
	cr_assert_eq(r[0].end, 0xffffffff81001a87);
	prs_kallsyms_free(k);
	cr_assert_eq(prs_kallsyms_load_until(path, "not_there", &k, &err), 0, "%s", err.msg);
	cr_assert_eq(prs_kallsyms_count(k), 4, "no such symbol: the whole file");
	prs_kallsyms_free(k);
	unlink(path);
	free(path);
	path = write_tmp("0000000000000000 T _stext\n0000000000000000 T __entry_text_end\n"
			 "ffffffff82248ae0 T not_read\n");
	cr_assert_eq(prs_kallsyms_load_until(path, "__entry_text_end", &k, &err), -EPERM);
	unlink(path);
	free(path);
}

/* The live table is read once while the modules stay the same: the second load shares the
 * first's, which outlives its first holder. */
Test(kallsyms, the_live_table_is_read_once)
{
	struct prs_kallsyms *a = NULL, *b = NULL;
	struct prs_err err = { 0 };
	struct prs_krange r[1];

	if (prs_kallsyms_load(NULL, &a, &err) != 0)
		cr_skip_test("/proc/kallsyms not readable with addresses here: %s", err.msg);
	cr_assert_gt(prs_kallsyms_count(a), 1000);
	cr_assert_eq(prs_kallsyms_load(NULL, &b, &err), 0, "%s", err.msg);
	cr_assert_eq(a, b, "read again though /proc/modules did not change");
	prs_kallsyms_free(a);
	cr_assert_eq(prs_kallsyms_ranges(b, "asm_exc_page_fault", r, 1), 1);
	cr_assert_not_null(prs_kallsyms_lookup(b, r[0].start), "a holder's free left the table to the other");
	prs_kallsyms_free(b);
}

Test(kallsyms, ranges_of_a_prefix)
{
	struct prs_kallsyms *k = load("ffffffff82000100 T asm_sysvec_apic_timer_interrupt\n"
				      "ffffffff82000000 T asm_exc_page_fault\n"
				      "ffffffff82000140 T asm_sysvec_reschedule_ipi\n"
				      "ffffffff82000180 T entry_SYSCALL_64\n", 0);
	struct prs_krange r[4];

	cr_assert_eq(prs_kallsyms_ranges(k, "asm_sysvec_", r, 4), 2);
	cr_assert_eq(r[0].start, 0xffffffff82000100);
	cr_assert_eq(r[0].end, 0xffffffff82000140, "up to the next symbol");
	cr_assert_eq(r[1].start, 0xffffffff82000140);
	cr_assert_eq(r[1].end, 0xffffffff82000180);
	cr_assert_eq(prs_kallsyms_ranges(k, "asm_sysvec_", r, 1), 1, "at most max");
	cr_assert_eq(prs_kallsyms_ranges(k, "entry_", r, 4), 1);
	cr_assert_eq(r[0].start, 0xffffffff82000180);
	cr_assert_gt(r[0].end, r[0].start, "the last one ends past it");
	cr_assert_eq(prs_kallsyms_ranges(k, "nothing_", r, 4), 0);
	cr_assert_eq(prs_kallsyms_ranges(NULL, "asm_", r, 4), 0);
	prs_kallsyms_free(k);
}
