/*
 * bench/bench_crypto.c — sealing and opening objects (restic's Encrypt/Decrypt: 8 MiB), and
 * beside them the physical limit: each primitive alone, single core, on the same 8 MiB, from
 * each library that offers it. Issue 3's targets are ratios of these in one run:
 *   seal, open >= 80% of 1 / (1/AES-256-CTR + 1/Poly1305)
 *
 *   EncryptSmall, DecryptSmall the same for 1 KiB objects (a typical tree blob): per-call
 *                              overhead rather than throughput
 *   Encrypt                    rix_crypto_seal, 8 MiB
 *   Decrypt                    rix_crypto_open into a separate buffer
 *   DecryptInPlace             rix_crypto_open into the sealed buffer (plaintext after the IV)
 *   Limit/AES256CTR            OpenSSL EVP AES-256-CTR, context reused
 *   Limit/Poly1305/openssl     OpenSSL EVP_MAC "POLY1305"
 *   Limit/Poly1305/sodium      libsodium crypto_onetimeauth_poly1305
 *   Limit/SHA256/openssl       OpenSSL EVP_Digest SHA-256
 *   Limit/SHA256/sodium        libsodium crypto_hash_sha256
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <sodium.h>

#include "bench.h"

#define CRYPTO_N (8u << 20)

enum { ENCRYPT, DECRYPT, DECRYPT_INPLACE, AES, POLY_OSSL, POLY_SODIUM, SHA_OSSL, SHA_SODIUM };

struct cstate {
	size_t n; /* object size: CRYPTO_N, or arg[1] when set */
	rix_key *key;
	uint8_t *plain;
	uint8_t *sealed;
	uint8_t *work;
	EVP_CIPHER_CTX *aes;
	EVP_MAC *mac;
};

static int crypto_setup(bench_b *b)
{
	struct cstate *s = calloc(1, sizeof(*s));
	if (s == NULL)
		return bench_fail(b, "out of memory");
	b->state = s;
	s->n = b->def->arg[1] ? (size_t)b->def->arg[1] : CRYPTO_N;
	if (sodium_init() < 0 || rix_key_random(&s->key) != 0)
		return bench_fail(b, "key: %s", rix_error_last());
	s->plain = malloc(CRYPTO_N);
	s->sealed = malloc(CRYPTO_N + RIX_CRYPTO_OVERHEAD);
	s->work = malloc(CRYPTO_N + RIX_CRYPTO_OVERHEAD);
	if (s->plain == NULL || s->sealed == NULL || s->work == NULL)
		return bench_fail(b, "out of memory");
	randombytes_buf(s->plain, CRYPTO_N);
	if (rix_crypto_seal(s->key, s->plain, s->n, s->sealed) != 0)
		return bench_fail(b, "seal: %s", rix_error_last());
	static const uint8_t k32[32] = { 1, 2, 3 }, iv[16] = { 9 };
	s->aes = EVP_CIPHER_CTX_new();
	if (s->aes == NULL || EVP_EncryptInit_ex(s->aes, EVP_aes_256_ctr(), NULL, k32, iv) != 1)
		return bench_fail(b, "EVP AES-256-CTR");
	s->mac = EVP_MAC_fetch(NULL, "POLY1305", NULL);
	if (s->mac == NULL)
		return bench_fail(b, "EVP_MAC_fetch POLY1305");
	b->set_bytes = s->n;
	return 0;
}

static void crypto_teardown(bench_b *b)
{
	struct cstate *s = b->state;
	if (s == NULL)
		return;
	rix_key_free(s->key);
	free(s->plain);
	free(s->sealed);
	free(s->work);
	EVP_CIPHER_CTX_free(s->aes);
	EVP_MAC_free(s->mac);
	free(s);
	b->state = NULL;
}

static void crypto_run(bench_b *b)
{
	struct cstate *s = b->state;
	static const uint8_t k32[32] = { 7 };
	uint8_t out[32];
	for (uint64_t i = 0; i < b->n; i++) {
		int rc = 0, outl = 0;
		switch (b->def->arg[0]) {
		case ENCRYPT:
			rc = rix_crypto_seal(s->key, s->plain, s->n, s->work);
			break;
		case DECRYPT:
			rc = rix_crypto_open(s->key, s->sealed, s->n + RIX_CRYPTO_OVERHEAD, s->work);
			break;
		case DECRYPT_INPLACE:
			/* Each op must open an intact sealed object: copy it back untimed. */
			bench_stop(b);
			memcpy(s->work, s->sealed, CRYPTO_N + RIX_CRYPTO_OVERHEAD);
			bench_start(b);
			rc = rix_crypto_open(s->key, s->work, CRYPTO_N + RIX_CRYPTO_OVERHEAD,
					     s->work + RIX_CRYPTO_IV_SIZE);
			break;
		case AES:
			rc = EVP_EncryptUpdate(s->aes, s->work, &outl, s->plain, (int)CRYPTO_N) == 1 ? 0 : -1;
			break;
		case POLY_OSSL: {
			EVP_MAC_CTX *ctx = EVP_MAC_CTX_new(s->mac);
			size_t tl = 0;
			rc = (ctx != NULL && EVP_MAC_init(ctx, k32, 32, NULL) == 1 &&
			      EVP_MAC_update(ctx, s->plain, CRYPTO_N) == 1 &&
			      EVP_MAC_final(ctx, out, &tl, sizeof(out)) == 1) ? 0 : -1;
			EVP_MAC_CTX_free(ctx);
			break;
		}
		case POLY_SODIUM:
			crypto_onetimeauth_poly1305(out, s->plain, CRYPTO_N, k32);
			break;
		case SHA_OSSL: {
			unsigned int l = 0;
			rc = EVP_Digest(s->plain, CRYPTO_N, out, &l, EVP_sha256(), NULL) == 1 ? 0 : -1;
			break;
		}
		case SHA_SODIUM:
			crypto_hash_sha256(out, s->plain, CRYPTO_N);
			break;
		}
		if (rc != 0) {
			bench_fail(b, "%s failed: %s", b->def->name, rix_error_last());
			return;
		}
		bench_sink += out[0] + s->work[17];
	}
}

void register_crypto_benchmarks(void)
{
	static const struct {
		const char *name;
		int which;
		uint64_t size;
	} list[] = {
		{ "EncryptSmall", ENCRYPT, 1024 },
		{ "DecryptSmall", DECRYPT, 1024 },
		{ "Encrypt", ENCRYPT, 0 },
		{ "Decrypt", DECRYPT, 0 },
		{ "DecryptInPlace", DECRYPT_INPLACE, 0 },
		{ "Limit/AES256CTR", AES, 0 },
		{ "Limit/Poly1305/openssl", POLY_OSSL, 0 },
		{ "Limit/Poly1305/sodium", POLY_SODIUM, 0 },
		{ "Limit/SHA256/openssl", SHA_OSSL, 0 },
		{ "Limit/SHA256/sodium", SHA_SODIUM, 0 },
	};
	for (size_t i = 0; i < sizeof(list) / sizeof(list[0]); i++) {
		bench_def d = { .setup = crypto_setup, .run = crypto_run, .teardown = crypto_teardown, .family = 2 };
		snprintf(d.name, sizeof(d.name), "%s", list[i].name);
		d.arg[0] = (uint64_t)list[i].which;
		d.arg[1] = list[i].size;
		bench_register(&d);
	}
}
