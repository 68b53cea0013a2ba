/*
 * tests/fuzz/fuzz_config_checks.h — the property of the fuzz_config target, shared with
 * tests/test_fuzz_replay.c. Header-only, static inline; returns NULL when the property holds,
 * or a description of the violation.
 *
 * The input is the config plaintext (any bytes).
 *   - rix_config_parse either succeeds with version 1 or 2 and a polynomial that
 *     rix_chunker_polynomial_check accepts, or fails with RIX_ECORRUPT, a "config: " message
 *     and *out untouched;
 *   - on success, encode gives restic's 123 bytes, which parse back to the same config and
 *     encode again to the same bytes;
 *   - the same bytes sealed with a fixed key (so the MAC holds) and given to rix_config_open
 *     give the same answer as parsing them (unless they start with 0x02, the compressed
 *     marker, which open refuses first).
 */
#ifndef RIX_FUZZ_CONFIG_CHECKS_H
#define RIX_FUZZ_CONFIG_CHECKS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rix/rix.h"

static inline const rix_key *rix_fuzz_config_key(void)
{
	static rix_key *key;
	if (key == NULL) {
		uint8_t raw[64];
		for (int i = 0; i < 64; i++)
			raw[i] = (uint8_t)(i * 13 + 5);
		if (rix_key_from_bytes(&key, raw, raw + 32, raw + 48) != 0)
			abort();
	}
	return key;
}

static inline bool rix_fuzz_config_equal(const rix_config *a, const rix_config *b)
{
	return a->version == b->version && memcmp(a->id.b, b->id.b, RIX_ID_SIZE) == 0 &&
	       a->chunker_polynomial == b->chunker_polynomial;
}

static inline bool rix_fuzz_config_untouched(const rix_config *c)
{
	const unsigned char *p = (const unsigned char *)c;
	for (size_t i = 0; i < sizeof(*c); i++)
		if (p[i] != 0xAA)
			return false;
	return true;
}

static inline const char *rix_fuzz_check_config(const uint8_t *data, size_t size)
{
	rix_config c;
	memset(&c, 0xAA, sizeof(c));
	rix_error_clear();
	int rc = rix_config_parse(&c, (const char *)data, size);
	if (rc != 0) {
		if (rc != RIX_ECORRUPT)
			return "parse failed with a code other than RIX_ECORRUPT";
		if (strncmp(rix_error_last(), "config: ", 8) != 0)
			return "parse failed without a config: message";
		if (!rix_fuzz_config_untouched(&c))
			return "parse failed but wrote *out";
	} else {
		if (c.version != 1 && c.version != 2)
			return "parse accepted a version other than 1 or 2";
		if (rix_chunker_polynomial_check(c.chunker_polynomial) != 0)
			return "parse accepted a polynomial the check refuses";
		char *e1 = NULL, *e2 = NULL;
		size_t n1 = 0, n2 = 0;
		rix_config back;
		memset(&back, 0, sizeof(back));
		const char *why = NULL;
		if (rix_config_encode(&e1, &n1, &c) != 0)
			why = "encode failed";
		else if (n1 != 123 || strlen(e1) != n1)
			why = "encoding is not 123 bytes and NUL";
		else if (rix_config_parse(&back, e1, n1) != 0)
			why = "the encoding does not parse";
		else if (!rix_fuzz_config_equal(&c, &back))
			why = "the encoding parses to another config";
		else if (rix_config_encode(&e2, &n2, &back) != 0 || n2 != n1 || memcmp(e1, e2, n1) != 0)
			why = "encoding twice gives other bytes";
		rix_free(e1);
		rix_free(e2);
		if (why != NULL)
			return why;
	}
	/* The stored form: sealed, then opened. */
	if (size > RIX_CONFIG_MAX_SIZE)
		return NULL;
	const rix_key *key = rix_fuzz_config_key();
	uint8_t *sealed = malloc(size + RIX_CRYPTO_OVERHEAD);
	if (sealed == NULL || rix_crypto_seal(key, data, size, sealed) != 0)
		abort();
	rix_config o;
	memset(&o, 0xAA, sizeof(o));
	int orc = rix_config_open(&o, key, sealed, size + RIX_CRYPTO_OVERHEAD);
	free(sealed);
	if (size > 0 && data[0] == 0x02) {
		if (orc != RIX_ECORRUPT || strstr(rix_error_last(), "compressed") == NULL || !rix_fuzz_config_untouched(&o))
			return "open took a compressed plaintext";
		return NULL;
	}
	if (orc != rc)
		return "open and parse disagree";
	if (rc == 0 && !rix_fuzz_config_equal(&o, &c))
		return "open and parse give other configs";
	if (rc != 0 && !rix_fuzz_config_untouched(&o))
		return "open failed but wrote *out";
	return NULL;
}

#endif
