/*
 * tests/test_index_cache.c — the index cache (repo/index_cache.c, index/master_image.c): it never
 * changes an answer. A repository of synthetic index files (random blobs of both types, copies of
 * blobs in other packs, a pack named by two files, compressed entries) is opened with and
 * without the cache, and every answer compared: lookup, lookup_all, lookup_many, size of every
 * blob and of unknown IDs, counts, pack lists, index file IDs, every entry foreach gives. Then:
 * a hit reads no index file and rewrites nothing; files added are read alone, on top; a file
 * removed, a flipped byte anywhere, a truncated file, another repository's cache file, all mean
 * a full load with the same answers and a new cache; no cache_dir writes nothing; check reads
 * every file whatever the cache holds; a dedup-only load neither reads nor writes it. The rix command: --cache-dir, the XDG folder, ~/.cache,
 * RIX_/RESTIC_CACHE_DIR, --no-cache, a folder that cannot be made (a warning).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "rix/rix.h"
#include "repo_fixture.h"
#include "testutil.h"
#include "index/master_index_internal.h"
#include "index/ranked.h"

#define NFILES 7 /* index files the fixture writes */

struct fixture {
	char dir[512];   /* the repository */
	char cache[512]; /* the cache root */
	char file[700];  /* the cache file */
	uint64_t rng;
	rix_id known[4096]; /* IDs written, both types mixed (a sample: one a pack) */
	size_t nknown;
};

/* Writes an index file of npacks random packs of per blobs each; dup: the first blob of each pack
 * is a copy of a blob of an earlier file (another pack). Returns its ID. */
static rix_id write_index(struct fixture *f, rix_repo *r, int npacks, int per, int dup)
{
	size_t cap = (size_t)npacks * (size_t)per * 200 + 64, n = 0;
	char *js = malloc(cap);
	assert_non_null(js);
	n += (size_t)snprintf(js + n, cap - n, "{\"packs\":[");
	for (int p = 0; p < npacks; p++) {
		rix_id pack;
		char hex[65];
		rix_test_random_id(&pack, &f->rng);
		rix_id_to_hex(hex, &pack);
		n += (size_t)snprintf(js + n, cap - n, "%s{\"id\":\"%s\",\"blobs\":[", p ? "," : "", hex);
		uint32_t off = 0;
		for (int b = 0; b < per; b++) {
			rix_id id;
			if (dup && b == 0 && f->nknown > 0)
				id = f->known[rix_test_next(&f->rng) % f->nknown];
			else
				rix_test_random_id(&id, &f->rng);
			if (b == 1 && f->nknown < sizeof(f->known) / sizeof(f->known[0]))
				f->known[f->nknown++] = id;
			rix_id_to_hex(hex, &id);
			uint32_t len = 40 + (uint32_t)(rix_test_next(&f->rng) % 5000);
			int tree = (b % 5) == 3 || (dup && b == 0 && (rix_test_next(&f->rng) & 1));
			n += (size_t)snprintf(js + n, cap - n, "%s{\"id\":\"%s\",\"type\":\"%s\",\"offset\":%u,\"length\":%u", b ? "," : "",
					      hex, tree ? "tree" : "data", off, len);
			if (b % 3 == 0)
				n += (size_t)snprintf(js + n, cap - n, ",\"uncompressed_length\":%u", len * 3);
			n += (size_t)snprintf(js + n, cap - n, "}");
			off += len;
		}
		n += (size_t)snprintf(js + n, cap - n, "]}");
	}
	n += (size_t)snprintf(js + n, cap - n, "]}\n");
	assert_true(n < cap);
	rix_id id;
	assert_int_equal(rix_repo_write_file(&id, r, RIX_FILE_INDEX, js, n), 0);
	free(js);
	return id;
}

static rix_repo_options with_cache(const struct fixture *f)
{
	rix_repo_options o = fast;
	o.cache_dir = f->cache;
	return o;
}

/* The fixture: NFILES index files, a pack named by two of them when repeat (else NFILES - 1 files,
 * none named twice: loads on top of the cache then keep their entries in a top, struct mstate). */
static int setup_files(void **state, bool repeat)
{
	struct fixture *f = calloc(1, sizeof(*f));
	assert_non_null(f);
	f->rng = 0x1dec0de;
	rix_test_mkdtemp(f->dir, sizeof(f->dir), "rix-icache-repo");
	rix_test_mkdtemp(f->cache, sizeof(f->cache), "rix-icache");
	rix_repo *r = init_repo(f->dir, 2);
	char hex[65];
	rix_id_to_hex(hex, &rix_repo_config(r)->id);
	snprintf(f->file, sizeof(f->file), "%s/%s/rix-index", f->cache, hex);
	/* 5 files: 12k blobs in all, every later file with copies of earlier blobs; then 2 more. */
	for (int i = 0; i < 5; i++)
		(void)write_index(f, r, 40, 60, i > 0);
	/* A pack named by two index files (an interrupted prune's state): the first file written
	 * again with a trailing space, so that its name differs. */
	rix_id first = write_index(f, r, 3, 20, 0);
	if (!repeat) {
		rix_repo_free(r);
		*state = f;
		return 0;
	}
	uint8_t *js;
	size_t n;
	assert_int_equal(rix_repo_read_file(&js, &n, r, RIX_FILE_INDEX, &first), 0);
	char *js2 = malloc(n + 1);
	assert_non_null(js2);
	memcpy(js2, js, n);
	js2[n] = ' ';
	assert_int_equal(rix_repo_write_file(NULL, r, RIX_FILE_INDEX, js2, n + 1), 0);
	rix_free(js);
	free(js2);
	rix_repo_free(r);
	*state = f;
	return 0;
}

