/*
 * tests/test_check_restic.c — rix_repo_check against the real restic check (0.14), on
 * repositories restic made and then damaged.
 *
 * One repository is made once (`restic init --repository-version 2`, `restic backup` of a small
 * tree: files in nested folders); each case works on a copy (cp -a), damages it one way, and
 * wants both `restic check` and rix_repo_check to fail, rix naming the damaged object in a
 * message (and `rix --json check` to print restic 0.18's error and summary lines, exit 1):
 *
 *   test_pristine            nothing damaged: both pass (and rix check --read-data-subset's forms)
 *   test_snapshot_truncated  a snapshot file cut short          damaged_snapshots, its ID
 *   test_snapshot_no_tree    a snapshot naming a tree that does not exist   missing_blobs, the tree
 *   test_index_deleted       the index file deleted: trees and packs in no index  missing_blobs, the root tree
 *   test_blob_unindexed      one data blob dropped from the index (its pack still holds it)
 *                            unindexed_blobs and missing_blobs, the blob
 *   test_tree_pack_damaged   bytes flipped in the pack of the root tree   damaged_trees, the pack
 *   test_tree_pack_deleted   the root tree's pack deleted           missing_packs, the pack
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

static char g_tmpl[300]; /* the pristine repository (restic's) */
static char g_src[300];  /* the tree it backed up */

static void put(const char *dir, const char *name, const char *text, size_t repeat)
{
	char path[1500];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	for (size_t i = 0; i < repeat; i++)
		fprintf(f, "%s %zu\n", text, i);
	fclose(f);
}

static int name_of(void *arg, const char *name, uint64_t size)
{
	(void)size;
	memcpy(arg, name, 65);
	return 0;
}

static int setup(void **state)
{
	(void)state;
	rix_test_mkdtemp(g_src, sizeof(g_src), "rix-check-src");
	rix_test_mkdtemp(g_tmpl, sizeof(g_tmpl), "rix-check-tmpl");
	char d[700];
	put(g_src, "a.txt", "alpha", 10);
	put(g_src, "b.txt", "bravo", 3000);
	snprintf(d, sizeof(d), "%s/sub", g_src);
	assert_int_equal(mkdir(d, 0700), 0);
	put(d, "c.txt", "charlie", 200);
	snprintf(d, sizeof(d), "%s/sub/deeper", g_src);
	assert_int_equal(mkdir(d, 0700), 0);
	put(d, "d.txt", "delta", 50);
	char *out = NULL;
	if (rix_test_restic(g_tmpl, PW, "init --repository-version 2", &out) != 0)
		fail_msg("restic init: %s", out);
	free(out);
	char args[700];
	snprintf(args, sizeof(args), "backup '%s'", g_src);
	if (rix_test_restic(g_tmpl, PW, args, &out) != 0)
		fail_msg("restic backup: %s", out);
	free(out);
	/* restic's key (scrypt calibrated: about a second per opening) for one of cheap scrypt (rix's,
	 * which restic reads too), so that each case opens the repository in milliseconds. */
	rix_repo *r = open_repo(g_tmpl, NULL);
	char restic_key[65], cheap[65];
	MUST(rix_repo_key_list(r, name_of, restic_key));
	MUST(rix_repo_key_add(cheap, r, PW, strlen(PW)));
	MUST(rix_backend_remove(rix_repo_backend(r), RIX_FILE_KEY, restic_key));
	rix_repo_free(r);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	rix_test_remove_tree(g_tmpl);
	rix_test_rmtree(g_src);
	return 0;
}

/* A copy of the pristine repository (the caller frees it with rix_test_free_dir). */
static char *copy_repo(void)
{
	char *dir = rix_test_new_dir("rix-check-case");
	char *out;
	size_t n;
	if (rix_test_run(&out, &n, "rm -rf '%s' && cp -a '%s' '%s' 2>&1", dir, g_tmpl, dir) != 0)
		fail_msg("cp: %s", out);
	free(out);
	return dir;
}

