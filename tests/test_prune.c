/*
 * tests/test_prune.c — `rix prune` against the real restic 0.14 on the same repositories. The
 * group's repository (made once, copied by each test): snapshots of a changing source tree by
 * restic and rix in turn, a pack no index names (a rix backup killed after writing it), and two
 * of the snapshots forgotten, so that prune has every kind of work to do.
 *   test_interop      rix prune, then rix forget --prune --max-unused 0 (packs repacked:
 *                     the repository smaller, packs gone, new ones made; the compressed blobs
 *                     repacked, restic's among them, copied as stored: the same lengths,
 *                     uncompressed lengths and bytes): each time restic and
 *                     rix check --read-data, and every kept snapshot restored by both equals its
 *                     source (diff -r); a second prune has nothing to do (no file added or
 *                     removed, and restic's dry run agrees); then the other way: more backups,
 *                     rix forget --keep-last, restic prune, and rix checks and restores the rest
 *   test_dry_run      prune --dry-run / -n (with other flags) and forget --dry-run --prune change no
 *                     byte of the repository
 *   test_refusals     a needed pack missing, one padded, one truncated, a snapshot's tree missing
 *                     from the index (the index files naming it deleted, or the tree dropped from
 *                     its index file), a used data blob missing from the index: rix prune exits 1
 *                     with restic's reason (a size mismatch: `rix repair index` suggested) and
 *                     removes nothing (not even the unreferenced pack); restic refuses each too
 *   test_index_twice  every index file written twice (what a prune killed between writing the new
 *                     index and removing the old files leaves): restic prunes it, rix must too
 *   test_crash        (`test_prune crash`, registered as test_prune_crash, label slow):
 *                     RIX_DEBUG_KILL_AFTER=N rix prune --max-unused 0 for N = 1, 2, ... until a
 *                     run completes (at least 3 killed): after each kill
 *                     both tools check the repository, every kept snapshot restores, and a rerun
 *                     of prune completes and leaves a repository that checks --read-data
 */
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "rix/rix.h"
#include "repo_fixture.h"
#include "testutil.h"

#define RIX "'" RIX_CLI_PATH "' -q"
#define RESTIC "restic --no-cache -q"


