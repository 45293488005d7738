/* SPDX-License-Identifier: MIT */
/*
 * The counter set shared by both backends: specs and readings, the one-line explanation of each
 * failure, the set pyrsprof opens on this CPU (task-clock always; hardware and top-down events
 * when the PMU has them), the PMU probe, and the conversion to and from COUNTER accounting records.
 *
 * Top-down events: Intel's perf-metrics events are named in sysfs
 * (/sys/bus/event_source/devices/cpu/events/{slots,topdown-*}, encoded with the format files
 * beside them); AMD's Zen 4/5 pipeline events are raw codes from Linux
 * tools/perf/pmu-events/arch/x86/amdzen4 (pipeline.json, its events in other.json/
 * execution.json): ls_not_halted_cyc 0x76, de_no_dispatch_per_slot 0x1a0 (umask 0x01 frontend,
 * 0x1e backend), de_src_op_disp.all 0xaa/0x07, ex_ret_ops 0xc1, ex_no_retire 0xd6 (umask 0x02
 * not_complete, 0xa2 load_not_complete). The CPU model decides which (perf's mapfile.csv:
 * AuthenticAMD family 25 models 0x00-0x0f and 0x20-0x5f are Zen 3, the rest Zen 4; 26 is Zen 5).
 */
#include "pyrsprof/counters.h"

#include <errno.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "classify/classify-internal.h"

#include "util/banned.h"

#define SYSFS_CPU_PMU "/sys/bus/event_source/devices/cpu"

struct prs_counter *prs_counter_add(struct prs_counter_set *set, const char *name, int group,
				    uint32_t type, uint64_t config, bool hardware)
{
	struct prs_counter *c;

	if (set->n >= PRS_MAX_COUNTERS)
		return NULL;
	c = &set->c[set->n++];
	memset(c, 0, sizeof(*c));
	snprintf(c->name, sizeof(c->name), "%s", name);
	c->group = group;
	c->type = type;
	c->config = config;
	c->hardware = hardware;
	return c;
}

const struct prs_counter *prs_counter_find(const struct prs_counter_set *set, const char *name)
{
	for (size_t i = 0; i < set->n; i++)
		if (strcmp(set->c[i].name, name) == 0)
			return &set->c[i];
	return NULL;
}

bool prs_counter_scaled(const struct prs_counter_set *set, const char *name, double *value,
			double *share)
{
	const struct prs_counter *c = prs_counter_find(set, name);

	if (!c || !c->ok || c->running_ns == 0 || c->enabled_ns == 0)
		return false;
	*value = (double)c->value * ((double)c->enabled_ns / (double)c->running_ns);
	if (share)
		*share = (double)c->running_ns / (double)c->enabled_ns;
	return true;
}

int prs_perf_paranoid(void)
{
	char buf[32];

	if (prs_read_small_file("/proc/sys/kernel/perf_event_paranoid", buf, sizeof(buf)) <= 0)
		return 2;
	return atoi(buf);
}

const char *prs_counter_explain(const struct prs_counter *c, int e, const struct prs_perf_who *who,
				char *buf, size_t size)
{
	const char *what = c ? c->name : "counter";
	char prefix[PRS_COUNTER_NAME + 2];

	if (e < 0)
		e = -e;
	switch (e) {
	case ENOENT:
	case EOPNOTSUPP:
		if (c && c->hardware)
			snprintf(buf, size, "%s: no hardware PMU here (perf_event_open: %s; a VM without a "
				 "virtual PMU): compute vs memory cannot be measured", what, strerror(e));
		else
			snprintf(buf, size, "%s: not supported by this kernel (perf_event_open: %s)", what,
				 strerror(e));
		break;
	case EACCES:
	case EPERM:
		/* counted in user space only, a counter of one's own child is allowed up to level 2 */
		snprintf(prefix, sizeof(prefix), "%.*s: ", PRS_COUNTER_NAME - 1, what);
		prs_perf_refusal(who, 2, prefix, e, buf, size);
		break;
	case EINVAL:
		snprintf(buf, size, "%s: the kernel refused this counter's settings (perf_event_open: "
			 "EINVAL; an event this CPU or kernel does not have)", what);
		break;
	case EMFILE:
	case ENFILE:
		snprintf(buf, size, "%s: out of file descriptors (%s): raise ulimit -n", what, strerror(e));
		break;
	case ESRCH:
		snprintf(buf, size, "%s: the target exited before its counters were opened", what);
		break;
	case ENODEV:
		snprintf(buf, size, "%s: this PMU does not count per task (ENODEV)", what);
		break;
	default:
		snprintf(buf, size, "%s: perf_event_open: %s", what, strerror(e));
		break;
	}
	return buf;
}

