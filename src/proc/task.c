/* SPDX-License-Identifier: MIT */
/* /proc readers for a target's threads: listing, names, state letters, blocked syscalls. */
#include "pyrsprof/task.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/* The state letter in the text of a stat file: "tid (comm) S ...". comm may contain spaces and
 * parentheses, so the last ')' is taken. */
static char state_of(const char *buf)
{
	const char *p = strrchr(buf, ')');

	if (!p || p[1] != ' ' || p[2] == '\0')
		return 0;
	return p[2];
}

char prs_task_state(pid_t pid, pid_t tid)
{
	char path[80], buf[512];

	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)pid, (int)tid);
	if (read_small(path, buf, sizeof(buf)) <= 0)
		return 0;
	return state_of(buf);
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
	return state_of(buf);
}

int prs_task_schedstat(pid_t pid, pid_t tid, int *fd, struct prs_schedstat *out)
{
	char buf[128], *p = buf, *end;
	uint64_t v[3];
	ssize_t n = pread_kept(pid, tid, "schedstat", fd, buf, sizeof(buf));

	if (n < 0)
		return (int)n;
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

int prs_task_syscall_fd(pid_t pid, pid_t tid, int *fd, struct prs_task_sys *out)
{
	char buf[256], *p = buf, *end;
	uint64_t v[8];
	ssize_t n = pread_kept(pid, tid, "syscall", fd, buf, sizeof(buf));
	long nr;
	int k;

	memset(out, 0, sizeof(*out));
	if (n < 0)
		return (int)n;
	if (strncmp(buf, "running", 7) == 0) {
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

bool prs_proc_exists(pid_t pid)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d", (int)pid);
	return access(path, F_OK) == 0;
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
