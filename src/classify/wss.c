/* SPDX-License-Identifier: MIT */
/*
 * The working-set floor of `--wss` (docs/classify.md section 3; the note's §5 point 2): a thread
 * beside the sampler writes "1" to /proc/PID/clear_refs (the kernel clears the accessed bits of
 * the process's pages), waits a window, and reads "Referenced:" from /proc/PID/smaps_rollup: the
 * memory the process touched in that window. Once a second; the median window and the largest
 * are kept.
 *
 * Why this and not idle-page tracking (/sys/kernel/mm/page_idle): that needs root and
 * CONFIG_IDLE_PAGE_TRACKING (absent on the dev VM), and a walk of /proc/PID/pagemap to find the
 * process's frames. clear_refs needs only write access to the target's /proc files (its owner),
 * and smaps_rollup sums for us. Its cost is the target's: clearing walks its page tables and
 * flushes its TLB (the note measured 9 ms at 512 MiB RSS), so it is opt-in and at most 1 Hz.
 * Pages touched are a floor on the bytes moved: each was touched at least once in the window.
 */
#include "pyrsprof/wss.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "util/banned.h"

struct prs_wss {
	pid_t pid;
	uint64_t window_ns, every_ns;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool stop;
	struct prs_wss_result r; /* under mu */
};

static uint64_t mono_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

int prs_wss_clear(pid_t pid)
{
	char path[64];
	int fd, rc = 0;

	snprintf(path, sizeof(path), "/proc/%d/clear_refs", (int)pid);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (write(fd, "1", 1) != 1)
		rc = -errno;
	close(fd);
	return rc;
}

int prs_wss_referenced(pid_t pid, uint64_t *bytes)
{
	char path[64], buf[4096];
	ssize_t n;
	const char *at;
	unsigned long long kb;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/smaps_rollup", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return n < 0 ? -errno : -ENODATA;
	buf[n] = '\0';
	at = strstr(buf, "\nReferenced:");
	if (!at || sscanf(at + 12, "%llu kB", &kb) != 1)
		return -ENODATA;
	*bytes = (uint64_t)kb * 1024;
	return 0;
}

#define PROBE_BYTES (64u << 20) /* past any TLB's reach */

/* "Referenced:" of this process's mapping that holds addr (/proc/self/smaps), in bytes: the
 * probe's own pages (and its mapping's, if the kernel merged it with a neighbour), not all that
 * the process touched meanwhile (under ASan, the shadow of the probe's 64 MiB: 8 MiB more). */
static int referenced_of(uint64_t addr, uint64_t *bytes)
{
	char line[512];
	unsigned long long lo, hi, kb;
	bool in = false;
	FILE *f = fopen("/proc/self/smaps", "re");

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		size_t hex = strspn(line, "0123456789abcdef");

		if (hex && line[hex] == '-' && sscanf(line, "%llx-%llx ", &lo, &hi) == 2)
			in = addr >= lo && addr < hi; /* a mapping's first line */
		else if (in && sscanf(line, "Referenced: %llu kB", &kb) == 1) {
			fclose(f);
			*bytes = (uint64_t)kb * 1024;
			return 0;
		}
	}
	fclose(f);
	return -ENODATA;
}

int prs_wss_probe(uint64_t *again, uint64_t *of)
{
	volatile uint8_t *buf = mmap(NULL, PROBE_BYTES, PROT_READ | PROT_WRITE,
				     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint64_t before = 0, after = 0, start = (uint64_t)(uintptr_t)buf;
	int rc;

	if (buf == MAP_FAILED)
		return -errno;
	memset((void *)buf, 1, PROBE_BYTES);
	rc = prs_wss_clear(getpid());
	if (rc == 0)
		rc = referenced_of(start, &before);
	for (size_t i = 0; rc == 0 && i < PROBE_BYTES; i += 4096)
		buf[i]++;
	if (rc == 0)
		rc = referenced_of(start, &after);
	munmap((void *)buf, PROBE_BYTES);
	if (rc)
		return rc;
	*of = PROBE_BYTES;
	*again = after > before ? after - before : 0;
	return *again >= PROBE_BYTES / 2;
}

/* Waits until deadline (CLOCK_MONOTONIC ns) or a stop; true when stopped. Called with mu held. */
static bool wait_until(struct prs_wss *w, uint64_t deadline)
{
	struct timespec ts = { (time_t)(deadline / 1000000000ull), (long)(deadline % 1000000000ull) };

	while (!w->stop && mono_ns() < deadline)
		pthread_cond_timedwait(&w->cv, &w->mu, &ts);
	return w->stop;
}

/* One window: clear, wait, read. Called with mu held (released while waiting). */
static bool measure(struct prs_wss *w)
{
	uint64_t t0 = mono_ns(), t1, bytes = 0;
	int rc = prs_wss_clear(w->pid);

	if (rc == 0) {
		t1 = mono_ns();
		if (t1 - t0 > w->r.clear_ns_max)
			w->r.clear_ns_max = t1 - t0;
		if (wait_until(w, t1 + w->window_ns))
			return true; /* (a cut window is no measure) */
		rc = prs_wss_referenced(w->pid, &bytes);
	}
	if (rc != 0) {
		w->r.err = rc;
		return true; /* the target is gone, or we may not: no point trying again */
	}
	w->r.window_ns = w->window_ns;
	w->r.samples++;
	w->r.last_bytes = bytes;
	if (w->r.samples <= PRS_WSS_KEEP)
		w->r.kept[w->r.samples - 1] = bytes;
	if (bytes > w->r.max_bytes)
		w->r.max_bytes = bytes;
	return false;
}

static void *run(void *arg)
{
	struct prs_wss *w = arg;
	uint64_t next = mono_ns() + w->window_ns; /* past the target's start-up */

	pthread_mutex_lock(&w->mu);
	while (!wait_until(w, next) && !measure(w))
		next += w->every_ns;
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

static int by_value(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* The median of v[0..n) (sorted in place); the lower of the two middle ones when n is even. */
static uint64_t median(uint64_t *v, unsigned n)
{
	if (!n)
		return 0;
	qsort(v, n, sizeof(*v), by_value);
	return v[(n - 1) / 2];
}

int prs_wss_start(pid_t pid, uint64_t window_ns, uint64_t every_ns, struct prs_wss **out)
{
	struct prs_wss *w = calloc(1, sizeof(*w));
	pthread_condattr_t ca;
	int rc;

	if (!w)
		return -ENOMEM;
	w->pid = pid;
	w->window_ns = window_ns;
	w->every_ns = every_ns > window_ns ? every_ns : window_ns;
	pthread_mutex_init(&w->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&w->cv, &ca);
	pthread_condattr_destroy(&ca);
	rc = pthread_create(&w->thread, NULL, run, w);
	if (rc) {
		pthread_cond_destroy(&w->cv);
		pthread_mutex_destroy(&w->mu);
		free(w);
		return -rc;
	}
	*out = w;
	return 0;
}

void prs_wss_stop(struct prs_wss *w, struct prs_wss_result *r)
{
	memset(r, 0, sizeof(*r));
	if (!w)
		return;
	pthread_mutex_lock(&w->mu);
	w->stop = true;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
	pthread_join(w->thread, NULL);
	*r = w->r;
	r->median_bytes = median(r->kept, r->samples < PRS_WSS_KEEP ? r->samples : PRS_WSS_KEEP);
	pthread_cond_destroy(&w->cv);
	pthread_mutex_destroy(&w->mu);
	free(w);
}
