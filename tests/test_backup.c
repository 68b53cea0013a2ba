/*
 * tests/test_backup.c — rix_backup against the real restic: a tree with every kind of entry
 * backed up by rix is checked (--read-data) and restored byte- and metadata-exact by restic;
 * backed up by restic first, the same tree backed up by rix stores no new data blob and gives
 * the same root tree (byte-identical trees); and rix's snapshot is a parent restic accepts.
 */
#include <fcntl.h>
#include <pthread.h>
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

#define RESTIC "RESTIC_PASSWORD='" PW "' restic --no-cache -q"
#define restic(repo, ...) rix_test_tool(NULL, NULL, NULL, RESTIC, repo, " >/dev/null", __VA_ARGS__)

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
	/* restic counts regular files alone there (not the symlink and the FIFO) */
	assert_int_equal(json_integer_value(json_object_get(json_object_get(sn, "summary"), "total_files_processed")), 7);
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

/*
 * The parent, restic's rule: the latest snapshot of this host whose paths include every target
 * (a snapshot of src/d1 and src/small is the parent of a backup of src/d1 alone), never one of
 * another host or one lacking a target.
 */
static void test_parent_choice(void **state)
{
	(void)state;
	struct fixture f;
	fixture_new(&f);
	rix_repo *r = open_or_init(f.repo, 1);
	rix_backup_options bo = RIX_BACKUP_OPTIONS_INIT;
	bo.warn = warn_fail;
	char d1[4300], small[4300];
	snprintf(d1, sizeof(d1), "%s/d1", f.src);
	snprintf(small, sizeof(small), "%s/small", f.src);
	const char *both[] = { d1, small }, *one[] = { d1 }, *other[] = { small };
	rix_id s_both, s_other, s, s_host;
	rix_backup_summary sum;
	MUST(rix_backup(&s_both, &sum, r, both, 2, &bo));
	assert_false(sum.has_parent);
	bo.hostname = "elsewhere"; /* a later snapshot of the same paths, another host */
	MUST(rix_backup(&s_host, &sum, r, both, 2, &bo));
	assert_false(sum.has_parent);
	bo.hostname = NULL;
	MUST(rix_backup(&s_other, &sum, r, other, 1, &bo)); /* lacks d1 */
	assert_true(sum.has_parent);                        /* s_both holds small */
	assert_memory_equal(sum.parent_id.b, s_both.b, RIX_ID_SIZE);
	MUST(rix_backup(&s, &sum, r, one, 1, &bo));
	assert_true(sum.has_parent);
	assert_memory_equal(sum.parent_id.b, s_both.b, RIX_ID_SIZE);
	assert_int_equal(sum.files_unmodified, sum.files); /* d1's files taken from it */
	rix_repo_free(r);
	rix_test_free_dir(f.work);
}

/*
 * A tree 1500 directories deep (a path of 3000 bytes): the walk recurses once per level, so its
 * frames must stay small (they held 9 KiB of buffers each and a tree like this crashed it).
 */
