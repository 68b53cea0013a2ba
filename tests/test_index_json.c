/*
 * tests/test_index_json.c — the index JSON codec (index/index_json.c).
 *
 * Fixtures in tests/data (RIX_TEST_DATA): restic_index_v{1,2}_*.json were written by restic
 * 0.14 (`restic cat index`, the trailing newline of `cat` removed); legacy_index.json is the
 * packs of restic_index_v1_backup.json as a bare, indented array.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "rix/rix.h"
#include "testutil.h"
#include "fuzz/fuzz_checks.h"

#define H1 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define H2 "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"
#define HU "0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF"

/* ---- helpers ------------------------------------------------------------------------------ */

/*
 * Decodes exactly len bytes from a private heap copy, so ASan sees any overread. Every text a
 * test decodes also goes through the streaming decoder, cut in several ways (byte by byte up to
 * 64 bytes), which must agree with the whole-text decoder (fuzz_checks.h; test_stream_fixtures
 * cuts the fixtures at every byte).
 */
static int decode_exact(const char *text, size_t len, rix_index **out, bool *legacy)
{
	char *copy = malloc(len ? len : 1);
	assert_non_null(copy);
	memcpy(copy, text, len);
	const char *why = rix_fuzz_check_stream_max((const uint8_t *)copy, len, 64);
	if (why != NULL)
		fail_msg("%s, for: %.*s", why, (int)(len < 300 ? len : 300), text);
	int rc = rix_index_decode(out, legacy, copy, len);
	free(copy);
	return rc;
}

static rix_index *decode_ok(const char *text)
{
	rix_index *idx = NULL;
	bool legacy = true;
	int rc = decode_exact(text, strlen(text), &idx, &legacy);
	if (rc != 0)
		fail_msg("decode of %s failed: %s", text, rix_error_last());
	assert_non_null(idx);
	assert_true(rix_index_is_final(idx));
	return idx;
}

static void expect_corrupt_n(const char *text, size_t len)
{
	rix_index *idx = (rix_index *)&idx;
	rix_error_clear();
	int rc = decode_exact(text, len, &idx, NULL);
	if (rc != RIX_ECORRUPT)
		fail_msg("expected RIX_ECORRUPT, got %d for: %.*s", rc, (int)len, text);
	assert_null(idx);
	assert_true(strlen(rix_error_last()) > 0);
	assert_non_null(strstr(rix_error_last(), "index JSON: "));
	assert_non_null(strstr(rix_error_last(), " at byte "));
}

static void expect_corrupt(const char *text)
{
	expect_corrupt_n(text, strlen(text));
}

static char *encode(const rix_index *idx, size_t *len)
{
	char *out = NULL;
	size_t n = 0;
	int rc = rix_index_encode(&out, &n, idx);
	if (rc != 0)
		fail_msg("encode failed: %s", rix_error_last());
	assert_non_null(out);
	assert_int_equal(strlen(out), n);
	if (len != NULL)
		*len = n;
	return out;
}

static void get_blob(const rix_index *idx, rix_blob_type t, const char *hex, rix_packed_blob *pb)
{
	rix_id id;
	assert_int_equal(rix_id_from_hex(&id, hex, 64), 0);
	assert_int_equal(rix_index_lookup(pb, idx, t, &id), 0);
}

/* ---- fixtures ----------------------------------------------------------------------------- */

static void roundtrip_fixture(const char *name, bool want_supersedes)
{
	size_t len, n;
	char *text = rix_test_data_file(name, &len);
	rix_index *idx = NULL;
	bool legacy = true;

	assert_int_equal(decode_exact(text, len, &idx, &legacy), 0);
	assert_false(legacy);
	assert_true(rix_index_pack_count(idx) > 0);
	assert_true(rix_index_count(idx, RIX_BLOB_DATA) > 0);
	assert_true(rix_index_count(idx, RIX_BLOB_TREE) > 0);
	rix_index_supersedes(&n, idx);
	assert_int_equal(n > 0, want_supersedes);

	/* Every "type" in the text is one blob. */
	size_t blobs = 0;
	for (const char *p = text; (p = strstr(p, "\"type\":")) != NULL; p++)
		blobs++;
	assert_int_equal(rix_index_count(idx, RIX_BLOB_DATA) + rix_index_count(idx, RIX_BLOB_TREE),
			 blobs);

	/* restic's bytes, exactly. */
	char *out = encode(idx, &n);
	assert_int_equal(n, len);
	assert_memory_equal(out, text, len);
	rix_free(out);
	rix_index_free(idx);
	free(text);
}

static void test_fixture_v2_backup(void **state)
{
	(void)state;
	roundtrip_fixture("restic_index_v2_backup.json", false);
}

static void test_fixture_v2_supersedes(void **state)
{
	(void)state;
	roundtrip_fixture("restic_index_v2_supersedes.json", true);
}

static void test_fixture_v1_backup(void **state)
{
	(void)state;
	roundtrip_fixture("restic_index_v1_backup.json", false);
}

static void test_fixture_v1_supersedes(void **state)
{
	(void)state;
	roundtrip_fixture("restic_index_v1_supersedes.json", true);
}

/* Values read from the v2 fixture, checked against the text. */
static void test_fixture_values(void **state)
{
	(void)state;
	size_t len;
	char *text = rix_test_data_file("restic_index_v2_backup.json", &len);
	rix_index *idx = NULL;
	assert_int_equal(decode_exact(text, len, &idx, NULL), 0);

	/* Walk the text with sscanf: every blob must be found with its exact location. */
	const char *p = text;
	char pack[65] = "";
	size_t checked = 0;
	while ((p = strstr(p, "{\"id\":\"")) != NULL) {
		char hex[65];
		memcpy(hex, p + 7, 64);
		hex[64] = '\0';
		const char *q = p + 7 + 64;
		if (strncmp(q, "\",\"blobs\"", 9) == 0) {
			memcpy(pack, hex, 65);
			p = q;
			continue;
		}
		char type[5];
		unsigned off, length, ulen = 0;
		int got = sscanf(q, "\",\"type\":\"%4[a-z]\",\"offset\":%u,\"length\":%u,"
				 "\"uncompressed_length\":%u", type, &off, &length, &ulen);
		assert_true(got >= 3);
		rix_packed_blob pb;
		get_blob(idx, strcmp(type, "tree") == 0 ? RIX_BLOB_TREE : RIX_BLOB_DATA, hex, &pb);
		char ph[65];
		rix_id_to_hex(ph, &pb.pack_id);
		assert_string_equal(ph, pack);
		assert_int_equal(pb.offset, off);
		assert_int_equal(pb.length, length);
		assert_int_equal(pb.uncompressed_length, got == 4 ? ulen : 0);
		checked++;
		p = q;
	}
	assert_true(checked >= 5);
	rix_index_free(idx);
	free(text);
}

