/*
 * tests/test_dedup_index.c — the dedup-only index (rix_master_index_set_dedup_only,
 * rix_repo_set_dedup_only): the same index files bulk-loaded in full and dedup-only answer every
 * "is it there?" alike (known blobs, random and near-miss IDs, add_pending), tree lookups alike,
 * data blob locations refused (never answered wrongly); a load on top, a merge and the blobs
 * saved since keep it so; the bytes per data blob at 1M; every allocation of a load failed in
 * turn; readers while loads and merges publish; a repository opened both ways, and the
 * save path of a dedup-only one (a known blob deduplicated, a new one stored and readable).
 */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "rix/alloc.h"
#include "rix/error.h"
#include "rix/master_index.h"
#include "rix/repo.h"
#include "repo_fixture.h"
#include "testutil.h"

#define PER_PACK 8
#define PACKS 40
#define NFILES 12

/* One index file's content. */
struct idxdata {
	rix_id id;
	rix_id packs[PACKS];
	rix_blob blobs[PACKS][PER_PACK];
};

static void make_idxdata(struct idxdata *d, uint64_t *st, const struct idxdata *dup_from)
{
	rix_test_random_id(&d->id, st);
	for (int p = 0; p < PACKS; p++) {
		rix_test_random_id(&d->packs[p], st);
		for (int b = 0; b < PER_PACK; b++) {
			rix_blob *bl = &d->blobs[p][b];
			if (dup_from != NULL && b == 0) /* a copy of an earlier file's blob, in another pack */
				*bl = dup_from->blobs[p][1];
			else {
				rix_test_random_id(&bl->id, st);
				bl->type = b == 5 ? RIX_BLOB_TREE : RIX_BLOB_DATA;
			}
			bl->offset = (uint32_t)b * 1000;
			bl->length = 100 + (uint32_t)(rix_test_next(st) % 5000);
			bl->uncompressed_length = (b & 1) ? 0 : bl->length * 2;
		}
	}
}

/* Bulk-loads files[from, to) into mi through one batch, as a repository's load does. */
static void bulk_load(rix_master_index *mi, const struct idxdata *files, int from, int to)
{
	rix_master_batch *b;
	assert_int_equal(rix_master_index_batch_new(&b, mi), 0);
	const rix_index_sink *sk = rix_master_batch_sink(b);
	for (int i = from; i < to; i++) {
		const struct idxdata *d = &files[i];
		for (int p = 0; p < PACKS; p++) {
			uint32_t num;
			assert_int_equal(sk->pack(sk->payload, &d->packs[p], &num), 0);
			for (int k = 0; k < PER_PACK; k++) {
				const rix_blob *bl = &d->blobs[p][k];
				rix_loc loc = { num, bl->offset, bl->length, bl->uncompressed_length };
				assert_int_equal(sk->blob(sk->payload, bl->type, &bl->id, &loc), 0);
			}
		}
		assert_int_equal(rix_master_batch_commit(b, &d->id), 0);
	}
	rix_master_batch_free(b);
	assert_int_equal(rix_master_index_bulk_finish(mi), 0);
}

static void assert_same_loc(const rix_packed_blob *a, const rix_packed_blob *b)
{
	assert_memory_equal(a->id.b, b->id.b, 32);
	assert_memory_equal(a->pack_id.b, b->pack_id.b, 32);
	assert_int_equal(a->type, b->type);
	assert_int_equal(a->offset, b->offset);
	assert_int_equal(a->length, b->length);
	assert_int_equal(a->uncompressed_length, b->uncompressed_length);
}

/* The refusal's shape: the ID and type, no location, RIX_EINVAL's message. */
static void assert_no_location(const rix_packed_blob *pb, const rix_id *id)
{
	static const rix_id zero;
	assert_memory_equal(pb->id.b, id->b, 32);
	assert_int_equal(pb->type, RIX_BLOB_DATA);
	assert_int_equal(pb->length, 0);
	assert_int_equal(pb->offset, 0);
	assert_memory_equal(pb->pack_id.b, zero.b, 32);
	assert_non_null(strstr(rix_error_last(), "dedup-only"));
}

