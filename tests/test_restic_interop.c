/*
 * tests/test_restic_interop.c — the real restic binary (Debian's 0.14) as the oracle, both ways.
 *
 * restic writes, rix reads (test_restic_writes_*): for version 1, and version 2 with compression
 * auto, max and off, `restic init` then `restic backup` of a small tree (C headers as text, two
 * documentation files when the system has them, a 2 MiB random file, a 14-byte and a one-byte
 * file, an empty file: about 2.6 MiB). With only the directory and the
 * password, rix opens the key (trying every file in keys/), decodes every index and snapshot
 * file, reads every pack's header and checks it against the index, and decodes every blob with
 * rix_blob_codec_decode into a buffer of exactly rix_blob_plain_size bytes (MAC, zstd, SHA-256).
 * Which blobs are compressed must match the mode: none in version 1; in version 2 every tree,
 * and text data unless the mode is off. The blob set equals `restic list blobs`, the index
 * JSON equals `restic cat index` byte for byte, the snapshot equals `restic cat snapshot`, and a
 * few blobs (a text, the largest random chunk, the 14-byte file, the root tree) equal `restic
 * cat blob` byte for byte.
 *
 * rix writes, restic reads (test_rix_writes_*): for version 1, and version 2 with compression
 * auto and max, starting from a repository made by `restic init` (restic's key and config).
 * rix opens the key and stores, through a rix_blob_codec and a rix_packer (4 MiB target; the
 * done callback renames each pack to data/<2 hex>/<id> and records it in a rix_index), data
 * blobs of 0 bytes, 1 byte, ~100 KiB of text, 1.5 MiB random and 5 MiB (bigger than the target,
 * so a pack of its own), then two tree blobs and a snapshot that reference all of them; then the
 * index file (rix_index_encode, rix_unpacked_encode). restic must agree: `restic list blobs` is
 * the set rix stored, `restic cat blob` gives each plaintext byte for byte, `restic cat index`
 * gives back rix's index JSON byte for byte, `restic check --read-data` finds no errors, and
 * `restic restore` of the snapshot gives back the files byte for byte. restic's view of the
 * compression rix recorded: in version 2 an index claiming one byte more uncompressed for the
 * text blob than the pack header makes `restic check --read-data` fail ("is not contained in
 * index or position is incorrect": it compares each header entry, uncompressed length
 * included, with the index), so its passing the real index means restic reads rix's index and
 * pack headers alike.
 *
 * Findings about restic 0.14.0, checked on every run (the oracle is the binary, not our notes):
 * (a) Unpacked files in version 2: restic writes index and snapshot files as 0x02 followed by
 *     exactly one zstd frame with nothing after it, without a checksum. The frame declares its
 *     content size, except when the JSON is under 256 bytes (its zstd encoder leaves the size
 *     out of small frames that are not single-segment): a typical snapshot (~190 bytes) has no
 *     declared size, an index file has one. Compressed blobs are the same: one frame each, no
 *     checksum, the size declared from 256 bytes on (tiny.txt's and one-byte's frames have
 *     none). So our decoder's "exactly one frame, nothing after it" accepts everything restic
 *     writes, and neither decoder may require a declared size (ours streams then).
 * (b) Stored blob lengths: restic never stores a blob under 32 bytes. It writes no blob at all
 *     for an empty file (content []), so it never stores an empty blob; the smallest stored
 *     blob is a one-byte file's, 33 bytes (or a little more as a zstd frame). A zero-length
 *     blob as rix stores it (the seal of nothing: exactly 32 bytes, never compressed) is read,
 *     checked and restored by restic. Our reader's "stored length >= 32" refuses nothing that
 *     restic writes or accepts.
 * (c) Unreferenced blobs: `restic check --read-data` on a repository with rix's packs and index
 *     but no snapshot exits 0 with "no errors were found": 0.14 does not report unused blobs
 *     at all (its changelog, #3295: `--check-unused` "has been deprecated and is now
 *     ignored"). The test still writes a snapshot referencing every blob, so the final check
 *     and the restore cover all of them.
 * (d) restic 0.14's auto and max compress every data blob, the random file's chunks too, which
 *     are then stored a little bigger than uncompressed; rix stores a data blob compressed
 *     only when that is smaller.
 *
 * Speed: restic's own key file is scrypt-calibrated (about half a second per opening), and
 * about 50 restic commands run. Each repository is initialised once per version (a template,
 * copied for every case); rix opens restic's key with the password, then adds a second key
 * file for the same master key with a cheap scrypt (N=1024) and another password, which every
 * later restic command uses through --key-hint. So rix always opens restic's own key (trying
 * the other key file too, which fails: a different password), and each restic command takes
 * about 0.2 s instead of 0.7 s.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include <jansson.h>

#include "rix/rix.h"
#include "pack/pack_internal.h"
#include "testutil.h"

#define PASSWORD "interop: correct horse"
#define FAST_PASSWORD "interop: fast key"

/* Shared by all tests, made by the first test that needs it (see setup_once). */
static char g_work[512];     /* one temporary directory holding everything below */
static char g_src[600];      /* the tree restic backs up */
static char g_tmpl[3][600];  /* a repository made by `restic init`, per version */
static char g_hint[3][65];   /* ID of the cheap key file in g_tmpl[v] */
static int g_ready;          /* 0: not made yet, 1: made, -1: making it failed */

/* Text files of the tree (each under 512 KiB: one blob whose ID is the file's SHA-256). */
static const char *const text_files[] = { "zstd.h", "jansson.h", "cmocka.h" };

/* ---- helpers -------------------------------------------------------------------------------- */

struct buf {
	uint8_t *p;
	size_t n;
};

static struct buf read_path(const char *fmt, const char *a, const char *b)
{
	char path[8192];
	int k = snprintf(path, sizeof(path), fmt, a, b);
	if (k < 0 || (size_t)k >= sizeof(path))
		fail_msg("path too long");
	struct buf r;
	r.p = rix_test_must_read(path, &r.n);
	return r;
}