/* ---- the default set ---- */

/* vendor_id, cpu family and model of the first CPU in /proc/cpuinfo. */
static void cpu_id(char *vendor, size_t vsize, int *family, int *model)
{
	char buf[8192];
	uint64_t v;
	const char *p;

	vendor[0] = '\0';
	*family = *model = -1;
	if (prs_read_small_file("/proc/cpuinfo", buf, sizeof(buf)) <= 0)
		return;
	p = strstr(buf, "vendor_id");
	if (p && (p = strchr(p, ':'))) {
		size_t n = 0;

		for (p++; *p == ' ' || *p == '\t'; p++)
			;
		while (p[n] && p[n] != '\n' && n + 1 < vsize)
			n++;
		memcpy(vendor, p, n);
		vendor[n] = '\0';
	}
	if (prs_keyed_u64(buf, "cpu family", &v))
		*family = (int)v;
	if ((p = strstr(buf, "\nmodel\t")) && prs_keyed_u64(p + 1, "model", &v))
		*model = (int)v;
}

/* Places value into config at the bits of a format spec like "config:0-7,32-35". */
static bool place_bits(const char *spec, uint64_t value, uint64_t *config)
{
	const char *p = strchr(spec, ':');
	unsigned shift = 0;

	if (strncmp(spec, "config:", 7) != 0 || !p)
		return false;
	for (p++; *p && *p != '\n';) {
		char *end;
		unsigned lo = (unsigned)strtoul(p, &end, 10), hi = lo;

		if (end == p || lo > 63)
			return false;
		p = end;
		if (*p == '-') {
			hi = (unsigned)strtoul(p + 1, &end, 10);
			if (end == p + 1 || hi > 63 || hi < lo)
				return false;
			p = end;
		}
		for (unsigned b = lo; b <= hi; b++, shift++)
			if ((value >> shift) & 1)
				*config |= 1ull << b;
		if (*p == ',')
			p++;
	}
	return true;
}

/*
 * Encodes a sysfs event ("event=0x00,umask=0x81") of the PMU at dir with its format files.
 * Returns false when the event or a format is missing or unparsable.
 */
bool prs_sysfs_event(const char *dir, const char *event, uint32_t *type, uint64_t *config)
{
	char path[512], buf[256], fmt[128], *save = NULL, *term;

	snprintf(path, sizeof(path), "%s/type", dir);
	if (prs_read_small_file(path, buf, sizeof(buf)) <= 0)
		return false;
	*type = (uint32_t)strtoul(buf, NULL, 10);
	snprintf(path, sizeof(path), "%s/events/%s", dir, event);
	if (prs_read_small_file(path, buf, sizeof(buf)) <= 0)
		return false;
	*config = 0;
	for (term = strtok_r(buf, ",\n", &save); term; term = strtok_r(NULL, ",\n", &save)) {
		char *eq = strchr(term, '=');
		uint64_t v = 1;

		if (eq) {
			*eq = '\0';
			v = strtoull(eq + 1, NULL, 0);
		}
		snprintf(path, sizeof(path), "%s/format/%s", dir, term);
		if (prs_read_small_file(path, fmt, sizeof(fmt)) <= 0 || !place_bits(fmt, v, config))
			return false;
	}
	return true;
}

