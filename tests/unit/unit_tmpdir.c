/* SPDX-License-Identifier: MIT */
/* A scratch folder per unit test (unit_tmpdir.h). */
#include "unit_tmpdir.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

#include "util/banned.h"

char unit_tmpdir[64];

void unit_tmpdir_make(void)
{
	snprintf(unit_tmpdir, sizeof(unit_tmpdir), "/tmp/prs-unit-XXXXXX");
	cr_assert_not_null(mkdtemp(unit_tmpdir));
}

void unit_tmpdir_remove(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", unit_tmpdir);
	if (system(cmd) != 0)
		cr_log_warn("could not remove %s", unit_tmpdir);
}
