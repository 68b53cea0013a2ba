/*
 * bench/main.c — rix-bench: flags, the counting allocator, the run loop and Go's output format.
 *
 * Usage: rix-bench [-bench REGEX] [-count N] [-benchtime 1s|100x] [-batch N] [-cpu-less]
 *                  [-summary] [-list] [-selftest] [-v]
 *
 * The output is what `go test -bench` prints, so benchstat compares rix-bench runs with each
 * other and with restic's Go benchmarks:
 *
 *   goos: linux
 *   goarch: amd64
 *   pkg: rix/bench
 *   cpu: <model name>
 *   BenchmarkLookup/N=1M/known-2   	 5123456	       195.3 ns/op	       0 B/op	       0 allocs/op
 *   ...
 *   PASS
 *   ok  	rix/bench	12.345s
 *
 * Number formats are Go's (testing.BenchmarkResult.String and prettyPrint); extra metrics of
 * a benchmark come after allocs/op, as WORKLOADS.md asks.
 */
#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <math.h>
#include <regex.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

volatile uint64_t bench_sink;

static bool opt_verbose;

/* ---- Utilities ---------------------------------------------------------------------------- */

uint64_t bench_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void *bench_alloc_huge(size_t n)
{
	const size_t huge = (size_t)2 << 20;
	void *p = aligned_alloc(huge, (n + huge - 1) / huge * huge); /* (a multiple of the alignment) */
#ifdef MADV_HUGEPAGE
	if (p != NULL)
		(void)madvise(p, n, MADV_HUGEPAGE);
#endif
	return p;
}

int bench_procs(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (int)n : 1;
}

