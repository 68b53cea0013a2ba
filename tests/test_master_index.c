/*
 * tests/test_master_index.c — the master index: merged and separate indexes answer alike,
 * duplicates across indexes, batched lookups, pack and index ID lists, the pending set,
 * allocation failure N during a merge, the single lookup's paths, and readers running during
 * merges.
 */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "rix/alloc.h"
#include "rix/error.h"
#include "rix/master_index.h"
#include "testutil.h"
#include "index/rcu.h"
#include "index/entry_collect.h"
#include "index/master_index_internal.h"
#include "index/ranked.h"

#define PER_PACK 8
#define PACKS_PER_INDEX 50

/* Everything one index file holds, kept to check answers against. */
struct idxdata {
	rix_id id; /* the index file's ID */
	rix_id packs[PACKS_PER_INDEX];
	rix_blob blobs[PACKS_PER_INDEX][PER_PACK];
};

/* The records each part of c has room for, at least (0 for none). */
static size_t collect_room(const struct rix__ecollect *c)
{
	size_t least = SIZE_MAX;
	for (int p = 0; c != NULL && p < 256; p++)
		if (c->part[p].cap / RIX__EREC < least)
			least = c->part[p].cap / RIX__EREC;
	return c != NULL ? least : 0;
}

static void make_idxdata(struct idxdata *d, uint64_t *st, const struct idxdata *dup_from)
{
	rix_test_random_id(&d->id, st);
	for (int p = 0; p < PACKS_PER_INDEX; p++) {
		rix_test_random_id(&d->packs[p], st);
		for (int b = 0; b < PER_PACK; b++) {
			rix_blob *bl = &d->blobs[p][b];
			/* Some blobs repeat one of an earlier index (same type, other pack). */
			if (dup_from != NULL && b == 0)
				*bl = dup_from->blobs[p][1];
			else {
				rix_test_random_id(&bl->id, st);
				bl->type = (b == 5) ? RIX_BLOB_TREE : RIX_BLOB_DATA;
			}
			bl->offset = (uint32_t)b * 1000;
			bl->length = 100 + (uint32_t)(rix_test_next(st) % 5000);
			bl->uncompressed_length = (b & 1) ? 0 : bl->length * 2;
		}
	}
}

static rix_index *build_index(const struct idxdata *d, int final)
{
	rix_index *idx;
	assert_int_equal(rix_index_new(&idx), 0);
	for (int p = 0; p < PACKS_PER_INDEX; p++)
		assert_int_equal(rix_index_store_pack(idx, &d->packs[p], d->blobs[p], PER_PACK), 0);
	assert_int_equal(rix_index_add_id(idx, &d->id), 0);
	if (final)
		rix_index_finalize(idx);
	return idx;
}

/* Every blob of d is found with a location that is one of its real locations. */
static void check_idxdata(rix_master_index *mi, const struct idxdata *d)
{
	for (int p = 0; p < PACKS_PER_INDEX; p++) {
		for (int b = 0; b < PER_PACK; b++) {
			const rix_blob *bl = &d->blobs[p][b];
			rix_packed_blob all[8];
			size_t n = rix_master_index_lookup_all(all, 8, mi, bl->type, &bl->id);
			assert_true(n >= 1);
			int hit = 0;
			for (size_t i = 0; i < n && i < 8; i++)
				if (memcmp(all[i].pack_id.b, d->packs[p].b, 32) == 0 && all[i].offset == bl->offset &&
				    all[i].length == bl->length &&
				    all[i].uncompressed_length == bl->uncompressed_length && all[i].type == bl->type)
					hit = 1;
			assert_true(hit);
			rix_packed_blob one;
			assert_int_equal(rix_master_index_lookup(&one, mi, bl->type, &bl->id), 0);
			assert_memory_equal(one.id.b, bl->id.b, 32);
			assert_true(rix_master_index_has(mi, bl->type, &bl->id));
			uint32_t size;
			assert_int_equal(rix_master_index_size(&size, mi, bl->type, &bl->id), 0);
			assert_int_equal(size, rix_blob_plain_size(one.length, one.uncompressed_length));
		}
	}
}

static void check_unknown(rix_master_index *mi, uint64_t *st)
{
	for (int i = 0; i < 1000; i++) {
		rix_id id;
		rix_test_random_id(&id, st);
		assert_false(rix_master_index_has(mi, RIX_BLOB_DATA, &id));
		assert_int_equal(rix_master_index_lookup_all(NULL, 0, mi, RIX_BLOB_DATA, &id), 0);
	}
}

/* Every ranked table is well formed: its walk gives IDs in ascending order, each ID's locations
 * one after another, the first of them the one a lookup gives, as many as it counts. */
struct walked {
	const struct rix__ranked *r;
	rix_id last;
	size_t n, run;
};

static int walk_check(void *payload, const rix_id *id, const rix_loc *loc)
{
	struct walked *w = payload;
	int c = w->n > 0 ? memcmp(w->last.b, id->b, RIX_ID_SIZE) : -1;
	assert_true(c <= 0);
	w->run = c == 0 ? w->run + 1 : 0;
	if (w->run == 0) {
		rix_loc first;
		assert_true(rix__ranked_find(w->r, id, &first));
		assert_memory_equal(&first, loc, sizeof(first));
	}
	w->last = *id;
	w->n++;
	return 0;
}

/* rix_master_index_totals gives what summing foreach's entries gives. */
static int sum_entry(void *arg, const rix_packed_blob *pb)
{
	rix_index_totals *t = arg;
	t->count[pb->type]++;
	t->stored[pb->type] += pb->length;
	t->plain[pb->type] += rix_blob_plain_size(pb->length, pb->uncompressed_length);
	return 0;
}

static void check_totals(rix_master_index *mi)
{
	rix_index_totals want = { 0 }, got;
	assert_int_equal(rix_master_index_foreach(mi, sum_entry, &want), 0);
	assert_int_equal(rix_master_index_totals(mi, &got), 0);
	assert_memory_equal(&got, &want, sizeof(got));
	for (int t = 0; t < RIX_BLOB_TYPES; t++)
		assert_int_equal(got.count[t], rix_master_index_count(mi, (rix_blob_type)t));
}

static void check_tables(rix_master_index *mi)
{
	check_totals(mi);
	const struct mstate *s = atomic_load(&mi->state);
	for (int t = 0; t < RIX_BLOB_TYPES; t++) {
		struct walked w = { .r = s->table[t] };
		assert_int_equal(rix__ranked_foreach(s->table[t], walk_check, &w), 0);
		assert_int_equal(w.n, rix__ranked_count(s->table[t]));
		struct walked wt = { .r = s->top[t] };
		assert_int_equal(rix__ranked_foreach(s->top[t], walk_check, &wt), 0);
		assert_int_equal(wt.n, rix__ranked_count(s->top[t]));
		/* a top sits on a table, at most 1/RIX__TOP_SHARE of it */
		assert_true(s->top[t] == NULL || rix__ranked_count(s->top[t]) <= rix__ranked_count(s->table[t]) / RIX__TOP_SHARE);
	}
}

static void check_batch(rix_master_index *mi, const struct idxdata *d, size_t nd, uint64_t *st)
{
	check_tables(mi);
	enum { Q = 777 };
	rix_id ids[Q];
	rix_packed_blob out[Q];
	bool found[Q];
	size_t want = 0;
	for (size_t i = 0; i < Q; i++) {
		if (i % 4 == 0) {
			rix_test_random_id(&ids[i], st);
		} else {
			const struct idxdata *x = &d[rix_test_next(st) % nd];
			ids[i] = x->blobs[rix_test_next(st) % PACKS_PER_INDEX][rix_test_next(st) % 5].id;
			want++;
		}
	}
	assert_int_equal(rix_master_index_lookup_many(out, found, mi, RIX_BLOB_DATA, ids, Q), want);
	for (size_t i = 0; i < Q; i++) {
		rix_packed_blob one;
		int rc = rix_master_index_lookup(&one, mi, RIX_BLOB_DATA, &ids[i]);
		assert_int_equal(found[i], rc == 0);
		if (rc == 0)
			assert_memory_equal(&one, &out[i], sizeof(one));
	}
	assert_int_equal(rix_master_index_lookup_many(NULL, found, mi, RIX_BLOB_DATA, ids, Q), want);
}

static int cmp_id(const void *a, const void *b)
{
	return memcmp(a, b, 32);
}

