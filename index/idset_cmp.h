/*
 * index/idset_cmp.h — the byte order of IDs as rix_idset compares them (idset.c's lookups,
 * idset_sort.c's sort): big-endian 64-bit words, so that word order is memcmp order (32-bit
 * ones for the ranked table's filter words); and the little-endian words its packed arrays (mid
 * bits, the ranked table's locations) are read in.
 */
#ifndef RIX_IDSET_CMP_H
#define RIX_IDSET_CMP_H

#include <stdint.h>
#include <string.h>

static inline uint32_t load32_be(const uint8_t *p)
{
	uint32_t x;
	memcpy(&x, p, 4);
#if __BYTE_ORDER__ != __ORDER_BIG_ENDIAN__
	x = __builtin_bswap32(x);
#endif
	return x;
}

static inline uint64_t load64_be(const uint8_t *p)
{
	uint64_t x;
	memcpy(&x, p, 8);
#if __BYTE_ORDER__ != __ORDER_BIG_ENDIAN__
	x = __builtin_bswap64(x);
#endif
	return x;
}

static inline uint64_t load64_le(const uint8_t *p)
{
	uint64_t x;
	memcpy(&x, p, 8);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	x = __builtin_bswap64(x);
#endif
	return x;
}

static inline void store64_le(uint8_t *p, uint64_t x)
{
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	x = __builtin_bswap64(x);
#endif
	memcpy(p, &x, 8);
}

/* memcmp of len >= 8 bytes as big-endian words (the last one overlapping), inline. */
static inline int tail_cmp(const uint8_t *a, const uint8_t *b, unsigned len)
{
	uint64_t x, y;
	for (unsigned o = 0; o + 8 < len; o += 8) {
		x = load64_be(a + o);
		y = load64_be(b + o);
		if (x != y)
			return x < y ? -1 : 1;
	}
	x = load64_be(a + len - 8);
	y = load64_be(b + len - 8);
	return x == y ? 0 : x < y ? -1 : 1;
}

#endif
