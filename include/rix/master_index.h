/*
 * rix/master_index.h — all indexes of a repository, answering for them as one.
 *
 * Finalized indexes are merged (rix_master_index_merge) into one ranked table per blob type:
 * the distinct blob IDs as a rix_idset (rix/idset.h: keyed by the IDs' own bits, exact) and each
 * ID's location packed beside the ID's stored bits in that set, each field as wide as the
 * table's largest value needs, with a filter of a byte an ID in front: about 42 bytes an entry
 * (10M blobs in packs of 8), where 48-byte entries in a chaining table took 51. A blob stored in more than one
 * pack keeps every location. The table is immutable: a merge that adds entries of a type builds
 * that type's table again. Unfinished indexes (and final ones added after the last merge) stay
 * separate and are searched after the table. Packs get global numbers in one pack table.
 *
 * The blobs a process saves are kept in one more table: pending while being written (so that
 * two threads saving the same blob store it once: rix_master_index_add_pending returns 1 to
 * exactly one caller), then stored with their location, until an index file names their pack.
 *
 * Dedup-only (rix_master_index_set_dedup_only, before a bulk load): what backup needs. Bulk
 * loading then keeps each data blob's ID only, in a rix_idset (rix/idset.h: exact, ~29.5 bytes a
 * data blob instead of 48-54; the 48-byte entries are never built), and tree blobs in full.
 * Everything that asks "is it there?" answers exactly as the full index would: has, add_pending,
 * lookup and lookup_many with out NULL. What asks where a data blob of the set is (lookup and size
 * with out, lookup_many and lookup_all with out, foreach) is refused, never answered wrongly: see
 * each function. The pack table keeps only the packs holding tree blobs (pack_count and packs
 * list those): packs of data blobs alone are not kept. Data blobs stored or merged later (the blobs a backup saves, indexes added with
 * rix_master_index_add) are held with their locations as ever.
 *
 * Thread-safety: every function may be called from many threads at once. lookup, has, size,
 * lookup_many, lookup_all and add_pending take no lock (RCU read sections over the ranked
 * tables and the table of saved blobs) while no separate index exists, which is the case in a
 * repository (its index is loaded in bulk); with separate indexes, a miss (lookup_all: every
 * call) takes the read lock. count, pack_count, foreach, packs, index_ids and memory always
 * take the read lock. Adding and merging build their new state first and hold the write lock
 * only to publish it, so lookups continue during a merge.
 */
#ifndef RIX_MASTER_INDEX_H
#define RIX_MASTER_INDEX_H

#include "rix/common.h"

#include <stdbool.h>
#include "rix/types.h"
#include "rix/index.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rix_master_index rix_master_index;

/* *out belongs to the caller, freed with rix_master_index_free. @return 0, RIX_ENOMEM. */
RIX_EXPORT RIX_NODISCARD int rix_master_index_new(rix_master_index **out);

#ifdef RIX_ADVANCED /* reproducible tables (rix/common.h) */
/* As rix_master_index_new with a fixed seed for its hash of stored blobs (tests, reproducible benchmarks). @return 0, RIX_ENOMEM. */
RIX_EXPORT RIX_NODISCARD int rix_master_index_new_seeded(rix_master_index **out, uint64_t seed);
#endif /* RIX_ADVANCED */

/* Frees the master index and every index it holds. NULL-safe. */
RIX_EXPORT void rix_master_index_free(rix_master_index *mi);

/*
 * Adds an index; the master index takes ownership of idx on success (on failure the caller
 * keeps it). A final index waits for the next merge; an unfinished one stays separate.
 * @return 0, RIX_ENOMEM.
 */
RIX_EXPORT RIX_NODISCARD int rix_master_index_add(rix_master_index *mi, rix_index *idx);

/*
 * Merges every final index added since the last merge into the ranked tables, then frees those
 * indexes (their index-file IDs are kept; supersedes lists are not). Lookups during the merge see the state
 * before it; afterwards, the state after it.
 * @return 0, RIX_ENOMEM (nothing changed), RIX_ELIMIT.
 */
RIX_EXPORT RIX_NODISCARD int rix_master_index_merge(rix_master_index *mi);

