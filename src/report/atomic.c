/* SPDX-License-Identifier: MIT */
/* Report files written whole or not at all: a temporary file in the same folder, renamed. */
#include "pyrsprof/report.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/banned.h"

int prs_write_atomic(const char *dir, const char *name, int (*fn)(FILE *f, void *arg), void *arg,
		     struct prs_err *err)
{
	char tmp[4096], path[4096];
	FILE *f;
	int fd, rc, e;

	if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, name) >= sizeof(path) ||
	    (size_t)snprintf(tmp, sizeof(tmp), "%s/.%s.XXXXXX", dir, name) >= sizeof(tmp))
		return prs_err_set(err, -ENAMETOOLONG, "%s: path too long", dir);
	fd = mkstemp(tmp);
	if (fd < 0) {
		e = errno;
		return prs_err_set(err, -e, "%s: %s", path, strerror(e));
	}
	fchmod(fd, 0644);
	f = fdopen(fd, "w");
	if (!f) {
		e = errno;
		close(fd);
		unlink(tmp);
		return prs_err_set(err, -e, "%s: %s", path, strerror(e));
	}
	rc = fn(f, arg);
	if (fflush(f) != 0 || ferror(f))
		rc = rc ? rc : -(errno ? errno : EIO);
	if (fclose(f) != 0 && !rc)
		rc = -(errno ? errno : EIO);
	if (rc) {
		unlink(tmp);
		return prs_err_set(err, rc, "%s: %s", path, rc == -ENOMEM ? "out of memory" : strerror(-rc));
	}
	if (rename(tmp, path) != 0) {
		e = errno;
		unlink(tmp);
		return prs_err_set(err, -e, "%s: %s", path, strerror(e));
	}
	return 0;
}