static int setup(void **state)
{
	return setup_files(state, true);
}

static int setup_no_repeat(void **state)
{
	return setup_files(state, false);
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	rix_test_rmtree(f->dir);
	rix_test_rmtree(f->cache);
	free(f);
	return 0;
}

/* Opens and loads; stats into *st. */
static rix_repo *load(const char *dir, const rix_repo_options *o, rix_repo_load_stats *st)
{
	rix_repo *r = open_repo(dir, o);
	rix_repo_load_stats s;
	assert_int_equal(rix_repo_load_index(&s, r, NULL, NULL), 0);
	if (st != NULL)
		*st = s;
	return r;
}

static uint64_t index_bytes(const char *dir)
{
	char names[256][65], p[1024];
	char idx[600];
	snprintf(idx, sizeof(idx), "%s/index", dir);
	size_t n = rix_test_list_ids(idx, names, 256);
	uint64_t total = 0;
	for (size_t i = 0; i < n; i++) {
		struct stat st;
		snprintf(p, sizeof(p), "%s/%.64s", idx, names[i]);
		assert_int_equal(stat(p, &st), 0);
		total += (uint64_t)st.st_size;
	}
	return total;
}

static int same_pb(const rix_packed_blob *a, const rix_packed_blob *b)
{
	return cmp_pb(a, b) == 0;
}

/* Every answer of b equals a's (a: without the cache). */
static void compare(rix_repo *ra, rix_repo *rb, struct fixture *f)
{
	rix_master_index *a = rix_repo_master_index(ra), *b = rix_repo_master_index(rb);
	for (int t = 0; t < RIX_BLOB_TYPES; t++)
		assert_int_equal(rix_master_index_count(a, (rix_blob_type)t), rix_master_index_count(b, (rix_blob_type)t));
	assert_int_equal(rix_master_index_pack_count(a), rix_master_index_pack_count(b));
	rix_id *pa, *pb;
	size_t npa, npb;
	assert_int_equal(rix_master_index_packs(&pa, &npa, a), 0);
	assert_int_equal(rix_master_index_packs(&pb, &npb, b), 0);
	assert_int_equal(npa, npb);
	assert_memory_equal(pa, pb, npa * sizeof(rix_id));
	rix_free(pa);
	rix_free(pb);
	assert_int_equal(rix_master_index_index_ids(&pa, &npa, a), 0);
	assert_int_equal(rix_master_index_index_ids(&pb, &npb, b), 0);
	assert_int_equal(npa, npb);
	assert_memory_equal(pa, pb, npa * sizeof(rix_id));
	rix_free(pa);
	rix_free(pb);
	struct entries ea = { 0 }, eb = { 0 };
	assert_int_equal(rix_master_index_foreach(a, push_entry, &ea), 0);
	assert_int_equal(rix_master_index_foreach(b, push_entry, &eb), 0);
	assert_int_equal(ea.n, eb.n);
	assert_true(ea.n > 1000);
	qsort(ea.v, ea.n, sizeof(*ea.v), cmp_pb);
	qsort(eb.v, eb.n, sizeof(*eb.v), cmp_pb);
	for (size_t i = 0; i < ea.n; i++)
		assert_true(same_pb(&ea.v[i], &eb.v[i]));
	/* Every ID of both types (and so each under the other type too, mostly unknown), plus
	 * unknown IDs: lookup, lookup_all, size, lookup_many. */
	size_t nq = ea.n + 500;
	rix_id *q = malloc(nq * sizeof(*q));
	assert_non_null(q);
	for (size_t i = 0; i < ea.n; i++)
		q[i] = ea.v[i].id;
	for (size_t i = ea.n; i < nq; i++)
		rix_test_random_id(&q[i], &f->rng);
	rix_packed_blob *ma = malloc(nq * sizeof(*ma)), *mb = malloc(nq * sizeof(*mb));
	bool *fa = malloc(nq), *fb = malloc(nq);
	assert_true(ma && mb && fa && fb);
	size_t hits = 0;
	for (int t = 0; t < RIX_BLOB_TYPES; t++) {
		size_t na = rix_master_index_lookup_many(ma, fa, a, (rix_blob_type)t, q, nq);
		size_t nb = rix_master_index_lookup_many(mb, fb, b, (rix_blob_type)t, q, nq);
		assert_int_equal(na, nb);
		hits += na;
		for (size_t i = 0; i < nq; i++) {
			rix_packed_blob all_a[16], all_b[16], one;
			size_t ka = rix_master_index_lookup_all(all_a, 16, a, (rix_blob_type)t, &q[i]);
			size_t kb = rix_master_index_lookup_all(all_b, 16, b, (rix_blob_type)t, &q[i]);
			assert_int_equal(ka, kb);
			assert_true(ka <= 16);
			qsort(all_a, ka, sizeof(*all_a), cmp_pb);
			qsort(all_b, kb, sizeof(*all_b), cmp_pb);
			for (size_t k = 0; k < ka; k++)
				assert_true(same_pb(&all_a[k], &all_b[k]));
			assert_int_equal(fa[i], fb[i]);
			assert_int_equal(fa[i], ka > 0);
			int rc = rix_master_index_lookup(&one, b, (rix_blob_type)t, &q[i]);
			assert_int_equal(rc == 0, ka > 0);
			uint32_t sa = 0, sb = 0;
			assert_int_equal(rix_master_index_size(&sa, a, (rix_blob_type)t, &q[i]),
					 rix_master_index_size(&sb, b, (rix_blob_type)t, &q[i]));
			if (ka == 0)
				continue;
			/* One of the copies: the same set of places whichever is returned. */
			int in_a = 0, many_in_a = 0;
			for (size_t k = 0; k < ka; k++) {
				in_a |= same_pb(&one, &all_a[k]);
				many_in_a |= same_pb(&mb[i], &all_a[k]);
			}
			assert_true(in_a);
			assert_true(many_in_a);
			if (ka == 1) {
				assert_true(same_pb(&ma[i], &mb[i]));
				assert_int_equal(sa, sb);
			}
		}
	}
	assert_true(hits >= ea.n / 2); /* the IDs were found (under their own type at least) */
	free(q);
	free(ma);
	free(mb);
	free(fa);
	free(fb);
	free(ea.v);
	free(eb.v);
}

