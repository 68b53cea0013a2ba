/*
 * index/indexmap.c — the mutable hash table: blob ID -> rix_loc.
 *
 * Layout
 * ------
 *   lines[nlines]: 64-byte buckets, line-aligned           blocks: the entries, insertion order
 *   +-----------------------------------------------+
 *   | tag[12] | over:32 | slot[12]: entry numbers   | --> blocks[e >> shift][e & mask]
 *   +-----------------------------------------------+     entry (48 bytes): id[32] | loc
 *     a full line overflows into the next one                   (block 0 starts at 16 entries and
 *                                                               doubles up to the batch; every later
 *   older: newer entry -> older entry, the copies of one ID      block is `batch` entries: allocated
 *                                                               alone, or past CARVE_FROM (batches
 *                                                               to 2^17) carved from chunks of at
 *                                                               most 12 MiB advised for huge pages)
 *   shadow: a bit an entry, set for an older copy
 *   (both allocated when the first duplicate ID is added)
 *
 * A line is a bucket of 12 slots: the entry number of each ID stored there and a one-byte tag
 * of its hash (1..255; 0 marks a free slot, and lines fill from slot 0). A lookup hashes the ID
 * to its home line, compares the 12 tags with its own at once (tagmatch.h) and reads only the
 * entries whose tag matches: a present ID costs the line and its entry (two dependent loads,
 * 2-3 cache lines: a 48-byte entry crosses a line half the time) where the chain of the table
 * this replaced walked 1 + load/2 entries, each a dependent miss
 * (bench/RESULTS.md); an absent ID costs the line alone, unless its tag matches one of the
 * line's (~4%).
 *
 * A full line's new IDs go to the next line that has room (linear probing, line by line), and
 * each ID so placed sets its two bits of a 32-bit filter (`over`) in every line it passed. A
 * lookup goes on to the next line only when its bits are set there, so absent IDs stop at their
 * home line unless it overflowed with IDs whose bits cover theirs; only full lines have `over`
 * bits, and some line always has room, so every probe ends.
 *
 * Duplicates: each distinct ID holds one slot, its newest entry. Adding an ID that is there
 * (its tag matches and the entry's ID is equal) puts the new entry in that slot and records the
 * displaced one in `older` (so lookup_all lists every copy, newest first) and in `shadow` (so a
 * rehash, which walks the entries in order, leaves older copies out). Copies do not lengthen
 * the probe runs, and adding the k-th copy of an ID costs what adding any ID costs.
 *
 * Sizing
 * ------
 * The line count is any number (fastrange maps the hash to it). The lines grow by half when
 * their IDs would pass MAX_FILL (80%) of the slots, so fill stays in (53%, 80%] in large tables
 * (small ones round up, and a reserve may leave it lower); reserve(n)
 * sizes them for n IDs at 80%. Lines cost 64 / 12 / fill bytes an ID: 6.7-10, so with the
 * 48-byte entries an ID costs 54.7-58 bytes (the 10M benchmark table sits at 79.5%: 54.7).
 * At 80%, 5% of IDs are stored past their home line, a third of the lines are full and a
 * quarter carry filter bits (an absent ID goes on when both its bits are set in its home line:
 * one in a hundred at 79% fill; 3.7% match a tag there).
 * Copies cost 16-32 bytes of `older` each and a bit of `shadow` an entry. A table grown past
 * CARVE_FROM without a reserve also holds the newest chunk's uncarved part (new_block, in
 * indexmap_blocks.c, which keeps the entries).
 * (Growing by half rather than doubling places each entry three times over the table's growth
 * instead of twice, for a fill that never falls to 40%.)
 *
 * Growth allocates the new lines first and fails with RIX_ENOMEM leaving the table as it was.
 * The rehash walks entries in order and prefetches each one's home line a few entries ahead,
 * so its cache misses overlap; add_many does the same for a caller's batch of adds. An add
 * branches on its home line (full, or a tag matched: 7.6% of the 1M build's adds mispredict),
 * and alone waits for the line's miss each time it does; with the line requested ahead, it
 * waits less or not at all (bench/RESULTS.md: InsertBatch).
 *
 * Limits: at most 2^32 - 2 entries (entry numbers are 32-bit), of which at most 2^30 older
 * copies (`older` holds 2^31 words; add returns RIX_ELIMIT past that).
 *
 * An add that fails (RIX_ENOMEM, RIX_ELIMIT) changes no answer; it may leave its filter bits
 * in the full lines it passed, which only sends a few more absent lookups one line on.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <time.h>

#include "rix/alloc.h"
#include "rix/error.h"
#include "rix/indexmap.h"
#include "hash.h"
#include "indexmap_internal.h"
#include "tagmatch.h"

/* Growth by half keeps the directory's fill (IDs / slots) in (MAX_FILL * 2 / 3, MAX_FILL]. */
#define MAX_FILL_NUM 4u
#define MAX_FILL_DEN 5u
#define MIN_LINES 2u

