/* SPDX-License-Identifier: MIT */
/*
 * What each per-thread perf event of the classifier's collection costs the thread it is opened
 * on, measured within one process (tests/bench/bench_classify.py prints it; `make bench` runs it
 * alone): the same load falls on the phases with the event and without it, which a comparison of
 * two runs of pyrsprof cannot promise on a busy machine.
 *
 *     kcost [-t HZ] [SECONDS_PER_PART [PART...]]   (root: SCHED_FIFO; default 4 s, every part)
 *
 * The main thread computes under SCHED_FIFO 10, pinned to one CPU, in 40 ms phases; every other
 * phase has the part's events opened on it (perf_event_open before the phase's clock starts,
 * closed after it stops: a disabled event would still be scheduled at each switch). A helper
 * thread, pinned to the same CPU at SCHED_FIFO 20, wakes every 10 ms as pyrsprof's 100 Hz tick
 * does (-t HZ: at HZ, to magnify the cost of a switch until it can be resolved) and empties the rings (data_tail = data_head), so the main thread is switched out and in
 * twice a tick, as a ptrace stop does: the events' switch cost is in the measure. The helper exists
 * before any event is opened (an inherited event's clone would let the kernel swap contexts at a
 * switch between the two threads instead of scheduling the events). The cost of a phase with the
 * events is its work per second of the process's CPU time (both threads, and the interrupts and
 * switches charged to them; not the time other programs or the real-time throttling take)
 * against the mean of its two neighbours without; printed as the median with its 95 %
 * confidence interval (order statistics) and the quartiles, in % of the thread's time.
 *
 * Parts (the attributes are the sampler's own where they are exported):
 *   kstack       the kernel-stack event at its full rate for 100 Hz (prs_kstack_attr, kstack.c)
 *   kstack-idle  the same with a 10 s period: the event's switches, no sample in a phase
 *   kstack-fast  the same at 4 kHz: 20 times the samples, to resolve the cost of one
 *   kstack-1000  the same at its full rate for 1000 Hz (capped: kstack_rate-internal.h)
 *   kstack-user  the kernel-stack event of ptrace mode, at its full rate for 100 Hz: with the user
 *                registers and an 8 KiB copy of the user stack (prs_kstack_attr's user_stacks)
 *   kstack-user-fast  the same at 4 kHz (against kstack-fast: the cost of the stack copy)
 *   kstack-bare  a cpu-clock event at 4 kHz recording the IP alone: the timer interrupt's
 *                part of a sample's cost (the rest is the callchain and the user registers)
 *   switch       the switch records' event (prs_switches_attr, a 16 KiB ring: switches.c)
 *   counter      the inherited task-clock counter (counters_perf.c)
 *   all          kstack + switch + counter
 */
#include <errno.h>
#include <linux/perf_event.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "sample/kstack-internal.h"
#include "sample/kstack_rate-internal.h"
#include "sample/switches-internal.h"

#define PHASE_NS 40000000ll
#define FAST_NS 250000ull
#define MAX_FDS 4

struct ev {
	int fd;
	void *ring;
	size_t len;
};

/* The rings the helper empties: set by the main thread only while the helper sleeps (both run
 * on one CPU, the helper at the higher priority). */
static struct ev *volatile live;
static volatile int nlive;
static volatile uint64_t drained_samples;
static int cpu;
static long tick_ns = 10000000;
static volatile int ticking; /* the helper runs, at its priority on the same CPU */

static int64_t now_ns(clockid_t c)
{
	struct timespec t;

	clock_gettime(c, &t);
	return (int64_t)t.tv_sec * 1000000000ll + t.tv_nsec;
}

static void drain(struct ev *e)
{
	struct perf_event_mmap_page *mp = e->ring;
	uint64_t head = __atomic_load_n(&mp->data_head, __ATOMIC_ACQUIRE), tail = mp->data_tail;
	const uint8_t *data = (const uint8_t *)e->ring + mp->data_offset;

	while (tail < head) {
		const struct perf_event_header *h = (const void *)(data + (tail & (mp->data_size - 1)));

		if (h->size < sizeof(*h))
			break;
		drained_samples += h->type == PERF_RECORD_SAMPLE;
		tail += h->size;
	}
	__atomic_store_n(&mp->data_tail, head, __ATOMIC_RELEASE);
}

static int pin_fifo(int prio)
{
	struct sched_param sp = { .sched_priority = prio };
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set) != 0)
		return -errno;
	return sched_setscheduler(0, SCHED_FIFO, &sp) != 0 ? -errno : 0;
}

