/* SPDX-License-Identifier: MIT */
/*
 * Files that appear whole or not at all: written under a temporary name in the same folder, then
 * flushed to disk and renamed over the final name (rename is atomic within a file system), so a
 * reader, a crash of pyrsprof or a full disk never leaves a half-written file under the final
 * name. See prs_atomic_open in pyrsprof/util.h.
 */
#include "pyrsprof/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/banned.h"

FILE *prs_atomic_open(struct prs_atomic *a, const char *path, struct prs_err *err)
{
	const char *base = strrchr(path, '/');
	struct stat st;
	mode_t mask;
	int fd, e;

	memset(a, 0, sizeof(*a));
	if ((size_t)snprintf(a->path, sizeof(a->path), "%s", path) >= sizeof(a->path)) {
		prs_err_set(err, -ENAMETOOLONG, "cannot write '%s': path too long", path);
		return NULL;
	}
	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
		prs_err_set(err, -EISDIR, "cannot write '%s': it is a folder", path);
		return NULL;
	}
	if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
		/* a device, a FIFO, /dev/stdout: written in place (renaming over it would replace it) */
		a->in_place = true;
		a->f = fopen(path, "we");
		if (!a->f) {
			e = errno;
			prs_err_set(err, -e, "cannot write '%s': %s", path, strerror(e));
		}
		return a->f;
	}
	base = base ? base + 1 : path;
	if ((size_t)snprintf(a->tmp, sizeof(a->tmp), "%.*s.%s.XXXXXX", (int)(base - path), path, base) >=
	    sizeof(a->tmp)) {
		prs_err_set(err, -ENAMETOOLONG, "cannot write '%s': path too long", path);
		return NULL;
	}
	fd = mkostemp(a->tmp, O_CLOEXEC);
	if (fd < 0) {
		e = errno;
		prs_err_set(err, -e, "cannot write '%s': %s", path, strerror(e));
		return NULL;
	}
	/* the mode a plain creat() would give (mkstemp makes 0600) */
	mask = umask(0);
	umask(mask);
	fchmod(fd, 0666 & ~mask);
	a->f = fdopen(fd, "w");
	if (!a->f) {
		e = errno;
		close(fd);
		unlink(a->tmp);
		prs_err_set(err, -e, "cannot write '%s': %s", path, strerror(e));
	}
	return a->f;
}

int prs_atomic_close(struct prs_atomic *a, bool ok, struct prs_err *err)
{
	int e = 0;

	if (!a->f)
		return ok ? prs_err_set(err, -EBADF, "%s: not open", a->path) : 0;
	if (fflush(a->f) != 0 || ferror(a->f))
		e = errno ? errno : EIO;
	/* on disk before the name points at it: a crash of the machine cannot show an empty file */
	if (!e && ok && !a->in_place && fsync(fileno(a->f)) != 0)
		e = errno;
	if (fclose(a->f) != 0 && !e)
		e = errno ? errno : EIO;
	a->f = NULL;
	if (ok && !e && !a->in_place && rename(a->tmp, a->path) != 0)
		e = errno;
	if ((!ok || e) && !a->in_place)
		unlink(a->tmp);
	if (ok && e)
		return prs_err_set(err, -e, "cannot write '%s': %s", a->path, strerror(e));
	return 0;
}
