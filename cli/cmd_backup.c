/*
 * cli/cmd_backup.c — rix backup PATH...: the archiver (rix_backup) under a shared lock (none
 * for --dry-run), with restic's output:
 *
 *   text     on a terminal (stdout, not -q): a status line redrawn a few times a second
 *            ("[0:12] 45.20%  1234 files 1.234 GiB, total 5678 files 2.700 GiB, 0 errors ETA 0:15")
 *            and the files being read below it; -v: the scan's totals, blob counts; -vv: a line
 *            per file and directory; errors on stderr; then restic's summary.
 *   --json   one message a line, as restic 0.17/0.18 writes them: "status" (a few times a
 *            second, unless -q), "verbose_status" (-v: each item, and "scan_finished"),
 *            "error" (on stderr, as restic), "summary" last.
 *
 * Exit status (restic's): 0; 1 fatal (no snapshot); 3 some files could not be read (the
 * snapshot was made without them; also for --dry-run); 11 the lock could not be taken.
 *
 * The library calls progress from a thread of its own, item and warn from the threads that
 * read files: every write to the terminal or stdout goes through out.mu.
 */
#include <limits.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "cli.h"

#define ETA_SAMPLES 128 /* progress samples the rate is measured over (about 30 s at 4 a second) */

/* The output state: what is on the terminal, the rate estimate. */
static struct {
	pthread_mutex_t mu;  /* stdout and stderr, one writer at a time */
	bool tty;            /* status lines on stdout: a terminal, not -q, not --json */
	bool json_status;    /* --json status messages (not -q) */
	int lines;           /* status lines on the terminal now (the cursor at the first) */
	bool scan_told;      /* the scanner's totals were told (-v) */
	double t[ETA_SAMPLES];
	uint64_t b[ETA_SAMPLES];
	size_t ns;           /* samples taken (the ring holds the last ETA_SAMPLES); t, b, ns under mu */
} out = { .mu = PTHREAD_MUTEX_INITIALIZER };

/* ---- the terminal ------------------------------------------------------------------------ */

/* Draws the status lines (term_draw), remembering how many are shown (out.mu held). */
static void draw(char *const *lines, int k)
{
	out.lines = term_draw(out.lines, lines, k);
}

/* A message line on f while the status may be shown: the status is cleared first (redrawn at
 * the next progress call). out.mu held. */
static void before_message(void)
{
	if (out.tty && out.lines > 0)
		draw(NULL, 0);
}

/* ---- the library's callbacks ------------------------------------------------------------- */

static void backup_warn(void *arg, const char *path, const char *msg)
{
	(void)arg;
	pthread_mutex_lock(&out.mu);
	if (g.json) { /* restic writes these on stderr */
		fputs("{\"message_type\":\"error\",\"error\":{\"message\":", stderr);
		fput_json_string(stderr, msg);
		fputs("},\"during\":\"archival\",\"item\":", stderr);
		fput_json_string(stderr, path);
		fputs("}\n", stderr);
	} else {
		before_message();
		fprintf(stderr, "error: %s: %s\n", path, msg);
	}
	fflush(stderr);
	pthread_mutex_unlock(&out.mu);
}

/* Seconds left at the rate of the last samples (restic's: 0 when unknown or under 1 KiB/s).
 * Records p as a sample: out.mu held. */
static uint64_t eta(const rix_backup_progress *p)
{
	size_t i = out.ns % ETA_SAMPLES;
	out.t[i] = p->seconds;
	out.b[i] = p->bytes_done;
	size_t first = out.ns >= ETA_SAMPLES ? (out.ns + 1) % ETA_SAMPLES : 0;
	out.ns++;
	double dt = p->seconds - out.t[first];
	if (!p->totals_final || p->bytes_done >= p->bytes_total || dt <= 0)
		return 0;
	double rate = (double)(p->bytes_done - out.b[first]) / dt;
	if (rate <= 1024)
		return 0;
	return (uint64_t)((double)(p->bytes_total - p->bytes_done) / rate);
}

