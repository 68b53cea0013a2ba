/*
 * index/ranked.c — the ranked table (ranked.h): blob IDs in a rix_idset, each one's location
 * packed in the set's extra bytes after its tail.
 *
 * Building (rix__ranked_build_collected): the entries come collected in 256 parts of 43-byte
 * records (entry_collect.h), each part sorted in place; the field widths are known from the
 * collection, the distinct IDs (and so each part's first rank) from the sort; the filter, the
 * side array and the set's block are allocated (up to here a failure leaves nothing to undo);
 * then a pass over the parts, spread over the CPUs, writes each distinct ID's bytes 1..31 and
 * its packed location as a record of the set's build (idset_build.c's phase A, with the
 * location as the record's extra bytes), giving each part back as it is done, so that the
 * records grow as the parts shrink (about 43 bytes an entry throughout);
 * rix__idset_from_records builds the set in the records' block, each location staying beside
 * its ID's tail. The pass runs on more than one CPU for the page faults of the new arrays as
 * much as for its work: on a virtual machine whose host takes freed memory back, a huge page's
 * first touch costs about 3 s a GiB (bench/RESULTS.md), and two CPUs fault in parallel.
 *
 * A packed location: pack number, offset, length, uncompressed length, low field first, each
 * as wide as the table's largest value (0 bits for a field that is 0 everywhere), in
 * ceil(width / 8) bytes after its ID's tail (loc_bytes). As a rule (the two lengths in the 64
 * bits from the byte the length starts in; pack number and offset are in the first 64) a
 * location is read with two 8-byte loads (loc_read); otherwise, up to 120 bits, with one
 * unaligned 16-byte load (two 8-byte ones); a table whose fields need more (offsets and lengths
 * near 4 GiB in millions of packs) gets 32 bits a field, 128 a location (read with the two
 * loads as well: each pair of fields is 64 bits, byte-aligned).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "rix/alloc.h"
#include "rix/error.h"
#include "rix/idset.h"
#include "index_internal.h"
#include "entry_collect.h"
#include "ranked.h"
#include "idset_cmp.h"
#include "idset_find.h"
#include "../common/pool.h"

#define LOC_PACKED_MAX 120u /* widest packed location other than 4 fields of 32 bits */
#define BATCH 256u          /* keys a round of rix__ranked_find_many */
#define SKIP_MIN 16u        /* keys a round needs to change the batched lookup's filter hint */
#define BUILD_PARALLEL 65536u /* entries from which a build's sort and pass are spread over the CPUs */

__extension__ typedef unsigned __int128 rix__u128; /* a location's two 64-bit loads, as one */

struct rdup {
	uint32_t rank;
	rix_loc loc;
};

struct rix__ranked {
	struct rix__ranked_head h; /* first: the master index reads it in line (ranked.h) */
	rix_idset *ids;
	/* Rank 0's location in the set's block, after its tail (NULL: none), and the bytes from a
	 * rank's location to the next's: the set's, kept here (set_locs) because the lookups read
	 * them from the line of the table's fields (deriving them from the set's fields costs a
	 * known lookup 11 instructions more, 293 -> 304, gdb-stepped). */
	const uint8_t *locs;
	size_t stride;
	struct rdup *dups; /* second and later locations, by rank (an ID's in place order) */
	uint32_t ndups;
	unsigned width; /* bits a location */
	unsigned pb, ob, lb, ub;
	bool split;     /* ((pb + ob) & 7) + lb + ub <= 64: two 8-byte loads (loc_read) */
	uint32_t lob;   /* (pb + ob) >> 3: the second load's byte, the length's first */
	/* The fields' masks (pack, offset, length, uncompressed length) and, split, each field's
	 * shift in its load (the first's for pack and offset, the second's for the lengths): as 4
	 * lanes, which loc_read reads one by one and the AVX-512 instance's loc_vec
	 * (ranked_lookup.h) loads whole. */
	uint64_t lmask[4], lshift[4];
};

_Static_assert(offsetof(struct rix__ranked, h) == 0, "rix__ranked_maybe reads the head through the table's pointer");

/* Bytes ahead of the build's pass over a part whose lines it requests: the hardware's prefetcher
 * stops at each 4 KiB page of the records. */
