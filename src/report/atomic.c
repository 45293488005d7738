/* SPDX-License-Identifier: MIT */
/* Report files written whole or not at all, through prs_atomic_open (src/util/atomic.c). */
#include "pyrsprof/report.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "pyrsprof/util.h"
#include "util/banned.h"

int prs_write_atomic(const char *dir, const char *name, int (*fn)(FILE *f, void *arg), void *arg,
		     struct prs_err *err)
{
	struct prs_atomic a;
	char path[4096];
	FILE *f;
	int rc;

	if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, name) >= sizeof(path))
		return prs_err_set(err, -ENAMETOOLONG, "%s: path too long", dir);
	f = prs_atomic_open(&a, path, err);
	if (!f)
		return err ? err->code : -EIO;
	rc = fn(f, arg);
	if (rc) {
		prs_atomic_close(&a, false, NULL);
		return prs_err_set(err, rc, "%s: %s", path, rc == -ENOMEM ? "out of memory" : strerror(-rc));
	}
	return prs_atomic_close(&a, true, err);
}
