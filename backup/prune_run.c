/*
 * backup/prune_run.c — running a prune's plan (rix_prune_run; the plan is pruner.c's):
 * unreferenced packs removed; the blobs to keep read from the packs to repack (verified) and
 * copied into new packs as they are stored, or saved again from the plaintext when restic would
 * compress them; flushed; the index rewritten without the packs that go, old index files
 * removed; packs removed. The order survives a crash at any point (rix/pruner.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rix/alloc.h"
#include "rix/error.h"
#include "rix/indexmap.h"
#include "rix/master_index.h"
#include "rix/pruner.h"
#include "pruner_internal.h"
#include "../common/pool.h"

/* ---- running it --------------------------------------------------------------------------------- */

/* A blob to read from a pack being repacked. */
struct rblob {
	uint32_t slot; /* its pack */
	rix_blob b;
};

struct repacker {
	rix_prune_plan *p;
	pthread_mutex_t mu;
	struct rblob *v;
	size_t n, cap;
	size_t *starts; /* the first blob of each pack to read: starts[0..npacks], starts[npacks] = n */
	size_t npacks, next, done;
	rix_indexmap *saved[RIX_BLOB_TYPES]; /* blobs saved again: each once */
	uint64_t nsaved;
	int err;
	char errmsg[512];
};

/* Whether a copy of (t, id) is in a pack that is kept. */
static bool kept_elsewhere(rix_prune_plan *p, rix_blob_type t, const rix_id *id)
{
	rix_packed_blob loc[8];
	size_t n = rix_master_index_lookup_all(loc, 8, p->mi, t, id);
	rix_packed_blob *all = loc;
	if (n > 8) {
		all = rix_malloc(n * sizeof(*all));
		if (all == NULL)
			return false; /* repacked again: a copy too many, never one too few */
		size_t m = rix_master_index_lookup_all(all, n, p->mi, t, id);
		n = m < n ? m : n;
	}
	bool kept = false;
	for (size_t i = 0; i < n && !kept; i++) {
		rix_loc l;
		kept = rix_indexmap_lookup(&l, p->packmap, &all[i].pack_id) == 0 && p->packs[l.pack].action == A_KEEP;
	}
	if (all != loc)
		rix_free(all);
	return kept;
}

static int collect_repack(void *arg, const rix_packed_blob *pb)
{
	struct repacker *rp = arg;
	rix_prune_plan *p = rp->p;
	rix_loc l;
	if (rix_indexmap_lookup(&l, p->packmap, &pb->pack_id) != 0 || p->packs[l.pack].action != A_REPACK)
		return 0;
	if (!rix__prune_used_has(p, pb->type, &pb->id) || kept_elsewhere(p, pb->type, &pb->id))
		return 0;
	if (rp->n == rp->cap) {
		size_t cap = rp->cap ? 2 * rp->cap : 1024;
		struct rblob *v = rix_realloc(rp->v, cap * sizeof(*v));
		if (v == NULL)
			return rix__prune_oom();
		rp->v = v;
		rp->cap = cap;
	}
	rp->v[rp->n++] = (struct rblob){ .slot = l.pack, .b = rix_blob_in_pack(pb) };
	return 0;
}

static int cmp_rblob(const void *a, const void *b)
{
	const struct rblob *x = a, *y = b;
	if (x->slot != y->slot)
		return x->slot < y->slot ? -1 : 1;
	return (x->b.offset > y->b.offset) - (x->b.offset < y->b.offset);
}

static void repack_fail(struct repacker *rp, int rc, const char *msg)
{
	pthread_mutex_lock(&rp->mu);
	if (rp->err == 0) {
		rp->err = rc;
		snprintf(rp->errmsg, sizeof(rp->errmsg), "%s", msg);
	}
	pthread_mutex_unlock(&rp->mu);
}

struct repack_job {
	struct repacker *rp;
	rix_blob *list;
	int version;           /* the repository's */
	rix_compression mode;  /* how it saves data blobs */
};

/*
 * Whether blob b (n plaintext bytes, verified) goes into its new pack as it is stored, rather than
 * being saved again from its plaintext. restic 0.14's repack saves every blob through
 * saveAndEncrypt, which in version 2 compresses tree blobs always and data blobs unless
 * compression is off, and in version 1 nothing. Copied as stored:
 *  - a compressed blob: its frame (libzstd's or Go's, as written) holds the plaintext a new frame
 *    would, and its size stays (restic writes a new frame, of another size; with compression off
 *    it would store the plaintext, larger);
 *  - a version 1 blob, an uncompressed data blob where compression is off, an empty blob (the
 *    codec never compresses one): saved again, each would get the same form.
 * The rest, uncompressed blobs restic would compress (trees; data blobs where compression is on:
 * what tree packs and --repack-uncompressed are repacked for), are compressed now.
 */
