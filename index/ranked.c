/*
 * index/ranked.c — the ranked table (ranked.h): blob locations by the rank of the blob's ID in
 * a rix_idset, bit-packed.
 *
 * Building: the entries are sorted by ID in place (id_sort.h's radix sort, compiled here for
 * 48-byte entries); one pass finds the widest value of each location field and counts the
 * distinct IDs and the second locations; the packed array and the side array are allocated
 * (up to here a failure leaves nothing to undo); a second pass writes each distinct ID's 32
 * bytes to the front of the entries' own array (ID j at 32 j, never past entry j >= the one
 * being read) and its location into the packed array; the array is shrunk to the IDs and
 * handed to rix_idset_build_owned, which builds the set inside it.
 *
 * A packed location: pack number, offset, length, uncompressed length, low field first, each
 * as wide as the table's largest value (0 bits for a field that is 0 everywhere). Up to 120
 * bits a location is read with one unaligned 16-byte load (two 8-byte ones) and a shift of at
 * most 7; a table whose fields need more (offsets and lengths near 4 GiB in millions of packs)
 * gets 32 bits a field, 128 a location, byte-aligned.
 */
#include <stdlib.h>
#include <string.h>

#include "rix/alloc.h"
#include "rix/error.h"
#include "rix/idset.h"
#include "index_internal.h"
#include "ranked.h"
#include "idset_cmp.h"

/* id_sort.h for the collected entries (struct fentry): the ID is their first 32 bytes. */
void rix__ranked_sort_from(struct fentry *a, size_t n, unsigned d);
void rix__ranked_sort(struct fentry *a, size_t n, unsigned workers);
#define SORT_REC struct fentry
#define SORT_ID(r) ((r).id.b)
#define SORT_FN(name) rix__ranked_##name
#include "id_sort.h"
#undef SORT_REC
#undef SORT_ID
#undef SORT_FN

#define LOC_PACKED_MAX 120u /* widest packed location read with a 16-byte load and a shift */
#define LOC_PAD 16u         /* bytes after the last location, for that load */
#define BATCH 256u          /* keys a round of rix__ranked_find_many */

__extension__ typedef unsigned __int128 u128;

struct rdup {
	uint32_t rank;
	rix_loc loc;
};

struct rix__ranked {
	rix_idset *ids;
	uint8_t *locs; /* distinct x width bits + LOC_PAD bytes */
	size_t locs_size;
	struct rdup *dups; /* second and later locations, by rank (an ID's in place order) */
	uint32_t ndups;
	uint32_t nd;    /* distinct IDs */
	unsigned width; /* bits a location */
	unsigned pb, ob, lb, ub;
	uint32_t pm, om, lm, um; /* the fields' masks */
	uint64_t *filter; /* filter_words(nd) words: each distinct ID's FILTER_K bits in one word */
};

/*
 * The filter in front of the set: a register-blocked Bloom filter of 8 bits an ID (one byte an
 * entry), FILTER_K bits of one 64-bit word for each ID: the word by the ID's first 8 bytes (its
 * place among the IDs: the build, walking them in order, sets the words in order, where words
 * chosen at random kept every line fill buffer waiting on a read-modify-write of a line of the
 * filter), the bits in it by bytes 16-23 (SHA-256 bits apart from the set's, which are the ID's
 * first ones: a random absent ID meets a word as full as any). An absent ID passes it about one time in 30
 * (bench/RESULTS.md): the rest are answered by one load of a word of an array of nd bytes
 * (mostly in cache), without the set's directory decode and run scan, which cost an absent ID
 * three times the instructions of the chaining table this table replaced. A present ID always
 * passes: the answers stay the set's, exact. IDs crafted to crowd one word (whose every bit
 * then passes) only bring their lookups back to the set's cost.
 */
#define FILTER_K 4 /* changing it, filter_words or filter_mask: bump RIX__RANKED_SCHEME */

static inline size_t filter_words(size_t nd)
{
	return nd / 8 + 1;
}

/* Entries ahead of the build's pass whose lines it requests (ranked build, pass 2): the
 * hardware's prefetcher stops at each 4 KiB page of the sorted entries. */
#define ENTRIES_AHEAD 96

/* The filter's word of id, of nw: ascending with the ID. */
static inline size_t filter_word(const uint8_t *id, size_t nw)
{
	return (size_t)(((u128)load64_be(id) * nw) >> 64);
}

