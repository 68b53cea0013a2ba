/*
 * bench/bench_twoline.c — Limit/TwoLine{,Batch}/{known,unknown}: the two-line layout issue 13 names as
 * what the probes allow a known lookup ("bucket word with enough filter or fingerprint bits to go
 * straight to its entry, then the entry"), built of RankedLookup/N=10M's entries and looked up
 * one ID at a time by a lean loop (TwoLine), and in groups of 32 keys whose lines are requested
 * first, as Limit/Gather2Prefetch runs (TwoLineBatch, in RankedLookupBatch's calls of 64), so that
 * each lookup of the index can be set beside the best a layout of that shape does on the same
 * machine (bench/RESULTS.md). A yardstick, not an index: no filter, no overflow handling (the
 * build checks that its fixed keys need none), no second locations, no checks beyond the
 * answer's.
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
 * its filter). Needs BMI1, BMI2, POPCNT and AVX2 (PDEP, 32-byte compares); where the CPU lacks
 * them, it fails with a message.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#define TL_N ((size_t)10000000)
#define TL_K 24u                       /* bucket bits */
#define TL_LINES ((size_t)1 << (TL_K - 5)) /* 32 buckets a line */
#define TL_MIDS 48u                    /* IDs a line holds at most */
#define TL_REC 40u

static uint8_t *tl_lines;   /* TL_LINES * 64 */
static uint8_t *tl_recs;    /* TL_N * TL_REC */
static const rix_id *tl_packs;
static volatile uint64_t tl_sink;

