/*
 * bench/bench_compress.c — the space-versus-read-time study behind compression mode auto's
 * threshold (issue 3): real files cut into blobs, stored with each mode, then read back at random.
 *
 *   Compress/<corpus>/<mode>    corpus: include (/usr/include), doc (/usr/share/doc)
 *                               mode: off, auto (RIX_ZSTD_LEVEL_AUTO) with a minimum saving of
 *                               0, 1, 5, 10, 20 % (auto-0 .. auto-20), max (RIX_ZSTD_LEVEL_MAX);
 *                               and other levels: auto-0/level=1, max/level=9, max/level=15
 *
 * Blobs: every regular file of the tree, in path order, cut into 1 MiB pieces (restic's
 * chunker averages 1 MiB and keeps files under 512 KiB whole); empty files skipped.
 * Setup (untimed) encodes every blob with the mode into one in-memory store and reports:
 *   stored-%     stored bytes / plaintext bytes x 100 (crypto overhead included)
 *   zblobs-%     blobs stored compressed, % of all
 *   enc-MB/s     encode throughput (compression + seal), plaintext MB per second, one core
 * One op is a random blob read back and verified from the store (MAC, decrypt, decompress,
 * SHA-256): ns/op is the mean random-read time per blob, MB/s counts plaintext.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "bench.h"

#define PIECE (1u << 20)

/* A corpus cut into blobs: blob k = data[start[k], start[k + 1]), each file in PIECE pieces. */
struct corpus {
	const uint8_t *data;
	size_t n;
	size_t *start;
	size_t nblobs;
};

static struct corpus corpora[2];
static const char *const corpus_dir[2] = { "/usr/include", "/usr/share/doc" };

static const struct corpus *corpus_get(int which)
{
	struct corpus *c = &corpora[which];
	if (c->start == NULL) {
		const bench_corpus *f = bench_corpus_get(corpus_dir[which], SIZE_MAX, true);
		size_t cap = f->nfiles + f->n / PIECE + 1;
		if ((c->start = calloc(cap + 1, sizeof(size_t))) == NULL)
			bench_die("out of memory");
		for (size_t k = 0; k < f->nfiles; k++)
			for (size_t off = f->file_start[k]; off < f->file_start[k + 1]; off += PIECE)
				c->start[++c->nblobs] = off + PIECE < f->file_start[k + 1] ? off + PIECE : f->file_start[k + 1];
		c->data = f->data;
		c->n = f->n;
		bench_log("%zu blobs, %zu bytes", c->nblobs, c->n);
	}
	return c;
}

struct zstate {
	const struct corpus *c;
	rix_key *key;
	rix_blob_codec *codec;
	uint8_t *store;   /* stored blobs back to back */
	rix_blob *blobs;  /* offset into store, length, uncompressed length, id */
	uint8_t *out;
	uint64_t rnd;
};

