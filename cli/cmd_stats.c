/*
 * cli/cmd_stats.c — rix stats: blobs, sizes, snapshots, the dedup ratio, index memory and load time.
 */
#include "cli.h"

int cmd_stats(int argc, char **argv)
{
	(void)argv;
	if (argc != 0)
		return usage();
	rix_repo *r;
	rix_lock *lock;
	int lrc = open_repo_locked(&r, &lock, false);
	if (lrc != 0)
		return lrc;
	rix_repo_load_stats st;
	double secs;
	int rc = load_index(r, &st, &secs);
	if (rc != 0) {
		close_repo(r, lock);
		return rc;
	}
	rix_master_index *mi = rix_repo_master_index(r);
	rix_index_totals tot;
	rc = rix_master_index_totals(mi, &tot); /* the sums alone: no blob walked */
	size_t npacks = rix_master_index_pack_count(mi); /* no sort: restic names each pack once */
	if (rc != 0) {
		close_repo(r, lock);
		return fail(rc);
	}
	rix_repo_usage u;
	rc = rix_repo_usage_compute(&u, r);
	if (rc != 0) {
		close_repo(r, lock);
		return fail(rc);
	}
	double dedup = u.unique_bytes ? (double)u.logical_bytes / (double)u.unique_bytes : 0.0;
	size_t mem = rix_master_index_memory(mi);
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	uint64_t blobs = 0, stored = 0, plain = 0;
	for (int t = 0; t < RIX_BLOB_TYPES; t++) {
		blobs += tot.count[t];
		stored += tot.stored[t];
		plain += tot.plain[t];
	}
	if (g.json) {
		printf("{\"total_blob_count\":%llu,\"data_blobs\":%llu,\"tree_blobs\":%llu,\"total_size\":%llu,"
		       "\"total_uncompressed_size\":%llu,\"packs\":%zu,\"index_files\":%zu,\"index_bytes\":%llu,"
		       "\"index_memory\":%zu,\"load_seconds\":%.3f,\"max_rss_kib\":%ld,\"snapshots\":%zu,"
		       "\"files\":%llu,\"logical_size\":%llu,\"referenced_size\":%llu,\"dedup_ratio\":%.3f,"
		       "\"missing_blobs\":%llu}\n",
		       (unsigned long long)blobs, (unsigned long long)tot.count[0], (unsigned long long)tot.count[1],
		       (unsigned long long)stored, (unsigned long long)plain, npacks, st.loaded,
		       (unsigned long long)st.bytes, mem, secs, ru.ru_maxrss, u.snapshots,
		       (unsigned long long)u.files, (unsigned long long)u.logical_bytes,
		       (unsigned long long)u.unique_bytes, dedup, (unsigned long long)u.missing_blobs);
	} else {
		printf("Total Blob Count:         %llu (data %llu, tree %llu)\n", (unsigned long long)blobs,
		       (unsigned long long)tot.count[0], (unsigned long long)tot.count[1]);
		printf("Total Size:               %.3f MiB stored in %zu packs\n", (double)stored / 1048576.0, npacks);
		printf("Total Uncompressed Size:  %.3f MiB\n", (double)plain / 1048576.0);
		if (stored > 0)
			printf("Compression Ratio:        %.2fx\n", (double)plain / (double)stored);
		printf("Snapshots:                %zu (%llu files, %.3f MiB if restored)\n", u.snapshots,
		       (unsigned long long)u.files, (double)u.logical_bytes / 1048576.0);
		if (u.unique_bytes > 0)
			printf("Deduplication Ratio:      %.2fx (%.3f MiB of distinct data referenced)\n", dedup,
			       (double)u.unique_bytes / 1048576.0);
		if (u.missing_blobs > 0)
			printf("Missing data blobs:       %llu (referenced, not in the index)\n",
			       (unsigned long long)u.missing_blobs);
		printf("Index:                    %zu files, %.3f MiB read, %.3f s to load\n", st.loaded,
		       (double)st.bytes / 1048576.0, secs);
		printf("Index memory:             %.3f MiB (%.1f bytes per blob)\n", (double)mem / 1048576.0,
		       blobs ? (double)mem / (double)blobs : 0.0);
		printf("Peak memory (RSS):        %.1f MiB\n", (double)ru.ru_maxrss / 1024.0);
	}
	close_repo(r, lock);
	return 0;
}
