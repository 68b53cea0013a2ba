/*
 * repo/config.c — the repository config file.
 *
 * Stored form (`config` at the top of the repository):
 *
 *   IV[16] || AES-256-CTR(plaintext) || MAC[16]        one sealed object, never compressed
 *   plaintext = {"version":2,"id":"<hex64>","chunker_polynomial":"<hex>"}
 *               (compact, no trailing newline, lowercase hex, polynomial without 0x)
 *
 * Checked against restic 0.14: `restic init` writes exactly those bytes (123 of them) in
 * version 1 and 2; version 2 does not compress the config (its plaintext starts with '{', where
 * compressed unpacked files start with 0x02), and restic refuses to load a compressed one
 * ("invalid character '\x02'"). rix reads and writes the same.
 *
 * The parser (on the JSON scanner shared with the index decoder, common/json_scan.h) accepts a
 * subset of what restic accepts and reads it the same way:
 *   - restic (Go's encoding/json) ignores unknown members: so do we, after checking they are
 *     well-formed JSON nested at most RIX_JSON_MAX_DEPTH (64) levels deep (Go allows 10000);
 *   - restic matches member names ignoring case, and 'K' (U+212A KELVIN SIGN) and 'ſ' (U+017F
 *     LONG S) fold to 'k' and 's'; a later duplicate silently wins. We refuse any member that
 *     restic would read as one of ours unless it is spelled exactly (escapes, which restic
 *     undoes, allowed), and any duplicate of ours, so that no file means one thing to restic
 *     and another to rix;
 *   - version: restic's type is uint: 1.0, 1e0, -0, "2" fail there too; we want exactly 1 or 2;
 *   - id: restic takes any string; we want 64 hex digits (what restic writes), no escapes;
 *   - chunker_polynomial: restic parses the raw bytes between the quotes with ParseUint(s, 16,
 *     64) (so escapes fail, leading zeros and upper case pass, 0x and signs fail) and then tests
 *     irreducibility (it lets 0 and irreducible polynomials of other degrees through; we don't:
 *     restic only ever makes degree 53, and the chunker needs it);
 *   - whitespace before and after the object is allowed; anything else after it is not;
 *   - rustic's "chunker", "chunk_size", "chunk_min_size", "chunk_max_size" are read (case
 *     sensitive, as serde) only to tell whether they name another chunker than restic's
 *     (other_chunker): restic ignores them and would cut files its own way.
 * Errors carry the byte offset. Parsing allocates nothing and is linear in the input.
 *
 * The polynomial test is Rabin's: p of degree d is irreducible over GF(2) iff
 * x^(2^d) = x (mod p) and gcd(x^(2^(d/q)) - x, p) = 1 for every prime q dividing d. For d = 53
 * (prime) that is 53 squarings mod p and one gcd.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <sodium.h>

#include "rix/alloc.h"
#include "rix/config.h"
#include "rix/crypto.h"
#include "rix/error.h"
#include "config_internal.h"
#include "../common/json_scan.h"

/* ---- Polynomials over GF(2) ----------------------------------------------------------------- */

#define CHUNKER_POL_DEGREE 53

int rix__poly_deg(uint64_t p)
{
	return p == 0 ? -1 : 63 - __builtin_clzll(p);
}

uint64_t rix__poly_mul(uint64_t a, uint64_t b)
{
	uint64_t r = 0;
	for (; b != 0; b >>= 1, a <<= 1)
		if (b & 1)
			r ^= a;
	return r;
}

/* a mod p, p != 0. */
static uint64_t poly_mod(uint64_t a, uint64_t p)
{
	int dp = rix__poly_deg(p);
	for (int da = rix__poly_deg(a); da >= dp; da = rix__poly_deg(a))
		a ^= p << (da - dp);
	return a;
}

/* a * b mod p, with a and b already reduced (degree < deg p), deg p in 1..63. */
static uint64_t poly_mulmod(uint64_t a, uint64_t b, uint64_t p)
{
	uint64_t top = (uint64_t)1 << rix__poly_deg(p), r = 0;
	for (; b != 0; b >>= 1) {
		if (b & 1)
			r ^= a;
		a <<= 1; /* degree <= deg p <= 63: no bit lost */
		if (a & top)
			a ^= p;
	}
	return r;
}

static uint64_t poly_gcd(uint64_t a, uint64_t b)
{
	while (b != 0) {
		uint64_t t = poly_mod(a, b);
		a = b;
		b = t;
	}
	return a;
}

