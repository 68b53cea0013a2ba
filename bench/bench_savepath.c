/*
 * bench/bench_savepath.c — the save path's index work alone, without hashing or I/O: what
 * rix_repo_save_blob asks of the master index for each blob, from one thread and from every
 * CPU at once, against a repository index of 1M merged blobs.
 *
 *   SavePath/new[-par]     a blob nobody has: add_pending (1), and every 256 of them one
 *                          store_pack, as packs finish in a backup
 *   SavePath/recent[-par]  a blob stored earlier in this session (100k of them): add_pending (0)
 *   SavePath/known[-par]   a blob of the loaded index: add_pending (0)
 *
 * The op is what save_blob does for the blob's dedup: a has() when the API needs one, then
 * add_pending; the figure is ns per blob.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#define FROZEN_N 1000000u
#define RECENT_N 100000u
#define PER_PACK 256u

enum { NEW, RECENT, KNOWN };

struct sp_state {
	rix_master_index *mi;
	rix_id *recent; /* RECENT_N IDs stored this session */
	uint64_t seq;   /* fresh-ID stream, per run */
};

static void fake_pack(rix_id *pack, uint64_t k)
{
	uint64_t st = 0xFACC000000000000ull + k;
	gen_id(&st, pack);
}

static int store(rix_master_index *mi, const rix_id *ids, size_t n, uint64_t k)
{
	rix_blob bl[PER_PACK];
	for (size_t i = 0; i < n; i++)
		bl[i] = (rix_blob){ .id = ids[i], .type = RIX_BLOB_DATA, .offset = (uint32_t)i * 1000, .length = 1000 };
	rix_id pack;
	fake_pack(&pack, k);
	return rix_master_index_store_pack(mi, &pack, bl, n);
}

static int sp_setup(bench_b *b)
{
	struct sp_state *s = calloc(1, sizeof(*s));
	b->state = s;
	if (s == NULL || rix_master_index_new_seeded(&s->mi, 0x5A7E) != 0)
		return bench_fail(b, "master index: %s", rix_error_last());
	const rix_id *ids = gen_entry_ids(FROZEN_N);
	rix_index *idx;
	if (rix_index_new(&idx) != 0)
		return bench_fail(b, "index");
	rix_blob bl[PER_PACK];
	for (uint32_t p = 0; p * PER_PACK < FROZEN_N; p++) {
		uint32_t n = FROZEN_N - p * PER_PACK < PER_PACK ? FROZEN_N - p * PER_PACK : PER_PACK;
		for (uint32_t i = 0; i < n; i++)
			bl[i] = (rix_blob){ .id = ids[p * PER_PACK + i], .type = RIX_BLOB_DATA, .offset = i * 1000,
					    .length = 1000 };
		rix_id pack;
		fake_pack(&pack, 1ull << 40 | p);
		if (rix_index_store_pack(idx, &pack, bl, n) != 0)
			return bench_fail(b, "store: %s", rix_error_last());
	}
	rix_index_finalize(idx);
	if (rix_master_index_add(s->mi, idx) != 0 || rix_master_index_merge(s->mi) != 0)
		return bench_fail(b, "merge: %s", rix_error_last());
	/* This session's blobs: reserved and stored, as save_blob and a finished pack do. */
	s->recent = malloc(RECENT_N * sizeof(rix_id));
	uint64_t st = 0xBEEF;
	for (uint32_t i = 0; i < RECENT_N; i++) {
		gen_id(&st, &s->recent[i]);
		if (rix_master_index_add_pending(s->mi, RIX_BLOB_DATA, &s->recent[i]) != 1)
			return bench_fail(b, "reserve");
	}
	for (uint32_t i = 0; i < RECENT_N; i += PER_PACK)
		if (store(s->mi, &s->recent[i], RECENT_N - i < PER_PACK ? RECENT_N - i : PER_PACK, 1ull << 41 | i) != 0)
			return bench_fail(b, "store: %s", rix_error_last());
	if (!rix_master_index_has(s->mi, RIX_BLOB_DATA, &s->recent[RECENT_N - 1]) ||
	    !rix_master_index_has(s->mi, RIX_BLOB_DATA, &ids[FROZEN_N / 2]))
		return bench_fail(b, "setup: a blob is missing");
	return 0;
}

