/*
 * tests/test_repo.c — repo/: the repository over the local backend.
 *
 * Cases: init then open (right password; wrong one is RIX_EAUTH; no key file; an existing
 * repository refused); keys added, opened with, listed, removed (never the one in use); save
 * with dedup (a blob saved twice is stored once), flush, reopen, load every blob; restic's index
 * size rule (version 1: a new index file after 50,000 blobs); four threads saving overlapping
 * blobs store each exactly once; a tampered index file is reported by name and the others load
 * (strict: an error); a pack shorter than its index says; a disk that fills during saving and
 * flushing (RLIMIT_FSIZE): errors surface, what was flushed before stays, and saving again once
 * there is room stores everything; the real restic binary checks a repository rix made
 * (`restic check --read-data`, `restic cat blob`) and rix reads one restic made; a config of an
 * unknown version is refused; files by ID and pack headers through the repository. Check:
 * test_check.c; locks: test_lock.c.
 */
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "rix/rix.h"
#include "repo_fixture.h"
#include "testutil.h"
#include "repo/repo_internal.h" /* rix__repo_key: a config sealed by hand */

static void test_init_open_keys(void **state)
{
	(void)state;
	char *dir = rix_test_new_dir("rix-repo");
	rix_repo *r = init_repo(dir, 2);
	assert_int_equal(rix_repo_config(r)->version, 2);
	assert_int_equal(rix_chunker_polynomial_check(rix_repo_config(r)->chunker_polynomial), 0);
	char first[65];
	memcpy(first, rix_repo_key_name(r), 65);
	assert_int_equal(strlen(first), 64);
	/* A second key, then the repository opens with either password. */
	char second[65];
	MUST(rix_repo_key_add(second, r, "other pw", 8));
	assert_int_equal(count_files(r, RIX_FILE_KEY), 2);
	rix_id cfg_id = rix_repo_config(r)->id;
	rix_repo_free(r);

	rix_backend *b;
	MUST(rix_backend_local_open(&b, dir, 0));
	int wrc = rix_repo_open(&r, b, "wrong", 5, &fast);
	if (wrc != RIX_EAUTH)
		fail_msg("wrong password: %d (%s)", wrc, rix_error_last());
	assert_null(r);
	assert_non_null(strstr(rix_error_last(), "wrong password"));
	MUST(rix_repo_open(&r, b, "other pw", 8, &fast));
	assert_string_equal(rix_repo_key_name(r), second);
	assert_memory_equal(rix_repo_config(r)->id.b, cfg_id.b, RIX_ID_SIZE);
	/* The key in use cannot be removed; the other can. */
	assert_int_equal(rix_repo_key_remove(r, second), RIX_EINVAL);
	MUST(rix_repo_key_remove(r, first));
	assert_int_equal(rix_repo_key_remove(r, first), RIX_ENOTFOUND);
	assert_int_equal(count_files(r, RIX_FILE_KEY), 1);
	rix_repo_free(r);
	MUST(rix_backend_local_open(&b, dir, 0));
	assert_int_equal(rix_repo_open(&r, b, PW, strlen(PW), &fast), RIX_EAUTH);
	/* A second init on the same backend is refused. */
	assert_int_equal(rix_repo_init(&r, b, PW, strlen(PW), &fast), RIX_EEXISTS);
	rix_backend_free(b);
	/* No key file at all. */
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "chmod -R u+w '%s' && rm -f '%s'/keys/*", dir, dir);
	assert_int_equal(system(cmd), 0);
	MUST(rix_backend_local_open(&b, dir, 0));
	assert_int_equal(rix_repo_open(&r, b, PW, strlen(PW), &fast), RIX_ENOTFOUND);
	rix_backend_free(b);
	rix_test_free_dir(dir);
}

