// SPDX-License-Identifier: MIT
/*
 * bounds: one workload per bound, each measuring itself, for the classifier's end-to-end tests.
 *
 * Usage: bounds MODE SECONDS [ARG]
 *   spin             a CPU loop in spin_work()
 *   sleep            10 ms nanosleeps with a little work between
 *   pipe             main reads a pipe a feeder thread writes a byte to every 5 ms
 *   socket           main sends a request over loopback TCP, a server thread answers 5 ms later
 *   disk FILE [KIB]  O_DIRECT reads of KIB KiB (default 1024) at random offsets of FILE (exit 77
 *                    with the reason when the file system refuses O_DIRECT); small reads are
 *                    short D-state waits, over before an interrupted thread stops
 *   spinners N       N threads spinning
 *   exits N          N threads, thread i spinning until it has used (i+1)*0.2 s of CPU, then
 *                    exiting (each prints "truth exited tid=T cpu=C"); main joins them and sleeps
 *                    SECONDS more, so the recording outlives them
 *   pool N           N threads parked on a condition variable, main spinning
 *   stream MB        a triad over three arrays of MB MiB each (streaming memory traffic)
 *   chase MB         pointer chasing over a random cycle through MB MiB
 *   mutex N          N threads taking one mutex, 100 us of work inside, 1 us outside
 * At the end it prints "truth wait=W" (the share of the measuring thread's wall time spent in
 * the wait the mode is about, by CLOCK_MONOTONIC around each wait) or "truth cpu=C" (thread CPU
 * time / wall time), then "done".
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double seconds;
static volatile int stop;
static volatile uint64_t sink;

static double now(clockid_t c)
{
	struct timespec t;

	clock_gettime(c, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static double mono(void)
{
	return now(CLOCK_MONOTONIC);
}

static void sleep_ms(double ms)
{
	struct timespec ts = { (time_t)(ms / 1000), (long)((ms - 1000 * (time_t)(ms / 1000)) * 1e6) };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

__attribute__((noinline)) static uint64_t spin_work(uint64_t n) /* HOT:spin_work */
{
	uint64_t x = 0;

	for (uint64_t i = 0; i < n; i++)
		x = x * 6364136223846793005ull + i;
	return x;
}

static void mode_spin(void)
{
	double t0 = mono(), c0 = now(CLOCK_THREAD_CPUTIME_ID);

	while (mono() - t0 < seconds)
		sink += spin_work(200000);
	printf("truth cpu=%.3f\n", (now(CLOCK_THREAD_CPUTIME_ID) - c0) / (mono() - t0));
}

static void mode_sleep(void)
{
	double t0 = mono(), waited = 0;

	while (mono() - t0 < seconds) {
		double w = mono();

		sleep_ms(10);
		waited += mono() - w;
		sink += spin_work(1000);
	}
	printf("truth wait=%.3f\n", waited / (mono() - t0));
}

static int pipefd[2];

static void *feeder(void *arg)
{
	(void)arg;
	while (!stop) {
		sleep_ms(5);
		if (write(pipefd[1], "x", 1) != 1)
			break;
	}
	return NULL;
}

static void mode_pipe(void)
{
	pthread_t t;
	double t0, waited = 0;
	char c;

	if (pipe(pipefd) != 0)
		exit(1);
	pthread_create(&t, NULL, feeder, NULL);
	t0 = mono();
	while (mono() - t0 < seconds) {
		double w = mono();

		if (read(pipefd[0], &c, 1) != 1)
			break;
		waited += mono() - w;
	}
	printf("truth wait=%.3f\n", waited / (mono() - t0));
	stop = 1;
	pthread_join(t, NULL);
}

static int listener;

static void *server(void *arg)
{
	int fd = accept(listener, NULL, NULL);
	char buf[64];

	(void)arg;
	while (fd >= 0 && read(fd, buf, sizeof(buf)) > 0) {
		sleep_ms(5); /* the "remote" work */
		if (write(fd, "pong", 4) != 4)
			break;
	}
	if (fd >= 0)
		close(fd);
	return NULL;
}