static void status_json(const rix_backup_progress *p, uint64_t left)
{
	printf("{\"message_type\":\"status\"");
	if ((uint64_t)p->seconds > 0)
		printf(",\"seconds_elapsed\":%llu", (unsigned long long)p->seconds);
	if (left > 0)
		printf(",\"seconds_remaining\":%llu", (unsigned long long)left);
	fputs(",\"percent_done\":", stdout);
	put_float(p->bytes_total > 0 ? (double)p->bytes_done / (double)p->bytes_total : 0);
	const char *names[] = { "total_files", "files_done", "total_bytes", "bytes_done", "error_count" };
	const uint64_t vals[] = { p->files_total, p->files_done, p->bytes_total, p->bytes_done, p->errors };
	for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++)
		if (vals[i] > 0) /* restic's omitempty */
			printf(",\"%s\":%llu", names[i], (unsigned long long)vals[i]);
	if (p->ncurrent > 0) {
		fputs(",\"current_files\":[", stdout);
		for (size_t i = 0; i < p->ncurrent; i++) {
			if (i > 0)
				putchar(',');
			put_json_string(p->current[i]);
		}
		putchar(']');
	}
	fputs("}\n", stdout);
	fflush(stdout);
}

static void status_text(const rix_backup_progress *p, uint64_t left)
{
	char line[512], el[32], done[32], total[32];
	clock_str(el, sizeof(el), (uint64_t)p->seconds);
	human(done, sizeof(done), p->bytes_done);
	human(total, sizeof(total), p->bytes_total);
	if (p->files_total == 0 && p->dirs_total == 0) { /* no totals yet */
		snprintf(line, sizeof(line), "[%s] %llu files, %s, %llu errors", el, (unsigned long long)p->files_done, done,
			 (unsigned long long)p->errors);
	} else {
		char pct[32] = "", eta_s[48] = "";
		if (left > 0 && p->bytes_done < p->bytes_total) {
			char l[32];
			clock_str(l, sizeof(l), left);
			snprintf(eta_s, sizeof(eta_s), " ETA %s", l);
			snprintf(pct, sizeof(pct), "%3.2f%%  ", 100.0 * (double)p->bytes_done / (double)p->bytes_total);
		}
		snprintf(line, sizeof(line), "[%s] %s%llu files %s, total %llu files %s, %llu errors%s", el, pct,
			 (unsigned long long)p->files_done, done, (unsigned long long)p->files_total, total,
			 (unsigned long long)p->errors, eta_s);
	}
	char *lines[66];
	int k = 0;
	lines[k++] = line;
	for (size_t i = 0; i < p->ncurrent && k < 66; i++)
		lines[k++] = (char *)p->current[i];
	draw(lines, k);
}

static void backup_progress(void *arg, const rix_backup_progress *p)
{
	(void)arg;
	pthread_mutex_lock(&out.mu);
	uint64_t left = eta(p); /* its samples are out's: under out.mu */
	/* -v: the scanner's totals once it is done (restic's "scan finished"). */
	if (p->totals_final && !out.scan_told && g.verbose >= 1 && !g.quiet) {
		out.scan_told = true;
		if (g.json) {
			printf("{\"message_type\":\"verbose_status\",\"action\":\"scan_finished\",\"item\":\"\",\"duration\":");
			put_float(p->seconds);
			printf(",\"data_size\":%llu,\"data_size_in_repo\":0,\"metadata_size\":0,\"metadata_size_in_repo\":0,"
			       "\"total_files\":%llu}\n",
			       (unsigned long long)p->bytes_total, (unsigned long long)p->files_total);
		} else {
			char total[32];
			human(total, sizeof(total), p->bytes_total);
			before_message();
			printf("scan finished in %.3fs: %llu files, %s\n", p->seconds, (unsigned long long)p->files_total, total);
		}
	}
	if (p->done) { /* restic leaves the last status out: the summary follows */
		if (out.tty)
			draw(NULL, 0);
	} else if (out.json_status) {
		status_json(p, left);
	} else if (out.tty) {
		status_text(p, left);
	}
	pthread_mutex_unlock(&out.mu);
}

