/*
 * bench/bench_workloads.c — the WORKLOADS.md benchmarks: Insert, InsertPrealloc, Lookup (single,
 * -par2, batched), Master, MasterLookup, MasterLookupBatch, and the batch-size sweep AllocSweep.
 *
 * Inputs come from gen.c's caches. Tables and master indexes that several lookup benchmarks
 * share are built once and kept in a one-slot cache (keyed by N and batch size), so running
 * Lookup/N=10M/known and then /unknown builds the 10M table once. Hash seeds are fixed
 * (rix_indexmap_new_seeded / rix_master_index_new_seeded) so runs are reproducible; the
 * per-file indexes of Master use rix_index_new, whose seeds are random.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "index/entry_collect.h"
#include "index/ranked.h"

/* The fixed hash seed of the tables built here. */
#define TABLE_SEED 0x5EEDF00DCAFEBEEFull
/* Keys per rix_*_lookup_many call in the batched benchmarks. */
#define LOOKUP_CHUNK 64
/* Entries per index file in Master: one restic v2 index file. */
#define MASTER_INDEX_ENTRIES 150000

enum { MODE_KNOWN = 0, MODE_UNKNOWN = 1 };

static const char *n_label(uint64_t n)
{
	switch (n) {
	case 100000: return "100k";
	case 1000000: return "1M";
	case 10000000: return "10M";
	default: return "?";
	}
}

/* ---- Insert / InsertPrealloc / AllocSweep ------------------------------------------------- */
/* arg[0] = N, arg[1] = prealloc, arg[2] = batch override (AllocSweep; 0 = -batch), arg[3] = 1:
 * the entries added ADD_CHUNK at a time (rix_indexmap_add_many: InsertBatch, InsertBatchPrealloc) */

/* Entries per rix_indexmap_add_many call in InsertBatch: about an index file's pack of blobs. */
#define ADD_CHUNK 64

typedef struct insert_state {
	size_t n;
	bool prealloc, many;
	const rix_id *ids;
	const rix_loc *locs;
} insert_state;

static int insert_setup(bench_b *b)
{
	insert_state *s = calloc(1, sizeof(*s));
	if (s == NULL)
		return bench_fail(b, "out of memory");
	s->n = (size_t)b->def->arg[0];
	s->prealloc = b->def->arg[1] != 0;
	s->many = b->def->arg[3] != 0;
	if (b->def->arg[2] != 0)
		b->batch = (uint32_t)b->def->arg[2];
	s->ids = gen_entry_ids(s->n);
	s->locs = gen_entry_locs(s->n);
	b->state = s;
	b->per_op_div = (double)s->n;
	b->per_op_unit = "ns/insert";
	return 0;
}

static void insert_run(bench_b *b)
{
	insert_state *s = b->state;
	size_t mem = 0;
	int64_t live = 0;
	for (uint64_t op = 0; op < b->n; op++) {
		int64_t live0 = bench_live_bytes();
		rix_indexmap *m;
		int rc = rix_indexmap_new_seeded(&m, b->batch, TABLE_SEED);
		if (rc != 0) {
			bench_fail(b, "rix_indexmap_new: %s", rix_strerror(rc));
			return;
		}
		if (s->prealloc)
			rc = rix_indexmap_reserve(m, s->n);
		if (s->many)
			for (size_t i = 0; i < s->n && rc == 0; i += ADD_CHUNK)
				rc = rix_indexmap_add_many(m, &s->ids[i], &s->locs[i],
							   s->n - i < ADD_CHUNK ? s->n - i : ADD_CHUNK);
		else
			for (size_t i = 0; i < s->n && rc == 0; i++)
				rc = rix_indexmap_add(m, &s->ids[i], &s->locs[i]);
		bench_stop(b);
		if (rc != 0) {
			bench_fail(b, "rix_indexmap_add/reserve: %s", rix_strerror(rc));
			rix_indexmap_free(m);
			return;
		}
		if (rix_indexmap_count(m) != s->n) {
			bench_fail(b, "count %zu after %zu inserts", rix_indexmap_count(m), s->n);
			rix_indexmap_free(m);
			return;
		}
		mem = rix_indexmap_memory(m);
		live = bench_live_bytes() - live0;
		rix_indexmap_free(m);
		bench_start(b);
	}
	bench_metric(b, (double)mem / (double)s->n, "B/entry");
	bench_metric(b, (double)live / (double)s->n, "heap-B/entry");
}