static void test_merge_and_lookup(void **state)
{
	(void)state;
	enum { N = 12 };
	static struct idxdata d[N];
	uint64_t st = 77;
	for (int i = 0; i < N; i++)
		make_idxdata(&d[i], &st, i > 0 ? &d[i - 1] : NULL);
	rix_master_index *mi;
	assert_int_equal(rix_master_index_new(&mi), 0);
	/* First half, separate, then merged; then the second half, separate, merged on top. */
	for (int i = 0; i < N / 2; i++)
		assert_int_equal(rix_master_index_add(mi, build_index(&d[i], 1)), 0);
	for (int i = 0; i < N / 2; i++)
		check_idxdata(mi, &d[i]);
	size_t before = rix_master_index_count(mi, RIX_BLOB_DATA);
	assert_int_equal(rix_master_index_merge(mi), 0);
	assert_int_equal(rix_master_index_count(mi, RIX_BLOB_DATA), before);
	for (int i = 0; i < N / 2; i++)
		check_idxdata(mi, &d[i]);
	check_batch(mi, d, N / 2, &st);
	for (int i = N / 2; i < N; i++)
		assert_int_equal(rix_master_index_add(mi, build_index(&d[i], 1)), 0);
	check_batch(mi, d, N, &st); /* table + separate */
	assert_int_equal(rix_master_index_merge(mi), 0);
	assert_int_equal(rix_master_index_merge(mi), 0); /* nothing to do */
	for (int i = 0; i < N; i++)
		check_idxdata(mi, &d[i]);
	check_unknown(mi, &st);
	check_batch(mi, d, N, &st);
	assert_int_equal(rix_master_index_count(mi, RIX_BLOB_DATA), (size_t)N * PACKS_PER_INDEX * 7);
	assert_int_equal(rix_master_index_count(mi, RIX_BLOB_TREE), (size_t)N * PACKS_PER_INDEX);

	/* Duplicates: blob 1 of index i-1 is also blob 0 of index i. */
	rix_packed_blob all[4];
	assert_int_equal(rix_master_index_lookup_all(all, 4, mi, d[3].blobs[7][0].type, &d[3].blobs[7][0].id), 2);

	/* Pack list: sorted, each once. Index IDs likewise. */
	rix_id *packs;
	size_t np;
	assert_int_equal(rix_master_index_packs(&packs, &np, mi), 0);
	assert_int_equal(np, (size_t)N * PACKS_PER_INDEX);
	for (size_t i = 1; i < np; i++)
		assert_true(memcmp(&packs[i - 1], &packs[i], 32) < 0);
	for (int i = 0; i < N; i++)
		assert_non_null(bsearch(&d[i].packs[17], packs, np, 32, cmp_id));
	rix_free(packs);
	rix_id *ids;
	size_t nids;
	assert_int_equal(rix_master_index_index_ids(&ids, &nids, mi), 0);
	assert_int_equal(nids, N);
	rix_free(ids);
	/* Memory: merged entries cost 28-44 bytes in the ranked table (an ID's 32 bytes in about 29,
	 * a location packed beside it); the pack table and the rest on top. */
	size_t entries = (size_t)N * PACKS_PER_INDEX * PER_PACK;
	assert_true(rix_master_index_memory(mi) >= entries * 28 + (size_t)N * PACKS_PER_INDEX * 32);
	assert_true(rix_master_index_memory(mi) <= entries * 44 + (size_t)N * PACKS_PER_INDEX * 32 + 16384);
	rix_master_index_free(mi);
}

static int count_blob(void *arg, const rix_packed_blob *pb)
{
	(void)pb;
	++*(size_t *)arg;
	return 0;
}

/* Stops the walk at its 100th entry (inside a round of the table's walk). */
static int stop_at_100(void *arg, const rix_packed_blob *pb)
{
	(void)pb;
	return ++*(size_t *)arg == 100 ? 7 : 0;
}

static void test_unfinished_and_own_index(void **state)
{
	(void)state;
	static struct idxdata d[3];
	uint64_t st = 78;
	for (int i = 0; i < 3; i++)
		make_idxdata(&d[i], &st, NULL);
	rix_master_index *mi;
	assert_int_equal(rix_master_index_new_seeded(&mi, 5), 0);
	assert_int_equal(rix_master_index_add(mi, build_index(&d[0], 1)), 0);
	assert_int_equal(rix_master_index_add(mi, build_index(&d[1], 0)), 0); /* unfinished */
	for (int p = 0; p < PACKS_PER_INDEX; p++)
		assert_int_equal(rix_master_index_store_pack(mi, &d[2].packs[p], d[2].blobs[p], PER_PACK), 0);
	check_totals(mi); /* before the merge: every entry in a separate index or the recent table */
	assert_int_equal(rix_master_index_merge(mi), 0);
	for (int i = 0; i < 3; i++)
		check_idxdata(mi, &d[i]);
	check_batch(mi, d, 3, &st);
	size_t n = 0;
	assert_int_equal(rix_master_index_foreach(mi, count_blob, &n), 0);
	assert_int_equal(n, (size_t)3 * PACKS_PER_INDEX * PER_PACK);
	n = 0; /* fn's nonzero value stops the walk and is returned */
	assert_int_equal(rix_master_index_foreach(mi, stop_at_100, &n), 7);
	assert_int_equal(n, 100);
	rix_id *packs;
	size_t np;
	assert_int_equal(rix_master_index_packs(&packs, &np, mi), 0);
	assert_int_equal(np, (size_t)3 * PACKS_PER_INDEX);
	rix_free(packs);
	rix_master_index_free(mi);
}

static void test_pending(void **state)
{
	(void)state;
	static struct idxdata d[1];
	uint64_t st = 79;
	make_idxdata(&d[0], &st, NULL);
	rix_master_index *mi;
	assert_int_equal(rix_master_index_new(&mi), 0);
	assert_int_equal(rix_master_index_add(mi, build_index(&d[0], 1)), 0);
	assert_int_equal(rix_master_index_merge(mi), 0);
	/* Known blobs are never pending. */
	assert_int_equal(rix_master_index_add_pending(mi, RIX_BLOB_DATA, &d[0].blobs[0][0].id), 0);
	/* Many IDs, added, re-added, removed in a scrambled order, checked against a reference. */
	enum { K = 5000 };
	static rix_id ids[K];
	static char in[K];
	for (int i = 0; i < K; i++) {
		rix_test_random_id(&ids[i], &st);
		assert_int_equal(rix_master_index_add_pending(mi, RIX_BLOB_DATA, &ids[i]), 1);
		in[i] = 1;
	}
	/* The same ID as a tree blob is a different blob. */
	assert_int_equal(rix_master_index_add_pending(mi, RIX_BLOB_TREE, &ids[0]), 1);
	rix_master_index_remove_pending(mi, RIX_BLOB_TREE, &ids[0]);
	for (int round = 0; round < 4; round++) {
		for (int j = 0; j < K; j++) {
			int i = (int)(rix_test_next(&st) % K);
			if (in[i]) {
				assert_int_equal(rix_master_index_add_pending(mi, RIX_BLOB_DATA, &ids[i]), 0);
				rix_master_index_remove_pending(mi, RIX_BLOB_DATA, &ids[i]);
				in[i] = 0;
			} else {
				assert_int_equal(rix_master_index_add_pending(mi, RIX_BLOB_DATA, &ids[i]), 1);
				in[i] = 1;
			}
		}
		for (int i = 0; i < K; i++) {
			int rc = rix_master_index_add_pending(mi, RIX_BLOB_DATA, &ids[i]);
			assert_int_equal(rc, !in[i]);
			in[i] = 1;
		}
	}
	/* Stored blobs stop being pending and stay known. */
	rix_blob b = { ids[9], RIX_BLOB_DATA, 0, 100, 0 };
	assert_int_equal(rix_master_index_store_pack(mi, &d[0].packs[0], &b, 1), 0);
	rix_master_index_remove_pending(mi, RIX_BLOB_DATA, &ids[9]);
	assert_int_equal(rix_master_index_add_pending(mi, RIX_BLOB_DATA, &ids[9]), 0);
	assert_int_equal(rix_master_index_add_pending(mi, (rix_blob_type)3, &ids[9]), RIX_EINVAL);
	rix_master_index_free(mi);
}

enum { MERGE_N = 4 };

struct merge_arg {
	struct idxdata *d;
	rix_master_index *mi;
};

/* Two indexes merged, two more added: the merge under test is the second. */
static void merge_setup(void *arg)
{
	struct merge_arg *a = arg;
	struct idxdata *d = a->d;
	assert_int_equal(rix_master_index_new(&a->mi), 0);
	assert_int_equal(rix_master_index_add(a->mi, build_index(&d[0], 1)), 0);
	assert_int_equal(rix_master_index_add(a->mi, build_index(&d[1], 1)), 0);
	assert_int_equal(rix_master_index_merge(a->mi), 0);
	assert_int_equal(rix_master_index_add(a->mi, build_index(&d[2], 1)), 0);
	assert_int_equal(rix_master_index_add(a->mi, build_index(&d[3], 1)), 0);
}