static void test_fixture_legacy(void **state)
{
	(void)state;
	size_t len, ref_len, n;
	char *text = rix_test_data_file("legacy_index.json", &len);
	char *ref = rix_test_data_file("restic_index_v1_backup.json", &ref_len);
	rix_index *idx = NULL;
	bool legacy = false;

	assert_int_equal(decode_exact(text, len, &idx, &legacy), 0);
	assert_true(legacy);
	/* Same content as the object form it was made from: same encoding. */
	char *out = encode(idx, &n);
	assert_int_equal(n, ref_len);
	assert_memory_equal(out, ref, n);
	rix_free(out);
	rix_index_free(idx);
	free(text);
	free(ref);
}

/* Every proper prefix that cuts into the top value is an error, never a crash. */
static void truncate_fixture(const char *name)
{
	size_t len;
	char *text = rix_test_data_file(name, &len);
	const char *last = strrchr(text, text[0] == '[' ? ']' : '}');
	size_t complete = (size_t)(last - text) + 1;

	for (size_t l = 0; l < len; l++) {
		if (l >= complete) {
			rix_index *idx = NULL;
			assert_int_equal(decode_exact(text, l, &idx, NULL), 0);
			rix_index_free(idx);
		} else {
			expect_corrupt_n(text, l);
		}
	}
	free(text);
}

static void test_truncation(void **state)
{
	(void)state;
	truncate_fixture("restic_index_v2_backup.json");
	truncate_fixture("restic_index_v2_supersedes.json");
	truncate_fixture("restic_index_v1_backup.json");
	truncate_fixture("legacy_index.json");
}

/* Flipping each byte of a fixture to a few bad values: an error or a valid index, no crash. */
static void test_byte_flips(void **state)
{
	(void)state;
	size_t len;
	char *text = rix_test_data_file("restic_index_v2_backup.json", &len);
	static const char subst[] = { '"', '\\', '{', ']', '0', 'x', ' ', '\0', '-', 'e' };
	for (size_t i = 0; i < len; i++) {
		char saved = text[i];
		for (size_t s = 0; s < sizeof(subst); s++) {
			text[i] = subst[s];
			rix_index *idx = NULL;
			int rc = decode_exact(text, len, &idx, NULL);
			assert_true(rc == 0 || rc == RIX_ECORRUPT);
			assert_true((rc == 0) == (idx != NULL));
			rix_index_free(idx);
		}
		text[i] = saved;
	}
	free(text);
}

/* ---- random round trips ------------------------------------------------------------------- */

struct check_arg {
	const rix_index *other;
	size_t n;
};

/* Every blob of one index has a location in the other with the same pack ID and numbers. */
static int check_blob_fn(void *arg, const rix_packed_blob *pb)
{
	struct check_arg *a = arg;
	rix_packed_blob locs[16];
	size_t n = rix_index_lookup_all(locs, 16, a->other, pb->type, &pb->id);
	assert_true(n > 0 && n <= 16);
	for (size_t i = 0; i < n; i++) {
		if (memcmp(&locs[i].pack_id, &pb->pack_id, sizeof(rix_id)) == 0 &&
		    locs[i].offset == pb->offset && locs[i].length == pb->length &&
		    locs[i].uncompressed_length == pb->uncompressed_length) {
			a->n++;
			return 0;
		}
	}
	fail_msg("blob location lost in the round trip");
	return 1;
}

static void assert_same_index(const rix_index *a, const rix_index *b)
{
	assert_int_equal(rix_index_pack_count(a), rix_index_pack_count(b));
	for (uint32_t i = 0; i < rix_index_pack_count(a); i++)
		assert_memory_equal(rix_index_pack_id(a, i), rix_index_pack_id(b, i), sizeof(rix_id));
	for (int t = 0; t < RIX_BLOB_TYPES; t++)
		assert_int_equal(rix_index_count(a, t), rix_index_count(b, t));
	size_t na, nb;
	const rix_id *sa = rix_index_supersedes(&na, a), *sb = rix_index_supersedes(&nb, b);
	assert_int_equal(na, nb);
	if (na > 0)
		assert_memory_equal(sa, sb, na * sizeof(rix_id));
	struct check_arg arg = { b, 0 };
	assert_int_equal(rix_index_foreach(a, check_blob_fn, &arg), 0);
	assert_int_equal(arg.n, rix_index_count(a, RIX_BLOB_DATA) + rix_index_count(a, RIX_BLOB_TREE));
}

static uint32_t random_u32(uint64_t *st)
{
	uint64_t r = rix_test_next(st);
	switch (r & 3) {
	case 0: return 0;
	case 1: return UINT32_MAX - (uint32_t)(r >> 60);
	default: return (uint32_t)(r >> 32) >> (r >> 8 & 31);
	}
}

static rix_index *random_index(uint64_t *st, size_t npacks, size_t nsup)
{
	rix_index *idx = NULL;
	rix_blob blobs[40];
	rix_id prev_blob;
	assert_int_equal(rix_index_new(&idx), 0);
	rix_test_random_id(&prev_blob, st);
	for (size_t p = 0; p < npacks; p++) {
		rix_id pack;
		rix_test_random_id(&pack, st);
		size_t n = rix_test_next(st) % 40; /* includes packs without blobs */
		rix_blob_type type = rix_test_next(st) % 3 == 0 ? RIX_BLOB_TREE : RIX_BLOB_DATA;
		for (size_t i = 0; i < n; i++) {
			rix_blob *b = &blobs[i];
			if (rix_test_next(st) % 10 == 0)
				b->id = prev_blob; /* duplicates across packs */
			else
				rix_test_random_id(&b->id, st);
			prev_blob = b->id;
			b->type = type;
			b->offset = random_u32(st);
			b->length = random_u32(st);
			b->uncompressed_length = rix_test_next(st) % 2 ? random_u32(st) : 0;
		}
		assert_int_equal(rix_index_store_pack(idx, &pack, blobs, n), 0);
	}
	for (size_t i = 0; i < nsup; i++) {
		rix_id id;
		rix_test_random_id(&id, st);
		assert_int_equal(rix_index_add_supersedes(idx, &id), 0);
	}
	return idx;
}

static void test_random_roundtrip(void **state)
{
	(void)state;
	uint64_t st = 42;
	static const size_t sizes[] = { 0, 1, 2, 7, 100, 3000 };
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		for (size_t nsup = 0; nsup < 3; nsup++) {
			rix_index *a = random_index(&st, sizes[s], nsup);
			size_t n1, n2;
			char *e1 = encode(a, &n1);
			assert_true(n1 > 0 && e1[n1 - 1] == '\n');
			assert_int_equal(strncmp(e1, nsup ? "{\"supersedes\":[" : "{\"packs\":[", nsup ? 15 : 10), 0);
			rix_index *b = NULL;
			bool legacy = true;
			assert_int_equal(decode_exact(e1, n1, &b, &legacy), 0);
			assert_false(legacy);
			assert_same_index(a, b);
			assert_same_index(b, a);
			char *e2 = encode(b, &n2);
			assert_int_equal(n1, n2);
			assert_memory_equal(e1, e2, n1);
			rix_free(e1);
			rix_free(e2);
			rix_index_free(a);
			rix_index_free(b);
		}
	}
}

