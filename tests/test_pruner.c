/*
 * tests/test_pruner.c — the pruner (rix/pruner.h) through the library: option values, the plan's
 * figures on a repository whose content is known blob by blob, the run (what stays loads, what
 * went is gone, the repository checks clean), duplicates, refusals that delete nothing, a disk
 * that fills while repacking, stored copies (rix_repo_load_pack_blobs_stored and
 * rix_repo_save_blob_stored; damaged bytes refused), the form each repacked blob gets (copied as
 * stored, or compressed as restic would), a damaged blob stopping the repack, and allocation
 * failures. The command and restic's view of the
 * result are tested in test_prune.c.
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

static void test_parse(void **state)
{
	(void)state;
	uint64_t v;
	MUST(rix_parse_size(&v, "100"));
	assert_int_equal(v, 100);
	MUST(rix_parse_size(&v, "10k"));
	assert_int_equal(v, 10240);
	MUST(rix_parse_size(&v, "2M"));
	assert_int_equal(v, 2u << 20);
	MUST(rix_parse_size(&v, "3g"));
	assert_int_equal(v, (uint64_t)3 << 30);
	MUST(rix_parse_size(&v, "1T"));
	assert_int_equal(v, (uint64_t)1 << 40);
	MUST(rix_parse_size(&v, "7b"));
	assert_int_equal(v, 7);
	assert_int_equal(rix_parse_size(&v, ""), RIX_EINVAL);
	assert_int_equal(rix_parse_size(&v, "k"), RIX_EINVAL);
	assert_int_equal(rix_parse_size(&v, "1x"), RIX_EINVAL);
	assert_int_equal(rix_parse_size(&v, "-1"), RIX_EINVAL);
	assert_int_equal(rix_parse_size(&v, "99999999999999999999"), RIX_EINVAL);
	assert_int_equal(rix_parse_size(&v, "99999999999T"), RIX_EINVAL);

	rix_prune_options o = RIX_PRUNE_OPTIONS_INIT;
	assert_int_equal(o.max_unused, RIX_PRUNE_UNUSED_PERCENT);
	assert_true(o.max_unused_percent == 5);
	assert_true(o.max_repack_bytes == UINT64_MAX);
	MUST(rix_prune_parse_max_unused(&o, " 12.5% "));
	assert_int_equal(o.max_unused, RIX_PRUNE_UNUSED_PERCENT);
	assert_true(o.max_unused_percent == 12.5);
	MUST(rix_prune_parse_max_unused(&o, "unlimited"));
	assert_int_equal(o.max_unused, RIX_PRUNE_UNUSED_UNLIMITED);
	MUST(rix_prune_parse_max_unused(&o, "5M"));
	assert_int_equal(o.max_unused, RIX_PRUNE_UNUSED_BYTES);
	assert_int_equal(o.max_unused_bytes, 5u << 20);
	MUST(rix_prune_parse_max_unused(&o, "0"));
	assert_int_equal(o.max_unused_bytes, 0);
	assert_int_equal(rix_prune_parse_max_unused(&o, "100%"), RIX_EINVAL);
	assert_non_null(strstr(rix_error_last(), "below 100%"));
	assert_int_equal(rix_prune_parse_max_unused(&o, "-1%"), RIX_EINVAL);
	assert_int_equal(rix_prune_parse_max_unused(&o, "x%"), RIX_EINVAL);
	assert_int_equal(rix_prune_parse_max_unused(&o, ""), RIX_EINVAL);
	assert_int_equal(rix_prune_parse_max_unused(&o, "lots"), RIX_EINVAL);
}

/* The repository of a test: data blobs d[0..40) of 60-100 KB, and trees:
 *   snapshot A: root {f0: d0..d9, sub/ -> {f1: d10..d19}}
 *   snapshot B: root {f2: d20..d29}
 *   d30..d39 named by no tree */
struct fix {
	char *work;
	char repo[4300];
	uint8_t *data[40];
	size_t len[40];
	rix_id d[40];
	rix_id root_a, sub_a, root_b;
	rix_id snap_a, snap_b;
};

static void file_node(rix_node *n, const char *name, const rix_id *content, size_t k)
{
	memset(n, 0, sizeof(*n));
	n->name = name;
	n->name_len = strlen(name);
	n->type = RIX_NODE_FILE;
	n->mode = 0644;
	n->content = content;
	n->content_len = k;
}

static void snapshot_of(rix_repo *r, const rix_id *tree, int sec, rix_id *id)
{
	char hex[65], json[400];
	rix_id_to_hex(hex, tree);
	snprintf(json, sizeof(json),
		 "{\"time\":\"2024-05-06T07:08:%02d.5Z\",\"tree\":\"%s\",\"paths\":[\"/data\"],\"hostname\":\"h\","
		 "\"username\":\"u\"}",
		 sec, hex);
	MUST(rix_repo_write_file(id, r, RIX_FILE_SNAPSHOT, json, strlen(json)));
}