static int merge_run(void *arg)
{
	return rix_master_index_merge(((struct merge_arg *)arg)->mi);
}

/* Either way every blob still answers, and merging again succeeds. */
static void merge_check(void *arg, const rix_test_oom_round *round)
{
	struct merge_arg *a = arg;
	(void)round;
	for (int i = 0; i < MERGE_N; i++)
		check_idxdata(a->mi, &a->d[i]);
	assert_int_equal(rix_master_index_merge(a->mi), 0);
	for (int i = 0; i < MERGE_N; i++)
		check_idxdata(a->mi, &a->d[i]);
	rix_master_index_free(a->mi);
	a->mi = NULL;
}

static void test_merge_allocation_failure_n(void **state)
{
	(void)state;
	static struct idxdata d[MERGE_N];
	uint64_t st = 80;
	for (int i = 0; i < MERGE_N; i++)
		make_idxdata(&d[i], &st, NULL);
	struct merge_arg a = { d, NULL };
	/* A failed merge keeps nothing half-built; a successful one keeps the merged table. */
	rix_test_oom o = { .what = "merge", .run = merge_run, .arg = &a, .max = 100000, .setup = merge_setup,
			   .check = merge_check, .live = RIX_TEST_OOM_LIVE_ON_FAILURE };
	rix_test_oom_run(&o);
}

/* A table of TOP_BASE indexes with a top of one more, and one more added: the merge under test
 * builds the top again (its share allows it: 700 of 11900 data blobs, 100 of 1700 trees). */
enum { TOP_BASE = 34, TOP_N = TOP_BASE + 2 };

static void top_setup(void *arg)
{
	struct merge_arg *a = arg;
	assert_int_equal(rix_master_index_new(&a->mi), 0);
	for (int i = 0; i < TOP_BASE; i++)
		assert_int_equal(rix_master_index_add(a->mi, build_index(&a->d[i], 1)), 0);
	assert_int_equal(rix_master_index_merge(a->mi), 0);
	assert_int_equal(rix_master_index_add(a->mi, build_index(&a->d[TOP_BASE], 1)), 0);
	assert_int_equal(rix_master_index_merge(a->mi), 0);
	const struct mstate *s = atomic_load(&a->mi->state);
	assert_non_null(s->top[RIX_BLOB_DATA]);
	assert_non_null(s->top[RIX_BLOB_TREE]);
	assert_int_equal(rix_master_index_add(a->mi, build_index(&a->d[TOP_BASE + 1], 1)), 0);
}

static void top_check(void *arg, const rix_test_oom_round *round)
{
	struct merge_arg *a = arg;
	const struct mstate *s = atomic_load(&a->mi->state);
	size_t ntop = rix__ranked_count(s->top[RIX_BLOB_DATA]);
	assert_int_equal(ntop, round->rc == 0 ? 700 : 350); /* built again, or as it was */
	for (int i = 0; i < TOP_N; i++)
		check_idxdata(a->mi, &a->d[i]);
	assert_int_equal(rix_master_index_merge(a->mi), 0);
	check_tables(a->mi);
	for (int i = 0; i < TOP_N; i++)
		check_idxdata(a->mi, &a->d[i]);
	rix_master_index_free(a->mi);
	a->mi = NULL;
}

/* Allocation failure at every point of a merge that builds the top again: RIX_ENOMEM, the state
 * as it was (its table and top shared with the new state until then), and a merge after it. */
static void test_top_allocation_failure(void **state)
{
	(void)state;
	static struct idxdata d[TOP_N];
	uint64_t st = 81;
	for (int i = 0; i < TOP_N; i++)
		make_idxdata(&d[i], &st, NULL);
	struct merge_arg a = { d, NULL };
	rix_test_oom o = { .what = "top merge", .run = merge_run, .arg = &a, .max = 100000, .setup = top_setup,
			   .check = top_check, .live = RIX_TEST_OOM_LIVE_ON_FAILURE };
	assert_true(rix_test_oom_run(&o) > 1);
}

/* ---- Concurrency: readers during merges, racing pending claims ---------------------------- */

/*
 * A single lookup answers alike by each of its paths: the leaf (the read section's fast path,
 * the filters in line), inside a read section the caller already holds, and as a thread's
 * first (no reader slot yet; its first ID a present one): the last two take the read section
 * out of line. Each in three states: tables only (an absent ID answered by the filters), tables
 * and blobs stored since, and those with a separate index too (where the tables' "no" is not
 * the answer). Every answer is checked against the data.
 */
#define PATH_IDS 600
struct path_answers {
	rix_master_index *mi;
	const rix_id *ids;
	const rix_blob_type *types;
	int rc[PATH_IDS];
	rix_packed_blob pb[PATH_IDS];
};

static void path_lookups(struct path_answers *a)
{
	for (int i = 0; i < PATH_IDS; i++) {
		memset(&a->pb[i], 0, sizeof(a->pb[i]));
		a->rc[i] = rix_master_index_lookup(&a->pb[i], a->mi, a->types[i], &a->ids[i]);
	}
}

static void *path_thread(void *p)
{
	path_lookups(p);
	return NULL;
}

static void check_paths(rix_master_index *mi, const struct idxdata *d, size_t nd, size_t nstored,
			const rix_blob *stored, uint64_t *st)
{
	static rix_id ids[PATH_IDS];
	static rix_blob_type types[PATH_IDS];
	static struct path_answers leaf, nested, first;
	const rix_blob *want[PATH_IDS];
	for (int i = 0; i < PATH_IDS; i++) {
		want[i] = NULL;
		types[i] = RIX_BLOB_DATA;
		if (i % 3 == 2) {
			rix_test_random_id(&ids[i], st);
		} else if (i % 3 == 0 || nstored == 0) {
			want[i] = &d[rix_test_next(st) % nd].blobs[rix_test_next(st) % PACKS_PER_INDEX][1 + i % 7];
		} else {
			want[i] = &stored[rix_test_next(st) % nstored];
		}
		if (want[i] != NULL) {
			ids[i] = want[i]->id;
			types[i] = want[i]->type;
		}
	}
	struct path_answers *all[3] = { &leaf, &nested, &first };
	for (int k = 0; k < 3; k++) {
		all[k]->mi = mi;
		all[k]->ids = ids;
		all[k]->types = types;
	}
	path_lookups(&leaf);
	rix__rcu_read_lock();
	path_lookups(&nested);
	rix__rcu_read_unlock();
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, path_thread, &first), 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	for (int i = 0; i < PATH_IDS; i++) {
		if (want[i] == NULL) {
			assert_int_equal(leaf.rc[i], RIX_ENOTFOUND);
		} else {
			assert_int_equal(leaf.rc[i], 0);
			assert_memory_equal(leaf.pb[i].id.b, want[i]->id.b, 32);
			assert_int_equal(leaf.pb[i].type, want[i]->type);
			assert_int_equal(leaf.pb[i].offset, want[i]->offset);
			assert_int_equal(leaf.pb[i].length, want[i]->length);
		}
		for (int k = 1; k < 3; k++) {
			assert_int_equal(all[k]->rc[i], leaf.rc[i]);
			assert_memory_equal(&all[k]->pb[i], &leaf.pb[i], sizeof(leaf.pb[i]));
		}
	}
}

static void test_lookup_paths(void **state)
{
	(void)state;
	enum { N = 6 };
	static struct idxdata d[N], more; /* more: one pack of it stored, named by no index */
	uint64_t st = 83;
	for (int i = 0; i < N; i++)
		make_idxdata(&d[i], &st, NULL);
	make_idxdata(&more, &st, NULL);
	rix_master_index *mi;
	assert_int_equal(rix_master_index_new(&mi), 0);
	for (int i = 0; i < N - 1; i++)
		assert_int_equal(rix_master_index_add(mi, build_index(&d[i], 1)), 0);
	assert_int_equal(rix_master_index_merge(mi), 0);
	check_paths(mi, d, N - 1, 0, NULL, &st);
	assert_int_equal(rix_master_index_store_pack(mi, &more.packs[0], more.blobs[0], PER_PACK), 0);
	check_paths(mi, d, N - 1, PER_PACK, more.blobs[0], &st);
	assert_int_equal(rix_master_index_add(mi, build_index(&d[N - 1], 1)), 0);
	check_paths(mi, d, N, PER_PACK, more.blobs[0], &st);
	rix_master_index_free(mi);
}

struct reader_arg {
	rix_master_index *mi;
	const struct idxdata *d;
	atomic_int *stop;
	atomic_long lookups;
	atomic_int exited; /* set when the reader returns, failed or stopped */
};

