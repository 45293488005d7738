/* SPDX-License-Identifier: MIT */
/*
 * The size of profile.pyrs per sample, as the sampler writes it: `pyrs_size IN.pyrs...` re-records
 * each profile through the recorder, adding its samples in time order and flushing at every
 * second of sample time, as the sampler does, and prints the bytes per sample. The same input
 * through two builds of the writer compares their framing on real data.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pyrsprof/profile.h"

#include "util/banned.h"

/* ids of `in` -> ids in `out`, made on first use so that they reach the file with their samples */
struct copy {
	const struct prs_profile *in;
	struct prs_profile *out;
	uint32_t *str, *map, *frame, *stack; /* id + 1, 0 = not yet */
};

static uint32_t cp_str(struct copy *c, uint32_t s)
{
	if (!c->str[s])
		c->str[s] = prs_profile_string(c->out, c->in->strings[s], c->in->string_lens[s]) + 1;
	return c->str[s] - 1;
}

static uint32_t cp_frame(struct copy *c, uint32_t f)
{
	const struct prs_frame *fr = &c->in->frames[f];

	if (c->frame[f])
		return c->frame[f] - 1;
	if (fr->raw) {
		uint32_t m = PRS_NO_MAPPING;

		if (fr->mapping != PRS_NO_MAPPING) {
			if (!c->map[fr->mapping]) {
				struct prs_mapping mm = c->in->mappings[fr->mapping];

				mm.path = cp_str(c, mm.path);
				c->map[fr->mapping] = prs_profile_mapping(c->out, &mm) + 1;
			}
			m = c->map[fr->mapping] - 1;
		}
		c->frame[f] = prs_profile_raw_frame(c->out, m, fr->addr, fr->activation) + 1;
	} else {
		c->frame[f] = prs_profile_named_frame(c->out, fr->kind, cp_str(c, fr->name),
						      cp_str(c, fr->file), fr->line) + 1;
	}
	return c->frame[f] - 1;
}

static uint32_t cp_stack(struct copy *c, uint32_t s)
{
	if (s == 0)
		return 0;
	if (!c->stack[s]) {
		uint32_t parent = cp_stack(c, c->in->stacks[s].parent);

		c->stack[s] = prs_profile_stack(c->out, parent, cp_frame(c, c->in->stacks[s].frame)) + 1;
	}
	return c->stack[s] - 1;
}

static int by_time(const void *a, const void *b)
{
	const struct prs_sample *x = a, *y = b;

	return x->time_ns < y->time_ns ? -1 : x->time_ns > y->time_ns;
}

static int one(const char *path)
{
	struct prs_profile *in;
	struct prs_recorder *r;
	struct prs_err err;
	struct prs_sample *v;
	struct copy c;
	char warn[512], out[64];
	uint64_t next_flush = 1000000000ull;
	unsigned flushes = 0;
	struct stat st;

	if (prs_pyrs_read(path, &in, warn, sizeof(warn), &err)) {
		fprintf(stderr, "pyrs_size: %s\n", err.msg);
		return 1;
	}
	snprintf(out, sizeof(out), "/tmp/pyrs_size.%d.pyrs", (int)getpid());
	if (prs_recorder_open(out, &r, &err)) {
		fprintf(stderr, "pyrs_size: %s\n", err.msg);
		return 1;
	}
	memset(&c, 0, sizeof(c));
	c.in = in;
	c.out = prs_recorder_profile(r);
	c.str = calloc(in->nstrings, sizeof(*c.str));
	c.map = calloc(in->nmappings + 1, sizeof(*c.map));
	c.frame = calloc(in->nframes + 1, sizeof(*c.frame));
	c.stack = calloc(in->nstacks, sizeof(*c.stack));
	v = malloc((in->nsamples + 1) * sizeof(*v));
	if (!c.str || !c.map || !c.frame || !c.stack || !v)
		return 1;
	for (uint32_t i = 0; i < in->nmeta; i++)
		prs_profile_meta(c.out, in->strings[in->meta[i].key], in->strings[in->meta[i].value]);
	for (uint32_t i = 0; i < in->nthreads; i++)
		prs_profile_thread(c.out, in->threads[i].tid, cp_str(&c, in->threads[i].name));
	memcpy(v, in->samples, in->nsamples * sizeof(*v));
	qsort(v, in->nsamples, sizeof(*v), by_time);
	for (size_t i = 0; i < in->nsamples; i++) {
		struct prs_sample s = v[i];

		while (s.time_ns >= next_flush) {
			if (prs_recorder_flush(r, &err))
				return 1;
			flushes++;
			next_flush += 1000000000ull;
		}
		s.stack = cp_stack(&c, s.stack);
		if (prs_profile_sample(c.out, &s))
			return 1;
	}
	if (prs_recorder_close(r, NULL, &err))
		return 1;
	stat(out, &st);
	printf("%-40s %10zu samples %9lld bytes %6.3f bytes/sample (%u flushes)\n", path,
	       in->nsamples, (long long)st.st_size, (double)st.st_size / (double)in->nsamples, flushes);
	unlink(out);
	prs_profile_free(in);
	free(v);
	free(c.str);
	free(c.map);
	free(c.frame);
	free(c.stack);
	return 0;
}

int main(int argc, char **argv)
{
	int rc = 0;

	for (int i = 1; i < argc; i++)
		rc |= one(argv[i]);
	return rc;
}