static inline uint64_t filter_mask(const uint8_t *id, size_t nw, size_t *word)
{
	uint64_t b = load64_le(id + 16);
	*word = filter_word(id, nw);
	return (1ull << (b & 63)) | (1ull << ((b >> 6) & 63)) | (1ull << ((b >> 12) & 63)) | (1ull << ((b >> 18) & 63));
}

static inline bool filter_maybe(const struct rix__ranked *r, const rix_id *id)
{
	size_t w;
	uint64_t m = filter_mask(id->b, filter_words(r->nd), &w);
	return (r->filter[w] & m) == m;
}

static inline unsigned bits_of(uint32_t v)
{
	return v ? 32u - (unsigned)__builtin_clz(v) : 0u;
}

static inline uint64_t mask_of(unsigned b)
{
	return ((uint64_t)1 << b) - 1; /* b <= 32 */
}

/* The location's width and the fields' masks, from the fields' widths. */
static void set_width(struct rix__ranked *r)
{
	r->width = r->pb + r->ob + r->lb + r->ub;
	r->pm = (uint32_t)mask_of(r->pb);
	r->om = (uint32_t)mask_of(r->ob);
	r->lm = (uint32_t)mask_of(r->lb);
	r->um = (uint32_t)mask_of(r->ub);
}

static inline void loc_get(const struct rix__ranked *r, size_t rank, rix_loc *loc)
{
	uint64_t bit = (uint64_t)rank * r->width;
	const uint8_t *p = r->locs + (bit >> 3);
	u128 v = (((u128)load64_le(p + 8) << 64) | load64_le(p)) >> (bit & 7);
	loc->pack = (uint32_t)v & r->pm;
	v >>= r->pb;
	loc->offset = (uint32_t)v & r->om;
	v >>= r->ob;
	loc->length = (uint32_t)v & r->lm;
	v >>= r->lb;
	loc->uncompressed_length = (uint32_t)v & r->um;
}

/* Writes rank's location into the zeroed array. */
static inline void loc_put(struct rix__ranked *r, size_t rank, const rix_loc *loc)
{
	u128 v = (u128)loc->uncompressed_length;
	v = (v << r->lb) | loc->length;
	v = (v << r->ob) | loc->offset;
	v = (v << r->pb) | loc->pack;
	uint64_t bit = (uint64_t)rank * r->width;
	uint8_t *p = r->locs + (bit >> 3);
	v <<= bit & 7;
	store64_le(p, load64_le(p) | (uint64_t)v);
	store64_le(p + 8, load64_le(p + 8) | (uint64_t)(v >> 64));
}

static inline bool place_less(const rix_loc *a, const rix_loc *b)
{
	return a->pack != b->pack ? a->pack < b->pack : a->offset < b->offset;
}

static int cmp_place(const void *a, const void *b)
{
	const rix_loc *x = &((const struct fentry *)a)->loc, *y = &((const struct fentry *)b)->loc;
	return place_less(x, y) ? -1 : place_less(y, x);
}

/* Entries of one ID in place order: a few by insertion, many (one blob listed in very many
 * packs: an index file's choice) by qsort, so that no index makes the build quadratic. */
static void sort_places(struct fentry *e, uint32_t n)
{
	if (n > 32) {
		qsort(e, n, sizeof(*e), cmp_place);
		return;
	}
	for (uint32_t i = 1; i < n; i++)
		for (uint32_t j = i; j > 0 && place_less(&e[j].loc, &e[j - 1].loc); j--) {
			rix_loc t = e[j].loc;
			e[j].loc = e[j - 1].loc;
			e[j - 1].loc = t;
		}
}

static bool same_place(const rix_loc *a, const rix_loc *b, const rix_id *packs)
{
	return a->offset == b->offset && a->length == b->length && a->uncompressed_length == b->uncompressed_length &&
	       (a->pack == b->pack || rix__id_eq(&packs[a->pack], &packs[b->pack]));
}

void rix__ranked_free(struct rix__ranked *r)
{
	if (r == NULL)
		return;
	rix_idset_free(r->ids);
	rix_free(r->locs);
	rix_free(r->dups);
	rix_free(r->filter);
	rix_free(r);
}

