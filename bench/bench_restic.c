/*
 * bench/bench_restic.c — restic's own index benchmarks, with restic's random index shape
 * (createRandomIndex / createRandomMasterIndex in restic's internal/repository/index tests),
 * run against rix. Sizes are restic's:
 *
 *   IndexAlloc, IndexAllocParallel       1 index of 200,000 packs (~1.73M blobs) per op
 *   IndexHasKnown, IndexHasUnknown       the same index
 *   MasterIndexAlloc                     10,000 indexes of 5 packs, added and merged, per op
 *   MasterIndexLookupSingleIndex[Unknown]    1 index of 200,000 packs
 *   MasterIndexLookupMultipleIndex[Unknown]  100 indexes of 10,000 packs (~8.6M blobs)
 *   MasterIndexLookupParallel/{known,unknown},indices={25,50,100}   K indexes of 10,000 packs
 *   MasterIndexLookupBlobSize, MasterIndexEach                      5 indexes of 200,000 packs
 *   IndexMapHash                         128 random IDs hashed per op (restic: the same)
 * and rix's own additions:
 *   MasterIndexMerge                     25 final indexes of 10,000 packs added and merged
 *                                        per op (building them is not timed)
 *   EncodeIndex, DecodeIndex             the IndexAlloc index as JSON (~279 MB), MB/s of JSON
 *
 * Differences from restic's code, on purpose:
 * - The blobs are generated before timing (restic generates them inside IndexAlloc's loop).
 * - Indexes added to a master index are finalized first, so rix merges them into one table as
 *   it does for indexes loaded from a repository. restic's benchmarks add unfinished indexes,
 *   which restic leaves unmerged: its "MultipleIndex" figures search 100 separate indexes.
 * - Freeing an index after an op is outside the timer (inside it in IndexAllocParallel).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "index/hash.h"

#define MASTER_SEED 0x5EEDF00DCAFEBEEFull

/* ---- Shared inputs ------------------------------------------------------------------------ */

/* The IndexAlloc index: the first 200,000-pack index of the stream. */
static struct {
	bool have;
	rgen_index g;
	rix_index *idx;  /* built from g with idx_batch */
	uint32_t idx_batch;
	char *json;      /* rix_index_encode of idx */
	size_t json_len;
} big;

static const rgen_index *big_gen(void)
{
	if (!big.have) {
		uint64_t st = RGEN_SEED;
		bench_log("generating restic's random index (200,000 packs)");
		rgen_index_make(&big.g, &st, 200000);
		big.have = true;
	}
	return &big.g;
}

static int big_index(bench_b *b, rix_index **out)
{
	if (big.idx != NULL && big.idx_batch == b->batch) {
		*out = big.idx;
		return 0;
	}
	rix_index_free(big.idx);
	big.idx = NULL;
	rix_free(big.json);
	big.json = NULL;
	int rc = rgen_index_build(big_gen(), b->batch, &big.idx);
	if (rc != 0)
		return bench_fail(b, "building the index: %s", rix_strerror(rc));
	big.idx_batch = b->batch;
	*out = big.idx;
	return 0;
}

static int big_json(bench_b *b, const char **json, size_t *len)
{
	rix_index *idx;
	if (big_index(b, &idx) != 0)
		return 1;
	if (big.json == NULL) {
		bench_log("encoding the index as JSON");
		int rc = rix_index_encode(&big.json, &big.json_len, idx);
		if (rc != 0)
			return bench_fail(b, "rix_index_encode: %s", rix_strerror(rc));
	}
	*json = big.json;
	*len = big.json_len;
	return 0;
}

static void unknown_id(rix_id *id)
{
	uint64_t st = RGEN_UNKNOWN_SEED;
	gen_id(&st, id);
}

/*
 * restic's createRandomMasterIndex(rng, num, size): num indexes of size packs from one stream;
 * the known ID is the pick of the last index. Indexes are finalized and merged (see top).
 */
