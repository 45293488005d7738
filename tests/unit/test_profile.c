/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for the profile model and profile.pyrs: interning, the stack trie and expansions,
 * labels and off-CPU leaves; the recorder + reader round trip (every array compared), truncation
 * at every byte offset (damaged files: test_pyrs_damage.c), empty / foreign / newer-version files, hand-made hostile
 * records (the truth is the record the test wrote), and a randomized round trip with a seed
 * (PRS_TEST_SEED=N to replay one).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#include "pyrsprof/export.h"
#include "pyrsprof/profile.h"
#include "pyrsprof/util.h"

#include "unit_tmpdir.h"

#include "util/banned.h"

static uint32_t S(struct prs_profile *p, const char *s)
{
	return prs_profile_string(p, s, strlen(s));
}

/* Every invariant profile.h promises to readers of the arrays. */
static void check_invariants(const struct prs_profile *p)
{
	uint32_t i;
	size_t k;

	cr_assert_geq(p->nstrings, 1);
	cr_assert_str_eq(p->strings[0], "");
	for (i = 0; i < p->nstrings; i++)
		cr_assert_eq(strlen(p->strings[i]), p->string_lens[i]);
	for (i = 0; i < p->nmappings; i++) {
		cr_assert_lt(p->mappings[i].path, p->nstrings);
		cr_assert_leq(p->mappings[i].build_id_len, PRS_BUILD_ID_MAX);
	}
	for (i = 0; i < p->nframes; i++) {
		const struct prs_frame *f = &p->frames[i];

		cr_assert(f->mapping == PRS_NO_MAPPING || f->mapping < p->nmappings);
		cr_assert_lt(f->name, p->nstrings);
		cr_assert_lt(f->file, p->nstrings);
		if (p->expansions && p->expansions[i].count) {
			cr_assert_leq((uint64_t)p->expansions[i].first + p->expansions[i].count, p->nexpand_ids);
			for (k = 0; k < p->expansions[i].count; k++) {
				uint32_t e = p->expand_ids[p->expansions[i].first + k];

				cr_assert_lt(e, p->nframes);
				cr_assert(!p->frames[e].raw);
			}
		}
	}
	cr_assert_geq(p->nstacks, 1);
	cr_assert_eq(p->stacks[0].depth, 0);
	for (i = 1; i < p->nstacks; i++) {
		cr_assert_lt(p->stacks[i].parent, i);
		cr_assert_lt(p->stacks[i].frame, p->nframes);
		cr_assert_eq(p->stacks[i].depth, p->stacks[p->stacks[i].parent].depth + 1);
	}
	for (k = 0; k < p->nsamples; k++)
		cr_assert_lt(p->samples[k].stack, p->nstacks);
	for (i = 0; i < p->nthreads; i++) {
		cr_assert_lt(p->threads[i].name, p->nstrings);
		cr_assert_geq(p->threads[i].pid, 0);
	}
	for (k = 0; k < p->nsamples; k++)
		cr_assert_geq(p->samples[k].pid, 0);
	for (i = 0; i < p->nprocesses; i++) {
		cr_assert_gt(p->processes[i].pid, 0);
		cr_assert_geq(p->processes[i].ppid, 0);
		cr_assert_lt(p->processes[i].command, p->nstrings);
	}
	for (i = 0; i < p->nmeta; i++) {
		cr_assert_lt(p->meta[i].key, p->nstrings);
		cr_assert_lt(p->meta[i].value, p->nstrings);
	}
}

static void assert_same_profile(const struct prs_profile *a, const struct prs_profile *b)
{
	uint32_t i;
	size_t k;

	cr_assert_eq(a->nstrings, b->nstrings);
	for (i = 0; i < a->nstrings; i++) {
		cr_assert_eq(a->string_lens[i], b->string_lens[i]);
		cr_assert_eq(memcmp(a->strings[i], b->strings[i], a->string_lens[i] + 1), 0);
	}
	cr_assert_eq(a->nmappings, b->nmappings);
	for (i = 0; i < a->nmappings; i++) {
		const struct prs_mapping *x = &a->mappings[i], *y = &b->mappings[i];

		cr_assert(x->start == y->start && x->end == y->end && x->offset == y->offset &&
			  x->path == y->path && x->pid == y->pid && x->build_id_len == y->build_id_len);
		cr_assert_eq(memcmp(x->build_id, y->build_id, x->build_id_len), 0);
	}
	cr_assert_eq(a->nframes, b->nframes);
	for (i = 0; i < a->nframes; i++) {
		const struct prs_frame *x = &a->frames[i], *y = &b->frames[i];

		cr_assert(x->kind == y->kind && x->activation == y->activation && x->raw == y->raw &&
			  x->mapping == y->mapping && x->addr == y->addr && x->name == y->name &&
			  x->file == y->file && x->line == y->line, "frame %u", i);
	}
	cr_assert_eq(a->nstacks, b->nstacks);
	for (i = 0; i < a->nstacks; i++)
		cr_assert(a->stacks[i].parent == b->stacks[i].parent &&
			  a->stacks[i].frame == b->stacks[i].frame && a->stacks[i].depth == b->stacks[i].depth);
	cr_assert_eq(a->nsamples, b->nsamples);
	for (k = 0; k < a->nsamples; k++) {
		const struct prs_sample *x = &a->samples[k], *y = &b->samples[k];

		cr_assert(x->time_ns == y->time_ns && x->tid == y->tid && x->state == y->state &&
			  x->syscall == y->syscall && x->stack == y->stack && x->weight == y->weight &&
			  x->flags == y->flags && x->pid == y->pid, "sample %zu", k);
	}
	cr_assert_eq(a->nthreads, b->nthreads);
	for (i = 0; i < a->nthreads; i++)
		cr_assert(a->threads[i].tid == b->threads[i].tid && a->threads[i].name == b->threads[i].name &&
			  a->threads[i].pid == b->threads[i].pid);
	cr_assert_eq(a->nprocesses, b->nprocesses);
	for (i = 0; i < a->nprocesses; i++)
		cr_assert(a->processes[i].pid == b->processes[i].pid &&
			  a->processes[i].ppid == b->processes[i].ppid &&
			  a->processes[i].command == b->processes[i].command &&
			  a->processes[i].time_ns == b->processes[i].time_ns, "process %u", i);
	cr_assert_eq(a->nmeta, b->nmeta);
	for (i = 0; i < a->nmeta; i++)
		cr_assert(a->meta[i].key == b->meta[i].key && a->meta[i].value == b->meta[i].value);
	/* expansions compared by content (a replaced expansion leaves a dead range in expand_ids) */
	cr_assert_eq(!a->expansions, !b->expansions);
	for (i = 0; a->expansions && i < a->nframes; i++) {
		const struct prs_expansion *x = &a->expansions[i], *y = &b->expansions[i];

		cr_assert_eq(x->count, y->count, "expansion of frame %u", i);
		if (x->count)
			cr_assert_eq(memcmp(a->expand_ids + x->first, b->expand_ids + y->first,
				    x->count * sizeof(uint32_t)), 0);
	}
}

/* ---- the model ---- */

Test(profile, interning)
{
	struct prs_profile *p = prs_profile_new();
	struct prs_mapping m = { .start = 0x1000, .end = 0x9000, .offset = 0x2000 };
	uint32_t a, b, mp, f1, f2, f3, n1, s1, s2, s3;

	cr_assert_not_null(p);
	cr_assert_eq(p->nstrings, 1);
	cr_assert_eq(p->nstacks, 1);
	cr_assert_eq(S(p, ""), 0);
	a = S(p, "main");
	b = S(p, "work");
	cr_assert_neq(a, b);
	cr_assert_eq(S(p, "main"), a);
	cr_assert_eq(prs_profile_string(p, "main\0junk", 9), a); /* cut at the NUL */
	cr_assert_eq(prs_profile_string(p, "mainly", 4), a);
	m.path = S(p, "/usr/lib/libc.so.6");
	m.build_id_len = 3;
	memcpy(m.build_id, "\x01\x02\x03", 3);
	mp = prs_profile_mapping(p, &m);
	cr_assert_eq(mp, 0);
	cr_assert_eq(prs_profile_mapping(p, &m), mp);
	m.build_id[2] = 4;
	cr_assert_eq(prs_profile_mapping(p, &m), 1);
	f1 = prs_profile_raw_frame(p, mp, 0x1500, false);
	f2 = prs_profile_raw_frame(p, mp, 0x1500, true);
	f3 = prs_profile_raw_frame(p, PRS_NO_MAPPING, 0x1500, false);
	cr_assert(f1 != f2 && f2 != f3 && f1 != f3);
	cr_assert_eq(prs_profile_raw_frame(p, mp, 0x1500, false), f1);
	cr_assert_eq(prs_profile_raw_frame(p, 77, 0x1500, false), UINT32_MAX);
	n1 = prs_profile_named_frame(p, PRS_KIND_PYTHON, a, b, 12);
	cr_assert_eq(prs_profile_named_frame(p, PRS_KIND_PYTHON, a, b, 12), n1);
	cr_assert_neq(prs_profile_named_frame(p, PRS_KIND_PYTHON, a, b, 13), n1);
	cr_assert_neq(prs_profile_named_frame(p, PRS_KIND_NATIVE, a, b, 12), n1);
	cr_assert_eq(prs_profile_named_frame(p, PRS_KIND_PYTHON, 999, b, 12), UINT32_MAX);
	s1 = prs_profile_stack(p, 0, n1);
	s2 = prs_profile_stack(p, s1, f1);
	s3 = prs_profile_stack(p, 0, f1);
	cr_assert(s1 && s2 && s3 && s1 != s2 && s2 != s3);
	cr_assert_eq(prs_profile_stack(p, s1, f1), s2);
	cr_assert_eq(p->stacks[s2].depth, 2);
	cr_assert_eq(p->stacks[s2].parent, s1);
	cr_assert_eq(prs_profile_stack(p, 50, f1), UINT32_MAX);
	cr_assert_eq(prs_profile_stack(p, 0, 5000), UINT32_MAX);
	cr_assert_eq(prs_profile_sample(p, &(struct prs_sample){ .stack = 99 }), -EINVAL);
	cr_assert_eq(prs_profile_sample(p, &(struct prs_sample){ .stack = s2, .weight = 1 }), 0);
	cr_assert_eq(prs_profile_meta(p, "command", "./t --n 3"), 0);
	cr_assert_str_eq(prs_profile_meta_get(p, "command"), "./t --n 3");
	cr_assert_null(prs_profile_meta_get(p, "nope"));
	cr_assert_eq(prs_profile_thread(p, 42, S(p, "worker")), 0);
	cr_assert_eq(prs_profile_thread(p, 42, 12345), -EINVAL);
	check_invariants(p);
	prs_profile_free(p);
	prs_profile_free(NULL);
}

