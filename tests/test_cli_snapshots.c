/*
 * tests/test_cli_snapshots.c — rix snapshots, rix cat snapshot and rix tag, run as a user runs
 * them, beside the real restic 0.14 on the same repository:
 *   test_snapshots_like_restic  the table (several zones' snapshots, several paths, --compact) and
 *                               --json byte for byte as restic prints them, under --host, --tag,
 *                               --path, --latest N, IDs, prefixes and latest; unknown IDs
 *   test_group_by               --group-by host, paths, tags and their combinations, text and
 *                               --json, with filters, --latest and --compact: restic's groups
 *                               byte for byte (in any order: restic's is random)
 *   test_cat_snapshot           cat snapshot ID / prefix / latest: restic's bytes; errors
 *   test_tag                    rix tag --add/--remove/--set with filters and IDs: restic sees the
 *                               tags and the original; restic's tag, then rix; the exclusive lock;
 *                               usage errors
 *   test_rix_made               snapshots rix backup made (--tag a,b: two tags): restic's fields
 *                               equal, rix's own kept; the stored file is the snapshot encoder's
 *                               bytes (Go's escapes)
 *
 * The repositories are made through the library (repo_fixture: a cheap scrypt, password PW), the
 * snapshots by restic backup.
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
#include "cli_beside.h"
#include "repo_fixture.h"
#include "testutil.h"

/* Both tools print local times in the table: the same zone for both, not UTC. */
#define ENV "TZ=Asia/Kolkata RIX_PASSWORD='" PW "' RESTIC_PASSWORD='" PW "'"

static int setup(void **state)
{
	(void)state;
	beside_setup("rix-cli-snap");
	return 0;
}

/* `rix -r repo <args>`: stdout into *out, stderr into *err (beside_rix). */
#define rix(out, err, ...) beside_rix(ENV, out, err, __VA_ARGS__)
/* The same, which must exit with code and say want (NULL: anything) on stderr. */
#define rix_says(code, want, ...) beside_rix_says(ENV, code, want, __VA_ARGS__)
/* `restic -r repo <args>` (no cache; --no-lock for reading): stdout into *out. */
#define restic(out, ...)                                                                                   \
	(rix_test_need_restic(), rix_test_tool(out, NULL, NULL, ENV " restic --no-cache -q", repo, " 2>/dev/null", __VA_ARGS__))

/* rix's and restic's stdout for the same arguments must be the same bytes. */
static void same_output(const char *rix_args, const char *restic_args)
{
	char *a = NULL, *b = NULL;
	int ra = rix(&a, NULL, "%s", rix_args);
	int rb = restic(&b, "--no-lock %s", restic_args);
	if (ra != 0 || rb != 0 || strcmp(a, b) != 0)
		fail_msg("rix %s (exit %d) printed\n%s\nrestic %s (exit %d)\n%s", rix_args, ra, a, restic_args, rb, b);
	free(a);
	free(b);
}

/* A repository (cheap key) with restic's snapshots of src: hosts, tags, one with two paths, a parent. */
static void make_repo(void)
{
	assert_int_equal(mkdir(repo, 0700), 0);
	rix_repo_free(init_repo(repo, 2));
	assert_int_equal(mkdir(src, 0700), 0);
	rix_test_put_file(src, "f", "data", 4);
	rix_test_put_file(src, "g", "more", 4);
	static const char *const runs[] = {
		"--host h1 --tag a,b '%s'",
		"--host h1 --tag c '%s'",
		"--host 'h<2>' --tag a '%s' '%s/f'",
		"--host h1 --tag a,b,c '%s'",
		"--host 'h<2>' '%s/g'",
	};
	for (size_t i = 0; i < sizeof(runs) / sizeof(runs[0]); i++) {
		char args[1024];
		snprintf(args, sizeof(args), runs[i], src, src);
		assert_int_equal(restic(NULL, "backup %s >/dev/null", args), 0);
	}
}

/* The IDs of the repository's snapshots, oldest first (restic's --json order). */
static size_t ids(char out[][65], size_t max)
{
	char *s;
	assert_int_equal(restic(&s, "--no-lock snapshots --json"), 0);
	json_t *j = json_loads(s, 0, NULL);
	free(s);
	size_t i, n = 0;
	json_t *v;
	json_array_foreach(j, i, v)
		if (n < max)
			snprintf(out[n++], 65, "%s", json_string_value(json_object_get(v, "id")));
	json_decref(j);
	return n;
}

