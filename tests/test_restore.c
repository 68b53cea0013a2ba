/*
 * tests/test_restore.c — rix_restore (backup/restorer.c) and what it stands on:
 *   test_patterns          rix_pattern_match: restic's rules, child-may-match, case, deep paths;
 *                          rix_pattern_match_checked: a failed allocation is RIX_ENOMEM, and
 *                          none is made for a path under 4096 bytes
 *   test_patterns_compiled rix_patterns: what each of its patterns says, or'ed; out of memory
 *   test_pack_blobs        rix_repo_load_pack_blobs on a pack over RIX_REPO_PACK_READ_MAX: every
 *                          blob, every other one, the first and last, equal to rix_repo_load_blob's,
 *                          each pack byte read at most once (the bytes read are the blobs' and the
 *                          gaps merged, no range twice), no read over the maximum; a missing pack:
 *                          each blob told so
 *   test_roundtrip         a tree with every kind of entry (multi-blob, repeated and shared
 *                          blobs, empty, symlinks, hard links, a FIFO, modes with setuid, old
 *                          mtimes, xattrs) backed up by rix_backup and restored: equal (content,
 *                          mode, owner, mtime, links, xattrs); each pack byte read once (the
 *                          bytes read = the repository's blobs, no range twice)
 *   test_find_dir          rix_tree_find_dir: found (odd spellings, the root), not found, not a
 *                          directory (RIX_ENOTFOUND naming the path)
 *   test_batches           a plan budget of 1 byte: a batch per file, the same result; an inode's
 *                          first path not included: the next has the content, the third links to it
 *   test_deep              1500 nested directories (the walk's explicit stack)
 *   test_hostile_names     trees naming "..", ".", "", "a/b", a NUL: an error naming the path,
 *                          nothing written outside the target
 *   test_path_limit        20 levels of 255-byte names: the path past PATH_MAX an error naming
 *                          it; 40000-byte user names count in the plan's budget (batches)
 *   test_symlink_escape    symlinks and a hard link planted in the target, and a symlink
 *                          restored then replaced by a directory: nothing outside changes
 *   test_symlink_during    a restored directory swapped for a symlink to outside while the
 *                          restore runs: nothing lands outside
 *   test_swapped_file      the file made by the walk swapped before its batch for a hard link
 *                          to outside, a FIFO, a symlink; a planted hard link under if-changed:
 *                          refused (an error naming it), nothing outside written or chmod'ed
 *   test_shared_offset     an index putting two blob IDs at one place of a pack: the file of
 *                          the blob not there is reported, never given the other's bytes
 *   test_bad_file_nodes    a node size that is not its content's; hard links to a file whose
 *                          blob is missing: each reported, none counted restored; a first file
 *                          with no content member: restored empty
 *   test_many_blobs        a file of 150 blobs (the planner looks them up 64 at a time): restored
 *                          equal; one of them missing past the first 64: that file reported,
 *                          naming it; through a dedup-only index: both reported, no location
 *   test_many_files        3000 small files, dozens a pack: restored equal, each pack byte read
 *                          once; again verified, in batches of a few files, with 4 workers
 *   test_create_fails      a directory planted where a file goes, after the walk: that file
 *                          reported by path, nothing written into it, the others restored
 *   test_missing_pack      a pack removed, another damaged: those files reported by path, the
 *                          others restored, RIX_EIO
 *   test_full_target       a 1 MiB tmpfs as the target (root): what does not fit is reported,
 *                          every file not reported is whole
 *   test_options           include / exclude (directories on the way to an included entry get their metadata), overwrite modes, delete, dry run, verify, sparse
 *   test_oom               allocation N failing for every N: 0 or RIX_ENOMEM, no leak, then whole
 */
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>
#include <cmocka.h>

#include "rix/rix.h"
#include "faultbackend.h"
#include "repo_fixture.h"
#include "testutil.h"

/* ---- helpers ---------------------------------------------------------------------------- */

struct errs {
	int n;
	char paths[64][512];
	char last[1024];
	char lastmsg[1024]; /* the message alone (last: "path: message", cut when path is long) */
	int warnings;
};

static void on_error(void *payload, const char *path, const char *msg)
{
	struct errs *e = payload;
	if (e->n < 64)
		snprintf(e->paths[e->n], sizeof(e->paths[0]), "%s", path);
	e->n++;
	snprintf(e->last, sizeof(e->last), "%s: %s", path, msg);
	snprintf(e->lastmsg, sizeof(e->lastmsg), "%s", msg);
}

static void on_warn(void *payload, const char *path, const char *msg)
{
	(void)path;
	(void)msg;
	((struct errs *)payload)->warnings++;
}

static bool has_error_for(const struct errs *e, const char *path)
{
	for (int i = 0; i < e->n && i < 64; i++)
		if (strcmp(e->paths[i], path) == 0)
			return true;
	return false;
}

/* Backs up dir (as ".", so the snapshot's root is dir itself) into r: the root tree. */
static void backup_dir(rix_id *tree, rix_repo *r, const char *dir)
{
	const char *paths[] = { "." };
	char cwd[4200];
	assert_non_null(getcwd(cwd, sizeof(cwd)));
	assert_int_equal(chdir(dir), 0);
	rix_backup_options bo = RIX_BACKUP_OPTIONS_INIT;
	rix_id snap;
	MUST(rix_backup(&snap, NULL, r, paths, 1, &bo));
	assert_int_equal(chdir(cwd), 0);
	rix_snapshot *sn;
	MUST(rix_snapshot_load(&sn, r, &snap));
	*tree = sn->tree;
	rix_snapshot_free(sn);
}

static int restore(rix_restore_summary *sum, struct errs *e, rix_repo *r, const rix_id *tree, const char *target,
		   rix_restore_options *o)
{
	rix_restore_options def = RIX_RESTORE_OPTIONS_INIT;
	if (o == NULL)
		o = &def;
	memset(e, 0, sizeof(*e));
	o->error = on_error;
	o->warn = on_warn;
	o->payload = e;
	return rix_restore(sum, r, tree, target, o);
}

static rix_repo *new_repo(const char *work, const char *name, char *path, size_t cap)
{
	snprintf(path, cap, "%s/%s", work, name);
	assert_int_equal(mkdir(path, 0700), 0);
	rix_repo *r = init_repo(path, 2);
	MUST(rix_repo_load_index(NULL, r, NULL, NULL));
	return r;
}

/* A tree blob from raw JSON (hostile trees the encoder refuses to make). */
static void save_json_tree(rix_repo *r, rix_id *id, const char *json)
{
	MUST(rix_repo_save_blob(id, NULL, r, RIX_BLOB_TREE, json, strlen(json)));
}

static size_t count_entries(const char *dir)
{
	DIR *d = opendir(dir);
	assert_non_null(d);
	size_t n = 0;
	for (struct dirent *e; (e = readdir(d)) != NULL;)
		n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
	closedir(d);
	return n;
}

static char *read_small(const char *path)
{
	size_t n;
	char *s = rix_test_read_file(path, &n);
	return s;
}

/* A source tree with every kind of entry in <work>/src. */
static void make_source(const char *work)
{
	rix_test_sh("cd '%s' && mkdir -p src/a/b/c src/ro src/e && cd src && "
	   "head -c 9000000 /dev/urandom > a/big && cp a/big a/big-copy && "
	   "head -c 3000000 /dev/urandom > blk && cat blk blk blk > a/rep && rm blk && "
	   "echo small > a/b/small && : > empty && printf 'x' > a/b/c/one && "
	   "ln -s ../a/big e/rel-link && ln -s /nonexistent/abs e/abs-link && ln a/b/small e/hard && "
	   "ln a/b/small hard2 && mkfifo fifo && "
	   "chmod 4755 a/big && chmod 0600 a/b/small && chmod 0750 a/b && chmod 1777 e && "
	   "echo r > ro/f && chmod 0444 ro/f && chmod 0555 ro && "
	   "touch -h -d '2001-02-03 04:05:06.123456789' e/rel-link && "
	   "touch -d '1999-12-31 23:59:59.5' a/b/c/one a/b/c && touch -d '2010-01-01' a",
	   work);
	char p[4300];
	snprintf(p, sizeof(p), "%s/src/a/b/c/one", work);
	if (setxattr(p, "user.rix", "value", 5, 0) != 0)
		print_message("(no user xattrs on this file system)\n");
	snprintf(p, sizeof(p), "%s/src/a", work); /* the xattr changed a's ctime only; mtime again */
	rix_test_sh("touch -d '2010-01-01' '%s'", p);
}

/* ---- patterns -------------------------------------------------------------------------------- */