#define RECS_AHEAD 4096

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
	r->lmask[0] = mask_of(r->pb);
	r->lmask[1] = mask_of(r->ob);
	r->lmask[2] = mask_of(r->lb);
	r->lmask[3] = mask_of(r->ub);
	const unsigned pob = r->pb + r->ob; /* where the length starts (<= 64: each field has 32 bits at most) */
	r->split = (pob & 7) + r->lb + r->ub <= 64;
	r->lob = pob >> 3;
	r->lshift[0] = 0;
	r->lshift[1] = r->pb;
	r->lshift[2] = pob & 7;
	r->lshift[3] = (pob & 7) + r->lb;
}

/* Bytes of a packed location (the set's extra bytes an ID). */
static inline unsigned loc_bytes(const struct rix__ranked *r)
{
	return (r->width + 7) / 8;
}

/* Where the table's locations are: after each tail of its set. */
static void set_locs(struct rix__ranked *r)
{
	r->locs = r->h.nd > 0 ? r->ids->tails + r->ids->tail : NULL;
	r->stride = r->h.nd > 0 ? r->ids->stride : 0;
}

/*
 * The location at p (its rank's: r->locs + rank * r->stride). Pack number and offset are in
 * the 64 bits of the first byte's load; as a rule (split) length and uncompressed length are in
 * those of a second load at the length's first byte, shifted by at most 7: a handful of shifts
 * and masks. Otherwise the location's 128 bits are read whole. Either reads 16 bytes from p at
 * most: the set's block has the directory's 64 or more after the last tail's extra bytes.
 */
static inline void loc_read(const struct rix__ranked *r, const uint8_t *p, rix_loc *loc)
{
	if (__builtin_expect(r->split, 1)) {
		uint64_t a = load64_le(p), b = load64_le(p + r->lob);
		loc->pack = (uint32_t)(a & r->lmask[0]); /* (lshift[0] is 0) */
		loc->offset = (uint32_t)((a >> r->lshift[1]) & r->lmask[1]);
		loc->length = (uint32_t)((b >> r->lshift[2]) & r->lmask[2]);
		loc->uncompressed_length = (uint32_t)((b >> r->lshift[3]) & r->lmask[3]);
		return;
	}
	rix__u128 v = ((rix__u128)load64_le(p + 8) << 64) | load64_le(p);
	loc->pack = (uint32_t)((uint64_t)v & r->lmask[0]);
	v >>= r->pb;
	loc->offset = (uint32_t)((uint64_t)v & r->lmask[1]);
	v >>= r->ob;
	loc->length = (uint32_t)((uint64_t)v & r->lmask[2]);
	v >>= r->lb;
	loc->uncompressed_length = (uint32_t)((uint64_t)v & r->lmask[3]);
}

static inline void loc_get(const struct rix__ranked *r, size_t rank, rix_loc *loc)
{
	loc_read(r, r->locs + rank * r->stride, loc);
}

/* Writes a location's loc_bytes at p: all 16 bytes of the packed value when the bytes past
 * them are free (the next record's, written after), else only its own. */
static inline void loc_put(const struct rix__ranked *r, uint8_t *p, const rix_loc *loc, bool room)
{
	rix__u128 v = (rix__u128)loc->uncompressed_length;
	v = (v << r->lb) | loc->length;
	v = (v << r->ob) | loc->offset;
	v = (v << r->pb) | loc->pack;
	if (room) {
		store64_le(p, (uint64_t)v);
		store64_le(p + 8, (uint64_t)(v >> 64));
		return;
	}
	for (unsigned i = 0; i < loc_bytes(r); i++, v >>= 8)
		p[i] = (uint8_t)v;
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
	rix_free(r->dups);
	rix_free(r->h.filter);
	rix_free(r);
}

/*
 * The pass over the parts, shared by the workers: part b's distinct IDs get ranks from at[b]
 * (records of rsz bytes from rsz at[b] in the block: the ID's bytes 1..31, its location), its
 * second locations the side array's slots from dup_at[b] (ndup[b] of them used). Parts touch
 * disjoint ranges of the block and the side array (a part's last location is written to its
 * own bytes only); filter words are shared by neighbouring parts only at the ends of a part's
 * range, which are set atomically.
 */
struct pass_job {
	struct rix__ranked *r;
	struct rix__ecollect *c;
	const rix_id *packs;
	uint8_t *block;
	size_t rsz;
	size_t at[257], dup_at[256], ndup[256];
	atomic_uint next;
};

