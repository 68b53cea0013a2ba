/*
 * bench/bench_twoline.c — Limit/TwoLine/{known,unknown}: the two-line layout issue 13 names as
 * what the probes allow a known lookup ("bucket word with enough filter or fingerprint bits to go
 * straight to its entry, then the entry"), built of RankedLookup/N=10M's entries and looked up
 * one ID at a time by a lean loop, so that each single lookup of the index can be set beside the
 * best a layout of that shape does on the same machine (bench/RESULTS.md). A yardstick, not an
 * index: no filter, no overflow handling (the build checks that its fixed keys need none), no
 * second locations, no checks beyond the answer's.
 *
 *   line: 64 bytes for 32 consecutive buckets (2^24 buckets: the ID's top 24 bits)
 *   +---------+----------------------------------+---------------------------------------+
 *   | base:32 | unary code, 96 bits: per bucket, | the IDs' byte 3 (their mid bits), in   |
 *   |         | a 1 an ID, then a 0              | order, 48 at most                      |
 *   +---------+----------------------------------+---------------------------------------+
 *   record: the ID's bytes 4..31, then its pack number, offset and length (u32 each): 40 bytes
 *
 * A lookup reads its line (33.6 MB of them at 10M: 3.36 bytes an ID), finds its bucket's run by
 * two selects in the code, the run's IDs with its byte 3 by one compare of the line's bytes,
 * and compares their records' tails: one line, then the record; a known ID's pack ID after, as
 * RankedLookup's loop reads it. 43.4 bytes an ID with the records (the ranked table: 42.4 with
 * its filter). Needs BMI2 and AVX2 (PDEP, one 32-byte compare); where the CPU lacks them, it
 * fails with a message.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "bench.h"

#define TL_N ((size_t)10000000)
#define TL_K 24u                       /* bucket bits */
#define TL_LINES ((size_t)1 << (TL_K - 5)) /* 32 buckets a line */
#define TL_MIDS 48u                    /* IDs a line holds at most */
#define TL_REC 40u

static uint8_t *tl_lines;   /* TL_LINES * 64 */
static uint8_t *tl_recs;    /* TL_N * TL_REC + 16 */
static const rix_id *tl_packs;
static volatile uint64_t tl_sink;

static inline uint64_t tl_be64(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return __builtin_bswap64(v);
}

static void *tl_alloc(size_t n)
{
	size_t huge = (size_t)2 << 20;
	void *p = aligned_alloc(huge, (n + huge - 1) / huge * huge);
#ifdef MADV_HUGEPAGE
	if (p != NULL)
		(void)madvise(p, n, MADV_HUGEPAGE); /* as the tables ask for theirs */
#endif
	return p;
}

static const rix_id *tl_ids; /* the entries, for tl_cmp */

static int tl_cmp(const void *a, const void *b)
{
	return memcmp(&tl_ids[*(const uint32_t *)a], &tl_ids[*(const uint32_t *)b], sizeof(rix_id));
}

