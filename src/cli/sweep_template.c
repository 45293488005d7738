/* SPDX-License-Identifier: MIT */
/*
 * `pyrsprof sweep`'s command template: the values of --dim, and the {NAME} placeholders of the
 * command, checked and replaced. A placeholder is "{" IDENT "}" with IDENT a C identifier; "{{"
 * is a literal "{" (so Python's {x} set or f-string can be written {{x}); any other brace is
 * plain text.
 */
#include "cli/sweep.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "util/banned.h"

static bool name_char(char c, bool first)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
	       (!first && c >= '0' && c <= '9');
}

/* The length of the identifier at s (0 if none). */
static size_t name_len(const char *s)
{
	size_t n = 0;

	while (name_char(s[n], n == 0))
		n++;
	return n;
}

void sweep_value_text(double v, char *buf, size_t size)
{
	if (v == floor(v) && v < 1e15)
		snprintf(buf, size, "%.0f", v);
	else
		snprintf(buf, size, "%.15g", v);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* One value of --dim: a finite number > 0. */
static bool parse_value(const char *dim, const char *s, size_t len, double *out)
{
	char tmp[64], *end;

	if (len == 0 || len >= sizeof(tmp)) {
		cli_msg("--dim %s: '%.*s' is not a positive number", dim, (int)(len < 60 ? len : 60), s);
		return false;
	}
	memcpy(tmp, s, len);
	tmp[len] = '\0';
	errno = 0;
	*out = strtod(tmp, &end);
	if (end == tmp || *end != '\0' || errno != 0 || !isfinite(*out) || *out <= 0) {
		cli_msg("--dim %s: '%s' is not a positive number", dim, tmp);
		return false;
	}
	return true;
}

bool sweep_parse_dim(const char *arg, char *dim, double *values, size_t *n)
{
	const char *eq = strchr(arg, '='), *p;
	size_t len = eq ? (size_t)(eq - arg) : 0;

	if (!eq || len == 0) {
		cli_msg("--dim: expected NAME=V1,V2,... (e.g. --dim n=1e3,1e4,1e5), not '%s'", arg);
		return false;
	}
	if (len > PRS_SWEEP_NAME_MAX || name_len(arg) != len) {
		cli_msg("--dim: '%.*s' is not a dimension name (a letter or _, then letters, digits or _; "
			"at most %d)", (int)(len < 64 ? len : 64), arg, PRS_SWEEP_NAME_MAX);
		return false;
	}
	memcpy(dim, arg, len);
	dim[len] = '\0';
	*n = 0;
	for (p = eq + 1;; p++) {
		const char *comma = strchr(p, ',');
		size_t vlen = comma ? (size_t)(comma - p) : strlen(p);

		if (*n == PRS_SWEEP_MAX_VALUES) {
			cli_msg("--dim %s: at most %d values", dim, PRS_SWEEP_MAX_VALUES);
			return false;
		}
		if (!parse_value(dim, p, vlen, &values[*n]))
			return false;
		(*n)++;
		if (!comma)
			break;
		p = comma;
	}
	qsort(values, *n, sizeof(*values), cmp_double);
	for (size_t i = 1; i < *n; i++)
		if (values[i] == values[i - 1]) {
			char t[PRS_SWEEP_TEXT_MAX];

			sweep_value_text(values[i], t, sizeof(t));
			cli_msg("--dim %s: the value %s is given twice", dim, t);
			return false;
		}
	return true;
}

/*
 * Walks the placeholders of arg: calls back for each "{NAME}" (with its name) and for each run
 * of literal text ("{{" is a literal "{"). A callback returning false stops the walk.
 */
struct ph_walk {
	bool (*literal)(void *ctx, const char *s, size_t len);
	bool (*placeholder)(void *ctx, const char *name, size_t len);
	void *ctx;
};

static bool walk_arg(const char *arg, const struct ph_walk *w)
{
	const char *lit = arg, *p = arg;

	while (*p) {
		size_t n;

		if (p[0] != '{') {
			p++;
			continue;
		}
		if (p[1] == '{') { /* "{{": the text up to and with one '{' is literal */
			if (!w->literal(w->ctx, lit, (size_t)(p + 1 - lit)))
				return false;
			lit = p = p + 2;
			continue;
		}
		n = name_len(p + 1);
		if (n == 0 || p[1 + n] != '}') {
			p++;
			continue;
		}
		if (!w->literal(w->ctx, lit, (size_t)(p - lit)) || !w->placeholder(w->ctx, p + 1, n))
			return false;
		lit = p = p + n + 2;
	}
	return w->literal(w->ctx, lit, (size_t)(p - lit));
}

struct ph_check {
	const char *dim;
	size_t found;
};

static bool check_literal(void *ctx, const char *s, size_t len)
{
	(void)ctx, (void)s, (void)len;
	return true;
}

static bool check_placeholder(void *ctx, const char *name, size_t len)
{
	struct ph_check *c = ctx;

	if (len == strlen(c->dim) && memcmp(name, c->dim, len) == 0) {
		c->found++;
		return true;
	}
	cli_msg("sweep: {%.*s} in the command is not a dimension: the dimension is %s (--dim %s=...; "
		"write {{ for a literal {)", (int)len, name, c->dim, c->dim);
	return false;
}

bool sweep_check_placeholders(char **cmd, const char *dim)
{
	struct ph_check c = { dim, 0 };
	struct ph_walk w = { check_literal, check_placeholder, &c };

	for (size_t i = 0; cmd[i]; i++)
		if (!walk_arg(cmd[i], &w))
			return false;
	if (c.found == 0) {
		cli_msg("sweep: the command has no {%s}: put {%s} where the value goes "
			"(e.g. -- ./prog --size {%s})", dim, dim, dim);
		return false;
	}
	return true;
}

struct ph_subst {
	const char *text;
	char *out;
	size_t len, cap;
};

static bool subst_put(void *ctx, const char *s, size_t len)
{
	struct ph_subst *x = ctx;

	if (x->len + len >= x->cap) {
		size_t cap = (x->len + len + 1) * 2;
		char *p = realloc(x->out, cap);

		if (!p)
			return false;
		x->out = p;
		x->cap = cap;
	}
	memcpy(x->out + x->len, s, len);
	x->len += len;
	x->out[x->len] = '\0';
	return true;
}

static bool subst_placeholder(void *ctx, const char *name, size_t len)
{
	struct ph_subst *x = ctx;

	(void)name, (void)len; /* checked: every placeholder is the dimension */
	return subst_put(ctx, x->text, strlen(x->text));
}

char **sweep_substitute(char **cmd, const char *text)
{
	size_t n = 0;
	char **out;

	while (cmd[n])
		n++;
	out = calloc(n + 1, sizeof(*out));
	for (size_t i = 0; out && i < n; i++) {
		struct ph_subst x = { text, NULL, 0, 0 };
		struct ph_walk w = { subst_put, subst_placeholder, &x };

		if (!walk_arg(cmd[i], &w) || !subst_put(&x, "", 0)) {
			free(x.out);
			for (size_t j = 0; j < i; j++)
				free(out[j]);
			free(out);
			return NULL;
		}
		out[i] = x.out;
	}
	return out;
}

void sweep_free_argv(char **argv)
{
	for (size_t i = 0; argv && argv[i]; i++)
		free(argv[i]);
	free(argv);
}
