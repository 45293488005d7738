/* SPDX-License-Identifier: MIT */
/* Rendering a profile's flame graphs into files; loading any profile input. */
#include "cli/render.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "util/banned.h"

/* Writes fg's SVG to path (atomically), with o's title and the subtitle given. 0 or -1 (said). */
static int write_svg(struct prs_fg *fg, const char *path, const struct cli_graph_opts *o,
		     const char *subtitle)
{
	struct prs_err err = { 0 };
	struct prs_fg_opts fo = o->fg;
	struct cli_atomic a;
	FILE *f;
	int rc;

	if (!fo.title)
		fo.title = o->view.view == PRS_VIEW_CPU ? "On-CPU flame graph" : "Wall-clock flame graph";
	if (!fo.subtitle)
		fo.subtitle = subtitle;
	f = cli_atomic_open(&a, path);
	if (!f)
		return -1;
	rc = prs_fg_write_svg(fg, f, &fo, &err);
	if (rc) {
		cli_output_err(&err, path);
		cli_atomic_close(&a, false);
		return -1;
	}
	return cli_atomic_close(&a, true) == 0 ? 0 : -1;
}

int cli_render_svg(const struct prs_profile *p, const char *path, const struct cli_graph_opts *o)
{
	struct prs_err err = { 0 };
	struct prs_fg *fg;
	char subtitle[1024];
	int rc;

	fg = prs_fg_new();
	if (!fg) {
		cli_msg("out of memory");
		return -1;
	}
	rc = prs_fg_from_profile(fg, p, &o->view, &err);
	if (rc) {
		cli_err(&err, "flame graph");
		prs_fg_free(fg);
		return -1;
	}
	rc = write_svg(fg, path, o,
		       prs_fg_describe_profile(p, o->view.view, subtitle, sizeof(subtitle)));
	prs_fg_free(fg);
	return rc;
}

bool cli_folded_direct(const char *in, const struct cli_graph_opts *o)
{
	struct stat st;

	/* the thread roots and the Python view are the view's work: those go through the model */
	return !o->view.per_thread && !o->view.python_stacks && stat(in, &st) == 0 &&
	       S_ISREG(st.st_mode) && !prs_pyrs_sniff(in);
}

int cli_render_folded(const char *in, const char *path, const struct cli_graph_opts *o)
{
	struct prs_err err = { 0 };
	struct prs_fg *fg;
	char subtitle[64];
	uint64_t samples;
	FILE *f;
	int rc;

	f = fopen(in, "re");
	if (!f) {
		cli_msg("cannot read '%s': %s", in, strerror(errno));
		return -1;
	}
	fg = prs_fg_new();
	if (!fg) {
		fclose(f);
		cli_msg("out of memory");
		return -1;
	}
	rc = prs_fg_from_folded(fg, f, in, &samples, &err);
	fclose(f);
	if (rc) {
		cli_msg("%s (expected a .pyrs profile or folded stacks like 'main;work 12')", err.msg);
		prs_fg_free(fg);
		return -1;
	}
	/* what prs_fg_describe_profile says of a folded profile: no command, time or rate */
	snprintf(subtitle, sizeof(subtitle), "%" PRIu64 " samples", samples);
	rc = write_svg(fg, path, o, subtitle);
	prs_fg_free(fg);
	return rc;
}

int cli_render_recording(const struct prs_profile *p, const char *dir, struct cli_graph_choice g)
{
	static const struct {
		const char *file;
		enum prs_view view;
	} graphs[] = { { "cpu.svg", PRS_VIEW_CPU }, { "wall.svg", PRS_VIEW_WALL } };
	int rc = 0;

	for (size_t i = 0; i < 2; i++) {
		struct cli_graph_opts o;
		char path[4096];

		memset(&o, 0, sizeof(o));
		prs_fg_opts_init(&o.fg);
		o.view.view = graphs[i].view;
		o.view.per_process = true;
		o.view.merge_processes = g.merge_processes;
		o.view.python_stacks = g.python_stacks;
		snprintf(path, sizeof(path), "%s/%s", dir, graphs[i].file);
		if (cli_render_svg(p, path, &o) != 0)
			rc = -1;
	}
	return rc;
}

bool cli_parse_stacks(const char *s, bool *python)
{
	if (strcmp(s, "merged") == 0)
		*python = false;
	else if (strcmp(s, "python") == 0)
		*python = true;
	else {
		cli_msg("--stacks: '%s' is not a stack view (merged or python)", s);
		return false;
	}
	return true;
}

const char *cli_graph_choice_said(const struct prs_profile *p, struct cli_graph_choice g)
{
	if (g.python_stacks)
		return "graphs: Python view, the interpreter's frames folded into the Python lines";
	for (size_t i = 0; i < p->nframes; i++)
		if (p->frames[i].kind == PRS_KIND_PYTHON)
			return "graphs: merged native + Python stacks; --stacks python for the Python view";
	return "";
}

static struct prs_profile *load(const char *path, unsigned flags)
{
	struct prs_profile *p = NULL;
	struct prs_err err = { 0 };
	char warning[512] = "", inside[4096];
	struct stat st;
	FILE *f;

	if (stat(path, &st) != 0) {
		cli_msg("cannot read '%s': %s", path, strerror(errno));
		return NULL;
	}
	if (S_ISDIR(st.st_mode)) {
		/* a recording's folder: its profile */
		snprintf(inside, sizeof(inside), "%s/profile.pyrs", path);
		if (stat(inside, &st) != 0 || S_ISDIR(st.st_mode)) {
			cli_msg("'%s' is a folder without a profile.pyrs (give a recording's folder or a profile)",
				path);
			return NULL;
		}
		path = inside;
	}
	if (prs_pyrs_sniff(path)) {
		if (prs_pyrs_read_flags(path, flags, &p, warning, sizeof(warning), &err) != 0) {
			cli_err(&err, path);
			return NULL;
		}
		if (warning[0])
			cli_msg("warning: %s", warning);
		return p;
	}
	f = fopen(path, "re");
	if (!f) {
		cli_msg("cannot read '%s': %s", path, strerror(errno));
		return NULL;
	}
	if (prs_folded_read(f, path, &p, &err) != 0) {
		fclose(f);
		if (err.msg[0])
			cli_msg("%s (expected a .pyrs profile or folded stacks like 'main;work 12')", err.msg);
		else
			cli_msg("%s: not a .pyrs profile or folded stacks", path);
		return NULL;
	}
	fclose(f);
	return p;
}

struct prs_profile *cli_load_profile(const char *path)
{
	return load(path, 0);
}

struct prs_profile *cli_load_sums(const char *path)
{
	return load(path, PRS_PYRS_SUMS);
}

struct prs_profile *cli_load_stack_sums(const char *path)
{
	return load(path, PRS_PYRS_SUMS_NO_THREADS);
}