/*
 * Strings live in shared blocks (a long one in a block of its own): every string keeps its own
 * bytes and NUL whatever its length, and interning finds each again. 20,000 short strings fill
 * several blocks; 20 KB, 70 KB and 1 MiB ones (the longest kept) fall between them.
 */
/* String i of the test below: "i:" and 0-96 letters (distinct, 2-102 bytes). */
static void block_string(char *buf, size_t i)
{
	size_t at = (size_t)snprintf(buf, 16, "%zu:", i);

	for (size_t k = 0; k < i % 97; k++)
		buf[at++] = (char)('a' + (i + k) % 26);
	buf[at] = '\0';
}

Test(profile, strings_in_blocks_keep_their_bytes)
{
	static const size_t longs[] = { 20000, 70000, 1u << 20 };
	struct prs_profile *p = prs_profile_new();
	char *buf = malloc((1u << 20) + 1);
	uint32_t ids[20000 + 3];
	size_t n = 0;

	cr_assert(p && buf);
	for (size_t i = 0; i < 20000; i++) {
		block_string(buf, i);
		cr_assert_neq(ids[n++] = prs_profile_string(p, buf, strlen(buf)), UINT32_MAX);
		if (i % 7000 == 0) {
			size_t l = longs[i / 7000];

			memset(buf, 'A' + (int)(i / 7000), l);
			cr_assert_neq(ids[n++] = prs_profile_string(p, buf, l), UINT32_MAX);
		}
	}
	n = 0;
	for (size_t i = 0; i < 20000; i++) {
		uint32_t id = ids[n++];

		block_string(buf, i);
		cr_assert_eq(p->string_lens[id], strlen(buf), "string %u", id);
		cr_assert_str_eq(p->strings[id], buf, "string %u", id);
		cr_assert_eq(prs_profile_string(p, buf, strlen(buf)), id);
		if (i % 7000 == 0) {
			size_t l = longs[i / 7000];

			id = ids[n++];
			memset(buf, 'A' + (int)(i / 7000), l);
			buf[l] = '\0';
			cr_assert_eq(p->string_lens[id], l);
			cr_assert_eq(memcmp(p->strings[id], buf, l + 1), 0, "long string %u", id);
			cr_assert_eq(prs_profile_string(p, buf, l), id);
		}
	}
	free(buf);
	prs_profile_free(p);
}

Test(profile, warm_interning_allocates_nothing)
{
	struct prs_profile *p = prs_profile_new();
	struct prs_mapping m = { .start = 0x400000, .end = 0x800000 };
	uint32_t stack = 0, i, round, ids[30];
	size_t before;

	m.path = S(p, "/bin/t");
	m.path = prs_profile_mapping(p, &m) == 0 ? m.path : m.path;
	for (i = 0; i < 30; i++) {
		ids[i] = prs_profile_raw_frame(p, 0, 0x400000 + i * 16, i == 29);
		stack = prs_profile_stack(p, stack, ids[i]);
	}
	before = mallinfo2().uordblks;
	for (round = 0; round < 2000; round++) {
		uint32_t s = 0;

		for (i = 0; i < 30; i++)
			s = prs_profile_stack(p, s, prs_profile_raw_frame(p, 0, 0x400000 + i * 16, i == 29));
		cr_assert_eq(s, stack);
	}
	cr_assert_eq(mallinfo2().uordblks, before, "warm interning allocated memory");
	cr_assert_eq(p->nstacks, 31);
	cr_assert_eq(p->nframes, 30);
	prs_profile_free(p);
}

Test(profile, stack_frames_and_expansions)
{
	struct prs_profile *p = prs_profile_new();
	struct prs_mapping m = { .start = 0x1000, .end = 0x9000, .offset = 0x2000 };
	uint32_t A, B, X, Y, R, st, out[8], ex[2];
	size_t n;

	m.path = S(p, "/usr/lib/libc.so.6");
	prs_profile_mapping(p, &m);
	A = prs_profile_named_frame(p, PRS_KIND_PYTHON, S(p, "A"), 0, 0);
	B = prs_profile_named_frame(p, PRS_KIND_PYTHON, S(p, "B"), 0, 0);
	R = prs_profile_raw_frame(p, 0, 0x1500, false);
	X = prs_profile_named_frame(p, PRS_KIND_RUST, S(p, "X"), 0, 0);
	Y = prs_profile_named_frame(p, PRS_KIND_RUST, S(p, "Y"), 0, 0);
	st = prs_profile_stack(p, prs_profile_stack(p, prs_profile_stack(p, 0, A), R), B);
	n = prs_profile_stack_frames(p, st, out, 8);
	cr_assert_eq(n, 3);
	cr_assert(out[0] == A && out[1] == R && out[2] == B);
	ex[0] = X;
	ex[1] = Y;
	cr_assert_eq(prs_profile_expand(p, R, ex, 2), 0);
	cr_assert_eq(prs_profile_expand(p, R, &R, 1), -EINVAL); /* raw frames cannot expand into raw */
	n = prs_profile_stack_frames(p, st, out, 8);
	cr_assert_eq(n, 4);
	cr_assert(out[0] == A && out[1] == X && out[2] == Y && out[3] == B);
	/* too small: the root side is kept */
	n = prs_profile_stack_frames(p, st, out, 2);
	cr_assert_eq(n, 2);
	cr_assert(out[0] == A && out[1] == X);
	cr_assert_eq(prs_profile_stack_frames(p, 0, out, 8), 0);
	cr_assert_eq(prs_profile_stack_frames(p, 999, out, 8), 0);
	/* frames added after an expansion have none */
	cr_assert_eq(p->expansions[prs_profile_named_frame(p, PRS_KIND_PYTHON, S(p, "C"), 0, 0)].count, 0);
	check_invariants(p);
	prs_profile_free(p);
}

Test(profile, labels)
{
	struct prs_profile *p = prs_profile_new();
	struct prs_mapping m = { .start = 0x1000, .end = 0x9000, .offset = 0x2000 };
	char buf[64], small[6];
	uint32_t f;

	m.path = S(p, "/usr/lib/libc.so.6");
	prs_profile_mapping(p, &m);
	f = prs_profile_raw_frame(p, 0, 0x1500, false);
	cr_assert_str_eq(prs_profile_frame_label(p, f, buf, sizeof(buf)), "libc.so.6+0x2500");
	f = prs_profile_raw_frame(p, PRS_NO_MAPPING, 0x1500, false);
	cr_assert_str_eq(prs_profile_frame_label(p, f, buf, sizeof(buf)), "[unknown]");
	f = prs_profile_named_frame(p, PRS_KIND_PYTHON, S(p, "compute"), S(p, "app.py"), 3);
	cr_assert_str_eq(prs_profile_frame_label(p, f, buf, sizeof(buf)), "compute");
	cr_assert_str_eq(prs_profile_frame_label(p, f, small, sizeof(small)), "compu");
	f = prs_profile_named_frame(p, PRS_KIND_NATIVE, 0, 0, 0);
	cr_assert_str_eq(prs_profile_frame_label(p, f, buf, sizeof(buf)), "[unknown]");
	prs_profile_free(p);
}

Test(profile, offcpu_leaves)
{
	struct prs_profile *p = prs_profile_new();
	struct prs_sample s = { .state = PRS_STATE_BLOCKED, .syscall = 230 };
	enum prs_kind k;
	char buf[48];
	uint32_t f;

	cr_assert_eq(prs_profile_offcpu_label(&s, buf, sizeof(buf), &k), 1);
	cr_assert_str_eq(buf, "[clock_nanosleep]");
	cr_assert_eq(k, PRS_KIND_OFF_SLEEP);
	f = prs_profile_offcpu_frame(p, &s);
	cr_assert_neq(f, UINT32_MAX);
	cr_assert_eq(prs_profile_offcpu_frame(p, &s), f);
	cr_assert_eq(p->frames[f].kind, PRS_KIND_OFF_SLEEP);
	cr_assert_str_eq(p->strings[p->frames[f].name], "[clock_nanosleep]");
	s.syscall = 0;
	prs_profile_offcpu_label(&s, buf, sizeof(buf), &k);
	cr_assert_str_eq(buf, "[read]");
	cr_assert_eq(k, PRS_KIND_OFF_IO);
	s.syscall = 202;
	prs_profile_offcpu_label(&s, buf, sizeof(buf), &k);
	cr_assert_str_eq(buf, "[futex]");
	cr_assert_eq(k, PRS_KIND_OFF_LOCK);
	s.syscall = 999;
	prs_profile_offcpu_label(&s, buf, sizeof(buf), &k);
	cr_assert_str_eq(buf, "[syscall 999]");
	cr_assert_eq(k, PRS_KIND_OFF_OTHER);
	s.state = PRS_STATE_DISK;
	s.syscall = -1;
	prs_profile_offcpu_label(&s, buf, sizeof(buf), &k);
	cr_assert_str_eq(buf, "[disk wait]");
	cr_assert_eq(k, PRS_KIND_OFF_IO);
	s.state = PRS_STATE_RUNNING;
	cr_assert_eq(prs_profile_offcpu_label(&s, buf, sizeof(buf), &k), 0);
	cr_assert_eq(prs_profile_offcpu_frame(p, &s), UINT32_MAX);
	prs_profile_free(p);
}

