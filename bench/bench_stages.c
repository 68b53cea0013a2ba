/*
 * bench/bench_stages.c — the stages of a first backup alone, on real files, and all of them
 * together on one thread and on every CPU: the limit a backup's throughput is measured against
 * (issue 10: "the whole backup within 70% of the two-core limit").
 *
 *   Stage/read          every file read from the page cache, 256 KiB at a time (as the archiver)
 *   Stage/chunk         restic's chunker over every file's bytes (in memory)
 *   Stage/sha256        SHA-256 of every chunk (a blob's ID)
 *   Stage/encode-auto   every chunk compressed (auto: zstd) and sealed, as a new blob is stored
 *                       (stored-%: stored bytes / plaintext bytes)
 *   Stage/seal          every chunk sealed, not compressed (AES-256-CTR + Poly1305-AES)
 *   Stage/pipeline/threads=T   read + chunk + sha256 + encode-auto of every file, files taken in
 *                       turn by T threads (T = 1 and the number of CPUs): no walk, no index, no
 *                       pack files. Its MB/s on every CPU is the limit of the machine for this
 *                       data; a backup's MB/s divided by it is the share of the limit it reaches.
 *
 * The files: every non-empty regular file under $RIX_BENCH_STAGE_DIR (default /usr/lib) in path
 * order, while they fit $RIX_BENCH_STAGE_MIB MiB (default 1024); read once before (page cache
 * warm). One op is the whole corpus; MB/s counts its plaintext bytes.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>

#include "bench.h"

#define READ_PIECE ((size_t)256 << 10)
#define POLYNOMIAL 0x3DA3358B4DC173ull /* restic's own chunker tests' */

enum stage { S_READ, S_CHUNK, S_SHA, S_ENCODE, S_SEAL, S_PIPELINE };

struct st_state {
	const bench_corpus *c;
	size_t *cut; /* chunk k = c->data[cut[k], cut[k + 1]) (chunks never span files) */
	size_t ncut;
	rix_key *key;
	rix_chunker *ch;
	rix_blob_codec *codec;
	uint8_t *buf, *out;
	atomic_size_t next; /* pipeline: the next file to take */
};

static const bench_corpus *stage_corpus(bool load)
{
	const char *dir = getenv("RIX_BENCH_STAGE_DIR");
	const char *mib = getenv("RIX_BENCH_STAGE_MIB");
	size_t budget = (mib != NULL ? strtoull(mib, NULL, 10) : 1024) << 20;
	return bench_corpus_get(dir != NULL && *dir ? dir : "/usr/lib", budget, load);
}

/* Reads file path in READ_PIECE pieces into buf (RIX_CHUNK_MAX bytes); @return the bytes read. */
static size_t read_file(const char *path, uint8_t *buf)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	size_t total = 0, at = 0;
	for (;;) {
		if (at + READ_PIECE > RIX_CHUNK_MAX)
			at = 0;
		ssize_t got = read(fd, buf + at, READ_PIECE);
		if (got <= 0)
			break;
		at += (size_t)got;
		total += (size_t)got;
	}
	close(fd);
	return total;
}

/* One file through chunker, SHA-256 and encode, as the archiver does (bytes in buf). */
struct flow {
	rix_chunker *ch;
	rix_blob_codec *codec;
	uint8_t *chunk, *out;
	size_t out_cap;
	int fail;
};

static void flow_blob(struct flow *f, const uint8_t *p, size_t n)
{
	rix_id id;
	uint32_t len, ulen;
	rix_sha256(&id, p, n);
	if (rix_blob_codec_encode(&len, &ulen, f->codec, RIX_BLOB_DATA, p, n, f->out, f->out_cap) != 0)
		f->fail = 1;
}