bool rix__poly_irreducible(uint64_t p)
{
	int d = rix__poly_deg(p);
	if (d < 1)
		return false;
	if (d == 1)
		return true; /* x and x + 1 */
	/* sq[i] = x^(2^i) mod p; x itself is reduced since d >= 2. */
	uint64_t sq[64];
	sq[0] = 2;
	for (int i = 1; i <= d; i++)
		sq[i] = poly_mulmod(sq[i - 1], sq[i - 1], p);
	if (sq[d] != 2)
		return false;
	for (int q = 2, rest = d; q <= rest; q++) {
		if (rest % q != 0)
			continue;
		while (rest % q == 0)
			rest /= q;
		if (poly_gcd(p, sq[d / q] ^ 2) != 1)
			return false;
	}
	return true;
}

/* 0 if p suits the chunker; else code, with a message starting with prefix. */
static int polynomial_verdict(uint64_t p, int code, const char *prefix)
{
	int d = rix__poly_deg(p);
	if (d != CHUNKER_POL_DEGREE)
		return rix_error_set(code, "%schunker polynomial %llx has degree %d, want %d", prefix,
				     (unsigned long long)p, d, CHUNKER_POL_DEGREE);
	if (!rix__poly_irreducible(p))
		return rix_error_set(code, "%schunker polynomial %llx is reducible", prefix, (unsigned long long)p);
	return 0;
}

int rix_chunker_polynomial_check(uint64_t p)
{
	return polynomial_verdict(p, RIX_EINVAL, "");
}

/* ---- JSON ----------------------------------------------------------------------------------- */

enum { M_VERSION, M_ID, M_POL, M_COUNT };

/*
 * rustic's members that describe its chunker (rustic_core's ConfigFile; serde names, case
 * sensitive), each with the raw value that means restic's chunker (null does too: rustic's
 * default). restic's chunker: Rabin, 512 KiB to 8 MiB, 1 MiB on average.
 */
static const struct {
	const char *name;
	const char *restic;
} rustic_chunker[] = {
	{ "chunker", "\"Rabin\"" },
	{ "chunk_size", "1048576" },
	{ "chunk_min_size", "524288" },
	{ "chunk_max_size", "8388608" },
};

/*
 * An unknown member (its key's opening quote at key, *pp at its value): skipped; when it is one
 * of rustic's chunker members with another value than restic's, cfg->other_chunker says so.
 */
static int other_member(const rix__json *j, const char *key, const char **pp, rix_config *cfg)
{
	const char *v = *pp;
	int rc = rix__json_skip_value(j, pp, 1);
	if (rc != 0 || *key != '"')
		return rc;
	size_t vl = (size_t)(*pp - v);
	for (size_t i = 0; i < sizeof(rustic_chunker) / sizeof(rustic_chunker[0]); i++) {
		size_t kl = strlen(rustic_chunker[i].name);
		if ((size_t)(j->end - key) < kl + 2 || memcmp(key + 1, rustic_chunker[i].name, kl) != 0 || key[kl + 1] != '"')
			continue;
		if ((vl == 4 && memcmp(v, "null", 4) == 0) ||
		    (vl == strlen(rustic_chunker[i].restic) && memcmp(v, rustic_chunker[i].restic, vl) == 0))
			return 0;
		if (cfg->other_chunker[0] == '\0') /* the first one tells */
			snprintf(cfg->other_chunker, sizeof(cfg->other_chunker), "\"%s\":%.*s", rustic_chunker[i].name,
				 vl > 40 ? 40 : (int)vl, v);
		return 0;
	}
	return 0;
}
static const rix__json_key members[M_COUNT] = {
	RIX_JSON_KEY("version"), RIX_JSON_KEY("id"), RIX_JSON_KEY("chunker_polynomial"),
};

/* The "version" value at *pp (not whitespace). */
static int parse_version(const rix__json *j, const char **pp, int *version)
{
	const char *p = *pp, *a = p;
	if (*p != '-' && !rix__json_is_digit(p, j->end))
		return rix__json_corrupt(j, p, "\"version\" is not a number (want 1 or 2)");
	int rc = rix__json_skip_number(j, &p);
	if (rc != 0)
		return rc;
	size_t len = (size_t)(p - a);
	if (len == 1 && (*a == '1' || *a == '2')) {
		*version = *a - '0';
		*pp = p;
		return 0;
	}
	return rix_error_set(RIX_ECORRUPT, "config: \"version\" is %.*s, want 1 or 2, at byte %zu",
			     len > 24 ? 24 : (int)len, a, (size_t)(a - j->base));
}

/* A string value at *pp (not whitespace): its raw bytes between the quotes in [*a, *b). */
static int string_value(const rix__json *j, const char **pp, const char *what, const char **a, const char **b)
{
	const char *p = *pp;
	if (*p != '"')
		return rix__json_corrupt(j, p, what);
	*a = ++p;
	int rc = rix__json_skip_string(j, &p);
	if (rc != 0)
		return rc;
	*b = p - 1;
	*pp = p;
	return 0;
}

