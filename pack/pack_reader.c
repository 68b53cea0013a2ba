/*
 * pack/pack_reader.c — reading pack files: trailer, header, blobs.
 *
 * A pack file (FORMAT.md):
 *
 *   0                                        header_start             n-4      n
 *   +--------+--------+-----+----------+-------------------------+----------+
 *   | blob_0 | blob_1 | ... | blob_k-1 | IV | seal(header) | MAC | hlen:u32 |
 *   +--------+--------+-----+----------+-------------------------+----------+
 *   header_start = n - 4 - hlen; blob i's offset = sum of the lengths before it
 *
 *   plaintext header, one entry per blob, in pack order:
 *   | 0|1 | length:u32 | id[32] |                                  37 bytes (data|tree)
 *   | 2|3 | length:u32 | uncompressed_length:u32 | id[32] |         41 bytes (zstd data|tree)
 *   each blob: seal(plaintext) or, compressed (version 2), seal(zstd(plaintext))
 *
 * Invariants checked, in this order, before anything is trusted:
 * - The trailer: n >= 4; 32 <= hlen <= n - 4; hlen <= RIX_PACK_HEADER_MAX (so a header costs
 *   at most 16 MiB however it is damaged).
 * - The header's MAC verifies before any entry is read.
 * - Entries: known type, complete, stored length >= 32 (a sealed object), compressed entries
 *   only in version 2 and with an uncompressed length > 0; the running end of the blobs stays
 *   <= header_start and every offset fits in u32. The entries are counted in a first pass so
 *   the result is one allocation of exactly the right size.
 * - A blob: inside the file; MAC; a declared uncompressed length no bigger than its zstd frame
 *   could possibly produce (RIX_ZSTD_MAX_RATIO) before that much is allocated; exactly that
 *   many bytes out of zstd; SHA-256(plaintext) == ID.
 */
#include <string.h>

#include "rix/alloc.h"
#include "rix/crypto.h"
#include "rix/error.h"
#include "rix/pack.h"
#include "pack_internal.h"


static int check_version(int v)
{
	if (v != 1 && v != 2)
		return rix_error_set(RIX_EINVAL, "pack: repository version %d", v);
	return 0;
}

/* The checks on the trailer's header length, for a pack of size bytes. */
static int check_header_length(uint64_t size, uint32_t hlen)
{
	if (hlen == 0)
		return rix_error_set(RIX_ECORRUPT, "pack: header length is 0");
	if (hlen < RIX_CRYPTO_OVERHEAD)
		return rix_error_set(RIX_ECORRUPT, "pack: header length %u is under the %d-byte crypto overhead",
				     hlen, RIX_CRYPTO_OVERHEAD);
	if (hlen > size - 4)
		return rix_error_set(RIX_ECORRUPT, "pack: header length %u is past the start of a %llu-byte file",
				     hlen, (unsigned long long)size);
	if (hlen > RIX_PACK_HEADER_MAX)
		return rix_error_set(RIX_ECORRUPT, "pack: header length %u is over the limit %u", hlen,
				     RIX_PACK_HEADER_MAX);
	return 0;
}

/* Parses the opened header h[0..hn) of a pack whose header starts at header_start. */
static int parse_entries(const uint8_t *h, size_t hn, uint64_t header_start, int repo_version,
			 rix_blob **out, size_t *count)
{
	size_t cnt = 0, pos = 0;
	uint64_t end = 0;
	/* Pass 1: check everything and count. */
	while (pos < hn) {
		uint8_t t = h[pos];
		if (t > 3)
			return rix_error_set(RIX_ECORRUPT, "pack: header entry %zu has unknown type %u", cnt, t);
		size_t esz = t <= 1 ? RIX_PACK_ENTRY_SIZE : RIX_PACK_ENTRY_SIZE_ZSTD;
		if (hn - pos < esz)
			return rix_error_set(RIX_ECORRUPT, "pack: header entry %zu is partial (%zu of %zu bytes)",
					     cnt, hn - pos, esz);
		uint32_t len = rix__le32(h + pos + 1);
		if (len < RIX_CRYPTO_OVERHEAD)
			return rix_error_set(RIX_ECORRUPT, "pack: header entry %zu has length %u, under %d",
					     cnt, len, RIX_CRYPTO_OVERHEAD);
		if (t >= 2) {
			if (repo_version < 2)
				return rix_error_set(RIX_ECORRUPT,
						     "pack: header entry %zu is compressed in a version 1 repository", cnt);
			if (rix__le32(h + pos + 5) == 0)
				return rix_error_set(RIX_ECORRUPT,
						     "pack: header entry %zu is compressed with uncompressed length 0", cnt);
		}
		if (end > UINT32_MAX)
			return rix_error_set(RIX_ECORRUPT, "pack: header entry %zu has an offset over 2^32", cnt);
		end += len;
		if (end > header_start)
			return rix_error_set(RIX_ECORRUPT,
					     "pack: header entry %zu ends at %llu, past the header start %llu", cnt,
					     (unsigned long long)end, (unsigned long long)header_start);
		pos += esz;
		cnt++;
	}
	if (cnt == 0)
		return 0;
	rix_blob *blobs = rix_malloc(cnt * sizeof(*blobs));
	if (blobs == NULL)
		return rix_error_set(RIX_ENOMEM, "pack: out of memory for %zu header entries", cnt);
	/* Pass 2: fill (everything was checked). */
	uint32_t off = 0;
	pos = 0;
	for (size_t i = 0; i < cnt; i++) {
		uint8_t t = h[pos];
		rix_blob *b = &blobs[i];
		b->type = (t & 1) ? RIX_BLOB_TREE : RIX_BLOB_DATA;
		b->offset = off;
		b->length = rix__le32(h + pos + 1);
		if (t >= 2) {
			b->uncompressed_length = rix__le32(h + pos + 5);
			memcpy(b->id.b, h + pos + 9, RIX_ID_SIZE);
			pos += RIX_PACK_ENTRY_SIZE_ZSTD;
		} else {
			b->uncompressed_length = 0;
			memcpy(b->id.b, h + pos + 5, RIX_ID_SIZE);
			pos += RIX_PACK_ENTRY_SIZE;
		}
		off += b->length;
	}
	*out = blobs;
	*count = cnt;
	return 0;
}

