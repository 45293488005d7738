/* SPDX-License-Identifier: MIT */
/*
 * Kernel stacks under the user stacks (issue 11 point 1). A ptrace stop shows only the user side
 * of a thread: the work the kernel did for it (zeroing the pages a NumPy allocation faults in,
 * copying a read()) is charged to the user frame that trapped, and named nowhere. Where permitted
 * (root, CAP_PERFMON, or kernel.perf_event_paranoid <= 1) each traced thread gets a perf_event_open
 * cpu-clock event sampling at twice the tick rate (starting at once per tick until its first
 * kernel sample, lowered where the thread stays in user mode: kstack_rate-internal.h), with the
 * kernel part of
 * the callchain only (exclude_callchain_user) and CLOCK_MONOTONIC times, into a small mmap'd ring.
 *
 * The rate is the cost: each perf sample is a timer interrupt in the target, 19 us of its time in
 * this VM (23-34 us under load 5-9: tests/bench/kcost.c, within one process, where the IP alone
 * costs as much: the callchain and user registers are not the cost) (gap detector, target at
 * real-time priority, the event at 4 kHz against none; exclude_user
 * does not help: the timer fires anyway), so 4 per tick cost 0.76 % of its time at 100 Hz and 2
 * cost 0.38 %. 2 per tick match fewer kernel samples than 4 (the last one is older: docs/
 * classify.md has the numbers), 1 per tick too few (kwork 0.43-0.53 against perf's 0.57). Phasing
 * one sample per tick to fall just before the tick (PERF_EVENT_IOC_PERIOD in each stop) did not
 * pay: the ioctl costs 13 us (an IPI to the thread's last CPU, even with the thread stopped) and
 * the stops' spacing varies too much (p10 4 ms, p90 15 ms at 100 Hz) to predict the next one.
 *
 * Which kernel frames belong to a tick's user stack: those of the thread's last perf sample before
 * the tick's PTRACE_INTERRUPT (but those of its previous stop), when that sample was taken in the
 * kernel and its user registers (PERF_SAMPLE_REGS_USER: the IP) show the same user PC as the
 * stop: the kernel was then working for the very instruction the tick's user stack ends in (a
 * page fault resumes at the faulting instruction, a syscall after its `syscall`). Named from
 * /proc/kallsyms, kind PRS_KIND_KERNEL. Not the same instant as the stop (the ptrace stop itself
 * replaces the kernel context: the thread stops on its way back to user mode), but within half
 * a tick of the thread's CPU time. Perf samples taken after the interrupt (the stop's
 * own signal-delivery path: ptrace_stop, schedule) are never used.
 *
 * In preload mode (source_preload.c: nothing is traced, the agent samples each thread from inside
 * on its CPU-time timer) pyrsprof opens the same events on the program's threads (perf_event_open
 * asks for ptrace *read* access, which Yama and a ptrace-forbidding seccomp filter leave alone),
 * and the agent's sample stands for the stop: the perf samples up to its signal are candidates,
 * those during its handler are not, and the user PC to match is the one the signal interrupted
 * (a fault's signal is delivered as it returns to the faulting instruction, a syscall's after it).
 *
 * The CPU view of a contended thread (ptrace mode only: prs_kstack_new's user_stacks). A thread
 * that waits for its CPU is almost never found running by a stop: its stop is where it was
 * preempted, and the on-CPU samples the CPU-time balance pays out there put the CPU view's split
 * 22-66 points off (balance-internal.h). A cpu-clock perf sample fires while the thread runs, at
 * an interrupt of its CPU time, as perf record's: so a native thread's event also takes its user
 * registers and the top PRS_KSTACK_USTACK bytes of its stack (PERF_SAMPLE_REGS_USER and
 * STACK_USER, as perf record --call-graph dwarf; records decoded by ksample.c), and an on-CPU
 * sample whose stop found it preempted, or of a thread whose recent stops did
 * (prs_krate_preempted), takes the native stack of its last perf sample before the interrupt,
 * unwound by the same unwinder as the stops (prs_kstack_user; the rate is held at a perf sample
 * per ~period of CPU time, PRS_KSTACK_USER_USES on-CPU samples per perf sample at most). Python
 * threads do not: their Python frames are read at the stop, and a native stack of another moment
 * would be merged with them wrongly. bench_contention_split.py: 2.7-4.4 points off, from 22-58.
 * The copy costs the thread 7-9 us more per perf sample (kcost kstack-user-fast against
 * kstack-fast: 34-36 us against 25-29, load 11); a held thread's ~1 perf sample per tick of its
 * CPU: ~0.35 % of its time at 100 Hz.
 *
 * Per tick and thread: one ring read (no syscall) and, per kernel frame, the interning of a raw
 * frame (a hash probe) in the profile's kernel mapping (PRS_KERNEL_MAPPING_PATH): nothing is named
 * on the sampling path. The symbolizer names those frames after the recording (and in each
 * snapshot) from /proc/kallsyms, as inline expansions of one kernel frame each.
 */
