/* SPDX-License-Identifier: MIT */
/*
 * Unwinding in the signal handler vs copying for pyrsprof (issue 12 point 2): for each target
 * (build/tests/unwind/chain: 28 noinline C functions, -O2 -fomit-frame-pointer, 33 frames; and
 * build/tests/unwind/rec: a Rust recursion 28 deep, linked by rustc's default rust-lld) this runs
 * the target with uhb_preload.so, whose handler, on every sample of the main thread's CPU clock
 * (1000 Hz), both copies registers + stack top as the agent does and runs libunwind's local
 * unwinder (tests/bench/uhb/uhb.h). It prints each method's handler time per sample (median, p90,
 * p99 µs) and, for the same samples, how many of libunwind's stacks equal frame for frame what
 * pyrsprof's unwinder (prs_unwind, as source_preload.c calls it) gives from the copy.
 * Then the hazard runs (uhb_hazard): threads looping dlopen/dlclose, dl_iterate_phdr and
 * malloc/free, sampled at 1000 Hz with libunwind in the handler (and with the copy, the control),
 * with and without a tgkill storm; a run that does not finish within its timeout is a deadlock.
 *
 * usage: unwind_handler_bench [samples per target (default 500)] [hazard seconds (default 3)]
 * Finds its helpers in BUILD/bench-uhb/ and the targets in BUILD/tests/unwind/ (BUILD: the
 * parent of the folder holding this binary).
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../bench/uhb/uhb.h"
#include "pyrsprof/unwind.h"
#include "util/banned.h"

static char build_dir[PATH_MAX];

static void sleep_ms(unsigned ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static double q_us(const uint64_t *sorted, unsigned n, double q)
{
	return n ? (double)sorted[(unsigned)((n - 1) * q + 0.5)] / 1000.0 : 0.0;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void load_avg(char *buf, size_t n)
{
	FILE *f = fopen("/proc/loadavg", "r");

	buf[0] = '\0';
	if (f) {
		if (!fgets(buf, (int)n, f))
			buf[0] = '\0';
		fclose(f);
	}
	buf[strcspn(buf, " ")] = '\0'; /* the 1-minute figure */
}

static pid_t spawn(char *const argv[], const char *preload, const char *out, const char *samples,
		   int out_fd)
{
	pid_t pid = fork();

	if (pid == 0) {
		int nul = open("/dev/null", O_RDWR);

		if (preload) {
			setenv("LD_PRELOAD", preload, 1);
			setenv("UHB_OUT", out, 1);
			setenv("UHB_SAMPLES", samples, 1);
		}
		dup2(out_fd >= 0 ? out_fd : nul, 1);
		execv(argv[0], argv);
		_exit(127);
	}
	return pid;
}

/* Waits up to ms for path to exist while pid lives. Returns 0, -ESRCH (pid died) or -ETIMEDOUT. */
static int wait_file(const char *path, pid_t pid, unsigned ms)
{
	struct stat st;
	int status;

	for (unsigned t = 0; t < ms; t += 10) {
		if (stat(path, &st) == 0)
			return 0;
		if (waitpid(pid, &status, WNOHANG) == pid)
			return -ESRCH;
		sleep_ms(10);
	}
	return -ETIMEDOUT;
}

static uint8_t *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	uint8_t *b = NULL;
	long n;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0) {
		b = malloc((size_t)n);
		if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
			free(b);
			b = NULL;
		}
		*len = (size_t)n;
	}
	fclose(f);
	return b;
}

struct result {
	unsigned n, agree, unw_fail;
	int unw_depth, prs_depth; /* medians */
	uint64_t *copy, *unw;     /* sorted ns */
	uint64_t *prs;            /* sorted ns: prs_unwind of the copy, in this process */
};

/* Unwinds every kept sample with pyrsprof's unwinder (the live, stopped pid's maps) and
 * compares with libunwind's PCs. */
