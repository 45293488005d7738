/* SPDX-License-Identifier: MIT */
/*
 * The shared memory between pyrsprof and its LD_PRELOAD agent (libpyrsprof-agent.so): one memfd,
 * created by pyrsprof before it launches the program and passed to it by descriptor number
 * (PRS_AGENT_FD_ENV), mapped by both. It holds a header (the control channel: what pyrsprof tells
 * the agent, what the agent reports) and a ring of fixed-size slots, one thread-sample each.
 *
 * The ring is multi-producer (every thread's signal handler), single-consumer (pyrsprof's loop),
 * lock-free and never blocks a producer: a handler takes a ticket, tries the slots of its
 * thread's own run, then a few from the ticket's, with one compare-and-swap each (FREE ->
 * WRITING), writes the sample, then publishes it (READY). When no slot is free the sample is
 * dropped and counted. The consumer scans every slot for READY,
 * records them in the order of their sequence numbers and frees them. Only atomics on plain
 * words: both sides are this code, compiled by the same compiler, on x86_64.
 *
 * Everything the agent writes is untrusted by pyrsprof (a program can scribble on the mapping):
 * lengths are bounded by the consumer before use.
 */
#ifndef PYRSPROF_AGENT_RING_H
#define PYRSPROF_AGENT_RING_H

#include <stdbool.h>
#include <stdint.h>

#include "pyrsprof/pystack.h"
#include "pyrsprof/types.h"
#include "python/layout.h"
#include "python/walk.h"

#define PRS_AGENT_FD_ENV "PYRSPROF_AGENT_FD"
#define PRS_RING_MAGIC 0x31676e6972737270ull /* "prsring1" */
#define PRS_RING_VERSION 6
#define PRS_RING_SIGNAL_OFFSET 8  /* the agent's signal: SIGRTMIN + 8 */
#define PRS_RING_COOKIE 0x70727331 /* sigev_value of the agent's timers */
#define PRS_RING_ARM_COOKIE 0x70727332 /* sigqueue value: "arm yourself", to threads running at start */
#define PRS_RING_REARM_COOKIE 0x70727333 /* "the program closed your clock's descriptor" (fdguard.h) */
#define PRS_RING_CLAIM_TRIES 4    /* slots a producer tries before it drops the sample */
#define PRS_RING_HOME_RUN 16      /* slots of a thread's own run (prs_ring_claim_home) */
#define PRS_RING_SCRATCH (17 * 1024) /* a slot's scratch bytes, the agent's own (its page cache) */

enum prs_slot_state { PRS_SLOT_FREE = 0, PRS_SLOT_WRITING = 1, PRS_SLOT_READY = 2 };

/* What the agent says of itself (prs_ring_hdr.agent_state). */
enum prs_agent_state {
	PRS_AGENT_NONE = 0,    /* not started (yet) */
	PRS_AGENT_RUNNING = 1, /* signal installed, the first thread armed */
	PRS_AGENT_FAILED = 2,  /* gave up: agent_msg says why */
};

/*
 * How the agent measures each thread's CPU time (prs_ring_hdr.clock). A POSIX CPU timer expires
 * only at a scheduler tick (250 Hz here): its samples fall at the tick's instants, which a loop of
 * a period commensurate with the tick aliases with (cpu_split's 0.75 ms iterations: splits off by
 * 7 points). A perf task-clock event with a sample period overflows on an hrtimer, at exact
 * amounts of the thread's CPU time; it needs perf_event_open (perf_event_paranoid <= 2, not
 * forbidden by seccomp) and one descriptor per thread.
 */
enum prs_agent_clock {
	PRS_CLOCK_AUTO = 0,  /* a perf task-clock event, else a POSIX CPU timer */
	PRS_CLOCK_POSIX = 1, /* POSIX CPU timers only */
};

/* prs_ring_slot.flags */
enum {
	PRS_SLOTF_PY = 1u << 0,    /* slot->py holds this thread's Python frames */
	PRS_SLOTF_BOUNDED = 1u << 1, /* the stack was copied up to its known end (else read until a fault) */
};