#ifndef PYRSPROF_SAMPLE_KSTACK_INTERNAL_H
#define PYRSPROF_SAMPLE_KSTACK_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "pyrsprof/profile.h"
#include "pyrsprof/types.h"
#include "sample/ksample-internal.h"
#include "sample/kstack_rate-internal.h"

#define PRS_KSTACK_MAX 64       /* kernel frames kept per sample */
#define PRS_KSTACK_USTACK 8192  /* user stack bytes per perf sample (perf record's default) */
#define PRS_KSTACK_USER_USES 2  /* on-CPU samples one perf sample may stand for */
/* In preload mode, the kernel's delivery of the agent's signal before its handler starts (the
 * timer interrupt's exit to user mode: signal frame set-up, and a reschedule): measured 7-40 us
 * before the handler's clock on a pure-user spinner at 1000 Hz (busy, load 2). Its perf samples
 * are the agent's path, not the program's: matched, they gave a user-only spinner a kernel share
 * of 2-3 % at 1000 Hz, and their kernel mode kept its event from the lowered rate. */
#define PRS_KSTACK_SIGNAL_NS 50000

struct perf_event_attr;
struct prs_kstack;
struct prs_sampler;

/* The attributes of a thread's event sampling every sample_ns of its CPU time (what
 * tests/bench/kcost.c measures the cost of). */
void prs_kstack_attr(struct perf_event_attr *a, uint64_t sample_ns, bool user_stacks);

/* One thread's event (allocated when it is first recorded running). */
struct prs_kthr {
	struct prs_kstack *ks;  /* the session's (its budget of events) */
	int fd;                 /* the perf event, -1 when it could not be opened */
	void *ring;             /* its mmap'd ring (MAP_FAILED when none) */
	size_t ring_len;
	uint64_t prev_intr_ns, prev_stop_ns; /* the previous stop: interrupt, resume */
	uint64_t pcs[PRS_KSTACK_MAX]; /* the kernel frames matched this tick, innermost first */
	int n;
	uint64_t user_ip;       /* the user PC of that perf sample */
	bool irq;               /* it was taken in an interrupt of the user code (interrupt_entry) */
	struct prs_krate rate;  /* the rate its perf samples ask for (kstack_rate.c) */
	uint32_t ev_mult;       /* its event's period, in full ones (prs_krate_mult) */
	/* with user stacks (ptrace mode): the last perf sample's user registers and stack */
	const struct prs_ksample_fmt *fmt; /* its samples' layout */
	uint8_t *ustack;        /* PRS_KSTACK_USTACK bytes (NULL: none kept) */
	size_t ustack_len;
	struct prs_regs uregs;
	unsigned user_uses;     /* on-CPU samples it was given to (prs_kstack_user) */
};

/* A tick's stop of a thread, as the kernel frames are matched with it. */
struct prs_kstop {
	bool on_cpu;            /* the sample is of a thread stopped running (else: rings drained) */
	uint64_t interrupt_ns;  /* PTRACE_INTERRUPT sent: perf samples up to then are candidates */
	uint64_t cont_ns;       /* resumed: perf samples up to then are of this tick */
	uint64_t user_pc;       /* the user PC in the stop */
	bool preempted;         /* the stop found it preempted (balance-internal.h: ambiguous) */
	bool native;            /* not a Python thread: its event may take user stacks */
	bool from_perf;         /* the user stack is that of the last perf sample (prs_kstack_user) */
};