/*
 * The decoder adds the blobs of a type in groups of 64: texts of 63, 64, 65, 128 and 129 data
 * blobs (one pack) beside 3 tree blobs, with copies of one ID on each side of a group's end,
 * decode to every blob, the copies newest first (the order of the text).
 */
static void test_group_edges(void **state)
{
	(void)state;
	static const size_t counts[] = { 63, 64, 65, 128, 129 };
	uint64_t st = 64;
	for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
		size_t n = counts[c] + 3;
		rix_blob *b = calloc(n, sizeof(*b));
		assert_non_null(b);
		for (size_t i = 0; i < n; i++) {
			rix_test_random_id(&b[i].id, &st);
			b[i].type = i < counts[c] ? RIX_BLOB_DATA : RIX_BLOB_TREE;
			b[i].offset = (uint32_t)i;
			b[i].length = (uint32_t)(100 + i);
		}
		/* Data blobs 61 and 62 copies of 60, whose group ends at 63 (when there are more), and
		 * the last data blob a copy of 60 too; the last tree blob a copy of the first. */
		b[61].id = b[62].id = b[counts[c] - 1].id = b[60].id;
		b[n - 1].id = b[counts[c]].id;
		rix_index *a = NULL;
		rix_id pack;
		rix_test_random_id(&pack, &st);
		assert_int_equal(rix_index_new(&a), 0);
		assert_int_equal(rix_index_store_pack(a, &pack, b, n), 0);
		size_t len;
		char *text = encode(a, &len);
		rix_index *d = NULL;
		assert_int_equal(decode_exact(text, len, &d, NULL), 0);
		assert_int_equal(rix_index_count(d, RIX_BLOB_DATA), counts[c]);
		assert_int_equal(rix_index_count(d, RIX_BLOB_TREE), 3);
		assert_same_index(a, d);
		assert_same_index(d, a);
		rix_packed_blob all[8];
		size_t k = rix_index_lookup_all(all, 8, d, RIX_BLOB_DATA, &b[60].id);
		uint32_t want[4] = { (uint32_t)counts[c] - 1, 62, 61, 60 }; /* newest first */
		assert_int_equal(k, counts[c] - 1 == 62 ? 3 : 4);
		for (size_t i = 0, j = counts[c] - 1 == 62 ? 1 : 0; i < k; i++, j++)
			assert_int_equal(all[i].offset, want[j]);
		k = rix_index_lookup_all(all, 8, d, RIX_BLOB_TREE, &b[n - 1].id);
		assert_int_equal(k, 2);
		assert_int_equal(all[0].offset, n - 1);
		assert_int_equal(all[1].offset, counts[c]);
		rix_free(text);
		rix_index_free(d);
		rix_index_free(a);
		free(b);
	}
}

static void test_encode_empty(void **state)
{
	(void)state;
	rix_index *idx = NULL;
	assert_int_equal(rix_index_new(&idx), 0);
	char *out = encode(idx, NULL);
	assert_string_equal(out, "{\"packs\":[]}\n");
	rix_free(out);
	rix_index_free(idx);
}

/* ---- accepted variations ------------------------------------------------------------------ */

static void test_null_and_missing_lists(void **state)
{
	(void)state;
	static const char *const texts[] = {
		"{}",
		"{\"packs\":null}",
		"{\"supersedes\":null}",
		"{\"packs\":null,\"supersedes\":null}",
		"{\"packs\":[],\"supersedes\":[]}",
		" \t\r\n{ } \n",
		"[]",
		"[ ]\n",
	};
	for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		rix_index *idx = decode_ok(texts[i]);
		size_t n;
		rix_index_supersedes(&n, idx);
		assert_int_equal(n, 0);
		assert_int_equal(rix_index_pack_count(idx), 0);
		rix_index_free(idx);
	}
	/* A pack with null, empty or missing blobs is still in the pack table. */
	static const char *const packs[] = {
		"{\"packs\":[{\"id\":\"" H1 "\",\"blobs\":null}]}",
		"{\"packs\":[{\"id\":\"" H1 "\",\"blobs\":[]}]}",
		"{\"packs\":[{\"id\":\"" H1 "\"}]}",
	};
	for (size_t i = 0; i < sizeof(packs) / sizeof(packs[0]); i++) {
		rix_index *idx = decode_ok(packs[i]);
		assert_int_equal(rix_index_pack_count(idx), 1);
		char *out = encode(idx, NULL);
		assert_string_equal(out, "{\"packs\":[{\"id\":\"" H1 "\",\"blobs\":[]}]}\n");
		rix_free(out);
		rix_index_free(idx);
	}
}

static void test_legacy_flag(void **state)
{
	(void)state;
	rix_index *idx = NULL;
	bool legacy = false;
	const char *t = "[{\"id\":\"" H1 "\",\"blobs\":[{\"id\":\"" H2 "\",\"type\":\"tree\","
			"\"offset\":0,\"length\":10}]}]";
	assert_int_equal(decode_exact(t, strlen(t), &idx, &legacy), 0);
	assert_true(legacy);
	rix_packed_blob pb;
	get_blob(idx, RIX_BLOB_TREE, H2, &pb);
	assert_int_equal(pb.length, 10);
	rix_index_free(idx);
	/* legacy may be NULL. */
	assert_int_equal(decode_exact(t, strlen(t), &idx, NULL), 0);
	rix_index_free(idx);
}

static void test_unknown_fields_skipped(void **state)
{
	(void)state;
	const char *t =
		"{\"version\":2,\"x\":[1,-2.5e+3,0,-0,1E-7,true,false,null,\"a\\u00e9\\n\\\"\\\\\\/\\b\\f\\r\\t\","
		"{\"y\":{},\"z\":[[],[{}]]}],"
		"\"packs\":[{\"meta\":{\"id\":\"not an id\",\"blobs\":5},\"id\":\"" H1 "\","
		"\"blobs\":[{\"comment\":\"\\ud83d\\ude00\",\"id\":\"" H2 "\",\"type\":\"data\","
		"\"offset\":5,\"length\":6,\"size\":[1,{\"a\":null}],\"uncompressed_length\":7}],"
		"\"packs\":\"ignored here\"}],"
		"\"P\\u0061ck\":{\"packs\":null},\"Packs_\":[1],\"supersedes\":[\"" H2 "\"],\"tail\":{}}";
	rix_index *idx = decode_ok(t);
	rix_packed_blob pb;
	get_blob(idx, RIX_BLOB_DATA, H2, &pb);
	assert_int_equal(pb.offset, 5);
	assert_int_equal(pb.length, 6);
	assert_int_equal(pb.uncompressed_length, 7);
	size_t n;
	rix_index_supersedes(&n, idx);
	assert_int_equal(n, 1);
	assert_int_equal(rix_index_count(idx, RIX_BLOB_DATA), 1);
	assert_int_equal(rix_index_pack_count(idx), 1);
	/* Unknown keys may repeat. */
	rix_index_free(idx);
	idx = decode_ok("{\"a\":1,\"a\":2,\"packs\":[{\"q\":1,\"q\":[],\"id\":\"" H1 "\"}]}");
	rix_index_free(idx);
}