static void stat_cache(const struct fixture *f, struct stat *st)
{
	assert_int_equal(stat(f->file, st), 0);
}

/* Loads with the cache, compares with a load without, frees both (the cache written meanwhile). */
static rix_repo_load_stats check_same(struct fixture *f)
{
	rix_repo_options o = with_cache(f);
	rix_repo_load_stats sc, sn;
	rix_repo *rc = load(f->dir, &o, &sc);
	rix_repo *rn = load(f->dir, &fast, &sn);
	assert_int_equal(sc.files, sn.files);
	assert_int_equal(sc.loaded, sn.loaded);
	assert_int_equal(sc.blobs, sn.blobs);
	compare(rn, rc, f);
	rix_repo_free(rc);
	rix_repo_free(rn);
	return sc;
}

static void test_hit(void **state)
{
	struct fixture *f = *state;
	struct stat st, st2;
	char tag[600];
	snprintf(tag, sizeof(tag), "%s/CACHEDIR.TAG", f->cache);
	assert_int_not_equal(access(f->file, F_OK), 0);
	rix_repo_load_stats s = check_same(f); /* the first: reads every file, writes the cache */
	assert_int_equal(s.bytes, index_bytes(f->dir));
	stat_cache(f, &st);
	size_t n;
	char *t = rix_test_must_read(tag, &n);
	assert_non_null(strstr(t, "Signature: 8a477f597d28d172789f06886806bc55\n"));
	free(t);
	s = check_same(f); /* a hit: no index file read, the cache not rewritten */
	assert_int_equal(s.bytes, 0);
	assert_int_equal(s.loaded, NFILES);
	stat_cache(f, &st2);
	assert_int_equal(st.st_ino, st2.st_ino);
	assert_int_equal(st.st_mtime, st2.st_mtime);
	/* A second load_index on a repository loaded from the cache reads nothing either. */
	rix_repo_options o = with_cache(f);
	rix_repo *r = load(f->dir, &o, NULL);
	assert_int_equal(rix_repo_load_index(&s, r, NULL, NULL), 0);
	assert_int_equal(s.loaded, 0);
	rix_repo_free(r);
}

/*
 * A repository whose only index file names nothing (what a prune that removed everything
 * leaves): its cache is a hit that leaves the master index with no blob and no pack, and a second
 * load on that repository must still know the file is loaded (it once tried to install the
 * cache again, and failed).
 */
static void test_empty_index_twice(void **state)
{
	struct fixture *f = *state;
	char dir[512];
	rix_test_mkdtemp(dir, sizeof(dir), "rix-icache-empty");
	rix_repo *r = init_repo(dir, 2);
	static const char empty[] = "{\"packs\":[]}";
	MUST(rix_repo_write_file(NULL, r, RIX_FILE_INDEX, empty, sizeof(empty) - 1));
	rix_repo_free(r);
	rix_repo_options o = with_cache(f);
	rix_repo_load_stats s;
	rix_repo_free(load(dir, &o, &s)); /* reads the file, writes the cache */
	assert_int_equal(s.loaded, 1);
	r = load(dir, &o, &s); /* a hit */
	assert_int_equal(s.bytes, 0);
	assert_int_equal(rix_repo_load_index(&s, r, NULL, NULL), 0);
	assert_int_equal(s.loaded, 0);
	assert_int_equal(rix_master_index_count(rix_repo_master_index(r), RIX_BLOB_DATA), 0);
	rix_repo_free(r);
	rix_test_rmtree(dir);
}

