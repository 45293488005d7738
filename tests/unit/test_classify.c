/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for the verdict on constructed facts: every rule, the rule order (the first that
 * fires is the verdict, the others "also"), confidence levels, idle workers left out, the
 * CPU split from counters (compute, memory-latency, memory-bandwidth with and without a
 * calibration, multiplexing) and without a PMU (never a memory verdict), steal lowering the
 * confidence, and the time budget's arithmetic. The truth of each case is the rule table of
 * docs/classify.md §2-3 applied by hand to the numbers built here.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>

#include "pyrsprof/classify.h"

#include "util/banned.h"

static struct prs_facts F;
static struct prs_thread_facts T[32];

static void facts(double w, unsigned ncpus)
{
	memset(&F, 0, sizeof(F));
	memset(T, 0, sizeof(T));
	F.threads = T;
	F.duration_s = w;
	F.ncpus = ncpus;
	F.complete = true;
}

/* A thread existing the whole window with these fractions of it (cpu, runq, then pairs). */
static struct prs_thread_facts *thread(bool python, double cpu, double runq)
{
	struct prs_thread_facts *t = &T[F.nthreads++];

	t->tid = 100 + (int)F.nthreads;
	t->python = python;
	t->wall_s = F.duration_s;
	t->samples = F.duration_s * 100;
	t->t[PRS_R_CPU] = cpu * F.duration_s;
	t->t[PRS_R_RUNQ] = runq * F.duration_s;
	t->wait_syscall = -1;
	t->kernel = true;
	return t;
}

static void wait_in(struct prs_thread_facts *t, enum prs_reason r, double share, int syscall)
{
	t->t[r] += share * F.duration_s;
	t->wait_syscall = syscall;
	t->wait_syscall_share = share;
}

static struct prs_verdict judge(void)
{
	struct prs_verdict v;

	prs_facts_budget(&F);
	prs_classify(&F, &v);
	cr_assert(v.have);
	return v;
}

static bool also(const struct prs_verdict *v, enum prs_rule r)
{
	for (unsigned i = 0; i < v->nalso; i++)
		if (v->also[i].rule == r)
			return true;
	return false;
}

Test(classify, budget_arithmetic)
{
	struct prs_thread_facts *a, *b;

	facts(2, 2);
	a = thread(false, 0.5, 0.1);
	wait_in(a, PRS_R_IO_DISK, 0.4, SYS_pread64);
	b = thread(false, 0.25, 0);
	wait_in(b, PRS_R_SLEEP, 0.75, SYS_clock_nanosleep);
	prs_facts_budget(&F);
	cr_assert_eq(F.budget.active, 2);
	cr_assert_float_eq(F.budget.T, 4, 1e-12);
	cr_assert_float_eq(F.budget.f[PRS_R_CPU], 0.375, 1e-12);
	cr_assert_float_eq(F.budget.f[PRS_R_IO_DISK], 0.2, 1e-12);
	cr_assert_float_eq(F.budget.f[PRS_R_SLEEP], 0.375, 1e-12);
	cr_assert_float_eq(F.budget.f_io, 0.2, 1e-12);
	cr_assert_float_eq(F.budget.U, 0.75, 1e-12);
	cr_assert_float_eq(F.budget.unattributed, 0, 1e-12);
}

Test(classify, cpu_bound_python_no_pmu)
{
	struct prs_verdict v;

	facts(3, 2);
	thread(true, 0.97, 0.01);
	F.cpu_python = 0.92;
	F.cpu_native = 0.08;
	v = judge();
	cr_assert_eq(v.primary.rule, PRS_RULE_CPU);
	cr_assert_eq(v.primary.confidence, PRS_CONF_HIGH);
	cr_assert_str_eq(v.primary.label, "CPU-bound (Python interpreter)");
	cr_assert_eq(v.nalso, 0);
	cr_assert_eq(v.split, PRS_SPLIT_NOT_MEASURED);
	cr_assert(strstr(v.split_detail, "compute vs memory not measured"));
	cr_assert(strstr(v.lever, "NumPy") && strstr(v.lever, "Numba") && strstr(v.lever, "Rust/PyO3"));
	cr_assert_float_eq(v.cores_used, 0.97, 1e-9);
	cr_assert_float_eq(v.efficiency, 0.97, 1e-9);
}

