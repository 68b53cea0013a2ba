/*
 * common/json_scan.h — the one hand-written JSON scanner of librix (private).
 *
 * The index decoder (index/index_json.c) and the config parser (repo/config.c) read restic's
 * JSON without a DOM. Both build on these pieces, so that they agree on what JSON is, how deep
 * it may nest and how an object's keys are matched. jansson is used where rix reads JSON it
 * does not interpret strictly (key files, locks, trees); see common/jansson_alloc.h.
 *
 * Depends on libc and rix/error.h only (index/ includes it and stays dependency-free).
 *
 * Text: RFC 8259 JSON between j->base and j->end, whitespace = space, tab, CR, LF. The text need
 * not be NUL-terminated; no byte at or past j->end is ever read. Strings may hold any bytes but
 * raw control characters (invalid UTF-8 is accepted, as Go's encoding/json accepts it). A
 * streaming decoder (the index's, index/index_json.c) gives the scanner a window of the text at a
 * time: j->origin says where the window starts, so that messages still count from the text's
 * first byte; running into j->end then means only "not in the window yet".
 *
 * Depth: one limit, RIX_JSON_MAX_DEPTH levels of arrays and objects counted from the top value
 * (the top object or array is level 1). Skipping is iterative (a 64-bit stack of "is an
 * object" bits), so hostile nesting cannot exhaust the C stack. Go allows 10000 levels; restic's
 * own files use at most 5.
 *
 * Keys: how restic reads them, and the one rule rix follows
 * ---------------------------------------------------------
 * Go's encoding/json unescapes a key, looks for a field of exactly that name, and failing that
 * for one that is equal under Unicode simple case folding (bytes.EqualFold, its foldName). For
 * the ASCII names restic uses that means: ASCII letters match either case, U+212A KELVIN SIGN
 * matches 'k' and U+017F LATIN SMALL LETTER LONG S matches 's' (these are the only non-ASCII
 * runes whose fold orbit holds an ASCII letter; U+0130 and U+0131 fold only to themselves).
 * A key given twice is decoded twice and the last value wins (a later null keeps the earlier
 * one). Unknown keys are skipped.
 *
 * rix__json_member() applies, for each object, the set of keys that object knows:
 *   - a key equal to a known key once unescaped (what Go matches by exact name) is that key;
 *   - a key that Go matches to a known key only by folding (another case, K or ſ, raw or
 *     escaped: "Offset", "offSet", "o\u0066f\u017fet") is refused as RIX_ECORRUPT;
 *   - a known key given a second time in one object is refused as RIX_ECORRUPT;
 *   - any other key is unknown: the caller skips its (validated) value.
 * Refusing is the only rule under which a file can never mean one thing to restic and another
 * to rix: every file rix accepts, restic reads the same way (for a folded key, restic's value
 * depends on the order of the members and on null; for a duplicate, the last one wins). restic
 * itself never writes such keys, so nothing it wrote is refused.
 *
 * Errors are RIX_ECORRUPT with "<j->name>: <what> at byte <offset>".
 */
#ifndef RIX_JSON_SCAN_H
#define RIX_JSON_SCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Levels of arrays/objects allowed in a whole document (the top value is level 1). */
#define RIX_JSON_MAX_DEPTH 64

typedef struct rix__json {
	const char *base; /* start of the text: offsets in messages count from here */
	const char *end;  /* one past the last byte */
	const char *name; /* message prefix, e.g. "index JSON" */
	size_t origin;    /* offset of base in the whole text (a streaming decoder's window): added to
			     every offset a message names, so that it counts from the text's start */
} rix__json;

/* A key an object knows, spelled as restic writes it (ASCII, no '"' or '\\', 1..64 bytes). */
typedef struct rix__json_key {
	const char *name;
	size_t len;
} rix__json_key;

#define RIX_JSON_KEY(s) { s, sizeof(s) - 1 }

/* Known keys per object: at most this many (a 32-bit "seen" mask). */
#define RIX_JSON_MAX_KEYS 32

/* Hex digit value, or 0x80 for a byte that is not a hex digit. */
extern const uint8_t rix__json_hexval[256];

/* RIX_ECORRUPT with "<name>: <what> at byte <origin + p - base>". */
int rix__json_corrupt(const rix__json *j, const char *p, const char *what)
#if defined(__GNUC__)
	__attribute__((cold))
#endif
	;

/* RIX_ECORRUPT: "unexpected end of text" at j->end. */
int rix__json_truncated(const rix__json *j)
#if defined(__GNUC__)
	__attribute__((cold))
#endif
	;

