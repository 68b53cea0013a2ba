/*
 * tests/fuzz/fuzz_index_roundtrip.c — libFuzzer target: whatever decodes must survive
 * encode -> decode -> encode with equal counts, the same blobs and byte-identical encodings.
 */
#include <stdio.h>
#include <stdlib.h>

#include "fuzz_checks.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *why = rix_fuzz_check_roundtrip(data, size);
	if (why != NULL) {
		fprintf(stderr, "fuzz_index_roundtrip: %s (%s)\n", why, rix_error_last());
		abort();
	}
	return 0;
}
