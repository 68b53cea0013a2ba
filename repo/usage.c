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
 * once, with their plaintext and stored sizes from the index. A tree already walked is not
 * walked again: its totals are remembered (seen-trees map: tree ID -> (files, bytes)).
 */
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "rix/alloc.h"
#include "rix/error.h"
#include "rix/indexmap.h"
#include "rix/repo.h"
#include "repo_internal.h"
#include "../common/jansson_alloc.h"

struct walk {
	rix_repo *r;
	rix_indexmap *trees; /* tree ID -> loc {files (low 32) in pack, bytes split in offset/length} */
	rix_indexmap *blobs; /* distinct data blobs referenced */
	rix_repo_usage *u;
	int depth;
};

static int walk_tree(struct walk *w, const rix_id *id, uint64_t *files, uint64_t *bytes);

static int walk_nodes(struct walk *w, json_t *nodes, uint64_t *files, uint64_t *bytes)
{
	size_t i;
	json_t *n;
	json_array_foreach(nodes, i, n)
	{
		const char *type = json_string_value(json_object_get(n, "type"));
		if (type == NULL)
			continue;
		if (strcmp(type, "file") == 0) {
			json_t *size = json_object_get(n, "size");
			*files += 1;
			*bytes += json_is_integer(size) ? (uint64_t)json_integer_value(size) : 0;
			size_t k;
			json_t *c;
			json_array_foreach(json_object_get(n, "content"), k, c)
			{
				rix_id bid;
				const char *hex = json_string_value(c);
				if (hex == NULL || rix_id_from_hex(&bid, hex, strlen(hex)) != 0)
					return rix_error_set(RIX_ECORRUPT, "usage: a file's content is not a list of IDs");
				rix_loc seen;
				if (rix_indexmap_lookup(&seen, w->blobs, &bid) == 0)
					continue;
				rix_packed_blob pb;
				if (rix_master_index_lookup(&pb, rix_repo_master_index(w->r), RIX_BLOB_DATA, &bid) != 0) {
					w->u->missing_blobs++;
					continue;
				}
				rix_loc l = { 0, 0, pb.length, pb.uncompressed_length };
				int rc = rix_indexmap_add(w->blobs, &bid, &l);
				if (rc != 0)
					return rc;
				w->u->unique_blobs++;
				w->u->unique_bytes += rix_blob_plain_size(pb.length, pb.uncompressed_length);
				w->u->unique_stored += pb.length;
			}
		} else if (strcmp(type, "dir") == 0) {
			const char *hex = json_string_value(json_object_get(n, "subtree"));
			rix_id sub;
			if (hex == NULL || rix_id_from_hex(&sub, hex, strlen(hex)) != 0)
				return rix_error_set(RIX_ECORRUPT, "usage: a directory without a subtree ID");
			int rc = walk_tree(w, &sub, files, bytes);
			if (rc != 0)
				return rc;
		}
	}
	return 0;
}

static int walk_tree(struct walk *w, const rix_id *id, uint64_t *files, uint64_t *bytes)
{
	rix_loc memo;
	if (rix_indexmap_lookup(&memo, w->trees, id) == 0) {
		*files += memo.pack;
		*bytes += (uint64_t)memo.offset << 32 | memo.length;
		return 0;
	}
	if (w->depth > 1000)
		return rix_error_set(RIX_ECORRUPT, "usage: trees nested over 1000 deep");
	uint8_t *data;
	size_t n;
	int rc = rix_repo_load_blob(&data, &n, w->r, RIX_BLOB_TREE, id);
	if (rc != 0)
		return rc;
	json_t *root;
	json_error_t jerr;
	rc = rix__jansson_load(&root, (const char *)data, n, &jerr);
	rix_free(data);
	if (rc == RIX_ENOMEM)
		return rix_error_set(RIX_ENOMEM, "usage: out of memory reading a tree");
	if (!json_is_object(root)) {
		json_decref(root);
		return rix_error_set(RIX_ECORRUPT, "usage: a tree blob is not a JSON object");
	}
	uint64_t f = 0, b = 0;
	w->depth++;
	rc = walk_nodes(w, json_object_get(root, "nodes"), &f, &b);
	w->depth--;
	json_decref(root);
	if (rc != 0)
		return rc;
	w->u->trees++;
	rix_loc l = { (uint32_t)(f > UINT32_MAX ? UINT32_MAX : f), (uint32_t)(b >> 32), (uint32_t)b, 0 };
	rc = rix_indexmap_add(w->trees, id, &l);
	*files += f;
	*bytes += b;
	return rc;
}

int rix_repo_usage_compute(rix_repo_usage *u, rix_repo *r)
{
	memset(u, 0, sizeof(*u));
	struct walk w = { .r = r, .u = u };
	struct rix__names s = { 0 };
	int rc = rix_indexmap_new(&w.trees, 0);
	if (rc == 0)
		rc = rix_indexmap_new(&w.blobs, 0);
	if (rc == 0)
		rc = rix__list_names(rix_repo_backend(r), RIX_FILE_SNAPSHOT, &s);
	for (size_t i = 0; rc == 0 && i < s.n; i++) {
		uint8_t *json = NULL;
		size_t jn = 0;
		rc = rix__read_unpacked(r, RIX_FILE_SNAPSHOT, s.v[i].s, (size_t)16 << 20, &json, &jn);
		json_t *root = NULL;
		json_error_t jerr;
		if (rc == 0) {
			rc = rix__jansson_load(&root, (const char *)json, jn, &jerr);
			if (rc == RIX_ENOMEM)
				rc = rix_error_set(RIX_ENOMEM, "usage: out of memory reading snapshot %.16s", s.v[i].s);
			else
				rc = 0; /* not JSON: no tree, said below */
		}
		rix_free(json);
		const char *hex = json_string_value(json_object_get(root, "tree"));
		rix_id tree;
		if (rc == 0 && (hex == NULL || rix_id_from_hex(&tree, hex, strlen(hex)) != 0))
			rc = rix_error_set(RIX_ECORRUPT, "usage: snapshot %.16s has no tree", s.v[i].s);
		json_decref(root);
		if (rc == 0)
			rc = walk_tree(&w, &tree, &u->files, &u->logical_bytes);
		if (rc == 0)
			u->snapshots++;
	}
	rix_free(s.v);
	rix_indexmap_free(w.trees);
	rix_indexmap_free(w.blobs);
	return rc;
}