#ifdef RIX_ADVANCED /* how a repository records what it stores (rix/common.h) */
/*
 * Records that pack pack_id, now stored, holds blobs[0..n): each becomes known at that place
 * (a pending blob stops being pending), and the pack waits for an index file to name it
 * (rix_master_index_take_unindexed). The pack goes in whole or not at all. Thread-safe.
 * @return 0, RIX_ENOMEM, RIX_EINVAL (a blob type), RIX_ELIMIT.
 */
RIX_EXPORT RIX_NODISCARD int rix_master_index_store_pack(rix_master_index *mi, const rix_id *pack_id,
				const rix_blob *blobs, size_t n);

/* Blobs stored through rix_master_index_store_pack whose packs no index file names yet. */
RIX_EXPORT size_t rix_master_index_unindexed(rix_master_index *mi);
/*
 * The content of the next index file: every pack stored and not yet named by one, with its
 * blobs. *out is an unfinished index (the caller's, rix_index_free; NULL when no pack waits);
 * pass *upto to rix_master_index_mark_indexed once that file is written. One caller at a time
 * (packs stored meanwhile wait for the next one). @return 0, RIX_ENOMEM.
 */
RIX_EXPORT RIX_NODISCARD int rix_master_index_take_unindexed(rix_index **out, uint32_t *upto, rix_master_index *mi);
/*
 * The packs take_unindexed gave with upto are named by a written index file now; index_id (may
 * be NULL) is that file's ID, recorded with the index files held (rix_master_index_index_ids),
 * so that a later load skips it. @return 0; RIX_ENOMEM (the packs are marked all the same).
 */
RIX_EXPORT RIX_NODISCARD int rix_master_index_mark_indexed(rix_master_index *mi, uint32_t upto,
							  const rix_id *index_id);
#endif /* RIX_ADVANCED */

/*
 * One location of a blob. out may be NULL. @return 0, RIX_ENOTFOUND; RIX_EINVAL (with a message)
 * when out is not NULL and the blob is a data blob known only from a dedup-only set: *out then
 * has the blob's ID and type, pack ID zero and length 0 (no stored blob is 0 bytes long).
 */
RIX_EXPORT RIX_NODISCARD int rix_master_index_lookup(rix_packed_blob *out, rix_master_index *mi, rix_blob_type t,
			    const rix_id *id);

/* Whether the blob is in any index. */
RIX_EXPORT bool rix_master_index_has(rix_master_index *mi, rix_blob_type t, const rix_id *id);

/* Plaintext size (see rix_blob_plain_size). @return 0, RIX_ENOTFOUND, RIX_EINVAL (as lookup). */
RIX_EXPORT RIX_NODISCARD int rix_master_index_size(uint32_t *size, rix_master_index *mi, rix_blob_type t, const rix_id *id);

/*
 * Up to max locations; returns the total number, which may exceed max. A data blob known from a
 * dedup-only set counts as one location, given (first) as lookup gives it: length 0, pack ID
 * zero, the error message set. Check the length when the index may be dedup-only.
 */
RIX_EXPORT size_t rix_master_index_lookup_all(rix_packed_blob *out, size_t max, rix_master_index *mi,
				   rix_blob_type t, const rix_id *id);

/*
 * Batched lookup of n IDs of one type: found[i] = 1 and out[i] filled when ids[i] is known,
 * else found[i] = 0. out may be NULL (membership only). Overlaps the memory misses of many
 * keys. Returns the number found. A data blob known only from a dedup-only set is found, with
 * out[i] as lookup gives it (length 0, pack ID zero) and the error message set.
 */
RIX_EXPORT size_t rix_master_index_lookup_many(rix_packed_blob *out, bool *found, rix_master_index *mi,
				    rix_blob_type t, const rix_id *ids, size_t n);

/* Number of blob entries of type t over all indexes (duplicates counted, except among the data
 * blobs of a dedup-only set, which holds each ID once). */
RIX_EXPORT size_t rix_master_index_count(rix_master_index *mi, rix_blob_type t);