/* A command that must exit 0 (printf-style), its output shown when it does not. */
#define sh(...) rix_test_sh(__VA_ARGS__)
/* A command's exit status, its stdout and stderr into *out (malloc'd). */
static int run_out(char **out, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static int run_out(char **out, const char *fmt, ...)
{
	char cmd[8192];
	va_list ap;
	va_start(ap, fmt);
	int k = vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	assert_true(k > 0 && (size_t)k < sizeof(cmd) - 8);
	strcat(cmd, " 2>&1");
	return rix_test_run(out, NULL, "%s", cmd);
}

/*
 * Fails the test at the caller's line with the message (printf-style; it may print a and b),
 * freeing a and b first: a failed test leaks nothing for LeakSanitizer to report beside it.
 */
#define fail_free(a, b, ...) fail_free_at(__FILE__, __LINE__, a, b, __VA_ARGS__)
static void fail_free_at(const char *file, int line, char *a, char *b, const char *fmt, ...)
	__attribute__((format(printf, 5, 6), noreturn));

static void fail_free_at(const char *file, int line, char *a, char *b, const char *fmt, ...)
{
	static char msg[65536];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	free(a);
	free(b);
	print_error("ERROR: %s\n", msg);
	_fail(file, line);
	abort(); /* not reached: _fail leaves the test */
}

/* ---- the source and its versions ----------------------------------------------------------- */

/* One version of the source tree: a copy of it, the snapshot taken of it, whether it is kept. */
struct version {
	char copy[4300];
	char snap[65];
	bool kept;
};

#define MAX_VERSIONS 8
static char *work;      /* the group's folder */
static char src[4200];  /* the source tree, changed from version to version */
static char base[4200]; /* the group's repository */
static struct version v[MAX_VERSIONS];
static size_t nv;
static char lost_pack[65]; /* the pack no index names */

static void put_random(const char *dir, const char *name, size_t n, uint64_t seed)
{
	uint8_t *buf = malloc(n);
	assert_non_null(buf);
	rix_test_fill_random(buf, n, &seed);
	rix_test_put_file(dir, name, buf, n);
	free(buf);
}

/*
 * Version k of the source. 0: two folders of six files each (40 to 480 kB), a 2.5 MB file
 * (several chunks), a note, an empty folder. Each later one removes a file, adds one, rewrites
 * d0/f0 and the note, and changes 4 kB in the middle of the big file (one chunk).
 */
static void make_version(size_t k)
{
	char d[4300];
	if (k == 0) {
		for (int i = 0; i < 6; i++) {
			char name[16];
			snprintf(name, sizeof(name), "f%d", i);
			snprintf(d, sizeof(d), "%s/d0", src);
			mkdir(d, 0755);
			put_random(d, name, 80000 * (size_t)(i + 1), 100 + (uint64_t)i);
			snprintf(d, sizeof(d), "%s/d1", src);
			mkdir(d, 0755);
			put_random(d, name, 40000 * (size_t)(i + 2), 200 + (uint64_t)i);
		}
		put_random(src, "big", 2500000, 7);
		snprintf(d, sizeof(d), "%s/empty", src);
		assert_int_equal(mkdir(d, 0755), 0);
	} else {
		snprintf(d, sizeof(d), "%s/d%zu/f%zu", src, k % 2, k % 6);
		unlink(d);
		snprintf(d, sizeof(d), "%s/d2", src);
		mkdir(d, 0755);
		char name[32];
		snprintf(name, sizeof(name), "new%zu", k);
		put_random(d, name, 150000 + 10000 * k, 1000 + k);
		snprintf(d, sizeof(d), "%s/d0", src);
		put_random(d, "f0", 90000, 500 + k);
		uint8_t patch[4096];
		uint64_t seed = 700 + k;
		rix_test_fill_random(patch, sizeof(patch), &seed);
		snprintf(d, sizeof(d), "%s/big", src);
		int fd = open(d, O_WRONLY);
		assert_true(fd >= 0);
		assert_int_equal(pwrite(fd, patch, sizeof(patch), 1200000), (ssize_t)sizeof(patch));
		close(fd);
	}
	char note[32];
	int n = snprintf(note, sizeof(note), "version %zu\n", k);
	rix_test_put_file(src, "note", note, (size_t)n);
	snprintf(v[k].copy, sizeof(v[k].copy), "%s/v%zu", work, k);
	sh("cp -a '%s' '%s'", src, v[k].copy);
}

/* The one snapshot in repo's snapshots/ that is not in before[0..n). */
static void new_snapshot(char out[65], const char *repo, char before[][65], size_t n)
{
	char dir[4300], now[64][65];
	snprintf(dir, sizeof(dir), "%s/snapshots", repo);
	size_t m = rix_test_list_ids(dir, now, 64);
	assert_int_equal(m, n + 1);
	for (size_t i = 0; i < m; i++) {
		size_t j = 0;
		while (j < n && strcmp(now[i], before[j]) != 0)
			j++;
		if (j == n) {
			memcpy(out, now[i], 65);
			return;
		}
	}
	fail_msg("no new snapshot in %s", repo);
}

/* The next version of the source, backed up into repo by restic or rix. */
static void backup_version(const char *repo, bool by_restic)
{
	assert_true(nv < MAX_VERSIONS);
	make_version(nv);
	char dir[4300], before[64][65];
	snprintf(dir, sizeof(dir), "%s/snapshots", repo);
	size_t n = rix_test_list_ids(dir, before, 64);
	if (by_restic)
		sh(RESTIC " -r '%s' backup '%s' >/dev/null", repo, src);
	else
		sh(RIX " -r '%s' backup '%s' >/dev/null", repo, src);
	new_snapshot(v[nv].snap, repo, before, n);
	v[nv].kept = true;
	nv++;
}

/* ---- repositories ------------------------------------------------------------------------------ */

/* The IDs of repo's packs (data/xx/ID), sorted, at most max; how many. */
static size_t list_packs(const char *repo, char ids[][65], size_t max)
{
	char *out;
	assert_int_equal(rix_test_run(&out, NULL, "cd '%s/data' && find . -type f -printf '%%f\\n' | LC_ALL=C sort", repo), 0);
	size_t n = 0;
	for (char *line = strtok(out, "\n"); line != NULL; line = strtok(NULL, "\n")) {
		assert_int_equal(strlen(line), 64);
		assert_true(n < max);
		memcpy(ids[n++], line, 65);
	}
	free(out);
	return n;
}

static bool has_id(char ids[][65], size_t n, const char *id)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(ids[i], id) == 0)
			return true;
	return false;
}

/* Every file of repo (its path, size and MD5), sorted: malloc'd. */
static char *listing(const char *repo)
{
	char *out;
	assert_int_equal(rix_test_run(&out, NULL,
				      "cd '%s' && find . -type f -printf '%%P %%s ' -exec md5sum {} \\; | LC_ALL=C sort", repo),
			 0);
	return out;
}