static void test_added_files(void **state)
{
	struct fixture *f = *state;
	(void)check_same(f);
	uint64_t before = index_bytes(f->dir);
	rix_repo *r = open_repo(f->dir, NULL);
	(void)write_index(f, r, 10, 30, 1);
	(void)write_index(f, r, 10, 30, 1);
	rix_repo_free(r);
	struct stat st, st2;
	stat_cache(f, &st);
	rix_repo_load_stats s = check_same(f); /* the cache, then the two new files alone */
	assert_int_equal(s.bytes, index_bytes(f->dir) - before);
	assert_int_equal(s.loaded, NFILES + 2);
	/* A pack named twice (the fixture's): the install built the tables again, dropping the
	 * repeats, so the cache is written again, and the next load is a hit. */
	stat_cache(f, &st2);
	assert_int_not_equal(st.st_ino, st2.st_ino); /* rewritten */
	s = check_same(f);
	assert_int_equal(s.bytes, 0);
	assert_int_equal(s.loaded, NFILES + 2);
}

static const struct rix__ranked *top_of(rix_repo *r, rix_blob_type t)
{
	const struct mstate *st = atomic_load(&rix_repo_master_index(r)->state);
	return st->top[t];
}

/*
 * Loads on top of the cache of a repository whose packs are each named once: a small file's
 * entries go into a top (the cache's table carried over), with every answer as without the
 * cache; a load on top of a loaded repository writes a cache holding a table and a top, which a
 * later load installs as it lies (a hit) with the same answers.
 */
static void test_tops(void **state)
{
	struct fixture *f = *state;
	const size_t nfiles = NFILES - 1;
	(void)check_same(f); /* a full load, the cache written: a table, no top */
	rix_repo_options o = with_cache(f);
	rix_repo *r = load(f->dir, &o, NULL);
	assert_null(top_of(r, RIX_BLOB_DATA));
	(void)write_index(f, r, 10, 30, 1); /* 300 blobs, some copies of earlier ones */
	rix_repo_free(r);
	struct stat st, st2;
	stat_cache(f, &st);
	rix_repo_load_stats s = check_same(f);
	assert_int_equal(s.loaded, nfiles + 1);
	assert_true(s.bytes > 0);
	stat_cache(f, &st2);
	assert_int_equal(st.st_ino, st2.st_ino); /* within the share: not written again */
	r = load(f->dir, &o, NULL);
	assert_non_null(top_of(r, RIX_BLOB_DATA));
	assert_non_null(top_of(r, RIX_BLOB_TREE));
	size_t ntop = rix__ranked_count(top_of(r, RIX_BLOB_DATA));
	assert_true(ntop > 200 && ntop < 300);
	/* One more file loaded by this repository: its top built again, and a cache of it written. */
	(void)write_index(f, r, 10, 30, 1);
	rix_repo_load_stats s2;
	assert_int_equal(rix_repo_load_index(&s2, r, NULL, NULL), 0);
	assert_int_equal(s2.loaded, 1);
	assert_true(rix__ranked_count(top_of(r, RIX_BLOB_DATA)) > ntop);
	rix_repo_free(r); /* waits for the writer */
	stat_cache(f, &st2);
	assert_int_not_equal(st.st_ino, st2.st_ino);
	s = check_same(f); /* a hit: the table and the top as they lie */
	assert_int_equal(s.bytes, 0);
	assert_int_equal(s.loaded, nfiles + 2);
	r = load(f->dir, &o, NULL);
	assert_non_null(top_of(r, RIX_BLOB_DATA));
	/* A file past the top's share (1800 blobs on ~12000): the tables built again, no top, and
	 * the cache written again; then a hit. */
	uint64_t before = index_bytes(f->dir);
	(void)write_index(f, r, 60, 30, 1);
	rix_repo_free(r);
	stat_cache(f, &st);
	s = check_same(f);
	assert_int_equal(s.bytes, index_bytes(f->dir) - before);
	stat_cache(f, &st2);
	assert_int_not_equal(st.st_ino, st2.st_ino);
	r = load(f->dir, &o, &s);
	assert_int_equal(s.bytes, 0);
	assert_int_equal(s.loaded, nfiles + 3);
	assert_null(top_of(r, RIX_BLOB_DATA));
	rix_repo_free(r);
}

static void test_vanished_file(void **state)
{
	struct fixture *f = *state;
	(void)check_same(f);
	char names[16][65], idx[600], p[800];
	snprintf(idx, sizeof(idx), "%s/index", f->dir);
	assert_int_equal(rix_test_list_ids(idx, names, 16), NFILES);
	snprintf(p, sizeof(p), "%s/%.64s", idx, names[2]);
	assert_int_equal(unlink(p), 0);
	rix_repo_load_stats s = check_same(f); /* a full load: the cache holds the file's entries */
	assert_int_equal(s.bytes, index_bytes(f->dir));
	assert_int_equal(s.loaded, NFILES - 1);
	s = check_same(f);
	assert_int_equal(s.bytes, 0);
}

/* The cache damaged by fn(f, arg): a full load, the same answers, a good cache again. */
static void damaged(struct fixture *f, void (*fn)(struct fixture *, long), long arg)
{
	(void)check_same(f);
	fn(f, arg);
	rix_repo_load_stats s = check_same(f);
	assert_int_equal(s.bytes, index_bytes(f->dir));
	s = check_same(f);
	assert_int_equal(s.bytes, 0);
}

