/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for the accounting records and the facts built from a profile: the record payload
 * round trip (fields present vs missing, strings), hostile payloads, records through a real
 * profile.pyrs (written by the recorder, read back, END count checked), the cgroup reader on
 * v1 and v2 trees made here (quota on an ancestor, "max", a v2 tree without the cpu controller
 * beside a v1 one), the /proc readers on this process, and prs_facts_build on constructed
 * profiles: kernel CPU and run-queue time replacing the samples', unseen waits counted as disk
 * IO when the process moved storage bytes, run-queue samples doubted on idle CPUs, idle workers.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "classify/classify-internal.h"
#include "pyrsprof/acct.h"
#include "pyrsprof/classify.h"
#include "pyrsprof/profile.h"

#include "util/banned.h"

Test(acct, round_trip_fields_and_strings)
{
	struct prs_acct a, b;
	uint8_t buf[PRS_ACCT_REC_MAX];
	size_t n;
	uint64_t v;

	prs_acct_init(&a, PRS_ACCT_THREAD, PRS_PHASE_EXIT, -12345);
	prs_acct_set(&a, PRS_TASK_CPU_NS, 0);
	prs_acct_set(&a, PRS_TASK_RUNQ_NS, UINT64_MAX);
	prs_acct_set(&a, PRS_TASK_INBLOCK, 77);
	prs_acct_str(&a, "worker-1");
	prs_acct_str(&a, "");
	n = prs_acct_encode(&a, buf);
	cr_assert_leq(n, PRS_ACCT_REC_MAX);
	cr_assert_eq(prs_acct_decode(PRS_ACCT_THREAD, buf, n, &b), 0);
	cr_assert_eq(b.type, PRS_ACCT_THREAD);
	cr_assert_eq(b.phase, PRS_PHASE_EXIT);
	cr_assert_eq(b.id, -12345);
	cr_assert(prs_acct_get(&b, PRS_TASK_CPU_NS, &v) && v == 0, "a measured 0 stays measured");
	cr_assert(prs_acct_get(&b, PRS_TASK_RUNQ_NS, &v) && v == UINT64_MAX);
	cr_assert(prs_acct_get(&b, PRS_TASK_INBLOCK, &v) && v == 77);
	cr_assert(!prs_acct_get(&b, PRS_TASK_UTIME_NS, &v), "a missing field stays missing");
	cr_assert_eq(prs_acct_val(&b, PRS_TASK_UTIME_NS, 9), 9);
	cr_assert_eq(b.nstr, 2);
	cr_assert_str_eq(b.str[0], "worker-1");
	cr_assert_str_eq(b.str[1], "");
}

Test(acct, largest_record_fits)
{
	struct prs_acct a, b;
	uint8_t buf[PRS_ACCT_REC_MAX];
	char s[400];

	memset(s, 'x', sizeof(s) - 1);
	s[sizeof(s) - 1] = '\0';
	prs_acct_init(&a, PRS_ACCT_MACHINE, PRS_PHASE_START, INT64_MIN);
	for (unsigned f = 0; f < PRS_ACCT_MAX_FIELDS; f++)
		prs_acct_set(&a, f, UINT64_MAX);
	for (int i = 0; i < PRS_ACCT_MAX_STRS + 2; i++)
		prs_acct_str(&a, s); /* cut to 255 bytes; the fifth is dropped */
	cr_assert_eq(a.nstr, PRS_ACCT_MAX_STRS);
	cr_assert_eq(prs_acct_decode(PRS_ACCT_MACHINE, buf, prs_acct_encode(&a, buf), &b), 0);
	cr_assert_eq(strlen(b.str[3]), PRS_ACCT_MAX_STR - 1);
	cr_assert_eq(b.have, (1ull << PRS_ACCT_MAX_FIELDS) - 1);
	cr_assert_eq(b.id, INT64_MIN);
}