static void check_all_load(rix_repo *r, const struct blobs *s)
{
	for (size_t i = 0; i < s->n; i++) {
		uint8_t *out;
		size_t n;
		int rc = rix_repo_load_blob(&out, &n, r, s->type[i], &s->id[i]);
		if (rc != 0)
			fail_msg("blob %zu: %s", i, rix_error_last());
		assert_int_equal(n, s->len[i]);
		assert_memory_equal(out, s->data[i], n);
		rix_free(out);
	}
}

static void test_save_flush_load(void **state)
{
	(void)state;
	char *dir = rix_test_new_dir("rix-repo");
	static struct blobs s;
	make_blobs(&s, 300, 1);
	for (int version = 1; version <= 2; version++) {
		rix_repo *r = init_repo(dir, version);
		static uint32_t lens[400];
		for (size_t i = 0; i < s.n; i++) {
			rix_id id;
			bool stored = false;
			if (i % 2 == 0) {
				MUST(rix_repo_save_blob(&id, &stored, r, s.type[i], s.data[i], s.len[i]));
				assert_int_equal(stored, 1);
			} else {
				lens[i] = 0;
				MUST(rix_repo_save_blob_sized(&id, &lens[i], r, s.type[i], s.data[i], s.len[i]));
				assert_true(lens[i] >= RIX_CRYPTO_OVERHEAD);
			}
			assert_memory_equal(id.b, s.id[i].b, RIX_ID_SIZE);
			/* Again: deduplicated, whether its pack is open or stored. */
			MUST(rix_repo_save_blob(&id, &stored, r, s.type[i], s.data[i], s.len[i]));
			assert_int_equal(stored, 0);
			uint32_t len = 1;
			MUST(rix_repo_save_blob_sized(&id, &len, r, s.type[i], s.data[i], s.len[i]));
			assert_int_equal(len, 0);
		}
		MUST(rix_repo_flush(r));
		/* The reported lengths are those of the index entries. */
		for (size_t i = 1; i < s.n; i += 2) {
			rix_packed_blob pb;
			MUST(rix_master_index_lookup(&pb, rix_repo_master_index(r), s.type[i], &s.id[i]));
			assert_int_equal(pb.length, lens[i]);
		}
		assert_int_equal(count_files(r, RIX_FILE_INDEX), 1);
		size_t packs = count_files(r, RIX_FILE_PACK);
		if (packs < 3)
			fail_msg("%zu packs", packs);
		check_all_load(r, &s); /* from the master index's own unfinished index */
		/* After flush, saving the same blobs stores nothing. */
		bool stored;
		MUST(rix_repo_save_blob(NULL, &stored, r, s.type[5], s.data[5], s.len[5]));
		assert_int_equal(stored, 0);
		uint32_t len = 1;
		MUST(rix_repo_save_blob_sized(NULL, &len, r, s.type[5], s.data[5], s.len[5]));
		assert_int_equal(len, 0);
		MUST(rix_repo_flush(r));
		assert_int_equal(count_files(r, RIX_FILE_INDEX), 1);
		rix_repo_free(r);

		r = open_repo(dir, NULL);
		assert_int_equal(rix_repo_config(r)->version, version);
		rix_repo_load_stats st;
		MUST(rix_repo_load_index(&st, r, NULL, NULL));
		assert_int_equal(st.files, 1);
		assert_int_equal(st.loaded, 1);
		assert_int_equal(st.blobs, s.n);
		check_all_load(r, &s);
		rix_id unknown;
		memset(&unknown, 0x5a, sizeof(unknown));
		uint8_t *out;
		size_t n;
		assert_int_equal(rix_repo_load_blob(&out, &n, r, RIX_BLOB_DATA, &unknown), RIX_ENOTFOUND);
		/* The type is part of the key. */
		assert_int_equal(rix_repo_load_blob(&out, &n, r, RIX_BLOB_DATA, &s.id[5]), RIX_ENOTFOUND);
		rix_repo_free(r);
		rix_test_remove_tree(dir);
		assert_int_equal(mkdir(dir, 0700), 0);
	}
	free_blobs(&s);
	rix_test_free_dir(dir);
}

