/* SPDX-License-Identifier: MIT */
/* The re-runs of `run --scaling` (scaling.h). */
#include "cli/scaling.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "util/banned.h"

static bool env_name(const char *s, size_t len)
{
	if (!len || isdigit((unsigned char)s[0]))
		return false;
	for (size_t i = 0; i < len; i++)
		if (!isalnum((unsigned char)s[i]) && s[i] != '_')
			return false;
	return true;
}

bool cli_scaling_parse(const char *arg, struct cli_scaling *sc)
{
	const char *eq = strchr(arg, '='), *v;
	size_t len;

	memset(sc, 0, sizeof(*sc));
	if (!eq || !env_name(arg, (size_t)(eq - arg)) || (size_t)(eq - arg) >= sizeof(sc->var)) {
		cli_msg("--scaling '%s': give VAR=V1,V2 with VAR an environment variable name, e.g. "
			"OMP_NUM_THREADS=1,2", arg);
		return false;
	}
	memcpy(sc->var, arg, (size_t)(eq - arg));
	for (v = eq + 1;; v += len + 1) {
		len = strcspn(v, ",");
		if (!len || len >= sizeof(sc->values[0]) || sc->n == CLI_SCALING_MAX) {
			cli_msg("--scaling '%s': 2 to %d non-empty values of at most %zu characters, "
				"separated by commas", arg, CLI_SCALING_MAX, sizeof(sc->values[0]) - 1);
			return false;
		}
		memcpy(sc->values[sc->n++], v, len);
		if (!v[len])
			break;
	}
	if (sc->n < 2) {
		cli_msg("--scaling '%s': at least two values to compare", arg);
		return false;
	}
	return true;
}

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* The child: VAR=value, no output, the signals the user's command expects. Does not return. */
static void child(const char *var, const char *value, char *const cmd[], const sigset_t *old)
{
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);

	sigprocmask(SIG_SETMASK, old, NULL);
	if (null >= 0) {
		dup2(null, STDIN_FILENO);
		dup2(null, STDOUT_FILENO);
		dup2(null, STDERR_FILENO);
	}
	setenv(var, value, 1);
	execvp(cmd[0], cmd);
	_exit(127);
}

void cli_scaling_run(const struct cli_scaling *sc, char *const cmd[], const sigset_t *old,
		     struct prs_profile *p)
{
	for (int i = 0; i < sc->n; i++) {
		struct rusage ru;
		char entry[256];
		double t0 = now_s(), wall, cpu;
		int status = 0, rc;
		pid_t pid;

		cli_msg("--scaling: %s=%s (%d of %d)", sc->var, sc->values[i], i + 1, sc->n);
		pid = fork();
		if (pid < 0) {
			cli_msg("--scaling: fork: %s", strerror(errno));
			return;
		}
		if (pid == 0)
			child(sc->var, sc->values[i], cmd, old);
		while (wait4(pid, &status, 0, &ru) < 0 && errno == EINTR)
			;
		wall = now_s() - t0;
		cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
		      (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
		rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
		snprintf(entry, sizeof(entry), "%s=%s wall_s=%.6f cpu_s=%.6f rc=%d", sc->var,
			 sc->values[i], wall, cpu, rc);
		prs_profile_meta(p, "scaling", entry);
		if (rc != 0) {
			cli_msg("--scaling: %s=%s exited with %d: the runs stop here", sc->var,
				sc->values[i], rc);
			return;
		}
	}
}
