/* SPDX-License-Identifier: MIT */
/*
 * The final accounting of the target's threads as they exit, from the kernel's taskstats
 * (generic netlink family "TASKSTATS", kernel Documentation/accounting/taskstats.rst): a
 * listener registered for every CPU gets one message per exiting task, and one for the whole
 * thread group when a multi-threaded process ends (the sum of its threads). These carry what
 * /proc loses at exit: on-CPU time (cpu_run_virtual_total: sum_exec_runtime), run-queue wait
 * (cpu_delay_total, kept from sched_info even when delay accounting is off: measured on the dev
 * VM with kernel.task_delayacct=0), context switches, faults and storage IO bytes. So a
 * `pyrsprof run` of a program that exits keeps its per-thread kernel accounting.
 *
 * Registering needs CAP_NET_ADMIN (root). The messages queue in the socket until drained; exits
 * of every process on the machine arrive, so the buffer is enlarged and drained about once a
 * second; a full buffer (ENOBUFS) loses messages, and the count of losses is kept.
 */
#include "pyrsprof/taskstats.h"

#include <errno.h>
#include <linux/genetlink.h>
#include <linux/netlink.h>
#include <linux/taskstats.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "pyrsprof/util.h"
#include "classify/classify-internal.h"

#include "util/banned.h"

#define RCVBUF_BYTES (8 << 20)
#define MAX_KEPT 100000 /* exit records kept per recording */

/*
 * One exit as kept: the fields read from its message (a struct prs_acct is ~1.4 KB, most of it
 * strings no exit has; a thread-per-request server ends thousands of threads a second).
 */
struct exit_rec {
	uint32_t id;
	bool group; /* the thread group's sum (PROCESS), else a thread's */
	uint64_t mono_ns, cpu_ns, runq_ns, slices, utime_us, stime_us, nvcsw, nivcsw, minflt, majflt;
	uint64_t read_bytes, write_bytes, rss_peak_kb, blkio_delay_ns;
};

struct prs_taskstats {
	int fd;
	uint16_t family;
	pid_t tgid;
	struct exit_rec *kept;
	size_t nkept, cap;
	uint64_t lost;
	uint64_t exits; /* the target's thread exits seen */
	bool delayacct;
};

struct nlreq {
	struct nlmsghdr n;
	struct genlmsghdr g;
	char buf[256];
};

static int send_cmd(int fd, uint16_t type, uint8_t cmd, uint16_t atype, const void *data, size_t len)
{
	struct nlreq m;
	struct nlattr *na;
	struct sockaddr_nl addr = { .nl_family = AF_NETLINK };

	if (len > sizeof(m.buf) - NLA_HDRLEN)
		return -EINVAL;
	memset(&m, 0, sizeof(m));
	m.n.nlmsg_len = NLMSG_LENGTH(GENL_HDRLEN);
	m.n.nlmsg_type = type;
	m.n.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
	m.g.cmd = cmd;
	m.g.version = 1;
	na = (struct nlattr *)((char *)&m + m.n.nlmsg_len);
	na->nla_type = atype;
	na->nla_len = (uint16_t)(len + NLA_HDRLEN);
	memcpy((char *)na + NLA_HDRLEN, data, len);
	m.n.nlmsg_len += NLA_ALIGN(na->nla_len);
	if (sendto(fd, &m, m.n.nlmsg_len, 0, (struct sockaddr *)&addr, sizeof(addr)) < 0)
		return -errno;
	return 0;
}

/* Walks the attributes in [p, p + len): calls fn for each well-formed one. */
typedef void (*attr_fn)(void *ctx, uint16_t type, const void *data, size_t len);

static void each_attr(const void *p, size_t len, attr_fn fn, void *ctx)
{
	const char *c = p;

	while (len >= NLA_HDRLEN) {
		const struct nlattr *na = (const struct nlattr *)c;
		size_t alen = na->nla_len, step = NLA_ALIGN(alen);

		if (alen < NLA_HDRLEN || alen > len)
			return;
		fn(ctx, na->nla_type & NLA_TYPE_MASK, c + NLA_HDRLEN, alen - NLA_HDRLEN);
		if (step >= len)
			return;
		c += step;
		len -= step;
	}
}

static void family_attr(void *ctx, uint16_t type, const void *data, size_t len)
{
	if (type == CTRL_ATTR_FAMILY_ID && len >= 2)
		memcpy(ctx, data, 2);
}

