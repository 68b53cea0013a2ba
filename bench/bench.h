/*
 * bench/bench.h — private to bench/: the harness (a small copy of Go's testing.B in C), the
 * workload generator of WORKLOADS.md, and the benchmark families' registration functions.
 *
 * How one benchmark runs (as `go test -bench` does):
 *
 *   setup(b)                      untimed; builds or borrows cached inputs into b->state
 *   repeat -count times:
 *     run(b) with b->n = 1        Go's run1
 *     run(b) with b->n grown      until the timed duration reaches -benchtime (or b->n = Nx)
 *     print the last run's line
 *   teardown(b)
 *
 * run() must do b->n operations. Work inside run() is timed unless bracketed by
 * bench_stop()/bench_start(); allocations made by rix while the timer runs are counted (the
 * counting allocator is installed for the whole process).
 */
#ifndef RIX_BENCH_H
#define RIX_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rix/rix.h"

/* ---- Harness ------------------------------------------------------------------------------ */

#define BENCH_NAME_MAX 96
#define BENCH_MAX_METRICS 8

typedef struct bench_b bench_b;

typedef struct bench_def {
	char name[BENCH_NAME_MAX]; /* without the "Benchmark" prefix and the -CPU suffix */
	int (*setup)(bench_b *b);  /* 0, or nonzero after bench_fail() */
	void (*run)(bench_b *b);
	void (*teardown)(bench_b *b);
	uint64_t arg[4]; /* parameters of the family (N, mode, ...) */
	int family;      /* 0: WORKLOADS.md set, 1: restic's set (whose caches to drop when done) */
} bench_def;

struct bench_b {
	const bench_def *def;
	uint64_t n;   /* operations this run() must do */
	void *state;  /* whatever setup() made */
	uint32_t batch; /* entry batch size for new maps/indexes (-batch, or the sweep's) */

	/* timer and allocation counters (harness-owned) */
	bool timer_on;
	uint64_t t0, dur_ns;
	uint64_t a0, allocs, by0, bytes;

	/* reported with the line */
	uint64_t set_bytes;        /* bytes processed per op: gives MB/s */
	double per_op_div;         /* if > 0: also print (ns/op / per_op_div) as per_op_unit */
	const char *per_op_unit;
	int nmetrics;
	struct {
		double v;
		char unit[32];
	} metrics[BENCH_MAX_METRICS];

	bool failed;
	char fail_msg[256];
};

