/*
 * index/master_index_internal.h — private to the files of the master index: master_index.c (the
 * index itself: create, add, merge, counts and listings), master_lookup.c (its lookups),
 * frozen.c (the frozen table and its builders), recent.c (the blobs stored since opening, behind recent.h), bulk_load.c (bulk loading) and
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
	uint8_t *fp; /* count: fp[i] = rix__hash_fp(hash of entries[i].id), one byte an entry */
	uint32_t nb;
	uint32_t count;
};

/* What a merge publishes: immutable until freed after an RCU grace period. */
struct mstate {
	struct frozen *frozen[RIX_BLOB_TYPES]; /* NULL: nothing merged of that type yet */
	rix_idset *dset; /* dedup-only: the data blobs bulk-loaded, IDs only (NULL: none) */
	rix_id *packs;                          /* global pack table */
	uint32_t npacks;
};

struct rix_master_index {
	pthread_rwlock_t lock;
	pthread_mutex_t wmu;
	uint64_t seed;
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
		struct fentry *e[RIX_BLOB_TYPES];
		size_t n[RIX_BLOB_TYPES], cap[RIX_BLOB_TYPES];
		rix_id *packs;
		size_t npacks, packs_cap;
		rix_id *ids;
		size_t nids, ids_cap;
		struct rix__idcollect *dids; /* dedup-only: data blob IDs, for state->dset (NULL: none yet) */
	} bulk;
};

/* ---- Frozen tables (frozen.c) ------------------------------------------------------------- */

/* One source of entries for a merge: a frozen table or an index's map. */
struct merge_src {
	const struct frozen *f;
	const rix_indexmap *m;
	uint32_t pack_base; /* added to an index map's local pack numbers */
};

/* Frees f (NULL is fine). */
void rix__frozen_free(struct frozen *f);

/* Bytes f takes (0 for NULL). */
size_t rix__frozen_memory(const struct frozen *f);

/*
 * Builds a frozen table of all entries of srcs[0..n) (a counting sort by bucket). Sources are
 * placed oldest first; placement fills each chain from its end, so the newest entry of a chain
 * comes first. *out NULL when there are no entries.
 */
int rix__frozen_build(struct frozen **out, const struct merge_src *srcs, size_t n, uint64_t seed);

/*
 * The frozen table over entries[0..count) themselves, permuted into bucket order (a counting
 * sort in place, its lower levels on `workers` threads: 0, one per CPU); the table owns entries
 * afterwards. @return 0, RIX_ENOMEM.
 */
/*
 * Drops the entries of f that repeat another entry of their chain exactly: the same ID at the same
 * place (offset, lengths) of the same pack (packs[loc.pack] equal: one pack named by two index
 * files gets two numbers), as restic's index merge drops them. What an interrupted prune or
 * repair leaves (every pack in an old and a new index file) then reads as the repository it is.
 * Chains are compacted in place, bucket words rewritten. @return the entries dropped.
 */
uint32_t rix__frozen_drop_same(struct frozen *f, const rix_id *packs);
/* Whether packs[0..n) names some pack twice (n small enough to hash: the pack table). -1: no memory. */
int rix__packs_repeat(const rix_id *packs, uint32_t n);

int rix__frozen_in_place(struct frozen **out, struct fentry *entries, uint32_t count, uint64_t seed,
			 unsigned workers);

/*
 * f with add[0..k) inserted (loc.pack already global), the bucket count kept: in place (f's
 * entries array grown, f itself the result: only for a table no reader sees) or into new arrays
 * (f unchanged). A sequential pass over the entries instead of a rebuild's hashing of every one;
 * for a few entries against many (while the table stays within 2 x FROZEN_LOAD a bucket: see
 * rix__frozen_insert_fits). @return 0, RIX_ENOMEM (f unchanged, whole), RIX_ELIMIT.
 */
int rix__frozen_insert(struct frozen **out, struct frozen *f, const struct fentry *add, uint32_t k, uint64_t seed,
		       bool in_place);
static inline bool rix__frozen_insert_fits(const struct frozen *f, size_t k)
{
	return k <= f->count / 2 + 1024 && (uint64_t)f->count + k <= (uint64_t)f->nb * FROZEN_LOAD * 2;
}

/* ---- The published state, as readers see it (master_index.c, master_lookup.c) ------------- */

/* The current state (read inside an RCU read section, or under the lock). */
static inline struct mstate *rix__mstate_of(rix_master_index *mi)
{
	return atomic_load_explicit(&mi->state, memory_order_seq_cst);
}

/* *out = frozen entry e of type t, its pack number turned into the pack ID. */
static inline void rix__mstate_fill(const struct mstate *st, rix_blob_type t, const struct fentry *e,
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
	       "rix__mstate_fill copies the location over type, offset, length, uncompressed_length");

/* ---- The master index's state (master_index.c) -------------------------------------------- */

/* Frees st and its frozen tables (NULL is fine); forget shared tables first. */
void rix__mstate_free(struct mstate *st);

/* Forgets in `from` the frozen tables it shares with `keep` (so freeing `from` leaves them). */
void rix__mstate_forget_shared(struct mstate *from, const struct mstate *keep);

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