/* The bytes the files of repo take. */
static uint64_t repo_bytes(const char *repo)
{
	char *out;
	assert_int_equal(rix_test_run(&out, NULL, "find '%s' -type f -printf '%%s\\n' | awk '{ s += $1 } END { print s + 0 }'",
				      repo),
			 0);
	uint64_t n = strtoull(out, NULL, 10);
	free(out);
	return n;
}

static size_t count_ids(const char *repo, const char *sub)
{
	char dir[4400], ids[256][65];
	snprintf(dir, sizeof(dir), "%s/%s", repo, sub);
	return rix_test_list_ids(dir, ids, 256);
}

/*
 * Both tools check repo (with --read-data when asked) and restore every kept snapshot equal to
 * its version of the source (diff -r).
 */
static void verify(const char *repo, bool read_data, bool restore_with_both)
{
	const char *rd = read_data ? " --read-data" : "";
	if (rix_test_run(NULL, NULL, RESTIC " -r '%s' check%s >/dev/null", repo, rd) != 0)
		fail_msg("restic check%s fails on %s", rd, repo);
	if (rix_test_run(NULL, NULL, RIX " -r '%s' check%s >/dev/null", repo, rd) != 0)
		fail_msg("rix check%s fails on %s", rd, repo);
	char out[4300];
	snprintf(out, sizeof(out), "%s/restored", work);
	for (size_t i = 0; i < nv; i++) {
		if (!v[i].kept)
			continue;
		for (int tool = 0; tool < (restore_with_both ? 2 : 1); tool++) {
			rix_test_rmtree(out);
			int rc = rix_test_run(NULL, NULL, "%s -r '%s' restore %s --target '%s' >/dev/null && diff -r '%s' '%s%s'",
					      tool == 0 ? RESTIC : RIX, repo, v[i].snap, out, v[i].copy, out, src);
			if (rc != 0)
				fail_msg("%s does not restore version %zu (snapshot %.8s) of %s whole", tool == 0 ? "restic" : "rix",
					 i, v[i].snap, repo);
		}
	}
	rix_test_rmtree(out);
}

/* A copy of the group's repository at <work>/<name>, into dir. */
static void copy_base(char *dir, size_t size, const char *name)
{
	snprintf(dir, size, "%s/%s", work, name);
	rix_test_rmtree(dir);
	sh("cp -a '%s' '%s'", base, dir);
}

/* rix forget of version k's snapshot. */
static void forget(const char *repo, size_t k)
{
	sh(RIX " -r '%s' forget %s >/dev/null", repo, v[k].snap);
	v[k].kept = false;
}

/*
 * The group's repository: versions 0 to 3 by restic, rix, restic, rix; a rix backup of a new
 * file killed before its third write (the lock and a pack written, no index: the pack is
 * unreferenced); versions 0 and 2 forgotten.
 */
static int group_setup(void **state)
{
	(void)state;
	rix_test_need_restic();
	setenv("RIX_PASSWORD", PW, 1);
	setenv("RESTIC_PASSWORD", PW, 1);
	work = rix_test_new_dir("rix-prune");
	snprintf(src, sizeof(src), "%s/src", work);
	snprintf(base, sizeof(base), "%s/base", work);
	assert_int_equal(mkdir(src, 0755), 0);
	assert_int_equal(mkdir(base, 0700), 0);
	rix_repo_free(init_repo(base, 2));
	for (int k = 0; k < 4; k++)
		backup_version(base, k % 2 == 0);

	char before[256][65], after[256][65], lost[4300];
	size_t npacks = list_packs(base, before, 256), nindex = count_ids(base, "index");
	snprintf(lost, sizeof(lost), "%s/lost", src);
	assert_int_equal(mkdir(lost, 0755), 0);
	put_random(lost, "f", 300000, 4242);
	char *out;
	int rc = run_out(&out, "RIX_DEBUG_KILL_AFTER=3 " RIX " -r '%s' backup '%s'", base, src);
	if (rc != -1 && rc != 128 + SIGKILL)
		fail_free(out, NULL, "a backup with RIX_DEBUG_KILL_AFTER=3 was not killed (%d):\n%s", rc, out);
	free(out);
	rix_test_rmtree(lost);
	size_t nafter = list_packs(base, after, 256);
	assert_int_equal(count_ids(base, "index"), nindex);
	assert_int_equal(nafter, npacks + 1);
	for (size_t i = 0; i < nafter; i++)
		if (!has_id(before, npacks, after[i]))
			memcpy(lost_pack, after[i], 65);
	sh(RESTIC " -r '%s' unlock", base);

	forget(base, 0);
	forget(base, 2);
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	rix_test_free_dir(work);
	return 0;
}

/* The number after label in restic prune's report ("to repack:     12 blobs / ..."); -1: none. */
static long count_after(const char *report, const char *label)
{
	const char *p = strstr(report, label);
	return p != NULL ? strtol(p + strlen(label), NULL, 10) : -1;
}

