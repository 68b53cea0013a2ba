/*
 * index/index.c — one index file's content: a pack table and a blob map per type.
 *
 *   packs[]        pack IDs, each once, numbered in order of first appearance
 *   pack_slots[]   open addressing (linear probing) over packs[]: slot = number + 1, 0 = empty;
 *                  kept at most half full; slots come from the tables' hash (hash.h) with a per-index random seed,
 *                  so crafted pack IDs in a hostile index file cannot pile up in one run
 *   maps[type]     rix_indexmap: blob ID -> (pack number, offset, length, uncompressed length)
 *
 * The JSON codec lives in index_json.c; the master index takes maps away when it merges.
 */
#include <string.h>

#include "rix/alloc.h"
#include "rix/error.h"
#include "index_internal.h"
#include "hash.h"

int rix_index_new(rix_index **out)
{
	return rix_index_new_batch(out, 0);
}

int rix_index_new_batch(rix_index **out, uint32_t batch)
{
	*out = NULL;
	rix_index *idx = rix_calloc(1, sizeof(*idx));
	if (idx == NULL)
		return rix_error_set(RIX_ENOMEM, "index: out of memory");
	idx->batch = batch;
	idx->pack_seed = rix__random_seed();
	for (int t = 0; t < RIX_BLOB_TYPES; t++) {
		int rc = rix_indexmap_new_batch(&idx->maps[t], batch);
		if (rc != 0) {
			rix_index_free(idx);
			return rc;
		}
	}
	*out = idx;
	return 0;
}

void rix_index_free(rix_index *idx)
{
	if (idx == NULL)
		return;
	for (int t = 0; t < RIX_BLOB_TYPES; t++)
		rix_indexmap_free(idx->maps[t]);
	rix_free(idx->packs);
	rix_free(idx->pack_slots);
	rix_free(idx->ids);
	rix_free(idx->supersedes);
	rix_free(idx);
}

static inline uint32_t pack_slot(const rix_index *idx, const rix_id *id, uint32_t cap)
{
	return (uint32_t)rix__hash_id(id, idx->pack_seed) & (cap - 1);
}

static int grow_pack_slots(rix_index *idx)
{
	uint32_t cap = idx->pack_slots_cap ? idx->pack_slots_cap * 2 : 64;
	uint32_t *slots = rix_calloc(cap, sizeof(uint32_t));
	if (slots == NULL)
		return rix_error_set(RIX_ENOMEM, "index: out of memory for pack table");
	for (uint32_t i = 0; i < idx->npacks; i++) {
		uint32_t s = pack_slot(idx, &idx->packs[i], cap);
		while (slots[s] != 0)
			s = (s + 1) & (cap - 1);
		slots[s] = i + 1;
	}
	rix_free(idx->pack_slots);
	idx->pack_slots = slots;
	idx->pack_slots_cap = cap;
	return 0;
}

int rix__index_pack_number(rix_index *idx, const rix_id *pack_id, uint32_t *num)
{
	if (idx->pack_slots_cap != 0) {
		uint32_t s = pack_slot(idx, pack_id, idx->pack_slots_cap);
		while (idx->pack_slots[s] != 0) {
			uint32_t i = idx->pack_slots[s] - 1;
			if (rix__id_eq(&idx->packs[i], pack_id)) {
				*num = i;
				return 0;
			}
			s = (s + 1) & (idx->pack_slots_cap - 1);
		}
	}
	if (idx->npacks >= 0x7FFFFFFEu)
		return rix_error_set(RIX_ELIMIT, "index: too many packs");
	if (idx->npacks == idx->packs_cap) {
		uint32_t cap = idx->packs_cap ? idx->packs_cap * 2 : 16;
		rix_id *p = rix_realloc(idx->packs, (size_t)cap * sizeof(rix_id));
		if (p == NULL)
			return rix_error_set(RIX_ENOMEM, "index: out of memory for pack table");
		idx->packs = p;
		idx->packs_cap = cap;
	}
	if ((uint64_t)(idx->npacks + 1) * 2 > idx->pack_slots_cap) {
		int rc = grow_pack_slots(idx);
		if (rc != 0)
			return rc;
	}
	uint32_t i = idx->npacks++;
	idx->packs[i] = *pack_id;
	uint32_t s = pack_slot(idx, pack_id, idx->pack_slots_cap);
	while (idx->pack_slots[s] != 0)
		s = (s + 1) & (idx->pack_slots_cap - 1);
	idx->pack_slots[s] = i + 1;
	*num = i;
	return 0;
}

int rix__index_add_group(rix_index *idx, rix_blob_type t, struct rix__add_group *g)
{
	size_t n = g->n;
	g->n = 0;
	return n > 0 ? rix_indexmap_add_many(idx->maps[t], g->ids, g->locs, n) : 0;
}