Test(classify, streaming_without_pmu_is_never_bandwidth)
{
	struct prs_verdict v;

	facts(2, 2);
	thread(false, 0.99, 0);
	F.cpu_native = 1;
	F.copy_share = 0.85;
	snprintf(F.copy_top, sizeof(F.copy_top), "__memmove_avx_unaligned_erms");
	F.fresh_mbs = 300;
	v = judge();
	cr_assert_eq(v.primary.rule, PRS_RULE_CPU);
	cr_assert_str_eq(v.primary.label, "CPU-bound (native code)");
	cr_assert_eq(v.split, PRS_SPLIT_NOT_MEASURED);
	cr_assert_eq(v.split_confidence, PRS_CONF_LOW);
	cr_assert_eq(v.nevidence, 2);
	cr_assert(strstr(v.evidence[0], "85 % of on-CPU samples in copy/fill kernels"), "%s", v.evidence[0]);
	cr_assert(strstr(v.evidence[0], "__memmove_avx_unaligned_erms"));
	cr_assert(strstr(v.evidence[1], "300 MB/s"), "%s", v.evidence[1]);
	cr_assert(!strstr(v.lever, "bandwidth"));
	cr_assert(strstr(v.lever, "data parallelism"));
}

Test(classify, io_disk_high)
{
	struct prs_verdict v;
	struct prs_thread_facts *t;

	facts(2, 2);
	t = thread(false, 0.3, 0.05);
	wait_in(t, PRS_R_IO_DISK, 0.65, SYS_pread64);
	v = judge();
	cr_assert_eq(v.primary.rule, PRS_RULE_IO);
	cr_assert_eq(v.primary.confidence, PRS_CONF_HIGH);
	cr_assert_str_eq(v.primary.label, "IO/latency-bound (disk)");
	cr_assert_float_eq(v.primary.value, 0.65, 1e-9);
	cr_assert(strstr(v.lever, "concurrency, not cores"));
}

Test(classify, io_network_medium_and_not_sleep)
{
	struct prs_verdict v;
	struct prs_thread_facts *t;

	facts(2, 2);
	t = thread(false, 0.3, 0);
	wait_in(t, PRS_R_IO_NET, 0.35, SYS_epoll_wait);
	t->t[PRS_R_SLEEP] = 0.35 * 2;
	v = judge();
	cr_assert_eq(v.primary.rule, PRS_RULE_IO);
	cr_assert_eq(v.primary.confidence, PRS_CONF_MEDIUM);
	cr_assert_str_eq(v.primary.label, "IO/latency-bound (network/event)");
	cr_assert(!also(&v, PRS_RULE_SLEEP));
}

Test(classify, io_needs_to_outweigh_cpu)
{
	struct prs_verdict v;
	struct prs_thread_facts *t;

	facts(2, 2);
	t = thread(false, 0.6, 0);
	wait_in(t, PRS_R_IO_NET, 0.4, SYS_read);
	v = judge();
	cr_assert_eq(v.primary.rule, PRS_RULE_CPU);
	cr_assert_eq(v.primary.confidence, PRS_CONF_MEDIUM); /* below 0.70: the largest share only */
	cr_assert(!also(&v, PRS_RULE_IO));
}

Test(classify, sleep_dominated_not_io)
{
	struct prs_verdict v;
	struct prs_thread_facts *t;

	facts(3, 2);
	t = thread(false, 0.02, 0);
	wait_in(t, PRS_R_SLEEP, 0.98, SYS_clock_nanosleep);
	v = judge();
	cr_assert_eq(v.primary.rule, PRS_RULE_SLEEP);
	cr_assert_eq(v.primary.confidence, PRS_CONF_HIGH);
	cr_assert_eq(v.nalso, 0);
	cr_assert(strstr(v.lever, "none"));
}

