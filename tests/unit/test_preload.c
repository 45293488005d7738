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

Test(preload_ring, a_thread_writes_its_last_slot_again_when_free)
{
	struct prs_ring_hdr *h = ring_make(8, 64);
	struct prs_ring_slot *a, *b, *c;
	uint32_t home = 0, other = 0;

	a = prs_ring_claim_home(h, &home);
	cr_assert_eq(a, prs_ring_slot(h, 0));
	cr_assert_eq(home, 1);
	prs_ring_publish(h, a);
	/* another thread's samples move the ticket on (each in its own slot, 1, read at once) */
	for (int i = 0; i < 3; i++) {
		b = prs_ring_claim_home(h, &other);
		cr_assert(b);
		prs_ring_publish(h, b);
		prs_ring_release(b);
	}
	cr_assert_eq(other, 2);
	/* its slot not read yet: the ticket's (tickets 0-3 taken, this one is 4) */
	c = prs_ring_claim_home(h, &home);
	cr_assert_eq(c, prs_ring_slot(h, 4));
	cr_assert_eq(c->seq, 4);
	cr_assert_eq(home, 5);
	prs_ring_publish(h, c);
	/* read and freed: the same slot again, whatever the ticket, stamped with the ticket */
	prs_ring_release(c);
	c = prs_ring_claim_home(h, &home);
	cr_assert_eq(c, prs_ring_slot(h, 4));
	cr_assert_eq(c->seq, 5);
	cr_assert_eq(home, 5);
	prs_ring_publish(h, c);
	/* a home past the ring (the program scribbled on the agent's memory) is not used */
	home = 9;
	c = prs_ring_claim_home(h, &home);
	cr_assert_eq(c, prs_ring_slot(h, 6));
	cr_assert_eq(home, 7);
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
