/*
 * rix/types.h — small value types shared by every module.
 */
#ifndef RIX_TYPES_H
#define RIX_TYPES_H

#include "rix/common.h"

#include <stdint.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RIX_ID_SIZE 32

/* A 32-byte identifier: the SHA-256 of a blob's plaintext or of a file's stored bytes. */
typedef struct rix_id {
	uint8_t b[RIX_ID_SIZE];
} rix_id;

/* Blob types. The values are the low bit of the pack header's type byte. */
typedef enum rix_blob_type {
	RIX_BLOB_DATA = 0,
	RIX_BLOB_TREE = 1,
} rix_blob_type;
#define RIX_BLOB_TYPES 2

/*
 * One blob's place, as an index entry stores it. `pack` is a pack number local to the table
 * that returned it. `uncompressed_length` is 0 when the blob is stored uncompressed.
 */
typedef struct rix_loc {
	uint32_t pack;
	uint32_t offset;
	uint32_t length;
	uint32_t uncompressed_length;
} rix_loc;

/* A blob inside a pack, as stored in an index file (pack-relative; no pack ID). */
typedef struct rix_blob {
	rix_id id;
	rix_blob_type type;
	uint32_t offset;
	uint32_t length;
	uint32_t uncompressed_length; /* 0: not compressed */
} rix_blob;

/* A blob with the ID of the pack that holds it: what lookups and iteration report. */
typedef struct rix_packed_blob {
	rix_id id;
	rix_id pack_id;
	rix_blob_type type;
	uint32_t offset;
	uint32_t length;
	uint32_t uncompressed_length; /* 0: not compressed */
} rix_packed_blob;

/* The blob within its pack: pb without the pack ID. */
static inline rix_blob rix_blob_in_pack(const rix_packed_blob *pb)
{
	rix_blob b = { pb->id, pb->type, pb->offset, pb->length, pb->uncompressed_length };
	return b;
}

/* Plaintext size of a blob: uncompressed_length, or length minus the 32-byte crypto overhead. */
static inline uint32_t rix_blob_plain_size(uint32_t length, uint32_t uncompressed_length)
{
	if (uncompressed_length != 0)
		return uncompressed_length;
	return length >= 32 ? length - 32 : 0;
}

/* Hex: writes 64 lowercase hex digits and a NUL into out[65]. */
RIX_EXPORT void rix_id_to_hex(char out[65], const rix_id *id);
/* Parses exactly 64 hex digits (either case). 0 or RIX_EINVAL. */
RIX_EXPORT RIX_NODISCARD int rix_id_from_hex(rix_id *id, const char *hex, size_t len);

#ifdef __cplusplus
}
#endif
#endif