/* The (one) snapshot's name, its root tree, and the pack holding that tree. */
static void facts(const char *dir, char snap[65], char tree[65], char pack[65])
{
	rix_repo *r = open_repo(dir, NULL);
	MUST(rix_backend_list(rix_repo_backend(r), RIX_FILE_SNAPSHOT, name_of, snap));
	rix_id sid;
	MUST(rix_id_from_hex(&sid, snap, 64));
	uint8_t *json;
	size_t n;
	MUST(rix_repo_read_file(&json, &n, r, RIX_FILE_SNAPSHOT, &sid));
	const char *t = strstr((const char *)json, "\"tree\":\"");
	assert_non_null(t);
	memcpy(tree, t + 8, 64);
	tree[64] = '\0';
	rix_free(json);
	rix_id tid;
	MUST(rix_id_from_hex(&tid, tree, 64));
	MUST(rix_repo_load_index(NULL, r, NULL, NULL));
	rix_packed_blob pb;
	MUST(rix_master_index_lookup(&pb, rix_repo_master_index(r), RIX_BLOB_TREE, &tid));
	rix_id_to_hex(pack, &pb.pack_id);
	rix_repo_free(r);
}

struct msgs {
	char all[16384];
	size_t n;
};

static void on_msg(void *arg, bool is_error, const char *msg)
{
	struct msgs *m = arg;
	if (!is_error)
		return;
	int k = snprintf(m->all + m->n, sizeof(m->all) - m->n, "%s\n", msg);
	if (k > 0 && (size_t)k < sizeof(m->all) - m->n)
		m->n += (size_t)k;
}

/*
 * restic check must fail (pass when ok), its output naming restic_want (may be NULL); rix_repo_check
 * too, an error naming want. restic retries a missing file for about 45 s before it gives up:
 * it runs for at most 8 s (then its output must say what it found, before the retries).
 * The report.
 */
static rix_check_report both_check(const char *dir, bool ok, const char *want, const char *restic_want)
{
	char *out = NULL;
	size_t on;
	int rrc = rix_test_run(&out, &on, "RESTIC_PASSWORD='%s' timeout 8 restic --no-cache -r '%s' check 2>&1", PW, dir);
	if ((rrc == 0) != ok || (rrc == 124 && restic_want == NULL))
		fail_msg("restic check exited %d, want %s: %s", rrc, ok ? "0" : "an error", out);
	if (restic_want != NULL && strstr(out, restic_want) == NULL)
		fail_msg("restic check's output does not name %s: %s", restic_want, out);
	free(out);
	rix_repo *r = open_repo(dir, NULL);
	static struct msgs m;
	m.n = 0;
	m.all[0] = '\0';
	rix_check_options co = RIX_CHECK_OPTIONS_INIT;
	co.msg = on_msg;
	co.payload = &m;
	rix_check_report rep;
	int rc = rix_repo_check(&rep, r, &co);
	rix_repo_free(r);
	if (rc != (ok ? 0 : RIX_ECORRUPT))
		fail_msg("rix check: %d (%s), want %s; messages:\n%s", rc, rix_error_last(), ok ? "0" : "RIX_ECORRUPT",
			 m.all);
	if (want != NULL && strstr(m.all, want) == NULL)
		fail_msg("rix check's messages do not name %s:\n%s", want, m.all);
	size_t sum = rep.damaged_index_files + rep.missing_packs + rep.header_mismatches + rep.damaged_packs +
		     rep.damaged_blobs + rep.damaged_snapshots + rep.damaged_trees + rep.missing_blobs +
		     rep.unindexed_blobs;
	assert_int_equal(rep.errors, sum);
	return rep;
}