static int restic_master(size_t num, size_t size, uint32_t batch, rix_master_index **out,
			 rix_id *lookup)
{
	rgen_index g;
	memset(&g, 0, sizeof(g));
	uint64_t st = RGEN_SEED;
	rix_master_index *mi;
	int rc = rix_master_index_new_seeded(&mi, MASTER_SEED);
	if (rc != 0)
		return rc;
	for (size_t k = 0; k < num && rc == 0; k++) {
		rgen_index_make(&g, &st, size);
		rix_index *idx;
		rc = rgen_index_build(&g, batch, &idx);
		if (rc != 0)
			break;
		rix_index_finalize(idx);
		rc = rix_master_index_add(mi, idx);
		if (rc != 0)
			rix_index_free(idx);
	}
	if (rc == 0)
		rc = rix_master_index_merge(mi);
	if (lookup != NULL)
		*lookup = g.lookup;
	rgen_index_free(&g);
	if (rc != 0) {
		rix_master_index_free(mi);
		return rc;
	}
	*out = mi;
	return 0;
}

static struct {
	rix_master_index *mi;
	size_t num, size;
	uint32_t batch;
	rix_id lookup;
} mcache;

static int get_restic_master(bench_b *b, size_t num, size_t size, rix_master_index **out,
			     rix_id *lookup)
{
	if (mcache.mi == NULL || mcache.num != num || mcache.size != size ||
	    mcache.batch != b->batch) {
		rix_master_index_free(mcache.mi);
		mcache.mi = NULL;
		bench_log("building restic's master index: %zu indexes of %zu packs", num, size);
		int rc = restic_master(num, size, b->batch, &mcache.mi, &mcache.lookup);
		if (rc != 0)
			return bench_fail(b, "building the master index: %s (%s)", rix_strerror(rc),
					  rix_error_last());
		mcache.num = num;
		mcache.size = size;
		mcache.batch = b->batch;
	}
	*out = mcache.mi;
	*lookup = mcache.lookup;
	return 0;
}

void restic_caches_free(void)
{
	rix_master_index_free(mcache.mi);
	memset(&mcache, 0, sizeof(mcache));
	rix_index_free(big.idx);
	rix_free(big.json);
	rgen_index_free(&big.g);
	memset(&big, 0, sizeof(big));
}

/* ---- State of one benchmark --------------------------------------------------------------- */

typedef struct rstate {
	rix_index *idx;
	rix_master_index *mi;
	rix_id id;         /* the ID looked up */
	bool known;
	int threads;
	const char *json;
	size_t json_len;
	rgen_index *set;   /* several generated indexes (MasterIndexAlloc, MasterIndexMerge) */
	size_t nset;
	size_t nblobs;
	rix_id hash_ids[128];
} rstate;

static rstate *new_state(bench_b *b)
{
	rstate *s = calloc(1, sizeof(*s));
	if (s == NULL)
		bench_die("out of memory");
	b->state = s;
	return s;
}

static void free_rstate(bench_b *b)
{
	rstate *s = b->state;
	if (s == NULL)
		return;
	for (size_t i = 0; i < s->nset; i++)
		rgen_index_free(&s->set[i]);
	free(s->set);
	free(s);
	b->state = NULL;
}

/* ---- IndexAlloc, IndexAllocParallel ------------------------------------------------------- */

static int index_alloc_setup(bench_b *b)
{
	rstate *s = new_state(b);
	s->threads = (int)b->def->arg[0];
	s->nblobs = big_gen()->nblobs;
	b->per_op_div = (double)s->nblobs;
	b->per_op_unit = "ns/entry";
	return 0;
}

static void index_alloc_run(bench_b *b)
{
	rstate *s = b->state;
	const rgen_index *g = big_gen();
	size_t mem = 0;
	for (uint64_t op = 0; op < b->n; op++) {
		rix_index *idx;
		int rc = rgen_index_build(g, b->batch, &idx);
		bench_stop(b);
		if (rc != 0) {
			bench_fail(b, "building the index: %s", rix_strerror(rc));
			return;
		}
		if (rix_index_count(idx, RIX_BLOB_DATA) != s->nblobs) {
			bench_fail(b, "index counts %zu blobs, want %zu",
				   rix_index_count(idx, RIX_BLOB_DATA), s->nblobs);
			rix_index_free(idx);
			return;
		}
		mem = rix_index_memory(idx);
		rix_index_free(idx);
		bench_start(b);
	}
	bench_metric(b, (double)mem / (double)s->nblobs, "B/entry");
}

