/*
 * index/master_index.c — all indexes of a repository, merged: create/free, adding indexes, the
 * merge, and the lookups and listings. The frozen table and its builders are in frozen.c, the
 * blobs stored since opening in recent.c, bulk loading in bulk_load.c; the struct they share is
 * in master_index_internal.h.
 *
 * State
 * -----
 *   frozen[type]   one read-only chaining table per blob type holding every merged entry
 *   dset           dedup-only (set before a bulk load): the bulk-loaded data blobs as a rix_idset,
 *                  IDs only; a data blob found there is known, its location is not (see
 *                  no_location). Shared by states like a frozen table, carried over by merges
 *   packs[]        global pack table; frozen entries' rix_loc.pack numbers point here
 *   separate[]     indexes added and not merged: unfinished ones, and final ones added since the
 *                  last merge; each keeps its own pack table (a repository loads its index in
 *                  bulk, so there are none in a backup)
 *   recent         the blobs this process is storing or has stored (recent.c): pending ones,
 *                  stored ones with their locations and packs, and which packs no index file
 *                  names yet. One entry per blob, read without a lock
 *
 * The frozen tables (frozen.c: layout, builders) hold every merged entry once, each chain in
 * one run of memory. A table a merge does not change is carried over to the new state as it is
 * (the states share it; it is freed with the last state holding it).
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
 * stores, no lock), which answers every ID found in the frozen tables; a miss asks the recent
 * table in the same read section, also without a lock. Only a miss while separate indexes
 * exist takes the rwlock `lock` and asks them (and the frozen tables again,
 * if a merge published new ones meanwhile); lookup_all, which must count each entry once,
 * then does all of its work under the read lock. The counts, listings and foreach always
 * take the read lock. A merge publishes the new state and shrinks the
 * separate list under the write lock, then waits for RCU readers (rix__rcu_synchronize)
 * before freeing the old state.
 *
 * Why a lock-free miss is safe: readers load `nsep` (the count of separate indexes) before
 * the state pointer; merges store the new state before the smaller count. A reader that sees
 * nsep = 0 therefore also sees the state that contains whatever was merged.
 *
 * `lock` (rwlock) guards the separate indexes and every field a writer changes; `wmu`
 * serializes writers (add, merge) so a merge may read `separate` without the rwlock. The
 * recent table has its own mutex for its writers (reserve, store_pack), which makes "known or
 * pending? else mark pending" one step.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rix/alloc.h"
#include "rix/error.h"
#include "index_internal.h"
#include "master_index_internal.h"
#include "rcu.h"

/* ---- Create / free ------------------------------------------------------------------------ */

void rix__mstate_free(struct mstate *st)
{
	if (st == NULL)
		return;
	for (int t = 0; t < RIX_BLOB_TYPES; t++)
		rix__frozen_free(st->frozen[t]);
	rix_idset_free(st->dset);
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
	if (rix__recent_new(&mi->recent, seed ^ 0x9e3779b97f4a7c15u) != 0) {
		pthread_rwlock_destroy(&mi->lock);
		rix_free(mi);
		rix_free(st);
		return RIX_ENOMEM;
	}
	pthread_mutex_init(&mi->wmu, NULL);
	pthread_mutex_init(&mi->bulk.bmu, NULL);
	pthread_mutex_init(&mi->pin_mu, NULL);
	pthread_cond_init(&mi->pin_cv, NULL);
	mi->seed = seed;
	atomic_init(&mi->state, st);
	atomic_init(&mi->nsep, 0);
	(void)rix__rcu_fast(); /* registers for membarrier before any reader runs */
	*out = mi;
	return 0;
}

void rix_master_index_set_workers(rix_master_index *mi, unsigned workers)
{
	mi->workers = workers;
}

void rix_master_index_set_dedup_only(rix_master_index *mi, bool on)
{
	mi->dedup_only = on;
}

bool rix_master_index_dedup_only(rix_master_index *mi)
{
	pthread_rwlock_rdlock(&mi->lock);
	bool held = atomic_load(&mi->state)->dset != NULL;
	pthread_rwlock_unlock(&mi->lock);
	return held;
}

int rix_master_index_new(rix_master_index **out)
{
	return rix_master_index_new_seeded(out, rix__random_seed());
}

