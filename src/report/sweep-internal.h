/* SPDX-License-Identifier: MIT */
/* Pieces shared by the writers of `pyrsprof sweep`'s files (sweep_write.c, sweep_svg.c). */
#ifndef PYRSPROF_SWEEP_INTERNAL_H
#define PYRSPROF_SWEEP_INTERNAL_H

#include <stddef.h>

#include "pyrsprof/sweep.h"
#include "pyrsprof/util.h"

/*
 * The command of s as one line of text, arguments that a shell would split or expand put in
 * single quotes ("python3 -c 'print(1)' {n}"), invalid UTF-8 replaced by U+FFFD. Unescaped for any
 * format. Returns a string in b (reset first), or NULL on ENOMEM.
 */
const char *prs_sweep_command(const struct prs_sweep *s, struct prs_buf *b);

/*
 * A compact number for tables and axes into buf: integers below 1e6 as they are ("250000"),
 * others with 3 significant digits, exponents without '+' or leading zeros ("1.2e8", "0.25",
 * "5e-5"). Returns buf.
 */
const char *prs_sweep_num(double v, char *buf, size_t size);

#endif