static bool copy_as_stored(const struct repack_job *j, const rix_blob *b, size_t n)
{
	if (b->uncompressed_length != 0 || j->version < 2 || n == 0)
		return true;
	return b->type == RIX_BLOB_DATA && j->mode == RIX_COMPRESSION_OFF;
}

/* A blob read from a pack being repacked (verified; stored: its form in the pack): saved again,
 * unless saved already. */
static int repack_blob(void *arg, size_t i, int code, const uint8_t *data, size_t n, const uint8_t *stored)
{
	struct repack_job *j = arg;
	struct repacker *rp = j->rp;
	const rix_blob *b = &j->list[i];
	uint8_t *other = NULL;
	if (code != 0) { /* a damaged copy: another one, if the index has one that reads (saved from
			  * its plaintext: rix_repo_load_blob gives no stored form) */
		char msg[400];
		snprintf(msg, sizeof(msg), "%s", rix_error_last());
		size_t on = 0;
		if (rix_repo_load_blob(&other, &on, rp->p->r, b->type, &b->id) != 0) {
			repack_fail(rp, code, msg);
			return code;
		}
		data = other;
		n = on;
		stored = NULL;
	}
	pthread_mutex_lock(&rp->mu);
	static const rix_loc none = { 0 };
	bool todo = rix_indexmap_lookup(NULL, rp->saved[b->type], &b->id) != 0;
	int rc = todo ? rix_indexmap_add(rp->saved[b->type], &b->id, &none) : 0;
	if (rc == 0 && todo)
		rp->nsaved++;
	pthread_mutex_unlock(&rp->mu);
	if (rc == 0 && todo && stored != NULL && copy_as_stored(j, b, n))
		rc = rix_repo_save_blob_stored(rp->p->r, b, stored);
	else if (rc == 0 && todo)
		rc = rix_repo_save_blob_copy(NULL, NULL, rp->p->r, b->type, data, n);
	rix_free(other);
	if (rc != 0)
		repack_fail(rp, rc, rix_error_last());
	return rc;
}

static void *repack_worker(void *arg)
{
	struct repacker *rp = arg;
	rix_blob *list = NULL;
	size_t cap = 0;
	for (;;) {
		pthread_mutex_lock(&rp->mu);
		size_t k = rp->err == 0 && rp->next < rp->npacks ? rp->next++ : SIZE_MAX;
		pthread_mutex_unlock(&rp->mu);
		if (k == SIZE_MAX)
			break;
		size_t a = rp->starts[k], b = rp->starts[k + 1];
		if (b - a > cap) {
			rix_free(list);
			cap = b - a;
			list = rix_malloc(cap * sizeof(*list));
			if (list == NULL) {
				cap = 0;
				repack_fail(rp, RIX_ENOMEM, "prune: out of memory");
				break;
			}
		}
		for (size_t i = a; i < b; i++)
			list[i - a] = rp->v[i].b;
		struct repack_job j = { rp, list, rix_repo_config(rp->p->r)->version, rix_repo_compression(rp->p->r) };
		const rix_id *pack = &rp->p->packs[rp->v[a].slot].id;
		int rc = rix_repo_load_pack_blobs_stored(rp->p->r, pack, list, b - a, repack_blob, &j);
		if (rc != 0)
			repack_fail(rp, rc, rix_error_last());
		pthread_mutex_lock(&rp->mu);
		size_t done = ++rp->done;
		pthread_mutex_unlock(&rp->mu);
		rix__prune_progress(rp->p, "packs repacked", done, rp->npacks);
	}
	rix_free(list);
	return NULL;
}