Test(acct, hostile_payloads)
{
	struct prs_acct a;
	/* phase 9; a string longer than the payload; a NUL inside a string; a varint cut short;
	 * 65 strings */
	static const uint8_t phase[] = { 9, 0, 0, 0 };
	static const uint8_t longstr[] = { 0, 0, 0, 1, 50, 'a', 'b' };
	static const uint8_t nul[] = { 0, 0, 0, 1, 3, 'a', 0, 'b' };
	static const uint8_t cut[] = { 0, 0, 0x80 };
	static const uint8_t many[] = { 0, 0, 0, 65 };
	/* a field bit this version does not know (63) is read and dropped */
	static const uint8_t newer[] = { 1, 2, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01, 42, 0 };

	cr_assert_eq(prs_acct_decode(PRS_ACCT_NOTE, phase, sizeof(phase), &a), -EINVAL);
	cr_assert_eq(prs_acct_decode(PRS_ACCT_NOTE, longstr, sizeof(longstr), &a), -EINVAL);
	cr_assert_eq(prs_acct_decode(PRS_ACCT_NOTE, nul, sizeof(nul), &a), -EINVAL);
	cr_assert_eq(prs_acct_decode(PRS_ACCT_NOTE, cut, sizeof(cut), &a), -EINVAL);
	cr_assert_eq(prs_acct_decode(PRS_ACCT_NOTE, many, sizeof(many), &a), -EINVAL);
	cr_assert_eq(prs_acct_decode(PRS_ACCT_NOTE, newer, sizeof(newer), &a), 0);
	cr_assert_eq(a.have, 0);
	cr_assert_eq(a.id, 1);
}

Test(acct, records_through_a_pyrs_file)
{
	char path[] = "/tmp/prs-acct-XXXXXX";
	struct prs_recorder *r;
	struct prs_profile *p;
	struct prs_err err = { 0 };
	struct prs_acct a, *loaded;
	size_t n, bad;
	char warn[256];
	int fd = mkstemp(path);

	close(fd);
	cr_assert_eq(prs_recorder_open(path, &r, &err), 0, "%s", err.msg);
	p = prs_recorder_profile(r);
	prs_acct_init(&a, PRS_ACCT_PROCESS, PRS_PHASE_START, 4242);
	prs_acct_set(&a, PRS_TASK_UTIME_NS, 1000);
	cr_assert_eq(prs_acct_store(p, &a), 0);
	cr_assert_eq(prs_recorder_flush(r, &err), 0);
	prs_acct_note(&a, "taskstats", -EPERM, "needs CAP_NET_ADMIN");
	cr_assert_eq(prs_acct_store(p, &a), 0);
	cr_assert_eq(prs_profile_acct(p, 10, "x", 1), -EINVAL, "type 10 is not an accounting record");
	cr_assert_eq(prs_profile_acct(p, 11, "x", PRS_ACCT_REC_MAX + 1), -EINVAL);
	cr_assert_eq(prs_recorder_close(r, NULL, &err), 0);
	cr_assert_eq(prs_pyrs_read(path, &p, warn, sizeof(warn), &err), 0, "%s", err.msg);
	cr_assert(p->complete);
	cr_assert_eq(p->nacct, 2);
	cr_assert_eq(prs_acct_load(p, &loaded, &n, &bad), 0);
	cr_assert_eq(n, 2);
	cr_assert_eq(bad, 0);
	cr_assert_eq(loaded[0].type, PRS_ACCT_PROCESS);
	cr_assert_eq(loaded[0].id, 4242);
	cr_assert_eq(prs_acct_val(&loaded[0], PRS_TASK_UTIME_NS, 0), 1000);
	cr_assert_eq(loaded[1].type, PRS_ACCT_NOTE);
	cr_assert_str_eq(loaded[1].str[1], "needs CAP_NET_ADMIN");
	cr_assert_eq(prs_acct_val(&loaded[1], PRS_NOTE_ERRNO, 0), EPERM);
	free(loaded);
	prs_profile_free(p);
	unlink(path);
}

/* ---- cgroups ---- */

static char root[64];

static void put(const char *rel, const char *content)
{
	char path[512], *slash;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	for (slash = path + strlen(root) + 1; (slash = strchr(slash, '/')); slash++) {
		*slash = '\0';
		mkdir(path, 0755);
		*slash = '/';
	}
	f = fopen(path, "w");
	cr_assert_not_null(f, "%s", path);
	fputs(content, f);
	fclose(f);
}

static void rm_tree(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
	cr_assert_eq(system(cmd), 0);
}

static int read_cg(struct prs_acct *a)
{
	char pc[128], mi[128];

	snprintf(pc, sizeof(pc), "%s/proc_cgroup", root);
	snprintf(mi, sizeof(mi), "%s/mountinfo", root);
	return prs_cgroup_read_at(pc, mi, root, PRS_PHASE_END, a);
}

