/*
 * index/idset_range.h — the directory decode of rix_idset's lookups (a bucket's run of IDs),
 * written once and compiled in each instance of the lookups: idset.c's (through
 * idset_lookup.h) and the ranked table's fused lookup (ranked.c). The includer defines
 * IDSET_FN, IDSET_ATTR, IDSET_POPCOUNT, IDSET_SELECT and, for the AVX-512 instance,
 * IDSET_AVX512 (idset_lookup.h says what each is), after idset_find.h.
 */

/*
 * The run of IDs of bucket b: [*lo, *hi). Branch-free up to the select: the popcounts of the
 * block's 8 words of zeros are summed, and the word of the bucket's 0 is the number of prefix
 * sums at most j (no loop whose length depends on the data, so nothing to mispredict). With
 * AVX-512 (VPOPCNTQ, IDSET_AVX512) the 8 popcounts are one instruction, their prefix sums three
 * shifted adds, the word a compare mask's popcount.
 */
static IDSET_ATTR inline void IDSET_FN(bucket_range)(const struct rix_idset *s, uint64_t b, size_t *lo, size_t *hi)
{
	const uint64_t *blk = block_of(s, b);
	unsigned j = (unsigned)(b & ((1u << s->gshift) - 1));
	uint64_t w0 = blk[0];
	size_t base = (size_t)(w0 & BASE_MASK);
	if (__builtin_expect((w0 & OV_FLAG) != 0, 0)) {
		ov_range(s, blk, j, lo, hi);
		return;
	}
	/* z: the code's zeros as ones (word 0 without its header, the low 32 bits); wi: the word
	 * holding the bucket's zero; before: the zeros in the words before it. */
#ifdef IDSET_AVX512
	const __m512i zero = _mm512_setzero_si512();
	__m512i v = _mm512_loadu_si512((const void *)blk); /* aligned as built; loadu costs nothing then */
	__m512i z = _mm512_andnot_si512(_mm512_or_si512(v, _mm512_set_epi64(0, 0, 0, 0, 0, 0, 0, 0xFFFFFFFF)),
					_mm512_set1_epi64(-1));
	__m512i cnt = _mm512_popcnt_epi64(z);
	__m512i inc = _mm512_add_epi64(cnt, _mm512_alignr_epi64(cnt, zero, 7));
	inc = _mm512_add_epi64(inc, _mm512_alignr_epi64(inc, zero, 6));
	inc = _mm512_add_epi64(inc, _mm512_alignr_epi64(inc, zero, 4)); /* zeros in words 0..i */
	__mmask8 le = _mm512_cmple_epu64_mask(inc, _mm512_set1_epi64((long long)j));
	unsigned wi = (unsigned)__builtin_popcount((unsigned)le);
	__m512i at = _mm512_set1_epi64((long long)wi);
	uint64_t zw = (uint64_t)_mm_cvtsi128_si64(_mm512_castsi512_si128(_mm512_permutexvar_epi64(at, z)));
	unsigned before = (unsigned)_mm_cvtsi128_si64(
		_mm512_castsi512_si128(_mm512_permutexvar_epi64(at, _mm512_sub_epi64(inc, cnt))));
#else
	uint64_t z[BLOCK_WORDS];
	unsigned sum[BLOCK_WORDS + 1]; /* zeros in words 0..i-1 */
	z[0] = ~(w0 | 0xFFFFFFFFull);
#pragma GCC unroll 8
	for (unsigned i = 1; i < BLOCK_WORDS; i++)
		z[i] = ~blk[i];
	sum[0] = 0;
	unsigned wi = 0;
#pragma GCC unroll 8
	for (unsigned i = 0; i < BLOCK_WORDS; i++) {
		sum[i + 1] = sum[i] + (unsigned)IDSET_POPCOUNT(z[i]);
		wi += sum[i + 1] <= j;
	}
	uint64_t zw = z[wi];
	unsigned before = sum[wi];
#endif
	/* wi < 8: the block holds G > j zeros. */
	unsigned r = j - before;
	unsigned zj = wi * 64 + (unsigned)IDSET_SELECT(zw, r); /* the j-th zero, as a bit of the block */
	unsigned zp = CODE_START - 1;                           /* the (j-1)-th zero; "bit 31" for j = 0 */
	if (j > 0) {
		if (r > 0) {
			zp = wi * 64 + (unsigned)IDSET_SELECT(zw, r - 1);
		} else { /* the last zero of the last word before wi that has one */
#ifdef IDSET_AVX512
			unsigned nz = (unsigned)_mm512_test_epi64_mask(z, z) & ((1u << wi) - 1);
			unsigned i = 31 - (unsigned)__builtin_clz(nz);
			uint64_t zi = (uint64_t)_mm_cvtsi128_si64(
				_mm512_castsi512_si128(_mm512_permutexvar_epi64(_mm512_set1_epi64(i), z)));
#else
			unsigned i = wi;
			do
				i--;
			while (z[i] == 0);
			uint64_t zi = z[i];
#endif
			zp = i * 64 + 63 - (unsigned)__builtin_clzll(zi);
		}
	}
	size_t count = zj - zp - 1;
	size_t ones_before = zj - CODE_START - j;
	*lo = base + ones_before - count;
	*hi = base + ones_before;
}
