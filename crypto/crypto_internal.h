/*
 * crypto/crypto_internal.h — private to crypto/ (and its tests).
 */
#ifndef RIX_CRYPTO_INTERNAL_H
#define RIX_CRYPTO_INTERNAL_H

#include <stdint.h>
#include "rix/crypto.h"

/* Initialises libsodium once. @return 0, RIX_EIO. */
int rix__crypto_init(void);

/* The parts of a key (borrowed, in guarded memory). */
const uint8_t *rix__key_encrypt(const rix_key *key);
const uint8_t *rix__key_mac_k(const rix_key *key);
const uint8_t *rix__key_mac_r(const rix_key *key);

/*
 * scrypt limits accepted from a key file: memory = 128 * N * r * p bytes at most this. The fuzz
 * build lowers it so that inputs with valid-looking parameters stay fast.
 */
#ifndef RIX_SCRYPT_MAX_MEMORY
#define RIX_SCRYPT_MAX_MEMORY ((uint64_t)1 << 30)
#endif

#endif
