/*
 * cli/cmd_backup.c — rix backup PATH...: the archiver (rix_backup) under a shared lock, with
 * restic's summary (text, or --json's summary message) and exit codes (3: some files could
 * not be read).
 */
#include "cli.h"

#include <sys/stat.h>

static void backup_warn(void *arg, const char *path, const char *msg)
{
	(void)arg;
	if (g.json) {
		printf("{\"message_type\":\"error\",\"error\":{\"message\":");
		put_json_string(msg);
		printf("},\"during\":\"archival\",\"item\":");
		put_json_string(path);
		printf("}\n");
	} else {
		fprintf(stderr, "warning: %s: %s\n", path, msg);
	}
}

static void human(char *out, size_t cap, uint64_t b)
{
	const char *u[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double v = (double)b;
	int i = 0;
	while (v >= 1024 && i < 4) {
		v /= 1024;
		i++;
	}
	snprintf(out, cap, i == 0 ? "%.0f %s" : "%.3f %s", v, u[i]);
}

/* Patterns of an exclude file: a line each; empty lines and lines starting with # skipped. */
static int read_patterns(const char *path, const char **v, size_t *n, size_t max)
{
	FILE *f = fopen(path, "r");
	if (f == NULL)
		return die("backup: %s: %s", path, strerror(errno));
	char line[4096];
	while (fgets(line, sizeof(line), f) != NULL) {
		line[strcspn(line, "\r\n")] = '\0';
		char *s = line;
		while (*s == ' ' || *s == '\t')
			s++;
		if (*s == '\0' || *s == '#')
			continue;
		if (*n >= max) {
			fclose(f);
			return die("backup: more than %zu patterns", max);
		}
		if ((v[(*n)++] = strdup(s)) == NULL) {
			fclose(f);
			return die("backup: out of memory");
		}
	}
	fclose(f);
	return 0;
}

int cmd_backup(int argc, char **argv)
{
	static const char *ex[1024], *iex[1024], *present[64];
	rix_backup_options bo = RIX_BACKUP_OPTIONS_INIT;
	rix_id parent;
	int use_stdin = 0;
	const char *tags[64];
	size_t ntags = 0;
	static const char *paths[4096];
	size_t npaths = 0;
	for (int i = 0; i < argc; i++) {
		if (strcmp(argv[i], "--tag") == 0 && i + 1 < argc) {
			if (!(ntags < 64))
				return die("backup: more than 64 --tag");
			tags[ntags++] = argv[++i];
		} else if (strcmp(argv[i], "--host") == 0 && i + 1 < argc)
			bo.hostname = argv[++i];
		else if (strcmp(argv[i], "--with-atime") == 0)
			bo.with_atime = true;
		else if (strcmp(argv[i], "--force") == 0)
			bo.force = true;
		else if (strcmp(argv[i], "--exclude") == 0 && i + 1 < argc) {
			if (!(bo.nexcludes < 1024))
				return die("backup: more than 1024 --exclude");
			ex[bo.nexcludes++] = argv[++i];
		} else if (strcmp(argv[i], "--iexclude") == 0 && i + 1 < argc) {
			if (!(bo.niexcludes < 1024))
				return die("backup: more than 1024 --iexclude");
			iex[bo.niexcludes++] = argv[++i];
		} else if (strcmp(argv[i], "--exclude-file") == 0 && i + 1 < argc) {
			if (read_patterns(argv[++i], ex, &bo.nexcludes, 1024))
				return 1;
		} else if (strcmp(argv[i], "--iexclude-file") == 0 && i + 1 < argc) {
			if (read_patterns(argv[++i], iex, &bo.niexcludes, 1024))
				return 1;
		} else if (strcmp(argv[i], "--exclude-if-present") == 0 && i + 1 < argc) {
			if (!(bo.nif_present < 64))
				return die("backup: more than 64 --exclude-if-present");
			present[bo.nif_present++] = argv[++i];
		} else if (strcmp(argv[i], "--exclude-caches") == 0)
			bo.exclude_caches = true;
		else if (strcmp(argv[i], "--one-file-system") == 0 || strcmp(argv[i], "-x") == 0)
			bo.one_file_system = true;
		else if (strcmp(argv[i], "--read-concurrency") == 0 && i + 1 < argc)
			bo.read_concurrency = (unsigned)strtoul(argv[++i], NULL, 10);
		else if (strcmp(argv[i], "--skip-if-unchanged") == 0)
			bo.skip_if_unchanged = true;
		else if (strcmp(argv[i], "--stdin") == 0)
			use_stdin = 1;
		else if (strcmp(argv[i], "--stdin-filename") == 0 && i + 1 < argc)
			bo.stdin_name = argv[++i];
		else if (strcmp(argv[i], "--files-from") == 0 && i + 1 < argc) {
			if (read_patterns(argv[++i], paths, &npaths, 4096))
				return 1;
		} else if (strcmp(argv[i], "--parent") == 0 && i + 1 < argc) {
			if (parse_id(argv[++i], &parent))
				return 1;
			bo.parent = &parent;
		} else if (argv[i][0] == '-' && argv[i][1] != '\0')
			return die("backup: unknown flag %s", argv[i]);
		else if (npaths < 4096)
			paths[npaths++] = argv[i];
		else
			return die("backup: more than 4096 paths (use --files-from)");
	}
	if (use_stdin) {
		if (npaths > 0)
			return die("backup: --stdin takes no paths");
		if (bo.stdin_name == NULL)
			bo.stdin_name = "stdin"; /* restic's default name */
	} else if (bo.stdin_name != NULL) {
		return die("backup: --stdin-filename needs --stdin");
	} else if (npaths == 0) {
		return die("backup: nothing to back up (give one or more paths, or --stdin)");
	}
	/* Paths that do not exist are skipped with a warning, as restic does, before the repository
	 * is opened; none left is an error (exit 1). */
	size_t kept = 0;
	for (size_t i = 0; i < npaths; i++) {
		struct stat st;
		if (lstat(paths[i], &st) != 0 && errno == ENOENT) {
			if (npaths > 1)
				fprintf(stderr, "warning: %s does not exist, skipping\n", paths[i]);
			continue;
		}
		paths[kept++] = paths[i];
	}
	if (npaths > 0 && kept == 0)
		return npaths == 1 ? die("backup: %s does not exist", paths[0])
				   : die("backup: none of the %zu paths exists: nothing to back up", npaths);
	npaths = kept;
	bo.excludes = ex;
	bo.iexcludes = iex;
	bo.if_present = present;
	/* restic's tag lists: --tag a,b is two tags (TagLists.Flatten). */
	const char **flat;
	if (flatten_tags(&flat, &bo.ntags, tags, ntags))
		return 1;
	bo.tags = flat;
	bo.warn = backup_warn;
	rix_repo *r;
	rix_lock *lock;
	int rc = open_repo_locked(&r, &lock, false); /* shared, released on a signal too */
	if (rc != 0) {
		free(flat);
		return rc;
	}
	if ((rc = load_index(r, NULL, NULL)) != 0) {
		free(flat);
		close_repo(r, lock);
		return rc;
	}
	double t0 = now_s();
	rix_id snap;
	rix_backup_summary s;
	rc = rix_backup(&snap, &s, r, paths, npaths, &bo);
	free(flat);
	double secs = now_s() - t0;
	if (rc != 0)
		rc = fail(rc);
	close_repo(r, lock);
	if (rc != 0)
		return rc;
	char hex[65];
	rix_id_to_hex(hex, &snap);
	if (g.json) {
		printf("{\"message_type\":\"summary\",\"files_new\":%llu,\"files_changed\":%llu,\"files_unmodified\":%llu,"
		       "\"dirs_new\":%llu,\"dirs_changed\":%llu,\"dirs_unmodified\":%llu,\"data_blobs\":%llu,"
		       "\"tree_blobs\":%llu,\"data_added\":%llu,\"total_files_processed\":%llu,"
		       "\"total_bytes_processed\":%llu,\"total_duration\":%.3f,\"snapshot_id\":\"%s\"}\n",
		       (unsigned long long)s.files_new, (unsigned long long)s.files_changed,
		       (unsigned long long)s.files_unmodified, (unsigned long long)s.dirs_new,
		       (unsigned long long)s.dirs_changed, (unsigned long long)s.dirs_unmodified,
		       (unsigned long long)s.data_blobs, (unsigned long long)s.tree_blobs,
		       (unsigned long long)s.data_added, (unsigned long long)(s.files + s.others),
		       (unsigned long long)s.bytes_total, secs, hex);
	} else if (!g.quiet) {
		char added[32], total[32];
		human(added, sizeof(added), s.data_added);
		human(total, sizeof(total), s.bytes);
		if (s.has_parent) {
			char ph[65];
			rix_id_to_hex(ph, &s.parent_id);
			printf("using parent snapshot %.8s\n", ph);
		}
		printf("Files:       %5llu new, %5llu changed, %5llu unmodified\n", (unsigned long long)s.files_new,
		       (unsigned long long)s.files_changed, (unsigned long long)s.files_unmodified);
		printf("Dirs:        %5llu new, %5llu changed, %5llu unmodified\n", (unsigned long long)s.dirs_new,
		       (unsigned long long)s.dirs_changed, (unsigned long long)s.dirs_unmodified);
		printf("Added to the repository: %s (%llu data blobs, %llu trees)\n\n", added,
		       (unsigned long long)s.data_blobs, (unsigned long long)s.tree_blobs);
		char all[32];
		human(all, sizeof(all), s.bytes_total);
		printf("processed %llu files, %s (read %s) in %.1f s\n", (unsigned long long)s.files, all, total, secs);
		if (s.skipped)
			printf("skipped creating snapshot: nothing changed since %.8s\n", hex);
		else
			printf("snapshot %.8s saved\n", hex);
	}
	return s.errors > 0 ? 3 : 0;
}