static void free_state(bench_b *b)
{
	free(b->state);
	b->state = NULL;
}

/* ---- Shared built structures (one slot each) ---------------------------------------------- */

static struct {
	rix_indexmap *m;
	size_t n;
	uint32_t batch;
} map_cache;

static int get_map(bench_b *b, size_t n, rix_indexmap **out)
{
	if (map_cache.m != NULL && map_cache.n == n && map_cache.batch == b->batch) {
		*out = map_cache.m;
		return 0;
	}
	rix_indexmap_free(map_cache.m);
	map_cache.m = NULL;
	const rix_id *ids = gen_entry_ids(n);
	const rix_loc *locs = gen_entry_locs(n);
	bench_log("building table N=%zu", n);
	rix_indexmap *m;
	int rc = rix_indexmap_new_seeded(&m, b->batch, TABLE_SEED);
	if (rc != 0)
		return bench_fail(b, "rix_indexmap_new: %s", rix_strerror(rc));
	for (size_t i = 0; i < n && rc == 0; i++)
		rc = rix_indexmap_add(m, &ids[i], &locs[i]);
	if (rc != 0) {
		rix_indexmap_free(m);
		return bench_fail(b, "rix_indexmap_add: %s", rix_strerror(rc));
	}
	/* Spot-check the table before timing anything against it. */
	for (size_t i = 0; i < n; i += n / 1000 + 1) {
		rix_loc loc;
		if (rix_indexmap_lookup(&loc, m, &ids[i]) != 0 ||
		    memcmp(&loc, &locs[i], sizeof(loc)) != 0) {
			rix_indexmap_free(m);
			return bench_fail(b, "entry %zu not found or wrong after building", i);
		}
	}
	map_cache.m = m;
	map_cache.n = n;
	map_cache.batch = b->batch;
	*out = m;
	return 0;
}

/*
 * Builds the Master workload: entries cut into final indexes of 150,000 entries (pack k holds
 * entries 8k..8k+7, pack ID from seed 0x5EED000000000000 + k), added to a master index, merged.
 * build_ns / merge_ns (may be NULL) receive the time spent building the per-file indexes and
 * adding + merging them.
 */
static int master_build(size_t n, uint32_t batch, rix_master_index **out, uint64_t *build_ns,
			uint64_t *merge_ns)
{
	const rix_id *ids = gen_entry_ids(n);
	const rix_loc *locs = gen_entry_locs(n);
	const rix_id *packs = gen_master_pack_ids((n + 7) / 8);
	uint64_t tb = 0, tm = 0;
	rix_master_index *mi;
	int rc = rix_master_index_new_seeded(&mi, TABLE_SEED);
	if (rc != 0)
		return rc;
	for (size_t start = 0; start < n && rc == 0; start += MASTER_INDEX_ENTRIES) {
		size_t end = start + MASTER_INDEX_ENTRIES < n ? start + MASTER_INDEX_ENTRIES : n;
		uint64_t t0 = bench_now_ns();
		rix_index *idx;
		rc = rix_index_new_batch(&idx, batch);
		if (rc != 0)
			break;
		for (size_t i = start; i < end && rc == 0; i += 8) {
			rix_blob bl[8];
			size_t cnt = end - i < 8 ? end - i : 8;
			for (size_t c = 0; c < cnt; c++) {
				bl[c].id = ids[i + c];
				bl[c].type = RIX_BLOB_DATA;
				bl[c].offset = locs[i + c].offset;
				bl[c].length = locs[i + c].length;
				bl[c].uncompressed_length = locs[i + c].uncompressed_length;
			}
			rc = rix_index_store_pack(idx, &packs[i / 8], bl, cnt);
		}
		if (rc != 0) {
			rix_index_free(idx);
			break;
		}
		rix_index_finalize(idx);
		uint64_t t1 = bench_now_ns();
		rc = rix_master_index_add(mi, idx);
		if (rc != 0)
			rix_index_free(idx);
		tb += t1 - t0;
		tm += bench_now_ns() - t1;
	}
	if (rc == 0) {
		uint64_t t0 = bench_now_ns();
		rc = rix_master_index_merge(mi);
		tm += bench_now_ns() - t0;
	}
	if (rc != 0) {
		rix_master_index_free(mi);
		return rc;
	}
	if (build_ns != NULL)
		*build_ns += tb;
	if (merge_ns != NULL)
		*merge_ns += tm;
	*out = mi;
	return 0;
}