int rix__index_reserve(rix_index *idx, rix_blob_type t, size_t n)
{
	return rix_indexmap_reserve(idx->maps[t], rix_indexmap_count(idx->maps[t]) + n);
}

int rix_index_store_pack(rix_index *idx, const rix_id *pack_id, const rix_blob *blobs, size_t n)
{
	if (idx->final)
		return rix_error_set(RIX_EINVAL, "index: cannot store a pack in a final index");
	if (idx->maps[0] == NULL)
		return rix_error_set(RIX_EINVAL, "index: entries were handed to a master index");
	for (size_t i = 0; i < n; i++)
		if ((unsigned)blobs[i].type >= RIX_BLOB_TYPES)
			return rix_error_set(RIX_EINVAL, "index: blob %zu has type %d", i, (int)blobs[i].type);
	uint32_t num;
	int rc = rix__index_pack_number(idx, pack_id, &num);
	if (rc != 0)
		return rc;
	/* Each run of blobs of one type added as a group (a pack holds one type, as a rule). */
	struct rix__add_group g = { .n = 0 };
	for (size_t i = 0; i < n; i++) {
		const rix_loc loc = { num, blobs[i].offset, blobs[i].length, blobs[i].uncompressed_length };
		if (rix__add_group_put(&g, &blobs[i].id, &loc) || i + 1 == n || blobs[i + 1].type != blobs[i].type) {
			rc = rix__index_add_group(idx, blobs[i].type, &g);
			if (rc != 0)
				return rc;
		}
	}
	return 0;
}

static void fill_packed(const rix_index *idx, rix_blob_type t, const rix_id *id, const rix_loc *loc,
			rix_packed_blob *out)
{
	out->id = *id;
	out->pack_id = idx->packs[loc->pack];
	out->type = t;
	out->offset = loc->offset;
	out->length = loc->length;
	out->uncompressed_length = loc->uncompressed_length;
}

static const rix_indexmap *map_of(const rix_index *idx, rix_blob_type t)
{
	if ((unsigned)t >= RIX_BLOB_TYPES)
		return NULL;
	return idx->maps[t];
}

int rix_index_lookup(rix_packed_blob *out, const rix_index *idx, rix_blob_type t, const rix_id *id)
{
	const rix_indexmap *m = map_of(idx, t);
	rix_loc loc;
	if (m == NULL || rix_indexmap_lookup(&loc, m, id) != 0)
		return RIX_ENOTFOUND;
	if (out != NULL)
		fill_packed(idx, t, id, &loc, out);
	return 0;
}

size_t rix_index_lookup_all(rix_packed_blob *out, size_t max, const rix_index *idx,
			    rix_blob_type t, const rix_id *id)
{
	const rix_indexmap *m = map_of(idx, t);
	if (m == NULL)
		return 0;
	enum { LOCAL = 16 };
	rix_loc locs[LOCAL];
	size_t total = rix_indexmap_lookup_all(locs, LOCAL, m, id);
	if (total > LOCAL && max > LOCAL) {
		rix_loc *all = rix_malloc(total * sizeof(rix_loc));
		if (all != NULL) {
			rix_indexmap_lookup_all(all, total, m, id);
			for (size_t i = 0; i < total && i < max; i++)
				fill_packed(idx, t, id, &all[i], &out[i]);
			rix_free(all);
			return total;
		}
	}
	for (size_t i = 0; i < total && i < max && i < LOCAL; i++)
		fill_packed(idx, t, id, &locs[i], &out[i]);
	return total;
}

bool rix_index_has(const rix_index *idx, rix_blob_type t, const rix_id *id)
{
	const rix_indexmap *m = map_of(idx, t);
	return m != NULL && rix_indexmap_lookup(NULL, m, id) == 0;
}

int rix_index_size(uint32_t *size, const rix_index *idx, rix_blob_type t, const rix_id *id)
{
	const rix_indexmap *m = map_of(idx, t);
	rix_loc loc;
	if (m == NULL || rix_indexmap_lookup(&loc, m, id) != 0)
		return RIX_ENOTFOUND;
	*size = rix_blob_plain_size(loc.length, loc.uncompressed_length);
	return 0;
}

size_t rix_index_count(const rix_index *idx, rix_blob_type t)
{
	const rix_indexmap *m = map_of(idx, t);
	return m != NULL ? rix_indexmap_count(m) : 0;
}

size_t rix_index_pack_count(const rix_index *idx)
{
	return idx->npacks;
}

const rix_id *rix_index_pack_id(const rix_index *idx, uint32_t i)
{
	return i < idx->npacks ? &idx->packs[i] : NULL;
}

