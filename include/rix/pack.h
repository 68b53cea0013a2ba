/*
 * rix/pack.h — reading restic's pack files and "unpacked" files (FORMAT.md).
 *
 * Unpacked files (index, snapshot, lock): one sealed object whose plaintext is JSON, or, in
 * repository version 2, 0x02 followed by one zstd frame holding the JSON.
 *
 * Pack files: sealed blobs back to back, then the sealed header and its length:
 *
 *   blob_0 || ... || blob_n-1 || seal(header) || header_length:u32 LE
 *   header = entries, in pack order:
 *     type 0 data | 1 tree       : type:u8 length:u32 id[32]                          37 bytes
 *     type 2 zstd data | 3 tree  : type:u8 length:u32 uncompressed_length:u32 id[32]   41 bytes
 *
 * Every function opens (MAC check) before it looks at any decrypted byte, and bounds-checks
 * every length it reads from the file. Data errors are RIX_ECORRUPT (malformed) or RIX_EAUTH
 * (a MAC does not verify: damaged file or wrong key), each with a message (rix_error_last()).
 * What a function returns through **out belongs to the caller, freed with rix_free; on failure
 * *out is NULL.
 */
#ifndef RIX_PACK_H
#define RIX_PACK_H

#include "rix/common.h"

#include <stddef.h>
#include <stdint.h>
#include "rix/crypto.h"
#include "rix/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Largest decompressed unpacked file accepted (and never more than RIX_UNPACKED_MAX_RATIO
 * times the compressed frame): a zstd bomb gives RIX_ECORRUPT, not an unbounded allocation. */
#define RIX_UNPACKED_MAX ((size_t)1 << 30)
#define RIX_UNPACKED_MAX_RATIO 1000
/* Plaintext byte that marks a compressed unpacked file (version 2). */
#define RIX_UNPACKED_ZSTD 0x02

/* Largest sealed pack header accepted, and the pack header entry sizes. */
#define RIX_PACK_HEADER_MAX ((uint32_t)16 << 20)
#define RIX_PACK_ENTRY_SIZE 37
#define RIX_PACK_ENTRY_SIZE_ZSTD 41

/*
 * Decodes an unpacked file file[0..n) of a repository of version repo_version (1 or 2): opens
 * it, then returns its JSON in *out[0..*out_len) (not NUL-terminated; *out_len may be 0 only
 * for an error). A compressed file (0x02 || zstd frame) is accepted in version 2 only and must
 * be exactly one frame that decompresses within the limits above.
 * @return 0; RIX_EAUTH (MAC); RIX_ECORRUPT (too short, zero IV, empty plaintext, unknown first
 * byte, 0x02 in version 1, bad or oversized zstd frame); RIX_EINVAL (repo_version not 1 or 2);
 * RIX_ENOMEM.
 */
RIX_EXPORT RIX_NODISCARD int rix_unpacked_decode(uint8_t **out, size_t *out_len, const rix_key *key, const uint8_t *file,
			size_t n, int repo_version);

/*
 * The same for many files, without an allocation per file: a decoder keeps its zstd context and
 * output buffer (grown as needed), and decrypts file[0..n) in place (the caller's bytes are
 * overwritten). *out is borrowed: inside file, or the decoder's buffer, valid until the next
 * call or until file changes. One thread at a time per decoder. new: *out is the caller's
 * (rix_unpacked_decoder_free), @return 0, RIX_ENOMEM; decode: @return as rix_unpacked_decode.
 */
typedef struct rix_unpacked_decoder rix_unpacked_decoder;
RIX_EXPORT RIX_NODISCARD int rix_unpacked_decoder_new(rix_unpacked_decoder **out);
RIX_EXPORT void rix_unpacked_decoder_free(rix_unpacked_decoder *d);
RIX_EXPORT RIX_NODISCARD int rix_unpacked_decoder_decode(const uint8_t **out, size_t *out_len, rix_unpacked_decoder *d, const rix_key *key,
				uint8_t *file, size_t n, int repo_version);

