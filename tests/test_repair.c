/*
 * tests/test_repair.c — rix_repair_index (backup/repair_index.c) and rix_index_writer over the
 * local backend, without restic (test_cli_repair.c holds restic's side).
 *
 *   test_writer_v1       120000 blobs in a version 1 repository: files of 50000, 50000 and
 *                        20000 blobs, the supersedes list in the last only; loaded back, the same
 *                        entries; a finished writer refuses more
 *   test_repair_cases    one repository repaired again and again, the index compared with the
 *                        one the packs were written with: nothing wrong (entries kept, old files
 *                        removed), no index at all, a blob dropped from the index (the pack
 *                        reindexed: its size differs), every file twice (duplicates count once),
 *                        read_all_packs, a pack whose header is damaged and one that is gone
 *                        (reported, left out, the rest indexed), the options' version
 *   test_repair_lock_lost  the lock lost before: RIX_ELOCKED, nothing written
 *   test_repair_oom      every allocation of a repair failed in turn: RIX_ENOMEM with a message,
 *                        and the repository's index still names every blob it named before
 *   test_repair_faults   the backend failing (EIO) at each operation of a repair in turn: the
 *                        repair stops with it and the index still names every blob it named
 *                        before; once no operation fails, every blob
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "rix/rix.h"
#include "faultbackend.h"
#include "repo_fixture.h"
#include "testutil.h"

/* ---- index entries as sets ------------------------------------------------------------------ */

static void assert_same_entries(const struct entries *a, const struct entries *b, const char *what)
{
	if (a->n != b->n)
		fail_msg("%s: %zu entries, want %zu", what, a->n, b->n);
	for (size_t i = 0; i < a->n; i++)
		if (cmp_pb(&a->v[i], &b->v[i]) != 0)
			fail_msg("%s: entry %zu differs", what, i);
}

/* Whether every entry of sub is in a (both sorted). */
static bool includes(const struct entries *a, const struct entries *sub)
{
	size_t j = 0;
	for (size_t i = 0; i < sub->n; i++) {
		while (j < a->n && cmp_pb(&a->v[j], &sub->v[i]) < 0)
			j++;
		if (j == a->n || cmp_pb(&a->v[j], &sub->v[i]) != 0)
			return false;
	}
	return true;
}

/* a without the entries of pack p. */
static struct entries without_pack(const struct entries *a, const rix_id *p)
{
	struct entries e = { 0 };
	for (size_t i = 0; i < a->n; i++)
		if (memcmp(a->v[i].pack_id.b, p->b, RIX_ID_SIZE) != 0)
			push_entry(&e, &a->v[i]);
	return e;
}

/* ---- the writer ------------------------------------------------------------------------------ */

static void read_index_file(rix_index **idx, rix_repo *r, const rix_id *id)
{
	uint8_t *json;
	size_t n;
	MUST(rix_repo_read_file(&json, &n, r, RIX_FILE_INDEX, id));
	MUST(rix_index_decode(idx, NULL, (const char *)json, n));
	rix_free(json);
}