/* Fills the lines and records from the entries. @return 0, or -1 if a line overflows. */
static int tl_build(void)
{
	const rix_id *ids = tl_ids = gen_entry_ids(TL_N);
	const rix_loc *locs = gen_entry_locs(TL_N);
	uint32_t *order = malloc(TL_N * sizeof(*order));
	if (order == NULL)
		return -1;
	for (size_t i = 0; i < TL_N; i++)
		order[i] = (uint32_t)i;
	qsort(order, TL_N, sizeof(*order), tl_cmp);
	memset(tl_lines, 0, TL_LINES * 64);
	size_t r = 0;
	for (size_t l = 0; l < TL_LINES; l++) {
		uint8_t *ln = tl_lines + l * 64;
		uint32_t base = (uint32_t)r;
		memcpy(ln, &base, 4);
		unsigned bit = 0, n = 0;
		for (unsigned j = 0; j < 32; j++) {
			const uint64_t b = l * 32 + j;
			for (; r < TL_N && tl_be64(ids[order[r]].b) >> (64 - TL_K) == b; r++, n++, bit++) {
				if (n == TL_MIDS) { /* (then 32 + n <= 80 code bits: they fit) */
					free(order);
					return -1;
				}
				const rix_id *id = &ids[order[r]];
				const rix_loc *lc = &locs[order[r]];
				ln[4 + bit / 8] |= (uint8_t)(1u << (bit % 8));
				ln[16 + n] = id->b[3];
				uint8_t *rec = tl_recs + r * TL_REC;
				memcpy(rec, id->b + 4, 28);
				memcpy(rec + 28, &lc->pack, 4);
				memcpy(rec + 32, &lc->offset, 4);
				memcpy(rec + 36, &lc->length, 4);
			}
			bit++; /* the bucket's 0 */
		}
	}
	free(order);
	return 0;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define TL_TARGET __attribute__((target("bmi,bmi2,popcnt,avx2")))

static inline uint64_t tl_le64(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return v;
}

/* The position of the j-th (from 0) zero of the 96-bit code z0 (64 bits), z1 (32), zeros as ones. */
TL_TARGET static inline unsigned tl_zero(uint64_t z0, uint64_t z1, unsigned c0, unsigned j)
{
	return j < c0 ? (unsigned)__builtin_ctzll(_pdep_u64(1ull << j, z0))
		      : 64 + (unsigned)__builtin_ctzll(_pdep_u64(1ull << (j - c0), z1));
}

/* Whether id is in the layout; *pack and *offset its location's when it is. */
TL_TARGET __attribute__((noinline)) static bool tl_find(const rix_id *id, uint32_t *pack, uint32_t *offset)
{
	const uint64_t top = tl_be64(id->b);
	const uint32_t bucket = (uint32_t)(top >> (64 - TL_K));
	const uint8_t *ln = tl_lines + (size_t)(bucket >> 5) * 64;
	const unsigned j = bucket & 31;
	uint32_t base, c1;
	memcpy(&base, ln, 4);
	memcpy(&c1, ln + 12, 4);
	const uint64_t z0 = ~tl_le64(ln + 4), z1 = ~(uint64_t)c1; /* bits past the code read as zeros: after them all */
	const unsigned c0 = (unsigned)__builtin_popcountll(z0);
	const unsigned pj = tl_zero(z0, z1, c0, j);
	const unsigned pp = j == 0 ? ~0u : tl_zero(z0, z1, c0, j - 1);
	const unsigned cnt = pj - pp - 1, start = pj - j - cnt;
	/* The run's IDs whose byte 3 is the key's: bytes 16.. of the line, from start, cnt of them. */
	const __m256i key = _mm256_set1_epi8((char)id->b[3]);
	uint64_t m = (uint32_t)_mm256_movemask_epi8(
		_mm256_cmpeq_epi8(_mm256_loadu_si256((const __m256i *)(const void *)(ln + 16)), key));
	m |= (uint64_t)(uint32_t)_mm256_movemask_epi8(
		     _mm256_cmpeq_epi8(_mm256_loadu_si256((const __m256i *)(const void *)(ln + 32)), key))
	     << 16; /* bytes 32..63: ids 16..47 */
	m = (m >> start) & ((1ull << cnt) - 1);
	for (; m != 0; m &= m - 1) {
		const uint8_t *rec = tl_recs + ((size_t)base + start + (unsigned)__builtin_ctzll(m)) * TL_REC;
		const uint8_t *t = id->b + 4;
		if (((tl_le64(rec) ^ tl_le64(t)) | (tl_le64(rec + 8) ^ tl_le64(t + 8)) | (tl_le64(rec + 16) ^ tl_le64(t + 16)) |
		     (tl_le64(rec + 20) ^ tl_le64(t + 20))) == 0) {
			memcpy(pack, rec + 28, 4);
			memcpy(offset, rec + 32, 4);
			return true;
		}
	}
	return false;
}
#define TL_HAVE 1
#else
#define TL_HAVE 0
#endif

static int tl_setup(bench_b *b)
{
#if TL_HAVE
	__builtin_cpu_init();
	if (!__builtin_cpu_supports("bmi2") || !__builtin_cpu_supports("avx2"))
		return bench_fail(b, "Limit/TwoLine needs BMI2 and AVX2");
	if (tl_lines == NULL) {
		tl_lines = tl_alloc(TL_LINES * 64);
		tl_recs = tl_alloc(TL_N * TL_REC + 16);
		if (tl_lines == NULL || tl_recs == NULL) {
			twoline_caches_free();
			return bench_fail(b, "out of memory for Limit/TwoLine");
		}
		if (tl_build() != 0) {
			twoline_caches_free();
			return bench_fail(b, "Limit/TwoLine: a line overflows, or out of memory");
		}
		tl_packs = gen_master_pack_ids((TL_N + 7) / 8);
		/* Every known key found where the workload put it, no unknown one. */
		const rix_id *unknown = gen_unknown_ids(TL_N);
		const rix_id *ids = gen_entry_ids(TL_N);
		const rix_loc *locs = gen_entry_locs(TL_N);
		for (size_t i = 0; i < TL_N; i += 97) {
			uint32_t p, o;
			if (!tl_find(&ids[i], &p, &o) || p != locs[i].pack || o != locs[i].offset || tl_find(&unknown[i], &p, &o)) {
				twoline_caches_free();
				return bench_fail(b, "Limit/TwoLine: a wrong answer at entry %zu", i);
			}
		}
	}
	b->state = tl_lines;
	return 0;
#else
	return bench_fail(b, "Limit/TwoLine needs x86-64 (BMI2 and AVX2)");
#endif
}

static void tl_run(bench_b *b)
{
#if TL_HAVE
	const rix_id *keys = b->def->arg[0] ? gen_unknown_ids(TL_N) : gen_known_ids(TL_N);
	size_t k = (size_t)(b->n * 7919 % TL_N);
	uint64_t found = 0, sum = 0;
	for (uint64_t i = 0; i < b->n; i++) {
		uint32_t p, o;
		if (tl_find(&keys[k], &p, &o)) { /* as RankedLookup's loop: the location and its pack's ID */
			found++;
			sum += o + tl_packs[p].b[0];
		}
		if (++k == TL_N)
			k = 0;
	}
	tl_sink = sum + found;
#else
	(void)b;
#endif
}

void twoline_caches_free(void)
{
	free(tl_lines);
	free(tl_recs);
	tl_lines = NULL;
	tl_recs = NULL;
}

void register_twoline_benchmarks(void)
{
	static const char *const mode[] = { "known", "unknown" };
	for (int m = 0; m < 2; m++) {
		bench_def d = { .setup = tl_setup, .run = tl_run, .family = 0 };
		snprintf(d.name, sizeof(d.name), "Limit/TwoLine/%s", mode[m]);
		d.arg[0] = (uint64_t)m;
		bench_register(&d);
	}
}