void bench_log(const char *fmt, ...)
{
	if (!opt_verbose)
		return;
	va_list ap;
	va_start(ap, fmt);
	fputs("# ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

void bench_die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("rix-bench: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(2);
}

/* ---- Counting allocator ------------------------------------------------------------------- */
/*
 * Counts every allocation rix makes (malloc, calloc, and realloc as one allocation of the new
 * size, as Go would count the new object) and the bytes asked for; keeps the bytes currently
 * held, measured with malloc_usable_size, as an independent check of the *_memory functions.
 * Relaxed atomics: parallel benchmarks allocate from several threads.
 */
static _Atomic uint64_t c_allocs, c_bytes;
static _Atomic int64_t c_live;

static void *count_malloc(size_t n, void *ctx)
{
	(void)ctx;
	void *p = malloc(n);
	if (p != NULL) {
		atomic_fetch_add_explicit(&c_allocs, 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&c_bytes, n, memory_order_relaxed);
		atomic_fetch_add_explicit(&c_live, (int64_t)malloc_usable_size(p),
					  memory_order_relaxed);
	}
	return p;
}

static void *count_calloc(size_t nmemb, size_t size, void *ctx)
{
	(void)ctx;
	void *p = calloc(nmemb, size);
	if (p != NULL) {
		atomic_fetch_add_explicit(&c_allocs, 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&c_bytes, nmemb * size, memory_order_relaxed);
		atomic_fetch_add_explicit(&c_live, (int64_t)malloc_usable_size(p),
					  memory_order_relaxed);
	}
	return p;
}

static void *count_realloc(void *old, size_t n, void *ctx)
{
	(void)ctx;
	int64_t before = old != NULL ? (int64_t)malloc_usable_size(old) : 0;
	void *p = realloc(old, n);
	if (p != NULL) {
		atomic_fetch_add_explicit(&c_allocs, 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&c_bytes, n, memory_order_relaxed);
		atomic_fetch_add_explicit(&c_live, (int64_t)malloc_usable_size(p) - before,
					  memory_order_relaxed);
	}
	return p;
}

static void count_free(void *p, void *ctx)
{
	(void)ctx;
	if (p == NULL)
		return;
	atomic_fetch_sub_explicit(&c_live, (int64_t)malloc_usable_size(p), memory_order_relaxed);
	free(p);
}

int64_t bench_live_bytes(void)
{
	return atomic_load_explicit(&c_live, memory_order_relaxed);
}

/* ---- Timer -------------------------------------------------------------------------------- */

void bench_start(bench_b *b)
{
	if (b->timer_on)
		return;
	b->a0 = atomic_load_explicit(&c_allocs, memory_order_relaxed);
	b->by0 = atomic_load_explicit(&c_bytes, memory_order_relaxed);
	b->t0 = bench_now_ns();
	b->timer_on = true;
}

void bench_stop(bench_b *b)
{
	if (!b->timer_on)
		return;
	b->dur_ns += bench_now_ns() - b->t0;
	b->allocs += atomic_load_explicit(&c_allocs, memory_order_relaxed) - b->a0;
	b->bytes += atomic_load_explicit(&c_bytes, memory_order_relaxed) - b->by0;
	b->timer_on = false;
}

void bench_metric(bench_b *b, double v, const char *unit)
{
	for (int i = 0; i < b->nmetrics; i++) {
		if (strcmp(b->metrics[i].unit, unit) == 0) {
			b->metrics[i].v = v;
			return;
		}
	}
	if (b->nmetrics == BENCH_MAX_METRICS)
		return;
	b->metrics[b->nmetrics].v = v;
	snprintf(b->metrics[b->nmetrics].unit, sizeof(b->metrics[0].unit), "%s", unit);
	b->nmetrics++;
}

int bench_fail(bench_b *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	if (!b->failed)
		vsnprintf(b->fail_msg, sizeof(b->fail_msg), fmt, ap);
	va_end(ap);
	b->failed = true;
	return 1;
}

/* ---- Registry ----------------------------------------------------------------------------- */

static bench_def *defs;
static size_t ndefs, defs_cap;

void bench_register(const bench_def *d)
{
	if (ndefs == defs_cap) {
		defs_cap = defs_cap ? defs_cap * 2 : 64;
		defs = realloc(defs, defs_cap * sizeof(*defs));
		if (defs == NULL)
			bench_die("out of memory");
	}
	defs[ndefs++] = *d;
}

/*
 * The -summary set: the project's main job until the repository layer exists. Chosen to cover
 * every WORKLOADS.md family at N = 1M plus restic's two headline figures, and to finish in about
 * a minute on 2 cores with the default -benchtime 1s.
 */
static const char *const summary_names[] = {
	"Insert/N=1M",
	"InsertPrealloc/N=1M",
	"Lookup/N=1M/known",
	"Lookup/N=1M/unknown",
	"Lookup/N=1M/known-par2",
	"LookupBatch/N=1M/known",
	"LookupBatch/N=1M/unknown",
	"Master/N=1M",
	"MasterLookup/N=1M/known",
	"MasterLookup/N=1M/unknown",
	"MasterLookupBatch/N=1M/known",
	"MasterLookupBatch/N=1M/unknown",
	"IndexAlloc",
	"DecodeIndex",
};

/* ---- Go's number formats ------------------------------------------------------------------ */

static void pretty(FILE *f, double x, const char *unit)
{
	double y = fabs(x);
	if (y == 0 || y >= 999.95)
		fprintf(f, "%10.0f %s", x, unit);
	else if (y >= 99.995)
		fprintf(f, "%12.1f %s", x, unit);
	else if (y >= 9.9995)
		fprintf(f, "%13.2f %s", x, unit);
	else if (y >= 0.99995)
		fprintf(f, "%14.3f %s", x, unit);
	else if (y >= 0.099995)
		fprintf(f, "%15.4f %s", x, unit);
	else if (y >= 0.0099995)
		fprintf(f, "%16.5f %s", x, unit);
	else if (y >= 0.00099995)
		fprintf(f, "%17.6f %s", x, unit);
	else
		fprintf(f, "%18.7f %s", x, unit);
}

/* ---- Running ------------------------------------------------------------------------------ */

static struct {
	uint64_t bt_ns; /* -benchtime as a duration, or */
	uint64_t bt_n;  /* as an iteration count (Nx) */
	int count;
	uint32_t batch;
	bool cpu_less;
} opt = { 1000000000ull, 0, 1, 0, false };

static void run_n(bench_b *b, uint64_t n)
{
	b->n = n;
	b->dur_ns = 0;
	b->allocs = 0;
	b->bytes = 0;
	b->timer_on = false;
	bench_start(b);
	b->def->run(b);
	bench_stop(b);
}

/* Go's B.launch: grow n until the timed duration reaches the benchtime. */
static void launch(bench_b *b)
{
	run_n(b, 1);
	if (b->failed)
		return;
	if (opt.bt_n > 0) {
		if (opt.bt_n > 1)
			run_n(b, opt.bt_n);
		return;
	}
	uint64_t n = 1;
	while (!b->failed && b->dur_ns < opt.bt_ns && n < 1000000000ull) {
		uint64_t last = n;
		uint64_t prev_ns = b->dur_ns ? b->dur_ns : 1;
		double want = (double)opt.bt_ns * (double)b->n / (double)prev_ns;
		n = want > 2e9 ? 2000000000ull : (uint64_t)want;
		n += n / 5;
		if (n > 100 * last)
			n = 100 * last;
		if (n < last + 1)
			n = last + 1;
		if (n > 1000000000ull)
			n = 1000000000ull;
		run_n(b, n);
	}
}

static int name_width;

static void print_line(const bench_b *b)
{
	char name[BENCH_NAME_MAX + 32];
	int procs = bench_procs();
	if (opt.cpu_less || procs == 1)
		snprintf(name, sizeof(name), "Benchmark%s", b->def->name);
	else
		snprintf(name, sizeof(name), "Benchmark%s-%d", b->def->name, procs);
	double ns = (double)b->dur_ns / (double)b->n;
	printf("%-*s\t%8" PRIu64, name_width, name, b->n);
	if (ns != 0) {
		putchar('\t');
		pretty(stdout, ns, "ns/op");
	}
	if (b->set_bytes > 0 && b->dur_ns > 0) {
		double mbs = ((double)b->set_bytes * (double)b->n / 1e6) / ((double)b->dur_ns / 1e9);
		printf("\t%7.2f MB/s", mbs);
	}
	printf("\t%8" PRIu64 " B/op\t%8" PRIu64 " allocs/op", b->bytes / b->n, b->allocs / b->n);
	if (b->per_op_div > 0) {
		putchar('\t');
		pretty(stdout, ns / b->per_op_div, b->per_op_unit);
	}
	for (int i = 0; i < b->nmetrics; i++) {
		putchar('\t');
		pretty(stdout, b->metrics[i].v, b->metrics[i].unit);
	}
	putchar('\n');
	fflush(stdout);
}

/* Runs one benchmark -count times. @return 0, or 1 if it failed. */
static int run_bench(const bench_def *d)
{
	bench_b b;
	memset(&b, 0, sizeof(b));
	b.def = d;
	b.batch = opt.batch;
	bench_log("setup %s", d->name);
	if (d->setup != NULL && (d->setup(&b) != 0 || b.failed)) {
		printf("--- FAIL: Benchmark%s\n    %s\n", d->name,
		       b.fail_msg[0] ? b.fail_msg : "setup failed");
		fflush(stdout);
		return 1;
	}
	int failed = 0;
	/* Metrics set by setup (properties of the inputs) are printed with every line. */
	int setup_metrics = b.nmetrics;
	for (int c = 0; c < opt.count && !failed; c++) {
		b.nmetrics = setup_metrics;
		launch(&b);
		if (b.failed) {
			printf("--- FAIL: Benchmark%s\n    %s\n", d->name, b.fail_msg);
			fflush(stdout);
			failed = 1;
		} else {
			print_line(&b);
		}
	}
	if (d->teardown != NULL)
		d->teardown(&b);
	return failed;
}

static void print_header(void)
{
	char cpu[256] = "unknown";
	FILE *f = fopen("/proc/cpuinfo", "r");
	if (f != NULL) {
		char line[512];
		while (fgets(line, sizeof(line), f) != NULL) {
			if (strncmp(line, "model name", 10) == 0) {
				char *c = strchr(line, ':');
				if (c != NULL) {
					c++;
					while (*c == ' ' || *c == '\t')
						c++;
					c[strcspn(c, "\n")] = '\0';
					snprintf(cpu, sizeof(cpu), "%s", c);
				}
				break;
			}
		}
		fclose(f);
	}
#if defined(__x86_64__)
	const char *arch = "amd64";
#elif defined(__aarch64__)
	const char *arch = "arm64";
#elif defined(__i386__)
	const char *arch = "386";
#else
	const char *arch = "unknown";
#endif
	printf("goos: linux\ngoarch: %s\npkg: rix/bench\ncpu: %s\n", arch, cpu);
	fflush(stdout);
}

static void usage(FILE *f)
{
	fputs("usage: rix-bench [flags]\n"
	      "  -bench REGEX     run benchmarks whose name (without \"Benchmark\") matches the POSIX\n"
	      "                   extended REGEX; \".\" runs all. Without -bench nothing runs.\n"
	      "  -count N         run each benchmark N times (default 1)\n"
	      "  -benchtime D     time per benchmark, e.g. 1s, 500ms, 2m, or an iteration count 100x\n"
	      "                   (default 1s)\n"
	      "  -batch N         entry batch size for new tables and indexes (0: rix's default)\n"
	      "  -cpu-less        print names without the -<CPUs> suffix\n"
	      "  -cold            return freed memory to the kernel (every op faults its pages anew)\n"
	      "  -summary         run the short fixed set (the project's main job)\n"
	      "  -list            list the benchmark names (those matching -bench, if given)\n"
	      "  -selftest        only check the generator against WORKLOADS.md's reference values\n"
	      "  -v               progress of input generation and setup on stderr\n",
	      f);
}

static uint64_t parse_u64(const char *flag, const char *s)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || s[0] == '-')
		bench_die("invalid value %s for %s", s, flag);
	return (uint64_t)v;
}

