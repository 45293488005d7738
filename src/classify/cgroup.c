/* SPDX-License-Identifier: MIT */
/*
 * The target's CPU quota and how much it was throttled: cgroup v2 (cpu.max, cpu.stat's
 * nr_periods/nr_throttled/throttled_usec) or, where the cpu controller is mounted as cgroup v1
 * (as on the dev VM: v1 cpu, a v2 tree without controllers), cpu.cfs_quota_us/cfs_period_us and
 * cpu.stat's throttled_time (kernel Documentation/scheduler/sched-bwc.rst). The quota may be set
 * on an ancestor (a container's cgroup above the process's own), so the walk goes up from the
 * target's cgroup to the mount's root and keeps the nearest cgroup with a quota.
 *
 * Files come from /proc/PID/cgroup and the mount table; tests give fixture files and a prefix
 * prepended to mount points (prs_cgroup_read_at).
 */
#include "classify/classify-internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pyrsprof/util.h"

#include "util/banned.h"

#define CG_PATH_MAX 1024

struct cg_mount {
	char root[CG_PATH_MAX];  /* the mount's root inside the hierarchy */
	char point[CG_PATH_MAX]; /* where it is mounted */
	bool found;
};

/* Undoes mountinfo's octal escapes (\040 for a space) in place. */
static void unescape(char *s)
{
	char *d = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*d++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 3;
		} else {
			*d++ = *s;
		}
	}
	*d = '\0';
}

/* True if the comma-separated list has the token tok. */
static bool has_token(const char *list, const char *tok)
{
	size_t n = strlen(tok);

	for (const char *p = list; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
		if (strncmp(p, tok, n) == 0 && (p[n] == ',' || p[n] == '\0' || p[n] == '\n'))
			return true;
	return false;
}

/* Finds the cgroup2 mount (v2) or the v1 mount carrying the cpu controller (!v2). */
static void find_mount(const char *mountinfo, bool v2, struct cg_mount *m)
{
	char line[4096];
	FILE *f = fopen(mountinfo, "re");

	m->found = false;
	if (!f)
		return;
	while (!m->found && fgets(line, sizeof(line), f)) {
		char *fld[12], *sep = strstr(line, " - "), *save = NULL, *tok;
		char fstype[64] = "", super[1024] = "";
		int n = 0;

		if (!sep)
			continue;
		*sep = '\0';
		if (sscanf(sep + 3, "%63s %*s %1023s", fstype, super) < 1)
			continue;
		for (tok = strtok_r(line, " ", &save); tok && n < 12; tok = strtok_r(NULL, " ", &save))
			fld[n++] = tok;
		if (n < 5)
			continue;
		if (v2 ? strcmp(fstype, "cgroup2") != 0
		       : strcmp(fstype, "cgroup") != 0 || !has_token(super, "cpu"))
			continue;
		snprintf(m->root, sizeof(m->root), "%s", fld[3]);
		snprintf(m->point, sizeof(m->point), "%s", fld[4]);
		unescape(m->root);
		unescape(m->point);
		m->found = true;
	}
	fclose(f);
}

/* The cgroup path of the v2 hierarchy (line "0::PATH") or of v1's cpu controller, from /proc/PID/cgroup. */
static bool cgroup_path(const char *proc_cgroup, bool v2, char *out, size_t size)
{
	char buf[8192], *line, *save = NULL;

	if (prs_read_small_file(proc_cgroup, buf, sizeof(buf)) <= 0)
		return false;
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;

		if (!c2)
			continue;
		*c1 = '\0';
		*c2 = '\0';
		/* line: the hierarchy id; c1 + 1: its controllers */
		if (v2 ? strcmp(line, "0") == 0 && c1[1] == '\0' : has_token(c1 + 1, "cpu")) {
			snprintf(out, size, "%s", c2 + 1);
			return true;
		}
	}
	return false;
}

/* Reads a file of dir into buf; false when it is missing. */
static bool cg_file(const char *dir, const char *name, char *buf, size_t size)
{
	char path[CG_PATH_MAX * 2 + 64];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return prs_read_small_file(path, buf, size) > 0;
}

/* The quota of one cgroup directory: true, with the quota and the period, when it has one. */
static bool cg_quota(const char *dir, int version, uint64_t *quota, uint64_t *period)
{
	char buf[128];
	unsigned long long q, p;
	long long q1;

	if (version == 2) {
		if (!cg_file(dir, "cpu.max", buf, sizeof(buf)) || strncmp(buf, "max", 3) == 0)
			return false;
		if (sscanf(buf, "%llu %llu", &q, &p) != 2 || p == 0)
			return false;
	} else {
		if (!cg_file(dir, "cpu.cfs_quota_us", buf, sizeof(buf)) || sscanf(buf, "%lld", &q1) != 1 ||
		    q1 <= 0)
			return false;
		if (!cg_file(dir, "cpu.cfs_period_us", buf, sizeof(buf)) || sscanf(buf, "%llu", &p) != 1 ||
		    p == 0)
			return false;
		q = (unsigned long long)q1;
	}
	*quota = q;
	*period = p;
	return true;
}

