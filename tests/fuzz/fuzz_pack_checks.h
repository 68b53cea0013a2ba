/*
 * tests/fuzz/fuzz_pack_checks.h — the properties of the pack/ fuzz targets (fuzz_pack_header,
 * fuzz_unpacked), shared with tests/test_fuzz_replay.c. Header-only, static inline; each check
 * returns NULL when the property holds, or a description of the violation.
 *
 * A MAC stops random bytes at the door, so the targets seal what the fuzzer gives them with a
 * fixed key first: what gets fuzzed is everything after the MAC check.
 *
 * fuzz_unpacked input:   | flags | body ... |
 *   flags bit 0: repository version 1 (else 2); bit 1: seal body as the plaintext and decode
 *   it (any first byte, any zstd frame); else encode body as JSON, decode, compare.
 *
 * fuzz_pack_header input: | flags | ... |
 *   flags bit 0: version 1 (else 2).
 *   bit 1 set, "raw":  | flags | area_len:u16 | hlen:u32 | blob area | header plaintext |
 *       pack = blob area || seal(header plaintext) || (bit 2 ? hlen : the true length);
 *       parse, then read every listed blob (the area is not sealed: MAC failures expected).
 *   bit 1 clear, "built": records | t:u8 | len:u16 | payload[len] | (at most 64):
 *       t & 3 = entry type; t & 8 with a compressed type: the target zstd-compresses the
 *       payload; else a compressed type stores the payload as a given frame. t & 4 spoils the
 *       entry (ID or uncompressed length). The pack is built, parsed and every blob read;
 *       each must succeed exactly when the target expects it to, with the right bytes.
 */
#ifndef RIX_FUZZ_PACK_CHECKS_H
#define RIX_FUZZ_PACK_CHECKS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rix/rix.h"
#include "pack/pack_internal.h"

static inline const rix_key *rix_fuzz_pack_key(void)
{
	static rix_key *key;
	if (key == NULL) {
		uint8_t raw[64];
		for (int i = 0; i < 64; i++)
			raw[i] = (uint8_t)(i * 7 + 1);
		if (rix_key_from_bytes(&key, raw, raw + 32, raw + 48) != 0)
			abort();
		/* Small caps so that inputs of a few KB reach the limits. */
		rix__unpacked_max = (size_t)1 << 20;
	}
	return key;
}

static inline bool rix_fuzz_failed_cleanly(int rc, const void *out)
{
	return out == NULL && (rc == RIX_ECORRUPT || rc == RIX_EAUTH || rc == RIX_ENOMEM) &&
	       rix_error_last()[0] != '\0';
}

static inline const char *rix_fuzz_check_unpacked(const uint8_t *data, size_t size)
{
	if (size < 1)
		return NULL;
	const rix_key *key = rix_fuzz_pack_key();
	int version = (data[0] & 1) ? 1 : 2;
	const uint8_t *body = data + 1;
	size_t bn = size - 1;
	uint8_t *file = NULL, *out = (uint8_t *)1;
	size_t fn = 0, on = 0;
	const char *why = NULL;
	int rc;
	if (data[0] & 2) {
		fn = bn + RIX_CRYPTO_OVERHEAD;
		file = malloc(fn);
		if (file == NULL || rix_crypto_seal(key, body, bn, file) != 0)
			abort();
		rc = rix_unpacked_decode(&out, &on, key, file, fn, version);
		if (rc == 0) {
			if (bn > 0 && (body[0] == '{' || body[0] == '[')) {
				if (on != bn || memcmp(out, body, bn) != 0)
					why = "plain JSON not returned as it is";
			} else if (bn == 0 || body[0] != RIX_UNPACKED_ZSTD || version != 2) {
				why = "decode accepted a bad first byte or 0x02 in version 1";
			} else if (on > rix__unpacked_max || on / RIX_UNPACKED_MAX_RATIO > bn) {
				why = "decompressed past the cap";
			}
			rix_free(out);
		} else if (!rix_fuzz_failed_cleanly(rc, out) || rc == RIX_EAUTH) {
			why = "decode failed without a clean error";
		}
	} else {
		rc = rix_unpacked_encode(&file, &fn, key, body, bn, version);
		if (rc != 0)
			return rc == RIX_ENOMEM ? NULL : "encode failed";
		rc = rix_unpacked_decode(&out, &on, key, file, fn, version);
		bool json = bn > 0 && (body[0] == '{' || body[0] == '[');
		if (rc == 0) {
			if (version == 1 && !json)
				why = "version 1 decoded a non-JSON plaintext";
			else if (on != bn || memcmp(out, body, bn) != 0)
				why = "round trip changed the bytes";
			rix_free(out);
		} else if (!rix_fuzz_failed_cleanly(rc, out) || rc == RIX_EAUTH) {
			why = "decode of an encoded file failed without a clean error";
		} else if (rc == RIX_ECORRUPT && !(version == 1 && !json) && bn / RIX_UNPACKED_MAX_RATIO == 0 &&
			   bn <= rix__unpacked_max && bn > 0) {
			/* version 2 of small input must round-trip unless over the ratio cap */
			why = "version 2 round trip failed";
		}
		rix_free(file);
		file = NULL;
	}
	if (data[0] & 2)
		free(file);
	return why;
}

