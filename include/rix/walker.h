/*
 * rix/walker.h — reading a snapshot's trees: one tree loaded and decoded, and a depth-first walk
 * of every node beneath a tree, in name order, as restic's walker visits them (ls, find, dump):
 *
 *   rix_tree_load(&t, r, &id)                           one tree blob, decoded (rix/tree.h)
 *   rix_walk(r, &sn->tree, NULL, fn, payload)           fn("/home", dir) fn("/home/a", file) ...
 *
 * The walk keeps an explicit stack of the decoded trees on the current path (no recursion: any
 * depth), each loaded once, when the walk enters it, and freed when it leaves it; a directory
 * the callback skips is never loaded. Memory: the trees of one path from the root, and the path.
 */
#ifndef RIX_WALKER_H
#define RIX_WALKER_H

#include "rix/common.h"

#include <stddef.h>

#include "rix/repo.h"
#include "rix/tree.h"
#include "rix/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Tree blob id of r (its index loaded: rix_repo_load_index), decoded: *out is the caller's
 * (rix_tree_free). @return 0; rix_repo_load_blob's errors (RIX_ENOTFOUND: not in the index,
 * RIX_ECORRUPT, RIX_EAUTH, backend errors); rix_tree_decode's (RIX_ECORRUPT); RIX_ENOMEM. The
 * message names the tree.
 */
RIX_EXPORT RIX_NODISCARD int rix_tree_load(rix_tree **out, rix_repo *r, const rix_id *id);

/* What a walk callback returns (or a negative RIX_E* code, which ends the walk). */
typedef enum rix_walk_action {
	RIX_WALK_CONTINUE = 0, /* go on; into the node when it is a directory */
	RIX_WALK_SKIP = 1,     /* a directory: do not walk its subtree (other nodes: as CONTINUE) */
	RIX_WALK_STOP = 2,     /* end the walk here; rix_walk returns 0 */
} rix_walk_action;

/*
 * Called for each node: path is its path from the walk's root, "/dir/file" (prefix first),
 * NUL-terminated, path_len bytes (a name may hold any byte but '/' and NUL); path and node are
 * borrowed for the call. A directory is called before the nodes beneath it.
 */
typedef int (*rix_walk_fn)(void *payload, const char *path, size_t path_len, const rix_node *node);

/*
 * Walks the nodes beneath tree root of r depth first, each tree's nodes in their order (by name,
 * as restic stores them), calling fn (above) for each. prefix ("/a/b"; NULL or "": none, a
 * trailing '/' dropped) comes before every path: the walk of a snapshot's subdirectory can
 * name its nodes as the snapshot does.
 * @return 0 (every node visited, or fn said RIX_WALK_STOP); fn's negative return, as it was;
 * rix_tree_load's errors for a tree that cannot be loaded (the message names its path);
 * RIX_ECORRUPT (a directory without a subtree: fn is not called for it, as restic's walker
 * does not call its callback); RIX_ENOMEM.
 */
RIX_EXPORT RIX_NODISCARD int rix_walk(rix_repo *r, const rix_id *root, const char *prefix, rix_walk_fn fn,
				      void *payload);

#ifdef __cplusplus
}
#endif
#endif
