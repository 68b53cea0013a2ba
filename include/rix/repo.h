/*
 * rix/repo.h — a repository: open or create one over a backend, find, store (with
 * deduplication) and read blobs, write index files, manage keys.
 *
 *   rix_repo_open ──> rix_repo_load_index ──> has / lookup / load_blob      (restore, check)
 *                                          └─> save_blob ... save_blob ──> flush   (backup)
 *
 * A blob saved is stored only if the repository does not have it and no other thread is
 * storing it at that moment (the master index and its pending set decide). It is durable once
 * rix_repo_flush returned 0: its pack is written, and an index file names it. Until then a
 * crash loses it, and nothing else: files are written atomically, packs before the index files
 * that name them.
 *
 * Thread-safety: save_blob, load_blob and the master index's lookups may be called from many
 * threads at once;
 * open, load_index, flush, the key functions and close from one thread, with no save in flight.
 */
#ifndef RIX_REPO_H
#define RIX_REPO_H

#include "rix/common.h"

#include <stddef.h>
#include <stdint.h>

#include "rix/backend.h"
#include "rix/config.h"
#include "rix/master_index.h"
#include "rix/pack.h"
#include "rix/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Options of a repository (init, open). Start from RIX_REPO_OPTIONS_INIT (or
 * rix_repo_options_init), then set what differs: the first field says which layout of the
 * struct the caller was built with, so fields can be added without breaking callers built
 * before; a struct without it is refused (RIX_EINVAL).
 */
#define RIX_REPO_OPTIONS_VERSION 3u /* 1: without warn, 2: without cache_dir (both still accepted) */
typedef struct rix_repo_options {
	unsigned version;            /* RIX_REPO_OPTIONS_VERSION */
	int repo_version;            /* init: the repository format, 1 or 2 (0: 2) */
	rix_compression compression; /* data blobs in version 2 (INIT: RIX_COMPRESSION_AUTO) */
	uint64_t pack_size;          /* target pack size; 0: 16 MiB (4-128 MiB) */
	uint64_t scrypt_n;           /* new key files; 0: RIX_SCRYPT_DEFAULT_N / _R / _P */
	uint32_t scrypt_r, scrypt_p;
	const char *username;        /* for key files; NULL: the user running */
	const char *hostname;        /* NULL: this machine's name */
	unsigned workers;            /* threads for index loading (within load_memory), the merged table's
	                                build, check and snapshot loading; 0: one per CPU (snapshot
	                                loading: 8, its files are small and it waits on I/O) */
	uint64_t load_memory;        /* index loading's working memory; 0: RIX_REPO_LOAD_MEMORY_DEFAULT */
	bool strict;                 /* a damaged index file makes rix_repo_load_index fail */
	const char *key_hint;        /* open: key files whose name starts with this are tried first */
	/* rix_repo_load_index calls this after each index file (one call at a time): for a
	 * progress line. May be NULL. */
	void (*load_progress)(void *payload, size_t files_done, size_t files_total);
	void *payload;               /* given to load_progress and warn */
	/* Version 2. Something the caller should be told that fails nothing (a lock file that cannot
	 * be read, and is ignored as restic 0.14 ignores it): one line, no newline. May be called
	 * from any thread, one call at a time. May be NULL. */
	void (*warn)(void *payload, const char *msg);
	/* Version 3. The local cache's root folder (restic's --cache-dir: the CLI gives
	 * $XDG_CACHE_HOME/rix or ~/.cache/rix unless --no-cache), or NULL (the default): no cache.
	 * With one, open makes <cache_dir>/<repository ID>/ (and a CACHEDIR.TAG in cache_dir), and
	 * rix_repo_load_index keeps there a sealed binary copy of the merged index, which later
	 * loads install instead of decoding the index files (see rix_repo_load_index). A cache that
	 * cannot be made or written is said through warn and fails nothing. Borrowed (copied). */
	const char *cache_dir;
} rix_repo_options;
#define RIX_REPO_OPTIONS_INIT { .version = RIX_REPO_OPTIONS_VERSION, .compression = RIX_COMPRESSION_AUTO }
/* Sets *opt to RIX_REPO_OPTIONS_INIT (for options that are not initialized where declared). */
RIX_EXPORT void rix_repo_options_init(rix_repo_options *opt);

typedef struct rix_repo rix_repo;

/*
 * Index loading keeps, per loader thread, one index file, its decoded entries (about as many
 * bytes as a compressed file: ~50 bytes of it a blob, 48 an entry) and, for a compressed file,
 * zstd's window (2.25 MiB for rix's files) and a 1 MiB JSON window (the JSON is decoded as it is
 * decompressed, never held whole): about this many bytes per byte of the largest index file
 * (~2.4 for rix's largest v2 files, ~1.3 for v1's). Loader threads are capped so that together
 * they stay within the budget.
 */