/*
 * The lines of a table that has none yet (nlines 0): home_line gives line 0 for any hash, and
 * this line, all zero, holds nothing and sends no probe on, so lookups need no test for an
 * empty table. Never written: the first add replaces it.
 */
static const struct line no_lines;

/* The parts of h: home line (bits 0..31, fastrange), over-filter bits (32..41), tag (56..63). */
static inline uint32_t home_line(uint64_t h, uint32_t nlines)
{
	return rix__hash_bucket(h, nlines);
}

/* over_bits' values, one for each of its 10 bits of h, made when compiled: a load where the two
 * shifted ones took 9 instructions, 8 of them writing a register (no BMI2 in a baseline build),
 * in an absent ID's lookup of 52 (bench/RESULTS.md: what a single lookup holds in the core's
 * window is what keeps the next ones' misses from starting). */
#define OVER_1(x) ((1u << ((x) & 31)) | (1u << (((x) >> 5) & 31)))
#define OVER_4(x) OVER_1(x), OVER_1((x) + 1), OVER_1((x) + 2), OVER_1((x) + 3)
#define OVER_16(x) OVER_4(x), OVER_4((x) + 4), OVER_4((x) + 8), OVER_4((x) + 12)
#define OVER_64(x) OVER_16(x), OVER_16((x) + 16), OVER_16((x) + 32), OVER_16((x) + 48)
#define OVER_256(x) OVER_64(x), OVER_64((x) + 64), OVER_64((x) + 128), OVER_64((x) + 192)
static const uint32_t over_masks[1024] = { OVER_256(0), OVER_256(256), OVER_256(512), OVER_256(768) };
#undef OVER_256
#undef OVER_64
#undef OVER_16
#undef OVER_4
#undef OVER_1

/* Two bits of 32 (one when both numbers are equal): 1 << bits 32..36 of h, 1 << bits 37..41. */
static inline uint32_t over_bits(uint64_t h)
{
	return over_masks[(h >> 32) & 1023];
}

/* Whether line ln's filter holds both of h's bits: a probe for h goes on past ln. */
static inline int goes_on(const struct line *ln, uint64_t h)
{
	const uint32_t f = over_bits(h);
	return (ln->over & f) == f;
}

static inline uint8_t tag_of(uint64_t h)
{
	uint8_t t = (uint8_t)(h >> 56);
	return t + (t == 0);
}

static inline uint32_t next_line(uint32_t l, uint32_t nlines)
{
	return l + 1 == nlines ? 0 : l + 1;
}

/* Slots in use: lines fill from slot 0, so this is also the first free slot. */
static inline uint32_t line_used(const struct line *ln)
{
	return (uint32_t)__builtin_ctz(rix__tag_mask(ln->tag, 0) | (1u << SLOTS));
}

uint64_t rix__random_seed(void)
{
	uint64_t s;
	if (getrandom(&s, sizeof(s), GRND_NONBLOCK) == (ssize_t)sizeof(s))
		return s;
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_nsec * 0x9E3779B97F4A7C15ull ^ (uint64_t)(uintptr_t)&s;
}

