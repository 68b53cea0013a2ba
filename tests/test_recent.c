/*
 * tests/test_recent.c — the table of blobs stored since opening (index/recent.c): pending,
 * stored and given-up states, growth with tombstones, duplicates, the content of the next index
 * file, allocation failure at every step, and lock-free readers while writers grow the table.
 */
#include <pthread.h>
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
#include "rix/index.h"
#include "testutil.h"
#include "index/rcu.h"
#include "index/recent.h"

static int find(const struct rix__recent *re, rix_blob_type t, const rix_id *id, rix_packed_blob *out)
{
	rix__rcu_read_lock();
	int r = rix__recent_find(re, t, id, out);
	rix__rcu_read_unlock();
	return r;
}

static void make_blobs(rix_blob *b, size_t n, uint64_t *st)
{
	uint32_t off = 0;
	for (size_t i = 0; i < n; i++) {
		rix_test_random_id(&b[i].id, st);
		b[i].type = i % 4 == 3 ? RIX_BLOB_TREE : RIX_BLOB_DATA;
		b[i].offset = off;
		b[i].length = 40 + (uint32_t)(rix_test_next(st) % 1000);
		b[i].uncompressed_length = i % 2 ? 0 : b[i].length * 3;
		off += b[i].length;
	}
}

static void test_states(void **state)
{
	(void)state;
	struct rix__recent *re;
	MUST(rix__recent_new(&re, 42));
	uint64_t st = 1;
	rix_blob b[3];
	make_blobs(b, 3, &st);
	rix_id pack;
	rix_test_random_id(&pack, &st);
	rix_packed_blob pb;

	assert_int_equal(rix__recent_reserve(re, b[0].type, &b[0].id), 1);
	assert_int_equal(rix__recent_reserve(re, b[0].type, &b[0].id), 0);        /* pending */
	assert_int_equal(rix__recent_reserve(re, RIX_BLOB_TREE, &b[0].id), 1);    /* other type */
	assert_int_equal(find(re, b[0].type, &b[0].id, &pb), 0);                  /* pending: not found */
	rix__recent_unreserve(re, RIX_BLOB_TREE, &b[0].id);
	assert_int_equal(rix__recent_reserve(re, RIX_BLOB_TREE, &b[0].id), 1);    /* given up: again */
	rix__recent_unreserve(re, RIX_BLOB_TREE, &b[0].id);
	assert_int_equal(rix__recent_reserve(re, b[1].type, &b[1].id), 1);
	rix__recent_unreserve(re, b[1].type, &b[1].id);

	/* b[0] pending, b[1] given up, b[2] never reserved: all three stored by the pack. */
	MUST(rix__recent_store_pack(re, &pack, b, 3));
	for (int i = 0; i < 3; i++) {
		assert_int_equal(find(re, b[i].type, &b[i].id, &pb), 1);
		assert_memory_equal(pb.id.b, b[i].id.b, RIX_ID_SIZE);
		assert_memory_equal(pb.pack_id.b, pack.b, RIX_ID_SIZE);
		assert_int_equal(pb.type, b[i].type);
		assert_int_equal(pb.offset, b[i].offset);
		assert_int_equal(pb.length, b[i].length);
		assert_int_equal(pb.uncompressed_length, b[i].uncompressed_length);
		assert_int_equal(rix__recent_reserve(re, b[i].type, &b[i].id), 0); /* stored */
	}
	assert_int_equal(find(re, RIX_BLOB_TREE, &b[0].id, NULL), 0);
	assert_int_equal(rix__recent_count(re, RIX_BLOB_DATA) + rix__recent_count(re, RIX_BLOB_TREE), 3);
	assert_int_equal(rix__recent_pack_count(re), 1);
	assert_int_equal(rix__recent_unindexed(re), 3);

	/* The same blob again in another pack: both locations kept. */
	rix_id pack2;
	rix_test_random_id(&pack2, &st);
	MUST(rix__recent_store_pack(re, &pack2, &b[0], 1));
	rix_packed_blob all[4];
	rix__rcu_read_lock();
	assert_int_equal(rix__recent_find_all(re, b[0].type, &b[0].id, all, 4), 2);
	rix__rcu_read_unlock();
	assert_true(memcmp(all[0].pack_id.b, all[1].pack_id.b, RIX_ID_SIZE) != 0);
	assert_int_equal(rix__recent_store_pack(re, &pack2, (rix_blob[]){ { .type = 7 } }, 1), RIX_EINVAL);
	assert_int_equal(rix__recent_pack_count(re), 2);
	rix__recent_free(re);
}

struct tally {
	size_t n;
	rix_blob *want;
	size_t nwant;
	const rix_id *pack_of;
	size_t per_pack;
};

