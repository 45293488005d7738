/* SPDX-License-Identifier: MIT */
/*
 * What counter readings say about the CPU: IPC, top-down level 1 (Yasin, ISPASS 2014) and the
 * backend's memory/core split, with the formulas of Linux tools/perf/pmu-events (metric JSON of
 * each CPU), every count scaled for multiplexing first:
 *
 * Intel perf metrics (Icelake and later):
 *   S = topdown-retiring + topdown-bad-spec + topdown-fe-bound + topdown-be-bound
 *   tma_retiring       = topdown-retiring / S
 *   tma_frontend_bound = topdown-fe-bound / S - INT_MISC.UOP_DROPPING / SLOTS
 *   tma_backend_bound  = topdown-be-bound / S + 5 * INT_MISC.RECOVERY_CYCLES:c1:e / SLOTS
 *   tma_bad_speculation = 1 - (the three above)            (adjustments only when counted)
 *   tma_memory_bound = topdown-mem-bound / S (Sapphire Rapids and later), or on Icelake-class
 *     cores tma_backend_bound * (CYCLE_ACTIVITY.STALLS_MEM_ANY + EXE_ACTIVITY.BOUND_ON_STORES) /
 *     (CYCLE_ACTIVITY.STALLS_TOTAL + EXE_ACTIVITY.1_PORTS_UTIL + tma_retiring *
 *      EXE_ACTIVITY.2_PORTS_UTIL + EXE_ACTIVITY.BOUND_ON_STORES)
 *   tma_core_bound = tma_backend_bound - tma_memory_bound
 *   (worked by hand on perfwiki's `perf stat -M TopdownL1 perf bench mem memcpy` example:
 *    tests/fixtures/counters/intel-memcpy-l1.json and -backend.json.)
 * AMD Zen 4 (amdzen4/pipeline.json; Zen 5: 8 slots per cycle):
 *   slots = 6 * ls_not_halted_cyc; frontend = de_no_dispatch_per_slot.no_ops_from_frontend /
 *   slots; backend = de_no_dispatch_per_slot.backend_stalls / slots; bad_speculation =
 *   (de_src_op_disp.all - ex_ret_ops) / slots; retiring = ex_ret_ops / slots;
 *   backend_bound_memory = backend * ex_no_retire.load_not_complete / ex_no_retire.not_complete.
 */
#include "pyrsprof/counters.h"

#include <string.h>

#include "util/banned.h"

struct getter {
	const struct prs_counter_set *set;
	double min_share;
	size_t used;
};

static bool get(struct getter *g, const char *name, double *v)
{
	double share;

	if (!prs_counter_scaled(g->set, name, v, &share))
		return false;
	if (share < g->min_share)
		g->min_share = share;
	g->used++;
	return true;
}

static void intel_l1(struct getter *g, struct prs_cpu_metrics *m)
{
	double ret, bad, fe, be, slots, s, x, mem, stalls, total, p1, p2, stores;

	if (!get(g, "topdown-retiring", &ret) || !get(g, "topdown-bad-spec", &bad) ||
	    !get(g, "topdown-fe-bound", &fe) || !get(g, "topdown-be-bound", &be))
		return;
	s = ret + bad + fe + be;
	if (s <= 0)
		return;
	m->have_l1 = true;
	m->l1_source = "intel perf metrics";
	m->retiring = ret / s;
	m->frontend = fe / s;
	m->backend = be / s;
	m->bad_spec = bad / s;
	if (get(g, "slots", &slots) && slots > 0) {
		if (get(g, "int_misc.uop_dropping", &x))
			m->frontend -= x / slots;
		if (get(g, "int_misc.recovery_cycles:c1:e", &x))
			m->backend += 5 * x / slots;
		m->bad_spec = 1 - (m->frontend + m->backend + m->retiring);
		if (m->bad_spec < 0)
			m->bad_spec = 0;
	}
	if (get(g, "topdown-mem-bound", &mem)) {
		m->have_mem = true;
		m->memory_bound = mem / s;
	} else if (get(g, "cycle_activity.stalls_mem_any", &stalls) &&
		   get(g, "cycle_activity.stalls_total", &total) &&
		   get(g, "exe_activity.1_ports_util", &p1) && get(g, "exe_activity.2_ports_util", &p2)) {
		double den;

		if (!get(g, "exe_activity.bound_on_stores", &stores))
			stores = 0;
		den = total + p1 + m->retiring * p2 + stores;
		if (den > 0) {
			m->have_mem = true;
			m->memory_bound = m->backend * (stalls + stores) / den;
		}
	}
	if (m->have_mem)
		m->core_bound = m->backend - m->memory_bound;
}

static void amd_pipeline(struct getter *g, int width, struct prs_cpu_metrics *m)
{
	double cyc, fe, be, disp, ret, nc, lnc, slots;

	if (!get(g, "ls_not_halted_cyc", &cyc) ||
	    !get(g, "de_no_dispatch_per_slot.no_ops_from_frontend", &fe) ||
	    !get(g, "de_no_dispatch_per_slot.backend_stalls", &be) || !get(g, "de_src_op_disp.all", &disp) ||
	    !get(g, "ex_ret_ops", &ret))
		return;
	slots = width * cyc;
	if (slots <= 0)
		return;
	m->have_l1 = true;
	m->l1_source = width == 8 ? "amd zen5 pipeline" : "amd zen4 pipeline";
	m->frontend = fe / slots;
	m->backend = be / slots;
	m->bad_spec = (disp > ret ? disp - ret : 0) / slots;
	m->retiring = ret / slots;
	if (get(g, "ex_no_retire.not_complete", &nc) && get(g, "ex_no_retire.load_not_complete", &lnc) &&
	    nc > 0) {
		m->have_mem = true;
		m->memory_bound = m->backend * lnc / nc;
		m->core_bound = m->backend - m->memory_bound;
	}
}

void prs_cpu_metrics(const struct prs_counter_set *set, int topdown, struct prs_cpu_metrics *m)
{
	struct getter g = { set, 1.0, 0 };
	double cyc, ins, miss;

	memset(m, 0, sizeof(*m));
	if (get(&g, "cycles", &cyc) && get(&g, "instructions", &ins) && cyc > 0) {
		m->have_ipc = true;
		m->ipc = ins / cyc;
	}
	if (get(&g, "cache-misses", &miss)) {
		m->have_llc = true;
		m->llc_miss_bytes = 64 * miss;
	}
	if (topdown == PRS_TOPDOWN_INTEL)
		intel_l1(&g, m);
	else if (topdown == PRS_TOPDOWN_AMD_ZEN4 || topdown == PRS_TOPDOWN_AMD_ZEN5)
		amd_pipeline(&g, topdown == PRS_TOPDOWN_AMD_ZEN5 ? 8 : 6, m);
	m->min_share = g.min_share;
	m->used = g.used;
}