void rix__advise_huge(void *p, size_t n)
{
#ifdef MADV_HUGEPAGE
	/*
	 * The whole of the pages the array touches, not only its 2 MiB-aligned middle: advising part
	 * of a mapping splits it in three, and realloc's mremap of a large block then fails on the
	 * split mapping (EFAULT), so that glibc copies the block instead of moving it (an array
	 * grown in place, as bulk loading's entries, would briefly take twice its memory). Only whole 2 MiB
	 * pages inside become huge, as before; the flag on the rest is a hint with no effect.
	 */
	const uintptr_t huge = (uintptr_t)2 << 20, page = 4096;
	if (p == NULL || n < huge)
		return;
	uintptr_t a = (uintptr_t)p & ~(page - 1);
	uintptr_t e = ((uintptr_t)p + n + page - 1) & ~(page - 1);
	(void)madvise((void *)a, e - a, MADV_HUGEPAGE);
#else
	(void)p;
	(void)n;
#endif
}

int rix_indexmap_new_seeded(rix_indexmap **out, uint32_t batch, uint64_t seed)
{
	*out = NULL;
	if (batch == 0)
		batch = RIX_INDEXMAP_DEFAULT_BATCH;
	if (batch > MAX_BATCH)
		batch = MAX_BATCH;
	uint32_t shift = 0;
	while ((1u << shift) < batch)
		shift++;
	rix_indexmap *m = rix_calloc(1, sizeof(*m));
	if (m == NULL)
		return rix_error_set(RIX_ENOMEM, "indexmap: out of memory");
	m->shift = shift;
	m->emask = (1u << shift) - 1;
	m->carved0 = UINT32_MAX;
	rix__hash_keys(m->keys, seed);
	m->lines = (struct line *)&no_lines; /* read-only storage: a stray write faults */
	*out = m;
	return 0;
}

int rix_indexmap_new_batch(rix_indexmap **out, uint32_t batch)
{
	return rix_indexmap_new_seeded(out, batch, rix__random_seed());
}

int rix_indexmap_new(rix_indexmap **out)
{
	return rix_indexmap_new_batch(out, 0);
}

void rix_indexmap_free(rix_indexmap *m)
{
	if (m == NULL)
		return;
	rix__indexmap_free_blocks(m);
	rix_free(m->lines_mem);
	rix_free(m->older);
	rix_free(m->shadow);
	rix_free(m);
}

/* Stores entry e, whose ID hashes to h and is not in the lines, in the first slot free from
 * its home line on, marking the full lines it passes with its filter bits. */
static void place(struct line *lines, uint32_t nlines, uint64_t h, uint32_t e)
{
	uint32_t l = home_line(h, nlines), f = over_bits(h);
	for (;;) {
		struct line *ln = &lines[l];
		uint32_t u = line_used(ln);
		if (u < SLOTS) {
			ln->tag[u] = tag_of(h);
			ln->slot[u] = e;
			return;
		}
		ln->over |= f;
		l = next_line(l, nlines);
	}
}

static inline int is_shadowed(const rix_indexmap *m, uint32_t e)
{
	return e / 64 < m->shadow_words && (m->shadow[e / 64] >> (e % 64) & 1);
}

/*
 * Replaces the lines with nl fresh ones and places every entry that is not an older copy, in
 * insertion order; the home line of entry i + AHEAD is prefetched while entry i is placed.
 */
