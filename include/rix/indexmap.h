/*
 * rix/indexmap.h — a hash table from blob ID to location (rix_loc).
 *
 * The building block of every in-memory index. Entries (ID + location, 48 bytes) are allocated
 * a batch at a time and numbered in insertion order (past 12 MiB of entries the batches are
 * carved from 12 MiB chunks advised for huge pages, so that a random entry seldom needs a page
 * walk); the table's buckets are 64-byte lines of
 * 12 slots, each an entry number and a one-byte tag of its ID's hash, so a lookup reads a line
 * and then only the entry whose tag matches (a full line overflows into the next). The hash
 * (two 128-bit multiplications over the ID's words) takes a random seed per table, so crafted
 * IDs cannot flood one line.
 * Duplicates are allowed (a lookup returns the most recently added match; lookup_all returns
 * every match, newest first); entries are never deleted.
 *
 * Thread-safety: any number of concurrent readers, or one writer, never both (the caller
 * locks). Lookups never write to the table.
 *
 * API families: create/free/reserve; add, add_many (batched, prefetching); lookup, lookup_all,
 * lookup_many (batched, prefetching); count/memory; iteration in insertion order (callback or by
 * entry number).
 */
#ifndef RIX_INDEXMAP_H
#define RIX_INDEXMAP_H

#include "rix/common.h"

#include <stdbool.h>
#include "rix/types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rix_indexmap rix_indexmap;

/* The largest number of entries one table holds. */
#define RIX_INDEXMAP_MAX_ENTRIES 0xFFFFFFFEu

/*
 * Creates an empty table. Entries are allocated a batch at a time (the default batch; block 0
 * grows up to it, so a small table stays small). The seed is random (libc getrandom).
 * *out belongs to the caller, freed with rix_indexmap_free.
 * @return 0, RIX_ENOMEM.
 */
RIX_EXPORT RIX_NODISCARD int rix_indexmap_new(rix_indexmap **out);

#ifdef RIX_ADVANCED /* tuning, reproducible tables (rix/common.h) */
/* Default entries per allocation batch (chosen by bench/RESULTS.md's sweep). */
#define RIX_INDEXMAP_DEFAULT_BATCH 1024u
/*
 * As rix_indexmap_new with batch entries per allocation block (0: the default; rounded up to a
 * power of two, at most 2^20). @return 0, RIX_ENOMEM.
 */
RIX_EXPORT RIX_NODISCARD int rix_indexmap_new_batch(rix_indexmap **out, uint32_t batch);
/* As rix_indexmap_new_batch with a fixed hash seed (tests and reproducible benchmarks). @return 0, RIX_ENOMEM. */
RIX_EXPORT RIX_NODISCARD int rix_indexmap_new_seeded(rix_indexmap **out, uint32_t batch, uint64_t seed);
#endif /* RIX_ADVANCED */

/* Frees the table. NULL-safe. */
RIX_EXPORT void rix_indexmap_free(rix_indexmap *m);

/*
 * Makes room for n entries in total so that adding up to n entries allocates nothing more
 * (except adding an ID the table already holds: the record of its older copy).
 * @return 0, RIX_ENOMEM (table unchanged), RIX_ELIMIT.
 */
RIX_EXPORT RIX_NODISCARD int rix_indexmap_reserve(rix_indexmap *m, size_t n);

/*
 * Adds an entry (duplicates allowed). On failure the table answers every lookup as before.
 * @return 0, RIX_ENOMEM, RIX_ELIMIT (RIX_INDEXMAP_MAX_ENTRIES entries, or 2^30 older copies).
 */
RIX_EXPORT RIX_NODISCARD int rix_indexmap_add(rix_indexmap *m, const rix_id *id, const rix_loc *loc);

/*
 * Adds n entries, ids[i] with locs[i], as n calls of rix_indexmap_add in order would: the same
 * table, the same answers. Faster for many entries at once (an index file's, a pack's): the
 * table's lines of several keys are requested before the first is placed, so their cache misses
 * overlap. On failure the entries before the failing one are added (the count grew by their
 * number: rix_indexmap_count) and the table answers as after those adds.
 * @return 0, or the failing add's RIX_ENOMEM or RIX_ELIMIT.
 */
RIX_EXPORT RIX_NODISCARD int rix_indexmap_add_many(rix_indexmap *m, const rix_id *ids, const rix_loc *locs,
						   size_t n);

/*
 * Finds the most recently added entry for id. out may be NULL (membership test).
 * @return 0, RIX_ENOTFOUND.
 */
RIX_EXPORT RIX_NODISCARD int rix_indexmap_lookup(rix_loc *out, const rix_indexmap *m, const rix_id *id);

/*
 * Writes up to max matches for id into out (newest first) and returns the total number of
 * matches, which may exceed max.
 */
RIX_EXPORT size_t rix_indexmap_lookup_all(rix_loc *out, size_t max, const rix_indexmap *m, const rix_id *id);

/*
 * Batched lookup: for each i < n, found[i] = 1 and out[i] = location if ids[i] is present,
 * else found[i] = 0 (out[i] untouched). out may be NULL. Issues the memory loads of many keys
 * before using them, so their cache misses overlap. Returns the number found.
 */
RIX_EXPORT size_t rix_indexmap_lookup_many(rix_loc *out, bool *found, const rix_indexmap *m,
				const rix_id *ids, size_t n);

/* Number of entries. */
RIX_EXPORT size_t rix_indexmap_count(const rix_indexmap *m);

/* Bytes the table holds (blocks, the newest chunk's part not yet carved into blocks, block list,
 * lines, the record of older copies, struct). */
RIX_EXPORT size_t rix_indexmap_memory(const rix_indexmap *m);

/* Entry number i (0 <= i < count), in insertion order. Pointers are borrowed. */
RIX_EXPORT void rix_indexmap_entry(const rix_id **id, rix_loc *loc, const rix_indexmap *m, uint32_t i);

/*
 * Calls fn for every entry in insertion order (id and loc borrowed for the call).
 * @return 0, or fn's first nonzero value (it stops there).
 */
typedef int (*rix_indexmap_fn)(void *payload, const rix_id *id, const rix_loc *loc);
RIX_EXPORT int rix_indexmap_foreach(const rix_indexmap *m, rix_indexmap_fn fn, void *payload);

#ifdef RIX_ADVANCED /* tuning (rix/common.h) */
/* The batch size in use. */
RIX_EXPORT uint32_t rix_indexmap_batch(const rix_indexmap *m);
#endif /* RIX_ADVANCED */

#ifdef __cplusplus
}
#endif
#endif
