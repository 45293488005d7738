/* SPDX-License-Identifier: MIT */
/*
 * The working-set floor of `--wss` (src/classify/wss.c says how and why): the memory a process
 * touched in a short window, from /proc/PID/clear_refs and /proc/PID/smaps_rollup, measured by a
 * thread of its own beside the sampler (it makes no ptrace call and touches no sampler state).
 */
#ifndef PYRSPROF_WSS_H
#define PYRSPROF_WSS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct prs_wss;

#define PRS_WSS_KEEP 64 /* windows kept for the median (the later ones count in max only) */

struct prs_wss_result {
	unsigned samples;       /* windows measured */
	uint64_t median_bytes;  /* the median window's working set (the start-up's windows, which
				 * may touch more or less, do not move it) */
	uint64_t max_bytes;     /* the largest working set of a window */
	uint64_t kept[PRS_WSS_KEEP];
	uint64_t last_bytes;
	uint64_t window_ns;     /* the window (0: none measured) */
	uint64_t clear_ns_max;  /* the longest clear_refs write: the target's page-table walk */
	int err;                /* -errno of the failure that ended the measures (0: none) */
};

/* Clears the accessed bits of pid's pages. 0 or -errno. */
int prs_wss_clear(pid_t pid);
/* The bytes of pid's pages accessed since (smaps_rollup "Referenced"). 0, -errno, or -ENODATA. */
int prs_wss_referenced(pid_t pid, uint64_t *bytes);

/*
 * Whether this machine sets a page's accessed bit again when the page is touched after a clear,
 * which the measure rests on: a hypervisor that shadows the guest's page tables may leave a
 * cleared page's shadow entry in place, and the bit clear (the dev VM, a PVM guest, on Dec 8: 0
 * of 64 MiB touched again). Tried on pyrsprof's own process: 64 MiB faulted in, cleared, touched
 * again (*again of *of bytes were seen, in its own mapping: /proc/self/smaps). 1 (it does: half
 * of them or more), 0 (it does not), or
 * -errno. Takes some 20-50 ms, and 64 MiB for that time.
 */
int prs_wss_probe(uint64_t *again, uint64_t *of);

/* Starts measuring pid: a window of window_ns every every_ns (the first after one window).
 * 0 or -errno. */
int prs_wss_start(pid_t pid, uint64_t window_ns, uint64_t every_ns, struct prs_wss **out);
/* Stops and frees w (NULL: *r is empty), the measures in *r. */
void prs_wss_stop(struct prs_wss *w, struct prs_wss_result *r);

#endif
