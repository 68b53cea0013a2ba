/*
 * rix/config.h — the repository config file (FORMAT.md, "Keys and config").
 *
 * The file `config` at the top of a repository is one sealed object (IV || AES-256-CTR ||
 * Poly1305-AES MAC, see crypto.h) whose plaintext is compact JSON, never compressed, with no
 * trailing newline, exactly as restic 0.14 writes it:
 *   {"version":2,"id":"<64 lowercase hex>","chunker_polynomial":"<lowercase hex, no 0x>"}
 * The polynomial is a random irreducible polynomial of degree 53 over GF(2) (bit i is the
 * coefficient of x^i), fixed when the repository is made; the chunker cuts files with it.
 *
 * rix_config is a plain value: nothing to allocate or free. API families: parse / encode (the
 * JSON), open / seal (the stored file), new (a fresh config), the polynomial check.
 */
#ifndef RIX_CONFIG_H
#define RIX_CONFIG_H

#include "rix/common.h"

#include <stddef.h>
#include <stdint.h>
#include "rix/crypto.h"
#include "rix/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A repository's configuration. */
typedef struct rix_config {
	int version;                 /* 1 or 2 */
	rix_id id;                   /* the repository's ID: 32 random bytes, 64 hex digits in JSON */
	uint64_t chunker_polynomial; /* irreducible, degree 53 */
	/*
	 * "" when files are cut by restic's chunker. Else the member that names another, as the
	 * config has it (NUL-terminated, cut to fit), e.g. "chunker":"FixedSize": rustic writes
	 * "chunker" ("Rabin" is restic's), "chunk_size", "chunk_min_size" and "chunk_max_size"
	 * (restic's are 1 MiB, 512 KiB and 8 MiB) in its repositories. restic ignores them and
	 * would cut files its own way, deduplicating nothing against the data there; such a
	 * repository reads and checks as any other, but rix_backup refuses to add to it.
	 */
	char other_chunker[64];
} rix_config;

/* Plaintext JSON larger than this is refused (restic's is 123 bytes). */
#define RIX_CONFIG_MAX_SIZE 65536u

/*
 * Parses the config JSON json[0..len) (need not be NUL-terminated) into *out. Strict, and never
 * more lenient than restic: one JSON object (whitespace around it allowed) with exactly one each
 * of "version" (the integer 1 or 2), "id" (64 hex digits, either case, no escapes) and
 * "chunker_polynomial" (hex digits, no escapes, no 0x, fitting in 64 bits, irreducible of degree
 * 53). Other members are validated as JSON and ignored, as restic does, but for rustic's chunker
 * members, which set other_chunker when they name another chunker than restic's; a member whose
 * name restic would match to one of the three (its decoder ignores case) but that is not spelled
 * exactly is refused. Work is linear in len, nesting is bounded, nothing is allocated.
 * *out is written only on success.
 * @return 0; RIX_ECORRUPT (with the byte offset in the message).
 */
RIX_EXPORT RIX_NODISCARD int rix_config_parse(rix_config *out, const char *json, size_t len);

/*
 * The JSON restic writes for cfg, byte for byte (compact, lowercase hex, no trailing newline).
 * *json (NUL-terminated; *len excludes the NUL) belongs to the caller, freed with rix_free.
 * @return 0; RIX_EINVAL (version not 1 or 2, a polynomial rix_chunker_polynomial_check
 * refuses, or other_chunker set: restic's three members would drop what names it); RIX_ENOMEM.
 * On failure *json is NULL and *len 0.
 */
RIX_EXPORT RIX_NODISCARD int rix_config_encode(char **json, size_t *len, const rix_config *cfg);

/*
 * The config file as stored, file[0..n): its MAC is verified and it is decrypted with key
 * (nothing is parsed before that), then parsed as rix_config_parse does. *out is written only
 * on success.
 * @return 0; RIX_EAUTH (MAC mismatch: wrong key or a damaged file); RIX_ECORRUPT (too short or
 * larger than RIX_CONFIG_MAX_SIZE plus the overhead, compressed, or bad JSON); RIX_ENOMEM.
 */
RIX_EXPORT RIX_NODISCARD int rix_config_open(rix_config *out, const rix_key *key, const uint8_t *file, size_t n);

/*
 * The inverse of rix_config_open: encodes cfg and seals it under key with a fresh IV.
 * *file (*n bytes) belongs to the caller, freed with rix_free.
 * @return 0; RIX_EINVAL (as rix_config_encode); RIX_ENOMEM. On failure *file is NULL, *n 0.
 */
RIX_EXPORT RIX_NODISCARD int rix_config_seal(uint8_t **file, size_t *n, const rix_key *key, const rix_config *cfg);

/*
 * A fresh config for a new repository: the given version, a random ID and a random
 * irreducible polynomial of degree 53 (both from libsodium's random source).
 * @return 0; RIX_EINVAL (version not 1 or 2); RIX_EIO (the random source failed).
 */
RIX_EXPORT RIX_NODISCARD int rix_config_new(rix_config *out, int version);

/*
 * 0 if p is a polynomial restic's chunker can use: degree 53 (bit 53 the highest set bit) and
 * irreducible over GF(2). Otherwise RIX_EINVAL with a message saying which.
 */
RIX_EXPORT RIX_NODISCARD int rix_chunker_polynomial_check(uint64_t p);

#ifdef __cplusplus
}
#endif
#endif
