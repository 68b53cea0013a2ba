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

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define IDSET_HW 1
#include <immintrin.h>
#else
#define IDSET_HW 0
#endif

/* ---- Bits ----------------------------------------------------------------------------------- */

/* Portable popcount (the library is built for baseline x86-64, which lacks POPCNT). */
static inline unsigned popcount64(uint64_t x)
{
	x = x - ((x >> 1) & 0x5555555555555555ull);
	x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
	x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0Full;
	return (unsigned)((x * 0x0101010101010101ull) >> 56);
}

/*
 * Position (0 .. 63) of the r-th set bit of x (r counted from 0; r < popcount(x)).
 * Byte-wise prefix popcounts s_i (bytes 0..i) in one multiply; the target byte is the number
 * of bytes with s_i <= r, found by the per-byte comparison (128 + r - s_i) >= 128, which never
 * borrows across bytes because 64 <= 128 + r - s_i <= 191; then at most 7 steps in the byte.
 */
static inline unsigned select64(uint64_t x, unsigned r)
{
	const uint64_t L8 = 0x0101010101010101ull, H8 = 0x8080808080808080ull;
	uint64_t s = x - ((x >> 1) & 0x5555555555555555ull);
	s = (s & 0x3333333333333333ull) + ((s >> 2) & 0x3333333333333333ull);
	s = ((s + (s >> 4)) & 0x0F0F0F0F0F0F0F0Full) * L8;
	uint64_t t = ((((uint64_t)r * L8) | H8) - s) & H8;
	unsigned byte_i = popcount64(t);
	unsigned before = byte_i ? (unsigned)(s >> (8 * (byte_i - 1))) & 0xFFu : 0;
	unsigned byte = (unsigned)(x >> (8 * byte_i)) & 0xFFu;
	for (unsigned rr = r - before; rr > 0; rr--)
		byte &= byte - 1;
	return 8 * byte_i + (unsigned)__builtin_ctz(byte);
}

/* ---- Lookup --------------------------------------------------------------------------------- */

static inline const uint64_t *block_of(const struct rix_idset *s, uint64_t b)
{
	return s->dir + (size_t)(b >> s->gshift) * BLOCK_WORDS;
}

/* Whether the tails a and b (len bytes, 24 <= len <= 32: tail = 32 - kb, kb <= 5) are equal. */
static inline bool tail_eq(const uint8_t *a, const uint8_t *b, unsigned len)
{
	uint64_t x[4], y[4];
	memcpy(&x[0], a, 8);
	memcpy(&y[0], b, 8);
	memcpy(&x[1], a + 8, 8);
	memcpy(&y[1], b + 8, 8);
	memcpy(&x[2], a + 16, 8);
	memcpy(&y[2], b + 16, 8);
	memcpy(&x[3], a + len - 8, 8);
	memcpy(&y[3], b + len - 8, 8);
	return ((x[0] ^ y[0]) | (x[1] ^ y[1]) | (x[2] ^ y[2]) | (x[3] ^ y[3])) == 0;
}

/* The run of bucket j of an overflowing block: its starts in ov (see the top comment). */
static inline void ov_range(const struct rix_idset *s, const uint64_t *blk, unsigned j, size_t *lo, size_t *hi)
{
	const uint32_t *o = s->ov + blk[1] + j;
	*lo = o[0];
	*hi = o[1];
}

/* Compares entry i with the key (mid bits km, tail bytes key): <0, 0, >0 as entry - key. */
static inline int entry_cmp(const struct rix_idset *s, size_t i, unsigned km, const uint8_t *key)
{
	unsigned m = mid_get(s, i);
	if (m != km)
		return m < km ? -1 : 1;
	return tail_cmp(tail_at(s, i), key, s->tail);
}

/* Whether the run [lo, hi) holds id, *at (if not NULL) set to its position when it does;
 * *steps (if not NULL) counts the entries compared. */
