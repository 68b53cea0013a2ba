/*
 * pack/codec.c — the blob codec: a blob's plaintext to the bytes stored in a pack and back.
 *
 *   encode:  plain --(zstd, when the mode and the saving say so)--> z --seal--> out
 *            | IV[16] | AES-256-CTR(plain or z) | MAC[16] |     header: length, uncompressed_len
 *   decode:  stored --MAC, decrypt--> (out, or scratch when compressed) --unzstd--> out
 *            --SHA-256 == ID
 *
 * Which blobs are compressed (FORMAT.md): none in version 1; in version 2 every non-empty tree
 * blob, and data blobs by mode: off never; auto (level RIX_ZSTD_LEVEL_AUTO, with the smaller
 * match tables RIX_ZSTD_AUTO_HASH_LOG / _CHAIN_LOG) when the frame is
 * smaller by at least min_saving thousandths of the plaintext; max (RIX_ZSTD_LEVEL_MAX) when
 * the frame is smaller at all. A frame that does not pay is thrown away and the plaintext is
 * sealed instead, so a stored data blob is never bigger than seal(plain).
 *
 * Invariants:
 * - A codec owns its zstd contexts (made lazily, on rix's allocator) and one scratch buffer
 *   that only grows; a blob no bigger than an earlier one costs no allocation.
 * - Frames are written with their content size and without zstd's checksum (the SHA-256 of the
 *   plaintext checks more), one frame per blob.
 * - Decoding checks, before trusting anything: version, n >= 32, no compression in version 1,
 *   a declared uncompressed length its frame could produce (RIX_ZSTD_MAX_RATIO), the caller's
 *   capacity; then the MAC before any byte is decrypted; then exactly the declared size out of
 *   zstd; then the ID.
 */
#include <stdio.h>
#include <string.h>

#include "rix/alloc.h"
#include "rix/crypto.h"
#include "rix/error.h"
#include "rix/pack.h"
#include "pack_internal.h"

struct rix_blob_codec {
	const rix_key *key; /* borrowed */
	int version;
	rix_compression mode;
	unsigned min_saving; /* thousandths, auto only */
	int level;           /* 0: the mode's own */
	int cctx_level;      /* level the compression context is set to, 0 = none yet */
	ZSTD_CCtx *cctx;
	ZSTD_DCtx *dctx;
	uint8_t *scratch;
	size_t scratch_cap;
};

static int check_version(int v)
{
	if (v != 1 && v != 2)
		return rix_error_set(RIX_EINVAL, "pack: repository version %d", v);
	return 0;
}

int rix_blob_codec_new(rix_blob_codec **out, const rix_key *key, int repo_version, rix_compression mode)
{
	*out = NULL;
	int rc = check_version(repo_version);
	if (rc != 0)
		return rc;
	if (mode != RIX_COMPRESSION_OFF && mode != RIX_COMPRESSION_AUTO && mode != RIX_COMPRESSION_MAX)
		return rix_error_set(RIX_EINVAL, "pack: unknown compression mode %d", (int)mode);
	rix_blob_codec *c = rix_calloc(1, sizeof(*c));
	if (c == NULL)
		return rix_error_set(RIX_ENOMEM, "pack: out of memory for a blob codec");
	c->key = key;
	c->version = repo_version;
	c->mode = mode;
	c->min_saving = RIX_AUTO_MIN_SAVING_PERMILLE;
	*out = c;
	return 0;
}

void rix_blob_codec_free(rix_blob_codec *c)
{
	if (c == NULL)
		return;
	ZSTD_freeCCtx(c->cctx);
	ZSTD_freeDCtx(c->dctx);
	rix_free(c->scratch);
	rix_free(c);
}

int rix__codec_version(const rix_blob_codec *c)
{
	return c->version;
}

void rix_blob_codec_set_min_saving(rix_blob_codec *c, unsigned permille)
{
	c->min_saving = permille < 1000 ? permille : 999;
}

