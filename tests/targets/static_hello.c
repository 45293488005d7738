// SPDX-License-Identifier: MIT
/*
 * static_hello: a statically linked program (see mk/agent.mk), which LD_PRELOAD cannot load a
 * library into: `pyrsprof run --mode preload` must refuse it in one line that suggests ptrace.
 * Usage: static_hello   (prints "static_hello" and exits 0)
 */
#include <stdio.h>

int main(void)
{
	puts("static_hello");
	return 0;
}
