/* SPDX-License-Identifier: MIT */
/*
 * The CPU-time balance (src/sample/balance.c): running or waiting for a CPU, from a sequence of
 * schedstat readings (before the INTERRUPT, after the stop). The truth is the rule written in
 * balance-internal.h: slices unchanged -> running; grown -> runqueue unless the CPU time used is
 * at least half a period more than the on-CPU samples paid for; a debt is never forgiven; a
 * surplus is capped at two periods; a blocked sample starts the balance again.
 */
#include <criterion/criterion.h>

#include "sample/balance-internal.h"

#include "util/banned.h"

#define P 10000000ll /* a 100 Hz period, ns */

/* The thread's schedstat over time: cpu_ns and slices, advanced by each step. */
struct thread_clock {
	struct prs_schedstat ss;
};

/* One tick of a thread that used cpu_ns of CPU time since the last one, and was given a CPU
 * `grown` more times between the INTERRUPT and its stop. */
static enum prs_state tick(struct prs_cpu_balance *b, struct thread_clock *c, int64_t cpu_ns,
			   int grown)
{
	struct prs_schedstat before;

	c->ss.cpu_ns += (uint64_t)cpu_ns;
	before = c->ss;
	c->ss.slices += (uint64_t)grown;
	return prs_cpu_balance_judge(b, P, &before, &c->ss);
}

static struct thread_clock start_clock(void)
{
	struct thread_clock c = { .ss = { .cpu_ns = 5000000000ull, .wait_ns = 0, .slices = 100 } };

	return c;
}

Test(cpu_balance, first_sample_is_running)
{
	struct prs_cpu_balance b = { 0 };
	struct thread_clock c = start_clock();

	/* even with grown slices: there is no balance yet */
	cr_assert_eq(tick(&b, &c, 0, 3), PRS_STATE_RUNNING);
	cr_assert_eq(b.cpu_ns, c.ss.cpu_ns);
	cr_assert_eq(b.credit_ns, -P, "its period is owed");
}

Test(cpu_balance, first_sample_with_zero_cpu_is_still_a_start)
{
	struct prs_cpu_balance b = { 0 };
	struct prs_schedstat before = { 0, 0, 1 }, after = { 0, 0, 2 };

	cr_assert_eq(prs_cpu_balance_judge(&b, P, &before, &after), PRS_STATE_RUNNING);
	cr_assert_eq(b.cpu_ns, 1, "0 CPU time is kept as 1, so the next sample is not a first");
	after.slices = 3;
	before.slices = 2;
	cr_assert_eq(prs_cpu_balance_judge(&b, P, &before, &after), PRS_STATE_RUNQUEUE);
}

Test(cpu_balance, never_on_a_cpu_before_the_interrupt_is_waiting)
{
	/* a thread just born, found at the tick (src/sample/newthreads.c) before its first CPU */
	struct prs_cpu_balance b = { 0 };
	struct prs_schedstat before = { 0, 40000, 0 }, after = { 3000, 90000, 1 };

	cr_assert_eq(prs_cpu_balance_judge(&b, P, &before, &after), PRS_STATE_RUNQUEUE);
	cr_assert_eq(b.cpu_ns, 3000, "its balance starts from its CPU time now");
	cr_assert_eq(b.credit_ns, 0, "nothing paid out");
	/* its next sample is judged by the balance as any other's */
	before = after;
	after.cpu_ns += (uint64_t)P;
	before.cpu_ns = after.cpu_ns;
	cr_assert_eq(prs_cpu_balance_judge(&b, P, &before, &after), PRS_STATE_RUNNING);
	cr_assert_eq(b.credit_ns, 0, "its period was paid for");
}

Test(cpu_balance, slices_unchanged_is_running_whatever_the_balance)
{
	struct prs_cpu_balance b = { 0 };
	struct thread_clock c = start_clock();

	tick(&b, &c, 0, 0);
	for (int i = 0; i < 5; i++)
		cr_assert_eq(tick(&b, &c, 0, 0), PRS_STATE_RUNNING, "tick %d", i);
	cr_assert_eq(b.credit_ns, -6 * P, "each on-CPU sample is paid for, even on credit");
}

Test(cpu_balance, slices_grown_is_runqueue_without_credit)
{
	struct prs_cpu_balance b = { 0 };
	struct thread_clock c = start_clock();

	tick(&b, &c, 0, 0); /* credit -P */
	cr_assert_eq(tick(&b, &c, P, 1), PRS_STATE_RUNQUEUE, "CPU time only pays the debt");
	cr_assert_eq(b.credit_ns, 0);
	cr_assert_eq(tick(&b, &c, P / 2 - 1, 1), PRS_STATE_RUNQUEUE, "less than half a period");
	cr_assert_eq(b.credit_ns, P / 2 - 1);
}

Test(cpu_balance, slices_grown_with_credit_is_running)
{
	struct prs_cpu_balance b = { 0 };
	struct thread_clock c = start_clock();

	tick(&b, &c, 0, 0);                 /* -P */
	cr_assert_eq(tick(&b, &c, P, 1), PRS_STATE_RUNQUEUE); /* 0 */
	cr_assert_eq(tick(&b, &c, P / 2, 1), PRS_STATE_RUNNING, "half a period of credit is enough");
	cr_assert_eq(b.credit_ns, P / 2 - P);
}

