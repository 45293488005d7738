/* SPDX-License-Identifier: MIT */
/*
 * The files of `pyrsprof diff`: diff.md (for people: the measured speedup, what changed beyond
 * noise, the noise listed apart, the verdicts, what next, and how it was measured) and diff.json
 * (for programs: every function, schema docs/diff.schema.json). Both come from one struct
 * prs_diff (diff.c); each is written to a temporary name and renamed.
 */
#include "pyrsprof/diff.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "pyrsprof/export.h"
#include "pyrsprof/util.h"
#include "report/diff-internal.h"
#include "report/report-internal.h"

#include "util/banned.h"

#define MD_MAX_ROWS 50

/* ---- diff.md ---- */

static void md_side_row(FILE *f, const char *what, const struct prs_diff *d, int field)
{
	fprintf(f, "| %s |", what);
	for (int k = 0; k < 2; k++) {
		const struct prs_diff_side *s = &d->side[k];
		char a[32], b[32];

		fputc(' ', f);
		if (field == 0) {
			fputc('`', f);
			prs_md_text(f, s->command[0] ? s->command : "?");
			fputc('`', f);
		} else if (s->period_s > 0) {
			fprintf(f, "%s", prs_change_fmt_s(a, sizeof(a), s->wall_s, false));
			if (s->rate_hz > 0)
				fprintf(f, " at %g Hz", s->rate_hz);
			fprintf(f, ", %.0f samples in the view, a sample = %s", s->weight,
				prs_change_fmt_s(b, sizeof(b), s->period_s, false));
		} else {
			fprintf(f, "%.0f samples in the view (no times: folded stacks)", s->weight);
		}
		fputs(" |", f);
	}
	fputc('\n', f);
}

static void md_total(FILE *f, const char *what, const struct prs_diff_total *t)
{
	char b[32], a[32], dl[32], sg[32];
	bool up = t->c.delta <= 0;

	if (!t->known) {
		fprintf(f, "| %s | ? | ? | not measured on both sides | |\n", what);
		return;
	}
	fprintf(f, "| %s | %s | %s | %s ± %s | ", what, prs_change_fmt_s(b, sizeof(b), t->c.before, false),
		prs_change_fmt_s(a, sizeof(a), t->c.after, false),
		prs_change_fmt_s(dl, sizeof(dl), t->c.delta, true),
		prs_change_fmt_s(sg, sizeof(sg), t->c.sigma, false));
	if (t->speedup <= 0)
		fputs("? |\n", f);
	else if (t->c.significant)
		fprintf(f, "**%.2fx %s** |\n", up ? t->speedup : 1 / t->speedup, up ? "faster" : "slower");
	else
		fprintf(f, "%.2fx %s, within noise |\n", up ? t->speedup : 1 / t->speedup,
			up ? "faster" : "slower");
}

static void md_speedup(FILE *f, const struct prs_diff *d)
{
	char cpu[64];

	fputs("## Measured speedup\n\n| time | before | after | change ± σ | speedup |\n"
	      "| --- | ---: | ---: | ---: | --- |\n", f);
	md_total(f, "wall", &d->wall);
	snprintf(cpu, sizeof(cpu), "CPU (%s)",
		 d->side[0].cpu_kernel && d->side[1].cpu_kernel ? "kernel accounting" : "from the samples");
	md_total(f, cpu, &d->cpu);
	fprintf(f, "\nOne run each: σ is the run-to-run noise of a single run, assumed %.0f %% "
		"(`--run-noise`); a change is beyond noise when it exceeds %g σ. Measure the real "
		"spread with repeated runs (`pyrsprof sweep --repeat`).\n\n", 100 * d->run_noise,
		PRS_CHANGE_SIGMAS);
}