static void flip(struct fixture *f, long at)
{
	flip_byte(f->file, at);
}

static void truncate_to(struct fixture *f, long frac)
{
	struct stat st;
	stat_cache(f, &st);
	assert_int_equal(truncate(f->file, st.st_size * frac / 100), 0);
}

static void test_tampered(void **state)
{
	struct fixture *f = *state;
	struct stat st;
	(void)check_same(f);
	stat_cache(f, &st);
	/* The magic, the version, the header's IV, the header, the first chunk, one in the middle,
	 * the last byte. */
	long at[] = { 0, 9, 17, 60, 300, (long)st.st_size / 2, -1 };
	for (size_t i = 0; i < sizeof(at) / sizeof(at[0]); i++)
		damaged(f, flip, at[i]);
}

static void test_truncated(void **state)
{
	struct fixture *f = *state;
	damaged(f, truncate_to, 50);
	damaged(f, truncate_to, 99);
	damaged(f, truncate_to, 0);
}

/* Another repository's cache file (another key, another ID) under this one's name. */
static void other_repo(struct fixture *f, long unused)
{
	(void)unused;
	char dir[512];
	rix_test_mkdtemp(dir, sizeof(dir), "rix-icache-other");
	rix_repo *r = init_repo(dir, 2);
	struct fixture g = *f;
	g.nknown = 0;
	(void)write_index(&g, r, 5, 10, 0);
	char hex[65], other[800];
	rix_id_to_hex(hex, &rix_repo_config(r)->id);
	rix_repo_free(r);
	rix_repo_options o = with_cache(f);
	rix_repo_free(load(dir, &o, NULL));
	snprintf(other, sizeof(other), "%s/%s/rix-index", f->cache, hex);
	assert_int_equal(rename(other, f->file), 0);
	rix_test_rmtree(dir);
}

static void test_other_repository(void **state)
{
	damaged(*state, other_repo, 0);
}

static void test_no_cache_writes_nothing(void **state)
{
	struct fixture *f = *state;
	char xdg[600];
	snprintf(xdg, sizeof(xdg), "%s/xdg", f->cache);
	setenv("XDG_CACHE_HOME", xdg, 1); /* the library never looks there: only the CLI does */
	rix_repo_load_stats s;
	rix_repo_free(load(f->dir, &fast, &s));
	rix_repo_free(load(f->dir, &fast, &s));
	assert_int_equal(s.bytes, index_bytes(f->dir));
	char names[4][65];
	assert_int_equal(rix_test_list_ids(f->cache, names, 4), 0);
	assert_int_not_equal(access(f->file, F_OK), 0);
	assert_int_not_equal(access(xdg, F_OK), 0);
	unsetenv("XDG_CACHE_HOME");
	/* An options struct of version 2 (before cache_dir) is still accepted, without a cache. */
	rix_repo_options o2 = fast;
	o2.version = 2;
	rix_repo_free(load(f->dir, &o2, &s));
	assert_int_not_equal(access(f->file, F_OK), 0);
}

static void count_damaged(void *arg, const char *name, int code, const char *msg)
{
	(void)name;
	(void)msg;
	assert_true(code == RIX_ECORRUPT || code == RIX_EAUTH);
	++*(int *)arg;
}

static void test_check_reads_every_file(void **state)
{
	struct fixture *f = *state;
	(void)check_same(f);
	char names[16][65], p[800];
	snprintf(p, sizeof(p), "%s/index", f->dir);
	assert_int_equal(rix_test_list_ids(p, names, 16), NFILES);
	snprintf(p, sizeof(p), "%s/index/%.64s", f->dir, names[1]);
	flip_byte(p, 100);
	/* The cache holds what the file held: a load is a hit and says nothing... */
	rix_repo_options o = with_cache(f);
	rix_repo_load_stats s;
	rix_repo *r = open_repo(f->dir, &o);
	assert_int_equal(rix_repo_load_index(&s, r, NULL, NULL), 0);
	assert_int_equal(s.bytes, 0);
	rix_repo_free(r);
	/* ...but rix_repo_load_index_files and check read every file. */
	int damaged = 0;
	r = open_repo(f->dir, &o);
	assert_int_equal(rix_repo_load_index_files(&s, r, count_damaged, &damaged), 0);
	assert_int_equal(damaged, 1);
	assert_int_equal(s.loaded, NFILES - 1);
	rix_repo_free(r);
	r = open_repo(f->dir, &o);
	rix_check_report rep;
	assert_int_equal(rix_repo_check(&rep, r, NULL), RIX_ECORRUPT);
	assert_int_equal(rep.damaged_index_files, 1);
	rix_repo_free(r);
}

/* The master index's side: an image installs only into an empty index; a state with blobs
 * stored since is not exported. */
