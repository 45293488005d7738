/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the switch-record parser (src/sample/switches.c): recorded ring bytes of a real
 * perf_event_open ring (tests/fixtures/switches: capture.c made them, truth.txt holds what the
 * thread measured of itself), and constructed rings for what a recording rarely shows: a record
 * wrapping around the ring's end, a LOST record, the sampler's stop window, malformed sizes.
 */
#include <criterion/criterion.h>
#include <linux/perf_event.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sample/switches-internal.h"

#include "util/banned.h"

#define FIX "tests/fixtures/switches/"

static uint64_t truth(const char *key)
{
	FILE *f = fopen(FIX "truth.txt", "r");
	char k[64];
	unsigned long long v;

	cr_assert_not_null(f);
	while (fscanf(f, "%63s %llu", k, &v) == 2)
		if (strcmp(k, key) == 0) {
			fclose(f);
			return v;
		}
	fclose(f);
	cr_assert_fail("truth.txt has no %s", key);
	return 0;
}

Test(switches, recorded_ring_sleeps_and_preemptions)
{
	static uint8_t ring[16384]; /* a power of 2 above the recorded bytes: no wrap */
	struct prs_switch_state st = { 0 };
	FILE *f = fopen(FIX "ring.bin", "rb");
	size_t n;
	double waited;

	cr_assert_not_null(f);
	n = fread(ring, 1, sizeof(ring), f);
	fclose(f);
	cr_assert_eq(n, truth("bytes"));
	cr_assert_eq(prs_switch_parse(ring, sizeof(ring), 0, n, 0, 0, &st), n);
	/* the 20 nanosleeps are the only voluntary switch-outs; each OUT -> IN lies inside its
	 * call, so their sum is at most the sum measured around the calls, and close to it */
	cr_assert_eq(st.c.voluntary, 20);
	cr_assert_leq(st.c.voluntary_ns, truth("sleep_ns"));
	cr_assert_geq(st.c.voluntary_ns, truth("sleep_ns") - 20 * 200000ull, "%llu",
		      (unsigned long long)st.c.voluntary_ns);
	/* two spinners on one CPU: preempted, waiting for the CPU what the thread did not run */
	waited = (double)(truth("spin_wall_ns") - truth("spin_cpu_ns"));
	cr_assert_geq(st.c.preempt, 10);
	cr_assert(fabs((double)st.c.preempt_ns - waited) <= 0.05 * waited + 3e6,
		  "preempted wait %llu ns against %.0f ns measured", (unsigned long long)st.c.preempt_ns,
		  waited);
	cr_assert_eq(st.c.stops, 0);
	cr_assert_eq(st.c.lost, 0);
	cr_assert(st.c.first_ns > 0 && st.c.last_ns > st.c.first_ns);
}

/* A constructed ring of 64 bytes. */
struct cring {
	uint8_t b[64];
	uint64_t head;
};

static void put(struct cring *r, const void *p, size_t len)
{
	for (size_t i = 0; i < len; i++)
		r->b[(r->head + i) & 63] = ((const uint8_t *)p)[i];
	r->head += len;
}

static void sw(struct cring *r, uint16_t misc, uint64_t t)
{
	struct perf_event_header h = { PERF_RECORD_SWITCH, misc, 16 };

	put(r, &h, sizeof(h));
	put(r, &t, 8);
}

Test(switches, wraps_stops_and_kinds)
{
	struct cring r = { .head = 40 }; /* the second record straddles the end */
	struct prs_switch_state st = { 0 };
	uint64_t tail = 40;

	sw(&r, PERF_RECORD_MISC_SWITCH_OUT | PERF_RECORD_MISC_SWITCH_OUT_PREEMPT, 1000);
	sw(&r, 0, 1700); /* in: 700 ns waiting for a CPU */
	sw(&r, PERF_RECORD_MISC_SWITCH_OUT, 5000); /* inside the stop window [4900, 6000] */
	tail = prs_switch_parse(r.b, 64, tail, r.head, 4900, 6000, &st);
	cr_assert_eq(tail, r.head);
	cr_assert_eq(st.c.preempt, 1);
	cr_assert_eq(st.c.preempt_ns, 700);
	cr_assert_eq(st.c.stops, 1);
	cr_assert_eq(st.out, PRS_SWO_STOP); /* its IN comes with the next read */
	sw(&r, 0, 6100);
	sw(&r, PERF_RECORD_MISC_SWITCH_OUT, 5900); /* (clock order is not checked) */
	tail = prs_switch_parse(r.b, 64, tail, r.head, 4900, 6000, &st);
	/* the window's first OUT was its stop: a second OUT within it is the thread's own */
	cr_assert_eq(st.c.stops_ns, 1100);
	cr_assert_eq(st.c.stops, 1);
	cr_assert_eq(st.c.voluntary, 1);
	sw(&r, 0, 9900);
	tail = prs_switch_parse(r.b, 64, tail, r.head, 0, 0, &st);
	cr_assert_eq(st.c.voluntary_ns, 4000);
	cr_assert_eq(st.c.first_ns, 1000);
	cr_assert_eq(st.c.last_ns, 9900);
}

Test(switches, lost_records_end_the_pending_out)
{
	struct cring r = { .head = 0 };
	struct prs_switch_state st = { 0 };
	struct perf_event_header h = { PERF_RECORD_LOST, 0, 32 };
	uint64_t lost[3] = { 7, 42, 2000 };

	sw(&r, PERF_RECORD_MISC_SWITCH_OUT, 1000);
	put(&r, &h, sizeof(h));
	put(&r, lost, sizeof(lost));
	sw(&r, 0, 3000); /* an IN whose OUT may be among the lost: not counted */
	cr_assert_eq(prs_switch_parse(r.b, 64, 0, r.head, 0, 0, &st), r.head);
	cr_assert_eq(st.c.lost, 42);
	cr_assert_eq(st.c.voluntary, 1);
	cr_assert_eq(st.c.voluntary_ns, 0);
}

Test(switches, malformed_sizes_drop_the_rest)
{
	struct cring r = { .head = 0 };
	struct prs_switch_state st = { 0 };
	struct perf_event_header bad = { PERF_RECORD_SWITCH, 0, 0 };

	sw(&r, PERF_RECORD_MISC_SWITCH_OUT, 1000);
	put(&r, &bad, sizeof(bad));
	cr_assert_eq(prs_switch_parse(r.b, 64, 0, r.head, 0, 0, &st), r.head);
	cr_assert_eq(st.c.lost, 1);
	cr_assert_eq(st.out, PRS_SWO_NONE);
	/* a size past head */
	memset(&st, 0, sizeof(st));
	bad.size = 48;
	r.head = 0;
	put(&r, &bad, sizeof(bad));
	cr_assert_eq(prs_switch_parse(r.b, 64, 0, r.head, 0, 0, &st), r.head);
	cr_assert_eq(st.c.lost, 1);
	/* a header cut short: left for the next read */
	cr_assert_eq(prs_switch_parse(r.b, 64, 0, 4, 0, 0, &st), 0);
}
