/*
 * index/indexmap.c — the mutable chaining hash table: blob ID -> rix_loc.
 *
 * Layout
 * ------
 *                 buckets[nbuckets] (u64 words)
 *                 +---------------------------+
 *   bucket(h) --> | filter:32 | head+1:32     |   head+1 = 0: empty chain
 *                 +---------------------------+
 *                                |
 *                                v  entry number e lives at blocks[e >> shift][e & mask]
 *   blocks[0] --> [ e0 | e1 | ... | e(batch-1) ]       one allocation per `batch` entries
 *   blocks[1] --> [ ... ]
 *
 *   (block 0 starts at 16 entries and doubles by realloc up to the batch size, so small
 *   tables stay small; every later block is one allocation of `batch` entries)
 *
 *   entry (52 bytes, 4-byte aligned): next+1 | id[32] | pack | offset | length | ulen
 *
 * `next` sits before the ID so that a chain step over a non-matching entry (the common case)
 * reads the link and the ID's first 8 bytes from one cache line in 13 of 16 entry positions;
 * the full ID and the location are read only after those 8 bytes match.
 *
 * A chain runs from the bucket's head through each entry's `next` (entry number + 1, 0 ends
 * the chain). New entries are put at the head, so a chain lists newest first and a lookup
 * returns the most recent duplicate. Entry numbers are insertion order, which makes iteration
 * a walk over the blocks.
 *
 * Sizing
 * ------
 * The bucket count is any number (fastrange maps the hash to it), kept so that the load factor
 * (entries per bucket) stays in (MAX_LOAD/2, MAX_LOAD] while growing by doubling; reserve(n)
 * sizes for RESERVE_LOAD at n. Buckets then cost 8/load bytes per entry: 2-4 bytes at these
 * loads, so an entry costs 54-56 bytes all-in. The 32 filter bits per bucket (k = 3 bits per
 * entry) keep lookups of absent IDs at about one cache miss despite chains of 2-4.
 *
 * Growth allocates the new bucket array first and fails with RIX_ENOMEM leaving the table as it
 * was. The rehash walks entries in order and prefetches the bucket words a few entries ahead,
 * so its cache misses overlap.
 *
 * Limits: at most 2^32 - 2 entries (entry number + 1 must fit in 32 bits).
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

/*
 * The mutable table's filter: three bits of its bucket word's 32 for each entry (k = 3), where
 * rix__hash_filter gives two (a table that also keeps a fingerprint an entry needs no more). At this
 * table's load (2-4 entries a bucket), an absent ID passes three bits about half as often as
 * two (0.8% against 1.9% at 2.4 entries), and every pass walks the whole chain, one dependent
 * miss an entry. Bits 32..46 of the hash: apart from the bucket's (0..31).
 */
static inline uint64_t map_filter(uint64_t h)
{
	return rix__hash_filter(h) | ((uint64_t)1 << (32 + ((h >> 42) & 31)));
}

/* Growth keeps the load in (MAX_LOAD / 2, MAX_LOAD]. */
#define MAX_LOAD 4u
/* reserve(n) sizes the buckets for this load at n: n * 2 / 5 buckets. */
#define RESERVE_LOAD_NUM 5u
#define RESERVE_LOAD_DEN 2u
#define MIN_BUCKETS 16u
#define MAX_BATCH (1u << 20)
/* First size of block 0, which then doubles up to the batch size. */
#define SMALL_BLOCK 16u

struct entry {
	uint32_t next; /* entry number + 1 of the next (older) entry in the chain; 0 = end */
	rix_id id;
	rix_loc loc;
};
_Static_assert(sizeof(struct entry) == 52, "entry must stay 52 bytes");

struct rix_indexmap {
	uint64_t *buckets;      /* nbuckets words: filter bits << 32 | (head entry + 1) */
	uint32_t nbuckets;      /* 0 until the first add or reserve */
	uint32_t count;         /* entries in use */
	uint32_t shift;         /* batch = 1 << shift entries per block */
	uint32_t nblocks;       /* blocks allocated */
	uint32_t cap0;          /* entries block 0 holds: grows to the batch size, then stays */
	uint32_t blocks_cap;    /* slots in blocks[] */
	struct entry **blocks;
	uint64_t seed;
};

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

