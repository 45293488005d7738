/* SPDX-License-Identifier: MIT */
/*
 * The machine as context for a verdict: CPUs, caches, memory, the PMU, and the peak memory
 * bandwidth measured by `pyrsprof calibrate` (STREAM-like triad, all allowed CPUs and one CPU,
 * about a second). The calibration is cached per machine in a small JSON file
 * (where: the CLI's cli_machine_cache_path) under a key made of what identifies the machine (CPU model, CPUs,
 * memory, last-level cache, kernel release); a cache whose key differs from this machine's is
 * stale and ignored. Not thread-safe.
 */
#ifndef PYRSPROF_MACHINE_H
#define PYRSPROF_MACHINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "pyrsprof/acct.h"
#include "pyrsprof/err.h"

struct prs_machine {
	char model[128];
	unsigned cpus_online, cpus_allowed;
	uint64_t l1d_bytes, l2_bytes, llc_bytes, mem_bytes;
	unsigned page_size;
	long clk_tck;
	int paranoid;          /* kernel.perf_event_paranoid */
	int pmu;               /* enum prs_pmu_state */
	int pmu_errno;
	char pmu_why[PRS_ACCT_MAX_STR]; /* whole as an accounting string (acct.h) */
	int topdown;           /* enum prs_topdown_kind */
	char key[96];          /* what identifies this machine (prs_machine_detect) */
	bool calibrated;       /* the bandwidth fields hold a measurement */
	double bw_all_mbs, bw_one_mbs; /* MB/s (1e6 bytes), STREAM triad counting */
	int64_t calibrated_at; /* Unix time */
};

/* Detects everything but the bandwidth (fast: sysfs, /proc, one counter probe). pid's affinity
 * gives cpus_allowed (0: pyrsprof's own). Returns 0 (missing facts are left 0). */
int prs_machine_detect(struct prs_machine *m, pid_t pid);

/*
 * Measures the STREAM triad a[i] = b[i] + s*c[i] (24 bytes per element as STREAM counts them:
 * two reads, one write) over arrays of at least 4x the last-level cache, once per entry of
 * threads[] (that many threads, each pinned to one allowed CPU; the arrays are allocated and
 * touched once), in about `seconds` in all; mbs[i] is the best pass of run i in MB/s.
 * Returns 0, -ENOMEM or -errno with err set.
 */
int prs_bandwidth_measure(const unsigned *threads, size_t nruns, uint64_t llc_bytes, double seconds,
			  double *mbs, struct prs_err *err);

/* detect + bandwidth with all allowed CPUs and with one. About `seconds` in all. */
int prs_machine_calibrate(struct prs_machine *m, double seconds, struct prs_err *err);

/* Writes m to path (creating its folder; atomically: temporary name + rename). */
int prs_machine_save(const struct prs_machine *m, const char *path, struct prs_err *err);

/*
 * Reads the calibration at path into m's bandwidth fields when its key equals m->key (m comes
 * from prs_machine_detect). Returns 0, -ENOENT (no cache), -ESTALE (another machine's or an
 * older key: ignored) or -EINVAL (malformed), with err set.
 */
int prs_machine_load(struct prs_machine *m, const char *path, struct prs_err *err);

/* As a MACHINE accounting record, and back. */
void prs_machine_to_acct(const struct prs_machine *m, struct prs_acct *out);
void prs_machine_from_acct(const struct prs_acct *a, struct prs_machine *m);

#endif
