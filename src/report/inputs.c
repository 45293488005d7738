/* SPDX-License-Identifier: MIT */
/*
 * The user's Phase-0 target ("wall<2s") and Phase-1 dimensions ("n_rows=20000..60000"), parsed
 * from run/attach options and kept in the profile's meta ("target", one "dim" per dimension) so
 * `pyrsprof report` writes the same reports from the saved profile.
 */
#include "pyrsprof/report.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/banned.h"

static const struct {
	const char *unit;
	double mult;
} time_units[] = { { "", 1 }, { "s", 1 }, { "ms", 1e-3 }, { "us", 1e-6 }, { "m", 60 }, { "min", 60 },
		   { "h", 3600 } },
  size_units[] = { { "", 1 }, { "B", 1 }, { "KB", 1e3 }, { "MB", 1e6 }, { "GB", 1e9 },
		   { "KiB", 1024 }, { "MiB", 1048576 }, { "GiB", 1073741824 } };

#define TARGET_FORMS "targets look like wall<2s, cpu<=500ms or rss<1GB (wall, cpu: s, ms, us, m, h; rss: B, KB, MB, GB, KiB, MiB, GiB)"

int prs_target_parse(const char *s, struct prs_target *t, struct prs_err *err)
{
	const char *p = s, *ops[] = { "<=", ">=", "<", ">" };
	size_t mlen = 0, k;
	char *end;
	double v, mult = 0;
	bool size;

	memset(t, 0, sizeof(*t));
	if (strlen(s) >= sizeof(t->expr))
		return prs_err_set(err, -EINVAL, "--target '%.40s...': too long; %s", s, TARGET_FORMS);
	while (isalpha((unsigned char)p[mlen]))
		mlen++;
	if (mlen == 0 || mlen >= sizeof(t->metric))
		return prs_err_set(err, -EINVAL, "--target '%s': no metric; %s", s, TARGET_FORMS);
	memcpy(t->metric, p, mlen);
	if (strcmp(t->metric, "wall") && strcmp(t->metric, "cpu") && strcmp(t->metric, "rss"))
		return prs_err_set(err, -EINVAL, "--target '%s': unknown metric '%s'; %s", s, t->metric,
				   TARGET_FORMS);
	p += mlen;
	for (k = 0; k < 4 && strncmp(p, ops[k], strlen(ops[k])); k++)
		;
	if (k == 4)
		return prs_err_set(err, -EINVAL, "--target '%s': no comparison (<, <=, >, >=); %s", s,
				   TARGET_FORMS);
	snprintf(t->op, sizeof(t->op), "%s", ops[k]);
	p += strlen(ops[k]);
	errno = 0;
	v = strtod(p, &end);
	if (end == p || errno || !isfinite(v) || v < 0)
		return prs_err_set(err, -EINVAL, "--target '%s': no value; %s", s, TARGET_FORMS);
	size = strcmp(t->metric, "rss") == 0;
	if (size) {
		for (k = 0; k < sizeof(size_units) / sizeof(size_units[0]); k++)
			if (strcmp(end, size_units[k].unit) == 0)
				mult = size_units[k].mult;
	} else {
		for (k = 0; k < sizeof(time_units) / sizeof(time_units[0]); k++)
			if (strcmp(end, time_units[k].unit) == 0)
				mult = time_units[k].mult;
	}
	if (mult == 0)
		return prs_err_set(err, -EINVAL, "--target '%s': unknown unit '%s'; %s", s, end, TARGET_FORMS);
	t->value = v * mult;
	snprintf(t->expr, sizeof(t->expr), "%s", s);
	return 0;
}

bool prs_target_met(const struct prs_target *t, double measured)
{
	if (strcmp(t->op, "<") == 0)
		return measured < t->value;
	if (strcmp(t->op, "<=") == 0)
		return measured <= t->value;
	if (strcmp(t->op, ">") == 0)
		return measured > t->value;
	return measured >= t->value;
}

static bool printable(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return false;
	return true;
}

int prs_dim_parse(const char *s, struct prs_dim *d, struct prs_err *err)
{
	const char *eq = strchr(s, '='), *dots;
	size_t nlen;

	memset(d, 0, sizeof(*d));
	if (!eq || eq == s)
		return prs_err_set(err, -EINVAL, "--dim '%s': expected NAME=TYPICAL or NAME=TYPICAL..MAX "
				   "(e.g. --dim n_rows=20000..60000)", s);
	nlen = (size_t)(eq - s);
	if (nlen >= sizeof(d->name) || !printable(s))
		return prs_err_set(err, -EINVAL, "--dim '%.40s': the name is too long or has control "
				   "characters", s);
	memcpy(d->name, s, nlen);
	dots = strstr(eq + 1, "..");
	if (dots) {
		if ((size_t)(dots - eq - 1) >= sizeof(d->typical) || strlen(dots + 2) >= sizeof(d->max))
			return prs_err_set(err, -EINVAL, "--dim '%.40s': a value is too long", s);
		memcpy(d->typical, eq + 1, (size_t)(dots - eq - 1));
		snprintf(d->max, sizeof(d->max), "%s", dots + 2);
		if (!d->max[0])
			return prs_err_set(err, -EINVAL, "--dim '%s': no MAX after '..'", s);
	} else {
		if (strlen(eq + 1) >= sizeof(d->typical))
			return prs_err_set(err, -EINVAL, "--dim '%.40s': the value is too long", s);
		snprintf(d->typical, sizeof(d->typical), "%s", eq + 1);
	}
	if (!d->typical[0])
		return prs_err_set(err, -EINVAL, "--dim '%s': no TYPICAL value after '='", s);
	return 0;
}

void prs_phase_inputs_from_meta(const struct prs_profile *p, struct prs_phase_inputs *in)
{
	memset(in, 0, sizeof(*in));
	for (uint32_t i = 0; i < p->nmeta; i++) {
		const char *k = p->strings[p->meta[i].key], *v = p->strings[p->meta[i].value];

		/* a profile is input too: what does not parse is left out */
		if (strcmp(k, "target") == 0 && !in->have_target)
			in->have_target = prs_target_parse(v, &in->target, NULL) == 0;
		else if (strcmp(k, "dim") == 0 && in->ndims < PRS_MAX_DIMS &&
			 prs_dim_parse(v, &in->dims[in->ndims], NULL) == 0)
			in->ndims++;
	}
}