int rix__ranked_build_owned(struct rix__ranked **out, struct fentry *entries, uint32_t count, const rix_id *packs,
			    unsigned workers)
{
	*out = NULL;
	struct rix__ranked *r = rix_calloc(1, sizeof(*r));
	if (r == NULL) {
		rix_free(entries);
		return rix_error_set(RIX_ENOMEM, "master index: out of memory");
	}
	rix__advise_huge(entries, (size_t)count * sizeof(*entries)); /* the set is built in this array */
	rix__collapse_huge(entries, (size_t)count * sizeof(*entries)); /* realloc's moves split them */
	rix__ranked_sort(entries, count, workers);
	/* Pass 1: field widths, distinct IDs, second locations (an upper bound: some repeat). The
	 * sort is not stable: an ID's locations are put in place order here (pack number, offset),
	 * so that the first is the same whatever order they came in (the oldest pack's, as packs
	 * are numbered in the order they are loaded). */
	uint32_t mp = 0, mo = 0, ml = 0, mu = 0, nd = 0, run = 0;
	for (uint32_t i = 0; i <= count; i++) {
		if (i == count || i == 0 || !rix__id_eq(&entries[i - 1].id, &entries[i].id)) {
			if (i - run > 1) /* the run of the ID before: its locations in place order */
				sort_places(entries + run, i - run);
			if (i == count)
				break;
			nd++;
			run = i;
		}
		const rix_loc *l = &entries[i].loc;
		mp |= l->pack;
		mo |= l->offset;
		ml |= l->length;
		mu |= l->uncompressed_length;
	}
	r->pb = bits_of(mp);
	r->ob = bits_of(mo);
	r->lb = bits_of(ml);
	r->ub = bits_of(mu);
	if (r->pb + r->ob + r->lb + r->ub > LOC_PACKED_MAX)
		r->pb = r->ob = r->lb = r->ub = 32;
	set_width(r);
	r->nd = nd;
	r->locs_size = (((uint64_t)nd * r->width + 7) >> 3) + LOC_PAD;
	r->locs = rix_calloc(1, r->locs_size);
	r->filter = rix_calloc(filter_words(nd), sizeof(uint64_t));
	if (count > nd)
		r->dups = rix_malloc((size_t)(count - nd) * sizeof(*r->dups));
	if (r->locs == NULL || r->filter == NULL || (count > nd && r->dups == NULL)) {
		rix_free(entries);
		rix__ranked_free(r);
		return rix_error_set(RIX_ENOMEM, "master index: out of memory for %u locations", count);
	}
	rix__advise_huge(r->locs, r->locs_size);
	rix__advise_huge(r->filter, filter_words(nd) * sizeof(uint64_t));
	size_t nw = filter_words(nd);
	/* Pass 2: IDs to the front, locations packed; second locations aside unless they repeat.
	 * The bytes between the IDs written (32 j) and the next entry to read (48 i) are dead: given
	 * back as the pass goes, so that the packed locations grow in the memory they free and the
	 * peak stays the entries' array's and the filter's (49 bytes an entry), not that plus the
	 * locations'. */
	rix_id *ids = (rix_id *)(void *)entries;
	uint32_t j = 0, first_dup = 0;
	size_t released = 0; /* bytes of the array below which the dead pages are given back */
	for (uint32_t i = 0; i < count; i++) {
		if ((i & 0xFFFF) == 0 && i > 0) {
			size_t lo = (size_t)j * sizeof(rix_id), hi = (size_t)i * sizeof(struct fentry);
			lo = lo > released ? lo : released;
			rix__release_pages((char *)entries + lo, hi - lo);
			/* up to the last whole huge page given (the rest of hi's page, next time) */
			size_t upto = (((uintptr_t)entries + hi) & ~(((uintptr_t)2 << 20) - 1)) - (uintptr_t)entries;
			released = upto > released && upto <= hi ? upto : released;
		}
		if (i + ENTRIES_AHEAD < count)
			RIX_PREFETCH(&entries[i + ENTRIES_AHEAD]);
		struct fentry e = entries[i];
		if (j > 0 && rix__id_eq(&ids[j - 1], &e.id)) {
			bool repeat = false;
			if (packs != NULL) { /* asked to drop repeats (compared with each of the ID's) */
				rix_loc main;
				loc_get(r, j - 1, &main);
				repeat = same_place(&main, &e.loc, packs);
				for (uint32_t d = first_dup; d < r->ndups && !repeat; d++)
					repeat = same_place(&r->dups[d].loc, &e.loc, packs);
			}
			if (!repeat)
				r->dups[r->ndups++] = (struct rdup){ .rank = j - 1, .loc = e.loc };
			continue;
		}
		first_dup = r->ndups;
		size_t w;
		uint64_t m = filter_mask(e.id.b, nw, &w);
		r->filter[w] |= m;
		memmove(&ids[j], &e.id, sizeof(rix_id));
		loc_put(r, j, &e.loc);
		j++;
	}
	if (r->ndups == 0) {
		rix_free(r->dups);
		r->dups = NULL;
	} else if (r->ndups < count - nd) {
		struct rdup *d = rix_realloc(r->dups, (size_t)r->ndups * sizeof(*r->dups));
		if (d != NULL)
			r->dups = d;
	}
	/* The set is built with 8 or more mid bits (a lookup of an absent ID reads the mid array,
	 * not the tails), in the array with the room that build needs beyond the IDs kept. */
	size_t have = (size_t)count * sizeof(struct fentry), room = (size_t)nd * (sizeof(rix_id) + 3) + 4096;
	if (nd > 0 && room < have) {
		rix_id *shrunk = rix_realloc(ids, room);
		if (shrunk != NULL) {
			ids = shrunk;
			have = room;
		}
	}
	int rc = rix__idset_build_owned_in(&r->ids, ids, nd, have, RIX_IDSET_SORTED | RIX__IDSET_DISTINCT | RIX__IDSET_MID8, workers);
	if (rc != 0) {
		rix_free(ids);
		rix__ranked_free(r);
		return rc;
	}
	*out = r;
	return 0;
}

