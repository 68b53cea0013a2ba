/*
 * tests/test_backup.c — rix_backup against the real restic: a tree with every kind of entry
 * backed up by rix is checked (--read-data) and restored byte- and metadata-exact by restic;
 * backed up by restic first, the same tree backed up by rix stores no new data blob and gives
 * the same root tree (byte-identical trees); and rix's snapshot is a parent restic accepts.
 */
#include <fcntl.h>
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
#include "testutil.h"
#include "repo_fixture.h"


static void make_tree(const char *src)
{
	char p[4400];
	assert_int_equal(mkdir(src, 0755), 0);
	uint64_t st = 77;
	size_t big = 5u << 20;
	uint8_t *r = malloc(big);
	rix_test_fill_random(r, big, &st);
	rix_test_put_file(src, "big", r, big);
	rix_test_put_file(src, "small", r, 1000);
	rix_test_put_file(src, "empty", r, 0);
	rix_test_put_file(src, "odd <name> & \"q\"", r + 5, 10);
	rix_test_put_file(src, "caf\xc3\xa9", r + 7, 10);
	snprintf(p, sizeof(p), "%s/d1", src);
	assert_int_equal(mkdir(p, 0700), 0);
	snprintf(p, sizeof(p), "%s/d1/d2", src);
	assert_int_equal(mkdir(p, 0755), 0);
	uint64_t st2 = 78; /* its own stream: content-defined cuts would realign with big's */
	uint8_t *r2 = malloc(3u << 20);
	rix_test_fill_random(r2, 3u << 20, &st2);
	rix_test_put_file(p, "deep", r2, 3u << 20);
	free(r2);
	snprintf(p, sizeof(p), "%s/link", src);
	assert_int_equal(symlink("small", p), 0);
	snprintf(p, sizeof(p), "%s/fifo", src);
	assert_int_equal(mkfifo(p, 0600), 0);
	char a[4400];
	snprintf(a, sizeof(a), "%s/small", src);
	snprintf(p, sizeof(p), "%s/hard", src);
	assert_int_equal(link(a, p), 0);
	free(r);
}

/* A work folder with a source tree (make_tree) and the path of a repository beside it. */
struct fixture {
	char *work;
	char src[4200], repo[4200];
};

static void fixture_new(struct fixture *f)
{
	f->work = rix_test_new_dir("rix-backup");
	snprintf(f->src, sizeof(f->src), "%s/src", f->work);
	snprintf(f->repo, sizeof(f->repo), "%s/repo", f->work);
	make_tree(f->src);
}

/* `restic backup [flags] .` from inside src: the snapshot's root is src itself. */
static void restic_backup_dot(const struct fixture *f, const char *flags)
{
	assert_int_equal(rix_test_run(NULL, NULL, "cd '%s' && RESTIC_PASSWORD='%s' restic --no-cache -q -r '%s' backup %s . >/dev/null",
				      f->src, PW, f->repo, flags),
			 0);
}

/* rix_backup of "." from inside src. */
static void rix_backup_dot(rix_id *snap, rix_backup_summary *sum, rix_repo *r, const struct fixture *f,
			   const rix_backup_options *bo)
{
	const char *paths[] = { "." };
	char cwd[4200];
	assert_non_null(getcwd(cwd, sizeof(cwd)));
	assert_int_equal(chdir(f->src), 0);
	MUST(rix_backup(snap, sum, r, paths, 1, bo));
	assert_int_equal(chdir(cwd), 0);
}

/* A repository of the fixture's (PW, fast options) made or opened, its index loaded. */
static rix_repo *open_or_init(const char *dir, int init)
{
	rix_repo *r = init ? init_repo(dir, 2) : open_repo(dir, NULL);
	MUST(rix_repo_load_index(NULL, r, NULL, NULL));
	return r;
}

static void warn_fail(void *payload, const char *path, const char *msg)
{
	(void)payload;
	fail_msg("warning for %s: %s", path, msg);
}

static int restic(const char *repo, const char *fmt, ...)
{
	char args[8192];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(args, sizeof(args), fmt, ap);
	va_end(ap);
	return rix_test_run(NULL, NULL, "RESTIC_PASSWORD='%s' restic --no-cache -q -r '%s' %s >/dev/null", PW, repo, args);
}