Test(acct, cgroup_v2_quota_on_an_ancestor)
{
	struct prs_acct a;

	snprintf(root, sizeof(root), "/tmp/prs-cg-XXXXXX");
	cr_assert_not_null(mkdtemp(root));
	put("proc_cgroup", "0::/box/app\n");
	put("mountinfo", "30 25 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n");
	put("sys/fs/cgroup/cgroup.controllers", "cpuset cpu io memory pids\n");
	put("sys/fs/cgroup/box/cpu.max", "50000 100000\n");
	put("sys/fs/cgroup/box/cpu.stat", "usage_usec 900000\nuser_usec 1\nsystem_usec 2\n"
	    "nr_periods 40\nnr_throttled 30\nthrottled_usec 1200000\n");
	put("sys/fs/cgroup/box/app/cpu.max", "max 100000\n");
	put("sys/fs/cgroup/box/app/cpu.stat", "usage_usec 800000\nnr_periods 0\n");
	cr_assert_eq(read_cg(&a), 0);
	cr_assert_eq(prs_acct_val(&a, PRS_CG_VERSION, 0), 2);
	cr_assert_eq(prs_acct_val(&a, PRS_CG_QUOTA_US, 0), 50000);
	cr_assert_eq(prs_acct_val(&a, PRS_CG_PERIOD_US, 0), 100000);
	cr_assert_eq(prs_acct_val(&a, PRS_CG_DEPTH_UP, 9), 1);
	cr_assert_eq(prs_acct_val(&a, PRS_CG_NR_THROTTLED, 0), 30);
	cr_assert_eq(prs_acct_val(&a, PRS_CG_THROTTLED_US, 0), 1200000);
	cr_assert_str_eq(a.str[0], "/box/app");
	cr_assert(strstr(a.str[1], "/sys/fs/cgroup/box"));
	rm_tree();
}

Test(acct, cgroup_v1_cpu_beside_an_empty_v2)
{
	struct prs_acct a;

	snprintf(root, sizeof(root), "/tmp/prs-cg-XXXXXX");
	cr_assert_not_null(mkdtemp(root));
	/* as on the dev VM: v1 cpu controller, a v2 tree without controllers */
	put("proc_cgroup", "4:memory:/x\n2:cpuacct:/\n1:cpu:/q\n0::/\n");
	put("mountinfo",
	    "40 30 0:30 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n"
	    "41 30 0:31 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n"
	    "42 30 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n");
	put("sys/fs/cgroup/unified/cgroup.controllers", "hugetlb\n");
	put("sys/fs/cgroup/cpu/cpu.cfs_quota_us", "-1\n");
	put("sys/fs/cgroup/cpu/q/cpu.cfs_quota_us", "20000\n");
	put("sys/fs/cgroup/cpu/q/cpu.cfs_period_us", "100000\n");
	put("sys/fs/cgroup/cpu/q/cpu.stat", "nr_periods 19\nnr_throttled 18\nthrottled_time 1436499597\n");
	cr_assert_eq(read_cg(&a), 0);
	cr_assert_eq(prs_acct_val(&a, PRS_CG_VERSION, 0), 1);
	cr_assert_eq(prs_acct_val(&a, PRS_CG_QUOTA_US, 0), 20000);
	cr_assert_eq(prs_acct_val(&a, PRS_CG_NR_PERIODS, 0), 19);
	cr_assert_eq(prs_acct_val(&a, PRS_CG_THROTTLED_US, 0), 1436499, "v1 ns are kept in us");
	cr_assert_eq(prs_acct_val(&a, PRS_CG_DEPTH_UP, 9), 0);
	rm_tree();
}

Test(acct, cgroup_without_quota_or_controller)
{
	struct prs_acct a;

	snprintf(root, sizeof(root), "/tmp/prs-cg-XXXXXX");
	cr_assert_not_null(mkdtemp(root));
	put("proc_cgroup", "0::/user.slice\n");
	put("mountinfo", "30 25 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n");
	put("sys/fs/cgroup/cgroup.controllers", "cpu memory\n");
	put("sys/fs/cgroup/user.slice/cpu.max", "max 100000\n");
	put("sys/fs/cgroup/user.slice/cpu.stat", "usage_usec 5\n");
	cr_assert_eq(read_cg(&a), 0);
	cr_assert(!prs_acct_get(&a, PRS_CG_QUOTA_US, &(uint64_t){ 0 }));
	cr_assert_eq(prs_acct_val(&a, PRS_CG_USAGE_US, 0), 5);
	put("mountinfo", "30 25 0:26 / /sys rw - sysfs sysfs rw\n");
	cr_assert_eq(read_cg(&a), -ENOENT);
	rm_tree();
}

