/*
 * tests/test_faults.c — backend faults at every point of open, index loading, save + flush and
 * check (tests/faultbackend.h), once and keep-failing.
 *
 * A base repository (version 2, three packs, two index files) is made once. Each loop runs its
 * scenario with the fault armed at operation N = 1, 2, ... until an N is past the last operation
 * (no fault was injected: that run must succeed, and the loop ends). Scenarios:
 *   open        rix_repo_open (key list, key read, config read), faults armed before it;
 *   load index  rix_repo_load_index, strict and lenient (one loader thread: a fixed order);
 *   check       rix_repo_check with and without read_data;
 *   save+flush  on a copy of the base: a 4 MiB blob (a pack finished during the save), small
 *               data and tree blobs and one the base has, then flush; the client stops at the
 *               first error. Variants: resumed (the same session, once the fault is gone, saves
 *               everything again and flushes: that must succeed), a backend that copies packs
 *               instead of taking them (as REST does), four threads saving at once.
 * Read-only scenarios fail every operation with EIO or a short read; save + flush with EIO,
 * ENOSPC, a sync fault (stored, then reported failed) and a refused rename. After every run:
 *   - a failure is an error code with a message (rix_error_last non-empty); with a fault injected,
 *     the read-only scenarios must fail (or, loading leniently, report the file), and a save +
 *     flush that keeps failing must fail;
 *   - every index file names only complete packs: each exists, its SHA-256 is its name, and its
 *     header lists every blob the index gives it, at the same place;
 *   - no temporary pack file is left behind;
 *   - rix_repo_check (read_data) passes on a fresh open, every blob of the base loads back, and
 *     after a save + flush that reported success (or was resumed) every blob saved loads too;
 *   - `restic check --read-data` passes, on a sample: every RESTIC_EVERY-th run of the save
 *     loops taken together (so that the samples fall on every N and plan in turn), and the first
 *     run past the last operation (the runs without a fault all leave the same repository); the
 *     read-only scenarios must leave every file as it was, which is checked for every N, and
 *     restic checks the base once after each of their tests;
 *   - a retry (a fresh open over the plain backend, the same blobs saved again, flush) stores
 *     everything, and every blob loads back (read-only scenarios: a fresh open loads the index and
 *     every blob of the base).
 * Leaks: the ASan build.
 */
#include <dirent.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "rix/rix.h"
#include "faultbackend.h"
#include "testutil.h"
#include "repo/repo_internal.h" /* rix__repo_key: packs and index files checked by hand */

#define PW "fault pw"
#define RESTIC_EVERY 6
#define MAX_N 200

static const rix_repo_options fast = { .version = RIX_REPO_OPTIONS_VERSION, .compression = RIX_COMPRESSION_AUTO, .pack_size = 4 << 20, .scrypt_n = 128, .scrypt_r = 1, .scrypt_p = 1,
				       .username = "tester", .hostname = "testhost", .workers = 1 };

/* ---- blobs ------------------------------------------------------------------------------------ */

struct blob {
	rix_blob_type type;
	uint8_t *data;
	size_t n;
	rix_id id;
};

#define NBASE 6
#define NNEW 9
static struct blob base_blobs[NBASE]; /* in the base repository */
static struct blob new_blobs[NNEW];   /* saved by the save loop: one of them is in the base too */
static char *base_dir;
static uint64_t restic_runs, save_runs;
static int clean_run_checked;
static double restic_seconds;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void make_blob(struct blob *b, rix_blob_type t, size_t n, uint64_t *st)
{
	b->type = t;
	b->n = n;
	b->data = malloc(n ? n : 1);
	assert_non_null(b->data);
	if (t == RIX_BLOB_TREE) /* trees compress (version 2 always compresses them) */
		for (size_t i = 0; i < n; i++)
			b->data[i] = (uint8_t)("{\"nodes\":[]}\n"[i % 13]);
	else
		rix_test_fill_random(b->data, n, st);
	if (t == RIX_BLOB_TREE && n > 8)
		rix_test_fill_random(b->data, 8, st);
	rix_sha256(&b->id, b->data, n);
}

static void free_blob(struct blob *b)
{
	free(b->data);
	memset(b, 0, sizeof(*b));
}

/* ---- the repository, plain --------------------------------------------------------------------- */

static rix_repo *open_plain(const char *dir)
{
	rix_backend *b;
	MUST(rix_backend_local_open(&b, dir, 0));
	rix_repo *r;
	int rc = rix_repo_open(&r, b, PW, strlen(PW), &fast);
	if (rc != 0) {
		rix_backend_free(b);
		fail_msg("open %s: %d (%s)", dir, rc, rix_error_last());
	}
	MUST(rix_repo_load_index(NULL, r, NULL, NULL));
	return r;
}

