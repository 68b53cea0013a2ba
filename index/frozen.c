/*
 * index/frozen.c — the frozen table: the read-only table that holds every merged entry of the
 * master index (one per blob type), and its two builders: rix__frozen_build, used by a merge,
 * builds a new table from older tables and index maps; rix__frozen_in_place, used by bulk
 * loading, sorts an array of loaded entries into a table where they lie. The lookup,
 * frozen_find, stays in master_index.c beside the lookups that call it, so that they compile
 * as they did.
 *
 * The frozen table is a chaining table whose chains are stored contiguously, in bucket order:
 *
 *   buckets[nb + 1] (u64)                    entries[count] (48 bytes: id[32] | rix_loc)
 *   +-------------------------+              +----+----+----+----+----+----+----+----
 *   | filter:32 | start:32    | b ---------> | e0 | e1 | e2 | e3 | e4 | e5 | e6 | ...
 *   | filter:32 | start:32    | b+1 -------------------------> ^
 *   ...                                       chain of b = entries[start(b) .. start(b+1))
 *   | 0         | count       | nb (sentinel)             fp[count] (1 byte: rix__hash_fp of
 *   +-------------------------+                           entries[i]'s hash, same order)
 *
 * No `next` field is needed (48 bytes an entry instead of 52), and a chain is one run of
 * adjacent memory, so walking it costs one or two cache misses whatever its length. The bucket
 * count is count / FROZEN_LOAD, so buckets cost 8 / FROZEN_LOAD bytes an entry; the same
 * 32-bit filter as the mutable table (hash.h) rejects most absent IDs at the bucket word. The
 * fingerprints (one more byte an entry, a tenth of a 10M table's size: mostly in cache) say
 * which entries of a chain are worth comparing, so a known ID's lookup reads its own entry's
 * lines rather than the chain's (batched lookups prefetch only those), and an absent ID that
 * passed the filter rarely reads an entry at all. A lookup returns one entry of a chain with
 * that ID; the order of duplicates in a chain is unspecified.
 *
 * Both builders are a counting sort on bucket numbers: count, prefix sums, place.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rix/alloc.h"
#include "rix/error.h"
#include "master_index_internal.h"
#include "../common/pool.h"

void rix__frozen_free(struct frozen *f)
{
	if (f == NULL)
		return;
	rix_free(f->buckets);
	rix_free(f->entries);
	rix_free(f->fp);
	rix_free(f);
}

size_t rix__frozen_memory(const struct frozen *f)
{
	if (f == NULL)
		return 0;
	return sizeof(*f) + ((size_t)f->nb + 1) * sizeof(uint64_t) + (size_t)f->count * sizeof(struct fentry) +
	       (size_t)f->count;
}

static inline void src_entry(const struct merge_src *s, uint32_t i, const rix_id **id, rix_loc *loc)
{
	if (s->f != NULL) {
		*id = &s->f->entries[i].id;
		*loc = s->f->entries[i].loc;
	} else {
		rix_indexmap_entry(id, loc, s->m, i);
		loc->pack += s->pack_base;
	}
}

static inline uint32_t src_count(const struct merge_src *s)
{
	return s->f != NULL ? s->f->count : (uint32_t)rix_indexmap_count(s->m);
}

int rix__frozen_build(struct frozen **out, const struct merge_src *srcs, size_t n, uint64_t seed)
{
	*out = NULL;
	uint64_t total = 0;
	for (size_t s = 0; s < n; s++)
		total += src_count(&srcs[s]);
	if (total == 0)
		return 0;
	if (total > 0xFFFFFFFEu)
		return rix_error_set(RIX_ELIMIT, "master index: %llu entries of one type is over the limit",
				     (unsigned long long)total);
	uint32_t nb = (uint32_t)((total + FROZEN_LOAD - 1) / FROZEN_LOAD);
	struct frozen *f = rix_calloc(1, sizeof(*f));
	if (f == NULL)
		return rix_error_set(RIX_ENOMEM, "master index: out of memory");
	f->nb = nb;
	f->count = (uint32_t)total;
	f->buckets = rix_calloc((size_t)nb + 1, sizeof(uint64_t));
	f->entries = rix_malloc((size_t)total * sizeof(struct fentry));
	f->fp = rix_calloc((size_t)total, 1);
	if (f->buckets == NULL || f->entries == NULL || f->fp == NULL) {
		rix__frozen_free(f);
		return rix_error_set(RIX_ENOMEM, "master index: out of memory for %llu entries",
				     (unsigned long long)total);
	}
	rix__advise_huge(f->buckets, ((size_t)nb + 1) * sizeof(uint64_t));
	rix__advise_huge(f->entries, (size_t)total * sizeof(struct fentry));
	/* Pass 1: chain lengths (low half) and filter bits (high half) per bucket. */
	for (size_t s = 0; s < n; s++) {
		uint32_t c = src_count(&srcs[s]);
		for (uint32_t i = 0; i < c; i++) {
			const rix_id *id;
			rix_loc loc;
			src_entry(&srcs[s], i, &id, &loc);
			uint64_t h = rix__hash_id(id, seed);
			uint64_t *w = &f->buckets[rix__hash_bucket(h, nb)];
			*w = (*w | rix__hash_filter(h)) + 1; /* total < 2^32: no carry */
		}
	}
	/* Turn lengths into chain ends: end(b) = sum of lengths of buckets 0..b. */
	uint32_t run = 0;
	for (uint32_t b = 0; b < nb; b++) {
		run += (uint32_t)f->buckets[b];
		f->buckets[b] = (f->buckets[b] & 0xFFFFFFFF00000000ull) | run;
	}
	f->buckets[nb] = run;
	/* Pass 2: place each entry at --end(b); afterwards the low half is start(b). */
	for (size_t s = 0; s < n; s++) {
		uint32_t c = src_count(&srcs[s]);
		for (uint32_t i = 0; i < c; i++) {
			const rix_id *id;
			rix_loc loc;
			src_entry(&srcs[s], i, &id, &loc);
			uint64_t h = rix__hash_id(id, seed);
			uint64_t *w = &f->buckets[rix__hash_bucket(h, nb)];
			*w -= 1;
			struct fentry *e = &f->entries[(uint32_t)*w];
			e->id = *id;
			e->loc = loc;
			f->fp[(uint32_t)*w] = rix__hash_fp(h);
		}
	}
	*out = f;
	return 0;
}