static void md_change_cell(FILE *f, const struct prs_diff *d, const struct prs_change *c)
{
	char a[32], b[32];

	if (d->timed)
		fprintf(f, " %s ± %s |", prs_change_fmt_s(a, sizeof(a), c->delta, true),
			prs_change_fmt_s(b, sizeof(b), c->sigma, false));
	else
		fprintf(f, " %+.1f ± %.1f |", 100 * c->delta, 100 * c->sigma);
}

static void md_value(FILE *f, const struct prs_diff *d, double v)
{
	char a[32];

	if (d->timed)
		fprintf(f, " %s |", prs_change_fmt_s(a, sizeof(a), v, false));
	else
		fprintf(f, " %.1f |", 100 * v);
}

static void md_row(FILE *f, const struct prs_diff *d, const struct prs_diff_row *r)
{
	const struct prs_change *self = d->timed ? &r->self_s : &r->self_sh;
	const struct prs_change *total = d->timed ? &r->total_s : &r->total_sh;

	fputs("| ", f);
	if (r->significant)
		fputs("**", f);
	prs_md_text(f, r->name);
	if (r->significant)
		fputs("**", f);
	fputs(" | ", f);
	prs_md_text(f, prs_diff_basename(r->file));
	fprintf(f, " | %s | %s |", prs_kind_name(r->kind),
		r->significant ? prs_diff_status_name(r->status) : "noise");
	md_value(f, d, total->before);
	md_value(f, d, total->after);
	md_change_cell(f, d, total);
	if (d->timed && total->before > 0 && total->after > 0)
		fprintf(f, " %.2fx |", total->before / total->after);
	else if (d->timed)
		fputs(" |", f);
	md_value(f, d, self->before);
	md_value(f, d, self->after);
	md_change_cell(f, d, self);
	if (d->timed)
		fprintf(f, " %.1f %% → %.1f %% |", 100 * r->total_sh.before, 100 * r->total_sh.after);
	fputc('\n', f);
}

static void md_table(FILE *f, const struct prs_diff *d, bool significant)
{
	size_t shown = 0, all = significant ? d->changed : d->nrows - d->changed;

	if (d->timed)
		fputs("| function | file | kind | change | total before | total after | Δ total ± σ | "
		      "speedup | self before | self after | Δ self ± σ | share of the view (total) |\n"
		      "| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n", f);
	else
		fputs("| function | file | kind | change | total before % | total after % | Δ total pt ± σ "
		      "| self before % | self after % | Δ self pt ± σ |\n"
		      "| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n", f);
	for (size_t i = 0; i < d->nrows && shown < MD_MAX_ROWS; i++)
		if (d->rows[i].significant == significant) {
			md_row(f, d, &d->rows[i]);
			shown++;
		}
	if (shown < all)
		fprintf(f, "\n%zu more in diff.json.\n", all - shown);
	fputc('\n', f);
}

static void md_changes(FILE *f, const struct prs_diff *d)
{
	static const enum prs_diff_status order[] = { PRS_DIFF_FASTER, PRS_DIFF_SLOWER, PRS_DIFF_GREW,
						      PRS_DIFF_SHRANK, PRS_DIFF_ADDED, PRS_DIFF_REMOVED };
	const char *sep = " (";

	fprintf(f, "## Changed beyond noise: %zu function%s", d->changed, d->changed == 1 ? "" : "s");
	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++)
		if (d->count[order[i]]) {
			fprintf(f, "%s%zu %s", sep, d->count[order[i]], prs_diff_status_name(order[i]));
			sep = ", ";
		}
	fputs(sep[0] == ',' ? ")\n\n" : "\n\n", f);
	if (d->timed)
		fputs("Times in seconds of the view (a function's self time: it is the innermost "
		      "frame; total: it is on the stack), before and after; speedup: total before / "
		      "total after.\n\n", f);
	else
		fputs("Shares in percent of each profile's samples in the view (the profiles have no "
		      "times: folded stacks).\n\n", f);
	if (d->changed)
		md_table(f, d, true);
	else
		fputs("No function changed beyond noise.\n\n", f);
	fprintf(f, "## Within noise: %zu function%s (not changes)\n\n", d->nrows - d->changed,
		d->nrows - d->changed == 1 ? "" : "s");
	if (d->nrows > d->changed)
		md_table(f, d, false);
}

