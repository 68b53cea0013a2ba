/*
 * tests/test_cli_restore.c — `rix restore` and `rix cat tree` against the real restic 0.14:
 *   test_restic_backup_rix_restore  restic backs up a tree with every kind of entry (a file over
 *                                   8 MiB, empty and sparse files, symlinks, hard links, a FIFO,
 *                                   a device node when root, odd and 255-byte names, nesting 200
 *                                   deep, xattrs); rix restores it: equal to the source in content
 *                                   and metadata (rix_test_compare_trees), sparse with --sparse;
 *                                   SNAPSHOT:PATH, an ID prefix, --host; `rix cat tree` prints the
 *                                   bytes `restic cat blob` prints
 *   test_rix_backup_both_restore    rix backs up the same tree; rix and restic both restore it
 *                                   equal to the source
 *   test_json_and_errors            --json: status and summary lines with restic's fields; a
 *                                   pack removed: exit 1, restic's error messages naming the
 *                                   files, the others restored; a snapshot that does not exist,
 *                                   include with exclude: exit 1
 *   test_terminal_status            the status line on a terminal, not with -q or without one
 *   test_target_and_ids             --target "//", "/.", a symlink to / with --delete and no
 *                                   filter: refused; an ID prefix two snapshots share; SNAPSHOT:PATH
 *                                   missing or a file: exit 1 with the error
 *   test_hardlinks_filtered         hard links with filters that leave out an inode's first path:
 *                                   restic and rix restore the same files, content and link groups
 *   test_as_nobody                  not root: no owners set, a device node an error, the rest restored
 */
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>
#include <cmocka.h>

#include <jansson.h>

#include "rix/rix.h"
#include "testutil.h"

#define PW "restore-pw"

#define RIX "RIX_PASSWORD='" PW "' RESTIC_PASSWORD= '" RIX_CLI_PATH "'"
/* rix and restic on repo (NULL: no -r), the arguments printf-style; stdout into *out (may be
 * NULL); the exit status. rix_in: rix in directory dir. */
#define rix(out, repo, ...) rix_test_tool(out, NULL, NULL, RIX, repo, "", __VA_ARGS__)
#define rix_in(dir, repo, ...) rix_test_tool(NULL, NULL, dir, RIX, repo, "", __VA_ARGS__)
#define RESTIC "RESTIC_PASSWORD='" PW "' restic --no-cache"
#define restic(out, repo, ...) rix_test_tool(out, NULL, NULL, RESTIC, repo, "", __VA_ARGS__)

/* The source tree: every kind of entry restic 0.14 backs up. */
static void make_source(const char *work)
{
	char name255[256];
	memset(name255, 'n', 255);
	name255[255] = '\0';
	rix_test_sh("cd '%s' && mkdir -p src/dir/sub src/links && cd src && "
	   "head -c 9500000 /dev/urandom > big && head -c 100000 /dev/urandom > dir/mid && echo hello > dir/sub/small && "
	   ": > empty && truncate -s 4M sparse && echo tail >> sparse && "
	   "ln -s ../big links/rel && ln -s /etc/passwd links/abs && ln -s dangling links/dangling && "
	   "ln dir/sub/small links/hard1 && ln dir/sub/small links/hard2 && mkfifo fifo && "
	   "printf x > \"$(printf 'odd name\\twith tab')\" && printf y > \"$(printf 'caf\\303\\251')\" && "
	   "printf z > \"$(printf 'bad\\377\\376utf8')\" && printf w > '%s' && "
	   "d=deep; for i in $(seq 200); do d=$d/d; done; mkdir -p $d && echo bottom > $d/f && "
	   "chmod 2755 dir && chmod 0640 dir/mid && chmod 4711 big && chmod 1777 links && "
	   "touch -d '2003-04-05 06:07:08.987654321' dir/sub/small dir/sub && "
	   "touch -h -d '2004-01-01 00:00:00' links/rel",
	   work, name255);
	char p[4300];
	snprintf(p, sizeof(p), "%s/src/dir/mid", work);
	assert_int_equal(setxattr(p, "user.colour", "blue", 4, 0), 0);
	assert_int_equal(setxattr(p, "user.empty", "", 0, 0), 0);
	if (geteuid() == 0) { /* a device node and a foreign owner */
		snprintf(p, sizeof(p), "%s/src/null-dev", work);
		assert_int_equal(mknod(p, S_IFCHR | 0640, makedev(1, 3)), 0);
		snprintf(p, sizeof(p), "%s/src/dir/mid", work);
		assert_int_equal(lchown(p, 1234, 5678), 0);
	}
	/* the changes above moved some directories' mtimes: set them once more */
	rix_test_sh("cd '%s/src' && touch -d '2003-04-05 06:07:08.987654321' dir/sub && touch -d '2002-02-02' dir", work);
}