static void count_progress(void *arg, size_t done, size_t total)
{
	size_t *calls = arg;
	assert_true(done >= 1 && done <= total);
	assert_int_equal(total, 2);
	(*calls)++;
}

/* restic 0.14's rule: a version 1 index file holds at most 50,000 blobs. */
static void test_index_file_size_rule(void **state)
{
	(void)state;
	char *dir = rix_test_new_dir("rix-repo");
	rix_repo *r = init_repo(dir, 1);
	/*
	 * 120,000 blobs of 100 bytes in 4 MiB packs (~31,000 a pack): the index is full after the
	 * second pack, like restic's a file may pass the limit by the rest of one pack.
	 */
	enum { N = 120000 };
	uint64_t v;
	uint8_t buf[100] = { 0 };
	for (v = 0; v < N; v++) {
		memcpy(buf, &v, sizeof(v));
		MUST(rix_repo_save_blob(NULL, NULL, r, RIX_BLOB_DATA, buf, sizeof(buf)));
	}
	MUST(rix_repo_flush(r));
	assert_int_equal(count_files(r, RIX_FILE_INDEX), 2);
	rix_repo_free(r);
	size_t calls = 0;
	rix_repo_options po = fast;
	po.load_progress = count_progress;
	po.payload = &calls;
	po.load_memory = 1; /* under one file's worth: one loader thread, and still everything loads */
	r = open_repo(dir, &po);
	rix_repo_load_stats st;
	MUST(rix_repo_load_index(&st, r, NULL, NULL));
	assert_int_equal(calls, 2);
	assert_int_equal(st.blobs, N);
	assert_int_equal(rix_master_index_count(rix_repo_master_index(r), RIX_BLOB_DATA), N);
	for (v = 0; v < N; v += 4999) {
		rix_id id;
		memcpy(buf, &v, sizeof(v));
		rix_sha256(&id, buf, sizeof(buf));
		assert_true(rix_master_index_has(rix_repo_master_index(r), RIX_BLOB_DATA, &id));
	}
	rix_repo_free(r);
	rix_test_free_dir(dir);
}

struct saver {
	rix_repo *r;
	int index;
	int stored; /* how many it stored */
	int rc;
};

static void *saver_run(void *arg)
{
	struct saver *s = arg;
	/* Blob k (of 2000) is saved by every thread: k's content is its number. */
	for (uint64_t i = 0; i < 2000 && s->rc == 0; i++) {
		uint64_t k = (i * 7 + (uint64_t)s->index * 500) % 2000;
		uint8_t buf[3000];
		memset(buf, (int)(k & 0xff), sizeof(buf));
		memcpy(buf, &k, sizeof(k));
		bool stored;
		s->rc = rix_repo_save_blob(NULL, &stored, s->r, RIX_BLOB_DATA, buf, 1000 + k % 2000);
		s->stored += stored;
	}
	return NULL;
}

static void test_threads_dedup(void **state)
{
	(void)state;
	char *dir = rix_test_new_dir("rix-repo");
	rix_repo *r = init_repo(dir, 2);
	struct saver sv[4];
	pthread_t th[4];
	for (int i = 0; i < 4; i++) {
		sv[i] = (struct saver){ .r = r, .index = i };
		assert_int_equal(pthread_create(&th[i], NULL, saver_run, &sv[i]), 0);
	}
	int total = 0;
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		MUST(sv[i].rc);
		total += sv[i].stored;
	}
	assert_int_equal(total, 2000);
	MUST(rix_repo_flush(r));
	rix_repo_free(r);
	r = open_repo(dir, NULL);
	rix_repo_load_stats st;
	MUST(rix_repo_load_index(&st, r, NULL, NULL));
	assert_int_equal(st.blobs, 2000); /* each stored once: no duplicates in the index */
	rix_repo_free(r);
	rix_test_free_dir(dir);
}

