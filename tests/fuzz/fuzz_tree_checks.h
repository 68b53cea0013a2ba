/*
 * tests/fuzz/fuzz_tree_checks.h — the property of the fuzz_tree target (the tree blob decoder,
 * backup/tree_decode.c), shared with tests/test_fuzz_replay.c. Header-only, static inline; returns NULL
 * when the property holds, or a description of the violation.
 *
 * The input is a tree blob's plaintext (any bytes).
 *   - rix_tree_decode either succeeds, or fails with RIX_ECORRUPT or RIX_ENOMEM, *out NULL and a
 *     "tree: " message;
 *   - on success every node is found by its name (rix_tree_find), and the tree encodes: every
 *     node is given to rix_tree_enc_add in the decoded order, and none may be refused (what the
 *     decoder accepts is a tree the encoder can write: a name that cannot be a directory entry,
 *     or names out of order, must be refused by the decoder);
 *   - the encoding decodes again to the same nodes, field by field (decode -> encode -> decode
 *     is stable), and encodes again to the same bytes.
 */
#ifndef RIX_FUZZ_TREE_CHECKS_H
#define RIX_FUZZ_TREE_CHECKS_H

#include <stdbool.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>

#include "rix/rix.h"

static inline bool rix_fuzz_tree_str_eq(const char *a, const char *b)
{
	return strcmp(a != NULL ? a : "", b != NULL ? b : "") == 0;
}

static inline bool rix_fuzz_tree_time_eq(const rix_time *a, const rix_time *b)
{
	return a->sec == b->sec && a->nsec == b->nsec && a->utc_offset == b->utc_offset;
}

/* The field of a and b that differs, or NULL. */
static inline const char *rix_fuzz_tree_node_diff(const rix_node *a, const rix_node *b)
{
	if (a->name_len != b->name_len || memcmp(a->name, b->name, a->name_len) != 0)
		return "name";
	if (a->type != b->type)
		return "type";
	if (a->mode != b->mode)
		return "mode";
	if (!rix_fuzz_tree_time_eq(&a->mtime, &b->mtime))
		return "mtime";
	if (!rix_fuzz_tree_time_eq(&a->atime, &b->atime))
		return "atime";
	if (!rix_fuzz_tree_time_eq(&a->ctime, &b->ctime))
		return "ctime";
	if (a->uid != b->uid || a->gid != b->gid)
		return "uid/gid";
	if (!rix_fuzz_tree_str_eq(a->user, b->user) || !rix_fuzz_tree_str_eq(a->group, b->group))
		return "user/group";
	if (!rix_fuzz_tree_str_eq(a->error, b->error))
		return "error";
	if (a->inode != b->inode || a->device_id != b->device_id || a->size != b->size || a->links != b->links ||
	    a->device != b->device)
		return "a number";
	if (a->linktarget_len != b->linktarget_len ||
	    (a->linktarget_len > 0 && memcmp(a->linktarget, b->linktarget, a->linktarget_len) != 0))
		return "linktarget";
	if (a->nxattrs != b->nxattrs)
		return "xattr count";
	for (size_t i = 0; i < a->nxattrs; i++) {
		const rix_xattr *x = &a->xattrs[i], *y = &b->xattrs[i];
		if (strcmp(x->name, y->name) != 0 || x->len != y->len || (x->value == NULL) != (y->value == NULL) ||
		    (x->len > 0 && memcmp(x->value, y->value, x->len) != 0))
			return "xattr";
	}
	/* content: null and [] are one thing for a file (restic writes [] for an empty one). */
	if (a->content_len != b->content_len ||
	    (a->type != RIX_NODE_FILE && (a->content == NULL) != (b->content == NULL)))
		return "content";
	for (size_t i = 0; i < a->content_len; i++)
		if (memcmp(a->content[i].b, b->content[i].b, RIX_ID_SIZE) != 0)
			return "content ID";
	if ((a->subtree == NULL) != (b->subtree == NULL) ||
	    (a->subtree != NULL && memcmp(a->subtree->b, b->subtree->b, RIX_ID_SIZE) != 0))
		return "subtree";
	return NULL;
}

