/*
 * tests/test_ranked.c — the ranked table (index/ranked.h) against a reference (the entries
 * sorted by ID and location; repeats of a place dropped when the pack table is given): every
 * ID's locations, single (one of them), all of them, batched; absent IDs (random, and one bit
 * away from present ones) not found; iteration in ascending ID order with every location;
 * repeats of one place dropped given the pack table, also through two pack numbers naming one
 * pack, and every location kept without it; field widths from 0 bits to the 128-bit
 * layout on both sides of the packed limit (120 bits); the empty table, one entry; crafted IDs
 * sharing 28 bytes; memory at 1M entries of the benchmarks' shape; the image (exported, copied,
 * imported: the same answers; refused when its shape, directory or pack numbers are off; bytes
 * flipped at random refused or harmless); the entries' collection the build starts from (every
 * field at the edges of its packed width, pack numbers shifted across one, each part's sort);
 * the batched lookup's filter hint (on and off at its thresholds, each thread its own, the
 * answers exact either way).
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
#include "index/entry_collect.h"
#include "index/ranked.h"
#include "testutil.h"

static int ent_cmp(const void *pa, const void *pb)
{
	const struct fentry *a = pa, *b = pb;
	int c = memcmp(a->id.b, b->id.b, RIX_ID_SIZE);
	return c ? c : memcmp(&a->loc, &b->loc, sizeof(a->loc));
}

static bool same_place(const rix_loc *a, const rix_loc *b, const rix_id *packs)
{
	return a->offset == b->offset && a->length == b->length && a->uncompressed_length == b->uncompressed_length &&
	       (a->pack == b->pack || (packs && memcmp(&packs[a->pack], &packs[b->pack], RIX_ID_SIZE) == 0));
}

/* The reference: e[0..n) sorted; with packs (the pack numbers' IDs) each place of an ID once,
 * without every entry. */
static size_t ref_make(struct fentry *e, size_t n, const rix_id *packs)
{
	qsort(e, n, sizeof(*e), ent_cmp);
	if (packs == NULL)
		return n;
	size_t d = 0, first = 0;
	for (size_t i = 0; i < n; i++) {
		if (d > 0 && memcmp(e[d - 1].id.b, e[i].id.b, RIX_ID_SIZE) == 0) {
			bool repeat = false;
			for (size_t k = first; k < d && !repeat; k++)
				repeat = same_place(&e[k].loc, &e[i].loc, packs);
			if (repeat)
				continue;
		} else {
			first = d;
		}
		e[d++] = e[i];
	}
	return d;
}

struct walk {
	const struct fentry *ref;
	const rix_id *packs;
	size_t n, at;
};

/* Whether loc is, up to a repeat of its place, one of the reference's locations of id. */
static bool ref_has_loc(const struct fentry *ref, size_t n, const rix_id *id, const rix_loc *loc,
			const rix_id *packs)
{
	for (size_t k = 0; k < n; k++)
		if (memcmp(ref[k].id.b, id->b, RIX_ID_SIZE) == 0 && same_place(&ref[k].loc, loc, packs))
			return true;
	return false;
}

static int id_key_cmp(const void *key, const void *elem)
{
	return memcmp(key, ((const struct fentry *)elem)->id.b, RIX_ID_SIZE);
}

/* The reference's run of id: [*lo, *hi) (empty when absent). */
static void ref_run(const struct fentry *ref, size_t n, const rix_id *id, size_t *lo, size_t *hi)
{
	const struct fentry *hit = bsearch(id, ref, n, sizeof(*ref), id_key_cmp);
	*lo = *hi = 0;
	if (hit == NULL)
		return;
	size_t i = (size_t)(hit - ref), j = i;
	while (i > 0 && memcmp(ref[i - 1].id.b, id->b, RIX_ID_SIZE) == 0)
		i--;
	while (j < n && memcmp(ref[j].id.b, id->b, RIX_ID_SIZE) == 0)
		j++;
	*lo = i;
	*hi = j;
}

/* Iteration: IDs ascending, an ID's locations one after another, each one of the reference's. */
static int walk_fn(void *payload, const rix_id *id, const rix_loc *loc)
{
	struct walk *w = payload;
	assert_true(w->at < w->n);
	assert_memory_equal(id->b, w->ref[w->at].id.b, RIX_ID_SIZE);
	size_t lo, hi;
	ref_run(w->ref, w->n, id, &lo, &hi);
	assert_true(ref_has_loc(w->ref + lo, hi - lo, id, loc, w->packs));
	w->at++;
	return 0;
}

static void flip(rix_id *id, unsigned bit)
{
	id->b[bit / 8] ^= (uint8_t)(0x80u >> (bit % 8));
}

