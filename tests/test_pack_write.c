/*
 * tests/test_pack_write.c — pack/ writing side: the blob codec, the pack writer, the packer
 * manager. What is written is read back with the pack reader (tested against restic's packs in
 * test_pack.c; restic itself reads rix's packs in test_restic_interop.c).
 *
 * Cases: codec round trips over version x mode x type x content (empty, tiny, zeros, text,
 * random); which blobs are compressed; buffers too small; no allocation per blob once warm;
 * pack files read back (header == what the writer recorded, ID == SHA-256 of the file, every
 * blob decodes); repacking stored blobs; the blob-count limit; a full disk (RLIMIT_FSIZE) with
 * the temporary file removed; rename; the packer manager alone, with stored blobs (their entries
 * kept, a big one in a pack of its own) and from four threads; and
 * allocation failure at every allocation of each, without leaks.
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "rix/rix.h"
#include "testutil.h"


/* Text-like content: words from a small vocabulary, compresses about 3-5x. */
static void fill_text(uint8_t *p, size_t n, uint64_t *st)
{
	static const char *const words[] = { "pack ", "blob ", "index ", "restic ", "tree ", "data ",
					     "the ", "of ", "and ", "snapshot ", "\n", "{ ", "} ", "0x1f " };
	size_t i = 0;
	while (i < n) {
		const char *w = words[rix_test_next(st) % (sizeof(words) / sizeof(words[0]))];
		for (size_t k = 0; w[k] && i < n; k++)
			p[i++] = (uint8_t)w[k];
	}
}

enum content { EMPTY, ONE, ZEROS, TEXT, RANDOM, NCONTENT };

static uint8_t *make_content(enum content c, size_t *n, uint64_t *st)
{
	static const size_t sizes[NCONTENT] = { 0, 1, 100000, 200000, 300000 };
	*n = sizes[c];
	uint8_t *p = malloc(*n + 1);
	assert_non_null(p);
	if (c == ONE)
		p[0] = 'x';
	else if (c == ZEROS)
		memset(p, 0, *n);
	else if (c == TEXT)
		fill_text(p, *n, st);
	else if (c == RANDOM)
		rix_test_fill_random(p, *n, st);
	return p;
}

/* Encodes plain with c, checks the stored form's shape, decodes it back both ways. */
static void round_trip(rix_blob_codec *c, const rix_key *key, int version, rix_blob_type t, const uint8_t *plain,
		       size_t n, uint32_t *stored_len, uint32_t *ulen)
{
	size_t cap = rix_blob_stored_bound(n);
	assert_true(cap >= n + RIX_CRYPTO_OVERHEAD);
	uint8_t *stored = malloc(cap);
	MUST(rix_blob_codec_encode(stored_len, ulen, c, t, plain, n, stored, cap));
	assert_true(*stored_len >= RIX_CRYPTO_OVERHEAD && *stored_len <= cap);
	if (*ulen == 0)
		assert_int_equal(*stored_len, n + RIX_CRYPTO_OVERHEAD);
	else
		assert_int_equal(*ulen, n);
	rix_blob b = { .type = t, .length = *stored_len, .uncompressed_length = *ulen };
	rix_sha256(&b.id, plain, n);
	size_t pn = rix_blob_plain_size(b.length, b.uncompressed_length), got = 99;
	assert_int_equal(pn, n);
	uint8_t *out = malloc(pn + 1);
	MUST(rix_blob_codec_decode(&got, c, stored, *stored_len, &b, out, pn));
	assert_int_equal(got, n);
	assert_memory_equal(out, plain, n);
	/* The allocating decoder agrees. */
	uint8_t *out2;
	MUST(rix_blob_decode(&out2, &got, key, stored, *stored_len, &b, version));
	assert_int_equal(got, n);
	assert_memory_equal(out2, plain, n);
	rix_free(out2);
	/* Decoded in place: kept, the stored bytes are as they were; not kept, the plaintext still
	 * comes out (the stored bytes may be anything afterwards). */
	uint8_t *copy = malloc(*stored_len);
	memcpy(copy, stored, *stored_len);
	memset(out, 0xA5, pn);
	got = 99;
	MUST(rix_blob_codec_decode_in_place(&got, c, copy, *stored_len, &b, out, pn, true));
	assert_int_equal(got, n);
	assert_memory_equal(out, plain, n);
	assert_memory_equal(copy, stored, *stored_len);
	MUST(rix_blob_codec_decode_in_place(&got, c, copy, *stored_len, &b, out, pn, false));
	assert_int_equal(got, n);
	assert_memory_equal(out, plain, n);
	/* A wrong ID is caught after decoding, by both; kept bytes stay kept. */
	b.id.b[7] ^= 1;
	assert_int_equal(rix_blob_codec_decode(&got, c, stored, *stored_len, &b, out, pn), RIX_ECORRUPT);
	assert_non_null(strstr(rix_error_last(), "ID mismatch"));
	memcpy(copy, stored, *stored_len);
	assert_int_equal(rix_blob_codec_decode_in_place(&got, c, copy, *stored_len, &b, out, pn, true), RIX_ECORRUPT);
	assert_non_null(strstr(rix_error_last(), "ID mismatch"));
	assert_memory_equal(copy, stored, *stored_len);
	b.id.b[7] ^= 1;
	/* A flipped ciphertext byte: refused by the MAC before anything is decrypted. */
	if (*stored_len > RIX_CRYPTO_OVERHEAD) {
		copy[RIX_CRYPTO_IV_SIZE] ^= 0x10;
		assert_int_equal(rix_blob_codec_decode_in_place(&got, c, copy, *stored_len, &b, out, pn, true), RIX_EAUTH);
		copy[RIX_CRYPTO_IV_SIZE] ^= 0x10;
		assert_memory_equal(copy, stored, *stored_len);
	}
	free(copy);
	free(out);
	free(stored);
}