/* Encodes t into e (reset first); *why set when the encoder refuses a node. */
static inline int rix_fuzz_tree_encode(rix_tree_enc *e, const rix_tree *t, const uint8_t **data, size_t *len,
				       const char **why)
{
	rix_tree_enc_reset(e);
	for (size_t i = 0; i < rix_tree_count(t); i++) {
		int rc = rix_tree_enc_add(e, rix_tree_node(t, i));
		if (rc != 0) {
			*why = rc == RIX_ENOMEM ? NULL : "the encoder refuses a node the decoder accepted";
			return rc;
		}
	}
	int rc = rix_tree_enc_finish(data, len, e);
	if (rc != 0)
		*why = NULL;
	return rc;
}

static inline const char *rix_fuzz_check_tree(const uint8_t *data, size_t size)
{
	rix_tree *a = (rix_tree *)1, *b = NULL;
	rix_tree_enc *e = NULL;
	uint8_t *first = NULL;
	const char *why = NULL;
	rix_error_clear();
	int rc = rix_tree_decode(&a, data, size);
	if (rc != 0) {
		if (a != NULL)
			return "decode failed but left *out set";
		if (rc != RIX_ECORRUPT && rc != RIX_ENOMEM)
			return "decode failed with an unexpected code";
		if (strncmp(rix_error_last(), "tree: ", 6) != 0)
			return "decode failed without a \"tree: \" message";
		return NULL;
	}
	if (a == NULL)
		return "decode succeeded without a tree";
	size_t n = rix_tree_count(a);
	for (size_t i = 0; i < n; i++) {
		const rix_node *nd = rix_tree_node(a, i);
		if (nd == NULL || nd->name == NULL || nd->name_len == 0) {
			why = "a decoded node has no name";
			goto out;
		}
		if (rix_tree_find(a, nd->name, nd->name_len) != nd) {
			why = "a node is not found by its name";
			goto out;
		}
	}
	if (rix_tree_node(a, n) != NULL) {
		why = "a node past the count";
		goto out;
	}
	if (rix_tree_enc_new(&e) != 0)
		goto out; /* out of memory: nothing to check */
	const uint8_t *enc;
	size_t len;
	if (rix_fuzz_tree_encode(e, a, &enc, &len, &why) != 0)
		goto out;
	if (len < 13 || memcmp(enc, "{\"nodes\":[", 10) != 0 || memcmp(enc + len - 3, "]}\n", 3) != 0) {
		why = "the encoding is not {\"nodes\":[...]} and a newline";
		goto out;
	}
	first = rix_malloc(len);
	if (first == NULL)
		goto out;
	memcpy(first, enc, len);
	size_t first_len = len;
	rc = rix_tree_decode(&b, first, first_len);
	if (rc != 0) {
		why = rc == RIX_ENOMEM ? NULL : "our own encoding does not decode";
		goto out;
	}
	if (rix_tree_count(b) != n) {
		why = "the node count changed in the round trip";
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		const char *d = rix_fuzz_tree_node_diff(rix_tree_node(a, i), rix_tree_node(b, i));
		if (d != NULL) {
			static char msg[96];
			snprintf(msg, sizeof(msg), "node %zu changed in the round trip: %s", i, d);
			why = msg;
			goto out;
		}
	}
	if (rix_fuzz_tree_encode(e, b, &enc, &len, &why) != 0)
		goto out;
	if (len != first_len || memcmp(enc, first, len) != 0)
		why = "the two encodings differ";
out:
	rix_free(first);
	rix_tree_enc_free(e);
	rix_tree_free(a);
	rix_tree_free(b);
	return why;
}

#endif
