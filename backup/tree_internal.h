/*
 * backup/tree_internal.h — what the tree blob's encoder (tree.c) and decoder (tree_decode.c)
 * share: a rune's UTF-8 bytes (Go's quoting and unquoting of names) and the names' order.
 */
#ifndef RIX_TREE_INTERNAL_H
#define RIX_TREE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline void rix__tree_put_utf8(uint8_t *o, size_t *k, int32_t r)
{
	if (r < 0x80) {
		o[(*k)++] = (uint8_t)r;
	} else if (r < 0x800) {
		o[(*k)++] = (uint8_t)(0xC0 | r >> 6);
		o[(*k)++] = (uint8_t)(0x80 | (r & 0x3F));
	} else if (r < 0x10000) {
		o[(*k)++] = (uint8_t)(0xE0 | r >> 12);
		o[(*k)++] = (uint8_t)(0x80 | (r >> 6 & 0x3F));
		o[(*k)++] = (uint8_t)(0x80 | (r & 0x3F));
	} else {
		o[(*k)++] = (uint8_t)(0xF0 | r >> 18);
		o[(*k)++] = (uint8_t)(0x80 | (r >> 12 & 0x3F));
		o[(*k)++] = (uint8_t)(0x80 | (r >> 6 & 0x3F));
		o[(*k)++] = (uint8_t)(0x80 | (r & 0x3F));
	}
}

/* Names in restic's order: bytewise, a prefix first. */
static inline int rix__tree_name_cmp(const uint8_t *a, size_t an, const uint8_t *b, size_t bn)
{
	int c = memcmp(a, b, an < bn ? an : bn);
	return c != 0 ? c : (an > bn) - (an < bn);
}

#endif