/* Checks one listed blob against what the builder expects (want == NULL: must fail). */
static inline const char *rix_fuzz_pack_read_one(const uint8_t *pack, size_t pn, const rix_blob *b,
						 int version, const uint8_t *want, size_t want_len)
{
	uint8_t *out = (uint8_t *)1;
	size_t on = 0;
	int rc = rix_pack_read_blob(&out, &on, rix_fuzz_pack_key(), pack, pn, b, version);
	if (rc == 0) {
		rix_id id;
		rix_sha256(&id, out, on);
		bool same_id = memcmp(id.b, b->id.b, RIX_ID_SIZE) == 0;
		bool ok = same_id && (want == NULL || (on == want_len && memcmp(out, want, on) == 0));
		rix_free(out);
		if (!ok)
			return "read_blob returned bytes that do not hash to the ID or differ";
		if (want == NULL)
			return "read_blob succeeded on a spoiled blob";
		return NULL;
	}
	if (!rix_fuzz_failed_cleanly(rc, out))
		return "read_blob failed without a clean error";
	if (want != NULL && rc != RIX_ENOMEM)
		return "read_blob failed on a good blob";
	return NULL;
}

static inline const char *rix_fuzz_check_pack_raw(const uint8_t *data, size_t size, int version)
{
	if (size < 7)
		return NULL;
	size_t area = (size_t)data[1] | (size_t)data[2] << 8;
	uint32_t fake = rix__le32(data + 3);
	const uint8_t *p = data + 7;
	size_t rest = size - 7;
	if (area > rest)
		area = rest;
	size_t hn = rest - area, hlen = hn + RIX_CRYPTO_OVERHEAD;
	size_t pn = area + hlen + 4;
	uint8_t *pack = malloc(pn);
	if (pack == NULL)
		abort();
	memcpy(pack, p, area);
	if (rix_crypto_seal(rix_fuzz_pack_key(), p + area, hn, pack + area) != 0)
		abort();
	rix__put_le32(pack + pn - 4, (data[0] & 4) ? fake : (uint32_t)hlen);
	rix_blob *blobs = (rix_blob *)1;
	size_t cnt = 7;
	const char *why = NULL;
	int rc = rix_pack_read_header(&blobs, &cnt, rix_fuzz_pack_key(), pack, pn, version);
	if (rc == 0) {
		uint64_t end = 0;
		for (size_t i = 0; i < cnt && why == NULL; i++) {
			if (blobs[i].offset != end || blobs[i].length < RIX_CRYPTO_OVERHEAD)
				why = "header entries not contiguous from 0, or too short";
			end += blobs[i].length;
			if (why == NULL)
				why = rix_fuzz_pack_read_one(pack, pn, &blobs[i], version, NULL, 0);
		}
		if (why == NULL && end > pn - 4 - ((data[0] & 4) ? fake : hlen))
			why = "blobs run into the header";
		if (why == NULL && (cnt == 0) != (blobs == NULL))
			why = "count and array disagree";
		rix_free(blobs);
	} else if (!rix_fuzz_failed_cleanly(rc, blobs) || cnt != 0) {
		why = "read_header failed without a clean error";
	}
	free(pack);
	return why;
}