static void md_verdicts(FILE *f, const struct prs_diff *d)
{
	static const char *const which[2] = { "before", "after" };

	fputs("## Verdict\n\n", f);
	for (int k = 0; k < 2; k++) {
		const struct prs_diff_side *s = &d->side[k];

		fprintf(f, "- %s: ", which[k]);
		if (!s->have_verdict) {
			fputs("none (not a recording: no states, no accounting)\n", f);
			continue;
		}
		prs_md_text(f, s->verdict);
		fprintf(f, " [%s]; lever: ", prs_confidence_name(s->confidence));
		prs_md_text(f, s->lever);
		fputc('\n', f);
	}
	if (d->side[0].have_verdict && d->side[1].have_verdict)
		fputs(d->verdict_changed ? "- **the verdict changed**: the lever may have changed too\n"
					 : "- unchanged\n", f);
	fputc('\n', f);
}

static void md_next(FILE *f, const struct prs_diff *d)
{
	const struct prs_hotspot *h = &d->next.rows[0];
	double p = d->have_next ? h->self / d->next.total : 0, ceil = prs_amdahl(p);
	char s[32];

	fputs("## Next\n\n", f);
	if (!d->have_next) {
		fputs("The after profile has no on-CPU samples: no hot spot to name.\n\n", f);
		return;
	}
	fputs("The biggest hot spot now (CPU view, self time): **", f);
	prs_md_text(f, h->name);
	fputs("**", f);
	if (h->file[0]) {
		fputs(" (", f);
		prs_md_text(f, prs_diff_basename(h->file));
		fputc(')', f);
	} else if (h->kind == PRS_KIND_KERNEL) {
		fputs(" (kernel)", f);
	}
	fprintf(f, ", %.1f %% of the CPU samples", 100 * p);
	if (d->side[1].period_s > 0)
		fprintf(f, " (%s)", prs_change_fmt_s(s, sizeof(s), h->self * d->side[1].period_s, false));
	if (isfinite(ceil))
		fprintf(f, ": Amdahl ceiling %.2fx (the whole program's speedup if it cost nothing).\n\n", ceil);
	else
		fputs(": Amdahl ceiling unbounded.\n\n", f);
	if (d->next.stop_hint[0]) {
		fputs("**Stop hint:** ", f);
		prs_md_text(f, d->next.stop_hint);
		fputs(".\n\n", f);
	}
}

#define MD_MAX_FN_PAIRS 20

/* The functions matched on their own (moved to another module). */
static void fn_pairs_md(FILE *f, const struct prs_diff *d, struct prs_buf *sc)
{
	size_t n;
	const struct prs_diff_fn_pair *fp = prs_diff_match_fn_pairs(d->match, &n);

	for (size_t i = 0; i < n && i < MD_MAX_FN_PAIRS; i++) {
		const char *t = prs_utf8_clean(fp[i].name, strlen(fp[i].name), sc, NULL);

		fputs("- matched on its own: `", f);
		prs_md_text(f, t ? t : "?");
		fputs("` from `", f);
		t = prs_utf8_clean(fp[i].before, strlen(fp[i].before), sc, NULL);
		prs_md_text(f, t ? t : "?");
		fputs("` → `", f);
		t = prs_utf8_clean(fp[i].after, strlen(fp[i].after), sc, NULL);
		prs_md_text(f, t ? t : "?");
		fputs("` (moved to another file)\n", f);
	}
	if (n > MD_MAX_FN_PAIRS)
		fprintf(f, "- %zu more functions matched on their own: see diff.json\n", n - MD_MAX_FN_PAIRS);
}

