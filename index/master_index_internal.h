/*
 * index/master_index_internal.h — private to the files of the master index: master_index.c (the
 * index itself: create, add, merge, counts and listings), master_lookup.c (its lookups),
 * ranked.c (the ranked table, behind ranked.h), recent.c (the blobs stored since opening, behind recent.h), bulk_load.c (bulk loading) and
 * master_image.c (the merged state exported and installed whole). Holds the structs they share
 * and the functions one file lends another.
 */
#ifndef RIX_MASTER_INDEX_INTERNAL_H
#define RIX_MASTER_INDEX_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "rix/idset.h"
#include "rix/indexmap.h"
#include "rix/master_index.h"
#include "hash.h"
#include "recent.h"

/* An entry as a batch of a bulk load holds it (collected in 43 bytes: entry_collect.h). */
struct fentry {
	rix_id id;
	rix_loc loc; /* loc.pack: global pack number */
};
_Static_assert(sizeof(struct fentry) == 48, "a collected entry must stay 48 bytes");

struct rix__ranked;   /* ranked.h */
struct rix__ecollect; /* entry_collect.h */

/*
 * What a merge publishes: immutable until freed after an RCU grace period.
 *
 * A type's entries are in table[t] and, loaded since that table was built, in top[t]: a second,
 * smaller ranked table, so that adding a few entries (an index file a backup wrote, read on top
 * of the cache) builds a table of those and the top's, not of all. Every pack number in top[t] is
 * above every one in table[t] (packs are numbered in the order they come), so asking table[t]
 * first gives the copy a single table of both would give (the lowest pack number), and
 * table[t]'s copies then top[t]'s are an ID's copies in pack order. A bulk load or install never
 * puts in a top a location that repeats one of its ID's in the table: with a pack named twice
 * its entries go into one table with all the others, repeats dropped (rix__mstate_add); a merge
 * of separate indexes keeps every location, in a top as it did in the table.
 */
#define RIX__TOP_SHARE 16 /* a top holds at most 1/RIX__TOP_SHARE of its table's entries */
struct mstate {
	struct rix__ranked *table[RIX_BLOB_TYPES]; /* ranked.h; NULL: nothing merged of that type yet */
	struct rix__ranked *top[RIX_BLOB_TYPES];   /* entries on top of table[t] (NULL: none) */
	rix_idset *dset; /* dedup-only: the data blobs bulk-loaded, IDs only (NULL: none) */
	rix_id *packs;                          /* global pack table */
	uint32_t npacks;
};

struct rix_master_index {
	pthread_rwlock_t lock;
	pthread_mutex_t wmu;
	unsigned workers; /* threads for the in-place build (0: one per CPU) */
	bool dedup_only;  /* bulk loading keeps data blobs' IDs only (state->dset) */
	_Atomic(struct mstate *) state; /* never NULL */
	atomic_size_t nsep;             /* = nseparate, for lock-free readers */
	rix_index **separate;
	size_t nseparate, separate_cap;
	struct rix__recent *recent; /* blobs pending and stored since the index was made (recent.c) */
	rix_id *index_ids; /* IDs of the index files merged so far */
	size_t nindex_ids;
	/* A state an exported image (master_image.c) reads from another thread: publish waits
	 * until it is released before freeing it. NULL: none. Guarded by pin_mu. */
	const struct mstate *pinned;
	pthread_mutex_t pin_mu;
	pthread_cond_t pin_cv;
	struct bulk {                   /* committed batches, waiting for bulk_finish (bmu) */
		pthread_mutex_t bmu;
		struct rix__ecollect *c[RIX_BLOB_TYPES]; /* entries, pack numbers bulk-local (NULL: none yet) */
		rix_id *packs;
		size_t npacks, packs_cap;
		rix_id *ids;
		size_t nids, ids_cap;
		struct rix__idcollect *dids; /* dedup-only: data blob IDs, for state->dset (NULL: none yet) */
	} bulk;
};

/* Whether packs[0..n) names some pack twice (n small enough to hash: the pack table). -1: no memory. */
int rix__packs_repeat(const rix_id *packs, uint32_t n);

/* ---- The published state, as readers see it (master_index.c, master_lookup.c) ------------- */