/* Super-buckets of the in-place sort (see rix__frozen_in_place): 16, then 16 x 16. */
#define SUPER_BITS 8
#define NSUPER (1u << SUPER_BITS)

/*
 * The super-bucket of a bucket: about bucket * NSUPER / nb, by a multiplication (smul =
 * floor(2^32 NSUPER / nb), from super_mul) rather than a division per key, which the sort
 * computes twice an entry. Non-decreasing in bucket and below NSUPER for every bucket < nb, so
 * each super-bucket's buckets are one contiguous range (sfirst of the sort).
 */
static inline uint64_t super_mul(uint32_t nb)
{
	return ((uint64_t)NSUPER << 32) / nb;
}

static inline uint32_t super_of(uint32_t bucket, uint64_t smul)
{
	return (uint32_t)(((uint64_t)bucket * smul) >> 32);
}

/* How far ahead of a key's write position its entries are prefetched: each key's range is
 * written front to back, so its next entries are known long before they are swapped out. */
#define PERMUTE_AHEAD 8

/*
 * Permutes entries so that every one lands in its key's range: key k owns
 * [next[k - k0] .. its end), ends given by end(k). Each entry moves once (cycle leader).
 * PLACE(i) runs as an entry is written at its final index i, right after KEY was computed for
 * that entry (so what KEY left aside, its hash, is still the entry's).
 */
