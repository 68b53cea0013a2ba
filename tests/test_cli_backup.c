/*
 * tests/test_cli_backup.c — `rix backup` as restic users see it:
 *   test_json_messages       --json -v: every line parses (jansson), restic's fields and types
 *                            for status, verbose_status, summary; errors on stderr as restic's
 *                            error messages; a name that is not UTF-8 as U+FFFD; exit 3 for a
 *                            file that cannot be read (run as nobody)
 *   test_dry_run             -n / --dry-run: no file of the repository changes, the summary
 *                            says what the real backup then stores; text "Would add"
 *   test_terminal_status     on a terminal (script's pty) the status line is drawn and cleared;
 *                            not with -q, not when stdout is no terminal
 *   test_compression         --compression off stores data as it is, max compresses, a bad
 *                            mode is refused; on a version 1 repository it is taken (restic does)
 *   test_other_chunker       a config naming rustic's fixed-size chunker: backup refuses (1),
 *                            check passes
 *   test_snapshot_excludes   the snapshot's "excludes": the --exclude flags, as restic's
 *   test_flag_forms          --flag=VALUE as --flag VALUE, restic's -H, -e, -f; a bad
 *                            --read-concurrency refused
 *   test_dedup_index         backup loads the dedup-only index (data blobs as IDs): a second
 *                            backup with a parent stores only the new blob (a copied file and
 *                            unchanged ones deduplicated), check --read-data passes, restore of
 *                            either snapshot equals its source
 *
 * The repositories are made through the library (repo_fixture: a cheap scrypt, password PW).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include <jansson.h>

#include "rix/rix.h"
#include "repo_fixture.h"
#include "testutil.h"

static char work[256];

static int setup(void **state)
{
	(void)state;
	rix_test_mkdtemp(work, sizeof(work), "rix-cli-backup");
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	rix_test_rmtree(work);
	return 0;
}

/* `<env> rix <args>` with PW, stdout into *out (stderr as the args redirect it); its status. */
#define RIX "RIX_PASSWORD='" PW "' RESTIC_PASSWORD= '" RIX_CLI_PATH "'"
#define rix(out, ...) rix_test_tool(out, NULL, NULL, RIX, NULL, "", __VA_ARGS__)

/* The same, run from inside dir (`backup .`: the snapshot's root is dir itself, so the metadata
 * of its ancestors, which anyone making a file in /tmp changes, is not backed up). */
#define rix_at(dir, out, ...) rix_test_tool(out, NULL, dir, RIX, NULL, "", __VA_ARGS__)

/* A new repository <work>/name of that version; its path into dir. */
static void new_repo(char *dir, size_t cap, const char *name, int version)
{
	snprintf(dir, cap, "%s/%s", work, name);
	assert_int_equal(mkdir(dir, 0700), 0);
	rix_repo_free(init_repo(dir, version));
}

/* A source tree <work>/name: a few small files, one whose name is not UTF-8, a subdirectory,
 * and a sparse file of sparse_mib MiB (cheap on disk, seconds of hashing for a status line). */
static void make_src(char *dir, size_t cap, const char *name, unsigned sparse_mib)
{
	snprintf(dir, cap, "%s/%s", work, name);
	assert_int_equal(mkdir(dir, 0755), 0);
	uint64_t st = 11;
	uint8_t buf[70000];
	rix_test_fill_random(buf, sizeof(buf), &st);
	rix_test_put_file(dir, "a", buf, 1000);
	rix_test_put_file(dir, "b", buf + 1000, 60000);
	rix_test_put_file(dir, "bad\xff<name>", "x", 1);
	char sub[400];
	snprintf(sub, sizeof(sub), "%s/sub", dir);
	assert_int_equal(mkdir(sub, 0755), 0);
	rix_test_put_file(sub, "c", buf + 5, 3000);
	if (sparse_mib > 0)
		assert_int_equal(rix_test_run(NULL, NULL, "truncate -s %uM '%s/sparse'", sparse_mib, dir), 0);
}