static inline struct entry *entry_at(const rix_indexmap *m, uint32_t e)
{
	return &m->blocks[e >> m->shift][e & ((1u << m->shift) - 1)];
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
	m->seed = seed;
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
	for (uint32_t i = 0; i < m->nblocks; i++)
		rix_free(m->blocks[i]);
	rix_free(m->blocks);
	rix_free(m->buckets);
	rix_free(m);
}

static inline uint64_t capacity(const rix_indexmap *m)
{
	return m->nblocks == 0 ? 0 : ((uint64_t)(m->nblocks - 1) << m->shift) + m->cap0;
}

static int ensure_block_list(rix_indexmap *m, uint64_t need)
{
	if (need <= m->blocks_cap)
		return 0;
	uint64_t cap = m->blocks_cap ? (uint64_t)m->blocks_cap * 2 : 4;
	if (cap < need)
		cap = need;
	struct entry **nb = rix_realloc(m->blocks, cap * sizeof(*nb));
	if (nb == NULL)
		return rix_error_set(RIX_ENOMEM, "indexmap: out of memory for block list");
	m->blocks = nb;
	m->blocks_cap = (uint32_t)cap;
	return 0;
}

/* Resizes block 0 to cap entries (cap <= batch); entry numbers stay valid. */
static int resize_block0(rix_indexmap *m, uint32_t cap)
{
	int rc = ensure_block_list(m, 1);
	if (rc != 0)
		return rc;
	struct entry *b = rix_realloc(m->nblocks ? m->blocks[0] : NULL, (size_t)cap * sizeof(struct entry));
	if (b == NULL)
		return rix_error_set(RIX_ENOMEM, "indexmap: out of memory for entry block");
	m->blocks[0] = b;
	m->nblocks = m->nblocks ? m->nblocks : 1;
	m->cap0 = cap;
	return 0;
}

/*
 * Ensures capacity for n entries in total. Block 0 starts small and doubles (by realloc) up to
 * the batch size, so a table of a few entries does not hold a whole batch; from then on every
 * block is a full batch, allocated whole.
 */
static int grow_blocks(rix_indexmap *m, uint64_t n)
{
	if (n <= capacity(m))
		return 0;
	uint32_t batch = 1u << m->shift;
	if (n <= batch) {
		uint32_t cap = m->cap0 ? m->cap0 * 2 : SMALL_BLOCK;
		while (cap < n)
			cap *= 2;
		return resize_block0(m, cap < batch ? cap : batch);
	}
	if (m->cap0 < batch) {
		int rc = resize_block0(m, batch);
		if (rc != 0)
			return rc;
	}
	uint64_t need = (n + batch - 1) >> m->shift;
	int rc = ensure_block_list(m, need);
	if (rc != 0)
		return rc;
	while (m->nblocks < need) {
		struct entry *b = rix_malloc(sizeof(struct entry) << m->shift);
		if (b == NULL)
			return rix_error_set(RIX_ENOMEM, "indexmap: out of memory for entry block");
		rix__advise_huge(b, sizeof(struct entry) << m->shift);
		m->blocks[m->nblocks++] = b;
	}
	return 0;
}

/*
 * Replaces the buckets with nb fresh ones and relinks every entry. Entries are walked in
 * insertion order, so each chain is rebuilt newest first; the bucket of entry i + AHEAD is
 * prefetched while entry i is linked.
 */