static void save_all(rix_repo *r, const struct blob *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		rix_id id;
		MUST(rix_repo_save_blob(&id, NULL, r, v[i].type, v[i].data, v[i].n));
		assert_memory_equal(id.b, v[i].id.b, RIX_ID_SIZE);
	}
	MUST(rix_repo_flush(r));
}

/* Every blob of v loads back from r, byte for byte. */
static void must_load_all(rix_repo *r, const struct blob *v, size_t n, const char *when)
{
	for (size_t i = 0; i < n; i++) {
		uint8_t *out;
		size_t on;
		int rc = rix_repo_load_blob(&out, &on, r, v[i].type, &v[i].id);
		if (rc != 0)
			fail_msg("%s: blob %zu (%zu bytes) does not load: %d (%s)", when, i, v[i].n, rc, rix_error_last());
		assert_int_equal(on, v[i].n);
		assert_memory_equal(out, v[i].data, on);
		rix_free(out);
	}
}

static void copy_repo(const char *from, const char *to)
{
	if (rix_test_run(NULL, NULL, "cp -a '%s'/. '%s'/", from, to) != 0)
		fail_msg("cannot copy %s to %s", from, to);
}

/* ---- what a run must leave --------------------------------------------------------------------- */

struct pack_check {
	rix_backend *b;
	const rix_key *key;
	int version;
	const char *index_name;
	size_t packs;
};

/* A pack an index file names: there, complete (SHA-256 = name), and its header agrees. */
static int check_named_pack(void *arg, const rix_id *pack_id, const rix_packed_blob *blobs, size_t n)
{
	struct pack_check *pc = arg;
	char name[65];
	rix_id_to_hex(name, pack_id);
	uint8_t *pack;
	size_t size;
	int rc = rix_backend_read_all(&pack, &size, pc->b, RIX_FILE_PACK, name, (size_t)1 << 30);
	if (rc != 0)
		fail_msg("index %.16s names pack %s, which is not there: %d (%s)", pc->index_name, name, rc,
			 rix_error_last());
	rix_id got;
	rix_sha256(&got, pack, size);
	if (memcmp(got.b, pack_id->b, RIX_ID_SIZE) != 0)
		fail_msg("index %.16s names pack %s, which is not complete (%zu bytes, another SHA-256)", pc->index_name,
			 name, size);
	rix_blob *hdr;
	size_t cnt;
	rc = rix_pack_read_header(&hdr, &cnt, pc->key, pack, size, pc->version);
	if (rc != 0)
		fail_msg("pack %s: header: %s", name, rix_error_last());
	for (size_t i = 0; i < n; i++) {
		size_t j = 0;
		while (j < cnt && !(hdr[j].offset == blobs[i].offset && hdr[j].length == blobs[i].length &&
				    hdr[j].type == blobs[i].type && memcmp(hdr[j].id.b, blobs[i].id.b, RIX_ID_SIZE) == 0))
			j++;
		if (j == cnt)
			fail_msg("index %.16s: pack %s's header has no blob at %u", pc->index_name, name, blobs[i].offset);
	}
	rix_free(hdr);
	rix_free(pack);
	pc->packs++;
	return 0;
}

/* Every pack every index file of dir names is complete. Returns the number of index files. */
static size_t check_index_names_complete_packs(const char *dir)
{
	rix_repo *r = open_plain(dir);
	rix_backend *b = rix_repo_backend(r);
	char (*names)[65] = malloc(256 * 65);
	assert_non_null(names);
	char idir[4200];
	snprintf(idir, sizeof(idir), "%s/index", dir);
	size_t n = rix_test_list_ids(idir, names, 256);
	for (size_t i = 0; i < n; i++) {
		uint8_t *file, *json;
		size_t fn, jn;
		MUST(rix_backend_read_all(&file, &fn, b, RIX_FILE_INDEX, names[i], (size_t)1 << 30));
		rix_id want, got;
		MUST(rix_id_from_hex(&want, names[i], 64));
		rix_sha256(&got, file, fn);
		if (memcmp(want.b, got.b, RIX_ID_SIZE) != 0)
			fail_msg("index file %s is not complete", names[i]);
		MUST(rix_unpacked_decode(&json, &jn, rix__repo_key(r), file, fn, rix_repo_config(r)->version));
		rix_index *idx;
		MUST(rix_index_decode(&idx, NULL, (const char *)json, jn));
		struct pack_check pc = { b, rix__repo_key(r), rix_repo_config(r)->version, names[i], 0 };
		MUST(rix_index_foreach_pack(idx, check_named_pack, &pc));
		rix_index_free(idx);
		rix_free(json);
		rix_free(file);
	}
	free(names);
	rix_repo_free(r);
	return n;
}

static size_t count_dir(const char *dir)
{
	DIR *d = opendir(dir);
	if (d == NULL)
		return 0;
	size_t n = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL)
		n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
	closedir(d);
	return n;
}