static void flow_file(struct flow *f, const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		f->fail = 1;
		return;
	}
	rix_chunker_reset(f->ch);
	size_t clen = 0, scanned = 0;
	for (;;) {
		if (scanned == clen) {
			size_t room = RIX_CHUNK_MAX - clen;
			ssize_t got = read(fd, f->chunk + clen, room < READ_PIECE ? room : READ_PIECE);
			if (got <= 0)
				break;
			clen += (size_t)got;
		}
		bool cut;
		scanned += rix_chunker_scan(&cut, f->ch, f->chunk + scanned, clen - scanned);
		if (cut) {
			flow_blob(f, f->chunk, scanned);
			memmove(f->chunk, f->chunk + scanned, clen - scanned);
			clen -= scanned;
			scanned = 0;
		}
	}
	if (clen > 0)
		flow_blob(f, f->chunk, clen);
	close(fd);
}

static int flow_init(struct flow *f, const rix_key *key)
{
	memset(f, 0, sizeof(*f));
	f->out_cap = rix_blob_stored_bound(RIX_CHUNK_MAX);
	if (rix_chunker_new(&f->ch, POLYNOMIAL) != 0 || rix_blob_codec_new(&f->codec, key, 2, RIX_COMPRESSION_AUTO) != 0)
		return -1;
	f->chunk = malloc(RIX_CHUNK_MAX);
	f->out = malloc(f->out_cap);
	return f->chunk != NULL && f->out != NULL ? 0 : -1;
}

static void flow_fini(struct flow *f)
{
	rix_chunker_free(f->ch);
	rix_blob_codec_free(f->codec);
	free(f->chunk);
	free(f->out);
}

static int st_setup(bench_b *b)
{
	struct st_state *s = calloc(1, sizeof(*s));
	b->state = s;
	if (s == NULL)
		return bench_fail(b, "out of memory");
	enum stage st = (enum stage)b->def->arg[0];
	s->c = stage_corpus(st != S_READ && st != S_PIPELINE);
	if (s->c->nfiles == 0)
		return bench_fail(b, "no files in %s", s->c->dir);
	s->buf = malloc(RIX_CHUNK_MAX);
	s->out = malloc(rix_blob_stored_bound(RIX_CHUNK_MAX));
	if (s->buf == NULL || s->out == NULL || sodium_init() < 0 || rix_key_random(&s->key) != 0 ||
	    rix_chunker_new(&s->ch, POLYNOMIAL) != 0 ||
	    rix_blob_codec_new(&s->codec, s->key, 2, st == S_SEAL ? RIX_COMPRESSION_OFF : RIX_COMPRESSION_AUTO) != 0)
		return bench_fail(b, "setup: %s", rix_error_last());
	for (size_t f = 0; f < s->c->nfiles; f++) /* the page cache warm */
		read_file(s->c->paths[f], s->buf);
	if (st == S_SHA || st == S_ENCODE || st == S_SEAL) { /* the real chunks */
		const bench_corpus *c = s->c;
		size_t cap = 1024;
		s->cut = malloc(cap * sizeof(size_t));
		s->cut[0] = 0;
		for (size_t f = 0; f < c->nfiles; f++) {
			size_t at = c->file_start[f], end = c->file_start[f + 1];
			rix_chunker_reset(s->ch);
			while (at < end) {
				bool cut;
				at += rix_chunker_scan(&cut, s->ch, c->data + at, end - at);
				if (cut || at == end) {
					if (s->ncut + 2 > cap && (s->cut = realloc(s->cut, (cap *= 2) * sizeof(size_t))) == NULL)
						return bench_fail(b, "out of memory");
					s->cut[++s->ncut] = at;
				}
			}
		}
		bench_metric(b, (double)c->n / (double)s->ncut / 1024.0, "KiB/chunk");
	}
	b->set_bytes = s->c->n;
	bench_metric(b, (double)s->c->nfiles, "files");
	return 0;
}

struct pl_arg {
	struct st_state *s;
	struct flow f;
};

static void *pl_thread(void *p)
{
	struct pl_arg *a = p;
	for (;;) {
		size_t f = atomic_fetch_add(&a->s->next, 1);
		if (f >= a->s->c->nfiles)
			break;
		flow_file(&a->f, a->s->c->paths[f]);
	}
	return NULL;
}

