/*
 * cli/cmd_check.c — rix check: the repository's index against its packs (--read-data: every byte).
 */
#include "cli.h"

static void check_msg(void *arg, bool is_error, const char *msg)
{
	(void)arg;
	if (g.json)
		return;
	fprintf(is_error ? stderr : stdout, "%s%s\n", is_error ? "error: " : "", msg);
}

/* The progress line on a terminal: rewritten in place, cleared at the end. */
static void check_progress(void *arg, size_t done, size_t total, uint64_t bytes)
{
	(void)arg;
	fprintf(stderr, "\rchecked %zu of %zu packs (%.0f%%), %.1f MiB read ", done, total,
		total ? 100.0 * (double)done / (double)total : 100.0, (double)bytes / 1048576.0);
}

int cmd_check(int argc, char **argv)
{
	int read_data = 0;
	for (int i = 0; i < argc; i++) {
		if (strcmp(argv[i], "--read-data") == 0)
			read_data = 1;
		else
			return usage();
	}
	rix_repo *r;
	int orc = open_repo(&r);
	if (orc != 0)
		return orc;
	rix_lock *lock;
	int rc = cli_lock(&lock, r, false);
	if (rc != 0) {
		rix_repo_free(r);
		return rc;
	}
	if (!g.quiet && !g.json)
		printf("check %s%s\n", repo_path(), read_data ? " (reading all data)" : "");
	rix_check_report rep;
	int tty = !g.quiet && !g.json && isatty(2);
	rix_check_options co = RIX_CHECK_OPTIONS_INIT;
	co.read_data = read_data;
	co.msg = check_msg;
	co.progress = tty ? check_progress : NULL;
	rc = rix_repo_check(&rep, r, &co);
	if (tty)
		fputs("\r\033[K", stderr);
	cli_unlock(lock);
	if (g.json)
		printf("{\"errors\":%zu,\"index_files\":%zu,\"damaged_index_files\":%zu,\"packs\":%zu,"
		       "\"missing_packs\":%zu,\"orphaned_packs\":%zu,\"header_mismatches\":%zu,\"damaged_packs\":%zu,"
		       "\"damaged_blobs\":%zu,\"blobs\":%zu,\"duplicate_blobs\":%zu,\"bytes_read\":%llu}\n",
		       rep.errors, rep.index_files, rep.damaged_index_files, rep.packs, rep.missing_packs,
		       rep.orphaned_packs, rep.header_mismatches, rep.damaged_packs, rep.damaged_blobs, rep.blobs,
		       rep.duplicate_blobs, (unsigned long long)rep.bytes_read);
	if (rc != 0 && rc != RIX_ECORRUPT) {
		rix_repo_free(r);
		return fail(rc);
	}
	if (!g.json && !g.quiet) {
		printf("%zu index files, %zu packs, %zu blobs", rep.index_files, rep.packs, rep.blobs);
		if (read_data)
			printf(", %.1f MiB read", (double)rep.bytes_read / 1048576.0);
		printf("\n");
		if (rep.orphaned_packs)
			printf("%zu additional packs were found that no index names\n", rep.orphaned_packs);
		if (rep.errors == 0)
			printf("no errors were found\n");
	}
	rix_repo_free(r);
	if (rep.errors != 0)
		return die("%zu errors found", rep.errors);
	return 0;
}
