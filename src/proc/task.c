/* SPDX-License-Identifier: MIT */
/* /proc readers for a target's threads: listing, names, state letters, blocked syscalls. */
#include "pyrsprof/task.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "util/banned.h"

/* Reads a small /proc file into buf (NUL-terminated). Returns the length or -errno. */
static ssize_t read_small(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = read(fd, buf, size - 1);
	if (n < 0)
		n = -errno;
	else
		buf[n] = '\0';
	close(fd);
	return n;
}

int prs_task_list(pid_t pid, pid_t *out, size_t max)
{
	char path[64];
	DIR *d;
	struct dirent *de;
	int n = 0;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	d = opendir(path);
	if (!d)
		return errno == ENOENT ? -ESRCH : -errno;
	while ((de = readdir(d)) != NULL) {
		char *end;
		long tid = strtol(de->d_name, &end, 10);

		if (*end != '\0' || tid <= 0)
			continue;
		if ((size_t)n < max)
			out[n] = (pid_t)tid;
		n++;
	}
	closedir(d);
	return n;
}

int prs_task_comm(pid_t pid, pid_t tid, char *buf, size_t size)
{
	char path[80];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", (int)pid, (int)tid);
	n = read_small(path, buf, size);
	if (n < 0)
		return (int)n;
	buf[strcspn(buf, "\n")] = '\0';
	return 0;
}

char prs_task_parse_state(const char *stat)
{
	/* comm may contain spaces and parentheses: the last ')' ends it */
	const char *p = strrchr(stat, ')');

	if (!p || p[1] != ' ' || p[2] == '\0')
		return 0;
	return p[2];
}

int prs_task_parse_stat(const char *stat, struct prs_task_stat *out)
{
	const char *p = strrchr(stat, ')');
	char *end;

	memset(out, 0, sizeof(*out));
	if (!p || p[1] != ' ' || p[2] == '\0' || p[2] == ' ')
		return -EINVAL;
	out->state = p[2];
	p += 3;
	/* after the state: ppid pgrp session tty_nr tpgid, then flags, minflt cminflt majflt
	 * cmajflt, utime stime cutime cstime, priority nice num_threads itrealvalue starttime
	 * (man 5 proc) */
	for (int i = 0; i < 19; i++, p = end) {
		uint64_t v;

		if (*p != ' ')
			return i < 6 ? -EINVAL : 0;
		errno = 0;
		v = strtoull(p + 1, &end, 10);
		if (end == p + 1 || errno)
			return i < 6 ? -EINVAL : 0;
		if (i == 5)
			out->flags = v;
		else if (i == 10)
			out->utime = v;
		else if (i == 11)
			out->stime = v;
		else if (i == 12)
			out->cutime = v;
		else if (i == 13)
			out->times = true, out->cstime = v;
		else if (i == 18)
			out->started = true, out->starttime = v;
	}
	return 0;
}

char prs_task_state(pid_t pid, pid_t tid)
{
	char path[80], buf[512];

	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)pid, (int)tid);
	if (read_small(path, buf, sizeof(buf)) <= 0)
		return 0;
	return prs_task_parse_state(buf);
}

bool prs_proc_is_kthread(pid_t pid)
{
	char path[64], buf[1024];
	struct prs_task_stat st;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	return read_small(path, buf, sizeof(buf)) > 0 && prs_task_parse_stat(buf, &st) == 0 &&
	       (st.flags & PRS_PF_KTHREAD);
}

/* Opens /proc/PID/task/TID/<name> into *fd if it is not open yet, then preads it into buf
 * (NUL-terminated). A thread that is gone closes *fd. Returns the length or -errno. */
static ssize_t pread_kept(pid_t pid, pid_t tid, const char *name, int *fd, char *buf, size_t size)
{
	ssize_t n;
	int f = *fd;

	if (f < 0) {
		char path[80];

		snprintf(path, sizeof(path), "/proc/%d/task/%d/%s", (int)pid, (int)tid, name);
		f = open(path, O_RDONLY | O_CLOEXEC);
		if (f < 0)
			return errno == ENOENT ? -ESRCH : -errno;
		*fd = f;
	}
	n = pread(f, buf, size - 1, 0);
	if (n <= 0) {
		int e = n < 0 ? errno : ESRCH;

		close(f);
		*fd = -1;
		return -e;
	}
	buf[n] = '\0';
	return n;
}