static void test_image_api(void **state)
{
	struct fixture *f = *state;
	rix_repo *r = load(f->dir, &fast, NULL);
	rix_master_image *ex;
	assert_int_equal(rix_master_index_export(&ex, rix_repo_master_index(r)), 0);
	rix_master_image *again;
	assert_int_equal(rix_master_index_export(&again, rix_repo_master_index(r)), RIX_EINVAL); /* one at a time */
	size_t nd, nsec;
	const void *desc = rix_master_image_desc(&nd, ex);
	rix_image_section *sec = rix_master_image_sections(&nsec, ex);
	assert_int_equal(nsec, 7); /* packs; each type's set (with its locations), second locations, filter */
	rix_master_image *im;
	assert_int_equal(rix_master_image_parse(&im, desc, nd - 1), RIX_ECORRUPT);
	/* An image of another scheme of the ranked tables (its filter's masks and words, its
	 * locations' packing: word 6 of the descriptor) is refused, not misread. */
	uint8_t *other = malloc(nd);
	assert_non_null(other);
	memcpy(other, desc, nd);
	assert_int_equal(rix_master_image_parse(&im, other, nd), 0);
	rix_master_image_free(im);
	uint32_t scheme;
	memcpy(&scheme, other + 24, 4);
	assert_int_equal(scheme, RIX__RANKED_SCHEME);
	scheme ^= 1;
	memcpy(other + 24, &scheme, 4);
	assert_int_equal(rix_master_image_parse(&im, other, nd), RIX_ECORRUPT);
	free(other);
	assert_int_equal(rix_master_image_parse(&im, desc, nd), 0);
	assert_int_equal(rix_master_image_blobs(im), rix_master_image_blobs(ex));
	assert_int_equal(rix_master_index_install(rix_repo_master_index(r), im), RIX_EINVAL); /* not allocated */
	assert_int_equal(rix_master_image_alloc(im), 0);
	size_t nsec2;
	rix_image_section *dst = rix_master_image_sections(&nsec2, im);
	for (size_t k = 0; k < nsec; k++)
		memcpy(dst[k].p, sec[k].p, sec[k].n);
	/* A pack number out of range is refused before anything is installed (the data set's
	 * first 48 bytes overwritten: its first tail and the location after it, whose pack
	 * number's bits are then all set, which names no pack when the pack count is not a power
	 * of two; asserted, so that the refusal below is the check's: tails are not checked). */
	size_t npacks = sec[0].n / sizeof(rix_id);
	assert_true(npacks > 1 && (npacks & (npacks - 1)) != 0);
	uint8_t keep[48];
	assert_true(dst[1].n > sizeof(keep));
	memcpy(keep, dst[1].p, sizeof(keep));
	memset(dst[1].p, 0xFF, sizeof(keep));
	assert_int_equal(rix_master_index_install(rix_repo_master_index(r), im), RIX_ECORRUPT);
	memcpy(dst[1].p, keep, sizeof(keep));
	/* So is a data set whose directory does not add up (its block overwritten). */
	uint8_t *saved = malloc(dst[1].n);
	assert_non_null(saved);
	memcpy(saved, dst[1].p, dst[1].n);
	memset(dst[1].p, 0xFF, dst[1].n);
	assert_int_equal(rix_master_index_install(rix_repo_master_index(r), im), RIX_ECORRUPT);
	memcpy(dst[1].p, saved, dst[1].n);
	free(saved);
	assert_int_equal(rix_master_image_check(im), 0);
	assert_int_equal(rix_master_index_install(rix_repo_master_index(r), im), RIX_EINVAL); /* not empty */
	rix_master_index *mi;
	assert_int_equal(rix_master_index_new(&mi), 0);
	assert_int_equal(rix_master_index_install(mi, im), 0);
	assert_int_equal(rix_master_index_install(mi, im), RIX_EINVAL); /* spent */
	rix_master_image_free(im);
	rix_master_image_free(ex);
	assert_int_equal(rix_master_index_count(mi, RIX_BLOB_DATA), rix_master_index_count(rix_repo_master_index(r), RIX_BLOB_DATA));
	rix_packed_blob pb;
	struct entries ea = { 0 };
	assert_int_equal(rix_master_index_foreach(rix_repo_master_index(r), push_entry, &ea), 0);
	for (size_t i = 0; i < ea.n; i++)
		assert_int_equal(rix_master_index_lookup(&pb, mi, ea.v[i].type, &ea.v[i].id), 0);
	free(ea.v);
	rix_master_index_free(mi);
	rix_repo_free(r);
}


/*
 * A dedup-only load (rix_repo_set_dedup_only) neither writes the cache nor reads it: the cache
 * holds data blobs' locations, which that index is made not to hold. Its answers to "is it
 * there?" are the full load's. A dedup-only state does not export, nor an image install into a
 * dedup-only index.
 */