#define PERMUTE(e, k0, nk, next, END, KEY, PLACE)                                        \
	do {                                                                                     \
		for (uint32_t k_ = 0; k_ < (nk); k_++) {                                         \
			uint32_t end_ = END(k_);                                                 \
			while ((next)[k_] < end_) {                                              \
				struct fentry cur_ = (e)[(next)[k_]];                            \
				uint32_t d_ = KEY(cur_) - (k0);                                  \
				while (d_ != k_) {                                               \
					RIX_PREFETCH(&(e)[(next)[d_] + PERMUTE_AHEAD]);          \
					struct fentry o_ = (e)[(next)[d_]];                      \
					PLACE((next)[d_]);                                       \
					(e)[(next)[d_]++] = cur_;                                \
					cur_ = o_;                                               \
					d_ = KEY(cur_) - (k0);                                   \
				}                                                                \
				PLACE((next)[k_]);                                               \
				(e)[(next)[k_]++] = cur_;                                        \
			}                                                                        \
		}                                                                                \
	} while (0)
#define NO_PLACE(i) ((void)0)

struct sort_job {
	struct fentry *entries;
	struct frozen *f;
	uint32_t *sstart, *snext;
	const uint32_t *sfirst; /* the first bucket of each super-bucket, and nb */
	uint32_t maxspan;       /* the most buckets of one super-bucket */
	uint32_t *cursors;      /* maxspan a worker: level 3's cursors */
	uint64_t smul;
	uint32_t nb;
	uint64_t seed;
	atomic_uint group; /* the next group to take */
	atomic_uint worker; /* the next worker's cursors */
};

/* Levels 2 and 3 for the groups this thread takes; level 3 writes each entry's fingerprint as
 * it places it, from the hash that placed it. Level 3's cursors are the thread's own, one
 * super-bucket's worth. */
static void *sort_groups(void *arg)
{
	struct sort_job *j = arg;
	struct fentry *entries = j->entries;
	uint32_t nb = j->nb, *sstart = j->sstart;
	uint64_t seed = j->seed;
	uint8_t *fp = j->f->fp;
	uint32_t *nx = j->cursors + (size_t)atomic_fetch_add(&j->worker, 1) * j->maxspan;
	for (;;) {
		uint32_t g = atomic_fetch_add(&j->group, 1);
		if (g >= 16)
			break;
		uint32_t *sn = j->snext + 16 * g;
#define SUPER_END(k) (sstart[16 * g + (k) + 1])
#define SUPER_KEY(x) super_of(rix__hash_bucket(rix__hash_id(&(x).id, seed), nb), j->smul)
		PERMUTE(entries, 16 * g, 16, sn, SUPER_END, SUPER_KEY, NO_PLACE);
		/* Each super-bucket's buckets are one contiguous range [b0, b1). */
		for (uint32_t k = 16 * g; k < 16 * g + 16; k++) {
			uint32_t b0 = j->sfirst[k], b1 = j->sfirst[k + 1];
			for (uint32_t b = b0; b < b1; b++)
				nx[b - b0] = (uint32_t)j->f->buckets[b];
			uint64_t hh = 0; /* the hash BUCKET_KEY last computed */
#define BUCKET_END(i) ((uint32_t)j->f->buckets[b0 + (i) + 1])
#define BUCKET_KEY(x) (hh = rix__hash_id(&(x).id, seed), rix__hash_bucket(hh, nb))
#define BUCKET_PLACE(i) (fp[(i)] = rix__hash_fp(hh))
			PERMUTE(entries, b0, b1 - b0, nx, BUCKET_END, BUCKET_KEY, BUCKET_PLACE);
		}
#undef SUPER_END
#undef SUPER_KEY
#undef BUCKET_END
#undef BUCKET_KEY
#undef BUCKET_PLACE
	}
	return NULL;
}

/*
 * The frozen table over entries[0..count) themselves, permuted into bucket order: a counting
 * sort done in place in three levels, so that the moves stay cache-friendly: 16 groups of
 * super-buckets (16 write streams, which the prefetchers follow), then each group into its 16
 * super-buckets (1/16 of the data), then each super-bucket (1/256 of the entries: L2-sized at
 * millions) into its buckets, with cursors for one super-bucket per thread (the bucket words
 * hold the starts), and its entries' fingerprints written while they are in cache. Beyond the
 * entries: 8 / FROZEN_LOAD bytes an entry of bucket words and one of fingerprints.
 */
