/*
 * tests/fuzz/fuzz_index_decode.c — libFuzzer target: rix_index_decode on arbitrary bytes, and
 * the streaming decoder (rix_index_stream_decode) against the whole-text one on them.
 *
 * libFuzzer hands over a heap buffer of exactly `size` bytes with no NUL after it, so
 * AddressSanitizer reports any read past the end.
 */
#include <stdio.h>
#include <stdlib.h>

#include "fuzz_checks.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *why = rix_fuzz_check_decode(data, size);
	if (why == NULL)
		why = rix_fuzz_check_stream_max(data, size, 128);
	if (why != NULL) {
		fprintf(stderr, "fuzz_index_decode: %s (%s)\n", why, rix_error_last());
		abort();
	}
	return 0;
}
