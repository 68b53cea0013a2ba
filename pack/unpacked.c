/*
 * pack/unpacked.c — "unpacked" files (index, snapshot, lock): decode and encode, and the zstd
 * contexts of the module.
 *
 * Layout of an unpacked file (FORMAT.md), as stored and after opening:
 *
 *   file:       | IV[16] | ciphertext ..................... | MAC[16] |
 *                                 | open (MAC first)
 *   plaintext:  | '{' or '[' JSON ...................... |               any version
 *           or  | 0x02 | one zstd frame holding the JSON |               version 2 only
 *
 * Invariants:
 * - Nothing of the plaintext is looked at before rix_crypto_open verified the MAC.
 * - A zstd frame must be exactly the rest of the plaintext (one frame, nothing after it), and
 *   decompresses to at most min(rix__unpacked_max, RIX_UNPACKED_MAX_RATIO x its size) bytes:
 *   a declared content size over the cap is refused before any allocation; a frame without a
 *   declared size is streamed into a buffer that grows (doubling) up to cap + 1 bytes, and
 *   reaching cap + 1 is RIX_ECORRUPT. The streaming window is limited to 2^27 bytes (zstd's
 *   own default limit), so no frame header can make the context allocate more.
 * - Plain JSON is returned in the buffer it was decrypted into (no copy).
 *
 * Streaming (rix_unpacked_decoder_open, then _read): the same checks up front (MAC, first byte,
 * one frame, declared size within the cap), then the frame is decompressed into the caller's
 * buffer a piece at a time (ZSTD_decompressStream), the cap applied as the bytes come. The
 * context then keeps zstd's own window, min(content size, frame window + 2 blocks): 2.25 MiB
 * for what rix writes (windowLog 21 at level 3 for big inputs), never over 2^27 + 256 KiB. No
 * buffer of the whole JSON: the index loader decodes each piece as it comes.
 */
#include <string.h>

#include "rix/alloc.h"
#include "rix/crypto.h"
#include "rix/error.h"
#include "rix/pack.h"
#include "pack_internal.h"

size_t rix__unpacked_max = RIX_UNPACKED_MAX;

#define STREAM_WINDOW_LOG_MAX 27

static void *zstd_alloc(void *opaque, size_t size)
{
	(void)opaque;
	return rix_malloc(size);
}

static void zstd_free(void *opaque, void *p)
{
	(void)opaque;
	rix_free(p);
}

static const ZSTD_customMem rix_zstd_mem = { zstd_alloc, zstd_free, NULL };

ZSTD_DCtx *rix__zstd_dctx_new(void)
{
	return ZSTD_createDCtx_advanced(rix_zstd_mem);
}

ZSTD_CCtx *rix__zstd_cctx_new(void)
{
	return ZSTD_createCCtx_advanced(rix_zstd_mem);
}

/* Streams a frame without a declared content size into a growing buffer, at most cap bytes. */
static int stream_frame(ZSTD_DCtx *dctx, const uint8_t *src, size_t sn, size_t cap, uint8_t **out,
			size_t *out_len)
{
	/* A reused context may hold a frame abandoned half-way (over the cap, or bad): start clean. */
	if (ZSTD_isError(ZSTD_DCtx_reset(dctx, ZSTD_reset_session_only)) ||
	    ZSTD_isError(ZSTD_DCtx_setParameter(dctx, ZSTD_d_windowLogMax, STREAM_WINDOW_LOG_MAX)))
		return rix_error_set(RIX_EIO, "unpacked: cannot reset or limit the zstd context");
	/* One byte beyond the cap tells "exactly cap" from "more than cap". */
	size_t limit = cap + 1;
	size_t size = sn < limit / 4 ? sn * 4 : limit;
	if (size < 4096)
		size = limit < 4096 ? limit : 4096;
	uint8_t *buf = rix_malloc(size);
	if (buf == NULL)
		return rix_error_set(RIX_ENOMEM, "unpacked: out of memory for %zu decompressed bytes", size);
	ZSTD_inBuffer in = { src, sn, 0 };
	ZSTD_outBuffer ob = { buf, size, 0 };
	for (;;) {
		size_t r = ZSTD_decompressStream(dctx, &ob, &in);
		if (ZSTD_isError(r)) {
			rix_free(buf);
			if (ZSTD_getErrorCode(r) == ZSTD_error_memory_allocation)
				return rix_error_set(RIX_ENOMEM, "unpacked: out of memory in zstd");
			return rix_error_set(RIX_ECORRUPT, "unpacked: bad zstd frame: %s", ZSTD_getErrorName(r));
		}
		if (ob.pos > cap) {
			rix_free(buf);
			return rix_error_set(RIX_ECORRUPT,
					     "unpacked: zstd frame of %zu bytes decompresses to more than %zu bytes",
					     sn, cap);
		}
		if (r == 0)
			break; /* frame complete */
		if (ob.pos == ob.size) {
			size_t nsize = ob.size < limit / 2 ? ob.size * 2 : limit;
			uint8_t *nb = rix_realloc(buf, nsize);
			if (nb == NULL) {
				rix_free(buf);
				return rix_error_set(RIX_ENOMEM, "unpacked: out of memory for %zu decompressed bytes",
						     nsize);
			}
			buf = nb;
			ob.dst = buf;
			ob.size = nsize;
		} else if (in.pos == in.size) {
			rix_free(buf);
			return rix_error_set(RIX_ECORRUPT, "unpacked: zstd frame is truncated");
		}
	}
	*out = buf;
	*out_len = ob.pos;
	return 0;
}

