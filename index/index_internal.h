/*
 * index/index_internal.h — private to index/ (and its tests): the rix_index struct and the
 * fast paths the JSON decoder and the master index use.
 */
#ifndef RIX_INDEX_INTERNAL_H
#define RIX_INDEX_INTERNAL_H

#include "rix/index.h"
#include "rix/indexmap.h"

/*
 * One index file's content.
 *
 *   packs[0..npacks)          pack table: each pack ID once; entries' rix_loc.pack points here
 *   pack_slots[0..pack_cap)   open-addressing set over the pack table (value = number + 1,
 *                             0 = empty; seeded hash.h), so storing a pack finds its number
 *   maps[RIX_BLOB_DATA/TREE]  blob ID -> rix_loc, one rix_indexmap per type
 */
struct rix_index {
	rix_indexmap *maps[RIX_BLOB_TYPES]; /* NULL after the master index took the entries */
	rix_id *packs;
	uint32_t npacks, packs_cap;
	uint32_t *pack_slots;
	uint32_t pack_slots_cap; /* power of two, or 0 */
	uint64_t pack_seed;      /* hash seed for pack_slots */
	uint32_t batch;
	bool final;
	rix_id *ids;
	size_t nids, ids_cap;
	rix_id *supersedes;
	size_t nsupersedes, supersedes_cap;
};

/*
 * Returns the number of pack_id in the pack table, adding it if new.
 * @return 0, RIX_ENOMEM, RIX_ELIMIT.
 */
int rix__index_pack_number(rix_index *idx, const rix_id *pack_id, uint32_t *num);

/*
 * Blob entries of one type on their way into an index, added RIX__ADD_GROUP at a time
 * (rix__index_add_group: rix_indexmap_add_many requests their lines together), as
 * rix_index_store_pack and the decoder add them.
 */
#define RIX__ADD_GROUP 64
struct rix__add_group {
	size_t n;
	rix_id ids[RIX__ADD_GROUP];
	rix_loc locs[RIX__ADD_GROUP];
};

/* Appends (id, loc) to g (not full). @return whether g is full now. */
static inline bool rix__add_group_put(struct rix__add_group *g, const rix_id *id, const rix_loc *loc)
{
	g->ids[g->n] = *id;
	g->locs[g->n] = *loc;
	return ++g->n == RIX__ADD_GROUP;
}

/*
 * Adds g's entries to idx's blobs of type t, in order (their pack numbers must exist), and
 * empties g. Works on unfinished and final indexes alike (the decoder fills an index, then
 * marks it final). On failure the entries before the failing one are added.
 * @return 0, RIX_ENOMEM, RIX_ELIMIT.
 */
int rix__index_add_group(rix_index *idx, rix_blob_type t, struct rix__add_group *g);

/* Hint: about n more blobs of type t will be added. @return 0, RIX_ENOMEM. */
int rix__index_reserve(rix_index *idx, rix_blob_type t, size_t n);

/* rix_idset_build_owned with its sort on at most `workers` threads (0: one per CPU), and the
 * internal flag below. idset_build.c. */
struct rix_idset;
int rix__idset_build_owned(struct rix_idset **out, rix_id *ids, size_t n, unsigned flags, unsigned workers);
/*
 * A flag of rix__idset_build_owned only: at least 8 mid bits an ID (kb one byte more, the
 * tail one byte less: the same bits an ID), so that a lookup of an absent ID whose bucket is
 * not empty reads the mid array (w/8 bytes an ID) and, 255 times in 256, not the tails: the
 * ranked table's shape (which it builds from records: rix__idset_from_records with mid8).
 */
#define RIX__IDSET_MID8 (1u << 16)
/* Makes s use the lookups' instance `level` (0 portable, 1 POPCNT and BMI2, 2 AVX-512 too):
 * tests. -1 when this processor lacks it (s unchanged). */
int rix__idset_use_level(struct rix_idset *s, int level);
/*
 * A set as an image (the ranked table's, in the master index's cache): its shape in
 * RIX__IDSET_DESC_WORDS words and its one block of *size bytes (borrowed; none for an empty
 * set). rix__idset_import makes the set again from them, taking the block over when it succeeds
 * (rix_malloc'd, a copy of the exported one; the caller's still on failure); it checks all a
 * lookup relies on (shape, offsets inside the block, every directory block's counts) and returns
 * RIX_ECORRUPT if anything is off.
 */
