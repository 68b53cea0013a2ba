/*
 * tests/test_check_faults.c — rix_repo_check under backend faults (tests/faultbackend.h): a
 * repository with two snapshots over nested trees; for every n, the n-th backend operation of
 * the check (with and without read_data) fails, once. Whenever a fault was injected the check
 * must fail, never pass, crash or leak; once n is past the check's last operation it passes.
 * How it fails tells damage from a backend that failed: a short read (a file that ends early)
 * is RIX_ECORRUPT with the fault counted and reported as an error; RIX_EIO (a server gone, a
 * failing disk; a listing cut off) stops the check with RIX_EIO, "check stopped: ..." naming
 * the operation, and nothing counted or reported as damage. Loading the index (lenient) stops
 * at the first RIX_EIO too: no index file is read after it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "rix/rix.h"
#include "faultbackend.h"
#include "repo_fixture.h"
#include "testutil.h"

static void put_snapshot(rix_repo *r, const rix_id *tree, int sec)
{
	char hex[65], json[400];
	rix_id_to_hex(hex, tree);
	snprintf(json, sizeof(json),
		 "{\"time\":\"2024-05-06T07:08:%02d.5Z\",\"tree\":\"%s\",\"paths\":[\"/data\"],\"hostname\":\"h\","
		 "\"username\":\"u\"}",
		 sec, hex);
	MUST(rix_repo_write_file(NULL, r, RIX_FILE_SNAPSHOT, json, strlen(json)));
}

/* Snapshot 1 -> A: file a (d0 d1), dir sub -> S: file s (d2); snapshot 2 -> B: dir sub -> S. */
static void make_repo(const char *dir)
{
	rix_repo *r = init_repo(dir, 2);
	rix_id d[3], a, b, s;
	char h[3][65], sh[65], json[1000];
	for (int i = 0; i < 3; i++) {
		char text[64];
		snprintf(text, sizeof(text), "data blob %d of the fault test", i);
		MUST(rix_repo_save_blob(&d[i], NULL, r, RIX_BLOB_DATA, text, strlen(text)));
		rix_id_to_hex(h[i], &d[i]);
	}
	snprintf(json, sizeof(json), "{\"nodes\":[{\"name\":\"s\",\"type\":\"file\",\"size\":30,\"content\":[\"%s\"]}]}\n",
		 h[2]);
	MUST(rix_repo_save_blob(&s, NULL, r, RIX_BLOB_TREE, json, strlen(json)));
	rix_id_to_hex(sh, &s);
	snprintf(json, sizeof(json),
		 "{\"nodes\":[{\"name\":\"a\",\"type\":\"file\",\"size\":60,\"content\":[\"%s\",\"%s\"]},"
		 "{\"name\":\"sub\",\"type\":\"dir\",\"subtree\":\"%s\"}]}\n",
		 h[0], h[1], sh);
	MUST(rix_repo_save_blob(&a, NULL, r, RIX_BLOB_TREE, json, strlen(json)));
	snprintf(json, sizeof(json), "{\"nodes\":[{\"name\":\"sub\",\"type\":\"dir\",\"subtree\":\"%s\"}]}\n", sh);
	MUST(rix_repo_save_blob(&b, NULL, r, RIX_BLOB_TREE, json, strlen(json)));
	MUST(rix_repo_flush(r));
	put_snapshot(r, &a, 1);
	put_snapshot(r, &b, 2);
	rix_repo_free(r);
}

static void count_error(void *payload, bool is_error, const char *msg)
{
	(void)msg;
	*(int *)payload += is_error;
}

