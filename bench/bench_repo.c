/*
 * bench/bench_repo.c — the repository layer: index loading and saving with dedup (issue 4).
 *
 *   LoadIndex/v1, /v2    restic's: one index file of 5000 packs with one blob each; one op
 *                        loads it into a fresh repository handle (rix_repo_load_index: read,
 *                        SHA-256, open, decompress, decode, build). Opening is not timed.
 *   SaveBlob/miss        a new 64 KiB blob (random content, auto compression tries zstd and
 *                        stores it plain): hash, index miss, pending, encode, pack, write
 *   SaveBlob/miss-par    SaveBlob/miss from every CPU at once, each thread its own new blobs
 *   SaveBlob/hit         the same blob again: hash and one index hit (dedup)
 *   SaveBlob/hit-par     SaveBlob/hit from every CPU at once
 * Repositories live in a temporary directory under $TMPDIR (page cache); key files use
 * scrypt N=1024 so that opening stays cheap.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "bench.h"

#define PW "bench"
#define BLOB (64u << 10)

enum { LOAD_V1, LOAD_V2, SAVE_MISS, SAVE_HIT, SAVE_HIT_PAR, SAVE_MISS_PAR };

/* Threads of the parallel benchmarks, at most. */
#define MAX_PAR 64

struct rstate {
	char dir[256];
	rix_repo *r;
	uint8_t *data;
	uint64_t counter;
	rix_repo_options opt;
	/* SaveBlob/miss-par: one buffer (BLOB bytes, thread i's number at byte 8) and count per thread */
	int np;
	uint8_t *pdata;
	uint64_t pcounter[MAX_PAR];
};

static int open_repo(bench_b *b, struct rstate *s)
{
	rix_backend *be;
	if (rix_backend_local_open(&be, s->dir, 0) != 0 || rix_repo_open(&s->r, be, PW, strlen(PW), &s->opt) != 0)
		return bench_fail(b, "open: %s", rix_error_last());
	return 0;
}

static int repo_setup(bench_b *b)
{
	struct rstate *s = calloc(1, sizeof(*s));
	if (s == NULL)
		return bench_fail(b, "out of memory");
	b->state = s;
	int which = (int)b->def->arg[0];
	const char *t = getenv("TMPDIR");
	snprintf(s->dir, sizeof(s->dir), "%s/rix-bench-repo-XXXXXX", t != NULL && *t ? t : "/tmp");
	if (mkdtemp(s->dir) == NULL)
		return bench_fail(b, "mkdtemp");
	s->opt = (rix_repo_options){ .version = RIX_REPO_OPTIONS_VERSION, .compression = RIX_COMPRESSION_AUTO, .repo_version = which == LOAD_V1 ? 1 : 2, .scrypt_n = 1024, .scrypt_r = 8,
				     .scrypt_p = 1 };
	rix_backend *be;
	if (rix_backend_local_open(&be, s->dir, 1) != 0 || rix_repo_init(&s->r, be, PW, strlen(PW), &s->opt) != 0)
		return bench_fail(b, "init: %s", rix_error_last());
	if (which == LOAD_V1 || which == LOAD_V2) {
		/* 5000 packs of one blob, as restic's benchmark makes them. */
		rix_index *idx;
		uint64_t st = 42;
		if (rix_index_new(&idx) != 0)
			return bench_fail(b, "index");
		for (int p = 0; p < 5000; p++) {
			rix_id pack;
			rix_blob bl = { .type = RIX_BLOB_DATA, .offset = 0, .length = 1000 + (uint32_t)p,
					.uncompressed_length = which == LOAD_V2 ? 2000 : 0 };
			gen_id(&st, &pack);
			gen_id(&st, &bl.id);
			if (rix_index_store_pack(idx, &pack, &bl, 1) != 0)
				return bench_fail(b, "store");
		}
		char *json;
		size_t len;
		if (rix_index_encode(&json, &len, idx) != 0)
			return bench_fail(b, "encode: %s", rix_error_last());
		rix_id id;
		char name[65];
		uint64_t n;
		int rc = rix_repo_write_file(&id, s->r, RIX_FILE_INDEX, json, len);
		rix_free(json);
		rix_id_to_hex(name, &id);
		if (rc != 0 || rix_backend_stat(&n, rix_repo_backend(s->r), RIX_FILE_INDEX, name) != 0)
			return bench_fail(b, "write: %s", rix_error_last());
		b->set_bytes = n;
		rix_index_free(idx);
		rix_repo_free(s->r);
		s->r = NULL;
	} else {
		s->data = malloc(BLOB);
		if (s->data == NULL)
			return bench_fail(b, "out of memory");
		randombytes_buf(s->data, BLOB);
		b->set_bytes = BLOB;
		if (which == SAVE_MISS_PAR) {
			s->np = bench_procs() > MAX_PAR ? MAX_PAR : bench_procs();
			s->pdata = malloc((size_t)s->np * BLOB);
			if (s->pdata == NULL)
				return bench_fail(b, "out of memory");
			for (int i = 0; i < s->np; i++) {
				uint64_t who = (uint64_t)i;
				memcpy(s->pdata + (size_t)i * BLOB, s->data, BLOB);
				memcpy(s->pdata + (size_t)i * BLOB + 8, &who, sizeof(who));
			}
		}
		bool miss = which == SAVE_MISS || which == SAVE_MISS_PAR;
		if (!miss && rix_repo_save_blob(NULL, NULL, s->r, RIX_BLOB_DATA, s->data, BLOB) != 0)
			return bench_fail(b, "save: %s", rix_error_last());
		if (!miss && rix_repo_flush(s->r) != 0)
			return bench_fail(b, "flush: %s", rix_error_last());
	}
	return 0;
}

