/*
 * common/json_scan.c — the out-of-line half of the JSON scanner (see json_scan.h): error
 * messages, the validating skippers, and key matching as restic's decoder matches keys.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "rix/error.h"
#include "json_scan.h"

_Static_assert(RIX_JSON_MAX_DEPTH <= 64, "the skipper's container stack is one uint64_t");
_Static_assert(RIX_JSON_MAX_KEYS <= 32, "the seen mask is one uint32_t");

const uint8_t rix__json_hexval[256] = {
#define X8 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80
#define X16 X8, X8
	X16, X16, X16,
	0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,	/* 0x30 */
	0x80, 10, 11, 12, 13, 14, 15, 0x80, X8,					/* 0x40 */
	X16,									/* 0x50 */
	0x80, 10, 11, 12, 13, 14, 15, 0x80, X8,					/* 0x60 */
	X16,									/* 0x70 */
	X16, X16, X16, X16, X16, X16, X16, X16					/* 0x80.. */
#undef X16
#undef X8
};

int rix__json_corrupt(const rix__json *j, const char *p, const char *what)
{
	return rix_error_set(RIX_ECORRUPT, "%s: %s at byte %zu", j->name, what, j->origin + (size_t)(p - j->base));
}

int rix__json_truncated(const rix__json *j)
{
	return rix__json_corrupt(j, j->end, "unexpected end of text");
}

/* ==== Skipping values ===================================================================== */

int rix__json_skip_string(const rix__json *j, const char **pp)
{
	const char *p = *pp, *end = j->end;
	for (;;) {
		if (p >= end)
			return rix__json_truncated(j);
		unsigned char c = (unsigned char)*p;
		if (c == '"') {
			*pp = p + 1;
			return 0;
		}
		if (c < 0x20)
			return rix__json_corrupt(j, p, "control character in string");
		if (c != '\\') {
			p++;
			continue;
		}
		if (end - p < 2)
			return rix__json_truncated(j);
		switch (p[1]) {
		case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
			p += 2;
			break;
		case 'u':
			for (int i = 2; i < 6; i++) {
				if (p + i >= end)
					return rix__json_truncated(j);
				if (rix__json_hexval[(unsigned char)p[i]] & 0x80)
					return rix__json_corrupt(j, p + i, "bad \\u escape in string");
			}
			p += 6;
			break;
		default:
			return rix__json_corrupt(j, p, "bad escape in string");
		}
	}
}

int rix__json_skip_number(const rix__json *j, const char **pp)
{
	const char *p = *pp, *end = j->end;
	if (p < end && *p == '-')
		p++;
	if (p >= end)
		return rix__json_truncated(j);
	if (*p == '0')
		p++;
	else if (rix__json_is_digit(p, end))
		while (rix__json_is_digit(p, end))
			p++;
	else
		return rix__json_corrupt(j, p, "bad number");
	if (p < end && *p == '.') {
		p++;
		if (p >= end)
			return rix__json_truncated(j);
		if (!rix__json_is_digit(p, end))
			return rix__json_corrupt(j, p, "bad number fraction");
		while (rix__json_is_digit(p, end))
			p++;
	}
	if (p < end && (*p == 'e' || *p == 'E')) {
		p++;
		if (p < end && (*p == '+' || *p == '-'))
			p++;
		if (p >= end)
			return rix__json_truncated(j);
		if (!rix__json_is_digit(p, end))
			return rix__json_corrupt(j, p, "bad number exponent");
		while (rix__json_is_digit(p, end))
			p++;
	}
	*pp = p;
	return 0;
}

int rix__json_skip_literal(const rix__json *j, const char **pp, const char *lit, size_t n)
{
	const char *p = *pp;
	size_t have = (size_t)(j->end - p);
	if (memcmp(p, lit, have < n ? have : n) != 0)
		return rix__json_corrupt(j, p, "bad literal");
	if (have < n)
		return rix__json_truncated(j);
	*pp = p + n;
	return 0;
}