/* ---- the tests --------------------------------------------------------------------------------- */

static void test_interop(void **state)
{
	(void)state;
	char repo[4300];
	copy_base(repo, sizeof(repo), "interop");
	struct version saved[MAX_VERSIONS];
	memcpy(saved, v, sizeof(v));
	size_t saved_nv = nv;

	/* The defaults: the unreferenced pack goes, the rest stays whole. */
	char *out;
	struct forms f0 = load_forms(repo);
	if (run_out(&out, RIX " -r '%s' prune", repo) != 0)
		fail_free(out, NULL, "rix prune:\n%s", out);
	free(out);
	struct forms f1 = load_forms(repo);
	struct form_diff d = compare_forms(&f0, &f1);
	if (d.recoded_z != 0)
		fail_msg("rix prune compressed %zu compressed blobs again (%zu copied as stored)", d.recoded_z, d.copied_z);
	free_forms(&f0);
	free_forms(&f1);
	char ids[256][65];
	size_t n = list_packs(repo, ids, 256);
	assert_false(has_id(ids, n, lost_pack));
	verify(repo, true, true);

	/* One more forgotten, pruned at once with no unused space tolerated: packs repacked. */
	uint64_t bytes = repo_bytes(repo);
	char before[256][65], after[256][65];
	size_t nbefore = list_packs(repo, before, 256);
	f0 = load_forms(repo);
	if (run_out(&out, RIX " -r '%s' forget %s --prune --max-unused 0", repo, v[1].snap) != 0)
		fail_free(out, NULL, "rix forget --prune --max-unused 0:\n%s", out);
	free(out);
	v[1].kept = false;
	/* The compressed blobs repacked (restic's: Go's zstd frames) are copied as they were stored:
	 * the same lengths, uncompressed lengths and bytes in the new packs. */
	f1 = load_forms(repo);
	d = compare_forms(&f0, &f1);
	print_message("repacked: %zu compressed blobs copied as stored, %zu uncompressed ones; %zu uncompressed saved "
		      "again, %zu of them compressed now\n", d.copied_z, d.copied_u, d.recoded_u + d.compressed_now,
		      d.compressed_now);
	if (d.copied_z == 0 || d.recoded_z != 0)
		fail_msg("rix prune --max-unused 0 copied %zu compressed blobs as stored and compressed %zu again", d.copied_z,
			 d.recoded_z);
	free_forms(&f0);
	free_forms(&f1);
	size_t nafter = list_packs(repo, after, 256);
	size_t gone = 0, made = 0;
	for (size_t i = 0; i < nbefore; i++)
		gone += !has_id(after, nafter, before[i]);
	for (size_t i = 0; i < nafter; i++)
		made += !has_id(before, nbefore, after[i]);
	uint64_t bytes_after = repo_bytes(repo);
	if (gone == 0 || made == 0 || bytes_after >= bytes)
		fail_msg("prune --max-unused 0 removed %zu packs, made %zu; %llu bytes before, %llu after", gone, made,
			 (unsigned long long)bytes, (unsigned long long)bytes_after);
	verify(repo, true, true);

	/* Nothing is left to do: a second prune changes no file, restic would prune nothing. */
	char *l0 = listing(repo);
	if (run_out(&out, RIX " -r '%s' prune --max-unused 0", repo) != 0)
		fail_free(out, NULL, "rix prune (again):\n%s", out);
	free(out);
	char *l1 = listing(repo);
	if (strcmp(l0, l1) != 0)
		fail_free(l0, l1, "a second prune changed the repository:\nbefore:\n%s\nafter:\n%s", l0, l1);
	free(l0);
	free(l1);
	assert_int_equal(run_out(&out, "restic --no-cache -r '%s' prune --dry-run --max-unused 0", repo), 0);
	if (count_after(out, "to repack:") != 0 || count_after(out, "total prune:") != 0)
		fail_free(out, NULL, "after rix prune, restic still has work to do:\n%s", out);
	free(out);

	/* The other way: more snapshots, some forgotten, restic prunes, rix reads what is left. */
	backup_version(repo, false);
	backup_version(repo, true);
	sh(RIX " -r '%s' forget --keep-last 2 >/dev/null", repo);
	for (size_t i = 0; i + 2 < nv; i++)
		v[i].kept = false;
	assert_int_equal(count_ids(repo, "snapshots"), 2);
	nbefore = list_packs(repo, before, 256);
	sh(RESTIC " -r '%s' prune --max-unused 0 >/dev/null", repo);
	nafter = list_packs(repo, after, 256);
	gone = 0;
	for (size_t i = 0; i < nbefore; i++)
		gone += !has_id(after, nafter, before[i]);
	assert_true(gone > 0);
	verify(repo, true, true);

	memcpy(v, saved, sizeof(v));
	nv = saved_nv;
	rix_test_rmtree(repo);
}