static void test_patterns(void **state)
{
	(void)state;
	bool child;
	assert_true(rix_pattern_match(&child, "*.o", "/a/b/x.o", false));
	assert_true(child);
	assert_false(rix_pattern_match(NULL, "*.o", "/a/b/x.c", false));
	assert_true(rix_pattern_match(NULL, "/home/user", "/home/user", false));
	assert_true(rix_pattern_match(NULL, "/home/user", "/home/user/.bashrc", false)); /* under a match */
	assert_false(rix_pattern_match(NULL, "/home/user", "/home/username", false));
	assert_false(rix_pattern_match(&child, "/home/user/*.txt", "/home", false));
	assert_true(child);
	assert_false(rix_pattern_match(&child, "/home/user/*.txt", "/etc", false));
	assert_false(child);
	assert_true(rix_pattern_match(NULL, "/home/user/*.txt", "/home/user/a.txt", false));
	assert_true(rix_pattern_match(NULL, "/a/**/z", "/a/b/c/z", false));
	assert_true(rix_pattern_match(NULL, "/a/**/z", "/a/z", false));
	assert_false(rix_pattern_match(&child, "/a/**/z", "/a/x/y", false));
	assert_true(child);
	assert_false(rix_pattern_match(&child, "/a/**/z", "/b", false));
	assert_false(child);
	assert_true(rix_pattern_match(NULL, "y.txt", "/x/Y.TXT", true));
	assert_false(rix_pattern_match(NULL, "y.txt", "/x/Y.TXT", false));
	assert_true(rix_pattern_match(NULL, "/x/[a-c]?", "/x/bz", false));
	assert_false(rix_pattern_match(NULL, "", "/x", false));
	/* a path of 3000 components and 6000 bytes (on the heap) */
	char *deep = malloc(6100);
	size_t k = 0;
	for (int i = 0; i < 3000; i++)
		k += (size_t)sprintf(deep + k, "/a");
	sprintf(deep + k, "/f");
	assert_true(rix_pattern_match(NULL, "f", deep, false));
	assert_true(rix_pattern_match(NULL, "/a/**/f", deep, false));
	assert_false(rix_pattern_match(NULL, "/a/b", deep, false));
	/* its copy cannot be allocated: an error, not "no match" (--delete would remove what an
	 * --exclude names) */
	bool m = true;
	child = true;
	MUST(rix_pattern_match_checked(&m, &child, "f", deep, false));
	assert_true(m);
	for (long at = 1; at <= 2; at++) {
		rix_test_failalloc_install(at);
		int rc = rix_pattern_match_checked(&m, &child, "f", deep, false);
		rix_test_failalloc_remove();
		assert_int_equal(rc, RIX_ENOMEM);
		assert_false(m);
		assert_false(child);
	}
	MUST(rix_pattern_match_checked(&m, NULL, "/x/[a-c]?", "/x/bz", false));
	assert_true(m);
	/* a path of 1000 bytes and 250 components is split on the stack: nothing to fail */
	deep[0] = '\0';
	for (k = 0; k < 249; k++)
		strcat(deep, "/abc");
	strcat(deep, "/f");
	rix_test_failalloc_install(1);
	int rc = rix_pattern_match_checked(&m, &child, "/abc/**/f", deep, false);
	long calls = rix_test_failalloc_count();
	rix_test_failalloc_remove();
	assert_int_equal(rc, 0);
	assert_int_equal(calls, 0);
	assert_true(m);
	free(deep);
}

/* What rix_patterns_match says is what its patterns, one by one, say or'ed. */
static void check_compiled(const char *const *pats, size_t n, const char *const *ipats, size_t ni, const char *path)
{
	bool want_m = false, want_c = false;
	for (size_t i = 0; i < n + ni; i++) {
		bool c = false;
		want_m |= rix_pattern_match(&c, i < n ? pats[i] : ipats[i - n], path, i >= n);
		want_c |= c;
	}
	rix_patterns *ps;
	MUST(rix_patterns_new(&ps, pats, n, ipats, ni));
	bool m = !want_m, c = !want_c;
	MUST(rix_patterns_match(ps, &m, &c, path));
	if (m != want_m || c != want_c)
		fail_msg("%s: match %d (want %d), child %d (want %d)", path, m, want_m, c, want_c);
	MUST(rix_patterns_match(ps, &m, NULL, path));
	assert_int_equal(m, want_m);
	rix_patterns_free(ps);
}

static int compile_run(void *arg)
{
	const char *const *pats = arg;
	rix_patterns *ps;
	int rc = rix_patterns_new(&ps, pats, 3, pats + 3, 1);
	if (rc == 0) {
		bool m;
		rc = rix_patterns_match(ps, &m, NULL, "/home/user/x.TXT");
		assert_true(rc != 0 || m);
		rix_patterns_free(ps);
	}
	return rc;
}

static void test_patterns_compiled(void **state)
{
	(void)state;
	static const char *const pats[] = { "/home/user/*.txt", "/a/**/z", "", "*.o", "/x/[a-c]?", "/srv/data" };
	static const char *const ipats[] = { "y.txt", "/Home/USER" };
	static const char *const paths[] = {
		"/", "/home", "/home/user", "/home/user/a.txt", "/home/username", "/a", "/a/x/y", "/a/b/c/z",
		"/b", "/b/x.o", "/x/Y.TXT", "/x/bz", "/srv", "/srv/data/f", "/etc",
	};
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		for (size_t n = 0; n <= 6; n++) /* each prefix of pats, alone and with ipats */
			for (size_t ni = 0; ni <= 2; ni += 2)
				check_compiled(pats + (n < 6 ? 0 : 3), n < 6 ? n : 3, ipats, ni, paths[i]);
		check_compiled(pats + 3, 1, NULL, 0, paths[i]);
	}
	/* none: nothing matches; NULL is none */
	bool m = true, c = true;
	MUST(rix_patterns_match(NULL, &m, &c, "/a"));
	assert_false(m);
	assert_false(c);
	static const char *const oom[] = { "/home/user/*.txt", "", "*.o", "/HOME/user" };
	rix_test_oom_loop("rix_patterns_new", compile_run, (void *)oom, 64);
}

/* ---- rix_repo_load_pack_blobs ------------------------------------------------------------- */

struct got {
	const rix_blob *want;
	uint8_t **ref; /* want[i]'s plaintext, loaded before (so that the reads counted are the call's) */
	size_t *refn;
	int calls, errors;
};

/* Counts the calls and errors only. */
static int count_only(void *payload, size_t i, int code, const uint8_t *data, size_t n)
{
	(void)i;
	(void)data;
	(void)n;
	struct got *g = payload;
	g->calls++;
	g->errors += code != 0;
	return 0;
}

static int check_blob(void *payload, size_t i, int code, const uint8_t *data, size_t n)
{
	struct got *g = payload;
	g->calls++;
	if (code != 0) {
		g->errors++;
		return 0;
	}
	assert_int_equal(g->refn[i], n);
	assert_memory_equal(g->ref[i], data, n);
	return 0;
}

/*
 * What "each pack byte range read once" allows for the reads of one call of
 * rix_repo_load_pack_blobs on blobs want[0..n) (increasing offsets), checked on the fault
 * backend's log: no pack byte read twice; the bytes read at least the blobs' and at most those
 * and the gaps under RIX_REPO_PACK_READ_GAP between them (the gaps a read merges); each read at
 * most RIX_REPO_PACK_READ_MAX unless it is one blob; one read when the whole span fits in one.
 */
static void check_pack_reads(rix_test_fault *f, const rix_blob *want, size_t n)
{
	uint64_t lo = 0, gaps = 0;
	for (size_t i = 0; i < n; i++) {
		lo += want[i].length;
		uint64_t gap = i > 0 ? want[i].offset - ((uint64_t)want[i - 1].offset + want[i - 1].length) : 0;
		gaps += gap <= RIX_REPO_PACK_READ_GAP ? gap : 0;
	}
	uint64_t bytes = rix_test_fault_read_bytes(f, RIX_FILE_PACK);
	assert_true(bytes >= lo);
	assert_true(bytes <= lo + gaps);
	assert_int_equal(rix_test_fault_pack_overlaps(f), 0);
	long reads = rix_test_fault_count(f, RIX_TEST_FAULT_READ);
	assert_int_equal((long)f->nranges, reads);
	for (size_t k = 0; k < f->nranges; k++) {
		bool one_blob = false;
		for (size_t i = 0; i < n; i++)
			one_blob |= f->ranges[k].off == want[i].offset && f->ranges[k].len == want[i].length;
		assert_true(f->ranges[k].len <= RIX_REPO_PACK_READ_MAX || one_blob);
	}
	uint64_t span = n > 0 ? (uint64_t)want[n - 1].offset + want[n - 1].length - want[0].offset : 0;
	if (n > 0 && span == lo + gaps && span <= RIX_REPO_PACK_READ_MAX)
		assert_int_equal(reads, 1);
	if (span > RIX_REPO_PACK_READ_MAX)
		assert_true(reads >= 2);
}

/* Every blob of want[0..n) of pack, checked against rix_repo_load_blob's, reads counted. */
static void load_and_check(rix_repo *r, rix_test_fault *f, const rix_id *pack, const rix_blob *want, size_t n)
{
	struct got g = { .want = want, .ref = calloc(n + 1, sizeof(uint8_t *)), .refn = calloc(n + 1, sizeof(size_t)) };
	for (size_t i = 0; i < n; i++)
		MUST(rix_repo_load_blob(&g.ref[i], &g.refn[i], r, want[i].type, &want[i].id));
	rix_test_fault_arm(f, NULL);
	MUST(rix_repo_load_pack_blobs(r, pack, want, n, check_blob, &g));
	assert_int_equal(g.calls, (int)n);
	assert_int_equal(g.errors, 0);
	check_pack_reads(f, want, n);
	for (size_t i = 0; i < n; i++)
		rix_free(g.ref[i]);
	free(g.ref);
	free(g.refn);
}

/* The repository at repo reopened over a fault backend that counts (f, initialized), its index
 * loaded. */
static rix_repo *open_counted(const char *repo, rix_test_fault *f)
{
	rix_backend *inner, *b;
	rix_repo *r;
	MUST(rix_backend_local_open(&inner, repo, false));
	MUST(rix_test_fault_backend(&b, inner, f));
	MUST(rix_repo_open(&r, b, PW, strlen(PW), &fast));
	MUST(rix_repo_load_index(NULL, r, NULL, NULL));
	return r;
}

