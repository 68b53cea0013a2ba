/*
 * index/bulk_load.c — bulk loading of the master index: batches that loader threads fill and
 * commit, and rix_master_index_bulk_finish, which makes ranked tables (ranked.h) of what they
 * committed.
 *
 * Batches: a loader thread decodes one index file into its batch (local pack numbers), then
 * commits it: the batch's packs are appended to mi->bulk under bmu, and its entries collected in
 * 43 bytes each (entry_collect.h: 256 parts by the ID's first byte), pack numbers shifted. (A
 * streaming decode, rix_index_stream_decode, may take back a pack object it gave the batch: the
 * batch's mark and rollback keep and restore its counts, before each pack.) bulk_finish hands
 * the collections to the ranked build, which sorts each part in place and gives it back as its
 * entries land in the table; a load on top of a table collects the old table's entries too.
 * Peak memory for N entries loaded: about 43 N (the collection; the table, about 42 N, grows as
 * the parts are given back), plus the pack table and the batches in flight; the per-file
 * indexes of rix_master_index_add cost 52 N more. A loader that knows about how many entries
 * are coming reserves their room first (bulk_reserve: the repository's loader, from the files'
 * sizes), so that the parts do not move as they grow.
 *
 * Dedup-only (rix_master_index_set_dedup_only, captured by a batch when it is made): a batch
 * keeps only the ID of a data blob (32 bytes, no location); on commit the IDs go to bulk.dids,
 * which holds them in 31 bytes each (rix__idcollect: 256 parts by the first byte), and
 * bulk_finish builds the state's rix_idset from them part by part, each part's memory given
 * back as its IDs land in the set's block: the peak for D data blobs is about 31 D, never
 * 48 D (entries) or 32 D (an array of IDs) first. Trees stay entries, and a pack gets a number
 * (32 bytes in the pack table) only when a tree blob names it. A second bulk load on top of a
 * set collects its IDs again with the new ones and builds a new set.
 */
#include <pthread.h>
#include <string.h>

#include "rix/alloc.h"
#include "rix/error.h"
#include "rix/idset.h"
#include "entry_collect.h"
#include "index_internal.h"
#include "master_index_internal.h"
#include "ranked.h"

struct rix_master_batch {
	rix_master_index *mi;
	rix_index_stream_sink sink; /* sink.sink: what rix_master_batch_sink gives */
	rix_id *packs;
	size_t npacks, packs_cap;
	struct fentry *e[RIX_BLOB_TYPES];
	size_t n[RIX_BLOB_TYPES], cap[RIX_BLOB_TYPES];
	bool dedup_only; /* data blobs: IDs only, into d */
	rix_id *d;
	size_t nd, dcap;
	/* Dedup-only: the file's packs as named (sp), each given a number in packs only when a
	 * tree blob is met in it (spnum; UINT32_MAX until then): packs of data blobs alone are
	 * not kept (32 bytes a pack, 2 a data blob in packs of 16). */
	rix_id *sp;
	uint32_t *spnum;
	size_t nsp, spcap, spnumcap;
	/* The counts at the stream decoder's last mark (rix_index_stream_sink). */
	size_t mark_npacks, mark_nd, mark_nsp, mark_n[RIX_BLOB_TYPES];
};

/* Room for need elements at least, doubling from 1024. */
static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap)
		return 0;
	size_t c = *cap ? *cap : 1024;
	while (c < need)
		c *= 2;
	void *q = rix_realloc(*p, c * elem);
	if (q == NULL)
		return rix_error_set(RIX_ENOMEM, "master index: out of memory for %zu bulk entries", c);
	*p = q;
	*cap = c;
	return 0;
}

/* Appends a pack to the batch's table: its number there in *num. */
static int add_pack(rix_master_batch *b, const rix_id *pack_id, uint32_t *num)
{
	int rc = grow((void **)&b->packs, &b->packs_cap, b->npacks + 1, sizeof(rix_id));
	if (rc != 0)
		return rc;
	b->packs[b->npacks] = *pack_id;
	*num = (uint32_t)b->npacks++;
	return 0;
}

