/*
 * fuzz_keyfile — opening key files.
 *
 * The first input byte picks the mode:
 *   even: the rest is a whole key file, opened with the password "pw" (the outer JSON, the
 *         scrypt parameter checks, base64, the MAC);
 *   odd:  the rest is the *inner* master-key JSON: the target seals it under scrypt("pw",
 *         fixed salt, N=16, r=1, p=1) into a valid key file first, so the MAC holds and the
 *         parser behind it gets the mutations.
 * Properties: 0 (a key that seals and opens), or RIX_EAUTH / RIX_ECORRUPT / RIX_EINVAL /
 * RIX_ENOMEM with *out NULL and a message. The fuzz build caps scrypt memory at 1 MiB
 * (RIX_SCRYPT_MAX_MEMORY) so that inputs with valid-looking parameters stay fast.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "rix/crypto.h"
#include "rix/error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const uint8_t salt[16] = "rix fuzz salt 16";

static void check(int rc, rix_key *key)
{
	if (rc != 0) {
		if (key != NULL || rix_error_last()[0] == '\0')
			abort();
		if (rc != RIX_EAUTH && rc != RIX_ECORRUPT && rc != RIX_EINVAL && rc != RIX_ENOMEM)
			abort();
		return;
	}
	uint8_t msg[8] = "fuzzing", sealed[8 + RIX_CRYPTO_OVERHEAD], out[8];
	if (rix_crypto_seal(key, msg, sizeof(msg), sealed) != 0 ||
	    rix_crypto_open(key, sealed, sizeof(sealed), out) != 0 || memcmp(out, msg, sizeof(msg)) != 0)
		abort();
	rix_key_free(key);
}

/* A key file whose sealed data is inner[0..n), password "pw". Returns malloc'd text. */
static char *wrap(const uint8_t *inner, size_t n, size_t *len)
{
	static rix_key *user;
	if (user == NULL) {
		uint8_t d[64];
		if (sodium_init() < 0 ||
		    crypto_pwhash_scryptsalsa208sha256_ll((const uint8_t *)"pw", 2, salt, sizeof(salt), 16, 1, 1, d, 64) != 0 ||
		    rix_key_from_bytes(&user, d, d + 32, d + 48) != 0)
			abort();
	}
	uint8_t *sealed = malloc(n + RIX_CRYPTO_OVERHEAD);
	if (rix_crypto_seal(user, inner, n, sealed) != 0)
		abort();
	size_t b64 = sodium_base64_ENCODED_LEN(n + RIX_CRYPTO_OVERHEAD, sodium_base64_VARIANT_ORIGINAL);
	char *data = malloc(b64), saltb[64];
	sodium_bin2base64(data, b64, sealed, n + RIX_CRYPTO_OVERHEAD, sodium_base64_VARIANT_ORIGINAL);
	sodium_bin2base64(saltb, sizeof(saltb), salt, sizeof(salt), sodium_base64_VARIANT_ORIGINAL);
	size_t cap = b64 + 256;
	char *text = malloc(cap);
	*len = (size_t)snprintf(text, cap, "{\"kdf\":\"scrypt\",\"N\":16,\"r\":1,\"p\":1,\"salt\":\"%s\",\"data\":\"%s\"}",
				saltb, data);
	free(sealed);
	free(data);
	return text;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	rix_key *key = (rix_key *)1;
	int rc;
	if ((data[0] & 1) == 0) {
		rc = rix_key_open_file(&key, (const char *)data + 1, size - 1, "pw", 2);
		check(rc, key);
		return 0;
	}
	size_t len;
	char *text = wrap(data + 1, size - 1, &len);
	rc = rix_key_open_file(&key, text, len, "pw", 2);
	check(rc, key);
	free(text);
	return 0;
}
