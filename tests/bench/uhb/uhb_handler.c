/* SPDX-License-Identifier: MIT */
/* The benchmark's handler: see uhb.h. */
#define UNW_LOCAL_ONLY
#include <errno.h>
#include <fcntl.h>
#include <libunwind.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "uhb.h"
#include "util/banned.h"

#define TLS __thread __attribute__((tls_model("initial-exec")))

struct uhb_stats uhb_stats;
TLS volatile int uhb_in_op;

static struct {
	int mode;
	unsigned cap;
	atomic_uint next;      /* next record index */
	atomic_ulong arena_at; /* bytes of the arena used */
	atomic_int stop;       /* set by uhb_write: the handler keeps nothing more */
	struct uhb_rec *recs;
	uint8_t *arena;
	size_t arena_cap;
} g;

static TLS struct {
	uint64_t lo, hi; /* the thread's stack */
	uint8_t *buf;    /* UHB_STACK_CAP bytes: the copy, as the agent's ring slot */
	timer_t timer;
	int armed;
} me;

/* gregs index for each DWARF register number (struct prs_regs order). */
static const int dwarf_greg[UHB_NREGS] = {
	REG_RAX, REG_RDX, REG_RCX, REG_RBX, REG_RSI, REG_RDI, REG_RBP, REG_RSP, REG_R8,
	REG_R9,  REG_R10, REG_R11, REG_R12, REG_R13, REG_R14, REG_R15, REG_RIP,
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* (a) what the agent does: registers, then the stack from SP within the thread's stack. */
static uint32_t copy_sample(const ucontext_t *uc, uint64_t *regs)
{
	uint64_t sp;
	size_t n = 0;

	for (int i = 0; i < UHB_NREGS; i++)
		regs[i] = (uint64_t)uc->uc_mcontext.gregs[dwarf_greg[i]];
	sp = regs[7];
	if (me.buf && sp >= me.lo && sp < me.hi) {
		n = me.hi - sp < UHB_STACK_CAP ? (size_t)(me.hi - sp) : UHB_STACK_CAP;
		memcpy(me.buf, (const void *)(uintptr_t)sp, n);
	}
	return (uint32_t)n;
}

/* (b) libunwind's local unwinder from the signal frame. Returns the frames, or -1. */
static int unw_sample(ucontext_t *uc, uint64_t *pcs, int *end)
{
	unw_cursor_t c;
	int n = 0, r;

	if (unw_init_local2(&c, (unw_context_t *)uc, UNW_INIT_SIGNAL_FRAME) < 0)
		return -1;
	do {
		unw_word_t ip = 0;

		unw_get_reg(&c, UNW_REG_IP, &ip);
		pcs[n++] = ip;
		r = n < UHB_MAXD ? unw_step(&c) : 0;
	} while (r > 0);
	*end = r;
	return n;
}

static void keep(const struct uhb_rec *r)
{
	unsigned i;
	uint64_t off;

	if (atomic_load(&g.stop) || !g.cap)
		return;
	i = atomic_fetch_add(&g.next, 1);
	if (i >= g.cap)
		return;
	off = atomic_fetch_add(&g.arena_at, r->stack_len);
	g.recs[i] = *r;
	if (off + r->stack_len <= g.arena_cap) {
		memcpy(g.arena + off, me.buf, r->stack_len);
		g.recs[i].stack_off = off;
	} else {
		g.recs[i].stack_len = 0;
	}
}

static void handler(int sig, siginfo_t *si, void *ctx)
{
	static TLS struct uhb_rec r; /* 1.2 KiB: not on the interrupted stack */
	int saved = errno;
	unsigned long k;
	uint64_t t0, t1, t2;

	(void)sig, (void)si;
	atomic_fetch_add(&uhb_stats.busy, 1);
	k = atomic_fetch_add(&uhb_stats.samples, 1);
	if (uhb_in_op)
		atomic_fetch_add(&uhb_stats.in_op, 1);
	memset(&r, 0, offsetof(struct uhb_rec, upcs));
	r.fs_base = (uint64_t)pthread_self();
	for (int pass = 0; pass < 2; pass++) {
		int which = (int)((k + (unsigned long)pass) & 1) ? UHB_UNW : UHB_COPY;

		if (!(g.mode & which))
			continue;
		t0 = now_ns();
		if (which == UHB_COPY)
			r.stack_len = copy_sample(ctx, r.regs);
		else
			r.unw_n = unw_sample(ctx, r.upcs, &r.unw_end);
		t1 = now_ns();
		t2 = t1 - t0;
		if (which == UHB_COPY) {
			r.copy_ns = t2;
		} else {
			r.unw_ns = t2;
			if (r.unw_n < 0 || r.unw_end < 0)
				atomic_fetch_add(&uhb_stats.unw_fail, 1);
			else
				atomic_fetch_add(&uhb_stats.frames, (unsigned long)r.unw_n);
		}
	}
	if ((g.mode & UHB_COPY) && (g.mode & UHB_UNW))
		keep(&r);
	atomic_fetch_sub(&uhb_stats.busy, 1);
	errno = saved;
}

int uhb_setup(int mode, unsigned cap)
{
	struct sigaction sa;

	g.mode = mode;
	g.cap = cap;
	if (cap) {
		g.arena_cap = (size_t)cap * 16 * 1024;
		g.recs = mmap(NULL, cap * sizeof(*g.recs), PROT_READ | PROT_WRITE,
			      MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
		g.arena = mmap(NULL, g.arena_cap, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
		if (g.recs == MAP_FAILED || g.arena == MAP_FAILED)
			return -ENOMEM;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = handler;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	return sigaction(SIGRTMIN + 8, &sa, NULL) ? -errno : 0;
}

int uhb_unw_cache(const char *policy)
{
	unw_caching_policy_t p;

	if (strcmp(policy, "global") == 0)
		p = UNW_CACHE_GLOBAL;
	else if (strcmp(policy, "thread") == 0)
		p = UNW_CACHE_PER_THREAD;
	else if (strcmp(policy, "none") == 0)
		p = UNW_CACHE_NONE;
	else
		return -EINVAL;
	return unw_set_caching_policy(unw_local_addr_space, p) ? -EINVAL : 0;
}

int uhb_arm(unsigned hz)
{
	pthread_attr_t a;
	void *lo;
	size_t sz;
	struct sigevent ev;
	struct itimerspec it;

	if (pthread_getattr_np(pthread_self(), &a) == 0) {
		if (pthread_attr_getstack(&a, &lo, &sz) == 0) {
			me.lo = (uint64_t)(uintptr_t)lo;
			me.hi = me.lo + sz;
		}
		pthread_attr_destroy(&a);
	}
	me.buf = mmap(NULL, UHB_STACK_CAP, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (me.buf == MAP_FAILED)
		return -ENOMEM;
	memset(&ev, 0, sizeof(ev));
	ev.sigev_notify = SIGEV_THREAD_ID;
	ev.sigev_signo = SIGRTMIN + 8;
	ev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
	if (timer_create(CLOCK_THREAD_CPUTIME_ID, &ev, &me.timer))
		return -errno;
	memset(&it, 0, sizeof(it));
	it.it_interval.tv_nsec = 1000000000 / hz;
	it.it_value = it.it_interval;
	me.armed = 1;
	return timer_settime(me.timer, 0, &it, NULL) ? -errno : 0;
}

void uhb_disarm(void)
{
	if (me.armed)
		timer_delete(me.timer);
	me.armed = 0;
}

unsigned uhb_kept(void)
{
	unsigned n = atomic_load(&g.next);

	return n < g.cap ? n : g.cap;
}

static int write_all(int fd, const void *p, size_t n)
{
	const uint8_t *b = p;

	while (n) {
		ssize_t w = write(fd, b, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -EIO;
		b += w;
		n -= (size_t)w;
	}
	return 0;
}

int uhb_write(const char *path)
{
	char tmp[4096];
	struct uhb_file_hdr h;
	uint64_t used;
	int fd, rc;

	atomic_store(&g.stop, 1);
	while (atomic_load(&uhb_stats.busy))
		usleep(1000); /* a handler still filling its record */
	h.magic = UHB_MAGIC;
	h.count = uhb_kept();
	used = atomic_load(&g.arena_at);
	h.arena_len = used < g.arena_cap ? used : g.arena_cap;
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	rc = write_all(fd, &h, sizeof(h));
	if (!rc)
		rc = write_all(fd, g.recs, h.count * sizeof(*g.recs));
	if (!rc)
		rc = write_all(fd, g.arena, h.arena_len);
	close(fd);
	if (!rc && rename(tmp, path))
		rc = -errno;
	return rc;
}
