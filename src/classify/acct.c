/* SPDX-License-Identifier: MIT */
/*
 * Accounting records: the in-memory struct prs_acct and its payload in profile.pyrs (types
 * 11..19, docs/pyrs-format.md). The payload is hostile input when read back: every length is
 * checked against the payload, strings are cut to PRS_ACCT_MAX_STR - 1 bytes, and fields of a
 * newer writer (bits this version does not know) are read and dropped.
 */
#include "pyrsprof/acct.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pyrsprof/util.h"

#include "util/banned.h"

void prs_acct_init(struct prs_acct *a, enum prs_acct_type type, enum prs_acct_phase phase, int64_t id)
{
	memset(a, 0, sizeof(*a));
	a->type = (uint8_t)type;
	a->phase = (uint8_t)phase;
	a->id = id;
}

void prs_acct_set(struct prs_acct *a, unsigned f, uint64_t v)
{
	if (f >= PRS_ACCT_MAX_FIELDS)
		return;
	a->have |= 1ull << f;
	a->v[f] = v;
}

bool prs_acct_get(const struct prs_acct *a, unsigned f, uint64_t *v)
{
	if (f >= PRS_ACCT_MAX_FIELDS || !(a->have & (1ull << f)))
		return false;
	*v = a->v[f];
	return true;
}

uint64_t prs_acct_val(const struct prs_acct *a, unsigned f, uint64_t dflt)
{
	uint64_t v;

	return prs_acct_get(a, f, &v) ? v : dflt;
}

void prs_acct_str(struct prs_acct *a, const char *s)
{
	size_t n;

	if (a->nstr >= PRS_ACCT_MAX_STRS)
		return;
	n = strnlen(s, PRS_ACCT_MAX_STR - 1);
	memcpy(a->str[a->nstr], s, n);
	a->str[a->nstr][n] = '\0';
	a->nstr++;
}

size_t prs_acct_encode(const struct prs_acct *a, uint8_t *out)
{
	size_t n = 0;
	unsigned f;

	/* worst case: 3 + 48 varints of 10 bytes + 1 + 4 * (2 + 255) bytes < PRS_ACCT_REC_MAX */
	n += prs_uleb128_encode(a->phase, out + n);
	n += prs_uleb128_encode(prs_zigzag_encode(a->id), out + n);
	n += prs_uleb128_encode(a->have, out + n);
	for (f = 0; f < PRS_ACCT_MAX_FIELDS; f++)
		if (a->have & (1ull << f))
			n += prs_uleb128_encode(a->v[f], out + n);
	n += prs_uleb128_encode(a->nstr, out + n);
	for (f = 0; f < a->nstr && f < PRS_ACCT_MAX_STRS; f++) {
		size_t len = strnlen(a->str[f], PRS_ACCT_MAX_STR - 1);

		n += prs_uleb128_encode(len, out + n);
		memcpy(out + n, a->str[f], len);
		n += len;
	}
	return n;
}

struct rd {
	const uint8_t *p;
	size_t len, off;
	bool bad;
};

static uint64_t next(struct rd *r)
{
	uint64_t v = 0;
	size_t used;

	if (r->bad || prs_uleb128_decode(r->p + r->off, r->len - r->off, &v, &used)) {
		r->bad = true;
		return 0;
	}
	r->off += used;
	return v;
}

int prs_acct_decode(uint8_t type, const uint8_t *data, size_t len, struct prs_acct *a)
{
	struct rd r = { data, len, 0, false };
	uint64_t phase, id, have, nstr, i;

	phase = next(&r);
	id = next(&r);
	have = next(&r);
	if (r.bad || phase > PRS_PHASE_EXIT)
		return -EINVAL;
	prs_acct_init(a, (enum prs_acct_type)type, (enum prs_acct_phase)phase, prs_zigzag_decode(id));
	for (i = 0; i < 64; i++) {
		uint64_t v;

		if (!(have & (1ull << i)))
			continue;
		v = next(&r);
		if (i < PRS_ACCT_MAX_FIELDS)
			prs_acct_set(a, (unsigned)i, v);
	}
	nstr = next(&r);
	if (r.bad || nstr > 64)
		return -EINVAL;
	for (i = 0; i < nstr; i++) {
		uint64_t slen = next(&r);
		char s[PRS_ACCT_MAX_STR];
		size_t keep;

		if (r.bad || slen > r.len - r.off)
			return -EINVAL;
		keep = slen < sizeof(s) - 1 ? (size_t)slen : sizeof(s) - 1;
		memcpy(s, r.p + r.off, keep);
		s[keep] = '\0';
		if (strlen(s) != keep)
			return -EINVAL; /* a NUL inside a string */
		prs_acct_str(a, s);
		r.off += (size_t)slen;
	}
	return 0;
}

int prs_acct_store(struct prs_profile *p, const struct prs_acct *a)
{
	uint8_t buf[PRS_ACCT_REC_MAX];

	if (a->type < PRS_ACCT_REC_FIRST || a->type > PRS_ACCT_REC_LAST)
		return -EINVAL;
	return prs_profile_acct(p, a->type, buf, prs_acct_encode(a, buf));
}

int prs_acct_load(const struct prs_profile *p, struct prs_acct **out, size_t *n, size_t *bad)
{
	struct prs_acct *arr;
	size_t k = 0, nbad = 0;
	uint32_t i;

	*out = NULL;
	*n = 0;
	if (bad)
		*bad = 0;
	if (!p->nacct)
		return 0;
	arr = malloc(p->nacct * sizeof(*arr));
	if (!arr)
		return -ENOMEM;
	for (i = 0; i < p->nacct; i++) {
		const struct prs_acct_record *r = &p->acct[i];

		if (prs_acct_decode(r->type, r->data, r->len, &arr[k]) == 0)
			k++;
		else
			nbad++;
	}
	*out = arr;
	*n = k;
	if (bad)
		*bad = nbad;
	return 0;
}

void prs_acct_note(struct prs_acct *out, const char *what, int errnum, const char *why)
{
	prs_acct_init(out, PRS_ACCT_NOTE, PRS_PHASE_END, 0);
	prs_acct_set(out, PRS_NOTE_ERRNO, (uint64_t)(errnum < 0 ? -errnum : errnum));
	prs_acct_str(out, what);
	prs_acct_str(out, why);
}
