/*
 * bench/gen.c — the deterministic inputs of WORKLOADS.md (SplitMix64 streams), cached for a
 * whole run, their self-test against the reference values, and restic's random index shape.
 *
 * Caches: one growable array per stream (entries seed 1, unknown IDs seed 2). Growing keeps
 * the generator state, so asking for 10M after 1M generates only the missing 9M. Known-order
 * arrays (seed 3) are a permutation that depends on N, so they are cached per N.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

void gen_id(uint64_t *state, rix_id *id)
{
	for (int w = 0; w < 4; w++) {
		uint64_t v = splitmix64_next(state);
		for (int k = 0; k < 8; k++)
			id->b[w * 8 + k] = (uint8_t)(v >> (8 * k));
	}
}

uint64_t gen_fnv1a64(const void *p, size_t n)
{
	const uint8_t *s = p;
	uint64_t h = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < n; i++) {
		h ^= s[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

static void *xrealloc(void *p, size_t n)
{
	void *q = realloc(p, n ? n : 1);
	if (q == NULL)
		bench_die("out of memory generating inputs (%zu bytes)", n);
	return q;
}

/* ---- Entries (seed 1) and unknown IDs (seed 2) ------------------------------------------- */

static struct {
	rix_id *ids;
	rix_loc *locs;
	size_t n;
	uint64_t state;
	bool started;
} entries;

static void entries_ensure(size_t n)
{
	if (!entries.started) {
		entries.state = 1;
		entries.started = true;
	}
	if (n <= entries.n)
		return;
	bench_log("generating entries %zu..%zu", entries.n, n);
	entries.ids = xrealloc(entries.ids, n * sizeof(rix_id));
	entries.locs = xrealloc(entries.locs, n * sizeof(rix_loc));
	for (size_t i = entries.n; i < n; i++) {
		gen_id(&entries.state, &entries.ids[i]);
		uint64_t x = splitmix64_next(&entries.state);
		uint32_t len = (uint32_t)(2000 + x % 4194304);
		entries.locs[i] = (rix_loc){
			.pack = (uint32_t)(i / 8),
			.offset = (uint32_t)((i % 8) << 22),
			.length = len,
			.uncompressed_length = 2 * len,
		};
	}
	entries.n = n;
}

const rix_id *gen_entry_ids(size_t n)
{
	entries_ensure(n);
	return entries.ids;
}

const rix_loc *gen_entry_locs(size_t n)
{
	entries_ensure(n);
	return entries.locs;
}

static struct {
	rix_id *ids;
	size_t n;
	uint64_t state;
	bool started;
} unknown;

const rix_id *gen_unknown_ids(size_t n)
{
	if (!unknown.started) {
		unknown.state = 2;
		unknown.started = true;
	}
	if (n > unknown.n) {
		bench_log("generating unknown IDs %zu..%zu", unknown.n, n);
		unknown.ids = xrealloc(unknown.ids, n * sizeof(rix_id));
		for (size_t i = unknown.n; i < n; i++)
			gen_id(&unknown.state, &unknown.ids[i]);
		unknown.n = n;
	}
	return unknown.ids;
}

/* ---- Known lookup order (seed 3), per N --------------------------------------------------- */

#define KNOWN_SLOTS 8
static struct {
	size_t n;
	rix_id *ids;
} known[KNOWN_SLOTS];

static uint32_t *known_perm(size_t n)
{
	uint32_t *p = xrealloc(NULL, (n ? n : 1) * sizeof(uint32_t));
	uint64_t st = 3;
	for (size_t i = 0; i < n; i++)
		p[i] = (uint32_t)i;
	for (size_t i = n; i-- > 1;) {
		size_t j = (size_t)(splitmix64_next(&st) % (uint64_t)(i + 1));
		uint32_t t = p[i];
		p[i] = p[j];
		p[j] = t;
	}
	return p;
}

const rix_id *gen_known_ids(size_t n)
{
	int free_slot = -1;
	for (int s = 0; s < KNOWN_SLOTS; s++) {
		if (known[s].ids != NULL && known[s].n == n)
			return known[s].ids;
		if (known[s].ids == NULL && free_slot < 0)
			free_slot = s;
	}
	if (free_slot < 0)
		bench_die("too many known-order sizes");
	const rix_id *ids = gen_entry_ids(n);
	bench_log("generating known lookup order for N=%zu", n);
	uint32_t *p = known_perm(n);
	rix_id *k = xrealloc(NULL, (n ? n : 1) * sizeof(rix_id));
	for (size_t i = 0; i < n; i++)
		k[i] = ids[p[i]];
	free(p);
	known[free_slot].n = n;
	known[free_slot].ids = k;
	return k;
}

/* ---- Master workload pack IDs ------------------------------------------------------------- */

static struct {
	rix_id *ids;
	size_t n;
} mpacks;

const rix_id *gen_master_pack_ids(size_t npacks)
{
	if (npacks > mpacks.n) {
		mpacks.ids = xrealloc(mpacks.ids, npacks * sizeof(rix_id));
		for (size_t k = mpacks.n; k < npacks; k++) {
			uint64_t st = 0x5EED000000000000ull + k;
			gen_id(&st, &mpacks.ids[k]);
		}
		mpacks.n = npacks;
	}
	return mpacks.ids;
}

void gen_free_all(void)
{
	free(entries.ids);
	free(entries.locs);
	memset(&entries, 0, sizeof(entries));
	free(unknown.ids);
	memset(&unknown, 0, sizeof(unknown));
	for (int s = 0; s < KNOWN_SLOTS; s++) {
		free(known[s].ids);
		known[s].ids = NULL;
		known[s].n = 0;
	}
	free(mpacks.ids);
	memset(&mpacks, 0, sizeof(mpacks));
}

