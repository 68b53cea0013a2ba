/*
 * cli/cmd_list.c — rix list: blobs, packs, index files, keys, snapshots, locks.
 */
#include "cli.h"


static int print_blob(void *arg, const rix_packed_blob *pb)
{
	struct lister *l = arg;
	char hex[65];
	rix_id_to_hex(hex, &pb->id);
	const char *t = pb->type == RIX_BLOB_TREE ? "tree" : "data";
	if (g.json)
		printf("%s{\"type\":\"%s\",\"id\":\"%s\"}", l->n++ ? "," : "", t, hex);
	else
		printf("%s %s\n", t, hex);
	return 0;
}

int cmd_list(int argc, char **argv)
{
	if (argc != 1)
		return usage();
	static const struct {
		const char *name;
		rix_file_type t;
	} files[] = { { "packs", RIX_FILE_PACK }, { "index", RIX_FILE_INDEX }, { "keys", RIX_FILE_KEY },
		      { "snapshots", RIX_FILE_SNAPSHOT }, { "locks", RIX_FILE_LOCK } };
	int which = -1;
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
		if (strcmp(argv[0], files[i].name) == 0)
			which = (int)i;
	if (which < 0 && strcmp(argv[0], "blobs") != 0)
		return die("list: unknown type %s (blobs, packs, index, keys, snapshots, locks)", argv[0]);
	rix_repo *r;
	rix_lock *lock;
	int lrc = open_repo_locked(&r, &lock, false);
	if (lrc != 0)
		return lrc;
	struct lister l = { 0 };
	int rc = which < 0 ? load_index(r, NULL, NULL) : 0; /* before any output: all or nothing */
	if (rc != 0) {
		close_repo(r, lock);
		return rc;
	}
	if (g.json)
		putchar('[');
	if (which >= 0)
		rc = rix_backend_list(rix_repo_backend(r), files[which].t, print_name, &l);
	else
		rc = rix_master_index_foreach(rix_repo_master_index(r), print_blob, &l);
	if (g.json)
		puts("]");
	if (rc != 0)
		rc = fail(rc);
	close_repo(r, lock);
	return rc;
}