/*
 * Every blob of files[0..n) answers alike in full and dd (dedup-only): has, lookup without out,
 * add_pending (0: known), batched membership; trees' locations equal; data blobs' locations
 * refused in dd (lookup, size, lookup_many and lookup_all with out).
 */
static void compare_known(rix_master_index *full, rix_master_index *dd, const struct idxdata *files, int n)
{
	for (int i = 0; i < n; i++)
		for (int p = 0; p < PACKS; p++) {
			rix_id ids[PER_PACK];
			bool ff[PER_PACK], fd[PER_PACK];
			for (int k = 0; k < PER_PACK; k++) {
				const rix_blob *bl = &files[i].blobs[p][k];
				ids[k] = bl->id;
				assert_true(rix_master_index_has(full, bl->type, &bl->id));
				assert_true(rix_master_index_has(dd, bl->type, &bl->id));
				assert_int_equal(rix_master_index_lookup(NULL, dd, bl->type, &bl->id), 0);
				assert_int_equal(rix_master_index_add_pending(full, bl->type, &bl->id), 0);
				assert_int_equal(rix_master_index_add_pending(dd, bl->type, &bl->id), 0);
				rix_packed_blob a, b;
				assert_int_equal(rix_master_index_lookup(&a, full, bl->type, &bl->id), 0);
				uint32_t sz;
				if (bl->type == RIX_BLOB_TREE) {
					assert_int_equal(rix_master_index_lookup(&b, dd, bl->type, &bl->id), 0);
					assert_same_loc(&a, &b);
					assert_int_equal(rix_master_index_size(&sz, dd, bl->type, &bl->id), 0);
					assert_int_equal(sz, rix_blob_plain_size(a.length, a.uncompressed_length));
				} else {
					assert_int_equal(rix_master_index_lookup(&b, dd, bl->type, &bl->id), RIX_EINVAL);
					assert_no_location(&b, &bl->id);
					assert_int_equal(rix_master_index_size(&sz, dd, bl->type, &bl->id), RIX_EINVAL);
					rix_packed_blob all[4];
					assert_int_equal(rix_master_index_lookup_all(all, 4, dd, bl->type, &bl->id), 1);
					assert_no_location(&all[0], &bl->id);
					assert_int_equal(rix_master_index_lookup_all(NULL, 0, dd, bl->type, &bl->id), 1);
				}
				/* Under the other type: absent in both. */
				rix_blob_type other = bl->type == RIX_BLOB_DATA ? RIX_BLOB_TREE : RIX_BLOB_DATA;
				assert_false(rix_master_index_has(full, other, &bl->id));
				assert_false(rix_master_index_has(dd, other, &bl->id));
			}
			for (int t = 0; t < RIX_BLOB_TYPES; t++) {
				/* Both types asked of all IDs: the batched answers agree. */
				size_t nf = rix_master_index_lookup_many(NULL, ff, full, (rix_blob_type)t, ids, PER_PACK);
				size_t nd = rix_master_index_lookup_many(NULL, fd, dd, (rix_blob_type)t, ids, PER_PACK);
				assert_int_equal(nf, nd);
				assert_memory_equal(ff, fd, sizeof(ff));
			}
			rix_packed_blob outs[PER_PACK];
			assert_int_equal(rix_master_index_lookup_many(outs, fd, dd, RIX_BLOB_DATA, ids, PER_PACK),
					 PER_PACK - 1); /* all but the tree */
			for (int k = 0; k < PER_PACK; k++)
				if (files[i].blobs[p][k].type == RIX_BLOB_DATA)
					assert_no_location(&outs[k], &ids[k]);
				else
					assert_false(fd[k]);
		}
}