static void parse_benchtime(const char *s)
{
	size_t len = strlen(s);
	if (len >= 2 && s[len - 1] == 'x') {
		char tmp[64];
		if (len - 1 >= sizeof(tmp))
			bench_die("invalid -benchtime %s", s);
		memcpy(tmp, s, len - 1);
		tmp[len - 1] = '\0';
		opt.bt_n = parse_u64("-benchtime", tmp);
		if (opt.bt_n == 0)
			bench_die("invalid -benchtime %s", s);
		return;
	}
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno != 0 || end == s || v <= 0)
		bench_die("invalid -benchtime %s", s);
	double mul;
	if (strcmp(end, "ns") == 0)
		mul = 1;
	else if (strcmp(end, "us") == 0 || strcmp(end, "µs") == 0)
		mul = 1e3;
	else if (strcmp(end, "ms") == 0)
		mul = 1e6;
	else if (strcmp(end, "s") == 0)
		mul = 1e9;
	else if (strcmp(end, "m") == 0)
		mul = 60e9;
	else
		bench_die("invalid -benchtime %s (want e.g. 1s, 500ms or 100x)", s);
	opt.bt_ns = (uint64_t)(v * mul);
	opt.bt_n = 0;
}

static bool in_summary(const char *name)
{
	for (size_t i = 0; i < sizeof(summary_names) / sizeof(summary_names[0]); i++)
		if (strcmp(summary_names[i], name) == 0)
			return true;
	return false;
}

