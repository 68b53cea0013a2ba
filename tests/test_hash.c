/*
 * tests/test_hash.c — the tables' hash (index/hash.h): random IDs spread over the buckets as
 * chance would; IDs gathered into one bucket under one seed (what someone who knew the seed
 * could craft) spread again under another seed; IDs that share some of their words (the
 * multiply-fold's structure) spread too; the fingerprint and filter bits are spread over their
 * values. Bounds are far from what chance gives (fixed seeds: the test is reproducible), so a
 * failure means a broken hash, not bad luck.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "index/hash.h"
#include "testutil.h"

/* The largest bucket's count, and the empty buckets, of ids[0..n) in nb buckets under seed. */
static void spread(const rix_id *ids, size_t n, uint32_t nb, uint64_t seed, uint32_t *max, uint32_t *empty)
{
	uint32_t *c = calloc(nb, sizeof(*c));
	assert_non_null(c);
	for (size_t i = 0; i < n; i++)
		c[rix__hash_bucket(rix__hash_id(&ids[i], seed), nb)]++;
	*max = 0;
	*empty = 0;
	for (uint32_t b = 0; b < nb; b++) {
		*max = c[b] > *max ? c[b] : *max;
		*empty += c[b] == 0;
	}
	free(c);
}

/* Random IDs at 4 a bucket (a chaining table's load): Poisson(4) has e^-4 = 1.8% of buckets
 * empty and, over 50,000 buckets, a largest one of about 15. */
static void test_random_ids(void **state)
{
	(void)state;
	enum { N = 200000, NB = N / 4 };
	rix_id *ids = malloc(N * sizeof(*ids));
	assert_non_null(ids);
	uint64_t st = 0x4A54;
	for (size_t i = 0; i < N; i++)
		rix_test_random_id(&ids[i], &st);
	const uint64_t seeds[] = { 0, 1, 0x5EEDF00DCAFEBEEFull, ~0ull };
	for (size_t s = 0; s < sizeof(seeds) / sizeof(seeds[0]); s++) {
		uint32_t max, empty;
		spread(ids, N, NB, seeds[s], &max, &empty);
		assert_true(max <= 24);
		assert_in_range(empty, NB * 0.0183 * 0.7, NB * 0.0183 * 1.3);
	}
	free(ids);
}

/* 256 IDs that one seed puts in bucket 0 of 64 spread over the buckets under other seeds (2^-64
 * would be the chance of guessing the seed). */
static void test_crafted_for_one_seed(void **state)
{
	(void)state;
	enum { N = 256, NB = 64 };
	const uint64_t known = 0x1234567890ABCDEFull;
	rix_id ids[N];
	uint64_t st = 99;
	for (size_t n = 0; n < N;) {
		rix_test_random_id(&ids[n], &st);
		if (rix__hash_bucket(rix__hash_id(&ids[n], known), NB) == 0)
			n++;
	}
	uint32_t max, empty;
	spread(ids, N, NB, known, &max, &empty);
	assert_int_equal(max, N); /* the attack, as crafted */
	for (uint64_t seed = 1; seed <= 8; seed++) {
		spread(ids, N, NB, known ^ (seed * 0x9E3779B97F4A7C15ull), &max, &empty);
		assert_true(max <= 16); /* chance: about 4 a bucket, rarely over 12 */
	}
}

/* IDs equal in three of their four words (and in two) still spread: every word counts. */
static void test_shared_words(void **state)
{
	(void)state;
	enum { N = 4096, NB = 1024 };
	rix_id base, ids[N];
	uint64_t st = 7;
	rix_test_random_id(&base, &st);
	for (int w = 0; w < 4; w++) {
		for (size_t i = 0; i < N; i++) {
			ids[i] = base;
			uint64_t v = rix_test_next(&st);
			memcpy(ids[i].b + 8 * w, &v, 8); /* only word w differs */
		}
		uint32_t max, empty;
		spread(ids, N, NB, 0xABCDEF, &max, &empty);
		assert_true(max <= 16);
		for (size_t i = 0; i < N; i++) { /* words w and w + 1 (mod 4) differ, by one bit each */
			ids[i] = base;
			ids[i].b[8 * w + (i & 7)] ^= (uint8_t)(1u << ((i >> 3) & 7));
			ids[i].b[8 * ((w + 1) & 3) + ((i >> 6) & 7)] ^= (uint8_t)(1u << ((i >> 9) & 7));
		}
		spread(ids, N, NB, 0xABCDEF, &max, &empty);
		assert_true(max <= 16);
	}
}

/* The two filter bit numbers take their values about equally often. */
static void test_filter_bits(void **state)
{
	(void)state;
	enum { N = 256 * 400 };
	uint32_t f1[32] = { 0 }, f2[32] = { 0 };
	uint64_t st = 3;
	for (size_t i = 0; i < N; i++) {
		rix_id id;
		rix_test_random_id(&id, &st);
		uint64_t h = rix__hash_id(&id, 0x77);
		f1[(h >> 32) & 31]++;
		f2[(h >> 37) & 31]++;
	}
	for (int v = 0; v < 32; v++) {
		assert_in_range(f1[v], N / 32 * 0.9, N / 32 * 1.1);
		assert_in_range(f2[v], N / 32 * 0.9, N / 32 * 1.1);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_random_ids),
		cmocka_unit_test(test_crafted_for_one_seed),
		cmocka_unit_test(test_shared_words),
		cmocka_unit_test(test_filter_bits),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
