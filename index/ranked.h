/*
 * index/ranked.h — the ranked table: a read-only map from blob ID to location keyed by the IDs'
 * own bits, in about 42 bytes an entry (the chaining table it replaced in the master index took
 * 51): the master index's table of merged entries, one a blob type.
 *
 * The distinct IDs are a rix_idset (29.4-29.9 bytes an ID: rix/idset.h); each ID's location is
 * packed in the bytes after its tail in the set (the set's extra bytes), each field as wide as
 * the table's largest value of it needs (pack number, offset, length, uncompressed length: 93
 * bits, 12 bytes, for 10M blobs in 1.25M packs of 16 MiB) instead of 16 bytes. An ID's rank in
 * the set (its position in ascending order) finds both. An ID with more than one location (the same blob in two packs) keeps its first
 * in place order (pack number, then offset: the pack loaded first, as packs are numbered in the
 * order they are loaded) in the array and the others in a side array sorted by rank. When the build is given the pack
 * table (a pack is named twice: an interrupted prune's state), locations that repeat another of
 * the same ID (the same place of the same pack) are dropped, as restic's index merge drops them;
 * otherwise every location is kept.
 *
 *   the set's tails, each with its location (rank r's at r * stride)
 *   +---------------+-------+---------------+-------+--
 *   | tail 0        | loc 0 | tail 1        | loc 1 | ...      (loc: pack|off|len|ulen)
 *   +---------------+-------+---------------+-------+--
 *   dups: (rank, rix_loc) sorted by rank, for the second and later locations of an ID
 *
 * In front of the set, a filter of one byte an ID (RIX__RANKED_FILTER_K bits of one word an ID,
 * below) turns down most absent IDs with one load, before the set's directory decode.
 *
 * A known ID's lookup reads the filter's word and the set's directory line (about 0.4 bytes an
 * ID: mostly in cache), its mid bits, the line of its tail and location (two lines half the
 * time: a 40-byte record at a multiple of 8 straddles a line), then the caller reads the pack
 * ID. Keeping the
 * location apart from the tail, in an array of its own, read one line more (bench/RESULTS.md:
 * Limit/Lines). Crafted IDs: see idset.c (a lookup is at worst a binary search; the answers
 * stay exact).
 *
 * Thread-safety: a built table is immutable; any number of threads may look it up at once.
 */
#ifndef RIX_RANKED_H
#define RIX_RANKED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "index_internal.h"
#include "idset_cmp.h"
#include "master_index_internal.h"

struct rix__ranked;

/*
 * The filter in front of the set: a register-blocked Bloom filter of 8 bits an ID (one byte an
 * entry), RIX__RANKED_FILTER_K bits of one 64-bit word for each ID: the word by the ID's first
 * 4 bytes (its place among the IDs: the build, walking them in order, sets the words in order,
 * where words chosen at random kept every line fill buffer waiting on a read-modify-write of a
 * line of the filter), the bits in it by bytes 16-17 (SHA-256 bits apart from the set's, which
 * are the ID's first ones: a random absent ID meets a word as full as any). An absent ID passes
 * it about one time in 30 (bench/RESULTS.md): the rest are answered by one load of a word of an
 * array of nd bytes (mostly in cache), without the set's directory decode and run scan, which
 * cost an absent ID three times the instructions of the chaining table this table replaced. A
 * present ID always passes: the answers stay the set's, exact. IDs crafted to crowd one word
 * (whose every bit then passes) only bring their lookups back to the set's cost.
 *
 * An ID's bits are one of RIX__RANKED_PATTERNS masks of RIX__RANKED_FILTER_K distinct bits
 * (rix__ranked_patterns, made once from a fixed sequence), picked by 12 of its bits: one load of
 * a table of 32 KiB where the four bits shifted into place took 19 instructions without BMI2,
 * and a single lookup is bound by what it holds in the core's window, instructions and
 * registers written (its word's index likewise: a 32-bit product, which any register can hold,
 * not a 128-bit one, which takes two fixed ones). Absent IDs pass as often as with four bits
 * picked at random (test_ranked; a word's 8 IDs share an absent ID's mask 8 times in 4096).
 *
 * Here rather than in ranked.c, with the table's first members (struct rix__ranked_head), so
 * that every lookup of one ID tests it in line (rix__ranked_find below): an absent ID it turns
 * down costs the caller no call (the master index's single lookup: 121 -> 92 instructions,
 * then 57 with the masks and its read section as a leaf, bench/RESULTS.md).
 */