static int compare(pid_t pid, const uint8_t *file, size_t len, struct result *res)
{
	const struct uhb_file_hdr *h = (const void *)file;
	const struct uhb_rec *recs = (const void *)(h + 1);
	const uint8_t *arena = (const uint8_t *)(recs + (h->count));
	struct prs_unwinder *u = NULL;
	uint64_t pcs[PRS_MAX_NATIVE_FRAMES];
	uint64_t *ud, *pd;
	int rc;

	if (len < sizeof(*h) || h->magic != UHB_MAGIC ||
	    len < sizeof(*h) + h->count * sizeof(*recs) + h->arena_len)
		return -EINVAL;
	rc = prs_unwinder_new(pid, &u, NULL);
	if (rc)
		return rc;
	res->n = h->count;
	res->copy = calloc(h->count + 1, sizeof(uint64_t));
	res->unw = calloc(h->count + 1, sizeof(uint64_t));
	res->prs = calloc(h->count + 1, sizeof(uint64_t));
	ud = calloc(h->count + 1, sizeof(uint64_t));
	pd = calloc(h->count + 1, sizeof(uint64_t));
	for (unsigned i = 0; i < h->count; i++) {
		const struct uhb_rec *r = &recs[i];
		struct prs_regs regs;
		struct prs_snapshot snap;
		uint64_t t0;
		int n;

		memset(&regs, 0, sizeof(regs));
		memcpy(regs.r, r->regs, sizeof(regs.r));
		regs.orig_rax = (uint64_t)-1;
		regs.fs_base = r->fs_base;
		snap.base = regs.r[PRS_REG_RSP];
		snap.len = r->stack_len;
		snap.data = arena + r->stack_off;
		t0 = now_ns();
		n = prs_unwind(u, &regs, &snap, pcs, PRS_MAX_NATIVE_FRAMES, NULL);
		res->prs[i] = now_ns() - t0;
		res->copy[i] = r->copy_ns;
		res->unw[i] = r->unw_ns;
		ud[i] = r->unw_n < 0 ? 0 : (uint64_t)r->unw_n;
		pd[i] = n < 0 ? 0 : (uint64_t)n;
		if (r->unw_n < 0 || r->unw_end < 0)
			res->unw_fail++;
		if (r->unw_n == n && n > 0 && memcmp(pcs, r->upcs, (size_t)n * sizeof(pcs[0])) == 0)
			res->agree++;
	}
	qsort(res->copy, h->count, sizeof(uint64_t), cmp_u64);
	qsort(res->unw, h->count, sizeof(uint64_t), cmp_u64);
	qsort(res->prs, h->count, sizeof(uint64_t), cmp_u64);
	qsort(ud, h->count, sizeof(uint64_t), cmp_u64);
	qsort(pd, h->count, sizeof(uint64_t), cmp_u64);
	res->unw_depth = h->count ? (int)ud[h->count / 2] : 0;
	res->prs_depth = h->count ? (int)pd[h->count / 2] : 0;
	free(ud);
	free(pd);
	prs_unwinder_free(u);
	return 0;
}

static int run_target(const char *label, const char *target, const char *samples)
{
	char preload[PATH_MAX + 32], dir[] = "/tmp/uhb-XXXXXX", out[PATH_MAX], la[64];
	char *argv[] = {(char *)target, NULL};
	struct result res = {0};
	uint8_t *file = NULL;
	size_t len = 0;
	pid_t pid;
	int rc, status;

	if (access(target, X_OK)) {
		printf("| %-28s | missing %s (make unwind-targets) |\n", label, target);
		return -ENOENT;
	}
	if (!mkdtemp(dir))
		return -errno;
	snprintf(preload, sizeof(preload), "%s/bench-uhb/uhb_preload.so", build_dir);
	snprintf(out, sizeof(out), "%s/samples", dir);
	pid = spawn(argv, preload, out, samples, -1);
	rc = pid < 0 ? -errno : wait_file(out, pid, 180000);
	if (!rc) {
		kill(pid, SIGSTOP);
		file = read_file(out, &len);
		rc = file ? compare(pid, file, len, &res) : -EIO;
	}
	if (pid > 0) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
	}
	unlink(out);
	rmdir(dir);
	free(file);
	load_avg(la, sizeof(la));
	if (rc) {
		printf("| %-28s | failed: %s |\n", label, strerror(-rc));
		return rc;
	}
	printf("| %-28s | %5u | %5.2f / %5.2f / %6.2f | %6.2f / %6.2f / %7.2f | %6.2f / %6.2f / %7.2f | %3d / %3d | %5u (%3.0f %%) | %4u | %s |\n",
	       label, res.n, q_us(res.copy, res.n, 0.5), q_us(res.copy, res.n, 0.9),
	       q_us(res.copy, res.n, 0.99), q_us(res.unw, res.n, 0.5), q_us(res.unw, res.n, 0.9),
	       q_us(res.unw, res.n, 0.99), q_us(res.prs, res.n, 0.5), q_us(res.prs, res.n, 0.9),
	       q_us(res.prs, res.n, 0.99), res.unw_depth, res.prs_depth, res.agree,
	       res.n ? 100.0 * res.agree / res.n : 0.0, res.unw_fail, la);
	free(res.copy);
	free(res.unw);
	free(res.prs);
	return 0;
}

/*
 * Where a deadlocked run's threads wait, from eu-stack: for each thread in our handler, the
 * function it waits in (the first frame not a lock primitive) and the one the signal interrupted
 * (the frame under __restore_rt). Printed as "waits in X, interrupted in Y; ...".
 */
static void stuck_where(pid_t pid, char *out, size_t n)
{
	char cmd[64], line[512], wait_in[128] = "", prev[128] = "";
	size_t used = 0;
	int after_restore = 0;
	FILE *p;

	out[0] = '\0';
	snprintf(cmd, sizeof(cmd), "eu-stack -p %d 2>/dev/null", (int)pid);
	p = popen(cmd, "r");
	if (!p)
		return;
	while (fgets(line, sizeof(line), p)) {
		char name[128] = "";

		if (strncmp(line, "TID", 3) == 0) {
			wait_in[0] = '\0';
			after_restore = 0;
			continue;
		}
		if (sscanf(line, "#%*d %*s %127s", name) != 1)
			continue;
		if (!wait_in[0] && !strstr(name, "lll_lock") && !strstr(name, "mutex_lock") &&
		    !strstr(name, "futex"))
			snprintf(wait_in, sizeof(wait_in), "%s", name);
		if (after_restore) {
			after_restore = 0;
			if (used < n)
				used += (size_t)snprintf(out + used, n - used, "%swaits in %s, interrupted in %s",
							 used ? "; " : "", prev, name);
		}
		if (strcmp(name, "__restore_rt") == 0) {
			after_restore = 1;
			snprintf(prev, sizeof(prev), "%s", wait_in);
		}
	}
	pclose(p);
}