struct errs {
	int n;
	int empty_msg;
	char name[65];
	int code;
};

static void on_index_error(void *arg, const char *name, int code, const char *msg)
{
	struct errs *e = arg;
	e->n++;
	snprintf(e->name, sizeof(e->name), "%s", name);
	e->code = code;
	e->empty_msg |= msg[0] == '\0'; /* checked by the test: this runs on a loader thread */
}

static int first_name(void *arg, const char *name, uint64_t size)
{
	(void)size;
	memcpy(arg, name, 65);
	return 1;
}

/* A tampered index file: reported by name, the others load; strict fails. A short pack. */
static void test_damage(void **state)
{
	(void)state;
	char *dir = rix_test_new_dir("rix-repo");
	rix_repo *r = init_repo(dir, 2);
	static struct blobs a, b;
	make_blobs(&a, 50, 2);
	make_blobs(&b, 50, 3);
	save_all(r, &a);
	MUST(rix_repo_flush(r));
	char bad[65];
	assert_int_equal(rix_backend_list(rix_repo_backend(r), RIX_FILE_INDEX, first_name, bad), 1);
	save_all(r, &b);
	MUST(rix_repo_flush(r));
	assert_int_equal(count_files(r, RIX_FILE_INDEX), 2);
	rix_repo_free(r);
	char path[700];
	snprintf(path, sizeof(path), "%s/index/%s", dir, bad);
	flip_byte(path, 40);

	r = open_repo(dir, NULL);
	struct errs e = { 0 };
	rix_repo_load_stats st;
	MUST(rix_repo_load_index(&st, r, on_index_error, &e));
	assert_int_equal(e.n, 1);
	assert_false(e.empty_msg);
	assert_string_equal(e.name, bad);
	assert_int_equal(e.code, RIX_ECORRUPT); /* the name is the SHA-256: caught before the MAC */
	assert_int_equal(st.files, 2);
	assert_int_equal(st.loaded, 1);
	b.n--; /* blob 0 (empty) is the same in both sets: it is in the damaged file */
	free(b.data[0]);
	memmove(&b.data[0], &b.data[1], b.n * sizeof(b.data[0]));
	memmove(&b.len[0], &b.len[1], b.n * sizeof(b.len[0]));
	memmove(&b.id[0], &b.id[1], b.n * sizeof(b.id[0]));
	memmove(&b.type[0], &b.type[1], b.n * sizeof(b.type[0]));
	check_all_load(r, &b);
	rix_repo_free(r);
	rix_repo_options strict = fast;
	strict.strict = 1;
	r = open_repo(dir, &strict);
	assert_int_equal(rix_repo_load_index(NULL, r, NULL, NULL), RIX_ECORRUPT);
	rix_repo_free(r);

	/* A pack cut short: the blobs in its tail are reported, with the pack's name. */
	rix_test_remove_tree(dir);
	assert_int_equal(mkdir(dir, 0700), 0);
	r = init_repo(dir, 2);
	uint8_t big[200000];
	uint64_t seed = 4;
	rix_test_fill_random(big, sizeof(big), &seed);
	rix_id id;
	MUST(rix_repo_save_blob(&id, NULL, r, RIX_BLOB_DATA, big, sizeof(big)));
	MUST(rix_repo_flush(r));
	char pack[65];
	assert_int_equal(rix_backend_list(rix_repo_backend(r), RIX_FILE_PACK, first_name, pack), 1);
	snprintf(path, sizeof(path), "%s/data/%.2s/%s", dir, pack, pack);
	chmod(path, 0600);
	assert_int_equal(truncate(path, 100000), 0);
	rix_repo_free(r);
	r = open_repo(dir, NULL);
	MUST(rix_repo_load_index(NULL, r, NULL, NULL));
	uint8_t *out;
	size_t n;
	assert_int_equal(rix_repo_load_blob(&out, &n, r, RIX_BLOB_DATA, &id), RIX_ECORRUPT);
	assert_non_null(strstr(rix_error_last(), pack));
	rix_repo_free(r);
	free_blobs(&a);
	free_blobs(&b);
	rix_test_free_dir(dir);
}

