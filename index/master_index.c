/*
 * index/master_index.c — all indexes of a repository, merged.
 *
 * State
 * -----
 *   frozen[type]   one read-only chaining table per blob type holding every merged entry
 *   packs[]        global pack table; frozen entries' rix_loc.pack numbers point here
 *   separate[]     indexes not merged: unfinished ones (the master's own "current" index among
 *                  them) and final ones added since the last merge; each keeps its own pack table
 *   pending        blobs being written now (open addressing, backward-shift deletion)
 *
 * The frozen table is a chaining table whose chains are stored contiguously, in bucket order:
 *
 *   buckets[nb + 1] (u64)                    entries[count] (48 bytes: id[32] | rix_loc)
 *   +-------------------------+              +----+----+----+----+----+----+----+----
 *   | filter:32 | start:32    | b ---------> | e0 | e1 | e2 | e3 | e4 | e5 | e6 | ...
 *   | filter:32 | start:32    | b+1 -------------------------> ^
 *   ...                                       chain of b = entries[start(b) .. start(b+1))
 *   | 0         | count       | nb (sentinel)
 *   +-------------------------+
 *
 * No `next` field is needed (48 bytes an entry instead of 52), and a chain is one run of
 * adjacent memory, so walking it costs one or two cache misses whatever its length. The bucket
 * count is count / FROZEN_LOAD, so buckets cost 8 / FROZEN_LOAD bytes an entry; the same
 * 32-bit filter as the mutable table (hash.h) rejects most absent IDs at the bucket word.
 * A lookup returns one entry of a chain with that ID; the order of duplicates in a chain is
 * unspecified. A table a merge does not change is carried over to the new state as it is (the
 * states share it; it is freed with the last state holding it).
 *
 * A merge builds new frozen tables (a counting sort on bucket numbers: count, prefix sums,
 * place) from the old tables and the final indexes waiting, with a new global pack table, while
 * holding only the writers' mutex. Readers go on using the old state; the write lock is taken
 * just to swap pointers. Then the old tables and the merged indexes are freed.
 *
 * Readers and writers
 * -------------------
 * The frozen tables and the global pack table form one immutable `struct mstate`, published
 * through an atomic pointer. A lookup reads it inside an RCU read section (rcu.h: two plain
 * stores, no lock), which answers every ID found in the frozen tables. Only a miss while
 * separate indexes exist takes the rwlock `lock` and asks them (and the frozen tables again,
 * if a merge published new ones meanwhile). A merge publishes the new state and shrinks the
 * separate list under the write lock, then waits for RCU readers (rix__rcu_synchronize)
 * before freeing the old state.
 *
 * Why a lock-free miss is safe: readers load `nsep` (the count of separate indexes) before
 * the state pointer; merges store the new state before the smaller count. A reader that sees
 * nsep = 0 therefore also sees the state that contains whatever was merged.
 *
 * `lock` (rwlock) guards the separate indexes and every field a writer changes; `wmu`
 * serializes writers (add, merge, store_pack) so a merge may read `separate` without the
 * rwlock; `pmu` guards the pending set and makes "known or pending? else mark pending" atomic.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rix/alloc.h"
#include "rix/error.h"
#include "rix/master_index.h"
#include "index_internal.h"
#include "hash.h"
#include "rcu.h"

/* Entries per bucket in a frozen table. See bench/RESULTS.md for the sweep behind it. */
#ifndef RIX_FROZEN_LOAD
#define RIX_FROZEN_LOAD 4u
#endif
#define FROZEN_LOAD RIX_FROZEN_LOAD

struct fentry {
	rix_id id;
	rix_loc loc; /* loc.pack: global pack number */
};
_Static_assert(sizeof(struct fentry) == 48, "frozen entry must stay 48 bytes");

struct frozen {
	uint64_t *buckets; /* nb + 1 words: filter << 32 | start; word nb holds count */
	struct fentry *entries;
	uint32_t nb;
	uint32_t count;
};

/* What a merge publishes: immutable until freed after an RCU grace period. */
struct mstate {
	struct frozen *frozen[RIX_BLOB_TYPES]; /* NULL: nothing merged of that type yet */
	rix_id *packs;                          /* global pack table */
	uint32_t npacks;
};

struct pending_slot {
	rix_id id;
	uint8_t type;
	uint8_t used;
};

struct rix_master_index {
	pthread_rwlock_t lock;
	pthread_mutex_t wmu;
	pthread_mutex_t pmu;
	uint64_t seed;
	_Atomic(struct mstate *) state; /* never NULL */
	atomic_size_t nsep;             /* = nseparate, for lock-free readers */
	rix_index **separate;
	size_t nseparate, separate_cap;
	rix_index *own; /* the master's own unfinished index, also in separate[]; may be NULL */
	rix_id *index_ids; /* IDs of the index files merged so far */
	size_t nindex_ids;
	struct pending_slot *pending;
	uint32_t pending_cap, npending; /* cap: power of two or 0 */
	struct bulk {                   /* committed batches, waiting for bulk_finish (bmu) */
		pthread_mutex_t bmu;
		struct fentry *e[RIX_BLOB_TYPES];
		size_t n[RIX_BLOB_TYPES], cap[RIX_BLOB_TYPES];
		rix_id *packs;
		size_t npacks, packs_cap;
		rix_id *ids;
		size_t nids, ids_cap;
	} bulk;
};

/* ---- Frozen tables ------------------------------------------------------------------------ */

static void frozen_free(struct frozen *f)
{
	if (f == NULL)
		return;
	rix_free(f->buckets);
	rix_free(f->entries);
	rix_free(f);
}

static size_t frozen_memory(const struct frozen *f)
{
	if (f == NULL)
		return 0;
	return sizeof(*f) + ((size_t)f->nb + 1) * sizeof(uint64_t) + (size_t)f->count * sizeof(struct fentry);
}

/*
 * Prefetches every cache line of entries[start, end) (at most 8), so that the misses of one
 * chain overlap instead of following each other as the scan advances.
 */
static inline void prefetch_chain(const struct frozen *f, uint32_t start, uint32_t end)
{
	const char *p = (const char *)&f->entries[start];
	const char *e = (const char *)&f->entries[end];
	uintptr_t line = (uintptr_t)p & ~(uintptr_t)63;
	for (int k = 0; k < 8 && (const char *)line < e; k++, line += 64)
		RIX_PREFETCH((const void *)line);
}

