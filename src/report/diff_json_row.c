/* SPDX-License-Identifier: MIT */
/*
 * One row of diff.json (a function: its self and total measures) as text, exactly as jansson
 * writes it at diff.json's flags (indent 1, 8 digits) two levels deep, without making its tree:
 * the rows are nearly all of a large diff.json, and jansson's tree, pack and dump of each cost
 * ~10 us a row (0.3 s of a 31k-function diff). What jansson would refuse (a string that is not
 * UTF-8, a number that is not finite where null is not allowed) is left to the jansson writer,
 * so that the outcome stays its own.
 */
#include "report/diff-internal.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "pyrsprof/export.h"

#include "util/banned.h"

/* 10^k for k in [0, 22]: every one exact in a double */
static const double pow10_exact[] = { 1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
				      1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
				      1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22 };

/* a >= 0 times 10^k (0 <= k <= 22), rounded to an integer as printf rounds: the exact product,
 * ties to even. fma gives the product's exact error e (10^k is exact); r's fraction is a
 * multiple of its ulp below 2^52, so only an exact 1/2 needs e's sign (src/util/fixed.c). */
static uint64_t scaled_round(double a, int k)
{
	double r = a * pow10_exact[k], e = fma(a, pow10_exact[k], -r), fl = floor(r), frac = r - fl;
	uint64_t n = (uint64_t)fl;

	if (frac > 0.5 || (frac == 0.5 && (e > 0 || (e == 0 && (n & 1)))))
		n++;
	return n;
}

/*
 * v as snprintf's "%.8g" writes it: without printf for 1e-15 <= |v| < 1e8 (the shares and
 * seconds of a diff: 200k numbers, 6 % of a large diff's instructions), else by snprintf. The
 * 8 significant digits N = v * 10^(7 - x) rounded, x the decimal exponent (found again when N
 * falls outside [10^7, 10^8)); then %g's style: %e when x < -4 or x >= 8, else %f; trailing
 * zeros and a bare '.' dropped.
 */
int prs_diff_g8_text(char *out, size_t size, double v)
{
	double a = fabs(v);
	char dig[8], t[40];
	uint64_t n;
	int x, k = 0, last, tries;

	if (!(a >= 1e-15 && a < 1e8))
		return snprintf(out, size, "%.8g", v);
	x = (int)floor(log10(a));
	for (tries = 0;; tries++) {
		if (7 - x < 0 || 7 - x > 22 || tries > 3)
			return snprintf(out, size, "%.8g", v);
		n = scaled_round(a, 7 - x);
		if (n >= 100000000u)
			x++;
		else if (n < 10000000u)
			x--;
		else
			break;
	}
	for (int i = 7; i >= 0; i--, n /= 10)
		dig[i] = (char)('0' + n % 10);
	for (last = 7; last > 0 && dig[last] == '0'; last--)
		; /* the last significant digit */
	if (signbit(v))
		t[k++] = '-';
	if (x < -4 || x >= 8) {
		t[k++] = dig[0];
		if (last > 0) {
			t[k++] = '.';
			for (int i = 1; i <= last; i++)
				t[k++] = dig[i];
		}
		t[k++] = 'e';
		t[k++] = x < 0 ? '-' : '+';
		if (x < 0)
			x = -x;
		if (x >= 100)
			t[k++] = (char)('0' + x / 100);
		t[k++] = (char)('0' + x / 10 % 10);
		t[k++] = (char)('0' + x % 10);
	} else if (x >= 0) {
		for (int i = 0; i <= x; i++)
			t[k++] = dig[i];
		if (last > x) {
			t[k++] = '.';
			for (int i = x + 1; i <= last; i++)
				t[k++] = dig[i];
		}
	} else {
		t[k++] = '0';
		t[k++] = '.';
		for (int i = 0; i < -x - 1; i++)
			t[k++] = '0';
		for (int i = 0; i <= last; i++)
			t[k++] = dig[i];
	}
	/* as snprintf: the whole length returned, the text cut to size - 1 */
	if (size) {
		size_t c = (size_t)k < size ? (size_t)k : size - 1;

		memcpy(out, t, c);
		out[c] = '\0';
	}
	return k;
}

/* jansson's text of a real at 8 digits (its jsonp_dtostr): "%.8g", ".0" appended when that reads
 * as an integer, the exponent without '+' or leading zeros. Its length, 0 if it does not fit. */
static size_t real_text(char *out, size_t size, double v)
{
	int n = prs_diff_g8_text(out, size, v);
	char *e, *digits, *from;

	if (n < 0 || (size_t)n + 3 > size)
		return 0;
	if (!strchr(out, '.') && !strchr(out, 'e')) {
		memcpy(out + n, ".0", 3);
		n += 2;
	}
	e = strchr(out, 'e');
	if (e) {
		digits = e + 1 + (e[1] == '-'); /* where the exponent's digits start */
		from = e + 2;                    /* past its sign (or its first digit) */
		while (*from == '0')
			from++;
		if (from != digits) {
			memmove(digits, from, strlen(from) + 1);
			n -= (int)(from - digits);
		}
	}
	return (size_t)n;
}

/* s (valid UTF-8) as a JSON string, escaped as jansson escapes it: '"', '\\' and bytes below
 * 0x20 (\b \f \n \r \t by name, the rest as \u00XX); everything else as is. */