static int rehash(rix_indexmap *m, uint32_t nl)
{
	enum { AHEAD = 32 }; /* 16: 3-6% slower at 1M and 10M (bench/RESULTS.md, tenth session) */
	void *mem = rix_calloc((size_t)nl + 1, sizeof(struct line));
	if (mem == NULL)
		return rix_error_set(RIX_ENOMEM, "indexmap: out of memory for %u lines", nl);
	struct line *lines = (struct line *)(((uintptr_t)mem + 63) & ~(uintptr_t)63);
	rix__advise_huge(lines, (size_t)nl * sizeof(struct line));
	uint64_t hs[AHEAD];
	uint32_t n = m->count;
	for (uint32_t i = 0; i < n && i < AHEAD; i++) {
		hs[i] = rix__hash_id_keyed(&entry_at(m, i)->id, m->keys);
		RIX_PREFETCH_W(&lines[home_line(hs[i], nl)]);
	}
	for (uint32_t i = 0; i < n; i++) {
		uint64_t h = hs[i % AHEAD];
		if (i + AHEAD < n) {
			uint64_t h2 = rix__hash_id_keyed(&entry_at(m, i + AHEAD)->id, m->keys);
			hs[i % AHEAD] = h2;
			RIX_PREFETCH_W(&lines[home_line(h2, nl)]);
		}
		if (m->shadow == NULL || !is_shadowed(m, i))
			place(lines, nl, h, i);
	}
	rix_free(m->lines_mem);
	m->lines_mem = mem;
	m->lines = lines;
	m->nlines = nl;
	m->max_used = (uint64_t)nl * SLOTS * MAX_FILL_NUM / MAX_FILL_DEN;
	return 0;
}

/* Whether two IDs are equal, in vector registers where the target has them (a lookup keeps its
 * general registers for the hash and the line). */
static inline int id_eq(const rix_id *a, const rix_id *b)
{
#ifdef __SSE2__
	__m128i x0 = _mm_loadu_si128((const __m128i *)(const void *)a->b);
	__m128i x1 = _mm_loadu_si128((const __m128i *)(const void *)(a->b + 16));
	__m128i y0 = _mm_loadu_si128((const __m128i *)(const void *)b->b);
	__m128i y1 = _mm_loadu_si128((const __m128i *)(const void *)(b->b + 16));
	__m128i d = _mm_or_si128(_mm_xor_si128(x0, y0), _mm_xor_si128(x1, y1));
	return _mm_movemask_epi8(_mm_cmpeq_epi8(d, _mm_setzero_si128())) == 0xFFFF;
#else
	return rix__id_eq(a, b);
#endif
}

/* The candidates of line ln for tag t: the entry among them holding id, its number in *pe. */
static inline const struct entry *find_in(const rix_indexmap *m, const struct line *ln, uint8_t t,
					  const rix_id *id, uint32_t *pe)
{
	for (uint32_t mask = rix__tag_mask(ln->tag, t); mask != 0; mask &= mask - 1) {
		uint32_t e = ln->slot[__builtin_ctz(mask)];
		const struct entry *en = entry_at(m, e);
		if (id_eq(&en->id, id)) {
			*pe = e;
			return en;
		}
	}
	return NULL;
}

/* find past the home line l, which did not hold id and whose filter has its bits: from the next
 * line on. Out of line: one present ID in 20 comes here and few absent ones, and the home line's
 * path keeps fewer registers without it. */
static __attribute__((noinline)) const struct entry *
find_past(const rix_indexmap *m, const rix_id *id, uint64_t h, uint32_t l, uint32_t *pe)
{
	const uint8_t t = tag_of(h);
	do {
		l = next_line(l, m->nlines);
		const struct entry *en = find_in(m, &m->lines[l], t, id, pe);
		if (en != NULL)
			return en;
	} while (goes_on(&m->lines[l], h));
	return NULL;
}

/*
 * The entry holding id (hash h), its number in *pe; NULL if the lines do not hold id. An ID the
 * home line lacks goes on only if its filter bits are all set there: the test is computed, not
 * skipped for the three lines in four that have no bits, because a branch on "has bits" is
 * taken one time in four and mispredicts, while "has the key's bits" almost never holds.
 */
static inline const struct entry *find(const rix_indexmap *m, const rix_id *id, uint64_t h,
				       uint32_t *pe)
{
	uint32_t l = home_line(h, m->nlines);
	const struct entry *en = find_in(m, &m->lines[l], tag_of(h), id, pe);
	if (en != NULL)
		return en;
	if (__builtin_expect(!goes_on(&m->lines[l], h), 1))
		return NULL;
	return find_past(m, id, h, l, pe);
}

/* ---- older copies: newer entry -> older entry, open addressing at load <= 1/2 ---------------- */