static void test_writer_v1(void **state)
{
	(void)state;
	char *dir = rix_test_new_dir("rix-repair-writer");
	rix_repo *r = init_repo(dir, 1);
	uint64_t seed = 77;
	rix_id sup[3];
	for (int i = 0; i < 3; i++)
		rix_test_random_id(&sup[i], &seed);
	rix_index_writer *w;
	MUST(rix_index_writer_new(&w, r, sup, 3));
	enum { PACKS = 120, PER = 1000 };
	struct entries want = { 0 };
	static rix_blob blobs[PER];
	for (size_t p = 0; p < PACKS; p++) {
		rix_id pack;
		rix_test_random_id(&pack, &seed);
		uint32_t off = 0;
		for (size_t i = 0; i < PER; i++) {
			rix_test_random_id(&blobs[i].id, &seed);
			blobs[i].type = i % 9 == 0 ? RIX_BLOB_TREE : RIX_BLOB_DATA;
			blobs[i].offset = off;
			blobs[i].length = 40 + (uint32_t)(rix_test_next(&seed) % 5000);
			blobs[i].uncompressed_length = 0;
			off += blobs[i].length;
			push_entry(&want, &(rix_packed_blob){ .id = blobs[i].id, .pack_id = pack, .type = blobs[i].type,
							      .offset = blobs[i].offset, .length = blobs[i].length });
		}
		MUST(rix_index_writer_add(w, &pack, blobs, PER));
		size_t nf;
		rix_index_writer_files(&nf, w);
		/* A file is handed to a writer thread as soon as 50000 blobs wait, and counted once
		 * it is written: at most the full ones, and none is lost by finish (below). */
		assert_true(nf <= (p + 1) / 50);
	}
	MUST(rix_index_writer_finish(w));
	assert_int_equal(rix_index_writer_add(w, &sup[0], blobs, 1), RIX_EINVAL);
	assert_int_equal(rix_index_writer_finish(w), RIX_EINVAL);
	size_t nf;
	const rix_id *files = rix_index_writer_files(&nf, w);
	assert_int_equal(nf, 3);
	assert_int_equal(count_files(r, RIX_FILE_INDEX), 3);
	static const size_t blobs_in[3] = { 50000, 50000, 20000 };
	for (size_t i = 0; i < nf; i++) {
		rix_index *idx;
		read_index_file(&idx, r, &files[i]);
		assert_int_equal(rix_index_count(idx, RIX_BLOB_DATA) + rix_index_count(idx, RIX_BLOB_TREE), blobs_in[i]);
		size_t ns;
		const rix_id *s = rix_index_supersedes(&ns, idx);
		assert_int_equal(ns, i == nf - 1 ? 3 : 0);
		for (size_t k = 0; k < ns; k++) /* the IDs given, in some order */
			assert_true(memcmp(s[k].b, sup[0].b, 32) == 0 || memcmp(s[k].b, sup[1].b, 32) == 0 ||
				    memcmp(s[k].b, sup[2].b, 32) == 0);
		rix_index_free(idx);
	}
	rix_index_writer_free(w);
	rix_repo_free(r);
	qsort(want.v, want.n, sizeof(*want.v), cmp_pb);
	struct entries got = load_entries(dir);
	assert_same_entries(&got, &want, "writer, loaded back");
	free(want.v);
	free(got.v);
	rix_test_free_dir(dir);
}

/* ---- a repository to repair --------------------------------------------------------------- */

/*
 * A version 2 repository in dir: s's blobs saved in three parts, a flush after each (three index
 * files, several packs: the pack size is 4 MiB).
 */
static void make_repo(const char *dir, struct blobs *s, size_t n, uint64_t seed)
{
	rix_repo *r = init_repo(dir, 2);
	make_blobs(s, n, seed);
	for (size_t part = 0; part < 3; part++) {
		for (size_t i = part * n / 3; i < (part + 1) * n / 3; i++)
			MUST(rix_repo_save_blob(NULL, NULL, r, s->type[i], s->data[i], s->len[i]));
		MUST(rix_repo_flush(r));
	}
	rix_repo_free(r);
}

/* The names of the files of type t in dir's repository (at most 64). */
struct names {
	char v[64][65];
	uint64_t size[64];
	size_t n;
};

static int add_name(void *arg, const char *name, uint64_t size)
{
	struct names *x = arg;
	assert_true(x->n < 64);
	x->size[x->n] = size;
	memcpy(x->v[x->n++], name, 65);
	return 0;
}

static struct names list_files(const char *dir, rix_file_type t)
{
	struct names x = { .n = 0 };
	rix_repo *r = open_repo(dir, NULL);
	MUST(rix_backend_list(rix_repo_backend(r), t, add_name, &x));
	rix_repo_free(r);
	return x;
}

static void path_of(char *out, size_t cap, const char *dir, rix_file_type t, const char *name)
{
	if (t == RIX_FILE_PACK)
		snprintf(out, cap, "%s/data/%.2s/%s", dir, name, name);
	else
		snprintf(out, cap, "%s/%s/%s", dir, t == RIX_FILE_INDEX ? "index" : "snapshots", name);
}

static void remove_all_index_files(const char *dir)
{
	struct names x = list_files(dir, RIX_FILE_INDEX);
	char path[600];
	for (size_t i = 0; i < x.n; i++) {
		path_of(path, sizeof(path), dir, RIX_FILE_INDEX, x.v[i]);
		assert_int_equal(unlink(path), 0);
	}
}

