/* SPDX-License-Identifier: MIT */
/*
 * Thin, allocation-free wrappers over ptrace(2) and process_vm_readv(2) for the sampler, and the
 * decoding of waitpid() statuses. See include/pyrsprof/ptrace.h for the ptrace facts relied on.
 */
#include "pyrsprof/ptrace.h"

#include <elf.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pyrsprof/task.h"
#include "util/banned.h"

int prs_ptrace_seize(pid_t tid, int options, struct prs_err *err)
{
	if (ptrace(PTRACE_SEIZE, tid, 0, (void *)(long)options) == 0)
		return 0;
	int e = errno;
	return prs_err_set(err, -e, "seize thread %d: %s", (int)tid, strerror(e));
}

int prs_ptrace_interrupt(pid_t tid)
{
	return ptrace(PTRACE_INTERRUPT, tid, 0, 0) == 0 ? 0 : -errno;
}

int prs_ptrace_cont(pid_t tid, int sig)
{
	return ptrace(PTRACE_CONT, tid, 0, (void *)(long)sig) == 0 ? 0 : -errno;
}

int prs_ptrace_listen(pid_t tid)
{
	return ptrace(PTRACE_LISTEN, tid, 0, 0) == 0 ? 0 : -errno;
}

int prs_ptrace_detach(pid_t tid, int sig)
{
	return ptrace(PTRACE_DETACH, tid, 0, (void *)(long)sig) == 0 ? 0 : -errno;
}

int prs_ptrace_eventmsg(pid_t tid, unsigned long *msg)
{
	return ptrace(PTRACE_GETEVENTMSG, tid, 0, msg) == 0 ? 0 : -errno;
}

int prs_ptrace_getregs(pid_t tid, struct prs_regs *regs)
{
	struct user_regs_struct u;
	struct iovec iov = { .iov_base = &u, .iov_len = sizeof(u) };

	if (ptrace(PTRACE_GETREGSET, tid, (void *)NT_PRSTATUS, &iov) != 0)
		return -errno;
	regs->r[PRS_REG_RAX] = u.rax;
	regs->r[PRS_REG_RDX] = u.rdx;
	regs->r[PRS_REG_RCX] = u.rcx;
	regs->r[PRS_REG_RBX] = u.rbx;
	regs->r[PRS_REG_RSI] = u.rsi;
	regs->r[PRS_REG_RDI] = u.rdi;
	regs->r[PRS_REG_RBP] = u.rbp;
	regs->r[PRS_REG_RSP] = u.rsp;
	regs->r[PRS_REG_R8] = u.r8;
	regs->r[PRS_REG_R9] = u.r9;
	regs->r[PRS_REG_R10] = u.r10;
	regs->r[PRS_REG_R11] = u.r11;
	regs->r[PRS_REG_R12] = u.r12;
	regs->r[PRS_REG_R13] = u.r13;
	regs->r[PRS_REG_R14] = u.r14;
	regs->r[PRS_REG_R15] = u.r15;
	regs->r[PRS_REG_RIP] = u.rip;
	regs->orig_rax = u.orig_rax;
	regs->fs_base = u.fs_base;
	return 0;
}

enum prs_event_kind prs_ptrace_decode(pid_t tid, int status, struct prs_event *ev)
{
	memset(ev, 0, sizeof(*ev));
	ev->tid = tid;
	if (WIFEXITED(status)) {
		ev->kind = PRS_EV_EXITED;
		ev->code = WEXITSTATUS(status);
		return ev->kind;
	}
	if (WIFSIGNALED(status)) {
		ev->kind = PRS_EV_KILLED;
		ev->sig = WTERMSIG(status);
		ev->core = WCOREDUMP(status);
		return ev->kind;
	}
	if (!WIFSTOPPED(status)) {
		ev->kind = PRS_EV_OTHER;
		return ev->kind;
	}
	int sig = WSTOPSIG(status);
	int event = (unsigned)status >> 16;
	unsigned long msg = 0;

	switch (event) {
	case 0:
		ev->kind = PRS_EV_SIGNAL;
		ev->sig = sig;
		break;
	case PTRACE_EVENT_STOP:
		/* An interrupt (or the first stop of an auto-attached clone) reports SIGTRAP;
		 * a group-stop reports the stop signal. */
		if (sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU) {
			ev->kind = PRS_EV_GROUP_STOP;
			ev->sig = sig;
		} else {
			ev->kind = PRS_EV_INTERRUPT;
		}
		break;
	case PTRACE_EVENT_CLONE:
		ev->kind = PRS_EV_CLONE;
		if (prs_ptrace_eventmsg(tid, &msg) == 0)
			ev->new_tid = (pid_t)msg;
		break;
	case PTRACE_EVENT_FORK:
	case PTRACE_EVENT_VFORK:
		ev->kind = PRS_EV_FORK;
		if (prs_ptrace_eventmsg(tid, &msg) == 0)
			ev->new_tid = (pid_t)msg;
		break;
	case PTRACE_EVENT_EXEC:
		ev->kind = PRS_EV_EXEC;
		break;
	case PTRACE_EVENT_EXIT:
		ev->kind = PRS_EV_EXITING;
		break;
	default:
		ev->kind = PRS_EV_OTHER;
		break;
	}
	return ev->kind;
}