static const struct fentry *frozen_find(const struct frozen *f, const rix_id *id, uint64_t seed)
{
	uint64_t h = rix__hash_id(id, seed);
	uint32_t b = rix__hash_bucket(h, f->nb);
	uint64_t w = f->buckets[b];
	uint64_t fl = rix__hash_filter(h);
	if ((w & fl) != fl)
		return NULL;
	uint32_t end = (uint32_t)f->buckets[b + 1];
	prefetch_chain(f, (uint32_t)w, end);
	for (uint32_t i = (uint32_t)w; i < end; i++)
		if (rix__id_prefix_eq(&f->entries[i].id, id) && rix__id_eq(&f->entries[i].id, id))
			return &f->entries[i];
	return NULL;
}

/* One source of entries for a merge: a frozen table or an index's map. */
struct merge_src {
	const struct frozen *f;
	const rix_indexmap *m;
	uint32_t pack_base; /* added to an index map's local pack numbers */
};

static inline void src_entry(const struct merge_src *s, uint32_t i, const rix_id **id, rix_loc *loc)
{
	if (s->f != NULL) {
		*id = &s->f->entries[i].id;
		*loc = s->f->entries[i].loc;
	} else {
		rix_indexmap_entry(s->m, i, id, loc);
		loc->pack += s->pack_base;
	}
}

static inline uint32_t src_count(const struct merge_src *s)
{
	return s->f != NULL ? s->f->count : (uint32_t)rix_indexmap_count(s->m);
}

/*
 * Builds a frozen table of all entries of srcs[0..n) (a counting sort by bucket). Sources are
 * placed oldest first; placement fills each chain from its end, so the newest entry of a chain
 * comes first. *out NULL when there are no entries.
 */
static int frozen_build(struct frozen **out, const struct merge_src *srcs, size_t n, uint64_t seed)
{
	*out = NULL;
	uint64_t total = 0;
	for (size_t s = 0; s < n; s++)
		total += src_count(&srcs[s]);
	if (total == 0)
		return 0;
	if (total > 0xFFFFFFFEu)
		return rix_error_set(RIX_ELIMIT, "master index: %llu entries of one type is over the limit",
				     (unsigned long long)total);
	uint32_t nb = (uint32_t)((total + FROZEN_LOAD - 1) / FROZEN_LOAD);
	struct frozen *f = rix_calloc(1, sizeof(*f));
	if (f == NULL)
		return rix_error_set(RIX_ENOMEM, "master index: out of memory");
	f->nb = nb;
	f->count = (uint32_t)total;
	f->buckets = rix_calloc((size_t)nb + 1, sizeof(uint64_t));
	f->entries = rix_malloc((size_t)total * sizeof(struct fentry));
	if (f->buckets == NULL || f->entries == NULL) {
		frozen_free(f);
		return rix_error_set(RIX_ENOMEM, "master index: out of memory for %llu entries",
				     (unsigned long long)total);
	}
	rix__advise_huge(f->buckets, ((size_t)nb + 1) * sizeof(uint64_t));
	rix__advise_huge(f->entries, (size_t)total * sizeof(struct fentry));
	/* Pass 1: chain lengths (low half) and filter bits (high half) per bucket. */
	for (size_t s = 0; s < n; s++) {
		uint32_t c = src_count(&srcs[s]);
		for (uint32_t i = 0; i < c; i++) {
			const rix_id *id;
			rix_loc loc;
			src_entry(&srcs[s], i, &id, &loc);
			uint64_t h = rix__hash_id(id, seed);
			uint64_t *w = &f->buckets[rix__hash_bucket(h, nb)];
			*w = (*w | rix__hash_filter(h)) + 1; /* total < 2^32: no carry */
		}
	}
	/* Turn lengths into chain ends: end(b) = sum of lengths of buckets 0..b. */
	uint32_t run = 0;
	for (uint32_t b = 0; b < nb; b++) {
		run += (uint32_t)f->buckets[b];
		f->buckets[b] = (f->buckets[b] & 0xFFFFFFFF00000000ull) | run;
	}
	f->buckets[nb] = run;
	/* Pass 2: place each entry at --end(b); afterwards the low half is start(b). */
	for (size_t s = 0; s < n; s++) {
		uint32_t c = src_count(&srcs[s]);
		for (uint32_t i = 0; i < c; i++) {
			const rix_id *id;
			rix_loc loc;
			src_entry(&srcs[s], i, &id, &loc);
			uint64_t h = rix__hash_id(id, seed);
			uint64_t *w = &f->buckets[rix__hash_bucket(h, nb)];
			*w -= 1;
			struct fentry *e = &f->entries[(uint32_t)*w];
			e->id = *id;
			e->loc = loc;
		}
	}
	*out = f;
	return 0;
}

static void bulk_clear(struct bulk *k);

/* ---- Create / free ------------------------------------------------------------------------ */

static void mstate_free(struct mstate *st)
{
	if (st == NULL)
		return;
	for (int t = 0; t < RIX_BLOB_TYPES; t++)
		frozen_free(st->frozen[t]);
	rix_free(st->packs);
	rix_free(st);
}

/* The published state. Readers call this inside an RCU read section or under `lock`. */
static inline struct mstate *state_of(rix_master_index *mi)
{
	return atomic_load_explicit(&mi->state, memory_order_seq_cst);
}

int rix_master_index_new_seeded(rix_master_index **out, uint64_t seed)
{
	*out = NULL;
	rix_master_index *mi = rix_calloc(1, sizeof(*mi));
	struct mstate *st = rix_calloc(1, sizeof(*st));
	if (mi == NULL || st == NULL) {
		rix_free(mi);
		rix_free(st);
		return rix_error_set(RIX_ENOMEM, "master index: out of memory");
	}
	if (pthread_rwlock_init(&mi->lock, NULL) != 0) {
		rix_free(mi);
		rix_free(st);
		return rix_error_set(RIX_ENOMEM, "master index: cannot create lock");
	}
	pthread_mutex_init(&mi->wmu, NULL);
	pthread_mutex_init(&mi->pmu, NULL);
	pthread_mutex_init(&mi->bulk.bmu, NULL);
	mi->seed = seed;
	atomic_init(&mi->state, st);
	atomic_init(&mi->nsep, 0);
	(void)rix__rcu_fast(); /* registers for membarrier before any reader runs */
	*out = mi;
	return 0;
}

int rix_master_index_new(rix_master_index **out)
{
	return rix_master_index_new_seeded(out, rix__random_seed());
}

