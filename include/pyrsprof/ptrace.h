/* SPDX-License-Identifier: MIT */
/*
 * ptrace control of a target's threads, as the sampler needs it: seize (never plain attach, so
 * PTRACE_INTERRUPT works and no SIGSTOP is injected), interrupt, read registers, snapshot the stack,
 * continue, detach; and decoding of waitpid() statuses into events. Every call here is a thin,
 * allocation-free wrapper: safe to use on the sampling hot path.
 *
 * Facts this relies on (man 2 ptrace, "Group-stop" and PTRACE_INTERRUPT; checked on Linux 6.x): a PTRACE_INTERRUPT stop arrives as
 * WIFSTOPPED with status>>16 == PTRACE_EVENT_STOP and WSTOPSIG == SIGTRAP; a group-stop also arrives
 * as PTRACE_EVENT_STOP but with the stop signal, and must be resumed with PTRACE_LISTEN, not CONT, or
 * the job-control stop would be undone; any other stop is a signal-delivery stop whose signal must
 * be re-injected with PTRACE_CONT(sig); waitpid needs __WALL for non-leader threads.
 */
#ifndef PYRSPROF_PTRACE_H
#define PYRSPROF_PTRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "pyrsprof/err.h"
#include "pyrsprof/types.h"

/* What one waitpid() status says about one thread. */
enum prs_event_kind {
	PRS_EV_INTERRUPT,   /* our PTRACE_INTERRUPT stop (or the initial stop of an auto-attached thread) */
	PRS_EV_SIGNAL,      /* signal-delivery stop: re-inject ev.sig when resuming */
	PRS_EV_GROUP_STOP,  /* job-control stop (SIGSTOP, SIGTSTP, ...): resume with PTRACE_LISTEN */
	PRS_EV_CLONE,       /* the thread created a new thread: ev.new_tid */
	PRS_EV_FORK,        /* fork/vfork event: ev.new_tid is the new process (only with follow-fork) */
	PRS_EV_EXEC,        /* the thread group exec'ed; ev.tid is now the leader, other threads are gone */
	PRS_EV_EXITED,      /* the thread exited with ev.code (the whole process, for the leader) */
	PRS_EV_KILLED,      /* the thread was killed by signal ev.sig */
	PRS_EV_EXITING,     /* PTRACE_EVENT_EXIT: the thread is exiting, its /proc files still there;
			     * resume it (PTRACE_CONT) and its PRS_EV_EXITED follows */
	PRS_EV_OTHER,       /* another ptrace event stop: just resume */
};

struct prs_event {
	enum prs_event_kind kind;
	pid_t tid;
	int sig;        /* PRS_EV_SIGNAL, PRS_EV_GROUP_STOP, PRS_EV_KILLED */
	int code;       /* PRS_EV_EXITED */
	pid_t new_tid;  /* PRS_EV_CLONE, PRS_EV_FORK */
	bool core;      /* PRS_EV_KILLED: dumped core */
};

/*
 * The options every seized thread gets: see execs. Not PTRACE_O_TRACECLONE: a clone event stops
 * the thread that creates a thread, and the new one starts in a stop, each a round trip through
 * pyrsprof (~60-70 us) that a thread-per-request server pays per request; the sampler finds new
 * threads at its ticks instead and seizes them then (src/sample/newthreads.c). Not
 * PTRACE_O_TRACEEXIT: an exit stop is one more round trip per thread, and it can deadlock the
 * seize of a new thread: a thread not seized yet that execs waits (holding the lock PTRACE_SEIZE
 * takes) for the leader to die, the leader waits in its exit stop for pyrsprof, pyrsprof waits in
 * PTRACE_SEIZE. A thread's final counts are read while it is a zombie instead, before it is reaped
 * (src/sample/events.c).
 */
#define PRS_PTRACE_OPTIONS PTRACE_O_TRACEEXEC
/* With the child processes followed too (--subprocesses): every fork and vfork (a clone with
 * SIGCHLD as its exit signal, or CLONE_VFORK) makes a tracee, auto-attached and stopped at its
 * start. (A clone of a process with another exit signal is found at a tick, by the children
 * files, like a child forked by a thread not seized yet.) Never PTRACE_O_EXITKILL: the program
 * runs on if pyrsprof dies. */