void rix_blob_codec_set_level(rix_blob_codec *c, int level)
{
	if (level < 0)
		level = 1;
	c->level = level > ZSTD_maxCLevel() ? ZSTD_maxCLevel() : level;
}

size_t rix_blob_stored_bound(size_t n)
{
	return ZSTD_compressBound(n) + RIX_CRYPTO_OVERHEAD;
}

/* Room for n bytes in the scratch buffer (its old contents are not kept). */
static int scratch_reserve(rix_blob_codec *c, size_t n)
{
	if (n <= c->scratch_cap)
		return 0;
	uint8_t *p = rix_malloc(n);
	if (p == NULL)
		return rix_error_set(RIX_ENOMEM, "pack: out of memory for a %zu-byte codec buffer", n);
	rix_free(c->scratch);
	c->scratch = p;
	c->scratch_cap = n;
	return 0;
}

/* zstd(plain) into the scratch buffer at level; *zn its size. */
static int compress(rix_blob_codec *c, int level, const void *plain, size_t n, size_t *zn)
{
	if (c->cctx == NULL && (c->cctx = rix__zstd_cctx_new()) == NULL)
		return rix_error_set(RIX_ENOMEM, "pack: out of memory for a zstd context");
	if (c->cctx_level != level) {
		size_t r = ZSTD_CCtx_setParameter(c->cctx, ZSTD_c_compressionLevel, level);
		if (!ZSTD_isError(r))
			r = ZSTD_CCtx_setParameter(c->cctx, ZSTD_c_checksumFlag, 0);
		if (!ZSTD_isError(r))
			r = ZSTD_CCtx_setParameter(c->cctx, ZSTD_c_contentSizeFlag, 1);
		/* auto's smaller match tables; 0 (the level's own) for any other level */
		const bool autolevel = level == RIX_ZSTD_LEVEL_AUTO;
		if (!ZSTD_isError(r))
			r = ZSTD_CCtx_setParameter(c->cctx, ZSTD_c_hashLog, autolevel ? RIX_ZSTD_AUTO_HASH_LOG : 0);
		if (!ZSTD_isError(r))
			r = ZSTD_CCtx_setParameter(c->cctx, ZSTD_c_chainLog, autolevel ? RIX_ZSTD_AUTO_CHAIN_LOG : 0);
		if (ZSTD_isError(r)) {
			c->cctx_level = 0; /* some set, some not: all of them again next time */
			return rix_error_set(RIX_EIO, "pack: zstd: %s", ZSTD_getErrorName(r));
		}
		c->cctx_level = level;
	}
	int rc = scratch_reserve(c, ZSTD_compressBound(n));
	if (rc != 0)
		return rc;
	size_t r = ZSTD_compress2(c->cctx, c->scratch, c->scratch_cap, plain, n);
	if (ZSTD_isError(r)) {
		c->cctx_level = 0; /* the context is reset on error: set the parameters again */
		if (ZSTD_getErrorCode(r) == ZSTD_error_memory_allocation)
			return rix_error_set(RIX_ENOMEM, "pack: out of memory in zstd");
		return rix_error_set(RIX_EIO, "pack: zstd: %s", ZSTD_getErrorName(r));
	}
	*zn = r;
	return 0;
}