static void test_snapshots_like_restic(void **state)
{
	(void)state;
	make_repo();
	char id[8][65];
	assert_int_equal(ids(id, 8), 5);
	char args[1024];
	static const char *const flags[] = {
		"",
		"--host h1",
		"--host h1 --host 'h<2>'",
		"-H 'h<2>'",
		"--tag a",
		"--tag a,b",
		"--tag a,b --tag c",
		"--tag ''",
		"--latest 1",
		"--latest 2",
		"--latest 1 --host h1",
		"latest",
		"latest --host 'h<2>'",
		"latest --tag c",
		"--host nope",
		"--compact",
		"-c --tag a",
	};
	for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++) {
		snprintf(args, sizeof(args), "snapshots %s", flags[i]); /* the table */
		same_output(args, args);
		snprintf(args, sizeof(args), "snapshots --json %s", flags[i]);
		same_output(args, args);
	}
	snprintf(args, sizeof(args), "snapshots --path '%s'", src);
	same_output(args, args);
	snprintf(args, sizeof(args), "snapshots --json --path '%s' --path '%s/f'", src, src);
	same_output(args, args);
	/* IDs, prefixes, repeated: the named ones, once each, oldest first. */
	snprintf(args, sizeof(args), "snapshots --json %.64s %.8s %.5s latest", id[3], id[1], id[3]);
	same_output(args, args);
	snprintf(args, sizeof(args), "snapshots %.10s %.64s", id[4], id[0]);
	same_output(args, args);

	/* An ID that names nothing: said, the others shown, exit 1 (restic: 0). */
	char *out, *err;
	assert_int_equal(rix(&out, &err, "snapshots --json ffffffffff %.8s", id[2]), 1);
	assert_non_null(strstr(err, "ignoring \"ffffffffff\": no matching ID found for prefix"));
	json_t *j = json_loads(out, 0, NULL);
	assert_int_equal(json_array_size(j), 1);
	assert_string_equal(json_string_value(json_object_get(json_array_get(j, 0), "id")), id[2]);
	json_decref(j);
	free(out);
	free(err);
	/* Filters with IDs are ignored, and said to be. */
	assert_int_equal(rix(&out, &err, "snapshots --host nope %.8s", id[2]), 0);
	assert_non_null(strstr(err, "ignoring the filters"));
	assert_non_null(strstr(out, "1 snapshots"));
	free(out);
	free(err);
	/* Bad flags. */
	rix_says(1, "--latest x", "snapshots --latest x");
	rix_says(1, "unknown grouping option: 'foo'", "snapshots --group-by host,foo");
	/* An unreadable snapshot file: the others listed, it is named, exit 1. */
	char path[600];
	snprintf(path, sizeof(path), "%s/snapshots/%s", repo, id[1]);
	flip_byte(path, 20);
	assert_int_equal(rix(&out, &err, "snapshots"), 1);
	assert_non_null(strstr(out, "4 snapshots"));
	char want[64];
	snprintf(want, sizeof(want), "could not load snapshot %.8s", id[1]);
	assert_non_null(strstr(err, want));
	free(out);
	free(err);
}

static int cmp_str(const void *x, const void *y)
{
	return strcmp(*(char *const *)x, *(char *const *)y);
}

/* The parts of a snapshots output, sorted; their number. */
static size_t split_groups(char **parts, size_t max, const char *out, bool json)
{
	size_t n = 0;
	if (json) { /* "[" element,... "]\n": each element's bytes */
		assert_true(out[0] == '[' && strcmp(out + strlen(out) - 2, "]\n") == 0);
		const char *a = out + 1;
		int depth = 0;
		bool str = false;
		for (const char *p = a; *p && n < max; p++) {
			if (str) {
				if (*p == '\\')
					p++;
				else if (*p == '"')
					str = false;
			} else if (*p == '"') {
				str = true;
			} else if (*p == '{' || *p == '[') {
				depth++;
			} else if (*p == '}' || (*p == ']' && depth > 0)) {
				depth--;
			} else if (depth == 0 && (*p == ',' || *p == ']')) {
				if (p > a)
					parts[n++] = strndup(a, (size_t)(p - a));
				a = p + 1;
			}
		}
	} else { /* a group: its header line ("snapshots for (...):"), if any, and its table */
		const char *a = out, *prev = NULL;
		for (const char *line = out; *line && n < max;) {
			bool head = strncmp(line, "snapshots for (", 15) == 0,
			     table = strncmp(line, "ID ", 3) == 0 && (prev == NULL || strncmp(prev, "snapshots for (", 15) != 0);
			if ((head || table) && line > a) {
				parts[n++] = strndup(a, (size_t)(line - a));
				a = line;
			}
			prev = line;
			line += strcspn(line, "\n");
			line += *line == '\n';
		}
		if (*a && n < max)
			parts[n++] = strdup(a);
	}
	qsort(parts, n, sizeof(*parts), cmp_str);
	return n;
}

