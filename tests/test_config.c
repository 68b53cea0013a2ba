/*
 * tests/test_config.c — the repository config file (repo/config.c): restic's fixtures and
 * freshly made restic repositories open, rix's encoding is restic's bytes exactly, every
 * malformed input is RIX_ECORRUPT with a message, tampering is caught by the MAC, allocation
 * failure is clean; the chunker polynomial check against brute force, known restic polynomials
 * and products; and the real restic binary reads (`cat config`, `check`) a repository rix made.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include <jansson.h>

#include "rix/alloc.h"
#include "rix/config.h"
#include "rix/crypto.h"
#include "rix/error.h"
#include "repo/config_internal.h"
#include "testutil.h"

#define assert_error_has(code, expr, text)                                                          \
	do {                                                                                       \
		int rc_ = (expr);                                                                  \
		if (rc_ != (code))                                                                 \
			fail_msg("%s: got %d (%s), want %d", #expr, rc_, rix_error_last(), (code)); \
		if (strstr(rix_error_last(), (text)) == NULL)                                      \
			fail_msg("%s: message \"%s\" lacks \"%s\"", #expr, rix_error_last(), (text));  \
	} while (0)

/* The v2 fixture's config as restic wrote it (123 bytes, no newline). */
#define ID64 "b5fa340c082c4c23c201e0f18e141a17ccb5edff70be8610e5c2393af1cc14d8"
#define POL "370cecb30e240b"
#define MV "\"version\":2"
#define MI "\"id\":\"" ID64 "\""
#define MP "\"chunker_polynomial\":\"" POL "\""
static const char restic_v2[] = "{" MV "," MI "," MP "}";

/* The only file in <dir>/keys, read whole (malloc'd). */
static char *only_key_file(const char *dir, size_t *len)
{
	char kdir[4096], path[8192];
	snprintf(kdir, sizeof(kdir), "%s/keys", dir);
	DIR *d = opendir(kdir);
	if (d == NULL)
		fail_msg("cannot open %s", kdir);
	char *buf = NULL;
	int files = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", kdir, e->d_name);
		free(buf);
		buf = rix_test_must_read(path, len);
		files++;
	}
	closedir(d);
	assert_int_equal(files, 1);
	return buf;
}

static rix_key *open_key_in(const char *dir, const char *password)
{
	size_t len;
	char *kf = only_key_file(dir, &len);
	rix_key *key = NULL;
	if (rix_key_open_file(&key, kf, len, password, strlen(password)) != 0)
		fail_msg("key file in %s: %s", dir, rix_error_last());
	free(kf);
	return key;
}

static void assert_config_equal(const rix_config *a, const rix_config *b)
{
	assert_int_equal(a->version, b->version);
	assert_memory_equal(a->id.b, b->id.b, RIX_ID_SIZE);
	assert_true(a->chunker_polynomial == b->chunker_polynomial);
	assert_string_equal(a->other_chunker, b->other_chunker);
}

/* What restic printed (`restic cat config`, kept as config.expected.json), read with jansson. */
static void expected_config(const char *json, size_t len, rix_config *out)
{
	json_t *j = json_loadb(json, len, 0, NULL);
	assert_non_null(j);
	out->version = (int)json_integer_value(json_object_get(j, "version"));
	const char *id = json_string_value(json_object_get(j, "id"));
	const char *pol = json_string_value(json_object_get(j, "chunker_polynomial"));
	assert_non_null(id);
	assert_non_null(pol);
	assert_int_equal(rix_id_from_hex(&out->id, id, strlen(id)), 0);
	out->chunker_polynomial = strtoull(pol, NULL, 16);
	json_decref(j);
}

/* ---- restic's own files ------------------------------------------------------------------- */

static void test_restic_fixtures(void **state)
{
	(void)state;
	size_t plen;
	char *pw = rix_test_data_file("restic_repo_password", &plen);
	for (int v = 1; v <= 2; v++) {
		char dir[4096], rel[64];
		snprintf(dir, sizeof(dir), "%s/restic_repo_v%d", rix_test_data_dir(), v);
		rix_key *key = open_key_in(dir, pw);
		size_t n, elen;
		snprintf(rel, sizeof(rel), "restic_repo_v%d/config", v);
		uint8_t *file = rix_test_data_file(rel, &n);
		snprintf(rel, sizeof(rel), "restic_repo_v%d/config.expected.json", v);
		char *expected = rix_test_data_file(rel, &elen);
		rix_config got, want;
		memset(&got, 0, sizeof(got));
		assert_int_equal(rix_config_open(&got, key, file, n), 0);
		expected_config(expected, elen, &want);
		assert_int_equal(want.version, v);
		assert_config_equal(&got, &want);
		/* restic's pretty printing (what cat config shows) parses to the same. */
		rix_config pretty;
		assert_int_equal(rix_config_parse(&pretty, expected, elen), 0);
		assert_config_equal(&pretty, &want);
		/* The plaintext is restic's exact bytes: encode(parse(x)) == x, with no newline. */
		uint8_t *plain = malloc(n);
		assert_int_equal(rix_crypto_open(key, file, n, plain), 0);
		char *json;
		size_t len;
		assert_int_equal(rix_config_encode(&json, &len, &got), 0);
		assert_int_equal(len, n - RIX_CRYPTO_OVERHEAD);
		assert_int_equal(len, 123);
		assert_memory_equal(json, plain, len);
		assert_int_equal(json[len], '\0');
		/* The sealed form round-trips under the same key (a fresh IV: other bytes). */
		uint8_t *sealed;
		size_t sn;
		assert_int_equal(rix_config_seal(&sealed, &sn, key, &got), 0);
		assert_int_equal(sn, n);
		assert_true(memcmp(sealed, file, n) != 0);
		rix_config back;
		assert_int_equal(rix_config_open(&back, key, sealed, sn), 0);
		assert_config_equal(&back, &got);
		rix_free(sealed);
		rix_free(json);
		free(plain);
		free(file);
		free(expected);
		rix_key_free(key);
	}
	free(pw);
}

