/*
 * rix/crypto.h — keys, sealing and opening of objects, SHA-256 IDs (restic's format, FORMAT.md).
 *
 * Every encrypted object is IV[16] || AES-256-CTR ciphertext || Poly1305-AES MAC[16]. The MAC
 * covers the ciphertext; its one-time key is r || AES-128(k, IV). Opening verifies the MAC in
 * constant time before anything is decrypted.
 *
 * A master key lives in libsodium's guarded memory (not the rix allocator hook: it must never
 * be swapped or left behind), read-only while in use, wiped when freed.
 *
 * API families: master keys (from bytes, random, from a key file and password, into a new key
 * file, free); seal / open;
 * SHA-256.
 */
#ifndef RIX_CRYPTO_H
#define RIX_CRYPTO_H

#include "rix/common.h"

#include <stddef.h>
#include <stdint.h>
#include "rix/types.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RIX_CRYPTO_IV_SIZE 16
#define RIX_CRYPTO_MAC_SIZE 16
/* Bytes a sealed object has beyond its plaintext. */
#define RIX_CRYPTO_OVERHEAD (RIX_CRYPTO_IV_SIZE + RIX_CRYPTO_MAC_SIZE)

/* A master key: encryption key (32 bytes), MAC k (16), MAC r (16). Opaque. */
typedef struct rix_key rix_key;

/*
 * A key from its three parts. *out belongs to the caller, freed with rix_key_free.
 * @return 0, RIX_ENOMEM.
 */
RIX_EXPORT RIX_NODISCARD int rix_key_from_bytes(rix_key **out, const uint8_t encrypt[32], const uint8_t mac_k[16],
		       const uint8_t mac_r[16]);

/* A fresh random master key. @return 0, RIX_ENOMEM. */
RIX_EXPORT RIX_NODISCARD int rix_key_random(rix_key **out);

/* Wipes and frees. NULL-safe. */
RIX_EXPORT void rix_key_free(rix_key *key);

/*
 * Opens a restic key file (keys/<id>: JSON with scrypt parameters, salt and the sealed master
 * key) with a password, and returns the master key it holds.
 * @return 0; RIX_EAUTH (wrong password: the sealed key's MAC does not verify); RIX_ECORRUPT
 * (not a key file: bad JSON, unknown kdf, parameters out of range, bad base64, bad inner JSON);
 * RIX_ENOMEM.
 */
RIX_EXPORT RIX_NODISCARD int rix_key_open_file(rix_key **out, const char *json, size_t len, const char *password,
		      size_t password_len);

/* scrypt parameters restic-compatible and sound (FORMAT.md); tests may use N=128, r=1, p=1. */
#define RIX_SCRYPT_DEFAULT_N 32768u
#define RIX_SCRYPT_DEFAULT_R 8u
#define RIX_SCRYPT_DEFAULT_P 1u

/*
 * Writes a new key file holding `master`, sealed under scrypt(password, 64 random bytes of
 * salt, N, r, p). username/hostname may be NULL. *json (NUL-terminated; *len excludes it)
 * belongs to the caller, freed with rix_free; its SHA-256 is the key file's name.
 * @return 0, RIX_EINVAL (N not a power of two >= 2, or parameters over the memory bound),
 * RIX_ENOMEM.
 */
RIX_EXPORT RIX_NODISCARD int rix_key_create_file(char **json, size_t *len, const rix_key *master,
			const char *password, size_t password_len, uint64_t N, uint32_t r, uint32_t p,
			const char *username, const char *hostname);

/*
 * Seals plain[0..n) into out[0..n + RIX_CRYPTO_OVERHEAD) with a random IV. out must not
 * overlap plain. @return 0, RIX_EINVAL (n too large).
 */
RIX_EXPORT RIX_NODISCARD int rix_crypto_seal(const rix_key *key, const void *plain, size_t n, uint8_t *out);