/*
 * Decompresses the one zstd frame src[0..sn) within the limits (see the top of the file) with
 * dctx. A frame with a declared size goes into *buf when *cap is enough (else *buf is replaced
 * by a buffer of that size); one without is streamed into a new buffer that replaces *buf.
 */
/*
 * The checks before a frame src[0..sn) is decompressed (see the top of the file): *cap = the
 * most it may decompress to, *fcs = its declared content size or ZSTD_CONTENTSIZE_UNKNOWN.
 * Then the context (made on first use, after the cheap refusals).
 */
static int check_frame(ZSTD_DCtx **dctxp, const uint8_t *src, size_t sn, size_t *cap_out, unsigned long long *fcs_out)
{
	static const uint8_t magic[4] = { 0x28, 0xB5, 0x2F, 0xFD };
	if (sn < 4 || memcmp(src, magic, 4) != 0)
		return rix_error_set(RIX_ECORRUPT, "unpacked: 0x02 not followed by a zstd frame");
	size_t fsize = ZSTD_findFrameCompressedSize(src, sn);
	if (ZSTD_isError(fsize))
		return rix_error_set(RIX_ECORRUPT, "unpacked: bad zstd frame: %s", ZSTD_getErrorName(fsize));
	if (fsize != sn)
		return rix_error_set(RIX_ECORRUPT, "unpacked: %zu bytes after the zstd frame", sn - fsize);
	size_t cap = rix__unpacked_max;
	if (sn <= cap / RIX_UNPACKED_MAX_RATIO)
		cap = sn * RIX_UNPACKED_MAX_RATIO;
	unsigned long long fcs = ZSTD_getFrameContentSize(src, sn);
	if (fcs == ZSTD_CONTENTSIZE_ERROR)
		return rix_error_set(RIX_ECORRUPT, "unpacked: bad zstd frame header");
	if (fcs != ZSTD_CONTENTSIZE_UNKNOWN && fcs > cap)
		return rix_error_set(RIX_ECORRUPT,
				     "unpacked: zstd frame of %zu bytes declares %llu bytes, over the limit %zu",
				     sn, fcs, cap);
	if (*dctxp == NULL && (*dctxp = rix__zstd_dctx_new()) == NULL)
		return rix_error_set(RIX_ENOMEM, "unpacked: out of memory for a zstd context");
	*cap_out = cap;
	*fcs_out = fcs;
	return 0;
}