void rix_master_index_free(rix_master_index *mi)
{
	if (mi == NULL)
		return;
	mstate_free(atomic_load(&mi->state));
	for (size_t i = 0; i < mi->nseparate; i++)
		rix_index_free(mi->separate[i]);
	rix_free(mi->separate);
	rix_free(mi->index_ids);
	rix_free(mi->pending);
	pthread_rwlock_destroy(&mi->lock);
	pthread_mutex_destroy(&mi->wmu);
	pthread_mutex_destroy(&mi->pmu);
	pthread_mutex_destroy(&mi->bulk.bmu);
	bulk_clear(&mi->bulk);
	rix_free(mi);
}

/* ---- Writers ------------------------------------------------------------------------------ */

/* Appends idx to separate[]; caller holds wmu. Takes the write lock itself. */
static int push_separate(rix_master_index *mi, rix_index *idx)
{
	rix_index **old = NULL;
	if (mi->nseparate == mi->separate_cap) {
		size_t cap = mi->separate_cap ? mi->separate_cap * 2 : 8;
		rix_index **s = rix_malloc(cap * sizeof(*s));
		if (s == NULL)
			return rix_error_set(RIX_ENOMEM, "master index: out of memory");
		if (mi->nseparate)
			memcpy(s, mi->separate, mi->nseparate * sizeof(*s));
		pthread_rwlock_wrlock(&mi->lock);
		old = mi->separate;
		mi->separate = s;
		mi->separate_cap = cap;
	} else {
		pthread_rwlock_wrlock(&mi->lock);
	}
	mi->separate[mi->nseparate++] = idx;
	atomic_store(&mi->nsep, mi->nseparate);
	pthread_rwlock_unlock(&mi->lock);
	rix_free(old);
	return 0;
}

int rix_master_index_add(rix_master_index *mi, rix_index *idx)
{
	pthread_mutex_lock(&mi->wmu);
	int rc = push_separate(mi, idx);
	pthread_mutex_unlock(&mi->wmu);
	return rc;
}

int rix_master_index_store_pack(rix_master_index *mi, const rix_id *pack_id, const rix_blob *blobs,
				size_t n)
{
	pthread_mutex_lock(&mi->wmu);
	int rc = 0;
	if (mi->own == NULL) {
		rix_index *idx;
		rc = rix_index_new(&idx, 0);
		if (rc == 0) {
			rc = push_separate(mi, idx);
			if (rc != 0)
				rix_index_free(idx);
			else
				mi->own = idx;
		}
	}
	if (rc == 0) {
		pthread_rwlock_wrlock(&mi->lock);
		rc = rix_index_store_pack(mi->own, pack_id, blobs, n);
		pthread_rwlock_unlock(&mi->lock);
	}
	pthread_mutex_unlock(&mi->wmu);
	return rc;
}

/* Forgets in `from` the frozen tables it shares with `keep` (so freeing `from` leaves them). */
static void forget_shared(struct mstate *from, const struct mstate *keep)
{
	for (int t = 0; from != NULL && keep != NULL && t < RIX_BLOB_TYPES; t++)
		if (from->frozen[t] == keep->frozen[t])
			from->frozen[t] = NULL;
}

/*
 * Publishes next (and the index-file IDs nids, nids_total of them): the state first, then, when
 * drop_final, the smaller separate list without the final indexes just merged (see the file
 * comment); after a grace period frees cur and the old IDs. Takes ownership of next and nids.
 */
static void publish(rix_master_index *mi, struct mstate *cur, struct mstate *next, rix_id *nids, size_t nids_total,
		    bool drop_final)
{
	pthread_rwlock_wrlock(&mi->lock);
	atomic_store(&mi->state, next);
	rix_id *old_ids = mi->index_ids;
	mi->index_ids = nids;
	mi->nindex_ids = nids_total;
	if (drop_final) {
		size_t keep = 0;
		for (size_t i = 0; i < mi->nseparate; i++) {
			rix_index *idx = mi->separate[i];
			if (!idx->final || idx == mi->own)
				mi->separate[keep++] = idx;
		}
		mi->nseparate = keep;
		atomic_store(&mi->nsep, keep);
	}
	pthread_rwlock_unlock(&mi->lock);
	rix__rcu_synchronize(); /* no reader still holds `cur` */
	forget_shared(cur, next);
	mstate_free(cur);
	rix_free(old_ids);
}

int rix_master_index_merge(rix_master_index *mi)
{
	pthread_mutex_lock(&mi->wmu);
	struct mstate *cur = atomic_load(&mi->state); /* only writers change it; we hold wmu */
	int rc = 0;
	size_t nmerge = 0, nsrc_max = mi->nseparate + 1;
	struct merge_src *srcs = rix_malloc(nsrc_max * sizeof(*srcs));
	rix_index **merged = rix_malloc((mi->nseparate ? mi->nseparate : 1) * sizeof(*merged));
	struct mstate *next = rix_calloc(1, sizeof(*next));
	rix_id *nids = NULL;
	if (srcs == NULL || merged == NULL || next == NULL) {
		rc = rix_error_set(RIX_ENOMEM, "master index: out of memory for merge");
		goto done;
	}
	uint64_t packs_total = cur->npacks;
	size_t ids_total = mi->nindex_ids;
	for (size_t i = 0; i < mi->nseparate; i++) {
		rix_index *idx = mi->separate[i];
		if (!idx->final || idx == mi->own)
			continue;
		merged[nmerge++] = idx;
		packs_total += idx->npacks;
		ids_total += idx->nids;
	}
	if (nmerge == 0)
		goto done;
	if (packs_total > 0xFFFFFFFEu) {
		rc = rix_error_set(RIX_ELIMIT, "master index: too many packs");
		goto done;
	}
	/* The new global pack table: the old one, then each merged index's table. */
	next->packs = rix_malloc((size_t)(packs_total ? packs_total : 1) * sizeof(rix_id));
	nids = rix_malloc((ids_total ? ids_total : 1) * sizeof(rix_id));
	if (next->packs == NULL || nids == NULL) {
		rc = rix_error_set(RIX_ENOMEM, "master index: out of memory for pack table");
		goto done;
	}
	next->npacks = (uint32_t)packs_total;
	if (cur->npacks)
		memcpy(next->packs, cur->packs, (size_t)cur->npacks * sizeof(rix_id));
	if (mi->nindex_ids)
		memcpy(nids, mi->index_ids, mi->nindex_ids * sizeof(rix_id));
	uint32_t base = cur->npacks;
	size_t idn = mi->nindex_ids;
	for (int t = 0; t < RIX_BLOB_TYPES; t++) {
		size_t ns = 0;
		if (cur->frozen[t] != NULL)
			srcs[ns++] = (struct merge_src){ cur->frozen[t], NULL, 0 };
		uint32_t b = base;
		for (size_t k = 0; k < nmerge; k++) {
			if (merged[k]->maps[t] != NULL)
				srcs[ns++] = (struct merge_src){ NULL, merged[k]->maps[t], b };
			b += merged[k]->npacks;
		}
		if (ns == 1 && srcs[0].f != NULL) /* nothing new of this type: carried over */
			next->frozen[t] = cur->frozen[t];
		else
			rc = frozen_build(&next->frozen[t], srcs, ns, mi->seed);
		if (rc != 0)
			goto done;
	}
	for (size_t k = 0; k < nmerge; k++) {
		if (merged[k]->npacks)
			memcpy(next->packs + base, merged[k]->packs, (size_t)merged[k]->npacks * sizeof(rix_id));
		base += merged[k]->npacks;
		if (merged[k]->nids)
			memcpy(nids + idn, merged[k]->ids, merged[k]->nids * sizeof(rix_id));
		idn += merged[k]->nids;
	}

	publish(mi, cur, next, nids, ids_total, true);
	next = NULL;
	nids = NULL;
	for (size_t k = 0; k < nmerge; k++)
		rix_index_free(merged[k]);
done:
	forget_shared(next, cur); /* on failure: tables carried over stay cur's */
	mstate_free(next);
	rix_free(nids);
	rix_free(srcs);
	rix_free(merged);
	pthread_mutex_unlock(&mi->wmu);
	return rc;
}

