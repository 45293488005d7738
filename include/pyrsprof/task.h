/* SPDX-License-Identifier: MIT */
/*
 * /proc readers for a target's threads: list them, their names, their scheduler state and the
 * syscall they are blocked in. Used where ptrace cannot answer: threads that do not stop in time
 * (D state), names, and start-up checks.
 */
#ifndef PYRSPROF_TASK_H
#define PYRSPROF_TASK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Lists the thread ids of pid (from /proc/PID/task) into out. Returns the count (it may be more
 * than max: only max are written) or -errno (-ESRCH: no such process). */
int prs_task_list(pid_t pid, pid_t *out, size_t max);

/* Reads /proc/PID/task/TID/comm (the thread name, at most 15 bytes) into buf. Returns 0 or -errno. */
int prs_task_comm(pid_t pid, pid_t tid, char *buf, size_t size);

/* The state letter of /proc/PID/task/TID/stat ('R', 'S', 'D', 'T', 't', 'Z', ...), or 0 on error. */
char prs_task_state(pid_t pid, pid_t tid);
/* The same through a file descriptor kept open across calls (-1 the first time; left -1 when it
 * cannot be opened, closed and set to -1 once the thread is gone): one pread instead of an
 * open, a read and a close (measured after 10 ms asleep: 5-15 us against 14-48 us). */
char prs_task_state_fd(pid_t pid, pid_t tid, int *fd);

/* What the text of a stat file (/proc/PID/stat, /proc/PID/task/TID/stat) says (man 5 proc). */
struct prs_task_stat {
	char state;     /* 'R', 'S', 'D', ... */
	uint64_t flags; /* the kernel's PF_* flags of the task */
	bool times;     /* the four CPU times below were there */
	uint64_t utime, stime, cutime, cstime; /* clock ticks: its own, its waited-for children's */
	bool started;   /* starttime was there */
	uint64_t starttime; /* when it started, clock ticks after boot (CLOCK_BOOTTIME) */
};
#define PRS_PF_KTHREAD 0x00200000u /* PF_KTHREAD: a kernel thread (no user space) */

/*
 * Parsers of /proc text, used by the readers here and fed hostile bytes by the fuzz tests
 * (tests/fuzz). Each takes the NUL-terminated text of one file.
 * prs_task_parse_state: the state letter of a stat file, 0 when it is not one ("tid (comm) S ...":
 * comm may hold spaces and parentheses, so the last ')' ends it). prs_task_parse_stat: the state,
 * the flags and, when the text goes on that far, the CPU times and the start time; 0 or -EINVAL.
 */
char prs_task_parse_state(const char *stat);
int prs_task_parse_stat(const char *stat, struct prs_task_stat *out);
/* The whole stat file through such a kept descriptor, parsed (prs_task_parse_stat). Returns 0,
 * -ESRCH when it cannot be read, or -EINVAL. */
int prs_task_stat_fd(pid_t pid, pid_t tid, int *fd, struct prs_task_stat *out);

/* True if pid is a kernel thread (PF_KTHREAD in its stat flags): nothing to sample in user space. */
bool prs_proc_is_kthread(pid_t pid);

/* A thread's scheduler statistics (/proc/PID/task/TID/schedstat). */
struct prs_schedstat {
	uint64_t cpu_ns;  /* CPU time used (exact when the thread is off a CPU; while it runs, it lags
			   * by up to a scheduler tick) */
	uint64_t wait_ns; /* time spent runnable, waiting for a CPU */
	uint64_t slices;  /* times it was given a CPU: unchanged, with cpu_ns, means it never ran */
};

/* Parses the text of a schedstat file ("cpu_ns wait_ns slices"). Returns 0 or -EINVAL. */
int prs_task_parse_schedstat(const char *text, struct prs_schedstat *out);

