/*
 * tests/test_idset.c — rix_idset against a reference (a sorted array with binary search):
 * every inserted ID found, single and batched; absent IDs not found, above all the near misses
 * (one bit flipped anywhere in a present ID: in its bucket bits, in the mid bits of the packed
 * array, in the tail bytes, in the last byte); iteration gives exactly the sorted distinct IDs;
 * the empty set, one ID, duplicates; sizes across powers of two; crafted IDs sharing their top
 * 32 bits (correct, and a lookup compares O(log n) IDs); the sorted-input path and its check;
 * allocation failure N; lookups from several threads at once; memory at most 30 bytes an ID
 * at n = 1M; ranks (an ID's position in ascending order, single and batched; absent: none); the
 * shape with 8 or more mid bits (the ranked table's). Every instance of the lookups the processor
 * runs (portable; POPCNT and BMI2; AVX-512 VPOPCNTQ) is checked.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "rix/alloc.h"
#include "rix/error.h"
#include "rix/idset.h"
#include "testutil.h"
#include "index/index_internal.h"

static int id_cmp(const void *a, const void *b)
{
	return memcmp(a, b, RIX_ID_SIZE);
}

/* Sorts and deduplicates r[0..n) in place; returns the distinct count. */
static size_t ref_make(rix_id *r, size_t n)
{
	qsort(r, n, sizeof(*r), id_cmp);
	size_t d = 0;
	for (size_t i = 0; i < n; i++)
		if (d == 0 || memcmp(&r[d - 1], &r[i], RIX_ID_SIZE) != 0)
			r[d++] = r[i];
	return d;
}

static bool ref_has(const rix_id *r, size_t n, const rix_id *id)
{
	return bsearch(id, r, n, sizeof(*r), id_cmp) != NULL;
}

/* A set built from a copy of ids[0..n) (rix_idset_build), checked to succeed. */
static rix_idset *must_build(const rix_id *ids, size_t n)
{
	rix_idset *s = NULL;
	assert_int_equal(rix_idset_build(&s, ids, n), 0);
	assert_non_null(s);
	return s;
}

struct walk {
	const rix_id *ref;
	size_t n, at;
	int stop_at; /* return nonzero at this call (1-based), 0 never */
};

static int walk_fn(void *payload, const rix_id *id)
{
	struct walk *w = payload;
	assert_true(w->at < w->n);
	assert_memory_equal(id->b, w->ref[w->at].b, RIX_ID_SIZE);
	w->at++;
	return (w->stop_at != 0 && (int)w->at == w->stop_at) ? 42 : 0;
}

/* Asks for id both ways (single, and batched in a group of one) and checks the answer. */
static void expect(const rix_idset *s, const rix_id *id, bool want)
{
	assert_int_equal(rix_idset_has(s, id), want);
	bool f = !want;
	assert_int_equal(rix_idset_has_many(&f, s, id, 1), want ? 1 : 0);
	assert_int_equal(f, want);
	size_t r = 12345;
	assert_int_equal(rix_idset_rank(s, id, &r), want);
	if (!want)
		assert_int_equal(r, 12345); /* untouched */
	assert_int_equal(rix_idset_rank_many(&r, s, id, 1), want ? 1 : 0);
	if (!want)
		assert_int_equal(r, RIX_IDSET_NO_RANK);
}

static void flip(rix_id *id, unsigned bit)
{
	id->b[bit / 8] ^= (uint8_t)(0x80u >> (bit % 8));
}

/*
 * Checks s against the sorted distinct ref[0..n): count, memory, iteration, every present ID
 * (single and batched), near misses (bits flipped: all 256 for the first 64 IDs, the bits
 * around the bucket/mid/tail boundaries for every ID, or ~4096 spread over a larger set) and
 * random absent IDs.
 */