/*
 * Waits for the answer to a request sent with NLM_F_ACK (the socket has a receive timeout):
 * the family id when family is not NULL, and the acknowledgement. Returns 0 or the -errno the
 * kernel answered (-EPERM: not allowed).
 */
static int await_reply(int fd, uint16_t *family)
{
	char buf[8192];

	for (;;) {
		ssize_t n = recv(fd, buf, sizeof(buf), 0);

		if (n < 0)
			return errno == EINTR ? 0 : -errno;
		for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)n);
		     h = NLMSG_NEXT(h, n)) {
			if (h->nlmsg_type == NLMSG_ERROR) {
				const struct nlmsgerr *e = NLMSG_DATA(h);

				if (h->nlmsg_len < NLMSG_LENGTH(sizeof(*e)))
					return -EPROTO;
				if (e->error)
					return e->error;
				return family && !*family ? -ENOENT : 0;
			}
			if (family && h->nlmsg_len >= NLMSG_LENGTH(GENL_HDRLEN))
				each_attr((char *)NLMSG_DATA(h) + GENL_HDRLEN,
					  h->nlmsg_len - NLMSG_LENGTH(GENL_HDRLEN), family_attr, family);
		}
	}
}

int prs_taskstats_open(struct prs_taskstats **out, struct prs_err *err)
{
	struct sockaddr_nl addr = { .nl_family = AF_NETLINK };
	struct timeval tv = { 1, 0 };
	struct prs_taskstats *ts;
	char mask[32], buf[16];
	long ncpu = sysconf(_SC_NPROCESSORS_CONF);
	int size = RCVBUF_BYTES, rc;

	*out = NULL;
	ts = calloc(1, sizeof(*ts));
	if (!ts)
		return prs_err_set(err, -ENOMEM, "taskstats: out of memory");
	ts->fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_GENERIC);
	if (ts->fd < 0 || bind(ts->fd, (struct sockaddr *)&addr, sizeof(addr)) != 0) {
		rc = -errno;
		prs_err_set(err, rc, "taskstats: netlink socket: %s", strerror(-rc));
		goto fail;
	}
	setsockopt(ts->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (setsockopt(ts->fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof(size)) != 0)
		setsockopt(ts->fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
	rc = send_cmd(ts->fd, GENL_ID_CTRL, CTRL_CMD_GETFAMILY, CTRL_ATTR_FAMILY_NAME,
		      TASKSTATS_GENL_NAME, sizeof(TASKSTATS_GENL_NAME));
	if (!rc)
		rc = await_reply(ts->fd, &ts->family);
	if (rc) {
		prs_err_set(err, rc, "taskstats: no TASKSTATS netlink family: %s", strerror(-rc));
		goto fail;
	}
	snprintf(mask, sizeof(mask), "0-%ld", ncpu > 0 ? ncpu - 1 : 0);
	rc = send_cmd(ts->fd, ts->family, TASKSTATS_CMD_GET, TASKSTATS_CMD_ATTR_REGISTER_CPUMASK, mask,
		      strlen(mask) + 1);
	if (!rc)
		rc = await_reply(ts->fd, NULL);
	if (rc) {
		prs_err_set(err, rc, "taskstats: registering for task exits: %s%s", strerror(-rc),
			    rc == -EPERM || rc == -EACCES ? " (needs CAP_NET_ADMIN: run as root)" : "");
		goto fail;
	}
	ts->delayacct = prs_read_small_file("/proc/sys/kernel/task_delayacct", buf, sizeof(buf)) > 0 &&
			buf[0] == '1';
	*out = ts;
	return 0;
fail:
	prs_taskstats_close(ts);
	return rc;
}

void prs_taskstats_target(struct prs_taskstats *ts, pid_t tgid)
{
	if (ts)
		ts->tgid = tgid;
}

/* One message's parse state: the id (PID or TGID attribute) and its stats. */
struct msg {
	struct prs_taskstats *ts;
	int kind; /* TASKSTATS_TYPE_AGGR_PID or _AGGR_TGID */
	uint32_t id;
	struct taskstats st; /* copied out: netlink attributes are only 4-byte aligned */
	size_t stlen;        /* bytes the kernel sent (0: none) */
};

/* The stats fields read here all exist since version 8 of struct taskstats; a shorter one
 * (a kernel older than this header) is refused rather than read past its end. */
#define NEED_LEN (offsetof(struct taskstats, ac_tgid) + sizeof(uint32_t))

static void keep(struct msg *m)
{
	const struct taskstats *st = &m->st;
	struct prs_taskstats *ts = m->ts;
	struct exit_rec *e;
	bool group = m->kind == TASKSTATS_TYPE_AGGR_TGID;

	if (m->stlen < NEED_LEN)
		return;
	if (group ? m->id != (uint32_t)ts->tgid : st->ac_tgid != (uint32_t)ts->tgid)
		return;
	ts->exits += !group;
	if (ts->nkept >= MAX_KEPT ||
	    prs_array_grow((void **)&ts->kept, &ts->cap, ts->nkept + 1, sizeof(*ts->kept))) {
		ts->lost++;
		return;
	}
	e = &ts->kept[ts->nkept++];
	*e = (struct exit_rec){
		.id = m->id,
		.group = group,
		.mono_ns = prs_now_ns(),
		/* cpu_run_virtual_total is the scheduler's sum_exec_runtime (ns, schedstat's first
		 * field); cpu_run_real_total is utime + stime, tick-sampled: measured on `bounds
		 * exits`, threads of 0.2/0.4/0.6 s of CPU read 0.168/0.280/0.556 s by it, 0 for a
		 * thread of 9.6 ms */
		.cpu_ns = st->cpu_run_virtual_total,
		.runq_ns = st->cpu_delay_total,
		.slices = st->cpu_count,
		.utime_us = st->ac_utime,
		.stime_us = st->ac_stime,
		.nvcsw = st->nvcsw,
		.nivcsw = st->nivcsw,
		.minflt = st->ac_minflt,
		.majflt = st->ac_majflt,
		/* read_char, write_char, read_syscalls and write_syscalls are not kept: the kernel
		 * rounds them down to a multiple of 1024 (kernel/tsacct.c, KB_MASK), so a thread's
		 * 203 reads arrive as 0; those facts come from /proc or stay unmeasured. The storage
		 * bytes lose under 1 KiB. */
		.read_bytes = st->read_bytes,
		.write_bytes = st->write_bytes,
		.rss_peak_kb = st->hiwater_rss,
		.blkio_delay_ns = st->blkio_delay_total,
	};
}

static void inner_attr(void *ctx, uint16_t type, const void *data, size_t len)
{
	struct msg *m = ctx;

	if ((type == TASKSTATS_TYPE_PID || type == TASKSTATS_TYPE_TGID) && len >= 4)
		memcpy(&m->id, data, 4);
	else if (type == TASKSTATS_TYPE_STATS) {
		memset(&m->st, 0, sizeof(m->st));
		memcpy(&m->st, data, len < sizeof(m->st) ? len : sizeof(m->st));
		m->stlen = len;
	}
}

static void outer_attr(void *ctx, uint16_t type, const void *data, size_t len)
{
	struct msg m;

	memset(&m, 0, sizeof(m));
	m.ts = ctx;
	m.kind = type;

	if (type != TASKSTATS_TYPE_AGGR_PID && type != TASKSTATS_TYPE_AGGR_TGID)
		return;
	each_attr(data, len, inner_attr, &m);
	keep(&m);
}

/* Reads the messages of one datagram of n bytes. Returns how many were taskstats'. */
static int parse(struct prs_taskstats *ts, char *buf, size_t n)
{
	int n_msgs = 0;

	for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, n); h = NLMSG_NEXT(h, n)) {
		if (h->nlmsg_type != ts->family || h->nlmsg_len < NLMSG_LENGTH(GENL_HDRLEN))
			continue;
		each_attr((char *)NLMSG_DATA(h) + GENL_HDRLEN, h->nlmsg_len - NLMSG_LENGTH(GENL_HDRLEN),
			  outer_attr, ts);
		n_msgs++;
	}
	return n_msgs;
}