/* ---- .pyrs ---- */

static char *read_all(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *d;
	long n;

	cr_assert_not_null(f);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	d = malloc((size_t)n + 1);
	cr_assert_eq(fread(d, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	*len = (size_t)n;
	return d;
}

/* Records a small profile with three flushes; returns the profile handed back by close. */
static struct prs_profile *record_small(const char *path)
{
	struct prs_recorder *r;
	struct prs_profile *p, *out;
	struct prs_mapping m = { .start = 0x7f0000001000, .end = 0x7f0000009000, .offset = 0x1000 };
	struct prs_err err;
	uint32_t fr[6], st = 0, i, ex[2];

	cr_assert_eq(prs_recorder_open(path, &r, &err), 0, "%s", err.msg);
	p = prs_recorder_profile(r);
	cr_assert_eq(prs_profile_meta(p, "command", "./target --n 3"), 0);
	m.path = S(p, "/usr/lib/x86_64-linux-gnu/libfoo.so");
	m.build_id_len = 20;
	for (i = 0; i < 20; i++)
		m.build_id[i] = (uint8_t)(i * 13);
	cr_assert_eq(prs_profile_mapping(p, &m), 0);
	for (i = 0; i < 4; i++) {
		fr[i] = prs_profile_raw_frame(p, 0, m.start + 0x100 * i, i == 3);
		st = prs_profile_stack(p, st, fr[i]);
	}
	cr_assert_eq(prs_profile_thread(p, 100, S(p, "main")), 0);
	for (i = 0; i < 5; i++)
		cr_assert_eq(prs_profile_sample(p, &(struct prs_sample){ .time_ns = 1000000 * (i + 1),
			.tid = 100, .state = PRS_STATE_RUNNING, .syscall = -1, .stack = st, .weight = 1 }), 0);
	cr_assert_eq(prs_recorder_flush(r, &err), 0, "%s", err.msg);
	fr[4] = prs_profile_named_frame(p, PRS_KIND_PYTHON, S(p, "compute"), S(p, "app.py"), 17);
	st = prs_profile_stack(p, st, fr[4]);
	cr_assert_eq(prs_profile_thread(p, 101, S(p, "io-worker")), 0);
	for (i = 0; i < 5; i++)
		cr_assert_eq(prs_profile_sample(p, &(struct prs_sample){ .time_ns = 9000000 - i * 10,
			.tid = 101, .state = PRS_STATE_BLOCKED, .syscall = (int16_t)(i ? 0 : 230),
			.stack = st, .weight = 1 + i }), 0);
	cr_assert_eq(prs_recorder_flush(r, &err), 0, "%s", err.msg);
	/* symbolization at the end */
	fr[5] = prs_profile_named_frame(p, PRS_KIND_RUST, S(p, "foo::bar"), S(p, "src/lib.rs"), 40);
	ex[0] = fr[5];
	ex[1] = prs_profile_named_frame(p, PRS_KIND_RUST, S(p, "foo::inlined"), S(p, "src/lib.rs"), 41);
	cr_assert_eq(prs_profile_expand(p, fr[1], ex, 2), 0);
	cr_assert_eq(prs_profile_expand(p, fr[2], ex, 1), 0);
	cr_assert_eq(prs_profile_meta(p, "duration_ns", "9000000"), 0);
	cr_assert_eq(prs_recorder_close(r, &out, &err), 0, "%s", err.msg);
	return out;
}

static size_t records_of(const struct prs_profile *p)
{
	size_t n = p->nstrings + p->nmappings + p->nframes + p->nstacks + p->nsamples + p->nthreads + p->nmeta;
	uint32_t i;

	for (i = 0; p->expansions && i < p->nframes; i++)
		n += p->expansions[i].count;
	return n;
}

Test(pyrs, round_trip, .init = unit_tmpdir_make, .fini = unit_tmpdir_remove)
{
	char path[128], warn[256];
	struct prs_profile *w, *r;
	struct prs_err err;

	snprintf(path, sizeof(path), "%s/profile.pyrs", unit_tmpdir);
	w = record_small(path);
	check_invariants(w);
	cr_assert(prs_pyrs_sniff(path));
	cr_assert_eq(prs_pyrs_read(path, &r, warn, sizeof(warn), &err), 0, "%s", err.msg);
	cr_assert(r->complete);
	cr_assert_str_eq(warn, "");
	check_invariants(r);
	assert_same_profile(w, r);
	cr_assert_str_eq(prs_profile_meta_get(r, "command"), "./target --n 3");
	cr_assert_str_eq(prs_profile_meta_get(r, "duration_ns"), "9000000");
	cr_assert_eq(r->nsamples, 10);
	cr_assert_eq(r->samples[9].time_ns, 9000000 - 40); /* a negative time delta survives */
	prs_profile_free(w);
	prs_profile_free(r);
}

/* Interning every entry of p again gives its own id (the first of equal ones) and adds nothing. */
static void assert_interns_to_itself(struct prs_profile *p)
{
	uint32_t ns = p->nstrings, nm = p->nmappings, nf = p->nframes, nst = p->nstacks, i;

	for (i = 0; i < ns; i++)
		cr_assert_eq(prs_profile_string(p, p->strings[i], p->string_lens[i]), i, "string %u", i);
	for (i = 0; i < nm; i++)
		cr_assert_eq(prs_profile_mapping(p, &p->mappings[i]), i, "mapping %u", i);
	for (i = 0; i < nf; i++) {
		const struct prs_frame *f = &p->frames[i];
		uint32_t got = f->raw ? prs_profile_raw_frame(p, f->mapping, f->addr, f->activation)
				      : prs_profile_named_frame(p, (enum prs_kind)f->kind, f->name,
								f->file, f->line);

		cr_assert_eq(got, i, "frame %u", i);
	}
	for (i = 1; i < nst; i++)
		cr_assert_eq(prs_profile_stack(p, p->stacks[i].parent, p->stacks[i].frame), i, "stack %u", i);
	cr_assert(p->nstrings == ns && p->nmappings == nm && p->nframes == nf && p->nstacks == nst);
}

/*
 * Readers append without building the interning tables, and the folded reader frees its own at
 * the end (profile-internal.h): the first interning call after that puts the profile's entries
 * in, so that interning finds them and never makes a second id for an entry the profile holds.
 */
Test(pyrs, interning_after_reading, .init = unit_tmpdir_make, .fini = unit_tmpdir_remove)
{
	static const char folded[] = "main;work 2\nmain;rest 1\nother;work 1\n";
	FILE *in = fmemopen((void *)folded, strlen(folded), "r");
	char path[128], warn[256];
	struct prs_profile *w, *r;
	struct prs_err err;
	uint32_t n;

	snprintf(path, sizeof(path), "%s/profile.pyrs", unit_tmpdir);
	w = record_small(path);
	cr_assert_eq(prs_pyrs_read(path, &r, warn, sizeof(warn), &err), 0, "%s", err.msg);
	assert_interns_to_itself(r);
	n = r->nstrings;
	cr_assert_eq(S(r, "a string no profile has"), n);
	cr_assert_eq(S(r, "a string no profile has"), n);
	check_invariants(r);
	prs_profile_free(w);
	prs_profile_free(r);

	cr_assert_eq(prs_folded_read(in, "x", &r, &err), 0, "%s", err.msg);
	fclose(in);
	cr_assert_eq(r->nstacks, 6);
	assert_interns_to_itself(r);
	cr_assert_eq(prs_profile_stack(r, 0, r->stacks[2].frame), 6); /* "work" at the root: new */
	check_invariants(r);
	prs_profile_free(r);
}

Test(pyrs, truncated_at_every_byte, .init = unit_tmpdir_make, .fini = unit_tmpdir_remove)
{
	char path[128], warn[256];
	struct prs_profile *w, *r;
	struct prs_err err;
	size_t len, cut, prev = 0, full;
	char *data;
	int partial_seen = 0;

	snprintf(path, sizeof(path), "%s/profile.pyrs", unit_tmpdir);
	w = record_small(path);
	full = records_of(w);
	data = read_all(path, &len);
	for (cut = 0; cut <= len; cut++) {
		int rc = prs_pyrs_read_mem(data, cut, &r, warn, sizeof(warn), &err);
		size_t got;

		if (cut < 16) {
			cr_assert_eq(rc, -EINVAL, "prefix %zu", cut);
			cr_assert_null(r);
			cr_assert(strstr(err.msg, "not a pyrsprof profile"), "%s", err.msg);
			continue;
		}
		cr_assert_eq(rc, 0, "prefix %zu: %s", cut, err.msg);
		check_invariants(r);
		got = records_of(r);
		cr_assert_geq(got, prev, "prefix %zu recovered fewer records", cut);
		prev = got;
		if (r->complete) {
			cr_assert_eq(got, full, "prefix %zu", cut);
			assert_same_profile(w, r);
		} else {
			cr_assert(strstr(warn, "truncated after") && strstr(warn, "showing what was saved"),
				  "prefix %zu: %s", cut, warn);
			if (r->nsamples > 0 && r->nsamples < 10)
				partial_seen = 1;
		}
		if (cut == len)
			cr_assert(r->complete);
		prs_profile_free(r);
	}
	/* the middle flush makes half the samples readable from a prefix */
	cr_assert(partial_seen, "no prefix recovered part of the samples");
	free(data);
	prs_profile_free(w);
}

static void write_file(const char *path, const void *d, size_t n)
{
	FILE *f = fopen(path, "wb");

	cr_assert_not_null(f);
	cr_assert_eq(fwrite(d, 1, n, f), n);
	fclose(f);
}

Test(pyrs, empty_and_foreign_files, .init = unit_tmpdir_make, .fini = unit_tmpdir_remove)
{
	static const unsigned char png[] = { 0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13,
					     'I', 'H', 'D', 'R', 0, 0, 0, 1 };
	static const char text[] = "main;work;hot 12\nmain;idle 3\n";
	static const struct { const void *d; size_t n; const char *msg; } cases[] = {
		{ "", 0, "empty file" },
		{ png, sizeof(png), "not a pyrsprof profile (bad magic)" },
		{ text, sizeof(text) - 1, "not a pyrsprof profile (bad magic)" },
		{ "PYRS", 4, "not a pyrsprof profile (file too short: 4 bytes)" },
		{ "PYRSPROF\x03\0\0\0\0\0\0\0", 16, "format version 3 is newer" },
		{ "PYRSPROF\0\0\0\0\0\0\0\0", 16, "bad profile format version 0" },
	};
	char path[128], want[256], warn[64];
	struct prs_profile *r;
	struct prs_err err;
	size_t i;

	snprintf(path, sizeof(path), "%s/x.txt", unit_tmpdir);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		write_file(path, cases[i].d, cases[i].n);
		cr_assert_eq(prs_pyrs_read(path, &r, warn, sizeof(warn), &err), -EINVAL, "case %zu", i);
		cr_assert_null(r);
		snprintf(want, sizeof(want), "%s: ", path);
		cr_assert_eq(strncmp(err.msg, want, strlen(want)), 0, "%s", err.msg);
		cr_assert(strstr(err.msg, cases[i].msg), "case %zu: %s", i, err.msg);
	}
	cr_assert_not(prs_pyrs_sniff(path) && 0);
	write_file(path, text, sizeof(text) - 1);
	cr_assert_not(prs_pyrs_sniff(path));
	snprintf(path, sizeof(path), "%s/missing.pyrs", unit_tmpdir);
	cr_assert_eq(prs_pyrs_read(path, &r, NULL, 0, &err), -ENOENT);
	cr_assert(strstr(err.msg, "No such file"), "%s", err.msg);
}

/* ---- hand-made files: the truth is what the test wrote ---- */

/* record types as docs/pyrs-format.md numbers them (deliberately not the implementation's enum) */
enum {
	PRS_REC_STRING = 1, PRS_REC_MAPPING = 2, PRS_REC_FRAME = 3, PRS_REC_STACK = 4, PRS_REC_SAMPLE = 5,
	PRS_REC_THREAD = 6, PRS_REC_END = 9, PRS_REC_PROCESS = 10, PRS_REC_SAMPLES = 20,
};

static void rec(struct prs_buf *b, uint8_t type, const uint64_t *fields, size_t n, const char *bytes)
{
	struct prs_buf pl;
	size_t i;

	prs_buf_init(&pl);
	for (i = 0; i < n; i++)
		prs_buf_put_uleb(&pl, fields[i]);
	if (bytes)
		prs_buf_append(&pl, bytes, strlen(bytes));
	prs_buf_putc(b, type);
	prs_buf_put_uleb(b, pl.len);
	prs_buf_append(b, pl.data, pl.len);
	prs_buf_release(&pl);
}

/* recs as a file of format version `version`, read. */
static int read_records_v(const struct prs_buf *recs, uint8_t version, struct prs_profile **r,
			  char *warn, size_t wsize, struct prs_err *err)
{
	size_t cap = ZSTD_compressBound(recs->len) + 16, n;
	char *file = malloc(cap);
	int rc;

	memcpy(file, "PYRSPROF\x01\0\0\0\0\0\0\0", 16);
	file[8] = (char)version;
	n = ZSTD_compress(file + 16, cap - 16, recs->data, recs->len, 3);
	cr_assert(!ZSTD_isError(n));
	rc = prs_pyrs_read_mem(file, n + 16, r, warn, wsize, err);
	free(file);
	return rc;
}

static int read_records(const struct prs_buf *recs, struct prs_profile **r, char *warn, size_t wsize,
			struct prs_err *err)
{
	return read_records_v(recs, 1, r, warn, wsize, err);
}

/*
 * A process tree: three processes (one of them exec'd), threads and mappings of each, a tid
 * reused by another process within one flush, a sample whose pid is unknown. Everything comes
 * back; and a sample costs no byte for its pid where its THREAD record gives it.
 */
static struct prs_profile *record_tree(const char *path, bool pids)
{
	struct prs_recorder *r;
	struct prs_profile *p, *out;
	struct prs_mapping m = { .start = 0x400000, .end = 0x500000 };
	struct prs_err err;
	uint32_t st, i, sh = 0, py = 0;

	cr_assert_eq(prs_recorder_open(path, &r, &err), 0, "%s", err.msg);
	p = prs_recorder_profile(r);
	m.path = S(p, "/usr/bin/python3");
	m.pid = pids ? 10 : 0;
	prs_profile_mapping(p, &m);
	m.pid = pids ? 11 : 0;
	cr_assert_eq(prs_profile_mapping(p, &m), pids ? 1 : 0); /* process-qualified */
	st = prs_profile_stack(p, 0, prs_profile_raw_frame(p, 0, 0x400100, true));
	if (pids) {
		sh = S(p, "sh -c python3 pool.py");
		py = S(p, "python3 pool.py");
		cr_assert_eq(prs_profile_process(p, 10, 0, sh, 0), 0);
		cr_assert_eq(prs_profile_process(p, 10, 0, py, 5000), 0); /* exec */
		cr_assert_eq(prs_profile_process(p, 10, 0, py, 6000), 0); /* the same: nothing new */
		cr_assert_eq(prs_profile_process(p, 11, 10, py, 7000), 0); /* fork */
		cr_assert_eq(prs_profile_process(p, 12, 10, py, 7000), 0);
		cr_assert_eq(p->nprocesses, 4);
		cr_assert_eq(prs_profile_process(p, 0, 0, py, 0), -EINVAL);
	}
	for (i = 0; i < 3; i++)
		cr_assert_eq(prs_profile_thread_pid(p, pids ? 10 + (int32_t)i : 0, 10 + (int32_t)i,
						    S(p, i ? "worker" : "MainThread")), 0);
	for (i = 0; i < 30; i++)
		cr_assert_eq(prs_profile_sample(p, &(struct prs_sample){ .time_ns = 1000 * i,
			.tid = 10 + (int32_t)(i % 3), .pid = pids ? 10 + (int32_t)(i % 3) : 0,
			.syscall = -1, .stack = st, .weight = 1, .flags = i % 5 ? 0 : PRS_SAMPLE_GIL }), 0);
	/* tid 12 ends; process 11 gets a thread with tid 12 before the next flush: its samples must
	 * say their pid (the reader's inference from THREAD records only knows the last one) */
	cr_assert_eq(prs_profile_sample(p, &(struct prs_sample){ .time_ns = 40000, .tid = 12,
		.pid = pids ? 11 : 0, .syscall = -1, .stack = st, .weight = 1 }), 0);
	cr_assert_eq(prs_profile_sample(p, &(struct prs_sample){ .time_ns = 41000, .tid = 13,
		.pid = 0, .syscall = -1, .stack = st, .weight = 1, .flags = PRS_SAMPLE_GIL_WAIT,
		.state = PRS_STATE_BLOCKED }), 0);
	cr_assert_eq(prs_recorder_flush(r, &err), 0, "%s", err.msg);
	cr_assert_eq(prs_profile_thread_pid(p, pids ? 11 : 0, 12, S(p, "reused")), 0);
	cr_assert_eq(prs_profile_sample(p, &(struct prs_sample){ .time_ns = 42000, .tid = 12,
		.pid = pids ? 11 : 0, .syscall = -1, .stack = st, .weight = 1 }), 0);
	/* a sample of unknown pid from a thread whose record has one */
	cr_assert_eq(prs_profile_sample(p, &(struct prs_sample){ .time_ns = 43000, .tid = 10,
		.pid = 0, .syscall = -1, .stack = st, .weight = 1 }), 0);
	cr_assert_eq(prs_recorder_close(r, &out, &err), 0, "%s", err.msg);
	return out;
}

/* The payload lengths of the SAMPLES records of a .pyrs file, in order (at most max). */
static size_t sample_payloads(const char *path, size_t *lens, size_t max)
{
	static uint8_t out[1 << 16];
	ZSTD_DCtx *d = ZSTD_createDCtx();
	ZSTD_outBuffer ob = { out, sizeof(out), 0 };
	ZSTD_inBuffer in;
	size_t len, off = 0, n = 0;
	char *file = read_all(path, &len);

	in = (ZSTD_inBuffer){ file + 16, len - 16, 0 };
	while (in.pos < in.size)
		cr_assert(!ZSTD_isError(ZSTD_decompressStream(d, &ob, &in)));
	while (off < ob.pos) {
		uint64_t plen;
		size_t used;

		cr_assert_eq(prs_uleb128_decode(out + off + 1, ob.pos - off - 1, &plen, &used), 0);
		if (out[off] == PRS_REC_SAMPLES && n < max)
			lens[n++] = (size_t)plen;
		off += 1 + used + (size_t)plen;
	}
	ZSTD_freeDCtx(d);
	free(file);
	return n;
}

Test(pyrs, processes_round_trip, .init = unit_tmpdir_make, .fini = unit_tmpdir_remove)
{
	char path[128], path0[128], warn[256];
	size_t with[64], without[64], n, k;
	struct prs_profile *w, *r, *w0;
	struct prs_err err;

	snprintf(path, sizeof(path), "%s/tree.pyrs", unit_tmpdir);
	snprintf(path0, sizeof(path0), "%s/one.pyrs", unit_tmpdir);
	w = record_tree(path, true);
	w0 = record_tree(path0, false);
	cr_assert_eq(prs_pyrs_read(path, &r, warn, sizeof(warn), &err), 0, "%s", err.msg);
	check_invariants(r);
	assert_same_profile(w, r);
	cr_assert_eq(r->nprocesses, 4);
	cr_assert_str_eq(r->strings[r->processes[1].command], "python3 pool.py");
	cr_assert_eq(r->processes[1].time_ns, 5000);
	cr_assert_eq(r->processes[2].ppid, 10);
	cr_assert_eq(r->mappings[1].pid, 11);
	cr_assert_eq(r->samples[30].pid, 11);
	cr_assert_eq(r->samples[31].pid, 0);
	cr_assert_eq(r->samples[31].flags, PRS_SAMPLE_GIL_WAIT);
	cr_assert_eq(r->samples[33].pid, 0);
	/* the samples' records: a pid the reader infers from the THREAD record is the pid column's
	 * 0, as without pids; a sample whose pid differs from its thread's previous one is no repeat
	 * (6 one-byte fields more than without pids): tid 12 of process 11 in the first flush, pid 0
	 * of thread 10 in the second */
	n = sample_payloads(path, with, 64);
	cr_assert_eq(n, 2, "a SAMPLES record per flush");
	cr_assert_eq(sample_payloads(path0, without, 64), n);
	for (k = 0; k < n; k++)
		cr_assert_eq(with[k], without[k] + 6, "record %zu: %zu vs %zu bytes", k, with[k], without[k]);
	prs_profile_free(w);
	prs_profile_free(w0);
	prs_profile_free(r);
}

Test(pyrs, unknown_records_skipped)
{
	static const uint64_t end[] = { 3, 0, 1, 2, 1, 0, 0, 0 };
	static const uint64_t frame[] = { 0, PRS_KIND_PYTHON, 0, 0, 1, 2, 7 };
	static const uint64_t stack[] = { 0, 0 };
	static const uint64_t sample[] = { 200, 10, 0, 0, 1, 5, 99 /* a future trailing field */ };
	struct prs_profile *r;
	struct prs_buf b;
	struct prs_err err;
	char warn[128];

	prs_buf_init(&b);
	rec(&b, PRS_REC_STRING, NULL, 0, "f");
	rec(&b, 200, NULL, 0, "future record");
	rec(&b, PRS_REC_STRING, NULL, 0, "a.py");
	rec(&b, PRS_REC_FRAME, frame, 7, NULL);
	rec(&b, PRS_REC_STACK, stack, 2, NULL);
	rec(&b, 77, stack, 2, NULL);
	rec(&b, PRS_REC_SAMPLE, sample, 7, NULL);
	rec(&b, PRS_REC_END, end, 8, NULL);
	cr_assert_eq(read_records(&b, &r, warn, sizeof(warn), &err), 0, "%s", err.msg);
	cr_assert(r->complete);
	cr_assert_eq(r->nstrings, 3);
	cr_assert_str_eq(r->strings[2], "a.py");
	cr_assert_eq(r->nframes, 1);
	cr_assert_eq(r->frames[0].line, 7);
	cr_assert_eq(r->frames[0].kind, PRS_KIND_PYTHON);
	cr_assert_eq(r->nsamples, 1);
	cr_assert_eq(r->samples[0].tid, 100);
	cr_assert_eq(r->samples[0].time_ns, 5);
	cr_assert_eq(r->samples[0].weight, 5);
	cr_assert_eq(r->samples[0].syscall, -1);
	cr_assert_eq(r->samples[0].stack, 1);
	prs_profile_free(r);
	prs_buf_release(&b);
}

Test(pyrs, hostile_records)
{
	static const uint64_t frame_fwd_string[] = { 0, 4, 0, 0, 5, 0, 0 };
	static const uint64_t frame_bad_map[] = { 1, 0, 3, 0x1000, 0, 0, 0 };
	static const uint64_t stack_fwd[] = { 0, 0 };
	static const uint64_t stack_parent[] = { 7, 0 };
	static const uint64_t sample_stack[] = { 0, 0, 0, 0, 9, 1 };
	static const uint64_t end_lies[] = { 1, 0, 0, 1, 5, 0, 0, 0 };
	static const uint64_t end_processes[] = { 1, 0, 0, 1, 0, 0, 0, 0, 0, 3 };
	static const uint64_t sample_neg_pid[] = { 0, 0, 0, 0, 0, 1, 0, 9 /* zigzag(-5) */ };
	static const uint64_t mapping_neg_pid[] = { 0x1000, 0x2000, 0, 0, 0, 1 /* zigzag(-1) */ };
	static const uint64_t thread_big_pid[] = { 2, 0, 1ULL << 32 };
	static const uint64_t process_pid0[] = { 0, 0, 0, 0 };
	static const uint64_t process_cmd[] = { 2, 0, 5, 0 };
	static const struct { uint8_t type; const uint64_t *f; size_t n; const char *msg; } cases[] = {
		{ PRS_REC_FRAME, frame_fwd_string, 7, "frame name or file is string 5 of 1" },
		{ PRS_REC_FRAME, frame_bad_map, 7, "frame refers to mapping 2 of 0" },
		{ PRS_REC_STACK, stack_fwd, 2, "stack frame 0 of 0" },
		{ PRS_REC_STACK, stack_parent, 2, "stack parent 7 of 1" },
		{ PRS_REC_SAMPLE, sample_stack, 6, "sample stack 9 of 1" },
		{ PRS_REC_END, end_lies, 8, "the end record counts 5 samples, the file holds 0" },
		{ PRS_REC_END, end_processes, 10, "3 processes, the file holds 0" },
		{ PRS_REC_SAMPLE, sample_neg_pid, 8, "bad sample pid" },
		{ PRS_REC_MAPPING, mapping_neg_pid, 6, "bad mapping pid" },
		{ PRS_REC_THREAD, thread_big_pid, 3, "bad thread record" },
		{ PRS_REC_PROCESS, process_pid0, 4, "bad process record" },
		{ PRS_REC_PROCESS, process_cmd, 4, "process command is string 5 of 1" },
		{ PRS_REC_FRAME, stack_fwd, 2, "bad frame record" },
		{ 0, NULL, 0, "record type 0" },
	};
	struct prs_profile *r;
	struct prs_buf b;
	struct prs_err err;
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		prs_buf_init(&b);
		rec(&b, cases[i].type, cases[i].f, cases[i].n, NULL);
		cr_assert_eq(read_records(&b, &r, NULL, 0, &err), -EINVAL, "case %zu", i);
		cr_assert(strstr(err.msg, cases[i].msg), "case %zu: %s", i, err.msg);
		cr_assert(strstr(err.msg, "corrupt profile (record 1:"), "%s", err.msg);
		prs_buf_release(&b);
	}
	/* a record claiming 1 GiB */
	prs_buf_init(&b);
	prs_buf_putc(&b, PRS_REC_STRING);
	prs_buf_put_uleb(&b, 1ULL << 30);
	prs_buf_append(&b, "abc", 3);
	cr_assert_eq(read_records(&b, &r, NULL, 0, &err), -EINVAL);
	cr_assert(strstr(err.msg, "exceeds the limit"), "%s", err.msg);
	prs_buf_release(&b);
	/* a string over 1 MiB (the payload itself is within the record limit) */
	prs_buf_init(&b);
	prs_buf_putc(&b, PRS_REC_STRING);
	prs_buf_put_uleb(&b, (1u << 20) + 1);
	for (i = 0; i < (1u << 20) + 1; i++)
		prs_buf_putc(&b, 'x');
	cr_assert_eq(read_records(&b, &r, NULL, 0, &err), -EINVAL);
	cr_assert(strstr(err.msg, "string 1 is longer than 1048576 bytes"), "%s", err.msg);
	prs_buf_release(&b);
	/* a NUL inside a string */
	prs_buf_init(&b);
	prs_buf_putc(&b, PRS_REC_STRING);
	prs_buf_put_uleb(&b, 3);
	prs_buf_append(&b, "a\0b", 3);
	cr_assert_eq(read_records(&b, &r, NULL, 0, &err), -EINVAL);
	cr_assert(strstr(err.msg, "NUL"), "%s", err.msg);
	prs_buf_release(&b);
}