static inline bool run_find(const struct rix_idset *s, const uint8_t *id, size_t lo, size_t hi, size_t *steps,
			    size_t *at)
{
	unsigned km = mid_key(s, id);
	const uint8_t *key = id + s->kb;
	if (hi - lo <= LINEAR_MAX) {
		/* A short run is scanned for equality (the mid bits first, then the tail as four
		 * 8-byte words: no byte swaps, no order, no early stop to predict). */
		for (size_t i = lo; i < hi; i++) {
			if (steps)
				++*steps;
			if (mid_get(s, i) == km && tail_eq(tail_at(s, i), key, s->tail)) {
				if (at)
					*at = i;
				return true;
			}
		}
		return false;
	}
	while (lo < hi) {
		size_t m = lo + (hi - lo) / 2;
		if (steps)
			++*steps;
		int c = entry_cmp(s, m, km, key);
		if (c == 0) {
			if (at)
				*at = m;
			return true;
		}
		if (c < 0)
			lo = m + 1;
		else
			hi = m;
	}
	return false;
}

/* The portable instance, and on x86-64 the one with POPCNT and BMI2 (PDEP for select). */
#define IDSET_FN(name) name##_portable
#define IDSET_ATTR
#define IDSET_POPCOUNT(x) popcount64(x)
#define IDSET_SELECT(x, r) select64((x), (r))
#include "idset_lookup.h"
#undef IDSET_FN
#undef IDSET_ATTR
#undef IDSET_POPCOUNT
#undef IDSET_SELECT

#if IDSET_HW
#define IDSET_FN(name) name##_hw
#define IDSET_ATTR __attribute__((target("popcnt,bmi,bmi2")))
#define IDSET_POPCOUNT(x) __builtin_popcountll(x)
#define IDSET_SELECT(x, r) __builtin_ctzll(__builtin_ia32_pdep_di(1ull << (r), (x)))
#include "idset_lookup.h"
#undef IDSET_FN
#undef IDSET_ATTR
#undef IDSET_POPCOUNT
#undef IDSET_SELECT

#define IDSET_FN(name) name##_avx512
#define IDSET_ATTR __attribute__((target("popcnt,bmi,bmi2,avx512f,avx512vpopcntdq")))
#define IDSET_POPCOUNT(x) __builtin_popcountll(x)
#define IDSET_SELECT(x, r) __builtin_ctzll(__builtin_ia32_pdep_di(1ull << (r), (x)))
#define IDSET_AVX512 1
#include "idset_lookup.h"
#undef IDSET_FN
#undef IDSET_ATTR
#undef IDSET_POPCOUNT
#undef IDSET_SELECT
#undef IDSET_AVX512
#endif

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

/* Calls the set's instance of a lookup (x86-64: as its level says). */
#if IDSET_HW
#define DISPATCH(s, name, ...)                                                \
	((s)->level == LEVEL_AVX512 ? name##_avx512(__VA_ARGS__)              \
	 : (s)->level == LEVEL_HW   ? name##_hw(__VA_ARGS__)                  \
				    : name##_portable(__VA_ARGS__))
#else
#define DISPATCH(s, name, ...) name##_portable(__VA_ARGS__)
#endif

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
	return DISPATCH(s, rank_many, ranks, s, ids, n, NULL, 0);
}

size_t rix__idset_rank_many_sat(size_t *ranks, const rix_idset *s, const rix_id *ids, size_t n, const uint8_t *sat,
				unsigned sat_bits)
{
	if (s == NULL || s->n == 0) {
		for (size_t i = 0; i < n; i++)
			ranks[i] = RIX_IDSET_NO_RANK;
		return 0;
	}
	return DISPATCH(s, rank_many, ranks, s, ids, n, sat, sat_bits);
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
	unsigned mid_shift = 64 - 8 * s->kb; /* kb <= 4: 32 or more; kb 0 has no mid bits */
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
