/* SPDX-License-Identifier: MIT */
/*
 * Fixed-point decimal text of a double, as printf's "%.1f" / "%.2f" writes it, without printf:
 * the flame graph writes four such numbers per frame, and printf's exact conversion (big-number
 * arithmetic on the binary value) was ~10 % of rendering a profile's graphs.
 */
#include "pyrsprof/util.h"

#include <math.h>
#include <stdio.h>

#include "util/banned.h"

/*
 * printf rounds the exact binary value of v, ties to even. Here r = v * scale is rounded once and
 * e = fma(v, scale, -r) is the exact error of that product (an error-free transformation), so
 * the exact v * scale is r + e. Below 2^52, r's fraction and 1/2 are multiples of r's ulp: when
 * the fraction is not 1/2, |e| (at most half an ulp) is smaller than its distance to 1/2 and r
 * alone decides; at exactly 1/2 the sign of e does (0: a real tie, to even).
 */
size_t prs_fmt_u64(char *out, uint64_t v)
{
	char d[PRS_FMT_U64_MAX];
	size_t i = sizeof(d), k = 0;

	do {
		d[--i] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (i < sizeof(d))
		out[k++] = d[i++];
	out[k] = '\0';
	return k;
}

size_t prs_fmt_fixed(char *out, double v, int decimals)
{
	double scale = decimals == 1 ? 10.0 : 100.0, r, e, fl, frac;
	uint64_t n, ip;
	size_t k;
	int len;

	if (!(v >= 0 && v < 1e12) || signbit(v) || (decimals != 1 && decimals != 2)) {
		len = snprintf(out, PRS_FMT_FIXED_MAX, "%.*f", decimals, v);
		return len < 0 ? 0 : (size_t)len < PRS_FMT_FIXED_MAX ? (size_t)len : PRS_FMT_FIXED_MAX - 1;
	}
	r = v * scale;
	e = fma(v, scale, -r);
	fl = floor(r);
	frac = r - fl;
	n = (uint64_t)fl;
	if (frac > 0.5 || (frac == 0.5 && (e > 0 || (e == 0 && (n & 1)))))
		n++;
	ip = n / (uint64_t)scale;
	k = prs_fmt_u64(out, ip);
	out[k++] = '.';
	if (decimals == 2)
		out[k++] = (char)('0' + n % 100 / 10);
	out[k++] = (char)('0' + n % 10);
	out[k] = '\0';
	return k;
}
