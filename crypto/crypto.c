/*
 * crypto/crypto.c — master keys, seal/open, SHA-256.
 *
 * Sealed object layout (FORMAT.md):
 *
 *   +--------+----------------------------------+--------+
 *   | IV[16] | AES-256-CTR(encrypt, IV, plain)  | MAC[16]|
 *   +--------+----------------------------------+--------+
 *   MAC = Poly1305(one-time key = r || AES-128(k, IV), ciphertext)
 *
 * The IV is the initial 128-bit big-endian counter block (OpenSSL's CTR mode increments it the
 * same way). Poly1305 clamps r itself (libsodium), so the stored r is used as it is.
 *
 * Libraries, chosen by measurement (bench/RESULTS.md, "Crypto"; single core, 8 MiB): OpenSSL
 * libcrypto for AES (CTR and the single ECB block), Poly1305 (10.5 GB/s against libsodium's
 * 2.7) and SHA-256 (1.4 GB/s against 0.29); libsodium for randomness, guarded memory, wiping and
 * the constant-time comparison.
 */
#include <assert.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <sodium.h>

#include "rix/alloc.h"
#include "rix/crypto.h"
#include "rix/error.h"
#include "crypto_internal.h"

struct rix_key {
	uint8_t encrypt[32];
	uint8_t mac_k[16];
	uint8_t mac_r[16];
};

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static int sodium_ok;
/*
 * Algorithms fetched once: OpenSSL 3 looks an algorithm up in its providers on every implicit
 * use (EVP_aes_256_ctr() in an init call), which cost more than the cipher work itself for small
 * objects (bench/RESULTS.md, "Crypto"). Contexts are still made per call and freed (and so
 * cleansed) at its end, so no expanded key outlives the call that used it.
 */
static EVP_MAC *poly1305;
static EVP_CIPHER *aes256ctr, *aes128ecb;
static EVP_MD *sha256;

static void crypto_start(void)
{
	sodium_ok = sodium_init() >= 0;
	poly1305 = EVP_MAC_fetch(NULL, "POLY1305", NULL);
	aes256ctr = EVP_CIPHER_fetch(NULL, "AES-256-CTR", NULL);
	aes128ecb = EVP_CIPHER_fetch(NULL, "AES-128-ECB", NULL);
	sha256 = EVP_MD_fetch(NULL, "SHA256", NULL);
}

int rix__crypto_init(void)
{
	pthread_once(&init_once, crypto_start);
	if (!sodium_ok)
		return rix_error_set(RIX_EIO, "crypto: libsodium failed to initialise");
	if (poly1305 == NULL || aes256ctr == NULL || aes128ecb == NULL || sha256 == NULL)
		return rix_error_set(RIX_EIO, "crypto: OpenSSL lacks POLY1305, AES-256-CTR, AES-128-ECB or SHA256");
	return 0;
}

int rix_key_from_bytes(rix_key **out, const uint8_t encrypt[32], const uint8_t mac_k[16],
		       const uint8_t mac_r[16])
{
	*out = NULL;
	int rc = rix__crypto_init();
	if (rc != 0)
		return rc;
	rix_key *k = sodium_malloc(sizeof(*k));
	if (k == NULL)
		return rix_error_set(RIX_ENOMEM, "crypto: out of guarded memory for a key");
	memcpy(k->encrypt, encrypt, 32);
	memcpy(k->mac_k, mac_k, 16);
	memcpy(k->mac_r, mac_r, 16);
	sodium_mprotect_readonly(k);
	*out = k;
	return 0;
}

int rix_key_random(rix_key **out)
{
	*out = NULL;
	int rc = rix__crypto_init();
	if (rc != 0)
		return rc;
	uint8_t *raw = sodium_malloc(64);
	if (raw == NULL)
		return rix_error_set(RIX_ENOMEM, "crypto: out of guarded memory for a key");
	randombytes_buf(raw, 64);
	rc = rix_key_from_bytes(out, raw, raw + 32, raw + 48);
	sodium_free(raw); /* wipes */
	return rc;
}

void rix_key_free(rix_key *key)
{
	if (key != NULL)
		sodium_free(key); /* unprotects, wipes, frees */
}