/* ---- Readers ------------------------------------------------------------------------------ */

static void fill_from_frozen(const struct mstate *st, rix_blob_type t, const struct fentry *e,
			     rix_packed_blob *out)
{
	out->id = e->id;
	out->pack_id = st->packs[e->loc.pack];
	out->type = t;
	out->offset = e->loc.offset;
	out->length = e->loc.length;
	out->uncompressed_length = e->loc.uncompressed_length;
}

/*
 * The slow half of a lookup: under the read lock, the frozen tables (again, only if a merge
 * published new ones since `seen`) and then the separate indexes, newest first.
 */
static int lookup_locked(rix_master_index *mi, const struct mstate *seen, rix_blob_type t,
			 const rix_id *id, rix_packed_blob *out)
{
	const struct mstate *st = state_of(mi);
	if (st != seen && st->frozen[t] != NULL) {
		const struct fentry *e = frozen_find(st->frozen[t], id, mi->seed);
		if (e != NULL) {
			if (out != NULL)
				fill_from_frozen(st, t, e, out);
			return 0;
		}
	}
	for (size_t i = mi->nseparate; i-- > 0;)
		if (rix_index_lookup(mi->separate[i], t, id, out) == 0)
			return 0;
	return RIX_ENOTFOUND;
}

int rix_master_index_lookup(rix_master_index *mi, rix_blob_type t, const rix_id *id,
			    rix_packed_blob *out)
{
	if ((unsigned)t >= RIX_BLOB_TYPES)
		return RIX_ENOTFOUND;
	rix__rcu_read_lock();
	size_t nsep = atomic_load(&mi->nsep);
	const struct mstate *st = state_of(mi);
	const struct frozen *f = st->frozen[t];
	const struct fentry *e = f != NULL ? frozen_find(f, id, mi->seed) : NULL;
	if (e != NULL) {
		if (out != NULL)
			fill_from_frozen(st, t, e, out);
		rix__rcu_read_unlock();
		return 0;
	}
	rix__rcu_read_unlock();
	if (nsep == 0)
		return RIX_ENOTFOUND;
	pthread_rwlock_rdlock(&mi->lock);
	/* st is only compared, never dereferenced, once outside the read section. */
	int rc = lookup_locked(mi, st, t, id, out);
	pthread_rwlock_unlock(&mi->lock);
	return rc;
}

bool rix_master_index_has(rix_master_index *mi, rix_blob_type t, const rix_id *id)
{
	return rix_master_index_lookup(mi, t, id, NULL) == 0;
}

int rix_master_index_size(rix_master_index *mi, rix_blob_type t, const rix_id *id, uint32_t *size)
{
	rix_packed_blob pb;
	int rc = rix_master_index_lookup(mi, t, id, &pb);
	if (rc == 0)
		*size = rix_blob_plain_size(pb.length, pb.uncompressed_length);
	return rc;
}

size_t rix_master_index_lookup_all(rix_master_index *mi, rix_blob_type t, const rix_id *id,
				   rix_packed_blob *out, size_t max)
{
	if ((unsigned)t >= RIX_BLOB_TYPES)
		return 0;
	size_t n = 0;
	pthread_rwlock_rdlock(&mi->lock);
	const struct mstate *st = state_of(mi);
	const struct frozen *f = st->frozen[t];
	if (f != NULL) {
		uint64_t h = rix__hash_id(id, mi->seed);
		uint32_t b = rix__hash_bucket(h, f->nb);
		uint32_t end = (uint32_t)f->buckets[b + 1];
		for (uint32_t i = (uint32_t)f->buckets[b]; i < end; i++) {
			if (!rix__id_eq(&f->entries[i].id, id))
				continue;
			if (n < max && out != NULL)
				fill_from_frozen(st, t, &f->entries[i], &out[n]);
			n++;
		}
	}
	for (size_t i = mi->nseparate; i-- > 0;) {
		size_t room = n < max ? max - n : 0;
		n += rix_index_lookup_all(mi->separate[i], t, id, out ? out + (n < max ? n : 0) : NULL, room);
	}
	pthread_rwlock_unlock(&mi->lock);
	return n;
}

/*
 * Batched frozen lookup in groups: hash all keys and prefetch their bucket words; read words,
 * filter, prefetch whole chains; scan the chains; prefetch the pack IDs of the hits, then copy
 * them out. Keys the frozen table lacks are asked of the separate indexes under the read lock
 * (taken once, at the first such miss), one by one: there are few separate indexes, and they
 * are small.
 */
