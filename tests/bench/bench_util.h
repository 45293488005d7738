/* SPDX-License-Identifier: MIT */
/*
 * What the C benchmarks in tests/bench share: a deterministic generator (splitmix64 over a
 * caller's state) and the monotonic clock in seconds. Header-only (each bench is one program).
 */
#ifndef PYRSPROF_BENCH_UTIL_H
#define PYRSPROF_BENCH_UTIL_H

#include <stdint.h>
#include <time.h>

/* The next value of splitmix64 for *state (advanced). */
static inline uint64_t bench_splitmix(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* CLOCK_MONOTONIC in seconds. */
static inline double bench_now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

#endif