int rix_blob_codec_encode(uint32_t *stored_len, uint32_t *uncompressed_len, rix_blob_codec *c, rix_blob_type t, const void *plain,
			  size_t n, uint8_t *out, size_t cap)
{
	*stored_len = 0;
	*uncompressed_len = 0;
	if (n > RIX_BLOB_MAX)
		return rix_error_set(RIX_EINVAL, "pack: blob of %zu bytes is over the %zu-byte limit", n,
				     RIX_BLOB_MAX);
	if (cap < rix_blob_stored_bound(n))
		return rix_error_set(RIX_EINVAL, "pack: %zu bytes of room for a %zu-byte blob (need %zu)", cap, n,
				     rix_blob_stored_bound(n));
	int level = 0;
	if (c->version >= 2 && n > 0) {
		if (t == RIX_BLOB_TREE)
			level = c->mode == RIX_COMPRESSION_MAX ? RIX_ZSTD_LEVEL_MAX : RIX_ZSTD_LEVEL_AUTO;
		else if (c->mode == RIX_COMPRESSION_AUTO)
			level = RIX_ZSTD_LEVEL_AUTO;
		else if (c->mode == RIX_COMPRESSION_MAX)
			level = RIX_ZSTD_LEVEL_MAX;
	}
	if (level != 0 && c->level != 0)
		level = c->level;
	const void *src = plain;
	size_t sn = n;
	if (level != 0) {
		size_t zn = 0;
		int rc = compress(c, level, plain, n, &zn);
		if (rc != 0)
			return rc;
		/* Trees always; data when it is smaller by the mode's margin. */
		int keep = t == RIX_BLOB_TREE;
		if (!keep && zn < n)
			keep = c->mode == RIX_COMPRESSION_MAX ||
			       (uint64_t)(n - zn) * 1000 >= (uint64_t)n * c->min_saving;
		if (keep) {
			src = c->scratch;
			sn = zn;
			*uncompressed_len = (uint32_t)n;
		}
	}
	int rc = rix_crypto_seal(c->key, src, sn, out);
	if (rc != 0) {
		*uncompressed_len = 0;
		return rc;
	}
	*stored_len = (uint32_t)(sn + RIX_CRYPTO_OVERHEAD);
	return 0;
}

/* Decompresses frame z[0..zn) into exactly ulen bytes of out. */
static int decompress(rix_blob_codec *c, const uint8_t *z, size_t zn, uint32_t ulen, uint8_t *out)
{
	unsigned long long fcs = ZSTD_getFrameContentSize(z, zn);
	if (fcs == ZSTD_CONTENTSIZE_ERROR)
		return rix_error_set(RIX_ECORRUPT, "pack: compressed blob is not a zstd frame");
	if (fcs != ZSTD_CONTENTSIZE_UNKNOWN && fcs != ulen)
		return rix_error_set(RIX_ECORRUPT, "pack: blob's zstd frame declares %llu bytes, header says %u",
				     fcs, ulen);
	if (c->dctx == NULL && (c->dctx = rix__zstd_dctx_new()) == NULL)
		return rix_error_set(RIX_ENOMEM, "pack: out of memory for a zstd context");
	/* out holds exactly ulen bytes: a frame holding more fails with dstSize_tooSmall. */
	size_t r = ZSTD_decompressDCtx(c->dctx, out, ulen, z, zn);
	if (ZSTD_isError(r) && ZSTD_getErrorCode(r) == ZSTD_error_memory_allocation)
		return rix_error_set(RIX_ENOMEM, "pack: out of memory in zstd");
	if (ZSTD_isError(r) && ZSTD_getErrorCode(r) == ZSTD_error_dstSize_tooSmall)
		return rix_error_set(RIX_ECORRUPT, "pack: blob decompresses to more than %u bytes", ulen);
	if (ZSTD_isError(r))
		return rix_error_set(RIX_ECORRUPT, "pack: bad zstd in blob: %s", ZSTD_getErrorName(r));
	if (r != ulen)
		return rix_error_set(RIX_ECORRUPT, "pack: blob decompresses to %zu bytes, header says %u", r, ulen);
	return 0;
}

/*
 * The checks on a stored blob of n bytes described by b, before anything is allocated or opened:
 * *plain_len is the size it decodes to.
 */
static int check_stored(int version, size_t n, const rix_blob *b, size_t *plain_len)
{
	if (n < RIX_CRYPTO_OVERHEAD)
		return rix_error_set(RIX_ECORRUPT, "pack: blob of %zu bytes is under the %d-byte crypto overhead",
				     n, RIX_CRYPTO_OVERHEAD);
	uint32_t ulen = b->uncompressed_length;
	if (ulen != 0 && version < 2)
		return rix_error_set(RIX_ECORRUPT, "pack: compressed blob in a version 1 repository");
	size_t m = n - RIX_CRYPTO_OVERHEAD;
	if (ulen != 0 && ulen / RIX_ZSTD_MAX_RATIO > m)
		return rix_error_set(RIX_ECORRUPT,
				     "pack: blob of %zu compressed bytes cannot decompress to %u bytes", m, ulen);
	*plain_len = ulen != 0 ? ulen : m;
	return 0;
}

