/* SPDX-License-Identifier: MIT */
/* pyrsprof: the command line. Placeholder until the subcommands land. */
#include <stdio.h>

int main(void)
{
	fprintf(stderr, "pyrsprof: not built yet\n");
	return 2;
}
