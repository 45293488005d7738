/* SPDX-License-Identifier: MIT */
/* The terminal summary after a recording: the verdict and lever, the time budget, the hot spots. */
#include "pyrsprof/report.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "util/banned.h"

#define LINE 640

void prs_summary(const struct prs_report_ctx *c, const struct prs_phase4_top *top,
		 void (*emit)(void *arg, const char *line), void *arg)
{
	const struct prs_facts *f = c->facts;
	const struct prs_verdict *v = c->verdict;
	const struct prs_budget *b = &f->budget;
	char line[LINE];
	size_t n;

	if (!v->have) {
		emit(arg, "verdict: no samples to judge");
		return;
	}
	n = (size_t)snprintf(line, sizeof(line), "bound: %s [%s]", v->primary.label,
			     prs_confidence_name(v->primary.confidence));
	for (unsigned i = 0; i < v->nalso && n < sizeof(line); i++)
		n += (size_t)snprintf(line + n, sizeof(line) - n, "%s %s [%s]", i ? "," : "; also:",
				      v->also[i].label, prs_confidence_name(v->also[i].confidence));
	if (n < sizeof(line))
		snprintf(line + n, sizeof(line) - n, "; lever: %s", v->lever);
	emit(arg, line);
	n = (size_t)snprintf(line, sizeof(line), "time:");
	for (int r = 0; r < PRS_R__COUNT && n < sizeof(line); r++)
		if (b->f[r] >= 0.01 || r == PRS_R_CPU)
			n += (size_t)snprintf(line + n, sizeof(line) - n, " %s %.0f%%,", prs_reason_label(r),
					      100 * b->f[r]);
	if (n < sizeof(line)) {
		char cpus[16];

		snprintf(cpus, sizeof(cpus), f->ncpus ? "%u" : "?", f->ncpus);
		snprintf(line + n - 1, sizeof(line) - n + 1, " (%u active thread%s, %.2f cores of %s, %.1f s)",
			 b->active, b->active == 1 ? "" : "s", b->U, cpus, f->duration_s);
	}
	emit(arg, line);
	if (top && top->n && top->total > 0) {
		n = (size_t)snprintf(line, sizeof(line), "hot (CPU, self):");
		for (size_t i = 0; i < top->n && i < 3 && n < sizeof(line); i++) {
			double p = top->rows[i].self / top->total, ceil = prs_amdahl(p);

			if (i && p < 0.005)
				break; /* not a hot spot */
			const char *base = strrchr(top->rows[i].file, '/');

			char cs[32];

			if (isfinite(ceil))
				snprintf(cs, sizeof(cs), "%.2fx", ceil);
			else
				snprintf(cs, sizeof(cs), "unbounded");
			n += (size_t)snprintf(line + n, sizeof(line) - n, "%s %.60s%s%s%s %.0f%% (ceiling %s)",
					      i ? ";" : "", top->rows[i].name, top->rows[i].file[0] ? " (" : "",
					      top->rows[i].file[0] ? (base ? base + 1 : top->rows[i].file) : "",
					      top->rows[i].file[0] ? ")" : "", 100 * p, cs);
		}
		emit(arg, line);
	}
	if (top && top->stop_hint[0]) {
		snprintf(line, sizeof(line), "stop hint: %s", top->stop_hint);
		emit(arg, line);
	}
}
