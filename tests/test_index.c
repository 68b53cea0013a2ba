/*
 * tests/test_index.c — one index file's content: packs stored once, lookups per type, sizes,
 * iteration (flat and grouped by pack), the final flag, ID lists, allocation failure N.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "rix/error.h"
#include "rix/index.h"
#include "testutil.h"

#define NPACKS 300
#define PER_PACK 9

struct fixture {
	rix_id packs[NPACKS];
	rix_blob blobs[NPACKS][PER_PACK];
};

static void make_fixture(struct fixture *fx, uint64_t seed)
{
	uint64_t st = seed;
	for (int p = 0; p < NPACKS; p++) {
		rix_test_random_id(&fx->packs[p], &st);
		uint32_t off = 0;
		for (int b = 0; b < PER_PACK; b++) {
			rix_blob *bl = &fx->blobs[p][b];
			rix_test_random_id(&bl->id, &st);
			bl->type = (b % 4 == 3) ? RIX_BLOB_TREE : RIX_BLOB_DATA;
			bl->offset = off;
			bl->length = 40 + (uint32_t)(rix_test_next(&st) % 100000);
			bl->uncompressed_length = (b % 2) ? bl->length * 3 : 0;
			off += bl->length;
		}
	}
}

static int store_all(rix_index *idx, const struct fixture *fx)
{
	for (int p = 0; p < NPACKS; p++) {
		int rc = rix_index_store_pack(idx, &fx->packs[p], fx->blobs[p], PER_PACK);
		if (rc != 0)
			return rc;
	}
	return 0;
}

static void check_all(const rix_index *idx, const struct fixture *fx)
{
	for (int p = 0; p < NPACKS; p++) {
		for (int b = 0; b < PER_PACK; b++) {
			const rix_blob *bl = &fx->blobs[p][b];
			rix_packed_blob pb;
			assert_int_equal(rix_index_lookup(&pb, idx, bl->type, &bl->id), 0);
			assert_memory_equal(pb.id.b, bl->id.b, 32);
			assert_memory_equal(pb.pack_id.b, fx->packs[p].b, 32);
			assert_int_equal(pb.type, bl->type);
			assert_int_equal(pb.offset, bl->offset);
			assert_int_equal(pb.length, bl->length);
			assert_int_equal(pb.uncompressed_length, bl->uncompressed_length);
			assert_true(rix_index_has(idx, bl->type, &bl->id));
			/* The other type does not see it. */
			assert_false(rix_index_has(idx, (rix_blob_type)(1 - bl->type), &bl->id));
			uint32_t size;
			assert_int_equal(rix_index_size(&size, idx, bl->type, &bl->id), 0);
			assert_int_equal(size, bl->uncompressed_length ? bl->uncompressed_length : bl->length - 32);
		}
	}
}

static void test_store_lookup_size(void **state)
{
	(void)state;
	static struct fixture fx;
	make_fixture(&fx, 11);
	rix_index *idx;
	assert_int_equal(rix_index_new(&idx), 0);
	assert_int_equal(store_all(idx, &fx), 0);
	check_all(idx, &fx);
	assert_int_equal(rix_index_pack_count(idx), NPACKS);
	assert_int_equal(rix_index_count(idx, RIX_BLOB_DATA) + rix_index_count(idx, RIX_BLOB_TREE),
			 NPACKS * PER_PACK);
	assert_int_equal(rix_index_count(idx, RIX_BLOB_TREE), NPACKS * 2);
	for (uint32_t p = 0; p < NPACKS; p++)
		assert_memory_equal(rix_index_pack_id(idx, p)->b, fx.packs[p].b, 32);
	assert_null(rix_index_pack_id(idx, NPACKS));
	rix_id unknown;
	uint64_t st = 1234;
	rix_test_random_id(&unknown, &st);
	assert_int_equal(rix_index_lookup(NULL, idx, RIX_BLOB_DATA, &unknown), RIX_ENOTFOUND);
	uint32_t size;
	assert_int_equal(rix_index_size(&size, idx, RIX_BLOB_DATA, &unknown), RIX_ENOTFOUND);
	assert_int_equal(rix_index_lookup(NULL, idx, (rix_blob_type)7, &fx.blobs[0][0].id), RIX_ENOTFOUND);
	assert_true(rix_index_memory(idx) > NPACKS * PER_PACK * 52);
	rix_index_free(idx);
}

static void test_pack_stored_once_and_duplicates(void **state)
{
	(void)state;
	static struct fixture fx;
	make_fixture(&fx, 12);
	rix_index *idx;
	assert_int_equal(rix_index_new_batch(&idx, 4), 0);
	assert_int_equal(store_all(idx, &fx), 0);
	/* Pack 0 again with pack 1's blobs: same pack number, and a blob now in two packs. */
	assert_int_equal(rix_index_store_pack(idx, &fx.packs[0], fx.blobs[1], 2), 0);
	assert_int_equal(rix_index_pack_count(idx), NPACKS);
	rix_packed_blob all[4];
	assert_int_equal(rix_index_lookup_all(all, 4, idx, fx.blobs[1][0].type, &fx.blobs[1][0].id), 2);
	/* Newest first. */
	assert_memory_equal(all[0].pack_id.b, fx.packs[0].b, 32);
	assert_memory_equal(all[1].pack_id.b, fx.packs[1].b, 32);
	assert_int_equal(rix_index_lookup_all(all, 1, idx, fx.blobs[1][0].type, &fx.blobs[1][0].id), 2);
	/* A bad type is refused before anything is stored. */
	rix_blob bad = fx.blobs[2][0];
	bad.type = (rix_blob_type)2;
	rix_id newpack = { { 1 } };
	assert_int_equal(rix_index_store_pack(idx, &newpack, &bad, 1), RIX_EINVAL);
	assert_int_equal(rix_index_pack_count(idx), NPACKS);
	rix_index_free(idx);
}