static struct {
	rix_master_index *mi;
	size_t n;
	uint32_t batch;
} master_cache;

static int get_master(bench_b *b, size_t n, rix_master_index **out)
{
	if (master_cache.mi != NULL && master_cache.n == n && master_cache.batch == b->batch) {
		*out = master_cache.mi;
		return 0;
	}
	rix_master_index_free(master_cache.mi);
	master_cache.mi = NULL;
	bench_log("building master index N=%zu", n);
	rix_master_index *mi;
	int rc = master_build(n, b->batch, &mi, NULL, NULL);
	if (rc != 0)
		return bench_fail(b, "building the master index: %s (%s)", rix_strerror(rc),
				  rix_error_last());
	const rix_id *ids = gen_entry_ids(n);
	const rix_loc *locs = gen_entry_locs(n);
	const rix_id *packs = gen_master_pack_ids((n + 7) / 8);
	for (size_t i = 0; i < n; i += n / 1000 + 1) {
		rix_packed_blob pb;
		if (rix_master_index_lookup(&pb, mi, RIX_BLOB_DATA, &ids[i]) != 0 ||
		    pb.offset != locs[i].offset || pb.length != locs[i].length ||
		    memcmp(&pb.pack_id, &packs[i / 8], sizeof(rix_id)) != 0) {
			rix_master_index_free(mi);
			return bench_fail(b, "entry %zu not found or wrong in the master index", i);
		}
	}
	master_cache.mi = mi;
	master_cache.n = n;
	master_cache.batch = b->batch;
	*out = mi;
	return 0;
}

/*
 * The Master workload's entries (pack k: entries 8k..8k+7) as a ranked table (index/ranked.h),
 * built directly, outside a master index: the table's own cost and speed, to set against the
 * master index's (the same table behind RCU, the recent table and the pack IDs). Reports its
 * bytes an entry with the pack table.
 */
static struct {
	struct rix__ranked *rk;
	size_t n;
} ranked_cache;

/* The Master workload's first n entries collected as bulk loading collects them
 * (entry_collect.h), for a ranked table's build. @return 0, RIX_ENOMEM (*out NULL). */
static int collect_entries(struct rix__ecollect **out, size_t n)
{
	const rix_id *ids = gen_entry_ids(n);
	const rix_loc *locs = gen_entry_locs(n);
	struct fentry e[256];
	int rc = rix__ecollect_new(out);
	if (rc == 0)
		rc = rix__ecollect_reserve(*out, n);
	for (size_t i = 0; i < n && rc == 0; i += 256) {
		size_t k = n - i < 256 ? n - i : 256;
		for (size_t j = 0; j < k; j++)
			e[j] = (struct fentry){ .id = ids[i + j], .loc = locs[i + j] };
		rc = rix__ecollect_add(*out, e, k, 0);
	}
	if (rc != 0) {
		rix__ecollect_free(*out);
		*out = NULL;
	}
	return rc;
}

