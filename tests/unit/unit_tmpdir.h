/* SPDX-License-Identifier: MIT */
/*
 * A scratch folder per unit test: unit_tmpdir_make as a Criterion .init makes /tmp/prs-unit-XXXXXX
 * into unit_tmpdir, unit_tmpdir_remove as its .fini removes it with everything in it.
 */
#ifndef PYRSPROF_TESTS_UNIT_TMPDIR_H
#define PYRSPROF_TESTS_UNIT_TMPDIR_H

extern char unit_tmpdir[64];

void unit_tmpdir_make(void);
void unit_tmpdir_remove(void);

#endif
