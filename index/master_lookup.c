/*
 * index/master_lookup.c — the master index's lookups: one ID (lookup, has, size), every copy
 * of an ID (lookup_all), a batch of IDs (lookup_many), and the save path's "known, or mark it
 * pending" (add_pending). How readers and writers meet (RCU over the published state, the read
 * lock only for separate indexes) is told atop master_index.c; the ranked table's layout in
 * ranked.h.
 *
 * What a lookup executes is what limits it: a lookup that misses in DRAM waits anyway, and the
 * fewer instructions each one holds in the core's window, the more lookups' misses overlap
 * (bench/RESULTS.md). So a single lookup's common miss (nothing beside the tables, both
 * filters turn the ID down) is answered in line, and everything else goes on out of line.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "rix/error.h"
#include "index_internal.h"
#include "master_index_internal.h"
#include "ranked.h"
#include "rcu.h"

/* Whether (t, id) is in st's dedup-only set of data blobs. */
static inline bool dset_has(const struct mstate *st, rix_blob_type t, const rix_id *id)
{
	return t == RIX_BLOB_DATA && st->dset != NULL && rix_idset_has(st->dset, id);
}

/* Whether id is in st's tables of type t (the table first: see struct mstate); *loc its first
 * location when it is. */
static inline bool tables_find(const struct mstate *st, rix_blob_type t, const rix_id *id, rix_loc *loc)
{
	return rix__ranked_find(st->table[t], id, loc) || rix__ranked_find(st->top[t], id, loc);
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
 * The slow half of a lookup: under the read lock, the tables (again, only if a merge published
 * new ones since `seen`) and then the separate indexes, newest first.
 */
static int lookup_locked(rix_master_index *mi, const struct mstate *seen, rix_blob_type t,
			 const rix_id *id, rix_packed_blob *out)
{
	const struct mstate *st = rix__mstate_of(mi);
	rix_loc loc;
	if (st != seen && tables_find(st, t, id, &loc)) {
		if (out != NULL)
			rix__mstate_fill(st, t, id, &loc, out);
		return 0;
	}
	bool in_set = st != seen && dset_has(st, t, id);
	if (in_set && out == NULL)
		return 0;
	for (size_t i = mi->nseparate; i-- > 0;)
		if (rix_index_lookup(out, mi->separate[i], t, id) == 0)
			return 0;
	return in_set ? no_location(out, id) : RIX_ENOTFOUND;
}

/* The rest of a lookup the table did not answer (called inside the read section, which it
 * ends): out of line, so that the table's path stays short. */
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

/*
 * A lookup inside the read section, which it ends: the tables, then everything they do not
 * answer (lookup_miss). in_table: the caller found that st->table[t]'s filter passes id, so its
 * set is asked without it (exact for any ID: a merge since may have published another table).
 * The count and the state are read again, in the same order, within the same section.
 */
static __attribute__((noinline)) int lookup_in(rix_packed_blob *out, rix_master_index *mi, rix_blob_type t,
						const rix_id *id, bool in_table)
{
	size_t nsep = atomic_load(&mi->nsep); /* before the state: see "Why a lock-free miss is safe" */
	const struct mstate *st = rix__mstate_of(mi);
	const struct rix__ranked *table = st->table[t];
	rix_loc loc;
	bool found = in_table && table != NULL ? rix__ranked_find_passed(table, id, &loc)
					       : rix__ranked_find(table, id, &loc);
	if (!found && !rix__ranked_find(st->top[t], id, &loc))
		return lookup_miss(out, mi, nsep, st, t, id);
	if (out != NULL)
		rix__mstate_fill(st, t, id, &loc, out);
	rix__rcu_read_unlock();
	return 0;
}

/* A lookup whose read section the leaf below cannot take (rix__rcu_read_lock_leaf). */
static __attribute__((noinline)) int lookup_locking(rix_packed_blob *out, rix_master_index *mi, rix_blob_type t,
						     const rix_id *id)
{
	rix__rcu_read_lock();
	return lookup_in(out, mi, t, id, false);
}

/*
 * The common miss is a leaf: the read section's fast path, the two filters in line, and the
 * answer, with no call, so that none of the six callee-saved registers a call kept live is
 * saved (GCC 12 still saves two around the filters, for want of others: 92 -> 57 instructions,
 * 57 -> 32 registers written, bench/RESULTS.md); everything else goes on in one of the
 * functions above, called last.
 */
int rix_master_index_lookup(rix_packed_blob *out, rix_master_index *mi, rix_blob_type t,
			    const rix_id *id)
{
	if ((unsigned)t >= RIX_BLOB_TYPES)
		return RIX_ENOTFOUND;
	if (!rix__rcu_read_lock_leaf())
		return lookup_locking(out, mi, t, id);
	size_t nsep = atomic_load(&mi->nsep); /* before the state: see "Why a lock-free miss is safe" */
	const struct mstate *st = rix__mstate_of(mi);
	/* Something beside the tables to ask (a separate index, a dedup-only set, blobs stored
	 * since): the tables' "no" would not be the answer. */
	if (nsep != 0 || st->dset != NULL || !rix__recent_empty(mi->recent))
		return lookup_in(out, mi, t, id, false);
	bool in_table = rix__ranked_maybe(st->table[t], id);
	if (in_table || rix__ranked_maybe(st->top[t], id))
		return lookup_in(out, mi, t, id, in_table);
	rix__rcu_read_unlock_leaf();
	return RIX_ENOTFOUND;
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

/* The locations of id in st's tables of type t from its skip-th on (the table's, then the
 * top's: pack order), up to cap into out. @return how many it has in all. */
static size_t tables_find_all(const struct mstate *st, rix_blob_type t, const rix_id *id, size_t skip, rix_loc *out,
			      size_t cap)
{
	size_t n0 = rix__ranked_find_all(st->table[t], id, skip, out, cap);
	if (st->top[t] == NULL)
		return n0;
	size_t got = n0 > skip ? (n0 - skip < cap ? n0 - skip : cap) : 0;
	return n0 + rix__ranked_find_all(st->top[t], id, skip > n0 ? skip - n0 : 0, out + got, cap - got);
}

/*
 * Every entry of id in st (the dedup-only set counts as one, given as no_location gives it, its
 * error set), then the tables': up to max into out (may be NULL); the count.
 */
static size_t table_find_all(const struct mstate *st, rix_blob_type t, const rix_id *id, rix_packed_blob *out,
			     size_t max)
{
	enum { CHUNK = 16 };
	size_t n = 0;
	if (dset_has(st, t, id)) {
		(void)no_location(out != NULL && max > 0 ? out : NULL, id);
		n = 1;
	}
	rix_loc loc[CHUNK];
	size_t room = out != NULL && max > n ? max - n : 0;
	size_t k = tables_find_all(st, t, id, 0, loc, room < CHUNK ? room : CHUNK);
	for (size_t i = 0; i < k && i < room; i++) {
		if (i > 0 && i % CHUNK == 0) /* a blob in more than CHUNK packs: the next ones */
			(void)tables_find_all(st, t, id, i, loc, room - i < CHUNK ? room - i : CHUNK);
		rix__mstate_fill(st, t, id, &loc[i % CHUNK], &out[n + i]);
	}
	return n + k;
}

/*
 * As a lookup: without a lock (the table, then the recent table, in one RCU read section) unless
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
		size_t n = table_find_all(rix__mstate_of(mi), t, id, out, max);
		n += rix__recent_find_all(mi->recent, t, id, out ? out + (n < max ? n : 0) : NULL, n < max ? max - n : 0);
		rix__rcu_read_unlock();
		return n;
	}
	rix__rcu_read_unlock();
	pthread_rwlock_rdlock(&mi->lock);
	size_t n = table_find_all(rix__mstate_of(mi), t, id, out, max);
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

/* The keys of ids[0..g) without a hit asked of the top (batched too), their hits and locations
 * set. g <= 256. */
static void top_find_many(const struct rix__ranked *top, const rix_id *ids, size_t g, rix_loc *loc, bool *hit)
{
	rix_id miss[256];
	uint16_t at[256];
	rix_loc l2[256];
	bool h2[256];
	size_t m = 0;
	for (size_t i = 0; i < g; i++) {
		at[m] = (uint16_t)i;
		miss[m] = ids[i];
		m += !hit[i];
	}
	if (m == 0 || rix__ranked_find_many(top, miss, m, l2, h2) == 0)
		return;
	for (size_t j = 0; j < m; j++)
		if (h2[j]) {
			hit[at[j]] = true;
			loc[at[j]] = l2[j];
		}
}

/*
 * Batched: the table answers a group of 256 keys at once (rix__ranked_find_many: the loads of
 * many keys issued before they are used), its top the keys it lacks (batched too), the hits'
 * pack IDs are prefetched, then copied out. Keys the tables lack are asked of the recent table (lock-free), then of the separate indexes
 * under the read lock (taken once, at the first such miss), one by one: there are few separate
 * indexes, and they are small.
 */
size_t rix_master_index_lookup_many(rix_packed_blob *out, bool *found, rix_master_index *mi,
				    rix_blob_type t, const rix_id *ids, size_t n)
{
	enum { GROUP = 256 }; /* rix__ranked_find_many's round: its pipeline filled once a group */
	if ((unsigned)t >= RIX_BLOB_TYPES) {
		if (found)
			memset(found, 0, n);
		return 0;
	}
	size_t nfound = 0;
	int locked = 0;
	rix__rcu_read_lock();
	size_t nsep = atomic_load(&mi->nsep);
	const struct mstate *st = rix__mstate_of(mi);
	const struct rix__ranked *tab = st->table[t], *top = st->top[t];
	const rix_idset *set = t == RIX_BLOB_DATA ? st->dset : NULL;
	for (size_t base = 0; base < n; base += GROUP) {
		size_t g = n - base < GROUP ? n - base : GROUP;
		rix_loc loc[GROUP];
		bool hit[GROUP], in_set[GROUP];
		size_t nhit = 0;
		if (tab != NULL)
			nhit = rix__ranked_find_many(tab, ids + base, g, loc, hit); /* sets every hit[i] */
		else
			memset(hit, 0, sizeof(hit));
		if (top != NULL && nhit < g)
			top_find_many(top, ids + base, g, loc, hit);
		if (out != NULL)
			for (size_t i = 0; i < g; i++)
				if (hit[i])
					rix__mstate_prefetch_pack(st, loc[i].pack);
		/* Only the table to ask (no dedup-only set, nothing stored since, no separate index):
		 * the answers are the hits. */
		if (set == NULL && nsep == 0 && rix__recent_empty(mi->recent)) {
			for (size_t i = 0; i < g; i++) {
				int ok = hit[i];
				if (ok && out != NULL)
					rix__mstate_fill(st, t, &ids[base + i], &loc[i], &out[base + i]);
				if (found != NULL)
					found[base + i] = (uint8_t)ok;
				nfound += (size_t)ok;
			}
			continue;
		}
		if (set != NULL && tab == NULL) /* the dedup-only case: the set alone, batched */
			(void)rix_idset_has_many(in_set, set, ids + base, g);
		else
			for (size_t i = 0; i < g; i++)
				in_set[i] = set != NULL && !hit[i] && rix_idset_has(set, &ids[base + i]);
		for (size_t i = 0; i < g; i++) {
			int ok = hit[i];
			if (ok && out != NULL)
				rix__mstate_fill(st, t, &ids[base + i], &loc[i], &out[base + i]);
			if (!ok && in_set[i] && out == NULL)
				ok = 1;
			if (!ok)
				ok = rix__recent_find(mi->recent, t, &ids[base + i], out ? &out[base + i] : NULL);
			/* A set member asked for its location: the separate indexes may hold one (as the
			 * single lookup asks them, lookup_miss), else it is known at no location. */
			if (!ok && nsep > 0) {
				/* Read lock inside the read section is safe: writers never hold
				 * the write lock while they wait for RCU readers. */
				if (!locked) {
					pthread_rwlock_rdlock(&mi->lock);
					locked = 1;
				}
				ok = lookup_locked(mi, st, t, &ids[base + i], out ? &out[base + i] : NULL) == 0;
			}
			if (!ok && in_set[i]) { /* known, at no location held: see no_location */
				(void)no_location(&out[base + i], &ids[base + i]);
				ok = 1;
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

/* ---- Pending blobs -------------------------------------------------------------------------- */

/*
 * The save path's one lookup: the table and the recent table without a lock (the
 * separate indexes, under the read lock, only when there are any), then the reservation in
 * the recent table, which looks again under its mutex (two threads saving the same blob).
 */
int rix_master_index_add_pending(rix_master_index *mi, rix_blob_type t, const rix_id *id)
{
	if ((unsigned)t >= RIX_BLOB_TYPES)
		return rix_error_set(RIX_EINVAL, "master index: blob type %d", (int)t);
	rix__rcu_read_lock();
	size_t nsep = atomic_load(&mi->nsep);
	const struct mstate *st = rix__mstate_of(mi);
	rix_loc loc;
	int known = tables_find(st, t, id, &loc) || dset_has(st, t, id) ||
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