int main(int argc, char **argv)
{
	const char *pattern = NULL;
	bool list = false, summary = false, selftest_only = false, cold = false;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		/* Accept -flag and --flag, and -flag=value as Go does. */
		if (a[0] == '-' && a[1] == '-')
			a++;
		char flag[32];
		const char *val = NULL;
		const char *eq = strchr(a, '=');
		if (eq != NULL && (size_t)(eq - a) < sizeof(flag)) {
			memcpy(flag, a, (size_t)(eq - a));
			flag[eq - a] = '\0';
			val = eq + 1;
		} else {
			snprintf(flag, sizeof(flag), "%s", a);
		}
		bool takes = strcmp(flag, "-bench") == 0 || strcmp(flag, "-count") == 0 ||
			     strcmp(flag, "-benchtime") == 0 || strcmp(flag, "-batch") == 0;
		if (takes && val == NULL) {
			if (i + 1 >= argc)
				bench_die("flag needs an argument: %s", flag);
			val = argv[++i];
		}
		if (strcmp(flag, "-bench") == 0)
			pattern = val;
		else if (strcmp(flag, "-count") == 0)
			opt.count = (int)parse_u64(flag, val);
		else if (strcmp(flag, "-benchtime") == 0)
			parse_benchtime(val);
		else if (strcmp(flag, "-batch") == 0)
			opt.batch = (uint32_t)parse_u64(flag, val);
		else if (strcmp(flag, "-cpu-less") == 0)
			opt.cpu_less = true;
		else if (strcmp(flag, "-summary") == 0)
			summary = true;
		else if (strcmp(flag, "-cold") == 0)
			cold = true;
		else if (strcmp(flag, "-list") == 0)
			list = true;
		else if (strcmp(flag, "-selftest") == 0)
			selftest_only = true;
		else if (strcmp(flag, "-v") == 0)
			opt_verbose = true;
		else if (strcmp(flag, "-h") == 0 || strcmp(flag, "-help") == 0) {
			usage(stdout);
			return 0;
		} else {
			fprintf(stderr, "rix-bench: unknown flag %s\n", argv[i]);
			usage(stderr);
			return 2;
		}
	}

	/*
	 * Warm heap (default): glibc keeps freed memory instead of returning it to the kernel, so
	 * an op that follows a freed op reuses pages that are already mapped, as a long-running
	 * process (and Go's runtime, whose benchmarks restic's figures come from) does. On this VM
	 * a first touch costs 20-40 ns per inserted entry. -cold leaves glibc's defaults, so every
	 * op faults its memory in afresh.
	 */
	if (!cold) {
		mallopt(M_TRIM_THRESHOLD, INT32_MAX);
		mallopt(M_MMAP_THRESHOLD, 32 << 20);
		mallopt(M_TOP_PAD, 0);
	}

	if (selftest_only) {
		int rc = gen_selftest(opt_verbose);
		gen_free_all();
		if (rc != 0) {
			fprintf(stderr, "rix-bench: generator self-test FAILED\n");
			return 1;
		}
		printf("selftest ok\n");
		return 0;
	}

	register_workload_benchmarks();
	register_limit_benchmarks(); /* beside the lookups: the same family, the same run */
	register_twoline_benchmarks();
	register_idset_benchmarks(); /* the dedup-only set, beside the probes too */
	register_restic_benchmarks();
	register_crypto_benchmarks();
	register_pack_benchmarks();
	register_compress_benchmarks();
	register_repo_benchmarks();
	register_savepath_benchmarks();
	register_chunker_benchmarks();
	register_stage_benchmarks(); /* last: its corpus (1 GiB) is kept until the end */

	regex_t re;
	bool have_re = false;
	if (pattern != NULL) {
		int rc = regcomp(&re, pattern, REG_EXTENDED | REG_NOSUB);
		if (rc != 0) {
			char msg[256];
			regerror(rc, &re, msg, sizeof(msg));
			bench_die("invalid -bench regex %s: %s", pattern, msg);
		}
		have_re = true;
	}

	/* Select. */
	bool *sel = calloc(ndefs ? ndefs : 1, sizeof(bool));
	if (sel == NULL)
		bench_die("out of memory");
	size_t nsel = 0;
	for (size_t i = 0; i < ndefs; i++) {
		if (summary)
			sel[i] = in_summary(defs[i].name);
		else if (have_re)
			sel[i] = regexec(&re, defs[i].name, 0, NULL, 0) == 0;
		else
			sel[i] = list;
		nsel += sel[i];
	}
	if (list) {
		for (size_t i = 0; i < ndefs; i++)
			if (sel[i])
				printf("%s\n", defs[i].name);
		return 0;
	}

	static rix_allocator counting = { count_malloc, count_calloc, count_realloc, count_free,
					  NULL };
	rix_allocator_set(&counting);

	uint64_t t_start = bench_now_ns();
	print_header();
	if (nsel > 0) {
		/* Every workload benchmark depends on the generator: check it first, always. */
		if (gen_selftest(opt_verbose) != 0)
			bench_die("generator self-test FAILED: inputs differ from WORKLOADS.md");
	}
	int procs = bench_procs();
	for (size_t i = 0; i < ndefs; i++) {
		if (!sel[i])
			continue;
		int w = (int)strlen("Benchmark") + (int)strlen(defs[i].name);
		if (!opt.cpu_less && procs > 1)
			w += snprintf(NULL, 0, "-%d", procs);
		if (w > name_width)
			name_width = w;
	}
	int failed = 0, family = -1;
	for (size_t i = 0; i < ndefs; i++) {
		if (!sel[i])
			continue;
		if (family >= 0 && defs[i].family != family) {
			/* Leaving a family: free what it kept for its own benchmarks. */
			if (family == 0)
				workload_caches_free();
			else
				restic_caches_free();
		}
		family = defs[i].family;
		failed |= run_bench(&defs[i]);
	}
	workload_caches_free();
	restic_caches_free();
	double secs = (double)(bench_now_ns() - t_start) / 1e9;
	if (failed) {
		printf("FAIL\nFAIL\trix/bench\t%.3fs\n", secs);
	} else {
		printf("PASS\nok  \trix/bench\t%.3fs\n", secs);
	}
	if (have_re)
		regfree(&re);
	free(sel);
	free(defs);
	gen_free_all();
	bench_corpus_free_all();
	return failed ? 1 : 0;
}
