/* SPDX-License-Identifier: MIT */
/*
 * One traced process (struct prs_target): its life in the session (created, exec'ed, exited),
 * its unwinder's maps and the profile mappings they become.
 */
#include <stdlib.h>
#include <string.h>

#include "pyrsprof/symbol.h"
#include "pyrsprof/unwind.h"
#include "pyrsprof/util.h"
#include "sample/sampler-internal.h"
#include "util/banned.h"

#define MAPS_REFRESH_MIN_NS 100000000ull

struct prs_target *prs_target_new(struct prs_sampler *s, pid_t pid)
{
	struct prs_target *tg = calloc(1, sizeof(*tg));

	if (!tg)
		return NULL;
	tg->pid = pid;
	tg->exit_status = -1;
	tg->py_since = prs_now_ns();
	if (prs_thr_table_init(&tg->thr, pid, &s->thr_common) != 0) {
		free(tg);
		return NULL;
	}
	return tg;
}

void prs_target_set_pid(struct prs_target *tg, pid_t pid)
{
	tg->pid = pid;
	tg->thr.pid = pid;
}

void prs_target_free(struct prs_target *tg)
{
	if (!tg)
		return;
	prs_thr_table_release(&tg->thr);
	if (tg->task_dir)
		closedir(tg->task_dir);
	prs_unwinder_free(tg->uw);
	prs_py_free(tg->py);
	free(tg->pyt);
	free(tg->pyraw);
	free(tg->map_ids);
	prs_preload_free(tg->preload);
	free(tg);
}

void prs_target_refresh_maps(struct prs_target *tg, uint64_t now_ns)
{
	if (tg->uw && tg->maps_dirty && (tg->last_maps_refresh == 0 ||
					 now_ns - tg->last_maps_refresh > MAPS_REFRESH_MIN_NS)) {
		prs_unwinder_refresh(tg->uw, NULL);
		tg->maps_dirty = false;
		tg->last_maps_refresh = now_ns;
	}
}

/* Makes map_ids one slot per map of the unwinder's current maps, all PRS_NO_MAPPING, when the
 * maps changed. Returns false when out of memory. */
static bool map_ids_current(struct prs_target *tg, const struct prs_maps *maps)
{
	uint32_t *ids;

	if (prs_unwinder_generation(tg->uw) == tg->maps_gen && tg->nmap_ids == maps->n)
		return true;
	ids = realloc(tg->map_ids, (maps->n ? maps->n : 1) * sizeof(*ids));
	if (!ids)
		return false;
	tg->map_ids = ids;
	tg->nmap_ids = maps->n;
	for (size_t i = 0; i < maps->n; i++)
		ids[i] = PRS_NO_MAPPING;
	tg->maps_gen = prs_unwinder_generation(tg->uw);
	return true;
}

uint32_t prs_target_mapping_id(struct prs_sampler *s, struct prs_target *tg, uint64_t pc)
{
	const struct prs_maps *maps = prs_unwinder_maps(tg->uw);
	const struct prs_map *m;
	size_t idx;

	if (!maps || !map_ids_current(tg, maps))
		return PRS_NO_MAPPING;
	m = prs_maps_find(maps, pc);
	if (!m) {
		tg->maps_dirty = true;
		return PRS_NO_MAPPING;
	}
	idx = (size_t)(m - maps->v);
	if (tg->map_ids[idx] == PRS_NO_MAPPING && m->path[0] != '\0') {
		struct prs_mapping pm;
		size_t len = 0;

		memset(&pm, 0, sizeof(pm));
		pm.start = m->start;
		pm.end = m->end;
		pm.offset = m->offset;
		pm.pid = tg->pid;
		pm.path = prs_profile_string(s->prof, m->path, strlen(m->path));
		if (m->path[0] == '/' &&
		    prs_elf_build_id(m->path, pm.build_id, sizeof(pm.build_id), &len) == 0)
			pm.build_id_len = (uint8_t)len;
		tg->map_ids[idx] = prs_profile_mapping(s->prof, &pm);
	}
	return tg->map_ids[idx];
}

void prs_target_exec(struct prs_target *tg, bool others_gone)
{
	/* Every other thread is gone; the leader carries on in a new image. */
	for (size_t i = 0; i < tg->thr.n;) {
		if (others_gone && tg->thr.v[i].tid != tg->pid)
			prs_thr_remove(&tg->thr, &tg->thr.v[i]);
		else
			i++;
	}
	tg->maps_dirty = true;
	tg->last_maps_refresh = 0; /* refresh at the next tick, whatever the rate limit */
	tg->own_image = true;
	tg->py_since = prs_now_ns();
	prs_target_py_drop(tg);
}

void prs_target_exited(struct prs_target *tg, int status)
{
	tg->exited = true;
	tg->exit_status = status;
}
