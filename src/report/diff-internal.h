/* SPDX-License-Identifier: MIT */
/* Private to src/report: the parts of `pyrsprof diff`'s output shared by its writers. */
#ifndef PYRSPROF_DIFF_INTERNAL_H
#define PYRSPROF_DIFF_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "pyrsprof/diff.h"

/* The part of path after its last '/' (borrowed from path). */
const char *prs_diff_basename(const char *path);

/* Writes diff.json's document to f (no final newline). 0, -ENOMEM or -EIO. */
int prs_diff_json_write(const struct prs_diff *d, FILE *f);

#endif
