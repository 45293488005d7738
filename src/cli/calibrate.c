/* SPDX-License-Identifier: MIT */
/*
 * `pyrsprof calibrate`: measures this machine's peak memory bandwidth (STREAM triad, all allowed
 * CPUs and one) and keeps it, with the CPUs, caches and PMU, in the per-machine cache that every
 * recording reads for the bandwidth rule. `--show` prints the cached calibration instead.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "pyrsprof/counters.h"
#include "pyrsprof/machine.h"

#include "util/banned.h"

static const char usage[] =
	"usage: pyrsprof calibrate [--seconds S] [--show]\n"
	"  Measures peak memory bandwidth (STREAM triad over arrays of 4x the last-level cache, all\n"
	"  CPUs pyrsprof may use and one CPU, about S seconds, default 1), and reports the CPUs,\n"
	"  caches and hardware counters. The result is cached per machine (a different machine or\n"
	"  kernel makes it stale) and used by every recording's bandwidth rule.\n"
	"  --show   print the cached calibration without measuring\n";

static void print_machine(const struct prs_machine *m)
{
	printf("machine: %s, %u CPUs online (%u allowed), L2 %llu KiB, LLC %llu MiB, memory %.1f GiB\n",
	       m->model[0] ? m->model : "?", m->cpus_online, m->cpus_allowed,
	       (unsigned long long)(m->l2_bytes >> 10), (unsigned long long)(m->llc_bytes >> 20),
	       (double)m->mem_bytes / 1073741824.0);
	if (m->pmu == PRS_PMU_OK)
		printf("hardware counters: available%s\n",
		       m->topdown == PRS_TOPDOWN_INTEL ? " (Intel top-down perf metrics)"
		       : m->topdown == PRS_TOPDOWN_AMD_ZEN4 ? " (AMD Zen 4 pipeline utilization)"
		       : m->topdown == PRS_TOPDOWN_AMD_ZEN5 ? " (AMD Zen 5 pipeline utilization)"
							  : " (no top-down metrics on this CPU)");
	else
		printf("hardware counters: %s\n", m->pmu_why[0] ? m->pmu_why : "unknown");
	if (m->calibrated)
		printf("peak memory bandwidth (STREAM triad): %.1f GB/s with %u CPUs, %.1f GB/s with one\n",
		       m->bw_all_mbs / 1e3, m->cpus_allowed, m->bw_one_mbs / 1e3);
}

int cmd_calibrate(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "seconds", required_argument, NULL, 's' },
		{ "show", no_argument, NULL, 'S' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct prs_machine m;
	struct prs_err err = { 0 };
	char path[4096];
	double seconds = 1;
	bool show = false;
	int c;

	optind = 1;
	while ((c = cli_getopt(argc, argv, "h", longopts, "calibrate")) != -1) {
		switch (c) {
		case 's':
			if (!cli_parse_number("--seconds", optarg, 0.2, 60, &seconds))
				return EXIT_USAGE;
			break;
		case 'S':
			show = true;
			break;
		case 'h':
			fputs(usage, stdout);
			return EXIT_OK;
		default:
			return EXIT_USAGE;
		}
	}
	if (optind != argc) {
		cli_msg("calibrate: unexpected argument '%s'", argv[optind]);
		return EXIT_USAGE;
	}
	if (cli_machine_cache_path(path, sizeof(path)) != 0) {
		cli_msg("calibrate: no cache folder (set HOME, XDG_CACHE_HOME or PYRSPROF_CACHE_DIR)");
		return EXIT_FAIL;
	}
	if (show) {
		prs_machine_detect(&m, 0);
		if (prs_machine_load(&m, path, &err) != 0) {
			cli_err(&err, "calibrate");
			return EXIT_FAIL;
		}
		print_machine(&m);
		printf("cached in %s\n", path);
		return EXIT_OK;
	}
	cli_msg("measuring memory bandwidth for about %.1f s (the machine should be quiet)", seconds);
	if (prs_machine_calibrate(&m, seconds, &err) != 0) {
		cli_err(&err, "calibrate");
		return EXIT_FAIL;
	}
	print_machine(&m);
	if (prs_machine_save(&m, path, &err) != 0) {
		cli_err(&err, "calibrate");
		return EXIT_FAIL;
	}
	printf("cached in %s\n", path);
	return EXIT_OK;
}