static inline uint32_t older_home(uint32_t newer, uint32_t cap)
{
	return (uint32_t)(((uint64_t)newer * 0x9E3779B97F4A7C15ull) >> 32) & (cap - 1);
}

static void older_put(uint64_t *w, uint32_t cap, uint32_t newer, uint32_t old)
{
	uint32_t i = older_home(newer, cap);
	while (w[i] != 0)
		i = (i + 1) & (cap - 1);
	w[i] = (uint64_t)(newer + 1) << 32 | old;
}

static int older_get(const rix_indexmap *m, uint32_t newer, uint32_t *old)
{
	if (m->older_n == 0)
		return 0;
	for (uint32_t i = older_home(newer, m->older_cap);; i = (i + 1) & (m->older_cap - 1)) {
		uint64_t r = m->older[i];
		if (r == 0)
			return 0;
		if ((uint32_t)(r >> 32) == newer + 1) {
			*old = (uint32_t)r;
			return 1;
		}
	}
}

/* Room for one more record of an older copy, and a shadow bit for entry e. */
static int reserve_copy(rix_indexmap *m, uint32_t e)
{
	if ((uint64_t)(m->older_n + 1) * 2 > m->older_cap) {
		if (m->older_cap > UINT32_MAX / 2)
			return rix_error_set(RIX_ELIMIT, "indexmap: too many copies of IDs");
		uint32_t cap = m->older_cap ? m->older_cap * 2 : 16;
		uint64_t *w = rix_calloc(cap, sizeof(uint64_t));
		if (w == NULL)
			return rix_error_set(RIX_ENOMEM, "indexmap: out of memory for duplicate IDs");
		for (uint32_t i = 0; i < m->older_cap; i++)
			if (m->older[i] != 0)
				older_put(w, cap, (uint32_t)(m->older[i] >> 32) - 1, (uint32_t)m->older[i]);
		rix_free(m->older);
		m->older = w;
		m->older_cap = cap;
	}
	uint32_t need = e / 64 + 1;
	if (need > m->shadow_words) {
		uint32_t words = m->shadow_words ? m->shadow_words * 2 : 16;
		if (words < need)
			words = need;
		uint64_t *s = rix_realloc(m->shadow, (size_t)words * sizeof(uint64_t));
		if (s == NULL)
			return rix_error_set(RIX_ENOMEM, "indexmap: out of memory for duplicate IDs");
		memset(s + m->shadow_words, 0, (size_t)(words - m->shadow_words) * sizeof(uint64_t));
		m->shadow = s;
		m->shadow_words = words;
	}
	return 0;
}

int rix_indexmap_reserve(rix_indexmap *m, size_t n)
{
	if (n > RIX_INDEXMAP_MAX_ENTRIES)
		return rix_error_set(RIX_ELIMIT, "indexmap: cannot hold %zu entries", n);
	int rc = rix__indexmap_grow_blocks(m, n, true);
	if (rc != 0)
		return rc;
	const uint64_t per = (uint64_t)SLOTS * MAX_FILL_NUM;
	uint64_t nl = ((uint64_t)n * MAX_FILL_DEN + per - 1) / per;
	if (nl < MIN_LINES)
		nl = MIN_LINES;
	if (nl > m->nlines)
		return rehash(m, (uint32_t)nl);
	return 0;
}

/* Writes entry e, the next one (its slot is already set), and counts it. */
static inline void store(rix_indexmap *m, uint32_t e, const rix_id *id, const rix_loc *loc)
{
	struct entry *en = entry_at(m, e);
	en->id = *id;
	en->loc = *loc;
	m->count = e + 1;
}

