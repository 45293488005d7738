/* SPDX-License-Identifier: MIT */
/* pyrsprof: the command line. Dispatches to one file per subcommand. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "util/banned.h"

#define PRS_VERSION "0.1.0"

static const char usage[] =
	"usage: pyrsprof <command> [options]\n"
	"\n"
	"  run [-r HZ] [-d SEC] [-o DIR] -- CMD ARGS...   launch CMD and profile it until it exits\n"
	"  attach PID [-r HZ] [-d SEC] [-o DIR]           profile a live process (Ctrl-C stops)\n"
	"  top PID | top -- CMD ARGS...                   live view: the functions running now, each second\n"
	"  dump PID                                       print every thread's stack now\n"
	"  report FILE|DIR [-o DIR]                       re-render the graphs and the phase reports\n"
	"  flamegraph IN -o OUT.svg [options]             flame graph of a .pyrs profile or folded stacks\n"
	"  export FILE --format folded|speedscope|pprof [-o OUT]   convert a profile\n"
	"  diff BEFORE AFTER [-o DIR]                     the re-measure: speedup, what moved, next spot\n"
	"  sweep --dim N=V1,V2,... -- CMD ... {N} ...     how time grows along N: a run per value, fitted\n"
	"  calibrate [--show]                             measure this machine's peak memory bandwidth\n"
	"\n"
	"Run `pyrsprof <command> --help` for the options of a command.\n";

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		int (*fn)(int, char **);
	} cmds[] = {
		{ "run", cmd_run },         { "attach", cmd_attach },
		{ "dump", cmd_dump },       { "report", cmd_report },
		{ "flamegraph", cmd_flamegraph }, { "export", cmd_export },
		{ "diff", cmd_diff },       { "sweep", cmd_sweep },
		{ "calibrate", cmd_calibrate }, { "top", cmd_top },
	};

	if (argc < 2) {
		fputs(usage, stderr);
		return EXIT_USAGE;
	}
	if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "help") == 0) {
		fputs(usage, stdout);
		return EXIT_OK;
	}
	if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "version") == 0) {
		printf("pyrsprof %s\n", PRS_VERSION);
		return EXIT_OK;
	}
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (strcmp(argv[1], cmds[i].name) == 0)
			return cmds[i].fn(argc - 1, argv + 1);
	cli_msg("unknown command '%s' (commands: run, attach, dump, report, flamegraph, export, diff, "
		"sweep, calibrate, top)", argv[1]);
	return EXIT_USAGE;
}
