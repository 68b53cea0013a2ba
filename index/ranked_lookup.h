/*
 * index/ranked_lookup.h — the ranked table's lookup of one ID and its batched lookup's decode of
 * locations (ranked.c), compiled once for each instance of the set's lookups
 * (idset_instances.h). The lookup of one ID: the set's directory decode, the run's
 * search and the location's decode in one function, no call between them (the filter, where
 * the caller tests it, in line: rix__ranked_find, rix__ranked_maybe). What a known
 * lookup executes is what keeps the next lookup's misses from starting (bench/RESULTS.md): the
 * calls, their saved registers and the set's own checks were a third of it.
 */

#include "idset_range.h"

#ifdef IDSET_AVX512
/*
 * The location at p of a split table (loc_read's first case) with its four fields shifted and
 * masked as the lanes of one vector: sh and mk, r->lshift and r->lmask loaded; lob, r->lob.
 * No general register written but the address, where loc_read's loads of the fields' shifts and
 * masks and its shifts write a dozen (gdb-stepped: a known master lookup 301 -> 290
 * instructions, 178 -> 167 registers written; a batched one 305 -> 287 a key, 183 -> 168;
 * bench/RESULTS.md).
 */
static IDSET_ATTR inline void IDSET_FN(loc_vec)(const uint8_t *p, size_t lob, __m256i sh, __m256i mk, rix_loc *loc)
{
	__m128i ab = _mm_unpacklo_epi64(_mm_loadl_epi64((const __m128i *)(const void *)p),
					_mm_loadl_epi64((const __m128i *)(const void *)(p + lob)));
	__m256i v = _mm256_permute4x64_epi64(_mm256_castsi128_si256(ab), 0x50); /* a, a, b, b */
	v = _mm256_and_si256(_mm256_srlv_epi64(v, sh), mk);
	v = _mm256_permutevar8x32_epi32(v, _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6)); /* each lane's low half */
	_mm_storeu_si128((__m128i *)(void *)loc, _mm256_castsi256_si128(v));
}
_Static_assert(sizeof(rix_loc) == 16 && offsetof(rix_loc, offset) == 4 && offsetof(rix_loc, length) == 8 &&
		       offsetof(rix_loc, uncompressed_length) == 12,
	       "loc_vec stores pack, offset, length, uncompressed_length as four u32 in that order");
#endif

/* loc_get, by the vector where this instance has it. */
static IDSET_ATTR inline void IDSET_FN(loc_at)(const struct rix__ranked *r, size_t rank, rix_loc *loc)
{
#ifdef IDSET_AVX512
	if (__builtin_expect(r->split, 1)) {
		IDSET_FN(loc_vec)(r->locs + rank * r->stride, r->lob,
				  _mm256_loadu_si256((const __m256i *)(const void *)r->lshift),
				  _mm256_loadu_si256((const __m256i *)(const void *)r->lmask), loc);
		return;
	}
#endif
	loc_get(r, rank, loc);
}

/*
 * The batched lookup's decode: for each j < k with a rank (not RIX_IDSET_NO_RANK), key
 * g + which[j] (g + j when which is NULL) is found and gets its location. @return how many.
 */
static IDSET_ATTR size_t IDSET_FN(ranked_decode)(const struct rix__ranked *r, const size_t *rank, size_t k,
						 const uint16_t *which, size_t g, rix_loc *locs, bool *found)
{
	/* The table's shape copied, its lanes loaded, before the first store: a store to locs[]
	 * could alias its fields, which the compiler would then read again after every store. */
	const struct rix__ranked shape = *r;
#ifdef IDSET_AVX512
	const __m256i sh = _mm256_loadu_si256((const __m256i *)(const void *)r->lshift);
	const __m256i mk = _mm256_loadu_si256((const __m256i *)(const void *)r->lmask);
#endif
	size_t hits = 0;
	for (size_t j = 0; j < k; j++) {
		if (rank[j] == RIX_IDSET_NO_RANK)
			continue;
		size_t i = g + (which != NULL ? which[j] : j);
		found[i] = true;
#ifdef IDSET_AVX512
		if (__builtin_expect(shape.split, 1))
			IDSET_FN(loc_vec)(shape.locs + rank[j] * shape.stride, shape.lob, sh, mk, &locs[i]);
		else
#endif
			loc_get(&shape, rank[j], &locs[i]);
		hits++;
	}
	return hits;
}

/* r holds IDs (nd > 0); exact for any ID, whether the filter was tested or not (the caller's:
 * rix__ranked_find, ranked.h). */
static IDSET_ATTR __attribute__((noinline)) bool IDSET_FN(ranked_find_passed)(const struct rix__ranked *r, const rix_id *id,
									     rix_loc *loc)
{
	const struct rix_idset *s = r->ids;
	size_t lo, hi, rank;
	IDSET_FN(bucket_range)(s, bucket_of(id->b, s->k), &lo, &hi);
	if (lo >= hi || !run_find(s, id->b, lo, hi, NULL, &rank))
		return false;
	IDSET_FN(loc_at)(r, rank, loc);
	return true;
}