static void test_codec_matrix(void **state)
{
	(void)state;
	rix_key *key;
	MUST(rix_key_random(&key));
	uint64_t st = 11;
	uint32_t zsize[NCONTENT][3]; /* v2 data, per mode */
	for (int version = 1; version <= 2; version++) {
		for (int mode = RIX_COMPRESSION_OFF; mode <= RIX_COMPRESSION_MAX; mode++) {
			rix_blob_codec *c;
			MUST(rix_blob_codec_new(&c, key, version, (rix_compression)mode));
			for (int t = 0; t < RIX_BLOB_TYPES; t++) {
				for (int k = 0; k < NCONTENT; k++) {
					size_t n;
					uint8_t *p = make_content((enum content)k, &n, &st);
					uint32_t sl, ul;
					round_trip(c, key, version, (rix_blob_type)t, p, n, &sl, &ul);
					int compressed = ul != 0;
					int want;
					if (version == 1 || n == 0)
						want = 0;
					else if (t == RIX_BLOB_TREE)
						want = 1; /* trees always, even random ones */
					else if (mode == RIX_COMPRESSION_OFF)
						want = 0;
					else
						want = k != RANDOM; /* random data never pays */
					if (k == ONE && t == RIX_BLOB_DATA)
						want = 0; /* one byte cannot shrink */
					if (compressed != want)
						fail_msg("v%d mode %d type %d content %d: compressed %d, want %d", version,
							 mode, t, k, compressed, want);
					if (version == 2 && t == RIX_BLOB_DATA)
						zsize[k][mode] = sl;
					free(p);
				}
			}
			rix_blob_codec_free(c);
		}
	}
	/* max is at least as small as auto, and both far smaller than off, on compressible data. */
	for (int k = ZEROS; k <= TEXT; k++) {
		assert_true(zsize[k][RIX_COMPRESSION_MAX] <= zsize[k][RIX_COMPRESSION_AUTO]);
		assert_true(zsize[k][RIX_COMPRESSION_AUTO] * 2 < zsize[k][RIX_COMPRESSION_OFF]);
	}
	rix_key_free(key);
}

/* auto's minimum saving: a blob that shrinks a little is stored plain above the threshold. */
static void test_codec_min_saving(void **state)
{
	(void)state;
	rix_key *key;
	MUST(rix_key_random(&key));
	uint64_t st = 5;
	/* 90% random, 10% zeros: compresses by a bit under 10%. */
	size_t n = 100000;
	uint8_t *p = malloc(n);
	rix_test_fill_random(p, n, &st);
	memset(p, 0, n / 10);
	rix_blob_codec *c;
	MUST(rix_blob_codec_new(&c, key, 2, RIX_COMPRESSION_AUTO));
	uint32_t sl, ul;
	round_trip(c, key, 2, RIX_BLOB_DATA, p, n, &sl, &ul);
	assert_int_equal(ul, n); /* default threshold: compressed */
	uint32_t saving = (uint32_t)(1000 * (n + RIX_CRYPTO_OVERHEAD - sl) / n);
	assert_true(saving > 50 && saving < 100);
	rix_blob_codec_set_min_saving(c, 100);
	round_trip(c, key, 2, RIX_BLOB_DATA, p, n, &sl, &ul);
	assert_int_equal(ul, 0);
	rix_blob_codec_set_min_saving(c, 50);
	round_trip(c, key, 2, RIX_BLOB_DATA, p, n, &sl, &ul);
	assert_int_equal(ul, n);
	/* max ignores the threshold: smaller is enough. */
	rix_blob_codec_free(c);
	MUST(rix_blob_codec_new(&c, key, 2, RIX_COMPRESSION_MAX));
	rix_blob_codec_set_min_saving(c, 999);
	round_trip(c, key, 2, RIX_BLOB_DATA, p, n, &sl, &ul);
	assert_int_equal(ul, n);
	/* The level: text at level 1 is bigger than at the mode's (15), and 0 restores it. */
	fill_text(p, n, &st);
	uint32_t slmax, sl1, sl0;
	round_trip(c, key, 2, RIX_BLOB_DATA, p, n, &slmax, &ul);
	rix_blob_codec_set_level(c, 1);
	round_trip(c, key, 2, RIX_BLOB_DATA, p, n, &sl1, &ul);
	rix_blob_codec_set_level(c, 0);
	round_trip(c, key, 2, RIX_BLOB_DATA, p, n, &sl0, &ul);
	assert_true(sl1 > slmax);
	assert_int_equal(sl0, slmax);
	rix_blob_codec_free(c);
	free(p);
	rix_key_free(key);
}

static void test_codec_bad_arguments(void **state)
{
	(void)state;
	rix_key *key;
	MUST(rix_key_random(&key));
	rix_blob_codec *c = (rix_blob_codec *)1;
	assert_int_equal(rix_blob_codec_new(&c, key, 3, RIX_COMPRESSION_OFF), RIX_EINVAL);
	assert_null(c);
	assert_int_equal(rix_blob_codec_new(&c, key, 2, (rix_compression)7), RIX_EINVAL);
	MUST(rix_blob_codec_new(&c, key, 2, RIX_COMPRESSION_AUTO));
	uint8_t plain[100] = { 0 }, stored[200], out[100];
	uint32_t sl = 1, ul = 1;
	/* Room for less than the bound, however well the content compresses. */
	assert_int_equal(rix_blob_codec_encode(&sl, &ul, c, RIX_BLOB_DATA, plain, 100,
					       stored, 100 + RIX_CRYPTO_OVERHEAD - 1),
			 RIX_EINVAL);
	assert_int_equal(sl, 0);
	/* Over the blob limit: refused before a byte is read. */
	assert_int_equal(rix_blob_codec_encode(&sl, &ul, c, RIX_BLOB_DATA, plain, RIX_BLOB_MAX + 1, stored, SIZE_MAX),
			 RIX_EINVAL);
	MUST(rix_blob_codec_encode(&sl, &ul, c, RIX_BLOB_DATA, plain, 100, stored, sizeof(stored)));
	rix_blob b = { .type = RIX_BLOB_DATA, .length = sl, .uncompressed_length = ul };
	rix_sha256(&b.id, plain, 100);
	size_t got;
	assert_int_equal(rix_blob_codec_decode(&got, c, stored, sl, &b, out, 99), RIX_EINVAL);
	assert_int_equal(rix_blob_codec_decode(&got, c, stored, 31, &b, out, 100), RIX_ECORRUPT);
	stored[sl - 1] ^= 0x80;
	assert_int_equal(rix_blob_codec_decode(&got, c, stored, sl, &b, out, 100), RIX_EAUTH);
	stored[sl - 1] ^= 0x80;
	MUST(rix_blob_codec_decode(&got, c, stored, sl, &b, out, 100));
	/* A version 1 codec refuses a compressed blob without opening it. */
	rix_blob_codec *c1;
	MUST(rix_blob_codec_new(&c1, key, 1, RIX_COMPRESSION_MAX));
	assert_int_equal(rix_blob_codec_decode(&got, c1, stored, sl, &b, out, 100), RIX_ECORRUPT);
	rix_blob_codec_free(c1);
	/* A declared size its frame could never produce. */
	b.uncompressed_length = 0x7fffffff;
	uint8_t *big = malloc(1);
	assert_int_equal(rix_blob_codec_decode(&got, c, stored, sl, &b, big, SIZE_MAX), RIX_ECORRUPT);
	free(big);
	rix_blob_codec_free(c);
	rix_blob_codec_free(NULL);
	rix_key_free(key);
}

