/*
 * rix/chunker.h — content-defined chunking, restic's exactly: the same bytes and the same
 * repository polynomial give the same chunk boundaries, so rix and restic deduplicate against
 * each other.
 *
 * The rule (restic's chunker): a Rabin fingerprint over a 64-byte window with the repository's
 * chunker polynomial (config, degree 53). A chunk is at least RIX_CHUNK_MIN and at most
 * RIX_CHUNK_MAX bytes; it ends after a byte where (digest & (2^20 - 1)) == 0. The fingerprint
 * state is reset at every cut and at the start of every file, and the first RIX_CHUNK_MIN - 64
 * bytes of a chunk are skipped without hashing (so the digest at the minimum covers exactly
 * the 64 bytes before it). The last chunk of a file is whatever is left when it ends.
 *
 *   rix_chunker_new(&c, pol) ──> per file: rix_chunker_reset(c)
 *        ──> rix_chunker_scan(&cut, c, buf, n) ... (cut: a chunk ends after the bytes returned)
 *        ──> at the file's end, what was not cut is its last chunk
 */
#ifndef RIX_CHUNKER_H
#define RIX_CHUNKER_H

#include "rix/common.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RIX_CHUNK_MIN ((size_t)512 << 10)
#define RIX_CHUNK_MAX ((size_t)8 << 20)
#define RIX_CHUNK_WINDOW 64u
#define RIX_CHUNK_SPLIT_MASK (((uint64_t)1 << 20) - 1)

typedef struct rix_chunker rix_chunker;

/*
 * A chunker for polynomial pol (rix_config's chunker_polynomial): its tables are computed
 * here, once. *out is the caller's (rix_chunker_free). The state is that of a file's start.
 * One thread at a time per chunker.
 * @return 0; RIX_EINVAL (pol is not a polynomial restic's chunker can use:
 * rix_chunker_polynomial_check); RIX_ENOMEM.
 */
RIX_EXPORT RIX_NODISCARD int rix_chunker_new(rix_chunker **out, uint64_t pol);
/* NULL-safe. */
RIX_EXPORT void rix_chunker_free(rix_chunker *c);

/* The start of a file (or of a stream): no bytes of the current chunk seen. */
RIX_EXPORT void rix_chunker_reset(rix_chunker *c);

/*
 * Feeds buf[0..n) (n may be 0), the next bytes of the file. Returns how many of them belong
 * to the current chunk: when *cut is true the chunk ends after those bytes (the state is reset
 * for the next one, which starts with buf[returned]); when false all n bytes were taken and
 * the chunk goes on. Bytes are not kept: the caller keeps the chunk's bytes.
 */
RIX_EXPORT size_t rix_chunker_scan(bool *cut, rix_chunker *c, const uint8_t *buf, size_t n);

/* Bytes of the current chunk seen so far (0 after a cut or a reset). */
RIX_EXPORT size_t rix_chunker_chunk_len(const rix_chunker *c);

#ifdef __cplusplus
}
#endif
#endif
