/*
 * tests/test_cli_forget.c — rix forget beside the real restic 0.14 on the same repository:
 *   test_policies_like_restic  ~180 snapshots (chosen times over about three years in several UTC
 *                              offsets, the local zone's among them, across its DST changes;
 *                              two hosts, three path sets, tags; one in the future): for each
 *                              keep-* rule alone, combinations, keep-within variants, keep-tag
 *                              lists, group-by variants and filters, `forget --dry-run --json`
 *                              gives restic's groups (keep, remove, reasons and counters) exactly;
 *                              the text tables byte for byte (one group)
 *   test_forget_for_real       a policy applied for real: restic snapshots lists what restic's
 *                              dry run kept, restic check passes; forget ID... removes those;
 *                              --prune with a bad prune flag and --no-lock without --dry-run
 *                              refused (prune itself: test_prune.c), and forget (a dry
 *                              run too) while a lock is held (11), nothing removed
 *
 * The repository is made through the library (repo_fixture: a cheap scrypt, password PW), one
 * snapshot by restic backup, the others written through rix_snapshot_write naming its tree.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>
#include <jansson.h>

#include "rix/rix.h"
#include "cli_beside.h"
#include "repo_fixture.h"
#include "testutil.h"

/* Both tools in one zone with DST, so that some snapshots' offsets are the local zone's. */
#define ZONE "Europe/Berlin"
#define ENV "TZ=" ZONE " RIX_PASSWORD='" PW "' RESTIC_PASSWORD='" PW "'"

static int setup(void **state)
{
	(void)state;
	setenv("TZ", ZONE, 1);
	tzset();
	beside_setup("rix-cli-forget");
	return 0;
}

/* `rix -r repo <args>`: stdout into *out, stderr into *err (beside_rix). */
#define rix(out, err, ...) beside_rix(ENV, out, err, __VA_ARGS__)
/* The same, which must exit with code and say want (NULL: anything) on stderr. */
#define rix_says(code, want, ...) beside_rix_says(ENV, code, want, __VA_ARGS__)
/* `restic -r repo <args>` (no cache): stdout into *out. */
#define restic(out, ...)                                                                                   \
	(rix_test_need_restic(), rix_test_tool(out, NULL, NULL, ENV " restic --no-cache", repo, " 2>/dev/null", __VA_ARGS__))

/*
 * The repository: restic's backup of src, then n snapshots written through the library naming
 * its tree: times from 2021 on, gaps from 7 minutes to 20 days (runs of close ones: several an
 * hour, a day), in the local zone's offset or +00:00, +05:30, -08:00, +14:00; hosts, path sets
 * and tags from a seed; and one in 2090 (in the future: not "the latest").
 */
static size_t make_repo(size_t n)
{
	assert_int_equal(mkdir(repo, 0700), 0);
	rix_repo_free(init_repo(repo, 2));
	assert_int_equal(mkdir(src, 0700), 0);
	rix_test_put_file(src, "f", "data", 4);
	assert_int_equal(restic(NULL, "backup -q --host h1 '%s' >/dev/null", src), 0);
	rix_repo *r = open_repo(repo, NULL);
	rix_snapshot_list *l;
	MUST(rix_snapshot_list_load(&l, r, NULL, NULL));
	assert_int_equal(l->count, 1);
	char tree[65];
	rix_id_to_hex(tree, &l->items[0]->tree);
	rix_snapshot_list_free(l);
	static const char *const hosts[] = { "h1", "h2" };
	static const char *const paths[] = { "[\"/a\"]", "[\"/b\",\"/a\"]", "[\"/c\"]" };
	static const char *const tags[] = { "null", "[\"x\"]", "[\"y\",\"x\"]", "[\"z\"]", "null" };
	static const int32_t offsets[] = { 0, 19800, -28800, 50400 };
	uint64_t seed = 12;
	int64_t t = 1609459200 + 3600 * 7; /* 2021-01-01 07:00 UTC */
	for (size_t i = 0; i <= n; i++) {
		uint64_t x = rix_test_next(&seed);
		if (x % 5 == 0)
			t += 420 + (int64_t)(x >> 8) % 3600;     /* close: the same hour or the next */
		else if (x % 5 == 1)
			t += 3600 + (int64_t)(x >> 8) % 43200;   /* the same day or the next */
		else
			t += 3600 + (int64_t)(x >> 8) % 1728000; /* up to 20 days */
		rix_time when = rix_time_local(i == n ? 3786912000 : t, (uint32_t)(x >> 40) % 1000000000u);
		if ((x >> 16) % 3 == 0)
			when.utc_offset = offsets[(x >> 20) % 4];
		char ts[RIX_TIME_MAX], json[1024];
		rix_time_format(ts, &when);
		snprintf(json, sizeof(json), "{\"time\":\"%s\",\"tree\":\"%s\",\"paths\":%s,\"hostname\":\"%s\",\"tags\":%s}",
			 ts, tree, paths[(x >> 24) % 3], hosts[(x >> 28) % 2], tags[(x >> 32) % 5]);
		rix_snapshot *sn;
		MUST(rix_snapshot_decode(&sn, (const uint8_t *)json, strlen(json)));
		MUST(rix_snapshot_write(NULL, r, sn));
		rix_snapshot_free(sn);
	}
	rix_repo_free(r);
	return n + 2;
}