/* The root tree of the latest snapshot. */
static void latest_tree(const char *repo, char out[65])
{
	char *s;
	size_t len;
	assert_int_equal(rix_test_run(&s, &len, "RESTIC_PASSWORD='%s' restic --no-cache -q -r '%s' snapshots --latest 1 --json", PW,
				      repo),
			 0);
	json_t *j = json_loadb(s, len, 0, NULL);
	free(s);
	snprintf(out, 65, "%s", json_string_value(json_object_get(json_array_get(j, json_array_size(j) - 1), "tree")));
	json_decref(j);
}

static void test_rix_backup_restic_restore(void **state)
{
	(void)state;
	rix_test_need_restic();
	struct fixture f;
	fixture_new(&f);
	char *work = f.work, *src = f.src, *repo = f.repo, out[4200];
	snprintf(out, sizeof(out), "%s/out", work);
	rix_repo *r = open_or_init(repo, 1);
	rix_lock *l;
	MUST(rix_lock_acquire(&l, r, false));
	rix_backup_options bo = RIX_BACKUP_OPTIONS_INIT;
	bo.warn = warn_fail;
	const char *paths[] = { src };
	rix_id snap;
	rix_backup_summary sum;
	MUST(rix_backup(&snap, &sum, r, paths, 1, &bo));
	assert_int_equal(sum.files, 7); /* big small empty odd café deep hard */
	assert_int_equal(sum.files_new, 7);
	assert_int_equal(sum.files_changed + sum.files_unmodified, 0);
	assert_int_equal(sum.dirs_new, sum.dirs);
	assert_int_equal(sum.errors, 0);
	/* The cuts depend on the repository's random polynomial, so the count is not fixed: at
	 * least one blob for each of the five distinct contents, and exactly what restic lists. */
	char *listed;
	size_t listed_len;
	assert_int_equal(rix_test_run(&listed, &listed_len,
				      "RESTIC_PASSWORD='%s' restic --no-cache -q -r '%s' list blobs | grep -c '^data '", PW, repo),
			 0);
	unsigned long long in_repo = strtoull(listed, NULL, 10);
	free(listed);
	if (sum.data_blobs < 5 || sum.data_blobs != in_repo)
		fail_msg("%llu data blobs stored, restic lists %llu", (unsigned long long)sum.data_blobs, in_repo);
	/* Again: no new data; new trees at most for src's ancestors, whose metadata may have moved
	 * meanwhile (anyone making a file in /tmp changes its mtime). */
	rix_backup_summary again;
	rix_id snap2;
	MUST(rix_backup(&snap2, &again, r, paths, 1, &bo));
	assert_int_equal(again.data_blobs, 0);
	/* The first snapshot is the parent: no file was read. */
	assert_true(again.has_parent);
	assert_memory_equal(again.parent_id.b, snap.b, RIX_ID_SIZE);
	assert_int_equal(again.files_unmodified, again.files);
	assert_int_equal(again.bytes, 0);
	/* One file changed: it alone is read; --force reads them all. */
	char changed[4400];
	snprintf(changed, sizeof(changed), "%s/small", src);
	rix_test_put_file(src, "small", "changed!", 8);
	rix_backup_summary third;
	rix_id snap3;
	MUST(rix_backup(&snap3, &third, r, paths, 1, &bo));
	assert_int_equal(third.files_unmodified, third.files - 2); /* small and its hard link "hard" */
	assert_int_equal(third.bytes, 16);
	assert_int_equal(third.data_blobs, 1);
	assert_int_equal(third.files_changed, 2);
	assert_int_equal(third.files_new, 0);
	bo.force = true;
	rix_backup_summary forced;
	rix_id snap4;
	MUST(rix_backup(&snap4, &forced, r, paths, 1, &bo));
	bo.force = false;
	assert_int_equal(forced.files_unmodified, 0);
	assert_int_equal(forced.data_blobs, 0);
	assert_true(forced.bytes > (5u << 20));
	size_t depth = 0;
	for (const char *c = src; *c; c++)
		depth += *c == '/';
	assert_true(again.tree_blobs <= depth);
	MUST(rix_lock_free(l));
	/* The snapshot carries restic 0.17's summary (restic 0.14's `cat snapshot` would drop it). */
	uint8_t *sj;
	size_t sl;
	MUST(rix_repo_read_file(&sj, &sl, r, RIX_FILE_SNAPSHOT, &snap3));
	json_t *sn = json_loadb((const char *)sj, sl, 0, NULL);
	rix_free(sj);
	rix_repo_free(r);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(sn, "summary"), "files_changed")), 2);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(sn, "summary"), "total_files_processed")), 7 + 2); /* and the symlink and the FIFO */
	assert_non_null(json_object_get(sn, "parent"));
	json_decref(sn);

	assert_int_equal(restic(repo, "check --read-data"), 0);
	assert_int_equal(restic(repo, "restore latest --target '%s'", out), 0);
	/* restic restores the absolute path under the target. */
	/* Every regular file's bytes (diff -r trips over FIFOs), then names, modes, types, sizes,
	 * mtimes, link counts and link targets of everything. */
	char *diff;
	size_t dl;
	assert_int_equal(rix_test_run(&diff, &dl, "cd '%s' && find . -type f ! -exec cmp -s '{}' '%s%s/{}' ';' -print", src, out, src),
			 0);
	if (dl != 0) /* the files whose restored bytes differ (or are missing) */
		fail_msg("restored differently: %s", diff);
	free(diff);
	assert_int_equal(rix_test_run(NULL, NULL,
				      "cd '%s' && find . -printf '%%p %%m %%y %%s %%T@ %%n %%l\\n' | sort > '%s/a.txt' && "
				      "cd '%s%s' && find . -printf '%%p %%m %%y %%s %%T@ %%n %%l\\n' | sort > '%s/b.txt' && "
				      "diff '%s/a.txt' '%s/b.txt'",
				      src, work, out, src, work, work, work),
			 0);
	rix_test_free_dir(work);
}

