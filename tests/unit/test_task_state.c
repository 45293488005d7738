/* SPDX-License-Identifier: MIT */
/*
 * prs_task_state_fd (src/proc/task.c), the vm mode's per-sample thread state: the same letter as
 * prs_task_state, through one file descriptor kept open across calls, given up once the thread
 * is gone. The truth: a child the test stops and kills itself.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pyrsprof/task.h"

#include "util/banned.h"

/* Waits (up to 2 s) until the child's state letter is want. */
static char wait_state(pid_t pid, int *fd, char want)
{
	char c = 0;

	for (int i = 0; i < 200 && (c = prs_task_state_fd(pid, pid, fd)) != want; i++)
		usleep(10000);
	return c;
}

Test(task_state, kept_fd_follows_the_thread)
{
	pid_t child = fork();
	int fd = -1, first;

	cr_assert_geq(child, 0);
	if (child == 0) {
		for (;;)
			pause();
	}
	cr_assert_eq(wait_state(child, &fd, 'S'), 'S', "a child in pause() sleeps");
	cr_assert_eq(prs_task_state(child, child), 'S');
	cr_assert_geq(fd, 0);
	first = fd;
	kill(child, SIGSTOP);
	cr_assert_eq(wait_state(child, &fd, 'T'), 'T', "stopped by SIGSTOP");
	cr_assert_eq(fd, first, "the descriptor is kept, not reopened");
	kill(child, SIGCONT);
	cr_assert_eq(wait_state(child, &fd, 'S'), 'S');
	kill(child, SIGKILL);
	cr_assert_eq(waitpid(child, NULL, 0), child);
	cr_assert_eq(prs_task_state_fd(child, child, &fd), 0, "a reaped thread has no state");
	cr_assert_eq(fd, -1, "and its descriptor is closed");
	cr_assert_eq(prs_task_state_fd(child, child, &fd), 0);
	cr_assert_eq(fd, -1);
}

Test(task_state, own_thread_runs)
{
	int fd = -1;

	cr_assert_eq(prs_task_state_fd(getpid(), getpid(), &fd), 'R');
	cr_assert_eq(prs_task_state_fd(getpid(), getpid(), &fd), 'R');
	cr_assert_geq(fd, 0);
	close(fd);
}