#define RIX_REPO_LOAD_BYTES_PER_FILE_BYTE 3u
#define RIX_REPO_LOAD_MEMORY_DEFAULT ((uint64_t)256 << 20)

/*
 * A new repository on backend b (which must hold none): a fresh master key, a key file for
 * password, a config of opt->version with a random ID and chunker polynomial. The repository
 * owns b on success (freed by rix_repo_free); on failure the caller keeps it. opt may be NULL.
 * @return 0; RIX_EEXISTS (a config is there); RIX_EINVAL; the backend's errors; RIX_ENOMEM.
 */
RIX_EXPORT RIX_NODISCARD int rix_repo_init(rix_repo **out, rix_backend *b, const char *password, size_t password_len,
		  const rix_repo_options *opt);

/*
 * Opens the repository on b with password: every key file is tried (scrypt each) until one
 * opens; then the config. Ownership of b as rix_repo_init. The index is not loaded.
 * @return 0; RIX_EAUTH (no key file opens with this password); RIX_ENOTFOUND (no key file);
 * RIX_ECORRUPT (config); RIX_EINVAL (unknown config version); backend errors; RIX_ENOMEM.
 */
RIX_EXPORT RIX_NODISCARD int rix_repo_open(rix_repo **out, rix_backend *b, const char *password, size_t password_len,
		  const rix_repo_options *opt);

/* Frees everything (blobs saved since the last flush are not stored). NULL-safe. */
RIX_EXPORT void rix_repo_free(rix_repo *r);

/* Borrowed, valid while r is. */
RIX_EXPORT const rix_config *rix_repo_config(const rix_repo *r);
RIX_EXPORT rix_backend *rix_repo_backend(rix_repo *r);
RIX_EXPORT rix_master_index *rix_repo_master_index(rix_repo *r);
/* Name (64 hex) of the key file the repository was opened or made with. */
RIX_EXPORT const char *rix_repo_key_name(const rix_repo *r);
/* rix_repo_options.workers as the repository was opened or made with (0: the default). */
RIX_EXPORT unsigned rix_repo_workers(const rix_repo *r);
/* How the repository compresses the data blobs it saves (rix_repo_options.compression as it was
 * opened or made with; version 1 compresses nothing whatever it says). */
RIX_EXPORT rix_compression rix_repo_compression(const rix_repo *r);
/* The target size of its packs (rix_repo_options.pack_size, else RIX_REPO_PACK_SIZE_DEFAULT). */
#define RIX_REPO_PACK_SIZE_DEFAULT ((uint64_t)16 << 20)
RIX_EXPORT uint64_t rix_repo_pack_size(const rix_repo *r);

/*
 * Called for an index file that could not be loaded: its name and the error (code and
 * message). Loading goes on with the others unless opt->strict.
 */
typedef void (*rix_repo_index_error_fn)(void *payload, const char *name, int code, const char *msg);

typedef struct rix_repo_load_stats {
	size_t files;      /* index files listed */
	size_t loaded;     /* and loaded by this call (from the files or the cache) */
	uint64_t bytes;    /* bytes of index files read (not of the cache) */
	size_t blobs;      /* blob entries loaded (from the files or the cache) */
} rix_repo_load_stats;

/*
 * Loads every index file into the master index, in parallel (opt->workers threads): read,
 * check the file's SHA-256 against its name, authenticate, decompress, decode, merge.
 * Damaged files go to on_error (may be NULL) and are skipped, unless opt->strict. RIX_EIO
 * reading a file (the backend failing: a REST server gone after its retries, a failing disk)
 * goes to on_error too and ends the load, strict or not: no file is started after it. Index
 * files loaded by an earlier call are skipped, so calling it again (or rix_repo_check after it)
 * loads only what was added meanwhile. stats may be NULL.
 *
 * With a cache (rix_repo_options.cache_dir), a first load reads the cache file: when it is
 * whole, authenticates with the repository's key, is of this repository and this build's
 * layout, and was made of index files that are all still listed, its merged state is installed
 * as it lies (large reads, decrypted in place: no JSON), and only the index files listed since
 * are loaded on top. A cache that names a file no longer listed, or fails any check, is ignored
 * (the index files are loaded, as without a cache): a cache never changes an answer. After a
 * load that read index files, a new cache file is written (sealed, to a temporary file renamed
 * over the old one) by a thread of its own; rix_repo_free (or the next load) waits for it. A
 * load on top of a cache writes it again only when what it read did not fit on top of the
 * cache's tables (past 1/16 of a type's table, or a pack named twice: a table built again) or
 * was 64 files (else the next load reads those few files again, which costs less than writing
 * the whole cache after every backup). Failing to write it is a warning (rix_repo_options.warn), never an error. rix_repo_check
 * reads every index file whatever the cache holds.
 * @return 0; the first error when strict; RIX_EIO (the backend failed: the index is partial;
 * the message names the file); backend errors from listing; RIX_ENOMEM.
 */