static int get_ranked(bench_b *b, size_t n, const struct rix__ranked **out)
{
	if (ranked_cache.rk == NULL || ranked_cache.n != n) {
		rix__ranked_free(ranked_cache.rk);
		ranked_cache.rk = NULL;
		/* One table at a time: the master index's cache would double the memory held. */
		rix_master_index_free(master_cache.mi);
		memset(&master_cache, 0, sizeof(master_cache));
		bench_log("building ranked table N=%zu", n);
		const rix_id *ids = gen_entry_ids(n);
		const rix_loc *locs = gen_entry_locs(n);
		struct rix__ecollect *c;
		int rc = collect_entries(&c, n);
		if (rc == 0)
			rc = rix__ranked_build_collected(&ranked_cache.rk, c, NULL, 0);
		if (rc != 0)
			return bench_fail(b, "building the ranked table: %s", rix_strerror(rc));
		for (size_t i = 0; i < n; i += n / 1000 + 1) {
			rix_loc l;
			if (!rix__ranked_find(ranked_cache.rk, &ids[i], &l) || memcmp(&l, &locs[i], sizeof(l)) != 0)
				return bench_fail(b, "entry %zu not found or wrong in the ranked table", i);
		}
		ranked_cache.n = n;
	}
	bench_metric(b, (double)(rix__ranked_memory(ranked_cache.rk) + (n + 7) / 8 * sizeof(rix_id)) / (double)n,
		     "B/entry");
	*out = ranked_cache.rk;
	return 0;
}

void workload_caches_free(void)
{
	rix__ranked_free(ranked_cache.rk);
	memset(&ranked_cache, 0, sizeof(ranked_cache));
	rix_indexmap_free(map_cache.m);
	memset(&map_cache, 0, sizeof(map_cache));
	rix_master_index_free(master_cache.mi);
	memset(&master_cache, 0, sizeof(master_cache));
	limit_caches_free();
	twoline_caches_free();
	idset_caches_free();
}

/* ---- Lookup / LookupBatch / MasterLookup / MasterLookupBatch ------------------------------ */
/* arg[0] = N, arg[1] = mode, arg[2] = threads (1 or 2), arg[3] = 0 map / 1 master; batched
 * variants are told apart by lookup_batched in the state. */

typedef struct lookup_state {
	size_t n;
	int mode;
	int threads;
	bool master, batched, ranked;
	const rix_id *keys;
	rix_indexmap *m;
	rix_master_index *mi;
	const struct rix__ranked *rk; /* ranked: the table, and the pack IDs its numbers name */
	const rix_id *packs;
} lookup_state;

typedef struct lookup_job {
	const lookup_state *s;
	size_t start;
	uint64_t ops;
	uint64_t found, sum;
} lookup_job;

static void lookup_job_run(lookup_job *j)
{
	const lookup_state *s = j->s;
	size_t n = s->n, k = j->start;
	uint64_t found = 0, sum = 0;
	uint64_t left = j->ops;
	if (s->ranked) {
		/* As MasterLookup's answer: the location and its pack's ID. */
		rix_loc locs[LOOKUP_CHUNK];
		bool fnd[LOOKUP_CHUNK];
		for (; left > 0 && !s->batched; left--) {
			if (rix__ranked_find(s->rk, &s->keys[k], &locs[0])) {
				found++;
				sum += locs[0].offset + s->packs[locs[0].pack].b[0];
			}
			if (++k == n)
				k = 0;
		}
		while (left > 0) {
			size_t c = LOOKUP_CHUNK;
			if (c > left)
				c = (size_t)left;
			if (c > n - k)
				c = n - k;
			found += rix__ranked_find_many(s->rk, &s->keys[k], c, locs, fnd);
			for (size_t i = 0; i < c; i++)
				sum += fnd[i] ? locs[i].offset + s->packs[locs[i].pack].b[0] : 0;
			left -= c;
			k += c;
			if (k == n)
				k = 0;
		}
	} else if (!s->batched) {
		if (!s->master) {
			for (; left > 0; left--) {
				rix_loc loc;
				if (rix_indexmap_lookup(&loc, s->m, &s->keys[k]) == 0) {
					found++;
					sum += loc.offset;
				}
				if (++k == n)
					k = 0;
			}
		} else {
			for (; left > 0; left--) {
				rix_packed_blob pb;
				if (rix_master_index_lookup(&pb, s->mi, RIX_BLOB_DATA, &s->keys[k]) == 0) {
					found++;
					sum += pb.offset;
				}
				if (++k == n)
					k = 0;
			}
		}
	} else {
		rix_loc locs[LOOKUP_CHUNK];
		rix_packed_blob pbs[LOOKUP_CHUNK];
		bool fnd[LOOKUP_CHUNK];
		while (left > 0) {
			size_t c = LOOKUP_CHUNK;
			if (c > left)
				c = (size_t)left;
			if (c > n - k)
				c = n - k;
			if (!s->master) {
				found += rix_indexmap_lookup_many(locs, fnd, s->m, &s->keys[k], c);
				for (size_t i = 0; i < c; i++)
					sum += fnd[i] ? locs[i].offset : 0;
			} else {
				found += rix_master_index_lookup_many(pbs, fnd, s->mi,
								      RIX_BLOB_DATA, &s->keys[k], c);
				for (size_t i = 0; i < c; i++)
					sum += fnd[i] ? pbs[i].offset : 0;
			}
			left -= c;
			k += c;
			if (k == n)
				k = 0;
		}
	}
	j->found = found;
	j->sum = sum;
}

