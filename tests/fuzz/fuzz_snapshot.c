/*
 * tests/fuzz/fuzz_snapshot.c — libFuzzer target for snapshot JSON (backup/snapshot.c): the
 * input is the snapshot file's plaintext; see fuzz_snapshot_checks.h for the properties.
 */
#include <stdio.h>
#include <stdlib.h>

#include "fuzz_snapshot_checks.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *why = rix_fuzz_check_snapshot(data, size);
	if (why != NULL) {
		fprintf(stderr, "fuzz_snapshot: %s (%s)\n", why, rix_error_last());
		abort();
	}
	return 0;
}