/*
 * Opens a sealed object in[0..n) into out[0..n - RIX_CRYPTO_OVERHEAD). out is either disjoint
 * from in or exactly in + RIX_CRYPTO_IV_SIZE (decrypting in place, no copy). Nothing is
 * written to out unless the MAC verifies.
 * @return 0; RIX_ECORRUPT (shorter than the overhead, or an all-zero IV); RIX_EAUTH (MAC
 * mismatch).
 */
RIX_EXPORT RIX_NODISCARD int rix_crypto_open(const rix_key *key, const uint8_t *in, size_t n, uint8_t *out);

#ifdef RIX_ADVANCED /* sealing with the IV and MAC kept apart (rix/common.h) */
/*
 * The same sealing with the IV and MAC apart from the ciphertext, for a file whose ciphertext
 * is read straight into the array its plaintext is used in (the index cache, repo/index_cache.c).
 * seal: a random IV into iv, the ciphertext of plain[0..n) into ct[0..n) (ct may be plain: in
 * place), its MAC into tag. open: verifies tag over ct[0..n) with iv, in constant time, and only
 * then decrypts into out[0..n) (out == ct: in place, or disjoint).
 * @return seal: 0, RIX_EIO, RIX_ENOMEM; open: 0, RIX_ECORRUPT (all-zero IV), RIX_EAUTH (MAC
 * mismatch: nothing written), RIX_EIO, RIX_ENOMEM.
 */
RIX_EXPORT RIX_NODISCARD int rix_crypto_seal_detached(const rix_key *key, uint8_t iv[RIX_CRYPTO_IV_SIZE], const void *plain,
						      size_t n, uint8_t *ct, uint8_t tag[RIX_CRYPTO_MAC_SIZE]);
RIX_EXPORT RIX_NODISCARD int rix_crypto_open_detached(const rix_key *key, const uint8_t iv[RIX_CRYPTO_IV_SIZE],
						      const uint8_t *ct, size_t n, const uint8_t tag[RIX_CRYPTO_MAC_SIZE],
						      uint8_t *out);
/*
 * Encrypts again, in place, a sealed object obj[0..n) that rix_crypto_open decrypted in place
 * (its plaintext at obj + RIX_CRYPTO_IV_SIZE; the IV and MAC untouched): the same IV's keystream
 * applied again, so obj holds the sealed bytes it held before the open. For a reader that needs
 * an object's plaintext once and its sealed bytes afterwards (a blob verified, then copied as
 * stored) without a second buffer. @return 0, RIX_ECORRUPT (shorter than the overhead), RIX_EIO,
 * RIX_ENOMEM.
 */
RIX_EXPORT RIX_NODISCARD int rix_crypto_reseal_in_place(const rix_key *key, uint8_t *obj, size_t n);
#endif /* RIX_ADVANCED */

/* SHA-256 of data[0..n): the ID of a blob (plaintext) or of a stored file (its bytes). Aborts
 * if OpenSSL cannot allocate its digest context (an unset ID must never name anything). */
RIX_EXPORT void rix_sha256(rix_id *out, const void *data, size_t n);

/*
 * Incremental SHA-256, for a file hashed while it is written (a pack's ID). A context is owned
 * by one thread at a time. rix_sha256_final writes the digest of everything updated since
 * creation or the previous final, and resets the context for the next message.
 * @return (new) 0, RIX_ENOMEM, RIX_EIO.
 */
typedef struct rix_sha256_ctx rix_sha256_ctx;
RIX_EXPORT RIX_NODISCARD int rix_sha256_new(rix_sha256_ctx **out);
RIX_EXPORT void rix_sha256_update(rix_sha256_ctx *c, const void *data, size_t n);
RIX_EXPORT void rix_sha256_final(rix_id *out, rix_sha256_ctx *c);
/* NULL-safe. */
RIX_EXPORT void rix_sha256_free(rix_sha256_ctx *c);

#ifdef __cplusplus
}
#endif
#endif
