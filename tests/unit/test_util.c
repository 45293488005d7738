/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for src/util: buffers, LEB128 (against the DWARF specification's examples), the
 * hash maps (against a brute-force reference), the clock and the x86_64 syscall table (against
 * numbers from the kernel's syscall_64.tbl and bounds.md's measurements).
 */
#include <criterion/criterion.h>
#include <math.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pyrsprof/util.h"

#include "util/banned.h"

Test(util, buf_append_printf_detach)
{
	struct prs_buf b;
	size_t len;
	uint8_t *d;
	int i;

	prs_buf_init(&b);
	for (i = 0; i < 1000; i++)
		cr_assert_eq(prs_buf_putc(&b, (uint8_t)('a' + i % 26)), 0);
	cr_assert_eq(b.len, 1000);
	cr_assert(b.cap > b.len);
	cr_assert_eq(b.data[27], 'b');
	cr_assert_eq(prs_buf_printf(&b, "<%d:%s>", 42, "x"), 0);
	cr_assert_eq(b.len, 1006);
	cr_assert_eq(memcmp(b.data + 1000, "<42:x>", 6), 0);
	cr_assert_eq(b.data[b.len], '\0');
	prs_buf_reset(&b);
	cr_assert_eq(b.len, 0);
	cr_assert_eq(prs_buf_append(&b, "abc", 3), 0);
	d = prs_buf_detach(&b, &len);
	cr_assert_eq(len, 3);
	cr_assert_eq(memcmp(d, "abc", 3), 0);
	cr_assert_null(b.data);
	cr_assert_eq(b.len, 0);
	free(d);
	prs_buf_release(&b);
}

Test(util, array_grow_overflow)
{
	void *p = NULL;
	size_t cap = 0;

	cr_assert_eq(prs_array_grow(&p, &cap, 5, 8), 0);
	cr_assert_geq(cap, 5);
	cr_assert_eq(prs_array_grow(&p, &cap, SIZE_MAX / 4, 8), -ENOMEM);
	cr_assert_geq(cap, 5);
	free(p);
}

Test(util, leb128_known_encodings)
{
	/* DWARF 5, section 7.6, figure 3 (unsigned examples) */
	static const struct { uint64_t v; uint8_t enc[3]; size_t n; } ex[] = {
		{ 2, { 0x02 }, 1 }, { 127, { 0x7f }, 1 }, { 128, { 0x80, 0x01 }, 2 },
		{ 129, { 0x81, 0x01 }, 2 }, { 130, { 0x82, 0x01 }, 2 }, { 12857, { 0xb9, 0x64 }, 2 },
		{ 624485, { 0xe5, 0x8e, 0x26 }, 3 },
	};
	uint8_t out[PRS_LEB128_MAX];
	size_t i, used;
	uint64_t v;

	for (i = 0; i < sizeof(ex) / sizeof(ex[0]); i++) {
		cr_assert_eq(prs_uleb128_encode(ex[i].v, out), ex[i].n);
		cr_assert_eq(memcmp(out, ex[i].enc, ex[i].n), 0, "value %lu", (unsigned long)ex[i].v);
		cr_assert_eq(prs_uleb128_decode(ex[i].enc, ex[i].n, &v, &used), 0);
		cr_assert_eq(v, ex[i].v);
		cr_assert_eq(used, ex[i].n);
	}
}

Test(util, leb128_bounds)
{
	uint8_t out[PRS_LEB128_MAX + 2];
	uint64_t v;
	size_t n, used, k;

	n = prs_uleb128_encode(UINT64_MAX, out);
	cr_assert_eq(n, 10);
	cr_assert_eq(out[9], 0x01);
	cr_assert_eq(prs_uleb128_decode(out, n, &v, &used), 0);
	cr_assert_eq(v, UINT64_MAX);
	/* every shorter prefix ends inside the varint */
	for (k = 0; k < n; k++)
		cr_assert_eq(prs_uleb128_decode(out, k, &v, &used), -ENODATA);
	/* bits beyond 64 */
	out[9] = 0x02;
	cr_assert_eq(prs_uleb128_decode(out, n, &v, &used), -EOVERFLOW);
	/* eleven bytes */
	memset(out, 0x80, sizeof(out));
	out[10] = 0;
	cr_assert_eq(prs_uleb128_decode(out, 11, &v, &used), -EOVERFLOW);
	/* a redundant (non-minimal) encoding of 0 within 10 bytes decodes */
	out[0] = 0x80;
	out[1] = 0x00;
	cr_assert_eq(prs_uleb128_decode(out, 2, &v, &used), 0);
	cr_assert_eq(v, 0);
	cr_assert_eq(used, 2);
}

Test(util, zigzag)
{
	cr_assert_eq(prs_zigzag_encode(0), 0);
	cr_assert_eq(prs_zigzag_encode(-1), 1);
	cr_assert_eq(prs_zigzag_encode(1), 2);
	cr_assert_eq(prs_zigzag_encode(-2), 3);
	cr_assert_eq(prs_zigzag_encode(INT64_MIN), UINT64_MAX);
	cr_assert_eq(prs_zigzag_decode(UINT64_MAX), INT64_MIN);
	cr_assert_eq(prs_zigzag_decode(prs_zigzag_encode(INT64_MAX)), INT64_MAX);
	cr_assert_eq(prs_zigzag_decode(prs_zigzag_encode(-123456789)), -123456789);
}

Test(util, buf_leb_roundtrip)
{
	struct prs_buf b;
	size_t off = 0, used;
	uint64_t v;
	int64_t i;

	prs_buf_init(&b);
	for (i = -5000; i < 5000; i += 7)
		cr_assert_eq(prs_buf_put_sleb(&b, i * 1000003), 0);
	for (i = -5000; i < 5000; i += 7) {
		cr_assert_eq(prs_uleb128_decode(b.data + off, b.len - off, &v, &used), 0);
		cr_assert_eq(prs_zigzag_decode(v), i * 1000003);
		off += used;
	}
	cr_assert_eq(off, b.len);
	prs_buf_release(&b);
}

Test(util, map64_against_reference)
{
	enum { N = 20000 };
	struct prs_map64 m;
	uint64_t *keys = malloc(N * sizeof(*keys));
	uint32_t v, i;
	unsigned seed = 12345;

	prs_map64_init(&m);
	cr_assert_eq(prs_map64_get(&m, 7), PRS_MAP_NONE);
	/* keys with few distinct low bits stress the probing */
	for (i = 0; i < N; i++)
		keys[i] = ((uint64_t)rand_r(&seed) << 32) & ~0xffffULL;
	for (i = 0; i < N; i++) {
		uint32_t j, first = i;
		int rc;

		for (j = 0; j < i; j++)
			if (keys[j] == keys[i]) {
				first = j;
				break;
			}
		rc = prs_map64_intern(&m, keys[i], i, &v);
		cr_assert_eq(rc, first == i ? 1 : 0);
		cr_assert_eq(v, first);
	}
	for (i = 0; i < N; i++)
		cr_assert_leq(prs_map64_get(&m, keys[i]), i);
	cr_assert_eq(prs_map64_get(&m, 1), PRS_MAP_NONE);
	cr_assert_eq(prs_map64_put(&m, keys[0], 777), 0);
	cr_assert_eq(prs_map64_get(&m, keys[0]), 777);
	cr_assert_eq(prs_map64_put(&m, 99, PRS_MAP_NONE), -EINVAL);
	cr_assert_leq(m.len * 4, m.cap * 3); /* load factor at most 3/4 */
	free(keys);
	prs_map64_release(&m);
}

Test(util, strmap_binary_keys)
{
	struct prs_strmap m;
	static const char k1[] = "a\0b", k2[] = "a\0c";
	char keys[500][16];
	int i;

	prs_strmap_init(&m);
	cr_assert_eq(prs_strmap_put(&m, k1, 3, 1), 0);
	cr_assert_eq(prs_strmap_put(&m, k2, 3, 2), 0);
	cr_assert_eq(prs_strmap_put(&m, "", 0, 3), 0);
	cr_assert_eq(prs_strmap_get(&m, "a\0b", 3), 1);
	cr_assert_eq(prs_strmap_get(&m, "a\0c", 3), 2);
	cr_assert_eq(prs_strmap_get(&m, "a", 1), PRS_MAP_NONE);
	cr_assert_eq(prs_strmap_get(&m, "", 0), 3);
	for (i = 0; i < 500; i++) {
		snprintf(keys[i], sizeof(keys[i]), "k%u", (unsigned)i);
		cr_assert_eq(prs_strmap_put(&m, keys[i], strlen(keys[i]), (uint32_t)i + 10), 0);
	}
	for (i = 0; i < 500; i++) {
		char k[16];

		snprintf(k, sizeof(k), "k%u", (unsigned)i);
		cr_assert_eq(prs_strmap_get(&m, k, strlen(k)), (uint32_t)i + 10);
	}
	cr_assert_eq(m.len, 503);
	cr_assert_eq(prs_strmap_put(&m, k1, 3, 9), 0);
	cr_assert_eq(m.len, 503);
	cr_assert_eq(prs_strmap_get(&m, k1, 3), 9);
	prs_strmap_release(&m);
}

/* The hashed lookup finds what prs_strmap_get finds; the prefetches (hints) change nothing,
 * on an empty table too. */
Test(util, strmap_hashed_lookup)
{
	struct prs_strmap m;
	char keys[300][16], k[16];
	uint32_t h;

	prs_strmap_init(&m);
	prs_strmap_prefetch(&m, 5);
	prs_strmap_prefetch_key(&m, 5);
	cr_assert_eq(prs_strmap_get_hashed(&m, "x", 1, (uint32_t)prs_hash_bytes("x", 1)), PRS_MAP_NONE);
	for (int i = 0; i < 300; i++) {
		snprintf(keys[i], sizeof(keys[i]), "key%d", i);
		cr_assert_eq(prs_strmap_put(&m, keys[i], strlen(keys[i]), (uint32_t)i), 0);
	}
	for (int i = 0; i < 310; i++) {
		snprintf(k, sizeof(k), "key%d", i);
		h = (uint32_t)prs_hash_bytes(k, strlen(k));
		prs_strmap_prefetch(&m, h);
		prs_strmap_prefetch_key(&m, h);
		cr_assert_eq(prs_strmap_get_hashed(&m, k, strlen(k), h), prs_strmap_get(&m, k, strlen(k)));
		cr_assert_eq(prs_strmap_get_hashed(&m, k, strlen(k), h), i < 300 ? (uint32_t)i : PRS_MAP_NONE);
	}
	prs_strmap_release(&m);
}

static bool pair_eq(const void *ctx, uint32_t id, const void *key)
{
	const uint32_t (*pairs)[2] = ctx;
	const uint32_t *k = key;

	return pairs[id][0] == k[0] && pairs[id][1] == k[1];
}

Test(util, idset_constant_hash_still_correct)
{
	/* every element has the same hash: only the callback can tell them apart */
	uint32_t pairs[300][2];
	struct prs_idset s;
	uint32_t i;

	prs_idset_init(&s);
	for (i = 0; i < 300; i++) {
		pairs[i][0] = i / 10;
		pairs[i][1] = i % 10;
		cr_assert_eq(prs_idset_find(&s, 5, pair_eq, pairs, pairs[i]), PRS_MAP_NONE);
		cr_assert_eq(prs_idset_insert(&s, 5, i), 0);
	}
	for (i = 0; i < 300; i++) {
		uint32_t k[2] = { i / 10, i % 10 };

		cr_assert_eq(prs_idset_find(&s, 5, pair_eq, pairs, k), i);
		cr_assert_eq(prs_idset_find(&s, 6, pair_eq, pairs, k), PRS_MAP_NONE);
	}
	prs_idset_release(&s);
}

Test(util, now_ns_monotonic)
{
	uint64_t a = prs_now_ns(), b;

	usleep(2000);
	b = prs_now_ns();
	cr_assert_gt(a, 0);
	cr_assert_geq(b - a, 2000000);
	cr_assert_lt(b - a, 2000000000ULL);
}

Test(util, syscall_table)
{
	/* numbers from arch/x86/entry/syscalls/syscall_64.tbl */
	cr_assert_str_eq(prs_syscall_name(0), "read");
	cr_assert_str_eq(prs_syscall_name(1), "write");
	cr_assert_str_eq(prs_syscall_name(7), "poll");
	cr_assert_str_eq(prs_syscall_name(35), "nanosleep");
	cr_assert_str_eq(prs_syscall_name(202), "futex");
	cr_assert_str_eq(prs_syscall_name(230), "clock_nanosleep");
	cr_assert_str_eq(prs_syscall_name(232), "epoll_wait");
	cr_assert_str_eq(prs_syscall_name(288), "accept4");
	cr_assert_str_eq(prs_syscall_name(426), "io_uring_enter");
	cr_assert_str_eq(prs_syscall_name(449), "futex_waitv");
	cr_assert_null(prs_syscall_name(-1));
	cr_assert_null(prs_syscall_name(100000));
	cr_assert_str_eq(prs_syscall_name(183), "afs_syscall"); /* named though unimplemented */
	cr_assert_null(prs_syscall_name(400)); /* x86_64 numbers 335..423 are unused */
}

Test(util, syscall_kinds)
{
	cr_assert_eq(prs_syscall_kind(0), PRS_KIND_OFF_IO);   /* read */
	cr_assert_eq(prs_syscall_kind(17), PRS_KIND_OFF_IO);  /* pread64 */
	cr_assert_eq(prs_syscall_kind(45), PRS_KIND_OFF_IO);  /* recvfrom */
	cr_assert_eq(prs_syscall_kind(232), PRS_KIND_OFF_IO); /* epoll_wait */
	cr_assert_eq(prs_syscall_kind(42), PRS_KIND_OFF_IO);  /* connect */
	cr_assert_eq(prs_syscall_kind(74), PRS_KIND_OFF_IO);  /* fsync */
	cr_assert_eq(prs_syscall_kind(202), PRS_KIND_OFF_LOCK); /* futex */
	cr_assert_eq(prs_syscall_kind(73), PRS_KIND_OFF_LOCK);  /* flock */
	cr_assert_eq(prs_syscall_kind(35), PRS_KIND_OFF_SLEEP);  /* nanosleep */
	cr_assert_eq(prs_syscall_kind(230), PRS_KIND_OFF_SLEEP); /* clock_nanosleep */
	cr_assert_eq(prs_syscall_kind(61), PRS_KIND_OFF_SLEEP);  /* wait4 */
	cr_assert_eq(prs_syscall_kind(130), PRS_KIND_OFF_SLEEP); /* rt_sigsuspend */
	cr_assert_eq(prs_syscall_kind(39), PRS_KIND_OFF_OTHER);  /* getpid */
	cr_assert_eq(prs_syscall_kind(-1), PRS_KIND_OFF_OTHER);
	cr_assert_eq(prs_syscall_kind(99999), PRS_KIND_OFF_OTHER);
}

Test(util, kind_names)
{
	int k;

	cr_assert_str_eq(prs_kind_name(PRS_KIND_PYTHON), "python");
	cr_assert_str_eq(prs_kind_name(PRS_KIND_OFF_IO), "off-io");
	cr_assert_str_eq(prs_kind_name((enum prs_kind)200), "unknown");
	for (k = 0; k < PRS_KIND__COUNT; k++)
		cr_assert_not_null(prs_kind_name((enum prs_kind)k));
}

/* prs_fmt_fixed against snprintf: the same bytes for ties (k/8, k/16, k/200), decimal edges
 * (x.xx5), random magnitudes, and what it hands to printf (negative, -0, huge, NaN, inf). */
static void same_as_printf(double v, int decimals)
{
	char want[PRS_FMT_FIXED_MAX], got[PRS_FMT_FIXED_MAX];
	size_t n;

	snprintf(want, sizeof(want), "%.*f", decimals, v);
	n = prs_fmt_fixed(got, v, decimals);
	cr_assert_str_eq(got, want, "%.17g with %d decimals", v, decimals);
	cr_assert_eq(n, strlen(want));
}

Test(util, fmt_fixed_is_printf)
{
	static const double edges[] = { 0, 0.005, 0.015, 0.025, 0.045, 1.005, 1.015, 2.675, 0.125, 0.375,
					0.05, 0.15, 0.25, 0.35, 0.45, 99.995, 999999999999.99, 1e12,
					-0.0, -1.5, 1e300, 4503599627370495.5 };
	unsigned seed = 11;

	for (int d = 1; d <= 2; d++) {
		for (size_t i = 0; i < sizeof(edges) / sizeof(edges[0]); i++)
			same_as_printf(edges[i], d);
		same_as_printf(NAN, d);
		same_as_printf(INFINITY, d);
		for (int k = 0; k < 20000; k++) {
			same_as_printf(k / 8.0, d);
			same_as_printf(k / 16.0, d);
			same_as_printf(k / 200.0, d);
			same_as_printf(k / 1000.0, d);
			same_as_printf(k * 0.01 + 0.005, d);
		}
		for (int k = 0; k < 200000; k++) {
			double mag = pow(10, rand_r(&seed) % 13 - 3);

			same_as_printf((double)rand_r(&seed) / RAND_MAX * mag, d);
		}
	}
}

/* prs_fmt_u64 against snprintf's PRIu64: 0, every power of ten and its neighbours, the largest. */
Test(util, fmt_u64_is_printf)
{
	char want[32], got[PRS_FMT_U64_MAX];
	uint64_t p = 1;

	for (int e = 0; e < 20; e++, p *= 10) {
		const uint64_t vs[] = { p - 1, p, p + 1, p * 7 + 3 };

		for (size_t i = 0; i < sizeof(vs) / sizeof(vs[0]); i++) {
			snprintf(want, sizeof(want), "%" PRIu64, vs[i]);
			cr_assert_eq(prs_fmt_u64(got, vs[i]), strlen(want));
			cr_assert_str_eq(got, want);
		}
	}
	snprintf(want, sizeof(want), "%" PRIu64, UINT64_MAX);
	cr_assert_eq(prs_fmt_u64(got, UINT64_MAX), 20);
	cr_assert_str_eq(got, want);
}
