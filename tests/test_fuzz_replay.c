/*
 * tests/test_fuzz_replay.c — replays the minimized fuzz corpora (tests/fuzz/corpus/<target>/)
 * through the same checks the fuzz targets make (tests/fuzz/fuzz_checks.h), so every input the
 * fuzzers found interesting stays a regression test in the ordinary run.
 *
 * The corpus directory is found next to RIX_TEST_DATA (tests/data -> tests/fuzz/corpus).
 * pack/ targets: fuzz/fuzz_pack_checks.h; the config target: fuzz/fuzz_config_checks.h; the
 * snapshot target: fuzz/fuzz_snapshot_checks.h; the tree blob target: fuzz/fuzz_tree_checks.h;
 * the restorer on hostile trees: fuzz/fuzz_restore_checks.h (a repository and a restore per file).
 */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "fuzz/fuzz_checks.h"
#include "fuzz/fuzz_pack_checks.h"
#include "fuzz/fuzz_config_checks.h"
#include "fuzz/fuzz_snapshot_checks.h"
#include "fuzz/fuzz_tree_checks.h"
#include "fuzz/fuzz_restore_checks.h"

typedef const char *(*check_fn)(const uint8_t *data, size_t size);

/* Runs fn over every file of corpus/<target>; returns the number of files. */
static size_t replay(const char *target, check_fn fn)
{
	const char *data = getenv("RIX_TEST_DATA");
	char dir[4096], path[8192];
	snprintf(dir, sizeof(dir), "%s/../fuzz/corpus/%s", data ? data : "tests/data", target);
	DIR *d = opendir(dir);
	if (d == NULL)
		fail_msg("cannot open corpus %s", dir);
	size_t files = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		FILE *f = fopen(path, "rb");
		assert_non_null(f);
		fseek(f, 0, SEEK_END);
		long n = ftell(f);
		fseek(f, 0, SEEK_SET);
		/* Exactly n bytes, as libFuzzer passes them, so ASan sees overreads. */
		uint8_t *buf = malloc(n > 0 ? (size_t)n : 1);
		assert_non_null(buf);
		assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
		fclose(f);
		const char *why = fn(buf, (size_t)n);
		if (why != NULL)
			fail_msg("%s: %s (%s)", path, why, rix_error_last());
		free(buf);
		files++;
	}
	closedir(d);
	return files;
}

static void test_replay_decode(void **state)
{
	(void)state;
	assert_true(replay("fuzz_index_decode", rix_fuzz_check_decode) > 0);
	/* The decode corpus through the round trip too: most of it does not decode, the rest must
	 * round-trip. */
	assert_true(replay("fuzz_index_decode", rix_fuzz_check_roundtrip) > 0);
}

/* Both index corpora through the streaming decoder, cut every which way, against the whole-text
 * one (fuzz_checks.h: rix_fuzz_check_stream). */
static void test_replay_stream(void **state)
{
	(void)state;
	assert_true(replay("fuzz_index_decode", rix_fuzz_check_stream) > 0);
	assert_true(replay("fuzz_index_roundtrip", rix_fuzz_check_stream) > 0);
}

static void test_replay_roundtrip(void **state)
{
	(void)state;
	assert_true(replay("fuzz_index_roundtrip", rix_fuzz_check_roundtrip) > 0);
	assert_true(replay("fuzz_index_roundtrip", rix_fuzz_check_decode) > 0);
}

static void test_replay_pack(void **state)
{
	(void)state;
	assert_true(replay("fuzz_pack_header", rix_fuzz_check_pack) > 0);
	assert_true(replay("fuzz_unpacked", rix_fuzz_check_unpacked) > 0);
}

static void test_replay_config(void **state)
{
	(void)state;
	assert_true(replay("fuzz_config", rix_fuzz_check_config) > 0);
}

static void test_replay_snapshot(void **state)
{
	(void)state;
	assert_true(replay("fuzz_snapshot", rix_fuzz_check_snapshot) > 0);
}

static void test_replay_tree(void **state)
{
	(void)state;
	assert_true(replay("fuzz_tree", rix_fuzz_check_tree) > 0);
}

static void test_replay_restore(void **state)
{
	(void)state;
	assert_true(replay("fuzz_restore", rix_fuzz_check_restore) > 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_replay_decode),
		cmocka_unit_test(test_replay_roundtrip),
		cmocka_unit_test(test_replay_stream),
		cmocka_unit_test(test_replay_pack),
		cmocka_unit_test(test_replay_config),
		cmocka_unit_test(test_replay_snapshot),
		cmocka_unit_test(test_replay_tree),
		cmocka_unit_test(test_replay_restore),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