static void *lookup_thread(void *arg)
{
	lookup_job_run(arg);
	return NULL;
}

static int lookup_setup(bench_b *b)
{
	lookup_state *s = calloc(1, sizeof(*s));
	if (s == NULL)
		return bench_fail(b, "out of memory");
	b->state = s;
	s->n = (size_t)b->def->arg[0];
	s->mode = (int)b->def->arg[1];
	s->threads = (int)b->def->arg[2];
	s->master = (b->def->arg[3] & 1) != 0;
	s->batched = (b->def->arg[3] & 2) != 0;
	s->ranked = (b->def->arg[3] & 4) != 0;
	s->keys = s->mode == MODE_KNOWN ? gen_known_ids(s->n) : gen_unknown_ids(s->n);
	if (s->ranked) {
		s->packs = gen_master_pack_ids((s->n + 7) / 8);
		return get_ranked(b, s->n, &s->rk);
	}
	if (s->master)
		return get_master(b, s->n, &s->mi);
	return get_map(b, s->n, &s->m);
}

static void lookup_run(bench_b *b)
{
	lookup_state *s = b->state;
	lookup_job jobs[2];
	uint64_t found = 0, sum = 0;
	if (s->threads <= 1) {
		jobs[0] = (lookup_job){ .s = s, .start = 0, .ops = b->n };
		lookup_job_run(&jobs[0]);
		found = jobs[0].found;
		sum = jobs[0].sum;
	} else {
		pthread_t th[2];
		jobs[0] = (lookup_job){ .s = s, .start = 0, .ops = b->n - b->n / 2 };
		jobs[1] = (lookup_job){ .s = s, .start = s->n / 2, .ops = b->n / 2 };
		for (int t = 0; t < 2; t++)
			if (pthread_create(&th[t], NULL, lookup_thread, &jobs[t]) != 0)
				bench_die("pthread_create failed");
		for (int t = 0; t < 2; t++) {
			pthread_join(th[t], NULL);
			found += jobs[t].found;
			sum += jobs[t].sum;
		}
	}
	bench_sink += sum;
	uint64_t want = s->mode == MODE_KNOWN ? b->n : 0;
	if (found != want)
		bench_fail(b, "%llu of %llu lookups found, want %llu", (unsigned long long)found,
			   (unsigned long long)b->n, (unsigned long long)want);
}

/* ---- Master ------------------------------------------------------------------------------- */
/* arg[0] = N */

static int master_setup(bench_b *b)
{
	insert_state *s = calloc(1, sizeof(*s));
	if (s == NULL)
		return bench_fail(b, "out of memory");
	s->n = (size_t)b->def->arg[0];
	s->ids = gen_entry_ids(s->n);
	s->locs = gen_entry_locs(s->n);
	gen_master_pack_ids((s->n + 7) / 8);
	/* The master cache's structure would double the memory held; drop it. */
	rix_master_index_free(master_cache.mi);
	master_cache.mi = NULL;
	b->state = s;
	b->per_op_div = (double)s->n;
	b->per_op_unit = "ns/entry";
	return 0;
}

