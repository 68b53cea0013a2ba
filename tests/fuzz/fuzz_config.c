/*
 * tests/fuzz/fuzz_config.c — libFuzzer target for the repository config (repo/config.c): the
 * input is the config JSON; see fuzz_config_checks.h for the properties.
 */
#include <stdio.h>
#include <stdlib.h>

#include "fuzz_config_checks.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *why = rix_fuzz_check_config(data, size);
	if (why != NULL) {
		fprintf(stderr, "fuzz_config: %s (%s)\n", why, rix_error_last());
		abort();
	}
	return 0;
}