/*
 * The filter's masks (ranked.h): each RIX__RANKED_FILTER_K distinct bits of 64, drawn from a
 * fixed sequence (splitmix64 from a fixed seed), so that every process and every image has the
 * same. Made before main, and made sure of by every build and import (once: a table made in
 * another constructor, which may run first), so that a lookup, which needs a table, reads them
 * without a check.
 */
uint64_t rix__ranked_patterns[RIX__RANKED_PATTERNS];
static pthread_once_t patterns_once = PTHREAD_ONCE_INIT;

static void patterns_make(void)
{
	uint64_t x = 0x72697866696c7472ull; /* "rixfiltr" */
	for (size_t i = 0; i < RIX__RANKED_PATTERNS; i++) {
		uint64_t m = 0;
		while (__builtin_popcountll(m) < RIX__RANKED_FILTER_K) {
			x += 0x9e3779b97f4a7c15ull;
			uint64_t z = x;
			z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
			z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
			m |= 1ull << ((z ^ (z >> 31)) >> 58);
		}
		rix__ranked_patterns[i] = m;
	}
}

__attribute__((constructor)) static void patterns_ready(void)
{
	(void)pthread_once(&patterns_once, patterns_make);
}

static void *pass_worker(void *arg)
{
	struct pass_job *jb = arg;
	struct rix__ranked *r = jb->r;
	const size_t nw = r->h.nw, rsz = jb->rsz;
	for (;;) {
		unsigned b = atomic_fetch_add(&jb->next, 1);
		if (b >= 256)
			return NULL;
		struct rix__part *pt = &jb->c->part[b];
		const size_t lo = jb->at[b], hi = jb->at[b + 1];
		struct rdup *dups = r->dups != NULL ? r->dups + jb->dup_at[b] : NULL;
		size_t nd = 0, j = lo;
		const uint8_t *prev = NULL;
		rix_loc main = { 0 };
		rix_id id;
		id.b[0] = (uint8_t)b;
		size_t w_lo = rix__ranked_filter_word((const uint8_t[8]){ (uint8_t)b }, nw);
		size_t w_hi = rix__ranked_filter_word((const uint8_t[8]){ (uint8_t)b, 255, 255, 255, 255, 255, 255, 255 }, nw);
		size_t first_dup = 0;
		for (size_t i = 0; i < pt->n; i++) {
			const uint8_t *rec = pt->p + i * RIX__EREC;
			if ((i + 1) * RIX__EREC + RECS_AHEAD < pt->n * RIX__EREC) /* (never past the part) */
				RIX_PREFETCH(rec + RECS_AHEAD);
			rix_loc loc;
			rix__ecollect_loc(jb->c, rec, &loc);
			if (prev != NULL && memcmp(prev, rec + RIX__EREC_LOC, RIX_ID_SIZE - 1) == 0) {
				bool repeat = false;
				if (jb->packs != NULL) { /* asked to drop repeats (compared with each of the ID's) */
					repeat = same_place(&main, &loc, jb->packs);
					for (size_t d = first_dup; d < nd && !repeat; d++)
						repeat = same_place(&dups[d].loc, &loc, jb->packs);
				}
				if (!repeat)
					dups[nd++] = (struct rdup){ .rank = (uint32_t)(j - 1), .loc = loc };
				continue;
			}
			prev = rec + RIX__EREC_LOC;
			main = loc;
			first_dup = nd;
			memcpy(id.b + 1, prev, RIX_ID_SIZE - 1);
			size_t w;
			uint64_t m = rix__ranked_filter_mask(id.b, nw, &w);
			if (w == w_lo || w == w_hi)
				__atomic_fetch_or(&r->h.filter[w], m, __ATOMIC_RELAXED);
			else
				r->h.filter[w] |= m;
			uint8_t *out = jb->block + j * rsz;
			memcpy(out, prev, RIX_ID_SIZE - 1);
			loc_put(r, out + RIX_ID_SIZE - 1, &loc, j + 1 < hi);
			j++;
		}
		jb->ndup[b] = nd;
		rix__part_release(pt);
	}
}

