/*
 * tests/test_snapshot.c — rix/snapshot.h, with the real restic 0.14 as the oracle:
 *   test_restic_round_trip    restic's own snapshot files decode and encode to their exact bytes;
 *                             the list is restic's (order, IDs, fields); restic tag's original
 *   test_members_kept         summary, program_version and unknown members survive decode,
 *                             a change and encode (exact bytes); nulls; restic's member order
 *   test_go_strings           escapes both ways as Go's encoding/json
 *   test_hostile              malformed, ill-typed, folded or duplicated keys, U+0000, deep,
 *                             every truncation and many flipped bytes: RIX_ECORRUPT, no crash
 *   test_oom                  decode, encode, tags, keep_latest, find under failing allocation N
 *   test_tags_flatten         tag lists (" a , b", "c,", "") flattened: the tags restic's backup
 *                             --tag records; none: NULL; under failing allocation N
 *   test_filters_like_restic  --host, --tag, --path, --latest N and latest over 24 snapshots in
 *                             several zones: the snapshots restic snapshots --json shows
 *   test_find                 ID prefixes (unique, ambiguous, unknown, whole in upper case) as
 *                             restic's cat snapshot finds them; unreadable snapshot files
 *   test_rewrite              tags changed by rix: old file gone, original kept, the JSON
 *                             restic's tag writes for the same change, restic reads it back
 *   test_load_workers         the list is loaded by rix_repo_options.workers threads (0: 8)
 */
#include <errno.h>
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
#include "faultbackend.h"
#include "repo_fixture.h"
#include "testutil.h"

#define TREE "84a0348122125b8fd88f6b24abedcb8a0dca070d62e90ea009217645f00916cb"
#define PARENT "7b21ef86cefd8aada8649fe04cc2b596b31280e2a089a879860418861a7b6e81"

static rix_snapshot *dec(const char *json)
{
	rix_snapshot *sn;
	int rc = rix_snapshot_decode(&sn, (const uint8_t *)json, strlen(json));
	if (rc != 0)
		fail_msg("decode %s: %d (%s)", json, rc, rix_error_last());
	return sn;
}

/* sn encoded must be want exactly. */
static void enc_is(const rix_snapshot *sn, const char *want)
{
	char *json;
	size_t n;
	MUST(rix_snapshot_encode(&json, &n, sn));
	assert_int_equal(n, strlen(json));
	if (strcmp(json, want) != 0)
		fail_msg("encoded\n  %s\nwant\n  %s", json, want);
	rix_free(json);
}

/* json must be refused as corrupt, with a message naming what (when what is not NULL). */
static void corrupt(const char *json, size_t len, const char *what)
{
	rix_snapshot *sn = (rix_snapshot *)1;
	int rc = rix_snapshot_decode(&sn, (const uint8_t *)json, len);
	if (rc != RIX_ECORRUPT)
		fail_msg("decode %.*s: %d, want RIX_ECORRUPT", (int)len, json, rc);
	assert_null(sn);
	if (what != NULL && strstr(rix_error_last(), what) == NULL)
		fail_msg("decode %.*s: message \"%s\" does not name \"%s\"", (int)len, json, rix_error_last(), what);
}
#define CORRUPT(json, what) corrupt(json, strlen(json), what)

/* `restic <args>` on repo (PW), its stdout (malloc'd) into *out when out is not NULL; its status. */
#define restic(out, repo, ...)                                                                             \
	(rix_test_need_restic(), rix_test_tool(out, NULL, NULL, "RESTIC_PASSWORD='" PW "' restic --no-cache -q", repo, "", __VA_ARGS__))

/* The IDs `restic snapshots --json <args>` prints, in its order, as one space-separated string. */
static char *restic_ids(const char *repo, const char *args)
{
	char *out;
	if (restic(&out, repo, "--no-lock snapshots --json %s 2>/dev/null", args) != 0)
		fail_msg("restic snapshots --json %s failed", args);
	json_t *j = json_loads(out, 0, NULL);
	if (!json_is_array(j))
		fail_msg("restic snapshots --json %s: %s", args, out);
	free(out);
	size_t i, k = 0;
	json_t *v;
	char *s = calloc(json_array_size(j) * 65 + 1, 1);
	json_array_foreach(j, i, v)
		k += (size_t)sprintf(s + k, "%s%s", k ? " " : "", json_string_value(json_object_get(v, "id")));
	json_decref(j);
	return s;
}

/* The IDs of l in its order, as restic_ids. */
static char *list_ids(const rix_snapshot_list *l)
{
	char *s = calloc(l->count * 65 + 1, 1);
	size_t k = 0;
	for (size_t i = 0; i < l->count; i++) {
		char hex[65];
		rix_id_to_hex(hex, &l->items[i]->id);
		k += (size_t)sprintf(s + k, "%s%s", k ? " " : "", hex);
	}
	return s;
}

static rix_snapshot_list *load_list(rix_repo *r)
{
	rix_snapshot_list *l;
	MUST(rix_snapshot_list_load(&l, r, NULL, NULL));
	return l;
}

static void no_error(void *payload, const rix_id *id, int code, const char *msg)
{
	(void)payload;
	(void)id;
	fail_msg("snapshot unreadable: %d %s", code, msg);
}

/* ==== restic's own snapshots ================================================================== */