/* One hazard run: finished (with its counts), crashed, or deadlocked (killed after the timeout). */
static void run_hazard(const char *mode, const char *secs, const char *storm, const char *cache,
		       const char *ops)
{
	char exe[PATH_MAX], dso[PATH_MAX], line[512] = "", la[64], where[1024];
	char *argv[] = {exe, (char *)mode, (char *)secs, (char *)storm, dso, (char *)cache, (char *)ops, NULL};
	unsigned timeout_ms = (unsigned)(atof(secs) * 1000) + 10000, t;
	int fds[2], status = 0;
	pid_t pid;
	FILE *f;

	snprintf(exe, sizeof(exe), "%s/bench-uhb/uhb_hazard", build_dir);
	snprintf(dso, sizeof(dso), "%s/bench-uhb/uhb_dso.so", build_dir);
	if (pipe(fds))
		return;
	pid = spawn(argv, NULL, NULL, NULL, fds[1]);
	close(fds[1]);
	for (t = 0; t < timeout_ms; t += 20) {
		if (waitpid(pid, &status, WNOHANG) == pid)
			break;
		sleep_ms(20);
	}
	load_avg(la, sizeof(la));
	printf("| %-4s | %-6s | %-3s | %-5s | ", mode, cache, ops, storm);
	if (t >= timeout_ms) {
		stuck_where(pid, where, sizeof(where));
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		printf("DEADLOCK: not finished in %u s; %s | %s |\n", timeout_ms / 1000, where, la);
		close(fds[0]);
		return;
	}
	f = fdopen(fds[0], "r");
	if (f && !fgets(line, sizeof(line), f))
		line[0] = '\0';
	if (f)
		fclose(f);
	line[strcspn(line, "\n")] = '\0';
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		printf("finished: %s | %s |\n", line, la);
	else
		printf("CRASHED: %s %d | %s |\n", WIFSIGNALED(status) ? "signal" : "exit",
		       WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status), la);
}

int main(int argc, char **argv)
{
	const char *samples = argc > 1 ? argv[1] : "500", *secs = argc > 2 ? argv[2] : "3";
	char exe[PATH_MAX], chain[PATH_MAX + 32], rec[PATH_MAX + 32];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	if (n <= 0)
		return 1;
	exe[n] = '\0';
	snprintf(build_dir, sizeof(build_dir), "%s", dirname(dirname(exe)));
	snprintf(chain, sizeof(chain), "%s/tests/unwind/chain", build_dir);
	snprintf(rec, sizeof(rec), "%s/tests/unwind/rec", build_dir);
	printf("\n## Unwinding in the signal handler: copy (agent) vs libunwind local (per sample, us)\n\n");
	printf("Main thread's CPU clock at 1000 Hz; each sample does both, in alternating order.\n");
	printf("prs_unwind: pyrsprof's unwind of the copy, run later outside the handler (in pyrsprof).\n");
	printf("agree: libunwind's PCs equal pyrsprof's unwind of the copy, frame for frame.\n\n");
	printf("| target | samples | copy med / p90 / p99 | libunwind med / p90 / p99 | prs_unwind med / p90 / p99 | depth unw / prs | agree | unw errors | load |\n");
	printf("|---|---|---|---|---|---|---|---|---|\n");
	run_target("C chain -O2 -fomit-fp (33)", chain, samples);
	run_target("Rust rec, rust-lld (38)", rec, samples);
	printf("\n## libunwind in the handler: signals inside dlopen, dl_iterate_phdr, malloc (%s s each)\n\n", secs);
	printf("Threads (ops d: dlopen+dlclose, p: dl_iterate_phdr, m: malloc+free), each with its CPU\n");
	printf("clock at 1000 Hz; storm: plus a tgkill to each every N us; cache: libunwind's policy.\n");
	printf("in_op: samples that landed inside the call. unw: libunwind in the handler; copy: the agent's copy.\n\n");
	printf("| mode | cache | ops | storm us | outcome | load |\n|---|---|---|---|---|---|\n");
	run_hazard("unw", secs, "0", "global", "dpm");
	run_hazard("unw", secs, "200", "none", "dpm");
	run_hazard("unw", secs, "200", "global", "d");
	run_hazard("unw", secs, "200", "global", "p");
	run_hazard("unw", secs, "200", "global", "m");
	run_hazard("copy", secs, "0", "global", "dpm");
	run_hazard("copy", secs, "200", "global", "dpm");
	return 0;
}
