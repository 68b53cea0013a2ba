/*
 * tests/test_cli_browse.c — rix ls, diff and dump beside restic 0.14 on the same snapshots (made
 * by restic and by rix), output compared byte for byte, exit codes too:
 *   test_ls     ls, -l, --json, DIR arguments with and without --recursive, latest with --host,
 *               a snapshot that does not exist, a relative DIR, no snapshot
 *   test_diff   + - M T U lines and the statistics, --metadata, --json, -q, both directions,
 *               restic-made against rix-made; an unknown snapshot, one argument
 *   test_dump   every file's bytes equal to the source; the tar of /, of a directory, of the
 *               snapshot's top: byte-equal to restic's (so `tar tvf` lists the same entries,
 *               also compared); zips byte-equal to restic's; a path not found, of the wrong
 *               kind (exit 2 as restic)
 *   test_find   patterns across snapshots (-s in a given order), --json, -l, -i, --oldest and
 *               --newest, --blob (whole and 8-digit IDs: the files using a blob) and --tree
 *   test_find_pack  --pack (whole and 8-digit IDs), --json, packs not found, a pack missing from
 *               the repository (from the index, restic's warning), --show-pack-id (sorted: restic's
 *               order is a Go map's)
 *   test_locks  an exclusive lock held: diff, dump and find stop (exit 11), ls runs (restic 0.14's
 *               ls takes no lock); --no-lock runs them all
 *   test_deep   a snapshot 3000 directories deep (made with librix): ls --recursive, find, diff
 *               and the tar and zip of dump equal to restic's (no recursion limit, PAX paths of
 *               6000 bytes)
 *   test_bad_tree  a directory without a subtree: find and ls stop with restic's error (exit 1);
 *               ls --json of a snapshot with no paths, program_version and an unknown member
 *   test_prefixes  (last: it adds snapshots) an ID prefix of two snapshots: ls skips it (exit 0),
 *               diff and dump fail (exit 1), find searches nothing, as restic; rix says why
 * The source has every kind of entry, names restic quotes and tar cannot hold in USTAR (long,
 * non-ASCII, invalid UTF-8), a long symlink target, extended attributes, 40 levels of nesting.
 * Times show in a zone that is not UTC (TZ), as both tools print local times. The repository is
 * librix's (restic 0.14 reads it) with a cheap key derivation.
 */
#include <ctype.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>
#include <cmocka.h>

#include "rix/rix.h"
#include "repo_fixture.h"
#include "testutil.h"

struct fx {
	char *work;
	char repo[4200], src[4200];
	char s1[9], s2[9], s3[9]; /* restic's backup, restic's after the changes, rix's of the same */
};

/* What a shell command (printf-style) that must exit 0 prints: width characters and a newline,
 * into out[0..width] (NUL-terminated). */