/* What a repair said, kept for the assertions. */
struct said {
	char steps[16][64];
	size_t nsteps;
	char notices[64][512];
	size_t nnotices;
	size_t progress_calls, last_done, last_total;
};

static void on_msg(void *arg, rix_repair_msg_kind kind, const char *msg)
{
	struct said *s = arg;
	if (kind == RIX_REPAIR_STEP) {
		assert_true(s->nsteps < 16);
		snprintf(s->steps[s->nsteps++], 64, "%s", msg);
	} else {
		assert_int_equal(kind, RIX_REPAIR_NOTICE);
		assert_true(s->nnotices < 64);
		snprintf(s->notices[s->nnotices++], 512, "%s", msg);
	}
}

static void on_progress(void *arg, size_t done, size_t total)
{
	struct said *s = arg;
	assert_true(done >= 1 && done <= total);
	assert_true(done == s->last_done + 1); /* one call at a time, in order */
	s->progress_calls++;
	s->last_done = done;
	s->last_total = total;
}

/* Repairs dir's repository; fails the test unless it returns 0. */
static rix_repair_report repair(const char *dir, bool read_all, struct said *s)
{
	memset(s, 0, sizeof(*s));
	rix_repo *r = open_repo(dir, NULL);
	rix_lock *l;
	MUST(rix_lock_acquire(&l, r, true));
	rix_repair_options o = RIX_REPAIR_OPTIONS_INIT;
	o.read_all_packs = read_all;
	o.msg = on_msg;
	o.progress = on_progress;
	o.payload = s;
	o.lock = l;
	rix_repair_report rep;
	MUST(rix_repair_index(&rep, r, &o));
	MUST(rix_lock_free(l));
	rix_repo_free(r);
	assert_int_equal(s->progress_calls, rep.packs_added + rep.packs_resized);
	assert_int_equal(rep.packs_read + rep.unreadable_packs, rep.packs_added + rep.packs_resized);
	assert_int_equal(rep.packs_from_index + rep.packs_read + rep.unreadable_packs, rep.packs);
	return rep;
}

static bool said_notice(const struct said *s, const char *want)
{
	for (size_t i = 0; i < s->nnotices; i++)
		if (strncmp(s->notices[i], want, strlen(want)) == 0)
			return true;
	return false;
}

static void assert_steps(const struct said *s, bool loading, bool reading)
{
	const char *want[5];
	size_t n = 0;
	if (loading)
		want[n++] = "loading indexes...";
	want[n++] = "getting pack files to read...";
	if (reading)
		want[n++] = "reading pack files";
	want[n++] = "rebuilding index";
	want[n++] = "deleting obsolete index files";
	assert_int_equal(s->nsteps, n);
	for (size_t i = 0; i < n; i++)
		assert_string_equal(s->steps[i], want[i]);
}

/*
 * A write that fails in the writer's thread reaches the caller: the add or finish that waits for
 * it returns the backend's error with its message, the writer fails from then on, and what it
 * counts as written are files that exist.
 */
