/*
 * index/idset_sort.c — the sort of rix_idset's builds: an MSD radix sort on the ID bytes
 * (American flag permutation, insertion sort below SORT_SMALL IDs), its 256 sub-sorts spread
 * over the CPUs for large arrays.
 */
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "rix/alloc.h"
#include "index_internal.h"
#include "idset_cmp.h"
#include "../common/pool.h"

#define SORT_SMALL 48u       /* ranges below this are insertion-sorted */
#define SORT_PARALLEL 65536u /* arrays from this size have their sub-sorts spread over CPUs */

/* Compares bytes d..31 of two IDs (memcmp order). */
static inline int suffix_cmp(const uint8_t *a, const uint8_t *b, unsigned d)
{
	if (RIX_ID_SIZE - d >= 8)
		return tail_cmp(a + d, b + d, RIX_ID_SIZE - d);
	return memcmp(a + d, b + d, RIX_ID_SIZE - d);
}

static void insertion_sort(rix_id *a, size_t n, unsigned d)
{
	for (size_t i = 1; i < n; i++) {
		if (suffix_cmp(a[i - 1].b, a[i].b, d) <= 0)
			continue;
		rix_id t = a[i];
		size_t j = i;
		while (j > 0 && suffix_cmp(a[j - 1].b, t.b, d) > 0) {
			a[j] = a[j - 1];
			j--;
		}
		a[j] = t;
	}
}

/* Moves every ID into its byte-d bucket (American flag sort's permutation). */
static __attribute__((noinline)) void flag_permute(rix_id *a, const size_t cnt[256], unsigned d)
{
	size_t head[256], end[256], at = 0;
	for (unsigned c = 0; c < 256; c++) {
		head[c] = at;
		at += cnt[c];
		end[c] = at;
	}
	for (unsigned c = 0; c < 256; c++) {
		while (head[c] < end[c]) {
			unsigned x = a[head[c]].b[d];
			if (x == c) {
				head[c]++;
				continue;
			}
			rix_id t = a[head[c]];
			a[head[c]] = a[head[x]];
			a[head[x]] = t;
			head[x]++;
		}
	}
}

/* Sorts a[0..n) whose IDs agree on bytes 0..d-1. Recursion depth <= 32 (one level a byte). */
void rix__idset_sort_from(rix_id *a, size_t n, unsigned d)
{
	while (n >= SORT_SMALL && d < RIX_ID_SIZE) {
		size_t cnt[256];
		memset(cnt, 0, sizeof(cnt));
		for (size_t i = 0; i < n; i++)
			cnt[a[i].b[d]]++;
		if (cnt[a[0].b[d]] == n) { /* all share this byte: on to the next, no recursion */
			d++;
			continue;
		}
		flag_permute(a, cnt, d);
		size_t at = 0;
		for (unsigned c = 0; c < 256; c++) {
			if (cnt[c] > 1)
				rix__idset_sort_from(a + at, cnt[c], d + 1);
			at += cnt[c];
		}
		return;
	}
	if (d < RIX_ID_SIZE && n > 1)
		insertion_sort(a, n, d);
}

/* The sub-sorts of the top level, shared by the workers: bucket c is a[start[c], start[c + 1]). */
struct sort_job {
	rix_id *a;
	unsigned d; /* the byte the top level sorted on */
	size_t start[257];
	atomic_uint next; /* the next bucket to take */
};

static void *sort_worker(void *arg)
{
	struct sort_job *j = arg;
	for (;;) {
		unsigned c = atomic_fetch_add(&j->next, 1);
		if (c >= 256)
			return NULL;
		size_t m = j->start[c + 1] - j->start[c];
		if (m > 1)
			rix__idset_sort_from(j->a + j->start[c], m, j->d + 1);
	}
}

/*
 * rix__idset_sort_from of the whole array, its 256 sub-sorts (after the first byte that differs) spread
 * over `workers` threads (0: one per CPU, at most 64) when the array is large. The workers
 * write disjoint ranges.
 */
void rix__idset_sort(rix_id *a, size_t n, unsigned workers)
{
	if (n < SORT_PARALLEL) {
		rix__idset_sort_from(a, n, 0);
		return;
	}
	struct sort_job *j = rix_malloc(sizeof(*j));
	if (j == NULL) { /* sorting needs no memory: do it on this thread */
		rix__idset_sort_from(a, n, 0);
		return;
	}
	size_t cnt[256];
	unsigned d = 0;
	for (; d < RIX_ID_SIZE; d++) {
		memset(cnt, 0, sizeof(cnt));
		for (size_t i = 0; i < n; i++)
			cnt[a[i].b[d]]++;
		if (cnt[a[0].b[d]] != n)
			break;
	}
	if (d < RIX_ID_SIZE) {
		flag_permute(a, cnt, d);
		j->a = a;
		j->d = d;
		j->start[0] = 0;
		for (unsigned c = 0; c < 256; c++)
			j->start[c + 1] = j->start[c] + cnt[c];
		atomic_init(&j->next, 0);
		rix__pool_run(rix__pool_size(workers, 64), sort_worker, j);
	}
	rix_free(j);
}
