// SPDX-License-Identifier: MIT
/*
 * scale: work whose cost is exactly linear or quadratic in n, for `pyrsprof sweep`'s tests.
 *
 * Usage: scale linear N [IGNORED...]     N steps of a xorshift chain
 *        scale quadratic N [IGNORED...]  N*N steps: for i < N, for j < N
 *        scale fail N LIMIT              N steps, then exit 3 when N > LIMIT
 * Each step is one round of xorshift64 on the running state, so a step costs the same whatever
 * the step (no data, no memory traffic, no branch that depends on the values) and the compiler
 * cannot fold the chain: the work is 1 * N or 1 * N^2 steps, nothing else grows. At about 1 ns a
 * step, N = 2e8 (linear) or N = 14000 (quadratic) takes about 0.2 s. The last state is printed
 * ("scale: steps=S x=X") so the chain is live. Extra arguments are ignored (tests pass hostile
 * text through them).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t step(uint64_t x)
{
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return x;
}

/* BEGIN:linear */
static uint64_t linear(uint64_t n, uint64_t x)
{
	for (uint64_t i = 0; i < n; i++)
		x = step(x); /* HOT:linear */
	return x;
}
/* END:linear */

/* BEGIN:quadratic */
static uint64_t quadratic(uint64_t n, uint64_t x)
{
	for (uint64_t i = 0; i < n; i++)
		for (uint64_t j = 0; j < n; j++)
			x = step(x); /* HOT:quadratic */
	return x;
}
/* END:quadratic */

int main(int argc, char **argv)
{
	uint64_t n, x = 88172645463325252ull, steps;
	char *end;

	if (argc < 3) {
		fprintf(stderr, "usage: scale linear|quadratic|fail N [LIMIT]\n");
		return 2;
	}
	n = strtoull(argv[2], &end, 10);
	if (*end != '\0') {
		fprintf(stderr, "scale: '%s' is not an integer\n", argv[2]);
		return 2;
	}
	if (strcmp(argv[1], "quadratic") == 0) {
		x = quadratic(n, x);
		steps = n * n;
	} else {
		x = linear(n, x);
		steps = n;
	}
	printf("scale: steps=%llu x=%llx\n", (unsigned long long)steps, (unsigned long long)x);
	if (strcmp(argv[1], "fail") == 0 && argc > 3 && n > strtoull(argv[3], NULL, 10))
		return 3;
	return 0;
}
