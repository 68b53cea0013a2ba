/*
 * crypto/keyfile.c — opening restic key files.
 *
 * A key file (keys/<id>) is plain JSON:
 *   {"created": ..., "username": ..., "hostname": ..., "kdf": "scrypt",
 *    "N": 32768, "r": 8, "p": 4, "salt": "<base64, 64 bytes>", "data": "<base64>"}
 * scrypt(password, salt, N, r, p) gives 64 bytes, read as a key (encrypt 32 | mac k 16 |
 * mac r 16) that opens `data`; inside is the master key as JSON:
 *   {"mac": {"k": "<b64 16>", "r": "<b64 16>"}, "encrypt": "<b64 32>"}
 *
 * The scrypt parameters come from the file, so they are bounded before use (N a power of two,
 * memory 128 * N * r * p at most RIX_SCRYPT_MAX_MEMORY): a hostile file must not make us
 * allocate or compute without limit. Every secret (the derived key, the decrypted master-key
 * JSON, the decoded parts) lives in guarded memory and is wiped on every path; jansson's copies
 * of the master key's JSON (its tokens, the base64 strings) are wiped by the free that
 * common/jansson_alloc.c gives it. jansson allocates through rix's hook, and a failed
 * allocation there is RIX_ENOMEM, not "not JSON".
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "rix/alloc.h"

#include <jansson.h>
#include <sodium.h>

#include "rix/crypto.h"
#include "rix/error.h"
#include "crypto_internal.h"
#include "../common/jansson_alloc.h"

/* Decodes standard base64 (with padding) of exactly `want` bytes into out. */
static int b64_exact(const char *what, const char *b64, uint8_t *out, size_t want)
{
	size_t got = 0;
	if (b64 == NULL ||
	    sodium_base642bin(out, want, b64, strlen(b64), NULL, &got, NULL, sodium_base64_VARIANT_ORIGINAL) != 0 ||
	    got != want)
		return rix_error_set(RIX_ECORRUPT, "key file: %s is not base64 of %zu bytes", what, want);
	return 0;
}

static int get_param(json_t *root, const char *name, uint64_t *v)
{
	json_t *j = json_object_get(root, name);
	if (!json_is_integer(j) || json_integer_value(j) <= 0)
		return rix_error_set(RIX_ECORRUPT, "key file: \"%s\" is not a positive integer", name);
	*v = (uint64_t)json_integer_value(j);
	return 0;
}

/* Reads the master key from its decrypted JSON. */
static int master_from_json(rix_key **out, const uint8_t *plain, size_t n)
{
	json_error_t jerr;
	json_t *root;
	int rc = rix__jansson_load(&root, (const char *)plain, n, &jerr);
	/* jansson's message quotes the text near the error: a piece of the key; say where only. */
	int at = jerr.position;
	sodium_memzero(&jerr, sizeof(jerr));
	if (rc == RIX_ENOMEM)
		return rix_error_set(RIX_ENOMEM, "key file: out of memory reading the master key's JSON");
	if (rc != 0)
		return rix_error_set(RIX_ECORRUPT, "key file: master key is not JSON (error at byte %d)", at);
	uint8_t *parts = sodium_malloc(64); /* encrypt 32 | k 16 | r 16 */
	rc = parts == NULL ? rix_error_set(RIX_ENOMEM, "key file: out of guarded memory") : 0;
	json_t *mac = json_object_get(root, "mac");
	if (rc == 0)
		rc = b64_exact("master key \"encrypt\"", json_string_value(json_object_get(root, "encrypt")), parts, 32);
	if (rc == 0)
		rc = b64_exact("master key \"mac.k\"", json_string_value(json_object_get(mac, "k")), parts + 32, 16);
	if (rc == 0)
		rc = b64_exact("master key \"mac.r\"", json_string_value(json_object_get(mac, "r")), parts + 48, 16);
	if (rc == 0)
		rc = rix_key_from_bytes(out, parts, parts + 32, parts + 48);
	/* jansson's copies of the base64 key parts are wiped by its free (common/jansson_alloc.c). */
	json_decref(root);
	sodium_free(parts);
	return rc;
}