static int decompress_into(ZSTD_DCtx **dctxp, const uint8_t *src, size_t sn, uint8_t **buf, size_t *cap_io,
			   size_t *out_len)
{
	size_t cap;
	unsigned long long fcs;
	int rc = check_frame(dctxp, src, sn, &cap, &fcs);
	if (rc != 0)
		return rc;
	ZSTD_DCtx *dctx = *dctxp;
	if (fcs == ZSTD_CONTENTSIZE_UNKNOWN) {
		uint8_t *nb = NULL;
		rc = stream_frame(dctx, src, sn, cap, &nb, out_len);
		if (rc == 0 && *buf != NULL && *cap_io >= *out_len) { /* keep the bigger buffer */
			memcpy(*buf, nb, *out_len);
			rix_free(nb);
		} else if (rc == 0) {
			rix_free(*buf);
			*buf = nb;
			*cap_io = *out_len;
		}
		return rc;
	}
	/* Declared size: one call straight into a buffer of at least that size (no window). */
	size_t size = (size_t)fcs;
	if (*buf == NULL || *cap_io < size) {
		uint8_t *nb = rix_malloc(size ? size : 1);
		if (nb == NULL)
			return rix_error_set(RIX_ENOMEM, "unpacked: out of memory for %zu decompressed bytes", size);
		rix_free(*buf);
		*buf = nb;
		*cap_io = size;
	}
	size_t r = ZSTD_decompressDCtx(dctx, *buf, size, src, sn);
	if (ZSTD_isError(r) && ZSTD_getErrorCode(r) == ZSTD_error_memory_allocation)
		return rix_error_set(RIX_ENOMEM, "unpacked: out of memory in zstd");
	if (ZSTD_isError(r) || r != size)
		return rix_error_set(RIX_ECORRUPT, "unpacked: bad zstd frame: %s",
				     ZSTD_isError(r) ? ZSTD_getErrorName(r) : "size differs");
	*out_len = size;
	return 0;
}

/* The checks before a file is opened. */
static int check_file(int repo_version, size_t n)
{
	if (repo_version != 1 && repo_version != 2)
		return rix_error_set(RIX_EINVAL, "unpacked: repository version %d", repo_version);
	if (n < RIX_CRYPTO_OVERHEAD)
		return rix_error_set(RIX_ECORRUPT, "unpacked: file of %zu bytes is shorter than the %d-byte crypto overhead",
				     n, RIX_CRYPTO_OVERHEAD);
	return 0;
}

/* What plaintext plain[0..m) holds: PLAIN_JSON, PLAIN_ZSTD (0x02 and a frame), or an error. */
enum { PLAIN_JSON = 1, PLAIN_ZSTD = 2 };
static int plain_kind(const uint8_t *plain, size_t m, int repo_version)
{
	if (m == 0)
		return rix_error_set(RIX_ECORRUPT, "unpacked: empty plaintext");
	if (plain[0] == '{' || plain[0] == '[')
		return PLAIN_JSON;
	if (plain[0] != RIX_UNPACKED_ZSTD)
		return rix_error_set(RIX_ECORRUPT, "unpacked: unknown first plaintext byte 0x%02x", plain[0]);
	if (repo_version < 2)
		return rix_error_set(RIX_ECORRUPT, "unpacked: compressed file in a version 1 repository");
	return PLAIN_ZSTD;
}

/*
 * After the MAC verified: the JSON of plaintext plain[0..m). Plain JSON is *json = plain; a
 * frame is decompressed into *buf (grown or replaced, see decompress_into) and *json = *buf.
 */
static int decode_opened(ZSTD_DCtx **dctx, const uint8_t *plain, size_t m, int repo_version, uint8_t **buf,
			 size_t *cap, const uint8_t **json, size_t *len)
{
	int kind = plain_kind(plain, m, repo_version);
	if (kind < 0)
		return kind;
	if (kind == PLAIN_JSON) {
		*json = plain;
		*len = m;
		return 0;
	}
	int rc = decompress_into(dctx, plain + 1, m - 1, buf, cap, len);
	if (rc == 0 && *len == 0)
		rc = rix_error_set(RIX_ECORRUPT, "unpacked: the zstd frame holds nothing");
	if (rc == 0)
		*json = *buf;
	return rc;
}