int rix__frozen_in_place(struct frozen **out, struct fentry *entries, uint32_t count, uint64_t seed,
			 unsigned workers)
{
	*out = NULL;
	uint32_t nb = (uint32_t)(((uint64_t)count + FROZEN_LOAD - 1) / FROZEN_LOAD);
	struct frozen *f = rix_calloc(1, sizeof(*f));
	if (f != NULL) {
		f->buckets = rix_calloc((size_t)nb + 1, sizeof(uint64_t));
		f->fp = rix_calloc((size_t)count, 1);
	}
	if (f == NULL || f->buckets == NULL || f->fp == NULL) {
		if (f != NULL) {
			rix_free(f->buckets);
			rix_free(f->fp);
		}
		rix_free(f);
		return rix_error_set(RIX_ENOMEM, "master index: out of memory for %u buckets", nb);
	}
	rix__advise_huge(f->buckets, ((size_t)nb + 1) * sizeof(uint64_t));
	for (uint32_t i = 0; i < count; i++) {
		uint64_t h = rix__hash_id(&entries[i].id, seed);
		uint64_t *w = &f->buckets[rix__hash_bucket(h, nb)];
		*w = (*w | rix__hash_filter(h)) + 1;
	}
	uint64_t smul = super_mul(nb);
	uint32_t run = 0, sstart[NSUPER + 1], snext[NSUPER], sfirst[NSUPER + 1], kfirst = 0;
	memset(sstart, 0, sizeof(sstart));
	for (uint32_t b = 0; b < nb; b++) {
		uint32_t len = (uint32_t)f->buckets[b];
		f->buckets[b] = (f->buckets[b] & 0xFFFFFFFF00000000ull) | run;
		uint32_t sk = super_of(b, smul);
		while (kfirst <= sk)
			sfirst[kfirst++] = b; /* the first bucket of each super-bucket up to sk */
		sstart[sk + 1] += len;
		run += len;
	}
	f->buckets[nb] = run;
	while (kfirst <= NSUPER)
		sfirst[kfirst++] = nb;
	uint32_t maxspan = 0;
	for (uint32_t k = 0; k < NSUPER; k++)
		maxspan = sfirst[k + 1] - sfirst[k] > maxspan ? sfirst[k + 1] - sfirst[k] : maxspan;
	for (uint32_t k = 0; k < NSUPER; k++) {
		sstart[k + 1] += sstart[k];
		snext[k] = sstart[k];
	}
	uint32_t gnext[16];
	for (uint32_t g = 0; g < 16; g++)
		gnext[g] = sstart[16 * g];
#define GROUP_END(k) (sstart[16 * ((k) + 1)])
#define GROUP_KEY(x) (super_of(rix__hash_bucket(rix__hash_id(&(x).id, seed), nb), smul) >> 4)
	PERMUTE(entries, 0, 16, gnext, GROUP_END, GROUP_KEY, NO_PLACE);
	/* Levels 2 and 3 of the 16 groups are independent: one thread per CPU takes groups. */
	unsigned nw = rix__pool_size(workers, 16);
	uint32_t *cursors = rix_malloc((size_t)nw * (maxspan ? maxspan : 1) * sizeof(uint32_t));
	if (cursors == NULL) {
		rix__frozen_free(f); /* entries are the caller's still, in another order */
		return rix_error_set(RIX_ENOMEM, "master index: out of memory for the sort's cursors");
	}
	struct sort_job job = { .entries = entries, .f = f, .sstart = sstart, .snext = snext, .sfirst = sfirst,
				.maxspan = maxspan, .cursors = cursors, .smul = smul, .nb = nb, .seed = seed };
	rix__pool_run(nw, sort_groups, &job);
	rix_free(cursors);
	f->entries = entries;
	f->nb = nb;
	f->count = count;
	*out = f;
	return 0;
}

