/*
 * index/parts.h — private to index/: a collection's parts (idset_collect.c's IDs, entry_collect.c's
 * entries), each an anonymous mapping grown with mremap.
 *
 * A bulk load collects its records in 256 parts by the ID's first byte, which its build consumes
 * one at a time, giving each part's memory back to the system at once. So the parts are
 * mappings, not rix_malloc'd blocks: free() of a heap block need not return its memory (and
 * glibc's realloc of a heap block copies it, where mremap moves page tables). Only touched pages
 * cost memory, so a part's unused room costs under a page. They are kept off transparent huge
 * pages, where each part's last, partly filled page would cost 2 MiB.
 */
#ifndef RIX_INDEX_PARTS_H
#define RIX_INDEX_PARTS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>

#include "rix/error.h"

#define RIX__PART_FIRST ((size_t)64 << 10) /* a part's first mapping, bytes */

struct rix__part {
	uint8_t *p;
	size_t n;   /* records */
	size_t cap; /* bytes mapped */
};

/* Unmaps the part (its records are gone; it may grow again). */
static inline void rix__part_release(struct rix__part *pt)
{
	if (pt->p != NULL)
		munmap(pt->p, pt->cap);
	pt->p = NULL;
	pt->cap = 0;
	pt->n = 0;
}

/* Unmaps every one of a collection's 256 parts. */
static inline void rix__parts_release(struct rix__part part[256])
{
	for (unsigned b = 0; b < 256; b++)
		rix__part_release(&part[b]);
}

/* Room for `need` bytes at least (doubling from RIX__PART_FIRST). @return 0, RIX_ENOMEM (the part
 * as it was). */
static inline int rix__part_grow(struct rix__part *pt, size_t need)
{
	if (need <= pt->cap)
		return 0;
	size_t cap = pt->cap ? pt->cap : RIX__PART_FIRST;
	while (cap < need)
		cap *= 2;
	void *q = pt->p == NULL ? mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
				: mremap(pt->p, pt->cap, cap, MREMAP_MAYMOVE);
	if (q == MAP_FAILED)
		return rix_error_set(RIX_ENOMEM, "index: out of memory collecting %zu bytes", need);
#ifdef MADV_NOHUGEPAGE
	(void)madvise(q, cap, MADV_NOHUGEPAGE);
#endif
	pt->p = q;
	pt->cap = cap;
	return 0;
}

#endif