static void check_set(const rix_idset *s, const rix_id *ref, size_t n, uint64_t *st)
{
	assert_int_equal(rix_idset_count(s), n);
	rix_idset_shape sh;
	rix_idset_get_shape(&sh, s);
	if (n > 0) {
		assert_int_equal(sh.tail_bytes + (sh.key_bits + sh.mid_bits) / 8, RIX_ID_SIZE);
		assert_true(rix_idset_memory(s) >= n * sh.tail_bytes);
	}

	struct walk w = { ref, n, 0, 0 };
	assert_int_equal(rix_idset_foreach(s, walk_fn, &w), 0);
	assert_int_equal(w.at, n);

	/* Every present ID, one by one and batched (the batch in a shuffled order). */
	bool *found = malloc((n ? n : 1) * sizeof(*found));
	rix_id *shuf = malloc((n ? n : 1) * sizeof(*shuf));
	memcpy(shuf, ref, n * sizeof(*shuf));
	for (size_t i = n; i > 1; i--) {
		size_t j = rix_test_next(st) % i;
		rix_id t = shuf[i - 1];
		shuf[i - 1] = shuf[j];
		shuf[j] = t;
	}
	for (size_t i = 0; i < n; i++)
		assert_true(rix_idset_has(s, &shuf[i]));
	memset(found, 0, n * sizeof(*found));
	assert_int_equal(rix_idset_has_many(found, s, shuf, n), n);
	for (size_t i = 0; i < n; i++)
		assert_true(found[i]);
	/* Ranks: ref[i]'s is i, one by one and batched (shuffled). */
	size_t *ranks = malloc((n ? n : 1) * sizeof(*ranks));
	for (size_t i = 0; i < n; i++) {
		size_t r = RIX_IDSET_NO_RANK;
		assert_true(rix_idset_rank(s, &ref[i], &r));
		assert_int_equal(r, i);
	}
	assert_int_equal(rix_idset_rank_many(ranks, s, shuf, n), n);
	for (size_t i = 0; i < n; i++) {
		assert_true(ranks[i] < n);
		assert_memory_equal(ref[ranks[i]].b, shuf[i].b, RIX_ID_SIZE);
	}
	free(ranks);

	/* Near misses: each a present ID with one bit flipped (found only if the reference has it). */
	unsigned k = sh.key_bits, kb = (k + 7) / 8;
	unsigned bits[] = { 0, k ? k - 1 : 0, k, k + 1, 8 * kb - 1, 8 * kb, 8 * kb + 1, 8 * kb + 7,
			    128, 247, 248, 254, 255 };
	size_t nmiss = 0, miss_cap = n * (sizeof(bits) / sizeof(bits[0])) + 64 * 256;
	rix_id *miss = malloc(miss_cap * sizeof(*miss));
	size_t stride = n <= 4096 ? 1 : n / 4096; /* near misses of at most ~4096 IDs */
	for (size_t i = 0; i < n; i += (i < 64 ? 1 : stride)) {
		if (i < 64) {
			for (unsigned b = 0; b < 256; b++) {
				miss[nmiss] = ref[i];
				flip(&miss[nmiss++], b);
			}
		}
		for (size_t b = 0; b < sizeof(bits) / sizeof(bits[0]); b++) {
			miss[nmiss] = ref[i];
			flip(&miss[nmiss++], bits[b] % 256);
		}
	}
	bool *mf = malloc((nmiss ? nmiss : 1) * sizeof(*mf));
	size_t want_hits = 0;
	for (size_t i = 0; i < nmiss; i++) {
		bool want = ref_has(ref, n, &miss[i]);
		want_hits += want;
		assert_int_equal(rix_idset_has(s, &miss[i]), want);
	}
	assert_int_equal(rix_idset_has_many(mf, s, miss, nmiss), want_hits);
	for (size_t i = 0; i < nmiss; i++)
		assert_int_equal(mf[i], ref_has(ref, n, &miss[i]));
	size_t *mr = malloc((nmiss ? nmiss : 1) * sizeof(*mr));
	assert_int_equal(rix_idset_rank_many(mr, s, miss, nmiss), want_hits);
	for (size_t i = 0; i < nmiss; i++) {
		const rix_id *hit = bsearch(&miss[i], ref, n, sizeof(*ref), id_cmp);
		assert_int_equal(mr[i], hit ? (size_t)(hit - ref) : RIX_IDSET_NO_RANK);
	}
	free(mr);

	/* Random absent IDs; and IDs of the same bucket as a present one with a random rest. */
	for (size_t i = 0; i < 2000; i++) {
		rix_id id;
		rix_test_random_id(&id, st);
		if (n > 0 && (i & 1)) {
			const rix_id *p = &ref[rix_test_next(st) % n];
			memcpy(id.b, p->b, kb);
		}
		expect(s, &id, ref_has(ref, n, &id));
	}
	free(mf);
	free(miss);
	free(shuf);
	free(found);
}