/* Once the codec has seen a blob of a size, more blobs of that size cost no allocation. */
static void test_codec_no_allocation_per_blob(void **state)
{
	(void)state;
	rix_key *key;
	MUST(rix_key_random(&key));
	uint64_t st = 9;
	size_t n = 64 << 10;
	uint8_t *p = malloc(n), *stored = malloc(rix_blob_stored_bound(n)), *out = malloc(n);
	fill_text(p, n, &st);
	rix_blob_codec *c;
	MUST(rix_blob_codec_new(&c, key, 2, RIX_COMPRESSION_AUTO));
	rix_blob b = { .type = RIX_BLOB_TREE };
	rix_sha256(&b.id, p, n);
	size_t got;
	for (int warm = 0; warm < 2; warm++) {
		if (warm)
			rix_test_failalloc_install(0);
		for (int i = 0; i < 50; i++) {
			MUST(rix_blob_codec_encode(&b.length, &b.uncompressed_length, c, (rix_blob_type)(i & 1), p, n,
						   stored, rix_blob_stored_bound(n)));
			b.type = (rix_blob_type)(i & 1);
			MUST(rix_blob_codec_decode(&got, c, stored, b.length, &b, out, n));
		}
	}
	long allocs = rix_test_failalloc_count();
	rix_test_failalloc_remove();
	assert_int_equal(allocs, 0);
	rix_blob_codec_free(c);
	free(p);
	free(stored);
	free(out);
	rix_key_free(key);
}

/* ---- pack writer ------------------------------------------------------------------------- */

static size_t count_files(const char *dir)
{
	DIR *d = opendir(dir);
	assert_non_null(d);
	size_t n = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL)
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

/* Reads the pack at path and checks it against what the writer recorded. */
static void verify_pack_file(const rix_key *key, int version, const char *path, const rix_id *want_id,
			     const rix_blob *want, size_t nwant, uint8_t *const *plains, const size_t *plain_n)
{
	size_t n;
	uint8_t *pack = rix_test_must_read(path, &n);
	rix_id id;
	rix_sha256(&id, pack, n);
	assert_memory_equal(id.b, want_id->b, RIX_ID_SIZE);
	rix_blob *blobs;
	size_t cnt;
	MUST(rix_pack_read_header(&blobs, &cnt, key, pack, n, version));
	assert_int_equal(cnt, nwant);
	assert_memory_equal(blobs, want, cnt * sizeof(*blobs));
	for (size_t i = 0; plains != NULL && i < cnt; i++) {
		uint8_t *out;
		size_t on;
		MUST(rix_pack_read_blob(&out, &on, key, pack, n, &blobs[i], version));
		assert_int_equal(on, plain_n[i]);
		assert_memory_equal(out, plains[i], on);
		rix_free(out);
	}
	rix_free(blobs);
	free(pack);
}

static void test_writer_round_trip(void **state)
{
	(void)state;
	rix_key *key;
	MUST(rix_key_random(&key));
	char *dir = rix_test_new_dir("rix-packw");
	uint64_t st = 21;
	for (int version = 1; version <= 2; version++) {
		rix_blob_codec *c;
		MUST(rix_blob_codec_new(&c, key, version, RIX_COMPRESSION_AUTO));
		rix_pack_writer *w;
		MUST(rix_pack_writer_new(&w, key, version, dir));
		assert_int_equal(count_files(dir), 1);
		enum { NB = 40 };
		uint8_t *plains[NB];
		size_t pn[NB];
		for (int i = 0; i < NB; i++) {
			/* Sizes from 0 to ~1.3 MiB, so the write buffer is both filled and bypassed. */
			enum content k = (enum content)(i % NCONTENT);
			plains[i] = make_content(k, &pn[i], &st);
			if (i == 17) {
				free(plains[i]);
				pn[i] = 1300000;
				plains[i] = malloc(pn[i]);
				rix_test_fill_random(plains[i], pn[i], &st);
			}
			rix_id id;
			rix_sha256(&id, plains[i], pn[i]);
			MUST(rix_pack_writer_add(w, c, (rix_blob_type)(i % 3 == 0), &id, plains[i], pn[i]));
		}
		assert_int_equal(rix_pack_writer_count(w), NB);
		const rix_blob *bl = rix_pack_writer_blobs(w);
		uint64_t end = 0;
		for (int i = 0; i < NB; i++) {
			assert_int_equal(bl[i].offset, end);
			end += bl[i].length;
		}
		assert_int_equal(rix_pack_writer_size(w), end);
		rix_id pid;
		MUST(rix_pack_writer_finish(&pid, w));
		struct stat sb;
		assert_int_equal(stat(rix_pack_writer_path(w), &sb), 0);
		assert_int_equal((uint64_t)sb.st_size, rix_pack_writer_file_size(w));
		assert_int_equal(sb.st_mode & 0777, 0600);
		verify_pack_file(key, version, rix_pack_writer_path(w), &pid, bl, NB, plains, pn);
		/* Finished: nothing more goes in. */
		assert_int_equal(rix_pack_writer_add(w, c, RIX_BLOB_DATA, &pid, "x", 1), RIX_EINVAL);
		assert_int_equal(rix_pack_writer_finish(&pid, w), RIX_EINVAL);
		/* Renamed into place: it stays after free. */
		char final[512], hex[65];
		rix_id_to_hex(hex, &pid);
		snprintf(final, sizeof(final), "%s/%s", dir, hex);
		MUST(rix_pack_writer_rename(w, final, 1));
		assert_string_equal(rix_pack_writer_path(w), final);
		assert_int_equal(rix_pack_writer_rename(w, final, 1), RIX_EINVAL);
		rix_pack_writer_free(w);
		assert_int_equal(count_files(dir), 1);
		assert_int_equal(unlink(final), 0);
		for (int i = 0; i < NB; i++)
			free(plains[i]);
		rix_blob_codec_free(c);
	}
	/* Freed unfinished, or finished and not renamed: the temporary file goes. */
	rix_pack_writer *w;
	MUST(rix_pack_writer_new(&w, key, 2, dir));
	rix_pack_writer_free(w);
	assert_int_equal(count_files(dir), 0);
	MUST(rix_pack_writer_new(&w, key, 2, dir));
	rix_id pid;
	assert_int_equal(rix_pack_writer_finish(&pid, w), RIX_EINVAL); /* empty */
	rix_pack_writer_free(w);
	assert_int_equal(count_files(dir), 0);
	/* A codec of the other version, or a type that is not one: refused, the pack unchanged. */
	{
		rix_blob_codec *c1;
		MUST(rix_blob_codec_new(&c1, key, 1, RIX_COMPRESSION_OFF));
		MUST(rix_pack_writer_new(&w, key, 2, dir));
		rix_sha256(&pid, "x", 1);
		assert_int_equal(rix_pack_writer_add(w, c1, RIX_BLOB_DATA, &pid, "x", 1), RIX_EINVAL);
		assert_int_equal(rix_pack_writer_count(w), 0);
		rix_blob_codec_free(c1);
		rix_pack_writer_free(w);
	}
	/* Bad arguments. */
	w = (rix_pack_writer *)1;
	assert_int_equal(rix_pack_writer_new(&w, key, 0, dir), RIX_EINVAL);
	assert_null(w);
	assert_int_equal(rix_pack_writer_new(&w, key, 2, "/nonexistent/dir"), RIX_EIO);
	assert_non_null(strstr(rix_error_last(), "/nonexistent/dir"));
	rix_pack_writer_free(NULL);
	rix_test_free_dir(dir);
	rix_key_free(key);
}

