/*
 * tests/test_crypto.c — seal/open, tampering, SHA-256 known answers, and restic
 * interoperability: key files and configs written by restic 0.14 (tests/data/restic_repo_v*)
 * open with the password; a config sealed by rix is read back by the real restic binary.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <cmocka.h>

#include <jansson.h>

#include "rix/alloc.h"
#include "rix/crypto.h"
#include "rix/error.h"
#include "testutil.h"

/* The one key file of a fixture repository, and its name (the ID). */
static char *key_file(int version, size_t *len, char name[65])
{
	char dir[1024];
	snprintf(dir, sizeof(dir), "%s/restic_repo_v%d/keys", rix_test_data_dir(), version);
	DIR *d = opendir(dir);
	assert_non_null(d);
	struct dirent *e;
	char *buf = NULL;
	while ((e = readdir(d)) != NULL) {
		if (strlen(e->d_name) != 64)
			continue;
		char path[2048];
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		buf = rix_test_read_file(path, len);
		memcpy(name, e->d_name, 65);
	}
	closedir(d);
	assert_non_null(buf);
	return buf;
}

static rix_key *open_fixture_key(int version)
{
	size_t len, plen;
	char name[65];
	char *kf = key_file(version, &len, name);
	char *pw = rix_test_data_file("restic_repo_password", &plen);
	rix_key *key = NULL;
	int rc = rix_key_open_file(&key, kf, len, pw, plen);
	if (rc != 0)
		fail_msg("opening the v%d key file: %s", version, rix_error_last());
	free(kf);
	free(pw);
	return key;
}

static void test_sha256_known_answers(void **state)
{
	(void)state;
	rix_id id;
	char hex[65];
	rix_sha256(&id, "abc", 3);
	rix_id_to_hex(hex, &id);
	assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	rix_sha256(&id, "", 0);
	rix_id_to_hex(hex, &id);
	assert_string_equal(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
	/* A stored file's ID is the SHA-256 of its bytes: restic named the key files so. */
	for (int v = 1; v <= 2; v++) {
		size_t len;
		char name[65];
		char *kf = key_file(v, &len, name);
		rix_sha256(&id, kf, len);
		rix_id_to_hex(hex, &id);
		assert_string_equal(hex, name);
		free(kf);
	}
}

static void test_seal_open_round_trip(void **state)
{
	(void)state;
	rix_key *key;
	assert_int_equal(rix_key_random(&key), 0);
	static const size_t sizes[] = { 0, 1, 15, 16, 17, 1000, 65536 + 3, (1u << 20) + 7 };
	uint64_t st = 1;
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		size_t n = sizes[s];
		uint8_t *plain = malloc(n + 1), *sealed = malloc(n + RIX_CRYPTO_OVERHEAD), *back = malloc(n + 1);
		rix_test_fill_random(plain, n, &st);
		assert_int_equal(rix_crypto_seal(key, plain, n, sealed), 0);
		assert_int_equal(rix_crypto_open(key, sealed, n + RIX_CRYPTO_OVERHEAD, back), 0);
		assert_memory_equal(back, plain, n);
		/* In place: the plaintext lands right after the IV. */
		uint8_t *was = malloc(n + RIX_CRYPTO_OVERHEAD);
		memcpy(was, sealed, n + RIX_CRYPTO_OVERHEAD);
		assert_int_equal(rix_crypto_open(key, sealed, n + RIX_CRYPTO_OVERHEAD, sealed + RIX_CRYPTO_IV_SIZE), 0);
		assert_memory_equal(sealed + RIX_CRYPTO_IV_SIZE, plain, n);
		/* Sealed again in place: the very bytes it had, which open again. */
		assert_int_equal(rix_crypto_reseal_in_place(key, sealed, n + RIX_CRYPTO_OVERHEAD), 0);
		assert_memory_equal(sealed, was, n + RIX_CRYPTO_OVERHEAD);
		assert_int_equal(rix_crypto_open(key, sealed, n + RIX_CRYPTO_OVERHEAD, back), 0);
		assert_memory_equal(back, plain, n);
		free(was);
		free(plain);
		free(sealed);
		free(back);
	}
	uint8_t shortobj[RIX_CRYPTO_OVERHEAD - 1] = { 1 };
	assert_int_equal(rix_crypto_reseal_in_place(key, shortobj, sizeof(shortobj)), RIX_ECORRUPT);
	/* Two seals of the same plaintext differ (random IV), both open. */
	uint8_t a[64 + RIX_CRYPTO_OVERHEAD], b[64 + RIX_CRYPTO_OVERHEAD];
	uint8_t msg[64] = "the same message";
	assert_int_equal(rix_crypto_seal(key, msg, 64, a), 0);
	assert_int_equal(rix_crypto_seal(key, msg, 64, b), 0);
	assert_true(memcmp(a, b, sizeof(a)) != 0);
	rix_key_free(key);
	rix_key_free(NULL);
}