static int setup(void **state)
{
	rix_test_need_restic();
	char *work = rix_test_new_dir("rix-cli-restore");
	make_source(work);
	*state = work;
	return 0;
}

static int teardown(void **state)
{
	rix_test_free_dir(*state);
	return 0;
}

static void test_restic_backup_rix_restore(void **state)
{
	const char *work = *state;
	char repo[4300], src[4300], out[4300];
	snprintf(repo, sizeof(repo), "%s/repo-restic", work);
	snprintf(src, sizeof(src), "%s/src", work);
	assert_int_equal(restic(NULL, repo, "init"), 0);
	assert_int_equal(restic(NULL, repo, "backup --host hostA '%s'", src), 0);

	/* the whole snapshot: the source's path under the target */
	snprintf(out, sizeof(out), "%s/r1", work);
	assert_int_equal(rix(NULL, repo, "restore latest --target '%s' -q", out), 0);
	char got[8700];
	snprintf(got, sizeof(got), "%s%s", out, src);
	struct stat st;
	if (stat(got, &st) != 0) /* restic 0.14 keeps the last component only */
		snprintf(got, sizeof(got), "%s/src", out);
	assert_int_equal(rix_test_compare_trees(src, got, 0), 0);

	/* SNAPSHOT:PATH with an ID prefix and --sparse: dir's content at the target; holes */
	char *ids;
	assert_int_equal(restic(&ids, repo, "snapshots --json"), 0);
	json_t *arr = json_loads(ids, 0, NULL);
	assert_non_null(arr);
	const char *sid = json_string_value(json_object_get(json_array_get(arr, 0), "short_id"));
	assert_non_null(sid);
	char prefix[16], full[65];
	snprintf(prefix, sizeof(prefix), "%.6s", sid);
	snprintf(full, sizeof(full), "%s", json_string_value(json_object_get(json_array_get(arr, 0), "id")));
	json_decref(arr);
	free(ids);
	/* the path inside the snapshot of the source directory: what `restic ls` shows */
	char *ls;
	assert_int_equal(restic(&ls, repo, "ls latest"), 0);
	char *line = strstr(ls, "/dir\n");
	assert_non_null(line);
	char *start = line;
	while (start > ls && start[-1] != '\n')
		start--;
	char sub[4300];
	snprintf(sub, sizeof(sub), "%.*s", (int)(line + 4 - start), start);
	free(ls);
	snprintf(out, sizeof(out), "%s/r2", work);
	assert_int_equal(rix(NULL, repo, "restore '%s:%s' --target '%s' --sparse --verify -q", prefix, sub, out), 0);
	char srcdir[4400];
	snprintf(srcdir, sizeof(srcdir), "%s/dir", src);
	assert_int_equal(rix_test_compare_trees(srcdir, out, RIX_CMP_NO_LINKS), 0); /* the links outside dir are not there */
	snprintf(out, sizeof(out), "%s/r3", work);
	char parent[4400];
	snprintf(parent, sizeof(parent), "%.*s", (int)(strrchr(sub, '/') - sub), sub);
	assert_int_equal(rix(NULL, repo, "restore 'latest:%s' --host hostA --target '%s' --sparse -q",
			      parent[0] ? parent : "/", out),
			 0);
	assert_int_equal(rix_test_compare_trees(src, out, RIX_CMP_SPARSE), 0); /* src's content at the target */
	/* another host's latest: none */
	snprintf(out, sizeof(out), "%s/r4", work);
	assert_int_equal(rix(NULL, repo, "restore latest --host nohost --target '%s' -q 2>/dev/null", out), 1);

	/* cat tree: the bytes restic's cat blob prints, by ID and by SNAPSHOT:PATH */
	char *tree_json;
	assert_int_equal(rix(&tree_json, repo, "cat tree 'latest:%s'", sub), 0);
	json_t *t = json_loads(tree_json, 0, NULL);
	assert_non_null(t);
	assert_true(json_array_size(json_object_get(t, "nodes")) == 2); /* mid, sub */
	json_decref(t);
	char *snap_json;
	assert_int_equal(restic(&snap_json, repo, "cat snapshot %s", full), 0);
	json_t *sj = json_loads(snap_json, 0, NULL);
	const char *root = json_string_value(json_object_get(sj, "tree"));
	assert_non_null(root);
	char *a, *b;
	assert_int_equal(restic(&a, repo, "cat blob %s", root), 0);
	assert_int_equal(rix(&b, repo, "cat tree %s", root), 0);
	assert_string_equal(a, b);
	free(a);
	free(b);
	json_decref(sj);
	free(snap_json);
	free(tree_json);
}

