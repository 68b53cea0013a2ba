/*
 * index/ranked_lookup.h — the ranked table's lookup of one ID (ranked.c), compiled once for each
 * instance of the set's lookups (idset_instances.h): the set's directory decode, the run's
 * search and the location's decode in one function, no call between them (the filter, where
 * the caller tests it, in line: rix__ranked_find, rix__ranked_maybe). What a known
 * lookup executes is what keeps the next lookup's misses from starting (bench/RESULTS.md): the
 * calls, their saved registers and the set's own checks were a third of it.
 */

#include "idset_range.h"

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
	loc_get(r, rank, loc);
	return true;
}