static void gil_threads(bool measured)
{
	facts(2, 2);
	for (int i = 0; i < 4; i++) {
		struct prs_thread_facts *t = thread(true, 0.25, 0);

		wait_in(t, measured ? PRS_R_GIL : PRS_R_LOCK, 0.75, SYS_futex);
	}
	F.gil_measured = measured;
	F.cpu_python = 1;
}

Test(classify, gil_serialized_confirmed_high)
{
	struct prs_verdict v;

	gil_threads(true);
	F.gil_confirmed = true;
	v = judge();
	cr_assert_eq(v.primary.rule, PRS_RULE_GIL);
	cr_assert_eq(v.primary.confidence, PRS_CONF_HIGH);
	cr_assert_float_eq(v.primary.value, 0.75, 1e-9);
	cr_assert(strstr(v.primary.detail, "confirmed"));
	cr_assert(strstr(v.lever, "release the GIL"));
	cr_assert(!also(&v, PRS_RULE_LOCK));
}

Test(classify, gil_measured_unconfirmed_medium)
{
	gil_threads(true);
	cr_assert_eq(judge().primary.confidence, PRS_CONF_MEDIUM);
}

Test(classify, gil_not_measured_is_probable_low_and_not_a_lock)
{
	struct prs_verdict v;

	gil_threads(false);
	v = judge();
	cr_assert_eq(v.primary.rule, PRS_RULE_GIL);
	cr_assert_eq(v.primary.confidence, PRS_CONF_LOW);
	cr_assert_str_eq(v.primary.label, "GIL-serialized (probable)");
	cr_assert(!also(&v, PRS_RULE_LOCK));
}

Test(classify, gil_needs_serialization)
{
	struct prs_verdict v;

	/* 4 Python threads waiting 40 % of the time but using 2.4 cores: not serialized */
	facts(2, 4);
	for (int i = 0; i < 4; i++)
		wait_in(thread(true, 0.6, 0), PRS_R_GIL, 0.4, SYS_futex);
	F.gil_measured = true;
	v = judge();
	cr_assert_neq(v.primary.rule, PRS_RULE_GIL);
	cr_assert(!also(&v, PRS_RULE_GIL));
}

Test(classify, lock_contended)
{
	struct prs_verdict v;

	facts(2, 2);
	for (int i = 0; i < 4; i++)
		wait_in(thread(false, 0.3, 0.05), PRS_R_LOCK, 0.65, SYS_futex);
	v = judge();
	cr_assert_eq(v.primary.rule, PRS_RULE_LOCK);
	cr_assert_eq(v.primary.confidence, PRS_CONF_MEDIUM);
	cr_assert_float_eq(v.primary.value, 0.65, 1e-9);
	cr_assert(strstr(v.lever, "critical sections"));
}

Test(classify, throttled_before_saturated)
{
	struct prs_verdict v;

	facts(2, 2);
	thread(false, 0.2, 0.78);
	F.have_cgroup = F.has_quota = true;
	F.quota_cpus = 0.2;
	F.nr_periods = 20;
	F.nr_throttled = 19;
	F.throttled_s = 1.56;
	v = judge();
	cr_assert_eq(v.primary.rule, PRS_RULE_THROTTLED);
	cr_assert_eq(v.primary.confidence, PRS_CONF_HIGH);
	cr_assert_float_eq(v.primary.value, 0.95, 1e-9);
	cr_assert(strstr(v.lever, "raise the CPU quota"));
	cr_assert(also(&v, PRS_RULE_SATURATED));
	/* a quota that rarely bites is a qualifier, not a verdict */
	F.nr_throttled = 2;
	F.throttled_s = 0.05;
	v = judge();
	cr_assert_neq(v.primary.rule, PRS_RULE_THROTTLED);
}

Test(classify, saturated_by_own_threads)
{
	struct prs_verdict v;

	facts(2, 2);
	for (int i = 0; i < 4; i++)
		thread(false, 0.5, 0.5);
	v = judge();
	cr_assert_eq(v.primary.rule, PRS_RULE_SATURATED);
	cr_assert_eq(v.primary.confidence, PRS_CONF_HIGH);
	cr_assert_str_eq(v.primary.label, "CPU-saturated (more runnable threads than CPUs)");
	cr_assert(strstr(v.lever, "fewer threads"));
	cr_assert_float_eq(v.cores_used, 2.0, 1e-9);
	cr_assert_float_eq(v.efficiency, 1.0, 1e-9);
}