static void test_writer_fault(void **state)
{
	(void)state;
	char *dir = rix_test_new_dir("rix-repair-writer-fault");
	rix_repo_free(init_repo(dir, 1));
	rix_backend *inner, *b;
	MUST(rix_backend_local_open(&inner, dir, 0));
	rix_test_fault f;
	rix_test_fault_init(&f);
	MUST(rix_test_fault_backend(&b, inner, &f));
	rix_repo *r;
	MUST(rix_repo_open(&r, b, PW, strlen(PW), &fast));
	rix_test_fault_arm(&f, &(rix_test_fault_plan){ RIX_TEST_FAULT_WRITE, 2, RIX_TEST_FAULT_ONCE, RIX_TEST_FAULT_ENOSPC });
	rix_index_writer *w;
	MUST(rix_index_writer_new(&w, r, NULL, 0));
	uint64_t seed = 78;
	enum { PER = 1000 };
	static rix_blob blobs[PER];
	int rc = 0;
	for (size_t p = 0; p < 400 && rc == 0; p++) {
		rix_id pack;
		rix_test_random_id(&pack, &seed);
		for (size_t i = 0; i < PER; i++) {
			rix_test_random_id(&blobs[i].id, &seed);
			blobs[i] = (rix_blob){ .id = blobs[i].id, .type = RIX_BLOB_DATA, .offset = (uint32_t)i * 100, .length = 100 };
		}
		rc = rix_index_writer_add(w, &pack, blobs, PER);
	}
	if (rc == 0)
		rc = rix_index_writer_finish(w);
	assert_int_equal(rc, RIX_ENOSPC);
	assert_non_null(strstr(rix_error_last(), "injected"));
	assert_int_equal(rix_index_writer_finish(w), RIX_EINVAL);
	size_t nf;
	const rix_id *files = rix_index_writer_files(&nf, w);
	assert_true(nf >= 1); /* the first file was written */
	for (size_t i = 0; i < nf; i++) {
		rix_index *idx;
		read_index_file(&idx, r, &files[i]);
		assert_int_equal(rix_index_count(idx, RIX_BLOB_DATA), 50000);
		rix_index_free(idx);
	}
	/* Nothing is in flight after the error; a file another thread wrote while the failing one
	 * was waited for exists but is not counted: harmless, it names packs that exist. */
	size_t on_disk = count_files(r, RIX_FILE_INDEX);
	assert_true(on_disk >= nf && on_disk <= nf + 4);
	rix_index_writer_free(w); /* would wait for a file in flight, and it would show */
	assert_int_equal(count_files(r, RIX_FILE_INDEX), on_disk);
	rix_repo_free(r);
	rix_test_fault_destroy(&f);
	rix_test_free_dir(dir);
}

