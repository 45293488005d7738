/* SPDX-License-Identifier: MIT */
/*
 * --mode preload --subprocesses: the rings of the processes of the tree (preload-tree-internal.h).
 * One connection per ring (a seqpacket socket: its listen backlog queues thousands), one message
 * on it: the ring's descriptor in SCM_RIGHTS; who connected is the kernel's word (SO_PEERCRED),
 * not the sender's. Everything else is the program's and checked: the payload's size and magic,
 * the ring's size and header (prs_ring_check).
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "pyrsprof/task.h"
#include "pyrsprof/util.h"
#include "sample/preload-tree-internal.h"
#include "sample/sampler-internal.h"
#include "util/banned.h"

#define EXIT_CHECK_NS 20000000ull /* followed processes' exits looked for this often */
#define MAX_FDS 8                 /* descriptors a message may carry (all but a ring's closed) */
#define MAX_PER_POLL 256          /* connections taken per poll: the rest at the next */
#define BACKLOG 4096              /* (capped by net.core.somaxconn) */
#define GRACE_NS 300000000ull     /* every target gone: how long a ring still due is waited for */
#define GRACE_POLL_NS 1000000ull

struct prs_preload_tree {
	int sock;
	struct prs_follow_cfg cfg;
	uint64_t last_exit_check;
	uint64_t lost;
	uint64_t all_gone_since;  /* when every target was first seen gone (0: some runs) */
};

bool prs_ring_check(const struct prs_ring_hdr *h, uint64_t size, uint32_t nslots, uint32_t cap,
		    pid_t pid)
{
	return size == prs_ring_size(nslots, cap) && h->magic == PRS_RING_MAGIC &&
	       h->version == PRS_RING_VERSION && h->nslots == nslots && h->stack_cap == cap &&
	       h->slot_size == prs_ring_slot_size(cap) && h->slots_off == prs_ring_slots_off() &&
	       pid > 0 && __atomic_load_n(&h->target_pid, __ATOMIC_ACQUIRE) == pid;
}

int prs_preload_tree_new(struct prs_follow_cfg *cfg, struct prs_preload_tree **out, char *env,
			 size_t size, struct prs_err *err)
{
	struct prs_preload_tree *t = calloc(1, sizeof(*t));
	struct sockaddr_un a;
	uint64_t nonce = 0;
	int n;

	if (!t)
		return prs_err_set(err, -ENOMEM, "out of memory");
	/* a name no one guesses: another process of the user's could send rings, not read ours */
	if (getrandom(&nonce, sizeof(nonce), 0) != (ssize_t)sizeof(nonce))
		nonce = prs_now_ns() ^ ((uint64_t)getpid() << 32);
	n = snprintf(cfg->name, sizeof(cfg->name), "pyrsprof-%d-%016llx", (int)getpid(),
		     (unsigned long long)nonce);
	memset(&a, 0, sizeof(a));
	a.sun_family = AF_UNIX;
	memcpy(a.sun_path + 1, cfg->name, (size_t)n);
	t->sock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (t->sock < 0 ||
	    bind(t->sock, (struct sockaddr *)&a,
		 (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n)) != 0 ||
	    listen(t->sock, BACKLOG) != 0) {
		int e = errno;

		prs_preload_tree_free(t);
		return prs_err_set(err, -e, "--subprocesses: the socket the agents announce their "
				   "processes to: %s", strerror(e));
	}
	t->cfg = *cfg;
	if (!prs_follow_format(env, size, cfg)) {
		prs_preload_tree_free(t);
		return prs_err_set(err, -EINVAL, "--subprocesses: configuration too long");
	}
	*out = t;
	return 0;
}

void prs_preload_tree_free(struct prs_preload_tree *t)
{
	if (!t)
		return;
	if (t->sock >= 0)
		close(t->sock);
	free(t);
}

uint64_t prs_preload_tree_lost(const struct prs_preload_tree *t)
{
	return t ? t->lost : 0;
}

/* The descriptors of a received message: the first into *fd (the others closed). False when it
 * had none, or they were cut (pyrsprof out of descriptors). */
static bool take_fd(struct msghdr *m, int *fd)
{
	*fd = -1;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR(m, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++) {
			int f;

			memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (*fd < 0)
				*fd = f;
			else
				close(f);
		}
	}
	if ((m->msg_flags & MSG_CTRUNC) && *fd >= 0) {
		close(*fd);
		*fd = -1;
	}
	return *fd >= 0;
}

/* Maps ring descriptor fd of process pid and checks it; NULL if it is not a ring of ours. */
static struct prs_ring_hdr *map_checked(const struct prs_preload_tree *t, int fd, pid_t pid,
					size_t *size)
{
	uint64_t want = prs_ring_size(t->cfg.nslots, t->cfg.stack_cap);
	struct prs_ring_hdr *h;
	struct stat st;

	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size != want)
		return NULL;
	h = mmap(NULL, (size_t)want, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (h == MAP_FAILED)
		return NULL;
	if (!prs_ring_check(h, want, t->cfg.nslots, t->cfg.stack_cap, pid)) {
		munmap(h, (size_t)want);
		return NULL;
	}
	*size = (size_t)want;
	return h;
}

/* A new process of the tree, pid, with its ring h: a target like ptrace --subprocesses makes
 * (tree.c add_child): its command, its parent's interpreter when it is a fork of it. */