static void test_restic_round_trip(void **state)
{
	(void)state;
	rix_test_need_restic();
	char *work = rix_test_new_dir("rix-snap-rt"), repo[4200], src[4200];
	snprintf(repo, sizeof(repo), "%s/repo", work);
	snprintf(src, sizeof(src), "%s/src", work);
	assert_int_equal(mkdir(src, 0700), 0);
	rix_test_put_file(src, "a.txt", "hello", 5);
	rix_test_put_file(src, "b.tmp", "skip", 4);
	assert_int_equal(mkdir(repo, 0700), 0);
	rix_repo_free(init_repo(repo, 2)); /* a cheap key: restic's init would take a second per command */
	/* A host and tags that need Go's escapes, excludes, then a second backup (a parent). */
	assert_int_equal(restic(NULL, repo, "backup --host 'h<&>\"é' --tag 'a,b' --tag 'c<' --exclude '*.tmp' '%s' >/dev/null", src), 0);
	assert_int_equal(restic(NULL, repo, "backup --host 'h<&>\"é' '%s' >/dev/null", src), 0);
	assert_int_equal(restic(NULL, repo, "backup --host other '%s' '%s/a.txt' >/dev/null", src, src), 0);
	/* restic's tag: a rewritten snapshot with original. */
	assert_int_equal(restic(NULL, repo, "tag --add t --host other >/dev/null"), 0);

	rix_repo *r = open_repo(repo, NULL);
	rix_id *ids;
	size_t n;
	MUST(rix_repo_list_ids(&ids, &n, r, RIX_FILE_SNAPSHOT));
	assert_int_equal(n, 3);
	for (size_t i = 0; i < n; i++) {
		uint8_t *raw;
		size_t rn;
		MUST(rix_repo_read_file(&raw, &rn, r, RIX_FILE_SNAPSHOT, &ids[i]));
		rix_snapshot *sn;
		MUST(rix_snapshot_decode(&sn, raw, rn));
		char *json;
		size_t jn;
		MUST(rix_snapshot_encode(&json, &jn, sn));
		if (jn != rn || memcmp(json, raw, rn) != 0)
			fail_msg("restic wrote\n  %.*s\nrix encodes\n  %s", (int)rn, raw, json);
		rix_free(json);
		rix_free(raw);
		rix_snapshot_free(sn);
	}
	rix_free(ids);

	/* The list: restic's order and fields. */
	rix_snapshot_list *l;
	MUST(rix_snapshot_list_load(&l, r, no_error, NULL));
	assert_int_equal(l->count, 3);
	assert_int_equal(l->nunreadable, 0);
	char *want = restic_ids(repo, ""), *got = list_ids(l);
	assert_string_equal(got, want);
	free(want);
	free(got);
	char *out;
	assert_int_equal(restic(&out, repo, "snapshots --json"), 0);
	json_t *rj = json_loads(out, 0, NULL);
	free(out);
	for (size_t i = 0; i < l->count; i++) {
		const rix_snapshot *sn = l->items[i];
		json_t *o = json_array_get(rj, i);
		char hex[65];
		rix_id_to_hex(hex, &sn->tree);
		assert_string_equal(hex, json_string_value(json_object_get(o, "tree")));
		assert_string_equal(sn->hostname, json_string_value(json_object_get(o, "hostname")));
		assert_string_equal(sn->username, json_string_value(json_object_get(o, "username")));
		assert_int_equal(sn->npaths, json_array_size(json_object_get(o, "paths")));
		for (size_t k = 0; k < sn->npaths; k++)
			assert_string_equal(sn->paths[k], json_string_value(json_array_get(json_object_get(o, "paths"), k)));
		assert_int_equal(sn->ntags, json_array_size(json_object_get(o, "tags")));
		for (size_t k = 0; k < sn->ntags; k++)
			assert_string_equal(sn->tags[k], json_string_value(json_array_get(json_object_get(o, "tags"), k)));
		assert_int_equal(sn->nexcludes, json_array_size(json_object_get(o, "excludes")));
		assert_int_equal(sn->has_parent, json_object_get(o, "parent") != NULL);
		assert_int_equal(sn->has_original, json_object_get(o, "original") != NULL);
		if (sn->has_original) {
			rix_id_to_hex(hex, &sn->original);
			assert_string_equal(hex, json_string_value(json_object_get(o, "original")));
		}
		rix_time t;
		assert_int_equal(rix_time_parse(&t, json_string_value(json_object_get(o, "time"))), 0);
		assert_int_equal(rix_time_cmp(&t, &sn->time), 0);
	}
	json_decref(rj);
	/* What the three are. */
	assert_string_equal(l->items[0]->hostname, "h<&>\"\xc3\xa9");
	assert_int_equal(l->items[0]->ntags, 3);
	assert_string_equal(l->items[0]->tags[2], "c<");
	assert_int_equal(l->items[0]->nexcludes, 1);
	assert_string_equal(l->items[0]->excludes[0], "*.tmp");
	assert_true(l->items[1]->has_parent);
	assert_memory_equal(&l->items[1]->parent, &l->items[0]->id, sizeof(rix_id));
	assert_int_equal(l->items[2]->npaths, 2);
	assert_true(l->items[2]->has_original);
	assert_false(l->items[0]->has_original);
	rix_snapshot_list_free(l);
	rix_repo_free(r);
	rix_test_free_dir(work);
}

/* ==== the codec =============================================================================== */

static void test_members_kept(void **state)
{
	(void)state;
	/* restic 0.17's members, and two it does not know, spaced and in another order. */
	const char *in = "{ \"future\" : { \"a\" : [ 1 , 2.5e3 , \"x y\" ] } ,\n"
			 "  \"summary\": {\"backup_start\": \"2024-05-01T10:00:00Z\", \"files_new\": 3},"
			 "\"program_version\":\"restic 0.17.0\",\"tags\":[\"b\",\"a\"],\"gid\":7,\"uid\":4294967295,"
			 "\"username\":\"u\",\"hostname\":\"h\",\"paths\":[\"/p\",\"/q\"],\"tree\":\"" TREE "\","
			 "\"parent\":\"" PARENT "\",\"time\":\"2024-05-01T12:00:00.5+02:00\",\"excludes\":[\"*.o\"],"
			 "\"later\":null}";
	rix_snapshot *sn = dec(in);
	const char *want = "{\"time\":\"2024-05-01T12:00:00.5+02:00\",\"parent\":\"" PARENT "\",\"tree\":\"" TREE "\","
			   "\"paths\":[\"/p\",\"/q\"],\"hostname\":\"h\",\"username\":\"u\",\"uid\":4294967295,\"gid\":7,"
			   "\"excludes\":[\"*.o\"],\"tags\":[\"b\",\"a\"],\"program_version\":\"restic 0.17.0\","
			   "\"summary\":{\"backup_start\":\"2024-05-01T10:00:00Z\",\"files_new\":3},"
			   "\"future\":{\"a\":[1,2.5e3,\"x y\"]},\"later\":null}";
	enc_is(sn, want);
	size_t sl;
	const char *sum = rix_snapshot_summary(&sl, sn);
	assert_non_null(sum);
	assert_int_equal(sl, strlen("{\"backup_start\":\"2024-05-01T10:00:00Z\",\"files_new\":3}"));
	assert_memory_equal(sum, "{\"backup_start\":\"2024-05-01T10:00:00Z\",\"files_new\":3}", sl);
	assert_int_equal(sn->uid, 4294967295u);
	assert_int_equal(sn->time.sec, 1714557600);
	assert_int_equal(sn->time.nsec, 500000000);
	assert_int_equal(sn->time.utc_offset, 7200);

	/* Tags as restic changes them: added at the end once; removed, the last taking the place. */
	bool changed;
	const char *add[] = { "c", "a", "c", "d" };
	MUST(rix_snapshot_add_tags(&changed, sn, add, 4));
	assert_true(changed);
	MUST(rix_snapshot_add_tags(&changed, sn, add, 2));
	assert_false(changed);
	const char *del[] = { "b", "zz" };
	rix_snapshot_remove_tags(&changed, sn, del, 2);
	assert_true(changed);
	rix_snapshot_remove_tags(&changed, sn, del, 2);
	assert_false(changed);
	sn->has_original = true;
	sn->original = sn->parent;
	sn->has_parent = false;
	enc_is(sn, "{\"time\":\"2024-05-01T12:00:00.5+02:00\",\"tree\":\"" TREE "\","
		   "\"paths\":[\"/p\",\"/q\"],\"hostname\":\"h\",\"username\":\"u\",\"uid\":4294967295,\"gid\":7,"
		   "\"excludes\":[\"*.o\"],\"tags\":[\"d\",\"a\",\"c\"],\"original\":\"" PARENT "\","
		   "\"program_version\":\"restic 0.17.0\","
		   "\"summary\":{\"backup_start\":\"2024-05-01T10:00:00Z\",\"files_new\":3},"
		   "\"future\":{\"a\":[1,2.5e3,\"x y\"]},\"later\":null}");
	MUST(rix_snapshot_set_tags(sn, NULL, 0));
	assert_int_equal(sn->ntags, 0);
	rix_snapshot_free(sn);

	/* The least restic writes; nulls are absent (Go's decoder), empty lists omitted. */
	sn = dec("{\"time\":\"2024-05-01T10:00:00Z\",\"tree\":\"" TREE "\",\"paths\":[],\"parent\":null,"
		 "\"hostname\":null,\"tags\":null,\"excludes\":[],\"summary\":null,\"uid\":0,\"original\":null}");
	assert_false(sn->has_parent);
	assert_string_equal(sn->hostname, "");
	assert_null(rix_snapshot_summary(&sl, sn));
	enc_is(sn, "{\"time\":\"2024-05-01T10:00:00Z\",\"tree\":\"" TREE "\",\"paths\":[]}");
	/* A null element of a list is "" (what Go gives); upper-case hex is read. */
	rix_snapshot_free(sn);
	sn = dec("{\"time\":\"2024-05-01T10:00:00Z\",\"tree\":\"84A0348122125B8FD88F6B24ABEDCB8A0DCA070D62E90EA009217645F00916CB\","
		 "\"paths\":[\"/x\",null]}");
	enc_is(sn, "{\"time\":\"2024-05-01T10:00:00Z\",\"tree\":\"" TREE "\",\"paths\":[\"/x\",\"\"]}");
	rix_snapshot_free(sn);
	/* A key restic matches after unescaping is that key. */
	sn = dec("{\"time\":\"2024-05-01T10:00:00Z\",\"\\u0074ree\":\"" TREE "\",\"paths\":[\"/x\"]}");
	enc_is(sn, "{\"time\":\"2024-05-01T10:00:00Z\",\"tree\":\"" TREE "\",\"paths\":[\"/x\"]}");
	rix_snapshot_free(sn);
}