/* ---- /proc readers on ourselves ---- */

Test(acct, proc_readers_on_self)
{
	struct prs_acct t, p, s;
	volatile uint64_t x = 0;
	uint64_t cpu, rss;

	for (uint64_t i = 0; i < 30000000; i++)
		x += i;
	cr_assert_eq(prs_acct_read_thread(getpid(), (pid_t)syscall(SYS_gettid), PRS_PHASE_END, &t), 0);
	cr_assert(prs_acct_get(&t, PRS_TASK_CPU_NS, &cpu));
	cr_assert_gt(cpu, 1000000, "30M additions took less than 1 ms?");
	cr_assert(prs_acct_get(&t, PRS_TASK_NVCSW, &(uint64_t){ 0 }));
	cr_assert(prs_acct_get(&t, PRS_TASK_RCHAR, &(uint64_t){ 0 }));
	cr_assert_eq(prs_acct_read_process(getpid(), PRS_PHASE_END, &p), 0);
	cr_assert(prs_acct_get(&p, PRS_TASK_RSS_PEAK_KB, &rss) && rss > 100);
	cr_assert_geq(prs_acct_val(&p, PRS_TASK_THREADS, 0), 1);
	cr_assert_eq(prs_acct_read_thread(getpid(), 1 << 30, PRS_PHASE_END, &t), -ESRCH);
	cr_assert_eq(prs_acct_read_system(getpid(), PRS_PHASE_END, &s), 0);
	cr_assert_eq(prs_acct_val(&s, PRS_SYS_NCPUS, 0), (uint64_t)sysconf(_SC_NPROCESSORS_ONLN));
	cr_assert_gt(prs_acct_val(&s, PRS_SYS_IDLE, 0) + prs_acct_val(&s, PRS_SYS_USER, 0), 0);
}

/* ---- facts from a constructed profile ---- */

/* A profile of one thread: n samples of state/syscall at 100 Hz, 1 s in all. */
static struct prs_profile *profile_of(int n_run, int n_runq, int n_blocked, int syscall)
{
	struct prs_profile *p = prs_profile_new();
	uint32_t f = prs_profile_named_frame(p, PRS_KIND_NATIVE, prs_profile_string(p, "main", 4), 0, 0);
	uint32_t st = prs_profile_stack(p, 0, f);
	int total = n_run + n_runq + n_blocked;

	prs_profile_meta(p, "duration_s", "1");
	prs_profile_meta(p, "rate_hz", "100");
	for (int i = 0; i < total; i++) {
		struct prs_sample s = { (uint64_t)i * 10000000, 7, PRS_STATE_RUNNING, -1, st, 1, 0 };

		if (i >= n_run + n_runq) {
			s.state = PRS_STATE_BLOCKED;
			s.syscall = (int16_t)syscall;
		} else if (i >= n_run) {
			s.state = PRS_STATE_RUNQUEUE;
		}
		prs_profile_sample(p, &s);
	}
	return p;
}

static void store_thread(struct prs_profile *p, enum prs_acct_phase ph, uint64_t cpu, uint64_t runq)
{
	struct prs_acct a;

	prs_acct_init(&a, PRS_ACCT_THREAD, ph, 7);
	prs_acct_set(&a, PRS_TASK_CPU_NS, cpu);
	prs_acct_set(&a, PRS_TASK_RUNQ_NS, runq);
	prs_acct_store(p, &a);
}