/*
 * Calls fn for every blob entry (the ranked tables: data blobs, then trees, each type's table
 * then its top (the entries merged since the table was built) in ascending ID order, a blob's
 * locations in pack order; then the blobs stored since opening, then separate indexes); pb is borrowed for the call. @return 0, or fn's nonzero value (it stops there);
 * RIX_EINVAL (fn not called) when a dedup-only set holds data blobs, whose locations it lacks.
 */
RIX_EXPORT int rix_master_index_foreach(rix_master_index *mi, rix_index_blob_fn fn, void *payload);

/* What rix_master_index_totals adds up, by blob type. */
typedef struct rix_index_totals {
	uint64_t count[RIX_BLOB_TYPES];  /* blob entries (a blob in two packs counted twice) */
	uint64_t stored[RIX_BLOB_TYPES]; /* their lengths in the packs (sum of length) */
	uint64_t plain[RIX_BLOB_TYPES];  /* their plaintext sizes (sum of rix_blob_plain_size) */
} rix_index_totals;

/*
 * The totals of every blob entry foreach would list, without listing them: the ranked tables'
 * locations are summed where they are packed, no ID decoded and no pack ID read (for a 10M-blob
 * index, milliseconds where a walk takes a few hundred). *out is what summing foreach's pb gives.
 * @return 0; RIX_EINVAL (*out zeroed) when a dedup-only set holds data blobs (as foreach).
 */
RIX_EXPORT int rix_master_index_totals(rix_master_index *mi, rix_index_totals *out);

/*
 * The distinct pack IDs of all indexes, sorted. *out belongs to the caller (rix_free).
 * @return 0, RIX_ENOMEM.
 */
RIX_EXPORT RIX_NODISCARD int rix_master_index_packs(rix_id **out, size_t *n, rix_master_index *mi);

/* IDs of all index files held (rix_index_add_id of each), sorted. *out: caller's (rix_free).
 * @return 0, RIX_ENOMEM. */
RIX_EXPORT RIX_NODISCARD int rix_master_index_index_ids(rix_id **out, size_t *n, rix_master_index *mi);

#ifdef RIX_ADVANCED /* the save path's pending set (rix/common.h) */
/*
 * Pending blobs: the save path's dedup. add_pending returns 1 if the caller should write the
 * blob (it was neither known nor pending, and now is pending), 0 if it is known or pending
 * already, or a negative error (RIX_ENOMEM, RIX_EINVAL). It looks the blob up once, without a
 * lock unless separate indexes were added (rix_master_index_add): no rix_master_index_has
 * before it is needed. rix_master_index_store_pack ends a blob's pending state;
 * remove_pending drops it when its write failed. Thread-safe.
 */
RIX_EXPORT RIX_NODISCARD int rix_master_index_add_pending(rix_master_index *mi, rix_blob_type t, const rix_id *id);
RIX_EXPORT void rix_master_index_remove_pending(rix_master_index *mi, rix_blob_type t, const rix_id *id);
#endif /* RIX_ADVANCED */

#ifdef RIX_ADVANCED /* bulk loading (rix/common.h) */
/*
 * Bulk loading, for many index files at the lowest memory cost (a repository opening): each
 * loader thread has a batch, decodes a file into it through its sink (rix_index_decode_to, or
 * rix_index_stream_decode with rix_master_batch_stream_sink), then commits it (thread-safe;
 * index_id, may be NULL, is recorded as an index file ID) or discards it (a damaged file).
 * Committed entries are held in 43 bytes each (48 for a location past the packed widths: a
 * pack numbered from 4Mi, an offset from 128 MiB, a length from 8 MiB, an uncompressed length
 * from 16 MiB). rix_master_index_bulk_finish makes everything committed searchable: the
 * committed entries become the ranked table (sorted where they lie, a part at a time, each
 * part's memory given back as the table grows: about 43 bytes an entry at the peak); when something of that type was merged
 * before, they go into a second, small table on top of it while they are few (at most 1/16 of
 * it, with no pack named twice), else the table is built again of all. Lookups see the committed
 * entries only after bulk_finish; a batch committed while bulk_finish runs waits for the next.
 * A blob with copies in several packs answers a lookup with the copy in the pack loaded first
 * (the lowest pack number), lookup_all with all of them in that order. A pack named by two index files (what an interrupted prune
 * leaves) has its entries kept once, as restic's index merge keeps them: an entry repeating
 * another's blob at the same place of the same pack is dropped; copies in other packs stay.
 * @return 0, RIX_ENOMEM, RIX_ELIMIT. On a failed commit the batch is dropped and nothing else
 * changes; on a failed bulk_finish the searchable state is as it was and every batch committed
 * since the last bulk_finish is dropped (load those files again).
 */