/* The repository's files with their sizes, sorted (into *out). */
static void listing(const char *repo, char **out)
{
	assert_int_equal(rix_test_run(out, &(size_t){ 0 }, "cd '%s' && find . -printf '%%p %%s\\n' | sort", repo), 0);
}

static void need_uint(json_t *o, const char *key, int required)
{
	json_t *v = json_object_get(o, key);
	if (v == NULL && !required)
		return;
	if (!json_is_integer(v) || json_integer_value(v) < 0)
		fail_msg("\"%s\" is not a non-negative integer", key);
}

static void need_number(json_t *o, const char *key)
{
	if (!json_is_number(json_object_get(o, key)) || json_number_value(json_object_get(o, key)) < 0)
		fail_msg("\"%s\" is not a non-negative number", key);
}

static void need_string(json_t *o, const char *key)
{
	if (!json_is_string(json_object_get(o, key)))
		fail_msg("\"%s\" is not a string", key);
}

struct counts {
	int status, verbose, summary, scan_finished, unchanged, bad_name;
	int bad_in_repo;      /* an item with bytes stored but none in the repository, or the reverse */
	long long data_in_repo; /* the items' data_size_in_repo, summed */
	json_t *last_summary; /* the summary message, kept */
};

/* Checks one --json line of stdout (restic 0.17's types; the optional fields when present). */
static void check_line(const char *line, struct counts *c)
{
	json_error_t err;
	json_t *o = json_loads(line, 0, &err);
	if (!json_is_object(o))
		fail_msg("not a JSON object: %s (%s)", line, err.text);
	const char *type = json_string_value(json_object_get(o, "message_type"));
	assert_non_null(type);
	if (strcmp(type, "status") == 0) {
		c->status++;
		need_number(o, "percent_done");
		assert_true(json_number_value(json_object_get(o, "percent_done")) <= 1.0);
		const char *opt[] = { "seconds_elapsed", "seconds_remaining", "total_files", "files_done",
				      "total_bytes", "bytes_done", "error_count" };
		for (size_t i = 0; i < sizeof(opt) / sizeof(opt[0]); i++)
			need_uint(o, opt[i], 0);
		json_t *cur = json_object_get(o, "current_files");
		if (cur != NULL) {
			assert_true(json_is_array(cur) && json_array_size(cur) > 0);
			for (size_t i = 0; i < json_array_size(cur); i++)
				assert_true(json_is_string(json_array_get(cur, i)));
		}
	} else if (strcmp(type, "verbose_status") == 0) {
		c->verbose++;
		const char *action = json_string_value(json_object_get(o, "action"));
		assert_non_null(action);
		assert_true(strcmp(action, "new") == 0 || strcmp(action, "unchanged") == 0 ||
			    strcmp(action, "modified") == 0 || strcmp(action, "scan_finished") == 0);
		c->scan_finished += strcmp(action, "scan_finished") == 0;
		c->unchanged += strcmp(action, "unchanged") == 0;
		need_string(o, "item");
		c->bad_name += strstr(json_string_value(json_object_get(o, "item")), "bad\xef\xbf\xbd<name>") != NULL;
		need_number(o, "duration");
		need_uint(o, "data_size", 1);
		need_uint(o, "metadata_size", 1);
		need_uint(o, "total_files", 1);
		need_uint(o, "data_size_in_repo", 1);
		need_uint(o, "metadata_size_in_repo", 1);
		if (strcmp(action, "scan_finished") != 0) {
			json_int_t d = json_integer_value(json_object_get(o, "data_size")),
				   dr = json_integer_value(json_object_get(o, "data_size_in_repo")),
				   m = json_integer_value(json_object_get(o, "metadata_size")),
				   mr = json_integer_value(json_object_get(o, "metadata_size_in_repo"));
			c->bad_in_repo += (d == 0) != (dr == 0) || (m == 0) != (mr == 0);
			c->data_in_repo += dr;
		}
	} else if (strcmp(type, "summary") == 0) {
		c->summary++;
		const char *ints[] = { "files_new", "files_changed", "files_unmodified", "dirs_new", "dirs_changed",
				       "dirs_unmodified", "data_blobs", "tree_blobs", "data_added", "data_added_packed",
				       "total_files_processed", "total_bytes_processed" };
		for (size_t i = 0; i < sizeof(ints) / sizeof(ints[0]); i++)
			need_uint(o, ints[i], 1);
		need_number(o, "total_duration");
		need_string(o, "backup_start");
		need_string(o, "backup_end");
		json_t *id = json_object_get(o, "snapshot_id");
		if (id != NULL)
			assert_int_equal(strlen(json_string_value(id)), 64);
		json_decref(c->last_summary);
		c->last_summary = json_incref(o);
	} else {
		fail_msg("unknown message_type \"%s\"", type);
	}
	json_decref(o);
}

