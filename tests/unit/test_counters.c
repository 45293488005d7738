/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for the counter path on a machine without a PMU: the replay backend fed by
 * tests/fixtures/counters (the perf wiki's published top-down examples, worked by hand in each
 * file's "about"; constructed AMD Zen 4 counts; multiplexed counts; each errno), the formulas,
 * malformed replay files, the explanations, and the perf backend with an injected
 * perf_event_open that fails with each errno (and retries user-space only on EACCES).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pyrsprof/classify.h"
#include "pyrsprof/counters.h"
#include "pyrsprof/profile.h"

#include "util/banned.h"

#define FIX "tests/fixtures/counters/"

static struct prs_counter_set replay(const char *name, int *topdown)
{
	struct prs_counter_set set = { .n = 0 };
	struct prs_err err = { 0 };
	struct prs_counter_backend *b = prs_counter_replay_new(name, &err);
	pid_t self = getpid();

	cr_assert_not_null(b, "%s: %s", name, err.msg);
	cr_assert_eq(b->open(b, &self, 1, &set, &err), 0);
	cr_assert_eq(b->read(b, &set), 0);
	*topdown = b->topdown;
	prs_counter_backend_free(b);
	return set;
}

Test(counters, intel_perfwiki_l1_worked_by_hand)
{
	int td;
	struct prs_counter_set set = replay(FIX "intel-memcpy-l1.json", &td);
	struct prs_cpu_metrics m;

	cr_assert_eq(td, PRS_TOPDOWN_INTEL);
	prs_cpu_metrics(&set, td, &m);
	cr_assert(m.have_l1);
	/* perf printed 25.5 / 24.3 / 44.3 / 6.0 % */
	cr_assert_float_eq(m.retiring, 0.254901, 1e-5);
	cr_assert_float_eq(m.frontend, 0.242542, 1e-5);
	cr_assert_float_eq(m.backend, 0.442998, 1e-5);
	cr_assert_float_eq(m.bad_spec, 0.059559, 1e-5);
	cr_assert_float_eq(m.retiring + m.frontend + m.backend + m.bad_spec, 1.0, 1e-12);
	cr_assert_eq(m.min_share, 1.0);
	cr_assert(!m.have_mem);
}

Test(counters, intel_perfwiki_raw_shares_without_adjustments)
{
	int td;
	struct prs_counter_set set = replay(FIX "intel-memcpy-l1.json", &td);
	struct prs_cpu_metrics m;

	/* without slots the adjustments cannot be made: the raw shares perf printed beside the
	 * counts (25.5 / 24.3 / 43.9 / 6.3 %) */
	for (size_t i = 0; i < set.n; i++)
		if (strcmp(set.c[i].name, "slots") == 0)
			set.c[i].ok = false;
	prs_cpu_metrics(&set, td, &m);
	cr_assert_float_eq(m.retiring, 0.254901, 1e-5);
	cr_assert_float_eq(m.frontend, 0.243135, 1e-5);
	cr_assert_float_eq(m.backend, 0.439218, 1e-5);
	cr_assert_float_eq(m.bad_spec, 0.062745, 1e-5);
}

Test(counters, intel_perfwiki_backend_group_memory_not_flagged)
{
	int td;
	struct prs_counter_set set = replay(FIX "intel-memcpy-backend.json", &td);
	struct prs_cpu_metrics m;

	prs_cpu_metrics(&set, td, &m);
	cr_assert(m.have_mem);
	/* perf printed tma_memory_bound 17.5 %, tma_core_bound 24.9 % */
	cr_assert_float_eq(m.memory_bound, 0.17454, 1e-4);
	cr_assert_float_eq(m.core_bound, 0.24902, 1e-4);
	cr_assert_float_eq(m.backend, 0.42356, 1e-4);
	cr_assert_lt(m.memory_bound, 0.2);
}

Test(counters, amd_zen4_memory_flagged)
{
	int td;
	struct prs_counter_set set = replay(FIX "amd-zen4-memory.json", &td);
	struct prs_cpu_metrics m;

	cr_assert_eq(td, PRS_TOPDOWN_AMD_ZEN4);
	prs_cpu_metrics(&set, td, &m);
	cr_assert(m.have_l1 && m.have_mem && m.have_ipc && m.have_llc);
	cr_assert_float_eq(m.frontend, 0.15, 1e-12);
	cr_assert_float_eq(m.backend, 0.40, 1e-12);
	cr_assert_float_eq(m.bad_spec, 0.10, 1e-12);
	cr_assert_float_eq(m.retiring, 0.40, 1e-12);
	cr_assert_float_eq(m.memory_bound, 0.24, 1e-12);
	cr_assert_float_eq(m.core_bound, 0.16, 1e-12);
	cr_assert_float_eq(m.ipc, 0.5, 1e-12);
	cr_assert_float_eq(m.llc_miss_bytes, 5.12e9, 1);
	cr_assert_str_eq(m.l1_source, "amd zen4 pipeline");
}

Test(counters, amd_zen4_compute)
{
	int td;
	struct prs_counter_set set = replay(FIX "amd-zen4-compute.json", &td);
	struct prs_cpu_metrics m;

	prs_cpu_metrics(&set, td, &m);
	cr_assert_float_eq(m.retiring, 0.70, 1e-12);
	cr_assert_float_eq(m.backend, 0.15, 1e-12);
	cr_assert_float_eq(m.memory_bound, 0.0375, 1e-12);
	cr_assert_float_eq(m.ipc, 3.0, 1e-12);
	/* the same counts read as Zen 5 use 8 slots per cycle */
	prs_cpu_metrics(&set, PRS_TOPDOWN_AMD_ZEN5, &m);
	cr_assert_float_eq(m.retiring, 3360000000.0 / 6.4e9, 1e-12);
}

Test(counters, multiplexed_counts_are_scaled)
{
	int td;
	struct prs_counter_set set = replay(FIX "multiplexed.json", &td);
	struct prs_cpu_metrics m;
	double v, share;

	cr_assert(prs_counter_scaled(&set, "cycles", &v, &share));
	cr_assert_float_eq(v, 1e9, 1);
	cr_assert_float_eq(share, 0.3, 1e-12);
	cr_assert(prs_counter_scaled(&set, "cache-misses", &v, &share));
	cr_assert_float_eq(v, 1e7, 1e-3);
	cr_assert_float_eq(share, 0.6, 1e-12);
	prs_cpu_metrics(&set, td, &m);
	cr_assert_float_eq(m.ipc, 1.5, 1e-12);
	cr_assert_float_eq(m.min_share, 0.3, 1e-12);
	cr_assert(!m.have_l1);
}

/* Each errno fixture: the hardware counters failed with their explanation, software ones read. */
static void check_errno(const char *file, int e, const char *must)
{
	int td;
	struct prs_counter_set set = replay(file, &td);
	const struct prs_counter *c = prs_counter_find(&set, "cycles");
	const struct prs_counter *t = prs_counter_find(&set, "task-clock");

	cr_assert_not_null(c);
	cr_assert(!c->ok);
	cr_assert_eq(c->err, -e);
	cr_assert(strstr(c->why, must), "%s: '%s' lacks '%s'", file, c->why, must);
	cr_assert(t && t->ok && t->value == 1500000000);
}

Test(counters, errno_fixtures_explained)
{
	check_errno(FIX "errno-enoent.json", ENOENT, "no hardware PMU");
	check_errno(FIX "errno-eopnotsupp.json", EOPNOTSUPP, "no hardware PMU");
	check_errno(FIX "errno-eacces.json", EACCES, "not permitted");
	check_errno(FIX "errno-eacces.json", EACCES, "CAP_PERFMON");
	check_errno(FIX "errno-eacces.json", EACCES, "perf_event_paranoid = 3");
	check_errno(FIX "errno-eperm.json", EPERM, "not permitted");
	check_errno(FIX "errno-einval.json", EINVAL, "refused");
}

Test(counters, replay_rejects_malformed_files)
{
	static const char *const bad[] = {
		"{",
		"{\"counters\": 3}",
		"{\"counters\": [{\"value\": 1}]}",
		"{\"counters\": [{\"name\": \"cycles\", \"value\": -1, \"enabled_ns\": 1, \"running_ns\": 1}]}",
		"{\"counters\": [{\"name\": \"cycles\", \"value\": 1, \"enabled_ns\": 1, \"running_ns\": 2}]}",
		"{\"counters\": [{\"name\": \"cycles\", \"errno\": \"EWHAT\"}]}",
		"{\"topdown\": \"sparc\", \"counters\": []}",
	};
	char path[] = "/tmp/prs-replay-XXXXXX";

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct prs_err err = { 0 };
		int fd = mkstemp(path);
		FILE *f = fdopen(fd, "w");

		fputs(bad[i], f);
		fclose(f);
		cr_assert_null(prs_counter_replay_new(path, &err), "accepted: %s", bad[i]);
		cr_assert_eq(err.code, -EINVAL);
		cr_assert(strstr(err.msg, path), "%s", err.msg);
		unlink(path);
		memcpy(path + sizeof(path) - 7, "XXXXXX", 6);
	}
}

