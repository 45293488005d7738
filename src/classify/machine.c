/* SPDX-License-Identifier: MIT */
/*
 * The machine: CPUs (online, and in the target's affinity mask), caches (sysfs cpu0 cache
 * indexes), memory (/proc/meminfo), the PMU (one "cycles" probe), the top-down events this CPU
 * has, and the calibration cache (JSON through jansson, written to a temporary name and renamed).
 */
#include "pyrsprof/machine.h"

#include <errno.h>
#include <jansson.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "classify/classify-internal.h"
#include "pyrsprof/counters.h"

#include "util/banned.h"

#define CACHE_VERSION 1

/* Parses a sysfs cache size ("32K", "1024K", "32768K", "2M"). */
static uint64_t size_of(const char *s)
{
	char *end;
	uint64_t v = strtoull(s, &end, 10);

	if (*end == 'K')
		v <<= 10;
	else if (*end == 'M')
		v <<= 20;
	else if (*end == 'G')
		v <<= 30;
	return v;
}

static void detect_caches(struct prs_machine *m)
{
	for (int i = 0; i < 8; i++) {
		char path[128], level[16], type[32], size[32];

		snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
		if (prs_read_small_file(path, level, sizeof(level)) <= 0)
			break;
		snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu0/cache/index%d/type", i);
		if (prs_read_small_file(path, type, sizeof(type)) <= 0)
			continue;
		snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
		if (prs_read_small_file(path, size, sizeof(size)) <= 0)
			continue;
		if (strncmp(type, "Instruction", 11) == 0)
			continue;
		switch (atoi(level)) {
		case 1:
			m->l1d_bytes = size_of(size);
			break;
		case 2:
			m->l2_bytes = size_of(size);
			break;
		default:
			if (size_of(size) > m->llc_bytes)
				m->llc_bytes = size_of(size);
		}
	}
	if (!m->llc_bytes)
		m->llc_bytes = m->l2_bytes;
}

static void detect_model(struct prs_machine *m)
{
	char buf[8192];
	const char *p;
	size_t n = 0;

	if (prs_read_small_file("/proc/cpuinfo", buf, sizeof(buf)) <= 0 ||
	    !(p = strstr(buf, "model name")) || !(p = strchr(p, ':')))
		return;
	for (p++; *p == ' ' || *p == '\t'; p++)
		;
	while (p[n] && p[n] != '\n' && n + 1 < sizeof(m->model))
		n++;
	memcpy(m->model, p, n);
	m->model[n] = '\0';
}

int prs_machine_detect(struct prs_machine *m, pid_t pid)
{
	char buf[4096];
	uint64_t kb;
	cpu_set_t set;
	struct utsname u;
	long v;

	memset(m, 0, sizeof(*m));
	detect_model(m);
	detect_caches(m);
	v = sysconf(_SC_NPROCESSORS_ONLN);
	m->cpus_online = v > 0 ? (unsigned)v : 1;
	m->cpus_allowed = sched_getaffinity(pid, sizeof(set), &set) == 0 ? (unsigned)CPU_COUNT(&set)
									 : m->cpus_online;
	if (prs_read_small_file("/proc/meminfo", buf, sizeof(buf)) > 0 &&
	    prs_keyed_u64(buf, "MemTotal", &kb))
		m->mem_bytes = kb * 1024;
	v = sysconf(_SC_PAGESIZE);
	m->page_size = v > 0 ? (unsigned)v : 4096;
	v = sysconf(_SC_CLK_TCK);
	m->clk_tck = v > 0 ? v : 100;
	m->paranoid = prs_perf_paranoid();
	m->pmu = prs_pmu_probe(NULL, &m->pmu_errno, m->pmu_why, sizeof(m->pmu_why));
	if (m->pmu == PRS_PMU_OK) {
		struct prs_counter_set cs;

		prs_counter_default_set(&cs, true, &m->topdown);
	}
	if (uname(&u) != 0)
		snprintf(u.release, sizeof(u.release), "?");
	/* memory rounded to GiB: the kernel's MemTotal moves by a few MB between boots */
	snprintf(m->key, sizeof(m->key), "%.48s|%u cpus|%llu GiB|llc %llu|%.20s", m->model,
		 m->cpus_online, (unsigned long long)((m->mem_bytes + (1ull << 29)) >> 30),
		 (unsigned long long)m->llc_bytes, u.release);
	return 0;
}

