/*
 * repo/usage.c — what the snapshots hold against what the repository stores: the
 * deduplication ratio.
 *
 *   snapshots/<id> --unpacked--> {"tree": T, ...}
 *   tree blob T --> {"nodes":[{"type":"file","size":S,"content":[data IDs]},
 *                             {"type":"dir","subtree":T'}, ...]}
 *
 * logical bytes = the sum of file sizes over every snapshot (restic's restore-size: a file in
 * two snapshots counts twice); unique = the distinct data blobs those files reference, counted
 * once, with their plaintext and stored sizes from the index. The trees are walked by
 * tree_walk.c (each distinct tree once, its totals remembered; no depth limit).
 */
#include <stdio.h>
#include <string.h>

#include "rix/alloc.h"
#include "rix/error.h"
#include "rix/indexmap.h"
#include "rix/repo.h"
#include "repo_internal.h"
#include "tree_walk.h"

struct usage {
	rix_repo *r;
	rix_indexmap *blobs; /* distinct data blobs referenced */
	rix_repo_usage *u;
};

/* Each data blob a file names: counted once, with its sizes from the index. */
static int on_blob(void *payload, const rix_id *tree, const char *path, const rix_id *bid)
{
	struct usage *w = payload;
	(void)tree;
	(void)path;
	rix_loc seen;
	if (rix_indexmap_lookup(&seen, w->blobs, bid) == 0)
		return 0;
	rix_packed_blob pb;
	if (rix_master_index_lookup(&pb, rix_repo_master_index(w->r), RIX_BLOB_DATA, bid) != 0) {
		w->u->missing_blobs++;
		return 0;
	}
	rix_loc l = { 0, 0, pb.length, pb.uncompressed_length };
	int rc = rix_indexmap_add(w->blobs, bid, &l);
	if (rc != 0)
		return rc;
	w->u->unique_blobs++;
	w->u->unique_bytes += rix_blob_plain_size(pb.length, pb.uncompressed_length);
	w->u->unique_stored += pb.length;
	return 0;
}

/* A tree that does not load or decode stops the figures. */
static int on_bad_tree(void *payload, const rix_id *tree, const char *path, int code, const char *msg)
{
	(void)payload;
	char hex[65];
	rix_id_to_hex(hex, tree);
	return rix_error_set(code, "usage: tree %.16s at %s: %s", hex, *path ? path : "/", msg);
}

int rix_repo_usage_compute(rix_repo_usage *u, rix_repo *r)
{
	memset(u, 0, sizeof(*u));
	if (rix__repo_dedup_only(r)) /* the sizes are the locations' */
		return rix_error_set(RIX_EINVAL, "usage: needs the full index, and this repository's is dedup-only "
				     "(rix_repo_set_dedup_only)");
	struct usage w = { .r = r, .u = u };
	rix__walk_ops ops = { .data_blob = on_blob, .bad_tree = on_bad_tree, .payload = &w };
	rix__walker *walker = NULL;
	struct rix__names s = { 0 };
	int rc = rix__walker_new(&walker, r, &ops);
	if (rc == 0)
		rc = rix_indexmap_new(&w.blobs);
	if (rc == 0)
		rc = rix__list_names(rix_repo_backend(r), RIX_FILE_SNAPSHOT, &s);
	for (size_t i = 0; rc == 0 && i < s.n; i++) {
		rix_id tree;
		rc = rix__snapshot_tree(&tree, r, s.v[i].s);
		if (rc == 0)
			rc = rix__walker_walk(walker, &tree, &u->files, &u->logical_bytes);
		if (rc == 0)
			u->snapshots++;
	}
	u->trees = walker != NULL ? rix__walker_trees(walker) : 0;
	rix_free(s.v);
	rix__walker_free(walker);
	rix_indexmap_free(w.blobs);
	return rc;
}