typedef struct rix_master_batch rix_master_batch;
RIX_EXPORT RIX_NODISCARD int rix_master_index_batch_new(rix_master_batch **out, rix_master_index *mi);
RIX_EXPORT const rix_index_sink *rix_master_batch_sink(rix_master_batch *b);
/* The same sink with the mark and rollback rix_index_stream_decode needs (borrowed, as long as
 * the batch lives). */
RIX_EXPORT const rix_index_stream_sink *rix_master_batch_stream_sink(rix_master_batch *b);
RIX_EXPORT RIX_NODISCARD int rix_master_batch_commit(rix_master_batch *b, const rix_id *index_id);
RIX_EXPORT void rix_master_batch_discard(rix_master_batch *b);
/* NULL-safe. */
RIX_EXPORT void rix_master_batch_free(rix_master_batch *b);
RIX_EXPORT RIX_NODISCARD int rix_master_index_bulk_finish(rix_master_index *mi);
/*
 * Room for n more committed entries of type t, made before the loaders start from an estimate
 * (a hint): the parts the entries are held in then do not move as they fill. Room not used
 * costs address space, not memory, and is given back by bulk_finish. Nothing is reserved for the
 * data blobs of a dedup-only index (collected as IDs, not entries).
 * @return 0, RIX_EINVAL (t), RIX_ENOMEM (nothing changed: the entries grow as they come).
 */
RIX_EXPORT int rix_master_index_bulk_reserve(rix_master_index *mi, rix_blob_type t, size_t n);
/* Threads bulk_finish's in-place build may use (0, the default: one per CPU, at most 16). */
RIX_EXPORT void rix_master_index_set_workers(rix_master_index *mi, unsigned workers);
/*
 * Dedup-only bulk loading (see the top of this file): batches made after this call keep data
 * blobs' IDs only, and bulk_finish builds them into a rix_idset (in place: 32 bytes a data blob
 * at the peak, ~29.5 after). Call it before loading; not while batches are being filled. Off
 * (the default): full entries. Turning it off later does not bring back locations already
 * dropped.
 */
RIX_EXPORT void rix_master_index_set_dedup_only(rix_master_index *mi, bool on);
#endif /* RIX_ADVANCED */

/* Whether the index holds data blobs it knows by ID only (a dedup-only bulk load put some in). */
RIX_EXPORT bool rix_master_index_dedup_only(rix_master_index *mi);

#ifdef RIX_ADVANCED /* the merged state as an image, for a binary cache (rix/common.h) */
/*
 * The merged state (ranked tables, pack table, index file IDs) exported or installed whole, so
 * that a cache can store it and a later open install it without decoding index files (the
 * repository's index cache, repo/index_cache.c, stores and seals images). An image is a small
 * descriptor (layout, counts, the tables' shapes, the index file IDs) and sections: arrays
 * written and read exactly as they lie in memory. An image is tied to the build's layout; a
 * descriptor of another is refused.
 *
 *   write:  export ─> desc, sections (read-only) ─> write them ─> free
 *   read:   parse(desc) ─> index_ids (compare) ─> alloc ─> sections: fill each p[0..n) ─> check
 *           ─> [batches of the files added since, committed] ─> install
 *
 * rix_master_index_export: an image of the published state; the state stays alive (a merge or
 * bulk load publishing meanwhile waits, before freeing it, for rix_master_image_free), so
 * another thread may write it while lookups go on. Free it before the master index. One at a
 * time. @return 0; RIX_EINVAL (separate indexes, or blobs stored since the index was made: not
 * a state of merged index files only; data blobs held by a dedup-only set, without locations;
 * or an image not freed yet); RIX_ELIMIT; RIX_ENOMEM.
 */