static int put_string(struct prs_buf *b, const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	int rc = prs_buf_putc(b, '"');

	for (const unsigned char *c = (const unsigned char *)s; *c && !rc; c++) {
		const char *named = strchr("\"\\\b\f\n\r\t", *c);
		char esc[6] = { '\\', 'u', '0', '0', hex[*c >> 4], hex[*c & 15] };

		if (named) {
			esc[1] = "\"\\bfnrt"[named - "\"\\\b\f\n\r\t"];
			rc = prs_buf_append(b, esc, 2);
		} else if (*c < 0x20) {
			rc = prs_buf_append(b, esc, 6);
		} else {
			rc = prs_buf_putc(b, *c);
		}
	}
	return rc ? rc : prs_buf_putc(b, '"');
}

/* The separator before a member at indent (at most 8) spaces, and its key (no escaping needed).
 * Without printf: 650k members in a large diff. */
static int put_key(struct prs_buf *b, const char *key, int indent, bool first)
{
	static const char sep[] = ",\n        ";
	size_t n = strlen(key);

	if (prs_buf_reserve(b, n + 16))
		return -ENOMEM;
	if (first)
		prs_buf_append(b, sep + 1, (size_t)indent + 1);
	else
		prs_buf_append(b, sep, (size_t)indent + 2);
	prs_buf_putc(b, '"');
	prs_buf_append(b, key, n);
	return prs_buf_append(b, "\": ", 3);
}

/* v's text when it is a whole number below 1e8 (%.8g prints it whole, then ".0"); else 0. The
 * sample counts and the zeros of a diff are most of its numbers: no printf for them. */
static size_t whole_text(char *out, double v)
{
	size_t k = 0;

	if (!(v > -1e8 && v < 1e8) || v != (double)(int32_t)v || (v == 0 && signbit(v)))
		return 0;
	if (v < 0)
		out[k++] = '-';
	k += prs_fmt_u64(out + k, (uint64_t)fabs(v));
	memcpy(out + k, ".0", 2);
	return k + 2;
}

/* A number: null when not `have` or not finite (jansson's null for what cannot be a real). */
static int put_num(struct prs_buf *b, bool have, double v)
{
	char t[48];
	size_t n = !have || !isfinite(v) ? 0 : whole_text(t, v);

	if (have && isfinite(v) && !n)
		n = real_text(t, sizeof(t), v);

	return n ? prs_buf_append(b, t, n) : prs_buf_append(b, "null", 4);
}

/* True if every number jansson must write as a real (no null allowed) is finite. */
static bool finite_measure(const struct prs_change *sh, const double w[2])
{
	return isfinite(sh->before) && isfinite(sh->after) && isfinite(sh->delta) &&
	       isfinite(sh->sigma) && isfinite(w[0]) && isfinite(w[1]);
}

/* A measure (self or total) at indent 3, its members at 4. */
static int put_measure(struct prs_buf *b, const struct prs_diff *d, const char *key,
		       const struct prs_change *s, const struct prs_change *sh, const double w[2])
{
	const struct {
		const char *key;
		bool have;
		double v;
	} m[] = {
		{ "before_s", d->timed, s->before },	{ "after_s", d->timed, s->after },
		{ "delta_s", d->timed, s->delta },	{ "sigma_s", d->timed, s->sigma },
		{ "before_share", true, sh->before },	{ "after_share", true, sh->after },
		{ "delta_share", true, sh->delta },	{ "sigma_share", true, sh->sigma },
		{ "samples_before", true, w[0] },	{ "samples_after", true, w[1] },
	};
	int rc = put_key(b, key, 3, false) || prs_buf_putc(b, '{');

	for (size_t i = 0; !rc && i < sizeof(m) / sizeof(m[0]); i++)
		rc = put_key(b, m[i].key, 4, i == 0) || put_num(b, m[i].have, m[i].v);
	return rc || prs_buf_append(b, "\n   }", 5) ? -ENOMEM : 0;
}

int prs_diff_json_row(struct prs_buf *b, const struct prs_diff *d, const struct prs_diff_row *r)
{
	bool ratio = d->timed && r->total_s.before > 0 && r->total_s.after > 0;

	if (!prs_utf8_valid(r->name, strlen(r->name)) || !prs_utf8_valid(r->file, strlen(r->file)) ||
	    !finite_measure(&r->self_sh, r->self_w) || !finite_measure(&r->total_sh, r->total_w))
		return 1;
	if (prs_buf_putc(b, '{') || put_key(b, "name", 3, true) || put_string(b, r->name) ||
	    put_key(b, "file", 3, false) || put_string(b, r->file) || put_key(b, "kind", 3, false) ||
	    put_string(b, prs_kind_name(r->kind)) || put_key(b, "status", 3, false) ||
	    put_string(b, prs_diff_status_name(r->status)) || put_key(b, "significant", 3, false) ||
	    prs_buf_append(b, r->significant ? "true" : "false", r->significant ? 4 : 5) ||
	    put_measure(b, d, "self", &r->self_s, &r->self_sh, r->self_w) ||
	    put_measure(b, d, "total", &r->total_s, &r->total_sh, r->total_w) ||
	    put_key(b, "speedup", 3, false) ||
	    put_num(b, ratio, ratio ? r->total_s.before / r->total_s.after : 0) ||
	    prs_buf_append(b, "\n  }", 4))
		return -ENOMEM;
	return 0;
}
