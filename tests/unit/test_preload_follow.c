/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of --mode preload --subprocesses' pure pieces: the configuration the agents find in
 * their environment (src/agent/follow.h: written by pyrsprof, parsed by each agent; anything
 * malformed refused), the check pyrsprof makes of a ring a process announces
 * (prs_ring_check: its size, shape and owner), and a ring made and announced by the agent's
 * code (src/agent/follow.c) received on a socket like pyrsprof's, with the sender's pid from the
 * kernel (SO_PEERCRED), after the sender has exited; the wait of a followed process at its exit
 * for its samples to be read (prs_follow_await_reader), and the thinning of a ring pyrsprof
 * reads late (prs_ring_thin_skip).
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/follow-agent.h"
#include "sample/preload-tree-internal.h"

#include "util/banned.h"

Test(preload_follow, format_then_parse)
{
	struct prs_follow_cfg in = { "pyrsprof-12-00ff", 1000000, 128, 65536, 1 }, out;
	char buf[128];

	cr_assert(prs_follow_format(buf, sizeof(buf), &in));
	cr_assert_str_eq(buf, "pyrsprof-12-00ff,1000000,128,65536,1");
	memset(&out, 0x55, sizeof(out));
	cr_assert(prs_follow_parse(buf, &out));
	cr_assert_str_eq(out.name, in.name);
	cr_assert_eq(out.period_ns, in.period_ns);
	cr_assert_eq(out.nslots, in.nslots);
	cr_assert_eq(out.stack_cap, in.stack_cap);
	cr_assert_eq(out.clock, in.clock);
	cr_assert_not(prs_follow_format(buf, 10, &in), "a value that does not fit is refused");
}

Test(preload_follow, malformed_values_refused)
{
	static const char *bad[] = {
		"", ",1,1,1,0", "n", "n,", "n,1,1,1", "n,1,1,1,0,", "n,1,1,1,2", "n,0,1,1,0",
		"n,1,0,1,0", "n,1,4097,1,0", "n,1,1,1048577,0", "n,1000000000001,1,1,0",
		"n,99999999999999999999999,1,1,0", "n,-1,1,1,0", "n,1 ,1,1,0", "n/x,1,1,1,0",
		"n x,1,1,1,0", "n\n,1,1,1,0",
		"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa,1,1,1,0",
	};
	struct prs_follow_cfg c;

	cr_assert_not(prs_follow_parse(NULL, &c));
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert_not(prs_follow_parse(bad[i], &c), "accepted '%s'", bad[i]);
	/* the longest name, and the bounds themselves, pass */
	cr_assert(prs_follow_parse("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa,"
				   "1000000000000,4096,1048576,1", &c));
	cr_assert_eq(strlen(c.name), PRS_FOLLOW_NAME_MAX);
}

/* A ring header as the agent fills it, in plain memory. */
static struct prs_ring_hdr *header(uint32_t nslots, uint32_t cap, pid_t pid)
{
	struct prs_ring_hdr *h = calloc(1, sizeof(*h));

	cr_assert_not_null(h);
	h->magic = PRS_RING_MAGIC;
	h->version = PRS_RING_VERSION;
	h->nslots = nslots;
	h->stack_cap = cap;
	h->slot_size = prs_ring_slot_size(cap);
	h->slots_off = prs_ring_slots_off();
	h->target_pid = pid;
	return h;
}

Test(preload_follow, ring_check_shape_and_owner)
{
	struct prs_ring_hdr *h = header(128, 4096, 77);
	uint64_t size = prs_ring_size(128, 4096);

	cr_assert(prs_ring_check(h, size, 128, 4096, 77));
	cr_assert_not(prs_ring_check(h, size, 128, 4096, 78), "another process's ring");
	cr_assert_not(prs_ring_check(h, size - 64, 128, 4096, 77), "a short mapping");
	cr_assert_not(prs_ring_check(h, size, 64, 4096, 77), "not the slots pyrsprof asked for");
	h->slot_size += 64;
	cr_assert_not(prs_ring_check(h, size, 128, 4096, 77), "slots that overrun the mapping");
	h->slot_size -= 64;
	h->version = PRS_RING_VERSION - 1;
	cr_assert_not(prs_ring_check(h, size, 128, 4096, 77), "an agent of another version");
	h->version = PRS_RING_VERSION;
	h->magic ^= 1;
	cr_assert_not(prs_ring_check(h, size, 128, 4096, 77), "not a ring");
	h->magic ^= 1;
	h->target_pid = 0;
	cr_assert_not(prs_ring_check(h, size, 128, 4096, 0), "no owner");
	free(h);
}

