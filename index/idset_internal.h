/*
 * index/idset_internal.h — the layout of rix_idset (described atop idset.c), shared by the
 * set's files: idset.c (lookups, iteration), idset_build.c (building), idset_image.c (the set
 * as an image and its checked import), and through idset_find.h by the ranked table's fused
 * lookup (ranked.c). Private to them.
 */
#ifndef RIX_IDSET_INTERNAL_H
#define RIX_IDSET_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "rix/idset.h"
#include "idset_cmp.h"

#define BLOCK_WORDS 8u
#define CODE_BITS 480u       /* unary code bits of a block: bits 32 .. 511 */
#define CODE_START 32u       /* the code's first bit within the block */
#define OV_FLAG 0x80000000u  /* in word 0: the block is held as offsets in ov */
#define BASE_MASK 0x7FFFFFFFu
#define MAX_GSHIFT 8u        /* G <= 256 */
#define LINEAR_MAX 8u        /* runs up to this long are scanned, longer ones binary-searched */
#define PIPE_D 11u           /* keys between the stages of the batched lookups */
#define PIPE_RING 64u        /* their ring of keys in flight (> 3 PIPE_D) */


/* Which instance of the lookups a set uses (struct rix_idset's level). */
enum { LEVEL_PORTABLE, LEVEL_HW, LEVEL_AVX512 };

struct rix_idset {
	size_t n;          /* distinct IDs */
	unsigned k;        /* bucket bits (1 .. 32) */
	unsigned gshift;   /* G = 1 << gshift buckets a block */
	unsigned kb;       /* ceil(k / 8), or ceil((k + 8) / 8) with RIX__IDSET_MID8: bytes
			    * 0 .. kb-1 hold bucket and mid bits */
	unsigned tail;     /* 32 - kb: bytes of each ID in tails */
	unsigned extra;    /* bytes of its owner's after each tail (0 .. RIX__IDSET_EXTRA_MAX: the
			    * ranked table's locations), opaque to the set */
	unsigned stride;   /* tail + extra: ID i's tail at i * stride */
	unsigned w;        /* 8 kb - k: mid bits of each ID (0 .. 7; 8 .. 15 with MID8) */
	/* One allocation, tails_size bytes, holds everything:
	 *   [tails: n * stride][pad to 8][mid][pad to 64 in memory][dir][ov][slack < 64]
	 * (at least 64 bytes after the tails: the directory's block or more) */
	uint8_t *tails;    /* n * stride bytes: ID i's tail at i * stride, its extra bytes after
			    * it; the block's start */
	size_t tails_size; /* bytes of the block */
	uint8_t *mid;      /* n * w bits + 8 bytes of padding for 64-bit loads; NULL if w = 0 */
	uint64_t *dir;     /* nblocks * 8 words, 64-byte aligned */
	size_t nblocks;
	uint32_t *ov;      /* (G + 1) starts per overflowing block; NULL if none */
	size_t ov_blocks;
	size_t longest;    /* longest run (shape statistics) */
	int level;         /* the lookups' instance: LEVEL_HW with POPCNT and BMI2, LEVEL_AVX512
			    * with AVX-512 VPOPCNTQ too, else LEVEL_PORTABLE */
};

/* The best instance of the lookups this processor runs (a LEVEL_; idset.c). */
int rix__idset_cpu_level(void);

/* The bucket of an ID: its top k bits. */
static inline uint64_t bucket_of(const uint8_t *id, unsigned k)
{
	return (load64_be(id) >> 1) >> (63 - k); /* no branch for k = 0 */
}

/* The key's mid bits: the low w (< 16) bits of its bytes kb - 2, kb - 1 (kb <= 5: within the
 * first 8 bytes, whose load the bucket's shares). */
static inline unsigned mid_key(const struct rix_idset *s, const uint8_t *id)
{
	return (unsigned)(load64_be(id) >> (64 - 8 * s->kb)) & ((1u << s->w) - 1);
}

static inline unsigned mid_get(const struct rix_idset *s, size_t i)
{
	if (s->w == 0)
		return 0;
	size_t bit = i * s->w;
	return (unsigned)(load64_le(s->mid + (bit >> 3)) >> (bit & 7)) & ((1u << s->w) - 1);
}

static inline const uint8_t *tail_at(const struct rix_idset *s, size_t i)
{
	return s->tails + i * s->stride;
}

#endif