/* rix_indexmap_add's every case (h: the ID's hash): limits, growth, copies, full lines. */
static __attribute__((noinline)) int add_slow(rix_indexmap *m, const rix_id *id,
					       const rix_loc *loc, uint64_t h)
{
	uint32_t e = m->count;
	if (e >= m->room) {
		if (e >= RIX_INDEXMAP_MAX_ENTRIES)
			return rix_error_set(RIX_ELIMIT, "indexmap: full at %u entries", e);
		int rc = rix__indexmap_grow_blocks(m, (uint64_t)e + 1, false);
		if (rc != 0)
			return rc;
	}
	if (m->used >= m->max_used) {
		int rc = rehash(m, m->nlines ? m->nlines + (m->nlines + 1) / 2 : MIN_LINES);
		if (rc != 0)
			return rc;
	}
	/* One pass from the home line: a slot holding the ID (a copy), else the first line with
	 * room (no copy can lie past a line that has room: it would have passed it full). The full
	 * lines passed get the ID's filter bits, needed once it is stored past them and harmless if
	 * a copy turns up after all. */
	uint32_t l = home_line(h, m->nlines), f = over_bits(h);
	uint8_t t = tag_of(h);
	for (;;) {
		struct line *ln = &m->lines[l];
		uint32_t mask = rix__tag_mask(ln->tag, t), s = SLOTS;
		for (; mask != 0; mask &= mask - 1) {
			s = (uint32_t)__builtin_ctz(mask);
			if (id_eq(&entry_at(m, ln->slot[s])->id, id))
				break;
		}
		if (mask != 0) { /* a copy: the new entry takes its slot */
			uint32_t old = ln->slot[s];
			int rc = reserve_copy(m, old);
			if (rc != 0)
				return rc;
			older_put(m->older, m->older_cap, e, old);
			m->older_n++;
			m->shadow[old / 64] |= (uint64_t)1 << (old % 64);
			ln->slot[s] = e;
			break;
		}
		uint32_t u = line_used(ln);
		if (u < SLOTS) {
			ln->tag[u] = t;
			ln->slot[u] = e;
			m->used++;
			break;
		}
		ln->over |= f;
		l = next_line(l, m->nlines);
	}
	store(m, e, id, loc);
	return 0;
}

/*
 * The common case in line: room for the entry, no growth due, and a home line that matches no
 * tag (so holds no copy, and none lies further: it has room) and has a free slot. Everything
 * else goes to add_slow, with the hash.
 */
static inline int add_hashed(rix_indexmap *m, const rix_id *id, const rix_loc *loc, uint64_t h)
{
	const uint32_t e = m->count;
	if (__builtin_expect(e >= m->room || m->used >= m->max_used, 0))
		return add_slow(m, id, loc, h);
	struct line *ln = &m->lines[home_line(h, m->nlines)];
	const uint8_t t = tag_of(h);
	const uint32_t u = line_used(ln);
	if (__builtin_expect(u == SLOTS || rix__tag_mask(ln->tag, t) != 0, 0))
		return add_slow(m, id, loc, h);
	ln->tag[u] = t;
	ln->slot[u] = e;
	m->used++;
	store(m, e, id, loc);
	return 0;
}

int rix_indexmap_add(rix_indexmap *m, const rix_id *id, const rix_loc *loc)
{
	return add_hashed(m, id, loc, rix__hash_id_keyed(id, m->keys));
}

/*
 * The adds in order, each key's home line requested ADD_AHEAD keys before it is placed: the
 * lines' misses overlap, and the branch on a line (full, or a tag matched: add_slow) waits less
 * for its miss, or not at all, when it mispredicts. A line requested before a growth is the old table's:
 * a wasted request, never a wrong answer (the add computes its line afresh).
 */
#define ADD_AHEAD 16u
int rix_indexmap_add_many(rix_indexmap *m, const rix_id *ids, const rix_loc *locs, size_t n)
{
	uint64_t h[ADD_AHEAD];
	for (size_t i = 0; i < n && i < ADD_AHEAD; i++) {
		h[i] = rix__hash_id_keyed(&ids[i], m->keys);
		RIX_PREFETCH_W(&m->lines[home_line(h[i], m->nlines)]);
	}
	for (size_t i = 0; i < n; i++) {
		const uint64_t hi = h[i % ADD_AHEAD];
		if (i + ADD_AHEAD < n) {
			uint64_t hn = rix__hash_id_keyed(&ids[i + ADD_AHEAD], m->keys);
			h[i % ADD_AHEAD] = hn;
			RIX_PREFETCH_W(&m->lines[home_line(hn, m->nlines)]);
		}
		int rc = add_hashed(m, &ids[i], &locs[i], hi);
		if (rc != 0)
			return rc;
	}
	return 0;
}

