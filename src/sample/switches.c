/* SPDX-License-Identifier: MIT */
/*
 * Context switches per thread from perf_event_open switch records (switches-internal.h says what
 * and why): the ring parser, the per-thread events, and their SWITCH records.
 */
#include "sample/switches-internal.h"

#include <errno.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "pyrsprof/acct.h"
#include "util/banned.h"

#define RING_PAGES 4  /* data pages per thread (a power of 2): 16 KiB, 1024 switch records */
/* Threads with an event at once (a descriptor and a 20 KiB mapping each): a process with
 * thousands of threads cannot use up pyrsprof's descriptors (with the kept /proc files' 256 and
 * the kernel stacks' 256, 640 of a common soft limit of 1024: the symbolizer needs the rest at the
 * end); the threads beyond get none, and the sums are over the threads that had one. */
#define MAX_EVENTS 128

struct prs_switches {
	struct prs_profile *prof;
	int nevents;
	uint64_t opened; /* threads whose event was opened (prs_switches_opened) */
	bool on, closed;
};

struct prs_swthr {
	int fd;               /* -1: no event (refused, or one too many) */
	void *ring;           /* MAP_FAILED when none */
	size_t ring_len;
	struct prs_switch_state st;
};

/* ---- the parser ---- */

static void ring_copy(const uint8_t *data, uint64_t size, uint64_t off, void *dst, size_t len)
{
	uint64_t at = off & (size - 1);
	size_t first = len < size - at ? len : (size_t)(size - at);

	memcpy(dst, data + at, first);
	memcpy((uint8_t *)dst + first, data, len - first);
}

/* The interval from the pending OUT to an IN at t goes to the OUT's kind. */
static void switch_in(struct prs_switch_state *st, uint64_t t)
{
	uint64_t d = t > st->out_ns ? t - st->out_ns : 0;

	if (st->out == PRS_SWO_PREEMPT)
		st->c.preempt_ns += d;
	else if (st->out == PRS_SWO_VOLUNTARY)
		st->c.voluntary_ns += d;
	else if (st->out == PRS_SWO_STOP)
		st->c.stops_ns += d;
	st->out = PRS_SWO_NONE;
}

static void switch_out(struct prs_switch_state *st, uint16_t misc, uint64_t t, uint64_t stop_from,
		       uint64_t stop_to)
{
	if (misc & PERF_RECORD_MISC_SWITCH_OUT_PREEMPT) {
		st->out = PRS_SWO_PREEMPT;
		st->c.preempt++;
	} else if (stop_to && t >= stop_from && t <= stop_to && st->stop_from != stop_from) {
		/* the first OUT of the window; a thread resumed before the window's end may block
		 * again (a restarted sleep) within it: that OUT is its own */
		st->out = PRS_SWO_STOP;
		st->c.stops++;
		st->stop_from = stop_from;
	} else {
		st->out = PRS_SWO_VOLUNTARY;
		st->c.voluntary++;
	}
	st->out_ns = t;
}

/* A record's time: its sample_id's only field (PERF_SAMPLE_TIME), its last 8 bytes. */
static uint64_t record_time(const uint8_t *data, uint64_t size, uint64_t off, uint16_t len)
{
	uint64_t t;

	ring_copy(data, size, off + len - 8, &t, 8);
	return t;
}

uint64_t prs_switch_parse(const uint8_t *data, uint64_t size, uint64_t tail, uint64_t head,
			  uint64_t stop_from, uint64_t stop_to, struct prs_switch_state *st)
{
	while (tail < head) {
		struct perf_event_header h;
		uint64_t t, lost[2];

		if (head - tail < sizeof(h))
			break;
		ring_copy(data, size, tail, &h, sizeof(h));
		if (h.size < sizeof(h) || h.size > head - tail || h.size > size) {
			st->c.lost++; /* malformed: nothing after it can be trusted */
			st->out = PRS_SWO_NONE;
			return head;
		}
		if (h.type == PERF_RECORD_SWITCH && h.size >= sizeof(h) + 8) {
			t = record_time(data, size, tail, h.size);
			if (!st->c.first_ns)
				st->c.first_ns = t;
			st->c.last_ns = t;
			if (h.misc & PERF_RECORD_MISC_SWITCH_OUT)
				switch_out(st, h.misc, t, stop_from, stop_to);
			else if (st->out != PRS_SWO_NONE)
				switch_in(st, t);
		} else if (h.type == PERF_RECORD_LOST && h.size >= sizeof(h) + sizeof(lost)) {
			ring_copy(data, size, tail + sizeof(h), lost, sizeof(lost));
			st->c.lost += lost[1];
			st->out = PRS_SWO_NONE; /* its IN may be among the lost */
		}
		tail += h.size;
	}
	return tail;
}

/* ---- the events ---- */

void prs_switches_attr(struct perf_event_attr *a)
{
	memset(a, 0, sizeof(*a));
	a->size = sizeof(*a);
	a->type = PERF_TYPE_SOFTWARE;
	a->config = PERF_COUNT_SW_DUMMY;
	a->context_switch = 1;
	a->sample_id_all = 1;
	a->sample_type = PERF_SAMPLE_TIME;
	a->use_clockid = 1;
	a->clockid = CLOCK_MONOTONIC; /* the sampler's clock: its stop times compare */
	a->exclude_kernel = 1; /* allowed at perf_event_paranoid 2; the records need no kernel side */
	a->exclude_hv = 1;
}

