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
 * (`restic check --read-data`, `restic cat blob`) and rix reads one restic made.
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
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "rix/rix.h"
#include "testutil.h"
#include "repo/repo_internal.h" /* rix__repo_key: a config sealed by hand */


#define PW "correct horse"

static const rix_repo_options fast = { .pack_size = 4 << 20, .scrypt_n = 128, .scrypt_r = 1, .scrypt_p = 1, .username = "tester",
				       .hostname = "testhost" };

static rix_repo *init_repo(const char *dir, int version)
{
	rix_backend *b;
	MUST(rix_backend_local_open(&b, dir, 1));
	rix_repo_options o = fast;
	o.version = version;
	rix_repo *r;
	MUST(rix_repo_init(&r, b, PW, strlen(PW), &o));
	return r;
}

static rix_repo *open_repo(const char *dir, const rix_repo_options *o)
{
	rix_backend *b;
	MUST(rix_backend_local_open(&b, dir, 0));
	rix_repo *r;
	int rc = rix_repo_open(&r, b, PW, strlen(PW), o != NULL ? o : &fast);
	if (rc != 0) {
		rix_backend_free(b);
		fail_msg("open %s: %s", dir, rix_error_last());
	}
	return r;
}

static int count_cb(void *arg, const char *name, uint64_t size)
{
	(void)name;
	(void)size;
	++*(size_t *)arg;
	return 0;
}

static size_t count_files(rix_repo *r, rix_file_type t)
{
	size_t n = 0;
	MUST(rix_backend_list(rix_repo_backend(r), t, count_cb, &n));
	return n;
}

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
	MUST(rix_repo_key_add(r, "other pw", 8, second));
	assert_int_equal(count_files(r, RIX_FILE_KEY), 2);
	rix_id cfg_id = rix_repo_config(r)->id;
	rix_repo_close(r);

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
	rix_repo_close(r);
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

struct blobs {
	size_t n;
	uint8_t *data[400];
	size_t len[400];
	rix_id id[400];
	rix_blob_type type[400];
};

static void make_blobs(struct blobs *s, size_t n, uint64_t seed)
{
	s->n = n;
	uint64_t st = seed;
	for (size_t i = 0; i < n; i++) {
		s->len[i] = i == 0 ? 0 : (size_t)(rix_test_next(&st) % (i % 7 == 0 ? 600000 : 20000));
		s->data[i] = malloc(s->len[i] + 1);
		rix_test_fill_random(s->data[i], s->len[i], &st);
		if (i % 3 == 0) /* compressible */
			memset(s->data[i], 'a', s->len[i] / 2);
		s->type[i] = i % 5 == 0 ? RIX_BLOB_TREE : RIX_BLOB_DATA;
		rix_sha256(s->data[i], s->len[i], &s->id[i]);
	}
}

static void free_blobs(struct blobs *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->data[i]);
}

/* Saves every blob of s (each stored or deduplicated). */
static void save_all(rix_repo *r, const struct blobs *s)
{
	for (size_t i = 0; i < s->n; i++)
		MUST(rix_repo_save_blob(r, s->type[i], s->data[i], s->len[i], NULL, NULL));
}

