/*
 * bench/bench_idset.c — rix_idset (rix/idset.h), the dedup-only set of data blob IDs, on the
 * WORKLOADS.md inputs (entry IDs seed 1, unknown seed 2, known-lookup order seed 3):
 *
 *   IdSet/Build/N={1M,3M,10M}            one op builds a set from an unsorted array of the N
 *                                        entry IDs taken over (rix_idset_build_owned: sort in
 *                                        place, compact in place); the array (made with
 *                                        rix_idset_alloc_ids) and its copy are untimed.
 *                                        ns/entry, B/entry (rix_idset_memory / N), heap-B/entry,
 *                                        build-peak-B/entry (the most the build holds at once:
 *                                        the 32-byte array, or the 31-byte records plus the
 *                                        directory and mid arrays if more)
 *   IdSet/Lookup/N={3M,10M}/{known,unknown}       one rix_idset_has per op, keys as Lookup's
 *   IdSet/LookupBatch/N={3M,10M}/{known,unknown}  rix_idset_has_many, 64 keys a call
 *
 * The lookups carry B/entry too, and run beside the Limit probes (same family) so that each
 * can be given as a ratio: known / Gather2, unknown / Gather1, batched / Gather*Prefetch.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#define IDSET_CHUNK 64

static const char *label(uint64_t n)
{
	switch (n) {
	case 1000000: return "1M";
	case 3000000: return "3M";
	case 10000000: return "10M";
	default: return "?";
	}
}

/* One built set, shared by the lookup benchmarks of one N. */
static struct {
	rix_idset *s;
	size_t n;
} set_cache;

void idset_caches_free(void)
{
	rix_idset_free(set_cache.s);
	memset(&set_cache, 0, sizeof(set_cache));
}

/* A set of the first n entry IDs (built from a copy taken over). */
static int make_set(bench_b *b, size_t n, rix_idset **out)
{
	const rix_id *ids = gen_entry_ids(n);
	rix_id *own = rix_idset_alloc_ids(n);
	if (own == NULL)
		return bench_fail(b, "out of memory");
	memcpy(own, ids, n * sizeof(*own));
	int rc = rix_idset_build_owned(out, own, n, 0);
	if (rc != 0) {
		rix_free(own);
		return bench_fail(b, "rix_idset_build_owned: %s", rix_error_last());
	}
	return 0;
}

static int get_set(bench_b *b, size_t n, rix_idset **out)
{
	if (set_cache.s != NULL && set_cache.n == n) {
		*out = set_cache.s;
		return 0;
	}
	idset_caches_free();
	bench_log("building id set N=%zu", n);
	int rc = make_set(b, n, &set_cache.s);
	if (rc != 0)
		return rc;
	set_cache.n = n;
	*out = set_cache.s;
	return 0;
}

/* ---- IdSet/Build -------------------------------------------------------------------------- */

typedef struct build_state {
	size_t n;
	const rix_id *ids;
} build_state;

static int build_setup(bench_b *b)
{
	build_state *s = calloc(1, sizeof(*s));
	if (s == NULL)
		return bench_fail(b, "out of memory");
	s->n = (size_t)b->def->arg[0];
	s->ids = gen_entry_ids(s->n);
	idset_caches_free(); /* its memory would count against this one's */
	b->state = s;
	b->per_op_div = (double)s->n;
	b->per_op_unit = "ns/entry";
	return 0;
}

static void build_run(bench_b *b)
{
	build_state *s = b->state;
	size_t mem = 0;
	int64_t live = 0;
	double peak = 0;
	for (uint64_t op = 0; op < b->n; op++) {
		bench_stop(b);
		int64_t live0 = bench_live_bytes();
		rix_id *own = rix_idset_alloc_ids(s->n);
		if (own == NULL) {
			bench_fail(b, "out of memory");
			return;
		}
		memcpy(own, s->ids, s->n * sizeof(*own));
		bench_start(b);
		rix_idset *set;
		int rc = rix_idset_build_owned(&set, own, s->n, 0);
		bench_stop(b);
		if (rc != 0) {
			rix_free(own);
			bench_fail(b, "rix_idset_build_owned: %s", rix_error_last());
			return;
		}
		if (rix_idset_count(set) != s->n || !rix_idset_has(set, &s->ids[s->n / 2])) {
			bench_fail(b, "count %zu after building from %zu IDs", rix_idset_count(set), s->n);
			rix_idset_free(set);
			return;
		}
		mem = rix_idset_memory(set);
		live = bench_live_bytes() - live0;
		/* The build holds the 32-byte array, in which it first packs 31-byte records and
		 * then puts the directory and mid arrays (the finished set minus its tails); it
		 * grows the array when they don't fit. */
		rix_idset_shape sh;
		rix_idset_get_shape(&sh, set);
		double aux = (double)mem - (double)s->n * sh.tail_bytes;
		peak = 31.0 + aux / (double)s->n;
		if (peak < 32.0)
			peak = 32.0;
		rix_idset_free(set);
		bench_start(b);
	}
	bench_metric(b, (double)mem / (double)s->n, "B/entry");
	bench_metric(b, (double)live / (double)s->n, "heap-B/entry");
	bench_metric(b, peak, "build-peak-B/entry");
}