static void test_go_strings(void **state)
{
	(void)state;
	/* In: escapes of every kind, a surrogate pair, lone surrogates, a raw invalid byte. */
	rix_snapshot *sn = dec("{\"time\":\"2024-05-01T10:00:00Z\",\"tree\":\"" TREE "\",\"paths\":[\"/a\\/b\"],"
			       "\"hostname\":\"<&>\\u003c\\\"\\\\\\b\\f\\n\\r\\t\\u0001\\u007f\\u2028\\u2029\","
			       "\"username\":\"\\ud83d\\ude00|\\ud800|\\udc00x|\\ud800\\u0041|\xff|\xe2\x82|\xc3\xa9\"}");
	assert_string_equal(sn->paths[0], "/a/b");
	assert_string_equal(sn->hostname, "<&><\"\\\b\f\n\r\t\x01\x7f\xe2\x80\xa8\xe2\x80\xa9");
	assert_string_equal(sn->username, "\xf0\x9f\x98\x80|\xef\xbf\xbd|\xef\xbf\xbdx|\xef\xbf\xbd"
					  "A|\xef\xbf\xbd|\xef\xbf\xbd\xef\xbf\xbd|\xc3\xa9");
	/* Out: Go's escapes (HTML-safe), valid UTF-8 as itself. */
	enc_is(sn, "{\"time\":\"2024-05-01T10:00:00Z\",\"tree\":\"" TREE "\",\"paths\":[\"/a/b\"],"
		   "\"hostname\":\"\\u003c\\u0026\\u003e\\u003c\\\"\\\\\\u0008\\u000c\\n\\r\\t\\u0001\x7f\\u2028\\u2029\","
		   "\"username\":\"\xf0\x9f\x98\x80|\xef\xbf\xbd|\xef\xbf\xbdx|\xef\xbf\xbd"
		   "A|\xef\xbf\xbd|\xef\xbf\xbd\xef\xbf\xbd|\xc3\xa9\"}");
	/* Tags set from C strings with invalid UTF-8: \ufffd, as Go writes them. */
	const char *t[] = { "a\xff", "<b>" };
	MUST(rix_snapshot_set_tags(sn, t, 2));
	char *json;
	size_t n;
	MUST(rix_snapshot_encode(&json, &n, sn));
	assert_non_null(strstr(json, "\"tags\":[\"a\\ufffd\",\"\\u003cb\\u003e\"]"));
	rix_free(json);
	rix_snapshot_free(sn);
}

static const char valid[] = "{\"time\":\"2024-05-01T12:00:00.5+02:00\",\"parent\":\"" PARENT "\",\"tree\":\"" TREE
			    "\",\"paths\":[\"/p\",\"/q\"],\"hostname\":\"h\",\"username\":\"u\",\"uid\":1,\"gid\":2,"
			    "\"excludes\":[\"*.o\"],\"tags\":[\"b\",\"a\"],\"original\":\"" PARENT
			    "\",\"program_version\":\"rix 0.1.0\",\"summary\":{\"files_new\":3},\"x\":[{}]}";

