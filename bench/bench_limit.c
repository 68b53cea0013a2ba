/*
 * bench/bench_limit.c — what the memory system allows a lookup (WORKLOADS.md, "Limit probes"),
 * measured in the same run as the lookups so that each lookup can be given as a ratio to it:
 *
 *   Limit/Chase            ns per step of a dependent walk through a random cyclic permutation
 *                          of the array: a DRAM miss with nothing overlapping it
 *   Limit/Gather1          per key, one load at hash mod words (keys independent): the bound of
 *                          a lookup that costs one miss (an unknown ID)
 *   Limit/Gather2          per key, a load at hash mod words, then one at (value ^ hash) mod
 *                          words: two dependent misses, keys independent (a known ID: bucket
 *                          word, then its entry)
 *   Limit/Gather1Prefetch  the same in groups of 32 keys, every position prefetched before
 *   Limit/Gather2Prefetch  it is loaded (PREFETCHT1, the lookups' hint: PROBE_PREFETCH below):
 *                          the bounds of the batched lookups
 *   Limit/Gather2Pad/N=n   Gather2 with n no-op instructions a key (n = 50, 100, 200, 300):
 *                          what the instructions a lookup executes cost the overlap of its
 *                          misses. The core holds a few hundred instructions in flight; the
 *                          more each key takes, the fewer keys' misses overlap, though a nop
 *                          needs no execution unit. Not WORKLOADS.md's: a yardstick for
 *                          reading a single lookup's ratio to Gather2 on the Xeon; on AMD Zen
 *                          4, where nops cost little, the Work probes below (bench/RESULTS.md).
 *   Limit/Gather1Work/N=n  Gather1 and Gather2 with n more instructions a key that write a general
 *   Limit/Gather2Work/N=n  register (adds in four chains begun afresh each key: they need no
 *                          load and can run at once; n = 12, 24, 48, 96 and 48, 96, 192; the
 *                          chains' seeds and fold write about 6 more). A register so written is
 *                          freed only when a later write of it retires, behind the key's loads,
 *                          and on AMD Zen 4 these cost far more than Gather2Pad's nops,
 *                          which write none (Gather2Pad/N=300 3.0x Gather2, Gather2Work/N=192
 *                          12.1x: bench/RESULTS.md): the registers a lookup writes, more
 *                          than its instructions, bound how many keys are in flight. The
 *                          yardstick for a single lookup's instructions that write a register
 *                          (scripts/insn_count.py counts them).
 *   Limit/Gather1Filter    the lines an absent ID's single master lookup of 10M IDs reads, in a
 *                          plain loop as MasterLookup/N=10M/unknown's: its key's 32 bytes, in
 *                          order (that benchmark's keys), and one word of 10 MB, the size of
 *                          the ranked table's filter of 10M IDs (the array's first nd / 8 + 1
 *                          words), by the key's first 4 bytes as the filter picks it. Gather1
 *                          over the filter's size instead of 640 MiB: where a VM's share of a
 *                          shared L3 holds those words, both run at its speed, where it does
 *                          not, at DRAM's; the lookup's ratio to it is its instructions' cost
 *                          whatever the neighbours do (bench/RESULTS.md).
 *   Limit/Lines/{Apart,Record,Small,Known}
 *                          the lines a batched known master lookup of 10M IDs reads, nothing
 *                          else, in groups of 32 keys prefetched first: Apart, the 4 small
 *                          arrays (filter 1 B an ID, directory 0.4, mid bits 1, pack table 4)
 *                          and a 28-byte tail and a 12-byte location in arrays apart (the
 *                          ranked table's layout until the session of 2026-12-03, fifth; named
 *                          Now then); Record, the small arrays and one 40-byte record (tail
 *                          and location together: the layout since); Small, the small arrays
 *                          alone; Known, Record without the filter's word (what a batch of
 *                          present IDs reads since the batched lookup skips the filter for
 *                          them, index/ranked.c). The memory floor of each layout, in regions
 *                          of the same array (bench/RESULTS.md).
 *
 * One array of 640 MiB of 64-bit words (close to a 10M-entry table) holds the permutation (so
 * every word is a random index); the keys are Lookup/N=10M/known's, hashed with XXH3 and the
 * seed the lookup benchmarks' tables use. One op is one key (one step for Chase). The array asks
 * for huge pages as the tables do (MADV_HUGEPAGE). Built once per run (a few seconds) and freed
 * with the workload family's caches.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "bench.h"
#include "index/ranked.h"

#define LIMIT_WORDS ((size_t)640 << 17) /* 640 MiB of uint64_t */
#define LIMIT_KEYS ((size_t)10000000)
#define LIMIT_GROUP 32
#define TABLE_SEED 0x5EEDF00DCAFEBEEFull /* bench_workloads.c's */