static void *reader_body(void *p)
{
	struct reader_arg *a = p;
	uint64_t st = (uint64_t)(uintptr_t)p;
	while (!atomic_load(a->stop)) {
		const rix_blob *bl = &a->d->blobs[rix_test_next(&st) % PACKS_PER_INDEX][rix_test_next(&st) % PER_PACK];
		rix_packed_blob pb;
		if (rix_master_index_lookup(&pb, a->mi, bl->type, &bl->id) != 0 || pb.offset != bl->offset)
			return (void *)1;
		/* lookup_all: lock-free while no index is separate, locked while one is; each entry once. */
		rix_packed_blob all[2];
		if (rix_master_index_lookup_all(all, 2, a->mi, bl->type, &bl->id) != 1 || all[0].offset != bl->offset ||
		    memcmp(all[0].pack_id.b, pb.pack_id.b, RIX_ID_SIZE) != 0)
			return (void *)3;
		rix_id ids[40];
		bool found[40];
		for (int i = 0; i < 40; i++)
			ids[i] = a->d->blobs[i % PACKS_PER_INDEX][i % 5].id;
		if (rix_master_index_lookup_many(NULL, found, a->mi, RIX_BLOB_DATA, ids, 40) != 40)
			return (void *)2;
		atomic_fetch_add(&a->lookups, 1);
	}
	return NULL;
}

static void *reader(void *p)
{
	struct reader_arg *a = p;
	void *ret = reader_body(p);
	atomic_store(&a->exited, 1);
	return ret;
}

static void test_readers_during_merges(void **state)
{
	(void)state;
	enum { N = 24 };
	static struct idxdata d[N];
	uint64_t st = 81;
	for (int i = 0; i < N; i++)
		make_idxdata(&d[i], &st, NULL);
	rix_master_index *mi;
	assert_int_equal(rix_master_index_new(&mi), 0);
	assert_int_equal(rix_master_index_add(mi, build_index(&d[0], 1)), 0);
	atomic_int stop = 0;
	struct reader_arg args[2] = { { mi, &d[0], &stop, 0, 0 }, { mi, &d[0], &stop, 0, 0 } };
	pthread_t th[2];
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&th[i], NULL, reader, &args[i]), 0);
	for (int i = 1; i < N; i++) {
		assert_int_equal(rix_master_index_add(mi, build_index(&d[i], 1)), 0);
		/* Every merge frees the state readers were using a moment ago: a reclamation
		 * bug shows as a wrong answer here or a use-after-free under ASan. */
		assert_int_equal(rix_master_index_merge(mi), 0);
		rix_blob b = d[i].blobs[0][0];
		rix_test_random_id(&b.id, &st);
		assert_int_equal(rix_master_index_store_pack(mi, &d[i].packs[0], &b, 1), 0);
	}
	assert_int_equal(rix_master_index_merge(mi), 0);
	/* Let each reader do some lookups on the final state too, however threads are scheduled
	 * (a loaded machine may not have run them at all yet). */
	for (int i = 0; i < 2; i++) {
		long seen = atomic_load(&args[i].lookups);
		while (atomic_load(&args[i].lookups) < seen + 100 && !atomic_load(&args[i].exited))
			sched_yield();
	}
	atomic_store(&stop, 1);
	for (int i = 0; i < 2; i++) {
		void *ret;
		assert_int_equal(pthread_join(th[i], &ret), 0);
		assert_null(ret);
		assert_true(atomic_load(&args[i].lookups) >= 100);
	}
	print_message("rcu fast path (membarrier): %s\n", rix__rcu_fast() ? "yes" : "no");
	for (int i = 0; i < N; i++)
		check_idxdata(mi, &d[i]);
	rix_master_index_free(mi);
}

struct claim_arg {
	rix_master_index *mi;
	const rix_id *ids;
	int n;
	int wins;
};

static void *claimer(void *p)
{
	struct claim_arg *a = p;
	for (int i = 0; i < a->n; i++)
		if (rix_master_index_add_pending(a->mi, RIX_BLOB_DATA, &a->ids[i]) == 1)
			a->wins++;
	return NULL;
}

static void test_pending_race(void **state)
{
	(void)state;
	enum { K = 20000 };
	static rix_id ids[K];
	uint64_t st = 82;
	for (int i = 0; i < K; i++)
		rix_test_random_id(&ids[i], &st);
	rix_master_index *mi;
	assert_int_equal(rix_master_index_new(&mi), 0);
	struct claim_arg a[2] = { { mi, ids, K, 0 }, { mi, ids, K, 0 } };
	pthread_t th[2];
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&th[i], NULL, claimer, &a[i]), 0);
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_join(th[i], NULL), 0);
	/* Every blob was claimed exactly once. */
	assert_int_equal(a[0].wins + a[1].wins, K);
	rix_master_index_free(mi);
}

/* Feeds d to a batch the way the JSON decoder does (through the sink). */
static void feed_batch(rix_master_batch *b, const struct idxdata *d)
{
	const rix_index_sink *sk = rix_master_batch_sink(b);
	for (int p = 0; p < PACKS_PER_INDEX; p++) {
		uint32_t num;
		assert_int_equal(sk->pack(sk->payload, &d->packs[p], &num), 0);
		for (int k = 0; k < PER_PACK; k++) {
			const rix_blob *bl = &d->blobs[p][k];
			rix_loc loc = { num, bl->offset, bl->length, bl->uncompressed_length };
			assert_int_equal(sk->blob(sk->payload, bl->type, &bl->id, &loc), 0);
		}
	}
}

/* A reader over a text in reads of at most `chunk` bytes. */
struct text_reader {
	const char *p;
	size_t n, at, chunk;
};

static int text_read(void *arg, void *buf, size_t cap, size_t *got)
{
	struct text_reader *r = arg;
	size_t k = r->n - r->at;
	k = k < r->chunk ? k : r->chunk;
	k = k < cap ? k : cap;
	memcpy(buf, r->p + r->at, k);
	r->at += k;
	*got = k;
	return 0;
}

struct same_arg {
	rix_master_index *other;
	bool dedup_only;
	size_t n;
};

/* Every blob of the index is in other, at the same place (data blobs: known, when dedup-only). */
static int same_blob(void *arg, const rix_packed_blob *pb)
{
	struct same_arg *a = arg;
	a->n++;
	if (a->dedup_only && pb->type == RIX_BLOB_DATA) {
		assert_true(rix_master_index_has(a->other, pb->type, &pb->id));
		return 0;
	}
	rix_packed_blob got;
	assert_int_equal(rix_master_index_lookup(&got, a->other, pb->type, &pb->id), 0);
	if (memcmp(got.pack_id.b, pb->pack_id.b, RIX_ID_SIZE) != 0 || got.offset != pb->offset ||
	    got.length != pb->length || got.uncompressed_length != pb->uncompressed_length) {
		/* a blob stored twice: the other copy may be the one found */
		rix_packed_blob all[8];
		size_t n = rix_master_index_lookup_all(all, 8, a->other, pb->type, &pb->id);
		bool found = false;
		for (size_t i = 0; i < n && i < 8; i++)
			found |= memcmp(all[i].pack_id.b, pb->pack_id.b, RIX_ID_SIZE) == 0 && all[i].offset == pb->offset;
		assert_true(found);
	}
	return 0;
}

/*
 * A batch filled by the streaming decoder in a small window (pack objects cut at the window's
 * end are given to the batch, rolled back and given again) holds what the whole-text decoder
 * gives it: the same counts and blobs after bulk_finish, full and dedup-only (where a pack gets
 * a number only when a tree blob names it, so the rollback must drop those numbers too).
 */