struct walk {
	const struct fixture *fx;
	size_t n;
	int packs_seen;
};

static int flat_cb(void *arg, const rix_packed_blob *pb)
{
	struct walk *w = arg;
	w->n++;
	/* Data blobs come first, then trees. */
	assert_true(w->n <= (size_t)NPACKS * 7 ? pb->type == RIX_BLOB_DATA : pb->type == RIX_BLOB_TREE);
	return 0;
}

static int pack_cb(void *arg, const rix_id *pack_id, const rix_packed_blob *blobs, size_t n)
{
	struct walk *w = arg;
	int p = w->packs_seen++;
	assert_memory_equal(pack_id->b, w->fx->packs[p].b, 32);
	assert_int_equal(n, PER_PACK);
	/* Every blob of the pack is here exactly once. */
	for (int b = 0; b < PER_PACK; b++) {
		int hits = 0;
		for (size_t i = 0; i < n; i++)
			if (memcmp(blobs[i].id.b, w->fx->blobs[p][b].id.b, 32) == 0) {
				hits++;
				assert_int_equal(blobs[i].offset, w->fx->blobs[p][b].offset);
				assert_memory_equal(blobs[i].pack_id.b, pack_id->b, 32);
			}
		assert_int_equal(hits, 1);
	}
	w->n += n;
	return 0;
}

static int stop_cb(void *arg, const rix_id *pack_id, const rix_packed_blob *blobs, size_t n)
{
	(void)pack_id;
	(void)blobs;
	(void)n;
	return ++*(int *)arg == 3 ? 42 : 0;
}

static void test_iteration(void **state)
{
	(void)state;
	static struct fixture fx;
	make_fixture(&fx, 13);
	rix_index *idx;
	assert_int_equal(rix_index_new(&idx), 0);
	assert_int_equal(store_all(idx, &fx), 0);
	struct walk w = { &fx, 0, 0 };
	assert_int_equal(rix_index_foreach(idx, flat_cb, &w), 0);
	assert_int_equal(w.n, NPACKS * PER_PACK);
	w = (struct walk){ &fx, 0, 0 };
	assert_int_equal(rix_index_foreach_pack(idx, pack_cb, &w), 0);
	assert_int_equal(w.packs_seen, NPACKS);
	assert_int_equal(w.n, NPACKS * PER_PACK);
	int calls = 0;
	assert_int_equal(rix_index_foreach_pack(idx, stop_cb, &calls), 42);
	assert_int_equal(calls, 3);
	rix_index_free(idx);
}

static void test_final_and_id_lists(void **state)
{
	(void)state;
	static struct fixture fx;
	make_fixture(&fx, 14);
	rix_index *idx;
	assert_int_equal(rix_index_new(&idx), 0);
	assert_false(rix_index_is_final(idx));
	assert_int_equal(rix_index_store_pack(idx, &fx.packs[0], fx.blobs[0], PER_PACK), 0);
	rix_index_finalize(idx);
	assert_true(rix_index_is_final(idx));
	assert_int_equal(rix_index_store_pack(idx, &fx.packs[1], fx.blobs[1], PER_PACK), RIX_EINVAL);
	assert_int_equal(rix_index_pack_count(idx), 1);
	size_t n;
	assert_null(rix_index_ids(&n, idx));
	assert_int_equal(n, 0);
	for (int i = 0; i < 10; i++) {
		assert_int_equal(rix_index_add_id(idx, &fx.packs[i]), 0);
		assert_int_equal(rix_index_add_supersedes(idx, &fx.packs[20 + i]), 0);
	}
	const rix_id *ids = rix_index_ids(&n, idx);
	assert_int_equal(n, 10);
	assert_memory_equal(ids[9].b, fx.packs[9].b, 32);
	ids = rix_index_supersedes(&n, idx);
	assert_int_equal(n, 10);
	assert_memory_equal(ids[0].b, fx.packs[20].b, 32);
	rix_index_free(idx);
}

/* One round: build, walk; after the failure the index is completed and checked. */
static int oom_build(void *arg)
{
	struct fixture *fx = arg;
	rix_index *idx = NULL;
	int rc = rix_index_new_batch(&idx, 16);
	if (rc == 0) {
		rc = store_all(idx, fx);
		if (rc == 0) {
			/* foreach_pack allocates too. */
			struct walk w = { fx, 0, 0 };
			rc = rix_index_foreach_pack(idx, pack_cb, &w);
		}
		if (rc != 0) {
			/* Only one allocation fails: the half-filled index still answers and can be
			 * completed. */
			assert_true(rix_index_pack_count(idx) <= NPACKS);
			assert_int_equal(store_all(idx, fx), 0);
		}
		check_all(idx, fx);
		rix_index_free(idx);
	}
	return rc;
}

static void test_allocation_failure_n(void **state)
{
	(void)state;
	static struct fixture fx;
	make_fixture(&fx, 15);
	rix_test_oom_loop("index", oom_build, &fx, 100000);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_store_lookup_size),
		cmocka_unit_test(test_pack_stored_once_and_duplicates),
		cmocka_unit_test(test_iteration),
		cmocka_unit_test(test_final_and_id_lists),
		cmocka_unit_test(test_allocation_failure_n),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