typedef struct par_job {
	bench_b *b;
	_Atomic uint64_t *next;
	_Atomic int *err;
	uint64_t ops; /* fixed share, or 0 = take from next */
	uint64_t found;
} par_job;

static void *index_alloc_thread(void *arg)
{
	par_job *j = arg;
	const rgen_index *g = big_gen();
	while (atomic_fetch_add(j->next, 1) < j->b->n) {
		rix_index *idx;
		int rc = rgen_index_build(g, j->b->batch, &idx);
		if (rc != 0) {
			atomic_store(j->err, rc);
			break;
		}
		rix_index_free(idx);
	}
	return NULL;
}

static void index_alloc_par_run(bench_b *b)
{
	rstate *s = b->state;
	_Atomic uint64_t next = 0;
	_Atomic int err = 0;
	pthread_t th[64];
	par_job jobs[64];
	int t, nt = s->threads > 64 ? 64 : s->threads;
	for (t = 0; t < nt; t++) {
		jobs[t] = (par_job){ .b = b, .next = &next, .err = &err };
		if (pthread_create(&th[t], NULL, index_alloc_thread, &jobs[t]) != 0)
			bench_die("pthread_create failed");
	}
	for (t = 0; t < nt; t++)
		pthread_join(th[t], NULL);
	if (atomic_load(&err) != 0)
		bench_fail(b, "building the index: %s", rix_strerror(atomic_load(&err)));
}

/* ---- MasterIndexAlloc, MasterIndexMerge --------------------------------------------------- */
/* arg[0] = number of indexes, arg[1] = packs per index */

static int index_set_setup(bench_b *b)
{
	rstate *s = new_state(b);
	s->nset = (size_t)b->def->arg[0];
	s->set = calloc(s->nset, sizeof(rgen_index));
	if (s->set == NULL)
		return bench_fail(b, "out of memory");
	uint64_t st = RGEN_SEED;
	bench_log("generating %zu indexes of %llu packs", s->nset,
		  (unsigned long long)b->def->arg[1]);
	for (size_t k = 0; k < s->nset; k++) {
		rgen_index_make(&s->set[k], &st, (size_t)b->def->arg[1]);
		s->nblobs += s->set[k].nblobs;
	}
	b->per_op_div = (double)s->nblobs;
	b->per_op_unit = "ns/entry";
	return 0;
}

static int build_set(bench_b *b, rstate *s, rix_index **idxs)
{
	for (size_t k = 0; k < s->nset; k++) {
		int rc = rgen_index_build(&s->set[k], b->batch, &idxs[k]);
		if (rc != 0) {
			while (k-- > 0)
				rix_index_free(idxs[k]);
			return rc;
		}
		rix_index_finalize(idxs[k]);
	}
	return 0;
}

static int add_and_merge(rix_master_index *mi, rix_index **idxs, size_t n)
{
	int rc = 0;
	size_t k;
	for (k = 0; k < n; k++) {
		rc = rix_master_index_add(mi, idxs[k]);
		if (rc != 0)
			break;
	}
	for (size_t r = k; r < n; r++)
		rix_index_free(idxs[r]);
	return rc != 0 ? rc : rix_master_index_merge(mi);
}

