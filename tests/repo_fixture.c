/*
 * tests/repo_fixture.c — the helpers repo_fixture.h describes (moved from test_repo.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <cmocka.h>

#include "rix/rix.h"
#include "repo_fixture.h"
#include "testutil.h"

const rix_repo_options fast = { .version = RIX_REPO_OPTIONS_VERSION, .compression = RIX_COMPRESSION_AUTO, .pack_size = 4 << 20, .scrypt_n = 128, .scrypt_r = 1, .scrypt_p = 1, .username = "tester",
				.hostname = "testhost" };

rix_repo *init_repo(const char *dir, int version)
{
	rix_backend *b;
	MUST(rix_backend_local_open(&b, dir, 1));
	rix_repo_options o = fast;
	o.repo_version = version;
	rix_repo *r;
	MUST(rix_repo_init(&r, b, PW, strlen(PW), &o));
	return r;
}

rix_repo *open_repo(const char *dir, const rix_repo_options *o)
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

size_t count_files(rix_repo *r, rix_file_type t)
{
	size_t n = 0;
	MUST(rix_backend_list(rix_repo_backend(r), t, count_cb, &n));
	return n;
}

void make_blobs(struct blobs *s, size_t n, uint64_t seed)
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
		rix_sha256(&s->id[i], s->data[i], s->len[i]);
	}
}

void free_blobs(struct blobs *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->data[i]);
}

void save_all(rix_repo *r, const struct blobs *s)
{
	for (size_t i = 0; i < s->n; i++)
		MUST(rix_repo_save_blob(NULL, NULL, r, s->type[i], s->data[i], s->len[i]));
}

void flip_byte(const char *path, long at)
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

static void on_check_msg(void *arg, bool is_error, const char *msg)
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

rix_check_report run_check(const char *dir, int read_data, int want_rc, struct lines *l)
{
	rix_repo *r = open_repo(dir, NULL);
	rix_check_report rep;
	memset(l, 0, sizeof(*l));
	rix_check_options co = { .version = RIX_CHECK_OPTIONS_VERSION, .read_data = read_data, .msg = on_check_msg,
				 .progress = on_progress, .payload = l };
	int rc = rix_repo_check(&rep, r, &co);
	assert_int_equal((size_t)l->progress_calls, rep.packs);
	if (rc != want_rc)
		fail_msg("check: %d (%s), want %d", rc, rix_error_last(), want_rc);
	rix_repo_free(r);
	assert_int_equal((size_t)l->errors, rep.errors);
	return rep;
}

