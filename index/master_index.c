/*
 * index/master_index.c — all indexes of a repository, merged: create/free, adding indexes, the
 * merge, counts and listings. The lookups are in master_lookup.c, the ranked table in ranked.c
 * (ranked.h), the blobs stored since opening in recent.c, bulk loading in bulk_load.c; the
 * struct they share is in master_index_internal.h.
 *
 * State
 * -----
 *   table[type]    one read-only ranked table per blob type holding the merged entries (about
 *                  42 bytes an entry: a rix_idset of the IDs, each location packed beside its
 *                  ID's stored bits, a filter of a byte an ID; ranked.h)
 *   top[type]      entries merged since that table was built, while they are few (at most
 *                  1/RIX__TOP_SHARE of it): a second, small ranked table, so that adding them
 *                  builds only it again (see struct mstate)
 *   dset           dedup-only (set before a bulk load): the bulk-loaded data blobs as a rix_idset,
 *                  IDs only; a data blob found there is known, its location is not (see
 *                  no_location). Shared by states like a table, carried over by merges
 *   packs[]        global pack table; the tables' rix_loc.pack numbers point here
 *   separate[]     indexes added and not merged: unfinished ones, and final ones added since the
 *                  last merge; each keeps its own pack table (a repository loads its index in
 *                  bulk, so there are none in a backup)
 *   recent         the blobs this process is storing or has stored (recent.c): pending ones,
 *                  stored ones with their locations and packs, and which packs no index file
 *                  names yet. One entry per blob, read without a lock
 *
 * A table a merge does not change is carried over to the new state as it is (the states share
 * it; it is freed with the last state holding it). A merge that adds entries of a type builds
 * that type's top again from the old top's entries and the final indexes waiting, or, when they
 * would pass the top's share, the table from all of them (a ranked table is immutable: no
 * insertion in place), with a new global pack table, while holding only the writers' mutex. Readers go on using the old state; the write lock is taken just to swap
 * pointers. Then the old tables and the merged indexes are freed. (A repository's index is
 * loaded in bulk, bulk_load.c, in one build; merges are for indexes added one by one.)
 *
 * Readers and writers
 * -------------------
 * The tables and the global pack table form one immutable `struct mstate`, published
 * through an atomic pointer. A lookup reads it inside an RCU read section (rcu.h: two plain
 * stores, no lock), which answers every ID found in the tables; a miss asks the recent
 * table in the same read section, also without a lock. Only a miss while separate indexes
 * exist takes the rwlock `lock` and asks them (and the tables again,
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
#include "entry_collect.h"
#include "index_internal.h"
#include "master_index_internal.h"
#include "ranked.h"
#include "rcu.h"

/* ---- Create / free ------------------------------------------------------------------------ */

void rix__mstate_free(struct mstate *st)
{
	if (st == NULL)
		return;
	for (int t = 0; t < RIX_BLOB_TYPES; t++) {
		rix__ranked_free(st->table[t]);
		rix__ranked_free(st->top[t]);
	}
	rix_idset_free(st->dset);
	rix_free(st->packs);
	rix_free(st);
}

/* The published state. Readers call this inside an RCU read section or under `lock`. */

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
	for (int t = 0; from != NULL && keep != NULL && t < RIX_BLOB_TYPES; t++) {
		if (from->table[t] == keep->table[t])
			from->table[t] = NULL;
		if (from->top[t] == keep->top[t])
			from->top[t] = NULL;
	}
	if (from != NULL && keep != NULL && from->dset == keep->dset)
		from->dset = NULL;
}

