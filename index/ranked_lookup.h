/*
 * index/ranked_lookup.h — the ranked table's lookup of one ID (ranked.c), compiled once for each
 * instance of the set's lookups (idset_instances.h): the filter (unless the caller tested it:
 * ranked_find_passed), the set's directory decode, the run's search and the location's decode
 * in one function, no call between them. What a known
 * lookup executes is what keeps the next lookup's misses from starting (bench/RESULTS.md): the
 * calls, their saved registers and the set's own checks were a third of it.
 */

#include "idset_range.h"

/* r holds IDs (nd > 0); pf: id passed the filter already. */
static IDSET_ATTR __attribute__((always_inline)) inline bool IDSET_FN(ranked_find_in)(const struct rix__ranked *r, const rix_id *id,
										rix_loc *loc, bool pf)
{
	if (!pf && !rix__ranked_maybe(r, id))
		return false;
	const struct rix_idset *s = r->ids;
	size_t lo, hi, rank;
	IDSET_FN(bucket_range)(s, bucket_of(id->b, s->k), &lo, &hi);
	if (lo >= hi || !run_find(s, id->b, lo, hi, NULL, &rank))
		return false;
	loc_get(r, rank, loc);
	return true;
}

static IDSET_ATTR __attribute__((noinline)) bool IDSET_FN(ranked_find)(const struct rix__ranked *r, const rix_id *id, rix_loc *loc)
{
	return IDSET_FN(ranked_find_in)(r, id, loc, false);
}

static IDSET_ATTR __attribute__((noinline)) bool IDSET_FN(ranked_find_passed)(const struct rix__ranked *r, const rix_id *id,
									     rix_loc *loc)
{
	return IDSET_FN(ranked_find_in)(r, id, loc, true);
}