static int same_place(const struct fentry *a, const struct fentry *b, const rix_id *packs)
{
	return a->loc.offset == b->loc.offset && a->loc.length == b->loc.length &&
	       a->loc.uncompressed_length == b->loc.uncompressed_length && rix__id_eq(&a->id, &b->id) &&
	       (a->loc.pack == b->loc.pack || rix__id_eq(&packs[a->loc.pack], &packs[b->loc.pack]));
}

uint32_t rix__frozen_drop_same(struct frozen *f, const rix_id *packs)
{
	if (f == NULL || f->count == 0)
		return 0;
	uint32_t w = 0;
	for (uint32_t b = 0; b < f->nb; b++) {
		uint32_t start = (uint32_t)f->buckets[b], end = (uint32_t)f->buckets[b + 1];
		uint32_t first = w;
		for (uint32_t i = start; i < end; i++) {
			int dup = 0;
			for (uint32_t k = first; k < w && !dup; k++)
				dup = same_place(&f->entries[k], &f->entries[i], packs);
			if (!dup) {
				if (w != i) {
					f->entries[w] = f->entries[i];
					f->fp[w] = f->fp[i];
				}
				w++;
			}
		}
		f->buckets[b] = (f->buckets[b] & ~(uint64_t)0xFFFFFFFFu) | first;
	}
	uint32_t dropped = f->count - w;
	f->buckets[f->nb] = w;
	f->count = w;
	return dropped;
}

int rix__packs_repeat(const rix_id *packs, uint32_t n)
{
	if (n < 2)
		return 0;
	uint32_t cap = 1024;
	while (cap < 2 * (uint64_t)n)
		cap *= 2;
	uint32_t *slot = rix_malloc((size_t)cap * sizeof(*slot)); /* pack number + 1; 0: empty */
	if (slot == NULL)
		return -1;
	memset(slot, 0, (size_t)cap * sizeof(*slot));
	int repeat = 0;
	for (uint32_t i = 0; i < n && !repeat; i++) {
		uint64_t h;
		memcpy(&h, packs[i].b, sizeof(h)); /* pack IDs are SHA-256 sums: their bits are spread */
		uint32_t j = (uint32_t)h & (cap - 1);
		while (slot[j] != 0 && !(repeat = rix__id_eq(&packs[slot[j] - 1], &packs[i])))
			j = (j + 1) & (cap - 1);
		slot[j] = i + 1;
	}
	rix_free(slot);
	return repeat;
}

/* ---- Insertion of a few entries (rix__frozen_insert) -------------------------------------- */

struct ins {
	uint64_t h;
	uint32_t b, i;
};

static int cmp_ins(const void *a, const void *b)
{
	const struct ins *x = a, *y = b;
	if (x->b != y->b)
		return x->b < y->b ? -1 : 1;
	return x->i < y->i ? -1 : x->i > y->i;
}

/*
 * How it works: with the new entries sorted by bucket (B_0 <= B_1 <= ... <= B_k-1), the old
 * entries between the chains of B_i and B_i+1 all move by i + 1, and new entry i lands at
 * start(B_i) + i, first in its chain (the newest first, as a merge places them). So the table is
 * k + 1 runs moved (from the last, in place: memmove) or copied (into new arrays), then one
 * pass over the bucket words: start(b) += the new entries of buckets before b, filter bits ORed
 * in. No old entry is hashed again. Example, k = 2 into buckets 1 and 3 of a 5-entry table
 * [a0 | b1 b1 | c2 | d3 | e4] (letter: entry, digit: bucket): d3 e4 move by 2, b1 b1 c2 by 1,
 * giving [a0 | N1 b1 b1 | c2 | N3 d3 | e4], starts 0 1 4 5 7, sentinel 8.
 */