RIX_EXPORT RIX_NODISCARD int rix_repo_load_index(rix_repo_load_stats *stats, rix_repo *r, rix_repo_index_error_fn on_error, void *payload);
/*
 * As rix_repo_load_index, but every index file is read and checked whatever the cache holds
 * (what a repair or a check needs: a file damaged since the cache was made is seen); a new cache
 * is still written after. @return as rix_repo_load_index.
 */
RIX_EXPORT RIX_NODISCARD int rix_repo_load_index_files(rix_repo_load_stats *stats, rix_repo *r,
						       rix_repo_index_error_fn on_error, void *payload);

/*
 * Dedup-only index loading, for a backup (call before rix_repo_load_index): data blobs are loaded
 * as IDs only (rix_master_index_set_dedup_only: ~29.5 bytes a data blob instead of ~54, and a
 * load's peak is 32 bytes a data blob above the rest), tree blobs in full. Saving blobs
 * (rix_repo_save_blob: a known one is deduplicated), reading trees and asking whether a data
 * blob is there work as with the full index; what needs a data blob's location (reading it,
 * its size, check, prune, restore, stats) is refused with RIX_EINVAL for the data blobs loaded
 * so. A dedup-only load neither reads nor writes the index cache (rix_repo_options.cache_dir):
 * the cache holds the full merged state (data blobs' locations: ~48 bytes each), which the
 * dedup-only index exists not to hold; the index files are read. Off by default.
 */
RIX_EXPORT void rix_repo_set_dedup_only(rix_repo *r, bool on);

/*
 * Saves blob data[0..n) of type t: its ID (SHA-256) into *id, and *stored = 1 if it was
 * stored now, 0 if the repository has it or another thread is storing it (both may be NULL).
 * A pack the backend refuses is kept and retried by the next flush (not an error here). When
 * writing the temporary pack fails (RIX_EIO, RIX_ENOSPC), that open pack is dropped with every
 * blob saved into it since the last pack was finished: those saves must be made again (they
 * are not pending any more, so saving them again stores them).
 * @return 0; RIX_EINVAL (n over RIX_BLOB_MAX); RIX_ELOCKED (the repository's lock is lost: see
 * rix_lock_check); the codec's, packer's, backend's errors.
 */
RIX_EXPORT RIX_NODISCARD int rix_repo_save_blob(rix_id *id, bool *stored, rix_repo *r, rix_blob_type t, const void *data, size_t n);
/*
 * As rix_repo_save_blob, with *stored_len (may be NULL) = the blob's length in its pack
 * (encrypted and, in a version 2 repository, compressed: what its index entry records as
 * length) when it was stored now, 0 if the repository has it or another thread is storing it,
 * and 0 on an error.
 * @return 0; RIX_EINVAL (n over RIX_BLOB_MAX); RIX_ELOCKED (the repository's lock is lost: see
 * rix_lock_check); the codec's, packer's, backend's errors.
 */
RIX_EXPORT RIX_NODISCARD int rix_repo_save_blob_sized(rix_id *id, uint32_t *stored_len, rix_repo *r, rix_blob_type t,
						      const void *data, size_t n);

/*
 * As rix_repo_save_blob_sized, but the blob is stored even when the repository has it or another
 * thread is storing it: a new copy in a new pack (prune's repack, restic's SaveBlob with
 * storeDuplicate). The caller saves each blob once. @return as rix_repo_save_blob_sized.
 */
RIX_EXPORT RIX_NODISCARD int rix_repo_save_blob_copy(rix_id *id, uint32_t *stored_len, rix_repo *r, rix_blob_type t,
						     const void *data, size_t n);

/*
 * As rix_repo_save_blob_copy (a new copy in a new pack, whether the repository has the blob or
 * not), for a blob given in its stored form: stored[0..b->length), sealed with this repository's
 * key over the plaintext, or over its zstd frame when b->uncompressed_length != 0 (b: type, ID,
 * length, uncompressed length; b->offset is ignored). The bytes go into the pack as they are,
 * neither compressed nor encrypted again, and the pack's header records b's length and
 * uncompressed length (prune's repack of a blob whose form may stay: no zstd, no sealing, and
 * the blob keeps its size). Reusing the ciphertext (key and IV) is sound: the plaintext is the
 * same, and the pack it came from is to be deleted.
 * The bytes are not checked here: they must have verified (MAC, decompression, SHA-256 equal to
 * b->id) as rix_repo_load_pack_blobs_stored verifies what it gives; bytes that did not would be
 * stored as a damaged blob. The caller saves each blob once. Thread-safe, as rix_repo_save_blob.
 * @return 0; RIX_EINVAL (blob type; a length under 32; a plaintext over RIX_BLOB_MAX; a
 * compressed blob in a version 1 repository); RIX_ELOCKED (the repository's lock is lost); the
 * packer's and backend's errors, as rix_repo_save_blob.
 */