static int count_entry(void *arg, const rix_packed_blob *pb)
{
	struct tally *t = arg;
	t->n++;
	for (size_t i = 0; i < t->nwant; i++)
		if (memcmp(t->want[i].id.b, pb->id.b, RIX_ID_SIZE) == 0) {
			assert_memory_equal(pb->pack_id.b, t->pack_of[i / t->per_pack].b, RIX_ID_SIZE);
			assert_int_equal(pb->offset, t->want[i].offset);
			return 0;
		}
	fail_msg("an entry that was never stored");
	return 1;
}

/* Many packs: growth, every answer, foreach, packs, and index files taken in two rounds. */
static void test_growth_and_index(void **state)
{
	(void)state;
	enum { PACKS = 300, PER = 100, N = PACKS * PER };
	struct rix__recent *re;
	MUST(rix__recent_new(&re, 7));
	uint64_t st = 2;
	rix_blob *b = malloc(N * sizeof(*b));
	rix_id *packs = malloc(PACKS * sizeof(*packs));
	for (int p = 0; p < PACKS; p++) {
		make_blobs(&b[p * PER], PER, &st);
		rix_test_random_id(&packs[p], &st);
	}
	for (int p = 0; p < PACKS; p++) {
		/* Half reserved first (the save path), the rest stored directly; some given up and
		 * reserved again, leaving tombstones for growth to drop. */
		for (int i = 0; i < PER; i += 2) {
			rix_blob *x = &b[p * PER + i];
			assert_int_equal(rix__recent_reserve(re, x->type, &x->id), 1);
			if (i % 10 == 0) {
				rix__recent_unreserve(re, x->type, &x->id);
				assert_int_equal(rix__recent_reserve(re, x->type, &x->id), 1);
			}
		}
		MUST(rix__recent_store_pack(re, &packs[p], &b[p * PER], PER));
		if (p == PACKS / 2 - 1) {
			rix_index *idx;
			uint32_t upto;
			MUST(rix__recent_take_unindexed(re, &idx, &upto));
			assert_int_equal(upto, PACKS / 2);
			assert_int_equal(rix_index_count(idx, RIX_BLOB_DATA) + rix_index_count(idx, RIX_BLOB_TREE), N / 2);
			assert_int_equal(rix_index_pack_count(idx), PACKS / 2);
			rix_packed_blob pb;
			assert_int_equal(rix_index_lookup(&pb, idx, b[0].type, &b[0].id), 0);
			assert_memory_equal(pb.pack_id.b, packs[0].b, RIX_ID_SIZE);
			rix_index_free(idx);
			rix__recent_mark_indexed(re, upto);
			assert_int_equal(rix__recent_unindexed(re), 0);
		}
	}
	for (int i = 0; i < N; i++) {
		rix_packed_blob pb;
		assert_int_equal(find(re, b[i].type, &b[i].id, &pb), 1);
		assert_memory_equal(pb.pack_id.b, packs[i / PER].b, RIX_ID_SIZE);
		assert_int_equal(pb.length, b[i].length);
	}
	struct tally t = { .want = b, .nwant = N, .pack_of = packs, .per_pack = PER };
	MUST(rix__recent_foreach(re, count_entry, &t));
	assert_int_equal(t.n, N);
	rix_id *v = NULL;
	size_t nv = 0, cap = 0;
	MUST(rix__recent_packs(re, &v, &nv, &cap));
	assert_int_equal(nv, PACKS);
	assert_memory_equal(v[PACKS - 1].b, packs[PACKS - 1].b, RIX_ID_SIZE);
	rix_free(v);
	assert_int_equal(rix__recent_unindexed(re), N / 2);
	rix_index *idx;
	uint32_t upto;
	MUST(rix__recent_take_unindexed(re, &idx, &upto));
	assert_int_equal(upto, PACKS);
	assert_int_equal(rix_index_pack_count(idx), PACKS / 2);
	assert_int_equal(rix_index_count(idx, RIX_BLOB_DATA) + rix_index_count(idx, RIX_BLOB_TREE), N / 2);
	rix_index_free(idx);
	rix__recent_mark_indexed(re, upto);
	MUST(rix__recent_take_unindexed(re, &idx, &upto));
	assert_null(idx);
	assert_true(rix__recent_memory(re) >= (size_t)N * 52);
	rix__recent_free(re);
	free(b);
	free(packs);
}

/* The allocation-failure round of test_alloc_failure: three packs' blobs reserved and stored. */
enum { OOM_PER = 700 };
struct recent_oom {
	rix_blob b[OOM_PER * 3];
	rix_id packs[3];
};

