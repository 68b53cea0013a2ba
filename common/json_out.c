/*
 * common/json_out.c — JSON strings as Go's encoding/json writes them (json_out.h).
 */
#include <string.h>

#include "json_out.h"

int32_t rix__utf8_rune(const uint8_t *s, size_t n, size_t *w)
{
	uint8_t c = s[0];
	*w = 1;
	if (c < 0x80)
		return c;
	int len = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 && c <= 0xDF ? 2 : 0;
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

/* Appends s[0..n) at out + *k, as far as cap allows; *k counts every byte. */
static void emit(char *out, size_t cap, size_t *k, const void *s, size_t n)
{
	const char *c = s;
	if (*k <= cap && n <= cap - *k) { /* the usual case: it fits */
		memcpy(out + *k, c, n);
		*k += n;
		return;
	}
	for (size_t i = 0; i < n; i++, ++*k)
		if (*k < cap)
			out[*k] = c[i];
}

size_t rix__json_quote(char *out, size_t cap, const uint8_t *s, size_t n)
{
	static const char hexdig[] = "0123456789abcdef";
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
