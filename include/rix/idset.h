/*
 * rix/idset.h — a compact, exact, read-only set of blob IDs.
 *
 * What backup needs to deduplicate data is "is this blob already stored?", not where it is.
 * rix_idset answers exactly that in about 29.4-29.9 bytes per ID for sets of a million IDs
 * and more (an ID is 32 bytes; 1M IDs: 29.89, 3M: 29.72, 10M: 29.42), against 48-54 for a
 * table that also holds locations. It is exact: an ID is reported present if and only if it
 * was put in. The layout (index/idset.c) is keyed by the IDs' own bits, which SHA-256 makes
 * uniform; crafted IDs that share long prefixes cost lookups at most a binary search
 * (O(log n)), never a linear scan.
 *
 * The set is built once from an array of IDs and never changes. Building sorts the array in
 * place and turns it, in place, into the set, so a build needs no more memory than the array
 * it starts from (32 bytes an ID), and the finished set less.
 *
 * Thread-safety: a built set is immutable; any number of threads may look it up at once.
 *
 * API families: build (taking over an array, best made with rix_idset_alloc_ids, or from a
 * copy); free; has, has_many (batched, prefetching); rank, rank_many (an ID's position in
 * ascending order); count, memory; iteration in ascending ID order.
 */
#ifndef RIX_IDSET_H
#define RIX_IDSET_H

#include "rix/common.h"

#include <stddef.h>
#include <stdint.h>
#include "rix/types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rix_idset rix_idset;

/* The largest number of distinct IDs one set holds (2^31 - 1). */
#define RIX_IDSET_MAX_IDS 0x7FFFFFFFu

/* Flags of rix_idset_build_owned. */
enum {
	/* The array is already in ascending order (memcmp order; duplicates allowed): the sort
	 * is skipped. The order is checked as the set is built: RIX_EINVAL if it is not. */
	RIX_IDSET_SORTED = 1u << 0,
};

/*
 * Builds a set of the n IDs of ids, taking the array over: ids must have been allocated with
 * rix_malloc/rix_realloc (rix/alloc.h) and hold n IDs. Duplicates are stored once. Unless
 * flags has RIX_IDSET_SORTED, the array is sorted in place first (from 64Ki IDs, partly on one
 * thread per CPU, which the call starts and joins). The set is then built
 * inside the array's own allocation, which is shrunk to the set's size: the build never holds
 * more than the array (32 bytes an ID, for sets of about 1M IDs and more; a small set may
 * first grow it by up to a few KiB).
 * On success *out belongs to the caller (freed with rix_idset_free) and owns the array: the
 * caller must not use or free ids any more. On failure *out is NULL and ids is still the
 * caller's, holding the same IDs (perhaps reordered; sorted unless the failure was
 * RIX_EINVAL on an unsorted array said to be sorted). n = 0 is allowed (ids may then be NULL;
 * if not, it is freed on success as it would be otherwise).
 * @return 0, RIX_ENOMEM, RIX_ELIMIT (more than RIX_IDSET_MAX_IDS distinct IDs), RIX_EINVAL
 * (RIX_IDSET_SORTED given but the IDs are not in ascending order, or an unknown flag).
 */
RIX_EXPORT RIX_NODISCARD int rix_idset_build_owned(rix_idset **out, rix_id *ids, size_t n, unsigned flags);

/*
 * Room for n IDs to fill and give to rix_idset_build_owned: rix_malloc'd (the caller's until
 * then; rix_free), with the kernel asked to back it with huge pages before anything touches it
 * (the set is read at random, and with 4 KiB pages nearly every lookup of a large set would
 * also miss the TLB; advice only). NULL when out of memory (or n = 0).
 */
RIX_EXPORT rix_id *rix_idset_alloc_ids(size_t n);

/*
 * As rix_idset_build_owned on a copy of ids (which stays the caller's, untouched). The copy
 * costs 32 bytes an ID more during the build.
 * @return 0, RIX_ENOMEM, RIX_ELIMIT.
 */
