// SPDX-License-Identifier: MIT
/*
 * echo_output: a steady, checkable stream of output, for "output intact" tests.
 *
 * Usage: echo_output [SECONDS [LINES_PER_SECOND [EXIT_CODE]]]   (default 2 s, 50/s, exit 0)
 *        echo_output --stdin                                     copy stdin to stdout, then a checksum
 *
 * Prints "line 000001 <payload>" lines on stdout at a steady pace (absolute deadlines) for
 * SECONDS, every 10th line also "err 000010" on stderr, then "checksum lines=N fnv=HEX" where HEX
 * is the 64-bit FNV-1a hash of every stdout byte before that line, and "echo_output: done" on
 * stderr. The content does not depend on timing: two runs with the same arguments print the same
 * bytes, so tests can compare byte for byte and recompute the hash independently. Between lines it
 * does some CPU work, so profiles have something to see. SIGINT/SIGTERM: finishes the current
 * line, prints "echo_output: got signal N" on stderr and the checksum, exits 128+N.
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t got_signal;
static volatile uint64_t sink; /* keeps busy() from being optimized away */
static uint64_t fnv = 0xcbf29ce484222325ull;

static void on_signal(int sig)
{
	got_signal = sig;
}

static void out(const char *buf, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		fnv ^= (unsigned char)buf[i];
		fnv *= 0x100000001b3ull;
	}
	fwrite(buf, 1, n, stdout);
}

__attribute__((noinline, noclone)) uint64_t busy(uint64_t x);

uint64_t busy(uint64_t x)
{
	/* ~2-3 ms here: 5-15 % of the time at 25-50 lines/s, enough for a profile to see. */
	for (int i = 0; i < 2500000; i++)
		x = x * 6364136223846793005ull + 1;
	return x;
}

static int copy_stdin(void)
{
	char buf[4096];
	size_t n, total = 0;

	while ((n = fread(buf, 1, sizeof(buf), stdin)) > 0) {
		out(buf, n);
		total += n;
	}
	printf("checksum bytes=%zu fnv=%016llx\n", total, (unsigned long long)fnv);
	return 0;
}

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? atof(argv[1]) : 2.0;
	double rate = argc > 2 ? atof(argv[2]) : 50.0;
	int code = argc > 3 ? atoi(argv[3]) : 0;
	long n = (long)(seconds * rate + 0.5), i;
	struct sigaction sa = { .sa_handler = on_signal };
	struct timespec next;
	uint64_t x = 1;
	char line[128];

	if (argc > 1 && strcmp(argv[1], "--stdin") == 0)
		return copy_stdin();
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	setvbuf(stdout, NULL, _IOLBF, 0);
	clock_gettime(CLOCK_MONOTONIC, &next);
	for (i = 1; i <= n && !got_signal; i++) {
		int len = snprintf(line, sizeof(line), "line %06ld %08lx-%s\n", i,
				   (unsigned long)(i * 2654435761ul), i % 7 ? "abcdefgh" : "");

		out(line, (size_t)len);
		if (i % 10 == 0)
			fprintf(stderr, "err %06ld\n", i);
		x = busy(x);
		sink = x;
		next.tv_nsec += (long)(1e9 / rate);
		while (next.tv_nsec >= 1000000000L) {
			next.tv_nsec -= 1000000000L;
			next.tv_sec++;
		}
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL) != 0 && !got_signal)
			;
	}
	if (got_signal)
		fprintf(stderr, "echo_output: got signal %d\n", (int)got_signal);
	printf("checksum lines=%ld fnv=%016llx\n", i - 1, (unsigned long long)fnv);
	fprintf(stderr, "echo_output: done\n");
	return got_signal ? 128 + (int)got_signal : code;
}
