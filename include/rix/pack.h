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
int rix_unpacked_decode(const rix_key *key, const uint8_t *file, size_t n, int repo_version,
			uint8_t **out, size_t *out_len);

/*
 * Encodes JSON json[0..n) as an unpacked file: version 1 seals it as it is; version 2 seals
 * 0x02 || zstd(json) (zstd's default level, content size in the frame header), as restic
 * writes. *out[0..*out_len) is the file's bytes.
 * @return 0; RIX_EINVAL (repo_version not 1 or 2, json too large); RIX_ENOMEM.
 */
int rix_unpacked_encode(const rix_key *key, const void *json, size_t n, int repo_version,
			uint8_t **out, size_t *out_len);

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
int rix_pack_read_header(const rix_key *key, const uint8_t *pack, size_t n, int repo_version,
			 rix_blob **out, size_t *count);

/*
 * The same for a pack that is not in memory: read(arg, offset, buf, len) must fill
 * buf[0..len) with the pack's bytes at offset, returning 0 or a negative RIX_E* code (passed
 * on). Reads the 4-byte trailer, then the sealed header only. size is the pack's size.
 */
typedef int (*rix_pack_read_fn)(void *arg, uint64_t offset, void *buf, size_t len);
int rix_pack_read_header_at(const rix_key *key, uint64_t size, rix_pack_read_fn read, void *arg,
			    int repo_version, rix_blob **out, size_t *count);

/*
 * Reads blob b from the pack pack[0..n): bounds check, open, decompress when
 * b->uncompressed_length != 0 (version 2 only; exactly that many bytes), then the plaintext's
 * SHA-256 must equal b->id. *out[0..*out_len) is the plaintext (*out may be non-NULL with
 * *out_len 0 for an empty blob).
 * @return 0; RIX_EAUTH (MAC); RIX_ECORRUPT (outside the pack, under 32 bytes, bad zstd, wrong
 * decompressed size, compressed blob in version 1, "blob ID mismatch"); RIX_EINVAL
 * (repo_version); RIX_ENOMEM.
 */
int rix_pack_read_blob(const rix_key *key, const uint8_t *pack, size_t n, const rix_blob *b,
		       int repo_version, uint8_t **out, size_t *out_len);

/*
 * The same for a blob's sealed bytes alone, stored[0..n) (normally n == b->length; b->offset is
 * not used): what a caller that read (offset, length) from a backend has in hand.
 */
int rix_blob_decode(const rix_key *key, const uint8_t *stored, size_t n, const rix_blob *b,
		    int repo_version, uint8_t **out, size_t *out_len);

#ifdef __cplusplus
}
#endif
#endif