static inline uint64_t tl_be64(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return __builtin_bswap64(v);
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

/* id's line. */
static inline const uint8_t *tl_line(const rix_id *id)
{
	return tl_lines + (size_t)(tl_be64(id->b) >> (64 - TL_K) >> 5) * 64;
}

/* The records of id's run whose mid byte is id's: bit i of the result for record *first + i. */
TL_TARGET static inline uint64_t tl_candidates(const rix_id *id, const uint8_t *ln, size_t *first)
{
	const unsigned j = (unsigned)(tl_be64(id->b) >> (64 - TL_K)) & 31;
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
	*first = (size_t)base + start;
	return (m >> start) & ((1ull << cnt) - 1);
}

/* Whether the record rec holds id; *pack and *offset its location's when it does. */
static inline bool tl_match(const rix_id *id, const uint8_t *rec, uint32_t *pack, uint32_t *offset)
{
	const uint8_t *t = id->b + 4;
	if (((tl_le64(rec) ^ tl_le64(t)) | (tl_le64(rec + 8) ^ tl_le64(t + 8)) | (tl_le64(rec + 16) ^ tl_le64(t + 16)) |
	     (tl_le64(rec + 20) ^ tl_le64(t + 20))) != 0)
		return false;
	memcpy(pack, rec + 28, 4);
	memcpy(offset, rec + 32, 4);
	return true;
}

/* Whether id is in the layout; *pack and *offset its location's when it is. */
TL_TARGET __attribute__((noinline)) static bool tl_find(const rix_id *id, uint32_t *pack, uint32_t *offset)
{
	size_t first;
	for (uint64_t m = tl_candidates(id, tl_line(id), &first); m != 0; m &= m - 1)
		if (tl_match(id, tl_recs + (first + (unsigned)__builtin_ctzll(m)) * TL_REC, pack, offset))
			return true;
	return false;
}

/*
 * tl_find for n <= TL_GROUP keys, as Limit/Gather2Prefetch runs: every key's line requested,
 * then each key's first candidate record requested, then the records compared (the rare second
 * candidate read when asked). found[i], pack[i], offset[i]. @return how many found.
 */
#define TL_GROUP 32
TL_TARGET __attribute__((noinline)) static size_t tl_find_group(const rix_id *keys, size_t n, uint32_t *pack,
								uint32_t *offset, bool *found)
{
	const uint8_t *ln[TL_GROUP];
	uint64_t m[TL_GROUP];
	size_t first[TL_GROUP], hits = 0;
	for (size_t i = 0; i < n; i++) {
		ln[i] = tl_line(&keys[i]);
		__builtin_prefetch(ln[i], 0, 2); /* PREFETCHT1, as the lookups' RIX_PREFETCH */
	}
	for (size_t i = 0; i < n; i++) {
		m[i] = tl_candidates(&keys[i], ln[i], &first[i]);
		if (m[i] != 0) {
			const uint8_t *rec = tl_recs + (first[i] + (unsigned)__builtin_ctzll(m[i])) * TL_REC;
			__builtin_prefetch(rec, 0, 2);
			__builtin_prefetch(rec + TL_REC - 1, 0, 2);
		}
	}
	for (size_t i = 0; i < n; i++) {
		found[i] = false;
		for (uint64_t c = m[i]; c != 0 && !found[i]; c &= c - 1)
			found[i] = tl_match(&keys[i], tl_recs + (first[i] + (unsigned)__builtin_ctzll(c)) * TL_REC, &pack[i],
					    &offset[i]);
		hits += found[i];
	}
	return hits;
}
#define TL_HAVE 1
#else
#define TL_HAVE 0
#endif

static int tl_setup(bench_b *b)
{
#if TL_HAVE
	__builtin_cpu_init();
	if (!__builtin_cpu_supports("bmi") || !__builtin_cpu_supports("bmi2") || !__builtin_cpu_supports("popcnt") ||
	    !__builtin_cpu_supports("avx2"))
		return bench_fail(b, "Limit/TwoLine needs BMI1, BMI2, POPCNT and AVX2");
	if (tl_lines == NULL) {
		tl_lines = bench_alloc_huge(TL_LINES * 64);
		tl_recs = bench_alloc_huge(TL_N * TL_REC);
		if (tl_lines == NULL || tl_recs == NULL) {
			twoline_caches_free();
			return bench_fail(b, "out of memory for Limit/TwoLine");
		}
		if (tl_build() != 0) {
			twoline_caches_free();
			return bench_fail(b, "Limit/TwoLine: a line overflows, or out of memory");
		}
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
		for (size_t i = 0; i + TL_GROUP <= TL_N; i += 997 * TL_GROUP) {
			uint32_t p[TL_GROUP], o[TL_GROUP];
			bool f[TL_GROUP];
			size_t hits = tl_find_group(&ids[i], TL_GROUP, p, o, f);
			for (size_t j = 0; j < TL_GROUP; j++)
				hits += f[j] && (p[j] != locs[i + j].pack || o[j] != locs[i + j].offset) ? TL_N : 0;
			if (hits != TL_GROUP || tl_find_group(&unknown[i], TL_GROUP, p, o, f) != 0) {
				twoline_caches_free();
				return bench_fail(b, "Limit/TwoLineBatch: a wrong answer near entry %zu", i);
			}
		}
	}
	tl_packs = gen_master_pack_ids((TL_N + 7) / 8); /* each time: the generator's cache may have moved */
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
	if (b->def->arg[1]) { /* batched: RankedLookupBatch's calls of 64 keys, its loop over their answers */
		uint32_t p[2 * TL_GROUP], o[2 * TL_GROUP];
		bool f[2 * TL_GROUP];
		for (uint64_t left = b->n; left > 0;) {
			size_t c = left < 2 * TL_GROUP ? (size_t)left : 2 * TL_GROUP;
			if (c > TL_N - k)
				c = TL_N - k;
			for (size_t g = 0; g < c; g += TL_GROUP)
				found += tl_find_group(&keys[k + g], c - g < TL_GROUP ? c - g : TL_GROUP, &p[g], &o[g], &f[g]);
			for (size_t i = 0; i < c; i++)
				sum += f[i] ? o[i] + tl_packs[p[i]].b[0] : 0;
			left -= c;
			k += c;
			if (k == TL_N)
				k = 0;
		}
		tl_sink = sum + found;
		return;
	}
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
	for (int batched = 0; batched < 2; batched++) {
		for (int m = 0; m < 2; m++) {
			bench_def d = { .setup = tl_setup, .run = tl_run, .family = 0 };
			snprintf(d.name, sizeof(d.name), "Limit/TwoLine%s/%s", batched ? "Batch" : "", mode[m]);
			d.arg[0] = (uint64_t)m;
			d.arg[1] = (uint64_t)batched;
			bench_register(&d);
		}
	}
}