static inline const char *rix_fuzz_check_pack_built(const uint8_t *data, size_t size, int version)
{
	enum { MAXREC = 64 };
	const rix_key *key = rix_fuzz_pack_key();
	size_t pos = 1, nrec = 0;
	size_t cap = 64, pn = 0;
	uint8_t *pack = malloc(cap), *hdr = malloc(MAXREC * RIX_PACK_ENTRY_SIZE_ZSTD);
	uint8_t *want[MAXREC];
	size_t want_len[MAXREC];
	bool good[MAXREC], compressed_any = false;
	size_t hn = 0;
	const char *why = NULL;
	if (pack == NULL || hdr == NULL)
		abort();
	while (pos + 3 <= size && nrec < MAXREC) {
		uint8_t t = data[pos];
		size_t len = (size_t)data[pos + 1] | (size_t)data[pos + 2] << 8;
		pos += 3;
		if (len > size - pos)
			len = size - pos;
		const uint8_t *pl = data + pos;
		pos += len;
		uint8_t type = t & 3;
		/* stored: the bytes to seal; plain: what reading must give back. */
		uint8_t *stored = NULL, *plain = malloc(len ? len : 1);
		size_t sn = 0, plen = len;
		uint32_t ulen = 0;
		bool ok = true;
		if (plain == NULL)
			abort();
		memcpy(plain, pl, len);
		if (type >= 2 && (t & 8)) {
			size_t bound = ZSTD_compressBound(len);
			stored = malloc(bound);
			if (stored == NULL)
				abort();
			sn = ZSTD_compress(stored, bound, pl, len, 1);
			if (ZSTD_isError(sn))
				abort();
			ulen = (uint32_t)len;
		} else if (type >= 2) {
			stored = malloc(len ? len : 1);
			if (stored == NULL)
				abort();
			memcpy(stored, pl, len);
			sn = len;
			/* What the frame really holds, by zstd's plain API (bounded). */
			size_t dcap = 1 << 16;
			uint8_t *d = malloc(dcap);
			if (d == NULL)
				abort();
			size_t r = ZSTD_decompress(d, dcap, pl, len);
			free(plain);
			if (ZSTD_isError(r)) {
				plain = d;
				plen = 0;
				ok = false;
				ulen = (uint32_t)len + 1;
			} else {
				plain = d;
				plen = r;
				ulen = (uint32_t)r;
			}
		} else {
			stored = malloc(len ? len : 1);
			if (stored == NULL)
				abort();
			memcpy(stored, pl, len);
			sn = len;
		}
		if (type >= 2 && ulen == 0) { /* 0 would read as "not compressed": keep it compressed */
			ulen = 1;
			ok = false;
		}
		if (type >= 2)
			compressed_any = true;
		rix_id id;
		rix_sha256(&id, plain, plen);
		if (t & 4) {
			ok = false;
			if (type >= 2)
				ulen = ulen + 1 == 0 ? 1 : ulen + 1;
			else
				id.b[0] ^= 1;
		}
		while (pn + sn + RIX_CRYPTO_OVERHEAD > cap) {
			cap *= 2;
			pack = realloc(pack, cap);
			if (pack == NULL)
				abort();
		}
		if (rix_crypto_seal(key, stored, sn, pack + pn) != 0)
			abort();
		uint8_t *e = hdr + hn;
		e[0] = type;
		rix__put_le32(e + 1, (uint32_t)(sn + RIX_CRYPTO_OVERHEAD));
		if (type >= 2) {
			rix__put_le32(e + 5, ulen);
			memcpy(e + 9, id.b, RIX_ID_SIZE);
			hn += RIX_PACK_ENTRY_SIZE_ZSTD;
		} else {
			memcpy(e + 5, id.b, RIX_ID_SIZE);
			hn += RIX_PACK_ENTRY_SIZE;
		}
		pn += sn + RIX_CRYPTO_OVERHEAD;
		free(stored);
		want[nrec] = plain;
		want_len[nrec] = plen;
		good[nrec] = ok;
		nrec++;
	}
	size_t hlen = hn + RIX_CRYPTO_OVERHEAD;
	pack = realloc(pack, pn + hlen + 4);
	if (pack == NULL)
		abort();
	if (rix_crypto_seal(key, hdr, hn, pack + pn) != 0)
		abort();
	rix__put_le32(pack + pn + hlen, (uint32_t)hlen);
	pn += hlen + 4;
	rix_blob *blobs = NULL;
	size_t cnt = 0;
	int rc = rix_pack_read_header(&blobs, &cnt, key, pack, pn, version);
	if (rc != 0) {
		if (rc == RIX_ENOMEM && rix_fuzz_failed_cleanly(rc, blobs))
			why = NULL;
		else if (!(version == 1 && compressed_any && rc == RIX_ECORRUPT))
			why = "read_header failed on a built pack";
	} else if (version == 1 && compressed_any) {
		why = "version 1 accepted compressed entries";
	} else if (cnt != nrec) {
		why = "wrong entry count";
	} else {
		for (size_t i = 0; i < cnt && why == NULL; i++)
			why = rix_fuzz_pack_read_one(pack, pn, &blobs[i], version, good[i] ? want[i] : NULL,
						     want_len[i]);
	}
	rix_free(blobs);
	for (size_t i = 0; i < nrec; i++)
		free(want[i]);
	free(pack);
	free(hdr);
	return why;
}

static inline const char *rix_fuzz_check_pack(const uint8_t *data, size_t size)
{
	if (size < 1)
		return NULL;
	rix_error_clear();
	int version = (data[0] & 1) ? 1 : 2;
	if (data[0] & 2)
		return rix_fuzz_check_pack_raw(data, size, version);
	return rix_fuzz_check_pack_built(data, size, version);
}

#endif
