/* SPDX-License-Identifier: MIT */
/*
 * Kernel stacks from per-thread perf_event_open rings, merged under the user stacks (see
 * kstack-internal.h for what is matched with what, and why).
 */
#include "sample/kstack-internal.h"

#include <errno.h>
#include <asm/perf_regs.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "pyrsprof/counters.h"
#include "pyrsprof/kallsyms.h"
#include "sample/ksample-internal.h"
#include "sample/kstack_rate-internal.h"
#include "sample/sampler-internal.h"
#include "util/banned.h"

#define RING_PAGES 8            /* data pages per thread (a power of 2): 32 KiB, ~50 ticks */
/* with user stacks: a sample is 8.3 KiB, 2 per tick at the full rate: 64 KiB, ~4 ticks */
#define RING_PAGES_USER 16
#define KERNEL_HALF 0xffff800000000000ull /* x86-64: kernel addresses are above */
/* Threads with an event at once: one descriptor and a 36 KiB mapping each, so a process with
 * thousands of threads cannot use up pyrsprof's descriptors (the symbolizer needs them at the
 * end); the threads beyond get no kernel frames. */
#define MAX_EVENTS 256
#define MAX_IRQ_ENTRIES 64      /* interrupt entry points told apart (x86-64 has ~25) */

struct prs_kstack {
	uint32_t mapping;       /* the profile's kernel mapping: kernel PCs are its raw frames */
	uint64_t sample_ns;     /* the events' full-rate period of CPU time (kstack_rate.c) */
	int nevents;            /* threads with an open event (MAX_EVENTS at most) */
	uint64_t opened;        /* events ever opened on the target's threads */
	uint64_t perf_samples, matched; /* (prs_kstack_counts) */
	uint64_t lowered_samples, period_changes, young; /* (prs_kstack_counts) */
	uint64_t w_all, w_kernel; /* (prs_kstack_counts) */
	/* the kernel's interrupt entries (asm_sysvec_*, asm_common_interrupt): a perf sample whose
	 * outermost kernel frame is one of them caught an interrupt of the thread's user code (a
	 * timer, a reschedule IPI, the preemption it ends in), not work the thread asked for */
	struct prs_krange irq[MAX_IRQ_ENTRIES];
	size_t nirq;
	bool on;
	bool user_stacks;       /* the samples carry user registers and stack (prs_kstack_user) */
	uint64_t user_taken, user_reused, user_missed, held_samples; /* (prs_kstack_counts) */
	char why[320];
};

void prs_kstack_attr(struct perf_event_attr *a, uint64_t sample_ns, bool user_stacks)
{
	memset(a, 0, sizeof(*a));
	a->size = sizeof(*a);
	a->type = PERF_TYPE_SOFTWARE;
	a->config = PERF_COUNT_SW_CPU_CLOCK;
	a->sample_period = sample_ns;
	a->sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TIME | PERF_SAMPLE_CALLCHAIN |
			 PERF_SAMPLE_REGS_USER;
	a->exclude_callchain_user = 1; /* the user side is the tick's own unwind */
	a->sample_regs_user = 1ull << PERF_REG_X86_IP; /* where the user code trapped */
	a->exclude_hv = 1;
	a->use_clockid = 1;
	a->clockid = CLOCK_MONOTONIC; /* the sampler's clock (prs_now_ns) */
	a->sample_max_stack = PRS_KSTACK_MAX;
	if (user_stacks) {
		/* the registers a CFI unwind starts from, and the top of the user stack, as perf
		 * record --call-graph dwarf takes them (prs_kstack_user) */
		a->sample_type |= PERF_SAMPLE_STACK_USER;
		a->sample_regs_user = prs_ksample_unwind.regs_mask;
		a->sample_stack_user = PRS_KSTACK_USTACK;
	}
}