/*
 * Each exit is a datagram of its own (~450 bytes; ~900 with the thread group's sum), so they are
 * received DRAIN_BATCH to a system call (recvmmsg), not one each: a thread-per-request server
 * ends thousands of threads a second, and every exit on the machine arrives.
 */
#define DRAIN_BATCH 32
#define DATAGRAM_BYTES 2048

int prs_taskstats_drain(struct prs_taskstats *ts)
{
	/* aligned for struct taskstats (u64 fields) inside the message */
	static __attribute__((aligned(8))) char buf[DRAIN_BATCH][DATAGRAM_BYTES];
	struct mmsghdr mm[DRAIN_BATCH];
	struct iovec iov[DRAIN_BATCH];
	int n_msgs = 0;

	if (!ts)
		return 0;
	for (;;) {
		int got;

		memset(mm, 0, sizeof(mm));
		for (int i = 0; i < DRAIN_BATCH; i++) {
			iov[i] = (struct iovec){ buf[i], DATAGRAM_BYTES };
			mm[i].msg_hdr.msg_iov = &iov[i];
			mm[i].msg_hdr.msg_iovlen = 1;
		}
		got = recvmmsg(ts->fd, mm, DRAIN_BATCH, MSG_DONTWAIT, NULL);
		if (got < 0) {
			if (errno == EINTR)
				continue;
			if (errno == ENOBUFS) {
				ts->lost++; /* the kernel dropped exit messages: the buffer overflowed */
				continue;
			}
			break;
		}
		for (int i = 0; i < got; i++) {
			if (mm[i].msg_hdr.msg_flags & MSG_TRUNC)
				ts->lost++; /* (no exit message is that long) */
			else
				n_msgs += parse(ts, buf[i], mm[i].msg_len);
		}
		if (got < DRAIN_BATCH)
			break;
	}
	return n_msgs;
}

