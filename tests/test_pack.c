/*
 * tests/test_pack.c — pack/: unpacked files and pack files.
 *
 * Interoperability: three repositories made by restic 0.14 (tests/data/restic_pack_v1, _v2 with
 * compression auto, _v2max with compression max; password in restic_repo_password) hold data
 * and tree packs, an index and a snapshot. Every pack header is read and agrees with the index
 * file; every blob is read and verified (SHA-256); the blob set equals `restic list blobs`
 * (blobs.expected); the snapshot equals `restic cat snapshot` (snapshot.expected.json).
 *
 * Bad input, a test per case: truncation at every length, every flipped byte, each header
 * length check, bad entries, wrong decompressed sizes, ID mismatch, zstd bombs (crafted frames
 * with and without a declared size), unknown first bytes, 0x02 in version 1, wrong key; and
 * allocation failure at every allocation, without leaks.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <jansson.h>

#include "rix/rix.h"
#include "pack/pack_internal.h"
#include "testutil.h"

/* ---- files ---------------------------------------------------------------------------------- */

static rix_key *open_repo_key(const char *repo)
{
	char dir[1024], path[4096], names[4][65];
	snprintf(dir, sizeof(dir), "%s/%s/keys", rix_test_data_dir(), repo);
	assert_int_equal(rix_test_list_ids(dir, names, 4), 1);
	snprintf(path, sizeof(path), "%s/%s", dir, names[0]);
	size_t len, plen;
	char *kf = (char *)rix_test_must_read(path, &len);
	snprintf(path, sizeof(path), "%s/restic_repo_password", rix_test_data_dir());
	char *pw = (char *)rix_test_must_read(path, &plen);
	rix_key *key = NULL;
	if (rix_key_open_file(&key, kf, len, pw, plen) != 0)
		fail_msg("opening %s's key: %s", repo, rix_error_last());
	free(kf);
	free(pw);
	return key;
}

/* ---- building packs and frames -------------------------------------------------------------- */

typedef struct tbuf {
	uint8_t *p;
	size_t n, cap;
} tbuf;

static void tb_put(tbuf *b, const void *src, size_t n)
{
	if (b->n + n > b->cap) {
		b->cap = (b->n + n) * 2 + 64;
		b->p = realloc(b->p, b->cap);
		assert_non_null(b->p);
	}
	if (n > 0)
		memcpy(b->p + b->n, src, n);
	b->n += n;
}

static void tb_u32(tbuf *b, uint32_t v)
{
	uint8_t le[4];
	rix__put_le32(le, v);
	tb_put(b, le, 4);
}

/* zstd at level 3, with or without the content size in the frame header. */
static uint8_t *zcompress(const void *src, size_t n, int content_size, size_t *out_n)
{
	size_t bound = ZSTD_compressBound(n);
	uint8_t *out = malloc(bound);
	ZSTD_CCtx *c = ZSTD_createCCtx();
	ZSTD_CCtx_setParameter(c, ZSTD_c_contentSizeFlag, content_size);
	size_t r = ZSTD_compress2(c, out, bound, src, n);
	assert_false(ZSTD_isError(r));
	ZSTD_freeCCtx(c);
	*out_n = r;
	return out;
}

/*
 * Appends blob data[0..n) to a pack under construction: sealed (zstd-compressed first when
 * compress) into area, its entry into hdr. ulen_delta spoils the entry's uncompressed length.
 */
static void add_blob(const rix_key *key, tbuf *area, tbuf *hdr, uint8_t type, const void *data, size_t n,
		     int compress, int ulen_delta)
{
	rix_id id;
	rix_sha256(&id, data, n);
	size_t sn = n;
	uint8_t *stored = compress ? zcompress(data, n, 1, &sn) : NULL;
	uint8_t *sealed = malloc(sn + RIX_CRYPTO_OVERHEAD);
	assert_int_equal(rix_crypto_seal(key, compress ? stored : data, sn, sealed), 0);
	tb_put(area, sealed, sn + RIX_CRYPTO_OVERHEAD);
	uint8_t t = (uint8_t)(type | (compress ? 2 : 0));
	tb_put(hdr, &t, 1);
	tb_u32(hdr, (uint32_t)(sn + RIX_CRYPTO_OVERHEAD));
	if (compress)
		tb_u32(hdr, (uint32_t)((int64_t)n + ulen_delta));
	tb_put(hdr, id.b, RIX_ID_SIZE);
	free(sealed);
	free(stored);
}

/* area || seal(hdr) || header length: a pack file (malloc'd). */
static uint8_t *finish_pack(const rix_key *key, const tbuf *area, const tbuf *hdr, size_t *pn)
{
	size_t hlen = hdr->n + RIX_CRYPTO_OVERHEAD, n = area->n + hlen + 4;
	uint8_t *p = malloc(n);
	if (area->n > 0)
		memcpy(p, area->p, area->n);
	assert_int_equal(rix_crypto_seal(key, hdr->p, hdr->n, p + area->n), 0);
	rix__put_le32(p + n - 4, (uint32_t)hlen);
	*pn = n;
	return p;
}

/* A sealed object of plaintext plain[0..n) (malloc'd). */
static uint8_t *seal_copy(const rix_key *key, const void *plain, size_t n, size_t *out_n)
{
	uint8_t *s = malloc(n + RIX_CRYPTO_OVERHEAD);
	assert_int_equal(rix_crypto_seal(key, plain, n, s), 0);
	*out_n = n + RIX_CRYPTO_OVERHEAD;
	return s;
}

/*
 * A zstd frame made by hand: no checksum, window 128 KiB, content size field (8 bytes) when
 * fcs != UINT64_MAX, then nblocks blocks of block_size bytes each: RLE blocks of byte 'x' when
 * rle, else raw blocks of 'y'.
 */
static void zframe(tbuf *b, uint64_t fcs, size_t nblocks, uint32_t block_size, int rle)
{
	static const uint8_t magic[4] = { 0x28, 0xB5, 0x2F, 0xFD };
	tb_put(b, magic, 4);
	uint8_t fhd = fcs != UINT64_MAX ? 0xC0 : 0x00, wd = 7 << 3; /* window 2^(10+7) */
	tb_put(b, &fhd, 1);
	tb_put(b, &wd, 1);
	if (fcs != UINT64_MAX) {
		tb_u32(b, (uint32_t)fcs);
		tb_u32(b, (uint32_t)(fcs >> 32));
	}
	uint8_t *raw = malloc(block_size);
	memset(raw, 'y', block_size);
	for (size_t i = 0; i < nblocks; i++) {
		uint32_t h = (i + 1 == nblocks ? 1u : 0u) | (rle ? 1u : 0u) << 1 | block_size << 3;
		uint8_t hb[3] = { (uint8_t)h, (uint8_t)(h >> 8), (uint8_t)(h >> 16) };
		tb_put(b, hb, 3);
		if (rle)
			tb_put(b, "x", 1);
		else
			tb_put(b, raw, block_size);
	}
	free(raw);
}

/* An unpacked file whose plaintext is 0x02 || frame. */
static uint8_t *sealed_zstd_file(const rix_key *key, const tbuf *frame, size_t *fn)
{
	tbuf pl = { 0 };
	uint8_t two = RIX_UNPACKED_ZSTD;
	tb_put(&pl, &two, 1);
	tb_put(&pl, frame->p, frame->n);
	uint8_t *f = seal_copy(key, pl.p, pl.n, fn);
	free(pl.p);
	return f;
}

/*
 * The streaming reader (rix_unpacked_decoder_open/read, in reads of 4099 bytes) on a copy of
 * f[0..n): its return code, and on success in *out (malloc'd) the JSON, plain or decompressed.
 */