/* One check with the n-th operation failing; 1 when a fault was injected. */
static int check_with_fault(const char *dir, long n, rix_test_fault_effect effect, bool read_data)
{
	rix_test_fault f;
	rix_test_fault_init(&f);
	rix_backend *inner, *b;
	MUST(rix_backend_local_open(&inner, dir, 0));
	MUST(rix_test_fault_backend(&b, inner, &f));
	rix_repo *r;
	MUST(rix_repo_open(&r, b, PW, strlen(PW), &fast));
	rix_test_fault_arm(&f, &(rix_test_fault_plan){ RIX_TEST_FAULT_ANY, n, RIX_TEST_FAULT_ONCE, effect });
	rix_check_report rep;
	int reported = 0;
	rix_check_options co = RIX_CHECK_OPTIONS_INIT;
	co.read_data = read_data;
	co.msg = count_error;
	co.payload = &reported;
	rix_error_clear();
	int rc = rix_repo_check(&rep, r, &co);
	char msg[512];
	snprintf(msg, sizeof(msg), "%s", rix_error_last());
	long injected = rix_test_fault_injected(&f);
	rix_repo_free(r);
	rix_test_fault_destroy(&f);
	if (injected == 0) {
		if (rc != 0)
			fail_msg("no fault at %ld, and the check failed: %d (%s)", n, rc, rix_error_last());
		assert_int_equal(rep.snapshots, 2);
		assert_int_equal(rep.trees, 3);
		assert_int_equal(rep.errors, 0);
		return 0;
	}
	const char *what = rix_test_fault_effect_name(effect);
	if (rc == 0)
		fail_msg("%s at operation %ld: the check passed", what, n);
	if (rc == RIX_ECORRUPT) {
		if (effect == RIX_TEST_FAULT_EIO)
			fail_msg("EIO at operation %ld%s: reported as damage (%zu errors: %s)", n, read_data ? " (read_data)" : "",
				 rep.errors, msg);
		assert_true(rep.errors > 0);
		assert_int_equal(reported, (int)rep.errors);
	} else {
		/* stopped: the backend failed; nothing counted or reported as damage, the cause named once */
		if (rc != RIX_EIO)
			fail_msg("%s at operation %ld: %d (%s)", what, n, rc, msg);
		if (rep.errors != 0 || reported != 0 || rep.damaged_packs != 0 || rep.damaged_index_files != 0 ||
		    rep.damaged_snapshots != 0 || rep.damaged_trees != 0)
			fail_msg("%s at operation %ld%s: stopped, and %zu errors counted, %d reported", what, n,
				 read_data ? " (read_data)" : "", rep.errors, reported);
		if (strncmp(msg, "check stopped: ", 15) != 0 || strstr(msg, "injected") == NULL)
			fail_msg("%s at operation %ld: message \"%s\"", what, n, msg);
	}
	return 1;
}

static void test_check_faults(void **state)
{
	(void)state;
	char *dir = rix_test_new_dir("rix-check-faults");
	make_repo(dir);
	const rix_test_fault_effect effects[] = { RIX_TEST_FAULT_EIO, RIX_TEST_FAULT_SHORT };
	for (int read_data = 0; read_data < 2; read_data++)
		for (size_t e = 0; e < 2; e++) {
			long n = 1;
			while (check_with_fault(dir, n, effects[e], read_data != 0))
				n++;
			assert_true(n > 5); /* list and read the index, the snapshots, the trees, the packs */
		}
	rix_test_free_dir(dir);
}

static void count_index_error(void *payload, const char *name, int code, const char *msg)
{
	(void)name;
	(void)msg;
	assert_int_equal(code, RIX_EIO);
	++*(int *)payload;
}

/* Three index files, one loader thread, every read failing with EIO from the first: the load
 * reads one file, reports it, and returns RIX_EIO naming it (lenient: no strict option). */
static void test_index_load_stops(void **state)
{
	(void)state;
	char *dir = rix_test_new_dir("rix-load-stops");
	rix_repo *r = init_repo(dir, 2);
	for (int i = 0; i < 3; i++) {
		char text[64];
		snprintf(text, sizeof(text), "blob %d of its own index file", i);
		MUST(rix_repo_save_blob(NULL, NULL, r, RIX_BLOB_DATA, text, strlen(text)));
		MUST(rix_repo_flush(r));
	}
	assert_int_equal(count_files(r, RIX_FILE_INDEX), 3);
	rix_repo_free(r);
	rix_test_fault f;
	rix_test_fault_init(&f);
	rix_backend *inner, *b;
	MUST(rix_backend_local_open(&inner, dir, 0));
	MUST(rix_test_fault_backend(&b, inner, &f));
	rix_repo_options o = fast;
	o.workers = 1;
	MUST(rix_repo_open(&r, b, PW, strlen(PW), &o));
	rix_test_fault_arm(&f, &(rix_test_fault_plan){ RIX_TEST_FAULT_READ, 1, RIX_TEST_FAULT_FROM, RIX_TEST_FAULT_EIO });
	int reported = 0;
	assert_int_equal(rix_repo_load_index(NULL, r, count_index_error, &reported), RIX_EIO);
	assert_non_null(strstr(rix_error_last(), "injected"));
	assert_int_equal(reported, 1);
	assert_int_equal(rix_test_fault_count(&f, RIX_TEST_FAULT_READ), 1);
	rix_repo_free(r);
	rix_test_fault_destroy(&f);
	rix_test_free_dir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_check_faults),
		cmocka_unit_test(test_index_load_stops),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
