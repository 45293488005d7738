/* SPDX-License-Identifier: MIT */
/*
 * The kernel-stack events' rate (src/sample/kstack_rate.c): a sequence of perf samples, each in
 * user mode or in the kernel, and the period changes it calls for. The truth is the rule in
 * kstack_rate-internal.h: a new thread's event at the probe's rate (half the full one), full at
 * its first kernel-mode sample, lowered after 16 user-mode ones in a row (or 160 ms of CPU time);
 * at the full rate lowered after `need` user-mode samples in a row (32, or 160 ms of CPU time when
 * that is more), back to full at the first kernel-mode sample, each change said once; the full
 * period a little over half the tick, never under 2.5 ms (its 200 Hz value).
 */
#include <criterion/criterion.h>
#include <string.h>

#include "sample/kstack_rate-internal.h"

#include "util/banned.h"

#define P100 10000000ull /* 100 Hz */
#define P1000 1000000ull /* 1000 Hz */

/* Feeds seq ('u' user, 'k' kernel) and writes the changes, one letter per sample: '.' keep,
 * 'L' lower, 'F' back to full. */
static void feed(struct prs_krate *r, const char *seq, char *out)
{
	size_t i;

	for (i = 0; seq[i]; i++) {
		enum prs_krate_change c = prs_krate_see(r, seq[i] == 'k');

		out[i] = c == PRS_KRATE_TO_LOW ? 'L' : c == PRS_KRATE_TO_FULL ? 'F' : '.';
	}
	out[i] = '\0';
}

/* A new thread's rate at sampling period period_ns, fed seq. */
static void fresh(struct prs_krate *r, uint64_t period_ns, const char *seq, char *out)
{
	prs_krate_init(r, prs_krate_full_ns(period_ns));
	feed(r, seq, out);
}

/* n copies of c, then tail. */
static void rep(char *buf, char c, size_t n, const char *tail)
{
	memset(buf, c, n);
	memcpy(buf + n, tail, strlen(tail) + 1);
}

/* pat, times over. */
static void cycle(char *buf, const char *pat, int times)
{
	size_t len = strlen(pat);

	for (int i = 0; i < times; i++)
		memcpy(buf + (size_t)i * len, pat, len);
	buf[(size_t)times * len] = '\0';
}

Test(kstack_rate, full_period_is_half_a_tick_and_a_little_capped_at_its_200hz_value)
{
	cr_assert_eq(prs_krate_full_ns(P100), P100 / 2 + P100 / 128);  /* 2 per tick at 100 Hz */
	cr_assert_eq(prs_krate_full_ns(P100 / 2), P100 / 4 + P100 / 256); /* and at 200 Hz */
	/* above 200 Hz no faster: 2.5 ms, a little over, so that the lag to preload's ticks sweeps */
	cr_assert_eq(prs_krate_full_ns(P1000 * 4), 2500000 + 2500000 / 128); /* 250 Hz */
	cr_assert_eq(prs_krate_full_ns(P1000), 2500000 + 2500000 / 128);
	cr_assert_eq(prs_krate_full_ns(P1000 / 4), 2500000 + 2500000 / 128);
}

Test(kstack_rate, need_is_32_samples_or_160ms_of_cpu_and_the_probes_16)
{
	struct prs_krate r;

	prs_krate_init(&r, prs_krate_full_ns(P100)); /* 5.08 ms: 160 ms is 31.5 samples */
	cr_assert_eq(r.need, 32);
	cr_assert_eq(r.probe_need, 16);
	prs_krate_init(&r, prs_krate_full_ns(P1000)); /* 2.52 ms: 63 samples, 31 probes */
	cr_assert_eq(r.need, 63);
	cr_assert_eq(r.probe_need, 31);
	cr_assert(r.probing && !r.lowered && r.user_run == 0);
	cr_assert_eq(prs_krate_mult(&r), PRS_KRATE_PROBE);
}

Test(kstack_rate, a_pure_user_thread_is_lowered_once_after_its_probe)
{
	struct prs_krate r;
	char seq[128], out[128], want[128];

	rep(seq, 'u', 100, "");
	fresh(&r, P100, seq, out);
	rep(want, '.', 15, "L");
	memset(want + 16, '.', 84);
	want[100] = '\0';
	cr_assert_str_eq(out, want, "the 16th user sample of the probe lowers, and only it");
	cr_assert(r.lowered && !r.probing);
	cr_assert_eq(prs_krate_mult(&r), PRS_KRATE_LOWER);
}

