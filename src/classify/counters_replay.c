/* SPDX-License-Identifier: MIT */
/*
 * The replay backend: counter readings recorded as JSON (format in counters.h and
 * docs/classify.md), read with jansson. The file is input like any other: every field is checked
 * for its type and range, names are cut to PRS_COUNTER_NAME - 1 bytes, at most PRS_MAX_COUNTERS
 * counters are kept, and a malformed file fails with one line saying what is wrong.
 */
#include "pyrsprof/counters.h"

#include <errno.h>
#include <jansson.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/banned.h"

struct replay_ctx {
	struct prs_counter_set set;
	struct prs_perf_who who; /* the recorded machine's (paranoid, privileged, seccomp) */
};

static const struct {
	const char *name;
	int e;
} errnos[] = {
	{ "ENOENT", ENOENT }, { "EOPNOTSUPP", EOPNOTSUPP }, { "EACCES", EACCES }, { "EPERM", EPERM },
	{ "EINVAL", EINVAL }, { "EMFILE", EMFILE }, { "ESRCH", ESRCH }, { "ENODEV", ENODEV },
	{ "E2BIG", E2BIG }, { "EBUSY", EBUSY },
};

static int errno_of(json_t *v)
{
	if (json_is_integer(v) && json_integer_value(v) > 0 && json_integer_value(v) < 4096)
		return (int)json_integer_value(v);
	if (json_is_string(v))
		for (size_t i = 0; i < sizeof(errnos) / sizeof(errnos[0]); i++)
			if (strcmp(json_string_value(v), errnos[i].name) == 0)
				return errnos[i].e;
	return 0;
}

static bool u64_of(json_t *o, const char *key, uint64_t *out)
{
	json_t *v = json_object_get(o, key);

	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return false;
	*out = (uint64_t)json_integer_value(v);
	return true;
}

static const char *const software[] = { "task-clock", "context-switches", "cpu-migrations",
					"page-faults", "minor-faults", "major-faults" };

static bool is_software(const char *name)
{
	for (size_t i = 0; i < sizeof(software) / sizeof(software[0]); i++)
		if (strcmp(name, software[i]) == 0)
			return true;
	return false;
}

static int parse_counter(struct replay_ctx *x, json_t *o, size_t i, const char *path,
			 struct prs_err *err)
{
	json_t *name = json_object_get(o, "name"), *hw = json_object_get(o, "hardware");
	json_t *ev = json_object_get(o, "errno"), *grp = json_object_get(o, "group");
	struct prs_counter *c;
	bool hardware;

	if (!json_is_object(o) || !json_is_string(name) || !json_string_value(name)[0])
		return prs_err_set(err, -EINVAL, "%s: counters[%zu] has no name", path, i);
	hardware = json_is_boolean(hw) ? json_is_true(hw) : !is_software(json_string_value(name));
	c = prs_counter_add(&x->set, json_string_value(name),
			    json_is_integer(grp) ? (int)json_integer_value(grp) : hardware,
			    hardware ? PERF_TYPE_HARDWARE : PERF_TYPE_SOFTWARE, 0, hardware);
	if (!c)
		return prs_err_set(err, -EINVAL, "%s: more than %d counters", path, PRS_MAX_COUNTERS);
	if (ev) {
		int e = errno_of(ev);

		if (!e)
			return prs_err_set(err, -EINVAL, "%s: counters[%zu] (%s): bad errno", path, i, c->name);
		c->err = -e;
		prs_counter_explain(c, e, &x->who, c->why, sizeof(c->why));
		return 0;
	}
	if (!u64_of(o, "value", &c->value) || !u64_of(o, "enabled_ns", &c->enabled_ns) ||
	    !u64_of(o, "running_ns", &c->running_ns) || c->running_ns > c->enabled_ns)
		return prs_err_set(err, -EINVAL,
				   "%s: counters[%zu] (%s) needs value, enabled_ns and running_ns "
				   "(non-negative integers, running <= enabled) or errno", path, i, c->name);
	c->ok = true;
	return 0;
}

static int replay_open(struct prs_counter_backend *b, const pid_t *tids, size_t n,
		       struct prs_counter_set *set, struct prs_err *err)
{
	struct replay_ctx *x = b->ctx;

	(void)tids;
	(void)n;
	(void)err;
	*set = x->set;
	return 0;
}

static int replay_read(struct prs_counter_backend *b, struct prs_counter_set *set)
{
	struct replay_ctx *x = b->ctx;

	*set = x->set;
	return 0;
}

static void replay_free(struct prs_counter_backend *b)
{
	free(b->ctx);
	free(b);
}

static int topdown_of(json_t *v)
{
	const char *s = json_is_string(v) ? json_string_value(v) : "none";

	if (strcmp(s, "intel") == 0)
		return PRS_TOPDOWN_INTEL;
	if (strcmp(s, "amd-zen4") == 0)
		return PRS_TOPDOWN_AMD_ZEN4;
	if (strcmp(s, "amd-zen5") == 0)
		return PRS_TOPDOWN_AMD_ZEN5;
	return strcmp(s, "none") == 0 ? PRS_TOPDOWN_NONE : -1;
}

struct prs_counter_backend *prs_counter_replay_new(const char *path, struct prs_err *err)
{
	struct prs_counter_backend *b = NULL;
	struct replay_ctx *x = NULL;
	json_error_t je;
	json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &je), *arr, *par;
	size_t i;

	if (!root) {
		prs_err_set(err, -EINVAL, "%s: not a counter replay file (line %d: %s)", path, je.line,
			    je.text);
		return NULL;
	}
	arr = json_object_get(root, "counters");
	par = json_object_get(root, "paranoid");
	b = calloc(1, sizeof(*b));
	x = calloc(1, sizeof(*x));
	if (!b || !x) {
		prs_err_set(err, -ENOMEM, "%s: out of memory", path);
		goto fail;
	}
	if (!json_is_array(arr)) {
		prs_err_set(err, -EINVAL, "%s: no \"counters\" array", path);
		goto fail;
	}
	b->topdown = topdown_of(json_object_get(root, "topdown"));
	if (b->topdown < 0) {
		prs_err_set(err, -EINVAL, "%s: \"topdown\" is none, intel, amd-zen4 or amd-zen5", path);
		goto fail;
	}
	x->who.paranoid = json_is_integer(par) ? (int)json_integer_value(par) : 2;
	/* who recorded it: "privileged" (CAP_PERFMON), "seccomp" (under a filter); default false */
	x->who.privileged = json_is_true(json_object_get(root, "privileged"));
	x->who.seccomp = json_is_true(json_object_get(root, "seccomp"));
	for (i = 0; i < json_array_size(arr); i++)
		if (parse_counter(x, json_array_get(arr, i), i, path, err))
			goto fail;
	json_decref(root);
	b->name = "replay";
	b->open = replay_open;
	b->read = replay_read;
	b->free = replay_free;
	b->ctx = x;
	return b;
fail:
	json_decref(root);
	free(x);
	free(b);
	return NULL;
}