/*
 * The same, streaming: the decompressed JSON is read piece by piece into the caller's buffer, so
 * that no one holds it whole (the index loader decodes it as it comes, rix_index_stream_decode).
 * open opens file[0..n) as rix_unpacked_decoder_decode does (MAC verified first, decrypted in
 * place, the frame's checks and declared size) but decompresses nothing: plain JSON is returned
 * in *out[0..*out_len) (inside file) as there; for a zstd frame *out is NULL and read gives its
 * content. read: up to cap bytes into buf, their number in *got (0 once the frame is complete,
 * its checksum verified, or when open gave plain JSON); the frame stays in file, which must not
 * change in between. The limits are applied as the content comes: a frame that decompresses to
 * more than the cap is RIX_ECORRUPT once read reaches it (what came before has been read).
 * open: @return as rix_unpacked_decoder_decode. read: @return 0, RIX_ECORRUPT (bad, truncated
 * or oversized frame, or one that holds nothing), RIX_ENOMEM.
 */
RIX_EXPORT RIX_NODISCARD int rix_unpacked_decoder_open(const uint8_t **out, size_t *out_len, rix_unpacked_decoder *d,
						       const rix_key *key, uint8_t *file, size_t n, int repo_version);
RIX_EXPORT RIX_NODISCARD int rix_unpacked_decoder_read(rix_unpacked_decoder *d, void *buf, size_t cap, size_t *got);

/*
 * Encodes JSON json[0..n) as an unpacked file: version 1 seals it as it is; version 2 seals
 * 0x02 || zstd(json) (one frame, zstd's default level, content size in the frame header; restic
 * declares the size only from 256 bytes up, so readers must not require it). *out[0..*out_len)
 * is the file's bytes.
 * @return 0; RIX_EINVAL (repo_version not 1 or 2, json too large); RIX_ENOMEM.
 */
RIX_EXPORT RIX_NODISCARD int rix_unpacked_encode(uint8_t **out, size_t *out_len, const rix_key *key, const void *json,
			size_t n, int repo_version);

/*
 * Reads the header of a whole pack file pack[0..n) held in memory: the trailer, the sealed
 * header (opened), its entries. *out is an array of *count blobs in pack order, offsets as
 * running sums from 0 (*out is NULL when *count is 0). Compressed entries (types 2, 3) are
 * refused in version 1.
 * @return 0; RIX_EAUTH (header MAC); RIX_ECORRUPT (file shorter than 4 bytes; header length
 * zero, under 32, past the file or over RIX_PACK_HEADER_MAX; unknown entry type; a partial
 * entry; a stored length under 32; a compressed entry with uncompressed length 0; blobs running
 * into the header); RIX_EINVAL (repo_version); RIX_ENOMEM.
 */
RIX_EXPORT RIX_NODISCARD int rix_pack_read_header(rix_blob **out, size_t *count, const rix_key *key, const uint8_t *pack,
			 size_t n, int repo_version);

/*
 * The same for a pack that is not in memory: read(arg, offset, buf, len) must fill
 * buf[0..len) with the pack's bytes at offset, returning 0 or a negative RIX_E* code (passed
 * on). Reads the 4-byte trailer, then the sealed header only. size is the pack's size.
 */
typedef int (*rix_pack_read_fn)(void *payload, uint64_t offset, void *buf, size_t len);
RIX_EXPORT RIX_NODISCARD int rix_pack_read_header_at(rix_blob **out, size_t *count, const rix_key *key, uint64_t size,
			    rix_pack_read_fn read, void *payload, int repo_version);

/*
 * Reads blob b from the pack pack[0..n): bounds check, open, decompress when
 * b->uncompressed_length != 0 (version 2 only; exactly that many bytes), then the plaintext's
 * SHA-256 must equal b->id. *out[0..*out_len) is the plaintext (*out may be non-NULL with
 * *out_len 0 for an empty blob).
 * @return 0; RIX_EAUTH (MAC); RIX_ECORRUPT (outside the pack, under 32 bytes, bad zstd, wrong
 * decompressed size, compressed blob in version 1, "blob ID mismatch"); RIX_EINVAL
 * (repo_version); RIX_ENOMEM.
 */