/* Every line of a --json run's stdout; the summary must be the last. */
static void check_lines(char *text, struct counts *c)
{
	memset(c, 0, sizeof(*c));
	char *save = NULL;
	int after_summary = 0;
	for (char *line = strtok_r(text, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save)) {
		after_summary += c->summary > 0;
		check_line(line, c);
	}
	assert_int_equal(c->summary, 1);
	assert_int_equal(after_summary, 0);
}

/*
 * --json -v, as nobody with a file it cannot read: status lines while the sparse file is read,
 * an item per file and directory, one summary last, the error on stderr, exit 3; a second run
 * finds everything unchanged. -q --json: the summary alone.
 */
static void test_json_messages(void **state)
{
	(void)state;
	char repo[300], src[300], path[400];
	new_repo(repo, sizeof(repo), "json", 2);
	make_src(src, sizeof(src), "json-src", 256);
	rix_test_put_file(src, "secret", "s", 1);
	snprintf(path, sizeof(path), "%s/secret", src);
	assert_int_equal(chmod(path, 0), 0);
	assert_int_equal(rix_test_run(NULL, NULL, "chmod -R a+rwX '%s' '%s' && chmod 0 '%s' && chmod a+x '%s'", repo, src, path, work), 0);
	char *o = NULL, *e = NULL;
	int rc = rix_test_run(&o, &(size_t){ 0 },
			      "cd / && RIX_PASSWORD='%s' RIX_PROGRESS_FPS=100 TMPDIR='%s' setpriv --reuid=65534 --regid=65534 "
			      "--clear-groups '%s' -r '%s' --json -v backup '%s' 2>'%s/err'",
			      PW, repo, RIX_CLI_PATH, repo, src, work);
	snprintf(path, sizeof(path), "%s/err", work);
	e = rix_test_read_file(path, &(size_t){ 0 });
	if (rc != 3)
		fail_msg("exit %d, want 3; stderr: %s", rc, e);
	struct counts c;
	check_lines(o, &c);
	free(o);
	assert_true(c.status >= 1);
	assert_int_equal(c.scan_finished, 1);
	assert_int_equal(c.bad_name, 1);
	assert_true(c.verbose >= 6); /* a b bad sparse sub/c, sub/ and src/, and more above */
	json_t *s = c.last_summary;
	assert_int_equal(json_integer_value(json_object_get(s, "files_new")), 5); /* not "secret" */
	assert_int_equal(json_integer_value(json_object_get(s, "total_files_processed")), 5);
	assert_int_equal(json_integer_value(json_object_get(s, "total_bytes_processed")), 1000 + 60000 + 1 + 3000 + (256 << 20));
	assert_null(json_object_get(s, "dry_run"));
	/* What the new blobs take in the packs: the sparse file's zeros compress to next to nothing. */
	json_int_t added = json_integer_value(json_object_get(s, "data_added")),
		   packed = json_integer_value(json_object_get(s, "data_added_packed"));
	assert_true(packed > 0 && packed <= added);
	assert_int_equal(c.bad_in_repo, 0);
	assert_true(c.data_in_repo > 0 && c.data_in_repo < packed); /* and the trees */
	json_decref(s);
	/* stderr: the error message, restic's shape, naming the file. */
	char *save = NULL;
	int errors = 0;
	for (char *line = strtok_r(e, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save)) {
		if (line[0] != '{')
			continue;
		json_t *m = json_loads(line, 0, NULL);
		assert_non_null(m);
		assert_string_equal(json_string_value(json_object_get(m, "message_type")), "error");
		assert_true(json_is_string(json_object_get(json_object_get(m, "error"), "message")));
		assert_string_equal(json_string_value(json_object_get(m, "during")), "archival");
		assert_non_null(strstr(json_string_value(json_object_get(m, "item")), "/secret"));
		json_decref(m);
		errors++;
	}
	free(e);
	assert_int_equal(errors, 1);
	/* Again as root (it reads "secret"): the rest unchanged; -q: no status, the summary alone. */
	assert_int_equal(rix(&o, "-r '%s' --json -v backup '%s'", repo, src), 0);
	check_lines(o, &c);
	free(o);
	assert_true(c.unchanged >= 5);
	assert_int_equal(json_integer_value(json_object_get(c.last_summary, "files_new")), 1);
	assert_int_equal(json_integer_value(json_object_get(c.last_summary, "files_unmodified")), 5);
	assert_int_equal(c.bad_in_repo, 0);
	json_decref(c.last_summary);
	assert_int_equal(rix(&o, "-r '%s' --json -q backup '%s'", repo, src), 0);
	check_lines(o, &c);
	assert_int_equal(c.status + c.verbose, 0);
	json_decref(c.last_summary);
	free(o);
}