/* Random IDs and near misses of known data IDs (one bit flipped anywhere): absent in both. */
static void compare_unknown(rix_master_index *full, rix_master_index *dd, const struct idxdata *files, int n,
			    uint64_t *st)
{
	for (int i = 0; i < 3000; i++) {
		rix_id id;
		if (i % 2 == 0) {
			rix_test_random_id(&id, st);
		} else {
			const struct idxdata *d = &files[rix_test_next(st) % (uint64_t)n];
			id = d->blobs[rix_test_next(st) % PACKS][1].id; /* a data blob */
			unsigned bit = (unsigned)(i / 2) % 256;
			id.b[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		}
		for (int t = 0; t < RIX_BLOB_TYPES; t++) {
			assert_false(rix_master_index_has(full, (rix_blob_type)t, &id));
			assert_false(rix_master_index_has(dd, (rix_blob_type)t, &id));
			rix_packed_blob pb;
			assert_int_equal(rix_master_index_lookup(&pb, dd, (rix_blob_type)t, &id), RIX_ENOTFOUND);
			assert_int_equal(rix_master_index_lookup_all(NULL, 0, dd, (rix_blob_type)t, &id), 0);
			bool f;
			assert_int_equal(rix_master_index_lookup_many(NULL, &f, dd, (rix_blob_type)t, &id, 1), 0);
			assert_false(f);
		}
		/* The save path: a new blob is the caller's to write, in both. */
		assert_int_equal(rix_master_index_add_pending(full, RIX_BLOB_DATA, &id), 1);
		assert_int_equal(rix_master_index_add_pending(dd, RIX_BLOB_DATA, &id), 1);
		rix_master_index_remove_pending(full, RIX_BLOB_DATA, &id);
		rix_master_index_remove_pending(dd, RIX_BLOB_DATA, &id);
	}
}

static int count_cb(void *arg, const rix_packed_blob *pb)
{
	(void)pb;
	++*(size_t *)arg;
	return 0;
}

static void test_dedup_vs_full(void **state)
{
	(void)state;
	uint64_t st = 1313;
	static struct idxdata files[NFILES];
	for (int i = 0; i < NFILES; i++)
		make_idxdata(&files[i], &st, i % 4 == 3 ? &files[i - 1] : NULL);
	rix_master_index *full, *dd;
	assert_int_equal(rix_master_index_new(&full), 0);
	assert_int_equal(rix_master_index_new(&dd), 0);
	rix_master_index_set_dedup_only(dd, true);
	assert_false(rix_master_index_dedup_only(dd)); /* nothing loaded yet */
	bulk_load(full, files, 0, NFILES / 2);
	bulk_load(dd, files, 0, NFILES / 2);
	assert_true(rix_master_index_dedup_only(dd));
	assert_false(rix_master_index_dedup_only(full));
	compare_known(full, dd, files, NFILES / 2);
	compare_unknown(full, dd, files, NFILES / 2, &st);
	/* Trees counted alike; data blobs once each (the copies in other packs are one ID). */
	assert_int_equal(rix_master_index_count(dd, RIX_BLOB_TREE), rix_master_index_count(full, RIX_BLOB_TREE));
	size_t dups = (size_t)(NFILES / 2 / 4) * PACKS; /* file 3's blob 0 of each pack */
	assert_int_equal(rix_master_index_count(dd, RIX_BLOB_DATA), rix_master_index_count(full, RIX_BLOB_DATA) - dups);
	assert_int_equal(rix_master_index_pack_count(dd), rix_master_index_pack_count(full));
	size_t seen = 0;
	assert_int_equal(rix_master_index_foreach(dd, count_cb, &seen), RIX_EINVAL);
	assert_int_equal(seen, 0);
	assert_int_equal(rix_master_index_foreach(full, count_cb, &seen), 0);
	rix_index_totals tot;
	assert_int_equal(rix_master_index_totals(dd, &tot), RIX_EINVAL); /* no sizes of data blobs */
	assert_int_equal(tot.count[RIX_BLOB_TREE], 0);
	assert_int_equal(rix_master_index_totals(full, &tot), 0);
	assert_int_equal(tot.count[RIX_BLOB_DATA] + tot.count[RIX_BLOB_TREE], seen);
	rix_id *a, *b;
	size_t na, nb;
	assert_int_equal(rix_master_index_index_ids(&a, &na, full), 0);
	assert_int_equal(rix_master_index_index_ids(&b, &nb, dd), 0);
	assert_int_equal(na, nb);
	assert_memory_equal(a, b, na * sizeof(rix_id));
	rix_free(a);
	rix_free(b);
	/* The dedup-only index is smaller. */
	assert_true(rix_master_index_memory(dd) < rix_master_index_memory(full));

	/* A second load on top (the set rebuilt from its IDs and the new ones). */
	bulk_load(full, files, NFILES / 2, NFILES);
	bulk_load(dd, files, NFILES / 2, NFILES);
	compare_known(full, dd, files, NFILES);
	compare_unknown(full, dd, files, NFILES, &st);

	/* A final index merged after it: its data blobs have locations; the set is carried over. */
	static struct idxdata extra;
	make_idxdata(&extra, &st, &files[0]);
	for (int k = 0; k < 2; k++) {
		rix_master_index *mi = k ? dd : full;
		rix_index *idx;
		assert_int_equal(rix_index_new(&idx), 0);
		for (int p = 0; p < PACKS; p++)
			assert_int_equal(rix_index_store_pack(idx, &extra.packs[p], extra.blobs[p], PER_PACK), 0);
		assert_int_equal(rix_index_add_id(idx, &extra.id), 0);
		rix_index_finalize(idx);
		assert_int_equal(rix_master_index_add(mi, idx), 0);
		/* A separate index: the locked path answers too. */
		assert_true(rix_master_index_has(mi, RIX_BLOB_DATA, &files[1].blobs[0][2].id));
		assert_true(rix_master_index_has(mi, RIX_BLOB_DATA, &extra.blobs[0][2].id));
		if (k == 1) {
			/* extra's blob 0 of each pack: a set member with a location in the separate
			 * index; the batched lookup gives it as the single one does, not "no location". */
			rix_id ids[PACKS];
			rix_packed_blob many[PACKS], one;
			bool fnd[PACKS];
			for (int p = 0; p < PACKS; p++)
				ids[p] = extra.blobs[p][0].id;
			assert_int_equal(rix_master_index_lookup_many(many, fnd, mi, RIX_BLOB_DATA, ids, PACKS), PACKS);
			for (int p = 0; p < PACKS; p++) {
				assert_true(fnd[p]);
				assert_int_equal(rix_master_index_lookup(&one, mi, RIX_BLOB_DATA, &ids[p]), 0);
				assert_memory_equal(one.pack_id.b, extra.packs[p].b, 32);
				assert_same_loc(&one, &many[p]);
			}
		}
		assert_int_equal(rix_master_index_merge(mi), 0);
	}
	/* files[0]'s blob 1 of each pack now has a copy in extra, with a location: left out here. */
	compare_known(full, dd, files + 1, NFILES - 1);
	for (int p = 0; p < PACKS; p++)
		for (int k = 1; k < PER_PACK; k++) { /* blob 0: a copy of a set member, see below */
			const rix_blob *bl = &extra.blobs[p][k];
			rix_packed_blob x, y;
			assert_int_equal(rix_master_index_lookup(&x, full, bl->type, &bl->id), 0);
			assert_int_equal(rix_master_index_lookup(&y, dd, bl->type, &bl->id), 0);
			assert_same_loc(&x, &y);
		}
	/* extra's blob 0 is a data blob the set holds too: the merged table's location answers. */
	rix_packed_blob y;
	assert_int_equal(rix_master_index_lookup(&y, dd, RIX_BLOB_DATA, &extra.blobs[0][0].id), 0);
	assert_memory_equal(y.pack_id.b, extra.packs[0].b, 32);
	assert_int_equal(rix_master_index_lookup_all(NULL, 0, dd, RIX_BLOB_DATA, &extra.blobs[0][0].id), 2);

	/* A blob saved since (the recent table): known with its location in both. */
	rix_blob nb1 = { .type = RIX_BLOB_DATA, .offset = 0, .length = 77 };
	rix_test_random_id(&nb1.id, &st);
	rix_id pack;
	rix_test_random_id(&pack, &st);
	for (int k = 0; k < 2; k++) {
		rix_master_index *mi = k ? dd : full;
		assert_int_equal(rix_master_index_add_pending(mi, RIX_BLOB_DATA, &nb1.id), 1);
		assert_int_equal(rix_master_index_add_pending(mi, RIX_BLOB_DATA, &nb1.id), 0); /* pending */
		assert_int_equal(rix_master_index_store_pack(mi, &pack, &nb1, 1), 0);
		rix_packed_blob pb;
		assert_int_equal(rix_master_index_lookup(&pb, mi, RIX_BLOB_DATA, &nb1.id), 0);
		assert_memory_equal(pb.pack_id.b, pack.b, 32);
		assert_int_equal(pb.length, 77);
	}
	rix_master_index_free(full);
	rix_master_index_free(dd);
}

/* A set of 1M data blobs (and a few trees): at most 30 bytes a data blob, everything included. */
static void test_dedup_memory(void **state)
{
	(void)state;
	enum { N = 1000000, PER = 250 };
	uint64_t st = 4242;
	rix_master_index *dd;
	assert_int_equal(rix_master_index_new(&dd), 0);
	rix_master_index_set_dedup_only(dd, true);
	rix_master_batch *b;
	assert_int_equal(rix_master_index_batch_new(&b, dd), 0);
	const rix_index_sink *sk = rix_master_batch_sink(b);
	rix_id probe[64];
	for (int i = 0; i < N; i++) {
		uint32_t num = 0;
		if (i % PER == 0) {
			rix_id pack;
			rix_test_random_id(&pack, &st);
			assert_int_equal(sk->pack(sk->payload, &pack, &num), 0);
		}
		rix_id id;
		rix_test_random_id(&id, &st);
		if (i % (N / 64) == 0)
			probe[i / (N / 64)] = id;
		rix_loc loc = { num, 0, 100, 0 };
		assert_int_equal(sk->blob(sk->payload, RIX_BLOB_DATA, &id, &loc), 0);
		if (i % 100000 == 99999)
			assert_int_equal(rix_master_batch_commit(b, NULL), 0);
	}
	rix_master_batch_free(b);
	assert_int_equal(rix_master_index_bulk_finish(dd), 0);
	assert_int_equal(rix_master_index_count(dd, RIX_BLOB_DATA), N);
	assert_int_equal(rix_master_index_pack_count(dd), 0); /* packs of data blobs alone: not kept */
	for (int i = 0; i < 64; i++)
		assert_true(rix_master_index_has(dd, RIX_BLOB_DATA, &probe[i]));
	double per = (double)rix_master_index_memory(dd) / N;
	print_message("dedup-only index: %.2f bytes per data blob at 1M (pack table included)\n", per);
	assert_true(per <= 30.0);
	rix_master_index_free(dd);
}

/* ---- Readers during merges and loads ----------------------------------------------------------- */

struct reader_arg {
	rix_master_index *mi;
	const struct idxdata *d; /* loaded first: known throughout */
	atomic_int *stop;
	atomic_long lookups;
	const char *bad; /* NULL, or what went wrong */
};

static void *reader(void *p)
{
	struct reader_arg *a = p;
	uint64_t st = 31;
	while (!atomic_load(a->stop)) {
		const rix_blob *bl = &a->d->blobs[rix_test_next(&st) % PACKS][rix_test_next(&st) % PER_PACK];
		if (!rix_master_index_has(a->mi, bl->type, &bl->id))
			a->bad = "a known blob missed";
		bool f[PER_PACK];
		rix_id ids[PER_PACK];
		for (int k = 0; k < PER_PACK; k++)
			ids[k] = a->d->blobs[0][k].id;
		if (rix_master_index_lookup_many(NULL, f, a->mi, RIX_BLOB_DATA, ids, PER_PACK) != PER_PACK - 1)
			a->bad = "a batch of known data blobs missed";
		rix_id r;
		rix_test_random_id(&r, &st);
		if (rix_master_index_has(a->mi, RIX_BLOB_DATA, &r))
			a->bad = "a random ID found";
		atomic_fetch_add(&a->lookups, 1);
	}
	return NULL;
}

/*
 * Two threads ask while the index changes under them: loads on top (the set rebuilt, the old one
 * freed after a grace period) and merges of separate indexes (the set carried over, shared by
 * two states). A reclamation bug shows as a wrong answer or under ASan/TSan.
 */
static void test_dedup_readers(void **state)
{
	(void)state;
	enum { N = 10 };
	static struct idxdata d[N];
	uint64_t st = 919;
	for (int i = 0; i < N; i++)
		make_idxdata(&d[i], &st, NULL);
	rix_master_index *mi;
	assert_int_equal(rix_master_index_new(&mi), 0);
	rix_master_index_set_dedup_only(mi, true);
	bulk_load(mi, d, 0, 1);
	atomic_int stop = 0;
	struct reader_arg args[2] = { { .mi = mi, .d = &d[0], .stop = &stop }, { .mi = mi, .d = &d[0], .stop = &stop } };
	pthread_t th[2];
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&th[i], NULL, reader, &args[i]), 0);
	for (int i = 1; i < N; i++) {
		if (i % 2) {
			bulk_load(mi, d, i, i + 1);
		} else {
			rix_index *idx;
			assert_int_equal(rix_index_new(&idx), 0);
			for (int p = 0; p < PACKS; p++)
				assert_int_equal(rix_index_store_pack(idx, &d[i].packs[p], d[i].blobs[p], PER_PACK), 0);
			rix_index_finalize(idx);
			assert_int_equal(rix_master_index_add(mi, idx), 0);
			assert_int_equal(rix_master_index_merge(mi), 0);
		}
	}
	for (int i = 0; i < 2; i++) {
		long seen = atomic_load(&args[i].lookups);
		while (atomic_load(&args[i].lookups) < seen + 50)
			sched_yield();
	}
	atomic_store(&stop, 1);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(pthread_join(th[i], NULL), 0);
		if (args[i].bad != NULL)
			fail_msg("reader %d: %s", i, args[i].bad);
	}
	for (int i = 0; i < N; i++)
		for (int p = 0; p < PACKS; p++)
			for (int k = 0; k < PER_PACK; k++) {
				const rix_blob *bl = &d[i].blobs[p][k];
				assert_true(rix_master_index_has(mi, bl->type, &bl->id));
				rix_packed_blob pb; /* loaded files' data blobs: no location; merged ones': theirs */
				int rc = rix_master_index_lookup(&pb, mi, bl->type, &bl->id);
				if (bl->type == RIX_BLOB_DATA && i % 2 == 0 && i > 0) {
					assert_int_equal(rc, 0);
					assert_memory_equal(pb.pack_id.b, d[i].packs[p].b, 32);
				} else {
					assert_int_equal(rc, bl->type == RIX_BLOB_DATA ? RIX_EINVAL : 0);
				}
			}
	rix_master_index_free(mi);
}

