/*
 * tests/test_error.c — the per-thread error message (common/error.c): a message made from the
 * last one (rix_error_set(code, "...: %s", rix_error_last()), as callers that add context do)
 * keeps the old text whole, and a long one is cut at the buffer, NUL-terminated.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "rix/error.h"

static void test_message_from_itself(void **state)
{
	(void)state;
	assert_int_equal(rix_error_set(RIX_EIO, "rest: read %s: refused", "http://h/data/ab"), RIX_EIO);
	assert_int_equal(rix_error_set(RIX_ECORRUPT, "check: %s (pack %d)", rix_error_last(), 7), RIX_ECORRUPT);
	assert_string_equal(rix_error_last(), "check: rest: read http://h/data/ab: refused (pack 7)");
	assert_int_equal(rix_error_last_code(), RIX_ECORRUPT);
	/* the same text, again and again: each time one prefix more, never garbled */
	for (int i = 0; i < 200; i++)
		(void)rix_error_set(RIX_EIO, "x%s", rix_error_last());
	const char *m = rix_error_last();
	size_t n = strlen(m);
	assert_true(n > 200 && n < 1024);
	for (size_t i = 0; i < 200; i++)
		assert_int_equal(m[i], 'x');
	assert_non_null(strstr(m, "check: rest: read"));
	rix_error_clear();
	assert_string_equal(rix_error_last(), "");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_message_from_itself),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