void rix_master_index_free(rix_master_index *mi)
{
	if (mi == NULL)
		return;
	rix__mstate_free(atomic_load(&mi->state));
	for (size_t i = 0; i < mi->nseparate; i++)
		rix_index_free(mi->separate[i]);
	rix_free(mi->separate);
	rix_free(mi->index_ids);
	rix__recent_free(mi->recent);
	pthread_rwlock_destroy(&mi->lock);
	pthread_mutex_destroy(&mi->wmu);
	pthread_mutex_destroy(&mi->bulk.bmu);
	pthread_mutex_destroy(&mi->pin_mu);
	pthread_cond_destroy(&mi->pin_cv);
	rix__bulk_clear(&mi->bulk);
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
	return rix__recent_store_pack(mi->recent, pack_id, blobs, n);
}

size_t rix_master_index_unindexed(rix_master_index *mi)
{
	return rix__recent_unindexed(mi->recent);
}

int rix_master_index_take_unindexed(rix_index **out, uint32_t *upto, rix_master_index *mi)
{
	return rix__recent_take_unindexed(mi->recent, out, upto);
}

int rix_master_index_mark_indexed(rix_master_index *mi, uint32_t upto, const rix_id *index_id)
{
	rix__recent_mark_indexed(mi->recent, upto);
	if (index_id == NULL)
		return 0;
	/* The file's ID among those held, so that loading the repository's index files later does
	 * not merge what the recent table already answers for. */
	pthread_mutex_lock(&mi->wmu);
	rix_id *v = rix_malloc((mi->nindex_ids + 1) * sizeof(rix_id));
	int rc = v == NULL ? rix_error_set(RIX_ENOMEM, "master index: out of memory") : 0;
	if (rc == 0) {
		if (mi->nindex_ids)
			memcpy(v, mi->index_ids, mi->nindex_ids * sizeof(rix_id));
		v[mi->nindex_ids] = *index_id;
		pthread_rwlock_wrlock(&mi->lock);
		rix_id *old = mi->index_ids;
		mi->index_ids = v;
		mi->nindex_ids++;
		pthread_rwlock_unlock(&mi->lock);
		rix_free(old);
	}
	pthread_mutex_unlock(&mi->wmu);
	return rc;
}

void rix__mstate_forget_shared(struct mstate *from, const struct mstate *keep)
{
	for (int t = 0; from != NULL && keep != NULL && t < RIX_BLOB_TYPES; t++)
		if (from->frozen[t] == keep->frozen[t])
			from->frozen[t] = NULL;
	if (from != NULL && keep != NULL && from->dset == keep->dset)
		from->dset = NULL;
}

void rix__master_index_publish(rix_master_index *mi, struct mstate *cur, struct mstate *next, rix_id *nids,
			       size_t nids_total, bool drop_final)
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
			if (!idx->final)
				mi->separate[keep++] = idx;
		}
		mi->nseparate = keep;
		atomic_store(&mi->nsep, keep);
	}
	pthread_rwlock_unlock(&mi->lock);
	rix__rcu_synchronize(); /* no reader still holds `cur` */
	pthread_mutex_lock(&mi->pin_mu); /* nor an exported image (master_image.c) */
	while (mi->pinned == cur)
		pthread_cond_wait(&mi->pin_cv, &mi->pin_mu);
	pthread_mutex_unlock(&mi->pin_mu);
	rix__mstate_forget_shared(cur, next);
	rix__mstate_free(cur);
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
		if (!idx->final)
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
	rix__advise_huge(next->packs, (size_t)packs_total * sizeof(rix_id)); /* read at random, as the tables */
	next->npacks = (uint32_t)packs_total;
	next->dset = cur->dset; /* carried over: merged indexes' data blobs go to the frozen table */
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
			rc = rix__frozen_build(&next->frozen[t], srcs, ns, mi->seed);
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

	rix__master_index_publish(mi, cur, next, nids, ids_total, true);
	next = NULL;
	nids = NULL;
	for (size_t k = 0; k < nmerge; k++)
		rix_index_free(merged[k]);
done:
	rix__mstate_forget_shared(next, cur); /* on failure: tables carried over stay cur's */
	rix__mstate_free(next);
	rix_free(nids);
	rix_free(srcs);
	rix_free(merged);
	pthread_mutex_unlock(&mi->wmu);
	return rc;
}

/* ---- Readers ------------------------------------------------------------------------------ */

