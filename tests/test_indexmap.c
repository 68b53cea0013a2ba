/*
 * tests/test_indexmap.c — the mutable table against a simple reference (a sorted array with
 * binary search), on random inputs with duplicates, for several batch sizes and table sizes
 * that cross growth points, added one at a time and in calls of add_many; many copies of one ID;
 * lines crowded by chosen IDs, past the last line and round to the first; the two forms of the
 * tag compare; allocation failure N; reserve; a table large enough to take its entry blocks from
 * chunks.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "index/hash.h"
#include "index/tagmatch.h"
#include "rix/error.h"
#include "rix/indexmap.h"
#include "testutil.h"

struct ref {
	rix_id id;
	rix_loc loc;
	uint32_t seq; /* insertion number */
};

static int ref_cmp(const void *a, const void *b)
{
	const struct ref *x = a, *y = b;
	int c = memcmp(x->id.b, y->id.b, RIX_ID_SIZE);
	if (c != 0)
		return c;
	return (x->seq < y->seq) ? -1 : (x->seq > y->seq);
}

/* Index of the first reference entry with this ID, or -1. */
static long ref_first(const struct ref *r, size_t n, const rix_id *id)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (memcmp(r[mid].id.b, id->b, RIX_ID_SIZE) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return (lo < n && memcmp(r[lo].id.b, id->b, RIX_ID_SIZE) == 0) ? (long)lo : -1;
}

/* Makes n entries; about one in `dupe_every` reuses an earlier ID. */
static void make_entries(struct ref *e, size_t n, unsigned dupe_every, uint64_t *st)
{
	for (size_t i = 0; i < n; i++) {
		if (i > 0 && dupe_every && rix_test_next(st) % dupe_every == 0)
			e[i].id = e[rix_test_next(st) % i].id;
		else
			rix_test_random_id(&e[i].id, st);
		e[i].loc.pack = (uint32_t)rix_test_next(st);
		e[i].loc.offset = (uint32_t)rix_test_next(st);
		e[i].loc.length = (uint32_t)rix_test_next(st);
		e[i].loc.uncompressed_length = (uint32_t)rix_test_next(st);
		e[i].seq = (uint32_t)i;
	}
}

/* The IDs and locations of e[0, n) as add_many takes them. */
static void split_entries(const struct ref *e, size_t n, rix_id *ids, rix_loc *locs)
{
	for (size_t i = 0; i < n; i++) {
		ids[i] = e[i].id;
		locs[i] = e[i].loc;
	}
}

static int loc_eq(const rix_loc *a, const rix_loc *b)
{
	return memcmp(a, b, sizeof(*a)) == 0;
}

