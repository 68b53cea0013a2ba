/*
 * index/idset.c — rix_idset (rix/idset.h): an exact set of blob IDs in about 29.5 bytes an ID.
 *
 * The layout. The IDs are sorted. The top k bits of an ID are its bucket (2^k buckets, k about
 * log2 n, so a bucket holds about one ID). The bucket is not stored with the ID: a directory
 * says where each bucket's run of IDs begins and ends. Each ID keeps only its bits below the
 * top k, split at a byte boundary: with kb = ceil(k / 8), the ID's last 32 - kb bytes go to
 * the byte-aligned `tails` array and the w = 8 kb - k bits between the bucket and the tail
 * (the low bits of byte kb - 1) to the packed `mid` array, w bits an ID. (A set built with
 * RIX__IDSET_MID8, the ranked table's, takes kb = ceil((k + 8) / 8): 8 to 15 mid bits, a tail
 * one byte shorter, the same bits an ID; an absent ID whose bucket is not empty then reads
 * its mid bits and, but 1 time in 256, no tail.)
 *
 *   ID (256 bits):  | bucket: k bits | mid: w bits | tail: 32 - kb bytes                      |
 *                   '---- bytes 0 .. kb-1 --------'
 *
 *   dir: blocks of 64 bytes (one cache line), each for G consecutive buckets
 *   +----------------+--------------------------------------------------------------+
 *   | base:31 | ov:1 | unary code, 480 bits: for each bucket, one 1 per ID, then a 0 |
 *   +----------------+--------------------------------------------------------------+
 *     base = number of IDs in all earlier blocks
 *
 *   tails: n * (32 - kb) bytes, ID i at i * (32 - kb)     mid: n * w bits, ID i at bit i * w
 *   (a set built for the ranked table keeps its owner's `extra` bytes, the ID's location, after
 *   each tail: ID i's at i * (32 - kb + extra); idset_internal.h's stride)
 *
 * Bucket j of a block holds the IDs base + (ones before the j-th 0) ... up to the j-th 0, so
 * one 64-byte line gives a bucket's whole range: select the j-th and (j-1)-th zero of the code
 * (the popcounts of the line's 8 words, summed without branches, give the word; a select in
 * the word, the bit). A block whose G zeros and its IDs' ones do not fit in 480 bits (rare for
 * uniform IDs: the choice of G below leaves 4 standard deviations of room; certain for crafted
 * ones) sets the ov flag and keeps, in its second word, an offset into `ov`, an array holding
 * the G + 1 bucket starts of that block as plain u32.
 *
 * A lookup: the bucket from the ID's top bits; its block's line (1 cache line; the directory
 * is ~0.3 bytes an ID, so it tends to stay in the last-level cache); then the run's mid bits
 * (the mid array is w/8 bytes an ID, also cache-friendly) filter the run, and the tail bytes
 * of the candidates are compared (1 line, 2 when a 29-byte tail straddles a line). A run is
 * sorted (the IDs are), so a run longer than LINEAR_MAX is binary-searched (a shorter one is
 * scanned for equality). The lookups are compiled three times (idset_lookup.h): with portable
 * bit tricks, and on x86-64 with POPCNT and BMI2's PDEP, and with AVX-512 VPOPCNTQ besides
 * (the block's 8 popcounts and their prefix sums in a few vector instructions), the best the
 * processor runs chosen when the set is built.
 *
 * Bytes per ID. With n IDs, k bits of bucket and G buckets a block (lambda = n / 2^k IDs per
 * bucket) an ID costs 8 (32 - kb) + w = 256 - k bits of its own plus 512 / (G lambda) bits of
 * directory. choose_shape tries k in {floor(log2 n) - 1, .., + 1} and every G = 2^0 .. 2^8
 * whose expected block fill G (1 + lambda) is at least 4 standard deviations (sqrt(G lambda))
 * below 480, and keeps the cheapest:
 *   n =  1M: k = 19, G = 128, lambda = 1.91: 29 + 5/8 + 0.26 = 29.89 bytes
 *   n =  3M: k = 21, G = 128, lambda = 1.43: 29 + 3/8 + 0.35 = 29.72 bytes
 *   n = 10M: k = 24, G = 256, lambda = 0.60: 29 + 0   + 0.42 = 29.42 bytes
 * (the information-theoretic least for a set of n 256-bit IDs is 256 - log2 n + 1.44 bits:
 * 29.69, 29.49, 29.27 bytes).
 *
 * Crafted IDs. The seeded hash of rix_indexmap exists so that an attacker who chooses IDs
 * cannot pile them into one chain. Here the bucket is the ID itself, but blob IDs are SHA-256
 * hashes of content: putting m blobs into one bucket takes a search of about m * 2^k hashes
 * (a partial preimage search per blob), and even when someone pays for it, what they gain is
 * bounded: a long run is binary-searched (O(log n) comparisons, never a scan of the run), a
 * full block costs one more cache line (its ov offsets), and the build's sort is a radix sort
 * whose depth is bounded by the 32 bytes of an ID. Memory is the only thing such IDs can push
 * up, by at most (G + 1) * 4 bytes per block they overflow, a block needing hundreds of
 * crafted IDs. A lookup never becomes linear in n, and the answer stays exact whatever the IDs.
 *
 * Building: idset_build.c; the image (export, checked import): idset_image.c. Their shared
 * layout (the struct, the bit helpers): idset_internal.h.
 */