int rix_index_foreach(const rix_index *idx, rix_index_blob_fn fn, void *arg)
{
	for (int t = 0; t < RIX_BLOB_TYPES; t++) {
		const rix_indexmap *m = idx->maps[t];
		if (m == NULL)
			continue;
		uint32_t n = (uint32_t)rix_indexmap_count(m);
		for (uint32_t i = 0; i < n; i++) {
			const rix_id *id;
			rix_loc loc;
			rix_packed_blob pb;
			rix_indexmap_entry(&id, &loc, m, i);
			fill_packed(idx, (rix_blob_type)t, id, &loc, &pb);
			int rc = fn(arg, &pb);
			if (rc != 0)
				return rc;
		}
	}
	return 0;
}

/*
 * Grouping by pack without a second map: count blobs per pack, turn the counts into start
 * offsets (a counting sort), then drop every blob into its pack's run. One array of
 * rix_packed_blob for all blobs plus one u32 per pack, freed before returning.
 */
int rix_index_foreach_pack(const rix_index *idx, rix_index_pack_fn fn, void *arg)
{
	size_t total = rix_index_count(idx, RIX_BLOB_DATA) + rix_index_count(idx, RIX_BLOB_TREE);
	uint32_t *start = rix_calloc((size_t)idx->npacks + 1, sizeof(uint32_t));
	rix_packed_blob *all = rix_malloc((total ? total : 1) * sizeof(rix_packed_blob));
	if (start == NULL || all == NULL) {
		rix_free(start);
		rix_free(all);
		return rix_error_set(RIX_ENOMEM, "index: out of memory grouping %zu blobs", total);
	}
	for (int t = 0; t < RIX_BLOB_TYPES; t++) {
		const rix_indexmap *m = idx->maps[t];
		uint32_t n = m ? (uint32_t)rix_indexmap_count(m) : 0;
		for (uint32_t i = 0; i < n; i++) {
			rix_loc loc;
			rix_indexmap_entry(NULL, &loc, m, i);
			start[loc.pack + 1]++;
		}
	}
	for (uint32_t p = 0; p < idx->npacks; p++)
		start[p + 1] += start[p];
	for (int t = 0; t < RIX_BLOB_TYPES; t++) {
		const rix_indexmap *m = idx->maps[t];
		uint32_t n = m ? (uint32_t)rix_indexmap_count(m) : 0;
		for (uint32_t i = 0; i < n; i++) {
			const rix_id *id;
			rix_loc loc;
			rix_indexmap_entry(&id, &loc, m, i);
			fill_packed(idx, (rix_blob_type)t, id, &loc, &all[start[loc.pack]++]);
		}
	}
	/* start[p] now holds the end of pack p's run, which is where pack p + 1's begins. */
	int rc = 0;
	uint32_t begin = 0;
	for (uint32_t p = 0; p < idx->npacks && rc == 0; p++) {
		rc = fn(arg, &idx->packs[p], all + begin, start[p] - begin);
		begin = start[p];
	}
	rix_free(start);
	rix_free(all);
	return rc;
}

void rix_index_finalize(rix_index *idx)
{
	idx->final = true;
}

bool rix_index_is_final(const rix_index *idx)
{
	return idx->final;
}

static int push_id(rix_id **arr, size_t *n, size_t *cap, const rix_id *id)
{
	if (*n == *cap) {
		size_t c = *cap ? *cap * 2 : 4;
		rix_id *a = rix_realloc(*arr, c * sizeof(rix_id));
		if (a == NULL)
			return rix_error_set(RIX_ENOMEM, "index: out of memory");
		*arr = a;
		*cap = c;
	}
	(*arr)[(*n)++] = *id;
	return 0;
}

int rix_index_add_id(rix_index *idx, const rix_id *id)
{
	return push_id(&idx->ids, &idx->nids, &idx->ids_cap, id);
}

const rix_id *rix_index_ids(size_t *n, const rix_index *idx)
{
	*n = idx->nids;
	return idx->ids;
}

int rix_index_add_supersedes(rix_index *idx, const rix_id *id)
{
	return push_id(&idx->supersedes, &idx->nsupersedes, &idx->supersedes_cap, id);
}

const rix_id *rix_index_supersedes(size_t *n, const rix_index *idx)
{
	*n = idx->nsupersedes;
	return idx->supersedes;
}

size_t rix_index_memory(const rix_index *idx)
{
	size_t m = sizeof(*idx) + (size_t)idx->packs_cap * sizeof(rix_id) +
		   (size_t)idx->pack_slots_cap * sizeof(uint32_t) +
		   (idx->ids_cap + idx->supersedes_cap) * sizeof(rix_id);
	for (int t = 0; t < RIX_BLOB_TYPES; t++)
		if (idx->maps[t] != NULL)
			m += rix_indexmap_memory(idx->maps[t]);
	return m;
}