/* The disk fills while saving: errors surface, committed blobs stay, a retry stores the rest. */
static void test_disk_full(void **state)
{
	(void)state;
	char *dir = rix_test_new_dir("rix-repo");
	rix_repo *r = init_repo(dir, 2);
	static struct blobs first, second;
	make_blobs(&first, 40, 5);
	make_blobs(&second, 120, 6);
	save_all(r, &first);
	MUST(rix_repo_flush(r));

	struct rlimit old, lim;
	assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
	void (*oldsig)(int) = signal(SIGXFSZ, SIG_IGN);
	lim = old;
	lim.rlim_cur = 2 << 20; /* no file over 2 MiB: packs fill up, index files still fit */
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
	int failed = 0, rc = 0;
	for (size_t i = 0; i < second.n; i++) {
		rc = rix_repo_save_blob(NULL, NULL, r, second.type[i], second.data[i], second.len[i]);
		if (rc != 0) {
			failed++;
			if (rc != RIX_ENOSPC)
				break;
		}
	}
	int frc = rix_repo_flush(r);
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
	signal(SIGXFSZ, oldsig);
	if (rc != 0 && rc != RIX_ENOSPC)
		fail_msg("save: %d (%s)", rc, rix_error_last());
	assert_true(failed > 0);
	assert_true(frc == 0 || frc == RIX_ENOSPC);
	/* Room again: the same blobs saved once more, then flushed, all of them durable. */
	for (size_t i = 0; i < second.n; i++)
		MUST(rix_repo_save_blob(NULL, NULL, r, second.type[i], second.data[i], second.len[i]));
	MUST(rix_repo_flush(r));
	rix_repo_free(r);
	r = open_repo(dir, NULL);
	MUST(rix_repo_load_index(NULL, r, NULL, NULL));
	check_all_load(r, &first);
	check_all_load(r, &second);
	rix_repo_free(r);
	free_blobs(&first);
	free_blobs(&second);
	rix_test_free_dir(dir);
}