/* Checks every answer of r against the reference made from e[0..n). */
static void check_table(struct rix__ranked *r, const struct fentry *e, size_t n, const rix_id *packs,
			uint64_t *st)
{
	struct fentry *ref = malloc((n ? n : 1) * sizeof(*ref));
	if (n > 0)
		memcpy(ref, e, n * sizeof(*ref));
	size_t m = ref_make(ref, n, packs);
	size_t distinct = 0;
	for (size_t i = 0; i < m; i++)
		distinct += i == 0 || memcmp(ref[i - 1].id.b, ref[i].id.b, RIX_ID_SIZE) != 0;
	assert_int_equal(rix__ranked_count(r), m);
	assert_int_equal(rix__ranked_distinct(r), distinct);

	struct walk w = { .ref = ref, .packs = packs, .n = m };
	assert_int_equal(rix__ranked_foreach(r, walk_fn, &w), 0);
	assert_int_equal(w.at, m);

	/* The totals: the reference's entries counted and summed (every width: test_widths). */
	uint64_t count = 0, stored = 0, plain = 0, want_stored = 0, want_plain = 0;
	rix__ranked_totals(r, &count, &stored, &plain);
	for (size_t i = 0; i < m; i++) {
		want_stored += ref[i].loc.length;
		want_plain += rix_blob_plain_size(ref[i].loc.length, ref[i].loc.uncompressed_length);
	}
	assert_int_equal(count, m);
	assert_int_equal(stored, want_stored);
	assert_int_equal(plain, want_plain);

	/* Every ID: one of its locations, all of them (each place once), batched. */
	rix_id *keys = malloc((m ? m : 1) * sizeof(*keys));
	rix_loc *got = malloc((m ? m : 1) * sizeof(*got));
	bool *found = malloc((m ? m : 1) * sizeof(*found));
	for (size_t i = 0; i < m;) {
		size_t j = i;
		while (j < m && memcmp(ref[j].id.b, ref[i].id.b, RIX_ID_SIZE) == 0)
			j++;
		rix_loc one, all[64];
		assert_true(rix__ranked_find(r, &ref[i].id, &one));
		assert_true(ref_has_loc(ref + i, j - i, &ref[i].id, &one, packs));
		assert_true(j - i <= 64);
		assert_int_equal(rix__ranked_find_all(r, &ref[i].id, 0, all, 64), j - i);
		for (size_t k = 0; k < j - i; k++) {
			assert_true(ref_has_loc(ref + i, j - i, &ref[i].id, &all[k], packs));
			for (size_t q = 0; packs != NULL && q < k; q++) /* repeats dropped */
				assert_false(same_place(&all[q], &all[k], packs));
		}
		assert_int_equal(rix__ranked_find_all(r, &ref[i].id, 0, all, 0), j - i); /* count only */
		for (size_t skip = 1; skip < j - i; skip++) { /* from the skip-th on, one at a time */
			rix_loc one_on;
			assert_int_equal(rix__ranked_find_all(r, &ref[i].id, skip, &one_on, 1), j - i);
			assert_memory_equal(&one_on, &all[skip], sizeof(one_on));
		}
		i = j;
	}
	for (size_t i = 0; i < m; i++)
		keys[i] = ref[m - 1 - i].id; /* descending: not the table's order */
	assert_int_equal(rix__ranked_find_many(r, keys, m, got, found), m);
	for (size_t i = 0; i < m; i++) {
		assert_true(found[i]);
		rix_loc one;
		assert_true(rix__ranked_find(r, &keys[i], &one));
		assert_memory_equal(&one, &got[i], sizeof(one)); /* the same one as the single lookup */
	}

	/* Each instance of the lookups this processor runs (portable, POPCNT and BMI2, AVX-512)
	 * gives every present ID the same location, the batched lookup too. */
	for (int level = 0; level <= 2 && m > 0; level++) {
		if (rix__ranked_use_level(r, level) != 0)
			continue;
		assert_int_equal(rix__ranked_find_many(r, keys, m, got, found), m);
		for (size_t i = 0; i < m; i++) {
			rix_loc one;
			assert_true(rix__ranked_find(r, &keys[i], &one));
			assert_memory_equal(&one, &got[i], sizeof(one));
			size_t lo, hi;
			ref_run(ref, m, &keys[i], &lo, &hi);
			assert_true(ref_has_loc(ref + lo, hi - lo, &keys[i], &one, packs));
		}
	}

	/* Absent: random IDs, and present ones with one bit flipped (the reference decides), by
	 * each instance (a table without IDs has none to choose); the best one is left in use. */
	for (int level = 0; level <= 2; level++) {
		if (m > 0 && rix__ranked_use_level(r, level) != 0)
			continue;
		for (size_t i = 0; i < 1000; i++) {
			rix_id k;
			rix_test_random_id(&k, st);
			if (m > 0 && (i & 1)) {
				k = ref[rix_test_next(st) % m].id;
				flip(&k, (unsigned)(rix_test_next(st) % 256));
			}
			size_t lo, hi;
			ref_run(ref, m, &k, &lo, &hi);
			bool want = hi > lo;
			rix_loc l;
			assert_int_equal(rix__ranked_find(r, &k, &l), want);
			/* past the filter the answer is the set's, exact for any ID (rix__ranked_find
			 * asks it only for IDs the filter passes) */
			assert_int_equal(m > 0 && rix__ranked_find_passed(r, &k, &l), want);
			bool f = !want;
			assert_int_equal(rix__ranked_find_many(r, &k, 1, &l, &f), want ? 1 : 0);
			assert_int_equal(f, want);
			assert_int_equal(rix__ranked_find_all(r, &k, 0, &l, 1), hi - lo);
		}
	}
	for (int level = 2; m > 0 && level >= 0 && rix__ranked_use_level(r, level) != 0; level--)
		;

	/* Present and absent IDs mixed in one batch (groups where some keys pass the filter and
	 * some do not, gathered and answered in their places): each answer the single lookup's. */
	size_t nb = m < 1000 ? m : 1000, want = 0;
	for (size_t i = 0; i < nb; i++) {
		keys[i] = ref[rix_test_next(st) % m].id;
		if (i % 3 == 0)
			flip(&keys[i], (unsigned)(rix_test_next(st) % 256));
	}
	size_t hits = rix__ranked_find_many(r, keys, nb, got, found);
	for (size_t i = 0; i < nb; i++) {
		rix_loc one;
		bool f = rix__ranked_find(r, &keys[i], &one);
		assert_int_equal(found[i], f);
		if (f)
			assert_memory_equal(&one, &got[i], sizeof(one));
		want += f;
	}
	assert_int_equal(hits, want);
	assert_true(nb < 3 || (want > 0 && want < nb));
	free(found);
	free(got);
	free(keys);
	free(ref);
}