size_t rix_master_index_lookup_many(rix_master_index *mi, rix_blob_type t, const rix_id *ids,
				    size_t n, rix_packed_blob *out, uint8_t *found)
{
	enum { GROUP = 32 };
	if ((unsigned)t >= RIX_BLOB_TYPES) {
		if (found)
			memset(found, 0, n);
		return 0;
	}
	size_t nfound = 0;
	int locked = 0;
	rix__rcu_read_lock();
	size_t nsep = atomic_load(&mi->nsep);
	const struct mstate *st = state_of(mi);
	const struct frozen *f = st->frozen[t];
	for (size_t base = 0; base < n; base += GROUP) {
		size_t g = n - base < GROUP ? n - base : GROUP;
		uint64_t h[GROUP];
		uint32_t b[GROUP], start[GROUP], end[GROUP];
		const struct fentry *hit[GROUP];
		if (f != NULL) {
			for (size_t i = 0; i < g; i++) {
				h[i] = rix__hash_id(&ids[base + i], mi->seed);
				b[i] = rix__hash_bucket(h[i], f->nb);
				RIX_PREFETCH(&f->buckets[b[i]]);
			}
			for (size_t i = 0; i < g; i++) {
				uint64_t w = f->buckets[b[i]];
				uint64_t fl = rix__hash_filter(h[i]);
				start[i] = (uint32_t)w;
				end[i] = (w & fl) == fl ? (uint32_t)f->buckets[b[i] + 1] : start[i];
				if (end[i] > start[i])
					prefetch_chain(f, start[i], end[i]);
			}
		}
		for (size_t i = 0; i < g; i++) {
			const rix_id *id = &ids[base + i];
			hit[i] = NULL;
			if (f != NULL)
				for (uint32_t k = start[i]; k < end[i]; k++)
					if (rix__id_prefix_eq(&f->entries[k].id, id) && rix__id_eq(&f->entries[k].id, id)) {
						hit[i] = &f->entries[k];
						if (out != NULL)
							RIX_PREFETCH(&st->packs[hit[i]->loc.pack]);
						break;
					}
		}
		for (size_t i = 0; i < g; i++) {
			int ok = hit[i] != NULL;
			if (ok && out != NULL)
				fill_from_frozen(st, t, hit[i], &out[base + i]);
			if (!ok && nsep > 0) {
				/* Read lock inside the read section is safe: writers never hold
				 * the write lock while they wait for RCU readers. */
				if (!locked) {
					pthread_rwlock_rdlock(&mi->lock);
					locked = 1;
				}
				ok = lookup_locked(mi, st, t, &ids[base + i], out ? &out[base + i] : NULL) == 0;
			}
			if (found != NULL)
				found[base + i] = (uint8_t)ok;
			nfound += (size_t)ok;
		}
	}
	if (locked)
		pthread_rwlock_unlock(&mi->lock);
	rix__rcu_read_unlock();
	return nfound;
}

size_t rix_master_index_pack_count(rix_master_index *mi)
{
	pthread_rwlock_rdlock(&mi->lock);
	size_t n = state_of(mi)->npacks;
	for (size_t i = 0; i < mi->nseparate; i++)
		n += rix_index_pack_count(mi->separate[i]);
	pthread_rwlock_unlock(&mi->lock);
	return n;
}

size_t rix_master_index_count(rix_master_index *mi, rix_blob_type t)
{
	if ((unsigned)t >= RIX_BLOB_TYPES)
		return 0;
	pthread_rwlock_rdlock(&mi->lock);
	const struct mstate *st = state_of(mi);
	size_t n = st->frozen[t] ? st->frozen[t]->count : 0;
	for (size_t i = 0; i < mi->nseparate; i++)
		n += rix_index_count(mi->separate[i], t);
	pthread_rwlock_unlock(&mi->lock);
	return n;
}

int rix_master_index_foreach(rix_master_index *mi, rix_index_blob_fn fn, void *arg)
{
	int rc = 0;
	pthread_rwlock_rdlock(&mi->lock);
	const struct mstate *st = state_of(mi);
	for (int t = 0; t < RIX_BLOB_TYPES && rc == 0; t++) {
		const struct frozen *f = st->frozen[t];
		for (uint32_t i = 0; f != NULL && i < f->count && rc == 0; i++) {
			rix_packed_blob pb;
			fill_from_frozen(st, (rix_blob_type)t, &f->entries[i], &pb);
			rc = fn(&pb, arg);
		}
	}
	for (size_t i = 0; i < mi->nseparate && rc == 0; i++)
		rc = rix_index_foreach(mi->separate[i], fn, arg);
	pthread_rwlock_unlock(&mi->lock);
	return rc;
}

static int cmp_id(const void *a, const void *b)
{
	return memcmp(a, b, RIX_ID_SIZE);
}

/* Sorts the IDs in place and drops repeats; hands the array to *out. */
static int sorted_unique(rix_id *all, size_t n, rix_id **out, size_t *nout)
{
	qsort(all, n, sizeof(rix_id), cmp_id);
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (k == 0 || memcmp(&all[k - 1], &all[i], RIX_ID_SIZE) != 0)
			all[k++] = all[i];
	*out = all;
	*nout = k;
	return 0;
}

/* Collects base[0..nbase) and, per separate index, what get() returns; caller holds lock. */
static int collect_ids(rix_master_index *mi, const rix_id *base, size_t nbase,
		       const rix_id *(*get)(const rix_index *, size_t *), rix_id **out, size_t *n)
{
	size_t total = nbase;
	for (size_t i = 0; i < mi->nseparate; i++) {
		size_t k;
		get(mi->separate[i], &k);
		total += k;
	}
	rix_id *all = rix_malloc((total ? total : 1) * sizeof(rix_id));
	if (all == NULL)
		return rix_error_set(RIX_ENOMEM, "master index: out of memory listing %zu IDs", total);
	if (nbase)
		memcpy(all, base, nbase * sizeof(rix_id));
	size_t at = nbase;
	for (size_t i = 0; i < mi->nseparate; i++) {
		size_t k;
		const rix_id *ids = get(mi->separate[i], &k);
		if (k)
			memcpy(all + at, ids, k * sizeof(rix_id));
		at += k;
	}
	return sorted_unique(all, total, out, n);
}

static const rix_id *packs_of(const rix_index *idx, size_t *n)
{
	*n = idx->npacks;
	return idx->packs;
}

int rix_master_index_packs(rix_master_index *mi, rix_id **out, size_t *n)
{
	*out = NULL;
	*n = 0;
	pthread_rwlock_rdlock(&mi->lock);
	const struct mstate *st = state_of(mi);
	int rc = collect_ids(mi, st->packs, st->npacks, packs_of, out, n);
	pthread_rwlock_unlock(&mi->lock);
	return rc;
}

int rix_master_index_index_ids(rix_master_index *mi, rix_id **out, size_t *n)
{
	*out = NULL;
	*n = 0;
	pthread_rwlock_rdlock(&mi->lock);
	int rc = collect_ids(mi, mi->index_ids, mi->nindex_ids, rix_index_ids, out, n);
	pthread_rwlock_unlock(&mi->lock);
	return rc;
}

