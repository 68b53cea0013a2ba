/*
 * tests/test_check.c — repo/check.c: rix_repo_check over the local backend.
 *
 * Cases: a clean repository checks clean with and without --read-data (packs, blobs, index files
 * counted); an index file that disagrees with a pack's header is an error (and a duplicate
 * blob); a pack no index file names is reported, not an error; a pack the index names, damaged:
 * a flipped byte (found by --read-data only), cut short (the header is unreadable), gone.
 *
 * The snapshots (test_check_snapshots): a clean snapshot, then one at a time: a file's data
 * blob not in the index, a snapshot whose tree does not exist, a damaged snapshot file, a blob
 * a pack holds that no index names; each an error whose message names the damaged object (and
 * the snapshot, tree and path that led there); trees nested 3000 deep check clean.
 * The read-data subsets (test_check_subset): n/t by the pack ID's first byte, all n of t
 * together read every pack once; a percentage; a size; bad subsets refused. A pack longer
 * than its (index-matching) header accounts for: an error.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "rix/rix.h"
#include "repo_fixture.h"
#include "testutil.h"

/* The name of the index file not in names_before (the one a flush just wrote). */
struct newest {
	char before[8][65];
	size_t nbefore;
	char found[65];
};

static int collect_index(void *arg, const char *name, uint64_t size)
{
	(void)size;
	struct newest *nw = arg;
	for (size_t i = 0; i < nw->nbefore; i++)
		if (strcmp(nw->before[i], name) == 0)
			return 0;
	memcpy(nw->found, name, 65);
	return 0;
}

static int remember_index(void *arg, const char *name, uint64_t size)
{
	(void)size;
	struct newest *nw = arg;
	if (nw->nbefore < 8)
		memcpy(nw->before[nw->nbefore++], name, 65);
	return 0;
}

static void test_check(void **state)
{
	(void)state;
	char *dir = rix_test_new_dir("rix-repo");
	rix_repo *r = init_repo(dir, 2);
	static struct blobs s;
	make_blobs(&s, 80, 9);
	save_all(r, &s);
	MUST(rix_repo_flush(r));
	size_t packs = count_files(r, RIX_FILE_PACK);
	rix_repo_free(r);
	struct lines l;
	for (int rd = 0; rd <= 1; rd++) {
		rix_check_report rep = run_check(dir, rd, 0, &l);
		assert_int_equal(rep.errors, 0);
		assert_int_equal(rep.packs, packs);
		assert_int_equal(rep.blobs, s.n);
		assert_int_equal(rep.index_files, 1);
		assert_int_equal(rep.duplicate_blobs, 0);
		assert_true(rd == 0 || rep.bytes_read > 0);
	}

	/* An index file that disagrees with a pack's header (a wrong length): an error. */
	r = open_repo(dir, NULL);
	MUST(rix_repo_load_index(NULL, r, NULL, NULL));
	rix_packed_blob pb;
	MUST(rix_master_index_lookup(&pb, rix_repo_master_index(r), s.type[1], &s.id[1]));
	rix_blob wrong = { .id = pb.id, .type = pb.type, .offset = pb.offset, .length = pb.length + 1,
			   .uncompressed_length = pb.uncompressed_length };
	rix_index *bad;
	MUST(rix_index_new(&bad));
	MUST(rix_index_store_pack(bad, &pb.pack_id, &wrong, 1));
	char *json;
	size_t jl;
	MUST(rix_index_encode(&json, &jl, bad));
	rix_id bad_id;
	char bad_name[65];
	MUST(rix_repo_write_file(&bad_id, r, RIX_FILE_INDEX, json, jl));
	rix_id_to_hex(bad_name, &bad_id);
	rix_free(json);
	rix_index_free(bad);
	rix_repo_free(r);
	rix_check_report mis = run_check(dir, 0, RIX_ECORRUPT, &l);
	assert_int_equal(mis.header_mismatches, 1);
	assert_int_equal(mis.errors, 1);
	assert_int_equal(mis.duplicate_blobs, 1); /* the same blob named twice */
	assert_non_null(strstr(l.last_error, "do not match its header"));
	r = open_repo(dir, NULL);
	MUST(rix_backend_remove(rix_repo_backend(r), RIX_FILE_INDEX, bad_name));
	rix_repo_free(r);

	/* A pack no index names (its index file removed): reported, not an error. */
	r = open_repo(dir, NULL);
	MUST(rix_repo_load_index(NULL, r, NULL, NULL));
	struct newest nw = { .nbefore = 0 };
	MUST(rix_backend_list(rix_repo_backend(r), RIX_FILE_INDEX, remember_index, &nw));
	uint8_t extra[5000];
	uint64_t seed = 10;
	rix_test_fill_random(extra, sizeof(extra), &seed);
	MUST(rix_repo_save_blob(NULL, NULL, r, RIX_BLOB_DATA, extra, sizeof(extra)));
	MUST(rix_repo_flush(r));
	MUST(rix_backend_list(rix_repo_backend(r), RIX_FILE_INDEX, collect_index, &nw));
	assert_int_equal(strlen(nw.found), 64);
	MUST(rix_backend_remove(rix_repo_backend(r), RIX_FILE_INDEX, nw.found));
	rix_repo_free(r);
	rix_check_report rep = run_check(dir, 0, 0, &l);
	assert_int_equal(rep.orphaned_packs, 1);
	assert_int_equal(rep.errors, 0);
	assert_int_equal(l.infos, 1);

	/* A pack the index names, damaged in three ways. */
	r = open_repo(dir, NULL);
	MUST(rix_repo_load_index(NULL, r, NULL, NULL));
	rix_id *ids;
	size_t nids;
	MUST(rix_master_index_packs(&ids, &nids, rix_repo_master_index(r)));
	assert_int_equal(nids, packs);
	char pack[65];
	rix_id_to_hex(pack, &ids[0]);
	rix_free(ids);
	rix_repo_free(r);
	char path[800];
	snprintf(path, sizeof(path), "%s/data/%.2s/%s", dir, pack, pack);
	/* A flipped byte in the first blob: the header still reads, read-data finds it. */
	flip_byte(path, 10);
	rep = run_check(dir, 0, 0, &l);
	rep = run_check(dir, 1, RIX_ECORRUPT, &l);
	assert_int_equal(rep.damaged_packs, 1);
	assert_int_equal(rep.damaged_blobs, 1);
	assert_int_equal(rep.errors, 2);
	assert_non_null(strstr(l.last_error, pack));
	/* Cut short: the header cannot be read. */
	assert_int_equal(truncate(path, 50), 0);
	rep = run_check(dir, 0, RIX_ECORRUPT, &l);
	assert_int_equal(rep.damaged_packs, 1);
	/* Gone. */
	assert_int_equal(unlink(path), 0);
	rep = run_check(dir, 0, RIX_ECORRUPT, &l);
	assert_int_equal(rep.missing_packs, 1);
	assert_int_equal(rep.errors, 1);
	assert_non_null(strstr(l.last_error, "missing"));
	free_blobs(&s);
	rix_test_free_dir(dir);
}