/* Frees what jansson allocated (json_dumps: through the hook librix gives it, not malloc). */
static void jfree(void *p)
{
	json_malloc_t m;
	json_free_t f;
	json_get_alloc_funcs(&m, &f);
	f(p);
}

/* A group's key for sorting restic's groups (its order is its map's). */
static char *group_key(json_t *g)
{
	json_t *k = json_pack("{s:O,s:O,s:O}", "host", json_object_get(g, "host"), "paths", json_object_get(g, "paths"),
			      "tags", json_object_get(g, "tags"));
	char *s = json_dumps(k, JSON_SORT_KEYS | JSON_COMPACT);
	json_decref(k);
	return s;
}

static int by_key(const void *a, const void *b)
{
	char *x = group_key(*(json_t *const *)a), *y = group_key(*(json_t *const *)b);
	int c = strcmp(x, y);
	jfree(x);
	jfree(y);
	return c;
}

/* out's groups (JSON), sorted by key into v (at most max); how many. Fails unless an array. */
static size_t sorted_groups(json_t **v, size_t max, json_t *arr)
{
	assert_true(json_is_array(arr));
	size_t n = json_array_size(arr);
	assert_true(n <= max);
	for (size_t i = 0; i < n; i++)
		v[i] = json_array_get(arr, i);
	qsort(v, n, sizeof(*v), by_key);
	return n;
}

/*
 * `forget --dry-run --json POLICY` by both: the same groups, each equal as JSON (keep, remove,
 * reasons with their snapshots, matches and counters); at least min_groups groups and, over
 * them, at least min_keep kept and min_remove removed (so that the policy decides something).
 * restic prints nothing for an empty policy: then both must print nothing.
 */
static void same_policy(const char *policy, size_t min_groups, size_t min_keep, size_t min_remove)
{
	char *a = NULL, *b = NULL;
	int ra = rix(&a, NULL, "forget --dry-run --json %s", policy);
	int rb = restic(&b, "--no-lock forget --dry-run --json %s", policy);
	if (ra != 0 || rb != 0)
		fail_msg("forget %s: rix exit %d, restic exit %d", policy, ra, rb);
	if (b[0] == '\0') {
		if (a[0] != '\0')
			fail_msg("forget %s: restic printed nothing, rix\n%s", policy, a);
		assert_int_equal(min_groups, 0);
		free(a);
		free(b);
		return;
	}
	json_t *ja = json_loads(a, 0, NULL), *jb = json_loads(b, 0, NULL);
	if (ja == NULL || jb == NULL)
		fail_msg("forget %s: not JSON: rix\n%s\nrestic\n%s", policy, a, b);
	json_t *ga[64], *gb[64];
	size_t na = sorted_groups(ga, 64, ja), nb = sorted_groups(gb, 64, jb), keep = 0, remove = 0;
	if (na != nb)
		fail_msg("forget %s: rix %zu groups, restic %zu", policy, na, nb);
	for (size_t i = 0; i < na; i++) {
		if (!json_equal(ga[i], gb[i])) {
			char *x = json_dumps(ga[i], JSON_COMPACT), *y = json_dumps(gb[i], JSON_COMPACT);
			fail_msg("forget %s: group %zu differs:\nrix    %s\nrestic %s", policy, i, x, y);
		}
		keep += json_array_size(json_object_get(gb[i], "keep"));
		remove += json_array_size(json_object_get(gb[i], "remove"));
	}
	if (na < min_groups || keep < min_keep || remove < min_remove)
		fail_msg("forget %s: %zu groups, %zu kept, %zu removed: the test decides too little", policy, na, keep,
			 remove);
	/* Go's encoder: the same bytes when there is one group (no order to differ). */
	if (na == 1 && strcmp(a, b) != 0)
		fail_msg("forget %s: rix printed\n%s\nrestic\n%s", policy, a, b);
	json_decref(ja);
	json_decref(jb);
	free(a);
	free(b);
}