static void test_tampering_and_bad_input(void **state)
{
	(void)state;
	rix_key *key, *other;
	assert_int_equal(rix_key_random(&key), 0);
	assert_int_equal(rix_key_random(&other), 0);
	enum { N = 100 };
	uint8_t msg[N], sealed[N + RIX_CRYPTO_OVERHEAD], out[N];
	uint64_t st = 2;
	rix_test_fill_random(msg, N, &st);
	assert_int_equal(rix_crypto_seal(key, msg, N, sealed), 0);
	/* Every single flipped bit, anywhere, fails authentication and writes nothing. */
	for (size_t i = 0; i < sizeof(sealed); i++) {
		for (int bit = 0; bit < 8; bit += 3) {
			sealed[i] ^= (uint8_t)(1 << bit);
			memset(out, 0xAA, sizeof(out));
			assert_int_equal(rix_crypto_open(key, sealed, sizeof(sealed), out), RIX_EAUTH);
			for (size_t k = 0; k < N; k++)
				assert_int_equal(out[k], 0xAA);
			sealed[i] ^= (uint8_t)(1 << bit);
		}
	}
	/* Wrong key, truncation, too short, all-zero IV. */
	assert_int_equal(rix_crypto_open(other, sealed, sizeof(sealed), out), RIX_EAUTH);
	assert_int_equal(rix_crypto_open(key, sealed, sizeof(sealed) - 1, out), RIX_EAUTH);
	assert_int_equal(rix_crypto_open(key, sealed, RIX_CRYPTO_OVERHEAD - 1, out), RIX_ECORRUPT);
	assert_true(strstr(rix_error_last(), "shorter") != NULL);
	uint8_t zero_iv[N + RIX_CRYPTO_OVERHEAD];
	memcpy(zero_iv, sealed, sizeof(zero_iv));
	memset(zero_iv, 0, RIX_CRYPTO_IV_SIZE);
	assert_int_equal(rix_crypto_open(key, zero_iv, sizeof(zero_iv), out), RIX_ECORRUPT);
	assert_int_equal(rix_crypto_open(key, sealed, sizeof(sealed), out), 0);
	assert_memory_equal(out, msg, N);
	rix_key_free(key);
	rix_key_free(other);
}

/* Decrypts a fixture's config with its key and compares with what `restic cat config` printed. */
static void check_restic_config(int version)
{
	rix_key *key = open_fixture_key(version);
	char rel[64];
	size_t n, elen;
	snprintf(rel, sizeof(rel), "restic_repo_v%d/config", version);
	char *sealed = rix_test_data_file(rel, &n);
	snprintf(rel, sizeof(rel), "restic_repo_v%d/config.expected.json", version);
	char *expected = rix_test_data_file(rel, &elen);
	char *plain = malloc(n);
	assert_int_equal(rix_crypto_open(key, (uint8_t *)sealed, n, (uint8_t *)plain), 0);
	json_t *got = json_loadb(plain, n - RIX_CRYPTO_OVERHEAD, 0, NULL);
	json_t *want = json_loadb(expected, elen, 0, NULL);
	assert_non_null(got);
	assert_non_null(want);
	assert_true(json_equal(got, want));
	assert_int_equal(json_integer_value(json_object_get(got, "version")), version);
	json_decref(got);
	json_decref(want);
	free(plain);
	free(sealed);
	free(expected);
	rix_key_free(key);
}