/* `rix --json check`: exit 1, an error line naming want (stderr), the summary with num_errors (stdout). */
static void cli_json(const char *dir, size_t errors, const char *want)
{
	char *out = NULL;
	size_t n;
	int rc = rix_test_run(&out, &n, "RIX_PASSWORD='%s' '%s' -r '%s' --json check 2>&1", PW, RIX_CLI_PATH, dir);
	assert_int_equal(rc, errors ? 1 : 0);
	char sum[100];
	snprintf(sum, sizeof(sum), "{\"message_type\":\"summary\",\"num_errors\":%zu,", errors);
	if (strstr(out, sum) == NULL)
		fail_msg("no %s in:\n%s", sum, out);
	if (want != NULL && (strstr(out, "{\"message_type\":\"error\",\"message\":") == NULL || strstr(out, want) == NULL))
		fail_msg("no error line naming %s in:\n%s", want, out);
	free(out);
}

static void test_pristine(void **state)
{
	(void)state;
	char *dir = copy_repo();
	rix_check_report rep = both_check(dir, true, NULL, NULL);
	assert_int_equal(rep.snapshots, 1);
	assert_true(rep.trees >= 3); /* the backed-up folder's path, sub, deeper */
	assert_int_equal(rep.errors, 0);
	cli_json(dir, 0, NULL);
	/* --read-data-subset: all of 1/1 reads every pack; 5% and 1K at least one; bad ones refused. */
	char *out = NULL;
	size_t n;
	char want[64];
	snprintf(want, sizeof(want), "\"packs\":%zu,", rep.packs);
	const char *ok[] = { "1/1", "5%", "1K", "2/3" };
	for (size_t i = 0; i < 4; i++) {
		assert_int_equal(rix_test_run(&out, &n, "RIX_PASSWORD='%s' '%s' -r '%s' --json check --read-data-subset %s",
					      PW, RIX_CLI_PATH, dir, ok[i]),
				 0);
		assert_non_null(strstr(out, want));
		if (i == 0) {
			snprintf(want, sizeof(want), "\"packs_read\":%zu,", rep.packs);
			assert_non_null(strstr(out, want));
			snprintf(want, sizeof(want), "\"packs\":%zu,", rep.packs);
		}
		free(out);
	}
	const char *bad[] = { "0/2", "3/2", "1/257", "0%", "101%", "x", "5Q" };
	for (size_t i = 0; i < 7; i++) {
		assert_int_equal(rix_test_run(&out, &n, "RIX_PASSWORD='%s' '%s' -r '%s' check --read-data-subset %s 2>&1",
					      PW, RIX_CLI_PATH, dir, bad[i]),
				 1);
		assert_non_null(strstr(out, "--read-data-subset"));
		free(out);
	}
	rix_test_free_dir(dir);
}

static void test_snapshot_truncated(void **state)
{
	(void)state;
	char *dir = copy_repo();
	char snap[65], tree[65], pack[65], path[700];
	facts(dir, snap, tree, pack);
	snprintf(path, sizeof(path), "%s/snapshots/%s", dir, snap);
	chmod(path, 0600);
	assert_int_equal(truncate(path, 20), 0);
	rix_check_report rep = both_check(dir, false, snap, NULL);
	assert_int_equal(rep.damaged_snapshots, 1);
	cli_json(dir, rep.errors, snap);
	rix_test_free_dir(dir);
}

static void test_snapshot_no_tree(void **state)
{
	(void)state;
	char *dir = copy_repo();
	char snap[65], tree[65], pack[65];
	facts(dir, snap, tree, pack);
	rix_repo *r = open_repo(dir, NULL);
	rix_id nowhere;
	rix_sha256(&nowhere, "no such tree", 12);
	char nh[65], json[400];
	rix_id_to_hex(nh, &nowhere);
	snprintf(json, sizeof(json),
		 "{\"time\":\"2024-05-06T07:08:09.5Z\",\"tree\":\"%s\",\"paths\":[\"/data\"],\"hostname\":\"h\","
		 "\"username\":\"u\"}",
		 nh);
	MUST(rix_repo_write_file(NULL, r, RIX_FILE_SNAPSHOT, json, strlen(json)));
	rix_repo_free(r);
	rix_check_report rep = both_check(dir, false, nh, NULL);
	assert_int_equal(rep.missing_blobs, 1);
	assert_int_equal(rep.errors, 1);
	rix_test_free_dir(dir);
}