int rix__json_take_null(const rix__json *j, const char **pp)
{
	const char *p = rix__json_skip_ws(*pp, j->end);
	if (p < j->end && *p == 'n') {
		int rc = rix__json_skip_literal(j, &p, "null", 4);
		if (rc != 0)
			return rc;
		*pp = p;
		return 1;
	}
	*pp = p;
	return 0;
}

/*
 * Iterative: `open` containers are open inside this value, and bit i of `objs` says whether
 * the i-th of them (from the outside) is an object. depth + open <= RIX_JSON_MAX_DEPTH <= 64.
 */
int rix__json_skip_value(const rix__json *j, const char **pp, int depth)
{
	const char *p = *pp, *end = j->end;
	uint64_t objs = 0;
	int open = 0, rc;

value:
	p = rix__json_skip_ws(p, end);
	if (p >= end)
		return rix__json_truncated(j);
	switch (*p) {
	case '{':
	case '[':
		if (depth + open + 1 > RIX_JSON_MAX_DEPTH)
			return rix__json_corrupt(j, p, "nesting too deep");
		objs = (objs & ~(UINT64_C(1) << open)) | ((uint64_t)(*p == '{') << open);
		open++;
		p = rix__json_skip_ws(p + 1, end);
		if (p >= end)
			return rix__json_truncated(j);
		if (*p == (objs >> (open - 1) & 1 ? '}' : ']')) {
			p++;
			open--;
			goto after;
		}
		if (objs >> (open - 1) & 1)
			goto key;
		goto value;
	case '"':
		p++;
		rc = rix__json_skip_string(j, &p);
		break;
	case 't':
		rc = rix__json_skip_literal(j, &p, "true", 4);
		break;
	case 'f':
		rc = rix__json_skip_literal(j, &p, "false", 5);
		break;
	case 'n':
		rc = rix__json_skip_literal(j, &p, "null", 4);
		break;
	default:
		if (*p == '-' || rix__json_is_digit(p, end)) {
			rc = rix__json_skip_number(j, &p);
			break;
		}
		return rix__json_corrupt(j, p, "expected a value");
	}
	if (rc != 0)
		return rc;
after:
	if (open == 0) {
		*pp = p;
		return 0;
	}
	p = rix__json_skip_ws(p, end);
	if (p >= end)
		return rix__json_truncated(j);
	if (objs >> (open - 1) & 1) {
		if (*p == ',') {
			p++;
			goto key;
		}
		if (*p != '}')
			return rix__json_corrupt(j, p, "expected ',' or '}'");
	} else {
		if (*p == ',') {
			p++;
			goto value;
		}
		if (*p != ']')
			return rix__json_corrupt(j, p, "expected ',' or ']'");
	}
	p++;
	open--;
	goto after;
key:
	p = rix__json_skip_ws(p, end);
	if (p >= end)
		return rix__json_truncated(j);
	if (*p != '"')
		return rix__json_corrupt(j, p, "expected a key string");
	p++;
	rc = rix__json_skip_string(j, &p);
	if (rc != 0)
		return rc;
	rc = rix__json_expect(j, &p, ':', "expected ':'");
	if (rc != 0)
		return rc;
	goto value;
}

/* ==== Keys as restic reads them ============================================================ */

/*
 * The key s[0..n) (the raw bytes between the quotes, already validated) as Go's decoder sees it
 * when it matches ASCII names: unescaped (exact[]) and each rune folded (folded[]: ASCII letters
 * to lower case, U+212A to 'k', U+017F to 's', other ASCII unchanged; in exact[] those two runes
 * are 0, which no name holds). Any other rune (valid multi-byte UTF-8, invalid bytes, which Go
 * reads as U+FFFD, a \u escape above 0x7F, surrogate halves and pairs) folds to no ASCII
 * character, so such a key can match no name: returns false. Also false if the key has more
 * than cap runes. Otherwise true, with *len runes in exact[] and folded[].
 */