static void test_dedup_only(void **state)
{
	struct fixture *f = *state;
	rix_repo_options o = with_cache(f);
	rix_repo *r = open_repo(f->dir, &o);
	rix_repo_set_dedup_only(r, true);
	rix_repo_load_stats s;
	assert_int_equal(rix_repo_load_index(&s, r, NULL, NULL), 0);
	assert_int_equal(s.bytes, index_bytes(f->dir));
	rix_repo_free(r); /* would join a cache writer, if one had been started */
	assert_int_not_equal(access(f->file, F_OK), 0);
	(void)check_same(f); /* a full load writes it */
	struct stat st, st2;
	stat_cache(f, &st);
	r = open_repo(f->dir, &o);
	rix_repo_set_dedup_only(r, true);
	assert_int_equal(rix_repo_load_index(&s, r, NULL, NULL), 0);
	assert_int_equal(s.bytes, index_bytes(f->dir)); /* every file read, the cache not */
	rix_repo *full = load(f->dir, &o, NULL);        /* from the cache */
	rix_master_index *md = rix_repo_master_index(r), *mf = rix_repo_master_index(full);
	assert_true(rix_master_index_dedup_only(md));
	for (size_t i = 0; i < f->nknown; i++)
		for (int t = 0; t < RIX_BLOB_TYPES; t++)
			assert_int_equal(rix_master_index_has(md, (rix_blob_type)t, &f->known[i]),
					 rix_master_index_has(mf, (rix_blob_type)t, &f->known[i]));
	rix_master_image *ex;
	assert_int_equal(rix_master_index_export(&ex, md), RIX_EINVAL);
	assert_non_null(strstr(rix_error_last(), "dedup-only"));
	assert_int_equal(rix_master_index_export(&ex, mf), 0);
	size_t nd, nsec;
	const void *desc = rix_master_image_desc(&nd, ex);
	rix_image_section *sec = rix_master_image_sections(&nsec, ex);
	rix_master_image *im;
	assert_int_equal(rix_master_image_parse(&im, desc, nd), 0);
	assert_int_equal(rix_master_image_alloc(im), 0);
	rix_image_section *dst = rix_master_image_sections(&nsec, im);
	for (size_t k = 0; k < nsec; k++)
		memcpy(dst[k].p, sec[k].p, sec[k].n);
	rix_master_index *mi;
	assert_int_equal(rix_master_index_new(&mi), 0);
	rix_master_index_set_dedup_only(mi, true);
	assert_int_equal(rix_master_index_install(mi, im), RIX_EINVAL);
	assert_non_null(strstr(rix_error_last(), "dedup-only"));
	rix_master_index_free(mi);
	rix_master_image_free(im);
	rix_master_image_free(ex);
	rix_repo_free(full);
	rix_repo_free(r);
	stat_cache(f, &st2);
	assert_int_equal(st.st_ino, st2.st_ino);
	assert_int_equal(st.st_mtime, st2.st_mtime);
}

/* A load while the writer of the previous one runs: the bulk load publishes once the exported
 * state is written (it is pinned), lookups meanwhile; then the newer cache is a hit. */
static void test_load_while_writing(void **state)
{
	struct fixture *f = *state;
	rix_repo_options o = with_cache(f);
	rix_repo_load_stats s;
	rix_repo *r = load(f->dir, &o, &s); /* a full load: the writer starts */
	assert_true(s.bytes > 0);
	(void)write_index(f, r, 10, 30, 1);
	assert_int_equal(rix_repo_load_index(&s, r, NULL, NULL), 0);
	assert_int_equal(s.loaded, 1);
	rix_repo *rn = load(f->dir, &fast, NULL);
	compare(rn, r, f);
	rix_repo_free(r);
	rix_repo_free(rn);
	s = check_same(f);
	assert_int_equal(s.bytes, 0);
	assert_int_equal(s.loaded, NFILES + 1);
}

/* Every allocation failed in turn, through the cache (a hit, then with no cache file): each load
 * succeeds or says RIX_ENOMEM, leaks nothing, and a success answers as the files do. */
struct oom {
	struct fixture *f;
	size_t blobs;
	int remove_cache;
};

static int oom_load(void *arg)
{
	struct oom *o = arg;
	if (o->remove_cache)
		(void)unlink(o->f->file);
	rix_repo_options opt = with_cache(o->f);
	rix_backend *b;
	rix_repo *r;
	int rc = rix_backend_local_open(&b, o->f->dir, false);
	if (rc != 0)
		return rc;
	if ((rc = rix_repo_open(&r, b, PW, strlen(PW), &opt)) != 0) {
		rix_backend_free(b);
		return rc;
	}
	rc = rix_repo_load_index(NULL, r, NULL, NULL);
	if (rc == 0) {
		rix_master_index *mi = rix_repo_master_index(r);
		size_t n = rix_master_index_count(mi, RIX_BLOB_DATA) + rix_master_index_count(mi, RIX_BLOB_TREE);
		assert_int_equal(n, o->blobs);
	}
	rix_repo_free(r);
	return rc;
}

static void test_out_of_memory(void **state)
{
	struct fixture *f = *state;
	rix_repo_load_stats s = check_same(f);
	struct oom o = { f, s.blobs, 0 };
	rix_test_oom_loop("load through the cache", oom_load, &o, 20000);
	o.remove_cache = 1;
	rix_test_oom_loop("load, then the cache written", oom_load, &o, 20000);
	s = check_same(f);
	assert_int_equal(s.bytes, 0);
}

/* ---- the rix command ---------------------------------------------------------------------- */

#define RIX "env -u RIX_CACHE_DIR -u RESTIC_CACHE_DIR RIX_PASSWORD='" PW "' RESTIC_PASSWORD= '" RIX_CLI_PATH "'"