/*
 * A version 2 repository made now by `restic init` (the fixtures cover version 1; init spends
 * ~3 s calibrating scrypt): its config plaintext is compact JSON without a trailing newline,
 * not compressed; rix reads it and encodes exactly those bytes.
 */
static void test_restic_init_bytes(void **state)
{
	(void)state;
	{
		int v = 2;
		char dir[] = "/tmp/rix-config-init-XXXXXX";
		assert_non_null(mkdtemp(dir));
		assert_int_equal(rmdir(dir), 0); /* restic init wants to create it */
		char args[64], *out;
		snprintf(args, sizeof(args), "init --repository-version %d", v);
		if (rix_test_restic(dir, "pw", args, &out) != 0)
			fail_msg("restic init: %s", out);
		free(out);
		rix_key *key = open_key_in(dir, "pw");
		char path[4200];
		snprintf(path, sizeof(path), "%s/config", dir);
		size_t n;
		uint8_t *file = rix_test_must_read(path, &n);
		uint8_t *plain = malloc(n);
		assert_int_equal(rix_crypto_open(key, file, n, plain), 0);
		size_t pn = n - RIX_CRYPTO_OVERHEAD;
		assert_int_equal(plain[0], '{'); /* not 0x02: not compressed */
		assert_int_equal(plain[pn - 1], '}');
		rix_config cfg;
		assert_int_equal(rix_config_open(&cfg, key, file, n), 0);
		assert_int_equal(cfg.version, v);
		assert_int_equal(rix_chunker_polynomial_check(cfg.chunker_polynomial), 0);
		char *json;
		size_t len;
		assert_int_equal(rix_config_encode(&json, &len, &cfg), 0);
		if (len != pn || memcmp(json, plain, pn) != 0)
			fail_msg("restic wrote %.*s, rix encodes %s", (int)pn, (char *)plain, json);
		rix_free(json);
		free(plain);
		free(file);
		rix_key_free(key);
		rix_test_remove_tree(dir);
	}
}

/* ---- the JSON ------------------------------------------------------------------------------- */

typedef struct {
	const char *s;
	size_t n; /* 0: strlen(s) */
} input;
#define IN(lit) { lit, 0 }
#define BYTES(lit) { lit, sizeof(lit) - 1 } /* literals with NUL bytes */

static size_t input_len(const input *in)
{
	return in->n != 0 ? in->n : strlen(in->s);
}

static void test_parse_accepts(void **state)
{
	(void)state;
	rix_config want = { 0 };
	want.version = 2;
	assert_int_equal(rix_id_from_hex(&want.id, ID64, 64), 0);
	want.chunker_polynomial = 0x370cecb30e240bull;
	static const input ok[] = {
		IN("{" MV "," MI "," MP "}"),
		IN("{" MP "," MI "," MV "}"),
		IN("{" MI "," MV "," MP "}\n"),
		IN(" \t\r\n{ " MV " , " MI " ,\n" MP "\n}\r\n\t "),
		/* upper-case hex, leading zeros: restic's ParseUint(s, 16, 64) takes them */
		IN("{" MV ",\"id\":\"B5FA340C082C4C23C201E0F18E141A17CCB5EDFF70BE8610E5C2393AF1CC14D8\"," MP "}"),
		IN("{" MV "," MI ",\"chunker_polynomial\":\"00000000000000000000370CECB30E240B\"}"),
		/* an escaped name that unescapes to the exact name */
		IN("{\"\\u0076ersion\":2," MI "," MP "}"),
		IN("{" MV "," MI ",\"chunker\\u005fpolynomial\":\"" POL "\"}"),
		/* unknown members, ignored as restic ignores them (valid JSON of any shape) */
		IN("{\"x\":1," MV "," MI "," MP "}"),
		IN("{" MV ",\"a\":[1,-2.5e+3,0,true,false,null,\"s\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\"]," MI "," MP "}"),
		IN("{" MV "," MI "," MP ",\"o\":{\"k\":{\"k\":[[],{}]},\"\":\"\"},\"n\":-0.0E-0}"),
		IN("{" MV "," MI "," MP ",\"bytes\":\"\xff\xfe\xc3\x28\",\"ver\":2,\"versions\":2,\"idx\":1}"),
		IN("{" MV "," MI "," MP ",\"\\ud800\":1,\"K\":2,\"chunker_polynomialx\":3}"),
	};
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		rix_config got;
		memset(&got, 0xAA, sizeof(got));
		int rc = rix_config_parse(&got, ok[i].s, input_len(&ok[i]));
		if (rc != 0)
			fail_msg("accept case %zu (%s): %d %s", i, ok[i].s, rc, rix_error_last());
		assert_config_equal(&got, &want);
	}
}

/*
 * rustic's chunker members: restic's values (or null, or another spelling serde would not read)
 * leave other_chunker empty; another chunker or other sizes fill it (the first such member);
 * such a config is not encoded (restic's three members would drop it).
 */