size_t rix_master_index_memory(rix_master_index *mi)
{
	pthread_rwlock_rdlock(&mi->lock);
	const struct mstate *st = state_of(mi);
	size_t m = sizeof(*mi) + sizeof(*st) + (size_t)st->npacks * sizeof(rix_id) +
		   mi->separate_cap * sizeof(rix_index *) + mi->nindex_ids * sizeof(rix_id);
	for (int t = 0; t < RIX_BLOB_TYPES; t++)
		m += frozen_memory(st->frozen[t]);
	for (size_t i = 0; i < mi->nseparate; i++)
		m += rix_index_memory(mi->separate[i]);
	pthread_rwlock_unlock(&mi->lock);
	pthread_mutex_lock(&mi->pmu);
	m += (size_t)mi->pending_cap * sizeof(struct pending_slot);
	pthread_mutex_unlock(&mi->pmu);
	return m;
}

/* ---- Pending blobs ------------------------------------------------------------------------ */

static inline uint32_t pending_home(const rix_master_index *mi, rix_blob_type t, const rix_id *id)
{
	return (uint32_t)(rix__hash_id(id, mi->seed ^ (uint64_t)(t + 1))) & (mi->pending_cap - 1);
}

/* Index of (t, id) in the pending table, or UINT32_MAX. Caller holds pmu. */
static uint32_t pending_find(const rix_master_index *mi, rix_blob_type t, const rix_id *id)
{
	if (mi->pending_cap == 0)
		return UINT32_MAX;
	uint32_t mask = mi->pending_cap - 1;
	for (uint32_t s = pending_home(mi, t, id);; s = (s + 1) & mask) {
		const struct pending_slot *p = &mi->pending[s];
		if (!p->used)
			return UINT32_MAX;
		if (p->type == t && rix__id_eq(&p->id, id))
			return s;
	}
}

static void pending_put(rix_master_index *mi, rix_blob_type t, const rix_id *id)
{
	uint32_t mask = mi->pending_cap - 1;
	uint32_t s = pending_home(mi, t, id);
	while (mi->pending[s].used)
		s = (s + 1) & mask;
	mi->pending[s] = (struct pending_slot){ *id, (uint8_t)t, 1 };
}

static int pending_grow(rix_master_index *mi)
{
	uint32_t oldcap = mi->pending_cap;
	struct pending_slot *old = mi->pending;
	uint32_t cap = oldcap ? oldcap * 2 : 64;
	struct pending_slot *p = rix_calloc(cap, sizeof(*p));
	if (p == NULL)
		return rix_error_set(RIX_ENOMEM, "master index: out of memory for pending set");
	mi->pending = p;
	mi->pending_cap = cap;
	for (uint32_t i = 0; i < oldcap; i++)
		if (old[i].used)
			pending_put(mi, (rix_blob_type)old[i].type, &old[i].id);
	rix_free(old);
	return 0;
}

int rix_master_index_add_pending(rix_master_index *mi, rix_blob_type t, const rix_id *id)
{
	if ((unsigned)t >= RIX_BLOB_TYPES)
		return rix_error_set(RIX_EINVAL, "master index: blob type %d", (int)t);
	pthread_mutex_lock(&mi->pmu);
	int rc;
	if (pending_find(mi, t, id) != UINT32_MAX || rix_master_index_has(mi, t, id)) {
		rc = 0;
	} else if ((uint64_t)(mi->npending + 1) * 2 > mi->pending_cap && (rc = pending_grow(mi)) != 0) {
		/* rc holds RIX_ENOMEM */
	} else {
		pending_put(mi, t, id);
		mi->npending++;
		rc = 1;
	}
	pthread_mutex_unlock(&mi->pmu);
	return rc;
}

/* Linear-probing deletion by backward shift: no tombstones, probes stay short. */
void rix_master_index_remove_pending(rix_master_index *mi, rix_blob_type t, const rix_id *id)
{
	pthread_mutex_lock(&mi->pmu);
	uint32_t hole = pending_find(mi, t, id);
	if (hole != UINT32_MAX) {
		uint32_t mask = mi->pending_cap - 1;
		uint32_t s = hole;
		for (;;) {
			s = (s + 1) & mask;
			struct pending_slot *p = &mi->pending[s];
			if (!p->used)
				break;
			uint32_t home = pending_home(mi, (rix_blob_type)p->type, &p->id);
			/* Move p into the hole unless its home lies cyclically in (hole, s]. */
			if (((s - home) & mask) >= ((s - hole) & mask)) {
				mi->pending[hole] = *p;
				hole = s;
			}
		}
		mi->pending[hole].used = 0;
		mi->npending--;
	}
	pthread_mutex_unlock(&mi->pmu);
}

/* ---- Bulk loading ------------------------------------------------------------------------- */
/*
 * Batches: a loader thread decodes one index file into its batch (local pack numbers), then
 * commits it: the batch's packs and entries are appended to mi->bulk under bmu, pack numbers
 * shifted. bulk_finish turns the appended entries into the frozen table *in place* when nothing
 * of that type was merged before (a counting sort by bucket done as a cycle-following
 * permutation: no second copy of the entries), else merges them with the existing table.
 * Peak memory for N entries loaded: 48 N + 2 N (bucket words) + 4 N / FROZEN_LOAD (cursors),
 * plus the batches in flight; the per-file indexes of rix_master_index_add cost 52 N more.
 */

struct rix_master_batch {
	rix_master_index *mi;
	rix_index_sink sink;
	rix_id *packs;
	size_t npacks, packs_cap;
	struct fentry *e[RIX_BLOB_TYPES];
	size_t n[RIX_BLOB_TYPES], cap[RIX_BLOB_TYPES];
};

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap)
		return 0;
	size_t c = *cap ? *cap : 1024;
	while (c < need)
		c *= 2;
	void *q = rix_realloc(*p, c * elem);
	if (q == NULL)
		return rix_error_set(RIX_ENOMEM, "master index: out of memory for %zu bulk entries", c);
	*p = q;
	*cap = c;
	return 0;
}

static int batch_pack(void *arg, const rix_id *pack_id, uint32_t *num)
{
	rix_master_batch *b = arg;
	int rc = grow((void **)&b->packs, &b->packs_cap, b->npacks + 1, sizeof(rix_id));
	if (rc != 0)
		return rc;
	b->packs[b->npacks] = *pack_id;
	*num = (uint32_t)b->npacks++;
	return 0;
}

static int batch_blob(void *arg, rix_blob_type t, const rix_id *id, const rix_loc *loc)
{
	rix_master_batch *b = arg;
	int rc = grow((void **)&b->e[t], &b->cap[t], b->n[t] + 1, sizeof(struct fentry));
	if (rc != 0)
		return rc;
	b->e[t][b->n[t]].id = *id;
	b->e[t][b->n[t]++].loc = *loc;
	return 0;
}