/* ---- version 2: stacks by distance, samples in SAMPLES blocks ---- */

/* A hand-made sample of a SAMPLES block: repeat, or the fields of a sample that is not one. */
struct hsample {
	int32_t tid;
	int64_t dt;
	bool repeat;
	uint64_t state, sc, stack, weight, flags, pid; /* sc: syscall + 1; pid: 0 implied, else + 1 */
};

/* Appends a SAMPLES record of the n samples hs, laid out as docs/pyrs-format.md says. */
static void samples_rec(struct prs_buf *b, const struct hsample *hs, size_t n)
{
	struct prs_buf pl;
	int32_t tid = 0;
	uint8_t bits = 0;

	prs_buf_init(&pl);
	prs_buf_put_uleb(&pl, n);
	for (size_t k = 0; k < n; k++) {
		prs_buf_put_sleb(&pl, (int64_t)hs[k].tid - tid);
		tid = hs[k].tid;
	}
	for (size_t k = 0; k < n; k++)
		prs_buf_put_sleb(&pl, hs[k].dt);
	for (size_t k = 0; k < n; k++) {
		bits |= (uint8_t)(hs[k].repeat << (k % 8));
		if (k % 8 == 7 || k == n - 1) {
			prs_buf_putc(&pl, bits);
			bits = 0;
		}
	}
	for (unsigned col = 0; col < 6; col++)
		for (size_t k = 0; k < n; k++) {
			const struct hsample *h = &hs[k];
			uint64_t v[6] = { h->state, h->sc, h->stack, h->weight, h->flags, h->pid };

			if (!h->repeat)
				prs_buf_put_uleb(&pl, v[col]);
		}
	prs_buf_putc(b, PRS_REC_SAMPLES);
	prs_buf_put_uleb(b, pl.len);
	prs_buf_append(b, pl.data, pl.len);
	prs_buf_release(&pl);
}