static void test_parse_rustic_chunker(void **state)
{
	(void)state;
	static const struct {
		const char *json, *other;
	} cases[] = {
		{ "{" MV "," MI ",\"chunker\":\"Rabin\"," MP ",\"chunk_size\":1048576,\"chunk_min_size\":524288,"
		  "\"chunk_max_size\":8388608}", "" },
		{ "{" MV "," MI "," MP ",\"chunker\":null,\"chunk_size\":null}", "" },
		{ "{" MV "," MI "," MP ",\"Chunker\":\"FixedSize\",\"chunk_sizes\":1}", "" },
		{ "{" MV "," MI "," MP ",\"chunker\":\"FixedSize\",\"chunk_size\":1048576}", "\"chunker\":\"FixedSize\"" },
		{ "{" MV "," MI "," MP ",\"chunker\":\"Rabin\",\"chunk_size\":2097152}", "\"chunk_size\":2097152" },
		{ "{" MV "," MI "," MP ",\"chunk_min_size\":1}", "\"chunk_min_size\":1" },
		{ "{" MV "," MI "," MP ",\"chunk_max_size\":\"x\"}", "\"chunk_max_size\":\"x\"" },
		{ "{\"chunker\":{\"a\":\"0123456789012345678901234567890123456789\"}," MV "," MI "," MP "}",
		  "\"chunker\":{\"a\":\"0123456789012345678901234567890123" }, /* the value cut at 40 bytes */
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		rix_config got;
		if (rix_config_parse(&got, cases[i].json, strlen(cases[i].json)) != 0)
			fail_msg("case %zu (%s): %s", i, cases[i].json, rix_error_last());
		if (strcmp(got.other_chunker, cases[i].other) != 0)
			fail_msg("case %zu: other_chunker \"%s\", want \"%s\"", i, got.other_chunker, cases[i].other);
		char *json;
		size_t len;
		int rc = rix_config_encode(&json, &len, &got);
		if (cases[i].other[0] != '\0') {
			assert_int_equal(rc, RIX_EINVAL);
			assert_null(json);
		} else {
			assert_int_equal(rc, 0);
			rix_free(json);
		}
	}
}

