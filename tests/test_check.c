/*
 * tests/test_check.c — repo/check.c: rix_repo_check over the local backend.
 *
 * Cases: a clean repository checks clean with and without --read-data (packs, blobs, index files
 * counted); an index file that disagrees with a pack's header is an error (and a duplicate
 * blob); a pack no index file names is reported, not an error; a pack the index names, damaged:
 * a flipped byte (found by --read-data only), cut short (the header is unreadable), gone.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
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
	MUST(rix_index_new(&bad, 0));
	MUST(rix_index_store_pack(bad, &pb.pack_id, &wrong, 1));
	char *json;
	size_t jl;
	MUST(rix_index_encode(&json, &jl, bad));
	rix_id bad_id;
	char bad_name[65];
	MUST(rix_repo_write_file(r, RIX_FILE_INDEX, json, jl, &bad_id));
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_check),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