enum { CHASE, GATHER1, GATHER2, GATHER1_PF, GATHER2_PF, GATHER2_PAD, GATHER1_WORK, GATHER2_WORK, LINES, GATHER1_FILTER };
enum { LINES_APART, LINES_RECORD, LINES_SMALL, LINES_KNOWN };

/* The hint the lookups' prefetches use (RIX_PREFETCH, index/hash.h: T1, into the second-level
 * cache), so that a batched lookup is set beside the best its own requests allow. */
#define PROBE_PREFETCH(p) __builtin_prefetch((p), 0, 2)

static uint64_t *words;  /* LIMIT_WORDS: a cyclic permutation of 0..LIMIT_WORDS-1 */
static uint64_t *hashes; /* LIMIT_KEYS: XXH3 of the known keys */
static volatile uint64_t sink;

static int limit_setup(bench_b *b)
{
	if (words == NULL) {
		uint64_t *w = bench_alloc_huge(LIMIT_WORDS * sizeof(*w));
		uint64_t *h = malloc(LIMIT_KEYS * sizeof(*h));
		if (w == NULL || h == NULL) {
			free(w);
			free(h);
			return bench_fail(b, "out of memory for the probes' %zu MiB", (size_t)(LIMIT_WORDS * 8 >> 20));
		}
		/* Sattolo's shuffle of the identity: one cycle through every word. */
		for (size_t i = 0; i < LIMIT_WORDS; i++)
			w[i] = i;
		uint64_t st = 0x11A117ull;
		for (size_t i = LIMIT_WORDS - 1; i > 0; i--) {
			size_t j = (size_t)(splitmix64_next(&st) % i);
			uint64_t t = w[i];
			w[i] = w[j];
			w[j] = t;
		}
		const rix_id *keys = gen_known_ids(LIMIT_KEYS);
		for (size_t i = 0; i < LIMIT_KEYS; i++)
			h[i] = XXH3_64bits_withSeed(keys[i].b, RIX_ID_SIZE, TABLE_SEED);
		words = w;
		hashes = h;
	}
	if (b->def->arg[0] == GATHER1_FILTER)
		(void)gen_unknown_ids(LIMIT_KEYS); /* made here, not in the timed loop */
	b->state = words;
	return 0;
}

void limit_caches_free(void)
{
	free(words);
	free(hashes);
	words = NULL;
	hashes = NULL;
}