Test(classify, saturated_by_other_processes_is_still_cpu_bound)
{
	struct prs_verdict v;

	facts(2, 2);
	thread(false, 0.3, 0.7);
	F.cpu_native = 1;
	v = judge();
	cr_assert_eq(v.primary.rule, PRS_RULE_SATURATED);
	cr_assert_str_eq(v.primary.label, "CPU-saturated (by other processes)");
	cr_assert(strstr(v.lever, "busy with other work"));
	cr_assert(also(&v, PRS_RULE_CPU));
	/* run-queue time from samples only: medium */
	T[0].kernel = false;
	cr_assert_eq(judge().primary.confidence, PRS_CONF_MEDIUM);
}

Test(classify, saturated_high_from_switch_records)
{
	struct prs_verdict v;

	facts(2, 2);
	thread(false, 0.3, 0.7);
	T[0].kernel = false; /* no kernel run-queue time: medium from the samples alone */
	F.cpu_native = 1;
	F.have_switches = true;
	F.sw.preempt = 30;
	F.sw.voluntary = 70;
	cr_assert_eq(judge().primary.confidence, PRS_CONF_MEDIUM);
	/* most switch-outs were preemptions: the kernel said the thread wanted the CPU */
	F.sw.preempt = 900;
	F.sw.voluntary = 100;
	v = judge();
	cr_assert_eq(v.primary.rule, PRS_RULE_SATURATED);
	cr_assert_eq(v.primary.confidence, PRS_CONF_HIGH);
	cr_assert(strstr(v.primary.detail, "; 450 preempted switch-outs/s, 90 % of all (perf switch "
					   "records)"), "%s", v.primary.detail);
}

static const char *scaling_line(double wall1, double cpu1, double wall2, double cpu2)
{
	static char line[400];

	F.nscaling = 2;
	snprintf(F.scaling_var, sizeof(F.scaling_var), "T");
	F.scaling[0] = (struct prs_scaling_run){ "1", wall1, cpu1, 0 };
	F.scaling[1] = (struct prs_scaling_run){ "2", wall2, cpu2, 0 };
	return prs_scaling_evidence(&F, line, sizeof(line)) ? line : NULL;
}

Test(classify, scaling_evidence)
{
	const char *l;
	struct prs_verdict v;

	facts(2, 2);
	thread(false, 1, 0);
	F.cpu_native = 1;
	/* 1.9x faster with 2x the threads, cores 1 -> 1.9: scales */
	l = scaling_line(2, 2, 2 / 1.9, 2);
	cr_assert(l && strstr(l, "1.90x faster with 2.00x the threads, cores used 1.00 -> 1.90: it "
			       "scales"), "%s", l);
	/* 1.1x faster while the cores used doubled: flattens */
	l = scaling_line(2, 2, 2 / 1.1, 3.6);
	cr_assert(l && strstr(l, "flattens") && strstr(l, "more cores won't help"), "%s", l);
	/* the same time and cores: the threads never ran in parallel */
	l = scaling_line(2, 2, 2, 2);
	cr_assert(l && strstr(l, "did not run in parallel"), "%s", l);
	/* beside the CPU-bound verdict's parallelism, never in its split's evidence nor a memory split */
	v = judge();
	cr_assert_eq(v.primary.rule, PRS_RULE_CPU);
	cr_assert_eq(v.split, PRS_SPLIT_NOT_MEASURED);
	cr_assert(strstr(v.scaling, "did not run in parallel"), "%s", v.scaling);
	for (unsigned i = 0; i < v.nevidence; i++)
		cr_assert_null(strstr(v.evidence[i], "scaling"), "%s", v.evidence[i]);
	/* runs that hardly used a CPU (a sleep halved): no claim about cores either way */
	l = scaling_line(0.4, 0.001, 0.2, 0.001);
	cr_assert(l && strstr(l, "2.00x faster") && strstr(l, "hardly used a CPU") &&
		  !strstr(l, "it scales"), "%s", l);
	/* nothing to compare: a failed run, or values that are not growing numbers */
	scaling_line(2, 2, 1, 2);
	F.scaling[1].rc = 1;
	cr_assert_null(prs_scaling_evidence(&F, (char[64]){ 0 }, 64) ? "x" : NULL);
	scaling_line(2, 2, 1, 2);
	snprintf(F.scaling[1].value, sizeof(F.scaling[1].value), "many");
	cr_assert_eq(prs_scaling_evidence(&F, (char[64]){ 0 }, 64), 0);
}

