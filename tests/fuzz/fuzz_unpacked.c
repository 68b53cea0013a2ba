/*
 * tests/fuzz/fuzz_unpacked.c — libFuzzer target for pack/: see fuzz_pack_checks.h for how the input
 * is read (the target seals it with a fixed key, so the code after the MAC check is fuzzed).
 */
#include <stdio.h>
#include <stdlib.h>

#include "fuzz_pack_checks.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *why = rix_fuzz_check_unpacked(data, size);
	if (why != NULL) {
		fprintf(stderr, "fuzz_unpacked: %s (%s)\n", why, rix_error_last());
		abort();
	}
	return 0;
}