/*
 * restic on repo (a copy of template v) with the cheap key; the arguments printf-style. Its
 * stdout goes to *out (NULL: shown only on failure). Returns restic's exit status.
 */
static const char *restic_cmd(int v)
{
	static char cmd[300];
	snprintf(cmd, sizeof(cmd), "RESTIC_PASSWORD='%s' restic --no-cache --key-hint %s", FAST_PASSWORD, g_hint[v]);
	return cmd;
}
#define restic(v, repo, out, len, ...) rix_test_tool(out, len, NULL, restic_cmd(v), repo, "", __VA_ARGS__)

/* Opens the repository's key with the password the way a user's rix would: every file in keys/. */
static rix_key *open_key_dir(const char *repo, const char *password)
{
	char dir[4096], names[8][65];
	snprintf(dir, sizeof(dir), "%s/keys", repo);
	size_t n = rix_test_list_ids(dir, names, 8);
	assert_true(n >= 1);
	for (size_t i = 0; i < n; i++) {
		struct buf kf = read_path("%s/%s", dir, names[i]);
		rix_key *key = NULL;
		int rc = rix_key_open_file(&key, (const char *)kf.p, kf.n, password, strlen(password));
		free(kf.p);
		if (rc == 0)
			return key;
		if (rc != RIX_EAUTH)
			fail_msg("key file %s: %s", names[i], rix_error_last());
	}
	fail_msg("no key file of %s opens with the password", repo);
	return NULL;
}

/* The test's shared state: the source tree and one `restic init` repository per version. */
static void make_source_tree(void)
{
	snprintf(g_src, sizeof(g_src), "%s/src", g_work);
	int rc = rix_test_run(NULL, NULL,
			      "mkdir -p '%s/headers' && cp /usr/include/zstd.h /usr/include/jansson.h "
			      "/usr/include/cmocka.h '%s/' && cp /usr/include/sodium/*.h '%s/headers/'",
			      g_src, g_src, g_src);
	assert_int_equal(rc, 0);
	/* Documentation when the system has it (a minimal image may leave /usr/share/doc out). */
	rix_test_run(NULL, NULL, "cp /usr/share/doc/restic/copyright /usr/share/doc/restic/changelog.gz '%s/' "
		     "2>/dev/null || true", g_src);
	size_t n = 2u << 20;
	uint8_t *rnd = malloc(n);
	uint64_t st = 0x1234;
	rix_test_fill_random(rnd, n, &st);
	rix_test_put_file(g_src, "random.bin", rnd, n);
	rix_test_put_file(g_src, "empty", "", 0);
	rix_test_put_file(g_src, "one-byte", "x", 1);
	rix_test_put_file(g_src, "tiny.txt", "hello, restic\n", 14);
	free(rnd);
}

static void make_template(int v)
{
	snprintf(g_tmpl[v], sizeof(g_tmpl[v]), "%s/template-v%d", g_work, v);
	char *out;
	size_t len;
	int rc = rix_test_run(&out, &len, "RESTIC_PASSWORD='%s' restic --no-cache init --repository-version %d -r '%s' 2>&1",
			      PASSWORD, v, g_tmpl[v]);
	if (rc != 0)
		fail_msg("restic init: %s", out);
	free(out);
	/* A second key file for the same master key, cheap to open (see the top of the file). */
	rix_key *key = open_key_dir(g_tmpl[v], PASSWORD);
	char *json;
	assert_int_equal(rix_key_create_file(&json, &len, key, FAST_PASSWORD, strlen(FAST_PASSWORD), 1024, 8, 1,
					     "rix", "interop"),
			 0);
	rix_id id;
	rix_sha256(&id, json, len);
	rix_id_to_hex(g_hint[v], &id);
	char name[80];
	snprintf(name, sizeof(name), "keys/%s", g_hint[v]);
	rix_test_put_file(g_tmpl[v], name, json, len);
	rix_free(json);
	rix_key_free(key);
}

static void setup_once(void)
{
	if (g_ready == 1)
		return;
	if (g_ready == -1)
		fail_msg("the shared setup failed in an earlier test");
	g_ready = -1;
	rix_test_need_restic();
	rix_test_mkdtemp(g_work, sizeof(g_work), "rix-interop");
	make_source_tree();
	make_template(1);
	make_template(2);
	g_ready = 1;
}

static int teardown_group(void **state)
{
	(void)state;
	if (g_work[0] != '\0')
		rix_test_rmtree(g_work);
	return 0;
}

/* A fresh copy of template v named name; its path into repo[size]. */
static void copy_template(int v, const char *name, char *repo, size_t size)
{
	snprintf(repo, size, "%s/%s", g_work, name);
	assert_int_equal(rix_test_run(NULL, NULL, "cp -a '%s' '%s'", g_tmpl[v], repo), 0);
}

/* Sorted "data <hex>" / "tree <hex>" lines. */
struct lines {
	char (*s)[80];
	size_t n, cap;
};

static void lines_add(struct lines *l, rix_blob_type t, const rix_id *id)
{
	if (l->n == l->cap) {
		l->cap = l->cap ? l->cap * 2 : 64;
		l->s = realloc(l->s, l->cap * sizeof(*l->s));
		assert_non_null(l->s);
	}
	char hex[65];
	rix_id_to_hex(hex, id);
	snprintf(l->s[l->n++], sizeof(l->s[0]), "%s %s", t == RIX_BLOB_TREE ? "tree" : "data", hex);
}

static int cmp_line(const void *a, const void *b)
{
	return strcmp((const char *)a, (const char *)b);
}