static void add_process(struct prs_sampler *s, pid_t pid, const struct prs_follow_msg *msg,
			struct prs_ring_hdr *h, size_t size)
{
	struct prs_target *tg = prs_target_new(s, pid);
	struct prs_target *parent = prs_session_target(s, msg->ppid);

	if (!tg || !prs_thr_add(&tg->thr, pid) || prs_preload_adopt(s, tg, h, size) != 0) {
		if (!tg || !tg->preload)
			munmap(h, size); /* (else freed with tg) */
		prs_target_free(tg);
		return;
	}
	tg->ppid = msg->ppid;
	tg->own_image = true;
	if (prs_session_add_target(s, tg) != 0)
		return;
	s->st.processes++;
	prs_tree_record_command(s, tg);
	if (parent && msg->forked) {
		prs_target_py_inherit(s, tg, parent);
		prs_preload_child_seen(parent);
	}
}

/* The announcement on connection c (its peer: pid, uid): a ring, or NULL (counted lost). */
static struct prs_ring_hdr *read_ring(struct prs_preload_tree *t, int c, const struct ucred *peer,
				      struct prs_follow_msg *msg, size_t *size)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(MAX_FDS * sizeof(int))];
	} ctl;
	struct iovec iov = { msg, sizeof(*msg) };
	struct msghdr m;
	struct prs_ring_hdr *h = NULL;
	ssize_t n;
	int fd;

	memset(&m, 0, sizeof(m));
	m.msg_iov = &iov;
	m.msg_iovlen = 1;
	m.msg_control = ctl.buf;
	m.msg_controllen = sizeof(ctl.buf);
	/* (sent before the agent closed its end: there, or the connection carries nothing) */
	n = recvmsg(c, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	if (n < 0 || !take_fd(&m, &fd))
		return NULL;
	if (n == (ssize_t)sizeof(*msg) && !(m.msg_flags & MSG_TRUNC) && msg->magic == PRS_FOLLOW_MAGIC &&
	    peer->uid == getuid())
		h = map_checked(t, fd, peer->pid, size);
	close(fd);
	return h;
}

/* One announcement, if any. Returns false when none is waiting. */
static bool receive_one(struct prs_sampler *s, struct prs_preload_tree *t)
{
	struct prs_follow_msg msg;
	struct prs_target *tg;
	struct prs_ring_hdr *h;
	struct ucred peer;
	socklen_t len = sizeof(peer);
	size_t size = 0;
	int c = accept4(t->sock, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

	if (c < 0)
		return errno == EINTR || errno == ECONNABORTED;
	h = getsockopt(c, SOL_SOCKET, SO_PEERCRED, &peer, &len) == 0 && peer.pid > 0
		    ? read_ring(t, c, &peer, &msg, &size)
		    : NULL;
	close(c);
	if (!h) {
		t->lost++;
		return true;
	}
	tg = prs_session_target(s, peer.pid);
	if (tg && !tg->exited)
		prs_preload_adopt(s, tg, h, size); /* its exec: the new image's ring */
	else if (!tg)
		add_process(s, peer.pid, &msg, h, size);
	else
		munmap(h, size); /* (a pid whose exit was seen, not dropped yet) */
	return true;
}

/* Followed processes (not the launched one: pyrsprof's child, its exit is waited for) that
 * exited: a zombie is gone for the profile (its parent may not reap it before long). */
static void check_exits(struct prs_sampler *s)
{
	for (size_t i = 1; i < s->ntargets; i++) {
		struct prs_target *tg = s->targets[i];
		char st;

		if (tg->exited || !tg->preload)
			continue;
		st = prs_task_state(tg->pid, tg->pid);
		if (st == 0 || st == 'Z' || st == 'X')
			prs_preload_gone(s, tg);
	}
}

void prs_preload_tree_accept(struct prs_sampler *s, struct prs_preload_tree *t)
{
	for (int i = 0; t && i < MAX_PER_POLL && receive_one(s, t); i++)
		;
}

/*
 * Every target is gone: true while a ring is still due and the grace lasts. A parent that forks
 * and exits at once (orphans) can exit before its child's fork handler has announced the child's
 * ring; its agent counted the fork before it (prs_ring_hdr forks), so the ring is known to come.
 */
static bool ring_due(struct prs_sampler *s, struct prs_preload_tree *t, uint64_t now_ns)
{
	uint64_t due = 0;

	if (!prs_session_all_exited(s)) {
		t->all_gone_since = 0;
		return false;
	}
	if (!t->all_gone_since)
		t->all_gone_since = now_ns;
	for (size_t i = 0; i < s->ntargets; i++)
		due += prs_preload_children_due(s->targets[i]);
	if (!due || now_ns - t->all_gone_since >= GRACE_NS)
		return false;
	prs_session_wait_signal(s, GRACE_POLL_NS); /* (the loop would spin: nothing to tick) */
	return true;
}

bool prs_preload_tree_poll(struct prs_sampler *s, struct prs_preload_tree *t, uint64_t now_ns)
{
	if (!t)
		return false;
	prs_preload_tree_accept(s, t);
	if (now_ns - t->last_exit_check >= EXIT_CHECK_NS) {
		t->last_exit_check = now_ns;
		check_exits(s);
	}
	return ring_due(s, t, now_ns);
}
