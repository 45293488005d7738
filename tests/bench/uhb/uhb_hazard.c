/* SPDX-License-Identifier: MIT */
/*
 * uhb_hazard MODE SECONDS STORM_US DSO CACHE OPS: the deadlock-hazard run of libunwind in the handler.
 * Up to three threads loop (OPS: the letters d, p and m choose them), each with its CPU clock armed at 1000 Hz (uhb.h): dlopen+dlclose of DSO,
 * dl_iterate_phdr over every object, malloc+free of varied sizes; each marks the call with
 * uhb_in_op so the samples that landed inside it are counted. With STORM_US > 0 the main thread
 * also sends each worker SIGRTMIN+8 every STORM_US microseconds (tgkill), to land more signals
 * inside the loader's and malloc's critical sections than the CPU clocks' tick-rate expiries do.
 * MODE: "unw" (libunwind in the handler) or "copy" (the agent's copy: the control). CACHE:
 * libunwind's caching policy for the local address space, "global" (its default), "thread" or "none".
 * Prints one line of counts and exits 0 when all threads finished; the driver's timeout tells a
 * deadlock. Exits 2 on a setup error.
 */
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "uhb.h"
#include "util/banned.h"

static atomic_int stop;
static const char *dso;

struct worker {
	const char *name;
	char letter;
	bool on;
	void (*op)(unsigned i);
	unsigned long ops;
	pid_t tid;
	int err;
	pthread_t t;
};

static void op_dlopen(unsigned i)
{
	void *h;

	(void)i;
	uhb_in_op = 1;
	h = dlopen(dso, RTLD_NOW | RTLD_LOCAL);
	if (h)
		dlclose(h);
	uhb_in_op = 0;
}

static int phdr_cb(struct dl_phdr_info *info, size_t size, void *data)
{
	unsigned long *n = data;

	(void)size;
	for (int j = 0; j < info->dlpi_phnum; j++)
		*n += info->dlpi_phdr[j].p_memsz & 1;
	return 0;
}

static void op_phdr(unsigned i)
{
	unsigned long n = 0;

	(void)i;
	uhb_in_op = 1;
	dl_iterate_phdr(phdr_cb, &n);
	uhb_in_op = 0;
}

static void op_malloc(unsigned i)
{
	static __thread void *keep[64];
	size_t sz = (size_t)16 << (i % 14); /* 16 B .. 128 KiB: tcache, bins and mmap */
	void *p;

	uhb_in_op = 1;
	p = malloc(sz);
	if (p)
		memset(p, (int)i, sz < 64 ? sz : 64);
	free(keep[i % 64]);
	keep[i % 64] = p;
	uhb_in_op = 0;
}

static void *run(void *arg)
{
	struct worker *w = arg;

	w->tid = (pid_t)syscall(SYS_gettid);
	w->err = uhb_arm(1000);
	for (unsigned i = 0; !w->err && !atomic_load(&stop); i++) {
		w->op(i);
		w->ops++;
	}
	uhb_disarm();
	return NULL;
}

int main(int argc, char **argv)
{
	struct worker ws[] = {
		{"dlopen", 'd', false, op_dlopen},
		{"dl_iterate_phdr", 'p', false, op_phdr},
		{"malloc", 'm', false, op_malloc},
	};
	const int nw = (int)(sizeof(ws) / sizeof(ws[0]));
	int mode, storm_us;
	double secs;
	struct timespec t0, t;

	if (argc != 7) {
		fprintf(stderr, "usage: uhb_hazard unw|copy SECONDS STORM_US DSO global|thread|none OPS\n");
		return 2;
	}
	mode = strcmp(argv[1], "unw") == 0 ? UHB_UNW : UHB_COPY;
	secs = atof(argv[2]);
	storm_us = atoi(argv[3]);
	dso = argv[4];
	if (uhb_setup(mode, 0) || uhb_unw_cache(argv[5]))
		return 2;
	for (int i = 0; i < nw; i++)
		ws[i].on = strchr(argv[6], ws[i].letter) != NULL;
	for (int i = 0; i < nw; i++)
		if (ws[i].on)
			pthread_create(&ws[i].t, NULL, run, &ws[i]);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		usleep(storm_us > 0 ? (unsigned)storm_us : 10000);
		for (int i = 0; storm_us > 0 && i < nw; i++)
			if (ws[i].tid)
				syscall(SYS_tgkill, getpid(), ws[i].tid, SIGRTMIN + 8);
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while ((double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) / 1e9 < secs);
	atomic_store(&stop, 1);
	for (int i = 0; i < nw; i++)
		if (ws[i].on)
			pthread_join(ws[i].t, NULL);
	printf("samples %lu in_op %lu unw_fail %lu frames %lu", atomic_load(&uhb_stats.samples),
	       atomic_load(&uhb_stats.in_op), atomic_load(&uhb_stats.unw_fail),
	       atomic_load(&uhb_stats.frames));
	for (int i = 0; i < nw; i++)
		if (ws[i].on)
			printf(" %s %lu%s", ws[i].name, ws[i].ops, ws[i].err ? " (arm failed)" : "");
	printf("\n");
	return 0;
}
