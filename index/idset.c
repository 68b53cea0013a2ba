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
 * Building (rix_idset_build_owned): sort the caller's array in place (MSD radix sort on the
 * bytes, insertion sort below 48 IDs; from 64Ki IDs, the 256 sub-sorts after the first level
 * run on one worker per CPU); pass 1 counts the distinct IDs (and checks the order);
 * the shape is chosen; pass 2 counts the blocks that will overflow and the longest run. Up to
 * here nothing is written but the sort, so a failure leaves the caller its IDs. Then the set
 * is built inside the array's own allocation, so that the build never holds more than the
 * array's 32 bytes an ID: phase A packs each distinct ID's bytes 1..31 into 31-byte records
 * at the front (record j at 31 j, never past ID j being read; byte 0 is kept as 256 counts,
 * the IDs being sorted), which frees about 1 byte an ID at the end, room for the directory,
 * mid and ov arrays (0.3-0.9 bytes an ID for n >= 1M; a small set's array is grown first,
 * before phase A, when they don't fit); phase B walks the records, writing the tails at the
 * front (tail j at j * tail <= 31 j) and the directory and mid bits into that room; the
 * directory and the rest then move down behind the tails and the block is shrunk. Once phase
 * A begins nothing can fail (a failed shrink keeps the larger block).
 */
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "rix/alloc.h"
#include "rix/error.h"
#include "rix/idset.h"
#include "hash.h"
#include "index_internal.h"
#include "idset_cmp.h"
#include "../common/pool.h"

#define BLOCK_WORDS 8u
#define CODE_BITS 480u       /* unary code bits of a block: bits 32 .. 511 */
#define CODE_START 32u       /* the code's first bit within the block */
#define OV_FLAG 0x80000000u  /* in word 0: the block is held as offsets in ov */
#define BASE_MASK 0x7FFFFFFFu
#define MAX_GSHIFT 8u        /* G <= 256 */
#define LINEAR_MAX 8u        /* runs up to this long are scanned, longer ones binary-searched */
#define PIPE_D 16u           /* keys between the stages of the batched lookups */
#define PIPE_RING 64u        /* their ring of keys in flight (> 2 PIPE_D) */

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define IDSET_HW 1
#include <immintrin.h>
#else
#define IDSET_HW 0
#endif

/* Which instance of the lookups a set uses (struct rix_idset's level). */
enum { LEVEL_PORTABLE, LEVEL_HW, LEVEL_AVX512 };

struct rix_idset {
	size_t n;          /* distinct IDs */
	unsigned k;        /* bucket bits (1 .. 32) */
	unsigned gshift;   /* G = 1 << gshift buckets a block */
	unsigned kb;       /* ceil(k / 8): bytes 0 .. kb-1 hold bucket and mid bits */
	unsigned tail;     /* 32 - kb: bytes of each ID in tails */
	unsigned w;        /* 8 kb - k: mid bits of each ID (0 .. 7) */
	/* One allocation, tails_size bytes, holds everything:
	 *   [tails: n * tail][pad to 8][mid][pad to 64 in memory][dir][ov][slack < 64] */
	uint8_t *tails;    /* n * tail bytes: ID i's at i * tail; the block's start */
	size_t tails_size; /* bytes of the block */
	uint8_t *mid;      /* n * w bits + 8 bytes of padding for 64-bit loads; NULL if w = 0 */
	uint64_t *dir;     /* nblocks * 8 words, 64-byte aligned */
	size_t nblocks;
	uint32_t *ov;      /* (G + 1) starts per overflowing block; NULL if none */
	size_t ov_blocks;
	size_t longest;    /* longest run (shape statistics) */
	int level;         /* the lookups' instance: LEVEL_HW with POPCNT and BMI2, LEVEL_AVX512
			    * with AVX-512 VPOPCNTQ too, else LEVEL_PORTABLE */
};

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

static inline uint64_t bucket_of(const uint8_t *id, unsigned k)
{
	uint64_t x;
	memcpy(&x, id, 8);
#if __BYTE_ORDER__ != __ORDER_BIG_ENDIAN__
	x = __builtin_bswap64(x);
#endif
	return k ? x >> (64 - k) : 0;
}

/* The key's mid bits: the low w (< 16) bits of its bytes kb - 2, kb - 1. */
static inline unsigned mid_key(const struct rix_idset *s, const uint8_t *id)
{
	if (s->w == 0)
		return 0;
	unsigned x = s->kb >= 2 ? (unsigned)id[s->kb - 2] << 8 | id[s->kb - 1] : id[s->kb - 1];
	return x & ((1u << s->w) - 1);
}

static inline unsigned mid_get(const struct rix_idset *s, size_t i)
{
	if (s->w == 0)
		return 0;
	size_t bit = i * s->w;
	return (unsigned)(load64_le(s->mid + (bit >> 3)) >> (bit & 7)) & ((1u << s->w) - 1);
}

static inline const uint8_t *tail_at(const struct rix_idset *s, size_t i)
{
	return s->tails + i * s->tail;
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

/* The best instance of the lookups this processor runs. */
static int cpu_level(void)
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
		s->level = on ? LEVEL_PORTABLE : cpu_level();
}

int rix__idset_use_level(rix_idset *s, int level)
{
	if (s == NULL || level < LEVEL_PORTABLE || level > cpu_level())
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

/* Calls fn for IDs [lo, hi) of bucket b. */
static int emit_run(const struct rix_idset *s, uint64_t b, size_t lo, size_t hi, rix_idset_fn fn, void *payload)
{
	rix_id id;
	memset(&id, 0, sizeof(id));
	if (s->k > 0) {
		uint64_t top = b << (64 - s->k);
		for (unsigned i = 0; i < s->kb; i++)
			id.b[i] = (uint8_t)(top >> (56 - 8 * i));
	}
	/* The bucket's bits of the last two bytes before the tail, the mid bits ORed in. */
	unsigned two = s->kb >= 2 ? (unsigned)id.b[s->kb - 2] << 8 | id.b[s->kb - 1] : s->kb ? id.b[s->kb - 1] : 0;
	for (size_t i = lo; i < hi; i++) {
		unsigned m = two | mid_get(s, i);
		if (s->kb >= 2)
			id.b[s->kb - 2] = (uint8_t)(m >> 8);
		if (s->kb)
			id.b[s->kb - 1] = (uint8_t)m;
		memcpy(id.b + s->kb, tail_at(s, i), s->tail);
		int rc = fn(payload, &id);
		if (rc != 0)
			return rc;
	}
	return 0;
}

int rix_idset_foreach(const rix_idset *s, rix_idset_fn fn, void *payload)
{
	if (s == NULL || s->n == 0)
		return 0;
	size_t g = (size_t)1 << s->gshift;
	for (size_t blkno = 0; blkno < s->nblocks; blkno++) {
		const uint64_t *blk = s->dir + blkno * BLOCK_WORDS;
		uint64_t b0 = (uint64_t)blkno << s->gshift;
		size_t at = (size_t)(blk[0] & BASE_MASK);
		if (blk[0] & OV_FLAG) {
			const uint32_t *o = s->ov + blk[1];
			for (size_t j = 0; j < g; j++) {
				int rc = emit_run(s, b0 + j, o[j], o[j + 1], fn, payload);
				if (rc != 0)
					return rc;
			}
			continue;
		}
		unsigned q = CODE_START;
		for (size_t j = 0; j < g; j++) {
			size_t c = 0;
			while ((blk[q >> 6] >> (q & 63)) & 1) {
				c++;
				q++;
			}
			q++; /* the bucket's 0 */
			if (c > 0) {
				int rc = emit_run(s, b0 + j, at, at + c, fn, payload);
				if (rc != 0)
					return rc;
				at += c;
			}
		}
	}
	return 0;
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

/* ---- Building ------------------------------------------------------------------------------- */

/* Picks k and G (see the top comment): the least bytes, with blocks that rarely overflow. */
static void choose_shape(size_t n, unsigned *k_out, unsigned *gshift_out)
{
	unsigned k0 = 63u - (unsigned)__builtin_clzll((unsigned long long)n);
	double best = -1;
	*k_out = k0;
	*gshift_out = 0;
	/* k >= 1, so that kb >= 1 and a tail is at most 31 bytes (the build relies on it). */
	for (unsigned k = k0 > 2 ? k0 - 1 : 1; k <= k0 + 1 && k <= 32; k++) {
		unsigned kb = (k + 7) / 8, w = 8 * kb - k;
		double lambda = (double)n / (double)((uint64_t)1 << k);
		for (unsigned gs = 0; gs <= MAX_GSHIFT && gs <= k; gs++) {
			double g = (double)(1u << gs), mu = g * lambda;
			double slack = (double)CODE_BITS - g - mu - 4;
			if (slack < 0 || slack * slack < 16 * mu) /* fill + 4 sd over the code */
				continue;
			double blocks = (double)((uint64_t)1 << (k - gs));
			double cost = (double)n * (8.0 * (32 - kb) + w) + blocks * 512;
			if (best < 0 || cost < best) {
				best = cost;
				*k_out = k;
				*gshift_out = gs;
			}
		}
	}
}

/* Writes a run of c ones into the block from bit q. */
static void set_ones(uint64_t *blk, unsigned q, size_t c)
{
	while (c > 0) {
		unsigned bit = q & 63;
		size_t take = 64 - bit < c ? 64 - bit : c;
		uint64_t mask = take == 64 ? ~0ull : ((1ull << take) - 1) << bit;
		blk[q >> 6] |= mask;
		q += (unsigned)take;
		c -= take;
	}
}

struct builder {
	struct rix_idset *s;
	uint32_t cnt[1u << MAX_GSHIFT]; /* IDs per bucket of the block being filled */
	size_t blkno;                   /* that block */
	size_t base;                    /* IDs before it */
	size_t total;                   /* IDs in it so far */
	size_t ov_at;                   /* u32s of ov used */
};

/* Writes block bd->blkno from its counts and moves to the next. */
static void finish_block(struct builder *bd)
{
	struct rix_idset *s = bd->s;
	size_t g = (size_t)1 << s->gshift;
	uint64_t *blk = s->dir + bd->blkno * BLOCK_WORDS;
	if (g + bd->total <= CODE_BITS) {
		blk[0] = (uint64_t)bd->base;
		unsigned q = CODE_START;
		for (size_t j = 0; j < g; j++) {
			set_ones(blk, q, bd->cnt[j]);
			q += bd->cnt[j] + 1;
		}
	} else {
		blk[0] = (uint64_t)bd->base | OV_FLAG;
		blk[1] = bd->ov_at;
		uint32_t at = (uint32_t)bd->base;
		for (size_t j = 0; j < g; j++) {
			s->ov[bd->ov_at++] = at;
			at += bd->cnt[j];
		}
		s->ov[bd->ov_at++] = at;
	}
	memset(bd->cnt, 0, g * sizeof(bd->cnt[0]));
	bd->base += bd->total;
	bd->total = 0;
	bd->blkno++;
}


static inline size_t align_up(size_t x, size_t a)
{
	return (x + a - 1) & ~(a - 1);
}

/* Offset of the directory in a block at base whose mid array ends at offset mid_end: the
 * first offset from mid_end that is 64-byte aligned in memory. */
static inline size_t dir_offset(const uint8_t *base, size_t mid_end)
{
	return (size_t)(align_up((uintptr_t)base + mid_end, 64) - (uintptr_t)base);
}

int rix_idset_build_owned(rix_idset **out, rix_id *ids, size_t n, unsigned flags)
{
	*out = NULL;
	if ((flags & ~(unsigned)RIX_IDSET_SORTED) != 0)
		return rix_error_set(RIX_EINVAL, "id set: unknown flags 0x%x", flags);
	return rix__idset_build_owned(out, ids, n, flags, 0);
}

/* Pass 2 over the distinct IDs' buckets in ascending order: the blocks that will overflow, the
 * longest run (s->ov_blocks, s->longest). */
struct shape_scan {
	struct rix_idset *s;
	size_t blk_total, run;
	uint64_t cur_blk, cur_b;
};

static inline void scan_add(struct shape_scan *sc, uint64_t b)
{
	struct rix_idset *s = sc->s;
	size_t g = (size_t)1 << s->gshift;
	if ((b >> s->gshift) != sc->cur_blk) {
		s->ov_blocks += g + sc->blk_total > CODE_BITS;
		sc->cur_blk = b >> s->gshift;
		sc->blk_total = 0;
	}
	sc->blk_total++;
	if (b != sc->cur_b) {
		sc->cur_b = b;
		sc->run = 0;
	}
	if (++sc->run > s->longest)
		s->longest = sc->run;
}

static inline void scan_end(struct shape_scan *sc)
{
	sc->s->ov_blocks += ((size_t)1 << sc->s->gshift) + sc->blk_total > CODE_BITS;
}

/* The shape of a set of nd distinct IDs (k, G and the fields they fix); mid8: at least 8 mid
 * bits (RIX__IDSET_MID8). */
static void set_shape(struct rix_idset *s, size_t nd, bool mid8)
{
	choose_shape(nd, &s->k, &s->gshift);
	s->n = nd;
	s->kb = (s->k + (mid8 ? 15 : 7)) / 8;
	s->tail = RIX_ID_SIZE - s->kb;
	s->w = 8 * s->kb - s->k;
	s->nblocks = (size_t)1 << (s->k - s->gshift);
	s->level = cpu_level();
}

/* Bytes the block needs while phase B runs: the 31-byte records, then mid, directory, ov. */
static size_t build_need(const struct rix_idset *s)
{
	size_t g = (size_t)1 << s->gshift;
	size_t rec = s->n * (RIX_ID_SIZE - 1);
	size_t mid = s->w ? (s->n * s->w + 7) / 8 + 8 : 0;
	return align_up(rec, 8) + mid + 63 + s->nblocks * 64 + s->ov_blocks * (g + 1) * sizeof(uint32_t);
}

/*
 * Phase B and the end of a build: base[0, have) holds s->n distinct IDs in ascending order as
 * 31-byte records of their bytes 1..31 (record j at 31 j), cnt0[c] of them with byte 0 equal
 * to c, and have >= build_need(s). Writes the tails at the front and the directory and mid bits
 * into the room behind the records, moves them down behind the tails and shrinks the block.
 * Cannot fail (a failed shrink keeps the larger block).
 */
static void build_from_records(struct rix_idset *s, uint8_t *base, size_t have, const size_t cnt0[256])
{
	size_t nd = s->n, g = (size_t)1 << s->gshift;
	size_t rec = nd * (RIX_ID_SIZE - 1);
	size_t tails = nd * s->tail;
	size_t mid = s->w ? (nd * s->w + 7) / 8 + 8 : 0;
	size_t dir = s->nblocks * 64;
	size_t ov = s->ov_blocks * (g + 1) * sizeof(uint32_t);
	size_t mid_at = align_up(rec, 8);
	size_t dir_at = dir_offset(base, mid_at + mid);
	size_t ov_at = dir_at + dir;
	memset(base + mid_at, 0, ov_at - mid_at);
	s->tails = base;
	s->mid = s->w ? base + mid_at : NULL;
	s->dir = (uint64_t *)(void *)(base + dir_at);
	s->ov = s->ov_blocks ? (uint32_t *)(void *)(base + ov_at) : NULL;

	/* Phase B: tails (tail j at j * tail <= 31 j: never past record j), mid bits, directory. */
	struct builder build, *bd = &build;
	memset(bd, 0, sizeof(*bd));
	bd->s = s;
	rix_id id;
	size_t j = 0;
	for (unsigned c = 0; c < 256; c++) {
		for (size_t e = 0; e < cnt0[c]; e++, j++) {
			id.b[0] = (uint8_t)c;
			memcpy(id.b + 1, base + j * (RIX_ID_SIZE - 1), RIX_ID_SIZE - 1);
			uint64_t b = bucket_of(id.b, s->k);
			while ((b >> s->gshift) != bd->blkno)
				finish_block(bd);
			bd->cnt[b & (g - 1)]++;
			bd->total++;
			if (s->w) {
				size_t bit = j * s->w;
				uint8_t *p = s->mid + (bit >> 3);
				store64_le(p, load64_le(p) | ((uint64_t)mid_key(s, id.b) << (bit & 7)));
			}
			memmove(base + j * s->tail, id.b + s->kb, s->tail);
		}
	}
	while (bd->blkno < s->nblocks)
		finish_block(bd);

	/* Down behind the tails: mid, then directory and ov (each to a lower offset). */
	size_t mid_to = align_up(tails, 8);
	if (mid)
		memmove(base + mid_to, base + mid_at, mid);
	size_t dir_to = dir_offset(base, mid_to + mid);
	memmove(base + dir_to, base + dir_at, dir + ov);
	size_t final = mid_to + mid + 63 + dir + ov; /* room to realign if the block moves */
	uint8_t *shrunk = final < have ? rix_realloc(base, final) : NULL;
	if (shrunk != NULL) {
		size_t again = dir_offset(shrunk, mid_to + mid);
		if (again != dir_to)
			memmove(shrunk + again, shrunk + dir_to, dir + ov);
		base = shrunk;
		dir_to = again;
		have = final;
	}
	s->tails = base;
	s->tails_size = have;
	s->mid = mid ? base + mid_to : NULL;
	s->dir = (uint64_t *)(void *)(base + dir_to);
	s->ov = s->ov_blocks ? (uint32_t *)(void *)(base + dir_to + dir) : NULL;
}

int rix__idset_build_owned(rix_idset **out, rix_id *ids, size_t n, unsigned flags, unsigned workers)
{
	return rix__idset_build_owned_in(out, ids, n, n * sizeof(rix_id), flags, workers);
}

int rix__idset_build_owned_in(rix_idset **out, rix_id *ids, size_t n, size_t have, unsigned flags,
			      unsigned workers)
{
	*out = NULL;
	if ((flags & ~(unsigned)(RIX_IDSET_SORTED | RIX__IDSET_MID8)) != 0)
		return rix_error_set(RIX_EINVAL, "id set: unknown flags 0x%x", flags);
	if (n > 0 && ids == NULL)
		return rix_error_set(RIX_EINVAL, "id set: no array for %zu IDs", n);
	struct rix_idset *s = rix_calloc(1, sizeof(*s));
	if (s == NULL)
		return rix_error_set(RIX_ENOMEM, "id set: out of memory");
	if (!(flags & RIX_IDSET_SORTED))
		rix__idset_sort(ids, n, workers);

	/* Pass 1: distinct IDs; the order. */
	size_t nd = 0;
	for (size_t i = 0; i < n; i++) {
		if (i > 0) {
			int c = tail_cmp(ids[i - 1].b, ids[i].b, RIX_ID_SIZE);
			if (c > 0) {
				rix_free(s);
				return rix_error_set(RIX_EINVAL, "id set: IDs said to be sorted are not (at %zu)", i);
			}
			if (c == 0)
				continue;
		}
		nd++;
	}
	if (nd > RIX_IDSET_MAX_IDS) {
		rix_free(s);
		return rix_error_set(RIX_ELIMIT, "id set: %zu IDs are over the limit of %u", nd, RIX_IDSET_MAX_IDS);
	}
	if (nd == 0) {
		rix_free(ids);
		*out = s;
		return 0;
	}
	set_shape(s, nd, (flags & RIX__IDSET_MID8) != 0);

	/* Pass 2: the blocks that overflow, the longest run. */
	struct shape_scan sc = { .s = s, .cur_b = UINT64_MAX };
	for (size_t i = 0; i < n; i++)
		if (rix__id_is_new(ids, i))
			scan_add(&sc, bucket_of(ids[i].b, s->k));
	scan_end(&sc);

	/*
	 * The whole set lives in the array's own block. Phase A packs each distinct ID's bytes
	 * 1..31 into records of 31 bytes ([0, rec)), keeping counts of byte 0; the directory,
	 * mid and ov arrays then fit in the room that frees at the end (~1 byte an ID; grown
	 * first, before anything is overwritten, when they don't: small sets). Phase B
	 * (build_from_records) writes the tails at the front and the rest into that room; the rest
	 * then moves down behind the tails and the block is shrunk. Nothing can fail once phase A
	 * has begun.
	 */
	size_t need = build_need(s);
	if (have < need) {
		rix_id *grown = rix_realloc(ids, need);
		if (grown == NULL) {
			rix_free(s);
			return rix_error_set(RIX_ENOMEM, "id set: out of memory for %zu IDs", nd);
		}
		ids = grown;
		have = need;
	}
	uint8_t *base = (uint8_t *)ids;

	/* Phase A: records of bytes 1..31 (record j at 31 j <= 32 i: never past ID i). */
	size_t cnt0[256];
	memset(cnt0, 0, sizeof(cnt0));
	rix_id id;
	size_t j = 0;
	for (size_t i = 0; i < n; i++) {
		if (i > 0 && rix__id_eq(&id, &ids[i]))
			continue;
		id = ids[i];
		cnt0[id.b[0]]++;
		memmove(base + j * (RIX_ID_SIZE - 1), id.b + 1, RIX_ID_SIZE - 1);
		j++;
	}
	build_from_records(s, base, have, cnt0);
	*out = s;
	return 0;
}

rix_id *rix_idset_alloc_ids(size_t n)
{
	if (n == 0 || n > SIZE_MAX / sizeof(rix_id))
		return NULL;
	rix_id *a = rix_malloc(n * sizeof(*a));
	if (a != NULL)
		rix__advise_huge(a, n * sizeof(*a));
	return a;
}

int rix_idset_build(rix_idset **out, const rix_id *ids, size_t n)
{
	*out = NULL;
	rix_id *copy = NULL;
	if (n > 0) {
		copy = rix_idset_alloc_ids(n);
		if (copy == NULL)
			return rix_error_set(RIX_ENOMEM, "id set: out of memory for a copy of %zu IDs", n);
		memcpy(copy, ids, n * sizeof(*copy));
	}
	int rc = rix_idset_build_owned(out, copy, n, 0);
	if (rc != 0)
		rix_free(copy);
	return rc;
}

/* ---- Image (the ranked table's, for the master index's cache) ------------------------------ */

enum { D_N, D_K, D_GSHIFT, D_KB, D_OVB, D_LONGEST, D_MID, D_DIR, D_OV, D_SIZE };
_Static_assert(D_SIZE + 1 == RIX__IDSET_DESC_WORDS, "the descriptor's words");

void rix__idset_export(const rix_idset *s, uint64_t desc[RIX__IDSET_DESC_WORDS], const void **block, size_t *size)
{
	memset(desc, 0, RIX__IDSET_DESC_WORDS * sizeof(desc[0]));
	*block = NULL;
	*size = 0;
	if (s == NULL || s->n == 0)
		return;
	desc[D_N] = s->n;
	desc[D_K] = s->k;
	desc[D_GSHIFT] = s->gshift;
	desc[D_KB] = s->kb;
	desc[D_OVB] = s->ov_blocks;
	desc[D_LONGEST] = s->longest;
	desc[D_MID] = s->mid ? (uint64_t)(s->mid - s->tails) : 0;
	desc[D_DIR] = (uint64_t)((const uint8_t *)s->dir - s->tails);
	desc[D_OV] = s->ov ? (uint64_t)((const uint8_t *)s->ov - s->tails) : 0;
	desc[D_SIZE] = s->tails_size;
	*block = s->tails;
	*size = s->tails_size;
}

/*
 * Whether the directory sends every bucket to a run inside [0, n), runs in order: each block's
 * base the IDs before it, its unary code holding its G zeros (or its ov starts in order), the
 * last run ending at n. What bucket_range then computes stays inside the arrays.
 */
static bool dir_valid(const struct rix_idset *s)
{
	size_t g = (size_t)1 << s->gshift, run = 0, ov_words = s->ov_blocks * (g + 1);
	for (size_t blkno = 0; blkno < s->nblocks; blkno++) {
		const uint64_t *blk = s->dir + blkno * BLOCK_WORDS;
		if ((size_t)(blk[0] & BASE_MASK) != run)
			return false;
		if (blk[0] & OV_FLAG) {
			if (blk[1] > ov_words || ov_words - blk[1] < g + 1)
				return false;
			const uint32_t *o = s->ov + blk[1];
			if (o[0] != run)
				return false;
			for (size_t j = 0; j < g; j++)
				if (o[j + 1] < o[j])
					return false;
			run = o[g];
		} else {
			/* the G-th zero of the code, and the ones before it */
			size_t zeros = 0, ones = 0;
			for (unsigned bit = CODE_START; bit < 512 && zeros < g; bit++) {
				if ((blk[bit / 64] >> (bit % 64)) & 1)
					ones++;
				else
					zeros++;
			}
			if (zeros < g)
				return false;
			run += ones;
		}
		if (run > s->n)
			return false;
	}
	return run == s->n;
}

int rix__idset_import(rix_idset **out, const uint64_t desc[RIX__IDSET_DESC_WORDS], void *block, size_t size)
{
	*out = NULL;
	struct rix_idset *s = rix_calloc(1, sizeof(*s));
	if (s == NULL) {
		rix_free(block);
		return rix_error_set(RIX_ENOMEM, "id set: out of memory");
	}
	if (desc[D_N] == 0) {
		rix_free(block);
		*out = s;
		return 0;
	}
	uint64_t n = desc[D_N], k = desc[D_K], gs = desc[D_GSHIFT], kb = desc[D_KB];
	bool ok = n <= RIX_IDSET_MAX_IDS && k >= 1 && k <= 32 && gs <= MAX_GSHIFT && gs <= k &&
		  (kb == (k + 7) / 8 || kb == (k + 15) / 8) && desc[D_SIZE] == size && block != NULL;
	if (ok) {
		s->n = (size_t)n;
		s->k = (unsigned)k;
		s->gshift = (unsigned)gs;
		s->kb = (unsigned)kb;
		s->tail = RIX_ID_SIZE - s->kb;
		s->w = 8 * s->kb - s->k;
		s->nblocks = (size_t)1 << (s->k - s->gshift);
		s->ov_blocks = (size_t)desc[D_OVB];
		s->longest = (size_t)desc[D_LONGEST];
		s->level = cpu_level();
		size_t g = (size_t)1 << s->gshift;
		uint64_t mid_bytes = s->w ? ((uint64_t)n * s->w + 7) / 8 + 8 : 0;
		uint64_t dir = desc[D_DIR], ov = desc[D_OV];
		ok = (uint64_t)n * s->tail <= (s->w ? desc[D_MID] : dir) && (!s->w || desc[D_MID] + mid_bytes <= dir) &&
		     dir % 8 == 0 && s->ov_blocks <= s->nblocks && dir + (uint64_t)s->nblocks * 64 <= size &&
		     (s->ov_blocks == 0 ||
		      (ov % 4 == 0 && ov >= dir + (uint64_t)s->nblocks * 64 &&
		       ov + (uint64_t)s->ov_blocks * (g + 1) * sizeof(uint32_t) <= size));
		if (ok) {
			uint8_t *base = block;
			s->tails = base;
			s->tails_size = size;
			s->mid = s->w ? base + desc[D_MID] : NULL;
			s->dir = (uint64_t *)(void *)(base + dir);
			s->ov = s->ov_blocks ? (uint32_t *)(void *)(base + ov) : NULL;
			ok = dir_valid(s);
		}
	}
	if (!ok) {
		rix_free(block);
		rix_free(s);
		return rix_error_set(RIX_ECORRUPT, "id set: an image's set is not well formed");
	}
	*out = s;
	return 0;
}

/* ---- Building from records (for idset_collect.c) -------------------------------------------- */

int rix__idset_from_records(rix_idset **out, uint8_t *base, size_t have, const size_t cnt0[256], size_t nd)
{
	*out = NULL;
	struct rix_idset *s = rix_calloc(1, sizeof(*s));
	if (s == NULL) {
		rix_free(base);
		return rix_error_set(RIX_ENOMEM, "id set: out of memory");
	}
	if (nd == 0) {
		rix_free(base);
		*out = s;
		return 0;
	}
	if (nd > RIX_IDSET_MAX_IDS) {
		rix_free(base);
		rix_free(s);
		return rix_error_set(RIX_ELIMIT, "id set: %zu IDs are over the limit of %u", nd, RIX_IDSET_MAX_IDS);
	}
	set_shape(s, nd, false);
	struct shape_scan sc = { .s = s, .cur_b = UINT64_MAX };
	uint8_t head[8];
	size_t r = 0;
	for (unsigned i = 0; i < 256; i++) {
		head[0] = (uint8_t)i;
		for (size_t e = 0; e < cnt0[i]; e++, r++) {
			memcpy(head + 1, base + r * (RIX_ID_SIZE - 1), 7);
			scan_add(&sc, bucket_of(head, s->k));
		}
	}
	scan_end(&sc);
	size_t need = build_need(s);
	if (have < need) { /* a small set: its directory needs more room than the IDs leave */
		uint8_t *grown = rix_realloc(base, need);
		if (grown == NULL) {
			rix_free(base);
			rix_free(s);
			return rix_error_set(RIX_ENOMEM, "id set: out of memory for %zu IDs", nd);
		}
		base = grown;
		have = need;
	}
	build_from_records(s, base, have, cnt0);
	*out = s;
	return 0;
}