static int run_repack(rix_prune_plan *p)
{
	struct repacker rp = { .p = p };
	pthread_mutex_init(&rp.mu, NULL);
	int rc = rix_master_index_foreach(p->mi, collect_repack, &rp);
	for (int t = 0; t < RIX_BLOB_TYPES && rc == 0; t++)
		rc = rix_indexmap_new(&rp.saved[t]);
	if (rc == 0) {
		if (rp.n > 1)
			qsort(rp.v, rp.n, sizeof(*rp.v), cmp_rblob);
		rp.starts = rix_malloc((rp.n + 1) * sizeof(*rp.starts));
		if (rp.starts == NULL)
			rc = rix__prune_oom();
	}
	if (rc == 0) {
		for (size_t i = 0; i < rp.n; i++)
			if (i == 0 || rp.v[i].slot != rp.v[i - 1].slot)
				rp.starts[rp.npacks++] = i;
		rp.starts[rp.npacks] = rp.n;
		/* the distinct blobs to keep: each must be saved once */
		uint64_t distinct = 0;
		rix_indexmap *seen[RIX_BLOB_TYPES] = { NULL, NULL };
		for (int t = 0; t < RIX_BLOB_TYPES && rc == 0; t++)
			rc = rix_indexmap_new(&seen[t]);
		static const rix_loc none = { 0 };
		for (size_t i = 0; i < rp.n && rc == 0; i++) {
			rix_blob *b = &rp.v[i].b;
			if (rix_indexmap_lookup(NULL, seen[b->type], &b->id) != 0) {
				rc = rix_indexmap_add(seen[b->type], &b->id, &none);
				distinct++;
			}
		}
		rix_indexmap_free(seen[0]);
		rix_indexmap_free(seen[1]);
		if (rc == 0 && rp.npacks > 0) {
			unsigned want = p->o.workers ? p->o.workers : rix_repo_workers(p->r);
			rix__pool_run(rix__pool_size(want, 8), repack_worker, &rp);
			rc = rp.err != 0 ? rix_error_set(rp.err, "repack: %s", rp.errmsg) : 0;
		}
		/* What the workers held goes before the flush writes the new packs' index files. */
		for (int t = 0; t < RIX_BLOB_TYPES; t++) {
			rix_indexmap_free(rp.saved[t]);
			rp.saved[t] = NULL;
		}
		rix_free(rp.v);
		rp.v = NULL;
		rix_free(rp.starts);
		rp.starts = NULL;
		(void)rix_repo_release_buffers(p->r);
		if (rc == 0)
			rc = rix_repo_flush(p->r);
		if (rc == 0 && rp.nsaved != distinct)
			rc = rix_error_set(RIX_ECORRUPT, "internal error: %" PRIu64 " of %" PRIu64 " blobs were not repacked",
					   distinct - rp.nsaved, distinct);
	}
	rix_indexmap_free(rp.saved[0]);
	rix_indexmap_free(rp.saved[1]);
	rix_free(rp.v);
	rix_free(rp.starts);
	pthread_mutex_destroy(&rp.mu);
	return rc;
}

/* ---- the new index ------------------------------------------------------------------------------ */

/* Packs of the index as it is now (the repack's new ones too), for the rewrite. */
/* A pack in the rewrite, by its number in p->packs (the plan's, with the repack's new packs). */
struct rpack {
	uint32_t n;    /* its blobs */
	uint32_t fill; /* filled in this batch */
	size_t off;    /* its first blob in the batch */
};

/*
 * The first pass over the master index finds each entry's pack in the plan's pack table (adding
 * the repack's new packs to it) and records its number (order[i] for the i-th entry of the
 * walk), so that the passes that fill the batches look nothing up: they read the next number,
 * and check that the entry's pack ID is that pack's (the walk's order holds while the index does
 * not change).
 */
struct rewrite {
	rix_prune_plan *p;
	struct rpack *packs; /* [p->npacks] */
	size_t cap;
	uint32_t *order; /* each entry's pack number, in the walk's order */
	size_t nentries, order_cap;
	size_t next;        /* the entry the fill pass is at */
	size_t first, last; /* the batch: packs [first, last) */
	rix_blob *blobs;
};

/* Whether pack s leaves the index: repacked, removed, or missing and not needed. */
static bool pack_goes(const rix_prune_plan *p, uint32_t s)
{
	uint8_t a = p->packs[s].action;
	return a == A_REPACK || a == A_REMOVE || a == A_IGNORE;
}

static int count_pack(void *arg, const rix_packed_blob *pb)
{
	struct rewrite *w = arg;
	rix_prune_plan *p = w->p;
	size_t before = p->npacks;
	uint32_t s = rix__prune_pack_slot(p, &pb->pack_id);
	if (s == UINT32_MAX)
		return rix__prune_oom();
	if (p->npacks > before)
		p->st.packs_written++; /* a pack of the repack */
	if (p->npacks > w->cap) {
		size_t cap = p->packs_cap;
		struct rpack *v = rix_realloc(w->packs, cap * sizeof(*v));
		if (v == NULL)
			return rix__prune_oom();
		memset(v + w->cap, 0, (cap - w->cap) * sizeof(*v));
		w->packs = v;
		w->cap = cap;
	}
	if (w->nentries == w->order_cap) {
		size_t cap = w->order_cap ? 2 * w->order_cap : 4096;
		uint32_t *v = rix_realloc(w->order, cap * sizeof(*v));
		if (v == NULL)
			return rix__prune_oom();
		w->order = v;
		w->order_cap = cap;
	}
	w->order[w->nentries++] = s;
	w->packs[s].n++;
	return 0;
}