int rix_key_open_file(rix_key **out, const char *text, size_t len, const char *password,
		      size_t password_len)
{
	*out = NULL;
	int rc = rix__crypto_init();
	if (rc != 0)
		return rc;
	json_error_t jerr;
	json_t *root;
	rc = rix__jansson_load(&root, text, len, &jerr);
	if (rc == RIX_ENOMEM)
		return rix_error_set(RIX_ENOMEM, "key file: out of memory reading its JSON");
	if (rc != 0)
		return rix_error_set(RIX_ECORRUPT, "key file: not JSON: %s (line %d)", jerr.text, jerr.line);
	uint8_t salt[64];
	uint8_t *derived = NULL, *plain = NULL, *sealed = NULL;
	size_t salt_len = 0, sealed_len = 0;
	uint64_t N = 0, r = 0, p = 0;
	const char *kdf = json_string_value(json_object_get(root, "kdf"));
	const char *salt_b64 = json_string_value(json_object_get(root, "salt"));
	const char *data_b64 = json_string_value(json_object_get(root, "data"));
	if (kdf == NULL || strcmp(kdf, "scrypt") != 0) {
		rc = rix_error_set(RIX_ECORRUPT, "key file: kdf is %s%s%s, want \"scrypt\"", kdf ? "\"" : "",
				   kdf ? kdf : "missing", kdf ? "\"" : "");
		goto done;
	}
	if ((rc = get_param(root, "N", &N)) != 0 || (rc = get_param(root, "r", &r)) != 0 ||
	    (rc = get_param(root, "p", &p)) != 0)
		goto done;
	if (N < 2 || (N & (N - 1)) != 0 || r > (1u << 20) || p > (1u << 20) ||
	    128 * N * r > RIX_SCRYPT_MAX_MEMORY / p) {
		rc = rix_error_set(RIX_ECORRUPT, "key file: scrypt parameters N=%llu r=%llu p=%llu out of range",
				   (unsigned long long)N, (unsigned long long)r, (unsigned long long)p);
		goto done;
	}
	if (salt_b64 == NULL || data_b64 == NULL ||
	    sodium_base642bin(salt, sizeof(salt), salt_b64, strlen(salt_b64), NULL, &salt_len, NULL,
			      sodium_base64_VARIANT_ORIGINAL) != 0 || salt_len == 0) {
		rc = rix_error_set(RIX_ECORRUPT, "key file: salt missing or not base64 (at most 64 bytes)");
		goto done;
	}
	size_t data_max = strlen(data_b64) / 4 * 3 + 3;
	sealed = sodium_malloc(data_max ? data_max : 1);
	derived = sodium_malloc(64);
	if (sealed == NULL || derived == NULL) {
		rc = rix_error_set(RIX_ENOMEM, "key file: out of guarded memory");
		goto done;
	}
	if (sodium_base642bin(sealed, data_max, data_b64, strlen(data_b64), NULL, &sealed_len, NULL,
			      sodium_base64_VARIANT_ORIGINAL) != 0 || sealed_len < RIX_CRYPTO_OVERHEAD) {
		rc = rix_error_set(RIX_ECORRUPT, "key file: data missing, not base64, or too short");
		goto done;
	}
	if (crypto_pwhash_scryptsalsa208sha256_ll((const uint8_t *)password, password_len, salt, salt_len,
						  N, (uint32_t)r, (uint32_t)p, derived, 64) != 0) {
		rc = rix_error_set(RIX_ENOMEM, "key file: scrypt failed (N=%llu r=%llu p=%llu)",
				   (unsigned long long)N, (unsigned long long)r, (unsigned long long)p);
		goto done;
	}
	rix_key *user = NULL;
	if ((rc = rix_key_from_bytes(&user, derived, derived + 32, derived + 48)) != 0)
		goto done;
	plain = sodium_malloc(sealed_len - RIX_CRYPTO_OVERHEAD + 1);
	if (plain == NULL) {
		rix_key_free(user);
		rc = rix_error_set(RIX_ENOMEM, "key file: out of guarded memory");
		goto done;
	}
	rc = rix_crypto_open(user, sealed, sealed_len, plain);
	rix_key_free(user);
	if (rc == RIX_EAUTH) {
		rc = rix_error_set(RIX_EAUTH, "key file: wrong password (the sealed master key does not verify)");
		goto done;
	}
	if (rc == 0)
		rc = master_from_json(out, plain, sealed_len - RIX_CRYPTO_OVERHEAD);
done:
	sodium_free(derived);
	sodium_free(plain);
	sodium_free(sealed);
	json_decref(root);
	return rc;
}

/* Appends base64 of bin[0..n) at *p (guarded buffer with room), moving *p past it. */
static void put_b64(char **p, const uint8_t *bin, size_t n)
{
	size_t room = sodium_base64_ENCODED_LEN(n, sodium_base64_VARIANT_ORIGINAL);
	sodium_bin2base64(*p, room, bin, n, sodium_base64_VARIANT_ORIGINAL);
	*p += strlen(*p);
}

static void put_str(char **p, const char *s)
{
	size_t n = strlen(s);
	memcpy(*p, s, n);
	*p += n;
	**p = '\0';
}

