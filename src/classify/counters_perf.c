/* SPDX-License-Identifier: MIT */
/*
 * The perf_event_open backend: counts the target's threads (each event inherits to the threads a
 * thread creates: one fd per counter per initial thread, their readings summed), grouped so a
 * group's counters are scheduled on the PMU together, each read with time_enabled and
 * time_running (read_format) so a multiplexed count can be scaled and its running share shown.
 * Groups are not read with PERF_FORMAT_GROUP: it was refused together with inherit on the
 * kernels perf stat supports, so every fd is read on its own.
 *
 * Unprivileged at kernel.perf_event_paranoid >= 2, counting kernel time is refused (EACCES):
 * the counter is then opened again with exclude_kernel and said to count user space only.
 */
#include "pyrsprof/counters.h"

#include <errno.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/banned.h"

#define MAX_TIDS 4096

struct perf_ctx {
	prs_perf_open_fn open_fn;
	int *fds; /* [counter][tid] */
	size_t ntids;
	struct prs_perf_who who; /* pyrsprof's, when the counters were opened */
};

static long real_open(void *attr, pid_t pid, int cpu, int group_fd, unsigned long flags)
{
	return syscall(SYS_perf_event_open, attr, pid, cpu, group_fd, flags);
}

static int open_one(struct perf_ctx *x, const struct prs_counter *c, pid_t tid, int group_fd,
		    bool user_only)
{
	struct perf_event_attr attr;
	long fd;

	memset(&attr, 0, sizeof(attr));
	attr.size = sizeof(attr);
	attr.type = c->type;
	attr.config = c->config;
	attr.read_format = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING;
	attr.inherit = 1;
	attr.exclude_hv = 1;
	attr.exclude_kernel = user_only;
	fd = x->open_fn(&attr, tid, -1, group_fd, PERF_FLAG_FD_CLOEXEC);
	return fd < 0 ? -errno : (int)fd;
}

static int perf_open(struct prs_counter_backend *b, const pid_t *tids, size_t n,
		     struct prs_counter_set *set, struct prs_err *err)
{
	struct perf_ctx *x = b->ctx;
	size_t opened = 0;
	int first_err = 0;

	if (n > MAX_TIDS)
		n = MAX_TIDS;
	free(x->fds);
	x->fds = malloc(PRS_MAX_COUNTERS * (n ? n : 1) * sizeof(int));
	if (!x->fds)
		return prs_err_set(err, -ENOMEM, "counters: out of memory");
	for (size_t i = 0; i < PRS_MAX_COUNTERS * (n ? n : 1); i++)
		x->fds[i] = -1;
	x->ntids = n;
	prs_perf_who_read(&x->who);
	for (size_t i = 0; i < set->n; i++) {
		struct prs_counter *c = &set->c[i];
		bool user_only = false;
		size_t nfd = 0;

		c->err = 0;
		c->why[0] = '\0';
		for (size_t t = 0; t < n; t++) {
			int leader = -1, fd;

			/* the group leader is the first counter of the group that opened */
			for (size_t j = 0; j < i; j++)
				if (set->c[j].group == c->group && x->fds[j * n + t] >= 0) {
					leader = x->fds[j * n + t];
					break;
				}
			fd = open_one(x, c, tids[t], leader, user_only);
			if ((fd == -EACCES || fd == -EPERM) && !user_only) {
				user_only = true;
				fd = open_one(x, c, tids[t], leader, true);
			}
			if (fd < 0) {
				if (!c->err)
					c->err = fd;
				continue;
			}
			x->fds[i * n + t] = fd;
			nfd++;
		}
		if (nfd) {
			opened++;
			c->err = 0;
			if (user_only)
				snprintf(c->why, sizeof(c->why), "%s: user space only (kernel time not permitted "
					 "at kernel.perf_event_paranoid = %d)", c->name, x->who.paranoid);
		} else {
			if (!c->err)
				c->err = -ESRCH;
			prs_counter_explain(c, c->err, &x->who, c->why, sizeof(c->why));
			if (!first_err)
				first_err = c->err;
		}
	}
	if (!opened && set->n)
		return prs_err_set(err, first_err ? first_err : -ENOENT, "%s", set->c[0].why);
	return 0;
}

static int perf_read(struct prs_counter_backend *b, struct prs_counter_set *set)
{
	struct perf_ctx *x = b->ctx;

	for (size_t i = 0; i < set->n && x->fds; i++) {
		struct prs_counter *c = &set->c[i];

		c->ok = false;
		c->value = c->enabled_ns = c->running_ns = 0;
		for (size_t t = 0; t < x->ntids; t++) {
			uint64_t v[3];
			int fd = x->fds[i * x->ntids + t];

			if (fd < 0 || read(fd, v, sizeof(v)) != (ssize_t)sizeof(v))
				continue;
			c->ok = true;
			c->value += v[0];
			c->enabled_ns += v[1];
			c->running_ns += v[2];
		}
	}
	return 0;
}

static void perf_free(struct prs_counter_backend *b)
{
	struct perf_ctx *x = b->ctx;

	if (x && x->fds) {
		for (size_t i = 0; i < PRS_MAX_COUNTERS * (x->ntids ? x->ntids : 1); i++)
			if (x->fds[i] >= 0)
				close(x->fds[i]);
		free(x->fds);
	}
	free(x);
	free(b);
}

struct prs_counter_backend *prs_counter_perf_new(prs_perf_open_fn open_fn)
{
	struct prs_counter_backend *b = calloc(1, sizeof(*b));
	struct perf_ctx *x = calloc(1, sizeof(*x));

	if (!b || !x) {
		free(b);
		free(x);
		return NULL;
	}
	x->open_fn = open_fn ? open_fn : real_open;
	b->name = "perf";
	b->open = perf_open;
	b->read = perf_read;
	b->free = perf_free;
	b->ctx = x;
	return b;
}

void prs_counter_backend_free(struct prs_counter_backend *b)
{
	if (b)
		b->free(b);
}
