/*
 * index/id_sort.h — an MSD radix sort of records by the blob ID they hold (American flag
 * permutation a byte at a time, insertion sort below SORT_SMALL records, the 256 sub-sorts after
 * the first byte that differs spread over the CPUs for large arrays), written once and compiled
 * for each record type that needs it: rix_idset's IDs (idset_sort.c) and the 43-byte records
 * of the ranked table's entries (entry_collect.c). The includer defines before including:
 *   SORT_REC          the record type
 *   SORT_ID(r)        the ID bytes (const uint8_t[32]) of record r (an lvalue)
 *   SORT_FN(name)     the name of this instance's version of name
 *   SORT_FROM_ONLY    (optional) only sort_from: no parallel sort of the whole array
 * Recursion depth is at most 32 (one level a byte), whatever the IDs.
 */
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "rix/alloc.h"
#include "hash.h"
#include "idset_cmp.h"
#include "../common/pool.h"

#ifndef SORT_SMALL
#define SORT_SMALL 48u       /* ranges below this are insertion-sorted */
#define SORT_PARALLEL 65536u /* arrays from this size have their sub-sorts spread over CPUs */

/* Compares bytes d..31 of two IDs (memcmp order). */
static inline int suffix_cmp(const uint8_t *a, const uint8_t *b, unsigned d)
{
	if (RIX_ID_SIZE - d >= 8)
		return tail_cmp(a + d, b + d, RIX_ID_SIZE - d);
	return memcmp(a + d, b + d, RIX_ID_SIZE - d);
}
#endif

static void SORT_FN(insertion_sort)(SORT_REC *a, size_t n, unsigned d)
{
	for (size_t i = 1; i < n; i++) {
		if (suffix_cmp(SORT_ID(a[i - 1]), SORT_ID(a[i]), d) <= 0)
			continue;
		SORT_REC t = a[i];
		size_t j = i;
		while (j > 0 && suffix_cmp(SORT_ID(a[j - 1]), SORT_ID(t), d) > 0) {
			a[j] = a[j - 1];
			j--;
		}
		a[j] = t;
	}
}

/*
 * Moves every ID into its byte-d bucket (American flag sort's permutation). Each swap's
 * destination is the next free record of a bucket picked by the record just swapped in: a chain
 * of dependent loads, each a miss in a large array, unless every bucket's next record is already
 * on its way. So each bucket's next record is requested when its head moves (and all of them at
 * the start): 256 records stay in the caches, and the chain runs at their speed (10M 48-byte
 * entries of the ranked table on a 2-core Xeon: about a third less of the permutation's time).
 */
static __attribute__((noinline)) void SORT_FN(flag_permute)(SORT_REC *a, const size_t cnt[256], unsigned d)
{
	size_t head[256], end[256], at = 0;
	for (unsigned c = 0; c < 256; c++) {
		head[c] = at;
		at += cnt[c];
		end[c] = at;
		RIX_PREFETCH_W(&a[head[c]]);
		RIX_PREFETCH_W((const void *)((uintptr_t)&a[head[c]] + sizeof(SORT_REC) - 1));
	}
	for (unsigned c = 0; c < 256; c++) {
		while (head[c] < end[c]) {
			unsigned x = SORT_ID(a[head[c]])[d];
			if (x == c) {
				head[c]++;
				continue;
			}
			SORT_REC t = a[head[c]];
			a[head[c]] = a[head[x]];
			a[head[x]] = t;
			head[x]++;
			/* (at the array's end: a prefetch never faults; computed as an integer, not as a
			 * pointer past the end) */
			RIX_PREFETCH_W(&a[head[x]]);
			RIX_PREFETCH_W((const void *)((uintptr_t)&a[head[x]] + sizeof(SORT_REC) - 1));
		}
	}
}

/* Sorts a[0..n) whose IDs agree on bytes 0..d-1. Recursion depth <= 32 (one level a byte). */
void SORT_FN(sort_from)(SORT_REC *a, size_t n, unsigned d)
{
	while (n >= SORT_SMALL && d < RIX_ID_SIZE) {
		size_t cnt[256];
		memset(cnt, 0, sizeof(cnt));
		for (size_t i = 0; i < n; i++)
			cnt[SORT_ID(a[i])[d]]++;
		if (cnt[SORT_ID(a[0])[d]] == n) { /* all share this byte: on to the next, no recursion */
			d++;
			continue;
		}
		SORT_FN(flag_permute)(a, cnt, d);
		size_t at = 0;
		for (unsigned c = 0; c < 256; c++) {
			if (cnt[c] > 1)
				SORT_FN(sort_from)(a + at, cnt[c], d + 1);
			at += cnt[c];
		}
		return;
	}
	if (d < RIX_ID_SIZE && n > 1)
		SORT_FN(insertion_sort)(a, n, d);
}

#ifndef SORT_FROM_ONLY
/* The sub-sorts of the top level, shared by the workers: bucket c is a[start[c], start[c + 1]). */
struct SORT_FN(sort_job) {
	SORT_REC *a;
	unsigned d; /* the byte the top level sorted on */
	size_t start[257];
	atomic_uint next; /* the next bucket to take */
};

static void *SORT_FN(sort_worker)(void *arg)
{
	struct SORT_FN(sort_job) *j = arg;
	for (;;) {
		unsigned c = atomic_fetch_add(&j->next, 1);
		if (c >= 256)
			return NULL;
		size_t m = j->start[c + 1] - j->start[c];
		if (m > 1)
			SORT_FN(sort_from)(j->a + j->start[c], m, j->d + 1);
	}
}

/*
 * sort_from of the whole array, its 256 sub-sorts (after the first byte that differs) spread
 * over `workers` threads (0: one per CPU, at most 64) when the array is large. The workers
 * write disjoint ranges.
 */
void SORT_FN(sort)(SORT_REC *a, size_t n, unsigned workers)
{
	if (n < SORT_PARALLEL) {
		SORT_FN(sort_from)(a, n, 0);
		return;
	}
	struct SORT_FN(sort_job) *j = rix_malloc(sizeof(*j));
	if (j == NULL) { /* sorting needs no memory: do it on this thread */
		SORT_FN(sort_from)(a, n, 0);
		return;
	}
	size_t cnt[256];
	unsigned d = 0;
	for (; d < RIX_ID_SIZE; d++) {
		memset(cnt, 0, sizeof(cnt));
		for (size_t i = 0; i < n; i++)
			cnt[SORT_ID(a[i])[d]]++;
		if (cnt[SORT_ID(a[0])[d]] != n)
			break;
	}
	if (d < RIX_ID_SIZE) {
		SORT_FN(flag_permute)(a, cnt, d);
		j->a = a;
		j->d = d;
		j->start[0] = 0;
		for (unsigned c = 0; c < 256; c++)
			j->start[c + 1] = j->start[c] + cnt[c];
		atomic_init(&j->next, 0);
		rix__pool_run(rix__pool_size(workers, 64), SORT_FN(sort_worker), j);
	}
	rix_free(j);
}
#endif