static void sp_teardown(bench_b *b)
{
	struct sp_state *s = b->state;
	if (s == NULL)
		return;
	rix_master_index_free(s->mi);
	free(s->recent);
	free(s);
	b->state = NULL;
}

struct worker {
	struct sp_state *s;
	int which;
	uint64_t n, seed;
	int bad;
};

/*
 * save_blob's dedup step for one blob: 1 when it must be stored. Built with
 * -DSAVEPATH_HAS_FIRST it is the save path before the recent table (a has(), then add_pending,
 * which looked again), for the before/after figures in RESULTS.md.
 */
static inline int dedup(rix_master_index *mi, const rix_id *id)
{
#ifdef SAVEPATH_HAS_FIRST
	if (rix_master_index_has(mi, RIX_BLOB_DATA, id))
		return 0;
#endif
	return rix_master_index_add_pending(mi, RIX_BLOB_DATA, id);
}

static void *sp_work(void *arg)
{
	struct worker *w = arg;
	rix_master_index *mi = w->s->mi;
	const rix_id *known = gen_entry_ids(FROZEN_N);
	rix_id batch[PER_PACK];
	size_t nb = 0;
	uint64_t st = w->seed, pick = w->seed * 0x9E3779B97F4A7C15ull + 1;
	for (uint64_t i = 0; i < w->n; i++) {
		switch (w->which) {
		case NEW:
			gen_id(&st, &batch[nb]);
			if (dedup(mi, &batch[nb]) != 1)
				w->bad++;
			if (++nb == PER_PACK) {
				if (store(mi, batch, nb, st) != 0)
					w->bad++;
				nb = 0;
			}
			break;
		case RECENT:
			if (dedup(mi, &w->s->recent[splitmix64_next(&pick) % RECENT_N]) != 0)
				w->bad++;
			break;
		case KNOWN:
			if (dedup(mi, &known[splitmix64_next(&pick) % FROZEN_N]) != 0)
				w->bad++;
			break;
		}
	}
	if (nb > 0 && store(mi, batch, nb, st) != 0)
		w->bad++;
	return NULL;
}

static void sp_run(bench_b *b)
{
	struct sp_state *s = b->state;
	int which = (int)b->def->arg[0];
	int np = b->def->arg[1] ? bench_procs() : 1;
	np = np > 64 ? 64 : np;
	struct worker w[64];
	pthread_t th[64];
	for (int i = 0; i < np; i++)
		w[i] = (struct worker){ s, which, b->n / (uint64_t)np + (i == 0 ? b->n % (uint64_t)np : 0),
					0xC0FFEE00000000ull + (++s->seq) * 64 + (uint64_t)i, 0 };
	for (int i = 1; i < np; i++)
		pthread_create(&th[i], NULL, sp_work, &w[i]);
	sp_work(&w[0]);
	for (int i = 1; i < np; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < np; i++)
		if (w[i].bad)
			bench_fail(b, "%d blobs got the wrong answer", w[i].bad);
}

void register_savepath_benchmarks(void)
{
	static const char *const names[] = { "new", "recent", "known" };
	for (int which = NEW; which <= KNOWN; which++)
		for (int par = 0; par < 2; par++) {
			bench_def d = { .setup = sp_setup, .run = sp_run, .teardown = sp_teardown, .family = 6 };
			snprintf(d.name, sizeof(d.name), "SavePath/%s%s", names[which], par ? "-par" : "");
			d.arg[0] = (uint64_t)which;
			d.arg[1] = (uint64_t)par;
			bench_register(&d);
		}
}