static void test_hostile(void **state)
{
	(void)state;
#define T "\"time\":\"2024-05-01T10:00:00Z\""
#define TR "\"tree\":\"" TREE "\""
#define P "\"paths\":[\"/p\"]"
	CORRUPT("", "empty");
	CORRUPT("   ", "empty");
	CORRUPT("[]", "not a JSON object");
	CORRUPT("null", "not a JSON object");
	CORRUPT("\"x\"", "not a JSON object");
	CORRUPT("{", "end of text");
	CORRUPT("{}", "\"time\" is missing");
	CORRUPT("{" TR "," P "}", "\"time\" is missing");
	CORRUPT("{" T "," P "}", "\"tree\" is missing");
	CORRUPT("{" T "," TR "}", "\"paths\" is missing");
	CORRUPT("{\"time\":null," TR "," P "}", "\"time\" is null");
	CORRUPT("{" T ",\"tree\":null," P "}", "\"tree\" is missing");
	CORRUPT("{" T "," TR ",\"paths\":null}", "\"paths\" is missing");
	CORRUPT("{\"time\":5," TR "," P "}", "\"time\" is not a string");
	CORRUPT("{\"time\":\"yesterday\"," TR "," P "}", "RFC 3339");
	CORRUPT("{\"time\":\"2024-05-01T10:00:00\"," TR "," P "}", "RFC 3339");
	CORRUPT("{" T ",\"tree\":\"84a0\"," P "}", "64 hex");
	CORRUPT("{" T ",\"tree\":\"" TREE "0\"," P "}", "64 hex");
	CORRUPT("{" T ",\"tree\":\"g4a0348122125b8fd88f6b24abedcb8a0dca070d62e90ea009217645f00916cb\"," P "}", "64 hex");
	CORRUPT("{" T ",\"tree\":\"\\u00384a0348122125b8fd88f6b24abedcb8a0dca070d62e90ea009217645f00916c\"," P "}",
		"64 hex");
	CORRUPT("{" T ",\"tree\":[]," P "}", "\"tree\" is not an ID");
	CORRUPT("{" T "," TR ",\"paths\":\"/p\"}", "\"paths\" is not a list");
	CORRUPT("{" T "," TR ",\"paths\":[1]}", "\"paths\" is not a string");
	CORRUPT("{" T "," TR ",\"paths\":[\"/p\",]}", NULL);
	CORRUPT("{" T "," TR "," P ",\"tags\":{}}", "\"tags\" is not a list");
	CORRUPT("{" T "," TR "," P ",\"hostname\":1}", "\"hostname\" is not a string");
	CORRUPT("{" T "," TR "," P ",\"uid\":-1}", "\"uid\"");
	CORRUPT("{" T "," TR "," P ",\"uid\":1.0}", "\"uid\"");
	CORRUPT("{" T "," TR "," P ",\"uid\":1e3}", "\"uid\"");
	CORRUPT("{" T "," TR "," P ",\"gid\":4294967296}", "\"gid\"");
	CORRUPT("{" T "," TR "," P ",\"gid\":99999999999999999999999}", "\"gid\"");
	CORRUPT("{" T "," TR "," P ",\"uid\":\"5\"}", "\"uid\" is not a number");
	CORRUPT("{" T "," TR "," P ",\"uid\":01}", NULL);
	CORRUPT("{" T "," TR "," P ",\"summary\":[]}", "\"summary\" is not an object");
	CORRUPT("{" T "," TR "," P ",\"summary\":{\"a\":}}", NULL);
	/* Keys restic reads as known ones by case folding, twice, or spelled with U+017F / U+212A. */
	CORRUPT("{\"Time\":\"2024-05-01T10:00:00Z\"," TR "," P "}", "not spelled so");
	CORRUPT("{" T ",\"TREE\":\"" TREE "\"," P "}", "not spelled so");
	CORRUPT("{" T "," TR "," P ",\"\xc5\xbfummary\":{}}", "not spelled so");
	CORRUPT("{" T "," TR "," P "," TR "}", "duplicate key \"tree\"");
	CORRUPT("{" T ",\"tree\":null," TR "," P "}", "duplicate key \"tree\""); /* null, then a tree */
	CORRUPT("{" T "," TR ",\"paths\":null," P "}", "duplicate key \"paths\"");
	CORRUPT("{" T "," TR "," P ",\"tags\":[],\"tags\":[]}", "duplicate key \"tags\"");
	/* U+0000: C strings cannot hold it. */
	CORRUPT("{" T "," TR "," P ",\"hostname\":\"a\\u0000b\"}", "U+0000");
	CORRUPT("{" T "," TR ",\"paths\":[\"\\u0000\"]}", "U+0000");
	/* Raw control characters, bad escapes, trailing bytes. */
	CORRUPT("{" T "," TR "," P ",\"hostname\":\"a\tb\"}", "control character");
	CORRUPT("{" T "," TR "," P ",\"hostname\":\"\\x41\"}", "bad escape");
	CORRUPT("{" T "," TR "," P ",\"hostname\":\"\\u12\"}", NULL);
	CORRUPT("{" T "," TR "," P "} {}", "trailing");
	CORRUPT("{" T "," TR "," P "}x", "trailing");
	/* Deep unknown members: 64 levels in all are allowed, no more. */
	char deep[512];
	int k = snprintf(deep, sizeof(deep), "{" T "," TR "," P ",\"d\":");
	for (int i = 0; i < 63; i++)
		deep[k++] = '[';
	for (int i = 0; i < 63; i++)
		deep[k++] = ']';
	snprintf(deep + k, sizeof(deep) - (size_t)k, "}");
	rix_snapshot *sn = dec(deep);
	rix_snapshot_free(sn);
	k = snprintf(deep, sizeof(deep), "{" T "," TR "," P ",\"d\":");
	for (int i = 0; i < 64; i++)
		deep[k++] = '[';
	for (int i = 0; i < 64; i++)
		deep[k++] = ']';
	snprintf(deep + k, sizeof(deep) - (size_t)k, "}");
	CORRUPT(deep, "too deep");

	/* Every truncation of a valid snapshot fails (exactly, not past the text: ASan watches). */
	size_t n = strlen(valid);
	for (size_t cut = 0; cut < n; cut++) {
		char *t = malloc(cut > 0 ? cut : 1); /* exactly: a read past the text is ASan's */
		memcpy(t, valid, cut);
		corrupt(t, cut, NULL);
		free(t);
	}
	/* Flipped bytes: refused or decoded, never a crash; what decodes encodes and decodes again. */
	static const unsigned char subst[] = { 0, '"', '\\', '{', '}', '[', ']', ',', ':', '0', 'a', 'n', ' ', 0x80, 0xff };
	size_t decoded = 0;
	for (size_t at = 0; at < n; at++) {
		for (size_t s = 0; s < sizeof(subst); s++) {
			unsigned char *t = malloc(n);
			memcpy(t, valid, n);
			t[at] = subst[s];
			rix_snapshot *x;
			int rc = rix_snapshot_decode(&x, t, n);
			if (rc != 0 && rc != RIX_ECORRUPT)
				fail_msg("flip at %zu to %02x: %d", at, subst[s], rc);
			if (rc == 0) {
				char *json;
				size_t jn;
				MUST(rix_snapshot_encode(&json, &jn, x));
				rix_snapshot *y;
				MUST(rix_snapshot_decode(&y, (const uint8_t *)json, jn));
				char *again;
				size_t an;
				MUST(rix_snapshot_encode(&again, &an, y));
				assert_int_equal(an, jn);
				assert_memory_equal(again, json, jn);
				rix_free(again);
				rix_free(json);
				rix_snapshot_free(y);
				rix_snapshot_free(x);
				decoded++;
			}
			free(t);
		}
	}
	assert_true(decoded > 0); /* the loop tested both ways */
#undef T
#undef TR
#undef P
}

/* ==== allocation failures ===================================================================== */

static int oom_decode_encode(void *arg)
{
	(void)arg;
	rix_snapshot *sn;
	int rc = rix_snapshot_decode(&sn, (const uint8_t *)valid, strlen(valid));
	if (rc != 0)
		return rc;
	char *json;
	size_t n;
	rc = rix_snapshot_encode(&json, &n, sn);
	if (rc == 0) {
		if (n != strlen(valid) || memcmp(json, valid, n) != 0)
			rc = rix_error_set(RIX_EINVAL, "encoded %s", json);
		rix_free(json);
	}
	rix_snapshot_free(sn);
	return rc;
}

struct tag_fx {
	rix_snapshot *sn;
};

static void tag_setup(void *arg)
{
	struct tag_fx *fx = arg;
	rix_snapshot_free(fx->sn);
	fx->sn = dec(valid);
}