/*
 * The frozen table's lookup (the layout is described in frozen.c). Kept here, static, beside
 * the lookups that call it, so that the compiler inlines what it inlined before the split.
 */

/*
 * Prefetches every cache line of entries[start, end) (at most 8), so that the misses of one
 * chain overlap instead of following each other as the scan advances. Always inline: GCC takes
 * a function that only prefetches for one without effects, and drops the call where it does
 * not inline it. (Six prefetches clamped to the chain's last line, no branch on its length:
 * more instructions, no faster; bench/RESULTS.md.)
 */
static inline __attribute__((always_inline)) void prefetch_chain(const struct frozen *f, uint32_t start,
								  uint32_t end)
{
	const char *p = (const char *)&f->entries[start];
	const char *e = (const char *)&f->entries[end];
	const char *line = p - ((uintptr_t)p & 63);
	for (int k = 0; k < 8 && line < e; k++, line += 64)
		RIX_PREFETCH(line);
}

/*
 * Which of the chain's first 8 entries (fp[0..8)) carry the fingerprint `want`: bit 8k + 7 set
 * for entry k, exactly for the first match (a byte above a true match may show a false one,
 * which the ID compare then turns down). No branch on the loaded bytes: a known lookup whose
 * branches do not wait for its misses lets the next lookups' misses start while it waits.
 */
static inline uint64_t fp_matches8(const uint8_t *fp, uint8_t want, uint32_t len)
{
	const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
	uint64_t x;
	__builtin_memcpy(&x, fp, 8);
	x ^= ones * want;
	uint64_t m = (x - ones) & ~x & highs;
	/* len < 8: only the chain's own bytes (no shift by 64). */
	uint64_t keep = len >= 8 ? ~0ull : ((1ull << (len * 8)) - 1);
	return m & keep;
}

/* The entry of entries[i, end) with fingerprint want and ID id, NULL if none (the slow path). */
static const struct fentry *chain_find(const struct frozen *f, uint32_t i, uint32_t end, uint8_t want,
				       const rix_id *id)
{
	for (; i < end; i++)
		if (f->fp[i] == want && rix__id_eq(&f->entries[i].id, id))
			return &f->entries[i];
	return NULL;
}

/* The first k in [start, end) with fp[k] == want; end if none. The first 8 without a branch on
 * the bytes (fp_matches8's lowest bit is exact). */
static inline uint32_t first_fp_match(const struct frozen *f, uint32_t start, uint32_t end, uint8_t want)
{
	uint32_t k = start;
	if (__builtin_expect(start + 8 <= f->count, 1)) {
		uint64_t m = fp_matches8(&f->fp[start], want, end - start);
		if (__builtin_expect(m != 0, 1))
			return start + ((unsigned)__builtin_ctzll(m) >> 3);
		k = start + 8;
	}
	while (k < end && f->fp[k] != want)
		k++;
	return k < end ? k : end;
}

/* Inline into the lookups: a call's saved registers and moves are a fifth of a known lookup. */
static inline __attribute__((always_inline)) const struct fentry *frozen_find(const struct frozen *f,
									       const rix_id *id, uint64_t seed)
{
	uint64_t h = rix__hash_id(id, seed);
	uint32_t b = rix__hash_bucket(h, f->nb);
	uint64_t w = f->buckets[b];
	uint64_t fl = rix__hash_filter(h);
	if ((w & fl) != fl)
		return NULL;
	uint32_t start = (uint32_t)w, end = (uint32_t)f->buckets[b + 1];
	/* The chain's lines on their way while its fingerprints (one line, mostly in cache) pick
	 * the entries worth comparing: one compare for a known ID, as a rule. */
	prefetch_chain(f, start, end);
	uint8_t want = rix__hash_fp(h);
	uint32_t k = first_fp_match(f, start, end, want);
	if (k >= end)
		return NULL;
	if (__builtin_expect(rix__id_eq(&f->entries[k].id, id), 1))
		return &f->entries[k];
	return chain_find(f, k + 1, end, want, id);
}