/* The table of e[0..n), collected as a bulk load collects them. */
static struct rix__ranked *build(const struct fentry *e, size_t n, const rix_id *packs, unsigned workers)
{
	struct rix__ecollect *c;
	assert_int_equal(rix__ecollect_new(&c), 0);
	assert_int_equal(rix__ecollect_add(c, e, n, 0), 0);
	struct rix__ranked *r = NULL;
	assert_int_equal(rix__ranked_build_collected(&r, c, packs, workers), 0);
	assert_non_null(r);
	return r;
}

/* Builds from e[0..n) and checks every answer against the reference. */
static struct rix__ranked *build_and_check(const struct fentry *e, size_t n, const rix_id *packs, uint64_t *st)
{
	struct rix__ranked *r = build(e, n, packs, (unsigned)(n % 3));
	check_table(r, e, n, packs, st);
	return r;
}

/* r's image, its sections copied into fresh arrays (as a cache read gives them). */
struct image {
	uint64_t desc[RIX__RANKED_DESC_WORDS];
	void *sec[RIX__RANKED_SECTIONS];
	size_t size[RIX__RANKED_SECTIONS];
};

static void image_of(struct image *im, const struct rix__ranked *r)
{
	const void *sec[RIX__RANKED_SECTIONS];
	rix__ranked_export(r, im->desc, sec, im->size);
	size_t want[RIX__RANKED_SECTIONS];
	assert_int_equal(rix__ranked_section_sizes(im->desc, want), 0);
	for (int k = 0; k < RIX__RANKED_SECTIONS; k++) {
		assert_int_equal(want[k], im->size[k]);
		im->sec[k] = im->size[k] ? rix_malloc(im->size[k]) : NULL;
		if (im->size[k])
			memcpy(im->sec[k], sec[k], im->size[k]);
	}
}

/* The import; on failure the sections are still the image's (freed here: a double free or a
 * leak under ASan if the import took them or left them neither's). */
static int import(struct rix__ranked **out, struct image *im, uint32_t npacks)
{
	int rc = rix__ranked_import(out, im->desc, im->sec, im->size, npacks);
	if (rc != 0)
		for (int k = 0; k < RIX__RANKED_SECTIONS; k++) {
			rix_free(im->sec[k]);
			im->sec[k] = NULL;
		}
	return rc;
}

static void random_entries(struct fentry *e, size_t n, uint64_t *st, uint32_t maxpack, uint64_t maxoff,
			   uint64_t maxlen)
{
	for (size_t i = 0; i < n; i++) {
		rix_test_random_id(&e[i].id, st);
		e[i].loc.pack = (uint32_t)(rix_test_next(st) % ((uint64_t)maxpack + 1));
		e[i].loc.offset = (uint32_t)(rix_test_next(st) % (maxoff + 1));
		e[i].loc.length = (uint32_t)(rix_test_next(st) % (maxlen + 1));
		e[i].loc.uncompressed_length = (uint32_t)(rix_test_next(st) % 3 ? 2 * (uint64_t)e[i].loc.length % (maxlen + 1) : 0);
	}
}

static void test_empty_and_one(void **state)
{
	(void)state;
	uint64_t st = 1;
	rix__ranked_free(build_and_check(NULL, 0, NULL, &st));
	struct fentry e[1];
	random_entries(e, 1, &st, 10, 1000, 1000);
	struct rix__ranked *r = build_and_check(e, 1, NULL, &st);
	assert_true(rix__ranked_memory(r) > 0);
	rix__ranked_free(r);
	assert_int_equal(rix__ranked_count(NULL), 0);
	rix_loc l;
	assert_false(rix__ranked_find(NULL, &e[0].id, &l));
	rix__ranked_free(NULL);
}

/* Second locations: the same ID in other packs (kept), at the very same place (dropped), and
 * at the same place of one pack under two numbers (dropped only when packs are given). */