/*
 * Sets up kernel stacks for a session sampling at period_ns into prof: tries one event on the
 * calling thread and whether /proc/kallsyms shows addresses (the symbolizer names the frames
 * from it at the end), and adds the kernel mapping to prof. Returns the state, or NULL (out of memory). When not permitted,
 * prs_kstack_on() is false and prs_kstack_why() says why and what to do, in one line.
 */
struct prs_kstack *prs_kstack_new(uint64_t period_ns, struct prs_profile *prof, bool user_stacks);
bool prs_kstack_on(const struct prs_kstack *ks);
const char *prs_kstack_why(const struct prs_kstack *ks);
/* What the kernel stacks did so far (stats.json kernel_stacks). */
struct prs_kstack_count {
	uint64_t perf_samples;    /* perf samples read from the rings */
	uint64_t matched;         /* thread-samples given kernel frames */
	uint64_t lowered_samples; /* on-CPU thread-samples whose thread's event was at the lowered
				   * rate (kstack_rate.c): their kernel part was seen that rarely */
	uint64_t period_changes;  /* PERF_EVENT_IOC_PERIOD calls made */
	uint64_t opened;          /* threads whose event was opened */
	uint64_t young;           /* running samples of threads at their first tick: their event
				   * waited (prs_thr_old) */
	/* the share of the perf samples (outside the stops, each weighed by the CPU time its rate
	 * made it stand for) taken in the kernel: perf's own estimate of the kernel share, beside
	 * the matched samples' (which need the stop and the perf sample before it to agree) */
	double perf_kernel_share;
	/* with user stacks: on-CPU samples of contended threads given a perf sample's native stack
	 * (prs_kstack_user): a new one, one given once already, or none (the stop's stack stays) */
	uint64_t user_taken, user_reused, user_missed;
	/* on-CPU thread-samples whose thread's rate was held at the probe's (prs_krate_preempted):
	 * its recent stops found it preempted */
	uint64_t held_samples;
};
/* Fills c (zeros for NULL). */
void prs_kstack_counts(const struct prs_kstack *ks, struct prs_kstack_count *c);
/* NULL is fine. */
void prs_kstack_free(struct prs_kstack *ks);
/* Whether s asks for kernel stacks with a source that can have them (ptrace, preload). */
bool prs_kstack_wanted(const struct prs_sampler *s);

/*
 * Thread tid is being recorded with user stack `stack`: consumes its ring, and returns stack
 * extended with the kernel frames of its last perf sample before the interrupt (after the previous
 * stop) when that sample was taken in the kernel for the same user PC as the stop's; else stack.
 * *kt is the thread's state (allocated when first seen running once old, prs_thr_old: a young
 * one's running samples are counted as waited, prs_kstack_count; NULL stays NULL on failure).
 */
uint32_t prs_kstack_push(struct prs_kstack *ks, struct prs_profile *prof, struct prs_kthr **kt,
			 pid_t tid, bool old, const struct prs_kstop *stop, uint32_t stack);
/*
 * The native stack of an on-CPU sample whose stop found the thread preempted (stop->preempted):
 * the stop shows where it lost its CPU, not where it spent it (balance-internal.h). With user
 * stacks (prs_kstack_new's user_stacks: ptrace mode), each perf sample was taken while the thread
 * ran, at a timer interrupt of its CPU time, as perf record's are: consumes kt's ring up to the
 * interrupt and, when a perf sample came since the last one taken, fills regs and snap (borrowed
 * from kt until its next drain) with its user registers and stack and returns true. Else false:
 * the stop's own stack stays.
 */
bool prs_kstack_user(struct prs_kstack *ks, struct prs_kthr *kt, const struct prs_kstop *stop,
		     struct prs_regs *regs, struct prs_snapshot *snap);
/* Whether kt's recent stops found it preempted (prs_krate_preempted). NULL is fine. */
bool prs_kstack_contended(const struct prs_kthr *kt);
/* Closes and frees a thread's state. NULL is fine. */
void prs_kthr_free(struct prs_kthr *kt);

#endif
