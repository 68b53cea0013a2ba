/*
 * tests/repo_fixture.c — the helpers repo_fixture.h describes (moved from test_repo.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
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


struct index_names {
	char v[64][65];
	size_t n;
};

static int list_index_name(void *arg, const char *name, uint64_t size)
{
	(void)size;
	struct index_names *x = arg;
	if (x->n < 64)
		memcpy(x->v[x->n++], name, 65);
	return 0;
}

struct dropping {
	rix_index *out;
	const rix_id *id;
};

static int copy_pack_without(void *arg, const rix_id *pack_id, const rix_packed_blob *b, size_t n)
{
	struct dropping *d = arg;
	rix_blob *v = calloc(n ? n : 1, sizeof(*v));
	assert_non_null(v);
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (memcmp(b[i].id.b, d->id->b, RIX_ID_SIZE) != 0)
			v[k++] = (rix_blob){ b[i].id, b[i].type, b[i].offset, b[i].length, b[i].uncompressed_length };
	if (k > 0)
		MUST(rix_index_store_pack(d->out, pack_id, v, k));
	free(v);
	return 0;
}

int drop_from_index(const char *dir, const rix_id *id)
{
	rix_repo *r = open_repo(dir, NULL);
	struct index_names names = { .n = 0 };
	MUST(rix_backend_list(rix_repo_backend(r), RIX_FILE_INDEX, list_index_name, &names));
	int dropped = 0;
	for (size_t i = 0; i < names.n; i++) {
		rix_id fid;
		MUST(rix_id_from_hex(&fid, names.v[i], 64));
		uint8_t *json;
		size_t n;
		MUST(rix_repo_read_file(&json, &n, r, RIX_FILE_INDEX, &fid));
		rix_index *idx;
		MUST(rix_index_decode(&idx, NULL, (const char *)json, n));
		rix_free(json);
		if (!rix_index_has(idx, RIX_BLOB_DATA, id) && !rix_index_has(idx, RIX_BLOB_TREE, id)) {
			rix_index_free(idx);
			continue;
		}
		struct dropping d = { .id = id };
		MUST(rix_index_new(&d.out));
		MUST(rix_index_foreach_pack(idx, copy_pack_without, &d));
		char *out;
		size_t on;
		MUST(rix_index_encode(&out, &on, d.out));
		MUST(rix_repo_write_file(NULL, r, RIX_FILE_INDEX, out, on));
		MUST(rix_backend_remove(rix_repo_backend(r), RIX_FILE_INDEX, names.v[i]));
		rix_free(out);
		rix_index_free(d.out);
		rix_index_free(idx);
		dropped++;
	}
	rix_repo_free(r);
	return dropped;
}

void write_config_json(const char *dir, const char *json)
{
	char keys[4200];
	snprintf(keys, sizeof(keys), "%s/keys", dir);
	char names[4][65];
	assert_true(rix_test_list_ids(keys, names, 4) >= 1);
	char path[4300];
	snprintf(path, sizeof(path), "%s/%s", keys, names[0]);
	size_t kl;
	char *kf = rix_test_read_file(path, &kl);
	assert_non_null(kf);
	rix_key *key;
	MUST(rix_key_open_file(&key, kf, kl, PW, strlen(PW)));
	free(kf);
	size_t n = strlen(json);
	uint8_t *sealed = malloc(n + RIX_CRYPTO_OVERHEAD);
	assert_non_null(sealed);
	MUST(rix_crypto_seal(key, json, n, sealed));
	rix_key_free(key);
	snprintf(path, sizeof(path), "%s/config", dir);
	unlink(path); /* (restic's files are read-only) */
	rix_test_put_file(dir, "config", sealed, n + RIX_CRYPTO_OVERHEAD);
	free(sealed);
}

void store_tree(rix_id *id, rix_repo *r, const rix_node *nodes, size_t n)
{
	rix_tree_enc *enc;
	MUST(rix_tree_enc_new(&enc));
	for (size_t i = 0; i < n; i++)
		MUST(rix_tree_enc_add(enc, &nodes[i]));
	const uint8_t *data;
	size_t len;
	MUST(rix_tree_enc_finish(&data, &len, enc));
	MUST(rix_repo_save_blob(id, NULL, r, RIX_BLOB_TREE, data, len));
	rix_tree_enc_free(enc);
}

/* ---- index entries ---------------------------------------------------------------------------- */

