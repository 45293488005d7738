/* SPDX-License-Identifier: MIT */
/*
 * The runs of `run --scaling VAR=V1,V2,...` (src/cli/scaling.h), read back from the profile's
 * meta, and what they say as evidence of a CPU-bound verdict (the note's §5 point 5: the
 * operational test of "more cores won't help"). For fixed work, going from n to k·n threads:
 * speedup S = wall(n) / wall(k·n), cores used U = cpu / wall for each run. S below
 * 1 + 0.3·(k − 1) (the note's 1.3× from n to 2n) while U grew is a flattening: a shared resource
 * limits the program (memory bandwidth, the L3, the clock: not told apart without a PMU). U that did
 * not grow says the extra threads never ran in parallel (the variable is not honoured, or they
 * wait: the GIL, a lock, CPUs taken by others). Runs that hardly used a CPU (U < 0.1: sleeping,
 * IO) say nothing of cores. Never a memory verdict: evidence only. Shown whatever the verdict
 * (prs_verdict.scaling): it confirms a GIL, lock or saturation verdict as it qualifies a CPU one.
 */
#include "pyrsprof/classify.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/banned.h"

/* Parses "VAR=V wall_s=W cpu_s=C rc=R". */
static bool parse_run(const char *s, struct prs_scaling_run *r, char *var, size_t var_size)
{
	const char *eq = strchr(s, '='), *sp = eq ? strchr(eq, ' ') : NULL;
	size_t vlen;

	if (!eq || !sp || (size_t)(eq - s) >= var_size || (vlen = (size_t)(sp - eq - 1)) >= sizeof(r->value))
		return false;
	memcpy(var, s, (size_t)(eq - s));
	var[eq - s] = '\0';
	memcpy(r->value, eq + 1, vlen);
	r->value[vlen] = '\0';
	return sscanf(sp, " wall_s=%lf cpu_s=%lf rc=%d", &r->wall_s, &r->cpu_s, &r->rc) == 3 &&
	       r->wall_s > 0 && r->cpu_s >= 0;
}

void prs_facts_scaling(const struct prs_profile *p, struct prs_facts *f)
{
	for (uint32_t i = 0; i < p->nmeta && f->nscaling < PRS_SCALING_MAX; i++) {
		char var[sizeof(f->scaling_var)];

		if (strcmp(p->strings[p->meta[i].key], "scaling") != 0)
			continue;
		if (!parse_run(p->strings[p->meta[i].value], &f->scaling[f->nscaling], var, sizeof(var)))
			continue; /* input: what does not parse is left out */
		if (f->nscaling && strcmp(var, f->scaling_var) != 0)
			continue;
		snprintf(f->scaling_var, sizeof(f->scaling_var), "%s", var);
		f->nscaling++;
	}
}

int prs_scaling_evidence(const struct prs_facts *f, char *buf, size_t size)
{
	const struct prs_scaling_run *a, *b;
	double na, nb, k, s, ua, ub;
	char *end;

	if (f->nscaling < 2)
		return 0;
	a = &f->scaling[0];
	b = &f->scaling[f->nscaling - 1];
	na = strtod(a->value, &end);
	nb = end != a->value ? strtod(b->value, &end) : 0;
	if (b->rc || a->rc || na <= 0 || nb <= na)
		return 0; /* (values that are not growing numbers: nothing to compare) */
	k = nb / na;
	s = a->wall_s / b->wall_s;
	ua = a->cpu_s / a->wall_s;
	ub = b->cpu_s / b->wall_s;
	snprintf(buf, size, "scaling (--scaling %s=%s..%s, fixed work assumed): %.2fx faster with "
		 "%.2fx the threads, cores used %.2f -> %.2f: %s", f->scaling_var, a->value, b->value, s,
		 k, ua, ub,
		 ub < 0.1 ? "the runs hardly used a CPU: waiting, not computing, sets their time "
			    "(more cores are not the lever)"
		 : ub < 1.25 * ua ? "the extra threads did not run in parallel (the variable is not "
				  "honoured, or they wait: the GIL, a lock, CPUs taken by others)"
		 : s < 1 + 0.3 * (k - 1) ? "flattens while the cores used grew: a shared resource "
					   "limits it (memory bandwidth, the L3 or the clock: not "
					   "told apart without a PMU); more cores won't help"
					 : "it scales: more cores help");
	return 1;
}