static void test_dry_run(void **state)
{
	(void)state;
	char repo[4300];
	copy_base(repo, sizeof(repo), "dry");
	char *l0 = listing(repo), *out;
	char forget[128];
	snprintf(forget, sizeof(forget), "forget --dry-run --prune --max-unused 0 %s", v[1].snap);
	const char *const flags[] = { "prune --dry-run", "prune -n --max-unused 0", "prune --dry-run --max-unused unlimited",
				      "prune -n --repack-small --repack-uncompressed", forget };
	for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++) {
		if (run_out(&out, RIX " -r '%s' %s", repo, flags[i]) != 0)
			fail_free(out, l0, "rix %s:\n%s", flags[i], out);
		free(out);
		char *l1 = listing(repo);
		if (strcmp(l0, l1) != 0)
			fail_free(l0, l1, "rix %s changed the repository:\nbefore:\n%s\nafter:\n%s", flags[i], l0, l1);
		free(l1);
	}
	free(l0);
	rix_test_rmtree(repo);
}

/* The pack that holds blob id of type t in repo (the index says). */
static void pack_of(char out[65], const char *repo, rix_blob_type t, const rix_id *id)
{
	rix_repo *r = open_repo(repo, NULL);
	MUST(rix_repo_load_index(NULL, r, NULL, NULL));
	rix_packed_blob pb;
	MUST(rix_master_index_lookup(&pb, rix_repo_master_index(r), t, id));
	rix_id_to_hex(out, &pb.pack_id);
	rix_repo_free(r);
}

/* The root tree of snapshot snap, and the first blob of its file "note". */
static void snapshot_blobs(rix_id *tree, rix_id *note, const char *repo, const char *snap)
{
	rix_repo *r = open_repo(repo, NULL);
	MUST(rix_repo_load_index(NULL, r, NULL, NULL));
	rix_id id;
	MUST(rix_id_from_hex(&id, snap, 64));
	rix_snapshot *sn;
	MUST(rix_snapshot_load(&sn, r, &id));
	*tree = sn->tree;
	rix_tree *t;
	MUST(rix_tree_load(&t, r, tree));
	/* down the path of src from the root */
	const char *p = src + 1;
	while (*p != '\0') {
		const char *slash = strchr(p, '/');
		size_t len = slash != NULL ? (size_t)(slash - p) : strlen(p);
		const rix_node *nd = rix_tree_find(t, p, len);
		assert_non_null(nd);
		assert_non_null(nd->subtree);
		rix_id sub = *nd->subtree;
		rix_tree_free(t);
		MUST(rix_tree_load(&t, r, &sub));
		p += len + (slash != NULL);
	}
	const rix_node *nd = rix_tree_find(t, "note", 4);
	assert_non_null(nd);
	assert_int_equal(nd->content_len, 1);
	*note = nd->content[0];
	rix_tree_free(t);
	rix_snapshot_free(sn);
	rix_repo_free(r);
}

/* The index files of repo that name blob id (of either type), into names; how many. */
static size_t index_files_naming(char names[][65], size_t max, const char *repo, const rix_id *id)
{
	rix_repo *r = open_repo(repo, NULL);
	rix_id *files;
	size_t n, found = 0;
	MUST(rix_repo_list_ids(&files, &n, r, RIX_FILE_INDEX));
	for (size_t i = 0; i < n; i++) {
		uint8_t *json;
		size_t len;
		MUST(rix_repo_read_file(&json, &len, r, RIX_FILE_INDEX, &files[i]));
		rix_index *idx;
		MUST(rix_index_decode(&idx, NULL, (const char *)json, len));
		rix_free(json);
		if (rix_index_has(idx, RIX_BLOB_TREE, id) || rix_index_has(idx, RIX_BLOB_DATA, id)) {
			assert_true(found < max);
			rix_id_to_hex(names[found++], &files[i]);
		}
		rix_index_free(idx);
	}
	rix_free(files);
	rix_repo_free(r);
	return found;
}

/*
 * rix prune on repo must exit 1 saying want (NULL: anything) and leave every file as it was;
 * then restic prune must refuse too (and change nothing either).
 */