static void test_key_order_and_whitespace(void **state)
{
	(void)state;
	/* blobs before id, keys shuffled, upper-case hex, whitespace everywhere. */
	const char *t =
		" {\n\t\"packs\" :\r[ {\"blobs\" : [ {\"length\": 9 , \"uncompressed_length\" :0,"
		" \"offset\" :\n4294967295 ,\"type\": \"tree\" ,\"id\" :\"" HU "\" } ] ,"
		"\"id\" : \"" H2 "\" } ] ,\"supersedes\":[ \"" HU "\" ] }\n\n";
	rix_index *idx = decode_ok(t);
	rix_packed_blob pb;
	get_blob(idx, RIX_BLOB_TREE, H1, &pb);
	assert_int_equal(pb.offset, UINT32_MAX);
	assert_int_equal(pb.length, 9);
	assert_int_equal(pb.uncompressed_length, 0);
	char hex[65];
	rix_id_to_hex(hex, &pb.pack_id);
	assert_string_equal(hex, H2);
	char *out = encode(idx, NULL);
	assert_string_equal(out, "{\"supersedes\":[\"" H1 "\"],\"packs\":[{\"id\":\"" H2 "\","
				 "\"blobs\":[{\"id\":\"" H1 "\",\"type\":\"tree\",\"offset\":4294967295,"
				 "\"length\":9}]}]}\n");
	rix_free(out);
	rix_index_free(idx);
}

/* Missing offset/length read as 0 (Go's zero values); the same pack twice is one pack. */
static void test_defaults_and_repeated_pack(void **state)
{
	(void)state;
	rix_index *idx = decode_ok("{\"packs\":[{\"id\":\"" H1 "\",\"blobs\":[{\"id\":\"" H2 "\","
				   "\"type\":\"data\"}]},{\"id\":\"" H1 "\",\"blobs\":[{\"id\":\"" H1
				   "\",\"type\":\"data\",\"offset\":3,\"length\":4}]}]}");
	assert_int_equal(rix_index_pack_count(idx), 1);
	assert_int_equal(rix_index_count(idx, RIX_BLOB_DATA), 2);
	rix_packed_blob pb;
	get_blob(idx, RIX_BLOB_DATA, H2, &pb);
	assert_int_equal(pb.offset, 0);
	assert_int_equal(pb.length, 0);
	rix_index_free(idx);
}

static void test_depth_limit(void **state)
{
	(void)state;
	/* The top object is level 1; an unknown value may nest up to level 64 in total. */
	char buf[1024];
	for (int k = 60; k <= 66; k++) {
		size_t n = (size_t)sprintf(buf, "{\"x\":");
		for (int i = 0; i < k; i++) {
			if (i % 2)
				buf[n++] = '[';
			else
				n += (size_t)sprintf(buf + n, "{\"k\":");
		}
		buf[n++] = '0';
		for (int i = k - 1; i >= 0; i--)
			buf[n++] = i % 2 ? ']' : '}';
		buf[n++] = '}';
		buf[n] = '\0';
		if (1 + k <= 64) {
			rix_index *idx = decode_ok(buf);
			rix_index_free(idx);
		} else {
			expect_corrupt(buf);
			assert_non_null(strstr(rix_error_last(), "nesting"));
		}
	}
	/* Inside a blob the schema already uses five levels. */
	const char *pre = "{\"packs\":[{\"id\":\"" H1 "\",\"blobs\":[{\"id\":\"" H2 "\",\"type\":\"data\",\"x\":";
	for (int k = 58; k <= 60; k++) {
		size_t n = (size_t)sprintf(buf, "%s", pre);
		for (int i = 0; i < k; i++)
			buf[n++] = '[';
		for (int i = 0; i < k; i++)
			buf[n++] = ']';
		n += (size_t)sprintf(buf + n, "}]}]}");
		if (5 + k <= 64) {
			rix_index *idx = decode_ok(buf);
			rix_index_free(idx);
		} else {
			expect_corrupt(buf);
		}
	}
	/* Hostile nesting: rejected at the limit, not by the C stack. */
	static char deep[1000008];
	size_t big = 1000000;
	memcpy(deep, "{\"x\":", 5);
	memset(deep + 5, '[', big);
	expect_corrupt_n(deep, big + 5);
	memset(deep, '[', big);
	expect_corrupt_n(deep, big);
}

/* ---- rejections --------------------------------------------------------------------------- */

#define PACK(blobs) "{\"packs\":[{\"id\":\"" H1 "\",\"blobs\":[" blobs "]}]}"
#define BLOB(rest) "{\"id\":\"" H2 "\",\"type\":\"data\"," rest "}"