struct gather {
	struct fentry *e;
	size_t n;
};

static int gather_one(void *payload, const rix_id *id, const rix_loc *loc)
{
	struct gather *g = payload;
	g->e[g->n++] = (struct fentry){ .id = *id, .loc = *loc };
	return 0;
}

int rix__ranked_merge_owned(struct rix__ranked **out, struct rix__ranked *old, struct rix__ranked *top, bool own_old,
			    struct fentry *add, size_t nadd, const rix_id *packs, unsigned workers)
{
	*out = NULL;
	size_t n0 = (size_t)rix__ranked_count(old) + rix__ranked_count(top), total = n0 + nadd;
	if (total > 0xFFFFFFFEu || total == 0) {
		rix_free(add);
		if (own_old) {
			rix__ranked_free(old);
			rix__ranked_free(top);
		}
		return total ? rix_error_set(RIX_ELIMIT, "master index: %zu entries of one type is over the limit", total)
			     : 0;
	}
	/* The old entries before the added ones, in the added ones' array grown. */
	struct fentry *all = rix_realloc(add, total * sizeof(*all));
	if (all == NULL) {
		rix_free(add);
		if (own_old) {
			rix__ranked_free(old);
			rix__ranked_free(top);
		}
		return rix_error_set(RIX_ENOMEM, "master index: out of memory for %zu entries", total);
	}
	rix__advise_huge(all, total * sizeof(*all)); /* before the old entries' pages are touched */
	if (n0 > 0 && nadd > 0)
		memmove(all + n0, all, nadd * sizeof(*all));
	struct gather g = { .e = all };
	(void)rix__ranked_foreach(old, gather_one, &g); /* gather_one never stops it */
	(void)rix__ranked_foreach(top, gather_one, &g);
	if (own_old) { /* their entries are in the array: not held beside it while it is built */
		rix__ranked_free(old);
		rix__ranked_free(top);
	}
	return rix__ranked_build_owned(out, all, (uint32_t)total, packs, workers);
}

uint32_t rix__ranked_count(const struct rix__ranked *r)
{
	return r ? r->nd + r->ndups : 0;
}

uint32_t rix__ranked_distinct(const struct rix__ranked *r)
{
	return r ? r->nd : 0;
}

size_t rix__ranked_memory(const struct rix__ranked *r)
{
	if (r == NULL)
		return 0;
	return sizeof(*r) + rix_idset_memory(r->ids) + r->locs_size + (size_t)r->ndups * sizeof(*r->dups) +
	       filter_words(r->nd) * sizeof(uint64_t);
}

unsigned rix__ranked_loc_bits(const struct rix__ranked *r)
{
	return r ? r->width : 0;
}