RIX_EXPORT RIX_NODISCARD int rix_idset_build(rix_idset **out, const rix_id *ids, size_t n);

/* Frees the set. NULL-safe. */
RIX_EXPORT void rix_idset_free(rix_idset *s);

/* Whether id is in the set. s may be NULL (the empty set). */
RIX_EXPORT bool rix_idset_has(const rix_idset *s, const rix_id *id);

/*
 * Batched membership: found[i] = whether ids[i] is in the set, for each i < n. Issues the
 * memory loads of many keys before using them, so that their cache misses overlap. s may be
 * NULL. Returns the number found.
 */
RIX_EXPORT size_t rix_idset_has_many(bool *found, const rix_idset *s, const rix_id *ids, size_t n);

/*
 * Whether id is in the set and, when it is, *rank = its position among the set's distinct IDs
 * in ascending order (0 .. count - 1; rix_idset_foreach's order). The ranks of a set's IDs are
 * distinct and dense, so an array of count values indexed by rank attaches data to the IDs
 * (the master index's ranked tables keep blob locations so). *rank is untouched when absent.
 */
RIX_EXPORT bool rix_idset_rank(const rix_idset *s, const rix_id *id, size_t *rank);

/* The rank of an ID rix_idset_rank_many did not find. */
#define RIX_IDSET_NO_RANK ((size_t)-1)

/*
 * Batched rix_idset_rank: ranks[i] = the rank of ids[i], or RIX_IDSET_NO_RANK when it is not in
 * the set, for each i < n (loads of many keys issued before they are used, as
 * rix_idset_has_many). s may be NULL. Returns the number found.
 */
RIX_EXPORT size_t rix_idset_rank_many(size_t *ranks, const rix_idset *s, const rix_id *ids, size_t n);

/* Number of distinct IDs in the set (0 for NULL). */
RIX_EXPORT size_t rix_idset_count(const rix_idset *s);

/* Bytes the set holds: every array it allocated (as allocated) and the struct (0 for NULL). */
RIX_EXPORT size_t rix_idset_memory(const rix_idset *s);

/*
 * Calls fn for every ID of the set in ascending order (id borrowed for the call).
 * @return 0, or fn's first nonzero value (it stops there).
 */
typedef int (*rix_idset_fn)(void *payload, const rix_id *id);
RIX_EXPORT int rix_idset_foreach(const rix_idset *s, rix_idset_fn fn, void *payload);

#ifdef RIX_ADVANCED /* the layout, for tests and benchmarks (rix/common.h) */
/* The shape index/idset.c chose for a set (see its top comment). */
typedef struct rix_idset_shape {
	unsigned key_bits;      /* k: the bucket is the ID's top k bits */
	unsigned block_buckets; /* G: buckets per 64-byte directory block */
	unsigned tail_bytes;    /* bytes of each ID kept in the byte-aligned array (its last ones) */
	unsigned mid_bits;      /* bits of each ID kept in the packed array (between dir and tail) */
	size_t blocks;          /* directory blocks */
	size_t overflow_blocks; /* blocks too full for their unary code, held as explicit offsets */
	size_t longest_bucket;  /* the most IDs that share one bucket */
} rix_idset_shape;
/* Fills *shape for s (all zero for NULL or an empty set). */
RIX_EXPORT void rix_idset_get_shape(rix_idset_shape *shape, const rix_idset *s);
/* How many stored IDs a lookup of id compares with it (0 for an empty bucket or set): at most
 * 8 for a run of up to 8 IDs, else at most floor(log2(run)) + 1 (binary search). */
RIX_EXPORT size_t rix_idset_lookup_cost(const rix_idset *s, const rix_id *id);
/* Test hook: on, the lookups of s use the portable bit primitives even on a processor with
 * POPCNT and BMI2 (whose instructions they use otherwise), so that tests cover both. */
RIX_EXPORT void rix_idset_use_portable(rix_idset *s, bool on);
#endif /* RIX_ADVANCED */

#ifdef __cplusplus
}
#endif
#endif