RIX_EXPORT RIX_NODISCARD int rix_pack_read_blob(uint8_t **out, size_t *out_len, const rix_key *key, const uint8_t *pack,
		       size_t n, const rix_blob *b, int repo_version);

/*
 * The same for a blob's sealed bytes alone, stored[0..n) (normally n == b->length; b->offset is
 * not used): what a caller that read (offset, length) from a backend has in hand.
 * @return as rix_pack_read_blob.
 */
RIX_EXPORT RIX_NODISCARD int rix_blob_decode(uint8_t **out, size_t *out_len, const rix_key *key, const uint8_t *stored,
		    size_t n, const rix_blob *b, int repo_version);

/* ---- Blob codec: compression mode + encryption ------------------------------------------- */

/*
 * Compression of data blobs in version 2 (FORMAT.md, "Compression modes"). Version 1 never
 * compresses; in version 2 tree blobs are always compressed (whatever the mode) and a
 * zero-length blob never is.
 */
typedef enum rix_compression {
	RIX_COMPRESSION_OFF = 0,  /* data blobs stored as they are */
	RIX_COMPRESSION_AUTO = 1, /* zstd at RIX_ZSTD_LEVEL_AUTO; compressed only when it saves enough */
	RIX_COMPRESSION_MAX = 2,  /* zstd at RIX_ZSTD_LEVEL_MAX; compressed when it is smaller */
} rix_compression;

/*
 * Levels, from the space-versus-time study in bench/RESULTS.md ("Compression"): level 3 encodes
 * at 250-370 MB/s; level 15 gets 83-94% of level 19's saving over level 3 at 3x its speed
 * (8-17 MB/s against 3-5 on one core).
 */
#define RIX_ZSTD_LEVEL_AUTO 3
/* At RIX_ZSTD_LEVEL_AUTO, zstd's match tables are made smaller than level 3's own (hash 2^17,
 * chain 2^16): 13% less CPU time for a first backup of /usr/lib, its repository 1.3% larger and
 * still 0.8% under restic 0.14's (bench/RESULTS.md, "zstd's tables"). */
#define RIX_ZSTD_AUTO_HASH_LOG 15
#define RIX_ZSTD_AUTO_CHAIN_LOG 14
#define RIX_ZSTD_LEVEL_MAX 15
/*
 * auto stores a data blob compressed only when that saves at least this many thousandths of
 * its size. The study found no read-time gain from any threshold up to 20% (blobs either
 * compress well or not at all; a frame of barely compressible data decodes at memcpy speed),
 * only lost space: 0 it is.
 */
#define RIX_AUTO_MIN_SAVING_PERMILLE 0
/* Largest blob plaintext accepted (stored lengths and pack offsets are u32). */
#define RIX_BLOB_MAX ((size_t)1 << 31)

/*
 * A blob codec: one per thread (not thread-safe), reused for every blob so that no blob costs
 * an allocation (zstd contexts and one scratch buffer, grown when a bigger blob comes). The key
 * is borrowed and must outlive the codec.
 * @return 0; RIX_EINVAL (repo_version not 1 or 2, unknown mode); RIX_ENOMEM.
 */
typedef struct rix_blob_codec rix_blob_codec;
RIX_EXPORT RIX_NODISCARD int rix_blob_codec_new(rix_blob_codec **out, const rix_key *key, int repo_version, rix_compression mode);
/* NULL-safe. */
RIX_EXPORT void rix_blob_codec_free(rix_blob_codec *c);
#ifdef RIX_ADVANCED /* measurement knobs (rix/common.h) */
/* Changes auto's minimum saving, in thousandths (0..999) (for the measurements). */
RIX_EXPORT void rix_blob_codec_set_min_saving(rix_blob_codec *c, unsigned permille);
/*
 * Changes the zstd level the mode compresses with (1..ZSTD_maxCLevel(), clamped; 0 restores
 * the mode's own), for data and tree blobs alike.
 */