/* ---- Allocation failure ------------------------------------------------------------------------ */

struct oom_arg {
	struct idxdata *d;
	int on_top; /* d[0] loaded before (the set rebuilt), else the first set built */
	rix_master_index *mi;
};

static void oom_setup(void *arg)
{
	struct oom_arg *a = arg;
	assert_int_equal(rix_master_index_new(&a->mi), 0);
	rix_master_index_set_dedup_only(a->mi, true);
	if (a->on_top)
		bulk_load(a->mi, a->d, 0, 1);
}

/* d[1] and d[2] through a batch, then the bulk finish. */
static int oom_run(void *arg)
{
	struct oom_arg *a = arg;
	rix_master_batch *b;
	int rc = rix_master_index_batch_new(&b, a->mi);
	for (int i = 1; rc == 0 && i < 3; i++) {
		const rix_index_sink *sk = rix_master_batch_sink(b);
		for (int p = 0; rc == 0 && p < PACKS; p++) {
			uint32_t num = 0;
			rc = sk->pack(sk->payload, &a->d[i].packs[p], &num);
			for (int k = 0; rc == 0 && k < PER_PACK; k++) {
				const rix_blob *bl = &a->d[i].blobs[p][k];
				rix_loc loc = { num, bl->offset, bl->length, bl->uncompressed_length };
				rc = sk->blob(sk->payload, bl->type, &bl->id, &loc);
			}
		}
		if (rc == 0)
			rc = rix_master_batch_commit(b, &a->d[i].id);
		else
			rix_master_batch_discard(b);
	}
	rix_master_batch_free(b);
	if (rc == 0)
		rc = rix_master_index_bulk_finish(a->mi);
	return rc;
}

