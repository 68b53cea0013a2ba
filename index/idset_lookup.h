/*
 * index/idset_lookup.h — the lookups of index/idset.c, written once and compiled three times:
 * with the portable bit primitives, and (x86-64) with POPCNT and BMI2, and with AVX-512 VPOPCNTQ
 * besides (IDSET_AVX512: its own directory decode), the best the processor has chosen per set
 * when it is built. Private to idset.c, compiled by idset_instances.h, which defines (as it does
 * for idset_range.h and ranked_lookup.h):
 *   IDSET_FN(name)       the name of this instance's version of name
 *   IDSET_ATTR           its function attributes (a target, or nothing)
 *   IDSET_POPCOUNT(x)    set bits of a u64
 *   IDSET_SELECT(x, r)   position of the r-th set bit of x (r from 0, r < popcount(x))
 */

#include "idset_range.h"

static IDSET_ATTR bool IDSET_FN(has)(const struct rix_idset *s, const uint8_t *id)
{
	size_t lo, hi;
	IDSET_FN(bucket_range)(s, bucket_of(id, s->k), &lo, &hi);
	return lo < hi && run_find(s, id, lo, hi, NULL, NULL);
}

/*
 * The batched lookup, a software pipeline of three stages PIPE_D keys apart: key i's bucket is
 * computed and its directory line prefetched; key i - PIPE_D's run is decoded from that line
 * and the lines of its first tail (with the extra bytes after it: the ranked table's location)
 * and mid bits prefetched; key i - 2 PIPE_D's run is searched. Each line has PIPE_D keys' work
 * to arrive in, for every key alike (groups that wait on their own first keys' lines do not).
 * ranks[i] (may be NULL): the rank or RIX_IDSET_NO_RANK; found[i] (may be NULL).
 * @return the number found.
 */
static IDSET_ATTR size_t IDSET_FN(find_many)(const struct rix_idset *s, const rix_id *ids, size_t n, size_t *ranks,
					     bool *found)
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
			RIX_PREFETCH(tail_at(s, lo[x_]) + s->stride - 1); /* its end */  \
			if (s->w)                                                        \
				RIX_PREFETCH(s->mid + ((lo[x_] * s->w) >> 3));           \
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
	return IDSET_FN(find_many)(s, ids, n, NULL, found);
}

static IDSET_ATTR bool IDSET_FN(rank)(const struct rix_idset *s, const uint8_t *id, size_t *rank)
{
	size_t lo, hi;
	IDSET_FN(bucket_range)(s, bucket_of(id, s->k), &lo, &hi);
	return lo < hi && run_find(s, id, lo, hi, NULL, rank);
}

/* find_many's ranks. */
static IDSET_ATTR size_t IDSET_FN(rank_many)(size_t *ranks, const struct rix_idset *s, const rix_id *ids, size_t n)
{
	return IDSET_FN(find_many)(s, ids, n, ranks, NULL);
}