/* Checks every behaviour of m against the first n entries of e. */
static void check_against_reference(const rix_indexmap *m, const struct ref *e, size_t n, uint64_t *st)
{
	assert_int_equal(rix_indexmap_count(m), n);
	struct ref *r = malloc((n ? n : 1) * sizeof(*r));
	memcpy(r, e, n * sizeof(*r));
	qsort(r, n, sizeof(*r), ref_cmp);

	/* Iteration is insertion order. */
	for (size_t i = 0; i < n; i++) {
		const rix_id *id;
		rix_loc loc;
		rix_indexmap_entry(&id, &loc, m, (uint32_t)i);
		assert_memory_equal(id->b, e[i].id.b, RIX_ID_SIZE);
		assert_true(loc_eq(&loc, &e[i].loc));
	}

	/* Known IDs: newest match first, lookup_all counts every copy. */
	rix_loc all[64];
	for (size_t i = 0; i < n; i++) {
		long f = ref_first(r, n, &e[i].id);
		assert_true(f >= 0);
		size_t k = (size_t)f;
		while (k + 1 < n && memcmp(r[k + 1].id.b, e[i].id.b, RIX_ID_SIZE) == 0)
			k++;
		size_t copies = k - (size_t)f + 1;
		rix_loc got;
		assert_int_equal(rix_indexmap_lookup(&got, m, &e[i].id), 0);
		assert_true(loc_eq(&got, &r[k].loc));
		size_t total = rix_indexmap_lookup_all(all, 64, m, &e[i].id);
		assert_int_equal(total, copies);
		for (size_t j = 0; j < copies && j < 64; j++)
			assert_true(loc_eq(&all[j], &r[k - j].loc));
	}

	/* Unknown IDs. */
	for (int i = 0; i < 2000; i++) {
		rix_id id;
		rix_test_random_id(&id, st);
		assert_int_equal(rix_indexmap_lookup(NULL, m, &id), RIX_ENOTFOUND);
		assert_int_equal(rix_indexmap_lookup_all(all, 64, m, &id), 0);
	}

	/* Batched: a mix of known and unknown, in sizes that straddle the group size. */
	size_t q = n < 500 ? n * 2 + 3 : 1003;
	rix_id *ids = malloc(q * sizeof(*ids));
	rix_loc *out = malloc(q * sizeof(*out));
	bool *found = malloc(q * sizeof(bool));
	size_t want = 0;
	for (size_t i = 0; i < q; i++) {
		if (n > 0 && i % 3 != 0) {
			ids[i] = e[rix_test_next(st) % n].id;
			want++;
		} else {
			rix_test_random_id(&ids[i], st);
		}
	}
	assert_int_equal(rix_indexmap_lookup_many(out, found, m, ids, q), want);
	for (size_t i = 0; i < q; i++) {
		rix_loc one;
		int rc = rix_indexmap_lookup(&one, m, &ids[i]);
		assert_int_equal(found[i], rc == 0);
		if (rc == 0)
			assert_true(loc_eq(&one, &out[i]));
	}
	assert_int_equal(rix_indexmap_lookup_many(NULL, NULL, m, ids, q), want);
	free(ids);
	free(out);
	free(found);
	free(r);
}

static void test_reference_sizes_and_batches(void **state)
{
	(void)state;
	static const uint32_t batches[] = { 1, 4, 16, 1024, 5000 /* rounds up to 8192 */ };
	/* Lines 2, 3, 5, 8, 12, ... hold 19, 28, 48, 76, 115 IDs at 80%: growth points. */
	static const size_t sizes[] = { 0, 1, 2, 19, 20, 29, 48, 49, 77, 116, 1000, 4097, 70000 };
	uint64_t st = 42;
	for (size_t b = 0; b < sizeof(batches) / sizeof(batches[0]); b++) {
		for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
			size_t n = sizes[s];
			struct ref *e = malloc((n ? n : 1) * sizeof(*e));
			make_entries(e, n, 7, &st);
			rix_indexmap *m;
			assert_int_equal(rix_indexmap_new_seeded(&m, batches[b], rix_test_next(&st)), 0);
			assert_true(rix_indexmap_batch(m) >= batches[b]);
			for (size_t i = 0; i < n; i++)
				assert_int_equal(rix_indexmap_add(m, &e[i].id, &e[i].loc), 0);
			check_against_reference(m, e, n, &st);
			rix_indexmap_free(m);
			free(e);
		}
	}
}

/* Both forms of the tag compare give, for every line and tag, the slots whose tag equals it. */
static void test_tag_mask_forms(void **state)
{
	(void)state;
	uint64_t st = 11;
	_Alignas(16) uint8_t line[16];
	for (int r = 0; r < 200000; r++) {
		/* Tags from a small alphabet (0, 1, 0x7f, 0x80, 0xff and random) so that equal bytes,
		 * zero bytes and bytes next to them all occur. */
		static const uint8_t pick[] = { 0, 1, 0x7f, 0x80, 0xff };
		for (int i = 0; i < 16; i++) {
			uint64_t x = rix_test_next(&st);
			line[i] = (x & 7) < 5 ? pick[x & 7] : (uint8_t)(x >> 8);
		}
		uint64_t x = rix_test_next(&st);
		uint8_t t = (x & 1) ? line[(x >> 1) % RIX__TAGS] : (uint8_t)(x >> 8);
		uint32_t want = 0;
		for (unsigned i = 0; i < RIX__TAGS; i++)
			want |= (uint32_t)(line[i] == t) << i;
		assert_int_equal(rix__tag_mask_swar(line, t), want);
		assert_int_equal(rix__tag_mask(line, t), want);
	}
}