/* The real restic reads what rix wrote; rix reads what restic wrote. */
static void test_restic_both_ways(void **state)
{
	(void)state;
	rix_test_need_restic();
	char *dir = rix_test_new_dir("rix-repo");
	rix_repo *r = init_repo(dir, 2);
	static struct blobs s;
	make_blobs(&s, 60, 7);
	for (size_t i = 0; i < s.n; i++)
		if (s.type[i] == RIX_BLOB_DATA) /* an unreferenced tree is fine, but keep check quiet */
			MUST(rix_repo_save_blob(NULL, NULL, r, s.type[i], s.data[i], s.len[i]));
	MUST(rix_repo_flush(r));
	rix_repo_free(r);
	char *out = NULL;
	if (rix_test_restic(dir, PW, "check --read-data", &out) != 0)
		fail_msg("restic check --read-data: %s", out);
	free(out);
	for (size_t i = 1; i < s.n; i += 13) {
		if (s.type[i] != RIX_BLOB_DATA)
			continue;
		char hex[65];
		rix_id_to_hex(hex, &s.id[i]);
		size_t on;
		out = NULL;
		assert_int_equal(rix_test_run(&out, &on, "RESTIC_PASSWORD='%s' restic --no-cache -q -r '%s' cat blob %s", PW,
					      dir, hex), 0); /* stdout only: the blob's bytes */
		assert_int_equal(on, s.len[i]);
		assert_memory_equal(out, s.data[i], on);
		free(out);
	}
	free_blobs(&s);
	rix_test_free_dir(dir);

	/* restic makes a repository and backs up a file; rix loads every blob restic lists. */
	dir = rix_test_new_dir("rix-repo");
	char cmd[1200], file[700];
	snprintf(file, sizeof(file), "%s.src", dir);
	assert_int_equal(mkdir(file, 0700), 0);
	uint8_t data[300000];
	uint64_t seed = 8;
	rix_test_fill_random(data, sizeof(data), &seed);
	rix_test_put_file(file, "random.bin", data, sizeof(data));
	rix_test_put_file(file, "text.txt", "hello restic\n", 13);
	out = NULL;
	assert_int_equal(rix_test_restic(dir, PW, "init --repository-version 2", &out), 0);
	free(out);
	snprintf(cmd, sizeof(cmd), "backup '%s'", file);
	out = NULL;
	if (rix_test_restic(dir, PW, cmd, &out) != 0)
		fail_msg("restic backup: %s", out);
	free(out);
	out = NULL;
	assert_int_equal(rix_test_restic(dir, PW, "list blobs", &out), 0);
	rix_repo_options o = fast;
	r = open_repo(dir, &o);
	rix_repo_load_stats st;
	MUST(rix_repo_load_index(&st, r, NULL, NULL));
	size_t listed = 0;
	for (char *line = strtok(out, "\n"); line != NULL; line = strtok(NULL, "\n")) {
		char type[8], hex[65];
		if (sscanf(line, "%7s %64s", type, hex) != 2)
			continue;
		rix_id id;
		MUST(rix_id_from_hex(&id, hex, 64));
		uint8_t *blob;
		size_t n;
		rix_blob_type t = strcmp(type, "tree") == 0 ? RIX_BLOB_TREE : RIX_BLOB_DATA;
		if (rix_repo_load_blob(&blob, &n, r, t, &id) != 0)
			fail_msg("%s: %s", line, rix_error_last());
		rix_free(blob);
		listed++;
	}
	free(out);
	assert_true(listed >= 3);
	assert_int_equal(listed, st.blobs);
	rix_repo_free(r);
	rix_test_remove_tree(file);
	rix_test_free_dir(dir);
}

/* A config of a version rix does not know: a clear error, not a guess. */
static void test_unknown_config_version(void **state)
{
	(void)state;
	char *dir = rix_test_new_dir("rix-repo");
	rix_repo *r = init_repo(dir, 2);
	const char *json = "{\"version\":3,\"id\":\"00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\","
			   "\"chunker_polynomial\":\"370cecb30e240b\"}";
	size_t n = strlen(json);
	uint8_t *sealed = malloc(n + RIX_CRYPTO_OVERHEAD);
	MUST(rix_crypto_seal(rix__repo_key(r), json, n, sealed));
	MUST(rix_backend_write(rix_repo_backend(r), RIX_FILE_CONFIG, NULL, sealed, n + RIX_CRYPTO_OVERHEAD));
	free(sealed);
	rix_repo_free(r);
	rix_backend *b;
	MUST(rix_backend_local_open(&b, dir, 0));
	assert_int_equal(rix_repo_open(&r, b, PW, strlen(PW), &fast), RIX_ECORRUPT);
	assert_non_null(strstr(rix_error_last(), "version"));
	rix_backend_free(b);
	rix_test_free_dir(dir);
}

/* Files through the repository: unpacked files by ID (SHA-256 checked against the name), pack
 * headers, and refusals of what they are not for. */