static void test_index_deleted(void **state)
{
	(void)state;
	char *dir = copy_repo();
	char snap[65], tree[65], pack[65], idx[65];
	facts(dir, snap, tree, pack);
	rix_repo *r = open_repo(dir, NULL);
	MUST(rix_backend_list(rix_repo_backend(r), RIX_FILE_INDEX, name_of, idx));
	MUST(rix_backend_remove(rix_repo_backend(r), RIX_FILE_INDEX, idx));
	rix_repo_free(r);
	rix_check_report rep = both_check(dir, false, tree, NULL);
	assert_true(rep.missing_blobs >= 1);
	assert_true(rep.orphaned_packs >= 1);
	cli_json(dir, rep.errors, tree);
	char *out = NULL;
	size_t n;
	assert_int_equal(rix_test_run(&out, &n, "RIX_PASSWORD='%s' '%s' -r '%s' --json check 2>/dev/null", PW,
				      RIX_CLI_PATH, dir),
			 1);
	assert_non_null(strstr(out, "\"suggest_repair_index\":true,\"suggest_prune\":false"));
	free(out);
	rix_test_free_dir(dir);
}

static int first_data(void *arg, const rix_packed_blob *pb)
{
	if (pb->type != RIX_BLOB_DATA)
		return 0;
	*(rix_id *)arg = pb->id;
	return 1;
}

static void test_blob_unindexed(void **state)
{
	(void)state;
	char *dir = copy_repo();
	rix_repo *r = open_repo(dir, NULL);
	MUST(rix_repo_load_index(NULL, r, NULL, NULL));
	rix_id d;
	assert_int_equal(rix_master_index_foreach(rix_repo_master_index(r), first_data, &d), 1);
	rix_repo_free(r);
	assert_int_equal(drop_from_index(dir, &d), 1);
	char dh[65];
	rix_id_to_hex(dh, &d);
	rix_check_report rep = both_check(dir, false, dh, NULL);
	assert_int_equal(rep.unindexed_blobs, 1);
	assert_true(rep.missing_blobs >= 1);
	rix_test_free_dir(dir);
}

static void test_tree_pack_damaged(void **state)
{
	(void)state;
	char *dir = copy_repo();
	char snap[65], tree[65], pack[65], path[800];
	facts(dir, snap, tree, pack);
	snprintf(path, sizeof(path), "%s/data/%.2s/%s", dir, pack, pack);
	for (long at = 40; at < 80; at += 8) /* in the first blob (the root tree's pack holds trees only) */
		flip_byte(path, at);
	rix_check_report rep = both_check(dir, false, pack, NULL);
	assert_true(rep.damaged_trees + rep.missing_blobs >= 1);
	rix_test_free_dir(dir);
}

static void test_tree_pack_deleted(void **state)
{
	(void)state;
	char *dir = copy_repo();
	char snap[65], tree[65], pack[65], path[800];
	facts(dir, snap, tree, pack);
	snprintf(path, sizeof(path), "%s/data/%.2s/%s", dir, pack, pack);
	assert_int_equal(unlink(path), 0);
	char short_pack[9];
	memcpy(short_pack, pack, 8);
	short_pack[8] = '\0';
	rix_check_report rep = both_check(dir, false, pack, short_pack);
	assert_int_equal(rep.missing_packs, 1);
	assert_true(rep.missing_blobs >= 1);
	rix_test_free_dir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pristine),
		cmocka_unit_test(test_snapshot_truncated),
		cmocka_unit_test(test_snapshot_no_tree),
		cmocka_unit_test(test_index_deleted),
		cmocka_unit_test(test_blob_unindexed),
		cmocka_unit_test(test_tree_pack_damaged),
		cmocka_unit_test(test_tree_pack_deleted),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
