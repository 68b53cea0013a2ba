/*
 * rix/index.h — the content of one index file.
 *
 * An index lists packs and the blobs each holds. Pack IDs are stored once, in a pack table;
 * blobs refer to their pack by number. There is one rix_indexmap per blob type. An index is
 * either unfinished (still receiving packs) or final (read from the repository, or finished
 * for writing); a final index refuses new packs. It also records the IDs of the index files it
 * was read from ("ids") and the index files it supersedes.
 *
 * JSON: rix_index_decode reads restic's index format (FORMAT.md), object form or legacy array
 * form, skipping unknown fields; rix_index_encode writes it compactly as restic does.
 *
 * Thread-safety: concurrent readers, or one writer.
 */
#ifndef RIX_INDEX_H
#define RIX_INDEX_H

#include "rix/common.h"

#include <stdbool.h>
#include "rix/types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rix_index rix_index;

/*
 * Creates an empty, unfinished index. *out belongs to the caller, freed with rix_index_free.
 * @return 0, RIX_ENOMEM.
 */
RIX_EXPORT RIX_NODISCARD int rix_index_new(rix_index **out);

#ifdef RIX_ADVANCED /* tuning (rix/common.h) */
/* As rix_index_new, its maps with batch entries per allocation block (rix_indexmap_new_batch;
 * 0: the default). @return 0, RIX_ENOMEM. */
RIX_EXPORT RIX_NODISCARD int rix_index_new_batch(rix_index **out, uint32_t batch);
#endif /* RIX_ADVANCED */

/* Frees the index. NULL-safe. */
RIX_EXPORT void rix_index_free(rix_index *idx);

/*
 * Records that pack pack_id holds blobs[0..n). The pack gets one entry in the pack table even if
 * stored again. On failure the index may hold a prefix of the blobs (never a broken entry).
 * @return 0, RIX_ENOMEM, RIX_EINVAL (index final, or a blob type out of range), RIX_ELIMIT.
 */
RIX_EXPORT RIX_NODISCARD int rix_index_store_pack(rix_index *idx, const rix_id *pack_id, const rix_blob *blobs, size_t n);

/* Finds one location of a blob. out may be NULL. @return 0, RIX_ENOTFOUND. */
RIX_EXPORT RIX_NODISCARD int rix_index_lookup(rix_packed_blob *out, const rix_index *idx, rix_blob_type t, const rix_id *id);

/* Up to max locations (newest first); returns the total number, which may exceed max. */
RIX_EXPORT size_t rix_index_lookup_all(rix_packed_blob *out, size_t max, const rix_index *idx,
			    rix_blob_type t, const rix_id *id);

/* Whether a blob is listed. */
RIX_EXPORT bool rix_index_has(const rix_index *idx, rix_blob_type t, const rix_id *id);

/* Plaintext size of a blob (see rix_blob_plain_size). @return 0, RIX_ENOTFOUND. */
RIX_EXPORT RIX_NODISCARD int rix_index_size(uint32_t *size, const rix_index *idx, rix_blob_type t, const rix_id *id);

/* Number of blob entries of type t. */
RIX_EXPORT size_t rix_index_count(const rix_index *idx, rix_blob_type t);

/* Number of packs, and pack number i's ID (borrowed). */
RIX_EXPORT size_t rix_index_pack_count(const rix_index *idx);
RIX_EXPORT const rix_id *rix_index_pack_id(const rix_index *idx, uint32_t i);

/*
 * Calls fn per blob: data blobs in insertion order, then tree blobs; pb is borrowed for the
 * call. @return 0, or fn's nonzero value (it stops there).
 */
typedef int (*rix_index_blob_fn)(void *payload, const rix_packed_blob *pb);
RIX_EXPORT int rix_index_foreach(const rix_index *idx, rix_index_blob_fn fn, void *payload);

/*
 * Calls fn once per pack (pack table order) with all its blobs (data then tree, each in
 * insertion order). blobs is borrowed for the call. Packs without blobs are reported with n = 0.
 * @return 0, fn's nonzero value, RIX_ENOMEM.
 */
typedef int (*rix_index_pack_fn)(void *payload, const rix_id *pack_id, const rix_packed_blob *blobs, size_t n);
RIX_EXPORT int rix_index_foreach_pack(const rix_index *idx, rix_index_pack_fn fn, void *payload);

/* Final flag. */
RIX_EXPORT void rix_index_finalize(rix_index *idx);
RIX_EXPORT bool rix_index_is_final(const rix_index *idx);

/* IDs of the index files this index was read from. @return 0, RIX_ENOMEM. */
RIX_EXPORT RIX_NODISCARD int rix_index_add_id(rix_index *idx, const rix_id *id);
RIX_EXPORT const rix_id *rix_index_ids(size_t *n, const rix_index *idx);

/* IDs of index files this one supersedes. @return 0, RIX_ENOMEM. */
RIX_EXPORT RIX_NODISCARD int rix_index_add_supersedes(rix_index *idx, const rix_id *id);
RIX_EXPORT const rix_id *rix_index_supersedes(size_t *n, const rix_index *idx);

/* Bytes held (maps, pack table, id lists). */
RIX_EXPORT size_t rix_index_memory(const rix_index *idx);