/* -v reports how busy the machine was (CPU time against wall time); without it, restic's lines alone. */
static void test_cpu_line(void **state)
{
	(void)state;
	char repo[300], src[300];
	new_repo(repo, sizeof(repo), "cpu", 2);
	make_src(src, sizeof(src), "cpu-src", 0);
	char *o;
	assert_int_equal(rix(&o, "-r '%s' backup '%s'", repo, src), 0);
	assert_null(strstr(o, "CPU time"));
	const char *a = strstr(o, "\nAdded to the repository: "); /* restic 0.17's line */
	assert_non_null(a);
	assert_non_null(strstr(a, " stored)\n"));
	assert_null(strstr(o, "data blobs"));
	free(o);
	assert_int_equal(rix(&o, "-r '%s' -v backup --force '%s'", repo, src), 0);
	const char *l = strstr(o, "CPU time ");
	assert_non_null(l);
	double cpu = -1, busy = -1;
	long cores = 0;
	assert_int_equal(sscanf(l, "CPU time %lf s: %lf of %ld cores", &cpu, &busy, &cores), 3);
	assert_true(cpu >= 0 && busy >= 0 && cores >= 1);
	free(o);
}

/* --dry-run writes nothing (no lock either) and says what the real backup then stores (of
 * `backup .` from inside src: the same trees both times). */
static void test_dry_run(void **state)
{
	(void)state;
	char repo[300], src[300];
	new_repo(repo, sizeof(repo), "dry", 2);
	make_src(src, sizeof(src), "dry-src", 0);
	char *before, *after, *o;
	listing(repo, &before);
	assert_int_equal(rix_at(src, &o, "-r '%s' --json backup --dry-run .", repo), 0);
	listing(repo, &after);
	assert_string_equal(before, after);
	struct counts dry, real;
	check_lines(o, &dry);
	free(o);
	assert_true(json_is_true(json_object_get(dry.last_summary, "dry_run")));
	assert_int_equal(json_integer_value(json_object_get(dry.last_summary, "data_added_packed")), 0); /* unknown */
	assert_null(json_object_get(dry.last_summary, "snapshot_id"));
	assert_int_equal(rix_at(src, &o, "-r '%s' --json backup .", repo), 0);
	check_lines(o, &real);
	free(o);
	const char *same[] = { "files_new", "dirs_new", "data_blobs", "tree_blobs", "data_added", "total_bytes_processed" };
	for (size_t i = 0; i < sizeof(same) / sizeof(same[0]); i++)
		if (json_integer_value(json_object_get(dry.last_summary, same[i])) !=
		    json_integer_value(json_object_get(real.last_summary, same[i])))
			fail_msg("%s: dry run %lld, backup %lld", same[i],
				 (long long)json_integer_value(json_object_get(dry.last_summary, same[i])),
				 (long long)json_integer_value(json_object_get(real.last_summary, same[i])));
	json_decref(dry.last_summary);
	json_decref(real.last_summary);
	/* Text, -n: restic's "Would add", no snapshot line; the repository as it was. */
	free(before);
	free(after);
	listing(repo, &before);
	assert_int_equal(rix_at(src, &o, "-r '%s' backup -n .", repo), 0);
	listing(repo, &after);
	assert_string_equal(before, after);
	assert_non_null(strstr(o, "Would add to the repository: 0 B"));
	assert_null(strstr(o, "stored)"));
	assert_null(strstr(o, "saved"));
	free(o);
	free(before);
	free(after);
}