/* The first members of struct rix__ranked (ranked.c asserts that they stay first). */
struct rix__ranked_head {
	uint64_t *filter; /* nw words, each distinct ID's bits in one */
	uint32_t nd;      /* distinct IDs */
	uint32_t nw;      /* rix__ranked_filter_words(nd), kept: two instructions fewer a lookup */
};

/* Bits an ID, and the masks they are picked from; changing either, the masks' sequence, the
 * words or rix__ranked_filter_word: bump RIX__RANKED_SCHEME. */
#define RIX__RANKED_FILTER_K 4
#define RIX__RANKED_PATTERNS 4096
extern uint64_t rix__ranked_patterns[RIX__RANKED_PATTERNS];

static inline size_t rix__ranked_filter_words(size_t nd)
{
	return nd / 8 + 1;
}

/* The filter's word of id, of nw (< 2^32): ascending with the ID (its first 4 bytes, big-endian). */
static inline size_t rix__ranked_filter_word(const uint8_t *id, size_t nw)
{
	return (size_t)(((uint64_t)load32_be(id) * nw) >> 32);
}

/* id's RIX__RANKED_FILTER_K bits (by its bytes 16-17), its word's index in *word. */
static inline uint64_t rix__ranked_filter_mask(const uint8_t *id, size_t nw, size_t *word)
{
	*word = rix__ranked_filter_word(id, nw);
	return rix__ranked_patterns[load64_le(id + 16) & (RIX__RANKED_PATTERNS - 1)];
}

/* Whether id may be in r (every ID of r is; most absent ones are not). r may be NULL (no). */
static inline bool rix__ranked_maybe(const struct rix__ranked *r, const rix_id *id)
{
	const struct rix__ranked_head *h = (const struct rix__ranked_head *)(const void *)r;
	if (h == NULL)
		return false;
	size_t w;
	const uint64_t m = rix__ranked_filter_mask(id->b, h->nw, &w);
	return (h->filter[w] & m) == m;
}

struct rix__ecollect; /* entry_collect.h */

/*
 * Builds the ranked table of the entries collected in c (loc.pack: global pack numbers), taking
 * c over in every case (its parts are sorted in place, then given back one at a time as their
 * entries land in the table: the build holds about the collection's 43 bytes an entry, never a
 * copy beside them). packs (may be NULL: keep every location) names each pack number's pack:
 * given, a location that repeats one of its ID's (same place, pack numbers equal or naming one
 * pack) is dropped. workers: threads for the sort and the pass (0: one a CPU).
 * *out NULL on failure. @return 0, RIX_ENOMEM, RIX_ELIMIT (more than RIX_IDSET_MAX_IDS IDs).
 */
int rix__ranked_build_collected(struct rix__ranked **out, struct rix__ecollect *c, const rix_id *packs,
				unsigned workers);

void rix__ranked_free(struct rix__ranked *r);

/*
 * A new table of old's and top's entries (either may be NULL) and those collected in add (may be
 * NULL; taken over in every case, as by the build). With own_old, old and top are freed as soon
 * as their entries are collected (before the build: the peak is the collection's, not the
 * collection's and theirs), and on every failure; without, they are left as they are. *out NULL
 * when there are none at all. @return 0, RIX_ENOMEM, RIX_ELIMIT.
 */
int rix__ranked_merge_owned(struct rix__ranked **out, struct rix__ranked *old, struct rix__ranked *top, bool own_old,
			    struct rix__ecollect *add, const rix_id *packs, unsigned workers);

/* Entries held (distinct IDs plus second locations), distinct IDs, bytes held (0 for NULL). */
uint32_t rix__ranked_count(const struct rix__ranked *r);
uint32_t rix__ranked_distinct(const struct rix__ranked *r);
size_t rix__ranked_memory(const struct rix__ranked *r);
/* Bits of one packed location (tests, benchmarks). */
unsigned rix__ranked_loc_bits(const struct rix__ranked *r);
/* Runs r's lookups with the instance a level names (rix__idset_use_level's, for r's set and its
 * fused lookup alike; tests). @return 0, or -1 if this processor lacks it. */
int rix__ranked_use_level(struct rix__ranked *r, int level);

/* Whether id is in r by the set alone, the filter not tested (r not NULL): exact for any ID. */
bool rix__ranked_find_passed(const struct rix__ranked *r, const rix_id *id, rix_loc *loc);

/* Whether id is in the table; *loc = one of its locations when it is. r may be NULL. The filter
 * in line, the set's lookup called only for an ID that passes it. */