static int changed(void)
{
	return rix_error_set(RIX_ECORRUPT, "prune: the index changed while prune rewrote it");
}

static int fill_batch(void *arg, const rix_packed_blob *pb)
{
	struct rewrite *w = arg;
	if (w->next >= w->nentries)
		return changed();
	uint32_t s = w->order[w->next++];
	if (s < w->first || s >= w->last || pack_goes(w->p, s))
		return 0;
	struct rpack *rp = &w->packs[s];
	if (rp->fill >= rp->n || memcmp(&w->p->packs[s].id, &pb->pack_id, sizeof(rix_id)) != 0)
		return changed();
	w->blobs[rp->off + rp->fill++] = rix_blob_in_pack(pb);
	return 0;
}

static int cmp_blob_offset(const void *a, const void *b)
{
	const rix_blob *x = a, *y = b;
	return (x->offset > y->offset) - (x->offset < y->offset);
}

/* Blobs held at once while rewriting: batches of packs of about a quarter of the blobs kept (so
 * at most about four passes over the master index, one a batch; 12 MiB of rix_blob a million
 * blobs kept), at least 256 Ki blobs. One buffer serves every batch. */
#define REWRITE_PASSES 4
#define REWRITE_BATCH_MIN ((uint64_t)1 << 18)

static int rewrite_index(rix_prune_plan *p, rix_id **old, size_t *nold)
{
	rix__prune_say(p, 1, "rebuilding index");
	struct rewrite w = { .p = p };
	rix_index_writer *iw = NULL;
	int rc = rix_master_index_index_ids(old, nold, p->mi);
	/* One slot a pack of the plan at least: count_pack grows it as the repack's packs come. */
	w.cap = p->packs_cap > 0 ? p->packs_cap : 1;
	if (rc == 0 && (w.packs = rix_calloc(w.cap, sizeof(*w.packs))) == NULL)
		rc = rix__prune_oom();
	/* And one number an entry (grown by count_pack should the index hold more by then). */
	w.order_cap = rix_master_index_count(p->mi, RIX_BLOB_DATA) + rix_master_index_count(p->mi, RIX_BLOB_TREE);
	if (rc == 0 && w.order_cap > 0 && (w.order = rix_malloc(w.order_cap * sizeof(*w.order))) == NULL)
		rc = rix__prune_oom();
	if (rc == 0)
		rc = rix_master_index_foreach(p->mi, count_pack, &w);
	if (rc == 0)
		rc = rix_index_writer_new(&iw, p->r, *old, *nold);
	size_t npacks = rc == 0 ? p->npacks : 0;
	uint64_t total = 0;
	for (size_t i = 0; i < npacks; i++)
		total += pack_goes(p, (uint32_t)i) ? 0 : w.packs[i].n;
	uint64_t done = 0, batch = total / REWRITE_PASSES + 1, blobs_cap = 0;
	if (batch < REWRITE_BATCH_MIN)
		batch = REWRITE_BATCH_MIN;
	if (p->o.rewrite_batch != 0)
		batch = p->o.rewrite_batch;
	for (size_t first = 0; rc == 0 && first < npacks;) {
		size_t last = first;
		uint64_t sum = 0;
		while (last < npacks && (last == first || sum + w.packs[last].n <= batch)) {
			if (!pack_goes(p, (uint32_t)last)) {
				w.packs[last].off = (size_t)sum;
				w.packs[last].fill = 0;
				sum += w.packs[last].n;
			}
			last++;
		}
		w.first = first;
		w.last = last;
		if (sum > blobs_cap) {
			rix_free(w.blobs);
			w.blobs = rix_malloc((size_t)sum * sizeof(*w.blobs));
			blobs_cap = w.blobs != NULL ? sum : 0;
			if (w.blobs == NULL)
				rc = rix__prune_oom();
		}
		if (rc == 0 && sum > 0) {
			w.next = 0;
			rc = rix_master_index_foreach(p->mi, fill_batch, &w);
			if (rc == 0 && w.next != w.nentries)
				rc = changed();
			for (size_t i = first; rc == 0 && i < last; i++) {
				struct rpack *rp = &w.packs[i];
				if (pack_goes(p, (uint32_t)i) || rp->n == 0)
					continue;
				if (rp->fill > 1)
					qsort(w.blobs + rp->off, rp->fill, sizeof(rix_blob), cmp_blob_offset);
				rc = rix_index_writer_add(iw, &p->packs[i].id, w.blobs + rp->off, rp->fill);
				done += rp->fill;
			}
			rix__prune_progress(p, "blobs indexed", done, total);
		}
		first = last;
	}
	if (rc == 0)
		rc = rix_index_writer_finish(iw);
	if (iw != NULL) {
		size_t n;
		(void)rix_index_writer_files(&n, iw);
		p->st.index_written = n;
	}
	rix_index_writer_free(iw);
	rix_free(w.packs);
	rix_free(w.order);
	rix_free(w.blobs);
	return rc;
}