static void fill_from_frozen(const struct mstate *st, rix_blob_type t, const struct fentry *e,
			     rix_packed_blob *out)
{
	out->id = e->id;
	out->pack_id = st->packs[e->loc.pack];
	/* offset, length, uncompressed_length as one 16-byte copy of the location, whose pack
	 * number lands where the type goes and is overwritten (4 moves, not 10 with shuffles). */
	memcpy((char *)out + offsetof(rix_packed_blob, type), &e->loc, sizeof(e->loc));
	out->type = t;
}
_Static_assert(sizeof(rix_blob_type) == 4 && offsetof(rix_packed_blob, offset) == offsetof(rix_packed_blob, type) + 4 &&
		       offsetof(rix_packed_blob, length) == offsetof(rix_packed_blob, type) + 8 &&
		       offsetof(rix_packed_blob, uncompressed_length) == offsetof(rix_packed_blob, type) + 12 &&
		       offsetof(rix_loc, offset) == 4 && offsetof(rix_loc, length) == 8 &&
		       offsetof(rix_loc, uncompressed_length) == 12 && sizeof(rix_loc) == 16,
	       "fill_from_frozen copies the location over type, offset, length, uncompressed_length");

/* Whether (t, id) is in st's dedup-only set of data blobs. */
static inline bool dset_has(const struct mstate *st, rix_blob_type t, const rix_id *id)
{
	return t == RIX_BLOB_DATA && st->dset != NULL && rix_idset_has(st->dset, id);
}

/*
 * A data blob known from the dedup-only set, whose location was asked: *out (may be NULL) gets
 * the blob's ID and type and no location (pack ID zero, offset and lengths 0: a stored blob is
 * never 0 bytes long); the error says why. @return RIX_EINVAL.
 */
static int no_location(rix_packed_blob *out, const rix_id *id)
{
	if (out != NULL) {
		memset(out, 0, sizeof(*out));
		out->id = *id;
		out->type = RIX_BLOB_DATA;
	}
	char hex[65];
	rix_id_to_hex(hex, id);
	return rix_error_set(RIX_EINVAL, "master index: data blob %.16s is known, but a dedup-only index holds "
				     "no data blob locations (load the full index)", hex);
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
	bool in_set = st != seen && dset_has(st, t, id);
	if (in_set && out == NULL)
		return 0;
	for (size_t i = mi->nseparate; i-- > 0;)
		if (rix_index_lookup(out, mi->separate[i], t, id) == 0)
			return 0;
	return in_set ? no_location(out, id) : RIX_ENOTFOUND;
}

/* The rest of a lookup the frozen table did not answer (called inside the read section, which
 * it ends): out of line, so that the frozen table's path stays short. */
static __attribute__((noinline)) int lookup_miss(rix_packed_blob *out, rix_master_index *mi, size_t nsep,
						  const struct mstate *st, rix_blob_type t, const rix_id *id)
{
	/* The set before the recent table when only "is it there?" is asked (the common case of a
	 * backup), after it when a location is: the recent table may hold one. */
	bool in_set = dset_has(st, t, id);
	int recent = !(in_set && out == NULL) && rix__recent_find(mi->recent, t, id, out);
	rix__rcu_read_unlock();
	if (recent || (in_set && out == NULL))
		return 0;
	if (in_set && nsep == 0)
		return no_location(out, id);
	if (nsep == 0)
		return RIX_ENOTFOUND;
	pthread_rwlock_rdlock(&mi->lock);
	/* st is only compared, never dereferenced, once outside the read section. */
	int rc = lookup_locked(mi, st, t, id, out);
	pthread_rwlock_unlock(&mi->lock);
	if (rc == RIX_ENOTFOUND && in_set)
		rc = no_location(out, id);
	return rc;
}

int rix_master_index_lookup(rix_packed_blob *out, rix_master_index *mi, rix_blob_type t,
			    const rix_id *id)
{
	if ((unsigned)t >= RIX_BLOB_TYPES)
		return RIX_ENOTFOUND;
	rix__rcu_read_lock();
	size_t nsep = atomic_load(&mi->nsep); /* before the state: see "Why a lock-free miss is safe" */
	const struct mstate *st = state_of(mi);
	const struct frozen *f = st->frozen[t];
	const struct fentry *e = f != NULL ? frozen_find(f, id, mi->seed) : NULL;
	if (e == NULL) {
		/* Nothing else to ask (no dedup-only set, nothing stored since, no separate index):
		 * the common miss, without the call. */
		if (nsep == 0 && st->dset == NULL && rix__recent_empty(mi->recent)) {
			rix__rcu_read_unlock();
			return RIX_ENOTFOUND;
		}
		return lookup_miss(out, mi, nsep, st, t, id);
	}
	if (out != NULL)
		fill_from_frozen(st, t, e, out);
	rix__rcu_read_unlock();
	return 0;
}