/* On a terminal: the status line ("[m:ss] ... files ..., total ... files ..., N errors") drawn
 * with ANSI clear-line and cleared before the summary; not with -q, not into a pipe. */
static void test_terminal_status(void **state)
{
	(void)state;
	char repo[300], src[300];
	new_repo(repo, sizeof(repo), "tty", 2);
	make_src(src, sizeof(src), "tty-src", 256);
	char *o;
	assert_int_equal(rix_test_run(&o, &(size_t){ 0 },
				      "RIX_PASSWORD='%s' RIX_PROGRESS_FPS=50 script -qec \"'%s' -r '%s' backup '%s'\" /dev/null",
				      PW, RIX_CLI_PATH, repo, src),
			 0);
	const char *line = strstr(o, "\033[2K[0:");
	if (line == NULL || strstr(line, " files ") == NULL || strstr(line, ", total ") == NULL ||
	    strstr(line, " errors") == NULL)
		fail_msg("no status line in: %s", o);
	assert_non_null(strstr(o, "snapshot "));
	free(o);
	assert_int_equal(rix_test_run(&o, &(size_t){ 0 },
				      "RIX_PASSWORD='%s' RIX_PROGRESS_FPS=50 script -qec \"'%s' -r '%s' -q backup --force '%s'\" /dev/null",
				      PW, RIX_CLI_PATH, repo, src),
			 0);
	assert_null(strstr(o, "\033[2K"));
	free(o);
	assert_int_equal(rix(&o, "-r '%s' backup --force '%s' 2>&1", repo, src), 0);
	assert_null(strchr(o, '\033'));
	assert_non_null(strstr(o, "Files:"));
	free(o);
}

/* Bytes of the files under dir. */
static unsigned long long du(const char *dir)
{
	char *o;
	assert_int_equal(rix_test_run(&o, &(size_t){ 0 }, "find '%s' -type f -printf '%%s\\n' | awk '{ n += $1 } END { print n + 0 }'", dir), 0);
	unsigned long long n = strtoull(o, NULL, 10);
	free(o);
	return n;
}

/* --compression: off stores 4 MiB of text as 4 MiB, max as far less; a bad mode is refused; a
 * version 1 repository takes any mode (as restic) and stores uncompressed. */