/* rix_indexmap_lookup's every other case: find in full (the home line is in cache by now). */
static __attribute__((noinline)) int lookup_slow(rix_loc *out, const rix_indexmap *m,
						 const rix_id *id, uint64_t h)
{
	uint32_t e;
	const struct entry *en = find(m, id, h, &e);
	if (en == NULL)
		return RIX_ENOTFOUND;
	if (out != NULL)
		*out = en->loc;
	return 0;
}

/*
 * The two common cases in line, in the caller-saved registers (no frame, no stack): an ID found
 * in the first candidate of its home line, and one whose home line has no candidate and lacks
 * its filter bits. The rest (a tag that matched another ID, an ID stored past its home line)
 * go to lookup_slow. Fewer instructions a lookup let more lookups' misses overlap in the core.
 */
int rix_indexmap_lookup(rix_loc *out, const rix_indexmap *m, const rix_id *id)
{
	const uint64_t h = rix__hash_id_keyed(id, m->keys);
	const struct line *ln = &m->lines[home_line(h, m->nlines)];
	const uint32_t mask = rix__tag_mask(ln->tag, tag_of(h));
	if (mask != 0) {
		const struct entry *en = entry_at(m, ln->slot[__builtin_ctz(mask)]);
		if (__builtin_expect(!id_eq(&en->id, id), 0))
			return lookup_slow(out, m, id, h);
		if (out != NULL)
			*out = en->loc;
		return 0;
	}
	if (__builtin_expect(goes_on(ln, h), 0))
		return lookup_slow(out, m, id, h);
	return RIX_ENOTFOUND;
}

size_t rix_indexmap_lookup_all(rix_loc *out, size_t max, const rix_indexmap *m, const rix_id *id)
{
	uint32_t e;
	if (find(m, id, rix__hash_id_keyed(id, m->keys), &e) == NULL)
		return 0;
	size_t n = 0;
	for (;;) {
		if (n < max && out != NULL)
			out[n] = entry_at(m, e)->loc;
		n++;
		if (!older_get(m, e, &e))
			return n;
	}
}

/* Requests both lines an entry may span (48 bytes: every other entry crosses a line). */
static inline void prefetch_entry(const struct entry *en)
{
	RIX_PREFETCH(en);
	RIX_PREFETCH((const char *)en + sizeof(*en) - 1);
}

/*
 * The state of one key's probe in the batched lookup: the line it reads, and that line's
 * candidate slots left (the lowest one's entry requested); mask 0: the line itself requested,
 * not read yet.
 */
struct walk {
	size_t key;
	uint64_t h;
	uint32_t line;
	uint32_t mask;
};

/* Requests what w reads next, from line ln: its candidate's entry, else the next line if the
 * key's bits are set in ln's filter. Returns 0 when w is done (nothing more can match). */
static inline int walk_request(const rix_indexmap *m, struct walk *w, const struct line *ln)
{
	if (w->mask != 0) {
		prefetch_entry(entry_at(m, ln->slot[__builtin_ctz(w->mask)]));
		return 1;
	}
	if (!goes_on(ln, w->h))
		return 0;
	w->line = next_line(w->line, m->nlines);
	RIX_PREFETCH(&m->lines[w->line]);
	return 1;
}

/*
 * Batched lookup in two parts.
 *
 *   filter: a group of G keys is hashed and its home lines prefetched, then read: a key whose
 *           tag matches no slot and whose bits the line's filter lacks (most absent IDs) is
 *           done there; the others queue with their candidate's entry (or the next line)
 *           prefetched.
 *   window: up to W probes in flight, kept dense in s[0, active) and served in turns, one
 *           entry or line per probe per turn; a probe that ends hands its slot to the next
 *           queued key at once, or to the last probe (a slot is never visited empty), and an
 *           empty queue filters the next group. So W misses stay in flight whatever the probes'
 *           lengths, and keys the filter turns down cost no turn of the window.
 */
