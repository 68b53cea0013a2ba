/*
 * tests/test_usage.c — repo/usage.c: rix_repo_usage_compute's figures, exactly.
 *
 * The repository the figures are checked on (data blobs d1, d2, d3 of 1000, 2000 and 3000
 * bytes; "missing" is the ID of a data blob no pack holds):
 *
 *   snapshot 1 --> tree A: file "a" (3000 bytes: d1 d2), dir "sub" --> tree S
 *   snapshot 2 --> tree B: file "a" (the same), file "m" (500 bytes: missing), dir "sub" --> tree S
 *   snapshot 3 --> tree A (an unchanged backup: the same root tree)
 *                  tree S: file "s" (3000 bytes: d3)
 *
 *   files          2 + 3 + 2 = 7                (a file in two snapshots counts twice)
 *   logical bytes  6000 + 6500 + 6000 = 18500
 *   unique         d1 d2 d3: 3 blobs, 6000 bytes (each counted once)
 *   missing        1
 *   trees          A, B, S: 3                   (S, shared by A and B, and A, shared by two
 *                                                snapshots, are walked once)
 *
 * With compression off a data blob is stored as its plaintext plus RIX_CRYPTO_OVERHEAD; with
 * compression, unique_bytes stays the plaintext size and unique_stored is what the index says.
 * Also: an empty repository (all zero), and snapshots and trees that are not what restic
 * writes (RIX_ECORRUPT; a tree not in the index: RIX_ENOTFOUND); trees nested 3000 deep (walked).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "rix/rix.h"
#include "repo_fixture.h"
#include "testutil.h"

struct ids {
	rix_id d[3];    /* data blobs of 1000, 2000, 3000 bytes */
	rix_id missing; /* a data blob ID that no pack holds */
	rix_id a, b, s; /* trees */
};

/* Saves json as a tree blob; its ID into id. */
static void save_tree(rix_repo *r, const char *json, rix_id *id)
{
	MUST(rix_repo_save_blob(id, NULL, r, RIX_BLOB_TREE, json, strlen(json)));
}

/* Writes json as a snapshot file; its name into name when not NULL. */
static void put_snapshot_json(rix_repo *r, const char *json, char name[65])
{
	rix_id id;
	MUST(rix_repo_write_file(&id, r, RIX_FILE_SNAPSHOT, json, strlen(json)));
	if (name != NULL)
		rix_id_to_hex(name, &id);
}

/* A snapshot of tree as restic writes one, taken at second sec of a minute (names differ). */
static void put_snapshot(rix_repo *r, const rix_id *tree, int sec, char name[65])
{
	char hex[65], json[512];
	rix_id_to_hex(hex, tree);
	snprintf(json, sizeof(json),
		 "{\"time\":\"2024-05-06T07:08:%02d.123456789+02:00\",\"tree\":\"%s\",\"paths\":[\"/data\"],"
		 "\"hostname\":\"testhost\",\"username\":\"tester\"}",
		 sec, hex);
	put_snapshot_json(r, json, name);
}

/* A file node: size bytes made of the blobs ids[0..n) (n <= 2). */
static void file_node(char *out, size_t cap, const char *name, int size, const rix_id *ids, size_t n)
{
	char content[2 * 68] = "";
	for (size_t i = 0; i < n; i++) {
		char hex[65];
		rix_id_to_hex(hex, &ids[i]);
		size_t at = strlen(content);
		snprintf(content + at, sizeof(content) - at, "%s\"%s\"", i > 0 ? "," : "", hex);
	}
	snprintf(out, cap, "{\"name\":\"%s\",\"type\":\"file\",\"mode\":420,\"size\":%d,\"content\":[%s]}", name, size,
		 content);
}

/* A directory node whose subtree is tree. */
static void dir_node(char *out, size_t cap, const char *name, const rix_id *tree)
{
	char hex[65];
	rix_id_to_hex(hex, tree);
	snprintf(out, cap, "{\"name\":\"%s\",\"type\":\"dir\",\"mode\":2147484141,\"subtree\":\"%s\"}", name, hex);
}

/*
 * Makes the repository of the file comment in the empty folder dir, data blobs stored with
 * compression c; d3 is compressible (half of it one repeated byte), d1 and d2 are not.
 */