/* MasterIndexAlloc: building the indexes is part of the op, as in restic. */
static void master_alloc_run(bench_b *b)
{
	rstate *s = b->state;
	rix_index **idxs = calloc(s->nset, sizeof(*idxs));
	if (idxs == NULL)
		bench_die("out of memory");
	size_t mem = 0;
	for (uint64_t op = 0; op < b->n; op++) {
		rix_master_index *mi = NULL;
		int rc = rix_master_index_new_seeded(&mi, MASTER_SEED);
		if (rc == 0) {
			rc = build_set(b, s, idxs);
			if (rc == 0)
				rc = add_and_merge(mi, idxs, s->nset);
		}
		bench_stop(b);
		if (rc != 0) {
			bench_fail(b, "building the master index: %s (%s)", rix_strerror(rc),
				   rix_error_last());
			rix_master_index_free(mi);
			break;
		}
		if (rix_master_index_count(mi, RIX_BLOB_DATA) != s->nblobs) {
			bench_fail(b, "master index counts %zu blobs, want %zu",
				   rix_master_index_count(mi, RIX_BLOB_DATA), s->nblobs);
			rix_master_index_free(mi);
			break;
		}
		mem = rix_master_index_memory(mi);
		rix_master_index_free(mi);
		bench_start(b);
	}
	free(idxs);
	bench_metric(b, (double)mem / (double)s->nblobs, "B/entry");
}

/* MasterIndexMerge: only adding and merging the (prebuilt, final) indexes is timed. */
static void master_merge_run(bench_b *b)
{
	rstate *s = b->state;
	rix_index **idxs = calloc(s->nset, sizeof(*idxs));
	if (idxs == NULL)
		bench_die("out of memory");
	for (uint64_t op = 0; op < b->n; op++) {
		bench_stop(b);
		int rc = build_set(b, s, idxs);
		if (rc != 0) {
			bench_fail(b, "building the indexes: %s", rix_strerror(rc));
			break;
		}
		bench_start(b);
		rix_master_index *mi = NULL;
		rc = rix_master_index_new_seeded(&mi, MASTER_SEED);
		if (rc != 0) {
			for (size_t k = 0; k < s->nset; k++)
				rix_index_free(idxs[k]);
		} else {
			rc = add_and_merge(mi, idxs, s->nset);
		}
		bench_stop(b);
		if (rc != 0) {
			bench_fail(b, "merging: %s (%s)", rix_strerror(rc), rix_error_last());
			rix_master_index_free(mi);
			break;
		}
		rix_master_index_free(mi);
		bench_start(b);
	}
	free(idxs);
}

/* ---- IndexHas*, MasterIndexLookup*, MasterIndexLookupBlobSize, MasterIndexEach ------------ */
/* arg[0] = 1 known / 0 unknown; arg[1] = indexes (0: the IndexAlloc index itself);
 * arg[2] = packs per index; arg[3] = threads */

static int lookup_setup(bench_b *b)
{
	rstate *s = new_state(b);
	s->known = b->def->arg[0] != 0;
	s->threads = b->def->arg[3] ? (int)b->def->arg[3] : 1;
	rix_id known_id;
	if (b->def->arg[1] == 0) {
		if (big_index(b, &s->idx) != 0)
			return 1;
		known_id = big_gen()->lookup;
	} else {
		if (get_restic_master(b, (size_t)b->def->arg[1], (size_t)b->def->arg[2], &s->mi,
				      &known_id) != 0)
			return 1;
	}
	if (s->known)
		s->id = known_id;
	else
		unknown_id(&s->id);
	return 0;
}

static void index_has_run(bench_b *b)
{
	rstate *s = b->state;
	uint64_t found = 0;
	for (uint64_t i = 0; i < b->n; i++)
		found += rix_index_has(s->idx, RIX_BLOB_DATA, &s->id);
	bench_sink += found;
	if (found != (s->known ? b->n : 0))
		bench_fail(b, "found %llu of %llu", (unsigned long long)found,
			   (unsigned long long)b->n);
}

static uint64_t master_lookups(const rstate *s, uint64_t n, uint64_t *sum)
{
	uint64_t found = 0, acc = 0;
	for (uint64_t i = 0; i < n; i++) {
		rix_packed_blob pb;
		if (rix_master_index_lookup(&pb, s->mi, RIX_BLOB_DATA, &s->id) == 0) {
			found++;
			acc += pb.offset;
		}
	}
	*sum = acc;
	return found;
}

static void master_lookup_run(bench_b *b)
{
	rstate *s = b->state;
	uint64_t sum;
	uint64_t found = master_lookups(s, b->n, &sum);
	bench_sink += sum;
	if (found != (s->known ? b->n : 0))
		bench_fail(b, "found %llu of %llu", (unsigned long long)found,
			   (unsigned long long)b->n);
}

