/* SPDX-License-Identifier: MIT */
/*
 * A ring of the process's own, made and announced to pyrsprof (follow.h): --subprocesses in
 * preload mode. Raw syscalls only: it runs in a fork's child handler, where the parent may have
 * had threads holding locks (no allocation, no stdio, no loader).
 */
#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "agent/follow-agent.h"
#include "util/banned.h"

/* Connects to pyrsprof's socket; -1 when it is gone or its backlog is full (never waits). */
static int connect_pyrsprof(const struct prs_follow_cfg *cfg)
{
	struct sockaddr_un a;
	size_t n = strlen(cfg->name);
	int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

	if (s < 0)
		return -1;
	memset(&a, 0, sizeof(a));
	a.sun_family = AF_UNIX;
	memcpy(a.sun_path + 1, cfg->name, n); /* abstract: sun_path[0] is NUL */
	if (connect(s, (struct sockaddr *)&a,
		    (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n)) != 0) {
		close(s);
		return -1;
	}
	return s;
}

/* Sends fd to pyrsprof with msg, on a connection of its own (the listen backlog queues
 * thousands; a datagram queue holds 10: net.unix.max_dgram_qlen). Returns true once sent, with
 * pyrsprof's pid (the kernel's word on the listener) in *reader; pyrsprof reads it when it
 * accepts the connection, after the agent has closed it. */
static bool announce(const struct prs_follow_cfg *cfg, int fd, const struct prs_follow_msg *msg,
		     pid_t *reader)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} ctl;
	struct iovec iov = { (void *)msg, sizeof(*msg) };
	struct msghdr m;
	struct cmsghdr *c;
	int s = connect_pyrsprof(cfg);
	struct ucred peer;
	socklen_t plen = sizeof(peer);
	bool ok;

	if (s < 0)
		return false;
	*reader = getsockopt(s, SOL_SOCKET, SO_PEERCRED, &peer, &plen) == 0 ? peer.pid : 0;
	memset(&m, 0, sizeof(m));
	memset(&ctl, 0, sizeof(ctl));
	m.msg_iov = &iov;
	m.msg_iovlen = 1;
	m.msg_control = ctl.buf;
	m.msg_controllen = sizeof(ctl.buf);
	c = CMSG_FIRSTHDR(&m);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	ok = sendmsg(s, &m, MSG_DONTWAIT | MSG_NOSIGNAL) == (ssize_t)sizeof(*msg);
	close(s);
	return ok;
}

struct prs_ring_hdr *prs_follow_make_ring(const struct prs_follow_cfg *cfg, pid_t self, pid_t ppid,
					  bool forked, size_t *size)
{
	uint64_t len = prs_ring_size(cfg->nslots, cfg->stack_cap);
	struct prs_follow_msg msg = { PRS_FOLLOW_MAGIC, ppid, forked, 0 };
	struct prs_ring_hdr *h;
	pid_t reader = 0;
	int fd = (int)syscall(SYS_memfd_create, "pyrsprof-ring", MFD_CLOEXEC);

	if (fd < 0)
		return NULL;
	if (ftruncate(fd, (off_t)len) != 0 ||
	    (h = mmap(NULL, (size_t)len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED) {
		close(fd);
		return NULL;
	}
	h->magic = PRS_RING_MAGIC;
	h->version = PRS_RING_VERSION;
	h->nslots = cfg->nslots;
	h->stack_cap = cfg->stack_cap;
	h->slot_size = prs_ring_slot_size(cfg->stack_cap);
	h->slots_off = prs_ring_slots_off();
	h->period_ns = cfg->period_ns;
	h->clock = cfg->clock;
	h->target_pid = self;
	/* pyrsprof maps it after the send: what it reads is written before */
	if (!announce(cfg, fd, &msg, &reader)) {
		munmap(h, (size_t)len);
		close(fd);
		return NULL;
	}
	close(fd); /* the mapping is the ring: no descriptor of ours for the program to close */
	h->profiler_pid = reader;
	*size = (size_t)len;
	return h;
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Samples of h taken before ticket t and not read yet. */
static uint64_t unread_before(struct prs_ring_hdr *h, uint32_t nslots, uint64_t t)
{
	uint64_t n = 0;

	for (uint32_t i = 0; i < nslots; i++) {
		struct prs_ring_slot *sl = prs_ring_slot(h, i);

		if (prs_ring_ready(sl) && sl->seq < t)
			n++;
	}
	return n;
}

/* False once pyrsprof stopped the ring or is gone (killed: nobody reads it any more). */
static bool reader_there(struct prs_ring_hdr *h)
{
	pid_t reader = h->profiler_pid;

	if (__atomic_load_n(&h->stop, __ATOMIC_ACQUIRE))
		return false;
	return reader <= 0 || kill(reader, 0) == 0 || errno != ESRCH;
}

void prs_follow_await_reader(struct prs_ring_hdr *h, uint32_t nslots)
{
	/* the samples of the other threads that go on meanwhile are not waited for */
	uint64_t t = __atomic_load_n(&h->ticket, __ATOMIC_ACQUIRE), t0 = mono_ns(), now = t0;
	struct timespec nap = { 0, 1000000 }; /* pyrsprof looks every 10 ms at most */
	uint64_t left;

	__atomic_store_n(&h->exit_ns, t0, __ATOMIC_RELEASE);
	while ((left = unread_before(h, nslots, t)) != 0 && reader_there(h) &&
	       now - t0 < PRS_FOLLOW_EXIT_WAIT_NS) {
		nanosleep(&nap, NULL);
		now = mono_ns();
	}
	__atomic_store_n(&h->exit_wait_ns, now - t0, __ATOMIC_RELAXED);
	__atomic_store_n(&h->exit_unread, left, __ATOMIC_RELEASE);
}