/* What was known before still is; after a success d[1] and d[2] too; else not; nothing else. */
static void oom_check(void *arg, const rix_test_oom_round *round)
{
	struct oom_arg *a = arg;
	for (int i = a->on_top ? 0 : 1; i < 3; i++)
		for (int p = 0; p < PACKS; p++)
			for (int k = 0; k < PER_PACK; k++) {
				const rix_blob *bl = &a->d[i].blobs[p][k];
				bool want = i == 0 || round->rc == 0;
				assert_int_equal(rix_master_index_has(a->mi, bl->type, &bl->id), want);
				if (want && bl->type == RIX_BLOB_TREE) {
					rix_packed_blob pb;
					assert_int_equal(rix_master_index_lookup(&pb, a->mi, bl->type, &bl->id), 0);
					assert_memory_equal(pb.pack_id.b, a->d[i].packs[p].b, 32);
					assert_int_equal(pb.offset, bl->offset);
				}
			}
	uint64_t st = 5;
	for (int i = 0; i < 100; i++) {
		rix_id id;
		rix_test_random_id(&id, &st);
		assert_false(rix_master_index_has(a->mi, RIX_BLOB_DATA, &id));
	}
	rix_master_index_free(a->mi);
	a->mi = NULL;
}

/* Every allocation of a dedup-only bulk load failed in turn: the first set, and one on top. */
static void test_dedup_allocation_failure(void **state)
{
	(void)state;
	uint64_t st = 606;
	static struct idxdata d[3];
	for (int i = 0; i < 3; i++)
		make_idxdata(&d[i], &st, NULL);
	for (int on_top = 0; on_top < 2; on_top++) {
		struct oom_arg a = { d, on_top, NULL };
		rix_test_oom o = { .what = "dedup-only bulk load", .run = oom_run, .arg = &a, .max = 500,
				   .setup = oom_setup, .check = oom_check, .live = RIX_TEST_OOM_LIVE_UNCHECKED };
		assert_true(rix_test_oom_run(&o) > 1);
	}
}