/* n random IDs, about 1 in dupe_every repeating an earlier one. */
static rix_id *random_ids(size_t n, unsigned dupe_every, uint64_t *st)
{
	rix_id *a = malloc((n ? n : 1) * sizeof(*a));
	for (size_t i = 0; i < n; i++) {
		if (i > 0 && dupe_every && rix_test_next(st) % dupe_every == 0)
			a[i] = a[rix_test_next(st) % i];
		else
			rix_test_random_id(&a[i], st);
	}
	return a;
}

/* Builds from ids (both ways: a copy, and taken over unsorted and sorted) and checks. */
static void build_and_check(const rix_id *ids, size_t n, uint64_t *st)
{
	rix_id *ref = malloc((n ? n : 1) * sizeof(*ref));
	memcpy(ref, ids, n * sizeof(*ref));
	size_t d = ref_make(ref, n);

	rix_idset *s = must_build(ids, n);
	check_set(s, ref, d, st);
	/* Every instance of the lookups this processor runs (portable; POPCNT and BMI2; AVX-512). */
	for (int level = 0; level <= 2; level++)
		if (rix__idset_use_level(s, level) == 0)
			check_set(s, ref, d, st);
	rix_idset_free(s);

	/* Taken over, unsorted. */
	rix_id *own = rix_malloc((n ? n : 1) * sizeof(*own));
	assert_non_null(own);
	memcpy(own, ids, n * sizeof(*own));
	assert_int_equal(rix_idset_build_owned(&s, own, n, 0), 0);
	check_set(s, ref, d, st);

	/* Collected (31 bytes an ID, in three adds) and built from the parts: the same set, the
	 * same bytes as the plain build's. */
	size_t plain_memory = rix_idset_memory(s);
	rix_idset_free(s);
	struct rix__idcollect *c = NULL;
	assert_int_equal(rix__idcollect_new(&c), 0);
	size_t cut1 = n / 3, cut2 = n - n / 5;
	assert_int_equal(rix__idcollect_add(c, ids, cut1), 0);
	assert_int_equal(rix__idcollect_add(c, ids + cut1, cut2 - cut1), 0);
	assert_int_equal(rix__idcollect_add(c, ids + cut2, n - cut2), 0);
	assert_int_equal(rix__idcollect_count(c), n);
	assert_int_equal(rix__idset_build_collected(&s, c, n % 2 ? 1 : 0), 0);
	check_set(s, ref, d, st);
	assert_int_equal(rix_idset_memory(s), plain_memory);
	rix_idset_free(s);

	/* Taken over, with at least 8 mid bits (the ranked table's shape, which it builds from
	 * records: test_ranked): the same IDs, mid bits 8..15, the same bits an ID. */
	own = rix_malloc((n ? n : 1) * sizeof(*own));
	assert_non_null(own);
	memcpy(own, ids, n * sizeof(*own));
	assert_int_equal(rix__idset_build_owned(&s, own, n, RIX__IDSET_MID8, 1), 0);
	check_set(s, ref, d, st);
	if (d > 0) {
		rix_idset_shape sh;
		rix_idset_get_shape(&sh, s);
		assert_true(sh.mid_bits >= 8 && sh.mid_bits <= 15);
		assert_true(rix_idset_memory(s) <= plain_memory + d / 8 + 64);
	}
	rix_idset_free(s);
	assert_int_equal(rix_idset_build_owned(&s, NULL, 0, RIX__IDSET_MID8), RIX_EINVAL); /* not public */

	/* Taken over, said to be sorted (with its duplicates). */
	own = rix_malloc((n ? n : 1) * sizeof(*own));
	assert_non_null(own);
	memcpy(own, ids, n * sizeof(*own));
	qsort(own, n, sizeof(*own), id_cmp);
	assert_int_equal(rix_idset_build_owned(&s, own, n, RIX_IDSET_SORTED), 0);
	check_set(s, ref, d, st);
	rix_idset_free(s);
	free(ref);
}