static void make_repo(const char *dir, rix_compression c, struct ids *x)
{
	rix_repo_free(init_repo(dir, 2));
	rix_repo_options o = fast;
	o.compression = c;
	rix_repo *r = open_repo(dir, &o);
	static uint8_t data[3000];
	uint64_t seed = 11;
	for (int i = 0; i < 3; i++) {
		size_t len = 1000 * (size_t)(i + 1);
		rix_test_fill_random(data, len, &seed);
		if (i == 2)
			memset(data, 'z', len / 2);
		bool stored;
		MUST(rix_repo_save_blob(&x->d[i], &stored, r, RIX_BLOB_DATA, data, len));
		assert_int_equal(stored, 1);
	}
	memset(&x->missing, 0x77, sizeof(x->missing));
	char fa[400], fm[400], fs[400], sub[200], tree[1200];
	file_node(fs, sizeof(fs), "s", 3000, &x->d[2], 1);
	snprintf(tree, sizeof(tree), "{\"nodes\":[%s]}\n", fs);
	save_tree(r, tree, &x->s);
	file_node(fa, sizeof(fa), "a", 3000, x->d, 2);
	dir_node(sub, sizeof(sub), "sub", &x->s);
	snprintf(tree, sizeof(tree), "{\"nodes\":[%s,%s]}\n", fa, sub);
	save_tree(r, tree, &x->a);
	file_node(fm, sizeof(fm), "m", 500, &x->missing, 1);
	snprintf(tree, sizeof(tree), "{\"nodes\":[%s,%s,%s]}\n", fa, fm, sub);
	save_tree(r, tree, &x->b);
	MUST(rix_repo_flush(r));
	put_snapshot(r, &x->a, 1, NULL);
	put_snapshot(r, &x->b, 2, NULL);
	put_snapshot(r, &x->a, 3, NULL);
	rix_repo_free(r);
}

/* Opens dir and loads its index. */
static rix_repo *open_loaded(const char *dir)
{
	rix_repo *r = open_repo(dir, NULL);
	MUST(rix_repo_load_index(NULL, r, NULL, NULL));
	return r;
}

/* Opens dir, loads its index and computes its usage. */
static int compute(const char *dir, rix_repo_usage *u)
{
	rix_repo *r = open_loaded(dir);
	int rc = rix_repo_usage_compute(u, r);
	rix_repo_free(r);
	return rc;
}

/* The figures of the file comment; stored: what d1, d2 and d3 take in their packs. */
static void check_figures(const rix_repo_usage *u, uint64_t stored)
{
	assert_int_equal(u->snapshots, 3);
	assert_int_equal(u->files, 7);
	assert_int_equal(u->logical_bytes, 18500);
	assert_int_equal(u->unique_blobs, 3);
	assert_int_equal(u->unique_bytes, 6000);
	assert_int_equal(u->unique_stored, stored);
	assert_int_equal(u->missing_blobs, 1);
	assert_int_equal(u->trees, 3);
}

static void test_usage_figures(void **state)
{
	(void)state;
	char *dir = rix_test_new_dir("rix-usage");
	struct ids x;
	make_repo(dir, RIX_COMPRESSION_OFF, &x);
	rix_repo_usage u;
	MUST(compute(dir, &u));
	check_figures(&u, 6000 + 3 * RIX_CRYPTO_OVERHEAD);
	rix_test_free_dir(dir);
}

/* Compressed data blobs: unique_bytes is still the plaintext, unique_stored what is stored. */
static void test_usage_compressed(void **state)
{
	(void)state;
	char *dir = rix_test_new_dir("rix-usage");
	struct ids x;
	make_repo(dir, RIX_COMPRESSION_MAX, &x);
	rix_repo *r = open_loaded(dir);
	rix_packed_blob pb;
	MUST(rix_master_index_lookup(&pb, rix_repo_master_index(r), RIX_BLOB_DATA, &x.d[2]));
	assert_int_equal(pb.uncompressed_length, 3000); /* d3 is stored compressed */
	assert_true(pb.length < 3000);
	rix_repo_usage u;
	MUST(rix_repo_usage_compute(&u, r));
	rix_repo_free(r);
	/* d1 and d2 are random: compressing them would not make them smaller. */
	check_figures(&u, 1000 + 2000 + 2 * RIX_CRYPTO_OVERHEAD + pb.length);
	rix_test_free_dir(dir);
}

static void test_usage_empty(void **state)
{
	(void)state;
	char *dir = rix_test_new_dir("rix-usage");
	rix_repo_free(init_repo(dir, 2));
	rix_repo_usage u;
	memset(&u, 0xff, sizeof(u));
	MUST(compute(dir, &u));
	rix_repo_usage zero;
	memset(&zero, 0, sizeof(zero));
	assert_memory_equal(&u, &zero, sizeof(u));
	rix_test_free_dir(dir);
}

/*
 * With a snapshot of the tree json (NULL: of the tree ID *tree) next to r's, usage fails with
 * want, and a message that says want_msg (NULL: any).
 */