static inline bool rix__json_is_ws(unsigned char c)
{
	return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

static inline const char *rix__json_skip_ws(const char *p, const char *end)
{
	while (p < end && rix__json_is_ws((unsigned char)*p))
		p++;
	return p;
}

static inline bool rix__json_is_digit(const char *p, const char *end)
{
	return p < end && (unsigned)((unsigned char)*p - '0') <= 9;
}

/* Skips whitespace and checks that the next byte is c; *pp is then past it. */
static inline int rix__json_expect(const rix__json *j, const char **pp, char c, const char *what)
{
	const char *p = rix__json_skip_ws(*pp, j->end);
	if (p >= j->end)
		return rix__json_truncated(j);
	if (*p != c)
		return rix__json_corrupt(j, p, what);
	*pp = p + 1;
	return 0;
}

/*
 * Skips the rest of a string whose opening quote is at (*pp)[-1], checking its escapes (\uXXXX
 * included) and that it holds no raw control character; *pp is then past the closing quote.
 */
int rix__json_skip_string(const rix__json *j, const char **pp);

/* Skips a number (the full JSON grammar) starting at *pp. */
int rix__json_skip_number(const rix__json *j, const char **pp);

/* Skips the literal lit[0..n) at *pp ("true", "false" or "null"). */
int rix__json_skip_literal(const rix__json *j, const char **pp, const char *lit, size_t n);

/*
 * Skips one value (after whitespace), validating it. depth = the number of arrays/objects that
 * enclose it; a container would be level depth + 1, refused beyond RIX_JSON_MAX_DEPTH.
 */
int rix__json_skip_value(const rix__json *j, const char **pp, int depth);

/* Skips whitespace; 1 if the value at *pp is null (consumed), 0 if not (*pp at it), < 0 error. */
int rix__json_take_null(const rix__json *j, const char **pp);

/*
 * Opens an object or array: skips whitespace and checks for `open`. Returns 1 if it has
 * members (*pp at the first), 0 if it is empty (consumed whole), < 0 on error.
 */
static inline int rix__json_open(const rix__json *j, const char **pp, char open, const char *what)
{
	int rc = rix__json_expect(j, pp, open, what);
	if (rc != 0)
		return rc;
	const char *p = rix__json_skip_ws(*pp, j->end);
	if (p >= j->end)
		return rix__json_truncated(j);
	if (*p == (open == '{' ? '}' : ']')) {
		*pp = p + 1;
		return 0;
	}
	*pp = p;
	return 1;
}

/*
 * After a member or element: reads ',' (returns 1: more follow) or the closer (returns 0: done),
 * after any whitespace. < 0 on error.
 */
static inline int rix__json_next(const rix__json *j, const char **pp, char closer)
{
	const char *p = *pp;
	if (p < j->end && *p == ',') {
		*pp = p + 1;
		return 1;
	}
	p = rix__json_skip_ws(p, j->end);
	if (p >= j->end)
		return rix__json_truncated(j);
	if (*p == ',') {
		*pp = p + 1;
		return 1;
	}
	if (*p == closer) {
		*pp = p + 1;
		return 0;
	}
	return rix__json_corrupt(j, p, closer == '}' ? "expected ',' or '}'" : "expected ',' or ']'");
}

/* RIX_ECORRUPT: "duplicate key \"<name>\"" at p. */
int rix__json_duplicate(const rix__json *j, const char *p, const char *name)
#if defined(__GNUC__)
	__attribute__((cold))
#endif
	;

/* rix__json_member() for every key that is not byte-for-byte one of keys[] (out of line). */
int rix__json_member_slow(const rix__json *j, const char **pp, const rix__json_key *keys, unsigned nkeys,
			  uint32_t *seen, int *k);

/*
 * Reads an object member's key and the ':' after it, by the rule above. *pp is at the key's
 * opening quote or at whitespace before it; on success it is past the ':' and *k is the index
 * of the known key in keys[0..nkeys) (bit *k is then set in *seen, which starts at 0 for each
 * object), or -1 for an unknown key.
 */
static inline int rix__json_member(const rix__json *j, const char **pp, const rix__json_key *keys,
				   unsigned nkeys, uint32_t *seen, int *k)
{
	const char *p = *pp, *end = j->end;
	if (p < end && *p != '"')
		p = rix__json_skip_ws(p, end);
	if (p < end && *p == '"') {
		const char *q = p + 1;
		for (unsigned i = 0; i < nkeys; i++) {
			size_t n = keys[i].len;
			if ((size_t)(end - q) <= n || q[n] != '"' || memcmp(q, keys[i].name, n) != 0)
				continue;
			if (*seen & (UINT32_C(1) << i))
				return rix__json_duplicate(j, p, keys[i].name);
			q += n + 1;
			if (q < end && *q == ':') {
				q++;
			} else {
				int rc = rix__json_expect(j, &q, ':', "expected ':' after key");
				if (rc != 0)
					return rc;
			}
			*seen |= UINT32_C(1) << i;
			*pp = q;
			*k = (int)i;
			return 0;
		}
	}
	*pp = p;
	return rix__json_member_slow(j, pp, keys, nkeys, seen, k);
}

#endif