int rix__mstate_add(struct mstate *next, rix_blob_type t, struct rix__ranked *table, struct rix__ranked *top,
		    bool own, struct rix__ecollect *add, const rix_id *packs, unsigned workers, bool *rebuilt)
{
	size_t nbase = rix__ranked_count(table), ntop = rix__ranked_count(top), nadd = rix__ecollect_count(add);
	if (rebuilt != NULL)
		*rebuilt = false;
	if (nadd == 0) { /* nothing new: both carried over */
		rix__ecollect_free(add);
		next->table[t] = table;
		next->top[t] = top;
		return 0;
	}
	if (packs == NULL && nbase > 0 && ntop + nadd <= nbase / RIX__TOP_SHARE) {
		next->table[t] = table;
		return rix__ranked_merge_owned(&next->top[t], top, NULL, own, add, NULL, workers);
	}
	next->top[t] = NULL;
	if (rebuilt != NULL)
		*rebuilt = table != NULL;
	return rix__ranked_merge_owned(&next->table[t], table, top, own, add, packs, workers);
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

/* The entries of the merged indexes' maps of type t, their pack numbers made global (the first
 * merged index's packs from base): a new collection (*out NULL when there are none). */
static int collect_maps(struct rix__ecollect **out, rix_index *const *merged, size_t nmerge, rix_blob_type t,
			uint32_t base)
{
	*out = NULL;
	size_t total = 0;
	for (size_t k = 0; k < nmerge; k++)
		if (merged[k]->maps[t] != NULL)
			total += rix_indexmap_count(merged[k]->maps[t]);
	if (total == 0)
		return 0;
	struct rix__ecollect *c;
	struct fentry e[64];
	int rc = rix__ecollect_new(&c);
	if (rc == 0 && total >= 65536) /* (a few: each part's first mapping holds them) */
		rc = rix__ecollect_reserve(c, total);
	for (size_t k = 0; k < nmerge && rc == 0; k++) {
		const rix_indexmap *m = merged[k]->maps[t];
		size_t cnt = m != NULL ? rix_indexmap_count(m) : 0, at = 0;
		for (size_t i = 0; i < cnt && rc == 0; i++) {
			const rix_id *id;
			rix_indexmap_entry(&id, &e[at].loc, m, (uint32_t)i);
			e[at++].id = *id;
			if (at == 64 || i + 1 == cnt) {
				rc = rix__ecollect_add(c, e, at, base);
				at = 0;
			}
		}
		base += merged[k]->npacks;
	}
	if (rc != 0) {
		rix__ecollect_free(c);
		return rc;
	}
	*out = c;
	return 0;
}

int rix_master_index_merge(rix_master_index *mi)
{
	pthread_mutex_lock(&mi->wmu);
	struct mstate *cur = atomic_load(&mi->state); /* only writers change it; we hold wmu */
	int rc = 0;
	size_t nmerge = 0;
	rix_index **merged = rix_malloc((mi->nseparate ? mi->nseparate : 1) * sizeof(*merged));
	struct mstate *next = rix_calloc(1, sizeof(*next));
	rix_id *nids = NULL;
	if (merged == NULL || next == NULL) {
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
	next->dset = cur->dset; /* carried over: merged indexes' data blobs go to the ranked table */
	if (cur->npacks)
		memcpy(next->packs, cur->packs, (size_t)cur->npacks * sizeof(rix_id));
	if (mi->nindex_ids)
		memcpy(nids, mi->index_ids, mi->nindex_ids * sizeof(rix_id));
	for (int t = 0; t < RIX_BLOB_TYPES; t++) {
		struct rix__ecollect *add;
		rc = collect_maps(&add, merged, nmerge, (rix_blob_type)t, cur->npacks);
		if (rc != 0)
			goto done;
		rc = rix__mstate_add(next, (rix_blob_type)t, cur->table[t], cur->top[t], false, add, NULL, mi->workers,
				     NULL);
		if (rc != 0)
			goto done;
	}
	uint32_t base = cur->npacks;
	size_t idn = mi->nindex_ids;
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
	rix_free(merged);
	pthread_mutex_unlock(&mi->wmu);
	return rc;
}

int rix__packs_repeat(const rix_id *packs, uint32_t n)
{
	if (n < 2)
		return 0;
	uint32_t cap = 1024;
	while (cap < 2 * (uint64_t)n)
		cap *= 2;
	uint32_t *slot = rix_malloc((size_t)cap * sizeof(*slot)); /* pack number + 1; 0: empty */
	if (slot == NULL)
		return -1;
	memset(slot, 0, (size_t)cap * sizeof(*slot));
	int repeat = 0;
	for (uint32_t i = 0; i < n && !repeat; i++) {
		uint64_t h;
		memcpy(&h, packs[i].b, sizeof(h)); /* pack IDs are SHA-256 sums: their bits are spread */
		uint32_t j = (uint32_t)h & (cap - 1);
		while (slot[j] != 0 && !(repeat = rix__id_eq(&packs[slot[j] - 1], &packs[i])))
			j = (j + 1) & (cap - 1);
		slot[j] = i + 1;
	}
	rix_free(slot);
	return repeat;
}

size_t rix_master_index_pack_count(rix_master_index *mi)
{
	pthread_rwlock_rdlock(&mi->lock);
	size_t n = rix__mstate_of(mi)->npacks + rix__recent_pack_count(mi->recent);
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
	const struct mstate *st = rix__mstate_of(mi);
	size_t n = (size_t)rix__ranked_count(st->table[t]) + rix__ranked_count(st->top[t]) +
		   rix__recent_count(mi->recent, t);
	if (t == RIX_BLOB_DATA)
		n += rix_idset_count(st->dset);
	for (size_t i = 0; i < mi->nseparate; i++)
		n += rix_index_count(mi->separate[i], t);
	pthread_rwlock_unlock(&mi->lock);
	return n;
}

/* The table's walk in rounds: each round's pack IDs are requested before the first is read
 * (ID order is no pack order: each a miss in the pack table, otherwise one after another), then
 * the answers are handed to fn in the walk's order. */
struct each {
	const struct mstate *st;
	rix_blob_type t;
	rix_index_blob_fn fn;
	void *arg;
};

static int each_round(void *payload, const rix_id *ids, const rix_loc *locs, size_t n)
{
	const struct each *e = payload;
	for (size_t i = 0; i < n; i++)
		rix__mstate_prefetch_pack(e->st, locs[i].pack);
	int rc = 0;
	for (size_t i = 0; i < n && rc == 0; i++) {
		rix_packed_blob pb;
		rix__mstate_fill(e->st, e->t, &ids[i], &locs[i], &pb);
		rc = e->fn(e->arg, &pb);
	}
	return rc;
}

int rix_master_index_foreach(rix_master_index *mi, rix_index_blob_fn fn, void *arg)
{
	int rc = 0;
	pthread_rwlock_rdlock(&mi->lock);
	const struct mstate *st = rix__mstate_of(mi);
	if (rix_idset_count(st->dset) > 0) {
		pthread_rwlock_unlock(&mi->lock);
		return rix_error_set(RIX_EINVAL, "master index: a dedup-only index holds no data blob locations "
						 "to list (load the full index)");
	}
	for (int t = 0; t < RIX_BLOB_TYPES && rc == 0; t++) {
		struct each e = { st, (rix_blob_type)t, fn, arg };
		rc = rix__ranked_foreach_round(st->table[t], each_round, &e);
		if (rc == 0)
			rc = rix__ranked_foreach_round(st->top[t], each_round, &e);
	}
	if (rc == 0)
		rc = rix__recent_foreach(mi->recent, fn, arg);
	for (size_t i = 0; i < mi->nseparate && rc == 0; i++)
		rc = rix_index_foreach(mi->separate[i], fn, arg);
	pthread_rwlock_unlock(&mi->lock);
	return rc;
}

static int add_totals(void *arg, const rix_packed_blob *pb)
{
	rix_index_totals *t = arg;
	t->count[pb->type]++;
	t->stored[pb->type] += pb->length;
	t->plain[pb->type] += rix_blob_plain_size(pb->length, pb->uncompressed_length);
	return 0;
}

int rix_master_index_totals(rix_master_index *mi, rix_index_totals *out)
{
	memset(out, 0, sizeof(*out));
	pthread_rwlock_rdlock(&mi->lock);
	const struct mstate *st = rix__mstate_of(mi);
	if (rix_idset_count(st->dset) > 0) {
		pthread_rwlock_unlock(&mi->lock);
		return rix_error_set(RIX_EINVAL, "master index: a dedup-only index holds no data blob sizes "
						 "to add up (load the full index)");
	}
	for (int t = 0; t < RIX_BLOB_TYPES; t++) {
		rix__ranked_totals(st->table[t], &out->count[t], &out->stored[t], &out->plain[t]);
		rix__ranked_totals(st->top[t], &out->count[t], &out->stored[t], &out->plain[t]);
	}
	/* The few entries beside the tables, as foreach lists them (add_totals never stops it). */
	(void)rix__recent_foreach(mi->recent, add_totals, out);
	for (size_t i = 0; i < mi->nseparate; i++)
		(void)rix_index_foreach(mi->separate[i], add_totals, out);
	pthread_rwlock_unlock(&mi->lock);
	return 0;
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
	const struct mstate *st = rix__mstate_of(mi);
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
	const struct mstate *st = rix__mstate_of(mi);
	size_t m = sizeof(*mi) + sizeof(*st) + (size_t)st->npacks * sizeof(rix_id) +
		   mi->separate_cap * sizeof(rix_index *) + mi->nindex_ids * sizeof(rix_id);
	for (int t = 0; t < RIX_BLOB_TYPES; t++)
		m += rix__ranked_memory(st->table[t]) + rix__ranked_memory(st->top[t]);
	m += rix_idset_memory(st->dset);
	for (size_t i = 0; i < mi->nseparate; i++)
		m += rix_index_memory(mi->separate[i]);
	pthread_rwlock_unlock(&mi->lock);
	return m + rix__recent_memory(mi->recent);
}