static void must_refuse(const char *repo, const char *what, const char *want)
{
	char *l0 = listing(repo), *out;
	int rc = run_out(&out, "'" RIX_CLI_PATH "' -r '%s' prune --max-unused 0", repo);
	if (rc != 1 || (want != NULL && strstr(out, want) == NULL))
		fail_free(out, l0, "%s: rix prune exits %d (want 1, saying \"%s\"):\n%s", what, rc, want != NULL ? want : "", out);
	free(out);
	char *l1 = listing(repo);
	if (strcmp(l0, l1) != 0)
		fail_free(l0, l1, "%s: rix prune refused but changed the repository:\nbefore:\n%s\nafter:\n%s", what, l0, l1);
	free(l1);
	rc = run_out(&out, RESTIC " -r '%s' prune --max-unused 0", repo);
	if (rc == 0)
		fail_free(out, l0, "%s: restic prune does not refuse (the damage is not what the test means):\n%s", what, out);
	free(out);
	l1 = listing(repo);
	if (strcmp(l0, l1) != 0)
		fail_free(l0, l1, "%s: restic prune changed the repository", what);
	free(l1);
	free(l0);
}

static void test_refusals(void **state)
{
	(void)state;
	const char *latest = v[3].snap;
	assert_true(v[3].kept);
	rix_id tree, note;
	snapshot_blobs(&tree, &note, base, latest);
	char tree_pack[65], note_pack[65], repo[4300], path[4400];
	pack_of(tree_pack, base, RIX_BLOB_TREE, &tree);
	pack_of(note_pack, base, RIX_BLOB_DATA, &note);

	/* A needed pack missing. */
	copy_base(repo, sizeof(repo), "missing");
	snprintf(path, sizeof(path), "%s/data/%.2s/%s", repo, note_pack, note_pack);
	assert_int_equal(unlink(path), 0);
	must_refuse(repo, "a needed pack missing", "packs from index missing in repo");
	rix_test_rmtree(repo);

	/* A needed pack longer, or shorter, than the index says. */
	copy_base(repo, sizeof(repo), "padded");
	snprintf(path, sizeof(path), "%s/data/%.2s/%s", repo, tree_pack, tree_pack);
	sh("chmod u+w '%s' && printf 'twelve bytes' >> '%s'", path, path);
	must_refuse(repo, "a needed pack padded", "repair index");
	rix_test_rmtree(repo);
	copy_base(repo, sizeof(repo), "truncated");
	snprintf(path, sizeof(path), "%s/data/%.2s/%s", repo, note_pack, note_pack);
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	sh("chmod u+w '%s' && truncate -s %lld '%s'", path, (long long)st.st_size - 100, path);
	must_refuse(repo, "a needed pack truncated", "repair index");
	rix_test_rmtree(repo);

	/* The latest snapshot's tree in no index: the index files naming it deleted (the packs they
	 * name become unreferenced: a prune that went on would delete them), or the tree alone
	 * dropped from its index file. */
	copy_base(repo, sizeof(repo), "noindex");
	char names[16][65];
	size_t n = index_files_naming(names, 16, repo, &tree);
	assert_true(n >= 1);
	for (size_t i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "%s/index/%.64s", repo, names[i]);
		assert_int_equal(unlink(path), 0);
	}
	must_refuse(repo, "the index files naming a snapshot's tree deleted", NULL);
	rix_test_rmtree(repo);
	copy_base(repo, sizeof(repo), "notree");
	assert_true(drop_from_index(repo, &tree) >= 1);
	must_refuse(repo, "a snapshot's tree dropped from the index", NULL);
	rix_test_rmtree(repo);

	/* A data blob a snapshot uses dropped from the index. */
	copy_base(repo, sizeof(repo), "noblob");
	assert_true(drop_from_index(repo, &note) >= 1);
	must_refuse(repo, "a used data blob dropped from the index", "index is not complete");
	rix_test_rmtree(repo);
}

/*
 * Every index file of repo written again under a new name (the same JSON, sealed anew): each
 * pack named by two index files with the same blobs, as a prune killed after writing the new
 * index and before removing the old files leaves it (restic's index merge drops such exact
 * duplicates).
 */
static void duplicate_index_files(const char *repo)
{
	rix_repo *r = open_repo(repo, NULL);
	rix_id *files;
	size_t n;
	MUST(rix_repo_list_ids(&files, &n, r, RIX_FILE_INDEX));
	for (size_t i = 0; i < n; i++) {
		uint8_t *json;
		size_t len;
		MUST(rix_repo_read_file(&json, &len, r, RIX_FILE_INDEX, &files[i]));
		rix_id id;
		MUST(rix_repo_write_file(&id, r, RIX_FILE_INDEX, json, len));
		assert_memory_not_equal(&id, &files[i], sizeof(id));
		rix_free(json);
	}
	rix_free(files);
	rix_repo_free(r);
}