struct prs_ring_hdr {
	uint64_t magic;
	uint32_t version;
	uint32_t nslots;
	uint64_t slot_size;      /* bytes per slot, a multiple of 64 */
	uint64_t slots_off;      /* offset of slot 0 from the header */
	uint32_t stack_cap;      /* stack bytes a slot holds */
	int32_t profiler_pid;    /* pyrsprof: the agent starts only in a child of it (a ring an
				  * agent made: its announcement's peer, for the exit wait) */
	uint64_t period_ns;      /* per-thread CPU time between samples */
	/* agent -> pyrsprof */
	int32_t target_pid;      /* the process the agent runs in (set once, by compare-and-swap) */
	uint32_t generation;     /* agent starts in it: 1, then one more at each exec */
	int32_t agent_state;     /* enum prs_agent_state */
	int32_t agent_errno;
	char agent_msg[124];
	uint64_t ticket;         /* next slot ticket */
	/* timers: threads armed with a POSIX CPU timer; perf_clocks: with a task-clock event;
	 * foreign: signals of the agent's number it did not send, passed to the program's action */
	uint64_t written, dropped, timers, perf_clocks, timer_errors, py_walks, py_errors, foreign;
	uint32_t program_handler; /* 1: the program set a handler for the agent's signal (chained) */
	uint32_t program_sigprof; /* 1: the program set a SIGPROF handler (its own, untouched) */
	/* set by the agent just before an exec of the sampled process, for the new image's agent,
	 * which finds SIG_IGN (the agent's, across the exec) whatever the program's action was */
	int32_t exec_pid;        /* the process that exec'ed (0: none) */
	uint32_t exec_ignored;   /* 1: the program's own action was SIG_IGN */
	/* --subprocesses (follow.h): forks of this process (counted before each), and its forked
	 * children that could not make or announce a ring of their own (they run unprofiled) */
	uint64_t forks, children_lost;
	/* --subprocesses: a followed process waits at its exit, bounded, for pyrsprof to read the
	 * samples it wrote before (their Python frames are named from its live memory: read after
	 * its exit, they cannot be). exit_ns: CLOCK_MONOTONIC when the wait began (0: not exiting),
	 * what follows is the agent's time, not the program's; exit_wait_ns: how long it waited;
	 * exit_unread: its samples still unread when it gave up (follow-agent.h) */
	uint64_t exit_ns, exit_wait_ns, exit_unread;
	/* pyrsprof -> agent */
	uint64_t read;           /* samples pyrsprof has read: written - read is the backlog that
				  * thins the agent's samples (agent.c thin_out) */
	uint32_t stop;           /* 1: sample no more */
	uint32_t clock;          /* enum prs_agent_clock */
	uint32_t py_gen;         /* py_walk and py_layout are for this generation (0: none; set
				  * with release after them) */
	struct prs_pywalk py_walk; /* its L is meaningless here: the agent points it at py_layout */
	struct prs_py_layout py_layout;
};

struct prs_ring_slot {
	uint32_t state;          /* enum prs_slot_state */
	uint32_t flags;          /* PRS_SLOTF_* */
	int32_t tid;
	uint32_t stack_len;      /* bytes of stack[] from regs[PRS_REG_RSP] */
	/* periods of CPU time this sample stands for: 1 + the timer's overruns (CPU timers fire
	 * at the scheduler tick at best: at 250 Hz ticks, a 1 ms period is sampled every 4 ms) */
	uint32_t weight;
	uint32_t gen;            /* the agent's generation (prs_ring_hdr.generation) that wrote it */
	uint64_t seq;            /* the ticket: order of the samples */
	uint64_t time_ns;        /* CLOCK_MONOTONIC at the signal */
	uint64_t handler_ns;     /* the handler's own time up to the copy's end */
	uint64_t regs[PRS_NREGS]; /* DWARF order (pyrsprof/types.h) */
	uint64_t fs_base;        /* pthread_self() */
	struct prs_py_stack py;  /* valid with PRS_SLOTF_PY */
	/* the agent's working memory while it fills the slot (not on the interrupted thread's
	 * stack, whose room is unknown); meaningless to pyrsprof */
	uint64_t scratch[PRS_RING_SCRATCH / 8];
	uint8_t stack[];         /* stack_cap bytes */
};