int rix__ranked_build_collected(struct rix__ranked **out, struct rix__ecollect *c, const rix_id *packs,
				unsigned workers)
{
	*out = NULL;
	patterns_ready();
	size_t count = c->n;
	struct rix__ranked *r = count <= 0xFFFFFFFEu ? rix_calloc(1, sizeof(*r)) : NULL;
	struct pass_job *jb = r != NULL ? rix_calloc(1, sizeof(*jb)) : NULL;
	if (jb == NULL) {
		rix_free(r);
		rix__ecollect_free(c);
		if (count > 0xFFFFFFFEu)
			return rix_error_set(RIX_ELIMIT, "master index: %zu entries of one type is over the limit", count);
		return rix_error_set(RIX_ENOMEM, "master index: out of memory");
	}
	/* Each part in ID order, an ID's records in place order (pack number, offset), so that its
	 * first location is the same whatever order they came in (the oldest pack's, as packs are
	 * numbered in the order they are loaded). */
	size_t distinct[256], nd = 0, ndup_max = 0;
	rix__ecollect_sort(c, count < BUILD_PARALLEL ? 1 : workers, distinct);
	for (unsigned b = 0; b < 256; b++) {
		jb->at[b] = nd;
		jb->dup_at[b] = ndup_max;
		nd += distinct[b];
		ndup_max += c->part[b].n - distinct[b];
	}
	jb->at[256] = nd;
	r->pb = bits_of(c->orp);
	r->ob = bits_of(c->oro);
	r->lb = bits_of(c->orl);
	r->ub = bits_of(c->oru);
	if (r->pb + r->ob + r->lb + r->ub > LOC_PACKED_MAX)
		r->pb = r->ob = r->lb = r->ub = 32;
	set_width(r);
	r->h.nd = (uint32_t)nd;
	r->h.nw = (uint32_t)rix__ranked_filter_words(nd);
	r->h.filter = rix_calloc(r->h.nw, sizeof(uint64_t));
	if (ndup_max > 0)
		r->dups = rix_malloc(ndup_max * sizeof(*r->dups));
	/* The set's block: room for the records (31 bytes an ID and its location) and what its
	 * build adds behind them (the mid bits, the directory: under 4 bytes an ID with 8 mid
	 * bits), so that it never grows (a move would split its huge pages); only what is written
	 * costs memory. */
	jb->rsz = RIX_ID_SIZE - 1 + loc_bytes(r);
	size_t room = nd * (jb->rsz + 4) + 4096;
	jb->block = nd > 0 ? rix_malloc(room) : NULL;
	if (r->h.filter == NULL || (ndup_max > 0 && r->dups == NULL) || (nd > 0 && jb->block == NULL)) {
		rix_free(jb->block);
		rix_free(jb);
		rix__ecollect_free(c);
		rix__ranked_free(r);
		return rix_error_set(RIX_ENOMEM, "master index: out of memory for %zu locations", count);
	}
	/* Read at random by the lookups: huge pages (advised before they are touched). */
	rix__advise_huge(r->h.filter, r->h.nw * sizeof(uint64_t));
	rix__advise_huge(jb->block, room);
	/* The parts, on the workers: distinct IDs to the block as records, locations packed,
	 * second locations aside unless they repeat; each part given back when done. */
	jb->r = r;
	jb->c = c;
	jb->packs = packs;
	atomic_init(&jb->next, 0);
	rix__pool_run(count < BUILD_PARALLEL ? 1 : rix__pool_size(workers, 64), pass_worker, jb);
	/* The parts' second locations together (in rank order, as the parts). */
	size_t cnt0[256];
	for (unsigned b = 0; b < 256; b++) {
		if (jb->ndup[b] > 0 && jb->dup_at[b] != r->ndups)
			memmove(r->dups + r->ndups, r->dups + jb->dup_at[b], jb->ndup[b] * sizeof(*r->dups));
		r->ndups += (uint32_t)jb->ndup[b];
		cnt0[b] = distinct[b];
	}
	uint8_t *block = jb->block;
	rix_free(jb);
	rix__ecollect_free(c);
	if (r->ndups == 0) {
		rix_free(r->dups);
		r->dups = NULL;
	} else if (r->ndups < ndup_max) {
		struct rdup *d = rix_realloc(r->dups, (size_t)r->ndups * sizeof(*r->dups));
		if (d != NULL)
			r->dups = d;
	}
	/* The set is built with 8 or more mid bits (a lookup of an absent ID reads the mid array,
	 * not the tails). */
	int rc = rix__idset_from_records(&r->ids, block, room, cnt0, nd, true, loc_bytes(r));
	if (rc != 0) {
		rix__ranked_free(r);
		return rc;
	}
	set_locs(r);
	*out = r;
	return 0;
}