static void test_restic_key_files_and_configs(void **state)
{
	(void)state;
	check_restic_config(1);
	check_restic_config(2);
}

static void test_wrong_password(void **state)
{
	(void)state;
	size_t len;
	char name[65];
	char *kf = key_file(2, &len, name);
	rix_key *key = (rix_key *)1;
	assert_int_equal(rix_key_open_file(&key, kf, len, "correct horsf", 13), RIX_EAUTH);
	assert_null(key);
	assert_true(strstr(rix_error_last(), "wrong password") != NULL);
	free(kf);
}

/* Key files that are not: each is RIX_ECORRUPT with a message, quickly (no huge scrypt). */
static void test_bad_key_files(void **state)
{
	(void)state;
	static const char *const bad[] = {
		"",
		"{",
		"[]",
		"{\"kdf\":\"argon2\",\"N\":16,\"r\":1,\"p\":1,\"salt\":\"AAAA\",\"data\":\"AAAA\"}",
		"{\"kdf\":\"scrypt\",\"N\":15,\"r\":1,\"p\":1,\"salt\":\"AAAA\",\"data\":\"AAAA\"}",
		"{\"kdf\":\"scrypt\",\"N\":-16,\"r\":1,\"p\":1,\"salt\":\"AAAA\",\"data\":\"AAAA\"}",
		"{\"kdf\":\"scrypt\",\"N\":\"16\",\"r\":1,\"p\":1,\"salt\":\"AAAA\",\"data\":\"AAAA\"}",
		/* 128 * 2^40 * 8 bytes of scrypt memory: refused before any work. */
		"{\"kdf\":\"scrypt\",\"N\":1099511627776,\"r\":8,\"p\":1,\"salt\":\"AAAA\",\"data\":\"AAAA\"}",
		"{\"kdf\":\"scrypt\",\"N\":16,\"r\":1,\"p\":1,\"salt\":\"!!!!\",\"data\":\"AAAA\"}",
		"{\"kdf\":\"scrypt\",\"N\":16,\"r\":1,\"p\":1,\"data\":\"AAAA\"}",
		"{\"kdf\":\"scrypt\",\"N\":16,\"r\":1,\"p\":1,\"salt\":\"AAAA\",\"data\":\"AAAA\"}",
		"{\"kdf\":\"scrypt\",\"N\":16,\"r\":1,\"p\":1,\"salt\":\"AAAA\",\"data\":\"not base64\"}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		rix_key *key = NULL;
		int rc = rix_key_open_file(&key, bad[i], strlen(bad[i]), "pw", 2);
		if (rc != RIX_ECORRUPT)
			fail_msg("case %zu: got %d (%s), want RIX_ECORRUPT", i, rc, rix_error_last());
		assert_null(key);
		assert_true(rix_error_last()[0] != '\0');
	}
	/* A real key file with its sealed data cut short or altered: never a crash. */
	size_t len;
	char name[65];
	char *kf = key_file(1, &len, name);
	char *data = strstr(kf, "\"data\":\"");
	assert_non_null(data);
	data += 8;
	data[10] = data[10] == 'A' ? 'B' : 'A';
	rix_key *key = NULL;
	assert_int_equal(rix_key_open_file(&key, kf, len, "correct horse", 13), RIX_EAUTH);
	free(kf);
}

/* ---- The real restic binary as the oracle -------------------------------------------------- */

/*
 * Copies fixture repository restic_repo_v<version> into a fresh directory (dir: a mkdtemp
 * template), with the folders restic expects; without its key files if drop_keys.
 */
