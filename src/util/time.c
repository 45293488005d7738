/* SPDX-License-Identifier: MIT */
/* The monotonic clock the sampler and the profile timestamps use. */
#include "pyrsprof/util.h"

#include <time.h>

#include "util/banned.h"

uint64_t prs_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
