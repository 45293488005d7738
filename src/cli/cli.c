/* SPDX-License-Identifier: MIT */
/* Shared pieces of the subcommands: messages, option values, output folders, atomic writes. */
#include "cli/cli.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/banned.h"

void cli_msg(const char *fmt, ...)
{
	char buf[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	for (char *p = buf; *p; p++)
		if (*p == '\n' || *p == '\r')
			*p = ' ';
	fprintf(stderr, "pyrsprof: %s\n", buf);
}

void cli_err(const struct prs_err *err, const char *what)
{
	if (err && err->msg[0])
		cli_msg("%s", err->msg);
	else if (err && err->code)
		cli_msg("%s: %s", what, strerror(-err->code));
	else
		cli_msg("%s failed", what);
}

bool cli_parse_number(const char *opt, const char *s, double min, double max, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = s ? strtod(s, &end) : 0;
	if (!s || end == s || *end != '\0' || errno != 0 || !isfinite(v)) {
		cli_msg("%s: '%s' is not a number", opt, s ? s : "");
		return false;
	}
	if (v < min || v > max) {
		cli_msg("%s: %g is out of range (%g to %g)", opt, v, min, max);
		return false;
	}
	*out = v;
	return true;
}

bool cli_parse_rate(const char *s, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (end == s || *end != '\0' || errno != 0 || !isfinite(v)) {
		cli_msg("-r: '%s' is not a rate in Hz (try -r 100)", s);
		return false;
	}
	if (v <= 0) {
		cli_msg("-r: the rate must be more than 0 Hz (try -r 100)");
		return false;
	}
	if (v > PRS_MAX_RATE_HZ) {
		cli_msg("-r: %g Hz is too high: at most %.0f Hz (ptrace sampling costs about 30 us "
			"per thread-sample)", v, PRS_MAX_RATE_HZ);
		return false;
	}
	*out = v;
	return true;
}

bool cli_parse_duration(const char *s, double *out)
{
	char *end;
	double v, mult = 1;

	errno = 0;
	v = strtod(s, &end);
	if (end != s && errno == 0 && isfinite(v)) {
		if (strcmp(end, "s") == 0)
			end++;
		else if (strcmp(end, "m") == 0)
			mult = 60, end++;
		else if (strcmp(end, "h") == 0)
			mult = 3600, end++;
	}
	if (end == s || *end != '\0' || errno != 0 || !isfinite(v)) {
		cli_msg("-d: '%s' is not a duration in seconds (try -d 10)", s);
		return false;
	}
	v *= mult;
	if (v <= 0) {
		cli_msg("-d: the duration must be more than 0 seconds");
		return false;
	}
	if (v > PRS_MAX_DURATION_S) {
		cli_msg("-d: %g s is too long: at most %.0f s (7 days)", v, PRS_MAX_DURATION_S);
		return false;
	}
	*out = v;
	return true;
}

bool cli_parse_pid(const char *s, pid_t *out)
{
	char *end;
	long v;

	errno = 0;
	v = s ? strtol(s, &end, 10) : 0;
	if (!s || end == s || *end != '\0' || errno != 0 || v <= 0 || v > 4194304) {
		cli_msg("'%s' is not a process id", s ? s : "");
		return false;
	}
	*out = (pid_t)v;
	return true;
}

int cli_make_dir(const char *dir, bool *created)
{
	char path[4096];
	struct stat st;
	size_t len = strlen(dir);

	*created = false;
	if (len == 0 || len >= sizeof(path)) {
		cli_msg("output folder '%s': bad path", dir);
		return -EINVAL;
	}
	memcpy(path, dir, len + 1);
	for (char *p = path + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(path, 0777) != 0 && errno != EEXIST) {
			int e = errno;

			cli_msg("cannot create output folder '%s': %s", path, strerror(e));
			return -e;
		}
		*p = '/';
	}
	if (mkdir(path, 0777) == 0) {
		*created = true;
	} else if (errno != EEXIST) {
		int e = errno;

		cli_msg("cannot create output folder '%s': %s", dir, strerror(e));
		return -e;
	}
	if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) {
		cli_msg("output folder '%s' is not a folder", dir);
		return -ENOTDIR;
	}
	if (access(path, W_OK | X_OK) != 0) {
		int e = errno;

		cli_msg("cannot write to output folder '%s': %s", dir, strerror(e));
		return -e;
	}
	return 0;
}

void *cli_atomic_open(struct cli_atomic *a, const char *path)
{
	struct stat st;
	FILE *f;

	snprintf(a->path, sizeof(a->path), "%s", path);
	a->tmp[0] = '\0';
	if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
		/* A device, FIFO or /dev/stdout: write in place; renaming over it would replace it. */
		if (S_ISDIR(st.st_mode)) {
			cli_msg("cannot write '%s': it is a folder", path);
			a->f = NULL;
			return NULL;
		}
		f = fopen(path, "we");
	} else {
		snprintf(a->tmp, sizeof(a->tmp), "%s.tmp%d", path, (int)getpid());
		f = fopen(a->tmp, "we");
	}
	if (!f) {
		cli_msg("cannot write '%s': %s", path, strerror(errno));
		a->f = NULL;
		return NULL;
	}
	a->f = f;
	return f;
}

int cli_atomic_close(struct cli_atomic *a, bool ok)
{
	FILE *f = a->f;
	bool in_place = a->tmp[0] == '\0';
	int e = 0;

	if (!f)
		return -EINVAL;
	if (fflush(f) != 0 || ferror(f))
		e = errno ? errno : EIO;
	if (fclose(f) != 0 && !e)
		e = errno;
	a->f = NULL;
	if (ok && !e && !in_place && rename(a->tmp, a->path) != 0)
		e = errno;
	if (!ok || e) {
		if (!in_place)
			unlink(a->tmp);
		if (ok && e)
			cli_msg("cannot write '%s': %s", a->path, strerror(e));
		return ok && e ? -e : -ECANCELED;
	}
	return 0;
}