static void test_parse_rejects(void **state)
{
	(void)state;
	static const input bad[] = {
		/* not an object */
		IN(""), IN(" \n\t"), IN("{"), IN("}"), IN("[]"), IN("null"), IN("2"), IN("\"{}\""),
		IN("\xef\xbb\xbf{" MV "," MI "," MP "}"), /* a BOM: restic refuses it too */
		/* missing members */
		IN("{}"), IN("{" MI "," MP "}"), IN("{" MV "," MP "}"), IN("{" MV "," MI "}"),
		/* duplicates of ours */
		IN("{" MV "," MV "," MI "," MP "}"), IN("{" MV "," MI "," MI "," MP "}"),
		IN("{" MV "," MI "," MP "," MP "}"), IN("{" MV "," MI "," MP ",\"version\":1}"),
		IN("{" MV "," MI "," MP ",\"\\u0069d\":\"" ID64 "\"}"),
		/* names restic reads as ours (its decoder ignores case, folds K and long s) */
		IN("{\"Version\":2," MI "," MP "}"), IN("{" MV ",\"ID\":\"" ID64 "\"," MP "}"),
		IN("{" MV "," MI ",\"CHUNKER_POLYNOMIAL\":\"" POL "\"}"),
		IN("{\"\\u0056ersion\":2," MI "," MP "}"),
		/* version */
		IN("{\"version\":0," MI "," MP "}"), IN("{\"version\":3," MI "," MP "}"),
		IN("{\"version\":-1," MI "," MP "}"), IN("{\"version\":1.0," MI "," MP "}"),
		IN("{\"version\":2.0," MI "," MP "}"), IN("{\"version\":1e0," MI "," MP "}"),
		IN("{\"version\":2E0," MI "," MP "}"), IN("{\"version\":\"2\"," MI "," MP "}"),
		IN("{\"version\":null," MI "," MP "}"), IN("{\"version\":true," MI "," MP "}"),
		IN("{\"version\":[2]," MI "," MP "}"), IN("{\"version\":{\"v\":2}," MI "," MP "}"),
		IN("{\"version\":02," MI "," MP "}"), IN("{\"version\":-0," MI "," MP "}"),
		IN("{\"version\":18446744073709551618," MI "," MP "}"), IN("{\"version\":-," MI "," MP "}"),
		IN("{\"version\":2.," MI "," MP "}"), IN("{\"version\":.5," MI "," MP "}"),
		IN("{\"version\":+2," MI "," MP "}"), IN("{\"version\":2" MI "," MP "}"),
		IN("{\"version\":," MI "," MP "}"),
		/* id */
		IN("{" MV ",\"id\":\"b5fa340c082c4c23c201e0f18e141a17ccb5edff70be8610e5c2393af1cc14d\"," MP "}"),
		IN("{" MV ",\"id\":\"b5fa340c082c4c23c201e0f18e141a17ccb5edff70be8610e5c2393af1cc14d80\"," MP "}"),
		IN("{" MV ",\"id\":\"g5fa340c082c4c23c201e0f18e141a17ccb5edff70be8610e5c2393af1cc14d8\"," MP "}"),
		IN("{" MV ",\"id\":\"b5fa340c082c4c23c201e0f18e141a17ccb5edff70be8610e5c2393af1cc14d \"," MP "}"),
		IN("{" MV ",\"id\":\"\\u0062" "5fa340c082c4c23c201e0f18e141a17ccb5edff70be8610e5c2393af1cc14d8\"," MP "}"),
		IN("{" MV ",\"id\":\"\"," MP "}"), IN("{" MV ",\"id\":1," MP "}"), IN("{" MV ",\"id\":null," MP "}"),
		IN("{" MV ",\"id\":[\"" ID64 "\"]," MP "}"),
		/* chunker_polynomial */
		IN("{" MV "," MI ",\"chunker_polynomial\":\"0\"}"), IN("{" MV "," MI ",\"chunker_polynomial\":\"\"}"),
		IN("{" MV "," MI ",\"chunker_polynomial\":\"0000\"}"),
		IN("{" MV "," MI ",\"chunker_polynomial\":\"xyz\"}"),
		IN("{" MV "," MI ",\"chunker_polynomial\":\"0x370cecb30e240b\"}"),
		IN("{" MV "," MI ",\"chunker_polynomial\":\"+370cecb30e240b\"}"),
		IN("{" MV "," MI ",\"chunker_polynomial\":\"-370cecb30e240b\"}"),
		IN("{" MV "," MI ",\"chunker_polynomial\":\" 370cecb30e240b\"}"),
		IN("{" MV "," MI ",\"chunker_polynomial\":\"370cecb30e240b \"}"),
		IN("{" MV "," MI ",\"chunker_polynomial\":\"370cecb3_0e240b\"}"),
		IN("{" MV "," MI ",\"chunker_polynomial\":\"10000000000000000\"}"), /* 17 digits: 2^64 */
		IN("{" MV "," MI ",\"chunker_polynomial\":\"100370cecb30e240b\"}"), /* 2^64 + a good one */
		IN("{" MV "," MI ",\"chunker_polynomial\":\"370cecb30e240b0000\"}"),
		IN("{" MV "," MI ",\"chunker_polynomial\":\"\\u0033" "70cecb30e240b\"}"),
		IN("{" MV "," MI ",\"chunker_polynomial\":15526750702478347}"), /* the number itself */
		IN("{" MV "," MI ",\"chunker_polynomial\":null}"),
		IN("{" MV "," MI ",\"chunker_polynomial\":\"370cecb30e240a\"}"), /* even: x divides it */
		IN("{" MV "," MI ",\"chunker_polynomial\":\"3fffffffffffff\"}"), /* 54 terms: x+1 divides it */
		IN("{" MV "," MI ",\"chunker_polynomial\":\"7\"}"),              /* irreducible, degree 2 */
		IN("{" MV "," MI ",\"chunker_polynomial\":\"1b370cecb30e240b\"}"), /* degree 60 */
		IN("{" MV "," MI ",\"chunker_polynomial\":\"1\"}"),
		/* trailing garbage */
		IN("{" MV "," MI "," MP "}x"), IN("{" MV "," MI "," MP "}}"), IN("{" MV "," MI "," MP "},"),
		IN("{" MV "," MI "," MP "} {}"), BYTES("{" MV "," MI "," MP "}\0"),
		IN("{" MV "," MI "," MP "}\f"), IN("{" MV "," MI "," MP "}\v"),
		/* syntax */
		IN("{\"version\" 2," MI "," MP "}"), IN("{" MV " " MI "," MP "}"), IN("{" MV "," MI "," MP ",}"),
		IN("{," MV "," MI "," MP "}"), IN("{'version':2," MI "," MP "}"), IN("{version:2," MI "," MP "}"),
		IN("{" MV "," MI "," MP ";}"), IN("{" MV "," MI "," MP ":}"), IN("{" MV ",," MI "," MP "}"),
		BYTES("{\"version\":2,\0" MI "," MP "}"), BYTES("{" MV "," MI ",\"x\":\"\0\"," MP "}"),
		/* junk in unknown members */
		IN("{" MV "," MI "," MP ",\"x\":\"a\tb\"}"), IN("{" MV "," MI "," MP ",\"x\":\"\\q\"}"),
		IN("{" MV "," MI "," MP ",\"x\":\"\\u12\"}"), IN("{" MV "," MI "," MP ",\"x\":\"\\u12g4\"}"),
		IN("{" MV "," MI "," MP ",\"x\":\"abc}"), IN("{" MV "," MI "," MP ",\"x\":tru}"),
		IN("{" MV "," MI "," MP ",\"x\":nul}"), IN("{" MV "," MI "," MP ",\"x\":nulls}"),
		IN("{" MV "," MI "," MP ",\"x\":word}"), IN("{" MV "," MI "," MP ",\"x\":1.}"),
		IN("{" MV "," MI "," MP ",\"x\":01}"), IN("{" MV "," MI "," MP ",\"x\":-}"),
		IN("{" MV "," MI "," MP ",\"x\":1e}"), IN("{" MV "," MI "," MP ",\"x\":NaN}"),
		IN("{" MV "," MI "," MP ",\"x\":[1,]}"), IN("{" MV "," MI "," MP ",\"x\":[,1]}"),
		IN("{" MV "," MI "," MP ",\"x\":[1 2]}"), IN("{" MV "," MI "," MP ",\"x\":{\"a\"}}"),
		IN("{" MV "," MI "," MP ",\"x\":{\"a\":1,}}"), IN("{" MV "," MI "," MP ",\"x\":{1:2}}"),
		IN("{" MV "," MI "," MP ",\"x\":[{\"a\":[1,2}]}"), IN("{" MV "," MI "," MP ",\"x\":[}"),
		IN("{" MV "," MI "," MP ",\"x\":}"), IN("{" MV "," MI "," MP ",\"x\"}"),
		IN("{" MV "," MI "," MP ",\"x\\\":1}"),
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		rix_config got;
		memset(&got, 0xAA, sizeof(got));
		rix_error_clear();
		int rc = rix_config_parse(&got, bad[i].s, input_len(&bad[i]));
		if (rc != RIX_ECORRUPT)
			fail_msg("reject case %zu (%s): got %d, want RIX_ECORRUPT", i, bad[i].s, rc);
		if (strncmp(rix_error_last(), "config: ", 8) != 0 || strlen(rix_error_last()) < 16)
			fail_msg("reject case %zu (%s): message \"%s\"", i, bad[i].s, rix_error_last());
		for (size_t k = 0; k < sizeof(got); k++) /* *out untouched */
			assert_int_equal(((unsigned char *)&got)[k], 0xAA);
	}
	/* Valid configs plus one more member that restic reads as one of ours (its later duplicate
	 * wins there): refused, and only for that. */
	static const char *const folded[] = { "Version", "VERSION", "ver\xc5\xbfion", "ver\\u017fion", "Id", "iD",
					       "\\u0049d", "chun\xe2\x84\xaa" "er_polynomial", "chun\\u212aer_polynomial",
					       "CHUN\xe2\x84\xaa" "ER_POLYNOMIAL", "Chunker_Polynomial" };
	for (size_t i = 0; i < sizeof(folded) / sizeof(folded[0]); i++) {
		char buf[512];
		int k = snprintf(buf, sizeof(buf), "{" MV "," MI "," MP ",\"%s\":0}", folded[i]);
		rix_config c;
		if (rix_config_parse(&c, buf, (size_t)k) != RIX_ECORRUPT || strstr(rix_error_last(), "ignore case") == NULL)
			fail_msg("folded name %s: %s", buf, rix_error_last());
	}
	/* Names that fold to nothing of ours stay unknown: ASCII only folds letters, and no other
	 * non-ASCII character folds to ASCII (U+0130/U+0131 do not fold to i in simple folding). */
	static const char *const other[] = { "versio", "versionn", "\xc4\xb1" "d", "\xc4\xb0" "d", "chunker-polynomial",
					      "chunker_polynomia\xcc\x81", "vers\\u0131on", "\\u0000version" };
	for (size_t i = 0; i < sizeof(other) / sizeof(other[0]); i++) {
		char buf[512];
		int k = snprintf(buf, sizeof(buf), "{" MV "," MI "," MP ",\"%s\":0}", other[i]);
		rix_config c;
		if (rix_config_parse(&c, buf, (size_t)k) != 0)
			fail_msg("unknown name %s: %s", buf, rix_error_last());
	}
	/* A few messages say what is wrong. */
	rix_config c;
	assert_error_has(RIX_ECORRUPT, rix_config_parse(&c, "{" MV "," MV "}", 25), "duplicate key \"version\" at byte 13");
	assert_error_has(RIX_ECORRUPT, rix_config_parse(&c, "{" MV ",\"\\u0076ersion\":1}", 28),
			 "duplicate key \"version\" at byte 13");
	assert_error_has(RIX_ECORRUPT, rix_config_parse(&c, "{" MV "," MI "}", strlen("{" MV "," MI "}")),
			 "\"chunker_polynomial\" is missing");
	assert_error_has(RIX_ECORRUPT, rix_config_parse(&c, "{\"Version\":2}", 13), "ignore case");
	assert_error_has(RIX_ECORRUPT, rix_config_parse(&c, "{\"version\":3}", 13), "is 3, want 1 or 2");
	const char *deg2 = "{" MV "," MI ",\"chunker_polynomial\":\"7\"}";
	assert_error_has(RIX_ECORRUPT, rix_config_parse(&c, deg2, strlen(deg2)), "degree 2, want 53");
	const char *even = "{" MV "," MI ",\"chunker_polynomial\":\"370cecb30e240a\"}";
	assert_error_has(RIX_ECORRUPT, rix_config_parse(&c, even, strlen(even)), "reducible");
	const char *empty = "{" MV "," MI ",\"chunker_polynomial\":\"\"}";
	assert_error_has(RIX_ECORRUPT, rix_config_parse(&c, empty, strlen(empty)), "\"chunker_polynomial\" is empty");
	const char *shortid = "{" MV ",\"id\":\"abc\"," MP "}";
	assert_error_has(RIX_ECORRUPT, rix_config_parse(&c, shortid, strlen(shortid)), "\"id\" is not 64 hex digits (3 bytes)");
	const char *trail = "{" MV "," MI "," MP "} x";
	assert_error_has(RIX_ECORRUPT, rix_config_parse(&c, trail, strlen(trail)), "trailing bytes after the object at byte 124");
	/* Over the size cap, before any parsing. */
	size_t big = RIX_CONFIG_MAX_SIZE + 1;
	char *huge = malloc(big);
	memset(huge, ' ', big);
	memcpy(huge, restic_v2, sizeof(restic_v2) - 1);
	assert_error_has(RIX_ECORRUPT, rix_config_parse(&c, huge, big), "more than");
	assert_int_equal(rix_config_parse(&c, huge, big - 1), 0); /* the same, at the cap: fine */
	free(huge);
}