/*
 * rix's and restic's --group-by output for the same arguments (text, then --json): the same
 * groups, byte for byte, in any order (restic's is its map's); at least `groups` of them.
 */
static void same_groups(const char *args, size_t groups)
{
	for (int json = 0; json < 2; json++) {
		char *a = NULL, *b = NULL, *pa[64], *pb[64];
		int ra = rix(&a, NULL, "%s snapshots %s", json ? "--json" : "", args);
		int rb = restic(&b, "--no-lock %s snapshots %s", json ? "--json" : "", args);
		size_t na = split_groups(pa, 64, a, json), nb = split_groups(pb, 64, b, json);
		bool same = ra == 0 && rb == 0 && na == nb && na >= groups && strlen(a) == strlen(b);
		for (size_t i = 0; same && i < na; i++)
			same = strcmp(pa[i], pb[i]) == 0;
		if (!same)
			fail_msg("snapshots %s%s: rix (exit %d, %zu groups) printed\n%s\nrestic (exit %d, %zu groups)\n%s", args,
				 json ? " --json" : "", ra, na, a, rb, nb, b);
		for (size_t i = 0; i < na; i++)
			free(pa[i]);
		for (size_t i = 0; i < nb; i++)
			free(pb[i]);
		free(a);
		free(b);
	}
}

/* --group-by host, paths, tags and combinations, with filters, --latest and --compact. */
static void test_group_by(void **state)
{
	(void)state;
	make_repo();
	/* Paths and tags given out of order: restic shows them sorted (tags when grouping by them). */
	assert_int_equal(restic(NULL, "backup --host h1 --tag c,a '%s/g' '%s' >/dev/null", src, src), 0);
	assert_int_equal(restic(NULL, "backup --host h1 --tag b,a '%s' >/dev/null", src), 0);
	same_groups("--group-by host", 2);
	same_groups("--group-by paths", 4);
	same_groups("-g tags", 5); /* [a], [a b] twice, [a b c], [c], none (no header line) */
	same_groups("--group-by host,paths", 4);
	same_groups("--group-by paths,host", 4);
	same_groups("-g host,paths,tags", 6);
	same_groups("--group-by=tag,hosts --latest 1", 5);
	same_groups("--group-by host --latest 2 --compact", 2);
	same_groups("-g tags --tag a", 3);
	same_groups("--group-by ,host,", 2);
	same_groups("--group-by ''", 1); /* no grouping: one table, a plain array */
	same_groups("--group-by host --host nope", 0);
}

static void test_cat_snapshot(void **state)
{
	(void)state;
	make_repo();
	char id[8][65], args[256], rargs[256];
	assert_int_equal(ids(id, 8), 5);
	for (int i = 0; i < 5; i++) {
		snprintf(args, sizeof(args), "cat snapshot %.8s", id[i]);
		snprintf(rargs, sizeof(rargs), "cat snapshot %.64s", id[i]);
		same_output(args, rargs);
	}
	snprintf(rargs, sizeof(rargs), "cat snapshot %.64s", id[4]);
	same_output("cat snapshot latest", rargs);
	same_output("--json cat snapshot latest", rargs); /* restic's cat is JSON either way */
	rix_says(1, "no matching ID found for prefix \"123456789x\"", "cat snapshot 123456789x");
	rix_says(1, "empty snapshot ID", "cat snapshot ''");
	/* A prefix of two IDs: 17 snapshots share a first digit somewhere. */
	for (int i = 0; i < 12; i++)
		assert_int_equal(restic(NULL, "backup --host more%d '%s' >/dev/null", i, src), 0);
	char many[20][65];
	size_t n = ids(many, 20);
	assert_int_equal(n, 17);
	char shared[2] = "";
	for (size_t i = 0; i < n && shared[0] == '\0'; i++)
		for (size_t k = i + 1; k < n; k++)
			if (many[i][0] == many[k][0])
				shared[0] = many[i][0];
	rix_says(1, "multiple IDs with prefix", "cat snapshot %s", shared);
	rix_says(1, NULL, "cat snapshot");
}