int rix_master_index_batch_new(rix_master_index *mi, rix_master_batch **out)
{
	*out = rix_calloc(1, sizeof(**out));
	if (*out == NULL)
		return rix_error_set(RIX_ENOMEM, "master index: out of memory");
	(*out)->mi = mi;
	(*out)->sink = (rix_index_sink){ batch_pack, batch_blob, NULL, *out };
	return 0;
}

const rix_index_sink *rix_master_batch_sink(rix_master_batch *b)
{
	return &b->sink;
}

void rix_master_batch_discard(rix_master_batch *b)
{
	b->npacks = 0;
	for (int t = 0; t < RIX_BLOB_TYPES; t++)
		b->n[t] = 0;
}

void rix_master_batch_free(rix_master_batch *b)
{
	if (b == NULL)
		return;
	rix_free(b->packs);
	for (int t = 0; t < RIX_BLOB_TYPES; t++)
		rix_free(b->e[t]);
	rix_free(b);
}

int rix_master_batch_commit(rix_master_batch *b, const rix_id *index_id)
{
	struct bulk *k = &b->mi->bulk;
	pthread_mutex_lock(&k->bmu);
	int rc = grow((void **)&k->packs, &k->packs_cap, k->npacks + b->npacks, sizeof(rix_id));
	for (int t = 0; rc == 0 && t < RIX_BLOB_TYPES; t++)
		rc = grow((void **)&k->e[t], &k->cap[t], k->n[t] + b->n[t], sizeof(struct fentry));
	if (rc == 0 && index_id != NULL)
		rc = grow((void **)&k->ids, &k->ids_cap, k->nids + 1, sizeof(rix_id));
	if (rc == 0 && k->npacks + b->npacks > 0xFFFFFFFEu)
		rc = rix_error_set(RIX_ELIMIT, "master index: too many packs");
	if (rc == 0) {
		uint32_t base = (uint32_t)k->npacks;
		if (b->npacks)
			memcpy(k->packs + k->npacks, b->packs, b->npacks * sizeof(rix_id));
		k->npacks += b->npacks;
		for (int t = 0; t < RIX_BLOB_TYPES; t++) {
			struct fentry *dst = k->e[t] + k->n[t];
			for (size_t i = 0; i < b->n[t]; i++) {
				dst[i] = b->e[t][i];
				dst[i].loc.pack += base;
			}
			k->n[t] += b->n[t];
		}
		if (index_id != NULL)
			k->ids[k->nids++] = *index_id;
	}
	pthread_mutex_unlock(&k->bmu);
	rix_master_batch_discard(b);
	return rc;
}

/* Super-buckets of the in-place sort (see frozen_in_place): 16, then 16 x 16. */
#define SUPER_BITS 8
#define NSUPER (1u << SUPER_BITS)

static inline uint32_t super_of(uint32_t bucket, uint32_t nb)
{
	return (uint32_t)(((uint64_t)bucket << SUPER_BITS) / nb);
}

/*
 * Permutes entries so that every one lands in its key's range: key k owns
 * [next[k - k0] .. its end), ends given by end(k). Each entry moves once (cycle leader).
 */
#define PERMUTE(e, k0, nk, next, END, KEY)                                               \
	do {                                                                                     \
		for (uint32_t k_ = 0; k_ < (nk); k_++) {                                         \
			uint32_t end_ = END(k_);                                                 \
			while ((next)[k_] < end_) {                                              \
				struct fentry cur_ = (e)[(next)[k_]];                            \
				uint32_t d_ = KEY(cur_) - (k0);                                  \
				while (d_ != k_) {                                               \
					struct fentry o_ = (e)[(next)[d_]];                      \
					(e)[(next)[d_]++] = cur_;                                \
					cur_ = o_;                                               \
					d_ = KEY(cur_) - (k0);                                   \
				}                                                                \
				(e)[(next)[k_]++] = cur_;                                        \
			}                                                                        \
		}                                                                                \
	} while (0)

struct sort_job {
	struct fentry *entries;
	struct frozen *f;
	uint32_t *next, *sstart, *snext;
	uint32_t nb;
	uint64_t seed;
	atomic_uint group; /* the next group to take */
};

/* Levels 2 and 3 for the groups this thread takes. */
static void *sort_groups(void *arg)
{
	struct sort_job *j = arg;
	struct fentry *entries = j->entries;
	uint32_t nb = j->nb, *sstart = j->sstart;
	uint64_t seed = j->seed;
	for (;;) {
		uint32_t g = atomic_fetch_add(&j->group, 1);
		if (g >= 16)
			return NULL;
		uint32_t *sn = j->snext + 16 * g;
#define SUPER_END(k) (sstart[16 * g + (k) + 1])
#define SUPER_KEY(x) super_of(rix__hash_bucket(rix__hash_id(&(x).id, seed), nb), nb)
		PERMUTE(entries, 16 * g, 16, sn, SUPER_END, SUPER_KEY);
		/* Each super-bucket's buckets are one contiguous range [b0, b1). */
		for (uint32_t k = 16 * g; k < 16 * g + 16; k++) {
			uint32_t b0 = (uint32_t)(((uint64_t)k * nb + NSUPER - 1) >> SUPER_BITS);
			uint32_t b1 = (uint32_t)(((uint64_t)(k + 1) * nb + NSUPER - 1) >> SUPER_BITS);
			uint32_t *nx = j->next + b0;
#define BUCKET_END(i) ((uint32_t)j->f->buckets[b0 + (i) + 1])
#define BUCKET_KEY(x) rix__hash_bucket(rix__hash_id(&(x).id, seed), nb)
			PERMUTE(entries, b0, b1 - b0, nx, BUCKET_END, BUCKET_KEY);
		}
#undef SUPER_END
#undef SUPER_KEY
#undef BUCKET_END
#undef BUCKET_KEY
	}
}

/*
 * The frozen table over entries[0..count) themselves, permuted into bucket order: a counting
 * sort done in place in three levels, so that the moves stay cache-friendly: 16 groups of
 * super-buckets (16 write streams, which the prefetchers follow), then each group into its 16
 * super-buckets (1/16 of the data), then each super-bucket (1/256 of the entries: L2-sized at
 * millions) into its buckets.
 */