bool rix_master_index_has(rix_master_index *mi, rix_blob_type t, const rix_id *id)
{
	return rix_master_index_lookup(NULL, mi, t, id) == 0;
}

int rix_master_index_size(uint32_t *size, rix_master_index *mi, rix_blob_type t, const rix_id *id)
{
	rix_packed_blob pb;
	int rc = rix_master_index_lookup(&pb, mi, t, id);
	if (rc == 0)
		*size = rix_blob_plain_size(pb.length, pb.uncompressed_length);
	return rc;
}

/* Every entry of id in frozen table f of type t: up to max into out (may be NULL); the count. */
static size_t frozen_find_all_in(const struct mstate *st, const struct frozen *f, rix_blob_type t, uint64_t seed,
				 const rix_id *id, rix_packed_blob *out, size_t max)
{
	uint64_t h = rix__hash_id(id, seed);
	uint32_t b = rix__hash_bucket(h, f->nb);
	uint32_t end = (uint32_t)f->buckets[b + 1];
	size_t n = 0;
	for (uint32_t i = (uint32_t)f->buckets[b]; i < end; i++) {
		if (!rix__id_eq(&f->entries[i].id, id))
			continue;
		if (n < max && out != NULL)
			fill_from_frozen(st, t, &f->entries[i], &out[n]);
		n++;
	}
	return n;
}

/*
 * Every entry of id in st (the dedup-only set counts as one, given as no_location gives it, its
 * error set), then the frozen table's: up to max into out (may be NULL); the count.
 */
static size_t frozen_find_all(const struct mstate *st, rix_blob_type t, uint64_t seed, const rix_id *id,
			      rix_packed_blob *out, size_t max)
{
	const struct frozen *f = st->frozen[t];
	size_t n = 0;
	if (dset_has(st, t, id)) {
		(void)no_location(out != NULL && max > 0 ? out : NULL, id);
		n = 1;
	}
	if (f != NULL)
		n += frozen_find_all_in(st, f, t, seed, id, out != NULL && max > n ? out + n : NULL, max > n ? max - n : 0);
	return n;
}

/*
 * As a lookup: without a lock (frozen table, then recent table, in one RCU read section) unless
 * separate indexes exist; then all of it under the read lock, so that each entry is counted
 * once even if a merge publishes meanwhile.
 */
size_t rix_master_index_lookup_all(rix_packed_blob *out, size_t max, rix_master_index *mi,
				   rix_blob_type t, const rix_id *id)
{
	if ((unsigned)t >= RIX_BLOB_TYPES)
		return 0;
	rix__rcu_read_lock();
	if (atomic_load(&mi->nsep) == 0) { /* nsep before the state: see "Why a lock-free miss is safe" */
		size_t n = frozen_find_all(state_of(mi), t, mi->seed, id, out, max);
		n += rix__recent_find_all(mi->recent, t, id, out ? out + (n < max ? n : 0) : NULL, n < max ? max - n : 0);
		rix__rcu_read_unlock();
		return n;
	}
	rix__rcu_read_unlock();
	pthread_rwlock_rdlock(&mi->lock);
	size_t n = frozen_find_all(state_of(mi), t, mi->seed, id, out, max);
	rix__rcu_read_lock();
	n += rix__recent_find_all(mi->recent, t, id, out ? out + (n < max ? n : 0) : NULL, n < max ? max - n : 0);
	rix__rcu_read_unlock();
	for (size_t i = mi->nseparate; i-- > 0;) {
		size_t room = n < max ? max - n : 0;
		n += rix_index_lookup_all(out ? out + (n < max ? n : 0) : NULL, room, mi->separate[i], t, id);
	}
	pthread_rwlock_unlock(&mi->lock);
	return n;
}

/*
 * Batched frozen lookup in groups of 64: hash all keys and prefetch their bucket words; read
 * words, filter, prefetch the chains' fingerprints; find the first fingerprint that matches and
 * prefetch that entry; compare (the rest of the chain only when it was another ID); prefetch the
 * pack IDs of the hits, then copy them out. Keys the frozen table lacks are asked of the recent table (lock-free), then of the
 * separate indexes under the read lock
 * (taken once, at the first such miss), one by one: there are few separate indexes, and they
 * are small.
 */
