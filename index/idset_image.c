/*
 * index/idset_image.c — a rix_idset as an image (the ranked table's, in the master index's
 * cache): its shape in words and its one block exported as they lie, and the set made again
 * from them with every check a lookup relies on (shape, offsets inside the block, each
 * directory block's base and zeros or its overflow starts). Layout: idset.c's top comment.
 */
#include <stdint.h>
#include <string.h>

#include "rix/alloc.h"
#include "rix/error.h"
#include "rix/idset.h"
#include "index_internal.h"
#include "idset_internal.h"

/* ---- Image (the ranked table's, for the master index's cache) ------------------------------ */


void rix__idset_export(const rix_idset *s, uint64_t desc[RIX__IDSET_DESC_WORDS], const void **block, size_t *size)
{
	memset(desc, 0, RIX__IDSET_DESC_WORDS * sizeof(desc[0]));
	*block = NULL;
	*size = 0;
	if (s == NULL || s->n == 0)
		return;
	desc[RIX__IDSET_D_N] = s->n;
	desc[RIX__IDSET_D_K] = s->k;
	desc[RIX__IDSET_D_GSHIFT] = s->gshift;
	desc[RIX__IDSET_D_KB] = s->kb;
	desc[RIX__IDSET_D_OVB] = s->ov_blocks;
	desc[RIX__IDSET_D_LONGEST] = s->longest;
	desc[RIX__IDSET_D_MID] = s->mid ? (uint64_t)(s->mid - s->tails) : 0;
	desc[RIX__IDSET_D_DIR] = (uint64_t)((const uint8_t *)s->dir - s->tails);
	desc[RIX__IDSET_D_OV] = s->ov ? (uint64_t)((const uint8_t *)s->ov - s->tails) : 0;
	desc[RIX__IDSET_D_SIZE] = s->tails_size;
	desc[RIX__IDSET_D_EXTRA] = s->extra;
	*block = s->tails;
	*size = s->tails_size;
}

/*
 * Whether the directory sends every bucket to a run inside [0, n), runs in order: each block's
 * base the IDs before it, its unary code holding its G zeros (or its ov starts in order), the
 * last run ending at n. What bucket_range then computes stays inside the arrays.
 */
static bool dir_valid(const struct rix_idset *s)
{
	size_t g = (size_t)1 << s->gshift, run = 0, ov_words = s->ov_blocks * (g + 1);
	for (size_t blkno = 0; blkno < s->nblocks; blkno++) {
		const uint64_t *blk = s->dir + blkno * BLOCK_WORDS;
		if ((size_t)(blk[0] & BASE_MASK) != run)
			return false;
		if (blk[0] & OV_FLAG) {
			if (blk[1] > ov_words || ov_words - blk[1] < g + 1)
				return false;
			const uint32_t *o = s->ov + blk[1];
			if (o[0] != run)
				return false;
			for (size_t j = 0; j < g; j++)
				if (o[j + 1] < o[j])
					return false;
			run = o[g];
		} else {
			/* the G-th zero of the code, and the ones before it: counted a word at a time
			 * (bit by bit, a branch on each of a block's ~400 bits mispredicted every other
			 * time: a sixth of a warm 10M open) */
			size_t zeros = 0, ones = 0;
			bool found = false;
			for (unsigned w = 0; w < BLOCK_WORDS && !found; w++) {
				uint64_t code = w == 0 ? ~0ull << CODE_START : ~0ull; /* the code's bits */
				uint64_t z = ~blk[w] & code, o = blk[w] & code;
				size_t zc = (size_t)__builtin_popcountll(z);
				if (zeros + zc < g) {
					zeros += zc;
					ones += (size_t)__builtin_popcountll(o);
					continue;
				}
				for (size_t r = g - zeros - 1; r > 0; r--) /* the word's G - zeros'th zero */
					z &= z - 1;
				unsigned at = (unsigned)__builtin_ctzll(z);
				ones += (size_t)__builtin_popcountll(o & ((1ull << at) - 1));
				found = true;
			}
			if (!found)
				return false;
			run += ones;
		}
		if (run > s->n)
			return false;
	}
	return run == s->n;
}

int rix__idset_import(rix_idset **out, const uint64_t desc[RIX__IDSET_DESC_WORDS], void *block, size_t size)
{
	*out = NULL;
	struct rix_idset *s = rix_calloc(1, sizeof(*s));
	if (s == NULL)
		return rix_error_set(RIX_ENOMEM, "id set: out of memory");
	if (desc[RIX__IDSET_D_N] == 0) {
		rix_free(block);
		*out = s;
		return 0;
	}
	uint64_t n = desc[RIX__IDSET_D_N], k = desc[RIX__IDSET_D_K], gs = desc[RIX__IDSET_D_GSHIFT];
	uint64_t kb = desc[RIX__IDSET_D_KB], extra = desc[RIX__IDSET_D_EXTRA], mid = desc[RIX__IDSET_D_MID];
	bool ok = n <= RIX_IDSET_MAX_IDS && k >= 1 && k <= 32 && gs <= MAX_GSHIFT && gs <= k &&
		  (kb == (k + 7) / 8 || kb == (k + 15) / 8) && extra <= RIX__IDSET_EXTRA_MAX && desc[RIX__IDSET_D_SIZE] == size &&
		  block != NULL;
	if (ok) {
		s->n = (size_t)n;
		s->k = (unsigned)k;
		s->gshift = (unsigned)gs;
		s->kb = (unsigned)kb;
		s->tail = RIX_ID_SIZE - s->kb;
		s->extra = (unsigned)extra;
		s->stride = s->tail + s->extra;
		s->w = 8 * s->kb - s->k;
		s->nblocks = (size_t)1 << (s->k - s->gshift);
		s->ov_blocks = (size_t)desc[RIX__IDSET_D_OVB];
		s->longest = (size_t)desc[RIX__IDSET_D_LONGEST];
		s->level = rix__idset_cpu_level();
		size_t g = (size_t)1 << s->gshift;
		uint64_t mid_bytes = s->w ? ((uint64_t)n * s->w + 7) / 8 + 8 : 0;
		uint64_t dir = desc[RIX__IDSET_D_DIR], ov = desc[RIX__IDSET_D_OV];
		/* Each offset inside the block first, so that no sum below wraps (size < 2^63, n and
		 * the arrays' bytes far less); the directory's 64 bytes or more after the tails (the
		 * owner reads up to 16 bytes from the start of an ID's extra bytes). */
		ok = mid <= size && dir <= size && ov <= size && size <= SIZE_MAX / 2 &&
		     (uint64_t)n * s->stride <= (s->w ? mid : dir) && (!s->w || mid + mid_bytes <= dir) &&
		     dir % 8 == 0 && s->ov_blocks <= s->nblocks && dir + (uint64_t)s->nblocks * 64 <= size &&
		     (s->ov_blocks == 0 ||
		      (ov % 4 == 0 && ov >= dir + (uint64_t)s->nblocks * 64 &&
		       ov + (uint64_t)s->ov_blocks * (g + 1) * sizeof(uint32_t) <= size));
		if (ok) {
			uint8_t *base = block;
			s->tails = base;
			s->tails_size = size;
			s->mid = s->w ? base + mid : NULL;
			s->dir = (uint64_t *)(void *)(base + dir);
			s->ov = s->ov_blocks ? (uint32_t *)(void *)(base + ov) : NULL;
			ok = dir_valid(s);
		}
	}
	if (!ok) {
		rix_free(s);
		return rix_error_set(RIX_ECORRUPT, "id set: an image's set is not well formed");
	}
	*out = s;
	return 0;
}
