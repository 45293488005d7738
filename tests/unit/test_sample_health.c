/* SPDX-License-Identifier: MIT */
/*
 * What a recording says about its ticks and its target (src/sample/health.c): the thresholds of
 * pyrsprof/sampler.h, each problem's line with its numbers, the cause told by the stop window or
 * the tick delay, the remedy per sample source, and silence when nothing went wrong.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "pyrsprof/sampler.h"

#include "util/banned.h"

/* 1000 ticks at 100 Hz, 4 threads, 20 us stopped per thread-sample: a healthy recording. */
static struct prs_sampler_stats healthy(void)
{
	struct prs_sampler_stats st;

	memset(&st, 0, sizeof(st));
	st.ticks = 1000;
	st.thread_samples = 4000;
	st.stopped_ns = 4000ull * 20000;
	st.stop_window.median = 60000;
	st.stop_window.p99 = 300000;
	st.tick_delay.p99 = 400000;
	return st;
}

static int lines(const char *buf)
{
	int n = buf[0] != '\0';

	for (; *buf; buf++)
		n += *buf == '\n';
	return n;
}

Test(sample_health, stopped_share_is_time_stopped_over_time_sampled)
{
	struct prs_sampler_stats st = healthy();

	/* 4000 thread-samples at 100 Hz stand for 40 s of thread time; 80 ms stopped */
	cr_assert_float_eq(prs_sampler_stopped_share(&st, 100), 0.002, 1e-12);
	st.thread_samples = 0;
	cr_assert_eq(prs_sampler_stopped_share(&st, 100), 0);
	st.thread_samples = 1;
	cr_assert_eq(prs_sampler_stopped_share(&st, 0), 0);
}

Test(sample_health, healthy_recording_says_nothing)
{
	struct prs_sampler_stats st = healthy();
	char buf[1024] = "junk";

	cr_assert_eq(prs_sampler_health(&st, 100, PRS_SOURCE_PTRACE, buf, sizeof(buf)), 0);
	cr_assert_str_empty(buf);
	/* exactly at the thresholds is still fine: 1 % of the ticks, 5 % skipped */
	st.missed_ticks = 5;
	st.late_ticks = 5; /* 10 of 1005 due */
	st.skipped_late = 200;
	cr_assert_eq(prs_sampler_health(&st, 100, PRS_SOURCE_PTRACE, buf, sizeof(buf)), 0);
	cr_assert_eq(prs_sampler_health(&st, 0, PRS_SOURCE_PTRACE, buf, sizeof(buf)), 0);
}

Test(sample_health, a_short_run_needs_a_few_bad_ticks)
{
	struct prs_sampler_stats st;
	char buf[1024];

	/* a 30 ms run: 3 ticks, the first one late, 2 threads: one of their 6 samples skipped */
	memset(&st, 0, sizeof(st));
	st.ticks = 3;
	st.late_ticks = 1;
	st.thread_samples = 6;
	st.skipped_late = 1;
	st.tick_delay.p99 = 6000000;
	cr_assert_eq(prs_sampler_health(&st, 100, PRS_SOURCE_PTRACE, buf, sizeof(buf)), 0, "%s", buf);
	st.late_ticks = 2;
	st.skipped_late = 2;
	cr_assert_eq(prs_sampler_health(&st, 100, PRS_SOURCE_PTRACE, buf, sizeof(buf)), 0, "%s", buf);
	/* three of them are: every tick was late, half of the samples skipped */
	st.late_ticks = 3;
	st.skipped_late = 3;
	cr_assert_eq(prs_sampler_health(&st, 100, PRS_SOURCE_PTRACE, buf, sizeof(buf)), 2, "%s", buf);
	cr_assert(strstr(buf, "0 of 3 ticks were missed and 3 late"), "%s", buf);
	cr_assert(strstr(buf, "3 of 6 thread-samples"), "%s", buf);
}

Test(sample_health, late_ticks_from_a_busy_machine)
{
	struct prs_sampler_stats st = healthy();
	char buf[1024];

	st.missed_ticks = 3;
	st.late_ticks = 20;
	st.tick_delay.p99 = 7500000;
	cr_assert_eq(prs_sampler_health(&st, 100, PRS_SOURCE_PTRACE, buf, sizeof(buf)), 1);
	cr_assert(strstr(buf, "3 of 1003 ticks were missed and 20 late (delay p99 7.5 ms, period "
			      "10.0 ms)"), "%s", buf);
	cr_assert(strstr(buf, "the machine is busy"), "%s", buf);
	cr_assert(strstr(buf, "-r 50"), "%s", buf);
}

Test(sample_health, late_looks_of_preload_lose_nothing)
{
	struct prs_sampler_stats st = healthy();
	char buf[1024];

	st.missed_ticks = 30;
	st.late_ticks = 200;
	st.tick_delay.p99 = 7500000;
	cr_assert_eq(prs_sampler_health(&st, 1000, PRS_SOURCE_PRELOAD, buf, sizeof(buf)), 0);
	cr_assert_str_empty(buf);
	cr_assert_eq(prs_sampler_health(&st, 1000, PRS_SOURCE_VM, buf, sizeof(buf)), 1);
}

