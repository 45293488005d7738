/* SPDX-License-Identifier: MIT */
/* The terminal summary after a recording: the verdict and lever, its qualifiers, the time budget,
 * the hot spots. */
#include "pyrsprof/report.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "util/banned.h"

#define LINE 640

/* One hot spot of the summary's list: "name (file) P% (ceiling C)"; a kernel function, which has
 * no file, is marked "(kernel)" (else it reads as the program's own code). Returns the length
 * snprintf would have written. */
static size_t hot_spot(char *buf, size_t size, const struct prs_hotspot *h, const char *sep,
		       double pct, double ceil)
{
	const char *where = prs_hotspot_where(h);
	char cs[32];

	if (isfinite(ceil))
		snprintf(cs, sizeof(cs), "%.2fx", ceil);
	else
		snprintf(cs, sizeof(cs), "unbounded");
	return (size_t)snprintf(buf, size, "%s %.60s%s%s%s %.0f%% (ceiling %s)", sep, h->name,
				where[0] ? " (" : "", where, where[0] ? ")" : "", pct, cs);
}

/* The verdict's qualifiers (what the host took, a cut recording, thin samples, a CPU quota that
 * throttled without being the verdict), on one line: phase1 lists them under the verdict, and a
 * verdict read alone in the terminal must not lose them. */
static void qualifier_line(const struct prs_verdict *v, void (*emit)(void *arg, const char *line),
			   void *arg)
{
	char line[LINE];
	size_t n = 0;

	if (!v->nqualifiers)
		return;
	for (unsigned i = 0; i < v->nqualifiers && n < sizeof(line); i++)
		n += (size_t)snprintf(line + n, sizeof(line) - n, "%s%s", i ? "; " : "qualified: ",
				      v->qualifiers[i]);
	emit(arg, line);
}

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
	qualifier_line(v, emit, arg);
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
		double empty = 0;
		unsigned shown = 0;

		n = (size_t)snprintf(line, sizeof(line), "hot (CPU, self):");
		for (size_t i = 0; i < top->n && shown < 3 && n < sizeof(line); i++) {
			double p = top->rows[i].self / top->total, ceil = prs_amdahl(p);

			/* samples whose stack was not read (a thread that did not stop in time on a busy
			 * machine) are no function to optimize: said apart, not ranked */
			if (strcmp(top->rows[i].name, "[empty stack]") == 0 && !top->rows[i].file[0]) {
				empty = p;
				continue;
			}
			if (shown && p < 0.005)
				break; /* not a hot spot */
			n += hot_spot(line + n, sizeof(line) - n, &top->rows[i], shown ? ";" : "", 100 * p, ceil);
			shown++;
		}
		if (empty >= 0.005 && n < sizeof(line))
			snprintf(line + n, sizeof(line) - n, " (%.0f%% of the CPU samples have no stack: not "
				 "read in time)", 100 * empty);
		if (shown || empty >= 0.005)
			emit(arg, line);
	}
	if (top && top->stop_hint[0]) {
		snprintf(line, sizeof(line), "stop hint: %s", top->stop_hint);
		emit(arg, line);
	}
}