static uint64_t amd_raw(unsigned event, unsigned umask)
{
	return (uint64_t)(event & 0xff) | ((uint64_t)umask << 8) | ((uint64_t)((event >> 8) & 0xf) << 32);
}

static int add_intel_topdown(struct prs_counter_set *set, int group)
{
	static const char *const names[] = { "slots", "topdown-retiring", "topdown-bad-spec",
					     "topdown-fe-bound", "topdown-be-bound", "topdown-mem-bound" };
	uint32_t type;
	uint64_t config;

	if (!prs_sysfs_event(SYSFS_CPU_PMU, "slots", &type, &config) ||
	    !prs_sysfs_event(SYSFS_CPU_PMU, "topdown-be-bound", &type, &config))
		return PRS_TOPDOWN_NONE;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (prs_sysfs_event(SYSFS_CPU_PMU, names[i], &type, &config))
			prs_counter_add(set, names[i], group, type, config, true);
	return PRS_TOPDOWN_INTEL;
}

static int add_amd_pipeline(struct prs_counter_set *set, int group, int family, int model)
{
	static const struct {
		const char *name;
		unsigned event, umask;
	} ev[] = {
		{ "ls_not_halted_cyc", 0x76, 0 },
		{ "de_no_dispatch_per_slot.no_ops_from_frontend", 0x1a0, 0x01 },
		{ "de_no_dispatch_per_slot.backend_stalls", 0x1a0, 0x1e },
		{ "de_src_op_disp.all", 0xaa, 0x07 },
		{ "ex_ret_ops", 0xc1, 0 },
		{ "ex_no_retire.not_complete", 0xd6, 0x02 },
		{ "ex_no_retire.load_not_complete", 0xd6, 0xa2 },
	};
	bool zen3 = family == 25 && (model <= 0x0f || (model >= 0x20 && model <= 0x5f));

	if ((family != 25 && family != 26) || zen3)
		return PRS_TOPDOWN_NONE;
	for (size_t i = 0; i < sizeof(ev) / sizeof(ev[0]); i++)
		prs_counter_add(set, ev[i].name, group, PERF_TYPE_RAW, amd_raw(ev[i].event, ev[i].umask),
				true);
	return family == 26 ? PRS_TOPDOWN_AMD_ZEN5 : PRS_TOPDOWN_AMD_ZEN4;
}

void prs_counter_default_set(struct prs_counter_set *set, bool hardware, int *topdown)
{
	/*
	 * One software counter, task-clock (the refusals of perf_event_open are told by it on a
	 * machine without a PMU). Not context-switches, cpu-migrations and the faults: no verdict
	 * reads them, the kernel's accounting has the switches and faults of every thread (THREAD
	 * and PROCESS records), and each counter inherits to every thread the target creates: ~4 us
	 * of the target's CPU per counter per new thread (its copy at clone, its scheduling at every
	 * switch, its sum at exit). A thread-per-request server paid ~25 us per request for the five
	 * (tests/bench/bench_ticks.py, bench_clone.py).
	 */
	static const struct {
		const char *name;
		uint64_t config;
	} sw[] = {
		{ "task-clock", PERF_COUNT_SW_TASK_CLOCK },
	}, hw[] = {
		{ "cycles", PERF_COUNT_HW_CPU_CYCLES },
		{ "instructions", PERF_COUNT_HW_INSTRUCTIONS },
		{ "cache-references", PERF_COUNT_HW_CACHE_REFERENCES },
		{ "cache-misses", PERF_COUNT_HW_CACHE_MISSES },
		{ "branch-misses", PERF_COUNT_HW_BRANCH_MISSES },
	};
	char vendor[32];
	int family, model;

	set->n = 0;
	*topdown = PRS_TOPDOWN_NONE;
	for (size_t i = 0; i < sizeof(sw) / sizeof(sw[0]); i++)
		prs_counter_add(set, sw[i].name, 0, PERF_TYPE_SOFTWARE, sw[i].config, false);
	if (!hardware)
		return;
	for (size_t i = 0; i < sizeof(hw) / sizeof(hw[0]); i++)
		prs_counter_add(set, hw[i].name, 1, PERF_TYPE_HARDWARE, hw[i].config, true);
	cpu_id(vendor, sizeof(vendor), &family, &model);
	if (strcmp(vendor, "GenuineIntel") == 0)
		*topdown = add_intel_topdown(set, 2);
	else if (strcmp(vendor, "AuthenticAMD") == 0)
		*topdown = add_amd_pipeline(set, 2, family, model);
}