/*
 * One depth limit with the index decoder: 64 levels counted from the top object, then refused
 * (iteratively: a million open brackets are refused at level 65, not by the C stack).
 */
static void test_parse_depth(void **state)
{
	(void)state;
	static char buf[RIX_CONFIG_MAX_SIZE];
	for (int levels = 62; levels <= 66; levels++) {
		int n = snprintf(buf, sizeof(buf), "{" MV "," MI "," MP ",\"d\":");
		for (int i = 1; i < levels; i++) /* the object is level 1 */
			n += snprintf(buf + n, sizeof(buf) - (size_t)n, i % 2 ? "[" : "{\"k\":");
		buf[n++] = '0';
		for (int i = levels - 1; i >= 1; i--)
			buf[n++] = i % 2 ? ']' : '}';
		buf[n++] = '}';
		rix_config c;
		int rc = rix_config_parse(&c, buf, (size_t)n);
		if (levels <= 64 && rc != 0)
			fail_msg("%d levels: %d (%s)", levels, rc, rix_error_last());
		if (levels > 64) {
			assert_int_equal(rc, RIX_ECORRUPT);
			assert_non_null(strstr(rix_error_last(), "nesting too deep"));
		}
	}
	int n = snprintf(buf, sizeof(buf), "{" MV "," MI "," MP ",\"d\":");
	memset(buf + n, '[', sizeof(buf) - (size_t)n);
	rix_config c;
	assert_error_has(RIX_ECORRUPT, rix_config_parse(&c, buf, sizeof(buf)), "nesting too deep");
}