static int z_setup(bench_b *b)
{
	struct zstate *s = calloc(1, sizeof(*s));
	if (s == NULL)
		return bench_fail(b, "out of memory");
	b->state = s;
	s->rnd = 0xc0ffee;
	s->c = corpus_get((int)b->def->arg[0]);
	const struct corpus *c = s->c;
	if (c->nblobs == 0)
		return bench_fail(b, "no files under %s", corpus_dir[b->def->arg[0]]);
	rix_compression mode = (rix_compression)b->def->arg[1];
	if (sodium_init() < 0 || rix_key_random(&s->key) != 0 || rix_blob_codec_new(&s->codec, s->key, 2, mode) != 0)
		return bench_fail(b, "codec: %s", rix_error_last());
	rix_blob_codec_set_min_saving(s->codec, (unsigned)b->def->arg[2]);
	rix_blob_codec_set_level(s->codec, (int)b->def->arg[3]);
	size_t cap = 0;
	for (size_t k = 0; k < c->nblobs; k++)
		cap += rix_blob_stored_bound(c->start[k + 1] - c->start[k]);
	s->store = malloc(cap);
	s->blobs = calloc(c->nblobs, sizeof(rix_blob));
	s->out = malloc(PIECE);
	if (s->store == NULL || s->blobs == NULL || s->out == NULL)
		return bench_fail(b, "out of memory");
	size_t off = 0, nz = 0;
	uint64_t t0 = bench_now_ns();
	for (size_t k = 0; k < c->nblobs; k++) {
		size_t n = c->start[k + 1] - c->start[k];
		rix_blob *bl = &s->blobs[k];
		bl->type = RIX_BLOB_DATA;
		bl->offset = 0;
		if (rix_blob_codec_encode(&bl->length, &bl->uncompressed_length, s->codec, RIX_BLOB_DATA, c->data + c->start[k], n,
					  s->store + off, cap - off) != 0)
			return bench_fail(b, "encode: %s", rix_error_last());
		off += bl->length;
		nz += bl->uncompressed_length != 0;
	}
	uint64_t t1 = bench_now_ns();
	/* Offsets (a store of several GiB would not fit u32: keep them as running sums here). */
	size_t run = 0;
	for (size_t k = 0; k < c->nblobs; k++) {
		rix_sha256(&s->blobs[k].id, c->data + c->start[k], c->start[k + 1] - c->start[k]);
		s->blobs[k].offset = (uint32_t)(run >> 0);
		run += s->blobs[k].length;
	}
	if (run > UINT32_MAX)
		return bench_fail(b, "store over 4 GiB");
	bench_metric(b, 100.0 * (double)off / (double)c->n, "stored-%");
	bench_metric(b, 100.0 * (double)nz / (double)c->nblobs, "zblobs-%");
	bench_metric(b, (double)c->n / ((double)(t1 - t0) / 1e3), "enc-MB/s");
	b->set_bytes = c->n / c->nblobs;
	return 0;
}

static void z_teardown(bench_b *b)
{
	struct zstate *s = b->state;
	if (s == NULL)
		return;
	rix_blob_codec_free(s->codec);
	rix_key_free(s->key);
	free(s->store);
	free(s->blobs);
	free(s->out);
	free(s);
	b->state = NULL;
}

static void z_run(bench_b *b)
{
	struct zstate *s = b->state;
	for (uint64_t i = 0; i < b->n; i++) {
		const rix_blob *bl = &s->blobs[splitmix64_next(&s->rnd) % s->c->nblobs];
		size_t got;
		if (rix_blob_codec_decode(&got, s->codec, s->store + bl->offset, bl->length, bl, s->out, PIECE) != 0) {
			bench_fail(b, "decode: %s", rix_error_last());
			return;
		}
		bench_sink += got;
	}
}

void register_compress_benchmarks(void)
{
	static const char *const cname[] = { "include", "doc" };
	static const struct {
		const char *name;
		rix_compression mode;
		unsigned permille;
		int level;
	} modes[] = {
		{ "off", RIX_COMPRESSION_OFF, 0, 0 },      { "auto-0", RIX_COMPRESSION_AUTO, 0, 0 },
		{ "auto-1", RIX_COMPRESSION_AUTO, 10, 0 },  { "auto-5", RIX_COMPRESSION_AUTO, 50, 0 },
		{ "auto-10", RIX_COMPRESSION_AUTO, 100, 0 }, { "auto-20", RIX_COMPRESSION_AUTO, 200, 0 },
		{ "auto-0/level=1", RIX_COMPRESSION_AUTO, 0, 1 }, { "max/level=9", RIX_COMPRESSION_MAX, 0, 9 },
		{ "max/level=15", RIX_COMPRESSION_MAX, 0, 15 }, { "max", RIX_COMPRESSION_MAX, 0, 0 },
	};
	for (int c = 0; c < 2; c++)
		for (size_t m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
			bench_def d = { .setup = z_setup, .run = z_run, .teardown = z_teardown, .family = 4 };
			snprintf(d.name, sizeof(d.name), "Compress/%s/%s", cname[c], modes[m].name);
			d.arg[0] = (uint64_t)c;
			d.arg[1] = (uint64_t)modes[m].mode;
			d.arg[2] = modes[m].permille;
			d.arg[3] = (uint64_t)modes[m].level;
			bench_register(&d);
		}
}