static void check_all_load(rix_repo *r, const struct blobs *s)
{
	for (size_t i = 0; i < s->n; i++) {
		uint8_t *out;
		size_t n;
		int rc = rix_repo_load_blob(r, s->type[i], &s->id[i], &out, &n);
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
		for (size_t i = 0; i < s.n; i++) {
			rix_id id;
			int stored = -1;
			MUST(rix_repo_save_blob(r, s.type[i], s.data[i], s.len[i], &id, &stored));
			assert_memory_equal(id.b, s.id[i].b, RIX_ID_SIZE);
			assert_int_equal(stored, 1);
			/* Again: deduplicated, whether its pack is open or stored. */
			MUST(rix_repo_save_blob(r, s.type[i], s.data[i], s.len[i], &id, &stored));
			assert_int_equal(stored, 0);
		}
		MUST(rix_repo_flush(r));
		assert_int_equal(count_files(r, RIX_FILE_INDEX), 1);
		size_t packs = count_files(r, RIX_FILE_PACK);
		if (packs < 3)
			fail_msg("%zu packs", packs);
		check_all_load(r, &s); /* from the master index's own unfinished index */
		/* After flush, saving the same blobs stores nothing. */
		int stored;
		MUST(rix_repo_save_blob(r, s.type[5], s.data[5], s.len[5], NULL, &stored));
		assert_int_equal(stored, 0);
		MUST(rix_repo_flush(r));
		assert_int_equal(count_files(r, RIX_FILE_INDEX), 1);
		rix_repo_close(r);

		r = open_repo(dir, NULL);
		assert_int_equal(rix_repo_config(r)->version, version);
		rix_repo_load_stats st;
		MUST(rix_repo_load_index(r, NULL, NULL, &st));
		assert_int_equal(st.files, 1);
		assert_int_equal(st.loaded, 1);
		assert_int_equal(st.blobs, s.n);
		check_all_load(r, &s);
		rix_id unknown;
		memset(&unknown, 0x5a, sizeof(unknown));
		uint8_t *out;
		size_t n;
		assert_int_equal(rix_repo_load_blob(r, RIX_BLOB_DATA, &unknown, &out, &n), RIX_ENOTFOUND);
		/* The type is part of the key. */
		assert_int_equal(rix_repo_load_blob(r, RIX_BLOB_DATA, &s.id[5], &out, &n), RIX_ENOTFOUND);
		rix_repo_close(r);
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
		MUST(rix_repo_save_blob(r, RIX_BLOB_DATA, buf, sizeof(buf), NULL, NULL));
	}
	MUST(rix_repo_flush(r));
	assert_int_equal(count_files(r, RIX_FILE_INDEX), 2);
	rix_repo_close(r);
	size_t calls = 0;
	rix_repo_options po = fast;
	po.load_progress = count_progress;
	po.progress_arg = &calls;
	po.load_memory = 1; /* under one file's worth: one loader thread, and still everything loads */
	r = open_repo(dir, &po);
	rix_repo_load_stats st;
	MUST(rix_repo_load_index(r, NULL, NULL, &st));
	assert_int_equal(calls, 2);
	assert_int_equal(st.blobs, N);
	assert_int_equal(rix_master_index_count(rix_repo_master_index(r), RIX_BLOB_DATA), N);
	for (v = 0; v < N; v += 4999) {
		rix_id id;
		memcpy(buf, &v, sizeof(v));
		rix_sha256(buf, sizeof(buf), &id);
		assert_true(rix_master_index_has(rix_repo_master_index(r), RIX_BLOB_DATA, &id));
	}
	rix_repo_close(r);
	rix_test_free_dir(dir);
}

