/*
 * tests/test_cli.c — the rix command, driven as a user drives it, against the real restic.
 *
 * Repositories restic made (v1; v2 with compression auto, max and off) of real files: `rix list
 * blobs` equals `restic list blobs` as a set, `rix cat blob` equals `restic cat blob` for six
 * blobs of each (the first three and last three by ID: trees and data), `rix cat config` equals
 * restic's, a pack's header and `find-blob` agree, `rix check --read-data` passes, `rix stats
 * --json` counts the same blobs and the same restore size. A repository rix made: `restic check` passes; keys added, listed,
 * changed and removed through `rix key`; `--json` output parses; errors print one line and exit
 * 1 (no repository: 10); `rix unlock` on a repository without locks removes none.
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
#include "testutil.h"

#define PW "cli pw"

static char work[256];
/* restic's calibrated scrypt costs ~0.5 s a command: after init, rix adds a cheaper key for the
 * same master key, and both tools are pointed at it (--key-hint) with its password. */
static char hint[65];
static const char *cur_pw = PW;

static int setup(void **state)
{
	(void)state;
	rix_test_mkdtemp(work, sizeof(work), "rix-cli");
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	rix_test_rmtree(work);
	return 0;
}

/*
 * The command of rix or restic (is_rix 0) with the current password (and key hint) in the
 * environment; rix(out, ...) and restic(out, ...) run it with their arguments, output into *out.
 */
static const char *tool(int is_rix)
{
	static char cmd[600];
	if (is_rix)
		snprintf(cmd, sizeof(cmd), "RIX_PASSWORD='%s' RESTIC_PASSWORD= RIX_KEY_HINT='%s' '%s'", cur_pw, hint, RIX_CLI_PATH);
	else
		snprintf(cmd, sizeof(cmd), "RESTIC_PASSWORD='%s' restic --no-cache -q %s%s", cur_pw, hint[0] ? "--key-hint " : "", hint);
	return cmd;
}
#define rix(out, ...) rix_test_tool(out, NULL, NULL, tool(1), NULL, "", __VA_ARGS__)
#define restic(out, ...) rix_test_tool(out, NULL, NULL, tool(0), NULL, "", __VA_ARGS__)

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The lines of text, sorted (text is modified). */
static size_t sorted_lines(char *text, char **lines, size_t max)
{
	size_t n = 0;
	for (char *l = strtok(text, "\n"); l != NULL && n < max; l = strtok(NULL, "\n"))
		lines[n++] = l;
	qsort(lines, n, sizeof(char *), cmp_str);
	return n;
}

/* A small tree of real files: headers, docs, seeded random bytes, an empty file. */
static void make_source(const char *dir)
{
	char *out = NULL;
	size_t n;
	assert_int_equal(rix_test_run(&out, &n,
				      "mkdir -p '%s' && cp /usr/include/stdio.h /usr/include/zstd.h /usr/include/sodium.h '%s'/ && "
				      ": > '%s/empty' && (cp /usr/share/common-licenses/GPL-3 '%s'/ 2>/dev/null || true)",
				      dir, dir, dir, dir),
			 0);
	free(out);
	static uint8_t random_bytes[1500000];
	uint64_t seed = 77;
	rix_test_fill_random(random_bytes, sizeof(random_bytes), &seed);
	rix_test_put_file(dir, "random.bin", random_bytes, sizeof(random_bytes));
}

