// SPDX-License-Identifier: MIT
/*
 * exitwith: ends with a chosen exit status or signal, after a little work.
 *
 * Usage: exitwith CODE [SECONDS]    spin SECONDS (default 0.3), then exit(CODE)
 *        exitwith SIGNAME [SECONDS] spin, then kill itself with SIGNAME (TERM, KILL, SEGV, INT,
 *                                   ...; "SIG" prefix optional) with its default action restored
 * It prints "exitwith: CODE" or "exitwith: signal N" on stdout before ending.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const struct {
	const char *name;
	int sig;
} signals[] = {
	{ "HUP", SIGHUP }, { "INT", SIGINT }, { "QUIT", SIGQUIT }, { "ABRT", SIGABRT },
	{ "KILL", SIGKILL }, { "SEGV", SIGSEGV }, { "PIPE", SIGPIPE }, { "ALRM", SIGALRM },
	{ "TERM", SIGTERM }, { "USR1", SIGUSR1 }, { "USR2", SIGUSR2 },
};

static double mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	const char *what = argc > 1 ? argv[1] : "0";
	double end = mono_s() + (argc > 2 ? atof(argv[2]) : 0.3);
	volatile unsigned long x = 1;
	int sig = 0;

	if (strncmp(what, "SIG", 3) == 0)
		what += 3;
	for (size_t i = 0; i < sizeof(signals) / sizeof(signals[0]); i++)
		if (strcmp(what, signals[i].name) == 0)
			sig = signals[i].sig;
	while (mono_s() < end)
		x = x * 3 + 1;
	if (sig) {
		printf("exitwith: signal %d\n", sig);
		fflush(stdout);
		signal(sig, SIG_DFL);
		kill(getpid(), sig);
		pause();
		return 99; /* not reached */
	}
	printf("exitwith: %d\n", atoi(what));
	return atoi(what);
}