static void md_footer(FILE *f, const struct prs_diff *d)
{
	const struct prs_diff_pair *pairs;
	size_t np = 0;
	struct prs_buf sc;

	prs_buf_init(&sc);
	fputs("---\n\n### How this is measured\n\n", f);
	if (d->timed)
		fputs("- **Times**: a sample weighs its recording's period (the recording's duration "
		      "over the ticks it took), so recordings at different rates compare; nothing is "
		      "scaled. A view's function times add up to the time sampled in the view (CPU: "
		      "on-CPU thread time; wall: thread time); the speedup above is the profiles' own "
		      "duration and CPU accounting.\n", f);
	fprintf(f, "- **Noise**: a time is k of the view's n samples times the period: sampling adds "
		"a binomial standard error period·√(k(1−k/n)); %s A change is beyond noise when "
		"|Δ| > %g σ and |Δ| ≥ %g %% of the larger view total. Samples of one thread are "
		"correlated, so σ is a lower bound: re-measure what is near the threshold.\n",
		d->timed ? "the run itself adds its run-to-run noise (assumed, per run; shares are immune "
			   "to a run slower as a whole)." : "",
		PRS_CHANGE_SIGMAS, 100 * PRS_CHANGE_MIN_SHARE);
	if (prs_diff_match_by_name(d->match))
		fputs("- **Matching**: one profile has no file names (folded stacks): functions match "
		      "by name and kind.\n", f);
	else
		fputs("- **Matching**: a function is (name, module, kind); a Python frame's module is "
		      "its file, a native frame's the library it was symbolized in (else its source "
		      "file). Modules at the same path match. A module found on one side only matches "
		      "one found on the other side only when at least half of the smaller one's "
		      "functions are in both (by name): a moved file (same file name) first, then a "
		      "renamed one. Functions of the same name in modules both sides have are never "
		      "merged. A function still without a match pairs with the only unmatched "
		      "function of its name and kind on the other side (moved to another file); the "
		      "rest are added or removed.\n", f);
	pairs = prs_diff_match_pairs(d->match, &np);
	for (size_t i = 0; i < np; i++) {
		const char *b = prs_utf8_clean(pairs[i].before, strlen(pairs[i].before), &sc, NULL);

		fputs("- matched: `", f);
		prs_md_text(f, b ? b : "?");
		fputs("` → `", f);
		b = prs_utf8_clean(pairs[i].after, strlen(pairs[i].after), &sc, NULL);
		prs_md_text(f, b ? b : "?");
		fprintf(f, "` (%s: %u of %u functions in common)\n", pairs[i].moved ? "moved" : "renamed",
			pairs[i].common, pairs[i].functions);
	}
	fn_pairs_md(f, d, &sc);
	prs_buf_release(&sc);
	fprintf(f, "\nGenerated by pyrsprof; machine-readable: diff.json (schema pyrsprof-diff, "
		"version %d).\n", PRS_DIFF_VERSION);
}

static int write_md(FILE *f, void *arg)
{
	const struct prs_diff *d = arg;

	fprintf(f, "# pyrsprof diff: re-measure (%s view)\n\n| | before | after |\n| --- | --- | --- |\n",
		d->view == PRS_VIEW_WALL ? "wall" : "CPU");
	md_side_row(f, "command", d, 0);
	md_side_row(f, "recording", d, 1);
	fputc('\n', f);
	if (d->timed)
		md_speedup(f, d);
	md_changes(f, d);
	md_verdicts(f, d);
	md_next(f, d);
	md_footer(f, d);
	return ferror(f) ? -EIO : 0;
}

/* ---- diff.json ---- */

static int write_json(FILE *f, void *arg)
{
	int rc = prs_diff_json_write(arg, f);

	return rc ? rc : fputc('\n', f) == EOF ? -EIO : 0;
}

int prs_diff_write(const struct prs_diff *d, const char *dir, struct prs_err *err)
{
	int rc = prs_write_atomic(dir, "diff.md", write_md, (void *)d, err);

	return rc ? rc : prs_write_atomic(dir, "diff.json", write_json, (void *)d, err);
}