static void test_bulk_stream_rollback(void **state)
{
	(void)state;
	uint64_t st = 1234;
	rix_index *idx;
	assert_int_equal(rix_index_new(&idx), 0);
	rix_blob blobs[30];
	for (int p = 0; p < 400; p++) {
		size_t n = 1 + rix_test_next(&st) % 30;
		for (size_t i = 0; i < n; i++) {
			rix_test_random_id(&blobs[i].id, &st);
			blobs[i].type = rix_test_next(&st) % 4 == 0 ? RIX_BLOB_TREE : RIX_BLOB_DATA;
			blobs[i].offset = (uint32_t)i * 100;
			blobs[i].length = 100;
			blobs[i].uncompressed_length = (uint32_t)(rix_test_next(&st) % 2 * 300);
		}
		if (p % 10 == 0) /* a blob stored in two packs */
			blobs[0].id = blobs[n - 1].id;
		rix_id pack;
		rix_test_random_id(&pack, &st);
		assert_int_equal(rix_index_store_pack(idx, &pack, blobs, n), 0);
	}
	char *json;
	size_t len;
	assert_int_equal(rix_index_encode(&json, &len, idx), 0);
	for (int dedup = 0; dedup <= 1; dedup++) {
		rix_master_index *whole, *streamed;
		assert_int_equal(rix_master_index_new(&whole), 0);
		assert_int_equal(rix_master_index_new(&streamed), 0);
		rix_master_index_set_dedup_only(whole, dedup);
		rix_master_index_set_dedup_only(streamed, dedup);
		/* room for the streamed load's entries (address space: more than a part's first
		 * mapping holds): none for data blobs a dedup-only index collects as IDs, the trees'
		 * always */
		size_t many = 1000000;
		assert_true(many / 256 > RIX__PART_FIRST / RIX__EREC);
		assert_int_equal(rix_master_index_bulk_reserve(streamed, RIX_BLOB_DATA, many), 0);
		assert_int_equal(rix_master_index_bulk_reserve(streamed, RIX_BLOB_TREE, many), 0);
		if (dedup)
			assert_null(streamed->bulk.c[RIX_BLOB_DATA]);
		else
			assert_true(collect_room(streamed->bulk.c[RIX_BLOB_DATA]) >= many / 256);
		assert_true(collect_room(streamed->bulk.c[RIX_BLOB_TREE]) >= many / 256);
		rix_master_batch *bw, *bs;
		assert_int_equal(rix_master_index_batch_new(&bw, whole), 0);
		assert_int_equal(rix_master_index_batch_new(&bs, streamed), 0);
		assert_int_equal(rix_index_decode_to(NULL, json, len, rix_master_batch_sink(bw)), 0);
		assert_int_equal(rix_master_batch_commit(bw, NULL), 0);
		rix_index_stream *s;
		assert_int_equal(rix_index_stream_new(&s, 8192), 0);
		/* First a text cut short: an error, the batch discarded, as the loader does. */
		struct text_reader r = { json, len / 2, 0, 97 };
		assert_int_equal(rix_index_stream_decode(s, NULL, text_read, &r, rix_master_batch_stream_sink(bs)),
				 RIX_ECORRUPT);
		rix_master_batch_discard(bs);
		r = (struct text_reader){ json, len, 0, 97 };
		assert_int_equal(rix_index_stream_decode(s, NULL, text_read, &r, rix_master_batch_stream_sink(bs)), 0);
		assert_int_equal(rix_index_stream_window_peak(s), 8192); /* every pack fits (30 blobs: < 7 KB) */
		assert_int_equal(rix_master_batch_commit(bs, NULL), 0);
		rix_index_stream_free(s);
		assert_int_equal(rix_master_index_bulk_finish(whole), 0);
		assert_int_equal(rix_master_index_bulk_finish(streamed), 0);
		for (int t = 0; t < RIX_BLOB_TYPES; t++)
			assert_int_equal(rix_master_index_count(streamed, t), rix_master_index_count(whole, t));
		assert_int_equal(rix_master_index_pack_count(streamed), rix_master_index_pack_count(whole));
		assert_true(rix_master_index_count(streamed, RIX_BLOB_TREE) > 0);
		struct same_arg a = { streamed, dedup, 0 };
		assert_int_equal(rix_index_foreach(idx, same_blob, &a), 0);
		assert_true(a.n > 1000);
		rix_master_batch_free(bw);
		rix_master_batch_free(bs);
		rix_master_index_free(whole);
		rix_master_index_free(streamed);
	}
	rix_free(json);
	rix_index_free(idx);
}

/*
 * A pack named by two index files (an interrupted prune: every pack in an old and a new file):
 * its entries are kept once, in the in-place build and in the merge, as restic's merge keeps
 * them; a blob stored in two packs keeps both copies.
 */
static void test_bulk_same_pack_twice(void **state)
{
	(void)state;
	uint64_t st = 99;
	static struct idxdata a, b, again;
	make_idxdata(&a, &st, NULL);
	make_idxdata(&b, &st, &a); /* blob 0 of each pack: a copy of one of a's, in another pack */
	again = a;
	rix_test_random_id(&again.id, &st); /* the same packs and blobs under another file name */
	rix_master_index *mi;
	assert_int_equal(rix_master_index_new_seeded(&mi, 0x5a3e), 0);
	rix_master_batch *bt;
	assert_int_equal(rix_master_index_batch_new(&bt, mi), 0);
	const struct idxdata *files[] = { &a, &b, &again };
	for (int i = 0; i < 3; i++) {
		feed_batch(bt, files[i]);
		assert_int_equal(rix_master_batch_commit(bt, &files[i]->id), 0);
	}
	assert_int_equal(rix_master_index_bulk_finish(mi), 0);
	size_t total = 0;
	assert_int_equal(rix_master_index_foreach(mi, count_blob, &total), 0);
	assert_int_equal(total, (size_t)2 * PACKS_PER_INDEX * PER_PACK);
	for (int p = 0; p < PACKS_PER_INDEX; p++) {
		const rix_blob *x = &a.blobs[p][2];
		assert_int_equal(rix_master_index_lookup_all(NULL, 0, mi, x->type, &x->id), 1);
		const rix_blob *y = &a.blobs[p][1]; /* b holds a copy in its own pack */
		assert_int_equal(rix_master_index_lookup_all(NULL, 0, mi, y->type, &y->id), 2);
	}
	check_idxdata(mi, &a);
	check_idxdata(mi, &b);
	check_tables(mi); /* the chains compacted by the drop */
	/* Once more on top: the merge path. */
	rix_test_random_id(&again.id, &st);
	feed_batch(bt, &again);
	assert_int_equal(rix_master_batch_commit(bt, &again.id), 0);
	assert_int_equal(rix_master_index_bulk_finish(mi), 0);
	total = 0;
	assert_int_equal(rix_master_index_foreach(mi, count_blob, &total), 0);
	assert_int_equal(total, (size_t)2 * PACKS_PER_INDEX * PER_PACK);
	check_idxdata(mi, &a);
	check_tables(mi);
	rix_master_batch_free(bt);
	rix_master_index_free(mi);
}

/*
 * IDs that share long prefixes (the set's buckets are the IDs' first bits: here one bucket
 * holds a long run of them, and some pairs differ only in their last bytes): every present ID
 * found with its own place, single and batched; absent IDs sharing those prefixes not found.
 */
static int put_blob(const rix_index_sink *k, uint32_t pack, const rix_id *id, uint32_t off)
{
	rix_loc loc = { .pack = pack, .offset = off, .length = 100 + off, .uncompressed_length = 0 };
	return k->blob(k->payload, RIX_BLOB_DATA, id, &loc);
}

static void test_shared_prefixes(void **state)
{
	(void)state;
	enum { TOTAL = 400, RUN = 120, TWINS = 20, NABSENT = 40 };
	uint64_t st = 4242;
	rix_id ids[TOTAL], absent[NABSENT], base;
	rix_test_random_id(&base, &st);
	for (size_t i = 0; i < TOTAL; i++) {
		rix_test_random_id(&ids[i], &st);
		if (i < RUN) /* one run: base's first 8 bytes */
			memcpy(ids[i].b, base.b, 8);
		if (i >= RUN && i < RUN + TWINS) { /* the twin of an ID of the run but for its last byte */
			ids[i] = ids[i - RUN];
			ids[i].b[RIX_ID_SIZE - 1] ^= 0x01;
		}
	}
	for (size_t i = 0; i < NABSENT; i++) {
		rix_test_random_id(&absent[i], &st);
		if (i % 2 == 0) /* in the run's bucket */
			memcpy(absent[i].b, base.b, 8);
		else /* a present ID but for one bit of its middle */
			(absent[i] = ids[i % RUN]).b[16] ^= 0x10;
	}
	rix_master_index *mi;
	assert_int_equal(rix_master_index_new(&mi), 0);
	rix_master_batch *bt;
	assert_int_equal(rix_master_index_batch_new(&bt, mi), 0);
	const rix_index_sink *k = rix_master_batch_sink(bt);
	rix_id pack;
	rix_test_random_id(&pack, &st);
	uint32_t pn;
	assert_int_equal(k->pack(k->payload, &pack, &pn), 0);
	for (size_t i = 0; i < TOTAL; i++)
		assert_int_equal(put_blob(k, pn, &ids[i], (uint32_t)i * 1000), 0);
	assert_int_equal(rix_master_batch_commit(bt, NULL), 0);
	assert_int_equal(rix_master_index_bulk_finish(mi), 0);
	check_tables(mi);
	for (size_t i = 0; i < TOTAL; i++) {
		rix_packed_blob pb;
		assert_int_equal(rix_master_index_lookup(&pb, mi, RIX_BLOB_DATA, &ids[i]), 0);
		assert_memory_equal(pb.id.b, ids[i].b, RIX_ID_SIZE);
		assert_int_equal(pb.offset, (uint32_t)i * 1000);
		assert_int_equal(pb.length, 100 + (uint32_t)i * 1000);
	}
	static rix_packed_blob many[TOTAL];
	bool found[TOTAL];
	assert_int_equal(rix_master_index_lookup_many(many, found, mi, RIX_BLOB_DATA, ids, TOTAL), TOTAL);
	for (size_t i = 0; i < TOTAL; i++)
		assert_int_equal(many[i].offset, (uint32_t)i * 1000);
	for (size_t i = 0; i < NABSENT; i++) {
		assert_int_equal(rix_master_index_lookup(NULL, mi, RIX_BLOB_DATA, &absent[i]), RIX_ENOTFOUND);
		assert_false(rix_master_index_has(mi, RIX_BLOB_DATA, &absent[i]));
	}
	assert_int_equal(rix_master_index_lookup_many(NULL, found, mi, RIX_BLOB_DATA, absent, NABSENT), 0);
	for (size_t i = 0; i < NABSENT; i++)
		assert_false(found[i]);
	rix_master_batch_free(bt);
	rix_master_index_free(mi);
}