/* A GIL-bound thread pool whose speedup is flat (fixed work, T=1 -> 4: the same wall and CPU
 * time, one core used): the verdict is the GIL's, not CPU-bound, and the scaling runs still
 * say so beside it (they were only in the CPU split's evidence: not shown at all here). */
Test(classify, scaling_shown_with_a_gil_verdict)
{
	struct prs_verdict v;

	gil_threads(true);
	F.nscaling = 2;
	snprintf(F.scaling_var, sizeof(F.scaling_var), "T");
	F.scaling[0] = (struct prs_scaling_run){ "1", 2.0, 1.98, 0 };
	F.scaling[1] = (struct prs_scaling_run){ "4", 2.1, 2.05, 0 };
	v = judge();
	cr_assert_eq(v.primary.rule, PRS_RULE_GIL);
	cr_assert(!also(&v, PRS_RULE_CPU));
	cr_assert(strstr(v.scaling, "(--scaling T=1..4, fixed work assumed): 0.95x faster with 4.00x "
				    "the threads, cores used 0.99 -> 0.98: the extra threads did not "
				    "run in parallel"), "%s", v.scaling);
	/* no runs to compare: nothing said */
	F.nscaling = 0;
	cr_assert_str_eq(judge().scaling, "");
}

Test(classify, idle_pool_left_out)
{
	struct prs_verdict v;

	facts(2, 2);
	thread(false, 0.99, 0.01);
	for (int i = 0; i < 8; i++)
		wait_in(thread(false, 0, 0), PRS_R_LOCK, 1.0, SYS_futex);
	F.cpu_native = 1;
	v = judge();
	cr_assert_eq(F.budget.active, 1);
	cr_assert_eq(F.budget.idle, 8);
	cr_assert_eq(v.primary.rule, PRS_RULE_CPU);
	cr_assert_eq(v.primary.confidence, PRS_CONF_HIGH);
	cr_assert(!also(&v, PRS_RULE_LOCK));
	cr_assert_eq(v.threads_active, 1);
}

Test(classify, all_idle_threads_count)
{
	struct prs_verdict v;

	facts(2, 2);
	wait_in(thread(false, 0, 0), PRS_R_SLEEP, 1.0, SYS_clock_nanosleep);
	wait_in(thread(false, 0, 0), PRS_R_LOCK, 1.0, SYS_futex);
	v = judge();
	cr_assert_eq(F.budget.active, 2);
	cr_assert_eq(F.budget.idle, 0);
	/* lock 50 % comes before sleep 50 % in the order */
	cr_assert_eq(v.primary.rule, PRS_RULE_LOCK);
	cr_assert(also(&v, PRS_RULE_SLEEP));
}

Test(classify, io_waiter_is_idle_only_beside_a_busy_thread)
{
	struct prs_verdict v;

	/* a thread parked in read() and a timer thread sleeping: the read is the program's work */
	facts(2, 2);
	wait_in(thread(false, 0, 0), PRS_R_IO_NET, 1.0, SYS_read);
	wait_in(thread(false, 0.005, 0), PRS_R_SLEEP, 0.995, SYS_clock_nanosleep);
	v = judge();
	cr_assert_eq(F.budget.active, 1);
	cr_assert_eq(F.budget.idle, 1);
	cr_assert(!T[0].idle && T[1].idle);
	cr_assert_eq(v.primary.rule, PRS_RULE_IO);
	cr_assert_eq(v.primary.confidence, PRS_CONF_HIGH);
	/* beside a thread busy on a CPU, the reader is an idle listener */
	facts(2, 2);
	wait_in(thread(false, 0, 0), PRS_R_IO_NET, 1.0, SYS_read);
	thread(false, 0.98, 0.02);
	v = judge();
	cr_assert(T[0].idle);
	cr_assert_eq(v.primary.rule, PRS_RULE_CPU);
}