Test(acct, facts_kernel_accounting_replaces_samples)
{
	struct prs_profile *p = profile_of(40, 60, 0, -1);
	struct prs_facts f;

	/* the samples say 40 % running, 60 % waiting for a CPU; the kernel says 30 % on-CPU, 10 %
	 * run-queue: the other 60 % are waits no sample caught */
	store_thread(p, PRS_PHASE_START, 1000000000, 500000000);
	store_thread(p, PRS_PHASE_END, 1300000000, 600000000);
	cr_assert_eq(prs_facts_build(p, &f, NULL), 0);
	cr_assert_eq(f.nthreads, 1);
	cr_assert(f.threads[0].kernel);
	cr_assert_float_eq(f.budget.f[PRS_R_CPU], 0.3, 1e-9);
	cr_assert_float_eq(f.budget.f[PRS_R_RUNQ], 0.1, 1e-9);
	cr_assert_float_eq(f.budget.f[PRS_R_UNSEEN], 0.6, 1e-9);
	prs_facts_release(&f);
	prs_profile_free(p);
}

/* A thread's on-CPU time split by the kernel's user/system ticks: the ratio of its utime and
 * stime deltas, applied to its exact on-CPU time; unknown without them. */
Test(acct, facts_thread_system_share_from_its_ticks)
{
	struct prs_profile *p = profile_of(40, 60, 0, -1);
	struct prs_facts f;
	struct prs_acct a;

	store_thread(p, PRS_PHASE_START, 1000000000, 500000000);
	cr_assert_eq(prs_facts_build(p, &f, NULL), 0);
	cr_assert(!f.threads[0].have_system, "no END record: no kernel accounting at all");
	prs_facts_release(&f);
	prs_acct_init(&a, PRS_ACCT_THREAD, PRS_PHASE_END, 7);
	prs_acct_set(&a, PRS_TASK_CPU_NS, 1300000000);
	prs_acct_set(&a, PRS_TASK_RUNQ_NS, 600000000);
	prs_acct_set(&a, PRS_TASK_UTIME_NS, 90000000); /* 90 ms user, 210 ms system since START (0) */
	prs_acct_set(&a, PRS_TASK_STIME_NS, 210000000);
	prs_acct_store(p, &a);
	cr_assert_eq(prs_facts_build(p, &f, NULL), 0);
	cr_assert(f.threads[0].have_system);
	cr_assert_float_eq(f.threads[0].system_share, 0.7, 1e-12);
	prs_facts_release(&f);
	prs_profile_free(p);
}

Test(acct, facts_ticks_from_the_session_not_the_sample_times)
{
	/* 5 processes (one thread each) on 2 CPUs for 1 s at 100 Hz: each tick stamps every
	 * process's sample with that target's own time (1 us apart), and 4 of them run at every tick:
	 * 400 CPU samples of 10 ms, 4 s of CPU in 1 s: 4 cores used, not 400 / 500 ticks' worth */
	struct prs_profile *p = prs_profile_new();
	uint32_t f = prs_profile_named_frame(p, PRS_KIND_NATIVE, prs_profile_string(p, "main", 4), 0, 0);
	uint32_t st = prs_profile_stack(p, 0, f);
	struct prs_facts fa;

	prs_profile_meta(p, "duration_s", "1");
	prs_profile_meta(p, "rate_hz", "100");
	prs_profile_meta(p, "ticks", "100");
	for (int k = 0; k < 100; k++)
		for (int pid = 0; pid < 5; pid++) {
			struct prs_sample s = { (uint64_t)k * 10000000 + (uint64_t)pid * 1000, 100 + pid,
						pid ? PRS_STATE_RUNNING : PRS_STATE_BLOCKED, pid ? -1 : 7, st,
						1, 0 };

			s.pid = 100 + pid;
			cr_assert_eq(prs_profile_sample(p, &s), 0);
		}
	cr_assert_eq(p->sample_times, 500); /* what the tick count was taken from before */
	cr_assert_eq(prs_facts_build(p, &fa, NULL), 0);
	cr_assert_float_eq(fa.tick_s, 0.01, 1e-12);
	cr_assert_float_eq(fa.budget.U, 4.0, 1e-9);
	prs_facts_release(&fa);
	prs_profile_free(p);
}