static int batch_pack(void *arg, const rix_id *pack_id, uint32_t *num)
{
	rix_master_batch *b = arg;
	if (b->dedup_only) {
		int rc = grow((void **)&b->sp, &b->spcap, b->nsp + 1, sizeof(rix_id));
		if (rc == 0)
			rc = grow((void **)&b->spnum, &b->spnumcap, b->nsp + 1, sizeof(uint32_t));
		if (rc == 0 && b->nsp >= 0xFFFFFFFEu)
			rc = rix_error_set(RIX_ELIMIT, "master index: too many packs in one index file");
		if (rc != 0)
			return rc;
		b->sp[b->nsp] = *pack_id;
		b->spnum[b->nsp] = UINT32_MAX;
		*num = (uint32_t)b->nsp++;
		return 0;
	}
	return add_pack(b, pack_id, num);
}

static int batch_blob(void *arg, rix_blob_type t, const rix_id *id, const rix_loc *loc)
{
	rix_master_batch *b = arg;
	if (t == RIX_BLOB_DATA && b->dedup_only) {
		int rc = grow((void **)&b->d, &b->dcap, b->nd + 1, sizeof(rix_id));
		if (rc == 0)
			b->d[b->nd++] = *id;
		return rc;
	}
	rix_loc l = *loc;
	if (b->dedup_only) { /* a tree: its pack gets a number now, if it has none yet */
		if (l.pack >= b->nsp)
			return rix_error_set(RIX_ECORRUPT, "master index: blob of pack %u, not named", l.pack);
		if (b->spnum[l.pack] == UINT32_MAX) {
			uint32_t num;
			int rc = add_pack(b, &b->sp[l.pack], &num);
			if (rc != 0)
				return rc;
			b->spnum[l.pack] = num;
		}
		l.pack = b->spnum[l.pack];
	}
	int rc = grow((void **)&b->e[t], &b->cap[t], b->n[t] + 1, sizeof(struct fentry));
	if (rc != 0)
		return rc;
	b->e[t][b->n[t]].id = *id;
	b->e[t][b->n[t]++].loc = l;
	return 0;
}

/*
 * The stream decoder's mark and rollback: a rollback drops what came after the mark by its
 * counts alone. That is all of it: the decoder marks before each pack object, whose blobs name
 * only that pack, so a dedup-only batch's spnum entries of packs before the mark (a number
 * given when a tree blob names the pack) are never set after it; those of the dropped packs go
 * with them (each is set to UINT32_MAX when its pack is added again).
 */
static void batch_mark(void *arg)
{
	rix_master_batch *b = arg;
	b->mark_npacks = b->npacks;
	b->mark_nd = b->nd;
	b->mark_nsp = b->nsp;
	for (int t = 0; t < RIX_BLOB_TYPES; t++)
		b->mark_n[t] = b->n[t];
}

static void batch_rollback(void *arg)
{
	rix_master_batch *b = arg;
	b->npacks = b->mark_npacks;
	b->nd = b->mark_nd;
	b->nsp = b->mark_nsp;
	for (int t = 0; t < RIX_BLOB_TYPES; t++)
		b->n[t] = b->mark_n[t];
}

int rix_master_index_batch_new(rix_master_batch **out, rix_master_index *mi)
{
	*out = rix_calloc(1, sizeof(**out));
	if (*out == NULL)
		return rix_error_set(RIX_ENOMEM, "master index: out of memory");
	(*out)->mi = mi;
	(*out)->dedup_only = mi->dedup_only;
	(*out)->sink = (rix_index_stream_sink){ { batch_pack, batch_blob, NULL, *out }, batch_mark, batch_rollback };
	return 0;
}

const rix_index_sink *rix_master_batch_sink(rix_master_batch *b)
{
	return &b->sink.sink;
}

const rix_index_stream_sink *rix_master_batch_stream_sink(rix_master_batch *b)
{
	return &b->sink;
}

void rix_master_batch_discard(rix_master_batch *b)
{
	b->npacks = 0;
	b->nd = 0;
	b->nsp = 0;
	for (int t = 0; t < RIX_BLOB_TYPES; t++)
		b->n[t] = 0;
	batch_mark(b);
}

void rix_master_batch_free(rix_master_batch *b)
{
	if (b == NULL)
		return;
	rix_free(b->packs);
	rix_free(b->d);
	rix_free(b->sp);
	rix_free(b->spnum);
	for (int t = 0; t < RIX_BLOB_TYPES; t++)
		rix_free(b->e[t]);
	rix_free(b);
}