static void make_fix(struct fix *f)
{
	memset(f, 0, sizeof(*f));
	f->work = rix_test_new_dir("rix-pruner");
	snprintf(f->repo, sizeof(f->repo), "%s/repo", f->work);
	assert_int_equal(mkdir(f->repo, 0700), 0);
	rix_repo *r = init_repo(f->repo, 2);
	MUST(rix_repo_load_index(NULL, r, NULL, NULL));
	uint64_t st = 42;
	for (int i = 0; i < 40; i++) {
		f->len[i] = 60000 + (size_t)(rix_test_next(&st) % 40000);
		f->data[i] = malloc(f->len[i]);
		rix_test_fill_random(f->data[i], f->len[i], &st);
		MUST(rix_repo_save_blob(&f->d[i], NULL, r, RIX_BLOB_DATA, f->data[i], f->len[i]));
	}
	rix_node n[2];
	file_node(&n[0], "f1", &f->d[10], 10);
	store_tree(&f->sub_a, r, n, 1);
	file_node(&n[0], "f0", &f->d[0], 10);
	memset(&n[1], 0, sizeof(n[1]));
	n[1].name = "sub";
	n[1].name_len = 3;
	n[1].type = RIX_NODE_DIR;
	n[1].mode = 0755 | 0x80000000u;
	n[1].subtree = &f->sub_a;
	store_tree(&f->root_a, r, n, 2);
	file_node(&n[0], "f2", &f->d[20], 10);
	store_tree(&f->root_b, r, n, 1);
	MUST(rix_repo_flush(r));
	snapshot_of(r, &f->root_a, 1, &f->snap_a);
	snapshot_of(r, &f->root_b, 2, &f->snap_b);
	rix_repo_free(r);
}

static void free_fix(struct fix *f)
{
	for (int i = 0; i < 40; i++)
		free(f->data[i]);
	rix_test_free_dir(f->work);
}

static rix_repo *open_loaded(const char *dir)
{
	rix_repo *r = open_repo(dir, NULL);
	MUST(rix_repo_load_index(NULL, r, NULL, NULL));
	return r;
}

/* Every file of the repository, as "type/name size" lines: what a refused prune must not change. */
static char *listing(const char *dir)
{
	char *out = NULL;
	size_t n;
	assert_int_equal(rix_test_run(&out, &n, "cd '%s' && find . -type f -printf '%%p %%s\\n' | sort", dir), 0);
	return out;
}

static int plan(rix_prune_plan **p, rix_repo *r, rix_prune_options *o)
{
	return rix_prune_plan_new(p, r, o);
}