static void limit_run(bench_b *b)
{
	const uint64_t *w = words;
	const size_t nw = LIMIT_WORDS;
	uint64_t sum = 0;
	size_t k = (size_t)(b->n * 7919 % LIMIT_KEYS); /* runs start at different keys */
	switch ((int)b->def->arg[0]) {
	case CHASE: {
		uint64_t at = k;
		for (uint64_t i = 0; i < b->n; i++)
			at = w[at];
		sum = at;
		break;
	}
	case GATHER1:
		for (uint64_t i = 0; i < b->n; i++) {
			sum += w[hashes[k] % nw];
			if (++k == LIMIT_KEYS)
				k = 0;
		}
		break;
	case GATHER1_FILTER: {
		const rix_id *keys = gen_unknown_ids(LIMIT_KEYS);
		const size_t fw = rix__ranked_filter_words(LIMIT_KEYS);
		for (uint64_t i = 0; i < b->n; i++) {
			uint64_t m;
			memcpy(&m, keys[k].b + 16, 8);
			sum += w[rix__ranked_filter_word(keys[k].b, fw)] & m;
			if (++k == LIMIT_KEYS)
				k = 0;
		}
		break;
	}
	case GATHER2:
		for (uint64_t i = 0; i < b->n; i++) {
			uint64_t h = hashes[k], v = w[h % nw];
			sum += w[(v ^ h) % nw];
			if (++k == LIMIT_KEYS)
				k = 0;
		}
		break;
	case GATHER2_PAD:
	case GATHER1_WORK:
	case GATHER2_WORK: {
		/* Gather1 or Gather2, then the key's extra instructions: Gather2Pad's nops, or the
		 * Work probes' adds in four chains begun afresh each key from its number (not from
		 * what it loaded: they can run at once; the registers they write are freed only
		 * behind the key's loads), folded into the sum. The count is the .rept's, a literal:
		 * one loop per n (the two families' n differ). */
		const bool two = b->def->arg[0] != GATHER1_WORK;
#define NOPS(N) __asm__ volatile(".rept " #N "\n\tnop\n\t.endr")
#define ADDS(Q) /* Q adds a chain */                                                               \
	do {                                                                                       \
		uint64_t a_ = k, b_ = k + 1, c_ = k + 2, d_ = k + 3;                               \
		__asm__ volatile(".rept " #Q "\n\tadd $1, %0\n\tadd $1, %1\n\tadd $1, %2\n\tadd $1, %3\n\t.endr" \
				 : "+r"(a_), "+r"(b_), "+r"(c_), "+r"(d_));                       \
		v += a_ ^ b_ ^ c_ ^ d_;                                                            \
	} while (0)
#define EXTRA_LOOP(EXTRA)                                                                          \
	for (uint64_t i = 0; i < b->n; i++) {                                                      \
		uint64_t h = hashes[k], v = w[h % nw];                                             \
		if (two)                                                                           \
			v = w[(v ^ h) % nw];                                                       \
		EXTRA;                                                                             \
		sum += v;                                                                          \
		if (++k == LIMIT_KEYS)                                                             \
			k = 0;                                                                     \
	}
		switch ((int)b->def->arg[1]) {
		case 50:
			EXTRA_LOOP(NOPS(50));
			break;
		case 100:
			EXTRA_LOOP(NOPS(100));
			break;
		case 200:
			EXTRA_LOOP(NOPS(200));
			break;
		case 300:
			EXTRA_LOOP(NOPS(300));
			break;
		case 12:
			EXTRA_LOOP(ADDS(3));
			break;
		case 24:
			EXTRA_LOOP(ADDS(6));
			break;
		case 48:
			EXTRA_LOOP(ADDS(12));
			break;
		case 96:
			EXTRA_LOOP(ADDS(24));
			break;
		default: /* 192 */
			EXTRA_LOOP(ADDS(48));
			break;
		}
#undef EXTRA_LOOP
#undef ADDS
#undef NOPS
		break;
	}
	case LINES: {
		/* Regions of the array, by byte: tails [0, 280M), locations [280M, 400M), records
		 * [0, 400M) (contents do not matter), then filter, directory, mid bits, packs. */
		const uint8_t *base = (const uint8_t *)w;
		const uint64_t n = LIMIT_KEYS, locs = n * 28, filt = n * 40, dir = filt + n, mid = dir + n / 2,
			       packs = mid + n;
		const int v = (int)b->def->arg[1];
		uint64_t id[LIMIT_GROUP];
		for (uint64_t done = 0; done < b->n;) {
			size_t g = b->n - done < LIMIT_GROUP ? (size_t)(b->n - done) : LIMIT_GROUP;
			for (size_t j = 0; j < g; j++) {
				uint64_t i = id[j] = hashes[k] % n;
				if (v != LINES_KNOWN)
					PROBE_PREFETCH(base + filt + i);
				PROBE_PREFETCH(base + dir + i * 4 / 10);
				PROBE_PREFETCH(base + mid + i);
				PROBE_PREFETCH(base + packs + i / 8 * 32);
				if (v == LINES_APART) {
					PROBE_PREFETCH(base + i * 28);
					PROBE_PREFETCH(base + i * 28 + 27);
					PROBE_PREFETCH(base + locs + i * 12);
					PROBE_PREFETCH(base + locs + i * 12 + 11);
				} else if (v == LINES_RECORD || v == LINES_KNOWN) {
					PROBE_PREFETCH(base + i * 40);
					PROBE_PREFETCH(base + i * 40 + 39);
				}
				if (++k == LIMIT_KEYS)
					k = 0;
			}
			for (size_t j = 0; j < g; j++) {
				uint64_t i = id[j];
				sum += base[dir + i * 4 / 10] + base[mid + i] + base[packs + i / 8 * 32];
				if (v != LINES_KNOWN)
					sum += base[filt + i];
				if (v == LINES_APART)
					sum += base[i * 28] + base[i * 28 + 27] + base[locs + i * 12] + base[locs + i * 12 + 11];
				else if (v == LINES_RECORD || v == LINES_KNOWN)
					sum += base[i * 40] + base[i * 40 + 39];
			}
			done += g;
		}
		break;
	}
	case GATHER1_PF:
	case GATHER2_PF: {
		const bool two = b->def->arg[0] == GATHER2_PF;
		size_t pos[LIMIT_GROUP];
		uint64_t hs[LIMIT_GROUP];
		for (uint64_t done = 0; done < b->n;) {
			size_t g = b->n - done < LIMIT_GROUP ? (size_t)(b->n - done) : LIMIT_GROUP;
			for (size_t j = 0; j < g; j++) {
				hs[j] = hashes[k];
				pos[j] = (size_t)(hs[j] % nw);
				PROBE_PREFETCH(&w[pos[j]]);
				if (++k == LIMIT_KEYS)
					k = 0;
			}
			if (two)
				for (size_t j = 0; j < g; j++) {
					pos[j] = (size_t)((w[pos[j]] ^ hs[j]) % nw);
					PROBE_PREFETCH(&w[pos[j]]);
				}
			for (size_t j = 0; j < g; j++)
				sum += w[pos[j]];
			done += g;
		}
		break;
	}
	}
	sink = sum;
}