/* Blobs copied in stored form from one pack to another read back the same (repacking). */
static void test_writer_add_stored(void **state)
{
	(void)state;
	rix_key *key;
	MUST(rix_key_random(&key));
	char *dir = rix_test_new_dir("rix-packw");
	uint64_t st = 31;
	rix_blob_codec *c;
	MUST(rix_blob_codec_new(&c, key, 2, RIX_COMPRESSION_MAX));
	rix_pack_writer *w, *w2;
	MUST(rix_pack_writer_new(&w, key, 2, dir));
	MUST(rix_pack_writer_new(&w2, key, 2, dir));
	uint8_t *plains[NCONTENT];
	size_t pn[NCONTENT];
	for (int k = 0; k < NCONTENT; k++) {
		plains[k] = make_content((enum content)k, &pn[k], &st);
		rix_id id;
		rix_sha256(&id, plains[k], pn[k]);
		MUST(rix_pack_writer_add(w, c, RIX_BLOB_DATA, &id, plains[k], pn[k]));
	}
	rix_id pid, pid2;
	MUST(rix_pack_writer_finish(&pid, w));
	size_t n;
	uint8_t *pack = rix_test_must_read(rix_pack_writer_path(w), &n);
	const rix_blob *bl = rix_pack_writer_blobs(w);
	/* In reverse order: offsets are the new pack's. */
	for (int k = NCONTENT - 1; k >= 0; k--)
		MUST(rix_pack_writer_add_stored(w2, &bl[k], pack + bl[k].offset));
	MUST(rix_pack_writer_finish(&pid2, w2));
	const rix_blob *bl2 = rix_pack_writer_blobs(w2);
	uint8_t *rp[NCONTENT];
	size_t rn[NCONTENT];
	for (int k = 0; k < NCONTENT; k++) {
		rp[k] = plains[NCONTENT - 1 - k];
		rn[k] = pn[NCONTENT - 1 - k];
		assert_memory_equal(bl2[k].id.b, bl[NCONTENT - 1 - k].id.b, RIX_ID_SIZE);
	}
	verify_pack_file(key, 2, rix_pack_writer_path(w2), &pid2, bl2, NCONTENT, rp, rn);
	/* Stored blobs over the writer's 1 MiB chunk (written from the caller's bytes, not buffered)
	 * between small ones: the pack reads back whole, in order. */
	enum { NBIG = 5 };
	static const size_t bign[NBIG] = { 3000000, 1000, 6000000, 1048577, 70000 };
	uint8_t *bp[NBIG];
	rix_pack_writer *wb, *wb2;
	MUST(rix_pack_writer_new(&wb, key, 2, dir));
	MUST(rix_pack_writer_new(&wb2, key, 2, dir));
	for (int k = 0; k < NBIG; k++) {
		bp[k] = malloc(bign[k]);
		rix_test_fill_random(bp[k], bign[k], &st);
		for (size_t i = 0; k == 2 && i < bign[k]; i += 8192) /* half zeros: compressed, still over 1 MiB */
			memset(bp[k] + i, 0, bign[k] - i < 4096 ? bign[k] - i : 4096);
		rix_id id;
		rix_sha256(&id, bp[k], bign[k]);
		MUST(rix_pack_writer_add(wb, c, RIX_BLOB_DATA, &id, bp[k], bign[k]));
	}
	MUST(rix_pack_writer_finish(&pid, wb));
	const rix_blob *blb = rix_pack_writer_blobs(wb);
	assert_true(blb[0].length > (1u << 20) && blb[2].length > (1u << 20) && blb[3].length > (1u << 20));
	assert_true(blb[2].uncompressed_length != 0 && blb[1].length < (1u << 20));
	uint8_t *bigpack = rix_test_must_read(rix_pack_writer_path(wb), &n);
	for (int k = 0; k < NBIG; k++)
		MUST(rix_pack_writer_add_stored(wb2, &blb[k], bigpack + blb[k].offset));
	MUST(rix_pack_writer_finish(&pid2, wb2));
	verify_pack_file(key, 2, rix_pack_writer_path(wb2), &pid2, rix_pack_writer_blobs(wb2), NBIG, bp, bign);
	free(bigpack);
	for (int k = 0; k < NBIG; k++)
		free(bp[k]);
	rix_pack_writer_free(wb);
	rix_pack_writer_free(wb2);
	/* A stored blob under 32 bytes, or compressed into version 1, is refused. */
	rix_blob tiny = bl[0];
	tiny.length = 31;
	assert_int_equal(rix_pack_writer_add_stored(w2, &tiny, pack), RIX_EINVAL);
	rix_pack_writer *w1;
	MUST(rix_pack_writer_new(&w1, key, 1, dir));
	assert_int_equal(rix_pack_writer_add_stored(w1, &bl[TEXT], pack + bl[TEXT].offset), RIX_EINVAL);
	rix_pack_writer_free(w1);
	free(pack);
	for (int k = 0; k < NCONTENT; k++)
		free(plains[k]);
	rix_pack_writer_free(w);
	rix_pack_writer_free(w2);
	rix_blob_codec_free(c);
	rix_test_free_dir(dir);
	rix_key_free(key);
}

