/*
 * repo/tree_walk.c — the walker of snapshots' trees (see tree_walk.h): depth first, an explicit
 * stack of decoded trees, each distinct tree once.
 */
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "rix/alloc.h"
#include "rix/error.h"
#include "rix/indexmap.h"
#include "rix/repo.h"
#include "rix/snapshot.h"
#include "repo_internal.h"
#include "tree_walk.h"
#include "../common/jansson_alloc.h"

struct frame {
	rix_id id;
	json_t *root;  /* the decoded tree (owned) */
	json_t *nodes; /* borrowed from root */
	size_t next;   /* the next node */
	uint64_t files, bytes;
	size_t path_len; /* the tree's path: w->path[0..path_len) */
};

struct rix__walker {
	rix_repo *r;
	rix__walk_ops ops;
	rix_indexmap *memo; /* tree ID -> {files (low 32) in pack, bytes split in offset/length} */
	size_t trees;
	struct frame *st;
	size_t depth, cap;
	char *path;
	size_t path_cap;
};

int rix__walker_new(rix__walker **out, rix_repo *r, const rix__walk_ops *ops)
{
	*out = NULL;
	rix__walker *w = rix_calloc(1, sizeof(*w));
	if (w == NULL)
		return rix_error_set(RIX_ENOMEM, "tree walk: out of memory");
	w->r = r;
	w->ops = *ops;
	int rc = rix_indexmap_new(&w->memo);
	if (rc != 0) {
		rix_free(w);
		return rc;
	}
	*out = w;
	return 0;
}

void rix__walker_free(rix__walker *w)
{
	if (w == NULL)
		return;
	for (size_t i = 0; i < w->depth; i++)
		json_decref(w->st[i].root);
	rix_free(w->st);
	rix_free(w->path);
	rix_indexmap_free(w->memo);
	rix_free(w);
}

size_t rix__walker_trees(const rix__walker *w)
{
	return w->trees;
}

/* w->path[0..at) + "/" + name, NUL-terminated. @return its length, or SIZE_MAX (memory). */
static size_t path_push(rix__walker *w, size_t at, const char *name)
{
	size_t nl = strlen(name);
	if (at + nl + 2 > w->path_cap) {
		size_t cap = (at + nl + 2) * 2;
		char *p = rix_realloc(w->path, cap);
		if (p == NULL)
			return SIZE_MAX;
		w->path = p;
		w->path_cap = cap;
	}
	w->path[at] = '/';
	memcpy(w->path + at + 1, name, nl + 1);
	return at + 1 + nl;
}

static const char *path_at(rix__walker *w, size_t len)
{
	if (w->path == NULL)
		return "";
	w->path[len] = '\0';
	return w->path;
}

static int remember(rix__walker *w, const rix_id *id, uint64_t files, uint64_t bytes)
{
	rix_loc l = { (uint32_t)(files > UINT32_MAX ? UINT32_MAX : files), (uint32_t)(bytes >> 32), (uint32_t)bytes, 0 };
	return rix_indexmap_add(w->memo, id, &l);
}

/* A bad tree: the callback says whether to go on (0) or stop. */
static int bad(rix__walker *w, const rix_id *id, size_t path_len, int code, const char *msg)
{
	if (w->ops.bad_tree == NULL)
		return rix_error_set(code, "%s", msg);
	char m[512];
	snprintf(m, sizeof(m), "%s", msg);
	int rc = w->ops.bad_tree(w->ops.payload, id, path_at(w, path_len), code, m);
	if (rc != 0)
		return rc;
	return 0;
}

/*
 * Pushes tree id (its path w->path[0..path_len)): loaded and decoded, or reported bad (then
 * remembered as empty, and not pushed). @return 0; a stop code.
 */
static int push(rix__walker *w, const rix_id *id, size_t path_len)
{
	uint8_t *data = NULL;
	size_t n = 0;
	int rc = rix_repo_load_blob(&data, &n, w->r, RIX_BLOB_TREE, id);
	if (rc == RIX_ENOMEM)
		return rc;
	if (rc != 0) {
		rc = bad(w, id, path_len, rc, rix_error_last());
		return rc != 0 ? rc : remember(w, id, 0, 0);
	}
	json_t *root = NULL;
	json_error_t jerr;
	/* Numbers as reals: jansson refuses integers past 2^63-1, and restic's uint64 fields hold
	 * them (inode numbers of some file systems); a size is exact below 2^53. */
	rc = rix__jansson_load_flags(&root, (const char *)data, n, JSON_DECODE_INT_AS_REAL, &jerr);
	rix_free(data);
	if (rc == RIX_ENOMEM)
		return rix_error_set(RIX_ENOMEM, "tree walk: out of memory decoding a tree");
	json_t *nodes = json_object_get(root, "nodes");
	if (!json_is_object(root) || !(json_is_array(nodes) || json_is_null(nodes) || nodes == NULL)) {
		json_decref(root);
		rc = bad(w, id, path_len, RIX_ECORRUPT, "a tree blob is not a JSON object with a list of nodes");
		return rc != 0 ? rc : remember(w, id, 0, 0);
	}
	if (w->depth == w->cap) {
		size_t cap = w->cap ? w->cap * 2 : 64;
		struct frame *st = rix_realloc(w->st, cap * sizeof(*st));
		if (st == NULL) {
			json_decref(root);
			return rix_error_set(RIX_ENOMEM, "tree walk: out of memory for %zu levels", cap);
		}
		w->st = st;
		w->cap = cap;
	}
	w->st[w->depth++] = (struct frame){ .id = *id, .root = root, .nodes = nodes, .path_len = path_len };
	return 0;
}