/*
 * Reads a thread's scheduler statistics. *fd caches the open file between calls: pass -1 the
 * first time, close it when done (it is left -1 when opening failed, e.g. out of file descriptors:
 * then every call opens and closes; and it is closed and set to -1 once the thread is gone). One
 * pread when cached. Returns 0 or -errno.
 */
int prs_task_schedstat(pid_t pid, pid_t tid, int *fd, struct prs_schedstat *out);

/* What /proc/PID/task/TID/syscall says of a thread: running (or runnable), or asleep in the kernel
 * with its user registers as they were when it entered (nr -1: not in a syscall, e.g. a page
 * fault or a job-control stop). */
struct prs_task_sys {
	bool running;
	int nr;            /* the syscall number; -1 when asleep outside a syscall */
	uint64_t args[6];  /* its arguments (0 when nr is -1) */
	uint64_t sp, pc;   /* user stack pointer and the address after the syscall instruction */
};

/*
 * Reads /proc/PID/task/TID/syscall through *fd (kept open as for prs_task_schedstat). Cheaper than
 * the stat file (measured after 10 ms asleep, after a process_vm_readv: 8-10 us against 12-15) and
 * it names the syscall. Needs the same permission as ptrace. Returns 0, or -errno (-ESRCH: gone,
 * -EINVAL: unparsable).
 */
int prs_task_syscall_fd(pid_t pid, pid_t tid, int *fd, struct prs_task_sys *out);

/* True if tid is a thread of process pid (/proc/PID/task/TID exists; one access() call). */
bool prs_task_exists(pid_t pid, pid_t tid);
/* Parses the text of a syscall file into *out (zeroed first). Returns 0 or -EINVAL. */
int prs_task_parse_syscall(const char *text, struct prs_task_sys *out);

/* True if process pid exists (it may be a zombie). */
bool prs_proc_exists(pid_t pid);

/* Who process (or thread) tid is, from /proc/TID/status: its thread group (Tgid), parent (PPid)
 * and tracer (TracerPid, 0 = none). Returns 0 or -errno (-ESRCH: gone, -EINVAL: unparsable). */
struct prs_proc_ids {
	pid_t tgid, ppid, tracer;
};
int prs_proc_ids(pid_t tid, struct prs_proc_ids *out);

/* The CPU time of process pid (utime + stime) and of its children it waited for (cutime +
 * cstime), in nanoseconds, from /proc/PID/stat (a zombie's too). Returns 0 or -errno. */
int prs_proc_cpu(pid_t pid, uint64_t *self_ns, uint64_t *children_ns);

/* The CPU time of process pid in nanoseconds, every thread's, the exited ones included (the
 * scheduler's sum_exec_runtime of the thread group: what an inherited task-clock counter counts),
 * through its CPU clock (clock_getcpuclockid; readable for any process). Returns 0 or -errno
 * (-ESRCH: gone or reaped). */
int prs_proc_cpu_clock_ns(pid_t pid, uint64_t *ns);

/* Lists the child processes of pid into out: from /proc/PID/task/TID/children of each thread,
 * or, where the kernel has no such file, by scanning /proc for processes whose parent is pid.
 * Returns the count (it may be more than max: only max are written) or -errno (-ESRCH). */
int prs_proc_children(pid_t pid, pid_t *out, size_t max);

/* Reads /proc/PID/cmdline as one line (arguments joined by spaces, bounded) into buf. Returns 0 or -errno. */
int prs_proc_cmdline(pid_t pid, char *buf, size_t size);

/*
 * The value of "Key:\tvalue" in the text of a status file (/proc/PID/status), leading blanks
 * removed, into val (truncated to size, NUL-terminated). Returns 0, or -ENOENT when no line has
 * that key. prs_proc_status_field reads /proc/PID/status (its first 8 KiB) and does the same;
 * it returns -errno when the file cannot be read.
 */
int prs_proc_parse_status(const char *text, const char *key, char *val, size_t size);
int prs_proc_status_field(pid_t pid, const char *key, char *val, size_t size);

#endif