static void test_empty_and_null(void **state)
{
	(void)state;
	rix_id id;
	uint64_t st = 7;
	rix_test_random_id(&id, &st);
	bool f = true;

	assert_false(rix_idset_has(NULL, &id));
	assert_int_equal(rix_idset_has_many(&f, NULL, &id, 1), 0);
	assert_false(f);
	assert_int_equal(rix_idset_count(NULL), 0);
	assert_int_equal(rix_idset_memory(NULL), 0);
	assert_int_equal(rix_idset_foreach(NULL, walk_fn, NULL), 0);
	rix_idset_free(NULL);

	rix_idset *s = NULL;
	assert_int_equal(rix_idset_build(&s, NULL, 0), 0);
	assert_int_equal(rix_idset_count(s), 0);
	assert_true(rix_idset_memory(s) > 0);
	f = true;
	assert_false(rix_idset_has(s, &id));
	assert_int_equal(rix_idset_has_many(&f, s, &id, 1), 0);
	assert_false(f);
	assert_int_equal(rix_idset_foreach(s, walk_fn, NULL), 0);
	assert_int_equal(rix_idset_lookup_cost(s, &id), 0);
	rix_idset_free(s);

	/* An empty array taken over is freed (ASan would see a leak). */
	rix_id *own = rix_malloc(sizeof(*own));
	assert_int_equal(rix_idset_build_owned(&s, own, 0, 0), 0);
	assert_int_equal(rix_idset_count(s), 0);
	rix_idset_free(s);
}

static void test_one_id(void **state)
{
	(void)state;
	uint64_t st = 11;
	rix_id id;
	rix_test_random_id(&id, &st);
	build_and_check(&id, 1, &st);
	/* The all-zero and all-ones IDs, alone and together. */
	rix_id edge[2];
	memset(&edge[0], 0, sizeof(edge[0]));
	memset(&edge[1], 0xFF, sizeof(edge[1]));
	build_and_check(&edge[0], 1, &st);
	build_and_check(&edge[1], 1, &st);
	build_and_check(edge, 2, &st);
}

static void test_duplicates(void **state)
{
	(void)state;
	uint64_t st = 13;
	/* n copies of one ID: one ID. */
	rix_id *a = malloc(1000 * sizeof(*a));
	rix_test_random_id(&a[0], &st);
	for (size_t i = 1; i < 1000; i++)
		a[i] = a[0];
	rix_idset *s = must_build(a, 1000);
	assert_int_equal(rix_idset_count(s), 1);
	assert_true(rix_idset_has(s, &a[0]));
	rix_idset_free(s);
	free(a);
	/* Many duplicates among random IDs. */
	a = random_ids(5000, 3, &st);
	build_and_check(a, 5000, &st);
	free(a);
}

static void test_sizes_across_powers_of_two(void **state)
{
	(void)state;
	uint64_t st = 17;
	for (unsigned p = 1; p <= 17; p++) {
		size_t sizes[3] = { ((size_t)1 << p) - 1, (size_t)1 << p, ((size_t)1 << p) + 1 };
		for (int i = 0; i < 3; i++) {
			/* every size up to 2^12, then a few across the larger powers */
			if (p > 12 && i == 1)
				continue;
			rix_id *a = random_ids(sizes[i], 50, &st);
			build_and_check(a, sizes[i], &st);
			free(a);
		}
	}
	/* In between: 0.6 to 1.4 of a power of two, where the shape's choices change. */
	size_t mid[] = { 600, 700, 1200, 1400, 5000, 6000, 40000, 90000 };
	for (size_t i = 0; i < sizeof(mid) / sizeof(mid[0]); i++) {
		rix_id *a = random_ids(mid[i], 0, &st);
		build_and_check(a, mid[i], &st);
		free(a);
	}
}

