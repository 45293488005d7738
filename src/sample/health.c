/* SPDX-License-Identifier: MIT */
/*
 * Whether a recording's ticks held and left its target alone, from its statistics: the lines the
 * summary prints when ticks were missed or late, threads did not stop in time, or the target
 * spent a measurable share of its time stopped. Each line says what, why it likely happened, and
 * what to do. Pure logic over the numbers (unit-tested in tests/unit/test_sample_health.c).
 */
#include "pyrsprof/sampler.h"

#include <stdarg.h>
#include <stdio.h>

#include "util/banned.h"

double prs_sampler_stopped_share(const struct prs_sampler_stats *st, double rate_hz)
{
	double lived_ns;

	if (!st->thread_samples || rate_hz <= 0)
		return 0;
	lived_ns = (double)st->thread_samples * 1e9 / rate_hz;
	return (double)st->stopped_ns / lived_ns;
}

struct lines {
	char *buf;
	size_t size, len;
	int n;
};

static void add_line(struct lines *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add_line(struct lines *l, const char *fmt, ...)
{
	va_list ap;
	int w;

	l->n++;
	if (l->len + 1 >= l->size)
		return;
	if (l->len) {
		l->buf[l->len++] = '\n';
		l->buf[l->len] = '\0';
	}
	va_start(ap, fmt);
	w = vsnprintf(l->buf + l->len, l->size - l->len, fmt, ap);
	va_end(ap);
	if (w > 0)
		l->len += (size_t)w < l->size - l->len ? (size_t)w : l->size - l->len - 1;
}

/* The remedy for a ptrace recording that hurt (vm: only the rate can go down). */
static const char *remedy(enum prs_source source, double rate_hz)
{
	(void)rate_hz;
	return source == PRS_SOURCE_PTRACE
		       ? "--mode vm (Python frames only, read without stopping the program) or a lower "
			 "rate (-r 50)"
		       : "a lower rate (-r 50)";
}

static void check_ticks(const struct prs_sampler_stats *st, double rate_hz, enum prs_source source,
			struct lines *l)
{
	uint64_t due = st->ticks + st->missed_ticks, bad = st->missed_ticks + st->late_ticks;
	double period_us = 1e6 / rate_hz;

	/* preload: the agent's samples wait in its ring for pyrsprof, and what the threads slept
	 * and waited is read from their schedstat whenever it looks: a late look loses nothing (a
	 * ring that filled up is said by its own line) */
	if (bad < PRS_HEALTH_MIN_COUNT || (double)bad <= PRS_HEALTH_TICKS_SHARE * (double)due ||
	    source == PRS_SOURCE_PRELOAD)
		return;
	if (source == PRS_SOURCE_PTRACE && st->stop_window.p99 / 1e3 >= period_us / 2)
		add_line(l,
			 "%llu of %llu ticks were missed and %llu late: the ticks themselves took long "
			 "(stop window p99 %.1f ms, period %.1f ms), so the samples are thin and uneven; "
			 "try %s",
			 (unsigned long long)st->missed_ticks, (unsigned long long)due,
			 (unsigned long long)st->late_ticks, st->stop_window.p99 / 1e6, period_us / 1e3,
			 remedy(source, rate_hz));
	else
		add_line(l,
			 "%llu of %llu ticks were missed and %llu late (delay p99 %.1f ms, period "
			 "%.1f ms): pyrsprof waited for a CPU, the machine is busy, so the samples are "
			 "thin and uneven; leave a core free or use a lower rate (-r 50)",
			 (unsigned long long)st->missed_ticks, (unsigned long long)due,
			 (unsigned long long)st->late_ticks, st->tick_delay.p99 / 1e6, period_us / 1e3);
}

static void check_skipped(const struct prs_sampler_stats *st, struct lines *l)
{
	if (st->skipped_late < PRS_HEALTH_MIN_COUNT ||
	    (double)st->skipped_late <= PRS_HEALTH_SKIPPED_SHARE * (double)st->thread_samples)
		return;
	add_line(l,
		 "%llu of %llu thread-samples are of threads that did not stop within the tick's budget "
		 "nor by its end (waiting for a CPU, or in disk IO): recorded from /proc, without "
		 "native frames; a free core helps, or --mode vm",
		 (unsigned long long)st->skipped_late, (unsigned long long)st->thread_samples);
}

static void check_stopped(const struct prs_sampler_stats *st, double rate_hz,
			  enum prs_source source, struct lines *l)
{
	double share = prs_sampler_stopped_share(st, rate_hz);

	if (source != PRS_SOURCE_PTRACE || share <= PRS_HEALTH_STOPPED_SHARE)
		return;
	add_line(l,
		 "the program's threads spent %.0f %% of their time stopped for samples (stop window "
		 "median %.0f us, p99 %.1f ms): it ran measurably slower; use %s",
		 share * 100, st->stop_window.median / 1e3, st->stop_window.p99 / 1e6,
		 remedy(source, rate_hz));
}

/* ptrace under CPU contention: the on-CPU samples of threads that waited for a CPU are where they
 * were preempted (sample/balance-internal.h), so the CPU view's split is not where the CPU time
 * went; preload samples on each thread's CPU clock. Those given a perf sample's native stack
 * instead (taken while the thread ran: src/sample/kstack-internal.h) are not counted. */
static void check_preempted(const struct prs_sampler_stats *st, enum prs_source source,
			    struct lines *l)
{
	uint64_t left = st->cpu_preempted_stop;

	if (source != PRS_SOURCE_PTRACE || left < PRS_HEALTH_MIN_COUNT ||
	    (double)left <= PRS_HEALTH_PREEMPTED_SHARE * (double)st->cpu_stopped)
		return;
	add_line(l,
		 "%llu of %llu on-CPU samples were taken where a thread stopped after waiting for a "
		 "CPU (the machine is busy): where it was preempted, often a syscall return, not where "
		 "its CPU time went; the CPU view's total follows its CPU time, but its split between "
		 "functions can be off by up to %.0f %%: for the split use --mode preload, or leave a "
		 "core free",
		 (unsigned long long)left, (unsigned long long)st->cpu_stopped,
		 100.0 * (double)left / (double)st->cpu_stopped);
}

int prs_sampler_health(const struct prs_sampler_stats *st, double rate_hz, enum prs_source source,
		       char *buf, size_t size)
{
	struct lines l = { buf, size, 0, 0 };

	if (size)
		buf[0] = '\0';
	if (rate_hz <= 0)
		return 0;
	check_ticks(st, rate_hz, source, &l);
	check_skipped(st, &l);
	check_stopped(st, rate_hz, source, &l);
	check_preempted(st, source, &l);
	return l.n;
}