static void test_duplicates(void **state)
{
	(void)state;
	uint64_t st = 2;
	size_t n = 40000;
	struct fentry *e = malloc(n * sizeof(*e));
	random_entries(e, n, &st, 999, 1u << 24, 1u << 20);
	rix_id *packs = malloc(1000 * sizeof(*packs));
	for (unsigned p = 0; p < 1000; p++)
		rix_test_random_id(&packs[p], &st);
	packs[999] = packs[998]; /* one pack, two numbers */
	for (size_t i = 1000; i < n; i++) {
		uint64_t x = rix_test_next(&st) % 20;
		if (x < 3) { /* the same blob in another pack */
			e[i].id = e[rix_test_next(&st) % i].id;
		} else if (x < 5) { /* a repeat of an earlier entry */
			e[i] = e[rix_test_next(&st) % i];
		} else if (x < 6) { /* the same place under the other number of pack 998/999 */
			size_t k = rix_test_next(&st) % i;
			e[k].loc.pack = 998;
			e[i] = e[k];
			e[i].loc.pack = 999;
		}
	}
	/* A blob in 40 places. */
	for (size_t i = 1; i <= 40; i++) {
		e[n - i].id = e[0].id;
		e[n - i].loc.offset = (uint32_t)i;
	}
	struct rix__ranked *with = build_and_check(e, n, packs, &st);
	struct rix__ranked *without = build_and_check(e, n, NULL, &st);
	assert_true(rix__ranked_count(with) < n - 1000); /* exact repeats and the aliased pack's */
	assert_int_equal(rix__ranked_count(without), n); /* every location kept */
	assert_int_equal(rix__ranked_distinct(with), rix__ranked_distinct(without));
	rix__ranked_free(with);
	rix__ranked_free(without);
	free(packs);
	free(e);
}

/* One blob in 100000 places, listed in descending order, among others: built without a
 * quadratic step, its locations given in place order (pack number, offset). */
static void test_many_copies(void **state)
{
	(void)state;
	uint64_t st = 9;
	size_t n = 101000, copies = 100000;
	struct fentry *e = malloc(n * sizeof(*e));
	assert_non_null(e);
	random_entries(e, n, &st, 999, 1u << 24, 1u << 20);
	for (size_t i = 0; i < copies; i++) {
		e[i].id = e[n - 1].id;
		e[i].loc = (rix_loc){ (uint32_t)((copies - i) / 1000), (uint32_t)(copies - i), 10, 0 };
	}
	rix_id id = e[n - 1].id;
	struct rix__ranked *r = build(e, n, NULL, 0);
	free(e);
	assert_int_equal(rix__ranked_count(r), n);
	rix_loc *all = malloc((copies + 1) * sizeof(*all));
	assert_non_null(all);
	assert_int_equal(rix__ranked_find_all(r, &id, 0, all, copies + 1), copies + 1);
	for (size_t k = 1; k <= copies; k++)
		assert_true(all[k - 1].pack < all[k].pack ||
			    (all[k - 1].pack == all[k].pack && all[k - 1].offset <= all[k].offset));
	rix_loc first;
	assert_true(rix__ranked_find(r, &id, &first));
	assert_memory_equal(&first, &all[0], sizeof(first));
	free(all);
	rix__ranked_free(r);
}

/* Field widths: all zero (0 bits), small, 120 bits (packed), 121 (the 128-bit layout), 128. */
static void test_widths(void **state)
{
	(void)state;
	uint64_t st = 3;
	size_t n = 5000;
	struct fentry *e = malloc(n * sizeof(*e));
	struct {
		uint32_t pack;
		uint64_t off, len, ulen;
		unsigned bits; /* the width the table must choose */
	} cases[] = {
		{ 0, 0, 0, 0, 0 },
		{ 3, 255, 1, 1, 2 + 8 + 1 + 1 },
		/* A location's first 8-byte load reads pack and offset (up to 64 bits); its second,
		 * at the length's first byte and shifted by the length's bit in it (pb + ob) % 8,
		 * reads the two lengths when that shift and their widths are at most 64 (ranked.c's
		 * split): at 64 and at 65 (shift 7: 57 and 58 bits of lengths; shift 1: 63), where a
		 * pair read that way loses its top bit. */
		{ 0x7FFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu, 0x1FFFFFFu, 23 + 32 + 32 + 25 },
		{ 0x7FFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu, 0x3FFFFFFu, 23 + 32 + 32 + 26 },
		{ 0x1FFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu, 0x7FFFFFFFu, 25 + 32 + 32 + 31 },
		{ 0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFu, 0xFFFFFFFu, 32 + 32 + 28 + 28 },
		{ 0xFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu, 24 + 32 + 32 + 32 },
		{ 0x1FFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu, 128 },
		{ 0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu, 128 },
	};
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		random_entries(e, n, &st, cases[c].pack, cases[c].off, cases[c].len);
		for (size_t i = 0; i < n; i++)
			e[i].loc.uncompressed_length = (uint32_t)(e[i].loc.uncompressed_length % (cases[c].ulen + 1));
		/* The largest value of every field present, so the widths are exact. */
		e[0].loc = (rix_loc){ cases[c].pack, (uint32_t)cases[c].off, (uint32_t)cases[c].len, (uint32_t)cases[c].ulen };
		struct rix__ranked *r = build_and_check(e, n, NULL, &st);
		assert_int_equal(rix__ranked_loc_bits(r), cases[c].bits);
		rix__ranked_free(r);
	}
	free(e);
}