/* `restic list blobs` must print exactly the lines of want (in any order). */
static void restic_list_blobs_equals(int v, const char *repo, struct lines *want)
{
	char *out;
	size_t len;
	assert_int_equal(restic(v, repo, &out, &len, "list blobs"), 0);
	struct lines got = { 0 };
	for (char *line = strtok(out, "\n"); line != NULL; line = strtok(NULL, "\n")) {
		rix_id id;
		if (strlen(line) != 69 || rix_id_from_hex(&id, line + 5, 64) != 0)
			fail_msg("restic list blobs: unexpected line \"%s\"", line);
		if (strncmp(line, "data ", 5) == 0)
			lines_add(&got, RIX_BLOB_DATA, &id);
		else if (strncmp(line, "tree ", 5) == 0)
			lines_add(&got, RIX_BLOB_TREE, &id);
		else
			fail_msg("restic list blobs: unexpected line \"%s\"", line);
	}
	free(out);
	qsort(got.s, got.n, sizeof(got.s[0]), cmp_line);
	qsort(want->s, want->n, sizeof(want->s[0]), cmp_line);
	assert_int_equal(got.n, want->n);
	for (size_t i = 0; i < got.n; i++)
		assert_string_equal(got.s[i], want->s[i]);
	free(got.s);
}

/* `restic cat blob <id>` must print exactly plain[0..n). */
static void restic_cat_blob_equals(int v, const char *repo, const rix_id *id, const void *plain, size_t n)
{
	char hex[65], *out;
	size_t len;
	rix_id_to_hex(hex, id);
	int rc = restic(v, repo, &out, &len, "cat blob %s", hex);
	if (rc != 0)
		fail_msg("restic cat blob %s: exit %d", hex, rc);
	if (len != n || (n > 0 && memcmp(out, plain, n) != 0))
		fail_msg("restic cat blob %s: %zu bytes differ from rix's %zu", hex, len, n);
	free(out);
}

/*
 * `restic check --read-data` must exit 0 saying "no errors were found", and print nothing but
 * its progress lines: no error, warning or hint (0.14 warns of packs mixing data and trees, say).
 */
static void restic_check_clean(int v, const char *repo, const char *what)
{
	static const char *const progress[] = { "create exclusive lock for repository", "load indexes",
						 "check all packs", "check snapshots, trees and blobs",
						 "read all data", "no errors were found" };
	char *out;
	size_t len;
	int rc = restic(v, repo, &out, &len, "check --read-data 2>&1");
	if (rc != 0 || strstr(out, "\nno errors were found\n") == NULL)
		fail_msg("restic check --read-data (%s): exit %d:\n%s", what, rc, out);
	char *copy = strdup(out);
	for (char *line = strtok(copy, "\n"); line != NULL; line = strtok(NULL, "\n")) {
		/* A progress counter ("[0:00] 100.00%  3 / 3 packs"), printed or not depending on timing. */
		size_t d = strspn(line + 1, "0123456789:");
		int known = line[0] == '[' && d > 0 && line[1 + d] == ']';
		for (size_t i = 0; i < sizeof(progress) / sizeof(progress[0]); i++)
			known |= strcmp(line, progress[i]) == 0;
		if (!known)
			fail_msg("restic check --read-data (%s) says \"%s\":\n%s", what, line, out);
	}
	free(copy);
	free(out);
}

/* `restic cat index <hex>` must print the file's JSON json[0..n) byte for byte (and a newline). */
static void restic_cat_index_equals(int v, const char *repo, const char *hex, const void *json, size_t n)
{
	char *out;
	size_t len;
	assert_int_equal(restic(v, repo, &out, &len, "cat index %s", hex), 0);
	/* restic prints the stored JSON (which ends in a newline) with Println: one more newline. */
	assert_int_equal(len, n + 1);
	assert_memory_equal(out, json, n);
	assert_int_equal(out[n], '\n');
	free(out);
}

/*
 * Finding (a): the file's plaintext is '{' JSON (version 1), or 0x02 || exactly one zstd frame
 * and nothing after it, without a checksum (version 2). The frame declares its content size
 * unless the JSON is under 256 bytes (restic's encoder leaves the size out of small frames).
 */
static void check_unpacked_layout(const rix_key *key, const struct buf *f, int v, size_t json_len)
{
	uint8_t *plain = malloc(f->n);
	assert_int_equal(rix_crypto_open(key, f->p, f->n, plain), 0);
	size_t m = f->n - RIX_CRYPTO_OVERHEAD;
	if (v == 1) {
		assert_int_equal(plain[0], '{');
		assert_int_equal(m, json_len);
	} else {
		assert_int_equal(plain[0], RIX_UNPACKED_ZSTD);
		const uint8_t *z = plain + 1;
		size_t zn = m - 1;
		assert_int_equal(ZSTD_findFrameCompressedSize(z, zn), zn);
		ZSTD_frameHeader fh;
		assert_int_equal(ZSTD_getFrameHeader(&fh, z, zn), 0);
		assert_int_equal(fh.frameType, ZSTD_frame);
		assert_int_equal(fh.checksumFlag, 0);
		if (json_len < 256)
			assert_true(fh.frameContentSize == ZSTD_CONTENTSIZE_UNKNOWN);
		else
			assert_true(fh.frameContentSize == json_len);
	}
	free(plain);
}

/* The same for a compressed blob's stored bytes; returns whether the frame declares its size. */
static int check_blob_frame(const rix_key *key, const uint8_t *stored, const rix_blob *b)
{
	uint8_t *plain = malloc(b->length);
	assert_int_equal(rix_crypto_open(key, stored, b->length, plain), 0);
	size_t zn = b->length - RIX_CRYPTO_OVERHEAD;
	assert_int_equal(ZSTD_findFrameCompressedSize(plain, zn), zn);
	ZSTD_frameHeader fh;
	assert_int_equal(ZSTD_getFrameHeader(&fh, plain, zn), 0);
	assert_int_equal(fh.checksumFlag, 0);
	if (b->uncompressed_length < 256)
		assert_true(fh.frameContentSize == ZSTD_CONTENTSIZE_UNKNOWN);
	else
		assert_true(fh.frameContentSize == b->uncompressed_length);
	free(plain);
	return fh.frameContentSize != ZSTD_CONTENTSIZE_UNKNOWN;
}

/* ---- restic writes, rix reads --------------------------------------------------------------- */

struct chosen {
	rix_blob_type t;
	rix_id id;
	uint8_t *plain; /* filled while the packs are read */
	size_t n;
};