/* IDs that share their first `shared` bits with base, the rest random. */
static rix_id *crafted_ids(size_t n, unsigned shared, const rix_id *base, uint64_t *st)
{
	rix_id *a = random_ids(n, 0, st);
	for (size_t i = 0; i < n; i++) {
		for (unsigned b = 0; b < shared; b++) {
			uint8_t m = (uint8_t)(0x80u >> (b % 8));
			a[i].b[b / 8] = (uint8_t)((a[i].b[b / 8] & ~m) | (base->b[b / 8] & m));
		}
	}
	return a;
}

static unsigned log2_floor(size_t n)
{
	return 63u - (unsigned)__builtin_clzll((unsigned long long)n);
}

/* s exported and imported from a copy of its block: the same set (ids[0..n) its IDs); a block
 * whose directory (an overflow block's starts included) is off refused. */
static void image_round_trip(const rix_idset *s, const rix_id *ids, size_t n, uint64_t *st)
{
	uint64_t desc[RIX__IDSET_DESC_WORDS];
	const void *block;
	size_t size;
	rix__idset_export(s, desc, &block, &size);
	rix_id *ref = malloc(n * sizeof(*ref));
	memcpy(ref, ids, n * sizeof(*ref));
	size_t d = ref_make(ref, n);
	rix_idset_shape sh;
	rix_idset_get_shape(&sh, s);
	for (int bad = 0; bad < 8; bad++) {
		uint8_t *copy = rix_malloc(size);
		assert_non_null(copy);
		memcpy(copy, block, size);
		uint64_t dd[RIX__IDSET_DESC_WORDS];
		memcpy(dd, desc, sizeof(dd));
		if (bad == 1)
			dd[RIX__IDSET_D_N]++; /* one ID more than the directory gives */
		if (bad == 2 && sh.overflow_blocks > 0) { /* the last overflow block's end past n */
			uint32_t *ov = (uint32_t *)(void *)(copy + desc[RIX__IDSET_D_OV]);
			ov[sh.overflow_blocks * (sh.block_buckets + 1) - 1] += 1;
		} else if (bad == 2) {
			dd[RIX__IDSET_D_SIZE]--; /* a block of another size than the one given */
		}
		if (bad == 3)
			dd[RIX__IDSET_D_K] = 33;
		/* The first block's code (when it is not held as overflow starts): its first zero made
		 * a one (an ID more: the runs no longer end at n, or the next block's base is off),
		 * or every bit of it ones (fewer zeros than buckets). */
		uint64_t *blk0 = (uint64_t *)(void *)(copy + desc[RIX__IDSET_D_DIR]);
		bool coded = (blk0[0] & 0x80000000u) == 0;
		if (bad == 4 && coded) {
			uint64_t z = ~blk0[0] & ~0xFFFFFFFFull;
			unsigned w = 0;
			while (w < 7 && z == 0)
				z = ~blk0[++w];
			blk0[w] |= z & -z;
		}
		if (bad == 5 && coded) {
			blk0[0] |= ~0xFFFFFFFFull;
			for (unsigned w = 1; w < 8; w++)
				blk0[w] = ~0ull;
		}
		if ((bad == 4 || bad == 5) && !coded)
			dd[RIX__IDSET_D_N]++; /* an overflow block: refused as bad == 1 */
		/* Offsets whose sums with the arrays' sizes wrap past 2^64 into the block: the
		 * directory's, the mid bits' (with none, extra bytes over the limit). */
		if (bad == 6)
			dd[RIX__IDSET_D_DIR] = UINT64_MAX - 63;
		if (bad == 7 && sh.mid_bits > 0)
			dd[RIX__IDSET_D_MID] = UINT64_MAX - 7;
		else if (bad == 7)
			dd[RIX__IDSET_D_EXTRA] = 17;
		rix_idset *back = NULL;
		int rc = rix__idset_import(&back, dd, copy, size);
		if (bad == 0) {
			assert_int_equal(rc, 0);
			check_set(back, ref, d, st);
			rix_idset_free(back);
		} else {
			assert_int_equal(rc, RIX_ECORRUPT);
			assert_null(back);
			rix_free(copy); /* still the caller's */
		}
	}
	free(ref);
}