static void test_pack_blobs(void **state)
{
	(void)state;
	char *work = rix_test_new_dir("rix-restore-pb");
	char repo[4300];
	rix_test_fault f;
	rix_test_fault_init(&f);
	rix_repo *r = new_repo(work, "repo", repo, sizeof(repo));
	struct blobs bl;
	make_blobs(&bl, 200, 7); /* about 10 MB: packs of 4 MiB and more (the fixture's pack size) */
	save_all(r, &bl);
	MUST(rix_repo_flush(r));
	rix_repo_free(r);
	/* reopened over a counting backend */
	r = open_counted(repo, &f);
	rix_id *packs;
	size_t np;
	MUST(rix_repo_list_ids(&packs, &np, r, RIX_FILE_PACK));
	assert_true(np >= 2);
	/* the largest pack: over RIX_REPO_PACK_READ_MAX, so its blobs take several reads */
	rix_blob *hdr = NULL;
	size_t cnt = 0, at = 0;
	uint64_t largest = 0;
	for (size_t p = 0; p < np; p++) {
		rix_blob *h;
		size_t c;
		MUST(rix_repo_read_pack_header(&h, &c, r, &packs[p]));
		uint64_t end = c > 0 ? (uint64_t)h[c - 1].offset + h[c - 1].length : 0;
		if (end > largest) {
			rix_free(hdr);
			hdr = h;
			cnt = c;
			at = p;
			largest = end;
		} else {
			rix_free(h);
		}
	}
	assert_true(largest > RIX_REPO_PACK_READ_MAX);
	/* every blob, every other blob, the first and the last */
	rix_blob want[400];
	load_and_check(r, &f, &packs[at], hdr, cnt);
	size_t nw = 0;
	for (size_t i = 0; i < cnt; i += 2)
		want[nw++] = hdr[i];
	load_and_check(r, &f, &packs[at], want, nw);
	want[0] = hdr[0];
	want[1] = hdr[cnt - 1];
	load_and_check(r, &f, &packs[at], want, 2);
	/* check_pack_reads can fail: a read of the same blobs twice reads their bytes twice */
	rix_test_fault_arm(&f, NULL);
	struct got g = { .want = want, .ref = NULL, .refn = NULL };
	for (int k = 0; k < 2; k++)
		MUST(rix_repo_load_pack_blobs(r, &packs[at], want, 1, count_only, &g));
	assert_int_equal(rix_test_fault_pack_overlaps(&f), (long long)want[0].length);
	assert_int_equal(rix_test_fault_read_bytes(&f, RIX_FILE_PACK), 2 * (uint64_t)want[0].length);
	/* offsets not increasing: refused */
	rix_blob swapped[2] = { want[1], want[0] };
	assert_int_equal(rix_repo_load_pack_blobs(r, &packs[at], swapped, 2, count_only, &g), RIX_EINVAL);
	/* the pack gone: each blob gets the error, none data */
	nw = 0;
	for (size_t i = 0; i < cnt; i += 2)
		want[nw++] = hdr[i];
	char path[4400], hex[65];
	rix_id_to_hex(hex, &packs[at]);
	snprintf(path, sizeof(path), "%s/data/%.2s/%s", repo, hex, hex);
	assert_int_equal(unlink(path), 0);
	memset(&g, 0, sizeof(g));
	g.want = want;
	MUST(rix_repo_load_pack_blobs(r, &packs[at], want, nw, count_only, &g));
	assert_int_equal(g.calls, (int)nw);
	assert_int_equal(g.errors, (int)nw);
	assert_non_null(strstr(rix_error_last(), hex));
	rix_free(hdr);
	rix_free(packs);
	free_blobs(&bl);
	rix_repo_free(r);
	rix_test_fault_destroy(&f);
	rix_test_free_dir(work);
}

/* ---- round trips ---------------------------------------------------------------------------- */

static void test_roundtrip(void **state)
{
	(void)state;
	char *work = rix_test_new_dir("rix-restore-rt");
	make_source(work);
	char repo[4300], src[4300], tgt[4300];
	snprintf(src, sizeof(src), "%s/src", work);
	snprintf(tgt, sizeof(tgt), "%s/target", work);
	rix_repo *r = new_repo(work, "repo", repo, sizeof(repo));
	rix_id tree;
	backup_dir(&tree, r, src);
	rix_repo_free(r);

	rix_test_fault f;
	rix_test_fault_init(&f);
	r = open_counted(repo, &f);
	/* every blob of the repository is needed once (the trees' and the files'), and the packs
	 * hold nothing else: what each pack byte read once makes the reads add up to */
	rix_id *packs;
	size_t np;
	uint64_t blob_bytes = 0;
	MUST(rix_repo_list_ids(&packs, &np, r, RIX_FILE_PACK));
	for (size_t p = 0; p < np; p++) {
		rix_blob *h;
		size_t c;
		MUST(rix_repo_read_pack_header(&h, &c, r, &packs[p]));
		for (size_t i = 0; i < c; i++)
			blob_bytes += h[i].length;
		rix_free(h);
	}
	rix_free(packs);
	rix_test_fault_arm(&f, NULL);
	rix_restore_summary sum;
	struct errs e;
	int rc = restore(&sum, &e, r, &tree, tgt, NULL);
	assert_int_equal(e.n, 0);
	MUST(rc);
	assert_int_equal(rix_test_compare_trees(src, tgt, 0), 0);
	/* each pack byte read once: the bytes read are the blobs', no range twice; a read per tree
	 * and at least one per data pack (a pack over RIX_REPO_PACK_READ_MAX takes more) */
	size_t trees = 6; /* the root, a, a/b, a/b/c, e, ro */
	assert_true(sum.packs >= 2);
	assert_int_equal(rix_test_fault_read_bytes(&f, RIX_FILE_PACK), blob_bytes);
	assert_int_equal(rix_test_fault_pack_overlaps(&f), 0);
	assert_true(rix_test_fault_count(&f, RIX_TEST_FAULT_READ) >= (long)(sum.packs + trees));
	/* 5 directories (not the root), 9 files (2 of them hard links), 2 symlinks, a FIFO */
	assert_int_equal(sum.files_total, 5 + 9 + 2 + 1);
	assert_int_equal(sum.files_restored, sum.files_total);
	assert_int_equal(sum.errors, 0);
	assert_int_equal(sum.batches, 1);

	/* again over what is there (overwrite always): the same */
	MUST(restore(&sum, &e, r, &tree, tgt, NULL));
	assert_int_equal(rix_test_compare_trees(src, tgt, 0), 0);
	rix_repo_free(r);
	rix_test_fault_destroy(&f);
	rix_test_sh("chmod -R u+w '%s'", work);
	rix_test_free_dir(work);
}

static const rix_node *find_node(rix_repo *r, const rix_id *tree, const char *name, rix_tree **keep);

/* rix_tree_find_dir: a directory found (with "//", "." and a trailing "/"), the root for "",
 * "/" and NULL; a missing path and a file: RIX_ENOTFOUND naming the path. */
static void test_find_dir(void **state)
{
	(void)state;
	char *work = rix_test_new_dir("rix-restore-finddir");
	char repo[4300], src[4300];
	snprintf(src, sizeof(src), "%s/src", work);
	rix_test_sh("cd '%s' && mkdir -p src/a/b && echo x > src/a/f && echo y > src/a/b/g", work);
	rix_repo *r = new_repo(work, "repo", repo, sizeof(repo));
	rix_id root, id, b;
	backup_dir(&root, r, src);
	const rix_node *nd;
	rix_tree *ta, *tb;
	nd = find_node(r, &root, "a", &ta);
	rix_id a = *nd->subtree;
	nd = find_node(r, &a, "b", &tb);
	b = *nd->subtree;
	rix_tree_free(ta);
	rix_tree_free(tb);
	MUST(rix_tree_find_dir(&id, r, &root, "/a/b"));
	assert_memory_equal(&id, &b, sizeof(id));
	MUST(rix_tree_find_dir(&id, r, &root, "a//./b/"));
	assert_memory_equal(&id, &b, sizeof(id));
	MUST(rix_tree_find_dir(&id, r, &root, "/a"));
	assert_memory_equal(&id, &a, sizeof(id));
	const char *roots[] = { "", "/", NULL };
	for (size_t i = 0; i < 3; i++) {
		MUST(rix_tree_find_dir(&id, r, &root, roots[i]));
		assert_memory_equal(&id, &root, sizeof(id));
	}
	assert_int_equal(rix_tree_find_dir(&id, r, &root, "/a/nope/c"), RIX_ENOTFOUND);
	assert_string_equal(rix_error_last(), "path /a/nope: not found");
	assert_int_equal(rix_tree_find_dir(&id, r, &root, "/a/f"), RIX_ENOTFOUND);
	assert_string_equal(rix_error_last(), "path /a/f: not a directory");
	assert_int_equal(rix_tree_find_dir(&id, r, &root, "/a/b/g/h"), RIX_ENOTFOUND);
	assert_string_equal(rix_error_last(), "path /a/b/g: not a directory");
	rix_repo_free(r);
	rix_test_free_dir(work);
}

static void test_batches(void **state)
{
	(void)state;
	char *work = rix_test_new_dir("rix-restore-batch");
	make_source(work);
	char repo[4300], src[4300], tgt[4300];
	snprintf(src, sizeof(src), "%s/src", work);
	snprintf(tgt, sizeof(tgt), "%s/target", work);
	rix_repo *r = new_repo(work, "repo", repo, sizeof(repo));
	rix_id tree;
	backup_dir(&tree, r, src);
	rix_restore_options o = RIX_RESTORE_OPTIONS_INIT;
	o.memory = 1;
	o.workers = 3;
	rix_restore_summary sum;
	struct errs e;
	MUST(restore(&sum, &e, r, &tree, tgt, &o));
	assert_int_equal(rix_test_compare_trees(src, tgt, 0), 0);
	assert_int_equal(sum.batches, 7); /* big big-copy rep a/b/small one empty ro/f (e/hard, hard2: links) */
	/* the inode's first path not included: e/hard has the content (a batch of its own), hard2 is made
	 * its link after that batch is over */
	char tgt2[4400];
	snprintf(tgt2, sizeof(tgt2), "%s/target2", work);
	const char *inc[] = { "/e/hard", "/hard2" };
	o.includes = inc, o.nincludes = 2;
	MUST(restore(&sum, &e, r, &tree, tgt2, &o));
	rix_test_sh("cd '%s' && test ! -e a/b/small && cmp e/hard '%s/a/b/small' && test \"$(stat -c '%%h %%i' e/hard)\" = \"$(stat -c '%%h %%i' hard2)\" && "
		    "test \"$(stat -c %%h hard2)\" = 2",
		    tgt2, src);
	rix_repo_free(r);
	rix_test_sh("chmod -R u+w '%s'", work);
	rix_test_free_dir(work);
}

static void test_deep(void **state)
{
	(void)state;
	char *work = rix_test_new_dir("rix-restore-deep");
	rix_test_sh("cd '%s' && mkdir src && cd src && for i in $(seq 1500); do mkdir a && cd a || exit 1; done && echo deep > f",
	   work);
	char repo[4300], src[4300], tgt[4300];
	snprintf(src, sizeof(src), "%s/src", work);
	snprintf(tgt, sizeof(tgt), "%s/target", work);
	rix_repo *r = new_repo(work, "repo", repo, sizeof(repo));
	rix_id tree;
	backup_dir(&tree, r, src);
	rix_restore_summary sum;
	struct errs e;
	MUST(restore(&sum, &e, r, &tree, tgt, NULL));
	assert_int_equal(sum.files_total, 1501);
	assert_int_equal(rix_test_compare_trees(src, tgt, 0), 0);
	rix_repo_free(r);
	rix_test_free_dir(work);
}