ssize_t prs_read_mem(pid_t pid, uint64_t addr, void *buf, size_t len)
{
	struct iovec local = { .iov_base = buf, .iov_len = len };
	struct iovec remote = { .iov_base = (void *)(uintptr_t)addr, .iov_len = len };
	ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);

	return n < 0 ? -errno : n;
}

ssize_t prs_read_stack(pid_t pid, uint64_t sp, uint8_t *buf, size_t cap)
{
	/* One remote iovec: process_vm_readv stops at the end of the stack mapping and returns a
	 * short count, which is what we want. */
	return prs_read_mem(pid, sp, buf, cap);
}

/* Kernel-internal restart codes a syscall leaves in rax when a stop interrupted its sleep. */
#define ERESTARTSYS 512
#define ERESTARTNOINTR 513
#define ERESTARTNOHAND 514
#define ERESTART_RESTARTBLOCK 516

enum prs_state prs_state_from_regs(const struct prs_regs *regs, int *syscall)
{
	int64_t nr = (int64_t)regs->orig_rax;
	int64_t rax = (int64_t)regs->r[PRS_REG_RAX];

	*syscall = -1;
	if (nr < 0 || nr > 1023)
		return PRS_STATE_RUNNING;
	if (rax == -ERESTARTSYS || rax == -ERESTARTNOINTR || rax == -ERESTARTNOHAND ||
	    rax == -ERESTART_RESTARTBLOCK || rax == -EINTR) {
		*syscall = (int)nr;
		return PRS_STATE_BLOCKED;
	}
	return PRS_STATE_RUNNING;
}

const char *prs_explain_eperm(pid_t pid, char *buf, size_t size)
{
	char val[128];
	FILE *f;
	int scope = -1;

	if (prs_proc_is_kthread(pid)) {
		char comm[64];

		if (prs_task_comm(pid, pid, comm, sizeof(comm)) != 0)
			comm[0] = '\0';
		snprintf(buf, size,
			 "pid %d%s%s%s is a kernel thread: it has no user space to sample (a profiler of "
			 "the kernel, such as perf, can)", (int)pid, comm[0] ? " (" : "", comm,
			 comm[0] ? ")" : "");
		return buf;
	}
	if (prs_proc_status_field(pid, "TracerPid", val, sizeof(val)) == 0 && atoi(val) != 0) {
		snprintf(buf, size,
			 "pid %d is already traced by pid %s (a debugger or another profiler); "
			 "detach it first", (int)pid, val);
		return buf;
	}
	f = fopen("/proc/sys/kernel/yama/ptrace_scope", "re");
	if (f) {
		if (fscanf(f, "%d", &scope) != 1)
			scope = -1;
		fclose(f);
	}
	if (scope >= 1 && geteuid() != 0) {
		snprintf(buf, size,
			 "ptrace of pid %d is not permitted: kernel.yama.ptrace_scope=%d allows tracing "
			 "only your own children; run as root, give pyrsprof CAP_SYS_PTRACE "
			 "(setcap cap_sys_ptrace+ep), set ptrace_scope to 0, or start the program "
			 "with `pyrsprof run`", (int)pid, scope);
		return buf;
	}
	if (scope == 3) {
		snprintf(buf, size,
			 "ptrace of pid %d is not permitted: kernel.yama.ptrace_scope=3 disables ptrace "
			 "for everyone until reboot", (int)pid);
		return buf;
	}
	if (prs_proc_status_field(pid, "Uid", val, sizeof(val)) == 0) {
		unsigned ruid = 0, euid = 0;

		if (sscanf(val, "%u %u", &ruid, &euid) == 2 && (euid != geteuid() || ruid != getuid()) &&
		    geteuid() != 0) {
			snprintf(buf, size,
				 "ptrace of pid %d is not permitted: it belongs to uid %u and pyrsprof runs as "
				 "uid %u without CAP_SYS_PTRACE; run pyrsprof as that user or as root "
				 "(in a container: --cap-add SYS_PTRACE)", (int)pid, euid, (unsigned)geteuid());
			return buf;
		}
	}
	snprintf(buf, size,
		 "ptrace of pid %d is not permitted (missing CAP_SYS_PTRACE, a seccomp profile, or a "
		 "setuid/non-dumpable target); run as root or add CAP_SYS_PTRACE "
		 "(in a container: --cap-add SYS_PTRACE)", (int)pid);
	return buf;
}
