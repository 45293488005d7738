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

char prs_task_state_fd(pid_t pid, pid_t tid, int *fd)
{
	char buf[512];
	ssize_t n;

	if (*fd < 0) {
		char path[80];

		snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)pid, (int)tid);
		*fd = open(path, O_RDONLY | O_CLOEXEC);
		if (*fd < 0)
			return 0;
	}
	n = pread(*fd, buf, sizeof(buf) - 1, 0);
	if (n <= 0) { /* the thread is gone */
		close(*fd);
		*fd = -1;
		return 0;
	}
	buf[n] = '\0';
	return state_of(buf);
}

int prs_task_syscall(pid_t pid, pid_t tid)
{
	char path[80], buf[256];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/syscall", (int)pid, (int)tid);
	n = read_small(path, buf, sizeof(buf));
	if (n < 0)
		return (int)n;
	if (strncmp(buf, "running", 7) == 0)
		return -1;
	return atoi(buf);
}

int prs_task_schedstat(pid_t pid, pid_t tid, int *fd, uint64_t *cpu_ns, uint64_t *wait_ns)
{
	char buf[128], *end, *end2;
	ssize_t n;
	int f = *fd;

	if (f < 0) {
		char path[80];

		snprintf(path, sizeof(path), "/proc/%d/task/%d/schedstat", (int)pid, (int)tid);
		f = open(path, O_RDONLY | O_CLOEXEC);
		if (f < 0)
			return -errno;
		*fd = f;
	}
	n = pread(f, buf, sizeof(buf) - 1, 0);
	if (n <= 0) {
		int e = n < 0 ? errno : ENODATA;

		close(f);
		*fd = -1;
		return -e;
	}
	buf[n] = '\0';
	*cpu_ns = strtoull(buf, &end, 10);
	*wait_ns = strtoull(end, &end2, 10);
	return end == buf || end2 == end ? -EINVAL : 0;
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