static int oom_tags(void *arg)
{
	struct tag_fx *fx = arg;
	const char *add[] = { "x", "y", "b" }, *set[] = { "s1", "s2" };
	bool changed;
	int rc = rix_snapshot_add_tags(&changed, fx->sn, add, 3);
	if (rc != 0) {
		assert_int_equal(fx->sn->ntags, 2); /* unchanged */
		return rc;
	}
	assert_int_equal(fx->sn->ntags, 4);
	rc = rix_snapshot_set_tags(fx->sn, set, 2);
	if (rc != 0) {
		assert_int_equal(fx->sn->ntags, 4);
		return rc;
	}
	assert_string_equal(fx->sn->tags[1], "s2");
	return 0;
}

struct list_fx {
	rix_repo *r;
	rix_snapshot_list *l;
	size_t before;
};

static void list_setup(void *arg)
{
	struct list_fx *fx = arg;
	rix_snapshot_list_free(fx->l);
	fx->l = load_list(fx->r);
	fx->before = fx->l->count;
}

static int oom_keep_latest(void *arg)
{
	struct list_fx *fx = arg;
	int rc = rix_snapshot_list_keep_latest(fx->l, 1);
	if (rc != 0)
		assert_int_equal(fx->l->count, fx->before);
	else
		assert_int_equal(fx->l->count, 2);
	rix_snapshot *sn;
	const char *paths[] = { "rel/../p" };
	rix_snapshot_filter f = RIX_SNAPSHOT_FILTER_INIT;
	f.paths = paths;
	f.npaths = 1;
	if (rc == 0 && (rc = rix_snapshot_find(&sn, fx->l, "latest", &f)) == RIX_ENOTFOUND)
		rc = 0; /* no such path: the message was made */
	return rc;
}

/* Writes a snapshot of json (decoded, then rix_snapshot_write); its ID into *id. */
static void put_snapshot(rix_repo *r, const char *json, rix_id *id)
{
	rix_snapshot *sn = dec(json);
	MUST(rix_snapshot_write(id, r, sn));
	rix_snapshot_free(sn);
}

static void test_oom(void **state)
{
	(void)state;
	assert_true(rix_test_oom_loop("snapshot decode + encode", oom_decode_encode, NULL, 1000) > 10);
	struct tag_fx tf = { NULL };
	rix_test_oom o = { .what = "snapshot tags", .run = oom_tags, .arg = &tf, .max = 100, .setup = tag_setup,
			   .live = RIX_TEST_OOM_LIVE_UNCHECKED };
	assert_true(rix_test_oom_run(&o) > 3);
	rix_snapshot_free(tf.sn);

	char *dir = rix_test_new_dir("rix-snap-oom");
	struct list_fx lf = { init_repo(dir, 2), NULL, 0 };
	rix_id id;
	for (int i = 0; i < 4; i++) {
		char json[512];
		snprintf(json, sizeof(json), "{\"time\":\"2024-05-0%dT10:00:00Z\",\"tree\":\"" TREE "\",\"paths\":[\"/p\"],"
			 "\"hostname\":\"h%d\"}", i + 1, i % 2);
		put_snapshot(lf.r, json, &id);
	}
	rix_test_oom o2 = { .what = "snapshot keep_latest, find latest", .run = oom_keep_latest, .arg = &lf, .max = 100,
			    .setup = list_setup, .live = RIX_TEST_OOM_LIVE_UNCHECKED };
	assert_true(rix_test_oom_run(&o2) > 3);
	rix_snapshot_list_free(lf.l);
	rix_repo_free(lf.r);
	rix_test_free_dir(dir);
}

/* ==== filters, finding, against restic ======================================================== */

/* The tag lists of test_tags_flatten: commas, spaces around and inside, empty tags and lists. */
static const char *const tag_lists[] = { " a , b", "", "c,", ",,d d ,", "e\t", " ", "a" };
#define NTAG_LISTS (sizeof(tag_lists) / sizeof(tag_lists[0]))

static int oom_flatten(void *arg)
{
	(void)arg;
	const char **t;
	size_t n;
	int rc = rix_snapshot_tags_flatten(&t, &n, tag_lists, NTAG_LISTS);
	rix_free(t);
	return rc;
}

/* Tag lists flattened as restic's backup --tag flattens them: the tags of restic's snapshot. */
static void test_tags_flatten(void **state)
{
	(void)state;
	char *work = rix_test_new_dir("rix-snap-tags"), repo[4200], src[4200], args[4096] = "backup";
	snprintf(repo, sizeof(repo), "%s/repo", work);
	snprintf(src, sizeof(src), "%s/src", work);
	assert_int_equal(mkdir(src, 0700), 0);
	assert_int_equal(mkdir(repo, 0700), 0);
	rix_repo_free(init_repo(repo, 2));
	for (size_t i = 0; i < NTAG_LISTS; i++)
		snprintf(args + strlen(args), sizeof(args) - strlen(args), " --tag '%s'", tag_lists[i]);
	assert_int_equal(restic(NULL, repo, "%s '%s' >/dev/null", args, src), 0);
	char *out;
	assert_int_equal(restic(&out, repo, "snapshots --json"), 0);
	json_t *j = json_loads(out, 0, NULL), *want = json_object_get(json_array_get(j, 0), "tags");
	free(out);
	const char **tags;
	size_t n;
	MUST(rix_snapshot_tags_flatten(&tags, &n, tag_lists, NTAG_LISTS));
	assert_int_equal(n, json_array_size(want));
	assert_true(n >= 5); /* the lists hold a, b, c, "d d", e, a */
	for (size_t i = 0; i < n; i++)
		assert_string_equal(tags[i], json_string_value(json_array_get(want, i)));
	rix_free(tags);
	json_decref(j);
	/* None at all: NULL. */
	static const char *const empty[] = { "", " , ", "," };
	tags = (const char **)work;
	MUST(rix_snapshot_tags_flatten(&tags, &n, empty, 3));
	assert_null(tags);
	assert_int_equal(n, 0);
	MUST(rix_snapshot_tags_flatten(&tags, &n, NULL, 0));
	assert_null(tags);
	assert_true(rix_test_oom_loop("tags flatten", oom_flatten, NULL, 10) >= 1);
	rix_test_free_dir(work);
}


/* 24 snapshots: hosts h0..h2, tag sets, path sets, times in three zones (text order is not time order). */
static void make_filter_repo(rix_repo *r)
{
	static const char *const tags[] = { "", "\"a\"", "\"a\",\"b\"", "\"b\",\"c\"", "\"c\"", "\"a\",\"b\",\"c\"" };
	static const char *const paths[] = { "\"/data\"", "\"/home\",\"/data\"", "\"/home\"", "\"/data\",\"/home\"" };
	static const char *const zones[] = { "Z", "+05:00", "-03:30" };
	for (int i = 0; i < 24; i++) {
		char json[1024];
		snprintf(json, sizeof(json),
			 "{\"time\":\"2024-05-%02dT%02d:%02d:00%s\",\"tree\":\"" TREE "\",\"paths\":[%s],"
			 "\"hostname\":\"h%d\",\"tags\":[%s]}",
			 1 + i / 3, (7 * i) % 24, i, zones[i % 3], paths[(i / 2) % 4], i % 3, tags[i % 6]);
		rix_id id;
		put_snapshot(r, json, &id);
	}
}

