/*
 * index/hash.h — private to index/: the one hash every table here uses, and how its 64 bits
 * are split.
 *
 *   h = fold(a ^ s0, b ^ s1) ^ fold(c ^ s2, d ^ s3)
 *       a..d: the ID's four 64-bit words; s0..s3: from the table's random seed (hash flooding);
 *       fold(x, y): the 128-bit product x * y, its halves XORed (as in XXH3 and wyhash)
 *   bits  0..31  -> bucket or line = (h_lo * n) >> 32   ("fastrange": any count works, no
 *                                                       power of two, no division)
 *   the mutable table (indexmap.c) also takes two filter bits from bits 32..41 and its tag
 *   from bits 56..63.
 */
#ifndef RIX_INDEX_HASH_H
#define RIX_INDEX_HASH_H

#include <stddef.h>
#include <stdint.h>

#include "rix/types.h"

static inline uint64_t rix__hash_fold(uint64_t x, uint64_t y)
{
	unsigned __int128 p = (unsigned __int128)x * y;
	return (uint64_t)p ^ (uint64_t)(p >> 64);
}

/*
 * Two multiplications, not XXH3's avalanche over 32 bytes: a lookup that misses in DRAM waits
 * anyway, and the fewer instructions each lookup executes, the more lookups the core keeps in
 * flight (bench/RESULTS.md). The IDs are SHA-256 outputs: nobody picks their bits but by brute
 * force, and without the seed nobody knows which bits would put two IDs in one bucket; one
 * factor equal to zero (a word equal to its secret) is a 2^-64 guess.
 */
/* The four words of the seed as the hash mixes them in (s0..s3 above), for a table that keeps
 * them: a lookup then reads them instead of deriving them, five instructions fewer. */
static inline void rix__hash_keys(uint64_t k[4], uint64_t seed)
{
	k[0] = seed;
	k[1] = seed ^ 0x9E3779B97F4A7C15ull;
	k[2] = (seed << 32 | seed >> 32) ^ 0xC2B2AE3D27D4EB4Full;
	k[3] = ~seed;
}

static inline uint64_t rix__hash_id_keyed(const rix_id *id, const uint64_t k[4])
{
	uint64_t a, b, c, d; /* four scalar loads (an array copy goes through the stack) */
	__builtin_memcpy(&a, id->b, 8);
	__builtin_memcpy(&b, id->b + 8, 8);
	__builtin_memcpy(&c, id->b + 16, 8);
	__builtin_memcpy(&d, id->b + 24, 8);
	return rix__hash_fold(a ^ k[0], b ^ k[1]) ^ rix__hash_fold(c ^ k[2], d ^ k[3]);
}

static inline uint64_t rix__hash_id(const rix_id *id, uint64_t seed)
{
	uint64_t k[4];
	rix__hash_keys(k, seed);
	return rix__hash_id_keyed(id, k);
}

/* A bucket (or line) of nbuckets for hash h: indexmap.c's home line. */
static inline uint32_t rix__hash_bucket(uint64_t h, uint32_t nbuckets)
{
	return (uint32_t)(((uint64_t)(uint32_t)h * nbuckets) >> 32);
}

/* A random 64-bit seed from the kernel (falls back to time and address bits). */
uint64_t rix__random_seed(void);

static inline int rix__id_eq(const rix_id *a, const rix_id *b)
{
	uint64_t x0, x1, x2, x3, y0, y1, y2, y3;
	__builtin_memcpy(&x0, a->b, 8);
	__builtin_memcpy(&x1, a->b + 8, 8);
	__builtin_memcpy(&x2, a->b + 16, 8);
	__builtin_memcpy(&x3, a->b + 24, 8);
	__builtin_memcpy(&y0, b->b, 8);
	__builtin_memcpy(&y1, b->b + 8, 8);
	__builtin_memcpy(&y2, b->b + 16, 8);
	__builtin_memcpy(&y3, b->b + 24, 8);
	return ((x0 ^ y0) | (x1 ^ y1) | (x2 ^ y2) | (x3 ^ y3)) == 0;
}

/* Whether ID i of a sorted array differs from ID i - 1 (the first of its run). */
static inline int rix__id_is_new(const rix_id *ids, size_t i)
{
	return i == 0 || !rix__id_eq(&ids[i - 1], &ids[i]);
}

/*
 * A read prefetch requests the line into the second-level cache (PREFETCHT1), not the first:
 * the batched lookups request lines for dozens of keys ahead, more than the first level's miss
 * buffers hold. On AMD Zen 4 (bench/RESULTS.md, 2026-12-04, ninth session) T1 ran the batched
 * lookups at 10M 1.1-1.6x faster than T0, the probes Limit/Gather2Prefetch and Limit/Lines/Record
 * 1.2x and 1.9x. T0 did better only where the line stays in cache anyway (the ranked table's
 * filter at 1M: an absent batched master lookup 9-10 ns against 11-13), and T0 for the small arrays
 * (filter, directory, mid bits) beside T1 for the rest was slower at 10M. The probes
 * Limit/Gather*Prefetch and Limit/Lines make their requests the same way. The streaming build
 * passes that use it too were measured unchanged (IdSet/Build, TableBuild, Master at 10M).
 */
#define RIX_PREFETCH(p) __builtin_prefetch((p), 0, 2)
#define RIX_PREFETCH_W(p) __builtin_prefetch((p), 1, 3) /* a line about to be written */

/*
 * Asks the kernel to back the 2 MiB-aligned interior of [p, p + n) with huge pages (when
 * transparent huge pages are in "madvise" mode). Large tables are read at random, and with
 * 4 KiB pages nearly every lookup also misses the TLB. Advice only: errors are ignored, and
 * nothing is done below 2 MiB. Defined in indexmap.c.
 */
void rix__advise_huge(void *p, size_t n);

#endif