int rix_unpacked_decode(uint8_t **out, size_t *out_len, const rix_key *key, const uint8_t *file,
			size_t n, int repo_version)
{
	*out = NULL;
	*out_len = 0;
	int rc = check_file(repo_version, n);
	if (rc != 0)
		return rc;
	size_t m = n - RIX_CRYPTO_OVERHEAD;
	uint8_t *plain = rix_malloc(m ? m : 1);
	if (plain == NULL)
		return rix_error_set(RIX_ENOMEM, "unpacked: out of memory for %zu bytes", m);
	rc = rix_crypto_open(key, file, n, plain);
	ZSTD_DCtx *dctx = NULL;
	uint8_t *buf = NULL;
	size_t cap = 0, len = 0;
	const uint8_t *json = NULL;
	if (rc == 0)
		rc = decode_opened(&dctx, plain, m, repo_version, &buf, &cap, &json, &len);
	ZSTD_freeDCtx(dctx);
	if (rc == 0 && json == plain) { /* plain JSON: returned in the buffer it was decrypted into */
		*out = plain;
		*out_len = len;
		return 0;
	}
	rix_free(plain);
	if (rc != 0) {
		rix_free(buf);
		return rc;
	}
	*out = buf;
	*out_len = len;
	return 0;
}

int rix_unpacked_encode(uint8_t **out, size_t *out_len, const rix_key *key, const void *json,
			size_t n, int repo_version)
{
	*out = NULL;
	*out_len = 0;
	if (repo_version != 1 && repo_version != 2)
		return rix_error_set(RIX_EINVAL, "unpacked: repository version %d", repo_version);
	if (n > ((size_t)1 << 40) || (repo_version >= 2 && n > rix__unpacked_max))
		return rix_error_set(RIX_EINVAL, "unpacked: %zu bytes of JSON is more than a reader accepts", n);
	if (repo_version == 1) {
		uint8_t *f = rix_malloc(n + RIX_CRYPTO_OVERHEAD);
		if (f == NULL)
			return rix_error_set(RIX_ENOMEM, "unpacked: out of memory for %zu bytes", n);
		int rc = rix_crypto_seal(key, json, n, f);
		if (rc != 0) {
			rix_free(f);
			return rc;
		}
		*out = f;
		*out_len = n + RIX_CRYPTO_OVERHEAD;
		return 0;
	}
	size_t bound = ZSTD_compressBound(n);
	uint8_t *tmp = rix_malloc(1 + bound);
	if (tmp == NULL)
		return rix_error_set(RIX_ENOMEM, "unpacked: out of memory for %zu bytes", bound);
	ZSTD_CCtx *cctx = rix__zstd_cctx_new();
	if (cctx == NULL) {
		rix_free(tmp);
		return rix_error_set(RIX_ENOMEM, "unpacked: out of memory for a zstd context");
	}
	tmp[0] = RIX_UNPACKED_ZSTD;
	size_t c = ZSTD_compress2(cctx, tmp + 1, bound, json, n);
	ZSTD_freeCCtx(cctx);
	if (ZSTD_isError(c)) {
		rix_free(tmp);
		if (ZSTD_getErrorCode(c) == ZSTD_error_memory_allocation)
			return rix_error_set(RIX_ENOMEM, "unpacked: out of memory in zstd");
		return rix_error_set(RIX_EIO, "unpacked: zstd compression failed: %s", ZSTD_getErrorName(c));
	}
	uint8_t *f = rix_malloc(1 + c + RIX_CRYPTO_OVERHEAD);
	int rc = f == NULL ? rix_error_set(RIX_ENOMEM, "unpacked: out of memory for %zu bytes", c)
			   : rix_crypto_seal(key, tmp, 1 + c, f);
	rix_free(tmp);
	if (rc != 0) {
		rix_free(f);
		return rc;
	}
	*out = f;
	*out_len = 1 + c + RIX_CRYPTO_OVERHEAD;
	return 0;
}

struct rix_unpacked_decoder {
	ZSTD_DCtx *dctx;
	uint8_t *buf;
	size_t cap;
	/* Streaming (rix_unpacked_decoder_open/read): the frame, what came out of it so far, and
	 * the most it may give. */
	ZSTD_inBuffer in;
	size_t out, limit;
	bool streaming, done;
};

int rix_unpacked_decoder_new(rix_unpacked_decoder **out)
{
	*out = rix_calloc(1, sizeof(**out));
	if (*out == NULL)
		return rix_error_set(RIX_ENOMEM, "unpacked: out of memory for a decoder");
	return 0;
}

void rix_unpacked_decoder_free(rix_unpacked_decoder *d)
{
	if (d == NULL)
		return;
	ZSTD_freeDCtx(d->dctx);
	rix_free(d->buf);
	rix_free(d);
}