size_t rix_master_index_lookup_many(rix_packed_blob *out, bool *found, rix_master_index *mi,
				    rix_blob_type t, const rix_id *ids, size_t n)
{
	enum { GROUP = 64 };
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
	const rix_idset *set = t == RIX_BLOB_DATA ? st->dset : NULL;
	for (size_t base = 0; base < n; base += GROUP) {
		size_t g = n - base < GROUP ? n - base : GROUP;
		uint64_t h[GROUP];
		uint32_t b[GROUP], start[GROUP], end[GROUP];
		const struct fentry *hit[GROUP];
		bool in_set[GROUP];
		/* Keys still in play after each stage, by index: a batch of new blobs (the dedup of a
		 * backup) leaves few past the filter, and the later stages do nothing for the rest. */
		uint8_t live[GROUP];
		size_t nlive = 0;
		memset(hit, 0, g * sizeof(hit[0]));
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
				live[nlive] = (uint8_t)i; /* kept only if the filter says maybe */
				if ((w & fl) == fl) {
					end[i] = (uint32_t)f->buckets[b[i] + 1];
					RIX_PREFETCH(&f->fp[start[i]]);
					nlive++;
				}
			}
			/* The first entry of each chain whose fingerprint matches: its lines only (a
			 * chain the filter let through is not empty). */
			size_t nc = 0;
			for (size_t j = 0; j < nlive; j++) {
				size_t i = live[j];
				uint32_t k = first_fp_match(f, start[i], end[i], rix__hash_fp(h[i]));
				start[i] = k;
				live[nc] = (uint8_t)i;
				if (k < end[i]) {
					RIX_PREFETCH(&f->entries[k]);
					RIX_PREFETCH((const char *)&f->entries[k] + sizeof(struct fentry) - 1);
					nc++;
				}
			}
			for (size_t j = 0; j < nc; j++) {
				size_t i = live[j];
				/* The matching entry, as a rule; else (one in 256 an entry) the chain's rest. */
				const struct fentry *c = &f->entries[start[i]];
				if (__builtin_expect(!rix__id_eq(&c->id, &ids[base + i]), 0))
					c = chain_find(f, start[i] + 1, end[i], rix__hash_fp(h[i]), &ids[base + i]);
				hit[i] = c;
				if (c != NULL && out != NULL)
					RIX_PREFETCH(&st->packs[c->loc.pack]);
			}
		}
		/* Only the frozen table to ask (no dedup-only set, nothing stored since, no separate
		 * index): the answers are the hits. */
		if (set == NULL && nsep == 0 && rix__recent_empty(mi->recent)) {
			for (size_t i = 0; i < g; i++) {
				int ok = hit[i] != NULL;
				if (ok && out != NULL)
					fill_from_frozen(st, t, hit[i], &out[base + i]);
				if (found != NULL)
					found[base + i] = (uint8_t)ok;
				nfound += (size_t)ok;
			}
			continue;
		}
		if (set != NULL && f == NULL) /* the dedup-only case: the set alone, batched */
			(void)rix_idset_has_many(in_set, set, ids + base, g);
		else
			for (size_t i = 0; i < g; i++)
				in_set[i] = set != NULL && hit[i] == NULL && rix_idset_has(set, &ids[base + i]);
		for (size_t i = 0; i < g; i++) {
			int ok = hit[i] != NULL;
			if (ok && out != NULL)
				fill_from_frozen(st, t, hit[i], &out[base + i]);
			if (!ok && in_set[i] && out == NULL)
				ok = 1;
			if (!ok)
				ok = rix__recent_find(mi->recent, t, &ids[base + i], out ? &out[base + i] : NULL);
			if (!ok && in_set[i]) { /* known, at no location held: see no_location */
				(void)no_location(&out[base + i], &ids[base + i]);
				ok = 1;
			}
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
	size_t n = state_of(mi)->npacks + rix__recent_pack_count(mi->recent);
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
	size_t n = (st->frozen[t] ? st->frozen[t]->count : 0) + rix__recent_count(mi->recent, t);
	if (t == RIX_BLOB_DATA)
		n += rix_idset_count(st->dset);
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
	if (rix_idset_count(st->dset) > 0) {
		pthread_rwlock_unlock(&mi->lock);
		return rix_error_set(RIX_EINVAL, "master index: a dedup-only index holds no data blob locations "
						 "to list (load the full index)");
	}
	for (int t = 0; t < RIX_BLOB_TYPES && rc == 0; t++) {
		const struct frozen *f = st->frozen[t];
		for (uint32_t i = 0; f != NULL && i < f->count && rc == 0; i++) {
			rix_packed_blob pb;
			fill_from_frozen(st, (rix_blob_type)t, &f->entries[i], &pb);
			rc = fn(arg, &pb);
		}
	}
	if (rc == 0)
		rc = rix__recent_foreach(mi->recent, fn, arg);
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
		       const rix_id *(*get)(size_t *, const rix_index *), rix_id **out, size_t *n)
{
	size_t total = nbase;
	for (size_t i = 0; i < mi->nseparate; i++) {
		size_t k;
		get(&k, mi->separate[i]);
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
		const rix_id *ids = get(&k, mi->separate[i]);
		if (k)
			memcpy(all + at, ids, k * sizeof(rix_id));
		at += k;
	}
	return sorted_unique(all, total, out, n);
}