static int stream_rc(const rix_key *key, const uint8_t *f, size_t n, int version, uint8_t **out, size_t *on)
{
	rix_unpacked_decoder *d;
	assert_int_equal(rix_unpacked_decoder_new(&d), 0);
	uint8_t *copy = malloc(n ? n : 1);
	assert_non_null(copy);
	memcpy(copy, f, n);
	const uint8_t *plain = (const uint8_t *)1;
	size_t pn = 7;
	*out = NULL;
	*on = 0;
	int rc = rix_unpacked_decoder_open(&plain, &pn, d, key, copy, n, version);
	if (rc != 0) {
		assert_null(plain);
		assert_int_equal(pn, 0);
	} else if (plain != NULL) {
		assert_ptr_equal(plain, copy + RIX_CRYPTO_IV_SIZE); /* in place */
		*out = malloc(pn);
		memcpy(*out, plain, pn);
		*on = pn;
		size_t got = 1;
		assert_int_equal(rix_unpacked_decoder_read(d, *out, pn, &got), 0); /* nothing to stream */
		assert_int_equal(got, 0);
	} else {
		size_t cap = 0, got;
		char chunk[4099];
		do {
			rc = rix_unpacked_decoder_read(d, chunk, sizeof(chunk), &got);
			if (rc == 0 && got > 0) {
				if (*on + got > cap) {
					cap = 2 * (*on + got);
					*out = realloc(*out, cap);
					assert_non_null(*out);
				}
				memcpy(*out + *on, chunk, got);
				*on += got;
			}
		} while (rc == 0 && got > 0);
		if (rc == 0) { /* the end stays the end */
			assert_int_equal(rix_unpacked_decoder_read(d, chunk, sizeof(chunk), &got), 0);
			assert_int_equal(got, 0);
		} else {
			assert_true(rix_error_last()[0] != '\0');
			free(*out);
			*out = NULL;
			*on = 0;
		}
	}
	rix_unpacked_decoder_free(d);
	free(copy);
	return rc;
}

/* rix_unpacked_decode's code (and message, for the caller to check). */
static int decode_whole_rc(const rix_key *key, const uint8_t *f, size_t n, int version, uint8_t **keep,
			   size_t *keep_n)
{
	uint8_t *out = (uint8_t *)1;
	size_t on = 7;
	int rc = rix_unpacked_decode(&out, &on, key, f, n, version);
	if (rc == 0) {
		if (keep != NULL) {
			*keep = out;
			*keep_n = on;
		} else {
			rix_free(out);
		}
	} else {
		assert_null(out);
		assert_int_equal(on, 0);
		assert_true(rix_error_last()[0] != '\0');
	}
	return rc;
}

/* The same, and the streaming reader must agree on the code and the content; the message left
 * is rix_unpacked_decode's. */
static int decode_rc(const rix_key *key, const uint8_t *f, size_t n, int version)
{
	uint8_t *out = NULL;
	size_t on = 0;
	int rc = decode_whole_rc(key, f, n, version, &out, &on);
	char msg[512];
	snprintf(msg, sizeof(msg), "%s", rix_error_last());
	uint8_t *sout;
	size_t son;
	int src = stream_rc(key, f, n, version, &sout, &son);
	if (src != rc)
		fail_msg("streaming read: %d (%s), whole decode: %d (%s)", src, rix_error_last(), rc, msg);
	if (rc == 0) {
		assert_int_equal(son, on);
		assert_memory_equal(sout, out, on);
		rix_free(out);
	} else {
		(void)rix_error_set(rc, "%s", msg);
	}
	free(sout);
	return rc;
}

static int header_rc(const rix_key *key, const uint8_t *p, size_t n, int version)
{
	rix_blob *b = (rix_blob *)1;
	size_t cnt = 9;
	int rc = rix_pack_read_header(&b, &cnt, key, p, n, version);
	if (rc == 0) {
		rix_free(b);
	} else {
		assert_null(b);
		assert_int_equal(cnt, 0);
		assert_true(rix_error_last()[0] != '\0');
	}
	return rc;
}

static int blob_rc(const rix_key *key, const uint8_t *p, size_t n, const rix_blob *b, int version)
{
	uint8_t *out = (uint8_t *)1;
	size_t on = 7;
	int rc = rix_pack_read_blob(&out, &on, key, p, n, b, version);
	if (rc == 0) {
		rix_free(out);
	} else {
		assert_null(out);
		assert_int_equal(on, 0);
		assert_true(rix_error_last()[0] != '\0');
	}
	return rc;
}

