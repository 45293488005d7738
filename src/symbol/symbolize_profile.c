// SPDX-License-Identifier: MIT
/*
 * prs_symbolize_profile: runs the symbolizer over every raw native frame of a profile (each
 * frame is unique in the profile, so each PC is looked up once) and records the inline chains as
 * frame expansions. Used at the end of `pyrsprof run`/`attach` and by `report` on a profile that
 * was saved unsymbolized.
 */
#include "pyrsprof/symbol.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "pyrsprof/kallsyms.h"
#include "pyrsprof/profile.h"
#include "symbol/symbol-internal.h"
#include "util/banned.h"

_Static_assert(PRS_BUILD_ID_MAX_SYM == PRS_BUILD_ID_MAX, "build id sizes differ");

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint32_t intern(struct prs_profile *p, const char *s)
{
	return s ? prs_profile_string(p, s, strlen(s)) : 0;
}

/* Names kernel frame f (PC addr) from kallsyms, or by its address, kind kernel (the sampler
 * recorded the PC only: no symbol lookup on its path). 0 or -ENOMEM. */
static int kernel_frame(struct prs_symbolizer *s, struct prs_profile *p, uint32_t f, uint64_t addr)
{
	const struct prs_kallsyms *k = prs_symbolizer_kallsyms(s);
	const char *name = k ? prs_kallsyms_lookup(k, addr) : NULL;
	char hex[32];
	uint32_t str, id;

	if (!name) {
		snprintf(hex, sizeof(hex), "0x%llx", (unsigned long long)addr);
		name = hex;
	}
	str = intern(p, name);
	if (str == UINT32_MAX)
		return -ENOMEM;
	id = prs_profile_named_frame(p, PRS_KIND_KERNEL, str, 0, 0);
	if (id == UINT32_MAX)
		return -ENOMEM;
	return prs_profile_expand(p, f, &id, 1);
}

int prs_symbolize_profile(struct prs_profile *p, const struct prs_symbol_opts *opts,
			  struct prs_symbolize_stats *stats, struct prs_err *err)
{
	struct prs_symbolizer *s;
	int rc;

	if (stats)
		memset(stats, 0, sizeof(*stats));
	if (!p)
		return prs_err_set(err, -EINVAL, "symbolize: no profile");
	s = prs_symbolizer_new();
	if (!s)
		return prs_err_set(err, -ENOMEM, "symbolize: out of memory");
	rc = prs_symbolizer_set_opts(s, opts);
	if (rc)
		prs_err_set(err, rc, "symbolize: options: %s", strerror(-rc));
	else
		rc = prs_symbolize_profile_with(s, p, opts && opts->rename, stats, err);
	prs_symbolizer_free(s);
	return rc;
}

int prs_symbolize_profile_with(struct prs_symbolizer *s, struct prs_profile *p, bool rename,
			       struct prs_symbolize_stats *stats, struct prs_err *err)
{
	struct prs_symframe fr[PRS_SYM_MAX_INLINE];
	uint32_t ids[PRS_SYM_MAX_INLINE];
	uint32_t nframes;
	uint64_t t0 = mono_ns();
	int rc = 0;

	if (!p)
		return prs_err_set(err, -EINVAL, "symbolize: no profile");
	/* named frames are appended as we go: only the frames present at the start are raw */
	nframes = p->nframes;
	for (uint32_t f = 0; f < nframes; f++) {
		const struct prs_frame fcopy = p->frames[f];
		const struct prs_mapping *m;
		struct prs_symmap map;
		int n;

		if (!fcopy.raw || fcopy.mapping == PRS_NO_MAPPING || fcopy.mapping >= p->nmappings)
			continue;
		if (p->expansions && p->expansions[f].count && !rename)
			continue;
		m = &p->mappings[fcopy.mapping];
		if (m->path >= p->nstrings)
			continue;
		if (strcmp(p->strings[m->path], PRS_KERNEL_MAPPING_PATH) == 0) {
			if ((rc = kernel_frame(s, p, f, fcopy.addr)) != 0) {
				prs_err_set(err, rc, "symbolize: out of memory");
				goto out;
			}
			continue;
		}
		map = (struct prs_symmap){
			.path = p->strings[m->path],
			.build_id = m->build_id_len ? m->build_id : NULL,
			.build_id_len = m->build_id_len <= PRS_BUILD_ID_MAX ? m->build_id_len : 0,
			.start = m->start,
			.end = m->end,
			.offset = m->offset,
		};
		n = prs_symbolize(s, &map, fcopy.addr, fcopy.activation, fr, PRS_SYM_MAX_INLINE);
		if (n < 0) {
			rc = prs_err_set(err, n, "symbolize %s+0x%llx: %s", map.path,
					 (unsigned long long)(fcopy.addr - m->start + m->offset), strerror(-n));
			goto out;
		}
		for (int i = 0; i < n; i++) {
			uint32_t name = intern(p, fr[i].name), file = intern(p, fr[i].file);

			if (name == UINT32_MAX || file == UINT32_MAX ||
			    (ids[i] = prs_profile_named_frame(p, fr[i].kind, name, file, fr[i].line)) ==
				    UINT32_MAX) {
				rc = prs_err_set(err, -ENOMEM, "symbolize: out of memory");
				goto out;
			}
		}
		if (n > 0 && (rc = prs_profile_expand(p, f, ids, (uint32_t)n)) != 0) {
			prs_err_set(err, rc, "symbolize: expand frame %u: %s", f, strerror(-rc));
			goto out;
		}
	}
out:
	if (stats) {
		prs_symbolizer_stats(s, stats);
		stats->time_ns = mono_ns() - t0;
	}
	return rc;
}