/* The node's name, or a stand-in for a nameless one. */
static const char *node_name(json_t *n)
{
	const char *s = json_string_value(json_object_get(n, "name"));
	return s != NULL ? s : "?";
}

/* One node of the top frame f. @return 0; a stop code. */
static int visit(rix__walker *w, struct frame *f, json_t *n)
{
	const char *type = json_string_value(json_object_get(n, "type"));
	if (type == NULL)
		return 0;
	if (strcmp(type, "file") == 0) {
		json_t *size = json_object_get(n, "size");
		f->files += 1;
		double v = json_number_value(size);
		f->bytes += v >= 1 && v < 18446744073709551616.0 ? (uint64_t)v : 0;
		json_t *content = json_object_get(n, "content");
		if (content != NULL && !json_is_array(content) && !json_is_null(content))
			goto not_ids;
		size_t k;
		json_t *c;
		json_array_foreach(content, k, c)
		{
			rix_id bid;
			const char *hex = json_string_value(c);
			if (hex == NULL || rix_id_from_hex(&bid, hex, strlen(hex)) != 0)
				goto not_ids;
			if (w->ops.data_blob == NULL)
				continue;
			/* f may move when the stack grows: not here (no push). */
			size_t pl = path_push(w, f->path_len, node_name(n));
			if (pl == SIZE_MAX)
				return rix_error_set(RIX_ENOMEM, "tree walk: out of memory for a path");
			int rc = w->ops.data_blob(w->ops.payload, &f->id, w->path, &bid);
			if (rc != 0)
				return rc;
		}
		return 0;
	not_ids:
		f->next = json_array_size(f->nodes); /* the rest of this tree is skipped */
		return bad(w, &f->id, f->path_len, RIX_ECORRUPT, "a file's content is not a list of IDs");
	}
	if (strcmp(type, "dir") == 0) {
		const char *hex = json_string_value(json_object_get(n, "subtree"));
		rix_id sub;
		if (hex == NULL || rix_id_from_hex(&sub, hex, strlen(hex)) != 0) {
			f->next = json_array_size(f->nodes);
			return bad(w, &f->id, f->path_len, RIX_ECORRUPT, "a directory without a subtree ID");
		}
		rix_loc memo;
		if (rix_indexmap_lookup(&memo, w->memo, &sub) == 0) {
			f->files += memo.pack;
			f->bytes += (uint64_t)memo.offset << 32 | memo.length;
			return 0;
		}
		size_t pl = path_push(w, f->path_len, node_name(n));
		if (pl == SIZE_MAX)
			return rix_error_set(RIX_ENOMEM, "tree walk: out of memory for a path");
		return push(w, &sub, pl); /* f is stale from here */
	}
	return 0;
}

int rix__walker_walk(rix__walker *w, const rix_id *root, uint64_t *files, uint64_t *bytes)
{
	rix_loc memo;
	if (rix_indexmap_lookup(&memo, w->memo, root) == 0) {
		*files += memo.pack;
		*bytes += (uint64_t)memo.offset << 32 | memo.length;
		return 0;
	}
	int rc = push(w, root, 0);
	if (rc != 0)
		return rc;
	/* A root that was bad is remembered as empty: nothing to add. */
	while (rc == 0 && w->depth > 0) {
		struct frame *f = &w->st[w->depth - 1];
		if (f->next < json_array_size(f->nodes)) {
			json_t *n = json_array_get(f->nodes, f->next++);
			rc = visit(w, f, n);
			continue;
		}
		/* The tree is done: remembered, its totals to its parent's (or the caller's). */
		rc = remember(w, &f->id, f->files, f->bytes);
		if (rc != 0)
			break;
		w->trees++;
		uint64_t tf = f->files, tb = f->bytes;
		json_decref(f->root);
		w->depth--;
		if (w->depth > 0) {
			w->st[w->depth - 1].files += tf;
			w->st[w->depth - 1].bytes += tb;
		} else {
			*files += tf;
			*bytes += tb;
		}
	}
	/* Stopped: the stack unwinds (its trees are not remembered: a later walk loads them again). */
	while (w->depth > 0)
		json_decref(w->st[--w->depth].root);
	return rc;
}

int rix__snapshot_tree(rix_id *tree, rix_repo *r, const char *name)
{
	rix_id sid;
	if (rix_id_from_hex(&sid, name, strlen(name)) != 0)
		return rix_error_set(RIX_ECORRUPT, "snapshot %s: not a snapshot file name", name);
	uint8_t *json = NULL;
	size_t n = 0;
	int rc = rix_repo_read_file(&json, &n, r, RIX_FILE_SNAPSHOT, &sid);
	if (rc != 0)
		return rc;
	rix_snapshot *sn;
	rc = rix_snapshot_decode(&sn, json, n); /* tree required: 64 hex digits, not null */
	rix_free(json);
	if (rc == RIX_ENOMEM)
		return rix_error_set(RIX_ENOMEM, "snapshot %.16s: out of memory decoding it", name);
	if (rc != 0)
		return rix_error_set(RIX_ECORRUPT, "snapshot %.16s has no tree (%s)", name, rix_error_last());
	*tree = sn->tree;
	rix_snapshot_free(sn);
	return 0;
}