static void test_files(void **state)
{
	(void)state;
	char *dir = rix_test_new_dir("rix-repo");
	rix_repo *r = init_repo(dir, 2);
	const char *json = "{\"packs\":[]}";
	rix_id id;
	MUST(rix_repo_write_file(&id, r, RIX_FILE_INDEX, json, strlen(json)));
	char name[65];
	rix_id_to_hex(name, &id);
	uint64_t size;
	MUST(rix_backend_stat(&size, rix_repo_backend(r), RIX_FILE_INDEX, name));
	rix_id *ids;
	size_t nids;
	MUST(rix_repo_list_ids(&ids, &nids, r, RIX_FILE_INDEX));
	/* Loaded twice: the second call loads nothing again. */
	rix_repo_load_stats ls;
	MUST(rix_repo_load_index(&ls, r, NULL, NULL));
	assert_int_equal(ls.files, 1);
	assert_int_equal(ls.loaded, 1);
	MUST(rix_repo_load_index(&ls, r, NULL, NULL));
	assert_int_equal(ls.files, 1);
	assert_int_equal(ls.loaded, 0);
	assert_int_equal(nids, 1);
	assert_memory_equal(ids[0].b, id.b, RIX_ID_SIZE);
	rix_free(ids);
	MUST(rix_repo_list_ids(&ids, &nids, r, RIX_FILE_SNAPSHOT));
	assert_int_equal(nids, 0);
	assert_null(ids);
	assert_int_equal(rix_repo_list_ids(&ids, &nids, r, RIX_FILE_CONFIG), RIX_EINVAL);
	uint8_t *out;
	size_t n;
	MUST(rix_repo_read_file(&out, &n, r, RIX_FILE_INDEX, &id));
	assert_int_equal(n, strlen(json));
	assert_memory_equal(out, json, n);
	rix_free(out);

	/* The same bytes under another name: refused, the name is the file's SHA-256. */
	uint8_t *file;
	size_t fn;
	MUST(rix_backend_read_all(&file, &fn, rix_repo_backend(r), RIX_FILE_INDEX, name, 1 << 20));
	rix_id other = id;
	other.b[0] ^= 1;
	char other_name[65];
	rix_id_to_hex(other_name, &other);
	MUST(rix_backend_write(rix_repo_backend(r), RIX_FILE_SNAPSHOT, other_name, file, fn));
	rix_free(file);
	assert_int_equal(rix_repo_read_file(&out, &n, r, RIX_FILE_SNAPSHOT, &other), RIX_ECORRUPT);
	assert_null(out);
	assert_non_null(strstr(rix_error_last(), "SHA-256"));
	assert_int_equal(rix_repo_read_file(&out, &n, r, RIX_FILE_SNAPSHOT, &id), RIX_ENOTFOUND);

	/* Keys, packs and the config are not unpacked files. */
	assert_int_equal(rix_repo_write_file(NULL, r, RIX_FILE_PACK, json, strlen(json)), RIX_EINVAL);
	assert_int_equal(rix_repo_write_file(NULL, r, RIX_FILE_KEY, json, strlen(json)), RIX_EINVAL);
	assert_int_equal(rix_repo_read_file(&out, &n, r, RIX_FILE_CONFIG, &id), RIX_EINVAL);

	/* A pack's header, as saved. */
	struct blobs s;
	make_blobs(&s, 20, 7);
	for (size_t i = 0; i < s.n; i++)
		s.type[i] = RIX_BLOB_DATA; /* one pack */
	save_all(r, &s);
	MUST(rix_repo_flush(r));
	rix_id *packs;
	size_t np;
	MUST(rix_master_index_packs(&packs, &np, rix_repo_master_index(r)));
	assert_int_equal(np, 1);
	/* The index file this flush wrote is held: loading the repository's does not merge it again. */
	size_t before = rix_master_index_count(rix_repo_master_index(r), RIX_BLOB_DATA);
	MUST(rix_repo_load_index(&ls, r, NULL, NULL));
	assert_int_equal(ls.loaded, 0);
	assert_int_equal(rix_master_index_count(rix_repo_master_index(r), RIX_BLOB_DATA), before);
	rix_blob *hdr;
	size_t cnt;
	MUST(rix_repo_read_pack_header(&hdr, &cnt, r, &packs[0]));
	assert_int_equal(cnt, 20);
	for (size_t i = 0; i < cnt; i++) {
		rix_packed_blob pb;
		MUST(rix_master_index_lookup(&pb, rix_repo_master_index(r), hdr[i].type, &hdr[i].id));
		assert_memory_equal(pb.pack_id.b, packs[0].b, RIX_ID_SIZE);
		assert_int_equal(pb.offset, hdr[i].offset);
		assert_int_equal(pb.length, hdr[i].length);
	}
	rix_free(hdr);
	rix_id missing = packs[0];
	missing.b[31] ^= 0x80;
	assert_int_equal(rix_repo_read_pack_header(&hdr, &cnt, r, &missing), RIX_ENOTFOUND);
	assert_null(hdr);
	assert_non_null(strstr(rix_error_last(), "missing"));
	rix_free(packs);
	free_blobs(&s);
	rix_repo_free(r);
	rix_test_free_dir(dir);
}