static inline bool rix__ranked_find(const struct rix__ranked *r, const rix_id *id, rix_loc *loc)
{
	return rix__ranked_maybe(r, id) && rix__ranked_find_passed(r, id, loc);
}

/*
 * Batched rix__ranked_find: found[i], locs[i] for ids[i], i < n (locs[i] untouched when not
 * found), the loads of many keys issued before they are used. Rounds of 256 keys; a round
 * after one that found nearly all its keys skips the filter (ranked.c: skip_next), the answers
 * the same. @return the number found.
 */
size_t rix__ranked_find_many(const struct rix__ranked *r, const rix_id *ids, size_t n, rix_loc *locs, bool *found);

/* Whether the calling thread's next round of rix__ranked_find_many in r skips the filter
 * (its own rounds ask it, and tests). */
bool rix__ranked_skips_filter(const struct rix__ranked *r);

/*
 * The locations of id from its skip-th on (its first is the one rix__ranked_find gives), up to
 * cap of them into out. @return how many it has in all (may exceed skip + cap).
 */
size_t rix__ranked_find_all(const struct rix__ranked *r, const rix_id *id, size_t skip, rix_loc *out, size_t cap);

/*
 * Adds the table's entries (every location, second ones too) to *count, their lengths to
 * *stored and their plaintext sizes (rix_blob_plain_size) to *plain. r may be NULL.
 */
void rix__ranked_totals(const struct rix__ranked *r, uint64_t *count, uint64_t *stored, uint64_t *plain);

/*
 * Calls fn for every entry in ascending ID order (an ID's locations one after another, its
 * array location first). @return 0, or fn's first nonzero value (it stops there).
 */
typedef int (*rix__ranked_fn)(void *payload, const rix_id *id, const rix_loc *loc);
int rix__ranked_foreach(const struct rix__ranked *r, rix__ranked_fn fn, void *payload);

/*
 * The same walk in rounds: fn gets the next RIX__RANKED_ROUND entries (fewer at the end), ids[i]
 * at locs[i], so that a caller may request what it will read of each round's entries before
 * reading the first. @return 0, or fn's first nonzero value (it stops there).
 */
#define RIX__RANKED_ROUND 64
typedef int (*rix__ranked_round_fn)(void *payload, const rix_id *ids, const rix_loc *locs, size_t n);
int rix__ranked_foreach_round(const struct rix__ranked *r, rix__ranked_round_fn fn, void *payload);

/*
 * The table as an image (the master index's cache): RIX__RANKED_DESC_WORDS words of shape and
 * RIX__RANKED_SECTIONS arrays (the set's block with the locations, the second locations, the
 * filter), borrowed from the table; a size may be 0 (its pointer then NULL).
 */
/* What an image of the table was made with beyond its descriptor's words: the filter's bits
 * (RIX__RANKED_FILTER_K, the masks and the word and mask functions above) and the locations'
 * packing. Changing either means a new number, so that images made before are refused, not
 * misread. */
#define RIX__RANKED_SCHEME 4u /* 2: the filter's word by the ID's first bytes; 3: locations beside the tails;
			       * 4: the filter's bits from rix__ranked_patterns, its word by 4 bytes */
#define RIX__RANKED_DESC_WORDS (6 + RIX__IDSET_DESC_WORDS)
#define RIX__RANKED_SECTIONS 3
void rix__ranked_export(const struct rix__ranked *r, uint64_t desc[RIX__RANKED_DESC_WORDS],
			const void *sec[RIX__RANKED_SECTIONS], size_t size[RIX__RANKED_SECTIONS]);

/* The sizes of the sections an image of desc has. @return 0, RIX_ECORRUPT (sizes out of range). */
int rix__ranked_section_sizes(const uint64_t desc[RIX__RANKED_DESC_WORDS], size_t size[RIX__RANKED_SECTIONS]);

/*
 * The table again from desc and its sections (rix_malloc'd arrays of the sizes above, taken over
 * when it succeeds; on failure they stay the caller's, untouched). Checks all a lookup relies on: the set's shape and directory, the widths and
 * sizes, the second locations in rank order, and every pack number below npacks (a lookup's
 * answer indexes the pack table with it). @return 0, RIX_ENOMEM, RIX_ECORRUPT.
 */
int rix__ranked_import(struct rix__ranked **out, const uint64_t desc[RIX__RANKED_DESC_WORDS],
		       void *sec[RIX__RANKED_SECTIONS], const size_t size[RIX__RANKED_SECTIONS], uint32_t npacks);

#endif