static void check_restic_repo(const char *extra_init, const char *backup_opts)
{
	rix_test_need_restic();
	char repo[300], src[320];
	snprintf(repo, sizeof(repo), "%s/repo-%d", work, rand() % 100000);
	snprintf(src, sizeof(src), "%s.src", repo);
	make_source(src);
	char *out = NULL;
	hint[0] = '\0';
	cur_pw = PW;
	assert_int_equal(restic(&out, "-r '%s' init %s", repo, extra_init), 0);
	free(out);
	char pwf[400];
	snprintf(pwf, sizeof(pwf), "%s.pw", repo);
	rix_test_put_file(work, strrchr(pwf, '/') + 1, "cheap\n", 6);
	size_t n;
	assert_int_equal(rix_test_run(&out, &n, "RIX_PASSWORD='%s' RIX_NEW_PASSWORD_FILE='%s' '%s' -r '%s' key add", PW, pwf,
				      RIX_CLI_PATH, repo), 0);
	assert_int_equal(sscanf(out, "saved new key %64s", hint), 1);
	free(out);
	cur_pw = "cheap";
	assert_int_equal(restic(&out, "-r '%s' backup %s '%s'", repo, backup_opts, src), 0);
	free(out);
	/* The blob sets. */
	char *a = NULL, *b = NULL;
	assert_int_equal(rix(&a, "-r '%s' list blobs", repo), 0);
	assert_int_equal(restic(&b, "-r '%s' list blobs", repo), 0);
	char *la[256], *lb[256];
	size_t na = sorted_lines(a, la, 256), nb = sorted_lines(b, lb, 256);
	assert_int_equal(na, nb);
	assert_true(na >= 5);
	for (size_t i = 0; i < na; i++)
		assert_string_equal(la[i], lb[i]);
	/* Blobs' bytes through both tools: the first three and the last three (trees and data). */
	for (size_t i = 0; i < na; i++) {
		if (i >= 3 && i + 3 < na)
			continue;
		const char *id = strchr(la[i], ' ') + 1;
		char *x = NULL, *y = NULL;
		size_t nx, ny;
		assert_int_equal(rix_test_run(&x, &nx, "RIX_PASSWORD=cheap RIX_KEY_HINT=%s '%s' -r '%s' cat blob %s", hint,
					      RIX_CLI_PATH, repo, id), 0);
		assert_int_equal(rix_test_run(&y, &ny, "RESTIC_PASSWORD=cheap restic --no-cache -q --key-hint %s -r '%s' cat blob %s",
					      hint, repo, id), 0);
		assert_int_equal(nx, ny);
		assert_memory_equal(x, y, nx);
		free(x);
		free(y);
	}
	free(a);
	free(b);
	/* The config, as JSON. */
	assert_int_equal(rix(&a, "-r '%s' cat config", repo), 0);
	assert_int_equal(restic(&b, "-r '%s' cat config", repo), 0);
	json_t *ja = json_loads(a, 0, NULL), *jb = json_loads(b, 0, NULL);
	assert_non_null(ja);
	assert_true(json_equal(ja, jb));
	json_decref(ja);
	json_decref(jb);
	free(a);
	free(b);
	/* A pack's header, read from its tail, lists what the index says is in it. */
	assert_int_equal(rix(&a, "-r '%s' list packs", repo), 0);
	char pack[65] = "";
	assert_int_equal(sscanf(a, "%64s", pack), 1);
	free(a);
	assert_int_equal(rix(&a, "-r '%s' --json cat pack-header %s", repo, pack), 0);
	json_t *hdr = json_loads(a, 0, NULL);
	assert_true(json_array_size(hdr) >= 1);
	const char *first_id = json_string_value(json_object_get(json_array_get(hdr, 0), "id"));
	assert_non_null(first_id);
	free(a);
	assert_int_equal(rix(&a, "-r '%s' --json find-blob %s", repo, first_id), 0);
	assert_non_null(strstr(a, pack));
	free(a);
	json_decref(hdr);
	/* check --read-data and stats --json. */
	assert_int_equal(rix(&a, "-r '%s' check --read-data", repo), 0);
	assert_non_null(strstr(a, "no errors were found"));
	free(a);
	assert_int_equal(rix(&a, "-r '%s' stats --json", repo), 0);
	json_t *st = json_loads(a, 0, NULL);
	assert_non_null(st);
	assert_int_equal(json_integer_value(json_object_get(st, "total_blob_count")), na);
	/* What a restore would write, against restic's restore-size. */
	assert_int_equal(restic(&b, "-r '%s' stats --json", repo), 0);
	json_t *rs = json_loads(b, 0, NULL);
	assert_non_null(rs);
	assert_int_equal(json_integer_value(json_object_get(st, "logical_size")),
			 json_integer_value(json_object_get(rs, "total_size")));
	assert_int_equal(json_integer_value(json_object_get(st, "snapshots")), 1);
	assert_true(json_real_value(json_object_get(st, "dedup_ratio")) >= 1.0);
	json_decref(rs);
	free(b);
	json_decref(st);
	free(a);
	rix_test_rmtree(src);
	hint[0] = '\0';
	cur_pw = PW;
}

static void test_restic_v1(void **state)
{
	(void)state;
	check_restic_repo("--repository-version 1", "");
}

static void test_restic_v2_auto(void **state)
{
	(void)state;
	check_restic_repo("--repository-version 2", "--compression auto");
}

static void test_restic_v2_max(void **state)
{
	(void)state;
	check_restic_repo("--repository-version 2", "--compression max");
}

static void test_restic_v2_off(void **state)
{
	(void)state;
	check_restic_repo("--repository-version 2", "--compression off");
}