static int frozen_in_place(struct frozen **out, struct fentry *entries, uint32_t count, uint64_t seed)
{
	*out = NULL;
	uint32_t nb = (uint32_t)(((uint64_t)count + FROZEN_LOAD - 1) / FROZEN_LOAD);
	struct frozen *f = rix_calloc(1, sizeof(*f));
	uint32_t *next = rix_malloc((size_t)nb * sizeof(uint32_t));
	if (f != NULL)
		f->buckets = rix_calloc((size_t)nb + 1, sizeof(uint64_t));
	if (f == NULL || f->buckets == NULL || next == NULL) {
		if (f != NULL)
			rix_free(f->buckets);
		rix_free(f);
		rix_free(next);
		return rix_error_set(RIX_ENOMEM, "master index: out of memory for %u buckets", nb);
	}
	rix__advise_huge(f->buckets, ((size_t)nb + 1) * sizeof(uint64_t));
	for (uint32_t i = 0; i < count; i++) {
		uint64_t h = rix__hash_id(&entries[i].id, seed);
		uint64_t *w = &f->buckets[rix__hash_bucket(h, nb)];
		*w = (*w | rix__hash_filter(h)) + 1;
	}
	uint32_t run = 0, sstart[NSUPER + 1], snext[NSUPER];
	memset(sstart, 0, sizeof(sstart));
	for (uint32_t b = 0; b < nb; b++) {
		uint32_t len = (uint32_t)f->buckets[b];
		f->buckets[b] = (f->buckets[b] & 0xFFFFFFFF00000000ull) | run;
		next[b] = run;
		sstart[super_of(b, nb) + 1] += len;
		run += len;
	}
	f->buckets[nb] = run;
	for (uint32_t k = 0; k < NSUPER; k++) {
		sstart[k + 1] += sstart[k];
		snext[k] = sstart[k];
	}
	uint32_t gnext[16];
	for (uint32_t g = 0; g < 16; g++)
		gnext[g] = sstart[16 * g];
#define GROUP_END(k) (sstart[16 * ((k) + 1)])
#define GROUP_KEY(x) (super_of(rix__hash_bucket(rix__hash_id(&(x).id, seed), nb), nb) >> 4)
	PERMUTE(entries, 0, 16, gnext, GROUP_END, GROUP_KEY);
	/* Levels 2 and 3 of the 16 groups are independent: one thread per CPU takes groups. */
	struct sort_job job = { .entries = entries, .f = f, .next = next, .sstart = sstart, .snext = snext,
				.nb = nb, .seed = seed };
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	int nth = cpus > 1 ? (int)(cpus < 16 ? cpus : 16) : 1;
	pthread_t th[16];
	int started = 0;
	for (int i = 1; i < nth; i++)
		if (pthread_create(&th[started], NULL, sort_groups, &job) == 0)
			started++;
	sort_groups(&job);
	for (int i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	rix_free(next);
	f->entries = entries;
	f->nb = nb;
	f->count = count;
	*out = f;
	return 0;
}

static void bulk_clear(struct bulk *k)
{
	for (int t = 0; t < RIX_BLOB_TYPES; t++) {
		rix_free(k->e[t]);
		k->e[t] = NULL;
		k->n[t] = k->cap[t] = 0;
	}
	rix_free(k->packs);
	rix_free(k->ids);
	k->packs = NULL;
	k->ids = NULL;
	k->npacks = k->packs_cap = k->nids = k->ids_cap = 0;
}

int rix_master_index_bulk_finish(rix_master_index *mi)
{
	struct bulk *k = &mi->bulk;
	pthread_mutex_lock(&mi->wmu);
	pthread_mutex_lock(&k->bmu);
	struct mstate *cur = atomic_load(&mi->state);
	struct mstate *next = NULL;
	rix_id *nids = NULL;
	int rc = 0;
	if (k->npacks == 0 && k->nids == 0 && k->n[0] == 0 && k->n[1] == 0)
		goto done;
	uint64_t packs_total = (uint64_t)cur->npacks + k->npacks;
	if (packs_total > 0xFFFFFFFEu || k->n[0] > 0xFFFFFFFEu || k->n[1] > 0xFFFFFFFEu) {
		rc = rix_error_set(RIX_ELIMIT, "master index: over the limit of entries or packs");
		goto done;
	}
	next = rix_calloc(1, sizeof(*next));
	if (next != NULL)
		next->packs = rix_malloc((size_t)(packs_total ? packs_total : 1) * sizeof(rix_id));
	nids = rix_malloc((mi->nindex_ids + k->nids + 1) * sizeof(rix_id));
	if (next == NULL || next->packs == NULL || nids == NULL) {
		rc = rix_error_set(RIX_ENOMEM, "master index: out of memory for the bulk load");
		goto done;
	}
	next->npacks = (uint32_t)packs_total;
	if (cur->npacks)
		memcpy(next->packs, cur->packs, (size_t)cur->npacks * sizeof(rix_id));
	if (k->npacks)
		memcpy(next->packs + cur->npacks, k->packs, k->npacks * sizeof(rix_id));
	if (mi->nindex_ids)
		memcpy(nids, mi->index_ids, mi->nindex_ids * sizeof(rix_id));
	if (k->nids)
		memcpy(nids + mi->nindex_ids, k->ids, k->nids * sizeof(rix_id));
	for (int t = 0; t < RIX_BLOB_TYPES; t++) {
		if (cur->npacks)
			for (size_t i = 0; i < k->n[t]; i++)
				k->e[t][i].loc.pack += cur->npacks;
		if (k->n[t] == 0) {
			next->frozen[t] = cur->frozen[t]; /* carried over */
		} else if (cur->frozen[t] == NULL) {
			rc = frozen_in_place(&next->frozen[t], k->e[t], (uint32_t)k->n[t], mi->seed);
			if (rc == 0) { /* the table owns the array now; give back its unused tail */
				struct fentry *shrunk = rix_realloc(k->e[t], k->n[t] * sizeof(struct fentry));
				if (shrunk != NULL)
					next->frozen[t]->entries = shrunk;
				k->e[t] = NULL;
				k->n[t] = k->cap[t] = 0;
			}
		} else {
			struct frozen flat = { .entries = k->e[t], .count = (uint32_t)k->n[t] };
			struct merge_src src[2] = { { cur->frozen[t], NULL, 0 }, { &flat, NULL, 0 } };
			rc = frozen_build(&next->frozen[t], src, 2, mi->seed);
		}
		if (rc != 0)
			goto done;
	}
	publish(mi, cur, next, nids, mi->nindex_ids + k->nids, false);
	next = NULL;
	nids = NULL;
	bulk_clear(k);
done:
	forget_shared(next, cur);
	mstate_free(next); /* on failure: tables built so far, arrays built in place with them */
	if (rc != 0) /* the committed batches are dropped; the searchable state is as it was */
		bulk_clear(k);
	rix_free(nids);
	pthread_mutex_unlock(&k->bmu);
	pthread_mutex_unlock(&mi->wmu);
	return rc;
}