/* A thread that lived 20 ms of a 2 s run, on a CPU for 44 % of its life, its two samples parked
 * on a futex: next to no CPU of the program's, but not of its own life. An idle worker uses next
 * to no CPU on both counts (design note 1.4); this one worked, and counts. */
Test(classify, brief_thread_that_worked_is_not_idle)
{
	struct prs_thread_facts *t;

	facts(2, 2);
	thread(false, 0.99, 0.01);
	t = thread(false, 0, 0);
	t->wall_s = 0.02;
	t->samples = 2;
	t->t[PRS_R_CPU] = 0.44 * t->wall_s;
	t->t[PRS_R_LOCK] = 0.56 * t->wall_s;
	t->wait_syscall = SYS_futex;
	t->wait_syscall_share = 1.0;
	judge();
	cr_assert(!t->idle, "44 %% of its own life on a CPU");
	cr_assert_eq(F.budget.active, 2);
	/* the same thread on a CPU for 0.5 % of its life is a parked worker */
	t->t[PRS_R_CPU] = 0.005 * t->wall_s;
	t->t[PRS_R_LOCK] = 0.995 * t->wall_s;
	judge();
	cr_assert(t->idle);
	cr_assert_eq(F.budget.active, 1);
	/* a parked pool thread of the whole run, on a CPU for 1.5 % of it beside two busy threads:
	 * 0.75 % of the program's CPU, idle; on a CPU for 15 % of it, it worked */
	facts(2, 2);
	thread(false, 0.99, 0.01);
	thread(false, 0.99, 0.01);
	t = thread(false, 0.015, 0);
	wait_in(t, PRS_R_LOCK, 0.985, SYS_futex);
	judge();
	cr_assert(t->idle);
	t->t[PRS_R_CPU] = 0.15 * t->wall_s;
	judge();
	cr_assert(!t->idle);
}

Test(classify, rule_order_io_before_saturated)
{
	struct prs_verdict v;
	struct prs_thread_facts *t;

	facts(2, 1);
	for (int i = 0; i < 3; i++) {
		t = thread(false, 0.15, 0.25);
		wait_in(t, PRS_R_IO_NET, 0.6, SYS_recvfrom);
	}
	v = judge();
	cr_assert_eq(v.primary.rule, PRS_RULE_IO);
	cr_assert(also(&v, PRS_RULE_SATURATED));
}

Test(classify, no_rule_means_waiting_low)
{
	struct prs_verdict v;

	facts(2, 2);
	wait_in(thread(false, 0.3, 0), PRS_R_CHILD, 0.7, SYS_wait4);
	v = judge();
	cr_assert_eq(v.primary.rule, PRS_RULE_WAIT);
	cr_assert_eq(v.primary.confidence, PRS_CONF_LOW);
	cr_assert_str_eq(v.primary.label, "waiting (waiting for a child process)");
}

Test(classify, steal_lowers_confidence)
{
	struct prs_verdict v;

	facts(2, 2);
	thread(true, 0.97, 0);
	F.cpu_python = 1;
	F.have_steal = true;
	F.steal_share = 0.13;
	v = judge();
	cr_assert_eq(v.primary.confidence, PRS_CONF_MEDIUM);
	cr_assert_eq(v.nqualifiers, 1);
	cr_assert(strstr(v.qualifiers[0], "13 %"), "%s", v.qualifiers[0]);
}

Test(classify, no_samples_no_verdict)
{
	struct prs_verdict v;

	facts(2, 2);
	prs_facts_budget(&F);
	prs_classify(&F, &v);
	cr_assert(!v.have);
}

/* ---- the CPU split from counters ---- */

