// SPDX-License-Identifier: MIT
/*
 * blocked: threads that spend their time off-CPU in known syscalls.
 *
 * Usage: blocked [SECONDS]   (default 3 s)
 *
 * Thread "sleeper" sleeps in one long nanosleep (glibc issues clock_nanosleep) for SECONDS;
 * thread "reader" blocks in read() on a pipe nobody writes to; main waits in pthread_join for the
 * sleeper (a futex), then prints "blocked: done" and exits (which ends the reader). Each thread
 * prints "thread NAME tid=N" first, so tests can find the per-thread roots.
 */
#define _GNU_SOURCE /* pthread_setname_np */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double seconds = 3.0;
static int pipefd[2];
static pthread_mutex_t print_lock = PTHREAD_MUTEX_INITIALIZER;

static void announce(const char *name)
{
	pthread_setname_np(pthread_self(), name);
	pthread_mutex_lock(&print_lock);
	printf("thread %s tid=%ld\n", name, (long)syscall(SYS_gettid));
	fflush(stdout);
	pthread_mutex_unlock(&print_lock);
}

static void *sleeper(void *arg)
{
	struct timespec ts = { (time_t)seconds, (long)((seconds - (time_t)seconds) * 1e9) };

	(void)arg;
	announce("sleeper");
	/* Restart after a signal (e.g. a ptrace interrupt that the kernel does not restart). */
	while (nanosleep(&ts, &ts) != 0)
		;
	return NULL;
}

static void *reader(void *arg)
{
	char c;

	(void)arg;
	announce("reader");
	for (;;)
		if (read(pipefd[0], &c, 1) == 0)
			return NULL;
}

int main(int argc, char **argv)
{
	pthread_t s, r;

	if (argc > 1)
		seconds = atof(argv[1]);
	if (pipe(pipefd) != 0)
		return 1;
	printf("main tid=%ld\n", (long)getpid());
	fflush(stdout);
	if (pthread_create(&r, NULL, reader, NULL) != 0 || pthread_create(&s, NULL, sleeper, NULL) != 0)
		return 1;
	pthread_join(s, NULL);
	printf("blocked: done\n");
	return 0;
}