int push_entry(void *arg, const rix_packed_blob *pb)
{
	struct entries *e = arg;
	if (e->n == e->cap) {
		e->cap = e->cap ? 2 * e->cap : 1024;
		e->v = realloc(e->v, e->cap * sizeof(*e->v));
		assert_non_null(e->v);
	}
	e->v[e->n++] = *pb;
	return 0;
}

int cmp_pb(const void *a, const void *b)
{
	const rix_packed_blob *x = a, *y = b;
	int c = memcmp(x->pack_id.b, y->pack_id.b, RIX_ID_SIZE);
	if (c == 0 && x->offset != y->offset)
		c = x->offset < y->offset ? -1 : 1;
	if (c == 0)
		c = memcmp(x->id.b, y->id.b, RIX_ID_SIZE);
	if (c == 0)
		c = (int)x->type - (int)y->type;
	if (c == 0 && x->length != y->length)
		c = x->length < y->length ? -1 : 1;
	if (c == 0 && x->uncompressed_length != y->uncompressed_length)
		c = x->uncompressed_length < y->uncompressed_length ? -1 : 1;
	return c;
}

/* Every entry of the index of the repository in dir (loaded strictly), sorted. */
struct entries load_entries(const char *dir)
{
	rix_repo_options o = fast;
	o.strict = true;
	rix_repo *r = open_repo(dir, &o);
	MUST(rix_repo_load_index(NULL, r, NULL, NULL));
	struct entries e = { 0 };
	MUST(rix_master_index_foreach(rix_repo_master_index(r), push_entry, &e));
	rix_repo_free(r);
	if (e.n > 1)
		qsort(e.v, e.n, sizeof(*e.v), cmp_pb);
	return e;
}


struct forms load_forms(const char *dir)
{
	struct forms f = { .e = load_entries(dir) };
	f.hash = calloc(f.e.n + 1, sizeof(*f.hash));
	assert_non_null(f.hash);
	for (size_t i = 0; i < f.e.n; i++) {
		const rix_packed_blob *pb = &f.e.v[i];
		char hex[65], path[4400];
		rix_id_to_hex(hex, &pb->pack_id);
		snprintf(path, sizeof(path), "%s/data/%.2s/%s", dir, hex, hex);
		FILE *fp = fopen(path, "rb");
		if (fp == NULL)
			fail_msg("pack %s, which the index names, cannot be opened", path);
		uint8_t *buf = malloc(pb->length);
		assert_non_null(buf);
		assert_int_equal(fseek(fp, (long)pb->offset, SEEK_SET), 0);
		assert_int_equal(fread(buf, 1, pb->length, fp), pb->length);
		fclose(fp);
		rix_sha256(&f.hash[i], buf, pb->length);
		free(buf);
	}
	return f;
}

void free_forms(struct forms *f)
{
	free(f->e.v);
	free(f->hash);
	memset(f, 0, sizeof(*f));
}

static bool pack_in(const struct forms *f, const rix_id *pack)
{
	for (size_t i = 0; i < f->e.n; i++)
		if (memcmp(&f->e.v[i].pack_id, pack, sizeof(*pack)) == 0)
			return true;
	return false;
}

struct form_diff compare_forms(const struct forms *before, const struct forms *after)
{
	struct form_diff d = { 0 };
	for (size_t i = 0; i < after->e.n; i++) {
		const rix_packed_blob *a = &after->e.v[i];
		if (pack_in(before, &a->pack_id))
			continue; /* a pack that was there before */
		const rix_packed_blob *old = NULL;
		bool same = false;
		for (size_t k = 0; k < before->e.n && !same; k++) {
			const rix_packed_blob *b = &before->e.v[k];
			if (b->type != a->type || memcmp(&b->id, &a->id, sizeof(a->id)) != 0)
				continue;
			same = b->length == a->length && b->uncompressed_length == a->uncompressed_length &&
			       memcmp(&before->hash[k], &after->hash[i], sizeof(rix_id)) == 0;
			if (old == NULL || same)
				old = b;
		}
		if (old == NULL) {
			char hex[65];
			rix_id_to_hex(hex, &a->id);
			fail_msg("blob %s of a new pack was in no pack before", hex);
		}
		if (same)
			old->uncompressed_length != 0 ? d.copied_z++ : d.copied_u++;
		else if (old->uncompressed_length != 0)
			d.recoded_z++;
		else
			a->uncompressed_length != 0 ? d.compressed_now++ : d.recoded_u++;
	}
	return d;
}