char prs_task_state_fd(pid_t pid, pid_t tid, int *fd)
{
	char buf[512];

	if (pread_kept(pid, tid, "stat", fd, buf, sizeof(buf)) <= 0)
		return 0;
	return prs_task_parse_state(buf);
}

int prs_task_stat_fd(pid_t pid, pid_t tid, int *fd, struct prs_task_stat *out)
{
	char buf[1024];

	if (pread_kept(pid, tid, "stat", fd, buf, sizeof(buf)) <= 0)
		return -ESRCH;
	return prs_task_parse_stat(buf, out);
}

int prs_task_parse_schedstat(const char *text, struct prs_schedstat *out)
{
	const char *p = text;
	char *end;
	uint64_t v[3];

	for (int i = 0; i < 3; i++, p = end) {
		v[i] = strtoull(p, &end, 10);
		if (end == p)
			return -EINVAL;
	}
	out->cpu_ns = v[0];
	out->wait_ns = v[1];
	out->slices = v[2];
	return 0;
}

int prs_task_schedstat(pid_t pid, pid_t tid, int *fd, struct prs_schedstat *out)
{
	char buf[128];
	ssize_t n = pread_kept(pid, tid, "schedstat", fd, buf, sizeof(buf));

	if (n < 0)
		return (int)n;
	return prs_task_parse_schedstat(buf, out);
}

int prs_task_parse_syscall(const char *text, struct prs_task_sys *out)
{
	const char *p = text;
	char *end;
	uint64_t v[8];
	long nr;
	int k;

	memset(out, 0, sizeof(*out));
	if (strncmp(text, "running", 7) == 0) {
		out->running = true;
		out->nr = -1;
		return 0;
	}
	nr = strtol(p, &end, 10);
	if (end == p || nr < -1 || nr > 4095)
		return -EINVAL;
	p = end;
	/* "nr a0 .. a5 sp pc", or "-1 sp pc" outside a syscall */
	k = nr < 0 ? 2 : 8;
	for (int i = 0; i < k; i++, p = end) {
		v[i] = strtoull(p, &end, 16);
		if (end == p)
			return -EINVAL;
	}
	out->nr = (int)nr;
	if (nr >= 0)
		memcpy(out->args, v, sizeof(out->args));
	out->sp = v[k - 2];
	out->pc = v[k - 1];
	return 0;
}

bool prs_task_exists(pid_t pid, pid_t tid)
{
	char path[80];

	snprintf(path, sizeof(path), "/proc/%d/task/%d", (int)pid, (int)tid);
	return access(path, F_OK) == 0;
}

int prs_task_syscall_fd(pid_t pid, pid_t tid, int *fd, struct prs_task_sys *out)
{
	char buf[256];
	ssize_t n = pread_kept(pid, tid, "syscall", fd, buf, sizeof(buf));

	if (n < 0) {
		memset(out, 0, sizeof(*out));
		return (int)n;
	}
	return prs_task_parse_syscall(buf, out);
}

bool prs_proc_exists(pid_t pid)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d", (int)pid);
	return access(path, F_OK) == 0;
}

int prs_proc_parse_status(const char *text, const char *key, char *val, size_t size)
{
	size_t klen = strlen(key);

	for (const char *line = text; *line; ) {
		const char *eol = strchr(line, '\n');
		size_t len = eol ? (size_t)(eol - line) : strlen(line);

		if (len > klen && strncmp(line, key, klen) == 0 && line[klen] == ':') {
			const char *v = line + klen + 1, *end = line + len;

			while (v < end && (*v == ' ' || *v == '\t'))
				v++;
			if (size)
				snprintf(val, size, "%.*s", (int)(end - v), v);
			return 0;
		}
		if (!eol)
			break;
		line = eol + 1;
	}
	return -ENOENT;
}

/* Reads /proc/PID/status (its first size - 1 bytes) into buf, NUL-terminated. Returns 0 or
 * -errno. */