static void test_restic_then_rix(void **state)
{
	(void)state;
	rix_test_need_restic();
	struct fixture f;
	fixture_new(&f);
	char *work = f.work, *repo = f.repo;
	/* `backup .` from inside src: the root tree is src itself, so the metadata of its ancestors
	 * (/tmp's mtime moves whenever anyone makes a file there) does not enter the comparison. */
	assert_int_equal(restic(repo, "init"), 0);
	restic_backup_dot(&f, "");
	char theirs[65];
	latest_tree(repo, theirs);
	rix_repo *r = open_or_init(repo, 0);
	rix_backup_options bo = RIX_BACKUP_OPTIONS_INIT;
	bo.warn = warn_fail;
	rix_id snap;
	rix_backup_summary sum;
	rix_backup_dot(&snap, &sum, r, &f, &bo);
	rix_repo_free(r);
	/* The same bytes: no new data blob; the same metadata: the same trees, root included. */
	assert_int_equal(sum.data_blobs, 0);
	assert_int_equal(sum.tree_blobs, 0);
	/* restic's snapshot was the parent: nothing was read. */
	assert_true(sum.has_parent);
	assert_int_equal(sum.files_unmodified, sum.files);
	assert_int_equal(sum.bytes, 0);
	char mine[65];
	latest_tree(repo, mine);
	assert_string_equal(mine, theirs);
	assert_int_equal(restic(repo, "check --read-data"), 0);
	/* And restic backs up again on top of rix's snapshot (as its parent): the same tree. */
	restic_backup_dot(&f, "");
	latest_tree(repo, theirs);
	assert_string_equal(mine, theirs);
	rix_test_free_dir(work);
}

