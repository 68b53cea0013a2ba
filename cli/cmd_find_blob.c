/*
 * cli/cmd_find_blob.c — rix find-blob: which packs hold the given blobs.
 */
#include "cli.h"

int cmd_find_blob(int argc, char **argv)
{
	if (argc < 1)
		return usage();
	rix_repo *r;
	rix_lock *lock;
	int lrc = open_repo_locked(&r, &lock, false);
	if (lrc != 0)
		return lrc;
	int rc = load_index(r, NULL, NULL), missing = 0;
	if (g.json && rc == 0)
		putchar('[');
	int first = 1;
	for (int i = 0; rc == 0 && i < argc; i++) {
		rix_id id;
		if (parse_id(argv[i], &id)) {
			rc = 1;
			break;
		}
		int found = 0;
		for (int t = 0; t < RIX_BLOB_TYPES; t++) {
			rix_packed_blob pbs[64];
			size_t n = rix_master_index_lookup_all(pbs, 64, rix_repo_master_index(r), (rix_blob_type)t, &id);
			for (size_t k = 0; k < n && k < 64; k++) {
				char pack[65];
				rix_id_to_hex(pack, &pbs[k].pack_id);
				const char *tn = t == RIX_BLOB_TREE ? "tree" : "data";
				if (g.json)
					printf("%s{\"id\":\"%s\",\"type\":\"%s\",\"pack\":\"%s\",\"offset\":%u,\"length\":%u,"
					       "\"uncompressed_length\":%u}",
					       first ? "" : ",", argv[i], tn, pack, pbs[k].offset, pbs[k].length,
					       pbs[k].uncompressed_length);
				else
					printf("%s %s in pack %s, offset %u, length %u\n", tn, argv[i], pack, pbs[k].offset,
					       pbs[k].length);
				first = 0;
				found = 1;
			}
		}
		if (!found) {
			missing++;
			fprintf(stderr, "rix: blob %s not found\n", argv[i]);
		}
	}
	if (g.json && rc == 0)
		puts("]");
	close_repo(r, lock);
	return rc != 0 ? rc : missing != 0;
}