Test(acct, facts_unseen_waits_with_storage_traffic_are_disk)
{
	struct prs_profile *p = profile_of(40, 60, 0, -1);
	struct prs_facts f;
	struct prs_verdict v;
	struct prs_acct a;

	store_thread(p, PRS_PHASE_EXIT, 300000000, 100000000);
	prs_acct_init(&a, PRS_ACCT_PROCESS, PRS_PHASE_END, 7);
	prs_acct_set(&a, PRS_TASK_READ_BYTES, 50000000);
	prs_acct_set(&a, PRS_TASK_WRITE_BYTES, 0);
	prs_acct_store(p, &a);
	cr_assert_eq(prs_facts_build(p, &f, NULL), 0);
	cr_assert(f.unseen_disk);
	cr_assert_float_eq(f.budget.f[PRS_R_IO_DISK], 0.6, 1e-9);
	prs_classify(&f, &v);
	cr_assert_eq(v.primary.rule, PRS_RULE_IO);
	cr_assert_str_eq(v.primary.label, "IO/latency-bound (disk)");
	cr_assert_eq(v.primary.confidence, PRS_CONF_MEDIUM, "inferred disk waits are medium");
	prs_facts_release(&f);
	prs_profile_free(p);
}

static void store_system(struct prs_profile *p, enum prs_acct_phase ph, uint64_t busy, uint64_t idle,
			 uint64_t steal)
{
	struct prs_acct a;

	prs_acct_init(&a, PRS_ACCT_SYSTEM, ph, 0);
	prs_acct_set(&a, PRS_SYS_USER, busy);
	prs_acct_set(&a, PRS_SYS_IDLE, idle);
	prs_acct_set(&a, PRS_SYS_STEAL, steal);
	prs_acct_set(&a, PRS_SYS_NCPUS, 2);
	prs_acct_store(p, &a);
}

Test(acct, facts_runqueue_samples_doubted_on_idle_cpus)
{
	struct prs_profile *p = profile_of(40, 60, 0, -1);
	struct prs_facts f;

	store_system(p, PRS_PHASE_START, 1000, 1000, 0);
	store_system(p, PRS_PHASE_END, 1100, 1090, 10); /* 90 idle of 200: 45 %; steal 5 % */
	cr_assert_eq(prs_facts_build(p, &f, NULL), 0);
	cr_assert(f.runq_doubted);
	cr_assert_float_eq(f.idle_share, 0.45, 1e-9);
	cr_assert_float_eq(f.steal_share, 0.05, 1e-9);
	cr_assert_float_eq(f.budget.f[PRS_R_RUNQ], 0, 1e-9);
	cr_assert_float_eq(f.budget.f[PRS_R_UNSEEN], 0.6, 1e-9);
	cr_assert_eq(f.ncpus, 2);
	prs_facts_release(&f);
	prs_profile_free(p);
	/* busy CPUs: the samples are believed */
	p = profile_of(40, 60, 0, -1);
	store_system(p, PRS_PHASE_START, 1000, 1000, 0);
	store_system(p, PRS_PHASE_END, 1195, 1005, 0);
	cr_assert_eq(prs_facts_build(p, &f, NULL), 0);
	cr_assert(!f.runq_doubted);
	cr_assert_float_eq(f.budget.f[PRS_R_RUNQ], 0.6, 1e-9);
	prs_facts_release(&f);
	prs_profile_free(p);
}

Test(acct, facts_switch_records_keep_measured_runqueue_waits)
{
	struct prs_profile *p = profile_of(40, 60, 0, -1);
	struct prs_facts f;
	struct prs_acct a;

	/* idle CPUs would doubt the 60 % of run-queue samples; the thread's switch records measured
	 * 0.25 s waiting for a CPU after preemptions (two records: an EXIT and an END are summed) */
	store_system(p, PRS_PHASE_START, 1000, 1000, 0);
	store_system(p, PRS_PHASE_END, 1100, 1090, 10);
	for (int ph = PRS_PHASE_END; ph <= PRS_PHASE_EXIT; ph++) {
		prs_acct_init(&a, PRS_ACCT_SWITCH, (enum prs_acct_phase)ph, 7);
		prs_acct_set(&a, PRS_SW_PREEMPT, 30);
		prs_acct_set(&a, PRS_SW_PREEMPT_NS, 125000000);
		prs_acct_set(&a, PRS_SW_VOLUNTARY, 5);
		prs_acct_set(&a, PRS_SW_VOLUNTARY_NS, 10000000);
		prs_acct_set(&a, PRS_SW_STOPS, 50);
		prs_acct_store(p, &a);
	}
	cr_assert_eq(prs_facts_build(p, &f, NULL), 0);
	cr_assert(f.have_switches && f.threads[0].have_sw);
	cr_assert_eq(f.sw.preempt, 60);
	cr_assert_eq(f.sw.voluntary, 10);
	cr_assert_eq(f.sw.stops, 100);
	cr_assert_float_eq(f.sw.preempt_s, 0.25, 1e-9);
	cr_assert(f.runq_doubted);
	cr_assert_float_eq(f.budget.f[PRS_R_RUNQ], 0.25, 1e-9);
	cr_assert_float_eq(f.budget.f[PRS_R_UNSEEN], 0.35, 1e-9);
	prs_facts_release(&f);
	prs_profile_free(p);
}