static int open_event(pid_t tid)
{
	struct perf_event_attr a;

	prs_switches_attr(&a);
	return (int)syscall(SYS_perf_event_open, &a, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
}

static void note(struct prs_profile *prof, int e)
{
	struct prs_acct a;
	char why[200];

	if (e == EACCES || e == EPERM)
		snprintf(why, sizeof(why), "perf_event_open refused the switch records (%s): "
			 "preemption is measured by schedstat only", strerror(e));
	else
		snprintf(why, sizeof(why), "perf_event_open: %s: no switch records, preemption is "
			 "measured by schedstat only", strerror(e));
	prs_acct_note(&a, "switches", e, why);
	prs_acct_store(prof, &a);
}

struct prs_switches *prs_switches_new(struct prs_profile *prof)
{
	struct prs_switches *sw = calloc(1, sizeof(*sw));
	int fd;

	if (!sw)
		return NULL;
	sw->prof = prof;
	fd = open_event(0); /* refused here exactly when it would be for the target's threads */
	if (fd < 0) {
		note(prof, errno);
		return sw;
	}
	close(fd);
	sw->on = true;
	return sw;
}

bool prs_switches_on(const struct prs_switches *sw)
{
	return sw && sw->on;
}

uint64_t prs_switches_opened(const struct prs_switches *sw)
{
	return sw ? sw->opened : 0;
}

void prs_switches_close(struct prs_switches *sw)
{
	if (sw)
		sw->closed = true;
}

void prs_switches_free(struct prs_switches *sw)
{
	free(sw);
}

static struct prs_swthr *swthr_new(struct prs_switches *sw, pid_t tid)
{
	struct prs_swthr *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->ring = MAP_FAILED;
	t->fd = sw->nevents < MAX_EVENTS ? open_event(tid) : -1;
	if (t->fd < 0)
		return t; /* (a thread exiting, or one too many): no records for it */
	sw->nevents++;
	sw->opened++;
	t->ring_len = (size_t)sysconf(_SC_PAGESIZE) * (1 + RING_PAGES);
	t->ring = mmap(NULL, t->ring_len, PROT_READ | PROT_WRITE, MAP_SHARED, t->fd, 0);
	return t;
}

static void swthr_free(struct prs_switches *sw, struct prs_swthr *t)
{
	if (t->ring != MAP_FAILED)
		munmap(t->ring, t->ring_len);
	if (t->fd >= 0) {
		close(t->fd);
		sw->nevents--;
	}
	free(t);
}

static void drain(struct prs_swthr *t, uint64_t stop_from, uint64_t stop_to)
{
	struct perf_event_mmap_page *mp = t->ring;
	uint64_t head = __atomic_load_n(&mp->data_head, __ATOMIC_ACQUIRE);
	uint64_t off = mp->data_offset, size = mp->data_size;

	if (!off) { /* kernels before 4.1 */
		off = (uint64_t)sysconf(_SC_PAGESIZE);
		size = (uint64_t)RING_PAGES * off;
	}
	uint64_t tail = prs_switch_parse((const uint8_t *)t->ring + off, size, mp->data_tail, head,
					 stop_from, stop_to, &t->st);

	__atomic_store_n(&mp->data_tail, tail, __ATOMIC_RELEASE);
}

void prs_switches_read(struct prs_switches *sw, struct prs_swthr **st, pid_t tid,
		       uint64_t stop_from, uint64_t stop_to)
{
	if (!prs_switches_on(sw) || sw->closed)
		return;
	if (!*st)
		*st = swthr_new(sw, tid);
	if (*st && (*st)->ring != MAP_FAILED)
		drain(*st, stop_from, stop_to);
}

void prs_switches_done(struct prs_switches *sw, struct prs_swthr **st, pid_t tid, int phase)
{
	const struct prs_switch_counts *c;
	struct prs_acct a;

	if (!sw || !*st)
		return;
	if ((*st)->ring != MAP_FAILED && !sw->closed) {
		drain(*st, 0, 0);
		c = &(*st)->st.c;
		prs_acct_init(&a, PRS_ACCT_SWITCH, (enum prs_acct_phase)phase, tid);
		prs_acct_set(&a, PRS_SW_PREEMPT, c->preempt);
		prs_acct_set(&a, PRS_SW_PREEMPT_NS, c->preempt_ns);
		prs_acct_set(&a, PRS_SW_VOLUNTARY, c->voluntary);
		prs_acct_set(&a, PRS_SW_VOLUNTARY_NS, c->voluntary_ns);
		prs_acct_set(&a, PRS_SW_STOPS, c->stops);
		prs_acct_set(&a, PRS_SW_STOPS_NS, c->stops_ns);
		prs_acct_set(&a, PRS_SW_LOST, c->lost);
		if (c->first_ns) {
			prs_acct_set(&a, PRS_SW_FIRST_NS, c->first_ns);
			prs_acct_set(&a, PRS_SW_LAST_NS, c->last_ns);
		}
		prs_acct_store(sw->prof, &a); /* -ENOMEM: the thread lacks them, as without perf */
	}
	swthr_free(sw, *st);
	*st = NULL;
}