/* The most blobs a pack holds: RIX_ELIMIT after, and the header of the full pack reads back. */
static void test_writer_blob_limit(void **state)
{
	(void)state;
	rix_key *key;
	MUST(rix_key_random(&key));
	char *dir = rix_test_new_dir("rix-packw");
	rix_blob_codec *c;
	MUST(rix_blob_codec_new(&c, key, 2, RIX_COMPRESSION_AUTO));
	rix_pack_writer *w;
	MUST(rix_pack_writer_new(&w, key, 2, dir));
	rix_id id;
	rix_sha256(&id, "", 0);
	/* Zero-length data blobs: the smallest stored blob (32 bytes) and entry (37). */
	for (size_t i = 0; i < RIX_PACK_MAX_BLOBS; i++)
		MUST(rix_pack_writer_add(w, c, RIX_BLOB_DATA, &id, "", 0));
	assert_int_equal(rix_pack_writer_add(w, c, RIX_BLOB_DATA, &id, "", 0), RIX_ELIMIT);
	rix_id pid;
	MUST(rix_pack_writer_finish(&pid, w));
	verify_pack_file(key, 2, rix_pack_writer_path(w), &pid, rix_pack_writer_blobs(w), RIX_PACK_MAX_BLOBS,
			 NULL, NULL);
	rix_pack_writer_free(w);
	rix_blob_codec_free(c);
	rix_test_free_dir(dir);
	rix_key_free(key);
}

/* A full disk (the file size limit standing in for it): RIX_ENOSPC, then the writer is failed. */
static void test_writer_disk_full(void **state)
{
	(void)state;
	rix_key *key;
	MUST(rix_key_random(&key));
	char *dir = rix_test_new_dir("rix-packw");
	rix_blob_codec *c;
	MUST(rix_blob_codec_new(&c, key, 2, RIX_COMPRESSION_OFF));
	struct rlimit old, lim;
	assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
	void (*oldsig)(int) = signal(SIGXFSZ, SIG_IGN);
	lim = old;
	lim.rlim_cur = 3 << 20;
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
	rix_pack_writer *w;
	MUST(rix_pack_writer_new(&w, key, 2, dir));
	uint64_t st = 41;
	size_t n = 512 << 10;
	uint8_t *p = malloc(n);
	int rc = 0, i;
	for (i = 0; i < 20 && rc == 0; i++) {
		rix_test_fill_random(p, n, &st);
		rix_id id;
		rix_sha256(&id, p, n);
		rc = rix_pack_writer_add(w, c, RIX_BLOB_DATA, &id, p, n);
	}
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
	signal(SIGXFSZ, oldsig);
	if (rc != RIX_ENOSPC)
		fail_msg("got %d (%s) after %d blobs, want RIX_ENOSPC", rc, rix_error_last(), i);
	assert_non_null(strstr(rix_error_last(), "File too large"));
	assert_true(i > 4 && i < 10);
	/* Failed for good: no more blobs, no ID for a file with a hole. */
	rix_id id, pid;
	rix_sha256(&id, "", 0);
	assert_int_equal(rix_pack_writer_add(w, c, RIX_BLOB_DATA, &id, "", 0), RIX_EIO);
	assert_int_equal(rix_pack_writer_finish(&pid, w), RIX_EIO);
	assert_int_equal(count_files(dir), 1);
	rix_pack_writer_free(w);
	assert_int_equal(count_files(dir), 0);
	free(p);
	rix_blob_codec_free(c);
	rix_test_free_dir(dir);
	rix_key_free(key);
}

/* ---- packer manager ---------------------------------------------------------------------- */

struct sink {
	pthread_mutex_t mu;
	const rix_key *key;
	int version;
	size_t npacks;
	size_t nblobs;
	rix_blob blobs[4096];
	uint64_t sizes[256];
	size_t pack_blobs[256];
	int fail; /* return this from done once */
};

static int sink_done(void *arg, rix_pack_writer *w, const rix_id *pack_id)
{
	struct sink *s = arg;
	size_t n;
	uint8_t *pack = rix_test_read_file(rix_pack_writer_path(w), &n);
	rix_blob *blobs = NULL;
	size_t cnt = 0;
	int rc = pack == NULL ? RIX_EIO : rix_pack_read_header(&blobs, &cnt, s->key, pack, n, s->version);
	rix_id id;
	if (rc == 0) {
		rix_sha256(&id, pack, n);
		if (memcmp(id.b, pack_id->b, RIX_ID_SIZE) != 0 || cnt != rix_pack_writer_count(w))
			rc = RIX_ECORRUPT;
	}
	for (size_t i = 0; rc == 0 && i < cnt; i++) {
		uint8_t *out;
		size_t on;
		rc = rix_pack_read_blob(&out, &on, s->key, pack, n, &blobs[i], s->version);
		rix_free(out);
	}
	pthread_mutex_lock(&s->mu);
	if (rc == 0 && s->npacks < 256 && s->nblobs + cnt <= 4096) {
		memcpy(s->blobs + s->nblobs, blobs, cnt * sizeof(*blobs));
		s->nblobs += cnt;
		s->sizes[s->npacks] = rix_pack_writer_size(w);
		s->pack_blobs[s->npacks++] = cnt;
	} else if (rc == 0) {
		rc = RIX_ELIMIT;
	}
	if (rc == 0 && s->fail) {
		rc = rix_error_set(s->fail, "sink: told to fail");
		s->fail = 0;
	}
	pthread_mutex_unlock(&s->mu);
	rix_free(blobs);
	free(pack);
	rix_pack_writer_free(w);
	return rc;
}