/*
 * Bulk loading: batches committed from several threads' worth of files (one discarded), the
 * ranked table built in place; then a second bulk load on top (the merge path); answers equal
 * those of the per-index path, counts and index IDs add up.
 */
static void test_bulk_load(void **state)
{
	(void)state;
	uint64_t st = 77;
	enum { ND = 40 };
	static struct idxdata d[ND], junk;
	for (int i = 0; i < ND; i++)
		make_idxdata(&d[i], &st, i > 0 && i % 3 == 0 ? &d[i - 1] : NULL);
	make_idxdata(&junk, &st, NULL);
	rix_master_index *mi;
	assert_int_equal(rix_master_index_new_seeded(&mi, 0xb01c), 0); /* reproducible layout */
	/* Room reserved and nothing committed (every file damaged): given back by bulk_finish. */
	assert_int_equal(rix_master_index_bulk_reserve(mi, RIX_BLOB_DATA, 1000), 0);
	assert_int_equal(rix_master_index_bulk_finish(mi), 0);
	assert_null(mi->bulk.c[RIX_BLOB_DATA]);
	rix_master_batch *b1, *b2;
	assert_int_equal(rix_master_index_batch_new(&b1, mi), 0);
	assert_int_equal(rix_master_index_batch_new(&b2, mi), 0);
	for (int i = 0; i < ND / 2; i++) {
		feed_batch(i % 2 ? b1 : b2, &d[i]);
		assert_int_equal(rix_master_batch_commit(i % 2 ? b1 : b2, &d[i].id), 0);
		if (i == 5) { /* a damaged file: fed, then dropped */
			feed_batch(b1, &junk);
			rix_master_batch_discard(b1);
		}
	}
	/* Nothing is searchable before bulk_finish. */
	assert_false(rix_master_index_has(mi, d[0].blobs[0][1].type, &d[0].blobs[0][1].id));
	assert_int_equal(rix_master_index_bulk_finish(mi), 0);
	for (int i = 0; i < ND / 2; i++)
		check_idxdata(mi, &d[i]);
	for (int p = 0; p < PACKS_PER_INDEX; p++)
		assert_false(rix_master_index_has(mi, junk.blobs[p][1].type, &junk.blobs[p][1].id));
	check_unknown(mi, &st);
	check_batch(mi, d, ND / 2, &st);
	size_t total = 0;
	assert_int_equal(rix_master_index_foreach(mi, count_blob, &total), 0);
	assert_int_equal(total, (size_t)(ND / 2) * PACKS_PER_INDEX * PER_PACK);
	assert_int_equal(rix_master_index_pack_count(mi), (size_t)(ND / 2) * PACKS_PER_INDEX);
	/* A second bulk load merges with the table, its room reserved first: the committed entries
	 * then stay where they are (no part of the collection moves). */
	size_t want = (size_t)(ND / 2) * PACKS_PER_INDEX * PER_PACK;
	assert_int_equal(rix_master_index_bulk_reserve(mi, (rix_blob_type)RIX_BLOB_TYPES, want), RIX_EINVAL);
	assert_int_equal(rix_master_index_bulk_reserve(mi, RIX_BLOB_DATA, want), 0);
	const struct rix__ecollect *c = mi->bulk.c[RIX_BLOB_DATA];
	assert_non_null(c);
	assert_true(collect_room(c) >= want / 256);
	const uint8_t *room[256];
	for (int p = 0; p < 256; p++)
		room[p] = c->part[p].p;
	for (int i = ND / 2; i < ND; i++) {
		feed_batch(b1, &d[i]);
		assert_int_equal(rix_master_batch_commit(b1, &d[i].id), 0);
		assert_ptr_equal(mi->bulk.c[RIX_BLOB_DATA], c);
		for (int p = 0; p < 256; p++)
			assert_ptr_equal(c->part[p].p, room[p]);
	}
	assert_int_equal(rix_master_index_bulk_finish(mi), 0);
	assert_int_equal(rix_master_index_bulk_finish(mi), 0); /* nothing pending: a no-op */
	for (int i = 0; i < ND; i++)
		check_idxdata(mi, &d[i]);
	check_batch(mi, d, ND, &st);
	rix_id *ids;
	size_t nids;
	assert_int_equal(rix_master_index_index_ids(&ids, &nids, mi), 0);
	assert_int_equal(nids, ND);
	rix_free(ids);
	rix_master_batch_free(b1);
	rix_master_batch_free(b2);
	rix_master_batch_free(NULL);
	rix_master_index_free(mi);
}

struct bulk_arg {
	struct idxdata *d;
	rix_master_index *mi;
	rix_master_batch *b;
};

/* A table holding d[0]. */
static void bulk_setup(void *arg)
{
	struct bulk_arg *a = arg;
	assert_int_equal(rix_master_index_new_seeded(&a->mi, 0x5eed), 0);
	a->b = NULL;
	assert_int_equal(rix_master_index_batch_new(&a->b, a->mi), 0);
	feed_batch(a->b, &a->d[0]);
	assert_int_equal(rix_master_batch_commit(a->b, &a->d[0].id), 0);
	assert_int_equal(rix_master_index_bulk_finish(a->mi), 0);
}

/* d[1] and d[2] through the batch's sink, then the bulk finish. */
static int bulk_run(void *arg)
{
	struct bulk_arg *a = arg;
	struct idxdata *d = a->d;
	/* a hint: when its allocation fails, the entries grow as they come */
	(void)rix_master_index_bulk_reserve(a->mi, RIX_BLOB_DATA, 2 * PACKS_PER_INDEX * PER_PACK);
	int rc = 0;
	for (int i = 1; rc == 0 && i < 3; i++) {
		const rix_index_sink *sk = rix_master_batch_sink(a->b);
		for (int p = 0; rc == 0 && p < PACKS_PER_INDEX; p++) {
			uint32_t num = 0;
			rc = sk->pack(sk->payload, &d[i].packs[p], &num);
			for (int k = 0; rc == 0 && k < PER_PACK; k++) {
				const rix_blob *bl = &d[i].blobs[p][k];
				rix_loc loc = { num, bl->offset, bl->length, bl->uncompressed_length };
				rc = sk->blob(sk->payload, bl->type, &bl->id, &loc);
			}
		}
		if (rc == 0)
			rc = rix_master_batch_commit(a->b, &d[i].id);
		else
			rix_master_batch_discard(a->b);
	}
	if (rc == 0)
		rc = rix_master_index_bulk_finish(a->mi);
	return rc;
}

static void bulk_check(void *arg, const rix_test_oom_round *round)
{
	struct bulk_arg *a = arg;
	rix_master_batch_free(a->b);
	a->b = NULL;
	check_idxdata(a->mi, &a->d[0]); /* the state before is intact, failure or not */
	if (round->rc == 0)
		for (int i = 1; i < 3; i++)
			check_idxdata(a->mi, &a->d[i]);
	rix_master_index_free(a->mi);
	a->mi = NULL;
}

/*
 * Allocation failure at every point of a bulk load on top of a table (the merge path):
 * RIX_ENOMEM, and what was searchable before still answers the same (leaks: ASan; the batch and
 * the table are made outside the failing part, so the live count says nothing).
 */
static void test_bulk_allocation_failure(void **state)
{
	(void)state;
	uint64_t st = 78;
	static struct idxdata d[3];
	for (int i = 0; i < 3; i++)
		make_idxdata(&d[i], &st, NULL);
	struct bulk_arg a = { d, NULL, NULL };
	rix_test_oom o = { .what = "bulk load", .run = bulk_run, .arg = &a, .max = 500, .setup = bulk_setup,
			   .check = bulk_check, .live = RIX_TEST_OOM_LIVE_UNCHECKED };
	assert_true(rix_test_oom_run(&o) > 1);
}