/* cpu.stat (and v1's cpuacct.usage) of dir into out. */
static void cg_stat(const char *dir, int version, struct prs_acct *out)
{
	char buf[2048];
	uint64_t v;

	if (cg_file(dir, "cpu.stat", buf, sizeof(buf))) {
		if (prs_keyed_u64(buf, "nr_periods", &v))
			prs_acct_set(out, PRS_CG_NR_PERIODS, v);
		if (prs_keyed_u64(buf, "nr_throttled", &v))
			prs_acct_set(out, PRS_CG_NR_THROTTLED, v);
		if (version == 2 && prs_keyed_u64(buf, "throttled_usec", &v))
			prs_acct_set(out, PRS_CG_THROTTLED_US, v);
		if (version == 1 && prs_keyed_u64(buf, "throttled_time", &v))
			prs_acct_set(out, PRS_CG_THROTTLED_US, v / 1000);
		if (version == 2 && prs_keyed_u64(buf, "usage_usec", &v))
			prs_acct_set(out, PRS_CG_USAGE_US, v);
	}
	if (version == 1 && cg_file(dir, "cpuacct.usage", buf, sizeof(buf)) &&
	    sscanf(buf, "%" SCNu64, &v) == 1)
		prs_acct_set(out, PRS_CG_USAGE_US, v / 1000);
}

/* Fills out from the hierarchy of version (2 or 1); false when it has no cpu controller. */
static bool read_hierarchy(const char *proc_cgroup, const char *mountinfo, const char *prefix,
			   int version, struct prs_acct *out)
{
	char path[CG_PATH_MAX], dir[CG_PATH_MAX * 2 + 16], top[CG_PATH_MAX * 2 + 16], buf[512];
	struct cg_mount m;
	const char *rel;
	size_t rlen;
	uint64_t quota, period;
	unsigned up = 0;

	find_mount(mountinfo, version == 2, &m);
	if (!m.found || !cgroup_path(proc_cgroup, version == 2, path, sizeof(path)))
		return false;
	/* the path is relative to the hierarchy's root; the mount shows the part under m.root */
	rlen = strcmp(m.root, "/") == 0 ? 0 : strlen(m.root);
	rel = strncmp(path, m.root, rlen) == 0 ? path + rlen : path;
	snprintf(top, sizeof(top), "%s%s", prefix, m.point);
	snprintf(dir, sizeof(dir), "%s%s", top, rel);
	if (version == 2) {
		/* without the cpu controller v2 has no quota files: then v1 may have it */
		if (!cg_file(top, "cgroup.controllers", buf, sizeof(buf)) || !strstr(buf, "cpu"))
			return false;
	} else if (!cg_file(dir, "cpu.cfs_quota_us", buf, sizeof(buf))) {
		return false;
	}
	prs_acct_set(out, PRS_CG_VERSION, (uint64_t)version);
	prs_acct_str(out, path);
	for (;;) {
		if (cg_quota(dir, version, &quota, &period)) {
			prs_acct_set(out, PRS_CG_QUOTA_US, quota);
			prs_acct_set(out, PRS_CG_PERIOD_US, period);
			prs_acct_set(out, PRS_CG_DEPTH_UP, up);
			break;
		}
		char *slash = strrchr(dir, '/');

		if (strlen(dir) <= strlen(top) || !slash)
			break;
		*slash = '\0';
		up++;
	}
	if (!(out->have & (1ull << PRS_CG_QUOTA_US)))
		snprintf(dir, sizeof(dir), "%s%s", top, rel); /* no quota: the own cgroup's usage */
	prs_acct_str(out, dir);
	cg_stat(dir, version, out);
	return true;
}

int prs_cgroup_read_at(const char *proc_cgroup, const char *mountinfo, const char *prefix,
		       enum prs_acct_phase phase, struct prs_acct *out)
{
	prs_acct_init(out, PRS_ACCT_CGROUP, phase, 0);
	prs_acct_set(out, PRS_CG_MONO_NS, prs_now_ns());
	if (read_hierarchy(proc_cgroup, mountinfo, prefix, 2, out))
		return 0;
	prs_acct_init(out, PRS_ACCT_CGROUP, phase, 0);
	prs_acct_set(out, PRS_CG_MONO_NS, prs_now_ns());
	if (read_hierarchy(proc_cgroup, mountinfo, prefix, 1, out))
		return 0;
	return -ENOENT;
}

int prs_acct_read_cgroup(pid_t pid, enum prs_acct_phase phase, struct prs_acct *out)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
	return prs_cgroup_read_at(path, "/proc/self/mountinfo", "", phase, out);
}

int prs_acct_cgroup_again(const struct prs_acct *prev, enum prs_acct_phase phase, struct prs_acct *out)
{
	int version = (int)prs_acct_val(prev, PRS_CG_VERSION, 0);
	uint64_t quota, period;
	char dir[PRS_ACCT_MAX_STR];

	if (prev->type != PRS_ACCT_CGROUP || prev->nstr < 2 || (version != 1 && version != 2))
		return -EINVAL;
	snprintf(dir, sizeof(dir), "%s", prev->str[1]);
	prs_acct_init(out, PRS_ACCT_CGROUP, phase, 0);
	prs_acct_set(out, PRS_CG_MONO_NS, prs_now_ns());
	prs_acct_set(out, PRS_CG_VERSION, (uint64_t)version);
	prs_acct_str(out, prev->str[0]);
	prs_acct_str(out, dir);
	if (access(dir, F_OK) != 0)
		return -errno;
	if (cg_quota(dir, version, &quota, &period)) {
		prs_acct_set(out, PRS_CG_QUOTA_US, quota);
		prs_acct_set(out, PRS_CG_PERIOD_US, period);
		prs_acct_set(out, PRS_CG_DEPTH_UP, prs_acct_val(prev, PRS_CG_DEPTH_UP, 0));
	}
	cg_stat(dir, version, out);
	return 0;
}
