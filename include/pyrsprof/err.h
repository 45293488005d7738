/* SPDX-License-Identifier: MIT */
/*
 * Error reporting for library code: functions return 0 or a negative errno, and put the detail in a
 * caller-supplied struct prs_err. Only src/cli prints errors and chooses exit codes.
 */
#ifndef PYRSPROF_ERR_H
#define PYRSPROF_ERR_H

struct prs_err {
	int code;      /* negative errno, 0 when no error was set */
	char msg[256]; /* one lower-case line naming the object, e.g. "attach pid 12: operation not permitted" */
};

/*
 * Fills err (which may be NULL) with code and a formatted message and returns code, so that
 * `return prs_err_set(err, -EPERM, "attach %d: %s", tid, strerror(EPERM));` is one statement.
 * A message that does not fit is truncated. Thread-safe; not async-signal-safe.
 */
int prs_err_set(struct prs_err *err, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Resets err to "no error". err may be NULL. */
void prs_err_clear(struct prs_err *err);

#endif
