/* SPDX-License-Identifier: MIT */
/*
 * prs_task_state_fd (src/proc/task.c), the vm mode's per-sample thread state: the same letter as
 * prs_task_state, through one file descriptor kept open across calls, given up once the thread
 * is gone. The truth: a child the test stops and kills itself.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <sys/syscall.h>
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

/* A child blocked in read() on a pipe; it reads again after each byte, and exits at EOF. */
static pid_t reader_child(int *wfd, int *rfd)
{
	int p[2];
	pid_t child;

	cr_assert_eq(pipe(p), 0);
	child = fork();
	cr_assert_geq(child, 0);
	if (child == 0) {
		char c;

		close(p[1]);
		while (read(p[0], &c, 1) > 0)
			;
		_exit(0);
	}
	*rfd = p[0];
	*wfd = p[1];
	return child;
}

/* Waits (up to 2 s) until the child is asleep in syscall nr. */
static int wait_syscall(pid_t pid, int *fd, int nr, struct prs_task_sys *sys)
{
	int rc = -1;

	for (int i = 0; i < 200; i++) {
		rc = prs_task_syscall_fd(pid, pid, fd, sys);
		if (rc == 0 && !sys->running && sys->nr == nr)
			return 0;
		usleep(10000);
	}
	return rc ? rc : -EAGAIN;
}

Test(task_state, syscall_file_names_the_blocking_call)
{
	struct prs_task_sys sys, again;
	int fd = -1, wfd, rfd;
	pid_t child = reader_child(&wfd, &rfd);

	cr_assert_eq(wait_syscall(child, &fd, SYS_read, &sys), 0, "the child blocks in read");
	cr_assert_eq(sys.args[0], (uint64_t)rfd, "read(the pipe's read end, ...)");
	cr_assert_eq(sys.args[2], 1, "of 1 byte");
	cr_assert_neq(sys.sp, 0);
	cr_assert_neq(sys.pc, 0);
	cr_assert_eq(prs_task_syscall_fd(child, child, &fd, &again), 0);
	cr_assert(again.sp == sys.sp && again.pc == sys.pc && again.args[1] == sys.args[1],
		  "asleep in the same call, the same registers");
	kill(child, SIGSTOP);
	for (int i = 0; i < 200 && prs_task_state(child, child) != 'T'; i++)
		usleep(10000);
	cr_assert_eq(prs_task_syscall_fd(child, child, &fd, &again), 0);
	cr_assert_eq(again.running, false, "a stopped thread is not running");
	kill(child, SIGCONT);
	close(wfd);
	close(rfd);
	cr_assert_eq(waitpid(child, NULL, 0), child);
	cr_assert_eq(prs_task_syscall_fd(child, child, &fd, &sys), -ESRCH, "a reaped thread is gone");
	cr_assert_eq(fd, -1, "and its descriptor closed");
}

Test(task_state, syscall_file_running_thread)
{
	struct prs_task_sys sys;
	int fd = -1, rc = -1;
	pid_t child = fork();

	cr_assert_geq(child, 0);
	if (child == 0)
		for (;;)
			__asm__ volatile("" ::: "memory");
	for (int i = 0; i < 200 && (rc = prs_task_syscall_fd(child, child, &fd, &sys)) == 0 && !sys.running; i++)
		usleep(10000);
	cr_assert_eq(rc, 0);
	cr_assert(sys.running, "a spinning child runs");
	cr_assert_eq(sys.nr, -1);
	kill(child, SIGKILL);
	cr_assert_eq(waitpid(child, NULL, 0), child);
	close(fd);
	/* a thread reading its own file sees that read in progress */
	fd = -1;
	cr_assert_eq(prs_task_syscall_fd(getpid(), (pid_t)syscall(SYS_gettid), &fd, &sys), 0);
	cr_assert(!sys.running && sys.nr == SYS_pread64, "own thread: nr %d", sys.nr);
	close(fd);
}

/* schedstat: a sleeping thread's numbers do not move; once it runs, the CPU time and the count of
 * times it got a CPU do. */
Test(task_state, schedstat_still_while_asleep)
{
	struct prs_schedstat a, b;
	struct prs_task_sys sys;
	int fd = -1, sfd = -1, wfd, rfd;
	pid_t child = reader_child(&wfd, &rfd);

	cr_assert_eq(wait_syscall(child, &sfd, SYS_read, &sys), 0);
	cr_assert_eq(prs_task_schedstat(child, child, &fd, &a), 0);
	usleep(50000);
	cr_assert_eq(prs_task_schedstat(child, child, &fd, &b), 0);
	cr_assert(a.cpu_ns == b.cpu_ns && a.slices == b.slices && a.wait_ns == b.wait_ns,
		  "asleep 50 ms: %llu/%llu CPU ns, %llu/%llu slices", (unsigned long long)a.cpu_ns,
		  (unsigned long long)b.cpu_ns, (unsigned long long)a.slices, (unsigned long long)b.slices);
	cr_assert_gt(a.slices, 0);
	cr_assert_eq(write(wfd, "x", 1), 1);
	usleep(20000);
	cr_assert_eq(wait_syscall(child, &sfd, SYS_read, &sys), 0, "it read the byte and sleeps again");
	cr_assert_eq(prs_task_schedstat(child, child, &fd, &b), 0);
	cr_assert_gt(b.slices, a.slices, "it got a CPU to read the byte");
	cr_assert_gt(b.cpu_ns, a.cpu_ns, "and used some");
	close(wfd);
	close(rfd);
	cr_assert_eq(waitpid(child, NULL, 0), child);
	cr_assert_lt(prs_task_schedstat(child, child, &fd, &b), 0);
	cr_assert_eq(fd, -1);
	close(sfd);
}
