/* SPDX-License-Identifier: MIT */
/*
 * Tests of the /proc/PID/maps parser and lookup: well-formed kernel lines, the special names and
 * "(deleted)" suffixes, hostile input (garbage, overlaps, unsorted lines, overlong lines, numbers
 * that overflow), and a live read of our own maps checked against addresses we know.
 */
#include "pyrsprof/maps.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/banned.h"

static void check_sane(const struct prs_maps *m)
{
	for (size_t i = 0; i < m->n; i++) {
		cr_assert_lt(m->v[i].start, m->v[i].end);
		cr_assert_not_null(m->v[i].path);
		if (i)
			cr_assert_geq(m->v[i].start, m->v[i - 1].end);
	}
}

Test(maps, kernel_lines)
{
	static const char text[] =
		"55d0c8a00000-55d0c8a21000 r--p 00000000 fe:01 1234567                    /usr/bin/py thon\n"
		"55d0c8a21000-55d0c8b00000 r-xp 00021000 fe:01 1234567                    /usr/bin/py thon\n"
		"55d0c9000000-55d0c9021000 rw-p 00000000 00:00 0                          [heap]\n"
		"7f0000000000-7f0000001000 rw-s 00000000 00:05 99                         /dev/zero (deleted)\n"
		"7f0000002000-7f0000003000 ---p 00000000 00:00 0 \n"
		"7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0                          [stack]\n"
		"7ffd000fe000-7ffd00100000 r-xp 00000000 00:00 0                          [vdso]\n"
		"ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]";
	struct prs_maps m = PRS_MAPS_INIT;
	struct prs_err err;

	cr_assert_eq(prs_maps_parse(text, strlen(text), &m, &err), 0);
	check_sane(&m);
	cr_assert_eq(m.n, 8);
	cr_assert_eq(m.skipped, 0);
	cr_assert_eq(m.v[1].start, 0x55d0c8a21000ull);
	cr_assert_eq(m.v[1].end, 0x55d0c8b00000ull);
	cr_assert_eq(m.v[1].offset, 0x21000);
	cr_assert_eq(m.v[1].perms, PRS_MAP_R | PRS_MAP_X | PRS_MAP_P);
	cr_assert_eq(m.v[1].dev_major, 0xfe);
	cr_assert_eq(m.v[1].dev_minor, 1);
	cr_assert_eq(m.v[1].inode, 1234567);
	cr_assert_str_eq(m.v[1].path, "/usr/bin/py thon"); /* spaces in a path are kept */
	cr_assert_str_eq(m.v[2].path, "[heap]");
	cr_assert_eq(m.v[3].perms, PRS_MAP_R | PRS_MAP_W);
	cr_assert(m.v[3].deleted);
	cr_assert_str_eq(m.v[3].path, "/dev/zero");
	cr_assert_str_eq(m.v[4].path, "");
	cr_assert_eq(m.v[4].perms, PRS_MAP_P);
	cr_assert_str_eq(m.v[6].path, "[vdso]");
	cr_assert_eq(m.v[7].start, 0xffffffffff600000ull);

	cr_assert_eq(prs_maps_find(&m, 0x55d0c8a21000ull), &m.v[1]);
	cr_assert_eq(prs_maps_find(&m, 0x55d0c8afffffull), &m.v[1]);
	cr_assert_eq(prs_maps_find(&m, 0x55d0c8a20fffull), &m.v[0]);
	cr_assert_null(prs_maps_find(&m, 0x55d0c8b00000ull)); /* gap */
	cr_assert_null(prs_maps_find(&m, 0));
	cr_assert_null(prs_maps_find(&m, UINT64_MAX));
	cr_assert_eq(prs_maps_find(&m, 0x7ffd000fffffull), &m.v[6]);
	prs_maps_release(&m);
	cr_assert_eq(m.n, 0);
	prs_maps_release(&m); /* twice is fine */
}