/* ---- the perf backend with an injected perf_event_open ---- */

static int fail_errno;
static int calls, user_only_calls;

static long fake_open(void *attr, pid_t pid, int cpu, int group_fd, unsigned long flags)
{
	struct perf_event_attr *a = attr;

	(void)pid, (void)cpu, (void)group_fd, (void)flags;
	calls++;
	if (a->type == PERF_TYPE_SOFTWARE)
		return dup(0); /* any fd: reads of it fail and leave the counter unread */
	if (fail_errno == EACCES && a->exclude_kernel) {
		user_only_calls++;
		return dup(0);
	}
	errno = fail_errno;
	return -1;
}

static struct prs_counter_set open_with(int e)
{
	struct prs_counter_set set = { .n = 0 };
	struct prs_counter_backend *b = prs_counter_perf_new(fake_open);
	pid_t self = getpid();

	fail_errno = e;
	calls = user_only_calls = 0;
	prs_counter_add(&set, "task-clock", 0, PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK, false);
	prs_counter_add(&set, "cycles", 1, PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES, true);
	cr_assert_eq(b->open(b, &self, 1, &set, NULL), 0);
	prs_counter_backend_free(b);
	return set;
}

Test(counters, perf_backend_failures_explained)
{
	static const struct {
		int e;
		const char *must;
	} cases[] = {
		{ ENOENT, "no hardware PMU" }, { EOPNOTSUPP, "no hardware PMU" },
		{ EPERM, "not permitted" }, { EINVAL, "refused" }, { EMFILE, "file descriptors" },
		{ ESRCH, "exited" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct prs_counter_set set = open_with(cases[i].e);

		cr_assert_eq(set.c[0].err, 0, "software counter failed with %d", cases[i].e);
		cr_assert_eq(set.c[1].err, -cases[i].e);
		cr_assert(strstr(set.c[1].why, cases[i].must), "%d: %s", cases[i].e, set.c[1].why);
	}
}

Test(counters, perf_backend_eacces_retries_user_space_only)
{
	struct prs_counter_set set = open_with(EACCES);

	cr_assert_eq(set.c[1].err, 0);
	cr_assert_eq(user_only_calls, 1);
	cr_assert(strstr(set.c[1].why, "user space only"), "%s", set.c[1].why);
}

Test(counters, pmu_probe_states)
{
	int e;
	char why[200];

	fail_errno = ENOENT;
	cr_assert_eq(prs_pmu_probe(fake_open, &e, why, sizeof(why)), PRS_PMU_NONE);
	cr_assert_eq(e, ENOENT);
	fail_errno = EPERM;
	cr_assert_eq(prs_pmu_probe(fake_open, &e, why, sizeof(why)), PRS_PMU_NOT_PERMITTED);
	fail_errno = EINVAL;
	cr_assert_eq(prs_pmu_probe(fake_open, &e, why, sizeof(why)), PRS_PMU_ERROR);
}

Test(counters, real_software_counters_count_this_process)
{
	struct prs_counter_set set = { .n = 0 };
	struct prs_counter_backend *b = prs_counter_perf_new(NULL);
	pid_t self = getpid();
	double v, share;
	volatile uint64_t x = 0;
	int topdown;

	prs_counter_default_set(&set, false, &topdown);
	cr_assert_eq(set.n, 1); /* task-clock alone: each inherited counter costs every new thread */
	if (b->open(b, &self, 1, &set, NULL) != 0 || set.c[0].err)
		cr_skip_test("perf_event_open refused software counters here: %s", set.c[0].why);
	for (uint64_t i = 0; i < 50000000; i++)
		x += i;
	cr_assert_eq(b->read(b, &set), 0);
	cr_assert(prs_counter_scaled(&set, "task-clock", &v, &share));
	/* 50M additions take milliseconds: task-clock counts ns of CPU */
	cr_assert_gt(v, 1e6);
	cr_assert_float_eq(share, 1.0, 1e-9);
	prs_counter_backend_free(b);
}

Test(counters, to_and_from_acct)
{
	struct prs_counter c, back;
	struct prs_acct a;

	memset(&c, 0, sizeof(c));
	snprintf(c.name, sizeof(c.name), "cycles");
	c.ok = true;
	c.value = 123456789012ull;
	c.enabled_ns = 1000;
	c.running_ns = 300;
	c.type = PERF_TYPE_HARDWARE;
	prs_counter_to_acct(&c, &a);
	prs_counter_from_acct(&a, &back);
	cr_assert_str_eq(back.name, "cycles");
	cr_assert(back.ok && back.value == c.value && back.enabled_ns == 1000 && back.running_ns == 300);
	c.ok = false;
	c.err = -ENOENT;
	snprintf(c.why, sizeof(c.why), "cycles: no hardware PMU");
	prs_counter_to_acct(&c, &a);
	prs_counter_from_acct(&a, &back);
	cr_assert(!back.ok);
	cr_assert_eq(back.err, -ENOENT);
	cr_assert_str_eq(back.why, "cycles: no hardware PMU");
}

/* ---- refusals: the right remedy, and the line whole all the way to the reports ---- */

/* The longest counter name a set holds (PRS_COUNTER_NAME - 1 bytes). */
static struct prs_counter longest_name(void)
{
	struct prs_counter c;

	memset(&c, 0, sizeof(c));
	memset(c.name, 'x', sizeof(c.name) - 1);
	c.hardware = true;
	return c;
}

static bool ends_with(const char *s, const char *tail)
{
	size_t n = strlen(s), m = strlen(tail);

	return n >= m && strcmp(s + n - m, tail) == 0;
}

Test(counters, refusals_name_the_remedy_that_fits_whole)
{
	static const struct {
		struct prs_perf_who who;
		const char *must, *tail;
		bool root_helps;
	} cases[] = {
		/* unprivileged, the level forbids it: the level is the cause and its fixes */
		{ { 3, false, false }, "kernel.perf_event_paranoid = 3", "perf_event_paranoid=2", true },
		{ { 3, false, true }, "kernel.perf_event_paranoid = 3", "perf_event_paranoid=2", true },
		/* root under Docker's default profile; or unprivileged at a level that allows it */
		{ { 2, true, true }, "seccomp filter", "the container's seccomp profile", false },
		{ { 2, false, true }, "seccomp filter", "the container's seccomp profile", false },
		{ { -1, true, true }, "seccomp filter", "the container's seccomp profile", false },
		/* allowed by level and privilege, no filter: a security module */
		{ { 2, true, false }, "security module", "must allow perf_event_open", false },
		{ { 1, false, false }, "security module", "must allow perf_event_open", false },
	};
	struct prs_counter c = longest_name();

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		for (int e = EPERM; e; e = e == EPERM ? EACCES : 0) {
			char roomy[1024];

			prs_counter_explain(&c, e, &cases[i].who, c.why, sizeof(c.why));
			prs_counter_explain(&c, e, &cases[i].who, roomy, sizeof(roomy));
			cr_assert_str_eq(c.why, roomy, "cut at %zu bytes", sizeof(c.why) - 1);
			cr_assert(strncmp(c.why, c.name, strlen(c.name)) == 0, "%s", c.why);
			cr_assert(strstr(c.why, "not permitted") && strstr(c.why, cases[i].must), "%s", c.why);
			cr_assert(ends_with(c.why, cases[i].tail), "%zu: %s", i, c.why);
			cr_assert(!strstr(c.why, "run as root") == !cases[i].root_helps, "%zu: %s", i, c.why);
			cr_assert(!strstr(c.why, "root does not help") == cases[i].root_helps, "%s", c.why);
		}
}

Test(counters, seccomp_fixture_does_not_advise_root)
{
	int td;
	struct prs_counter_set set = replay(FIX "errno-eperm-seccomp.json", &td);
	const struct prs_counter *c = prs_counter_find(&set, "cycles");

	cr_assert(c && c->err == -EPERM);
	cr_assert(strstr(c->why, "seccomp filter") && strstr(c->why, "root does not help"), "%s",
		  c->why);
	cr_assert_null(strstr(c->why, "run as root"), "%s", c->why);
}

/* The counters' note reaches phase1 through a NOTE record and the facts: whole (it was cut at
 * "sysctl kernel.pe" by a 200-byte note). */
Test(counters, counters_note_is_whole_in_the_facts)
{
	struct prs_counter c = longest_name();
	struct prs_perf_who who = { 3, false, false };
	struct prs_profile *p = prs_profile_new();
	struct prs_facts f;
	struct prs_acct a;
	char want[PRS_FACTS_NOTE];
	size_t i;

	prs_counter_explain(&c, EACCES, &who, c.why, sizeof(c.why));
	prs_acct_note(&a, "counters", EACCES, c.why);
	cr_assert_eq(prs_acct_store(p, &a), 0);
	cr_assert_eq(prs_facts_build(p, &f, NULL), 0);
	snprintf(want, sizeof(want), "counters: %s", c.why);
	for (i = 0; i < f.nnotes && strncmp(f.notes[i], "counters: ", 10) != 0; i++)
		;
	cr_assert_lt(i, f.nnotes);
	cr_assert_str_eq(f.notes[i], want);
	cr_assert(ends_with(f.notes[i], "sysctl kernel.perf_event_paranoid=2"), "%s", f.notes[i]);
	prs_facts_release(&f);
	prs_profile_free(p);
}