static void test_compression(void **state)
{
	(void)state;
	char off[300], max[300], v1[300], src[300], data[400];
	new_repo(off, sizeof(off), "c-off", 2);
	new_repo(max, sizeof(max), "c-max", 2);
	new_repo(v1, sizeof(v1), "c-v1", 1);
	snprintf(src, sizeof(src), "%s/c-src", work);
	assert_int_equal(mkdir(src, 0755), 0);
	size_t n = 4u << 20;
	char *text = malloc(n);
	for (size_t i = 0; i < n; i++)
		text[i] = "the quick brown fox jumps over the lazy dog\n"[i % 44];
	rix_test_put_file(src, "text", text, n);
	free(text);
	char *o;
	assert_int_equal(rix(&o, "-r '%s' --compression off backup '%s' 2>&1", off, src), 0);
	free(o);
	assert_int_equal(rix(&o, "-r '%s' backup --compression=max '%s' 2>&1", max, src), 0);
	free(o);
	snprintf(data, sizeof(data), "%s/data", off);
	assert_true(du(data) >= n);
	snprintf(data, sizeof(data), "%s/data", max);
	assert_true(du(data) < n / 16);
	/* The packs read back: check --read-data on both. */
	assert_int_equal(rix(&o, "-r '%s' check --read-data 2>&1", off), 0);
	free(o);
	assert_int_equal(rix(&o, "-r '%s' check --read-data 2>&1", max), 0);
	free(o);
	/* RESTIC_COMPRESSION as restic reads it; a bad value, from the flag or the variable. */
	assert_int_equal(rix(&o, "-r '%s' --compression fast backup '%s' 2>&1", off, src), 1);
	assert_non_null(strstr(o, "auto|off|max"));
	free(o);
	assert_int_equal(rix(&o, "-r '%s' backup '%s' 2>&1", off, src), 0);
	free(o);
	assert_int_equal(rix_test_run(&o, &(size_t){ 0 }, "RESTIC_COMPRESSION=bogus RIX_PASSWORD='%s' '%s' -r '%s' backup '%s' 2>&1",
				      PW, RIX_CLI_PATH, off, src),
			 1);
	assert_non_null(strstr(o, "RESTIC_COMPRESSION"));
	free(o);
	/* Version 1: taken, said, stored as it is. */
	assert_int_equal(rix(&o, "-r '%s' --compression max backup '%s' 2>&1", v1, src), 0);
	assert_non_null(strstr(o, "version 1"));
	free(o);
	snprintf(data, sizeof(data), "%s/data", v1);
	assert_true(du(data) >= n);
}

/*
 * Backup loads the index dedup-only (rix_repo_set_dedup_only): what it stores, skips and carries
 * forward from the parent is what the full index gives, and the snapshots read back whole.
 */
static void test_dedup_index(void **state)
{
	(void)state;
	char repo[300], src[300], out1[400], out2[400];
	new_repo(repo, sizeof(repo), "dd", 2);
	make_src(src, sizeof(src), "dd-src", 0);
	char *o;
	assert_int_equal(rix_at(src, &o, "-r '%s' backup . 2>&1", repo), 0);
	free(o);
	snprintf(out1, sizeof(out1), "%s/dd-out1", work);
	assert_int_equal(rix(&o, "-r '%s' restore latest --target '%s' 2>&1", repo, out1), 0);
	free(o);
	/* a copy of a (its one blob is known), b changed (one new blob), the rest unchanged. */
	assert_int_equal(rix_test_run(NULL, NULL, "cp '%s/a' '%s/a-copy' && printf more >> '%s/b'", src, src, src), 0);
	char cache[400];
	snprintf(cache, sizeof(cache), "%s/dd-cache", work);
	assert_int_equal(rix_at(src, &o, "-r '%s' --cache-dir '%s' backup --json . 2>/dev/null", repo, cache), 0);
	assert_non_null(strstr(o, "\"files_unmodified\":3,"));
	assert_non_null(strstr(o, "\"data_blobs\":1,"));
	free(o);
	/* It was dedup-only: a full load of the index files would have written the cache (as ls does
	 * next), a dedup-only one neither reads nor writes it. */
	assert_int_equal(rix_test_run(&o, NULL, "find '%s' -name rix-index 2>/dev/null", cache), 0);
	assert_string_equal(o, "");
	free(o);
	assert_int_equal(rix(&o, "-r '%s' --cache-dir '%s' ls latest 2>&1", repo, cache), 0);
	free(o);
	assert_int_equal(rix_test_run(&o, NULL, "find '%s' -name rix-index", cache), 0);
	assert_non_null(strstr(o, "rix-index"));
	free(o);
	assert_int_equal(rix(&o, "-r '%s' check --read-data 2>&1", repo), 0);
	free(o);
	snprintf(out2, sizeof(out2), "%s/dd-out2", work);
	assert_int_equal(rix(&o, "-r '%s' restore latest --target '%s' 2>&1", repo, out2), 0);
	free(o);
	assert_int_equal(rix_test_compare_trees(src, out2, 0), 0);
	/* The first snapshot is still the first source: the copy and the change are not in it. */
	char p[500];
	snprintf(p, sizeof(p), "%s/a-copy", out1);
	assert_int_not_equal(access(p, F_OK), 0);
	snprintf(p, sizeof(p), "%s/a-copy", out2);
	assert_int_equal(access(p, F_OK), 0);
}