static bool fold_key(const char *s, size_t n, char *exact, char *folded, size_t cap, size_t *len)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t k = 0;
	for (size_t i = 0; i < n;) {
		uint32_t r;
		if (u[i] == '\\') {
			unsigned char e = u[i + 1];
			if (e == 'u') {
				r = 0;
				for (int h = 2; h < 6; h++)
					r = r << 4 | rix__json_hexval[u[i + h]];
				i += 6;
			} else {
				static const char from[] = "bfnrt", to[] = "\b\f\n\r\t";
				const char *f = memchr(from, e, 5);
				r = f != NULL ? (unsigned char)to[f - from] : e; /* '"', '\\', '/' */
				i += 2;
			}
		} else if (u[i] < 0x80) {
			r = u[i++];
		} else if (u[i] == 0xC5 && i + 1 < n && u[i + 1] == 0xBF) {
			r = 0x17F;
			i += 2;
		} else if (u[i] == 0xE2 && i + 2 < n && u[i + 1] == 0x84 && u[i + 2] == 0xAA) {
			r = 0x212A;
			i += 3;
		} else {
			return false;
		}
		if (k == cap)
			return false;
		if (r == 0x17F || r == 0x212A) {
			exact[k] = 0;
			folded[k] = r == 0x17F ? 's' : 'k';
		} else if (r < 0x80) {
			exact[k] = (char)r;
			folded[k] = (char)(r >= 'A' && r <= 'Z' ? r + ('a' - 'A') : r);
		} else {
			return false;
		}
		k++;
	}
	*len = k;
	return true;
}

static inline char ascii_lower(char c)
{
	return c >= 'A' && c <= 'Z' ? (char)(c + ('a' - 'A')) : c;
}

int rix__json_duplicate(const rix__json *j, const char *p, const char *name)
{
	return rix_error_set(RIX_ECORRUPT, "%s: duplicate key \"%s\" at byte %zu", j->name, name,
			     j->origin + (size_t)(p - j->base));
}

int rix__json_member_slow(const rix__json *j, const char **pp, const rix__json_key *keys, unsigned nkeys,
			  uint32_t *seen, int *k)
{
	const char *p = rix__json_skip_ws(*pp, j->end), *key;
	int rc;
	if (p >= j->end)
		return rix__json_truncated(j);
	if (*p != '"')
		return rix__json_corrupt(j, p, "expected a key string");
	key = p++;
	rc = rix__json_skip_string(j, &p);
	if (rc != 0)
		return rc;

	/* Which known key restic reads it as, if any: exactly (after unescaping) or by folding. */
	char exact[64], folded[64];
	size_t len;
	int found = -1;
	if (fold_key(key + 1, (size_t)(p - 1 - (key + 1)), exact, folded, sizeof(folded), &len)) {
		for (unsigned i = 0; i < nkeys && found < 0; i++)
			if (keys[i].len == len && memcmp(exact, keys[i].name, len) == 0)
				found = (int)i;
		for (unsigned i = 0; i < nkeys && found < 0; i++) {
			const rix__json_key *w = &keys[i];
			size_t c = 0;
			while (w->len == len && c < len && folded[c] == ascii_lower(w->name[c]))
				c++;
			if (w->len == len && c == len)
				return rix_error_set(RIX_ECORRUPT,
						     "%s: key at byte %zu reads as \"%s\" to restic (key names ignore "
						     "case there) but is not spelled so",
						     j->name, j->origin + (size_t)(key - j->base), w->name);
		}
	}
	if (found >= 0) {
		if (*seen & (UINT32_C(1) << found))
			return rix__json_duplicate(j, key, keys[found].name);
		*seen |= UINT32_C(1) << found;
	}
	rc = p < j->end && *p == ':' ? (p++, 0) : rix__json_expect(j, &p, ':', "expected ':' after key");
	if (rc != 0)
		return rc;
	*pp = p;
	*k = found;
	return 0;
}
