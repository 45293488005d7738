/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of --mode preload's pieces that need no program: the shared ring (src/agent/ring.h:
 * claims, a full ring dropping and counting instead of blocking, several producer threads
 * against a consumer with every sample accounted for exactly once), and the launch checks
 * (src/sample/preload_launch.c: a static, a set-user-ID and a dynamic program; LD_PRELOAD
 * appended to the user's value and put back).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/follow.h"
#include "agent/ring.h"
#include "pyrsprof/task.h"
#include "sample/offtime-internal.h"
#include "sample/preload-internal.h"

#include "util/banned.h"

static struct prs_ring_hdr *ring_make(uint32_t nslots, uint32_t cap)
{
	uint64_t size = prs_ring_size(nslots, cap);
	struct prs_ring_hdr *h = aligned_alloc(4096, (size + 4095) & ~4095ull);

	cr_assert(h);
	memset(h, 0, size);
	h->magic = PRS_RING_MAGIC;
	h->nslots = nslots;
	h->stack_cap = cap;
	h->slot_size = prs_ring_slot_size(cap);
	h->slots_off = prs_ring_slots_off();
	return h;
}

/* Claims a slot for a thread whose last slot is *home (0: none) and publishes it: its index. */
static uint32_t claim_index(struct prs_ring_hdr *h, uint32_t *home)
{
	struct prs_ring_slot *sl = prs_ring_claim_home(h, home);

	cr_assert(sl);
	prs_ring_publish(h, sl);
	return (uint32_t)(((uint8_t *)sl - ((uint8_t *)h + h->slots_off)) / h->slot_size);
}

Test(preload_ring, a_thread_writes_its_last_slot_again_when_free)
{
	struct prs_ring_hdr *h = ring_make(8, 64);
	uint32_t home = 0;

	cr_assert_eq(claim_index(h, &home), 0);
	cr_assert_eq(home, 1);
	prs_ring_release(prs_ring_slot(h, 0));
	/* read and freed: the same slot again, stamped with the next ticket */
	cr_assert_eq(claim_index(h, &home), 0);
	cr_assert_eq(prs_ring_slot(h, 0)->seq, 1);
	cr_assert_eq(home, 1);
	cr_assert_eq(h->dropped, 0);
	free(h);
}

Test(preload_ring, a_thread_keeps_to_its_run_of_slots)
{
	/* runs of PRS_RING_HOME_RUN (16): [0, 16), [16, 32) and a short one, [32, 40) */
	struct prs_ring_hdr *h = ring_make(40, 64);
	uint32_t home = 0, other = 0;

	cr_assert_eq(PRS_RING_HOME_RUN, 16);
	/* its first sample takes the ticket's slot, 0; then the next slots of its run while pyrsprof
	 * has not read them, in order */
	for (uint32_t i = 0; i < 16; i++) {
		cr_assert_eq(claim_index(h, &home), i);
		cr_assert_eq(prs_ring_slot(h, i)->seq, i);
		cr_assert_eq(home, i + 1);
	}
	/* its run full (a late look): the ticket's slot (16), and its run is kept */
	cr_assert_eq(claim_index(h, &home), 16);
	cr_assert_eq(home, 16);
	/* pyrsprof read slot 3: found from its last slot (15) on, wrapping within its run */
	prs_ring_release(prs_ring_slot(h, 3));
	cr_assert_eq(claim_index(h, &home), 3);
	cr_assert_eq(home, 4);
	/* another thread whose first slot is in the short last run wraps within it: 34 .. 39, 32 */
	h->ticket = 34;
	for (uint32_t i = 34; i < 40; i++)
		cr_assert_eq(claim_index(h, &other), i);
	cr_assert_eq(claim_index(h, &other), 32);
	cr_assert_eq(claim_index(h, &other), 33);
	cr_assert_eq(other, 34);
	/* a home past the ring (the program scribbled on the agent's memory) is not used: the first
	 * free slot from the ticket's (3 and 4 taken, 5 read), which becomes its home */
	home = 41;
	prs_ring_release(prs_ring_slot(h, 5));
	h->ticket = 3;
	cr_assert_eq(claim_index(h, &home), 5);
	cr_assert_eq(home, 6);
	cr_assert_eq(h->dropped, 0);
	free(h);
}

Test(preload_ring, full_ring_drops_and_counts)
{
	struct prs_ring_hdr *h = ring_make(8, 64);
	struct prs_ring_slot *sl[8];

	for (int i = 0; i < 8; i++) {
		sl[i] = prs_ring_claim(h);
		cr_assert(sl[i], "slot %d", i);
		sl[i]->tid = 100 + i;
		prs_ring_publish(h, sl[i]);
	}
	cr_assert_null(prs_ring_claim(h));
	cr_assert_eq(h->dropped, 1);
	cr_assert_eq(h->written, 8);
	/* the consumer frees one: the next claim finds it, whatever its ticket */
	cr_assert(prs_ring_ready(sl[3]));
	prs_ring_release(sl[3]);
	cr_assert_eq(prs_ring_claim(h), sl[3]);
	cr_assert_eq(sl[3]->seq, 9); /* tickets 0-7, 8 dropped, 9 */
	free(h);
}

Test(preload_ring, slots_do_not_overlap)
{
	struct prs_ring_hdr *h = ring_make(4, 1000);
	struct prs_ring_slot *a = prs_ring_slot(h, 0), *b = prs_ring_slot(h, 1);

	cr_assert_geq((uint8_t *)b - (uint8_t *)a, (long)(sizeof(*a) + 1000));
	cr_assert_eq(((uintptr_t)b - (uintptr_t)h) % 64, 0);
	cr_assert_leq((uint64_t)((uint8_t *)prs_ring_slot(h, 3) + h->slot_size - (uint8_t *)h),
		      prs_ring_size(4, 1000));
	free(h);
}

/* ---- producers against a consumer ---- */

#define PRODUCERS 4
#define PER_PRODUCER 20000

struct prod {
	struct prs_ring_hdr *h;
	int id;
};

static void *producer(void *arg)
{
	struct prod *p = arg;

	for (int i = 0; i < PER_PRODUCER; i++) {
		struct prs_ring_slot *sl = prs_ring_claim(p->h);

		if (!sl)
			continue;
		sl->tid = p->id;
		sl->time_ns = (uint64_t)i;
		prs_ring_publish(p->h, sl);
	}
	return NULL;
}

Test(preload_ring, producers_and_consumer_account_for_every_sample)
{
	struct prs_ring_hdr *h = ring_make(16, 64);
	pthread_t th[PRODUCERS];
	struct prod pr[PRODUCERS];
	uint64_t total = 0;
	static bool seen[PRODUCERS][PER_PRODUCER];
	bool running = true;

	for (int i = 0; i < PRODUCERS; i++) {
		pr[i] = (struct prod){ h, i };
		cr_assert_eq(pthread_create(&th[i], NULL, producer, &pr[i]), 0);
	}
	while (running || total < __atomic_load_n(&h->written, __ATOMIC_ACQUIRE)) {
		running = __atomic_load_n(&h->written, __ATOMIC_RELAXED) +
				  __atomic_load_n(&h->dropped, __ATOMIC_RELAXED) <
			  (uint64_t)PRODUCERS * PER_PRODUCER;
		for (uint32_t s = 0; s < h->nslots; s++) {
			struct prs_ring_slot *sl = prs_ring_slot(h, s);

			if (!prs_ring_ready(sl))
				continue;
			cr_assert(sl->tid >= 0 && sl->tid < PRODUCERS && sl->time_ns < PER_PRODUCER);
			/* each sample read once, intact (a slot is reused only once read) */
			cr_assert(!seen[sl->tid][sl->time_ns], "sample %d/%d read twice", sl->tid,
				  (int)sl->time_ns);
			seen[sl->tid][sl->time_ns] = true;
			total++;
			prs_ring_release(sl);
		}
	}
	for (int i = 0; i < PRODUCERS; i++)
		pthread_join(th[i], NULL);
	cr_assert_eq(total, h->written);
	cr_assert_eq(h->written + h->dropped, (uint64_t)PRODUCERS * PER_PRODUCER);
	free(h);
}

/* ---- launch checks ---- */

static char *build_target(const char *name)
{
	static char path[512];

	snprintf(path, sizeof(path), "build/targets/%s", name);
	if (access(path, X_OK) != 0)
		cr_skip_test("%s not built (make targets)", path);
	return path;
}

Test(preload_launch, static_program_refused)
{
	struct prs_err err = { 0 };

	cr_assert_eq(prs_preload_check_program(build_target("static_hello"), NULL, &err), -ENOTSUP);
	cr_assert(strstr(err.msg, "statically linked") && strstr(err.msg, "--mode ptrace"), "%s", err.msg);
}

Test(preload_launch, dynamic_program_and_script_pass)
{
	struct prs_err err = { 0 };

	cr_assert_eq(prs_preload_check_program(build_target("cpu_split"), NULL, &err), 0);
	cr_assert_eq(prs_preload_check_program("sh", NULL, &err), 0);          /* found in PATH */
	cr_assert_eq(prs_preload_check_program("tests/targets/py/chain.py", NULL, &err), 0); /* not ELF */
	cr_assert_eq(prs_preload_check_program("no-such-program-here", NULL, &err), 0); /* exec says */
}

Test(preload_launch, setuid_program_refused)
{
	char path[] = "/tmp/prs-suid-XXXXXX";
	struct prs_err err = { 0 };
	int fd = mkstemp(path);

	cr_assert_geq(fd, 0);
	cr_assert_eq(fchmod(fd, 04755), 0);
	close(fd);
	cr_assert_eq(prs_preload_check_program(path, NULL, &err), -EPERM);
	cr_assert(strstr(err.msg, "set-user-ID"), "%s", err.msg);
	unlink(path);
}

Test(preload_launch, ld_preload_appended_then_restored)
{
	struct prs_preload_env e = { 0 };
	struct prs_err err = { 0 };

	setenv("LD_PRELOAD", "/lib/user.so", 1);
	cr_assert_eq(prs_preload_env_set(&e, "/opt/agent.so", 7, NULL, &err), 0);
	cr_assert_str_eq(getenv("LD_PRELOAD"), "/lib/user.so:/opt/agent.so");
	cr_assert_str_eq(getenv(PRS_AGENT_FD_ENV), "7");
	prs_preload_env_restore(&e);
	cr_assert_str_eq(getenv("LD_PRELOAD"), "/lib/user.so");
	cr_assert_null(getenv(PRS_AGENT_FD_ENV));
	unsetenv("LD_PRELOAD");
	cr_assert_eq(prs_preload_env_set(&e, "/opt/agent.so", 7, NULL, &err), 0);
	cr_assert_str_eq(getenv("LD_PRELOAD"), "/opt/agent.so");
	prs_preload_env_restore(&e);
	cr_assert_null(getenv("LD_PRELOAD"));
	/* --subprocesses: the follow configuration too, and gone after */
	cr_assert_eq(prs_preload_env_set(&e, "/opt/agent.so", 7, "n,1000000,128,65536,0", &err), 0);
	cr_assert_str_eq(getenv(PRS_FOLLOW_ENV), "n,1000000,128,65536,0");
	prs_preload_env_restore(&e);
	cr_assert_null(getenv(PRS_FOLLOW_ENV));
}

Test(task_stat, start_time_is_parsed)
{
	struct prs_task_stat st;
	const char *text = "42 (a) b) S 1 42 42 0 -1 4194560 100 0 0 0 7 3 0 0 20 0 1 0 123456 "
			   "2000000 300 18446744073709551615";

	cr_assert_eq(prs_task_parse_stat(text, &st), 0);
	cr_assert(st.times && st.started);
	cr_assert_eq(st.utime, 7);
	cr_assert_eq(st.starttime, 123456);
	/* cut short after the times: no start time */
	cr_assert_eq(prs_task_parse_stat("42 (a) S 1 42 42 0 -1 0 1 0 0 0 7 3 0 0", &st), 0);
	cr_assert(st.times && !st.started);
}

/* ---- a thread's time off a CPU between looks (src/sample/offtime-internal.h) ---- */

#define MS 1000000ull

/* One look at now (ms) with the schedstat cpu/wait (ms): the periods of 1 ms due, the sleep's
 * only when asleep. */
static struct prs_offtime_due {
	uint32_t sleep, wait;
} look(struct prs_offtime *o, uint64_t now, uint64_t cpu, uint64_t wait, bool asleep)
{
	struct prs_schedstat ss = { .cpu_ns = cpu * MS, .wait_ns = wait * MS, .slices = 1 };
	struct prs_offtime_due d;

	prs_offtime_add(o, now * MS, &ss, MS, 0);
	d.wait = prs_offtime_take(&o->wait_owed_ns, MS);
	d.sleep = asleep ? prs_offtime_take(&o->sleep_owed_ns, MS) : 0;
	return d;
}

Test(offtime, a_window_is_cpu_wait_and_sleep)
{
	struct prs_offtime o = { 0 };
	struct prs_offtime_due d;

	d = look(&o, 100, 40, 3, true); /* the first look: the base; its waits since it started */
	cr_assert_eq(d.sleep, 0);
	cr_assert_eq(d.wait, 3);
	d = look(&o, 110, 44, 4, true); /* 10 ms: 4 on a CPU, 1 waiting, 5 asleep */
	cr_assert_eq(d.sleep, 5);
	cr_assert_eq(d.wait, 1);
	d = look(&o, 120, 54, 4, false); /* ran the whole window */
	cr_assert_eq(d.sleep + d.wait, 0);
}

Test(offtime, a_running_thread_keeps_its_sleep_for_a_look_that_finds_it_asleep)
{
	struct prs_offtime o = { 0 };
	struct prs_offtime_due d;

	look(&o, 0, 0, 0, false);
	d = look(&o, 10, 3, 0, false); /* slept 7 ms, running now */
	cr_assert_eq(d.sleep, 0);
	d = look(&o, 20, 8, 0, false); /* 5 more */
	cr_assert_eq(d.sleep, 0);
	d = look(&o, 30, 8, 0, true);  /* and 10 more, asleep now: all of it, once */
	cr_assert_eq(d.sleep, 22);
	d = look(&o, 40, 8, 0, true);
	cr_assert_eq(d.sleep, 10);
}

Test(offtime, late_readings_are_given_back_and_fractions_carried)
{
	struct prs_offtime o = { 0 };
	uint32_t slept = 0;

	look(&o, 0, 0, 0, false);
	/* a runnable thread's wait shows when it ends, its CPU time lags while it runs: the first
	 * window reads 6 ms of sleep that were a wait and CPU time, the second gives them back */
	slept += look(&o, 10, 4, 0, true).sleep;
	cr_assert_eq(slept, 6);
	slept += look(&o, 20, 14, 6, true).sleep; /* 10 ms: 10 on a CPU, 6 of wait read late */
	cr_assert_eq(slept, 6);
	slept += look(&o, 30, 20, 6, true).sleep; /* 4 ms asleep, owed -6 + 4: none yet */
	cr_assert_eq(slept, 6);
	/* 0.5 ms fractions over many looks: the total is the truth within a period */
	for (uint64_t i = 1; i <= 400; i++) {
		struct prs_schedstat ss = { .cpu_ns = 20 * MS + i * MS / 2, .wait_ns = 6 * MS };

		prs_offtime_add(&o, 30 * MS + i * MS, &ss, MS, 0);
		slept += prs_offtime_take(&o.sleep_owed_ns, MS);
	}
	/* truth: the wall time less the CPU time less the wait, 430 - 220 - 6 ms */
	cr_assert_eq(slept, 204);
}

Test(offtime, a_thread_found_late_owes_its_sleep_since_its_start)
{
	struct prs_offtime o = { 0 };
	struct prs_schedstat ss = { .cpu_ns = 30 * MS, .wait_ns = 5 * MS, .slices = 4 };

	/* started at 100 ms, found at 250: 150 ms of life, 30 on a CPU, 5 waiting */
	prs_offtime_add(&o, 250 * MS, &ss, MS, 100 * MS);
	cr_assert_eq(prs_offtime_take(&o.sleep_owed_ns, MS), 115);
	cr_assert_eq(prs_offtime_take(&o.wait_owed_ns, MS), 5);
	/* a start not known, or not before the look: nothing owed for the time before */
	memset(&o, 0, sizeof(o));
	prs_offtime_add(&o, 250 * MS, &ss, MS, 0);
	cr_assert_eq(o.sleep_owed_ns, 0);
	memset(&o, 0, sizeof(o));
	prs_offtime_add(&o, 250 * MS, &ss, MS, 240 * MS); /* (a start rounded up past the look) */
	cr_assert_eq(o.sleep_owed_ns, 0);
}

Test(offtime, a_reused_tid_is_a_new_thread_and_counts_are_bounded)
{
	struct prs_offtime o = { 0 };
	struct prs_offtime_due d;

	look(&o, 0, 500, 50, false);
	d = look(&o, 10, 2, 1, true); /* CPU time went back: a new thread, based again */
	cr_assert_eq(d.sleep, 0);
	cr_assert_eq(d.wait, 1);
	d = look(&o, 20000, 2, 1, true); /* 19.99 s asleep: 10000 periods now, 9990 owed after */
	cr_assert_eq(d.sleep, 10000);
	cr_assert_eq(o.sleep_owed_ns, (int64_t)(9990 * MS));
	d = look(&o, 60000, 2, 1, true); /* more than 10000 periods owed beyond: forgotten */
	cr_assert_eq(d.sleep, 10000);
	cr_assert_eq(o.sleep_owed_ns, 0);
}