/* ---- Self-test against WORKLOADS.md ------------------------------------------------------- */

static void hex(const uint8_t *b, size_t n, char *out)
{
	static const char d[] = "0123456789abcdef";
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = d[b[i] >> 4];
		out[2 * i + 1] = d[b[i] & 15];
	}
	out[2 * n] = '\0';
}

static int check_str(const char *what, const char *got, const char *want, bool verbose)
{
	if (strcmp(got, want) != 0) {
		fprintf(stderr, "selftest: %s = %s, want %s\n", what, got, want);
		return -1;
	}
	if (verbose)
		fprintf(stderr, "selftest: %s = %s ok\n", what, got);
	return 0;
}

static int check_u64(const char *what, uint64_t got, uint64_t want, bool verbose)
{
	if (got != want) {
		fprintf(stderr, "selftest: %s = %llu (%016llx), want %llu (%016llx)\n", what,
			(unsigned long long)got, (unsigned long long)got, (unsigned long long)want,
			(unsigned long long)want);
		return -1;
	}
	if (verbose)
		fprintf(stderr, "selftest: %s = %llu (0x%llx) ok\n", what, (unsigned long long)got,
			(unsigned long long)got);
	return 0;
}

int gen_selftest(bool verbose)
{
	const size_t n = 1000000;
	int bad = 0;
	char h[65];

	const rix_id *ids = gen_entry_ids(n);
	const rix_loc *locs = gen_entry_locs(n);
	hex(ids[0].b, 8, h);
	bad |= check_str("entry 0 ID prefix", h, "c15c0289ec2d0a91", verbose);
	hex(&ids[0].b[30], 2, h);
	bad |= check_str("entry 0 ID suffix", h, "c171", verbose);
	bad |= check_u64("entry 0 length", locs[0].length, 114057, verbose);
	bad |= check_u64("entry 0 uncompressed_length", locs[0].uncompressed_length, 2 * 114057,
			 verbose);
	bad |= check_u64("entry 9 pack", locs[9].pack, 1, verbose);
	bad |= check_u64("entry 9 offset", locs[9].offset, 1u << 22, verbose);

	const rix_id *unk = gen_unknown_ids(n);
	hex(unk[0].b, 8, h);
	bad |= check_str("unknown 0 ID prefix", h, "ce56971cde355897", verbose);

	static const uint32_t want_p[5] = { 804847, 737406, 597981, 258408, 754640 };
	uint32_t *p = known_perm(n);
	for (int i = 0; i < 5; i++) {
		char what[32];
		snprintf(what, sizeof(what), "p[%d] (N=1M)", i);
		bad |= check_u64(what, p[i], want_p[i], verbose);
	}
	free(p);

	const rix_id *kn = gen_known_ids(n);
	bad |= check_u64("FNV-1a-64 of inserted IDs", gen_fnv1a64(ids, n * sizeof(rix_id)),
			 0x655712a73a273995ull, verbose);
	bad |= check_u64("FNV-1a-64 of unknown IDs", gen_fnv1a64(unk, n * sizeof(rix_id)),
			 0x92ab954fb437d0faull, verbose);
	bad |= check_u64("FNV-1a-64 of known-lookup IDs", gen_fnv1a64(kn, n * sizeof(rix_id)),
			 0x3fa390d27164bb2dull, verbose);
	return bad ? -1 : 0;
}

/* ---- restic's random index shape ---------------------------------------------------------- */

#define RGEN_MAX_PACK_SIZE (16u * 1024 * 1024)

void rgen_index_make(rgen_index *g, uint64_t *state, size_t npacks)
{
	g->pack_ids = xrealloc(g->pack_ids, (npacks ? npacks : 1) * sizeof(rix_id));
	g->pack_start = xrealloc(g->pack_start, (npacks + 1) * sizeof(size_t));
	g->npacks = npacks;
	g->nblobs = 0;
	for (size_t p = 0; p < npacks; p++) {
		gen_id(state, &g->pack_ids[p]);
		g->pack_start[p] = g->nblobs;
		uint32_t offset = 0;
		while (offset < RGEN_MAX_PACK_SIZE) {
			uint32_t size = (uint32_t)(2000 + splitmix64_next(state) % (4u * 1024 * 1024));
			if (g->nblobs == g->blobs_cap) {
				g->blobs_cap = g->blobs_cap ? g->blobs_cap * 2 : 1024;
				g->blobs = xrealloc(g->blobs, g->blobs_cap * sizeof(rix_blob));
			}
			rix_blob *bl = &g->blobs[g->nblobs++];
			memset(bl, 0, sizeof(*bl));
			gen_id(state, &bl->id);
			bl->type = RIX_BLOB_DATA;
			bl->offset = offset;
			bl->length = size;
			bl->uncompressed_length = 2 * size;
			offset += size;
		}
		if (p == 0) {
			size_t nb = g->nblobs;
			g->lookup = g->blobs[splitmix64_next(state) % nb].id;
		}
	}
	g->pack_start[npacks] = g->nblobs;
}

void rgen_index_free(rgen_index *g)
{
	free(g->pack_ids);
	free(g->pack_start);
	free(g->blobs);
	memset(g, 0, sizeof(*g));
}

int rgen_index_build(const rgen_index *g, uint32_t batch, rix_index **out)
{
	rix_index *idx;
	int rc = rix_index_new_batch(&idx, batch);
	if (rc != 0)
		return rc;
	for (size_t p = 0; p < g->npacks; p++) {
		rc = rix_index_store_pack(idx, &g->pack_ids[p], &g->blobs[g->pack_start[p]],
					  g->pack_start[p + 1] - g->pack_start[p]);
		if (rc != 0) {
			rix_index_free(idx);
			return rc;
		}
	}
	*out = idx;
	return 0;
}