RIX_EXPORT RIX_NODISCARD int rix_repo_save_blob_stored(rix_repo *r, const rix_blob *b, const uint8_t *stored);

/*
 * Finishes open packs, stores them, and writes index files for every pack stored since the
 * last flush (a new index file every RIX_REPO_INDEX_BLOBS_V2 / _V1 blobs, as restic 0.14).
 * After it returns 0 every blob saved before is durable. Packs the backend refused are retried
 * first; if they are refused again they stay for the next flush and their error is returned.
 * @return 0; backend errors (RIX_ENOSPC, ...: nothing flushed before is lost; calling flush
 * again once there is room stores the refused packs; RIX_ELOCKED (the repository's lock is lost:
 * nothing is written); blobs of a temporary pack that could not be
 * written must be saved again, see rix_repo_save_blob); RIX_ENOMEM.
 */
RIX_EXPORT RIX_NODISCARD int rix_repo_flush(rix_repo *r);

/*
 * Gives back the buffers and blob codecs (their zstd contexts) the repository keeps between loads
 * and saves: a pack's reads, the plaintext of the largest blob met, per thread that loaded. They
 * are made again when needed. For a caller at the end of a phase of many loads whose memory the
 * next phase should not carry (prune, after its repack). Thread-safe; those in use by another
 * thread are kept. @return the bytes of buffers given back (the codecs' contexts not counted).
 */
RIX_EXPORT size_t rix_repo_release_buffers(rix_repo *r);
#define RIX_REPO_INDEX_BLOBS_V2 150000u
#define RIX_REPO_INDEX_BLOBS_V1 50000u

/*
 * Reads blob (t, id): index lookup, read of its bytes from the pack, MAC, decrypt, decompress,
 * SHA-256 check. *out (the caller's, rix_free) holds *n bytes. Thread-safe.
 * @return 0; RIX_ENOTFOUND (not in the index, or its pack is missing: the message says which);
 * RIX_ECORRUPT / RIX_EAUTH (a damaged pack: the message names it); backend errors; RIX_ENOMEM.
 */
RIX_EXPORT RIX_NODISCARD int rix_repo_load_blob(uint8_t **out, size_t *n, rix_repo *r, rix_blob_type t, const rix_id *id);

/*
 * The same into the caller's buf[0..cap): *n is the blob's size. Nothing is allocated once the
 * repository's codecs and read buffers are warm (one per thread loading at a time), so a
 * restore can load millions of blobs without touching the allocator. Thread-safe.
 * @return as rix_repo_load_blob, and RIX_ELIMIT when cap is too small (*n then says how big the
 * blob is).
 */
RIX_EXPORT RIX_NODISCARD int rix_repo_load_blob_into(size_t *n, rix_repo *r, rix_blob_type t, const rix_id *id,
						     uint8_t *buf, size_t cap);

/*
 * Called by rix_repo_load_pack_blobs for blob i of its list: code 0 and its plaintext
 * data[0..n) (borrowed for the call; MAC, decompression and SHA-256 verified), or code < 0 (the
 * blob could not be read or does not verify: rix_error_last() says why, naming the pack) and no
 * data. Return 0 to go on; anything else stops the call, which returns it.
 */
typedef int (*rix_repo_blob_fn)(void *payload, size_t i, int code, const uint8_t *data, size_t n);

/*
 * Largest gap between two wanted blobs of a pack that rix_repo_load_pack_blobs reads through
 * rather than starting another read, and the most one read takes (unless a single blob is
 * larger): a reader holds that and one blob's plaintext (RIX_BLOB_MAX at most), in buffers
 * of the repository's pool, kept from one pack to the next. 2 MiB: the /usr/lib restore of
 * bench/RESULTS.md peaked at 85.5 MiB with reads of at most 4 MiB and 83.4 with 2 (restic
 * 0.14: 171), and a read of 2 MiB still takes far longer than a round trip to a REST server
 * nearby.
 */
#define RIX_REPO_PACK_READ_GAP ((uint64_t)1 << 20)
#define RIX_REPO_PACK_READ_MAX ((uint64_t)2 << 20)

