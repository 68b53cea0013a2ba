/*
 * tests/test_cli_repair.c — rix repair index (and rebuild-index) beside the real restic 0.14's
 * rebuild-index, each on its own copy of the same repository, damaged the same way:
 *
 *   test_like_restic    a repository restic made (three backups, 4 MiB packs): no index files,
 *                       one index file removed, a pack gone, a pack's header damaged (unindexed),
 *                       an index file damaged, a blob dropped from the index, --read-all-packs,
 *                       nothing wrong. Each time the new index holds the same (pack, blob)
 *                       entries as restic's, rix says restic's steps on stdout and restic's
 *                       findings on stderr (and names the unreadable pack); where nothing was
 *                       lost, restic check --read-data and rix check --read-data pass; with no
 *                       index files at all, restic restores the snapshot as it was backed up
 *   test_rix_repos      repositories rix backup made (versions 1 and 2), every index file
 *                       removed: the same checks, restic's restore, restic's entries
 *   test_lock_and_usage a lock held elsewhere: exit 11, nothing changed (also with --no-lock: the
 *                       repair locks whatever it says); usage errors exit 1 with one line
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

#include "rix/rix.h"
#include "repo_fixture.h"
#include "testutil.h"

#define ENV "RIX_PASSWORD='" PW "' RESTIC_PASSWORD='" PW "'"

static char work[256], src[300], base[300];

/* `rix|restic -r dir <args>`: stdout into *out, stderr into *err (NULL: dropped). Exit status. */
static int tool(bool restic, char **out, char **err, const char *dir, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

static int tool(bool restic, char **out, char **err, const char *dir, const char *fmt, ...)
{
	char args[2048], cmd[600], redir[400], errfile[300];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(args, sizeof(args), fmt, ap);
	va_end(ap);
	if (restic)
		rix_test_need_restic();
	snprintf(cmd, sizeof(cmd), "%s %s", ENV, restic ? "restic --no-cache" : "'" RIX_CLI_PATH "'");
	snprintf(errfile, sizeof(errfile), "%s/stderr", work);
	snprintf(redir, sizeof(redir), "%s 2>'%s'", out == NULL ? " >/dev/null" : "", errfile);
	int rc = rix_test_tool(out, NULL, NULL, cmd, dir, redir, "%s", args);
	char *e = rix_test_read_file(errfile, &(size_t){ 0 });
	if (e == NULL)
		e = strdup("");
	if (err != NULL)
		*err = e;
	else
		free(e);
	return rc;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The lines of text that pass keep (NULL: all), sorted if asked, joined by '\n' (malloc'd). */
static char *lines_of(const char *text, bool (*keep)(const char *line), bool sorted)
{
	char *copy = strdup(text), *save = NULL;
	char **v = NULL;
	size_t n = 0, total = 1;
	for (char *l = strtok_r(copy, "\n", &save); l != NULL; l = strtok_r(NULL, "\n", &save)) {
		if (keep != NULL && !keep(l))
			continue;
		v = realloc(v, (n + 1) * sizeof(*v));
		v[n++] = l;
		total += strlen(l) + 1;
	}
	if (sorted && n > 1)
		qsort(v, n, sizeof(*v), cmp_str);
	char *out = malloc(total);
	out[0] = '\0';
	for (size_t i = 0; i < n; i++) {
		strcat(out, v[i]);
		strcat(out, "\n");
	}
	free(v);
	free(copy);
	return out;
}

/* restic's progress bars (not on a terminal: their last state, and an empty line) are not ours. */
static bool step_line(const char *l)
{
	return l[0] != '[' && l[0] != '\0';
}

/* The findings restic 0.14 says too ("removing invalid index ID: why": the why is each tool's). */
static bool finding(const char *l)
{
	return strncmp(l, "adding pack file to index ", 26) == 0 || strncmp(l, "reindexing pack file ", 21) == 0 ||
	       strncmp(l, "removing not found pack file ", 29) == 0 || strncmp(l, "removing invalid index ", 23) == 0;
}

static char *findings_of(const char *text)
{
	char *f = lines_of(text, finding, true);
	/* "removing invalid index <64 hex>: ..." cut after the ID */
	for (char *p = f; (p = strstr(p, "removing invalid index ")) != NULL;) {
		char *id = p + 23, *nl = strchr(id, '\n');
		if (strlen(id) > 64 && nl > id + 64)
			memmove(id + 64, nl, strlen(nl) + 1);
		p = id;
	}
	return f;
}

/* ---- index entries ------------------------------------------------------------------------------ */


static void assert_same_index(const char *a, const char *b, const char *what)
{
	struct entries x = load_entries(a), y = load_entries(b);
	if (x.n != y.n)
		fail_msg("%s: rix's index has %zu entries, restic's %zu", what, x.n, y.n);
	for (size_t i = 0; i < x.n; i++) {
		if (cmp_pb(&x.v[i], &y.v[i]) != 0) {
			char p[65], id[65];
			rix_id_to_hex(p, &x.v[i].pack_id);
			rix_id_to_hex(id, &x.v[i].id);
			fail_msg("%s: entry %zu differs (rix: pack %s blob %s)", what, i, p, id);
		}
	}
	assert_true(x.n > 0);
	free(x.v);
	free(y.v);
}

/* ---- files of a repository --------------------------------------------------------------------- */

struct names {
	char v[64][65];
	uint64_t size[64];
	size_t n;
};

static int add_name(void *arg, const char *name, uint64_t size)
{
	struct names *x = arg;
	assert_true(x->n < 64);
	x->size[x->n] = size;
	memcpy(x->v[x->n++], name, 65);
	return 0;
}

static struct names list_files(const char *dir, rix_file_type t)
{
	struct names x = { .n = 0 };
	rix_repo *r = open_repo(dir, NULL);
	MUST(rix_backend_list(rix_repo_backend(r), t, add_name, &x));
	rix_repo_free(r);
	return x;
}

static void file_path(char *out, size_t cap, const char *dir, rix_file_type t, const char *name)
{
	if (t == RIX_FILE_PACK)
		snprintf(out, cap, "%s/data/%.2s/%s", dir, name, name);
	else
		snprintf(out, cap, "%s/index/%s", dir, name);
}

/* ---- the repositories ------------------------------------------------------------------------- */

static void make_source(void)
{
	rix_test_sh("mkdir -p '%s/sub' && head -c 5000000 /dev/urandom > '%s/big' && yes rix | head -c 2000000 > '%s/text'"
		    " && for i in $(seq 1 40); do echo \"small $i\" > '%s/sub/f'$i; done && ln -s sub/f1 '%s/link'",
		    src, src, src, src, src);
}

static int setup(void **state)
{
	(void)state;
	rix_test_mkdtemp(work, sizeof(work), "rix-cli-repair");
	snprintf(src, sizeof(src), "%s/src", work);
	snprintf(base, sizeof(base), "%s/base", work);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	rix_test_rmtree(work);
	return 0;
}

/* A fresh copy of from at to. */
static void copy_repo(const char *from, const char *to)
{
	rix_test_sh("rm -rf '%s' && cp -a '%s' '%s'", to, from, to);
}

/* The snapshot restored by restic into <work>/restored equals src. */
static void restic_restores_source(const char *dir)
{
	char target[320];
	snprintf(target, sizeof(target), "%s/restored", work);
	rix_test_sh("rm -rf '%s'", target);
	assert_int_equal(tool(true, NULL, NULL, dir, "restore latest --target '%s' -q", target), 0);
	char restored[700];
	snprintf(restored, sizeof(restored), "%s%s", target, src); /* the source's path under the target */
	assert_int_equal(rix_test_compare_trees(src, restored, 0), 0);
}

/* Both checks read every byte and find nothing. */
static void both_check(const char *dir, const char *what)
{
	char *err = NULL;
	if (tool(true, NULL, &err, dir, "check --read-data") != 0)
		fail_msg("%s: restic check --read-data failed:\n%s", what, err);
	free(err);
	if (tool(false, NULL, &err, dir, "check --read-data") != 0)
		fail_msg("%s: rix check --read-data failed:\n%s", what, err);
	free(err);
}

/*
 * rix on a (args: "repair index ..." or "rebuild-index ..."), restic's rebuild-index on b (its
 * flags: restic_args): both exit 0, rix says restic's steps and findings; the indexes agree.
 * rix's stderr into *rix_err (may be NULL).
 */
static void repair_beside(const char *a, const char *b, const char *args, const char *restic_args, const char *what,
			  char **rix_err)
{
	char *ro = NULL, *re = NULL, *so = NULL, *se = NULL;
	int rc = tool(false, &ro, &re, a, "%s", args);
	if (rc != 0)
		fail_msg("%s: rix %s: exit %d:\n%s", what, args, rc, re);
	rc = tool(true, &so, &se, b, "rebuild-index %s", restic_args);
	if (rc != 0)
		fail_msg("%s: restic rebuild-index: exit %d:\n%s", what, rc, se);
	char *x = lines_of(ro, NULL, false), *y = lines_of(so, step_line, false);
	if (strcmp(x, y) != 0)
		fail_msg("%s: rix said on stdout\n%s\nrestic\n%s", what, x, y);
	free(x);
	free(y);
	x = findings_of(re);
	y = findings_of(se);
	if (strcmp(x, y) != 0)
		fail_msg("%s: rix's findings\n%s\nrestic's\n%s", what, x, y);
	free(x);
	free(y);
	assert_same_index(a, b, what);
	free(ro);
	free(so);
	free(se);
	if (rix_err != NULL)
		*rix_err = re;
	else
		free(re);
}

static void test_like_restic(void **state)
{
	(void)state;
	make_source();
	assert_int_equal(mkdir(base, 0700), 0);
	assert_int_equal(tool(true, NULL, NULL, base, "init -q"), 0);
	/* Three backups, each adding to the source: three index files, several packs. */
	for (int i = 0; i < 3; i++) {
		if (i > 0)
			rix_test_sh("head -c 3000000 /dev/urandom > '%s/more%d' && echo changed %d >> '%s/sub/f3'", src, i, i, src);
		assert_int_equal(tool(true, NULL, NULL, base, "--pack-size 4 backup -q '%s'", src), 0);
	}
	struct names idx = list_files(base, RIX_FILE_INDEX), packs = list_files(base, RIX_FILE_PACK);
	assert_int_equal(idx.n, 3);
	assert_true(packs.n >= 6);
	char a[320], b[320], path[600];
	snprintf(a, sizeof(a), "%s/a", work);
	snprintf(b, sizeof(b), "%s/b", work);
	char *err;

	/* No index files: every pack read; then the snapshot restores as it was. */
	copy_repo(base, a);
	copy_repo(base, b);
	rix_test_sh("rm '%s'/index/* '%s'/index/*", a, b);
	repair_beside(a, b, "repair index", "", "no index", NULL);
	both_check(a, "no index");
	restic_restores_source(a);

	/* One index file removed: its packs read, the others' entries kept. */
	copy_repo(base, a);
	copy_repo(base, b);
	rix_test_sh("rm '%s/index/%s' '%s/index/%s'", a, idx.v[1], b, idx.v[1]);
	repair_beside(a, b, "rebuild-index", "", "one index file removed", NULL);
	both_check(a, "one index file removed");

	/* A pack gone: dropped from the index, said. */
	copy_repo(base, a);
	copy_repo(base, b);
	file_path(path, sizeof(path), a, RIX_FILE_PACK, packs.v[2]);
	assert_int_equal(unlink(path), 0);
	file_path(path, sizeof(path), b, RIX_FILE_PACK, packs.v[2]);
	assert_int_equal(unlink(path), 0);
	repair_beside(a, b, "repair index", "", "a pack gone", &err);
	assert_non_null(strstr(err, "removing not found pack file "));
	assert_non_null(strstr(err, packs.v[2]));
	free(err);

	/* A pack no index names, its header damaged: left out, named with the reason. */
	copy_repo(base, a);
	copy_repo(base, b);
	rix_test_sh("rm '%s'/index/* '%s'/index/*", a, b);
	file_path(path, sizeof(path), a, RIX_FILE_PACK, packs.v[3]);
	flip_byte(path, -10);
	file_path(path, sizeof(path), b, RIX_FILE_PACK, packs.v[3]);
	flip_byte(path, -10);
	repair_beside(a, b, "repair index", "", "a damaged header", &err);
	char want[160];
	snprintf(want, sizeof(want), "skipped incomplete pack file: %s: ", packs.v[3]);
	if (strstr(err, want) == NULL)
		fail_msg("a damaged header: rix did not say \"%s\":\n%s", want, err);
	free(err);
	file_path(path, sizeof(path), a, RIX_FILE_PACK, packs.v[3]);
	assert_int_equal(access(path, F_OK), 0); /* left in place */

	/* An index file damaged: superseded ("removing invalid index"), its packs read. */
	copy_repo(base, a);
	copy_repo(base, b);
	file_path(path, sizeof(path), a, RIX_FILE_INDEX, idx.v[0]);
	flip_byte(path, 40);
	file_path(path, sizeof(path), b, RIX_FILE_INDEX, idx.v[0]);
	flip_byte(path, 40);
	repair_beside(a, b, "repair index", "", "a damaged index file", &err);
	snprintf(want, sizeof(want), "removing invalid index %s: ", idx.v[0]);
	assert_non_null(strstr(err, want));
	free(err);
	both_check(a, "a damaged index file");

	/* A blob dropped from an index file: its pack is of another size than the index implies. */
	copy_repo(base, a);
	{
		struct entries e = load_entries(a);
		/* a data blob in a pack of several (alone, its pack would be named by no index then) */
		size_t k = 0;
		while (k + 1 < e.n && (e.v[k].type != RIX_BLOB_DATA ||
				       memcmp(e.v[k].pack_id.b, e.v[k + 1].pack_id.b, RIX_ID_SIZE) != 0))
			k++;
		assert_true(k + 1 < e.n);
		assert_int_equal(drop_from_index(a, &e.v[k].id), 1);
		free(e.v);
	}
	copy_repo(a, b);
	repair_beside(a, b, "repair index", "", "a blob dropped", &err);
	if (strstr(err, "reindexing pack file ") == NULL)
		fail_msg("a blob dropped: rix said\n%s", err);
	free(err);
	both_check(a, "a blob dropped");

	/* --read-all-packs, under either name; and nothing wrong. */
	copy_repo(base, a);
	copy_repo(base, b);
	repair_beside(a, b, "rebuild-index --read-all-packs", "--read-all-packs", "read all packs", NULL);
	copy_repo(base, a);
	copy_repo(base, b);
	repair_beside(a, b, "repair index --read-all-packs", "--read-all-packs", "read all packs", NULL);
	copy_repo(base, a);
	copy_repo(base, b);
	repair_beside(a, b, "repair index", "", "nothing wrong", &err);
	assert_string_equal(err, "");
	free(err);
	assert_int_equal(list_files(a, RIX_FILE_INDEX).n, 1);
	both_check(a, "nothing wrong");

	/* -q: the findings only; --json: one summary. */
	copy_repo(base, a);
	rix_test_sh("rm '%s/index/%s'", a, idx.v[1]);
	char *out;
	assert_int_equal(tool(false, &out, &err, a, "-q repair index"), 0);
	assert_string_equal(out, "");
	assert_non_null(strstr(err, "adding pack file to index "));
	free(out);
	free(err);
	assert_int_equal(tool(false, &out, NULL, a, "--json repair index"), 0);
	snprintf(want, sizeof(want), "{\"message_type\":\"summary\",\"index_files\":1,\"invalid_index_files\":0,\"packs\":%zu,"
		 "\"packs_from_index\":%zu,\"packs_read\":0,", packs.n, packs.n);
	if (strncmp(out, want, strlen(want)) != 0)
		fail_msg("--json: %s", out);
	free(out);
}

static void test_rix_repos(void **state)
{
	(void)state;
	if (access(src, F_OK) != 0)
		make_source();
	char a[320], b[320];
	snprintf(a, sizeof(a), "%s/ra", work);
	snprintf(b, sizeof(b), "%s/rb", work);
	for (int version = 1; version <= 2; version++) {
		rix_test_sh("rm -rf '%s'", a);
		assert_int_equal(tool(false, NULL, NULL, a, "init --repository-version %d", version), 0);
		assert_int_equal(tool(false, NULL, NULL, a, "backup -q '%s'", src), 0);
		rix_test_sh("echo again >> '%s/sub/f9'", src);
		assert_int_equal(tool(false, NULL, NULL, a, "backup -q '%s'", src), 0);
		rix_test_sh("rm '%s'/index/*", a);
		copy_repo(a, b);
		char what[32];
		snprintf(what, sizeof(what), "rix's version %d", version);
		repair_beside(a, b, "repair index", "", what, NULL);
		both_check(a, what);
		restic_restores_source(a);
	}
}

static void test_lock_and_usage(void **state)
{
	(void)state;
	char a[320];
	snprintf(a, sizeof(a), "%s/la", work);
	rix_test_sh("rm -rf '%s' && mkdir '%s'", a, a);
	rix_repo_free(init_repo(a, 2));
	{
		rix_repo *r = open_repo(a, NULL);
		static struct blobs s;
		make_blobs(&s, 20, 3);
		save_all(r, &s);
		MUST(rix_repo_flush(r));
		rix_repo_free(r);
		free_blobs(&s);
	}
	struct names before = list_files(a, RIX_FILE_INDEX);
	rix_repo *r = open_repo(a, NULL);
	rix_lock *l;
	MUST(rix_lock_acquire(&l, r, false));
	char *err;
	assert_int_equal(tool(false, NULL, &err, a, "repair index"), 11);
	assert_non_null(strstr(err, "locked"));
	free(err);
	assert_int_equal(tool(false, NULL, NULL, a, "--no-lock rebuild-index"), 11);
	MUST(rix_lock_free(l));
	rix_repo_free(r);
	struct names after = list_files(a, RIX_FILE_INDEX);
	assert_int_equal(after.n, before.n);
	assert_string_equal(after.v[0], before.v[0]);
	/* Usage errors: one line, exit 1; nothing changed. */
	static const char *const bad[] = { "repair", "repair snapshots", "repair index extra", "repair index --bogus",
					   "rebuild-index extra" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(tool(false, NULL, &err, a, "%s", bad[i]), 1);
		assert_true(err[0] != '\0');
		free(err);
	}
	assert_int_equal(tool(false, NULL, &err, a, "repair snapshots"), 1);
	assert_non_null(strstr(err, "repair index"));
	free(err);
	after = list_files(a, RIX_FILE_INDEX);
	assert_string_equal(after.v[0], before.v[0]);
	/* The flag before the subcommand is taken too. */
	char *out;
	assert_int_equal(tool(false, &out, NULL, a, "repair --read-all-packs index"), 0);
	assert_non_null(strstr(out, "reading pack files\n"));
	assert_non_null(strstr(out, "done\n"));
	free(out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_like_restic),
		cmocka_unit_test(test_rix_repos),
		cmocka_unit_test(test_lock_and_usage),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