int rix__frozen_insert(struct frozen **out, struct frozen *f, const struct fentry *add, uint32_t k, uint64_t seed,
		       bool in_place)
{
	*out = NULL;
	uint64_t total = (uint64_t)f->count + k;
	if (total > 0xFFFFFFFEu)
		return rix_error_set(RIX_ELIMIT, "master index: %llu entries of one type is over the limit",
				     (unsigned long long)total);
	struct ins *v = rix_malloc((k ? k : 1) * sizeof(*v));
	struct frozen *d = in_place ? f : rix_calloc(1, sizeof(*d));
	if (v == NULL || d == NULL)
		goto nomem;
	for (uint32_t i = 0; i < k; i++) {
		v[i].h = rix__hash_id(&add[i].id, seed);
		v[i].b = rix__hash_bucket(v[i].h, f->nb);
		v[i].i = i;
	}
	qsort(v, k, sizeof(*v), cmp_ins);
	const uint64_t *ow = f->buckets;
#define OLD_START(b) ((uint32_t)ow[(b)])
	if (in_place) {
		uint8_t *fp = rix_realloc(f->fp, (size_t)total);
		if (fp == NULL)
			goto nomem;
		f->fp = fp;
		struct fentry *e = rix_realloc(f->entries, (size_t)total * sizeof(*e));
		if (e == NULL)
			goto nomem;
		f->entries = e;
		for (uint32_t i = k; i-- > 0;) {
			uint32_t lo = OLD_START(v[i].b), hi = i + 1 < k ? OLD_START(v[i + 1].b) : f->count;
			if (hi > lo) {
				memmove(e + lo + i + 1, e + lo, (size_t)(hi - lo) * sizeof(*e));
				memmove(fp + lo + i + 1, fp + lo, hi - lo);
			}
			e[lo + i] = add[v[i].i];
			fp[lo + i] = rix__hash_fp(v[i].h);
		}
	} else {
		d->buckets = rix_malloc(((size_t)f->nb + 1) * sizeof(uint64_t));
		d->entries = rix_malloc((size_t)total * sizeof(struct fentry));
		d->fp = rix_calloc((size_t)total, 1);
		if (d->buckets == NULL || d->entries == NULL || d->fp == NULL)
			goto nomem;
		rix__advise_huge(d->buckets, ((size_t)f->nb + 1) * sizeof(uint64_t));
		rix__advise_huge(d->entries, (size_t)total * sizeof(struct fentry));
		d->nb = f->nb;
		uint32_t first = k ? OLD_START(v[0].b) : f->count;
		memcpy(d->entries, f->entries, (size_t)first * sizeof(struct fentry));
		memcpy(d->fp, f->fp, first);
		for (uint32_t i = 0; i < k; i++) {
			uint32_t lo = OLD_START(v[i].b), hi = i + 1 < k ? OLD_START(v[i + 1].b) : f->count;
			d->entries[lo + i] = add[v[i].i];
			d->fp[lo + i] = rix__hash_fp(v[i].h);
			memcpy(d->entries + lo + i + 1, f->entries + lo, (size_t)(hi - lo) * sizeof(struct fentry));
			memcpy(d->fp + lo + i + 1, f->fp + lo, hi - lo);
		}
	}
	/* Bucket words: starts shifted by the new entries of the buckets before, filters ORed in. */
	uint64_t *dw = d->buckets;
	for (uint32_t b = 0, j = 0; b < f->nb; b++) {
		while (j < k && v[j].b < b)
			j++;
		dw[b] = (ow[b] & 0xFFFFFFFF00000000ull) | (uint32_t)(OLD_START(b) + j);
	}
#undef OLD_START
	for (uint32_t i = 0; i < k; i++)
		dw[v[i].b] |= rix__hash_filter(v[i].h);
	dw[f->nb] = total;
	d->count = (uint32_t)total;
	rix_free(v);
	*out = d;
	return 0;
nomem:
	rix_free(v);
	if (!in_place)
		rix__frozen_free(d);
	return rix_error_set(RIX_ENOMEM, "master index: out of memory inserting %u entries", k);
}