/* The current state (read inside an RCU read section, or under the lock). */
static inline struct mstate *rix__mstate_of(rix_master_index *mi)
{
	return atomic_load_explicit(&mi->state, memory_order_seq_cst);
}

/* Requests the lines of pack number p's ID, its first and its last byte: a pack table is as its
 * allocator aligned it (rix_malloc: 16 bytes), which puts every other 32-byte ID across two
 * lines, and a lookup that requested only the first waited for the second (MasterLookupBatch
 * known 68.1 -> 53.1 ns; aligning the tables instead gained nothing more, bench/RESULTS.md). */
static inline void rix__mstate_prefetch_pack(const struct mstate *st, uint32_t p)
{
	RIX_PREFETCH(&st->packs[p]);
	RIX_PREFETCH((const char *)&st->packs[p] + sizeof(rix_id) - 1);
}

/* *out = blob id of type t at loc, its pack number turned into the pack ID. */
static inline void rix__mstate_fill(const struct mstate *st, rix_blob_type t, const rix_id *id, const rix_loc *loc,
				    rix_packed_blob *out)
{
	out->id = *id;
	out->pack_id = st->packs[loc->pack];
	/* offset, length, uncompressed_length as one 16-byte copy of the location, whose pack
	 * number lands where the type goes and is overwritten (4 moves, not 10 with shuffles). */
	memcpy((char *)out + offsetof(rix_packed_blob, type), loc, sizeof(*loc));
	out->type = t;
}
_Static_assert(sizeof(rix_blob_type) == 4 && offsetof(rix_packed_blob, offset) == offsetof(rix_packed_blob, type) + 4 &&
		       offsetof(rix_packed_blob, length) == offsetof(rix_packed_blob, type) + 8 &&
		       offsetof(rix_packed_blob, uncompressed_length) == offsetof(rix_packed_blob, type) + 12 &&
		       offsetof(rix_loc, offset) == 4 && offsetof(rix_loc, length) == 8 &&
		       offsetof(rix_loc, uncompressed_length) == 12 && sizeof(rix_loc) == 16,
	       "rix__mstate_fill copies the location over type, offset, length, uncompressed_length");

/* ---- The master index's state (master_index.c) -------------------------------------------- */

/* Frees st and its tables (NULL is fine); forget shared tables first. */
void rix__mstate_free(struct mstate *st);

/* Forgets in `from` the tables it shares with `keep` (so freeing `from` leaves them). */
void rix__mstate_forget_shared(struct mstate *from, const struct mstate *keep);

/*
 * next's tables of type t: table and top (cur's, shared with it, or, with own, the caller's to
 * give) with the entries collected in add (may be NULL; taken over in every case; loc.pack
 * global). When the top and the added entries stay within 1/RIX__TOP_SHARE of the table and no
 * pack is named twice (packs NULL), the table is carried over and a new top built of the top's
 * entries and the added; otherwise one table of all (packs, when given, drops repeated
 * locations: rix__ranked_build_collected). With own, what is not carried over is freed once
 * collected. On failure next holds what it carried
 * over (forget it as shared, or free it with next, as the caller owns it). *rebuilt (may be
 * NULL): whether an existing table is built again of all (told by the path taken: a table's
 * address says nothing, as a new one may take a freed one's). @return 0, RIX_ENOMEM,
 * RIX_ELIMIT.
 */
int rix__mstate_add(struct mstate *next, rix_blob_type t, struct rix__ranked *table, struct rix__ranked *top,
		    bool own, struct rix__ecollect *add, const rix_id *packs, unsigned workers, bool *rebuilt);

/*
 * Publishes next (and the index-file IDs nids, nids_total of them): the state first, then, when
 * drop_final, the smaller separate list without the final indexes just merged (see the comment
 * atop master_index.c); after a grace period frees cur and the old IDs. Takes ownership of next
 * and nids.
 */
void rix__master_index_publish(rix_master_index *mi, struct mstate *cur, struct mstate *next, rix_id *nids,
			       size_t nids_total, bool drop_final);

/* ---- Bulk loading (bulk_load.c) ----------------------------------------------------------- */

/* Drops the committed batches (frees their arrays); the bulk struct stays usable. */
void rix__bulk_clear(struct bulk *k);

#endif