#include <stdint.h>
#include <string.h>

#include "rix/alloc.h"
#include "rix/error.h"
#include "rix/idset.h"
#include "hash.h"
#include "index_internal.h"
#include "idset_internal.h"
#include "idset_find.h"

#define IDSET_TEMPLATE "idset_lookup.h"
#include "idset_instances.h"
#undef IDSET_TEMPLATE

int rix__idset_cpu_level(void)
{
#if IDSET_HW
	__builtin_cpu_init();
	if (!__builtin_cpu_supports("popcnt") || !__builtin_cpu_supports("bmi2"))
		return LEVEL_PORTABLE;
	if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vpopcntdq"))
		return LEVEL_AVX512;
	return LEVEL_HW;
#else
	return LEVEL_PORTABLE;
#endif
}

void rix_idset_use_portable(rix_idset *s, bool on)
{
	if (s != NULL)
		s->level = on ? LEVEL_PORTABLE : rix__idset_cpu_level();
}

int rix__idset_use_level(rix_idset *s, int level)
{
	if (s == NULL || level < LEVEL_PORTABLE || level > rix__idset_cpu_level())
		return -1;
	s->level = level;
	return 0;
}

size_t rix_idset_lookup_cost(const rix_idset *s, const rix_id *id)
{
	if (s == NULL || s->n == 0)
		return 0;
	size_t lo, hi, steps = 0;
	bucket_range_portable(s, bucket_of(id->b, s->k), &lo, &hi);
	(void)run_find(s, id->b, lo, hi, &steps, NULL);
	return steps;
}

bool rix_idset_has(const rix_idset *s, const rix_id *id)
{
	if (s == NULL || s->n == 0)
		return false;
	return DISPATCH(s, has, s, id->b);
}

size_t rix_idset_has_many(bool *found, const rix_idset *s, const rix_id *ids, size_t n)
{
	if (s == NULL || s->n == 0) {
		if (n > 0)
			memset(found, 0, n * sizeof(*found));
		return 0;
	}
	return DISPATCH(s, has_many, found, s, ids, n);
}

bool rix_idset_rank(const rix_idset *s, const rix_id *id, size_t *rank)
{
	if (s == NULL || s->n == 0)
		return false;
	return DISPATCH(s, rank, s, id->b, rank);
}

size_t rix_idset_rank_many(size_t *ranks, const rix_idset *s, const rix_id *ids, size_t n)
{
	if (s == NULL || s->n == 0) {
		for (size_t i = 0; i < n; i++)
			ranks[i] = RIX_IDSET_NO_RANK;
		return 0;
	}
	return DISPATCH(s, rank_many, ranks, s, ids, n);
}

size_t rix_idset_count(const rix_idset *s)
{
	return s ? s->n : 0;
}

size_t rix_idset_memory(const rix_idset *s)
{
	if (s == NULL)
		return 0;
	return sizeof(*s) + s->tails_size;
}

void rix_idset_free(rix_idset *s)
{
	if (s == NULL)
		return;
	rix_free(s->tails);
	rix_free(s);
}

/* ---- Iteration ------------------------------------------------------------------------------ */

/* A walk's IDs, gathered RIX__IDSET_ROUND at a time for a rix__idset_round_fn. */
struct round {
	rix__idset_round_fn fn;
	void *payload;
	size_t n;
	rix_id id[RIX__IDSET_ROUND];
};