static void test_policies_like_restic(void **state)
{
	(void)state;
	make_repo(180);
	static const struct {
		const char *policy;
		size_t groups, keep, remove;
	} cases[] = {
		{ "--keep-last 5", 7, 15, 75 },
		{ "--keep-hourly 12", 7, 36, 54 },
		{ "--keep-daily 7", 7, 21, 69 },
		{ "-d 40", 7, 85, 5 },
		{ "--keep-weekly 5", 7, 15, 75 },
		{ "-w 30", 7, 76, 15 },
		{ "--keep-monthly 12", 7, 36, 54 },
		{ "--keep-yearly 3", 7, 9, 81 },
		{ "--keep-yearly 10", 7, 13, 78 },
		{ "-l 2 -H 3 -d 3 -w 2 -m 3 -y 10", 7, 19, 71 },
		{ "--keep-last 1 --keep-daily 2 --keep-monthly 6", 7, 19, 72 },
		{ "--keep-within 1y2m", 7, 29, 62 },
		{ "--keep-within 3d12h", 7, 4, 86 },
		{ "--keep-within 2m15d", 7, 9, 81 },
		{ "--keep-within 1m", 7, 6, 84 },
		{ "--keep-within 36h", 7, 4, 86 },
		{ "--keep-within-hourly 20d", 7, 6, 85 },
		{ "--keep-within-daily 2m", 7, 8, 83 },
		{ "--keep-within-weekly 6m", 7, 13, 77 },
		{ "--keep-within-monthly 2y", 7, 38, 52 },
		{ "--keep-within-yearly 5y", 7, 13, 78 },
		{ "--keep-within-daily 1m --keep-within-weekly 4m --keep-within-monthly 1y --keep-within-yearly 3y", 7, 27, 63 },
		{ "--keep-tag x", 7, 39, 51 },
		{ "--keep-tag x,y --keep-tag z", 7, 35, 56 },
		{ "--keep-tag ''", 7, 35, 56 },
		{ "--keep-tag 'y, x'", 7, 18, 72 },
		{ "--keep-daily 3 --keep-tag z --keep-within 10d", 7, 24, 67 },
		{ "-g '' --keep-last 3 --keep-weekly 4", 1, 2, 89 },
		{ "--group-by host --keep-weekly 2 --keep-within-daily 7d", 2, 2, 89 },
		{ "--group-by tags --keep-monthly 2", 4, 4, 87 },
		{ "-g host,tags,paths --keep-daily 2 --keep-tag z", 25, 35, 56 },
		{ "-g paths --keep-yearly 1 --keep-hourly 1", 4, 2, 89 },
		{ "--host h1 --keep-last 3", 4, 5, 48 },
		{ "--tag y --keep-daily 2", 6, 6, 12 },
		{ "--path /a --keep-monthly 1", 4, 2, 56 },
		{ "--host h2 --tag x --tag z --keep-weekly 3 --keep-within 20d", 3, 4, 18 },
		{ "--keep-hourly 0", 0, 0, 0 }, /* an empty policy: nothing printed, nothing removed */
		{ "", 0, 0, 0 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		same_policy(cases[i].policy, cases[i].groups, cases[i].keep, cases[i].remove);

	/* The text: restic's tables with reasons, "Would have removed", byte for byte (one group). */
	static const char *const text[] = {
		"-g '' --keep-daily 3 --keep-tag x --keep-within-weekly 1m",
		"--host h1 --path /a --path /b --keep-monthly 4 --keep-last 2",
		"-g '' -c --keep-yearly 2",
		"-g '' --keep-tag nope",
		"-g ''",
	};
	for (size_t i = 0; i < sizeof(text) / sizeof(text[0]); i++) {
		char *a, *b;
		assert_int_equal(rix(&a, NULL, "forget --dry-run %s", text[i]), 0);
		assert_int_equal(restic(&b, "--no-lock forget --dry-run %s", text[i]), 0);
		if (strcmp(a, b) != 0)
			fail_msg("forget --dry-run %s: rix printed\n%s\nrestic\n%s", text[i], a, b);
		free(a);
		free(b);
	}
	/* Bad values, said as restic's flag parser says them. */
	rix_says(1, "invalid unit 'x' found after number 3", "forget --dry-run --keep-within 3x");
	rix_says(1, "use 'unlimited'", "forget --dry-run --keep-daily -2");
	rix_says(1, "unknown grouping option: 'foo'", "forget --dry-run -g hosts,foo --keep-last 1");
}

/* ids[0..n) sorted and joined by ' ' (malloc'd); ids freed. */
static char *sorted_joined(char (*ids)[65], size_t n)
{
	char *out = calloc(n + 1, 65);
	qsort(ids, n, 65, (int (*)(const void *, const void *))strcmp);
	for (size_t i = 0; i < n; i++)
		sprintf(out + strlen(out), "%s%s", i ? " " : "", ids[i]);
	free(ids);
	return out;
}

/* The IDs in restic's snapshots --json, sorted, joined by ' '. */
static char *restic_ids(void)
{
	char *s;
	assert_int_equal(restic(&s, "--no-lock snapshots --json"), 0);
	json_t *j = json_loads(s, 0, NULL), *v;
	free(s);
	size_t i, n = json_array_size(j);
	char(*ids)[65] = calloc(n + 1, 65);
	json_array_foreach(j, i, v)
		snprintf(ids[i], 65, "%s", json_string_value(json_object_get(v, "id")));
	json_decref(j);
	return sorted_joined(ids, n);
}

/* The IDs restic's dry run keeps for policy (every group's), sorted and joined as restic_ids. */
static char *kept_by_restic(const char *policy)
{
	char *s;
	assert_int_equal(restic(&s, "--no-lock forget --dry-run --json %s", policy), 0);
	json_t *j = json_loads(s, 0, NULL), *g, *v;
	free(s);
	char(*ids)[65] = calloc(400, 65);
	size_t i, k, n = 0;
	json_array_foreach(j, i, g)
		json_array_foreach(json_object_get(g, "keep"), k, v)
			if (n < 400)
				snprintf(ids[n++], 65, "%s", json_string_value(json_object_get(v, "id")));
	json_decref(j);
	return sorted_joined(ids, n);
}

static void test_forget_for_real(void **state)
{
	(void)state;
	const size_t total = make_repo(60);
	char *before = restic_ids(), *out;
	assert_int_equal(strlen(before), total * 65 - 1);
	/* Refused before anything is removed: a bad prune flag with --prune, --no-lock without
	 * --dry-run. */
	rix_says(1, "percentage for --max-unused must be below 100%", "forget --keep-last 1 --prune --max-unused 100%%");
	rix_says(1, "mutually exclusive", "--compression off forget --keep-last 1 --prune --repack-uncompressed");
	rix_says(1, "--no-lock is only applicable in combination with --dry-run", "--no-lock forget --keep-last 1");
	/* A lock held (a shared one, as a backup's): forget, even --dry-run, wants an exclusive one:
	 * refused (11); --dry-run --no-lock goes ahead. */
	rix_repo *r = open_repo(repo, NULL);
	rix_lock *lk;
	MUST(rix_lock_acquire(&lk, r, false));
	rix_says(11, NULL, "forget --keep-last 1");
	rix_says(11, NULL, "forget --dry-run --keep-last 1");
	assert_int_equal(rix(&out, NULL, "--no-lock forget --dry-run --keep-last 1"), 0);
	assert_non_null(strstr(out, "Would have removed the following snapshots:"));
	free(out);
	rix_lock_free(lk);
	rix_repo_free(r);
	out = restic_ids();
	assert_string_equal(out, before);
	free(out);

	/* For real: what restic's dry run keeps is what is left; restic check passes. */
	const char *policy = "--keep-daily 5 --keep-monthly 3 --keep-tag z";
	char *want = kept_by_restic(policy);
	assert_int_equal(rix(&out, NULL, "forget %s", policy), 0);
	assert_non_null(strstr(out, "remove "));
	assert_null(strstr(out, "Would have removed"));
	free(out);
	char *now = restic_ids();
	assert_string_equal(now, want);
	assert_true(strlen(now) < strlen(before));
	assert_int_equal(restic(NULL, "check >/dev/null"), 0);
	assert_int_equal(rix(NULL, NULL, "check >/dev/null"), 0);

	/* forget ID...: those two (a prefix and a whole ID; the first named again by a longer
	 * prefix: removed once, no error), nothing else. */
	char a[65], b[65];
	assert_int_equal(sscanf(now, "%64s %64s", a, b), 2);
	assert_int_equal(rix(&out, NULL, "forget %.8s %s %.12s", a, b, a), 0);
	free(out);
	char *after = restic_ids();
	assert_string_equal(after, now + 2 * 65);
	assert_int_equal(restic(NULL, "check >/dev/null"), 0);
	char lockdir[500];
	snprintf(lockdir, sizeof(lockdir), "%s/locks", repo);
	char names[4][65];
	assert_int_equal(rix_test_list_ids(lockdir, names, 4), 0);
	free(after);
	free(now);
	free(want);
	free(before);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_policies_like_restic, setup, beside_teardown),
		cmocka_unit_test_setup_teardown(test_forget_for_real, setup, beside_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