Test(acct, facts_scaling_runs_from_meta)
{
	struct prs_profile *p = profile_of(100, 0, 0, -1);
	struct prs_facts f;

	prs_profile_meta(p, "scaling", "OMP_NUM_THREADS=1 wall_s=2.000000 cpu_s=1.990000 rc=0");
	prs_profile_meta(p, "scaling", "garbage");
	prs_profile_meta(p, "scaling", "OTHER=4 wall_s=1 cpu_s=1 rc=0"); /* another variable: left out */
	prs_profile_meta(p, "scaling", "OMP_NUM_THREADS=2 wall_s=1.050000 cpu_s=2.000000 rc=0");
	cr_assert_eq(prs_facts_build(p, &f, NULL), 0);
	cr_assert_eq(f.nscaling, 2);
	cr_assert_str_eq(f.scaling_var, "OMP_NUM_THREADS");
	cr_assert_str_eq(f.scaling[1].value, "2");
	cr_assert_float_eq(f.scaling[1].wall_s, 1.05, 1e-9);
	prs_facts_release(&f);
	prs_profile_free(p);
}

Test(acct, facts_sample_reasons_and_gil_flags)
{
	struct prs_profile *p = profile_of(20, 0, 80, SYS_clock_nanosleep);
	struct prs_facts f;

	p->samples[0].flags = PRS_SAMPLE_GIL;
	cr_assert_eq(prs_facts_build(p, &f, NULL), 0);
	cr_assert_float_eq(f.budget.f[PRS_R_SLEEP], 0.8, 1e-9);
	cr_assert_float_eq(f.threads[0].gil_hold, 1, 1e-9);
	cr_assert(!f.gil_measured);
	cr_assert_eq(f.threads[0].wait_syscall, SYS_clock_nanosleep);
	cr_assert_float_eq(f.threads[0].wait_syscall_share, 0.8, 1e-9);
	prs_facts_release(&f);
	prs_profile_free(p);
}

Test(acct, sample_reasons)
{
	struct prs_sample s = { 0, 1, PRS_STATE_BLOCKED, SYS_futex, 0, 1, 0 };

	cr_assert_eq(prs_sample_reason(&s), PRS_R_LOCK);
	s.flags = PRS_SAMPLE_GIL_WAIT;
	cr_assert_eq(prs_sample_reason(&s), PRS_R_GIL);
	s.flags = 0;
	s.syscall = SYS_read;
	cr_assert_eq(prs_sample_reason(&s), PRS_R_IO_NET);
	s.syscall = SYS_fsync;
	cr_assert_eq(prs_sample_reason(&s), PRS_R_IO_DISK);
	s.syscall = SYS_wait4;
	cr_assert_eq(prs_sample_reason(&s), PRS_R_CHILD);
	s.syscall = SYS_nanosleep;
	cr_assert_eq(prs_sample_reason(&s), PRS_R_SLEEP);
	s.syscall = SYS_epoll_wait;
	cr_assert_eq(prs_sample_reason(&s), PRS_R_IO_NET);
	s.syscall = -1;
	cr_assert_eq(prs_sample_reason(&s), PRS_R_PAGING);
	s.state = PRS_STATE_DISK;
	cr_assert_eq(prs_sample_reason(&s), PRS_R_IO_DISK);
	s.state = PRS_STATE_RUNQUEUE;
	cr_assert_eq(prs_sample_reason(&s), PRS_R_RUNQ);
	s.state = PRS_STATE_STOPPED;
	cr_assert_eq(prs_sample_reason(&s), PRS_R_OTHER);
}

/* A thread of process pid: of 100 ticks (10 ms apart, 1 s), `run` on a CPU, `runq` waiting for
 * one, the rest blocked in syscall nr but the last `tail`, blocked in nr2. */