/* Opens the sealed header sealed[0..hlen) into plain (disjoint, or sealed + IV) and parses it. */
static int open_and_parse(const rix_key *key, const uint8_t *sealed, uint32_t hlen, uint8_t *plain,
			  uint64_t header_start, int repo_version, rix_blob **out, size_t *count)
{
	int rc = rix_crypto_open(key, sealed, hlen, plain);
	if (rc != 0)
		return rc == RIX_EAUTH ? rix_error_set(RIX_EAUTH, "pack: header MAC does not verify") : rc;
	return parse_entries(plain, hlen - RIX_CRYPTO_OVERHEAD, header_start, repo_version, out, count);
}

int rix_pack_read_header(rix_blob **out, size_t *count, const rix_key *key, const uint8_t *pack,
			 size_t n, int repo_version)
{
	*out = NULL;
	*count = 0;
	int rc = check_version(repo_version);
	if (rc != 0)
		return rc;
	if (n < 4)
		return rix_error_set(RIX_ECORRUPT, "pack: file of %zu bytes has no trailer", n);
	uint32_t hlen = rix__le32(pack + n - 4);
	rc = check_header_length(n, hlen);
	if (rc != 0)
		return rc;
	uint64_t header_start = (uint64_t)n - 4 - hlen;
	uint8_t *plain = rix_malloc(hlen - RIX_CRYPTO_OVERHEAD + 1);
	if (plain == NULL)
		return rix_error_set(RIX_ENOMEM, "pack: out of memory for a %u-byte header", hlen);
	rc = open_and_parse(key, pack + header_start, hlen, plain, header_start, repo_version, out, count);
	rix_free(plain);
	return rc;
}

int rix_pack_read_header_at(rix_blob **out, size_t *count, const rix_key *key, uint64_t size,
			    rix_pack_read_fn read, void *arg, int repo_version)
{
	*out = NULL;
	*count = 0;
	int rc = check_version(repo_version);
	if (rc != 0)
		return rc;
	if (size < 4)
		return rix_error_set(RIX_ECORRUPT, "pack: file of %llu bytes has no trailer",
				     (unsigned long long)size);
	uint8_t trailer[4];
	rc = read(arg, size - 4, trailer, 4);
	if (rc != 0)
		return rc;
	uint32_t hlen = rix__le32(trailer);
	rc = check_header_length(size, hlen);
	if (rc != 0)
		return rc;
	uint64_t header_start = size - 4 - hlen;
	uint8_t *buf = rix_malloc(hlen);
	if (buf == NULL)
		return rix_error_set(RIX_ENOMEM, "pack: out of memory for a %u-byte header", hlen);
	rc = read(arg, header_start, buf, hlen);
	if (rc == 0) /* decrypted in place, right after the IV */
		rc = open_and_parse(key, buf, hlen, buf + RIX_CRYPTO_IV_SIZE, header_start, repo_version,
				    out, count);
	rix_free(buf);
	return rc;
}

int rix_pack_read_blob(uint8_t **out, size_t *out_len, const rix_key *key, const uint8_t *pack,
		       size_t n, const rix_blob *b, int repo_version)
{
	*out = NULL;
	*out_len = 0;
	if ((uint64_t)b->offset + b->length > n)
		return rix_error_set(RIX_ECORRUPT, "pack: blob at %u+%u is outside the %zu-byte pack", b->offset,
				     b->length, n);
	return rix_blob_decode(out, out_len, key, pack + b->offset, b->length, b, repo_version);
}