/*
 * Reads blobs[0..n) of pack pack_id (offsets, lengths, types, IDs and uncompressed lengths as
 * the index gives them; offsets increasing, each at most once), each pack byte range once:
 * blobs less than RIX_REPO_PACK_READ_GAP apart are fetched in one ranged read of the backend
 * (at most RIX_REPO_PACK_READ_MAX each), then each blob is authenticated, decrypted,
 * decompressed, its SHA-256 checked, and given to fn, in order. A read that fails (a missing
 * pack: RIX_ENOTFOUND, "pack ... is missing") is reported to fn for each blob it held, and the
 * next read is tried. Thread-safe (restore reads several packs at once).
 * @return 0; fn's nonzero value; RIX_EINVAL (offsets not increasing, a blob over RIX_BLOB_MAX);
 * RIX_ENOMEM.
 */
RIX_EXPORT RIX_NODISCARD int rix_repo_load_pack_blobs(rix_repo *r, const rix_id *pack_id, const rix_blob *blobs,
						      size_t n, rix_repo_blob_fn fn, void *payload);

/*
 * As rix_repo_blob_fn, and with code 0 also the blob's stored form: stored[0..blobs[i].length)
 * (borrowed for the call), the bytes of the pack that verified into data (IV, ciphertext, MAC;
 * over a zstd frame when blobs[i].uncompressed_length != 0): what rix_repo_save_blob_stored
 * takes. NULL with an error code.
 */
typedef int (*rix_repo_stored_blob_fn)(void *payload, size_t i, int code, const uint8_t *data, size_t n,
				       const uint8_t *stored);
/*
 * As rix_repo_load_pack_blobs (the same reads, the same checks, each blob verified before fn
 * hears of it), fn also receiving each blob's stored form (prune's repack, which may copy it as
 * it is). @return as rix_repo_load_pack_blobs.
 */
RIX_EXPORT RIX_NODISCARD int rix_repo_load_pack_blobs_stored(rix_repo *r, const rix_id *pack_id, const rix_blob *blobs,
							     size_t n, rix_repo_stored_blob_fn fn, void *payload);

/* ---- files ------------------------------------------------------------------------------------ */

/* Largest unpacked file rix_repo_read_file reads. */
#define RIX_REPO_FILE_MAX ((size_t)1 << 31)

/*
 * Reads the unpacked file (RIX_FILE_INDEX, _SNAPSHOT or _LOCK) named id: its bytes, their
 * SHA-256 checked against id, then MAC, decrypt, decompress. *out (the caller's, rix_free) holds
 * its JSON, *n bytes (not NUL-terminated). On failure *out is NULL.
 * @return 0; RIX_EINVAL (another file type); RIX_ENOTFOUND (no such file); RIX_ECORRUPT (over
 * RIX_REPO_FILE_MAX, SHA-256 is not the name, bad content); RIX_EAUTH (MAC: damaged, or another
 * repository's); backend errors; RIX_ENOMEM.
 */
RIX_EXPORT RIX_NODISCARD int rix_repo_read_file(uint8_t **out, size_t *n, rix_repo *r, rix_file_type t,
						const rix_id *id);

/*
 * Stores json[0..n) as an unpacked file of type t (RIX_FILE_INDEX, _SNAPSHOT or _LOCK): encoded
 * for the repository's version (compressed in version 2), sealed, written atomically under its
 * SHA-256, which *id (may be NULL) receives. json is borrowed.
 * @return 0; RIX_EINVAL (another file type; json too large); backend errors (RIX_ENOSPC, RIX_EIO);
 * RIX_ENOMEM.
 */
RIX_EXPORT RIX_NODISCARD int rix_repo_write_file(rix_id *id, rix_repo *r, rix_file_type t, const void *json, size_t n);

/*
 * The IDs of every file of type t (not RIX_FILE_CONFIG), sorted: *ids (the caller's, rix_free;
 * NULL when there are none), *n of them. Names that are not IDs are not listed.
 * @return 0; RIX_EINVAL (RIX_FILE_CONFIG); backend errors; RIX_ENOMEM.
 */
RIX_EXPORT RIX_NODISCARD int rix_repo_list_ids(rix_id **ids, size_t *n, rix_repo *r, rix_file_type t);

/*
 * Reads pack pack_id's header (its size, then the trailer and the sealed header only: not the
 * blobs). *out (the caller's, rix_free) is an array of *count blobs in pack order; NULL when
 * *count is 0 or on failure.
 * @return 0; RIX_ENOTFOUND ("pack ... is missing"); rix_pack_read_header's errors (RIX_EAUTH,
 * RIX_ECORRUPT); backend errors; RIX_ENOMEM.
 */
RIX_EXPORT RIX_NODISCARD int rix_repo_read_pack_header(rix_blob **out, size_t *count, rix_repo *r,
						       const rix_id *pack_id);
