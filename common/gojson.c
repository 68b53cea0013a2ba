/*
 * common/gojson.c — JSON strings with Go's escapes, both ways (gojson.h).
 */
#include <string.h>

#include "rix/alloc.h"
#include "rix/error.h"
#include "gojson.h"

static const char hexdig[] = "0123456789abcdef";

int32_t rix__utf8_rune(const uint8_t *s, size_t n, size_t *w)
{
	uint8_t c = s[0];
	*w = 1;
	if (c < 0x80)
		return c;
	/* F5..FF start nothing (they are not three-byte leads: F5 80 80 is no U+5000). */
	int len = c >= 0xF5 ? 0 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;
	if (len == 0 || (size_t)len > n)
		return -1;
	int32_t r = len == 2 ? c & 0x1F : len == 3 ? c & 0x0F : c & 0x07;
	for (int i = 1; i < len; i++) {
		if ((s[i] & 0xC0) != 0x80)
			return -1;
		r = r << 6 | (s[i] & 0x3F);
	}
	/* overlong forms, surrogates, past U+10FFFF */
	if ((len == 3 && r < 0x800) || (len == 4 && (r < 0x10000 || r > 0x10FFFF)) || (r >= 0xD800 && r <= 0xDFFF))
		return -1;
	*w = (size_t)len;
	return r;
}

/* Appends s[0..n) at out + *k as far as cap allows; *k counts every byte. */
static void emit(uint8_t *out, size_t cap, size_t *k, const void *s, size_t n)
{
	const uint8_t *c = s;
	if (*k <= cap && n <= cap - *k) { /* the usual case: it fits */
		memcpy(out + *k, c, n);
		*k += n;
		return;
	}
	for (size_t i = 0; i < n; i++, ++*k)
		if (*k < cap)
			out[*k] = c[i];
}

size_t rix__gojson_string(uint8_t *out, size_t cap, const uint8_t *s, size_t n)
{
	size_t k = 0, start = 0;
	emit(out, cap, &k, "\"", 1);
	for (size_t i = 0; i < n;) {
		uint8_t c = s[i];
		if (c < 0x80) {
			if (c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&') {
				i++;
				continue;
			}
			emit(out, cap, &k, s + start, i - start);
			if (c == '"' || c == '\\') {
				char esc[2] = { '\\', (char)c };
				emit(out, cap, &k, esc, 2);
			} else if (c == '\n' || c == '\r' || c == '\t') {
				char esc[2] = { '\\', c == '\n' ? 'n' : c == '\r' ? 'r' : 't' };
				emit(out, cap, &k, esc, 2);
			} else {
				char u[6] = { '\\', 'u', '0', '0', hexdig[c >> 4], hexdig[c & 15] };
				emit(out, cap, &k, u, 6);
			}
			start = ++i;
			continue;
		}
		size_t w;
		int32_t r = rix__utf8_rune(s + i, n - i, &w);
		if (r < 0 || r == 0x2028 || r == 0x2029) {
			emit(out, cap, &k, s + start, i - start);
			emit(out, cap, &k, r < 0 ? "\\ufffd" : r == 0x2028 ? "\\u2028" : "\\u2029", 6);
			i += w;
			start = i;
			continue;
		}
		i += w;
	}
	emit(out, cap, &k, s + start, n - start);
	emit(out, cap, &k, "\"", 1);
	return k;
}

static size_t put_rune(char *o, int32_t r)
{
	uint8_t *u = (uint8_t *)o;
	if (r < 0x80) {
		u[0] = (uint8_t)r;
		return 1;
	}
	if (r < 0x800) {
		u[0] = (uint8_t)(0xC0 | r >> 6);
		u[1] = (uint8_t)(0x80 | (r & 0x3F));
		return 2;
	}
	if (r < 0x10000) {
		u[0] = (uint8_t)(0xE0 | r >> 12);
		u[1] = (uint8_t)(0x80 | (r >> 6 & 0x3F));
		u[2] = (uint8_t)(0x80 | (r & 0x3F));
		return 3;
	}
	u[0] = (uint8_t)(0xF0 | r >> 18);
	u[1] = (uint8_t)(0x80 | (r >> 12 & 0x3F));
	u[2] = (uint8_t)(0x80 | (r >> 6 & 0x3F));
	u[3] = (uint8_t)(0x80 | (r & 0x3F));
	return 4;
}

/* The four hex digits at s (validated). */
static int32_t hex4(const char *s)
{
	int32_t v = 0;
	for (int i = 0; i < 4; i++) {
		char c = s[i];
		v = v << 4 | (c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
	}
	return v;
}

size_t rix__gojson_unescape(char *o, const char *s, size_t n, bool *nul)
{
	size_t k = 0;
	const uint8_t *u = (const uint8_t *)s;
	*nul = false;
	for (size_t i = 0; i < n;) {
		int32_t r;
		if (s[i] == '\\') {
			char e = s[i + 1];
			if (e != 'u') {
				static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
				o[k++] = to[strchr(from, e) - from];
				i += 2;
				continue;
			}
			r = hex4(s + i + 2);
			i += 6;
			if (r >= 0xD800 && r <= 0xDFFF) {
				/* A high surrogate followed by an escaped low one is one rune; else U+FFFD. */
				if (r < 0xDC00 && n - i >= 6 && s[i] == '\\' && s[i + 1] == 'u') {
					int32_t lo = hex4(s + i + 2);
					if (lo >= 0xDC00 && lo <= 0xDFFF) {
						r = 0x10000 + ((r - 0xD800) << 10) + (lo - 0xDC00);
						i += 6;
					} else {
						r = 0xFFFD;
					}
				} else {
					r = 0xFFFD;
				}
			}
		} else if (u[i] < 0x80) {
			r = u[i++];
		} else {
			size_t w;
			r = rix__utf8_rune(u + i, n - i, &w);
			if (r < 0)
				r = 0xFFFD;
			i += w;
		}
		*nul |= r == 0;
		k += put_rune(o + k, r);
	}
	o[k] = '\0';
	return k;
}

int rix__gojson_unquote(char **out, size_t *len, const char *s, size_t n)
{
	*out = NULL;
	*len = 0;
	if (n > (SIZE_MAX - 1) / 3)
		return rix_error_set(RIX_ENOMEM, "JSON string of %zu bytes: too long", n);
	char *o = rix_malloc(3 * n + 1);
	if (o == NULL)
		return rix_error_set(RIX_ENOMEM, "out of memory for a JSON string of %zu bytes", n);
	bool nul;
	size_t k = rix__gojson_unescape(o, s, n, &nul);
	if (nul) {
		rix_free(o);
		return 1;
	}
	*out = o;
	*len = k;
	return 0;
}
