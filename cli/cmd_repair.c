/*
 * cli/cmd_repair.c — rix repair index [--read-all-packs] (restic 0.16's name) and rix
 * rebuild-index [--read-all-packs] (restic 0.14's): a new index built from the packs
 * (rix_repair_index), under an exclusive lock (taken whatever --no-lock says, as restic's).
 *
 * Output as restic 0.14's: the steps on stdout ("loading indexes...", "getting pack files to
 * read...", "reading pack files", "rebuilding index", "deleting obsolete index files", "done"),
 * the findings on stderr ("adding pack file to index ID", "removing not found pack file ID", ...);
 * a pack whose header cannot be read is named there with the reason ("skipped incomplete pack
 * file: ID: ...": restic says it at -vv only) and the command still succeeds, as restic's.
 * On a terminal a progress line while headers are read; -v adds the counts; -q only the
 * findings; --json one summary object on stdout (the findings stay plain lines on stderr).
 */
#include "cli.h"

static bool progress_shown;

static void repair_msg(void *arg, rix_repair_msg_kind kind, const char *msg)
{
	(void)arg;
	if (progress_shown) {
		fputs("\r\033[K", stderr);
		progress_shown = false;
	}
	if (kind == RIX_REPAIR_NOTICE)
		fprintf(stderr, "%s\n", msg);
	else if (!g.quiet && !g.json)
		printf("%s\n", msg);
	fflush(stdout);
}

static void repair_progress(void *arg, size_t done, size_t total)
{
	(void)arg;
	fprintf(stderr, "\rread %zu of %zu pack headers (%.0f%%) ", done, total,
		total ? 100.0 * (double)done / (double)total : 100.0);
	progress_shown = true;
}

static void print_report(const rix_repair_report *rep)
{
	if (g.json) {
		printf("{\"message_type\":\"summary\",\"index_files\":%zu,\"invalid_index_files\":%zu,\"packs\":%zu,"
		       "\"packs_from_index\":%zu,\"packs_read\":%zu,\"packs_added\":%zu,\"packs_resized\":%zu,"
		       "\"unreadable_packs\":%zu,\"missing_packs\":%zu,\"blobs\":%zu,\"index_files_written\":%zu,"
		       "\"index_files_removed\":%zu}\n",
		       rep->index_files, rep->invalid_index_files, rep->packs, rep->packs_from_index, rep->packs_read,
		       rep->packs_added, rep->packs_resized, rep->unreadable_packs, rep->missing_packs, rep->blobs,
		       rep->index_files_written, rep->index_files_removed);
		return;
	}
	if (g.quiet)
		return;
	if (g.verbose > 0)
		printf("%zu packs: %zu as the old index had them, %zu read, %zu could not be read (left out); "
		       "%zu missing packs dropped; %zu blobs in %zu new index files, %zu old ones removed\n",
		       rep->packs, rep->packs_from_index, rep->packs_read, rep->unreadable_packs, rep->missing_packs,
		       rep->blobs, rep->index_files_written, rep->index_files_removed);
	printf("done\n");
}

static int run(int argc, char **argv)
{
	rix_repair_options o = RIX_REPAIR_OPTIONS_INIT;
	for (int i = 0; i < argc; i++) {
		if (strcmp(argv[i], "--read-all-packs") == 0)
			o.read_all_packs = true;
		else
			return usage();
	}
	g.no_lock = 0; /* restic's rebuild-index locks whatever --no-lock says: it writes */
	rix_repo *r;
	rix_lock *lock;
	int rc = open_repo_locked(&r, &lock, true);
	if (rc != 0)
		return rc;
	int tty = !g.quiet && !g.json && isatty(2);
	o.msg = repair_msg;
	o.progress = tty ? repair_progress : NULL;
	o.lock = lock;
	rix_repair_report rep;
	rc = rix_repair_index(&rep, r, &o);
	if (progress_shown) {
		fputs("\r\033[K", stderr);
		progress_shown = false;
	}
	int code = 0;
	if (rc != 0)
		code = fail(rc); /* before the release, which may fail the same way */
	else
		print_report(&rep);
	close_repo(r, lock);
	return code;
}

int cmd_repair(int argc, char **argv)
{
	/* The subcommand is the first word that is not a flag (`repair --read-all-packs index` too). */
	int sub = 0;
	while (sub < argc && argv[sub][0] == '-')
		sub++;
	if (sub == argc)
		return usage();
	if (strcmp(argv[sub], "index") != 0)
		return die("repair: unknown subcommand %s (rix repairs the index only: `rix repair index`)", argv[sub]);
	for (int i = sub; i + 1 < argc; i++)
		argv[i] = argv[i + 1];
	return run(argc - 1, argv);
}

int cmd_rebuild_index(int argc, char **argv)
{
	return run(argc, argv);
}