static void repo_teardown(bench_b *b)
{
	struct rstate *s = b->state;
	if (s == NULL)
		return;
	if (s->r != NULL && rix_repo_flush(s->r) != 0)
		bench_log("flush: %s", rix_error_last());
	rix_repo_free(s->r);
	if (s->dir[0]) {
		char cmd[600];
		snprintf(cmd, sizeof(cmd), "chmod -R u+w '%s' && rm -rf '%s'", s->dir, s->dir);
		if (system(cmd) != 0)
			bench_log("could not remove %s", s->dir);
	}
	free(s->data);
	free(s->pdata);
	free(s);
	b->state = NULL;
}

/* One thread of SaveBlob/hit-par (the known blob again) or /miss-par (its own new blobs). */
struct saver {
	rix_repo *r;
	uint8_t *data;     /* hit: the known blob (not written); miss: this thread's buffer */
	uint64_t *counter; /* miss: this thread's count, kept across runs so no blob repeats */
	uint64_t n;
	bool miss;
	int rc;
};

static void *save_run(void *arg)
{
	struct saver *h = arg;
	for (uint64_t i = 0; i < h->n && h->rc == 0; i++) {
		bool stored;
		if (h->miss) {
			(*h->counter)++;
			memcpy(h->data, h->counter, sizeof(*h->counter));
		}
		h->rc = rix_repo_save_blob(NULL, &stored, h->r, RIX_BLOB_DATA, h->data, BLOB);
		if (h->rc == 0 && stored != h->miss)
			h->rc = -1;
	}
	return NULL;
}

static void repo_run(bench_b *b)
{
	struct rstate *s = b->state;
	int which = (int)b->def->arg[0];
	if (which == SAVE_HIT_PAR || which == SAVE_MISS_PAR) {
		bool miss = which == SAVE_MISS_PAR;
		int np = miss ? s->np : bench_procs() > MAX_PAR ? MAX_PAR : bench_procs();
		struct saver h[MAX_PAR];
		pthread_t th[MAX_PAR];
		for (int i = 0; i < np; i++) {
			h[i] = (struct saver){ s->r, miss ? s->pdata + (size_t)i * BLOB : s->data, miss ? &s->pcounter[i] : NULL,
					       b->n / (uint64_t)np + (i == 0 ? b->n % (uint64_t)np : 0), miss, 0 };
			pthread_create(&th[i], NULL, save_run, &h[i]);
		}
		for (int i = 0; i < np; i++) {
			pthread_join(th[i], NULL);
			if (h[i].rc != 0)
				bench_fail(b, "save: %d", h[i].rc);
		}
		return;
	}
	for (uint64_t i = 0; i < b->n; i++) {
		int rc = 0;
		bool stored = false;
		switch (which) {
		case LOAD_V1:
		case LOAD_V2: {
			bench_stop(b);
			rix_repo_free(s->r);
			s->r = NULL;
			if (open_repo(b, s) != 0)
				return;
			bench_start(b);
			rix_repo_load_stats st;
			rc = rix_repo_load_index(&st, s->r, NULL, NULL);
			if (rc == 0 && st.blobs != 5000)
				rc = rix_error_set(RIX_ECORRUPT, "loaded %zu blobs", st.blobs);
			break;
		}
		case SAVE_MISS:
			s->counter++;
			memcpy(s->data, &s->counter, sizeof(s->counter));
			rc = rix_repo_save_blob(NULL, &stored, s->r, RIX_BLOB_DATA, s->data, BLOB);
			if (rc == 0 && !stored)
				rc = rix_error_set(RIX_EINVAL, "a new blob was not stored");
			break;
		case SAVE_HIT:
			rc = rix_repo_save_blob(NULL, &stored, s->r, RIX_BLOB_DATA, s->data, BLOB);
			if (rc == 0 && stored)
				rc = rix_error_set(RIX_EINVAL, "a known blob was stored");
			break;
		}
		if (rc != 0) {
			bench_fail(b, "%s: %s", b->def->name, rix_error_last());
			return;
		}
	}
}

void register_repo_benchmarks(void)
{
	static const struct {
		const char *name;
		int which;
	} list[] = { { "LoadIndex/v1", LOAD_V1 }, { "LoadIndex/v2", LOAD_V2 }, { "SaveBlob/miss", SAVE_MISS },
		     { "SaveBlob/miss-par", SAVE_MISS_PAR }, { "SaveBlob/hit", SAVE_HIT },
		     { "SaveBlob/hit-par", SAVE_HIT_PAR } };
	for (size_t i = 0; i < sizeof(list) / sizeof(list[0]); i++) {
		bench_def d = { .setup = repo_setup, .run = repo_run, .teardown = repo_teardown, .family = 5 };
		snprintf(d.name, sizeof(d.name), "%s", list[i].name);
		d.arg[0] = (uint64_t)list[i].which;
		bench_register(&d);
	}
}