bool rix__ranked_filter_passes(const struct rix__ranked *r, const rix_id *id)
{
	return r != NULL && filter_maybe(r, id);
}

bool rix__ranked_find(const struct rix__ranked *r, const rix_id *id, rix_loc *loc)
{
	size_t rank;
	if (r == NULL || !filter_maybe(r, id) || !rix_idset_rank(r->ids, id, &rank))
		return false;
	loc_get(r, rank, loc);
	return true;
}

size_t rix__ranked_find_many(const struct rix__ranked *r, const rix_id *ids, size_t n, rix_loc *locs, bool *found)
{
	memset(found, 0, n * sizeof(*found));
	if (r == NULL)
		return 0;
	size_t hits = 0, nw = filter_words(r->nd);
	size_t rank[BATCH], word[BATCH];
	uint64_t mask[BATCH];
	uint16_t which[BATCH];
	rix_id maybe[BATCH];
	for (size_t g = 0; g < n; g += BATCH) {
		size_t m = n - g < BATCH ? n - g : BATCH;
		/* The filter: every key's word on its way, then the keys that pass, gathered. */
		for (size_t i = 0; i < m; i++) {
			mask[i] = filter_mask(ids[g + i].b, nw, &word[i]);
			RIX_PREFETCH(&r->filter[word[i]]);
		}
		size_t k = 0;
		for (size_t i = 0; i < m; i++) {
			which[k] = (uint16_t)i;
			maybe[k] = ids[g + i];
			k += (r->filter[word[i]] & mask[i]) == mask[i];
		}
		/* The locations' lines are fetched with the IDs' (at the run's first rank: the rank
		 * itself, as a rule), so that decoding them below rarely waits. */
		if (k == 0 || rix__idset_rank_many_sat(rank, r->ids, maybe, k, r->locs, r->width) == 0)
			continue;
		for (size_t j = 0; j < k; j++) {
			if (rank[j] == RIX_IDSET_NO_RANK)
				continue;
			size_t i = g + which[j];
			found[i] = true;
			loc_get(r, rank[j], &locs[i]);
			hits++;
		}
	}
	return hits;
}

void rix__ranked_totals(const struct rix__ranked *r, uint64_t *count, uint64_t *stored, uint64_t *plain)
{
	if (r == NULL)
		return;
	uint64_t len = 0, pl = 0;
	unsigned skip = r->pb + r->ob; /* the pack number and offset: not read */
	if (r->lb + r->ub + 7 <= 64) {
		/* The packed array in order, no ID, no pack ID: the length and uncompressed length of
		 * each location from one 8-byte load at the length's first byte. */
		uint64_t lm = r->lm, um = r->um, ushift = r->lb;
		for (uint64_t bit = skip, i = 0; i < r->nd; i++, bit += r->width) {
			uint64_t v = load64_le(r->locs + (bit >> 3)) >> (bit & 7);
			uint32_t l = (uint32_t)(v & lm), u = (uint32_t)((v >> ushift) & um);
			len += l;
			pl += rix_blob_plain_size(l, u);
		}
	} else {
		for (uint32_t i = 0; i < r->nd; i++) {
			rix_loc l;
			loc_get(r, i, &l);
			len += l.length;
			pl += rix_blob_plain_size(l.length, l.uncompressed_length);
		}
	}
	for (uint32_t d = 0; d < r->ndups; d++) {
		len += r->dups[d].loc.length;
		pl += rix_blob_plain_size(r->dups[d].loc.length, r->dups[d].loc.uncompressed_length);
	}
	*count += (uint64_t)r->nd + r->ndups;
	*stored += len;
	*plain += pl;
}

/* The first second location of rank (ndups if none). */
static uint32_t dups_of(const struct rix__ranked *r, size_t rank)
{
	uint32_t lo = 0, hi = r->ndups;
	while (lo < hi) {
		uint32_t m = lo + (hi - lo) / 2;
		if (r->dups[m].rank < rank)
			lo = m + 1;
		else
			hi = m;
	}
	return lo;
}

size_t rix__ranked_find_all(const struct rix__ranked *r, const rix_id *id, size_t skip, rix_loc *out, size_t cap)
{
	size_t rank;
	if (r == NULL || !filter_maybe(r, id) || !rix_idset_rank(r->ids, id, &rank))
		return 0;
	size_t k = 0;
	if (skip == 0 && cap > 0)
		loc_get(r, rank, &out[0]);
	k++;
	for (uint32_t d = dups_of(r, rank); d < r->ndups && r->dups[d].rank == rank; d++, k++)
		if (k >= skip && k - skip < cap)
			out[k - skip] = r->dups[d].loc;
	return k;
}