Test(kstack_rate, the_probes_first_kernel_sample_sets_the_full_rate)
{
	struct prs_krate r;
	char seq[128], out[128], want[128];

	/* then 32 user samples in a row lower it, as at the full rate */
	rep(seq, 'u', 32, "");
	memcpy(seq, "uuuk", 4);
	rep(seq + 4, 'u', 32, "");
	fresh(&r, P100, seq, out);
	rep(want, '.', 35, "L");
	want[3] = 'F';
	cr_assert_str_eq(out, want);
	cr_assert(r.lowered && !r.probing);
}

Test(kstack_rate, a_kernel_sample_restores_the_full_rate_at_once)
{
	struct prs_krate r;
	char seq[128], out[128];

	rep(seq, 'u', 16, "uuukkuu");
	fresh(&r, P100, seq, out);
	cr_assert_str_eq(out + 15, "L...F...", "lowered, then full at the first kernel sample only");
	cr_assert(!r.lowered && !r.probing);
	cr_assert_eq(prs_krate_mult(&r), 1);
	cr_assert_eq(r.user_run, 2);
}

Test(kstack_rate, a_thread_the_kernel_works_for_keeps_the_full_rate)
{
	struct prs_krate r;
	char seq[600], out[600];

	/* kwork-like: a kernel sample ends the probe, then 31 user samples and one in the kernel,
	 * over and over; never lowered */
	seq[0] = 'k';
	cycle(seq + 1, "uuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuk", 18);
	fresh(&r, P100, seq, out);
	cr_assert_eq(out[0], 'F');
	cr_assert_null(strpbrk(out + 1, "LF"), "%s", out);
	/* a syscall-heavy one: every other sample in the kernel */
	cycle(seq, "uk", 250);
	fresh(&r, P100, seq, out);
	cr_assert_eq(out[1], 'F');
	cr_assert_null(strpbrk(out + 2, "LF"), "%s", out);
}

Test(kstack_rate, at_1000hz_the_run_is_160ms_of_cpu)
{
	struct prs_krate r;
	char seq[200], out[200];

	rep(seq, 'u', 31, "");
	fresh(&r, P1000, seq, out);
	cr_assert_eq(strchr(out, 'L'), out + 30, "probe lowered at the 31st user sample: %s", out);
	rep(seq, 'u', 63, "");
	fresh(&r, P1000, "k", out);
	feed(&r, seq, out);
	cr_assert_eq(strchr(out, 'L'), out + 62, "full lowered at the 63rd user sample: %s", out);
}

Test(kstack_rate, a_failed_change_starts_a_new_run)
{
	struct prs_krate r;
	char seq[64], out[64];

	rep(seq, 'u', 16, "");
	fresh(&r, P100, seq, out);
	cr_assert(r.lowered);
	prs_krate_undo(&r, PRS_KRATE_PROBE); /* the ioctl failed: the event is still the probe */
	cr_assert(!r.lowered && r.probing);
	rep(seq, 'u', 15, "");
	feed(&r, seq, out);
	cr_assert_null(strchr(out, 'L'), "asked again only after a whole new run");
	feed(&r, "u", out);
	cr_assert_str_eq(out, "L");
	prs_krate_undo(&r, 1); /* a failed change from the full rate */
	cr_assert(!r.lowered && !r.probing);
	rep(seq, 'u', 31, "");
	feed(&r, seq, out);
	cr_assert_null(strchr(out, 'L'));
}

Test(kstack_rate, a_preempted_thread_is_lowered_only_to_the_probes_rate_until_32_calm_stops)
{
	struct prs_krate r;
	char seq[64], out[64];

	rep(seq, 'u', 16, "");
	fresh(&r, P100, seq, out);
	cr_assert_eq(prs_krate_mult(&r), PRS_KRATE_LOWER);
	prs_krate_preempted(&r, true); /* a stop found it preempted: a perf sample per period */
	cr_assert_eq(prs_krate_mult(&r), PRS_KRATE_PROBE);
	for (int i = 0; i < PRS_KRATE_CALM - 1; i++)
		prs_krate_preempted(&r, false);
	cr_assert_eq(prs_krate_mult(&r), PRS_KRATE_PROBE, "held through 31 calm stops");
	prs_krate_preempted(&r, true); /* preempted again: the count starts over */
	for (int i = 0; i < PRS_KRATE_CALM - 1; i++)
		prs_krate_preempted(&r, false);
	cr_assert_eq(prs_krate_mult(&r), PRS_KRATE_PROBE);
	prs_krate_preempted(&r, false);
	cr_assert_eq(prs_krate_mult(&r), PRS_KRATE_LOWER, "let go at the 32nd calm stop in a row");
	/* held, the full rate a kernel sample asks for stays full */
	prs_krate_preempted(&r, true);
	feed(&r, "k", out);
	cr_assert_str_eq(out, "F");
	cr_assert_eq(prs_krate_mult(&r), 1);
}
