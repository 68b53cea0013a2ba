/*
 * tests/test_readme_example.c — README's "The repository, from C" example, compiled as README
 * has it (tests/readme_example.awk cuts it out of README.md at build time; its path
 * "/srv/backup" becomes the test's) against the stable API alone, and run: with the right
 * password it saves, flushes and loads a blob back; with a wrong one rix_repo_open fails with
 * RIX_EAUTH and the example returns 1 having freed what it made (no crash, no leak under ASan).
 */
#undef RIX_ADVANCED /* the example uses the stable API, as a user would */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "rix/rix.h"
#include "repo_fixture.h"
#include "testutil.h"

#undef fail /* cmocka's: the example has a fail() of its own */
#include "readme_example_top.inc"

/* The example's statements, with what it leaves to its reader: the path, the password, a buffer. */
static int example(const char *path, const char *pw, const void *buf, size_t n)
{
#include "readme_example_body.inc"
	return 0;
}

static void test_readme_example(void **state)
{
	(void)state;
	char *dir = rix_test_new_dir("rix-readme");
	rix_repo_free(init_repo(dir, 2));
	static const char text[] = "a blob the README's example stores";
	assert_int_equal(example(dir, PW, text, sizeof(text)), 0);
	rix_repo *r = open_repo(dir, NULL);
	MUST(rix_repo_load_index(NULL, r, NULL, NULL));
	rix_id id;
	rix_sha256(&id, text, sizeof(text));
	uint8_t *data;
	size_t len;
	MUST(rix_repo_load_blob(&data, &len, r, RIX_BLOB_DATA, &id)); /* it is stored */
	assert_int_equal(len, sizeof(text));
	assert_memory_equal(data, text, len);
	rix_free(data);
	rix_repo_free(r);
	/* A wrong password: the open fails, the example says so and returns 1. */
	rix_error_clear();
	assert_int_equal(example(dir, "not the password", text, sizeof(text)), 1);
	assert_int_equal(rix_error_last_code(), RIX_EAUTH);
	/* No repository there: the same, with the backend's error. */
	char none[600];
	snprintf(none, sizeof(none), "%s/none", dir);
	assert_int_equal(example(none, PW, text, sizeof(text)), 1);
	assert_int_equal(rix_error_last_code(), RIX_ENOTFOUND);
	rix_test_free_dir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_readme_example),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