/* A table's entries added to a collection a round at a time. */
struct gather {
	struct rix__ecollect *c;
	struct fentry e[RIX__RANKED_ROUND];
};

static int gather_round(void *payload, const rix_id *ids, const rix_loc *locs, size_t n)
{
	struct gather *g = payload;
	for (size_t i = 0; i < n; i++)
		g->e[i] = (struct fentry){ .id = ids[i], .loc = locs[i] };
	return rix__ecollect_add(g->c, g->e, n, 0);
}

int rix__ranked_merge_owned(struct rix__ranked **out, struct rix__ranked *old, struct rix__ranked *top, bool own_old,
			    struct rix__ecollect *add, const rix_id *packs, unsigned workers)
{
	*out = NULL;
	size_t n0 = (size_t)rix__ranked_count(old) + rix__ranked_count(top), total = n0 + rix__ecollect_count(add);
	int rc = 0;
	if (total > 0xFFFFFFFEu)
		rc = rix_error_set(RIX_ELIMIT, "master index: %zu entries of one type is over the limit", total);
	struct gather *g = rc == 0 && total > 0 && n0 > 0 ? rix_malloc(sizeof(*g)) : NULL;
	if (rc == 0 && total > 0 && n0 > 0 && g == NULL)
		rc = rix_error_set(RIX_ENOMEM, "master index: out of memory");
	if (rc == 0 && total > 0 && add == NULL)
		rc = rix__ecollect_new(&add);
	/* The old entries with the added ones (their room first, so that they do not move). */
	if (rc == 0 && g != NULL) {
		g->c = add;
		if (n0 >= BUILD_PARALLEL) /* (a few: each part's first mapping holds them) */
			rc = rix__ecollect_reserve(add, n0);
		if (rc == 0)
			rc = rix__ranked_foreach_round(old, gather_round, g);
		if (rc == 0)
			rc = rix__ranked_foreach_round(top, gather_round, g);
	}
	rix_free(g);
	if (own_old) { /* their entries are collected: not held beside them while it is built */
		rix__ranked_free(old);
		rix__ranked_free(top);
	}
	if (rc != 0 || total == 0) {
		rix__ecollect_free(add);
		return rc;
	}
	return rix__ranked_build_collected(out, add, packs, workers);
}

uint32_t rix__ranked_count(const struct rix__ranked *r)
{
	return r ? r->h.nd + r->ndups : 0;
}

uint32_t rix__ranked_distinct(const struct rix__ranked *r)
{
	return r ? r->h.nd : 0;
}

size_t rix__ranked_memory(const struct rix__ranked *r)
{
	if (r == NULL)
		return 0;
	return sizeof(*r) + rix_idset_memory(r->ids) + (size_t)r->ndups * sizeof(*r->dups) +
	       r->h.nw * sizeof(uint64_t);
}

unsigned rix__ranked_loc_bits(const struct rix__ranked *r)
{
	return r ? r->width : 0;
}

int rix__ranked_use_level(struct rix__ranked *r, int level)
{
	return r != NULL && r->h.nd > 0 ? rix__idset_use_level(r->ids, level) : -1;
}

#define IDSET_TEMPLATE "ranked_lookup.h"
#include "idset_instances.h"
#undef IDSET_TEMPLATE

bool rix__ranked_find_passed(const struct rix__ranked *r, const rix_id *id, rix_loc *loc)
{
	return r->h.nd > 0 && DISPATCH(r->ids, ranked_find_passed, r, id, loc);
}

/*
 * The batched lookup skips the filter while the keys asked are present. The filter passes
 * every present ID, so for them it is only one line more to wait for (a word of an array of
 * nd bytes, which the records and the pack table push out of the last-level cache) and about
 * 30 instructions. Skipped, every key goes to the set, whose answer is exact for any ID: an
 * absent one then costs its directory line and mid bits instead of a filter word. The hint
 * turns on after a round of SKIP_MIN keys or more that found at least 31 in 32, off after one
 * that found fewer than 15 in 16: a restore's or a check's lookups skip the filter, a first
 * backup's keep it (bench/RESULTS.md).
 */