/*
 * The same for a pack whose size is known (size, as a listing of the packs gave it: restic's
 * ListPack): no stat first, one request fewer. A pack of another size reads as damaged.
 * @return 0; rix_pack_read_header's errors (RIX_EAUTH, RIX_ECORRUPT: also a pack shorter than
 * size); RIX_ENOTFOUND (the pack is missing); backend errors; RIX_ENOMEM.
 */
RIX_EXPORT RIX_NODISCARD int rix_repo_read_pack_header_sized(rix_blob **out, size_t *count, rix_repo *r,
							     const rix_id *pack_id, uint64_t size);

/*
 * A new key file for the repository's master key, opened by password (borrowed; scrypt with
 * the repository options' parameters); name (65 bytes, may be NULL) gets its file name.
 * @return 0; RIX_EINVAL (scrypt parameters); backend errors (RIX_ENOSPC, RIX_EIO); RIX_ENOMEM.
 */
RIX_EXPORT RIX_NODISCARD int rix_repo_key_add(char name[65], rix_repo *r, const char *password, size_t password_len);
/*
 * Deletes key file name (64 hex digits), refusing the one r was opened with, so that a
 * repository always keeps a key that works.
 * @return 0; RIX_EINVAL (the key in use, or not a file name); RIX_ENOTFOUND; backend errors.
 */
RIX_EXPORT RIX_NODISCARD int rix_repo_key_remove(rix_repo *r, const char *name);
/* fn(payload, name, size) for each key file. @return 0; fn's nonzero value; backend errors. */
RIX_EXPORT RIX_NODISCARD int rix_repo_key_list(rix_repo *r, rix_backend_list_fn fn, void *payload);

/* ---- index files, rewritten ------------------------------------------------------------------- */

/*
 * A new set of index files for packs given one at a time, as restic 0.14's MasterIndex.Save
 * writes them for prune and rebuild-index: a file every RIX_REPO_INDEX_BLOBS_V2 / _V1 blobs,
 * each written (rix_repo_write_file) as soon as it is full, and a last one at finish that names
 * the superseded index files (readers ignore "supersedes", as restic does: the old files must be
 * removed, after finish, by the caller). Until finish returns 0 the new files name only part of
 * the packs, so nothing old may be removed before. One thread.
 *
 *   new(supersedes) ─> add(pack, blobs) ... ─> finish ─> remove the superseded files
 *
 * new: @return 0; RIX_ENOMEM. supersedes[0..n) is copied.
 */
typedef struct rix_index_writer rix_index_writer;
RIX_EXPORT RIX_NODISCARD int rix_index_writer_new(rix_index_writer **out, rix_repo *r, const rix_id *supersedes, size_t n);
/*
 * Adds pack pack_id holding blobs[0..n) (pack-relative offsets, as in the pack's header); a full
 * file is written by a thread of the writer's (one file in flight per CPU, at most 4) while the
 * caller goes on, and a write's error is returned by the add or finish that waits for it (which
 * waits for every file in flight: after an error nothing is being written). After an error the
 * writer only fails (files written before stay: they name packs that exist, so they
 * are harmless).
 * @return 0; RIX_EINVAL (after finish or an error); rix_index_store_pack's and
 * rix_repo_write_file's errors.
 */
RIX_EXPORT RIX_NODISCARD int rix_index_writer_add(rix_index_writer *w, const rix_id *pack_id, const rix_blob *blobs, size_t n);
/*
 * Writes the last file: the packs not yet written and the supersedes list (an empty index when
 * no pack was added, so that the superseded files are named), and waits for every file in
 * flight: when it returns 0, every file is written. @return as rix_index_writer_add.
 */
RIX_EXPORT RIX_NODISCARD int rix_index_writer_finish(rix_index_writer *w);
/* The IDs of the files written so far (borrowed, valid until the next call). */
RIX_EXPORT const rix_id *rix_index_writer_files(size_t *n, const rix_index_writer *w);
/* Frees w after waiting for the files in flight (the files written stay). NULL-safe. */
RIX_EXPORT void rix_index_writer_free(rix_index_writer *w);

/* ---- usage -------------------------------------------------------------------------------------- */

typedef struct rix_repo_usage {
	size_t snapshots;
	uint64_t files;          /* files over all snapshots (a file in two snapshots counts twice) */
	uint64_t logical_bytes;  /* their sizes: what a restore of every snapshot would write */
	uint64_t unique_blobs;   /* distinct data blobs those files reference */
	uint64_t unique_bytes;   /* their plaintext sizes, each counted once */
	uint64_t unique_stored;  /* their stored (compressed, sealed) sizes */
	uint64_t missing_blobs;  /* referenced but not in the index */
	size_t trees;            /* distinct trees walked */
} rix_repo_usage;