/* A config naming another chunker (rustic's fixed-size one): backup refuses, saying why, and
 * writes nothing; check passes. */
static void test_other_chunker(void **state)
{
	(void)state;
	char repo[300], src[300], json[512], idhex[65];
	snprintf(repo, sizeof(repo), "%s/rustic", work);
	assert_int_equal(mkdir(repo, 0700), 0);
	rix_repo *r = init_repo(repo, 2);
	rix_id_to_hex(idhex, &rix_repo_config(r)->id);
	snprintf(json, sizeof(json), "{\"version\":2,\"id\":\"%s\",\"chunker_polynomial\":\"%llx\",\"chunker\":\"FixedSize\"}",
		 idhex, (unsigned long long)rix_repo_config(r)->chunker_polynomial);
	rix_repo_free(r);
	write_config_json(repo, json);
	make_src(src, sizeof(src), "rustic-src", 0);
	char *o, *before, *after;
	listing(repo, &before);
	assert_int_equal(rix(&o, "-r '%s' backup '%s' 2>&1", repo, src), 1);
	assert_non_null(strstr(o, "chunker"));
	assert_non_null(strstr(o, "FixedSize"));
	free(o);
	assert_int_equal(rix(&o, "-r '%s' backup --dry-run '%s' 2>&1", repo, src), 1);
	free(o);
	listing(repo, &after);
	assert_string_equal(before, after);
	free(before);
	free(after);
	assert_int_equal(rix(&o, "-r '%s' check 2>&1", repo), 0);
	free(o);
}

/* The --json -q summary of `rix backup` run in src with args; exit 0 asserted. */
static json_t *backup_summary(const char *src, const char *repo, const char *args)
{
	char *o;
	assert_int_equal(rix_at(src, &o, "-r '%s' -q --json backup %s", repo, args), 0);
	struct counts c;
	check_lines(o, &c);
	free(o);
	return c.last_summary;
}

static long long summary_int(json_t *sum, const char *key)
{
	return (long long)json_integer_value(json_object_get(sum, key));
}

/*
 * restic's flag forms: --flag=VALUE as --flag VALUE (backup refused them), and the short -H
 * (host), -e (exclude), -f (force) restic's backup has.
 */
static void test_flag_forms(void **state)
{
	(void)state;
	char repo[300], src[300];
	new_repo(repo, sizeof(repo), "forms", 2);
	make_src(src, sizeof(src), "forms-src", 0);
	/* a, b, bad<name>, sub/c: sub and bad* left out */
	json_t *s = backup_summary(src, repo, "--tag=x,y --host=h1 -e sub '--exclude=bad*' .");
	assert_int_equal(summary_int(s, "files_new"), 2);
	json_decref(s);
	char *o;
	assert_int_equal(rix(&o, "-r '%s' --json snapshots", repo), 0);
	json_t *l = json_loads(o, 0, NULL);
	free(o);
	assert_true(json_is_array(l) && json_array_size(l) == 1);
	json_t *sn = json_array_get(l, 0);
	assert_string_equal(json_string_value(json_object_get(sn, "hostname")), "h1");
	assert_string_equal(json_string_value(json_array_get(json_object_get(sn, "tags"), 1)), "y");
	json_decref(l);
	/* -H h1 finds that snapshot as the parent: a and b unmodified; with -f read again (new to the
	 * archiver's counts, as restic's --force counts them), --read-concurrency=1 taken */
	s = backup_summary(src, repo, "-H h1 --exclude sub --exclude 'bad*' .");
	assert_int_equal(summary_int(s, "files_unmodified"), 2);
	json_decref(s);
	s = backup_summary(src, repo, "-H h1 -f --exclude=sub -e 'bad*' --read-concurrency=1 .");
	assert_int_equal(summary_int(s, "files_unmodified"), 0);
	assert_int_equal(summary_int(s, "files_new") + summary_int(s, "files_changed"), 2);
	json_decref(s);
	assert_int_equal(rix_at(src, &o, "-r '%s' backup --read-concurrency=many . 2>&1", repo), 1);
	assert_non_null(strstr(o, "--read-concurrency many"));
	free(o);
}