int rix_key_create_file(char **json, size_t *len, const rix_key *master,
			const char *password, size_t password_len, uint64_t N, uint32_t r, uint32_t p,
			const char *username, const char *hostname)
{
	*json = NULL;
	*len = 0;
	int rc = rix__crypto_init();
	if (rc != 0)
		return rc;
	if (N < 2 || (N & (N - 1)) != 0 || r == 0 || p == 0 || 128 * N * r > RIX_SCRYPT_MAX_MEMORY / p)
		return rix_error_set(RIX_EINVAL, "key file: scrypt parameters N=%llu r=%u p=%u out of range",
				     (unsigned long long)N, r, p);
	uint8_t salt[64];
	randombytes_buf(salt, sizeof(salt));
	/* The master key as JSON, built in guarded memory (not through jansson, to wipe it). */
	enum { INNER_MAX = 256 };
	char *inner = sodium_malloc(INNER_MAX);
	uint8_t *derived = sodium_malloc(64);
	uint8_t *sealed = sodium_malloc(INNER_MAX + RIX_CRYPTO_OVERHEAD);
	char *data_b64 = NULL;
	json_t *root = NULL;
	rix_key *user = NULL;
	if (inner == NULL || derived == NULL || sealed == NULL) {
		rc = rix_error_set(RIX_ENOMEM, "key file: out of guarded memory");
		goto done;
	}
	char *q = inner;
	put_str(&q, "{\"mac\":{\"k\":\"");
	put_b64(&q, rix__key_mac_k(master), 16);
	put_str(&q, "\",\"r\":\"");
	put_b64(&q, rix__key_mac_r(master), 16);
	put_str(&q, "\"},\"encrypt\":\"");
	put_b64(&q, rix__key_encrypt(master), 32);
	put_str(&q, "\"}");
	size_t inner_len = (size_t)(q - inner);
	if (crypto_pwhash_scryptsalsa208sha256_ll((const uint8_t *)password, password_len, salt, sizeof(salt),
						  N, r, p, derived, 64) != 0) {
		rc = rix_error_set(RIX_ENOMEM, "key file: scrypt failed");
		goto done;
	}
	if ((rc = rix_key_from_bytes(&user, derived, derived + 32, derived + 48)) != 0)
		goto done;
	if ((rc = rix_crypto_seal(user, inner, inner_len, sealed)) != 0)
		goto done;
	size_t sealed_len = inner_len + RIX_CRYPTO_OVERHEAD;
	size_t b64_len = sodium_base64_ENCODED_LEN(sealed_len, sodium_base64_VARIANT_ORIGINAL);
	char salt_b64[sodium_base64_ENCODED_LEN(64, sodium_base64_VARIANT_ORIGINAL)];
	data_b64 = rix_malloc(b64_len);
	if (data_b64 == NULL) {
		rc = rix_error_set(RIX_ENOMEM, "key file: out of memory");
		goto done;
	}
	sodium_bin2base64(data_b64, b64_len, sealed, sealed_len, sodium_base64_VARIANT_ORIGINAL);
	sodium_bin2base64(salt_b64, sizeof(salt_b64), salt, sizeof(salt), sodium_base64_VARIANT_ORIGINAL);
	/* created: RFC 3339 with nanoseconds, as restic writes it. */
	struct timespec ts;
	struct tm tm;
	char created[64], secs[32];
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(secs, sizeof(secs), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(created, sizeof(created), "%s.%09ldZ", secs, ts.tv_nsec);
	rix__jansson_begin();
	root = json_pack("{s:s, s:s, s:s, s:s, s:I, s:i, s:i, s:s, s:s}", "created", created,
			 "username", username ? username : "", "hostname", hostname ? hostname : "",
			 "kdf", "scrypt", "N", (json_int_t)N, "r", (int)r, "p", (int)p, "salt", salt_b64,
			 "data", data_b64);
	char *text = root != NULL ? json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
	if (text == NULL || rix__jansson_out_of_memory()) {
		rix__jansson_free(text);
		/* jansson also fails on a username or hostname that is not UTF-8. */
		rc = rix__jansson_out_of_memory()
			     ? rix_error_set(RIX_ENOMEM, "key file: out of memory building JSON")
			     : rix_error_set(RIX_EINVAL, "key file: username or hostname is not valid UTF-8");
		goto done;
	}
	size_t n = strlen(text);
	*json = rix_malloc(n + 1);
	if (*json == NULL) {
		rix__jansson_free(text);
		rc = rix_error_set(RIX_ENOMEM, "key file: out of memory");
		goto done;
	}
	memcpy(*json, text, n + 1);
	*len = n;
	rix__jansson_free(text); /* jansson's allocation */
done:
	rix_key_free(user);
	sodium_free(inner);
	sodium_free(derived);
	sodium_free(sealed);
	rix_free(data_b64);
	json_decref(root);
	return rc;
}