/* Checks that the records of c are e[0..n) in arrival order, part by part. */
static void check_records(const struct rix__ecollect *c, const struct fentry *e, size_t n)
{
	size_t seen[256] = { 0 };
	assert_int_equal(rix__ecollect_count(c), n);
	for (size_t i = 0; i < n; i++) {
		unsigned b = e[i].id.b[0];
		const uint8_t *rec = rix__ecollect_rec(c, b, seen[b]++);
		assert_memory_equal(rec + RIX__EREC_LOC, e[i].id.b + 1, RIX_ID_SIZE - 1);
		rix_loc l;
		rix__ecollect_loc(c, rec, &l);
		assert_memory_equal(&l, &e[i].loc, sizeof(l));
	}
	for (unsigned b = 0; b < 256; b++)
		assert_int_equal(c->part[b].n, seen[b]);
}

static size_t escapes(const struct fentry *e, size_t n)
{
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		k += e[i].loc.pack >= RIX__EC_ESCAPE || e[i].loc.offset >= 1u << RIX__EC_OB ||
		     e[i].loc.length >= 1u << RIX__EC_LB || e[i].loc.uncompressed_length >= 1u << RIX__EC_UB;
	return k;
}

/* The collection (entry_collect.h): every field just inside, at and past the edge of its packed
 * width, kept exactly (those outside as escapes); pack numbers shifted across the edge; each
 * part sorted, an ID's records in place order; a table built from it answering as the
 * reference. */
static void test_collect(void **state)
{
	(void)state;
	uint64_t st = 9;
	enum { N = 6000, EDGES = 64 };
	struct fentry *e = malloc(N * sizeof(*e));
	assert_non_null(e);
	random_entries(e, N, &st, 1000, 1u << 20, 1u << 20);
	const uint32_t edge[4] = { RIX__EC_ESCAPE, 1u << RIX__EC_OB, 1u << RIX__EC_LB, 1u << RIX__EC_UB };
	for (size_t i = 0; i < EDGES; i++) {
		size_t f = i % 4, k = (i / 4) % 4;
		uint32_t v = k == 0 ? edge[f] - 1 : k == 1 ? edge[f] : k == 2 ? edge[f] + 1 : 0xFFFFFFF0u;
		uint32_t *field[4] = { &e[i].loc.pack, &e[i].loc.offset, &e[i].loc.length,
				       &e[i].loc.uncompressed_length };
		*field[f] = v;
	}
	for (size_t i = 0; i < 300; i++) { /* the same blob in other packs: runs to sort */
		e[N - 1 - i].id = e[i % 150].id;
		e[N - 1 - i].loc.pack = (uint32_t)(rix_test_next(&st) % 1000);
	}
	size_t want = escapes(e, N);
	assert_true(want >= EDGES / 2);
	struct rix__ecollect *c;
	assert_int_equal(rix__ecollect_new(&c), 0);
	assert_int_equal(rix__ecollect_add(c, e, N / 2, 0), 0);
	assert_int_equal(rix__ecollect_add(c, e + N / 2, N - N / 2, 0), 0);
	assert_int_equal(c->nesc, want);
	check_records(c, e, N);

	/* Shifted by one: a pack numbered just inside the edge crosses it. */
	assert_int_equal(rix__ecollect_shift_packs(c, 1), 0);
	for (size_t i = 0; i < N; i++)
		e[i].loc.pack++;
	assert_true(escapes(e, N) > want);
	assert_int_equal(c->nesc, escapes(e, N));
	check_records(c, e, N);

	/* Each part in ID order, an ID's records in place order (pack number, then offset). */
	size_t distinct[256];
	rix__ecollect_sort(c, 2, distinct);
	size_t nd = 0;
	for (unsigned b = 0; b < 256; b++) {
		const struct rix__part *pt = &c->part[b];
		size_t k = pt->n > 0;
		for (size_t i = 1; i < pt->n; i++) {
			const uint8_t *x = rix__ecollect_rec(c, b, i - 1), *y = rix__ecollect_rec(c, b, i);
			int cmp = memcmp(x + RIX__EREC_LOC, y + RIX__EREC_LOC, RIX_ID_SIZE - 1);
			assert_true(cmp <= 0);
			k += cmp < 0;
			if (cmp == 0) {
				rix_loc lx, ly;
				rix__ecollect_loc(c, x, &lx);
				rix__ecollect_loc(c, y, &ly);
				assert_true(lx.pack < ly.pack || (lx.pack == ly.pack && lx.offset <= ly.offset));
			}
		}
		assert_int_equal(distinct[b], k);
		nd += k;
	}
	assert_int_equal(nd, N - 300); /* the 300 copies name IDs already there */

	struct rix__ranked *r;
	assert_int_equal(rix__ranked_build_collected(&r, c, NULL, 1), 0);
	check_table(r, e, N, NULL, &st);
	rix__ranked_free(r);
	free(e);

	/* Enough entries for the pass on two workers, with locations 3 bits wide (one byte after
	 * each tail: a part's last one written without touching the next part's first record),
	 * then 0 bits (no byte of location), copies in other packs among them: the same answers. */
	enum { M = 70000 };
	e = malloc(M * sizeof(*e));
	assert_non_null(e);
	for (int width = 3; width >= 0; width -= 3) {
		random_entries(e, M, &st, width ? 1 : 0, 0, width ? 3 : 0);
		for (size_t i = 0; i < M; i++)
			e[i].loc.uncompressed_length = 0;
		for (size_t i = 0; i < 2000; i++)
			e[M - 1 - i].id = e[rix_test_next(&st) % (M - 2000)].id;
		r = build(e, M, NULL, 2);
		assert_int_equal(rix__ranked_loc_bits(r), (unsigned)width);
		check_table(r, e, M, NULL, &st);
		rix__ranked_free(r);
	}
	free(e);
}