static int open_event(pid_t tid, uint64_t sample_ns, bool user_stacks)
{
	struct perf_event_attr a;

	prs_kstack_attr(&a, sample_ns, user_stacks);
	return (int)syscall(SYS_perf_event_open, &a, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
}

static void explain(struct prs_kstack *ks, int e)
{
	struct prs_perf_who who;

	if (e != EACCES && e != EPERM) {
		snprintf(ks->why, sizeof(ks->why), "kernel stacks unavailable: perf_event_open: %s",
			 strerror(e));
		return;
	}
	/* kernel callchains: an unprivileged process may have them up to paranoid level 1 */
	prs_perf_who_read(&who);
	prs_perf_refusal(&who, 1, "kernel stacks ", e, ks->why, sizeof(ks->why));
}

/* The mapping kernel PCs are recorded in (named at the end by the symbolizer). */
static uint32_t kernel_mapping(struct prs_profile *prof)
{
	struct prs_mapping m;

	memset(&m, 0, sizeof(m));
	m.start = KERNEL_HALF;
	m.end = UINT64_MAX;
	m.path = prs_profile_string(prof, PRS_KERNEL_MAPPING_PATH, strlen(PRS_KERNEL_MAPPING_PATH));
	return m.path == UINT32_MAX ? UINT32_MAX : prs_profile_mapping(prof, &m);
}

struct prs_kstack *prs_kstack_new(uint64_t period_ns, struct prs_profile *prof, bool user_stacks)
{
	struct prs_kstack *ks = calloc(1, sizeof(*ks));
	struct prs_kallsyms *syms = NULL;
	struct prs_err err = { 0 };
	int fd;

	if (!ks)
		return NULL;
	/* A little longer than a tick's share: in preload mode the agent's timer counts the same CPU
	 * time, and at exactly period/2 the lag from the last perf sample to the agent's would be
	 * the same all run long (matching well or badly for the whole run, by the luck of the start);
	 * 1/64 longer, it sweeps through every lag every ~32 samples, as ptrace's wall-clock ticks do.
	 * Capped at 400 per CPU second, the 200 Hz rate (at 1000 Hz: 1 per 2.5 ticks). */
	ks->sample_ns = prs_krate_full_ns(period_ns);
	ks->user_stacks = user_stacks;
	/* the same event on ourselves: refused when it would be on the target's threads (traced, they
	 * give ptrace access; in preload mode the first refusal there is said: kthr_new) */
	fd = open_event(0, ks->sample_ns, user_stacks);
	if (fd < 0 && user_stacks) {
		/* (a kernel that refuses user stacks: kernel frames only, as before) */
		ks->user_stacks = false;
		fd = open_event(0, ks->sample_ns, false);
	}
	if (fd < 0) {
		explain(ks, errno);
		return ks;
	}
	close(fd);
	/* the frames are named at the end of the recording; whether they can be is known now, from
	 * the first lines: the interrupt entries are in the entry text, first in the kernel's text */
	if (prs_kallsyms_load_until(NULL, "__entry_text_end", &syms, &err) != 0) {
		snprintf(ks->why, sizeof(ks->why), "kernel stacks off: %s", err.msg);
		return ks;
	}
	ks->nirq = prs_kallsyms_ranges(syms, "asm_sysvec_", ks->irq, MAX_IRQ_ENTRIES);
	ks->nirq += prs_kallsyms_ranges(syms, "asm_common_interrupt", ks->irq + ks->nirq,
					MAX_IRQ_ENTRIES - ks->nirq);
	prs_kallsyms_free(syms);
	ks->mapping = kernel_mapping(prof);
	if (ks->mapping == UINT32_MAX) {
		free(ks);
		return NULL;
	}
	ks->on = true;
	return ks;
}

bool prs_kstack_on(const struct prs_kstack *ks)
{
	return ks && ks->on;
}

const char *prs_kstack_why(const struct prs_kstack *ks)
{
	return ks ? ks->why : "";
}

void prs_kstack_counts(const struct prs_kstack *ks, struct prs_kstack_count *c)
{
	memset(c, 0, sizeof(*c));
	if (!ks)
		return;
	c->perf_samples = ks->perf_samples;
	c->matched = ks->matched;
	c->lowered_samples = ks->lowered_samples;
	c->period_changes = ks->period_changes;
	c->opened = ks->opened;
	c->young = ks->young;
	c->perf_kernel_share = ks->w_all ? (double)ks->w_kernel / (double)ks->w_all : 0;
	c->user_taken = ks->user_taken;
	c->user_missed = ks->user_missed;
	c->user_reused = ks->user_reused;
	c->held_samples = ks->held_samples;
}

void prs_kstack_free(struct prs_kstack *ks)
{
	free(ks);
}

void prs_kthr_free(struct prs_kthr *kt)
{
	if (!kt)
		return;
	if (kt->ring != MAP_FAILED)
		munmap(kt->ring, kt->ring_len);
	if (kt->fd >= 0) {
		close(kt->fd);
		kt->ks->nevents--;
	}
	free(kt->ustack);
	free(kt);
}

static unsigned ring_pages(const struct prs_kthr *kt)
{
	return kt->fmt == &prs_ksample_unwind ? RING_PAGES_USER : RING_PAGES;
}

/* Opens tid's event; with user stacks (and not Python's: its stacks would not be used,
 * prs_kstack_user) when `native`. */
static struct prs_kthr *kthr_new(struct prs_kstack *ks, pid_t tid, bool native)
{
	struct prs_kthr *kt = calloc(1, sizeof(*kt));
	long page = sysconf(_SC_PAGESIZE);

	if (!kt)
		return NULL;
	kt->ks = ks;
	kt->ring = MAP_FAILED;
	/* at the probe's rate (kstack_rate-internal.h) */
	kt->fmt = ks->user_stacks && native ? &prs_ksample_unwind : &prs_ksample_ip_only;
	kt->fd = ks->nevents < MAX_EVENTS ?
			 open_event(tid, ks->sample_ns * PRS_KRATE_PROBE, kt->fmt == &prs_ksample_unwind) :
			 -1;
	if (kt->fd < 0 && (errno == EACCES || errno == EPERM) && !ks->opened) {
		/* untraced (preload mode): allowed on pyrsprof, refused on the program */
		snprintf(ks->why, sizeof(ks->why), "kernel stacks unavailable: perf_event_open refused "
			 "on the program's threads (%s): pyrsprof may not read them (another user, or a "
			 "program that made itself not dumpable)", strerror(errno));
		ks->on = false;
	}
	if (kt->fd < 0)
		return kt; /* (a thread exiting, or one too many): it stays without kernel frames */
	ks->nevents++;
	ks->opened++;
	prs_krate_init(&kt->rate, ks->sample_ns);
	kt->ev_mult = prs_krate_mult(&kt->rate);
	kt->ring_len = (size_t)page * (1 + ring_pages(kt));
	kt->ring = mmap(NULL, kt->ring_len, PROT_READ | PROT_WRITE, MAP_SHARED, kt->fd, 0);
	if (kt->fmt == &prs_ksample_unwind)
		kt->ustack = malloc(PRS_KSTACK_USTACK); /* (NULL: no user stacks for it) */
	return kt;
}

/* ---- the ring ---- */

/* Whether the kernel sample k caught an interrupt of user code: its outermost kernel frame (the
 * last entry; the user part is excluded) is an interrupt's entry. */
static bool interrupt_entry(const struct prs_kstack *ks, const struct prs_kring *r,
			    const struct prs_ksample *k)
{
	uint64_t pc;

	if (!k->nr)
		return false;
	prs_kring_copy(r, k->chain_off + 8 * (k->nr - 1), &pc, 8);
	for (size_t i = 0; i < ks->nirq; i++)
		if (pc >= ks->irq[i].start && pc < ks->irq[i].end)
			return true;
	return false;
}

/* Keeps the kernel frames of sample k in kt. */
static void keep_chain(const struct prs_kring *r, const struct prs_ksample *k, struct prs_kthr *kt)
{
	kt->n = 0;
	for (uint64_t i = 0; i < k->nr && kt->n < PRS_KSTACK_MAX; i++) {
		uint64_t pc;

		prs_kring_copy(r, k->chain_off + 8 * i, &pc, 8);
		if (pc >= (uint64_t)PERF_CONTEXT_MAX) {
			if (pc != (uint64_t)PERF_CONTEXT_KERNEL)
				break; /* the user part (excluded) or another context */
			continue;
		}
		if (pc >= KERNEL_HALF)
			kt->pcs[kt->n++] = pc;
	}
}

/* Keeps the user registers and stack of sample k in kt (prs_kstack_user), a fresh one. */
static void keep_user(const struct prs_kring *r, const struct prs_ksample *k, struct prs_kthr *kt)
{
	size_t len = k->stack_len < PRS_KSTACK_USTACK ? (size_t)k->stack_len : PRS_KSTACK_USTACK;

	prs_ksample_regs(r, k, &kt->uregs);
	prs_kring_copy(r, k->stack_off, kt->ustack, len);
	kt->ustack_len = len;
	kt->user_uses = 0;
}

/* One sample k of kt's ring, outside the previous stop: its weight in the kernel share and the
 * rate, and its kernel frames and user PC kept. */
static void see_sample(struct prs_kstack *ks, struct prs_kthr *kt, const struct prs_kring *r,
		       const struct prs_ksample *k)
{
	/* weighed by the CPU time each stands for (a lowered one: 16 periods) */
	uint64_t w = kt->ev_mult;
	bool in_kernel = k->ip >= KERNEL_HALF;

	ks->w_all += w;
	ks->w_kernel += in_kernel ? w : 0;
	/* an interrupt of user code does not keep the full rate: under load a pure-user thread is
	 * preempted often, and 1 kernel sample in 30 kept it there (cpu_split_rs at 1000 Hz,
	 * load 9) */
	kt->irq = in_kernel && interrupt_entry(ks, r, k);
	prs_krate_see(&kt->rate, in_kernel && !kt->irq);
	kt->n = 0;
	kt->user_ip = k->user_ip;
	if (in_kernel)
		keep_chain(r, k, kt);
}

/* kt's ring as mapped. */
static struct prs_kring ring_of(const struct prs_kthr *kt)
{
	const struct perf_event_mmap_page *mp = kt->ring;
	struct prs_kring r = { (const uint8_t *)kt->ring + mp->data_offset, mp->data_size };

	if (!mp->data_offset) { /* (kernels before 4.1) */
		r.data = (const uint8_t *)kt->ring + sysconf(_SC_PAGESIZE);
		r.size = (uint64_t)ring_pages(kt) * (uint64_t)sysconf(_SC_PAGESIZE);
	}
	return r;
}

/* Consumes kt's ring up to until_ns; kt->n: the kernel frames of the last sample before it (0
 * when it was in user mode), but those of the previous stop's own path; kt->user_ip: where its
 * user code was; with user stacks, the last sample's user registers and stack (copied once, before
 * the tail lets the kernel write over it). The last sample is kept from tick to tick: a thread
 * that got little CPU since its last stop may have none since (its user PC tells whether it is
 * still of the same trap). */
static void drain(struct prs_kstack *ks, struct prs_kthr *kt, uint64_t until_ns)
{
	struct perf_event_mmap_page *mp = kt->ring;
	struct prs_kring r = ring_of(kt);
	uint64_t head = __atomic_load_n(&mp->data_head, __ATOMIC_ACQUIRE), tail = mp->data_tail;
	struct prs_ksample k, last_user;
	bool have_user = false;

	while (tail < head) {
		struct perf_event_header h;

		prs_kring_copy(&r, tail, &h, sizeof(h));
		if (h.size < sizeof(h) || h.size > head - tail) {
			tail = head; /* malformed: drop what is there */
			break;
		}
		if (h.type == PERF_RECORD_SAMPLE && prs_ksample_read(&r, tail, h.size, kt->fmt, &k)) {
			if (k.time > until_ns)
				break; /* of the next tick: left in the ring */
			ks->perf_samples++;
			/* (samples of the previous stop's own path are skipped) */
			if (k.time <= kt->prev_intr_ns || k.time > kt->prev_stop_ns)
				see_sample(ks, kt, &r, &k);
			if (k.stack_len && k.regs_off) {
				last_user = k;
				have_user = true;
			}
		}
		tail += h.size;
	}
	if (have_user && kt->ustack)
		keep_user(&r, &last_user, kt);
	__atomic_store_n(&mp->data_tail, tail, __ATOMIC_RELEASE);
}

/* Sets kt's event to the period its rate asks for (kstack_rate.c), when it changed. */
static void apply_rate(struct prs_kstack *ks, struct prs_kthr *kt)
{
	uint32_t mult = prs_krate_mult(&kt->rate);
	uint64_t ns = ks->sample_ns * mult;

	if (mult == kt->ev_mult)
		return;
	if (ioctl(kt->fd, PERF_EVENT_IOC_PERIOD, &ns) != 0) {
		prs_krate_undo(&kt->rate, kt->ev_mult); /* (tried again after another run) */
		return;
	}
	kt->ev_mult = mult;
	ks->period_changes++;
}

uint32_t prs_kstack_push(struct prs_kstack *ks, struct prs_profile *prof, struct prs_kthr **kt,
			 pid_t tid, bool old, const struct prs_kstop *stop, uint32_t stack)
{
	bool on_cpu = stop && stop->on_cpu;
	struct prs_kthr *k;

	if (!prs_kstack_on(ks))
		return stack;
	if (!*kt) {
		if (!on_cpu)
			return stack; /* opened once the thread is seen running */
		if (!old) {
			ks->young++; /* (no perf sample before this stop anyway) */
			return stack;
		}
		*kt = kthr_new(ks, tid, stop->native);
		if (!*kt)
			return stack;
	}
	k = *kt;
	if (k->ring == MAP_FAILED)
		return stack;
	/* a thread whose stops find it preempted keeps a perf sample per period of its CPU time:
	 * its CPU view's native stacks (prs_kstack_user) */
	if (on_cpu && k->ustack) {
		ks->held_samples += k->rate.held;
		prs_krate_preempted(&k->rate, stop->preempted);
	}
	/* the rate the perf samples before this tick were taken at */
	if (on_cpu && k->ev_mult == PRS_KRATE_LOWER)
		ks->lowered_samples++;
	drain(ks, k, on_cpu ? stop->interrupt_ns : UINT64_MAX);
	apply_rate(ks, k);
	if (!on_cpu)
		return stack;
	k->prev_intr_ns = stop->interrupt_ns;
	k->prev_stop_ns = stop->cont_ns;
	/* the kernel was working for the user code that trapped there: the tick's own user PC (a
	 * fault returns to the faulting instruction, a syscall to the one after it) */
	if (k->user_ip != stop->user_pc || !k->n)
		return stack;
	/* a perf sample standing for a contended thread's on-CPU sample (prs_kstack_user) taken in
	 * an interrupt of its user code: mostly the return from a preemption (the switch back in),
	 * which the stops' own samples show only by chance; its user frame keeps the time */
	if (stop->from_perf && k->irq)
		return stack;
	ks->matched++;
	/* outermost (the kernel entry) first */
	for (int i = k->n - 1; i >= 0; i--) {
		/* raw: the symbolizer names it after the recording */
		uint32_t f = prs_profile_raw_frame(prof, ks->mapping, k->pcs[i], true);

		if (f == UINT32_MAX)
			break;
		stack = prs_profile_stack(prof, stack, f);
	}
	return stack;
}

bool prs_kstack_contended(const struct prs_kthr *kt)
{
	return kt && kt->ustack && kt->rate.held;
}

bool prs_kstack_user(struct prs_kstack *ks, struct prs_kthr *kt, const struct prs_kstop *stop,
		     struct prs_regs *regs, struct prs_snapshot *snap)
{
	if (!prs_kstack_on(ks) || !kt || kt->ring == MAP_FAILED || !kt->ustack)
		return false;
	drain(ks, kt, stop->interrupt_ns);
	/* Each perf sample stands for one on-CPU sample, two at most: a sample that finds none
	 * since the last taken (the perf samples come about once per period of CPU time, as the
	 * on-CPU samples are paid out, but not in step) takes the last one again, not the stop's
	 * stack, which is known to be biased; a third time, the thread's perf samples are too
	 * rare (not held yet, or an ioctl refused): the stop's stack stays. */
	if (!kt->ustack_len || kt->user_uses >= PRS_KSTACK_USER_USES) {
		ks->user_missed++;
		return false;
	}
	ks->user_taken += kt->user_uses == 0;
	ks->user_reused += kt->user_uses > 0;
	kt->user_uses++;
	*regs = kt->uregs;
	snap->base = kt->uregs.r[PRS_REG_RSP];
	snap->len = kt->ustack_len;
	snap->data = kt->ustack;
	return true;
}

bool prs_kstack_wanted(const struct prs_sampler *s)
{
	/* vm mode has no running samples with a user PC to match */
	return s->opts.kernel_stacks && s->src != &prs_source_vm;
}

bool prs_sampler_kernel_stacks(const struct prs_sampler *s, char *why, size_t size)
{
	if (size)
		why[0] = '\0';
	if (!s->opts.kernel_stacks)
		return false;
	if (!prs_kstack_wanted(s)) {
		snprintf(why, size, "kernel stacks need --mode ptrace or --mode preload");
		return false;
	}
	if (prs_kstack_on(s->kstack))
		return true;
	snprintf(why, size, "%s", prs_kstack_why(s->kstack));
	return false;
}