static void restic_repo_copy(int version, char *dir, int drop_keys)
{
	rix_test_need_restic();
	assert_non_null(mkdtemp(dir));
	char cmd[4096];
	int k = snprintf(cmd, sizeof(cmd),
			 "cp -r '%s/restic_repo_v%d/.' '%s/' && mkdir -p '%s/data' '%s/index' '%s/snapshots' '%s/locks'"
			 " && chmod -R u+w '%s'",
			 rix_test_data_dir(), version, dir, dir, dir, dir, dir, dir);
	if (drop_keys)
		snprintf(cmd + k, sizeof(cmd) - (size_t)k, " && rm -f '%s'/keys/*", dir);
	assert_int_equal(system(cmd), 0);
}

/* A config sealed by rix, with the master key from restic's key file, is read by restic. */
static void test_restic_reads_rix_sealed_config(void **state)
{
	(void)state;
	char dir[] = "/tmp/rix-crypto-XXXXXX";
	restic_repo_copy(2, dir, 0);
	rix_key *key = open_fixture_key(2);
	const char *json = "{\"version\":2,\"id\":\"00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\",\"chunker_polynomial\":\"25b468838dcb75\"}";
	size_t n = strlen(json);
	uint8_t *sealed = malloc(n + RIX_CRYPTO_OVERHEAD);
	assert_int_equal(rix_crypto_seal(key, json, n, sealed), 0);
	rix_test_put_file(dir, "config", sealed, n + RIX_CRYPTO_OVERHEAD);
	rix_test_restic_cat_config_equals(dir, "correct horse", json, n);
	rix_test_remove_tree(dir);
	free(sealed);
	rix_key_free(key);
}

static void test_create_key_file_round_trip(void **state)
{
	(void)state;
	rix_key *master, *back = NULL;
	assert_int_equal(rix_key_random(&master), 0);
	char *json;
	size_t len;
	assert_int_equal(rix_key_create_file(&json, &len, master, "pw", 2, 128, 1, 1, "user", "host"), 0);
	assert_int_equal(strlen(json), len);
	assert_non_null(strstr(json, "\"kdf\":\"scrypt\""));
	assert_int_equal(rix_key_open_file(&back, json, len, "pw", 2), 0);
	/* The same master key: what one seals, the other opens. */
	uint8_t msg[40] = "sealed under the original master key", sealed[40 + RIX_CRYPTO_OVERHEAD], out[40];
	assert_int_equal(rix_crypto_seal(master, msg, sizeof(msg), sealed), 0);
	assert_int_equal(rix_crypto_open(back, sealed, sizeof(sealed), out), 0);
	assert_memory_equal(out, msg, sizeof(msg));
	rix_key *none = (rix_key *)1;
	assert_int_equal(rix_key_open_file(&none, json, len, "px", 2), RIX_EAUTH);
	assert_null(none);
	rix_free(json);
	/* Parameters refused before any work. */
	assert_int_equal(rix_key_create_file(&json, &len, master, "pw", 2, 100, 1, 1, NULL, NULL), RIX_EINVAL);
	assert_null(json);
	assert_int_equal(rix_key_create_file(&json, &len, master, "pw", 2, (uint64_t)1 << 40, 8, 1, NULL, NULL), RIX_EINVAL);
	rix_key_free(master);
	rix_key_free(back);
}

/* One key file opened (or created) per round of the allocation-failure loops below. */
struct key_oom {
	rix_key *master;
	char *json; /* open: the key file; create: the file made (NULL after a failure) */
	size_t len;
	rix_key *key; /* open: what it gave */
	bool outer, inner; /* open: a failure in the key file's JSON, in the master key's */
};

static int key_open_round(void *arg)
{
	struct key_oom *k = arg;
	k->key = (rix_key *)1;
	return rix_key_open_file(&k->key, k->json, k->len, "pw", 2);
}

/* A failure leaves no key and says where; the success is the same master key. */
static void key_open_check(void *arg, const rix_test_oom_round *round)
{
	struct key_oom *k = arg;
	if (round->rc != 0) {
		assert_null(k->key);
		k->outer |= strstr(rix_error_last(), "out of memory reading its JSON") != NULL;
		k->inner |= strstr(rix_error_last(), "out of memory reading the master key's JSON") != NULL;
		return;
	}
	uint8_t msg[16] = "the same key", sealed[16 + RIX_CRYPTO_OVERHEAD], out[16];
	MUST(rix_crypto_seal(k->master, msg, sizeof(msg), sealed));
	MUST(rix_crypto_open(k->key, sealed, sizeof(sealed), out));
	assert_memory_equal(out, msg, sizeof(msg));
	rix_key_free(k->key);
}