static void test_deep_tree(void **state)
{
	(void)state;
	char *work = rix_test_new_dir("rix-deep");
	assert_int_equal(rix_test_run(NULL, NULL,
				      "cd '%s' && mkdir src && cd src && for i in $(seq 1500); do mkdir a && cd a || exit 1; done && "
				      "echo deep > f",
				      work),
			 0);
	char src[4300], repo[4300];
	snprintf(src, sizeof(src), "%s/src", work);
	snprintf(repo, sizeof(repo), "%s/repo", work);
	rix_repo *r = open_or_init(repo, 1);
	rix_backup_options bo = RIX_BACKUP_OPTIONS_INIT;
	bo.warn = warn_fail;
	const char *paths[] = { src };
	rix_id snap;
	rix_backup_summary sum;
	MUST(rix_backup(&snap, &sum, r, paths, 1, &bo));
	assert_int_equal(sum.files, 1);
	assert_true(sum.dirs >= 1501);
	rix_repo_free(r);
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
 * the snapshot's paths are absolute. Top-level names from different roots do not merge: from
 * other/, `backup src ../src` is /src and /src-1, and `backup usr /usr/bin/env` (a relative
 * target named as an absolute one's first component) is /usr and /usr-1 (before, the second
 * target was silently left out; /usr because its metadata holds still while the test runs, where
 * /tmp's does not). The same root trees as restic's, for each.
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
	/* other/src and other/usr, each holding a file */
	char sub[4600];
	const char *made[] = { "src", "usr" };
	for (size_t i = 0; i < 2; i++) {
		snprintf(sub, sizeof(sub), "%s/%s", other, made[i]);
		assert_int_equal(mkdir(sub, 0755), 0);
		char name[32];
		snprintf(name, sizeof(name), "file-%zu", i);
		rix_test_put_file(sub, name, "x", 1);
	}
	assert_int_equal(restic(f.repo, "init"), 0);
	assert_non_null(getcwd(cwd, sizeof(cwd)));
	const struct {
		const char *from, *args;
		size_t n;
		const char *paths[2];
	} cases[] = {
		{ "", "src", 1, { "src" } },
		{ "/other", "../src/d1/d2", 1, { "../src/d1/d2" } },
		{ "", "src/d1/../small ./src/d1", 2, { "src/d1/../small", "./src/d1" } },
		{ "/other", "src ../src", 2, { "src", "../src" } },
		{ "/other", "usr /usr/bin/env", 2, { "usr", "/usr/bin/env" } },
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

/* What the progress and item callbacks saw (progress calls come one at a time from one thread;
 * item calls from any thread, one at a time). */
#define MAX_CALLS 20000
struct seen {
	size_t n;
	rix_backup_progress *v; /* MAX_CALLS, current set to NULL */
	size_t max_current;
	int empty_current;      /* a current file with an empty name */
	int calls_after_done;
	pthread_t reporter;
	int other_thread;       /* a progress call from another thread than the first's */
	size_t items[2][3];     /* [dir][action] */
	uint64_t item_data, item_meta;
	uint64_t item_data_repo, item_meta_repo; /* their *_size_in_repo */
	int dir_without_slash, file_with_slash, bad_seconds;
};

static void on_progress(void *payload, const rix_backup_progress *p)
{
	struct seen *s = payload;
	if (s->n > 0 && s->v[s->n - 1].done)
		s->calls_after_done++;
	if (s->n == 0)
		s->reporter = pthread_self();
	else if (!pthread_equal(s->reporter, pthread_self()))
		s->other_thread++;
	if (p->ncurrent > s->max_current)
		s->max_current = p->ncurrent;
	for (size_t i = 0; i < p->ncurrent; i++)
		s->empty_current += p->current[i][0] == '\0';
	if (s->n < MAX_CALLS) {
		s->v[s->n] = *p;
		s->v[s->n].current = NULL;
		s->n++;
	}
}

static void on_item(void *payload, const rix_backup_item *it)
{
	struct seen *s = payload;
	size_t pl = strlen(it->path);
	s->items[it->dir][it->action]++;
	s->item_data += it->data_size;
	s->item_meta += it->metadata_size;
	s->item_data_repo += it->data_size_in_repo;
	s->item_meta_repo += it->metadata_size_in_repo;
	/* a blob's stored bytes when (and only when) it was stored: at least the crypto overhead */
	s->bad_seconds += (it->data_size == 0) != (it->data_size_in_repo == 0);
	s->bad_seconds += (it->metadata_size == 0) != (it->metadata_size_in_repo == 0);
	s->dir_without_slash += it->dir && (pl == 0 || it->path[pl - 1] != '/');
	s->file_with_slash += !it->dir && pl > 0 && it->path[pl - 1] == '/';
	s->bad_seconds += it->seconds < 0 || (it->action == RIX_BACKUP_UNCHANGED && it->seconds != 0);
}

/* Progress calls: counts never go back, totals only grow and stay final once final, the last
 * says done and matches the summary (the scanner counted what the walk backed up). */
static void check_progress(const struct seen *s, const rix_backup_summary *sum)
{
	assert_true(s->n >= 1);
	assert_int_equal(s->calls_after_done, 0);
	assert_int_equal(s->other_thread, 0);
	assert_int_equal(s->empty_current, 0);
	for (size_t i = 1; i < s->n; i++) {
		const rix_backup_progress *a = &s->v[i - 1], *b = &s->v[i];
		if (b->seconds < a->seconds || b->files_done < a->files_done || b->dirs_done < a->dirs_done ||
		    b->bytes_done < a->bytes_done || b->errors < a->errors || b->files_total < a->files_total ||
		    b->dirs_total < a->dirs_total || b->bytes_total < a->bytes_total || (a->totals_final && !b->totals_final) ||
		    a->done)
			fail_msg("progress call %zu went back: files %llu -> %llu, bytes %llu -> %llu", i,
				 (unsigned long long)a->files_done, (unsigned long long)b->files_done,
				 (unsigned long long)a->bytes_done, (unsigned long long)b->bytes_done);
	}
	const rix_backup_progress *last = &s->v[s->n - 1];
	assert_true(last->done && last->totals_final);
	assert_int_equal(last->files_done, sum->files);
	assert_int_equal(last->dirs_done, sum->dirs);
	assert_int_equal(last->bytes_done, sum->bytes_total);
	assert_int_equal(last->files_total, last->files_done);
	assert_int_equal(last->dirs_total, last->dirs_done);
	assert_int_equal(last->bytes_total, last->bytes_done);
	assert_int_equal(last->errors, sum->errors);
	assert_int_equal(last->ncurrent, 0);
}

/* The progress callback a few times a second (here every millisecond) from one thread, and an
 * item event per file and directory, on a first backup and on one with a parent. */
static int sum_lengths(void *payload, const rix_packed_blob *pb)
{
	*(uint64_t *)payload += pb->length;
	return 0;
}

static void test_progress_and_items(void **state)
{
	(void)state;
	struct fixture f;
	fixture_new(&f);
	rix_repo *r = open_or_init(f.repo, 1);
	struct seen *s = calloc(1, sizeof(*s));
	s->v = calloc(MAX_CALLS, sizeof(*s->v));
	assert_non_null(s->v);
	rix_backup_options bo = RIX_BACKUP_OPTIONS_INIT;
	bo.warn = warn_fail;
	bo.progress = on_progress;
	bo.item = on_item;
	bo.payload = s;
	bo.progress_interval_ms = 1;
	bo.read_concurrency = 2;
	rix_id snap;
	rix_backup_summary sum;
	rix_backup_dot(&snap, &sum, r, &f, &bo);
	check_progress(s, &sum);
	assert_true(s->n >= 2); /* 8 MiB hashed, compressed and sealed take more than a millisecond */
	assert_true(sum.seconds > 0);
	/* Every file new (big small empty odd café deep hard), with the bytes stored for it; every
	 * directory but the root (d1, d2) new, with its tree. */
	assert_int_equal(s->items[0][RIX_BACKUP_NEW], 7);
	assert_int_equal(s->items[0][RIX_BACKUP_UNCHANGED] + s->items[0][RIX_BACKUP_MODIFIED], 0);
	assert_int_equal(s->items[1][RIX_BACKUP_NEW], sum.dirs);
	assert_int_equal(s->item_data, sum.data_added);
	assert_true(s->item_meta > 0 && s->item_meta < sum.tree_added); /* the root's tree is no item */
	assert_int_equal(s->dir_without_slash + s->file_with_slash + s->bad_seconds, 0);
	/* data_added_packed: what every blob of this first backup takes in its pack, as the index
	 * records it; the items' stored bytes are those of their blobs (the root's tree is no item). */
	MUST(rix_repo_flush(r));
	uint64_t in_index = 0;
	assert_int_equal(rix_master_index_foreach(rix_repo_master_index(r), sum_lengths, &in_index), 0);
	assert_int_equal(sum.data_added_packed, in_index);
	assert_true(sum.data_added_packed >= 32 * (sum.data_blobs + sum.tree_blobs));
	assert_true(s->item_data_repo >= 32 * 7 && s->item_meta_repo > 0);
	assert_true(s->item_data_repo + s->item_meta_repo < sum.data_added_packed);
	/* Again: every file and directory unchanged, the unchanged bytes counted as done. */
	free(s->v);
	memset(s, 0, sizeof(*s));
	s->v = calloc(MAX_CALLS, sizeof(*s->v));
	rix_backup_dot(&snap, &sum, r, &f, &bo);
	check_progress(s, &sum);
	assert_int_equal(s->items[0][RIX_BACKUP_UNCHANGED], 7);
	assert_int_equal(s->items[1][RIX_BACKUP_UNCHANGED], sum.dirs);
	assert_int_equal(s->item_data + s->item_meta + s->item_data_repo + s->item_meta_repo, 0);
	assert_int_equal(sum.data_added_packed, 0);
	assert_true(sum.bytes_total > (8u << 20));
	free(s->v);
	free(s);
	rix_repo_free(r);
	rix_test_free_dir(f.work);
}

/* The repository's files, names and sizes, sorted (into *out). */
static void repo_listing(const char *repo, char **out)
{
	assert_int_equal(rix_test_run(out, &(size_t){ 0 }, "cd '%s' && find . -printf '%%p %%s\\n' | sort", repo), 0);
}

/*
 * A dry run writes nothing and counts what a backup stores: the real backup after it stores
 * exactly that (blobs, bytes), and a dry run on top of it would store nothing.
 */
static void test_dry_run(void **state)
{
	(void)state;
	struct fixture f;
	fixture_new(&f);
	rix_repo *r = open_or_init(f.repo, 1);
	char *before, *after;
	repo_listing(f.repo, &before);
	rix_backup_options bo = RIX_BACKUP_OPTIONS_INIT;
	bo.warn = warn_fail;
	bo.dry_run = true;
	rix_id snap;
	rix_backup_summary dry, real;
	rix_backup_dot(&snap, &dry, r, &f, &bo);
	rix_id zero = { { 0 } };
	assert_memory_equal(snap.b, zero.b, RIX_ID_SIZE);
	MUST(rix_repo_flush(r)); /* nothing to flush either */
	repo_listing(f.repo, &after);
	assert_string_equal(before, after);
	free(after);
	assert_true(dry.data_blobs >= 5 && dry.tree_blobs == 3); /* root, d1, d2 */
	assert_int_equal(dry.data_added_packed, 0); /* a dry run cannot know stored sizes */
	bo.dry_run = false;
	rix_backup_dot(&snap, &real, r, &f, &bo);
	assert_int_equal(real.data_blobs, dry.data_blobs);
	assert_int_equal(real.data_added, dry.data_added);
	assert_int_equal(real.tree_blobs, dry.tree_blobs);
	assert_int_equal(real.tree_added, dry.tree_added);
	assert_true(real.data_added_packed > 0);
	assert_int_equal(real.files_new, dry.files_new);
	assert_int_equal(real.dirs_new, dry.dirs_new);
	assert_int_equal(real.bytes, dry.bytes);
	assert_false(dry.has_parent);
	/* On top of that snapshot: nothing would be stored, every file unchanged. */
	free(before);
	repo_listing(f.repo, &before);
	bo.dry_run = true;
	rix_backup_dot(&snap, &dry, r, &f, &bo);
	repo_listing(f.repo, &after);
	assert_string_equal(before, after);
	assert_true(dry.has_parent);
	assert_int_equal(dry.data_blobs + dry.tree_blobs + dry.data_added + dry.tree_added, 0);
	assert_int_equal(dry.files_unmodified, real.files);
	free(before);
	free(after);
	rix_repo_free(r);
	rix_test_free_dir(f.work);
}

/* Options of version 1 (before progress, item and dry_run) still work, and their summary is
 * written without the fields version 2 added; version 2's end before snapshot_excludes; an
 * unknown version is refused. */
static void test_options_v1(void **state)
{
	(void)state;
	struct fixture f;
	fixture_new(&f);
	rix_repo *r = open_or_init(f.repo, 1);
	rix_backup_options bo = RIX_BACKUP_OPTIONS_INIT;
	bo.version = 1;
	bo.warn = warn_fail;
	bo.dry_run = true; /* past a version 1 struct: not read */
	rix_id snap;
	rix_backup_summary sum;
	memset(&sum, 0xAB, sizeof(sum));
	rix_backup_dot(&snap, &sum, r, &f, &bo);
	assert_true(sum.data_blobs >= 5);
	assert_int_equal(sum.files, 7);
	uint8_t tail[sizeof(sum) - offsetof(rix_backup_summary, tree_added)];
	memset(tail, 0xAB, sizeof(tail));
	assert_memory_equal((uint8_t *)&sum + offsetof(rix_backup_summary, tree_added), tail, sizeof(tail));
	assert_int_equal(count_files(r, RIX_FILE_SNAPSHOT), 1); /* not a dry run */
	/* version 2 ends before snapshot_excludes: not read */
	bo.version = 2;
	bo.dry_run = false;
	const char *rec[] = { "x" };
	bo.snapshot_excludes = rec;
	bo.nsnapshot_excludes = 1;
	rix_backup_dot(&snap, &sum, r, &f, &bo);
	rix_snapshot *sn;
	MUST(rix_snapshot_load(&sn, r, &snap));
	assert_int_equal(sn->nexcludes, 0);
	rix_snapshot_free(sn);
	bo.version = 3; /* now it is */
	rix_backup_dot(&snap, &sum, r, &f, &bo);
	MUST(rix_snapshot_load(&sn, r, &snap));
	assert_int_equal(sn->nexcludes, 1);
	assert_string_equal(sn->excludes[0], "x");
	rix_snapshot_free(sn);
	bo.version = RIX_BACKUP_OPTIONS_VERSION + 1;
	const char *paths[] = { f.src };
	assert_int_equal(rix_backup(&snap, &sum, r, paths, 1, &bo), RIX_EINVAL);
	rix_repo_free(r);
	rix_test_free_dir(f.work);
}

/*
 * A config with rustic's chunker members naming another chunker: the repository opens and
 * checks, backup refuses (saying why) and writes nothing; restic's chunker spelled out the
 * rustic way ("Rabin", restic's sizes) backs up as usual.
 */
static void test_other_chunker_refused(void **state)
{
	(void)state;
	struct fixture f;
	fixture_new(&f);
	rix_repo *r = open_or_init(f.repo, 1);
	char idhex[65], json[512];
	rix_id_to_hex(idhex, &rix_repo_config(r)->id);
	unsigned long long pol = (unsigned long long)rix_repo_config(r)->chunker_polynomial;
	rix_repo_free(r);
	snprintf(json, sizeof(json),
		 "{\"version\":2,\"id\":\"%s\",\"chunker_polynomial\":\"%llx\",\"chunker\":\"FixedSize\",\"chunk_size\":1048576}",
		 idhex, pol);
	write_config_json(f.repo, json);
	r = open_or_init(f.repo, 0);
	assert_string_equal(rix_repo_config(r)->other_chunker, "\"chunker\":\"FixedSize\"");
	const char *paths[] = { f.src };
	rix_id snap;
	rix_backup_summary sum;
	assert_int_equal(rix_backup(&snap, &sum, r, paths, 1, NULL), RIX_EINVAL);
	assert_non_null(strstr(rix_error_last(), "chunker"));
	assert_non_null(strstr(rix_error_last(), "FixedSize"));
	assert_int_equal(count_files(r, RIX_FILE_SNAPSHOT) + count_files(r, RIX_FILE_PACK), 0);
	rix_repo_free(r);
	struct lines l;
	run_check(f.repo, 1, 0, &l);
	/* rustic's spelling of restic's own chunker: backed up. */
	snprintf(json, sizeof(json),
		 "{\"version\":2,\"id\":\"%s\",\"chunker_polynomial\":\"%llx\",\"chunker\":\"Rabin\",\"chunk_size\":1048576,"
		 "\"chunk_min_size\":524288,\"chunk_max_size\":8388608,\"compression\":3}",
		 idhex, pol);
	write_config_json(f.repo, json);
	r = open_or_init(f.repo, 0);
	assert_string_equal(rix_repo_config(r)->other_chunker, "");
	rix_backup_options bo = RIX_BACKUP_OPTIONS_INIT;
	bo.warn = warn_fail;
	rix_backup_dot(&snap, &sum, r, &f, &bo);
	assert_int_equal(count_files(r, RIX_FILE_SNAPSHOT), 1);
	rix_repo_free(r);
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
		cmocka_unit_test(test_parent_choice),
		cmocka_unit_test(test_deep_tree),
		cmocka_unit_test(test_relative_targets),
		cmocka_unit_test(test_progress_and_items),
		cmocka_unit_test(test_dry_run),
		cmocka_unit_test(test_options_v1),
		cmocka_unit_test(test_other_chunker_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