/* Loading into the caller's buffer: the same bytes, no allocation once warm, a buffer too small
 * says how big the blob is, a missing pack is named. */
static void test_load_into(void **state)
{
	(void)state;
	char *dir = rix_test_new_dir("rix-repo");
	rix_repo *r = init_repo(dir, 2);
	struct blobs s;
	make_blobs(&s, 40, 11);
	save_all(r, &s);
	MUST(rix_repo_flush(r));
	size_t big = 0;
	for (size_t i = 0; i < s.n; i++)
		big = s.len[i] > big ? s.len[i] : big;
	uint8_t *buf = malloc(big + 1);
	size_t n;
	for (int round = 0; round < 2; round++) {
		if (round == 1)
			rix_test_failalloc_install(0); /* counts, never fails */
		for (size_t i = 0; i < s.n; i++) {
			MUST(rix_repo_load_blob_into(&n, r, s.type[i], &s.id[i], buf, big));
			assert_int_equal(n, s.len[i]);
			assert_memory_equal(buf, s.data[i], n);
		}
		if (round == 1) {
			assert_int_equal(rix_test_failalloc_count(), 0);
			rix_test_failalloc_remove();
		}
	}
	size_t k = 1; /* a blob that is not empty */
	while (s.len[k] == 0)
		k++;
	assert_int_equal(rix_repo_load_blob_into(&n, r, s.type[k], &s.id[k], buf, s.len[k] - 1), RIX_ELIMIT);
	assert_int_equal(n, s.len[k]);
	rix_id unknown = s.id[k];
	unknown.b[0] ^= 0x55;
	assert_int_equal(rix_repo_load_blob_into(&n, r, s.type[k], &unknown, buf, big), RIX_ENOTFOUND);

	/* Its pack gone: the error says so. */
	rix_packed_blob pb;
	MUST(rix_master_index_lookup(&pb, rix_repo_master_index(r), s.type[k], &s.id[k]));
	char hex[65];
	rix_id_to_hex(hex, &pb.pack_id);
	MUST(rix_backend_remove(rix_repo_backend(r), RIX_FILE_PACK, hex));
	assert_int_equal(rix_repo_load_blob_into(&n, r, s.type[k], &s.id[k], buf, big), RIX_ENOTFOUND);
	assert_non_null(strstr(rix_error_last(), "missing"));
	assert_non_null(strstr(rix_error_last(), hex));
	free(buf);
	free_blobs(&s);
	rix_repo_free(r);
	rix_test_free_dir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_init_open_keys),
		cmocka_unit_test(test_save_flush_load),
		cmocka_unit_test(test_index_file_size_rule),
		cmocka_unit_test(test_threads_dedup),
		cmocka_unit_test(test_damage),
		cmocka_unit_test(test_disk_full),
		cmocka_unit_test(test_restic_both_ways),
		cmocka_unit_test(test_unknown_config_version),
		cmocka_unit_test(test_files),
		cmocka_unit_test(test_load_into),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