struct filter_case {
	const char *restic; /* restic's flags */
	const char *hosts[3], *tags[3], *paths[3];
	size_t latest;
};

static void test_filters_like_restic(void **state)
{
	(void)state;
	char *dir = rix_test_new_dir("rix-snap-filter");
	rix_repo *r = init_repo(dir, 2);
	make_filter_repo(r);
	static const struct filter_case cases[] = {
		{ "", { NULL }, { NULL }, { NULL }, 0 },
		{ "--host h1", { "h1" }, { NULL }, { NULL }, 0 },
		{ "--host h1 --host h2", { "h1", "h2" }, { NULL }, { NULL }, 0 },
		{ "--host nope", { "nope" }, { NULL }, { NULL }, 0 },
		{ "--tag a", { NULL }, { "a" }, { NULL }, 0 },
		{ "--tag a,b", { NULL }, { "a,b" }, { NULL }, 0 },
		{ "--tag ' a , b '", { NULL }, { " a , b " }, { NULL }, 0 },
		{ "--tag a,b --tag c", { NULL }, { "a,b", "c" }, { NULL }, 0 },
		{ "--tag ''", { NULL }, { "" }, { NULL }, 0 },
		{ "--tag '' --tag c", { NULL }, { "", "c" }, { NULL }, 0 },
		{ "--tag ,a", { NULL }, { ",a" }, { NULL }, 0 },
		{ "--path /data", { NULL }, { NULL }, { "/data" }, 0 },
		{ "--path /data --path /home", { NULL }, { NULL }, { "/data", "/home" }, 0 },
		{ "--path /home/", { NULL }, { NULL }, { "/home/" }, 0 },
		{ "--host h2 --tag c --path /data", { "h2" }, { "c" }, { "/data" }, 0 },
		{ "--latest 1", { NULL }, { NULL }, { NULL }, 1 },
		{ "--latest 2", { NULL }, { NULL }, { NULL }, 2 },
		{ "--latest 3 --tag b", { NULL }, { "b" }, { NULL }, 3 },
		{ "--latest 1 --host h0 --path /home", { "h0" }, { NULL }, { "/home" }, 1 },
	};
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		const struct filter_case *fc = &cases[c];
		rix_snapshot_filter f = RIX_SNAPSHOT_FILTER_INIT;
		f.hosts = fc->hosts;
		f.tags = fc->tags;
		f.paths = fc->paths;
		while (f.nhosts < 3 && fc->hosts[f.nhosts] != NULL)
			f.nhosts++;
		while (f.ntags < 3 && fc->tags[f.ntags] != NULL)
			f.ntags++;
		while (f.npaths < 3 && fc->paths[f.npaths] != NULL)
			f.npaths++;
		rix_snapshot_list *l = load_list(r);
		assert_int_equal(l->count, 24);
		MUST(rix_snapshot_list_filter(l, &f));
		if (fc->latest > 0)
			MUST(rix_snapshot_list_keep_latest(l, fc->latest));
		char *want = restic_ids(dir, fc->restic), *got = list_ids(l);
		if (strcmp(want, got) != 0)
			fail_msg("%s: restic shows\n  %s\nrix\n  %s", fc->restic, want, got);
		free(want);
		free(got);
		rix_snapshot_list_free(l);
		/* latest under the same filter: restic's `snapshots latest` (no --latest N). */
		if (fc->latest == 0) {
			l = load_list(r);
			rix_snapshot *sn;
			int rc = rix_snapshot_find(&sn, l, "latest", &f);
			char args[256];
			snprintf(args, sizeof(args), "latest %s", fc->restic);
			want = restic_ids(dir, args);
			if (rc == RIX_ENOTFOUND) {
				assert_string_equal(want, "");
				assert_non_null(strstr(rix_error_last(), "no snapshot matched given filter"));
			} else {
				MUST(rc);
				char hex[65];
				rix_id_to_hex(hex, &sn->id);
				assert_string_equal(want, hex);
			}
			free(want);
			rix_snapshot_list_free(l);
		}
	}
	/* The order: by instant, not by the text of the times (zones). */
	rix_snapshot_list *l = load_list(r);
	for (size_t i = 1; i < l->count; i++)
		assert_true(rix_time_cmp(&l->items[i - 1]->time, &l->items[i]->time) <= 0);
	rix_snapshot_filter bad = RIX_SNAPSHOT_FILTER_INIT;
	bad.version = 99;
	assert_int_equal(rix_snapshot_list_filter(l, &bad), RIX_EINVAL);
	assert_false(rix_snapshot_matches(l->items[0], &bad));
	assert_true(rix_snapshot_matches(l->items[0], NULL));
	assert_int_equal(rix_snapshot_list_keep_latest(l, 0), RIX_EINVAL);
	assert_int_equal(l->count, 24);
	rix_snapshot_list_free(l);
	rix_repo_free(r);
	rix_test_free_dir(dir);
}

struct seen_errors {
	int calls;
	rix_id id;
	int code;
};

static void on_error(void *payload, const rix_id *eid, int code, const char *msg)
{
	struct seen_errors *seen = payload;
	assert_true(msg[0] != '\0');
	seen->calls++;
	seen->id = *eid;
	seen->code = code;
}