static const rix_id *packs_of(size_t *n, const rix_index *idx)
{
	*n = idx->npacks;
	return idx->packs;
}

int rix_master_index_packs(rix_id **out, size_t *n, rix_master_index *mi)
{
	*out = NULL;
	*n = 0;
	pthread_rwlock_rdlock(&mi->lock);
	const struct mstate *st = state_of(mi);
	/* The merged packs, then the recent ones, as the base of the list. */
	size_t nb = st->npacks, cap = st->npacks;
	rix_id *base = rix_malloc((nb ? nb : 1) * sizeof(rix_id));
	int rc = base == NULL ? rix_error_set(RIX_ENOMEM, "master index: out of memory listing packs") : 0;
	if (rc == 0 && nb)
		memcpy(base, st->packs, nb * sizeof(rix_id));
	if (rc == 0)
		rc = rix__recent_packs(mi->recent, &base, &nb, &cap);
	if (rc == 0)
		rc = collect_ids(mi, base, nb, packs_of, out, n);
	pthread_rwlock_unlock(&mi->lock);
	rix_free(base);
	return rc;
}

int rix_master_index_index_ids(rix_id **out, size_t *n, rix_master_index *mi)
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
		m += rix__frozen_memory(st->frozen[t]);
	m += rix_idset_memory(st->dset);
	for (size_t i = 0; i < mi->nseparate; i++)
		m += rix_index_memory(mi->separate[i]);
	pthread_rwlock_unlock(&mi->lock);
	return m + rix__recent_memory(mi->recent);
}

/* ---- Pending blobs -------------------------------------------------------------------------- */

/*
 * The save path's one lookup: the frozen table and the recent table without a lock (the
 * separate indexes, under the read lock, only when there are any), then the reservation in
 * the recent table, which looks again under its mutex (two threads saving the same blob).
 */
int rix_master_index_add_pending(rix_master_index *mi, rix_blob_type t, const rix_id *id)
{
	if ((unsigned)t >= RIX_BLOB_TYPES)
		return rix_error_set(RIX_EINVAL, "master index: blob type %d", (int)t);
	rix__rcu_read_lock();
	size_t nsep = atomic_load(&mi->nsep);
	const struct mstate *st = state_of(mi);
	const struct frozen *f = st->frozen[t];
	int known = (f != NULL && frozen_find(f, id, mi->seed) != NULL) || dset_has(st, t, id) ||
		    rix__recent_find(mi->recent, t, id, NULL);
	rix__rcu_read_unlock();
	if (known)
		return 0;
	if (nsep > 0) {
		pthread_rwlock_rdlock(&mi->lock);
		known = lookup_locked(mi, st, t, id, NULL) == 0;
		pthread_rwlock_unlock(&mi->lock);
		if (known)
			return 0;
	}
	return rix__recent_reserve(mi->recent, t, id);
}

void rix_master_index_remove_pending(rix_master_index *mi, rix_blob_type t, const rix_id *id)
{
	if ((unsigned)t < RIX_BLOB_TYPES)
		rix__recent_unreserve(mi->recent, t, id);
}