static struct prs_verdict with_counters(bool flagged, double llc_bytes, bool calibrated, double share)
{
	facts(2, 2);
	thread(false, 0.98, 0);
	F.cpu_native = 1;
	F.cpu.have_l1 = true;
	F.cpu.l1_source = "amd zen4 pipeline";
	F.cpu.backend = 0.4;
	F.cpu.retiring = 0.4;
	F.cpu.have_mem = true;
	F.cpu.memory_bound = flagged ? 0.3 : 0.05;
	F.cpu.min_share = share;
	F.cpu.have_llc = llc_bytes > 0;
	F.cpu.llc_miss_bytes = llc_bytes;
	F.have_machine = true;
	F.machine.calibrated = calibrated;
	F.machine.bw_all_mbs = 10000; /* 10 GB/s */
	return judge();
}

Test(classify, split_compute)
{
	struct prs_verdict v = with_counters(false, 0, false, 1);

	cr_assert_eq(v.split, PRS_SPLIT_COMPUTE);
	cr_assert_eq(v.split_confidence, PRS_CONF_HIGH);
	v = with_counters(false, 0, false, 0.3); /* multiplexed below half: medium */
	cr_assert_eq(v.split_confidence, PRS_CONF_MEDIUM);
	cr_assert(strstr(v.split_detail, "ran 30 %"), "%s", v.split_detail);
}

Test(classify, split_bandwidth_by_calibrated_peak)
{
	/* 2 s, 16 GB of LLC misses: 8 GB/s = 80 % of 10 GB/s */
	struct prs_verdict v = with_counters(true, 16e9, true, 1);

	cr_assert_eq(v.split, PRS_SPLIT_MEMORY_BANDWIDTH);
	cr_assert_eq(v.split_confidence, PRS_CONF_HIGH);
	cr_assert(strstr(v.lever, "more cores won't help"));
	v = with_counters(true, 12e9, true, 1); /* 60 %: likely */
	cr_assert_eq(v.split, PRS_SPLIT_MEMORY_BANDWIDTH);
	cr_assert_eq(v.split_confidence, PRS_CONF_MEDIUM);
	v = with_counters(true, 4e9, true, 1); /* 20 %: latency */
	cr_assert_eq(v.split, PRS_SPLIT_MEMORY_LATENCY);
	cr_assert(strstr(v.lever, "locality"));
}

Test(classify, split_memory_without_calibration)
{
	struct prs_verdict v = with_counters(true, 16e9, false, 1);

	cr_assert_eq(v.split, PRS_SPLIT_MEMORY);
	cr_assert(strstr(v.split_detail, "pyrsprof calibrate"), "%s", v.split_detail);
}

Test(classify, split_with_counters_but_no_topdown_says_what_was_read)
{
	/* a PMU that counted cycles and instructions (multiplexed.json) but has no top-down metrics:
	 * the counters table shows them, so the split must not say none were read */
	struct prs_verdict v;

	facts(2, 2);
	thread(false, 0.98, 0);
	F.cpu_native = 1;
	F.have_machine = true;
	F.cpu.have_ipc = true;
	F.cpu.ipc = 1.5;
	v = judge();
	cr_assert_eq(v.split, PRS_SPLIT_NOT_MEASURED);
	cr_assert_eq(v.split_confidence, PRS_CONF_LOW);
	cr_assert(strstr(v.split_detail, "cycles and instructions were counted"), "%s", v.split_detail);
	cr_assert(!strstr(v.split_detail, "no hardware counters were read"), "%s", v.split_detail);
	cr_assert_str_eq(v.evidence[v.nevidence - 1], "IPC 1.50 (not diagnostic alone)");
	/* none read (the PMU state unknown): said so */
	F.cpu.have_ipc = false;
	v = judge();
	cr_assert(strstr(v.split_detail, "no hardware counters were read"), "%s", v.split_detail);
	/* a PMU that failed: its own reason, whole */
	snprintf(F.machine.pmu_why, sizeof(F.machine.pmu_why), "cycles: no hardware PMU here");
	v = judge();
	cr_assert(strstr(v.split_detail, "cycles: no hardware PMU here"), "%s", v.split_detail);
}