static void master_run(bench_b *b)
{
	insert_state *s = b->state;
	uint64_t build_ns = 0, merge_ns = 0;
	size_t mem = 0;
	int64_t live = 0;
	for (uint64_t op = 0; op < b->n; op++) {
		int64_t live0 = bench_live_bytes();
		rix_master_index *mi;
		int rc = master_build(s->n, b->batch, &mi, &build_ns, &merge_ns);
		bench_stop(b);
		if (rc != 0) {
			bench_fail(b, "building the master index: %s (%s)", rix_strerror(rc),
				   rix_error_last());
			return;
		}
		if (rix_master_index_count(mi, RIX_BLOB_DATA) != s->n) {
			bench_fail(b, "master index counts %zu entries, want %zu",
				   rix_master_index_count(mi, RIX_BLOB_DATA), s->n);
			rix_master_index_free(mi);
			return;
		}
		mem = rix_master_index_memory(mi);
		live = bench_live_bytes() - live0;
		rix_master_index_free(mi);
		bench_start(b);
	}
	double ops = (double)b->n * (double)s->n;
	bench_metric(b, (double)build_ns / ops, "build-ns/entry");
	bench_metric(b, (double)merge_ns / ops, "merge-ns/entry");
	bench_metric(b, (double)mem / (double)s->n, "B/entry");
	bench_metric(b, (double)live / (double)s->n, "heap-B/entry");
}

/* ---- TableBuild: the ranked table from loaded entries ---------------------------------------- */
/* arg[0] = N. The Master workload's entries, as bulk loading leaves them (collected in 43 bytes
 * each, entry_collect.h, which the build takes over); collecting them is not timed. */

typedef struct table_build_state {
	size_t n;
} table_build_state;

static int table_build_setup(bench_b *b)
{
	table_build_state *s = calloc(1, sizeof(*s));
	if (s == NULL)
		return bench_fail(b, "out of memory");
	s->n = (size_t)b->def->arg[0];
	(void)gen_entry_ids(s->n);
	workload_caches_free(); /* their memory would count against this one's */
	b->state = s;
	b->per_op_div = (double)s->n;
	b->per_op_unit = "ns/entry";
	return 0;
}

static void table_build_run(bench_b *b)
{
	table_build_state *s = b->state;
	const rix_id *ids = gen_entry_ids(s->n);
	const rix_loc *locs = gen_entry_locs(s->n);
	size_t mem = 0;
	for (uint64_t op = 0; op < b->n; op++) {
		bench_stop(b);
		struct rix__ecollect *c;
		if (collect_entries(&c, s->n) != 0) {
			bench_fail(b, "out of memory");
			return;
		}
		bench_start(b);
		struct rix__ranked *r;
		rix_loc l;
		int rc = rix__ranked_build_collected(&r, c, NULL, 0);
		bench_stop(b);
		bool ok = rc == 0 && rix__ranked_find(r, &ids[s->n / 2], &l) && l.offset == locs[s->n / 2].offset;
		mem = rix__ranked_memory(r);
		rix__ranked_free(r);
		if (!ok) {
			bench_fail(b, "building the table failed or answered wrong");
			return;
		}
		bench_start(b);
	}
	bench_metric(b, (double)mem / (double)s->n, "B/entry");
}

/* ---- Registration ------------------------------------------------------------------------- */

static void reg(const char *name, int (*setup)(bench_b *), void (*run)(bench_b *),
		uint64_t a0, uint64_t a1, uint64_t a2, uint64_t a3)
{
	bench_def d;
	memset(&d, 0, sizeof(d));
	snprintf(d.name, sizeof(d.name), "%s", name);
	d.setup = setup;
	d.run = run;
	d.teardown = free_state;
	d.arg[0] = a0;
	d.arg[1] = a1;
	d.arg[2] = a2;
	d.arg[3] = a3;
	bench_register(&d);
}