static void printed(char *out, size_t width, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void printed(char *out, size_t width, const char *fmt, ...)
{
	char *o;
	size_t n;
	va_list ap;
	va_start(ap, fmt);
	int rc = rix_test_vrun(&o, &n, fmt, ap);
	va_end(ap);
	assert_int_equal(rc, 0);
	assert_int_equal(n, width + 1);
	memcpy(out, o, width);
	out[width] = '\0';
	free(o);
}

/* The short ID of the latest snapshot (restic snapshots --json, the last line's). */
static void latest_id(const struct fx *f, char out[9])
{
	printed(out, 8,
		"RESTIC_PASSWORD='%s' restic --no-cache -r '%s' snapshots --json --latest 1 "
		"| python3 -c 'import json,sys; print(max(json.load(sys.stdin), key=lambda s: s[\"time\"])[\"short_id\"])'",
		PW, f->repo);
}

static int setup(void **state)
{
	rix_test_need_restic();
	setenv("TZ", "America/New_York", 1);
	struct fx *f = calloc(1, sizeof(*f));
	assert_non_null(f);
	f->work = rix_test_new_dir("rix-cli-browse");
	snprintf(f->repo, sizeof(f->repo), "%s/repo", f->work);
	snprintf(f->src, sizeof(f->src), "%s/src", f->work);
	char longname[160], longlink[300];
	memset(longname, 'L', 150);
	longname[150] = '\0';
	memset(longlink, 't', 250);
	longlink[250] = '\0';
	rix_test_sh("cd '%s' && mkdir -p src/dir/sub src/links src/gone/inner src/deep && cd src && "
	   "head -c 3000000 /dev/urandom > big && head -c 5000 /dev/urandom > dir/mid && echo hello > dir/sub/small && "
	   ": > empty && echo typed > was-file && mkdir was-dir && echo in > was-dir/x && echo bye > gone/inner/f && "
	   "ln -s ../big links/rel && ln -s /etc/passwd links/abs && ln -s '%s' links/long && ln dir/sub/small links/hard && "
	   "mkfifo fifo && printf x > \"$(printf 'odd name\\twith tab')\" && printf y > \"$(printf 'caf\\303\\251')\" && "
	   "printf z > \"$(printf 'bad\\377utf8')\" && printf q > 'quo\"te <&>' && "
	   "mkdir -p dir/%s/%s && echo far > dir/%s/%s/end && "
	   "d=deep; for i in $(seq 40); do d=$d/level$i; done; mkdir -p $d && echo bottom > $d/f && "
	   "chmod 4755 big && chmod 1777 links && chmod 2750 dir/sub && touch -d '2003-04-05 06:07:08.6' dir/sub/small",
	   f->work, longlink, longname, longname, longname, longname);
	char p[4400];
	snprintf(p, sizeof(p), "%s/dir/mid", f->src);
	assert_int_equal(setxattr(p, "user.colour", "blue", 4, 0), 0);
	/* made by librix with a cheap key derivation (repo_fixture.c): restic reads its parameters
	 * from the key file, so neither tool spends half a second on scrypt each run */
	assert_int_equal(mkdir(f->repo, 0700), 0);
	rix_repo_free(init_repo(f->repo, 2));
	rix_test_sh("cd '%s' && RESTIC_PASSWORD='%s' restic --no-cache -r repo backup -q --host hostA src", f->work, PW);
	latest_id(f, f->s1);
	/* added, removed, changed content, changed metadata, changed type */
	rix_test_sh("cd '%s/src' && echo new > dir/added && mkdir -p newdir/a && echo n > newdir/a/b && rm -r gone && rm empty && "
	   "echo changed >> dir/mid && chmod 600 dir/sub/small && touch -d '2010-01-01' links && "
	   "rm was-file && ln -s big was-file && rm -r was-dir && echo now-a-file > was-dir",
	   f->work);
	sleep(1);
	rix_test_sh("cd '%s' && RESTIC_PASSWORD='%s' restic --no-cache -r repo backup -q --host hostB src", f->work, PW);
	latest_id(f, f->s2);
	sleep(1);
	rix_test_sh("cd '%s' && RIX_PASSWORD='%s' '%s' -r repo backup -q --host hostC src", f->work, PW, RIX_CLI_PATH);
	latest_id(f, f->s3);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	if (getenv("RIX_TEST_KEEP") != NULL) /* to look at afterwards */
		free(f->work);
	else
		rix_test_free_dir(f->work);
	free(f);
	return 0;
}

/*
 * `restic ARGS` and `rix ARGS` on repository repo (in the work directory): the same standard
 * output, byte for byte (sorted: line by line after sorting both, where restic's order is a Go
 * map's), and the same exit status (want, when >= 0); nothing from a sanitizer on rix's standard
 * error. The outputs are left in work/restic.out, work/rix.out (unsorted), the errors in
 * work/restic.err, work/rix.err.
 */
static void vsame(const struct fx *f, const char *repo, bool sorted, int want, const char *fmt, va_list ap)
{
	char args[4096];
	vsnprintf(args, sizeof(args), fmt, ap);
	const char *sort = sorted ? " | LC_ALL=C sort" : "";
	char *a, *b;
	size_t la, lb;
	int ra = rix_test_run(&a, &la, "cd '%s' && RESTIC_PASSWORD='%s' restic --no-cache -r %s %s >restic.out 2>restic.err; rc=$?; cat restic.out%s; exit $rc",
			      f->work, PW, repo, args, sort);
	int rb = rix_test_run(&b, &lb, "cd '%s' && RIX_PASSWORD='%s' '%s' -r %s %s >rix.out 2>rix.err; rc=$?; cat rix.out%s; exit $rc",
			      f->work, PW, RIX_CLI_PATH, repo, args, sort);
	if (la != lb || memcmp(a, b, la) != 0) {
		rix_test_run(NULL, NULL, "cd '%s' && diff restic.out rix.out | head -40 >&2; cat restic.err rix.err >&2", f->work);
		fail_msg("rix %s: output differs from restic's (%zu and %zu bytes)", args, lb, la);
	}
	if (ra != rb)
		fail_msg("rix %s: exit %d, restic %d", args, rb, ra);
	/* under ASan/UBSan a leak or undefined behaviour shows on stderr only (ASan exits 1, as an error does) */
	char *err;
	assert_int_equal(rix_test_run(&err, NULL, "cat '%s/rix.err'", f->work), 0);
	if (strstr(err, "Sanitizer") != NULL || strstr(err, "runtime error:") != NULL)
		fail_msg("rix %s: %s", args, err);
	free(err);
	if (want >= 0 && ra != want)
		fail_msg("%s: exit %d, expected %d", args, ra, want);
	free(a);
	free(b);
}

static void same(const struct fx *f, int want, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void same(const struct fx *f, int want, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsame(f, "repo", false, want, fmt, ap);
	va_end(ap);
}

/* same() on another repository of the work directory; sorted: the lines compared as sets. */
static void same_in(const struct fx *f, const char *repo, bool sorted, int want, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
static void same_in(const struct fx *f, const char *repo, bool sorted, int want, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsame(f, repo, sorted, want, fmt, ap);
	va_end(ap);
}

static void test_ls(void **state)
{
	const struct fx *f = *state;
	const char *const snaps[] = { f->s1, f->s3 };
	for (int i = 0; i < 2; i++) {
		same(f, 0, "ls -l %s", snaps[i]);
		same(f, 0, "ls --json %s", snaps[i]);
		same(f, 0, "ls -l --recursive %s /src/dir /src/deep/level1/level2", snaps[i]);
	}
	same(f, 0, "ls %s", f->s2);
	same(f, 0, "ls %s /src/dir /src/links/", f->s1);
	same(f, 0, "ls --json --recursive %s /src/links", f->s3);
	same(f, 0, "ls --host hostA latest");
	same(f, 0, "ls -l --host hostB --path '%s' latest /src", f->src);
	same(f, 0, "ls %s /src/nothing/../dir/sub/", f->s1);
	/* errors: a snapshot that is not there is skipped (restic 0.14: exit 0), a relative DIR, none */
	same(f, 0, "ls 00000000");
	same(f, 1, "ls %s src/dir", f->s1);
	same(f, 1, "ls");
	char *err;
	size_t n;
	rix_test_run(NULL, NULL, "cd '%s' && RIX_PASSWORD='%s' '%s' -r repo ls 00000000 2>ls.err", f->work, PW, RIX_CLI_PATH);
	assert_int_equal(rix_test_run(&err, &n, "cat '%s/ls.err'", f->work), 0);
	assert_non_null(strstr(err, "no matching ID found for prefix \"00000000\""));
	free(err);
}

static void test_diff(void **state)
{
	const struct fx *f = *state;
	/* restic's before and after, both ways; restic's against rix's of the same files */
	same(f, 0, "diff %s %s", f->s1, f->s2);
	same(f, 0, "diff --metadata %s %s", f->s1, f->s2);
	same(f, 0, "diff --json %s %s", f->s2, f->s1);
	same(f, 0, "diff --metadata %s %s", f->s2, f->s3);
	same(f, 0, "diff --json --metadata %s %s", f->s3, f->s1);
	same(f, 0, "diff -q %s %s", f->s1, f->s2);
	/* the changes made show: + - M T U */
	char *o;
	size_t n;
	assert_int_equal(rix_test_run(&o, &n, "cd '%s' && RIX_PASSWORD='%s' '%s' -r repo diff --metadata %s %s", f->work, PW,
				      RIX_CLI_PATH, f->s1, f->s2),
			 0);
	const char *want[] = { "+    /src/dir/added\n", "-    /src/gone/\n", "-    /src/gone/inner/f\n", "M    /src/dir/mid\n",
			       "U    /src/dir/sub/small\n", "TU   /src/was-file\n", "TU   /src/was-dir\n", "-    /src/empty\n",
			       "+    /src/newdir/a/b\n", "Files:           2 new,     2 removed,     1 changed\n" };
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		if (strstr(o, want[i]) == NULL)
			fail_msg("diff lacks %s in:\n%s", want[i], o);
	free(o);
	same(f, 1, "diff %s 00000000", f->s1);
	same(f, 1, "diff %s", f->s1);
}

static void test_dump(void **state)
{
	const struct fx *f = *state;
	/* every file of the latest (rix's) snapshot: its bytes equal the source's */
	const char *files[] = { "big", "dir/mid", "dir/sub/small", "dir/added", "was-dir", "caf\xc3\xa9", "bad\xffutf8",
				"odd name\twith tab", "quo\"te <&>", "links/hard" };
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		assert_int_equal(rix_test_run(NULL, NULL, "cd '%s' && RIX_PASSWORD='%s' '%s' -r repo dump %s '/src/%s' > dumped && cmp dumped 'src/%s'",
					      f->work, PW, RIX_CLI_PATH, f->s3, files[i], files[i]),
				 0);
	}
	same(f, 0, "dump %s /src/dir/mid", f->s1);
	/* tars: byte for byte, and their listings */
	const char *const snaps[] = { f->s1, f->s2, f->s3 };
	for (int i = 0; i < 3; i++) {
		same(f, 0, "dump %s /", snaps[i]);
		assert_int_equal(rix_test_run(NULL, NULL, "cd '%s' && tar tvf rix.out > rix.list && tar tvf restic.out > restic.list && "
							  "cmp rix.list restic.list && grep -q 'src/links/long -> tttt' rix.list && "
							  "grep -q 'L/end' rix.list",
					      f->work),
				 0);
	}
	same(f, 0, "dump %s /src/dir", f->s1);
	/* zip, as restic 0.14 writes it; Python's zipfile reads it, every CRC right */
	same(f, 0, "dump --archive zip %s /", f->s1);
	same(f, 0, "dump -a zip %s /src", f->s3);
	assert_int_equal(rix_test_run(NULL, NULL, "cd '%s' && python3 -c 'import zipfile; z = zipfile.ZipFile(\"rix.out\"); "
					      "assert z.testzip() is None and \"src/links/long\" in z.namelist()'",
				      f->work),
			 0);
	same(f, 0, "dump %s src/deep/", f->s3);
	same(f, 0, "dump --host hostA latest /src/links");
	/* restic's errors and exit codes */
	same(f, 2, "dump %s /src/nothing", f->s1);
	same(f, 2, "dump %s /src/big/x", f->s1);
	same(f, 2, "dump %s /src/fifo", f->s1);
	same(f, 1, "dump 00000000 /src");
	same(f, 1, "dump %s", f->s1);
	same(f, 1, "dump --archive rar %s /src", f->s1);
}

/*
 * The ID under path ("src/dir/sub/small") in snapshot snap: a file's first content blob, or a
 * directory's subtree, read with restic cat.
 */
static void node_id(const struct fx *f, const char *snap, const char *path, char out[65])
{
	printed(out, 64,
		"cd '%s' && export RESTIC_PASSWORD='%s' && python3 -c '\n"
		"import json, subprocess, sys\n"
		"def cat(*a): return json.loads(subprocess.check_output([\"restic\", \"--no-cache\", \"-r\", \"repo\", \"cat\"] + list(a)))\n"
		"t = cat(\"snapshot\", sys.argv[1])[\"tree\"]\n"
		"for c in sys.argv[2].split(\"/\"):\n"
		"    nd = [x for x in cat(\"blob\", t)[\"nodes\"] if x[\"name\"] == c][0]\n"
		"    t = nd.get(\"subtree\") or nd[\"content\"][0]\n"
		"print(t)' %s %s",
		f->work, PW, snap, path);
}

static void test_find(void **state)
{
	const struct fx *f = *state;
	same(f, 0, "find -s %s -s %s -s %s small", f->s1, f->s2, f->s3);
	same(f, 0, "find -s %s -s %s --json 'l*'", f->s3, f->s1);
	same(f, 0, "find -s %s -l '*'", f->s2);
	same(f, 0, "find -s %s -s %s -i 'CAF*' /src/DIR", f->s1, f->s3);
	same(f, 0, "find -s %s -s %s '/src/dir/L*' 'end'", f->s2, f->s1);
	same(f, 0, "find -s %s -s %s --oldest 2003-04-05 --newest '2003-04-06 00:00' '*'", f->s1, f->s3);
	same(f, 0, "find -s %s --json nothing-matches", f->s1);
	char blob[65], tree[65];
	node_id(f, f->s1, "src/dir/sub/small", blob);
	node_id(f, f->s3, "src/deep/level1", tree);
	same(f, 0, "find -s %s -s %s -s %s --blob %s", f->s1, f->s2, f->s3, blob);
	same(f, 0, "find -s %s -s %s --json --blob %.8s", f->s3, f->s1, blob);
	same(f, 0, "find -s %s -s %s --json --tree %.8s", f->s1, f->s3, tree);
	/* the blob is found in every snapshot, in both files that hold it */
	char *o;
	size_t n;
	assert_int_equal(rix_test_run(&o, &n, "cd '%s' && RIX_PASSWORD='%s' '%s' -r repo find --blob %s",
				      f->work, PW, RIX_CLI_PATH, blob),
			 0);
	assert_non_null(strstr(o, " ... in file /src/links/hard\n"));
	assert_non_null(strstr(o, " ... in file /src/dir/sub/small\n"));
	free(o);
	same(f, 1, "find");
}


/* rix's standard error of the last same() holds want. */
static void rix_said(const struct fx *f, const char *want)
{
	char *o;
	size_t n;
	assert_int_equal(rix_test_run(&o, &n, "cat '%s/rix.err'", f->work), 0);
	if (strstr(o, want) == NULL)
		fail_msg("rix said \"%s\", not \"%s\"", o, want);
	free(o);
}

/* Both tools' standard error of the last same() hold want. */
static void both_said(const struct fx *f, const char *want)
{
	rix_said(f, want);
	char *o;
	assert_int_equal(rix_test_run(&o, NULL, "cat '%s/restic.err'", f->work), 0);
	if (strstr(o, want) == NULL)
		fail_msg("restic said \"%s\", not \"%s\"", o, want);
	free(o);
}

/* The pack that holds blob id (rix find-blob's answer), whole. */
static void pack_of(const struct fx *f, const char *id, char out[65])
{
	printed(out, 64, "cd '%s' && RIX_PASSWORD='%s' '%s' -r repo find-blob %s | awk '{print $5}' | tr -d ,", f->work, PW,
		RIX_CLI_PATH, id);
}

/*
 * find --pack: the files using the blobs of packs named whole or by 8 digits (a pack of trees:
 * none), --json; packs not found (restic's error, exit 1), --pack with --blob; --show-pack-id
 * with --blob (whole, short, -i, IDs that do not parse, the null ID), --tree and --pack (restic
 * prints in its map's order: compared line by line, sorted); a pack missing from the repository
 * but in the index: its blobs from the index, restic's warning on both sides.
 */
static void test_find_pack(void **state)
{
	const struct fx *f = *state;
	char blob[65], big[65], tree[65], dpack[65], bpack[65], tpack[65];
	node_id(f, f->s1, "src/dir/sub/small", blob);
	node_id(f, f->s1, "src/big", big);
	node_id(f, f->s3, "src/deep/level1", tree);
	pack_of(f, blob, dpack);
	pack_of(f, big, bpack);
	pack_of(f, tree, tpack);
	same(f, 0, "find -s %s -s %s -s %s --pack %s", f->s1, f->s2, f->s3, dpack);
	same(f, 0, "find -s %s -s %s --json --pack %.8s %s", f->s3, f->s1, dpack, bpack);
	same(f, 0, "find -s %s -s %s --pack %.8s %.8s %s", f->s1, f->s2, dpack, dpack, dpack);
	same(f, 0, "find -s %s --pack %s", f->s1, tpack);
	same(f, 0, "find -s %s --json --pack %s", f->s1, tpack);
	same(f, 1, "find -s %s --pack %s zzz 12345678", f->s1, dpack);
	rix_said(f, "unable to find pack(s): [12345678 zzz]");
	same(f, 1, "find --pack --blob %s", dpack);
	rix_said(f, "cannot have several ID types");
	char upper[65];
	for (int i = 0; i < 65; i++)
		upper[i] = (char)toupper((unsigned char)blob[i]);
	same_in(f, "repo", true, 0, "find -s %s --show-pack-id --blob %s %.8s abc xyz1 %064d", f->s1, blob, big, 0);
	same_in(f, "repo", true, 0, "find -s %s -s %s -i --show-pack-id --blob %.8s", f->s1, f->s3, upper);
	same_in(f, "repo", true, 0, "find -s %s --json --show-pack-id --tree %.8s %s", f->s3, tree, tree);
	same_in(f, "repo", true, 0, "find -s %s --show-pack-id --pack %.8s", f->s1, dpack);
	same_in(f, "repo", true, 0, "find -s %s --show-pack-id --pack %s", f->s3, tpack);
	same(f, 0, "find -s %s --show-pack-id small", f->s1); /* not with a pattern */

	/* a copy without the pack of small's blob */
	rix_test_sh("cd '%s' && rm -rf gone && cp -a repo gone && rm gone/data/*/%s", f->work, dpack);
	char warning[256];
	snprintf(warning, sizeof(warning),
		 "some pack files are missing from the repository, getting their blobs from the repository index: [%s]\n\n", dpack);
	same_in(f, "gone", false, 0, "find -s %s -s %s --pack %.8s", f->s1, f->s3, dpack);
	both_said(f, warning);
	same_in(f, "gone", false, 0, "find -s %s --json --pack %s", f->s2, dpack);
	both_said(f, warning);
	char missing[64];
	snprintf(missing, sizeof(missing), "unable to find pack(s): [%.8s nope]", dpack);
	same_in(f, "gone", false, 1, "find -s %s --pack %.8s %s nope", f->s1, dpack, dpack);
	both_said(f, warning);
	both_said(f, missing);
	rix_test_sh("rm -rf '%s/gone'", f->work);
}

/* `rix -r repo <args>` in the work directory, stdout dropped, stderr into rix.err; its status. */
#define rix_exit(f, ...)                                                                                   \
	rix_test_tool(NULL, NULL, (f)->work, "RIX_PASSWORD='" PW "' '" RIX_CLI_PATH "'", "repo", " >/dev/null 2>rix.err", \
		      __VA_ARGS__)

static void test_locks(void **state)
{
	const struct fx *f = *state;
	rix_repo *r = open_repo(f->repo, NULL);
	rix_lock *l;
	MUST(rix_lock_acquire(&l, r, true));
	assert_int_equal(rix_exit(f, "diff %s %s", f->s1, f->s2), 11);
	rix_said(f, "locked exclusively");
	assert_int_equal(rix_exit(f, "dump %s /src/big", f->s1), 11);
	assert_int_equal(rix_exit(f, "find -s %s big", f->s1), 11);
	assert_int_equal(rix_exit(f, "ls %s", f->s1), 0);
	assert_int_equal(rix_exit(f, "--no-lock diff %s %s", f->s1, f->s2), 0);
	assert_int_equal(rix_exit(f, "dump --no-lock %s /src/big", f->s1), 0);
	assert_int_equal(rix_exit(f, "find --no-lock -s %s big", f->s1), 0);
	assert_int_equal(rix_lock_free(l), 0);
	rix_repo_free(r);
}

/* A node of the deep chain: a directory "d" over sub, or the file "f" of blob. */
static void save_one(rix_id *id, rix_repo *r, const rix_id *sub, const rix_id *blob)
{
	rix_node n = { .name = sub ? "d" : "f", .name_len = 1, .type = sub ? RIX_NODE_DIR : RIX_NODE_FILE };
	n.mode = sub ? (RIX_GOMODE_DIR | 0755) : 0644;
	n.mtime = n.atime = n.ctime = (rix_time){ .sec = 1600000000, .nsec = 123456789, .utc_offset = 3600 };
	n.subtree = sub;
	if (blob != NULL) {
		n.content = blob;
		n.content_len = 1;
		n.size = 7;
	}
	store_tree(id, r, &n, 1);
}

/*
 * A snapshot of tree (its index flushed), written to r: the first 8 digits of its ID. paths: its
 * "paths" member, JSON; more: members after "hostname" (",\"k\":v", or "").
 */
static void snapshot_of(char out[9], rix_repo *r, const rix_id *tree, const char *paths, const char *more)
{
	char hex[65], json[512];
	rix_id_to_hex(hex, tree);
	snprintf(json, sizeof(json), "{\"time\":\"2021-02-03T04:05:06.5+01:00\",\"tree\":\"%s\",\"paths\":%s,\"hostname\":\"deep\"%s}",
		 hex, paths, more);
	rix_snapshot *sn;
	MUST(rix_snapshot_decode(&sn, (const uint8_t *)json, strlen(json)));
	rix_id sid;
	MUST(rix_snapshot_write(&sid, r, sn));
	rix_snapshot_free(sn);
	rix_id_to_hex(hex, &sid);
	snprintf(out, 9, "%.8s", hex);
}

static void test_deep(void **state)
{
	const struct fx *f = *state;
	enum { DEPTH = 3000 };
	rix_repo *r = open_repo(f->repo, NULL);
	MUST(rix_repo_load_index(NULL, r, NULL, NULL));
	rix_id blob, id;
	MUST(rix_repo_save_blob(&blob, NULL, r, RIX_BLOB_DATA, "bottom\n", 7));
	save_one(&id, r, NULL, &blob);
	for (int i = 0; i < DEPTH; i++) {
		rix_id sub = id;
		save_one(&id, r, &sub, NULL);
	}
	MUST(rix_repo_flush(r));
	char hex[9];
	snapshot_of(hex, r, &id, "[\"/deep\"]", "");
	rix_repo_free(r);
	if (getenv("RIX_TEST_KEEP") != NULL)
		fprintf(stderr, "deep snapshot %s in %s\n", hex, f->work);
	same(f, 0, "ls -l %s", hex); /* not with a DIR: restic's HasPathPrefix makes that cubic (40 s) */
	same(f, 0, "ls --json %s", hex);
	same(f, 0, "find -s %s --json f", hex);
	same(f, 0, "diff %s %s", f->s1, hex);
	same(f, 0, "dump %s /", hex);
	same(f, 0, "dump -a zip %s /d/d/d", hex);
}

/*
 * A directory without a subtree (hand-made JSON: the encoder writes none) beside a file: ls and
 * find stop with restic's error (exit 1), nothing leaked on the way out (under ASan).
 */
static void test_bad_tree(void **state)
{
	const struct fx *f = *state;
	rix_repo *r = open_repo(f->repo, NULL);
	MUST(rix_repo_load_index(NULL, r, NULL, NULL));
	rix_id leaf, root;
	rix_node n = { .name = "x", .name_len = 1, .type = RIX_NODE_FILE, .mode = 0644 };
	store_tree(&leaf, r, &n, 1);
	char hex[65], json[1024];
	rix_id_to_hex(hex, &leaf);
	snprintf(json, sizeof(json),
		 "{\"nodes\":[{\"name\":\"a\",\"type\":\"dir\",\"mode\":2147484141,\"mtime\":\"2020-01-01T00:00:00Z\","
		 "\"atime\":\"2020-01-01T00:00:00Z\",\"ctime\":\"2020-01-01T00:00:00Z\",\"uid\":0,\"gid\":0,\"content\":null,"
		 "\"subtree\":\"%s\"},{\"name\":\"nosub\",\"type\":\"dir\",\"mode\":2147484141,"
		 "\"mtime\":\"2020-01-01T00:00:00Z\",\"atime\":\"2020-01-01T00:00:00Z\",\"ctime\":\"2020-01-01T00:00:00Z\","
		 "\"uid\":0,\"gid\":0,\"content\":null}]}\n",
		 hex);
	MUST(rix_repo_save_blob(&root, NULL, r, RIX_BLOB_TREE, json, strlen(json)));
	MUST(rix_repo_flush(r));
	char sn[9];
	snapshot_of(sn, r, &root, "[\"/bad\"]", "");
	/* a snapshot restic 0.14 could not have made: no paths, a later restic's and an unknown member */
	char odd[9];
	snapshot_of(odd, r, &leaf, "[]", ",\"program_version\":\"restic 0.17.0\",\"future\":[1]");
	rix_repo_free(r);
	same(f, 0, "ls --json %s", odd);
	same(f, 1, "find -s %s x", sn);
	rix_said(f, "subtree for node nosub in tree");
	same(f, 1, "find -s %s --json nothing", sn);
	same(f, 1, "ls %s", sn); /* the directory is not listed before the error */
}

static void test_prefixes(void **state)
{
	const struct fx *f = *state;
	/* more snapshots (rix's, of a small directory) until two IDs share their first digit */
	char prefix = 0;
	for (int k = 0; k < 17 && prefix == 0; k++) {
		rix_test_sh("cd '%s/src' && RIX_PASSWORD='%s' '%s' -r ../repo backup -q dir/sub", f->work, PW, RIX_CLI_PATH);
		char names[64][65];
		char dir[4300];
		snprintf(dir, sizeof(dir), "%s/snapshots", f->repo);
		size_t n = rix_test_list_ids(dir, names, 64);
		for (size_t i = 0; i < n && prefix == 0; i++)
			for (size_t j = i + 1; j < n && prefix == 0; j++)
				if (names[i][0] == names[j][0])
					prefix = names[i][0];
	}
	assert_true(prefix != 0);
	same(f, 0, "ls %c", prefix);
	rix_said(f, "multiple IDs with prefix");
	same(f, 1, "diff %c %s", prefix, f->s1);
	rix_said(f, "multiple IDs with prefix");
	same(f, 1, "dump %c /src", prefix);
	rix_said(f, "multiple IDs with prefix");
	same(f, 0, "find --json -s %c small", prefix);
	same(f, 0, "diff %s %s", f->s1, f->s1); /* nothing changed: the counts only */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ls),
		cmocka_unit_test(test_diff),
		cmocka_unit_test(test_dump),
		cmocka_unit_test(test_find),
		cmocka_unit_test(test_find_pack),
		cmocka_unit_test(test_locks),
		cmocka_unit_test(test_deep),
		cmocka_unit_test(test_bad_tree),
		cmocka_unit_test(test_prefixes),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