typedef struct lk_job {
	const rstate *s;
	uint64_t ops, found, sum;
} lk_job;

static void *master_lookup_thread(void *arg)
{
	lk_job *j = arg;
	j->found = master_lookups(j->s, j->ops, &j->sum);
	return NULL;
}

/* b.RunParallel: the ops are shared by one thread per CPU. */
static void master_lookup_par_run(bench_b *b)
{
	rstate *s = b->state;
	pthread_t th[64];
	lk_job jobs[64];
	int nt = s->threads > 64 ? 64 : s->threads;
	uint64_t found = 0, sum = 0;
	for (int t = 0; t < nt; t++) {
		jobs[t] = (lk_job){ .s = s, .ops = b->n / (uint64_t)nt +
						    ((uint64_t)t < b->n % (uint64_t)nt) };
		if (pthread_create(&th[t], NULL, master_lookup_thread, &jobs[t]) != 0)
			bench_die("pthread_create failed");
	}
	for (int t = 0; t < nt; t++) {
		pthread_join(th[t], NULL);
		found += jobs[t].found;
		sum += jobs[t].sum;
	}
	bench_sink += sum;
	if (found != (s->known ? b->n : 0))
		bench_fail(b, "found %llu of %llu", (unsigned long long)found,
			   (unsigned long long)b->n);
}

static void master_size_run(bench_b *b)
{
	rstate *s = b->state;
	uint64_t found = 0, sum = 0;
	for (uint64_t i = 0; i < b->n; i++) {
		uint32_t size;
		if (rix_master_index_size(&size, s->mi, RIX_BLOB_DATA, &s->id) == 0) {
			found++;
			sum += size;
		}
	}
	bench_sink += sum;
	if (found != b->n)
		bench_fail(b, "found %llu of %llu", (unsigned long long)found,
			   (unsigned long long)b->n);
}

static int count_blob(void *arg, const rix_packed_blob *pb)
{
	(void)pb;
	(*(uint64_t *)arg)++;
	return 0;
}

static void master_each_run(bench_b *b)
{
	rstate *s = b->state;
	for (uint64_t i = 0; i < b->n; i++) {
		uint64_t entries = 0;
		int rc = rix_master_index_foreach(s->mi, count_blob, &entries);
		if (rc != 0) {
			bench_fail(b, "rix_master_index_foreach: %s", rix_strerror(rc));
			return;
		}
		bench_sink += entries;
	}
}

/* ---- EncodeIndex, DecodeIndex ------------------------------------------------------------- */

static int encode_setup(bench_b *b)
{
	rstate *s = new_state(b);
	if (big_json(b, &s->json, &s->json_len) != 0)
		return 1;
	s->idx = big.idx;
	b->set_bytes = s->json_len;
	return 0;
}

static void encode_run(bench_b *b)
{
	rstate *s = b->state;
	for (uint64_t i = 0; i < b->n; i++) {
		char *out;
		size_t len;
		int rc = rix_index_encode(&out, &len, s->idx);
		bench_stop(b);
		if (rc != 0) {
			bench_fail(b, "rix_index_encode: %s", rix_strerror(rc));
			return;
		}
		if (len != s->json_len) {
			bench_fail(b, "encoded %zu bytes, earlier %zu", len, s->json_len);
			rix_free(out);
			return;
		}
		rix_free(out);
		bench_start(b);
	}
}

static void decode_run(bench_b *b)
{
	rstate *s = b->state;
	size_t want = big_gen()->nblobs;
	for (uint64_t i = 0; i < b->n; i++) {
		rix_index *idx;
		int rc = rix_index_decode(&idx, NULL, s->json, s->json_len);
		bench_stop(b);
		if (rc != 0) {
			bench_fail(b, "rix_index_decode: %s (%s)", rix_strerror(rc), rix_error_last());
			return;
		}
		if (rix_index_count(idx, RIX_BLOB_DATA) != want) {
			bench_fail(b, "decoded %zu blobs, want %zu", rix_index_count(idx, RIX_BLOB_DATA),
				   want);
			rix_index_free(idx);
			return;
		}
		rix_index_free(idx);
		bench_start(b);
	}
}