static int rehash(rix_indexmap *m, uint32_t nb)
{
	enum { AHEAD = 8 };
	uint64_t *buckets = rix_calloc(nb, sizeof(uint64_t));
	if (buckets == NULL)
		return rix_error_set(RIX_ENOMEM, "indexmap: out of memory for %u buckets", nb);
	rix__advise_huge(buckets, (size_t)nb * sizeof(uint64_t));
	uint64_t hs[AHEAD];
	uint32_t n = m->count;
	for (uint32_t i = 0; i < n && i < AHEAD; i++) {
		hs[i] = rix__hash_id(&entry_at(m, i)->id, m->seed);
		RIX_PREFETCH(&buckets[rix__hash_bucket(hs[i], nb)]);
	}
	for (uint32_t i = 0; i < n; i++) {
		uint64_t h = hs[i % AHEAD];
		if (i + AHEAD < n) {
			uint64_t h2 = rix__hash_id(&entry_at(m, i + AHEAD)->id, m->seed);
			hs[i % AHEAD] = h2;
			__builtin_prefetch(&buckets[rix__hash_bucket(h2, nb)], 1, 3);
		}
		uint64_t *w = &buckets[rix__hash_bucket(h, nb)];
		entry_at(m, i)->next = (uint32_t)*w;
		*w = ((*w | map_filter(h)) & 0xFFFFFFFF00000000ull) | (uint64_t)(i + 1);
	}
	rix_free(m->buckets);
	m->buckets = buckets;
	m->nbuckets = nb;
	return 0;
}

int rix_indexmap_reserve(rix_indexmap *m, size_t n)
{
	if (n > RIX_INDEXMAP_MAX_ENTRIES)
		return rix_error_set(RIX_ELIMIT, "indexmap: cannot hold %zu entries", n);
	int rc = grow_blocks(m, n);
	if (rc != 0)
		return rc;
	uint64_t nb = ((uint64_t)n * RESERVE_LOAD_DEN + RESERVE_LOAD_NUM - 1) / RESERVE_LOAD_NUM;
	if (nb < MIN_BUCKETS)
		nb = MIN_BUCKETS;
	if (nb > m->nbuckets)
		return rehash(m, (uint32_t)nb);
	return 0;
}

int rix_indexmap_add(rix_indexmap *m, const rix_id *id, const rix_loc *loc)
{
	uint32_t e = m->count;
	if (e >= RIX_INDEXMAP_MAX_ENTRIES)
		return rix_error_set(RIX_ELIMIT, "indexmap: full at %u entries", e);
	if (e >= capacity(m)) {
		int rc = grow_blocks(m, (uint64_t)e + 1);
		if (rc != 0)
			return rc;
	}
	if ((uint64_t)e + 1 > (uint64_t)m->nbuckets * MAX_LOAD) {
		uint64_t nb = m->nbuckets ? (uint64_t)m->nbuckets * 2 : MIN_BUCKETS;
		if (nb > 0xFFFFFFFFu)
			nb = 0xFFFFFFFFu;
		int rc = rehash(m, (uint32_t)nb);
		if (rc != 0)
			return rc;
	}
	uint64_t h = rix__hash_id(id, m->seed);
	uint64_t *w = &m->buckets[rix__hash_bucket(h, m->nbuckets)];
	struct entry *en = entry_at(m, e);
	en->id = *id;
	en->loc = *loc;
	en->next = (uint32_t)*w;
	*w = ((*w | map_filter(h)) & 0xFFFFFFFF00000000ull) | (uint64_t)(e + 1);
	m->count = e + 1;
	return 0;
}

int rix_indexmap_lookup(rix_loc *out, const rix_indexmap *m, const rix_id *id)
{
	if (m->count == 0)
		return RIX_ENOTFOUND;
	uint64_t h = rix__hash_id(id, m->seed);
	uint64_t w = m->buckets[rix__hash_bucket(h, m->nbuckets)];
	uint64_t f = map_filter(h);
	if ((w & f) != f)
		return RIX_ENOTFOUND;
	for (uint32_t e = (uint32_t)w; e != 0;) {
		const struct entry *en = entry_at(m, e - 1);
		if (rix__id_prefix_eq(&en->id, id) && rix__id_eq(&en->id, id)) {
			if (out != NULL)
				*out = en->loc;
			return 0;
		}
		e = en->next;
	}
	return RIX_ENOTFOUND;
}

size_t rix_indexmap_lookup_all(rix_loc *out, size_t max, const rix_indexmap *m, const rix_id *id)
{
	if (m->count == 0)
		return 0;
	uint64_t h = rix__hash_id(id, m->seed);
	uint64_t w = m->buckets[rix__hash_bucket(h, m->nbuckets)];
	uint64_t f = map_filter(h);
	if ((w & f) != f)
		return 0;
	size_t n = 0;
	for (uint32_t e = (uint32_t)w; e != 0;) {
		const struct entry *en = entry_at(m, e - 1);
		if (rix__id_eq(&en->id, id)) {
			if (n < max && out != NULL)
				out[n] = en->loc;
			n++;
		}
		e = en->next;
	}
	return n;
}

