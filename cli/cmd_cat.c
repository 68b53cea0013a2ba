/*
 * cli/cmd_cat.c — rix cat: config, an index file, a snapshot, a blob, a pack header, a tree.
 */
#include "cli.h"

/* Prints JSON text indented by two spaces per level, as restic's cat does. */
static void print_pretty_json(const char *s, size_t n)
{
	int depth = 0, in_str = 0;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (in_str) {
			putchar(c);
			if (c == '\\' && i + 1 < n)
				putchar(s[++i]);
			else if (c == '"')
				in_str = 0;
			continue;
		}
		switch (c) {
		case '"':
			in_str = 1;
			putchar(c);
			break;
		case '{':
		case '[':
			putchar(c);
			if (i + 1 < n && (s[i + 1] == '}' || s[i + 1] == ']')) {
				putchar(s[++i]);
				break;
			}
			printf("\n%*s", 2 * ++depth, "");
			break;
		case '}':
		case ']':
			printf("\n%*s%c", 2 * --depth, "", c);
			break;
		case ',':
			printf(",\n%*s", 2 * depth, "");
			break;
		case ':':
			fputs(": ", stdout);
			break;
		case ' ':
		case '\n':
		case '\t':
		case '\r':
			break;
		default:
			putchar(c);
		}
	}
	putchar('\n');
}

/*
 * The snapshot arg names (an ID, a prefix, or latest), as restic's cat prints one: its JSON
 * indented (Go's MarshalIndent). restic 0.14 prints the members it knows; rix prints them all
 * (program_version, summary, a newer restic's), as restic 0.17 does its own.
 */
static int cat_snapshot(rix_repo *r, const char *arg)
{
	rix_snapshot *sn = NULL;
	rix_snapshot_list *l = NULL;
	int rc;
	if (strcmp(arg, "latest") == 0) {
		rix_snapshot *found;
		if ((rc = rix_snapshot_list_load(&l, r, NULL, NULL)) == 0)
			rc = rix_snapshot_find(&found, l, arg, NULL);
		sn = rc == 0 ? found : NULL;
	} else {
		rix_id id;
		if ((rc = rix_snapshot_find_id(&id, r, arg)) == 0)
			rc = rix_snapshot_load(&sn, r, &id);
	}
	char *json;
	size_t n;
	if (rc == 0 && (rc = rix_snapshot_encode(&json, &n, sn)) == 0) {
		print_pretty_json(json, n);
		rix_free(json);
	}
	if (l != NULL)
		rix_snapshot_list_free(l);
	else
		rix_snapshot_free(sn);
	return rc;
}

/*
 * A tree blob's bytes, as restic's `cat tree` prints them (the blob as stored, a newline at its
 * end), after rix_tree_decode accepted them. arg: a tree blob's ID, or SNAPSHOT[:PATH] (an ID,
 * a prefix or latest, and a directory in it).
 */
static int cat_tree(rix_repo *r, const char *arg)
{
	int rc = load_index(r, NULL, NULL);
	if (rc != 0)
		return rix_error_set(RIX_EIO, "the index could not be loaded");
	rix_id id;
	rix_snapshot_list *l = NULL;
	if (!(strlen(arg) == 64 && rix_id_from_hex(&id, arg, 64) == 0 &&
	      rix_master_index_has(rix_repo_master_index(r), RIX_BLOB_TREE, &id))) {
		char snap[256];
		const char *colon = strchr(arg, ':');
		snprintf(snap, sizeof(snap), "%.*s", (int)(colon ? (size_t)(colon - arg) : strlen(arg)), arg);
		rix_snapshot *sn;
		if ((rc = rix_snapshot_list_load(&l, r, NULL, NULL)) == 0 && (rc = rix_snapshot_find(&sn, l, snap, NULL)) == 0)
			rc = rix_tree_find_dir(&id, r, &sn->tree, colon ? colon + 1 : NULL);
		rix_snapshot_list_free(l);
		if (rc != 0)
			return rc;
	}
	uint8_t *data;
	size_t n;
	rix_tree *t;
	if ((rc = rix_repo_load_blob(&data, &n, r, RIX_BLOB_TREE, &id)) != 0)
		return rc;
	if ((rc = rix_tree_decode(&t, data, n)) == 0) {
		rix_tree_free(t);
		fwrite(data, 1, n, stdout);
	}
	rix_free(data);
	return rc;
}