static int exists(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int exists(const char *fmt, ...)
{
	char p[1200];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(p, sizeof(p), fmt, ap);
	va_end(ap);
	return access(p, F_OK) == 0;
}

/* `rix ... list blobs`, sorted: what the index says, as the command prints it. */
static char *blobs_listed(const char *env_and_flags, const char *dir)
{
	char *out;
	size_t n;
	assert_int_equal(rix_test_run(&out, &n, "%s %s -r '%s' list blobs | sort", env_and_flags, RIX, dir), 0);
	assert_true(n > 1000);
	return out;
}

static void test_cli(void **state)
{
	struct fixture *f = *state;
	char hex[65], d[700], e[700];
	rix_repo *r = open_repo(f->dir, NULL);
	rix_id_to_hex(hex, &rix_repo_config(r)->id);
	rix_repo_free(r);
	snprintf(d, sizeof(d), "%s/D", f->cache);
	snprintf(e, sizeof(e), "%s/E", f->cache);
	/* --cache-dir: snapshots makes the folders and the tag (it loads no index)... */
	assert_int_equal(rix_test_run(NULL, NULL, "%s --cache-dir '%s' -r '%s' snapshots >/dev/null", RIX, d, f->dir), 0);
	assert_true(exists("%s/CACHEDIR.TAG", d));
	assert_true(exists("%s/%s", d, hex));
	assert_false(exists("%s/%s/rix-index", d, hex));
	/* ...a command that loads the index writes the cache, and check does too. */
	char *plain = blobs_listed("XDG_CACHE_HOME=/nonexistent/x HOME=/nonexistent/y", f->dir); /* no cache: cannot make one */
	char flags[800];
	snprintf(flags, sizeof(flags), "HOME='%s' XDG_CACHE_HOME= ", e);
	char *first = blobs_listed(flags, f->dir); /* ~/.cache/rix when XDG_CACHE_HOME is empty */
	assert_true(exists("%s/.cache/rix/%s/rix-index", e, hex));
	assert_true(exists("%s/.cache/rix/CACHEDIR.TAG", e));
	char *hit = blobs_listed(flags, f->dir);
	assert_string_equal(plain, first);
	assert_string_equal(plain, hit);
	/* (The fixture's packs are names only: check finds them missing, after loading the index.) */
	assert_int_equal(rix_test_run(NULL, NULL, "%s --cache-dir '%s' -r '%s' check >/dev/null 2>&1", RIX, d, f->dir), 1);
	assert_true(exists("%s/%s/rix-index", d, hex));
	/* --no-cache: nothing made, wherever the cache would be. */
	snprintf(flags, sizeof(flags), "XDG_CACHE_HOME='%s/xdg'", f->cache);
	free(blobs_listed(flags, f->dir));
	assert_true(exists("%s/xdg/rix/%s/rix-index", f->cache, hex));
	snprintf(flags, sizeof(flags), "XDG_CACHE_HOME='%s/xdg2'", f->cache);
	char *none;
	size_t n;
	assert_int_equal(rix_test_run(&none, &n, "%s %s --no-cache -r '%s' list blobs | sort", flags, RIX, f->dir), 0);
	assert_string_equal(plain, none);
	assert_false(exists("%s/xdg2", f->cache));
	/* RIX_CACHE_DIR, then RESTIC_CACHE_DIR, when no --cache-dir. */
	assert_int_equal(rix_test_run(NULL, NULL, "RIX_PASSWORD='" PW "' RIX_CACHE_DIR='%s/rixenv' '" RIX_CLI_PATH "' -r '%s' list blobs >/dev/null",
				      f->cache, f->dir), 0);
	assert_true(exists("%s/rixenv/%s/rix-index", f->cache, hex));
	assert_int_equal(rix_test_run(NULL, NULL, "RIX_PASSWORD='" PW "' RIX_CACHE_DIR= RESTIC_CACHE_DIR='%s/resticenv' '" RIX_CLI_PATH "' -r '%s' list blobs >/dev/null",
				      f->cache, f->dir), 0);
	assert_true(exists("%s/resticenv/%s/rix-index", f->cache, hex));
	/* A cache folder that cannot be made: a warning, and the command works. */
	char *out;
	assert_int_equal(rix_test_run(&out, &n, "%s --cache-dir /proc/nope -r '%s' list blobs 2>&1 >/dev/null", RIX, f->dir), 0);
	assert_non_null(strstr(out, "warning: index cache: cannot make /proc/nope"));
	free(out);
	free(plain);
	free(first);
	free(hit);
	free(none);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_hit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_empty_index_twice, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dedup_only, setup, teardown),
		cmocka_unit_test_setup_teardown(test_added_files, setup, teardown),
		cmocka_unit_test_setup_teardown(test_tops, setup_no_repeat, teardown),
		cmocka_unit_test_setup_teardown(test_vanished_file, setup, teardown),
		cmocka_unit_test_setup_teardown(test_tampered, setup, teardown),
		cmocka_unit_test_setup_teardown(test_truncated, setup, teardown),
		cmocka_unit_test_setup_teardown(test_other_repository, setup, teardown),
		cmocka_unit_test_setup_teardown(test_no_cache_writes_nothing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_check_reads_every_file, setup, teardown),
		cmocka_unit_test_setup_teardown(test_image_api, setup, teardown),
		cmocka_unit_test_setup_teardown(test_load_while_writing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_out_of_memory, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cli, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
