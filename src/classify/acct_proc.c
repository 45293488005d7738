/* SPDX-License-Identifier: MIT */
/*
 * Accounting snapshots from /proc: a thread (schedstat, stat, status, io), a process (stat,
 * status, io: the kernel sums its dead threads into these), a reaped child's rusage, the CPU
 * times of /proc/stat over the CPUs the target may use (steal), and the cgroup's CPU quota and
 * throttling (cgroup v2 cpu.max/cpu.stat, or v1's cpu controller). Every file is parsed with
 * bounds: a field that is missing or unparsable is left unset, never guessed.
 *
 * Units: /proc/…/stat times are clock ticks (sysconf(_SC_CLK_TCK)); they are stored in ns.
 * schedstat is ns. cgroup v1 throttled_time is ns, v2 throttled_usec µs: stored in µs.
 */
#include "classify/classify-internal.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pyrsprof/util.h"

#include "util/banned.h"

ssize_t prs_read_small_file(const char *path, char *buf, size_t size)
{
	ssize_t n, total = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	while ((size_t)total < size - 1) {
		n = read(fd, buf + total, size - 1 - (size_t)total);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			n = -errno;
			close(fd);
			return n;
		}
		if (n == 0)
			break;
		total += n;
	}
	close(fd);
	buf[total] = '\0';
	return total;
}