RIX_EXPORT void rix_blob_codec_set_level(rix_blob_codec *c, int level);
#endif /* RIX_ADVANCED */

/* Bytes rix_blob_codec_encode may write for an n-byte plaintext (>= n + RIX_CRYPTO_OVERHEAD). */
RIX_EXPORT size_t rix_blob_stored_bound(size_t n);

/*
 * Encodes blob plaintext plain[0..n) of type t as it is stored in a pack: seal(plain) or
 * seal(zstd(plain)), into out[0..cap), cap >= rix_blob_stored_bound(n). *stored_len is the bytes
 * written (the header's length), *uncompressed_len n when compressed, else 0.
 * @return 0; RIX_EINVAL (n > RIX_BLOB_MAX, cap too small); RIX_ENOMEM; RIX_EIO.
 */
RIX_EXPORT RIX_NODISCARD int rix_blob_codec_encode(uint32_t *stored_len, uint32_t *uncompressed_len, rix_blob_codec *c, rix_blob_type t, const void *plain,
			  size_t n, uint8_t *out, size_t cap);

/*
 * Decodes stored blob stored[0..n) described by b (type, ID, uncompressed length; offset and
 * length are not used) into the caller's out[0..cap), cap >= rix_blob_plain_size(n, b's
 * uncompressed_length): MAC, decrypt (straight into out when not compressed), decompress,
 * SHA-256 == b->id. *out_len is the plaintext's size.
 * @return as rix_blob_decode, and RIX_EINVAL when cap is too small.
 */
RIX_EXPORT RIX_NODISCARD int rix_blob_codec_decode(size_t *out_len, rix_blob_codec *c, const uint8_t *stored, size_t n,
			  const rix_blob *b, uint8_t *out, size_t cap);

/*
 * rix_blob_codec_decode, decrypting inside stored[0..n) instead of a buffer of the codec's own
 * when the blob is compressed (its zstd frame lies in stored while it is decompressed into out;
 * a blob stored uncompressed is decrypted straight into out, stored untouched). keep: stored
 * holds its sealed bytes again when the call returns, whatever it returns (encrypted again in
 * place: rix_crypto_reseal_in_place), for a caller that copies the blob as stored after
 * verifying it, unless that encryption itself fails (RIX_ENOMEM, RIX_EIO returned: stored's
 * bytes are then unspecified); !keep: stored's bytes are unspecified afterwards.
 * @return as rix_blob_codec_decode.
 */
RIX_EXPORT RIX_NODISCARD int rix_blob_codec_decode_in_place(size_t *out_len, rix_blob_codec *c, uint8_t *stored, size_t n,
							   const rix_blob *b, uint8_t *out, size_t cap, bool keep);

/* ---- Pack writer ---------------------------------------------------------------------------- */

/* Most blobs in one pack: the sealed header then stays within RIX_PACK_HEADER_MAX. */
#define RIX_PACK_MAX_BLOBS ((RIX_PACK_HEADER_MAX - 32u) / RIX_PACK_ENTRY_SIZE_ZSTD)

/*
 * A pack being written to a temporary file, hashed as it is written: the pack's ID
 * (SHA-256 of the file) is known when the last byte is written, without reading the file
 * again. One thread at a time.
 *
 *   new ──> add, add_stored ... ──> finish (header, trailer, ID) ──> rename into place
 *                                                                 or read from fd (upload)
 *   free at any point: a temporary file not renamed is removed.
 *
 * rix_pack_writer_new makes the file in dir (mkostemp, "rix-pack-XXXXXX", mode 0600).
 * @return 0; RIX_EINVAL (version); RIX_EIO / RIX_ENOSPC (the file cannot be made); RIX_ENOMEM.
 */
typedef struct rix_pack_writer rix_pack_writer;
RIX_EXPORT RIX_NODISCARD int rix_pack_writer_new(rix_pack_writer **out, const rix_key *key, int repo_version, const char *dir);
/* Removes the temporary file unless it was renamed. NULL-safe. */
RIX_EXPORT void rix_pack_writer_free(rix_pack_writer *w);

