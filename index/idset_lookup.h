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
 * The batched lookup, a software pipeline of four stages PIPE_D keys apart: key i's bucket is
 * computed and its directory line prefetched; key i - PIPE_D's run is decoded from that line
 * and the line of its mid bits prefetched (with no mid bits, those of its first tail); key
 * i - 2 PIPE_D's mid bits pick its candidate (the run's first entry whose mid bits are the
 * key's; the middle of a run long enough to be binary-searched) and the lines of that
 * candidate's tail (with the extra bytes after it: the ranked table's location) are
 * prefetched; key i - 3 PIPE_D's run is searched from there. Each line has PIPE_D keys' work to
 * arrive in, for every key alike (groups that wait on their own first keys' lines do not), and
 * a key reads the lines of the one tail it compares, not those of its run's first (another
 * ID's, a time in four for a present ID at 10M), and no tail at all when no mid bits match (an
 * absent ID, 255 times in 256 with 8 mid bits).
 * ranks[i] (may be NULL): the rank or RIX_IDSET_NO_RANK; found[i] (may be NULL).
 * @return the number found.
 */
static IDSET_ATTR size_t IDSET_FN(find_many)(const struct rix_idset *s, const rix_id *ids, size_t n, size_t *ranks,
					     bool *found)
{
	uint64_t b[PIPE_RING];
	size_t lo[PIPE_RING], hi[PIPE_RING], at[PIPE_RING];
	size_t hits = 0;
	_Static_assert(PIPE_RING > 3 * PIPE_D, "the ring holds every key in flight");
	const unsigned w_ = s->w;
	/* A candidate's last byte read: its tail's, or with extra bytes the RIX__IDSET_EXTRA_MAX-th
	 * from their start (the owner reads them with loads that run past them: ranked.c's
	 * loc_read; the record's own last byte left a line unrequested 1 time in 8 at 10M). */
	const size_t end_ = s->extra ? s->tail + RIX__IDSET_EXTRA_MAX - 1 : s->stride - 1;
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
		at[x_] = lo[x_];                                                         \
		if (lo[x_] < hi[x_]) {                                                   \
			if (w_) { /* the first and the last byte stage M's 8-byte loads read */ \
				RIX_PREFETCH(s->mid + ((lo[x_] * w_) >> 3));             \
				RIX_PREFETCH(s->mid + (((hi[x_] - 1) * w_) >> 3) + 7);   \
			} else { /* no mid bits: the first tail is the candidate */      \
				RIX_PREFETCH(tail_at(s, lo[x_]));                        \
				RIX_PREFETCH(tail_at(s, lo[x_]) + end_);                 \
			}                                                                \
		}                                                                        \
	} while (0)
#define STAGE_M(m)                                                                       \
	do {                                                                             \
		size_t x_ = (m) % PIPE_RING, c_ = lo[x_], h_ = hi[x_];                   \
		if (h_ - c_ > LINEAR_MAX) {                                              \
			c_ += (h_ - c_) / 2; /* the binary search's first */             \
		} else if (w_) {                                                         \
			unsigned km_ = mid_key(s, ids[(m)].b);                           \
			while (c_ < h_ && mid_get(s, c_) != km_)                         \
				c_++;                                                    \
			at[x_] = c_;                                                     \
		} else {                                                                 \
			c_ = h_; /* prefetched by stage B */                             \
		}                                                                        \
		if (c_ < h_) {                                                           \
			RIX_PREFETCH(tail_at(s, c_));                                    \
			RIX_PREFETCH(tail_at(s, c_) + end_);                             \
		}                                                                        \
	} while (0)
/* The candidate's tail compared first (its mid bits are the key's: run_find's first step
 * without the checks, 25 instructions a key fewer, gdb-stepped), the rest of the run after it
 * only when that tail differs. */
#define STAGE_C(k)                                                                       \
	do {                                                                             \
		size_t x_ = (k) % PIPE_RING, r_ = RIX_IDSET_NO_RANK, c_ = at[x_], h_ = hi[x_]; \
		const uint8_t *id_ = ids[(k)].b;                                         \
		bool f_;                                                                 \
		if (h_ - lo[x_] > LINEAR_MAX)                                            \
			f_ = run_find(s, id_, lo[x_], h_, NULL, &r_);                    \
		else if (c_ >= h_)                                                       \
			f_ = false;                                                      \
		else if (tail_eq(tail_at(s, c_), id_ + s->kb, s->tail))                  \
			f_ = true, r_ = c_;                                              \
		else                                                                     \
			f_ = run_find(s, id_, c_ + 1, h_, NULL, &r_);                    \
		if (ranks != NULL)                                                       \
			ranks[(k)] = f_ ? r_ : RIX_IDSET_NO_RANK;                        \
		if (found != NULL)                                                       \
			found[(k)] = f_;                                                 \
		hits += f_;                                                              \
	} while (0)
	/* Step t runs stage A for key t, B for t - PIPE_D, M for t - 2 PIPE_D, C for t - 3 PIPE_D,
	 * those that are keys; in the steady state all four are, with nothing to test. */
	const size_t D = PIPE_D, steady_end = n > 3 * D ? n : 3 * D;
	size_t t = 0;
	for (; t < 3 * D; t++) {
		if (t < n)
			STAGE_A(t);
		if (t >= D && t - D < n)
			STAGE_B(t - D);
		if (t >= 2 * D && t - 2 * D < n)
			STAGE_M(t - 2 * D);
	}
	for (; t < steady_end; t++) {
		STAGE_A(t);
		STAGE_B(t - D);
		STAGE_M(t - 2 * D);
		STAGE_C(t - 3 * D);
	}
	for (; t < n + 3 * D; t++) {
		if (t - D < n)
			STAGE_B(t - D);
		if (t - 2 * D < n)
			STAGE_M(t - 2 * D);
		STAGE_C(t - 3 * D);
	}
#undef STAGE_A
#undef STAGE_B
#undef STAGE_M
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