static void add_thread2(struct prs_profile *p, uint32_t st, int32_t pid, int32_t tid, int run,
			int runq, int nr, int tail, int nr2)
{
	for (int k = 0; k < 100; k++) {
		struct prs_sample s = { (uint64_t)k * 10000000 + (uint64_t)tid, tid, PRS_STATE_RUNNING,
					-1, st, 1, 0 };

		s.pid = pid;
		if (k >= run + runq) {
			s.state = PRS_STATE_BLOCKED;
			s.syscall = (int16_t)(k >= 100 - tail ? nr2 : nr);
		} else if (k >= run) {
			s.state = PRS_STATE_RUNQUEUE;
		}
		cr_assert_eq(prs_profile_sample(p, &s), 0);
	}
}

static void add_thread(struct prs_profile *p, uint32_t st, int32_t pid, int32_t tid, int run,
		       int runq, int nr)
{
	add_thread2(p, st, pid, tid, run, runq, nr, 0, nr);
}

/* A multiprocessing pool's parent waiting for its results (pool.map: the main thread on the
 * result's futex 72 %, the pipe 15 %; its handler threads parked in read and futex) beside 4
 * busy worker processes, its children, on 2 CPUs: the parent is an idle waiter, not lock
 * contention, and the verdict is the workers' CPU saturation. */
static struct prs_profile *pool_profile(bool children)
{
	struct prs_profile *p = prs_profile_new();
	uint32_t f = prs_profile_named_frame(p, PRS_KIND_NATIVE, prs_profile_string(p, "main", 4), 0, 0);
	uint32_t st = prs_profile_stack(p, 0, f), cmd = prs_profile_string(p, "python3 pool.py", 15);

	prs_profile_meta(p, "duration_s", "1");
	prs_profile_meta(p, "rate_hz", "100");
	prs_profile_meta(p, "ticks", "100");
	cr_assert_eq(prs_profile_process(p, 1000, 1, cmd, 0), 0);
	add_thread2(p, st, 1000, 1000, 3, 10, SYS_futex, 15, SYS_read);
	add_thread(p, st, 1000, 1001, 0, 1, SYS_read);  /* _handle_workers */
	add_thread(p, st, 1000, 1002, 0, 0, SYS_futex); /* _handle_tasks */
	add_thread(p, st, 1000, 1003, 0, 1, SYS_read);  /* _handle_results */
	for (int w = 0; w < 4; w++) {
		/* workers: children of the parent, or (children false) of nobody we know */
		cr_assert_eq(prs_profile_process(p, 2000 + w, children ? 1000 : 0, cmd, 0), 0);
		add_thread(p, st, 2000 + w, 2000 + w, 45, 50, SYS_futex);
	}
	return p;
}

Test(acct, pool_parent_waiting_for_its_children_is_idle_not_lock_contention)
{
	struct prs_profile *p = pool_profile(true);
	struct prs_facts f;
	struct prs_verdict v;

	cr_assert_eq(prs_facts_build(p, &f, NULL), 0);
	cr_assert_eq(f.nthreads, 8);
	cr_assert_eq(f.threads[0].tid, 1000);
	cr_assert_eq(f.threads[0].pid, 1000);
	cr_assert_eq(f.threads[4].ppid, 1000, "the workers' parent, from the process tree");
	cr_assert_float_eq(f.threads[0].t[PRS_R_LOCK], 0.72, 1e-9);
	cr_assert(f.threads[0].idle, "the parent's main thread waits for its children's results");
	cr_assert_eq(f.budget.active, 4);
	cr_assert_eq(f.budget.idle, 4);
	cr_assert_float_eq(f.budget.f[PRS_R_LOCK], 0.05, 1e-9); /* the workers' own 5 % */
	prs_classify(&f, &v);
	cr_assert_eq(v.primary.rule, PRS_RULE_SATURATED);
	for (unsigned i = 0; i < v.nalso; i++)
		cr_assert_neq(v.also[i].rule, PRS_RULE_LOCK);
	prs_facts_release(&f);
	prs_profile_free(p);
	/* the same parent, the workers not known as its children: its lock waits count (what the
	 * lock rule then says of them is the rule's business: 0.72 of 5 threads' time) */
	p = pool_profile(false);
	cr_assert_eq(prs_facts_build(p, &f, NULL), 0);
	cr_assert(!f.threads[0].idle);
	cr_assert_eq(f.budget.active, 5);
	prs_facts_release(&f);
	prs_profile_free(p);
}