/* The same excludes give restic's tree exactly: the same entries were left out. */
static void test_excludes_like_restic(void **state)
{
	(void)state;
	rix_test_need_restic();
	struct fixture f;
	fixture_new(&f);
	char *work = f.work, *src = f.src, *repo = f.repo, p[4400];
	rix_test_put_file(src, "a.o", "o", 1);
	rix_test_put_file(src, "b.c", "c", 1);
	snprintf(p, sizeof(p), "%s/d1", src);
	rix_test_put_file(p, "x.o", "o", 1);
	rix_test_put_file(p, "KEEP.tmp", "t", 1);
	snprintf(p, sizeof(p), "%s/cache", src);
	assert_int_equal(mkdir(p, 0755), 0);
	const char *tag = "Signature: 8a477f597d28d172789f06886806bc55\n# a cache\n";
	rix_test_put_file(p, "CACHEDIR.TAG", tag, strlen(tag));
	rix_test_put_file(p, "data", "cached", 6);
	snprintf(p, sizeof(p), "%s/skipme", src);
	assert_int_equal(mkdir(p, 0755), 0);
	rix_test_put_file(p, ".nobackup", "", 0);
	rix_test_put_file(p, "f", "f", 1);
	const char *flags = "--exclude '*.o' --exclude 'd1/d2' --iexclude '*.TMP' --exclude-if-present .nobackup "
			    "--exclude-caches";
	assert_int_equal(restic(repo, "init"), 0);
	restic_backup_dot(&f, flags);
	char theirs[65];
	latest_tree(repo, theirs);
	rix_repo *r = open_or_init(repo, 0);
	rix_backup_options bo = RIX_BACKUP_OPTIONS_INIT;
	bo.warn = warn_fail;
	const char *ex[] = { "*.o", "d1/d2" }, *iex[] = { "*.TMP" }, *present[] = { ".nobackup" };
	bo.excludes = ex;
	bo.nexcludes = 2;
	bo.iexcludes = iex;
	bo.niexcludes = 1;
	bo.if_present = present;
	bo.nif_present = 1;
	bo.exclude_caches = true;
	bo.force = true; /* read everything: the tree must still be restic's */
	rix_id snap;
	rix_backup_summary sum;
	rix_backup_dot(&snap, &sum, r, &f, &bo);
	rix_repo_free(r);
	assert_true(sum.excluded >= 6);
	char mine[65];
	latest_tree(repo, mine);
	assert_string_equal(mine, theirs);
	rix_test_free_dir(work);
}

/* --stdin: a file named as asked, restic dumps its bytes; skip_if_unchanged writes nothing new. */
static void test_stdin_and_skip(void **state)
{
	(void)state;
	rix_test_need_restic();
	struct fixture f;
	fixture_new(&f);
	char *work = f.work, *repo = f.repo, in[4300];
	snprintf(in, sizeof(in), "%s/input", work);
	uint64_t st = 5;
	size_t big = (3u << 20) + 17;
	uint8_t *data = malloc(big);
	rix_test_fill_random(data, big, &st);
	rix_test_put_file(work, "input", data, big);
	rix_repo *r = open_or_init(repo, 1);
	int saved = dup(0), fd = open(in, O_RDONLY);
	assert_true(saved >= 0 && fd >= 0);
	assert_int_equal(dup2(fd, 0), 0);
	rix_backup_options bo = RIX_BACKUP_OPTIONS_INIT;
	bo.warn = warn_fail;
	bo.stdin_name = "db.dump";
	rix_id snap;
	rix_backup_summary sum;
	MUST(rix_backup(&snap, &sum, r, NULL, 0, &bo));
	assert_int_equal(dup2(saved, 0), 0);
	close(saved);
	close(fd);
	assert_int_equal(sum.bytes, big);
	char *out;
	size_t len;
	assert_int_equal(rix_test_run(&out, &len, "RESTIC_PASSWORD='%s' restic --no-cache -q -r '%s' dump latest /db.dump", PW, repo), 0);
	assert_int_equal(len, big);
	assert_memory_equal(out, data, big);
	free(out);
	/* skip_if_unchanged: the second backup of the same tree writes no snapshot. */
	bo = (rix_backup_options)RIX_BACKUP_OPTIONS_INIT;
	bo.warn = warn_fail;
	bo.skip_if_unchanged = true;
	rix_id s1, s2;
	rix_backup_dot(&s1, &sum, r, &f, &bo);
	assert_false(sum.skipped);
	rix_backup_dot(&s2, &sum, r, &f, &bo);
	assert_true(sum.skipped);
	assert_memory_equal(s1.b, s2.b, RIX_ID_SIZE);
	char sd[4300];
	snprintf(sd, sizeof(sd), "%s/snapshots", repo);
	char ids[8][65];
	assert_int_equal(rix_test_list_ids(sd, ids, 8), 2);
	rix_repo_free(r);
	free(data);
	rix_test_free_dir(work);
}