const uint8_t *rix__key_encrypt(const rix_key *key)
{
	return key->encrypt;
}

const uint8_t *rix__key_mac_k(const rix_key *key)
{
	return key->mac_k;
}

const uint8_t *rix__key_mac_r(const rix_key *key)
{
	return key->mac_r;
}

/* AES-256-CTR over in[0..n) into out (out == in allowed). */
static int aes_ctr(const rix_key *key, const uint8_t iv[16], const uint8_t *in, size_t n, uint8_t *out)
{
	EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
	if (ctx == NULL)
		return rix_error_set(RIX_ENOMEM, "crypto: out of memory for a cipher context");
	int ok = EVP_EncryptInit_ex2(ctx, aes256ctr, key->encrypt, iv, NULL) == 1;
	size_t done = 0;
	while (ok && done < n) {
		/* EVP takes int lengths: go in steps of at most 1 GiB. */
		int step = (int)(n - done > (1u << 30) ? (1u << 30) : n - done), outl = 0;
		ok = EVP_EncryptUpdate(ctx, out + done, &outl, in + done, step) == 1 && outl == step;
		done += (size_t)step;
	}
	EVP_CIPHER_CTX_free(ctx);
	return ok ? 0 : rix_error_set(RIX_EIO, "crypto: AES-256-CTR failed");
}

/* Poly1305-AES of ct[0..n) with the key's (k, r) and this IV. */
static int mac(const rix_key *key, const uint8_t iv[16], const uint8_t *ct, size_t n, uint8_t tag[16])
{
	uint8_t otk[32];
	memcpy(otk, key->mac_r, 16);
	EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
	if (ctx == NULL)
		return rix_error_set(RIX_ENOMEM, "crypto: out of memory for a cipher context");
	int outl = 0;
	int ok = EVP_EncryptInit_ex2(ctx, aes128ecb, key->mac_k, NULL, NULL) == 1 &&
		 EVP_CIPHER_CTX_set_padding(ctx, 0) == 1 &&
		 EVP_EncryptUpdate(ctx, otk + 16, &outl, iv, 16) == 1 && outl == 16;
	EVP_CIPHER_CTX_free(ctx);
	if (!ok) {
		sodium_memzero(otk, sizeof(otk));
		return rix_error_set(RIX_EIO, "crypto: AES-128 for the MAC key failed");
	}
	/* OpenSSL's Poly1305 clamps r like libsodium's (RFC 8439): same tags, 4x the speed. */
	EVP_MAC_CTX *mctx = EVP_MAC_CTX_new(poly1305);
	size_t tl = 0;
	ok = mctx != NULL && EVP_MAC_init(mctx, otk, sizeof(otk), NULL) == 1;
	for (size_t done = 0; ok && done < n;) {
		size_t step = n - done > ((size_t)1 << 30) ? ((size_t)1 << 30) : n - done;
		ok = EVP_MAC_update(mctx, ct + done, step) == 1;
		done += step;
	}
	ok = ok && EVP_MAC_final(mctx, tag, &tl, 16) == 1 && tl == 16;
	EVP_MAC_CTX_free(mctx);
	sodium_memzero(otk, sizeof(otk));
	return ok ? 0 : rix_error_set(RIX_EIO, "crypto: Poly1305 failed");
}

int rix_crypto_seal_detached(const rix_key *key, uint8_t iv[RIX_CRYPTO_IV_SIZE], const void *plain, size_t n,
			     uint8_t *ct, uint8_t tag[RIX_CRYPTO_MAC_SIZE])
{
	static const uint8_t zero[16];
	do
		randombytes_buf(iv, RIX_CRYPTO_IV_SIZE);
	while (memcmp(iv, zero, 16) == 0);
	int rc = aes_ctr(key, iv, plain, n, ct);
	if (rc == 0)
		rc = mac(key, iv, ct, n, tag);
	return rc;
}