static int cmp_id(const void *a, const void *b)
{
	return memcmp(((const rix_blob *)a)->id.b, ((const rix_blob *)b)->id.b, RIX_ID_SIZE);
}

/* restic's PackerManager shape: 102 blobs of rand(1 MiB), 4 MiB packs, and one big blob. */
static void test_packer_single(void **state)
{
	(void)state;
	rix_key *key;
	MUST(rix_key_random(&key));
	char *dir = rix_test_new_dir("rix-packw");
	struct sink s = { .mu = PTHREAD_MUTEX_INITIALIZER, .key = key, .version = 2 };
	rix_packer *p = (rix_packer *)1;
	assert_int_equal(rix_packer_new(&p, key, 2, dir, 3 << 20, sink_done, &s), RIX_EINVAL);
	assert_null(p);
	assert_int_equal(rix_packer_new(&p, key, 2, dir, (129ull << 20), sink_done, &s), RIX_EINVAL);
	MUST(rix_packer_new(&p, key, 2, dir, 4 << 20, sink_done, &s));
	rix_blob_codec *c;
	MUST(rix_blob_codec_new(&c, key, 2, RIX_COMPRESSION_AUTO));
	uint64_t st = 51;
	uint8_t *buf = malloc(5 << 20);
	rix_blob want[103];
	for (int i = 0; i < 103; i++) {
		size_t n = i == 50 ? (size_t)5 << 20 : (size_t)(rix_test_next(&st) % (1 << 20));
		rix_test_fill_random(buf, n, &st);
		rix_blob_type t = i % 10 == 0 ? RIX_BLOB_TREE : RIX_BLOB_DATA;
		rix_sha256(&want[i].id, buf, n);
		want[i].type = t;
		uint32_t len = 1;
		MUST(rix_packer_add(&len, p, c, t, &want[i].id, buf, n));
		want[i].length = len; /* checked against the packs' entries below */
		assert_true(len >= n + RIX_CRYPTO_OVERHEAD); /* random data does not compress */
		assert_true(rix_packer_open_count(p) <= 2); /* one per type, single thread */
	}
	assert_true(rix_packer_packs_done(p) >= 10);
	MUST(rix_packer_flush(p));
	assert_int_equal(rix_packer_open_count(p), 0);
	MUST(rix_packer_flush(p)); /* nothing left: a no-op */
	assert_int_equal(s.npacks, rix_packer_packs_done(p));
	assert_int_equal(s.nblobs, 103);
	/* Every pack but the last of each type and the big one is at the target or a blob over. */
	size_t small = 0, own = 0;
	for (size_t i = 0; i < s.npacks; i++) {
		if (s.sizes[i] < (4u << 20))
			small++;
		assert_true(s.sizes[i] < (5u << 20) + 64 || s.pack_blobs[i] == 1);
		own += s.pack_blobs[i] == 1 && s.sizes[i] >= (5u << 20);
	}
	assert_true(small <= 2);
	assert_int_equal(own, 1);
	/* Each blob exactly once, with its type. */
	qsort(s.blobs, s.nblobs, sizeof(rix_blob), cmp_id);
	qsort(want, 103, sizeof(rix_blob), cmp_id);
	for (int i = 0; i < 103; i++) {
		assert_memory_equal(s.blobs[i].id.b, want[i].id.b, RIX_ID_SIZE);
		assert_int_equal(s.blobs[i].type, want[i].type);
		assert_int_equal(s.blobs[i].length, want[i].length);
	}
	rix_packer_free(p);
	assert_int_equal(count_files(dir), 0); /* the sink removed every file */
	/* done's error reaches the caller; the packer goes on. */
	s.npacks = s.nblobs = 0;
	MUST(rix_packer_new(&p, key, 2, dir, 4 << 20, sink_done, &s));
	s.fail = RIX_EIO;
	rix_id id;
	rix_sha256(&id, buf, 100);
	MUST(rix_packer_add(NULL, p, c, RIX_BLOB_DATA, &id, buf, 100));
	assert_int_equal(rix_packer_flush(p), RIX_EIO);
	MUST(rix_packer_add(NULL, p, c, RIX_BLOB_DATA, &id, buf, 100));
	/* Freed with an open pack: its temporary file goes. */
	assert_int_equal(count_files(dir), 1);
	rix_packer_free(p);
	assert_int_equal(count_files(dir), 0);
	rix_packer_free(NULL);
	free(buf);
	rix_blob_codec_free(c);
	rix_test_free_dir(dir);
	rix_key_free(key);
}

/*
 * rix_packer_add_stored: blobs copied from a pack (compressed ones, uncompressed ones, an empty
 * one, and one over the target, which gets a pack of its own) land in packs that read back, each
 * entry with the length and uncompressed length it had; what it refuses.
 */