/*
 * Each index file twice (an interrupted prune's state): restic prunes such a repository, and so
 * must rix, leaving it whole.
 */
static void test_index_twice(void **state)
{
	(void)state;
	char repo[4300], copy[4300];
	copy_base(repo, sizeof(repo), "twice");
	duplicate_index_files(repo);
	copy_base(copy, sizeof(copy), "twice-restic");
	rix_test_rmtree(copy);
	sh("cp -a '%s' '%s'", repo, copy);
	char *out;
	if (run_out(&out, RESTIC " -r '%s' prune --max-unused 0", copy) != 0)
		fail_free(out, NULL, "restic prune on a repository whose index files are all there twice:\n%s", out);
	free(out);
	rix_test_rmtree(copy);
	if (run_out(&out, RIX " -r '%s' prune --max-unused 0", repo) != 0)
		fail_free(out, NULL, "rix prune on a repository whose index files are all there twice:\n%s", out);
	free(out);
	verify(repo, true, false);
	rix_test_rmtree(repo);
}

/*
 * The lines of a prune -v --dry-run report both tools print alike: the figures ("used:",
 * "duplicates:", ..., "to delete:"), the pack counts and the pack lists (restic's "Would have ..."
 * headings and the {...} sets after them); progress and "loading" lines are left out. Malloc'd.
 */
static char *report_lines(const char *out)
{
	static const char *const keep[] = { "used:", "duplicates:", "unused:", "total:", "unused size:", "to repack:",
					     "this removes:", "to delete:", "total prune:", "remaining:",
					     "unused size after prune:", "totally used packs:", "partly used packs:",
					     "unused packs:", "to keep:", "Would have", "{" };
	size_t cap = strlen(out) + 1, n = 0;
	char *r = malloc(cap);
	assert_non_null(r);
	for (const char *l = out; *l != '\0';) {
		const char *e = strchr(l, '\n');
		size_t len = e != NULL ? (size_t)(e - l) : strlen(l);
		for (size_t k = 0; k < sizeof(keep) / sizeof(keep[0]); k++)
			if (len >= strlen(keep[k]) && strncmp(l, keep[k], strlen(keep[k])) == 0) {
				memcpy(r + n, l, len);
				n += len;
				r[n++] = '\n';
				break;
			}
		l += len + (e != NULL);
	}
	r[n] = '\0';
	return r;
}

/*
 * Duplicates in other packs (the note and a tree of each kept snapshot stored again, twice, in
 * new packs) beside unused and partly used packs: restic's prune -v --dry-run and rix's report the
 * same figures and the same pack lists (which copy counts as used decides which packs are
 * repacked); then rix prunes and both check.
 */
static void test_duplicates_vs_restic(void **state)
{
	(void)state;
	char repo[4300];
	copy_base(repo, sizeof(repo), "dups");
	sh(RIX " -r '%s' forget %s >/dev/null", repo, v[1].snap);
	rix_repo *r = open_repo(repo, NULL);
	MUST(rix_repo_load_index(NULL, r, NULL, NULL));
	for (size_t i = 0; i < nv; i++) {
		if (!v[i].kept || i == 1)
			continue;
		rix_id tree, note;
		rix_repo_free(r);
		snapshot_blobs(&tree, &note, repo, v[i].snap);
		r = open_repo(repo, NULL);
		MUST(rix_repo_load_index(NULL, r, NULL, NULL));
		for (int copy = 0; copy < 2; copy++) {
			const rix_id *ids[2] = { &tree, &note };
			const rix_blob_type types[2] = { RIX_BLOB_TREE, RIX_BLOB_DATA };
			for (int k = 0; k < 2; k++) {
				uint8_t *data;
				size_t n;
				MUST(rix_repo_load_blob(&data, &n, r, types[k], ids[k]));
				MUST(rix_repo_save_blob_copy(NULL, NULL, r, types[k], data, n));
				rix_free(data);
			}
			MUST(rix_repo_flush(r)); /* each copy in packs of its own */
		}
	}
	rix_repo_free(r);
	/*
	 * Which copy of a duplicate counts as used follows the order in which a tool meets the
	 * copies, and restic 0.14 meets index files in the order its loader goroutines finish, which
	 * differs from run to run. Within one index file the order is the file's for both tools: the
	 * index is written again as one file (rix repair index: every pack in ID order) so that
	 * restic's choice is the same on every run and rix's report must equal it.
	 */
	sh(RIX " -r '%s' repair index >/dev/null 2>&1", repo);
	assert_int_equal(count_ids(repo, "index"), 1);
	const char *const flags[] = { "--max-unused 0", "", "--max-unused 50% --repack-small" };
	for (size_t f = 0; f < sizeof(flags) / sizeof(flags[0]); f++) {
		char *a, *b;
		if (run_out(&b, "'" RIX_CLI_PATH "' -r '%s' prune -v --dry-run %s", repo, flags[f]) != 0)
			fail_free(b, NULL, "rix prune -v --dry-run %s:\n%s", flags[f], b);
		char *rb = report_lines(b);
		free(b);
		if (run_out(&a, "restic --no-cache -r '%s' prune -v --dry-run %s", repo, flags[f]) != 0)
			fail_free(a, rb, "restic prune -v --dry-run %s:\n%s", flags[f], a);
		char *ra = report_lines(a);
		free(a);
		if (strstr(ra, "duplicates:") == NULL || count_after(ra, "duplicates:") <= 0)
			fail_free(ra, rb, "the repository has no duplicates for restic:\n%s", ra);
		if (strcmp(ra, rb) != 0)
			fail_free(ra, rb, "prune -v --dry-run %s: restic and rix report differently\nrestic:\n%s\nrix:\n%s", flags[f], ra, rb);
		free(ra);
		free(rb);
	}
	char *out;
	if (run_out(&out, RIX " -r '%s' prune --max-unused 0", repo) != 0)
		fail_free(out, NULL, "rix prune --max-unused 0 with duplicates:\n%s", out);
	free(out);
	v[1].kept = false; /* forgotten in this copy only */
	verify(repo, true, false);
	v[1].kept = true;
	rix_test_rmtree(repo);
}