static void test_rix_backup_both_restore(void **state)
{
	const char *work = *state;
	char repo[4300], src[4300], out[4300];
	snprintf(repo, sizeof(repo), "%s/repo-rix", work);
	snprintf(src, sizeof(src), "%s/src", work);
	assert_int_equal(rix(NULL, repo, "init -q"), 0);
	assert_int_equal(rix_in(src, repo, "backup . -q"), 0);
	snprintf(out, sizeof(out), "%s/rix-out", work);
	assert_int_equal(rix(NULL, repo, "restore latest --target '%s' -q", out), 0);
	assert_int_equal(rix_test_compare_trees(src, out, 0), 0);
	snprintf(out, sizeof(out), "%s/restic-out", work);
	assert_int_equal(restic(NULL, repo, "restore latest --target '%s'", out), 0);
	/* restic 0.14 restores no directory mtime when a hard link is made in it later: not compared */
	assert_int_equal(rix_test_compare_trees(src, out, RIX_CMP_NO_DIR_MTIME), 0);
}

static void test_json_and_errors(void **state)
{
	const char *work = *state;
	char repo[4300], src[4300], out[4300];
	snprintf(repo, sizeof(repo), "%s/repo-json", work);
	snprintf(src, sizeof(src), "%s/src", work);
	assert_int_equal(rix(NULL, repo, "init -q"), 0);
	assert_int_equal(rix_in(src, repo, "backup . -q"), 0);
	snprintf(out, sizeof(out), "%s/json-out", work);
	char *o;
	assert_int_equal(rix(&o, repo, "restore latest --target '%s' --json", out), 0);
	/* every line JSON; the last the summary with restic's fields */
	json_t *last = NULL;
	int status = 0;
	for (char *save = NULL, *l = strtok_r(o, "\n", &save); l != NULL; l = strtok_r(NULL, "\n", &save)) {
		json_t *j = json_loads(l, 0, NULL);
		assert_non_null(j);
		const char *mt = json_string_value(json_object_get(j, "message_type"));
		assert_non_null(mt);
		if (strcmp(mt, "status") == 0) {
			status++;
			assert_true(json_is_number(json_object_get(j, "percent_done")));
		}
		json_decref(last);
		last = j;
	}
	free(o);
	assert_string_equal(json_string_value(json_object_get(last, "message_type")), "summary");
	uint64_t files = (uint64_t)json_integer_value(json_object_get(last, "total_files"));
	assert_true(files > 200);
	assert_int_equal(json_integer_value(json_object_get(last, "files_restored")), (json_int_t)files);
	assert_true(json_integer_value(json_object_get(last, "total_bytes")) > 9500000);
	/* hard links count once */
	assert_int_equal(json_integer_value(json_object_get(last, "bytes_restored")),
			 json_integer_value(json_object_get(last, "total_bytes")));
	json_decref(last);
	(void)status;

	/* a file added by a second backup (a pack of its own) whose pack is then removed: it is
	 * reported with restic's error message, everything else restored whole */
	rix_test_sh("head -c 50000 /dev/urandom > '%s/zz-late'", src);
	assert_int_equal(rix_in(src, repo, "backup . -q"), 0);
	rix_test_sh("rm '%s/zz-late'", src);
	char *cid;
	assert_int_equal(rix(&cid, repo, "cat tree latest"), 0);
	json_t *t = json_loads(cid, 0, NULL);
	free(cid);
	const char *blob = NULL;
	json_t *nodes = json_object_get(t, "nodes");
	for (size_t i = 0; i < json_array_size(nodes); i++)
		if (strcmp(json_string_value(json_object_get(json_array_get(nodes, i), "name")), "zz-late") == 0)
			blob = json_string_value(json_array_get(json_object_get(json_array_get(nodes, i), "content"), 0));
	assert_non_null(blob);
	char *fb;
	assert_int_equal(rix(&fb, repo, "find-blob %s", blob), 0);
	char *pk = strstr(fb, "pack ");
	assert_non_null(pk);
	char pack[65];
	snprintf(pack, sizeof(pack), "%.64s", pk + 5);
	free(fb);
	json_decref(t);
	rix_test_sh("rm '%s/data/%.2s/%s'", repo, pack, pack);
	snprintf(out, sizeof(out), "%s/damaged-out", work);
	char errfile[4400];
	snprintf(errfile, sizeof(errfile), "%s/err.txt", work);
	assert_int_equal(rix(NULL, repo, "restore latest --target '%s' --json >/dev/null 2>'%s'", out, errfile), 1);
	size_t n;
	char *err = rix_test_read_file(errfile, &n);
	assert_non_null(err);
	assert_non_null(strstr(err, "{\"message_type\":\"error\",\"error\":{\"message\":"));
	assert_non_null(strstr(err, "is missing\"},\"during\":\"restore\",\"item\":\"/zz-late\"}"));
	int lines = 0; /* that error and "There were 1 errors": nothing else failed */
	for (const char *c = err; *c; c++)
		lines += *c == '\n';
	assert_int_equal(lines, 2);
	free(err);
	/* none of its content could be read: it is not made (as restic 0.14, whose first write
	 * makes a file) */
	rix_test_sh("test ! -e '%s/zz-late'", out);
	assert_int_equal(rix_test_compare_trees(src, out, 0), 0);
	/* usage errors */
	assert_int_equal(rix(NULL, repo, "restore ffffffff --target '%s' -q 2>/dev/null", out), 1);
	assert_int_equal(rix(NULL, repo, "restore latest --target '%s' --include a --exclude b 2>/dev/null", out), 1);
	assert_int_equal(rix(NULL, repo, "restore latest 2>/dev/null"), 1);
}

