/* SPDX-License-Identifier: MIT */
/*
 * The /proc readers of a process tree (src/proc/task.c): a process's ids (prs_proc_ids), its CPU
 * time and its waited-for children's (prs_proc_cpu), and its children (prs_proc_children). The
 * truth: children the test forks itself, one of which spins for a known CPU time.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pyrsprof/task.h"

#include "util/banned.h"

static pid_t sleeper(void)
{
	pid_t c = fork();

	cr_assert_geq(c, 0);
	if (c == 0) {
		for (;;)
			pause();
	}
	return c;
}

static bool has(const pid_t *v, int n, pid_t p)
{
	for (int i = 0; i < n; i++)
		if (v[i] == p)
			return true;
	return false;
}

Test(task_tree, ids_of_a_child)
{
	struct prs_proc_ids ids;
	pid_t c = sleeper();

	cr_assert_eq(prs_proc_ids(c, &ids), 0);
	cr_assert_eq(ids.tgid, c);
	cr_assert_eq(ids.ppid, getpid());
	cr_assert_eq(ids.tracer, 0, "nobody traces it");
	kill(c, SIGKILL);
	waitpid(c, NULL, 0);
	cr_assert_eq(prs_proc_ids(c, &ids), -ESRCH, "a reaped child is gone");
}

Test(task_tree, children_are_listed)
{
	pid_t kids[8], a = sleeper(), b = sleeper();
	int n = prs_proc_children(getpid(), kids, 8);

	cr_assert_geq(n, 2);
	cr_assert(has(kids, n, a) && has(kids, n, b), "both children listed (%d found)", n);
	cr_assert_eq(prs_proc_children(a, kids, 8), 0, "a sleeper has no children");
	cr_assert_eq(prs_proc_children(getpid(), kids, 1), n, "the count beyond max");
	kill(a, SIGKILL);
	kill(b, SIGKILL);
	waitpid(a, NULL, 0);
	waitpid(b, NULL, 0);
	cr_assert_lt(prs_proc_children(-5, kids, 8), 0);
}

/* A child that spins for ms of its own CPU time, then exits. */
static pid_t spinner(int ms)
{
	pid_t c = fork();

	cr_assert_geq(c, 0);
	if (c == 0) {
		struct timespec ts;

		do
			clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
		while (ts.tv_sec * 1000 + ts.tv_nsec / 1000000 < ms);
		_exit(0);
	}
	return c;
}

Test(task_tree, children_cpu_is_counted_once_waited_for)
{
	pid_t mid = fork();

	cr_assert_geq(mid, 0);
	if (mid == 0) {
		/* the middle process waits for a 300 ms spinner, then sleeps */
		waitpid(spinner(300), NULL, 0);
		for (;;)
			pause();
	}
	uint64_t self = 0, children = 0;

	for (int i = 0; i < 500 && children == 0; i++) {
		usleep(10000);
		cr_assert_eq(prs_proc_cpu(mid, &self, &children), 0);
	}
	/* clock ticks: 10 ms granularity at USER_HZ 100 */
	cr_assert_geq(children, 280000000ull, "children %llu ns", (unsigned long long)children);
	cr_assert_leq(children, 400000000ull, "children %llu ns", (unsigned long long)children);
	cr_assert_lt(self, 100000000ull, "the middle process itself barely ran");
	kill(mid, SIGKILL);
	waitpid(mid, NULL, 0);
}
