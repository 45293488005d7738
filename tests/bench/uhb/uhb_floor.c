/* SPDX-License-Identifier: MIT */
/*
 * The machine's floor for --mode preload (tests/bench/bench_preload.py): what the sampling
 * signal alone costs a program, with nothing done in its handler.
 *
 * As a preloaded library (built with -shared -DUHB_FLOOR_LIB, LD_PRELOAD): the main thread gets
 * the agent's clock (a perf task-clock event with a sample period, owned by the thread, signalling
 * SIGRTMIN+8 with SA_RESTART; UHB_FLOOR_NS its period, 1 ms by default) and a handler that returns
 * at once. The program's slowdown under it is the least any in-process sampler on that clock costs
 * on this machine; the agent's is compared with it.
 *
 * As a program (`uhb_floor SECONDS PERIOD_NS [perf|hrtimer|posix]`): the same measured within one
 * process, so that other processes' load, which moves between runs, cancels: 40 ms phases with
 * the clock alternately on and off (PERF_EVENT_IOC_ENABLE/DISABLE, or timer_settime), the work
 * done per second of its CPU time in each on-phase compared with its two off-neighbours. perf:
 * the agent's clock and signal; hrtimer: the same event without the signal (its timer interrupt
 * alone); posix: a POSIX CPU timer (fires at the scheduler tick only). Prints the median cost
 * [quartiles] and the cost per signal.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned long signals;

static void on_signal(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)si;
	(void)uc;
	signals++;
}

/* The agent's clock on the calling thread (agent.c arm_perf), disabled if asked; -1 on error. */
static int perf_clock(long period_ns, int sig, int with_signal, int disabled)
{
	struct perf_event_attr pe;
	struct f_owner_ex owner = { F_OWNER_TID, (pid_t)syscall(SYS_gettid) };
	struct sigaction sa;
	int fd;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_signal;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	sigaction(sig, &sa, NULL);
	memset(&pe, 0, sizeof(pe));
	pe.type = PERF_TYPE_SOFTWARE;
	pe.size = sizeof(pe);
	pe.config = PERF_COUNT_SW_TASK_CLOCK;
	pe.sample_period = (uint64_t)period_ns;
	pe.wakeup_events = 1;
	pe.disabled = disabled;
	fd = (int)syscall(SYS_perf_event_open, &pe, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
	if (fd < 0 || !with_signal)
		return fd;
	if (fcntl(fd, F_SETOWN_EX, &owner) != 0 || fcntl(fd, F_SETSIG, sig) != 0 ||
	    fcntl(fd, F_SETFL, O_ASYNC | O_NONBLOCK) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

#ifdef UHB_FLOOR_LIB
__attribute__((constructor)) static void floor_start(void)
{
	const char *s = getenv("UHB_FLOOR_NS");

	if (perf_clock(s ? atol(s) : 1000000, SIGRTMIN + 8, 1, 0) < 0)
		perror("uhb_floor: perf_event_open");
}
#else
static double now(clockid_t c)
{
	struct timespec t;

	clock_gettime(c, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

__attribute__((noinline)) static uint64_t work(uint64_t x)
{
	for (int i = 0; i < 2000; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
	}
	return x;
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 6;
	long period = argc > 2 ? atol(argv[2]) : 1000000;
	const char *kind = argc > 3 ? argv[3] : "perf";
	int posix = !strcmp(kind, "posix"), sig = SIGRTMIN + 8, fd = -1, nph = (int)(secs / 0.04), m = 0;
	struct itimerspec on = { { 0, period }, { 0, period } }, off;
	double *rate, *cost, cpu_on = 0;
	unsigned long on_signals = 0;
	timer_t timer;
	uint64_t x = 1;

	memset(&off, 0, sizeof(off));
	on.it_interval.tv_sec = on.it_value.tv_sec = period / 1000000000;
	on.it_interval.tv_nsec = on.it_value.tv_nsec = period % 1000000000;
	if (posix) {
		struct sigevent sev;
		struct sigaction sa;

		memset(&sa, 0, sizeof(sa));
		sa.sa_sigaction = on_signal;
		sa.sa_flags = SA_SIGINFO | SA_RESTART;
		sigaction(sig, &sa, NULL);
		memset(&sev, 0, sizeof(sev));
		sev.sigev_notify = SIGEV_THREAD_ID;
		sev.sigev_signo = sig;
		sev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
		if (timer_create(CLOCK_THREAD_CPUTIME_ID, &sev, &timer) != 0) {
			perror("timer_create");
			return 1;
		}
	} else if ((fd = perf_clock(period, sig, strcmp(kind, "hrtimer") != 0, 1)) < 0) {
		perror("perf_event_open");
		return 1;
	}
	if (nph < 3)
		nph = 3;
	rate = calloc((size_t)nph, sizeof(*rate));
	cost = calloc((size_t)nph, sizeof(*cost));
	if (!rate || !cost)
		return 1;
	for (int p = 0; p < nph; p++) {
		int en = p % 2;
		unsigned long s0 = signals;
		double w0, c0, cs;
		long n = 0;

		if (posix)
			timer_settime(timer, 0, en ? &on : &off, NULL);
		else
			ioctl(fd, en ? PERF_EVENT_IOC_ENABLE : PERF_EVENT_IOC_DISABLE, 0);
		w0 = now(CLOCK_MONOTONIC);
		c0 = now(CLOCK_THREAD_CPUTIME_ID);
		while (now(CLOCK_MONOTONIC) < w0 + 0.04) {
			x = work(x);
			n++;
		}
		cs = now(CLOCK_THREAD_CPUTIME_ID) - c0;
		rate[p] = (double)n / cs;
		if (en) {
			on_signals += signals - s0;
			cpu_on += cs;
		}
	}
	for (int p = 1; p + 1 < nph; p += 2)
		cost[m++] = 100.0 * (1 - rate[p] / ((rate[p - 1] + rate[p + 1]) / 2));
	qsort(cost, (size_t)m, sizeof(*cost), cmp_double);
	/* per period of CPU time: the perf clock's timer interrupts, with or without a signal */
	printf("%s every %ld ns of CPU: %.2f %% [%.2f, %.2f] of the program's time, %.1f us per "
	       "period; %.0f signals per CPU second (%d phase pairs; %lx)\n",
	       kind, period, cost[m / 2], cost[m / 4], cost[3 * m / 4], cost[m / 2] / 100 * (double)period / 1e3,
	       (double)on_signals / cpu_on, m, (unsigned long)x);
	return 0;
}
#endif