/* The value after "key:" (or "key ") on its own line of text, as an unsigned integer. */
bool prs_keyed_u64(const char *text, const char *key, uint64_t *out)
{
	size_t klen = strlen(key);
	const char *p = text;

	while (p && *p) {
		if (strncmp(p, key, klen) == 0 && (p[klen] == ':' || p[klen] == ' ' || p[klen] == '\t')) {
			char *end;
			unsigned long long v;

			p += klen + 1;
			while (*p == ' ' || *p == '\t' || *p == ':')
				p++;
			if (!isdigit((unsigned char)*p))
				return false;
			errno = 0;
			v = strtoull(p, &end, 10);
			if (errno || end == p)
				return false;
			*out = v;
			return true;
		}
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	return false;
}

static uint64_t ticks_ns(uint64_t ticks)
{
	long hz = sysconf(_SC_CLK_TCK);

	return ticks * (1000000000ull / (uint64_t)(hz > 0 ? hz : 100));
}

/*
 * The fields of a /proc stat line after the command name: fields[0] is field 3 (the state), so
 * stat field N is fields[N - 3]. The name may hold spaces and parentheses: the last ')' ends it.
 * Returns the number of fields split (at most max).
 */
static int stat_fields(char *text, char **fields, int max)
{
	char *p = strrchr(text, ')');
	int n = 0;

	if (!p)
		return 0;
	p++;
	while (n < max) {
		while (*p == ' ')
			p++;
		if (!*p || *p == '\n')
			break;
		fields[n++] = p;
		while (*p && *p != ' ' && *p != '\n')
			p++;
		if (*p)
			*p++ = '\0';
	}
	return n;
}

static void set_stat_field(struct prs_acct *a, char **f, int n, int field, unsigned dst, bool ticks)
{
	char *end;
	unsigned long long v;

	if (field - 3 >= n)
		return;
	errno = 0;
	v = strtoull(f[field - 3], &end, 10);
	if (errno || end == f[field - 3] || *end)
		return;
	prs_acct_set(a, dst, ticks ? ticks_ns(v) : v);
}

static bool delayacct_on(void)
{
	char buf[16];

	return prs_read_small_file("/proc/sys/kernel/task_delayacct", buf, sizeof(buf)) > 0 &&
	       buf[0] == '1';
}

/* stat, status and io of the task under dir (/proc/PID or /proc/PID/task/TID). */
static int read_task_files(const char *dir, bool thread, struct prs_acct *a)
{
	char path[256], buf[4096];
	char *f[52];
	uint64_t v;
	int n;

	snprintf(path, sizeof(path), "%s/stat", dir);
	if (prs_read_small_file(path, buf, sizeof(buf)) <= 0)
		return -ESRCH;
	n = stat_fields(buf, f, 52);
	set_stat_field(a, f, n, 10, PRS_TASK_MINFLT, false);
	set_stat_field(a, f, n, 12, PRS_TASK_MAJFLT, false);
	set_stat_field(a, f, n, 14, PRS_TASK_UTIME_NS, true);
	set_stat_field(a, f, n, 15, PRS_TASK_STIME_NS, true);
	set_stat_field(a, f, n, 22, PRS_TASK_START_TICKS, false);
	if (!thread)
		set_stat_field(a, f, n, 20, PRS_TASK_THREADS, false);
	if (delayacct_on())
		set_stat_field(a, f, n, 42, PRS_TASK_BLKIO_DELAY_NS, true);

	snprintf(path, sizeof(path), "%s/status", dir);
	if (prs_read_small_file(path, buf, sizeof(buf)) > 0) {
		/* context switches in status are the one task's: the process's are summed by rusage */
		if (thread && prs_keyed_u64(buf, "voluntary_ctxt_switches", &v))
			prs_acct_set(a, PRS_TASK_NVCSW, v);
		if (thread && prs_keyed_u64(buf, "nonvoluntary_ctxt_switches", &v))
			prs_acct_set(a, PRS_TASK_NIVCSW, v);
		if (!thread && prs_keyed_u64(buf, "VmHWM", &v))
			prs_acct_set(a, PRS_TASK_RSS_PEAK_KB, v);
		if (!thread && prs_keyed_u64(buf, "VmRSS", &v))
			prs_acct_set(a, PRS_TASK_RSS_KB, v);
	}
	snprintf(path, sizeof(path), "%s/io", dir);
	if (prs_read_small_file(path, buf, sizeof(buf)) > 0) {
		static const struct {
			const char *key;
			unsigned field;
		} io[] = {
			{ "rchar", PRS_TASK_RCHAR }, { "wchar", PRS_TASK_WCHAR },
			{ "syscr", PRS_TASK_SYSCR }, { "syscw", PRS_TASK_SYSCW },
			{ "read_bytes", PRS_TASK_READ_BYTES }, { "write_bytes", PRS_TASK_WRITE_BYTES },
		};

		for (size_t i = 0; i < sizeof(io) / sizeof(io[0]); i++)
			if (prs_keyed_u64(buf, io[i].key, &v))
				prs_acct_set(a, io[i].field, v);
	}
	return 0;
}

int prs_acct_read_thread(pid_t pid, pid_t tid, enum prs_acct_phase phase, struct prs_acct *out)
{
	char dir[64], path[96], buf[256];
	unsigned long long cpu, wait, slices;
	int rc;

	prs_acct_init(out, PRS_ACCT_THREAD, phase, tid);
	prs_acct_set(out, PRS_TASK_MONO_NS, prs_now_ns());
	prs_acct_set(out, PRS_TASK_SOURCE, PRS_SRC_PROC);
	snprintf(dir, sizeof(dir), "/proc/%d/task/%d", (int)pid, (int)tid);
	snprintf(path, sizeof(path), "%s/schedstat", dir);
	if (prs_read_small_file(path, buf, sizeof(buf)) > 0 &&
	    sscanf(buf, "%llu %llu %llu", &cpu, &wait, &slices) == 3) {
		prs_acct_set(out, PRS_TASK_CPU_NS, cpu);
		prs_acct_set(out, PRS_TASK_RUNQ_NS, wait);
		prs_acct_set(out, PRS_TASK_SLICES, slices);
	}
	rc = read_task_files(dir, true, out);
	return rc;
}

int prs_acct_read_process(pid_t pid, enum prs_acct_phase phase, struct prs_acct *out)
{
	char dir[64];

	prs_acct_init(out, PRS_ACCT_PROCESS, phase, pid);
	prs_acct_set(out, PRS_TASK_MONO_NS, prs_now_ns());
	prs_acct_set(out, PRS_TASK_SOURCE, PRS_SRC_PROC);
	snprintf(dir, sizeof(dir), "/proc/%d", (int)pid);
	return read_task_files(dir, false, out);
}

static uint64_t tv_ns(const struct timeval *tv)
{
	return (uint64_t)tv->tv_sec * 1000000000ull + (uint64_t)tv->tv_usec * 1000ull;
}

void prs_acct_from_rusage(pid_t pid, const struct rusage *ru, struct prs_acct *out)
{
	prs_acct_init(out, PRS_ACCT_PROCESS, PRS_PHASE_EXIT, pid);
	prs_acct_set(out, PRS_TASK_MONO_NS, prs_now_ns());
	prs_acct_set(out, PRS_TASK_SOURCE, PRS_SRC_RUSAGE);
	prs_acct_set(out, PRS_TASK_UTIME_NS, tv_ns(&ru->ru_utime));
	prs_acct_set(out, PRS_TASK_STIME_NS, tv_ns(&ru->ru_stime));
	prs_acct_set(out, PRS_TASK_RSS_PEAK_KB, (uint64_t)ru->ru_maxrss);
	prs_acct_set(out, PRS_TASK_MINFLT, (uint64_t)ru->ru_minflt);
	prs_acct_set(out, PRS_TASK_MAJFLT, (uint64_t)ru->ru_majflt);
	prs_acct_set(out, PRS_TASK_NVCSW, (uint64_t)ru->ru_nvcsw);
	prs_acct_set(out, PRS_TASK_NIVCSW, (uint64_t)ru->ru_nivcsw);
	prs_acct_set(out, PRS_TASK_INBLOCK, (uint64_t)ru->ru_inblock);
	prs_acct_set(out, PRS_TASK_OUBLOCK, (uint64_t)ru->ru_oublock);
}

int prs_acct_read_system(pid_t pid, enum prs_acct_phase phase, struct prs_acct *out)
{
	static const unsigned cols[] = { PRS_SYS_USER, PRS_SYS_NICE, PRS_SYS_SYSTEM, PRS_SYS_IDLE,
					 PRS_SYS_IOWAIT, PRS_SYS_IRQ, PRS_SYS_SOFTIRQ, PRS_SYS_STEAL };
	uint64_t sum[8] = { 0 };
	cpu_set_t set;
	bool have_set = sched_getaffinity(pid, sizeof(set), &set) == 0;
	unsigned ncpus = 0;
	char line[512];
	FILE *f;
	long hz = sysconf(_SC_CLK_TCK);

	prs_acct_init(out, PRS_ACCT_SYSTEM, phase, 0);
	f = fopen("/proc/stat", "re");
	if (!f)
		return -errno;
	prs_acct_set(out, PRS_SYS_MONO_NS, prs_now_ns());
	while (fgets(line, sizeof(line), f)) {
		unsigned long long v[8] = { 0 };
		int cpu;

		if (strncmp(line, "cpu", 3) != 0 || !isdigit((unsigned char)line[3]))
			continue;
		if (sscanf(line + 3, "%d %llu %llu %llu %llu %llu %llu %llu %llu", &cpu, &v[0], &v[1],
			   &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]) != 9)
			continue;
		if (have_set && (cpu < 0 || cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, &set)))
			continue;
		for (int i = 0; i < 8; i++)
			sum[i] += v[i];
		ncpus++;
	}
	fclose(f);
	if (!ncpus)
		return -EINVAL;
	for (int i = 0; i < 8; i++)
		prs_acct_set(out, cols[i], sum[i]);
	prs_acct_set(out, PRS_SYS_NCPUS, ncpus);
	prs_acct_set(out, PRS_SYS_CLK_TCK, (uint64_t)(hz > 0 ? hz : 100));
	return 0;
}