static void st_run(bench_b *b)
{
	struct st_state *s = b->state;
	const bench_corpus *c = s->c;
	enum stage st = (enum stage)b->def->arg[0];
	size_t sink = 0;
	for (uint64_t op = 0; op < b->n; op++) {
		switch (st) {
		case S_READ:
			for (size_t f = 0; f < c->nfiles; f++)
				sink += read_file(c->paths[f], s->buf);
			break;
		case S_CHUNK:
			for (size_t f = 0; f < c->nfiles; f++) {
				size_t at = c->file_start[f], end = c->file_start[f + 1];
				rix_chunker_reset(s->ch);
				while (at < end) {
					bool cut;
					at += rix_chunker_scan(&cut, s->ch, c->data + at, end - at);
					sink += cut;
				}
			}
			break;
		case S_SHA:
			for (size_t k = 0; k < s->ncut; k++) {
				rix_id id;
				rix_sha256(&id, c->data + s->cut[k], s->cut[k + 1] - s->cut[k]);
				sink += id.b[0];
			}
			break;
		case S_ENCODE:
		case S_SEAL:
			for (size_t k = 0; k < s->ncut; k++) {
				uint32_t len, ulen;
				if (rix_blob_codec_encode(&len, &ulen, s->codec, RIX_BLOB_DATA, c->data + s->cut[k],
							  s->cut[k + 1] - s->cut[k], s->out, rix_blob_stored_bound(RIX_CHUNK_MAX)) != 0)
					bench_die("encode: %s", rix_error_last());
				sink += len;
			}
			break;
		case S_PIPELINE: {
			size_t nt = (size_t)b->def->arg[1];
			struct pl_arg *a = calloc(nt, sizeof(*a));
			pthread_t *th = calloc(nt, sizeof(*th));
			if (a == NULL || th == NULL)
				bench_die("out of memory");
			bench_stop(b);
			for (size_t t = 0; t < nt; t++) {
				a[t].s = s;
				if (flow_init(&a[t].f, s->key) != 0)
					bench_die("pipeline: %s", rix_error_last());
			}
			atomic_store(&s->next, 0);
			bench_start(b);
			for (size_t t = 0; t < nt; t++)
				if (pthread_create(&th[t], NULL, pl_thread, &a[t]) != 0)
					bench_die("pthread_create");
			for (size_t t = 0; t < nt; t++)
				pthread_join(th[t], NULL);
			bench_stop(b);
			for (size_t t = 0; t < nt; t++) {
				if (a[t].f.fail)
					bench_die("pipeline: a file failed");
				flow_fini(&a[t].f);
			}
			free(a);
			free(th);
			bench_start(b);
			break;
		}
		}
	}
	if ((st == S_ENCODE || st == S_SEAL) && b->n > 0) /* sink: the stored bytes */
		bench_metric(b, 100.0 * (double)sink / (double)b->n / (double)c->n, "stored-%");
	else if (sink == 1) /* keeps the work observable */
		bench_log("sink");
}

static void st_teardown(bench_b *b)
{
	struct st_state *s = b->state;
	if (s != NULL) {
		rix_chunker_free(s->ch);
		rix_blob_codec_free(s->codec);
		rix_key_free(s->key);
		free(s->cut);
		free(s->buf);
		free(s->out);
		free(s);
	}
	b->state = NULL;
}

void register_stage_benchmarks(void)
{
	static const char *const names[] = { "read", "chunk", "sha256", "encode-auto", "seal" };
	for (int i = 0; i <= S_SEAL; i++) {
		bench_def d = { .setup = st_setup, .run = st_run, .teardown = st_teardown, .family = 8 };
		snprintf(d.name, sizeof(d.name), "Stage/%s", names[i]);
		d.arg[0] = (uint64_t)i;
		bench_register(&d);
	}
	int procs = bench_procs();
	for (int t = 1; t <= procs; t = t == 1 && procs > 1 ? procs : t + procs) {
		bench_def d = { .setup = st_setup, .run = st_run, .teardown = st_teardown, .family = 8 };
		snprintf(d.name, sizeof(d.name), "Stage/pipeline/threads=%d", t);
		d.arg[0] = S_PIPELINE;
		d.arg[1] = (uint64_t)t;
		bench_register(&d);
	}
}