/*
 * Many copies of one ID among other IDs: the newest copy is found, lookup_all lists every copy
 * newest first, and the other IDs (which share lines with the copies' one slot) are unaffected,
 * across growth (which leaves older copies out of the lines).
 */
static void test_many_copies(void **state)
{
	(void)state;
	enum { N = 9000 };
	uint64_t st = 21;
	struct ref *e = malloc(N * sizeof(*e));
	make_entries(e, N, 0, &st);
	rix_id a = e[0].id, b = e[1].id;
	size_t nb = 1;
	for (size_t i = 2; i < N; i++) {
		if (i % 3 == 0)
			e[i].id = a;
		else if (i % 100 == 1)
			e[i].id = b, nb++;
	}
	rix_indexmap *m;
	assert_int_equal(rix_indexmap_new_seeded(&m, 64, 5), 0);
	for (size_t i = 0; i < N; i++)
		assert_int_equal(rix_indexmap_add(m, &e[i].id, &e[i].loc), 0);
	rix_loc *all = malloc(N * sizeof(*all));
	size_t na = rix_indexmap_lookup_all(all, N, m, &a);
	assert_int_equal(na, 1 + (N - 1) / 3);
	size_t j = 0;
	for (size_t i = N; i-- > 0;) {
		if (memcmp(e[i].id.b, a.b, RIX_ID_SIZE) == 0)
			assert_true(loc_eq(&all[j++], &e[i].loc));
	}
	assert_int_equal(j, na);
	rix_loc got;
	assert_int_equal(rix_indexmap_lookup(&got, m, &a), 0);
	assert_true(loc_eq(&got, &e[N - 1 - (N - 1) % 3].loc));
	assert_int_equal(nb, 60);
	assert_int_equal(rix_indexmap_lookup_all(all, 3, m, &b), nb);
	check_against_reference(m, e, N, &st);
	free(all);
	rix_indexmap_free(m);
	free(e);
}

/* A random ID whose hash under seed has home line `line` of nl. */
static void id_in_line(rix_id *id, uint64_t seed, uint32_t nl, uint32_t line, uint64_t *st)
{
	do
		rix_test_random_id(id, st);
	while (rix__hash_bucket(rix__hash_id(id, seed), nl) != line);
}

/*
 * Lines crowded on purpose (what a flood of crafted IDs would do if the seed were known): 40
 * IDs whose home is the last of 10 lines fill it and overflow past the end into lines 0, 1, 2,
 * which hold IDs of their own. Every ID is found, IDs absent from the crowded lines are not,
 * singly and batched, and growth later spreads them out again.
 */
static void test_crowded_lines_wrap(void **state)
{
	(void)state;
	enum { NL = 10, LAST = 40, FIRST = 15, OTHER = 30, N = LAST + FIRST + OTHER, ABSENT = 200 };
	const uint64_t seed = 77;
	uint64_t st = 31;
	struct ref *e = malloc((N + 200) * sizeof(*e));
	make_entries(e, N + 200, 0, &st);
	for (size_t i = 0; i < N; i++) {
		if (i % 2 == 0 && i / 2 < LAST)
			id_in_line(&e[i].id, seed, NL, NL - 1, &st);
		else if (i % 5 == 1 && i / 5 < FIRST)
			id_in_line(&e[i].id, seed, NL, 0, &st);
	}
	rix_indexmap *m;
	assert_int_equal(rix_indexmap_new_seeded(&m, 16, seed), 0);
	/* 96 IDs at 80% of 12 slots: 10 lines, as NL says. */
	assert_int_equal(rix_indexmap_reserve(m, 96), 0);
	for (size_t i = 0; i < N; i++)
		assert_int_equal(rix_indexmap_add(m, &e[i].id, &e[i].loc), 0);
	check_against_reference(m, e, N, &st);

	rix_id *ids = malloc(ABSENT * sizeof(*ids));
	bool *found = malloc(ABSENT);
	for (size_t i = 0; i < ABSENT; i++) {
		id_in_line(&ids[i], seed, NL, i % 2 ? NL - 1 : (uint32_t)(i % 3), &st);
		assert_int_equal(rix_indexmap_lookup(NULL, m, &ids[i]), RIX_ENOTFOUND);
		assert_int_equal(rix_indexmap_lookup_all(NULL, 0, m, &ids[i]), 0);
	}
	assert_int_equal(rix_indexmap_lookup_many(NULL, found, m, ids, ABSENT), 0);
	for (size_t i = 0; i < ABSENT; i++)
		assert_false(found[i]);
	/* Past the reserve: the lines grow and every answer stays. */
	for (size_t i = N; i < N + 200; i++)
		assert_int_equal(rix_indexmap_add(m, &e[i].id, &e[i].loc), 0);
	check_against_reference(m, e, N + 200, &st);
	free(found);
	free(ids);
	rix_indexmap_free(m);
	free(e);
}

