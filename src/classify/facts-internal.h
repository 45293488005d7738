/* SPDX-License-Identifier: MIT */
/* Private to src/classify: the steps of prs_facts_build. */
#ifndef PYRSPROF_FACTS_INTERNAL_H
#define PYRSPROF_FACTS_INTERNAL_H

#include "pyrsprof/classify.h"

/* Counts the samples of p into f->threads (each sample worth tick_s seconds), the GIL flags,
 * and the copy/fill-kernel share of on-CPU samples. 0 or -ENOMEM. */
int prs_facts_from_samples(const struct prs_profile *p, struct prs_facts *f, double tick_s);

/* True when a leaf function name is a copy or fill kernel (memcpy, memset, clear_page, ...). */
bool prs_is_copy_kernel(const char *name);

#endif