void bench_stop(bench_b *b);
void bench_start(bench_b *b);
/* Sets (or replaces) an extra "value unit" metric printed after the standard ones. */
void bench_metric(bench_b *b, double v, const char *unit);
/* Marks the benchmark failed with a message; returns 1 so setup can `return bench_fail(...)`. */
int bench_fail(bench_b *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Registers a benchmark. */
void bench_register(const bench_def *d);

/* Number of threads the parallel benchmarks use (online CPUs, like GOMAXPROCS). */
int bench_procs(void);
/* n bytes, 2 MiB-aligned, asking for huge pages where the kernel gives them (MADV_HUGEPAGE), as
 * the index's large tables do: for the probes and yardsticks read at random. free() frees it;
 * NULL when out of memory. */
void *bench_alloc_huge(size_t n);
/* Monotonic clock in ns. */
uint64_t bench_now_ns(void);
/* Bytes currently held through the rix allocator (malloc_usable_size of each block). */
int64_t bench_live_bytes(void);
/* Progress messages on stderr when -v was given. */
void bench_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Aborts with a message (inputs or the library misbehaved beyond a single benchmark). */
void bench_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* ---- Real files (corpus.c) ----------------------------------------------------------------- */

/* Every non-empty regular file under dir, in path order, while their sizes fit budget bytes. */
typedef struct bench_corpus {
	char dir[1024];
	size_t budget;
	char **paths;       /* nfiles */
	size_t *file_start; /* nfiles + 1: file f is data[file_start[f], file_start[f + 1]) */
	size_t nfiles;
	size_t n;           /* bytes of all files */
	uint8_t *data;      /* their bytes back to back, once loaded (else NULL) */
} bench_corpus;
/* The corpus of dir within budget (cached for the run); load: its bytes read too. */
const bench_corpus *bench_corpus_get(const char *dir, size_t budget, bool load);
void bench_corpus_free_all(void);

/* ---- Generator (WORKLOADS.md) ------------------------------------------------------------- */

static inline uint64_t splitmix64_next(uint64_t *state)
{
	uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

/* 4 outputs written little-endian as bytes 0-7, 8-15, 16-23, 24-31. */
void gen_id(uint64_t *state, rix_id *id);
uint64_t gen_fnv1a64(const void *p, size_t n);

/*
 * Cached inputs, generated on first use and kept for the whole run. The returned arrays hold
 * at least n elements and stay valid until gen_free_all (they are prefixes of one stream, so
 * the N = 1M arrays are the first million of the N = 10M ones). Known keys depend on N and
 * are cached per N.
 */
const rix_id *gen_entry_ids(size_t n);
const rix_loc *gen_entry_locs(size_t n);
const rix_id *gen_unknown_ids(size_t n);
const rix_id *gen_known_ids(size_t n);
/* Pack ID of pack k of the Master workload (seed 0x5EED000000000000 + k). Cached. */
const rix_id *gen_master_pack_ids(size_t npacks);
void gen_free_all(void);

/* Checks every reference value of WORKLOADS.md; prints what differs. @return 0 or -1. */
int gen_selftest(bool verbose);

/*
 * restic's random index shape: packs filled with data blobs of size 2000 + rand(4 MiB) until
 * the pack's offset reaches 16 MiB, uncompressed_length = 2 * size. See README.md for the
 * exact recipe (which outputs of the generator become which field).
 */
typedef struct rgen_index {
	size_t npacks, nblobs;
	rix_id *pack_ids;     /* npacks */
	size_t *pack_start;   /* npacks + 1: blobs of pack p are [pack_start[p], pack_start[p+1]) */
	rix_blob *blobs;      /* nblobs */
	size_t blobs_cap;
	rix_id lookup;        /* a blob of pack 0, as restic's createRandomIndex picks it */
} rgen_index;

/* Fills g with the next index of npacks packs from the stream *state (reuses g's memory). */
void rgen_index_make(rgen_index *g, uint64_t *state, size_t npacks);
void rgen_index_free(rgen_index *g);
/* Builds a rix_index from g (not finalized). @return 0 or a RIX_E* code. */
int rgen_index_build(const rgen_index *g, uint32_t batch, rix_index **out);

/* The seed standing in for restic's rand.NewSource(0). */
#define RGEN_SEED 0x0ull
/* The seed of restic's NewRandomBlobHandle() (an unknown ID). */
#define RGEN_UNKNOWN_SEED 0xB10BB10BB10BB10Bull

/* ---- Families ----------------------------------------------------------------------------- */

void register_workload_benchmarks(void);
void register_limit_benchmarks(void);
void register_twoline_benchmarks(void);
void register_idset_benchmarks(void);
void register_restic_benchmarks(void);
void register_crypto_benchmarks(void);
void register_pack_benchmarks(void);
void register_compress_benchmarks(void);
void register_repo_benchmarks(void);
void register_savepath_benchmarks(void);
void register_chunker_benchmarks(void);
void register_stage_benchmarks(void);
/* Free the built tables and indexes a family keeps between its benchmarks. */
void workload_caches_free(void);
/* The limit probes' array and hashes (bench_limit.c), freed with the workload family's caches. */
void limit_caches_free(void);
/* Limit/TwoLine's layout (bench_twoline.c), freed with them. */
void twoline_caches_free(void);
void idset_caches_free(void);
void restic_caches_free(void);

/* A sink the compiler cannot see through, so lookup results are never dropped. */
extern volatile uint64_t bench_sink;

#endif