int rix_crypto_open_detached(const rix_key *key, const uint8_t iv[RIX_CRYPTO_IV_SIZE], const uint8_t *ct, size_t n,
			     const uint8_t tag[RIX_CRYPTO_MAC_SIZE], uint8_t *out)
{
	static const uint8_t zero[16];
	if (sodium_memcmp(iv, zero, 16) == 0)
		return rix_error_set(RIX_ECORRUPT, "crypto: all-zero IV");
	uint8_t want[16];
	int rc = mac(key, iv, ct, n, want);
	if (rc != 0)
		return rc;
	if (crypto_verify_16(want, tag) != 0)
		return rix_error_set(RIX_EAUTH, "crypto: MAC mismatch (wrong key or damaged data)");
	return aes_ctr(key, iv, ct, n, out);
}

int rix_crypto_seal(const rix_key *key, const void *plain, size_t n, uint8_t *out)
{
	if (n > SIZE_MAX - RIX_CRYPTO_OVERHEAD)
		return rix_error_set(RIX_EINVAL, "crypto: object of %zu bytes is too large", n);
	return rix_crypto_seal_detached(key, out, plain, n, out + RIX_CRYPTO_IV_SIZE, out + RIX_CRYPTO_IV_SIZE + n);
}

int rix_crypto_open(const rix_key *key, const uint8_t *in, size_t n, uint8_t *out)
{
	if (n < RIX_CRYPTO_OVERHEAD)
		return rix_error_set(RIX_ECORRUPT, "crypto: sealed object of %zu bytes is shorter than its %d-byte overhead",
				     n, RIX_CRYPTO_OVERHEAD);
	size_t clen = n - RIX_CRYPTO_OVERHEAD;
	return rix_crypto_open_detached(key, in, in + RIX_CRYPTO_IV_SIZE, clen, in + RIX_CRYPTO_IV_SIZE + clen, out);
}

int rix_crypto_reseal_in_place(const rix_key *key, uint8_t *obj, size_t n)
{
	if (n < RIX_CRYPTO_OVERHEAD)
		return rix_error_set(RIX_ECORRUPT, "crypto: sealed object of %zu bytes is shorter than its %d-byte overhead",
				     n, RIX_CRYPTO_OVERHEAD);
	uint8_t *ct = obj + RIX_CRYPTO_IV_SIZE;
	return aes_ctr(key, obj, ct, n - RIX_CRYPTO_OVERHEAD, ct);
}

void rix_sha256(rix_id *out, const void *data, size_t n)
{
	unsigned int len = 0;
	pthread_once(&init_once, crypto_start);
	/* Only an allocation inside OpenSSL can fail here; an unset ID must never name a blob. */
	if (EVP_Digest(data, n, out->b, &len, sha256 != NULL ? sha256 : EVP_sha256(), NULL) != 1 ||
	    len != RIX_ID_SIZE)
		abort();
}

struct rix_sha256_ctx {
	EVP_MD_CTX *md;
};

int rix_sha256_new(rix_sha256_ctx **out)
{
	*out = NULL;
	int rc = rix__crypto_init();
	if (rc != 0)
		return rc;
	rix_sha256_ctx *c = rix_malloc(sizeof(*c));
	if (c == NULL)
		return rix_error_set(RIX_ENOMEM, "crypto: out of memory for a SHA-256 context");
	c->md = EVP_MD_CTX_new();
	if (c->md == NULL || EVP_DigestInit_ex2(c->md, sha256, NULL) != 1) {
		EVP_MD_CTX_free(c->md);
		rix_free(c);
		return rix_error_set(RIX_ENOMEM, "crypto: out of memory for a SHA-256 context");
	}
	*out = c;
	return 0;
}

void rix_sha256_update(rix_sha256_ctx *c, const void *data, size_t n)
{
	/* Cannot fail for SHA-256 once initialised (OpenSSL's default provider). */
	int ok = EVP_DigestUpdate(c->md, data, n);
	assert(ok == 1);
	(void)ok;
}

void rix_sha256_final(rix_id *out, rix_sha256_ctx *c)
{
	unsigned int len = 0;
	int ok = EVP_DigestFinal_ex(c->md, out->b, &len) == 1 && len == RIX_ID_SIZE &&
		 EVP_DigestInit_ex2(c->md, NULL, NULL) == 1;
	assert(ok);
	(void)ok;
}

void rix_sha256_free(rix_sha256_ctx *c)
{
	if (c == NULL)
		return;
	EVP_MD_CTX_free(c->md);
	rix_free(c);
}