/* A snapshot of tree as restic writes one, at second sec (names differ); its name. */
static void put_snapshot(rix_repo *r, const rix_id *tree, int sec, char name[65])
{
	char hex[65], json[400];
	rix_id_to_hex(hex, tree);
	snprintf(json, sizeof(json),
		 "{\"time\":\"2024-05-06T07:08:%02d.5Z\",\"tree\":\"%s\",\"paths\":[\"/data\"],\"hostname\":\"h\","
		 "\"username\":\"u\"}",
		 sec, hex);
	rix_id id;
	MUST(rix_repo_write_file(&id, r, RIX_FILE_SNAPSHOT, json, strlen(json)));
	rix_id_to_hex(name, &id);
}

static void save_tree(rix_repo *r, const char *json, rix_id *id)
{
	MUST(rix_repo_save_blob(id, NULL, r, RIX_BLOB_TREE, json, strlen(json)));
}

static void remove_snapshot(const char *dir, const char *name)
{
	rix_repo *r = open_repo(dir, NULL);
	MUST(rix_backend_remove(rix_repo_backend(r), RIX_FILE_SNAPSHOT, name));
	rix_repo_free(r);
}

static void test_check_snapshots(void **state)
{
	(void)state;
	char *dir = rix_test_new_dir("rix-check-snap");
	rix_repo *r = init_repo(dir, 2);
	rix_id d, missing, a, b, c, nowhere;
	MUST(rix_repo_save_blob(&d, NULL, r, RIX_BLOB_DATA, "hello", 5));
	rix_sha256(&missing, "not stored", 10);
	rix_sha256(&nowhere, "no such tree", 12);
	char dh[65], mh[65], json[1000];
	rix_id_to_hex(dh, &d);
	rix_id_to_hex(mh, &missing);
	snprintf(json, sizeof(json), "{\"nodes\":[{\"name\":\"a\",\"type\":\"file\",\"size\":5,\"content\":[\"%s\"]}]}\n", dh);
	save_tree(r, json, &a);
	snprintf(json, sizeof(json), "{\"nodes\":[{\"name\":\"m\",\"type\":\"file\",\"size\":5,\"content\":[\"%s\"]}]}\n", mh);
	save_tree(r, json, &c);
	char ch[65], ah[65];
	rix_id_to_hex(ch, &c);
	rix_id_to_hex(ah, &a);
	snprintf(json, sizeof(json), "{\"nodes\":[{\"name\":\"sub\",\"type\":\"dir\",\"subtree\":\"%s\"}]}\n", ch);
	save_tree(r, json, &b);
	MUST(rix_repo_flush(r));
	char s1[65], s2[65];
	put_snapshot(r, &a, 1, s1);
	rix_repo_free(r);
	struct lines l;
	rix_check_report rep = run_check(dir, 0, 0, &l);
	assert_int_equal(rep.snapshots, 1);
	assert_int_equal(rep.trees, 1);
	assert_int_equal(rep.errors, 0);

	/* Numbers past 2^63 (Go's uint64: inode numbers some file systems give, which rix's
	 * backup writes as they come): a tree like any other. */
	r = open_repo(dir, NULL);
	rix_id big;
	snprintf(json, sizeof(json),
		 "{\"nodes\":[{\"name\":\"a\",\"type\":\"file\",\"inode\":18446744073709551615,"
		 "\"device_id\":9223372036854775808,\"size\":5,\"links\":1,\"content\":[\"%s\"]}]}\n", dh);
	save_tree(r, json, &big);
	MUST(rix_repo_flush(r));
	put_snapshot(r, &big, 9, s2);
	rix_repo_free(r);
	rep = run_check(dir, 0, 0, &l);
	assert_int_equal(rep.snapshots, 2);
	assert_int_equal(rep.trees, 2);
	assert_int_equal(rep.errors, 0);
	remove_snapshot(dir, s2);

	/* A file's data blob not in the index: named, with its snapshot, tree and path. */
	r = open_repo(dir, NULL);
	put_snapshot(r, &b, 2, s2);
	rix_repo_free(r);
	rep = run_check(dir, 0, RIX_ECORRUPT, &l);
	assert_int_equal(rep.snapshots, 2);
	assert_int_equal(rep.trees, 3);
	assert_int_equal(rep.missing_blobs, 1);
	assert_int_equal(rep.errors, 1);
	assert_non_null(strstr(l.last_error, mh));
	assert_non_null(strstr(l.last_error, ch));
	assert_non_null(strstr(l.last_error, s2));
	assert_non_null(strstr(l.last_error, "/sub/m"));
	remove_snapshot(dir, s2);

	/* A snapshot whose tree does not exist. */
	r = open_repo(dir, NULL);
	put_snapshot(r, &nowhere, 3, s2);
	rix_repo_free(r);
	rep = run_check(dir, 0, RIX_ECORRUPT, &l);
	assert_int_equal(rep.missing_blobs, 1);
	assert_int_equal(rep.errors, 1);
	char nh[65];
	rix_id_to_hex(nh, &nowhere);
	assert_non_null(strstr(l.last_error, nh));
	assert_non_null(strstr(l.last_error, s2));
	remove_snapshot(dir, s2);

	/* A damaged snapshot file (a flipped byte), then one cut short. */
	r = open_repo(dir, NULL);
	put_snapshot(r, &a, 4, s2);
	rix_repo_free(r);
	char path[800];
	snprintf(path, sizeof(path), "%s/snapshots/%s", dir, s2);
	flip_byte(path, 20);
	rep = run_check(dir, 0, RIX_ECORRUPT, &l);
	assert_int_equal(rep.damaged_snapshots, 1);
	assert_int_equal(rep.errors, 1);
	assert_non_null(strstr(l.last_error, s2));
	assert_int_equal(truncate(path, 10), 0);
	rep = run_check(dir, 0, RIX_ECORRUPT, &l);
	assert_int_equal(rep.damaged_snapshots, 1);
	assert_non_null(strstr(l.last_error, s2));
	remove_snapshot(dir, s2);

	/* Trees nested 3000 deep: walked (an explicit stack), every level once, clean. */
	r = open_repo(dir, NULL);
	rix_id t = a;
	for (int depth = 0; depth < 3000; depth++) {
		char hex[65];
		rix_id_to_hex(hex, &t);
		snprintf(json, sizeof(json), "{\"nodes\":[{\"name\":\"d\",\"type\":\"dir\",\"subtree\":\"%s\"}]}\n", hex);
		save_tree(r, json, &t);
	}
	MUST(rix_repo_flush(r));
	put_snapshot(r, &t, 5, s2);
	rix_repo_free(r);
	rep = run_check(dir, 0, 0, &l);
	assert_int_equal(rep.snapshots, 2);
	assert_int_equal(rep.trees, 3001);
	assert_int_equal(rep.errors, 0);

	/* A blob its pack holds that no index names (an index rewritten without tree a). */
	r = open_repo(dir, NULL);
	MUST(rix_repo_load_index(NULL, r, NULL, NULL));
	rix_packed_blob pa;
	MUST(rix_master_index_lookup(&pa, rix_repo_master_index(r), RIX_BLOB_TREE, &a));
	rix_repo_free(r);
	assert_int_equal(drop_from_index(dir, &a), 1);
	rep = run_check(dir, 0, RIX_ECORRUPT, &l);
	assert_int_equal(rep.unindexed_blobs, 1);
	assert_true(rep.missing_blobs >= 1); /* the snapshots' trees name it */
	assert_int_equal(rep.errors, rep.unindexed_blobs + rep.missing_blobs + rep.header_mismatches);
	rix_test_free_dir(dir);
}