typedef struct rix_master_image rix_master_image;
typedef struct rix_image_section {
	void *p;  /* the array (an export's: read-only; an import's after alloc: to be filled) */
	size_t n; /* its bytes */
} rix_image_section;
RIX_EXPORT RIX_NODISCARD int rix_master_index_export(rix_master_image **out, rix_master_index *mi);
/*
 * An image to fill from a descriptor desc[0..n) (copied), checked against this build: nothing is
 * allocated for the sections yet. @return 0; RIX_ECORRUPT (not a descriptor, another layout,
 * counts or sizes that disagree); RIX_ENOMEM.
 */
RIX_EXPORT RIX_NODISCARD int rix_master_image_parse(rix_master_image **out, const void *desc, size_t n);
/* Allocates the sections of a parsed image. @return 0; RIX_EINVAL (an export, or twice); RIX_ENOMEM. */
RIX_EXPORT RIX_NODISCARD int rix_master_image_alloc(rix_master_image *im);
/*
 * Checks the filled sections of a parsed image before they are trusted with lookups: each set's
 * shape and directory (every count it holds adds up), the locations' widths, every pack number
 * inside the pack table, second locations in order. (install checks too, unless this passed.)
 * A failed check leaves the sections as they were read.
 * @return 0; RIX_ECORRUPT (not well formed); RIX_EINVAL (an export, or not allocated).
 */
RIX_EXPORT RIX_NODISCARD int rix_master_image_check(rix_master_image *im);
/*
 * Installs a parsed image whose sections were filled into mi, which must have nothing merged or
 * added: its tables take the filled arrays (no copy); batches committed before
 * (rix_master_batch_commit: index files listed since the image was made) are merged into them as
 * part of the install, as bulk_finish would (a few on top of the image's tables, else the tables
 * of a type with new entries built again: rix_master_image_rebuilt). The image is spent once install started using it: free it after, either way.
 * @return 0; RIX_EINVAL (mi not empty, or dedup-only (rix_master_index_set_dedup_only), or the
 * image not an import allocated: nothing changed);
 * RIX_ECORRUPT (the sections are not well formed: nothing changed); RIX_ENOMEM, RIX_ELIMIT (mi
 * stays empty and the committed batches are dropped, as after a failed bulk_finish).
 */
RIX_EXPORT RIX_NODISCARD int rix_master_index_install(rix_master_index *mi, rix_master_image *im);
/* The descriptor (borrowed, valid while im is). */
RIX_EXPORT const void *rix_master_image_desc(size_t *n, const rix_master_image *im);
/* The sections, in order (borrowed, valid while im is). */
RIX_EXPORT rix_image_section *rix_master_image_sections(size_t *n, rix_master_image *im);
/* The index file IDs the state was made of (borrowed; in the order merged, not sorted). */
RIX_EXPORT const rix_id *rix_master_image_index_ids(size_t *n, const rix_master_image *im);
/* Blob entries the image holds (both types). */
RIX_EXPORT size_t rix_master_image_blobs(const rix_master_image *im);
/*
 * After rix_master_index_install: whether it built one of the image's tables again (the entries
 * committed since the image was made did not fit in the small table kept on top of it, or a pack
 * is named twice), so that an image of the new state is worth writing; false when they went on
 * top or into a table of a type the image had none of (or there were none), or before an install.
 */
RIX_EXPORT bool rix_master_image_rebuilt(const rix_master_image *im);
/* Frees the image (an export's pin is released; an import's arrays, unless installed). NULL-safe. */
RIX_EXPORT void rix_master_image_free(rix_master_image *im);
#endif /* RIX_ADVANCED */

/*
 * Pack table entries of all indexes: the number of packs, counting a pack once per time an index
 * file names it (restic names each pack once, in one index file; rix_master_index_packs gives
 * the distinct IDs, at the cost of a sort).
 */
RIX_EXPORT size_t rix_master_index_pack_count(rix_master_index *mi);

/* Bytes held by everything in the master index, pack table included. */
RIX_EXPORT size_t rix_master_index_memory(rix_master_index *mi);

#ifdef __cplusplus
}
#endif
#endif
