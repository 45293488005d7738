/* SPDX-License-Identifier: MIT */
/*
 * Unwind benchmark: for each target (the C 28-deep chain built -fomit-frame-pointer, the Rust
 * recursion linked by rust-lld, and a pyenv CPython 3.12 loop when installed) take N ptrace samples
 * 2 ms apart (INTERRUPT, wait, GETREGSET, 64 KiB stack read, CONT) and unwind every snapshot with
 * each method: the cached-CFI fast path (AUTO), libdw's Dwfl, the frame-pointer walk, and
 * libunwind's remote API with our own accessors (comparison only). Prints median / p10 / p90 in µs.
 * Correctness: the last sample freezes the target in the sampled state and every method's PCs are
 * compared with `eu-stack -p` ("exact"); "stable" counts running samples whose frames 1..n equal
 * eu-stack's (the C and Rust chains never change below the leaf).
 *
 * usage: unwind_bench [samples (default 300)]; UNWIND_BENCH_PIN=1 pins the profiler to CPU 0 and
 * the target to CPU 1 (notes/limits.md did; on a loaded 2-CPU VM it measures the other load).
 */
#include <dirent.h>
#include <errno.h>
#include <libunwind-ptrace.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../fixtures/unwind/harness.h"
#include "pyrsprof/unwind.h"
#include "util/banned.h"

#define CAP (64 * 1024)
#define MAXF PRS_MAX_NATIVE_FRAMES

enum { M_STOP, M_FAST, M_DWFL, M_FP, M_LIBUNWIND, M_TOTAL, M__N };
static const char *const mname[M__N] = {
	"stop (interrupt..cont, 64K snap)", "unwind fast (auto: cached CFI)", "unwind libdw Dwfl",
	"unwind frame pointers", "unwind libunwind remote", "total: stop + fast unwind",
};

/* libunwind accessors read the current sample from here: _UPT_find_proc_info calls access_mem
 * with its own handle as arg (limits.md §5), so the state cannot live in arg. */
static struct {
	struct prs_unwinder *u;
	const struct prs_regs *regs;
	const struct prs_snapshot *snap;
} g;

static int acc_mem(unw_addr_space_t as, unw_word_t addr, unw_word_t *val, int write, void *arg)
{
	const struct prs_snapshot *s = g.snap;

	(void)as;
	(void)arg;
	if (write)
		return -UNW_EINVAL;
	if (addr >= s->base && addr - s->base + 8 <= s->len) {
		memcpy(val, s->data + (addr - s->base), 8);
		return 0;
	}
	return prs_unwinder_read(g.u, addr, val, 8) == 0 ? 0 : -UNW_EINVAL;
}

static int acc_reg(unw_addr_space_t as, unw_regnum_t reg, unw_word_t *val, int write, void *arg)
{
	(void)as;
	(void)arg;
	/* UNW_X86_64_* uses the DWARF numbering of struct prs_regs; UNW_X86_64_RIP == 16. */
	if (write || reg < 0 || reg >= PRS_NREGS)
		return -UNW_EBADREG;
	*val = g.regs->r[reg];
	return 0;
}

static int acc_fpreg(unw_addr_space_t as, unw_regnum_t reg, unw_fpreg_t *val, int write, void *arg)
{
	(void)as, (void)reg, (void)val, (void)write, (void)arg;
	return -UNW_EBADREG;
}

static int acc_resume(unw_addr_space_t as, unw_cursor_t *c, void *arg)
{
	(void)as, (void)c, (void)arg;
	return -UNW_EINVAL;
}

static void *upt;
static int acc_find_proc_info(unw_addr_space_t as, unw_word_t ip, unw_proc_info_t *pi, int need,
			      void *arg)
{
	(void)arg;
	return _UPT_find_proc_info(as, ip, pi, need, upt);
}

static void acc_put_unwind_info(unw_addr_space_t as, unw_proc_info_t *pi, void *arg)
{
	(void)arg;
	_UPT_put_unwind_info(as, pi, upt);
}

static int acc_dyn(unw_addr_space_t as, unw_word_t *dil, void *arg)
{
	(void)arg;
	return _UPT_get_dyn_info_list_addr(as, dil, upt);
}

static unw_accessors_t accessors = {
	.find_proc_info = acc_find_proc_info,
	.put_unwind_info = acc_put_unwind_info,
	.get_dyn_info_list_addr = acc_dyn,
	.access_mem = acc_mem,
	.access_reg = acc_reg,
	.access_fpreg = acc_fpreg,
	.resume = acc_resume,
};