/*
 * rix_indexmap_add_many is n adds in order: for calls of 1, 3, 15, 16, 17, 33 and 64 keys
 * (around its lookahead of 16) and of the whole table, sizes that cross growth points (the lines requested before a growth are the old
 * ones), copies of one ID within one call and across calls, every answer is the reference's,
 * and the entries are numbered as single adds number them.
 */
static void test_add_many_as_adds(void **state)
{
	(void)state;
	static const size_t chunks[] = { 1, 3, 15, 16, 17, 33, 64, 1000000 };
	static const size_t sizes[] = { 0, 1, 19, 20, 77, 116, 1000, 4097, 70000 };
	uint64_t st = 4242;
	for (size_t c = 0; c < sizeof(chunks) / sizeof(chunks[0]); c++) {
		for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
			size_t n = sizes[s];
			struct ref *e = malloc((n ? n : 1) * sizeof(*e));
			make_entries(e, n, 5, &st);
			/* Runs of one ID inside a call, closer than the lookahead. */
			for (size_t i = 3; i < n; i += 97)
				e[i].id = e[i - 2].id;
			rix_id *ids = malloc((n ? n : 1) * sizeof(*ids));
			rix_loc *locs = malloc((n ? n : 1) * sizeof(*locs));
			split_entries(e, n, ids, locs);
			rix_indexmap *m;
			assert_int_equal(rix_indexmap_new_seeded(&m, 16, rix_test_next(&st)), 0);
			for (size_t i = 0; i < n; i += chunks[c]) {
				size_t k = n - i < chunks[c] ? n - i : chunks[c];
				assert_int_equal(rix_indexmap_add_many(m, ids + i, locs + i, k), 0);
				assert_int_equal(rix_indexmap_count(m), i + k);
			}
			assert_int_equal(rix_indexmap_add_many(m, ids, locs, 0), 0);
			check_against_reference(m, e, n, &st);
			rix_indexmap_free(m);
			free(locs);
			free(ids);
			free(e);
		}
	}
}

/*
 * add_many into lines crowded by chosen IDs (the adds that go past a full home line, and those
 * that meet a copy there): the answers are those of single adds.
 */
static void test_add_many_crowded(void **state)
{
	(void)state;
	enum { NL = 10, N = 90 };
	const uint64_t seed = 78;
	uint64_t st = 32;
	struct ref *e = malloc(N * sizeof(*e));
	make_entries(e, N, 6, &st);
	for (size_t i = 0; i < N; i += 2)
		id_in_line(&e[i].id, seed, NL, NL - 1, &st);
	e[N - 1].id = e[0].id; /* a copy of an ID stored in the crowded line */
	rix_id ids[N];
	rix_loc locs[N];
	split_entries(e, N, ids, locs);
	rix_indexmap *m;
	assert_int_equal(rix_indexmap_new_seeded(&m, 16, seed), 0);
	assert_int_equal(rix_indexmap_reserve(m, 96), 0); /* 10 lines, as NL says */
	assert_int_equal(rix_indexmap_add_many(m, ids, locs, N), 0);
	check_against_reference(m, e, N, &st);
	rix_indexmap_free(m);
	free(e);
}

