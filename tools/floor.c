/* SPDX-License-Identifier: MIT */
/*
 * floor: what any sampler pays on this machine for one sample before it reads anything of its
 * own, at a given period. tests/bench/bench_python.py prints it next to pyrsprof's sample cost,
 * so the cost the platform imposes is told apart from the cost of our code.
 *
 *   floor vm PID PERIOD_US N     one 64-byte process_vm_readv of the target every PERIOD_US,
 *                                asleep in between (the least a memory-reading sample does)
 *   floor stop PID PERIOD_US N   every PERIOD_US: PTRACE_INTERRUPT of thread PID, wait for its
 *                                stop (polling, as the sampler does), PTRACE_GETREGS, PTRACE_CONT
 *                                (the least a stopping sample does); PID is seized for the run
 *
 * Prints "floor MODE median_us X p10_us Y p90_us Z". On the 2-vCPU dev VM, after 10 ms asleep
 * the first process_vm_readv costs 15-25 us (0.3 us for getppid warm, 2 us for the same read
 * warm), and stopping a thread blocked in a sleep costs 90-130 us: its idle vCPU must be woken.
 */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* The start of the target's first readable mapping, 0 if none. */
static unsigned long readable_addr(pid_t pid)
{
	char path[64], line[512];
	unsigned long lo = 0, hi;
	char perm[8];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perm) == 3 && perm[0] == 'r')
			break;
		else
			lo = 0;
	fclose(f);
	return lo;
}

static void sleep_until(double t)
{
	double d = t - now_us();
	struct timespec ts;

	if (d <= 0)
		return;
	ts.tv_sec = (time_t)(d / 1e6);
	ts.tv_nsec = (long)((d - (double)ts.tv_sec * 1e6) * 1e3);
	nanosleep(&ts, NULL);
}

int main(int argc, char **argv)
{
	pid_t pid;
	double period, next, *t;
	long n, i;
	bool stop;
	unsigned long addr = 0;

	if (argc != 5 || (strcmp(argv[1], "vm") && strcmp(argv[1], "stop"))) {
		fprintf(stderr, "usage: floor vm|stop PID PERIOD_US N\n");
		return 2;
	}
	stop = !strcmp(argv[1], "stop");
	pid = (pid_t)atoi(argv[2]);
	period = atof(argv[3]);
	n = atol(argv[4]);
	if (pid <= 0 || period <= 0 || n <= 0 || n > 1000000) {
		fprintf(stderr, "floor: bad PID, PERIOD_US or N\n");
		return 2;
	}
	t = calloc((size_t)n, sizeof(*t));
	if (!t)
		return 1;
	if (stop) {
		if (ptrace(PTRACE_SEIZE, pid, 0, 0)) {
			fprintf(stderr, "floor: cannot trace pid %d: %s\n", (int)pid, strerror(errno));
			return 1;
		}
	} else if (!(addr = readable_addr(pid))) {
		fprintf(stderr, "floor: pid %d has no readable mapping\n", (int)pid);
		return 1;
	}
	next = now_us();
	for (i = 0; i < n; i++) {
		double t0;

		next += period;
		sleep_until(next);
		t0 = now_us();
		if (stop) {
			struct user_regs_struct regs;
			int st;
			pid_t w;

			if (ptrace(PTRACE_INTERRUPT, pid, 0, 0))
				break;
			while ((w = waitpid(pid, &st, __WALL | WNOHANG)) == 0)
				__builtin_ia32_pause();
			if (w != pid || !WIFSTOPPED(st))
				break;
			ptrace(PTRACE_GETREGS, pid, 0, &regs);
			/* a signal for the target (not our interrupt) is passed on */
			ptrace(PTRACE_CONT, pid, 0,
			       (void *)(long)((st >> 16) == PTRACE_EVENT_STOP ? 0 : WSTOPSIG(st)));
		} else {
			char buf[64];
			struct iovec l = { buf, sizeof(buf) }, r = { (void *)addr, sizeof(buf) };

			if (process_vm_readv(pid, &l, 1, &r, 1, 0) != (ssize_t)sizeof(buf))
				break;
		}
		t[i] = now_us() - t0;
	}
	if (stop) { /* a tracee is detached in a stop */
		int st;

		if (ptrace(PTRACE_INTERRUPT, pid, 0, 0) == 0 && waitpid(pid, &st, __WALL) == pid &&
		    WIFSTOPPED(st))
			ptrace(PTRACE_DETACH, pid, 0,
			       (void *)(long)((st >> 16) == PTRACE_EVENT_STOP ? 0 : WSTOPSIG(st)));
	}
	if (i < n) {
		fprintf(stderr, "floor: pid %d: sample %ld failed\n", (int)pid, i);
		return 1;
	}
	qsort(t, (size_t)n, sizeof(*t), cmp_d);
	printf("floor %s median_us %.2f p10_us %.2f p90_us %.2f\n", argv[1], t[n / 2], t[n / 10],
	       t[n * 9 / 10]);
	free(t);
	return 0;
}