static bool skip_next(bool skipped, size_t hits, size_t m)
{
	if (m < SKIP_MIN)
		return skipped;
	return skipped ? hits * 16 >= m * 15 : hits * 32 >= m * 31;
}

/* The hint, the calling thread's (so that threads whose keys differ do not set it for each
 * other, nor write a line they share), for the one table it last looked up in batches: a
 * thread that asks another table starts that one with the filter. A table freed and another
 * built at its address may inherit it: only the cost of a round changes, never an answer. */
static _Thread_local struct {
	const struct rix__ranked *table;
	bool skip;
} skip_hint __attribute__((tls_model("initial-exec")));

/* (never for a table without IDs: another table's hint, left at the same address) */
bool rix__ranked_skips_filter(const struct rix__ranked *r)
{
	return skip_hint.table == r && skip_hint.skip && r->h.nd > 0;
}

size_t rix__ranked_find_many(const struct rix__ranked *r, const rix_id *ids, size_t n, rix_loc *locs, bool *found)
{
	memset(found, 0, n * sizeof(*found));
	if (r == NULL)
		return 0;
	size_t hits = 0, nw = r->h.nw;
	size_t rank[BATCH], word[BATCH];
	uint64_t mask[BATCH];
	uint16_t which[BATCH];
	rix_id maybe[BATCH];
	bool skip = rix__ranked_skips_filter(r);
	for (size_t g = 0; g < n; g += BATCH) {
		size_t m = n - g < BATCH ? n - g : BATCH, k = 0, round_hits = 0;
		if (skip) {
			k = m; /* every key passes, in place (which[] unused) */
		} else {
			/* The filter: every key's word on its way, then the keys that pass, gathered. */
			for (size_t i = 0; i < m; i++) {
				mask[i] = rix__ranked_filter_mask(ids[g + i].b, nw, &word[i]);
				RIX_PREFETCH(&r->h.filter[word[i]]);
			}
			for (size_t i = 0; i < m; i++) {
				which[k] = (uint16_t)i;
				k += (r->h.filter[word[i]] & mask[i]) == mask[i];
			}
		}
		/* The keys that passed, copied together unless all did (present IDs, as a rule). */
		const rix_id *pass = ids + g;
		if (k < m) {
			for (size_t j = 0; j < k; j++)
				maybe[j] = ids[g + which[j]];
			pass = maybe;
		}
		/* The locations' lines are fetched with the IDs' tails, beside which they are, so that
		 * decoding them below rarely waits. */
		if (k > 0 && rix_idset_rank_many(rank, r->ids, pass, k) > 0)
			round_hits = DISPATCH(r->ids, ranked_decode, r, rank, k, k < m ? which : NULL, g, locs, found);
		hits += round_hits;
		skip = skip_next(skip, round_hits, m);
	}
	skip_hint.table = r;
	skip_hint.skip = skip;
	return hits;
}