size_t prs_taskstats_prune(struct prs_taskstats *ts, bool (*keep_thread)(void *ctx, uint32_t tid),
			   void *ctx)
{
	size_t k = 0;

	for (size_t i = 0; ts && i < ts->nkept; i++)
		if (ts->kept[i].group || keep_thread(ctx, ts->kept[i].id))
			ts->kept[k++] = ts->kept[i];
	if (ts)
		ts->nkept = k;
	return k;
}

size_t prs_taskstats_count(const struct prs_taskstats *ts)
{
	return ts ? ts->nkept : 0;
}

void prs_taskstats_record(const struct prs_taskstats *ts, size_t i, struct prs_acct *a)
{
	const struct exit_rec *e = &ts->kept[i];

	prs_acct_init(a, e->group ? PRS_ACCT_PROCESS : PRS_ACCT_THREAD, PRS_PHASE_EXIT, e->id);
	prs_acct_set(a, PRS_TASK_MONO_NS, e->mono_ns);
	prs_acct_set(a, PRS_TASK_SOURCE, PRS_SRC_TASKSTATS);
	prs_acct_set(a, PRS_TASK_CPU_NS, e->cpu_ns);
	prs_acct_set(a, PRS_TASK_RUNQ_NS, e->runq_ns);
	prs_acct_set(a, PRS_TASK_SLICES, e->slices);
	prs_acct_set(a, PRS_TASK_UTIME_NS, e->utime_us * 1000);
	prs_acct_set(a, PRS_TASK_STIME_NS, e->stime_us * 1000);
	prs_acct_set(a, PRS_TASK_NVCSW, e->nvcsw);
	prs_acct_set(a, PRS_TASK_NIVCSW, e->nivcsw);
	prs_acct_set(a, PRS_TASK_MINFLT, e->minflt);
	prs_acct_set(a, PRS_TASK_MAJFLT, e->majflt);
	prs_acct_set(a, PRS_TASK_READ_BYTES, e->read_bytes);
	prs_acct_set(a, PRS_TASK_WRITE_BYTES, e->write_bytes);
	if (e->group)
		prs_acct_set(a, PRS_TASK_RSS_PEAK_KB, e->rss_peak_kb);
	if (ts->delayacct)
		prs_acct_set(a, PRS_TASK_BLKIO_DELAY_NS, e->blkio_delay_ns);
}

uint64_t prs_taskstats_exits(const struct prs_taskstats *ts)
{
	return ts ? ts->exits : 0;
}

uint64_t prs_taskstats_lost(const struct prs_taskstats *ts)
{
	return ts ? ts->lost : 0;
}

void prs_taskstats_close(struct prs_taskstats *ts)
{
	char mask[32];
	long ncpu = sysconf(_SC_NPROCESSORS_CONF);

	if (!ts)
		return;
	if (ts->fd >= 0 && ts->family) {
		snprintf(mask, sizeof(mask), "0-%ld", ncpu > 0 ? ncpu - 1 : 0);
		send_cmd(ts->fd, ts->family, TASKSTATS_CMD_GET, TASKSTATS_CMD_ATTR_DEREGISTER_CPUMASK,
			 mask, strlen(mask) + 1);
	}
	if (ts->fd >= 0)
		close(ts->fd);
	free(ts->kept);
	free(ts);
}
