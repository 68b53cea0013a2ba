/*
 * pack/pack_internal.h — helpers shared by the files of pack/ (private to the module; tests
 * may include it).
 *
 * zstd contexts are created with rix's allocator (ZSTD_customMem), so allocation-failure
 * tests and allocation counts see zstd's memory too.
 */
#ifndef RIX_PACK_INTERNAL_H
#define RIX_PACK_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#define ZSTD_STATIC_LINKING_ONLY /* ZSTD_customMem: contexts allocate through rix_malloc */
#include <zstd.h>
#include <zstd_errors.h>

/* A decompression / compression context on rix's allocator; NULL when out of memory. */
ZSTD_DCtx *rix__zstd_dctx_new(void);
ZSTD_CCtx *rix__zstd_cctx_new(void);

/*
 * Testing hook: the absolute cap on a decompressed unpacked file, RIX_UNPACKED_MAX unless a
 * test lowers it. Not thread-safe to change while decoding.
 */
extern size_t rix__unpacked_max;

/*
 * No zstd frame yields more than 32768 bytes per byte of input: a block produces at most
 * 128 KiB and takes at least 4 bytes (3-byte block header + 1 byte of RLE or content).
 */
#define RIX_ZSTD_MAX_RATIO 32768u

/* The repository version a codec encodes for (the pack writer checks it matches its own). */
struct rix_blob_codec;
int rix__codec_version(const struct rix_blob_codec *c);

/* Little-endian u32 load / store. */
static inline uint32_t rix__le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline void rix__put_le32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

#endif
