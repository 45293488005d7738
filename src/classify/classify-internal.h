/* SPDX-License-Identifier: MIT */
/* Private to src/classify: small file readers shared by the collectors, and test entry points. */
#ifndef PYRSPROF_CLASSIFY_INTERNAL_H
#define PYRSPROF_CLASSIFY_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "pyrsprof/acct.h"

/* Reads a small file (at most size - 1 bytes, NUL-terminated). Returns its length or -errno. */
ssize_t prs_read_small_file(const char *path, char *buf, size_t size);

/* The unsigned integer after "key" and a ':' or blanks at the start of a line of text. */
bool prs_keyed_u64(const char *text, const char *key, uint64_t *out);

/*
 * prs_acct_read_cgroup over given files: proc_cgroup as /proc/PID/cgroup, mountinfo as
 * /proc/self/mountinfo, and prefix prepended to every mount point (a fixture tree; "" for the
 * real one).
 */
int prs_cgroup_read_at(const char *proc_cgroup, const char *mountinfo, const char *prefix,
		       enum prs_acct_phase phase, struct prs_acct *out);

/* Encodes sysfs event `event` of the PMU directory dir ("event=0x00,umask=0x81" placed by the
 * format files beside it). False when the event or a format is missing or unparsable. */
bool prs_sysfs_event(const char *dir, const char *event, uint32_t *type, uint64_t *config);

#endif