/* A parent whose file's blob the index lost: the file is read and stored again, never carried forward. */
static void test_parent_blob_lost(void **state)
{
	(void)state;
	struct fixture f;
	fixture_new(&f);
	rix_repo *r = open_or_init(f.repo, 1);
	rix_backup_options bo = RIX_BACKUP_OPTIONS_INIT;
	bo.warn = warn_fail;
	rix_id snap;
	rix_backup_summary sum;
	rix_backup_dot(&snap, &sum, r, &f, &bo);
	MUST(rix_repo_flush(r));
	rix_repo_free(r);
	char path[4300];
	snprintf(path, sizeof(path), "%s/small", f.src);
	size_t n;
	uint8_t *data = rix_test_read_file(path, &n);
	rix_id lost;
	rix_sha256(&lost, data, n);
	free(data);
	assert_int_equal(drop_from_index(f.repo, &lost), 1);
	r = open_or_init(f.repo, 0);
	rix_backup_dot(&snap, &sum, r, &f, &bo);
	assert_int_equal(sum.files_unmodified, sum.files - 2); /* small and its hard link were read */
	assert_int_equal(sum.data_blobs, 1);                  /* and their blob stored again */
	assert_true(rix_master_index_has(rix_repo_master_index(r), RIX_BLOB_DATA, &lost));
	rix_repo_free(r);
	rix_test_free_dir(f.work);
}

/*
 * Relative targets keep restic's layout: `backup src` is /src in the tree, `backup ../x/y` is
 * /x/y (the leading ".." dropped), `backup src/d1/../small ./src/d1` is /src/small and /src/d1;
 * the snapshot's paths are absolute. The same root trees as restic's, for each.
 */
static void test_relative_targets(void **state)
{
	(void)state;
	rix_test_need_restic();
	struct fixture f;
	fixture_new(&f);
	char other[4300], cwd[4300];
	snprintf(other, sizeof(other), "%s/other", f.work);
	assert_int_equal(mkdir(other, 0755), 0);
	assert_int_equal(restic(f.repo, "init"), 0);
	assert_non_null(getcwd(cwd, sizeof(cwd)));
	static const struct {
		const char *from, *args;
		size_t n;
		const char *paths[2];
	} cases[] = {
		{ "", "src", 1, { "src" } },
		{ "/other", "../src/d1/d2", 1, { "../src/d1/d2" } },
		{ "", "src/d1/../small ./src/d1", 2, { "src/d1/../small", "./src/d1" } },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char dir[4400];
		snprintf(dir, sizeof(dir), "%s%s", f.work, cases[i].from);
		assert_int_equal(rix_test_run(NULL, NULL, "cd '%s' && RESTIC_PASSWORD='%s' restic --no-cache -q -r '%s' backup %s >/dev/null",
					      dir, PW, f.repo, cases[i].args),
				 0);
		char theirs[65], mine[65];
		latest_tree(f.repo, theirs);
		rix_repo *r = open_or_init(f.repo, 0);
		rix_backup_options bo = RIX_BACKUP_OPTIONS_INIT;
		bo.warn = warn_fail;
		bo.force = true;
		rix_id snap;
		rix_backup_summary sum;
		assert_int_equal(chdir(dir), 0);
		MUST(rix_backup(&snap, &sum, r, cases[i].paths, cases[i].n, &bo));
		assert_int_equal(chdir(cwd), 0);
		rix_repo_free(r);
		latest_tree(f.repo, mine);
		if (strcmp(mine, theirs) != 0)
			fail_msg("backup %s from %s: root tree %s, restic's %s", cases[i].args, dir, mine, theirs);
	}
	assert_int_equal(restic(f.repo, "check"), 0);
	rix_test_free_dir(f.work);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rix_backup_restic_restore),
		cmocka_unit_test(test_restic_then_rix),
		cmocka_unit_test(test_excludes_like_restic),
		cmocka_unit_test(test_stdin_and_skip),
		cmocka_unit_test(test_parent_blob_lost),
		cmocka_unit_test(test_relative_targets),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