int prs_machine_calibrate(struct prs_machine *m, double seconds, struct prs_err *err)
{
	int rc;

	unsigned threads[2];
	double mbs[2];

	prs_machine_detect(m, 0);
	threads[0] = m->cpus_allowed;
	threads[1] = 1;
	rc = prs_bandwidth_measure(threads, 2, m->llc_bytes, seconds, mbs, err);
	if (rc)
		return rc;
	m->bw_all_mbs = mbs[0];
	m->bw_one_mbs = mbs[1];
	m->calibrated = true;
	m->calibrated_at = (int64_t)time(NULL);
	return 0;
}

/* mkdir -p of path's folder. */
static int make_parent(const char *path)
{
	char dir[4096];
	size_t n = strlen(path);

	if (n >= sizeof(dir))
		return -ENAMETOOLONG;
	memcpy(dir, path, n + 1);
	for (char *p = dir + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(dir, 0755) != 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	return 0;
}

int prs_machine_save(const struct prs_machine *m, const char *path, struct prs_err *err)
{
	char tmp[4200];
	json_t *j;
	int rc;

	if ((rc = make_parent(path)) != 0)
		return prs_err_set(err, rc, "%s: cannot create its folder: %s", path, strerror(-rc));
	j = json_pack("{s:i, s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:f, s:f, s:I}", "version",
		      CACHE_VERSION, "key", m->key, "model", m->model, "cpus_online",
		      (json_int_t)m->cpus_online, "cpus_allowed", (json_int_t)m->cpus_allowed,
		      "llc_bytes", (json_int_t)m->llc_bytes, "l2_bytes", (json_int_t)m->l2_bytes,
		      "mem_bytes", (json_int_t)m->mem_bytes, "bw_all_mbs", m->bw_all_mbs, "bw_one_mbs",
		      m->bw_one_mbs, "calibrated_at", (json_int_t)m->calibrated_at);
	if (!j)
		return prs_err_set(err, -ENOMEM, "%s: out of memory", path);
	snprintf(tmp, sizeof(tmp), "%s.tmp%d", path, (int)getpid());
	rc = json_dump_file(j, tmp, JSON_INDENT(2) | JSON_SORT_KEYS);
	json_decref(j);
	if (rc != 0 || rename(tmp, path) != 0) {
		rc = -(errno ? errno : EIO);
		unlink(tmp);
		return prs_err_set(err, rc, "%s: cannot write: %s", path, strerror(-rc));
	}
	return 0;
}

int prs_machine_load(struct prs_machine *m, const char *path, struct prs_err *err)
{
	json_error_t je;
	json_t *j, *key, *all, *one, *at, *ver;
	int rc = 0;

	if (access(path, F_OK) != 0)
		return prs_err_set(err, -ENOENT, "no calibration of this machine (%s): run `pyrsprof "
				   "calibrate`", path);
	j = json_load_file(path, 0, &je);
	if (!j)
		return prs_err_set(err, -EINVAL, "%s: not a calibration file (line %d: %s): run `pyrsprof "
				   "calibrate` again", path, je.line, je.text);
	key = json_object_get(j, "key");
	all = json_object_get(j, "bw_all_mbs");
	one = json_object_get(j, "bw_one_mbs");
	at = json_object_get(j, "calibrated_at");
	ver = json_object_get(j, "version");
	if (!json_is_string(key) || !json_is_number(all) || !json_is_number(one) ||
	    json_number_value(all) <= 0 || json_number_value(one) <= 0 || !json_is_integer(ver)) {
		rc = prs_err_set(err, -EINVAL, "%s: malformed calibration: run `pyrsprof calibrate` again",
				 path);
	} else if (json_integer_value(ver) != CACHE_VERSION || strcmp(json_string_value(key), m->key)) {
		rc = prs_err_set(err, -ESTALE, "%s: calibrated on another machine (%s): run `pyrsprof "
				 "calibrate` again", path, json_string_value(key));
	} else {
		m->calibrated = true;
		m->bw_all_mbs = json_number_value(all);
		m->bw_one_mbs = json_number_value(one);
		m->calibrated_at = json_is_integer(at) ? (int64_t)json_integer_value(at) : 0;
	}
	json_decref(j);
	return rc;
}

void prs_machine_to_acct(const struct prs_machine *m, struct prs_acct *out)
{
	prs_acct_init(out, PRS_ACCT_MACHINE, PRS_PHASE_START, 0);
	prs_acct_set(out, PRS_MACH_CPUS_ONLINE, m->cpus_online);
	prs_acct_set(out, PRS_MACH_CPUS_ALLOWED, m->cpus_allowed);
	prs_acct_set(out, PRS_MACH_L1D_BYTES, m->l1d_bytes);
	prs_acct_set(out, PRS_MACH_L2_BYTES, m->l2_bytes);
	prs_acct_set(out, PRS_MACH_LLC_BYTES, m->llc_bytes);
	prs_acct_set(out, PRS_MACH_MEM_BYTES, m->mem_bytes);
	prs_acct_set(out, PRS_MACH_PAGE_SIZE, m->page_size);
	prs_acct_set(out, PRS_MACH_CLK_TCK, (uint64_t)m->clk_tck);
	prs_acct_set(out, PRS_MACH_PARANOID_PLUS1, (uint64_t)(m->paranoid + 1));
	prs_acct_set(out, PRS_MACH_PMU, (uint64_t)m->pmu);
	prs_acct_set(out, PRS_MACH_PMU_ERRNO, (uint64_t)m->pmu_errno);
	prs_acct_set(out, PRS_MACH_TOPDOWN, (uint64_t)m->topdown);
	if (m->calibrated) {
		prs_acct_set(out, PRS_MACH_BW_ALL_MBS, (uint64_t)(m->bw_all_mbs + 0.5));
		prs_acct_set(out, PRS_MACH_BW_ONE_MBS, (uint64_t)(m->bw_one_mbs + 0.5));
		prs_acct_set(out, PRS_MACH_CALIBRATED_AT, (uint64_t)m->calibrated_at);
	}
	prs_acct_str(out, m->model);
	prs_acct_str(out, m->key);
	prs_acct_str(out, m->pmu_why);
}

void prs_machine_from_acct(const struct prs_acct *a, struct prs_machine *m)
{
	uint64_t v;

	memset(m, 0, sizeof(*m));
	m->cpus_online = (unsigned)prs_acct_val(a, PRS_MACH_CPUS_ONLINE, 0);
	m->cpus_allowed = (unsigned)prs_acct_val(a, PRS_MACH_CPUS_ALLOWED, m->cpus_online);
	m->l1d_bytes = prs_acct_val(a, PRS_MACH_L1D_BYTES, 0);
	m->l2_bytes = prs_acct_val(a, PRS_MACH_L2_BYTES, 0);
	m->llc_bytes = prs_acct_val(a, PRS_MACH_LLC_BYTES, 0);
	m->mem_bytes = prs_acct_val(a, PRS_MACH_MEM_BYTES, 0);
	m->page_size = (unsigned)prs_acct_val(a, PRS_MACH_PAGE_SIZE, 4096);
	m->clk_tck = (long)prs_acct_val(a, PRS_MACH_CLK_TCK, 100);
	m->paranoid = (int)prs_acct_val(a, PRS_MACH_PARANOID_PLUS1, 3) - 1;
	m->pmu = (int)prs_acct_val(a, PRS_MACH_PMU, PRS_PMU_UNKNOWN);
	m->pmu_errno = (int)prs_acct_val(a, PRS_MACH_PMU_ERRNO, 0);
	m->topdown = (int)prs_acct_val(a, PRS_MACH_TOPDOWN, 0);
	if (prs_acct_get(a, PRS_MACH_BW_ALL_MBS, &v) && v) {
		m->calibrated = true;
		m->bw_all_mbs = (double)v;
		m->bw_one_mbs = (double)prs_acct_val(a, PRS_MACH_BW_ONE_MBS, 0);
		m->calibrated_at = (int64_t)prs_acct_val(a, PRS_MACH_CALIBRATED_AT, 0);
	}
	snprintf(m->model, sizeof(m->model), "%s", a->nstr > 0 ? a->str[0] : "");
	snprintf(m->key, sizeof(m->key), "%s", a->nstr > 1 ? a->str[1] : "");
	snprintf(m->pmu_why, sizeof(m->pmu_why), "%s", a->nstr > 2 ? a->str[2] : "");
}