/* A socket like pyrsprof's (preload_follow.c): abstract name, seqpacket, listening. */
static int listen_on(const char *name)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	cr_assert_geq(s, 0);
	memcpy(a.sun_path + 1, name, strlen(name));
	cr_assert_eq(bind(s, (struct sockaddr *)&a,
			  (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(name))), 0);
	cr_assert_eq(listen(s, 16), 0);
	return s;
}

Test(preload_follow, child_ring_announced_with_its_pid)
{
	struct prs_follow_cfg cfg = { .period_ns = 1000000, .nslots = 8, .stack_cap = 256 };
	char buf[CMSG_SPACE(sizeof(int))];
	struct prs_follow_msg msg;
	struct iovec iov = { &msg, sizeof(msg) };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = buf,
			    .msg_controllen = sizeof(buf) };
	struct ucred who = { 0 };
	socklen_t len = sizeof(who);
	struct prs_ring_hdr *h;
	int s, c, fd = -1, status;
	pid_t child;

	snprintf(cfg.name, sizeof(cfg.name), "pyrsprof-unit-%d", (int)getpid());
	s = listen_on(cfg.name);
	child = fork();
	if (child == 0) {
		size_t size = 0;

		_exit(prs_follow_make_ring(&cfg, getpid(), getppid(), true, &size) &&
		      size == prs_ring_size(8, 256) ? 0 : 1);
	}
	cr_assert_eq(waitpid(child, &status, 0), child);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* the child has exited: its connection waits in the backlog with its message */
	c = accept4(s, NULL, NULL, SOCK_CLOEXEC);
	cr_assert_geq(c, 0);
	cr_assert_eq(getsockopt(c, SOL_SOCKET, SO_PEERCRED, &who, &len), 0);
	cr_assert_eq(recvmsg(c, &m, MSG_DONTWAIT), (ssize_t)sizeof(msg));
	for (struct cmsghdr *k = CMSG_FIRSTHDR(&m); k; k = CMSG_NXTHDR(&m, k))
		if (k->cmsg_type == SCM_RIGHTS)
			memcpy(&fd, CMSG_DATA(k), sizeof(fd));
	close(c);
	cr_assert_eq(msg.magic, PRS_FOLLOW_MAGIC);
	cr_assert_eq(msg.ppid, getpid());
	cr_assert_eq(msg.forked, 1u);
	cr_assert_eq(who.pid, child, "the kernel's word on the sender");
	cr_assert_geq(fd, 0);
	h = mmap(NULL, (size_t)prs_ring_size(8, 256), PROT_READ, MAP_SHARED, fd, 0);
	cr_assert_neq(h, MAP_FAILED);
	cr_assert(prs_ring_check(h, prs_ring_size(8, 256), 8, 256, child));
	cr_assert_eq(h->period_ns, 1000000u);
	cr_assert_eq(h->profiler_pid, getpid(), "the listener, for the exit wait");
	munmap(h, (size_t)prs_ring_size(8, 256));
	close(fd);
	/* nobody listening (pyrsprof gone): no ring, the process runs unprofiled */
	close(s);
	{
		size_t size = 0;

		cr_assert_null(prs_follow_make_ring(&cfg, getpid(), getppid(), false, &size));
	}
}

/* ---- the exit wait (prs_follow_await_reader) ---- */

#define WAIT_SLOTS 8
#define WAIT_CAP 64

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* A ring of WAIT_SLOTS whose slots 0-2 hold samples of tickets 0-2, and slot 3 one of ticket 9
 * (written by another thread after the exit began: not waited for); the ticket is at 5. */
