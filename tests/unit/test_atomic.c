/* SPDX-License-Identifier: MIT */
/*
 * prs_atomic_open / prs_atomic_close (src/util/atomic.c): a file appears whole or not at all.
 * The truth is the file system: until the close the final name holds what it held before (or is
 * absent) and the data is in a temporary file beside it; a good close puts it there with the mode
 * creat() gives; a failed write (the file size limit, as a full disk) or an abandoned one leaves
 * the old file and no temporary file.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pyrsprof/util.h"

#include "unit_tmpdir.h"

#include "util/banned.h"

static int entries(void)
{
	DIR *d = opendir(unit_tmpdir);
	struct dirent *e;
	int n = 0;

	cr_assert_not_null(d);
	while ((e = readdir(d)))
		n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	closedir(d);
	return n;
}

static void put(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	cr_assert_not_null(f);
	fputs(text, f);
	fclose(f);
}

static void assert_content(const char *path, const char *want)
{
	char buf[256] = "";
	FILE *f = fopen(path, "r");
	size_t n;

	cr_assert_not_null(f, "%s", path);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	cr_assert_str_eq(buf, want);
}

TestSuite(atomic, .init = unit_tmpdir_make, .fini = unit_tmpdir_remove);

Test(atomic, appears_at_close)
{
	char path[128];
	struct prs_atomic a;
	struct prs_err err;
	struct stat st;
	mode_t mask = umask(022);
	FILE *f;

	snprintf(path, sizeof(path), "%s/out.svg", unit_tmpdir);
	put(path, "old");
	f = prs_atomic_open(&a, path, &err);
	cr_assert_not_null(f, "%s", err.msg);
	cr_assert_eq(fputs("new", f) >= 0, 1);
	fflush(f);
	assert_content(path, "old");
	assert_content(a.tmp, "new");
	cr_assert(strncmp(a.tmp, unit_tmpdir, strlen(unit_tmpdir)) == 0 && strstr(a.tmp, "/.out.svg."), "%s", a.tmp);
	cr_assert_eq(prs_atomic_close(&a, true, &err), 0, "%s", err.msg);
	assert_content(path, "new");
	cr_assert_eq(stat(path, &st), 0);
	cr_assert_eq(st.st_mode & 0777, 0644);
	cr_assert_eq(entries(), 1);
	umask(mask);
}

Test(atomic, abandoned_write_leaves_the_old_file)
{
	char path[128];
	struct prs_atomic a;
	struct prs_err err;

	snprintf(path, sizeof(path), "%s/out.json", unit_tmpdir);
	put(path, "old");
	cr_assert_not_null(prs_atomic_open(&a, path, &err));
	fputs("half", a.f);
	cr_assert_eq(prs_atomic_close(&a, false, &err), 0);
	assert_content(path, "old");
	cr_assert_eq(entries(), 1);
	/* and a new name stays absent */
	snprintf(path, sizeof(path), "%s/new.json", unit_tmpdir);
	cr_assert_not_null(prs_atomic_open(&a, path, &err));
	fputs("half", a.f);
	prs_atomic_close(&a, false, &err);
	cr_assert_eq(access(path, F_OK), -1);
	cr_assert_eq(entries(), 1);
}

Test(atomic, failed_write_leaves_the_old_file)
{
	struct rlimit lim = { 4096, 4096 };
	char path[128], block[1024];
	struct prs_atomic a;
	struct prs_err err;

	snprintf(path, sizeof(path), "%s/out.folded", unit_tmpdir);
	put(path, "old");
	/* this test's own process (Criterion forks one per test): writes past 4 KiB fail with EFBIG */
	signal(SIGXFSZ, SIG_IGN);
	cr_assert_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
	cr_assert_not_null(prs_atomic_open(&a, path, &err));
	memset(block, 'x', sizeof(block));
	for (int i = 0; i < 64; i++)
		fwrite(block, 1, sizeof(block), a.f);
	cr_assert_eq(prs_atomic_close(&a, true, &err), -EFBIG);
	cr_assert(strstr(err.msg, path) && strstr(err.msg, "too large"), "%s", err.msg);
	assert_content(path, "old");
	cr_assert_eq(entries(), 1);
}

Test(atomic, folder_refused_device_in_place)
{
	struct prs_atomic a;
	struct prs_err err;

	cr_assert_null(prs_atomic_open(&a, unit_tmpdir, &err));
	cr_assert_eq(err.code, -EISDIR);
	cr_assert(strstr(err.msg, "it is a folder"), "%s", err.msg);
	cr_assert_not_null(prs_atomic_open(&a, "/dev/null", &err), "%s", err.msg);
	cr_assert(a.in_place);
	fputs("x", a.f);
	cr_assert_eq(prs_atomic_close(&a, true, &err), 0, "%s", err.msg);
	cr_assert_null(prs_atomic_open(&a, "/nonexistent-unit_tmpdir/x.svg", &err));
	cr_assert_eq(err.code, -ENOENT);
}