static void test_reserve_then_no_allocation(void **state)
{
	(void)state;
	uint64_t st = 7;
	size_t n = 30000;
	struct ref *e = malloc(n * sizeof(*e));
	make_entries(e, n, 0, &st);
	rix_test_failalloc_install(0);
	rix_indexmap *m;
	assert_int_equal(rix_indexmap_new_batch(&m, 256), 0);
	assert_int_equal(rix_indexmap_reserve(m, n), 0);
	long before = rix_test_failalloc_count();
	for (size_t i = 0; i < n; i++)
		assert_int_equal(rix_indexmap_add(m, &e[i].id, &e[i].loc), 0);
	assert_int_equal(rix_test_failalloc_count(), before);
	/* Reserved at 80% of the slots: 48-byte entries and 6.7 bytes of lines an entry. */
	double per = (double)rix_indexmap_memory(m) / (double)n;
	assert_true(per >= 52.0 && per <= 56.5);
	check_against_reference(m, e, n, &st);
	rix_indexmap_free(m);
	assert_int_equal(rix_test_failalloc_live(), 0);
	rix_test_failalloc_remove();
	free(e);
}

/*
 * Fail allocation N for N = 1, 2, ... while building a table that crosses several growth
 * points: the failing add returns RIX_ENOMEM, every earlier entry is still found, adding can
 * continue afterwards, and freeing leaves nothing allocated.
 */
struct oom_map {
	struct ref *e;
	size_t n;
	uint64_t st;
};

/* One round: a failing add is retried (the next allocation succeeds), so the round succeeds
 * unless the table itself could not be made. */
static int oom_map_round(void *arg)
{
	struct oom_map *a = arg;
	rix_indexmap *m = NULL;
	int rc = rix_indexmap_new_seeded(&m, 64, 1);
	if (rc != 0) {
		assert_null(m);
		return rc;
	}
	size_t added = 0;
	for (size_t i = 0; i < a->n; i++) {
		rc = rix_indexmap_add(m, &a->e[added].id, &a->e[added].loc);
		if (rc != 0) {
			assert_int_equal(rc, RIX_ENOMEM);
			assert_true(rix_error_last()[0] != '\0');
			assert_int_equal(rix_indexmap_count(m), added);
			i--; /* retry the same entry: the next allocation succeeds */
			continue;
		}
		added++;
	}
	check_against_reference(m, a->e, a->n, &a->st);
	rix_indexmap_free(m);
	return 0;
}

/* The same with add_many in calls of 37: a failing call has added the entries before the one
 * that failed (the count says how many); the rest are added again. */
static int oom_map_many_round(void *arg)
{
	struct oom_map *a = arg;
	enum { CALL = 37 };
	rix_indexmap *m = NULL;
	int rc = rix_indexmap_new_seeded(&m, 64, 1);
	if (rc != 0) {
		assert_null(m);
		return rc;
	}
	rix_id ids[CALL];
	rix_loc locs[CALL];
	size_t added = 0;
	while (added < a->n) {
		size_t k = a->n - added < CALL ? a->n - added : CALL;
		split_entries(a->e + added, k, ids, locs);
		rc = rix_indexmap_add_many(m, ids, locs, k);
		size_t now = rix_indexmap_count(m);
		assert_true(now >= added && now <= added + k);
		if (rc != 0) {
			assert_int_equal(rc, RIX_ENOMEM);
			assert_true(rix_error_last()[0] != '\0');
			assert_true(now < added + k);
		} else {
			assert_int_equal(now, added + k);
		}
		added = now;
	}
	check_against_reference(m, a->e, a->n, &a->st);
	rix_indexmap_free(m);
	return 0;
}

static void test_allocation_failure_n(void **state)
{
	(void)state;
	struct oom_map a = { .n = 3000, .st = 99 };
	a.e = malloc(a.n * sizeof(*a.e));
	make_entries(a.e, a.n, 5, &a.st);
	rix_test_oom_loop("indexmap", oom_map_round, &a, 100000);
	rix_test_oom_loop("indexmap add_many", oom_map_many_round, &a, 100000);
	free(a.e);
}

/*
 * A table past CARVE_FROM (12 MiB of entries: 262144 at the default batch) takes its later
 * blocks from 12 MiB chunks: every answer as before; memory() counts the newest chunk's
 * unused part; a reserve makes its chunk no larger than needed; failing each allocation made
 * past the 250,000th add (the chunk list, a chunk, the lines) fails that add alone, and
 * freeing returns everything.
 */