/* The tags and original of snapshot `which` (0: oldest) as restic sees them: "t1,t2|original". */
static void restic_view(char *out, size_t cap, size_t which)
{
	char *s;
	assert_int_equal(restic(&s, "--no-lock snapshots --json"), 0);
	json_t *j = json_loads(s, 0, NULL), *o = json_array_get(j, which), *v;
	free(s);
	assert_non_null(o);
	size_t i, k = 0;
	out[0] = '\0';
	json_array_foreach(json_object_get(o, "tags"), i, v)
		k += (size_t)snprintf(out + k, cap - k, "%s%s", i ? "," : "", json_string_value(v));
	const char *orig = json_string_value(json_object_get(o, "original"));
	snprintf(out + k, cap - k, "|%.8s", orig != NULL ? orig : "");
	json_decref(j);
}

static void test_tag(void **state)
{
	(void)state;
	make_repo();
	char id[8][65], view[256];
	assert_int_equal(ids(id, 8), 5);
	char *out, *err;
	/* --add with a filter: the snapshots with a and b (0 and 3) get x, each written anew. */
	assert_int_equal(rix(&out, NULL, "tag --add x --tag a,b"), 0);
	assert_string_equal(out, "modified tags on 2 snapshots\n");
	free(out);
	restic_view(view, sizeof(view), 0);
	char want[256];
	snprintf(want, sizeof(want), "a,b,x|%.8s", id[0]);
	assert_string_equal(view, want);
	restic_view(view, sizeof(view), 3);
	snprintf(want, sizeof(want), "a,b,c,x|%.8s", id[3]);
	assert_string_equal(view, want);
	restic_view(view, sizeof(view), 1);
	assert_string_equal(view, "c|");
	/* Nothing to change: nothing written. */
	assert_int_equal(rix(&out, NULL, "tag --add x --tag a,b"), 0);
	assert_string_equal(out, "no snapshots were modified\n");
	free(out);
	/* --remove on latest and an ID prefix; the original stays the first ID. */
	assert_int_equal(rix(&out, NULL, "tag --remove a,x --host h1 latest %.8s", id[2]), 0);
	assert_string_equal(out, "modified tags on 2 snapshots\n");
	free(out);
	restic_view(view, sizeof(view), 3); /* restic's RemoveTags order: the last tag fills the gap */
	snprintf(want, sizeof(want), "c,b|%.8s", id[3]);
	assert_string_equal(view, want);
	restic_view(view, sizeof(view), 2);
	snprintf(want, sizeof(want), "|%.8s", id[2]);
	assert_string_equal(view, want);
	/* --set, several lists; --set "" changes nothing (restic's Flatten drops it). */
	char nid[8][65];
	assert_int_equal(ids(nid, 8), 5);
	assert_int_equal(rix(&out, NULL, "tag --set 'p, q' --set r %.12s", nid[4]), 0);
	assert_string_equal(out, "modified tags on 1 snapshots\n");
	free(out);
	restic_view(view, sizeof(view), 4);
	snprintf(want, sizeof(want), "p,q,r|%.8s", id[4]);
	assert_string_equal(view, want);
	assert_int_equal(rix(&out, NULL, "tag --set '' latest"), 0);
	assert_string_equal(out, "no snapshots were modified\n");
	free(out);
	/* -q: no message. */
	assert_int_equal(rix(&out, NULL, "-q tag --add y latest"), 0);
	assert_string_equal(out, "");
	free(out);
	/* restic's tag, then rix: rix's table and JSON are restic's. */
	assert_int_equal(restic(NULL, "tag --add from-restic --host h1 >/dev/null"), 0);
	same_output("snapshots", "snapshots");
	same_output("--json snapshots", "snapshots --json");
	same_output("--json snapshots --tag from-restic", "snapshots --json --tag from-restic");
	/* restic check is content with what rix wrote. */
	assert_int_equal(restic(NULL, "check >/dev/null"), 0);

	/* Usage errors. */
	rix_says(1, "nothing to do", "tag latest");
	rix_says(1, "cannot be given at the same time", "tag --set a --add b latest");
	assert_int_equal(rix(&out, &err, "tag --add z 0000000000"), 1);
	assert_non_null(strstr(err, "ignoring \"0000000000\""));
	assert_string_equal(out, "no snapshots were modified\n");
	free(out);
	free(err);
	/* The exclusive lock: refused (exit 11) while another lock is held; snapshots may read. */
	rix_repo *r = open_repo(repo, NULL);
	rix_lock *held;
	MUST(rix_lock_acquire(&held, r, false));
	rix_says(11, "locked", "tag --add z latest");
	assert_int_equal(rix(&out, NULL, "snapshots --latest 1"), 0);
	free(out);
	assert_int_equal(rix_lock_free(held), 0);
	rix_repo_free(r);
	assert_int_equal(rix(NULL, NULL, "tag --add z latest"), 0);
}