static void test_plan_and_run(void **state)
{
	(void)state;
	struct fix f;
	make_fix(&f);
	rix_repo *r = open_loaded(f.repo);
	/* Everything is used: 40 data blobs, 30 used; nothing to do at the default 5%? d30..39 are
	 * unused: 10 of 40 blobs, more than 5%: the data pack is repacked. */
	rix_prune_options o = RIX_PRUNE_OPTIONS_INIT;
	rix_prune_plan *p;
	MUST(plan(&p, r, &o));
	const rix_prune_stats *s = rix_prune_plan_stats(p);
	assert_int_equal(s->snapshots, 2);
	assert_int_equal(s->trees, 3);
	assert_int_equal(s->blobs.used, 33);
	assert_int_equal(s->blobs.unused, 10);
	assert_int_equal(s->blobs.duplicate, 0);
	uint64_t unused = 0;
	for (int i = 30; i < 40; i++) {
		rix_packed_blob pb;
		MUST(rix_master_index_lookup(&pb, rix_repo_master_index(r), RIX_BLOB_DATA, &f.d[i]));
		unused += pb.length;
	}
	assert_int_equal(s->size.unused, unused);
	assert_int_equal(s->size.unref, 0);
	rix_prune_plan_free(p);
	rix_repo_free(r);

	/* Snapshot B goes: its tree and d20..d29 become unused too; with max_unused 0 every pack
	 * holding an unused blob is repacked or removed. */
	r = open_loaded(f.repo);
	MUST(rix_snapshot_remove(r, &f.snap_b));
	o.max_unused = RIX_PRUNE_UNUSED_BYTES;
	o.max_unused_bytes = 0;
	o.rewrite_batch = 3; /* a pass over the index for every pack or so */
	MUST(plan(&p, r, &o));
	s = rix_prune_plan_stats(p);
	assert_int_equal(s->snapshots, 1);
	assert_int_equal(s->trees, 2);
	assert_int_equal(s->blobs.used, 22);
	assert_int_equal(s->blobs.unused, 21);
	assert_int_equal(s->blobs.repackrm + s->blobs.remove, 21);
	size_t n;
	assert_non_null(rix_prune_plan_packs(&n, p, RIX_PRUNE_REPACK));
	assert_true(n >= 1);
	MUST(rix_prune_run(p));
	assert_int_equal(rix_prune_run(p), RIX_EINVAL); /* once */
	s = rix_prune_plan_stats(p);
	assert_true(s->packs_written >= 1);
	assert_true(s->index_written >= 1);
	assert_true(s->index_removed >= 1);
	assert_true(s->packs_removed >= 1);
	assert_int_equal(s->remove_failures, 0);
	rix_prune_plan_free(p);
	rix_repo_free(r);

	/* What stays loads, whole; what went is gone; the repository checks clean. */
	r = open_loaded(f.repo);
	for (int i = 0; i < 40; i++) {
		uint8_t *got;
		size_t len;
		int rc = rix_repo_load_blob(&got, &len, r, RIX_BLOB_DATA, &f.d[i]);
		if (i < 20) {
			MUST(rc);
			assert_int_equal(len, f.len[i]);
			assert_memory_equal(got, f.data[i], len);
			rix_free(got);
		} else {
			assert_int_equal(rc, RIX_ENOTFOUND);
		}
	}
	assert_true(rix_master_index_has(rix_repo_master_index(r), RIX_BLOB_TREE, &f.root_a));
	assert_false(rix_master_index_has(rix_repo_master_index(r), RIX_BLOB_TREE, &f.root_b));
	assert_int_equal(rix_master_index_count(rix_repo_master_index(r), RIX_BLOB_DATA), 20);
	rix_repo_free(r);
	struct lines l;
	rix_check_report rep = run_check(f.repo, 1, 0, &l);
	assert_int_equal(rep.orphaned_packs, 0);
	assert_int_equal(rep.duplicate_blobs, 0);

	/* Again: nothing left to do. */
	r = open_loaded(f.repo);
	MUST(plan(&p, r, &o));
	s = rix_prune_plan_stats(p);
	assert_int_equal(s->blobs.unused, 0);
	assert_int_equal(s->packs.repack + s->packs.remove + s->packs.unref, 0);
	char *before = listing(f.repo);
	MUST(rix_prune_run(p));
	char *after = listing(f.repo);
	assert_string_equal(before, after); /* no rewrite when nothing goes */
	free(before);
	free(after);
	rix_prune_plan_free(p);
	rix_repo_free(r);
	free_fix(&f);
}

static void test_duplicates_and_unreferenced(void **state)
{
	(void)state;
	struct fix f;
	make_fix(&f);
	/* d0..d4 stored twice (a second copy in another pack), and a pack no index names */
	rix_repo *r = open_loaded(f.repo);
	for (int i = 0; i < 5; i++)
		MUST(rix_repo_save_blob_copy(NULL, NULL, r, RIX_BLOB_DATA, f.data[i], f.len[i]));
	MUST(rix_repo_flush(r));
	rix_repo_free(r);
	char orphan[4400];
	snprintf(orphan, sizeof(orphan), "%s/data/ab", f.repo);
	mkdir(orphan, 0700);
	rix_test_sh("cp \"$(ls %s/data/*/* | head -1)\" %s/data/ab/abababababababababababababababababababababababababababababababab",
		    f.repo, f.repo);
	r = open_loaded(f.repo);
	rix_prune_options o = RIX_PRUNE_OPTIONS_INIT;
	rix_prune_plan *p;
	MUST(plan(&p, r, &o));
	const rix_prune_stats *s = rix_prune_plan_stats(p);
	assert_int_equal(s->blobs.used, 33);
	assert_int_equal(s->blobs.duplicate, 5);
	assert_int_equal(s->packs.unref, 1);
	assert_true(s->size.unref > 0);
	rix_prune_plan_free(p);
	o.max_unused = RIX_PRUNE_UNUSED_BYTES;
	o.max_unused_bytes = 0;
	MUST(plan(&p, r, &o));
	MUST(rix_prune_run(p));
	rix_prune_plan_free(p);
	rix_repo_free(r);
	struct lines l;
	rix_check_report rep = run_check(f.repo, 1, 0, &l);
	assert_int_equal(rep.duplicate_blobs, 0);
	assert_int_equal(rep.orphaned_packs, 0);
	r = open_loaded(f.repo);
	for (int i = 0; i < 30; i++)
		assert_true(rix_master_index_has(rix_repo_master_index(r), RIX_BLOB_DATA, &f.d[i]));
	assert_int_equal(rix_master_index_count(rix_repo_master_index(r), RIX_BLOB_DATA), 30);
	rix_repo_free(r);
	free_fix(&f);
}