static int find_largest_data(void *arg, const rix_packed_blob *pb)
{
	rix_packed_blob *best = arg;
	if (pb->type == RIX_BLOB_DATA &&
	    rix_blob_plain_size(pb->length, pb->uncompressed_length) >
		    rix_blob_plain_size(best->length, best->uncompressed_length))
		*best = *pb;
	return 0;
}

static void check_restic_writes(int v, const char *mode)
{
	setup_once();
	char repo[700], name[64];
	snprintf(name, sizeof(name), "restic-v%d-%s", v, mode);
	copy_template(v, name, repo, sizeof(repo));
	char *out;
	size_t len;
	char comp[64] = "";
	if (v == 2)
		snprintf(comp, sizeof(comp), "--compression %s", mode);
	if (restic(v, repo, NULL, NULL, "%s backup '%s'", comp, g_src) != 0)
		fail_msg("restic backup failed");

	/* Only the directory and the password from here on. */
	rix_key *key = open_key_dir(repo, PASSWORD);
	char dir[1024], names[16][65];

	/* Index files: named by their SHA-256; layout (a); JSON == `restic cat index`. */
	snprintf(dir, sizeof(dir), "%s/index", repo);
	size_t nidx = rix_test_list_ids(dir, names, 16);
	assert_true(nidx >= 1);
	rix_index *idx[16];
	size_t index_blobs = 0, index_packs = 0;
	for (size_t i = 0; i < nidx; i++) {
		struct buf f = read_path("%s/%s", dir, names[i]);
		rix_id fid, want;
		rix_sha256(&fid, f.p, f.n);
		assert_int_equal(rix_id_from_hex(&want, names[i], 64), 0);
		assert_memory_equal(fid.b, want.b, RIX_ID_SIZE);
		uint8_t *json;
		size_t jn;
		if (rix_unpacked_decode(&json, &jn, key, f.p, f.n, v) != 0)
			fail_msg("index %s: %s", names[i], rix_error_last());
		check_unpacked_layout(key, &f, v, jn);
		if (rix_index_decode(&idx[i], NULL, (const char *)json, jn) != 0)
			fail_msg("index %s: %s", names[i], rix_error_last());
		index_blobs += rix_index_count(idx[i], RIX_BLOB_DATA) + rix_index_count(idx[i], RIX_BLOB_TREE);
		index_packs += rix_index_pack_count(idx[i]);
		restic_cat_index_equals(v, repo, names[i], json, jn);
		rix_free(json);
		free(f.p);
	}

	/* The snapshot: layout (a); JSON == `restic cat snapshot`; its tree is in the index. */
	snprintf(dir, sizeof(dir), "%s/snapshots", repo);
	assert_int_equal(rix_test_list_ids(dir, names, 16), 1);
	struct buf f = read_path("%s/%s", dir, names[0]);
	uint8_t *json;
	size_t jn;
	assert_int_equal(rix_unpacked_decode(&json, &jn, key, f.p, f.n, v), 0);
	check_unpacked_layout(key, &f, v, jn);
	free(f.p);
	assert_int_equal(restic(v, repo, &out, &len, "cat snapshot %s", names[0]), 0);
	json_t *mine = json_loadb((const char *)json, jn, 0, NULL), *theirs = json_loadb(out, len, 0, NULL);
	assert_non_null(mine);
	assert_non_null(theirs);
	assert_true(json_equal(mine, theirs));
	free(out);
	rix_free(json);

	/* Compared with `restic cat blob`: a text, the largest data blob, the root tree, tiny.txt. */
	struct chosen ch[4];
	memset(ch, 0, sizeof(ch));
	struct buf text = read_path("%s/%s", g_src, "zstd.h");
	ch[0].t = RIX_BLOB_DATA;
	rix_sha256(&ch[0].id, text.p, text.n);
	free(text.p);
	rix_packed_blob largest;
	memset(&largest, 0, sizeof(largest));
	for (size_t i = 0; i < nidx; i++)
		rix_index_foreach(idx[i], find_largest_data, &largest);
	ch[1].t = RIX_BLOB_DATA;
	ch[1].id = largest.id;
	ch[2].t = RIX_BLOB_TREE;
	assert_int_equal(rix_id_from_hex(&ch[2].id, json_string_value(json_object_get(mine, "tree")), 64), 0);
	json_decref(mine);
	json_decref(theirs);
	ch[3].t = RIX_BLOB_DATA;
	rix_sha256(&ch[3].id, "hello, restic\n", 14);
	rix_id text_ids[3];
	for (size_t i = 0; i < 3; i++) {
		struct buf t = read_path("%s/%s", g_src, text_files[i]);
		rix_sha256(&text_ids[i], t.p, t.n);
		free(t.p);
	}

	/* Every pack: name == SHA-256; header == index; every blob decodes into exactly its size. */
	rix_blob_codec *codec;
	assert_int_equal(rix_blob_codec_new(&codec, key, v, RIX_COMPRESSION_AUTO), 0);
	struct lines seen = { 0 };
	size_t npacks = 0, ncompressed_data = 0, ndata = 0, ntext_compressed = 0, nrandom = 0,
	       nrandom_compressed = 0;
	size_t nundeclared = 0; /* compressed blobs whose frame does not declare its size */
	uint32_t min_stored = UINT32_MAX;
	for (int hi = 0; hi < 256; hi++) {
		char sub[8];
		snprintf(sub, sizeof(sub), "%02x", hi);
		snprintf(dir, sizeof(dir), "%s/data/%s", repo, sub);
		size_t np = rix_test_list_ids(dir, names, 16);
		for (size_t k = 0; k < np; k++) {
			struct buf pack = read_path("%s/%s", dir, names[k]);
			rix_id pack_id, want;
			rix_sha256(&pack_id, pack.p, pack.n);
			assert_int_equal(rix_id_from_hex(&want, names[k], 64), 0);
			assert_memory_equal(pack_id.b, want.b, RIX_ID_SIZE);
			rix_blob *blobs;
			size_t cnt;
			if (rix_pack_read_header(&blobs, &cnt, key, pack.p, pack.n, v) != 0)
				fail_msg("pack %s: %s", names[k], rix_error_last());
			assert_true(cnt > 0);
			uint64_t end = 0;
			for (size_t i = 0; i < cnt; i++) {
				const rix_blob *b = &blobs[i];
				assert_int_equal(b->offset, end);
				end += b->length;
				if (b->length < min_stored)
					min_stored = b->length;
				/* The index lists this blob in this pack, at the same place. */
				int found = 0;
				for (size_t x = 0; x < nidx && !found; x++) {
					rix_packed_blob all[8];
					size_t na = rix_index_lookup_all(all, 8, idx[x], b->type, &b->id);
					for (size_t a = 0; a < na && a < 8; a++) {
						if (memcmp(all[a].pack_id.b, pack_id.b, RIX_ID_SIZE) != 0)
							continue;
						assert_int_equal(all[a].offset, b->offset);
						assert_int_equal(all[a].length, b->length);
						assert_int_equal(all[a].uncompressed_length, b->uncompressed_length);
						found = 1;
					}
				}
				assert_true(found);
				/* Decoded into a buffer of exactly the plaintext size (ASan sees one byte more). */
				size_t psize = rix_blob_plain_size(b->length, b->uncompressed_length);
				uint8_t *plain = malloc(psize ? psize : 1);
				size_t got;
				if (rix_blob_codec_decode(&got, codec, pack.p + b->offset, b->length, b, plain, psize) != 0)
					fail_msg("pack %s blob %zu: %s", names[k], i, rix_error_last());
				assert_int_equal(got, psize);
				if (b->uncompressed_length != 0 && !check_blob_frame(key, pack.p + b->offset, b))
					nundeclared++;
				/* Compression by mode. */
				int z = b->uncompressed_length != 0;
				if (v == 1)
					assert_false(z);
				else if (b->type == RIX_BLOB_TREE)
					assert_true(z);
				if (b->type == RIX_BLOB_DATA) {
					ndata++;
					ncompressed_data += z;
					for (size_t t = 0; t < 3; t++)
						if (memcmp(b->id.b, text_ids[t].b, RIX_ID_SIZE) == 0) {
							ntext_compressed += z;
							if (z)
								assert_true(b->length < psize);
						}
					if (psize >= (256u << 10)) { /* the random file's chunks (the texts are smaller) */
						nrandom++;
						nrandom_compressed += z;
						if (z) /* (d): stored compressed though it grew */
							assert_true(b->length > psize + RIX_CRYPTO_OVERHEAD);
					}
				}
				for (size_t c = 0; c < 4; c++)
					if (ch[c].plain == NULL && ch[c].t == b->type &&
					    memcmp(ch[c].id.b, b->id.b, RIX_ID_SIZE) == 0) {
						ch[c].plain = malloc(psize ? psize : 1);
						memcpy(ch[c].plain, plain, psize);
						ch[c].n = psize;
					}
				free(plain);
				lines_add(&seen, b->type, &b->id);
			}
			/* restic's packs are exactly blobs || sealed header || its length. */
			assert_int_equal(end + 4 + rix__le32(pack.p + pack.n - 4), pack.n);
			rix_free(blobs);
			free(pack.p);
			npacks++;
		}
	}
	/* Every pack and blob of the index was seen, and nothing else. */
	assert_int_equal(npacks, index_packs);
	assert_int_equal(seen.n, index_blobs);
	/*
	 * (b): no blob for the empty file, so no empty blob at all; the smallest stored blob is the
	 * one-byte file's: 33 bytes uncompressed, a little more as a zstd frame.
	 */
	rix_id empty_id;
	rix_sha256(&empty_id, "", 0);
	for (size_t i = 0; i < nidx; i++)
		assert_false(rix_index_has(idx[i], RIX_BLOB_DATA, &empty_id));
	assert_true(nrandom >= 1);
	if (v == 1 || strcmp(mode, "off") == 0) {
		assert_int_equal(ncompressed_data, 0);
		assert_int_equal(min_stored, 1 + RIX_CRYPTO_OVERHEAD);
	} else {
		assert_int_equal(ntext_compressed, 3);
		/* (d): restic's auto and max compress every data blob, incompressible ones too. */
		assert_int_equal(nrandom_compressed, nrandom);
		assert_int_equal(ncompressed_data, ndata);
		assert_true(min_stored > 1 + RIX_CRYPTO_OVERHEAD);
		/* (a) for blobs: the small files' frames (tiny.txt, one-byte) carry no content size. */
		assert_true(nundeclared >= 2);
	}
	rix_blob_codec_free(codec);

	/* restic's view. */
	restic_list_blobs_equals(v, repo, &seen);
	for (size_t c = 0; c < 4; c++) {
		if (ch[c].plain == NULL)
			fail_msg("chosen blob %zu not found in any pack", c);
		restic_cat_blob_equals(v, repo, &ch[c].id, ch[c].plain, ch[c].n);
		free(ch[c].plain);
	}
	free(seen.s);
	for (size_t i = 0; i < nidx; i++)
		rix_index_free(idx[i]);
	rix_key_free(key);
	rix_test_rmtree(repo);
}

