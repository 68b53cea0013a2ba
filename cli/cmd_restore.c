/*
 * cli/cmd_restore.c — rix restore SNAPSHOT[:PATH] --target DIR: the snapshot chosen as restic
 * chooses it (an ID, a prefix, or latest under --host / --tag / --path), PATH found in its
 * trees, then rix_restore (rix/restorer.h) under a shared lock, with restic's output:
 *
 *   text     "restoring <Snapshot ...> to DIR"; on a terminal a status line ("[0:03] 45.20%
 *            12 files/dirs 1.234 GiB, total 40 files/dirs 2.700 GiB"); errors on stderr
 *            ("ignoring error for /path: ..."); -vv a line per item; then restic 0.17's summary
 *            ("Summary: Restored 40 files/dirs (2.700 GiB) in 0:03").
 *   --json   restic 0.17's messages: "status" a few times a second (unless -q), "verbose_status"
 *            per item (-vvv, as restic), "error" on stderr, "summary" last.
 *
 * Exit status (restic's): 0; 1 when anything could not be restored ("There were N errors"),
 * or the snapshot or path is not found; 11 the lock could not be taken.
 */
#include "cli.h"

static struct {
	pthread_mutex_t mu;
	bool tty, json_status;
	int lines;
} out = { .mu = PTHREAD_MUTEX_INITIALIZER };

static void clear_status(void)
{
	if (out.tty && out.lines > 0)
		out.lines = term_draw(out.lines, NULL, 0);
}

static void restore_error(void *arg, const char *path, const char *msg)
{
	(void)arg;
	pthread_mutex_lock(&out.mu);
	if (g.json) {
		fputs("{\"message_type\":\"error\",\"error\":{\"message\":", stderr);
		fput_json_string(stderr, msg);
		fputs("},\"during\":\"restore\",\"item\":", stderr);
		fput_json_string(stderr, path);
		fputs("}\n", stderr);
	} else {
		clear_status();
		fprintf(stderr, "ignoring error for %s: %s\n", path, msg);
	}
	fflush(stderr);
	pthread_mutex_unlock(&out.mu);
}

static void restore_warn(void *arg, const char *path, const char *msg)
{
	(void)arg;
	pthread_mutex_lock(&out.mu);
	clear_status();
	fprintf(stderr, "Warning: %s: %s\n", path, msg);
	fflush(stderr);
	pthread_mutex_unlock(&out.mu);
}

/* restic's statusUpdate / summaryOutput (omitempty on every count). */
static void counts_json(const rix_restore_progress *p)
{
	const char *names[] = { "total_files", "files_restored", "files_skipped", "files_deleted",
				"total_bytes", "bytes_restored", "bytes_skipped" };
	const uint64_t vals[] = { p->files_total, p->files_restored, p->files_skipped, p->files_deleted,
				  p->bytes_total, p->bytes_restored, p->bytes_skipped };
	for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++)
		if (vals[i] > 0)
			printf(",\"%s\":%llu", names[i], (unsigned long long)vals[i]);
}

static void restore_progress(void *arg, const rix_restore_progress *p)
{
	(void)arg;
	pthread_mutex_lock(&out.mu);
	if (p->done) {
		clear_status();
	} else if (out.json_status) {
		fputs("{\"message_type\":\"status\"", stdout);
		if ((uint64_t)p->seconds > 0)
			printf(",\"seconds_elapsed\":%llu", (unsigned long long)p->seconds);
		fputs(",\"percent_done\":", stdout);
		put_float(p->bytes_total > 0 ? (double)p->bytes_restored / (double)p->bytes_total : 0);
		counts_json(p);
		fputs("}\n", stdout);
		fflush(stdout);
	} else if (out.tty) {
		char line[512], el[32], done[32], total[32], pct[32];
		clock_str(el, sizeof(el), (uint64_t)p->seconds);
		human(done, sizeof(done), p->bytes_restored);
		human(total, sizeof(total), p->bytes_total);
		snprintf(pct, sizeof(pct), "%.2f%%", p->bytes_total ? 100.0 * (double)p->bytes_restored / (double)p->bytes_total : 0.0);
		int k = snprintf(line, sizeof(line), "[%s] %s  %llu files/dirs %s, total %llu files/dirs %s", el, pct,
				 (unsigned long long)p->files_restored, done, (unsigned long long)p->files_total, total);
		if (p->files_skipped > 0 && k > 0 && (size_t)k < sizeof(line)) {
			char sk[32];
			human(sk, sizeof(sk), p->bytes_skipped);
			k += snprintf(line + k, sizeof(line) - (size_t)k, ", skipped %llu files/dirs %s",
				      (unsigned long long)p->files_skipped, sk);
		}
		if (p->files_deleted > 0 && k > 0 && (size_t)k < sizeof(line))
			snprintf(line + k, sizeof(line) - (size_t)k, ", deleted %llu files/dirs", (unsigned long long)p->files_deleted);
		char *lines[1] = { line };
		out.lines = term_draw(out.lines, lines, 1);
	}
	pthread_mutex_unlock(&out.mu);
}