static void test_crafted_shared_prefix(void **state)
{
	(void)state;
	uint64_t st = 19;
	rix_id base;
	rix_test_random_id(&base, &st);
	/* 100: a long run in a block that does not overflow (the directory walk over words of all
	 * ones); the last sorted on several threads */
	size_t sizes[] = { 9, 100, 600, 20000, 70000 };
	for (size_t t = 0; t < sizeof(sizes) / sizeof(sizes[0]); t++) {
		size_t n = sizes[t];
		rix_id *a = crafted_ids(n, 32, &base, &st);
		build_and_check(a, n, &st);

		rix_idset *s = must_build(a, n);
		rix_idset_use_portable(s, t % 2 == 1);
		rix_idset_shape sh;
		rix_idset_get_shape(&sh, s);
		assert_int_equal(sh.longest_bucket, n); /* all in one bucket */
		image_round_trip(s, a, n, &st);
		if (n + sh.block_buckets > 480)
			assert_true(sh.overflow_blocks >= 1);
		else
			assert_int_equal(sh.overflow_blocks, 0);
		/* Bounded: present and absent IDs of that bucket compare at most log2(n) + 1. */
		size_t bound = n <= 8 ? 8 : log2_floor(n) + 1;
		for (size_t i = 0; i < n; i += 1 + n / 500) {
			assert_true(rix_idset_lookup_cost(s, &a[i]) <= bound);
			rix_id miss = a[i];
			miss.b[31] ^= 1;
			assert_true(rix_idset_lookup_cost(s, &miss) <= bound);
		}
		rix_idset_free(s);
		free(a);
	}
	/* Half random, half crafted into one bucket: both kinds found, their neighbours not. */
	rix_id *a = random_ids(40000, 0, &st);
	rix_id *c = crafted_ids(20000, 40, &base, &st);
	memcpy(a + 20000, c, 20000 * sizeof(*a));
	build_and_check(a, 40000, &st);
	free(c);
	free(a);
	/* Crafted IDs that differ in the last byte only. */
	a = malloc(256 * sizeof(*a));
	for (unsigned i = 0; i < 256; i++) {
		a[i] = base;
		a[i].b[31] = (uint8_t)i;
	}
	build_and_check(a, 255, &st); /* one left out: it must not be found */
	rix_idset *s = must_build(a, 255);
	expect(s, &a[255], false);
	rix_idset_free(s);
	free(a);
}

/* Runs of every length around the scan/binary-search boundary (LINEAR_MAX = 8) and blocks
 * that overflow at various fills, among random IDs. */
static void test_clustered_runs(void **state)
{
	(void)state;
	uint64_t st = 43;
	size_t n = 0, cap = 30000;
	rix_id *a = malloc(cap * sizeof(*a));
	for (unsigned len = 1; len <= 40; len++) {
		rix_id base;
		rix_test_random_id(&base, &st);
		rix_id *c = crafted_ids(len, 40, &base, &st); /* one bucket: a run of len */
		memcpy(a + n, c, len * sizeof(*a));
		n += len;
		free(c);
	}
	for (unsigned shared = 8; shared <= 24; shared += 4) { /* dense stretches of buckets */
		rix_id base;
		rix_test_random_id(&base, &st);
		rix_id *c = crafted_ids(1500, shared, &base, &st);
		memcpy(a + n, c, 1500 * sizeof(*a));
		n += 1500;
		free(c);
	}
	rix_id *r = random_ids(cap - n, 0, &st);
	memcpy(a + n, r, (cap - n) * sizeof(*a));
	free(r);
	build_and_check(a, cap, &st);
	rix_idset *s = must_build(a, cap);
	rix_idset_shape sh;
	rix_idset_get_shape(&sh, s);
	assert_true(sh.longest_bucket >= 40);
	assert_true(sh.overflow_blocks >= 1);
	rix_idset_free(s);
	free(a);
}