/* Removes files[0..n) of type t; failures counted and said, not errors. */
static void remove_files(rix_prune_plan *p, rix_file_type t, const rix_id *files, size_t n, uint64_t *removed,
			 const char *phase)
{
	rix_backend *b = rix_repo_backend(p->r);
	for (size_t i = 0; i < n; i++) {
		char hex[65];
		rix_id_to_hex(hex, &files[i]);
		int rc = rix_backend_remove(b, t, hex);
		if (rc == 0 || rc == RIX_ENOTFOUND) {
			(*removed)++;
		} else {
			p->st.remove_failures++;
			rix__prune_say(p, 0, "unable to remove %s/%s from the repository: %s", rix_file_type_name(t), hex, rix_error_last());
		}
		rix__prune_progress(p, phase, i + 1, n);
	}
}

int rix_prune_run(rix_prune_plan *p)
{
	if (p->ran)
		return rix_error_set(RIX_EINVAL, "prune: the plan was run already");
	p->ran = true;
	const rix_id *unref = p->lists[RIX_PRUNE_UNREFERENCED];
	size_t nunref = p->nlists[RIX_PRUNE_UNREFERENCED];
	int rc = rix_repo_flush(p->r); /* nothing to flush: the lock's check */
	if (rc != 0)
		return rc;
	if (nunref > 0) {
		rix__prune_say(p, 1, "deleting unreferenced packs");
		remove_files(p, RIX_FILE_PACK, unref, nunref, &p->st.packs_removed, "packs deleted");
	}
	if (p->nlists[RIX_PRUNE_REPACK] > 0) {
		rix__prune_say(p, 1, "repacking packs");
		rc = run_repack(p);
		if (rc != 0)
			return rc;
	}
	/* The used sets are done with: their memory goes before the index is rewritten. */
	rix_free(p->data.slot);
	p->data = (struct fpset){ 0 };
	rix_indexmap_free(p->trees);
	p->trees = NULL;
	bool rewrite = p->nlists[RIX_PRUNE_REPACK] + p->nlists[RIX_PRUNE_REMOVE] > 0;
	for (size_t i = 0; i < p->npacks && !rewrite; i++)
		rewrite = p->packs[i].action == A_IGNORE;
	if (rewrite) {
		rix_id *old = NULL;
		size_t nold = 0;
		rc = rewrite_index(p, &old, &nold);
		if (rc == 0)
			rc = rix_repo_flush(p->r); /* the lock is still ours */
		if (rc == 0) {
			rix__prune_say(p, 1, "deleting obsolete index files");
			remove_files(p, RIX_FILE_INDEX, old, nold, &p->st.index_removed, "index files deleted");
		}
		rix_free(old);
		if (rc != 0)
			return rc;
	}
	size_t nrm = p->nlists[RIX_PRUNE_REMOVE] + p->nlists[RIX_PRUNE_REPACK];
	if (nrm > 0) {
		rix__prune_say(p, 1, "removing %zu old packs", nrm);
		remove_files(p, RIX_FILE_PACK, p->lists[RIX_PRUNE_REPACK], p->nlists[RIX_PRUNE_REPACK], &p->st.packs_removed,
			     "packs deleted");
		remove_files(p, RIX_FILE_PACK, p->lists[RIX_PRUNE_REMOVE], p->nlists[RIX_PRUNE_REMOVE], &p->st.packs_removed,
			     "packs deleted");
	}
	rix__prune_say(p, 1, "done");
	return 0;
}
