/*
 * tests/fuzz/fuzz_tree.c — libFuzzer target for the tree blob decoder (backup/tree_decode.c): the input
 * is a tree blob's plaintext; see fuzz_tree_checks.h for the properties.
 */
#include <stdio.h>
#include <stdlib.h>

#include "fuzz_tree_checks.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *why = rix_fuzz_check_tree(data, size);
	if (why != NULL) {
		fprintf(stderr, "fuzz_tree: %s (%s)\n", why, rix_error_last());
		abort();
	}
	return 0;
}