static void test_sorted_flag_checked(void **state)
{
	(void)state;
	uint64_t st = 23;
	rix_id *a = rix_malloc(100 * sizeof(*a));
	assert_non_null(a);
	for (size_t i = 0; i < 100; i++)
		rix_test_random_id(&a[i], &st);
	qsort(a, 100, sizeof(*a), id_cmp);
	rix_id t = a[40];
	a[40] = a[41];
	a[41] = t;
	rix_id keep[100];
	memcpy(keep, a, sizeof(keep));
	rix_idset *s = (rix_idset *)1;
	assert_int_equal(rix_idset_build_owned(&s, a, 100, RIX_IDSET_SORTED), RIX_EINVAL);
	assert_null(s);
	assert_non_null(strstr(rix_error_last(), "not"));
	assert_memory_equal(a, keep, sizeof(keep)); /* still the caller's, untouched */
	assert_int_equal(rix_idset_build_owned(&s, a, 100, 0x10), RIX_EINVAL);
	assert_null(s);
	/* Without the flag the same array builds. */
	assert_int_equal(rix_idset_build_owned(&s, a, 100, 0), 0);
	for (size_t i = 0; i < 100; i++)
		assert_true(rix_idset_has(s, &keep[i]));
	rix_idset_free(s);
}

struct oom_arg {
	const rix_id *ids;
	size_t n;
	int owned;
};

static int oom_round(void *p)
{
	struct oom_arg *a = p;
	rix_idset *s = NULL;
	int rc;
	if (a->owned) {
		rix_id *own = rix_malloc(a->n * sizeof(*own));
		if (own == NULL)
			return rix_error_set(RIX_ENOMEM, "test: out of memory");
		memcpy(own, a->ids, a->n * sizeof(*own));
		rc = rix_idset_build_owned(&s, own, a->n, 0);
		if (rc != 0) {
			/* still ours, the same IDs */
			assert_null(s);
			rix_free(own);
			return rc;
		}
	} else if (a->owned == 2) { /* collected, then built: nothing kept on failure */
		struct rix__idcollect *c = NULL;
		rc = rix__idcollect_new(&c);
		if (rc == 0)
			rc = rix__idcollect_add(c, a->ids, a->n);
		if (rc != 0) {
			rix__idcollect_free(c);
			return rc;
		}
		rc = rix__idset_build_collected(&s, c, 0);
		if (rc != 0) {
			assert_null(s);
			return rc;
		}
	} else {
		rc = rix_idset_build(&s, a->ids, a->n);
		if (rc != 0) {
			assert_null(s);
			return rc;
		}
	}
	for (size_t i = 0; i < a->n; i++)
		assert_true(rix_idset_has(s, &a->ids[i]));
	rix_idset_free(s);
	return 0;
}

static void test_allocation_failure_n(void **state)
{
	(void)state;
	uint64_t st = 29;
	rix_id base;
	rix_test_random_id(&base, &st);
	/* Crafted so that blocks overflow and the ov array is allocated too. */
	rix_id *a = crafted_ids(3000, 24, &base, &st);
	struct oom_arg arg = { a, 3000, 0 };
	assert_true(rix_test_oom_loop("idset build", oom_round, &arg, 100) >= 3);
	arg.owned = 1;
	assert_true(rix_test_oom_loop("idset build_owned", oom_round, &arg, 100) >= 3);
	arg.owned = 2;
	assert_true(rix_test_oom_loop("idset build_collected", oom_round, &arg, 100) >= 3);
	free(a);
}

static int count_fn(void *payload, const rix_id *id)
{
	(void)id;
	++*(size_t *)payload;
	return 0;
}

static void test_foreach_stops(void **state)
{
	(void)state;
	uint64_t st = 31;
	rix_id *a = random_ids(1000, 0, &st);
	rix_idset *s = must_build(a, 1000);
	size_t d = ref_make(a, 1000);
	struct walk w = { a, d, 0, 10 };
	assert_int_equal(rix_idset_foreach(s, walk_fn, &w), 42);
	assert_int_equal(w.at, 10);
	size_t c = 0;
	assert_int_equal(rix_idset_foreach(s, count_fn, &c), 0);
	assert_int_equal(c, d);
	rix_idset_free(s);
	free(a);
}

