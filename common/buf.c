/*
 * common/buf.c — the growing buffer of the JSON encoders (common/buf.h).
 */
#include "buf.h"

#include "rix/alloc.h"
#include "gojson.h"

bool rix__buf_grow(rix__buf *b, size_t n)
{
	if (b->failed)
		return false;
	if (n >= b->cap - b->len) {
		if (n > SIZE_MAX / 4 - b->len) { /* the doubling below cannot overflow */
			b->failed = true;
			return false;
		}
		size_t c = b->cap ? b->cap : 1024;
		while (c <= b->len + n)
			c *= 2;
		uint8_t *q = rix_realloc(b->p, c);
		if (q == NULL) {
			b->failed = true;
			return false;
		}
		b->p = q;
		b->cap = c;
	}
	return true;
}

void rix__buf_put_json_string(rix__buf *b, const uint8_t *s, size_t n)
{
	if (n > (SIZE_MAX / 4 - 2) / 6) {
		b->failed = true;
		return;
	}
	if (rix__buf_reserve(b, RIX_GOJSON_STRING_MAX(n)))
		b->len += rix__gojson_string(b->p + b->len, b->cap - b->len, s, n);
}

void rix__buf_free(rix__buf *b)
{
	rix_free(b->p);
	*b = (rix__buf){ 0 };
}