#define assert_error_has(code, expr, text)                                                          \
	do {                                                                                       \
		int rc_ = (expr);                                                                  \
		if (rc_ != (code))                                                                 \
			fail_msg("%s: got %d (%s), want %d", #expr, rc_, rix_error_last(), (code)); \
		if (strstr(rix_error_last(), (text)) == NULL)                                      \
			fail_msg("%s: message \"%s\" lacks \"%s\"", #expr, rix_error_last(), (text));  \
	} while (0)

/* ---- restic's repositories ------------------------------------------------------------------ */

struct mem_pack {
	const uint8_t *p;
	size_t n;
	int reads;
};

static int mem_read(void *arg, uint64_t off, void *buf, size_t len)
{
	struct mem_pack *m = arg;
	m->reads++;
	if (off > m->n || len > m->n - off)
		return rix_error_set(RIX_EIO, "read past the end");
	memcpy(buf, m->p + off, len);
	return 0;
}

struct blob_line {
	char s[80]; /* "data <hex>" */
};

static int cmp_line(const void *a, const void *b)
{
	return strcmp(((const struct blob_line *)a)->s, ((const struct blob_line *)b)->s);
}

static void check_restic_repo(const char *repo, int version)
{
	rix_key *key = open_repo_key(repo);
	char dir[1024], path[4096], names[16][65];
	size_t n;

	/* The index file: unpacked (compressed in version 2), then restic's index JSON. */
	snprintf(dir, sizeof(dir), "%s/%s/index", rix_test_data_dir(), repo);
	assert_int_equal(rix_test_list_ids(dir, names, 16), 1);
	snprintf(path, sizeof(path), "%s/%s", dir, names[0]);
	uint8_t *file = rix_test_must_read(path, &n);
	uint8_t *plain = malloc(n);
	assert_int_equal(rix_crypto_open(key, file, n, plain), 0);
	assert_int_equal(plain[0], version == 2 ? RIX_UNPACKED_ZSTD : '{');
	free(plain);
	uint8_t *json;
	size_t jn;
	if (rix_unpacked_decode(&json, &jn, key, file, n, version) != 0)
		fail_msg("%s index: %s", repo, rix_error_last());
	free(file);
	rix_index *idx;
	assert_int_equal(rix_index_decode(&idx, NULL, (const char *)json, jn), 0);
	rix_free(json);

	/* Every pack: its name is its SHA-256; header == index; every blob reads and verifies. */
	struct blob_line got[64];
	size_t ngot = 0, npacks = 0, ncompressed = 0;
	for (int hi = 0; hi < 256; hi++) {
		snprintf(dir, sizeof(dir), "%s/%s/data/%02x", rix_test_data_dir(), repo, hi);
		size_t np = rix_test_list_ids(dir, names, 16);
		for (size_t k = 0; k < np; k++) {
			snprintf(path, sizeof(path), "%s/%s", dir, names[k]);
			uint8_t *pack = rix_test_must_read(path, &n);
			rix_id pack_id, want_pack;
			rix_sha256(&pack_id, pack, n);
			assert_int_equal(rix_id_from_hex(&want_pack, names[k], 64), 0);
			assert_memory_equal(pack_id.b, want_pack.b, RIX_ID_SIZE);
			rix_blob *blobs;
			size_t cnt;
			if (rix_pack_read_header(&blobs, &cnt, key, pack, n, version) != 0)
				fail_msg("%s: %s", path, rix_error_last());
			assert_true(cnt > 0);
			/* The tail-only reader sees the same entries with two reads. */
			struct mem_pack mp = { pack, n, 0 };
			rix_blob *blobs2;
			size_t cnt2;
			assert_int_equal(rix_pack_read_header_at(&blobs2, &cnt2, key, n, mem_read, &mp, version), 0);
			assert_int_equal(cnt2, cnt);
			assert_int_equal(mp.reads, 2);
			assert_memory_equal(blobs2, blobs, cnt * sizeof(*blobs));
			rix_free(blobs2);
			uint64_t end = 0;
			for (size_t i = 0; i < cnt; i++) {
				const rix_blob *b = &blobs[i];
				assert_int_equal(b->offset, end);
				end += b->length;
				rix_packed_blob pb;
				assert_int_equal(rix_index_lookup(&pb, idx, b->type, &b->id), 0);
				assert_memory_equal(pb.pack_id.b, pack_id.b, RIX_ID_SIZE);
				assert_int_equal(pb.offset, b->offset);
				assert_int_equal(pb.length, b->length);
				assert_int_equal(pb.uncompressed_length, b->uncompressed_length);
				if (b->uncompressed_length != 0)
					ncompressed++;
				uint8_t *out;
				size_t on;
				if (rix_pack_read_blob(&out, &on, key, pack, n, b, version) != 0)
					fail_msg("%s blob %zu: %s", path, i, rix_error_last());
				assert_int_equal(on, rix_blob_plain_size(b->length, b->uncompressed_length));
				rix_id id;
				rix_sha256(&id, out, on);
				assert_memory_equal(id.b, b->id.b, RIX_ID_SIZE);
				/* The same from the blob's bytes alone. */
				uint8_t *out2;
				size_t on2;
				assert_int_equal(rix_blob_decode(&out2, &on2, key, pack + b->offset, b->length, b, version), 0);
				assert_int_equal(on2, on);
				assert_memory_equal(out2, out, on);
				rix_free(out2);
				rix_free(out);
				char hex[65];
				rix_id_to_hex(hex, &b->id);
				assert_true(ngot < 64);
				snprintf(got[ngot++].s, sizeof(got[0].s), "%s %s", b->type == RIX_BLOB_TREE ? "tree" : "data", hex);
			}
			/* restic's packs are exactly blobs || header || length. */
			assert_int_equal(end + 4 + rix__le32(pack + n - 4), n);
			rix_free(blobs);
			free(pack);
			npacks++;
		}
	}
	assert_true(npacks >= 2); /* data and tree packs */
	assert_int_equal(ngot, rix_index_count(idx, RIX_BLOB_DATA) + rix_index_count(idx, RIX_BLOB_TREE));
	assert_int_equal(npacks, rix_index_pack_count(idx));
	if (version == 1)
		assert_int_equal(ncompressed, 0);
	else
		assert_true(ncompressed >= 1); /* at least the tree (always compressed in version 2) */
	rix_index_free(idx);

	/* The blob set equals `restic list blobs`. */
	snprintf(path, sizeof(path), "%s/%s/blobs.expected", rix_test_data_dir(), repo);
	char *exp = (char *)rix_test_must_read(path, &n);
	struct blob_line want[64];
	size_t nwant = 0;
	for (char *line = strtok(exp, "\n"); line != NULL; line = strtok(NULL, "\n")) {
		assert_true(nwant < 64);
		snprintf(want[nwant++].s, sizeof(want[0].s), "%s", line);
	}
	free(exp);
	assert_int_equal(nwant, ngot);
	qsort(got, ngot, sizeof(got[0]), cmp_line);
	qsort(want, nwant, sizeof(want[0]), cmp_line);
	for (size_t i = 0; i < ngot; i++)
		assert_string_equal(got[i].s, want[i].s);

	/* The snapshot: unpacked JSON equal to `restic cat snapshot`. */
	snprintf(dir, sizeof(dir), "%s/%s/snapshots", rix_test_data_dir(), repo);
	assert_int_equal(rix_test_list_ids(dir, names, 16), 1);
	snprintf(path, sizeof(path), "%s/%s", dir, names[0]);
	file = rix_test_must_read(path, &n);
	assert_int_equal(rix_unpacked_decode(&json, &jn, key, file, n, version), 0);
	assert_int_equal(json[0], '{');
	snprintf(path, sizeof(path), "%s/%s/snapshot.expected.json", rix_test_data_dir(), repo);
	char *sexp = (char *)rix_test_must_read(path, &n);
	json_t *g = json_loadb((const char *)json, jn, 0, NULL), *w = json_loads(sexp, 0, NULL);
	assert_non_null(g);
	assert_non_null(w);
	assert_true(json_equal(g, w));
	json_decref(g);
	json_decref(w);
	free(sexp);
	rix_free(json);
	free(file);
	rix_key_free(key);
}

static void test_restic_repo_v1(void **state)
{
	(void)state;
	check_restic_repo("restic_pack_v1", 1);
}

static void test_restic_repo_v2(void **state)
{
	(void)state;
	check_restic_repo("restic_pack_v2", 2);
}

static void test_restic_repo_v2max(void **state)
{
	(void)state;
	check_restic_repo("restic_pack_v2max", 2);
}

/* The fixture's first data pack (malloc'd) and the repository's key. */
static uint8_t *fixture_pack(const char *repo, size_t *n, char name[65])
{
	char dir[1024], path[4096], names[16][65];
	for (int hi = 0; hi < 256; hi++) {
		snprintf(dir, sizeof(dir), "%s/%s/data/%02x", rix_test_data_dir(), repo, hi);
		if (rix_test_list_ids(dir, names, 16) > 0) {
			snprintf(path, sizeof(path), "%s/%s", dir, names[0]);
			if (name != NULL)
				memcpy(name, names[0], 65);
			return rix_test_must_read(path, n);
		}
	}
	fail_msg("no pack in %s", repo);
	return NULL;
}

static uint8_t *fixture_file(const char *repo, const char *sub, size_t *n)
{
	char dir[1024], path[4096], names[4][65];
	snprintf(dir, sizeof(dir), "%s/%s/%s", rix_test_data_dir(), repo, sub);
	assert_int_equal(rix_test_list_ids(dir, names, 4), 1);
	snprintf(path, sizeof(path), "%s/%s", dir, names[0]);
	return rix_test_must_read(path, n);
}

/* Wrong key: every sealed thing of a restic repository gives RIX_EAUTH. */
static void test_wrong_key(void **state)
{
	(void)state;
	rix_key *other;
	assert_int_equal(rix_key_random(&other), 0);
	size_t n;
	uint8_t *pack = fixture_pack("restic_pack_v2", &n, NULL);
	assert_error_has(RIX_EAUTH, header_rc(other, pack, n, 2), "header MAC");
	free(pack);
	uint8_t *f = fixture_file("restic_pack_v2", "index", &n);
	assert_int_equal(decode_rc(other, f, n, 2), RIX_EAUTH);
	free(f);
	f = fixture_file("restic_pack_v1", "snapshots", &n);
	assert_int_equal(decode_rc(other, f, n, 1), RIX_EAUTH);
	free(f);
	/* A blob sealed under another key, listed in a good header. */
	rix_key *key;
	assert_int_equal(rix_key_random(&key), 0);
	tbuf area = { 0 }, hdr = { 0 };
	add_blob(other, &area, &hdr, RIX_BLOB_DATA, "some data", 9, 0, 0);
	uint8_t *p = finish_pack(key, &area, &hdr, &n);
	rix_blob *b;
	size_t cnt;
	assert_int_equal(rix_pack_read_header(&b, &cnt, key, p, n, 2), 0);
	assert_error_has(RIX_EAUTH, blob_rc(key, p, n, &b[0], 2), "blob MAC");
	rix_free(b);
	free(p);
	free(area.p);
	free(hdr.p);
	rix_key_free(key);
	rix_key_free(other);
}

/* ---- unpacked files ------------------------------------------------------------------------- */

/* JSON-ish text of about n bytes: hex IDs, compressible like an index file (~2x). */
static char *fake_json(size_t n, uint64_t *st)
{
	char *s = malloc(n + 1);
	size_t i = 0;
	s[i++] = '{';
	while (i + 80 < n) {
		rix_id id;
		rix_test_random_id(&id, st);
		char hex[65];
		rix_id_to_hex(hex, &id);
		i += (size_t)snprintf(s + i, n + 1 - i, "\"id\":\"%s\",", hex);
	}
	while (i < n - 1)
		s[i++] = ' ';
	s[n - 1] = '}';
	s[n] = '\0';
	return s;
}

static void test_unpacked_round_trip(void **state)
{
	(void)state;
	rix_key *key;
	assert_int_equal(rix_key_random(&key), 0);
	uint64_t st = 5;
	static const size_t sizes[] = { 2, 100, 5000, 300000 };
	for (int v = 1; v <= 2; v++) {
		for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
			char *json = fake_json(sizes[s], &st);
			uint8_t *f, *out;
			size_t fn, on;
			assert_int_equal(rix_unpacked_encode(&f, &fn, key, json, sizes[s], v), 0);
			assert_int_equal(rix_unpacked_decode(&out, &on, key, f, fn, v), 0);
			assert_int_equal(on, sizes[s]);
			assert_memory_equal(out, json, on);
			rix_free(out);
			uint8_t *plain = malloc(fn);
			assert_int_equal(rix_crypto_open(key, f, fn, plain), 0);
			if (v == 1) {
				assert_int_equal(fn, sizes[s] + RIX_CRYPTO_OVERHEAD);
				assert_int_equal(plain[0], '{');
			} else {
				assert_int_equal(plain[0], RIX_UNPACKED_ZSTD);
				/* One frame with its content size, as restic writes. */
				assert_int_equal(ZSTD_getFrameContentSize(plain + 1, fn - RIX_CRYPTO_OVERHEAD - 1), sizes[s]);
				if (sizes[s] >= 5000)
					assert_true(fn < sizes[s]);
				/* A compressed file is refused in a version 1 repository. */
				assert_error_has(RIX_ECORRUPT, decode_rc(key, f, fn, 1), "version 1");
			}
			free(plain);
			rix_free(f);
			free(json);
		}
	}
	/* A frame without a content size (streamed), and a JSON array. */
	char *json = fake_json(200000, &st);
	json[0] = '[';
	size_t zn;
	uint8_t *z = zcompress(json, 200000, 0, &zn);
	tbuf frame = { 0 };
	tb_put(&frame, z, zn);
	size_t fn;
	uint8_t *f = sealed_zstd_file(key, &frame, &fn), *out;
	size_t on;
	assert_int_equal(rix_unpacked_decode(&out, &on, key, f, fn, 2), 0);
	assert_int_equal(on, 200000);
	assert_memory_equal(out, json, on);
	rix_free(out);
	/* Plain JSON (no 0x02) is accepted in version 2 too. */
	free(f);
	f = seal_copy(key, json, 200000, &fn);
	assert_int_equal(rix_unpacked_decode(&out, &on, key, f, fn, 2), 0);
	assert_int_equal(on, 200000);
	rix_free(out);
	assert_int_equal(rix_unpacked_encode(&out, &on, key, json, 10, 3), RIX_EINVAL);
	assert_int_equal(decode_rc(key, f, fn, 0), RIX_EINVAL);
	free(f);
	free(z);
	free(frame.p);
	free(json);
	rix_key_free(key);
}

static void test_unpacked_bad_first_byte(void **state)
{
	(void)state;
	rix_key *key;
	assert_int_equal(rix_key_random(&key), 0);
	static const uint8_t firsts[] = { 0x00, 0x01, 0x03, 'x', ' ', '"', 0xFF };
	for (size_t i = 0; i < sizeof(firsts); i++) {
		uint8_t plain[8] = { firsts[i], '{', '}' };
		size_t fn;
		uint8_t *f = seal_copy(key, plain, 3, &fn);
		for (int v = 1; v <= 2; v++)
			assert_error_has(RIX_ECORRUPT, decode_rc(key, f, fn, v), "unknown first");
		free(f);
	}
	/* Empty plaintext; shorter than the overhead. */
	size_t fn;
	uint8_t *f = seal_copy(key, "", 0, &fn);
	assert_error_has(RIX_ECORRUPT, decode_rc(key, f, fn, 2), "empty");
	assert_error_has(RIX_ECORRUPT, decode_rc(key, f, 31, 2), "shorter");
	free(f);
	/* 0x02 in version 1, with a perfectly good frame. */
	uint8_t *zf;
	size_t zn;
	assert_int_equal(rix_unpacked_encode(&zf, &zn, key, "{}", 2, 2), 0);
	assert_error_has(RIX_ECORRUPT, decode_rc(key, zf, zn, 1), "version 1");
	assert_int_equal(decode_rc(key, zf, zn, 2), 0);
	rix_free(zf);
	rix_key_free(key);
}

static void test_unpacked_bad_frames(void **state)
{
	(void)state;
	rix_key *key;
	assert_int_equal(rix_key_random(&key), 0);
	const char *json = "{\"packs\":[],\"note\":\"some text to compress, some text to compress\"}";
	size_t jn = strlen(json), zn, fn;
	uint8_t *z = zcompress(json, jn, 1, &zn);
	tbuf fr = { 0 };
	uint8_t *f;
	/* Not a frame at all. */
	tb_put(&fr, "{not zstd}", 10);
	f = sealed_zstd_file(key, &fr, &fn);
	assert_error_has(RIX_ECORRUPT, decode_rc(key, f, fn, 2), "not followed by a zstd frame");
	free(f);
	/* Nothing after 0x02. */
	fr.n = 0;
	f = sealed_zstd_file(key, &fr, &fn);
	assert_error_has(RIX_ECORRUPT, decode_rc(key, f, fn, 2), "zstd");
	free(f);
	/* The frame cut at every length. */
	for (size_t cut = 0; cut < zn; cut++) {
		fr.n = 0;
		tb_put(&fr, z, cut);
		f = sealed_zstd_file(key, &fr, &fn);
		assert_int_equal(decode_rc(key, f, fn, 2), RIX_ECORRUPT);
		free(f);
	}
	/* Bytes after the frame; two frames. */
	fr.n = 0;
	tb_put(&fr, z, zn);
	tb_put(&fr, "x", 1);
	f = sealed_zstd_file(key, &fr, &fn);
	assert_error_has(RIX_ECORRUPT, decode_rc(key, f, fn, 2), "after the zstd frame");
	free(f);
	fr.n = 0;
	tb_put(&fr, z, zn);
	tb_put(&fr, z, zn);
	f = sealed_zstd_file(key, &fr, &fn);
	assert_error_has(RIX_ECORRUPT, decode_rc(key, f, fn, 2), "after the zstd frame");
	free(f);
	/* A streamed frame cut short: its blocks end before the last block. */
	fr.n = 0;
	zframe(&fr, UINT64_MAX, 3, 1000, 0);
	fr.n -= 1003; /* drop the last block */
	f = sealed_zstd_file(key, &fr, &fn);
	assert_int_equal(decode_rc(key, f, fn, 2), RIX_ECORRUPT);
	free(f);
	/* A declared content size that the blocks do not fill. */
	fr.n = 0;
	zframe(&fr, 5000, 2, 1000, 0);
	f = sealed_zstd_file(key, &fr, &fn);
	assert_int_equal(decode_rc(key, f, fn, 2), RIX_ECORRUPT);
	free(f);
	/* Every flipped byte of a compressed file: authentication error. */
	assert_int_equal(rix_unpacked_encode(&f, &fn, key, json, jn, 2), 0);
	for (size_t i = 0; i < fn; i++) {
		f[i] ^= 0x10;
		int rc = decode_rc(key, f, fn, 2);
		assert_true(rc == RIX_EAUTH || rc == RIX_ECORRUPT);
		f[i] ^= 0x10;
	}
	/* Truncated at every length. */
	for (size_t cut = 0; cut < fn; cut++) {
		int rc = decode_rc(key, f, cut, 2);
		assert_true(rc == RIX_EAUTH || rc == RIX_ECORRUPT);
	}
	assert_int_equal(decode_rc(key, f, fn, 2), 0);
	rix_free(f);
	free(fr.p);
	free(z);
	rix_key_free(key);
}

/* zstd bombs: small frames that would expand far past the caps. */
static void test_unpacked_zstd_bomb(void **state)
{
	(void)state;
	rix_key *key;
	assert_int_equal(rix_key_random(&key), 0);
	tbuf fr = { 0 };
	size_t fn;
	uint8_t *f;
	/* Declares 2 GiB (over 1 GiB and 1000x its size): refused before any allocation. */
	zframe(&fr, (uint64_t)2 << 30, 1, 1 << 17, 1);
	f = sealed_zstd_file(key, &fr, &fn);
	rix_test_failalloc_install(0);
	assert_error_has(RIX_ECORRUPT, decode_whole_rc(key, f, fn, 2, NULL, NULL), "over the limit");
	assert_true(rix_test_failalloc_count() <= 1); /* the plaintext buffer only */
	rix_test_failalloc_remove();
	rix_unpacked_decoder *d;
	assert_int_equal(rix_unpacked_decoder_new(&d), 0);
	const uint8_t *plain;
	size_t pn;
	rix_test_failalloc_install(0);
	assert_error_has(RIX_ECORRUPT, rix_unpacked_decoder_open(&plain, &pn, d, key, f, fn, 2), "over the limit");
	assert_int_equal(rix_test_failalloc_count(), 0); /* streaming: not even a zstd context */
	rix_unpacked_decoder_free(d);
	rix_test_failalloc_remove();
	free(f);
	/* Declares what it holds (8 MiB in 64 RLE blocks, ~280 bytes): still over 1000x. */
	fr.n = 0;
	zframe(&fr, (uint64_t)64 << 17, 64, 1 << 17, 1);
	f = sealed_zstd_file(key, &fr, &fn);
	assert_error_has(RIX_ECORRUPT, decode_rc(key, f, fn, 2), "over the limit");
	free(f);
	/* No declared size: 16384 RLE blocks of 128 KiB (2 GiB from 64 KiB) stop at the cap. */
	fr.n = 0;
	zframe(&fr, UINT64_MAX, 16384, 1 << 17, 1);
	f = sealed_zstd_file(key, &fr, &fn);
	assert_error_has(RIX_ECORRUPT, decode_rc(key, f, fn, 2), "decompresses to more than");
	free(f);
	/* The absolute cap (lowered through the testing hook), exactly at and one past it. */
	rix__unpacked_max = 8000;
	for (int declared = 0; declared <= 1; declared++) {
		fr.n = 0;
		zframe(&fr, declared ? 8000 : UINT64_MAX, 8, 1000, 0);
		f = sealed_zstd_file(key, &fr, &fn);
		assert_int_equal(decode_rc(key, f, fn, 2), 0);
		free(f);
		fr.n = 0;
		zframe(&fr, declared ? 8001 : UINT64_MAX, 1, 8001, 0);
		f = sealed_zstd_file(key, &fr, &fn);
		assert_error_has(RIX_ECORRUPT, decode_rc(key, f, fn, 2), declared ? "over the limit" : "more than 8000");
		free(f);
	}
	rix__unpacked_max = RIX_UNPACKED_MAX;
	free(fr.p);
	rix_key_free(key);
}

/* ---- packs ---------------------------------------------------------------------------------- */

/* A small version 2 pack: random data, a compressed tree, an empty blob, compressed text. */
static uint8_t *small_pack(const rix_key *key, size_t *n, uint8_t **blob_data, size_t *blob_len)
{
	static uint8_t rnd[700], text[3000];
	uint64_t st = 9;
	rix_test_fill_random(rnd, sizeof(rnd), &st);
	for (size_t i = 0; i < sizeof(text); i++)
		text[i] = "abc abd abe "[i % 12];
	static const char tree[] = "{\"nodes\":[{\"name\":\"a\",\"type\":\"file\"}]}\n";
	tbuf area = { 0 }, hdr = { 0 };
	add_blob(key, &area, &hdr, RIX_BLOB_DATA, rnd, sizeof(rnd), 0, 0);
	add_blob(key, &area, &hdr, RIX_BLOB_TREE, tree, sizeof(tree) - 1, 1, 0);
	add_blob(key, &area, &hdr, RIX_BLOB_DATA, "", 0, 0, 0);
	add_blob(key, &area, &hdr, RIX_BLOB_DATA, text, sizeof(text), 1, 0);
	if (blob_data != NULL) {
		blob_data[0] = rnd, blob_len[0] = sizeof(rnd);
		blob_data[1] = (uint8_t *)tree, blob_len[1] = sizeof(tree) - 1;
		blob_data[2] = (uint8_t *)"", blob_len[2] = 0;
		blob_data[3] = text, blob_len[3] = sizeof(text);
	}
	uint8_t *p = finish_pack(key, &area, &hdr, n);
	free(area.p);
	free(hdr.p);
	return p;
}

static void test_pack_round_trip(void **state)
{
	(void)state;
	rix_key *key;
	assert_int_equal(rix_key_random(&key), 0);
	size_t n, lens[4];
	uint8_t *data[4];
	uint8_t *p = small_pack(key, &n, data, lens);
	rix_blob *b;
	size_t cnt;
	assert_int_equal(rix_pack_read_header(&b, &cnt, key, p, n, 2), 0);
	assert_int_equal(cnt, 4);
	static const rix_blob_type types[4] = { RIX_BLOB_DATA, RIX_BLOB_TREE, RIX_BLOB_DATA, RIX_BLOB_DATA };
	uint32_t off = 0;
	for (size_t i = 0; i < cnt; i++) {
		assert_int_equal(b[i].type, types[i]);
		assert_int_equal(b[i].offset, off);
		off += b[i].length;
		assert_int_equal(b[i].uncompressed_length, (i == 1 || i == 3) ? lens[i] : 0);
		rix_id id;
		rix_sha256(&id, data[i], lens[i]);
		assert_memory_equal(b[i].id.b, id.b, RIX_ID_SIZE);
		uint8_t *out;
		size_t on;
		assert_int_equal(rix_pack_read_blob(&out, &on, key, p, n, &b[i], 2), 0);
		assert_int_equal(on, lens[i]);
		if (on > 0)
			assert_memory_equal(out, data[i], on);
		rix_free(out);
	}
	assert_true(b[3].length < lens[3]); /* the text did compress */
	/* Compressed entries in a version 1 repository are refused. */
	assert_error_has(RIX_ECORRUPT, header_rc(key, p, n, 1), "version 1");
	assert_error_has(RIX_ECORRUPT, blob_rc(key, p, n, &b[1], 1), "version 1");
	assert_int_equal(header_rc(key, p, n, 3), RIX_EINVAL);
	rix_free(b);
	free(p);
	/* A pack without blobs: header length == size - 4, no entries. */
	tbuf area = { 0 }, hdr = { 0 };
	p = finish_pack(key, &area, &hdr, &n);
	assert_int_equal(rix_pack_read_header(&b, &cnt, key, p, n, 1), 0);
	assert_int_equal(cnt, 0);
	assert_null(b);
	free(p);
	rix_key_free(key);
}

static void test_pack_truncated(void **state)
{
	(void)state;
	rix_key *key;
	assert_int_equal(rix_key_random(&key), 0);
	size_t n;
	uint8_t *p = small_pack(key, &n, NULL, NULL);
	for (size_t cut = 0; cut < n; cut++) {
		/* An exact-size copy, so ASan sees any read past the end. */
		uint8_t *c = malloc(cut ? cut : 1);
		memcpy(c, p, cut);
		int rc = header_rc(key, c, cut, 2);
		if (rc != RIX_ECORRUPT && rc != RIX_EAUTH)
			fail_msg("cut at %zu of %zu: %d (%s)", cut, n, rc, rix_error_last());
		free(c);
	}
	free(p);
	/* The same for a pack written by restic, through the tail reader too. */
	rix_key *rkey = open_repo_key("restic_pack_v2max");
	p = fixture_pack("restic_pack_v2max", &n, NULL);
	for (size_t cut = 0; cut < n; cut++) {
		uint8_t *c = malloc(cut ? cut : 1);
		memcpy(c, p, cut);
		int rc = header_rc(rkey, c, cut, 2);
		assert_true(rc == RIX_ECORRUPT || rc == RIX_EAUTH);
		struct mem_pack mp = { c, cut, 0 };
		rix_blob *b;
		size_t cnt;
		rc = rix_pack_read_header_at(&b, &cnt, rkey, cut, mem_read, &mp, 2);
		assert_true(rc == RIX_ECORRUPT || rc == RIX_EAUTH);
		assert_null(b);
		free(c);
	}
	free(p);
	rix_key_free(rkey);
	rix_key_free(key);
}

/* Every flipped byte: the header fails (EAUTH/ECORRUPT), or the blob holding it does (EAUTH). */
static void test_pack_flipped_bytes(void **state)
{
	(void)state;
	rix_key *key;
	assert_int_equal(rix_key_random(&key), 0);
	size_t n;
	uint8_t *p = small_pack(key, &n, NULL, NULL);
	for (size_t i = 0; i < n; i++) {
		p[i] ^= 0x04;
		rix_blob *b;
		size_t cnt;
		int rc = rix_pack_read_header(&b, &cnt, key, p, n, 2);
		if (rc == 0) {
			int failed = 0;
			for (size_t k = 0; k < cnt; k++) {
				int brc = blob_rc(key, p, n, &b[k], 2);
				int inside = i >= b[k].offset && i < (size_t)b[k].offset + b[k].length;
				assert_int_equal(brc, inside ? RIX_EAUTH : 0);
				failed += brc != 0;
			}
			assert_int_equal(failed, 1);
			rix_free(b);
		} else {
			assert_true(rc == RIX_EAUTH || rc == RIX_ECORRUPT);
		}
		p[i] ^= 0x04;
	}
	free(p);
	rix_key_free(key);
}

static void test_pack_header_length(void **state)
{
	(void)state;
	rix_key *key;
	assert_int_equal(rix_key_random(&key), 0);
	size_t n;
	uint8_t *p = small_pack(key, &n, NULL, NULL);
	uint32_t good = rix__le32(p + n - 4);
	rix__put_le32(p + n - 4, 0);
	assert_error_has(RIX_ECORRUPT, header_rc(key, p, n, 2), "header length is 0");
	rix__put_le32(p + n - 4, 31);
	assert_error_has(RIX_ECORRUPT, header_rc(key, p, n, 2), "under the 32-byte");
	rix__put_le32(p + n - 4, (uint32_t)n - 3);
	assert_error_has(RIX_ECORRUPT, header_rc(key, p, n, 2), "past the start");
	rix__put_le32(p + n - 4, UINT32_MAX);
	assert_error_has(RIX_ECORRUPT, header_rc(key, p, n, 2), "past the start");
	/* Right length range, wrong place: the MAC does not verify. */
	rix__put_le32(p + n - 4, good + 1);
	assert_int_equal(header_rc(key, p, n, 2), RIX_EAUTH);
	rix__put_le32(p + n - 4, good - 1);
	assert_int_equal(header_rc(key, p, n, 2), RIX_EAUTH);
	free(p);
	assert_error_has(RIX_ECORRUPT, header_rc(key, (const uint8_t *)"abc", 3, 2), "no trailer");
	/* Over 16 MiB in a file big enough to hold it: refused before reading or allocating. */
	size_t big = RIX_PACK_HEADER_MAX + 100;
	p = calloc(1, big);
	rix__put_le32(p + big - 4, RIX_PACK_HEADER_MAX + 1);
	rix_test_failalloc_install(0);
	assert_error_has(RIX_ECORRUPT, header_rc(key, p, big, 2), "over the limit");
	struct mem_pack mp = { p, big, 0 };
	rix_blob *b;
	size_t cnt;
	assert_error_has(RIX_ECORRUPT, rix_pack_read_header_at(&b, &cnt, key, big, mem_read, &mp, 2), "over the limit");
	assert_int_equal(mp.reads, 1);
	assert_int_equal(rix_test_failalloc_count(), 0);
	rix_test_failalloc_remove();
	/* Exactly 16 MiB is allowed by the length checks (then fails the MAC). */
	rix__put_le32(p + big - 4, RIX_PACK_HEADER_MAX);
	assert_int_equal(header_rc(key, p, big, 2), RIX_ECORRUPT); /* an all-zero IV */
	free(p);
	rix_key_free(key);
}

/* A pack with the given header plaintext over an area of sealed random blobs of 100 bytes. */
static int header_plain_rc(const rix_key *key, const tbuf *hdr, size_t area_blobs, int version)
{
	tbuf area = { 0 };
	uint8_t junk[100] = { 1 };
	for (size_t i = 0; i < area_blobs; i++) {
		uint8_t s[100 + RIX_CRYPTO_OVERHEAD];
		assert_int_equal(rix_crypto_seal(key, junk, sizeof(junk), s), 0);
		tb_put(&area, s, sizeof(s));
	}
	size_t n;
	uint8_t *p = finish_pack(key, &area, hdr, &n);
	int rc = header_rc(key, p, n, version);
	free(p);
	free(area.p);
	return rc;
}

static void entry(tbuf *h, uint8_t type, uint32_t len, uint32_t ulen)
{
	tb_put(h, &type, 1);
	tb_u32(h, len);
	if (type >= 2)
		tb_u32(h, ulen);
	static const uint8_t id[32] = { 0xAB };
	tb_put(h, id, 32);
}

static void test_pack_bad_entries(void **state)
{
	(void)state;
	rix_key *key;
	assert_int_equal(rix_key_random(&key), 0);
	tbuf h = { 0 };
	/* The good baseline: two entries exactly filling the area. */
	entry(&h, 0, 132, 0);
	entry(&h, 3, 132, 500);
	assert_int_equal(header_plain_rc(key, &h, 2, 2), 0);
	/* Unknown types. */
	static const uint8_t bad_types[] = { 4, 5, 0x80, 0xFF };
	for (size_t i = 0; i < sizeof(bad_types); i++) {
		h.n = 0;
		entry(&h, 0, 132, 0);
		entry(&h, 0, 132, 0);
		h.p[37] = bad_types[i];
		assert_error_has(RIX_ECORRUPT, header_plain_rc(key, &h, 2, 2), "unknown type");
	}
	/* A partial entry, of either size, at every cut. */
	for (size_t cut = 1; cut < RIX_PACK_ENTRY_SIZE_ZSTD; cut++) {
		h.n = 0;
		entry(&h, 0, 132, 0);
		entry(&h, 2, 132, 100);
		h.n -= cut;
		assert_error_has(RIX_ECORRUPT, header_plain_rc(key, &h, 2, 2), "partial");
	}
	h.n = 0;
	entry(&h, 1, 132, 0);
	h.n -= 1;
	assert_error_has(RIX_ECORRUPT, header_plain_rc(key, &h, 1, 2), "partial");
	/* Entries running past the start of the header: by one byte, by a lot, by overflow. */
	h.n = 0;
	entry(&h, 0, 132, 0);
	entry(&h, 1, 133, 0);
	assert_error_has(RIX_ECORRUPT, header_plain_rc(key, &h, 2, 2), "past the header start");
	h.n = 0;
	entry(&h, 0, UINT32_MAX, 0);
	assert_error_has(RIX_ECORRUPT, header_plain_rc(key, &h, 2, 2), "past the header start");
	h.n = 0;
	for (int i = 0; i < 3; i++)
		entry(&h, 0, UINT32_MAX / 2, 0);
	assert_error_has(RIX_ECORRUPT, header_plain_rc(key, &h, 2, 2), "past the header start");
	/* Fewer bytes than a sealed object; compressed to length 0; compressed in version 1. */
	h.n = 0;
	entry(&h, 0, 31, 0);
	assert_error_has(RIX_ECORRUPT, header_plain_rc(key, &h, 1, 2), "under 32");
	h.n = 0;
	entry(&h, 2, 132, 0);
	assert_error_has(RIX_ECORRUPT, header_plain_rc(key, &h, 1, 2), "uncompressed length 0");
	h.n = 0;
	entry(&h, 0, 132, 0);
	entry(&h, 2, 132, 10);
	assert_error_has(RIX_ECORRUPT, header_plain_rc(key, &h, 2, 1), "version 1");
	free(h.p);
	rix_key_free(key);
}

static void test_pack_bad_blobs(void **state)
{
	(void)state;
	rix_key *key;
	assert_int_equal(rix_key_random(&key), 0);
	static uint8_t text[5000];
	for (size_t i = 0; i < sizeof(text); i++)
		text[i] = (uint8_t)("0123456789"[i % 10] + (i % 977 == 0));
	/* Entries claiming one byte more and one less than the frame holds. */
	for (int delta = -1; delta <= 1; delta += 2) {
		tbuf area = { 0 }, hdr = { 0 };
		add_blob(key, &area, &hdr, RIX_BLOB_DATA, text, sizeof(text), 1, delta);
		size_t n;
		uint8_t *p = finish_pack(key, &area, &hdr, &n);
		rix_blob *b;
		size_t cnt;
		assert_int_equal(rix_pack_read_header(&b, &cnt, key, p, n, 2), 0);
		assert_error_has(RIX_ECORRUPT, blob_rc(key, p, n, &b[0], 2), "header says");
		/* Without the frame's content size, zstd itself finds the difference. */
		size_t zn;
		uint8_t *z = zcompress(text, sizeof(text), 0, &zn);
		uint8_t *s = seal_copy(key, z, zn, &zn);
		uint8_t *out = (uint8_t *)1;
		size_t on;
		int rc = rix_blob_decode(&out, &on, key, s, zn, &b[0], 2);
		assert_int_equal(rc, RIX_ECORRUPT);
		assert_null(out);
		assert_true(strstr(rix_error_last(), delta > 0 ? "decompresses to 5000 bytes" : "more than") != NULL);
		/* The right size, the right frame: good. */
		b[0].uncompressed_length = sizeof(text);
		assert_int_equal(rix_blob_decode(&out, &on, key, s, zn, &b[0], 2), 0);
		assert_int_equal(on, sizeof(text));
		rix_free(out);
		/* A declared size no frame of this size can reach: refused before allocating it. */
		b[0].uncompressed_length = UINT32_MAX;
		rix_test_failalloc_install(0);
		assert_error_has(RIX_ECORRUPT, rix_blob_decode(&out, &on, key, s, zn, &b[0], 2), "cannot decompress");
		assert_int_equal(rix_test_failalloc_count(), 0);
		rix_test_failalloc_remove();
		/* Not zstd at all. */
		uint8_t *s2 = seal_copy(key, text, 100, &zn);
		b[0].uncompressed_length = 100;
		assert_error_has(RIX_ECORRUPT, rix_blob_decode(&out, &on, key, s2, zn, &b[0], 2), "zstd");
		free(s2);
		free(s);
		free(z);
		rix_free(b);
		free(p);
		free(area.p);
		free(hdr.p);
	}
	/* ID mismatch: an entry whose ID is not the plaintext's SHA-256 (either kind of blob). */
	size_t n;
	uint8_t *p = small_pack(key, &n, NULL, NULL);
	rix_blob *b;
	size_t cnt;
	assert_int_equal(rix_pack_read_header(&b, &cnt, key, p, n, 2), 0);
	for (size_t i = 0; i < cnt; i++) {
		b[i].id.b[31] ^= 1;
		assert_error_has(RIX_ECORRUPT, blob_rc(key, p, n, &b[i], 2), "blob ID mismatch");
		b[i].id.b[31] ^= 1;
	}
	/* Outside the pack; shorter than a sealed object; a compressed blob read in version 1. */
	rix_blob out_of = b[3];
	out_of.offset = (uint32_t)n - out_of.length + 1;
	assert_error_has(RIX_ECORRUPT, blob_rc(key, p, n, &out_of, 2), "outside");
	out_of.offset = UINT32_MAX;
	assert_error_has(RIX_ECORRUPT, blob_rc(key, p, n, &out_of, 2), "outside");
	rix_blob short_b = b[0];
	short_b.length = 31;
	assert_error_has(RIX_ECORRUPT, blob_rc(key, p, n, &short_b, 2), "under the 32-byte");
	assert_error_has(RIX_ECORRUPT, blob_rc(key, p, n, &b[3], 1), "version 1");
	/* Wrong place: another blob's bytes under this entry. */
	rix_blob moved = b[0];
	moved.offset = 1;
	assert_int_equal(blob_rc(key, p, n, &moved, 2), RIX_EAUTH);
	rix_free(b);
	free(p);
	rix_key_free(key);
}

/* ---- allocation failure --------------------------------------------------------------------- */

/* What one allocation-failure loop works on: a key, input bytes, and the pack's blobs (oom_blobs). */
struct oom_in {
	const rix_key *key;
	const uint8_t *in;
	size_t n;
	const rix_blob *b;
};

static int oom_header(void *arg)
{
	const struct oom_in *o = arg;
	rix_blob *b;
	size_t cnt;
	int rc = rix_pack_read_header(&b, &cnt, o->key, o->in, o->n, 2);
	rix_free(b);
	if (rc != 0)
		return rc;
	struct mem_pack mp = { o->in, o->n, 0 };
	rc = rix_pack_read_header_at(&b, &cnt, o->key, o->n, mem_read, &mp, 2);
	rix_free(b);
	return rc;
}

static int oom_blobs(void *arg)
{
	const struct oom_in *o = arg;
	for (size_t i = 0; i < 4; i++) {
		uint8_t *out;
		size_t on;
		int rc = rix_pack_read_blob(&out, &on, o->key, o->in, o->n, &o->b[i], 2);
		if (rc != 0)
			return rc;
		rix_free(out);
	}
	return 0;
}

static int oom_decode(void *arg)
{
	const struct oom_in *o = arg;
	uint8_t *out;
	size_t on;
	int rc = rix_unpacked_decode(&out, &on, o->key, o->in, o->n, 2);
	rix_free(out);
	return rc;
}

static int oom_encode(void *arg)
{
	const struct oom_in *o = arg;
	uint8_t *out;
	size_t on;
	int rc = rix_unpacked_encode(&out, &on, o->key, o->in, o->n, 2);
	rix_free(out);
	return rc;
}

/* Fails allocation 1, 2, ... until each call succeeds with nothing failed (rix_test_oom_loop):
 * each failure is RIX_ENOMEM and leaks nothing; each call allocates at least once. */
static void test_allocation_failure(void **state)
{
	(void)state;
	rix_key *key;
	assert_int_equal(rix_key_random(&key), 0);
	size_t n;
	uint8_t *p = small_pack(key, &n, NULL, NULL);
	struct oom_in o = { key, p, n, NULL };
	assert_true(rix_test_oom_loop("pack header", oom_header, &o, 1000) > 1);
	rix_blob *b;
	size_t cnt;
	assert_int_equal(rix_pack_read_header(&b, &cnt, key, p, n, 2), 0);
	o.b = b;
	assert_true(rix_test_oom_loop("blobs", oom_blobs, &o, 1000) > 1);
	rix_free(b);
	free(p);
	uint64_t st = 3;
	char *json = fake_json(300000, &st);
	o = (struct oom_in){ key, (const uint8_t *)json, 300000, NULL };
	assert_true(rix_test_oom_loop("unpacked encode", oom_encode, &o, 1000) > 1);
	uint8_t *f;
	size_t fn;
	assert_int_equal(rix_unpacked_encode(&f, &fn, key, json, 300000, 2), 0);
	o = (struct oom_in){ key, f, fn, NULL };
	assert_true(rix_test_oom_loop("unpacked decode (declared size)", oom_decode, &o, 1000) > 1);
	rix_free(f);
	/* A streamed frame: the growing buffer's reallocations fail too. */
	size_t zn;
	uint8_t *z = zcompress(json, 300000, 0, &zn);
	tbuf fr = { 0 };
	tb_put(&fr, z, zn);
	f = sealed_zstd_file(key, &fr, &fn);
	o = (struct oom_in){ key, f, fn, NULL };
	assert_true(rix_test_oom_loop("unpacked decode (streamed)", oom_decode, &o, 1000) > 1);
	free(f);
	free(fr.p);
	free(z);
	free(json);
	rix_key_free(key);
}

/*
 * The reusing decoder: many files through one decoder give what rix_unpacked_decode gives
 * (plain JSON, declared-size and streamed frames, in any order and size), decrypting in place;
 * its refusals are the same; after warm-up, a file no bigger than before allocates nothing.
 */
static void test_unpacked_decoder(void **state)
{
	(void)state;
	rix_key *key;
	assert_int_equal(rix_key_random(&key), 0);
	uint64_t st = 12;
	rix_unpacked_decoder *d;
	assert_int_equal(rix_unpacked_decoder_new(&d), 0);
	static const size_t sizes[] = { 300000, 10, 5000, 300000, 120000, 2 };
	long decode_allocs = 0;
	for (int round = 0; round < 2; round++) {
		if (round == 1)
			rix_test_failalloc_install(0);
		for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
			char *json = fake_json(sizes[k], &st);
			for (int v = 1; v <= 2; v++) {
				uint8_t *f;
				size_t fn;
				int streamed = v == 2 && k % 2 == 1;
				if (streamed) { /* a frame without its size, as restic writes small files */
					size_t zn;
					uint8_t *z = zcompress(json, sizes[k], 0, &zn);
					tbuf fr = { 0 };
					tb_put(&fr, z, zn);
					f = sealed_zstd_file(key, &fr, &fn);
					free(fr.p);
					free(z);
				} else {
					uint8_t *e;
					assert_int_equal(rix_unpacked_encode(&e, &fn, key, json, sizes[k], v), 0);
					f = malloc(fn);
					memcpy(f, e, fn);
					rix_free(e);
				}
				const uint8_t *out;
				size_t on;
				long before = round == 1 ? rix_test_failalloc_count() : 0;
				int rc = rix_unpacked_decoder_decode(&out, &on, d, key, f, fn, v);
				if (round == 1 && !streamed)
					decode_allocs += rix_test_failalloc_count() - before;
				if (rc != 0)
					fail_msg("size %zu v%d: %s", sizes[k], v, rix_error_last());
				assert_int_equal(on, sizes[k]);
				assert_memory_equal(out, json, on);
				if (v == 1)
					assert_ptr_equal(out, f + RIX_CRYPTO_IV_SIZE); /* plain JSON: in place */
				free(f);
			}
			free(json);
		}
		if (round == 1) {
			/* Streamed frames allocate while they stream; the others reuse the buffer. */
			rix_test_failalloc_remove();
			assert_int_equal(decode_allocs, 0);
		}
	}
	/* A streamed frame over the cap leaves the context mid-frame: the next one still decodes. */
	{
		char *js = fake_json(5000, &st);
		size_t zn, fn2;
		uint8_t *z = zcompress(js, 5000, 0, &zn);
		tbuf fr = { 0 };
		tb_put(&fr, z, zn);
		uint8_t *f1 = sealed_zstd_file(key, &fr, &fn2), *f2 = sealed_zstd_file(key, &fr, &fn2);
		const uint8_t *o;
		size_t on2;
		size_t saved = rix__unpacked_max;
		rix__unpacked_max = 1000;
		int rc1 = rix_unpacked_decoder_decode(&o, &on2, d, key, f1, fn2, 2);
		rix__unpacked_max = saved;
		assert_int_equal(rc1, RIX_ECORRUPT);
		MUST(rix_unpacked_decoder_decode(&o, &on2, d, key, f2, fn2, 2));
		assert_int_equal(on2, 5000);
		assert_memory_equal(o, js, 5000);
		/* The same through open/read with the same decoder: a read over the cap, then a whole
		 * file in reads of 100 bytes (the frame abandoned half-way is not in the way). */
		uint8_t *f3 = sealed_zstd_file(key, &fr, &fn2), *f4 = sealed_zstd_file(key, &fr, &fn2);
		char part[100], all[5000];
		size_t got, at = 0;
		rix__unpacked_max = 1000;
		MUST(rix_unpacked_decoder_open(&o, &on2, d, key, f3, fn2, 2));
		assert_null(o);
		int rc3;
		while ((rc3 = rix_unpacked_decoder_read(d, part, sizeof(part), &got)) == 0 && got > 0)
			;
		rix__unpacked_max = saved;
		assert_error_has(RIX_ECORRUPT, rc3, "more than 1000 bytes");
		MUST(rix_unpacked_decoder_open(&o, &on2, d, key, f4, fn2, 2));
		while ((rc3 = rix_unpacked_decoder_read(d, part, sizeof(part), &got)) == 0 && got > 0) {
			assert_true(at + got <= sizeof(all));
			memcpy(all + at, part, got);
			at += got;
		}
		assert_int_equal(rc3, 0);
		assert_int_equal(at, 5000);
		assert_memory_equal(all, js, 5000);
		free(f3);
		free(f4);
		free(f1);
		free(f2);
		free(fr.p);
		free(z);
		free(js);
	}
	/* Refusals: a flipped MAC byte, a wrong first byte, 0x02 in version 1. */
	char *json = fake_json(1000, &st);
	uint8_t *e;
	size_t fn;
	assert_int_equal(rix_unpacked_encode(&e, &fn, key, json, 1000, 2), 0);
	uint8_t *f = malloc(fn);
	const uint8_t *out;
	size_t on;
	memcpy(f, e, fn);
	f[fn - 1] ^= 1;
	assert_int_equal(rix_unpacked_decoder_decode(&out, &on, d, key, f, fn, 2), RIX_EAUTH);
	memcpy(f, e, fn);
	assert_error_has(RIX_ECORRUPT, rix_unpacked_decoder_decode(&out, &on, d, key, f, fn, 1), "version 1");
	assert_int_equal(rix_unpacked_decoder_decode(&out, &on, d, key, f, 10, 2), RIX_ECORRUPT);
	assert_int_equal(rix_unpacked_decoder_decode(&out, &on, d, key, f, fn, 3), RIX_EINVAL);
	free(f);
	rix_free(e);
	free(json);
	rix_unpacked_decoder_free(d);
	rix_unpacked_decoder_free(NULL);
	rix_key_free(key);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_restic_repo_v1),
		cmocka_unit_test(test_restic_repo_v2),
		cmocka_unit_test(test_restic_repo_v2max),
		cmocka_unit_test(test_wrong_key),
		cmocka_unit_test(test_unpacked_round_trip),
		cmocka_unit_test(test_unpacked_bad_first_byte),
		cmocka_unit_test(test_unpacked_bad_frames),
		cmocka_unit_test(test_unpacked_zstd_bomb),
		cmocka_unit_test(test_unpacked_decoder),
		cmocka_unit_test(test_pack_round_trip),
		cmocka_unit_test(test_pack_truncated),
		cmocka_unit_test(test_pack_flipped_bytes),
		cmocka_unit_test(test_pack_header_length),
		cmocka_unit_test(test_pack_bad_entries),
		cmocka_unit_test(test_pack_bad_blobs),
		cmocka_unit_test(test_allocation_failure),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