static void mode_socket(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof(a);
	pthread_t t;
	double t0, waited = 0;
	char buf[64];
	int fd;

	listener = socket(AF_INET, SOCK_STREAM, 0);
	if (listener < 0 || bind(listener, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(listener, 1) != 0 ||
	    getsockname(listener, (struct sockaddr *)&a, &alen) != 0)
		exit(1);
	pthread_create(&t, NULL, server, NULL);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0)
		exit(1);
	t0 = mono();
	while (mono() - t0 < seconds) {
		double w;

		if (write(fd, "ping", 4) != 4)
			break;
		w = mono();
		if (recv(fd, buf, sizeof(buf), 0) <= 0)
			break;
		waited += mono() - w;
	}
	printf("truth wait=%.3f\n", waited / (mono() - t0));
	close(fd);
	pthread_join(t, NULL);
}

static void mode_disk(const char *path, size_t kib)
{
	size_t bs = kib << 10;
	int fd = open(path, O_RDONLY | O_DIRECT);
	off_t size;
	double t0, waited = 0;
	unsigned s = 12345;
	void *buf;

	if (fd < 0) {
		printf("skip: O_DIRECT open of %s: %s\n", path, strerror(errno));
		exit(77);
	}
	size = lseek(fd, 0, SEEK_END);
	if (!bs || size < (off_t)bs || posix_memalign(&buf, 4096, bs) != 0)
		exit(1);
	t0 = mono();
	while (mono() - t0 < seconds) {
		double w = mono();
		off_t off;

		s = s * 1103515245u + 12345u;
		off = (off_t)(s % (unsigned)(size / (off_t)bs)) * (off_t)bs;
		if (pread(fd, buf, bs, off) != (ssize_t)bs) {
			printf("skip: O_DIRECT read of %s: %s\n", path, strerror(errno));
			exit(77);
		}
		waited += mono() - w;
	}
	printf("truth wait=%.3f\n", waited / (mono() - t0));
}

static void *spinner(void *arg)
{
	(void)arg;
	while (!stop)
		sink += spin_work(100000);
	return NULL;
}

static void run_threads(int n, void *(*fn)(void *), void *arg)
{
	pthread_t *t = calloc((size_t)n, sizeof(*t));

	for (int i = 0; i < n; i++)
		pthread_create(&t[i], NULL, fn, arg);
	sleep_ms(seconds * 1000);
	stop = 1;
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	free(t);
}

static void *exiting_spinner(void *arg)
{
	double want = 0.2 * (double)(1 + (intptr_t)arg), c0 = now(CLOCK_THREAD_CPUTIME_ID), c;

	while ((c = now(CLOCK_THREAD_CPUTIME_ID)) - c0 < want)
		sink += spin_work(20000);
	printf("truth exited tid=%d cpu=%.4f\n", (int)gettid(), c);
	return NULL;
}

static void mode_exits(int n)
{
	pthread_t *t = calloc((size_t)n, sizeof(*t));

	for (intptr_t i = 0; i < n; i++)
		pthread_create(&t[i], NULL, exiting_spinner, (void *)i);
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	free(t);
	sleep_ms(seconds * 1000);
}

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;

static void *parked(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&m);
	while (!stop)
		pthread_cond_wait(&cv, &m);
	pthread_mutex_unlock(&m);
	return NULL;
}

static void mode_pool(int n)
{
	pthread_t *t = calloc((size_t)n, sizeof(*t));
	double t0;

	for (int i = 0; i < n; i++)
		pthread_create(&t[i], NULL, parked, NULL);
	mode_spin();
	t0 = mono();
	pthread_mutex_lock(&m);
	stop = 1;
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&m);
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	(void)t0;
	free(t);
}

__attribute__((noinline)) static void triad(double *a, const double *b, const double *c, size_t n) /* HOT:triad */
{
	for (size_t i = 0; i < n; i++)
		a[i] = b[i] + 3.0 * c[i];
}