static void test_reject_ids(void **state)
{
	(void)state;
	static const char *const bad[] = {
		/* pack IDs */
		"{\"packs\":[{\"id\":\"" H1 "0\",\"blobs\":[]}]}",
		"{\"packs\":[{\"id\":\"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde\"}]}",
		"{\"packs\":[{\"id\":\"\"}]}",
		"{\"packs\":[{\"id\":\"g123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\"}]}",
		"{\"packs\":[{\"id\":\"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde \"}]}",
		"{\"packs\":[{\"id\":\"\\u0030123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\"}]}",
		"{\"packs\":[{\"id\":\"\\u0030123456789abcdef0123456789abcdef0123456789abcdef0123456789a\"}]}",
		"{\"packs\":[{\"id\":\"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcd\\\"\"}]}",
		"{\"packs\":[{\"id\":null}]}",
		"{\"packs\":[{\"id\":5}]}",
		"{\"packs\":[{\"id\":[\"" H1 "\"]}]}",
		"{\"packs\":[{\"id\":\"0x23456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\"}]}",
		/* blob IDs */
		PACK("{\"id\":\"" H1 "1\",\"type\":\"data\"}"),
		PACK("{\"id\":\"abc\",\"type\":\"data\"}"),
		PACK("{\"id\":\"\xc3\xa9" "23456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\",\"type\":\"data\"}"),
		/* supersedes */
		"{\"supersedes\":[\"" H1 "f\"]}",
		"{\"supersedes\":[5]}",
		"{\"supersedes\":[null]}",
		"{\"supersedes\":\"" H1 "\"}",
		"{\"supersedes\":{}}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		expect_corrupt(bad[i]);
}

static void test_reject_types(void **state)
{
	(void)state;
	static const char *const bad[] = {
		PACK("{\"id\":\"" H2 "\",\"type\":\"Data\"}"),
		PACK("{\"id\":\"" H2 "\",\"type\":\"dat\\u0061\"}"),
		PACK("{\"id\":\"" H2 "\",\"type\":\"blob\"}"),
		PACK("{\"id\":\"" H2 "\",\"type\":\"\"}"),
		PACK("{\"id\":\"" H2 "\",\"type\":0}"),
		PACK("{\"id\":\"" H2 "\",\"type\":null}"),
		PACK("{\"id\":\"" H2 "\",\"type\":\"data \"}"),
		PACK("{\"id\":\"" H2 "\",\"type\":\"treee\"}"),
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		expect_corrupt(bad[i]);
}

static void test_reject_numbers(void **state)
{
	(void)state;
	static const char *const bad[] = {
		PACK(BLOB("\"offset\":-1")),
		PACK(BLOB("\"offset\":-0")),
		PACK(BLOB("\"offset\":+1")),
		PACK(BLOB("\"offset\":1.0")),
		PACK(BLOB("\"offset\":1.")),
		PACK(BLOB("\"offset\":1e3")),
		PACK(BLOB("\"offset\":1E3")),
		PACK(BLOB("\"offset\":0e0")),
		PACK(BLOB("\"offset\":01")),
		PACK(BLOB("\"offset\":00")),
		PACK(BLOB("\"length\":4294967296")),
		PACK(BLOB("\"length\":9999999999")),
		PACK(BLOB("\"length\":42949672950")),
		PACK(BLOB("\"length\":18446744073709551617")),
		PACK(BLOB("\"length\":\"5\"")),
		PACK(BLOB("\"length\":true")),
		PACK(BLOB("\"length\":null")),
		PACK(BLOB("\"length\":[5]")),
		PACK(BLOB("\"uncompressed_length\":-5")),
		PACK(BLOB("\"uncompressed_length\":0.5")),
		PACK(BLOB("\"uncompressed_length\":.5")),
		PACK(BLOB("\"uncompressed_length\":0x10")),
		PACK(BLOB("\"uncompressed_length\":5000000000")),
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		expect_corrupt(bad[i]);
	/* The bounds themselves are fine. */
	rix_index *idx = decode_ok(PACK(BLOB("\"offset\":0,\"length\":4294967295,"
					     "\"uncompressed_length\":4294967295")));
	rix_packed_blob pb;
	get_blob(idx, RIX_BLOB_DATA, H2, &pb);
	assert_int_equal(pb.offset, 0);
	assert_int_equal(pb.length, UINT32_MAX);
	assert_int_equal(pb.uncompressed_length, UINT32_MAX);
	rix_index_free(idx);
}

static void test_reject_structure(void **state)
{
	(void)state;
	static const char *const bad[] = {
		/* top level */
		"", " \n", "null", "true", "5", "\"x\"", "{", "[", "}", "]",
		"{\"packs\":[]}x", "{\"packs\":[]}{}", "{}[]", "[] 1",
		"{\"packs\":[],}", "{,}", "{\"packs\" []}", "{\"packs\":[] \"x\":1}", "{packs:[]}",
		"{'packs':[]}", "{\"packs\":[],\"x\"}", "{\"packs\":[],\"x\":}",
		/* wrong types */
		"{\"packs\":{}}", "{\"packs\":\"\"}", "{\"packs\":5}", "{\"packs\":true}",
		"{\"packs\":[5]}", "{\"packs\":[null]}", "{\"packs\":[[]]}", "{\"packs\":[\"x\"]}",
		"[1]", "[null]", "[[]]",
		"{\"packs\":[{\"id\":\"" H1 "\",\"blobs\":{}}]}",
		"{\"packs\":[{\"id\":\"" H1 "\",\"blobs\":5}]}",
		"{\"packs\":[{\"id\":\"" H1 "\",\"blobs\":[5]}]}",
		"{\"packs\":[{\"id\":\"" H1 "\",\"blobs\":[null]}]}",
		"{\"packs\":[{\"id\":\"" H1 "\",\"blobs\":[[]]}]}",
		/* missing members */
		"{\"packs\":[{}]}", "{\"packs\":[{\"blobs\":[]}]}", "[{\"blobs\":null}]",
		PACK("{}"),
		PACK("{\"type\":\"data\",\"offset\":1,\"length\":2}"),
		PACK("{\"id\":\"" H2 "\",\"offset\":1,\"length\":2}"),
		/* commas, colons, brackets */
		"{\"packs\":[{\"id\":\"" H1 "\"},]}",
		"{\"packs\":[{\"id\":\"" H1 "\",}]}",
		"{\"packs\":[{\"id\":\"" H1 "\"}}",
		"{\"packs\":[{\"id\":\"" H1 "\"]]}",
		"{\"packs\":[{\"id\" \"" H1 "\"}]}",
		PACK(BLOB("\"offset\":1,")),
		PACK(BLOB("\"offset\":1 \"length\":2")),
		PACK(BLOB("\"offset\"")),
		PACK(BLOB("\"offset\"=1")),
		/* unknown values that are not valid JSON */
		"{\"x\":tru}", "{\"x\":nul}", "{\"x\":falsey}", "{\"x\":True}", "{\"x\":-}", "{\"x\":1.}",
		"{\"x\":1e}", "{\"x\":1e+}", "{\"x\":01}", "{\"x\":.5}", "{\"x\":+1}", "{\"x\":-a}",
		"{\"x\":\"\\x\"}", "{\"x\":\"\\u12g4\"}", "{\"x\":\"\\u123\"}", "{\"x\":\"a\nb\"}",
		"{\"x\":\"\x01\"}", "{\"x\":\"\x1f\"}", "{\"x\":\"abc}", "{\"x\":[1,]}", "{\"x\":[,1]}",
		"{\"x\":{\"a\"}}", "{\"x\":{\"a\":}}", "{\"x\":{1:2}}", "{\"x\":{\"a\":1,}}", "{\"x\":[}",
		"{\"x\":{]}", "{\"x\":[1 2]}", "{\"x\":'a'}", "{\"x\":NaN}", "{\"x\":Infinity}",
		"{\"x\":\"\\", "{\"x\":\"\\u00", "{\"x\\u00\":1}", "{\"\x02\":1}",
		"{\"packs\":[{\"id\":\"" H1 "\",\"x\":[}]}",
		PACK(BLOB("\"x\":{\"a\":[1,2,}")),
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		expect_corrupt(bad[i]);
	/* An embedded NUL is data, not the end of the text. */
	expect_corrupt_n("{}\0", 3);
	expect_corrupt_n("{\"x\":\"\0\"}", 8);
}

static void test_reject_duplicate_keys(void **state)
{
	(void)state;
	static const char *const bad[] = {
		"{\"packs\":[],\"packs\":[]}",
		"{\"packs\":null,\"packs\":null}",
		"{\"supersedes\":[],\"packs\":[],\"supersedes\":[]}",
		"{\"packs\":[{\"id\":\"" H1 "\",\"id\":\"" H1 "\"}]}",
		"{\"packs\":[{\"id\":\"" H1 "\",\"id\":\"" H2 "\",\"blobs\":[]}]}",
		"{\"packs\":[{\"blobs\":[],\"id\":\"" H1 "\",\"blobs\":[]}]}",
		"{\"packs\":[{\"id\":\"" H1 "\",\"blobs\":null,\"blobs\":[]}]}",
		PACK("{\"id\":\"" H2 "\",\"id\":\"" H2 "\",\"type\":\"data\"}"),
		PACK(BLOB("\"type\":\"tree\"")),
		PACK(BLOB("\"offset\":1,\"offset\":1")),
		PACK(BLOB("\"length\":1,\"length\":2")),
		PACK(BLOB("\"uncompressed_length\":1,\"uncompressed_length\":1")),
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		expect_corrupt(bad[i]);
		assert_non_null(strstr(rix_error_last(), "duplicate key"));
	}
}

/*
 * Keys restic reads as one of an object's keys but spelt otherwise. Go's encoding/json undoes
 * escapes and then matches names ignoring case, with U+212A KELVIN SIGN as 'k' and U+017F LONG S
 * as 's': "Offset" sets the offset for restic. rix refuses such a file (no reading of it can
 * then differ), whether or not the exact key is present too.
 */
static void test_reject_key_spellings(void **state)
{
	(void)state;
	/* The Offset case: restic reads 5 as the offset; rix used to read 0. */
	expect_corrupt(PACK(BLOB("\"Offset\":5,\"length\":6")));
	assert_non_null(strstr(rix_error_last(), "\"offset\""));
	assert_non_null(strstr(rix_error_last(), "ignore case"));
	assert_non_null(strstr(rix_error_last(), "at byte 179"));
	static const char *const bad[] = {
		/* blob keys */
		PACK(BLOB("\"offSet\":5")), PACK(BLOB("\"OFFSET\":5")), PACK(BLOB("\"offset\":1,\"Offset\":2")),
		PACK(BLOB("\"Offset\":2,\"offset\":1")), PACK(BLOB("\"of\\u0046set\":5")),
		PACK(BLOB("\"\\u004f\\u0066\\u0066\\u0073\\u0065\\u0074\":5")),
		PACK(BLOB("\"off\xc5\xbf" "et\":5")),  /* U+017F LONG S, raw UTF-8 */
		PACK(BLOB("\"off\\u017fet\":5")), PACK(BLOB("\"off\\u017Fet\":5")),
		PACK(BLOB("\"Length\":5")), PACK(BLOB("\"LENGTH\":5")),
		PACK(BLOB("\"Uncompressed_Length\":5")), PACK(BLOB("\"uncompre\xc5\xbf\xc5\xbf" "ed_length\":5")),
		PACK(BLOB("\"UNCOMPRESSED_LENGTH\":5")), PACK(BLOB("\"Type\":\"tree\"")),
		PACK("{\"ID\":\"" H2 "\",\"type\":\"data\"}"), PACK("{\"Id\":\"" H2 "\",\"id\":\"" H2 "\",\"type\":\"data\"}"),
		PACK("{\"id\":\"" H2 "\",\"iD\":\"" H1 "\",\"type\":\"data\"}"),
		PACK("{\"\\u0049d\":\"" H2 "\",\"type\":\"data\"}"),
		/* pack keys */
		"{\"packs\":[{\"Id\":\"" H1 "\"}]}", "{\"packs\":[{\"id\":\"" H1 "\",\"ID\":\"" H2 "\"}]}",
		"{\"packs\":[{\"id\":\"" H1 "\",\"Blobs\":[]}]}", "{\"packs\":[{\"id\":\"" H1 "\",\"blob\xc5\xbf\":[]}]}",
		"{\"packs\":[{\"id\":\"" H1 "\",\"blob\\u017f\":null}]}", "[{\"iD\":\"" H1 "\"}]",
		/* top keys */
		"{\"Packs\":[]}", "{\"packs\":[],\"PACKS\":[]}", "{\"pac\xe2\x84\xaas\":[]}", /* U+212A KELVIN SIGN */
		"{\"pac\\u212as\":null}", "{\"pac\\u212As\":null}", "{\"\\u0050acks\":[]}", "{\"packs\":[],\"pack\\u0053\":[]}",
		"{\"Supersedes\":[]}", "{\"super\xc5\xbf" "edes\":[]}", "{\"SUPER\\u017fEDES\":null}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		expect_corrupt(bad[i]);
		if (strstr(rix_error_last(), "ignore case") == NULL)
			fail_msg("%s: %s", bad[i], rix_error_last());
	}
}

/*
 * Keys that fold to none of the object's keys stay unknown and are skipped, as restic skips
 * them: longer or shorter names, other punctuation, non-ASCII letters that only look alike
 * (U+0131 dotless i and U+0130 dotted I fold only to themselves in Go's simple folding), and
 * keys another object knows.
 */
static void test_unknown_key_spellings(void **state)
{
	(void)state;
	static const char *const ok[] = {
		PACK(BLOB("\"offsets\":5,\"offse\":5,\"off-set\":5,\"off set\":5,\"\\u0000offset\":5")),
		PACK(BLOB("\"offset\\u0000\":5,\"\xc4\xb1" "d\":1,\"\xc4\xb0" "d\":1,\"\\u0131d\":1,\"\\u0130D\":1")),
		PACK(BLOB("\"of\xef\xac\x80" "set\":5,\"\xe2\x84\xab" "\":1,\"offset\xc5\":1,\"\xc5\xbf\":1")),
		PACK(BLOB("\"\\ud835\\udc28ffset\":1,\"\\udc00ffset\":1,\"\xff\":1,\"Packs\":[],\"BLOBS\":1,\"blobs\":2")),
		PACK(BLOB("\"lengthh\":1,\"uncompressed-length\":1,\"UncompressedLength\":1,\"typ\":1")),
		"{\"packs\":[{\"id\":\"" H1 "\",\"Offset\":5,\"TYPE\":1,\"packs\":[],\"blobz\":[]}]}",
		"{\"ID\":1,\"Blobs\":2,\"Offset\":3,\"packs\":[],\"pack\":1,\"supersede\":1}",
	};
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		rix_index *idx = decode_ok(ok[i]);
		rix_index_free(idx);
	}
	/* The values are still read from the exact keys only. */
	rix_index *idx = decode_ok(PACK(BLOB("\"offsets\":9,\"offset\":5,\"offse\":9,\"length\":6")));
	rix_packed_blob pb;
	get_blob(idx, RIX_BLOB_DATA, H2, &pb);
	assert_int_equal(pb.offset, 5);
	assert_int_equal(pb.length, 6);
	rix_index_free(idx);
}

/* Escapes in keys are undone, as restic undoes them: "\u006fffset" is "offset", and a repeat. */
static void test_escaped_keys(void **state)
{
	(void)state;
	rix_index *idx = decode_ok("{\"p\\u0061cks\":[{\"\\u0069\\u0064\":\"" H1 "\",\"blob\\u0073\":[{\"id\":\"" H2
				   "\",\"typ\\u0065\":\"tree\",\"\\u006fffset\":5,\"length\":6,"
				   "\"uncompressed\\u005flength\":7}]}],\"supersedes\\u0020\":1}");
	rix_packed_blob pb;
	get_blob(idx, RIX_BLOB_TREE, H2, &pb);
	assert_int_equal(pb.offset, 5);
	assert_int_equal(pb.length, 6);
	assert_int_equal(pb.uncompressed_length, 7);
	rix_index_free(idx);
	expect_corrupt(PACK(BLOB("\"offset\":1,\"\\u006fffset\":2")));
	assert_non_null(strstr(rix_error_last(), "duplicate key \"offset\""));
	expect_corrupt("{\"\\u0070acks\":[],\"packs\":[]}");
	assert_non_null(strstr(rix_error_last(), "duplicate key \"packs\" at byte 17"));
}

/* The message names the byte where the problem is. */
static void test_error_offsets(void **state)
{
	(void)state;
	char buf[300];
	/* bad hex digit at position 17 + 10 */
	snprintf(buf, sizeof(buf), "{\"packs\":[{\"id\":\"0123456789x%s\"}]}", H1 + 11);
	expect_corrupt(buf);
	assert_non_null(strstr(rix_error_last(), "bad hex digit in ID at byte 27"));
	expect_corrupt("{\"packs\":[]} x");
	assert_non_null(strstr(rix_error_last(), "at byte 13"));
	expect_corrupt(PACK(BLOB("\"offset\":-1")));
	assert_non_null(strstr(rix_error_last(), "negative number"));
	expect_corrupt("{\"packs\":[");
	assert_non_null(strstr(rix_error_last(), "unexpected end of text at byte 10"));
}

/* ---- the streaming decoder ---------------------------------------------------------------- */

/* The fixtures cut at every byte (and the other ways): the same result as the whole text. */
static void test_stream_fixtures(void **state)
{
	(void)state;
	static const char *const names[] = { "restic_index_v2_backup.json", "restic_index_v2_supersedes.json",
					     "restic_index_v1_backup.json", "restic_index_v1_supersedes.json",
					     "legacy_index.json" };
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		size_t len;
		char *text = rix_test_data_file(names[i], &len);
		const char *why = rix_fuzz_check_stream_max((const uint8_t *)text, len, SIZE_MAX);
		if (why != NULL)
			fail_msg("%s: %s", names[i], why);
		free(text);
	}
}

/* Streams text[0..len) with a window of `window` bytes and reads of `chunk`; returns the rc. */
static int stream_log(const char *text, size_t len, size_t window, size_t chunk, struct rix_fuzz_log *l,
		      size_t *peak)
{
	rix_index_stream *st = NULL;
	int rc = rix_index_stream_new(&st, window);
	if (rc != 0)
		return rc;
	rix_index_stream_sink ss = { { rix_fuzz_log_pack, rix_fuzz_log_blob, rix_fuzz_log_sup, l }, rix_fuzz_log_mark,
				     rix_fuzz_log_rollback };
	struct rix_fuzz_reader rd = { (const uint8_t *)text, len, 0, chunk };
	rc = rix_index_stream_decode(st, NULL, rix_fuzz_read, &rd, &ss);
	if (peak != NULL)
		*peak = rix_index_stream_window_peak(st);
	rix_index_stream_free(st);
	return rc;
}

static size_t count_kind(const struct rix_fuzz_log *l, char kind)
{
	size_t n = 0;
	for (size_t i = 0; i < l->n; i++)
		n += l->v[i].kind == kind;
	return n;
}

/*
 * The window holds what is not decoded yet: a big index of packs that each fit the window never
 * makes it grow (pieces cut at its end are decoded again, rolled back first); one pack bigger
 * than the window does, and the next text starts with the window's first size again.
 */
static void test_stream_window(void **state)
{
	(void)state;
	uint64_t st = 21;
	rix_index *a = random_index(&st, 2000, 3);
	size_t len;
	char *text = encode(a, &len);
	assert_true(len > 1000000); /* many windows */
	struct rix_fuzz_log l = { 0 };
	size_t peak = 0;
	assert_int_equal(stream_log(text, len, 16384, SIZE_MAX, &l, &peak), 0);
	assert_int_equal(peak, 16384);
	assert_true(l.rollbacks > len / 16384 / 2); /* most window ends cut a pack */
	assert_int_equal(count_kind(&l, 'p'), rix_index_pack_count(a));
	assert_int_equal(count_kind(&l, 'b'), rix_index_count(a, RIX_BLOB_DATA) + rix_index_count(a, RIX_BLOB_TREE));
	assert_int_equal(count_kind(&l, 's'), 3);
	free(l.v);
	rix_free(text);
	rix_index_free(a);

	/* One pack of 400 blobs (~80 KB of JSON) in a 4 KiB window: it grows to hold it. */
	rix_index *b = NULL;
	assert_int_equal(rix_index_new(&b), 0);
	rix_blob blobs[400];
	for (size_t i = 0; i < 400; i++) {
		rix_test_random_id(&blobs[i].id, &st);
		blobs[i].type = RIX_BLOB_DATA;
		blobs[i].offset = (uint32_t)i * 1000;
		blobs[i].length = 1000;
		blobs[i].uncompressed_length = 0;
	}
	rix_id pack;
	rix_test_random_id(&pack, &st);
	assert_int_equal(rix_index_store_pack(b, &pack, blobs, 400), 0);
	char *big = encode(b, &len);
	rix_index_stream *s = NULL;
	assert_int_equal(rix_index_stream_new(&s, 4096), 0);
	struct rix_fuzz_log m = { 0 };
	rix_index_stream_sink ss = { { rix_fuzz_log_pack, rix_fuzz_log_blob, rix_fuzz_log_sup, &m }, rix_fuzz_log_mark,
				     rix_fuzz_log_rollback };
	struct rix_fuzz_reader rd = { (const uint8_t *)big, len, 0, SIZE_MAX };
	assert_int_equal(rix_index_stream_decode(s, NULL, rix_fuzz_read, &rd, &ss), 0);
	assert_true(rix_index_stream_window_peak(s) >= len - 20);
	assert_int_equal(count_kind(&m, 'b'), 400);
	/* The same stream again on a small text: back to 4 KiB. */
	const char *small = "{\"packs\":[{\"id\":\"" H1 "\",\"blobs\":[]}]}";
	m.n = m.npacks = 0;
	rd = (struct rix_fuzz_reader){ (const uint8_t *)small, strlen(small), 0, SIZE_MAX };
	assert_int_equal(rix_index_stream_decode(s, NULL, rix_fuzz_read, &rd, &ss), 0);
	assert_int_equal(rix_index_stream_window_peak(s), 4096);
	assert_int_equal(m.n, 1);
	rix_index_stream_free(s);
	rix_index_stream_free(NULL);
	free(m.v);
	rix_free(big);
	rix_index_free(b);
}

/* A reader that fails after some bytes. */
struct failing_reader {
	struct rix_fuzz_reader r;
	size_t fail_at;
};

static int failing_read(void *arg, void *buf, size_t cap, size_t *got)
{
	struct failing_reader *f = arg;
	if (f->r.at >= f->fail_at)
		return rix_error_set(RIX_EIO, "test: read fails");
	return rix_fuzz_read(&f->r, buf, cap, got);
}

static int failing_pack(void *arg, const rix_id *id, uint32_t *num)
{
	struct rix_fuzz_log *l = arg;
	if (l->npacks == 1)
		return rix_error_set(RIX_ELIMIT, "test: second pack refused");
	return rix_fuzz_log_pack(arg, id, num);
}

/* The reader's and the sink's errors end the decode with their code; nothing is retried. */
static void test_stream_errors(void **state)
{
	(void)state;
	size_t len;
	char *text = rix_test_data_file("restic_index_v2_backup.json", &len);
	rix_index_stream *s = NULL;
	assert_int_equal(rix_index_stream_new(&s, 64), 0);
	struct rix_fuzz_log l = { 0 };
	rix_index_stream_sink ss = { { rix_fuzz_log_pack, rix_fuzz_log_blob, rix_fuzz_log_sup, &l }, rix_fuzz_log_mark,
				     rix_fuzz_log_rollback };
	struct failing_reader f = { { (const uint8_t *)text, len, 0, 100 }, len / 2 };
	assert_int_equal(rix_index_stream_decode(s, NULL, failing_read, &f, &ss), RIX_EIO);
	assert_non_null(strstr(rix_error_last(), "read fails"));

	l.n = l.npacks = 0;
	ss.sink.pack = failing_pack;
	struct rix_fuzz_reader rd = { (const uint8_t *)text, len, 0, 50 };
	assert_int_equal(rix_index_stream_decode(s, NULL, rix_fuzz_read, &rd, &ss), RIX_ELIMIT);
	assert_int_equal(l.npacks, 1);

	/* The stream is reusable after errors. */
	l.n = l.npacks = 0;
	ss.sink.pack = rix_fuzz_log_pack;
	rd = (struct rix_fuzz_reader){ (const uint8_t *)text, len, 0, 50 };
	bool legacy = true;
	assert_int_equal(rix_index_stream_decode(s, &legacy, rix_fuzz_read, &rd, &ss), 0);
	assert_false(legacy);
	assert_true(l.npacks > 1);
	rix_index_stream_free(s);
	free(l.v);
	free(text);
}

struct stream_oom_arg {
	const char *text;
	size_t len;
	size_t want; /* sink records of a success */
};

static int oom_stream_round(void *arg)
{
	const struct stream_oom_arg *a = arg;
	struct rix_fuzz_log l = { 0 };
	int rc = stream_log(a->text, a->len, 16, 37, &l, NULL);
	if (rc == 0)
		assert_int_equal(l.n, a->want);
	free(l.v);
	return rc;
}

/* Each allocation (the stream, its window, each doubling) failing gives RIX_ENOMEM, no leak. */
static void test_stream_oom(void **state)
{
	(void)state;
	size_t len;
	char *text = rix_test_data_file("restic_index_v2_supersedes.json", &len);
	struct rix_fuzz_log l = { 0 };
	assert_int_equal(stream_log(text, len, 16, 37, &l, NULL), 0);
	struct stream_oom_arg a = { text, len, l.n };
	free(l.v);
	rix_test_oom o = { .what = "index stream decode", .run = oom_stream_round, .arg = &a, .max = 1000, .must_fail = 1 };
	rix_test_oom_run(&o);
	free(text);
}

/* ---- allocation failures ------------------------------------------------------------------ */

struct text {
	const char *p;
	size_t len;
};

static int oom_decode_round(void *arg)
{
	const struct text *t = arg;
	rix_index *idx = (rix_index *)&idx;
	int rc = rix_index_decode(&idx, NULL, t->p, t->len);
	if (rc == 0)
		rix_index_free(idx);
	else
		assert_null(idx);
	return rc;
}

/* Each failure is RIX_ENOMEM with nothing kept; a success only when nothing failed. */
static void oom_decode(const char *text, size_t len)
{
	struct text t = { text, len };
	rix_test_oom o = { .what = "index decode", .run = oom_decode_round, .arg = &t, .max = 100000, .must_fail = 1 };
	rix_test_oom_run(&o);
}

static void test_oom_decode(void **state)
{
	(void)state;
	size_t len;
	char *text = rix_test_data_file("restic_index_v2_supersedes.json", &len);
	oom_decode(text, len);
	free(text);

	/* Large enough (> 64 KiB) to take the reserve path. */
	uint64_t st = 7;
	rix_index *a = random_index(&st, 1000, 2);
	char *big = encode(a, &len);
	assert_true(len > 100000);
	oom_decode(big, len);
	rix_free(big);
	rix_index_free(a);
}

struct encode_arg {
	const rix_index *idx;
	const char *ref;
	size_t ref_len;
};

static int oom_encode_round(void *arg)
{
	const struct encode_arg *e = arg;
	char *out = (char *)&out;
	size_t len = 1;
	int rc = rix_index_encode(&out, &len, e->idx);
	if (rc == 0) {
		/* A failed shrink is not an error: the output is still right. */
		assert_int_equal(len, e->ref_len);
		assert_memory_equal(out, e->ref, len);
		rix_free(out);
	} else {
		assert_null(out);
	}
	return rc;
}

static void test_oom_encode(void **state)
{
	(void)state;
	uint64_t st = 9;
	rix_index *a = random_index(&st, 200, 1);
	size_t ref_len;
	char *ref = encode(a, &ref_len);
	struct encode_arg e = { a, ref, ref_len };
	rix_test_oom_loop("index encode", oom_encode_round, &e, 1000);
	rix_free(ref);
	rix_index_free(a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fixture_v2_backup),
		cmocka_unit_test(test_fixture_v2_supersedes),
		cmocka_unit_test(test_fixture_v1_backup),
		cmocka_unit_test(test_fixture_v1_supersedes),
		cmocka_unit_test(test_fixture_values),
		cmocka_unit_test(test_fixture_legacy),
		cmocka_unit_test(test_truncation),
		cmocka_unit_test(test_byte_flips),
		cmocka_unit_test(test_random_roundtrip),
		cmocka_unit_test(test_group_edges),
		cmocka_unit_test(test_encode_empty),
		cmocka_unit_test(test_null_and_missing_lists),
		cmocka_unit_test(test_legacy_flag),
		cmocka_unit_test(test_unknown_fields_skipped),
		cmocka_unit_test(test_key_order_and_whitespace),
		cmocka_unit_test(test_defaults_and_repeated_pack),
		cmocka_unit_test(test_depth_limit),
		cmocka_unit_test(test_reject_ids),
		cmocka_unit_test(test_reject_types),
		cmocka_unit_test(test_reject_numbers),
		cmocka_unit_test(test_reject_structure),
		cmocka_unit_test(test_reject_duplicate_keys),
		cmocka_unit_test(test_reject_key_spellings),
		cmocka_unit_test(test_unknown_key_spellings),
		cmocka_unit_test(test_escaped_keys),
		cmocka_unit_test(test_error_offsets),
		cmocka_unit_test(test_oom_decode),
		cmocka_unit_test(test_oom_encode),
		cmocka_unit_test(test_stream_fixtures),
		cmocka_unit_test(test_stream_window),
		cmocka_unit_test(test_stream_errors),
		cmocka_unit_test(test_stream_oom),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
