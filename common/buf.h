/*
 * common/buf.h — a growing byte buffer for the encoders that write restic's JSON (tree blobs,
 * snapshots); private to librix.
 *
 * Appends never report: the first allocation that fails sets `failed`, every later append is
 * dropped, and the owner checks `failed` once when the text is done (then rolls back to a mark
 * and clears it, or gives up). There is always room for a NUL after the bytes appended (not
 * written: the owner adds it when it wants one). The capacity doubles from 1 KiB.
 *
 *   rix__buf b = { 0 };
 *   rix__buf_puts(&b, "{\"a\":");
 *   rix__buf_put_json_string(&b, s, n);
 *   if (b.failed) ... else use b.p[0..b.len)
 *   rix__buf_free(&b);
 */
#ifndef RIX_COMMON_BUF_H
#define RIX_COMMON_BUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct rix__buf {
	uint8_t *p;   /* len bytes, cap allocated (rix_malloc); NULL while cap is 0 */
	size_t len, cap;
	bool failed;  /* an allocation failed: appends are dropped until the owner clears it */
} rix__buf;

/* The slow path of rix__buf_reserve: grows b. */
bool rix__buf_grow(rix__buf *b, size_t n);

/* Room for n more bytes and a NUL; false (failed set) when out of memory or failed already. */
static inline bool rix__buf_reserve(rix__buf *b, size_t n)
{
	return (!b->failed && n < b->cap - b->len) || rix__buf_grow(b, n);
}

/* Appends s[0..n). */
static inline void rix__buf_put(rix__buf *b, const void *s, size_t n)
{
	if (rix__buf_reserve(b, n)) {
		memcpy(b->p + b->len, s, n);
		b->len += n;
	}
}

/* Appends the C string s. */
static inline void rix__buf_puts(rix__buf *b, const char *s)
{
	rix__buf_put(b, s, strlen(s));
}

/* Appends s[0..n) as a quoted JSON string with Go's escapes (common/gojson.h). */
void rix__buf_put_json_string(rix__buf *b, const uint8_t *s, size_t n);

/* Frees b's bytes; b is empty (and not failed) afterwards. */
void rix__buf_free(rix__buf *b);

#endif