/*
 * Encodes blob plain[0..n) with codec c (which must be of the same key and version) and appends
 * it. A failed write leaves the writer failed (rix_pack_writer_failed): every later call
 * returns RIX_EIO and the pack can only be freed. Any other error (memory, the codec, limits)
 * leaves the writer as it was: the blobs before stay and the pack can still be finished.
 * @return 0; RIX_EINVAL (finished; n > RIX_BLOB_MAX); RIX_ELIMIT (the pack would pass 4 GiB or
 * RIX_PACK_MAX_BLOBS: finish it and start another); RIX_EIO, RIX_ENOSPC (write failed);
 * RIX_ENOMEM.
 */
RIX_EXPORT RIX_NODISCARD int rix_pack_writer_add(rix_pack_writer *w, rix_blob_codec *c, rix_blob_type t, const rix_id *id,
			const void *plain, size_t n);
/*
 * Appends a blob already in stored form (from another pack, when repacking): b gives type, ID,
 * length and uncompressed length; b->offset is ignored. The bytes are not checked here.
 * @return as rix_pack_writer_add, and RIX_EINVAL for a length under 32.
 */
RIX_EXPORT RIX_NODISCARD int rix_pack_writer_add_stored(rix_pack_writer *w, const rix_blob *b, const uint8_t *stored);

/* Nonzero once a write to the file failed: the pack cannot be completed, only freed. */
RIX_EXPORT bool rix_pack_writer_failed(const rix_pack_writer *w);

/* Bytes of blobs appended so far (the offset the next blob gets). */
RIX_EXPORT uint64_t rix_pack_writer_size(const rix_pack_writer *w);
/* Blobs appended so far. */
RIX_EXPORT size_t rix_pack_writer_count(const rix_pack_writer *w);
/* The blobs appended so far with their offsets, in pack order. Borrowed, valid until the next add. */
RIX_EXPORT const rix_blob *rix_pack_writer_blobs(const rix_pack_writer *w);

/*
 * Writes the sealed header and its length and gives the pack's ID. The file is complete but
 * not synced. @return 0; RIX_EINVAL (already finished or empty); RIX_EIO, RIX_ENOSPC; RIX_ENOMEM.
 */
RIX_EXPORT RIX_NODISCARD int rix_pack_writer_finish(rix_id *pack_id, rix_pack_writer *w);
#ifdef RIX_ADVANCED /* the pack writer's file (rix/common.h) */
/* After finish: the file's size, its descriptor (open for reading, offset unspecified) and path. */
RIX_EXPORT uint64_t rix_pack_writer_file_size(const rix_pack_writer *w);
RIX_EXPORT int rix_pack_writer_fd(const rix_pack_writer *w);
RIX_EXPORT const char *rix_pack_writer_path(const rix_pack_writer *w);
/*
 * After finish: moves the file to path (same file system), atomically: fsync the file, rename,
 * fsync path's directory (the syncs only when sync is true). The writer no longer removes it.
 * @return 0; RIX_EINVAL (not finished); RIX_EIO, RIX_ENOSPC.
 */
RIX_EXPORT RIX_NODISCARD int rix_pack_writer_rename(rix_pack_writer *w, const char *path, bool sync);
/* The file was moved away by someone else (a backend took it): free will not remove its path. */
RIX_EXPORT void rix_pack_writer_disown(rix_pack_writer *w);
#endif /* RIX_ADVANCED */

#ifdef RIX_ADVANCED /* the packer manager (rix/common.h) */
/* ---- Packer manager -------------------------------------------------------------------------- */

#define RIX_PACK_TARGET_DEFAULT ((uint64_t)16 << 20)
#define RIX_PACK_TARGET_MIN ((uint64_t)4 << 20)
#define RIX_PACK_TARGET_MAX ((uint64_t)128 << 20)