static void test_find(void **state)
{
	(void)state;
	char *dir = rix_test_new_dir("rix-snap-find");
	rix_repo *r = init_repo(dir, 2);
	make_filter_repo(r);
	rix_snapshot_list *l = load_list(r);
	/* 24 IDs: two share a first digit; one has a prefix of 3 digits no other has. */
	char hex[24][65];
	for (size_t i = 0; i < l->count; i++)
		rix_id_to_hex(hex[i], &l->items[i]->id);
	char shared[2] = "", unique[4] = "";
	for (size_t i = 0; i < 24; i++) {
		int same1 = 0, same3 = 0;
		for (size_t j = 0; j < 24; j++) {
			same1 += hex[i][0] == hex[j][0];
			same3 += memcmp(hex[i], hex[j], 3) == 0;
		}
		if (same1 > 1 && shared[0] == '\0')
			shared[0] = hex[i][0];
		if (same3 == 1 && unique[0] == '\0')
			memcpy(unique, hex[i], 3);
	}
	assert_true(shared[0] != '\0' && unique[0] != '\0');
	rix_snapshot *sn;
	char *out;
	/* Ambiguous: restic's cat snapshot refuses it too. */
	assert_int_equal(rix_snapshot_find(&sn, l, shared, NULL), RIX_EINVAL);
	assert_null(sn);
	assert_non_null(strstr(rix_error_last(), "multiple IDs with prefix"));
	rix_id id;
	assert_int_equal(rix_snapshot_find_id(&id, r, shared), RIX_EINVAL);
	assert_int_not_equal(restic(&out, dir, "--no-lock cat snapshot %s 2>&1", shared), 0);
	assert_non_null(strstr(out, "multiple IDs with prefix"));
	free(out);
	/* Unique: the one restic finds. */
	MUST(rix_snapshot_find(&sn, l, unique, NULL));
	MUST(rix_snapshot_find_id(&id, r, unique));
	assert_memory_equal(&id, &sn->id, sizeof(id));
	assert_int_equal(restic(&out, dir, "--no-lock cat snapshot %s", unique), 0);
	json_t *j = json_loads(out, 0, NULL);
	free(out);
	char *json;
	size_t n;
	MUST(rix_snapshot_encode(&json, &n, sn));
	json_t *mine = json_loads(json, 0, NULL);
	assert_true(json_equal(j, mine));
	json_decref(j);
	json_decref(mine);
	rix_free(json);
	/* A whole ID in upper case is that ID; a filter does not apply to an ID. */
	char upper[65];
	for (int i = 0; i < 65; i++)
		upper[i] = (char)(hex[5][i] >= 'a' && hex[5][i] <= 'f' ? hex[5][i] - 32 : hex[5][i]);
	const char *nohost[] = { "nope" };
	rix_snapshot_filter f = RIX_SNAPSHOT_FILTER_INIT;
	f.hosts = nohost;
	f.nhosts = 1;
	MUST(rix_snapshot_find(&sn, l, upper, &f));
	assert_ptr_equal(sn, l->items[5]);
	MUST(rix_snapshot_find_id(&id, r, upper));
	assert_memory_equal(&id, &l->items[5]->id, sizeof(id));
	/* Not there, empty, too long, not hex. */
	assert_int_equal(rix_snapshot_find(&sn, l, "zz", NULL), RIX_ENOTFOUND);
	assert_non_null(strstr(rix_error_last(), "no matching ID found for prefix \"zz\""));
	assert_int_equal(rix_snapshot_find_id(&id, r, "zz"), RIX_ENOTFOUND);
	assert_int_equal(rix_snapshot_find(&sn, l, "", NULL), RIX_EINVAL);
	char longer[70];
	snprintf(longer, sizeof(longer), "%s0", hex[3]);
	assert_int_equal(rix_snapshot_find(&sn, l, longer, NULL), RIX_ENOTFOUND);
	assert_int_equal(rix_snapshot_find(&sn, l, "latest", &f), RIX_ENOTFOUND);
	assert_non_null(strstr(rix_error_last(), "Hosts:[nope]"));
	/* latest: the newest; a relative --path is taken from the working directory, cleaned. */
	MUST(rix_snapshot_find(&sn, l, "latest", NULL));
	assert_ptr_equal(sn, l->items[23]);
	char cwd[4200];
	assert_non_null(getcwd(cwd, sizeof(cwd)));
	assert_int_equal(chdir("/"), 0);
	const char *rel[] = { "./x/../data//" };
	rix_snapshot_filter fr = RIX_SNAPSHOT_FILTER_INIT;
	fr.paths = rel;
	fr.npaths = 1;
	int rc = rix_snapshot_find(&sn, l, "latest", &fr);
	assert_int_equal(chdir(cwd), 0);
	MUST(rc);
	assert_true(sn->npaths >= 1);
	bool has = false;
	for (size_t i = 0; i < sn->npaths; i++)
		has |= strcmp(sn->paths[i], "/data") == 0;
	assert_true(has);
	rix_snapshot_list_free(l);

	/* Unreadable files: listed apart, reported once each, found by ID with their error. */
	rix_id junk;
	MUST(rix_repo_write_file(&junk, r, RIX_FILE_SNAPSHOT, "not json", 8));
	struct seen_errors seen = { 0 };
	MUST(rix_snapshot_list_load(&l, r, on_error, &seen));
	assert_int_equal(seen.calls, 1);
	assert_memory_equal(&seen.id, &junk, sizeof(junk));
	assert_int_equal(seen.code, RIX_ECORRUPT);
	assert_int_equal(l->count, 24);
	assert_int_equal(l->nunreadable, 1);
	assert_memory_equal(&l->unreadable[0].id, &junk, sizeof(junk));
	assert_int_equal(l->unreadable[0].code, RIX_ECORRUPT);
	char jh[65];
	rix_id_to_hex(jh, &junk);
	assert_int_equal(rix_snapshot_find(&sn, l, jh, NULL), RIX_ECORRUPT);
	assert_int_equal(rix_snapshot_load(&sn, r, &junk), RIX_ECORRUPT);
	assert_non_null(strstr(rix_error_last(), "not a JSON object"));
	rix_snapshot_list_free(l);
	/* A damaged file: its SHA-256 is not its name. */
	char path[4300];
	snprintf(path, sizeof(path), "%s/snapshots/%s", dir, hex[7]);
	flip_byte(path, 40);
	seen.calls = 0;
	MUST(rix_snapshot_list_load(&l, r, on_error, &seen));
	assert_int_equal(seen.calls, 2);
	assert_int_equal(l->count, 23);
	assert_int_equal(l->nunreadable, 2);
	assert_int_equal(rix_snapshot_find(&sn, l, hex[7], NULL), RIX_ECORRUPT);
	rix_snapshot_list_free(l);
	/* remove, and a second time: not found. */
	MUST(rix_snapshot_remove(r, &junk));
	assert_int_equal(rix_snapshot_remove(r, &junk), RIX_ENOTFOUND);
	assert_int_equal(rix_snapshot_load(&sn, r, &junk), RIX_ENOTFOUND);
	rix_repo_free(r);
	rix_test_free_dir(dir);
}

/* ==== rewriting =============================================================================== */