static int parse_id(const rix__json *j, const char **pp, rix_id *id)
{
	const char *at = *pp, *a = NULL, *b = NULL;
	int rc = string_value(j, pp, "\"id\" is not a string", &a, &b);
	if (rc != 0)
		return rc;
	/* An escape fails the hex test: restic never writes one here. */
	size_t n = (size_t)(b - a);
	if (n != 2 * RIX_ID_SIZE || rix_id_from_hex(id, a, n) != 0)
		return rix_error_set(RIX_ECORRUPT, "config: \"id\" is not 64 hex digits (%zu bytes) at byte %zu",
				     n, (size_t)(at - j->base));
	return 0;
}

static int parse_polynomial(const rix__json *j, const char **pp, uint64_t *pol)
{
	const char *at = *pp, *a = NULL, *b = NULL;
	int rc = string_value(j, pp, "\"chunker_polynomial\" is not a string", &a, &b);
	if (rc != 0)
		return rc;
	size_t off = (size_t)(at - j->base);
	if (a == b)
		return rix_error_set(RIX_ECORRUPT, "config: \"chunker_polynomial\" is empty at byte %zu", off);
	uint64_t v = 0;
	for (const char *c = a; c < b; c++) {
		unsigned h = rix__json_hexval[(unsigned char)*c];
		if (h & 0x80)
			return rix_error_set(RIX_ECORRUPT, "config: \"chunker_polynomial\" is not hex (byte %zu)",
					     (size_t)(c - j->base));
		if (v >> 60 != 0)
			return rix_error_set(RIX_ECORRUPT,
					     "config: \"chunker_polynomial\" does not fit in 64 bits at byte %zu", off);
		v = v << 4 | h;
	}
	if (v == 0)
		return rix_error_set(RIX_ECORRUPT, "config: \"chunker_polynomial\" is zero at byte %zu", off);
	if ((rc = polynomial_verdict(v, RIX_ECORRUPT, "config: ")) != 0)
		return rc;
	*pol = v;
	return 0;
}

int rix_config_parse(rix_config *out, const char *json, size_t len)
{
	if (len > RIX_CONFIG_MAX_SIZE)
		return rix_error_set(RIX_ECORRUPT, "config: %zu bytes of JSON, more than %u", len, RIX_CONFIG_MAX_SIZE);
	const rix__json j = { json, json + len, "config", 0 };
	const char *p = rix__json_skip_ws(json, j.end);
	rix_config cfg;
	memset(&cfg, 0, sizeof(cfg));
	uint32_t seen = 0;
	if (p >= j.end)
		return rix__json_corrupt(&j, p, "empty: want a JSON object");
	if (*p != '{')
		return rix__json_corrupt(&j, p, "not a JSON object");
	int more = rix__json_open(&j, &p, '{', "not a JSON object");
	while (more > 0) {
		const char *key = rix__json_skip_ws(p, j.end);
		int m, rc = rix__json_member(&j, &p, members, M_COUNT, &seen, &m);
		if (rc != 0)
			return rc;
		p = rix__json_skip_ws(p, j.end);
		if (p >= j.end)
			return rix__json_truncated(&j);
		switch (m) {
		case M_VERSION:
			rc = parse_version(&j, &p, &cfg.version);
			break;
		case M_ID:
			rc = parse_id(&j, &p, &cfg.id);
			break;
		case M_POL:
			rc = parse_polynomial(&j, &p, &cfg.chunker_polynomial);
			break;
		default:
			rc = other_member(&j, key, &p, &cfg);
			break;
		}
		if (rc != 0)
			return rc;
		more = rix__json_next(&j, &p, '}');
	}
	if (more < 0)
		return more;
	p = rix__json_skip_ws(p, j.end);
	if (p != j.end)
		return rix__json_corrupt(&j, p, "trailing bytes after the object");
	for (int m = 0; m < M_COUNT; m++)
		if (!(seen & (UINT32_C(1) << m)))
			return rix_error_set(RIX_ECORRUPT, "config: member \"%s\" is missing", members[m].name);
	*out = cfg;
	return 0;
}

/* {"version":N,"id":"<64>","chunker_polynomial":"<at most 16>"} */
#define ENCODED_MAX (sizeof("{\"version\":2,\"id\":\"\",\"chunker_polynomial\":\"\"}") + 64 + 16)