void rix__ranked_totals(const struct rix__ranked *r, uint64_t *count, uint64_t *stored, uint64_t *plain)
{
	if (r == NULL)
		return;
	uint64_t len = 0, pl = 0;
	/* The locations in order, beside the tails (no ID, no pack ID). */
	for (uint32_t i = 0; i < r->h.nd; i++) {
		rix_loc l;
		if (i + 16 < r->h.nd) /* (the hardware's prefetcher stops at each 4 KiB page) */
			RIX_PREFETCH(r->locs + (size_t)(i + 16) * r->stride);
		loc_get(r, i, &l);
		len += l.length;
		pl += rix_blob_plain_size(l.length, l.uncompressed_length);
	}
	for (uint32_t d = 0; d < r->ndups; d++) {
		len += r->dups[d].loc.length;
		pl += rix_blob_plain_size(r->dups[d].loc.length, r->dups[d].loc.uncompressed_length);
	}
	*count += (uint64_t)r->h.nd + r->ndups;
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
	if (!rix__ranked_maybe(r, id) || !rix_idset_rank(r->ids, id, &rank))
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

enum { R_ND, R_NDUPS, R_PB, R_OB, R_LB, R_UB, R_SET };
enum { S_N = R_SET + RIX__IDSET_D_N, S_SIZE = R_SET + RIX__IDSET_D_SIZE, S_EXTRA = R_SET + RIX__IDSET_D_EXTRA };
_Static_assert(R_SET + RIX__IDSET_DESC_WORDS == RIX__RANKED_DESC_WORDS, "the descriptor's words");

void rix__ranked_export(const struct rix__ranked *r, uint64_t desc[RIX__RANKED_DESC_WORDS],
			const void *sec[RIX__RANKED_SECTIONS], size_t size[RIX__RANKED_SECTIONS])
{
	memset(desc, 0, RIX__RANKED_DESC_WORDS * sizeof(desc[0]));
	desc[R_ND] = r->h.nd;
	desc[R_NDUPS] = r->ndups;
	desc[R_PB] = r->pb;
	desc[R_OB] = r->ob;
	desc[R_LB] = r->lb;
	desc[R_UB] = r->ub;
	rix__idset_export(r->ids, desc + R_SET, &sec[0], &size[0]);
	sec[1] = r->ndups ? r->dups : NULL;
	size[1] = (size_t)r->ndups * sizeof(*r->dups);
	sec[2] = r->h.filter;
	size[2] = r->h.nw * sizeof(uint64_t);
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
	if (nd > RIX_IDSET_MAX_IDS || desc[R_NDUPS] > 0xFFFFFFFFu - nd || !widths_valid(desc) || desc[S_N] != nd ||
	    desc[S_EXTRA] != (nd > 0 ? (w + 7) / 8 : 0) || desc[S_SIZE] > SIZE_MAX / 2 ||
	    (nd == 0 && (desc[S_SIZE] != 0 || desc[R_NDUPS] != 0)))
		return rix_error_set(RIX_ECORRUPT, "master image: a ranked table's sizes do not agree");
	size[0] = (size_t)desc[S_SIZE];
	size[1] = (size_t)desc[R_NDUPS] * sizeof(struct rdup);
	size[2] = rix__ranked_filter_words((size_t)nd) * sizeof(uint64_t);
	return 0;
}

int rix__ranked_import(struct rix__ranked **out, const uint64_t desc[RIX__RANKED_DESC_WORDS],
		       void *sec[RIX__RANKED_SECTIONS], const size_t size[RIX__RANKED_SECTIONS], uint32_t npacks)
{
	*out = NULL;
	patterns_ready();
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
	r->dups = sec[1];
	r->h.filter = sec[2]; /* any bits: a filter that turns down a present ID answers wrongly, never
			     * outside the table (the image is sealed; the cache trusts its MAC) */
	r->ndups = (uint32_t)desc[R_NDUPS];
	r->h.nd = (uint32_t)desc[R_ND];
	r->h.nw = (uint32_t)rix__ranked_filter_words(r->h.nd);
	r->pb = (unsigned)desc[R_PB];
	r->ob = (unsigned)desc[R_OB];
	r->lb = (unsigned)desc[R_LB];
	r->ub = (unsigned)desc[R_UB];
	set_width(r);
	/* The set (its shape and bounds checked: the locations are in its block), then the
	 * locations; on failure nothing is taken (the set's block given back, not freed). An
	 * empty set's import frees its block (none: section_sizes wants 0 bytes and no second
	 * locations when nd is 0, so nothing below can fail then). */
	rc = rix__idset_import(&r->ids, desc + R_SET, sec[0], size[0]);
	if (rc != 0) {
		rix_free(r); /* the sections stay the caller's */
		return rc;
	}
	set_locs(r);
	bool ok = true;
	if (r->lmask[0] >= npacks) /* some number the width allows is outside the pack table: ask each */
		for (uint32_t i = 0; ok && i < r->h.nd; i++) {
			rix_loc l;
			loc_get(r, i, &l);
			ok = l.pack < npacks;
		}
	for (uint32_t d = 0; ok && d < r->ndups; d++)
		ok = r->dups[d].rank < r->h.nd && r->dups[d].loc.pack < npacks && (d == 0 || r->dups[d - 1].rank <= r->dups[d].rank);
	if (!ok) {
		r->ids->tails = NULL; /* the block stays the caller's (an import always gives a set) */
		rix_idset_free(r->ids);
		rix_free(r);
		return rix_error_set(RIX_ECORRUPT, "master image: a ranked table's locations are not well formed");
	}
	*out = r;
	return 0;
}