static void test_repair_cases(void **state)
{
	(void)state;
	char *dir = rix_test_new_dir("rix-repair");
	static struct blobs s;
	make_repo(dir, &s, 150, 5);
	struct entries all = load_entries(dir);
	assert_int_equal(all.n, 150);
	struct names packs = list_files(dir, RIX_FILE_PACK);
	assert_true(packs.n >= 6);
	struct said said;

	/* Nothing wrong: every entry kept as it was, the three files replaced by one. */
	rix_repair_report rep = repair(dir, false, &said);
	assert_steps(&said, true, false);
	assert_int_equal(said.nnotices, 0);
	assert_int_equal(rep.index_files, 3);
	assert_int_equal(rep.packs, packs.n);
	assert_int_equal(rep.packs_from_index, packs.n);
	assert_int_equal(rep.packs_read, 0);
	assert_int_equal(rep.blobs, 150);
	assert_int_equal(rep.index_files_written, 1);
	assert_int_equal(rep.index_files_removed, 3);
	assert_int_equal(list_files(dir, RIX_FILE_INDEX).n, 1);
	struct entries got = load_entries(dir);
	assert_same_entries(&got, &all, "nothing wrong");
	free(got.v);

	/* No index: every pack's header read. */
	remove_all_index_files(dir);
	rep = repair(dir, false, &said);
	assert_steps(&said, true, true);
	assert_int_equal(rep.index_files, 0);
	assert_int_equal(rep.packs_added, packs.n);
	assert_int_equal(rep.packs_read, packs.n);
	assert_int_equal(said.nnotices, packs.n);
	assert_int_equal(said.last_total, packs.n);
	for (size_t i = 0; i < packs.n; i++) {
		char want[128];
		snprintf(want, sizeof(want), "adding pack file to index %s", packs.v[i]);
		assert_true(said_notice(&said, want));
	}
	got = load_entries(dir);
	assert_same_entries(&got, &all, "no index");
	free(got.v);

	/* A blob dropped from the index: its pack is of another size than the rest imply. */
	size_t k = 7; /* a data blob (every fifth is a tree) */
	assert_int_equal(drop_from_index(dir, &s.id[k]), 1);
	rep = repair(dir, false, &said);
	assert_int_equal(rep.packs_resized, 1);
	assert_int_equal(rep.packs_read, 1);
	assert_int_equal(said.nnotices, 1);
	rix_packed_blob *dropped = NULL;
	for (size_t i = 0; i < all.n; i++)
		if (memcmp(all.v[i].id.b, s.id[k].b, 32) == 0)
			dropped = &all.v[i];
	assert_non_null(dropped);
	char hex[65];
	rix_id_to_hex(hex, &dropped->pack_id);
	unsigned long long size = 0, implied = 0;
	char fmt[160];
	snprintf(fmt, sizeof(fmt), "reindexing pack file %s with unexpected size %%llu instead of %%llu", hex);
	assert_int_equal(sscanf(said.notices[0], fmt, &size, &implied), 2);
	assert_int_equal(size - implied, dropped->length + (dropped->uncompressed_length ? 41 : 37));
	got = load_entries(dir);
	assert_same_entries(&got, &all, "a blob dropped");
	free(got.v);

	/* Every index file twice (another nonce: another name): exact duplicates count once. */
	{
		struct names idx = list_files(dir, RIX_FILE_INDEX);
		rix_repo *r = open_repo(dir, NULL);
		for (size_t i = 0; i < idx.n; i++) {
			rix_id id;
			MUST(rix_id_from_hex(&id, idx.v[i], 64));
			uint8_t *json;
			size_t n;
			MUST(rix_repo_read_file(&json, &n, r, RIX_FILE_INDEX, &id));
			MUST(rix_repo_write_file(NULL, r, RIX_FILE_INDEX, json, n));
			rix_free(json);
		}
		rix_repo_free(r);
		rep = repair(dir, false, &said);
		assert_int_equal(rep.index_files, 2 * idx.n);
		assert_int_equal(rep.index_files_removed, 2 * idx.n);
		assert_int_equal(rep.packs_from_index, packs.n);
		assert_int_equal(said.nnotices, 0);
		got = load_entries(dir);
		assert_same_entries(&got, &all, "duplicates");
		free(got.v);
	}

	/* read_all_packs: the old index is not loaded. */
	rep = repair(dir, true, &said);
	assert_steps(&said, false, true);
	assert_int_equal(rep.index_files, 1);
	assert_int_equal(rep.index_files_removed, 1);
	assert_int_equal(rep.packs_read, packs.n);
	assert_int_equal(rep.packs_added, packs.n);
	got = load_entries(dir);
	assert_same_entries(&got, &all, "read_all_packs");
	free(got.v);

	/*
	 * A pack cut short by a byte (another size than the index implies: its header is read, and
	 * cannot be) and a pack that is gone: both out of the index, said. Then with read_all_packs
	 * (the old index not used), and once more after a bit of the short pack's header flipped.
	 */
	char path[600];
	rix_id bad, gone;
	MUST(rix_id_from_hex(&bad, packs.v[1], 64));
	MUST(rix_id_from_hex(&gone, packs.v[2], 64));
	path_of(path, sizeof(path), dir, RIX_FILE_PACK, packs.v[1]);
	assert_int_equal(truncate(path, (off_t)packs.size[1] - 1), 0);
	path_of(path, sizeof(path), dir, RIX_FILE_PACK, packs.v[2]);
	assert_int_equal(unlink(path), 0);
	for (int round = 0; round < 3; round++) {
		bool read_all = round > 0;
		if (round == 2) {
			path_of(path, sizeof(path), dir, RIX_FILE_PACK, packs.v[1]);
			flip_byte(path, -10); /* inside the sealed header: its MAC fails */
		}
		rep = repair(dir, read_all, &said);
		assert_int_equal(rep.unreadable_packs, 1);
		assert_int_equal(rep.packs_resized, read_all ? 0 : 1);
		assert_int_equal(rep.missing_packs, read_all ? 0 : 1); /* the first repair dropped it */
		assert_int_equal(rep.packs, packs.n - 1);
		char want[160];
		snprintf(want, sizeof(want), "skipped incomplete pack file: %s: ", packs.v[1]);
		assert_true(said_notice(&said, want));
		snprintf(want, sizeof(want), "reindexing pack file %s with unexpected size %llu instead of %llu", packs.v[1],
			 (unsigned long long)packs.size[1] - 1, (unsigned long long)packs.size[1]);
		assert_true(said_notice(&said, want) == !read_all);
		snprintf(want, sizeof(want), "removing not found pack file %s", packs.v[2]);
		assert_true(said_notice(&said, want) == !read_all);
		struct entries a = without_pack(&all, &bad), b = without_pack(&a, &gone);
		got = load_entries(dir);
		assert_same_entries(&got, &b, "damaged and missing packs");
		free(got.v);
		free(a.v);
		free(b.v);
		path_of(path, sizeof(path), dir, RIX_FILE_PACK, packs.v[1]);
		assert_int_equal(access(path, F_OK), 0); /* left where it is */
	}

	/* Options of another version are refused; NULL options and report are the defaults. */
	rix_repo *r = open_repo(dir, NULL);
	rix_repair_options o = RIX_REPAIR_OPTIONS_INIT;
	o.version = 99;
	rix_repair_report r2;
	assert_int_equal(rix_repair_index(&r2, r, &o), RIX_EINVAL);
	assert_non_null(strstr(rix_error_last(), "version"));
	MUST(rix_repair_index(NULL, r, NULL));
	rix_repo_free(r);
	assert_int_equal(list_files(dir, RIX_FILE_INDEX).n, 1);

	free(all.v);
	free_blobs(&s);
	rix_test_free_dir(dir);
}