/* ---- hostile trees ------------------------------------------------------------------------ */

/* A file node of one blob, size bytes. */
static const char *node_file_sized(char *buf, size_t cap, const char *name_json, const char *blob_hex, size_t size)
{
	snprintf(buf, cap,
		 "{\"name\":\"%s\",\"type\":\"file\",\"mode\":420,\"mtime\":\"2020-01-01T00:00:00Z\","
		 "\"atime\":\"2020-01-01T00:00:00Z\",\"ctime\":\"2020-01-01T00:00:00Z\",\"uid\":0,\"gid\":0,"
		 "\"size\":%zu,\"content\":[\"%s\"]}",
		 name_json, size, blob_hex);
	return buf;
}

static const char *node_file(char *buf, size_t cap, const char *name_json, const char *blob_hex)
{
	return node_file_sized(buf, cap, name_json, blob_hex, 5);
}

static void test_hostile_names(void **state)
{
	(void)state;
	char *work = rix_test_new_dir("rix-restore-hostile");
	char repo[4300];
	rix_repo *r = new_repo(work, "repo", repo, sizeof(repo));
	rix_id blob;
	MUST(rix_repo_save_blob(&blob, NULL, r, RIX_BLOB_DATA, "evil\n", 5));
	char hex[65];
	rix_id_to_hex(hex, &blob);
	const char *names[] = { "..", ".", "", "a/b", "x\\u0000y", "../../escape", "/abs" };
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		char node[1024], json[4096];
		node_file(node, sizeof(node), names[i], hex);
		/* the hostile tree as the root, and under a good directory "d" */
		snprintf(json, sizeof(json), "{\"nodes\":[%s]}\n", node);
		rix_id bad, good;
		save_json_tree(r, &bad, json);
		char bh[65];
		rix_id_to_hex(bh, &bad);
		snprintf(json, sizeof(json),
			 "{\"nodes\":[{\"name\":\"d\",\"type\":\"dir\",\"mode\":2147484141,\"mtime\":\"2020-01-01T00:00:00Z\","
			 "\"atime\":\"2020-01-01T00:00:00Z\",\"ctime\":\"2020-01-01T00:00:00Z\",\"uid\":0,\"gid\":0,"
			 "\"content\":null,\"subtree\":\"%s\"},%s]}\n",
			 bh, node_file(node, sizeof(node), "ok", hex));
		save_json_tree(r, &good, json);
		MUST(rix_repo_flush(r));
		char box[4400], tgt[4500];
		snprintf(box, sizeof(box), "%s/box%zu", work, i);
		snprintf(tgt, sizeof(tgt), "%s/box%zu/in/target", work, i);
		assert_int_equal(mkdir(box, 0700), 0);
		rix_test_sh("mkdir -p '%s'", tgt);
		struct errs e;
		rix_restore_summary sum;
		/* as the root: the tree does not decode, nothing is made */
		int rc = restore(&sum, &e, r, &bad, tgt, NULL);
		assert_int_equal(rc, RIX_ECORRUPT);
		assert_int_equal(count_entries(tgt), 0);
		/* below d: an error naming /d, "ok" restored */
		rc = restore(&sum, &e, r, &good, tgt, NULL);
		assert_int_equal(rc, RIX_EIO);
		assert_true(has_error_for(&e, "/d"));
		char ok[4600];
		snprintf(ok, sizeof(ok), "%s/ok", tgt);
		char *s = read_small(ok);
		assert_non_null(s);
		assert_string_equal(s, "evil\n");
		free(s);
		/* nothing outside the target: box holds in, in holds target */
		assert_int_equal(count_entries(box), 1);
		snprintf(ok, sizeof(ok), "%s/in", box);
		assert_int_equal(count_entries(ok), 1);
	}
	rix_repo_free(r);
	rix_test_free_dir(work);
}

/* A dir node named name (JSON) with subtree sub. */
static const char *node_dir(char *buf, size_t cap, const char *name_json, const rix_id *sub)
{
	char hex[65];
	rix_id_to_hex(hex, sub);
	snprintf(buf, cap,
		 "{\"name\":\"%s\",\"type\":\"dir\",\"mode\":2147484141,\"mtime\":\"2020-01-01T00:00:00Z\","
		 "\"atime\":\"2020-01-01T00:00:00Z\",\"ctime\":\"2020-01-01T00:00:00Z\",\"uid\":0,\"gid\":0,"
		 "\"content\":null,\"subtree\":\"%s\"}",
		 name_json, hex);
	return buf;
}

/* 20 directories of 255-byte names, a file at the bottom: the 16th's path would be 4096 bytes
 * with its "/", longer than PATH_MAX allows: an error naming it, nothing below made. And a
 * user name of 40000 bytes counts in the plan's budget. */
static void test_path_limit(void **state)
{
	(void)state;
	char *work = rix_test_new_dir("rix-restore-pathlimit");
	char repo[4300];
	rix_repo *r = new_repo(work, "repo", repo, sizeof(repo));
	rix_id blob;
	MUST(rix_repo_save_blob(&blob, NULL, r, RIX_BLOB_DATA, "deep\n", 5));
	char hex[65], node[1200], json[4096], name[256];
	rix_id_to_hex(hex, &blob);
	memset(name, 'n', 255);
	name[255] = '\0';
	snprintf(json, sizeof(json), "{\"nodes\":[%s]}\n", node_file(node, sizeof(node), "f", hex));
	rix_id t;
	save_json_tree(r, &t, json);
	for (int d = 0; d < 20; d++) {
		snprintf(json, sizeof(json), "{\"nodes\":[%s]}\n", node_dir(node, sizeof(node), name, &t));
		save_json_tree(r, &t, json);
	}
	MUST(rix_repo_flush(r));
	char tgt[4400];
	snprintf(tgt, sizeof(tgt), "%s/target", work);
	struct errs e;
	rix_restore_summary sum;
	assert_int_equal(restore(&sum, &e, r, &t, tgt, NULL), RIX_EIO);
	assert_int_equal(e.n, 1);
	assert_non_null(strstr(e.lastmsg, "a path of 4096 bytes, longer than the 4095 paths may have"));
	assert_int_equal(strlen(e.paths[0]), 511); /* (the path, cut by the test's buffer) */
	assert_int_equal(sum.files_restored, 15);
	/* the metadata counts in the plan: 3 files of 40000-byte user names, budget 50000: 2 batches */
	char *big = malloc(3 * 41000 + 100), user[40001];
	memset(user, 'u', 40000);
	user[40000] = '\0';
	size_t k = (size_t)sprintf(big, "{\"nodes\":[");
	for (int i = 0; i < 3; i++)
		k += (size_t)sprintf(big + k,
				     "%s{\"name\":\"f%d\",\"type\":\"file\",\"mode\":420,\"mtime\":\"2020-01-01T00:00:00Z\","
				     "\"atime\":\"2020-01-01T00:00:00Z\",\"ctime\":\"2020-01-01T00:00:00Z\",\"uid\":0,"
				     "\"gid\":0,\"user\":\"%s\",\"size\":5,\"content\":[\"%s\"]}",
				     i ? "," : "", i, user, hex);
	sprintf(big + k, "]}\n");
	save_json_tree(r, &t, big);
	free(big);
	MUST(rix_repo_flush(r));
	rix_restore_options o = RIX_RESTORE_OPTIONS_INIT;
	o.memory = 50000;
	snprintf(tgt, sizeof(tgt), "%s/target-users", work);
	MUST(restore(&sum, &e, r, &t, tgt, &o));
	assert_int_equal(sum.files_restored, 3);
	assert_int_equal(sum.batches, 2);
	rix_repo_free(r);
	rix_test_free_dir(work);
}

static void test_symlink_escape(void **state)
{
	(void)state;
	char *work = rix_test_new_dir("rix-restore-escape");
	char repo[4300], src[4300], tgt[4300], outside[4300];
	rix_repo *r = new_repo(work, "repo", repo, sizeof(repo));
	snprintf(src, sizeof(src), "%s/src", work);
	snprintf(tgt, sizeof(tgt), "%s/target", work);
	snprintf(outside, sizeof(outside), "%s/outside", work);
	rix_test_sh("cd '%s' && mkdir -p src/a outside target && echo new > src/a/f && echo new > src/g && echo new > src/h && "
	   "echo victim > outside/g-victim && echo victim > outside/h-victim && "
	   "ln -s '%s' target/a && ln -s '%s/g-victim' target/g && ln outside/h-victim target/h",
	   work, outside, outside);
	rix_id tree;
	backup_dir(&tree, r, src);
	struct errs e;
	rix_restore_summary sum;
	/* never: the planted directory symlink is refused, not followed */
	rix_restore_options o = RIX_RESTORE_OPTIONS_INIT;
	o.overwrite = RIX_OVERWRITE_NEVER;
	assert_int_equal(restore(&sum, &e, r, &tree, tgt, &o), RIX_EIO);
	assert_true(has_error_for(&e, "/a"));
	assert_int_equal(count_entries(outside), 2);
	/* always: the symlinks and the hard link are replaced, never written through */
	MUST(restore(&sum, &e, r, &tree, tgt, NULL));
	assert_int_equal(count_entries(outside), 2);
	char p[4500];
	snprintf(p, sizeof(p), "%s/g-victim", outside);
	char *s = read_small(p);
	assert_string_equal(s, "victim\n");
	free(s);
	snprintf(p, sizeof(p), "%s/h-victim", outside);
	s = read_small(p);
	assert_string_equal(s, "victim\n");
	free(s);
	assert_int_equal(rix_test_compare_trees(src, tgt, RIX_CMP_NO_DIR_MTIME), 0);

	/* a snapshot whose "a" is a symlink to outside, then one whose "a" is a directory */
	rix_test_sh("cd '%s' && rm -rf src2 src3 && mkdir -p src2 src3/a && ln -s '%s' src2/a && echo x > src3/a/f2", work,
	   outside);
	rix_id t2, t3;
	snprintf(p, sizeof(p), "%s/src2", work);
	backup_dir(&t2, r, p);
	snprintf(p, sizeof(p), "%s/src3", work);
	backup_dir(&t3, r, p);
	snprintf(tgt, sizeof(tgt), "%s/target2", work);
	MUST(restore(&sum, &e, r, &t2, tgt, NULL));
	MUST(restore(&sum, &e, r, &t3, tgt, NULL));
	assert_int_equal(count_entries(outside), 2);
	snprintf(p, sizeof(p), "%s/a/f2", tgt);
	struct stat st;
	assert_int_equal(lstat(p, &st), 0);
	rix_repo_free(r);
	rix_test_free_dir(work);
}