/* ---- IndexMapHash ------------------------------------------------------------------------- */

static int hash_setup(bench_b *b)
{
	rstate *s = new_state(b);
	uint64_t st = 0x4A54C0DE;
	for (int i = 0; i < 128; i++)
		gen_id(&st, &s->hash_ids[i]);
	b->set_bytes = sizeof(s->hash_ids);
	b->per_op_div = 128;
	b->per_op_unit = "ns/hash";
	return 0;
}

/* The hash rix's tables use (index/hash.h), with a per-table seed. */
static void hash_run(bench_b *b)
{
	rstate *s = b->state;
	uint64_t acc = 0, seed = 0x5EEDF00DCAFEBEEFull;
	for (uint64_t i = 0; i < b->n; i++)
		for (int k = 0; k < 128; k++)
			acc += rix__hash_id(&s->hash_ids[k], seed);
	bench_sink += acc;
}

/* ---- Registration ------------------------------------------------------------------------- */

static void reg(const char *name, int (*setup)(bench_b *), void (*run)(bench_b *), uint64_t a0,
		uint64_t a1, uint64_t a2, uint64_t a3)
{
	bench_def d;
	memset(&d, 0, sizeof(d));
	snprintf(d.name, sizeof(d.name), "%s", name);
	d.setup = setup;
	d.run = run;
	d.teardown = free_rstate;
	d.family = 1;
	d.arg[0] = a0;
	d.arg[1] = a1;
	d.arg[2] = a2;
	d.arg[3] = a3;
	bench_register(&d);
}

void register_restic_benchmarks(void)
{
	uint64_t procs = (uint64_t)bench_procs();
	reg("IndexAlloc", index_alloc_setup, index_alloc_run, 1, 0, 0, 0);
	reg("IndexAllocParallel", index_alloc_setup, index_alloc_par_run, procs, 0, 0, 0);
	reg("IndexHasKnown", lookup_setup, index_has_run, 1, 0, 0, 0);
	reg("IndexHasUnknown", lookup_setup, index_has_run, 0, 0, 0, 0);
	reg("EncodeIndex", encode_setup, encode_run, 0, 0, 0, 0);
	reg("DecodeIndex", encode_setup, decode_run, 0, 0, 0, 0);
	reg("MasterIndexAlloc", index_set_setup, master_alloc_run, 10000, 5, 0, 0);
	reg("MasterIndexLookupSingleIndex", lookup_setup, master_lookup_run, 1, 1, 200000, 0);
	reg("MasterIndexLookupSingleIndexUnknown", lookup_setup, master_lookup_run, 0, 1, 200000, 0);
	reg("MasterIndexLookupMultipleIndex", lookup_setup, master_lookup_run, 1, 100, 10000, 0);
	reg("MasterIndexLookupMultipleIndexUnknown", lookup_setup, master_lookup_run, 0, 100, 10000,
	    0);
	static const uint64_t par_n[] = { 25, 50, 100 };
	for (int i = 0; i < 3; i++) {
		char name[BENCH_NAME_MAX];
		snprintf(name, sizeof(name), "MasterIndexLookupParallel/known,indices=%llu",
			 (unsigned long long)par_n[i]);
		reg(name, lookup_setup, master_lookup_par_run, 1, par_n[i], 10000, procs);
		snprintf(name, sizeof(name), "MasterIndexLookupParallel/unknown,indices=%llu",
			 (unsigned long long)par_n[i]);
		reg(name, lookup_setup, master_lookup_par_run, 0, par_n[i], 10000, procs);
	}
	reg("MasterIndexLookupBlobSize", lookup_setup, master_size_run, 1, 5, 200000, 0);
	reg("MasterIndexEach", lookup_setup, master_each_run, 1, 5, 200000, 0);
	reg("MasterIndexMerge", index_set_setup, master_merge_run, 25, 10000, 0, 0);
	reg("IndexMapHash", hash_setup, hash_run, 0, 0, 0, 0);
}