/* 1M random IDs: at most 30 bytes an ID, everything the set allocated included. */
static void test_memory_per_id_1m(void **state)
{
	(void)state;
	uint64_t st = 37;
	size_t n = 1000000;
	rix_id *a = random_ids(n, 0, &st);
	assert_null(rix_idset_alloc_ids(0));
	assert_null(rix_idset_alloc_ids(SIZE_MAX / 16));
	rix_id *own = rix_idset_alloc_ids(n);
	assert_non_null(own);
	memcpy(own, a, n * sizeof(*own));
	rix_idset *s = NULL;
	assert_int_equal(rix_idset_build_owned(&s, own, n, 0), 0);
	assert_int_equal(rix_idset_count(s), n);
	double per = (double)rix_idset_memory(s) / (double)n;
	rix_idset_shape sh;
	rix_idset_get_shape(&sh, s);
	printf("idset n=%zu: %.3f bytes/ID (k=%u G=%u tail=%u mid=%u blocks=%zu overflow=%zu longest=%zu)\n",
	       n, per, sh.key_bits, sh.block_buckets, sh.tail_bytes, sh.mid_bits, sh.blocks,
	       sh.overflow_blocks, sh.longest_bucket);
	assert_true(per <= 30.0);
	/* Every ID found; as many random ones not. */
	bool *f = malloc(n * sizeof(*f));
	assert_int_equal(rix_idset_has_many(f, s, a, n), n);
	rix_id *u = random_ids(n, 0, &st);
	size_t hits = rix_idset_has_many(f, s, u, n);
	assert_int_equal(hits, 0);
	free(u);
	free(f);
	rix_idset_free(s);
	free(a);
}

struct reader {
	const rix_idset *s;
	const rix_id *known, *unknown;
	size_t n;
	size_t found_known, found_unknown;
};

static void *reader_main(void *arg)
{
	struct reader *r = arg;
	bool f[64];
	for (size_t i = 0; i < r->n; i++) {
		r->found_known += rix_idset_has(r->s, &r->known[i]);
		r->found_unknown += rix_idset_has(r->s, &r->unknown[i]);
	}
	for (size_t i = 0; i + 64 <= r->n; i += 64) {
		r->found_known += rix_idset_has_many(f, r->s, &r->known[i], 64);
		r->found_unknown += rix_idset_has_many(f, r->s, &r->unknown[i], 64);
	}
	return NULL;
}

/* A built set is immutable: threads look it up at once (TSan checks the claim). */
static void test_concurrent_lookups(void **state)
{
	(void)state;
	uint64_t st = 41;
	size_t n = 64 * 313; /* whole batches of 64 */
	rix_id *a = random_ids(n, 0, &st);
	rix_id *u = random_ids(n, 0, &st);
	rix_idset *s = must_build(a, n);
	pthread_t th[4];
	struct reader r[4];
	for (int i = 0; i < 4; i++) {
		r[i] = (struct reader){ s, a, u, n, 0, 0 };
		assert_int_equal(pthread_create(&th[i], NULL, reader_main, &r[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		assert_int_equal(pthread_join(th[i], NULL), 0);
		assert_int_equal(r[i].found_known, 2 * n);
		assert_int_equal(r[i].found_unknown, 0);
	}
	rix_idset_free(s);
	free(u);
	free(a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_empty_and_null),
		cmocka_unit_test(test_one_id),
		cmocka_unit_test(test_duplicates),
		cmocka_unit_test(test_sizes_across_powers_of_two),
		cmocka_unit_test(test_crafted_shared_prefix),
		cmocka_unit_test(test_clustered_runs),
		cmocka_unit_test(test_sorted_flag_checked),
		cmocka_unit_test(test_allocation_failure_n),
		cmocka_unit_test(test_foreach_stops),
		cmocka_unit_test(test_concurrent_lookups),
		cmocka_unit_test(test_memory_per_id_1m),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