/* Requests both lines an entry may span (52 bytes: 4 in 5 entries cross a line), so that the
 * entry whose ID matches has its location at hand. */
static inline void prefetch_entry(const struct entry *en)
{
	RIX_PREFETCH(en);
	RIX_PREFETCH((const char *)en + sizeof(*en) - 1);
}

/*
 * Batched lookup in two parts.
 *
 *   filter: a group of G keys is hashed and its bucket words prefetched, then read: a key whose
 *           filter says no (most absent IDs) is done there; the others queue with their chain
 *           head prefetched.
 *   window: up to W chain walks in flight (asynchronous memory access chaining), kept dense in
 *           s[0, active) and served in turns, one entry per walk per turn; a walk that ends
 *           hands its slot to the next queued key at once, or to the last walk (a slot is never
 *           visited empty: no branch on whether it is, nothing to mispredict), and an empty
 *           queue filters the next group. So W misses stay in flight whatever the chain
 *           lengths, and keys the filter turns down cost no turn of the window (a batch of new
 *           blobs is mostly those).
 */
size_t rix_indexmap_lookup_many(rix_loc *out, bool *found, const rix_indexmap *m,
				const rix_id *ids, size_t n)
{
	enum { W = 64, G = 64 };
	size_t nfound = 0;
	if (found != NULL)
		memset(found, 0, n);
	if (m->count == 0 || n == 0)
		return 0;
	struct walk {
		size_t key;
		uint32_t cur; /* entry number + 1 to read next */
	} q[G], s[W];
	size_t qi = 0, qn = 0; /* q[qi, qn): filtered keys waiting for a slot */
	size_t next = 0;       /* keys [0, next) filtered */
	size_t active = 0;     /* s[0, active): the walks */
	for (;;) {
		while (active < W && (qi < qn || next < n)) {
			if (qi == qn) { /* filter the next group */
				size_t g = n - next < G ? n - next : G;
				uint64_t h[G];
				uint32_t bk[G];
				for (size_t i = 0; i < g; i++) {
					h[i] = rix__hash_id(&ids[next + i], m->seed);
					bk[i] = rix__hash_bucket(h[i], m->nbuckets);
					RIX_PREFETCH(&m->buckets[bk[i]]);
				}
				qi = qn = 0;
				for (size_t i = 0; i < g; i++) {
					uint64_t w = m->buckets[bk[i]];
					uint64_t f = map_filter(h[i]);
					q[qn].key = next + i;
					q[qn].cur = (uint32_t)w;
					if ((w & f) == f && (uint32_t)w != 0) {
						prefetch_entry(entry_at(m, (uint32_t)w - 1));
						qn++;
					}
				}
				next += g;
				continue;
			}
			s[active++] = q[qi++];
		}
		if (active == 0)
			break; /* and nothing queued: every key filtered */
		/* One turn: each walk reads its entry; one that ends takes the next queued key (its
		 * head requested when it was filtered) or, with none, the last walk, read at once. */
		for (size_t k = 0; k < active;) {
			const struct entry *en = entry_at(m, s[k].cur - 1);
			const rix_id *id = &ids[s[k].key];
			if (rix__id_prefix_eq(&en->id, id) && rix__id_eq(&en->id, id)) {
				if (out != NULL)
					out[s[k].key] = en->loc;
				if (found != NULL)
					found[s[k].key] = 1;
				nfound++;
			} else if (en->next != 0) {
				s[k].cur = en->next;
				prefetch_entry(entry_at(m, en->next - 1));
				k++;
				continue;
			}
			if (qi < qn)
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
	return sizeof(*m) + (size_t)m->nbuckets * sizeof(uint64_t) +
	       (size_t)m->blocks_cap * sizeof(struct entry *) +
	       (size_t)capacity(m) * sizeof(struct entry);
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