static int read_status(pid_t pid, char *buf, size_t size)
{
	char path[64];
	size_t n = 0;
	int fd, rc = 0;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	while (n < size - 1) {
		ssize_t r = read(fd, buf + n, size - 1 - n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			rc = -errno;
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	buf[n] = '\0';
	return rc;
}

int prs_proc_status_field(pid_t pid, const char *key, char *val, size_t size)
{
	char buf[8192];
	int rc = read_status(pid, buf, sizeof(buf));

	return rc ? rc : prs_proc_parse_status(buf, key, val, size);
}

int prs_proc_cmdline(pid_t pid, char *buf, size_t size)
{
	char path[64];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	n = read_small(path, buf, size);
	if (n < 0)
		return (int)n;
	for (ssize_t i = 0; i < n; i++)
		if (buf[i] == '\0')
			buf[i] = ' ';
	while (n > 0 && buf[n - 1] == ' ')
		buf[--n] = '\0';
	return 0;
}

/* The number of "key:" in status text, or -1. */
static long status_num(const char *text, const char *key)
{
	char val[32], *end;
	long v;

	if (prs_proc_parse_status(text, key, val, sizeof(val)) != 0)
		return -1;
	v = strtol(val, &end, 10);
	return end == val ? -1 : v;
}

int prs_proc_ids(pid_t tid, struct prs_proc_ids *out)
{
	char buf[8192];
	long tgid, ppid, tracer;
	int rc = read_status(tid, buf, sizeof(buf));

	if (rc)
		return rc == -ENOENT ? -ESRCH : rc;
	tgid = status_num(buf, "Tgid");
	ppid = status_num(buf, "PPid");
	tracer = status_num(buf, "TracerPid");
	if (tgid <= 0 || ppid < 0 || tracer < 0)
		return -EINVAL;
	out->tgid = (pid_t)tgid;
	out->ppid = (pid_t)ppid;
	out->tracer = (pid_t)tracer;
	return 0;
}

int prs_proc_cpu(pid_t pid, uint64_t *self_ns, uint64_t *children_ns)
{
	char path[64], buf[1024];
	struct prs_task_stat st;
	long hz = sysconf(_SC_CLK_TCK);
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	n = read_small(path, buf, sizeof(buf));
	if (n < 0)
		return n == -ENOENT ? -ESRCH : (int)n;
	if (hz <= 0 || prs_task_parse_stat(buf, &st) != 0 || !st.times)
		return -EINVAL;
	*self_ns = (st.utime + st.stime) * (1000000000ull / (uint64_t)hz);
	*children_ns = (st.cutime + st.cstime) * (1000000000ull / (uint64_t)hz);
	return 0;
}

int prs_proc_cpu_clock_ns(pid_t pid, uint64_t *ns)
{
	clockid_t clk;
	struct timespec ts;
	int rc = clock_getcpuclockid(pid, &clk);

	if (rc)
		return -rc;
	if (clock_gettime(clk, &ts) != 0)
		return errno == EINVAL ? -ESRCH : -errno;
	*ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	return 0;
}

/* Appends the pids listed in one children file to out. Returns 0, or -ENOENT when the kernel
 * has no such file. */
static int read_children_file(pid_t pid, pid_t tid, pid_t *out, size_t max, size_t *n)
{
	char path[96], buf[4096];
	ssize_t len;
	char *p, *end;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)pid, (int)tid);
	len = read_small(path, buf, sizeof(buf));
	if (len < 0)
		return (int)len;
	for (p = buf;; p = end) {
		long c = strtol(p, &end, 10);

		if (end == p)
			break;
		if (c > 0 && *n < max)
			out[*n] = (pid_t)c;
		if (c > 0)
			(*n)++;
	}
	return 0;
}

/* The fallback: every process of /proc whose PPid is pid. */
static int scan_children(pid_t pid, pid_t *out, size_t max)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	size_t n = 0;

	if (!d)
		return -errno;
	while ((de = readdir(d)) != NULL) {
		struct prs_proc_ids ids;
		char *end;
		long c = strtol(de->d_name, &end, 10);

		if (*end != '\0' || c <= 0 || c == pid)
			continue;
		if (prs_proc_ids((pid_t)c, &ids) == 0 && ids.ppid == pid && ids.tgid == c) {
			if (n < max)
				out[n] = (pid_t)c;
			n++;
		}
	}
	closedir(d);
	return (int)n;
}

int prs_proc_children(pid_t pid, pid_t *out, size_t max)
{
	pid_t tids[256];
	size_t n = 0;
	int nt = prs_task_list(pid, tids, 256);

	if (nt < 0)
		return nt;
	/* (a process with more threads than that is scanned: every thread's children are its) */
	for (int i = 0; i < nt && nt <= 256; i++) {
		int rc = read_children_file(pid, tids[i], out, max, &n);

		if (rc == -ENOENT && i == 0 && prs_task_exists(pid, tids[i]))
			return scan_children(pid, out, max);
	}
	return nt > 256 ? scan_children(pid, out, max) : (int)n;
}
