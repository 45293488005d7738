/* SPDX-License-Identifier: MIT */
/* Shared pieces of the subcommands: messages, option values, output folders, atomic writes. */
#include "cli/cli.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pyrsprof/export.h"
#include "pyrsprof/task.h"
#include "pyrsprof/util.h"
#include "util/banned.h"

void cli_msg(const char *fmt, ...)
{
	char buf[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	cli_text_clean(buf);
	fprintf(stderr, "pyrsprof: %s\n", buf);
}

/*
 * Makes a message one safe terminal line, in place: line ends and tabs become ' ', other control
 * characters '?' (C0, DEL, and C1 in UTF-8: U+009B is a CSI to some terminals). Messages carry
 * names from the target (a hot spot's function: a co_name set with code.replace() can hold
 * "\x1b[31m", which would recolor the user's terminal) and file names from the command line.
 */
void cli_text_clean(char *s)
{
	unsigned char *r = (unsigned char *)s, *w = r;
	size_t k;

	for (; *r; r += k ? k : 1) {
		k = cli_control_len((const char *)r);
		if (*r == '\n' || *r == '\r' || *r == '\t')
			*w++ = ' ';
		else
			*w++ = k ? '?' : *r;
	}
	*w = 0;
}

size_t cli_control_len(const char *s)
{
	return s[0] ? prs_utf8_control_len(s, s[1] ? 2 : 1) : 0;
}

void cli_emit(void *arg, const char *line)
{
	(void)arg;
	cli_msg("%s", line);
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

/* The options of longopts whose name starts with the len bytes at name, as "--a, --b". */
static void candidates(const struct option *longopts, const char *name, size_t len, char *buf, size_t size)
{
	size_t off = 0;

	buf[0] = '\0';
	for (const struct option *o = longopts; o->name && off < size; o++)
		if (strncmp(o->name, name, len) == 0) {
			int k = snprintf(buf + off, size - off, "%s--%s", off ? ", " : "", o->name);

			off = k < 0 ? size : off + (size_t)k;
		}
}

/* "CMD: unknown option '--x'", naming the options it is the start of (glibc took or refused it as
 * an abbreviation). */
static void unknown_long(const struct option *longopts, const char *arg, const char *cmd)
{
	size_t len = strncmp(arg, "--", 2) == 0 ? strcspn(arg + 2, "=") : 0;
	char alts[256];

	candidates(longopts, arg + 2, len, alts, sizeof(alts));
	if (len && alts[0])
		cli_msg("%s: unknown option '%.*s' (options are not abbreviated: did you mean %s?)", cmd,
			(int)len + 2, arg, alts);
	else
		cli_msg("%s: unknown option '%s' (see pyrsprof %s --help)", cmd, arg, cmd);
}

int cli_getopt(int argc, char **argv, const char *optstring, const struct option *longopts,
	       const char *cmd)
{
	char opts[64];
	int c, idx = -1;
	bool plus = optstring[0] == '+';

	/* ':' first (after a '+'): a missing value is told from an unknown option */
	snprintf(opts, sizeof(opts), "%s:%s", plus ? "+" : "", optstring + plus);
	opterr = 0;
	c = getopt_long(argc, argv, opts, longopts, &idx);
	if (c == -1)
		return c;
	if (c == '?' || c == ':') {
		const char *arg = argv[optind - 1];

		if (c == ':' && optopt && !(arg[0] == '-' && arg[1] == '-'))
			cli_msg("%s: option -%c needs a value", cmd, optopt);
		else if (c == ':')
			cli_msg("%s: option %s needs a value", cmd, arg);
		else if (optopt)
			cli_msg("%s: unknown option -%c (see pyrsprof %s --help)", cmd, optopt, cmd);
		else
			unknown_long(longopts, arg, cmd);
		return '?';
	}
	if (idx >= 0) {
		/* the element that named it: "--name=value", or "--name" (its value may follow) */
		const char *arg = longopts[idx].has_arg && optarg == argv[optind - 1] ? argv[optind - 2]
										       : argv[optind - 1];

		if (strncmp(arg, "--", 2) != 0 || strcspn(arg + 2, "=") != strlen(longopts[idx].name)) {
			unknown_long(longopts, arg, cmd);
			return '?';
		}
	}
	return c;
}

void cli_output_err(const struct prs_err *err, const char *path)
{
	const char *why = err && err->msg[0] ? err->msg : err && err->code ? strerror(-err->code) : "failed";

	if (strcmp(path, "-") == 0)
		cli_msg("cannot write to standard output: %s", why);
	else
		cli_msg("cannot write '%s': %s", path, why);
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

bool cli_parse_mode(const char *s, bool launch, enum prs_source *out)
{
	if (strcmp(s, "ptrace") == 0) {
		*out = PRS_SOURCE_PTRACE;
	} else if (strcmp(s, "vm") == 0) {
		*out = PRS_SOURCE_VM;
	} else if (strcmp(s, "auto") == 0) {
		*out = launch ? PRS_SOURCE_AUTO : PRS_SOURCE_PTRACE;
	} else if (strcmp(s, "preload") == 0 && launch) {
		*out = PRS_SOURCE_PRELOAD;
	} else if (strcmp(s, "preload") == 0) {
		cli_msg("--mode preload works only for a program pyrsprof starts (pyrsprof run, or top "
			"-- CMD); attach with --mode ptrace or vm");
		return false;
	} else {
		cli_msg("--mode: '%s' is not a mode (auto, ptrace: native + Python frames; preload: from "
			"inside, for a program pyrsprof starts; vm: Python frames only)", s);
		return false;
	}
	return true;
}

bool cli_parse_duration(const char *s, double *out)
{
	return cli_parse_duration_opt("-d", s, out);
}

bool cli_parse_duration_opt(const char *opt, const char *s, double *out)
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
		cli_msg("%s: '%s' is not a duration in seconds (try %s 10)", opt, s, opt);
		return false;
	}
	v *= mult;
	if (v <= 0) {
		cli_msg("%s: the duration must be more than 0 seconds", opt);
		return false;
	}
	if (v > PRS_MAX_DURATION_S) {
		cli_msg("%s: %g s is too long: at most %.0f s (7 days)", opt, v, PRS_MAX_DURATION_S);
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

int cli_live_pid(const char *s, pid_t *out)
{
	if (!cli_parse_pid(s, out))
		return EXIT_USAGE;
	if (!prs_proc_exists(*out)) {
		cli_msg("no process with pid %d", (int)*out);
		return EXIT_FAIL;
	}
	return EXIT_OK;
}

bool cli_folder_ok(const char *dir, const char *cmd)
{
	if (dir && strcmp(dir, "-") == 0) {
		cli_msg("%s: -o -: %s writes a folder of files, not one stream; give a folder name", cmd, cmd);
		return false;
	}
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
	struct prs_err err = { 0 };

	a->to_stdout = strcmp(path, "-") == 0;
	if (a->to_stdout) /* "-o -": standard output, where the command allows a stream */
		return stdout;
	if (!prs_atomic_open(&a->file, path, &err)) {
		cli_err(&err, path);
		return NULL;
	}
	return a->file.f;
}

int cli_atomic_close(struct cli_atomic *a, bool ok)
{
	struct prs_err err = { 0 };

	if (a->to_stdout) {
		if (fflush(stdout) != 0 || ferror(stdout)) {
			if (ok)
				cli_msg("cannot write to standard output: %s", strerror(errno ? errno : EIO));
			return ok ? -EIO : -ECANCELED;
		}
		return ok ? 0 : -ECANCELED;
	}
	if (prs_atomic_close(&a->file, ok, &err) != 0) {
		cli_err(&err, a->file.path);
		return err.code;
	}
	return ok ? 0 : -ECANCELED;
}