int rix_unpacked_decoder_decode(const uint8_t **out, size_t *out_len, rix_unpacked_decoder *d, const rix_key *key,
				uint8_t *file, size_t n, int repo_version)
{
	*out = NULL;
	*out_len = 0;
	int rc = check_file(repo_version, n);
	if (rc != 0)
		return rc;
	uint8_t *plain = file + RIX_CRYPTO_IV_SIZE; /* decrypted in place, after the MAC verified */
	rc = rix_crypto_open(key, file, n, plain);
	if (rc == 0)
		rc = decode_opened(&d->dctx, plain, n - RIX_CRYPTO_OVERHEAD, repo_version, &d->buf, &d->cap, out,
				   out_len);
	if (rc != 0) {
		*out = NULL;
		*out_len = 0;
	}
	return rc;
}

int rix_unpacked_decoder_open(const uint8_t **out, size_t *out_len, rix_unpacked_decoder *d, const rix_key *key,
			      uint8_t *file, size_t n, int repo_version)
{
	*out = NULL;
	*out_len = 0;
	d->streaming = false;
	int rc = check_file(repo_version, n);
	if (rc != 0)
		return rc;
	uint8_t *plain = file + RIX_CRYPTO_IV_SIZE; /* decrypted in place, after the MAC verified */
	size_t m = n - RIX_CRYPTO_OVERHEAD;
	rc = rix_crypto_open(key, file, n, plain);
	if (rc != 0)
		return rc;
	int kind = plain_kind(plain, m, repo_version);
	if (kind < 0)
		return kind;
	if (kind == PLAIN_JSON) {
		*out = plain;
		*out_len = m;
		return 0;
	}
	unsigned long long fcs;
	rc = check_frame(&d->dctx, plain + 1, m - 1, &d->limit, &fcs);
	if (rc != 0)
		return rc;
	/* A reused context may hold a frame abandoned half-way: start clean. The window limit
	 * bounds what the frame header can make the context allocate (see the top of the file). */
	if (ZSTD_isError(ZSTD_DCtx_reset(d->dctx, ZSTD_reset_session_only)) ||
	    ZSTD_isError(ZSTD_DCtx_setParameter(d->dctx, ZSTD_d_windowLogMax, STREAM_WINDOW_LOG_MAX)))
		return rix_error_set(RIX_EIO, "unpacked: cannot reset or limit the zstd context");
	d->in = (ZSTD_inBuffer){ plain + 1, m - 1, 0 };
	d->out = 0;
	d->streaming = true;
	d->done = false;
	return 0;
}

int rix_unpacked_decoder_read(rix_unpacked_decoder *d, void *buf, size_t cap, size_t *got)
{
	*got = 0;
	if (!d->streaming || d->done || cap == 0)
		return 0;
	ZSTD_outBuffer ob = { buf, cap, 0 };
	while (ob.pos < ob.size) {
		size_t r = ZSTD_decompressStream(d->dctx, &ob, &d->in);
		if (ZSTD_isError(r)) {
			d->streaming = false;
			if (ZSTD_getErrorCode(r) == ZSTD_error_memory_allocation)
				return rix_error_set(RIX_ENOMEM, "unpacked: out of memory in zstd");
			return rix_error_set(RIX_ECORRUPT, "unpacked: bad zstd frame: %s", ZSTD_getErrorName(r));
		}
		if (r == 0) {
			d->done = true; /* frame complete (its checksum, if any, verified) */
			break;
		}
		if (ob.pos < ob.size && d->in.pos == d->in.size) {
			d->streaming = false;
			return rix_error_set(RIX_ECORRUPT, "unpacked: zstd frame is truncated");
		}
	}
	d->out += ob.pos;
	if (d->out > d->limit) {
		d->streaming = false;
		return rix_error_set(RIX_ECORRUPT, "unpacked: zstd frame of %zu bytes decompresses to more than %zu bytes",
				     d->in.size, d->limit);
	}
	if (d->done && d->out == 0) {
		d->streaming = false;
		return rix_error_set(RIX_ECORRUPT, "unpacked: the zstd frame holds nothing");
	}
	*got = ob.pos;
	return 0;
}
