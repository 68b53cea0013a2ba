/*
 * bench/bench_chunker.c — restic's chunker (backup/chunker.c) alone, in MB/s on one core:
 * Chunker/random (64 MiB of random bytes, fed in 1 MiB pieces, every chunk cut and counted)
 * and Chunker/zeros (the same size of zeros).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#define CH_BYTES ((size_t)64 << 20)
#define CH_PIECE ((size_t)1 << 20)

struct ch_state {
	rix_chunker *c;
	uint8_t *data;
};

static int ch_setup(bench_b *b)
{
	struct ch_state *s = calloc(1, sizeof(*s));
	b->state = s;
	if (s == NULL || (s->data = malloc(CH_BYTES)) == NULL)
		return bench_fail(b, "out of memory");
	if (b->def->arg[0] == 0) {
		uint64_t st = 0xC4C4;
		for (size_t i = 0; i < CH_BYTES; i += 8) {
			uint64_t v = splitmix64_next(&st);
			memcpy(s->data + i, &v, 8);
		}
	} else {
		memset(s->data, 0, CH_BYTES);
	}
	/* The polynomial of restic's own chunker tests. */
	if (rix_chunker_new(&s->c, 0x3DA3358B4DC173ull) != 0)
		return bench_fail(b, "chunker: %s", rix_error_last());
	b->set_bytes = CH_BYTES;
	return 0;
}

static void ch_run(bench_b *b)
{
	struct ch_state *s = b->state;
	uint64_t chunks = 0;
	for (uint64_t op = 0; op < b->n; op++) {
		rix_chunker_reset(s->c);
		for (size_t at = 0; at < CH_BYTES; at += CH_PIECE) {
			size_t off = 0;
			while (off < CH_PIECE) {
				bool cut;
				off += rix_chunker_scan(&cut, s->c, s->data + at + off, CH_PIECE - off);
				chunks += cut;
			}
		}
	}
	bench_metric(b, (double)chunks / (double)(b->n ? b->n : 1), "chunks/op");
}

static void ch_teardown(bench_b *b)
{
	struct ch_state *s = b->state;
	if (s != NULL) {
		rix_chunker_free(s->c);
		free(s->data);
		free(s);
	}
	b->state = NULL;
}

void register_chunker_benchmarks(void)
{
	static const char *const names[] = { "Chunker/random", "Chunker/zeros" };
	for (int i = 0; i < 2; i++) {
		bench_def d = { .setup = ch_setup, .run = ch_run, .teardown = ch_teardown, .family = 7 };
		snprintf(d.name, sizeof(d.name), "%s", names[i]);
		d.arg[0] = (uint64_t)i;
		bench_register(&d);
	}
}