/*
 * rix_idset_foreach in rounds: fn gets the next RIX__IDSET_ROUND IDs (fewer at the end) in
 * ascending order, their ranks following on from the round before's. @return 0, or fn's first
 * nonzero value (the walk stops there).
 */
#define RIX__IDSET_ROUND 64
typedef int (*rix__idset_round_fn)(void *payload, const rix_id *ids, size_t n);
int rix__idset_foreach_round(const struct rix_idset *s, rix__idset_round_fn fn, void *payload);

/* The descriptor's words (idset_image.c), named for the ranked table's checks and the tests. */
enum {
	RIX__IDSET_D_N,       /* IDs */
	RIX__IDSET_D_K,       /* bucket bits */
	RIX__IDSET_D_GSHIFT,  /* log2 of the buckets a block */
	RIX__IDSET_D_KB,      /* bytes of bucket and mid bits */
	RIX__IDSET_D_OVB,     /* blocks held as overflow starts */
	RIX__IDSET_D_LONGEST, /* longest run */
	RIX__IDSET_D_MID,     /* offsets in the block: the mid bits, */
	RIX__IDSET_D_DIR,     /* the directory, */
	RIX__IDSET_D_OV,      /* the overflow starts */
	RIX__IDSET_D_SIZE,    /* the block's bytes */
	RIX__IDSET_D_EXTRA,   /* the owner's bytes after each tail */
	RIX__IDSET_DESC_WORDS
};
void rix__idset_export(const struct rix_idset *s, uint64_t desc[RIX__IDSET_DESC_WORDS], const void **block,
		       size_t *size);
int rix__idset_import(struct rix_idset **out, const uint64_t desc[RIX__IDSET_DESC_WORDS], void *block, size_t size);

/*
 * IDs collected for a set in 31 bytes each (idset_collect.c: 256 parts by the first byte), for a bulk
 * load that must not hold 32 bytes an ID before the set is built. add copies IDs in (any order,
 * duplicates allowed); rix__idset_build_collected builds the set from them on up to `workers`
 * threads, giving each part's memory back as it is used, and consumes c whether it succeeds or
 * not. @return 0, RIX_ENOMEM (add: c keeps what it had; build: nothing is kept), RIX_ELIMIT.
 */
struct rix__idcollect;
int rix__idcollect_new(struct rix__idcollect **out);
int rix__idcollect_add(struct rix__idcollect *c, const rix_id *ids, size_t n);
size_t rix__idcollect_count(const struct rix__idcollect *c);
void rix__idcollect_free(struct rix__idcollect *c);
int rix__idset_build_collected(struct rix_idset **out, struct rix__idcollect *c, unsigned workers);

/*
 * For idset_collect.c and ranked.c (idset_build.c): the set from records as phase A leaves them
 * (base[0, have): nd distinct IDs in ascending order, record j at j (31 + extra): the ID's bytes
 * 1..31, then extra bytes of the caller's; cnt0[c] of them with first byte c), base taken over
 * (freed on failure), with 8 or more mid bits when mid8 (RIX__IDSET_MID8). Each ID's extra bytes
 * stay beside its tail (at tail_at(s, i) + tail: idset_internal.h), where a lookup that has read
 * the tail finds them in the same line as a rule: the ranked table's locations. An owner may
 * read up to RIX__IDSET_EXTRA_MAX bytes from their start (loads that run past them: the block
 * has room after the last), and the batched lookup requests a candidate's lines that far.
 * extra <= RIX__IDSET_EXTRA_MAX. Also the sort of IDs that agree on their first d bytes.
 */
#define RIX__IDSET_EXTRA_MAX 16u
int rix__idset_from_records(struct rix_idset **out, uint8_t *base, size_t have, const size_t cnt0[256], size_t nd,
			    bool mid8, unsigned extra);
void rix__idset_sort_from(rix_id *a, size_t n, unsigned d);
/* idset_sort.c: IDs sorted in memcmp order, from 64Ki IDs on up to `workers` threads (0: one a CPU). */
void rix__idset_sort(rix_id *a, size_t n, unsigned workers);

#endif
