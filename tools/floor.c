/* SPDX-License-Identifier: MIT */
/*
 * floor: what any sampler pays on this machine for one sample before it reads anything of its
 * own, at a given period. tests/bench/bench_python.py prints it next to pyrsprof's sample cost,
 * so the cost the platform imposes is told apart from the cost of our code.
 *
 *   floor vm PID PERIOD_US N     one 64-byte process_vm_readv of the target every PERIOD_US,
 *                                asleep in between (the least a memory-reading sample does)
 *   floor stop PID PERIOD_US N   every PERIOD_US: PTRACE_INTERRUPT of thread PID, wait for its
 *                                stop (polling for 50 us, as the sampler does; a stop later than
 *                                that is timed from the stop, as the sampler times a late one),
 *                                PTRACE_GETREGS, PTRACE_CONT (the least a stopping sample does);
 *                                PID is seized for the run
 *
 *   floor tick PERIOD_US SECS -p PID | -- CMD ARGS...
 *                                the least a sampler that stops every thread does to a whole
 *                                program: every PERIOD_US, PTRACE_INTERRUPT every thread of it
 *                                (of its child processes too), each one's registers read and
 *                                PTRACE_CONT as its stop comes (nothing held, nothing else read),
 *                                waiting until all stopped; new threads found at each tick (a
 *                                process's task directory listed when its link count says it has
 *                                threads not known, and those PTRACE_SEIZEd: no stop, as pyrsprof
 *                                does, src/sample/newthreads.c), new processes followed
 *                                (PTRACE_O_TRACEFORK/VFORK). -p: attaches to PID's threads for
 *                                SECS; --: runs CMD until it exits (SECS: 0). Prints the tick's
 *                                length (first interrupt to last stop) and the samples taken.
 *                                The program's own timing (throughput, wall time) is the caller's.
 *
 * Prints "floor MODE median_us X p10_us Y p90_us Z late K" (K: stops later than the poll). On the 2-vCPU dev VM, after 10 ms asleep
 * the first process_vm_readv costs 15-25 us (0.3 us for getppid warm, 2 us for the same read
 * warm), and stopping a thread blocked in a sleep costs 90-130 us: its idle vCPU must be woken.
 */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* As pyrsprof's tick (src/sample/source_ptrace.c, STOP_SPIN_NS): the stop is polled this long;
 * a stop that comes later is of a thread that waited for a CPU, and is timed from the stop on
 * (the sampler restarts a late thread's clock there: that wait is not a cost of the sample). */
#define STOP_SPIN_US 50.0

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

/* ---- tick: every thread of a program ---- */

#define TICK_MAX_TASKS 4096
#define TICK_MAX_N 1000000
#define TICK_OPTIONS (PTRACE_O_TRACEFORK | PTRACE_O_TRACEVFORK)

struct tick_state {
	pid_t tid[TICK_MAX_TASKS];
	bool owed[TICK_MAX_TASKS];
	pid_t tgid[TICK_MAX_TASKS];  /* its process: the threads of each process are listed */
	int n, nowed;
	pid_t root;
	bool root_gone;
	int root_status;
	long samples;
};

static int task_find(struct tick_state *ts, pid_t tid)
{
	for (int i = 0; i < ts->n; i++)
		if (ts->tid[i] == tid)
			return i;
	return -1;
}

/* Adds thread tid of process tgid (tid: a new process). Returns its index or -1 (full). */
static int task_add(struct tick_state *ts, pid_t tid, pid_t tgid)
{
	int i = task_find(ts, tid);

	if (i >= 0 || ts->n == TICK_MAX_TASKS)
		return i;
	ts->tid[ts->n] = tid;
	ts->owed[ts->n] = false;
	ts->tgid[ts->n] = tgid;
	return ts->n++;
}

static void task_remove(struct tick_state *ts, int i)
{
	ts->nowed -= ts->owed[i];
	ts->n--;
	ts->tid[i] = ts->tid[ts->n];
	ts->owed[i] = ts->owed[ts->n];
	ts->tgid[i] = ts->tgid[ts->n];
}

/* Threads of process pid (a leader of ts) not known yet, seized. Returns how many. */
static int seize_new_threads(struct tick_state *ts, pid_t pid, int known)
{
	char path[64];
	struct stat st;
	struct dirent *e;
	DIR *d;
	int added = 0;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	/* (its link count is 2 + its threads: listed only when it has more than known) */
	if (known > 0 && stat(path, &st) == 0 && st.st_nlink >= 2 && (int)st.st_nlink - 2 == known)
		return 0;
	d = opendir(path);
	while (d && (e = readdir(d))) {
		pid_t tid = (pid_t)atoi(e->d_name);

		if (tid > 0 && task_find(ts, tid) < 0 && ptrace(PTRACE_SEIZE, tid, 0, TICK_OPTIONS) == 0) {
			task_add(ts, tid, pid);
			added++;
		}
	}
	if (d)
		closedir(d);
	return added;
}

/* Seizes the new threads of every process followed (before a tick's interrupts). */
static void seize_all_new(struct tick_state *ts)
{
	int n = ts->n;

	for (int i = 0; i < n; i++) {
		int known = 0;

		if (ts->tid[i] != ts->tgid[i])
			continue;
		for (int k = 0; k < ts->n; k++)
			known += ts->tgid[k] == ts->tgid[i];
		seize_new_threads(ts, ts->tid[i], known);
	}
}

/* Handles one waitpid result: an owed stop is a sample (regs read); every stop is resumed, a
 * signal-delivery stop with its signal. */
static void tick_event(struct tick_state *ts, pid_t w, int st)
{
	int i = task_find(ts, w);
	int ev = st >> 16;

	if (WIFEXITED(st) || WIFSIGNALED(st)) {
		if (i >= 0)
			task_remove(ts, i);
		if (w == ts->root) {
			ts->root_gone = true;
			ts->root_status = st;
		}
		return;
	}
	if (!WIFSTOPPED(st))
		return;
	if (i < 0)
		i = task_add(ts, w, w); /* a new process's first stop before its parent's event */
	if (i >= 0 && ts->owed[i]) {
		struct user_regs_struct regs;

		ptrace(PTRACE_GETREGS, w, 0, &regs);
		ts->owed[i] = false;
		ts->nowed--;
		ts->samples++;
	}
	if (ev == PTRACE_EVENT_FORK || ev == PTRACE_EVENT_VFORK) {
		unsigned long child;

		if (ptrace(PTRACE_GETEVENTMSG, w, 0, &child) == 0)
			task_add(ts, (pid_t)child, (pid_t)child);
	}
	ptrace(PTRACE_CONT, w, 0, (void *)(long)(ev == 0 ? WSTOPSIG(st) : 0));
}

static int tick_start(struct tick_state *ts, char **argv, bool attach)
{
	if (attach) {
		int added;

		ts->root = (pid_t)atoi(argv[0]);
		do /* threads started meanwhile show up in the next listing */
			added = seize_new_threads(ts, ts->root, 0);
		while (added);
		return ts->n ? 0 : -1;
	}
	ts->root = fork();
	if (ts->root == 0) {
		raise(SIGSTOP);
		execvp(argv[0], argv);
		_exit(127);
	}
	if (ts->root < 0 || waitpid(ts->root, NULL, WUNTRACED) != ts->root ||
	    ptrace(PTRACE_SEIZE, ts->root, 0, TICK_OPTIONS))
		return -1;
	task_add(ts, ts->root, ts->root);
	kill(ts->root, SIGCONT);
	return 0;
}

/* Takes every waitpid result until none is pending (block: waits for one first). */
static void tick_drain(struct tick_state *ts, bool block)
{
	int st;
	pid_t w;

	while ((w = waitpid(-1, &st, __WALL | (block ? 0 : WNOHANG))) > 0) {
		tick_event(ts, w, st);
		block = false;
	}
}

/* The ticks, every period us, until secs (0: until the root is gone). Returns the ticks. */
static long tick_loop(struct tick_state *ts, double period, double secs, double *t)
{
	double start = now_us(), next = start;
	long n = 0;

	while (n < TICK_MAX_N && !ts->root_gone && ts->n && (secs <= 0 || now_us() - start < secs * 1e6)) {
		double t0;

		next += period;
		while (now_us() < next && !ts->root_gone) { /* between ticks: the events */
			tick_drain(ts, false);
			sleep_until(now_us() + 200 < next ? now_us() + 200 : next);
		}
		seize_all_new(ts);
		t0 = now_us();
		for (int i = 0; i < ts->n; i++)
			if (!ts->owed[i] && ptrace(PTRACE_INTERRUPT, ts->tid[i], 0, 0) == 0) {
				ts->owed[i] = true;
				ts->nowed++;
			}
		while (ts->nowed > 0 && ts->n)
			tick_drain(ts, false);
		t[n++] = now_us() - t0;
	}
	return n;
}

/* Stops and detaches every thread left (attach mode). */
static void tick_detach(struct tick_state *ts)
{
	for (int i = 0; i < ts->n; i++) {
		int st;

		if (ptrace(PTRACE_INTERRUPT, ts->tid[i], 0, 0) == 0 &&
		    waitpid(ts->tid[i], &st, __WALL) == ts->tid[i] && WIFSTOPPED(st))
			ptrace(PTRACE_DETACH, ts->tid[i], 0,
			       (void *)(long)((st >> 16) == 0 ? WSTOPSIG(st) : 0));
	}
}

static int tick_main(int argc, char **argv)
{
	static struct tick_state ts;
	double period, secs, *t;
	bool attach;
	long n;

	if (argc < 6 || (strcmp(argv[4], "-p") && strcmp(argv[4], "--"))) {
		fprintf(stderr, "usage: floor tick PERIOD_US SECS -p PID | -- CMD ARGS...\n");
		return 2;
	}
	period = atof(argv[2]);
	secs = atof(argv[3]);
	attach = !strcmp(argv[4], "-p");
	t = calloc(TICK_MAX_N, sizeof(*t));
	if (period <= 0 || !t || tick_start(&ts, argv + 5, attach) != 0) {
		fprintf(stderr, "floor: cannot trace %s\n", argv[5]);
		return 1;
	}
	n = tick_loop(&ts, period, attach ? secs : 0, t);
	if (attach)
		tick_detach(&ts);
	else
		while (!ts.root_gone && ts.n)
			tick_drain(&ts, true);
	qsort(t, (size_t)n, sizeof(*t), cmp_d);
	if (n)
		fprintf(stderr, "floor tick ticks %ld samples %ld median_us %.2f p90_us %.2f p99_us %.2f\n",
			n, ts.samples, t[n / 2], t[n * 9 / 10], t[n * 99 / 100]);
	return !attach && WIFEXITED(ts.root_status) ? WEXITSTATUS(ts.root_status) : 0;
}

int main(int argc, char **argv)
{
	pid_t pid;
	double period, next, *t;
	long n, i, late = 0;
	bool stop;
	unsigned long addr = 0;

	if (argc > 1 && !strcmp(argv[1], "tick"))
		return tick_main(argc, argv);
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
			while ((w = waitpid(pid, &st, __WALL | WNOHANG)) == 0 && now_us() - t0 < STOP_SPIN_US)
				__builtin_ia32_pause();
			if (w == 0) { /* late: waiting for a CPU; counted from its stop, as pyrsprof does */
				w = waitpid(pid, &st, __WALL);
				t0 = now_us();
				late++;
			}
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
	printf("floor %s median_us %.2f p10_us %.2f p90_us %.2f late %ld\n", argv[1], t[n / 2], t[n / 10],
	       t[n * 9 / 10], late);
	free(t);
	return 0;
}