/* The pack file that holds data blob id. */
static void pack_path(char *out, size_t cap, const char *repo, rix_repo *r, const rix_id *id)
{
	rix_packed_blob pb;
	MUST(rix_master_index_lookup(&pb, rix_repo_master_index(r), RIX_BLOB_DATA, id));
	char hex[65];
	rix_id_to_hex(hex, &pb.pack_id);
	snprintf(out, cap, "%s/data/%.2s/%s", repo, hex, hex);
}

static void refused(struct fix *f, int want, const char *words)
{
	char *before = listing(f->repo);
	rix_repo *r = open_loaded(f->repo);
	rix_prune_options o = RIX_PRUNE_OPTIONS_INIT;
	o.max_unused = RIX_PRUNE_UNUSED_BYTES;
	rix_prune_plan *p = NULL;
	int rc = plan(&p, r, &o);
	if (rc != want)
		fail_msg("prune planned with %d (%s), want %d", rc, rix_error_last(), want);
	assert_null(p);
	if (strstr(rix_error_last(), words) == NULL)
		fail_msg("the message \"%s\" does not say \"%s\"", rix_error_last(), words);
	rix_repo_free(r);
	char *after = listing(f->repo);
	assert_string_equal(before, after);
	free(before);
	free(after);
}

static void test_refusals(void **state)
{
	(void)state;
	struct fix f;
	make_fix(&f);
	char path[4400], saved[4500];
	rix_repo *r = open_loaded(f.repo);
	pack_path(path, sizeof(path), f.repo, r, &f.d[0]);
	rix_repo_free(r);
	snprintf(saved, sizeof(saved), "%s/saved-pack", f.work);

	/* a needed pack missing */
	assert_int_equal(rename(path, saved), 0);
	refused(&f, RIX_ECORRUPT, "packs from index missing in repo");
	/* a needed pack of another size */
	rix_test_sh("cp '%s' '%s' && echo x >> '%s'", saved, path, path);
	refused(&f, RIX_ECORRUPT, "repair index");
	rix_test_sh("cp '%s' '%s'", saved, path);

	/* a snapshot whose tree is in no index */
	r = open_loaded(f.repo);
	rix_id ghost, snap;
	memset(&ghost, 0x5a, sizeof(ghost));
	snapshot_of(r, &ghost, 3, &snap);
	rix_repo_free(r);
	refused(&f, RIX_ENOTFOUND, "unable to load a tree");
	r = open_loaded(f.repo);
	MUST(rix_snapshot_remove(r, &snap));
	rix_repo_free(r);

	/* a used data blob in no index */
	assert_true(drop_from_index(f.repo, &f.d[3]) >= 1);
	refused(&f, RIX_ECORRUPT, "index is not complete");
	free_fix(&f);
}

static void test_disk_full_while_repacking(void **state)
{
	(void)state;
	struct fix f;
	make_fix(&f);
	rix_repo *r = open_loaded(f.repo);
	MUST(rix_snapshot_remove(r, &f.snap_b));
	rix_repo_free(r);
	char *before = listing(f.repo);
	rix_test_fault ft;
	rix_test_fault_init(&ft);
	rix_backend *inner, *b;
	MUST(rix_backend_local_open(&inner, f.repo, false));
	MUST(rix_test_fault_backend(&b, inner, &ft));
	MUST(rix_repo_open(&r, b, PW, strlen(PW), &fast));
	MUST(rix_repo_load_index(NULL, r, NULL, NULL));
	rix_prune_options o = RIX_PRUNE_OPTIONS_INIT;
	o.max_unused = RIX_PRUNE_UNUSED_BYTES;
	rix_prune_plan *p;
	MUST(plan(&p, r, &o));
	assert_true(rix_prune_plan_stats(p)->packs.repack > 0);
	rix_test_fault_arm(&ft, &(rix_test_fault_plan){ RIX_TEST_FAULT_WRITE, 1, RIX_TEST_FAULT_FROM, RIX_TEST_FAULT_ENOSPC });
	assert_int_equal(rix_prune_run(p), RIX_ENOSPC);
	assert_int_equal(rix_test_fault_count(&ft, RIX_TEST_FAULT_REMOVE), 0); /* nothing removed */
	rix_prune_plan_free(p);
	rix_repo_free(r);
	rix_test_fault_destroy(&ft);
	char *after = listing(f.repo);
	assert_string_equal(before, after);
	free(before);
	free(after);
	/* and a prune with room finishes the job */
	r = open_loaded(f.repo);
	MUST(plan(&p, r, &o));
	MUST(rix_prune_run(p));
	rix_prune_plan_free(p);
	rix_repo_free(r);
	struct lines l;
	run_check(f.repo, 1, 0, &l);
	free_fix(&f);
}

/* ---- stored copies: rix_repo_load_pack_blobs_stored, rix_repo_save_blob_stored ----------------- */