static void test_restic_writes_v1(void **state)
{
	(void)state;
	check_restic_writes(1, "v1");
}

static void test_restic_writes_v2_auto(void **state)
{
	(void)state;
	check_restic_writes(2, "auto");
}

static void test_restic_writes_v2_max(void **state)
{
	(void)state;
	check_restic_writes(2, "max");
}

static void test_restic_writes_v2_off(void **state)
{
	(void)state;
	check_restic_writes(2, "off");
}

/* ---- rix writes, restic reads --------------------------------------------------------------- */

struct done_ctx {
	const char *repo;
	rix_index *idx;
	size_t packs;
};

/* The packer's done callback: the pack into place, its blobs into the index. */
static int on_pack_done(void *arg, rix_pack_writer *w, const rix_id *pack_id)
{
	struct done_ctx *d = arg;
	char hex[65], path[4096];
	rix_id_to_hex(hex, pack_id);
	snprintf(path, sizeof(path), "%s/data/%.2s/%s", d->repo, hex, hex);
	int rc = rix_pack_writer_rename(w, path, 1);
	if (rc == 0)
		rc = rix_index_store_pack(d->idx, pack_id, rix_pack_writer_blobs(w), rix_pack_writer_count(w));
	rix_pack_writer_free(w);
	d->packs++;
	return rc;
}