/* Few entries (one bucket), and a bulk load of one type only: the other table is carried over. */
static void test_bulk_small_and_carried_over(void **state)
{
	(void)state;
	uint64_t st = 79;
	for (uint64_t seed = 1; seed <= 3; seed++) {
		rix_master_index *mi;
		assert_int_equal(rix_master_index_new_seeded(&mi, seed), 0);
		rix_master_batch *b;
		assert_int_equal(rix_master_index_batch_new(&b, mi), 0);
		const rix_index_sink *sk = rix_master_batch_sink(b);
		rix_id pack, ids[3];
		rix_test_random_id(&pack, &st);
		uint32_t num;
		assert_int_equal(sk->pack(sk->payload, &pack, &num), 0);
		for (int i = 0; i < 3; i++) { /* 2 data blobs, 1 tree: count 2 and 1, one bucket each */
			rix_test_random_id(&ids[i], &st);
			rix_loc loc = { num, (uint32_t)i * 100, 100, 0 };
			assert_int_equal(sk->blob(sk->payload, i == 2 ? RIX_BLOB_TREE : RIX_BLOB_DATA, &ids[i], &loc), 0);
		}
		assert_int_equal(rix_master_batch_commit(b, NULL), 0);
		assert_int_equal(rix_master_index_bulk_finish(mi), 0);
		/* Now data only: the tree table is carried over, not rebuilt. */
		rix_id more;
		rix_test_random_id(&more, &st);
		assert_int_equal(sk->pack(sk->payload, &pack, &num), 0);
		rix_loc loc = { num, 300, 100, 0 };
		assert_int_equal(sk->blob(sk->payload, RIX_BLOB_DATA, &more, &loc), 0);
		assert_int_equal(rix_master_batch_commit(b, NULL), 0);
		assert_int_equal(rix_master_index_bulk_finish(mi), 0);
		rix_packed_blob pb;
		for (int i = 0; i < 3; i++) {
			assert_int_equal(rix_master_index_lookup(&pb, mi, i == 2 ? RIX_BLOB_TREE : RIX_BLOB_DATA, &ids[i]), 0);
			assert_int_equal(pb.offset, (uint32_t)i * 100);
			assert_memory_equal(pb.pack_id.b, pack.b, RIX_ID_SIZE);
		}
		assert_int_equal(rix_master_index_lookup(&pb, mi, RIX_BLOB_DATA, &more), 0);
		assert_int_equal(pb.offset, 300);
		assert_int_equal(rix_master_index_count(mi, RIX_BLOB_DATA), 3);
		assert_int_equal(rix_master_index_count(mi, RIX_BLOB_TREE), 1);
		rix_master_batch_free(b);
		rix_master_index_free(mi);
	}
}


/* Whether a and b answer alike for every ID of ids[0..n) and as many random ones: lookup,
 * lookup_all (the same locations in the same order), lookup_many, counts, and the walk's count. */
static void same_answers(rix_master_index *a, rix_master_index *b, const rix_id *ids, size_t n, uint64_t *st)
{
	for (size_t i = 0; i < 2 * n; i++) {
		rix_id id = ids[i % n];
		if (i >= n)
			rix_test_random_id(&id, st);
		rix_packed_blob pa, pb, alla[4], allb[4];
		int ra = rix_master_index_lookup(&pa, a, RIX_BLOB_DATA, &id);
		assert_int_equal(ra, rix_master_index_lookup(&pb, b, RIX_BLOB_DATA, &id));
		assert_int_equal(ra == 0, i < n);
		if (ra == 0)
			assert_memory_equal(&pa, &pb, sizeof(pa));
		size_t na = rix_master_index_lookup_all(alla, 4, a, RIX_BLOB_DATA, &id);
		assert_int_equal(na, rix_master_index_lookup_all(allb, 4, b, RIX_BLOB_DATA, &id));
		assert_memory_equal(alla, allb, (na < 4 ? na : 4) * sizeof(alla[0]));
	}
	enum { Q = 600 };
	rix_id q[Q];
	rix_packed_blob oa[Q], ob[Q];
	bool fa[Q], fb[Q];
	for (size_t i = 0; i < Q; i++) {
		q[i] = ids[rix_test_next(st) % n];
		if (i % 3 == 0)
			rix_test_random_id(&q[i], st);
	}
	size_t ka = rix_master_index_lookup_many(oa, fa, a, RIX_BLOB_DATA, q, Q);
	assert_int_equal(ka, rix_master_index_lookup_many(ob, fb, b, RIX_BLOB_DATA, q, Q));
	for (size_t i = 0; i < Q; i++) {
		rix_packed_blob one;
		assert_int_equal(fa[i], fb[i]);
		assert_int_equal(fa[i], rix_master_index_lookup(&one, a, RIX_BLOB_DATA, &q[i]) == 0);
		if (fa[i]) {
			assert_memory_equal(&oa[i], &ob[i], sizeof(oa[i]));
			assert_memory_equal(&oa[i], &one, sizeof(one));
		}
	}
	for (int t = 0; t < RIX_BLOB_TYPES; t++)
		assert_int_equal(rix_master_index_count(a, t), rix_master_index_count(b, t));
	size_t wa = 0, wb = 0;
	assert_int_equal(rix_master_index_foreach(a, count_blob, &wa), 0);
	assert_int_equal(rix_master_index_foreach(b, count_blob, &wb), 0);
	assert_int_equal(wa, wb);
	assert_int_equal(wa, rix_master_index_count(a, RIX_BLOB_DATA) + rix_master_index_count(a, RIX_BLOB_TREE));
}

/* mi's image, exported, its sections copied into fresh arrays (as a cache read gives them), and
 * installed into a new master index. */
static rix_master_index *image_copy(rix_master_index *mi)
{
	rix_master_image *ex, *im;
	assert_int_equal(rix_master_index_export(&ex, mi), 0);
	size_t nd, ns, ns2;
	const void *desc = rix_master_image_desc(&nd, ex);
	assert_int_equal(rix_master_image_parse(&im, desc, nd), 0);
	assert_int_equal(rix_master_image_alloc(im), 0);
	rix_image_section *from = rix_master_image_sections(&ns, ex), *to = rix_master_image_sections(&ns2, im);
	assert_int_equal(ns, ns2);
	for (size_t i = 0; i < ns; i++) {
		assert_int_equal(from[i].n, to[i].n);
		if (from[i].n)
			memcpy(to[i].p, from[i].p, from[i].n);
	}
	rix_master_image_free(ex);
	rix_master_index *copy;
	assert_int_equal(rix_master_index_new(&copy), 0);
	assert_int_equal(rix_master_index_install(copy, im), 0);
	rix_master_image_free(im);
	return copy;
}

/*
 * A load on top of a table: a few new entries (the top: a second table of them, the table carried
 * over) and many (the table built again with them), every third a copy of an old ID at another
 * place. A copied ID answers with its old location first (lookup, lookup_all's first), then the
 * new one; counts add up. An image of a table with a top installs with the same answers; loads
 * on top of a top build the top again, until it would pass its share of the table.
 */