/* Every proper prefix of a valid config (compact and pretty) is corrupt, and read in bounds. */
static void test_parse_truncated(void **state)
{
	(void)state;
	size_t elen;
	char *pretty = rix_test_data_file("restic_repo_v1/config.expected.json", &elen);
	const struct {
		const char *s;
		size_t n;
	} whole[] = { { restic_v2, sizeof(restic_v2) - 1 }, { pretty, elen } };
	for (size_t w = 0; w < 2; w++) {
		rix_config c;
		assert_int_equal(rix_config_parse(&c, whole[w].s, whole[w].n), 0);
		/* The closing brace is the last byte that is not whitespace. */
		size_t end = whole[w].n;
		while (end > 0 && whole[w].s[end - 1] != '}')
			end--;
		for (size_t k = 0; k < end; k++) {
			char *copy = malloc(k + 1); /* exactly k bytes (+1 for malloc(0)): ASan sees overreads */
			memcpy(copy, whole[w].s, k);
			int rc = rix_config_parse(&c, copy, k);
			if (rc != RIX_ECORRUPT || rix_error_last()[0] == '\0')
				fail_msg("prefix of %zu bytes: %d (%s)", k, rc, rix_error_last());
			free(copy);
		}
	}
	free(pretty);
}

static void test_encode(void **state)
{
	(void)state;
	rix_config c = { 0 };
	c.version = 1;
	for (int i = 0; i < RIX_ID_SIZE; i++)
		c.id.b[i] = (uint8_t)(0x10 * i + 0x0f);
	c.chunker_polynomial = 0x3e106b9b4ef59dull;
	char *json;
	size_t len;
	assert_int_equal(rix_config_encode(&json, &len, &c), 0);
	assert_string_equal(json, "{\"version\":1,\"id\":\"0f1f2f3f4f5f6f7f8f9fafbfcfdfefff0f1f2f3f4f5f6f7f8f9fafbfcfdfefff\","
				  "\"chunker_polynomial\":\"3e106b9b4ef59d\"}");
	assert_int_equal(len, strlen(json));
	rix_free(json);
	/* Refused: nothing restic or rix would not read back. */
	rix_config b = c;
	b.version = 3;
	assert_error_has(RIX_EINVAL, rix_config_encode(&json, &len, &b), "version 3");
	assert_null(json);
	assert_int_equal(len, 0);
	b = c;
	b.chunker_polynomial = 0x3e106b9b4ef59cull;
	assert_error_has(RIX_EINVAL, rix_config_encode(&json, &len, &b), "reducible");
	assert_null(json);
	b.chunker_polynomial = 0;
	assert_error_has(RIX_EINVAL, rix_config_encode(&json, &len, &b), "degree -1");
	uint8_t *file = (uint8_t *)1;
	size_t n = 7;
	rix_key *key;
	assert_int_equal(rix_key_random(&key), 0);
	assert_error_has(RIX_EINVAL, rix_config_seal(&file, &n, key, &b), "degree");
	assert_null(file);
	assert_int_equal(n, 0);
	rix_key_free(key);
}

/* ---- the polynomial ------------------------------------------------------------------------ */

/* Irreducible by trial division by every polynomial of degree 1 .. deg/2. */
static int brute_irreducible(uint64_t p)
{
	int d = rix__poly_deg(p);
	if (d < 1)
		return 0;
	for (uint64_t q = 2; rix__poly_deg(q) <= d / 2; q++) {
		uint64_t r = p;
		int dq = rix__poly_deg(q);
		for (int dr = rix__poly_deg(r); dr >= dq; dr = rix__poly_deg(r))
			r ^= q << (dr - dq);
		if (r == 0)
			return 0;
	}
	return 1;
}

static void test_polynomial_small_degrees(void **state)
{
	(void)state;
	/* The number of irreducible polynomials of degree n over GF(2) (OEIS A001037). */
	static const int count[] = { 0, 2, 1, 2, 3, 6, 9, 18, 30, 56, 99, 186, 335, 630, 1161 };
	assert_false(rix__poly_irreducible(0));
	assert_false(rix__poly_irreducible(1));
	for (int d = 1; d <= 14; d++) {
		int n = 0;
		for (uint64_t p = (uint64_t)1 << d; p < (uint64_t)2 << d; p++) {
			int rabin = rix__poly_irreducible(p), brute = brute_irreducible(p);
			if (rabin != brute)
				fail_msg("%llx: Rabin says %d, trial division %d", (unsigned long long)p, rabin, brute);
			n += rabin;
		}
		assert_int_equal(n, count[d]);
	}
}

static void test_polynomial_check(void **state)
{
	(void)state;
	/* restic's: the fixtures' and two made by restic 0.14's init while writing this test. */
	static const uint64_t restic_pols[] = { 0x370cecb30e240bull, 0x3e106b9b4ef59dull, 0x3b29b870706b77ull,
						0x3ac4d4420d9c19ull };
	for (size_t i = 0; i < 4; i++) {
		assert_int_equal(rix_chunker_polynomial_check(restic_pols[i]), 0);
		assert_int_equal(rix__poly_deg(restic_pols[i]), 53);
		/* Even neighbours have the factor x. */
		assert_error_has(RIX_EINVAL, rix_chunker_polynomial_check(restic_pols[i] ^ 1), "reducible");
	}
	assert_error_has(RIX_EINVAL, rix_chunker_polynomial_check(0), "degree -1");
	assert_error_has(RIX_EINVAL, rix_chunker_polynomial_check(7), "degree 2, want 53");
	assert_error_has(RIX_EINVAL, rix_chunker_polynomial_check(0x370cecb30e240bull << 1 | 1), "degree 54");
	assert_error_has(RIX_EINVAL, rix_chunker_polynomial_check(UINT64_MAX), "degree 63");
	/* x^53 + 1 and the all-ones polynomial (54 terms): x + 1 divides both. */
	assert_error_has(RIX_EINVAL, rix_chunker_polynomial_check((1ull << 53) | 1), "reducible");
	assert_error_has(RIX_EINVAL, rix_chunker_polynomial_check((1ull << 54) - 1), "reducible");
	/* Products a * b with deg a + deg b = 53, odd constant terms and an odd number of terms
	 * (so neither x nor x + 1 divides them): what a weak test would let through. */
	uint64_t st = 53;
	int tried = 0;
	for (int i = 0; tried < 2000; i++) {
		int da = 2 + i % 26; /* 2..27 */
		uint64_t a = (rix_test_next(&st) & (((uint64_t)1 << da) - 1)) | (uint64_t)1 << da | 1;
		uint64_t b = (rix_test_next(&st) & (((uint64_t)1 << (53 - da)) - 1)) | (uint64_t)1 << (53 - da) | 1;
		uint64_t p = rix__poly_mul(a, b);
		assert_int_equal(rix__poly_deg(p), 53);
		if (__builtin_popcountll(p) % 2 == 0)
			continue;
		tried++;
		if (rix_chunker_polynomial_check(p) != RIX_EINVAL)
			fail_msg("%llx = %llx * %llx passed", (unsigned long long)p, (unsigned long long)a,
				 (unsigned long long)b);
	}
	/* Squares and cubes of irreducible polynomials (x^2+x+1)^k are reducible too. */
	uint64_t sq = rix__poly_mul(0x7, 0x7), cube = rix__poly_mul(sq, 0x7);
	assert_false(rix__poly_irreducible(sq));
	assert_false(rix__poly_irreducible(cube));
	/* About 2/53 of restic's candidates (bit 0 and 53 set) are irreducible: 3.8%. */
	int irreducible = 0;
	for (int i = 0; i < 20000; i++) {
		uint64_t p = (rix_test_next(&st) & ((1ull << 53) - 1)) | 1ull << 53 | 1;
		irreducible += rix__poly_irreducible(p);
	}
	assert_true(irreducible > 600 && irreducible < 900);
}