struct copier {
	rix_repo *r;
	const struct blobs *bl;
	const rix_blob *hdr;
	const uint8_t *pack; /* the pack file's bytes */
	int calls, errors, copied;
	size_t bad;         /* the blob whose bytes were damaged (SIZE_MAX: none) */
	int bad_code;
};

static size_t blob_index(const struct blobs *bl, rix_blob_type t, const rix_id *id)
{
	for (size_t k = 0; k < bl->n; k++)
		if (bl->type[k] == t && memcmp(&bl->id[k], id, sizeof(*id)) == 0)
			return k;
	fail_msg("a blob that was not saved");
	return SIZE_MAX;
}

/* Each blob: verified plaintext and the pack's bytes for it; copied as stored. */
static int copy_blob(void *payload, size_t i, int code, const uint8_t *data, size_t n, const uint8_t *stored)
{
	struct copier *c = payload;
	const rix_blob *b = &c->hdr[i];
	c->calls++;
	if (code != 0) {
		assert_null(data);
		assert_null(stored);
		c->errors++;
		assert_int_equal(i, c->bad);
		c->bad_code = code;
		return 0;
	}
	assert_true(i != c->bad);
	assert_non_null(stored);
	assert_memory_equal(stored, c->pack + b->offset, b->length); /* the pack's bytes, unchanged */
	size_t k = blob_index(c->bl, b->type, &b->id);
	assert_int_equal(n, c->bl->len[k]);
	if (n > 0)
		assert_memory_equal(data, c->bl->data[k], n);
	MUST(rix_repo_save_blob_stored(c->r, b, stored));
	c->copied++;
	return 0;
}

/* The plaintext read back from a copy's pack must be the blob's. */
static int same_blob(void *payload, size_t i, int code, const uint8_t *data, size_t n)
{
	struct copier *c = payload;
	MUST(code);
	size_t k = blob_index(c->bl, c->hdr[i].type, &c->hdr[i].id);
	assert_int_equal(n, c->bl->len[k]);
	if (n > 0)
		assert_memory_equal(data, c->bl->data[k], n);
	c->calls++;
	return 0;
}

static char *pack_file(char *out, size_t cap, const char *repo, const rix_id *pack)
{
	char hex[65];
	rix_id_to_hex(hex, pack);
	snprintf(out, cap, "%s/data/%.2s/%s", repo, hex, hex);
	return out;
}

static bool listed(const rix_id *ids, size_t n, const rix_id *id)
{
	for (size_t i = 0; i < n; i++)
		if (memcmp(&ids[i], id, sizeof(*id)) == 0)
			return true;
	return false;
}

/*
 * Every blob of every pack (empty, compressible, not, trees; compressed and not) copied as
 * stored into new packs: the new header entries and bytes are the old ones, the copies read back
 * as the blobs, and the repository checks (read-data) with each blob twice; in version 1 and 2.
 * Then a byte of one blob damaged: the loader gives that blob an error and no stored form (so
 * nothing of it can be copied), the others as before. And what the save refuses.
 */