static void expect_failure(rix_repo *r, const char *json, const rix_id *tree, int want, const char *want_msg)
{
	rix_id id;
	if (json != NULL) {
		save_tree(r, json, &id);
		MUST(rix_repo_flush(r));
		tree = &id;
	}
	char name[65];
	put_snapshot(r, tree, 59, name);
	rix_repo_usage u;
	int rc = rix_repo_usage_compute(&u, r);
	if (rc != want || (want_msg != NULL && strstr(rix_error_last(), want_msg) == NULL))
		fail_msg("%s: %d (%s), want %d (%s)", json != NULL ? json : "a tree given by ID", rc, rix_error_last(),
			 want, want_msg != NULL ? want_msg : "");
	MUST(rix_backend_remove(rix_repo_backend(r), RIX_FILE_SNAPSHOT, name));
}

static void test_usage_not_restic(void **state)
{
	(void)state;
	char *dir = rix_test_new_dir("rix-usage");
	struct ids x;
	make_repo(dir, RIX_COMPRESSION_OFF, &x);
	rix_repo *r = open_loaded(dir);
	/* A snapshot without a tree, a null one, one that is no ID, or one restic's decoder refuses
	 * (the snapshot decoder's reason said). */
	static const char *const no_tree[][2] = {
		{ "{\"time\":\"2024-05-06T07:08:09Z\",\"paths\":[\"/data\"]}", "\"tree\" is missing" },
		{ "{\"time\":\"2024-05-06T07:08:09Z\",\"tree\":null,\"paths\":[\"/data\"]}", "\"tree\" is missing" },
		{ "{\"time\":\"2024-05-06T07:08:09Z\",\"tree\":\"zz\",\"paths\":[\"/data\"]}", "64 hex digits" },
		{ "[\"tree\"]", "not a JSON object" },
	};
	char name[65];
	rix_repo_usage u;
	for (size_t i = 0; i < sizeof(no_tree) / sizeof(no_tree[0]); i++) {
		put_snapshot_json(r, no_tree[i][0], name);
		assert_int_equal(rix_repo_usage_compute(&u, r), RIX_ECORRUPT);
		if (strstr(rix_error_last(), "has no tree (") == NULL || strstr(rix_error_last(), no_tree[i][1]) == NULL)
			fail_msg("%s: %s", no_tree[i][0], rix_error_last());
		MUST(rix_backend_remove(rix_repo_backend(r), RIX_FILE_SNAPSHOT, name));
	}
	/* Trees that are not what restic writes, and one the index does not hold. */
	expect_failure(r, "[]", NULL, RIX_ECORRUPT, "not a JSON object");
	expect_failure(r, "{\"nodes\":[{\"name\":\"f\",\"type\":\"file\",\"size\":1,\"content\":[\"zz\"]}]}", NULL,
		       RIX_ECORRUPT, "not a list of IDs");
	expect_failure(r, "{\"nodes\":[{\"name\":\"d\",\"type\":\"dir\"}]}", NULL, RIX_ECORRUPT, "without a subtree");
	expect_failure(r, NULL, &x.missing, RIX_ENOTFOUND, "not in the index");
	/* Trees nested 3000 deep (over S): walked with an explicit stack, not refused, not a stack
	 * overflow; each level one tree, S's file counted once more. */
	rix_id t = x.s;
	for (int depth = 0; depth < 3000; depth++) {
		char node[200], json[300];
		dir_node(node, sizeof(node), "d", &t);
		snprintf(json, sizeof(json), "{\"nodes\":[%s]}\n", node);
		save_tree(r, json, &t);
	}
	MUST(rix_repo_flush(r));
	char deep[65];
	put_snapshot(r, &t, 58, deep);
	MUST(rix_repo_usage_compute(&u, r));
	assert_int_equal(u.snapshots, 4);
	assert_int_equal(u.trees, 3 + 3000);
	assert_int_equal(u.files, 7 + 1);
	assert_int_equal(u.logical_bytes, 18500 + 3000);
	MUST(rix_backend_remove(rix_repo_backend(r), RIX_FILE_SNAPSHOT, deep));
	/* With the bad snapshots gone, the figures are as before. */
	MUST(rix_repo_usage_compute(&u, r));
	check_figures(&u, 6000 + 3 * RIX_CRYPTO_OVERHEAD);
	rix_repo_free(r);
	rix_test_free_dir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_usage_figures),
		cmocka_unit_test(test_usage_compressed),
		cmocka_unit_test(test_usage_empty),
		cmocka_unit_test(test_usage_not_restic),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
