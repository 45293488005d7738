/* SPDX-License-Identifier: MIT */
/*
 * uhb_preload.so: LD_PRELOAD'ed into a benchmark target (the C chain, the Rust recursion linked by
 * rust-lld) by unwind_handler_bench. Its constructor arms the main thread's CPU clock with both
 * methods in the handler (uhb.h) and starts a thread that, once UHB_SAMPLES samples are kept,
 * writes them to UHB_OUT and then sleeps until the driver kills the process (the driver reads the
 * live process's maps to unwind the copies). Nothing happens without UHB_OUT.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "uhb.h"
#include "util/banned.h"

static unsigned want;
static const char *out;

static void *writer(void *arg)
{
	int rc;

	(void)arg;
	while (uhb_kept() < want)
		usleep(5000);
	rc = uhb_write(out);
	if (rc)
		fprintf(stderr, "uhb_preload: cannot write %s: %s\n", out, strerror(-rc));
	for (;;)
		pause();
	return NULL;
}

__attribute__((constructor)) static void uhb_start(void)
{
	const char *s = getenv("UHB_SAMPLES");
	pthread_t t;
	int rc;

	out = getenv("UHB_OUT");
	if (!out)
		return;
	want = s ? (unsigned)strtoul(s, NULL, 10) : 500;
	if (!want)
		want = 1;
	rc = uhb_setup(UHB_COPY | UHB_UNW, want);
	if (!rc)
		rc = uhb_arm(1000);
	if (!rc)
		rc = pthread_create(&t, NULL, writer, NULL) ? -EAGAIN : 0;
	if (rc)
		fprintf(stderr, "uhb_preload: setup failed: %s\n", strerror(-rc));
}