/* Bytes of the whole mapping for nslots slots of stack_cap stack bytes. */
static inline uint64_t prs_ring_slot_size(uint32_t stack_cap)
{
	return ((uint64_t)sizeof(struct prs_ring_slot) + stack_cap + 63) & ~63ull;
}

static inline uint64_t prs_ring_slots_off(void)
{
	return ((uint64_t)sizeof(struct prs_ring_hdr) + 4095) & ~4095ull;
}

static inline uint64_t prs_ring_size(uint32_t nslots, uint32_t stack_cap)
{
	return prs_ring_slots_off() + (uint64_t)nslots * prs_ring_slot_size(stack_cap);
}

static inline struct prs_ring_slot *prs_ring_slot(struct prs_ring_hdr *h, uint32_t i)
{
	return (struct prs_ring_slot *)((uint8_t *)h + h->slots_off + (uint64_t)i * h->slot_size);
}

/* Producer: slot i, now WRITING, if it was FREE. */
static inline bool prs_ring_take(struct prs_ring_slot *sl)
{
	uint32_t want = PRS_SLOT_FREE;

	return __atomic_compare_exchange_n(&sl->state, &want, PRS_SLOT_WRITING, false, __ATOMIC_ACQUIRE,
					   __ATOMIC_RELAXED);
}

/*
 * Producer: slot i of the ring, now WRITING and stamped with ticket t, if it was FREE; *home
 * becomes it.
 */
static inline struct prs_ring_slot *prs_ring_take_at(struct prs_ring_hdr *h, uint32_t i, uint64_t t,
						     uint32_t *home)
{
	struct prs_ring_slot *sl = prs_ring_slot(h, i);

	if (!prs_ring_take(sl))
		return NULL;
	sl->seq = t;
	*home = i + 1;
	return sl;
}

/*
 * Producer: a free slot of the run of PRS_RING_HOME_RUN slots that holds slot start (the runs
 * tile the ring from slot 0; the last one may be shorter), tried from start on, wrapping within
 * the run; NULL when all of them are taken.
 */
static inline struct prs_ring_slot *prs_ring_take_run(struct prs_ring_hdr *h, uint32_t start,
						      uint64_t t, uint32_t *home)
{
	uint32_t n = h->nslots, base = start - start % PRS_RING_HOME_RUN;
	uint32_t len = n - base < PRS_RING_HOME_RUN ? n - base : PRS_RING_HOME_RUN;

	for (uint32_t k = 0; k < len; k++) {
		uint32_t i = start + k < base + len ? start + k : start + k - len;
		struct prs_ring_slot *sl = prs_ring_take_at(h, i, t, home);

		if (sl)
			return sl;
	}
	return NULL;
}

/*
 * Producer: a free slot, now WRITING and stamped with its sequence number (the ticket), or NULL
 * (the sample is dropped and counted). *home is 0 for a thread's first sample, else the slot it
 * wrote last + 1, and becomes the slot taken.
 *
 * A thread writes the slots of its own run (prs_ring_take_run: the slot it wrote last, then the
 * next ones of its run), so that the memory it writes is memory its CPU wrote a few samples ago:
 * at 1000 Hz pyrsprof frees the slots every 10th period, so a thread writes ~10 slots between
 * two looks, and slots taken from the ticket went round all 128 (13 MB of slots, a slot's
 * lines last written 128 samples before, by any thread, and read by pyrsprof since: cold in
 * cache and TLB). A slot first written costs its page faults too (the memfd's pages are
 * allocated by their first writer): at 100 Hz a ring of 128 slots is 1.3 s around, so each
 * sample found its slot cold (8-25 us in the handler, 1 us from a warm one). Its first sample
 * takes the ticket's slot (threads' runs spread as their first samples do); a run full (a late
 * look, or threads sharing it) falls back to PRS_RING_CLAIM_TRIES slots from the ticket's,
 * keeping its run. Measured (bench_preload.py --base, preload-nok, 4 ABBA pairs, load 15-17):
 * at 1000 Hz the handler's median 1.9 -> 0.8 us on Rust cpu_split_rs (p90 63 -> 14 us), 38.6 ->
 * 4.4 us on 20 Python frames, the program 5-6 % faster per second of its CPU; 100 Hz unchanged.
 * (A model of it within one process, a writer thread and a reader process, showed no difference:
 * ~1.3 us either way. What the real program pays is not that memcpy's cost.)
 * Async-signal-safe, wait-free.
 */