_Static_assert(RIX__IDSET_ROUND <= RIX__RANKED_ROUND, "a round of the set's IDs fits the walk's locations");

/* A walk in rounds: the set's rounds of IDs, each with its locations (an ID's second ones
 * after its first), handed on RIX__RANKED_ROUND entries at a time. */
struct walk {
	const struct rix__ranked *r;
	rix__ranked_round_fn fn;
	void *payload;
	size_t rank;
	uint32_t dup;
	size_t n;
	rix_id id[RIX__RANKED_ROUND];
	rix_loc loc[RIX__RANKED_ROUND];
};

static int walk_put(struct walk *w, const rix_id *id, const rix_loc *loc)
{
	w->id[w->n] = *id;
	w->loc[w->n] = *loc;
	if (++w->n < RIX__RANKED_ROUND)
		return 0;
	w->n = 0;
	return w->fn(w->payload, w->id, w->loc, RIX__RANKED_ROUND);
}

static int walk_round(void *payload, const rix_id *ids, size_t n)
{
	struct walk *w = payload;
	const struct rix__ranked *r = w->r;
	/* No second location among this round's ranks, nothing waiting: the set's IDs as they are,
	 * with their locations beside them (the common case: no copy of the IDs). */
	if (w->n == 0 && (w->dup >= r->ndups || r->dups[w->dup].rank >= w->rank + n)) {
		for (size_t i = 0; i < n; i++)
			loc_get(r, w->rank + i, &w->loc[i]);
		w->rank += n;
		return w->fn(w->payload, ids, w->loc, n);
	}
	int rc = 0;
	for (size_t i = 0; i < n && rc == 0; i++, w->rank++) {
		rix_loc loc;
		loc_get(r, w->rank, &loc);
		rc = walk_put(w, &ids[i], &loc);
		for (; rc == 0 && w->dup < r->ndups && r->dups[w->dup].rank == w->rank; w->dup++)
			rc = walk_put(w, &ids[i], &r->dups[w->dup].loc);
	}
	return rc;
}

int rix__ranked_foreach_round(const struct rix__ranked *r, rix__ranked_round_fn fn, void *payload)
{
	if (r == NULL)
		return 0;
	struct walk w = { .r = r, .fn = fn, .payload = payload }; /* 3 KiB of entries */
	int rc = rix__idset_foreach_round(r->ids, walk_round, &w);
	if (rc == 0 && w.n > 0)
		rc = fn(payload, w.id, w.loc, w.n);
	return rc;
}

struct one_by_one {
	rix__ranked_fn fn;
	void *payload;
};

static int each_of_round(void *payload, const rix_id *ids, const rix_loc *locs, size_t n)
{
	struct one_by_one *o = payload;
	int rc = 0;
	for (size_t i = 0; i < n && rc == 0; i++)
		rc = o->fn(o->payload, &ids[i], &locs[i]);
	return rc;
}

int rix__ranked_foreach(const struct rix__ranked *r, rix__ranked_fn fn, void *payload)
{
	struct one_by_one o = { fn, payload };
	return rix__ranked_foreach_round(r, each_of_round, &o);
}

/* ---- Image ---------------------------------------------------------------------------------- */

enum { R_ND, R_NDUPS, R_PB, R_OB, R_LB, R_UB, R_LOCS, R_SET };
_Static_assert(R_SET + RIX__IDSET_DESC_WORDS == RIX__RANKED_DESC_WORDS, "the descriptor's words");

void rix__ranked_export(const struct rix__ranked *r, uint64_t desc[RIX__RANKED_DESC_WORDS],
			const void *sec[RIX__RANKED_SECTIONS], size_t size[RIX__RANKED_SECTIONS])
{
	memset(desc, 0, RIX__RANKED_DESC_WORDS * sizeof(desc[0]));
	desc[R_ND] = r->nd;
	desc[R_NDUPS] = r->ndups;
	desc[R_PB] = r->pb;
	desc[R_OB] = r->ob;
	desc[R_LB] = r->lb;
	desc[R_UB] = r->ub;
	desc[R_LOCS] = r->locs_size;
	rix__idset_export(r->ids, desc + R_SET, &sec[0], &size[0]);
	sec[1] = r->locs;
	size[1] = r->locs_size;
	sec[2] = r->ndups ? r->dups : NULL;
	size[2] = (size_t)r->ndups * sizeof(*r->dups);
	sec[3] = r->filter;
	size[3] = filter_words(r->nd) * sizeof(uint64_t);
}

