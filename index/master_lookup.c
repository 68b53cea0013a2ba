/*
 * index/master_lookup.c — the master index's lookups: one ID (lookup, has, size), every copy
 * of an ID (lookup_all), a batch of IDs (lookup_many), and the save path's "known, or mark it
 * pending" (add_pending). How readers and writers meet (RCU over the published state, the read
 * lock only for separate indexes) is told atop master_index.c; the frozen table's layout in
 * frozen.c.
 *
 * What a lookup executes is what limits it: a lookup that misses in DRAM waits anyway, and the
 * fewer instructions each one holds in the core's window, the more lookups' misses overlap
 * (bench/RESULTS.md). So the frozen table's path is inline and branch-light, and everything it
 * does not answer goes on out of line.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "rix/error.h"
#include "index_internal.h"
#include "master_index_internal.h"
#include "rcu.h"

/*
 * The frozen table's lookup (the layout is described in frozen.c). Kept here, static, beside
 * the lookups that call it, so that the compiler inlines it into each.
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
	const struct mstate *st = rix__mstate_of(mi);
	if (st != seen && st->frozen[t] != NULL) {
		const struct fentry *e = frozen_find(st->frozen[t], id, mi->seed);
		if (e != NULL) {
			if (out != NULL)
				rix__mstate_fill(st, t, e, out);
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
	const struct mstate *st = rix__mstate_of(mi);
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
		rix__mstate_fill(st, t, e, out);
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
			rix__mstate_fill(st, t, &f->entries[i], &out[n]);
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
		size_t n = frozen_find_all(rix__mstate_of(mi), t, mi->seed, id, out, max);
		n += rix__recent_find_all(mi->recent, t, id, out ? out + (n < max ? n : 0) : NULL, n < max ? max - n : 0);
		rix__rcu_read_unlock();
		return n;
	}
	rix__rcu_read_unlock();
	pthread_rwlock_rdlock(&mi->lock);
	size_t n = frozen_find_all(rix__mstate_of(mi), t, mi->seed, id, out, max);
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
	const struct mstate *st = rix__mstate_of(mi);
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
					rix__mstate_fill(st, t, hit[i], &out[base + i]);
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
				rix__mstate_fill(st, t, hit[i], &out[base + i]);
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
	const struct mstate *st = rix__mstate_of(mi);
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