static void restore_item(void *arg, const char *action, const char *path, bool file, uint64_t size)
{
	(void)arg;
	pthread_mutex_lock(&out.mu);
	if (g.json) {
		printf("{\"message_type\":\"verbose_status\",\"action\":\"%s\",\"item\":", action);
		put_json_string(path);
		printf(",\"size\":%llu}\n", (unsigned long long)size);
	} else {
		clear_status();
		char sz[32];
		human(sz, sizeof(sz), size);
		if (file && strcmp(action, "deleted") != 0) /* restic's lines */
			printf("%-9s %s with size %s\n", action, path, sz);
		else
			printf("%-9s %s\n", action, path);
	}
	pthread_mutex_unlock(&out.mu);
}

int cmd_restore(int argc, char **argv)
{
	rix_restore_options ro = RIX_RESTORE_OPTIONS_INIT;
	struct filter_flags ff = { 0 };
	const char *target = NULL, *arg = NULL, *v;
	const char **inc = NULL, **iinc = NULL, **exc = NULL, **iexc = NULL;
	rix_snapshot_list *l = NULL;
	int rc = 0;
	for (int i = 0; i < argc && rc == 0; i++) {
		int f = filter_flag(&ff, argc, argv, &i);
		if (f < 0)
			rc = 1;
		else if (f > 0)
			continue;
		else if (flag_value(&v, argc, argv, &i, "--target") || flag_value(&v, argc, argv, &i, "-t"))
			target = v;
		else if (flag_value(&v, argc, argv, &i, "--include") || flag_value(&v, argc, argv, &i, "-i"))
			rc = push_string(&inc, &ro.nincludes, v);
		else if (flag_value(&v, argc, argv, &i, "--iinclude"))
			rc = push_string(&iinc, &ro.niincludes, v);
		else if (flag_value(&v, argc, argv, &i, "--exclude") || flag_value(&v, argc, argv, &i, "-e"))
			rc = push_string(&exc, &ro.nexcludes, v);
		else if (flag_value(&v, argc, argv, &i, "--iexclude"))
			rc = push_string(&iexc, &ro.niexcludes, v);
		else if (flag_value(&v, argc, argv, &i, "--overwrite")) {
			if (strcmp(v, "always") == 0)
				ro.overwrite = RIX_OVERWRITE_ALWAYS;
			else if (strcmp(v, "if-changed") == 0)
				ro.overwrite = RIX_OVERWRITE_IF_CHANGED;
			else if (strcmp(v, "if-newer") == 0)
				ro.overwrite = RIX_OVERWRITE_IF_NEWER;
			else if (strcmp(v, "never") == 0)
				ro.overwrite = RIX_OVERWRITE_NEVER;
			else
				rc = die("restore: --overwrite %s: one of always, if-changed, if-newer, never", v);
		} else if (strcmp(argv[i], "--dry-run") == 0)
			ro.dry_run = true;
		else if (strcmp(argv[i], "--verify") == 0)
			ro.verify = true;
		else if (strcmp(argv[i], "--sparse") == 0)
			ro.sparse = true;
		else if (strcmp(argv[i], "--delete") == 0)
			ro.delete_extra = true;
		else if (strcmp(argv[i], "--ownership-by-name") == 0)
			ro.ownership_by_name = true;
		else if (argv[i][0] == '-' && argv[i][1] != '\0')
			rc = die("restore: unknown flag %s", argv[i]);
		else if (arg != NULL)
			rc = die("restore: more than one snapshot ID specified");
		else
			arg = argv[i];
	}
	filter_flags_done(&ff);
	ro.includes = inc, ro.iincludes = iinc, ro.excludes = exc, ro.iexcludes = iexc;
	if (rc == 0 && arg == NULL)
		rc = die("restore: no snapshot ID specified");
	if (rc == 0 && target == NULL)
		rc = die("restore: please specify a directory to restore to (--target)");
	if (rc == 0 && ro.nincludes + ro.niincludes > 0 && ro.nexcludes + ro.niexcludes > 0)
		rc = die("restore: exclude and include patterns are mutually exclusive");
	if (rc == 0 && ro.dry_run && ro.verify)
		rc = die("restore: --dry-run and --verify are mutually exclusive");
	if (rc == 0 && ro.delete_extra && ro.nincludes + ro.niincludes + ro.nexcludes + ro.niexcludes == 0) {
		/* "/" however spelled ("//", "/.", a symlink to it): the target is opened following
		 * symlinks, as restic opens it */
		char *real = realpath(target, NULL);
		if (real != NULL && strcmp(real, "/") == 0)
			rc = die("restore: '--target / --delete' must be combined with an include or exclude filter");
		free(real);
	}
	rix_repo *r = NULL;
	rix_lock *lock = NULL;
	if (rc == 0)
		rc = open_repo_locked(&r, &lock, false);
	if (rc != 0)
		goto done;
	/* SNAPSHOT[:PATH] */
	char snap_arg[256];
	const char *sub = NULL;
	const char *colon = strchr(arg, ':');
	snprintf(snap_arg, sizeof(snap_arg), "%.*s", (int)(colon ? (size_t)(colon - arg) : strlen(arg)), arg);
	if (colon != NULL)
		sub = colon + 1;
	rix_snapshot *sn;
	int lrc = rix_snapshot_list_load(&l, r, NULL, NULL);
	if (lrc == 0)
		lrc = rix_snapshot_find(&sn, l, snap_arg, &ff.f);
	if (lrc != 0) {
		rc = die("failed to find snapshot: %s", rix_error_last());
		goto done;
	}
	if ((rc = load_index(r, NULL, NULL)) != 0)
		goto done;
	rix_id tree;
	if ((lrc = rix_tree_find_dir(&tree, r, &sn->tree, sub)) != 0) {
		rc = fail(lrc);
		goto done;
	}
	if (!g.quiet && !g.json) {
		char hex[65], when[RIX_TIME_MAX];
		rix_id_to_hex(hex, &sn->id);
		rix_time_format(when, &sn->time);
		printf("restoring <Snapshot %.8s of [", hex);
		for (size_t i = 0; i < sn->npaths; i++)
			printf("%s%s", i ? " " : "", sn->paths[i]);
		printf("] at %s by %s@%s> to %s\n", when, sn->username, sn->hostname, target);
		fflush(stdout);
	}
	out.tty = !g.quiet && !g.json && isatty(1);
	out.json_status = g.json && !g.quiet;
	ro.error = restore_error;
	ro.warn = restore_warn;
	if (out.tty || out.json_status) {
		ro.progress = restore_progress;
		ro.progress_interval_ms = progress_interval_ms();
	}
	if (!g.quiet && ((g.json && g.verbose >= 3) || (!g.json && g.verbose >= 2)))
		ro.item = restore_item;
	rix_restore_summary s;
	lrc = rix_restore(&s, r, &tree, target, &ro);
	if (lrc != 0 && lrc != RIX_EIO) {
		rc = fail(lrc);
	} else {
		rix_restore_progress p = { .seconds = s.seconds, .files_total = s.files_total, .files_restored = s.files_restored,
					   .files_skipped = s.files_skipped, .files_deleted = s.files_deleted,
					   .bytes_total = s.bytes_total, .bytes_restored = s.bytes_restored,
					   .bytes_skipped = s.bytes_skipped };
		if (g.json) {
			fputs("{\"message_type\":\"summary\"", stdout);
			if ((uint64_t)s.seconds > 0)
				printf(",\"seconds_elapsed\":%llu", (unsigned long long)s.seconds);
			counts_json(&p);
			fputs("}\n", stdout);
		} else if (!g.quiet) {
			char total[32], el[32];
			human(total, sizeof(total), s.bytes_total);
			clock_str(el, sizeof(el), (uint64_t)s.seconds);
			printf("Summary: %s %llu files/dirs (%s) in %s", ro.dry_run ? "Would restore" : "Restored",
			       (unsigned long long)s.files_total, total, el);
			if (s.files_skipped > 0) {
				char sk[32];
				human(sk, sizeof(sk), s.bytes_skipped);
				printf(", skipped %llu files/dirs %s", (unsigned long long)s.files_skipped, sk);
			}
			if (s.files_deleted > 0)
				printf(", deleted %llu files/dirs", (unsigned long long)s.files_deleted);
			putchar('\n');
			if (ro.verify)
				printf("verified %llu files\n", (unsigned long long)s.verified);
		}
		fflush(stdout);
		if (s.errors > 0)
			rc = die("There were %llu errors", (unsigned long long)s.errors);
	}
done:
	rix_snapshot_list_free(l);
	if (r != NULL)
		close_repo(r, lock);
	filter_flags_free(&ff);
	free(inc);
	free(iinc);
	free(exc);
	free(iexc);
	return rc;
}