/* The strings, frames and stacks of the hand-made version-2 files: stack 1 = f, stack 2 = f -> g
 * (parents as distances back), a THREAD record giving tid 7 the pid 70. */
static void v2_head(struct prs_buf *b)
{
	static const uint64_t f[] = { 0, PRS_KIND_PYTHON, 0, 0, 1, 0, 3 };
	static const uint64_t g[] = { 0, PRS_KIND_PYTHON, 0, 0, 2, 0, 4 };
	static const uint64_t s1[] = { 1, 0 }, s2[] = { 1, 1 };
	static const uint64_t thread[] = { 14 /* zigzag(7) */, 0, 140 /* zigzag(70) */ };

	rec(b, PRS_REC_STRING, NULL, 0, "f");
	rec(b, PRS_REC_STRING, NULL, 0, "g");
	rec(b, PRS_REC_FRAME, f, 7, NULL);
	rec(b, PRS_REC_FRAME, g, 7, NULL);
	rec(b, PRS_REC_STACK, s1, 2, NULL);
	rec(b, PRS_REC_STACK, s2, 2, NULL);
	rec(b, PRS_REC_THREAD, thread, 3, NULL);
}

Test(pyrs, version2_blocks)
{
	/* block 1: tid 7 runs in g, tid 8 blocked in f (syscall 0: read) with its pid said, tid 7
	 * again (a repeat within the block); block 2: both repeat, then tid 7 moves to f */
	static const struct hsample b1[] = {
		{ .tid = 7, .dt = 1000, .stack = 2, .weight = 1 },
		{ .tid = 8, .dt = 0, .state = PRS_STATE_BLOCKED, .sc = 1, .stack = 1, .weight = 1,
		  .flags = PRS_SAMPLE_GIL_WAIT, .pid = 81 },
		{ .tid = 7, .dt = 10, .repeat = true },
	};
	static const struct hsample b2[] = {
		{ .tid = 8, .dt = 5, .repeat = true },
		{ .tid = 7, .dt = 0, .repeat = true },
		{ .tid = 7, .dt = 7, .stack = 1, .weight = 2, .flags = PRS_SAMPLE_GIL },
	};
	static const struct prs_sample want[] = {
		{ .time_ns = 1000, .tid = 7, .state = PRS_STATE_RUNNING, .syscall = -1, .stack = 2, .weight = 1, .pid = 70 },
		{ .time_ns = 1000, .tid = 8, .state = PRS_STATE_BLOCKED, .syscall = 0, .stack = 1, .weight = 1,
		  .flags = PRS_SAMPLE_GIL_WAIT, .pid = 80 },
		{ .time_ns = 1010, .tid = 7, .state = PRS_STATE_RUNNING, .syscall = -1, .stack = 2, .weight = 1, .pid = 70 },
		{ .time_ns = 1015, .tid = 8, .state = PRS_STATE_BLOCKED, .syscall = 0, .stack = 1, .weight = 1,
		  .flags = PRS_SAMPLE_GIL_WAIT, .pid = 80 },
		{ .time_ns = 1015, .tid = 7, .state = PRS_STATE_RUNNING, .syscall = -1, .stack = 2, .weight = 1, .pid = 70 },
		{ .time_ns = 1022, .tid = 7, .state = PRS_STATE_RUNNING, .syscall = -1, .stack = 1, .weight = 2,
		  .flags = PRS_SAMPLE_GIL, .pid = 70 },
	};
	struct prs_profile *r;
	struct prs_buf b;
	struct prs_err err;

	prs_buf_init(&b);
	v2_head(&b);
	samples_rec(&b, b1, 3);
	samples_rec(&b, b2, 3);
	rec(&b, PRS_REC_END, (const uint64_t[]){ 3, 0, 2, 3, 6, 1, 0, 0 }, 8, NULL);
	cr_assert_eq(read_records_v(&b, 2, &r, NULL, 0, &err), 0, "%s", err.msg);
	cr_assert(r->complete);
	cr_assert_eq(r->stacks[1].parent, 0);
	cr_assert_eq(r->stacks[2].parent, 1);
	cr_assert_eq(r->stacks[2].frame, 1);
	cr_assert_eq(r->nsamples, 6);
	for (size_t k = 0; k < 6; k++) {
		const struct prs_sample *g = &r->samples[k], *w = &want[k];

		cr_assert(g->time_ns == w->time_ns && g->tid == w->tid && g->state == w->state &&
			  g->syscall == w->syscall && g->stack == w->stack && g->weight == w->weight &&
			  g->flags == w->flags && g->pid == w->pid,
			  "sample %zu: t %" PRIu64 " tid %d state %d sc %d stack %u weight %u flags %d pid %d",
			  k, g->time_ns, g->tid, g->state, g->syscall, g->stack, g->weight, g->flags, g->pid);
	}
	prs_profile_free(r);
	prs_buf_release(&b);
}