/*
 * Walks every snapshot's trees (each distinct tree once) and sums what they hold: the
 * deduplication ratio is logical_bytes / unique_bytes. Needs the index loaded.
 * @return 0; RIX_ECORRUPT (a snapshot or tree that is not what restic writes); the load errors
 * of a tree blob; backend errors; RIX_ENOMEM.
 */
RIX_EXPORT RIX_NODISCARD int rix_repo_usage_compute(rix_repo_usage *u, rix_repo *r);

/* ---- check ------------------------------------------------------------------------------------ */

typedef struct rix_check_report {
	size_t index_files, damaged_index_files;
	size_t packs;             /* packs the index names */
	size_t missing_packs;     /* named by the index, not in the backend (error) */
	size_t orphaned_packs;    /* in the backend, named by no index (not an error, as restic) */
	size_t header_mismatches; /* a pack's header disagrees with the index (error) */
	size_t damaged_packs;     /* unreadable header, wrong size or (read_data) wrong SHA-256 (error) */
	size_t damaged_blobs;     /* read_data: blobs that fail MAC, zstd or SHA-256 (error) */
	size_t blobs;             /* index entries */
	size_t duplicate_blobs;   /* entries beyond the first of a blob (not an error) */
	uint64_t bytes_read;      /* read_data: pack bytes read */
	size_t errors;            /* the sum of the error counts */
	/* The snapshots and their trees (as restic's check), and the packs' headers both ways. */
	size_t snapshots;         /* snapshot files */
	size_t damaged_snapshots; /* unreadable, SHA-256 not its name, not JSON or no tree (error) */
	size_t trees;             /* distinct trees reachable from the snapshots, loaded and decoded */
	size_t damaged_trees;     /* trees that fail to load (MAC, SHA-256...) or decode (error) */
	size_t missing_blobs;     /* trees and data blobs a snapshot or tree names, not in the index (error) */
	size_t unindexed_blobs;   /* blobs a pack's header holds that no index names (error) */
	size_t packs_read;        /* packs read whole (read_data, or its subset) */
} rix_check_report;

/* Receives each finding as one line (errors with is_error set). */
typedef void (*rix_check_msg_fn)(void *payload, bool is_error, const char *msg);
/*
 * Called after each pack is checked (from the checking threads, one call at a time), with the
 * packs done, the packs to check and the bytes read so far: for a progress line.
 */
typedef void (*rix_check_progress_fn)(void *payload, size_t done, size_t total, uint64_t bytes_read);

/* What a check does and whom it tells: start from RIX_CHECK_OPTIONS_INIT. */
#define RIX_CHECK_OPTIONS_VERSION 1u
typedef struct rix_check_options {
	unsigned version;               /* RIX_CHECK_OPTIONS_VERSION */
	bool read_data;                 /* read every pack whole: SHA-256 and every blob */
	rix_check_msg_fn msg;           /* each finding; may be NULL */
	rix_check_progress_fn progress; /* after each pack; may be NULL */
	void *payload;                  /* given to msg and progress */
	/*
	 * Read only a subset of the packs whole (as restic's --read-data-subset; read_data is then
	 * ignored). At most one of: subset_n of subset_t (1 <= n <= t <= 256: the packs whose ID's
	 * first byte % t == n - 1), subset_percent (0 < p <= 100: that share of the packs, at least
	 * one, chosen at random), subset_bytes (the share of the packs that it is of their total
	 * size, as a percentage).
	 */
	unsigned subset_n, subset_t;
	double subset_percent;
	uint64_t subset_bytes;
	uint64_t subset_seed; /* the random choice's seed (0: from the clock) */
} rix_check_options;
#define RIX_CHECK_OPTIONS_INIT { .version = RIX_CHECK_OPTIONS_VERSION }

/*
 * Checks the repository as restic's check does. Every index file loads. Every snapshot file
 * reads (SHA-256 = its name), decrypts, decodes and names a tree; every tree reachable from the
 * snapshots (each once, any depth) loads, verifies and decodes, and every blob it names (subtrees,
 * files' content) is in the index; errors name the snapshot, tree, blob and path. Every pack the
 * index names exists, and its header (read from its tail) lists exactly the blobs the index
 * says, at the same offsets and lengths (a header blob no index names is an error); packs no
 * index names are reported (not an error). With read_data (or a subset) packs are read whole:
 * SHA-256 must be the name and every blob must verify. Packs are checked by
 * rix_repo_options.workers threads (0: one per CPU, at most 64). Loads the index itself (on a
 * repository whose index is not loaded). rep (may be NULL) gets the counts; opt may be NULL
 * (the defaults: no read_data, no callbacks). Messages about a pack start "pack <64 hex>:".
 * A file that reads but is wrong, or is missing, is an error of the repository (counted in rep,
 * given to msg) and the check goes on; RIX_EIO from the backend (a REST server gone after its
 * retries, a failing disk) is not: the check stops at the first, returns it with a message
 * naming the operation and the file ("check stopped: ..."), and counts it nowhere in rep.
 * @return 0 when no error was found; RIX_ECORRUPT when some were (rep says which); RIX_ELOCKED
 * (the repository's lock was lost: the check stopped); RIX_EIO (the backend failed: stopped);
 * RIX_EINVAL (opt of another version, or a subset out of range); other backend errors that stop
 * the check (listing); RIX_ENOMEM.
 */
