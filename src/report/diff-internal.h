/* SPDX-License-Identifier: MIT */
/* Private to src/report: the parts of `pyrsprof diff`'s output shared by its writers. */
#ifndef PYRSPROF_DIFF_INTERNAL_H
#define PYRSPROF_DIFF_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "pyrsprof/diff.h"

/* The part of path after its last '/' (borrowed from path). */
const char *prs_diff_basename(const char *path);

/* diff.json's document (a new reference), or NULL when out of memory. */
json_t *prs_diff_json(const struct prs_diff *d);

#endif