static void chunk_build(rix_indexmap **out, const struct ref *e, size_t n, long *first)
{
	rix_indexmap *m;
	assert_int_equal(rix_indexmap_new_seeded(&m, 0, 5), 0);
	size_t added = 0;
	while (added < n) {
		if (first != NULL && added == 250000)
			*first = rix_test_failalloc_count() + 1;
		int rc = rix_indexmap_add(m, &e[added].id, &e[added].loc);
		if (rc != 0) {
			assert_int_equal(rc, RIX_ENOMEM);
			assert_int_equal(rix_indexmap_count(m), added);
			continue; /* the next allocation succeeds */
		}
		added++;
	}
	*out = m;
}

static void test_chunked_blocks(void **state)
{
	(void)state;
	uint64_t st = 11;
	const size_t n = 280000;
	struct ref *e = malloc(n * sizeof(*e));
	make_entries(e, n, 0, &st);

	rix_indexmap *m;
	long first = 0;
	rix_test_failalloc_install(0);
	chunk_build(&m, e, n, &first);
	long last = rix_test_failalloc_count();
	assert_true(last >= first); /* the chunk at least */
	check_against_reference(m, e, n, &st);
	/* 274 blocks of 1024 entries: 256 from malloc, 18 carved from a chunk of 256, whose 238
	 * others (11.2 MiB, 41.8 bytes an entry) memory() counts besides 48-byte entries and
	 * 6.7-10 bytes of lines. */
	double per = (double)rix_indexmap_memory(m) / (double)n;
	assert_true(per > 94.0 && per < 104.0);
	rix_indexmap_free(m);
	assert_int_equal(rix_test_failalloc_live(), 0);
	rix_test_failalloc_remove();

	for (long at = first; at <= last; at++) {
		rix_test_failalloc_install(at);
		chunk_build(&m, e, n, NULL);
		assert_true(rix_test_failalloc_count() > at); /* the failure happened, then a retry */
		for (size_t i = 0; i < n; i += 97) { /* distinct IDs: each answers its own */
			rix_loc loc;
			assert_int_equal(rix_indexmap_lookup(&loc, m, &e[i].id), 0);
			assert_true(loc_eq(&loc, &e[i].loc));
		}
		rix_indexmap_free(m);
		assert_int_equal(rix_test_failalloc_live(), 0);
		rix_test_failalloc_remove();
	}

	/* Reserved: the chunk holds the 18 blocks needed, no more. */
	assert_int_equal(rix_indexmap_new_seeded(&m, 0, 5), 0);
	assert_int_equal(rix_indexmap_reserve(m, n), 0);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(rix_indexmap_add(m, &e[i].id, &e[i].loc), 0);
	per = (double)rix_indexmap_memory(m) / (double)n;
	assert_true(per > 52.0 && per < 56.5);
	check_against_reference(m, e, n, &st);
	rix_indexmap_free(m);

	/* A reserve one block past a chunk's worth: that block's chunk is one block, not 12 MiB. */
	assert_int_equal(rix_indexmap_new_seeded(&m, 0, 5), 0);
	assert_int_equal(rix_indexmap_reserve(m, 512 * 1024 + 1), 0);
	per = (double)rix_indexmap_memory(m) / (512.0 * 1024 + 1);
	assert_true(per > 52.0 && per < 56.5);
	rix_indexmap_free(m);

	/* Batch 2^17 (6 MiB blocks): two blocks a chunk, a second chunk made. Batch 2^18: blocks
	 * over half a chunk are never carved. Every answer either way, and freeing returns all. */
	const size_t n2 = 540000;
	struct ref *e2 = malloc(n2 * sizeof(*e2));
	make_entries(e2, n2, 40, &st);
	const uint32_t batches[] = { 1u << 17, 1u << 18 };
	for (int k = 0; k < 2; k++) {
		rix_test_failalloc_install(0);
		assert_int_equal(rix_indexmap_new_seeded(&m, batches[k], 5), 0);
		for (size_t i = 0; i < n2; i++)
			assert_int_equal(rix_indexmap_add(m, &e2[i].id, &e2[i].loc), 0);
		check_against_reference(m, e2, n2, &st);
		rix_indexmap_free(m);
		assert_int_equal(rix_test_failalloc_live(), 0);
		rix_test_failalloc_remove();
	}
	free(e2);
	free(e);
}