/* While the restore runs: as soon as directory /a is made, it is moved away and a symlink to
 * outside put in its place. The entries the walk makes in a go into the directory that was made
 * (it is held open); the files with content, made and written by path at batch time, are
 * refused: never made or written through the symlink. */
static bool exists(const char *dir, const char *rel);

struct swap {
	const char *tgt, *outside;
	bool done;
};

static void swap_on_item(void *payload, const char *action, const char *path, bool file, uint64_t size)
{
	(void)action;
	(void)file;
	(void)size;
	struct swap *w = payload;
	if (w->done || strcmp(path, "/a") != 0)
		return;
	w->done = true;
	char a[4400], moved[4400];
	snprintf(a, sizeof(a), "%s/a", w->tgt);
	snprintf(moved, sizeof(moved), "%s/a.moved", w->tgt);
	assert_int_equal(rename(a, moved), 0);
	assert_int_equal(symlink(w->outside, a), 0);
}

static void test_symlink_during(void **state)
{
	(void)state;
	char *work = rix_test_new_dir("rix-restore-during");
	char repo[4300], src[4300], tgt[4300], outside[4300];
	rix_repo *r = new_repo(work, "repo", repo, sizeof(repo));
	snprintf(src, sizeof(src), "%s/src", work);
	snprintf(tgt, sizeof(tgt), "%s/target", work);
	snprintf(outside, sizeof(outside), "%s/outside", work);
	rix_test_sh("cd '%s' && mkdir -p src/a/b outside && echo 1 > src/a/f && echo 2 > src/a/b/g && ln -s x src/a/l && mkfifo src/a/p",
	   work);
	rix_id tree;
	backup_dir(&tree, r, src);
	struct swap w = { .tgt = tgt, .outside = outside };
	rix_restore_options o = RIX_RESTORE_OPTIONS_INIT;
	o.item = swap_on_item; /* errors (the files of a refused, perhaps) are counted in sum */
	o.payload = &w;
	rix_restore_summary sum;
	int rc = rix_restore(&sum, r, &tree, tgt, &o);
	assert_true(w.done);
	/* the entries of a the walk made are in the directory that was made (now a.moved); making
	 * the files with content by path meets the symlink and is refused: errors, not writes
	 * outside, and the files are nowhere */
	assert_int_equal(rc, RIX_EIO);
	assert_true(sum.errors >= 2);
	assert_true(exists(tgt, "a.moved/b") && exists(tgt, "a.moved/l") && exists(tgt, "a.moved/p"));
	assert_false(exists(tgt, "a.moved/f") || exists(tgt, "a.moved/b/g"));
	assert_int_equal(count_entries(outside), 0); /* nothing went through the symlink */
	rix_repo_free(r);
	rix_test_free_dir(work);
}

/* Between the walk (which plans /a, replacing what was there) and the batch (which makes and
 * writes it): when directory /z is made, a hard link to a file outside, a FIFO, or a symlink to
 * outside is put where /a goes (what is there removed first, if anything: the walk no longer
 * makes a file with content). The batch must refuse the entry (an error naming /a), write
 * nothing through it and set nothing on it; a FIFO must not block the restore. */
struct swapf {
	struct errs e; /* first: on_error's payload */
	const char *tgt, *victim, *how;
	bool done;
};

static void swapf_on_item(void *payload, const char *action, const char *path, bool file, uint64_t size)
{
	(void)action;
	(void)file;
	(void)size;
	struct swapf *w = payload;
	if (w->done || strcmp(path, "/z") != 0)
		return;
	w->done = true;
	char a[4400];
	snprintf(a, sizeof(a), "%s/a", w->tgt);
	assert_true(unlink(a) == 0 || errno == ENOENT);
	if (strcmp(w->how, "link") == 0)
		assert_int_equal(link(w->victim, a), 0);
	else if (strcmp(w->how, "fifo") == 0)
		assert_int_equal(mkfifo(a, 0600), 0);
	else
		assert_int_equal(symlink(w->victim, a), 0);
}