Test(pyrs, version2_hostile_blocks)
{
	static const struct hsample ok = { .tid = 7, .dt = 1, .stack = 1, .weight = 1 };
	static const struct { struct hsample s[2]; size_t n; const char *msg; } cases[] = {
		{ { { .tid = 9, .dt = 1, .repeat = true } }, 1, "repeats thread 9's previous sample, which has none" },
		{ { { .tid = 7, .dt = 1, .stack = 3, .weight = 1 } }, 1, "sample stack 3 of 3" },
		{ { { .tid = 7, .dt = 1, .stack = 1, .weight = 1, .pid = (1ull << 31) + 1 } }, 1, "bad sample flags or pid" },
		{ { { .tid = 7, .dt = 1, .stack = 1, .weight = 1, .flags = 256 } }, 1, "bad sample flags or pid" },
		{ { { .tid = 7, .dt = 1, .state = 256, .stack = 1, .weight = 1 } }, 1, "bad sample record" },
		{ { { .tid = 7, .dt = -5, .stack = 1, .weight = 1 } }, 1, "sample time out of range" },
		/* the bad sample second: none of the block's samples is kept */
		{ { { .tid = 7, .dt = 1, .stack = 1, .weight = 1 }, { .tid = 8, .dt = 0, .repeat = true } }, 2,
		  "repeats thread 8's previous sample, which has none" },
	};
	static const uint64_t stack_d0[] = { 0, 0 }, stack_far[] = { 4, 0 };
	static const uint64_t count0[] = { 0 }, count_big[] = { 4097 }, cut[] = { 2, 14, 16 };
	struct prs_profile *r;
	struct prs_buf b;
	struct prs_err err;
	char warn[256];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		prs_buf_init(&b);
		v2_head(&b);
		samples_rec(&b, cases[i].s, cases[i].n);
		cr_assert_eq(read_records_v(&b, 2, &r, NULL, 0, &err), -EINVAL, "case %zu", i);
		cr_assert(strstr(err.msg, cases[i].msg), "case %zu: %s", i, err.msg);
		prs_buf_release(&b);
		/* after a good block: the good one is kept, nothing of the bad one */
		prs_buf_init(&b);
		v2_head(&b);
		samples_rec(&b, &ok, 1);
		samples_rec(&b, cases[i].s, cases[i].n);
		cr_assert_eq(read_records_v(&b, 2, &r, warn, sizeof(warn), &err), 0, "case %zu: %s", i, err.msg);
		cr_assert_eq(r->nsamples, 1, "case %zu", i);
		cr_assert_not(r->complete);
		cr_assert(strstr(warn, cases[i].msg), "case %zu: %s", i, warn);
		prs_profile_free(r);
		prs_buf_release(&b);
	}
	static const struct { uint8_t type; const uint64_t *f; size_t n; const char *msg; } recs[] = {
		{ PRS_REC_STACK, stack_d0, 2, "stack parent 0 back of 3" },
		{ PRS_REC_STACK, stack_far, 2, "stack parent 4 back of 3" },
		{ PRS_REC_SAMPLES, count0, 1, "samples record of 0 samples (1 to 4096)" },
		{ PRS_REC_SAMPLES, count_big, 1, "samples record of 4097 samples" },
		{ PRS_REC_SAMPLES, cut, 3, "bad samples record" },
	};
	for (size_t i = 0; i < sizeof(recs) / sizeof(recs[0]); i++) {
		prs_buf_init(&b);
		v2_head(&b);
		rec(&b, recs[i].type, recs[i].f, recs[i].n, NULL);
		cr_assert_eq(read_records_v(&b, 2, &r, NULL, 0, &err), -EINVAL, "record %zu", i);
		cr_assert(strstr(err.msg, recs[i].msg), "record %zu: %s", i, err.msg);
		prs_buf_release(&b);
	}
}