void register_limit_benchmarks(void)
{
	static const struct {
		const char *name;
		int which;
	} list[] = { { "Limit/Chase", CHASE },
		     { "Limit/Gather1", GATHER1 },
		     { "Limit/Gather2", GATHER2 },
		     { "Limit/Gather1Prefetch", GATHER1_PF },
		     { "Limit/Gather2Prefetch", GATHER2_PF },
		     { "Limit/Gather1Filter", GATHER1_FILTER } };
	for (size_t i = 0; i < sizeof(list) / sizeof(list[0]); i++) {
		bench_def d = { .setup = limit_setup, .run = limit_run, .family = 0 };
		snprintf(d.name, sizeof(d.name), "%s", list[i].name);
		d.arg[0] = (uint64_t)list[i].which;
		bench_register(&d);
	}
	static const struct {
		const char *name;
		int which;
	} lines[] = { { "Apart", LINES_APART }, { "Record", LINES_RECORD }, { "Small", LINES_SMALL },
		     { "Known", LINES_KNOWN } };
	for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
		bench_def d = { .setup = limit_setup, .run = limit_run, .family = 0 };
		snprintf(d.name, sizeof(d.name), "Limit/Lines/%s", lines[i].name);
		d.arg[0] = LINES;
		d.arg[1] = (uint64_t)lines[i].which;
		bench_register(&d);
	}
	static const int pads[] = { 50, 100, 200, 300 };
	for (size_t i = 0; i < sizeof(pads) / sizeof(pads[0]); i++) {
		bench_def d = { .setup = limit_setup, .run = limit_run, .family = 0 };
		snprintf(d.name, sizeof(d.name), "Limit/Gather2Pad/N=%d", pads[i]);
		d.arg[0] = GATHER2_PAD;
		d.arg[1] = (uint64_t)pads[i];
		bench_register(&d);
	}
	static const struct {
		const char *name;
		int which, n;
	} work[] = { { "Gather1Work", GATHER1_WORK, 12 }, { "Gather1Work", GATHER1_WORK, 24 },
		     { "Gather1Work", GATHER1_WORK, 48 }, { "Gather1Work", GATHER1_WORK, 96 },
		     { "Gather2Work", GATHER2_WORK, 48 }, { "Gather2Work", GATHER2_WORK, 96 },
		     { "Gather2Work", GATHER2_WORK, 192 } };
	for (size_t i = 0; i < sizeof(work) / sizeof(work[0]); i++) {
		bench_def d = { .setup = limit_setup, .run = limit_run, .family = 0 };
		snprintf(d.name, sizeof(d.name), "Limit/%s/N=%d", work[i].name, work[i].n);
		d.arg[0] = (uint64_t)work[i].which;
		d.arg[1] = (uint64_t)work[i].n;
		bench_register(&d);
	}
}