Test(sample_health, late_ticks_from_long_stop_windows)
{
	struct prs_sampler_stats st = healthy();
	char buf[1024];

	st.missed_ticks = 40;
	st.stop_window.p99 = 8000000; /* ticks that last most of a period */
	cr_assert_eq(prs_sampler_health(&st, 100, PRS_SOURCE_PTRACE, buf, sizeof(buf)), 1);
	cr_assert(strstr(buf, "40 of 1040 ticks were missed and 0 late: the ticks themselves took long "
			      "(stop window p99 8.0 ms"), "%s", buf);
	cr_assert(strstr(buf, "--mode vm"), "%s", buf);
}

Test(sample_health, threads_that_did_not_stop)
{
	struct prs_sampler_stats st = healthy();
	char buf[1024];

	st.skipped_late = 201;
	cr_assert_eq(prs_sampler_health(&st, 100, PRS_SOURCE_PTRACE, buf, sizeof(buf)), 1);
	cr_assert(strstr(buf, "201 of 4000 thread-samples are of threads that did not stop"), "%s", buf);
}

Test(sample_health, stopped_program_ptrace_only)
{
	struct prs_sampler_stats st = healthy();
	char buf[1024];

	st.stopped_ns = 4000ull * 400000; /* 400 us of every 10 ms: 4 % */
	st.stop_window.median = 450000;
	st.stop_window.p99 = 2500000;
	cr_assert_eq(prs_sampler_health(&st, 100, PRS_SOURCE_PTRACE, buf, sizeof(buf)), 1);
	cr_assert(strstr(buf, "spent 4 % of their time stopped for samples (stop window median 450 us, "
			      "p99 2.5 ms): it ran measurably slower; use --mode vm"), "%s", buf);
	/* vm mode stops nothing: its stats never count stops */
	cr_assert_eq(prs_sampler_health(&st, 100, PRS_SOURCE_VM, buf, sizeof(buf)), 0);
}

Test(sample_health, on_cpu_samples_taken_where_threads_were_preempted)
{
	struct prs_sampler_stats st = healthy();
	char buf[1024];

	/* a quarter is still fine (a thread that loses its CPU to pyrsprof now and then) */
	st.cpu_stopped = 2000;
	st.cpu_preempted = st.cpu_preempted_stop = 500;
	cr_assert_eq(prs_sampler_health(&st, 100, PRS_SOURCE_PTRACE, buf, sizeof(buf)), 0, "%s", buf);
	/* a thread pinned beside two spinners: 54 of its 69 */
	st.cpu_stopped = 69;
	st.cpu_preempted = st.cpu_preempted_stop = 54;
	cr_assert_eq(prs_sampler_health(&st, 100, PRS_SOURCE_PTRACE, buf, sizeof(buf)), 1);
	cr_assert(strstr(buf, "54 of 69 on-CPU samples were taken where a thread stopped after waiting "
			      "for a CPU"), "%s", buf);
	cr_assert(strstr(buf, "can be off by up to 78 %: for the split use --mode preload"), "%s", buf);
	/* a short run's few */
	st.cpu_stopped = 3;
	st.cpu_preempted = st.cpu_preempted_stop = 2;
	cr_assert_eq(prs_sampler_health(&st, 100, PRS_SOURCE_PTRACE, buf, sizeof(buf)), 0, "%s", buf);
	/* given the stacks of perf samples taken while the thread ran: not where it was preempted */
	st.cpu_stopped = 69;
	st.cpu_preempted = 54;
	st.cpu_preempted_stop = 4;
	cr_assert_eq(prs_sampler_health(&st, 100, PRS_SOURCE_PTRACE, buf, sizeof(buf)), 0, "%s", buf);
	st.cpu_preempted_stop = 54;
	/* counted by the ptrace source only */
	st.cpu_stopped = 69;
	st.cpu_preempted = st.cpu_preempted_stop = 54;
	cr_assert_eq(prs_sampler_health(&st, 100, PRS_SOURCE_PRELOAD, buf, sizeof(buf)), 0, "%s", buf);
}

Test(sample_health, several_problems_one_line_each_and_bounded)
{
	struct prs_sampler_stats st = healthy();
	char buf[1024], small[40];

	st.missed_ticks = 300;
	st.skipped_late = 900;
	st.stopped_ns = 4000ull * 1000000;
	cr_assert_eq(prs_sampler_health(&st, 100, PRS_SOURCE_PTRACE, buf, sizeof(buf)), 3);
	cr_assert_eq(lines(buf), 3, "%s", buf);
	/* a buffer too small keeps a terminated prefix; the count stays right */
	cr_assert_eq(prs_sampler_health(&st, 100, PRS_SOURCE_PTRACE, small, sizeof(small)), 3);
	cr_assert_lt(strlen(small), sizeof(small));
	cr_assert_eq(strncmp(small, buf, strlen(small)), 0);
}