/* The "excludes" of the newest snapshot in repo, as restic lists it (a JSON array, or "null"). */
static char *latest_excludes(const char *repo)
{
	char *o;
	assert_int_equal(rix_test_run(&o, &(size_t){ 0 }, "RESTIC_PASSWORD='%s' restic --no-cache -r '%s' snapshots --json --latest 1",
				      PW, repo),
			 0);
	json_t *l = json_loads(o, 0, NULL);
	free(o);
	assert_true(json_is_array(l) && json_array_size(l) == 1);
	/* by hand: json_dumps allocates through the hook librix gives jansson, not malloc */
	json_t *ex = json_object_get(json_array_get(l, 0), "excludes");
	char e[1024] = "null";
	if (ex != NULL) {
		assert_true(json_is_array(ex));
		size_t k = (size_t)snprintf(e, sizeof(e), "[");
		for (size_t i = 0; i < json_array_size(ex); i++)
			k += (size_t)snprintf(e + k, sizeof(e) - k, "%s\"%s\"", i ? "," : "",
					      json_string_value(json_array_get(ex, i)));
		snprintf(e + k, sizeof(e) - k, "]");
	}
	json_decref(l);
	return strdup(e);
}

/*
 * The snapshot records the --exclude flags as restic's does: not --iexclude, not an exclude
 * file's lines; no excludes, no "excludes". The same flags, restic's snapshot and rix's.
 */
static void test_snapshot_excludes(void **state)
{
	(void)state;
	rix_test_need_restic();
	char repo[300], src[300], file[400];
	new_repo(repo, sizeof(repo), "excl", 2);
	make_src(src, sizeof(src), "excl-src", 0);
	snprintf(file, sizeof(file), "%s/excl-patterns", work);
	FILE *f = fopen(file, "w");
	assert_non_null(f);
	fputs("# a comment\nnone-such\n", f);
	fclose(f);
	const char *const flagsets[] = { "--exclude sub -e 'bad*' --iexclude Z --exclude-file '%s'", "" };
	for (size_t i = 0; i < 2; i++) {
		char flags[600];
		snprintf(flags, sizeof(flags), flagsets[i], file);
		assert_int_equal(rix_test_run(NULL, NULL, "cd '%s' && RESTIC_PASSWORD='%s' restic --no-cache -q -r '%s' backup %s . >/dev/null", src,
					      PW, repo, flags),
				 0);
		char *theirs = latest_excludes(repo);
		char *o;
		assert_int_equal(rix_at(src, &o, "-r '%s' -q backup %s .", repo, flags), 0);
		free(o);
		char *mine = latest_excludes(repo);
		assert_string_equal(mine, theirs);
		assert_string_equal(mine, i == 0 ? "[\"sub\",\"bad*\"]" : "null");
		free(mine);
		free(theirs);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_json_messages),
		cmocka_unit_test(test_cpu_line),
		cmocka_unit_test(test_dry_run),
		cmocka_unit_test(test_terminal_status),
		cmocka_unit_test(test_compression),
		cmocka_unit_test(test_other_chunker),
		cmocka_unit_test(test_flag_forms),
		cmocka_unit_test(test_snapshot_excludes),
		cmocka_unit_test(test_dedup_index),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