/* A lock lost before the repair (its refresh failing): RIX_ELOCKED, nothing written or removed. */
static void test_repair_lock_lost(void **state)
{
	(void)state;
	char *dir = rix_test_new_dir("rix-repair-lock");
	static struct blobs s;
	make_repo(dir, &s, 30, 8);
	free_blobs(&s);
	struct names before = list_files(dir, RIX_FILE_INDEX);
	remove_all_index_files(dir);
	rix_repo *r = open_repo(dir, NULL);
	rix_lock *l;
	MUST(rix_lock_acquire(&l, r, true));
	char locks[600], saved[600];
	snprintf(locks, sizeof(locks), "%s/locks", dir);
	snprintf(saved, sizeof(saved), "%s/locks.saved", dir);
	assert_int_equal(rename(locks, saved), 0);
	rix_test_put_file(dir, "locks", "x", 1); /* every refresh fails from now on */
	rix_lock_set_intervals(l, 20, 20, 300);
	int rc = 0;
	for (int i = 0; i < 300 && rc == 0; i++) {
		usleep(10 * 1000);
		rc = rix_lock_check(l);
	}
	assert_int_equal(rc, RIX_ELOCKED);
	rix_repair_options o = RIX_REPAIR_OPTIONS_INIT;
	o.lock = l;
	assert_int_equal(rix_repair_index(NULL, r, &o), RIX_ELOCKED);
	assert_non_null(strstr(rix_error_last(), "lost"));
	assert_int_equal(list_files(dir, RIX_FILE_INDEX).n, 0);
	assert_int_equal(unlink(locks), 0);
	assert_int_equal(rename(saved, locks), 0);
	(void)rix_lock_free(l);
	rix_repo_free(r);
	assert_true(before.n == 3);
	rix_test_free_dir(dir);
}

/* ---- failures --------------------------------------------------------------------------------- */

/*
 * The repository the failure tests start from, each round afresh: blobs in three index files,
 * one of them removed (so that a repair keeps entries and reads headers). before: what its index
 * names; all: every blob (what a repair that succeeds gives).
 */
struct damaged {
	char *template_dir, *dir;
	struct entries before, all;
	rix_repo *r;
	rix_test_fault f;
	int rc;
};

static void damaged_setup(struct damaged *d, const char *prefix, size_t nblobs)
{
	d->template_dir = rix_test_new_dir(prefix);
	d->dir = rix_test_new_dir(prefix);
	static struct blobs s;
	make_repo(d->template_dir, &s, nblobs, 11);
	free_blobs(&s);
	d->all = load_entries(d->template_dir);
	struct names idx = list_files(d->template_dir, RIX_FILE_INDEX);
	assert_int_equal(idx.n, 3);
	char path[600];
	path_of(path, sizeof(path), d->template_dir, RIX_FILE_INDEX, idx.v[1]);
	assert_int_equal(unlink(path), 0);
	d->before = load_entries(d->template_dir);
	assert_true(d->before.n < d->all.n);
}

static void damaged_teardown(struct damaged *d)
{
	free(d->before.v);
	free(d->all.v);
	rix_test_free_dir(d->template_dir);
	rix_test_free_dir(d->dir);
}

