/*
 * index/idset_lookup.h — the lookups of index/idset.c, written once and compiled three times:
 * with the portable bit primitives, and (x86-64) with POPCNT and BMI2, and with AVX-512 VPOPCNTQ
 * besides (IDSET_AVX512: its own directory decode), the best the processor has chosen per set
 * when it is built. Private to idset.c, which defines before including:
 *   IDSET_FN(name)       the name of this instance's version of name
 *   IDSET_ATTR           its function attributes (a target, or nothing)
 *   IDSET_POPCOUNT(x)    set bits of a u64
 *   IDSET_SELECT(x, r)   position of the r-th set bit of x (r from 0, r < popcount(x))
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

static IDSET_ATTR bool IDSET_FN(has)(const struct rix_idset *s, const uint8_t *id)
{
	size_t lo, hi;
	IDSET_FN(bucket_range)(s, bucket_of(id, s->k), &lo, &hi);
	return lo < hi && run_find(s, id, lo, hi, NULL, NULL);
}

/*
 * The batched lookup, a software pipeline of three stages PIPE_D keys apart: key i's bucket is
 * computed and its directory line prefetched; key i - PIPE_D's run is decoded from that line
 * and its tail, mid bits and (sat: the ranked table's locations, sat_bits an ID by rank; may be
 * NULL) satellite line prefetched; key i - 2 PIPE_D's run is searched. Each line has PIPE_D
 * keys' work to arrive in, for every key alike (groups that wait on their own first keys'
 * lines do not). ranks[i] (may be NULL): the rank or RIX_IDSET_NO_RANK; found[i] (may be NULL).
 * @return the number found.
 */
static IDSET_ATTR size_t IDSET_FN(find_many)(const struct rix_idset *s, const rix_id *ids, size_t n, size_t *ranks,
					     bool *found, const uint8_t *sat, unsigned sat_bits)
{
	uint64_t b[PIPE_RING];
	size_t lo[PIPE_RING], hi[PIPE_RING];
	size_t hits = 0;
#define STAGE_A(i)                                                                       \
	do {                                                                             \
		size_t x_ = (i) % PIPE_RING;                                             \
		b[x_] = bucket_of(ids[(i)].b, s->k);                                     \
		RIX_PREFETCH(block_of(s, b[x_]));                                        \
	} while (0)
#define STAGE_B(j)                                                                       \
	do {                                                                             \
		size_t x_ = (j) % PIPE_RING;                                             \
		IDSET_FN(bucket_range)(s, b[x_], &lo[x_], &hi[x_]);                      \
		if (lo[x_] < hi[x_]) {                                                   \
			RIX_PREFETCH(tail_at(s, lo[x_]));                                \
			RIX_PREFETCH(tail_at(s, lo[x_]) + s->tail - 1); /* its end */    \
			if (s->w)                                                        \
				RIX_PREFETCH(s->mid + ((lo[x_] * s->w) >> 3));           \
			if (sat != NULL) { /* the location's 16 bytes: two lines at times */ \
				const uint8_t *p_ = sat + (((uint64_t)lo[x_] * sat_bits) >> 3); \
				RIX_PREFETCH(p_);                                        \
				RIX_PREFETCH(p_ + 15);                                   \
			}                                                                \
		}                                                                        \
	} while (0)
#define STAGE_C(k)                                                                       \
	do {                                                                             \
		size_t x_ = (k) % PIPE_RING, r_ = RIX_IDSET_NO_RANK;                     \
		bool f_ = lo[x_] < hi[x_] && run_find(s, ids[(k)].b, lo[x_], hi[x_], NULL, &r_); \
		if (ranks != NULL)                                                       \
			ranks[(k)] = f_ ? r_ : RIX_IDSET_NO_RANK;                        \
		if (found != NULL)                                                       \
			found[(k)] = f_;                                                 \
		hits += f_;                                                              \
	} while (0)
	size_t i = 0;
	for (; i < n && i < PIPE_D; i++)
		STAGE_A(i);
	for (; i < n && i < 2 * PIPE_D; i++) {
		STAGE_A(i);
		STAGE_B(i - PIPE_D);
	}
	for (; i < n; i++) { /* the steady state: no bounds to test */
		STAGE_A(i);
		STAGE_B(i - PIPE_D);
		STAGE_C(i - 2 * PIPE_D);
	}
	for (size_t j = n > PIPE_D ? n - PIPE_D : 0; j < n; j++)
		STAGE_B(j);
	for (size_t k = n > 2 * PIPE_D ? n - 2 * PIPE_D : 0; k < n; k++)
		STAGE_C(k);
#undef STAGE_A
#undef STAGE_B
#undef STAGE_C
	return hits;
}

static IDSET_ATTR size_t IDSET_FN(has_many)(bool *found, const struct rix_idset *s, const rix_id *ids, size_t n)
{
	return IDSET_FN(find_many)(s, ids, n, NULL, found, NULL, 0);
}

static IDSET_ATTR bool IDSET_FN(rank)(const struct rix_idset *s, const uint8_t *id, size_t *rank)
{
	size_t lo, hi;
	IDSET_FN(bucket_range)(s, bucket_of(id, s->k), &lo, &hi);
	return lo < hi && run_find(s, id, lo, hi, NULL, rank);
}

/* find_many's ranks; sat, sat_bits: its satellite array (may be NULL). */
static IDSET_ATTR size_t IDSET_FN(rank_many)(size_t *ranks, const struct rix_idset *s, const rix_id *ids, size_t n,
					     const uint8_t *sat, unsigned sat_bits)
{
	return IDSET_FN(find_many)(s, ids, n, ranks, NULL, sat, sat_bits);
}