/*
 * The lines grow exactly when the next distinct ID would pass 80% of their slots (2, 3, 5, 8,
 * 12, 18, 27 lines: at the 20th, 29th, 49th, 77th, 116th, 173rd ID), and block 0 doubles from 16
 * entries: memory() grows at those adds and at no other.
 */
static void test_growth_points(void **state)
{
	(void)state;
	rix_indexmap *m;
	assert_int_equal(rix_indexmap_new_seeded(&m, 1024, 3), 0);
	uint64_t st = 21;
	size_t before = rix_indexmap_memory(m), lines = 2, block = 16;
	for (size_t n = 1; n <= 300; n++) {
		rix_id id;
		rix_loc loc = { (uint32_t)n, 0, 0, 0 };
		rix_test_random_id(&id, &st);
		assert_int_equal(rix_indexmap_add(m, &id, &loc), 0);
		bool grows = n == 1;
		if (n - 1 == lines * 12 * 4 / 5) {
			lines += (lines + 1) / 2;
			grows = true;
		}
		if (n - 1 == block) {
			block *= 2;
			grows = true;
		}
		size_t after = rix_indexmap_memory(m);
		assert_int_equal(after > before, grows);
		before = after;
	}
	rix_indexmap_free(m);
}

static void test_memory_and_limits(void **state)
{
	(void)state;
	rix_indexmap *m;
	assert_int_equal(rix_indexmap_new(&m), 0);
	assert_int_equal(rix_indexmap_batch(m), RIX_INDEXMAP_DEFAULT_BATCH);
	assert_int_equal(rix_indexmap_reserve(m, (size_t)RIX_INDEXMAP_MAX_ENTRIES + 1), RIX_ELIMIT);
	rix_id id = { { 0 } };
	assert_int_equal(rix_indexmap_lookup(NULL, m, &id), RIX_ENOTFOUND);
	bool f = true;
	assert_int_equal(rix_indexmap_lookup_many(NULL, &f, m, &id, 1), 0);
	assert_int_equal(f, 0);
	/* 100k entries without reserve: 48-byte entries plus 6.7-10 bytes of lines. */
	uint64_t st = 3;
	for (int i = 0; i < 100000; i++) {
		rix_loc loc = { (uint32_t)i, 0, 0, 0 };
		rix_test_random_id(&id, &st);
		assert_int_equal(rix_indexmap_add(m, &id, &loc), 0);
	}
	double per = (double)rix_indexmap_memory(m) / 100000.0;
	assert_true(per > 52.0 && per < 58.0);
	rix_indexmap_free(m);
	rix_indexmap_free(NULL);
}

static int count_cb(void *arg, const rix_id *id, const rix_loc *loc)
{
	(void)id;
	size_t *n = arg;
	if (loc->pack != *n)
		return -1;
	++*n;
	return *n == 500 ? 7 : 0;
}

static void test_foreach_order_and_stop(void **state)
{
	(void)state;
	rix_indexmap *m;
	assert_int_equal(rix_indexmap_new_batch(&m, 16), 0);
	uint64_t st = 5;
	for (uint32_t i = 0; i < 1000; i++) {
		rix_id id;
		rix_loc loc = { i, 0, 0, 0 };
		rix_test_random_id(&id, &st);
		assert_int_equal(rix_indexmap_add(m, &id, &loc), 0);
	}
	size_t n = 0;
	assert_int_equal(rix_indexmap_foreach(m, count_cb, &n), 7);
	assert_int_equal(n, 500);
	rix_indexmap_free(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_reference_sizes_and_batches),
		cmocka_unit_test(test_add_many_as_adds),
		cmocka_unit_test(test_add_many_crowded),
		cmocka_unit_test(test_tag_mask_forms),
		cmocka_unit_test(test_many_copies),
		cmocka_unit_test(test_crowded_lines_wrap),
		cmocka_unit_test(test_reserve_then_no_allocation),
		cmocka_unit_test(test_allocation_failure_n),
		cmocka_unit_test(test_chunked_blocks),
		cmocka_unit_test(test_growth_points),
		cmocka_unit_test(test_memory_and_limits),
		cmocka_unit_test(test_foreach_order_and_stop),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