Test(maps, hostile_lines)
{
	static const char text[] =
		"garbage\n"
		"\n"
		"1000-2000 r-xp 00000000 08:01 5 /a\n"
		"3000-2000 r-xp 00000000 08:01 5 /start-after-end\n"
		"4000-4000 r-xp 00000000 08:01 5 /empty\n"
		"5000-6000 rwzp 00000000 08:01 5 /bad-perms\n"
		"10000000000000000-10000000000000001 r-xp 0 08:01 5 /65-bit\n"
		"7000-8000 r-xp 00000000 08:01 99999999999999999999999 /inode-overflow\n"
		"9000-a000 r-xp 00000000 0801 5 /no-colon\n"
		"1800-2800 r-xp 00000000 08:01 5 /overlaps-a\n"
		"b000-c000 r-xp 00000000 08:01 5x /junk-after-inode\n"
		"c000-d000 r--p 00000000 08:01 5\n" /* no path */
		"0500-0600 r--p 00000000 08:01 5 /unsorted\n"
		"e000-f000 r--p 0 8:1 5 /x\0y\n"; /* NUL inside a line */
	struct prs_maps m = PRS_MAPS_INIT;

	cr_assert_eq(prs_maps_parse(text, sizeof(text) - 1, &m, NULL), 0);
	check_sane(&m);
	cr_assert_eq(m.n, 3);
	cr_assert_eq(m.skipped, 10); /* all but /a, /unsorted and the pathless line */
	cr_assert_str_eq(m.v[0].path, "/unsorted");
	cr_assert_str_eq(m.v[1].path, "/a");
	cr_assert_str_eq(m.v[2].path, "");
	cr_assert_null(prs_maps_find(&m, 0x2800));
	prs_maps_release(&m);
}

Test(maps, long_lines_and_empty)
{
	size_t plen = PRS_MAPS_MAX_LINE + 100, len = 0;
	char *text = malloc(plen + 256);
	struct prs_maps m = PRS_MAPS_INIT;

	cr_assert_not_null(text);
	len += (size_t)snprintf(text, 256, "1000-2000 r-xp 00000000 08:01 5 /");
	memset(text + len, 'a', plen);
	len += plen;
	len += (size_t)snprintf(text + len, 100, "\n3000-4000 r-xp 0 8:1 6 /ok\n");
	cr_assert_eq(prs_maps_parse(text, len, &m, NULL), 0);
	cr_assert_eq(m.n, 1);
	cr_assert_eq(m.skipped, 1);
	cr_assert_str_eq(m.v[0].path, "/ok");
	cr_assert_eq(prs_maps_parse("", 0, &m, NULL), 0); /* releases the previous contents */
	cr_assert_eq(m.n, 0);
	cr_assert_null(prs_maps_find(&m, 0x3000));
	free(text);
	prs_maps_release(&m);
}

static int a_function(void)
{
	return 42;
}

Test(maps, read_self)
{
	struct prs_maps m = PRS_MAPS_INIT;
	struct prs_err err;
	int local = 0;
	const struct prs_map *e;

	cr_assert_eq(prs_maps_read(getpid(), &m, &err), 0, "%s", err.msg);
	check_sane(&m);
	cr_assert_gt(m.n, 5);
	cr_assert_eq(m.skipped, 0);
	e = prs_maps_find(&m, (uint64_t)(uintptr_t)&a_function);
	cr_assert_not_null(e);
	cr_assert(e->perms & PRS_MAP_X);
	cr_assert_neq(e->inode, 0);
	cr_assert_neq(strstr(e->path, "unit-tests"), NULL, "%s", e->path);
	e = prs_maps_find(&m, (uint64_t)(uintptr_t)&local);
	cr_assert_not_null(e);
	cr_assert(e->perms & PRS_MAP_W);
	e = prs_maps_find(&m, (uint64_t)(uintptr_t)&getpid); /* (not intercepted by ASan) */
	cr_assert_not_null(e);
	cr_assert_neq(strstr(e->path, "libc"), NULL, "%s", e->path);
	cr_assert_eq(a_function(), 42);
	prs_maps_release(&m);
}

Test(maps, read_missing_pid)
{
	struct prs_maps m = PRS_MAPS_INIT;
	struct prs_err err;

	cr_assert_eq(prs_maps_read(0x3fffffff, &m, &err), -ENOENT);
	cr_assert_neq(strstr(err.msg, "/proc/1073741823/maps"), NULL, "%s", err.msg);
	cr_assert_eq(m.n, 0);
}
