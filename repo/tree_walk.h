/*
 * repo/tree_walk.h — private: the one walker of snapshots' trees (usage.c and check.c).
 *
 *   snapshots/<id> --rix_repo_read_file--> {"tree": T, ...}          rix__snapshot_tree
 *   tree T --rix_repo_load_blob--> {"nodes":[{"type":"file","name","size","content":[IDs]},
 *                                            {"type":"dir","name","subtree":T'}, ...]}
 *
 * Each distinct tree is loaded once per walker (a tree ID -> (files, bytes) memo), depth first
 * with an explicit stack: no recursion, no depth limit; memory is one decoded tree per level.
 * Totals: files and the sum of their sizes under a tree, a tree reached twice counted twice
 * (restic's restore-size).
 */
#ifndef RIX_REPO_TREE_WALK_H
#define RIX_REPO_TREE_WALK_H

#include <stdint.h>

#include "rix/repo.h"

typedef struct rix__walk_ops {
	/*
	 * Each ID of a file's content, with the tree naming it and the file's path in the snapshot
	 * ("/dir/file"). 0 walks on; anything else stops the walk with that code. May be NULL.
	 */
	int (*data_blob)(void *payload, const rix_id *tree, const char *path, const rix_id *blob);
	/*
	 * A tree that cannot be loaded (code, msg: the load's error) or is not what restic writes
	 * (RIX_ECORRUPT), at path ("" for the root). 0 walks on (the tree's remaining nodes are
	 * skipped, it is not visited again); anything else stops the walk with that code (its
	 * message set).
	 */
	int (*bad_tree)(void *payload, const rix_id *tree, const char *path, int code, const char *msg);
	void *payload;
} rix__walk_ops;

typedef struct rix__walker rix__walker;

/* @return 0; RIX_ENOMEM. */
int rix__walker_new(rix__walker **out, rix_repo *r, const rix__walk_ops *ops);
void rix__walker_free(rix__walker *w);

/*
 * Walks the trees under root (those already walked by w: their totals only), adding the files
 * and their bytes to *files and *bytes. @return 0; a callback's nonzero code; RIX_ENOMEM.
 */
int rix__walker_walk(rix__walker *w, const rix_id *root, uint64_t *files, uint64_t *bytes);

/* Distinct trees loaded and decoded so far (bad ones not counted). */
size_t rix__walker_trees(const rix__walker *w);

/*
 * Reads snapshot name (64 hex digits): its file (SHA-256 = name, MAC, decrypt, decompress),
 * decoded by rix_snapshot_decode (as every snapshot reader of rix), its "tree" into *tree.
 * @return 0; RIX_ECORRUPT ("snapshot ... has no tree (why)": the decoder's reason, the tree
 * missing, null or not 64 hex digits, or anything else it refuses; a bad name);
 * rix_repo_read_file's errors; RIX_ENOMEM.
 */
int rix__snapshot_tree(rix_id *tree, rix_repo *r, const char *name);

#endif