/*
 * Decodes index JSON (restic's v1 object form or the legacy bare array). The result is final.
 * Malformed input gives RIX_ECORRUPT with a message naming the byte offset. *out belongs to the
 * caller. legacy, if not NULL, is set to whether the array form was read.
 * @return 0, RIX_ECORRUPT, RIX_ENOMEM, RIX_ELIMIT.
 */
RIX_EXPORT RIX_NODISCARD int rix_index_decode(rix_index **out, bool *legacy, const char *json, size_t len);

/*
 * Receives an index file's content as it is decoded, in document order: pack gives each pack
 * ID a number of the receiver's choosing (*num), which the blobs of that pack then carry in
 * loc->pack; supersedes may be NULL. A nonzero return stops decoding and is returned.
 */
typedef struct rix_index_sink {
	int (*pack)(void *payload, const rix_id *pack_id, uint32_t *num);
	int (*blob)(void *payload, rix_blob_type t, const rix_id *id, const rix_loc *loc);
	int (*supersedes)(void *payload, const rix_id *id);
	void *payload;
} rix_index_sink;

/*
 * Decodes index JSON as rix_index_decode does (the same checks, errors and messages), but hands
 * the content to sink instead of building an index: for loaders that put many files into one
 * structure. On an error the sink may already have received part of the file; discarding it is
 * the receiver's business. legacy as in rix_index_decode.
 * @return 0, RIX_ECORRUPT, or the sink's error.
 */
RIX_EXPORT RIX_NODISCARD int rix_index_decode_to(bool *legacy, const char *json, size_t len, const rix_index_sink *sink);

#ifdef RIX_ADVANCED /* streaming decode, for loaders (rix/common.h) */
/*
 * Streaming decode: index JSON read piece by piece (e.g. decompressed as it goes) and decoded
 * in a window of the stream's own, so that no caller holds the whole text. The window keeps the
 * part of the text not yet decoded; each pack object (and each other member of the top object,
 * each "supersedes" ID) is decoded once the window holds all of it. A piece that runs past what
 * has been read is decoded again once more is read: what its first try gave the sink is taken
 * back first (rollback to the mark set before it), so the sink receives the same calls in the
 * same order as from rix_index_decode_to on the whole text, and the result (content, return
 * code, message and byte offsets in it) is the same for every text and every way of cutting it.
 * The window grows (doubling) only for a piece that does not fit in it from its start: a pack
 * of more blobs than the window holds, an unknown member's big value, or a damaged piece (an
 * error can only be trusted once the text's end is read: its window grows to hold the rest).
 *
 * read: writes up to cap (> 0) more bytes of the text to buf, and their number to *got; *got
 * = 0 only at the end of the text. A nonzero return stops decoding and is returned.
 *
 * The sink: rix_index_sink's calls, and mark (remember what has been received so far) and
 * rollback (forget what was received since the last mark), both required. The decoder marks
 * before each piece, so a rollback never reaches past one pack object or one ID.
 */
typedef int (*rix_index_read_fn)(void *arg, void *buf, size_t cap, size_t *got);
typedef struct rix_index_stream_sink {
	rix_index_sink sink;
	void (*mark)(void *payload);     /* payload: sink.payload */
	void (*rollback)(void *payload);
} rix_index_stream_sink;

/* Default first window: a pack object of up to ~7,000 blobs fits it (~150 bytes a blob). */
#define RIX_INDEX_STREAM_WINDOW ((size_t)1 << 20)

/*
 * A stream decoder, reused from text to text (one thread at a time). window: the bytes of its
 * window (0: RIX_INDEX_STREAM_WINDOW; any size from 1 works, the window grows as it must); the
 * buffer is allocated at the first decode, and a window grown for one text is freed after it
 * (the next text starts with the first size again). *out belongs to the caller, freed with
 * rix_index_stream_free (NULL-safe).
 * @return 0, RIX_ENOMEM.
 */
typedef struct rix_index_stream rix_index_stream;
RIX_EXPORT RIX_NODISCARD int rix_index_stream_new(rix_index_stream **out, size_t window);
RIX_EXPORT void rix_index_stream_free(rix_index_stream *s);

/*
 * Decodes the text read reads, as rix_index_decode_to decodes a whole text (see above), into
 * sink. legacy as in rix_index_decode. On an error the sink may hold part of the text (the
 * receiver discards it).
 * @return 0, RIX_ECORRUPT, RIX_ENOMEM (the window), or the sink's or read's error.
 */
RIX_EXPORT RIX_NODISCARD int rix_index_stream_decode(rix_index_stream *s, bool *legacy, rix_index_read_fn read,
						      void *arg, const rix_index_stream_sink *sink);

/* The largest window the last decode used (bytes): its first size unless a piece made it grow. */
RIX_EXPORT size_t rix_index_stream_window_peak(const rix_index_stream *s);
#endif /* RIX_ADVANCED */

/*
 * Encodes as restic writes it: compact JSON with a trailing newline, "supersedes" first and
 * left out when empty, packs in pack-table order. *out (NUL-terminated; *len excludes the NUL)
 * belongs to the caller, freed with rix_free.
 * @return 0, RIX_ENOMEM.
 */
RIX_EXPORT RIX_NODISCARD int rix_index_encode(char **out, size_t *len, const rix_index *idx);

#ifdef __cplusplus
}
#endif
#endif