struct saver {
	rix_repo *r;
	int index;
	int stored;
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
		int stored;
		s->rc = rix_repo_save_blob(s->r, RIX_BLOB_DATA, buf, 1000 + k % 2000, NULL, &stored);
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
	rix_repo_close(r);
	r = open_repo(dir, NULL);
	rix_repo_load_stats st;
	MUST(rix_repo_load_index(r, NULL, NULL, &st));
	assert_int_equal(st.blobs, 2000); /* each stored once: no duplicates in the index */
	rix_repo_close(r);
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

static void flip_byte(const char *path, long at)
{
	chmod(path, 0600);
	FILE *f = fopen(path, "r+b");
	assert_non_null(f);
	if (at < 0) {
		fseek(f, 0, SEEK_END);
		at += ftell(f);
	}
	fseek(f, at, SEEK_SET);
	int c = fgetc(f);
	fseek(f, at, SEEK_SET);
	fputc(c ^ 0x40, f);
	fclose(f);
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
	rix_repo_close(r);
	char path[700];
	snprintf(path, sizeof(path), "%s/index/%s", dir, bad);
	flip_byte(path, 40);

	r = open_repo(dir, NULL);
	struct errs e = { 0 };
	rix_repo_load_stats st;
	MUST(rix_repo_load_index(r, on_index_error, &e, &st));
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
	rix_repo_close(r);
	rix_repo_options strict = fast;
	strict.strict = 1;
	r = open_repo(dir, &strict);
	assert_int_equal(rix_repo_load_index(r, NULL, NULL, NULL), RIX_ECORRUPT);
	rix_repo_close(r);

	/* A pack cut short: the blobs in its tail are reported, with the pack's name. */
	rix_test_remove_tree(dir);
	assert_int_equal(mkdir(dir, 0700), 0);
	r = init_repo(dir, 2);
	uint8_t big[200000];
	uint64_t seed = 4;
	rix_test_fill_random(big, sizeof(big), &seed);
	rix_id id;
	MUST(rix_repo_save_blob(r, RIX_BLOB_DATA, big, sizeof(big), &id, NULL));
	MUST(rix_repo_flush(r));
	char pack[65];
	assert_int_equal(rix_backend_list(rix_repo_backend(r), RIX_FILE_PACK, first_name, pack), 1);
	snprintf(path, sizeof(path), "%s/data/%.2s/%s", dir, pack, pack);
	chmod(path, 0600);
	assert_int_equal(truncate(path, 100000), 0);
	rix_repo_close(r);
	r = open_repo(dir, NULL);
	MUST(rix_repo_load_index(r, NULL, NULL, NULL));
	uint8_t *out;
	size_t n;
	assert_int_equal(rix_repo_load_blob(r, RIX_BLOB_DATA, &id, &out, &n), RIX_ECORRUPT);
	assert_non_null(strstr(rix_error_last(), pack));
	rix_repo_close(r);
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
		rc = rix_repo_save_blob(r, second.type[i], second.data[i], second.len[i], NULL, NULL);
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
		MUST(rix_repo_save_blob(r, second.type[i], second.data[i], second.len[i], NULL, NULL));
	MUST(rix_repo_flush(r));
	rix_repo_close(r);
	r = open_repo(dir, NULL);
	MUST(rix_repo_load_index(r, NULL, NULL, NULL));
	check_all_load(r, &first);
	check_all_load(r, &second);
	rix_repo_close(r);
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
			MUST(rix_repo_save_blob(r, s.type[i], s.data[i], s.len[i], NULL, NULL));
	MUST(rix_repo_flush(r));
	rix_repo_close(r);
	char *out = NULL;
	if (rix_test_restic(dir, PW, "check --read-data", &out) != 0)
		fail_msg("restic check --read-data: %s", out);
	free(out);
	for (size_t i = 1; i < s.n; i += 13) {
		if (s.type[i] != RIX_BLOB_DATA)
			continue;
		char hex[65];
		rix_id_to_hex(&s.id[i], hex);
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
	MUST(rix_repo_load_index(r, NULL, NULL, &st));
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
		if (rix_repo_load_blob(r, t, &id, &blob, &n) != 0)
			fail_msg("%s: %s", line, rix_error_last());
		rix_free(blob);
		listed++;
	}
	free(out);
	assert_true(listed >= 3);
	assert_int_equal(listed, st.blobs);
	rix_repo_close(r);
	rix_test_remove_tree(file);
	rix_test_free_dir(dir);
}

/* ---- check ------------------------------------------------------------------------------- */

struct lines {
	int errors, infos;
	char last_error[512];
	int progress_calls;
	size_t total;
	uint64_t last_bytes;
};

static void on_check_msg(void *arg, int is_error, const char *msg)
{
	struct lines *l = arg;
	if (is_error) {
		l->errors++;
		snprintf(l->last_error, sizeof(l->last_error), "%s", msg);
	} else {
		l->infos++;
	}
}

static void on_progress(void *arg, size_t done, size_t total, uint64_t bytes)
{
	struct lines *l = arg;
	assert_true(done >= 1 && done <= total);
	assert_true(bytes >= l->last_bytes);
	l->last_bytes = bytes;
	l->progress_calls++;
	l->total = total;
}

static rix_check_report run_check(const char *dir, int read_data, int want_rc, struct lines *l)
{
	rix_repo *r = open_repo(dir, NULL);
	rix_check_report rep;
	memset(l, 0, sizeof(*l));
	int rc = rix_repo_check(r, read_data, on_check_msg, on_progress, l, &rep);
	assert_int_equal((size_t)l->progress_calls, rep.packs);
	if (rc != want_rc)
		fail_msg("check: %d (%s), want %d", rc, rix_error_last(), want_rc);
	rix_repo_close(r);
	assert_int_equal((size_t)l->errors, rep.errors);
	return rep;
}

/* The name of the index file not in names_before (the one a flush just wrote). */
struct newest {
	char before[8][65];
	size_t nbefore;
	char found[65];
};

static int collect_index(void *arg, const char *name, uint64_t size)
{
	(void)size;
	struct newest *nw = arg;
	for (size_t i = 0; i < nw->nbefore; i++)
		if (strcmp(nw->before[i], name) == 0)
			return 0;
	memcpy(nw->found, name, 65);
	return 0;
}

static int remember_index(void *arg, const char *name, uint64_t size)
{
	(void)size;
	struct newest *nw = arg;
	if (nw->nbefore < 8)
		memcpy(nw->before[nw->nbefore++], name, 65);
	return 0;
}

static void test_check(void **state)
{
	(void)state;
	char *dir = rix_test_new_dir("rix-repo");
	rix_repo *r = init_repo(dir, 2);
	static struct blobs s;
	make_blobs(&s, 80, 9);
	save_all(r, &s);
	MUST(rix_repo_flush(r));
	size_t packs = count_files(r, RIX_FILE_PACK);
	rix_repo_close(r);
	struct lines l;
	for (int rd = 0; rd <= 1; rd++) {
		rix_check_report rep = run_check(dir, rd, 0, &l);
		assert_int_equal(rep.errors, 0);
		assert_int_equal(rep.packs, packs);
		assert_int_equal(rep.blobs, s.n);
		assert_int_equal(rep.index_files, 1);
		assert_int_equal(rep.duplicate_blobs, 0);
		assert_true(rd == 0 || rep.bytes_read > 0);
	}

	/* An index file that disagrees with a pack's header (a wrong length): an error. */
	r = open_repo(dir, NULL);
	MUST(rix_repo_load_index(r, NULL, NULL, NULL));
	rix_packed_blob pb;
	MUST(rix_master_index_lookup(rix_repo_master_index(r), s.type[1], &s.id[1], &pb));
	rix_blob wrong = { .id = pb.id, .type = pb.type, .offset = pb.offset, .length = pb.length + 1,
			   .uncompressed_length = pb.uncompressed_length };
	rix_index *bad;
	MUST(rix_index_new(&bad, 0));
	MUST(rix_index_store_pack(bad, &pb.pack_id, &wrong, 1));
	char *json;
	size_t jl;
	MUST(rix_index_encode(bad, &json, &jl));
	rix_id bad_id;
	char bad_name[65];
	MUST(rix_repo_write_file(r, RIX_FILE_INDEX, json, jl, &bad_id));
	rix_id_to_hex(&bad_id, bad_name);
	rix_free(json);
	rix_index_free(bad);
	rix_repo_close(r);
	rix_check_report mis = run_check(dir, 0, RIX_ECORRUPT, &l);
	assert_int_equal(mis.header_mismatches, 1);
	assert_int_equal(mis.errors, 1);
	assert_int_equal(mis.duplicate_blobs, 1); /* the same blob named twice */
	assert_non_null(strstr(l.last_error, "do not match its header"));
	r = open_repo(dir, NULL);
	MUST(rix_backend_remove(rix_repo_backend(r), RIX_FILE_INDEX, bad_name));
	rix_repo_close(r);

	/* A pack no index names (its index file removed): reported, not an error. */
	r = open_repo(dir, NULL);
	MUST(rix_repo_load_index(r, NULL, NULL, NULL));
	struct newest nw = { .nbefore = 0 };
	MUST(rix_backend_list(rix_repo_backend(r), RIX_FILE_INDEX, remember_index, &nw));
	uint8_t extra[5000];
	uint64_t seed = 10;
	rix_test_fill_random(extra, sizeof(extra), &seed);
	MUST(rix_repo_save_blob(r, RIX_BLOB_DATA, extra, sizeof(extra), NULL, NULL));
	MUST(rix_repo_flush(r));
	MUST(rix_backend_list(rix_repo_backend(r), RIX_FILE_INDEX, collect_index, &nw));
	assert_int_equal(strlen(nw.found), 64);
	MUST(rix_backend_remove(rix_repo_backend(r), RIX_FILE_INDEX, nw.found));
	rix_repo_close(r);
	rix_check_report rep = run_check(dir, 0, 0, &l);
	assert_int_equal(rep.orphaned_packs, 1);
	assert_int_equal(rep.errors, 0);
	assert_int_equal(l.infos, 1);

	/* A pack the index names, damaged in three ways. */
	r = open_repo(dir, NULL);
	MUST(rix_repo_load_index(r, NULL, NULL, NULL));
	rix_id *ids;
	size_t nids;
	MUST(rix_master_index_packs(rix_repo_master_index(r), &ids, &nids));
	assert_int_equal(nids, packs);
	char pack[65];
	rix_id_to_hex(&ids[0], pack);
	rix_free(ids);
	rix_repo_close(r);
	char path[800];
	snprintf(path, sizeof(path), "%s/data/%.2s/%s", dir, pack, pack);
	/* A flipped byte in the first blob: the header still reads, read-data finds it. */
	flip_byte(path, 10);
	rep = run_check(dir, 0, 0, &l);
	rep = run_check(dir, 1, RIX_ECORRUPT, &l);
	assert_int_equal(rep.damaged_packs, 1);
	assert_int_equal(rep.damaged_blobs, 1);
	assert_int_equal(rep.errors, 2);
	assert_non_null(strstr(l.last_error, pack));
	/* Cut short: the header cannot be read. */
	assert_int_equal(truncate(path, 50), 0);
	rep = run_check(dir, 0, RIX_ECORRUPT, &l);
	assert_int_equal(rep.damaged_packs, 1);
	/* Gone. */
	assert_int_equal(unlink(path), 0);
	rep = run_check(dir, 0, RIX_ECORRUPT, &l);
	assert_int_equal(rep.missing_packs, 1);
	assert_int_equal(rep.errors, 1);
	assert_non_null(strstr(l.last_error, "missing"));
	free_blobs(&s);
	rix_test_free_dir(dir);
}

/* ---- locks ------------------------------------------------------------------------------- */

/* A lock file as restic writes it, with a time of our choosing. */
static void put_lock(rix_repo *r, const char *time, int exclusive, long pid, const char *host)
{
	char json[512];
	snprintf(json, sizeof(json),
		 "{\"time\":\"%s\",\"exclusive\":%s,\"hostname\":\"%s\",\"username\":\"other\",\"pid\":%ld,"
		 "\"uid\":1000,\"gid\":1000}",
		 time, exclusive ? "true" : "false", host, pid);
	MUST(rix_repo_write_file(r, RIX_FILE_LOCK, json, strlen(json), NULL));
}

static void now_rfc3339(char *buf, size_t cap, long delta)
{
	time_t t = time(NULL) + delta;
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(buf, cap, "%Y-%m-%dT%H:%M:%S.123456789Z", &tm);
}

static void test_locks(void **state)
{
	(void)state;
	rix_test_need_restic();
	char *dir = rix_test_new_dir("rix-repo");
	rix_repo *r = init_repo(dir, 2), *r2 = open_repo(dir, NULL);
	rix_lock *a, *b, *x;
	/* Shared locks coexist; an exclusive one excludes them, and they exclude it. */
	MUST(rix_repo_lock(r, 0, &a));
	MUST(rix_repo_lock(r2, 0, &b));
	assert_int_equal(count_files(r, RIX_FILE_LOCK), 2);
	assert_int_equal(rix_repo_lock(r2, 1, &x), RIX_ELOCKED);
	assert_null(x);
	assert_non_null(strstr(rix_error_last(), "already locked"));
	assert_int_equal(count_files(r, RIX_FILE_LOCK), 2); /* the failed one left nothing */
	MUST(rix_lock_release(b));
	MUST(rix_lock_release(a));
	assert_int_equal(count_files(r, RIX_FILE_LOCK), 0);
	MUST(rix_repo_lock(r, 1, &x));
	assert_int_equal(rix_repo_lock(r2, 0, &a), RIX_ELOCKED);
	assert_non_null(strstr(rix_error_last(), "exclusively"));
	/* restic sees rix's exclusive lock and reads its file. */
	char *out = NULL;
	assert_true(rix_test_restic(dir, PW, "check", &out) != 0);
	assert_non_null(strstr(out, "locked"));
	free(out);
	out = NULL;
	assert_int_equal(rix_test_restic(dir, PW, "list locks --no-lock", &out), 0);
	char id[65] = "";
	assert_int_equal(sscanf(out, "%64s", id), 1);
	free(out);
	char args[100];
	snprintf(args, sizeof(args), "cat lock %s --no-lock", id);
	out = NULL;
	assert_int_equal(rix_test_restic(dir, PW, args, &out), 0);
	assert_non_null(strstr(out, "\"exclusive\": true"));
	assert_non_null(strstr(out, "\"username\": \"tester\"")); /* the repository's user */
	free(out);
	/* Refresh: a new file, the old one gone. */
	MUST(rix_lock_refresh(x));
	assert_int_equal(count_files(r, RIX_FILE_LOCK), 1);
	out = NULL;
	assert_int_equal(rix_test_restic(dir, PW, "list locks --no-lock", &out), 0);
	assert_null(strstr(out, id));
	free(out);
	MUST(rix_lock_release(x));
	out = NULL;
	if (rix_test_restic(dir, PW, "check", &out) != 0)
		fail_msg("restic check after release: %s", out);
	free(out);
	/* Stale: older than 30 minutes, or this host and a PID that is gone; neither blocks. */
	char when[64];
	now_rfc3339(when, sizeof(when), -31 * 60);
	put_lock(r, when, 1, 1, "elsewhere");
	char host[256];
	gethostname(host, sizeof(host));
	now_rfc3339(when, sizeof(when), -10);
	put_lock(r, when, 1, 999999999, host);
	MUST(rix_repo_lock(r, 1, &x));
	MUST(rix_lock_release(x));
	/* A live lock of another host blocks, with its holder in the message. */
	put_lock(r, when, 0, 4242, "otherhost");
	assert_int_equal(rix_repo_lock(r, 1, &x), RIX_ELOCKED);
	assert_non_null(strstr(rix_error_last(), "PID 4242 on otherhost by other"));
	MUST(rix_repo_lock(r, 0, &a)); /* shared with shared */
	MUST(rix_lock_release(a));
	/* unlock removes the two stale ones; --remove-all the live one too. */
	size_t removed;
	MUST(rix_repo_unlock(r, 0, &removed));
	assert_int_equal(removed, 2);
	assert_int_equal(count_files(r, RIX_FILE_LOCK), 1);
	MUST(rix_repo_unlock(r, 1, &removed));
	assert_int_equal(removed, 1);
	assert_int_equal(count_files(r, RIX_FILE_LOCK), 0);
	/* A lock file rix cannot read blocks (as with restic) until removed. */
	char junk[65];
	memset(junk, 'a', 64);
	junk[64] = '\0';
	MUST(rix_backend_write(rix_repo_backend(r), RIX_FILE_LOCK, junk, "junk", 4));
	assert_int_equal(rix_repo_lock(r, 0, &a), RIX_ELOCKED);
	assert_non_null(strstr(rix_error_last(), "cannot be read"));
	MUST(rix_repo_unlock(r, 1, &removed));
	rix_repo_close(r2);
	rix_repo_close(r);
	rix_test_free_dir(dir);
}

/*
 * rix and restic take turns on one repository: rix stores blobs, restic backs up files (some of
 * whose content rix stored already), rix stores more and deduplicates against restic's index;
 * a lock held by one makes the other wait (fail); both check clean at the end.
 */
static void test_turns_with_restic(void **state)
{
	(void)state;
	rix_test_need_restic();
	char *dir = rix_test_new_dir("rix-repo");
	rix_repo *r = init_repo(dir, 2);
	uint8_t a[40000], bb[50000];
	uint64_t seed = 21;
	rix_test_fill_random(a, sizeof(a), &seed);
	rix_test_fill_random(bb, sizeof(bb), &seed);
	rix_id ida;
	MUST(rix_repo_save_blob(r, RIX_BLOB_DATA, a, sizeof(a), &ida, NULL));
	MUST(rix_repo_flush(r));
	/* While rix holds an exclusive lock, restic cannot back up. */
	rix_lock *x;
	MUST(rix_repo_lock(r, 1, &x));
	char src[700];
	snprintf(src, sizeof(src), "%s.src", dir);
	assert_int_equal(mkdir(src, 0700), 0);
	rix_test_put_file(src, "small.bin", bb, sizeof(bb)); /* under restic's 512 KiB minimum: one blob */
	char args[800];
	snprintf(args, sizeof(args), "backup '%s'", src);
	char *out = NULL;
	assert_true(rix_test_restic(dir, PW, args, &out) != 0);
	assert_non_null(strstr(out, "locked"));
	free(out);
	MUST(rix_lock_release(x));
	out = NULL;
	if (rix_test_restic(dir, PW, args, &out) != 0)
		fail_msg("restic backup: %s", out);
	free(out);
	rix_repo_close(r);
	/* rix again: restic's blob is known (dedup), a new one is stored. */
	r = open_repo(dir, NULL);
	MUST(rix_repo_load_index(r, NULL, NULL, NULL));
	int stored = -1;
	MUST(rix_repo_save_blob(r, RIX_BLOB_DATA, bb, sizeof(bb), NULL, &stored));
	assert_int_equal(stored, 0);
	MUST(rix_repo_save_blob(r, RIX_BLOB_DATA, a, sizeof(a), NULL, &stored));
	assert_int_equal(stored, 0);
	uint8_t c[30000];
	rix_test_fill_random(c, sizeof(c), &seed);
	MUST(rix_repo_save_blob(r, RIX_BLOB_DATA, c, sizeof(c), NULL, &stored));
	assert_int_equal(stored, 1);
	MUST(rix_repo_flush(r));
	rix_repo_close(r);
	out = NULL;
	if (rix_test_restic(dir, PW, "check --read-data", &out) != 0)
		fail_msg("restic check: %s", out);
	free(out);
	struct lines l;
	rix_check_report rep = run_check(dir, 1, 0, &l);
	assert_int_equal(rep.errors, 0);
	assert_int_equal(rep.index_files, 3);
	rix_test_remove_tree(src);
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
	rix_repo_close(r);
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
	MUST(rix_repo_write_file(r, RIX_FILE_INDEX, json, strlen(json), &id));
	char name[65];
	rix_id_to_hex(&id, name);
	uint64_t size;
	MUST(rix_backend_stat(rix_repo_backend(r), RIX_FILE_INDEX, name, &size));
	uint8_t *out;
	size_t n;
	MUST(rix_repo_read_file(r, RIX_FILE_INDEX, &id, &out, &n));
	assert_int_equal(n, strlen(json));
	assert_memory_equal(out, json, n);
	rix_free(out);

	/* The same bytes under another name: refused, the name is the file's SHA-256. */
	uint8_t *file;
	size_t fn;
	MUST(rix_backend_read_all(rix_repo_backend(r), RIX_FILE_INDEX, name, 1 << 20, &file, &fn));
	rix_id other = id;
	other.b[0] ^= 1;
	char other_name[65];
	rix_id_to_hex(&other, other_name);
	MUST(rix_backend_write(rix_repo_backend(r), RIX_FILE_SNAPSHOT, other_name, file, fn));
	rix_free(file);
	assert_int_equal(rix_repo_read_file(r, RIX_FILE_SNAPSHOT, &other, &out, &n), RIX_ECORRUPT);
	assert_null(out);
	assert_non_null(strstr(rix_error_last(), "SHA-256"));
	assert_int_equal(rix_repo_read_file(r, RIX_FILE_SNAPSHOT, &id, &out, &n), RIX_ENOTFOUND);

	/* Keys, packs and the config are not unpacked files. */
	assert_int_equal(rix_repo_write_file(r, RIX_FILE_PACK, json, strlen(json), NULL), RIX_EINVAL);
	assert_int_equal(rix_repo_write_file(r, RIX_FILE_KEY, json, strlen(json), NULL), RIX_EINVAL);
	assert_int_equal(rix_repo_read_file(r, RIX_FILE_CONFIG, &id, &out, &n), RIX_EINVAL);

	/* A pack's header, as saved. */
	struct blobs s;
	make_blobs(&s, 20, 7);
	for (size_t i = 0; i < s.n; i++)
		s.type[i] = RIX_BLOB_DATA; /* one pack */
	save_all(r, &s);
	MUST(rix_repo_flush(r));
	rix_id *packs;
	size_t np;
	MUST(rix_master_index_packs(rix_repo_master_index(r), &packs, &np));
	assert_int_equal(np, 1);
	rix_blob *hdr;
	size_t cnt;
	MUST(rix_repo_read_pack_header(r, &packs[0], &hdr, &cnt));
	assert_int_equal(cnt, 20);
	for (size_t i = 0; i < cnt; i++) {
		rix_packed_blob pb;
		MUST(rix_master_index_lookup(rix_repo_master_index(r), hdr[i].type, &hdr[i].id, &pb));
		assert_memory_equal(pb.pack_id.b, packs[0].b, RIX_ID_SIZE);
		assert_int_equal(pb.offset, hdr[i].offset);
		assert_int_equal(pb.length, hdr[i].length);
	}
	rix_free(hdr);
	rix_id missing = packs[0];
	missing.b[31] ^= 0x80;
	assert_int_equal(rix_repo_read_pack_header(r, &missing, &hdr, &cnt), RIX_ENOTFOUND);
	assert_null(hdr);
	assert_non_null(strstr(rix_error_last(), "missing"));
	rix_free(packs);
	free_blobs(&s);
	rix_repo_close(r);
	rix_test_free_dir(dir);
}

static int first_lock(void *arg, const char *name, uint64_t size)
{
	(void)size;
	snprintf(arg, 65, "%s", name);
	return 0;
}

/* A lock whose refresh keeps failing is lost: the holder learns it, and long operations stop. */
static void test_lock_lost(void **state)
{
	(void)state;
	char *dir = rix_test_new_dir("rix-repo");
	rix_repo *r = init_repo(dir, 2);
	const char data[] = "a blob, so that check has a pack to look at";
	MUST(rix_repo_save_blob(r, RIX_BLOB_DATA, data, sizeof(data), NULL, NULL));
	MUST(rix_repo_flush(r));
	rix_lock *l;
	MUST(rix_repo_lock(r, 0, &l));
	char before[65] = "", after[65] = "";
	MUST(rix_backend_list(rix_repo_backend(r), RIX_FILE_LOCK, first_lock, before));
	rix_lock_set_intervals(l, 20, 20, 300);
	usleep(200 * 1000);
	rix_lock_set_intervals(l, 3600 * 1000, 3600 * 1000, 3600 * 1000); /* quiet, to count */
	usleep(100 * 1000); /* a refresh under way finishes */
	/* Refreshed: a new file replaced the old one. */
	assert_int_equal(count_files(r, RIX_FILE_LOCK), 1);
	MUST(rix_backend_list(rix_repo_backend(r), RIX_FILE_LOCK, first_lock, after));
	assert_string_not_equal(before, after);
	MUST(rix_lock_check(l));

	/* A file where the locks folder was: every refresh fails from now on. */
	char locks[4096], saved[4200];
	snprintf(locks, sizeof(locks), "%s/locks", dir);
	snprintf(saved, sizeof(saved), "%s/locks.saved", dir);
	assert_int_equal(rename(locks, saved), 0);
	rix_test_put_file(dir, "locks", "x", 1);
	rix_lock_set_intervals(l, 20, 20, 300);
	int rc = 0;
	for (int i = 0; i < 300 && rc == 0; i++) {
		usleep(10 * 1000);
		rc = rix_lock_check(l);
	}
	assert_int_equal(rc, RIX_ELOCKED);
	assert_non_null(strstr(rix_error_last(), "lost"));
	assert_non_null(strstr(rix_error_last(), "refreshed"));
	const char other[] = "another blob";
	assert_int_equal(rix_repo_save_blob(r, RIX_BLOB_DATA, other, sizeof(other), NULL, NULL), RIX_ELOCKED);
	assert_int_equal(rix_repo_flush(r), RIX_ELOCKED);
	assert_int_equal(rix_repo_check(r, 0, NULL, NULL, NULL, NULL), RIX_ELOCKED);
	assert_non_null(strstr(rix_error_last(), "lost"));

	/* The folder back: the lock stays lost (its holder must start again), a new one works. */
	char path[4200];
	snprintf(path, sizeof(path), "%s/locks", dir);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(rename(saved, locks), 0);
	usleep(100 * 1000);
	assert_int_equal(rix_lock_check(l), RIX_ELOCKED);
	rix_lock_release(l);
	MUST(rix_repo_lock(r, 0, &l));
	MUST(rix_repo_save_blob(r, RIX_BLOB_DATA, other, sizeof(other), NULL, NULL));
	MUST(rix_repo_flush(r));
	MUST(rix_repo_check(r, 0, NULL, NULL, NULL, NULL));
	MUST(rix_lock_release(l));
	assert_int_equal(count_files(r, RIX_FILE_LOCK), 0);
	rix_repo_close(r);
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
		cmocka_unit_test(test_check),
		cmocka_unit_test(test_locks),
		cmocka_unit_test(test_turns_with_restic),
		cmocka_unit_test(test_unknown_config_version),
		cmocka_unit_test(test_files),
		cmocka_unit_test(test_lock_lost),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