static void test_load_on_top_copies(void **state)
{
	(void)state;
	uint64_t st = 4243;
	const uint32_t adds[] = { 1, 3, 500, 9000 };
	enum { N = 3000 };
	for (size_t ai = 0; ai < sizeof(adds) / sizeof(adds[0]); ai++) {
		uint32_t kk = adds[ai];
		rix_id *old = malloc(N * sizeof(*old)), *add = malloc(kk * sizeof(*add));
		assert_true(old != NULL && add != NULL);
		rix_master_index *mi;
		assert_int_equal(rix_master_index_new(&mi), 0);
		rix_master_batch *bt;
		assert_int_equal(rix_master_index_batch_new(&bt, mi), 0);
		const rix_index_sink *k = rix_master_batch_sink(bt);
		rix_id pack[2];
		rix_test_random_id(&pack[0], &st);
		rix_test_random_id(&pack[1], &st);
		uint32_t pn;
		assert_int_equal(k->pack(k->payload, &pack[0], &pn), 0);
		for (uint32_t i = 0; i < N; i++) {
			rix_test_random_id(&old[i], &st);
			assert_int_equal(put_blob(k, pn, &old[i], i), 0);
		}
		assert_int_equal(rix_master_batch_commit(bt, NULL), 0);
		assert_int_equal(rix_master_index_bulk_finish(mi), 0);
		assert_int_equal(k->pack(k->payload, &pack[1], &pn), 0);
		for (uint32_t i = 0; i < kk; i++) {
			if (i % 3 == 0)
				add[i] = old[i / 3]; /* each old ID copied once at most */
			else
				rix_test_random_id(&add[i], &st);
			assert_int_equal(put_blob(k, pn, &add[i], 50000 + i), 0);
		}
		assert_int_equal(rix_master_batch_commit(bt, NULL), 0);
		assert_int_equal(rix_master_index_bulk_finish(mi), 0);
		check_tables(mi);
		assert_int_equal(rix_master_index_count(mi, RIX_BLOB_DATA), N + kk);
		for (uint32_t i = 0; i < kk; i++) {
			rix_packed_blob pb, all[3];
			assert_int_equal(rix_master_index_lookup(&pb, mi, RIX_BLOB_DATA, &add[i]), 0);
			size_t want = i % 3 == 0 ? 2 : 1;
			assert_int_equal(rix_master_index_lookup_all(all, 3, mi, RIX_BLOB_DATA, &add[i]), want);
			assert_memory_equal(&all[0], &pb, sizeof(pb));
			if (want == 2) { /* the old copy first, the new one after it */
				assert_int_equal(pb.offset, i / 3);
				assert_memory_equal(pb.pack_id.b, pack[0].b, RIX_ID_SIZE);
				assert_int_equal(all[1].offset, 50000 + i);
				assert_memory_equal(all[1].pack_id.b, pack[1].b, RIX_ID_SIZE);
			} else {
				assert_int_equal(pb.offset, 50000 + i);
				assert_memory_equal(pb.pack_id.b, pack[1].b, RIX_ID_SIZE);
			}
		}
		for (uint32_t i = 0; i < N; i += 13) {
			rix_packed_blob pb;
			assert_int_equal(rix_master_index_lookup(&pb, mi, RIX_BLOB_DATA, &old[i]), 0);
			assert_int_equal(pb.offset, i);
		}
		const struct mstate *s = atomic_load(&mi->state);
		const struct rix__ranked *table = s->table[RIX_BLOB_DATA];
		bool on_top = kk <= N / RIX__TOP_SHARE;
		assert_int_equal(s->top[RIX_BLOB_DATA] != NULL, on_top);
		if (on_top) { /* a descriptor naming a top without its table is refused */
			rix_master_image *ex, *bad;
			assert_int_equal(rix_master_index_export(&ex, mi), 0);
			size_t nd;
			const uint8_t *desc = rix_master_image_desc(&nd, ex);
			uint8_t *d2 = malloc(nd);
			assert_non_null(d2);
			memcpy(d2, desc, nd);
			memset(d2 + 40 + 4 * RIX_BLOB_DATA, 0, 4); /* the data table's count */
			assert_int_equal(rix_master_image_parse(&bad, d2, nd), RIX_ECORRUPT);
			free(d2);
			rix_master_image_free(ex);
		}
		rix_master_index *copy = image_copy(mi);
		const struct mstate *cs = atomic_load(&copy->state);
		assert_int_equal(cs->top[RIX_BLOB_DATA] != NULL, on_top);
		rix_id *all_ids = malloc((N + kk) * sizeof(*all_ids));
		assert_non_null(all_ids);
		memcpy(all_ids, old, N * sizeof(*old));
		memcpy(all_ids + N, add, kk * sizeof(*add));
		same_answers(mi, copy, all_ids, N + kk, &st);
		rix_master_index_free(copy);
		if (on_top) {
			/* Loads on top of the top, of 20 new IDs each (the first a copy of an old ID),
			 * while the top stays within its share: the table stays, the top grows. */
			uint32_t at = N + kk, nbase = N, ntop = kk, merged_all = 0;
			all_ids = realloc(all_ids, (N + kk + 400) * sizeof(*all_ids));
			assert_non_null(all_ids);
			for (int round = 0; round < 20; round++) {
				uint32_t pn3;
				rix_id pk;
				rix_test_random_id(&pk, &st);
				assert_int_equal(k->pack(k->payload, &pk, &pn3), 0);
				for (uint32_t i = 0; i < 20; i++, at++) {
					if (i == 0)
						all_ids[at] = old[N - 1 - (uint32_t)round];
					else
						rix_test_random_id(&all_ids[at], &st);
					assert_int_equal(put_blob(k, pn3, &all_ids[at], i), 0);
				}
				assert_int_equal(rix_master_batch_commit(bt, NULL), 0);
				assert_int_equal(rix_master_index_bulk_finish(mi), 0);
				check_tables(mi);
				s = atomic_load(&mi->state);
				assert_int_equal(rix_master_index_count(mi, RIX_BLOB_DATA), nbase + ntop + 20);
				if (ntop + 20 <= nbase / RIX__TOP_SHARE) {
					assert_ptr_equal(s->table[RIX_BLOB_DATA], table);
					ntop += 20;
				} else { /* past its share: one table of all */
					assert_null(s->top[RIX_BLOB_DATA]);
					nbase += ntop + 20;
					ntop = 0;
					merged_all++;
					table = s->table[RIX_BLOB_DATA];
				}
				assert_int_equal(rix__ranked_count(s->table[RIX_BLOB_DATA]), nbase);
				assert_int_equal(rix__ranked_count(s->top[RIX_BLOB_DATA]), ntop);
				/* the old copy of an ID copied again answers first, in table or top */
				rix_packed_blob pb;
				assert_int_equal(rix_master_index_lookup(&pb, mi, RIX_BLOB_DATA, &old[N - 1 - (uint32_t)round]), 0);
				assert_int_equal(pb.offset, N - 1 - (uint32_t)round);
				assert_memory_equal(pb.pack_id.b, pack[0].b, RIX_ID_SIZE);
			}
			assert_int_equal(merged_all, 1); /* 3000 / 16: the top passed its share once */
			copy = image_copy(mi);
			same_answers(mi, copy, all_ids, at, &st);
			rix_master_index_free(copy);
		}
		free(all_ids);
		rix_master_batch_free(bt);
		rix_master_index_free(mi);
		free(old);
		free(add);
	}
}

/* One blob in 40 packs (more than lookup_all's round of 16 locations): all 40 in pack order, and
 * a smaller room filled with the first ones while the count stays 40. */
static void test_lookup_all_many_copies(void **state)
{
	(void)state;
	enum { COPIES = 40 };
	uint64_t st = 4244;
	rix_master_index *mi;
	assert_int_equal(rix_master_index_new(&mi), 0);
	rix_master_batch *bt;
	assert_int_equal(rix_master_index_batch_new(&bt, mi), 0);
	const rix_index_sink *k = rix_master_batch_sink(bt);
	rix_id id, pack[COPIES];
	rix_test_random_id(&id, &st);
	for (int p = COPIES - 1; p >= 0; p--) { /* listed last pack first */
		rix_test_random_id(&pack[p], &st);
		uint32_t pn;
		assert_int_equal(k->pack(k->payload, &pack[p], &pn), 0);
		assert_int_equal(put_blob(k, pn, &id, (uint32_t)p), 0);
	}
	assert_int_equal(rix_master_batch_commit(bt, NULL), 0);
	assert_int_equal(rix_master_index_bulk_finish(mi), 0);
	rix_packed_blob all[COPIES];
	assert_int_equal(rix_master_index_lookup_all(all, COPIES, mi, RIX_BLOB_DATA, &id), COPIES);
	for (int i = 0; i < COPIES; i++) { /* pack numbers in load order: the last pack first */
		assert_int_equal(all[i].offset, (uint32_t)(COPIES - 1 - i));
		assert_memory_equal(all[i].pack_id.b, pack[COPIES - 1 - i].b, RIX_ID_SIZE);
	}
	rix_packed_blob some[COPIES];
	memset(some, 0xAB, sizeof(some));
	assert_int_equal(rix_master_index_lookup_all(some, 20, mi, RIX_BLOB_DATA, &id), COPIES);
	assert_memory_equal(some, all, 20 * sizeof(some[0]));
	for (size_t b = 20 * sizeof(some[0]); b < sizeof(some); b++)
		assert_int_equal(((uint8_t *)some)[b], 0xAB); /* nothing past the room */
	rix_master_batch_free(bt);
	rix_master_index_free(mi);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bulk_load),
		cmocka_unit_test(test_load_on_top_copies),
		cmocka_unit_test(test_lookup_all_many_copies),
		cmocka_unit_test(test_bulk_same_pack_twice),
		cmocka_unit_test(test_shared_prefixes),
		cmocka_unit_test(test_bulk_stream_rollback),
		cmocka_unit_test(test_bulk_allocation_failure),
		cmocka_unit_test(test_bulk_small_and_carried_over),
		cmocka_unit_test(test_merge_and_lookup),
		cmocka_unit_test(test_unfinished_and_own_index),
		cmocka_unit_test(test_pending),
		cmocka_unit_test(test_merge_allocation_failure_n),
		cmocka_unit_test(test_top_allocation_failure),
		cmocka_unit_test(test_lookup_paths),
		cmocka_unit_test(test_readers_during_merges),
		cmocka_unit_test(test_pending_race),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