static void test_new(void **state)
{
	(void)state;
	rix_config a, b;
	for (int v = 1; v <= 2; v++) {
		assert_int_equal(rix_config_new(&a, v), 0);
		assert_int_equal(rix_config_new(&b, v), 0);
		assert_int_equal(a.version, v);
		assert_int_equal(rix_chunker_polynomial_check(a.chunker_polynomial), 0);
		assert_int_equal(rix_chunker_polynomial_check(b.chunker_polynomial), 0);
		assert_true(memcmp(a.id.b, b.id.b, RIX_ID_SIZE) != 0);
		assert_true(a.chunker_polynomial != b.chunker_polynomial);
		/* encode -> parse is the identity */
		char *json;
		size_t len;
		assert_int_equal(rix_config_encode(&json, &len, &a), 0);
		rix_config back;
		assert_int_equal(rix_config_parse(&back, json, len), 0);
		assert_config_equal(&a, &back);
		rix_free(json);
	}
	assert_error_has(RIX_EINVAL, rix_config_new(&a, 0), "version 0");
	assert_error_has(RIX_EINVAL, rix_config_new(&a, 3), "version 3");
}

/* ---- the stored file ---------------------------------------------------------------------- */

/* Seals raw plaintext (not necessarily a valid config) as a config file would be. */
static uint8_t *seal_raw(const rix_key *key, const void *plain, size_t n, size_t *out_n)
{
	uint8_t *f = malloc(n + RIX_CRYPTO_OVERHEAD);
	assert_int_equal(rix_crypto_seal(key, plain, n, f), 0);
	*out_n = n + RIX_CRYPTO_OVERHEAD;
	return f;
}

static void test_open_tampered(void **state)
{
	(void)state;
	rix_key *key, *other;
	assert_int_equal(rix_key_random(&key), 0);
	assert_int_equal(rix_key_random(&other), 0);
	rix_config cfg, got;
	assert_int_equal(rix_config_new(&cfg, 2), 0);
	uint8_t *file;
	size_t n;
	assert_int_equal(rix_config_seal(&file, &n, key, &cfg), 0);
	assert_int_equal(n, 123 + RIX_CRYPTO_OVERHEAD);
	assert_int_equal(rix_config_open(&got, key, file, n), 0);
	assert_config_equal(&got, &cfg);
	assert_error_has(RIX_EAUTH, rix_config_open(&got, other, file, n), "MAC does not verify");
	/* Every bit flipped, one at a time: an error (the MAC, or an all-zero IV), never success. */
	for (size_t i = 0; i < n; i++) {
		for (int bit = 0; bit < 8; bit++) {
			file[i] ^= (uint8_t)(1u << bit);
			int rc = rix_config_open(&got, key, file, n);
			if (rc != RIX_EAUTH && rc != RIX_ECORRUPT)
				fail_msg("bit %d of byte %zu flipped: %d", bit, i, rc);
			file[i] ^= (uint8_t)(1u << bit);
		}
	}
	/* Cut short anywhere, and too short for IV and MAC. */
	for (size_t k = 0; k < n; k++) {
		int rc = rix_config_open(&got, key, file, k);
		assert_true(rc == RIX_EAUTH || rc == RIX_ECORRUPT);
	}
	assert_error_has(RIX_ECORRUPT, rix_config_open(&got, key, file, 31), "shorter than IV and MAC");
	rix_free(file);
	/* Authentic but not a config: empty, compressed, junk, too large. */
	size_t fn;
	uint8_t *f = seal_raw(key, "", 0, &fn);
	assert_error_has(RIX_ECORRUPT, rix_config_open(&got, key, f, fn), "empty");
	free(f);
	uint8_t zplain[64] = { 0x02, 0x28, 0xb5, 0x2f, 0xfd };
	f = seal_raw(key, zplain, sizeof(zplain), &fn);
	assert_error_has(RIX_ECORRUPT, rix_config_open(&got, key, f, fn), "compressed");
	free(f);
	f = seal_raw(key, "{\"version\":2}", 13, &fn);
	assert_error_has(RIX_ECORRUPT, rix_config_open(&got, key, f, fn), "missing");
	free(f);
	size_t big = RIX_CONFIG_MAX_SIZE + 1;
	uint8_t *bigp = calloc(1, big);
	f = seal_raw(key, bigp, big, &fn);
	assert_error_has(RIX_ECORRUPT, rix_config_open(&got, key, f, fn), "more than");
	free(f);
	free(bigp);
	rix_key_free(key);
	rix_key_free(other);
}