static void test_rix_made(void **state)
{
	(void)state;
	assert_int_equal(mkdir(repo, 0700), 0);
	rix_repo_free(init_repo(repo, 2));
	assert_int_equal(mkdir(src, 0700), 0);
	rix_test_put_file(src, "f", "data", 4);
	assert_int_equal(rix(NULL, NULL, "backup --host 'a&b' --tag 't1, t2' --tag t3 '%s'", src), 0);
	assert_int_equal(rix(NULL, NULL, "backup --host 'a&b' '%s'", src), 0);
	/* restic 0.14 knows fewer members: equal on its, rix's own kept (program_version, summary). */
	char *a, *b;
	assert_int_equal(rix(&a, NULL, "--json snapshots"), 0);
	assert_int_equal(restic(&b, "--no-lock snapshots --json"), 0);
	json_t *ja = json_loads(a, 0, NULL), *jb = json_loads(b, 0, NULL);
	assert_int_equal(json_array_size(ja), 2);
	for (size_t i = 0; i < 2; i++) {
		json_t *x = json_array_get(ja, i);
		assert_non_null(json_object_get(x, "program_version"));
		assert_non_null(json_object_get(x, "summary"));
		json_object_del(x, "program_version");
		json_object_del(x, "summary");
	}
	if (!json_equal(ja, jb))
		fail_msg("rix:\n%s\nrestic:\n%s", a, b);
	/* --tag a,b is two tags, as restic's backup makes them. */
	json_t *tags = json_object_get(json_array_get(jb, 0), "tags");
	assert_int_equal(json_array_size(tags), 3);
	assert_string_equal(json_string_value(json_array_get(tags, 1)), "t2");
	json_decref(ja);
	json_decref(jb);
	free(a);
	free(b);
	/* The table is restic's. */
	same_output("snapshots", "snapshots");
	/* cat snapshot: restic's members the same, in the same lines. */
	assert_int_equal(rix(&a, NULL, "cat snapshot latest"), 0);
	char id[4][65];
	assert_int_equal(ids(id, 4), 2);
	assert_int_equal(restic(&b, "--no-lock cat snapshot %s", id[1]), 0);
	ja = json_loads(a, 0, NULL);
	jb = json_loads(b, 0, NULL);
	assert_non_null(ja);
	json_object_del(ja, "program_version");
	json_object_del(ja, "summary");
	assert_true(json_equal(ja, jb));
	json_decref(ja);
	json_decref(jb);
	free(a);
	free(b);
	/* The file rix backup stored is the snapshot encoder's bytes (Go's escapes: & as \u0026). */
	rix_repo *r = open_repo(repo, NULL);
	rix_id sid;
	MUST(rix_id_from_hex(&sid, id[1], 64));
	uint8_t *raw;
	size_t rawn, encn;
	MUST(rix_repo_read_file(&raw, &rawn, r, RIX_FILE_SNAPSHOT, &sid));
	rix_snapshot *sn;
	char *enc;
	MUST(rix_snapshot_decode(&sn, raw, rawn));
	MUST(rix_snapshot_encode(&enc, &encn, sn));
	assert_int_equal(encn, rawn);
	assert_memory_equal(enc, raw, rawn);
	assert_non_null(strstr(enc, "\"hostname\":\"a\\u0026b\""));
	rix_free(enc);
	rix_snapshot_free(sn);
	rix_free(raw);
	rix_repo_free(r);
	/* A tag by rix keeps rix's members (restic 0.14's would drop them). */
	assert_int_equal(rix(NULL, NULL, "tag --add t3 latest"), 0);
	assert_int_equal(rix(&a, NULL, "cat snapshot latest"), 0);
	ja = json_loads(a, 0, NULL);
	assert_non_null(json_object_get(ja, "summary"));
	assert_non_null(json_object_get(ja, "program_version"));
	assert_string_equal(json_string_value(json_object_get(ja, "original")), id[1]);
	json_decref(ja);
	free(a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_snapshots_like_restic, setup, beside_teardown),
		cmocka_unit_test_setup_teardown(test_group_by, setup, beside_teardown),
		cmocka_unit_test_setup_teardown(test_cat_snapshot, setup, beside_teardown),
		cmocka_unit_test_setup_teardown(test_tag, setup, beside_teardown),
		cmocka_unit_test_setup_teardown(test_rix_made, setup, beside_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
