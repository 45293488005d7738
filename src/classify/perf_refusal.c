/* SPDX-License-Identifier: MIT */
/*
 * Why perf_event_open said EACCES/EPERM, and the remedy that fits (counters, kernel stacks): the
 * paranoid level refuses an unprivileged pyrsprof (fix: CAP_PERFMON, root, the sysctl); a
 * refusal that neither the level nor the lack of privilege explains is a seccomp filter (a
 * container's profile: Docker's default forbids perf_event_open, even to root) or a security
 * module, where root does not help and only that profile or policy does.
 */
#include "pyrsprof/counters.h"

#include <stdio.h>
#include <string.h>

#include "classify/classify-internal.h"

#include "util/banned.h"

#define CAP_PERFMON_BIT 38
#define CAP_SYS_ADMIN_BIT 21

/* Capabilities count for perf only in the initial user namespace (perfmon_capable() is
 * capable(), not ns_capable()): a container's root in its own namespace is unprivileged here. */
static bool initial_userns(void)
{
	char map[256];
	unsigned long long inner, outer, count;

	if (prs_read_small_file("/proc/self/uid_map", map, sizeof(map)) <= 0)
		return true;
	/* the initial namespace maps every uid to itself: "0 0 4294967295" */
	return sscanf(map, "%llu %llu %llu", &inner, &outer, &count) == 3 && inner == 0 &&
	       outer == 0 && count == 4294967295ull;
}

void prs_perf_who_read(struct prs_perf_who *w)
{
	char status[8192];
	uint64_t caps = 0, seccomp = 0;
	const char *cap;

	memset(w, 0, sizeof(*w));
	w->paranoid = prs_perf_paranoid();
	if (prs_read_small_file("/proc/self/status", status, sizeof(status)) <= 0)
		return;
	cap = strstr(status, "\nCapEff:");
	if (cap)
		sscanf(cap + 8, "%llx", (unsigned long long *)&caps);
	w->privileged = ((caps >> CAP_PERFMON_BIT) & 1 || (caps >> CAP_SYS_ADMIN_BIT) & 1) &&
			initial_userns();
	w->seccomp = prs_keyed_u64(status, "Seccomp", &seccomp) && seccomp == 2;
}

const char *prs_perf_refusal(const struct prs_perf_who *w, int allowed_at, const char *what, int e,
			     char *buf, size_t size)
{
	if (!w->privileged && w->paranoid > allowed_at)
		snprintf(buf, size, "%snot permitted (perf_event_open: %s; kernel.perf_event_paranoid = "
			 "%d): run as root, grant CAP_PERFMON (setcap cap_perfmon+ep pyrsprof), or sysctl "
			 "kernel.perf_event_paranoid=%d", what, strerror(e), w->paranoid, allowed_at);
	else if (w->seccomp)
		snprintf(buf, size, "%snot permitted by a seccomp filter (perf_event_open: %s; pyrsprof "
			 "runs under one, as in a container): root does not help; allow perf_event_open in "
			 "the container's seccomp profile", what, strerror(e));
	else
		snprintf(buf, size, "%snot permitted by a security module (perf_event_open: %s, though "
			 "%s): root does not help; its policy (SELinux, AppArmor) must allow perf_event_open",
			 what, strerror(e), w->privileged ? "pyrsprof has CAP_PERFMON" :
			 "kernel.perf_event_paranoid allows it");
	return buf;
}
