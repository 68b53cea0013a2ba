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
 * The parser accepts a subset of what restic accepts and reads it the same way:
 *   - restic (Go's encoding/json) ignores unknown members: so do we, after checking they are
 *     well-formed JSON nested at most MAX_DEPTH deep (Go allows 10000);
 *   - restic matches member names ignoring case, and 'K' (U+212A KELVIN SIGN) and 'ſ' (U+017F
 *     LONG S) fold to 'k' and 's'; a later duplicate silently wins. We refuse any member that
 *     restic would read as one of ours unless it is spelled exactly, and any duplicate of ours,
 *     so that no file means one thing to restic and another to rix;
 *   - version: restic's type is uint: 1.0, 1e0, -0, "2" fail there too; we want exactly 1 or 2;
 *   - id: restic takes any string; we want 64 hex digits (what restic writes), no escapes;
 *   - chunker_polynomial: restic parses the raw bytes between the quotes with ParseUint(s, 16,
 *     64) (so escapes fail, leading zeros and upper case pass, 0x and signs fail) and then tests
 *     irreducibility (it lets 0 and irreducible polynomials of other degrees through; we don't:
 *     restic only ever makes degree 53, and the chunker needs it);
 *   - whitespace before and after the object is allowed; anything else after it is not.
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

#define MAX_DEPTH 32

enum { M_VERSION, M_ID, M_POL, M_COUNT };
static const char *const member_names[M_COUNT] = { "version", "id", "chunker_polynomial" };

typedef struct parser {
	const char *s;
	size_t n, i;
} parser;

static int bad(const parser *ps, const char *what)
{
	return rix_error_set(RIX_ECORRUPT, "config: %s at byte %zu", what, ps->i);
}

static void skip_ws(parser *ps)
{
	while (ps->i < ps->n && (ps->s[ps->i] == ' ' || ps->s[ps->i] == '\t' || ps->s[ps->i] == '\n' ||
				 ps->s[ps->i] == '\r'))
		ps->i++;
}

static int hexval(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/*
 * A string token at ps->i (which is '"'): checks escapes and control characters, leaves ps->i
 * past the closing quote, and returns the raw bytes between the quotes in [*start, *end) and
 * whether any escape occurred.
 */
static int string_token(parser *ps, size_t *start, size_t *end, bool *escaped)
{
	*escaped = false;
	*start = ++ps->i;
	while (ps->i < ps->n) {
		unsigned char c = (unsigned char)ps->s[ps->i];
		if (c == '"') {
			*end = ps->i++;
			return 0;
		}
		if (c < 0x20)
			return bad(ps, "control character in a string");
		if (c != '\\') {
			ps->i++;
			continue;
		}
		*escaped = true;
		if (ps->i + 1 >= ps->n)
			break;
		c = (unsigned char)ps->s[ps->i + 1];
		if (c == 'u') {
			if (ps->i + 6 > ps->n)
				break;
			for (int k = 2; k < 6; k++)
				if (hexval((unsigned char)ps->s[ps->i + k]) < 0)
					return bad(ps, "bad \\u escape");
			ps->i += 6;
		} else if (c != '\0' && strchr("\"\\/bfnrt", c) != NULL) {
			ps->i += 2;
		} else {
			return bad(ps, "bad escape");
		}
	}
	ps->i = ps->n;
	return bad(ps, "unterminated string");
}

/* A JSON number token at ps->i; [*start, ps->i) on return. */
static int number_token(parser *ps, size_t *start)
{
	*start = ps->i;
	const char *s = ps->s;
	size_t n = ps->n;
	if (ps->i < n && s[ps->i] == '-')
		ps->i++;
	if (ps->i < n && s[ps->i] == '0')
		ps->i++;
	else if (ps->i < n && s[ps->i] >= '1' && s[ps->i] <= '9')
		while (ps->i < n && s[ps->i] >= '0' && s[ps->i] <= '9')
			ps->i++;
	else
		return bad(ps, "bad number");
	if (ps->i < n && s[ps->i] == '.') {
		ps->i++;
		if (ps->i >= n || s[ps->i] < '0' || s[ps->i] > '9')
			return bad(ps, "bad number");
		while (ps->i < n && s[ps->i] >= '0' && s[ps->i] <= '9')
			ps->i++;
	}
	if (ps->i < n && (s[ps->i] == 'e' || s[ps->i] == 'E')) {
		ps->i++;
		if (ps->i < n && (s[ps->i] == '+' || s[ps->i] == '-'))
			ps->i++;
		if (ps->i >= n || s[ps->i] < '0' || s[ps->i] > '9')
			return bad(ps, "bad number");
		while (ps->i < n && s[ps->i] >= '0' && s[ps->i] <= '9')
			ps->i++;
	}
	return 0;
}

/* Checks and skips any JSON value at ps->i (after whitespace); depth counts enclosing levels. */
static int skip_value(parser *ps, int depth)
{
	size_t a, b;
	bool esc;
	skip_ws(ps);
	if (ps->i >= ps->n)
		return bad(ps, "truncated: a value is missing");
	char c = ps->s[ps->i];
	if (c == '"')
		return string_token(ps, &a, &b, &esc);
	if (c == '-' || (c >= '0' && c <= '9'))
		return number_token(ps, &a);
	static const char *const lits[] = { "true", "false", "null" };
	for (int k = 0; k < 3; k++) {
		size_t ln = strlen(lits[k]);
		if (c == lits[k][0]) {
			if (ps->n - ps->i < ln || memcmp(ps->s + ps->i, lits[k], ln) != 0)
				return bad(ps, "bad literal");
			ps->i += ln;
			return 0;
		}
	}
	if (c != '{' && c != '[')
		return bad(ps, "not a JSON value");
	if (depth >= MAX_DEPTH)
		return bad(ps, "nested deeper than 32 levels");
	char close = c == '{' ? '}' : ']';
	ps->i++;
	skip_ws(ps);
	if (ps->i < ps->n && ps->s[ps->i] == close) {
		ps->i++;
		return 0;
	}
	for (;;) {
		int rc;
		if (close == '}') {
			skip_ws(ps);
			if (ps->i >= ps->n || ps->s[ps->i] != '"')
				return bad(ps, "expected a member name");
			if ((rc = string_token(ps, &a, &b, &esc)) != 0)
				return rc;
			skip_ws(ps);
			if (ps->i >= ps->n || ps->s[ps->i] != ':')
				return bad(ps, "expected ':'");
			ps->i++;
		}
		if ((rc = skip_value(ps, depth + 1)) != 0)
			return rc;
		skip_ws(ps);
		if (ps->i >= ps->n)
			return bad(ps, "truncated");
		if (ps->s[ps->i] == close) {
			ps->i++;
			return 0;
		}
		if (ps->s[ps->i] != ',')
			return bad(ps, close == '}' ? "expected ',' or '}'" : "expected ',' or ']'");
		ps->i++;
	}
}

/*
 * Which of our members the (already checked) member name s[a, b) names as restic's decoder
 * matches names: after unescaping, equal ignoring ASCII case, with U+212A matching 'k' and
 * U+017F matching 's'. Returns the member or -1; *exact says whether it is spelled exactly.
 */
static int member_of(const char *s, size_t a, size_t b, bool *exact)
{
	enum { MAXC = 18 }; /* the longest name, "chunker_polynomial" */
	uint32_t cp[MAXC];
	size_t nc = 0;
	*exact = false;
	for (size_t i = a; i < b;) {
		unsigned char c = (unsigned char)s[i];
		uint32_t u;
		if (nc == MAXC)
			return -1;
		if (c == '\\') {
			char e = s[i + 1];
			if (e == 'u') {
				u = 0;
				for (int k = 2; k < 6; k++)
					u = u << 4 | (uint32_t)hexval((unsigned char)s[i + k]);
				i += 6;
			} else {
				static const char from[] = "bfnrt", to[] = "\b\f\n\r\t";
				const char *f = strchr(from, e);
				u = f != NULL ? (unsigned char)to[f - from] : (unsigned char)e;
				i += 2;
			}
		} else if (c < 0x80) {
			u = c;
			i++;
		} else if (c == 0xC5 && i + 1 < b && (unsigned char)s[i + 1] == 0xBF) {
			u = 0x17F;
			i += 2;
		} else if (c == 0xE2 && i + 2 < b && (unsigned char)s[i + 1] == 0x84 &&
			   (unsigned char)s[i + 2] == 0xAA) {
			u = 0x212A;
			i += 3;
		} else {
			return -1; /* no other non-ASCII character folds to ASCII */
		}
		cp[nc++] = u;
	}
	for (int m = 0; m < M_COUNT; m++) {
		const char *name = member_names[m];
		if (strlen(name) != nc)
			continue;
		bool same = true, folded = true;
		for (size_t k = 0; k < nc; k++) {
			uint32_t u = cp[k], want = (unsigned char)name[k];
			if (u == want)
				continue;
			same = false;
			bool letter = want >= 'a' && want <= 'z';
			if (!(letter && u == want - 32) && !(want == 'k' && u == 0x212A) && !(want == 's' && u == 0x17F))
				folded = false;
		}
		if (same || folded) {
			*exact = same;
			return m;
		}
	}
	return -1;
}

static int parse_version(parser *ps, int *version)
{
	size_t a;
	char c = ps->s[ps->i];
	if (c != '-' && (c < '0' || c > '9'))
		return bad(ps, "\"version\" is not a number (want 1 or 2)");
	int rc = number_token(ps, &a);
	if (rc != 0)
		return rc;
	size_t len = ps->i - a;
	if (len == 1 && (ps->s[a] == '1' || ps->s[a] == '2')) {
		*version = ps->s[a] - '0';
		return 0;
	}
	return rix_error_set(RIX_ECORRUPT, "config: \"version\" is %.*s, want 1 or 2, at byte %zu",
			     len > 24 ? 24 : (int)len, ps->s + a, a);
}

static int parse_id(parser *ps, rix_id *id)
{
	size_t a, b;
	bool esc;
	if (ps->s[ps->i] != '"')
		return bad(ps, "\"id\" is not a string");
	size_t at = ps->i;
	int rc = string_token(ps, &a, &b, &esc);
	if (rc != 0)
		return rc;
	/* An escape fails the hex test: restic never writes one here. */
	if (b - a != 2 * RIX_ID_SIZE || rix_id_from_hex(id, ps->s + a, b - a) != 0)
		return rix_error_set(RIX_ECORRUPT, "config: \"id\" is not 64 hex digits (%zu bytes) at byte %zu",
				     b - a, at);
	return 0;
}

static int parse_polynomial(parser *ps, uint64_t *pol)
{
	size_t a, b;
	bool esc;
	if (ps->s[ps->i] != '"')
		return bad(ps, "\"chunker_polynomial\" is not a string");
	size_t at = ps->i;
	int rc = string_token(ps, &a, &b, &esc);
	if (rc != 0)
		return rc;
	if (a == b)
		return rix_error_set(RIX_ECORRUPT, "config: \"chunker_polynomial\" is empty at byte %zu", at);
	uint64_t v = 0;
	for (size_t i = a; i < b; i++) {
		int h = hexval((unsigned char)ps->s[i]);
		if (h < 0)
			return rix_error_set(RIX_ECORRUPT, "config: \"chunker_polynomial\" is not hex (byte %zu)", i);
		if (v >> 60 != 0)
			return rix_error_set(RIX_ECORRUPT,
					     "config: \"chunker_polynomial\" does not fit in 64 bits at byte %zu", at);
		v = v << 4 | (uint64_t)h;
	}
	if (v == 0)
		return rix_error_set(RIX_ECORRUPT, "config: \"chunker_polynomial\" is zero at byte %zu", at);
	if ((rc = polynomial_verdict(v, RIX_ECORRUPT, "config: ")) != 0)
		return rc;
	*pol = v;
	return 0;
}

int rix_config_parse(const char *json, size_t len, rix_config *out)
{
	if (len > RIX_CONFIG_MAX_SIZE)
		return rix_error_set(RIX_ECORRUPT, "config: %zu bytes of JSON, more than %u", len, RIX_CONFIG_MAX_SIZE);
	parser p = { json, len, 0 }, *ps = &p;
	rix_config cfg;
	memset(&cfg, 0, sizeof(cfg));
	bool seen[M_COUNT] = { false };
	int rc;
	skip_ws(ps);
	if (ps->i >= ps->n)
		return bad(ps, "empty: want a JSON object");
	if (ps->s[ps->i] != '{')
		return bad(ps, "not a JSON object");
	ps->i++;
	skip_ws(ps);
	if (ps->i < ps->n && ps->s[ps->i] == '}') {
		ps->i++;
	} else {
		for (;;) {
			size_t a, b, at;
			bool esc, exact;
			skip_ws(ps);
			if (ps->i >= ps->n || ps->s[ps->i] != '"')
				return bad(ps, ps->i >= ps->n ? "truncated" : "expected a member name");
			at = ps->i;
			if ((rc = string_token(ps, &a, &b, &esc)) != 0)
				return rc;
			int m = member_of(ps->s, a, b, &exact);
			skip_ws(ps);
			if (ps->i >= ps->n || ps->s[ps->i] != ':')
				return bad(ps, ps->i >= ps->n ? "truncated" : "expected ':'");
			ps->i++;
			if (m >= 0 && !exact)
				return rix_error_set(RIX_ECORRUPT,
						     "config: member at byte %zu is \"%s\" to restic (whose names ignore case) "
						     "but not spelled so", at, member_names[m]);
			if (m >= 0 && seen[m])
				return rix_error_set(RIX_ECORRUPT, "config: duplicate \"%s\" at byte %zu", member_names[m], at);
			if (m < 0) {
				rc = skip_value(ps, 1);
			} else {
				seen[m] = true;
				skip_ws(ps);
				if (ps->i >= ps->n)
					return bad(ps, "truncated");
				rc = m == M_VERSION ? parse_version(ps, &cfg.version)
				     : m == M_ID    ? parse_id(ps, &cfg.id)
						    : parse_polynomial(ps, &cfg.chunker_polynomial);
			}
			if (rc != 0)
				return rc;
			skip_ws(ps);
			if (ps->i >= ps->n)
				return bad(ps, "truncated");
			if (ps->s[ps->i] == '}') {
				ps->i++;
				break;
			}
			if (ps->s[ps->i] != ',')
				return bad(ps, "expected ',' or '}'");
			ps->i++;
		}
	}
	skip_ws(ps);
	if (ps->i != ps->n)
		return bad(ps, "trailing bytes after the object");
	for (int m = 0; m < M_COUNT; m++)
		if (!seen[m])
			return rix_error_set(RIX_ECORRUPT, "config: member \"%s\" is missing", member_names[m]);
	*out = cfg;
	return 0;
}

/* {"version":N,"id":"<64>","chunker_polynomial":"<at most 16>"} */
#define ENCODED_MAX (sizeof("{\"version\":2,\"id\":\"\",\"chunker_polynomial\":\"\"}") + 64 + 16)

int rix_config_encode(const rix_config *cfg, char **json, size_t *len)
{
	*json = NULL;
	*len = 0;
	if (cfg->version != 1 && cfg->version != 2)
		return rix_error_set(RIX_EINVAL, "config: version %d, want 1 or 2", cfg->version);
	int rc = polynomial_verdict(cfg->chunker_polynomial, RIX_EINVAL, "config: ");
	if (rc != 0)
		return rc;
	char hex[2 * RIX_ID_SIZE + 1];
	rix_id_to_hex(&cfg->id, hex);
	char *buf = rix_malloc(ENCODED_MAX);
	if (buf == NULL)
		return rix_error_set(RIX_ENOMEM, "config: out of memory");
	int k = snprintf(buf, ENCODED_MAX, "{\"version\":%d,\"id\":\"%s\",\"chunker_polynomial\":\"%llx\"}",
			 cfg->version, hex, (unsigned long long)cfg->chunker_polynomial);
	*json = buf;
	*len = (size_t)k;
	return 0;
}

int rix_config_open(const rix_key *key, const uint8_t *file, size_t n, rix_config *out)
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
		rc = rix_config_parse((const char *)plain, plain_len, out);
	rix_free(plain);
	return rc;
}

int rix_config_seal(const rix_key *key, const rix_config *cfg, uint8_t **file, size_t *n)
{
	*file = NULL;
	*n = 0;
	char *json;
	size_t len;
	int rc = rix_config_encode(cfg, &json, &len);
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

int rix_config_new(int version, rix_config *out)
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