/* A listing of every file of the repository (type, name, size), to compare before and after. */
struct listing {
	char *text;
	size_t len, cap;
	int type;
};

static int list_line(void *arg, const char *name, uint64_t size)
{
	struct listing *l = arg;
	char line[128];
	int k = snprintf(line, sizeof(line), "%d %s %llu\n", l->type, name, (unsigned long long)size);
	if (l->len + (size_t)k + 1 > l->cap) {
		l->cap = (l->len + (size_t)k + 1) * 2;
		l->text = realloc(l->text, l->cap);
		assert_non_null(l->text);
	}
	memcpy(l->text + l->len, line, (size_t)k + 1);
	l->len += (size_t)k;
	return 0;
}

static int cmp_line(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The sorted listing (malloc'd): every file but locks (restic check makes and removes them). */
static char *repo_listing(const char *dir)
{
	rix_backend *b;
	MUST(rix_backend_local_open(&b, dir, 0));
	struct listing l = { 0 };
	for (int t = RIX_FILE_KEY; t < RIX_FILE_TYPES; t++) {
		if (t == RIX_FILE_LOCK)
			continue;
		l.type = t;
		MUST(rix_backend_list(b, (rix_file_type)t, list_line, &l));
	}
	uint64_t csize;
	MUST(rix_backend_stat(&csize, b, RIX_FILE_CONFIG, NULL));
	l.type = 0;
	list_line(&l, "config", csize);
	rix_backend_free(b);
	/* Sort the lines. */
	size_t nl = 0;
	for (size_t i = 0; i < l.len; i++)
		nl += l.text[i] == '\n';
	char **lines = malloc((nl + 1) * sizeof(*lines));
	assert_non_null(lines);
	size_t k = 0;
	for (char *p = l.text; *p != '\0';) {
		lines[k++] = p;
		p = strchr(p, '\n');
		*p++ = '\0';
	}
	qsort(lines, k, sizeof(*lines), cmp_line);
	char *out = malloc(l.len + 1);
	assert_non_null(out);
	size_t o = 0;
	for (size_t i = 0; i < k; i++) {
		size_t n = strlen(lines[i]);
		memcpy(out + o, lines[i], n);
		out[o + n] = '\n';
		o += n + 1;
	}
	out[o] = '\0';
	free(lines);
	free(l.text);
	return out;
}

static void rix_check_passes(const char *dir, const char *when)
{
	rix_repo *r;
	rix_backend *b;
	MUST(rix_backend_local_open(&b, dir, 0));
	int rc = rix_repo_open(&r, b, PW, strlen(PW), &fast);
	if (rc != 0) {
		rix_backend_free(b);
		fail_msg("%s: open: %s", when, rix_error_last());
	}
	rix_check_report rep;
	rc = rix_repo_check(&rep, r, &(rix_check_options){ .version = RIX_CHECK_OPTIONS_VERSION, .read_data = true });
	if (rc != 0)
		fail_msg("%s: rix check: %d (%s): %zu missing, %zu damaged packs, %zu mismatches, %zu damaged index files",
			 when, rc, rix_error_last(), rep.missing_packs, rep.damaged_packs, rep.header_mismatches,
			 rep.damaged_index_files);
	rix_repo_free(r);
}

static void restic_check_passes(const char *dir, const char *when)
{
	char *out = NULL;
	restic_runs++;
	double t0 = now();
	if (rix_test_restic(dir, PW, "check --read-data", &out) != 0)
		fail_msg("%s: restic check failed:\n%s", when, out);
	restic_seconds += now() - t0;
	free(out);
}

/* ---- the loops --------------------------------------------------------------------------------- */

enum scenario { OPEN, LOAD, SAVE, CHECK };
static const char *const scenario_names[] = { "open", "load index", "save + flush", "check" };

struct loop {
	enum scenario sc;
	rix_test_fault_plan plan;
	bool strict;   /* LOAD: opt.strict */
	int read_data; /* CHECK */
	int resume;    /* SAVE: after a failure, the same session saves everything again and flushes */
	int copy;      /* the backend copies packs and never takes them (as REST does) */
	int threads;   /* SAVE: this many threads save at once (0: the calling thread alone) */
};

/* What one run did. */
struct outcome {
	int rc;
	char msg[512];
	long injected;
	long ops;
	int reported;  /* LOAD, lenient: index files the error callback got */
	int durable;   /* SAVE: the run promised every blob durable (flush returned 0) */
};

static void note(struct outcome *o, int rc)
{
	if (rc != 0 && o->rc == 0) {
		o->rc = rc;
		snprintf(o->msg, sizeof(o->msg), "%s", rix_error_last());
	}
}

/* Opens dir through the fault wrapper over f (armed with plan, or disarmed after the open when
 * plan is NULL). 0 or open's error (the backend is freed then). */
static int open_faulty(const char *dir, rix_test_fault *f, const rix_test_fault_plan *plan, const rix_repo_options *o,
		       rix_repo **r)
{
	rix_backend *local, *b;
	MUST(rix_backend_local_open(&local, dir, 0));
	MUST(rix_test_fault_backend(&b, local, f));
	rix_test_fault_arm(f, plan);
	rix_error_clear();
	int rc = rix_repo_open(r, b, PW, strlen(PW), o);
	if (rc != 0)
		rix_backend_free(b);
	return rc;
}

static void index_error(void *arg, const char *name, int code, const char *msg)
{
	struct outcome *o = arg;
	(void)name;
	assert_true(code != 0);
	assert_true(msg != NULL && msg[0] != '\0');
	o->reported++;
}

struct saver {
	rix_repo *r;
	int k, threads;
	int rc;
	char msg[512];
};

/* Thread k saves its share of the new blobs, and every thread the trees and the one the base
 * has (so that they race for the same blobs); it stops at its first error (no cmocka here). */
static void *saver_main(void *arg)
{
	struct saver *s = arg;
	rix_error_clear();
	for (size_t i = 0; s->rc == 0 && i < NNEW; i++) {
		const struct blob *b = &new_blobs[i];
		if ((int)(i % (size_t)s->threads) != s->k && b->type != RIX_BLOB_TREE && i != NNEW - 1)
			continue;
		s->rc = rix_repo_save_blob(NULL, NULL, s->r, b->type, b->data, b->n);
		if (s->rc != 0)
			snprintf(s->msg, sizeof(s->msg), "%s", rix_error_last());
	}
	return NULL;
}

static void save_threaded(rix_repo *r, int threads, struct outcome *o)
{
	struct saver sv[8];
	pthread_t th[8];
	assert_true(threads <= 8);
	for (int k = 0; k < threads; k++) {
		sv[k] = (struct saver){ .r = r, .k = k, .threads = threads };
		assert_int_equal(pthread_create(&th[k], NULL, saver_main, &sv[k]), 0);
	}
	for (int k = 0; k < threads; k++)
		assert_int_equal(pthread_join(th[k], NULL), 0);
	for (int k = 0; k < threads; k++)
		if (sv[k].rc != 0 && o->rc == 0) {
			o->rc = sv[k].rc;
			snprintf(o->msg, sizeof(o->msg), "%s", sv[k].msg);
		}
}

static void run(const struct loop *l, const char *dir, rix_test_fault *f, struct outcome *o)
{
	memset(o, 0, sizeof(*o));
	rix_repo_options opt = fast;
	opt.strict = l->strict;
	rix_repo *r = NULL;
	if (l->sc == OPEN) {
		int rc = open_faulty(dir, f, &l->plan, &opt, &r);
		note(o, rc);
		o->injected = rix_test_fault_injected(f);
		o->ops = rix_test_fault_count(f, RIX_TEST_FAULT_ANY);
		if (rc == 0) { /* what opened works */
			rix_test_fault_arm(f, NULL);
			MUST(rix_repo_load_index(NULL, r, NULL, NULL));
			must_load_all(r, base_blobs, NBASE, "after open");
		}
		rix_repo_free(r);
		return;
	}
	MUST(open_faulty(dir, f, NULL, &opt, &r));
	if (l->sc == SAVE)
		MUST(rix_repo_load_index(NULL, r, NULL, NULL));
	rix_test_fault_arm(f, &l->plan);
	rix_error_clear();
	if (l->sc == LOAD) {
		note(o, rix_repo_load_index(NULL, r, index_error, o));
	} else if (l->sc == CHECK) {
		rix_check_report rep;
		int rc = rix_repo_check(&rep, r, &(rix_check_options){ .version = RIX_CHECK_OPTIONS_VERSION, .read_data = l->read_data });
		note(o, rc);
		if (rc == RIX_ECORRUPT)
			assert_true(rep.errors > 0);
	} else if (l->threads > 1) {
		save_threaded(r, l->threads, o);
		if (o->rc == 0)
			note(o, rix_repo_flush(r));
		o->durable = o->rc == 0;
	} else {
		int rc = 0;
		for (size_t i = 0; rc == 0 && i < NNEW; i++) {
			rc = rix_repo_save_blob(NULL, NULL, r, new_blobs[i].type, new_blobs[i].data, new_blobs[i].n);
			note(o, rc);
		}
		if (rc == 0)
			note(o, rix_repo_flush(r));
		o->durable = o->rc == 0;
	}
	o->injected = rix_test_fault_injected(f);
	o->ops = rix_test_fault_count(f, RIX_TEST_FAULT_ANY);
	rix_test_fault_arm(f, NULL);
	if (l->sc == SAVE && o->rc != 0 && l->resume) {
		/* The same session once the fault is gone: save everything again, flush. */
		rix_error_clear();
		for (size_t i = 0; i < NNEW; i++) {
			int rc = rix_repo_save_blob(NULL, NULL, r, new_blobs[i].type, new_blobs[i].data, new_blobs[i].n);
			if (rc != 0)
				fail_msg("resumed save of blob %zu after \"%s\": %d (%s)", i, o->msg, rc, rix_error_last());
		}
		int rc = rix_repo_flush(r);
		if (rc != 0)
			fail_msg("resumed flush after \"%s\": %d (%s)", o->msg, rc, rix_error_last());
		o->durable = 1;
	}
	if (l->sc == LOAD && o->rc == 0 && o->reported == 0)
		must_load_all(r, base_blobs, NBASE, "after loading");
	rix_repo_free(r);
}

static void describe(char *buf, size_t cap, const struct loop *l, long n)
{
	snprintf(buf, cap, "%s%s%s%s%s%s, %s fault at %s #%ld (%s)", scenario_names[l->sc],
		 l->sc == LOAD ? (l->strict ? " (strict)" : " (lenient)") : "",
		 l->sc == CHECK ? (l->read_data ? " (read data)" : " (headers)") : "",
		 l->sc == SAVE && l->resume ? " (resumed)" : "", l->copy ? " (copying backend)" : "",
		 l->threads > 1 ? " (threads)" : "",
		 rix_test_fault_effect_name(l->plan.effect),
		 rix_test_fault_op_name(l->plan.op), n, rix_test_fault_mode_name(l->plan.mode));
}

/* The retry: a fresh open over the plain backend, the new blobs saved again, flush. */
static void retry_save(const char *dir)
{
	rix_repo *r = open_plain(dir);
	save_all(r, new_blobs, NNEW);
	rix_repo_free(r);
	r = open_plain(dir);
	must_load_all(r, base_blobs, NBASE, "after the retry");
	must_load_all(r, new_blobs, NNEW, "after the retry");
	rix_repo_free(r);
}

/* Runs loop l for N = 1, 2, ...; returns the number of runs. */
static long fault_loop(struct loop l)
{
	int writes = l.sc == SAVE;
	char *before = writes ? NULL : repo_listing(base_dir);
	rix_test_fault f;
	rix_test_fault_init(&f);
	f.copy = l.copy;
	long n;
	for (n = 1;; n++) {
		char what[256];
		describe(what, sizeof(what), &l, n);
		char *dir = base_dir;
		if (writes) {
			dir = rix_test_new_dir("rix-faults");
			copy_repo(base_dir, dir);
		}
		l.plan.n = n;
		struct outcome o;
		run(&l, dir, &f, &o);
		int last = o.injected == 0;
		if (getenv("RIX_FAULTS_VERBOSE") != NULL)
			fprintf(stderr, "%s: %ld ops, %ld injected, rc %d%s%s\n", what, o.ops, o.injected, o.rc,
				o.rc ? ": " : "", o.msg);
		/* A clear error, or success. */
		if (o.rc != 0 && o.msg[0] == '\0')
			fail_msg("%s: error %d without a message", what, o.rc);
		if (last && o.rc != 0)
			fail_msg("%s: nothing injected (%ld operations), and still %d (%s)", what, o.ops, o.rc, o.msg);
		if (o.injected > 0) {
			int must_fail = l.sc == OPEN || l.sc == CHECK || (l.sc == LOAD && l.strict) ||
					(l.sc == SAVE && l.plan.mode == RIX_TEST_FAULT_FROM);
			if (must_fail && o.rc == 0)
				fail_msg("%s: %ld faults injected, and it succeeded", what, o.injected);
			if (l.sc == LOAD && o.rc == 0 && o.reported == 0)
				fail_msg("%s: %ld faults injected, and no index file was reported", what, o.injected);
			if (l.sc == SAVE && o.rc != 0 && l.plan.effect == RIX_TEST_FAULT_ENOSPC && o.rc != RIX_ENOSPC)
				fail_msg("%s: %d (%s), expected RIX_ENOSPC", what, o.rc, o.msg);
		}
		/* What the run left. */
		char tmp[4200];
		snprintf(tmp, sizeof(tmp), "%s/.rix-tmp", dir);
		if (count_dir(tmp) != 0)
			fail_msg("%s: %zu temporary files left in %s", what, count_dir(tmp), tmp);
		if (writes) {
			check_index_names_complete_packs(dir);
			rix_check_passes(dir, what);
			rix_repo *r = open_plain(dir);
			must_load_all(r, base_blobs, NBASE, what);
			if (o.durable)
				must_load_all(r, new_blobs, NNEW, what);
			rix_repo_free(r);
			if (++save_runs % RESTIC_EVERY == 0 || (last && !clean_run_checked++))
				restic_check_passes(dir, what);
			retry_save(dir);
			check_index_names_complete_packs(dir);
			rix_check_passes(dir, what);
			rix_test_free_dir(dir);
		} else {
			char *after = repo_listing(base_dir);
			if (strcmp(before, after) != 0)
				fail_msg("%s: the repository changed:\n%s\nafter:\n%s", what, before, after);
			free(after);
			rix_repo *r = open_plain(base_dir); /* the retry: a fresh open reads everything */
			must_load_all(r, base_blobs, NBASE, what);
			rix_repo_free(r);
		}
		if (last)
			break;
		if (n >= MAX_N)
			fail_msg("%s: still faults after %d operations", what, MAX_N);
	}
	free(before);
	rix_test_fault_destroy(&f);
	return n;
}

static const rix_test_fault_mode modes[] = { RIX_TEST_FAULT_ONCE, RIX_TEST_FAULT_FROM };

/* Every operation with each effect, and the kinds no plain operation count reaches. */
static void loops_for(struct loop l, const rix_test_fault_plan *plans, size_t nplans)
{
	for (size_t p = 0; p < nplans; p++)
		for (size_t m = 0; m < 2; m++) {
			l.plan = plans[p];
			l.plan.mode = modes[m];
			long runs = fault_loop(l);
			assert_true(runs > 1); /* there was at least one operation to fail */
		}
	if (l.sc != SAVE) { /* the base, unchanged by every run (checked), so this holds for every N */
		rix_check_passes(base_dir, scenario_names[l.sc]);
		restic_check_passes(base_dir, scenario_names[l.sc]);
	}
}

static const rix_test_fault_plan read_plans[] = {
	{ RIX_TEST_FAULT_ANY, 0, 0, RIX_TEST_FAULT_EIO },
	{ RIX_TEST_FAULT_ANY, 0, 0, RIX_TEST_FAULT_SHORT },
};

static void test_open(void **state)
{
	(void)state;
	loops_for((struct loop){ .sc = OPEN }, read_plans, 2);
}

static void test_load_index(void **state)
{
	(void)state;
	loops_for((struct loop){ .sc = LOAD, .strict = 1 }, read_plans, 2);
	loops_for((struct loop){ .sc = LOAD, .strict = 0 }, read_plans, 2);
}

static void test_check(void **state)
{
	(void)state;
	loops_for((struct loop){ .sc = CHECK, .read_data = 1 }, read_plans, 2);
	loops_for((struct loop){ .sc = CHECK, .read_data = 0 }, read_plans, 2);
}

static const rix_test_fault_plan write_plans[] = {
	{ RIX_TEST_FAULT_ANY, 0, 0, RIX_TEST_FAULT_EIO },
	{ RIX_TEST_FAULT_ANY, 0, 0, RIX_TEST_FAULT_ENOSPC },
	{ RIX_TEST_FAULT_SYNC, 0, 0, RIX_TEST_FAULT_EIO },
	{ RIX_TEST_FAULT_RENAME, 0, 0, RIX_TEST_FAULT_ENOSPC },
};

static void test_save_flush(void **state)
{
	(void)state;
	loops_for((struct loop){ .sc = SAVE }, write_plans, 4);
}

static void test_save_flush_resumed(void **state)
{
	(void)state;
	loops_for((struct loop){ .sc = SAVE, .resume = 1 }, write_plans + 1, 3);
}

/* A backend that copies: a pack it refused is still the packer's, and one it stored while
 * reporting failure (sync) is stored again by the retry. */
static void test_save_flush_copying(void **state)
{
	(void)state;
	static const rix_test_fault_plan plans[] = {
		{ RIX_TEST_FAULT_ANY, 0, 0, RIX_TEST_FAULT_EIO },
		{ RIX_TEST_FAULT_SYNC, 0, 0, RIX_TEST_FAULT_ENOSPC },
	};
	loops_for((struct loop){ .sc = SAVE, .copy = 1 }, plans, 2);
	loops_for((struct loop){ .sc = SAVE, .copy = 1, .resume = 1 }, plans, 2);
}

/* Four threads saving at once, racing for the same blobs, while the backend fails. */
static void test_save_flush_threads(void **state)
{
	(void)state;
	static const rix_test_fault_plan any = { RIX_TEST_FAULT_ANY, 0, 0, RIX_TEST_FAULT_EIO };
	static const rix_test_fault_plan sync = { RIX_TEST_FAULT_SYNC, 0, 0, RIX_TEST_FAULT_EIO };
	loops_for((struct loop){ .sc = SAVE, .threads = 4 }, &any, 1);
	loops_for((struct loop){ .sc = SAVE, .threads = 4, .resume = 1 }, &sync, 1);
}

/* ---- the wrapper itself ------------------------------------------------------------------------ */

static int count_entry(void *arg, const char *name, uint64_t size)
{
	(void)name;
	(void)size;
	++*(size_t *)arg;
	return 0;
}

/* Counting by kind, once versus from, the sync fault that stores, the short effects. */
static void test_wrapper(void **state)
{
	(void)state;
	char *dir = rix_test_new_dir("rix-faults-w");
	rix_backend *local, *b;
	MUST(rix_backend_local_open(&local, dir, 1));
	rix_test_fault f;
	rix_test_fault_init(&f);
	MUST(rix_test_fault_backend(&b, local, &f));
	assert_string_equal(rix_backend_kind(b), "fault");
	char names[4][65];
	for (int i = 0; i < 4; i++) {
		rix_id id;
		char c = (char)('a' + i);
		rix_sha256(&id, &c, 1);
		rix_id_to_hex(names[i], &id);
	}
	/* Writes: the 2nd fails once, with ENOSPC, storing nothing. */
	rix_test_fault_arm(&f, &(rix_test_fault_plan){ RIX_TEST_FAULT_WRITE, 2, RIX_TEST_FAULT_ONCE,
						      RIX_TEST_FAULT_ENOSPC });
	MUST(rix_backend_write(b, RIX_FILE_SNAPSHOT, names[0], "0123456789", 10));
	assert_int_equal(rix_backend_write(b, RIX_FILE_SNAPSHOT, names[1], "x", 1), RIX_ENOSPC);
	assert_non_null(strstr(rix_error_last(), "injected"));
	MUST(rix_backend_write(b, RIX_FILE_SNAPSHOT, names[2], "y", 1));
	uint64_t size;
	assert_int_equal(rix_backend_stat(&size, b, RIX_FILE_SNAPSHOT, names[1]), RIX_ENOTFOUND);
	assert_int_equal(rix_test_fault_count(&f, RIX_TEST_FAULT_WRITE), 3);
	assert_int_equal(rix_test_fault_count(&f, RIX_TEST_FAULT_SYNC), 3);
	assert_int_equal(rix_test_fault_count(&f, RIX_TEST_FAULT_RENAME), 0);
	assert_int_equal(rix_test_fault_count(&f, RIX_TEST_FAULT_STAT), 1);
	assert_int_equal(rix_test_fault_count(&f, RIX_TEST_FAULT_ANY), 4);
	assert_int_equal(rix_test_fault_injected(&f), 1);
	/* A sync fault: the file is there, and the write says it failed. */
	rix_test_fault_arm(&f, &(rix_test_fault_plan){ RIX_TEST_FAULT_SYNC, 1, RIX_TEST_FAULT_ONCE, RIX_TEST_FAULT_EIO });
	assert_int_equal(rix_backend_write(b, RIX_FILE_SNAPSHOT, names[3], "z", 1), RIX_EIO);
	MUST(rix_backend_stat(&size, b, RIX_FILE_SNAPSHOT, names[3]));
	assert_int_equal(size, 1);
	/* Reads from the 2nd on fail; a short read gives half and RIX_ECORRUPT. */
	rix_test_fault_arm(&f, &(rix_test_fault_plan){ RIX_TEST_FAULT_READ, 2, RIX_TEST_FAULT_FROM, RIX_TEST_FAULT_SHORT });
	char buf[10];
	MUST(rix_backend_read(b, RIX_FILE_SNAPSHOT, names[0], 0, buf, 10));
	memset(buf, 'q', sizeof(buf));
	assert_int_equal(rix_backend_read(b, RIX_FILE_SNAPSHOT, names[0], 0, buf, 10), RIX_ECORRUPT);
	assert_memory_equal(buf, "01234\0\0\0\0\0", 10);
	assert_int_equal(rix_backend_read(b, RIX_FILE_SNAPSHOT, names[0], 0, buf, 4), RIX_ECORRUPT);
	assert_int_equal(rix_test_fault_injected(&f), 2);
	/* A listing cut off after half its entries (3 files: 1 reported). */
	rix_test_fault_arm(&f, &(rix_test_fault_plan){ RIX_TEST_FAULT_LIST, 1, RIX_TEST_FAULT_ONCE, RIX_TEST_FAULT_SHORT });
	size_t seen = 0;
	assert_int_equal(rix_backend_list(b, RIX_FILE_SNAPSHOT, count_entry, &seen), RIX_EIO);
	assert_int_equal(seen, 1);
	seen = 0;
	MUST(rix_backend_list(b, RIX_FILE_SNAPSHOT, count_entry, &seen));
	assert_int_equal(seen, 3);
	/* Any operation: the 2nd is the remove; ENOSPC is for writes only, so it is EIO; the file stays. */
	rix_test_fault_arm(&f, &(rix_test_fault_plan){ RIX_TEST_FAULT_ANY, 2, RIX_TEST_FAULT_ONCE, RIX_TEST_FAULT_ENOSPC });
	MUST(rix_backend_stat(&size, b, RIX_FILE_SNAPSHOT, names[0]));
	assert_int_equal(rix_backend_remove(b, RIX_FILE_SNAPSHOT, names[0]), RIX_EIO);
	MUST(rix_backend_remove(b, RIX_FILE_SNAPSHOT, names[0]));
	assert_int_equal(rix_test_fault_count(&f, RIX_TEST_FAULT_REMOVE), 2);
	/* Renames: write_file given a path; a refused one leaves the file to the caller. */
	rix_test_fault_arm(&f, &(rix_test_fault_plan){ RIX_TEST_FAULT_RENAME, 1, RIX_TEST_FAULT_ONCE, RIX_TEST_FAULT_EIO });
	char path[4200];
	snprintf(path, sizeof(path), "%s/pack-tmp", rix_backend_temp_dir(b));
	FILE *fp = fopen(path, "w+");
	assert_non_null(fp);
	assert_int_equal(fwrite("pack", 1, 4, fp), 4);
	fflush(fp);
	bool taken = false;
	assert_int_equal(rix_backend_write_file(&taken, b, RIX_FILE_PACK, names[0], fileno(fp), path, 4), RIX_EIO);
	assert_false(taken);
	MUST(rix_backend_write_file(&taken, b, RIX_FILE_PACK, names[0], fileno(fp), path, 4));
	assert_true(taken);
	fclose(fp);
	assert_int_equal(rix_test_fault_count(&f, RIX_TEST_FAULT_RENAME), 2);
	rix_backend_free(b);
	rix_test_fault_destroy(&f);
	rix_test_free_dir(dir);
}

/* ---- fixture ----------------------------------------------------------------------------------- */

static int setup(void **state)
{
	(void)state;
	uint64_t st = 0xfa017;
	for (int i = 0; i < NBASE - 1; i++)
		make_blob(&base_blobs[i], RIX_BLOB_DATA, 1000 * (size_t)(i + 1), &st);
	make_blob(&base_blobs[NBASE - 1], RIX_BLOB_TREE, 3000, &st);
	/* A blob of the pack size or more makes a pack of its own, finished during the save. Mostly
	 * zeros: it compresses to a small pack, so that the many runs stay fast. */
	make_blob(&new_blobs[0], RIX_BLOB_DATA, ((size_t)4 << 20) + 100, &st);
	memset(new_blobs[0].data + 4096, 0, new_blobs[0].n - 4096);
	rix_sha256(&new_blobs[0].id, new_blobs[0].data, new_blobs[0].n);
	for (int i = 1; i < NNEW - 3; i++)
		make_blob(&new_blobs[i], RIX_BLOB_DATA, 700 * (size_t)i, &st);
	make_blob(&new_blobs[NNEW - 3], RIX_BLOB_TREE, 2000, &st);
	make_blob(&new_blobs[NNEW - 2], RIX_BLOB_TREE, 5000, &st);
	/* One the base has already: deduplicated. */
	new_blobs[NNEW - 1] = base_blobs[0];
	new_blobs[NNEW - 1].data = malloc(base_blobs[0].n);
	assert_non_null(new_blobs[NNEW - 1].data);
	memcpy(new_blobs[NNEW - 1].data, base_blobs[0].data, base_blobs[0].n);

	base_dir = rix_test_new_dir("rix-faults-base");
	rix_backend *b;
	MUST(rix_backend_local_open(&b, base_dir, 1));
	rix_repo *r;
	rix_repo_options o = fast;
	o.repo_version = 2;
	MUST(rix_repo_init(&r, b, PW, strlen(PW), &o));
	/* Two flushes: three packs (data, tree; data), two index files. */
	save_all(r, base_blobs, 3);
	save_all(r, base_blobs + 3, NBASE - 3);
	rix_repo_free(r);
	assert_int_equal(check_index_names_complete_packs(base_dir), 2);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	rix_test_free_dir(base_dir);
	for (int i = 0; i < NBASE; i++)
		free_blob(&base_blobs[i]);
	for (int i = 0; i < NNEW; i++)
		free_blob(&new_blobs[i]);
	fprintf(stderr, "test_faults: %llu restic checks, %.1f s\n", (unsigned long long)restic_runs, restic_seconds);
	return 0;
}

int main(void)
{
	/* Hundreds of small repositories, each file fsync'ed: on tmpfs when there is one and no
	 * TMPDIR was asked for (what is tested here is the order of operations, not the disk). */
	const char *tmp = getenv("TMPDIR");
	if ((tmp == NULL || tmp[0] == '\0') && access("/dev/shm", W_OK | X_OK) == 0)
		setenv("TMPDIR", "/dev/shm", 1);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_wrapper),
		cmocka_unit_test(test_open),
		cmocka_unit_test(test_load_index),
		cmocka_unit_test(test_check),
		cmocka_unit_test(test_save_flush),
		cmocka_unit_test(test_save_flush_resumed),
		cmocka_unit_test(test_save_flush_copying),
		cmocka_unit_test(test_save_flush_threads),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