static void assert_victim(const char *victim)
{
	char *v = read_small(victim);
	assert_non_null(v);
	assert_string_equal(v, "old content\n");
	free(v);
	struct stat st;
	assert_int_equal(stat(victim, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
}

static void test_swapped_file(void **state)
{
	(void)state;
	char *work = rix_test_new_dir("rix-restore-swapped");
	char repo[4300], src[4300], outside[4300], victim[4400];
	rix_repo *r = new_repo(work, "repo", repo, sizeof(repo));
	snprintf(src, sizeof(src), "%s/src", work);
	snprintf(outside, sizeof(outside), "%s/outside", work);
	snprintf(victim, sizeof(victim), "%s/victim", outside);
	rix_test_sh("cd '%s' && mkdir -p src/z outside && printf 'new content\n' > src/a && chmod 0644 src/a && echo f > src/z/f && "
	   "printf 'old content\n' > outside/victim && chmod 0600 outside/victim && touch -r src/a outside/victim",
	   work);
	rix_id tree;
	backup_dir(&tree, r, src);
	const char *hows[] = { "link", "fifo", "symlink" };
	for (size_t i = 0; i < sizeof(hows) / sizeof(hows[0]); i++) {
		char tgt[4400];
		snprintf(tgt, sizeof(tgt), "%s/target-%s", work, hows[i]);
		struct swapf w = { .tgt = tgt, .victim = victim, .how = hows[i] };
		rix_restore_options o = RIX_RESTORE_OPTIONS_INIT;
		o.item = swapf_on_item;
		o.error = on_error;
		o.payload = &w;
		o.verify = i == 0; /* verify reopens the file too */
		rix_restore_summary sum;
		alarm(60); /* a FIFO opened for writing without O_NONBLOCK blocks forever: the test fails */
		int rc = rix_restore(&sum, r, &tree, tgt, &o);
		alarm(0);
		assert_true(w.done);
		assert_int_equal(rc, RIX_EIO);
		assert_true(has_error_for(&w.e, "/a"));
		assert_int_equal(sum.errors, 1);
		assert_int_equal(sum.files_restored, 2); /* /z and /z/f, not /a */
		assert_victim(victim);
		assert_int_equal(count_entries(outside), 1);
		assert_true(exists(tgt, "z/f"));
	}
	/* if-changed: a hard link to the victim planted where /a goes, of /a's size and mtime, is not
	 * "unchanged": it is replaced, and the victim keeps its mode */
	char tgt[4400], a[4500];
	snprintf(tgt, sizeof(tgt), "%s/target-keep", work);
	snprintf(a, sizeof(a), "%s/a", tgt);
	assert_int_equal(mkdir(tgt, 0700), 0);
	assert_int_equal(link(victim, a), 0);
	rix_restore_options o = RIX_RESTORE_OPTIONS_INIT;
	o.overwrite = RIX_OVERWRITE_IF_CHANGED;
	struct errs e;
	rix_restore_summary sum;
	MUST(restore(&sum, &e, r, &tree, tgt, &o));
	assert_victim(victim);
	char *v = read_small(a);
	assert_string_equal(v, "new content\n");
	free(v);
	struct stat st, sa;
	assert_int_equal(stat(victim, &st), 0);
	assert_int_equal(stat(a, &sa), 0);
	assert_true(st.st_ino != sa.st_ino);
	rix_repo_free(r);
	rix_test_free_dir(work);
}

/* ---- many small files ------------------------------------------------------------------------ */

/* <work>/src: 40 directories of 75 files, 0-6000 random bytes each (every 10th a copy of the
 * one before, every 25th empty), modes and mtimes that differ; the total of files made. */
static size_t make_small_files(const char *work)
{
	char p[4400];
	snprintf(p, sizeof(p), "%s/src", work);
	assert_int_equal(mkdir(p, 0755), 0);
	uint64_t st = 11;
	uint8_t buf[6000];
	size_t n = 0, len = 0;
	for (int d = 0; d < 40; d++) {
		snprintf(p, sizeof(p), "%s/src/d%02d", work, d);
		assert_int_equal(mkdir(p, 0755), 0);
		for (int i = 0; i < 75; i++, n++) {
			snprintf(p, sizeof(p), "%s/src/d%02d/f%03d", work, d, i);
			if (n % 10 != 1) { /* else the same bytes as the file before */
				len = n % 25 == 0 ? 0 : (size_t)(rix_test_next(&st) % sizeof(buf));
				rix_test_fill_random(buf, len, &st);
			}
			int fd = open(p, O_WRONLY | O_CREAT | O_EXCL, 0600);
			assert_true(fd >= 0);
			assert_int_equal(write(fd, buf, len), (ssize_t)len);
			struct timespec ts[2] = { { 1000000000 + (time_t)n, 0 }, { 1500000000 + (time_t)n * 7, (long)n } };
			assert_int_equal(futimens(fd, ts), 0);
			assert_int_equal(fchmod(fd, n % 3 == 0 ? 0644 : n % 3 == 1 ? 0600 : 0444), 0);
			assert_int_equal(close(fd), 0);
		}
	}
	return n;
}

/* 3000 small files, dozens a pack: each restored equal (content, mode, times), each pack byte
 * read once; again with verify in batches of a few files (a tiny budget) and 4 workers. The
 * files are made by the workers that write them (in any order), their metadata set by the one
 * that writes their last blob. */
static void test_many_files(void **state)
{
	(void)state;
	char *work = rix_test_new_dir("rix-restore-many");
	size_t nf = make_small_files(work);
	char repo[4300], src[4300], tgt[4300];
	snprintf(src, sizeof(src), "%s/src", work);
	rix_repo *r = new_repo(work, "repo", repo, sizeof(repo));
	rix_id tree;
	backup_dir(&tree, r, src);
	rix_repo_free(r);
	rix_test_fault f;
	rix_test_fault_init(&f);
	r = open_counted(repo, &f);
	rix_id *packs;
	size_t np;
	uint64_t blob_bytes = 0, blobs = 0;
	MUST(rix_repo_list_ids(&packs, &np, r, RIX_FILE_PACK));
	for (size_t p = 0; p < np; p++) {
		rix_blob *h;
		size_t c;
		MUST(rix_repo_read_pack_header(&h, &c, r, &packs[p]));
		for (size_t i = 0; i < c; i++)
			blob_bytes += h[i].length;
		blobs += c;
		rix_free(h);
	}
	rix_free(packs);
	assert_true(blobs > 5 * np); /* several files a pack */
	for (int pass = 0; pass < 2; pass++) {
		snprintf(tgt, sizeof(tgt), "%s/target%d", work, pass);
		rix_restore_options o = RIX_RESTORE_OPTIONS_INIT;
		if (pass == 1) {
			o.verify = true;
			o.memory = 20000;
			o.workers = 4;
		}
		rix_test_fault_arm(&f, NULL);
		rix_restore_summary sum;
		struct errs e;
		int rc = restore(&sum, &e, r, &tree, tgt, &o);
		if (e.n > 0)
			print_message("%s\n", e.last);
		MUST(rc);
		assert_int_equal(e.n, 0);
		assert_int_equal(rix_test_compare_trees(src, tgt, 0), 0);
		assert_int_equal(sum.files_total, nf + 40);
		assert_int_equal(sum.files_restored, nf + 40);
		assert_int_equal(sum.errors, 0);
		if (pass == 0) { /* one batch: every blob of the repository read once */
			assert_int_equal(sum.batches, 1);
			assert_int_equal(rix_test_fault_read_bytes(&f, RIX_FILE_PACK), blob_bytes);
			assert_int_equal(rix_test_fault_pack_overlaps(&f), 0);
		} else {
			assert_true(sum.batches > 40);
			assert_int_equal(sum.verified, nf);
		}
	}
	rix_repo_free(r);
	rix_test_fault_destroy(&f);
	rix_test_sh("chmod -R u+w '%s'", work);
	rix_test_free_dir(work);
}

/* A file that cannot be made at batch time: when directory /z is made (after the walk planned
 * the files of /m), a directory takes the name of /m/50. /m/50 is reported by path, nothing is
 * written into that directory, and every other file is restored whole. */
struct plant {
	struct errs e; /* first: on_error's payload */
	const char *tgt;
	bool done;
};

static void plant_on_item(void *payload, const char *action, const char *path, bool file, uint64_t size)
{
	(void)action;
	(void)file;
	(void)size;
	struct plant *w = payload;
	if (w->done || strcmp(path, "/z") != 0)
		return;
	w->done = true;
	char p[4400];
	snprintf(p, sizeof(p), "%s/m/50", w->tgt);
	assert_int_equal(mkdir(p, 0700), 0);
}

static void test_create_fails(void **state)
{
	(void)state;
	char *work = rix_test_new_dir("rix-restore-create");
	char repo[4300], src[4300], tgt[4300];
	snprintf(src, sizeof(src), "%s/src", work);
	snprintf(tgt, sizeof(tgt), "%s/target", work);
	rix_test_sh("cd '%s' && mkdir -p src/m src/z && for i in $(seq 0 99); do "
		    "head -c $((i * 37 + 1)) /dev/urandom > src/m/$i; done && echo z > src/z/f",
		    work);
	rix_repo *r = new_repo(work, "repo", repo, sizeof(repo));
	rix_id tree;
	backup_dir(&tree, r, src);
	struct plant w = { .tgt = tgt };
	rix_restore_options o = RIX_RESTORE_OPTIONS_INIT;
	o.item = plant_on_item;
	o.error = on_error;
	o.payload = &w;
	rix_restore_summary sum;
	assert_int_equal(rix_restore(&sum, r, &tree, tgt, &o), RIX_EIO);
	assert_true(w.done);
	assert_int_equal(w.e.n, 1);
	assert_string_equal(w.e.paths[0], "/m/50");
	assert_non_null(strstr(w.e.lastmsg, "create"));
	assert_int_equal(sum.errors, 1);
	assert_int_equal(sum.files_total, 2 + 100 + 1);
	assert_int_equal(sum.files_restored, 2 + 99 + 1);
	char p[4400];
	snprintf(p, sizeof(p), "%s/m/50", tgt);
	assert_int_equal(count_entries(p), 0); /* the directory planted, nothing written into it */
	/* the rest is the source's */
	assert_int_equal(rmdir(p), 0);
	rix_test_sh("rm '%s/m/50'", src);
	assert_int_equal(rix_test_compare_trees(src, tgt, RIX_CMP_NO_DIR_MTIME), 0);
	rix_repo_free(r);
	rix_test_free_dir(work);
}

/* ---- damaged repositories ------------------------------------------------------------------- */

/* A file whose size is not its content's, and two hard links to a file whose blob the index
 * lacks: each reported by path, none counted restored. */
static void test_bad_file_nodes(void **state)
{
	(void)state;
	char *work = rix_test_new_dir("rix-restore-badnodes");
	char repo[4300];
	rix_repo *r = new_repo(work, "repo", repo, sizeof(repo));
	rix_id blob, nowhere;
	MUST(rix_repo_save_blob(&blob, NULL, r, RIX_BLOB_DATA, "five\n", 5));
	rix_sha256(&nowhere, "stored nowhere", 14);
	char hex[65], nhex[65], n1[1024], n2[1024], n3[1024], json[4096];
	rix_id_to_hex(hex, &blob);
	rix_id_to_hex(nhex, &nowhere);
	node_file_sized(n1, sizeof(n1), "bad-size", hex, 9);
	const char *link = "{\"name\":\"%s\",\"type\":\"file\",\"mode\":420,\"mtime\":\"2020-01-01T00:00:00Z\","
			   "\"atime\":\"2020-01-01T00:00:00Z\",\"ctime\":\"2020-01-01T00:00:00Z\",\"uid\":0,\"gid\":0,"
			   "\"inode\":77,\"device_id\":1,\"links\":2,\"size\":5,\"content\":[\"%s\"]}";
	snprintf(n2, sizeof(n2), link, "h1", nhex);
	snprintf(n3, sizeof(n3), link, "h2", nhex);
	snprintf(json, sizeof(json), "{\"nodes\":[%s,%s,%s]}\n", n1, n2, n3);
	rix_id tree;
	save_json_tree(r, &tree, json);
	MUST(rix_repo_flush(r));
	char tgt[4400];
	snprintf(tgt, sizeof(tgt), "%s/target", work);
	for (int dry = 0; dry < 2; dry++) {
		rix_restore_options o = RIX_RESTORE_OPTIONS_INIT;
		o.dry_run = dry;
		struct errs e;
		rix_restore_summary sum;
		assert_int_equal(restore(&sum, &e, r, &tree, tgt, &o), RIX_EIO);
		assert_true(has_error_for(&e, "/bad-size"));
		assert_true(has_error_for(&e, "/h1"));
		assert_true(has_error_for(&e, "/h2"));
		assert_int_equal(sum.files_restored, 0);
	}
	/* the first file restored has no content at all (no "content" member; found by fuzz_restore:
	 * the plan's refs were still NULL): an empty file, no error */
	save_json_tree(r, &tree, "{\"nodes\":[{\"name\":\"y\",\"type\":\"file\"}]}");
	MUST(rix_repo_flush(r));
	snprintf(tgt, sizeof(tgt), "%s/target2", work);
	struct errs e;
	rix_restore_summary sum;
	MUST(restore(&sum, &e, r, &tree, tgt, NULL));
	assert_int_equal(sum.files_restored, 1);
	char *y = read_small(strcat(tgt, "/y"));
	assert_non_null(y);
	assert_string_equal(y, "");
	free(y);
	rix_repo_free(r);
	rix_test_free_dir(work);
}

/* A file of 150 blobs, more than the planner looks up at once (backup/restorer.c's
 * RS_LOOKUP_BATCH, 64): each blob's bytes land at its place; a file whose 101st blob is stored
 * nowhere is reported, the other restored. */
static void test_many_blobs(void **state)
{
	(void)state;
	enum { NB = 150, MISSING = 100 };
	char *work = rix_test_new_dir("rix-restore-manyblobs");
	char repo[4300];
	rix_repo *r = new_repo(work, "repo", repo, sizeof(repo));
	rix_id nowhere;
	rix_sha256(&nowhere, "stored nowhere", 14);
	char nhex[65];
	rix_id_to_hex(nhex, &nowhere);
	static char want[NB * 10 + 1], all[NB * 68], gap[NB * 68];
	size_t wl = 0, al = 0, gl = 0;
	for (int i = 0; i < NB; i++) {
		char data[16], hex[65];
		int dl = snprintf(data, sizeof(data), "blob %03d\n", i);
		rix_id id;
		MUST(rix_repo_save_blob(&id, NULL, r, RIX_BLOB_DATA, data, (size_t)dl));
		memcpy(want + wl, data, (size_t)dl);
		wl += (size_t)dl;
		rix_id_to_hex(hex, &id);
		al += (size_t)snprintf(all + al, sizeof(all) - al, "%s\"%s\"", i ? "," : "", hex);
		gl += (size_t)snprintf(gap + gl, sizeof(gap) - gl, "%s\"%s\"", i ? "," : "", i == MISSING ? nhex : hex);
	}
	const char *node = "{\"name\":\"%s\",\"type\":\"file\",\"mode\":420,\"mtime\":\"2020-01-01T00:00:00Z\","
			   "\"atime\":\"2020-01-01T00:00:00Z\",\"ctime\":\"2020-01-01T00:00:00Z\",\"uid\":0,\"gid\":0,"
			   "\"size\":%zu,\"content\":[%s]}";
	size_t cap = sizeof(all) + sizeof(gap) + 1024;
	char *json = malloc(cap);
	assert_non_null(json);
	int jl = snprintf(json, cap, "{\"nodes\":[");
	jl += snprintf(json + jl, cap - (size_t)jl, node, "all", wl, all);
	jl += snprintf(json + jl, cap - (size_t)jl, ",");
	jl += snprintf(json + jl, cap - (size_t)jl, node, "gap", wl, gap);
	snprintf(json + jl, cap - (size_t)jl, "]}\n");
	rix_id tree;
	save_json_tree(r, &tree, json);
	free(json);
	MUST(rix_repo_flush(r));
	char tgt[4400], path[4500];
	snprintf(tgt, sizeof(tgt), "%s/target", work);
	struct errs e;
	rix_restore_summary sum;
	assert_int_equal(restore(&sum, &e, r, &tree, tgt, NULL), RIX_EIO);
	assert_true(has_error_for(&e, "/gap"));
	assert_false(has_error_for(&e, "/all"));
	assert_non_null(strstr(e.lastmsg, nhex)); /* the blob stored nowhere, not another */
	assert_int_equal(sum.files_restored, 1);
	snprintf(path, sizeof(path), "%s/all", tgt);
	size_t n;
	char *got = rix_test_read_file(path, &n);
	assert_non_null(got);
	assert_int_equal(n, wl);
	assert_memory_equal(got, want, wl);
	free(got);
	rix_repo_free(r);
	/* The same through a dedup-only index (no data blob's location): both files reported. */
	rix_backend *b;
	MUST(rix_backend_local_open(&b, repo, false));
	MUST(rix_repo_open(&r, b, PW, strlen(PW), &fast));
	rix_repo_set_dedup_only(r, true);
	MUST(rix_repo_load_index(NULL, r, NULL, NULL));
	snprintf(tgt, sizeof(tgt), "%s/target-dd", work);
	assert_int_equal(restore(&sum, &e, r, &tree, tgt, NULL), RIX_EIO);
	assert_true(has_error_for(&e, "/all"));
	assert_true(has_error_for(&e, "/gap"));
	assert_int_equal(sum.files_restored, 0);
	assert_non_null(strstr(e.lastmsg, "no location"));
	rix_repo_free(r);
	rix_test_free_dir(work);
}

/* An index that puts blob B at the very place of blob A's pack (B itself stored nowhere): the
 * files of B must be reported, never given A's bytes. */
static void test_shared_offset(void **state)
{
	(void)state;
	char *work = rix_test_new_dir("rix-restore-shared");
	char repo[4300];
	rix_repo *r = new_repo(work, "repo", repo, sizeof(repo));
	const char a_data[] = "the bytes of blob A\n", b_data[] = "the bytes of blob B\n";
	rix_id a, b;
	MUST(rix_repo_save_blob(&a, NULL, r, RIX_BLOB_DATA, a_data, sizeof(a_data) - 1));
	MUST(rix_repo_flush(r));
	rix_sha256(&b, b_data, sizeof(b_data) - 1);
	rix_packed_blob pa;
	MUST(rix_master_index_lookup(&pa, rix_repo_master_index(r), RIX_BLOB_DATA, &a));
	/* the crafted index: B at A's offset, length and uncompressed length */
	rix_index *idx;
	MUST(rix_index_new(&idx));
	rix_blob fake = { .id = b, .type = RIX_BLOB_DATA, .offset = pa.offset, .length = pa.length,
			  .uncompressed_length = pa.uncompressed_length };
	MUST(rix_index_store_pack(idx, &pa.pack_id, &fake, 1));
	rix_index_finalize(idx);
	char *json;
	size_t jn;
	MUST(rix_index_encode(&json, &jn, idx));
	MUST(rix_repo_write_file(NULL, r, RIX_FILE_INDEX, json, jn));
	rix_free(json);
	rix_index_free(idx);
	/* a tree with fa (content A) and fb (content B) */
	char ah[65], bh[65], na[1024], nb[1024], tj[4096];
	rix_id_to_hex(ah, &a);
	rix_id_to_hex(bh, &b);
	snprintf(tj, sizeof(tj), "{\"nodes\":[%s,%s]}\n", node_file_sized(na, sizeof(na), "fa", ah, sizeof(a_data) - 1),
		 node_file_sized(nb, sizeof(nb), "fb", bh, sizeof(b_data) - 1));
	rix_id tree;
	save_json_tree(r, &tree, tj);
	MUST(rix_repo_flush(r));
	rix_repo_free(r);
	r = open_repo(repo, NULL);
	MUST(rix_repo_load_index(NULL, r, NULL, NULL));
	char tgt[4400], fb[4500];
	snprintf(tgt, sizeof(tgt), "%s/target", work);
	snprintf(fb, sizeof(fb), "%s/fb", tgt);
	struct errs e;
	rix_restore_summary sum;
	assert_int_equal(restore(&sum, &e, r, &tree, tgt, NULL), RIX_EIO);
	assert_true(has_error_for(&e, "/fb"));
	/* never A's bytes: fb is made by the first write into it, and it has none */
	struct stat st;
	assert_int_equal(lstat(fb, &st), -1);
	assert_int_equal(errno, ENOENT);
	rix_repo_free(r);
	rix_test_free_dir(work);
}

static void pack_path(char *out, size_t cap, const char *repo, rix_repo *r, const rix_id *blob, uint32_t *off)
{
	rix_packed_blob pb;
	MUST(rix_master_index_lookup(&pb, rix_repo_master_index(r), RIX_BLOB_DATA, blob));
	char hex[65];
	rix_id_to_hex(hex, &pb.pack_id);
	snprintf(out, cap, "%s/data/%.2s/%s", repo, hex, hex);
	if (off != NULL)
		*off = pb.offset;
}

static const rix_node *find_node(rix_repo *r, const rix_id *tree, const char *name, rix_tree **keep)
{
	uint8_t *data;
	size_t n;
	MUST(rix_repo_load_blob(&data, &n, r, RIX_BLOB_TREE, tree));
	MUST(rix_tree_decode(keep, data, n));
	rix_free(data);
	const rix_node *nd = rix_tree_find(*keep, name, strlen(name));
	assert_non_null(nd);
	return nd;
}

static void test_missing_pack(void **state)
{
	(void)state;
	char *work = rix_test_new_dir("rix-restore-missing");
	char repo[4300], src[4300], tgt[4300];
	snprintf(src, sizeof(src), "%s/src", work);
	snprintf(tgt, sizeof(tgt), "%s/target", work);
	rix_repo *r = new_repo(work, "repo", repo, sizeof(repo));
	/* "keep" in packs of its own (backed up first), then "lost" and "bad" */
	rix_test_sh("cd '%s' && mkdir src && head -c 100000 /dev/urandom > src/keep", work);
	rix_id tree;
	backup_dir(&tree, r, src);
	rix_test_sh("cd '%s' && head -c 6000000 /dev/urandom > src/lost && head -c 5000 /dev/urandom > src/bad && ln src/lost src/lost-link",
	   work);
	backup_dir(&tree, r, src);
	rix_tree *t;
	const rix_node *lost = find_node(r, &tree, "lost", &t);
	const rix_node *bad = rix_tree_find(t, "bad", 3), *keep = rix_tree_find(t, "keep", 4);
	char lost_pack[4400], bad_pack[4400], keep_pack[4400];
	uint32_t bad_off;
	pack_path(lost_pack, sizeof(lost_pack), repo, r, &lost->content[0], NULL);
	pack_path(bad_pack, sizeof(bad_pack), repo, r, &bad->content[0], &bad_off);
	pack_path(keep_pack, sizeof(keep_pack), repo, r, &keep->content[0], NULL);
	assert_string_not_equal(lost_pack, keep_pack);
	rix_tree_free(t);
	struct errs e;
	rix_restore_summary sum;
	if (strcmp(lost_pack, bad_pack) == 0) {
		/* both in one pack: the pack removed fails both */
		assert_int_equal(unlink(lost_pack), 0);
	} else {
		assert_int_equal(unlink(lost_pack), 0);
		flip_byte(bad_pack, (long)bad_off + 20);
	}
	assert_int_equal(restore(&sum, &e, r, &tree, tgt, NULL), RIX_EIO);
	assert_true(has_error_for(&e, "/lost"));
	assert_true(has_error_for(&e, "/bad"));
	assert_true(has_error_for(&e, "/lost-link")); /* a hard link to a file that failed */
	assert_false(has_error_for(&e, "/keep"));
	char a[4500], b2[4500];
	snprintf(a, sizeof(a), "%s/keep", src);
	snprintf(b2, sizeof(b2), "%s/keep", tgt);
	assert_int_equal(rix_test_run(NULL, NULL, "cmp -s '%s' '%s'", a, b2), 0);
	assert_int_equal(sum.files_restored, 1);
	rix_repo_free(r);
	rix_test_free_dir(work);
}

/* A target that fills up (a 1 MiB tmpfs; root only): the files that do not fit are reported
 * with the disk's error, and every file not reported is whole. */
static void test_full_target(void **state)
{
	(void)state;
	char *work = rix_test_new_dir("rix-restore-full");
	char repo[4300], src[4300], tgt[4300];
	snprintf(src, sizeof(src), "%s/src", work);
	snprintf(tgt, sizeof(tgt), "%s/target", work);
	rix_test_sh("mkdir '%s'", tgt);
	if (rix_test_run(NULL, NULL, "mount -t tmpfs -o size=1m tmpfs '%s' 2>/dev/null", tgt) != 0) {
		print_message("(no tmpfs mount here: skipped)\n");
		rix_test_free_dir(work);
		return;
	}
	rix_test_sh("cd '%s' && mkdir src && head -c 3000000 /dev/urandom > src/big && echo a > src/a && echo z > src/z && "
	   "head -c 300000 /dev/urandom > src/mid",
	   work);
	rix_repo *r = new_repo(work, "repo", repo, sizeof(repo));
	rix_id tree;
	backup_dir(&tree, r, src);
	rix_restore_summary sum;
	struct errs e;
	int rc = restore(&sum, &e, r, &tree, tgt, NULL);
	assert_int_equal(rc, RIX_EIO);
	assert_true(has_error_for(&e, "/big"));
	assert_non_null(strstr(e.last, "No space left on device"));
	assert_true(sum.files_restored < 4);
	const char *names[] = { "a", "z", "mid", "big" };
	for (size_t i = 0; i < 4; i++) {
		char loc[64];
		snprintf(loc, sizeof(loc), "/%s", names[i]);
		if (!has_error_for(&e, loc))
			assert_int_equal(rix_test_run(NULL, NULL, "cmp -s '%s/%s' '%s/%s'", src, names[i], tgt, names[i]), 0);
	}
	rix_test_sh("umount '%s'", tgt);
	rix_repo_free(r);
	rix_test_free_dir(work);
}

/* ---- options -------------------------------------------------------------------------------- */

static bool exists(const char *dir, const char *rel)
{
	char p[4600];
	struct stat st;
	snprintf(p, sizeof(p), "%s/%s", dir, rel);
	return lstat(p, &st) == 0;
}

static void test_options(void **state)
{
	(void)state;
	char *work = rix_test_new_dir("rix-restore-opt");
	char repo[4300], src[4300], tgt[4300];
	snprintf(src, sizeof(src), "%s/src", work);
	snprintf(tgt, sizeof(tgt), "%s/target", work);
	rix_repo *r = new_repo(work, "repo", repo, sizeof(repo));
	rix_test_sh("cd '%s' && mkdir -p src/d/e src/x && echo 1 > src/d/e/keep.txt && echo 2 > src/d/skip.o && echo 3 > src/x/Y.TXT && "
	   "truncate -s 3M src/x/sparse && echo end >> src/x/sparse && truncate -s 5M src/x/sparse && "
	   "chmod 0751 src/d && touch -d @1115269505 src/d",
	   work);
	rix_id tree;
	backup_dir(&tree, r, src);
	struct errs e;
	rix_restore_summary sum;

	/* includes: only what matches, and the directories on the way */
	const char *inc[] = { "/d/e/keep.txt" }, *iinc[] = { "y.txt" };
	rix_restore_options o = RIX_RESTORE_OPTIONS_INIT;
	o.includes = inc, o.nincludes = 1, o.iincludes = iinc, o.niincludes = 1;
	MUST(restore(&sum, &e, r, &tree, tgt, &o));
	assert_true(exists(tgt, "d/e/keep.txt") && exists(tgt, "x/Y.TXT"));
	assert_false(exists(tgt, "d/skip.o") || exists(tgt, "x/sparse"));
	/* a directory on the way (not itself included) gets its metadata, as restic's leaveDir */
	char dp[4400];
	struct stat dst;
	snprintf(dp, sizeof(dp), "%s/d", tgt);
	assert_int_equal(stat(dp, &dst), 0);
	assert_int_equal(dst.st_mode & 07777, 0751);
	assert_int_equal(dst.st_mtim.tv_sec, 1115269505);
	rix_test_sh("rm -rf '%s'", tgt);
	/* excludes */
	const char *exc[] = { "*.o", "/x" };
	o = (rix_restore_options)RIX_RESTORE_OPTIONS_INIT;
	o.excludes = exc, o.nexcludes = 2;
	MUST(restore(&sum, &e, r, &tree, tgt, &o));
	assert_true(exists(tgt, "d/e/keep.txt"));
	assert_false(exists(tgt, "d/skip.o") || exists(tgt, "x"));
	/* both kinds: refused */
	o.includes = inc, o.nincludes = 1;
	assert_int_equal(restore(&sum, &e, r, &tree, tgt, &o), RIX_EINVAL);
	rix_test_sh("rm -rf '%s'", tgt);

	/* dry run: nothing written, the counts of a restore */
	o = (rix_restore_options)RIX_RESTORE_OPTIONS_INIT;
	o.dry_run = true;
	MUST(restore(&sum, &e, r, &tree, tgt, &o));
	assert_false(exists(work, "target"));
	assert_int_equal(sum.files_total, 7);
	assert_int_equal(sum.bytes_restored, 2 + 2 + 2 + 5 * 1024 * 1024);

	/* sparse and verify */
	o = (rix_restore_options)RIX_RESTORE_OPTIONS_INIT;
	o.sparse = true;
	o.verify = true;
	MUST(restore(&sum, &e, r, &tree, tgt, &o));
	assert_int_equal(sum.verified, 4);
	assert_int_equal(rix_test_compare_trees(src, tgt, 0), 0);
	char p[4500];
	snprintf(p, sizeof(p), "%s/x/sparse", tgt);
	struct stat st;
	assert_int_equal(stat(p, &st), 0);
	assert_true(st.st_blocks * 512 < 64 * 1024); /* 5 MiB, one block of data */

	/* overwrite: never keeps, if-newer keeps an older-in-snapshot file, if-changed keeps one of the
	 * same size and mtime and rewrites another; always rewrites */
	snprintf(p, sizeof(p), "%s/d/e/keep.txt", tgt);
	rix_test_sh("echo 9 > '%s'", p); /* newer than the snapshot's, same size */
	o = (rix_restore_options)RIX_RESTORE_OPTIONS_INIT;
	o.overwrite = RIX_OVERWRITE_NEVER;
	MUST(restore(&sum, &e, r, &tree, tgt, &o));
	char *s = read_small(p);
	assert_string_equal(s, "9\n");
	free(s);
	assert_int_equal(sum.files_skipped, 4); /* the files; directories are merged into */
	o.overwrite = RIX_OVERWRITE_IF_NEWER;
	MUST(restore(&sum, &e, r, &tree, tgt, &o));
	s = read_small(p);
	assert_string_equal(s, "9\n");
	free(s);
	o.overwrite = RIX_OVERWRITE_IF_CHANGED; /* another mtime: rewritten */
	MUST(restore(&sum, &e, r, &tree, tgt, &o));
	s = read_small(p);
	assert_string_equal(s, "1\n");
	free(s);
	rix_test_sh("echo 8 > '%s' && touch -r '%s/d/e/keep.txt' '%s'", p, src, p); /* same size and mtime */
	MUST(restore(&sum, &e, r, &tree, tgt, &o));
	s = read_small(p);
	assert_string_equal(s, "8\n");
	free(s);
	o.overwrite = RIX_OVERWRITE_ALWAYS;
	MUST(restore(&sum, &e, r, &tree, tgt, &o));
	s = read_small(p);
	assert_string_equal(s, "1\n");
	free(s);

	/* delete: what the snapshot lacks goes, what it has stays */
	rix_test_sh("cd '%s' && mkdir -p extra/sub && echo e > extra/sub/f && echo e > d/e/extra.txt && ln -s / x/link", tgt);
	o = (rix_restore_options)RIX_RESTORE_OPTIONS_INIT;
	o.delete_extra = true;
	o.dry_run = true; /* the same three listed at every depth, nothing removed */
	MUST(restore(&sum, &e, r, &tree, tgt, &o));
	assert_int_equal(sum.files_deleted, 3);
	assert_true(exists(tgt, "extra/sub/f") && exists(tgt, "d/e/extra.txt") && exists(tgt, "x/link"));
	o.dry_run = false;
	MUST(restore(&sum, &e, r, &tree, tgt, &o));
	assert_int_equal(sum.files_deleted, 3);
	assert_false(exists(tgt, "extra") || exists(tgt, "d/e/extra.txt") || exists(tgt, "x/link"));
	assert_int_equal(rix_test_compare_trees(src, tgt, 0), 0);
	/* bad options */
	o = (rix_restore_options)RIX_RESTORE_OPTIONS_INIT;
	o.version = 99;
	assert_int_equal(restore(&sum, &e, r, &tree, tgt, &o), RIX_EINVAL);
	o = (rix_restore_options)RIX_RESTORE_OPTIONS_INIT;
	o.overwrite = (rix_restore_overwrite)7;
	assert_int_equal(restore(&sum, &e, r, &tree, tgt, &o), RIX_EINVAL);
	rix_repo_free(r);
	rix_test_free_dir(work);
}

/* Allocation N failing, for every N: rix_restore returns 0 or RIX_ENOMEM, leaks nothing, and a
 * restore after it is whole. */
struct oom {
	rix_repo *r;
	rix_id tree;
	char src[4300], tgt[4300];
};

static void oom_setup(void *arg)
{
	struct oom *o = arg;
	rix_test_rmtree(o->tgt);
}

static int oom_run(void *arg)
{
	struct oom *o = arg;
	rix_restore_options ro = RIX_RESTORE_OPTIONS_INIT;
	ro.workers = 2;
	return rix_restore(NULL, o->r, &o->tree, o->tgt, &ro);
}

static void test_oom(void **state)
{
	(void)state;
	char *work = rix_test_new_dir("rix-restore-oom");
	struct oom o;
	char repo[4300];
	snprintf(o.src, sizeof(o.src), "%s/src", work);
	snprintf(o.tgt, sizeof(o.tgt), "%s/target", work);
	rix_test_sh("cd '%s' && mkdir -p src/d/e && head -c 300000 /dev/urandom > src/d/big && echo 1 > src/d/e/f && "
	   "ln src/d/e/f src/hard && ln -s d src/link && mkfifo src/p",
	   work);
	o.r = new_repo(work, "repo", repo, sizeof(repo));
	backup_dir(&o.tree, o.r, o.src);
	MUST(rix_repo_flush(o.r));
	rix_test_oom oo = { .what = "restore", .run = oom_run, .arg = &o, .max = 2000, .setup = oom_setup,
			    .live = RIX_TEST_OOM_LIVE_UNCHECKED }; /* the repository keeps codecs and buffers: ASan finds leaks */
	rix_test_oom_run(&oo);
	rix_test_rmtree(o.tgt);
	MUST(oom_run(&o));
	assert_int_equal(rix_test_compare_trees(o.src, o.tgt, 0), 0);
	rix_repo_free(o.r);
	rix_test_free_dir(work);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_patterns),       cmocka_unit_test(test_patterns_compiled),
		cmocka_unit_test(test_pack_blobs),     cmocka_unit_test(test_roundtrip),
		cmocka_unit_test(test_find_dir),       cmocka_unit_test(test_batches),        cmocka_unit_test(test_deep),
		cmocka_unit_test(test_hostile_names),  cmocka_unit_test(test_path_limit),
		 cmocka_unit_test(test_symlink_escape), cmocka_unit_test(test_symlink_during),
		cmocka_unit_test(test_swapped_file),   cmocka_unit_test(test_shared_offset),
		cmocka_unit_test(test_bad_file_nodes), cmocka_unit_test(test_many_files),
		cmocka_unit_test(test_create_fails),
		cmocka_unit_test(test_many_blobs),     cmocka_unit_test(test_missing_pack),   cmocka_unit_test(test_full_target),    cmocka_unit_test(test_options),        cmocka_unit_test(test_oom),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