int cmd_cat(int argc, char **argv)
{
	if (argc < 1)
		return usage();
	const char *what = argv[0];
	int needs_id = strcmp(what, "config") != 0;
	if (argc != 1 + needs_id)
		return usage();
	if (strcmp(what, "config") && strcmp(what, "index") && strcmp(what, "snapshot") && strcmp(what, "blob") &&
	    strcmp(what, "pack-header") && strcmp(what, "tree"))
		return die("cat: unknown object %s (config, index, snapshot, blob, pack-header, tree)", what);
	rix_id id;
	int is_snapshot = strcmp(what, "snapshot") == 0; /* an ID prefix or latest too */
	int is_tree = strcmp(what, "tree") == 0;         /* a tree ID, or SNAPSHOT[:PATH] */
	if (needs_id && !is_snapshot && !is_tree && parse_id(argv[1], &id))
		return 1;
	rix_repo *r;
	rix_lock *lock;
	int lrc = open_repo_locked(&r, &lock, false);
	if (lrc != 0)
		return lrc;
	int rc = 0;
	if (strcmp(what, "config") == 0) {
		char *json;
		size_t n;
		rc = rix_config_encode(&json, &n, rix_repo_config(r));
		if (rc == 0) {
			print_pretty_json(json, n);
			rix_free(json);
		}
	} else if (strcmp(what, "index") == 0) {
		uint8_t *json;
		size_t jn;
		rc = rix_repo_read_file(&json, &jn, r, RIX_FILE_INDEX, &id);
		if (rc == 0) {
			fwrite(json, 1, jn, stdout);
			rix_free(json);
		}
	} else if (is_snapshot) {
		rc = cat_snapshot(r, argv[1]);
	} else if (is_tree) {
		rc = cat_tree(r, argv[1]);
	} else if (strcmp(what, "blob") == 0) {
		rc = load_index(r, NULL, NULL);
		if (rc != 0) {
			close_repo(r, lock);
			return rc;
		}
		uint8_t *data;
		size_t n;
		/* The type the index knows it by: a missing pack is then reported as such. */
		rix_packed_blob pb;
		rix_blob_type t = rix_master_index_lookup(&pb, rix_repo_master_index(r), RIX_BLOB_DATA, &id) == 0
					  ? RIX_BLOB_DATA
					  : RIX_BLOB_TREE;
		rc = rix_repo_load_blob(&data, &n, r, t, &id);
		if (rc == 0) {
			fwrite(data, 1, n, stdout);
			rix_free(data);
		}
	} else { /* pack-header */
		/* The trailer and the header only: two reads from the pack's end, not the whole pack. */
		rix_blob *blobs;
		size_t cnt;
		rc = rix_repo_read_pack_header(&blobs, &cnt, r, &id);
		if (rc == 0) {
			printf(g.json ? "[" : "");
			for (size_t i = 0; i < cnt; i++) {
				char hex[65];
				rix_id_to_hex(hex, &blobs[i].id);
				const char *t = blobs[i].type == RIX_BLOB_TREE ? "tree" : "data";
				if (g.json)
					printf("%s{\"type\":\"%s\",\"id\":\"%s\",\"offset\":%u,\"length\":%u,"
					       "\"uncompressed_length\":%u}",
					       i ? "," : "", t, hex, blobs[i].offset, blobs[i].length,
					       blobs[i].uncompressed_length);
				else
					printf("%s %s offset %u length %u uncompressed %u\n", t, hex, blobs[i].offset,
					       blobs[i].length, rix_blob_plain_size(blobs[i].length, blobs[i].uncompressed_length));
			}
			if (g.json)
				puts("]");
			rix_free(blobs);
		}
	}
	if (rc != 0)
		rc = fail(rc);
	close_repo(r, lock);
	return rc;
}