/* IDs sharing their first 28 bytes (one bucket of the set: binary-searched runs). */
static void test_crafted(void **state)
{
	(void)state;
	uint64_t st = 4;
	size_t n = 3000;
	struct fentry *e = malloc(n * sizeof(*e));
	random_entries(e, n, &st, 100, 1u << 20, 1u << 16);
	for (size_t i = 1; i < n; i++)
		memcpy(e[i].id.b, e[0].id.b, 28);
	rix__ranked_free(build_and_check(e, n, NULL, &st));
	free(e);
}

/* 1M entries of the benchmarks' shape (8 a pack, offsets (i % 8) << 22, lengths up to 4 MiB,
 * uncompressed twice that): the set's ~29.9 bytes, a 89-bit location in the 12 bytes after its
 * tail and the filter's byte, under 43 bytes an entry (42.9; the chaining table it replaced:
 * 51, pack table aside in both). */
static void test_memory_1m(void **state)
{
	(void)state;
	uint64_t st = 5;
	size_t n = 1000000;
	struct fentry *e = rix_malloc(n * sizeof(*e));
	assert_non_null(e);
	for (size_t i = 0; i < n; i++) {
		rix_test_random_id(&e[i].id, &st);
		uint32_t len = (uint32_t)(2000 + rix_test_next(&st) % 4194304);
		e[i].loc = (rix_loc){ (uint32_t)(i / 8), (uint32_t)((i % 8) << 22), len, 2 * len };
	}
	rix_id probe = e[12345].id;
	rix_loc want = e[12345].loc;
	/* every 97th entry, kept to look up once e is gone */
	struct fentry *kept = malloc((n / 97 + 1) * sizeof(*kept));
	assert_non_null(kept);
	for (size_t i = 0; i < n; i += 97)
		kept[i / 97] = e[i];
	struct rix__ranked *r = build(e, n, NULL, 0);
	rix_free(e);
	double per = (double)rix__ranked_memory(r) / (double)n;
	printf("ranked n=1000000: %.3f bytes/entry (location %u bits)\n", per, rix__ranked_loc_bits(r));
	assert_true(per < 43.0);
	assert_int_equal(rix__ranked_loc_bits(r), 17 + 25 + 23 + 24);
	/* The filter: every present ID passes; random absent ones about one time in 30 (4 bits of a
	 * word holding 8 IDs' bits), never more than one in 15. */
	for (size_t i = 0; i < n; i += 97) {
		assert_true(rix__ranked_maybe(r, &kept[i / 97].id));
		rix_loc l;
		assert_true(rix__ranked_find(r, &kept[i / 97].id, &l));
		assert_memory_equal(&l, &kept[i / 97].loc, sizeof(l));
	}
	free(kept);
	/* Its masks: each RIX__RANKED_FILTER_K distinct bits, and about as few the same as 4096
	 * drawn at random from the 635376 would share (13 pairs): an absent ID passes a word
	 * whenever one of its IDs has the absent ID's mask. */
	size_t same = 0;
	for (size_t i = 0; i < RIX__RANKED_PATTERNS; i++) {
		assert_int_equal(__builtin_popcountll(rix__ranked_patterns[i]), RIX__RANKED_FILTER_K);
		for (size_t j = 0; j < i; j++)
			same += rix__ranked_patterns[i] == rix__ranked_patterns[j];
	}
	printf("filter masks: %zu pairs the same of %d\n", same, RIX__RANKED_PATTERNS);
	assert_true(same < 40);
	size_t pass = 0;
	for (int i = 0; i < 200000; i++) {
		rix_id id;
		rix_test_random_id(&id, &st);
		pass += rix__ranked_maybe(r, &id);
	}
	printf("filter: %zu of 200000 absent IDs pass\n", pass);
	assert_true(pass > 200000 / 100 && pass < 200000 / 15);
	rix_loc got;
	assert_true(rix__ranked_find(r, &probe, &got));
	assert_memory_equal(&got, &want, sizeof(got));
	rix__ranked_free(r);
}

/*
 * The batched lookup's filter hint (ranked.c: skip_next): on after a round of 16 keys or more
 * that found at least 31 in 32, off after one that found fewer than 15 in 16, unchanged by a
 * smaller round; every answer, filter skipped or not, the single lookup's and the reference's.
 */