static void test_packer_add_stored(void **state)
{
	(void)state;
	rix_key *key;
	MUST(rix_key_random(&key));
	char *dir = rix_test_new_dir("rix-packw");
	uint64_t st = 77;
	rix_blob_codec *c;
	MUST(rix_blob_codec_new(&c, key, 2, RIX_COMPRESSION_MAX));
	rix_pack_writer *w;
	MUST(rix_pack_writer_new(&w, key, 2, dir));
	for (int k = 0; k <= NCONTENT; k++) {
		size_t n;
		uint8_t *plain;
		if (k < NCONTENT) {
			plain = make_content((enum content)k, &n, &st);
		} else { /* over the packer's target */
			n = (size_t)5 << 20;
			plain = malloc(n);
			rix_test_fill_random(plain, n, &st);
		}
		rix_id id;
		rix_sha256(&id, plain, n);
		MUST(rix_pack_writer_add(w, c, k == ZEROS ? RIX_BLOB_TREE : RIX_BLOB_DATA, &id, plain, n));
		free(plain);
	}
	rix_id pid;
	MUST(rix_pack_writer_finish(&pid, w));
	size_t n;
	uint8_t *pack = rix_test_must_read(rix_pack_writer_path(w), &n);
	const rix_blob *src = rix_pack_writer_blobs(w);
	size_t nsrc = rix_pack_writer_count(w), compressed = 0;

	struct sink s = { .mu = PTHREAD_MUTEX_INITIALIZER, .key = key, .version = 2 };
	rix_packer *p;
	MUST(rix_packer_new(&p, key, 2, dir, 4 << 20, sink_done, &s));
	for (size_t i = 0; i < nsrc; i++) {
		MUST(rix_packer_add_stored(p, &src[i], pack + src[i].offset));
		compressed += src[i].uncompressed_length != 0;
	}
	assert_true(compressed >= 2);
	assert_int_equal(rix_packer_packs_done(p), 1); /* the big blob's own pack, at once */
	MUST(rix_packer_flush(p));
	assert_int_equal(s.nblobs, nsrc); /* each read back (sink_done decodes every blob) */
	for (size_t i = 0; i < nsrc; i++) {
		size_t k = 0;
		while (k < s.nblobs && memcmp(&s.blobs[k].id, &src[i].id, sizeof(rix_id)) != 0)
			k++;
		assert_true(k < s.nblobs);
		assert_int_equal(s.blobs[k].type, src[i].type);
		assert_int_equal(s.blobs[k].length, src[i].length);
		assert_int_equal(s.blobs[k].uncompressed_length, src[i].uncompressed_length);
	}
	/* Refused: an unknown type, a length under 32; a compressed blob in version 1. */
	rix_blob b = src[0];
	b.type = (rix_blob_type)5;
	assert_int_equal(rix_packer_add_stored(p, &b, pack + src[0].offset), RIX_EINVAL);
	b = src[0];
	b.length = 31;
	assert_int_equal(rix_packer_add_stored(p, &b, pack), RIX_EINVAL);
	rix_packer_free(p);
	s.version = 1;
	MUST(rix_packer_new(&p, key, 1, dir, 4 << 20, sink_done, &s));
	for (size_t i = 0; i < nsrc; i++)
		if (src[i].uncompressed_length != 0)
			assert_int_equal(rix_packer_add_stored(p, &src[i], pack + src[i].offset), RIX_EINVAL);
	assert_int_equal(rix_packer_open_count(p), 0); /* the refused blobs' packs are gone */
	rix_packer_free(p);
	free(pack);
	rix_pack_writer_free(w);
	assert_int_equal(count_files(dir), 0);
	rix_blob_codec_free(c);
	rix_test_free_dir(dir);
	rix_key_free(key);
}

struct worker {
	rix_packer *p;
	const rix_key *key;
	int index;
	rix_id ids[60];
	int rc;
};

static void *worker_run(void *arg)
{
	struct worker *wk = arg;
	rix_blob_codec *c;
	wk->rc = rix_blob_codec_new(&c, wk->key, 2, RIX_COMPRESSION_AUTO);
	uint64_t st = 1000 + (uint64_t)wk->index;
	uint8_t *buf = malloc(300000);
	for (int i = 0; wk->rc == 0 && i < 60; i++) {
		size_t n = 1000 + rix_test_next(&st) % 299000;
		rix_test_fill_random(buf, n, &st);
		rix_sha256(&wk->ids[i], buf, n);
		wk->rc = rix_packer_add(NULL, wk->p, c, (rix_blob_type)(i % 2), &wk->ids[i], buf, n);
	}
	free(buf);
	rix_blob_codec_free(c);
	return NULL;
}