int prs_pmu_probe(prs_perf_open_fn open_fn, int *errnum, char *why, size_t size)
{
	struct prs_counter_set set = { .n = 0 };
	struct prs_counter_backend *b = prs_counter_perf_new(open_fn);
	pid_t self = getpid();
	int rc;

	*errnum = 0;
	if (why && size)
		why[0] = '\0';
	if (!b)
		return PRS_PMU_UNKNOWN;
	prs_counter_add(&set, "cycles", 0, PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES, true);
	rc = b->open(b, &self, 1, &set, NULL);
	prs_counter_backend_free(b);
	if (rc == 0 && !set.c[0].err)
		return PRS_PMU_OK;
	*errnum = -set.c[0].err;
	if (why && size)
		snprintf(why, size, "%s", set.c[0].why);
	switch (*errnum) {
	case ENOENT:
	case EOPNOTSUPP:
		return PRS_PMU_NONE;
	case EACCES:
	case EPERM:
		return PRS_PMU_NOT_PERMITTED;
	default:
		return PRS_PMU_ERROR;
	}
}

void prs_counter_to_acct(const struct prs_counter *c, struct prs_acct *out)
{
	prs_acct_init(out, PRS_ACCT_COUNTER, PRS_PHASE_END, 0);
	prs_acct_str(out, c->name);
	prs_acct_set(out, PRS_CTR_GROUP, (uint64_t)c->group);
	prs_acct_set(out, PRS_CTR_TYPE, c->type);
	prs_acct_set(out, PRS_CTR_CONFIG, c->config);
	if (c->ok) {
		prs_acct_set(out, PRS_CTR_VALUE, c->value);
		prs_acct_set(out, PRS_CTR_ENABLED_NS, c->enabled_ns);
		prs_acct_set(out, PRS_CTR_RUNNING_NS, c->running_ns);
	} else {
		prs_acct_set(out, PRS_CTR_ERRNO, (uint64_t)(c->err < 0 ? -c->err : c->err));
		prs_acct_str(out, c->why);
	}
}

void prs_counter_from_acct(const struct prs_acct *a, struct prs_counter *out)
{
	uint64_t e;

	memset(out, 0, sizeof(*out));
	snprintf(out->name, sizeof(out->name), "%s", a->nstr > 0 ? a->str[0] : "");
	out->group = (int)prs_acct_val(a, PRS_CTR_GROUP, 0);
	out->type = (uint32_t)prs_acct_val(a, PRS_CTR_TYPE, 0);
	out->config = prs_acct_val(a, PRS_CTR_CONFIG, 0);
	out->hardware = out->type != PERF_TYPE_SOFTWARE;
	if (prs_acct_get(a, PRS_CTR_ERRNO, &e)) {
		out->err = -(int)e;
		snprintf(out->why, sizeof(out->why), "%s", a->nstr > 1 ? a->str[1] : "");
		return;
	}
	out->ok = prs_acct_get(a, PRS_CTR_VALUE, &out->value);
	out->enabled_ns = prs_acct_val(a, PRS_CTR_ENABLED_NS, 0);
	out->running_ns = prs_acct_val(a, PRS_CTR_RUNNING_NS, 0);
}