static void hint_round(const struct rix__ranked *r, const struct fentry *ref, size_t m, size_t nkeys, size_t absent,
		       uint64_t *st)
{
	rix_id keys[64];
	rix_loc got[64];
	bool found[64];
	assert_true(nkeys <= 64 && absent <= nkeys);
	for (size_t i = 0; i < nkeys; i++) {
		keys[i] = ref[rix_test_next(st) % m].id;
		if (i < absent)
			rix_test_random_id(&keys[i], st); /* absent: 256 random bits */
	}
	size_t hits = rix__ranked_find_many(r, keys, nkeys, got, found);
	for (size_t i = 0; i < nkeys; i++) {
		size_t lo, hi;
		ref_run(ref, m, &keys[i], &lo, &hi);
		assert_int_equal(found[i], hi > lo);
		assert_int_equal(found[i], i >= absent);
		rix_loc one;
		assert_int_equal(rix__ranked_find(r, &keys[i], &one), found[i]);
		if (found[i]) {
			assert_memory_equal(&one, &got[i], sizeof(one));
			assert_true(ref_has_loc(ref + lo, hi - lo, &keys[i], &got[i], NULL));
		}
	}
	assert_int_equal(hits, nkeys - absent);
}

/* Another thread's hint for a table: its own (off until its rounds turn it on, then off again
 * after a round of absent keys), so that the first thread's stays on. No cmocka assertion in
 * the thread: it records, the test's thread checks. */
struct hint_thread {
	const struct rix__ranked *r;
	const rix_id *present; /* 64 present IDs */
	bool saw_skip, skip_mid, skip_after;
	size_t hits_present, hits_absent;
};

static void *hint_thread_run(void *arg)
{
	struct hint_thread *h = arg;
	rix_id absent[64];
	rix_loc got[64];
	bool found[64];
	uint64_t st = 77;
	for (size_t i = 0; i < 64; i++)
		rix_test_random_id(&absent[i], &st);
	h->saw_skip = rix__ranked_skips_filter(h->r);
	h->hits_present = rix__ranked_find_many(h->r, h->present, 64, got, found); /* on, here */
	h->skip_mid = rix__ranked_skips_filter(h->r);
	h->hits_absent = rix__ranked_find_many(h->r, absent, 64, got, found); /* off, here */
	h->skip_after = rix__ranked_skips_filter(h->r);
	return NULL;
}

static void test_filter_hint(void **state)
{
	(void)state;
	uint64_t st = 13;
	size_t n = 5000;
	struct fentry *e = malloc(n * sizeof(*e));
	random_entries(e, n, &st, 99, 1u << 24, 1u << 20);
	struct rix__ranked *r = build(e, n, NULL, 1);
	size_t m = ref_make(e, n, NULL);
	for (int level = 0; level <= 2; level++) {
		if (rix__ranked_use_level(r, level) != 0)
			continue;
		hint_round(r, e, m, 64, 0, &st); /* all present: on */
		assert_true(rix__ranked_skips_filter(r));
		hint_round(r, e, m, 64, 64, &st); /* none present, the filter skipped: off */
		assert_false(rix__ranked_skips_filter(r));
		hint_round(r, e, m, 64, 3, &st); /* 61 of 64 < 31 in 32: stays off */
		assert_false(rix__ranked_skips_filter(r));
		hint_round(r, e, m, 64, 2, &st); /* 62 of 64: on */
		assert_true(rix__ranked_skips_filter(r));
		hint_round(r, e, m, 64, 4, &st); /* 60 of 64 = 15 in 16: stays on */
		assert_true(rix__ranked_skips_filter(r));
		hint_round(r, e, m, 15, 15, &st); /* 15 keys: too few to change it */
		assert_true(rix__ranked_skips_filter(r));
		hint_round(r, e, m, 64, 5, &st); /* 59 of 64: off */
		assert_false(rix__ranked_skips_filter(r));
		hint_round(r, e, m, 15, 0, &st); /* 15 keys: stays off */
		assert_false(rix__ranked_skips_filter(r));
		hint_round(r, e, m, 16, 0, &st); /* 16: on */
		assert_true(rix__ranked_skips_filter(r));
		hint_round(r, e, m, 33, 17, &st); /* mixed, the filter skipped: every answer exact */
		assert_false(rix__ranked_skips_filter(r));
	}
	/* Each thread its own hint; and a table asked in between starts with the filter. */
	hint_round(r, e, m, 64, 0, &st);
	assert_true(rix__ranked_skips_filter(r));
	rix_id present[64];
	for (size_t i = 0; i < 64; i++)
		present[i] = e[rix_test_next(&st) % m].id;
	struct hint_thread h = { .r = r, .present = present };
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, hint_thread_run, &h), 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_false(h.saw_skip);
	assert_true(h.skip_mid);
	assert_false(h.skip_after);
	assert_int_equal(h.hits_present, 64);
	assert_int_equal(h.hits_absent, 0);
	assert_true(rix__ranked_skips_filter(r)); /* untouched by the other thread's rounds */
	struct fentry one[40];
	random_entries(one, 40, &st, 9, 1000, 1000);
	struct rix__ranked *r2 = build(one, 40, NULL, 1);
	size_t m2 = ref_make(one, 40, NULL);
	assert_false(rix__ranked_skips_filter(r2));
	hint_round(r2, one, m2, 15, 3, &st); /* a small round in r2 */
	assert_false(rix__ranked_skips_filter(r2));
	assert_false(rix__ranked_skips_filter(r)); /* the hint follows the table last asked */
	hint_round(r, e, m, 20, 0, &st);
	assert_true(rix__ranked_skips_filter(r));
	rix__ranked_free(r2);
	rix__ranked_free(r);
	free(e);
}