/* Four threads add at once: every blob lands once, in a pack that reads back. */
static void test_packer_threads(void **state)
{
	(void)state;
	rix_key *key;
	MUST(rix_key_random(&key));
	char *dir = rix_test_new_dir("rix-packw");
	static struct sink s;
	memset(&s, 0, sizeof(s));
	pthread_mutex_init(&s.mu, NULL);
	s.key = key;
	s.version = 2;
	rix_packer *p;
	MUST(rix_packer_new(&p, key, 2, dir, 4 << 20, sink_done, &s));
	struct worker wk[4];
	pthread_t th[4];
	for (int i = 0; i < 4; i++) {
		wk[i] = (struct worker){ .p = p, .key = key, .index = i };
		assert_int_equal(pthread_create(&th[i], NULL, worker_run, &wk[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		if (wk[i].rc != 0)
			fail_msg("worker %d: %d (%s)", i, wk[i].rc, rix_error_last());
	}
	assert_true(rix_packer_open_count(p) <= 8);
	MUST(rix_packer_flush(p));
	assert_int_equal(rix_packer_open_count(p), 0);
	assert_int_equal(s.nblobs, 240);
	qsort(s.blobs, s.nblobs, sizeof(rix_blob), cmp_id);
	for (size_t i = 1; i < s.nblobs; i++)
		assert_true(memcmp(s.blobs[i - 1].id.b, s.blobs[i].id.b, RIX_ID_SIZE) != 0);
	for (int i = 0; i < 4; i++)
		for (int k = 0; k < 60; k++) {
			rix_blob key_blob = { .id = wk[i].ids[k] };
			assert_non_null(bsearch(&key_blob, s.blobs, s.nblobs, sizeof(rix_blob), cmp_id));
		}
	rix_packer_free(p);
	assert_int_equal(count_files(dir), 0);
	rix_test_free_dir(dir);
	rix_key_free(key);
}

/* A pack whose finish fails for lack of memory stays open with its blobs; the next flush hands it on. */
static void test_packer_keeps_pack_after_enomem(void **state)
{
	(void)state;
	rix_key *key;
	MUST(rix_key_random(&key));
	char *dir = rix_test_new_dir("rix-packw");
	static struct sink s;
	memset(&s, 0, sizeof(s));
	pthread_mutex_init(&s.mu, NULL);
	s.key = key;
	s.version = 2;
	rix_packer *p;
	MUST(rix_packer_new(&p, key, 2, dir, 4 << 20, sink_done, &s));
	rix_blob_codec *c;
	MUST(rix_blob_codec_new(&c, key, 2, RIX_COMPRESSION_OFF));
	uint8_t buf[3000];
	uint64_t st = 61;
	for (int i = 0; i < 3; i++) {
		rix_test_fill_random(buf, sizeof(buf), &st);
		rix_id id;
		rix_sha256(&id, buf, sizeof(buf));
		MUST(rix_packer_add(NULL, p, c, RIX_BLOB_DATA, &id, buf, sizeof(buf)));
	}
	rix_test_failalloc_install(1); /* the header's buffer in finish */
	int rc = rix_packer_flush(p);
	rix_test_failalloc_remove();
	assert_int_equal(rc, RIX_ENOMEM);
	assert_int_equal(s.npacks, 0);
	assert_int_equal(rix_packer_open_count(p), 1);
	MUST(rix_packer_flush(p));
	assert_int_equal(s.npacks, 1);
	assert_int_equal(s.nblobs, 3);
	rix_packer_free(p);
	rix_blob_codec_free(c);
	rix_test_free_dir(dir);
	rix_key_free(key);
}

/* ---- allocation failure ------------------------------------------------------------------- */

/* What each allocation-failure loop works on: a key, and a folder for the packs. */
struct oom_in {
	const rix_key *key;
	const char *dir;
};

static int oom_codec(void *arg)
{
	const rix_key *key = ((const struct oom_in *)arg)->key;
	static uint8_t plain[50000], stored[60000], out[50000];
	for (size_t i = 0; i < sizeof(plain); i++)
		plain[i] = (uint8_t)("abcab"[i % 5]);
	rix_blob_codec *c;
	int rc = rix_blob_codec_new(&c, key, 2, RIX_COMPRESSION_AUTO);
	if (rc != 0)
		return rc;
	rix_blob b = { .type = RIX_BLOB_DATA };
	rix_sha256(&b.id, plain, sizeof(plain));
	size_t got;
	rc = rix_blob_codec_encode(&b.length, &b.uncompressed_length, c, RIX_BLOB_DATA, plain, sizeof(plain), stored,
				   sizeof(stored));
	if (rc == 0)
		rc = rix_blob_codec_decode(&got, c, stored, b.length, &b, out, sizeof(out));
	rix_blob_codec_free(c);
	return rc;
}

static int oom_writer(void *arg)
{
	const rix_key *key = ((const struct oom_in *)arg)->key;
	const char *dir = ((const struct oom_in *)arg)->dir;
	static uint8_t plain[50000];
	rix_blob_codec *c;
	int rc = rix_blob_codec_new(&c, key, 2, RIX_COMPRESSION_AUTO);
	if (rc != 0)
		return rc;
	rix_pack_writer *w;
	rc = rix_pack_writer_new(&w, key, 2, dir);
	for (int i = 0; rc == 0 && i < 70; i++) {
		plain[0] = (uint8_t)i;
		rix_id id;
		rix_sha256(&id, plain, sizeof(plain));
		rc = rix_pack_writer_add(w, c, RIX_BLOB_DATA, &id, plain, sizeof(plain));
	}
	rix_id pid;
	if (rc == 0)
		rc = rix_pack_writer_finish(&pid, w);
	if (rc == 0) {
		char path[512], hex[65];
		rix_id_to_hex(hex, &pid);
		snprintf(path, sizeof(path), "%s/%s", dir, hex);
		rc = rix_pack_writer_rename(w, path, 1);
		unlink(path);
	}
	rix_pack_writer_free(w);
	rix_blob_codec_free(c);
	return rc;
}

static int drop_done(void *arg, rix_pack_writer *w, const rix_id *pack_id)
{
	(void)arg;
	(void)pack_id;
	rix_pack_writer_free(w);
	return 0;
}

static int oom_packer(void *arg)
{
	const rix_key *key = ((const struct oom_in *)arg)->key;
	const char *dir = ((const struct oom_in *)arg)->dir;
	static uint8_t plain[300000];
	rix_blob_codec *c;
	int rc = rix_blob_codec_new(&c, key, 2, RIX_COMPRESSION_OFF);
	if (rc != 0)
		return rc;
	rix_packer *p;
	rc = rix_packer_new(&p, key, 2, dir, 4 << 20, drop_done, NULL);
	for (int i = 0; rc == 0 && i < 20; i++) {
		plain[0] = (uint8_t)i;
		rix_id id;
		rix_sha256(&id, plain, sizeof(plain));
		rc = rix_packer_add(NULL, p, c, (rix_blob_type)(i % 2), &id, plain, sizeof(plain));
	}
	if (rc == 0)
		rc = rix_packer_flush(p);
	rix_packer_free(p);
	rix_blob_codec_free(c);
	return rc;
}

/* No temporary file is left behind, failure or not. */
static void no_file_left(void *arg, const rix_test_oom_round *round)
{
	(void)round;
	assert_int_equal(count_files(((const struct oom_in *)arg)->dir), 0);
}

/* Fails allocation 1, 2, ... until each call succeeds with nothing failed (rix_test_oom_run):
 * RIX_ENOMEM, no leak, no file left; each call allocates at least once. */
static void test_allocation_failure(void **state)
{
	(void)state;
	rix_key *key;
	MUST(rix_key_random(&key));
	char *dir = rix_test_new_dir("rix-packw");
	struct oom_in in = { key, dir };
	rix_test_oom o = { .what = "codec", .run = oom_codec, .arg = &in, .max = 1000, .check = no_file_left };
	assert_true(rix_test_oom_run(&o) > 1);
	o.what = "pack writer";
	o.run = oom_writer;
	assert_true(rix_test_oom_run(&o) > 1);
	o.what = "packer";
	o.run = oom_packer;
	assert_true(rix_test_oom_run(&o) > 1);
	rix_test_free_dir(dir);
	rix_key_free(key);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_codec_matrix),
		cmocka_unit_test(test_codec_min_saving),
		cmocka_unit_test(test_codec_bad_arguments),
		cmocka_unit_test(test_codec_no_allocation_per_blob),
		cmocka_unit_test(test_writer_round_trip),
		cmocka_unit_test(test_writer_add_stored),
		cmocka_unit_test(test_writer_blob_limit),
		cmocka_unit_test(test_writer_disk_full),
		cmocka_unit_test(test_packer_single),
		cmocka_unit_test(test_packer_add_stored),
		cmocka_unit_test(test_packer_threads),
		cmocka_unit_test(test_packer_keeps_pack_after_enomem),
		cmocka_unit_test(test_allocation_failure),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
