/* SPDX-License-Identifier: MIT */
/* Shared pieces of the fuzz targets (see fuzz.h). */
#include "fuzz.h"

#include <stdlib.h>
#include <string.h>

#include "pyrsprof/classify.h"
#include "pyrsprof/diff.h"
#include "pyrsprof/export.h"
#include "pyrsprof/flamegraph.h"
#include "pyrsprof/profile.h"
#include "pyrsprof/report.h"
#include "pyrsprof/view.h"

#include "util/banned.h"

char *fuzz_text(const uint8_t *data, size_t len, char *buf, size_t size)
{
	if (len > size - 1)
		len = size - 1;
	memcpy(buf, data, len);
	buf[len] = '\0';
	return buf;
}

FILE *fuzz_sink(void)
{
	static FILE *sink;

	if (!sink)
		sink = fopen("/dev/null", "we");
	if (!sink)
		abort();
	return sink;
}

static void render(const struct prs_profile *p, const struct prs_view_opts *vo)
{
	struct prs_err err;
	struct prs_fg_opts o;
	struct prs_fg *fg = prs_fg_new();
	char sub[512];

	if (!fg)
		return;
	prs_fg_opts_init(&o);
	o.subtitle = prs_fg_describe_profile(p, vo->view, sub, sizeof(sub));
	if (prs_fg_from_profile(fg, p, vo, &err) == 0)
		prs_fg_write_svg(fg, fuzz_sink(), &o, &err);
	prs_fg_free(fg);
}

/* What `report` judges of a profile: the facts (its accounting records reconciled with its
 * samples), the verdict, and the hot spots of both views. */
static void classify(const struct prs_profile *p)
{
	struct prs_facts f;
	struct prs_verdict v;
	struct prs_hotspot *rows;
	struct prs_err err;
	double total;
	size_t n;

	if (prs_facts_build(p, &f, &err) == 0) {
		prs_classify(&f, &v);
		prs_facts_release(&f);
	}
	for (unsigned view = PRS_VIEW_CPU; view <= PRS_VIEW_WALL; view++) {
		struct prs_hotspot_top fn, line;

		for (unsigned flags = 0; flags <= (PRS_HOT_LINES | PRS_HOT_BY_NAME); flags++)
			if (prs_hotspots(p, view, flags, &rows, &n, &total, &err) == 0)
				free(rows);
		/* what phase 4 reads: the first rows of both tables */
		if (prs_hotspots_top(p, &(struct prs_view_opts){ .view = (enum prs_view)view }, PRS_PHASE4_ROWS,
				     &fn, &line, &err) == 0) {
			prs_hotspot_top_release(&fn);
			prs_hotspot_top_release(&line);
		}
	}
}

void fuzz_consume_profile(const struct prs_profile *p, size_t input_size)
{
	struct prs_diff_opts dopts = { .view = PRS_VIEW_WALL, .run_noise = -1 };
	struct prs_diff *d = NULL;
	struct prs_err err;
	uint32_t ids[64];

	for (unsigned v = PRS_VIEW_CPU; v <= PRS_VIEW_WALL; v++) {
		struct prs_view_opts plain = { .view = v, .per_process = true };
		struct prs_view_opts all = { .view = v, .per_thread = true, .per_process = true,
					     .merge_processes = v == PRS_VIEW_WALL, .lines = true };

		prs_export_folded(p, &plain, fuzz_sink(), &err);
		prs_export_folded(p, &all, fuzz_sink(), &err);
		if (input_size > FUZZ_CONSUME_MAX)
			continue;
		render(p, v == PRS_VIEW_WALL ? &all : &plain);
		prs_export_speedscope(p, v, fuzz_sink(), &err);
		prs_export_pprof(p, v, fuzz_sink(), &err);
	}
	if (input_size > FUZZ_CONSUME_MAX)
		return;
	classify(p);
	if (prs_diff_compute(p, p, &dopts, &d, &err) == 0)
		prs_diff_free(d);
	for (size_t i = 0; i < p->nsamples && i < 64; i++) {
		char label[256];

		prs_profile_offcpu_label(&p->samples[i], label, sizeof(label), &(enum prs_kind){ 0 });
		prs_profile_stack_frames(p, p->samples[i].stack, ids, 64);
	}
}