/* d->dir as the template: a repair changes index/ only (packs are read, never written). */
static void fresh_copy(struct damaged *d)
{
	char probe[600];
	snprintf(probe, sizeof(probe), "%s/config", d->dir);
	if (access(probe, F_OK) != 0)
		rix_test_sh("rm -rf '%s' && cp -a '%s' '%s'", d->dir, d->template_dir, d->dir);
	else
		rix_test_sh("rm -rf '%s/index' && cp -a '%s/index' '%s/index'", d->dir, d->template_dir, d->dir);
}

/* After a round: the index names what it named before, and everything when the repair worked. */
static void assert_index_whole(struct damaged *d, int rc, const char *what, long round)
{
	struct entries got = load_entries(d->dir);
	/* a new index written in part beside the old one names some entries twice */
	size_t n = 0;
	for (size_t i = 0; i < got.n; i++)
		if (n == 0 || cmp_pb(&got.v[n - 1], &got.v[i]) != 0)
			got.v[n++] = got.v[i];
	got.n = n;
	if (!includes(&got, &d->before))
		fail_msg("%s %ld: the index lost entries (rc %d)", what, round, rc);
	if (rc == 0)
		assert_same_entries(&got, &d->all, what);
	free(got.v);
}

static void oom_setup(void *arg)
{
	struct damaged *d = arg;
	fresh_copy(d);
	rix_repo_options o = fast;
	o.workers = 1; /* the same allocations in the same order each round */
	d->r = open_repo(d->dir, &o);
}

static int oom_run(void *arg)
{
	struct damaged *d = arg;
	return rix_repair_index(NULL, d->r, NULL);
}

static void oom_check(void *arg, const rix_test_oom_round *round)
{
	struct damaged *d = arg;
	rix_repo_free(d->r);
	d->r = NULL;
	assert_index_whole(d, round->rc, "allocation", round->at);
}

static void test_repair_oom(void **state)
{
	(void)state;
	struct damaged d = { 0 };
	damaged_setup(&d, "rix-repair-oom", 24);
	rix_test_oom o = { .what = "repair index", .run = oom_run, .arg = &d, .max = 5000, .setup = oom_setup,
			   .check = oom_check, .live = RIX_TEST_OOM_LIVE_UNCHECKED };
	assert_true(rix_test_oom_run(&o) > 20);
	damaged_teardown(&d);
}

static void test_repair_faults(void **state)
{
	(void)state;
	struct damaged d = { 0 };
	damaged_setup(&d, "rix-repair-faults", 60);
	long n;
	for (n = 1; n < 1000; n++) {
		fresh_copy(&d);
		rix_backend *inner, *b;
		MUST(rix_backend_local_open(&inner, d.dir, 0));
		rix_test_fault_init(&d.f);
		MUST(rix_test_fault_backend(&b, inner, &d.f));
		rix_repo *r;
		MUST(rix_repo_open(&r, b, PW, strlen(PW), &fast));
		rix_test_fault_arm(&d.f, &(rix_test_fault_plan){ RIX_TEST_FAULT_ANY, n, RIX_TEST_FAULT_ONCE,
								  RIX_TEST_FAULT_EIO });
		rix_repair_report rep;
		int rc = rix_repair_index(&rep, r, NULL);
		long injected = rix_test_fault_injected(&d.f);
		if (injected > 0 && rc != RIX_EIO)
			fail_msg("fault at operation %ld: %d (%s), want RIX_EIO", n, rc, rix_error_last());
		if (rc != 0)
			assert_non_null(strstr(rix_error_last(), "injected"));
		rix_repo_free(r);
		rix_test_fault_destroy(&d.f);
		assert_index_whole(&d, rc, "backend fault", n);
		if (injected == 0)
			break;
	}
	assert_true(n > 10); /* the repair made that many operations, each failed once */
	damaged_teardown(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_writer_v1),
		cmocka_unit_test(test_writer_fault),
		cmocka_unit_test(test_repair_cases),
		cmocka_unit_test(test_repair_lock_lost),
		cmocka_unit_test(test_repair_oom),
		cmocka_unit_test(test_repair_faults),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