static void test_stored_copy(void **state)
{
	(void)state;
	for (int version = 1; version <= 2; version++) {
		char *work = rix_test_new_dir("rix-pruner-stored");
		char repo[4300], path[4400];
		snprintf(repo, sizeof(repo), "%s/repo", work);
		assert_int_equal(mkdir(repo, 0700), 0);
		rix_repo *r = init_repo(repo, version);
		MUST(rix_repo_load_index(NULL, r, NULL, NULL));
		struct blobs bl;
		make_blobs(&bl, 60, 11);
		save_all(r, &bl);
		MUST(rix_repo_flush(r));
		rix_repo_free(r);

		r = open_loaded(repo);
		rix_id *old;
		size_t nold, compressed = 0;
		MUST(rix_repo_list_ids(&old, &nold, r, RIX_FILE_PACK));
		int total = 0;
		for (size_t p = 0; p < nold; p++) {
			rix_blob *hdr;
			size_t cnt, len;
			MUST(rix_repo_read_pack_header(&hdr, &cnt, r, &old[p]));
			uint8_t *bytes = rix_test_read_file(pack_file(path, sizeof(path), repo, &old[p]), &len);
			assert_non_null(bytes);
			struct copier c = { .r = r, .bl = &bl, .hdr = hdr, .pack = bytes, .bad = SIZE_MAX };
			MUST(rix_repo_load_pack_blobs_stored(r, &old[p], hdr, cnt, copy_blob, &c));
			assert_int_equal(c.calls, (int)cnt);
			assert_int_equal(c.copied, (int)cnt);
			total += c.copied;
			for (size_t i = 0; i < cnt; i++)
				compressed += hdr[i].uncompressed_length != 0;
			free(bytes);
			rix_free(hdr);
		}
		assert_int_equal(total, 60);
		if (version == 2)
			assert_true(compressed >= 12); /* the trees and the compressible data */
		else
			assert_int_equal(compressed, 0);
		MUST(rix_repo_flush(r));
		rix_repo_free(r);

		/* The new packs: the same entries and bytes, the same plaintexts. */
		r = open_loaded(repo);
		rix_id *now;
		size_t nnow;
		MUST(rix_repo_list_ids(&now, &nnow, r, RIX_FILE_PACK));
		assert_true(nnow > nold);
		int copies = 0;
		for (size_t p = 0; p < nnow; p++) {
			if (listed(old, nold, &now[p]))
				continue;
			rix_blob *hdr;
			size_t cnt, len;
			MUST(rix_repo_read_pack_header(&hdr, &cnt, r, &now[p]));
			uint8_t *bytes = rix_test_read_file(pack_file(path, sizeof(path), repo, &now[p]), &len);
			assert_non_null(bytes);
			for (size_t i = 0; i < cnt; i++) {
				rix_packed_blob all[4];
				size_t m = rix_master_index_lookup_all(all, 4, rix_repo_master_index(r), hdr[i].type, &hdr[i].id);
				assert_int_equal(m, 2);
				const rix_packed_blob *first = memcmp(&all[0].pack_id, &now[p], sizeof(now[p])) != 0 ? &all[0] : &all[1];
				assert_true(listed(old, nold, &first->pack_id));
				assert_int_equal(hdr[i].length, first->length);
				assert_int_equal(hdr[i].uncompressed_length, first->uncompressed_length);
				size_t olen;
				uint8_t *obytes = rix_test_read_file(pack_file(path, sizeof(path), repo, &first->pack_id), &olen);
				assert_non_null(obytes);
				assert_memory_equal(bytes + hdr[i].offset, obytes + first->offset, hdr[i].length);
				free(obytes);
			}
			struct copier c = { .bl = &bl, .hdr = hdr };
			MUST(rix_repo_load_pack_blobs(r, &now[p], hdr, cnt, same_blob, &c));
			assert_int_equal(c.calls, (int)cnt);
			copies += c.calls;
			free(bytes);
			rix_free(hdr);
		}
		assert_int_equal(copies, 60);
		/* The buffers those loads kept are given back, once; loads go on afterwards. */
		assert_true(rix_repo_release_buffers(r) > 0);
		assert_int_equal(rix_repo_release_buffers(r), 0);
		{
			rix_blob *hdr;
			size_t cnt;
			MUST(rix_repo_read_pack_header(&hdr, &cnt, r, &now[0]));
			struct copier c = { .bl = &bl, .hdr = hdr };
			MUST(rix_repo_load_pack_blobs(r, &now[0], hdr, cnt, same_blob, &c));
			assert_int_equal(c.calls, (int)cnt);
			rix_free(hdr);
		}
		rix_free(now);
		rix_repo_free(r);
		struct lines l;
		rix_check_report rep = run_check(repo, 1, 0, &l);
		assert_int_equal(rep.duplicate_blobs, 60);

		/* A damaged byte in the middle of one blob: refused, no stored form given. */
		r = open_loaded(repo);
		rix_blob *hdr;
		size_t cnt, len;
		MUST(rix_repo_read_pack_header(&hdr, &cnt, r, &old[0]));
		size_t bad = cnt / 2;
		while (hdr[bad].length < 64)
			bad = (bad + 1) % cnt;
		flip_byte(pack_file(path, sizeof(path), repo, &old[0]), (long)(hdr[bad].offset + hdr[bad].length / 2));
		uint8_t *bytes = rix_test_read_file(path, &len);
		assert_non_null(bytes);
		struct copier c = { .r = r, .bl = &bl, .hdr = hdr, .pack = bytes, .bad = bad };
		MUST(rix_repo_load_pack_blobs_stored(r, &old[0], hdr, cnt, copy_blob, &c));
		assert_int_equal(c.calls, (int)cnt);
		assert_int_equal(c.errors, 1);
		assert_int_equal(c.bad_code, RIX_EAUTH);
		free(bytes);

		/* What the save refuses. */
		rix_blob b = hdr[0];
		uint8_t junk[64] = { 0 };
		b.length = 31;
		assert_int_equal(rix_repo_save_blob_stored(r, &b, junk), RIX_EINVAL);
		b.length = 64;
		b.type = (rix_blob_type)7;
		assert_int_equal(rix_repo_save_blob_stored(r, &b, junk), RIX_EINVAL);
		b.type = RIX_BLOB_DATA;
		b.uncompressed_length = 100;
		if (version == 1)
			assert_int_equal(rix_repo_save_blob_stored(r, &b, junk), RIX_EINVAL);
		b.uncompressed_length = (uint32_t)RIX_BLOB_MAX + 1;
		assert_int_equal(rix_repo_save_blob_stored(r, &b, junk), RIX_EINVAL);
		rix_free(hdr);
		rix_repo_free(r); /* nothing flushed */
		rix_free(old);
		free_blobs(&bl);
		rix_test_free_dir(work);
	}
}

