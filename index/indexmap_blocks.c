/*
 * index/indexmap_blocks.c — where rix_indexmap keeps its entries (48 bytes each, numbered in
 * insertion order; the layout is told atop indexmap.c): block 0, which starts at SMALL_BLOCK
 * entries and doubles up to the batch, then blocks of `batch` entries, allocated alone or, once
 * the table holds CARVE_FROM bytes of entries, carved from chunks of 12 MiB advised for huge
 * pages. Entry e is blocks[e >> shift][e & emask] (entry_at, indexmap_internal.h).
 */
#include <stdbool.h>
#include <stdint.h>

#include "rix/alloc.h"
#include "rix/error.h"
#include "hash.h"
#include "indexmap_internal.h"

/* First size of block 0, which then doubles up to the batch size. */
#define SMALL_BLOCK 16u
#define HUGE_PAGE ((size_t)2 << 20)
#define CHUNK (6 * HUGE_PAGE) /* 3 << 22: a whole number of blocks of any batch up to 2^17 */
#define CARVE_FROM CHUNK /* bytes of entries in malloc's blocks before chunks */

static inline uint64_t capacity(const rix_indexmap *m)
{
	return m->nblocks == 0 ? 0 : ((uint64_t)(m->nblocks - 1) << m->shift) + m->cap0;
}

static void set_room(rix_indexmap *m)
{
	uint64_t c = capacity(m);
	m->room = c < RIX_INDEXMAP_MAX_ENTRIES ? c : RIX_INDEXMAP_MAX_ENTRIES;
}

static int ensure_block_list(rix_indexmap *m, uint64_t need)
{
	if (need <= m->blocks_cap)
		return 0;
	uint64_t cap = m->blocks_cap ? (uint64_t)m->blocks_cap * 2 : 4;
	if (cap < need)
		cap = need;
	struct entry **nb = rix_realloc(m->blocks, cap * sizeof(*nb));
	if (nb == NULL)
		return rix_error_set(RIX_ENOMEM, "indexmap: out of memory for block list");
	m->blocks = nb;
	m->blocks_cap = (uint32_t)cap;
	return 0;
}

/* Resizes block 0 to cap entries (cap <= batch); entry numbers stay valid. */
static int resize_block0(rix_indexmap *m, uint32_t cap)
{
	int rc = ensure_block_list(m, 1);
	if (rc != 0)
		return rc;
	struct entry *b = rix_realloc(m->nblocks ? m->blocks[0] : NULL, (size_t)cap * sizeof(struct entry));
	if (b == NULL)
		return rix_error_set(RIX_ENOMEM, "indexmap: out of memory for entry block");
	m->blocks[0] = b;
	m->nblocks = m->nblocks ? m->nblocks : 1;
	m->cap0 = cap;
	set_room(m);
	return 0;
}

/*
 * A full block (batch entries) for block number nblocks. Once the table holds CARVE_FROM bytes
 * of entries, blocks of at most half a CHUNK (batches to 2^17) are carved from chunks of 12 MiB
 * advised for huge pages: a table of millions of entries then keeps 5/6 of them or more in
 * 2 MiB pages where the kernel grants them (a chunk is not aligned: its first and last partial
 * pages stay small), where blocks from malloc (48 KiB at the default batch) sit in 4 KiB pages
 * and a random entry costs a walk of the page tables besides its miss (bench/RESULTS.md). Smaller tables keep malloc's blocks, so the
 * newest chunk's unused part (at most 12 MiB, counted by memory(); pages never touched take no
 * memory) stays a small share of the whole. need: the blocks the caller needs in all; exact (a
 * reserve): a new chunk holds no more than those (one under 2 MiB is not advised for huge pages:
 * the kernel gives them only to whole aligned 2 MiB).
 */
static struct entry *new_block(rix_indexmap *m, uint64_t need, bool exact)
{
	const uint64_t bs = (uint64_t)sizeof(struct entry) << m->shift;
	if (bs > CHUNK / 2 || (uint64_t)m->nblocks * bs < CARVE_FROM) {
		struct entry *b = rix_malloc(bs);
		if (b != NULL)
			rix__advise_huge(b, bs);
		return b;
	}
	if (m->carve_left == 0) {
		if (m->nchunks == m->chunks_cap) {
			uint32_t cap = m->chunks_cap ? m->chunks_cap * 2 : 8; /* < 2^21 chunks */
			void **c = rix_realloc(m->chunks, (size_t)cap * sizeof(*c));
			if (c == NULL)
				return NULL;
			m->chunks = c;
			m->chunks_cap = cap;
		}
		uint64_t nb = CHUNK / bs;
		if (exact && need - m->nblocks < nb)
			nb = need - m->nblocks;
		void *mem = rix_malloc(nb * bs);
		if (mem == NULL)
			return NULL;
		rix__advise_huge(mem, nb * bs);
		m->chunks[m->nchunks++] = mem;
		m->carve = mem;
		m->carve_left = (uint32_t)nb;
	}
	if (m->carved0 == UINT32_MAX)
		m->carved0 = m->nblocks;
	struct entry *b = (struct entry *)(void *)m->carve;
	m->carve += bs;
	m->carve_left--;
	return b;
}

/*
 * Ensures capacity for n entries in total. Block 0 starts small and doubles (by realloc) up to
 * the batch size, so a table of a few entries does not hold a whole batch; from then on every
 * block is a full batch (new_block). exact: a reserve's n, which a new chunk need not exceed.
 */
int rix__indexmap_grow_blocks(rix_indexmap *m, uint64_t n, bool exact)
{
	if (n <= capacity(m))
		return 0;
	uint32_t batch = 1u << m->shift;
	if (n <= batch) {
		uint32_t cap = m->cap0 ? m->cap0 * 2 : SMALL_BLOCK;
		while (cap < n)
			cap *= 2;
		return resize_block0(m, cap < batch ? cap : batch);
	}
	if (m->cap0 < batch) {
		int rc = resize_block0(m, batch);
		if (rc != 0)
			return rc;
	}
	uint64_t need = (n + batch - 1) >> m->shift;
	int rc = ensure_block_list(m, need);
	if (rc != 0)
		return rc;
	while (m->nblocks < need) {
		struct entry *b = new_block(m, need, exact);
		if (b == NULL)
			return rix_error_set(RIX_ENOMEM, "indexmap: out of memory for entry block");
		m->blocks[m->nblocks++] = b;
		set_room(m);
	}
	return 0;
}

/* The bytes of the newest chunk not carved into blocks yet. */
static size_t carve_spare(const rix_indexmap *m)
{
	return (size_t)m->carve_left * (sizeof(struct entry) << m->shift);
}

size_t rix__indexmap_blocks_memory(const rix_indexmap *m)
{
	return (size_t)m->blocks_cap * sizeof(struct entry *) + (size_t)capacity(m) * sizeof(struct entry) +
	       carve_spare(m) + (size_t)m->chunks_cap * sizeof(void *);
}

void rix__indexmap_free_blocks(rix_indexmap *m)
{
	for (uint32_t i = 0; i < m->nblocks && i < m->carved0; i++)
		rix_free(m->blocks[i]);
	rix_free(m->blocks);
	for (uint32_t i = 0; i < m->nchunks; i++)
		rix_free(m->chunks[i]);
	rix_free(m->chunks);
}
