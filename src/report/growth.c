/* SPDX-License-Identifier: MIT */
/*
 * The growth column of the Phase-1 dimensions table, from a `pyrsprof sweep` result: the fit of
 * wall time along the swept dimension in sweep.json (format pyrsprof-sweep, version 1) goes to the
 * recording's --dim of the same name. sweep.json is input: its size is bounded, every field is
 * checked for its type, text is cut and cleaned, and a dimension the recording does not have is
 * an error that says so.
 */
#include "pyrsprof/report.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "util/banned.h"

#define SWEEP_MAX_BYTES (16u << 20)

/* Copies s into buf (size bytes), control characters replaced by spaces. */
static void copy_text(char *buf, size_t size, const char *s)
{
	size_t i;

	for (i = 0; s[i] && i + 1 < size; i++)
		buf[i] = (unsigned char)s[i] < 0x20 || s[i] == 0x7f ? ' ' : s[i];
	buf[i] = '\0';
}

static json_t *load(const char *path, struct prs_err *err)
{
	json_error_t jerr;
	struct stat st;
	json_t *root;
	FILE *f = fopen(path, "re");

	if (!f)
		return prs_err_set(err, -errno, "--sweep %s: %s", path, strerror(errno)), NULL;
	if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > SWEEP_MAX_BYTES) {
		fclose(f);
		prs_err_set(err, -EINVAL, "--sweep %s: not a sweep.json (a regular file of at most 16 MiB)",
			    path);
		return NULL;
	}
	root = json_loadf(f, JSON_REJECT_DUPLICATES, &jerr);
	fclose(f);
	if (!root)
		prs_err_set(err, -EINVAL, "--sweep %s: not JSON (line %d: %s)", path, jerr.line, jerr.text);
	return root;
}

/* The number at key of o, or NAN when absent or null. */
static double num_or_nan(const json_t *o, const char *key)
{
	const json_t *v = json_object_get(o, key);

	return json_is_number(v) ? json_number_value(v) : NAN;
}

int prs_phase_inputs_sweep(struct prs_phase_inputs *in, const char *path, struct prs_err *err)
{
	json_t *root = load(path, err), *fit;
	const char *dim, *text;
	struct prs_dim *d = NULL;
	int rc = 0;

	if (!root)
		return err->code ? err->code : -EINVAL;
	fit = json_object_get(json_object_get(root, "fits"), "wall");
	dim = json_string_value(json_object_get(root, "dimension"));
	text = json_string_value(json_object_get(fit, "text"));
	if (!json_is_string(json_object_get(root, "format")) ||
	    strcmp(json_string_value(json_object_get(root, "format")), "pyrsprof-sweep") != 0 ||
	    json_integer_value(json_object_get(root, "version")) != 1 || !dim || !text ||
	    !json_is_boolean(json_object_get(fit, "fitted"))) {
		rc = prs_err_set(err, -EINVAL, "--sweep %s: not a sweep.json of pyrsprof sweep (format "
				 "pyrsprof-sweep, version 1, with a dimension and its wall fit)", path);
		goto out;
	}
	for (size_t i = 0; i < in->ndims; i++)
		if (strcmp(in->dims[i].name, dim) == 0)
			d = &in->dims[i];
	if (!d) {
		rc = prs_err_set(err, -ENOENT, "--sweep %s: the sweep is along '%.64s', which is not one "
				 "of the recording's dimensions (give it with --dim %.64s=TYPICAL[..MAX])",
				 path, dim, dim);
		goto out;
	}
	d->have_growth = true;
	d->fitted = json_is_true(json_object_get(fit, "fitted"));
	d->exponent = num_or_nan(fit, "exponent");
	d->r2 = num_or_nan(fit, "r2");
	copy_text(d->growth, sizeof(d->growth), text);
	copy_text(d->growth_from, sizeof(d->growth_from), path);
out:
	json_decref(root);
	return rc;
}