/*
 * A repository of that version whose blobs are saved with mode in *work: 24 data blobs of 30-60
 * KB (every other one half one byte: compressible) in a file of a snapshot's tree, 8 more and a
 * second tree named by nothing, so that with max_unused 0 the data pack and the tree pack are
 * repacked.
 */
static void make_forms_repo(char **work, char *repo, size_t cap, int version, rix_compression mode)
{
	*work = rix_test_new_dir("rix-pruner-forms");
	snprintf(repo, cap, "%s/repo", *work);
	assert_int_equal(mkdir(repo, 0700), 0);
	rix_repo_free(init_repo(repo, version));
	rix_repo_options o = fast;
	o.compression = mode;
	rix_repo *r = open_repo(repo, &o);
	MUST(rix_repo_load_index(NULL, r, NULL, NULL));
	uint64_t st = 99;
	rix_id d[32];
	for (int i = 0; i < 32; i++) {
		size_t n = 30000 + (size_t)(rix_test_next(&st) % 30000);
		uint8_t *buf = malloc(n);
		rix_test_fill_random(buf, n, &st);
		if (i % 2 == 0)
			memset(buf, 'z', n / 2);
		MUST(rix_repo_save_blob(&d[i], NULL, r, RIX_BLOB_DATA, buf, n));
		free(buf);
	}
	rix_node nd;
	rix_id used, unused, snap;
	file_node(&nd, "f", &d[0], 24);
	store_tree(&used, r, &nd, 1);
	file_node(&nd, "g", &d[24], 8);
	store_tree(&unused, r, &nd, 1);
	MUST(rix_repo_flush(r));
	snapshot_of(r, &used, 1, &snap);
	rix_repo_free(r);
}

/* Prunes repo (max_unused 0) saving with mode: how each repacked blob was written. */
static struct form_diff prune_forms(const char *repo, rix_compression mode, bool repack_uncompressed)
{
	struct forms before = load_forms(repo);
	rix_repo_options ro = fast;
	ro.compression = mode;
	rix_repo *r = open_repo(repo, &ro);
	MUST(rix_repo_load_index(NULL, r, NULL, NULL));
	rix_prune_options o = RIX_PRUNE_OPTIONS_INIT;
	o.max_unused = RIX_PRUNE_UNUSED_BYTES;
	o.max_unused_bytes = 0;
	o.repack_uncompressed = repack_uncompressed;
	rix_prune_plan *p;
	MUST(plan(&p, r, &o));
	assert_true(rix_prune_plan_stats(p)->packs.repack >= 1);
	MUST(rix_prune_run(p));
	rix_prune_plan_free(p);
	rix_repo_free(r);
	struct lines l;
	rix_check_report rep = run_check(repo, 1, 0, &l);
	assert_int_equal(rep.duplicate_blobs, 0);
	struct forms after = load_forms(repo);
	struct form_diff d = compare_forms(&before, &after);
	free_forms(&before);
	free_forms(&after);
	return d;
}

/*
 * Which form a repacked blob gets: compressed blobs are copied as stored (here made at max's
 * level and pruned with auto: compressing them again would give other frames, and new IVs
 * anyway), and so are version 1 blobs and uncompressed data blobs where compression is off; an
 * uncompressed data blob where compression is on is saved again from its plaintext, and with
 * repack_uncompressed a compressible one is compressed, as restic 0.14's repack compresses it.
 */
static void test_repack_forms(void **state)
{
	(void)state;
	char *work, repo[4300];
	/* version 2, made with max, pruned with auto: 12 compressible data blobs and the tree copied
	 * as stored; the 12 incompressible ones (stored uncompressed) saved again: uncompressed. */
	make_forms_repo(&work, repo, sizeof(repo), 2, RIX_COMPRESSION_MAX);
	struct form_diff d = prune_forms(repo, RIX_COMPRESSION_AUTO, false);
	assert_int_equal(d.copied_z, 13);
	assert_int_equal(d.recoded_z, 0);
	assert_int_equal(d.copied_u, 0);
	assert_int_equal(d.recoded_u + d.compressed_now, 12);
	rix_test_free_dir(work);

	/* version 2, compression off: the data blobs uncompressed, copied as they are; the tree
	 * (compressed whatever the mode) too. */
	make_forms_repo(&work, repo, sizeof(repo), 2, RIX_COMPRESSION_OFF);
	d = prune_forms(repo, RIX_COMPRESSION_OFF, false);
	assert_int_equal(d.copied_u, 24);
	assert_int_equal(d.copied_z, 1);
	assert_int_equal(d.recoded_z + d.recoded_u + d.compressed_now, 0);
	/* then --repack-uncompressed with compression on: the pack of uncompressed data blobs is
	 * repacked though it is all used, and the compressible ones are compressed */
	d = prune_forms(repo, RIX_COMPRESSION_AUTO, true);
	assert_int_equal(d.compressed_now, 12);
	assert_int_equal(d.copied_u + d.copied_z + d.recoded_z, 0);
	assert_int_equal(d.recoded_u, 12);
	rix_test_free_dir(work);

	/* version 1: nothing is compressed, every blob copied as stored */
	make_forms_repo(&work, repo, sizeof(repo), 1, RIX_COMPRESSION_AUTO);
	d = prune_forms(repo, RIX_COMPRESSION_AUTO, false);
	assert_int_equal(d.copied_u, 25);
	assert_int_equal(d.copied_z + d.recoded_z + d.recoded_u + d.compressed_now, 0);
	rix_test_free_dir(work);
}