int rix_master_index_bulk_reserve(rix_master_index *mi, rix_blob_type t, size_t n)
{
	if ((unsigned)t >= RIX_BLOB_TYPES)
		return rix_error_set(RIX_EINVAL, "master index: no blob type %d", (int)t);
	struct bulk *k = &mi->bulk;
	int rc = 0;
	pthread_mutex_lock(&k->bmu);
	bool ids_only = t == RIX_BLOB_DATA && mi->dedup_only;
	if (!ids_only && n > 0 && k->c[t] == NULL)
		rc = rix__ecollect_new(&k->c[t]);
	if (!ids_only && n > 0 && rc == 0)
		rc = rix__ecollect_reserve(k->c[t], n);
	pthread_mutex_unlock(&k->bmu);
	return rc;
}

int rix_master_batch_commit(rix_master_batch *b, const rix_id *index_id)
{
	struct bulk *k = &b->mi->bulk;
	pthread_mutex_lock(&k->bmu);
	int rc = grow((void **)&k->packs, &k->packs_cap, k->npacks + b->npacks, sizeof(rix_id));
	uint32_t base = (uint32_t)k->npacks;
	for (int t = 0; rc == 0 && t < RIX_BLOB_TYPES; t++) {
		if (b->n[t] > 0 && k->c[t] == NULL)
			rc = rix__ecollect_new(&k->c[t]);
		if (rc == 0 && b->n[t] > 0)
			rc = rix__ecollect_room(k->c[t], b->e[t], b->n[t], base);
	}
	if (rc == 0 && index_id != NULL)
		rc = grow((void **)&k->ids, &k->ids_cap, k->nids + 1, sizeof(rix_id));
	if (rc == 0 && k->npacks + b->npacks > 0xFFFFFFFEu)
		rc = rix_error_set(RIX_ELIMIT, "master index: too many packs");
	if (rc == 0 && b->nd > 0 && k->dids == NULL)
		rc = rix__idcollect_new(&k->dids);
	if (rc == 0 && b->nd > 0) /* last: nothing fails after it, so a batch goes in whole or not */
		rc = rix__idcollect_add(k->dids, b->d, b->nd);
	if (rc == 0) {
		if (b->npacks)
			memcpy(k->packs + k->npacks, b->packs, b->npacks * sizeof(rix_id));
		k->npacks += b->npacks;
		for (int t = 0; t < RIX_BLOB_TYPES; t++)
			if (b->n[t] > 0)
				rix__ecollect_put(k->c[t], b->e[t], b->n[t], base);
		if (index_id != NULL)
			k->ids[k->nids++] = *index_id;
	}
	pthread_mutex_unlock(&k->bmu);
	rix_master_batch_discard(b);
	return rc;
}

void rix__bulk_clear(struct bulk *k)
{
	for (int t = 0; t < RIX_BLOB_TYPES; t++) {
		rix__ecollect_free(k->c[t]);
		k->c[t] = NULL;
	}
	rix_free(k->packs);
	rix_free(k->ids);
	rix__idcollect_free(k->dids);
	k->packs = NULL;
	k->ids = NULL;
	k->dids = NULL;
	k->npacks = k->packs_cap = k->nids = k->ids_cap = 0;
}

static int dset_collect(void *arg, const rix_id *id)
{
	return rix__idcollect_add(arg, id, 1);
}

/*
 * next->dset: cur's carried over when no data blob IDs were committed; else built from the
 * collected IDs (k->dids, consumed), with cur's IDs added when cur has a set.
 */
static int build_dset(struct mstate *next, const struct mstate *cur, struct bulk *k, unsigned workers)
{
	if (rix__idcollect_count(k->dids) == 0) {
		next->dset = cur->dset;
		return 0;
	}
	int rc = 0;
	if (rix_idset_count(cur->dset) > 0) /* a load on top of a set: the old IDs with the new */
		rc = rix_idset_foreach(cur->dset, dset_collect, k->dids);
	if (rc == 0)
		rc = rix__idset_build_collected(&next->dset, k->dids, workers);
	k->dids = NULL; /* consumed either way */
	return rc;
}