static const char *const action_name[] = { "new", "unchanged", "modified" };

static void backup_item(void *arg, const rix_backup_item *it)
{
	(void)arg;
	pthread_mutex_lock(&out.mu);
	if (g.json) {
		/* The stored sizes (restic's *_in_repo): 0 in a dry run, which stores nothing. */
		printf("{\"message_type\":\"verbose_status\",\"action\":\"%s\",\"item\":", action_name[it->action]);
		put_json_string(it->path);
		fputs(",\"duration\":", stdout);
		put_float(it->seconds);
		printf(",\"data_size\":%llu,\"data_size_in_repo\":%llu,\"metadata_size\":%llu,\"metadata_size_in_repo\":%llu,"
		       "\"total_files\":0}\n",
		       (unsigned long long)it->data_size, (unsigned long long)it->data_size_in_repo,
		       (unsigned long long)it->metadata_size, (unsigned long long)it->metadata_size_in_repo);
	} else {
		before_message();
		char data[32], meta[32];
		human(data, sizeof(data), it->data_size);
		human(meta, sizeof(meta), it->metadata_size);
		if (it->action == RIX_BACKUP_UNCHANGED)
			printf("unchanged %s\n", it->path);
		else if (it->dir)
			printf("%-9s %s, saved in %.3fs (%s added, %s metadata)\n", action_name[it->action], it->path,
			       it->seconds, data, meta);
		else
			printf("%-9s %s, saved in %.3fs (%s added)\n", action_name[it->action], it->path, it->seconds, data);
	}
	pthread_mutex_unlock(&out.mu);
}

/* ---- the command ------------------------------------------------------------------------- */

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

static void summary_json(const rix_backup_summary *s, const rix_id *snap, bool dry_run, const char *start, const char *end)
{
	printf("{\"message_type\":\"summary\",\"files_new\":%llu,\"files_changed\":%llu,\"files_unmodified\":%llu,"
	       "\"dirs_new\":%llu,\"dirs_changed\":%llu,\"dirs_unmodified\":%llu,\"data_blobs\":%llu,"
	       "\"tree_blobs\":%llu,\"data_added\":%llu,\"data_added_packed\":%llu,\"total_files_processed\":%llu,"
	       "\"total_bytes_processed\":%llu,\"total_duration\":",
	       (unsigned long long)s->files_new, (unsigned long long)s->files_changed,
	       (unsigned long long)s->files_unmodified, (unsigned long long)s->dirs_new,
	       (unsigned long long)s->dirs_changed, (unsigned long long)s->dirs_unmodified,
	       (unsigned long long)s->data_blobs, (unsigned long long)s->tree_blobs,
	       (unsigned long long)(s->data_added + s->tree_added), (unsigned long long)s->data_added_packed,
	       (unsigned long long)(s->files_new + s->files_changed + s->files_unmodified),
	       (unsigned long long)s->bytes_total);
	put_float(s->seconds);
	printf(",\"backup_start\":\"%s\",\"backup_end\":\"%s\"", start, end);
	if (!dry_run && !s->skipped) { /* restic 0.17 leaves it out when no snapshot was written */
		char hex[65];
		rix_id_to_hex(hex, snap);
		printf(",\"snapshot_id\":\"%s\"", hex);
	}
	if (dry_run)
		fputs(",\"dry_run\":true", stdout);
	fputs("}\n", stdout);
}