static void mode_stream(size_t mb)
{
	size_t n = (mb << 20) / sizeof(double);
	double *a = malloc(n * sizeof(double)), *b = malloc(n * sizeof(double)), *c = malloc(n * sizeof(double));
	double t0;

	for (size_t i = 0; i < n; i++)
		a[i] = 0, b[i] = 1, c[i] = 2;
	t0 = mono();
	while (mono() - t0 < seconds)
		triad(a, b, c, n);
	sink += (uint64_t)a[n / 2];
	printf("truth cpu=%.3f\n", 1.0);
}

__attribute__((noinline)) static size_t chase(const size_t *next, size_t start, size_t steps) /* HOT:chase */
{
	size_t p = start;

	while (steps--)
		p = next[p];
	return p;
}

static void mode_chase(size_t mb)
{
	size_t n = (mb << 20) / sizeof(size_t), p = 0;
	size_t *next = malloc(n * sizeof(size_t)), *perm = malloc(n * sizeof(size_t));
	uint64_t s = 88172645463325252ull;
	double t0;

	/* a random cyclic permutation (Sattolo): every load depends on the last, and misses */
	for (size_t i = 0; i < n; i++)
		perm[i] = i;
	for (size_t i = n - 1; i > 0; i--) {
		size_t j, tmp;

		s ^= s << 13, s ^= s >> 7, s ^= s << 17;
		j = (size_t)(s % i);
		tmp = perm[i], perm[i] = perm[j], perm[j] = tmp;
	}
	for (size_t i = 0; i < n; i++)
		next[perm[i]] = perm[(i + 1) % n];
	free(perm);
	t0 = mono();
	while (mono() - t0 < seconds)
		p = chase(next, p, 1000000);
	sink += p;
	printf("truth cpu=%.3f\n", 1.0);
}

static double lock_wait[64];

static void *locker(void *arg)
{
	int id = (int)(intptr_t)arg;
	double t0 = mono();

	while (!stop) {
		double w = mono();

		pthread_mutex_lock(&m);
		lock_wait[id] += mono() - w;
		sink += spin_work(15000); /* about 100 us */
		pthread_mutex_unlock(&m);
		sink += spin_work(150);
	}
	lock_wait[id] /= mono() - t0;
	return NULL;
}

static void mode_mutex(int n)
{
	pthread_t t[64];
	double sum = 0;

	if (n > 64)
		n = 64;
	for (int i = 0; i < n; i++)
		pthread_create(&t[i], NULL, locker, (void *)(intptr_t)i);
	sleep_ms(seconds * 1000);
	stop = 1;
	for (int i = 0; i < n; i++) {
		pthread_join(t[i], NULL);
		sum += lock_wait[i];
	}
	printf("truth wait=%.3f\n", sum / n);
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "spin";
	const char *arg = argc > 3 ? argv[3] : NULL;

	seconds = argc > 2 ? atof(argv[2]) : 2;
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!strcmp(mode, "spin"))
		mode_spin();
	else if (!strcmp(mode, "sleep"))
		mode_sleep();
	else if (!strcmp(mode, "pipe"))
		mode_pipe();
	else if (!strcmp(mode, "socket"))
		mode_socket();
	else if (!strcmp(mode, "disk") && arg)
		mode_disk(arg, argc > 4 ? (size_t)atoi(argv[4]) : 1024);
	else if (!strcmp(mode, "spinners"))
		run_threads(arg ? atoi(arg) : 4, spinner, NULL);
	else if (!strcmp(mode, "exits"))
		mode_exits(arg ? atoi(arg) : 3);
	else if (!strcmp(mode, "pool"))
		mode_pool(arg ? atoi(arg) : 8);
	else if (!strcmp(mode, "stream"))
		mode_stream(arg ? (size_t)atoi(arg) : 64);
	else if (!strcmp(mode, "chase"))
		mode_chase(arg ? (size_t)atoi(arg) : 128);
	else if (!strcmp(mode, "mutex"))
		mode_mutex(arg ? atoi(arg) : 8);
	else {
		fprintf(stderr, "bounds: unknown mode %s\n", mode);
		return 2;
	}
	printf("done\n");
	return 0;
}