/* ---- allocation failure ---------------------------------------------------------------------- */

struct oom_arg {
	const rix_key *key;
	rix_config cfg;
};

static int oom_round(void *arg)
{
	const struct oom_arg *a = arg;
	const rix_key *key = a->key;
	const rix_config *cfg = &a->cfg;
	uint8_t *file = NULL;
	size_t n;
	char *json = NULL;
	size_t len;
	int rc = rix_config_seal(&file, &n, key, cfg);
	if (rc != 0) {
		assert_null(file);
		return rc;
	}
	rix_config got;
	rc = rix_config_open(&got, key, file, n);
	rix_free(file);
	if (rc != 0)
		return rc;
	assert_config_equal(&got, cfg);
	rc = rix_config_encode(&json, &len, &got);
	if (rc != 0) {
		assert_null(json);
		return rc;
	}
	rc = rix_config_parse(&got, json, len);
	rix_free(json);
	return rc;
}

static void test_allocation_failure(void **state)
{
	(void)state;
	rix_key *key;
	assert_int_equal(rix_key_random(&key), 0);
	struct oom_arg a = { .key = key };
	assert_int_equal(rix_config_new(&a.cfg, 1), 0);
	/* Every failed allocation fails the round (must_fail); seal: JSON + file; open: plaintext;
	 * encode: JSON, so more than 3 rounds. */
	rix_test_oom o = { .what = "config", .run = oom_round, .arg = &a, .max = 100, .must_fail = 1 };
	assert_true(rix_test_oom_run(&o) > 3);
	rix_key_free(key);
}

/* ---- restic reads what rix makes --------------------------------------------------------------- */

/*
 * A whole new repository from rix: master key, key file (scrypt N=128, r=1, p=1; restic 0.14
 * accepts N down to 2), config, empty folders. restic must print the same config, and check it.
 */
static void make_rix_repo(int version)
{
	char dir[] = "/tmp/rix-config-repo-XXXXXX";
	rix_test_need_restic();
	assert_non_null(mkdtemp(dir));
	static const char *const sub[] = { "keys", "data", "index", "snapshots", "locks" };
	for (int i = 0; i < 5; i++) {
		char path[4200];
		snprintf(path, sizeof(path), "%s/%s", dir, sub[i]);
		assert_int_equal(mkdir(path, 0700), 0);
	}
	rix_key *master;
	assert_int_equal(rix_key_random(&master), 0);
	char *kf;
	size_t kn;
	assert_int_equal(rix_key_create_file(&kf, &kn, master, "rix pw", 6, 128, 1, 1, "rix", "test"), 0);
	rix_id kid;
	char name[80];
	rix_sha256(&kid, kf, kn);
	memcpy(name, "keys/", 5);
	rix_id_to_hex(name + 5, &kid);
	rix_test_put_file(dir, name, kf, kn);
	rix_config cfg;
	assert_int_equal(rix_config_new(&cfg, version), 0);
	uint8_t *file;
	size_t n;
	assert_int_equal(rix_config_seal(&file, &n, master, &cfg), 0);
	rix_test_put_file(dir, "config", file, n);
	char *json;
	size_t len;
	assert_int_equal(rix_config_encode(&json, &len, &cfg), 0);
	rix_test_restic_cat_config_equals(dir, "rix pw", json, len);
	char *out;
	if (rix_test_restic(dir, "rix pw", "check", &out) != 0)
		fail_msg("restic check of the v%d repository rix made: %s", version, out);
	assert_non_null(strstr(out, "no errors were found"));
	free(out);
	/* restic refuses, as rix does, a reducible polynomial of degree 53 (a product). */
	char bad[256];
	char hex[65];
	rix_id_to_hex(hex, &cfg.id);
	uint64_t prod = rix__poly_mul(0x2000003, 0x1000000b); /* degrees 25 and 28 */
	int bn = snprintf(bad, sizeof(bad), "{\"version\":%d,\"id\":\"%s\",\"chunker_polynomial\":\"%llx\"}",
			  version, hex, (unsigned long long)prod);
	rix_config c;
	assert_error_has(RIX_ECORRUPT, rix_config_parse(&c, bad, (size_t)bn), "reducible");
	size_t sn;
	uint8_t *sealed = seal_raw(master, bad, (size_t)bn, &sn);
	rix_test_put_file(dir, "config", sealed, sn);
	assert_int_not_equal(rix_test_restic(dir, "rix pw", "cat config", &out), 0);
	assert_non_null(strstr(out, "invalid chunker polynomial"));
	free(out);
	free(sealed);
	rix_free(json);
	rix_free(file);
	rix_free(kf);
	rix_key_free(master);
	rix_test_remove_tree(dir);
}

static void test_restic_reads_rix_repo(void **state)
{
	(void)state;
	make_rix_repo(1);
	make_rix_repo(2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_restic_fixtures),
		cmocka_unit_test(test_restic_init_bytes),
		cmocka_unit_test(test_parse_accepts),
		cmocka_unit_test(test_parse_rejects),
		cmocka_unit_test(test_parse_rustic_chunker),
		cmocka_unit_test(test_parse_depth),
		cmocka_unit_test(test_parse_truncated),
		cmocka_unit_test(test_encode),
		cmocka_unit_test(test_polynomial_small_degrees),
		cmocka_unit_test(test_polynomial_check),
		cmocka_unit_test(test_new),
		cmocka_unit_test(test_open_tampered),
		cmocka_unit_test(test_allocation_failure),
		cmocka_unit_test(test_restic_reads_rix_repo),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
