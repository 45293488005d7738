/* SPDX-License-Identifier: MIT */
/*
 * Starting a program as a (traced) child: the fork/exec gate. The child waits on a pipe until
 * the parent has seized it, so that it is traced from its first instruction; exec's errno comes
 * back through a close-on-exec pipe.
 */
#include "pyrsprof/ptrace.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/banned.h"

/* The child: waits until the parent has seized it, then execs with the signal mask the user's
 * shell gave pyrsprof (the parent blocks the signals it waits for). Never returns. */
static void child(char *const argv[], int gate_rd, int status_wr)
{
	sigset_t none;
	char c;
	int e;

	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	while (read(gate_rd, &c, 1) < 0 && errno == EINTR)
		;
	execvp(argv[0], argv);
	e = errno;
	if (write(status_wr, &e, sizeof(e)) < 0)
		_exit(127);
	_exit(127);
}

/* Lets a child whose exec failed exit, and reaps it; traced, it may stop on the way. */
static void reap(pid_t pid)
{
	int st;

	for (;;) {
		struct prs_event ev;

		if (waitpid(pid, &st, __WALL) < 0)
			return;
		prs_ptrace_decode(pid, st, &ev);
		if (ev.kind == PRS_EV_EXITED || ev.kind == PRS_EV_KILLED)
			return;
		if (ev.kind == PRS_EV_GROUP_STOP)
			prs_ptrace_listen(pid);
		else
			prs_ptrace_cont(pid, ev.kind == PRS_EV_SIGNAL ? ev.sig : 0);
	}
}

/* Releases the child and waits for its exec: 0 once it runs the program, or -errno (err set). */
static int release(char *const argv[], pid_t pid, int *gate_wr, int *status_rd, struct prs_err *err)
{
	int child_errno = 0;
	ssize_t n;

	if (write(*gate_wr, "x", 1) != 1)
		return prs_err_set(err, -errno, "start child: %s", strerror(errno));
	close(*gate_wr);
	*gate_wr = -1;
	/* The status pipe closes at a successful exec (O_CLOEXEC) or carries exec's errno. */
	while ((n = read(*status_rd, &child_errno, sizeof(child_errno))) < 0 && errno == EINTR)
		;
	close(*status_rd);
	*status_rd = -1;
	if (n != (ssize_t)sizeof(child_errno))
		return 0;
	reap(pid);
	return prs_err_set(err, -child_errno, "cannot run '%s': %s", argv[0], strerror(child_errno));
}

int prs_ptrace_launch(char *const argv[], int seize_options, pid_t *pid, struct prs_err *err)
{
	int gate[2] = { -1, -1 }, status_pipe[2] = { -1, -1 };
	int rc = 0;
	pid_t p;

	if (pipe2(gate, O_CLOEXEC) != 0 || pipe2(status_pipe, O_CLOEXEC) != 0) {
		rc = prs_err_set(err, -errno, "pipe: %s", strerror(errno));
		goto out;
	}
	p = fork();
	if (p < 0) {
		rc = prs_err_set(err, -errno, "fork: %s", strerror(errno));
		goto out;
	}
	if (p == 0) {
		close(gate[1]);
		close(status_pipe[0]);
		child(argv, gate[0], status_pipe[1]);
	}
	close(gate[0]);
	gate[0] = -1;
	close(status_pipe[1]);
	status_pipe[1] = -1;
	if (seize_options) {
		rc = prs_ptrace_seize(p, seize_options, err);
		if (rc) {
			kill(p, SIGKILL);
			waitpid(p, NULL, 0);
			goto out;
		}
	}
	rc = release(argv, p, &gate[1], &status_pipe[0], err);
	if (rc == 0)
		*pid = p;
out:
	for (int i = 0; i < 2; i++) {
		if (gate[i] >= 0)
			close(gate[i]);
		if (status_pipe[i] >= 0)
			close(status_pipe[i]);
	}
	return rc;
}