#define PRS_PTRACE_FOLLOW_FORKS (PTRACE_O_TRACEFORK | PTRACE_O_TRACEVFORK)
#define PRS_PTRACE_OPTIONS_TREE (PRS_PTRACE_OPTIONS | PRS_PTRACE_FOLLOW_FORKS)

/*
 * PTRACE_SEIZE tid with options (PRS_PTRACE_OPTIONS or PRS_PTRACE_OPTIONS_TREE). Returns 0 or
 * -errno (-EPERM, -ESRCH) with err set; the message names the tid but not the cause: call
 * prs_explain_eperm() for that.
 */
int prs_ptrace_seize(pid_t tid, int options, struct prs_err *err);

/* PTRACE_INTERRUPT: asks a running seized thread to stop. Returns 0 or -errno. */
int prs_ptrace_interrupt(pid_t tid);

/* Resumes a stopped thread, delivering sig (0 for none). Returns 0 or -errno (-ESRCH: it died). */
int prs_ptrace_cont(pid_t tid, int sig);

/* Resumes a thread from a group-stop with PTRACE_LISTEN (it stays job-control stopped). */
int prs_ptrace_listen(pid_t tid);

/* Detaches a *stopped* thread, delivering sig. Returns 0 or -errno. */
int prs_ptrace_detach(pid_t tid, int sig);

/* Reads the registers of a stopped thread with PTRACE_GETREGSET(NT_PRSTATUS) into DWARF order. */
int prs_ptrace_getregs(pid_t tid, struct prs_regs *regs);

/* PTRACE_GETEVENTMSG (the new thread id after a clone event, the new process after a fork). */
int prs_ptrace_eventmsg(pid_t tid, unsigned long *msg);

/*
 * Decodes a waitpid() status of thread tid. Returns the event kind (also stored in ev).
 * For PRS_EV_CLONE/FORK it reads the new tid with PTRACE_GETEVENTMSG.
 */
enum prs_event_kind prs_ptrace_decode(pid_t tid, int status, struct prs_event *ev);

/*
 * Copies up to cap bytes of stack starting at the stack pointer into buf with one
 * process_vm_readv; a short read (the end of the stack mapping) is fine. Returns the number of
 * bytes copied (>= 0) or -errno. pid is the thread group id.
 */
ssize_t prs_read_stack(pid_t pid, uint64_t sp, uint8_t *buf, size_t cap);

/* Reads len bytes of target memory at addr with process_vm_readv. Returns bytes read or -errno. */
ssize_t prs_read_mem(pid_t pid, uint64_t addr, void *buf, size_t len);

/*
 * Classifies the state of a thread stopped by an interrupt from its registers: when it was asleep
 * in a syscall the kernel aborted the syscall to enter the stop, leaving orig_rax = the syscall
 * number and rax = -ERESTART* (or -EINTR); otherwise it was running. Sets *syscall (or -1).
 */
enum prs_state prs_state_from_regs(const struct prs_regs *regs, int *syscall);

/*
 * Starts argv[0] (searched in PATH) as a child, with an empty signal mask (the caller's blocked
 * signals are the sampler's, not the program's). With seize_options (PRS_PTRACE_OPTIONS or
 * PRS_PTRACE_OPTIONS_TREE; 0: not traced), the child is PTRACE_SEIZEd before it execs, so it is traced from its first instruction: it waits on a pipe (the gate) until the
 * caller has seized it. exec's errno comes back through a close-on-exec pipe, which a successful
 * exec closes. Returns 0 and the child's pid in *pid, or:
 *   -ENOENT/-EACCES/...  the command cannot be run: err says "cannot run 'x': ..."; the child
 *                        exited with 127 and was reaped
 *   -EPERM/...           it could not be seized (err says so; the child was killed and reaped)
 *   -errno               pipe or fork failed
 * (src/proc/launch.c)
 */
int prs_ptrace_launch(char *const argv[], int seize_options, pid_t *pid, struct prs_err *err);

/*
 * Explains why ptrace of pid is not permitted, in one line for the user: another tracer
 * (TracerPid), Yama ptrace_scope, missing CAP_SYS_PTRACE for another user's process, or a
 * seccomp/container policy; with what to do. Writes into buf and returns buf.
 */
const char *prs_explain_eperm(pid_t pid, char *buf, size_t size);

#endif