RIX_EXPORT RIX_NODISCARD int rix_repo_check(rix_check_report *rep, rix_repo *r, const rix_check_options *opt);

/* ---- locks ------------------------------------------------------------------------------------ */

/*
 * Lock files as restic writes them (locks/<id>, an unpacked file holding
 * {"time":RFC 3339,"exclusive":bool,"hostname","username","pid","uid","gid"}). An exclusive lock
 * excludes every other lock; a shared lock excludes exclusive ones. A lock is stale when it is
 * older than RIX_LOCK_STALE_SECONDS, or was made on this host by a process that is gone; stale
 * locks never block. A held lock is refreshed (a new file, then the old one removed) every
 * RIX_LOCK_REFRESH_SECONDS by a thread of its own, as restic does.
 */
#define RIX_LOCK_STALE_SECONDS (30 * 60)
#define RIX_LOCK_REFRESH_SECONDS (5 * 60)
/* A refresh that failed is tried again this often. */
#define RIX_LOCK_RETRY_SECONDS 30
/*
 * After failing refreshes for this long a lock is lost (others may soon take it as stale):
 * restic's stale time less one and a half refresh intervals.
 */
#define RIX_LOCK_LOST_SECONDS (RIX_LOCK_STALE_SECONDS - 3 * RIX_LOCK_REFRESH_SECONDS / 2)

typedef struct rix_lock rix_lock;

/*
 * Takes a lock: writes its file, then looks at every other lock; on a conflict removes its own
 * again and fails naming the holder. A lock file that reads but cannot be decoded is ignored, as
 * restic 0.14 ignores it (said through rix_repo_options.warn); one the backend fails to read is
 * not (RIX_EIO: it may be a live lock). The first lock taken on r (until released) is the one r's
 * long operations depend on: once it is lost (see rix_lock_check) rix_repo_save_blob,
 * rix_repo_flush and rix_repo_check fail with its RIX_ELOCKED instead of running on.
 * @return 0; RIX_ELOCKED ("locked exclusively by PID 123 on host by user since ..."); backend
 * errors; RIX_ENOMEM.
 */
RIX_EXPORT RIX_NODISCARD int rix_lock_acquire(rix_lock **out, rix_repo *r, bool exclusive);
/*
 * 0 while the lock is held; RIX_ELOCKED, with a message naming the lock and the refresh error,
 * once its refresh failed for RIX_LOCK_LOST_SECONDS. A lost lock stays lost (its holder must
 * stop, release it and start again). Cheap: an atomic load. NULL-safe (0).
 */
RIX_EXPORT RIX_NODISCARD int rix_lock_check(const rix_lock *l);
#ifdef RIX_ADVANCED /* timing for tests (rix/common.h) */
/* The refresh thread's intervals in milliseconds (refresh, retry after a failure, lost after). */
RIX_EXPORT void rix_lock_set_intervals(rix_lock *l, unsigned refresh_ms, unsigned retry_ms, unsigned lost_ms);
#endif /* RIX_ADVANCED */
/*
 * Writes a fresh lock file now and removes the previous one (the refresh thread does it on its
 * own). @return 0; backend errors (the old file stays, and the lock with it).
 */
RIX_EXPORT RIX_NODISCARD int rix_lock_refresh(rix_lock *l);
/*
 * Releases the lock: stops the refresh thread, removes the lock file, frees l (in any case).
 * NULL-safe. @return 0; the backend's error removing the file (it stays until it is stale, or
 * until rix_lock_remove with all).
 */
RIX_EXPORT int rix_lock_free(rix_lock *l);
/*
 * Removes the stale locks of the repository, or every lock when all (a lock file that cannot
 * be read is left, its age unknown, as restic 0.14 leaves it: only all removes it); *removed
 * (may be NULL) counts those removed.
 * @return 0; the first backend error (the locks after it are left); RIX_ENOMEM.
 */
RIX_EXPORT RIX_NODISCARD int rix_lock_remove(size_t *removed, rix_repo *r, bool all);

#ifdef __cplusplus
}
#endif

#endif