/* Exported, copied and imported: the same answers; an image whose shape, directory or pack
 * numbers are off is refused; one whose bytes are flipped at random is refused or, if it
 * passes the checks, answers without reading outside its arrays (ASan). */
static void test_image(void **state)
{
	(void)state;
	uint64_t st = 6;
	size_t n = 30000;
	struct fentry *e = malloc(n * sizeof(*e));
	random_entries(e, n, &st, 499, 1u << 24, 1u << 20);
	for (size_t i = 1000; i < n; i += 17)
		e[i].id = e[i - 1000].id; /* second locations */
	struct rix__ranked *r = build_and_check(e, n, NULL, &st);
	struct image im;
	struct rix__ranked *back = NULL;

	image_of(&im, r);
	assert_int_equal(import(&back, &im, 500), 0);
	check_table(back, e, n, NULL, &st);
	assert_int_equal(rix__ranked_memory(back), rix__ranked_memory(r));
	rix__ranked_free(back);

	image_of(&im, r); /* a pack number outside the pack table */
	assert_int_equal(import(&back, &im, 499), RIX_ECORRUPT);
	assert_null(back);

	image_of(&im, r); /* a shape whose sizes do not agree */
	im.desc[0]++;
	assert_int_equal(import(&back, &im, 500), RIX_ECORRUPT);
	image_of(&im, r);
	im.desc[2] = 33; /* a 33-bit pack number */
	assert_int_equal(import(&back, &im, 500), RIX_ECORRUPT);
	image_of(&im, r);
	im.size[1]--;
	assert_int_equal(import(&back, &im, 500), RIX_ECORRUPT);
	/* The set's extra bytes an ID fewer than a location's: the set alone would take them (its
	 * tails then end before its mid bits), and with 512 packs no pack number is asked (9 bits
	 * name none outside), so that the refusal is the table's check of its locations' bytes. */
	image_of(&im, r);
	im.desc[RIX__RANKED_DESC_WORDS - RIX__IDSET_DESC_WORDS + RIX__IDSET_D_EXTRA]--;
	assert_int_equal(import(&back, &im, 512), RIX_ECORRUPT);
	image_of(&im, r); /* the mid bits where the tails and locations still are (n * tail bytes in) */
	const size_t rset = RIX__RANKED_DESC_WORDS - RIX__IDSET_DESC_WORDS;
	im.desc[rset + RIX__IDSET_D_MID] = im.desc[0] * (RIX_ID_SIZE - im.desc[rset + RIX__IDSET_D_KB]);
	assert_int_equal(import(&back, &im, 500), RIX_ECORRUPT);

	/* Bytes flipped in the set's block (directory; mid bits, tails and locations) or the
	 * second locations. */
	size_t refused = 0, passed = 0;
	for (int t = 0; t < 300; t++) {
		image_of(&im, r);
		int k = t % 3 == 2 ? 1 : 0;
		size_t at = (size_t)(rix_test_next(&st) % im.size[k]);
		if (t % 3 == 1) /* the directory: the block's last part */
			at = im.size[0] - 1 - (size_t)(rix_test_next(&st) % (im.size[0] / 64 + 1));
		((uint8_t *)im.sec[k])[at] ^= (uint8_t)(1u << (rix_test_next(&st) % 8));
		int rc = import(&back, &im, 500);
		if (rc != 0) {
			assert_int_equal(rc, RIX_ECORRUPT);
			refused++;
			continue;
		}
		passed++;
		rix_loc l, all[8];
		bool f;
		for (size_t i = 0; i < n; i += 7) {
			if (rix__ranked_find(back, &e[i].id, &l))
				assert_true(l.pack < 500);
			(void)rix__ranked_find_all(back, &e[i].id, 0, all, 8);
		}
		(void)rix__ranked_find_many(back, &e[0].id, 1, &l, &f);
		rix__ranked_free(back);
	}
	printf("flipped images: %zu refused, %zu passed the checks\n", refused, passed);
	assert_true(refused > 0);

	/* The empty table. */
	rix__ranked_free(r);
	r = build_and_check(NULL, 0, NULL, &st);
	image_of(&im, r);
	assert_int_equal(import(&back, &im, 0), 0);
	assert_int_equal(rix__ranked_count(back), 0);
	rix__ranked_free(back);
	rix__ranked_free(r);
	free(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_empty_and_one),
		cmocka_unit_test(test_duplicates),
		cmocka_unit_test(test_many_copies),
		cmocka_unit_test(test_widths),
		cmocka_unit_test(test_collect),
		cmocka_unit_test(test_crafted),
		cmocka_unit_test(test_memory_1m),
		cmocka_unit_test(test_image),
		cmocka_unit_test(test_filter_hint),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