/* Writes JSON json[0..n) as the unpacked file <repo>/<sub>/<ID>; its ID into hex. */
static void write_unpacked(const char *repo, const char *sub, const rix_key *key, int v, const void *json, size_t n,
			   char hex[65])
{
	uint8_t *file;
	size_t fn;
	assert_int_equal(rix_unpacked_encode(&file, &fn, key, json, n, v), 0);
	rix_id id;
	rix_sha256(&id, file, fn);
	rix_id_to_hex(hex, &id);
	char name[128];
	snprintf(name, sizeof(name), "%s/%s", sub, hex);
	rix_test_put_file(repo, name, file, fn);
	rix_free(file);
}

/* Copies an index's packs into another, one blob's uncompressed length one byte too long. */
struct spoil_ctx {
	rix_index *dst;
	const rix_id *spoil;
};

static int copy_pack_spoiled(void *arg, const rix_id *pack_id, const rix_packed_blob *blobs, size_t n)
{
	struct spoil_ctx *sc = arg;
	rix_blob *b = calloc(n ? n : 1, sizeof(*b));
	assert_non_null(b);
	for (size_t i = 0; i < n; i++) {
		b[i].id = blobs[i].id;
		b[i].type = blobs[i].type;
		b[i].offset = blobs[i].offset;
		b[i].length = blobs[i].length;
		b[i].uncompressed_length = blobs[i].uncompressed_length;
		if (memcmp(b[i].id.b, sc->spoil->b, RIX_ID_SIZE) == 0) {
			assert_true(b[i].uncompressed_length != 0);
			b[i].uncompressed_length++;
		}
	}
	int rc = rix_index_store_pack(sc->dst, pack_id, b, n);
	free(b);
	return rc;
}

enum { B_ZERO, B_ONE, B_TEXT, B_RANDOM, B_BIG, B_SUBTREE, B_ROOT, NBLOBS };

struct wblob {
	const char *name;
	rix_blob_type t;
	uint8_t *p;
	size_t n;
	rix_id id;
};

/* The tree and snapshot JSON restic writes (nodes sorted by name, a newline after the tree). */
static json_t *file_node(const char *name, const struct wblob *bl, const int *parts, size_t nparts)
{
	json_t *content = json_array();
	size_t size = 0;
	for (size_t i = 0; i < nparts; i++) {
		char hex[65];
		rix_id_to_hex(hex, &bl[parts[i]].id);
		json_array_append_new(content, json_string(hex));
		size += bl[parts[i]].n;
	}
	const char *t = "2026-01-02T03:04:05.123456789Z";
	return json_pack("{s:s, s:s, s:i, s:s, s:s, s:s, s:i, s:i, s:I, s:i, s:o}", "name", name, "type", "file",
			 "mode", 0644, "mtime", t, "atime", t, "ctime", t, "uid", (int)getuid(), "gid", (int)getgid(),
			 "size", (json_int_t)size, "links", 1, "content", content);
}

/* Frees json_dumps's text with jansson's free: librix gives jansson its own allocator. */
static void jansson_free(void *p)
{
	json_free_t free_fn;
	json_get_alloc_funcs(NULL, &free_fn);
	free_fn(p);
}

static void tree_blob(struct wblob *b, json_t *nodes)
{
	json_t *tree = json_pack("{s:o}", "nodes", nodes);
	char *s = json_dumps(tree, JSON_COMPACT | JSON_PRESERVE_ORDER);
	assert_non_null(s);
	b->n = strlen(s) + 1;
	b->p = malloc(b->n + 1);
	memcpy(b->p, s, b->n - 1);
	b->p[b->n - 1] = '\n';
	jansson_free(s);
	json_decref(tree);
	b->t = RIX_BLOB_TREE;
	rix_sha256(&b->id, b->p, b->n);
}

/* The restored file path must hold exactly the concatenation of parts. */
static void restored_equals(const char *path, const struct wblob *bl, const int *parts, size_t nparts)
{
	size_t n;
	uint8_t *got = rix_test_must_read(path, &n);
	size_t off = 0;
	for (size_t i = 0; i < nparts; i++) {
		const struct wblob *b = &bl[parts[i]];
		assert_true(off + b->n <= n);
		if (b->n > 0)
			assert_memory_equal(got + off, b->p, b->n);
		off += b->n;
	}
	assert_int_equal(off, n);
	free(got);
}

