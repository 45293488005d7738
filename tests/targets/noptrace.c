// SPDX-License-Identifier: MIT
/*
 * noptrace: runs a command where ptrace is forbidden, as in a container whose seccomp profile
 * denies it. Installs a seccomp-bpf filter that makes ptrace(2) fail with EPERM (every other
 * syscall allowed, process_vm_readv included), then execs the command; the filter is inherited
 * by everything it starts. With --perf, perf_event_open(2) is the one that fails instead (as
 * under Docker's default seccomp profile): ptrace works, every perf event is refused.
 *
 * Usage: noptrace [--perf] CMD ARGS...   (exit 126 when the filter cannot be installed)
 */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	int perf = argc > 1 && strcmp(argv[1], "--perf") == 0;
	struct sock_filter code[] = {
		/* x86-64 only: any other architecture's calls are refused */
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, perf ? __NR_perf_event_open : __NR_ptrace, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = sizeof(code) / sizeof(code[0]), .filter = code };

	argc -= perf;
	argv += perf;
	if (argc < 2) {
		fprintf(stderr, "usage: noptrace [--perf] CMD ARGS...\n");
		return 2;
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
		fprintf(stderr, "noptrace: seccomp: %s\n", strerror(errno));
		return 126;
	}
	execvp(argv[1], argv + 1);
	fprintf(stderr, "noptrace: %s: %s\n", argv[1], strerror(errno));
	return 127;
}