Test(cpu_balance, debt_is_never_forgiven)
{
	struct prs_cpu_balance b = { 0 };
	struct thread_clock c = start_clock();
	enum prs_state want[] = { PRS_STATE_RUNQUEUE, PRS_STATE_RUNQUEUE, PRS_STATE_RUNQUEUE,
				  PRS_STATE_RUNNING, PRS_STATE_RUNQUEUE, PRS_STATE_RUNNING };

	/* Three on-CPU samples that cost no CPU time (it stopped where it ran, but did not run):
	 * a debt of three periods. */
	for (int i = 0; i < 3; i++)
		tick(&b, &c, 0, 0);
	cr_assert_eq(b.credit_ns, -3 * P);
	/* Then a period of CPU per tick, each stop needing a new slice: the debt is paid first
	 * (-2P, -P, 0 are below half a period); then half a period of CPU per tick pays one on-CPU
	 * sample every other tick. */
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		enum prs_state st = tick(&b, &c, i < 3 ? P : P / 2, 1);

		cr_assert_eq(st, want[i], "tick %zu: %d", i, st);
	}
}

Test(cpu_balance, surplus_capped_at_two_periods)
{
	struct prs_cpu_balance b = { 0 };
	struct thread_clock c = start_clock();

	tick(&b, &c, 0, 0); /* -P */
	/* ten periods of CPU time between two samples (missed ticks): only two are banked */
	cr_assert_eq(tick(&b, &c, 10 * P, 1), PRS_STATE_RUNNING);
	cr_assert_eq(b.credit_ns, P);
	cr_assert_eq(tick(&b, &c, 0, 1), PRS_STATE_RUNNING);
	cr_assert_eq(b.credit_ns, 0);
	cr_assert_eq(tick(&b, &c, 0, 1), PRS_STATE_RUNQUEUE, "no burst from the missed ticks");
}

Test(cpu_balance, cpu_time_going_back_adds_nothing)
{
	struct prs_cpu_balance b = { 0 };
	struct prs_schedstat before = { 5 * P, 0, 10 }, after = { 5 * P, 0, 10 };

	prs_cpu_balance_judge(&b, P, &before, &after); /* -P */
	after.cpu_ns = 2 * P;
	after.slices = 11;
	cr_assert_eq(prs_cpu_balance_judge(&b, P, &before, &after), PRS_STATE_RUNQUEUE);
	cr_assert_eq(b.credit_ns, -P);
	cr_assert_eq(b.cpu_ns, 2 * P, "counted from the new reading on");
}

Test(cpu_balance, blocked_starts_again)
{
	struct prs_cpu_balance b = { 0 };
	struct thread_clock c = start_clock();
	struct prs_schedstat now;

	tick(&b, &c, 0, 0);
	tick(&b, &c, 10 * P, 1); /* credit P */
	/* it blocks, having used more CPU time meanwhile: none of it is paid out later */
	c.ss.cpu_ns += 5 * P;
	now = c.ss;
	prs_cpu_balance_blocked(&b, &now);
	cr_assert_eq(b.credit_ns, 0);
	cr_assert_eq(b.cpu_ns, now.cpu_ns);
	cr_assert_eq(tick(&b, &c, 0, 1), PRS_STATE_RUNQUEUE);
	cr_assert_eq(b.credit_ns, 0);

	/* a debt is dropped too */
	for (int i = 0; i < 3; i++)
		tick(&b, &c, 0, 0);
	cr_assert_lt(b.credit_ns, 0);
	prs_cpu_balance_blocked(&b, &c.ss);
	cr_assert_eq(b.credit_ns, 0);
	cr_assert_eq(tick(&b, &c, P / 2, 1), PRS_STATE_RUNNING);
}

Test(cpu_balance, blocked_without_a_reading_drops_only_the_credit)
{
	struct prs_cpu_balance b = { .cpu_ns = 1234, .credit_ns = 3 * P };

	prs_cpu_balance_blocked(&b, NULL);
	cr_assert_eq(b.credit_ns, 0);
	cr_assert_eq(b.cpu_ns, 1234);

	struct prs_schedstat zero = { 0, 0, 0 };

	prs_cpu_balance_blocked(&b, &zero);
	cr_assert_eq(b.cpu_ns, 1, "0 CPU time is kept as 1: the balance has started");
}

Test(cpu_balance, each_judgement_says_if_the_stop_was_ambiguous)
{
	struct prs_cpu_balance b = { 0 };
	struct thread_clock c = start_clock();

	tick(&b, &c, 0, 0);
	cr_assert_not(b.ambiguous, "slices unchanged: it stopped where it ran");
	cr_assert_eq(tick(&b, &c, P, 1), PRS_STATE_RUNQUEUE);
	cr_assert(b.ambiguous, "slices grown, judged waiting");
	cr_assert_eq(tick(&b, &c, P, 1), PRS_STATE_RUNNING);
	cr_assert(b.ambiguous, "slices grown, paid out as on-CPU: where it was preempted");
	cr_assert_eq(tick(&b, &c, P, 0), PRS_STATE_RUNNING);
	cr_assert_not(b.ambiguous);
	tick(&b, &c, P, 2);
	prs_cpu_balance_blocked(&b, &c.ss);
	cr_assert_not(b.ambiguous, "blocked: no stop to judge");
	tick(&b, &c, P, 2);
	prs_cpu_balance_blocked(&b, NULL);
	cr_assert_not(b.ambiguous);
}