/* Puts IDs [lo, hi) of bucket b into the round, handing each full round to its function. An
 * ID's first 8 bytes are one big-endian word (the bucket's k bits on top, the mid bits below
 * them, ending at byte kb), then its tail (bytes kb..31, 28 to 32 of them: its first and last
 * 16, fixed-size copies) goes over the word's bytes past kb. */
static inline __attribute__((always_inline)) int emit_run(const struct rix_idset *s, uint64_t b, size_t lo, size_t hi,
							   struct round *r)
{
	uint64_t top = s->k > 0 ? b << (64 - s->k) : 0;
	unsigned mid_shift = 64 - 8 * s->kb; /* kb <= 5: 24 or more; kb 0 has no mid bits */
	for (size_t i = lo; i < hi; i++) {
		rix_id *id = &r->id[r->n];
		uint64_t word = top | (s->kb > 0 ? (uint64_t)mid_get(s, i) << mid_shift : 0);
		word = __builtin_bswap64(word);
		memcpy(id->b, &word, 8);
		const uint8_t *t = tail_at(s, i);
		memcpy(id->b + s->kb, t, 16);
		memcpy(id->b + RIX_ID_SIZE - 16, t + s->tail - 16, 16);
		if (++r->n == RIX__IDSET_ROUND) {
			int rc = r->fn(r->payload, r->id, r->n);
			r->n = 0;
			if (rc != 0)
				return rc;
		}
	}
	return 0;
}

int rix__idset_foreach_round(const rix_idset *s, rix__idset_round_fn fn, void *payload)
{
	if (s == NULL || s->n == 0)
		return 0;
	struct round rd; /* 2 KiB of IDs */
	struct round *r = &rd;
	r->fn = fn;
	r->payload = payload;
	r->n = 0;
	int rc = 0;
	size_t g = (size_t)1 << s->gshift;
	for (size_t blkno = 0; blkno < s->nblocks && rc == 0; blkno++) {
		const uint64_t *blk = s->dir + blkno * BLOCK_WORDS;
		uint64_t b0 = (uint64_t)blkno << s->gshift;
		size_t at = (size_t)(blk[0] & BASE_MASK);
		if (blk[0] & OV_FLAG) {
			const uint32_t *o = s->ov + blk[1];
			for (size_t j = 0; j < g && rc == 0; j++)
				rc = emit_run(s, b0 + j, o[j], o[j + 1], r);
			continue;
		}
		unsigned q = CODE_START;
		for (size_t j = 0; j < g && rc == 0; j++) {
			size_t c = 0;
			for (;;) { /* the bucket's ones: a word's run at a time */
				uint64_t x = ~(blk[q >> 6] >> (q & 63)); /* 0: a whole word of ones */
				unsigned ones = x ? (unsigned)__builtin_ctzll(x) : 64u;
				c += ones;
				q += ones;
				if (ones == 0 || (q & 63) != 0)
					break;
			}
			q++; /* the bucket's 0 */
			if (c > 0) {
				rc = emit_run(s, b0 + j, at, at + c, r);
				at += c;
			}
		}
	}
	if (rc == 0 && r->n > 0)
		rc = fn(payload, r->id, r->n);
	return rc;
}

struct one_by_one {
	rix_idset_fn fn;
	void *payload;
};

static int each_of_round(void *payload, const rix_id *ids, size_t n)
{
	struct one_by_one *o = payload;
	int rc = 0;
	for (size_t i = 0; i < n && rc == 0; i++)
		rc = o->fn(o->payload, &ids[i]);
	return rc;
}

int rix_idset_foreach(const rix_idset *s, rix_idset_fn fn, void *payload)
{
	struct one_by_one o = { fn, payload };
	return rix__idset_foreach_round(s, each_of_round, &o);
}

void rix_idset_get_shape(rix_idset_shape *shape, const rix_idset *s)
{
	memset(shape, 0, sizeof(*shape));
	if (s == NULL || s->n == 0)
		return;
	shape->key_bits = s->k;
	shape->block_buckets = 1u << s->gshift;
	shape->tail_bytes = s->tail;
	shape->mid_bits = s->w;
	shape->blocks = s->nblocks;
	shape->overflow_blocks = s->ov_blocks;
	shape->longest_bucket = s->longest;
}
