/*
 * index/idset_find.h — the core of rix_idset's lookups (layout: idset.c), shared by idset.c and
 * by the ranked table's fused lookup (ranked.c), which compiles the directory decode
 * (idset_range.h) into its own instances with the filter in front and the location after, so
 * that a known ID's lookup is one function: the bit primitives, the block of a bucket, the
 * overflow offsets, the run's search. Private to those two files.
 */
#ifndef RIX_IDSET_FIND_H
#define RIX_IDSET_FIND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "idset_internal.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define IDSET_HW 1
#include <immintrin.h>
#else
#define IDSET_HW 0
#endif

/* ---- Bits ----------------------------------------------------------------------------------- */

/* Portable popcount (the library is built for baseline x86-64, which lacks POPCNT). */
static inline unsigned popcount64(uint64_t x)
{
	x = x - ((x >> 1) & 0x5555555555555555ull);
	x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
	x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0Full;
	return (unsigned)((x * 0x0101010101010101ull) >> 56);
}

/*
 * Position (0 .. 63) of the r-th set bit of x (r counted from 0; r < popcount(x)).
 * Byte-wise prefix popcounts s_i (bytes 0..i) in one multiply; the target byte is the number
 * of bytes with s_i <= r, found by the per-byte comparison (128 + r - s_i) >= 128, which never
 * borrows across bytes because 64 <= 128 + r - s_i <= 191; then at most 7 steps in the byte.
 */
static inline unsigned select64(uint64_t x, unsigned r)
{
	const uint64_t L8 = 0x0101010101010101ull, H8 = 0x8080808080808080ull;
	uint64_t s = x - ((x >> 1) & 0x5555555555555555ull);
	s = (s & 0x3333333333333333ull) + ((s >> 2) & 0x3333333333333333ull);
	s = ((s + (s >> 4)) & 0x0F0F0F0F0F0F0F0Full) * L8;
	uint64_t t = ((((uint64_t)r * L8) | H8) - s) & H8;
	unsigned byte_i = popcount64(t);
	unsigned before = byte_i ? (unsigned)(s >> (8 * (byte_i - 1))) & 0xFFu : 0;
	unsigned byte = (unsigned)(x >> (8 * byte_i)) & 0xFFu;
	for (unsigned rr = r - before; rr > 0; rr--)
		byte &= byte - 1;
	return 8 * byte_i + (unsigned)__builtin_ctz(byte);
}

static inline const uint64_t *block_of(const struct rix_idset *s, uint64_t b)
{
	return s->dir + (size_t)(b >> s->gshift) * BLOCK_WORDS;
}

/* Whether the tails a and b (len bytes, 24 <= len <= 32: tail = 32 - kb, kb <= 5) are equal. */
static inline bool tail_eq(const uint8_t *a, const uint8_t *b, unsigned len)
{
	uint64_t x[4], y[4];
	memcpy(&x[0], a, 8);
	memcpy(&y[0], b, 8);
	memcpy(&x[1], a + 8, 8);
	memcpy(&y[1], b + 8, 8);
	memcpy(&x[2], a + 16, 8);
	memcpy(&y[2], b + 16, 8);
	memcpy(&x[3], a + len - 8, 8);
	memcpy(&y[3], b + len - 8, 8);
	return ((x[0] ^ y[0]) | (x[1] ^ y[1]) | (x[2] ^ y[2]) | (x[3] ^ y[3])) == 0;
}

/* The run of bucket j of an overflowing block: its starts in ov (idset.c's top comment). */
static inline void ov_range(const struct rix_idset *s, const uint64_t *blk, unsigned j, size_t *lo, size_t *hi)
{
	const uint32_t *o = s->ov + blk[1] + j;
	*lo = o[0];
	*hi = o[1];
}

/* Compares entry i with the key (mid bits km, tail bytes key): <0, 0, >0 as entry - key. */
static inline int entry_cmp(const struct rix_idset *s, size_t i, unsigned km, const uint8_t *key)
{
	unsigned m = mid_get(s, i);
	if (m != km)
		return m < km ? -1 : 1;
	return tail_cmp(tail_at(s, i), key, s->tail);
}

/* Whether the run [lo, hi) holds id, *at (if not NULL) set to its position when it does;
 * *steps (if not NULL) counts the entries compared. */
static inline bool run_find(const struct rix_idset *s, const uint8_t *id, size_t lo, size_t hi, size_t *steps,
			    size_t *at)
{
	unsigned km = mid_key(s, id);
	const uint8_t *key = id + s->kb;
	if (hi - lo <= LINEAR_MAX) {
		/* A short run is scanned for equality (the mid bits first, then the tail as four
		 * 8-byte words: no byte swaps, no order, no early stop to predict). */
		for (size_t i = lo; i < hi; i++) {
			if (steps)
				++*steps;
			if (mid_get(s, i) == km && tail_eq(tail_at(s, i), key, s->tail)) {
				if (at)
					*at = i;
				return true;
			}
		}
		return false;
	}
	while (lo < hi) {
		size_t m = lo + (hi - lo) / 2;
		if (steps)
			++*steps;
		int c = entry_cmp(s, m, km, key);
		if (c == 0) {
			if (at)
				*at = m;
			return true;
		}
		if (c < 0)
			lo = m + 1;
		else
			hi = m;
	}
	return false;
}

/* Calls the set's instance of a lookup (x86-64: as its level says). */
#if IDSET_HW
#define DISPATCH(s, name, ...)                                                \
	((s)->level == LEVEL_AVX512 ? name##_avx512(__VA_ARGS__)              \
	 : (s)->level == LEVEL_HW   ? name##_hw(__VA_ARGS__)                  \
				    : name##_portable(__VA_ARGS__))
#else
#define DISPATCH(s, name, ...) name##_portable(__VA_ARGS__)
#endif

#endif