/* ---- randomized round trip ---- */

static unsigned seed_from_env(void)
{
	const char *s = getenv("PRS_TEST_SEED");

	return s ? (unsigned)strtoul(s, NULL, 0) : (unsigned)time(NULL) ^ (unsigned)getpid();
}

Test(pyrs, randomized_round_trip, .init = unit_tmpdir_make, .fini = unit_tmpdir_remove)
{
	unsigned seed = seed_from_env(), iter;
	char path[128], warn[256];

	fprintf(stderr, "pyrs.randomized_round_trip: seed %u (PRS_TEST_SEED=%u to replay)\n", seed, seed);
	snprintf(path, sizeof(path), "%s/rand.pyrs", unit_tmpdir);
	for (iter = 0; iter < 20; iter++) {
		struct prs_recorder *rc;
		struct prs_profile *p, *w, *r;
		struct prs_err err;
		unsigned n = 1 + (unsigned)rand_r(&seed) % 400, i;

		cr_assert_eq(prs_recorder_open(path, &rc, &err), 0, "%s", err.msg);
		p = prs_recorder_profile(rc);
		for (i = 0; i < n; i++) {
			unsigned op = (unsigned)rand_r(&seed) % 9;
			char name[32];
			uint32_t a;

			switch (op) {
			case 0: {
				int len = rand_r(&seed) % 20, k;

				for (k = 0; k < len; k++)
					name[k] = (char)(1 + rand_r(&seed) % 255);
				prs_profile_string(p, name, (size_t)len);
				break;
			}
			case 1: {
				struct prs_mapping m = { .start = (uint64_t)rand_r(&seed) << 12 };

				m.end = m.start + 4096;
				m.pid = rand_r(&seed) % 3 ? 0 : rand_r(&seed);
				m.path = (uint32_t)rand_r(&seed) % p->nstrings;
				m.build_id_len = (uint8_t)(rand_r(&seed) % (PRS_BUILD_ID_MAX + 1));
				memset(m.build_id, rand_r(&seed), m.build_id_len);
				prs_profile_mapping(p, &m);
				break;
			}
			case 2:
				a = p->nmappings ? (uint32_t)rand_r(&seed) % (p->nmappings + 1) : 0;
				prs_profile_raw_frame(p, a == p->nmappings ? PRS_NO_MAPPING : a,
						      ((uint64_t)rand_r(&seed) << 20) ^ (uint64_t)rand_r(&seed),
						      rand_r(&seed) & 1);
				break;
			case 3:
				prs_profile_named_frame(p, (enum prs_kind)(rand_r(&seed) % PRS_KIND__COUNT),
							(uint32_t)rand_r(&seed) % p->nstrings,
							(uint32_t)rand_r(&seed) % p->nstrings,
							(uint32_t)rand_r(&seed));
				break;
			case 4:
			case 5:
				if (p->nframes)
					prs_profile_stack(p, (uint32_t)rand_r(&seed) % p->nstacks,
							  (uint32_t)rand_r(&seed) % p->nframes);
				break;
			case 6: {
				struct prs_sample s = {
					.time_ns = (uint64_t)rand_r(&seed) * 1000, .tid = rand_r(&seed) - RAND_MAX / 2,
					.state = (uint8_t)(rand_r(&seed) % 5),
					.syscall = (int16_t)(rand_r(&seed) % 500 - 1),
					.stack = (uint32_t)rand_r(&seed) % p->nstacks, .weight = (uint32_t)rand_r(&seed),
					.flags = (uint8_t)(rand_r(&seed) % 4), .pid = rand_r(&seed) % 4,
				};

				/* a few tids, so that pids are inferred from their THREAD records */
				if (rand_r(&seed) % 2)
					s.tid = 100 + rand_r(&seed) % 4;

				cr_assert_eq(prs_profile_sample(p, &s), 0);
				break;
			}
			case 7:
				if (rand_r(&seed) % 4 == 0)
					prs_profile_thread_pid(p, rand_r(&seed) % 4, 100 + rand_r(&seed) % 4,
							       (uint32_t)rand_r(&seed) % p->nstrings);
				else if (rand_r(&seed) % 3 == 0)
					cr_assert_eq(prs_profile_process(p, 1 + rand_r(&seed) % 4,
									 rand_r(&seed) % 4,
									 (uint32_t)rand_r(&seed) % p->nstrings,
									 (uint64_t)rand_r(&seed)), 0);
				else if (rand_r(&seed) & 1)
					prs_profile_thread(p, rand_r(&seed), (uint32_t)rand_r(&seed) % p->nstrings);
				else
					prs_profile_meta(p, "k", p->strings[(uint32_t)rand_r(&seed) % p->nstrings]);
				break;
			case 8:
				if (rand_r(&seed) % 4 == 0)
					cr_assert_eq(prs_recorder_flush(rc, &err), 0, "%s", err.msg);
				else if (p->nframes) {
					uint32_t ids[4], k = 0, tries;

					for (tries = 0; tries < 8 && k < 4; tries++) {
						uint32_t f = (uint32_t)rand_r(&seed) % p->nframes;

						if (!p->frames[f].raw)
							ids[k++] = f;
					}
					cr_assert_eq(prs_profile_expand(p, (uint32_t)rand_r(&seed) % p->nframes, ids, k), 0);
				}
				break;
			}
		}
		cr_assert_eq(prs_recorder_close(rc, &w, &err), 0, "%s", err.msg);
		cr_assert_eq(prs_pyrs_read(path, &r, warn, sizeof(warn), &err), 0, "seed %u: %s", seed, err.msg);
		cr_assert(r->complete);
		check_invariants(w);
		check_invariants(r);
		assert_same_profile(w, r);
		prs_profile_free(w);
		prs_profile_free(r);
	}
}

/* The example of docs/pyrs-format.md, byte for byte: the document is the truth. */
Test(pyrs, matches_the_documented_example, .init = unit_tmpdir_make, .fini = unit_tmpdir_remove)
{
	static const uint8_t want[] = {
		0x01, 0x04, 'm', 'a', 'i', 'n',
		0x01, 0x07, 'c', 'o', 'm', 'p', 'u', 't', 'e',
		0x03, 0x07, 0x00, 0x04, 0x00, 0x00, 0x01, 0x00, 0x00,
		0x03, 0x07, 0x00, 0x04, 0x00, 0x00, 0x02, 0x00, 0x00,
		0x04, 0x02, 0x01, 0x00,
		0x04, 0x02, 0x01, 0x01,
		0x14, 0x0e, 0x01, 0xc8, 0x01, 0x80, 0xad, 0xe2, 0x04, 0x00, 0x00, 0x00, 0x02, 0x01, 0x00, 0x00,
		0x09, 0x08, 0x03, 0x00, 0x02, 0x03, 0x01, 0x00, 0x00, 0x00,
	};
	struct prs_recorder *r;
	struct prs_profile *p;
	struct prs_err err;
	char path[128], *file;
	uint8_t out[4096];
	size_t len;
	uint32_t f0, f1;
	ZSTD_DCtx *d = ZSTD_createDCtx();
	ZSTD_inBuffer in;
	ZSTD_outBuffer ob = { out, sizeof(out), 0 };

	snprintf(path, sizeof(path), "%s/ex.pyrs", unit_tmpdir);
	cr_assert_eq(prs_recorder_open(path, &r, &err), 0);
	p = prs_recorder_profile(r);
	f0 = prs_profile_named_frame(p, PRS_KIND_PYTHON, S(p, "main"), 0, 0);
	f1 = prs_profile_named_frame(p, PRS_KIND_PYTHON, S(p, "compute"), 0, 0);
	prs_profile_sample(p, &(struct prs_sample){ .time_ns = 5000000, .tid = 100, .syscall = -1,
		.stack = prs_profile_stack(p, prs_profile_stack(p, 0, f0), f1), .weight = 1 });
	cr_assert_eq(prs_recorder_close(r, NULL, &err), 0);
	file = read_all(path, &len);
	cr_assert_eq(memcmp(file, "PYRSPROF\x02\0\0\0\0\0\0\0", 16), 0);
	in = (ZSTD_inBuffer){ file + 16, len - 16, 0 };
	while (in.pos < in.size)
		cr_assert(!ZSTD_isError(ZSTD_decompressStream(d, &ob, &in)));
	cr_assert_eq(ob.pos, sizeof(want));
	cr_assert_eq(memcmp(out, want, sizeof(want)), 0);
	ZSTD_freeDCtx(d);
	free(file);
}