static void test_check_subset(void **state)
{
	(void)state;
	char *dir = rix_test_new_dir("rix-check-subset");
	rix_repo *r = init_repo(dir, 2);
	static struct blobs s;
	for (int k = 0; k < 6; k++) { /* a flush per batch: a pack each, at least */
		make_blobs(&s, 8, 11 + (uint64_t)k);
		save_all(r, &s);
		MUST(rix_repo_flush(r));
		free_blobs(&s);
	}
	rix_check_report rep;
	MUST(rix_repo_check(&rep, r, NULL));
	size_t packs = rep.packs;
	assert_true(packs >= 4);
	assert_int_equal(rep.packs_read, 0);
	/* n of t: each pack in exactly one of the t subsets. */
	size_t sum = 0;
	for (unsigned n = 1; n <= 3; n++) {
		rix_check_options co = RIX_CHECK_OPTIONS_INIT;
		co.subset_n = n;
		co.subset_t = 3;
		MUST(rix_repo_check(&rep, r, &co));
		sum += rep.packs_read;
	}
	assert_int_equal(sum, packs);
	rix_check_options co = RIX_CHECK_OPTIONS_INIT;
	co.subset_percent = 50;
	MUST(rix_repo_check(&rep, r, &co));
	assert_int_equal(rep.packs_read, packs / 2);
	co = (rix_check_options)RIX_CHECK_OPTIONS_INIT;
	co.subset_percent = 0.001;
	MUST(rix_repo_check(&rep, r, &co));
	assert_int_equal(rep.packs_read, 1);
	co = (rix_check_options)RIX_CHECK_OPTIONS_INIT;
	co.subset_bytes = 1;
	MUST(rix_repo_check(&rep, r, &co));
	assert_int_equal(rep.packs_read, 1);
	co.subset_bytes = UINT64_MAX;
	MUST(rix_repo_check(&rep, r, &co));
	assert_int_equal(rep.packs_read, packs);
	/* Refused: n over t, t over 256, two kinds at once, a percentage over 100. */
	co = (rix_check_options)RIX_CHECK_OPTIONS_INIT;
	co.subset_n = 4;
	co.subset_t = 3;
	assert_int_equal(rix_repo_check(&rep, r, &co), RIX_EINVAL);
	co.subset_n = 1;
	co.subset_t = 257;
	assert_int_equal(rix_repo_check(&rep, r, &co), RIX_EINVAL);
	co.subset_t = 2;
	co.subset_percent = 10;
	assert_int_equal(rix_repo_check(&rep, r, &co), RIX_EINVAL);
	co = (rix_check_options)RIX_CHECK_OPTIONS_INIT;
	co.subset_percent = 101;
	assert_int_equal(rix_repo_check(&rep, r, &co), RIX_EINVAL);

	/* A pack with 16 bytes more before its blobs: its header reads and matches the index, its
	 * size does not (restic's "unexpected file size"). */
	rix_id *ids;
	size_t nids;
	MUST(rix_master_index_packs(&ids, &nids, rix_repo_master_index(r)));
	char pack[65], path[800];
	rix_id_to_hex(pack, &ids[0]);
	rix_free(ids);
	rix_repo_free(r);
	snprintf(path, sizeof(path), "%s/data/%.2s/%s", dir, pack, pack);
	size_t n;
	uint8_t *bytes = rix_test_must_read(path, &n);
	chmod(path, 0600);
	FILE *f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite("0123456789abcdef", 1, 16, f), 16);
	assert_int_equal(fwrite(bytes, 1, n, f), n);
	fclose(f);
	free(bytes);
	struct lines l;
	rep = run_check(dir, 0, RIX_ECORRUPT, &l);
	assert_int_equal(rep.damaged_packs, 1);
	assert_int_equal(rep.errors, 1);
	assert_non_null(strstr(l.last_error, pack));
	assert_non_null(strstr(l.last_error, "its index entries make"));
	rix_test_free_dir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_check),
		cmocka_unit_test(test_check_snapshots),
		cmocka_unit_test(test_check_subset),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