int rix_config_encode(char **json, size_t *len, const rix_config *cfg)
{
	*json = NULL;
	*len = 0;
	if (cfg->version != 1 && cfg->version != 2)
		return rix_error_set(RIX_EINVAL, "config: version %d, want 1 or 2", cfg->version);
	if (cfg->other_chunker[0] != '\0')
		return rix_error_set(RIX_EINVAL, "config: it names another chunker (%.*s), which restic's members "
				     "cannot say", (int)sizeof(cfg->other_chunker), cfg->other_chunker);
	int rc = polynomial_verdict(cfg->chunker_polynomial, RIX_EINVAL, "config: ");
	if (rc != 0)
		return rc;
	char hex[2 * RIX_ID_SIZE + 1];
	rix_id_to_hex(hex, &cfg->id);
	char *buf = rix_malloc(ENCODED_MAX);
	if (buf == NULL)
		return rix_error_set(RIX_ENOMEM, "config: out of memory");
	int k = snprintf(buf, ENCODED_MAX, "{\"version\":%d,\"id\":\"%s\",\"chunker_polynomial\":\"%llx\"}",
			 cfg->version, hex, (unsigned long long)cfg->chunker_polynomial);
	*json = buf;
	*len = (size_t)k;
	return 0;
}

int rix_config_open(rix_config *out, const rix_key *key, const uint8_t *file, size_t n)
{
	if (n < RIX_CRYPTO_OVERHEAD)
		return rix_error_set(RIX_ECORRUPT, "config: file of %zu bytes, shorter than IV and MAC (%d)", n,
				     RIX_CRYPTO_OVERHEAD);
	if (n - RIX_CRYPTO_OVERHEAD > RIX_CONFIG_MAX_SIZE)
		return rix_error_set(RIX_ECORRUPT, "config: file of %zu bytes, more than %u of JSON", n,
				     RIX_CONFIG_MAX_SIZE);
	size_t plain_len = n - RIX_CRYPTO_OVERHEAD;
	uint8_t *plain = rix_malloc(plain_len + 1);
	if (plain == NULL)
		return rix_error_set(RIX_ENOMEM, "config: out of memory");
	int rc = rix_crypto_open(key, file, n, plain);
	if (rc == RIX_EAUTH)
		rc = rix_error_set(RIX_EAUTH, "config: MAC does not verify (wrong key, or the file is damaged)");
	else if (rc == 0 && plain_len > 0 && plain[0] == 0x02)
		rc = rix_error_set(RIX_ECORRUPT, "config: compressed (0x02 first); restic never compresses the "
						 "config and refuses a compressed one");
	else if (rc == 0)
		rc = rix_config_parse(out, (const char *)plain, plain_len);
	rix_free(plain);
	return rc;
}

int rix_config_seal(uint8_t **file, size_t *n, const rix_key *key, const rix_config *cfg)
{
	*file = NULL;
	*n = 0;
	char *json;
	size_t len;
	int rc = rix_config_encode(&json, &len, cfg);
	if (rc != 0)
		return rc;
	uint8_t *buf = rix_malloc(len + RIX_CRYPTO_OVERHEAD);
	if (buf == NULL) {
		rix_free(json);
		return rix_error_set(RIX_ENOMEM, "config: out of memory");
	}
	rc = rix_crypto_seal(key, json, len, buf);
	rix_free(json);
	if (rc != 0) {
		rix_free(buf);
		return rc;
	}
	*file = buf;
	*n = len + RIX_CRYPTO_OVERHEAD;
	return 0;
}

/* restic's recipe: 51 random bits, bit 53 (the degree) and bit 0 set, until irreducible. */
#define POLYNOMIAL_TRIES 1000000

int rix_config_new(rix_config *out, int version)
{
	if (version != 1 && version != 2)
		return rix_error_set(RIX_EINVAL, "config: version %d, want 1 or 2", version);
	if (sodium_init() < 0)
		return rix_error_set(RIX_EIO, "config: libsodium failed to initialise");
	rix_config cfg;
	memset(&cfg, 0, sizeof(cfg));
	cfg.version = version;
	randombytes_buf(cfg.id.b, sizeof(cfg.id.b));
	const uint64_t mask = ((uint64_t)1 << (CHUNKER_POL_DEGREE + 1)) - 1;
	for (int t = 0; t < POLYNOMIAL_TRIES; t++) {
		uint64_t r;
		randombytes_buf(&r, sizeof(r));
		uint64_t p = (r & mask) | (uint64_t)1 << CHUNKER_POL_DEGREE | 1;
		if (rix__poly_irreducible(p)) {
			cfg.chunker_polynomial = p;
			*out = cfg;
			return 0;
		}
	}
	return rix_error_set(RIX_EIO, "config: no irreducible polynomial in %d random tries (broken random source?)",
			     POLYNOMIAL_TRIES);
}