static struct prs_ring_hdr *ring_with_unread(pid_t reader)
{
	size_t size = (size_t)prs_ring_size(WAIT_SLOTS, WAIT_CAP);
	struct prs_ring_hdr *h = mmap(NULL, size, PROT_READ | PROT_WRITE,
				      MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	cr_assert_neq(h, MAP_FAILED);
	h->nslots = WAIT_SLOTS;
	h->stack_cap = WAIT_CAP;
	h->slot_size = prs_ring_slot_size(WAIT_CAP);
	h->slots_off = prs_ring_slots_off();
	h->profiler_pid = reader;
	h->ticket = 5;
	for (uint32_t i = 0; i < 4; i++) {
		prs_ring_slot(h, i)->seq = i < 3 ? i : 9;
		prs_ring_publish(h, prs_ring_slot(h, i));
	}
	return h;
}

static void *read_late(void *arg)
{
	struct prs_ring_hdr *h = arg;
	struct timespec nap = { 0, 150 * 1000000 };

	nanosleep(&nap, NULL);
	for (uint32_t i = 0; i < 3; i++)
		prs_ring_release(prs_ring_slot(h, i));
	return NULL;
}

Test(preload_follow, exit_waits_until_its_samples_are_read)
{
	struct prs_ring_hdr *h = ring_with_unread(getpid());
	pthread_t reader;
	uint64_t t0 = mono_ms(), took;

	cr_assert_eq(pthread_create(&reader, NULL, read_late, h), 0);
	prs_follow_await_reader(h, WAIT_SLOTS);
	took = mono_ms() - t0;
	pthread_join(reader, NULL);
	cr_assert_geq(took, 150, "returned after %llu ms, before the reader", (unsigned long long)took);
	cr_assert_lt(took, 1500, "waited %llu ms for a slot written after the exit began",
		     (unsigned long long)took);
	cr_assert_eq(h->exit_unread, 0u);
	cr_assert_geq(h->exit_wait_ns, 150000000u);
	cr_assert_neq(h->exit_ns, 0u, "pyrsprof leaves the time from here out of the wall view");
	munmap(h, (size_t)prs_ring_size(WAIT_SLOTS, WAIT_CAP));
}

Test(preload_follow, exit_wait_ends_when_pyrsprof_is_gone_or_stopped)
{
	struct prs_ring_hdr *h;
	pid_t gone = fork();
	uint64_t t0;

	if (gone == 0)
		_exit(0);
	cr_assert_eq(waitpid(gone, NULL, 0), gone);
	/* killed (kill -9 of pyrsprof): nobody reads the ring any more */
	h = ring_with_unread(gone);
	t0 = mono_ms();
	prs_follow_await_reader(h, WAIT_SLOTS);
	cr_assert_lt(mono_ms() - t0, 500);
	cr_assert_eq(h->exit_unread, 3u, "the 3 samples of before the exit, said unread");
	munmap(h, (size_t)prs_ring_size(WAIT_SLOTS, WAIT_CAP));
	/* told to stop: its end drained every ring it will read */
	h = ring_with_unread(getpid());
	h->stop = 1;
	t0 = mono_ms();
	prs_follow_await_reader(h, WAIT_SLOTS);
	cr_assert_lt(mono_ms() - t0, 500);
	cr_assert_eq(h->exit_unread, 3u);
	munmap(h, (size_t)prs_ring_size(WAIT_SLOTS, WAIT_CAP));
}

/* ---- thinning (prs_ring_thin_skip) ---- */

/* A producer of one sample a period into a ring of n slots nobody reads: the periods until it
 * is full, the weights of the samples kept in w (n of them). */
static uint32_t fill_unread(uint32_t n, uint32_t *w)
{
	uint32_t periods = 0, since = 0, written = 0;

	while (written < n) {
		periods++;
		if (prs_ring_thin_skip(written, 0, n, &since, 1))
			continue;
		w[written++] = since;
		since = 0;
	}
	return periods;
}

Test(preload_follow, a_ring_read_late_is_thinned_not_cut)
{
	uint32_t w[128], periods = fill_unread(128, w), sum = 0;

	for (uint32_t i = 0; i < 128; i++) {
		sum += w[i];
		if (i < 64)
			cr_assert_eq(w[i], 1u, "sample %u: every period while half the ring is free", i);
		else
			cr_assert_geq(w[i], w[i - 1], "the weight grows as the ring fills");
		cr_assert_leq(w[i], PRS_RING_THIN_MAX);
	}
	cr_assert_eq(sum, periods, "every period is in a sample's weight");
	cr_assert_eq(periods, 512u, "4 periods a slot: the run of a process read late, not its start");
}

Test(preload_follow, a_ring_read_in_time_is_not_thinned)
{
	uint32_t since = 0;
	uint64_t written = 0, read = 0;

	for (int p = 0; p < 10000; p++) {
		cr_assert_not(prs_ring_thin_skip(written, read, 128, &since, 1), "period %d", p);
		cr_assert_eq(since, 1u);
		since = 0;
		written++;
		if (written - read >= 63) /* pyrsprof reads before half the ring is used */
			read = written;
	}
	/* a POSIX timer's overruns are periods too */
	since = 0;
	cr_assert_not(prs_ring_thin_skip(0, 0, 128, &since, 4));
	cr_assert_eq(since, 4u);
}