/* Creates a key file and frees it again (so that a success leaves nothing alive either). */
static int key_create_round(void *arg)
{
	struct key_oom *k = arg;
	k->json = (char *)1;
	int rc = rix_key_create_file(&k->json, &k->len, k->master, "pw", 2, 128, 1, 1, "user", "host");
	if (rc == 0) {
		assert_int_equal(strlen(k->json), k->len);
		rix_free(k->json);
		k->json = NULL;
	}
	return rc;
}

static void key_create_check(void *arg, const rix_test_oom_round *round)
{
	(void)round;
	assert_null(((struct key_oom *)arg)->json);
}

/*
 * jansson allocates through rix's hook: failing allocation N, for every N, makes opening a key
 * file fail with RIX_ENOMEM (never "not JSON"), leak nothing, and the loop reaches jansson's
 * allocations for both the key file's JSON and the decrypted master key's. Creating one, too.
 */
static void test_key_file_allocation_failure(void **state)
{
	(void)state;
	struct key_oom k = { 0 };
	MUST(rix_key_random(&k.master));
	MUST(rix_key_create_file(&k.json, &k.len, k.master, "pw", 2, 128, 1, 1, "user", "host"));
	rix_test_oom o = { .what = "key file open", .run = key_open_round, .arg = &k, .max = 100000,
			   .check = key_open_check, .must_fail = 1 };
	rix_test_oom_run(&o);
	assert_true(k.outer);
	assert_true(k.inner);
	rix_free(k.json);
	k.json = NULL;
	rix_test_oom c = { .what = "key file create", .run = key_create_round, .arg = &k, .max = 100000,
			   .check = key_create_check, .must_fail = 1 };
	assert_true(rix_test_oom_run(&c) > 3); /* jansson's objects, its text, the copy */
	/* A hostname that is not UTF-8 is refused by jansson: not "out of memory". */
	char *json;
	size_t len;
	assert_int_equal(rix_key_create_file(&json, &len, k.master, "pw", 2, 128, 1, 1, "user", "h\xff"), RIX_EINVAL);
	assert_null(json);
	rix_key_free(k.master);
}

/* restic opens a repository whose only key file rix wrote (same master key, new password). */
static void test_restic_opens_rix_key_file(void **state)
{
	(void)state;
	char dir[] = "/tmp/rix-keyfile-XXXXXX";
	restic_repo_copy(1, dir, 1);
	rix_key *master = open_fixture_key(1);
	char *json;
	size_t len, elen;
	assert_int_equal(rix_key_create_file(&json, &len, master, "rix made this", 13, 1024, 8, 1, "rix", "test"), 0);
	rix_id id;
	char name[80];
	rix_sha256(&id, json, len);
	memcpy(name, "keys/", 5);
	rix_id_to_hex(name + 5, &id);
	rix_test_put_file(dir, name, json, len);
	char *expected = rix_test_data_file("restic_repo_v1/config.expected.json", &elen);
	rix_test_restic_cat_config_equals(dir, "rix made this", expected, elen);
	rix_test_remove_tree(dir);
	free(expected);
	rix_free(json);
	rix_key_free(master);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sha256_known_answers),
		cmocka_unit_test(test_seal_open_round_trip),
		cmocka_unit_test(test_tampering_and_bad_input),
		cmocka_unit_test(test_restic_key_files_and_configs),
		cmocka_unit_test(test_wrong_password),
		cmocka_unit_test(test_bad_key_files),
		cmocka_unit_test(test_restic_reads_rix_sealed_config),
		cmocka_unit_test(test_create_key_file_round_trip),
		cmocka_unit_test(test_key_file_allocation_failure),
		cmocka_unit_test(test_restic_opens_rix_key_file),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
