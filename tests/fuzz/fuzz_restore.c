/*
 * tests/fuzz/fuzz_restore.c — libFuzzer target for the restorer (backup/restorer.c) given hostile
 * trees: the input is a root tree blob's bytes and parts it may name (subtrees, content), see
 * fuzz_restore_checks.h for the format and the property (nothing written outside the target).
 */
#include <stdio.h>
#include <stdlib.h>

#include "fuzz_restore_checks.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *why = rix_fuzz_check_restore(data, size);
	if (why != NULL) {
		fprintf(stderr, "fuzz_restore: %s (%s)\n", why, rix_error_last());
		abort();
	}
	return 0;
}