static inline struct prs_ring_slot *prs_ring_claim_home(struct prs_ring_hdr *h, uint32_t *home)
{
	uint64_t t = __atomic_fetch_add(&h->ticket, 1, __ATOMIC_RELAXED);
	uint32_t n = h->nslots, keep = *home;
	struct prs_ring_slot *sl;

	if (*home && *home <= n && (sl = prs_ring_take_run(h, *home - 1, t, home)))
		return sl;
	for (uint32_t k = 0; k < PRS_RING_CLAIM_TRIES; k++) {
		if ((sl = prs_ring_take_at(h, (uint32_t)((t + k) % n), t, home))) {
			if (keep && keep <= n)
				*home = keep; /* its run stays its own */
			return sl;
		}
	}
	__atomic_fetch_add(&h->dropped, 1, __ATOMIC_RELAXED);
	return NULL;
}

/* Producer: as prs_ring_claim_home without a slot of its own (the ticket's slots only). */
static inline struct prs_ring_slot *prs_ring_claim(struct prs_ring_hdr *h)
{
	uint32_t none = 0;

	return prs_ring_claim_home(h, &none);
}

/* Producer: makes a claimed slot visible to the consumer. */
static inline void prs_ring_publish(struct prs_ring_hdr *h, struct prs_ring_slot *sl)
{
	__atomic_store_n(&sl->state, PRS_SLOT_READY, __ATOMIC_RELEASE);
	__atomic_fetch_add(&h->written, 1, __ATOMIC_RELAXED);
}

/*
 * Producer, before claiming a slot: whether this period's sample is skipped because the consumer
 * lags (written - read samples unread of nslots). Up to half the ring, every period is sampled;
 * then one period in 2, 4, ... 64 as the second half fills (about nslots / free slots): a ring
 * pyrsprof does not read holds 4 * nslots periods (512 for 128 slots), not nslots, spread over
 * them all instead of the first nslots. *periods counts the periods (add: 1 + a timer's overruns) since the last
 * sample kept: the next sample kept weighs that much (the caller zeroes it then). Pure.
 */
#define PRS_RING_THIN_MAX 64
static inline bool prs_ring_thin_skip(uint64_t written, uint64_t read, uint32_t nslots,
				      uint32_t *periods, uint32_t add)
{
	uint64_t lag = written > read ? written - read : 0;
	uint64_t left = nslots > lag ? nslots - lag : 1;
	uint32_t thin = 1;

	while (thin < PRS_RING_THIN_MAX && left * thin * 2 <= nslots)
		thin *= 2;
	*periods = *periods + add < 1000000 ? *periods + add : 1000000;
	return *periods < thin;
}

/* Consumer: true when slot sl holds a sample to read (its contents are then visible). */
static inline bool prs_ring_ready(const struct prs_ring_slot *sl)
{
	return __atomic_load_n(&sl->state, __ATOMIC_ACQUIRE) == PRS_SLOT_READY;
}

/* Consumer: gives a slot read back to the producers. */
static inline void prs_ring_release(struct prs_ring_slot *sl)
{
	__atomic_store_n(&sl->state, PRS_SLOT_FREE, __ATOMIC_RELEASE);
}

#endif