/* ---- A repository, opened in full and dedup-only ---------------------------------------------- */

static void test_repo_dedup(void **state)
{
	(void)state;
	char *dir = rix_test_new_dir("rix-dedup");
	static struct blobs s;
	make_blobs(&s, 120, 77);
	rix_repo *r = init_repo(dir, 2);
	save_all(r, &s);
	assert_int_equal(rix_repo_flush(r), 0);
	rix_repo_free(r);

	rix_repo *full = open_repo(dir, NULL);
	rix_repo *dd = open_repo(dir, NULL);
	rix_repo_set_dedup_only(dd, true);
	assert_int_equal(rix_repo_load_index(NULL, full, NULL, NULL), 0);
	rix_repo_load_stats ls;
	assert_int_equal(rix_repo_load_index(&ls, dd, NULL, NULL), 0);
	assert_int_equal(ls.loaded, count_files(dd, RIX_FILE_INDEX));
	rix_master_index *mf = rix_repo_master_index(full), *md = rix_repo_master_index(dd);
	assert_true(rix_master_index_dedup_only(md));
	/* What needs data blobs' locations refuses, rather than reporting every one missing. */
	rix_check_report refused;
	assert_int_equal(rix_repo_check(&refused, dd, NULL), RIX_EINVAL);
	assert_non_null(strstr(rix_error_last(), "dedup-only"));
	rix_repo_usage u;
	assert_int_equal(rix_repo_usage_compute(&u, dd), RIX_EINVAL);
	assert_non_null(strstr(rix_error_last(), "dedup-only"));
	for (size_t i = 0; i < s.n; i++) {
		assert_true(rix_master_index_has(mf, s.type[i], &s.id[i]));
		assert_true(rix_master_index_has(md, s.type[i], &s.id[i]));
		uint8_t *buf = NULL;
		size_t n = 0;
		if (s.type[i] == RIX_BLOB_TREE) { /* trees are read as ever */
			assert_int_equal(rix_repo_load_blob(&buf, &n, dd, s.type[i], &s.id[i]), 0);
			assert_int_equal(n, s.len[i]);
			assert_memory_equal(buf, s.data[i], n);
			rix_free(buf);
		} else { /* a data blob's location is not held: a clear refusal */
			assert_int_equal(rix_repo_load_blob(&buf, &n, dd, s.type[i], &s.id[i]), RIX_EINVAL);
			assert_non_null(strstr(rix_error_last(), "dedup-only"));
			assert_null(buf);
		}
	}
	/* The save path: every known blob deduplicated, a new one stored. */
	for (size_t i = 0; i < s.n; i++) {
		bool stored = true;
		assert_int_equal(rix_repo_save_blob(NULL, &stored, dd, s.type[i], s.data[i], s.len[i]), 0);
		assert_false(stored);
	}
	static const char fresh[] = "a blob no earlier save stored";
	rix_id fid;
	bool stored = false;
	assert_int_equal(rix_repo_save_blob(&fid, &stored, dd, RIX_BLOB_DATA, fresh, sizeof(fresh)), 0);
	assert_true(stored);
	assert_int_equal(rix_repo_save_blob(NULL, &stored, dd, RIX_BLOB_DATA, fresh, sizeof(fresh)), 0);
	assert_false(stored);
	size_t packs_before = count_files(dd, RIX_FILE_PACK);
	assert_int_equal(rix_repo_flush(dd), 0);
	assert_int_equal(count_files(dd, RIX_FILE_PACK), packs_before + 1);
	/* The new blob's location is held (saved since the load): readable from the same handle. */
	uint8_t *buf;
	size_t n;
	assert_int_equal(rix_repo_load_blob(&buf, &n, dd, RIX_BLOB_DATA, &fid), 0);
	assert_int_equal(n, sizeof(fresh));
	assert_memory_equal(buf, fresh, n);
	rix_free(buf);
	rix_repo_free(dd);
	rix_repo_free(full);

	/* A full open afterwards reads every blob, the new one too, and check reads all data. */
	full = open_repo(dir, NULL);
	assert_int_equal(rix_repo_load_index(NULL, full, NULL, NULL), 0);
	for (size_t i = 0; i < s.n; i++) {
		assert_int_equal(rix_repo_load_blob(&buf, &n, full, s.type[i], &s.id[i]), 0);
		assert_int_equal(n, s.len[i]);
		assert_memory_equal(buf, s.data[i], n);
		rix_free(buf);
	}
	assert_int_equal(rix_repo_load_blob(&buf, &n, full, RIX_BLOB_DATA, &fid), 0);
	rix_free(buf);
	rix_repo_free(full);
	struct lines l = { 0 };
	rix_check_report rep = run_check(dir, 1, 0, &l);
	(void)rep;
	assert_int_equal(l.errors, 0);
	free_blobs(&s);
	rix_test_free_dir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_dedup_vs_full),
		cmocka_unit_test(test_dedup_memory),
		cmocka_unit_test(test_dedup_allocation_failure),
		cmocka_unit_test(test_dedup_readers),
		cmocka_unit_test(test_repo_dedup),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