/* While the recorder runs, the file on disk holds exactly what was flushed. */
Test(pyrs, readable_while_recording, .init = unit_tmpdir_make, .fini = unit_tmpdir_remove)
{
	struct prs_recorder *r;
	struct prs_profile *p, *back;
	struct prs_err err;
	char path[128], warn[256];
	uint32_t f, st, round, i;

	snprintf(path, sizeof(path), "%s/live.pyrs", unit_tmpdir);
	cr_assert_eq(prs_recorder_open(path, &r, &err), 0);
	p = prs_recorder_profile(r);
	for (round = 1; round <= 5; round++) {
		char name[16];

		snprintf(name, sizeof(name), "f%u", round);
		f = prs_profile_named_frame(p, PRS_KIND_PYTHON, S(p, name), 0, 0);
		st = prs_profile_stack(p, 0, f);
		for (i = 0; i < 100; i++)
			prs_profile_sample(p, &(struct prs_sample){ .time_ns = round * 1000 + i, .syscall = -1,
				.stack = st, .weight = 1 });
		cr_assert_eq(prs_recorder_flush(r, &err), 0, "%s", err.msg);
		/* samples added after the flush are not on disk yet */
		prs_profile_sample(p, &(struct prs_sample){ .syscall = -1, .stack = st, .weight = 1 });
		cr_assert_eq(prs_pyrs_read(path, &back, warn, sizeof(warn), &err), 0, "%s", err.msg);
		cr_assert_not(back->complete);
		cr_assert_eq(back->nsamples, round * 101 - 1, "round %u", round);
		cr_assert_eq(back->nstacks, round + 1);
		snprintf(warn + 200, 56, "truncated after %u samples", round * 101 - 1);
		cr_assert(strstr(warn, warn + 200), "%s", warn);
		prs_profile_free(back);
	}
	cr_assert_eq(prs_recorder_close(r, NULL, &err), 0);
	cr_assert_eq(prs_pyrs_read(path, &back, warn, sizeof(warn), &err), 0, "%s", err.msg);
	cr_assert(back->complete);
	cr_assert_eq(back->nsamples, 505);
	prs_profile_free(back);
	/* an unwritable path */
	cr_assert_eq(prs_recorder_open("/nonexistent-dir/profile.pyrs", &r, &err), -ENOENT);
	cr_assert_null(r);
	cr_assert(strstr(err.msg, "/nonexistent-dir/profile.pyrs: "), "%s", err.msg);
}

/* .pyrs -> folded -> folded reader -> folded: the text is stable. */
Test(pyrs, folded_from_recording, .init = unit_tmpdir_make, .fini = unit_tmpdir_remove)
{
	char path[128], *t1 = NULL, *t2 = NULL;
	size_t l1 = 0, l2 = 0;
	struct prs_profile *w, *back;
	struct prs_err err;
	FILE *f;

	snprintf(path, sizeof(path), "%s/profile.pyrs", unit_tmpdir);
	w = record_small(path);
	f = open_memstream(&t1, &l1);
	cr_assert_eq(prs_export_folded(w, &(struct prs_view_opts){ .view = PRS_VIEW_WALL, .per_thread = true }, f, &err), 0);
	fclose(f);
	/* raw frames 1 and 2 are expanded; the leaf of the io-worker's samples is their syscall */
	cr_assert_str_eq(t1,
		"thread 100 (main);libfoo.so+0x1000;foo::bar;foo::inlined;foo::bar;libfoo.so+0x1300 5\n"
		"thread 101 (io-worker);libfoo.so+0x1000;foo::bar;foo::inlined;foo::bar;libfoo.so+0x1300;compute;[clock_nanosleep] 1\n"
		"thread 101 (io-worker);libfoo.so+0x1000;foo::bar;foo::inlined;foo::bar;libfoo.so+0x1300;compute;[read] 14\n");
	f = fmemopen(t1, l1, "r");
	cr_assert_eq(prs_folded_read(f, "t1", &back, &err), 0, "%s", err.msg);
	fclose(f);
	f = open_memstream(&t2, &l2);
	cr_assert_eq(prs_export_folded(back, &(struct prs_view_opts){ .view = PRS_VIEW_CPU }, f, &err), 0);
	fclose(f);
	cr_assert_str_eq(t2, t1);
	free(t1);
	free(t2);
	prs_profile_free(back);
	prs_profile_free(w);
}

/*
 * Flipped bytes inside the decompressed records (recompressed without a checksum, so that every
 * corruption reaches the record validator): never a crash, a consistent profile or -EINVAL.
 */
Test(pyrs, flipped_record_bytes, .init = unit_tmpdir_make, .fini = unit_tmpdir_remove)
{
	char path[128], *file;
	uint8_t recs[8192];
	struct prs_profile *w, *r;
	struct prs_buf b;
	struct prs_err err;
	size_t len, pos;
	int bit, oks = 0, errors = 0;
	ZSTD_DCtx *d = ZSTD_createDCtx();
	ZSTD_inBuffer in;
	ZSTD_outBuffer ob = { recs, sizeof(recs), 0 };

	snprintf(path, sizeof(path), "%s/profile.pyrs", unit_tmpdir);
	w = record_small(path);
	file = read_all(path, &len);
	in = (ZSTD_inBuffer){ file + 16, len - 16, 0 };
	while (in.pos < in.size)
		cr_assert(!ZSTD_isError(ZSTD_decompressStream(d, &ob, &in)));
	ZSTD_freeDCtx(d);
	for (pos = 0; pos < ob.pos; pos++) {
		for (bit = 0; bit < 8; bit++) {
			int rc;

			recs[pos] ^= (uint8_t)(1 << bit);
			b = (struct prs_buf){ recs, ob.pos, ob.pos };
			rc = read_records(&b, &r, NULL, 0, &err);
			if (rc == 0) {
				check_invariants(r);
				prs_profile_free(r);
				oks++;
			} else {
				cr_assert_eq(rc, -EINVAL, "%s", err.msg);
				cr_assert(strstr(err.msg, "corrupt"), "%s", err.msg);
				errors++;
			}
			recs[pos] ^= (uint8_t)(1 << bit);
		}
	}
	cr_log_info("flipped record bits: %d read, %d rejected", oks, errors);
	cr_assert_gt(errors, 0);
	cr_assert_gt(oks, 0); /* e.g. a flipped character of a string is still a valid file */
	free(file);
	prs_profile_free(w);
}

Test(pyrs, directory_is_not_a_profile)
{
	struct prs_profile *r;
	struct prs_err err;

	cr_assert_eq(prs_pyrs_read("/tmp", &r, NULL, 0, &err), -EISDIR);
	cr_assert_str_eq(err.msg, "/tmp: Is a directory");
	cr_assert_not(prs_pyrs_sniff("/tmp"));
}

Test(profile, stack_depth_is_bounded)
{
	struct prs_profile *p = prs_profile_new();
	uint32_t f = prs_profile_named_frame(p, PRS_KIND_PYTHON, S(p, "rec"), 0, 0), s = 0, i;

	for (i = 0; i < 65536; i++) {
		s = prs_profile_stack(p, s, f);
		cr_assert_neq(s, UINT32_MAX, "depth %u", i + 1);
	}
	cr_assert_eq(p->stacks[s].depth, 65536);
	cr_assert_eq(prs_profile_stack(p, s, f), UINT32_MAX);
	prs_profile_free(p);
}

/* A frozen version-1 file (tests/fixtures/profile/README.md describes its content). */
Test(pyrs, frozen_v1_fixture)
{
	struct prs_profile *p;
	struct prs_err err;
	char warn[128], *text = NULL;
	size_t len = 0;
	FILE *f;

	cr_assert_eq(prs_pyrs_read("tests/fixtures/profile/v1-small.pyrs", &p, warn, sizeof(warn), &err), 0,
		     "%s (run from the repository root)", err.msg);
	cr_assert(p->complete);
	cr_assert_str_eq(prs_profile_meta_get(p, "command"), "python3 app.py");
	cr_assert_str_eq(prs_profile_meta_get(p, "rate_hz"), "100");
	cr_assert_eq(p->nmappings, 1);
	cr_assert_eq(p->mappings[0].start, 0x555555554000ULL);
	cr_assert_eq(p->mappings[0].build_id_len, 4);
	cr_assert_eq(memcmp(p->mappings[0].build_id, "\xde\xad\xbe\xef", 4), 0);
	cr_assert_str_eq(p->strings[p->mappings[0].path], "/usr/lib/libdemo.so");
	cr_assert_eq(p->nsamples, 60);
	cr_assert_eq(p->samples[29].time_ns, 300000000ULL);
	cr_assert_eq(p->samples[30].time_ns, 10000005ULL);
	cr_assert_eq(p->samples[59].syscall, 230);
	cr_assert_eq(p->nthreads, 2);
	/* written before processes existed: every pid unknown, no PROCESS entries */
	cr_assert_eq(p->nprocesses, 0);
	cr_assert_eq(p->mappings[0].pid, 0);
	for (size_t k = 0; k < p->nsamples; k++)
		cr_assert_eq(p->samples[k].pid, 0);
	cr_assert(p->threads[0].pid == 0 && p->threads[1].pid == 0);
	check_invariants(p);
	f = open_memstream(&text, &len);
	cr_assert_eq(prs_export_folded(p, &(struct prs_view_opts){ .view = PRS_VIEW_WALL, .per_thread = true, .lines = true }, f, &err), 0);
	fclose(f);
	cr_assert_str_eq(text,
		"thread 1000 (MainThread);main (app.py:10);work (app.py:20) 30\n"
		"thread 1001 (worker);main (app.py:10);[clock_nanosleep] 10\n"
		"thread 1001 (worker);main (app.py:10);work (app.py:20);demo::kernel (src/lib.rs:7);"
		"demo::inner (src/lib.rs:9) 20\n");
	free(text);
	prs_profile_free(p);
}
