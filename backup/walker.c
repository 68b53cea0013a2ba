/*
 * backup/walker.c — rix_tree_load and rix_walk (rix/walker.h).
 *
 * The walk is a loop over a stack of frames, one per directory on the current path:
 *
 *   st[0]  root tree     next = 3   path_len = 0        path: "/home/user/x"
 *   st[1]  "/home"       next = 1   path_len = 5               ^    ^
 *   st[2]  "/home/user"  next = 0   path_len = 10        st[1] ┘    └ st[2]
 *
 * The top frame's next node is visited (its path is the frame's path, '/', its name); a directory
 * not skipped is loaded and pushed; a frame whose nodes are all visited is popped and its tree
 * freed. So a tree is loaded once, when entered, and the memory held is one path's trees.
 */
#include <stdio.h>
#include <string.h>

#include "rix/alloc.h"
#include "rix/error.h"
#include "rix/walker.h"

int rix_tree_load(rix_tree **out, rix_repo *r, const rix_id *id)
{
	*out = NULL;
	uint8_t *data;
	size_t n;
	int rc = rix_repo_load_blob(&data, &n, r, RIX_BLOB_TREE, id);
	if (rc == 0) {
		rc = rix_tree_decode(out, data, n);
		rix_free(data);
	}
	if (rc != 0 && rc != RIX_ENOMEM) {
		char hex[65], msg[512];
		rix_id_to_hex(hex, id);
		snprintf(msg, sizeof(msg), "%s", rix_error_last());
		return rix_error_set(rc, "tree %.10s: %s", hex, msg);
	}
	return rc;
}

struct frame {
	rix_tree *t;
	size_t next;     /* the next node of t to visit */
	size_t path_len; /* the directory's path: path[0..path_len) */
};

struct walk {
	struct frame *st;
	size_t depth, cap; /* st[0..depth) in use */
	char *path;
	size_t path_cap;
};

static int grow_path(struct walk *w, size_t need)
{
	if (need <= w->path_cap)
		return 0;
	size_t cap = w->path_cap ? w->path_cap : 256;
	while (cap < need)
		cap *= 2;
	char *p = rix_realloc(w->path, cap);
	if (p == NULL)
		return rix_error_set(RIX_ENOMEM, "walk: out of memory (a path of %zu bytes)", need);
	w->path = p;
	w->path_cap = cap;
	return 0;
}

/* Pushes tree t (owned from here on, freed on failure too) for the directory path[0..len). */
static int push(struct walk *w, rix_tree *t, size_t len)
{
	if (w->depth == w->cap) {
		size_t cap = w->cap ? 2 * w->cap : 16;
		struct frame *st = rix_realloc(w->st, cap * sizeof(*st));
		if (st == NULL) {
			rix_tree_free(t);
			return rix_error_set(RIX_ENOMEM, "walk: out of memory (%zu levels deep)", w->depth);
		}
		w->st = st;
		w->cap = cap;
	}
	w->st[w->depth++] = (struct frame){ .t = t, .next = 0, .path_len = len };
	return 0;
}

/* Loads tree id for the directory path[0..len) and pushes it; the message names the path. */
static int enter(struct walk *w, rix_repo *r, const rix_id *id, size_t len)
{
	rix_tree *t;
	int rc = rix_tree_load(&t, r, id);
	if (rc != 0) {
		if (rc == RIX_ENOMEM)
			return rc;
		char msg[512];
		snprintf(msg, sizeof(msg), "%s", rix_error_last());
		return rix_error_set(rc, "%s: %s", len ? w->path : "/", msg);
	}
	return push(w, t, len);
}

int rix_walk(rix_repo *r, const rix_id *root, const char *prefix, rix_walk_fn fn, void *payload)
{
	struct walk w = { 0 };
	size_t plen = prefix ? strlen(prefix) : 0;
	while (plen > 0 && prefix[plen - 1] == '/')
		plen--;
	int rc = grow_path(&w, plen + 1);
	if (rc == 0) {
		if (plen > 0)
			memcpy(w.path, prefix, plen);
		w.path[plen] = '\0';
		rc = enter(&w, r, root, plen);
	}
	while (rc == 0 && w.depth > 0) {
		struct frame *f = &w.st[w.depth - 1];
		if (f->next == rix_tree_count(f->t)) {
			rix_tree_free(f->t);
			w.depth--;
			continue;
		}
		const rix_node *n = rix_tree_node(f->t, f->next++);
		size_t len = f->path_len + 1 + n->name_len;
		if ((rc = grow_path(&w, len + 1)) != 0)
			break;
		w.path[f->path_len] = '/';
		memcpy(w.path + f->path_len + 1, n->name, n->name_len);
		w.path[len] = '\0';
		if (n->type == RIX_NODE_DIR && n->subtree == NULL) { /* restic's walker: before the callback */
			rc = rix_error_set(RIX_ECORRUPT, "%s: a directory without a subtree", w.path);
			break;
		}
		int act = fn(payload, w.path, len, n);
		if (act < 0) {
			rc = act;
			break;
		}
		if (act == RIX_WALK_STOP)
			break;
		if (n->type != RIX_NODE_DIR || act == RIX_WALK_SKIP)
			continue;
		rc = enter(&w, r, n->subtree, len);
	}
	while (w.depth > 0)
		rix_tree_free(w.st[--w.depth].t);
	rix_free(w.st);
	rix_free(w.path);
	return rc;
}