/* Widths a build chooses: each at most 32, all 32 when their sum is over LOC_PACKED_MAX. */
static bool widths_valid(const uint64_t *d)
{
	if (d[R_PB] > 32 || d[R_OB] > 32 || d[R_LB] > 32 || d[R_UB] > 32)
		return false;
	uint64_t w = d[R_PB] + d[R_OB] + d[R_LB] + d[R_UB];
	return w <= LOC_PACKED_MAX || w == 128;
}

int rix__ranked_section_sizes(const uint64_t desc[RIX__RANKED_DESC_WORDS], size_t size[RIX__RANKED_SECTIONS])
{
	uint64_t nd = desc[R_ND], w = desc[R_PB] + desc[R_OB] + desc[R_LB] + desc[R_UB];
	if (nd > RIX_IDSET_MAX_IDS || desc[R_NDUPS] > 0xFFFFFFFFu - nd || !widths_valid(desc) ||
	    desc[R_SET + 0] != nd || desc[R_LOCS] != ((nd * w + 7) >> 3) + LOC_PAD || desc[R_SET + 9] > SIZE_MAX / 2)
		return rix_error_set(RIX_ECORRUPT, "master image: a ranked table's sizes do not agree");
	size[0] = (size_t)desc[R_SET + 9];
	size[1] = (size_t)desc[R_LOCS];
	size[2] = (size_t)desc[R_NDUPS] * sizeof(struct rdup);
	size[3] = filter_words((size_t)nd) * sizeof(uint64_t);
	return 0;
}

int rix__ranked_import(struct rix__ranked **out, const uint64_t desc[RIX__RANKED_DESC_WORDS],
		       void *sec[RIX__RANKED_SECTIONS], const size_t size[RIX__RANKED_SECTIONS], uint32_t npacks)
{
	*out = NULL;
	size_t want[RIX__RANKED_SECTIONS];
	int rc = rix__ranked_section_sizes(desc, want);
	for (int k = 0; rc == 0 && k < RIX__RANKED_SECTIONS; k++)
		if (size[k] != want[k] || (size[k] > 0 && sec[k] == NULL))
			rc = rix_error_set(RIX_ECORRUPT, "master image: a ranked table's section is not its size");
	if (rc != 0)
		return rc;
	struct rix__ranked *r = rix_calloc(1, sizeof(*r));
	if (r == NULL)
		return rix_error_set(RIX_ENOMEM, "master index: out of memory");
	r->locs = sec[1];
	r->locs_size = size[1];
	r->dups = sec[2];
	r->filter = sec[3]; /* any bits: a filter that turns down a present ID answers wrongly, never
			     * outside the table (the image is sealed; the cache trusts its MAC) */
	r->ndups = (uint32_t)desc[R_NDUPS];
	r->nd = (uint32_t)desc[R_ND];
	r->pb = (unsigned)desc[R_PB];
	r->ob = (unsigned)desc[R_OB];
	r->lb = (unsigned)desc[R_LB];
	r->ub = (unsigned)desc[R_UB];
	set_width(r);
	/* The locations first (they need no set), the set last: on failure nothing is taken. */
	bool ok = true;
	if (r->pm >= npacks) /* some number the width allows is outside the pack table: ask each */
		for (uint32_t i = 0; ok && i < r->nd; i++) {
			rix_loc l;
			loc_get(r, i, &l);
			ok = l.pack < npacks;
		}
	for (uint32_t d = 0; ok && d < r->ndups; d++)
		ok = r->dups[d].rank < r->nd && r->dups[d].loc.pack < npacks && (d == 0 || r->dups[d - 1].rank <= r->dups[d].rank);
	rc = ok ? rix__idset_import(&r->ids, desc + R_SET, sec[0], size[0])
		: rix_error_set(RIX_ECORRUPT, "master image: a ranked table's locations are not well formed");
	if (rc != 0) {
		rix_free(r); /* the sections stay the caller's */
		return rc;
	}
	*out = r;
	return 0;
}