/* On a terminal (script's pty) the status line is drawn and cleared; not with -q, nor when
 * stdout is no terminal. */
static void test_terminal_status(void **state)
{
	const char *work = *state;
	char repo[4300], src[4300], out[4300];
	snprintf(repo, sizeof(repo), "%s/repo-tty", work);
	snprintf(src, sizeof(src), "%s/src", work);
	assert_int_equal(rix(NULL, repo, "init -q"), 0);
	assert_int_equal(rix_in(src, repo, "backup . -q"), 0);
	char *o;
	snprintf(out, sizeof(out), "%s/tty-out1", work);
	assert_int_equal(rix_test_run(&o, &(size_t){ 0 },
				      "RIX_PASSWORD='%s' RIX_PROGRESS_FPS=60 script -qec \"'%s' -r '%s' restore latest --target '%s'\" /dev/null",
				      PW, RIX_CLI_PATH, repo, out),
			 0);
	const char *line = strstr(o, "\033[2K[0:");
	if (line == NULL || strstr(line, " files/dirs ") == NULL || strstr(line, ", total ") == NULL)
		fail_msg("no status line in: %s", o);
	assert_non_null(strstr(o, "Summary: Restored "));
	free(o);
	snprintf(out, sizeof(out), "%s/tty-out2", work);
	assert_int_equal(rix_test_run(&o, &(size_t){ 0 },
				      "RIX_PASSWORD='%s' RIX_PROGRESS_FPS=60 script -qec \"'%s' -r '%s' -q restore latest --target '%s'\" /dev/null",
				      PW, RIX_CLI_PATH, repo, out),
			 0);
	assert_null(strstr(o, "\033[2K"));
	free(o);
	snprintf(out, sizeof(out), "%s/tty-out3", work);
	assert_int_equal(rix(&o, repo, "restore latest --target '%s' -vv 2>&1", out), 0);
	assert_null(strchr(o, '\033'));
	assert_non_null(strstr(o, "\nrestored  /dir/sub/small with size 6 B\n")); /* -vv: restic's item lines */
	assert_non_null(strstr(o, "\nrestored  /dir/sub\n"));
	assert_non_null(strstr(o, "restoring <Snapshot "));
	assert_non_null(strstr(o, "Summary: Restored "));
	free(o);
}

/* The target "/" however spelled, with --delete and no filter: refused before anything is opened
 * (--dry-run: even without the guard nothing would be deleted). An ID prefix two snapshots
 * share: "multiple IDs", exit 1. SNAPSHOT:PATH where PATH is missing or a file: exit 1. */