static void check_rix_writes(int v, rix_compression mode, const char *mode_name)
{
	setup_once();
	char repo[700], name[64];
	snprintf(name, sizeof(name), "rix-v%d-%s", v, mode_name);
	copy_template(v, name, repo, sizeof(repo));
	rix_key *key = open_key_dir(repo, PASSWORD);

	/* The blobs. */
	struct wblob bl[NBLOBS];
	memset(bl, 0, sizeof(bl));
	uint64_t st = 0x5eed + (uint64_t)v * 16 + (uint64_t)mode;
	struct buf zh = read_path("%s%s", "/usr/include/", "zstd.h");
	assert_true(zh.n > (100u << 10));
	bl[B_ZERO] = (struct wblob){ "zero", RIX_BLOB_DATA, malloc(1), 0, { { 0 } } };
	bl[B_ONE] = (struct wblob){ "one", RIX_BLOB_DATA, malloc(1), 1, { { 0 } } };
	bl[B_ONE].p[0] = 'x';
	bl[B_TEXT] = (struct wblob){ "text", RIX_BLOB_DATA, malloc(100u << 10), 100u << 10, { { 0 } } };
	memcpy(bl[B_TEXT].p, zh.p, bl[B_TEXT].n);
	bl[B_RANDOM] = (struct wblob){ "random", RIX_BLOB_DATA, malloc(3u << 19), 3u << 19, { { 0 } } };
	rix_test_fill_random(bl[B_RANDOM].p, bl[B_RANDOM].n, &st);
	/* 5 MiB of text with a counter every 4 KiB: compressible, quick even at zstd level 19. */
	bl[B_BIG] = (struct wblob){ "big", RIX_BLOB_DATA, malloc(5u << 20), 5u << 20, { { 0 } } };
	for (size_t off = 0, i = 0; off < bl[B_BIG].n; off += 4096, i++) {
		memcpy(bl[B_BIG].p + off, zh.p + (i * 4096 * 7) % (zh.n - 4096), 4096);
		char num[24];
		int k = snprintf(num, sizeof(num), "/* %zu */", i);
		memcpy(bl[B_BIG].p + off, num, (size_t)k);
	}
	free(zh.p);
	for (int i = B_ZERO; i <= B_BIG; i++)
		rix_sha256(&bl[i].id, bl[i].p, bl[i].n);
	/* Files: all (several blobs), big, empty (no blob), one, random, zero (the 0-byte blob),
	 * and a directory sub/ holding text. */
	static const int all_parts[] = { B_TEXT, B_ONE, B_ZERO, B_RANDOM };
	static const int p_big[] = { B_BIG }, p_one[] = { B_ONE }, p_random[] = { B_RANDOM }, p_zero[] = { B_ZERO },
			 p_text[] = { B_TEXT };
	json_t *sub_nodes = json_array();
	json_array_append_new(sub_nodes, file_node("text", bl, p_text, 1));
	tree_blob(&bl[B_SUBTREE], sub_nodes);
	bl[B_SUBTREE].name = "sub tree";
	json_t *nodes = json_array();
	json_array_append_new(nodes, file_node("all", bl, all_parts, 4));
	json_array_append_new(nodes, file_node("big", bl, p_big, 1));
	json_array_append_new(nodes, file_node("empty", bl, NULL, 0));
	json_array_append_new(nodes, file_node("one", bl, p_one, 1));
	json_array_append_new(nodes, file_node("random", bl, p_random, 1));
	char subtree_hex[65];
	rix_id_to_hex(subtree_hex, &bl[B_SUBTREE].id);
	const char *t = "2026-01-02T03:04:05Z";
	json_array_append_new(nodes, json_pack("{s:s, s:s, s:I, s:s, s:s, s:s, s:i, s:i, s:n, s:s}", "name", "sub",
					       "type", "dir", "mode", (json_int_t)(0x80000000u | 0755), "mtime", t, "atime", t,
					       "ctime", t, "uid", (int)getuid(), "gid", (int)getgid(), "content",
					       "subtree", subtree_hex));
	json_array_append_new(nodes, file_node("zero", bl, p_zero, 1));
	tree_blob(&bl[B_ROOT], nodes);
	bl[B_ROOT].name = "root tree";

	/* Into packs. */
	rix_index *idx;
	assert_int_equal(rix_index_new(&idx), 0);
	struct done_ctx done = { repo, idx, 0 };
	rix_blob_codec *codec;
	rix_packer *packer;
	assert_int_equal(rix_blob_codec_new(&codec, key, v, mode), 0);
	assert_int_equal(rix_packer_new(&packer, key, v, g_work, 4u << 20, on_pack_done, &done), 0);
	for (int i = 0; i < NBLOBS; i++)
		if (rix_packer_add(NULL, packer, codec, bl[i].t, &bl[i].id, bl[i].p, bl[i].n) != 0)
			fail_msg("adding %s: %s", bl[i].name, rix_error_last());
	assert_int_equal(done.packs, 1); /* the big blob's, at once */
	assert_int_equal(rix_packer_flush(packer), 0);
	assert_int_equal(done.packs, 3); /* + small data, + trees */
	assert_int_equal(rix_packer_open_count(packer), 0);
	rix_packer_free(packer);
	rix_blob_codec_free(codec);

	/* What rix stored: the big blob alone in its pack; compression by version and mode. */
	rix_packed_blob loc[NBLOBS];
	for (int i = 0; i < NBLOBS; i++) {
		assert_int_equal(rix_index_lookup(&loc[i], idx, bl[i].t, &bl[i].id), 0);
		int z = loc[i].uncompressed_length != 0;
		int want_z;
		if (v == 1)
			want_z = 0;
		else if (bl[i].t == RIX_BLOB_TREE)
			want_z = 1;
		else if (mode == RIX_COMPRESSION_OFF)
			want_z = 0;
		else /* compressed when smaller: text yes; random, 0 and 1 bytes no */
			want_z = i == B_TEXT || i == B_BIG;
		if (z != want_z)
			fail_msg("%s: compressed %d, want %d", bl[i].name, z, want_z);
		if (i == B_ZERO)
			assert_int_equal(loc[i].length, RIX_CRYPTO_OVERHEAD); /* (b): 32 bytes */
	}
	for (int i = 0; i < NBLOBS; i++) {
		int same_pack = memcmp(loc[i].pack_id.b, loc[B_BIG].pack_id.b, RIX_ID_SIZE) == 0;
		assert_int_equal(same_pack, i == B_BIG);
		same_pack = memcmp(loc[i].pack_id.b, loc[B_ROOT].pack_id.b, RIX_ID_SIZE) == 0;
		assert_int_equal(same_pack, bl[i].t == RIX_BLOB_TREE);
	}
	/* Every pack file is named by its SHA-256, and its header says what the index says. */
	for (int i = 0; i < NBLOBS; i++) {
		char hex[65];
		rix_id_to_hex(hex, &loc[i].pack_id);
		char sub[3] = { hex[0], hex[1], 0 };
		char dir[1024];
		snprintf(dir, sizeof(dir), "%s/data/%s", repo, sub);
		struct buf pack = read_path("%s/%s", dir, hex);
		rix_id pid;
		rix_sha256(&pid, pack.p, pack.n);
		assert_memory_equal(pid.b, loc[i].pack_id.b, RIX_ID_SIZE);
		rix_blob *blobs;
		size_t cnt, hit = 0;
		assert_int_equal(rix_pack_read_header(&blobs, &cnt, key, pack.p, pack.n, v), 0);
		for (size_t k = 0; k < cnt; k++)
			if (memcmp(blobs[k].id.b, bl[i].id.b, RIX_ID_SIZE) == 0) {
				assert_int_equal(blobs[k].offset, loc[i].offset);
				assert_int_equal(blobs[k].length, loc[i].length);
				assert_int_equal(blobs[k].uncompressed_length, loc[i].uncompressed_length);
				hit++;
			}
		assert_int_equal(hit, 1);
		rix_free(blobs);
		free(pack.p);
	}

	/*
	 * restic compares compression too: an index claiming one byte more uncompressed for the text
	 * blob than its pack header says fails `restic check --read-data` (so the clean checks below
	 * mean that restic's reading of rix's index and pack headers agrees, lengths included).
	 */
	char hex[65], *ijson;
	size_t ijn;
	if (v == 2) {
		rix_index *spoiled;
		assert_int_equal(rix_index_new(&spoiled), 0);
		struct spoil_ctx sc = { spoiled, &bl[B_TEXT].id };
		assert_int_equal(rix_index_foreach_pack(idx, copy_pack_spoiled, &sc), 0);
		assert_int_equal(rix_index_encode(&ijson, &ijn, spoiled), 0);
		write_unpacked(repo, "index", key, v, ijson, ijn, hex);
		rix_free(ijson);
		rix_index_free(spoiled);
		char *out;
		size_t len;
		int rc = restic(v, repo, &out, &len, "check --read-data 2>&1");
		if (rc == 0 || strstr(out, "is not contained in index or position is incorrect") == NULL)
			fail_msg("restic check, spoiled uncompressed length: exit %d:\n%s", rc, out);
		free(out);
		char path[1024];
		snprintf(path, sizeof(path), "%s/index/%s", repo, hex);
		assert_int_equal(unlink(path), 0);
	}

	/* The index file. */
	rix_index_finalize(idx);
	assert_int_equal(rix_index_encode(&ijson, &ijn, idx), 0);
	write_unpacked(repo, "index", key, v, ijson, ijn, hex);

	/* (c): packs and index, nothing referencing the blobs yet: restic 0.14 finds no error. */
	restic_check_clean(v, repo, "unreferenced blobs");

	/* restic reads back the index JSON byte for byte (so the compression rix recorded). */
	restic_cat_index_equals(v, repo, hex, ijson, ijn);
	rix_free(ijson);

	/* The snapshot. */
	char root_hex[65], snap_hex[65];
	rix_id_to_hex(root_hex, &bl[B_ROOT].id);
	json_t *snap = json_pack("{s:s, s:s, s:[s], s:s, s:s}", "time", "2026-01-02T03:04:05.5Z", "tree", root_hex,
				 "paths", "/rix-interop", "hostname", "rix-interop", "username", "rix");
	char *sjson = json_dumps(snap, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(snap);
	write_unpacked(repo, "snapshots", key, v, sjson, strlen(sjson), snap_hex);
	jansson_free(sjson);

	/* restic agrees: blob set, every blob's plaintext, a full check, a restore. */
	struct lines want = { 0 };
	for (int i = 0; i < NBLOBS; i++)
		lines_add(&want, bl[i].t, &bl[i].id);
	restic_list_blobs_equals(v, repo, &want);
	free(want.s);
	for (int i = 0; i < NBLOBS; i++)
		restic_cat_blob_equals(v, repo, &bl[i].id, bl[i].p, bl[i].n);
	restic_check_clean(v, repo, "with the snapshot");
	char target[800];
	snprintf(target, sizeof(target), "%s-restored", repo);
	if (restic(v, repo, NULL, NULL, "restore %s --target '%s'", snap_hex, target) != 0)
		fail_msg("restic restore failed");
	char path[1024];
	snprintf(path, sizeof(path), "%s/all", target);
	restored_equals(path, bl, all_parts, 4);
	snprintf(path, sizeof(path), "%s/big", target);
	restored_equals(path, bl, p_big, 1);
	snprintf(path, sizeof(path), "%s/empty", target);
	restored_equals(path, bl, NULL, 0);
	snprintf(path, sizeof(path), "%s/one", target);
	restored_equals(path, bl, p_one, 1);
	snprintf(path, sizeof(path), "%s/random", target);
	restored_equals(path, bl, p_random, 1);
	snprintf(path, sizeof(path), "%s/zero", target);
	restored_equals(path, bl, p_zero, 1);
	snprintf(path, sizeof(path), "%s/sub/text", target);
	restored_equals(path, bl, p_text, 1);
	rix_test_rmtree(target);

	for (int i = 0; i < NBLOBS; i++)
		free(bl[i].p);
	rix_index_free(idx);
	rix_key_free(key);
	rix_test_rmtree(repo);
}

static void test_rix_writes_v1(void **state)
{
	(void)state;
	check_rix_writes(1, RIX_COMPRESSION_AUTO, "v1");
}

static void test_rix_writes_v2_auto(void **state)
{
	(void)state;
	check_rix_writes(2, RIX_COMPRESSION_AUTO, "auto");
}

static void test_rix_writes_v2_max(void **state)
{
	(void)state;
	check_rix_writes(2, RIX_COMPRESSION_MAX, "max");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_restic_writes_v1),
		cmocka_unit_test(test_restic_writes_v2_auto),
		cmocka_unit_test(test_restic_writes_v2_max),
		cmocka_unit_test(test_restic_writes_v2_off),
		cmocka_unit_test(test_rix_writes_v1),
		cmocka_unit_test(test_rix_writes_v2_auto),
		cmocka_unit_test(test_rix_writes_v2_max),
	};
	return cmocka_run_group_tests(tests, NULL, teardown_group);
}