/*
 * A table made, blobs reserved and three packs stored, the next index file taken; then, before
 * the table is freed, every pack stored must be whole and the one that failed must have left
 * nothing.
 */
static int recent_oom_round(void *arg)
{
	const struct recent_oom *o = arg;
	const rix_blob *b = o->b;
	struct rix__recent *re = NULL;
	int rc = rix__recent_new(&re, 9);
	int stored = 0;
	for (int p = 0; rc == 0 && p < 3; p++) {
		for (int i = 0; rc >= 0 && i < OOM_PER; i += 3)
			rc = rix__recent_reserve(re, b[p * OOM_PER + i].type, &b[p * OOM_PER + i].id);
		if (rc >= 0)
			rc = rix__recent_store_pack(re, &o->packs[p], &b[p * OOM_PER], OOM_PER);
		if (rc == 0)
			stored++;
	}
	if (rc == 0) {
		rix_index *idx = NULL;
		uint32_t upto;
		rc = rix__recent_take_unindexed(re, &idx, &upto);
		rix_index_free(idx);
	}
	if (re != NULL) {
		for (int p = 0; p < 3; p++)
			for (int i = 0; i < OOM_PER; i++)
				assert_int_equal(find(re, b[p * OOM_PER + i].type, &b[p * OOM_PER + i].id, NULL), p < stored);
		assert_int_equal(rix__recent_pack_count(re), stored);
	}
	rix__recent_free(re);
	return rc;
}

/* Allocation failure N while reserving and storing: an error, no leak, and nothing half done. */
static void test_alloc_failure(void **state)
{
	(void)state;
	static struct recent_oom o;
	uint64_t st = 3;
	make_blobs(o.b, OOM_PER * 3, &st);
	for (int p = 0; p < 3; p++)
		rix_test_random_id(&o.packs[p], &st);
	assert_true(rix_test_oom_loop("recent table", recent_oom_round, &o, 100000) > 3);
}

/* Two writers reserve the same IDs (each is reserved once), readers look up all along. */
struct race {
	struct rix__recent *re;
	rix_blob *b;
	size_t n;
	size_t won;
	int reader;
	int failed; /* no cmocka assert on these threads: a failure is recorded, asserted after join */
	size_t passes;
	_Atomic int stop;
};

static void *race_run(void *arg)
{
	struct race *r = arg;
	if (r->reader) { /* a stored blob, once found, stays found */
		uint8_t *was = calloc(r->n, 1);
		do {
			for (size_t i = 999; i < r->n; i += 1000) {
				rix__rcu_read_lock();
				int f = rix__recent_find(r->re, r->b[i].type, &r->b[i].id, NULL);
				rix__rcu_read_unlock();
				r->failed |= was[i] && !f;
				was[i] |= (uint8_t)f;
			}
			r->passes++;
		} while (!atomic_load(&r->stop));
		free(was);
		return NULL;
	}
	for (size_t i = 0; i < r->n; i++) {
		int x = rix__recent_reserve(r->re, r->b[i].type, &r->b[i].id);
		r->failed |= x < 0;
		r->won += x > 0;
		if (i % 1000 == 999 && x == 1) {
			rix_id pack;
			uint64_t seed = i;
			rix_test_random_id(&pack, &seed);
			r->failed |= rix__recent_store_pack(r->re, &pack, &r->b[i], 1) != 0;
		}
	}
	return NULL;
}

static void test_concurrent(void **state)
{
	(void)state;
	enum { N = 40000 };
	struct rix__recent *re;
	MUST(rix__recent_new(&re, 11));
	uint64_t st = 4;
	rix_blob *b = malloc(N * sizeof(*b));
	make_blobs(b, N, &st);
	struct race w[2] = { { .re = re, .b = b, .n = N }, { .re = re, .b = b, .n = N } };
	struct race rd = { .re = re, .b = b, .n = N, .reader = 1 };
	pthread_t th[3];
	assert_int_equal(pthread_create(&th[2], NULL, race_run, &rd), 0);
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&th[i], NULL, race_run, &w[i]), 0);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	atomic_store(&rd.stop, 1);
	pthread_join(th[2], NULL);
	assert_false(w[0].failed || w[1].failed || rd.failed);
	assert_true(rd.passes > 0);
	assert_int_equal(w[0].won + w[1].won, N);
	for (size_t i = 999; i < N; i += 1000)
		assert_int_equal(find(re, b[i].type, &b[i].id, NULL), 1);
	rix__recent_free(re);
	free(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_states),
		cmocka_unit_test(test_growth_and_index),
		cmocka_unit_test(test_alloc_failure),
		cmocka_unit_test(test_concurrent),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