/* rix prune --max-unused 0 on repo with RIX_DEBUG_KILL_AFTER=n: true if it was killed. */
static bool prune_killed_at(const char *repo, int n)
{
	char log[4400];
	snprintf(log, sizeof(log), "%s.log", repo);
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char at[16];
		snprintf(at, sizeof(at), "%d", n);
		setenv("RIX_DEBUG_KILL_AFTER", at, 1);
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
			_exit(126);
		execl(RIX_CLI_PATH, "rix", "-r", repo, "prune", "--max-unused", "0", (char *)NULL);
		_exit(127);
	}
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
		return true;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		size_t len;
		char *text = rix_test_read_file(log, &len);
		fail_free(text, NULL, "RIX_DEBUG_KILL_AFTER=%d rix prune failed without being killed (status %d):\n%s", n,
			  status, text != NULL ? text : "");
	}
	unlink(log);
	return false;
}

/* The crash loop's cap: prune here makes about 16 writes and removals; each kill costs 3 s. */
#define MAX_KILLS 60

static void test_crash(void **state)
{
	(void)state;
	char repo[4300];
	snprintf(repo, sizeof(repo), "%s/crash", work);
	int killed = 0, n;
	for (n = 1; n <= MAX_KILLS; n++) {
		copy_base(repo, sizeof(repo), "crash");
		if (!prune_killed_at(repo, n))
			break;
		killed++;
		/* Whatever point it died at: unlocked, the repository checks and every kept
		 * snapshot restores whole. */
		sh(RESTIC " -r '%s' unlock", repo);
		verify(repo, false, true);
		/* The next prune finishes the work. */
		char *out;
		if (run_out(&out, RIX " -r '%s' prune --max-unused 0", repo) != 0)
			fail_free(out, NULL, "rix prune after a kill before mutating operation %d:\n%s", n, out);
		free(out);
		if (rix_test_run(NULL, NULL, RESTIC " -r '%s' check --read-data >/dev/null", repo) != 0 ||
		    rix_test_run(NULL, NULL, RIX " -r '%s' check --read-data >/dev/null", repo) != 0)
			fail_msg("check --read-data fails after a kill at %d and a rerun of prune", n);
		char ids[256][65];
		size_t np = list_packs(repo, ids, 256);
		assert_false(has_id(ids, np, lost_pack));
	}
	if (n > MAX_KILLS)
		fail_msg("rix prune was still killed at its %dth mutating operation", MAX_KILLS);
	/* The run that was not killed did the whole job. */
	verify(repo, true, true);
	if (killed < 3)
		fail_msg("only %d runs were killed: prune had too little to do", killed);
	print_message("rix prune killed before each of its first %d mutating operations\n", killed);
	rix_test_rmtree(repo);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_dry_run),
		cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_index_twice),
		cmocka_unit_test(test_duplicates_vs_restic),
		cmocka_unit_test(test_interop), /* last: it changes the versions' snapshots */
	};
	const struct CMUnitTest crash[] = {
		cmocka_unit_test(test_crash),
	};
	if (argc > 1 && strcmp(argv[1], "crash") == 0)
		return cmocka_run_group_tests(crash, group_setup, group_teardown);
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