static void test_target_and_ids(void **state)
{
	const char *work = *state;
	char repo[4300], src[4300], out[4300], link[4300], errfile[4300];
	snprintf(repo, sizeof(repo), "%s/repo-ids", work);
	snprintf(src, sizeof(src), "%s/src-ids", work);
	snprintf(out, sizeof(out), "%s/ids-out", work);
	snprintf(link, sizeof(link), "%s/to-root", work);
	snprintf(errfile, sizeof(errfile), "%s/ids-err", work);
	rix_test_sh("mkdir -p '%s/d' && echo f > '%s/d/f' && ln -s / '%s'", src, src, link);
	assert_int_equal(rix(NULL, repo, "init -q"), 0);
	const char *roots[] = { "//", "/.", "/./", link };
	for (size_t i = 0; i < sizeof(roots) / sizeof(roots[0]); i++) {
		assert_int_equal(rix(NULL, repo, "restore latest --target '%s' --delete --dry-run -q 2>'%s'", roots[i],
				      errfile),
				 1);
		char *err = rix_test_must_read(errfile, &(size_t){ 0 });
		assert_non_null(strstr(err, "must be combined with an include or exclude filter"));
		free(err);
	}
	/* snapshots until two IDs share their first hex digit (at most 17) */
	char prefix[2] = "";
	for (int k = 0; k < 17 && prefix[0] == '\0'; k++) {
		assert_int_equal(rix_in(src, repo, "backup . -q"), 0);
		char *ls;
		assert_int_equal(rix_test_run(&ls, &(size_t){ 0 }, "ls '%s/snapshots' | cut -c1 | sort | uniq -d | head -1", repo), 0);
		prefix[0] = ls[0] != '\n' ? ls[0] : '\0';
		free(ls);
	}
	assert_true(prefix[0] != '\0');
	assert_int_equal(rix(NULL, repo, "restore %s --target '%s' -q 2>'%s'", prefix, out, errfile), 1);
	char *err = rix_test_must_read(errfile, &(size_t){ 0 });
	assert_non_null(strstr(err, "multiple IDs with prefix"));
	free(err);
	/* SNAPSHOT:PATH */
	assert_int_equal(rix(NULL, repo, "restore latest:/nope --target '%s' -q 2>'%s'", out, errfile), 1);
	err = rix_test_must_read(errfile, &(size_t){ 0 });
	assert_non_null(strstr(err, "/nope: not found"));
	free(err);
	assert_int_equal(rix(NULL, repo, "restore latest:/d/f --target '%s' -q 2>'%s'", out, errfile), 1);
	err = rix_test_must_read(errfile, &(size_t){ 0 });
	assert_non_null(strstr(err, "/d/f: not a directory"));
	free(err);
	assert_int_equal(rix(NULL, repo, "restore latest:/d --target '%s' -q", out), 0);
	char f[4400];
	snprintf(f, sizeof(f), "%s/f", out);
	char *c = rix_test_must_read(f, &(size_t){ 0 });
	assert_string_equal(c, "f\n");
	free(c);
}

/* Not root (nobody): no ownership is set (the files are nobody's), a device node is an error
 * naming it, everything else is restored; exit 1. Only when the test runs as root. */
static void test_as_nobody(void **state)
{
	const char *work = *state;
	if (geteuid() != 0) {
		print_message("(not root: skipped)\n");
		return;
	}
	char repo[4300], out[4300], errfile[4300];
	snprintf(repo, sizeof(repo), "%s/repo-restic", work);
	snprintf(out, sizeof(out), "%s/nobody-out", work);
	snprintf(errfile, sizeof(errfile), "%s/nobody-err", work);
	rix_test_sh("chmod a+x '%s' && chmod -R a+rwX '%s' && mkdir '%s' && chown 65534:65534 '%s' && touch '%s' && chmod a+w '%s'", work,
	   repo, out, out, errfile, errfile);
	int rc = rix_test_run(NULL, NULL,
			      "cd / && RIX_PASSWORD='%s' setpriv --reuid=65534 --regid=65534 --clear-groups '%s' -r '%s' restore "
			      "latest --target '%s' -q 2>'%s'",
			      PW, RIX_CLI_PATH, repo, out, errfile);
	size_t n;
	char *err = rix_test_read_file(errfile, &n);
	assert_non_null(err);
	assert_int_equal(rc, 1);
	assert_non_null(strstr(err, "/null-dev: a device node is only restored by root"));
	assert_null(strstr(err, "chown"));
	free(err);
	char *o;
	assert_int_equal(rix_test_run(&o, &n, "find '%s' -name mid -printf '%%u %%s\\n'", out), 0);
	assert_string_equal(o, "nobody 100000\n");
	free(o);
}

