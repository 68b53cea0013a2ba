/*
 * index/indexmap_internal.h — the layout of rix_indexmap (told atop indexmap.c), shared by its
 * two files: indexmap.c (the lines: adds, lookups, growth) and indexmap_blocks.c (the entries'
 * storage: blocks, and the chunks they are carved from). Private to them.
 */
#ifndef RIX_INDEXMAP_INTERNAL_H
#define RIX_INDEXMAP_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rix/indexmap.h"
#include "tagmatch.h"

#define SLOTS RIX__TAGS        /* slots a line */
#define MAX_BATCH (1u << 20) /* the largest batch: entries a block */

struct entry {
	rix_id id;
	rix_loc loc;
};
_Static_assert(sizeof(struct entry) == 48, "entry must stay 48 bytes");

struct line {
	uint8_t tag[SLOTS];   /* 0: free; else the tag of the slot's ID */
	uint32_t over;        /* the filter bits of the IDs stored past this line */
	uint32_t slot[SLOTS]; /* entry numbers */
} __attribute__((aligned(64)));
_Static_assert(sizeof(struct line) == 64, "a line is one cache line");

struct rix_indexmap {
	struct line *lines;  /* nlines, 64-byte aligned inside lines_mem; &no_lines before any */
	void *lines_mem;
	uint32_t nlines;     /* 0 until the first add or reserve */
	uint32_t used;       /* slots in use: the distinct IDs */
	uint32_t count;      /* entries */
	uint32_t shift;      /* batch = 1 << shift entries per block */
	uint32_t nblocks;    /* blocks allocated */
	uint32_t cap0;       /* entries block 0 holds: grows to the batch size, then stays */
	uint32_t blocks_cap; /* slots in blocks[] */
	uint32_t older_cap;  /* words in older[]: 0 or a power of two */
	uint32_t older_n;    /* records in older[] */
	uint32_t shadow_words;
	struct entry **blocks;
	uint32_t carved0;    /* blocks [carved0, nblocks) are carved from chunks; UINT32_MAX if none */
	uint32_t carve_left; /* blocks left in the newest chunk */
	uint32_t nchunks;
	uint32_t chunks_cap;
	void **chunks;       /* CHUNK bytes each, or fewer for a reserve; carved into blocks */
	char *carve;         /* the newest chunk's next block */
	uint64_t *older;     /* (newer + 1) << 32 | older; 0 = empty; open addressing */
	uint64_t *shadow;    /* bit e: entry e is an older copy (not in the lines) */
	uint64_t keys[4];    /* the hash's seed words (rix__hash_keys) */
	uint64_t room;       /* entries the blocks hold, at most RIX_INDEXMAP_MAX_ENTRIES */
	uint64_t max_used;   /* distinct IDs the lines take before they grow (MAX_FILL) */
	uint32_t emask;      /* batch - 1 */
};

/* Entry e (e < the blocks' capacity). */
static inline struct entry *entry_at(const rix_indexmap *m, uint32_t e)
{
	return &m->blocks[e >> m->shift][e & m->emask];
}

/* ---- The entries' storage (indexmap_blocks.c) ---------------------------------------------- */

/*
 * Ensures the blocks hold n entries in total (m->room says how many they hold). exact: a
 * reserve's n, which a new chunk need not exceed. @return 0, RIX_ENOMEM (the table as it was,
 * blocks added before the failure kept).
 */
int rix__indexmap_grow_blocks(rix_indexmap *m, uint64_t n, bool exact);

/* Bytes the storage holds: the blocks' entries, the newest chunk's part not carved yet, the
 * block and chunk lists. */
size_t rix__indexmap_blocks_memory(const rix_indexmap *m);

/* Frees the blocks, the chunks and their lists. */
void rix__indexmap_free_blocks(rix_indexmap *m);

#endif