static int lu_unwind(unw_addr_space_t as, uint64_t *pcs, int max)
{
	unw_cursor_t c;
	int n = 0;

	if (unw_init_remote(&c, as, upt) != 0)
		return 0;
	do {
		unw_word_t ip;

		if (unw_get_reg(&c, UNW_REG_IP, &ip) != 0 || (n > 0 && ip == 0))
			break;
		pcs[n++] = ip;
	} while (n < max && unw_step(&c) > 0);
	return n;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static double pct(uint64_t *v, int n, int p)
{
	int i = (n - 1) * p / 100;

	return n ? (double)v[i] / 1000.0 : 0;
}

static int run_one(const char *label, char *const argv[], int nsamp, bool stable_chain)
{
	static uint8_t stack[CAP];
	static uint64_t pcs[MAXF];
	uint64_t *t[M__N];
	int frames[M__N] = { 0 }, stable[M__N] = { 0 }, exact[M__N] = { 0 };
	struct uh_stack truth;
	struct prs_err err;
	struct prs_unwinder *u = NULL;
	struct prs_regs regs;
	struct prs_snapshot snap;
	struct prs_unwind_info info;
	unw_addr_space_t as;
	uint64_t t0, first_fast = 0, first_dwfl = 0, new_ns = 0;
	int ns = 0, fell_back = 0, lu_frames0 = 0;
	double refresh_med = 0;
	pid_t pid;
	size_t len;
	/* each sample's PCs per method, to compare with eu-stack afterwards */
	static uint64_t (*keep)[M__N][MAXF];
	static int (*keepn)[M__N];

	keep = calloc((size_t)nsamp, sizeof(*keep));
	keepn = calloc((size_t)nsamp, sizeof(*keepn));
	for (int m = 0; m < M__N; m++)
		t[m] = calloc((size_t)nsamp, sizeof(uint64_t));
	pid = uh_spawn(argv);
	if (pid <= 0 || uh_seize(pid) != 0) {
		fprintf(stderr, "%s: cannot start or ptrace %s\n", label, argv[0]);
		uh_kill(pid);
		return -1;
	}
	if (getenv("UNWIND_BENCH_PIN") && sysconf(_SC_NPROCESSORS_ONLN) >= 2) {
		/* profiler on CPU 0, target on CPU 1, as in notes/limits.md */
		cpu_set_t set;

		CPU_ZERO(&set);
		CPU_SET(1, &set);
		sched_setaffinity(pid, sizeof(set), &set);
		CPU_ZERO(&set);
		CPU_SET(0, &set);
		sched_setaffinity(0, sizeof(set), &set);
	}
	t0 = uh_now_ns();
	if (prs_unwinder_new(pid, &u, &err) != 0) {
		fprintf(stderr, "%s: %s\n", label, err.msg);
		uh_kill(pid);
		return -1;
	}
	new_ns = uh_now_ns() - t0;
	g.u = u;
	as = unw_create_addr_space(&accessors, 0);
	unw_set_caching_policy(as, UNW_CACHE_GLOBAL);
	upt = _UPT_create(pid);

	for (int i = 0; i <= nsamp; i++) {
		bool last = i == nsamp;
		uint64_t a, b;
		int k = last ? 0 : i;

		usleep(2000);
		if (uh_sample(pid, &regs, stack, CAP, &len, &a, last) != 0) {
			fprintf(stderr, "%s: sample %d failed\n", label, i);
			break;
		}
		snap = (struct prs_snapshot){ regs.r[PRS_REG_RSP], len, stack };
		g.regs = &regs;
		g.snap = &snap;
		if (!last)
			t[M_STOP][k] = a;
		for (int m = M_FAST; m <= M_LIBUNWIND; m++) {
			int n;

			if (m == M_LIBUNWIND) {
				a = uh_now_ns();
				n = lu_unwind(as, pcs, MAXF);
				b = uh_now_ns();
			} else {
				prs_unwinder_set_method(u, m == M_FAST ? PRS_UNWIND_AUTO :
							   m == M_DWFL ? PRS_UNWIND_DWFL : PRS_UNWIND_FP);
				a = uh_now_ns();
				n = prs_unwind(u, &regs, &snap, pcs, MAXF, &info);
				b = uh_now_ns();
				if (m == M_FAST && info.method == PRS_UNWIND_DWFL && !last)
					fell_back++;
			}
			if (i == 0 && m == M_FAST)
				first_fast = b - a;
			if (i == 0 && m == M_DWFL)
				first_dwfl = b - a;
			if (i == 0 && m == M_LIBUNWIND)
				lu_frames0 = n;
			if (last) {
				memcpy(keep[0][m], pcs, (size_t)n * sizeof(*pcs));
				keepn[0][m] = n;
			} else {
				if (i > 0) /* sample 0 is the cold one */
					t[m][ns] = b - a;
				memcpy(keep[k][m], pcs, (size_t)n * sizeof(*pcs));
				keepn[k][m] = n;
				frames[m] = n;
			}
		}
		if (!last && i > 0) {
			t[M_TOTAL][ns] = t[M_STOP][i] + t[M_FAST][ns];
			t[M_STOP][ns] = t[M_STOP][i];
			ns++;
		}
		if (last) {
			/* the frozen sample: compare with eu-stack */
			if (uh_eustack(pid, &truth) != 0) {
				fprintf(stderr, "%s: eu-stack failed\n", label);
				truth.n = 0;
			}
			for (int m = M_FAST; m <= M_LIBUNWIND; m++)
				exact[m] = keepn[0][m] == truth.n && truth.n > 0 &&
					   memcmp(keep[0][m], truth.pc, (size_t)truth.n * 8) == 0;
		}
	}
	/* running samples: frames below the leaf must equal eu-stack's (stable chains only) */
	for (int i = 1; i < nsamp; i++)
		for (int m = M_FAST; m <= M_LIBUNWIND; m++)
			stable[m] += keepn[i][m] == truth.n && truth.n > 1 &&
				     memcmp(keep[i][m] + 1, truth.pc + 1, (size_t)(truth.n - 1) * 8) == 0;

	{
		/* an unchanged refresh: one read of /proc/PID/maps and a memcmp */
		uint64_t r[50];

		for (int i = 0; i < 50; i++) {
			uint64_t a = uh_now_ns();

			prs_unwinder_refresh(u, NULL);
			r[i] = uh_now_ns() - a;
		}
		qsort(r, 50, sizeof(r[0]), cmp_u64);
		refresh_med = (double)r[25] / 1000;
	}
	printf("\n%s: %d samples, eu-stack %d frames; prs_unwinder_new %.0f µs; unchanged refresh %.1f µs; "
	       "first unwind fast %.0f µs, "
	       "dwfl %.0f µs; auto fell back to dwfl on %d samples; libunwind frames on sample 0: %d\n",
	       label, ns, truth.n, (double)new_ns / 1000, refresh_med, (double)first_fast / 1000,
	       (double)first_dwfl / 1000, fell_back, lu_frames0);
	printf("| %-34s | frames | median µs | p10 µs | p90 µs | frozen = eu-stack | running = eu-stack below leaf |\n",
	       "step");
	printf("|---|---|---|---|---|---|---|\n");
	for (int m = 0; m < M__N; m++) {
		qsort(t[m], (size_t)ns, sizeof(uint64_t), cmp_u64);
		if (m >= M_FAST && m <= M_LIBUNWIND && stable_chain)
			printf("| %-34s | %6d | %9.2f | %6.2f | %6.2f | %-17s | %d/%d |\n", mname[m],
			       frames[m], pct(t[m], ns, 50), pct(t[m], ns, 10), pct(t[m], ns, 90),
			       exact[m] ? "yes" : "NO", stable[m], nsamp - 1);
		else if (m >= M_FAST && m <= M_LIBUNWIND)
			printf("| %-34s | %6d | %9.2f | %6.2f | %6.2f | %-17s | n/a (stack changes) |\n",
			       mname[m], frames[m], pct(t[m], ns, 50), pct(t[m], ns, 10),
			       pct(t[m], ns, 90), exact[m] ? "yes" : "NO");
		else
			printf("| %-34s | %6s | %9.2f | %6.2f | %6.2f | %-17s | %s |\n", mname[m], "",
			       pct(t[m], ns, 50), pct(t[m], ns, 10), pct(t[m], ns, 90), "", "");
	}
	_UPT_destroy(upt);
	unw_destroy_addr_space(as);
	prs_unwinder_free(u);
	uh_kill(pid);
	for (int m = 0; m < M__N; m++)
		free(t[m]);
	free(keep);
	free(keepn);
	return 0;
}

static const char *find_python312(char *buf, size_t cap)
{
	const char *root = getenv("PYENV_ROOT");
	char dir[1024];
	struct dirent *e;
	DIR *d;
	const char *res = NULL;

	snprintf(dir, sizeof(dir), "%s/versions", root ? root : "/root/.pyenv");
	d = opendir(dir);
	if (!d)
		return NULL;
	while ((e = readdir(d)) && !res)
		if (strncmp(e->d_name, "3.12", 4) == 0) {
			snprintf(buf, cap, "%s/%s/bin/python3.12", dir, e->d_name);
			if (access(buf, X_OK) == 0)
				res = buf;
		}
	closedir(d);
	return res;
}

int main(int argc, char **argv)
{
	int nsamp = argc > 1 ? atoi(argv[1]) : 300;
	char c[PATH_MAX], r[PATH_MAX], py[PATH_MAX];
	char script[] = "tests/fixtures/unwind/loop.py";
	char *ca[] = { c, NULL }, *ra[] = { r, NULL }, *pa[] = { py, script, NULL };

	if (nsamp < 10 || nsamp > 100000)
		nsamp = 300;
	snprintf(c, sizeof(c), "%s/chain", uh_target_dir());
	snprintf(r, sizeof(r), "%s/rec", uh_target_dir());
	printf("unwind benchmark: %d samples per target, 2 ms apart (µs, wall time, profiler side)\n",
	       nsamp);
	run_one("C chain (-O2 -fomit-frame-pointer, 28 deep)", ca, nsamp, true);
	run_one("Rust recursion (rustc -O -g, rust-lld, 28 deep)", ra, nsamp, true);
	if (find_python312(py, sizeof(py)) && access(script, R_OK) == 0)
		run_one("CPython 3.12 loop.py (native stack changes every sample)", pa, nsamp, false);
	return 0;
}
