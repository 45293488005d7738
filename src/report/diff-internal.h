/* SPDX-License-Identifier: MIT */
/* Private to src/report: the parts of `pyrsprof diff`'s output shared by its writers. */
#ifndef PYRSPROF_DIFF_INTERNAL_H
#define PYRSPROF_DIFF_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "pyrsprof/diff.h"
#include "pyrsprof/util.h"

/* The part of path after its last '/' (borrowed from path). */
const char *prs_diff_basename(const char *path);

/*
 * Appends row r of diff.json as jansson writes it there (diff_json_row.c). 0, -ENOMEM, or 1 when
 * jansson must write it (a string that is not UTF-8, a number that is not finite): nothing added.
 */
int prs_diff_json_row(struct prs_buf *b, const struct prs_diff *d, const struct prs_diff_row *r);

/* snprintf(out, size, "%.8g", v), the same bytes and return, without printf where it can
 * (diff_json_row.c). */
int prs_diff_g8_text(char *out, size_t size, double v);

/* Writes diff.json's document to f (no final newline). 0, -ENOMEM or -EIO. */
int prs_diff_json_write(const struct prs_diff *d, FILE *f);

#endif