size_t rix_indexmap_lookup_many(rix_loc *out, bool *found, const rix_indexmap *m,
				const rix_id *ids, size_t n)
{
	enum { W = 64, G = 64 };
	size_t nfound = 0;
	if (found != NULL)
		memset(found, 0, n);
	if (n == 0)
		return 0;
	const struct line *lines = m->lines;
	struct walk q[G], s[W];
	size_t qi = 0, qn = 0; /* q[qi, qn): filtered keys waiting for a slot */
	size_t next = 0;       /* keys [0, next) filtered */
	size_t active = 0;     /* s[0, active): the probes */
	for (;;) {
		while (active < W && (qi < qn || next < n)) {
			if (qi == qn) { /* filter the next group */
				size_t g = n - next < G ? n - next : G;
				uint64_t h[G];
				uint32_t hl[G];
				for (size_t i = 0; i < g; i++) {
					h[i] = rix__hash_id_keyed(&ids[next + i], m->keys);
					hl[i] = home_line(h[i], m->nlines);
					RIX_PREFETCH(&lines[hl[i]]);
				}
				qi = qn = 0;
				for (size_t i = 0; i < g; i++) {
					struct walk *w = &q[qn];
					w->key = next + i;
					w->h = h[i];
					w->line = hl[i];
					w->mask = rix__tag_mask(lines[hl[i]].tag, tag_of(h[i]));
					qn += (size_t)walk_request(m, w, &lines[hl[i]]);
				}
				next += g;
				continue;
			}
			s[active++] = q[qi++];
		}
		if (active == 0)
			break; /* and nothing queued: every key filtered */
		/* One turn: each probe reads what it requested; one that ends takes the next queued key
		 * (its first request made when it was filtered) or, with none, the last probe, read at
		 * once. */
		for (size_t k = 0; k < active;) {
			struct walk *w = &s[k];
			const struct line *ln = &lines[w->line];
			int more;
			if (w->mask == 0) {
				w->mask = rix__tag_mask(ln->tag, tag_of(w->h));
				more = walk_request(m, w, ln);
			} else {
				const struct entry *en = entry_at(m, ln->slot[__builtin_ctz(w->mask)]);
				if (id_eq(&en->id, &ids[w->key])) {
					if (out != NULL)
						out[w->key] = en->loc;
					if (found != NULL)
						found[w->key] = 1;
					nfound++;
					more = 0;
				} else {
					w->mask &= w->mask - 1;
					more = walk_request(m, w, ln);
				}
			}
			if (more)
				k++;
			else if (qi < qn)
				s[k++] = q[qi++];
			else
				s[k] = s[--active];
		}
	}
	return nfound;
}

size_t rix_indexmap_count(const rix_indexmap *m)
{
	return m->count;
}

size_t rix_indexmap_memory(const rix_indexmap *m)
{
	return sizeof(*m) + (m->lines_mem ? ((size_t)m->nlines + 1) * sizeof(struct line) : 0) +
	       rix__indexmap_blocks_memory(m) + (size_t)m->older_cap * sizeof(uint64_t) +
	       (size_t)m->shadow_words * sizeof(uint64_t);
}

void rix_indexmap_entry(const rix_id **id, rix_loc *loc, const rix_indexmap *m, uint32_t i)
{
	const struct entry *en = entry_at(m, i);
	if (id != NULL)
		*id = &en->id;
	if (loc != NULL)
		*loc = en->loc;
}

int rix_indexmap_foreach(const rix_indexmap *m, rix_indexmap_fn fn, void *arg)
{
	for (uint32_t i = 0; i < m->count; i++) {
		const struct entry *en = entry_at(m, i);
		int rc = fn(arg, &en->id, &en->loc);
		if (rc != 0)
			return rc;
	}
	return 0;
}

uint32_t rix_indexmap_batch(const rix_indexmap *m)
{
	return 1u << m->shift;
}