/* ---- IdSet/Lookup, IdSet/LookupBatch ------------------------------------------------------ */
/* arg[0] = N, arg[1] = known (0) / unknown (1), arg[2] = batched */

typedef struct lookup_state {
	size_t n;
	bool known, batched;
	const rix_id *keys;
	rix_idset *set;
} lookup_state;

static int lookup_setup(bench_b *b)
{
	lookup_state *s = calloc(1, sizeof(*s));
	if (s == NULL)
		return bench_fail(b, "out of memory");
	b->state = s;
	s->n = (size_t)b->def->arg[0];
	s->known = b->def->arg[1] == 0;
	s->batched = b->def->arg[2] != 0;
	s->keys = s->known ? gen_known_ids(s->n) : gen_unknown_ids(s->n);
	return get_set(b, s->n, &s->set);
}

static void lookup_run(bench_b *b)
{
	lookup_state *s = b->state;
	uint64_t found = 0;
	size_t k = 0, n = s->n;
	if (!s->batched) {
		for (uint64_t left = b->n; left > 0; left--) {
			found += rix_idset_has(s->set, &s->keys[k]);
			if (++k == n)
				k = 0;
		}
	} else {
		bool f[IDSET_CHUNK];
		for (uint64_t left = b->n; left > 0;) {
			size_t c = IDSET_CHUNK;
			if (c > left)
				c = (size_t)left;
			if (c > n - k)
				c = n - k;
			found += rix_idset_has_many(f, s->set, &s->keys[k], c);
			left -= c;
			k += c;
			if (k == n)
				k = 0;
		}
	}
	uint64_t want = s->known ? b->n : 0;
	if (found != want)
		bench_fail(b, "%llu of %llu lookups found, want %llu", (unsigned long long)found,
			   (unsigned long long)b->n, (unsigned long long)want);
	bench_metric(b, (double)rix_idset_memory(s->set) / (double)n, "B/entry");
}

static void free_state(bench_b *b)
{
	free(b->state);
	b->state = NULL;
}

static void reg(const char *name, int (*setup)(bench_b *), void (*run)(bench_b *), uint64_t a0,
		uint64_t a1, uint64_t a2)
{
	bench_def d;
	memset(&d, 0, sizeof(d));
	snprintf(d.name, sizeof(d.name), "%s", name);
	d.setup = setup;
	d.run = run;
	d.teardown = free_state;
	d.arg[0] = a0;
	d.arg[1] = a1;
	d.arg[2] = a2;
	d.family = 0;
	bench_register(&d);
}

void register_idset_benchmarks(void)
{
	static const uint64_t build_n[] = { 1000000, 3000000, 10000000 };
	static const uint64_t lookup_n[] = { 3000000, 10000000 };
	static const char *const mode[] = { "known", "unknown" };
	char name[BENCH_NAME_MAX];
	for (size_t i = 0; i < sizeof(build_n) / sizeof(build_n[0]); i++) {
		snprintf(name, sizeof(name), "IdSet/Build/N=%s", label(build_n[i]));
		reg(name, build_setup, build_run, build_n[i], 0, 0);
	}
	/* Grouped by N so the set is built once per N. */
	for (size_t i = 0; i < sizeof(lookup_n) / sizeof(lookup_n[0]); i++) {
		for (int batched = 0; batched < 2; batched++) {
			for (int m = 0; m < 2; m++) {
				snprintf(name, sizeof(name), "IdSet/%s/N=%s/%s",
					 batched ? "LookupBatch" : "Lookup", label(lookup_n[i]), mode[m]);
				reg(name, lookup_setup, lookup_run, lookup_n[i], (uint64_t)m, (uint64_t)batched);
			}
		}
	}
}
