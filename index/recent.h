/*
 * index/recent.h — private to index/: the blobs a process is storing or has stored since the
 * repository was opened, in one table (see recent.c for the layout and the reasoning).
 *
 * Every blob saved goes through three states here:
 *
 *   reserve ──> PENDING ──store_pack──> STORED (a location; deduplicates, answers lookups)
 *                  └──────unreserve───> gone  (its pack could not be written)
 *
 * and every stored pack is "unindexed" until an index file names it (take_unindexed builds
 * that index file's content; mark_indexed records that it was written).
 *
 * Readers (find, find_all) take no lock: the caller is inside an RCU read section (rcu.h).
 * Writers (reserve, unreserve, store_pack, mark_indexed) serialize on the table's mutex.
 */
#ifndef RIX_INDEX_RECENT_H
#define RIX_INDEX_RECENT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rix/index.h"
#include "rix/types.h"

struct rix__recent;
/* The first member of struct rix__recent: the packs stored so far, read by rix__recent_find
 * inline so that a lookup outside a backup (none stored) costs a load, not a call. */
struct rix__recent_head {
	atomic_uint npacks;
};

/* @return 0, RIX_ENOMEM. */
int rix__recent_new(struct rix__recent **out, uint64_t seed);
/* NULL-safe. No reader may be inside a read section on it. */
void rix__recent_free(struct rix__recent *re);

/*
 * A stored blob (t, id): its location, pack ID included, into *out (may be NULL). Lock-free:
 * call inside an RCU read section. @return 1 found, 0 not (pending blobs are not found).
 */
int rix__recent_find_stored(const struct rix__recent *re, rix_blob_type t, const rix_id *id, rix_packed_blob *out);
/* Whether nothing was stored yet (a read section's snapshot: a pack may be stored meanwhile). */
static inline bool rix__recent_empty(const struct rix__recent *re)
{
	const struct rix__recent_head *h = (const struct rix__recent_head *)(const void *)re;
	return atomic_load_explicit(&h->npacks, memory_order_acquire) == 0;
}

static inline int rix__recent_find(const struct rix__recent *re, rix_blob_type t, const rix_id *id,
				   rix_packed_blob *out)
{
	if (rix__recent_empty(re))
		return 0; /* nothing stored yet: the common case before the first pack */
	return rix__recent_find_stored(re, t, id, out);
}
/* Every stored location of (t, id), up to max into out (may be NULL); the total. Read section. */
size_t rix__recent_find_all(const struct rix__recent *re, rix_blob_type t, const rix_id *id,
			    rix_packed_blob *out, size_t max);

/*
 * Marks (t, id) pending unless it is here already (pending or stored).
 * @return 1 (the caller stores it), 0 (here already), RIX_ENOMEM.
 */
int rix__recent_reserve(struct rix__recent *re, rix_blob_type t, const rix_id *id);
/* Forgets a pending (t, id) (its pack was not written); stored blobs are kept. */
void rix__recent_unreserve(struct rix__recent *re, rix_blob_type t, const rix_id *id);

/*
 * Pack pack_id, stored, holds blobs[0..n): each becomes stored there (a pending entry is
 * completed; a blob not pending gets an entry of its own, so a duplicate keeps both).
 * @return 0, RIX_ENOMEM, RIX_ELIMIT (over RIX__RECENT_MAX_PACKS packs or 2^30 blobs).
 */
int rix__recent_store_pack(struct rix__recent *re, const rix_id *pack_id, const rix_blob *blobs, size_t n);

/* Stored blobs whose packs no index file names yet. */
size_t rix__recent_unindexed(struct rix__recent *re);
/*
 * The content of an index file for every pack stored and not yet indexed: *out (an unfinished
 * rix_index, the caller's; NULL when there is none), and *upto, to pass to mark_indexed once
 * the file is written. @return 0, RIX_ENOMEM.
 */
int rix__recent_take_unindexed(struct rix__recent *re, rix_index **out, uint32_t *upto);
/* The packs take_unindexed gave with upto are named by an index file now. */
void rix__recent_mark_indexed(struct rix__recent *re, uint32_t upto);

/* Stored entries of type t (duplicates counted); stored packs; bytes held. */
size_t rix__recent_count(struct rix__recent *re, rix_blob_type t);
size_t rix__recent_pack_count(struct rix__recent *re);
size_t rix__recent_memory(struct rix__recent *re);
/* fn for every stored entry; stops on nonzero, which it returns. */
int rix__recent_foreach(struct rix__recent *re, rix_index_blob_fn fn, void *arg);
/* The stored packs' IDs appended to *v (grown with rix_realloc; *n, *cap updated). @return 0, RIX_ENOMEM. */
int rix__recent_packs(struct rix__recent *re, rix_id **v, size_t *n, size_t *cap);

/* Packs one table can hold: 2^14 chunks of 2^12 pack IDs (67M packs, a petabyte at 16 MiB). */
#define RIX__RECENT_PACK_CHUNK_BITS 12
#define RIX__RECENT_PACK_CHUNKS ((size_t)1 << 14)
#define RIX__RECENT_MAX_PACKS (RIX__RECENT_PACK_CHUNKS << RIX__RECENT_PACK_CHUNK_BITS)

#endif