static void summary_text(const rix_backup_summary *s, const rix_id *snap, bool dry_run, bool from_stdin)
{
	char added[32], stored[32], total[32], took[32];
	human(added, sizeof(added), s->data_added + s->tree_added);
	human(stored, sizeof(stored), s->data_added_packed);
	human(total, sizeof(total), s->bytes_total);
	clock_str(took, sizeof(took), (uint64_t)s->seconds);
	if (s->has_parent) {
		char ph[65];
		rix_id_to_hex(ph, &s->parent_id);
		printf("using parent snapshot %.8s\n", ph);
	} else if (!from_stdin) {
		printf("no parent snapshot found, will read all files\n");
	}
	printf("\nFiles:       %5llu new, %5llu changed, %5llu unmodified\n", (unsigned long long)s->files_new,
	       (unsigned long long)s->files_changed, (unsigned long long)s->files_unmodified);
	printf("Dirs:        %5llu new, %5llu changed, %5llu unmodified\n", (unsigned long long)s->dirs_new,
	       (unsigned long long)s->dirs_changed, (unsigned long long)s->dirs_unmodified);
	if (g.verbose >= 1) {
		printf("Data Blobs:  %5llu new\n", (unsigned long long)s->data_blobs);
		printf("Tree Blobs:  %5llu new\n", (unsigned long long)s->tree_blobs);
	}
	/* restic 0.17's line; a dry run stores nothing and cannot know the stored size */
	if (dry_run)
		printf("Would add to the repository: %-5s\n\n", added);
	else
		printf("Added to the repository: %-5s (%-5s stored)\n\n", added, stored);
	printf("processed %llu files, %s in %s\n", (unsigned long long)(s->files_new + s->files_changed + s->files_unmodified),
	       total, took);
	if (g.verbose >= 1) { /* how well the pipeline used the machine */
		struct rusage ru;
		long cpus = sysconf(_SC_NPROCESSORS_ONLN);
		if (getrusage(RUSAGE_SELF, &ru) == 0) {
			double cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
				     (double)ru.ru_stime.tv_usec / 1e6;
			printf("CPU time %.2f s: %.2f of %ld cores busy on average\n", cpu, s->seconds > 0 ? cpu / s->seconds : 0.0,
			       cpus > 0 ? cpus : 1);
		}
	}
	if (dry_run)
		return;
	char hex[65];
	rix_id_to_hex(hex, snap);
	if (s->skipped)
		printf("skipped creating snapshot: nothing changed since %.8s\n", hex);
	else
		printf("snapshot %.8s saved\n", hex);
}