int rix_master_index_bulk_finish(rix_master_index *mi)
{
	struct bulk *k = &mi->bulk;
	pthread_mutex_lock(&mi->wmu);
	pthread_mutex_lock(&k->bmu);
	struct mstate *cur = atomic_load(&mi->state);
	struct mstate *next = NULL;
	rix_id *nids = NULL;
	int rc = 0;
	if (k->npacks == 0 && k->nids == 0 && rix__ecollect_count(k->c[0]) == 0 && rix__ecollect_count(k->c[1]) == 0 &&
	    rix__idcollect_count(k->dids) == 0) {
		for (int t = 0; t < RIX_BLOB_TYPES; t++) { /* room reserved for nothing: given back */
			rix__ecollect_free(k->c[t]);
			k->c[t] = NULL;
		}
		goto done;
	}
	uint64_t packs_total = (uint64_t)cur->npacks + k->npacks;
	if (packs_total > 0xFFFFFFFEu || rix__ecollect_count(k->c[0]) > 0xFFFFFFFEu ||
	    rix__ecollect_count(k->c[1]) > 0xFFFFFFFEu) {
		rc = rix_error_set(RIX_ELIMIT, "master index: over the limit of entries or packs");
		goto done;
	}
	next = rix_calloc(1, sizeof(*next));
	/* The first load's pack table is the committed one itself (no copy beside it while the
	 * tables are built); a load on top copies the old table and the new packs after it. */
	bool adopt = next != NULL && cur->npacks == 0 && k->npacks > 0;
	if (adopt) { /* its spare room given back, as the entries' below */
		rix_id *shrunk = rix_realloc(k->packs, k->npacks * sizeof(rix_id));
		next->packs = shrunk != NULL ? shrunk : k->packs;
		k->packs = NULL;
		k->packs_cap = 0;
	} else if (next != NULL) {
		next->packs = rix_malloc((size_t)(packs_total ? packs_total : 1) * sizeof(rix_id));
	}
	nids = rix_malloc((mi->nindex_ids + k->nids + 1) * sizeof(rix_id));
	if (next == NULL || next->packs == NULL || nids == NULL) {
		rc = rix_error_set(RIX_ENOMEM, "master index: out of memory for the bulk load");
		goto done;
	}
	next->npacks = (uint32_t)packs_total;
	if (cur->npacks)
		memcpy(next->packs, cur->packs, (size_t)cur->npacks * sizeof(rix_id));
	if (k->npacks && !adopt)
		memcpy(next->packs + cur->npacks, k->packs, k->npacks * sizeof(rix_id));
	if (mi->nindex_ids)
		memcpy(nids, mi->index_ids, mi->nindex_ids * sizeof(rix_id));
	if (k->nids)
		memcpy(nids + mi->nindex_ids, k->ids, k->nids * sizeof(rix_id));
	/* A pack named by two index files (an interrupted prune's or repair's state): its entries
	 * are there twice; the build drops one of each, as restic's merge does. Asked before the
	 * build, so that its table (4-8 bytes a pack) is not on top of the tables'. */
	int rep = k->npacks > 0 ? rix__packs_repeat(next->packs, next->npacks) : 0;
	if (rep < 0) {
		rc = rix_error_set(RIX_ENOMEM, "master index: out of memory for the bulk load");
		goto done;
	}
	for (int t = 0; t < RIX_BLOB_TYPES; t++) {
		/* The collection is the build's from here (sorted in place, given back as the table
		 * grows), whatever happens: a load on top adds it to the top, or the old entries to it. */
		rc = rix__ecollect_shift_packs(k->c[t], cur->npacks);
		if (rc != 0)
			goto done;
		struct rix__ecollect *c = k->c[t];
		k->c[t] = NULL;
		rc = rix__mstate_add(next, (rix_blob_type)t, cur->table[t], cur->top[t], false, c,
				     rep > 0 ? next->packs : NULL, mi->workers, NULL);
		if (rc != 0)
			goto done;
	}
	rc = build_dset(next, cur, k, mi->workers);
	if (rc != 0)
		goto done;
	rix__master_index_publish(mi, cur, next, nids, mi->nindex_ids + k->nids, false);
	next = NULL;
	nids = NULL;
	rix__bulk_clear(k);
done:
	rix__mstate_forget_shared(next, cur);
	rix__mstate_free(next); /* on failure: tables built so far, arrays built in place with them */
	if (rc != 0) /* the committed batches are dropped; the searchable state is as it was */
		rix__bulk_clear(k);
	rix_free(nids);
	pthread_mutex_unlock(&k->bmu);
	pthread_mutex_unlock(&mi->wmu);
	return rc;
}