void register_workload_benchmarks(void)
{
	static const uint64_t insert_n[] = { 100000, 1000000, 10000000 };
	static const uint64_t lookup_n[] = { 1000000, 10000000 };
	static const char *const mode_name[] = { "known", "unknown" };
	char name[BENCH_NAME_MAX];

	for (int many = 0; many < 2; many++) {
		for (int p = 0; p < 2; p++) {
			for (size_t i = 0; i < 3; i++) {
				snprintf(name, sizeof(name), "Insert%s%s/N=%s", many ? "Batch" : "",
					 p ? "Prealloc" : "", n_label(insert_n[i]));
				reg(name, insert_setup, insert_run, insert_n[i], (uint64_t)p, 0, (uint64_t)many);
			}
		}
	}
	/* Grouped by N so the shared table is built once per N. */
	for (size_t i = 0; i < 2; i++) {
		const char *nl = n_label(lookup_n[i]);
		for (int par = 1; par <= 2; par++) {
			for (int m = 0; m < 2; m++) {
				snprintf(name, sizeof(name), "Lookup/N=%s/%s%s", nl, mode_name[m],
					 par == 2 ? "-par2" : "");
				reg(name, lookup_setup, lookup_run, lookup_n[i], (uint64_t)m,
				    (uint64_t)par, 0);
			}
		}
		for (int m = 0; m < 2; m++) {
			snprintf(name, sizeof(name), "LookupBatch/N=%s/%s", nl, mode_name[m]);
			reg(name, lookup_setup, lookup_run, lookup_n[i], (uint64_t)m, 1, 2);
		}
	}
	for (size_t i = 0; i < 2; i++) {
		snprintf(name, sizeof(name), "Master/N=%s", n_label(lookup_n[i]));
		reg(name, master_setup, master_run, lookup_n[i], 0, 0, 0);
	}
	for (size_t i = 0; i < 2; i++) {
		const char *nl = n_label(lookup_n[i]);
		for (int m = 0; m < 2; m++) {
			snprintf(name, sizeof(name), "MasterLookup/N=%s/%s", nl, mode_name[m]);
			reg(name, lookup_setup, lookup_run, lookup_n[i], (uint64_t)m, 1, 1);
		}
		for (int m = 0; m < 2; m++) {
			snprintf(name, sizeof(name), "MasterLookupBatch/N=%s/%s", nl, mode_name[m]);
			reg(name, lookup_setup, lookup_run, lookup_n[i], (uint64_t)m, 1, 3);
		}
		for (int m = 0; m < 2; m++) {
			snprintf(name, sizeof(name), "RankedLookup/N=%s/%s", nl, mode_name[m]);
			reg(name, lookup_setup, lookup_run, lookup_n[i], (uint64_t)m, 1, 4);
		}
		for (int m = 0; m < 2; m++) {
			snprintf(name, sizeof(name), "RankedLookupBatch/N=%s/%s", nl, mode_name[m]);
			reg(name, lookup_setup, lookup_run, lookup_n[i], (uint64_t)m, 1, 6);
		}
	}
	for (size_t i = 0; i < 2; i++) {
		snprintf(name, sizeof(name), "TableBuild/N=%s", n_label(lookup_n[i]));
		reg(name, table_build_setup, table_build_run, lookup_n[i], 0, 0, 0);
	}
	static const uint64_t sweep_batch[] = { 1, 4, 16, 64, 256, 1024, 4096, 16384 };
	for (size_t i = 0; i < 2; i++) {
		for (size_t k = 0; k < sizeof(sweep_batch) / sizeof(sweep_batch[0]); k++) {
			snprintf(name, sizeof(name), "AllocSweep/batch=%llu/N=%s",
				 (unsigned long long)sweep_batch[k], n_label(lookup_n[i]));
			reg(name, insert_setup, insert_run, lookup_n[i], 0, sweep_batch[k], 0);
		}
	}
}