/* rix_blob_codec_decode (inplace NULL) and _in_place (inplace: stored, writable; keep as there). */
static int decode(size_t *out_len, rix_blob_codec *c, const uint8_t *stored, uint8_t *inplace, bool keep, size_t n,
		  const rix_blob *b, uint8_t *out, size_t cap)
{
	*out_len = 0;
	size_t plain_len = 0;
	int rc = check_stored(c->version, n, b, &plain_len);
	if (rc != 0)
		return rc;
	uint32_t ulen = b->uncompressed_length;
	size_t m = n - RIX_CRYPTO_OVERHEAD;
	if (cap < plain_len)
		return rix_error_set(RIX_EINVAL, "pack: %zu bytes of room for a %zu-byte blob", cap, plain_len);
	uint8_t *dst = out;
	if (ulen != 0 && inplace != NULL) {
		dst = inplace + RIX_CRYPTO_IV_SIZE;
	} else if (ulen != 0) {
		rc = scratch_reserve(c, m);
		if (rc != 0)
			return rc;
		dst = c->scratch;
	}
	rc = rix_crypto_open(c->key, stored, n, dst);
	if (rc != 0)
		return rc == RIX_EAUTH ? rix_error_set(RIX_EAUTH, "pack: blob MAC does not verify") : rc;
	if (ulen != 0)
		rc = decompress(c, dst, m, ulen, out);
	if (ulen != 0 && inplace != NULL && keep) {
		char msg[256];
		snprintf(msg, sizeof(msg), "%s", rc != 0 ? rix_error_last() : "");
		int src = rix_crypto_reseal_in_place(c->key, inplace, n);
		if (src != 0)
			return src;
		if (rc != 0)
			rix_error_set(rc, "%s", msg);
	}
	if (rc != 0)
		return rc;
	rix_id id;
	rix_sha256(&id, out, plain_len);
	if (memcmp(id.b, b->id.b, RIX_ID_SIZE) != 0)
		return rix_error_set(RIX_ECORRUPT, "pack: blob ID mismatch");
	*out_len = plain_len;
	return 0;
}

int rix_blob_codec_decode(size_t *out_len, rix_blob_codec *c, const uint8_t *stored, size_t n,
			  const rix_blob *b, uint8_t *out, size_t cap)
{
	return decode(out_len, c, stored, NULL, false, n, b, out, cap);
}

int rix_blob_codec_decode_in_place(size_t *out_len, rix_blob_codec *c, uint8_t *stored, size_t n,
				   const rix_blob *b, uint8_t *out, size_t cap, bool keep)
{
	return decode(out_len, c, stored, stored, keep, n, b, out, cap);
}

int rix_blob_decode(uint8_t **out, size_t *out_len, const rix_key *key, const uint8_t *stored,
		    size_t n, const rix_blob *b, int repo_version)
{
	*out = NULL;
	*out_len = 0;
	int rc = check_version(repo_version);
	if (rc != 0)
		return rc;
	/* A codec on the stack: its contexts and scratch live for this call only. */
	rix_blob_codec c = { .key = key, .version = repo_version };
	size_t plain_len = 0;
	rc = check_stored(repo_version, n, b, &plain_len); /* before a hostile length is allocated */
	if (rc != 0)
		return rc;
	uint8_t *buf = rix_malloc(plain_len ? plain_len : 1);
	if (buf == NULL)
		return rix_error_set(RIX_ENOMEM, "pack: out of memory for a %zu-byte blob", plain_len);
	rc = rix_blob_codec_decode(out_len, &c, stored, n, b, buf, plain_len);
	ZSTD_freeDCtx(c.dctx);
	rix_free(c.scratch);
	if (rc != 0) {
		rix_free(buf);
		return rc;
	}
	*out = buf;
	return 0;
}
