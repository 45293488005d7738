/* SPDX-License-Identifier: MIT */
/* prs_err: the error detail that library calls hand back to src/cli. */
#include "pyrsprof/err.h"

#include <stdarg.h>
#include <stdio.h>

int prs_err_set(struct prs_err *err, int code, const char *fmt, ...)
{
	if (err) {
		va_list ap;

		va_start(ap, fmt);
		vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
		va_end(ap);
		err->code = code;
	}
	return code;
}

void prs_err_clear(struct prs_err *err)
{
	if (err) {
		err->code = 0;
		err->msg[0] = '\0';
	}
}