/*
 * Receives a finished pack (rix_pack_writer_finish done, pack_id its ID) and owns w from then
 * on, whatever it returns: it stores the pack (rename, upload), records its blobs in an index,
 * and frees w. A nonzero return (a RIX_E* code, with the message set) is returned by the add or
 * flush that finished the pack. May run on any thread that calls rix_packer_add or _flush, and
 * on several at once.
 */
typedef int (*rix_packer_done_fn)(void *payload, rix_pack_writer *w, const rix_id *pack_id);

/*
 * The packer manager: turns blobs into packs of about target_size bytes (0: the default,
 * 16 MiB; else RIX_PACK_TARGET_MIN..MAX). Data and tree blobs go to separate packs; each thread
 * that adds at the same time fills its own open pack (so there are several open packs per
 * type), and a blob at least as big as the target gets a pack of its own. Thread-safe.
 * Temporary pack files are made in tmpdir (on the repository's file system for a local one,
 * so that a finished pack is renamed into place, not copied).
 * @return 0; RIX_EINVAL (version, target size); RIX_ENOMEM.
 */
typedef struct rix_packer rix_packer;
RIX_EXPORT RIX_NODISCARD int rix_packer_new(rix_packer **out, const rix_key *key, int repo_version, const char *tmpdir,
		   uint64_t target_size, rix_packer_done_fn done, void *payload);
/*
 * Discards every open pack (their temporary files are removed; their blobs were never handed
 * on). NULL-safe. Not while another thread adds.
 */
RIX_EXPORT void rix_packer_free(rix_packer *p);

/*
 * Encodes blob plain[0..n) with the caller's codec c (one per thread) and appends it to an open
 * pack of its type, which is finished and handed to done when it reaches the target size. A blob
 * counts as stored only once done received its pack. When a write of the open pack's file fails
 * (RIX_EIO, RIX_ENOSPC) that pack is discarded with the blobs it held (none of them was handed
 * on; the discard callback hears of them); after any other error it stays open with its blobs.
 * *stored_len (may be NULL) = the blob's length in the pack (encrypted, compressed: what its
 * index entry records), 0 on an error.
 * @return 0; the codec's and writer's errors; done's.
 */
RIX_EXPORT RIX_NODISCARD int rix_packer_add(uint32_t *stored_len, rix_packer *p, rix_blob_codec *c, rix_blob_type t,
		   const rix_id *id, const void *plain, size_t n);
/*
 * Appends blob b already in stored form, stored[0..b->length) (from another pack of the same key,
 * when repacking), as it is: neither compressed nor sealed again, and its header entry records
 * b's length and uncompressed length (b->offset is ignored). Packs, target size, errors and the
 * discard callback as rix_packer_add (a blob of target size or more stored gets a pack of its
 * own). The bytes are not checked here.
 * @return 0; RIX_EINVAL (blob type; a length under 32; a compressed blob in version 1); the
 * writer's errors; done's.
 */
RIX_EXPORT RIX_NODISCARD int rix_packer_add_stored(rix_packer *p, const rix_blob *b, const uint8_t *stored);
/*
 * Finishes every open pack that holds a blob and hands it to done. Call it when no add is in
 * progress (at the end of a backup, before the index is written). @return 0 or the first error;
 * the other packs are still finished and handed on.
 */
RIX_EXPORT RIX_NODISCARD int rix_packer_flush(rix_packer *p);
/*
 * Called with the blobs of an open pack that is thrown away after a failed write (they were
 * never handed on), before it is freed: a repository forgets them as pending there.
 */
typedef void (*rix_packer_discard_fn)(void *payload, const rix_blob *blobs, size_t n);
RIX_EXPORT void rix_packer_set_discard(rix_packer *p, rix_packer_discard_fn fn);

/* Packs handed to done so far, and open packs now (both for progress reports and tests). */
RIX_EXPORT uint64_t rix_packer_packs_done(rix_packer *p);
RIX_EXPORT size_t rix_packer_open_count(rix_packer *p);
#endif /* RIX_ADVANCED */

#ifdef __cplusplus
}
#endif
#endif