static void test_rewrite(void **state)
{
	(void)state;
	rix_test_need_restic();
	char *work = rix_test_new_dir("rix-snap-rw"), repo[4200], src[4200];
	snprintf(repo, sizeof(repo), "%s/repo", work);
	snprintf(src, sizeof(src), "%s/src", work);
	assert_int_equal(mkdir(src, 0700), 0);
	rix_test_put_file(src, "a", "a", 1);
	assert_int_equal(mkdir(repo, 0700), 0);
	rix_repo_free(init_repo(repo, 2)); /* a cheap key: restic's init would take a second per command */
	assert_int_equal(restic(NULL, repo, "backup --tag old,keep '%s' >/dev/null", src), 0);
	rix_repo *r = open_repo(repo, NULL);
	rix_snapshot_list *l = load_list(r);
	assert_int_equal(l->count, 1);
	rix_snapshot *sn = l->items[0];
	rix_id first = sn->id;
	char first_hex[65];
	rix_id_to_hex(first_hex, &first);

	/* What restic's tag writes for --add new --remove old: rix's rewrite must write the same JSON. */
	bool c1, c2;
	const char *add[] = { "new" }, *del[] = { "old" };
	MUST(rix_snapshot_add_tags(&c1, sn, add, 1));
	rix_snapshot_remove_tags(&c2, sn, del, 1);
	assert_true(c1 && c2);
	MUST(rix_snapshot_rewrite(r, sn));
	assert_true(sn->has_original);
	assert_memory_equal(&sn->original, &first, sizeof(first));
	assert_memory_not_equal(&sn->id, &first, sizeof(first));
	assert_int_equal(count_files(r, RIX_FILE_SNAPSHOT), 1);
	rix_snapshot *old;
	assert_int_equal(rix_snapshot_load(&old, r, &first), RIX_ENOTFOUND);
	/* restic reads it: the tags and the original. */
	char *out;
	assert_int_equal(restic(&out, repo, "snapshots --json"), 0);
	json_t *j = json_loads(out, 0, NULL);
	free(out);
	json_t *o = json_array_get(j, 0);
	assert_string_equal(json_string_value(json_object_get(o, "original")), first_hex);
	assert_string_equal(json_string_value(json_array_get(json_object_get(o, "tags"), 0)), "new");
	assert_string_equal(json_string_value(json_array_get(json_object_get(o, "tags"), 1)), "keep");
	json_decref(j);
	/* A second rewrite keeps the first original. */
	MUST(rix_snapshot_set_tags(sn, del, 1));
	MUST(rix_snapshot_rewrite(r, sn));
	assert_memory_equal(&sn->original, &first, sizeof(first));
	rix_snapshot_list_free(l);
	assert_int_equal(count_files(r, RIX_FILE_SNAPSHOT), 1);

	/* restic's tag of the same change from the same start gives the same JSON as rix's first rewrite. */
	assert_int_equal(restic(NULL, repo, "backup --tag old,keep '%s' >/dev/null", src), 0);
	l = load_list(r);
	assert_int_equal(l->count, 2);
	rix_snapshot *second = l->items[1];
	rix_id second_id = second->id;
	MUST(rix_snapshot_add_tags(&c1, second, add, 1));
	rix_snapshot_remove_tags(&c2, second, del, 1);
	second->has_original = true;
	second->original = second_id;
	char *expect;
	size_t expect_n;
	MUST(rix_snapshot_encode(&expect, &expect_n, second));
	char sid[65];
	rix_id_to_hex(sid, &second_id);
	assert_int_equal(restic(NULL, repo, "tag --add new --remove old %s >/dev/null", sid), 0);
	rix_snapshot_list_free(l);
	l = load_list(r);
	rix_snapshot *by_restic = NULL;
	for (size_t i = 0; i < l->count; i++)
		if (l->items[i]->has_original && memcmp(&l->items[i]->original, &second_id, sizeof(second_id)) == 0)
			by_restic = l->items[i];
	assert_non_null(by_restic);
	uint8_t *theirs;
	size_t theirs_n;
	MUST(rix_repo_read_file(&theirs, &theirs_n, r, RIX_FILE_SNAPSHOT, &by_restic->id));
	if (theirs_n != expect_n || memcmp(theirs, expect, expect_n) != 0)
		fail_msg("restic's tag wrote\n  %.*s\nrix's rewrite writes\n  %s", (int)theirs_n, theirs, expect);
	rix_free(theirs);
	rix_free(expect);
	rix_snapshot_list_free(l);

	/* A snapshot that was not loaded has no ID to replace. */
	sn = dec("{\"time\":\"2024-05-01T10:00:00Z\",\"tree\":\"" TREE "\",\"paths\":[]}");
	assert_int_equal(rix_snapshot_rewrite(r, sn), RIX_EINVAL);
	rix_snapshot_free(sn);
	rix_repo_free(r);
	rix_test_free_dir(work);
}

/* ==== workers ================================================================================= */

/*
 * The threads that read snapshot files. Each read waits (up to 10 s) until `want` threads have
 * read one, so that every worker the load starts is seen reading, however they are scheduled:
 * a worker holds its file until the others have theirs.
 */
struct readers {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_t seen[64];
	unsigned nseen, want;
	bool overflow;
};

static void on_read(void *payload, rix_test_fault_op op, rix_file_type t)
{
	struct readers *rd = payload;
	if (op != RIX_TEST_FAULT_READ || t != RIX_FILE_SNAPSHOT)
		return;
	pthread_mutex_lock(&rd->mu);
	bool known = false;
	for (unsigned i = 0; i < rd->nseen; i++)
		known |= pthread_equal(rd->seen[i], pthread_self()) != 0;
	if (!known && rd->nseen < 64)
		rd->seen[rd->nseen++] = pthread_self();
	else if (!known)
		rd->overflow = true;
	pthread_cond_broadcast(&rd->cv);
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 10;
	while (rd->nseen < rd->want)
		if (pthread_cond_timedwait(&rd->cv, &rd->mu, &until) == ETIMEDOUT)
			break;
	pthread_mutex_unlock(&rd->mu);
}

/* Loads the 24 snapshots of dir with workers; the number of threads that read them. */
static unsigned load_threads(const char *dir, unsigned workers, unsigned want, bool *caller_read)
{
	rix_test_fault f;
	rix_test_fault_init(&f);
	struct readers rd = { .want = want };
	pthread_mutex_init(&rd.mu, NULL);
	pthread_cond_init(&rd.cv, NULL);
	rix_backend *local, *b;
	MUST(rix_backend_local_open(&local, dir, false));
	MUST(rix_test_fault_backend(&b, local, &f));
	rix_repo_options o = fast;
	o.workers = workers;
	rix_repo *r;
	MUST(rix_repo_open(&r, b, PW, strlen(PW), &o));
	assert_int_equal(rix_repo_workers(r), workers);
	f.on_call_payload = &rd; /* set before any other thread runs */
	f.on_call = on_read;
	rix_snapshot_list *l = load_list(r);
	assert_int_equal(l->count, 24);
	rix_snapshot_list_free(l);
	rix_repo_free(r);
	rix_test_fault_destroy(&f);
	assert_false(rd.overflow);
	*caller_read = false;
	for (unsigned i = 0; i < rd.nseen; i++)
		*caller_read |= pthread_equal(rd.seen[i], pthread_self()) != 0;
	pthread_cond_destroy(&rd.cv);
	pthread_mutex_destroy(&rd.mu);
	return rd.nseen;
}

/* rix_repo_options.workers threads load the snapshots (the calling thread one of them), 8 when it is 0. */
static void test_load_workers(void **state)
{
	(void)state;
	char *dir = rix_test_new_dir("rix-snap-workers");
	rix_repo *r = init_repo(dir, 2);
	make_filter_repo(r);
	rix_repo_free(r);
	bool caller;
	assert_int_equal(load_threads(dir, 1, 1, &caller), 1);
	assert_true(caller);
	/* Each reader waits for the others, so no worker finishes the list alone; a thread too
	 * many would find files left and be seen. */
	assert_int_equal(load_threads(dir, 3, 3, &caller), 3);
	assert_true(caller);
	assert_int_equal(load_threads(dir, 0, 8, &caller), 8);
	assert_true(caller);
	rix_test_free_dir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_restic_round_trip),
		cmocka_unit_test(test_members_kept),
		cmocka_unit_test(test_go_strings),
		cmocka_unit_test(test_hostile),
		cmocka_unit_test(test_oom),
		cmocka_unit_test(test_tags_flatten),
		cmocka_unit_test(test_filters_like_restic),
		cmocka_unit_test(test_find),
		cmocka_unit_test(test_rewrite),
		cmocka_unit_test(test_load_workers),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