static void test_rix_repo_and_keys(void **state)
{
	(void)state;
	rix_test_need_restic();
	char repo[300], pwfile[320], out2[320];
	snprintf(repo, sizeof(repo), "%s/rixrepo", work);
	char *out = NULL;
	assert_int_equal(rix(&out, "init -r '%s' --repository-version 2 --json", repo), 0);
	json_t *j = json_loads(out, 0, NULL);
	assert_non_null(j);
	assert_string_equal(json_string_value(json_object_get(j, "message_type")), "initialized");
	json_decref(j);
	free(out);
	assert_int_equal(restic(&out, "-r '%s' check", repo), 0);
	free(out);
	/* A second init fails with one line. */
	assert_int_equal(rix_test_run(&out, &(size_t){ 0 }, "RIX_PASSWORD=x '%s' init -r '%s' 2>&1", RIX_CLI_PATH, repo), 1);
	assert_non_null(strstr(out, "rix: "));
	assert_non_null(strstr(out, "already"));
	free(out);
	/* key add with a new password from a file; both passwords open; list shows two. */
	snprintf(pwfile, sizeof(pwfile), "%s/newpw", work);
	rix_test_put_file(work, "newpw", "second pw\n", 10);
	assert_int_equal(rix_test_run(&out, &(size_t){ 0 }, "RIX_PASSWORD='%s' RIX_NEW_PASSWORD_FILE='%s' '%s' -r '%s' key add",
				      PW, pwfile, RIX_CLI_PATH, repo), 0);
	free(out);
	assert_int_equal(rix(&out, "-r '%s' key list --json", repo), 0);
	j = json_loads(out, 0, NULL);
	assert_int_equal(json_array_size(j), 2);
	json_decref(j);
	free(out);
	assert_int_equal(rix_test_run(&out, &(size_t){ 0 }, "'%s' -r '%s' --password-file '%s' key list", RIX_CLI_PATH, repo, pwfile), 0);
	free(out);
	assert_int_equal(rix_test_run(&out, &(size_t){ 0 }, "RESTIC_PASSWORD='second pw' restic --no-cache -q -r '%s' cat config", repo), 0);
	free(out);
	/* passwd: the key in use is replaced; the old password stops working. */
	rix_test_put_file(work, "thirdpw", "third pw\n", 9);
	snprintf(out2, sizeof(out2), "%s/thirdpw", work);
	assert_int_equal(rix_test_run(&out, &(size_t){ 0 }, "RIX_PASSWORD='second pw' RIX_NEW_PASSWORD_FILE='%s' '%s' -r '%s' key passwd",
				      out2, RIX_CLI_PATH, repo), 0);
	free(out);
	assert_int_equal(rix_test_run(&out, &(size_t){ 0 }, "RIX_PASSWORD='second pw' '%s' -r '%s' key list 2>&1", RIX_CLI_PATH, repo), 12);
	assert_non_null(strstr(out, "wrong password"));
	free(out);
	assert_int_equal(rix_test_run(&out, &(size_t){ 0 }, "RIX_PASSWORD='third pw' '%s' -r '%s' key list", RIX_CLI_PATH, repo), 0);
	free(out);
	/* remove: the key in use is refused; the other one (the first password's) goes. */
	char *lines = NULL;
	assert_int_equal(rix_test_run(&lines, &(size_t){ 0 }, "RIX_PASSWORD='%s' '%s' -r '%s' key list 2>&1", PW, RIX_CLI_PATH, repo), 0);
	char *in_use = strstr(lines, "(in use: ");
	assert_non_null(in_use);
	char first[65] = "";
	assert_int_equal(sscanf(in_use, "(in use: %64[0-9a-f])", first), 1);
	free(lines);
	assert_int_equal(rix(&out, "-r '%s' key remove %s 2>&1", repo, first), 1);
	assert_non_null(strstr(out, "refusing"));
	free(out);
	assert_int_equal(rix_test_run(&out, &(size_t){ 0 }, "RIX_PASSWORD='third pw' '%s' -r '%s' key remove %s", RIX_CLI_PATH,
				      repo, first), 0);
	free(out);
	assert_int_equal(rix_test_run(&out, &(size_t){ 0 }, "RIX_PASSWORD='third pw' '%s' -r '%s' key list --json", RIX_CLI_PATH, repo), 0);
	j = json_loads(out, 0, NULL);
	assert_int_equal(json_array_size(j), 1);
	json_decref(j);
	free(out);
	/* Usage errors exit 1, as restic's; unknown subcommands 1 with one line. */
	assert_int_equal(rix_test_run(&out, &(size_t){ 0 }, "'%s' 2>&1", RIX_CLI_PATH), 1);
	free(out);
	assert_int_equal(rix_test_run(&out, &(size_t){ 0 }, "'%s' -r '%s' list nonsense 2>&1", RIX_CLI_PATH, repo), 1);
	free(out);
	assert_int_equal(rix_test_run(&out, &(size_t){ 0 }, "'%s' -r /nonexistent/repo stats 2>&1", RIX_CLI_PATH), 10);
	assert_non_null(strstr(out, "does not exist"));
	free(out);
	/* unlock: no locks, nothing removed. */
	assert_int_equal(rix_test_run(&out, &(size_t){ 0 }, "RIX_PASSWORD='third pw' '%s' -r '%s' unlock --json", RIX_CLI_PATH, repo), 0);
	assert_non_null(strstr(out, "\"removed\":0"));
	free(out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_restic_v1),
		cmocka_unit_test(test_restic_v2_auto),
		cmocka_unit_test(test_restic_v2_max),
		cmocka_unit_test(test_restic_v2_off),
		cmocka_unit_test(test_rix_repo_and_keys),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