int cmd_backup(int argc, char **argv)
{
	static const char *ex[1024], *iex[1024], *present[64], *recorded[1024];
	rix_backup_options bo = RIX_BACKUP_OPTIONS_INIT;
	rix_id parent;
	int use_stdin = 0;
	const char *tags[64];
	size_t ntags = 0;
	static const char *paths[4096];
	size_t npaths = 0;
	for (int i = 0; i < argc; i++) {
		const char *v;
		/* restic's names: --flag V or --flag=V, and its short forms -H, -f, -e, -x, -n */
#define VALUE(name) flag_value(&v, argc, argv, &i, name)
		if (VALUE("--tag")) {
			if (!(ntags < 64))
				return die("backup: more than 64 --tag");
			tags[ntags++] = v;
		} else if (VALUE("--host") || VALUE("-H"))
			bo.hostname = v;
		else if (strcmp(argv[i], "--with-atime") == 0)
			bo.with_atime = true;
		else if (strcmp(argv[i], "--force") == 0 || strcmp(argv[i], "-f") == 0)
			bo.force = true;
		else if (strcmp(argv[i], "--dry-run") == 0 || strcmp(argv[i], "-n") == 0)
			bo.dry_run = true;
		else if (VALUE("--exclude") || VALUE("-e")) {
			if (!(bo.nexcludes < 1024))
				return die("backup: more than 1024 --exclude");
			ex[bo.nexcludes++] = v;
			recorded[bo.nsnapshot_excludes++] = v; /* the snapshot records these, as restic's */
		} else if (VALUE("--iexclude")) {
			if (!(bo.niexcludes < 1024))
				return die("backup: more than 1024 --iexclude");
			iex[bo.niexcludes++] = v;
		} else if (VALUE("--exclude-file")) {
			if (read_patterns(v, ex, &bo.nexcludes, 1024))
				return 1;
		} else if (VALUE("--iexclude-file")) {
			if (read_patterns(v, iex, &bo.niexcludes, 1024))
				return 1;
		} else if (VALUE("--exclude-if-present")) {
			if (!(bo.nif_present < 64))
				return die("backup: more than 64 --exclude-if-present");
			present[bo.nif_present++] = v;
		} else if (strcmp(argv[i], "--exclude-caches") == 0)
			bo.exclude_caches = true;
		else if (strcmp(argv[i], "--one-file-system") == 0 || strcmp(argv[i], "-x") == 0)
			bo.one_file_system = true;
		else if (VALUE("--read-concurrency")) {
			char *end;
			errno = 0;
			unsigned long n = strtoul(v, &end, 10);
			if (errno != 0 || end == v || *end != '\0' || v[0] == '-' || n > UINT_MAX)
				return die("backup: --read-concurrency %s is not a number of threads", v);
			bo.read_concurrency = (unsigned)n;
		} else if (strcmp(argv[i], "--skip-if-unchanged") == 0)
			bo.skip_if_unchanged = true;
		else if (strcmp(argv[i], "--stdin") == 0)
			use_stdin = 1;
		else if (VALUE("--stdin-filename"))
			bo.stdin_name = v;
		else if (VALUE("--files-from")) {
			if (read_patterns(v, paths, &npaths, 4096))
				return 1;
		} else if (VALUE("--parent")) {
			if (parse_id(v, &parent))
				return 1;
			bo.parent = &parent;
#undef VALUE
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
	bo.snapshot_excludes = recorded;
	bo.if_present = present;
	/* restic's tag lists: --tag a,b is two tags (TagLists.Flatten). */
	const char **flat;
	if (rix_snapshot_tags_flatten(&flat, &bo.ntags, tags, ntags) != 0)
		return fail(RIX_ENOMEM);
	bo.tags = flat;
	bo.warn = backup_warn;
	out.tty = !g.json && !g.quiet && isatty(1);
	out.json_status = g.json && !g.quiet;
	if (out.tty || out.json_status || (g.verbose >= 1 && !g.quiet)) {
		bo.progress = backup_progress;
		bo.progress_interval_ms = progress_interval_ms();
	}
	if (!g.quiet && ((g.json && g.verbose >= 1) || g.verbose >= 2))
		bo.item = backup_item;
	rix_repo *r;
	rix_lock *lock = NULL;
	/* A dry run writes nothing, so it takes no lock (restic 0.17 neither). */
	int rc = bo.dry_run ? open_repo(&r) : open_repo_locked(&r, &lock, false); /* shared, released on a signal too */
	if (rc != 0) {
		rix_free(flat);
		return rc;
	}
	/* Backup asks only whether a data blob is there (dedup, and a parent's files' blobs); it
	 * reads trees alone: data blobs as IDs only (rix_repo_set_dedup_only), ~29.5 bytes each. */
	rix_repo_set_dedup_only(r, true);
	if ((rc = load_index(r, NULL, NULL)) != 0) {
		rix_free(flat);
		close_repo(r, lock);
		return rc;
	}
	char start[RIX_TIME_MAX], end[RIX_TIME_MAX];
	rix_time now = rix_time_now(); /* restic's backup_start and backup_end: RFC 3339, the local zone */
	rix_time_format(start, &now);
	rix_id snap;
	rix_backup_summary s;
	rc = rix_backup(&snap, &s, r, paths, npaths, &bo);
	rix_free(flat);
	now = rix_time_now();
	rix_time_format(end, &now);
	if (rc != 0)
		rc = fail(rc);
	close_repo(r, lock);
	if (rc != 0)
		return rc;
	if (g.json)
		summary_json(&s, &snap, bo.dry_run, start, end);
	else if (!g.quiet)
		summary_text(&s, &snap, bo.dry_run, bo.stdin_name != NULL);
	return s.errors > 0 ? EXIT_INCOMPLETE : 0;
}