/*
 * A byte of a used blob damaged (its only copy) in a pack to repack: the run stops with the
 * blob's error before removing anything, and no pack but the damaged one holds the blob (the
 * damaged bytes were not copied); the other files stay.
 */
static void test_repack_damaged(void **state)
{
	(void)state;
	struct fix f;
	make_fix(&f);
	rix_repo *r = open_loaded(f.repo);
	MUST(rix_snapshot_remove(r, &f.snap_b));
	rix_packed_blob pb;
	MUST(rix_master_index_lookup(&pb, rix_repo_master_index(r), RIX_BLOB_DATA, &f.d[0]));
	rix_repo_free(r);
	char path[4400];
	flip_byte(pack_file(path, sizeof(path), f.repo, &pb.pack_id), (long)(pb.offset + pb.length / 2));
	char *before = listing(f.repo);
	r = open_loaded(f.repo);
	rix_prune_options o = RIX_PRUNE_OPTIONS_INIT;
	o.max_unused = RIX_PRUNE_UNUSED_BYTES;
	rix_prune_plan *p;
	MUST(plan(&p, r, &o));
	size_t n;
	const rix_id *rp = rix_prune_plan_packs(&n, p, RIX_PRUNE_REPACK);
	assert_true(listed(rp, n, &pb.pack_id));
	int rc = rix_prune_run(p);
	if (rc != RIX_EAUTH)
		fail_msg("prune ran to %d (%s) over a damaged blob", rc, rix_error_last());
	rix_prune_plan_free(p);
	rix_id *packs;
	MUST(rix_repo_list_ids(&packs, &n, r, RIX_FILE_PACK));
	int holders = 0;
	for (size_t i = 0; i < n; i++) {
		rix_blob *hdr;
		size_t cnt;
		MUST(rix_repo_read_pack_header(&hdr, &cnt, r, &packs[i]));
		for (size_t k = 0; k < cnt; k++)
			holders += memcmp(&hdr[k].id, &f.d[0], sizeof(rix_id)) == 0;
		rix_free(hdr);
	}
	assert_int_equal(holders, 1);
	rix_free(packs);
	rix_repo_free(r);
	/* every file of before is still there, as it was */
	char *after = listing(f.repo);
	for (char *line = strtok(before, "\n"); line != NULL; line = strtok(NULL, "\n"))
		if (strstr(after, line) == NULL)
			fail_msg("prune stopped by a damaged blob, but \"%s\" changed", line);
	free(before);
	free(after);
	free_fix(&f);
}

struct oom {
	rix_repo *r;
};

static int oom_plan(void *arg)
{
	struct oom *o = arg;
	rix_prune_options po = RIX_PRUNE_OPTIONS_INIT;
	po.max_unused = RIX_PRUNE_UNUSED_BYTES;
	rix_prune_plan *p;
	int rc = rix_prune_plan_new(&p, o->r, &po);
	rix_prune_plan_free(p);
	return rc;
}

static void test_oom(void **state)
{
	(void)state;
	struct fix f;
	make_fix(&f);
	struct oom o = { .r = open_loaded(f.repo) };
	rix_test_oom oo = { .what = "prune plan", .run = oom_plan, .arg = &o, .max = 5000,
			    .live = RIX_TEST_OOM_LIVE_UNCHECKED }; /* the repository's codecs and buffers stay */
	rix_test_oom_run(&oo);
	rix_repo_free(o.r);
	free_fix(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse),
		cmocka_unit_test(test_plan_and_run),
		cmocka_unit_test(test_duplicates_and_unreferenced),
		cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_disk_full_while_repacking),
		cmocka_unit_test(test_stored_copy),
		cmocka_unit_test(test_repack_forms),
		cmocka_unit_test(test_repack_damaged),
		cmocka_unit_test(test_oom),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
