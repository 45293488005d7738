/* SPDX-License-Identifier: MIT */
/*
 * Shared pieces of the subcommands: messages to the user, option value parsing, output folders.
 * src/cli is the only place that prints to the user and chooses exit codes.
 */
#ifndef PYRSPROF_CLI_H
#define PYRSPROF_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "pyrsprof/err.h"
#include "pyrsprof/python.h"
#include "pyrsprof/sampler.h"
#include "pyrsprof/util.h"

/* Exit codes of pyrsprof itself (a launched program's own code passes through instead). */
enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2, EXIT_NOCMD = 127 };

#define PRS_MAX_RATE_HZ 10000.0
#define PRS_MAX_DURATION_S (7 * 24 * 3600.0)

/* Prints "pyrsprof: <message>\n" to stderr (one line: newlines in the message become spaces). */
void cli_msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* cli_msg("%s", line): the emit callback of the reports' terminal summaries (arg unused). */
void cli_emit(void *arg, const char *line);
/* s made one safe terminal line in place (line ends as ' ', other controls as '?'). */
void cli_text_clean(char *s);
/* The bytes of the control character at s (C0 but NUL, DEL: 1; C1 in UTF-8: 2), 0 if none. */
size_t cli_control_len(const char *s);

/* Prints err's message as one line, or "what: strerror(-code)" when it has none. */
void cli_err(const struct prs_err *err, const char *what);

struct option;
/*
 * getopt_long for every subcommand, with exact option names: glibc takes any unique prefix of a
 * long option ("--native" for "--native-all"); this refuses it and names the options it could
 * mean. Unknown options, missing values and prefixes are reported here, as one line naming cmd
 * ("CMD: unknown option '--x' (see pyrsprof CMD --help)"); the caller returns EXIT_USAGE on '?'.
 * optstring as for getopt_long (a leading '+' stops at the first non-option); call with optind
 * reset to 1 before the first call.
 */
int cli_getopt(int argc, char **argv, const char *optstring, const struct option *longopts,
	       const char *cmd);

/* Prints why writing the output path (or "-": standard output) failed: "cannot write 'PATH': why". */
void cli_output_err(const struct prs_err *err, const char *path);

/* Parses a sampling rate in Hz (0 < r <= PRS_MAX_RATE_HZ). Prints the problem and returns false. */
bool cli_parse_rate(const char *s, double *out);
/* Parses a duration in seconds (0 < d <= PRS_MAX_DURATION_S; "10", "2.5", "30s", "5m"). */
bool cli_parse_duration(const char *s, double *out);
/* The same for option opt ("-d" above), named in the messages. */
bool cli_parse_duration_opt(const char *opt, const char *s, double *out);
/* Parses --mode: auto, ptrace, preload or vm (launch: for a program pyrsprof starts; else auto
 * is ptrace and preload is refused). Prints the problem and returns false. */
bool cli_parse_mode(const char *s, bool launch, enum prs_source *out);
/* Parses a PID (a positive integer). */
bool cli_parse_pid(const char *s, pid_t *out);
/* Parses the PID of a live process, for attach, dump and top: EXIT_OK, or the exit code after
 * a one-line message (EXIT_USAGE: not a PID; EXIT_FAIL: no such process). */
int cli_live_pid(const char *s, pid_t *out);
/* Parses a positive number with an upper bound, for widths and the like. */
bool cli_parse_number(const char *opt, const char *s, double min, double max, double *out);

/* False (with a message) when the -o of a command that writes a folder is "-" (standard output). */
bool cli_folder_ok(const char *dir, const char *cmd);

/*
 * Makes sure dir exists and is writable (creating it and its parents). Returns 0 or -errno with a
 * message printed. *created tells whether it made the last component (to remove it on failure).
 */
int cli_make_dir(const char *dir, bool *created);

/*
 * Writes path whole or not at all (prs_atomic_open: a temporary file in the same folder, renamed
 * into place at the end), every output file of every command goes through here. "-" is standard
 * output. Returns a FILE* for writing, or NULL with a message printed.
 */
struct cli_atomic {
	struct prs_atomic file;
	bool to_stdout;
};
void *cli_atomic_open(struct cli_atomic *a, const char *path);
/* Closes and renames (ok) or removes the temporary file (!ok). Returns 0 or -errno (message
 * printed), -ECANCELED for !ok. */
int cli_atomic_close(struct cli_atomic *a, bool ok);

/* The CPython reader's options from the PYRSPROF_PY_* environment variables (pyenv.c; all off when
 * none is set). Also linked into tools/pystacks. */
void cli_py_opts_from_env(struct prs_py_opts *o);
/* PYRSPROF_AGENT and PYRSPROF_AGENT_CLOCK into so's agent settings (src/cli/pyenv.c). */
void cli_agent_opts_from_env(struct prs_sampler_opts *so);
/*
 * Where `calibrate` caches the machine's figures: $PYRSPROF_CACHE_DIR/machine.json, else
 * $XDG_CACHE_HOME/pyrsprof/machine.json, else $HOME/.cache/pyrsprof/machine.json.
 * Returns 0, -ENOENT (no HOME) or -ENAMETOOLONG.
 */
int cli_machine_cache_path(char *buf, size_t size);

/* Subcommands. Each returns the process exit code. */
int cmd_run(int argc, char **argv);
int cmd_attach(int argc, char **argv);
int cmd_dump(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_flamegraph(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_diff(int argc, char **argv);
int cmd_sweep(int argc, char **argv);
int cmd_calibrate(int argc, char **argv);
int cmd_top(int argc, char **argv);

#endif
