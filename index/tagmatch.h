/*
 * index/tagmatch.h — private to index/: which of 12 one-byte tags equal a given byte, as a bit
 * mask (bit i: tag[i] == t). The mutable table's lines (indexmap.c) keep a tag per slot and
 * find a key's candidates, and their free slots (tag 0), with it.
 *
 * Two forms giving the same answer: SSE2 (baseline on x86-64: a load, a compare, a movemask)
 * and portable SWAR over the 12 bytes as two little-endian words, exact for every byte value
 * (tests/test_indexmap.c compares the two on random lines). The 16-byte load of the SSE2 form
 * also reads the 4 bytes after the tags, which the mask then drops: callers keep the tags at
 * the start of a 16-byte aligned block.
 */
#ifndef RIX_INDEX_TAGMATCH_H
#define RIX_INDEX_TAGMATCH_H

#include <stdint.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#define RIX__TAGS 12u
#define RIX__TAGS_ALL ((1u << RIX__TAGS) - 1)

/* Bit i set for each byte i of w (0..7, little-endian order) that is zero; exact. */
static inline uint32_t rix__zero_bytes(uint64_t w)
{
	const uint64_t lo7 = 0x7F7F7F7F7F7F7F7Full;
	uint64_t z = ~(((w & lo7) + lo7) | w | lo7); /* 0x80 in each zero byte, else 0 */
	return (uint32_t)(((z >> 7) * 0x0102040810204080ull) >> 56);
}

static inline uint64_t rix__le64(const uint8_t *p, unsigned n)
{
	uint64_t w = 0;
	for (unsigned i = 0; i < n; i++)
		w |= (uint64_t)p[i] << (8 * i);
	return w;
}

/* The portable form: tags[0..11] against t. */
static inline uint32_t rix__tag_mask_swar(const uint8_t *tags, uint8_t t)
{
	const uint64_t rep = 0x0101010101010101ull * t;
	uint64_t a, b;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	__builtin_memcpy(&a, tags, 8);
	uint32_t b32;
	__builtin_memcpy(&b32, tags + 8, 4);
	b = b32;
#else
	a = rix__le64(tags, 8);
	b = rix__le64(tags + 8, 4);
#endif
	/* The 4 bytes above the tags in b are zero: XOR with t makes them nonzero unless t is 0,
	 * and the final mask drops them either way. */
	return (rix__zero_bytes(a ^ rep) | rix__zero_bytes(b ^ rep) << 8) & RIX__TAGS_ALL;
}

/* tags must be 16-byte aligned, with 4 readable bytes after the 12 tags. */
static inline uint32_t rix__tag_mask(const uint8_t *tags, uint8_t t)
{
#ifdef __SSE2__
	__m128i v = _mm_load_si128((const __m128i *)(const void *)tags);
	return (uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8((char)t))) & RIX__TAGS_ALL;
#else
	return rix__tag_mask_swar(tags, t);
#endif
}

#endif