/* The files under dir grouped by inode ("[['a/f', 'b/g'], ['c/h']]"): which are hard links of which. */
static char *link_groups(const char *dir)
{
	char *o;
	assert_int_equal(rix_test_run(&o, NULL,
				      "python3 -c 'import os, sys\n"
				      "g = {}\n"
				      "for d, _, fs in os.walk(sys.argv[1]):\n"
				      "    for f in fs:\n"
				      "        p = os.path.join(d, f)\n"
				      "        g.setdefault(os.lstat(p).st_ino, []).append(os.path.relpath(p, sys.argv[1]))\n"
				      "print(sorted(sorted(v) for v in g.values()))' '%s'",
				      dir),
			 0);
	return o;
}

/*
 * Hard links restored with a filter that leaves out the first path of an inode (the one restic's
 * walk meets first): the first path included gets the content, the later included ones become its
 * links, as restic 0.14 restores them. Each filter restored by both tools: the same entries,
 * content, metadata, link counts and link groups (directories' mtimes aside: restic 0.14 sets a
 * directory's before making the hard links in it).
 */
static void test_hardlinks_filtered(void **state)
{
	const char *work = *state;
	char repo[4300], src[4300], a[4300], b[4300];
	snprintf(repo, sizeof(repo), "%s/repo-links", work);
	snprintf(src, sizeof(src), "%s/links-src", work);
	rix_test_sh("mkdir -p '%s' && cd '%s' && mkdir a b c z && head -c 100000 /dev/urandom > a/f && ln a/f b/g && ln a/f c/h && "
		    ": > a/e && ln a/e b/e1 && ln a/e c/e2 && echo two > a/two && ln a/two z/two2 && echo one > a/only && "
		    "head -c 3000 /dev/urandom > b/own && ln b/own c/own2 && touch -d '2001-01-01' a/f a/e a/two",
		    src, src);
	assert_int_equal(restic(NULL, repo, "init"), 0);
	assert_int_equal(rix_test_tool(NULL, NULL, src, RESTIC, repo, "", "backup -q ."), 0);
	const char *filters[] = {
		"--exclude /a/f", "--exclude /a", "--include /c", "--include /b --include /c", "--include /c/h",
		"--include '/[bc]/*'", "--exclude '/a/*' --exclude /b/g", "--iinclude /C", "--iexclude /A/F --iexclude /B",
		"--include /z --include /a/e --include /c/e2",
	};
	for (size_t i = 0; i < sizeof(filters) / sizeof(filters[0]); i++) {
		snprintf(a, sizeof(a), "%s/links-restic-%zu", work, i);
		snprintf(b, sizeof(b), "%s/links-rix-%zu", work, i);
		assert_int_equal(restic(NULL, repo, "restore latest --target '%s' %s >/dev/null", a, filters[i]), 0);
		assert_int_equal(rix(NULL, repo, "restore latest --target '%s' %s -q", b, filters[i]), 0);
		if (rix_test_compare_trees(a, b, RIX_CMP_NO_DIR_MTIME) != 0)
			fail_msg("restore %s: rix's differs from restic's", filters[i]);
		char *ga = link_groups(a), *gb = link_groups(b);
		if (strcmp(ga, gb) != 0)
			fail_msg("restore %s: link groups %s, restic's %s", filters[i], gb, ga);
		free(ga);
		free(gb);
	}
	/* the first path left out: the second has the content itself, the third is its link */
	snprintf(b, sizeof(b), "%s/links-rix-0", work);
	rix_test_sh("cd '%s' && cmp b/g '%s/a/f' && test ! -e a/f && test \"$(stat -c '%%h %%i' b/g)\" = \"$(stat -c '%%h %%i' c/h)\" && "
		    "test \"$(stat -c %%h b/g)\" = 2",
		    b, src);
	/* one path of each left: a file of its own with the content */
	snprintf(b, sizeof(b), "%s/links-rix-4", work);
	rix_test_sh("cd '%s' && cmp c/h '%s/a/f' && test \"$(stat -c %%h c/h)\" = 1 && test \"$(find . -type f | wc -l)\" = 1", b,
		    src);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_restic_backup_rix_restore),
		cmocka_unit_test(test_rix_backup_both_restore),
		cmocka_unit_test(test_json_and_errors),
		cmocka_unit_test(test_terminal_status),
		cmocka_unit_test(test_target_and_ids),
		cmocka_unit_test(test_hardlinks_filtered),
		cmocka_unit_test(test_as_nobody),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