static void *tick(void *arg)
{
	struct timespec t;

	(void)arg;
	if (pin_fifo(20) != 0)
		return NULL;
	ticking = 1;
	clock_gettime(CLOCK_MONOTONIC, &t);
	for (;;) {
		t.tv_nsec += tick_ns;
		if (t.tv_nsec >= 1000000000) {
			t.tv_nsec -= 1000000000;
			t.tv_sec++;
		}
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL);
		for (int i = 0; i < nlive; i++)
			if (live[i].ring)
				drain(&live[i]);
	}
	return NULL;
}

static int open_attr(struct perf_event_attr *a, int pages, struct ev *e)
{
	long page = sysconf(_SC_PAGESIZE);

	e->ring = NULL;
	e->fd = (int)syscall(SYS_perf_event_open, a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
	if (e->fd < 0)
		return -errno;
	if (pages) {
		e->len = (size_t)page * (size_t)(1 + pages);
		e->ring = mmap(NULL, e->len, PROT_READ | PROT_WRITE, MAP_SHARED, e->fd, 0);
		if (e->ring == MAP_FAILED) {
			e->ring = NULL;
			return -errno;
		}
	}
	return 0;
}

static int open_kstack(uint64_t period_ns, struct ev *e)
{
	struct perf_event_attr a;

	prs_kstack_attr(&a, period_ns, false);
	return open_attr(&a, 8, e);
}

/* ptrace mode's event: with the user registers and stack (pages: its ring, room for a tick) */
static int open_kstack_user(uint64_t period_ns, int pages, struct ev *e)
{
	struct perf_event_attr a;

	prs_kstack_attr(&a, period_ns, true);
	return open_attr(&a, pages, e);
}

static int open_bare(uint64_t period_ns, struct ev *e)
{
	struct perf_event_attr a;

	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.type = PERF_TYPE_SOFTWARE;
	a.config = PERF_COUNT_SW_CPU_CLOCK;
	a.sample_period = period_ns;
	a.sample_type = PERF_SAMPLE_IP;
	a.exclude_hv = 1;
	return open_attr(&a, 8, e);
}

static int open_switch(struct ev *e)
{
	struct perf_event_attr a;

	prs_switches_attr(&a);
	return open_attr(&a, 4, e);
}

static int open_counter(struct ev *e)
{
	struct perf_event_attr a;

	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.type = PERF_TYPE_SOFTWARE;
	a.config = PERF_COUNT_SW_TASK_CLOCK;
	a.read_format = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING;
	a.inherit = 1;
	a.exclude_hv = 1;
	return open_attr(&a, 0, e);
}

/* Opens a part's events into e; their number, or a negative errno. */
static int open_part(const char *part, struct ev *e)
{
	uint64_t full = prs_krate_full_ns(10000000);
	int rc = -EINVAL, n = 0;

	if (!strcmp(part, "kstack"))
		rc = open_kstack(full, &e[n++]);
	else if (!strcmp(part, "kstack-idle"))
		rc = open_kstack(10000000000ull, &e[n++]);
	else if (!strcmp(part, "kstack-fast"))
		rc = open_kstack(FAST_NS, &e[n++]);
	else if (!strcmp(part, "kstack-1000"))
		rc = open_kstack(prs_krate_full_ns(1000000), &e[n++]);
	else if (!strcmp(part, "kstack-user"))
		rc = open_kstack_user(full, 16, &e[n++]);
	else if (!strcmp(part, "kstack-user-fast"))
		rc = open_kstack_user(FAST_NS, 512, &e[n++]);
	else if (!strcmp(part, "kstack-bare"))
		rc = open_bare(FAST_NS, &e[n++]);
	else if (!strcmp(part, "switch"))
		rc = open_switch(&e[n++]);
	else if (!strcmp(part, "counter"))
		rc = open_counter(&e[n++]);
	else if (!strcmp(part, "all")) {
		rc = open_kstack(full, &e[n++]);
		if (!rc)
			rc = open_switch(&e[n++]);
		if (!rc)
			rc = open_counter(&e[n++]);
	}
	return rc < 0 ? rc : n;
}

static void close_part(struct ev *e, int n)
{
	for (int i = 0; i < n; i++) {
		if (e[i].ring)
			munmap(e[i].ring, e[i].len);
		if (e[i].fd >= 0)
			close(e[i].fd);
	}
}

__attribute__((noinline)) static uint64_t work(uint64_t x)
{
	for (int i = 0; i < 1000; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
	}
	return x;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* One part: cost per on-phase in %, into cost (m of them); 0 or a negative errno. */
static int measure(const char *part, double secs, double *cost, int *m, double *samples_per_s,
		   uint64_t *x)
{
	int nph = (int)(secs * 1e9 / PHASE_NS) | 1;
	double *rate = calloc((size_t)nph, sizeof(*rate)), on_s = 0;
	uint64_t s0 = drained_samples;
	struct ev e[MAX_FDS];

	if (!rate)
		return -ENOMEM;
	*m = 0;
	for (int p = 0; p < nph; p++) {
		int n = 0;
		int64_t t0, c0, t;
		long units = 0;

		if (p % 2) {
			n = open_part(part, e);
			if (n < 0) {
				free(rate);
				return n;
			}
			live = e;
			nlive = n;
		}
		t0 = now_ns(CLOCK_MONOTONIC);
		c0 = now_ns(CLOCK_PROCESS_CPUTIME_ID);
		do {
			*x = work(*x);
			units++;
		} while ((t = now_ns(CLOCK_MONOTONIC)) < t0 + PHASE_NS);
		rate[p] = (double)units / (double)(now_ns(CLOCK_PROCESS_CPUTIME_ID) - c0);
		if (p % 2) {
			nlive = 0;
			live = NULL;
			close_part(e, n);
			on_s += (double)(t - t0) / 1e9;
		}
	}
	for (int p = 1; p + 1 < nph; p += 2)
		cost[(*m)++] = 100.0 * (1 - rate[p] / ((rate[p - 1] + rate[p + 1]) / 2));
	*samples_per_s = on_s > 0 ? (double)(drained_samples - s0) / on_s : 0;
	free(rate);
	return 0;
}

int main(int argc, char **argv)
{
	static const char *all[] = { "kstack", "kstack-fast", "kstack-1000", "kstack-user",
				     "kstack-user-fast", "kstack-bare", "kstack-idle", "switch",
				     "counter", "all" };
	double secs, *cost;
	const char **parts;
	int nparts, rc;
	pthread_t th;
	uint64_t x = 1;

	if (argc > 2 && !strcmp(argv[1], "-t")) {
		tick_ns = 1000000000l / (atol(argv[2]) > 0 ? atol(argv[2]) : 100);
		argc -= 2;
		argv += 2;
	}
	secs = argc > 1 ? atof(argv[1]) : 4;
	parts = argc > 2 ? (const char **)argv + 2 : all;
	nparts = argc > 2 ? argc - 2 : (int)(sizeof(all) / sizeof(all[0]));
	cost = calloc((size_t)(secs * 1e9 / PHASE_NS) + 2, sizeof(*cost));
	if (!cost || secs <= 0)
		return 1;
	cpu = sched_getcpu() < 0 ? 0 : sched_getcpu();
	if ((rc = pin_fifo(10)) != 0) {
		printf("kcost: skipped: SCHED_FIFO refused (%s): run as root\n", strerror(-rc));
		return 0;
	}
	if (pthread_create(&th, NULL, tick, NULL) != 0)
		return 1;
	usleep(20000);
	if (!ticking) {
		printf("kcost: skipped: the helper thread could not run at SCHED_FIFO 20 on CPU %d\n", cpu);
		return 0;
	}
	printf("per-thread events' cost within one process (tests/bench/kcost.c): 40 ms phases with "
	       "and without, a %ld Hz switch-out as pyrsprof's stop, CPU %d, %.0f s a part\n",
	       1000000000l / tick_ns, cpu, secs);
	printf("%-12s %7s  %16s  %16s %6s %10s %10s\n", "part", "med %", "ci95 of med", "[q1, q3]",
	       "pairs", "samples/s", "us/sample");
	for (int i = 0; i < nparts; i++) {
		double sps;
		char per[32];
		int m, k;

		rc = measure(parts[i], secs, cost, &m, &sps, &x);
		if (rc < 0) {
			printf("%-12s %s\n", parts[i], rc == -EINVAL ? "unknown part" : strerror(-rc));
			continue;
		}
		qsort(cost, (size_t)m, sizeof(*cost), cmp_double);
		/* the median's 95 % interval: the order statistics n/2 -+ 0.98 sqrt(n) */
		k = (int)(m / 2.0 - 0.98 * sqrt(m));
		if (k < 0)
			k = 0;
		if (sps > 10)
			snprintf(per, sizeof(per), "%.1f", cost[m / 2] / 100 / sps * 1e6);
		else
			snprintf(per, sizeof(per), "-");
		printf("%-12s %+7.2f  [%+5.2f, %+5.2f]  [%+5.2f, %+5.2f] %6d %10.0f %10s\n", parts[i],
		       cost[m / 2], cost[k], cost[m - 1 - k], cost[m / 4], cost[3 * m / 4], m, sps, per);
	}
	printf("(%lx)\n", (unsigned long)(x & 1));
	return 0;
}
